"""How a pack's workers run: in the calling thread, on threads, or on worker processes, with
their batches handed back strictly in list order and a bounded number in flight.

Also everything that keeps worker processes well-behaved: Ctrl-C left to the parent (and held
while workers start), a pool stopped in bounded time, a worker that died (out of memory, or a
spawned one that cannot start) turned into an error instead of a hang.

Apart from the pipeline (``recio.image.packing.pipeline``), which decides what to pack and writes
it, because this is the concurrency, and apart from the per-item work
(``recio.image.packing.worker``), which is what the workers run.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import warnings
from collections import deque
from contextlib import contextmanager
from multiprocessing.pool import Pool
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Protocol, Set

from PIL import Image

from recio import portable
from recio.errors import RecordIOError
from recio.image.packing.output import PackOutput
from recio.image.packing.worker import Outcome, PackJob, Task, encode_batch
from recio.image.pixels.transform import set_opencv_threads

class BatchSink(Protocol):
    """Where :func:`encode_in_order` hands each batch's outcomes, in list order: the pack's
    writer (``recio.image.packing.output.InOrderWriter``), whose ``out`` is aborted on an
    error."""

    out: PackOutput

    def write(self, outcomes: List[Outcome]) -> None: ...


#: the name prefix of a pack's threads (its worker threads and a pool's stopper)
PACK_THREAD = "recio-pack-"
#: how long a stopped pack waits for its worker threads to leave (each leaves after the image
#: it is on; only one stuck reading a file, or inside an image that takes longer, stays)
STOP_WAIT = 5.0

#: this process's pack threads that have not ended (see pack_threads_running)
_running: Set[threading.Thread] = set()
_running_lock = threading.Lock()


def pack_threads_running() -> int:
    """How many of this process's pack threads have not ended: worker threads a stopped pack
    left behind (stuck reading a file, or still inside OpenCV), or a pool's stopper.

    A process must not go through Python's shutdown while one of them is inside OpenCV: the
    interpreter ends such a daemon thread by unwinding its C++ frames, which aborts the
    process ("terminate called without an active exception"). Counted by the threads
    themselves: ``Thread.is_alive()`` cannot be trusted after a Ctrl-C. On Python 3.9 to 3.12
    a KeyboardInterrupt raised while ``Thread.join`` waits makes it release the lock the
    running thread holds and mark that thread stopped (the bpo-45274 handling in
    ``Thread._wait_for_tstate_lock``): it runs on, but ``join`` returns at once and
    ``is_alive()`` says False."""
    with _running_lock:
        return len(_running)


def _start_thread(target: Any, name: str) -> threading.Event:
    """Start ``target`` on a daemon pack thread, counted by :func:`pack_threads_running` until
    it ends; returns an event set when it has ended (waiting on it, unlike ``join``, stays
    right when a Ctrl-C interrupts the wait)."""
    ended = threading.Event()

    def run() -> None:
        try:
            target()
        finally:
            with _running_lock:
                _running.discard(thread)
            ended.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    with _running_lock:
        _running.add(thread)
    try:
        thread.start()
    except Exception:  # it could not start (no more threads): it will not count itself out
        with _running_lock:
            _running.discard(thread)
        ended.set()
        raise
    # (a Ctrl-C during start() leaves it counted: it has most likely started, and a count
    # too many only makes the CLI leave without Python's shutdown, which is always safe)
    return ended


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


def encode_in_order(job: PackJob, tasks: Iterator[Task], sink: BatchSink) -> None:
    """Encode ``tasks`` in batches (in this thread, on ``workers`` threads, or on ``workers``
    processes with at most ``window`` batches in flight: ``job.settings``) and hand every
    batch to ``sink`` in list order.

    On any error or Ctrl-C the workers are stopped at once and the output is aborted, which
    keeps the partial files for ``resume``.
    """
    settings = job.settings
    workers, kind = settings.workers, settings.executor_kind
    batch_size = settings.batch_size or (8 if workers > 1 and kind == "process" else 4)
    window = settings.window or 4 * workers
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
                        sink.write(_outcomes(pending.popleft(), started, sink.out.paths.lst))
                while pending:
                    sink.write(_outcomes(pending.popleft(), started, sink.out.paths.lst))
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
    if not _start_thread(pool.terminate, f"{PACK_THREAD}stop").wait(STOP_WAIT):
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
    error or Ctrl-C stops them after the image each is on, and the caller gets the error once
    they have left (at most ``STOP_WAIT`` seconds: one stuck reading a file is left behind,
    counted by :func:`pack_threads_running`), so a program that ends on it never goes through
    Python's shutdown with one of them inside OpenCV.
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
        self.running = 0  # threads started that have not left _work

    def run(self) -> None:
        try:
            for i in range(self.workers):
                with self.state:
                    self.running += 1
                try:
                    _start_thread(self._work, f"{PACK_THREAD}{i}")
                except Exception:
                    self._left()
                    raise
            with self.state:
                while self.running:
                    self.state.wait(0.25)  # short waits: Ctrl-C reaches this thread (Windows)
        except BaseException as exc:
            self._fail(exc)
            # each thread leaves after the image it is on (a batch being written is finished)
            deadline = time.monotonic() + STOP_WAIT
            with self.state:
                while self.running and time.monotonic() < deadline:
                    self.state.wait(max(0.0, deadline - time.monotonic()))
            raise
        if self.failure is not None:
            raise self.failure

    def _fail(self, exc: BaseException) -> None:
        with self.state:
            if self.failure is None:
                self.failure = exc
            self.state.notify_all()

    def _left(self) -> None:
        with self.state:
            self.running -= 1
            self.state.notify_all()

    def _stopping(self) -> bool:
        return self.failure is not None

    def _work(self) -> None:
        try:
            self._take_and_encode()
        finally:
            self._left()

    def _take_and_encode(self) -> None:
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
                outcomes = encode_batch(self.job, batch, stop=self._stopping)
                with self.state:
                    if self.failure is not None:  # the batch may be cut short: never write it
                        return
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


