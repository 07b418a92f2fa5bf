"""``im2rec --engine ray``: the parts of a pack packed as Ray tasks.

Each part (one shard's range of the list, ``recio.image.packing.parts``) is one Ray task running
``pack_part``, the same function the local engine runs. A task that dies (its worker process
killed, its node lost) or fails with an ``OSError`` (an I/O or network error) is run again, up to
``max_retries`` times, elsewhere if its node is gone; every attempt writes files of its own
with the same bytes, so a retry cannot change the output. Each attempt records where and when it started, so the
driver reports the retries and the time they cost (``PackResult.retried``,
``seconds_lost``). Any other error, or retries exhausted, fails the job: no more tasks are
submitted, the ones in flight run to their end (their parts are kept for a resume) and
nothing is published.

Ctrl-C or SIGTERM stops the driver at once: its tasks end with it (Ray stops the tasks of a
driver that is gone). The parts done so far are in the staging folder, so ``--resume`` (on any
cluster, local or not) continues; so it does after the driver was killed outright.

The driver keeps at most ``max_in_flight`` parts submitted (twice the cluster's CPUs by
default), so the list's items reach the object store a few parts at a time, and reports
progress as parts finish. The workers need recio (and its extras for URLs) installed and the
images and outputs reachable by the same paths or URLs: a shared file system or a bucket.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any, Dict, Iterator, Optional

from recio.errors import StorageError
from recio.image.packing.pipeline import NothingFoundError, ProgressCallback
from recio.image.packing.parts import ListPart, PartJob, PartResult, pack_part, part_failed
from recio.optional import require

#: ``ray.init`` arguments for a local instance started by recio: no dashboard, quiet logs
_LOCAL_INIT: Dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                               "log_to_driver": False}


def connect(address: Optional[str] = None, **init_options: Any) -> Any:
    """The ``ray`` module, connected: to the running Ray instance if this process already
    is, else to ``address`` (``auto``, ``HOST:PORT``, ``ray://host:10001``, or
    ``RAY_ADDRESS``), else to a new local instance on this machine (no dashboard; never a
    cluster some ``ray start`` left running: ask for that one with ``auto``).
    ``init_options`` go to ``ray.init``."""
    ray = require("ray", feature="recio.ray (Ray engine and Ray Data)")
    if not ray.is_initialized():
        options = dict(_LOCAL_INIT)
        options.update(init_options)
        on_term = signal.getsignal(signal.SIGTERM)
        try:
            ray.init(address=address or os.environ.get("RAY_ADDRESS") or "local", **options)
        except SystemExit as exc:
            # ray.init first sets a SIGTERM handler of its own, sys.exit(15): a SIGTERM while
            # it connects is the caller's (im2rec's: say so, keep the progress, exit 143)
            if (callable(on_term) and exc.code == signal.SIGTERM
                    and threading.current_thread() is threading.main_thread()):
                signal.signal(signal.SIGTERM, on_term)
                on_term(signal.SIGTERM, None)
            raise
        if callable(on_term) and threading.current_thread() is threading.main_thread():
            # Ray's driver installs a crash reporter for SIGTERM in C, over the Python
            # handler the caller had (im2rec's: stop and keep the progress); put it back
            signal.signal(signal.SIGTERM, on_term)
    return ray


def messages_to_stderr() -> None:
    """Send the messages a Ray driver prints about the cluster (a task retried because its
    node died, a worker killed for memory) to stderr instead of stdout, for a command whose
    stdout is its result (``im2rec --json``). Ray prints them from a thread of its own, through
    ``ray._private.worker.print_to_stdstream``; without that function (another Ray) nothing
    changes."""
    try:
        from ray._private import worker
        original = worker.print_to_stdstream
    except (ImportError, AttributeError):
        return
    if getattr(original, "recio_to_stderr", False):
        return

    def to_stderr(data: Dict[str, Any], ignore_prefix: bool) -> None:
        original(dict(data, is_err=True), ignore_prefix)
    to_stderr.recio_to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def _pack_part_task(part: ListPart, job: PartJob) -> PartResult:
    import ray

    node = ray.get_runtime_context().get_node_id()
    return pack_part(part, job, where=f"node {node[:12]}")


class RayEngine:
    """Runs each part as one Ray task (``num_cpus`` = the job's ``workers``, the threads a
    task encodes with). ``address``: the cluster (``connect``); ``max_retries``: runs of a
    task after its first that a crash or an ``OSError`` may cost; ``max_in_flight``: parts
    submitted at once (default: twice the cluster's CPUs); ``ray_remote_args``: more options
    for the tasks (``resources``, ``scheduling_strategy``, ``runtime_env``)."""

    name = "ray"

    def __init__(self, address: Optional[str] = None, *, max_retries: int = 3,
                 max_in_flight: Optional[int] = None,
                 ray_remote_args: Optional[Dict[str, Any]] = None,
                 init_options: Optional[Dict[str, Any]] = None) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.address, self.max_retries, self.max_in_flight = address, max_retries, max_in_flight
        self.ray_remote_args = dict(ray_remote_args or {})
        self.init_options = dict(init_options or {})

    def parallelism(self) -> int:
        """Parts for a pack without shards: four per CPU of the cluster, so that the last
        wave of tasks leaves few CPUs idle."""
        ray = connect(self.address, **self.init_options)
        return 4 * max(1, int(ray.cluster_resources().get("CPU", 1)))

    def run(self, parts: Iterator[ListPart], job: PartJob,
            progress: Optional[ProgressCallback]) -> Iterator[PartResult]:
        ray = connect(self.address, **self.init_options)
        options: Dict[str, Any] = {"num_cpus": job.settings.workers,
                                   "max_retries": self.max_retries,
                                   "retry_exceptions": [OSError, StorageError]}
        options.update(self.ray_remote_args)
        task = ray.remote(_pack_part_task)
        window = self.max_in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        job_ref = ray.put(job)
        pending: Dict[Any, ListPart] = {}
        done = total = 0
        try:
            for part in parts:
                named = task.options(**{"name": f"recio-pack-shard-{part.number}", **options})
                pending[named.remote(part, job_ref)] = part
                total = part.list_total
                while len(pending) >= window:
                    result = self._next(ray, pending, job)
                    done += result.items
                    if progress is not None:
                        progress(done, total)
                    yield result
            while pending:
                result = self._next(ray, pending, job)
                done += result.items
                if progress is not None:
                    progress(done, total)
                yield result
        except Exception:  # an error, or the caller stopped early: let the tasks end
            if pending:
                _drain(ray, list(pending))
            raise

    @staticmethod
    def _next(ray: Any, pending: Dict[Any, ListPart], job: PartJob) -> PartResult:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        part = pending.pop(ref)
        try:
            return ray.get(ref)
        except Exception as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, NothingFoundError):
                raise cause from None
            raise part_failed(part, job, cause if isinstance(cause, BaseException)
                              else _ray_reason(exc)) from None


def _drain(ray: Any, refs: list) -> None:
    """Let the tasks still in flight after a failure run to their end (at most one wave,
    ``max_in_flight`` tasks): their parts are kept for a resume, and none writes into the
    staging folder after the driver returned. No cancel: a cancel racing a task's completion
    can abort the driver in Ray 2.60 (a failed check, "it != submissible_tasks_.end()",
    ray-project/ray#54738). Ctrl-C or SIGTERM while waiting stops the driver at once."""
    try:
        ray.wait(refs, num_returns=len(refs), timeout=None)
    except Exception:  # the cluster is gone: nothing left to wait for
        pass


def _ray_reason(exc: BaseException) -> BaseException:
    """A one-line reason for a Ray error without a Python cause (a worker that died)."""
    text = " ".join(str(exc).split())
    kind = type(exc).__name__
    if "died" in text or "crash" in kind.lower() or "WorkerCrashed" in kind:
        return RuntimeError(f"its worker died ({kind}) on every attempt")
    return RuntimeError(f"{kind}: {text[:200]}")
