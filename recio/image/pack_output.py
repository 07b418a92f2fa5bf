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

Kept apart from the pipeline (``recio.image.packing``) because this is the on-disk contract
that a resumed run, a pack in parts (``recio.image.shard_pack``) and the command line
(``im2rec --resume``) all rely on.
"""
from __future__ import annotations

import errno
import json
import os
import shlex
from dataclasses import asdict
from typing import Dict, Iterator, List, Optional, Tuple, Union, cast

from recio import storage
from recio.errors import FileInUseError, RecordIOError
from recio.image.pack_worker import PackJob
from recio.image.resume_settings import check_same_settings
from recio.image.transform import ImageOptions
from recio.records.atomic import AtomicFile, ManagedWriter, OutputSet
from recio.records.framing import MAGIC, PART_HEADER
from recio.records.index_format import format_index, sibling_index_path
from recio.records.lock import lock_path, pack_journal_path
from recio.records.write_errors import is_write_only_error, write_failed

PathLike = Union[str, "os.PathLike[str]"]

JOURNAL_MAGIC = "#recio-pack-journal"
JOURNAL_VERSION = 1
_BUFFER = 1 << 20


def output_paths(lst_path: PathLike) -> Tuple[str, str, str]:
    """``(rec, idx, errors.tsv)`` paths for a list: the same name with another suffix."""
    stem = os.path.splitext(os.fspath(lst_path))[0]
    return stem + ".rec", sibling_index_path(stem + ".rec"), stem + ".errors.tsv"


def beside_the_list(lst_path: PathLike) -> str:
    """What to do when the folder of a list refuses its outputs (read-only, no permission):
    a pack writes them beside the list, so pack a copy of the list from elsewhere."""
    name = os.path.basename(os.fspath(lst_path))
    return (f"a pack writes its outputs beside the list: copy {name} into a folder you can "
            "write to and pack that copy (its paths are relative to ROOT: the same images)")


def partial_paths(lst_path: PathLike) -> Tuple[str, str]:
    """``(rec.partial, pack.journal)``: where an unfinished pack keeps its progress."""
    stem = os.path.splitext(os.fspath(lst_path))[0]
    return stem + ".rec.partial", pack_journal_path(stem)


def check_pack_paths(lst_path: PathLike) -> None:
    """Refuse a pack of ``lst_path`` before it starts when a file it writes, reads back or
    deletes (outputs, error report, partial files, lock) is a FIFO, a device, a socket or a
    directory (``recio.storage.regular``): opening one would block, and nothing is ever
    written beside it or deleted in its place. URLs pass."""
    stem = os.path.splitext(os.fspath(lst_path))[0]
    for path in (*output_paths(lst_path), *partial_paths(lst_path), lock_path(stem)):
        storage.check_output(path)


def has_partial(lst_path: PathLike) -> bool:
    """True when an interrupted pack of this list left progress that ``resume`` can use: its
    ``.rec.partial`` and journal, or its journal beside the ``.rec`` it was publishing when it
    stopped (the journal goes last)."""
    rec_partial, journal = partial_paths(lst_path)
    return os.path.exists(journal) and (os.path.exists(rec_partial)
                                        or os.path.exists(output_paths(lst_path)[0]))


#: im2rec's option for each image setting a journal records (``pack_settings``)
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
    if magic != JOURNAL_MAGIC:
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


def pack_settings(lst_path: str, root: str, job: PackJob) -> dict:
    """What the journal's header records of a pack, which ``resume`` requires unchanged: the
    list (path, size, mtime), ROOT and the image settings."""
    st = os.stat(lst_path)
    return {"lst": os.path.abspath(lst_path), "lst_size": st.st_size,
            "lst_mtime_ns": st.st_mtime_ns,
            "root": os.path.abspath(root), "options": asdict(job.options),
            "pass_through": job.pass_through, "pack_label": job.pack_label}


class JournalState:
    """Counts recovered from a journal: next position, records, skips, bytes kept. ``first``:
    the position of the pack's first item (a part of a list starts past 0)."""

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
        if magic != JOURNAL_MAGIC or int(version) != JOURNAL_VERSION:
            raise RecordIOError(f"journal version {version} is not {JOURNAL_VERSION}; start "
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

    Records go to ``.rec.partial`` and each finished item to the journal, the journal line only
    after the record's bytes were handed to the OS. ``close()`` writes ``.idx`` and
    ``.errors.tsv`` from the journal and renames ``.rec.partial`` to ``.rec``, then the others
    into place (an old ``.idx`` goes first, an old ``.errors.tsv`` too when nothing failed this
    time), then deletes the journal. ``abort()`` (an error, Ctrl-C) and an output dropped
    without ``close()`` keep the ``.partial`` and the journal, which ``resume`` continues from;
    no final name appears. Opening is all or nothing: a fresh ``.rec.partial`` whose journal
    cannot be created is deleted again.
    """

    def __init__(self, lst_path: str, settings: dict, state: JournalState, fsync: bool) -> None:
        self.lst_path = lst_path
        self.rec_path, self.idx_path, self.errors_path = output_paths(lst_path)
        self.rec_partial, self.journal = partial_paths(lst_path)
        self.fsync = fsync
        if state.journal_end:  # a journal whose header (at least) is kept: go on from it
            self.rec = open(self.rec_partial, "r+b", buffering=_BUFFER)
            try:
                self.rec.truncate(state.rec_end)
                self.rec.seek(state.rec_end)
                self.log = open(self.journal, "r+b", buffering=_BUFFER)
                self.log.truncate(state.journal_end)
                self.log.seek(state.journal_end)
            except BaseException:
                self.rec.close()
                raise
        else:
            self._start_fresh(settings)
        self._begin(OutputSet([AtomicFile.adopt(self.rec_path, self.rec_partial, self.rec,
                                                keep_on_discard=True, fsync=fsync)]),
                    f"pack output {self.rec_partial!r}")

    def _start_fresh(self, settings: dict) -> None:
        """Create ``.rec.partial`` and the journal with its header; all or nothing (a full
        disk leaves neither, and says so of the ``.rec``)."""
        made: List[str] = []
        files: list = []
        try:
            self.rec = open(self.rec_partial, "wb", buffering=_BUFFER)
            made.append(self.rec_partial)
            files.append(self.rec)
            self.log = open(self.journal, "wb", buffering=_BUFFER)
            made.append(self.journal)
            files.append(self.log)
            self.log.write(f"{JOURNAL_MAGIC} {JOURNAL_VERSION} "
                           f"{json.dumps(settings)}\n".encode())
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
        """Vouch in the journal for a batch whose records were written to ``self.rec``."""
        try:
            self.rec.flush()  # record bytes reach the OS before the journal vouches for them
            self.log.write("".join(entries).encode("utf-8", "surrogateescape"))
            self.log.flush()
        except OSError as exc:  # a full disk: what the journal vouches for stays, to resume
            raise write_failed(exc, self.rec_path, resumable=True) from exc

    def _finish(self) -> None:
        self.rec.flush()
        self.log.close()
        outputs = self._outputs
        idx = outputs.add(AtomicFile(self.idx_path, "wb", fsync=self.fsync))
        errors: Optional[AtomicFile] = None
        keys: List[str] = []
        offsets: List[int] = []
        for fields in _journal_entries(self.journal):
            if fields[0] == "R":
                keys.append(fields[2])
                offsets.append(int(fields[3]))
            else:
                if errors is None:
                    errors = outputs.add(AtomicFile(self.errors_path, "wb", fsync=self.fsync))
                    errors.file.write(b"line\tindex\tpath\treason\n")
                errors.file.write("\t".join(fields[2:6]).encode("utf-8", "surrogateescape")
                                  + b"\n")
            if len(keys) >= 8192:
                idx.file.write(format_index(keys, offsets))
                keys.clear()
                offsets.clear()
        idx.file.write(format_index(keys, offsets))
        if errors is None:
            outputs.obsolete.append(self.errors_path)  # from an earlier run; none failed now
        self.errors_written = errors is not None

    def _drop(self) -> None:
        try:
            self.log.close()
        except OSError:  # a full disk: a journal line cut short is one a resume ignores
            pass

    def remove_partial(self) -> None:
        """Delete the ``.rec.partial`` and the journal (after ``abort()``): for a pack that is
        not worth resuming."""
        for path in (self.rec_partial, self.journal):
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
        os.unlink(self.journal)


__all__ = ["output_paths", "beside_the_list", "partial_paths", "check_pack_paths", "has_partial",
           "PackOutput", "JournalState", "recover_journal", "pack_settings", "journal_field",
           "resume_command"]
