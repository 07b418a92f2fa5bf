"""Sequence records: one sequence with several named streams in one RecordIO record payload.

A *sequence* is a dict ``{stream name: data}``; each stream holds ``N`` samples (N may differ
between streams, e.g. 40 feature frames and 1 label). A stream is either

- **dense**: a NumPy array ``N x dim`` (or 1-D ``N``) of float32, float64, float16, int8/16/32/64
  or uint8/16/32/64; or
- **sparse**: :class:`Sparse` (CSR-like: ``indptr`` of N+1 int64, ``indices`` int32, ``values``,
  ``dim``), i.e. per-sample lists of (index, value) pairs.

Payload layout (all integers little-endian; sections start at multiples of 8 from the payload
start, gaps are zero bytes)::

    +---------+------------+--------------+
    | "RSEQ"  | u16 version| u16 nstreams |          8 bytes, version = 1
    +---------+------------+--------------+
    per stream, in order (20 bytes + name):
    +---------+----------+----------+------------+---------+---------+---------+-------------+
    | u8 kind | u8 dtype | u8 flags | u8 namelen | u32 dim | u32 N   | u64 nnz | name (utf8) |
    +---------+----------+----------+------------+---------+---------+---------+-------------+
      kind: 0 dense, 1 sparse   flags: bit 0 = dense array was 1-D   nnz: 0 for dense
    zero pad to a multiple of 8
    per stream, in the same order, each section padded to a multiple of 8:
      dense : values[N * dim]                       (dtype)
      sparse: indptr[N + 1] (int64), indices[nnz] (int32), values[nnz] (dtype)

``unpack_sequence`` returns NumPy views into the record buffer (no copy; read-only when the
buffer is ``bytes``), after checking every count against the record's bytes and every sparse
stream's indptr and indices: a damaged record raises ``SequenceError``. The sample count of a
record (CNTK's definition: the largest stream, or the stream that ``defines_mb_size``) is kept
in a sidecar ``PREFIX.len`` beside ``PREFIX.idx`` so a reader can plan minibatches and sweeps
from the index alone::

    +------------+-------------+--------------+-----------+-------------+
    | "RECIOLEN" | u32 version | u32 nstreams | u64 nrecs | u64 recsize |   32 bytes, version = 1
    +------------+-------------+--------------+-----------+-------------+
    per stream: u16 namelen, name (utf8); zero pad to a multiple of 8
    u32 counts[nrecs][nstreams]            samples of each stream of each record, in index order

``recsize`` is the size of the ``.rec`` the sidecar describes, to catch a stale sidecar.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import SequenceError
from recio.records.atomic import ManagedWriter, OutputSet, atomic_open
from recio.records.diagnose import open_checked_index
from recio.records.index_format import format_index, sibling_index_path
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.writer import RecordWriter

Buffer = Union[bytes, bytearray, memoryview]
PathLike = Union[str, "os.PathLike[str]"]

SEQUENCE_MAGIC = b"RSEQ"
SEQUENCE_VERSION = 1
#: magic, version, number of streams
SEQUENCE_HEADER = struct.Struct("<4sHH")
#: kind, dtype code, flags, name length, dim, samples, nnz
STREAM_DESCRIPTOR = struct.Struct("<BBBBIIQ")

SIDECAR_MAGIC = b"RECIOLEN"
SIDECAR_VERSION = 1
#: magic, version, number of streams, number of records, size of the .rec
SIDECAR_HEADER = struct.Struct("<8sIIQQ")
_NAME_LEN = struct.Struct("<H")

#: stream kind codes in the stream table (``recio.sequence.cbf.DENSE``/``SPARSE`` are CBF's
#: storage names, a different thing)
KIND_DENSE, KIND_SPARSE = 0, 1
FLAG_1D = 1
MAX_STREAMS = 0xFFFF
MAX_SAMPLES = 0xFFFFFFFF

#: dtype code <-> little-endian NumPy dtype
DTYPES = ("<f4", "<f8", "<f2", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8")
_DTYPE_CODE = {np.dtype(d): i for i, d in enumerate(DTYPES)}
_DTYPE_OBJECTS = tuple(np.dtype(d) for d in DTYPES)
_NAMES: Dict[bytes, str] = {}  # decoded stream names (they repeat in every record)
_INDPTR = np.dtype("<i8")
_INDICES = np.dtype("<i4")
_UINDICES = np.dtype("<u4")


#: densifying a sparse stream into more bytes than this is refused: a damaged ``dim`` would
#: otherwise claim gigabytes from a few bytes of input. Raise it for a genuinely larger stream.
MAX_DENSE_BYTES = 1 << 31


def dense_size_problem(samples: int, dim: int, itemsize: int) -> Optional[str]:
    """Why a ``samples x dim`` dense array of ``itemsize``-byte values is refused, or None
    (the one rule for densifying sparse data, in sequences and CBF alike)."""
    need = int(samples) * int(dim) * int(itemsize)
    if need <= MAX_DENSE_BYTES:
        return None
    return (f"densifying {samples} samples of dimension {dim} would need {need:,} bytes, over "
            f"recio.sequence.MAX_DENSE_BYTES ({MAX_DENSE_BYTES:,}); the dimension may be "
            f"damaged, or keep the stream sparse (or raise the limit)")


class Sparse(NamedTuple):
    """A sparse stream (CSR-like): sample ``i`` has ``indices[indptr[i]:indptr[i+1]]``.

    recio's one sparse type: sequence records and CBF files both decode to it and both writers
    take it. ``counts`` (non-zeros per sample, CBF's on-disk form), ``nnz``, ``sample_dim`` and
    ``toarray`` are there for code written against the old ``recio.sequence.cbf.SparseSequence``;
    :meth:`from_counts` builds one from per-sample counts.
    """

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    dim: int

    @property
    def num_samples(self) -> int:
        """Number of samples (rows)."""
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        """Number of stored values."""
        return len(self.values)

    @property
    def counts(self) -> np.ndarray:
        """Non-zeros of each sample (length N): ``diff(indptr)``, as CBF stores them."""
        return np.diff(self.indptr)

    @property
    def sample_dim(self) -> int:
        """``dim`` under the name CBF's stream descriptions use."""
        return self.dim

    @classmethod
    def from_counts(cls, counts: Any, indices: Any, values: Any, dim: int) -> "Sparse":
        """Build from per-sample non-zero ``counts`` (CBF's form) instead of ``indptr``.

        The arrays are taken as given (no copy when they already are arrays); ``validate``
        checks them.
        """
        counts = np.asarray(counts).reshape(-1)
        indptr = np.zeros(len(counts) + 1, dtype=_INDPTR)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, np.asarray(indices), np.asarray(values), int(dim))

    @classmethod
    def from_dense(cls, array: Any, dtype: Any = None) -> "Sparse":
        """The non-zeros of a dense ``(N, dim)`` array, in row-major order."""
        array = np.asarray(array, dtype=dtype)
        if array.ndim != 2:
            raise SequenceError(f"a dense stream must be 2-D (N, dim) to become sparse, not "
                                f"shape {array.shape}")
        rows, cols = np.nonzero(array)
        counts = np.bincount(rows, minlength=array.shape[0])
        return cls.from_counts(counts, cols.astype(_INDICES), array[rows, cols], array.shape[1])

    @classmethod
    def from_lists(cls, samples: Iterable[Tuple[Sequence[int], Sequence[float]]], dim: int,
                   dtype="<f4") -> "Sparse":
        """Build from per-sample ``(indices, values)`` pairs."""
        idx: List[np.ndarray] = []
        val: List[np.ndarray] = []
        for i, v in samples:
            idx.append(np.asarray(i, dtype=_INDICES))
            val.append(np.asarray(v, dtype=dtype))
            if len(idx[-1]) != len(val[-1]):
                raise SequenceError(f"sparse sample {len(idx) - 1} has {len(idx[-1])} indices but "
                                    f"{len(val[-1])} values; give one value per index")
        indptr = np.zeros(len(idx) + 1, dtype=_INDPTR)
        np.cumsum([len(a) for a in idx], out=indptr[1:])
        indices = np.concatenate(idx) if idx else np.zeros(0, _INDICES)
        values = np.concatenate(val) if val else np.zeros(0, dtype)
        return cls(indptr, indices, values, int(dim))

    def validate(self, name: Optional[str] = None) -> "Sparse":
        """Check the CSR invariants and return ``self``; raises :class:`SequenceError`.

        ``indptr`` (N + 1 entries) starts at 0, never decreases and ends at ``len(indices) ==
        len(values)``; every index lies in ``[0, dim)``. :func:`unpack_sequence` checks every
        decoded stream with this, so ``to_dense`` and friends never see a broken one. ``name``
        (the stream's) goes into the error message.
        """
        indptr, indices = np.asarray(self.indptr), np.asarray(self.indices)
        n, nnz, dim = len(indptr) - 1, len(indices), int(self.dim)
        problem = None
        if n < 0 or len(self.values) != nnz:
            problem = (f"{len(indptr)} indptr entries, {nnz} indices and {len(self.values)} "
                       f"values; need N + 1 >= 1 indptr entries and one value per index")
        elif int(indptr[0]) != 0 or int(indptr[-1]) != nnz:
            problem = (f"indptr runs from {int(indptr[0])} to {int(indptr[-1])}; it must run "
                       f"from 0 to nnz = {nnz}")
        elif n > 1 and np.count_nonzero(indptr[1:] < indptr[:-1]):
            k = int(np.argmax(indptr[1:] < indptr[:-1]))
            a, b = int(indptr[k]), int(indptr[k + 1])
            problem = (f"indptr decreases from {a} to {b}: sample {k} would have {b - a} "
                       f"non-zeros")
        elif nnz:
            if indices.dtype == _INDICES:  # one pass: a negative int32 is >= 2**31 as uint32
                outside = dim <= 0 or int(indices.view(_UINDICES).max()) >= min(dim, 1 << 31)
            else:
                outside = dim <= 0 or int(indices.min()) < 0 or int(indices.max()) >= dim
            if outside:
                bad = int(np.argmax((indices < 0) | (indices >= dim)))
                problem = f"index {int(indices[bad])} (non-zero {bad}) lies outside [0, {dim})"
        if problem is not None:
            label = "sparse stream" if name is None else f"sparse stream {name!r}"
            raise SequenceError(f"{label}: {problem}")
        return self

    def to_dense(self) -> np.ndarray:
        """The ``N x dim`` dense array (duplicate indices add up); refused with
        ``SequenceError`` past ``MAX_DENSE_BYTES`` (see ``dense_size_problem``)."""
        self.validate()
        problem = dense_size_problem(self.num_samples, self.dim, self.values.dtype.itemsize)
        if problem is not None:
            raise SequenceError(problem)
        out = np.zeros((self.num_samples, self.dim), dtype=self.values.dtype)
        rows = np.repeat(np.arange(self.num_samples), np.diff(self.indptr))
        np.add.at(out, (rows, self.indices), self.values)
        return out

    def toarray(self) -> np.ndarray:
        """Same as :meth:`to_dense` (the name scipy and the old ``SparseSequence`` use)."""
        return self.to_dense()

    def to_sparse(self) -> "Sparse":
        """``self``: code written for the old ``SparseSequence`` converted with this."""
        return self


Stream = Union[np.ndarray, Sparse]


def _pad8(n: int) -> int:
    return -n & 7


def _dtype_code(dtype: np.dtype, name: str) -> int:
    code = _DTYPE_CODE.get(np.dtype(dtype).newbyteorder("<"))
    if code is None:
        raise SequenceError(f"stream {name!r} has dtype {np.dtype(dtype)}, which a sequence record "
                            f"cannot hold; use one of float16/32/64, int8..64 or uint8..64")
    return code


def _samples_of(data: Stream) -> int:
    return data.num_samples if isinstance(data, Sparse) else int(np.shape(data)[0])


#: what a stream holds besides its samples: (sparse?, dtype, dim, 1-D?). Every sequence of a
#: corpus must give each stream the same layout (CNTK's streams have one type and dimension)
Layout = Tuple[bool, np.dtype, int, bool]


def stream_layout(data: Stream) -> Layout:
    """The layout of a decoded (or to be packed) stream."""
    if isinstance(data, Sparse):
        return True, np.dtype(data.values.dtype), int(data.dim), False
    shape = np.shape(data)
    return False, np.asarray(data).dtype, int(shape[1]) if len(shape) > 1 else 1, len(shape) == 1


def sequence_layouts(buf: Buffer) -> Dict[str, Layout]:
    """``{stream: layout}`` of a packed sequence, from its stream table only (no sections
    decoded); ``SequenceError`` for a damaged table."""
    descriptors, _ = _parse_descriptors(buf)
    out = {name: (kind == KIND_SPARSE, dtype, int(dim), bool(flags & FLAG_1D))
           for name, kind, dtype, flags, dim, _, _ in descriptors}
    if len(out) != len(descriptors):
        raise _duplicate_name(descriptors)
    return out


def describe_layout(layout: Layout) -> str:
    """``"sparse float32 of dim 1000"``, ``"dense int64 (1-D)"``: a layout for messages."""
    sparse, dtype, dim, one_d = layout
    return (f"{'sparse' if sparse else 'dense'} {np.dtype(dtype).name}"
            + (" (1-D)" if one_d else f" of dim {dim}"))


def layout_mismatch(seq: Dict[str, Stream], expected: Dict[str, Layout],
                    reference: str) -> Optional[str]:
    """The first stream of ``seq`` whose layout differs from ``expected`` (the layouts of
    ``reference``, e.g. ``"record 0"``), as a phrase; None when all agree."""
    for name, data in seq.items():
        want = expected.get(name)
        got = stream_layout(data)
        if want is not None and got != want:
            return (f"stream {name!r} is {describe_layout(got)} where {reference} has "
                    f"{describe_layout(want)}")
    return None


def stream_sample_counts(seq: Dict[str, Stream]) -> Dict[str, int]:
    """``{stream: number of samples}`` of an unpacked sequence."""
    return {name: _samples_of(data) for name, data in seq.items()}


def pack_sequence(streams: Dict[str, Stream]) -> bytes:
    """Encode a sequence ``{name: dense array or Sparse}`` as a record payload (layout above)."""
    if not streams:
        raise SequenceError("a sequence needs at least one stream")
    if len(streams) > MAX_STREAMS:
        raise SequenceError(f"{len(streams)} streams; a sequence record holds at most "
                            f"{MAX_STREAMS}")
    encoded = [_stream_table_entry(name, data) for name, data in streams.items()]
    parts: List[Buffer] = [SEQUENCE_HEADER.pack(SEQUENCE_MAGIC, SEQUENCE_VERSION, len(streams))]
    parts.extend(descriptor for descriptor, _ in encoded)
    size = sum(len(p) for p in parts)
    parts.append(b"\0" * _pad8(size))
    size += _pad8(size)
    for _, arrays in encoded:
        for arr in arrays:
            # an array is a buffer: NumPy's stubs declare __buffer__ for Python 3.12+ only
            parts.append(arr.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
            size += arr.nbytes
            parts.append(b"\0" * _pad8(size))
            size += _pad8(size)
    return b"".join(parts)


def _stream_table_entry(name: str, data: Stream) -> Tuple[bytes, List[np.ndarray]]:
    """One stream's descriptor (with its name) and the arrays of its sections, checked.

    Everything a stream can get wrong is refused here, before any byte of the record is
    assembled, so ``pack_sequence`` never produces a record ``unpack_sequence`` would reject.
    """
    if not isinstance(name, str):
        raise SequenceError(f"stream name {name!r} is not a string")
    bname = name.encode("utf-8")
    if not 0 < len(bname) <= 255:
        raise SequenceError(f"stream name {name!r} must be 1..255 bytes of UTF-8")
    arrays: List[np.ndarray]
    if isinstance(data, Sparse):
        indptr = np.ascontiguousarray(data.indptr, dtype=_INDPTR)
        indices = np.ascontiguousarray(data.indices, dtype=_INDICES)
        values = np.ascontiguousarray(data.values)
        code = _dtype_code(values.dtype, name)
        values = values.astype(DTYPES[code], copy=False)
        n = len(indptr) - 1
        nnz = len(indices)
        if n < 0 or indptr[0] != 0 or indptr[-1] != nnz or len(values) != nnz \
                or (n and np.any(np.diff(indptr) < 0)):
            raise SequenceError(f"sparse stream {name!r}: indptr must start at 0, never "
                                f"decrease and end at len(indices) == len(values)")
        if nnz and (indices.min() < 0 or indices.max() >= data.dim):
            raise SequenceError(f"sparse stream {name!r}: an index lies outside "
                                f"0..{data.dim - 1} (dim={data.dim})")
        kind, flags, dim, arrays = KIND_SPARSE, 0, int(data.dim), [indptr, indices, values]
    else:
        arr = np.asarray(data)
        if arr.ndim not in (1, 2):
            raise SequenceError(f"dense stream {name!r} has shape {arr.shape}; give an "
                                f"N x dim (or 1-D N) array")
        code = _dtype_code(arr.dtype, name)
        flags = FLAG_1D if arr.ndim == 1 else 0
        dim = 1 if arr.ndim == 1 else arr.shape[1]
        n, nnz, kind = arr.shape[0], 0, KIND_DENSE
        arrays = [np.ascontiguousarray(arr, dtype=DTYPES[code])]
    if n > MAX_SAMPLES or dim > MAX_SAMPLES:
        raise SequenceError(f"stream {name!r}: {n} samples of dim {dim}; each must be < 2**32")
    descriptor = STREAM_DESCRIPTOR.pack(kind, code, flags, len(bname), dim, n, nnz) + bname
    return descriptor, arrays


def _stream_name(raw: bytes, at: int) -> str:
    """The stream name stored as ``raw`` at byte ``at`` of a record: 1..255 bytes of UTF-8."""
    name = _NAMES.get(raw)
    if name is not None:
        return name
    if not raw:
        raise SequenceError(f"stream at byte {at} of the record has an empty name")
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SequenceError(f"stream name {raw!r} at byte {at} of the record is not valid "
                            f"UTF-8") from None
    if len(_NAMES) < 4096:
        _NAMES[raw] = name
    return name


def _parse_descriptors(buf: Buffer):
    """``([(name, kind, dtype, flags, dim, n, nnz), ...], data start)`` of a sequence payload.

    Checks all that the stream table tells alone: magic and version, at least one stream, the
    table inside the record, known kinds, dtype codes and flags (1-D only for dense dim 1),
    nnz 0 for dense streams, names 1..255 bytes of valid UTF-8 (the callers check that they
    are unique, see :func:`_duplicate_name`). Does not look at the sections.
    """
    size = len(buf)
    if size < SEQUENCE_HEADER.size:
        raise SequenceError(f"sequence record of {size} bytes is shorter than its "
                            f"{SEQUENCE_HEADER.size}-byte header")
    magic, version, nstreams = SEQUENCE_HEADER.unpack_from(buf, 0)
    if magic != SEQUENCE_MAGIC:
        raise SequenceError(f"not a sequence record: starts with {bytes(magic)!r}, expected "
                            f"{SEQUENCE_MAGIC!r} (was it written with "
                            f"recio.sequence.pack_sequence?)")
    if version != SEQUENCE_VERSION:
        raise SequenceError(f"sequence record version {version}; this recio reads version "
                            f"{SEQUENCE_VERSION} (upgrade recio)")
    pos = SEQUENCE_HEADER.size
    if nstreams == 0:
        raise SequenceError("sequence record declares 0 streams; a sequence has at least one")
    least = pos + nstreams * (STREAM_DESCRIPTOR.size + 1)
    if least > size:
        raise SequenceError(f"sequence record truncated in its stream table: {nstreams} streams "
                            f"need at least {least} bytes, the record has {size}")
    out = []
    unpack_descriptor = STREAM_DESCRIPTOR.unpack_from
    for _ in range(nstreams):
        at = pos
        if pos + STREAM_DESCRIPTOR.size > size:
            raise SequenceError(f"sequence record truncated in its stream table at byte {pos}")
        kind, code, flags, namelen, dim, n, nnz = unpack_descriptor(buf, pos)
        pos += STREAM_DESCRIPTOR.size
        if pos + namelen > size:
            raise SequenceError(f"sequence record truncated in a stream name at byte {pos}")
        name = _stream_name(bytes(buf[pos:pos + namelen]), at)
        pos += namelen
        if kind > KIND_SPARSE or code >= len(DTYPES) or flags & ~FLAG_1D:
            raise SequenceError(f"stream {name!r} at byte {at}: unknown kind {kind}, dtype code "
                                f"{code} or flags {flags:#x} (record written by a newer recio?)")
        if flags and (kind != KIND_DENSE or dim != 1):
            raise SequenceError(f"stream {name!r} at byte {at}: the 1-D flag is set on a "
                                f"{'sparse' if kind else 'dense'} stream of dim {dim}; only a "
                                f"dense stream of dim 1 can be 1-D")
        if kind == KIND_DENSE and nnz:
            raise SequenceError(f"stream {name!r} at byte {at}: a dense stream with nnz {nnz} "
                                f"(nnz is 0 for dense streams)")
        out.append((name, kind, _DTYPE_OBJECTS[code], flags, dim, n, nnz))
    return out, pos + _pad8(pos)


def _duplicate_name(descriptors: List[tuple]) -> SequenceError:
    """The error for a stream table naming a stream twice (its users find that out cheaply:
    their ``{name: ...}`` dict comes out shorter than the table)."""
    names = [d[0] for d in descriptors]
    twice = next(x for x in names if names.count(x) > 1)
    return SequenceError(f"stream name {twice!r} appears twice in the stream table; stream "
                         f"names are unique")


def _section_sizes(kind: int, dtype: np.dtype, n: int, dim: int,
                   nnz: int) -> Tuple[Tuple[str, np.dtype, int], ...]:
    """``(what, dtype, count)`` of each section of a stream, in file order."""
    if kind == KIND_DENSE:
        return (("values", dtype, n * dim),)
    return (("indptr", _INDPTR, n + 1), ("indices", _INDICES, nnz), ("values", dtype, nnz))


def _check_end(pos: int, size: int) -> None:
    """After the last section (``pos``: its padded end) only that padding may be missing."""
    if pos < size:
        raise SequenceError(f"{size - pos} bytes follow the last stream's data at byte {pos}; "
                            f"the stream table does not describe them")


def unpack_sequence(buf: Buffer) -> Dict[str, Stream]:
    """Decode a :func:`pack_sequence` payload into ``{name: array or Sparse}`` (zero-copy views).

    Every count is checked against the bytes of the record before a view is made, sparse
    streams are checked with :meth:`Sparse.validate`, and bytes left after the last stream are
    an error: a damaged record raises :class:`SequenceError` (naming the byte of the record).
    """
    descriptors, pos = _parse_descriptors(buf)
    size = len(buf)
    out: Dict[str, Stream] = {}
    frombuffer = np.frombuffer
    for name, kind, dtype, flags, dim, n, nnz in descriptors:
        if kind == KIND_DENSE:  # the hot path: _section_sizes inlined
            count = n * dim
            nbytes = count * dtype.itemsize
            if pos + nbytes > size:
                raise SequenceError(f"sequence record truncated: stream {name!r} needs {nbytes} "
                                    f"bytes of values at byte {pos}, record has {size}")
            arr = frombuffer(buf, dtype, count, pos)
            out[name] = arr if flags & FLAG_1D else arr.reshape(n, dim)
            pos += nbytes + (-nbytes & 7)
            continue
        arrays = []
        for what, dt, count in (("indptr", _INDPTR, n + 1), ("indices", _INDICES, nnz),
                                ("values", dtype, nnz)):  # as _section_sizes, inlined
            nbytes = count * dt.itemsize
            if pos + nbytes > size:
                raise SequenceError(f"sequence record truncated: stream {name!r} needs {nbytes} "
                                    f"bytes of {what} at byte {pos}, record has {size}")
            arrays.append(frombuffer(buf, dt, count, pos))
            pos += nbytes + (-nbytes & 7)
        out[name] = Sparse(arrays[0], arrays[1], arrays[2], dim).validate(name)
    _check_end(pos, size)
    if len(out) != len(descriptors):
        raise _duplicate_name(descriptors)
    return out


def sequence_sample_counts(buf: Buffer) -> Dict[str, int]:
    """``{stream: samples}`` of a packed sequence, from its stream table only.

    The sections are not decoded, but their sizes must add up to the record's size, so a
    count that the bytes cannot hold is an error rather than a wrong number.
    """
    descriptors, pos = _parse_descriptors(buf)
    size = len(buf)
    for name, kind, dtype, _, dim, n, nnz in descriptors:
        for what, dt, count in _section_sizes(kind, dtype, n, dim, nnz):
            nbytes = count * dt.itemsize
            if pos + nbytes > size:
                raise SequenceError(f"sequence record truncated: stream {name!r} needs {nbytes} "
                                    f"bytes of {what} at byte {pos}, record has {size}")
            pos += nbytes + (-nbytes & 7)
    _check_end(pos, size)
    counts = {d[0]: d[5] for d in descriptors}
    if len(counts) != len(descriptors):
        raise _duplicate_name(descriptors)
    return counts


# --------------------------------------------------------------------------- sidecar

def sidecar_path(rec_path: PathLike) -> str:
    """The sample-count sidecar of ``PREFIX.rec``: ``PREFIX.len``."""
    return os.path.splitext(os.fspath(rec_path))[0] + ".len"


def _sidecar_bytes(stream_names: Sequence[str], counts: np.ndarray, rec_size: int) -> bytes:
    """The bytes of a sample-count sidecar (layout in the module docstring), checked first."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] != len(stream_names):
        raise SequenceError(f"counts must be records x {len(stream_names)} streams, got shape "
                            f"{counts.shape}")
    if counts.size and (counts.min() < 0 or counts.max() > MAX_SAMPLES):
        raise SequenceError("sample counts must fit in uint32")
    head = [SIDECAR_HEADER.pack(SIDECAR_MAGIC, SIDECAR_VERSION, len(stream_names),
                                counts.shape[0], rec_size)]
    for name in stream_names:
        b = name.encode("utf-8")
        head.append(_NAME_LEN.pack(len(b)) + b)
    size = sum(len(h) for h in head)
    head.append(b"\0" * _pad8(size))
    head.append(np.ascontiguousarray(counts, dtype="<u4").tobytes())
    return b"".join(head)


def write_sidecar(path: PathLike, stream_names: Sequence[str], counts: np.ndarray,
                  rec_size: int, *, fsync: bool = False) -> None:
    """Write a sample-count sidecar atomically (``counts``: records x streams)."""
    data = _sidecar_bytes(stream_names, counts, rec_size)
    with atomic_open(path, "wb", fsync=fsync) as f:
        f.write(data)


def read_sidecar(path: PathLike, rec_size: Optional[int] = None,
                 num_records: Optional[int] = None) -> Tuple[List[str], np.ndarray]:
    """``(stream names, counts[records, streams])`` of a sidecar; raises :class:`SequenceError`.

    Checks magic and version, the ``.rec`` size it describes against ``rec_size`` and its record
    count against ``num_records`` (the index's) when given, the stream names (1..255 bytes of
    valid UTF-8, unique, at most 65535 of them, none for a file without records) and that the
    file is exactly as long as the header promises. Sample counts themselves are checked
    against the records when those are decoded (:class:`recio.sequence.corpora.RecordCorpus`).
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    nstreams, nrecs = _sidecar_header(data, path, rec_size, num_records)
    names, pos = _sidecar_names(data, nstreams, path)
    need = pos + 4 * nrecs * nstreams
    if len(data) != need:
        raise SequenceError(f"sidecar has {len(data)} bytes, its header promises {need} "
                            f"({nrecs} records x {nstreams} streams)", path=path, offset=pos)
    counts = np.frombuffer(data, dtype="<u4", count=nrecs * nstreams, offset=pos)
    return names, counts.reshape(nrecs, nstreams)


def _sidecar_header(data: bytes, path: str, rec_size: Optional[int],
                    num_records: Optional[int]) -> Tuple[int, int]:
    """``(streams, records)`` from a sidecar's fixed header, checked against the ``.rec`` and
    its index (a stale sidecar must not plan minibatches) and against the file's length."""
    if len(data) < SIDECAR_HEADER.size:
        raise SequenceError(f"sidecar of {len(data)} bytes is shorter than its header",
                            path=path, offset=0)
    magic, version, nstreams, nrecs, size = SIDECAR_HEADER.unpack_from(data, 0)
    if magic != SIDECAR_MAGIC or version != SIDECAR_VERSION:
        raise SequenceError(f"not a recio sample-count sidecar (magic {magic!r}, version "
                            f"{version}); rebuild it with recio.sequence.rebuild_sidecar",
                            path=path, offset=0)
    if rec_size is not None and size != rec_size:
        raise SequenceError(f"sidecar describes a .rec of {size} bytes but the .rec has "
                            f"{rec_size}; rebuild it with recio.sequence.rebuild_sidecar",
                            path=path, offset=24)
    if num_records is not None and nrecs != num_records:
        raise SequenceError(f"sidecar lists {nrecs} records but the index has {num_records}; "
                            f"rebuild it with recio.sequence.rebuild_sidecar",
                            path=path, offset=16)
    if nstreams > MAX_STREAMS or (nstreams == 0 and nrecs):
        raise SequenceError(f"sidecar declares {nstreams} streams for {nrecs} records; a "
                            f"sequence has 1..{MAX_STREAMS} streams", path=path, offset=12)
    # every name takes at least 3 bytes: a count this large cannot be in the file
    if SIDECAR_HEADER.size + 3 * nstreams > len(data):
        raise SequenceError(f"sidecar declares {nstreams} stream names but has only "
                            f"{len(data)} bytes", path=path, offset=12)
    return nstreams, nrecs


def _sidecar_names(data: bytes, nstreams: int, path: str) -> Tuple[List[str], int]:
    """The sidecar's ``nstreams`` stream names and the (8-aligned) byte where its counts start;
    each name is 1..255 bytes of UTF-8 and none repeats."""
    pos = SIDECAR_HEADER.size
    names: List[str] = []
    seen = set()
    for _ in range(nstreams):
        if pos + _NAME_LEN.size > len(data):
            raise SequenceError("sidecar truncated in its stream names", path=path, offset=pos)
        (n,) = _NAME_LEN.unpack_from(data, pos)
        raw = data[pos + 2:pos + 2 + n]
        if len(raw) != n:
            raise SequenceError(f"sidecar truncated in a stream name of {n} bytes", path=path,
                                offset=pos)
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            name = None
        if not 0 < n <= 255 or name is None or name in seen:
            raise SequenceError(f"sidecar stream name {raw[:40]!r} is empty, longer than 255 "
                                f"bytes, not UTF-8 or repeated", path=path, offset=pos)
        names.append(name)
        seen.add(name)
        pos += 2 + n
    return names, pos + _pad8(pos)


def sample_counts(rec_path: PathLike, stream: Optional[str] = None) -> np.ndarray:
    """Samples per record of ``PREFIX.rec`` in index order, from the ``PREFIX.len`` sidecar.

    ``stream=None`` gives CNTK's count (the largest stream of each record); a name gives that
    stream's count (what ``defines_mb_size`` uses). No record is decoded; when ``PREFIX.idx``
    exists, the sidecar must list as many records as it does.
    """
    rec_path = os.fspath(rec_path)  # a local path or a URL
    side = sidecar_path(rec_path)
    if not storage.exists(side):
        raise SequenceError(f"no sample-count sidecar {side}; write the file with "
                            f"recio.sequence.SequenceWriter or run "
                            f"recio.sequence.rebuild_sidecar({rec_path!r})", path=rec_path)
    rec_size = storage.size(rec_path)
    idx = sibling_index_path(rec_path)
    num_records = len(open_checked_index(rec_path, idx, None, rec_size=rec_size)) \
        if storage.exists(idx) else None
    with storage.local_copy(side) as local_side:  # a URL's sidecar: downloaded (it is small)
        names, counts = read_sidecar(local_side, rec_size, num_records)
    if stream is None:
        return counts.max(axis=1) if names else np.zeros(len(counts), np.uint32)
    if stream not in names:
        raise SequenceError(f"stream {stream!r} is not in the file; it has {names}", path=side)
    return np.ascontiguousarray(counts[:, names.index(stream)])


def rebuild_sidecar(rec_path: PathLike, idx_path: Optional[PathLike] = None) -> str:
    """Re-create ``PREFIX.len`` from each record's stream table (for files written elsewhere).

    Every record must be a sequence record with the first record's streams, its sections
    filling it exactly (:func:`sequence_sample_counts`); errors name the record's offset. The
    rows follow the index ``RecordCorpus`` reads with (``recio.records.indexed.index_for``):
    ``idx_path``, else the ``.idx`` beside the file, else file order.
    """
    rec_path = os.fspath(rec_path)
    offsets = index_for(rec_path, idx_path, None).offsets.tolist()
    names: Optional[List[str]] = None
    rows = np.zeros((len(offsets), 0), np.uint32)
    reader = RecordReader(rec_path)
    try:
        for i, off in enumerate(offsets):
            try:
                counts = sequence_sample_counts(reader.read_at(off))
            except SequenceError as exc:
                raise SequenceError(exc.message, path=rec_path, offset=off) from None
            if names is None:
                names = list(counts)
                rows = np.zeros((len(offsets), len(names)), np.uint32)
            if list(counts) != names:
                raise SequenceError(f"record has streams {list(counts)}, the first had {names}; "
                                    f"all records of a file need the same streams",
                                    path=rec_path, offset=off)
            rows[i] = list(counts.values())
    finally:
        close = getattr(reader, "close", None)
        if close:
            close()
    side = sidecar_path(rec_path)
    write_sidecar(side, names or [], rows, os.path.getsize(rec_path))
    return side


# --------------------------------------------------------------------------- writer

class SequenceWriter(ManagedWriter):
    """Write sequence records: ``PREFIX.rec``, ``.idx`` and ``.len`` sidecar, atomically on close.

    ``write(streams, key=None) -> offset``; keys default to 0, 1, 2, ... Every record must have
    the same stream names (in any order; stored in the first record's order). The lifecycle is
    ``recio.records.atomic.ManagedWriter``'s: ``close()`` renames the ``.rec``, then the
    ``.len``, then the ``.idx`` into place; ``abort()`` (also ``discard()``), an exception
    inside ``with`` or a writer dropped without ``close()`` leaves none of them.
    ``fsync=True``: a returned ``close()`` survives an OS crash.
    """

    def __init__(self, rec_path: PathLike, idx_path: Optional[PathLike] = None, *,
                 fsync: bool = False) -> None:
        self.rec_path = os.fspath(rec_path)
        self.idx_path = os.fspath(idx_path) if idx_path is not None else \
            sibling_index_path(self.rec_path)
        self.len_path = sidecar_path(self.rec_path)
        self.stream_names: Optional[List[str]] = None
        self._layouts: Optional[Dict[str, Layout]] = None
        self._counts: List[List[int]] = []
        self._written = 0
        outputs = OutputSet.create([(self.rec_path, "wb", 0), (self.len_path, "wb", -1),
                                    (self.idx_path, "wb", -1)], fsync=fsync)
        self._records = RecordWriter._sink(outputs.files[0].file, self.rec_path)
        self._len_file = outputs.files[1].file
        self._idx_file = outputs.files[2].file
        self._begin(outputs, f"SequenceWriter({self.rec_path!r})")

    def write(self, streams: Dict[str, Stream], key: Any = None) -> int:
        """Append one sequence; returns its byte offset in the .rec."""
        if self.closed:
            raise ValueError("write to a closed SequenceWriter")
        if self.stream_names is None:
            self.stream_names = list(streams)
        elif set(streams) != set(self.stream_names) or len(streams) != len(self.stream_names):
            raise SequenceError(f"sequence {self._written} has streams {sorted(streams)}; the "
                                f"file has {sorted(self.stream_names)} (all records need the same)",
                                path=self.rec_path)
        ordered = {name: streams[name] for name in self.stream_names}
        if self._layouts is None:
            self._layouts = {name: stream_layout(data) for name, data in ordered.items()}
        else:  # readers refuse a file whose records disagree: refuse the record instead
            differ = layout_mismatch(ordered, self._layouts, "sequence 0")
            if differ is not None:
                raise SequenceError(f"sequence {self._written}: {differ}; every record of a file "
                                    f"needs the same stream layouts (dense or sparse, dtype, "
                                    f"dimension): convert it, e.g. with .astype()",
                                    path=self.rec_path)
        offset = self._records.write(pack_sequence(ordered))
        self._counts.append([_samples_of(d) for d in ordered.values()])
        self._idx_file.write(format_index([self._written if key is None else key], [offset]))
        self._written += 1
        return offset

    def tell(self) -> int:
        """Bytes written so far (the offset of the next record)."""
        return self._records.tell()

    def _finish(self) -> None:
        self._records._finish()
        self._records.closed = True
        counts = np.asarray(self._counts, dtype=np.int64).reshape(
            len(self._counts), len(self.stream_names or []))
        self._len_file.write(_sidecar_bytes(self.stream_names or [], counts, self.tell()))

    def _drop(self) -> None:
        self._records.closed = True
        self._records._drop()

    def close(self) -> None:
        """Finish: write what is buffered and the sidecar, then move .rec, .len and .idx into
        place."""
        super().close()

    def discard(self) -> None:
        """Abandon the files: nothing appears under the final names (same as ``abort()``)."""
        self.abort()


def write_sequences(rec_path: PathLike, sequences: Iterable[Dict[str, Stream]],
                    idx_path: Optional[PathLike] = None) -> int:
    """Write all ``sequences`` to ``rec_path`` (+ .idx, .len); returns how many were written."""
    n = 0
    with SequenceWriter(rec_path, idx_path) as w:
        for seq in sequences:
            w.write(seq)
            n += 1
    return n


__all__ = ["Sparse", "pack_sequence", "unpack_sequence", "sequence_sample_counts",
           "stream_sample_counts", "SequenceWriter", "write_sequences", "sample_counts",
           "sidecar_path", "read_sidecar", "write_sidecar", "rebuild_sidecar"]
