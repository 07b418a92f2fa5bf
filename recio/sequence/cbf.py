"""CNTK Binary Format (CBF, version 1): a chunked reader and an atomic writer.

The layout and the header check are :mod:`recio.sequence.cbf_format`'s, the decoding of a
chunk :mod:`recio.sequence.cbf_decode`'s.

:class:`CBFReader` validates the prefix, header and chunk table when opened, then reads one chunk
at a time (``read_chunk``) and decodes it with NumPy views over the chunk buffer. It is also a
*chunked corpus* for :class:`recio.MinibatchSource`: ``num_chunks``, ``chunk_sample_counts(i)``
and ``read_chunk(i)``. :class:`CBFWriter` writes version-1 files, closing a chunk when it
reaches ``chunk_size_bytes`` (CNTK's ``ctf2bin.py`` never resets its size estimate after the
first chunk, so every later chunk holds one sequence; this writer restarts it per chunk).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from recio.records.atomic import ManagedWriter, OutputSet
from recio.records.closed import check_open
from recio.records.write_errors import write_failed
from recio.sequence.cbf_decode import decode_chunk
from recio.sequence.cbf_format import (
    CBF_MAGIC,
    CHUNK_ENTRY,
    COUNT_DTYPE,
    DENSE_HEAD,
    ELEM_DTYPES,
    HEADER_HEAD,
    I32_MAX,
    INDEX_DTYPE,
    PREFIX,
    SPARSE_HEAD,
    STORAGE_CODES,
    STREAM_STORAGE,
    STREAM_TAIL,
    TRAILER,
    U32_MAX,
    VERSION,
    ChunkInfo,
    PathLike,
    SequenceDict,
    StreamInfo,
    cbf_error,
    check_count_bytes,
    read_header,
)
from recio.sequence.records import Sparse
from recio.storage import open_regular


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
    #: set by ``close()``: every later read raises ``ClosedError``
    _closed = False

    def _read_bytes(self, offset: int, size: int) -> bytes:
        check_open(self._closed, "CBFReader", self.path)
        with open_regular(self.path) as f:
            f.seek(offset)
            data = f.read(size)
        if len(data) != size:
            raise cbf_error(self.path, f"file ends after {len(data)} of {size} bytes "
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
        check_count_bytes(self.path, info.index, info.offset, info.num_sequences, info.size)
        return np.frombuffer(self._read_bytes(info.offset, 4 * info.num_sequences),
                             dtype=COUNT_DTYPE)

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
        check_open(self._closed, "CBFReader", self.path)
        return self.num_sequences

    def validate(self) -> int:
        """Decode every chunk, raising CBFError at the first problem; returns the sequence count."""
        return sum(len(self._decoded(i)[1]) for i in range(len(self.chunks)))

    def close(self) -> None:
        """Drop cached chunks (no file stays open between reads); any later read raises
        ``ClosedError``."""
        self._cache.clear()
        self._closed = True

    def __getstate__(self) -> Dict[str, Any]:
        check_open(self._closed, "CBFReader", self.path)
        return dict(self.__dict__)

    def __enter__(self) -> "CBFReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _stream_samples(data: Any) -> int:
    return data.num_samples if isinstance(data, Sparse) else len(data)


def encode_dense(stream: StreamInfo, data: Any) -> bytes:
    """Encode one dense sequence ``(N, dim)`` (``(N,)`` allowed when dim is 1)."""
    arr = np.asarray(data)
    if arr.ndim == 1 and stream.sample_dim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] != stream.sample_dim:
        raise ValueError(f"stream {stream.name!r}: a dense sequence must have shape "
                         f"(N, {stream.sample_dim}), not {arr.shape}")
    if arr.shape[0] > U32_MAX:
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
    if len(values) > I32_MAX or len(indptr) - 1 > U32_MAX:
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
    return Sparse(indptr, indices.astype(INDEX_DTYPE, copy=False), values, stream.sample_dim)


def encode_sparse(stream: StreamInfo, data: Any) -> bytes:
    """Encode one sparse sequence: ``N | nnz | values | indices | counts``."""
    seq = _as_sparse(stream, data)
    counts = np.diff(seq.indptr).astype(INDEX_DTYPE)
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
        check_open(self.closed, "writer", self.path)
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
        if not 0 <= samples <= U32_MAX:
            raise ValueError(f"num_samples {samples} must fit in uint32")
        size = 4 + sum(len(b) for b in encoded)
        if self._meta and (self._chunk_bytes + size > self.chunk_size_bytes
                           or self._chunk_samples + samples > U32_MAX
                           or len(self._meta) >= U32_MAX):
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
        check_open(self.closed, "writer", self.path)
        return self._pos + self._chunk_bytes

    def end_chunk(self) -> None:
        """Write the sequences gathered so far as one chunk (no-op when there are none)."""
        check_open(self.closed, "writer", self.path)
        if not self._meta:
            return
        f = self._file
        try:
            f.write(np.asarray(self._meta, dtype=COUNT_DTYPE).tobytes())
            for pieces in self._pieces:
                f.writelines(pieces)
                pieces.clear()
        except OSError as exc:  # a full disk: the writer is aborted, its file deleted
            self.abort()
            raise write_failed(exc, self.path) from exc
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
            parts.append(STREAM_STORAGE.pack(STORAGE_CODES[s.storage], len(name)))
            parts.append(name)
            parts.append(STREAM_TAIL.pack(ELEM_DTYPES.index(s.dtype), s.sample_dim))
        parts.extend(CHUNK_ENTRY.pack(c.offset, c.num_sequences, c.num_samples)
                     for c in self.chunks)
        parts.append(TRAILER.pack(self._pos))
        try:
            self._file.write(b"".join(parts))
        except OSError as exc:  # a full disk (close() then deletes the file)
            raise write_failed(exc, self.path) from exc

    def close(self) -> List[ChunkInfo]:
        """Write the last chunk and the header, then rename into place; returns the chunks."""
        super().close()
        return self.chunks

    def discard(self) -> None:
        """Abandon the file: nothing appears under ``path`` (same as ``abort()``)."""
        self.abort()
