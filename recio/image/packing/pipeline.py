"""im2rec's pack step: turn a ``.lst`` image list into ``.rec`` + ``.idx``, in list order.

Workers (threads or processes, ``recio.image.packing.executors``) decode, resize and encode images
(``recio.image.packing.worker``); the calling thread writes the records strictly in list order
from a bounded window of batches in flight, so memory stays bounded however long the list is.
A bad image never stops the run: it is skipped, counted and reported in ``PREFIX.errors.tsv``
(line, index, path, reason). Records go to a ``.rec.partial`` with a journal from which an
interrupted pack resumes (``recio.image.packing.output``); a PREFIX naming several lists is
``recio.image.packing.prefix``.

This module is the pipeline that ties them together: what a pack found (``PackResult``), the
rules for a pack that found (nearly) nothing, and the in-order writer.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from recio import portable
from recio.errors import (
    InterruptedPackError,
    ListFileError,
    NothingFoundError,
    OutputWriteError,
    plural,
)
from recio.image.lists import ListItem, foreign_list_path, read_list_entries
from recio.image.packing.executors import AUTO_EXECUTOR, check_workers, encode_in_order
from recio.image.packing.output import (
    JournalState,
    PackOutput,
    beside_the_list,
    check_pack_paths,
    has_partial,
    journal_field,
    output_paths,
    pack_settings,
    partial_paths,
    recover_journal,
)
from recio.image.packing.progress import PackProgress, staging_folder
from recio.image.packing.worker import Outcome, PackJob, Task, item_location, make_job
from recio.image.pixels.transform import ImageOptions, set_opencv_threads
from recio.records.atomic import check_outputs, remove_orphaned_temps
from recio.records.framing import encode_record
from recio.records.lock import OutputLock, lock_path
from recio.records.write_errors import is_write_only_error, write_failed

PathLike = Union[str, "os.PathLike[str]"]
ProgressCallback = Callable[[int, int], None]


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


#: why an item was skipped (the key of ``PackResult.skips``)
SKIP_CAUSES = ("missing", "outside_root", "not_a_file", "unreadable", "too_large",
               "malformed_line", "not_an_image")
#: how each cause of ``SKIP_CAUSES`` is written after its count: (one, several)
_SKIP_WORDS = {"missing": ("missing", "missing"), "outside_root": ("outside ROOT", "outside ROOT"),
               "not_a_file": ("not a regular file", "not regular files"),
               "unreadable": ("unreadable", "unreadable"), "too_large": ("too large", "too large"),
               "malformed_line": ("malformed line", "malformed lines"),
               "not_an_image": ("not an image", "not images")}


def describe_skips(skips: Dict[str, int]) -> str:
    """Skip counts by cause as words, e.g. ``"2 missing, 1 malformed line"``."""
    out = []
    for cause, n in skips.items():
        one, several = _SKIP_WORDS.get(cause, (cause.replace("_", " "),) * 2)
        out.append(plural(n, one, several))
    return ", ".join(out)


#: a pack fails (no output) when more than this share of its items is missing under ROOT
MAX_MISSING = 0.5
#: ... and stops early when this many items were tried and every one was missing
EARLY_MISSING = 100


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


def pack_list(lst_path: PathLike, root: PathLike, options: Optional[ImageOptions] = None, *,
              pass_through: bool = False, pack_label: bool = False, workers: int = 1,
              executor: str = "auto", resume: bool = False, force: bool = False,
              allow_outside_root: bool = False, max_missing: float = MAX_MISSING,
              progress: Optional[ProgressCallback] = None, batch_size: int = 0,
              window: int = 0, fsync: bool = False) -> PackResult:
    """Pack the images of ``lst_path`` (paths relative to ``root``) into ``.rec`` + ``.idx``.

    Records are written in list order with ``id = index``, ``id2 = 0`` and the first label (all
    labels with ``pack_label`` when there are several). ``workers`` > 1 runs that many threads or
    processes (``executor``). ``resume`` continues an interrupted pack of the same list with the
    same settings (or returns at once if the outputs are already complete). ``progress(done,
    total)`` is called as items finish.

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

    ``fsync=True`` fsyncs the finished files before they are renamed into place (and their
    folder after), so a returned result survives an OS crash; resuming after an OS crash is
    best effort (the journal is flushed to the OS, not fsynced, after every batch).
    """
    lst_path = os.path.abspath(os.fspath(lst_path))
    root = os.path.abspath(os.fspath(root))
    options = options or ImageOptions()
    check_workers(workers, executor)
    check_pack_paths(lst_path)  # no FIFO or device where the pack writes
    with OutputLock(lock_path(os.path.splitext(lst_path)[0]), output=output_paths(lst_path)[0],
                    remedy=beside_the_list(lst_path)):
        _check_interrupted(lst_path, resume, force)
        if not resume:
            check_outputs(output_paths(lst_path)[:2], [lst_path], force=force)
        job = make_job(root, options, pass_through, pack_label, allow_outside_root)
        settings = pack_settings(lst_path, root, job)
        started = time.perf_counter()
        total = count_items(lst_path)
        result = PackResult(lst_path, *output_paths(lst_path)[:2], None)
        if resume:
            remove_orphaned_temps(os.path.splitext(lst_path)[0])  # a killed run's .idx temps
        state = resume_state(lst_path, settings, resume, result)
        if state is None:
            return result  # resume found the outputs complete
        tasks = list_tasks(lst_path, ListTally(result, pack_label))
        tasks = (task for task in tasks if task[0] >= state.next_pos)
        checks = FoundChecks(total, max_missing, early=True)
        pack_tasks(job, tasks, lst_path, settings, state, result, checks, workers, executor,
                   progress, batch_size, window, fsync)
    result.seconds = time.perf_counter() - started
    return result


def _check_interrupted(lst_path: str, resume: bool, force: bool) -> None:
    """What an interrupted pack of ``lst_path`` left is never discarded unasked: without
    ``resume`` its partial files are refused (:class:`InterruptedPackError`) unless ``force``
    (then they are written over); an interrupted pack in parts (``recio.image.packing.shards``)
    is refused unless ``force`` deletes it (``pack_shards(resume=True)`` continues it)."""
    parts = PackProgress(staging_folder(os.path.splitext(lst_path)[0]))
    if parts.job() is not None:
        if not force:
            raise InterruptedPackError(
                f"an interrupted pack of this list in parts is kept in {parts.folder}; continue "
                "it with --resume (as it was started: --num-shards, --shard-size, --engine "
                "ray), or start over with --force (which deletes it)", path=lst_path)
        parts.discard()
    if not resume and not force and has_partial(lst_path):
        names = " and ".join(os.path.basename(p) for p in partial_paths(lst_path))
        raise InterruptedPackError(f"an interrupted pack of this list left {names}; continue "
                                   "it with --resume, or start over with --force (which "
                                   "deletes them)", path=lst_path)


@dataclass(frozen=True)
class FoundChecks:
    """When a pack counts as having found (nearly) nothing: ``early``, all of the first
    ``min(EARLY_MISSING, total)`` items missing; at the end (``max_missing`` not None),
    nothing packed or more than ``max_missing`` of the ``total`` items missing."""

    total: int
    max_missing: Optional[float]
    early: bool


def pack_tasks(job: PackJob, tasks: Iterator[Task], lst_path: str, settings: dict,
               state: Optional[JournalState], result: PackResult, checks: FoundChecks,
               workers: int, executor: str, progress: Optional[ProgressCallback],
               batch_size: int, window: int, fsync: bool) -> _InOrderSink:
    """Encode ``tasks`` into the outputs named after ``lst_path`` (``output_paths``), counting
    into ``result``: the pipeline behind :func:`pack_list` and ``pack_part``. ``state``:
    where a resumed pack continues (None: from the start)."""
    state = state or JournalState()
    out = PackOutput(lst_path, settings, state, fsync)
    sink = _InOrderSink(out, result, state, progress, job, checks)
    kind = AUTO_EXECUTOR if executor == "auto" else executor
    if not batch_size:
        batch_size = 8 if workers > 1 and kind == "process" else 4
    opencv_threads = set_opencv_threads(1)
    try:
        encode_in_order(job, tasks, workers, kind, batch_size, window or 4 * workers, sink)
        sink.check_found(final=True)
    except NothingFoundError:
        out.abort()
        out.remove_partial()  # nothing worth resuming
        raise
    except OSError as exc:  # a full disk: the partial output stays, to resume from
        if not isinstance(exc, OutputWriteError) and not is_write_only_error(exc):
            raise
        out.abort()
        raise write_failed(exc, out.rec_path, resumable=True) from exc
    finally:
        if opencv_threads is not None:
            set_opencv_threads(opencv_threads)
    out.close()
    result.errors_path = output_paths(lst_path)[2] if out.errors_written else None
    result.bytes = sink.offset
    return sink


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


def resume_state(lst_path: str, settings: dict, resume: bool, result: PackResult,
                 first: int = 0) -> Optional[JournalState]:
    """Where packing starts: the journal's progress when resuming an interrupted pack, a fresh
    start otherwise, or None when ``resume`` finds the outputs already complete (``result``
    then says so). ``result`` gets the counts of the items done before. ``first``: the
    position of the first item (a part of a list, ``recio.image.packing.parts``)."""
    rec_path, idx_path, errors_path = output_paths(lst_path)
    rec_partial, journal = partial_paths(lst_path)
    state = JournalState(first)
    if resume and has_partial(lst_path):
        if not os.path.exists(rec_partial):  # publishing was cut short after the .rec: the
            os.replace(rec_path, rec_partial)  # journal writes the .idx and report again
        state = recover_journal(rec_partial, journal, settings, first)
    elif resume and os.path.exists(rec_path) and os.path.exists(idx_path) \
            and not os.path.exists(rec_partial):
        result.already_done = True
        result.errors_path = errors_path if os.path.exists(errors_path) else None
        result.bytes = os.path.getsize(rec_path)
        return None
    result.resumed = state.done
    result.packed, result.skipped = state.packed, state.skipped
    result.skips = dict(state.skips)
    result.alpha_dropped, result.first_skip = state.alpha_dropped, state.first_skip
    return state


class _InOrderSink:
    """Takes the outcomes of each batch, in list order: frames and writes the records, has the
    journal vouch for them, counts packed and skipped items (by cause), reports progress, and
    stops a pack that finds nothing."""

    def __init__(self, out: "PackOutput", result: PackResult, state: JournalState,
                 progress: Optional[ProgressCallback], job: PackJob, checks: FoundChecks) -> None:
        self.out, self.result, self.progress = out, result, progress
        self.job, self.checks, self.total = job, checks, checks.total
        self.offset = state.rec_end
        self.done = state.done
        self.first_missing: Optional[str] = None
        if progress is not None:
            progress(self.done, self.total)

    def write(self, outcomes: List[Outcome]) -> None:
        """Write one batch's records and journal lines (a skip becomes an ``S`` line)."""
        entries = []
        rec, result = self.out.rec, self.result
        for pos, line, item, payload, cause, reason, alpha in outcomes:
            if payload is not None and item is not None:
                framed = encode_record(payload)
                try:
                    rec.write(framed)
                except OSError as exc:  # a full disk, an I/O error: kept for --resume
                    raise write_failed(exc, self.out.rec_path, resumable=True) from exc
                entries.append(f"R\t{pos}\t{item.index}\t{self.offset}\t"
                               f"{self.offset + len(framed)}\t{int(alpha)}\n")
                self.offset += len(framed)
                result.packed += 1
                result.alpha_dropped += alpha
            else:
                # pack_worker gives every outcome without a payload its cause and reason
                assert cause is not None and reason is not None
                key, path = ("-", "-") if item is None else (item.index, journal_field(item.path))
                entries.append(f"S\t{pos}\t{line}\t{key}\t{path}\t{journal_field(reason)}\t"
                               f"{cause}\n")
                result.skipped += 1
                result.skips[cause] = result.skips.get(cause, 0) + 1
                if result.first_skip is None:  # as the journal keeps it, for a resume
                    result.first_skip = (line, journal_field(reason))
                if cause == "missing" and self.first_missing is None and item is not None:
                    self.first_missing = item_location(self.job, item.path)
        self.out.write(entries)
        self.done += len(outcomes)
        if self.progress is not None:
            self.progress(self.done, self.total)
        self.check_found(final=False)

    def check_found(self, final: bool) -> None:
        """Raise :class:`NothingFoundError` when the pack has found (nearly) nothing
        (``self.checks``)."""
        checks, result = self.checks, self.result
        missing = result.skips.get("missing", 0)
        early = not final and checks.early and result.packed == 0 \
            and missing >= min(EARLY_MISSING, checks.total) and missing == self.done
        if early:
            raise nothing_found(result, self.done, self.first_missing, self.job.root,
                                self.out.lst_path)
        if final and checks.max_missing is not None:
            check_found(result, checks.total, checks.max_missing, self.first_missing,
                        self.job.root, self.out.lst_path)


def check_found(result: PackResult, total: int, max_missing: float, first_missing: Optional[str],
                root: str, lst_path: str) -> None:
    """The end-of-pack rule: :class:`NothingFoundError` when nothing of ``total`` items was
    packed or more than ``max_missing`` of them are missing (one owner for
    :func:`pack_list` and a shard set packed in parts)."""
    missing = result.skips.get("missing", 0)
    if result.packed == 0 or missing > max_missing * total:
        raise nothing_found(result, total, first_missing, root, lst_path)


def nothing_found(result: PackResult, tried: int, first_missing: Optional[str], root: str,
                  lst_path: str) -> NothingFoundError:
    """The error for a pack that found (nearly) nothing, saying what is missing where."""
    missing = result.skips.get("missing", 0)
    if missing and first_missing is not None:
        message = (f"{missing} of the {tried} images tried are missing under ROOT {root} "
                   f"(first: {first_missing}); is ROOT right? Nothing was written")
    elif not result.skips:
        message = ("no image to pack: the list holds no line; nothing was written (make one "
                   "with im2rec PREFIX ROOT --list)")
    else:
        first = ""
        if result.first_skip is not None:
            line, reason = result.first_skip
            first = f"; first, line {line}: {reason}"
        message = (f"no image could be packed ({describe_skips(result.skips)}{first}); "
                   "nothing was written")
    return NothingFoundError(message, path=lst_path)
