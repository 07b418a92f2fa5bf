"""im2rec's pack step: turn a ``.lst`` image list into ``.rec`` + ``.idx``, in list order.

Workers (threads or processes) decode, resize and encode images; the calling thread writes the
records strictly in list order from a bounded window of batches in flight, so memory stays
bounded however long the list is. A bad image never stops the run: it is skipped, counted and
reported in ``PREFIX.errors.tsv`` (line, index, path, reason).

Crash safety and ``resume``: records go to ``PREFIX.rec.partial`` and every finished list item
is logged to ``PREFIX.pack.journal`` *after* its bytes are flushed. Only when the whole list is
done are the final ``.idx`` and ``.errors.tsv`` written (atomically) and ``.rec.partial``
renamed to ``.rec``, so an interrupted run never leaves a ``.rec``/``.idx`` pair that looks
complete. Resuming truncates both partial files to the last record the journal vouches for and
continues with the next list item; the result is byte-identical to an uninterrupted run.

Journal lines (tab-separated): a header ``#recio-pack-journal 1 <json settings>``, then
``R pos key offset end`` for a written record or ``S pos line key path reason`` for a skip.
"""
from __future__ import annotations

import difflib
import errno
import json
import multiprocessing
import os
import re
import signal
import stat
import threading
import time
import warnings
from collections import deque
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing.pool import Pool
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from PIL import Image

from recio import portable, storage
from recio.errors import (
    FileInUseError,
    ImageError,
    InterruptedPackError,
    ListFileError,
    NothingFoundError,
    RecordIOError,
    plural,
)
from recio.image import codec
from recio.image.codec import ImageOptions, has_alpha, set_opencv_threads, transform_image
from recio.image.header import IRHeader, pack
from recio.image.lists import (
    ListItem,
    foreign_list_path,
    list_path_candidates,
    native_list_path,
    near_folders,
    read_list_entries,
)
from recio.image.pack_progress import PackProgress, staging_folder
from recio.records.atomic import (
    AtomicFile,
    ManagedWriter,
    OutputSet,
    check_outputs,
    remove_orphaned_temps,
)
from recio.records.framing import MAGIC, MAX_RECORD_LENGTH, PART_HEADER, encode_record
from recio.records.index_format import format_index, sibling_index_path
from recio.records.lock import OutputLock, lock_path
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]
ProgressCallback = Callable[[int, int], None]

JOURNAL_MAGIC = "#recio-pack-journal"
JOURNAL_VERSION = 1
#: how workers run: threads share one process (the decoders, OpenCV and NumPy's large array
#: operations release the GIL while they decode, resize and encode; how far two threads scale
#: in each mode is measured by benchmarks/bench_im2rec.py); processes avoid the GIL entirely.
#: "auto" means threads:
#: the same CPU time per image without pickling, and less memory (measurements in
#: benchmarks/README.md).
EXECUTORS = ("auto", "thread", "process")
AUTO_EXECUTOR = "thread"
_BUFFER = 1 << 20


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


def find_lists(prefix: PathLike) -> List[str]:
    """The ``.lst`` files im2rec packs for ``prefix``: files in its folder (or in ``prefix`` if
    that is a folder) whose absolute path starts with ``prefix`` and ends in ``.lst``; sorted."""
    prefix = os.path.abspath(os.fspath(prefix))
    folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
    found = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if path.startswith(prefix) and name.endswith(".lst") and os.path.isfile(path):
            found.append(path)
    return sorted(found)


def output_paths(lst_path: PathLike) -> Tuple[str, str, str]:
    """``(rec, idx, errors.tsv)`` paths for a list: the same name with another suffix."""
    stem = os.path.splitext(os.fspath(lst_path))[0]
    return stem + ".rec", sibling_index_path(stem + ".rec"), stem + ".errors.tsv"


def partial_paths(lst_path: PathLike) -> Tuple[str, str]:
    """``(rec.partial, pack.journal)``: where an unfinished pack keeps its progress."""
    stem = os.path.splitext(os.fspath(lst_path))[0]
    return stem + ".rec.partial", stem + ".pack.journal"


def has_partial(lst_path: PathLike) -> bool:
    """True when an interrupted pack of this list left progress that ``resume`` can use: its
    ``.rec.partial`` and journal, or its journal beside the ``.rec`` it was publishing when it
    stopped (the journal goes last)."""
    rec_partial, journal = partial_paths(lst_path)
    return os.path.exists(journal) and (os.path.exists(rec_partial)
                                        or os.path.exists(output_paths(lst_path)[0]))


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


# ---------------------------------------------------------------------------------------------
# the work one worker does


@dataclass(frozen=True)
class _Job:
    root: str
    options: ImageOptions
    pass_through: bool
    pack_label: bool
    allow_outside_root: bool = False
    real_root: str = ""
    #: Linux's /proc/self/fd is there: ROOT is checked on the opened file
    proc_fd: bool = False
    #: ROOT is a URL (``s3://bucket/images``): each image is one GET
    storage_options: StorageOptions = None


def make_job(root: str, options: ImageOptions, pass_through: bool, pack_label: bool,
             allow_outside_root: bool, storage_options: StorageOptions = None) -> _Job:
    """The settings every worker needs, for a local ROOT (made absolute) or a URL."""
    if storage.is_url(root):
        return _Job(storage.absolute(root), options, pass_through, pack_label,
                    allow_outside_root, storage_options=storage_options)
    root = os.path.abspath(os.fspath(root))
    return _Job(root, options, pass_through, pack_label, allow_outside_root,
                os.path.realpath(root), portable.has_proc_fd())


#: (position, line number, item, or None and the reason a malformed line was refused)
Task = Tuple[int, int, Optional[ListItem], Optional[str]]
#: (position, line number, item, payload, cause, reason, alpha dropped)
Outcome = Tuple[int, int, Optional[ListItem], Optional[bytes], Optional[str], Optional[str],
                bool]


class _Skip(Exception):
    """Why one item cannot be packed: ``cause`` (one of ``SKIP_CAUSES``) and a reason."""

    def __init__(self, cause: str, reason: str) -> None:
        super().__init__(reason)
        self.cause, self.reason = cause, reason


def _encode_one(job: _Job, task: Task) -> Outcome:
    """Read, transform and pack one list item; a failure becomes a cause and a reason, never
    an error."""
    pos, line, item, refused = task
    if item is None:
        return pos, line, None, None, "malformed_line", refused, False
    try:
        data = _read_image_file(job, item.path)
        alpha = (not job.pass_through and has_alpha(data)
                 and not (job.options.color == -1 and job.options.encoding == ".png"))
        payload = pack(_header(job, item), data if job.pass_through else
                       _transform(job, data, _location(job, item.path)))
    except _Skip as skip:
        return pos, line, item, None, skip.cause, skip.reason, False
    if len(payload) >= MAX_RECORD_LENGTH:
        return pos, line, item, None, "too_large", (
            f"record of {len(payload)} bytes is too large: RecordIO records hold at most "
            f"{MAX_RECORD_LENGTH - 1} bytes", False)
    return pos, line, item, payload, None, None, alpha


def _header(job: _Job, item: ListItem) -> IRHeader:
    labels = item.labels
    return IRHeader(0, list(labels) if job.pack_label and len(labels) > 1 else labels[0],
                    item.index, 0)


def _transform(job: _Job, data: bytes, path: str) -> bytes:
    try:
        return transform_image(data, job.options, path)
    except ImageError as exc:
        raise _Skip("not_an_image", exc.message) from None


def _inside(path: str, root: str) -> bool:
    path, root = os.path.normcase(path), os.path.normcase(root)  # Windows: C:\Data is c:\data
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _location(job: _Job, relpath: str) -> str:
    """Where a list item's file or object is (for messages)."""
    if storage.is_url(job.root):
        return storage.join(job.root, relpath.replace("\\", "/"))
    return os.path.join(job.root, native_list_path(relpath))


def _read_image_file(job: _Job, relpath: str) -> bytes:
    """The bytes of a list item's file: a regular file under ROOT (after symlinks), opened
    without blocking (a FIFO or a device never hangs or floods the pack), smaller than a
    record can hold; anything else raises ``_Skip``.

    An absolute path or one with ``..`` is checked with ``realpath`` before it is opened. Other
    paths, where ``/proc/self/fd`` exists (Linux), are checked on the file actually opened: one
    ``readlink`` instead of ``realpath``'s walk of every path component (a symlink out of ROOT
    is opened, without blocking, but never read); elsewhere with ``realpath`` first.

    On POSIX a ``\\`` in ``relpath`` is a separator (a list written on Windows); only when no
    file exists there are the other names it may mean tried (the name with the backslashes
    itself, a cp1252 reading of a path that is not UTF-8: ``lists.list_path_candidates``).

    Under a URL ROOT the item is one GET of ``ROOT/relpath``; an absolute path or one with
    ``..`` is outside ROOT. A missing object is skipped; a network error is raised (a
    transient failure must fail the pack, or its retry, not drop an image)."""
    if storage.is_url(job.root):
        return _read_image_object(job, relpath)
    missing: Optional[_Skip] = None
    for candidate in list_path_candidates(relpath):
        try:
            return _read_local_file(job, candidate)
        except _Skip as skip:
            if skip.cause != "missing":
                raise
            missing = missing or skip
    raise missing or _Skip("missing", "no such file")


def _read_local_file(job: _Job, relpath: str) -> bytes:
    """:func:`_read_image_file` for ``relpath`` as this OS names it."""
    path = os.path.join(job.root, relpath)
    check_root = not job.allow_outside_root
    if check_root and (not job.proc_fd or os.path.isabs(relpath)
                       or ".." in relpath.replace("\\", "/").split("/")):
        check_root = False
        if not _inside(os.path.realpath(path), job.real_root):
            raise _Skip("outside_root", _OUTSIDE_ROOT)
    if not portable.opens_without_blocking():  # a FIFO would block open(); Windows cannot
        try:                                     # open a folder: look before opening
            _check_regular(os.stat(path))
        except OSError:
            pass  # open() says what is wrong
    try:
        fd = portable.open_fd(path, portable.nonblocking_read_flags())
    except FileNotFoundError:
        raise _Skip("missing", "no such file") from None
    except OSError as exc:
        cause = "missing" if exc.errno == errno.ENOTDIR else "unreadable"
        raise _Skip(cause, f"cannot open file: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. a path the OS cannot take
        raise _Skip("unreadable", f"cannot open file: {exc}") from None
    try:
        if check_root and not _inside(portable.opened_path(fd, path), job.real_root):
            raise _Skip("outside_root", _OUTSIDE_ROOT)
        st = os.fstat(fd)
        _check_regular(st)
        if st.st_size >= MAX_RECORD_LENGTH:
            raise _Skip("too_large", f"file of {st.st_size} bytes is larger than a RecordIO "
                        f"record can hold ({MAX_RECORD_LENGTH - 1} bytes)")
        data = _read_all(fd, st.st_size)
    except OSError as exc:
        raise _Skip("unreadable", f"cannot read file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return _usable(data, "file (grown while read)")


def _check_regular(st: os.stat_result) -> None:
    """Skip anything but a regular file (a folder, a FIFO, a device, a socket)."""
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO"
                if stat.S_ISFIFO(st.st_mode) else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket")
        raise _Skip("not_a_file", f"is {kind}, not a regular file")


def _usable(data: bytes, what: str) -> bytes:
    """``data`` unless it is empty or larger than a record can hold (``what`` was read)."""
    if not data:
        raise _Skip("not_an_image", "empty file")
    if len(data) >= MAX_RECORD_LENGTH:
        raise _Skip("too_large", f"{what} of {len(data)} bytes is larger than a RecordIO "
                    f"record can hold ({MAX_RECORD_LENGTH - 1} bytes)")
    return data


def _read_image_object(job: _Job, relpath: str) -> bytes:
    key = relpath.replace("\\", "/")  # an object key's separator is / (a Windows list's \\)
    if not job.allow_outside_root and (key.startswith("/") or ".." in key.split("/")
                                       or storage.is_url(relpath)
                                       or storage.is_windows_absolute(relpath)):
        raise _Skip("outside_root", _OUTSIDE_ROOT)
    url = relpath if storage.is_url(relpath) else storage.join(job.root, key)
    try:
        data = storage.read_bytes(url, job.storage_options)
    except FileNotFoundError:
        raise _Skip("missing", "no such object") from None
    except IsADirectoryError:
        raise _Skip("not_a_file", "is a folder, not an object") from None
    except PermissionError as exc:
        raise _Skip("unreadable", f"cannot read object: {exc.strerror or exc}") from None
    return _usable(data, "object")


_OUTSIDE_ROOT = ("resolves outside ROOT (an absolute path, '..' or a symlink); pass "
                 "--allow-outside-root to read it")
def _read_all(fd: int, size: int) -> bytes:
    """The whole file, normally in one ``read`` of its size and one more that sees its end
    (it may have grown since ``fstat``); at most a record's worth."""
    chunks: List[bytes] = []
    total = 0
    while total < MAX_RECORD_LENGTH:
        chunk = os.read(fd, max(size + 1 - total, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _encode_batch(job: _Job, batch: List[Task]) -> List[Outcome]:
    return [_encode_one(job, task) for task in batch]


def _init_process_worker(parent: int, resizer: str) -> None:
    """Worker processes leave Ctrl-C to the parent, which stops them cleanly; SIGTERM (how
    the parent stops them) ends them, whatever handler they inherited. On Linux a worker also
    ends with its parent (``PR_SET_PDEATHSIG``): a parent killed with SIGKILL cannot stop its
    workers, which would otherwise decode on and print a broken-pipe traceback to the user's
    terminal when they hand back their batch.

    A worker resizes with ``resizer``, the parent's choice: a forked worker inherits it, but a
    spawned one (Windows', macOS's default) imports the codec afresh and would decide again,
    from an environment the parent may have changed since it decided."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # held since it started (_ctrl_c_held); now ignored
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    portable.end_with_parent(parent)
    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
    codec.RESIZER = resizer
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
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    if context.get_start_method() != "fork":
        # multiprocessing's resource tracker, started with the first spawned worker, unblocks
        # SIGINT after it starts itself: start it first
        from multiprocessing import resource_tracker
        resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _batched(tasks: Iterable[Task], size: int) -> Iterator[List[Task]]:
    batch: List[Task] = []
    for task in tasks:
        batch.append(task)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# ---------------------------------------------------------------------------------------------
# the journal


def _clean(text: str) -> str:
    return " ".join(str(text).split())


def _settings(lst_path: str, root: str, job: _Job) -> dict:
    st = os.stat(lst_path)
    return {"lst": os.path.abspath(lst_path), "lst_size": st.st_size,
            "lst_mtime_ns": st.st_mtime_ns,
            "root": os.path.abspath(root), "options": asdict(job.options),
            "pass_through": job.pass_through, "pack_label": job.pack_label}


class _Progress:
    """Counts recovered from a journal: next position, records, skips, bytes kept."""

    def __init__(self) -> None:
        self.next_pos = 0
        self.packed = 0
        self.skipped = 0
        self.rec_end = 0
        self.journal_end = 0
        self.skips: Dict[str, int] = {}


def _recover(rec_partial: str, journal: str, settings: dict) -> _Progress:
    """Read a journal and keep the prefix that the ``.rec.partial`` on disk backs up."""
    state = _Progress()
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
        changed = sorted(k for k in settings if saved.get(k) != settings[k])
        if changed:
            raise RecordIOError(f"the interrupted pack used different settings "
                                f"({', '.join(changed)} changed); resume it with its own "
                                "settings, or start over with --force (which deletes it)",
                                path=journal)
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
                if kind == b"R" and len(fields) == 5:
                    record_offset, end = int(fields[3]), int(fields[4])
                    if end > rec_size:
                        break  # its bytes never reached the disk
                    state.packed += 1
                    state.rec_end, last_offset = end, record_offset
                elif kind == b"S" and len(fields) >= 6:
                    state.skipped += 1
                    cause = fields[6].decode() if len(fields) > 6 else "not_an_image"
                    state.skips[cause] = state.skips.get(cause, 0) + 1
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
    with open(journal, "r", encoding="utf-8", errors="surrogateescape", newline="\n") as f:
        f.readline()
        for line in f:
            yield line.rstrip("\n").split("\t")


class _PackOutput(ManagedWriter):
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

    def __init__(self, lst_path: str, settings: dict, state: _Progress, fsync: bool) -> None:
        self.lst_path = lst_path
        self.rec_path, self.idx_path, self.errors_path = output_paths(lst_path)
        self.rec_partial, self.journal = partial_paths(lst_path)
        self.fsync = fsync
        if state.next_pos:
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
            self.rec = open(self.rec_partial, "wb", buffering=_BUFFER)
            try:
                self.log = open(self.journal, "wb", buffering=_BUFFER)
                try:
                    self.log.write(f"{JOURNAL_MAGIC} {JOURNAL_VERSION} "
                                   f"{json.dumps(settings)}\n".encode())
                    self.log.flush()
                except BaseException:
                    self.log.close()
                    os.unlink(self.journal)
                    raise
            except BaseException:
                self.rec.close()
                os.unlink(self.rec_partial)
                raise
        self._begin(OutputSet([AtomicFile.adopt(self.rec_path, self.rec_partial, self.rec,
                                                keep_on_discard=True, fsync=fsync)]),
                    f"pack output {self.rec_partial!r}")

    def write(self, entries: List[str]) -> None:
        """Vouch in the journal for a batch whose records were written to ``self.rec``."""
        self.rec.flush()  # record bytes reach the OS before the journal vouches for them
        self.log.write("".join(entries).encode("utf-8", "surrogateescape"))
        self.log.flush()

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
        self.log.close()

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
        os.unlink(self.journal)


# ---------------------------------------------------------------------------------------------
# the pipeline


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
    with OutputLock(lock_path(os.path.splitext(lst_path)[0])):
        _check_interrupted(lst_path, resume, force)
        if not resume:
            check_outputs(output_paths(lst_path)[:2], [lst_path], force=force)
        job = make_job(root, options, pass_through, pack_label, allow_outside_root)
        settings = _settings(lst_path, root, job)
        started = time.perf_counter()
        total = count_items(lst_path)
        result = PackResult(lst_path, *output_paths(lst_path)[:2], None)
        if resume:
            remove_orphaned_temps(os.path.splitext(lst_path)[0])  # a killed run's .idx temps
        state = _resume_state(lst_path, settings, resume, result)
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
    (then they are written over); an interrupted pack in parts (``recio.image.shard_pack``)
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


def check_workers(workers: int, executor: str) -> None:
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")


@dataclass(frozen=True)
class FoundChecks:
    """When a pack counts as having found (nearly) nothing: ``early``, all of the first
    ``min(EARLY_MISSING, total)`` items missing; at the end (``max_missing`` not None),
    nothing packed or more than ``max_missing`` of the ``total`` items missing."""

    total: int
    max_missing: Optional[float]
    early: bool


def pack_tasks(job: _Job, tasks: Iterator[Task], lst_path: str, settings: dict,
                state: Optional[_Progress], result: PackResult, checks: FoundChecks, workers: int,
                executor: str, progress: Optional[ProgressCallback], batch_size: int,
                window: int, fsync: bool) -> _InOrderSink:
    """Encode ``tasks`` into the outputs named after ``lst_path`` (``output_paths``), counting
    into ``result``: the pipeline behind :func:`pack_list` and ``pack_part``. ``state``:
    where a resumed pack continues (None: from the start)."""
    state = state or _Progress()
    out = _PackOutput(lst_path, settings, state, fsync)
    sink = _InOrderSink(out, result, state, progress, job, checks)
    kind = AUTO_EXECUTOR if executor == "auto" else executor
    if not batch_size:
        batch_size = 8 if workers > 1 and kind == "process" else 4
    opencv_threads = set_opencv_threads(1)
    try:
        _encode_in_order(job, tasks, workers, kind, batch_size, window or 4 * workers, sink)
        sink.check_found(final=True)
    except NothingFoundError:
        out.abort()
        out.remove_partial()  # nothing worth resuming
        raise
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


def _resume_state(lst_path: str, settings: dict, resume: bool,
                  result: PackResult) -> Optional[_Progress]:
    """Where packing starts: the journal's progress when resuming an interrupted pack, a fresh
    start otherwise, or None when ``resume`` finds the outputs already complete (``result``
    then says so). ``result`` gets the counts of the items done before."""
    rec_path, idx_path, errors_path = output_paths(lst_path)
    rec_partial, journal = partial_paths(lst_path)
    state = _Progress()
    if resume and has_partial(lst_path):
        if not os.path.exists(rec_partial):  # publishing was cut short after the .rec: the
            os.replace(rec_path, rec_partial)  # journal writes the .idx and report again
        state = _recover(rec_partial, journal, settings)
    elif resume and os.path.exists(rec_path) and os.path.exists(idx_path) \
            and not os.path.exists(rec_partial):
        result.already_done = True
        result.errors_path = errors_path if os.path.exists(errors_path) else None
        result.bytes = os.path.getsize(rec_path)
        return None
    result.resumed = state.next_pos
    result.packed, result.skipped = state.packed, state.skipped
    result.skips = dict(state.skips)
    return state


class _InOrderSink:
    """Takes the outcomes of each batch, in list order: frames and writes the records, has the
    journal vouch for them, counts packed and skipped items (by cause), reports progress, and
    stops a pack that finds nothing."""

    def __init__(self, out: "_PackOutput", result: PackResult, state: _Progress,
                 progress: Optional[ProgressCallback], job: _Job, checks: FoundChecks) -> None:
        self.out, self.result, self.progress = out, result, progress
        self.job, self.checks, self.total = job, checks, checks.total
        self.offset = state.rec_end
        self.done = state.next_pos
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
                rec.write(framed)
                entries.append(f"R\t{pos}\t{item.index}\t{self.offset}\t"
                               f"{self.offset + len(framed)}\n")
                self.offset += len(framed)
                result.packed += 1
                result.alpha_dropped += alpha
            else:
                key, path = ("-", "-") if item is None else (item.index, _clean(item.path))
                entries.append(f"S\t{pos}\t{line}\t{key}\t{path}\t{_clean(reason)}\t"
                               f"{cause}\n")
                result.skipped += 1
                result.skips[cause] = result.skips.get(cause, 0) + 1
                if result.first_skip is None:
                    result.first_skip = (line, reason)
                if cause == "missing" and self.first_missing is None and item is not None:
                    self.first_missing = _location(self.job, item.path)
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


def _encode_in_order(job: _Job, tasks: Iterator[Task], workers: int, kind: str, batch_size: int,
                     window: int, sink: _InOrderSink) -> None:
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
                    sink.write(_encode_batch(job, batch))
            elif kind == "thread":
                _ThreadPipeline(job, tasks, workers, batch_size, window, sink).run()
            else:
                # a multiprocessing pool, not concurrent.futures: terminate() kills the workers
                # at once on Ctrl-C, even one stuck reading a file
                context = multiprocessing.get_context()
                others = set(multiprocessing.active_children())
                with _ctrl_c_held(context):  # assigned inside: a Ctrl-C held here finds the pool
                    pool = context.Pool(workers, _init_process_worker,
                                        (os.getpid(), codec.resizer_name()))
                started = [p for p in multiprocessing.active_children() if p not in others]
                pending: Deque = deque()
                for batch in _batched(tasks, batch_size):
                    pending.append(pool.apply_async(_encode_batch, (job, batch)))
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
    stopper = threading.Thread(target=pool.terminate, name="recio-pack-stop", daemon=True)
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


#: the name prefix of a pack's worker threads (the CLI looks for them when a pack stops)
PACK_THREAD = "recio-pack-"


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

    def __init__(self, job: _Job, tasks: Iterator[Task], workers: int, batch_size: int,
                 window: int, sink: _InOrderSink) -> None:
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
                outcomes = _encode_batch(self.job, batch)
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


def pack_prefix(prefix: PathLike, root: PathLike, options: Optional[ImageOptions] = None, *,
                progress_for: Optional[Callable[[str], Optional[ProgressCallback]]] = None,
                on_lists: Optional[Callable[["PrefixLists"], None]] = None,
                pack_one: Optional[Callable[..., PackResult]] = None,
                **pack_options: Any) -> Iterator[PackResult]:
    """Pack every ``.lst`` im2rec finds for ``prefix`` (:func:`prefix_lists`), one after
    another, yielding each list's ``PackResult`` as it completes: what ``im2rec PREFIX ROOT``
    does.

    ``on_lists(found)`` is called once before anything is packed, with the lists that will be
    packed and those left out (so a command can name them); ``progress_for(lst_path)`` gives
    the progress callback for one list (or None); ``pack_options`` are ``pack_list``'s
    keywords; ``pack_one`` packs one list instead of ``pack_list`` (same arguments). No list at
    all raises ``ListFileError`` saying how to make one (and naming near prefixes); lists that
    hold no line at all, ``NothingFoundError``.
    """
    found = prefix_lists(prefix, root)
    if on_lists is not None:
        on_lists(found)
    for lst in found.lists:
        progress = progress_for(lst) if progress_for is not None else None
        yield (pack_one or pack_list)(lst, root, options, progress=progress, **pack_options)


@dataclass
class PrefixLists:
    """The ``.lst`` files im2rec packs for a PREFIX, as :func:`prefix_lists` found them."""

    prefix: str
    #: the lists to pack, in order
    lists: List[str]
    #: lists left out because they hold no line (e.g. an empty test part of a small list);
    #: packing them would write an empty .rec
    empty: List[str] = field(default_factory=list)
    #: lists (packed) whose name continues PREFIX's name with more than ``_`` or ``.``
    #: (``data/split2_train.lst`` for PREFIX ``data/split``): probably another dataset's
    others: List[str] = field(default_factory=list)


def prefix_lists(prefix: PathLike, root: PathLike, found: Optional[List[str]] = None,
                 storage_options: StorageOptions = None) -> PrefixLists:
    """The lists im2rec packs for ``prefix``: ``found`` (a URL prefix's, listed by the
    caller) or, for a local prefix, :func:`find_lists`; lists holding no line are left out
    when others have lines.

    Raises ``ListFileError`` when there is none (naming near prefixes, "did you mean
    data/train", and how to make a list) and ``NothingFoundError`` when every list is empty.
    """
    given = os.fspath(prefix)
    if found is None:
        prefix = os.path.abspath(given)
        folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
        if not os.path.isdir(folder):
            raise ListFileError(f"no such folder for PREFIX {given}{_did_you_mean(given)}",
                                path=os.path.dirname(given) or ".")
        found = find_lists(prefix)
    else:
        prefix = given
    make = f"im2rec {given} {os.fspath(root)} --list --recursive"
    stem, ext = os.path.splitext(given)
    if not found and ext in (".rec", ".idx", ".lst") and os.path.basename(stem):
        raise ListFileError(
            f"PREFIX names files without their extension: did you mean {stem}? (to make a "
            f"list: im2rec {stem} {os.fspath(root)} --list --recursive)", path=given)
    if not found:
        raise ListFileError(f"no .lst file starts with this PREFIX{_did_you_mean(given)} (to "
                            f"make a list: {make})", path=given)
    empty = [lst for lst in found if _holds_no_line(lst, storage_options)]
    if len(empty) == len(found):
        names = ", ".join(_as_given(given, lst) for lst in empty)
        raise NothingFoundError(
            f"no image to pack: {names} {'holds' if len(empty) == 1 else 'hold'} no line; "
            f"nothing was written (to make a list: {make} --force)", path=given)
    lists = [lst for lst in found if lst not in empty]
    isfolder = not storage.is_url(prefix) and os.path.isdir(prefix)
    base = storage.basename(prefix)
    others = [] if isfolder or base.endswith(("_", ".", "-")) else [
        lst for lst in lists if storage.basename(lst)[len(base):][:1] not in ("_", ".", "")]
    return PrefixLists(given, lists, empty, others)


def _as_given(given: str, lst: str) -> str:
    """A list's path in the form the PREFIX was given (relative stays relative)."""
    if storage.is_url(lst):
        return lst
    folder = given if os.path.isdir(given) else os.path.dirname(given)
    return os.path.join(folder, os.path.basename(lst))


def _holds_no_line(lst: str, storage_options: StorageOptions = None) -> bool:
    """True when a list has no non-blank line (read up to its first one)."""
    with storage.open_input(lst, storage_options) as f:
        while True:
            block = f.read(1 << 16)
            if not block:
                return True
            if block.strip():
                return False


def _did_you_mean(prefix: str) -> str:
    """``"; did you mean data/train?"`` naming the prefixes of existing lists (or folders)
    nearest to a local ``prefix`` that matched nothing; ``""`` when none is near."""
    if storage.is_url(prefix):
        return ""
    head, base = os.path.split(prefix)
    folder = head or "."
    if not os.path.isdir(folder):  # a typo in the folder: look for the nearest existing one
        near = [os.path.join(d, base) for d in near_folders(folder)]
        return f"; did you mean {' or '.join(near)}?" if near else ""
    try:
        names = os.listdir(folder)
    except OSError:
        return ""
    stems = set()
    for name in names:
        if name.endswith(".lst"):
            stem = name[:-4]
            stems.add(stem)
            stems.add(_LIST_PART.sub("", stem))
    near = difflib.get_close_matches(base, sorted(stems), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(os.path.join(head, n) for n in near)}?" if near else ""


#: what im2rec --list appends to PREFIX: _<chunk>, then _train/_val/_test
_LIST_PART = re.compile(r"(_\d+)?(_train|_val|_test)?$")


__all__ = ["PackResult", "NothingFoundError", "SKIP_CAUSES", "MAX_MISSING", "EARLY_MISSING",
           "find_lists", "prefix_lists", "PrefixLists", "describe_skips", "output_paths",
           "partial_paths", "has_partial", "count_items", "pack_list", "pack_prefix", "EXECUTORS"]
