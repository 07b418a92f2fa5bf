"""Helpers shared by several test modules."""
import signal
from contextlib import contextmanager


@contextmanager
def hang_guard(seconds=30):
    """Fail instead of hanging forever (a generous bound, not a speed test)."""
    def on_alarm(*_):
        raise TimeoutError(f"did not finish within {seconds} s")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
