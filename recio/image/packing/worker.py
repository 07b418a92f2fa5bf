"""What one packing worker does to one list item: read its image under ROOT, transform it,
pack it behind its header.

A failure of one item is never an error: it becomes an outcome with a cause (one of
``SKIP_CAUSES``) and a reason, which the pack counts and reports. Reading
is careful: only a regular file under ROOT (after symlinks), opened without blocking, smaller
than a record can hold; under a URL ROOT, one GET per object.

Apart from the pipeline (``recio.image.packing.pipeline``) and the executors that run it
(``recio.image.packing.executors``) because this is the part that runs in a worker, thread or
process: everything here is picklable or a module-level function.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from recio import portable, storage
from recio.errors import ImageError, plural
from recio.image.pixels.codec import has_alpha
from recio.image.header import IRHeader, pack
from recio.image.lists import ListItem, list_path_candidates, native_list_path
from recio.image.packing.settings import PackSettings
from recio.image.pixels.transform import transform_image
from recio.records.framing import MAX_RECORD_LENGTH
from recio.storage import StorageOptions

@dataclass(frozen=True)
class PackJob:
    """What every worker needs (picklable: it goes to worker processes with each batch): the
    pack's settings and ROOT, resolved once."""

    root: str
    settings: PackSettings
    real_root: str = ""
    #: Linux's /proc/self/fd is there: ROOT is checked on the opened file
    proc_fd: bool = False
    #: ROOT is a URL (``s3://bucket/images``): each image is one GET
    storage_options: StorageOptions = None


def make_job(root: str, settings: PackSettings,
             storage_options: StorageOptions = None) -> PackJob:
    """What every worker needs, for a local ROOT (made absolute) or a URL."""
    if storage.is_url(root):
        return PackJob(storage.absolute(root), settings, storage_options=storage_options)
    root = os.path.abspath(os.fspath(root))
    return PackJob(root, settings, os.path.realpath(root), portable.has_proc_fd())


#: why an item was skipped (an outcome's cause, the key of ``PackResult.skips``)
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


def _encode_one(job: PackJob, task: Task) -> Outcome:
    """Read, transform and pack one list item; a failure becomes a cause and a reason, never
    an error."""
    pos, line, item, refused = task
    settings = job.settings
    if item is None:
        return pos, line, None, None, "malformed_line", refused, False
    try:
        data = _read_image_file(job, item.path)
        alpha = (not settings.pass_through and has_alpha(data)
                 and not (settings.options.color == -1 and settings.options.encoding == ".png"))
        payload = pack(_header(job, item), data if settings.pass_through else
                       _transform(job, data, item_location(job, item.path)))
    except _Skip as skip:
        return pos, line, item, None, skip.cause, skip.reason, False
    if len(payload) >= MAX_RECORD_LENGTH:
        return pos, line, item, None, "too_large", (
            f"record of {len(payload)} bytes is too large: RecordIO records hold at most "
            f"{MAX_RECORD_LENGTH - 1} bytes"), False
    return pos, line, item, payload, None, None, alpha


def _header(job: PackJob, item: ListItem) -> IRHeader:
    labels = item.labels
    several = job.settings.pack_label and len(labels) > 1
    return IRHeader(0, list(labels) if several else labels[0], item.index, 0)


def _transform(job: PackJob, data: bytes, path: str) -> bytes:
    try:
        return transform_image(data, job.settings.options, path)
    except ImageError as exc:
        raise _Skip("not_an_image", exc.message) from None


def _inside(path: str, root: str) -> bool:
    path, root = os.path.normcase(path), os.path.normcase(root)  # Windows: C:\Data is c:\data
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def item_location(job: PackJob, relpath: str) -> str:
    """Where a list item's file or object is (for messages)."""
    if storage.is_url(job.root):
        return storage.join(job.root, relpath.replace("\\", "/"))
    return os.path.join(job.root, native_list_path(relpath))


def _read_image_file(job: PackJob, relpath: str) -> bytes:
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


def _read_local_file(job: PackJob, relpath: str) -> bytes:
    """:func:`_read_image_file` for ``relpath`` as this OS names it."""
    path = os.path.join(job.root, relpath)
    check_root = not job.settings.allow_outside_root
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
    kind = storage.file_kind(st.st_mode)  # the one rule (recio.storage.regular)
    if kind is not None:
        raise _Skip("not_a_file", f"is {kind}, not a regular file")


def _usable(data: bytes, what: str) -> bytes:
    """``data`` unless it is empty or larger than a record can hold (``what`` was read)."""
    if not data:
        raise _Skip("not_an_image", "empty file")
    if len(data) >= MAX_RECORD_LENGTH:
        raise _Skip("too_large", f"{what} of {len(data)} bytes is larger than a RecordIO "
                    f"record can hold ({MAX_RECORD_LENGTH - 1} bytes)")
    return data


def _read_image_object(job: PackJob, relpath: str) -> bytes:
    key = relpath.replace("\\", "/")  # an object key's separator is / (a Windows list's \\)
    if not job.settings.allow_outside_root and (key.startswith("/") or ".." in key.split("/")
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


def encode_batch(job: PackJob, batch: List[Task],
                 stop: Optional[Callable[[], bool]] = None) -> List[Outcome]:
    """The outcomes of one batch of tasks, in order: what a worker runs (a module-level
    function, so a process pool can send it by name). ``stop`` is asked before each task;
    once it says yes the rest of the batch is left out, so a worker thread of a pack that is
    stopping (a Ctrl-C, another worker's error) leaves after the image it is on."""
    outcomes: List[Outcome] = []
    for task in batch:
        if stop is not None and stop():
            break
        outcomes.append(_encode_one(job, task))
    return outcomes


