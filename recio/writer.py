"""Record writers: ``RecordWriter`` (a ``.rec`` file) and ``IndexedRecordWriter`` (plus ``.idx``).

Byte-identical to dmlc-core's writer: each record is framed as in ``recio.framing``; a payload
holding the magic at 4-aligned offsets becomes a multi-part record. Output is buffered, and
files created from a path are written under a temporary name and renamed on ``close()``, so a
crash never leaves a complete-looking file.
"""
from __future__ import annotations

import os
from typing import Any, BinaryIO, Callable, Optional, Union

from .atomic import AtomicFile
from .errors import IndexFileError, RecordIOError
from .framing import (MAGIC, MAGIC_BYTES, MAX_RECORD_LENGTH, PADDING, PART_HEADER, frame_parts,
                      split_payload)

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
Buffer = Union[bytes, bytearray, memoryview]

#: records at least this large skip the write buffer (one copy fewer)
_DIRECT_WRITE = 1 << 16


class RecordWriter:
    """Append records to a RecordIO file; ``write()`` returns each record's byte offset.

    ``target`` is a path (created atomically unless ``atomic=False``) or an open binary file
    (written from its current position, never closed by the writer).
    """

    def __init__(self, target: PathOrFile, atomic: bool = True,
                 buffer_size: int = 1 << 20) -> None:
        self._atomic: Optional[AtomicFile] = None
        if isinstance(target, (str, os.PathLike)):
            self.path: Optional[str] = os.fspath(target)
            if atomic:
                self._atomic = AtomicFile(self.path)
                self._file: BinaryIO = self._atomic.file
            else:
                self._file = open(self.path, "wb")
            self._owns_file = True
            self._offset = 0
        else:
            self._file = target
            self.path = getattr(target, "name", None)
            self._owns_file = False
            try:
                self._offset = target.tell()
            except (OSError, AttributeError, ValueError):
                self._offset = 0
        self._buffer = bytearray()
        self._buffer_size = buffer_size
        self.closed = False
        self.records = 0

    def write(self, data: Buffer) -> int:
        """Append one record; returns the byte offset of its first part (what ``.idx`` stores)."""
        if self.closed:
            raise ValueError(f"{self.path or 'RecordWriter'}: write to a closed writer")
        n = len(data) if isinstance(data, (bytes, bytearray)) else memoryview(data).nbytes
        if n >= MAX_RECORD_LENGTH:
            raise RecordIOError(f"record of {n} bytes is too large: RecordIO's 29-bit length field "
                                f"allows at most 2**29 - 1 = {MAX_RECORD_LENGTH - 1} bytes; split the payload",
                                self.path, self._offset)
        if not isinstance(data, (bytes, bytearray)):
            data = bytes(memoryview(data).cast("B"))
        offset = self._offset
        buffer = self._buffer
        if data.find(MAGIC_BYTES) < 0:  # the common case: one whole part, cflag 0
            pad = PADDING[n & 3]
            if n >= _DIRECT_WRITE:
                self._drain()
                self._file.write(PART_HEADER.pack(MAGIC, n))
                self._file.write(data)
                self._file.write(pad)
            else:
                buffer += PART_HEADER.pack(MAGIC, n)
                buffer += data
                buffer += pad
            self._offset = offset + 8 + n + len(pad)
        else:
            for chunk in frame_parts(split_payload(data)):
                buffer += chunk
                self._offset += len(chunk)
        if len(buffer) >= self._buffer_size:
            self._drain()
        self.records += 1
        return offset

    def tell(self) -> int:
        """Byte offset at which the next record will start."""
        return self._offset

    def _drain(self) -> None:
        if self._buffer:
            self._file.write(self._buffer)
            self._buffer.clear()

    def flush(self) -> None:
        """Write buffered records to the file (the final name still appears only on ``close``)."""
        self._drain()
        self._file.flush()

    def close(self) -> None:
        """Flush and close; a path target is renamed from its temporary name into place."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        if self._atomic is not None:
            self._atomic.commit()
        elif self._owns_file:
            self._file.close()

    def abort(self) -> None:
        """Stop without producing the file (a path target's temporary file is deleted)."""
        if self.closed:
            return
        self.closed = True
        self._buffer.clear()
        if self._atomic is not None:
            self._atomic.discard()
        elif self._owns_file:
            self._file.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class IndexedRecordWriter:
    """A ``RecordWriter`` that also writes MXNet's ``.idx``: one ``key\\toffset\\n`` line a record."""

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Union[str, "os.PathLike[str]"],
                 key_type: Callable[[Any], Any] = int, atomic: bool = True) -> None:
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self._records = RecordWriter(rec_path, atomic=atomic)
        self.path = self._records.path
        if atomic:
            self._idx_atomic: Optional[AtomicFile] = AtomicFile(self.idx_path)
            idx_file = self._idx_atomic.file
        else:
            self._idx_atomic = None
            idx_file = open(self.idx_path, "wb")
        self._idx_file = idx_file
        self._idx_lines: list = []
        self._seen: set = set()
        self.closed = False

    def write(self, key: Any, data: Buffer) -> int:
        """Append a record under ``key`` (unique); returns its byte offset."""
        key = self.key_type(key)
        if key in self._seen:
            raise IndexFileError(f"duplicate key {key!r}: each record needs its own key",
                                 self.idx_path)
        offset = self._records.write(data)
        self._seen.add(key)
        lines = self._idx_lines
        lines.append(f"{key}\t{offset}\n")
        if len(lines) >= 8192:
            self._drain_index()
        return offset

    def _drain_index(self) -> None:
        if self._idx_lines:
            self._idx_file.write("".join(self._idx_lines).encode())
            self._idx_lines.clear()

    def tell(self) -> int:
        """Byte offset at which the next record will start."""
        return self._records.tell()

    def flush(self) -> None:
        """Write buffered records and index lines."""
        self._records.flush()
        self._drain_index()
        self._idx_file.flush()

    def close(self) -> None:
        """Flush both files and rename them into place (``.rec`` first, then ``.idx``)."""
        if self.closed:
            return
        self._drain_index()
        self._records.close()
        self.closed = True
        if self._idx_atomic is not None:
            self._idx_atomic.commit()
        else:
            self._idx_file.close()

    def abort(self) -> None:
        """Stop without producing either file."""
        if self.closed:
            return
        self.closed = True
        self._records.abort()
        if self._idx_atomic is not None:
            self._idx_atomic.discard()
        else:
            self._idx_file.close()

    def __enter__(self) -> "IndexedRecordWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


__all__ = ["RecordWriter", "IndexedRecordWriter"]
