"""The commands' entry: what ``python -m recio``, ``python -m recio.im2rec`` and the ``recio`` /
``im2rec`` console scripts run first.

This module stays light (no click, NumPy or OpenCV): :func:`run_command`, what the entry points
call, imports a command's module only once it can answer a Ctrl-C during that import."""
import _thread
import importlib
import signal
import sys
import threading
from types import FrameType
from typing import Any, NoReturn, Optional


def run_command(module: str) -> None:
    """Run the command whose entry is ``module``'s ``main()`` (``recio.cli.im2rec``), as the
    console scripts and ``python -m`` do, so that a Ctrl-C at any moment ends it with
    "Interrupted." and exit status 130, never a traceback:

    * inside the command (``handle_errors``), a KeyboardInterrupt, which the command answers
      (a pack says what it kept);
    * while it loads its modules (NumPy, OpenCV, click: half a second or more), whatever the
      import it stopped made of it: Python 3.11 wraps a KeyboardInterrupt raised while a class
      is made in a RuntimeError, and drops one raised in a finalizer (importlib runs a weakref
      callback after every import) with an "Exception ignored" traceback;
    * in click's own code around the command (parsing the arguments), which would turn a
      KeyboardInterrupt into "Aborted!" and status 1: it exits at once;
    * once the command is done, Ctrl-C is ignored for the rest of the interpreter's exit: it
      can no longer turn a finished command into a traceback from an exit handler, or into a
      process killed by SIGINT (Python's own handler is gone by the end of its shutdown).

    A KeyboardInterrupt raised inside a finalizer later on, which Python would print and drop,
    is raised again once the finalizer is over.
    """
    ctrl_c = _CtrlC.install()
    try:
        try:
            main = importlib.import_module(module).main
        except BaseException as exc:
            if not (ctrl_c.seen or isinstance(exc, KeyboardInterrupt)):
                raise
            raise _Stop from None
        if ctrl_c.seen:  # its KeyboardInterrupt was dropped in a finalizer
            raise _Stop
        ctrl_c.loading = False
        try:
            main()
        except Exception as exc:
            if not (ctrl_c.seen and _comes_from_ctrl_c(exc)):
                raise
            raise _Stop from None
    except _Stop:
        if ctrl_c.installed:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        _say_interrupted()
    finally:
        if ctrl_c.installed:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            # A KeyboardInterrupt that went through the code of a module being imported left
            # CPython's note that one reached the top (handled or not, it is not cleared):
            # under ``python -m`` the process would then end by killing itself with SIGINT
            # instead of exiting with the command's status. Running any code clears the note.
            exec("")


class _Stop(SystemExit):
    """A Ctrl-C that ends the command at once (click does not catch SystemExit)."""


class _CtrlC:
    """A command's SIGINT handler and the ``sys.unraisablehook`` in front of Python's (see
    :func:`run_command`)."""

    def __init__(self, installed: bool) -> None:
        self.installed = installed
        self.seen = False
        self.loading = True  # the command's modules are being imported
        self.hook: Any = sys.unraisablehook

    @classmethod
    def install(cls) -> "_CtrlC":
        """Install it where Ctrl-C raises KeyboardInterrupt: in the main thread, unless the
        command was started with Ctrl-C ignored (in the background), which it keeps."""
        ctrl_c = cls(threading.current_thread() is threading.main_thread()
                     and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        if ctrl_c.installed:
            signal.signal(signal.SIGINT, ctrl_c.on_sigint)
            sys.unraisablehook = ctrl_c.on_unraisable
        return ctrl_c

    def on_sigint(self, signum: int, frame: Optional[FrameType]) -> None:
        self.seen = True
        if self.loading or _in_command(frame):
            raise KeyboardInterrupt
        raise _Stop

    def on_unraisable(self, unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, (KeyboardInterrupt, _Stop)):
            self.hook(unraisable)
        elif not self.loading:  # (while loading, run_command sees it in self.seen)
            # raise it again once the finalizer is over: from another thread, as a signal would
            timer = threading.Timer(0.01, _thread.interrupt_main)
            timer.daemon = True
            timer.start()


def _in_command(frame: Optional[FrameType]) -> bool:
    """Whether ``frame`` runs inside a command (``handle_errors``, which answers Ctrl-C)."""
    from recio.cli.common import handle_errors

    inside = handle_errors(_in_command).__code__  # the code of every command's wrapper
    while frame is not None:
        if frame.f_code is inside:
            return True
        frame = frame.f_back
    return False


def _comes_from_ctrl_c(exc: Optional[BaseException]) -> bool:
    """Whether ``exc`` is, or was raised while handling or because of, a Ctrl-C's exception."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (KeyboardInterrupt, _Stop)):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _say_interrupted() -> NoReturn:
    """What a command does on Ctrl-C (``handle_errors``: "Interrupted.", status 130)."""
    from recio.cli.common import handle_errors

    def stop() -> NoReturn:
        raise KeyboardInterrupt

    handle_errors(stop)()
    raise AssertionError("handle_errors exits on KeyboardInterrupt")  # pragma: no cover
