"""``RecordReader``: sequential and by-offset reading of a RecordIO file (by key: ``recio.records.indexed``).

Local files are memory-mapped and read by position, so a reader opened before ``fork()`` keeps
working in DataLoader workers and no file pointer is shared. Every framing problem raises
``RecordIOError`` naming the file and the byte offset; nothing is allocated for a claimed length
before checking that it fits in the file, and every step moves forward, so a scan always ends.
"""
from __future__ import annotations

import io
import mmap
import os
from typing import Any, BinaryIO, Callable, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from recio import portable
from recio.errors import NotRecordFileError, RecordIOError, StorageError
from recio.records.framing import (
    CFLAG_LAST,
    HEADER_SIZE,
    LENGTH_MASK,
    MAGIC,
    MAGIC_BYTES,
    PART_HEADER,
    check_part_header,
    count_aligned_magic,
    find_record_head,
    first_aligned_magic,
    swallowed_head_error,
    truncated_header_error,
    truncation_error,
)
from recio.records.sniff import SNIFF_BYTES, not_a_record_file
from recio.storage import RemoteFile, StorageOptions, is_url, local_path

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]
Span = Tuple[int, int]
#: called in skip mode for every damaged region passed over: (start, end, the error)
DamageHandler = Callable[[int, int, RecordIOError], None]

_unpack_header = PART_HEADER.unpack_from
_HEADER_UNPACK = PART_HEADER.unpack
_FIRST_CONTINUATION_LREC = 1 << 29  # lrecord words below this have cflag 0 (a whole record)
#: a sequential window covers at most this many bytes (it starts smaller and grows)
_WINDOW_BYTES = 1 << 20
#: a sequential read() checks this much ahead at first, growing while reads stay sequential
_FIRST_WINDOW = 1 << 10
#: a remote reader walks at least this much of its stream at a time (``_stream_walk``)
_STREAM_WINDOW = 1 << 20
#: records shorter than this are searched for a swallowed head in their own copy
_SMALL_RECORD = 4096
#: records at least this large are read one at a time, copied with ``pread`` and checked in
#: the copy; smaller ones are checked a window at a time on the map
_LARGE_RECORD = 1 << 16
_MAGIC_WORD = np.uint32(MAGIC)
_MAGIC_FIRST_BYTE = MAGIC_BYTES[0]


def _after(offset: int, length: int, size: int) -> int:
    """Where the record after a whole record of ``length`` bytes at ``offset`` begins."""
    return min(size, offset + 8 + length + (-length & 3))


class RecordReader:
    """Reads a RecordIO file: iterate for records, ``read()`` for the next, ``read_at()`` by offset.

    Every record is checked before it is returned: its part headers (``framing.check_part_header``)
    and its data, which must not hold a magic word at a 4-aligned offset (a length field that
    swallows the records after it would otherwise return them as one garbage record). Damage
    raises ``RecordIOError`` with the file and byte offset.

    ``on_error="skip"`` instead resynchronises at the next record head after damage, counting
    the bytes passed over in ``skipped_bytes``, keeping the errors in ``errors`` (the first
    10,000) and calling ``on_damage(start, end, error)`` for each region passed over.
    ``trust_lengths=True`` is the fast mode: it does not look inside record data for swallowed
    records (as MXNet reads); header checks stay.
    ``shard_cache`` (a ``recio.records.cache.ShardCache``): a URL is read from the cache's
    checked local copy of the whole object (mapped like a local file; errors still name the
    URL), downloaded first when the cache has none.
    """

    def __init__(self, source: PathOrFile, on_error: str = "raise", *,
                 trust_lengths: bool = False, on_damage: Optional[DamageHandler] = None,
                 storage_options: StorageOptions = None, shard_cache: Any = None) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.on_error = on_error
        self.trust_lengths = trust_lengths
        self.on_damage = on_damage
        self._file: Optional[BinaryIO] = None
        self._owns_file = False
        self.shard_cache = shard_cache
        if isinstance(source, (str, os.PathLike)):
            self.path: Optional[str] = os.fspath(source)
            if not is_url(self.path):
                self._file = open(local_path(self.path), "rb")
            elif shard_cache is not None:
                self._file = shard_cache.open(self.path)
            else:
                self._file = RemoteFile(self.path, storage_options)
            self._owns_file = True
        else:
            self.path = getattr(source, "name", None)
            if isinstance(self.path, int):
                self.path = None
            self._file = source
        self._buf: Any = None  # mmap or bytes when the whole file is addressable, else None
        self._fd: Optional[int] = None  # large records are read with pread (see _read_whole)
        self.storage_options = storage_options
        self._index: Any = None  # see set_index
        self._open_buffer()
        self._pos = 0
        self._clear_ahead()
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
            if portable.has_pread():  # else large records are copied from the map
                self._fd = fileno
            return
        if not (hasattr(f, "seek") and f.seekable()):
            raise TypeError(f"{self.path or f!r}: RecordReader needs a path or a seekable binary file")
        self.size = f.seek(0, os.SEEK_END)  # a seekable stream: read by seek + read

    # -- one record: the slow, fully general path --------------------------------------------
    def _bytes(self, start: int, end: int) -> Any:
        """``file[start:end]`` (a slice of the map, or read from a stream)."""
        if self._buf is not None:
            return self._buf[start:end]
        if isinstance(self._file, RemoteFile):  # by position: threads may share the reader
            return self._file.pread(end - start, start)
        self._file.seek(start)
        return self._file.read(end - start)

    def _locate(self, pos: int) -> Tuple[List[Span], int]:
        """Check the record whose first part is at ``pos``: its data spans and the next offset.

        A record the end of the file cuts raises ``TruncatedFileError``; a file that is plainly
        something else (a manifest, an ``.idx``...) raises ``NotRecordFileError`` at byte 0.
        """
        spans: List[Span] = []
        part_pos, size = pos, self.size
        if pos & 3 and 0 <= pos < size:
            raise RecordIOError("offset is not 4-aligned, so it is not a record head",
                                self.path, pos)
        while True:
            if part_pos < 0 or part_pos + HEADER_SIZE > size:
                if 0 <= pos < size and (part_pos > pos or self._bytes(
                        pos, min(size, pos + 4)) == MAGIC_BYTES[:min(4, size - pos)]):
                    raise self._truncated(pos, part_pos, None)
                raise truncated_header_error(part_pos, size, pos, self.path)
            magic, lrec = PART_HEADER.unpack(self._bytes(part_pos, part_pos + HEADER_SIZE))
            try:
                cflag, length = check_part_header(magic, lrec, part_pos, size, pos, self.path)
            except RecordIOError as exc:
                if pos == 0 and magic != MAGIC and self.path is not None:
                    raise not_a_record_file(self.path, self._bytes(0, min(size, SNIFF_BYTES)),
                                            self.storage_options) or exc
                if magic == MAGIC and part_pos + HEADER_SIZE + (lrec & LENGTH_MASK) > size \
                        and self._find_head(part_pos + HEADER_SIZE) < 0:
                    raise self._truncated(pos, part_pos, lrec & LENGTH_MASK) from None
                raise
            start = part_pos + HEADER_SIZE
            part_end = start + length + (-length & 3)
            if not self.trust_lengths:
                inner = self._stray_magic(start, min(part_end, size))
                if inner >= 0:
                    raise swallowed_head_error(pos, inner, self.path)
            spans.append((start, start + length))
            part_pos = part_end
            if cflag == 0 or cflag == CFLAG_LAST:
                return spans, min(part_pos, size)  # a last record may lack its padding

    def _truncated(self, pos: int, part_pos: int, claimed: Optional[int]) -> RecordIOError:
        """The error for the record at ``pos`` that the end of the file cuts (at its part at
        ``part_pos``, which claims ``claimed`` bytes; None: the header itself is cut)."""
        return truncation_error(self.path, self.size, pos, part_pos, claimed)

    def _stray_magic(self, start: int, end: int) -> int:
        """File offset of a 4-aligned magic word in ``[start, end)``, or -1."""
        if self._buf is not None:
            return first_aligned_magic(self._buf, start, end)
        found = first_aligned_magic(self._bytes(start, end), 0, end - start)
        return found if found < 0 else start + found

    def _join(self, spans: List[Span]) -> bytes:
        """The record bytes for its part spans, magic re-inserted between parts (one copy)."""
        buf = self._buf
        if buf is not None:
            if len(spans) == 1:
                start, end = spans[0]
                return buf[start:end]
            with memoryview(buf) as view:
                return MAGIC_BYTES.join([view[a:b] for a, b in spans])
        return MAGIC_BYTES.join([self._bytes(a, b) for a, b in spans])

    def span_bytes(self, spans: List[Span]) -> bytes:
        """The record whose part spans ``iter_spans`` gave (a copy; readers without a map,
        e.g. of a remote object, hand out records this way)."""
        return self._join(spans)

    def _next_spans(self, pos: int) -> Tuple[Optional[int], List[Span], int]:
        """(offset, part spans, next offset) of the first readable record at or after ``pos``.

        In skip mode damage is passed over to the next record head; offset is None when
        nothing is left.
        """
        while pos < self.size:
            try:
                spans, nxt = self._locate(pos)
                return pos, spans, nxt
            except StorageError:
                raise  # the network failed, not the data: never skipped as damage
            except RecordIOError as exc:
                if self.on_error != "skip":
                    raise
                head = self._find_head(pos + 4)
                if isinstance(exc, NotRecordFileError) and head < 0:
                    raise  # no record anywhere: not a damaged .rec but another kind of file
                stop = self.size if head < 0 else head
                self._skipped(pos, stop, exc)
                if head < 0:
                    return None, [], self.size
                pos = head
        return None, [], pos

    def _skipped(self, start: int, end: int, exc: RecordIOError) -> None:
        self.skipped_bytes += end - start
        if len(self.errors) < 10000:
            self.errors.append(exc)
        if self.on_damage is not None:
            self.on_damage(start, end, exc)

    def _find_head(self, start: int, end: int = -1) -> int:
        """File offset of the next record head in ``[start, end)`` (default: to EOF), or -1."""
        end = self.size if end < 0 else min(end, self.size)
        if self._buf is not None:
            return find_record_head(self._buf, start, end)
        chunk = 1 << 20
        pos = start
        while pos < end:
            data = self._bytes(pos, min(pos + chunk + 7, self.size))
            found = find_record_head(data, 0, min(chunk, end - pos), base=pos)
            if found >= 0:
                return pos + found
            pos += chunk
        return -1

    # -- many records: the checked window walk -------------------------------------------------
    def _area(self, window: Optional[Tuple[Any, int]]) -> Tuple[Any, int, int]:
        """``(buffer, file offset of its first byte, file offset of its end)`` a walk reads:
        the whole map, or a stream's ``window`` ``(buffer, its file offset)``."""
        if window is None:
            return self._buf, 0, self.size
        buf, base = window
        return buf, base, base + len(buf)

    def _walk(self, pos: int, max_bytes: int, copying: bool = False,
              window: Optional[Tuple[Any, int]] = None) -> Tuple[List[int], List[int], int]:
        """``(heads, ends, next)`` of the consecutive whole records from ``pos`` that lie in the
        next ``max_bytes``, checked; empty when the slow path must look at ``pos`` itself.

        In a valid file the 4-aligned magic words of a window are exactly its part heads, so
        one NumPy pass finds them and checks the chain: each head's ``lrecord`` says cflag 0
        and a length that ends where the next head begins. A magic word inside a record's data
        (a swallowed record) or a cflag other than 0 stops the run before that record; a
        missing head stops it after the record before the gap. The slow path (``_next_spans``)
        then raises, skips or joins a multi-part record there. A first record larger than the
        window is checked on its own. ``copying``: the caller copies the records out, so the run
        also stops before a large one (``_large_at`` reads those). ``window``: ``(buffer, its
        file offset)`` to walk instead of the map (a stream's block; the window's end stands
        for the file's end, and a record crossing it is left to the caller).
        """
        buf, base, size = self._area(window)
        if buf is None or pos & 3 or pos > size - HEADER_SIZE:
            return [], [], pos
        if self.trust_lengths and window is None:
            return self._walk_trusting(pos, max_bytes)
        nwin = (min(size, pos + max_bytes) - pos) >> 2  # words in the window
        nall = min(nwin + 1, (size - pos) >> 2)  # one more: the lrecord of a head at its end
        words = np.frombuffer(buf, dtype="<u4", count=nall, offset=pos - base)
        hits = np.flatnonzero(words[:nwin] == _MAGIC_WORD)
        if not len(hits) or hits[0] != 0:
            del words
            return [], [], pos
        # a head whose lrecord word lies past the end still marks where the record before ends
        lrec = np.full(len(hits), _FIRST_CONTINUATION_LREC, dtype=np.int64)
        readable = hits + 1 < nall
        lrec[readable] = words[hits[readable] + 1]
        del words
        heads = pos + 4 * hits
        ends = heads + HEADER_SIZE + lrec  # only meaningful where cflag == 0 (lrec < 2**29)
        padded = (ends + 3) & ~3
        window_end = pos + 4 * nwin
        stop = (lrec >= _FIRST_CONTINUATION_LREC) | (padded > window_end)
        if copying and window is None:  # large records are copied and checked one by one
            stop |= lrec >= _LARGE_RECORD  # (_read_whole)
        stop[:-1] |= padded[:-1] > heads[1:]  # the next head lies inside this record
        gap = np.zeros(len(hits), dtype=bool)
        gap[:-1] = padded[:-1] < heads[1:]  # no head where this record ends: keep it, stop after
        gap[-1] = padded[-1] < window_end
        first_stop = int(np.argmax(stop)) if stop.any() else len(hits)
        first_gap = int(np.argmax(gap)) + 1 if gap.any() else len(hits)
        k = min(first_stop, first_gap)
        if k == 0:  # a record larger than the window, or the slow path's business
            if len(hits) > 1 or lrec[0] >= _FIRST_CONTINUATION_LREC or window is not None:
                return [], [], pos
            end = self._check_whole(pos)
            return ([pos], [end], min(size, (end + 3) & ~3)) if end >= 0 else ([], [], pos)
        return heads[:k].tolist(), ends[:k].tolist(), min(size, int(padded[k - 1]))

    def _walk_trusting(self, pos: int, max_bytes: int,
                       window: Optional[Tuple[Any, int]] = None
                       ) -> Tuple[List[int], List[int], int]:
        """``_walk`` for ``trust_lengths``: hop from header to header, not looking at data.
        ``window``: as for ``_walk`` (a record whose padding crosses it is left out)."""
        buf, base, size = self._area(window)
        cut = size < self.size  # a window ending before the file: padding must fit in it too
        heads: List[int] = []
        ends: List[int] = []
        add_head, add_end = heads.append, ends.append
        stop_at, last, p = pos + max_bytes, size - HEADER_SIZE, pos
        while p <= last:
            magic, lrec = _unpack_header(buf, p - base)
            end = p + 8 + lrec
            # framing.check_part_header for a whole record, copied for speed: magic, cflag 0,
            # length inside the file (anything else goes to the slow path, which raises)
            if magic != MAGIC or lrec >= _FIRST_CONTINUATION_LREC or end > size:
                break
            after = end + (-lrec & 3)
            if cut and after > size:
                break
            add_head(p)
            add_end(end)
            p = after
            if p >= stop_at:
                break
        return heads, ends, min(p, size)

    def _spans_from(self, pos: int, window: int) -> Tuple[List[int], List[List[Span]], int]:
        """Offsets and part spans of the next records from ``pos`` (a window, or one record via
        the slow path), and the offset after them; empty at the end of the file."""
        heads, ends, nxt = self._walk(pos, window)
        if heads:
            return heads, [[(h + 8, e)] for h, e in zip(heads, ends)], nxt
        offset, spans, nxt = self._next_spans(pos)
        if offset is None:
            return [], [], nxt
        return [offset], [spans], nxt

    @staticmethod
    def _next_window(window: int, start: int, stop: int) -> int:
        """The window after a walk from ``start`` to ``stop``: larger when the walk used most of
        it, back to the smallest after damage or a multi-part record (so a file full of damage
        costs in proportion to its size, not to the number of damaged places times a window)."""
        if stop - start >= window >> 1:
            return min(window * 4, _WINDOW_BYTES)
        return _FIRST_WINDOW

    def _clear_ahead(self) -> None:
        """Forget the records ``read()`` checked ahead (after a seek or reset)."""
        self._ahead_heads: List[int] = []
        self._ahead_ends: List[int] = []
        self._ahead_next: List[int] = []
        self._ahead_i = 0
        self._window = 0  # bytes read() checks ahead; 0: one record (after a seek)
        self._sequential_at = -1  # where read() left off: reading on from here is sequential

    # -- public API ------------------------------------------------------------------------
    def records_with_offsets(self) -> Iterator[Tuple[int, bytes]]:
        """Yield ``(offset, record)`` from the current position to the end of the file."""
        return self._scan(True)

    def __iter__(self) -> Iterator[bytes]:
        return self._scan(False)

    def _stream_walk(self, pos: int) -> Tuple[Any, List[int], List[int], int]:
        """A remote reader's next run of checked whole records from ``pos``: ``(window, heads,
        ends, next)``, the records being ``window[head - pos + 8:end - pos]`` (no run: empty)."""
        view = self._file.window(pos, _STREAM_WINDOW)
        # hop from header to header, then one count of the aligned magic words: exactly one per
        # head means no record's data holds one (no swallowed record), the check _walk makes;
        # otherwise _walk finds where the run must stop
        heads, ends, nxt = self._walk_trusting(pos, _STREAM_WINDOW, window=(view, pos))
        if heads and not self.trust_lengths and \
                count_aligned_magic(view, 0, nxt - pos) != len(heads):
            heads, ends, nxt = self._walk(pos, _STREAM_WINDOW, copying=True, window=(view, pos))
        return view, heads, ends, nxt

    def _scan(self, with_offsets: bool) -> Iterator[Any]:
        buf = self._buf
        window = _FIRST_WINDOW
        remote = self.remote
        while True:
            pos = self._pos
            if pos >= self.size:
                return
            self._clear_ahead()
            if remote:  # whole runs of records from the stream's blocks, checked at once
                view, heads, ends, nxt = self._stream_walk(pos)
                if heads:
                    for head, end, after in zip(heads, ends, heads[1:] + [nxt]):
                        self._pos = after
                        record = bytes(view[head - pos + 8:end - pos])
                        yield (head, record) if with_offsets else record
                    continue
            record = self._large_at(pos)
            if record is not None:
                self._pos = _after(pos, len(record), self.size)
                yield (pos, record) if with_offsets else record
                continue
            heads, ends, nxt = self._walk(pos, window, copying=True)
            window = self._next_window(window, pos, nxt)
            if heads:
                for head, end, after in zip(heads, ends, heads[1:] + [nxt]):
                    self._pos = after
                    yield (head, buf[head + 8:end]) if with_offsets else buf[head + 8:end]
                continue
            offset, spans, self._pos = self._next_spans(pos)
            if offset is None:
                return
            record = self._join(spans)
            yield (offset, record) if with_offsets else record

    def iter_spans(self) -> Iterator[Tuple[int, List[Span]]]:
        """Yield ``(offset, part spans)`` of every record from the current position, checked
        like any read but copying nothing (the spans are ``(start, end)`` of each part's data)."""
        window = _FIRST_WINDOW
        while self._pos < self.size:
            self._clear_ahead()
            start = self._pos
            offsets, spans, nxt = self._spans_from(start, window)
            if not offsets:
                self._pos = nxt
                return
            window = self._next_window(window, start, nxt)
            for i, offset in enumerate(offsets):
                self._pos = offsets[i + 1] if i + 1 < len(offsets) else nxt
                yield offset, spans[i]

    def read(self) -> Optional[bytes]:
        """The next record, or ``None`` at the end of the file."""
        i = self._ahead_i
        heads = self._ahead_heads
        if i < len(heads) and heads[i] == self._pos:
            self._ahead_i = i + 1
            self._pos = self._sequential_at = self._ahead_next[i]
            return self._buf[heads[i] + 8:self._ahead_ends[i]]
        return self._read_window()

    def _read_window(self) -> Optional[bytes]:
        """``read()`` when nothing checked is pending: after a seek one record, and while the
        reads stay sequential a window ahead that grows each time; or the slow path."""
        pos = self._pos
        if pos >= self.size:
            return None
        self._ahead_heads = []
        if pos != self._sequential_at:
            self._window = 0
        if self._window == 0:  # random access: check just this record
            self._window = _FIRST_WINDOW
            record = self._read_whole(pos)
            if record is not None:
                self._pos = self._sequential_at = _after(pos, len(record), self.size)
                return record
        else:
            record = self._large_at(pos)
            if record is not None:
                self._pos = self._sequential_at = _after(pos, len(record), self.size)
                return record
            heads, ends, nxt = self._walk(pos, self._window, copying=True)
            self._window = self._next_window(self._window, pos, nxt)
            if heads:
                self._ahead_heads, self._ahead_ends = heads, ends
                self._ahead_next = heads[1:] + [nxt]
                self._ahead_i = 1
                self._pos = self._sequential_at = self._ahead_next[0]
                return self._buf[pos + 8:ends[0]]
        offset, spans, self._pos = self._next_spans(pos)
        self._sequential_at = self._pos
        return None if offset is None else self._join(spans)

    def read_batch(self, n: int) -> List[bytes]:
        """Up to ``n`` next records as a list (fewer at the end): the fastest sequential read.

        Damage after some records of the batch ends the batch early; the next call raises.
        """
        out: List[bytes] = []
        buf, pos = self._buf, self._pos
        self._clear_ahead()
        window = _WINDOW_BYTES
        remote = self.remote
        while len(out) < n and pos < self.size:
            if remote:  # whole runs of records from the stream's blocks (see _scan)
                view, heads, ends, nxt = self._stream_walk(pos)
                if heads:
                    want = n - len(out)
                    if len(heads) > want:
                        heads, ends, nxt = heads[:want], ends[:want], heads[want]
                    out += [bytes(view[h - pos + 8:e - pos]) for h, e in zip(heads, ends)]
                    pos = nxt
                    continue
            record = self._large_at(pos)
            if record is not None:
                out.append(record)
                pos = _after(pos, len(record), self.size)
                continue
            heads, ends, nxt = self._walk(pos, window, copying=True)
            window = self._next_window(window, pos, nxt)
            if heads:
                want = n - len(out)
                if len(heads) > want:
                    heads, ends, nxt = heads[:want], ends[:want], heads[want]
                out += [buf[h + 8:e] for h, e in zip(heads, ends)]
                pos = nxt
                continue
            try:
                offset, spans, pos = self._next_spans(pos)
            except RecordIOError:
                if out:
                    break
                self._pos = pos
                raise
            if offset is None:
                break
            out.append(self._join(spans))
        self._pos = pos
        return out

    def _whole_end(self, offset: int, header: Optional[Tuple[int, int]] = None) -> int:
        """End of the data of the whole (single-part) record at ``offset`` if its header checks
        out on the fast path, else -1 (the slow path then decides). ``header``: the part header,
        when the caller has read it."""
        buf = self._buf
        if (buf is None and self._file is None) or offset & 3 or not 0 <= offset <= self.size - 8:
            return -1
        if header is None:  # from the map, or read from a stream (a remote object)
            header = _unpack_header(buf, offset) if buf is not None else \
                _HEADER_UNPACK(self._bytes(offset, offset + HEADER_SIZE))
        magic, lrec = header
        end = offset + 8 + lrec
        # framing.check_part_header for a whole record, copied for speed (see _walk_trusting)
        if magic != MAGIC or lrec >= _FIRST_CONTINUATION_LREC or end > self.size:
            return -1
        return end

    def _check_whole(self, offset: int) -> int:
        """``_whole_end``, with the record's data (and padding) searched on the map for a
        swallowed head: for callers that do not copy the record (a map only)."""
        if self._buf is None:
            return -1
        end = self._whole_end(offset)
        if end >= 0 and not self.trust_lengths and \
                first_aligned_magic(self._buf, offset + 8, min((end + 3) & ~3, self.size)) >= 0:
            return -1
        return end

    def _read_whole(self, offset: int,
                    header: Optional[Tuple[int, int]] = None) -> Optional[bytes]:
        """The whole (single-part) record at ``offset`` if it checks out on the fast path, else
        None (the slow path then decides).

        A large record is copied first (``pread`` from a file: no page faults on the map) and
        its copy searched for a swallowed head while it is still in the CPU cache, so its bytes
        are read from memory once; a stream's record (a remote object's) is read once and
        checked in its copy the same way. ``header``: the part header, when the caller has read
        it.
        """
        end = self._whole_end(offset, header)
        if end < 0:
            return None
        lrec = end - offset - 8
        if lrec >= _LARGE_RECORD and self._fd is not None:
            data = portable.read_at(self._fd, lrec, offset + 8)
            if len(data) != lrec:  # the file shrank under us: the slow path reports it
                return None
        else:
            data = self._bytes(offset + 8, end)
        if self.trust_lengths:
            return data
        if count_aligned_magic(data, 0, lrec):
            return None
        tail = lrec & 3  # a word running into the padding: its first bytes end the data
        if tail and data[lrec - tail:] == MAGIC_BYTES[:tail] and \
                self._bytes(end, end + 4 - tail) == MAGIC_BYTES[tail:]:
            return None
        return data

    def _large_at(self, pos: int) -> Optional[bytes]:
        """The record at ``pos`` when it is a large whole record that checks out, else None:
        sequential reads take large records one by one (see ``_read_whole``); a stream takes
        every whole record so."""
        if self._buf is None and self._file is not None:
            return self._read_whole(pos)
        if self._fd is None or pos > self.size - 8 or pos & 3:
            return None
        # the header with pread too: a header on a page of the map not yet touched costs a
        # page fault, several times a small read
        header = _HEADER_UNPACK(portable.read_at(self._fd, HEADER_SIZE, pos))
        magic, lrec = header
        if magic != MAGIC or not _LARGE_RECORD <= lrec < _FIRST_CONTINUATION_LREC:
            return None
        return self._read_whole(pos, header)

    def read_at(self, offset: int) -> bytes:
        """The record whose first part starts at byte ``offset``; the position is unchanged."""
        buf = self._buf
        if buf is not None and 0 <= offset <= self.size - 8:
            magic, lrec = _unpack_header(buf, offset)
            end = offset + 8 + lrec
            # framing.check_part_header for a small whole record, copied for speed; its data
            # (and a word running into the padding) must hold no aligned magic: without the
            # magic's first byte (a memchr) it holds none
            if magic == MAGIC and lrec < _SMALL_RECORD and end <= self.size and not offset & 3:
                data = buf[offset + 8:end]
                if self.trust_lengths or _MAGIC_FIRST_BYTE not in data or (
                        MAGIC_BYTES not in data and (
                            not lrec & 3 or buf[end & ~3:(end & ~3) + 4] != MAGIC_BYTES)):
                    return data
        if buf is None and self._index is not None and isinstance(self._file, RemoteFile):
            end = self._index.record_end(int(offset))  # the record's whole extent, one GET
            if end is not None:
                self._file.prefetch(int(offset), end)
        record = self._read_whole(offset)
        if record is not None:
            return record
        spans, _ = self._locate(int(offset))
        return self._join(spans)

    def view_at(self, offset: int) -> Any:
        """The record at ``offset`` as a read-only zero-copy ``memoryview`` of the map where it
        is a single part (a ``bytes`` copy otherwise), checked like ``read_at``."""
        end = self._check_whole(offset)
        if end >= 0:
            return memoryview(self._buf)[offset + 8:end]
        spans, _ = self._locate(int(offset))
        return self._join(spans)

    def peek_at(self, offset: int, n: int) -> bytes:
        """The first ``n`` bytes of the record at ``offset`` (e.g. its image header), without
        copying the rest of a large record."""
        end = self._check_whole(offset)
        if end >= 0:
            return self._buf[offset + 8:min(offset + 8 + n, end)]
        return self.read_at(offset)[:n]

    def set_index(self, index: Any) -> None:
        """The file's ``recio.records.index.Index``, whose offsets bound every record: a reader
        of a remote object then reads a record by offset in one GET of exactly its bytes
        (``Index.record_end``), and a batch (``read_many_at``) in coalesced, concurrent GETs.
        A local file needs none."""
        self._index = index

    def read_many_at(self, offsets: Iterable[int]) -> List[bytes]:
        """The records at each of ``offsets`` (a batch of ``read_at``)."""
        offsets = [int(o) for o in offsets]
        if self._index is not None and self.remote:
            self.fetch([(o, self._index.record_end(o) or self.size) for o in offsets])
        return [self.read_at(offset) for offset in offsets]

    def evicted(self) -> bool:
        """Whether the local copy a ``shard_cache`` gave this reader has left the cache since
        (a limit evicted it): the reader still reads it, and frees its disk space when closed.
        False for any other reader."""
        check = getattr(self._file, "evicted", None)
        return bool(check is not None and check())

    @property
    def remote(self) -> bool:
        """True when the file is a remote object (read by ranged requests, not mapped)."""
        return isinstance(self._file, RemoteFile)

    def fetch(self, ranges: List[Span]) -> None:
        """Say which byte ranges the next reads need: over a remote object they are fetched
        now, one GET for one range, neighbours coalesced and GETs concurrent for several (a
        local file needs nothing)."""
        f = self._file
        if isinstance(f, RemoteFile) and ranges:
            if len(ranges) == 1:
                f.prefetch(*ranges[0])
            else:
                f.prefetch_many(ranges)

    def limit_streaming(self, end: Optional[int]) -> None:
        """A remote reader's sequential reads stream no further than ``end`` (a reader of one
        part of a file says where the part ends; reads past it cost a ranged GET each)."""
        if isinstance(self._file, RemoteFile):
            self._file.stream_end = end

    def iter_offsets(self) -> Iterator[int]:
        """Offsets of every record head from the current position, checked like any read but
        copying no payloads (what ``build_index`` uses)."""
        window = _FIRST_WINDOW
        while self._pos < self.size:
            self._clear_ahead()
            heads, _, nxt = self._walk(self._pos, window)
            window = self._next_window(window, self._pos, nxt)
            if heads:
                for head, after in zip(heads, heads[1:] + [nxt]):
                    self._pos = after
                    yield head
                continue
            offset, _, self._pos = self._next_spans(self._pos)
            if offset is None:
                return
            yield offset

    @property
    def buffer(self) -> Any:
        """The memory-mapped file (``bytes`` for an in-memory file, ``None`` for a stream)."""
        return self._buf

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
        self._clear_ahead()

    def close(self) -> None:
        """Release the memory map and the file (if the reader opened it)."""
        if isinstance(self._buf, mmap.mmap):
            try:
                self._buf.close()
            except BufferError:  # a view_at() memoryview is still alive: the GC unmaps later
                pass
        self._buf = None
        if self._owns_file and self._file is not None:
            self._file.close()
        self._file = None
        self._index = None
        self._clear_ahead()

    def __enter__(self) -> "RecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        if not self._owns_file:
            raise TypeError("a RecordReader over a caller's file object cannot be pickled; "
                            "open it from a path instead")
        return {"path": self.path, "pos": self._pos, "on_error": self.on_error,
                "trust_lengths": self.trust_lengths, "storage_options": self.storage_options,
                "shard_cache": self.shard_cache}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], on_error=state["on_error"],
                      trust_lengths=state.get("trust_lengths", False),
                      storage_options=state.get("storage_options"),
                      shard_cache=state.get("shard_cache"))
        self._pos = state["pos"]


__all__ = ["RecordReader"]
