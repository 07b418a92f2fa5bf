"""CNTK Binary Format (CBF, version 1): the file layout, its stream and chunk descriptions, and
the header check every reader of a ``.cbf`` starts with (:func:`read_header`).

A ``.cbf`` file holds sequences of several *streams* (dense or sparse, float32 or float64),
grouped into chunks that a reader loads whole. All integers are little-endian::
    prefix   uint64 magic 0x636e746b5f62696e ("cntk_bin"; bytes "nib_ktnc" on disk)
             uint32 version = 1
    chunk*   uint32 samples[S]                  meta sample count of each of the S sequences
             then stream by stream, sequence by sequence:
               dense:  uint32 N | N * sample_dim values
               sparse: uint32 N | int32 nnz | nnz values | nnz int32 indices | N int32 counts
                       (indices within a sample, in [0, sample_dim); counts sum to nnz)
    header   uint64 magic (the sentinel) | uint32 num_chunks C | uint32 num_streams I
             I * { uint8 storage (0 dense, 1 sparse) | uint32 len | name (ASCII)
                   | uint8 elem (0 float32, 1 float64) | uint32 sample_dim }
             C * { int64 offset | uint32 num_sequences | uint32 num_samples }
    trailer  int64 header_offset               where the header (its sentinel) starts

A chunk ends where the next one starts (the last where the header starts). The per-sequence
and per-chunk sample counts are meta-information for randomizers: CNTK's converter stores the
largest sample count across the streams, and so does :class:`CBFWriter` unless told otherwise.
largest sample count across the streams, and so does ``recio.sequence.cbf.CBFWriter`` unless
told otherwise. ``recio.sequence.cbf`` holds the reader and the writer,
``recio.sequence.cbf_decode`` the decoder of one chunk's bytes.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from recio.errors import CBFError
from recio.storage import open_regular

PathLike = Union[str, "os.PathLike[str]"]

#: CBF's magic (``recio.records.framing.MAGIC`` is RecordIO's, a different number)
CBF_MAGIC = 0x636E746B5F62696E
VERSION = 1

PREFIX = struct.Struct("<QI")                 # magic, version
HEADER_HEAD = struct.Struct("<QII")           # sentinel, num_chunks, num_streams
STREAM_STORAGE = struct.Struct("<BI")         # storage, name length
STREAM_TAIL = struct.Struct("<BI")            # element type, sample dim
CHUNK_ENTRY = struct.Struct("<qII")           # offset, num_sequences, num_samples
TRAILER = struct.Struct("<q")                 # header offset
DENSE_HEAD = struct.Struct("<I")              # N
SPARSE_HEAD = struct.Struct("<Ii")            # N, nnz

DENSE, SPARSE = "dense", "sparse"
STORAGE_CODES = {DENSE: 0, SPARSE: 1}
ELEM_DTYPES = (np.dtype("<f4"), np.dtype("<f8"))     # element type code -> dtype
INDEX_DTYPE = np.dtype("<i4")
COUNT_DTYPE = np.dtype("<u4")
U32_MAX = 2**32 - 1
I32_MAX = 2**31 - 1

SequenceDict = Dict[str, Any]


@dataclass(frozen=True)
class StreamInfo:
    """One stream of a CBF file: name, ``"dense"``/``"sparse"``, element dtype, sample dim."""

    name: str
    storage: str
    dtype: np.dtype
    sample_dim: int

    def __post_init__(self) -> None:
        if self.storage not in STORAGE_CODES:
            raise ValueError(f"stream {self.name!r}: storage must be 'dense' or 'sparse', "
                             f"not {self.storage!r}")
        dtype = np.dtype(self.dtype).newbyteorder("<")
        if dtype not in ELEM_DTYPES:
            raise ValueError(f"stream {self.name!r}: CBF stores float32 or float64, not {dtype}")
        object.__setattr__(self, "dtype", dtype)
        if not isinstance(self.name, str) or not self.name.isascii() or not self.name:
            raise ValueError(f"stream name {self.name!r} must be a non-empty ASCII string")
        limit = I32_MAX if self.storage == SPARSE else U32_MAX
        if not 1 <= int(self.sample_dim) <= limit:
            raise ValueError(f"stream {self.name!r}: sample_dim {self.sample_dim} must be in "
                             f"[1, {limit}] (sparse indices are int32)")
        object.__setattr__(self, "sample_dim", int(self.sample_dim))

    @property
    def is_sparse(self) -> bool:
        """True for sparse storage."""
        return self.storage == SPARSE

    @classmethod
    def coerce(cls, spec: Any) -> "StreamInfo":
        """A StreamInfo from itself, a tuple ``(name, storage, dtype, dim)`` or a dict."""
        if isinstance(spec, cls):
            return spec
        if isinstance(spec, Mapping):
            return cls(spec["name"], spec["storage"], spec.get("dtype", "float32"),
                       spec["sample_dim"])
        return cls(*spec)


@dataclass(frozen=True)
class ChunkInfo:
    """One entry of the chunk table: where the chunk lies and its meta counts."""

    index: int
    offset: int
    size: int
    num_sequences: int
    num_samples: int


def cbf_error(path: str, message: str, offset: int, chunk: Optional[int] = None) -> CBFError:
    """A CBFError naming the file, the chunk (when inside one) and the byte offset."""
    where = "" if chunk is None else f"chunk {chunk}: "
    return CBFError(where + message, path=path, offset=offset)


def check_count_bytes(path: str, index: int, offset: int, num_sequences: int,
                       size: int) -> None:
    """A chunk starts with one uint32 sample count per sequence: a chunk table entry whose
    sequences' counts would not fit in the chunk's ``size`` bytes is damaged."""
    if 4 * num_sequences > size:
        raise cbf_error(path, f"{num_sequences} sequence sample counts need {4 * num_sequences} "
                     f"bytes but the chunk has {size} (chunk table damaged)", offset, index)


def read_header(path: PathLike) -> Tuple[int, List[StreamInfo], List[ChunkInfo], int, int]:
    """Validate prefix, trailer and header of a CBF file without reading any chunk: stream
    descriptions, chunk offsets in order inside the file, every chunk large enough for its
    sequences' sample counts.

    Returns ``(version, streams, chunks, header_offset, file_size)``; raises CBFError.
    """
    path = os.fspath(path)
    version, header, header_offset, size = _read_header_bytes(path)
    _, num_chunks, num_streams = HEADER_HEAD.unpack_from(header, 0)
    streams, pos = _parse_streams(path, header, header_offset, num_streams)
    chunks = _parse_chunk_table(path, header, header_offset, pos, num_chunks)
    return version, streams, chunks, header_offset, size


def _read_header_bytes(path: str) -> Tuple[int, bytes, int, int]:
    """``(version, header bytes, header offset, file size)``: the prefix and the trailer checked,
    and the header's sentinel checked before the rest of the header is read (a damaged trailer
    may point anywhere, and the header runs up to the trailer)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        minimum = PREFIX.size + HEADER_HEAD.size + TRAILER.size
        if size < minimum:
            raise cbf_error(path, f"file is {size} bytes, shorter than the {minimum} bytes of an "
                         f"empty CBF file (truncated or not CBF)", 0)
        magic, version = PREFIX.unpack(f.read(PREFIX.size))
        if magic != CBF_MAGIC:
            raise cbf_error(path, f"bad magic 0x{magic:016x}, expected 0x{CBF_MAGIC:016x}: "
                         f"not a CNTK Binary Format file", 0)
        if version != VERSION:
            raise cbf_error(path, f"unsupported CBF version {version}; only version {VERSION} "
                         f"is defined", 8)
        f.seek(size - TRAILER.size)
        (header_offset,) = TRAILER.unpack(f.read(TRAILER.size))
        last = size - TRAILER.size - HEADER_HEAD.size
        if not PREFIX.size <= header_offset <= last:
            raise cbf_error(path, f"header offset {header_offset} is outside [{PREFIX.size}, "
                         f"{last}] (file truncated or trailer damaged)", size - TRAILER.size)
        f.seek(header_offset)
        head = f.read(HEADER_HEAD.size)
        sentinel = HEADER_HEAD.unpack(head)[0]
        if sentinel != CBF_MAGIC:
            raise cbf_error(path, f"header sentinel 0x{sentinel:016x} at the header offset is not "
                         f"the magic 0x{CBF_MAGIC:016x} (header offset wrong or file truncated)",
                         header_offset)
        header = head + f.read(size - TRAILER.size - header_offset - HEADER_HEAD.size)
    return version, header, header_offset, size


def _need(path: str, header: bytes, header_offset: int, pos: int, n: int, what: str) -> None:
    """Refuse a header that ends before the ``n`` bytes of ``what`` starting at ``pos``."""
    if pos + n > len(header):
        raise cbf_error(path, f"header ends inside {what} (needs {n} bytes, "
                     f"{len(header) - pos} left before the trailer)", header_offset + pos)


def _parse_streams(path: str, header: bytes, header_offset: int,
                   num_streams: int) -> Tuple[List[StreamInfo], int]:
    """The stream descriptions that follow the header's head, and the byte after them; each
    description is checked (storage and element codes, ASCII name, dim) and names are unique."""
    pos = HEADER_HEAD.size
    streams: List[StreamInfo] = []
    for i in range(num_streams):
        _need(path, header, header_offset, pos, STREAM_STORAGE.size, f"stream {i}")
        storage, name_len = STREAM_STORAGE.unpack_from(header, pos)
        at = header_offset + pos
        pos += STREAM_STORAGE.size
        _need(path, header, header_offset, pos, name_len + STREAM_TAIL.size,
              f"stream {i} (name length {name_len})")
        raw_name = bytes(header[pos:pos + name_len])
        pos += name_len
        elem, dim = STREAM_TAIL.unpack_from(header, pos)
        pos += STREAM_TAIL.size
        if storage > 1:
            raise cbf_error(path, f"stream {i}: storage type {storage} is neither 0 (dense) "
                         f"nor 1 (sparse)", at)
        if elem > 1:
            raise cbf_error(path, f"stream {i}: element type {elem} is neither 0 (float32) "
                         f"nor 1 (float64)", at)
        try:
            name = raw_name.decode("ascii")
            info = StreamInfo(name, (DENSE, SPARSE)[storage], ELEM_DTYPES[elem], dim)
        except (UnicodeDecodeError, ValueError) as exc:
            raise cbf_error(path, f"stream {i}: invalid description ({exc})", at) from None
        if any(s.name == name for s in streams):
            raise cbf_error(path, f"stream name {name!r} appears twice", at)
        streams.append(info)
    return streams, pos


def _parse_chunk_table(path: str, header: bytes, header_offset: int, pos: int,
                       num_chunks: int) -> List[ChunkInfo]:
    """The chunk table at ``pos`` (it must end the header exactly): every chunk lies between
    the prefix and the header, offsets never decrease, and each chunk can hold its sequences'
    sample counts. A chunk's size is the distance to the next chunk (or to the header)."""
    _need(path, header, header_offset, pos, CHUNK_ENTRY.size * num_chunks,
          f"the table of {num_chunks} chunks")
    table = np.frombuffer(header, dtype=np.dtype([("offset", "<i8"), ("seqs", "<u4"),
                                                  ("samples", "<u4")]),
                          count=num_chunks, offset=pos)
    table_at = header_offset + pos
    pos += CHUNK_ENTRY.size * num_chunks
    if pos != len(header):
        raise cbf_error(path, f"{len(header) - pos} unexpected bytes between the chunk table and "
                     f"the trailer", header_offset + pos)
    offsets = table["offset"].tolist()
    ends = offsets[1:] + [header_offset]
    for i, start in enumerate(offsets):
        if not PREFIX.size <= start <= header_offset:
            raise cbf_error(path, f"chunk {i} offset {start} is out of range: chunks lie in "
                         f"[{PREFIX.size}, {header_offset}] (prefix end to header start)",
                         table_at + i * CHUNK_ENTRY.size)
    seqs = table["seqs"].tolist()
    chunks: List[ChunkInfo] = []
    for i, (start, end) in enumerate(zip(offsets, ends)):
        if start > end:
            raise cbf_error(path, f"chunk {i} offset {start} is past the next chunk's offset "
                         f"{end}: chunk offsets must not decrease",
                         table_at + i * CHUNK_ENTRY.size)
        check_count_bytes(path, i, start, seqs[i], end - start)
        chunks.append(ChunkInfo(i, start, end - start, seqs[i], int(table["samples"][i])))
    return chunks
