"""Pack a list as a shard set, one list range per task: the same work on every engine.

``im2rec PREFIX ROOT --num-shards S`` cuts each list, in list order, into parts of
``ceil(N / S)`` items (N: the list's items, malformed lines included). Part k is one task,
:func:`pack_part`: it packs its items with ``pack_list``'s pipeline into staged files named by
k alone (``STAGING/part-0000k.rec``/``.idx``/``.crc32``), so a task that is run again (a retry
after a crash) rewrites exactly the same files. The engine decides where tasks run:
:class:`LocalEngine` runs them one after another in this process, each on ``workers``
threads or processes; ``recio.ray.RayEngine`` runs them on a Ray cluster. Records, keys,
headers and shard boundaries do not depend on the engine.

The driver, :func:`pack_shards`, commits only when every part has succeeded: each staged shard
is renamed to its final name (parts left empty by skipped images get no shard, so the shards
are numbered without gaps), then come ``PREFIX.errors.tsv`` (in list order), the combined
index ``PREFIX.combined.idx`` and, last, ``PREFIX.manifest.json``. The staging folder
(``.recio-pack-<id>`` beside the outputs: a folder, or objects under that name in the bucket)
is deleted whatever happens. A failed part fails the job with one line naming the shard and
its list lines; no manifest is written.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import RecordIOError
from recio.image.codec import ImageOptions
from recio.image.packing import (
    MAX_MISSING,
    FoundChecks,
    ListTally,
    NothingFoundError,
    PackResult,
    ProgressCallback,
    Task,
    check_found,
    check_workers,
    count_items,
    list_tasks,
    make_job,
    output_paths,
    pack_tasks,
)
from recio.records.atomic import (
    AtomicFile,
    OutputSet,
    atomic_open,
    check_outputs,
    publish_staged,
)
from recio.records.index import open_index
from recio.records.reader import RecordReader
from recio.records.shards import (
    RECORD_CHECKSUM_SUFFIX,
    Shard,
    combined_lines,
    commit_staged,
    file_crc32,
    manifest_path,
    set_outputs,
)
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

#: the header line of ``PREFIX.errors.tsv``
ERRORS_HEADER = b"line\tindex\tpath\treason\n"
#: parts are joined into one ``.rec`` in blocks of this size
_COPY_BLOCK = 8 << 20
#: ``RECIO_FAULT_INJECTION``: a test hook (see :class:`Fault`)
FAULT_VARIABLE = "RECIO_FAULT_INJECTION"


class PartFailedError(RecordIOError):
    """One part of a shard set could not be packed (after any retries): the job wrote no
    manifest. The message names the shard and its list lines."""


class InjectedFault(OSError):
    """The failure a :class:`Fault` injects (an ``OSError``: engines retry it like a real I/O
    failure)."""


@dataclass(frozen=True)
class Fault:
    """A failure injected into the task of shard ``shard`` half way through its items, to test
    retries: ``mode`` ``"error"`` raises :class:`InjectedFault`, ``"crash"`` ends the worker
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
    """The items of one shard: ``tasks`` are ``pack_list``'s ``(position, line number, item or
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
    """What every part's task needs besides its items (picklable: it travels to workers)."""

    root: str
    options: ImageOptions
    staging: str
    pass_through: bool = False
    pack_label: bool = False
    allow_outside_root: bool = False
    checksums: bool = False
    #: threads (or processes) encoding images inside one task
    workers: int = 1
    executor: str = "auto"
    storage_options: StorageOptions = None
    fault: Optional[Fault] = None
    #: the list being packed (named by errors)
    list_path: str = ""


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
    attempt: int = 1


class Engine(Protocol):
    """Runs parts' tasks somewhere and yields each :class:`PartResult` as it finishes (in any
    order); raises :class:`PartFailedError` (or ``NothingFoundError``) for a part that fails."""

    name: str

    def parallelism(self) -> int:
        """How many parts to cut a list into when the caller asked for no shards."""
        ...

    def run(self, parts: Iterator[ListPart], job: PartJob,
            progress: Optional[ProgressCallback]) -> Iterator[PartResult]: ...


def part_failed(part: ListPart, job: PartJob, exc: BaseException) -> PartFailedError:
    """The one-line error for a part that failed: the list, the shard, its lines and why."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return PartFailedError(f"shard {part.number} ({part.lines}) failed: {reason}; nothing was "
                           "written (no manifest)", path=job.list_path or None)


class LocalEngine:
    """Parts one after another in this process, each on ``PartJob.workers`` threads or
    processes (``im2rec --engine local``, the default)."""

    name = "local"

    def parallelism(self) -> int:
        return 1  # one part: the pipeline already keeps every worker busy

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
def _attempt(job: PartJob, number: int) -> int:
    """Which attempt at part ``number`` this is (1, 2, ...), counted by marker files in the
    staging folder; only kept when a fault is injected (the tests' retry check)."""
    base = storage.join(job.staging, f"part-{number:05d}.attempt")
    attempt = 1
    while storage.exists(f"{base}{attempt}", job.storage_options):
        attempt += 1
    with atomic_open(f"{base}{attempt}", "wb", storage_options=job.storage_options):
        pass  # an empty marker: this attempt has started
    return attempt


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
            raise InjectedFault(5, f"injected failure in shard {part.number}, attempt {attempt}")
    return report


def pack_part(part: ListPart, job: PartJob,
              progress: Optional[ProgressCallback] = None) -> PartResult:
    """Pack one part into its staged files ``STAGING/part-NNNNN.*``; returns their
    description. Runs wherever the engine puts it.

    The files are written under names of this attempt's own, then renamed (or uploaded) to
    the part's names, replacing what an earlier attempt left: two attempts that overlap (a
    worker thought lost that is still running) write the same bytes and never into the same
    file."""
    started, wall = time.perf_counter(), time.time()
    attempt = _attempt(job, part.number) if job.fault is not None else 1
    progress = _fault_hook(job, part, attempt, progress)
    remote = storage.is_url(job.staging)
    folder = tempfile.mkdtemp(prefix=".recio-part-", dir=os.environ.get("RECIO_STAGING_DIR")
                              or None) if remote else storage.local_path(job.staging)
    try:
        name = f"part-{part.number:05d}"
        # names this attempt's outputs; never written itself
        lst_name = os.path.join(folder, f"{name}.{uuid.uuid4().hex[:12]}.lst")
        result = PackResult(lst_name, *output_paths(lst_name)[:2], None)
        settings = {"part": part.number, "first": part.tasks[0][0] if part.tasks else 0}
        checks = FoundChecks(part.list_total, None, early=bool(part.tasks)
                              and part.tasks[0][0] == 0)
        image_job = make_job(job.root, job.options, job.pass_through, job.pack_label,
                             job.allow_outside_root, job.storage_options)
        sink = pack_tasks(image_job, iter(part.tasks), lst_name, settings, None, result,
                           checks, job.workers, job.executor, progress, 0, 0, False)
        rec, idx, errors = output_paths(lst_name)
        error_rows = b""
        if result.errors_path is not None:
            with open(errors, "rb") as f:
                error_rows = f.read()[len(ERRORS_HEADER):]
            os.unlink(errors)
        shard = describe_shard(rec, idx, job.checksums) if result.packed else None
        if shard is None:
            for path in (rec, idx):
                os.unlink(path)
        else:
            _publish_part(shard, job, name)
        return PartResult(part.number, len(part.tasks), shard, result, error_rows,
                          sink.first_missing, wall, time.perf_counter() - started,
                          socket.gethostname(), os.getpid(), attempt)
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


def _publish_part(shard: Shard, job: PartJob, name: str) -> None:
    """Give a finished part's files their staged names ``STAGING/NAME.rec``/``.idx``/
    ``.crc32``: a rename in a local staging folder, an upload to a URL one."""
    moves = [(role, path, storage.join(job.staging, name + os.path.splitext(path)[1]))
             for role, path, _, _ in shard.files()]
    publish_staged([(path, target) for _, path, target in moves], job.storage_options)
    for role, _, target in moves:
        setattr(shard, role, target)


# -- the driver ----------------------------------------------------------------------------------
def split_list(lst_path: str, num_shards: int, pack_label: bool,
               result: PackResult) -> Tuple[int, Iterator[ListPart]]:
    """``(items, parts)``: the list cut in list order into at most ``num_shards`` parts of
    ``ceil(items / num_shards)`` items, read as the parts are taken (a list larger than
    memory is never held whole). ``result`` gets the list's own counts (labels beyond the
    first, repeated indices)."""
    total = count_items(lst_path)
    per_part = max(1, -(-total // num_shards))

    def parts() -> Iterator[ListPart]:
        tally = ListTally(result, pack_label)
        tasks: List[Task] = []
        number = 0
        for task in list_tasks(lst_path, tally):
            tasks.append(task)
            if len(tasks) == per_part:
                yield ListPart(number, tuple(tasks), total)
                number, tasks = number + 1, []
        if tasks:
            yield ListPart(number, tuple(tasks), total)
    return total, parts()


@dataclass
class ShardPackReport:
    """What :func:`pack_shards` did besides the ``PackResult``: each part's timing."""

    engine: str
    parts: List[PartResult] = field(default_factory=list)

    def timings(self) -> List[Dict[str, Any]]:
        return [{"shard": p.number, "items": p.items, "started": p.started,
                 "seconds": round(p.seconds, 3),
                 "host": p.host, "pid": p.pid, "attempt": p.attempt}
                for p in sorted(self.parts, key=lambda p: p.number)]


def pack_shards(lst_path: PathLike, root: PathLike, options: Optional[ImageOptions] = None, *,
                num_shards: Optional[int], engine: Optional[Engine] = None,
                checksums: bool = False, pass_through: bool = False, pack_label: bool = False,
                workers: int = 1, executor: str = "auto", force: bool = False,
                allow_outside_root: bool = False, max_missing: float = MAX_MISSING,
                progress: Optional[ProgressCallback] = None,
                storage_options: StorageOptions = None, fault: Optional[Fault] = None,
                report: Optional[ShardPackReport] = None) -> PackResult:
    """Pack ``lst_path`` into the shard set ``STEM-NNNNN.rec``/``.idx`` (STEM: the list's path
    without ``.lst``; local or a URL), ``STEM.combined.idx`` and ``STEM.manifest.json``, with
    one task per shard on ``engine`` (default :class:`LocalEngine`). ``root``: the images, a
    folder or a URL. Returns the ``PackResult`` (``rec_path`` is the manifest); ``report``
    collects each part's timing. See the module docstring for what appears when.

    ``num_shards=None`` packs into one ``STEM.rec`` + ``STEM.idx`` instead, byte for byte what
    ``pack_list`` writes: the list is packed in ``engine.parallelism()`` parts side by side,
    which the driver then joins (one sequential copy of the records: shards avoid it)."""
    lst_path = storage.absolute(lst_path)
    root = storage.absolute(root)
    check_workers(workers, executor)
    if num_shards is not None and num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    engine = engine or LocalEngine()
    stem = os.path.splitext(lst_path)[0]
    rec_path, idx_path, errors_path = output_paths(lst_path)
    outputs = (set_outputs(stem, storage_options) if num_shards is not None
               else [rec_path, idx_path])
    if not force:
        check_outputs(outputs, [lst_path], force=False, storage_options=storage_options)
    started = time.perf_counter()
    result = PackResult(lst_path, manifest_path(stem) if num_shards is not None else rec_path,
                        None if num_shards is not None else idx_path, None)  # type: ignore
    staging = storage.join(storage.dirname(stem), f".recio-pack-{uuid.uuid4().hex[:12]}")
    if not storage.is_url(staging):
        os.mkdir(staging)
    try:
        with storage.local_copy(lst_path, storage_options) as local_lst:
            total, parts = split_list(local_lst, num_shards or engine.parallelism(), pack_label,
                                      result)
            job = PartJob(root, options or ImageOptions(), staging, pass_through, pack_label,
                          allow_outside_root, checksums, workers, executor, storage_options,
                          fault, lst_path)
            finished = _run(engine, parts, job, progress, total, report)
        first_missing = next((p.first_missing for p in finished if p.first_missing), None)
        for part in finished:
            _add_counts(result, part.result)
        check_found(result, total, max_missing, first_missing, root, lst_path)
        _write_errors(finished, errors_path, storage_options)
        if num_shards is not None:
            made_by = {"tool": "im2rec", "list": os.path.basename(lst_path),
                       "images": result.packed}
            staged = [p.shard for p in finished if p.shard is not None]
            commit_staged(stem, staged, made_by, checksums=checksums, force=force,
                          storage_options=storage_options)
        else:
            _join(finished, rec_path, idx_path, storage_options)
    finally:
        storage.remove_tree(staging, storage_options)
    result.bytes = sum(p.shard.rec_bytes for p in finished if p.shard is not None)
    result.errors_path = errors_path if result.skipped else None
    result.seconds = time.perf_counter() - started
    return result


def _run(engine: Engine, parts: Iterator[ListPart], job: PartJob,
         progress: Optional[ProgressCallback], total: int,
         report: Optional[ShardPackReport]) -> List[PartResult]:
    if progress is not None:
        progress(0, total)
    finished: List[PartResult] = []
    for part in engine.run(parts, job, progress):
        finished.append(part)
        if report is not None:
            report.parts.append(part)
    finished.sort(key=lambda p: p.number)
    return finished


def _add_counts(total: PackResult, part: PackResult) -> None:
    total.packed += part.packed
    total.skipped += part.skipped
    total.alpha_dropped += part.alpha_dropped
    for cause, n in part.skips.items():
        total.skips[cause] = total.skips.get(cause, 0) + n
    total.first_skip = total.first_skip or part.first_skip  # parts come in list order


def _write_errors(finished: Sequence[PartResult], errors_path: str,
                 storage_options: StorageOptions) -> None:
    """``PREFIX.errors.tsv``: the parts' rows in list order (an old report is deleted when
    nothing was skipped)."""
    rows = b"".join(p.error_rows for p in finished)
    if rows:
        with atomic_open(errors_path, "wb", storage_options=storage_options) as out:
            out.write(ERRORS_HEADER + rows)
    else:
        storage.remove(errors_path, storage_options)


def _join(finished: Sequence[PartResult], rec_path: str, idx_path: str,
          storage_options: StorageOptions) -> None:
    """Join the staged parts into one ``.rec`` and its ``.idx`` (records are position-free, so
    the parts' bytes one after another are the whole pack), published together (the ``.rec``
    first, an old ``.idx`` deleted before it)."""
    shards = [p.shard for p in finished if p.shard is not None]
    outputs = OutputSet([AtomicFile(rec_path, "wb", storage_options=storage_options),
                         AtomicFile(idx_path, "wb", storage_options=storage_options)])
    try:
        rec_out, idx_out = outputs.files[0].file, outputs.files[1].file
        for shard in shards:
            with storage.open_input(shard.rec, storage_options) as part:
                shutil.copyfileobj(part, rec_out, _COPY_BLOCK)
        for block in combined_lines(shards, storage_options):
            idx_out.write(block)
    except BaseException:
        outputs.discard()
        raise
    outputs.commit()


__all__ = ["pack_shards", "pack_part", "split_list", "LocalEngine", "Engine", "ListPart",
           "PartJob", "PartResult", "PartFailedError", "ShardPackReport", "Fault",
           "InjectedFault", "describe_shard", "FAULT_VARIABLE"]
