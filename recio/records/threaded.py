"""``ThreadedIter``: run an iterator in a background thread, a bounded number of items ahead.

The Python counterpart of dmlc-core's ``ThreadedIter`` (``include/dmlc/threadediter.h``): a
producer thread fills a bounded queue while the consumer works on earlier items, so reading and
decoding overlap with training. The contract:

- at most ``capacity`` finished items wait in the queue (memory is bounded);
- an exception raised by the source is re-raised in the consumer with its original type and the
  producer's traceback, at the position in the stream where it happened;
- ``reset()`` stops the producer and starts again from a fresh iterator over the source;
- ``close()``, leaving a ``with`` block, garbage collection and interpreter exit all stop the
  thread. The thread is a daemon and never holds a reference to the ``ThreadedIter`` itself, so
  dropping the last reference (e.g. a consumer that ``break``s early) is enough to stop it.
"""
from __future__ import annotations

import queue
import threading
import weakref
from typing import Any, Callable, Generic, Iterable, Iterator, List, Optional, TypeVar, Union

T = TypeVar("T")

#: message kinds on the queue
_ITEM, _END, _ERROR = 0, 1, 2
#: how often (seconds) a producer blocked on a full queue checks whether it should stop
_POLL = 0.05
#: how long close() waits for a producer stuck inside the source before giving up on it
_JOIN_TIMEOUT = 5.0


class _Worker:
    """One producer thread, its queue and its stop flag (no reference back to the ThreadedIter)."""

    def __init__(self, iterator: Iterator[Any], capacity: int, name: str) -> None:
        self.queue: "queue.Queue" = queue.Queue(maxsize=capacity)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=_produce, name=name, daemon=True,
                                       args=(iterator, self.queue, self.stop_event))
        self.thread.start()

    def stop(self, timeout: float = _JOIN_TIMEOUT) -> None:
        """Ask the producer to stop, unblock it, and wait for it to finish."""
        self.stop_event.set()
        if threading.current_thread() is self.thread:  # GC ran in the producer itself
            return
        deadline_parts = max(1, int(timeout / _POLL))
        for _ in range(deadline_parts):
            self._drain()  # a producer blocked on put() sees room, then sees the stop flag
            self.thread.join(_POLL)
            if not self.thread.is_alive():
                break
        self._drain()

    def _drain(self) -> None:
        try:
            while True:
                self.queue.get_nowait()
        except queue.Empty:
            pass


def _put(q: "queue.Queue", stop: threading.Event, message: tuple) -> bool:
    """Put ``message`` unless asked to stop; True when it was queued."""
    while not stop.is_set():
        try:
            q.put(message, timeout=_POLL)
            return True
        except queue.Full:
            continue
    return False


def _produce(iterator: Iterator[Any], q: "queue.Queue", stop: threading.Event) -> None:
    """Thread body: move items from ``iterator`` to ``q`` until the end, an error or ``stop``."""
    try:
        try:
            for item in iterator:
                if not _put(q, stop, (_ITEM, item)):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            _put(q, stop, (_ERROR, exc))
            return
        _put(q, stop, (_END, None))
    finally:
        close = getattr(iterator, "close", None)  # run a generator's finally blocks here
        if close is not None:
            try:
                close()
            except Exception:  # an error while closing must not kill the thread
                pass


def _shutdown(box: List[Optional[_Worker]]) -> None:
    """Finalizer: stop the current worker (called by close(), GC and at interpreter exit)."""
    worker, box[0] = box[0], None
    if worker is not None:
        worker.stop()


class ThreadedIter(Generic[T]):
    """Iterate over ``source`` in a background thread, keeping up to ``capacity`` items ready.

    ``source`` is an iterable that can be iterated again (a list, a dataset object) or a
    zero-argument callable returning a fresh iterator; ``reset()`` needs one of those. A one-shot
    iterator (e.g. a generator object) works too but can only be reset if it has a ``reset()``
    method. Use it as an iterator and preferably as a context manager::

        with ThreadedIter(lambda: decode_all(path), capacity=4) as it:
            for item in it:
                ...
    """

    def __init__(self, source: Union[Iterable[T], Callable[[], Iterator[T]]],
                 capacity: int = 8, name: str = "recio-ThreadedIter") -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be at least 1 (got {capacity}): it is how many items "
                             "the producer may keep ready")
        self._source = source
        self._capacity = int(capacity)
        self._name = name
        self._box: List[Optional[_Worker]] = [None]
        self._finalizer = weakref.finalize(self, _shutdown, self._box)
        self._done = False
        self._started = False
        self._start()

    def _fresh_iterator(self) -> Iterator[T]:
        src = self._source
        if callable(src) and not hasattr(src, "__iter__"):
            return iter(src())
        it = iter(src)  # type: ignore[arg-type]
        if self._started and it is src:
            reset = getattr(src, "reset", None)
            if reset is None:
                raise TypeError("cannot reset a ThreadedIter over a one-shot iterator; pass a "
                                "list, a re-iterable object or a function returning an iterator")
            reset()
        return it

    def _start(self) -> None:
        iterator = self._fresh_iterator()
        self._started = True
        self._done = False
        self._box[0] = _Worker(iterator, self._capacity, self._name)

    @property
    def capacity(self) -> int:
        """Most items the producer keeps ready ahead of the consumer."""
        return self._capacity

    @property
    def thread(self) -> Optional[threading.Thread]:
        """The current producer thread (None once closed); exposed for tests and debugging."""
        worker = self._box[0]
        return None if worker is None else worker.thread

    def __iter__(self) -> "ThreadedIter[T]":
        return self

    def __next__(self) -> T:
        worker = self._box[0]
        if self._done or worker is None:
            raise StopIteration
        kind, value = worker.queue.get()
        if kind == _ITEM:
            return value
        self._done = True
        worker.thread.join(_JOIN_TIMEOUT)
        if kind == _ERROR:
            raise value  # original type; value.__traceback__ holds the producer's frames
        raise StopIteration

    def next(self) -> T:
        """The next item (MXNet/dmlc spelling of ``next(it)``)."""
        return self.__next__()

    def reset(self) -> None:
        """Stop the producer and start over from a fresh iterator over the source."""
        _shutdown(self._box)
        self._start()

    def close(self) -> None:
        """Stop the producer thread and drop queued items; iteration then ends. Idempotent."""
        self._done = True
        _shutdown(self._box)

    def __enter__(self) -> "ThreadedIter[T]":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
