"""Byte sources: where a ``RecordReader``'s bytes come from (dmlc-core's ``Stream`` under its
record reader).

Every source has one interface: ``size``, ``read(start, end)`` (``file[start:end]``),
``window(offset, n)`` (at least ``n`` bytes from ``offset`` for a sequential walk, a view
where it can be one), ``close()``, and the read-ahead hints ``fetch``, ``limit`` and
``use_index`` that only a remote source acts on (the others need nothing, so callers call them
on any source). ``buffer`` is the whole file when it is addressable (a map or ``bytes``: the
record walker then checks whole windows with NumPy and slices records out of it), else None;
``fd`` is a descriptor to copy large records from with ``pread`` (no page faults on a map),
else None.

* :class:`_MemorySource`: an in-memory file (``io.BytesIO``).
* :class:`_MapSource`: a local file, memory-mapped; :class:`_PreadSource` the same where the
  platform has ``pread`` (large records are copied with it).
* :class:`_RemoteSource`: an object at a URL (``recio.storage.RemoteFile``): streamed while reads
  are sequential, one ranged GET per record given its extent from an index, batches coalesced.
* :class:`_StreamSource`: any other seekable binary file (read by ``seek`` and ``read``).

:func:`open_source` picks the source for what a caller passed, once.
"""
from __future__ import annotations

import io
import mmap
import os
from typing import Any, BinaryIO, List, Optional, Tuple, Union

from recio import portable
from recio.storage import RemoteFile, StorageOptions, is_url, open_regular

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
Span = Tuple[int, int]


class ByteSource:
    """A file's bytes, read by position (so threads and forked processes can share it).

    ``path``: the file's name for errors (None for an anonymous file object); ``file``: the
    file object read; ``owns_file``: whether ``close()`` closes it (the source opened it).
    """

    #: True for an object read over the network (``RemoteSource``)
    remote = False

    def __init__(self, file: Any, path: Optional[str], owns_file: bool, size: int) -> None:
        self.file = file
        self.path = path
        self.owns_file = owns_file
        self.size = size
        self.buffer: Any = None
        self.fd: Optional[int] = None

    def read(self, start: int, end: int) -> Any:
        """``file[start:end]`` (shorter only at the end of the file)."""
        raise NotImplementedError

    def window(self, offset: int, n: int) -> Any:
        """At least ``n`` bytes from ``offset`` (fewer only at the end) for a sequential walk."""
        return self.read(offset, offset + n)

    # -- read-ahead hints: only a remote source acts on them ---------------------------------
    def fetch(self, ranges: List[Span]) -> None:
        """Say which byte ranges the next reads need (a local file needs nothing)."""

    def limit(self, end: Optional[int]) -> None:
        """Sequential reads go no further than ``end`` (a reader of part of a file says where
        the part ends)."""

    def use_index(self, index: Any) -> None:
        """The file's ``recio.records.index.Index``, whose offsets bound every record."""

    def fetch_record(self, offset: int) -> None:
        """The record at ``offset`` is read next (by offset, not sequentially)."""

    def fetch_records(self, offsets: List[int]) -> None:
        """The records at ``offsets`` are read next."""

    def evicted(self) -> bool:
        """Whether the local copy a ``shard_cache`` gave has left the cache since (a limit
        evicted it): it is still read, and its disk space freed when closed. False otherwise."""
        check = getattr(self.file, "evicted", None)
        return bool(check is not None and check())

    def close(self) -> None:
        """Release the file (if the source opened it)."""
        if self.owns_file and self.file is not None:
            self.file.close()
        self.file = None


class _MemorySource(ByteSource):
    """An in-memory file: its bytes are the buffer."""

    def __init__(self, data: bytes, path: Optional[str], file: Any = None,
                 owns_file: bool = False) -> None:
        super().__init__(file, path, owns_file, len(data))
        self.buffer = data

    def read(self, start: int, end: int) -> Any:
        return self.buffer[start:end]

    def close(self) -> None:
        self.buffer = None
        super().close()


class _MapSource(_MemorySource):
    """A local file, memory-mapped read-only: a reader opened before ``fork()`` keeps working
    in the children, and no file pointer is shared."""

    def __init__(self, file: Any, path: Optional[str], owns_file: bool, fileno: int,
                 size: int) -> None:
        data: Any = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ) if size else b""
        super().__init__(data, path, file, owns_file)

    def close(self) -> None:
        if isinstance(self.buffer, mmap.mmap):
            try:
                self.buffer.close()
            except BufferError:  # a view_at() memoryview is still alive: the GC unmaps later
                pass
        super().close()


class _PreadSource(_MapSource):
    """A local file, memory-mapped, whose large records are copied with ``pread`` from ``fd``
    (``recio.portable.read_at``): the record walker reads them so, checking the copy while it
    is in the CPU cache, and small records and windows from the map."""

    def __init__(self, file: Any, path: Optional[str], owns_file: bool, fileno: int,
                 size: int) -> None:
        super().__init__(file, path, owns_file, fileno, size)
        self.fd = fileno

    def close(self) -> None:
        self.fd = None
        super().close()


class _StreamSource(ByteSource):
    """A seekable binary file without a descriptor to map: read by ``seek`` and ``read``."""

    def __init__(self, file: Any, path: Optional[str], owns_file: bool) -> None:
        super().__init__(file, path, owns_file, file.seek(0, os.SEEK_END))

    def read(self, start: int, end: int) -> Any:
        self.file.seek(start)
        return self.file.read(end - start)


class _RemoteSource(ByteSource):
    """An object at a URL, read by ranged GETs (``recio.storage.RemoteFile``, which owns how
    bytes cross the network), with the reader's prefetch policy: a sequential walk reads
    windows of the stream (one GET streams the object, up to ``limit``); given the file's index
    (``use_index``) a read by offset is one GET of exactly its record's bytes and a batch
    (``fetch_records``) coalesced, concurrent GETs."""

    remote = True

    def __init__(self, file: RemoteFile, path: Optional[str], owns_file: bool) -> None:
        super().__init__(file, path, owns_file, file.seek(0, os.SEEK_END))
        self.index: Any = None

    def read(self, start: int, end: int) -> Any:
        return self.file.pread(end - start, start)  # by position: threads may share the reader

    def window(self, offset: int, n: int) -> Any:
        return self.file.window(offset, n)

    def fetch(self, ranges: List[Span]) -> None:
        """Fetch ``ranges`` now: one GET for one range; for several, neighbours coalesced and
        the GETs concurrent."""
        if len(ranges) == 1:
            self.file.prefetch(*ranges[0])
        elif ranges:
            self.file.prefetch_many(ranges)

    def limit(self, end: Optional[int]) -> None:
        """Stream no further than ``end`` (reads past it cost a ranged GET each)."""
        self.file.stream_end = end

    def use_index(self, index: Any) -> None:
        """Read a record by offset in one GET of exactly its bytes (``Index.record_end``)."""
        self.index = index

    def fetch_record(self, offset: int) -> None:
        if self.index is not None:
            end = self.index.record_end(offset)  # the record's whole extent, one GET
            if end is not None:
                self.file.prefetch(offset, end)

    def fetch_records(self, offsets: List[int]) -> None:
        if self.index is not None:
            self.fetch([(o, self.index.record_end(o) or self.size) for o in offsets])

    def close(self) -> None:
        self.index = None
        super().close()


def open_source(source: PathOrFile, storage_options: StorageOptions = None,
                shard_cache: Any = None) -> ByteSource:
    """The byte source for a path, a URL (read from ``shard_cache``'s checked local copy when
    given) or a binary file object (left open on close: the caller owns it)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not is_url(path):  # a FIFO, device or folder: refused, without blocking
            file: Any = open_regular(path)
        elif shard_cache is not None:
            file = shard_cache.open(path)
        else:
            file = RemoteFile(path, storage_options)
        return _source_of(file, path, True)
    name = getattr(source, "name", None)
    return _source_of(source, None if isinstance(name, int) else name, False)


def _source_of(file: Any, path: Optional[str], owns: bool) -> ByteSource:
    """The source that reads ``file`` best: its map, its stream, or its ranged GETs."""
    if isinstance(file, RemoteFile):
        return _RemoteSource(file, path, owns)
    if isinstance(file, io.BytesIO):
        return _MemorySource(file.getvalue(), path, file, owns)
    try:
        fileno = file.fileno()
        size = os.fstat(fileno).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        fileno = None
    if fileno is not None:  # without pread, large records are copied from the map
        kind = _PreadSource if portable.has_pread() else _MapSource
        return kind(file, path, owns, fileno, size)
    if not (hasattr(file, "seek") and file.seekable()):
        if owns:
            file.close()
        raise TypeError(f"{path or file!r}: RecordReader needs a path or a seekable binary file")
    return _StreamSource(file, path, owns)
