"""RecordIO framing (dmlc-core ``recordio.h``): constants and pure encode/decode, no I/O.

A ``.rec`` file is a sequence of 4-byte aligned *parts*, all integers little-endian::

    +----------------+-----------------------------+--------------+-----------+
    | magic (uint32) | lrecord = cflag<<29 | length | data[length] | pad 0..3  |
    | 0xCED7230A     | cflag: 3 bits, length: 29   |              | zeros     |
    +----------------+-----------------------------+--------------+-----------+

``cflag``: 0 whole record, 1 first part, 2 middle part, 3 last part.

Why parts exist: the writer cuts a payload wherever the magic word appears at a 4-aligned
offset inside it, drops that magic word, and writes the pieces as parts 1, 2, ..., 3. The reader
joins the parts and puts one magic word back between consecutive parts. So the magic never
appears at a 4-aligned file offset except as a part header.

Why a length word can never be taken for the magic: ``(MAGIC >> 29) & 7 == 6`` and valid
cflags are 0..3, so a scan for "aligned magic followed by cflag 0 or 1" finds exactly the record
heads. That is what lets a file be split at arbitrary byte offsets (see ``find_record_head``).

It also makes a corrupt length visible: a length field that grew swallows the records after it,
and their heads are magic words at 4-aligned offsets *inside* the record's data, which a valid
writer never leaves there. ``check_part_header`` is the one header rule and
``first_aligned_magic``/``count_aligned_magic`` the one data rule; every parser in recio calls
them (the reader's hot loop copies the header rule verbatim, and says so).
"""
from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple, Union

import numpy as np

from recio.errors import RecordIOError, TruncatedFileError

Buffer = Union[bytes, bytearray, memoryview]

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)  # b"\x0a\x23\xd7\xce"
assert (MAGIC >> 29) & 7 == 6, "a length word must never equal the magic"

#: magic + lrecord, the 8-byte header in front of every part
PART_HEADER = struct.Struct("<II")
HEADER_SIZE = PART_HEADER.size
#: a record (and every part) must be shorter than this: the length field has 29 bits
MAX_RECORD_LENGTH = 1 << 29
LENGTH_MASK = MAX_RECORD_LENGTH - 1

CFLAG_WHOLE, CFLAG_FIRST, CFLAG_MIDDLE, CFLAG_LAST = 0, 1, 2, 3

#: zero padding after a part of each ``length % 4``
PADDING = (b"", b"\0\0\0", b"\0\0", b"\0")
#: writers frame a payload shorter than this in one step: one ``bytes.find`` for the magic
#: anywhere (a hit, aligned or not, takes the multi-part path, which cuts only at aligned ones),
#: then the header from ``WHOLE_HEADERS``
SMALL_PAYLOAD = 1 << 12
#: the part header of a whole record of each length below ``SMALL_PAYLOAD``, packed once
WHOLE_HEADERS = tuple(PART_HEADER.pack(MAGIC, n) for n in range(SMALL_PAYLOAD))
#: the magic word's last byte: a payload without it cannot hold the word, and a one-byte
#: search (memchr) costs a fraction of the four-byte one
MAGIC_LAST_BYTE = MAGIC_BYTES[-1:]


def _encode_lrecord(cflag: int, length: int) -> int:
    """Pack a continuation flag and a length into the 32-bit ``lrecord`` word."""
    return (cflag << 29) | length


def decode_cflag(lrecord: int) -> int:
    """The continuation flag (top 3 bits) of an ``lrecord`` word."""
    return (lrecord >> 29) & 7


def _decode_length(lrecord: int) -> int:
    """The payload length (low 29 bits) of an ``lrecord`` word."""
    return lrecord & LENGTH_MASK


def pad_size(length: int) -> int:
    """Zero bytes written after a part of ``length`` bytes to reach 4-byte alignment."""
    return -length & 3


#: from this payload size on, ``split_payload`` first counts aligned magic words with NumPy
_NUMPY_SPLIT_CHECK = 1024


def split_payload(data: Buffer) -> List[memoryview]:
    """Cut a payload at every 4-aligned magic word (the word itself is dropped).

    Returns one piece for an ordinary payload; ``k + 1`` pieces when the magic occurs at
    ``k`` aligned offsets. The pieces are zero-copy views into ``data``.
    """
    view = memoryview(data)
    if len(view) >= _NUMPY_SPLIT_CHECK and view.contiguous and view.itemsize == 1 \
            and not count_aligned_magic(view, 0, len(view) & ~3):
        return [view]  # the usual case, found in one NumPy pass (several times bytes.find's speed)
    pieces = []
    start = 0
    find = data.find if isinstance(data, (bytes, bytearray)) else bytes(view).find
    pos = find(MAGIC_BYTES)
    while pos >= 0:
        if pos & 3 == 0:
            pieces.append(view[start:pos])
            start = pos + 4
            pos = find(MAGIC_BYTES, start)
        else:
            pos = find(MAGIC_BYTES, pos + 1)
    pieces.append(view[start:])
    return pieces


def frame_parts(pieces: List[memoryview]) -> List[Buffer]:
    """The byte strings that encode ``pieces`` (from ``split_payload``) as one framed record."""
    out: List[Buffer] = []
    last = len(pieces) - 1
    for i, piece in enumerate(pieces):
        cflag = CFLAG_WHOLE if last == 0 else (CFLAG_FIRST if i == 0 else
                                                (CFLAG_LAST if i == last else CFLAG_MIDDLE))
        n = len(piece)
        out.append(PART_HEADER.pack(MAGIC, (cflag << 29) | n))
        out.append(piece)
    out.append(PADDING[len(pieces[-1]) & 3])
    return out


def encode_record(data: Buffer) -> bytes:
    """The complete on-disk bytes of one record (header(s), data, padding)."""
    if len(data) >= MAX_RECORD_LENGTH:
        raise ValueError(f"record of {len(data)} bytes is too large: the RecordIO length field "
                         f"holds at most {MAX_RECORD_LENGTH - 1} bytes (2**29 - 1)")
    return b"".join(frame_parts(split_payload(data)))


def find_record_head(buf: Buffer, start: int = 0, end: int = -1, base: int = 0) -> int:
    """Offset in ``buf`` of the first record head at or after ``start``, or -1.

    A record head is a magic word at a 4-aligned *file* offset (``base`` is the file offset of
    ``buf[0]``) whose following ``lrecord`` has cflag 0 or 1. Only heads whose magic starts before
    ``end`` (default: the end of ``buf``) and whose 8-byte header lies wholly inside ``buf`` are
    found; a caller reading in chunks overlaps them by 7 bytes.
    """
    size = len(buf)
    if end < 0 or end > size:
        end = size
    misalign = (base + start) & 3
    if misalign:
        start += 4 - misalign
    find = buf.find if isinstance(buf, (bytes, bytearray)) else None
    if find is None:  # mmap has .find; a memoryview does not
        find = getattr(buf, "find", None) or bytes(buf).find
    unpack_word = _WORD.unpack_from
    pos = find(MAGIC_BYTES, start, end + 3) if start < end else -1
    while 0 <= pos < end:
        if (base + pos) & 3 == 0 and pos + HEADER_SIZE <= size:
            if (unpack_word(buf, pos + 4)[0] >> 29) <= CFLAG_FIRST:
                return pos
        pos = find(MAGIC_BYTES, pos + 1, end + 3)
    return -1


_WORD = struct.Struct("<I")
_MAGIC_U32 = np.uint32(MAGIC)
#: below this many bytes a ``find`` loop is cheaper than a NumPy pass
_SMALL_SEARCH = 2048
#: the NumPy pass looks at this many bytes at a time (bounds its temporary arrays)
_SEARCH_BLOCK = 1 << 22
_CFLAG_NAMES = {0: "a whole record", 1: "a first part", 2: "a middle part", 3: "a last part"}


# -- the framing checks: one rule, raised with one set of messages --------------------------------
def check_part_header(magic: int, lrecord: int, offset: int, size: int, record_offset: int,
                      path: Optional[str] = None) -> Tuple[int, int]:
    """Check the part header read at ``offset`` of a ``size``-byte file; return ``(cflag, length)``.

    ``record_offset`` is where the record began (equal to ``offset`` for its first part). The
    claimed length is checked against the bytes that exist *before* anything is read or
    allocated for it. Raises ``RecordIOError`` naming ``path`` and the offset.
    """
    if magic != MAGIC:
        what = "a record" if offset == record_offset else f"the record at byte {record_offset}"
        raise RecordIOError(
            f"bad magic 0x{magic:08x} where a part of {what} should start (expected "
            f"0x{MAGIC:08x}): the file is corrupt here or the offset is not a record head",
            path, offset)
    cflag, length = lrecord >> 29, lrecord & LENGTH_MASK
    if offset == record_offset:
        if cflag > CFLAG_FIRST:
            raise RecordIOError(
                f"record starts with cflag {cflag} ({_CFLAG_NAMES.get(cflag, 'invalid')}); a "
                f"record must start with cflag 0 or 1", path, offset)
    elif cflag != CFLAG_MIDDLE and cflag != CFLAG_LAST:
        raise RecordIOError(
            f"multi-part record started at byte {record_offset} expects a middle or last part "
            f"(cflag 2 or 3) here, found cflag {cflag} ({_CFLAG_NAMES.get(cflag, 'invalid')})",
            path, offset)
    if offset + HEADER_SIZE + length > size:
        raise RecordIOError(
            f"part claims {length} bytes but the file ends {size - offset - HEADER_SIZE} bytes "
            f"after its header (truncated file or corrupt length)", path, offset)
    return cflag, length


def truncated_header_error(offset: int, size: int, record_offset: int,
                           path: Optional[str] = None) -> RecordIOError:
    """The error for a part header that the end of the file cuts short (or an offset past it)."""
    if offset < 0 or (offset == record_offset and offset >= size):
        return RecordIOError(f"offset is outside the {size}-byte file", path, offset)
    cut = "" if offset == record_offset else f"; the record at byte {record_offset} is cut off"
    return RecordIOError(f"truncated file: a part header needs 8 bytes but the file ends "
                         f"{size - offset} bytes after this offset{cut}", path, offset)


def truncation_error(path: Optional[str], size: int, pos: int, part_pos: int,
                     claimed: Optional[int]) -> TruncatedFileError:
    """The error for the record at ``pos`` that the end of a ``size``-byte file cuts: at the
    header of its part at ``part_pos`` (``claimed`` None), or inside that part's data
    (``claimed`` bytes). The message depends on the bytes only, not on where the file lives."""
    where = "" if part_pos == pos else f" (its part at byte {part_pos})"
    if claimed is None and part_pos < size:
        cut = f"it ends {size - part_pos} bytes into the header of the record at byte {pos}" \
              f"{where}"
    elif claimed is None:
        cut = f"it ends inside the record at byte {pos}, before that record's next part"
    else:
        cut = (f"it ends {size - part_pos - HEADER_SIZE:,} bytes into the data of the record "
               f"at byte {pos}{where}, which claims {claimed:,} bytes")
    return TruncatedFileError(f"truncated file: {cut}; the records before it are not "
                              f"affected: `recio repair` copies them, with their keys, into a "
                              f"new .rec + .idx", path, pos)


def swallowed_head_error(record_offset: int, inner: int,
                         path: Optional[str] = None) -> RecordIOError:
    """The error for a record whose data holds a 4-aligned magic word at ``inner``.

    A valid writer never leaves one there, so the record's length field is corrupt: it runs over
    the record(s) that start at ``inner``.
    """
    return RecordIOError(
        f"the record's data holds a record magic at the 4-aligned byte {inner}, which a RecordIO "
        f"writer never leaves inside data: its length field is corrupt and swallows the "
        f"record(s) after it (reading in skip mode recovers them)", path, record_offset)


def first_aligned_magic(buf: Any, start: int, end: int) -> int:
    """Offset of the first magic word at a 4-aligned offset in ``buf[start:end]``, or -1.

    ``buf[0]`` must sit at a 4-aligned file offset (a whole file, mmap or bytes) and ``start``
    must be 4-aligned. Small ranges use ``find``; larger ones a NumPy pass over 32-bit words.
    """
    near = min(end, start + _SMALL_SEARCH)  # most hits, and all small records: a find loop
    find = getattr(buf, "find", None)
    if find is None:  # a memoryview
        chunk = bytes(buf[start:near])
        find, base, lo, hi = chunk.find, start, 0, len(chunk)
    else:
        base, lo, hi = 0, start, near
    pos = find(MAGIC_BYTES, lo, hi + 3)
    while 0 <= pos < hi and base + pos + 4 <= end:
        if (base + pos) & 3 == 0:
            return base + pos
        pos = find(MAGIC_BYTES, pos + 1, hi + 3)
    if near >= end:
        return -1
    start = near
    block, step = start, _SMALL_SEARCH
    while block < end:  # blocks grow, so the cost follows the distance to the first hit
        stop = min(block + step, end)
        words = np.frombuffer(buf, dtype="<u4", count=(stop - block) >> 2, offset=block)
        hits = np.flatnonzero(words == _MAGIC_U32)
        del words
        if len(hits):
            return block + 4 * int(hits[0])
        block, step = stop, min(step * 4, _SEARCH_BLOCK)
    return -1


def count_aligned_magic(buf: Any, start: int, end: int) -> int:
    """How many magic words lie at 4-aligned offsets in ``buf[start:end]`` (same alignment
    rules as ``first_aligned_magic``), in one NumPy pass: the writer's test of whether a large
    payload must be split into parts, and the reader's check of a record it has copied."""
    total = 0
    for block in range(start, end, _SEARCH_BLOCK):
        stop = min(block + _SEARCH_BLOCK, end)
        words = np.frombuffer(buf, dtype="<u4", count=(stop - block) >> 2, offset=block)
        total += int(np.count_nonzero(words == _MAGIC_U32))
        del words
    return total
