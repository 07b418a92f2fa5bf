"""Naming the real culprit when a ``.rec`` and its ``.idx`` disagree.

A read that fails at an offset the ``.idx`` gave has three possible causes, and each needs a
different fix: the ``.rec`` was cut short (its intact records can be rescued with
``recio repair``), the ``.idx`` belongs to another file (the ``.rec`` is fine: rebuild the
index), or the ``.rec`` is damaged at that record. ``_diagnose_index`` tells them apart from
where the index's offsets land: on record heads, past the end of the file, or on neither.
It reads one 8-byte header per index entry, so it runs only once something has failed (an
offset past the end when an index is opened, a bad record head at an indexed offset).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import (
    IndexFileError,
    IndexMismatchError,
    NotRecordFileError,
    RecordIOError,
    StorageError,
    TruncatedFileError,
)
from recio.records.framing import (
    CFLAG_FIRST,
    HEADER_SIZE,
    LENGTH_MASK,
    MAGIC,
    PART_HEADER,
    pad_size,
)
from recio.records.index import open_index
from recio.records.index_format import key_text
from recio.records.reader import RecordReader
from recio.records.sniff import SNIFF_BYTES, not_a_record_file

#: examples of misplaced entries a message shows
_EXAMPLES = 3
#: entries of a remote file's index whose landing is checked (one ranged read each)
_REMOTE_SAMPLE = 64


def repair_hint(rec_path: Any) -> str:
    """The command that rescues the intact records of a damaged ``.rec`` (one wording)."""
    rec = os.fspath(rec_path)
    stem = rec[:-4] if rec.endswith(".rec") else rec
    return (f"`recio repair {rec} -o {stem}_repaired` copies every intact record, with its "
            f"key, into {stem}_repaired.rec + .idx")


def reindex_hint(rec_path: Any) -> str:
    """The command that rebuilds an index that does not match its ``.rec`` (one wording)."""
    return f"rebuild the index with `recio index {os.fspath(rec_path)} --force`"


# -- where an index's offsets land ------------------------------------------------------------
def part_at(reader: Any, pos: int) -> Tuple[bool, int, int, int]:
    """``(magic ok, cflag, length, where the next part starts)`` of the part header at ``pos``
    of ``reader``'s file (which must hold 8 bytes there): one hop of the error paths' header
    walks, which look at headers without the reader's checks."""
    magic, lrec = PART_HEADER.unpack(reader.span_bytes([(pos, pos + HEADER_SIZE)]))
    length = lrec & LENGTH_MASK
    return magic == MAGIC, lrec >> 29, length, pos + HEADER_SIZE + length + pad_size(length)


def _heads_at(reader: Any, offsets: np.ndarray) -> np.ndarray:
    """For each offset, whether a record head (the magic, then cflag 0 or 1) starts there in
    ``reader``'s file; False for offsets whose header would not fit in the file."""
    offsets = np.asarray(offsets, dtype=np.int64)
    size = reader.size
    fits = (offsets >= 0) & (offsets + HEADER_SIZE <= size) & (offsets & 3 == 0)
    found = np.zeros(len(offsets), dtype=bool)
    buf = reader.buffer
    if buf is not None and len(buf):
        words = np.frombuffer(buf, dtype="<u4", count=size >> 2)
        at = offsets[fits] >> 2
        found[fits] = (words[at] == MAGIC) & ((words[at + 1] >> 29) <= CFLAG_FIRST)
        del words
        return found
    for i in np.flatnonzero(fits):  # a remote object: one small ranged read each
        head = reader.span_bytes([(int(offsets[i]), int(offsets[i]) + HEADER_SIZE)])
        magic, lrec = PART_HEADER.unpack(head)
        found[i] = magic == MAGIC and lrec >> 29 <= CFLAG_FIRST
    return found


def _walk_heads(reader: Any, stop: int) -> np.ndarray:
    """The record heads found by hopping from header to header from the start of the file,
    up to ``stop`` (-1: the end) or the first damage (an error path's look at the file)."""
    size = reader.size if stop < 0 else stop
    heads, pos = [], 0
    while pos + HEADER_SIZE <= size:
        magic_ok, cflag, _, after = part_at(reader, pos)
        if not magic_ok:
            break
        if cflag <= CFLAG_FIRST:
            heads.append(pos)
        pos = after
    return np.asarray(heads, dtype=np.int64)


def _runs_past_end(reader: Any, offset: int, max_parts: int = 1 << 16) -> bool:
    """Whether the record whose head is at ``offset`` claims bytes past the end of the file."""
    size, pos = reader.size, offset
    for _ in range(max_parts):
        if pos + HEADER_SIZE > size:
            return True
        magic_ok, cflag, length, after = part_at(reader, pos)
        if not magic_ok:
            return False
        if pos + HEADER_SIZE + length > size:
            return True
        if cflag in (0, 3):
            return False
        pos = after
    return False


@dataclass
class IndexFit:
    """Where the offsets of an index land in a ``.rec``."""

    entries: int
    past_end: int = 0  # entries whose record header would not fit in the file
    misses: int = 0  # entries inside the file that land on no record head
    examples: List[Tuple[str, int]] = field(default_factory=list)  # (key, offset) not on heads
    heads: Optional[np.ndarray] = None  # per entry: lands on a record head
    sampled: bool = False  # a remote file: only a sample of the entries was checked

    @property
    def inside(self) -> int:
        """Entries whose offsets lie inside the file."""
        return self.entries - self.past_end

    @property
    def foreign(self) -> bool:
        """Most of the entries inside the file land on no record head: another file's index
        (or one made before the ``.rec`` was rewritten)."""
        if self.inside == 0:
            return self.entries > 0
        return self.misses * 2 > self.inside


def index_fit(reader: Any, index: Any) -> IndexFit:
    """Check every offset of ``index`` (a ``recio.records.index.Index``) against the records
    of ``reader``'s file (a sample of them for a remote file)."""
    offsets = np.asarray(index.offsets, dtype=np.int64)
    fit = IndexFit(entries=len(offsets))
    positions = np.arange(len(offsets))
    if reader.buffer is None and len(offsets) > _REMOTE_SAMPLE:
        positions = np.unique(np.linspace(0, len(offsets) - 1, _REMOTE_SAMPLE).astype(np.int64))
        fit.sampled = True
    chosen = offsets[positions]
    past = chosen + HEADER_SIZE > reader.size
    landed = _heads_at(reader, chosen)
    miss = ~landed & ~past
    scale = len(offsets) / max(len(positions), 1)
    fit.past_end = int(round(past.sum() * scale))
    fit.misses = int(round(miss.sum() * scale))
    fit.heads = None if fit.sampled else landed
    for i in positions[np.flatnonzero(~landed)[:_EXAMPLES]].tolist():
        fit.examples.append((_key_at(index, i), int(offsets[i])))
    return fit


def _key_at(index: Any, i: int) -> str:
    try:
        return key_text(index.key_at(i))
    except (ValueError, AttributeError):  # keys not kept
        return f"(line {i + 1})"


def _key_of_offset(index: Any, offset: int) -> Optional[str]:
    lines = np.flatnonzero(np.asarray(index.offsets) == offset)
    return _key_at(index, int(lines[0])) if len(lines) else None


def _shown(examples: List[Tuple[str, int]]) -> str:
    return ", ".join(f"key {k} -> byte {o}" for k, o in examples)


def _mismatch_error(rec_path: str, index: Any, fit: IndexFit, size: int,
                    asked: Optional[Tuple[Optional[str], int]] = None) -> IndexMismatchError:
    """"This index does not belong to this .rec", with the numbers that show it."""
    wrong = fit.misses + fit.past_end
    past = f" ({fit.past_end:,} of them past its end)" if fit.past_end else ""
    first = ""
    if asked is not None:
        key, offset = asked
        first = (f"{'key ' + key if key is not None else 'the record'} at byte {offset}: no "
                 f"record starts there; ")
    examples = f" (e.g. {_shown(fit.examples)})" if fit.examples and asked is None else ""
    sampled = " (estimated from a sample)" if fit.sampled else ""
    return IndexMismatchError(
        f"{first}this index does not belong to this .rec ({rec_path}): {wrong:,} of its "
        f"{fit.entries:,} offsets{sampled} land on no record head of that {size:,}-byte "
        f"file{past}{examples}. "
        f"It was made for another file, or the .rec was rewritten since; the .rec itself may "
        f"be fine (`recio verify {rec_path}` checks it): {reindex_hint(rec_path)}",
        path=index.path)


def _diagnose_index(reader: Any, index: Any,
                    asked: Optional[Tuple[Optional[str], int]] = None
                    ) -> Optional[RecordIOError]:
    """The error that explains why ``index`` does not fit ``reader``'s file, or None when every
    offset lands on a record head inside it.

    ``IndexMismatchError``: most offsets land on no record head (another file's index).
    ``TruncatedFileError``: the offsets inside the file land on record heads and some lie
    past its end (the ``.rec`` was cut short). ``asked``: ``(key, offset)`` of the read that
    failed, named in the message.
    """
    fit = index_fit(reader, index)
    if fit.past_end == 0 and fit.misses == 0:
        return None
    rec = reader.path or "the .rec"
    if reader.size and not _heads_at(reader, np.zeros(1, np.int64))[0]:
        other = not_a_record_file(reader.path, reader.span_bytes(
            [(0, min(reader.size, SNIFF_BYTES))]), reader.storage_options)
        if other is not None:  # not the index's fault: the ".rec" is something else
            return other
    if fit.foreign:
        return _mismatch_error(rec, index, fit, reader.size, asked)
    if fit.past_end == 0:
        return None  # a few entries miss: the .rec is damaged there, or those lines are wrong
    offsets = np.asarray(index.offsets, dtype=np.int64)
    inside = offsets[offsets + HEADER_SIZE <= reader.size]
    landed = inside[_heads_at(reader, inside)] if len(inside) else inside
    cut = int(landed.max()) if len(landed) else -1
    if cut < 0 or not _runs_past_end(reader, cut):
        cut = -1
    size, idx = reader.size, index.path
    unlisted: Union[np.ndarray, List[int]] = (
        np.setdiff1d(_walk_heads(reader, cut), landed) if not fit.sampled else [])
    if len(unlisted):  # the file holds records the index does not list: the index is wrong
        return IndexFileError(
            f"{fit.past_end:,} of its entries point past the end of {rec} (a {size:,}-byte "
            f"file) while {len(unlisted):,} of that file's records are in no entry (e.g. the "
            f"record at byte {int(unlisted[0])}): the index is damaged or was made for another "
            f"version of the file; {reindex_hint(rec)}", path=idx)
    misses = (f"; {fit.misses:,} other entries land on no record head (`recio verify {rec}` "
              f"lists the damage)") if fit.misses else ""
    if cut >= 0:
        intact = int((landed < cut).sum())
        key = _key_of_offset(index, cut)
        named = f" (key {key})" if key is not None else ""
        return TruncatedFileError(
            f"truncated file: it ends {size - cut:,} bytes into the record at byte {cut}"
            f"{named}, and its index {idx} lists {fit.past_end:,} more record(s) past the end; "
            f"the {intact:,} record(s) before it are intact{misses}: {repair_hint(rec)}",
            path=rec, offset=cut)
    return TruncatedFileError(
        f"truncated file: it ends at byte {size:,}, after {len(landed):,} whole record(s), but "
        f"its index {idx} lists {fit.past_end:,} more record(s) past the end (the .rec was cut "
        f"short at a record boundary, or the index was made for a longer file){misses}: "
        f"{repair_hint(rec)}", path=rec, offset=size)


def open_checked_index(rec_path: Any, idx_path: Any, key_type: Any = int,
                       rec_size: Optional[int] = None, cache: Optional[bool] = None,
                       storage_options: Any = None, shard_cache: Any = None) -> Any:
    """``recio.records.index.open_index`` for the ``.rec`` at ``rec_path``: offsets past the
    end of that file raise the error that names the culprit (``_diagnose_index``):
    ``TruncatedFileError`` when the ``.rec`` was cut short, ``IndexMismatchError`` when the
    index belongs to another file, ``NotRecordFileError`` when ``rec_path`` is no ``.rec``.
    ``shard_cache`` (a ``recio.records.cache.shard_cache.ShardCache``) serves URLs from local
    copies."""
    if rec_size is None:
        rec_size = (shard_cache.size(os.fspath(rec_path))
                    if shard_cache is not None and storage.is_url(rec_path)
                    else storage.size(rec_path, storage_options))
    index = open_index(idx_path, key_type, cache=cache, storage_options=storage_options,
                       shard_cache=shard_cache)
    if len(index) and ends_mid_line(idx_path):  # cut short? its last offset may be cut too
        _check_last_line(rec_path, index, rec_size, storage_options, shard_cache)
    if len(index) and int(index.offsets.max()) + HEADER_SIZE > rec_size:
        with RecordReader(rec_path, storage_options=storage_options,
                          shard_cache=shard_cache) as reader:
            found = _diagnose_index(reader, index)
        raise found or IndexFileError(f"offsets past the end of {os.fspath(rec_path)}",
                                      path=index.path)
    index.rec_size = rec_size
    return index


def _check_last_line(rec_path: Any, index: Any, rec_size: int, storage_options: Any,
                     shard_cache: Any) -> None:
    """An ``.idx`` that ends without a newline was cut short, or written so by hand: its last
    line must then name a record head, or ``IndexFileError`` says it was cut short (the digits
    of its offset may be cut, and point anywhere)."""
    last = int(index.offsets[-1])
    if last + HEADER_SIZE <= rec_size:
        with RecordReader(rec_path, storage_options=storage_options,
                          shard_cache=shard_cache) as reader:
            if _heads_at(reader, np.array([last], np.int64))[0]:
                return
    raise IndexFileError(
        f"the index is cut short: it ends in the middle of its last line (key "
        f"{_key_at(index, len(index) - 1)}, byte {last}: no record starts there, no newline "
        f"after it), as a copy or a write that stopped leaves it; `recio verify "
        f"{os.fspath(rec_path)}` prints the command that rebuilds it", path=index.path,
        line=len(index))


def explain_indexed_read(reader: Any, index: Any, offset: int,
                         error: RecordIOError) -> RecordIOError:
    """The error to raise when reading the record at ``offset``, which ``index`` gave, failed
    with ``error``: the index's fault (it belongs to another file, or that line is wrong) or
    the ``.rec``'s (truncated, or damaged at that record, named with its key)."""
    if isinstance(error, (TruncatedFileError, NotRecordFileError, StorageError)):
        return error
    key = _key_of_offset(index, offset)
    found = _diagnose_index(reader, index, asked=(key, offset))
    if found is not None:
        return found
    rec = reader.path or "the .rec"
    named = f"key {key} of {index.path}" if key is not None else f"an entry of {index.path}"
    if not _heads_at(reader, np.array([offset]))[0]:
        inside = _record_around(reader, index, offset)
        if inside is not None:
            return IndexFileError(
                f"{named} says byte {offset}, which lies inside the record at byte {inside} of "
                f"{rec} (the index's other entries land on record heads): that index line is "
                f"wrong; {reindex_hint(rec)}", path=index.path)
    return type(error)(f"{error.message} ({named}); `recio verify {rec}` lists the damage, "
                       f"{repair_hint(rec)}", error.path, error.offset, error.line)


def _record_around(reader: Any, index: Any, offset: int) -> Optional[int]:
    """The head of the well-formed record whose bytes hold ``offset``, found by hopping over
    headers from the nearest indexed record head before it; None if the hops meet damage."""
    offsets = np.asarray(index.offsets, dtype=np.int64)
    before = offsets[offsets < offset]
    if not len(before):
        before = np.zeros(1, np.int64)
    start = int(before.max())
    if not _heads_at(reader, np.array([start]))[0]:
        return None
    pos, head = start, start
    size = reader.size
    while pos <= offset and pos + HEADER_SIZE <= size:
        magic_ok, cflag, _, nxt = part_at(reader, pos)
        if not magic_ok:
            return None
        if cflag <= CFLAG_FIRST:
            head = pos
        if nxt > size:
            return None
        if pos <= offset < nxt:
            return head
        pos = nxt
    return None


def ends_mid_line(idx_path: "os.PathLike[str] | str") -> bool:
    """Whether the local ``.idx`` at ``idx_path`` ends without a newline: cut short when its
    last line is also wrong (a file written by hand may just lack the last newline). False
    for a URL (not looked at) and an empty or unreadable file."""
    if storage.is_url(os.fspath(idx_path)):
        return False
    try:
        with open(idx_path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False
