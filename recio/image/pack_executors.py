"""How a pack's workers run: in the calling thread, on threads, or on worker processes, with
their batches handed back strictly in list order and a bounded number in flight.

Also everything that keeps worker processes well-behaved: Ctrl-C left to the parent (and held
while workers start), a pool stopped in bounded time, a worker that died (out of memory, or a
spawned one that cannot start) turned into an error instead of a hang.

Apart from the pipeline (``recio.image.packing``), which decides what to pack and writes it,
because this is the concurrency, and apart from the per-item work
(``recio.image.pack_worker``), which is what the workers run.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import warnings
from collections import deque
from contextlib import contextmanager
from multiprocessing.pool import Pool
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Protocol

from PIL import Image

from recio import portable
from recio.errors import RecordIOError
from recio.image.pack_output import PackOutput
from recio.image.pack_worker import Outcome, PackJob, Task, encode_batch
from recio.image.transform import set_opencv_threads

#: how workers run: threads share one process (the decoders, OpenCV and NumPy's large array
#: operations release the GIL while they decode, resize and encode; how far two threads scale
#: in each mode is measured by benchmarks/bench_im2rec.py); processes avoid the GIL entirely.
#: "auto" means threads:
#: the same CPU time per image without pickling, and less memory (measurements in
#: benchmarks/README.md).
EXECUTORS = ("auto", "thread", "process")
AUTO_EXECUTOR = "thread"


class BatchSink(Protocol):
    """Where :func:`encode_in_order` hands each batch's outcomes, in list order: the pipeline's
    writer (``recio.image.packing``), whose ``out`` is aborted on an error."""

    out: PackOutput

    def write(self, outcomes: List[Outcome]) -> None: ...


#: the name prefix of a pack's worker threads (the CLI looks for them when a pack stops)
PACK_THREAD = "recio-pack-"


def check_workers(workers: int, executor: str) -> None:
    """ValueError unless ``executor`` is one of ``EXECUTORS`` and ``workers`` at least 1."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")


def _init_process_worker(parent: int) -> None:
    """Worker processes leave Ctrl-C to the parent, which stops them cleanly; SIGTERM (how
    the parent stops them) ends them, whatever handler they inherited. On Linux a worker also
    ends with its parent (``PR_SET_PDEATHSIG``): a parent killed with SIGKILL cannot stop its
    workers, which would otherwise decode on and print a broken-pipe traceback to the user's
    terminal when they hand back their batch."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    portable.release_signal(signal.SIGINT)  # held since it started (_ctrl_c_held); now ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    portable.end_with_parent(parent)
    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
    set_opencv_threads(1)  # a worker process of ours: keep the limit for its lifetime


@contextmanager
def _ctrl_c_held(context: Any) -> Iterator[None]:
    """Hold Ctrl-C (SIGINT blocked, POSIX) while worker processes of ``context`` start. A
    terminal's Ctrl-C reaches the workers too, and a spawned worker (Windows', macOS's default)
    spends its first half second importing Python's and recio's modules before
    ``_init_process_worker`` can ignore it: a KeyboardInterrupt there printed its traceback to
    the terminal. The block is inherited across fork and exec and lifted by each worker once it
    ignores SIGINT; this process gets a Ctrl-C that came meanwhile as soon as the workers have
    started. (Windows has no signal mask; there a console's Ctrl-C reaches a starting worker.
    Under ``forkserver`` the workers are the server's children and do not inherit it.)"""
    if not portable.has_signal_mask():
        yield
        return
    if context.get_start_method() != "fork":
        # multiprocessing's resource tracker, started with the first spawned worker, unblocks
        # SIGINT after it starts itself: start it first
        from multiprocessing import resource_tracker
        resource_tracker.ensure_running()
    previous = portable.hold_signal(signal.SIGINT)
    try:
        yield
    finally:
        portable.restore_signal_mask(previous)


def _batched(tasks: Iterable[Task], size: int) -> Iterator[List[Task]]:
    batch: List[Task] = []
    for task in tasks:
        batch.append(task)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def encode_in_order(job: PackJob, tasks: Iterator[Task], workers: int, kind: str,
                    batch_size: int, window: int, sink: BatchSink) -> None:
    """Encode ``tasks`` in batches (in this thread, on ``workers`` threads, or on ``workers``
    processes with at most ``window`` batches in flight) and hand every batch to ``sink`` in
    list order.

    On any error or Ctrl-C the workers are stopped at once and the output is aborted, which
    keeps the partial files for ``resume``.
    """
    pool: Optional[Pool] = None
    others: set = set()  # the children this process had before the pool's
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            if workers == 1:
                for batch in _batched(tasks, batch_size):
                    sink.write(encode_batch(job, batch))
            elif kind == "thread":
                _ThreadPipeline(job, tasks, workers, batch_size, window, sink).run()
            else:
                # a multiprocessing pool, not concurrent.futures: terminate() kills the workers
                # at once on Ctrl-C, even one stuck reading a file
                context = multiprocessing.get_context()
                others = set(multiprocessing.active_children())
                with _ctrl_c_held(context):  # assigned inside: a Ctrl-C held here finds the pool
                    pool = context.Pool(workers, _init_process_worker, (os.getpid(),))
                started = [p for p in multiprocessing.active_children() if p not in others]
                pending: Deque = deque()
                for batch in _batched(tasks, batch_size):
                    pending.append(pool.apply_async(encode_batch, (job, batch)))
                    if len(pending) >= window:
                        sink.write(_outcomes(pending.popleft(), started, sink.out.lst_path))
                while pending:
                    sink.write(_outcomes(pending.popleft(), started, sink.out.lst_path))
    except BaseException:
        if pool is not None:
            _stop_pool(pool, others)
        sink.out.abort()
        raise  # the partial files stay for resume
    if pool is not None:
        pool.close()
        pool.join()


def _outcomes(result: Any, workers: List[Any], lst_path: str) -> List[Outcome]:
    """A batch's outcomes from the pool's ``result``; RecordIOError as soon as one of the
    pool's first ``workers`` (the children this process started with the pool) has failed:
    the batch it held never comes back, and multiprocessing's pool, which replaces the
    worker, would wait for it for ever. A worker killed by the OS (out of memory), or a
    spawned one that cannot start: it runs the main module first, and a script that packs
    without ``if __name__ == "__main__":`` packs again there (and fails, as this pack holds
    the lock) in every worker the pool starts."""
    while True:
        try:
            return result.get(timeout=0.2)
        except multiprocessing.TimeoutError:
            # exit status 0 is no failure: a pool's worker ends so only when the pool closes
            ended = [w.exitcode for w in workers if w.exitcode]
            if ended:
                raise _worker_ended(ended[0], lst_path) from None


def _stop_pool(pool: Pool, others: set) -> None:
    """``pool.terminate()``, but bounded: it first takes the lock of the pool's task queue,
    which a worker process that died holding it never gives back (seen when every worker was
    killed mid-pack). After 5 s the pool's workers (this process's children but ``others``)
    are killed directly, and the stuck daemon thread is left to end with the process."""
    stopper = threading.Thread(target=pool.terminate, name=f"{PACK_THREAD}stop", daemon=True)
    stopper.start()
    stopper.join(5.0)
    if stopper.is_alive():
        for worker in set(multiprocessing.active_children()) - others:
            worker.kill()
            worker.join(5.0)


def _worker_ended(exitcode: int, lst_path: str) -> RecordIOError:
    """The error of a pack whose worker process ended with ``exitcode``."""
    if exitcode < 0:
        how = f"was killed by signal {-exitcode}"
        if -exitcode == getattr(signal, "SIGKILL", None):
            how += " (out of memory?)"
    else:
        how = f"exited with status {exitcode}"
    method = multiprocessing.get_start_method()
    hint = "" if method == "fork" else (
        f"; a worker process started by {method} first runs the main module: a script that "
        f"packs on worker processes must start the pack inside if __name__ == \"__main__\"")
    return RecordIOError(f"a worker process {how} before its images were packed{hint}; the "
                         f"partial output is kept (resume=True, --resume continues it)",
                         path=lst_path)


class _ThreadPipeline:
    """Thread workers that do all of a pack's work themselves: each takes the next batch of list
    items (parsing the list as it goes), encodes it, and the one whose batch is next in list
    order writes it, and any finished batches after it, to ``sink``.

    The calling thread only waits. So on ``workers`` cores exactly ``workers`` threads are
    busy, and the thread holding the GIL is never one the OS has set aside for a third (a
    separate writer thread would be). A batch more than ``window`` batches ahead of the
    writing waits before it is encoded, which bounds memory. The threads are daemons: an
    error or Ctrl-C stops them after their current batch, or leaves one stuck reading a file
    behind.
    """

    def __init__(self, job: PackJob, tasks: Iterator[Task], workers: int, batch_size: int,
                 window: int, sink: BatchSink) -> None:
        self.job, self.workers = job, workers
        self.batches = _batched(tasks, batch_size)
        self.batch_size, self.window, self.sink = batch_size, max(window, 1), sink
        self.take_lock = threading.Lock()
        self.state = threading.Condition()
        self.next_batch = 0  # the number the next batch taken gets
        self.next_write = 0  # the number of the batch to write next
        self.finished: Dict[int, List[Outcome]] = {}
        self.writing = False
        self.failure: Optional[BaseException] = None

    def run(self) -> None:
        threads = [threading.Thread(target=self._work, name=f"{PACK_THREAD}{i}", daemon=True)
                   for i in range(self.workers)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.25)  # short waits: Ctrl-C reaches this thread
        except BaseException as exc:
            self._fail(exc)
            for thread in threads:  # let a batch being written finish before the abort
                thread.join(2.0)
            raise
        if self.failure is not None:
            raise self.failure

    def _fail(self, exc: BaseException) -> None:
        with self.state:
            if self.failure is None:
                self.failure = exc
            self.state.notify_all()

    def _work(self) -> None:
        try:
            while self.failure is None:
                with self.take_lock:
                    batch = next(self.batches, None)
                    number = self.next_batch
                    self.next_batch += 1
                if batch is None:
                    return
                with self.state:
                    while number - self.next_write >= self.window and self.failure is None:
                        self.state.wait()
                outcomes = encode_batch(self.job, batch)
                with self.state:
                    self.finished[number] = outcomes
                self._write_ready()
        except BaseException as exc:  # handed to run(), which raises it in the caller
            self._fail(exc)

    def _write_ready(self) -> None:
        """Write the finished batches that are next in order, unless another thread is."""
        while True:
            with self.state:
                if self.writing or self.failure is not None \
                        or self.next_write not in self.finished:
                    return
                self.writing = True
                outcomes = self.finished.pop(self.next_write)
            try:
                self.sink.write(outcomes)
            finally:
                with self.state:
                    self.writing = False
                    self.next_write += 1
                    self.state.notify_all()


__all__ = ["EXECUTORS", "AUTO_EXECUTOR", "BatchSink", "check_workers", "encode_in_order"]
