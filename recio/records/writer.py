"""Record writers: ``RecordWriter`` (a ``.rec`` file) and ``IndexedRecordWriter`` (plus ``.idx``).

Byte-identical to dmlc-core's writer: each record is framed as in ``recio.records.framing``; a payload
holding the magic at 4-aligned offsets becomes a multi-part record. Both share the lifecycle of
``recio.records.atomic.ManagedWriter``: files created from a path are written under temporary names and
renamed into place by ``close()`` (``.rec`` before ``.idx``); ``abort()``, an exception inside
``with``, or a writer dropped without ``close()`` leaves no output (``ResourceWarning``).

Small records are copied into a buffer. A large ``bytes`` payload is not copied: the writer
keeps a reference to it (``bytes`` cannot change) and hands the buffer and the payloads to the
OS together, one ``writev`` per ``_BATCH_BYTES``, which spares a system call (and the file
system's work for each one) per record. Any other large buffer (bytearray, NumPy array, ...)
may be changed by the caller once ``write()`` returns, so it is written before that.
"""
from __future__ import annotations

import errno
import io
import os
import weakref
from functools import partial
from typing import Any, BinaryIO, Callable, List, Optional, Sequence, Union, cast

from recio.errors import OutputWriteError, RecordIOError
from recio import portable
from recio.records.atomic import ManagedWriter, OutputSet
from recio.records.framing import (
    MAGIC,
    MAGIC_BYTES,
    MAGIC_LAST_BYTE,
    MAX_RECORD_LENGTH,
    PADDING,
    PART_HEADER,
    SMALL_PAYLOAD,
    WHOLE_HEADERS,
    count_aligned_magic,
    frame_parts,
    split_payload,
)
from recio.records.closed import check_open
from recio.records.index_format import check_key, format_index
from recio.records.write_errors import write_failed
from recio.storage import StorageOptions

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
Buffer = Union[bytes, bytearray, memoryview]

#: records at least this large skip the write buffer: they go to the OS as they are
_DIRECT_WRITE = 1 << 16
#: large records kept by reference are written once they (and the buffer) hold this many bytes:
#: few enough system calls; larger single writes were slower and less steady when measured
#: (benchmarks/bench_records.py, "large write")
_BATCH_BYTES = 2 << 20
#: ... or once this many pieces wait (a ``writev`` takes at most ``IOV_MAX`` of them)
_BATCH_PIECES = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024) - 1
#: disk space is reserved ahead of the writes in steps that grow with the file up to this
_RESERVE_STEP = 32 << 20

def _writev_all(fd: int, chunks: Sequence[Buffer]) -> None:
    """Write ``chunks`` to ``fd`` in order: one system call unless the OS takes only part."""
    total = sum(map(len, chunks))
    written = _writev(fd, chunks)
    if written == total:
        return
    views: List[memoryview] = []
    rest: List[memoryview] = []
    try:
        views = [memoryview(c).cast("B") for c in chunks]
        while written < total:  # a short write (a signal, a full disk about to raise): go on
            rest, skip = [], written
            for v in views:
                if skip >= len(v):
                    skip -= len(v)
                else:
                    rest.append(v[skip:])
                    skip = 0
            n = _writev(fd, rest)
            if n <= 0:
                raise OSError(errno.EIO, f"write to file descriptor {fd} made no progress")
            written += n
    finally:
        # release the views at once: an error's traceback keeps this frame, and a live view
        # of the writer's buffer would forbid clearing it ("Existing exports of data")
        for view in rest + views:
            view.release()


def _write_joined(fd: int, chunks: Sequence[Buffer]) -> int:
    return os.write(fd, b"".join(chunks))


_writev: Callable[[int, Sequence[Buffer]], int] = getattr(os, "writev", _write_joined)


def _salvage_records(fd: int, pieces: List[Buffer]) -> None:
    """Finalizer of a writer written in place: hand its unwritten records to the OS (and give
    back the disk space reserved past them)."""
    if any(pieces):
        _writev_all(fd, pieces)
        del pieces[:-1]
        cast(bytearray, pieces[-1]).clear()  # the last piece is always the writer's _buffer
    os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_CUR))


def _unwritten(pieces: List[Buffer]) -> int:
    """Finalizer of a writer on a borrowed file: how many bytes it never wrote."""
    return sum(map(len, pieces))


def _salvage_indexed(fd: int, pieces: List[Buffer], idx_fd: int, keys: list,
                     offsets: list) -> None:
    _salvage_records(fd, pieces)
    if keys:
        _writev_all(idx_fd, (format_index(keys, offsets),))


class RecordWriter(ManagedWriter):
    """Append records to a RecordIO file; ``write()`` returns each record's byte offset.

    ``target`` is a path or an open binary file. A path's file is written under a temporary
    name and renamed into place by ``close()``; ``atomic=False`` writes it straight at its final
    name (as MXNet does; ``abort()`` then deletes it, and a writer dropped unclosed keeps what
    it wrote). ``fsync=True`` makes a returned ``close()`` survive an OS crash too.

    An open file object is written from its current position and never closed by the writer:
    ``close()`` writes the buffered records and flushes it; ``abort()`` (and a writer dropped
    without ``close()``) only forgets the records still in the writer's buffer; those already
    handed to the file (by ``flush()``, or any large record) stay in it.
    """

    def __init__(self, target: PathOrFile, atomic: bool = True, buffer_size: int = 1 << 20, *,
                 fsync: bool = False, storage_options: StorageOptions = None) -> None:
        if isinstance(target, (str, os.PathLike)):
            path = os.fspath(target)
            outputs = OutputSet.create([(path, "wb", 0)], atomic=atomic, fsync=fsync,
                                       storage_options=storage_options)
            self._bind(outputs.files[0].file, path, 0, buffer_size, owned=True)
            assert self._fd is not None  # OutputSet opens it unbuffered (buffering 0): FileIO
            salvage: Callable[[], Any] = partial(_salvage_records, self._fd, self._pieces)
        else:
            try:
                offset = target.tell()
            except (OSError, AttributeError, ValueError):
                offset = 0
            self._bind(target, getattr(target, "name", None), offset, buffer_size)
            outputs = OutputSet()
            salvage = partial(_unwritten, self._pieces)  # what a dropped writer loses
        self._begin(outputs, f"RecordWriter({self.path!r})", salvage)

    @classmethod
    def _sink(cls, file: BinaryIO, path: Optional[str],
              owner: Optional[Callable[[], Optional[ManagedWriter]]] = None, *,
              offset: int = 0) -> "RecordWriter":
        """The framing and buffering of a RecordWriter over a file another writer owns (the
        owner drains it with ``_drain`` and has the lifecycle: ``owner()`` is aborted when a
        write fails). ``offset``: where ``file`` is positioned (records already in it)."""
        self = cls.__new__(cls)
        self._bind(file, path, offset, 1 << 20, owned=True)
        self.closed = False
        self._owner = owner
        return self

    def _bind(self, file: BinaryIO, path: Any, offset: int, buffer_size: int,
              owned: bool = False) -> None:
        self._file = file
        self.path: Optional[str] = path
        # a raw file (no buffer of its own): large records go to its descriptor with writev
        self._fd: Optional[int] = file.fileno() if isinstance(file, io.FileIO) else None
        # a file of our own that starts empty: reserve disk space ahead (ftruncate at the end)
        self._reserve = owned and self._fd is not None and offset == 0
        self._reserved = 0
        # small records are appended to ``_buffer``, which starts at file offset ``_start``
        # (recio.mx.recordio's writers append their small records here themselves: the next
        # record's offset must stay ``_start + len(_buffer)``)
        self._start = offset
        self._buffer = bytearray()
        self._buffer_size = buffer_size
        # what is not written yet, in file order: buffers and large payloads, the last piece
        # always ``_buffer`` (the same list for life: the finalizer holds it)
        self._pieces: List[Buffer] = [self._buffer]
        self._held = 0  # bytes in the pieces before ``_buffer``
        # large ``bytes`` payloads wait in ``_pieces`` (a borrowed file gets each at once)
        self._batch = owned and self._fd is not None

    def write(self, data: Buffer) -> int:
        """Append one record; returns the byte offset of its first part (what ``.idx`` stores)."""
        if type(data) is bytes:
            n = len(data)
            if (n < SMALL_PAYLOAD and (data.find(MAGIC_LAST_BYTE) < 0 or data.find(MAGIC_BYTES) < 0)
                    and not self.closed):
                # the hot path: one whole part, appended to the buffer without temporaries
                buffer = self._buffer
                offset = self._start + len(buffer)
                buffer += WHOLE_HEADERS[n]
                buffer += data
                if n & 3:
                    buffer += PADDING[n & 3]
                if len(buffer) >= self._buffer_size:
                    self._drain()
                return offset
        else:
            data = self._as_buffer(data)
            if type(data) is bytes:  # a small or non-contiguous buffer, now copied
                return self.write(data)
        return self._write_framed(data)

    def _write_framed(self, data: Buffer) -> int:
        """``write`` of what the hot path does not take: a payload of ``SMALL_PAYLOAD`` bytes or
        more (searched for aligned magic words by ``count_aligned_magic``, one NumPy pass that
        does not slow down at unaligned matches), one with the magic inside (a multi-part
        record when it is 4-aligned), a closed writer or an oversized record (refused)."""
        n = len(data)
        if self.closed or n >= MAX_RECORD_LENGTH:
            self._refuse(n)
        offset = self._offset
        if n >= SMALL_PAYLOAD and not count_aligned_magic(data, 0, n):
            if n >= _DIRECT_WRITE:
                self._write_large(PART_HEADER.pack(MAGIC, n), data, PADDING[n & 3])
                return offset
            buffer = self._buffer
            buffer += PART_HEADER.pack(MAGIC, n)
            buffer += data
            buffer += PADDING[n & 3]
            if len(buffer) >= self._buffer_size:
                self._drain()
            return offset
        for chunk in frame_parts(split_payload(data)):  # aligned magic inside: multi-part
            self._buffer += chunk
        if len(self._buffer) >= self._buffer_size:
            self._drain()
        return offset

    def _as_buffer(self, data: Buffer) -> Buffer:
        """Bytes of any buffer (bytearray, memoryview, NumPy array), size-checked first; a large
        contiguous one is used as it is (a byte view), not copied."""
        view = memoryview(data)
        if view.nbytes >= MAX_RECORD_LENGTH:
            self._refuse(view.nbytes)
        if view.nbytes < SMALL_PAYLOAD or not view.c_contiguous:
            return view.tobytes()
        return view if view.format == "B" and view.ndim == 1 else view.cast("B")

    def _refuse(self, n: int) -> None:
        check_open(self.closed, "writer", self.path)
        raise RecordIOError(f"record of {n} bytes is too large: RecordIO's 29-bit length field "
                            f"allows at most 2**29 - 1 = {MAX_RECORD_LENGTH - 1} bytes; "
                            f"split the payload", self.path, self._offset)

    def _write_large(self, header: bytes, data: Buffer, pad: bytes) -> None:
        """Queue one record after the buffered ones without copying ``data``; written now
        unless ``data`` is ``bytes`` (which cannot change) on a file of the writer's own."""
        buffer = self._buffer
        buffer += header
        pieces = self._pieces
        pieces.append(data)
        self._held += len(buffer) + len(data)
        self._start += len(buffer) + len(data)
        self._buffer = buffer = bytearray(pad)
        pieces.append(buffer)
        if (type(data) is not bytes or not self._batch or self._held >= _BATCH_BYTES
                or len(pieces) >= _BATCH_PIECES):
            self._drain()

    def _grow(self) -> None:
        """Reserve disk space up to a step past ``_offset`` (the end of what is being written),
        so the file system allocates in a few large pieces rather than page by page."""
        start = self._reserved
        end = self._offset + min(max(start, 1 << 20), _RESERVE_STEP)
        assert self._fd is not None  # _reserve is set only for a descriptor
        if portable.reserve(self._fd, start, end - start):
            self._reserved = end
        else:
            self._reserve = False  # not supported here, or the disk is nearly full: write on

    def _release(self) -> None:
        """Give back the reserved space past the last record."""
        if self._reserved:
            assert self._fd is not None  # _grow reserved through it
            os.ftruncate(self._fd, self._offset)
            self._reserved = 0
        self._reserve = False

    @property
    def _offset(self) -> int:
        """Byte offset at which the next record will start (the hot path of ``write`` computes
        it as this does, without a call)."""
        return self._start + len(self._buffer)

    def tell(self) -> int:
        """Byte offset at which the next record will start."""
        check_open(self.closed, "writer", self.path)
        return self._offset

    def _drain(self) -> None:
        """Hand every piece not yet written to the file, in order."""
        buffer = self._buffer
        pieces = self._pieces
        if not buffer and len(pieces) == 1:
            return
        try:
            if self._fd is None:
                write = self._file.write
                for piece in pieces:
                    if piece:
                        write(piece)
            elif self._file.closed:
                raise ValueError(f"{self.path}: write to a closed file")
            else:
                if self._reserve and self._offset > self._reserved:
                    self._grow()
                _writev_all(self._fd, pieces)
        except OSError as exc:
            raise self._failed(exc) from exc
        self._forget()

    def _failed(self, exc: OSError) -> OutputWriteError:
        """A write to the file failed (a full disk, an I/O error): some of the pieces may have
        reached it, so the file is unusable. The writer is aborted (its temporary file
        deleted) and the error to raise names the user's file (``atomic.write_failed``)."""
        # the writer whose files these are: this one, or the one that owns this sink
        owner = self._owner() if self._owner is not None else \
            self if hasattr(self, "_finalizer") else None
        if owner is not None:
            owner.abort()
        return write_failed(exc, self.path or "RecordWriter")

    #: the writer whose lifecycle this one's file belongs to, when another owns it (``_sink``)
    _owner: Optional[Callable[[], Optional[ManagedWriter]]] = None

    def _forget(self) -> None:
        """Drop every piece not yet written (keeping the invariant ``_pieces == [_buffer]``)."""
        buffer = self._buffer
        self._start += len(buffer)
        buffer.clear()
        self._pieces[:] = (buffer,)
        self._held = 0

    def flush(self) -> None:
        """Write buffered records to the file (the final name still appears only on ``close``)."""
        check_open(self.closed, "writer", self.path)
        self._drain()
        if self._fd is None:
            try:
                self._file.flush()
            except OSError as exc:
                raise self._failed(exc) from exc

    def _finish(self) -> None:
        self.flush()
        try:
            self._release()
        except OSError as exc:
            raise self._failed(exc) from exc

    def _drop(self) -> None:
        self._forget()

    def close(self) -> None:
        """Write buffered records and rename the file into place (a file object is flushed)."""
        super().close()

    def abort(self) -> None:
        """Stop without producing the file (its temporary file is deleted)."""
        super().abort()


class IndexedRecordWriter(ManagedWriter):
    """A ``RecordWriter`` that also writes MXNet's ``.idx``: one ``key\\toffset\\n`` line a record.

    Both files appear only on ``close()``: the ``.rec`` first, then the ``.idx`` (an old ``.idx``
    is removed before the new ``.rec`` is renamed in, so they never mismatch). ``atomic`` and
    ``fsync`` as for :class:`RecordWriter`.
    """

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Union[str, "os.PathLike[str]"],
                 key_type: Callable[[Any], Any] = int, atomic: bool = True, *,
                 fsync: bool = False, storage_options: StorageOptions = None) -> None:
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        rec = os.fspath(rec_path)
        outputs = OutputSet.create([(rec, "wb", 0), (self.idx_path, "wb", 0)], atomic=atomic,
                                   fsync=fsync, storage_options=storage_options)
        self._records = RecordWriter._sink(outputs.files[0].file, rec, weakref.ref(self))
        self.path = rec
        self._idx_fd = outputs.files[1].file.fileno()
        self._write_record = self._records.write
        self._keys: list = []  # index lines not yet written, formatted in bulk
        self._offsets: list = []
        assert self._records._fd is not None  # OutputSet opens it unbuffered: FileIO
        self._begin(outputs, f"IndexedRecordWriter({rec!r})",
                    partial(_salvage_indexed, self._records._fd, self._records._pieces,
                            self._idx_fd, self._keys, self._offsets))

    def write(self, key: Any, data: Buffer) -> int:
        """Append a record under ``key``; returns its byte offset.

        Keys should be unique: like MXNet, the writer does not keep every key to check (that
        would grow without bound); readers warn about duplicates and use the last one. A key
        the ``.idx`` cannot hold so that it reads back equal (a tab, a line break, blanks at
        either end, nothing at all, text that is not UTF-8) raises ``RecordIOError`` naming it
        before anything is written (``recio.records.index_format.check_key``).
        """
        if type(key) is not int or self.key_type is not int:
            key = self.key_type(key)
            if type(key) is not int:  # an integer's line always reads back
                key = check_key(key, self.key_type, self.idx_path)
        offset = self._write_record(data)
        keys = self._keys
        keys.append(key)
        self._offsets.append(offset)
        if len(keys) >= 8192:
            self._drain_index()
        return offset

    def _drain_index(self) -> None:
        if self._keys:
            try:
                _writev_all(self._idx_fd, (format_index(self._keys, self._offsets),))
            except OSError as exc:  # a full disk: the index is unusable, the writer aborted
                self.abort()
                raise write_failed(exc, self.idx_path) from exc
            self._keys.clear()
            self._offsets.clear()

    def tell(self) -> int:
        """Byte offset at which the next record will start."""
        check_open(self.closed, "writer", self.path)
        return self._records.tell()

    def flush(self) -> None:
        """Write buffered records and index lines (the final names still appear on ``close``)."""
        check_open(self.closed, "writer", self.path)
        self._records.flush()
        self._drain_index()

    def _finish(self) -> None:
        self._records._finish()
        self._drain_index()
        self._records.closed = True

    def _drop(self) -> None:
        self._records.closed = True
        self._records._drop()
        self._keys.clear()
        self._offsets.clear()

    def close(self) -> None:
        """Write what is buffered and rename both files into place (``.rec`` first)."""
        super().close()

    def abort(self) -> None:
        """Stop without producing either file."""
        super().abort()
