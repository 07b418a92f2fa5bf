"""CNTK Binary Format (CBF, version 1): a chunked reader and an atomic writer.

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

:class:`CBFReader` validates the prefix, header and chunk table when opened, then reads one chunk
at a time (``read_chunk``) and decodes it with NumPy views over the chunk buffer. It is also a
*chunked corpus* for :class:`recio.MinibatchSource`: ``num_chunks``, ``chunk_sample_counts(i)``
and ``read_chunk(i)``. :class:`CBFWriter` writes version-1 files, closing a chunk when it
reaches ``chunk_size_bytes`` (CNTK's ``ctf2bin.py`` never resets its size estimate after the
first chunk, so every later chunk holds one sequence; this writer restarts it per chunk).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import CBFError, SequenceError
from recio.records.atomic import ManagedWriter, OutputSet
from recio.sequence.records import Sparse

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
_STORAGE_CODES = {DENSE: 0, SPARSE: 1}
_ELEM_DTYPES = (np.dtype("<f4"), np.dtype("<f8"))     # element type code -> dtype
_INDEX_DTYPE = np.dtype("<i4")
_COUNT_DTYPE = np.dtype("<u4")
_U32_MAX = 2**32 - 1
_I32_MAX = 2**31 - 1

SequenceDict = Dict[str, Any]


@dataclass(frozen=True)
class StreamInfo:
    """One stream of a CBF file: name, ``"dense"``/``"sparse"``, element dtype, sample dim."""

    name: str
    storage: str
    dtype: np.dtype
    sample_dim: int

    def __post_init__(self) -> None:
        if self.storage not in _STORAGE_CODES:
            raise ValueError(f"stream {self.name!r}: storage must be 'dense' or 'sparse', "
                             f"not {self.storage!r}")
        dtype = np.dtype(self.dtype).newbyteorder("<")
        if dtype not in _ELEM_DTYPES:
            raise ValueError(f"stream {self.name!r}: CBF stores float32 or float64, not {dtype}")
        object.__setattr__(self, "dtype", dtype)
        if not isinstance(self.name, str) or not self.name.isascii() or not self.name:
            raise ValueError(f"stream name {self.name!r} must be a non-empty ASCII string")
        limit = _I32_MAX if self.storage == SPARSE else _U32_MAX
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


def _error(path: str, message: str, offset: int, chunk: Optional[int] = None) -> CBFError:
    """A CBFError naming the file, the chunk (when inside one) and the byte offset."""
    where = "" if chunk is None else f"chunk {chunk}: "
    return CBFError(where + message, path=path, offset=offset)


def _check_count_bytes(path: str, index: int, offset: int, num_sequences: int,
                       size: int) -> None:
    """A chunk starts with one uint32 sample count per sequence: a chunk table entry whose
    sequences' counts would not fit in the chunk's ``size`` bytes is damaged."""
    if 4 * num_sequences > size:
        raise _error(path, f"{num_sequences} sequence sample counts need {4 * num_sequences} "
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
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        minimum = PREFIX.size + HEADER_HEAD.size + TRAILER.size
        if size < minimum:
            raise _error(path, f"file is {size} bytes, shorter than the {minimum} bytes of an "
                         f"empty CBF file (truncated or not CBF)", 0)
        magic, version = PREFIX.unpack(f.read(PREFIX.size))
        if magic != CBF_MAGIC:
            raise _error(path, f"bad magic 0x{magic:016x}, expected 0x{CBF_MAGIC:016x}: "
                         f"not a CNTK Binary Format file", 0)
        if version != VERSION:
            raise _error(path, f"unsupported CBF version {version}; only version {VERSION} "
                         f"is defined", 8)
        f.seek(size - TRAILER.size)
        (header_offset,) = TRAILER.unpack(f.read(TRAILER.size))
        last = size - TRAILER.size - HEADER_HEAD.size
        if not PREFIX.size <= header_offset <= last:
            raise _error(path, f"header offset {header_offset} is outside [{PREFIX.size}, "
                         f"{last}] (file truncated or trailer damaged)", size - TRAILER.size)
        f.seek(header_offset)
        head = f.read(HEADER_HEAD.size)
        sentinel = HEADER_HEAD.unpack(head)[0]
        if sentinel != CBF_MAGIC:
            raise _error(path, f"header sentinel 0x{sentinel:016x} at the header offset is not "
                         f"the magic 0x{CBF_MAGIC:016x} (header offset wrong or file truncated)",
                         header_offset)
        header = head + f.read(size - TRAILER.size - header_offset - HEADER_HEAD.size)
    return version, header, header_offset, size


def _need(path: str, header: bytes, header_offset: int, pos: int, n: int, what: str) -> None:
    """Refuse a header that ends before the ``n`` bytes of ``what`` starting at ``pos``."""
    if pos + n > len(header):
        raise _error(path, f"header ends inside {what} (needs {n} bytes, "
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
            raise _error(path, f"stream {i}: storage type {storage} is neither 0 (dense) "
                         f"nor 1 (sparse)", at)
        if elem > 1:
            raise _error(path, f"stream {i}: element type {elem} is neither 0 (float32) "
                         f"nor 1 (float64)", at)
        try:
            name = raw_name.decode("ascii")
            info = StreamInfo(name, (DENSE, SPARSE)[storage], _ELEM_DTYPES[elem], dim)
        except (UnicodeDecodeError, ValueError) as exc:
            raise _error(path, f"stream {i}: invalid description ({exc})", at) from None
        if any(s.name == name for s in streams):
            raise _error(path, f"stream name {name!r} appears twice", at)
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
        raise _error(path, f"{len(header) - pos} unexpected bytes between the chunk table and "
                     f"the trailer", header_offset + pos)
    offsets = table["offset"].tolist()
    ends = offsets[1:] + [header_offset]
    for i, start in enumerate(offsets):
        if not PREFIX.size <= start <= header_offset:
            raise _error(path, f"chunk {i} offset {start} is out of range: chunks lie in "
                         f"[{PREFIX.size}, {header_offset}] (prefix end to header start)",
                         table_at + i * CHUNK_ENTRY.size)
    seqs = table["seqs"].tolist()
    chunks: List[ChunkInfo] = []
    for i, (start, end) in enumerate(zip(offsets, ends)):
        if start > end:
            raise _error(path, f"chunk {i} offset {start} is past the next chunk's offset "
                         f"{end}: chunk offsets must not decrease",
                         table_at + i * CHUNK_ENTRY.size)
        _check_count_bytes(path, i, start, seqs[i], end - start)
        chunks.append(ChunkInfo(i, start, end - start, seqs[i], int(table["samples"][i])))
    return chunks


class CBFReader:
    """Reads a CBF file a chunk at a time; yields sequences as dicts of NumPy arrays.

    Dense streams give read-only ``(N, sample_dim)`` views over the chunk; sparse streams give
    :class:`recio.sequence.Sparse` (or dense arrays with ``densify=True``). ``alias`` renames
    streams as CNTK's reader does: ``{"new_name": "name_in_file"}``. ``keep_data_in_memory``
    caches decoded chunks (CNTK's ``keepDataInMemory``). The reader is a chunked corpus for
    :class:`recio.MinibatchSource`, its chunks being the randomization chunks; see
    :func:`recio.sequence.minibatch.cbf_minibatch_source` for CNTK's parameter names.
    ``per_stream_counts=True`` makes ``chunk_sample_counts`` give each stream's N (decoding the
    chunk) so ``defines_mb_size`` works; by default it gives the one meta count per sequence
    stored in the file, as CNTK does.
    """

    def __init__(self, path: PathLike, alias: Optional[Mapping[str, str]] = None,
                 densify: bool = False, keep_data_in_memory: bool = False,
                 per_stream_counts: bool = False) -> None:
        self.path = os.fspath(path)
        (self.version, file_streams, self.chunks, self.header_offset,
         self.size) = read_header(self.path)
        self._file_streams = file_streams
        renames = {}
        for new, old in (alias or {}).items():
            if not any(s.name == old for s in file_streams):
                raise ValueError(f"alias {new!r} -> {old!r}: {self.path} has no stream {old!r} "
                                 f"(streams: {', '.join(s.name for s in file_streams)})")
            renames[old] = new
        self.streams: List[StreamInfo] = [
            StreamInfo(renames.get(s.name, s.name), s.storage, s.dtype, s.sample_dim)
            for s in file_streams]
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ValueError(f"alias {dict(alias or {})} gives two streams the same name")
        self.densify = densify
        self.keep_data_in_memory = keep_data_in_memory
        self.per_stream_counts = per_stream_counts
        # chunk index -> (meta counts, sequences); only with keep_data_in_memory
        self._cache: Dict[int, Tuple[np.ndarray, List[SequenceDict]]] = {}

    # ---- description -------------------------------------------------------------------
    @property
    def num_chunks(self) -> int:
        """Number of chunks in the file."""
        return len(self.chunks)

    @property
    def num_sequences(self) -> int:
        """Number of sequences, from the chunk table."""
        return sum(c.num_sequences for c in self.chunks)

    @property
    def num_samples(self) -> int:
        """Number of (meta) samples, from the chunk table."""
        return sum(c.num_samples for c in self.chunks)

    @property
    def stream_names(self) -> List[str]:
        """Names of the streams (after ``alias``), in file order."""
        return [s.name for s in self.streams]

    def describe(self) -> Dict[str, Any]:
        """A JSON-ready summary: version, streams and the chunk table."""
        return {
            "path": self.path, "version": self.version, "size": self.size,
            "header_offset": self.header_offset,
            "streams": [{"name": s.name, "storage": s.storage, "dtype": s.dtype.name,
                         "sample_dim": s.sample_dim} for s in self.streams],
            "chunks": [[c.offset, c.num_sequences, c.num_samples] for c in self.chunks],
            "num_sequences": self.num_sequences, "num_samples": self.num_samples,
        }

    def __repr__(self) -> str:
        kinds = ", ".join(f"{s.name}:{s.storage}[{s.sample_dim}]" for s in self.streams)
        return (f"CBFReader({self.path!r}, {self.num_chunks} chunks, "
                f"{self.num_sequences} sequences, streams {kinds})")

    # ---- reading -----------------------------------------------------------------------
    def _read_bytes(self, offset: int, size: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read(size)
        if len(data) != size:
            raise _error(self.path, f"file ends after {len(data)} of {size} bytes "
                         f"(truncated since it was opened)", offset + len(data))
        return data

    def _chunk(self, index: int) -> ChunkInfo:
        index = int(index)
        if not 0 <= index < len(self.chunks):
            raise IndexError(f"chunk {index} out of range: {self.path} has "
                             f"{len(self.chunks)} chunks")
        return self.chunks[index]

    def read_chunk_bytes(self, index: int) -> bytes:
        """The raw bytes of chunk ``index`` (one read)."""
        info = self._chunk(index)
        return self._read_bytes(info.offset, info.size)

    def _decoded(self, index: int) -> Tuple[np.ndarray, List[SequenceDict]]:
        info = self._chunk(index)
        cached = self._cache.get(info.index)
        if cached is not None:
            return cached
        result = decode_chunk(self.read_chunk_bytes(info.index), info, self.streams,
                              self.path, densify=self.densify)
        if self.keep_data_in_memory:
            self._cache[info.index] = result
        return result

    def read_chunk(self, index: int) -> List[SequenceDict]:
        """Decode chunk ``index`` into a list of sequences (dicts stream name -> data).

        The dicts hold exactly the streams; the meta sample count CNTK stores with each
        sequence comes from :meth:`chunk_sample_counts` or :meth:`sequences_with_counts`.
        """
        return self._decoded(index)[1]

    def chunk_sample_counts(self, index: int) -> np.ndarray:
        """Samples of each sequence of chunk ``index``: the stored meta counts, shape ``(S,)``
        (reads only 4*S bytes); with ``per_stream_counts`` each stream's N, shape ``(S, I)``."""
        info = self._chunk(index)
        if self.per_stream_counts:
            seqs = self._decoded(index)[1]
            out = np.zeros((len(seqs), len(self.streams)), dtype=np.int64)
            for row, seq in enumerate(seqs):
                out[row] = [_stream_samples(seq[name]) for name in self.stream_names]
            return out
        if info.index in self._cache:
            return self._cache[info.index][0]
        _check_count_bytes(self.path, info.index, info.offset, info.num_sequences, info.size)
        return np.frombuffer(self._read_bytes(info.offset, 4 * info.num_sequences),
                             dtype=_COUNT_DTYPE)

    def __iter__(self) -> Iterator[SequenceDict]:
        """Every sequence, chunk by chunk, in file order."""
        for i in range(len(self.chunks)):
            yield from self.read_chunk(i)

    def sequences_with_counts(self) -> Iterator[Tuple[int, SequenceDict]]:
        """``(meta sample count, sequence)`` for every sequence, in file order."""
        for i in range(len(self.chunks)):
            counts, seqs = self._decoded(i)
            yield from zip(counts.tolist(), seqs)

    def __len__(self) -> int:
        return self.num_sequences

    def validate(self) -> int:
        """Decode every chunk, raising CBFError at the first problem; returns the sequence count."""
        return sum(len(self._decoded(i)[1]) for i in range(len(self.chunks)))

    def close(self) -> None:
        """Drop cached chunks (no file stays open between reads)."""
        self._cache.clear()

    def __enter__(self) -> "CBFReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _stream_samples(data: Any) -> int:
    return data.num_samples if isinstance(data, Sparse) else len(data)


def decode_chunk(buf: bytes, info: ChunkInfo, streams: Sequence[StreamInfo], path: str,
                 densify: bool = False) -> Tuple[np.ndarray, List[SequenceDict]]:
    """Decode one chunk's bytes: ``(meta sample counts, list of sequence dicts)``.

    Arrays are views over ``buf`` (read-only when ``buf`` is bytes), sliced from one
    ``frombuffer`` per element type and phase (every field is 4-byte aligned). Every count
    is checked against the chunk's end; sparse indices and per-sample counts are checked for the
    whole stream at once, and the streams must fill the chunk exactly. Sparse streams come
    back as :class:`recio.sequence.Sparse` (dense arrays with ``densify``).
    """
    S = info.num_sequences
    end = len(buf)
    base = info.offset
    _check_count_bytes(path, info.index, base, S, end)
    counts = np.frombuffer(buf, dtype=_COUNT_DTYPE, count=S)
    if int(counts.sum(dtype=np.uint64)) != info.num_samples:
        raise _error(path, f"sequence sample counts add up to {int(counts.sum())} but the chunk "
                     f"table says {info.num_samples}", base, info.index)
    seqs: List[SequenceDict] = [{} for _ in range(S)]
    pos = 4 * S
    for stream in streams:
        if stream.is_sparse:
            pos = _decode_sparse_stream(buf, pos, info, stream, path, seqs)
            if densify:
                _densify(seqs, stream.name, path, info)
        else:
            pos = _decode_dense_stream(buf, pos, info, stream, path, seqs)
    if pos != end:
        raise _error(path, f"{end - pos} bytes follow the last stream's data of the chunk's {S} "
                     f"sequences; the chunk table or a sample count is wrong", base + pos,
                     info.index)
    return counts, seqs


def _decode_dense_stream(buf: bytes, pos: int, info: ChunkInfo, stream: StreamInfo, path: str,
                         seqs: List[SequenceDict]) -> int:
    """Put one dense stream of every sequence of the chunk (``N | values``, from byte ``pos``)
    into ``seqs`` as ``(N, dim)`` views; returns the byte after the stream."""
    name, dim, end = stream.name, stream.sample_dim, len(buf)
    even, odd, shift = _typed_views(buf, stream.dtype)
    unpack_dense = DENSE_HEAD.unpack_from
    row = dim * stream.dtype.itemsize
    for s in range(len(seqs)):
        if pos + 4 > end:
            raise _overrun(path, info, stream, s, pos, 4, end)
        (n,) = unpack_dense(buf, pos)
        pos += 4
        nbytes = n * row
        if pos + nbytes > end:
            raise _overrun(path, info, stream, s, pos - 4, 4 + nbytes, end,
                           f"{n} samples of dim {dim} ")
        at = pos >> shift
        seqs[s][name] = (odd if pos & 4 else even)[at:at + n * dim].reshape(n, dim)
        pos += nbytes
    return pos


def _decode_sparse_stream(buf: bytes, pos: int, info: ChunkInfo, stream: StreamInfo, path: str,
                          seqs: List[SequenceDict]) -> int:
    """Put one sparse stream of every sequence of the chunk (``N | nnz | values | indices |
    counts``, from byte ``pos``) into ``seqs`` as :class:`Sparse`; returns the byte after it.

    Sizes are checked sequence by sequence as the stream is walked; indices and per-sample
    counts are checked for the whole stream at once (``_check_sparse``), which also gives the
    running count total every sequence's ``indptr`` is cut from.
    """
    name, dim, end = stream.name, stream.sample_dim, len(buf)
    item = stream.dtype.itemsize
    even, odd, shift = _typed_views(buf, stream.dtype)
    ints = _typed_views(buf, _INDEX_DTYPE)[0]
    unpack_sparse = SPARSE_HEAD.unpack_from
    runs: List[Tuple[int, int, int]] = []     # (byte of the head, N, nnz) per sequence
    value_views: List[np.ndarray] = []
    index_views: List[np.ndarray] = []
    count_views: List[np.ndarray] = []
    for s in range(len(seqs)):
        if pos + 8 > end:
            raise _overrun(path, info, stream, s, pos, 8, end)
        n, nnz = unpack_sparse(buf, pos)
        if nnz < 0:
            raise _error(path, f"stream {name!r} sequence {s}: negative nnz {nnz}",
                         info.offset + pos + 4, info.index)
        nbytes = 8 + nnz * (item + 4) + 4 * n
        if pos + nbytes > end:
            raise _overrun(path, info, stream, s, pos, nbytes, end,
                           f"{n} samples with nnz {nnz} ")
        runs.append((pos, n, nnz))
        at = pos + 8
        value_views.append((odd if at & 4 else even)[at >> shift:(at >> shift) + nnz])
        at = (at + nnz * item) >> 2
        index_views.append(ints[at:at + nnz])
        count_views.append(ints[at + nnz:at + nnz + n])
        pos += nbytes
    if runs:
        cum = _check_sparse(path, info, stream, runs, index_views, count_views)
        make = tuple.__new__                      # Sparse without its Python-level __new__
        for s, indptr in enumerate(_indptrs(cum, [n for _, n, _ in runs])):
            seqs[s][name] = make(Sparse, (indptr, index_views[s], value_views[s], dim))
    return pos


def _indptrs(cum: np.ndarray, sizes: List[int]) -> List[np.ndarray]:
    """Each sequence's ``indptr`` (starting at 0) from the running total ``cum`` of the
    per-sample counts of all the stream's sequences (``sizes``: samples of each), made with
    one vectorised subtraction for the whole stream and then sliced."""
    n = np.asarray(sizes, dtype=np.int64)
    first = np.cumsum(n) - n                          # index in cum of each sequence's start
    seq_of = np.repeat(np.arange(len(n)), n + 1)       # which sequence each entry belongs to
    local = cum[np.arange(len(seq_of)) - seq_of] - np.repeat(cum[first], n + 1)
    starts = (first + np.arange(len(n))).tolist()
    return [local[a:a + k + 1] for a, k in zip(starts, sizes)]


def _densify(seqs: List[SequenceDict], name: str, path: str, info: ChunkInfo) -> None:
    """Replace stream ``name`` of every sequence by its dense ``(N, dim)`` array (refused past
    ``recio.sequence.MAX_DENSE_BYTES``, as a CBFError naming the chunk)."""
    for seq in seqs:
        try:
            seq[name] = seq[name].to_dense()
        except SequenceError as exc:
            raise _error(path, f"stream {name!r}: {exc.message}", info.offset,
                         info.index) from None


def _typed_views(buf: Any, dtype: np.dtype) -> Tuple[np.ndarray, np.ndarray, int]:
    """Views of ``buf`` as ``dtype`` starting at byte 0 and at byte 4, and log2 of the item size:
    a field at byte ``pos`` (a multiple of 4) is ``views[pos & 4][pos >> shift:]``."""
    item = dtype.itemsize
    shift = item.bit_length() - 1

    def view(phase: int) -> np.ndarray:
        count = (len(buf) - phase) // item
        return np.frombuffer(buf, dtype=dtype, offset=phase, count=count) if count > 0 else \
            np.zeros(0, dtype)

    at0 = view(0)
    return at0, (at0 if item == 4 else view(4)), shift


def _overrun(path: str, info: ChunkInfo, stream: StreamInfo, s: int, pos: int, need: int,
             end: int, what: str = "") -> CBFError:
    return _error(path, f"stream {stream.name!r} sequence {s}: {what}needs {need} bytes but "
                  f"only {end - pos} remain in the chunk ({info.size} bytes); counts overrun "
                  f"the chunk", info.offset + pos, info.index)


def _check_sparse(path: str, info: ChunkInfo, stream: StreamInfo,
                  runs: List[Tuple[int, int, int]], index_views: List[np.ndarray],
                  count_views: List[np.ndarray]) -> np.ndarray:
    """Vectorised checks of one sparse stream in a chunk (``runs`` not empty): every index in
    ``[0, sample_dim)``, per-sample counts >= 0 and adding up to the sequence's nnz. Returns the
    running total of all the per-sample counts (int64, one longer, starting at 0)."""
    dim = stream.sample_dim
    table = np.array(runs, dtype=np.int64).reshape(len(runs), 3)
    head, n, nnz = table[:, 0], table[:, 1], table[:, 2]
    index_start = head + 8 + nnz * stream.dtype.itemsize        # byte of each index run
    out_of_range = np.concatenate(index_views).view("<u4") >= dim  # negatives wrap up
    if out_of_range.any():
        k = int(np.flatnonzero(out_of_range)[0])
        ends = np.cumsum(nnz)
        s = int(np.searchsorted(ends, k, side="right"))
        within = k - int(ends[s] - nnz[s])
        raise _error(path, f"stream {stream.name!r} sequence {s}: index "
                     f"{int(index_views[s][within])} is outside [0, {dim}) (sample dim)",
                     info.offset + int(index_start[s]) + 4 * within, info.index)
    per_sample = np.concatenate(count_views)
    cum = np.zeros(len(per_sample) + 1, dtype=np.int64)
    np.cumsum(per_sample, out=cum[1:])
    ends = np.cumsum(n)
    wrong = cum[ends] - cum[ends - n] != nnz
    if per_sample.size and int(per_sample.min()) < 0:
        first_negative = int(np.flatnonzero(per_sample < 0)[0])
        wrong[int(np.searchsorted(ends, first_negative, side="right"))] = True
    if wrong.any():
        s = int(np.flatnonzero(wrong)[0])
        raise _error(path, f"stream {stream.name!r} sequence {s}: per-sample counts "
                     f"{count_views[s].tolist()[:8]} do not add up to nnz {int(nnz[s])} (or "
                     f"are negative)", info.offset + int(index_start[s] + 4 * nnz[s]),
                     info.index)
    return cum


def encode_dense(stream: StreamInfo, data: Any) -> bytes:
    """Encode one dense sequence ``(N, dim)`` (``(N,)`` allowed when dim is 1)."""
    arr = np.asarray(data)
    if arr.ndim == 1 and stream.sample_dim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] != stream.sample_dim:
        raise ValueError(f"stream {stream.name!r}: a dense sequence must have shape "
                         f"(N, {stream.sample_dim}), not {arr.shape}")
    if arr.shape[0] > _U32_MAX:
        raise ValueError(f"stream {stream.name!r}: {arr.shape[0]} samples exceed the uint32 "
                         f"sample count")
    # arrays are buffers: NumPy's stubs declare __buffer__ for Python 3.12+ only
    return b"".join((DENSE_HEAD.pack(arr.shape[0]),  # type: ignore[arg-type]
                     np.ascontiguousarray(arr, dtype=stream.dtype)))


def _as_sparse(stream: StreamInfo, data: Any) -> Sparse:
    """A checked :class:`recio.sequence.Sparse` for ``stream`` from a ``Sparse``, a
    ``(values, indices, counts)`` tuple (CBF's on-disk order), a scipy sparse matrix or a dense
    ``(N, dim)`` array: values in the stream's dtype, int32 indices in ``[0, sample_dim)``,
    ``indptr`` starting at 0 and never decreasing. Raises ValueError."""
    name = stream.name
    if isinstance(data, Sparse):
        seq = data
    elif hasattr(data, "tocsr"):  # scipy.sparse, without importing scipy
        csr = data.tocsr()
        seq = Sparse(csr.indptr, csr.indices, csr.data, csr.shape[1])
    elif isinstance(data, tuple) and len(data) == 3:
        seq = Sparse.from_counts(data[2], data[1], data[0], stream.sample_dim)
    else:
        dense = np.asarray(data)
        if dense.ndim != 2:
            raise ValueError(f"stream {name!r}: a dense sequence must be 2-D (N, dim), not "
                             f"shape {dense.shape}")
        seq = Sparse.from_dense(dense)
    values = np.asarray(seq.values, dtype=stream.dtype).reshape(-1)
    indices = np.asarray(seq.indices).reshape(-1)
    indptr = np.asarray(seq.indptr).reshape(-1)
    if int(seq.dim) != stream.sample_dim:
        raise ValueError(f"stream {name!r}: sparse data of dim {seq.dim}, "
                         f"expected {stream.sample_dim}")
    if len(values) != len(indices):
        raise ValueError(f"stream {name!r}: {len(values)} values but {len(indices)} indices")
    if len(values) > _I32_MAX or len(indptr) - 1 > _U32_MAX:
        raise ValueError(f"stream {name!r}: nnz {len(values)} exceeds int32")
    if indices.size and (indices.min() < 0 or indices.max() >= stream.sample_dim):
        raise ValueError(f"stream {name!r}: indices must be in [0, {stream.sample_dim})")
    if len(indptr) == 0 or indptr[0] != 0:
        raise ValueError(f"stream {name!r}: indptr must start with 0")
    if len(indptr) > 1 and np.any(indptr[1:] < indptr[:-1]):
        raise ValueError(f"stream {name!r}: per-sample counts must be >= 0 (indptr must never "
                         f"decrease)")
    if int(indptr[-1]) != len(values):
        raise ValueError(f"stream {name!r}: per-sample counts add up to {int(indptr[-1])}, "
                         f"not nnz {len(values)}")
    return Sparse(indptr, indices.astype(_INDEX_DTYPE, copy=False), values, stream.sample_dim)


def encode_sparse(stream: StreamInfo, data: Any) -> bytes:
    """Encode one sparse sequence: ``N | nnz | values | indices | counts``."""
    seq = _as_sparse(stream, data)
    counts = np.diff(seq.indptr).astype(_INDEX_DTYPE)
    # arrays are buffers: NumPy's stubs declare __buffer__ for Python 3.12+ only
    return b"".join((SPARSE_HEAD.pack(len(counts), len(seq.values)),  # type: ignore[arg-type]
                     np.ascontiguousarray(seq.values), np.ascontiguousarray(seq.indices),
                     counts))


class CBFWriter(ManagedWriter):
    """Writes a version-1 CBF file atomically (temporary name, renamed on ``close``).

    The lifecycle is ``recio.records.atomic.ManagedWriter``'s: ``abort()`` (also ``discard()``), an
    exception inside ``with``, or a writer dropped without ``close()`` leaves no file.
    ``fsync=True``: a returned ``close()`` survives an OS crash.

    ``streams``: StreamInfo objects or ``(name, storage, dtype, sample_dim)`` tuples.
    ``write(seq)`` takes a dict with every stream: dense ``(N, dim)`` arrays, sparse
    :class:`recio.sequence.Sparse` / ``(values, indices, counts)`` / scipy / dense arrays. A
    chunk is closed as soon as the next sequence would take it past ``chunk_size_bytes`` (a
    single larger sequence gets a chunk of its own), and the size count restarts for every
    chunk.
    """

    def __init__(self, path: PathLike, streams: Sequence[Any],
                 chunk_size_bytes: int = 32 << 20, *, fsync: bool = False) -> None:
        self.streams: List[StreamInfo] = [StreamInfo.coerce(s) for s in streams]
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ValueError(f"stream names must be unique, got {names}")
        chunk_size_bytes = int(chunk_size_bytes)
        if chunk_size_bytes < 1:
            raise ValueError(f"chunk_size_bytes must be >= 1, got {chunk_size_bytes}")
        self.chunk_size_bytes = chunk_size_bytes
        self.path = os.fspath(path)
        self.chunks: List[ChunkInfo] = []
        self.num_sequences = 0
        self._pieces: List[List[bytes]] = [[] for _ in self.streams]
        self._meta: List[int] = []
        self._chunk_bytes = 0
        self._chunk_samples = 0
        outputs = OutputSet.create([(self.path, "wb", -1)], fsync=fsync)
        self._file = outputs.files[0].file
        try:
            self._file.write(PREFIX.pack(CBF_MAGIC, VERSION))
        except BaseException:
            outputs.discard()
            raise
        self._pos = PREFIX.size
        self._begin(outputs, f"CBFWriter({self.path!r})")

    def write(self, sequence: Mapping[str, Any], num_samples: Optional[int] = None) -> None:
        """Add one sequence; ``num_samples`` (meta) defaults to the largest stream's N."""
        if self.closed:
            raise ValueError("write to a closed CBFWriter")
        extra = set(sequence) - {s.name for s in self.streams}
        if extra:
            raise ValueError(f"unknown stream(s) {sorted(extra)}; the file has "
                             f"{[s.name for s in self.streams]}")
        encoded = []
        most = 0
        for stream in self.streams:
            if stream.name not in sequence:
                raise ValueError(f"sequence has no data for stream {stream.name!r}")
            data = sequence[stream.name]
            blob = (encode_sparse if stream.is_sparse else encode_dense)(stream, data)
            most = max(most, DENSE_HEAD.unpack_from(blob, 0)[0])
            encoded.append(blob)
        samples = most if num_samples is None else int(num_samples)
        if not 0 <= samples <= _U32_MAX:
            raise ValueError(f"num_samples {samples} must fit in uint32")
        size = 4 + sum(len(b) for b in encoded)
        if self._meta and (self._chunk_bytes + size > self.chunk_size_bytes
                           or self._chunk_samples + samples > _U32_MAX
                           or len(self._meta) >= _U32_MAX):
            self.end_chunk()
        self._meta.append(samples)
        for pieces, blob in zip(self._pieces, encoded):
            pieces.append(blob)
        self._chunk_bytes += size
        self._chunk_samples += samples
        self.num_sequences += 1
        if self._chunk_bytes >= self.chunk_size_bytes:
            self.end_chunk()

    def tell(self) -> int:
        """Size of the file so far, counting the open chunk but not the header to come."""
        return self._pos + self._chunk_bytes

    def end_chunk(self) -> None:
        """Write the sequences gathered so far as one chunk (no-op when there are none)."""
        if not self._meta:
            return
        f = self._file
        f.write(np.asarray(self._meta, dtype=_COUNT_DTYPE).tobytes())
        for pieces in self._pieces:
            f.writelines(pieces)
            pieces.clear()
        self.chunks.append(ChunkInfo(len(self.chunks), self._pos, self._chunk_bytes,
                                     len(self._meta), self._chunk_samples))
        self._pos += self._chunk_bytes
        self._meta = []
        self._chunk_bytes = 0
        self._chunk_samples = 0

    def _finish(self) -> None:
        self.end_chunk()
        parts = [HEADER_HEAD.pack(CBF_MAGIC, len(self.chunks), len(self.streams))]
        for s in self.streams:
            name = s.name.encode("ascii")
            parts.append(STREAM_STORAGE.pack(_STORAGE_CODES[s.storage], len(name)))
            parts.append(name)
            parts.append(STREAM_TAIL.pack(_ELEM_DTYPES.index(s.dtype), s.sample_dim))
        parts.extend(CHUNK_ENTRY.pack(c.offset, c.num_sequences, c.num_samples)
                     for c in self.chunks)
        parts.append(TRAILER.pack(self._pos))
        self._file.write(b"".join(parts))

    def close(self) -> List[ChunkInfo]:
        """Write the last chunk and the header, then rename into place; returns the chunks."""
        super().close()
        return self.chunks

    def discard(self) -> None:
        """Abandon the file: nothing appears under ``path`` (same as ``abort()``)."""
        self.abort()


__all__ = ["CBFReader", "CBFWriter", "StreamInfo", "ChunkInfo", "CBF_MAGIC", "read_header",
           "encode_dense", "encode_sparse", "DENSE", "SPARSE"]
