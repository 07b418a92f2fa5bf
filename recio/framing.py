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
"""
from __future__ import annotations

import struct
from typing import List, Union

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


def encode_lrecord(cflag: int, length: int) -> int:
    """Pack a continuation flag and a length into the 32-bit ``lrecord`` word."""
    return (cflag << 29) | length


def decode_cflag(lrecord: int) -> int:
    """The continuation flag (top 3 bits) of an ``lrecord`` word."""
    return (lrecord >> 29) & 7


def decode_length(lrecord: int) -> int:
    """The payload length (low 29 bits) of an ``lrecord`` word."""
    return lrecord & LENGTH_MASK


def pad_size(length: int) -> int:
    """Zero bytes written after a part of ``length`` bytes to reach 4-byte alignment."""
    return -length & 3


def split_payload(data: Buffer) -> List[memoryview]:
    """Cut a payload at every 4-aligned magic word (the word itself is dropped).

    Returns one piece for an ordinary payload; ``k + 1`` pieces when the magic occurs at
    ``k`` aligned offsets. The pieces are zero-copy views into ``data``.
    """
    view = memoryview(data)
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

__all__ = ["MAGIC", "MAGIC_BYTES", "PART_HEADER", "HEADER_SIZE", "MAX_RECORD_LENGTH",
           "LENGTH_MASK", "CFLAG_WHOLE", "CFLAG_FIRST", "CFLAG_MIDDLE", "CFLAG_LAST", "PADDING",
           "encode_lrecord", "decode_cflag", "decode_length", "pad_size", "split_payload",
           "frame_parts", "encode_record", "find_record_head"]
