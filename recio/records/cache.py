"""``ShardCache``: whole remote objects (shards, their indexes, any ``.rec`` URL) kept on local
disk, bounded, shared by every process of a node.

A reader given a cache (``cache_dir=``, or the ``RECIO_CACHE_DIR`` environment variable) reads
a URL from a local copy of the whole object, downloaded in one streaming GET the first time it
is needed, so the next epoch reads local disk. The copy is checked as it is written: its size
and CRC-32 against what the shard set's manifest says (a ``.rec`` URL without a manifest:
against the object's size and ETag, the CRC-32 being recorded then). Nothing is served from a
copy that was not checked, and a copy is checked again if it changed on disk since (a damaged
copy is downloaded again, and counted).

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

The rules that make one folder safe for many processes and threads:

* **One download of each object.** A process that needs an object being downloaded waits for
  that download (a shared lock on its ``.part`` file) instead of starting its own. A ``.part``
  whose downloader died is unlocked: the next look deletes it.
* **No torn files.** Data is written under the ``.part`` name, checked, then renamed; a copy's
  record is written after the rename, under the folder lock, and a copy whose record is
  missing or does not fit it is checked again before anyone reads it.
* **Bounded.** Before a download, least-recently-used copies are evicted until the copies,
  the downloads in flight and the new object fit in ``limit`` bytes. Copies that a reader has
  open (a shared flock) go after those nobody has open, and prefetched copies that no reader
  has opened yet go last; only a reader that needs an object now evicts those two kinds (an
  open reader keeps its memory map: an unlinked file lives on until it is closed), never a
  prefetch. Only one download at a time may go past the limit (when the cache holds nothing
  else it could evict), so the folder never holds more than ``limit`` plus one object.
* **Checked.** A copy is used only while the inode, size, ctime and mtime recorded when it was
  checked still hold and the machine has not rebooted since (so data that never reached the
  disk cannot pass); otherwise it is checked again against its CRC-32 before use, and
  downloaded again if that fails.

Locks are ``flock`` locks (Linux, macOS): the folder should be on a local disk. A prefetch
(``prefetch``) downloads, in a background thread, the objects a reader will need next, in the
order it will need them, as far as the limit allows without evicting what is in use.
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
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from recio import portable, storage
from recio.errors import ChecksumError, StorageError
from recio.storage import StorageOptions

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

PathLike = Union[str, "os.PathLike[str]"]

#: the environment's default cache folder for readers of URLs (unset: no cache)
CACHE_DIR_ENV = "RECIO_CACHE_DIR"
#: the environment's default limit, in bytes or with a unit (``50GB``); unset: no limit
CACHE_LIMIT_ENV = "RECIO_CACHE_LIMIT"

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
#: downloads of one object tried before a mismatch with the manifest is an error
_TRIES = 2
#: how far ahead a prefetched copy's last use is set until a reader opens it (its rank in the
#: eviction order: last), in seconds
_AWAITING = 86400
#: objects a sequential reader's prefetch downloads beyond the one it reads
READ_AHEAD = 2
#: downloads a random reader's prefetch (a ``RecordSampler``'s order) runs at once
PREFETCH_THREADS = 2
#: a reader that keeps many copies open under a limit looks this often (seconds) for those
#: that were evicted, to close them and free their space
RECHECK_SECONDS = 1.0
_COUNTERS = ("hits", "downloads", "bytes_downloaded", "waits", "evictions", "evicted_in_use",
             "damaged", "prefetched")
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
            fcntl.flock(self.fileno(), fcntl.LOCK_SH)
        except BaseException:
            super().close()
            raise

    def close(self) -> None:
        if not self.closed:
            _unlock(self.fileno())  # explicitly: a forked child's copy of the fd must not keep it
        super().close()

    def evicted(self) -> bool:
        """Whether this copy left the cache (evicted, or replaced by a new download): its
        reader still reads it, but its disk space is freed only when it is closed."""
        try:
            return os.stat(self.name).st_ino != os.fstat(self.fileno()).st_ino
        except FileNotFoundError:
            return True


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise


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


class ShardCache:
    """A folder of checked local copies of remote objects, at most ``limit`` bytes (None: no
    limit) plus one object; see the module's notes for the rules. Picklable (as its folder,
    limit, storage options and what it was told to expect), so DataLoader workers and other
    processes share it.

    ``expect(url, size, crc32)`` / ``expect_manifest(manifest)`` say what an object must be;
    an object nobody described is looked up once (size and ETag). ``open(url)`` gives a
    :class:`LocalCopy` (downloading it first when needed); ``prefetch(urls)`` starts
    downloading ahead. ``stats`` counts this process's hits, downloads, waits, evictions and
    damaged copies; ``totals()`` the folder's, over every process; ``usage()`` the bytes in
    the folder.
    """

    def __init__(self, folder: PathLike, limit: Union[int, str, None] = None, *,
                 storage_options: StorageOptions = None) -> None:
        if fcntl is None:
            raise OSError("recio's shard cache needs POSIX file locks (Linux, macOS); read "
                          "without cache_dir on this system")
        self.folder = os.path.abspath(os.fspath(folder))
        self.limit = None if limit is None else storage.parse_size(limit)
        self.storage_options = storage_options
        self._expected: Dict[str, Expected] = {}
        try:
            os.makedirs(self.folder, exist_ok=True)
        except OSError as exc:
            raise type(exc)(exc.errno, f"cannot make the cache folder ({exc.strerror})",
                            self.folder) from None
        self._start_process()

    @classmethod
    def configured(cls, cache_dir: Union[PathLike, bool, None] = None,
                   cache_limit: Union[int, str, None] = None,
                   storage_options: StorageOptions = None) -> Optional["ShardCache"]:
        """The cache a reader was asked for: ``cache_dir``, else ``RECIO_CACHE_DIR``; None when
        neither is set, or ``cache_dir`` is ``False`` or ``""`` (no cache). ``cache_limit``,
        else ``RECIO_CACHE_LIMIT``, else no limit."""
        if cache_dir is False or cache_dir == "":
            return None
        if cache_dir is None or cache_dir is True:
            cache_dir = os.environ.get(CACHE_DIR_ENV) or None
            if cache_dir is None:
                if cache_limit is not None:
                    raise ValueError(f"cache_limit needs cache_dir (or {CACHE_DIR_ENV})")
                return None
        if cache_limit is None:
            text = os.environ.get(CACHE_LIMIT_ENV, "").strip()
            if text:
                try:
                    cache_limit = storage.parse_size(text)
                except ValueError as exc:
                    raise ValueError(f"{CACHE_LIMIT_ENV}: {exc}") from None
        return cls(cache_dir, cache_limit, storage_options=storage_options)

    # -- per process ---------------------------------------------------------------------------
    def _start_process(self) -> None:
        self._pid = os.getpid()
        self._mutex = threading.Lock()
        self.stats: Dict[str, int] = {name: 0 for name in _COUNTERS}

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: its own counters, no parent's threads
            self._start_process()

    def __getstate__(self) -> dict:
        return {"folder": self.folder, "limit": self.limit,
                "storage_options": self.storage_options, "expected": dict(self._expected)}

    def __setstate__(self, state: dict) -> None:
        self.folder, self.limit = state["folder"], state["limit"]
        self.storage_options = state["storage_options"]
        self._expected = state["expected"]
        self._start_process()

    def __repr__(self) -> str:
        limit = "no limit" if self.limit is None else f"limit {self.limit:,} bytes"
        return f"ShardCache({self.folder!r}, {limit})"

    # -- what objects must be --------------------------------------------------------------
    def expect(self, url: str, size: int, crc32: Optional[str] = None,
               etag: Optional[str] = None) -> None:
        """Say what the object at ``url`` is (its size and CRC-32, as a manifest gives them)."""
        self._expected[url] = Expected(int(size), crc32, etag)

    def expect_manifest(self, manifest: Any) -> None:
        """Every file of a shard set (a ``recio.records.shards.Manifest``), as its manifest
        says."""
        for shard in manifest.shards:
            for _, path, size, crc in shard.files():
                if storage.is_url(path):
                    self.expect(path, size, crc)

    def knows(self, url: str) -> bool:
        """Whether ``url`` was described by ``expect`` (a manifest's file)."""
        return url in self._expected

    def expected(self, url: str) -> Expected:
        """What the object at ``url`` must be: as described, else looked up once (its size and
        the store's ETag or modification time)."""
        found = self._expected.get(url)
        if found is None:
            info = storage.info(url, self.storage_options)
            if info.get("type") == "directory":
                raise IsADirectoryError(errno.EISDIR, "is a folder, not an object", url)
            tag = next((str(info[k]) for k in ("ETag", "etag", "md5Hash", "LastModified",
                                                "mtime", "updated") if info.get(k)), None)
            found = self._expected[url] = Expected(int(info["size"]), None, tag)
        return found

    def size(self, url: str) -> int:
        """The size of the object at ``url`` (see ``expected``)."""
        return self.expected(url).size

    # -- reading -----------------------------------------------------------------------------
    def open(self, url: str, *, cached_only: bool = False) -> Optional[LocalCopy]:
        """The checked local copy of ``url``, open: downloaded first when there is none (or
        after waiting for a download of it already running). ``cached_only``: None instead
        of downloading. ``StorageError`` when the download fails, ``ChecksumError`` when the
        object does not match its manifest (twice)."""
        self._check_fork()
        got = self._acquire(url, self.expected(url), demand=True,
                            download=not cached_only)
        return got if isinstance(got, LocalCopy) else None

    def prefetch(self, urls: Sequence[str], *, ahead: Optional[int] = None,
                 threads: int = 1) -> "Prefetch":
        """Start downloading ``urls`` in this order in ``threads`` background threads, each
        only while it fits in the limit without evicting a copy in use or one of the ``urls``
        from the reader's position on. ``ahead``: at most this many objects beyond the
        reader's position (the reader says where it is with ``Prefetch.reached``; where the
        limit leaves no room the prefetch waits for the reader to move on). Without it the
        prefetch ends at the first object that finds no room. ``stop()`` it when the reader
        stops; an error is left to the reader's own ``open`` to raise."""
        self._check_fork()
        return Prefetch(self, list(urls), ahead, threads)

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
        with self._folder_lock():
            return self._read_totals()

    def clear(self) -> None:
        """Delete every copy nobody has open."""
        with self._folder_lock():
            for entry in self._look()[0]:
                self._evict(entry, in_use_too=False)

    # -- the folder --------------------------------------------------------------------------
    def _folder_lock(self) -> "_Held":
        return _Held(os.path.join(self.folder, _LOCK_NAME))

    def _count(self, **counts: int) -> None:
        with self._mutex:
            for name, n in counts.items():
                self.stats[name] += n

    def _read_totals(self) -> Dict[str, int]:
        try:
            with open(os.path.join(self.folder, _TOTALS_NAME), encoding="utf-8") as f:
                saved = json.load(f)
        except (OSError, ValueError):
            saved = {}
        return {name: int(saved.get(name, 0)) for name in _TOTALS}

    def _add_totals(self, **counts: int) -> None:
        """Count in this process's ``stats`` and the folder's totals (the folder lock is
        held)."""
        self._count(**counts)
        totals = self._read_totals()
        for name, n in counts.items():
            totals[name] += n
        _write_json(os.path.join(self.folder, _TOTALS_NAME), totals)

    def _look(self) -> Tuple[List[_Entry], int]:
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
                elif _PART.search(name):
                    if _live_part(item.path):
                        flight += int(_PART.search(name).group(1))
                else:
                    copies.append(_Entry(item.path, item.stat().st_size, 0))
            except FileNotFoundError:
                continue
        for entry in copies:
            entry.used = used.get(os.path.basename(entry.path), 0)
        return copies, flight

    def _evict(self, entry: _Entry, in_use_too: bool) -> bool:
        """Delete a copy (and its record) unless a reader has it open and not ``in_use_too``;
        whether it went. Its readers keep their open file and map."""
        try:
            fd = portable.open_fd(entry.path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            free = _try_lock(fd, fcntl.LOCK_EX)
            if not free and not in_use_too:
                return False
            _remove(entry.path + _RECORD_SUFFIX)
            _remove(entry.path)
        finally:
            _unlock(fd)
            os.close(fd)
        self._add_totals(evictions=1, evicted_in_use=0 if free else 1)
        return True

    def _make_room(self, size: int, demand: bool, protect: Set[str]) -> Union[bool, str]:
        """Evict until ``size`` more bytes fit (the folder lock is held): True when they do;
        False when a prefetch should not go on; for a reader that needs the object now, the
        ``.part`` of a download in flight to wait for when only downloads stand in the way."""
        if self.limit is None:
            return True
        copies, flight = self._look()
        used = sum(e.size for e in copies) + flight
        now = time.time_ns()
        candidates = sorted((e for e in copies if e.path not in protect), key=lambda e: e.used)
        in_use = []
        # first the copies that were read and nobody has open, least recently used first
        for entry in (e for e in candidates if e.used <= now):
            if used + size <= self.limit:
                return True
            if self._evict(entry, in_use_too=False):
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
            self._evict(entry, in_use_too=True)
            used -= entry.size
        if used + size <= self.limit or flight == 0:
            return True  # alone past the limit: the folder holds at most limit + this object
        return next((item.path for item in os.scandir(self.folder)
                     if _PART.search(item.name) and _live_part(item.path)), True)

    def _check_copy(self, path: str, url: str, want: Expected,
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

    def _acquire(self, url: str, want: Expected, demand: bool, download: bool = True,
                 protect: Iterable[str] = (),
                 stop: Optional[threading.Event] = None) -> Union[LocalCopy, str]:
        """The copy of ``url`` (checked, or downloaded, or after waiting for its download), or
        why not: ``"absent"`` (not ``download``), ``"running"`` (a prefetch finds another
        process downloading it) or ``"no room"`` (a prefetch finds the limit reached).
        ``demand``: a reader needs it now (see ``_make_room``)."""
        path = os.path.join(self.folder, copy_name(url))
        protected = {os.path.join(self.folder, copy_name(u)) for u in protect}
        while True:
            wait_for: Optional[str] = None
            with self._folder_lock():
                copy, why, check_crc = self._check_copy(path, url, want, use=demand)
                if copy is not None:
                    self._count(hits=1)  # this process's only: a hit writes nothing shared
                    return copy
                if not download:
                    return "absent"
                running = _running(path)
                if running is not None:
                    if not demand:
                        return "running"
                    wait_for = running
                elif why == "unchecked":  # checked again, in place of a download
                    job = _Download.claim(path, want.size)
                else:
                    room = self._make_room(want.size, demand, protected)
                    if room is False:
                        return "no room"
                    if isinstance(room, str):
                        wait_for = room
                    else:
                        job = _Download.start(path, want.size)
            if wait_for is not None:
                self._count(waits=1)
                _wait(wait_for)
                continue
            try:
                if stop is not None:
                    job.stop = stop
                crc = job.crc_on_disk() if check_crc else None
                if crc is None or crc != check_crc:
                    if crc is not None:  # a damaged copy: downloaded again
                        with self._folder_lock():
                            self._add_totals(damaged=1)
                    crc = self._download(job, url, want)
                with self._folder_lock():
                    copy = job.publish(url, want, crc, awaiting=not demand)
                    if not demand:
                        self._add_totals(prefetched=1)
                    return copy
            finally:
                job.discard()

    def _download(self, job: "_Download", url: str, want: Expected) -> str:
        """Download ``url`` into ``job``; its CRC-32. A copy that does not match the manifest
        (or the size looked up) is downloaded once more, then refused."""
        for attempt in range(_TRIES):
            crc, size = job.write_from(url, self.storage_options, want.size)
            if size != want.size:
                problem = f"has {size:,} bytes; expected {want.size:,}"
            elif want.crc32 is not None and crc != want.crc32:
                problem = f"has CRC-32 {crc}; the manifest says {want.crc32}"
            else:
                problem = ""
            with self._folder_lock():
                self._add_totals(downloads=1, bytes_downloaded=size, damaged=int(bool(problem)))
            if not problem:
                return crc
        raise ChecksumError(f"the object {problem} (downloaded {_TRIES} times): it changed "
                            f"since the manifest was written, or is damaged; check it with "
                            f"recio verify", path=url)


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
        if _try_lock(fd, fcntl.LOCK_EX):
            _remove(path)
            return False
        return True
    finally:
        _unlock(fd)
        os.close(fd)


def _running(path: str) -> Optional[str]:
    """The ``.part`` of a live download of the copy ``path`` (dead ones are deleted)."""
    folder, base = os.path.split(path)
    for item in os.scandir(folder):
        if item.name.startswith(base + ".") and _PART.fullmatch(item.name[len(base):]) \
                and _live_part(item.path):
            return item.path
    return None


def _wait(part: str) -> None:
    """Wait until the download writing ``part`` ends (it releases its lock, or dies)."""
    try:
        fd = portable.open_fd(part, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        _unlock(fd)
        os.close(fd)


class _Held:
    """The folder lock, held for a ``with`` block (a new descriptor each time: threads and
    processes exclude each other alike)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> "_Held":
        self.fd = portable.open_fd(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        _unlock(self.fd)
        os.close(self.fd)


class _Stopped(Exception):
    """A prefetch was stopped in the middle of a download."""


class _Download:
    """An object being written into its ``.part`` file, whose lock it holds until done."""

    def __init__(self, path: str, part: str, fd: int) -> None:
        self.path, self.part, self.fd = path, part, fd
        self.stop: Optional[threading.Event] = None

    @classmethod
    def start(cls, path: str, size: int) -> "_Download":
        """A new ``.part`` for the copy ``path`` (the folder lock is held)."""
        part = f"{path}.{size}.part"
        fd = portable.open_fd(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return cls(path, part, fd)

    @classmethod
    def claim(cls, path: str, size: int) -> "_Download":
        """The copy at ``path`` taken back as a ``.part``, to be checked again (the folder lock
        is held): nobody opens it meanwhile, and a reader that wants it waits."""
        part = f"{path}.{size}.part"
        os.replace(path, part)
        _remove(path + _RECORD_SUFFIX)
        fd = portable.open_fd(part, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
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
                    raise _Stopped()
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
            _unlock(self.fd)
            os.close(self.fd)
            self.fd = -1

    def discard(self) -> None:
        """After a failure or a stop: delete the ``.part`` and let waiters go (nothing after
        ``publish``)."""
        if self.fd >= 0:
            _remove(self.part)
            self.release()


class Prefetch:
    """Downloads a reader's next objects in background threads (see ``ShardCache.prefetch``)."""

    def __init__(self, cache: ShardCache, urls: List[str], ahead: Optional[int],
                 threads: int) -> None:
        self.cache, self.urls, self.ahead = cache, urls, ahead
        self.position = 0  # the reader's: the index in ``urls`` it reads now
        self.error: Optional[BaseException] = None
        self._next = 0  # the next index a thread takes
        self._stopped = threading.Event()
        self._moved = threading.Condition()
        self._threads = [threading.Thread(target=self._run, name=f"recio-prefetch-{i}",
                                          daemon=True) for i in range(max(1, int(threads)))]
        for thread in self._threads:
            thread.start()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def reached(self, index: int) -> None:
        """The reader now reads ``urls[index]``: objects before it may be evicted, and with
        ``ahead`` the prefetch may go that much further."""
        with self._moved:
            self.position = max(self.position, int(index))
            self._moved.notify_all()

    def stop(self, wait: bool = False) -> None:
        """Stop downloading (a download in progress is abandoned, its ``.part`` deleted)."""
        self._stopped.set()
        with self._moved:
            self._moved.notify_all()
        if wait:
            self.join()

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait for the threads to end (all downloaded, stopped, or out of room)."""
        for thread in self._threads:
            thread.join(timeout)

    def _take(self) -> Optional[int]:
        with self._moved:
            while not self._stopped.is_set():
                i = self._next
                if i >= len(self.urls):
                    return None
                if self.ahead is None or i <= self.position + self.ahead:
                    self._next = i + 1
                    return i
                self._moved.wait(0.5)
            return None

    def _run(self) -> None:
        try:
            while True:
                i = self._take()
                if i is None or not self._fetch(i):
                    return
        except _Stopped:
            return
        except BaseException as exc:  # the reader's own open raises it again if it must
            self.error = exc

    def _fetch(self, i: int) -> bool:
        """Fetch ``urls[i]``; False to end the prefetch (stopped, or no room and no reader
        position to wait for)."""
        cache, url = self.cache, self.urls[i]
        if not storage.is_url(url):
            return True  # a local file: nothing to fetch
        while not self._stopped.is_set():
            with self._moved:
                position = self.position
            got = cache._acquire(url, cache.expected(url), demand=False,
                                 protect=self.urls[position:], stop=self._stopped)
            if isinstance(got, LocalCopy):
                got.close()
                return True
            if got != "no room":
                return True  # another process is downloading it
            if self.ahead is None:
                return False
            with self._moved:  # wait for the reader to move on and free something
                while self.position == position and not self._stopped.is_set():
                    self._moved.wait(0.5)
        return False


__all__ = ["ShardCache", "LocalCopy", "Prefetch", "Expected", "copy_name", "CACHE_DIR_ENV",
           "CACHE_LIMIT_ENV", "READ_AHEAD", "PREFETCH_THREADS", "RECHECK_SECONDS"]
