"""SIGTERM stops a command as Ctrl-C does: its writers discard (or keep a pack's progress for
``--resume``) and it exits with status 143, not mid-write with its temporary files left behind.

A preempted node or a scheduler's time limit sends SIGTERM; Python's default would end the
process at once. Every command runs under :func:`sigterm_interrupts` (``handle_errors``), which
turns it into :class:`Terminated`, a ``KeyboardInterrupt``, so the same ``with`` blocks and
``except`` clauses that handle Ctrl-C run.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Any, Iterator, Optional

#: the exit status after SIGTERM (128 + 15, what a shell reports for a process it ended)
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (a preempted node, a scheduler's time limit): stops a command as Ctrl-C does."""


class SigtermSeen:
    """Whether :func:`sigterm_interrupts`' handler ran: Ray turns any KeyboardInterrupt
    raised while its driver waits (``ray.get``, ``ray.wait``) into a plain one, so the type
    of the exception that arrives cannot tell SIGTERM from Ctrl-C."""

    seen = False


@contextmanager
def sigterm_interrupts(seen: Optional[SigtermSeen] = None) -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread inside the block, so the command
    stops as on Ctrl-C instead of vanishing mid-write; it sets ``seen.seen`` first. Outside
    the main thread (an embedding application) SIGTERM is left alone."""
    def on_term(signum: int, frame: Any) -> None:
        if seen is not None:
            seen.seen = True
        raise Terminated()
    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: leave it alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
