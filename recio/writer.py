"""Record writers: ``RecordWriter`` (a ``.rec`` file) and ``IndexedRecordWriter`` (plus ``.idx``).

Byte-identical to dmlc-core's writer: each record is framed as in ``recio.framing``; a payload
holding the magic at 4-aligned offsets becomes a multi-part record. Output is buffered, and
files created from a path are written under a temporary name and renamed on ``close()``, so a
crash never leaves a complete-looking file.
"""
from __future__ import annotations

import os
from itertools import chain
from typing import Any, BinaryIO, Callable, Optional, Tuple, Union

from .atomic import AtomicFile
from .errors import RecordIOError
from .framing import (MAGIC, MAGIC_BYTES, MAX_RECORD_LENGTH, PADDING, PART_HEADER, frame_parts,
                      split_payload)

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
Buffer = Union[bytes, bytearray, memoryview]

#: records at least this large skip the write buffer (one copy fewer)
_DIRECT_WRITE = 1 << 16


def _open_output(path: str, atomic: bool) -> Tuple[BinaryIO, Optional[AtomicFile]]:
    """A new binary output file: under a temporary name when ``atomic``."""
    if atomic:
        target = AtomicFile(path)
        return target.file, target
    return open(path, "wb"), None


def _finish_output(file: BinaryIO, atomic: Optional[AtomicFile], keep: bool) -> None:
    """Close an output file; an atomic one is renamed into place (``keep``) or deleted."""
    if atomic is None:
        file.close()
    elif keep:
        atomic.commit()
    else:
        atomic.discard()


class _Transaction:
    """Context-manager protocol of the writers: ``close()`` on success, ``abort()`` on error."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def abort(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self):
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


class RecordWriter(_Transaction):
    """Append records to a RecordIO file; ``write()`` returns each record's byte offset.

    ``target`` is a path (created atomically unless ``atomic=False``) or an open binary file
    (written from its current position, never closed by the writer).
    """

    def __init__(self, target: PathOrFile, atomic: bool = True,
                 buffer_size: int = 1 << 20) -> None:
        self._atomic: Optional[AtomicFile] = None
        if isinstance(target, (str, os.PathLike)):
            self.path: Optional[str] = os.fspath(target)
            self._file, self._atomic = _open_output(self.path, atomic)
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

    def write(self, data: Buffer) -> int:
        """Append one record; returns the byte offset of its first part (what ``.idx`` stores)."""
        if type(data) is not bytes:
            data = self._as_bytes(data)
        n = len(data)
        if self.closed or n >= MAX_RECORD_LENGTH:
            self._refuse(n)
        offset = self._offset
        if n < _DIRECT_WRITE and data.find(MAGIC_BYTES) < 0:  # hot path: one whole part
            buffer = self._buffer
            buffer += PART_HEADER.pack(MAGIC, n) + data + PADDING[n & 3]
            self._offset = offset + 8 + n + (-n & 3)
            if len(buffer) >= self._buffer_size:
                self._drain()
            return offset
        if data.find(MAGIC_BYTES) < 0:  # a large record: skip the buffer, one copy fewer
            self._drain()
            for chunk in (PART_HEADER.pack(MAGIC, n), data, PADDING[n & 3]):
                self._file.write(chunk)
                self._offset += len(chunk)
            return offset
        for chunk in frame_parts(split_payload(data)):  # aligned magic inside: multi-part
            self._buffer += chunk
            self._offset += len(chunk)
        if len(self._buffer) >= self._buffer_size:
            self._drain()
        return offset

    def _as_bytes(self, data: Buffer) -> bytes:
        """bytes of any buffer (bytearray, memoryview, NumPy array), size-checked before copying."""
        view = memoryview(data)
        if view.nbytes >= MAX_RECORD_LENGTH:
            self._refuse(view.nbytes)
        return view.tobytes()

    def _refuse(self, n: int) -> None:
        if self.closed:
            raise ValueError(f"{self.path or 'RecordWriter'}: write to a closed writer")
        raise RecordIOError(f"record of {n} bytes is too large: RecordIO's 29-bit length field "
                            f"allows at most 2**29 - 1 = {MAX_RECORD_LENGTH - 1} bytes; "
                            f"split the payload", self.path, self._offset)

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
        if self._owns_file:
            _finish_output(self._file, self._atomic, keep=True)

    def abort(self) -> None:
        """Stop without producing the file (a path target's temporary file is deleted)."""
        if self.closed:
            return
        self.closed = True
        self._buffer.clear()
        if self._owns_file:
            _finish_output(self._file, self._atomic, keep=False)


class IndexedRecordWriter(_Transaction):
    """A ``RecordWriter`` that also writes MXNet's ``.idx``: one ``key\\toffset\\n`` line a record."""

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Union[str, "os.PathLike[str]"],
                 key_type: Callable[[Any], Any] = int, atomic: bool = True) -> None:
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self._records = RecordWriter(rec_path, atomic=atomic)
        self.path = self._records.path
        self._idx_file, self._idx_atomic = _open_output(self.idx_path, atomic)
        self._write_record = self._records.write
        self._keys: list = []  # index lines not yet written, formatted in bulk
        self._offsets: list = []
        self.closed = False

    def write(self, key: Any, data: Buffer) -> int:
        """Append a record under ``key``; returns its byte offset.

        Keys should be unique: like MXNet, the writer does not keep every key to check (that
        would grow without bound); readers warn about duplicates and use the last one.
        """
        if type(key) is not int or self.key_type is not int:
            key = self.key_type(key)
        offset = self._write_record(data)
        keys = self._keys
        keys.append(key)
        self._offsets.append(offset)
        if len(keys) >= 8192:
            self._drain_index()
        return offset

    def _drain_index(self) -> None:
        if self._keys:
            pairs = tuple(chain.from_iterable(zip(self._keys, self._offsets)))
            lines = ("%s\t%d\n" * len(self._keys)) % pairs  # one C-level pass: MXNet's format
            self._idx_file.write(lines.encode())
            self._keys.clear()
            self._offsets.clear()

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
        _finish_output(self._idx_file, self._idx_atomic, keep=True)

    def abort(self) -> None:
        """Stop without producing either file."""
        if self.closed:
            return
        self.closed = True
        self._records.abort()
        _finish_output(self._idx_file, self._idx_atomic, keep=False)


__all__ = ["RecordWriter", "IndexedRecordWriter"]
