"""ThreadedIter: bounded prefetch, errors carried to the consumer, reset, and no leaked threads."""
import gc
import queue
import threading
import traceback
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recio.records import ThreadedIter
from recio.records import threaded
def _alive(it):
    t = it.thread
    return t is not None and t.is_alive()


def _threads_named(name):
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


@settings(deadline=None, max_examples=30)
@given(st.lists(st.integers()), st.integers(min_value=1, max_value=5))
def test_yields_everything_in_order(items, capacity):
    with ThreadedIter(items, capacity=capacity) as it:
        assert list(it) == items
        assert list(it) == []  # exhausted stays exhausted


def test_callable_source_and_reset_restarts():
    calls = []

    def make():
        calls.append(1)
        return iter(range(5))

    it = ThreadedIter(make, capacity=2)
    assert next(it) == 0 and it.next() == 1
    it.reset()
    assert list(it) == [0, 1, 2, 3, 4]
    it.reset()
    assert list(it) == [0, 1, 2, 3, 4]
    assert len(calls) == 3
    it.close()
    assert not _alive(it)


class _FullQueueProbe(queue.Queue):
    """The producer's queue, reporting each item it holds while the queue is full (blocked)."""

    def __init__(self, maxsize):
        super().__init__(maxsize)
        self.blocked_on = queue.Queue()  # item the producer holds, once per item
        self._last = None

    def put(self, message, block=True, timeout=None):
        _, item = message  # (kind, item): the producer's messages
        if self.full() and item != self._last:
            self._last = item
            self.blocked_on.put(item)
        super().put(message, block, timeout)


@pytest.mark.parametrize("capacity", [1, 3])
def test_capacity_bounds_how_far_the_producer_runs(monkeypatch, capacity):
    """While the consumer waits, the producer pulls exactly capacity + 1 items past it (capacity
    queued, one in hand) and then blocks: checked at each point where the queue is full, which
    is a state the consumer freezes, not a moment chosen by a clock."""
    probes = []

    def probe(maxsize):
        probes.append(_FullQueueProbe(maxsize))
        return probes[-1]

    monkeypatch.setattr(threaded, "queue", SimpleNamespace(Queue=probe, Full=queue.Full,
                                                           Empty=queue.Empty))
    pulled = []

    def gen():
        for i in range(100):
            pulled.append(i)
            yield i

    with ThreadedIter(gen, capacity=capacity) as it:
        (probe_queue,) = probes
        for consumed in range(6):
            try:
                held = probe_queue.blocked_on.get(timeout=60)  # a hang guard, not a deadline
            except queue.Empty:
                pytest.fail(f"the producer never blocked on a full queue after {consumed} items")
            assert held == consumed + capacity
            assert len(pulled) == consumed + capacity + 1
            assert next(it) == consumed
        assert list(it) == list(range(6, 100))


class Boom(RuntimeError):
    pass


def _failing_source():
    yield 1
    yield 2
    raise Boom("bad record 3")


def test_producer_exception_surfaces_with_type_and_traceback():
    it = ThreadedIter(_failing_source, capacity=4)
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(Boom, match="bad record 3") as info:
        next(it)
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "_failing_source" in frames  # the producer's frame is in the traceback
    with pytest.raises(StopIteration):
        next(it)
    assert not _alive(it)
    it.reset()  # the source can be restarted after an error
    assert next(it) == 1
    it.close()


def test_close_stops_a_blocked_producer():
    it = ThreadedIter(lambda: iter(range(10**9)), capacity=2, name="recio-test-close")
    assert next(it) == 0
    thread = it.thread
    it.close()
    assert not thread.is_alive()
    assert list(it) == []
    it.close()  # idempotent


def test_with_block_and_early_break_leave_no_thread():
    with ThreadedIter(lambda: iter(range(10**9)), capacity=2) as it:
        for x in it:
            if x == 3:
                break
        thread = it.thread
    assert not thread.is_alive()


@pytest.mark.slow
def test_garbage_collection_stops_the_thread():
    name = "recio-test-gc"

    def consume_a_little():
        it = ThreadedIter(lambda: iter(range(10**9)), capacity=2, name=name)
        next(it)
        return it.thread

    thread = consume_a_little()
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()
    assert _threads_named(name) == []


def test_generator_finally_runs_on_close():
    cleaned = threading.Event()

    def gen():
        try:
            for i in range(10**9):
                yield i
        finally:
            cleaned.set()

    it = ThreadedIter(gen, capacity=1)
    next(it)
    it.close()
    assert cleaned.wait(5)


def test_one_shot_iterator_cannot_reset():
    it = ThreadedIter(iter([1, 2, 3]), capacity=1)
    assert list(it) == [1, 2, 3]
    with pytest.raises(TypeError, match="one-shot"):
        it.reset()
    it.close()


def test_bad_capacity():
    with pytest.raises(ValueError, match="capacity"):
        ThreadedIter([1], capacity=0)


def test_no_hang_at_interpreter_exit(tmp_path):
    import subprocess
    import sys
    code = ("from recio.records import ThreadedIter\n"
            "it = ThreadedIter(lambda: iter(range(10**9)), capacity=2)\n"
            "print(next(it))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
