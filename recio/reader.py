"""Record readers: ``RecordReader`` (sequential and by offset) and ``IndexedRecordReader`` (by key).

Local files are memory-mapped and read by position, so a reader opened before ``fork()`` keeps
working in DataLoader workers and no file pointer is shared. Every framing problem raises
``RecordIOError`` naming the file and the byte offset; nothing is allocated for a claimed length
before checking that it fits in the file, and every step moves forward, so a scan always ends.
"""
from __future__ import annotations

import io
import mmap
import os
from typing import Any, BinaryIO, Iterable, Iterator, List, Optional, Tuple, Union

from .errors import RecordIOError
from .framing import (CFLAG_FIRST, CFLAG_LAST, CFLAG_MIDDLE, HEADER_SIZE, LENGTH_MASK, MAGIC,
                      MAGIC_BYTES, PART_HEADER, find_record_head)

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
Span = Tuple[int, int]

_unpack_header = PART_HEADER.unpack_from
_FIRST_CONTINUATION_LREC = 1 << 29  # lrecord words below this have cflag 0 (a whole record)
_CFLAG_NAMES = {0: "a whole record", 1: "a first part", 2: "a middle part", 3: "a last part"}


class RecordReader:
    """Reads a RecordIO file: iterate for records, ``read()`` for the next, ``read_at()`` by offset.

    ``on_error="skip"`` resynchronises after damage at the next valid record head, counting the
    bytes passed over in ``skipped_bytes`` and keeping the errors in ``errors``.
    """

    def __init__(self, source: PathOrFile, on_error: str = "raise") -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.on_error = on_error
        self._file: Optional[BinaryIO] = None
        self._owns_file = False
        if isinstance(source, (str, os.PathLike)):
            self.path: Optional[str] = os.fspath(source)
            self._file = open(self.path, "rb")
            self._owns_file = True
        else:
            self.path = getattr(source, "name", None)
            if isinstance(self.path, int):
                self.path = None
            self._file = source
        self._buf: Any = None  # mmap or bytes when the whole file is addressable, else None
        self._open_buffer()
        self._pos = 0
        self.skipped_bytes = 0
        self.errors: List[RecordIOError] = []

    # -- opening ---------------------------------------------------------------------------
    def _open_buffer(self) -> None:
        f = self._file
        if isinstance(f, io.BytesIO):
            self._buf = f.getvalue()
            self.size = len(self._buf)
            return
        try:
            fileno = f.fileno()
            size = os.fstat(fileno).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            fileno = None
        if fileno is not None:
            self.size = size
            self._buf = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ) if size else b""
            return
        if not (hasattr(f, "seek") and f.seekable()):
            raise TypeError(f"{self.path or f!r}: RecordReader needs a path or a seekable binary file")
        self.size = f.seek(0, os.SEEK_END)  # a seekable stream: read by seek + read

    # -- low level -------------------------------------------------------------------------
    def _header(self, pos: int, record_pos: int) -> Tuple[int, int]:
        """(magic, lrecord) of the part at ``pos`` (of the record at ``record_pos``), checked."""
        if pos < 0 or pos + HEADER_SIZE > self.size:
            if pos < 0 or (pos == record_pos and pos >= self.size):
                raise RecordIOError(f"offset is outside the {self.size}-byte file",
                                    self.path, pos)
            cut = "" if pos == record_pos else f"; the record at byte {record_pos} is cut off"
            raise RecordIOError(f"truncated file: a part header needs 8 bytes but the file ends "
                                f"{self.size - pos} bytes after this offset{cut}", self.path, pos)
        if self._buf is not None:
            return PART_HEADER.unpack_from(self._buf, pos)
        self._file.seek(pos)
        return PART_HEADER.unpack(self._file.read(HEADER_SIZE))

    def _locate(self, pos: int) -> Tuple[List[Span], int]:
        """Validate the record whose first part is at ``pos``: its data spans and the next offset."""
        spans: List[Span] = []
        part_pos = pos
        while True:
            what = "a record" if part_pos == pos else f"the record at byte {pos}"
            magic, lrec = self._header(part_pos, pos)
            if magic != MAGIC:
                raise RecordIOError(
                    f"bad magic 0x{magic:08x} where a part of {what} should start (expected "
                    f"0x{MAGIC:08x}): the file is corrupt here or the offset is not a record head",
                    self.path, part_pos)
            cflag, length = lrec >> 29, lrec & LENGTH_MASK
            start = part_pos + HEADER_SIZE
            if start + length > self.size:
                raise RecordIOError(
                    f"part claims {length} bytes but the file ends {self.size - start} bytes after "
                    f"its header (truncated file?)", self.path, part_pos)
            if part_pos == pos:
                if cflag > CFLAG_FIRST:
                    raise RecordIOError(
                        f"record starts with cflag {cflag} ({_CFLAG_NAMES.get(cflag, 'invalid')}); "
                        f"a record must start with cflag 0 or 1", self.path, part_pos)
            elif cflag not in (CFLAG_MIDDLE, CFLAG_LAST):
                raise RecordIOError(
                    f"multi-part record started at byte {pos} expects a middle or last part "
                    f"(cflag 2 or 3) here, found cflag {cflag} "
                    f"({_CFLAG_NAMES.get(cflag, 'invalid')})", self.path, part_pos)
            spans.append((start, start + length))
            part_pos = start + length + (-length & 3)
            if cflag == 0 or cflag == CFLAG_LAST:
                return spans, part_pos

    def _join(self, spans: List[Span]) -> bytes:
        """The record bytes for its part spans, magic re-inserted between parts (one copy)."""
        buf = self._buf
        if buf is not None:
            if len(spans) == 1:
                start, end = spans[0]
                return buf[start:end]
            with memoryview(buf) as view:
                return MAGIC_BYTES.join([view[a:b] for a, b in spans])
        pieces = []
        for a, b in spans:
            self._file.seek(a)
            pieces.append(self._file.read(b - a))
        return MAGIC_BYTES.join(pieces)

    def _next_spans(self, pos: int) -> Tuple[Optional[int], List[Span], int]:
        """(offset, part spans, next offset) of the first readable record at or after ``pos``.

        In skip mode damage is passed over (and a record whose span holds another record head is
        dropped: its length is corrupt); offset is None when nothing is left.
        """
        while pos < self.size:
            try:
                spans, nxt = self._locate(pos)
                if self.on_error == "skip":
                    inner = self._find_head(pos + 4, nxt)
                    if inner >= 0:
                        raise RecordIOError(f"record overlaps the record head at byte {inner}: "
                                            f"its length field is corrupt", self.path, pos)
                return pos, spans, nxt
            except RecordIOError as exc:
                if self.on_error != "skip":
                    raise
                if len(self.errors) < 10000:
                    self.errors.append(exc)
                head = self._find_head(pos + 4)
                self.skipped_bytes += (self.size if head < 0 else head) - pos
                if head < 0:
                    return None, [], self.size
                pos = head
        return None, [], pos

    def _next(self, pos: int) -> Tuple[Optional[int], Optional[bytes], int]:
        """Like ``_next_spans`` but with the record's bytes."""
        offset, spans, nxt = self._next_spans(pos)
        return offset, (None if offset is None else self._join(spans)), nxt

    def _find_head(self, start: int, end: int = -1) -> int:
        """File offset of the next record head in ``[start, end)`` (default: to EOF), or -1."""
        end = self.size if end < 0 else min(end, self.size)
        if self._buf is not None:
            return find_record_head(self._buf, start, end)
        chunk = 1 << 20
        pos = start
        while pos < end:
            self._file.seek(pos)
            data = self._file.read(chunk + 7)
            found = find_record_head(data, 0, min(chunk, end - pos), base=pos)
            if found >= 0:
                return pos + found
            pos += chunk
        return -1

    # -- public API ------------------------------------------------------------------------
    def records_with_offsets(self) -> Iterator[Tuple[int, bytes]]:
        """Yield ``(offset, record)`` from the current position to the end of the file."""
        return self._scan(True)

    def __iter__(self) -> Iterator[bytes]:
        return self._scan(False)

    def _scan(self, with_offsets: bool) -> Iterator[Any]:
        buf, size, unpack = self._buf, self.size, PART_HEADER.unpack_from
        fast = buf is not None and self.on_error == "raise"  # skip mode checks every record
        while True:
            pos = self._pos
            if pos >= size:
                return
            if fast and pos + 8 <= size:  # hot path: a whole record, cflag 0
                magic, lrec = unpack(buf, pos)
                end = pos + 8 + lrec
                if magic == MAGIC and lrec < _FIRST_CONTINUATION_LREC and end <= size:
                    self._pos = end + (-lrec & 3)
                    yield (pos, buf[pos + 8:end]) if with_offsets else buf[pos + 8:end]
                    continue
            offset, record, self._pos = self._next(pos)
            if offset is None:
                return
            yield (offset, record) if with_offsets else record

    def read(self) -> Optional[bytes]:
        """The next record, or ``None`` at the end of the file."""
        pos, buf = self._pos, self._buf
        if buf is not None and 0 <= pos <= self.size - 8 and self.on_error == "raise":
            magic, lrec = PART_HEADER.unpack_from(buf, pos)
            end = pos + 8 + lrec
            if magic == MAGIC and lrec < _FIRST_CONTINUATION_LREC and end <= self.size:
                self._pos = end + (-lrec & 3)
                return buf[pos + 8:end]
        offset, record, self._pos = self._next(pos)
        return record

    def read_batch(self, n: int) -> List[bytes]:
        """Up to ``n`` next records as a list (fewer at the end): the fastest sequential read."""
        out: List[bytes] = []
        append = out.append
        buf, size, unpack = self._buf, self.size, PART_HEADER.unpack_from
        pos = self._pos
        if buf is not None and self.on_error == "raise":
            limit = size - 8
            while len(out) < n and pos <= limit:
                magic, lrec = unpack(buf, pos)
                end = pos + 8 + lrec
                if magic != MAGIC or lrec >= _FIRST_CONTINUATION_LREC or end > size:
                    break
                append(buf[pos + 8:end])
                pos = end + (-lrec & 3)
        self._pos = pos
        while len(out) < n:
            record = self.read()
            if record is None:
                break
            append(record)
        return out

    def read_at(self, offset: int) -> bytes:
        """The record whose first part starts at byte ``offset``; the position is unchanged."""
        buf = self._buf
        if buf is not None and 0 <= offset <= self.size - 8:
            magic, lrec = _unpack_header(buf, offset)
            end = offset + 8 + lrec
            if magic == MAGIC and lrec < _FIRST_CONTINUATION_LREC and end <= self.size:
                return buf[offset + 8:end]
        offset = int(offset)
        spans, _ = self._locate(offset)
        return self._join(spans)

    def peek_at(self, offset: int, n: int) -> bytes:
        """The first ``n`` bytes of the record at ``offset`` (e.g. its image header), without
        copying the rest of a large record."""
        buf = self._buf
        if buf is not None and 0 <= offset <= self.size - 8:
            magic, lrec = _unpack_header(buf, offset)
            if magic == MAGIC and n <= lrec < _FIRST_CONTINUATION_LREC \
                    and offset + 8 + lrec <= self.size:
                return buf[offset + 8:offset + 8 + n]
        return self.read_at(offset)[:n]

    def read_many_at(self, offsets: Iterable[int]) -> List[bytes]:
        """The records at each of ``offsets`` (a batch of ``read_at`` without a call per record)."""
        buf, size, read_at = self._buf, self.size, self.read_at
        if buf is None:
            return [read_at(offset) for offset in offsets]
        out: List[bytes] = []
        append = out.append
        for offset in offsets:
            if 0 <= offset <= size - 8:
                magic, lrec = _unpack_header(buf, offset)
                end = offset + 8 + lrec
                if magic == MAGIC and lrec < _FIRST_CONTINUATION_LREC and end <= size:
                    append(buf[offset + 8:end])
                    continue
            append(read_at(offset))
        return out

    def iter_offsets(self) -> Iterator[int]:
        """Offsets of every record head from the current position, validating framing but not
        copying payloads (what ``build_index`` uses)."""
        buf, size, unpack = self._buf, self.size, PART_HEADER.unpack_from
        fast = buf is not None and self.on_error == "raise"
        pos = self._pos
        while pos < size:
            if fast and pos + 8 <= size:
                magic, lrec = unpack(buf, pos)
                end = pos + 8 + lrec
                if magic == MAGIC and lrec < _FIRST_CONTINUATION_LREC and end <= size:
                    yield pos
                    pos = end + (-lrec & 3)
                    continue
            offset, _, pos = self._next_spans(pos)
            if offset is None:
                return
            yield offset

    def seek(self, offset: int) -> None:
        """Move to byte ``offset`` (which should be a record head, e.g. from an ``.idx``)."""
        offset = int(offset)
        if not 0 <= offset <= self.size:
            raise RecordIOError(f"seek outside the {self.size}-byte file", self.path, offset)
        self._pos = offset

    def tell(self) -> int:
        """Byte offset of the next record to be read."""
        return self._pos

    def reset(self) -> None:
        """Go back to the start of the file."""
        self._pos = 0

    def close(self) -> None:
        """Release the memory map and the file (if the reader opened it)."""
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = None
        if self._owns_file and self._file is not None:
            self._file.close()
        self._file = None

    def __enter__(self) -> "RecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        if not self._owns_file:
            raise TypeError("a RecordReader over a caller's file object cannot be pickled; "
                            "open it from a path instead")
        return {"path": self.path, "pos": self._pos, "on_error": self.on_error}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], on_error=state["on_error"])
        self._pos = state["pos"]


def __getattr__(name: str) -> Any:
    """``recio.reader.IndexedRecordReader`` still works (it lives in ``recio.indexed``)."""
    if name == "IndexedRecordReader":
        from .indexed import IndexedRecordReader
        return IndexedRecordReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RecordReader"]
