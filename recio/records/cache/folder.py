"""The files of a ``ShardCache`` folder and its shared bookkeeping: names, records, locks,
downloads in progress, the totals over every process, and eviction down to the limit.

The folder, every name in it the cache's own::

    .recio-cache.lock              the folder's lock (flock): held while entries are looked up,
                                   made room for and published, never during a download
    .recio-cache.json              totals over every process: downloads, bytes, evictions, ...
    <digest>-<name>                a checked copy (digest: 16 hex digits of the URL's SHA-1)
    <digest>-<name>.ok             its record (URL, size, CRC-32, ETag, and the copy's inode,
                                   ctime and the boot it was checked in); its mtime is the
                                   copy's last use, the order of eviction (a day ahead for a
                                   prefetched copy no reader has opened yet)
    <digest>-<name>.<size>.part    a download in progress, locked (flock) by its downloader

``recio.records.cache.shard_cache`` holds the rules these files keep (its notes) and the
``ShardCache`` that follows them.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

from recio import portable, storage
from recio.errors import StorageError
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

_LOCK_NAME = ".recio-cache.lock"
_TOTALS_NAME = ".recio-cache.json"
_RECORD_SUFFIX = ".ok"
_PART = re.compile(r"\.(\d+)\.part\Z")
_COPY = re.compile(r"[0-9a-f]{16}-[^/]+\Z")
#: a copy's name keeps at most this much of the object's name (after the digest)
_NAME_CHARS = 80
#: bytes hashed at a time when a copy on disk is checked again
_CHECK_BLOCK = 8 << 20
#: a download goes through a buffer of this size (received, checksummed, written), reused:
#: small enough to stay in the CPU's cache, so the bytes come from memory once
_COPY_BLOCK = 512 << 10
#: how far ahead a prefetched copy's last use is set until a reader opens it (its rank in the
#: eviction order: last), in seconds
_AWAITING = 86400
#: the counters kept for the folder over every process (``hits`` and ``waits`` are too many)
_TOTALS = ("downloads", "bytes_downloaded", "evictions", "evicted_in_use", "damaged",
           "prefetched")

#: this boot's id, so a copy checked before a crash is checked again after it
_BOOT = portable.boot_id()


@dataclass(frozen=True)
class Expected:
    """What a copy must be: the object's ``size`` and, when known, its ``crc32`` (8 hex digits,
    from a manifest) or ``etag`` (the store's version tag)."""

    size: int
    crc32: Optional[str] = None
    etag: Optional[str] = None


class LocalCopy(io.FileIO):
    """A checked copy opened for reading (``name`` is the local path, ``url`` the object's).
    It holds a shared lock while open: eviction takes copies nobody has open first."""

    def __init__(self, path: str, url: str) -> None:
        super().__init__(path, "r")
        self.url = url
        try:
            portable.lock_file(self.fileno(), shared=True)
        except BaseException:
            super().close()
            raise

    def close(self) -> None:
        if not self.closed:
            portable.unlock_file(self.fileno())  # explicitly: a forked child's copy of the fd must not keep it
        super().close()

    def evicted(self) -> bool:
        """Whether this copy left the cache (evicted, or replaced by a new download): its
        reader still reads it, but its disk space is freed only when it is closed."""
        try:
            return os.stat(self.name).st_ino != os.fstat(self.fileno()).st_ino
        except FileNotFoundError:
            return True


def copy_name(url: str) -> str:
    """The name of ``url``'s copy in a cache folder: a digest of the URL and the object's name."""
    digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", storage.basename(url))[-_NAME_CHARS:]
    if name.endswith((_RECORD_SUFFIX, ".part", ".tmp")):  # never taken for the cache's own
        name += "_"
    return f"{digest}-{name}"


@dataclass
class _Entry:
    """A copy in the folder, as a look at the folder found it."""

    path: str
    size: int
    used: int  # the last use (its record's mtime in ns; 0 without a record)


class CacheFolder:
    """A cache folder's shared bookkeeping, for every process and thread that uses it: the
    folder lock, the totals over every process, what the folder holds, and eviction down to
    ``limit`` bytes (None: no limit). ``count(**counts)`` counts in the process's own stats
    whatever is added to the totals."""

    def __init__(self, folder: str, limit: Optional[int], count: Callable[..., None]) -> None:
        self.folder, self.limit, self.count = folder, limit, count

    @classmethod
    def create(cls, folder: PathLike, limit: Union[int, str, None],
               count: Callable[..., None]) -> "CacheFolder":
        """The folder ``folder`` (made when missing) with its ``limit`` in bytes or with a unit
        (``50GB``); ``OSError`` in one line on a system without POSIX file locks."""
        if not portable.has_file_locks():
            raise OSError("recio's shard cache needs POSIX file locks (Linux, macOS); read "
                          "without cache_dir on this system")
        path = os.path.abspath(os.fspath(folder))
        bytes_limit = None if limit is None else storage.parse_size(limit)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise type(exc)(exc.errno, f"cannot make the cache folder ({exc.strerror})",
                            path) from None
        return cls(path, bytes_limit, count)

    def lock(self) -> "Held":
        """The folder lock, for a ``with`` block."""
        return Held(os.path.join(self.folder, _LOCK_NAME))

    def usage(self) -> int:
        """Bytes of the copies and downloads in the folder now."""
        total = 0
        for item in os.scandir(self.folder):
            if _COPY.match(item.name) and not item.name.endswith((_RECORD_SUFFIX, ".tmp")):
                try:
                    total += item.stat().st_size
                except FileNotFoundError:
                    pass
        return total

    def totals(self) -> Dict[str, int]:
        """The counters of every process that used the folder: ``downloads``,
        ``bytes_downloaded``, ``evictions``, ``evicted_in_use``, ``damaged``, ``prefetched``
        (``stats`` has this process's, with its ``hits`` and ``waits``)."""
        with self.lock():
            return self.read_totals()

    def clear(self) -> None:
        """Delete every copy nobody has open."""
        with self.lock():
            for entry in self.look()[0]:
                self.evict(entry, in_use_too=False)

    def read_totals(self) -> Dict[str, int]:
        """The folder's totals as saved (zeros when there are none yet)."""
        try:
            with open(os.path.join(self.folder, _TOTALS_NAME), encoding="utf-8") as f:
                saved = json.load(f)
        except (OSError, ValueError):
            saved = {}
        return {name: int(saved.get(name, 0)) for name in _TOTALS}

    def add_totals(self, **counts: int) -> None:
        """Count in this process's ``stats`` and the folder's totals (the folder lock is
        held)."""
        self.count(**counts)
        totals = self.read_totals()
        for name, n in counts.items():
            totals[name] += n
        _write_json(os.path.join(self.folder, _TOTALS_NAME), totals)

    def look(self) -> Tuple[List[_Entry], int]:
        """``(the copies, bytes of the downloads in flight)``; a download whose process died
        is deleted on the way (the folder lock is held)."""
        copies: List[_Entry] = []
        used: Dict[str, int] = {}
        flight = 0
        for item in os.scandir(self.folder):
            name = item.name
            if not _COPY.match(name):
                continue
            try:
                if name.endswith(_RECORD_SUFFIX):
                    used[name[:-len(_RECORD_SUFFIX)]] = item.stat().st_mtime_ns
                elif name.endswith(".tmp"):  # a record being written when a process died
                    _remove(item.path)
                elif (part := _PART.search(name)) is not None:
                    if _live_part(item.path):
                        flight += int(part.group(1))
                else:
                    copies.append(_Entry(item.path, item.stat().st_size, 0))
            except FileNotFoundError:
                continue
        for entry in copies:
            entry.used = used.get(os.path.basename(entry.path), 0)
        return copies, flight

    def evict(self, entry: _Entry, in_use_too: bool) -> bool:
        """Delete a copy (and its record) unless a reader has it open and not ``in_use_too``;
        whether it went. Its readers keep their open file and map."""
        try:
            fd = portable.open_fd(entry.path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            free = portable.lock_file(fd, wait=False)
            if not free and not in_use_too:
                return False
            _remove(entry.path + _RECORD_SUFFIX)
            _remove(entry.path)
        finally:
            portable.unlock_file(fd)
            os.close(fd)
        self.add_totals(evictions=1, evicted_in_use=0 if free else 1)
        return True

    def make_room(self, size: int, demand: bool, protect: Set[str]) -> Union[bool, str]:
        """Evict until ``size`` more bytes fit (the folder lock is held): True when they do;
        False when a prefetch should not go on; for a reader that needs the object now, the
        ``.part`` of a download in flight to wait for when only downloads stand in the way."""
        if self.limit is None:
            return True
        copies, flight = self.look()
        used = sum(e.size for e in copies) + flight
        now = time.time_ns()
        candidates = sorted((e for e in copies if e.path not in protect), key=lambda e: e.used)
        in_use = []
        # first the copies that were read and nobody has open, least recently used first
        for entry in (e for e in candidates if e.used <= now):
            if used + size <= self.limit:
                return True
            if self.evict(entry, in_use_too=False):
                used -= entry.size
            else:
                in_use.append(entry)
        if used + size <= self.limit:
            return True
        if not demand:
            return False
        # a reader needs the object now: then the copies in use (their readers keep their
        # maps), last the prefetched ones still waiting for their reader (a second download)
        for entry in in_use + [e for e in candidates if e.used > now]:
            if used + size <= self.limit:
                return True
            self.evict(entry, in_use_too=True)
            used -= entry.size
        if used + size <= self.limit or flight == 0:
            return True  # alone past the limit: the folder holds at most limit + this object
        return next((item.path for item in os.scandir(self.folder)
                     if _PART.search(item.name) and _live_part(item.path)), True)


def check_copy(path: str, url: str, want: Expected,
               use: bool) -> Tuple[Optional[LocalCopy], str, Optional[str]]:
    """``(copy, "", None)`` for a copy whose record matches ``want`` and the file, else
    ``(None, why, CRC-32 to check it against)``: why is ``"missing"``, ``"stale"`` (another
    version's copy: deleted) or ``"unchecked"`` (it changed on disk since it was checked,
    the machine rebooted, or it has no record). ``use``: a reader's, which counts as the
    copy's last use. The folder lock is held."""
    try:
        copy = LocalCopy(path, url)
    except FileNotFoundError:
        _remove(path + _RECORD_SUFFIX)
        return None, "missing", None
    try:
        with open(path + _RECORD_SUFFIX, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {}
    if record and not _same_version(record, url, want):
        copy.close()
        _remove(path + _RECORD_SUFFIX)
        _remove(path)
        return None, "stale", None
    if record.get("file") != _file_state(os.fstat(copy.fileno())):
        copy.close()
        return None, "unchecked", want.crc32 or record.get("crc32")
    if use:
        _mark_used(path + _RECORD_SUFFIX)
    return copy, "", None


def _same_version(record: Dict[str, Any], url: str, want: Expected) -> bool:
    """Whether a copy's record is of the object ``want`` describes: the same URL and size,
    and the CRC-32 the manifest gives, else the same ETag."""
    if record.get("url") != url or record.get("size") != want.size:
        return False
    if want.crc32 is not None:
        return record.get("crc32") == want.crc32
    return record.get("etag") == want.etag


def _file_state(st: os.stat_result) -> List[Any]:
    """What a checked copy's file must still be: its inode, size, ctime and mtime (any write,
    rename or replace changes one of them) and the boot it was checked in."""
    return [st.st_ino, st.st_size, st.st_ctime_ns, st.st_mtime_ns, _BOOT]


_last_use = [0]
_last_use_lock = threading.Lock()


def _mark_used(record: str, ahead: int = 0) -> None:
    """Set a copy's last use (its record's mtime) to now, ``ahead`` seconds on, in
    nanoseconds and strictly after this process's previous mark: ``os.utime(path)`` alone
    takes the file system's coarse clock, on which reads a few milliseconds apart tie and the
    least recently used is a toss-up."""
    with _last_use_lock:
        now = max(time.time_ns() + ahead * 1_000_000_000, _last_use[0] + 1)
        if not ahead:
            _last_use[0] = now
    os.utime(record, ns=(now, now))


def _write_json(path: str, value: Any) -> None:
    """Write ``value`` to ``path`` through ``path.tmp`` and a rename, so readers see the old
    or the new file whole (the folder lock is held, so one fixed temporary name serves; the
    next write reuses one a dead process left)."""
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _live_part(path: str) -> bool:
    """Whether a ``.part`` is being written (its downloader holds its lock); a dead one is
    deleted (the folder lock is held)."""
    try:
        fd = portable.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        if portable.lock_file(fd, wait=False):
            _remove(path)
            return False
        return True
    finally:
        portable.unlock_file(fd)
        os.close(fd)


def running_download(path: str) -> Optional[str]:
    """The ``.part`` of a live download of the copy ``path`` (dead ones are deleted)."""
    folder, base = os.path.split(path)
    for item in os.scandir(folder):
        if item.name.startswith(base + ".") and _PART.fullmatch(item.name[len(base):]) \
                and _live_part(item.path):
            return item.path
    return None


def wait_for_download(part: str) -> None:
    """Wait until the download writing ``part`` ends (it releases its lock, or dies)."""
    try:
        fd = portable.open_fd(part, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        portable.lock_file(fd, shared=True)
    finally:
        portable.unlock_file(fd)
        os.close(fd)


class Held:
    """The folder lock, held for a ``with`` block (a new descriptor each time: threads and
    processes exclude each other alike)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> "Held":
        self.fd = portable.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        portable.lock_file(self.fd)
        return self

    def __exit__(self, *exc: Any) -> None:
        portable.unlock_file(self.fd)
        os.close(self.fd)


class Stopped(Exception):
    """A prefetch was stopped in the middle of a download."""


class Download:
    """An object being written into its ``.part`` file, whose lock it holds until done."""

    def __init__(self, path: str, part: str, fd: int) -> None:
        self.path, self.part, self.fd = path, part, fd
        self.stop: Optional[threading.Event] = None

    @classmethod
    def start(cls, path: str, size: int) -> "Download":
        """A new ``.part`` for the copy ``path`` (the folder lock is held)."""
        part = f"{path}.{size}.part"
        fd = portable.open_fd(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        portable.lock_file(fd)
        return cls(path, part, fd)

    @classmethod
    def claim(cls, path: str, size: int) -> "Download":
        """The copy at ``path`` taken back as a ``.part``, to be checked again (the folder lock
        is held): nobody opens it meanwhile, and a reader that wants it waits."""
        part = f"{path}.{size}.part"
        os.replace(path, part)
        _remove(path + _RECORD_SUFFIX)
        fd = portable.open_fd(part, os.O_RDWR)
        portable.lock_file(fd)
        return cls(path, part, fd)

    def crc_on_disk(self) -> str:
        crc = 0
        with io.FileIO(self.fd, "r", closefd=False) as f:
            for block in iter(lambda: f.read(_CHECK_BLOCK), b""):
                crc = zlib.crc32(block, crc)
        return f"{crc:08x}"

    def write_from(self, url: str, storage_options: StorageOptions,
                   size: int) -> Tuple[str, int]:
        """Download ``url`` (``size`` bytes) into the ``.part``: ``(CRC-32, bytes)``. The
        socket is read into a small buffer, checksummed and written while the buffer is still
        in the CPU's cache."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        buffer = bytearray(_COPY_BLOCK)
        view = memoryview(buffer)
        crc, done = 0, 0
        remote = storage.RemoteFile(url, storage_options, size=size)
        try:
            for n in remote.stream_into(buffer):
                crc = zlib.crc32(view[:n], crc)
                written = 0
                while written < n:
                    try:
                        written += os.write(self.fd, view[written:n])
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        raise StorageError(f"no space left on the cache's disk for a copy of "
                                           f"{size:,} bytes in {self.path}: lower cache_limit "
                                           f"or free space", url, done + written) from None
                done += n
                if self.stop is not None and self.stop.is_set():
                    raise Stopped()
        finally:
            remote.close()
        return f"{crc:08x}", done

    def publish(self, url: str, want: Expected, crc: str, awaiting: bool) -> LocalCopy:
        """Rename the checked ``.part`` into place, write its record, open it (the folder lock
        is held). ``awaiting``: a prefetch's copy, which no reader has read yet (its record's
        mtime is set ahead, so it is evicted last)."""
        os.replace(self.part, self.path)
        record = {"url": url, "size": want.size, "etag": want.etag, "crc32": crc,
                  "file": _file_state(os.stat(self.path)), "checked": time.time()}
        _write_json(self.path + _RECORD_SUFFIX, record)
        if awaiting:
            _mark_used(self.path + _RECORD_SUFFIX, ahead=_AWAITING)
        self.release()  # before the shared lock: the same file, another descriptor
        return LocalCopy(self.path, url)

    def release(self) -> None:
        if self.fd >= 0:
            portable.unlock_file(self.fd)
            os.close(self.fd)
            self.fd = -1

    def discard(self) -> None:
        """After a failure or a stop: delete the ``.part`` and let waiters go (nothing after
        ``publish``)."""
        if self.fd >= 0:
            _remove(self.part)
            self.release()
