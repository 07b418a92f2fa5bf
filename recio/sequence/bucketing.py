"""Sequence bucketing: length buckets that minimise padding, and a batch sampler that uses them.

After Khomenko et al., "Accelerating recurrent neural network training using sequence bucketing"
(2016). A minibatch of ``k`` sequences padded to its longest one costs about
``k * max_length``; drawing batches at random from the whole corpus pays for the long tail in
almost every batch. Sorting sequences into Q length buckets and drawing each batch from a single
bucket removes most of that padding.

Boundaries
    A list of increasing integer *upper edges, inclusive*: ``[b0, b1, ..., b(Q-1)]`` makes bucket
    0 hold lengths ``<= b0`` and bucket q hold lengths in ``(b(q-1), bq]``. Lengths above the last
    edge fall into one extra overflow bucket (the functions here always end with the maximum
    length, so nothing overflows). ``[]`` (or ``None``) means one bucket: random batching.

Cost model
    Within a bucket, batches are uniformly random subsets (the bucket is shuffled, then cut), so by
    linearity the expected cost of a bucket of ``n`` sequences is ``n * E[max of k drawn from the
    bucket without replacement]`` with ``k = min(batch_size, n)``, computed exactly from the
    length histogram; the last, partial batch of a bucket is charged like a full one (a slight
    over-estimate, at most one batch per bucket). The *padding waste* is this expected padded
    total divided by the real total of samples (1.0 = no padding). One bucket is random batching.

``bucket_boundaries`` finds the boundaries minimising that cost exactly, by dynamic programming
over the D distinct lengths (O(D^2 * Q) time, O(D * Q) memory): it works on the histogram, so
millions of sequences cost no more than their distinct lengths.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import SequenceError
from recio.records.split import check_part
from recio.sequence.sidecar import sample_counts


Boundaries = Optional[Sequence[int]]


# ----------------------------------------------------------------------------- lengths

def _as_lengths(lengths) -> np.ndarray:
    """Lengths as a 1-D int64 array, checked: whole numbers >= 0."""
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise SequenceError(f"sequence lengths must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
            raise SequenceError("sequence lengths must be whole numbers (sample counts)")
    elif arr.dtype.kind not in "iub":
        raise SequenceError(f"sequence lengths must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        bad = int(np.argmin(arr))
        raise SequenceError(f"sequence {bad} has negative length {int(arr[bad])}; "
                            "lengths are sample counts, so they must be >= 0")
    return arr


def length_histogram(lengths) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct lengths (ascending) and how many sequences have each: what the DP works on."""
    arr = _as_lengths(lengths)
    values, counts = np.unique(arr, return_counts=True)
    return values.astype(np.int64), counts.astype(np.int64)


def _check_positive(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return int(value)


def _check_boundaries(boundaries: Boundaries) -> List[int]:
    edges = [] if boundaries is None else [int(b) for b in boundaries]
    if any(b >= c for b, c in zip(edges, edges[1:])):
        raise ValueError(f"bucket boundaries must be strictly increasing, got {edges}")
    return edges


def assign_buckets(lengths, boundaries: Boundaries) -> np.ndarray:
    """Bucket number of each sequence: the first q with ``length <= boundaries[q]``.

    Lengths above the last edge get ``len(boundaries)`` (the overflow bucket).
    """
    edges = _check_boundaries(boundaries)
    return np.searchsorted(np.asarray(edges, dtype=np.int64), _as_lengths(lengths), side="left")


# ----------------------------------------------------------------------------- cost model

class _CostModel:
    """Expected padded cost of contiguous runs of the length histogram (see the module docstring).

    ``P(max of k <= L_m) = C(F_m, k) / C(n, k)`` where ``F_m`` counts the bucket's sequences no
    longer than ``L_m``, so ``E[max] = L_j - sum_m (L_(m+1) - L_m) C(F_m, k) / C(n, k)``. The
    binomials are taken in log space from a table of log-factorials, and the sum is accumulated
    with ``logaddexp`` so one start ``i`` gives the costs of every run ``i..j`` in O(D).
    """

    def __init__(self, values: np.ndarray, counts: np.ndarray, batch_size: int) -> None:
        self.values = values.astype(np.float64)
        self.counts = counts
        self.k = batch_size
        self.log_gaps = np.log(np.diff(self.values)) if len(values) > 1 else np.empty(0)
        total = int(counts.sum())
        # log(x!) looked up in a table (8 bytes a sequence) up to 8M sequences, else computed
        self._table = (_log_factorial(np.arange(total + 1)) if total < _TABLE_LIMIT else None)
        self._log_fact_k = float(_log_factorial(np.array([batch_size]))[0])

    def _log_fact(self, n: np.ndarray) -> np.ndarray:
        return self._table[n] if self._table is not None else _log_factorial(n)

    def _log_binom_k(self, n: np.ndarray) -> np.ndarray:
        """log C(n, k), -inf where n < k."""
        k = self.k
        out = np.full(n.shape, -np.inf)
        ok = n >= k
        nk = n[ok]
        out[ok] = self._log_fact(nk) - self._log_fact_k - self._log_fact(nk - k)
        return out

    def runs_from(self, i: int) -> np.ndarray:
        """Expected padded cost of the bucket holding distinct lengths ``i..j``, for j = i..D-1."""
        values = self.values[i:]
        n = np.cumsum(self.counts[i:])
        cost = n * values  # every run that fits in one batch pads to its maximum
        big = n > self.k
        if big.any():
            log_terms = self.log_gaps[i:] + self._log_binom_k(n[:-1])
            with np.errstate(divide="ignore", invalid="ignore"):
                log_sums = np.concatenate(([-np.inf], np.logaddexp.accumulate(log_terms)))
                shortfall = np.exp(log_sums[big] - self._log_binom_k(n[big]))
            cost[big] = n[big] * (values[big] - shortfall)
        return cost

    def run(self, i: int, j: int) -> float:
        """Expected padded cost of one bucket holding distinct lengths ``i..j`` (inclusive)."""
        return float(self.runs_from(i)[j - i])


_TABLE_LIMIT = 1 << 23
_EXACT_LOG_FACT = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, 1024, dtype=np.float64)))))


def _log_factorial(n: np.ndarray) -> np.ndarray:
    """log(n!) elementwise: a table below 1024, Stirling's series above (truncation < 1e-20)."""
    n = np.asarray(n, dtype=np.int64)
    out = np.empty(n.shape)
    small = n < len(_EXACT_LOG_FACT)
    out[small] = _EXACT_LOG_FACT[n[small]]
    z = n[~small].astype(np.float64) + 1.0
    out[~small] = ((z - 0.5) * np.log(z) - z + 0.5 * math.log(2 * math.pi)
                   + 1 / (12 * z) - 1 / (360 * z ** 3) + 1 / (1260 * z ** 5))
    return out


def _split_points(values: np.ndarray, edges: List[int]) -> List[Tuple[int, int]]:
    """The runs ``(i, j)`` of distinct-length indices that each bucket of ``edges`` holds."""
    ends = np.searchsorted(values, np.asarray(edges, dtype=np.int64), side="right")
    runs, start = [], 0
    for end in list(ends) + [len(values)]:
        if end > start:
            runs.append((start, int(end) - 1))
            start = int(end)
    return runs


def padded_cost(lengths, boundaries: Boundaries, batch_size: int) -> float:
    """Expected total padded samples of one epoch batched within ``boundaries`` (None: random)."""
    k = _check_positive("batch_size", batch_size)
    values, counts = length_histogram(lengths)
    if values.size == 0:
        return 0.0
    model = _CostModel(values, counts, k)
    runs = _split_points(values, _check_boundaries(boundaries))
    return float(sum(model.run(i, j) for i, j in runs))


def padding_waste(lengths, boundaries: Boundaries, batch_size: int) -> float:
    """Padded samples / real samples (1.0 means no padding) for batches drawn within buckets."""
    arr = _as_lengths(lengths)
    real = int(arr.sum())
    if real == 0:
        return 1.0
    return padded_cost(arr, boundaries, batch_size) / real


# ----------------------------------------------------------------------------- boundaries

def _optimal_boundaries(lengths, num_buckets: int, batch_size: int = 32) -> List[int]:
    """At most ``num_buckets`` upper edges minimising the expected padded cost, exactly (DP).

    Returns fewer edges when there are fewer distinct lengths, or when an extra bucket would not
    lower the cost. The last edge is always the longest length.
    """
    q_max = _check_positive("num_buckets", num_buckets)
    k = _check_positive("batch_size", batch_size)
    values, counts = length_histogram(lengths)
    d = len(values)
    if d == 0:
        return []
    q_max = min(q_max, d)
    model = _CostModel(values, counts, k)
    # best[q, j]: least cost covering distinct lengths 0..j with q buckets; start[q, j]: where
    # the last of them begins. Runs are processed by start i, so best[q-1, i-1] is final by then.
    best = np.full((q_max + 1, d), np.inf)
    start = np.zeros((q_max + 1, d), dtype=np.int64)
    for i in range(d):
        runs = model.runs_from(i)
        if i == 0:
            best[1] = runs
            continue
        for q in range(2, q_max + 1):
            before = best[q - 1, i - 1]
            if not np.isfinite(before):
                break
            candidate = before + runs
            better = candidate < best[q, i:]
            best[q, i:][better] = candidate[better]
            start[q, i:][better] = i
    # fewest buckets among the cheapest (an extra bucket only counts if it saves something)
    finals = best[1:, d - 1]
    q = int(np.argmax(finals <= finals.min() * (1 + 1e-12))) + 1
    edges, j = [], d - 1
    while q > 0:
        edges.append(int(values[j]))
        j = int(start[q, j]) - 1
        q -= 1
    return edges[::-1]


def equal_width_boundaries(lengths, num_buckets: int) -> List[int]:
    """``num_buckets`` edges splitting [shortest, longest] into equal widths (empty ones merged)."""
    q = _check_positive("num_buckets", num_buckets)
    arr = _as_lengths(lengths)
    if arr.size == 0:
        return []
    lo, hi = int(arr.min()), int(arr.max())
    edges = [math.floor(lo + (hi - lo) * (t + 1) / q) for t in range(q - 1)] + [hi]
    return _nonempty_edges(arr, edges)


def quantile_boundaries(lengths, num_buckets: int) -> List[int]:
    """Edges at the 1/Q, 2/Q, ... quantiles of the lengths: buckets of about equal counts."""
    q = _check_positive("num_buckets", num_buckets)
    arr = np.sort(_as_lengths(lengths))
    if arr.size == 0:
        return []
    edges = [int(arr[max(0, math.ceil(arr.size * (t + 1) / q) - 1)]) for t in range(q)]
    return _nonempty_edges(arr, edges)


def _nonempty_edges(lengths: np.ndarray, edges: List[int]) -> List[int]:
    """Sorted unique edges, dropping any whose bucket would be empty."""
    edges = sorted(set(edges))
    used = np.unique(np.searchsorted(np.asarray(edges), lengths, side="left"))
    return [edges[t] for t in used if t < len(edges)]


_METHODS = {"optimal", "equal_width", "quantile"}


def bucket_boundaries(lengths, num_buckets: int, batch_size: int = 32,
                      method: str = "optimal") -> List[int]:
    """Upper edges (inclusive) of at most ``num_buckets`` length buckets for ``lengths``.

    ``method="optimal"`` minimises the expected padded cost of batches of ``batch_size`` drawn
    within buckets (exact DP over the length histogram); ``"equal_width"`` and ``"quantile"`` are
    the usual baselines.
    """
    if method == "optimal":
        return _optimal_boundaries(lengths, num_buckets, batch_size)
    if method == "equal_width":
        return equal_width_boundaries(lengths, num_buckets)
    if method == "quantile":
        return quantile_boundaries(lengths, num_buckets)
    raise ValueError(f"unknown bucketing method {method!r}; use one of {sorted(_METHODS)}")


def bucketing_report(lengths, batch_size: int = 32, max_buckets: int = 8,
                     progress: Optional[Callable[[int], None]] = None) -> List[Dict]:
    """For Q = 1..max_buckets: boundaries and padding waste of equal-width, quantile, optimal.

    Each row also holds ``random_waste`` (one bucket) and ``predicted_speedup``: the cost of
    random batching divided by the cost with the optimal buckets (what the epoch time should
    shrink by when the model's step time is proportional to padded samples). ``progress(1)``
    is called after each Q.
    """
    arr = _as_lengths(lengths)
    random_waste = padding_waste(arr, None, batch_size)
    rows = []
    for q in range(1, _check_positive("max_buckets", max_buckets) + 1):
        row: Dict = {"buckets": q, "random_waste": random_waste}
        for method in ("equal_width", "quantile", "optimal"):
            edges = bucket_boundaries(arr, q, batch_size, method=method)
            row[method] = {"boundaries": edges,
                           "waste": padding_waste(arr, edges, batch_size)}
        row["predicted_speedup"] = (random_waste / row["optimal"]["waste"]
                                    if row["optimal"]["waste"] else 1.0)
        rows.append(row)
        if progress is not None:
            progress(1)
    return rows


# ----------------------------------------------------------------------------- sampler

class BucketBatchSampler:
    """Batches of indices drawn within length buckets, batch order shuffled per epoch.

    Use it as a PyTorch ``DataLoader(dataset, batch_sampler=sampler)``: iterating yields lists
    of dataset indices; ``len()`` is the number of batches this part gets this epoch.

    * ``buckets``: boundaries (upper edges, inclusive) or a number of buckets, in which case the
      optimal boundaries for ``lengths`` are computed (in ``"samples"`` mode the DP assumes
      ``batch_size / mean length`` sequences per batch).
    * ``batch_size_in="sequences"``: at most ``batch_size`` sequences per batch.
      ``"samples"`` (CNTK semantics): whole sequences are packed while their total samples stay
      within ``batch_size``; a sequence longer than that forms its own batch.
    * Each epoch, every bucket is shuffled and cut into batches, then the order of batches is
      shuffled across buckets; it depends only on ``seed`` and the epoch (``set_epoch``). With
      ``shuffle=False`` buckets and batches come in ascending length order.
    * ``drop_last`` drops each bucket's final batch when the bucket ran out before it was full,
      and, with several parts, the batches that would leave parts with unequal counts.
    * ``num_parts``/``part_index`` (one part per data-parallel rank): parts get disjoint
      batches that together cover the epoch; consecutive batches come from the same bucket in
      groups of ``num_parts`` so parts step through similar lengths together. Without
      ``drop_last`` the first parts may get one batch more than the others.
    * ``state_dict()`` records the epoch and how many batches this iterator has yielded;
      ``load_state_dict()`` makes the next iteration continue right after them. With DataLoader
      workers prefetching, save the count of batches your loop consumed instead
      (``state_dict(batches_done=step)``).
    """

    def __init__(self, lengths, buckets: Union[int, Sequence[int]], batch_size: int,
                 batch_size_in: str = "sequences", shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, num_parts: int = 1, part_index: int = 0) -> None:
        self.lengths = _as_lengths(lengths)
        self.batch_size = _check_positive("batch_size", batch_size)
        if batch_size_in not in ("sequences", "samples"):
            raise ValueError("batch_size_in must be 'sequences' or 'samples', got "
                             f"{batch_size_in!r}")
        self.batch_size_in = batch_size_in
        self.num_parts = _check_positive("num_parts", num_parts)
        if isinstance(part_index, bool) or int(part_index) != part_index:
            raise ValueError(f"part_index must be a whole number, got {part_index!r}")
        check_part(int(part_index), self.num_parts)
        self.part_index = int(part_index)
        if isinstance(seed, bool) or int(seed) != seed or seed < 0:
            raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if isinstance(buckets, (int, np.integer)) and not isinstance(buckets, bool):
            per_batch = self.batch_size
            if batch_size_in == "samples" and self.lengths.size and self.lengths.mean() > 0:
                per_batch = max(1, int(round(self.batch_size / float(self.lengths.mean()))))
            self.boundaries = _optimal_boundaries(self.lengths, int(buckets), per_batch)
        elif isinstance(buckets, bool):
            raise TypeError(f"buckets is a number of buckets or their boundaries, not {buckets}")
        else:
            self.boundaries = _check_boundaries(buckets)
        which = assign_buckets(self.lengths, self.boundaries)
        order = np.argsort(which, kind="stable")
        cuts = np.searchsorted(which[order], np.arange(1, len(self.boundaries) + 1))
        self._bucket_indices = [b for b in np.split(order, cuts) if b.size]
        self.epoch = 0
        self._resume = 0      # batches to skip at the start of the next iteration
        self._position = 0    # batches yielded so far this epoch
        self._cache: Tuple[Optional[int], List[List[int]]] = (None, [])

    @classmethod
    def from_rec(cls, rec_path, buckets: Union[int, Sequence[int]], batch_size: int,
                 stream: Optional[str] = None, **kwargs) -> "BucketBatchSampler":
        """A sampler over a sequence ``.rec`` whose lengths come from its sample-count sidecar."""
        return cls(sample_counts(rec_path, stream=stream), buckets, batch_size, **kwargs)

    # -- epoch plan
    def _cut(self, idx: np.ndarray) -> Tuple[List[np.ndarray], bool]:
        """Cut one bucket's (ordered) indices into batches; also say if the last one is full."""
        if self.batch_size_in == "sequences":
            k = self.batch_size
            batches = [idx[s:s + k] for s in range(0, idx.size, k)]
            return batches, idx.size % k == 0
        current: List[int]
        batches, current, total = [], [], 0
        lengths = self.lengths[idx].tolist()
        for pos, n in zip(idx.tolist(), lengths):
            if current and total + n > self.batch_size:
                batches.append(np.asarray(current, dtype=np.int64))
                current, total = [], 0
            current.append(pos)
            total += n
        last_full = False
        if current:
            last_full = total >= self.batch_size  # a lone over-long sequence counts as full
            batches.append(np.asarray(current, dtype=np.int64))
        return batches, last_full

    def _epoch_batches(self, epoch: int) -> List[List[int]]:
        """This part's batches for ``epoch`` (deterministic in seed and epoch)."""
        if self._cache[0] == epoch:
            return self._cache[1]
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, epoch]))
        r = self.num_parts
        groups: List[List[np.ndarray]] = []   # runs of r batches from the same bucket
        leftovers: List[np.ndarray] = []
        for idx in self._bucket_indices:
            if self.shuffle:
                idx = rng.permutation(idx)
            batches, last_full = self._cut(idx)
            if self.drop_last and batches and not last_full:
                batches.pop()
            whole = len(batches) - len(batches) % r
            groups.extend(batches[s:s + r] for s in range(0, whole, r))
            leftovers.extend(batches[whole:])
        groups.extend(leftovers[s:s + r] for s in range(0, len(leftovers), r))
        tail = groups.pop() if groups and len(groups[-1]) < r else None
        if self.shuffle:
            groups = [groups[g] for g in rng.permutation(len(groups))]
        if tail is not None and not self.drop_last:
            groups.append(tail)
        mine = [group[self.part_index].tolist() for group in groups
                if self.part_index < len(group)]
        self._cache = (epoch, mine)
        return mine

    # -- sampler protocol
    def __iter__(self) -> Iterator[List[int]]:
        batches = self._epoch_batches(self.epoch)
        start, self._resume = self._resume, 0
        self._position = start
        for batch in batches[start:]:
            self._position += 1
            yield list(batch)

    def __len__(self) -> int:
        return len(self._epoch_batches(self.epoch))

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` on the next iteration (a new shuffle, as DistributedSampler)."""
        if isinstance(epoch, bool) or int(epoch) != epoch or epoch < 0:
            raise ValueError(f"epoch must be a whole number >= 0, got {epoch!r}")
        self.epoch = int(epoch)
        self._resume = self._position = 0

    def state_dict(self, batches_done: Optional[int] = None) -> Dict:
        """Where this part is: epoch and batches done (default: batches yielded so far)."""
        done = self._position if batches_done is None else int(batches_done)
        return {"epoch": self.epoch, "batches_done": done, "seed": self.seed,
                "num_parts": self.num_parts, "part_index": self.part_index,
                "num_batches": len(self)}

    def load_state_dict(self, state: Dict) -> None:
        """Continue from ``state``: the next iteration yields the batch after the last one done."""
        for key in ("seed", "num_parts", "part_index"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(f"state_dict was saved with {key}={state[key]!r} but this "
                                 f"sampler has {key}={getattr(self, key)!r}; resume with the same "
                                 "settings")
        self.epoch = int(state["epoch"])
        done = int(state["batches_done"])
        total = len(self)
        if "num_batches" in state and state["num_batches"] != total:
            raise ValueError(f"state_dict was saved for {state['num_batches']} batches per epoch "
                             f"but this sampler makes {total}; the lengths or batch settings "
                             "changed")
        if not 0 <= done <= total:
            raise ValueError(f"batches_done={done} is outside this epoch's 0..{total} batches")
        self._resume = self._position = done
