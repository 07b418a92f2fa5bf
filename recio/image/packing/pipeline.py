"""im2rec's pack step: turn a ``.lst`` image list into ``.rec`` + ``.idx``, in list order.

Workers (threads or processes, ``recio.image.packing.executors``) decode, resize and encode images
(``recio.image.packing.worker``); the calling thread writes the records strictly in list order
from a bounded window of batches in flight, so memory stays bounded however long the list is.
A bad image never stops the run: it is skipped, counted and reported in ``PREFIX.errors.tsv``
(line, index, path, reason). Records go to a ``.rec.partial`` with a journal from which an
interrupted pack resumes (``recio.image.packing.output``, which also writes them in order); a
PREFIX naming several lists is ``recio.image.packing.prefix``. What to do is one
``recio.image.packing.settings.PackSettings``, where to write it one
``recio.image.packing.paths.PackPaths``.

This module is the pipeline that ties them together: what a pack found (``PackResult``), and
the pack of one list from its checks to its result.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from recio import portable
from recio.errors import InterruptedPackError, ListFileError, NothingFoundError, OutputWriteError
from recio.image.lists import ListItem, foreign_list_path, read_list_entries
from recio.image.packing.executors import encode_in_order
from recio.image.packing.output import (
    FoundChecks,
    InOrderWriter,
    JournalState,
    PackOutput,
    ProgressCallback,
    journal_header,
    recover_journal,
)
from recio.image.packing.paths import PackPaths
from recio.image.packing.progress import PackProgress
from recio.image.packing.settings import PackSettings
from recio.image.packing.worker import PackJob, Task, make_job
from recio.image.pixels.transform import set_opencv_threads
from recio.records.atomic import check_outputs, remove_orphaned_temps
from recio.records.lock import OutputLock
from recio.records.write_errors import is_write_only_error, write_failed

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class PackResult:
    """What one ``.lst`` became: output paths and counts (``resumed`` items were already done)."""

    lst_path: str
    rec_path: str
    idx_path: str
    errors_path: Optional[str]
    packed: int = 0
    skipped: int = 0
    bytes: int = 0
    seconds: float = 0.0
    resumed: int = 0
    already_done: bool = False
    #: skipped items by cause (``SKIP_CAUSES``)
    skips: Dict[str, int] = field(default_factory=dict)
    #: lines with several labels of which only the first was stored (no ``pack_label``)
    labels_ignored: int = 0
    #: list indices (record keys and ids) that appear more than once
    repeated_indices: int = 0
    #: images whose transparency was dropped (JPEG output or colour/grey conversion)
    alpha_dropped: int = 0
    #: the first item skipped: ``(list line, reason)`` (for messages; the rest are in
    #: ``.errors.tsv``)
    first_skip: Optional[Tuple[int, str]] = None
    #: a pack in parts: its parts, those an earlier run had done (kept by ``resume``), the
    #: tasks run again after a failure (a worker or node lost) and the time those failures
    #: cost (from the start of each failed attempt to the start of its retry)
    parts: int = 0
    parts_kept: int = 0
    retried: int = 0
    seconds_lost: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready summary."""
        return {"lst": self.lst_path, "rec": self.rec_path, "idx": self.idx_path,
                "errors": self.errors_path, "packed": self.packed, "skipped": self.skipped,
                "skips": dict(self.skips), "bytes": self.bytes,
                "seconds": round(self.seconds, 3), "resumed": self.resumed,
                "already_done": self.already_done, "labels_ignored": self.labels_ignored,
                "repeated_indices": self.repeated_indices,
                "alpha_dropped": self.alpha_dropped, "parts": self.parts,
                "parts_kept": self.parts_kept, "retried": self.retried,
                "seconds_lost": round(self.seconds_lost, 3)}


def count_items(lst_path: PathLike) -> int:
    """Number of items (non-blank lines, malformed ones included) in a list, read before a pack
    writes anything: a path this OS cannot open at all (on POSIX a Windows drive or UNC path,
    ``lists.foreign_list_path``) raises :class:`ListFileError` naming its line, so a list
    written for Windows is refused whole, never packed in part."""
    count = 0
    for line, item, _ in read_list_entries(lst_path):
        if item is not None and foreign_list_path(item.path):
            raise ListFileError(
                f"the image path {item.path[:80]!r} is a Windows absolute path (a drive or a "
                f"UNC share), which this system ({portable.system()}) cannot open: make the list "
                "again with paths relative to ROOT (im2rec PREFIX ROOT --list) or rewrite them "
                "as this system's paths; nothing was written", path=os.fspath(lst_path),
                line=line)
        count += 1
    return count


def pack_list(lst_path: PathLike, root: PathLike, settings: Optional[PackSettings] = None, *,
              progress: Optional[ProgressCallback] = None) -> PackResult:
    """Pack the images of ``lst_path`` (paths relative to ``root``) into ``.rec`` + ``.idx``
    as ``settings`` say (default: ``PackSettings()``, im2rec's defaults).

    Records are written in list order with ``id = index``, ``id2 = 0`` and the first label (all
    labels with ``pack_label`` when there are several). ``workers`` > 1 runs that many threads or
    processes (``executor``). ``resume`` continues an interrupted pack of the same list with the
    same settings (or returns at once if the outputs are already complete). ``progress(done,
    total)`` is called as items finish. A shard set (``num_shards``, ``shard_size``) is
    ``recio.image.packing.shards.pack_shards``'.

    What is skipped, counted by cause in ``PackResult.skips`` and listed in ``.errors.tsv``:
    malformed list lines, missing files, paths resolving outside ``root`` (absolute, ``..``,
    symlinks; unless ``allow_outside_root``), anything but a regular file, unreadable or
    undecodable images. A pack that finds (nearly) nothing fails with
    :class:`NothingFoundError` and leaves no output: when no item could be packed, when more
    than ``max_missing`` of the items are missing, or when the first ``EARLY_MISSING`` items
    tried are all missing. An existing ``.rec``/``.idx`` is replaced only with ``force`` (or
    continued with ``resume``); :class:`OutputExistsError` otherwise, before any work. The
    progress of an interrupted pack of the list is never discarded unasked: without
    ``resume`` it is refused (:class:`~recio.errors.InterruptedPackError`) unless ``force``.
    The pack holds ``STEM.pack.lock`` (``recio.records.lock``) while it runs: a second pack of
    the same list meanwhile gets :class:`~recio.errors.OutputBusyError` at once.

    ``fsync`` fsyncs the finished files before they are renamed into place (and their
    folder after), so a returned result survives an OS crash; resuming after an OS crash is
    best effort (the journal is flushed to the OS, not fsynced, after every batch).
    """
    settings = settings or PackSettings()
    paths = PackPaths.of(lst_path)
    root = os.path.abspath(os.fspath(root))
    paths.check()  # no FIFO or device where the pack writes
    with OutputLock(paths.lock, output=paths.rec, remedy=paths.beside_the_list()):
        _check_interrupted(paths, settings)
        if not settings.resume:
            check_outputs([paths.rec, paths.idx], [paths.lst], force=settings.force)
        job = make_job(root, settings)
        header = journal_header(paths, root, settings)
        started = time.perf_counter()
        total = count_items(paths.lst)
        result = PackResult(paths.lst, paths.rec, paths.idx, None)
        if settings.resume:
            remove_orphaned_temps(paths.stem)  # a killed run's .idx temps
        state = resume_state(paths, header, settings.resume, result)
        if state is None:
            return result  # resume found the outputs complete
        tasks = list_tasks(paths.lst, ListTally(result, settings.pack_label))
        tasks = (task for task in tasks if task[0] >= state.next_pos)
        checks = FoundChecks(total, settings.max_missing, early=True)
        pack_tasks(job, tasks, paths, header, state, result, checks, progress)
    result.seconds = time.perf_counter() - started
    return result


def _check_interrupted(paths: PackPaths, settings: PackSettings) -> None:
    """What an interrupted pack of the list left is never discarded unasked: without
    ``resume`` its partial files are refused (:class:`InterruptedPackError`) unless ``force``
    (then they are written over); an interrupted pack in parts (``recio.image.packing.shards``)
    is refused unless ``force`` deletes it (``pack_shards`` with ``resume`` continues it)."""
    parts = PackProgress(paths.staging)
    if parts.job() is not None:
        if not settings.force:
            raise InterruptedPackError(
                f"an interrupted pack of this list in parts is kept in {parts.folder}; continue "
                "it with --resume (as it was started: --num-shards, --shard-size, --engine "
                "ray), or start over with --force (which deletes it)", path=paths.lst)
        parts.discard()
    if not settings.resume and not settings.force and paths.has_partial():
        names = " and ".join(os.path.basename(p) for p in paths.partial)
        raise InterruptedPackError(f"an interrupted pack of this list left {names}; continue "
                                   "it with --resume, or start over with --force (which "
                                   "deletes them)", path=paths.lst)


def pack_tasks(job: PackJob, tasks: Iterator[Task], paths: PackPaths, header: dict,
               state: JournalState, result: PackResult, checks: FoundChecks,
               progress: Optional[ProgressCallback]) -> InOrderWriter:
    """Encode ``tasks`` into the outputs at ``paths`` (as ``job.settings`` say), counting into
    ``result``: the pipeline behind :func:`pack_list` and ``pack_part``. ``state``: where the
    pack continues (a fresh ``JournalState`` for a new one); ``header``: what its journal
    records (``journal_header``)."""
    out = PackOutput(paths, header, state, job.settings.fsync)
    sink = InOrderWriter(out, state, progress, job, checks)
    opencv_threads = set_opencv_threads(1)
    try:
        encode_in_order(job, tasks, sink)
        sink.check_found(final=True)
    except NothingFoundError:
        out.abort()
        out.remove_partial()  # nothing worth resuming
        raise
    except OSError as exc:  # a full disk: the partial output stays, to resume from
        if not isinstance(exc, OutputWriteError) and not is_write_only_error(exc):
            raise
        out.abort()
        raise write_failed(exc, paths.rec, resumable=True) from exc
    finally:
        if opencv_threads is not None:
            set_opencv_threads(opencv_threads)
    out.close()
    _take_counts(result, state)
    result.errors_path = paths.errors if out.errors_written else None
    result.bytes = state.rec_end
    return sink


def _take_counts(result: PackResult, state: JournalState) -> None:
    """``result`` gets what the journal vouches for (the items of an earlier run included)."""
    result.packed, result.skipped = state.packed, state.skipped
    result.skips = dict(state.skips)
    result.alpha_dropped, result.first_skip = state.alpha_dropped, state.first_skip


def list_tasks(lst_path: str, tally: "ListTally") -> Iterator[Task]:
    """The list's items as the pipeline's tasks, in list order, counted by ``tally``."""
    for pos, (line, item, error) in enumerate(read_list_entries(lst_path)):
        yield tally.task(pos, line, item, error)


class ListTally:
    """Counts what the list itself says that packing drops: labels beyond the first (without
    ``pack_label``) and indices used twice (a bitmap for the usual ``0..n-1`` indices, a set
    for the rest)."""

    _BITMAP_LIMIT = 1 << 31

    def __init__(self, result: PackResult, pack_label: bool) -> None:
        self.result, self.pack_label = result, pack_label
        self.bits = bytearray()
        self.others: set = set()

    def task(self, pos: int, line: int, item: Optional[ListItem],
             error: Optional[ListFileError]) -> Task:
        if item is None:
            return pos, line, None, error.message if error is not None else "malformed line"
        if len(item.labels) > 1 and not self.pack_label:
            self.result.labels_ignored += 1
        self.result.repeated_indices += self._seen(item.index)
        return pos, line, item, None

    def _seen(self, index: int) -> bool:
        if index >= self._BITMAP_LIMIT:
            if index in self.others:
                return True
            self.others.add(index)
            return False
        byte, bit = divmod(index, 8)
        if byte >= len(self.bits):
            self.bits.extend(bytes(max(byte + 1 - len(self.bits), len(self.bits))))
        seen = self.bits[byte] >> bit & 1
        self.bits[byte] |= 1 << bit
        return bool(seen)


def resume_state(paths: PackPaths, header: dict, resume: bool, result: PackResult,
                 first: int = 0) -> Optional[JournalState]:
    """Where packing starts: the journal's progress when resuming an interrupted pack, a fresh
    start otherwise, or None when ``resume`` finds the outputs already complete (``result``
    then says so). ``result`` gets the number of items done before (``resumed``). ``first``:
    the position of the first item (a part of a list, ``recio.image.packing.parts``)."""
    state = JournalState(first)
    if resume and paths.has_partial():
        if not os.path.exists(paths.rec_partial):  # publishing was cut short after the .rec:
            os.replace(paths.rec, paths.rec_partial)  # the journal writes .idx, report again
        state = recover_journal(paths.rec_partial, paths.journal, header, first)
    elif resume and os.path.exists(paths.rec) and os.path.exists(paths.idx) \
            and not os.path.exists(paths.rec_partial):
        result.already_done = True
        result.errors_path = paths.errors if os.path.exists(paths.errors) else None
        result.bytes = os.path.getsize(paths.rec)
        return None
    result.resumed = state.done
    return state


