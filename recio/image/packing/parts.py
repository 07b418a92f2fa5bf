"""A pack in parts, one part at a time: what a part is, its task, and the engines that run tasks.

A part is a range of list items (:class:`ListPart`); :func:`pack_part` packs one into staged
files of this attempt's own and writes its done record (``recio.image.packing.progress``); a task
that runs again writes exactly the same bytes. :class:`PartJob` is what every task needs besides
its items and :class:`PartResult` what it made; both travel between processes (pickled). An
:class:`Engine` runs tasks somewhere: :class:`LocalEngine` one after another in this process,
``recio.ray.RayEngine`` on a Ray cluster. :class:`Fault` injects failures into tasks, to test
retries. The driver that cuts the list, runs the parts and publishes them is
``recio.image.packing.shards``.
"""
from __future__ import annotations

import os
import socket
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Protocol, Tuple, Union, cast

import numpy as np

from recio import storage
from recio.errors import OutputWriteError, RecordIOError
from recio.image.packing.output import FoundChecks
from recio.image.packing.paths import PackPaths
from recio.image.packing.progress import PackProgress, attempt_token, part_name
from recio.image.packing.settings import PackSettings
from recio.image.packing.worker import Task, make_job
from recio.image.packing.pipeline import (
    NothingFoundError,
    PackResult,
    ProgressCallback,
    pack_tasks,
    resume_state,
)
from recio.records.atomic import atomic_open, publish_staged
from recio.records.index import open_index
from recio.records.manifest import RECORD_CHECKSUM_SUFFIX, Shard, file_crc32
from recio.records.reader import RecordReader
from recio.records.write_errors import is_write_only_error
from recio.storage import StorageOptions

#: the header line of ``PREFIX.errors.tsv``
ERRORS_HEADER = b"line\tindex\tpath\treason\n"
#: ``RECIO_FAULT_INJECTION``: a test hook (see :class:`Fault`)
FAULT_VARIABLE = "RECIO_FAULT_INJECTION"


class PartFailedError(RecordIOError):
    """One part of a pack could not be packed (after any retries): nothing was published. The
    message names the shard and its list lines; the parts that are done are kept for
    ``resume``."""


class _InjectedFault(OSError):
    """The failure a :class:`Fault` injects (an ``OSError``: engines retry it like a real I/O
    failure)."""


@dataclass(frozen=True)
class Fault:
    """A failure injected into the task of shard ``shard`` half way through its items, to test
    retries: ``mode`` ``"error"`` raises :class:`_InjectedFault`, ``"crash"`` ends the worker
    process at once (``os._exit``); on the first attempt only, or on every one (``always``).

    Parsed from ``RECIO_FAULT_INJECTION=MODE:SHARD[:always]`` (``crash:1``, ``error:0:always``)
    by the driver and handed to the tasks."""

    mode: str
    shard: int
    always: bool = False

    @classmethod
    def parse(cls, text: Optional[str]) -> Optional["Fault"]:
        if not text:
            return None
        fields = text.split(":")
        if len(fields) not in (2, 3) or fields[0] not in ("error", "crash") \
                or not fields[1].isdigit() or fields[2:] not in ([], ["always"]):
            raise ValueError(f"{FAULT_VARIABLE}={text!r}: expected MODE:SHARD[:always] with MODE "
                             "error or crash, e.g. crash:1")
        return cls(fields[0], int(fields[1]), fields[2:] == ["always"])


@dataclass(frozen=True)
class ListPart:
    """The items of one part: ``tasks`` are ``pack_list``'s ``(position, line number, item or
    None, why a malformed line was refused)``, in list order."""

    number: int
    tasks: Tuple[Task, ...]
    #: items in the whole list (the early "is ROOT right?" check of part 0 uses it)
    list_total: int

    @property
    def lines(self) -> str:
        """``"lines 12-40"`` of the list, for messages."""
        if not self.tasks:
            return "no lines"
        return f"list lines {self.tasks[0][1]}-{self.tasks[-1][1]}"


@dataclass(frozen=True)
class PartJob:
    """What every part's task needs besides its items (picklable: it travels to workers):
    the pack's settings, whole, and where the parts go."""

    root: str
    settings: PackSettings
    staging: str
    storage_options: StorageOptions = None
    fault: Optional[Fault] = None
    #: the list being packed (named by errors)
    list_path: str = ""
    #: the staging folder's job id, stamped on every done record
    job_id: str = ""
    #: this run of the driver (attempts at a part are counted per run)
    run: str = ""


@dataclass
class PartResult:
    """What one part's task made: its staged shard (``shard`` is None when every item was
    skipped), its counts and skip report, and where and how long it ran."""

    number: int
    items: int
    shard: Optional[Shard]
    result: PackResult
    #: ``.errors.tsv`` rows (without the header), in list order
    error_rows: bytes = b""
    first_missing: Optional[str] = None
    #: when the task started (``time.time()`` on its host) and how long it ran
    started: float = 0.0
    seconds: float = 0.0
    host: str = ""
    pid: int = 0
    #: this attempt's number in this run of the driver (1: the first)
    attempt: int = 1
    #: where the engine ran it (Ray: the node)
    where: str = ""
    #: seconds from the start of this run's first attempt at the part to the start of this
    #: one: the time the failed attempts cost (0 for a first attempt)
    lost: float = 0.0
    #: where the failed attempts ran
    lost_on: List[str] = field(default_factory=list)
    #: done by an earlier run and kept by a resume
    kept: bool = False

    def to_doc(self, job_id: str) -> Dict[str, Any]:
        """The part's done record (``recio.image.packing.progress``); file names relative to the
        staging folder."""
        shard = None if self.shard is None else self.shard.to_dict(
            storage.dirname(self.shard.rec))
        files = [] if self.shard is None else [[storage.basename(path), size, crc]
                                               for _, path, size, crc in self.shard.files()]
        r = self.result
        return {"job": job_id, "number": self.number, "items": self.items, "shard": shard,
                "files": files, "packed": r.packed, "skipped": r.skipped, "skips": r.skips,
                "alpha_dropped": r.alpha_dropped, "first_skip": r.first_skip,
                "error_rows": self.error_rows.decode("latin-1"),
                "first_missing": self.first_missing, "started": self.started,
                "seconds": self.seconds, "host": self.host, "pid": self.pid,
                "attempt": self.attempt, "where": self.where}

    @classmethod
    def from_doc(cls, doc: Dict[str, Any], staging: str) -> "PartResult":
        """A done record read back by a resume (its files are in ``staging``)."""
        entry = doc["shard"]
        shard = None
        if entry is not None:
            crc = entry.get("crc")
            shard = Shard(storage.join(staging, entry["rec"]), storage.join(staging, entry["idx"]),
                          None if crc is None else storage.join(staging, crc),
                          int(entry["records"]), int(entry["rec_bytes"]),
                          int(entry["idx_bytes"]), str(entry["rec_crc32"]),
                          str(entry["idx_crc32"]), entry.get("crc_bytes"),
                          entry.get("crc_crc32"), entry.get("min_key"), entry.get("max_key"))
        result = PackResult("", "", "", None, packed=int(doc["packed"]),
                            skipped=int(doc["skipped"]), skips=dict(doc["skips"]),
                            alpha_dropped=int(doc["alpha_dropped"]),
                            first_skip=_first_skip(doc.get("first_skip")))
        return cls(int(doc["number"]), int(doc["items"]), shard, result,
                   str(doc["error_rows"]).encode("latin-1"), doc.get("first_missing"),
                   float(doc["started"]), float(doc["seconds"]), str(doc["host"]),
                   int(doc["pid"]), int(doc["attempt"]), str(doc.get("where", "")), kept=True)


def _first_skip(saved: Any) -> Optional[Tuple[int, str]]:
    """A done record's ``first_skip`` (``[line, reason]`` in JSON), as ``PackResult`` has it."""
    return None if not saved else (int(saved[0]), str(saved[1]))


class Engine(Protocol):
    """Runs parts' tasks somewhere and yields each :class:`PartResult` as it finishes (in any
    order); raises :class:`PartFailedError` (or ``NothingFoundError``) for a part that fails."""

    name: str

    def parallelism(self) -> int:
        """How many parts at least to cut a list into when the caller asked for no shards."""
        ...

    def run(self, parts: Iterator[ListPart], job: PartJob,
            progress: Optional[ProgressCallback]) -> Iterator[PartResult]: ...


def part_failed(part: ListPart, job: PartJob,
                exc: BaseException) -> Union[PartFailedError, OutputWriteError]:
    """The one-line error for a part that failed: the list, the shard, its lines and why. A
    part the disk had no room for (or an I/O error) is an ``OutputWriteError`` naming the list
    (not the staging folder's files) that a resume continues."""
    if isinstance(exc, OutputWriteError) or is_write_only_error(exc):
        error = cast(OSError, exc)
        return OutputWriteError(
            f"shard {part.number} ({part.lines}) could not be written ({error.strerror}); "
            "nothing was published, the finished parts are kept, to resume from",
            path=job.list_path or None, error_number=error.errno, resumable=True)
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return PartFailedError(f"shard {part.number} ({part.lines}) failed: {reason}; nothing was "
                           "published (no manifest); the finished parts are kept: fix the cause "
                           "and rerun with --resume", path=job.list_path or None)


class LocalEngine:
    """Parts one after another in this process, each on ``PartJob.settings.workers`` threads
    or processes (``im2rec --engine local``, the default)."""

    name = "local"

    def parallelism(self) -> int:
        return 1  # the pipeline already keeps every worker busy

    def run(self, parts: Iterator[ListPart], job: PartJob,
            progress: Optional[ProgressCallback]) -> Iterator[PartResult]:
        done = 0
        for part in parts:
            report = None
            if progress is not None:
                def report(n: int, _total: int, base: int = done, total: int = part.list_total
                           ) -> None:
                    progress(base + n, total)
            try:
                result = pack_part(part, job, report)
            except (NothingFoundError, KeyboardInterrupt):
                raise
            except Exception as exc:
                raise part_failed(part, job, exc) from exc
            done += result.items
            yield result


# -- the task ------------------------------------------------------------------------------------
def _fault_hook(job: PartJob, part: ListPart, attempt: int,
                progress: Optional[ProgressCallback]) -> Optional[ProgressCallback]:
    fault = job.fault
    if fault is None or fault.shard != part.number or (attempt > 1 and not fault.always):
        return progress
    half = max(1, len(part.tasks) // 2)

    def report(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        if done >= half:
            if fault.mode == "crash":
                os._exit(70)  # the worker process dies mid-shard, as a killed one would
            raise _InjectedFault(5, f"injected failure in shard {part.number}, attempt {attempt}")
    return report


def pack_part(part: ListPart, job: PartJob, progress: Optional[ProgressCallback] = None,
              where: str = "") -> PartResult:
    """Pack one part into staged files ``STAGING/part-NNNNN.ATTEMPT.rec``/``.idx``/
    ``.crc32``, then write its done record ``STAGING/part-NNNNN.json`` naming them; returns
    their description. Runs wherever the engine puts it (``where`` says where, for reports).

    Every attempt writes files of its own (uploaded to a URL staging folder once complete)
    and only the done record is shared: two attempts that overlap (a task Ray thought lost
    that still runs, a task of a killed driver that Ray has not stopped yet) never write into
    or delete a file the other's record names, and both records describe the same bytes. An
    attempt that fails deletes its own files. One that is killed (or interrupted) leaves its
    partial files, and the next attempt at the part on this machine takes them over once its
    process is gone (``PackProgress.claim_partial``) and goes on from the last item their
    journal vouches for, as ``im2rec --resume`` does for a single list; the files end byte for
    byte as one uninterrupted attempt's. A URL staging folder keeps no partial files (each
    attempt packs into a local temporary folder): its parts start over."""
    started, wall = time.perf_counter(), time.time()
    progress_store = PackProgress(job.staging, job.storage_options)
    attempt, earlier = progress_store.attempt(part.number, job.run or "run", where)
    progress = _fault_hook(job, part, attempt, progress)
    remote = storage.is_url(job.staging)
    folder = tempfile.mkdtemp(prefix=".recio-part-", dir=os.environ.get("RECIO_STAGING_DIR")
                              or None) if remote else storage.local_path(job.staging)
    # names this attempt's outputs; never written itself
    lst_name = os.path.join(folder, f"{part_name(part.number)}.{attempt_token()}.lst")
    paths = PackPaths.of(lst_name)
    try:
        result = PackResult(paths.lst, paths.rec, paths.idx, None)
        first = part.tasks[0][0] if part.tasks else 0
        header = {"part": part.number, "first": first}
        # an earlier attempt's progress (killed): go on from it
        resumed = not remote and progress_store.claim_partial(part.number, paths.stem)
        try:
            state = resume_state(paths, header, resumed, result, first)
        except RecordIOError:  # files that do not fit their journal: start the part over
            for path in (*paths.partial, paths.rec):
                if os.path.exists(path):
                    os.unlink(path)
            state = resume_state(paths, header, False, result, first)
        assert state is not None  # a part's own files are never complete yet
        checks = FoundChecks(part.list_total, None, early=bool(part.tasks) and first == 0)
        image_job = make_job(job.root, job.settings, job.storage_options)
        tasks = (task for task in part.tasks if task[0] >= state.next_pos)
        sink = pack_tasks(image_job, tasks, paths, header, state, result, checks, progress)
        rec, idx, errors = paths.rec, paths.idx, paths.errors
        error_rows = b""
        if result.errors_path is not None:
            with open(errors, "rb") as f:
                error_rows = f.read()[len(ERRORS_HEADER):]
            os.unlink(errors)
        shard = describe_shard(rec, idx, job.settings.checksums) if result.packed else None
        if shard is None:
            for path in (rec, idx):
                os.unlink(path)
        elif remote:
            _upload_part(shard, job)
        done = PartResult(part.number, len(part.tasks), shard, result, error_rows,
                          sink.first_missing, wall, time.perf_counter() - started,
                          socket.gethostname(), os.getpid(), attempt, where,
                          wall - earlier[0]["started"] if earlier else 0.0,
                          [str(e.get("where") or e.get("host")) for e in earlier])
        progress_store.write_done(part.number, done.to_doc(job.job_id))
        return done
    except Exception:
        if not remote:  # this attempt's own files (a pack's partial files survive its abort)
            for leftover in os.listdir(folder):
                if os.path.join(folder, leftover).startswith(paths.stem + "."):
                    os.unlink(os.path.join(folder, leftover))
        raise  # an interruption (Ctrl-C, SIGTERM) keeps them for the next attempt
    finally:
        if remote:
            storage.remove_tree(folder)


def describe_shard(rec: str, idx: str, checksums: bool) -> Shard:
    """A finished shard's manifest entry (its ``.rec`` and ``.idx`` where they are now):
    sizes, CRC-32s, key range and (``checksums``) its per-record CRC-32 sidecar, written in
    ``ShardWriter``'s format."""
    rec_bytes, rec_crc = file_crc32(rec)
    idx_bytes, idx_crc = file_crc32(idx)
    keys = open_index(idx, key_type=int, rec_size=rec_bytes, cache=False).key_array()
    shard = Shard(rec, idx, None, len(keys), rec_bytes, idx_bytes, rec_crc, idx_crc,
                  min_key=int(keys.min()), max_key=int(keys.max()))
    if checksums:
        crc_path = os.path.splitext(rec)[0] + RECORD_CHECKSUM_SUFFIX
        with RecordReader(rec) as reader:
            crcs = np.fromiter((zlib.crc32(payload) for payload in reader), np.uint32,
                               count=len(keys))
        with atomic_open(crc_path, "wb") as out:
            out.write(crcs.astype("<u4").tobytes())
        shard.crc = crc_path
        shard.crc_bytes, shard.crc_crc32 = file_crc32(crc_path)
    return shard


def _upload_part(shard: Shard, job: PartJob) -> None:
    """Upload a finished part's files to the URL staging folder under their names (this
    attempt's own), the ``.rec`` first."""
    moves = [(role, path, storage.join(job.staging, os.path.basename(path)))
             for role, path, _, _ in shard.files()]
    publish_staged([(path, target) for _, path, target in moves], job.storage_options)
    for role, _, target in moves:
        setattr(shard, role, target)
