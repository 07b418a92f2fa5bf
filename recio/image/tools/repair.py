"""Rescuing the intact records of a damaged ``.rec`` into a new ``.rec`` + ``.idx``.

``repair`` is what ``recio repair`` runs. It scans the file once with every reader's framing
rule (``RecordReader`` in skip mode, as ``recio verify`` does: damage passed over to the next
record head) and copies every intact record, in file order and byte for byte, into ``PREFIX.rec`` +
``PREFIX.idx``, written atomically (nothing appears unless the whole copy succeeds; the input is
never written over, an existing output only with ``force``).

**Which records are intact.** A record whose framing checks out and whose bytes nothing
contradicts. Its padding must be zeros (a writer pads with zeros: data there means its length
shrank). A record right before a damaged region is not vouched for by its framing alone: a
length field that shrank, or bytes inserted or zeroed inside the record, leave a well-formed
header in front of wrong bytes, followed by what looks like damage. Such a record is kept only
when something confirms its end: for an image record, its image ending as a complete image
does (JPEG's EOI marker, PNG's IEND chunk, GIF's trailer, the size BMP and WebP declare; an
image that ends in 1-3 zero bytes past that end grew into its padding); for another record, a
record head where it ends, or bytes there that read as the next record's header with only its
magic damaged. Otherwise it is dropped and reported with the damage. A record right after
damage that the damaged parts chain into (a first part of 4-aligned length leading exactly to
it) is the rest of a damaged multi-part record, and is dropped unless its image is complete.
Bytes inserted or deleted move the records after them off the 4-byte grid that record heads
sit on; the scan finds the first of them inside the damage and reads the rest of the file as a
segment of its own. (A change *inside* a payload that leaves the framing intact cannot be seen
without a checksum.)

**Keys.** Each record keeps its key from the old ``.idx`` where the index is consistent there
(one line points at that record, no other line has its key, and the record ends where the next
line's record begins: bytes inserted or deleted can move another record onto an indexed
offset); otherwise it gets its image
header's id (as im2rec keys records) when that key is free, else a new number after the
largest key. ``keys="id"`` or ``keys="position"`` key every record that way instead.
"""
from __future__ import annotations

import bisect
import io
import os
import struct
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO, Callable, Dict, List, Optional, Set, Tuple, Union, cast

from recio import portable, storage
from recio.errors import ImageError, NotRegularFileError, RecordIOError
from recio.image.header import IR_SIZE, IR_STRUCT, unpack_header
from recio.image.tools.repack import output_pair
from recio.image.tools.stats import DamageRegion, add_damage, image_format
from recio.records.atomic import check_outputs
from recio.records.diagnose import index_fit, part_at
from recio.records.framing import HEADER_SIZE, MAGIC_BYTES, pad_size
from recio.records.index import open_index
from recio.records.index_format import sibling_index_path
from recio.records.reader import RecordReader
from recio.records.writer import IndexedRecordWriter
from recio.storage import open_regular

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], Any]]

#: how each record may be keyed (``repair(keys=...)``, ``recio repair --key``)
KEY_MODES = ("auto", "id", "position")
#: keys of lost records a result names
_SHOWN = 5
_PNG_END = b"IEND\xaeB`\x82"


@dataclass
class RepairResult:
    """What ``repair`` read, dropped and wrote."""

    rec_path: str
    out_rec: str
    out_idx: str
    size: int = 0
    records: int = 0  # written to out_rec
    bytes_out: int = 0
    damage: List[DamageRegion] = field(default_factory=list)  # byte ranges dropped
    unconfirmed: List[DamageRegion] = field(default_factory=list)  # records dropped with them
    idx_path: Optional[str] = None  # the old index that keyed the records, if any
    index_entries: Optional[int] = None
    index_error: Optional[str] = None  # why the old index could not be used
    keys_from_index: int = 0
    keys_from_ids: int = 0
    keys_new: int = 0
    key_mode: str = "auto"
    lost_keys: int = 0  # old index entries whose record was not rescued
    lost_examples: List[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def padding_missing(self) -> int:
        """Bytes (1-3) of its last record's padding the input lacked with no other damage (the
        new file has them; see ``recio.image.tools.verify.VerifyReport.padding_missing``), else
        0."""
        return pad_size(self.size) if self.records and not self.dropped_regions else 0

    @property
    def dropped_bytes(self) -> int:
        """Bytes of the input that are in no rescued record."""
        return sum(d.end - d.start for d in self.damage + self.unconfirmed)

    @property
    def dropped_regions(self) -> List[DamageRegion]:
        """Every dropped byte range in file order: damage and unconfirmed records."""
        return sorted(self.damage + self.unconfirmed, key=lambda d: d.start)

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready summary."""
        return {"rec_path": self.rec_path, "out_rec": self.out_rec, "out_idx": self.out_idx,
                "size": self.size, "records": self.records, "bytes_out": self.bytes_out,
                "dropped": [vars(d) for d in self.dropped_regions],
                "dropped_bytes": self.dropped_bytes, "unconfirmed_records": len(self.unconfirmed),
                "padding_missing": self.padding_missing,
                "idx_path": self.idx_path, "index_entries": self.index_entries,
                "index_error": self.index_error, "key_mode": self.key_mode,
                "keys": {"index": self.keys_from_index, "id": self.keys_from_ids,
                         "new": self.keys_new},
                "lost_keys": self.lost_keys, "lost_examples": self.lost_examples,
                "seconds": round(self.seconds, 3)}


def repair(rec_path: PathLike, prefix: PathLike, *, idx_path: Optional[PathLike] = None,
           keys: str = "auto", force: bool = False, progress: Progress = None) -> RepairResult:
    """Copy every intact record of ``rec_path`` into ``PREFIX.rec`` + ``PREFIX.idx``.

    ``idx_path``: the old index whose keys to keep (default: the ``.idx`` beside the ``.rec``,
    if any; an index that cannot be read is reported and not used). ``keys``: ``"auto"`` (the
    old index's key where it is consistent, else the image id, else a new number), ``"id"``
    (every record's image id; they must be unique) or ``"position"`` (``0..n-1``).
    ``progress(n)``: bytes handled since the last call (they add up to twice the file's size:
    the scan, then the copy). Raises ``OutputExistsError`` (before anything is written) for an
    output that is an input or exists without ``force``, ``NotRecordFileError`` for a file
    that holds no record at all, and ``RecordIOError`` when no intact record is left.
    """
    start = time.monotonic()
    rec_path = os.fspath(rec_path)
    if keys not in KEY_MODES:
        raise ValueError(f"keys must be one of {KEY_MODES}, not {keys!r}")
    out_rec, out_idx = output_pair(prefix)
    old_idx = os.fspath(idx_path) if idx_path is not None else sibling_index_path(rec_path)
    check_outputs([out_rec, out_idx], [rec_path, old_idx], force=force)
    if idx_path is not None and not storage.exists(old_idx):
        raise FileNotFoundError(2, "No such file", old_idx)
    result = RepairResult(rec_path, out_rec, out_idx, key_mode=keys)
    segments = _scan_segments(rec_path, result, progress)
    try:
        found = [(segment, int(head)) for segment in segments for head in segment.heads]
        if not found:
            raise _nothing_intact(result)
        record_keys, index_keys = _assign_keys(
            found, keys, old_idx if storage.exists(old_idx) else None, result)
        written: Set[str] = set()
        with IndexedRecordWriter(out_rec, out_idx, key_type=str) as writer:
            reported = 0
            for key, (segment, head) in zip(record_keys, found):
                record = segment.reader.read_at(head)
                problem = _length_problem(segment.reader, head, record)
                done = segment.base + head
                if problem is not None:
                    end = segment.base + _record_end(segment.reader, head)
                    result.unconfirmed.append(DamageRegion(done, end, problem))
                    continue
                writer.write(key, record)
                written.add(key)
                if progress is not None and done - reported >= 1 << 26:
                    progress(done - reported)
                    reported = done
            if not written:
                raise _nothing_intact(result)  # inside the writer: it discards its files
            result.bytes_out = writer.tell()
        lost = [k for k in index_keys if k not in written]
        result.lost_keys, result.lost_examples = len(lost), lost[:_SHOWN]
        if progress is not None and result.size > reported:
            progress(result.size - reported)
    finally:
        for segment in segments:
            segment.close()
    result.records = len(written)
    result.seconds = time.monotonic() - start
    return result


def _nothing_intact(result: RepairResult) -> RecordIOError:
    return RecordIOError(f"no intact record found in its {result.size:,} bytes; nothing was "
                         f"written", path=result.rec_path)


# -- the scan: records found at 4-aligned offsets, and after bytes inserted or deleted ----------
class _Segment:
    """The part of the file from byte ``base`` on, read as a record file of its own: where
    bytes were inserted or deleted, the records after them sit off the 4-byte grid of the
    start of the file, on a grid of their own. ``heads``: its kept records (offsets from
    ``base``)."""

    def __init__(self, rec_path: str, base: int) -> None:
        self.path, self.base = rec_path, base
        self._file = None if base == 0 else _FileFrom(rec_path, base)
        self.regions: List[DamageRegion] = []
        # _FileFrom: a binary file (io.RawIOBase), which RecordReader reads as any other
        source = rec_path if self._file is None else cast(BinaryIO, self._file)
        self.reader = RecordReader(source, on_error="skip",
                                   on_damage=partial(add_damage, self.regions))
        self.heads: List[int] = []

    def close(self) -> None:
        self.reader.close()
        if self._file is not None:
            self._file.close()

    def scan(self, progress: Progress) -> None:
        reported = 0
        for head, _ in self.reader.iter_spans():
            self.heads.append(head)
            if progress is not None and head - reported >= 1 << 26:
                progress(head - reported)
                reported = head
        if progress is not None and self.reader.size > reported:
            progress(self.reader.size - reported)


class _FileFrom(io.RawIOBase):
    """The bytes of a file from ``base`` on, as a seekable binary file (a segment's reader)."""

    def __init__(self, path: str, base: int) -> None:
        super().__init__()
        self.name = path
        self._file = open_regular(path)
        self._base = base
        self._size = os.fstat(self._file.fileno()).st_size - base
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = offset + (self._pos if whence == io.SEEK_CUR else
                              self._size if whence == io.SEEK_END else 0)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: Any) -> int:
        data = portable.read_at(self._file.fileno(), min(len(buffer), max(0, self._size - self._pos)),
                        self._base + self._pos)
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def _scan_segments(rec_path: str, result: RepairResult, progress: Progress) -> List[_Segment]:
    """Scan ``rec_path`` in segments: from the start, then from each record head found off the
    4-byte grid inside damage (``_shifted_head``). Fills ``result.size``, ``result.damage`` and
    ``result.unconfirmed`` (absolute offsets); drops the unconfirmed records from the heads."""
    segments: List[_Segment] = []
    base = 0
    while True:
        segment = _Segment(rec_path, base)
        segments.append(segment)
        if base == 0:
            result.size = segment.reader.size
        segment.scan(progress if base == 0 else None)
        heads, shift = segment.heads, None
        for region in segment.regions:
            before = bisect.bisect_left(heads, region.start) - 1
            dropped = _unconfirmed(segment.reader, heads[before], region) if before >= 0 \
                else None
            if dropped is not None:
                del heads[before]
            after = bisect.bisect_left(heads, region.end)
            tail = _continuation(segment.reader, region, heads[after]) \
                if after < len(heads) and heads[after] == region.end else None
            if tail is not None:
                del heads[after]
            # records moved off the grid start anywhere after the last head that checks out
            # and before the next one that does
            shift = _shifted_head(segment, dropped.start + 1 if dropped else region.start,
                                  tail.end if tail else region.end)
            if shift is not None:
                del heads[bisect.bisect_left(heads, shift):]
                region.end = min(region.end, shift)
                for kept in (dropped, tail):
                    if kept is not None:
                        kept.end = min(kept.end, shift)
            for kept in (dropped, tail):
                if kept is not None and kept.start < kept.end:
                    result.unconfirmed.append(_moved(kept, base))
            if region.start < region.end:
                result.damage.append(_moved(region, base))
            if shift is not None:
                break
        if shift is None:
            return segments
        base += shift


def _continuation(reader: RecordReader, region: DamageRegion, head: int
                  ) -> Optional[DamageRegion]:
    """The record at ``head``, right after the damaged ``region``, as a dropped region when it
    is the rest of a multi-part record whose first part lies in ``region`` (the parts there
    chain to ``head``: its continuation flag was damaged into a record start), unless it is an
    image record whose image is complete; else None."""
    pos, size = region.start, reader.size
    while pos < head and pos + HEADER_SIZE <= size:
        magic_ok, cflag, length, pos = part_at(reader, pos)
        if not magic_ok or cflag not in (1, 2) or length & 3:
            return None  # not a first or middle part (those end at a 4-aligned cut)
    if pos != head or image_complete(reader.read_at(head)):
        return None
    return DamageRegion(head, _record_end(reader, head),
                        "a record that continues the damaged multi-part record at byte "
                        f"{region.start} (its parts lead here), not a record of its own")


def _moved(region: DamageRegion, base: int) -> DamageRegion:
    return DamageRegion(region.start + base, region.end + base, region.reason, region.problems)


def _shifted_head(segment: _Segment, start: int, end: int) -> Optional[int]:
    """The first record head in bytes ``[start, end)`` of ``segment`` that lies off its
    4-byte grid (bytes inserted or deleted before it moved the records after it) and checks
    out: its record reads in full from there and is followed by another head or the end of
    the file."""
    reader = segment.reader
    size = reader.size
    pos = start
    while pos < end:
        chunk = _bytes(reader, pos, min(end + 3, size))
        at = chunk.find(MAGIC_BYTES)
        if at < 0:
            return None
        pos += at
        if pos % 4 and pos + HEADER_SIZE <= size and \
                _whole_record_at(segment.path, segment.base + pos):
            return pos
        pos += 1
    return None


def _whole_record_at(rec_path: str, pos: int) -> bool:
    """Whether a record that checks out starts at byte ``pos`` of the file (off the grid) and
    ends at the end of the file or where another head starts."""
    with _FileFrom(rec_path, pos) as view, RecordReader(cast(BinaryIO, view)) as there:
        try:
            there.read_at(0)
        except RecordIOError:
            return False
        end = _record_end(there, 0)
        return end >= there.size or \
            _bytes(there, end, min(there.size, end + 4)) == MAGIC_BYTES[:there.size - end]


# -- which records are intact ------------------------------------------------------------------
def _unconfirmed(reader: RecordReader, head: int, region: DamageRegion
                 ) -> Optional[DamageRegion]:
    """The record at ``head`` as a dropped region when it ends where the damaged ``region``
    starts and nothing confirms that end (see the module's docstring); None when it is kept
    (or ends elsewhere: then it was not next to the damage)."""
    size = reader.size
    end = _record_end(reader, head)
    if end != region.start:
        return None
    complete = _image_verdict(reader.read_at(head))
    if complete is not None:  # an image record: its own end says whether it is whole
        return None if complete else DamageRegion(
            head, end, "a well-formed record whose end is followed by damage and whose image "
                       "is not complete: its length or its last bytes are damaged")
    if size - end < 4:
        return None  # 1-3 bytes of junk at the end: a length that shrank leaves 4 or more
    after = _bytes(reader, end, min(size, end + HEADER_SIZE))
    if after[:4] == MAGIC_BYTES[:min(4, size - end)] and \
            (len(after) < HEADER_SIZE or after[7] >> 5 <= 1):
        return None  # a record head starts there (the damage is in that record)
    if end + HEADER_SIZE <= size:  # only the next record's magic was damaged?
        _, cflag, length, after_next = part_at(reader, end)
        if cflag == 0 and region.end in (after_next, end + HEADER_SIZE + length) and \
                end + HEADER_SIZE + length <= size:
            return None
    return DamageRegion(head, end, "a well-formed record whose end is followed by damage: its "
                                   "length may be corrupt, and nothing confirms it")


def _bytes(reader: RecordReader, start: int, end: int) -> bytes:
    return bytes(reader.span_bytes([(start, end)])) if end > start else b""


def _record_end(reader: RecordReader, head: int, clamp: bool = True) -> int:
    """Where the well-formed record at ``head`` ends, padding included (parts hopped); past
    the end of the file, the file's end, unless not ``clamp``."""
    pos, size = head, reader.size
    while True:
        magic_ok, cflag, _, pos = part_at(reader, pos)
        if not magic_ok or cflag in (0, 3) or pos >= size:
            return min(size, pos) if clamp else pos


def _length_problem(reader: RecordReader, head: int, record: bytes) -> Optional[str]:
    """Why the record at ``head`` (its bytes: ``record``) has a length field that cannot be
    right, though its framing checks out, or None: its padding holds data (the length shrank
    by up to 3 bytes: a writer pads with zeros), or its image ends with up to 3 zero bytes
    after the image's end (the length grew into the padding)."""
    end = _record_end(reader, head, clamp=False)
    pad = pad_size(len(record))  # a last part's padding: the data of all parts is len(record) - 4k
    # the padding the file holds: a file cut inside its last record's padding lacks some
    if pad and end - pad >= head and any(_bytes(reader, end - pad, min(end, reader.size))):
        return "its padding holds data: its length field is corrupt (shrank)"
    stripped = record.rstrip(b"\0")
    if 0 < len(record) - len(stripped) <= 3 and not image_complete(record) and \
            image_complete(stripped):
        return ("its image ends before its last zero bytes: its length field is corrupt "
                "(grew into the padding)")
    return None


def image_complete(record: Any) -> bool:
    """True when ``record`` holds an image header and an image whose last bytes are the end
    of a complete image: JPEG's EOI marker, PNG's IEND chunk, GIF's trailer, or exactly the
    file size a BMP or WebP header declares. False otherwise (not an image, a format without
    such an end, or an image cut short)."""
    return bool(_image_verdict(record))


def _image_verdict(record: Any) -> Optional[bool]:
    """``image_complete`` for an image record of a format whose end can be checked (JPEG, PNG,
    GIF, BMP, WebP); None for any other record."""
    try:
        _, body = unpack_header(record)
    except ImageError:
        return None
    data = memoryview(record)[body:]
    fmt = image_format(data)
    n = len(data)
    if fmt == "jpeg":
        return bytes(data[-2:]) == b"\xff\xd9"
    if fmt == "png":
        return bytes(data[-len(_PNG_END):]) == _PNG_END
    if fmt == "gif":
        return bytes(data[-1:]) == b";"
    if fmt == "bmp":
        return n >= 6 and struct.unpack_from("<I", data, 2)[0] == n
    if fmt == "webp":
        return n >= 8 and struct.unpack_from("<I", data, 4)[0] + 8 == n
    return None


# -- keys ---------------------------------------------------------------------------------------
def _assign_keys(found: List[Tuple[_Segment, int]], mode: str, old_idx: Optional[str],
                 result: RepairResult) -> Tuple[List[str], List[str]]:
    """The key (as text) of each record ``found`` (its segment, its offset there), by
    ``mode``, and the keys of the old index (when it was used); fills the key counts of
    ``result``."""
    n = len(found)
    if mode == "position":
        result.keys_new = n
        return [str(i) for i in range(n)], []
    by_offset: Dict[int, Tuple[str, Optional[int]]] = {}
    index_keys: List[str] = []
    if mode == "auto" and old_idx is not None:
        by_offset, index_keys = _consistent_keys(found[0][0].reader, old_idx, result)
    keys: List[Optional[str]] = [_indexed_key(by_offset, seg, head) for seg, head in found]
    used: Set[str] = {k for k in keys if k is not None}
    result.keys_from_index = len(used)
    ids = [_image_id(seg.reader, head) if k is None else None
           for k, (seg, head) in zip(keys, found)]
    if mode == "id":
        missing = [i for i, rid in enumerate(ids) if rid is None]
        if missing:
            seg, head = found[missing[0]]
            raise RecordIOError(f"the record at byte {seg.base + head} has no image header to "
                                f"take an id from ({len(missing)} such records); use --key "
                                f"auto or --key position", path=result.rec_path)
        text = [str(rid) for rid in ids]
        if len(set(text)) != n:
            first: Dict[str, int] = {}  # each id's first position
            repeat = next(i for i, t in enumerate(text) if first.setdefault(t, i) != i)
            seg, head = found[repeat]
            raise RecordIOError(f"record id {text[repeat]} repeats (the record at byte "
                                f"{seg.base + head}); an index needs unique keys: use --key "
                                f"auto or --key position", path=result.rec_path)
        result.keys_from_ids = n
        return text, []
    for i, rid in enumerate(ids):  # first the ids, so a new number never takes a later one's
        if keys[i] is None and rid is not None and str(rid) not in used:
            keys[i] = key = str(rid)
            result.keys_from_ids += 1
            used.add(key)
    numbers = [int(k) for k in used if k.lstrip("-").isdigit()]
    following = max(numbers, default=-1) + 1
    for i in range(n):
        if keys[i] is None:
            keys[i] = str(following)
            result.keys_new += 1
            following += 1
    return [k for k in keys if k is not None], index_keys


def _indexed_key(by_offset: Dict[int, Tuple[str, Optional[int]]], segment: _Segment,
                 head: int) -> Optional[str]:
    """The old index's key of the record at ``head`` of ``segment`` when the index says a
    record starts there and ends where this one ends (the next entry's offset; the end of the
    file for the last entry): bytes inserted or deleted before it can move another record
    onto an indexed offset."""
    offset = segment.base + head
    entry = by_offset.get(offset)
    if entry is None:
        return None
    key, end = entry
    record_end = segment.base + _record_end(segment.reader, head)
    size = segment.base + segment.reader.size
    return key if record_end == (size if end is None else end) else None


def _consistent_keys(reader: RecordReader, idx_path: str, result: RepairResult
                     ) -> Tuple[Dict[int, Tuple[str, Optional[int]]], List[str]]:
    """``{offset: (key, offset of the next entry)}`` of the old index's lines whose key and
    offset are each on no other line, and every key of the index in order; ``({}, [])`` when
    it cannot be read or belongs to another file (``recio.records.diagnose.IndexFit.foreign``)."""
    try:
        index = open_index(idx_path, key_type=str, cache=False)
    except NotRegularFileError:  # a FIFO or a device given as the index: not a damaged one
        raise
    except RecordIOError as exc:
        where = "" if exc.line is None else f"line {exc.line}: "
        result.index_error = f"{idx_path}: {where}{exc.message}"
        return {}, []
    fit = index_fit(reader, index)
    if fit.foreign:
        wrong = fit.misses + fit.past_end
        result.index_error = (f"{idx_path} does not belong to this .rec: {wrong:,} of its "
                              f"{fit.entries:,} offsets land on no record head")
        return {}, []
    result.idx_path = idx_path
    keys = index.key_list()
    offsets = index.offsets.tolist()
    result.index_entries = len(keys)
    key_count: Dict[str, int] = {}
    offset_count: Dict[int, int] = {}
    for key, offset in zip(keys, offsets):
        key_count[key] = key_count.get(key, 0) + 1
        offset_count[offset] = offset_count.get(offset, 0) + 1
    ends = sorted(offset_count) + [None]  # where the index says each record ends: the next one
    after = {o: ends[i + 1] for i, o in enumerate(ends[:-1])}
    return ({o: (k, after[o]) for k, o in zip(keys, offsets)
             if key_count[k] == 1 and offset_count[o] == 1}, keys)


def _image_id(reader: RecordReader, offset: int) -> Optional[int]:
    """The id of the image header the record at ``offset`` starts with, or None when it has
    none (shorter than a header, or a label count that does not fit)."""
    _, cflag, length, _ = part_at(reader, offset)
    if cflag == 0:  # a whole record: its length and first bytes, read in place
        head = _bytes(reader, offset + HEADER_SIZE, offset + HEADER_SIZE + min(IR_SIZE, length))
    else:
        record = reader.read_at(offset)
        length, head = len(record), bytes(record[:IR_SIZE])
    if len(head) < IR_SIZE:
        return None
    flag, _, rid, _ = IR_STRUCT.unpack_from(head)
    return rid if IR_SIZE + 4 * flag <= length else None
