"""``ShardCache``: whole remote objects (shards, their indexes, any ``.rec`` URL) kept on local
disk, bounded, shared by every process of a node.

A reader given a cache (``cache_dir=``, or the ``RECIO_CACHE_DIR`` environment variable) reads
a URL from a local copy of the whole object, downloaded in one streaming GET the first time it
is needed, so the next epoch reads local disk. The copy is checked as it is written: its size
and CRC-32 against what the shard set's manifest says (a ``.rec`` URL without a manifest:
against the object's size and ETag, the CRC-32 being recorded then). Nothing is served from a
copy that was not checked, and a copy is checked again if it changed on disk since (a damaged
copy is downloaded again, and counted).

The folder's files are ``recio.records.cache.folder``'s (listed there).

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
import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from recio import storage
from recio.errors import ChecksumError
from recio.records.cache.folder import (CacheFolder, Download, Expected, LocalCopy, check_copy,
                                        copy_name, running_download, wait_for_download)
from recio.records.cache.prefetch import Prefetch
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

#: the environment's default cache folder for readers of URLs (unset: no cache)
CACHE_DIR_ENV = "RECIO_CACHE_DIR"
#: the environment's default limit, in bytes or with a unit (``50GB``); unset: no limit
CACHE_LIMIT_ENV = "RECIO_CACHE_LIMIT"
#: downloads of one object tried before a mismatch with the manifest is an error
_TRIES = 2
#: objects a sequential reader's prefetch downloads beyond the one it reads
READ_AHEAD = 2
#: downloads a random reader's prefetch (a ``RecordSampler``'s order) runs at once
PREFETCH_THREADS = 2
#: a reader that keeps many copies open under a limit looks this often (seconds) for those
#: that were evicted, to close them and free their space
RECHECK_SECONDS = 1.0
_COUNTERS = ("hits", "downloads", "bytes_downloaded", "waits", "evictions", "evicted_in_use",
             "damaged", "prefetched")


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
        self._folder = CacheFolder.create(folder, limit, self._count)
        self.storage_options = storage_options
        self._expected: Dict[str, Expected] = {}
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

    @property
    def folder(self) -> str:
        """The cache folder's absolute path."""
        return self._folder.folder

    @property
    def limit(self) -> Optional[int]:
        """The most bytes the copies may take (one object more at times), or None."""
        return self._folder.limit

    # -- per process ---------------------------------------------------------------------------
    def _start_process(self) -> None:
        self._pid = os.getpid()
        self._mutex = threading.Lock()
        self.stats: Dict[str, int] = {name: 0 for name in _COUNTERS}

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: its own counters, no parent's threads
            self._start_process()

    def _count(self, **counts: int) -> None:
        """Count in this process's ``stats``."""
        with self._mutex:
            for name, n in counts.items():
                self.stats[name] += n

    def __getstate__(self) -> dict:
        return {"folder": self.folder, "limit": self.limit,
                "storage_options": self.storage_options, "expected": dict(self._expected)}

    def __setstate__(self, state: dict) -> None:
        self._folder = CacheFolder(state["folder"], state["limit"], self._count)
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
        """Every file of a shard set (a ``recio.records.manifest.Manifest``), as its manifest
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
        return Prefetch(self._fetch_ahead, list(urls), ahead, threads)

    def usage(self) -> int:
        """Bytes of the copies and downloads in the folder now."""
        return self._folder.usage()

    def totals(self) -> Dict[str, int]:
        """The counters of every process that used the folder: ``downloads``,
        ``bytes_downloaded``, ``evictions``, ``evicted_in_use``, ``damaged``, ``prefetched``
        (``stats`` has this process's, with its ``hits`` and ``waits``)."""
        return self._folder.totals()

    def clear(self) -> None:
        """Delete every copy nobody has open."""
        self._folder.clear()

    # -- getting a copy ----------------------------------------------------------------------
    def _fetch_ahead(self, url: str, protect: List[str],
                     stop: threading.Event) -> Union[LocalCopy, str]:
        """A prefetch's download of ``url`` (see ``Prefetch``)."""
        return self._acquire(url, self.expected(url), demand=False, protect=protect, stop=stop)

    def _acquire(self, url: str, want: Expected, demand: bool, download: bool = True,
                 protect: Iterable[str] = (),
                 stop: Optional[threading.Event] = None) -> Union[LocalCopy, str]:
        """The copy of ``url`` (checked, or downloaded, or after waiting for its download), or
        why not: ``"absent"`` (not ``download``), ``"running"`` (a prefetch finds another
        process downloading it) or ``"no room"`` (a prefetch finds the limit reached).
        ``demand``: a reader needs it now (see ``CacheFolder.make_room``)."""
        path = os.path.join(self.folder, copy_name(url))
        protected = {os.path.join(self.folder, copy_name(u)) for u in protect}
        while True:
            wait_for: Optional[str] = None
            with self._folder.lock():
                copy, why, check_crc = check_copy(path, url, want, use=demand)
                if copy is not None:
                    self._count(hits=1)  # this process's only: a hit writes nothing shared
                    return copy
                if not download:
                    return "absent"
                running = running_download(path)
                if running is not None:
                    if not demand:
                        return "running"
                    wait_for = running
                elif why == "unchecked":  # checked again, in place of a download
                    job = Download.claim(path, want.size)
                else:
                    room = self._folder.make_room(want.size, demand, protected)
                    if room is False:
                        return "no room"
                    if isinstance(room, str):
                        wait_for = room
                    else:
                        job = Download.start(path, want.size)
            if wait_for is not None:
                self._count(waits=1)
                wait_for_download(wait_for)
                continue
            try:
                if stop is not None:
                    job.stop = stop
                crc = job.crc_on_disk() if check_crc else None
                if crc is None or crc != check_crc:
                    if crc is not None:  # a damaged copy: downloaded again
                        with self._folder.lock():
                            self._folder.add_totals(damaged=1)
                    crc = self._download(job, url, want)
                with self._folder.lock():
                    copy = job.publish(url, want, crc, awaiting=not demand)
                    if not demand:
                        self._folder.add_totals(prefetched=1)
                    return copy
            finally:
                job.discard()

    def _download(self, job: Download, url: str, want: Expected) -> str:
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
            with self._folder.lock():
                self._folder.add_totals(downloads=1, bytes_downloaded=size,
                                        damaged=int(bool(problem)))
            if not problem:
                return crc
        raise ChecksumError(f"the object {problem} (downloaded {_TRIES} times): it changed "
                            f"since the manifest was written, or is damaged; check it with "
                            f"recio verify", path=url)
