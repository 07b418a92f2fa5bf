"""The files one pack writes, and how an interrupted pack is resumed from them.

Crash safety and ``resume``: records go to ``PREFIX.rec.partial`` and every finished list item
is logged to ``PREFIX.pack.journal`` *after* its bytes are flushed. Only when the whole list is
done are the final ``.idx`` and ``.errors.tsv`` written (atomically) and ``.rec.partial``
renamed to ``.rec``, so an interrupted run never leaves a ``.rec``/``.idx`` pair that looks
complete. Resuming truncates both partial files to the last record the journal vouches for and
continues with the next list item; the result is byte-identical to an uninterrupted run.

Journal lines (tab-separated): a header ``#recio-pack-journal 1 <json settings>``, then
``R pos key offset end alpha`` for a written record (``alpha`` 1 when the image's transparency
was dropped) or ``S pos line key path reason cause`` for a skip, so a resumed pack's summary
counts the whole pack (the first skip, transparency dropped), as an uninterrupted one's.

The records are written by the one record writer (``recio.records.writer.RecordWriter``,
over the ``.rec.partial``); :class:`InOrderWriter` takes each batch of outcomes, in list order,
from the executors (``recio.image.packing.executors``), writes it and counts it.

Kept apart from the pipeline (``recio.image.packing.pipeline``) because this is the on-disk contract
that a resumed run, a pack in parts (``recio.image.packing.shards``) and the command line
(``im2rec --resume``) all rely on. Every path is ``recio.image.packing.paths.PackPaths``'.
"""
from __future__ import annotations

import errno
import json
import os
import shlex
import weakref
from dataclasses import asdict, dataclass
from typing import Callable, Dict, Iterator, List, Optional, Protocol, Tuple, Union, cast

from recio.errors import FileInUseError, NothingFoundError, RecordIOError
from recio.image.packing.paths import PackPaths
from recio.image.packing.settings import EARLY_MISSING, PackSettings
from recio.image.packing.worker import Outcome, PackJob, describe_skips, item_location
from recio.image.packing.resume_settings import check_same_settings
from recio.image.pixels.transform import ImageOptions
from recio.records.atomic import AtomicFile, ManagedWriter, OutputSet
from recio.records.framing import MAGIC, PART_HEADER
from recio.records.index_format import format_index
from recio.records.write_errors import is_write_only_error, write_failed
from recio.records.writer import RecordWriter

PathLike = Union[str, "os.PathLike[str]"]
#: ``progress(done, total)``: items of the list done so far
ProgressCallback = Callable[[int, int], None]

_JOURNAL_MAGIC = "#recio-pack-journal"
_JOURNAL_VERSION = 1
_BUFFER = 1 << 20


#: im2rec's option for each image setting a journal records (``journal_header``)
_OPTION_FLAGS = {"color": "--color", "resize": "--resize", "encoding": "--encoding",
                 "quality": "--quality", "max_pixels": "--max-pixels",
                 "resize_mode": "--resize-mode"}


def resume_command(journal: PathLike) -> Optional[str]:
    """The im2rec command that continues the pack whose journal is ``journal``: its list (the
    exact ``.lst``, so no other list is packed), its ROOT and every image setting it was
    started with that is not the default, then ``--resume``. None when the journal's header
    cannot be read (a pack killed before writing it)."""
    try:
        with open(journal, "rb") as f:
            magic, _, blob = f.readline().decode("utf-8").rstrip("\n").split(" ", 2)
        saved = json.loads(blob)
        lst, root, options = saved["lst"], saved["root"], saved["options"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if magic != _JOURNAL_MAGIC:
        return None
    words = ["im2rec", lst, root]
    defaults = asdict(ImageOptions())
    for name, flag in _OPTION_FLAGS.items():
        if options.get(name, defaults[name]) != defaults[name]:
            words += [flag, str(options[name])]
    if options.get("center_crop"):
        words.append("--center-crop")
    if options.get("exif_transpose") is not None:
        words.append("--exif-transpose" if options["exif_transpose"] else "--no-exif-transpose")
    words += [flag for flag, key in (("--pass-through", "pass_through"),
                                     ("--pack-label", "pack_label")) if saved.get(key)]
    return " ".join(shlex.quote(w) for w in words + ["--resume"])


def journal_field(text: object) -> str:
    """``text`` as one journal field: its whitespace (tabs, newlines) collapsed to spaces."""
    return " ".join(str(text).split())


def journal_header(paths: PackPaths, root: str, settings: PackSettings) -> dict:
    """What the journal's header records of a pack, which ``resume`` requires unchanged: the
    list (path, size, mtime), ROOT and the image settings."""
    st = os.stat(paths.lst)
    return {"lst": paths.lst, "lst_size": st.st_size, "lst_mtime_ns": st.st_mtime_ns,
            "root": os.path.abspath(root), "options": asdict(settings.options),
            "pass_through": settings.pass_through, "pack_label": settings.pack_label}


class JournalState:
    """What the journal vouches for: next position, records, skips, bytes; recovered from a
    journal by a resume, then counted on by :class:`InOrderWriter`. ``first``: the position
    of the pack's first item (a part of a list starts past 0)."""

    def __init__(self, first: int = 0) -> None:
        self.first = first
        self.next_pos = first
        self.packed = 0
        self.skipped = 0
        self.rec_end = 0
        self.journal_end = 0
        self.skips: Dict[str, int] = {}
        self.alpha_dropped = 0
        #: ``(line, reason)`` of the first skip
        self.first_skip: Optional[Tuple[int, str]] = None

    @property
    def done(self) -> int:
        """Items the journal vouches for."""
        return self.next_pos - self.first


def recover_journal(rec_partial: str, journal: str, settings: dict,
                    first_pos: int = 0) -> JournalState:
    """Read a journal and keep the prefix that the ``.rec.partial`` on disk backs up; its
    items are numbered from ``first_pos`` (a part of a list: its first item's position)."""
    state = JournalState(first_pos)
    rec_size = os.path.getsize(rec_partial)
    with open(journal, "rb") as f:
        first = f.readline()
        if not first.endswith(b"\n"):
            return state  # killed before the journal's first line was complete: start over
        try:
            magic, version, blob = first.decode("utf-8").rstrip("\n").split(" ", 2)
            saved = json.loads(blob)
        except ValueError:
            raise RecordIOError("not a recio pack journal; start over with --force (which "
                                "deletes it and the .rec.partial beside it)",
                                path=journal) from None
        if magic != _JOURNAL_MAGIC or int(version) != _JOURNAL_VERSION:
            raise RecordIOError(f"journal version {version} is not {_JOURNAL_VERSION}; start "
                                "over with --force (which deletes it)", path=journal)
        kept = " and ".join(os.path.basename(p) for p in (rec_partial, journal))
        check_same_settings(saved, settings, settings.get("lst", journal), kept)
        state.journal_end = len(first)
        last_offset = 0
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # a line cut short by the interruption
            fields = raw.rstrip(b"\n").split(b"\t")
            try:
                kind, pos = fields[0], int(fields[1])
                if pos != state.next_pos:
                    break
                if kind == b"R" and len(fields) in (5, 6):
                    record_offset, end = int(fields[3]), int(fields[4])
                    if end > rec_size:
                        break  # its bytes never reached the disk
                    state.packed += 1
                    state.alpha_dropped += int(fields[5]) if len(fields) == 6 else 0
                    state.rec_end, last_offset = end, record_offset
                elif kind == b"S" and len(fields) >= 6:
                    state.skipped += 1
                    cause = fields[6].decode() if len(fields) > 6 else "not_an_image"
                    state.skips[cause] = state.skips.get(cause, 0) + 1
                    if state.first_skip is None:
                        state.first_skip = (int(fields[2]),
                                            fields[5].decode("utf-8", "surrogateescape"))
                else:
                    break
            except (ValueError, IndexError):
                break
            state.next_pos = pos + 1
            state.journal_end += len(raw)
    if state.rec_end:
        with open(rec_partial, "rb") as f:
            f.seek(last_offset)
            head = f.read(PART_HEADER.size)
        if len(head) < PART_HEADER.size or PART_HEADER.unpack(head)[0] != MAGIC:
            raise RecordIOError("the partial record file does not match its journal; start "
                                "over with --force (which deletes it)", path=rec_partial)
    return state


def _journal_entries(journal: str) -> Iterator[List[str]]:
    with open(journal, encoding="utf-8", errors="surrogateescape", newline="\n") as f:
        f.readline()
        for line in f:
            yield line.rstrip("\n").split("\t")


class PackOutput(ManagedWriter):
    """The files of one pack, with recio's writer lifecycle
    (``recio.records.atomic.ManagedWriter``).

    Records go to ``.rec.partial`` through ``records``, a ``RecordWriter`` over it, and each
    finished item to the journal, the journal line only after the record's bytes were handed
    to the OS. ``close()`` writes ``.idx`` and ``.errors.tsv`` from the journal and renames
    ``.rec.partial`` to ``.rec``, then the others into place (an old ``.idx`` goes first, an
    old ``.errors.tsv`` too when nothing failed this time), then deletes the journal.
    ``abort()`` (an error, Ctrl-C) and an output dropped without ``close()`` keep the
    ``.partial`` and the journal, which ``resume`` continues from; no final name appears.
    Opening is all or nothing: a fresh ``.rec.partial`` whose journal cannot be created is
    deleted again.
    """

    def __init__(self, paths: PackPaths, header: dict, state: JournalState,
                 fsync: bool) -> None:
        self.paths = paths
        self.rec_path = paths.rec
        self.fsync = fsync
        if state.journal_end:  # a journal whose header (at least) is kept: go on from it
            self.rec = open(paths.rec_partial, "r+b", buffering=0)
            try:
                self.rec.truncate(state.rec_end)
                self.rec.seek(state.rec_end)
                self.log = open(paths.journal, "r+b", buffering=_BUFFER)
                self.log.truncate(state.journal_end)
                self.log.seek(state.journal_end)
            except BaseException:
                self.rec.close()
                raise
        else:
            self._start_fresh(header)
        #: frames and buffers the records (a write that fails aborts this output)
        self.records = RecordWriter._sink(self.rec, paths.rec, weakref.ref(self),
                                          offset=state.rec_end)
        self._begin(OutputSet([AtomicFile.adopt(paths.rec, paths.rec_partial, self.rec,
                                                keep_on_discard=True, fsync=fsync)]),
                    f"pack output {paths.rec_partial!r}")

    def _start_fresh(self, header: dict) -> None:
        """Create ``.rec.partial`` and the journal with its header; all or nothing (a full
        disk leaves neither, and says so of the ``.rec``)."""
        made: List[str] = []
        files: list = []
        try:
            self.rec = open(self.paths.rec_partial, "wb", buffering=0)
            made.append(self.paths.rec_partial)
            files.append(self.rec)
            self.log = open(self.paths.journal, "wb", buffering=_BUFFER)
            made.append(self.paths.journal)
            files.append(self.log)
            self.log.write(f"{_JOURNAL_MAGIC} {_JOURNAL_VERSION} "
                           f"{json.dumps(header)}\n".encode())
            self.log.flush()
        except BaseException as exc:
            for f in files:
                try:
                    f.close()
                except OSError:
                    pass  # the bytes it still buffered go with the file
            for path in made:
                os.unlink(path)
            if is_write_only_error(exc) or getattr(exc, "errno", None) == errno.EIO:
                raise write_failed(cast(OSError, exc), self.rec_path) from exc
            raise

    def write(self, entries: List[str]) -> None:
        """Vouch in the journal for a batch whose records were written to ``self.records``."""
        try:
            self.records.flush()  # record bytes reach the OS before the journal vouches
            self.log.write("".join(entries).encode("utf-8", "surrogateescape"))
            self.log.flush()
        except OSError as exc:  # a full disk: what the journal vouches for stays, to resume
            raise write_failed(exc, self.rec_path, resumable=True) from exc

    def _finish(self) -> None:
        self.records._finish()
        self.records.closed = True
        self.log.close()
        outputs = self._outputs
        idx = outputs.add(AtomicFile(self.paths.idx, "wb", fsync=self.fsync))
        errors: Optional[AtomicFile] = None
        keys: List[str] = []
        offsets: List[int] = []
        for fields in _journal_entries(self.paths.journal):
            if fields[0] == "R":
                keys.append(fields[2])
                offsets.append(int(fields[3]))
            else:
                if errors is None:
                    errors = outputs.add(AtomicFile(self.paths.errors, "wb", fsync=self.fsync))
                    errors.file.write(b"line\tindex\tpath\treason\n")
                errors.file.write("\t".join(fields[2:6]).encode("utf-8", "surrogateescape")
                                  + b"\n")
            if len(keys) >= 8192:
                idx.file.write(format_index(keys, offsets))
                keys.clear()
                offsets.clear()
        idx.file.write(format_index(keys, offsets))
        if errors is None:
            outputs.obsolete.append(self.paths.errors)  # from an earlier run; none failed now
        self.errors_written = errors is not None

    def _drop(self) -> None:
        self.records.closed = True
        self.records._drop()
        try:
            self.log.close()
        except OSError:  # a full disk: a journal line cut short is one a resume ignores
            pass

    def remove_partial(self) -> None:
        """Delete the ``.rec.partial`` and the journal (after ``abort()``): for a pack that is
        not worth resuming."""
        for path in self.paths.partial:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Write ``.idx`` and ``.errors.tsv`` and move everything into place (journal last)."""
        if self.closed:
            return
        try:
            super().close()
        except FileInUseError as exc:  # Windows: the .rec.partial and the journal are kept
            raise FileInUseError("is open or memory-mapped in a program, and Windows cannot "
                                 "replace it; the packed records are kept: close what reads "
                                 "it, then continue the pack (resume=True, --resume)",
                                 path=exc.path) from None
        except OSError as exc:  # a full disk while the .idx is written: a resume writes it
            raise write_failed(exc, self.rec_path, resumable=True) from exc
        os.unlink(self.paths.journal)


class Counts(Protocol):
    """What the found-nothing rules read of a pack's counts (a ``JournalState``, or the
    ``PackResult`` of a pack in parts)."""

    packed: int
    skips: Dict[str, int]
    first_skip: Optional[Tuple[int, str]]


@dataclass(frozen=True)
class FoundChecks:
    """When a pack counts as having found (nearly) nothing: ``early``, all of the first
    ``min(EARLY_MISSING, total)`` items missing; at the end (``max_missing`` not None),
    nothing packed or more than ``max_missing`` of the ``total`` items missing."""

    total: int
    max_missing: Optional[float]
    early: bool


class InOrderWriter:
    """Takes the outcomes of each batch, in list order (``recio.image.packing.executors`` hands
    them over): writes the records through the output's ``RecordWriter``, has the journal
    vouch for them, counts packed and skipped items (by cause) into ``state``, reports
    progress, and stops a pack that finds nothing (``checks``)."""

    def __init__(self, out: PackOutput, state: JournalState,
                 progress: Optional[ProgressCallback], job: PackJob, checks: FoundChecks) -> None:
        self.out, self.state, self.progress = out, state, progress
        self.job, self.checks, self.total = job, checks, checks.total
        self.first_missing: Optional[str] = None
        if progress is not None:
            progress(state.done, self.total)

    def write(self, outcomes: List[Outcome]) -> None:
        """Write one batch's records and journal lines (a skip becomes an ``S`` line)."""
        entries = []
        records, state = self.out.records, self.state
        try:
            for pos, line, item, payload, cause, reason, alpha in outcomes:
                if payload is not None and item is not None:
                    offset = records.write(payload)
                    entries.append(f"R\t{pos}\t{item.index}\t{offset}\t{records.tell()}\t"
                                   f"{int(alpha)}\n")
                    state.packed += 1
                    state.alpha_dropped += alpha
                else:
                    # pack_worker gives every outcome without a payload its cause and reason
                    assert cause is not None and reason is not None
                    key, path = ("-", "-") if item is None else (item.index,
                                                                 journal_field(item.path))
                    entries.append(f"S\t{pos}\t{line}\t{key}\t{path}\t"
                                   f"{journal_field(reason)}\t{cause}\n")
                    state.skipped += 1
                    state.skips[cause] = state.skips.get(cause, 0) + 1
                    if state.first_skip is None:  # as the journal keeps it, for a resume
                        state.first_skip = (line, journal_field(reason))
                    if cause == "missing" and self.first_missing is None and item is not None:
                        self.first_missing = item_location(self.job, item.path)
        except OSError as exc:  # a full disk, an I/O error: kept for --resume
            raise write_failed(exc, self.out.rec_path, resumable=True) from exc
        self.out.write(entries)
        state.next_pos += len(outcomes)
        state.rec_end = records.tell()
        if self.progress is not None:
            self.progress(state.done, self.total)
        self.check_found(final=False)

    def check_found(self, final: bool) -> None:
        """Raise :class:`NothingFoundError` when the pack has found (nearly) nothing
        (``self.checks``)."""
        checks, state = self.checks, self.state
        missing = state.skips.get("missing", 0)
        early = not final and checks.early and state.packed == 0 \
            and missing >= min(EARLY_MISSING, checks.total) and missing == state.done
        if early:
            raise _nothing_found(state, state.done, self.first_missing, self.job.root,
                                self.out.paths.lst)
        if final and checks.max_missing is not None:
            check_found(state, checks.total, checks.max_missing, self.first_missing,
                        self.job.root, self.out.paths.lst)


def check_found(counts: Counts, total: int, max_missing: float, first_missing: Optional[str],
                root: str, lst_path: str) -> None:
    """The end-of-pack rule: :class:`NothingFoundError` when nothing of ``total`` items was
    packed or more than ``max_missing`` of them are missing (one owner for ``pack_list`` and
    a pack in parts)."""
    missing = counts.skips.get("missing", 0)
    if counts.packed == 0 or missing > max_missing * total:
        raise _nothing_found(counts, total, first_missing, root, lst_path)


def _nothing_found(counts: Counts, tried: int, first_missing: Optional[str], root: str,
                  lst_path: str) -> NothingFoundError:
    """The error for a pack that found (nearly) nothing, saying what is missing where."""
    missing = counts.skips.get("missing", 0)
    if missing and first_missing is not None:
        message = (f"{missing} of the {tried} images tried are missing under ROOT {root} "
                   f"(first: {first_missing}); is ROOT right? Nothing was written")
    elif not counts.skips:
        message = ("no image to pack: the list holds no line; nothing was written (make one "
                   "with im2rec PREFIX ROOT --list)")
    else:
        first = ""
        if counts.first_skip is not None:
            line, reason = counts.first_skip
            first = f"; first, line {line}: {reason}"
        message = (f"no image could be packed ({describe_skips(counts.skips)}{first}); "
                   "nothing was written")
    return NothingFoundError(message, path=lst_path)


