"""The order of one sweep of a ``MinibatchSource``: chunk-wise randomization within a window,
built lazily so that restoring at sweep 10,000 costs what restoring at sweep 1 does.

The chunk order is shuffled per sweep, then each sequence gets a random place within
``randomization_window`` samples after the start of its chunk on the sweep's time axis; the
order is the sequences sorted by that key. The keys are bucketed in one O(n) pass and a bucket
is sorted only when the reader reaches it.

Apart from the source (``recio.sequence.minibatch``) because it is a pure function of
``(seed, sweep)`` and the corpus's sizes: the source walks it, checkpoints a position in it,
and reads the chunks it names.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

class SweepPlan:
    """The order of one sweep, built lazily so that restoring costs O(corpus index), not a sort.

    Every sequence gets a sort key (its place on the sweep's time axis); the order of the sweep
    is the sequences sorted by key. Keys are grouped into ``S`` equal-width segments with one
    O(n) counting pass; a segment is sorted only when the reader reaches it. ``cum`` of a
    segment holds the sweep's cumulative sample count before each of its sequences.
    """

    def __init__(self, sweep: int, sizes: np.ndarray, keys: np.ndarray,
                 order: Optional[np.ndarray] = None) -> None:
        self.sweep = sweep
        self.n = len(sizes)
        self.sizes = sizes
        self.keys = keys
        self.total = int(sizes.sum())
        self._cache: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        if order is not None or self.n <= 4096:  # one segment, order known (or cheap to sort)
            if order is None:
                order = np.argsort(keys, kind="stable")
            self.seg_first = np.array([0, self.n], dtype=np.int64)
            self._grouped = order
            self._sorted = True
            self._seg_samples = np.array([0, self.total], dtype=np.int64)
            return
        num = int(min(self.n // 2048 + 1, 60_000))
        width = float(keys.max()) / num * (1 + 1e-9) or 1.0
        seg = np.minimum(np.floor(keys / width), num - 1).astype(np.uint16)
        self._grouped = np.argsort(seg, kind="stable")  # radix sort: O(n)
        self._sorted = False
        self.seg_first = np.zeros(num + 1, dtype=np.int64)
        np.cumsum(np.bincount(seg, minlength=num), out=self.seg_first[1:])
        self._seg_samples = np.zeros(num + 1, dtype=np.int64)
        np.cumsum(np.bincount(seg, weights=sizes, minlength=num).round().astype(np.int64),
                  out=self._seg_samples[1:])

    def _segment_of(self, pos: int) -> int:
        return int(np.searchsorted(self.seg_first, pos, side="right")) - 1

    def segment(self, m: int) -> Tuple[np.ndarray, np.ndarray]:
        """(sequence ids, cumulative samples, one longer) of segment ``m``, in sweep order."""
        got = self._cache.get(m)
        if got is None:
            a, b = int(self.seg_first[m]), int(self.seg_first[m + 1])
            ids = self._grouped[a:b]
            if not self._sorted:
                ids = ids[np.argsort(self.keys[ids], kind="stable")]
            cum = np.empty(len(ids) + 1, dtype=np.int64)
            cum[0] = self._seg_samples[m]
            np.cumsum(self.sizes[ids], out=cum[1:])
            cum[1:] += cum[0]
            for old in [k for k in self._cache if k < m - 1]:
                del self._cache[old]
            got = self._cache[m] = (ids, cum)
        return got

    def samples_before(self, pos: int) -> int:
        """Samples of the sweep before its ``pos``-th sequence."""
        if pos >= self.n:
            return self.total
        m = self._segment_of(pos)
        return int(self.segment(m)[1][pos - int(self.seg_first[m])])

    def take(self, pos: int, budget: int) -> Tuple[int, int]:
        """``(end, samples)``: the most whole sequences from ``pos`` within ``budget`` samples."""
        end, used = pos, 0
        while end < self.n:
            m = self._segment_of(end)
            base = int(self.seg_first[m])
            _, cum = self.segment(m)
            limit = cum[end - base] + (budget - used)
            stop = base + int(np.searchsorted(cum, limit, side="right")) - 1
            used += int(cum[stop - base] - cum[end - base])
            end = stop
            if end < int(self.seg_first[m + 1]):
                break  # the next sequence does not fit
        return end, used

    def ids(self, a: int, b: int) -> np.ndarray:
        """Sequence ids at sweep positions ``a .. b-1``."""
        parts = []
        while a < b:
            m = self._segment_of(a)
            base, top = int(self.seg_first[m]), int(self.seg_first[m + 1])
            parts.append(self.segment(m)[0][a - base:min(b, top) - base])
            a = min(b, top)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def make_sweep_plan(sweep: int, sizes: np.ndarray, seq_chunk: np.ndarray,
                    chunk_samples: np.ndarray, num_samples: int, window: int, seed: int,
                    randomize: bool) -> SweepPlan:
    """Keys of sweep ``sweep``: the chunk order is shuffled, then each sequence is placed at
    a uniform random point within ``window`` samples after its chunk's start. Costs O(n).

    ``sizes``: samples of each sequence (``num_samples`` in all); ``seq_chunk``: its chunk;
    ``chunk_samples``: samples of each chunk. A pure function of ``(seed, sweep)`` and the
    corpus."""
    n = len(sizes)
    if not randomize:
        order = np.arange(n, dtype=np.int64)
        return SweepPlan(sweep, sizes, order.astype(np.float64), order)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, sweep])))
    if window >= num_samples:  # the whole corpus is one window: a plain shuffle
        order = rng.permutation(n).astype(np.int64)
        keys = np.empty(n, dtype=np.float64)
        keys[order] = np.arange(n, dtype=np.float64)
        return SweepPlan(sweep, sizes, keys, order)
    num_chunks = len(chunk_samples)
    chunk_perm = rng.permutation(num_chunks)
    start = np.empty(num_chunks, dtype=np.float64)
    start[chunk_perm] = np.concatenate([[0], np.cumsum(chunk_samples[chunk_perm])[:-1]])
    keys = start[seq_chunk] + rng.random(n) * window
    return SweepPlan(sweep, sizes, keys)
