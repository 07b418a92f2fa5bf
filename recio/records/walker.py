"""The record walker: finds and checks the records of a byte source (dmlc-core's
``RecordIOReader`` over its ``Stream``), for ``RecordReader`` to hand out.

Two strategies walk a run of whole records: the *checked* one (the default) finds the 4-aligned
magic words of a window with one NumPy pass, so a length field that swallowed the records after
it is seen (their heads lie inside its data); the *trusting* one (``trust_lengths``, as MXNet
reads) hops from header to header without looking at the data. Whatever a run cannot take
(multi-part records, damage, the end of the file) goes to the slow, fully general path
(``locate``), which checks each part with ``framing.check_part_header`` and, in skip mode,
resynchronises at the next record head (``framing.find_record_head``).

Every step moves forward and nothing is allocated for a claimed length before checking that it
fits in the file, so a walk always ends; every framing problem raises ``RecordIOError`` naming
the file and the byte offset.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

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
from recio.records.byte_sources import ByteSource
from recio.records.sniff import SNIFF_BYTES, not_a_record_file
from recio.storage import StorageOptions

Span = Tuple[int, int]
Run = Tuple[List[int], List[int], int]
#: called in skip mode for every damaged region passed over: (start, end, the error)
DamageHandler = Callable[[int, int, RecordIOError], None]

unpack_header = PART_HEADER.unpack_from
_HEADER_UNPACK = PART_HEADER.unpack
#: lrecord words below this have cflag 0 (a whole record)
_FIRST_CONTINUATION_LREC = 1 << 29
#: a sequential window covers at most this many bytes (it starts smaller and grows)
_WINDOW_BYTES = 1 << 20
#: a sequential read checks this much ahead at first, growing while reads stay sequential
FIRST_WINDOW = 1 << 10
#: a remote reader walks at least this much of its stream at a time (``stream_walk``)
_STREAM_WINDOW = 1 << 20
#: records at least this large are read one at a time, copied with ``pread`` and checked in
#: the copy; smaller ones are checked a window at a time on the map
_LARGE_RECORD = 1 << 16
_MAGIC_WORD = np.uint32(MAGIC)


def after_record(offset: int, length: int, size: int) -> int:
    """Where the record after a whole record of ``length`` bytes at ``offset`` begins."""
    return min(size, offset + 8 + length + (-length & 3))


def next_window(window: int, start: int, stop: int) -> int:
    """The window after a walk from ``start`` to ``stop``: larger when the walk used most of
    it, back to the smallest after damage or a multi-part record (so a file full of damage
    costs in proportion to its size, not to the number of damaged places times a window)."""
    if stop - start >= window >> 1:
        return min(window * 4, _WINDOW_BYTES)
    return FIRST_WINDOW


class _RecordChecker:
    """Checks the records of ``source`` one at a time: the slow, fully general path (any
    record, multi-part ones too, and damage), and the fast path for one whole record.
    ``trust_lengths``: data is not searched for swallowed records (header checks stay).

    ``on_error="skip"`` resynchronises at the next record head after damage, counting the bytes
    passed over in ``skipped_bytes``, keeping the errors in ``errors`` (the first 10,000) and
    calling ``on_damage(start, end, error)`` for each region passed over.
    """

    def __init__(self, source: ByteSource, *, trust_lengths: bool, on_error: str,
                 on_damage: Optional[DamageHandler], storage_options: StorageOptions) -> None:
        self.source: Optional[ByteSource] = source
        self.path = source.path
        self.size = source.size
        self.buf: Any = source.buffer  # the whole file when addressable, else None
        self.fd = source.fd  # large records are copied with pread from it (see read_whole)
        self._bytes = source.read
        self.remote = source.remote
        self.trust_lengths = trust_lengths
        self.on_error = on_error
        self.on_damage = on_damage
        self.storage_options = storage_options
        self.skipped_bytes = 0
        self.errors: List[RecordIOError] = []

    def close(self) -> None:
        """Forget the source (its owner closes it)."""
        self.source = self.buf = self.fd = None

    # -- one record: the slow, fully general path --------------------------------------------
    def locate(self, pos: int) -> Tuple[List[Span], int]:
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
                                            self.storage_options) or exc from None
                if magic == MAGIC and part_pos + HEADER_SIZE + (lrec & LENGTH_MASK) > size \
                        and self.find_head(part_pos + HEADER_SIZE) < 0:
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
        if self.buf is not None:
            return first_aligned_magic(self.buf, start, end)
        found = first_aligned_magic(self._bytes(start, end), 0, end - start)
        return found if found < 0 else start + found

    def join(self, spans: List[Span]) -> bytes:
        """The record bytes for its part spans, magic re-inserted between parts (one copy)."""
        buf = self.buf
        if buf is not None:
            if len(spans) == 1:
                start, end = spans[0]
                return buf[start:end]
            with memoryview(buf) as view:
                return MAGIC_BYTES.join([view[a:b] for a, b in spans])
        return MAGIC_BYTES.join([self._bytes(a, b) for a, b in spans])

    def next_spans(self, pos: int) -> Tuple[Optional[int], List[Span], int]:
        """(offset, part spans, next offset) of the first readable record at or after ``pos``.

        In skip mode damage is passed over to the next record head; offset is None when
        nothing is left.
        """
        while pos < self.size:
            try:
                spans, nxt = self.locate(pos)
                return pos, spans, nxt
            except StorageError:
                raise  # the network failed, not the data: never skipped as damage
            except RecordIOError as exc:
                if self.on_error != "skip":
                    raise
                head = self.find_head(pos + 4)
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

    def find_head(self, start: int, end: int = -1) -> int:
        """File offset of the next record head in ``[start, end)`` (default: to EOF), or -1."""
        end = self.size if end < 0 else min(end, self.size)
        if self.buf is not None:
            return find_record_head(self.buf, start, end)
        chunk = 1 << 20
        pos = start
        while pos < end:
            data = self._bytes(pos, min(pos + chunk + 7, self.size))
            found = find_record_head(data, 0, min(chunk, end - pos), base=pos)
            if found >= 0:
                return pos + found
            pos += chunk
        return -1

    # -- one whole record, on the fast path ---------------------------------------------------
    def whole_end(self, offset: int, header: Optional[Tuple[int, int]] = None) -> int:
        """End of the data of the whole (single-part) record at ``offset`` if its header checks
        out on the fast path, else -1 (the slow path then decides). ``header``: the part header,
        when the caller has read it."""
        buf = self.buf
        if (buf is None and self.source is None) or offset & 3 or \
                not 0 <= offset <= self.size - 8:
            return -1
        if header is None:  # from the map, or read from a stream (a remote object)
            header = unpack_header(buf, offset) if buf is not None else \
                _HEADER_UNPACK(self._bytes(offset, offset + HEADER_SIZE))
        magic, lrec = header
        end = offset + 8 + lrec
        # framing.check_part_header for a whole record, copied for speed (see trusting_run)
        if magic != MAGIC or lrec >= _FIRST_CONTINUATION_LREC or end > self.size:
            return -1
        return end

    def check_whole(self, offset: int) -> int:
        """``whole_end``, with the record's data (and padding) searched on the map for a
        swallowed head: for callers that do not copy the record (a map only)."""
        if self.buf is None:
            return -1
        end = self.whole_end(offset)
        if end >= 0 and not self.trust_lengths and \
                first_aligned_magic(self.buf, offset + 8, min((end + 3) & ~3, self.size)) >= 0:
            return -1
        return end

    def read_whole(self, offset: int,
                   header: Optional[Tuple[int, int]] = None) -> Optional[bytes]:
        """The whole (single-part) record at ``offset`` if it checks out on the fast path, else
        None (the slow path then decides).

        A large record is copied first (``pread`` from a file: no page faults on the map) and
        its copy searched for a swallowed head while it is still in the CPU cache, so its bytes
        are read from memory once; a stream's record (a remote object's) is read once and
        checked in its copy the same way. ``header``: the part header, when the caller has read
        it.
        """
        end = self.whole_end(offset, header)
        if end < 0:
            return None
        lrec = end - offset - 8
        if lrec >= _LARGE_RECORD and self.fd is not None:
            data = portable.read_at(self.fd, lrec, offset + 8)
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

    def large_at(self, pos: int) -> Optional[bytes]:
        """The record at ``pos`` when it is a large whole record that checks out, else None:
        sequential reads take large records one by one (see ``read_whole``); a stream takes
        every whole record so."""
        if self.buf is None and self.source is not None:
            return self.read_whole(pos)
        if self.fd is None or pos > self.size - 8 or pos & 3:
            return None
        # the header with pread too: a header on a page of the map not yet touched costs a
        # page fault, several times a small read
        header = _HEADER_UNPACK(portable.read_at(self.fd, HEADER_SIZE, pos))
        magic, lrec = header
        if magic != MAGIC or not _LARGE_RECORD <= lrec < _FIRST_CONTINUATION_LREC:
            return None
        return self.read_whole(pos, header)


class RecordWalker(_RecordChecker):
    """Walks runs of whole records of ``source``, checked (``_checked_run``, the default) or
    trusted (``_trusting_run``, ``trust_lengths``), handing what a run cannot take to the
    one-record paths of ``_RecordChecker``."""

    def walk(self, pos: int, max_bytes: int, copying: bool = False,
             window: Optional[Tuple[Any, int]] = None) -> Run:
        """``(heads, ends, next)`` of the consecutive whole records from ``pos`` that lie in the
        next ``max_bytes``, checked (``_checked_run``; ``_trusting_run`` for ``trust_lengths``);
        empty when the slow path must look at ``pos`` itself. ``copying``: the caller copies
        the records out, so the run also stops before a large one (``large_at`` reads those).
        ``window``: ``(buffer, its file offset)`` to walk instead of the map (a stream's block;
        the window's end stands for the file's end, and a record crossing it is left to the
        caller).
        """
        if window is None:
            buf, base, size = self.buf, 0, self.size
        else:
            buf, base = window
            size = base + len(buf)
        if buf is None or pos & 3 or pos > size - HEADER_SIZE:
            return [], [], pos
        if self.trust_lengths and window is None:
            return _trusting_run(buf, 0, size, size, pos, max_bytes)
        run = _checked_run(buf, base, size, pos, max_bytes, copying and window is None)
        if run is not None:
            return run
        if window is not None:  # a record larger than the window: the caller's business
            return [], [], pos
        end = self.check_whole(pos)  # a first record larger than the window, on its own
        return ([pos], [end], min(size, (end + 3) & ~3)) if end >= 0 else ([], [], pos)

    def spans_from(self, pos: int, window: int) -> Tuple[List[int], List[List[Span]], int]:
        """Offsets and part spans of the next records from ``pos`` (a window, or one record via
        the slow path), and the offset after them; empty at the end of the file."""
        heads, ends, nxt = self.walk(pos, window)
        if heads:
            return heads, [[(h + 8, e)] for h, e in zip(heads, ends)], nxt
        offset, spans, nxt = self.next_spans(pos)
        if offset is None:
            return [], [], nxt
        return [offset], [spans], nxt

    def stream_walk(self, pos: int) -> Tuple[Any, List[int], List[int], int]:
        """A source without a map's next run of checked whole records from ``pos``: ``(window,
        heads, ends, next)``, the records being ``window[head - pos + 8:end - pos]`` (no run:
        empty)."""
        assert self.source is not None
        view = self.source.window(pos, _STREAM_WINDOW)
        # hop from header to header, then one count of the aligned magic words: exactly one per
        # head means no record's data holds one (no swallowed record), the check checked_run
        # makes; otherwise checked_run finds where the run must stop
        heads, ends, nxt = _trusting_run(view, pos, pos + len(view), self.size, pos,
                                        _STREAM_WINDOW)
        if heads and not self.trust_lengths and \
                count_aligned_magic(view, 0, nxt - pos) != len(heads):
            heads, ends, nxt = self.walk(pos, _STREAM_WINDOW, copying=True, window=(view, pos))
        return view, heads, ends, nxt

    def batch(self, pos: int, n: int) -> Tuple[List[bytes], int]:
        """Up to ``n`` records from ``pos`` (fewer at the end) and the offset after them
        (``RecordReader.read_batch``). Damage after some records ends the batch early."""
        out: List[bytes] = []
        buf = self.buf
        window = _WINDOW_BYTES
        remote = self.remote
        while len(out) < n and pos < self.size:
            if remote:  # whole runs of records from the stream's blocks
                view, heads, ends, nxt = self.stream_walk(pos)
                if heads:
                    want = n - len(out)
                    if len(heads) > want:
                        heads, ends, nxt = heads[:want], ends[:want], heads[want]
                    out += [bytes(view[h - pos + 8:e - pos]) for h, e in zip(heads, ends)]
                    pos = nxt
                    continue
            record = self.large_at(pos)
            if record is not None:
                out.append(record)
                pos = after_record(pos, len(record), self.size)
                continue
            heads, ends, nxt = self.walk(pos, window, copying=True)
            window = next_window(window, pos, nxt)
            if heads:
                want = n - len(out)
                if len(heads) > want:
                    heads, ends, nxt = heads[:want], ends[:want], heads[want]
                out += [buf[h + 8:e] for h, e in zip(heads, ends)]
                pos = nxt
                continue
            try:
                offset, spans, pos = self.next_spans(pos)
            except RecordIOError:
                if out:
                    break
                raise
            if offset is None:
                break
            out.append(self.join(spans))
        return out, pos


# -- the two strategies for a run of whole records ---------------------------------------------
def _checked_run(buf: Any, base: int, size: int, pos: int, max_bytes: int,
                stop_large: bool) -> Optional[Run]:
    """The checked run from ``pos`` (4-aligned, a header's room before ``size``) in ``buf``,
    whose first byte is file offset ``base`` and whose end is ``size``: ``(heads, ends, next)``,
    empty when the slow path must look at ``pos`` itself, None when the first record is larger
    than the window (it is then checked on its own, if at all).

    In a valid file the 4-aligned magic words of a window are exactly its part heads, so one
    NumPy pass finds them and checks the chain: each head's ``lrecord`` says cflag 0 and a
    length that ends where the next head begins. A magic word inside a record's data (a
    swallowed record) or a cflag other than 0 stops the run before that record; a missing head
    stops it after the record before the gap. The slow path (``RecordWalker.next_spans``) then
    raises, skips or joins a multi-part record there. ``stop_large``: the run also stops before
    a large record (the caller copies those one by one).
    """
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
    if stop_large:  # large records are copied and checked one by one
        stop |= lrec >= _LARGE_RECORD  # (RecordWalker.read_whole)
    stop[:-1] |= padded[:-1] > heads[1:]  # the next head lies inside this record
    gap = np.zeros(len(hits), dtype=bool)
    gap[:-1] = padded[:-1] < heads[1:]  # no head where this record ends: keep it, stop after
    gap[-1] = padded[-1] < window_end
    first_stop = int(np.argmax(stop)) if stop.any() else len(hits)
    first_gap = int(np.argmax(gap)) + 1 if gap.any() else len(hits)
    k = min(first_stop, first_gap)
    if k == 0:  # a record larger than the window, or the slow path's business
        if len(hits) > 1 or lrec[0] >= _FIRST_CONTINUATION_LREC:
            return [], [], pos
        return None
    return heads[:k].tolist(), ends[:k].tolist(), min(size, int(padded[k - 1]))


def _trusting_run(buf: Any, base: int, size: int, file_size: int, pos: int,
                 max_bytes: int) -> Run:
    """The run for ``trust_lengths``: hop from header to header, not looking at data. ``buf``
    holds file offsets ``[base, size)``; where ``size`` is before ``file_size`` (a window) a
    record whose padding crosses it is left out."""
    cut = size < file_size  # a window ending before the file: padding must fit in it too
    heads: List[int] = []
    ends: List[int] = []
    add_head, add_end = heads.append, ends.append
    stop_at, last, p = pos + max_bytes, size - HEADER_SIZE, pos
    while p <= last:
        magic, lrec = unpack_header(buf, p - base)
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
