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
stream's indptr and indices: a damaged record raises ``SequenceError``. How many samples each
record holds is kept beside the file, in the sidecar of :mod:`recio.sequence.sidecar`;
:mod:`recio.sequence.writer` writes whole files.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import SequenceError

Buffer = Union[bytes, bytearray, memoryview]
PathLike = Union[str, "os.PathLike[str]"]

SEQUENCE_MAGIC = b"RSEQ"
_SEQUENCE_VERSION = 1
#: magic, version, number of streams
_SEQUENCE_HEADER = struct.Struct("<4sHH")
#: kind, dtype code, flags, name length, dim, samples, nnz
_STREAM_DESCRIPTOR = struct.Struct("<BBBBIIQ")

#: stream kind codes in the stream table (``recio.sequence.cbf_format.DENSE``/``SPARSE`` are
#: CBF's storage names, a different thing)
KIND_DENSE, KIND_SPARSE = 0, 1
_FLAG_1D = 1
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


def _dense_size_problem(samples: int, dim: int, itemsize: int) -> Optional[str]:
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
    take it. ``counts`` (non-zeros per sample) and ``sample_dim`` are CBF's names for its
    on-disk form, ``nnz`` and ``toarray`` scipy's; :meth:`from_counts` builds one from
    per-sample counts.
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
        ``SequenceError`` past ``MAX_DENSE_BYTES`` (see ``_dense_size_problem``)."""
        self.validate()
        problem = _dense_size_problem(self.num_samples, self.dim, self.values.dtype.itemsize)
        if problem is not None:
            raise SequenceError(problem)
        out = np.zeros((self.num_samples, self.dim), dtype=self.values.dtype)
        rows = np.repeat(np.arange(self.num_samples), np.diff(self.indptr))
        np.add.at(out, (rows, self.indices), self.values)
        return out

    def toarray(self) -> np.ndarray:
        """Same as :meth:`to_dense` (scipy's name)."""
        return self.to_dense()


Stream = Union[np.ndarray, Sparse]


def pad8(n: int) -> int:
    """Zero bytes that bring ``n`` bytes to a multiple of 8 (sections and sidecars align so)."""
    return -n & 7


def _dtype_code(dtype: np.dtype, name: str) -> int:
    code = _DTYPE_CODE.get(np.dtype(dtype).newbyteorder("<"))
    if code is None:
        raise SequenceError(f"stream {name!r} has dtype {np.dtype(dtype)}, which a sequence record "
                            f"cannot hold; use one of float16/32/64, int8..64 or uint8..64")
    return code


def samples_of(data: Stream) -> int:
    """Samples (rows) of one stream, dense or sparse."""
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
    out = {name: (kind == KIND_SPARSE, dtype, int(dim), bool(flags & _FLAG_1D))
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
    return {name: samples_of(data) for name, data in seq.items()}


def pack_sequence(streams: Dict[str, Stream]) -> bytes:
    """Encode a sequence ``{name: dense array or Sparse}`` as a record payload (layout above)."""
    if not streams:
        raise SequenceError("a sequence needs at least one stream")
    if len(streams) > MAX_STREAMS:
        raise SequenceError(f"{len(streams)} streams; a sequence record holds at most "
                            f"{MAX_STREAMS}")
    encoded = [_stream_table_entry(name, data) for name, data in streams.items()]
    parts: List[Buffer] = [_SEQUENCE_HEADER.pack(SEQUENCE_MAGIC, _SEQUENCE_VERSION, len(streams))]
    parts.extend(descriptor for descriptor, _ in encoded)
    size = sum(len(p) for p in parts)
    parts.append(b"\0" * pad8(size))
    size += pad8(size)
    for _, arrays in encoded:
        for arr in arrays:
            # an array is a buffer: NumPy's stubs declare __buffer__ for Python 3.12+ only
            parts.append(arr.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
            size += arr.nbytes
            parts.append(b"\0" * pad8(size))
            size += pad8(size)
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
        flags = _FLAG_1D if arr.ndim == 1 else 0
        dim = 1 if arr.ndim == 1 else arr.shape[1]
        n, nnz, kind = arr.shape[0], 0, KIND_DENSE
        arrays = [np.ascontiguousarray(arr, dtype=DTYPES[code])]
    if n > MAX_SAMPLES or dim > MAX_SAMPLES:
        raise SequenceError(f"stream {name!r}: {n} samples of dim {dim}; each must be < 2**32")
    descriptor = _STREAM_DESCRIPTOR.pack(kind, code, flags, len(bname), dim, n, nnz) + bname
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
    if size < _SEQUENCE_HEADER.size:
        raise SequenceError(f"sequence record of {size} bytes is shorter than its "
                            f"{_SEQUENCE_HEADER.size}-byte header")
    magic, version, nstreams = _SEQUENCE_HEADER.unpack_from(buf, 0)
    if magic != SEQUENCE_MAGIC:
        raise SequenceError(f"not a sequence record: starts with {bytes(magic)!r}, expected "
                            f"{SEQUENCE_MAGIC!r} (was it written with "
                            f"recio.sequence.pack_sequence?)")
    if version != _SEQUENCE_VERSION:
        raise SequenceError(f"sequence record version {version}; this recio reads version "
                            f"{_SEQUENCE_VERSION} (upgrade recio)")
    pos = _SEQUENCE_HEADER.size
    if nstreams == 0:
        raise SequenceError("sequence record declares 0 streams; a sequence has at least one")
    least = pos + nstreams * (_STREAM_DESCRIPTOR.size + 1)
    if least > size:
        raise SequenceError(f"sequence record truncated in its stream table: {nstreams} streams "
                            f"need at least {least} bytes, the record has {size}")
    out = []
    unpack_descriptor = _STREAM_DESCRIPTOR.unpack_from
    for _ in range(nstreams):
        at = pos
        if pos + _STREAM_DESCRIPTOR.size > size:
            raise SequenceError(f"sequence record truncated in its stream table at byte {pos}")
        kind, code, flags, namelen, dim, n, nnz = unpack_descriptor(buf, pos)
        pos += _STREAM_DESCRIPTOR.size
        if pos + namelen > size:
            raise SequenceError(f"sequence record truncated in a stream name at byte {pos}")
        name = _stream_name(bytes(buf[pos:pos + namelen]), at)
        pos += namelen
        if kind > KIND_SPARSE or code >= len(DTYPES) or flags & ~_FLAG_1D:
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
    return out, pos + pad8(pos)


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
            out[name] = arr if flags & _FLAG_1D else arr.reshape(n, dim)
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
