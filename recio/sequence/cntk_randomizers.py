"""CNTK 2.7's randomizers, the part of its reader that decides which sequences make each
minibatch: ``BlockRandomizer`` (with ``ChunkRandomizer``'s windows and ``SequenceRandomizer``'s
retry-and-swap shuffle, drawn from ``std::mt19937_64``) and ``NoRandomizer`` (file order).

They work on a :class:`ChunkTable` (the sample counts of each chunk's sequences), never on the
data, and reproduce CNTK's order exactly (golden traces of the real CNTK in tests/data/cntk).
:class:`recio.sequence.cntk.MinibatchSource` drives them and reads the sequences they name.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

_SIZE_MAX = 2**64 - 1
# CNTK's names and values, so that code ported from cntk.io keeps them. recio's own
# MinibatchSource has no max_samples: its ``epoch_size`` says how long an epoch is, and its two
# values for "an epoch is one sweep" have names of their own (recio.sequence.SWEEP_FOREVER,
# SWEEP_ONCE).
#: ``max_samples``/``max_sweeps``: no limit (CNTK's value, SIZE_MAX)
INFINITELY_REPEAT = _SIZE_MAX
#: ``max_samples``: exactly one sweep (CNTK's value, SIZE_MAX - 1)
FULL_DATA_SWEEP = _SIZE_MAX - 1
#: CNTK's epoch size for INFINITELY_REPEAT
NO_LIMIT = _SIZE_MAX // 2


# --------------------------------------------------------------------------- CNTK's RNG

class MT19937_64:
    """``std::mt19937_64`` (NumPy has only the 32-bit Mersenne twister), refilled 312 values at
    a time with a vectorised twist; ``next()`` returns a Python int in ``[0, 2**64)``."""

    _N, _M = 312, 156
    _A = np.uint64(0xB5026F5AA96619E9)
    _UPPER, _LOWER = np.uint64(0xFFFFFFFF80000000), np.uint64(0x7FFFFFFF)

    def __init__(self, seed: int = 5489) -> None:
        state = [int(seed) & _SIZE_MAX]
        for i in range(1, self._N):
            prev = state[-1]
            state.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & _SIZE_MAX)
        self._mt = np.array(state, dtype=np.uint64)
        self._out: List[int] = []
        self._next = self._N

    def _twist(self) -> None:
        mt, n, m, one = self._mt, self._N, self._M, np.uint64(1)

        def step(cur: np.ndarray, nxt: np.ndarray, far: np.ndarray) -> np.ndarray:
            y = (cur & self._UPPER) | (nxt & self._LOWER)
            return far ^ (y >> one) ^ np.where((y & one) != 0, self._A, np.uint64(0))

        # the sequential recurrence in three slices: each reads only values it may already see
        mt[:n - m] = step(mt[:n - m], mt[1:n - m + 1], mt[m:])
        mt[n - m:n - 1] = step(mt[n - m:n - 1], mt[n - m + 1:], mt[:m - 1])
        mt[n - 1:] = step(mt[n - 1:], mt[:1], mt[m - 1:m])
        y = mt.copy()
        y ^= (y >> np.uint64(29)) & np.uint64(0x5555555555555555)
        y ^= (y << np.uint64(17)) & np.uint64(0x71D67FFFEDA60000)
        y ^= (y << np.uint64(37)) & np.uint64(0xFFF7EEE000000000)
        y ^= y >> np.uint64(43)
        self._out = y.tolist()
        self._next = 0

    def next(self) -> int:
        """The next 64-bit output."""
        if self._next >= self._N:
            self._twist()
        value = self._out[self._next]
        self._next += 1
        return value

    def randint(self, begin: int, end: int) -> int:
        """CNTK's ``RandMT``: ``begin + next() % (end - begin)`` (modulo bias included)."""
        return begin + self.next() % (end - begin)


def _shuffle_mt(values: List[int], rng: MT19937_64) -> None:
    """CNTK's ``RandomShuffleMT``: every i swaps with a j drawn over the whole list (not
    Fisher-Yates, so not uniform, but CNTK's order)."""
    n = len(values)
    for i in range(n):
        j = rng.randint(0, n)
        values[i], values[j] = values[j], values[i]


# --------------------------------------------------------------------------- the enumerators

class ChunkTable:
    """The chunk table the enumerators work on: ``lengths[c]`` = sample counts of the sequences
    of original chunk c (the deserializer's sequence sizes)."""

    def __init__(self, lengths: Sequence[Sequence[int]]) -> None:
        self.lengths = [list(map(int, c)) for c in lengths]
        self.num_chunks = len(self.lengths)
        self.chunk_samples = [sum(c) for c in self.lengths]
        self.sweep_size = sum(self.chunk_samples)
        self.first_sequence = np.concatenate(
            [[0], np.cumsum([len(c) for c in self.lengths])]).astype(np.int64)
        self.sample_offsets = np.concatenate([[0], np.cumsum(self.chunk_samples)]).astype(np.int64)


def epoch_size(corpus: ChunkTable, max_samples: int, max_sweeps: int) -> int:
    """``ReaderBase::StartEpoch``'s epoch size in samples."""
    if max_sweeps != INFINITELY_REPEAT:
        return corpus.sweep_size * max_sweeps
    if max_samples == FULL_DATA_SWEEP:
        return corpus.sweep_size
    if max_samples == INFINITELY_REPEAT:
        return NO_LIMIT
    return max_samples


class _SweepLayout:
    """One sweep of the block randomizer: the shuffled chunk order and each chunk's window
    (``ChunkRandomizer::Randomize``), then ``shuffle`` lays out the sequences
    (``SequenceRandomizer``, done eagerly: CNTK shuffles lazily, window by window, but with one
    RNG stream and increasing positions, so the result is the same)."""

    def __init__(self, corpus: ChunkTable, window: int, in_samples: bool, chunk_seed: int) -> None:
        n = corpus.num_chunks
        order = list(range(n))
        _shuffle_mt(order, MT19937_64(chunk_seed))
        self.original = order  # shuffled position -> original chunk
        self.num_sequences = [len(corpus.lengths[o]) for o in order]
        self.num_samples = [corpus.chunk_samples[o] for o in order]
        self.seq_start = np.concatenate([[0], np.cumsum(self.num_sequences)]).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(self.num_samples)]).tolist()
        self.windows = _sample_windows(starts, self.num_samples, window) if in_samples \
            else _chunk_windows(n, window)
        self.corpus = corpus

    def shuffle(self, seed: int) -> None:
        """Lay out the sweep's sequences: ``origin`` (shuffled chunk position they come from),
        ``chunk``/``index`` (original chunk and place in it), ``length``; ``starts`` their sample
        offsets within the sweep."""
        origin: List[int] = []
        chunk: List[int] = []
        index: List[int] = []
        length: List[int] = []
        for position, original in enumerate(self.original):
            lengths = self.corpus.lengths[original]
            origin.extend([position] * len(lengths))
            chunk.extend([original] * len(lengths))
            index.extend(range(len(lengths)))
            length.extend(lengths)
        slot = np.repeat(np.arange(len(self.original)), self.num_sequences).tolist()
        windows, seq_start = self.windows, self.seq_start.tolist()
        rng = MT19937_64(seed)
        for t in range(len(origin)):
            begin, end = windows[slot[t]]
            low, high = seq_start[begin], seq_start[end]
            while True:  # CNTK's retry-and-swap: both sequences must stay inside their windows
                j = rng.randint(low, high)
                if not begin <= origin[j] < end:
                    continue
                j_begin, j_end = windows[slot[j]]
                if not j_begin <= origin[t] < j_end:
                    continue
                break
            for a in (origin, chunk, index, length):
                a[t], a[j] = a[j], a[t]
        self.origin, self.chunk, self.index, self.length = origin, chunk, index, length
        self.slot = slot
        self.starts = np.concatenate([[0], np.cumsum(length)]).astype(np.int64).tolist()


def _chunk_windows(n: int, window: int) -> List[Tuple[int, int]]:
    """``ChunkRandomizer::RandomizeUsingWindowInChunks``: ``window`` chunks around each."""
    half, size = window // 2, (1 if window == 0 else window)
    out = []
    for c in range(n):
        begin = c - half if c > half else 0
        end = begin + size
        if end > n:
            end, begin = n, (n - size if n > size else 0)
        out.append((begin, end))
    return out


def _sample_windows(starts: List[int], samples: List[int], window: int) -> List[Tuple[int, int]]:
    """``ChunkRandomizer::RandomizeUsingWindowInSamples``: chunks within half a window of
    samples on either side."""
    n, half = len(samples), window // 2
    out: List[Tuple[int, int]] = []
    for c in range(n):
        begin, end = (0, 1) if c == 0 else out[c - 1]
        while starts[c] - starts[begin] > half:
            begin += 1
        begin, end = min(begin, c), max(end, c + 1)
        while end < n and starts[end] + samples[end] - starts[c] < half:
            end += 1
        out.append((begin, end))
    return out


class BlockRandomizer:
    """CNTK's ``BlockRandomizer`` for one worker: a global sample position walking the sweeps'
    shuffled orders, taking the sequences of chunks whose shuffled position is ``rank mod K``."""

    def __init__(self, corpus: ChunkTable, window: int, in_samples: bool, seed: int) -> None:
        self.corpus, self.window, self.in_samples, self.seed = corpus, window, in_samples, seed
        self.sweep: Optional[int] = None
        # None until _prepare_sweep, which every seek and walk calls first; typed without the
        # None so that the per-sequence methods need no check
        self.layout: _SweepLayout = None  # type: ignore[assignment]
        self.pos = 0
        self.workers, self.rank = 1, 0
        self.epoch_end = NO_LIMIT

    # -- SequenceRandomizer's cursor and its lazily randomized window of chunks
    def _reset(self, sequence_seed: int) -> None:
        assert self.layout is not None
        self.layout.shuffle(sequence_seed)
        self.cursor = 0          # next sequence of the sweep
        self.chunk_cursor = 0    # shuffled chunk slot the cursor is in
        self.window_begin = 0    # oldest chunk slot still held
        self.randomized_end = 1 if self.corpus.num_chunks else 0

    def _move_chunk_cursor(self) -> None:
        layout, n = self.layout, self.corpus.num_chunks
        self.chunk_cursor += 1
        if self.chunk_cursor >= self.randomized_end and self.randomized_end < n:
            self.randomized_end += 1
        current = min(self.chunk_cursor, n - 1)
        while (self.window_begin < n and self.window_begin < layout.windows[current][0]
               and layout.windows[self.window_begin][1] <= self.chunk_cursor):
            self.window_begin += 1

    def _advance(self) -> None:
        layout = self.layout
        slot = layout.slot[self.cursor]
        self.cursor += 1
        if self.cursor == layout.seq_start[slot + 1]:
            self._move_chunk_cursor()

    def _slot_start(self, slot: int) -> int:
        return self.layout.starts[int(self.layout.seq_start[slot])]

    def _seek(self, offset: int, sweep: int) -> int:
        """``SequenceRandomizer::Seek``: to the first sequence starting at or after ``offset``.

        Seeking before the oldest chunk still held starts the sweep over, reseeded with the bare
        sweep index (CNTK's ``Reset(sweep)``, not ``Reset(seed + sweep)``: mirrored on purpose)."""
        if offset < self._slot_start(self.window_begin):
            self._reset(sweep)
        elif offset < self._slot_start(self.randomized_end):
            slot = self.window_begin
            while slot + 1 < self.corpus.num_chunks and self._slot_start(slot + 1) <= offset:
                slot += 1
            self.chunk_cursor = slot
            self.cursor = int(self.layout.seq_start[slot])
        starts = self.layout.starts
        while self.cursor < len(self.layout.length) and starts[self.cursor] < offset:
            self._advance()
        return starts[self.cursor]

    def _prepare_sweep(self, position: int) -> None:
        sweep = position // self.corpus.sweep_size
        if sweep != self.sweep:
            self.sweep = sweep
            self.layout = _SweepLayout(self.corpus, self.window, self.in_samples,
                                       self.seed + sweep)
            self._reset(self.seed + sweep)

    def set_state(self, position: int) -> None:
        self._prepare_sweep(position)
        assert self.sweep is not None  # _prepare_sweep set it
        offset = self._seek(position % self.corpus.sweep_size, self.sweep)
        self.pos = self.sweep * self.corpus.sweep_size + offset
        if self.rank >= self.corpus.num_chunks:
            self.pos = self.epoch_end

    def _walk(self, global_budget: int, local_budget: int, at_least_one: bool):
        """``GetNextSequenceDescriptions``: within one sweep, ``(sweep_end, epoch_end, global
        samples, local samples, [(chunk, index)])``."""
        self._prepare_sweep(self.pos)
        size = self.corpus.sweep_size
        in_sweep = self.pos % size
        if self.pos >= self.epoch_end:
            return self.pos >= size and in_sweep == 0, True, 0, 0, []
        global_budget = min(global_budget, size - in_sweep)
        taken_global = taken_local = 0
        sweep_end = epoch_end = False
        out = []
        layout, k, rank = self.layout, self.workers, self.rank
        while self.cursor < len(layout.length):
            t = self.cursor
            length = layout.length[t]
            local = layout.origin[t] % k == rank
            if not at_least_one:
                if taken_global + length > global_budget:
                    break
                if local and taken_local + length > local_budget:
                    break
            if self.pos + taken_global >= self.epoch_end:
                epoch_end = True
                sweep_end = in_sweep + taken_global >= size
                break
            if local:
                out.append((layout.chunk[t], layout.index[t]))
                taken_local += length
                at_least_one = False
            taken_global += length
            self._advance()
        sweep_end |= in_sweep + taken_global >= size
        epoch_end |= self.pos + taken_global >= self.epoch_end
        self.pos += taken_global
        return sweep_end, epoch_end, taken_global, taken_local, out

    def next_sequences(self, local_budget: int):
        """``GetNextSequences``: ``([(chunk, index)], sweep_end, epoch_end)``; a minibatch may go
        on into the next sweep while budget remains."""
        out: List[Tuple[int, int]] = []
        sweep_end = epoch_end = False
        taken_global = taken_local = 0
        while True:
            at_boundary = sweep_end
            ends, epoch, g, local, got = self._walk(_SIZE_MAX - taken_global,
                                                local_budget - taken_local, not at_boundary)
            sweep_end |= ends
            epoch_end |= epoch
            if g == 0 and at_boundary:
                break
            out.extend(got)
            taken_global += g
            taken_local += local
            if epoch_end or not sweep_end or local_budget <= taken_local:
                break
        return out, sweep_end, epoch_end


class NoRandomizer:
    """CNTK's ``NoRandomizer``: file order, wrapping at the end of a sweep; sequence ``i`` (a
    counter set from the position within the sweep) goes to worker ``i mod K``."""

    def __init__(self, corpus: ChunkTable) -> None:
        self.corpus = corpus
        self.workers, self.rank = 1, 0
        self.epoch_end = NO_LIMIT
        self.pos = 0

    def set_state(self, position: int) -> None:
        corpus = self.corpus
        in_sweep = position % corpus.sweep_size
        chunk = int(np.searchsorted(corpus.sample_offsets[:-1], in_sweep, side="right")) - 1
        offset = in_sweep - int(corpus.sample_offsets[chunk])
        self.chunk, self.index = chunk, 0
        walked = 0
        lengths = corpus.lengths[chunk]
        while self.index < len(lengths) and walked < offset:
            walked += lengths[self.index]
            self._move_next()
            if self.index == 0:
                break
        self.pos = position - offset + walked
        self.counter = int(corpus.first_sequence[self.chunk]) + self.index

    def _move_next(self) -> None:
        if self.index + 1 >= len(self.corpus.lengths[self.chunk]):
            self.chunk = (self.chunk + 1) % self.corpus.num_chunks
            self.index = 0
        else:
            self.index += 1

    def next_sequences(self, local_budget: int):
        size = self.corpus.sweep_size
        if self.pos >= self.epoch_end:
            return [], self.pos >= size and self.pos % size == 0, True
        sweep = self.pos // size
        taken_local = 0
        at_least_one = True
        out: List[Tuple[int, int]] = []
        sweep_end = epoch_end = False
        while taken_local < local_budget:
            length = self.corpus.lengths[self.chunk][self.index]
            local = self.counter % self.workers == self.rank
            if not at_least_one and local and taken_local + length > local_budget:
                break
            if self.pos >= self.epoch_end:
                epoch_end = True
                sweep_end = sweep != self.pos // size
                break
            if local:
                out.append((self.chunk, self.index))
                taken_local += length
                at_least_one = False
            self.pos += length
            self.counter += 1
            self._move_next()
        epoch_end |= self.pos >= self.epoch_end
        sweep_end |= sweep != self.pos // size
        return out, sweep_end, epoch_end
