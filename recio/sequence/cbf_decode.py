"""Decoding one CBF chunk (layout in :mod:`recio.sequence.cbf_format`): its bytes into
sequences of NumPy views, every count checked against the chunk, with vectorised checks of
each sparse stream. ``CBFReader`` and the CBF corpus of ``MinibatchSource`` read through it.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np

from recio.errors import CBFError, SequenceError
from recio.sequence.cbf_format import (
    COUNT_DTYPE,
    DENSE_HEAD,
    INDEX_DTYPE,
    SPARSE_HEAD,
    ChunkInfo,
    SequenceDict,
    StreamInfo,
    cbf_error,
    check_count_bytes,
)
from recio.sequence.records import Sparse


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
    check_count_bytes(path, info.index, base, S, end)
    counts = np.frombuffer(buf, dtype=COUNT_DTYPE, count=S)
    if int(counts.sum(dtype=np.uint64)) != info.num_samples:
        raise cbf_error(path, f"sequence sample counts add up to {int(counts.sum())} but the chunk "
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
        raise cbf_error(path, f"{end - pos} bytes follow the last stream's data of the chunk's {S} "
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
    ints = _typed_views(buf, INDEX_DTYPE)[0]
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
            raise cbf_error(path, f"stream {name!r} sequence {s}: negative nnz {nnz}",
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
            raise cbf_error(path, f"stream {name!r}: {exc.message}", info.offset,
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
    return cbf_error(path, f"stream {stream.name!r} sequence {s}: {what}needs {need} bytes but "
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
        raise cbf_error(path, f"stream {stream.name!r} sequence {s}: index "
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
        raise cbf_error(path, f"stream {stream.name!r} sequence {s}: per-sample counts "
                     f"{count_views[s].tolist()[:8]} do not add up to nnz {int(nnz[s])} (or "
                     f"are negative)", info.offset + int(index_start[s] + 4 * nnz[s]),
                     info.index)
    return cum
