"""Reading an object at a URL by byte ranges: :class:`RemoteFile`, the one reader of remote bytes.

A read that continues where the last one ended opens one streaming GET (a plain HTTP GET of a
presigned URL for S3, else ranged GETs through fsspec) filled ahead by a thread; any other read
is one ranged GET; ``prefetch_many`` coalesces neighbouring ranges and runs the GETs
concurrently. See the package docstring (``recio.storage``) for the whole policy.
"""
from __future__ import annotations

import bisect
import errno
import os
import queue
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

from recio.errors import StorageError
from recio.storage.objects import filesystem, translated
from recio.storage.paths import StorageOptions, url_scheme

#: bytes per block of a streaming read (one ``read`` of the response body)
STREAM_BLOCK = 8 << 20
#: blocks a streaming read keeps ready ahead of the reader
_STREAM_AHEAD = 3
#: a random read fetches at least this much (a record header and a small record in one GET)
_RANDOM_BLOCK = 64 << 10
#: ``prefetch_many`` merges ranges at most this far apart into one GET ...
_COALESCE_GAP = 64 << 10
#: ... as long as the merged GET stays below this
_COALESCE_MAX = 16 << 20
#: prefetched and random blocks kept, in bytes (the oldest are dropped first)
_CACHE_BYTES = 64 << 20
#: a presigned URL for streams is used for at most this many seconds (it is valid for 6 h)
_URL_FRESH = 3600.0


# -- reading an object by ranges -------------------------------------------------------------
def _http_url(fs: Any, path: str, url: str) -> Optional[str]:
    """A plain HTTP(S) URL that serves the object to a GET (a presigned one for S3), or None
    when the file system has none (its streams then use ranged GETs).

    S3 is told by the file system's ``protocol`` and signed by ``sign``, both fsspec's public
    API (s3fs presigns through its boto client, so the URL names the configured endpoint).
    Other stores keep ranged GETs: their ``sign`` is missing or needs credentials a reader may
    not have (gcsfs signs only with a service-account key)."""
    protocols = getattr(fs, "protocol", ())
    if "s3" in ((protocols,) if isinstance(protocols, str) else protocols):
        return str(fs.sign(path, expiration=6 * 3600))
    if url_scheme(url) in ("http", "https"):
        return url
    return None


def _http_open(http_url: str, start: int, end: int) -> Any:
    """The response of one streaming GET of ``[start, end)``."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(http_url, headers={"Range": f"bytes={start}-{end - 1}"})
    try:
        response = urllib.request.urlopen(request, timeout=120)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise FileNotFoundError(errno.ENOENT, "no such object") from exc
        if exc.code in (401, 403):
            raise PermissionError(errno.EACCES, f"HTTP {exc.code} {exc.reason}") from exc
        raise
    if response.status != 206 and start > 0:
        response.close()
        raise OSError(f"the server ignored the byte range (HTTP {response.status})")
    return response


def _read_into(response: Any, view: memoryview) -> int:
    """Fill ``view`` from ``response``: the socket is read straight into it (``readinto``,
    without the GIL), the cheapest way a Python client can take bytes. Fewer bytes only at
    the end of the response."""
    got = 0
    while got < len(view):
        n = response.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _http_stream(http_url: str, start: int, end: int, block: int) -> Iterator[bytearray]:
    """Blocks of ``[start, end)`` from one streaming GET, each read straight from the socket."""
    with _http_open(http_url, start, end) as response:
        pos = start
        while pos < end:
            buf = bytearray(min(block, end - pos))
            got = _read_into(response, memoryview(buf))
            if got:
                yield buf if got == len(buf) else buf[:got]
            if got < len(buf):
                return
            pos += got


def _ranged_stream(fs: Any, path: str, start: int, end: int, block: int) -> Iterator[bytes]:
    """Blocks of ``path[start:end]``, one ranged GET each (any fsspec file system)."""
    pos = start
    while pos < end:
        stop = min(end, pos + block)
        data = fs.cat_file(path, start=pos, end=stop)
        if not data:
            return
        yield data
        pos += len(data)


def _put(queue_: "queue.Queue[Any]", stopped: threading.Event, item: Any) -> bool:
    while not stopped.is_set():
        try:
            queue_.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _fill(blocks: Iterator[Any], queue_: "queue.Queue[Any]", stopped: threading.Event) -> None:
    """The read-ahead thread of a stream. It holds no reference to the stream, so a stream
    dropped without ``close()`` is collected, which stops the thread."""
    try:
        for block in blocks:
            if not _put(queue_, stopped, block):
                return
        _put(queue_, stopped, None)
    except BaseException as exc:  # handed to the reader, which raises it
        _put(queue_, stopped, exc)


class _Stream:
    """One streaming read of ``[start, end)``: a thread fills a queue of blocks ahead."""

    def __init__(self, remote: "RemoteFile", start: int, end: int) -> None:
        self.url, self.start, self.end = remote.url, start, end
        self.blocks: Deque[Any] = deque()  # held blocks; the first begins at self.start
        self.held_end = start  # end of the held blocks
        self.exhausted = False
        self.queue: "queue.Queue[Any]" = queue.Queue(maxsize=_STREAM_AHEAD)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=_fill, name=f"recio-read {remote.url}",
                                       args=(remote._open_stream(start, end), self.queue,
                                             self.stopped), daemon=True)
        self.thread.start()

    def __del__(self) -> None:
        self.stopped.set()

    def covers(self, offset: int) -> bool:
        return self.start <= offset < self.end and not (self.exhausted and offset >= self.held_end)

    def view(self, offset: int, n: int) -> Any:
        """At least ``[offset, offset + n)`` (clipped to the stream's end): a zero-copy view to
        the end of the held block that holds ``offset`` when that covers ``n`` bytes, else a
        copy of exactly those bytes."""
        self.read(offset, 0)  # drop the blocks before offset
        pos = self.start
        for block in self.blocks:
            if pos <= offset < pos + len(block):
                if pos + len(block) >= min(offset + n, self.end):
                    return memoryview(block)[offset - pos:]
                break
            pos += len(block)
        return self.read(offset, n)

    def _drop_before(self, offset: int) -> None:
        """Forget the blocks that end at or before ``offset``."""
        while self.blocks and self.start + len(self.blocks[0]) <= offset:
            self.start += len(self.blocks.popleft())

    def read(self, offset: int, n: int) -> bytes:
        """``[offset, offset + n)`` (clipped to the stream's end), pulling blocks as needed and
        dropping those before ``offset``."""
        want = min(offset + n, self.end)
        self._drop_before(offset)
        while self.held_end < want and not self.exhausted:
            item = self.queue.get()
            if item is None:
                self.exhausted = True
                if self.held_end < self.end:
                    raise StorageError(f"the connection ended after {self.held_end} of "
                                       f"{self.end} bytes; retry the read", self.url,
                                       self.held_end)
                break
            if isinstance(item, BaseException):
                self.exhausted = True
                with translated(self.url, "reading", self.held_end):
                    raise item
            if not self.blocks:
                self.start = self.held_end
            self.blocks.append(item)
            self.held_end += len(item)
            self._drop_before(offset)
        if offset < self.start:
            return b""
        out, pos = [], self.start
        for block in self.blocks:
            lo, hi = max(offset, pos), min(want, pos + len(block))
            if lo < hi:
                out.append(memoryview(block)[lo - pos:hi - pos])
            pos += len(block)
            if pos >= want:
                break
        return bytes(out[0]) if len(out) == 1 else b"".join(out)  # one copy, to bytes

    def close(self) -> None:
        self.stopped.set()
        while True:  # unblock the filler
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break


class RemoteFile:
    """A read-only file over an object at a URL: ``pread``, ``read``/``seek`` (so it can stand
    where a file object goes), ``prefetch`` and ``prefetch_many`` (see the module's notes).

    ``requests`` counts the GETs issued (streams count one each), for tests and benchmarks.
    ``stream_end``: where a streaming read stops (a reader of part of the object says so; by
    default the end of the object).
    """

    def __init__(self, url: str, storage_options: StorageOptions = None, *,
                 size: Optional[int] = None) -> None:
        self.url = os.fspath(url)
        self.name = self.url
        self.storage_options = dict(storage_options or {})
        self._pid = -1
        self._connect()
        self.size = int(size) if size is not None else self._size()
        self._pos = 0
        self.stream_end: Optional[int] = None
        self.requests = 0
        self.closed = False

    # -- connection --------------------------------------------------------------------------
    def _connect(self) -> None:
        self._fs, self._path = filesystem(self.url, self.storage_options)
        self._http_url: Optional[str] = None  # for streams ("": none, use ranged GETs)
        self._http_url_made = 0.0
        self._lock = threading.Lock()
        self._starts: List[int] = []  # sorted starts of the cached blocks
        self._blocks: Dict[int, bytes] = {}
        self._cached = 0
        self._stream: Optional[_Stream] = None
        self._last_end = 0  # where the last read ended: a read from here is sequential
        self._pid = os.getpid()

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: no threads, the parent's connections
            self._connect()

    def _size(self) -> int:
        with translated(self.url, "looking up"):
            found = self._fs.info(self._path)
        if found.get("type") == "directory":
            raise IsADirectoryError(errno.EISDIR, "is a folder, not an object", self.url)
        return int(found["size"])

    def _get(self, start: int, end: int) -> bytes:
        """One ranged GET of ``[start, end)``."""
        self.requests += 1
        with translated(self.url, "reading", start):
            data = self._fs.cat_file(self._path, start=start, end=end)
        if len(data) != end - start:
            raise StorageError(f"asked for {end - start} bytes, the server sent {len(data)}; "
                               "the object changed or the connection dropped", self.url, start)
        return data

    def _stream_url(self, start: int) -> str:
        """The plain URL streams GET ("": none, they use ranged GETs)."""
        if self._http_url is None or time.monotonic() - self._http_url_made > _URL_FRESH:
            with translated(self.url, "reading", start):  # presigned URLs expire: renewed
                self._http_url = _http_url(self._fs, self._path, self.url) or ""
            self._http_url_made = time.monotonic()
        return self._http_url

    def _open_stream(self, start: int, end: int) -> Iterator[Any]:
        http_url = self._stream_url(start)
        if http_url:
            return _http_stream(http_url, start, end, STREAM_BLOCK)
        return _ranged_stream(self._fs, self._path, start, end, STREAM_BLOCK)

    def stream_into(self, buffer: Any) -> Iterator[int]:
        """Read the whole object with one streaming GET into ``buffer`` (a bytearray), again
        and again: each step yields how many bytes the buffer now holds (its whole length but
        at the end), which the caller uses before the next step. The socket is read straight
        into the buffer; a small buffer that is reused stays in the CPU's cache for what the
        caller does with it. ``StorageError`` (with the offset) when the connection ends
        early."""
        self._check_fork()
        view = memoryview(buffer).cast("B")
        pos = 0
        self.requests += 1
        http_url = self._stream_url(0)
        if http_url and self.size:
            with translated(self.url, "reading", 0):
                response = _http_open(http_url, 0, self.size)
            with response:
                while pos < self.size:
                    want = min(len(view), self.size - pos)
                    with translated(self.url, "reading", pos):
                        got = _read_into(response, view[:want])
                    pos += got
                    if got:
                        yield got
                    if got < want:
                        break
        elif self.size:
            blocks = _ranged_stream(self._fs, self._path, 0, self.size, STREAM_BLOCK)
            while pos < self.size:
                with translated(self.url, "reading", pos):
                    block = next(blocks, b"")
                if not block:
                    break
                for at in range(0, len(block), len(view)):
                    piece = block[at:at + len(view)]
                    view[:len(piece)] = piece
                    pos += len(piece)
                    yield len(piece)
        if pos < self.size:
            raise StorageError(f"the connection ended after {pos} of {self.size} bytes; retry "
                               f"the read", self.url, pos)

    # -- the block cache ---------------------------------------------------------------------
    def _cache(self, start: int, data: bytes) -> None:
        with self._lock:
            if start in self._blocks:
                return
            bisect.insort(self._starts, start)
            self._blocks[start] = data
            self._cached += len(data)
            while self._cached > _CACHE_BYTES and len(self._starts) > 1:
                victim = next(iter(self._blocks))  # insertion order: the oldest block
                if victim == start:
                    break
                self._cached -= len(self._blocks.pop(victim))
                self._starts.remove(victim)

    def _cached_range(self, start: int, end: int) -> Optional[bytes]:
        with self._lock:
            i = bisect.bisect_right(self._starts, start) - 1
            if i < 0:
                return None
            block_start = self._starts[i]
            block = self._blocks[block_start]
            if block_start + len(block) < end:
                return None
            return block[start - block_start:end - block_start]

    def prefetch(self, start: int, end: int) -> None:
        """Fetch ``[start, end)`` with one GET (unless already held), so reads inside it cost
        nothing: a keyed read knows its record's extent from the index."""
        self._check_fork()
        end = min(end, self.size)
        if start >= end or self._cached_range(start, end) is not None:
            return
        self._cache(start, self._get(start, end))

    def prefetch_many(self, ranges: Sequence[Tuple[int, int]]) -> None:
        """Fetch many ranges: neighbours (at most 64 KiB apart) merged into one GET,
        the GETs run concurrently."""
        self._check_fork()
        merged = coalesce(ranges, self.size)
        merged = [(a, b) for a, b in merged if self._cached_range(a, b) is None]
        if not merged:
            return
        if len(merged) == 1:
            self.prefetch(*merged[0])
            return
        self.requests += len(merged)
        with translated(self.url, "reading", merged[0][0]):
            blocks = self._fs.cat_ranges([self._path] * len(merged), [a for a, _ in merged],
                                         [b for _, b in merged], on_error="return")
        for (a, b), data in zip(merged, blocks):
            if isinstance(data, BaseException):
                with translated(self.url, "reading", a):
                    raise data
            if len(data) != b - a:
                raise StorageError(f"asked for {b - a} bytes, the server sent {len(data)}",
                                   self.url, a)
            self._cache(a, data)

    # -- reading -----------------------------------------------------------------------------
    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer only at the end of the object)."""
        self._check_fork()
        if self.closed:
            raise ValueError(f"{self.url}: read from a closed RemoteFile")
        end = min(offset + n, self.size)
        if offset >= end:
            return b""
        data = self._cached_range(offset, end)
        if data is None:
            data = self._from_stream(offset, end)
        if data is None:
            fetch_end = min(self.size, max(end, offset + _RANDOM_BLOCK))
            block = self._get(offset, fetch_end)
            self._cache(offset, block)
            data = block[:end - offset]
        self._last_end = end
        return data

    def window(self, offset: int, n: int) -> Any:
        """At least ``n`` bytes from ``offset`` (fewer only at the end of the object) for a
        reader walking sequentially: a zero-copy view into the stream's block when it holds
        them (see ``_Stream.view``), else a copy. The stream starts here if none covers
        ``offset`` (a plain read beyond ``stream_end``)."""
        self._check_fork()
        end = min(offset + n, self.size)
        if offset >= end:
            return b""
        stream = self._stream
        if stream is None or not stream.covers(offset):
            if self.stream_end is not None and offset >= self.stream_end:
                return self.pread(n, offset)
            stream = self._start_stream(offset, end)
        view = stream.view(offset, end - offset)
        self._last_end = offset + len(view)
        return view

    def _start_stream(self, offset: int, end: int) -> "_Stream":
        if self._stream is not None:
            self._stream.close()
        stop = self.stream_end if self.stream_end is not None and self.stream_end > offset \
            else self.size
        self.requests += 1
        self._stream = _Stream(self, offset, min(max(stop, end), self.size))
        return self._stream

    def _from_stream(self, offset: int, end: int) -> Optional[bytes]:
        stream = self._stream
        if stream is not None and stream.covers(offset):
            return stream.read(offset, end - offset)
        if offset != self._last_end or (self.stream_end is not None and offset >= self.stream_end):
            return None
        return self._start_stream(offset, end).read(offset, end - offset)

    # -- the file-object interface -----------------------------------------------------------
    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self._pos
        data = self.pread(n, self._pos)
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        import io

        raise io.UnsupportedOperation(f"{self.url} is a remote object, not a local file")

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        with self._lock:
            self._blocks.clear()
            self._starts.clear()
            self._cached = 0
        self.closed = True

    def __enter__(self) -> "RemoteFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {"url": self.url, "storage_options": self.storage_options, "size": self.size}

    def __setstate__(self, state: dict) -> None:
        RemoteFile.__init__(self, state["url"], state["storage_options"], size=state["size"])

    def __repr__(self) -> str:
        return f"RemoteFile({self.url!r}, {self.size} bytes)"


def coalesce(ranges: Sequence[Tuple[int, int]], limit: int) -> List[Tuple[int, int]]:
    """Sorted ``[start, end)`` ranges, clipped to ``limit``, with neighbours at most
    64 KiB apart merged while the merged range stays under 16 MiB."""
    out: List[Tuple[int, int]] = []
    for start, end in sorted((int(a), min(int(b), limit)) for a, b in ranges):
        if start >= end:
            continue
        if out and start - out[-1][1] <= _COALESCE_GAP and end - out[-1][0] <= _COALESCE_MAX:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
