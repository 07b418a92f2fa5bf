"""CNTK 2.7's reader API under its own names, with CNTK's behaviour (``cntk.io`` without CNTK).

Code written for ``cntk.io`` runs on recio by changing the import::

    from recio.sequence import cntk as C   # instead of: import cntk.io as C
    source = C.MinibatchSource(C.CTFDeserializer("train.ctf", C.StreamDefs(
        features=C.StreamDef(field="x", shape=3), labels=C.StreamDef(field="y", shape=5,
                                                                       is_sparse=True))),
        max_sweeps=1)
    while True:
        mb = source.next_minibatch(64, num_data_partitions=K, partition_index=rank)
        if not mb:
            break
        x = mb[source.streams.features].as_sequences()

The parameters, their defaults and the minibatches follow CNTK 2.7's C++ reader (its
``BlockRandomizer``/``ChunkRandomizer``/``SequenceRandomizer`` with ``std::mt19937_64``, its
``NoRandomizer`` and ``SequencePacker``), checked side by side against the real CNTK 2.7. The
semantics, the deliberate differences from CNTK (D3, D7, D8, D9) and the comparison with recio's
own :class:`recio.MinibatchSource` are on one page of the documentation: docs/cntk.md, "CNTK
formats and API".
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from recio.errors import SequenceError
from recio.sequence.cbf import CBFReader
from recio.sequence.ctf import CTFReader
from recio.sequence.ctf_streams import CTFStream
from recio.sequence.records import Sparse

SIZE_MAX = 2**64 - 1
# CNTK's names and values, so that code ported from cntk.io keeps them. recio's own
# MinibatchSource has no max_samples: its ``epoch_size`` says how long an epoch is, and its two
# values for "an epoch is one sweep" have names of their own (recio.sequence.SWEEP_FOREVER,
# SWEEP_ONCE).
#: ``max_samples``/``max_sweeps``: no limit (CNTK's value, SIZE_MAX)
INFINITELY_REPEAT = SIZE_MAX
#: ``max_samples``: exactly one sweep (CNTK's value, SIZE_MAX - 1)
FULL_DATA_SWEEP = SIZE_MAX - 1
#: CNTK's default window: 4 GB of 32 MB chunks
DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS = 128
_REQUEST_DATA_SIZE = SIZE_MAX >> 2   # CNTK's epoch size meaning "one sweep"
_NO_LIMIT = SIZE_MAX // 2            # CNTK's epoch size for INFINITELY_REPEAT
POSITION_KEY = "minibatchSourcePosition"


# --------------------------------------------------------------------------- CNTK's RNG

class MT19937_64:
    """``std::mt19937_64`` (NumPy has only the 32-bit Mersenne twister), refilled 312 values at
    a time with a vectorised twist; ``next()`` returns a Python int in ``[0, 2**64)``."""

    _N, _M = 312, 156
    _A = np.uint64(0xB5026F5AA96619E9)
    _UPPER, _LOWER = np.uint64(0xFFFFFFFF80000000), np.uint64(0x7FFFFFFF)

    def __init__(self, seed: int = 5489) -> None:
        state = [int(seed) & SIZE_MAX]
        for i in range(1, self._N):
            prev = state[-1]
            state.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & SIZE_MAX)
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

class _Corpus:
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


def _epoch_size(corpus: _Corpus, max_samples: int, max_sweeps: int) -> int:
    """``ReaderBase::StartEpoch``'s epoch size in samples."""
    if max_sweeps != INFINITELY_REPEAT:
        return corpus.sweep_size * max_sweeps
    if max_samples == FULL_DATA_SWEEP:
        return corpus.sweep_size
    if max_samples == INFINITELY_REPEAT:
        return _NO_LIMIT
    return max_samples


class _SweepLayout:
    """One sweep of the block randomizer: the shuffled chunk order and each chunk's window
    (``ChunkRandomizer::Randomize``), then ``shuffle`` lays out the sequences
    (``SequenceRandomizer``, done eagerly: CNTK shuffles lazily, window by window, but with one
    RNG stream and increasing positions, so the result is the same)."""

    def __init__(self, corpus: _Corpus, window: int, in_samples: bool, chunk_seed: int) -> None:
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


class _BlockRandomizer:
    """CNTK's ``BlockRandomizer`` for one worker: a global sample position walking the sweeps'
    shuffled orders, taking the sequences of chunks whose shuffled position is ``rank mod K``."""

    def __init__(self, corpus: _Corpus, window: int, in_samples: bool, seed: int) -> None:
        self.corpus, self.window, self.in_samples, self.seed = corpus, window, in_samples, seed
        self.sweep: Optional[int] = None
        # None until _prepare_sweep, which every seek and walk calls first; typed without the
        # None so that the per-sequence methods need no check
        self.layout: _SweepLayout = None  # type: ignore[assignment]
        self.pos = 0
        self.workers, self.rank = 1, 0
        self.epoch_end = _NO_LIMIT

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
            ends, epoch, g, l, got = self._walk(SIZE_MAX - taken_global,
                                                local_budget - taken_local, not at_boundary)
            sweep_end |= ends
            epoch_end |= epoch
            if g == 0 and at_boundary:
                break
            out.extend(got)
            taken_global += g
            taken_local += l
            if epoch_end or not sweep_end or local_budget <= taken_local:
                break
        return out, sweep_end, epoch_end


class _NoRandomizer:
    """CNTK's ``NoRandomizer``: file order, wrapping at the end of a sweep; sequence ``i`` (a
    counter set from the position within the sweep) goes to worker ``i mod K``."""

    def __init__(self, corpus: _Corpus) -> None:
        self.corpus = corpus
        self.workers, self.rank = 1, 0
        self.epoch_end = _NO_LIMIT
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


# --------------------------------------------------------------------------- the public names

class StreamDef(dict):
    """A stream of a deserializer, as ``cntk.io.StreamDef``: ``field`` (the name in the file:
    the ``|alias`` of a CTF file, the stream name of a CBF file; default: the key it is given
    under), ``shape`` (sample dimension), ``is_sparse``, ``defines_mb_size``."""

    def __init__(self, field: Optional[str] = None, shape: Optional[int] = None,
                 is_sparse: bool = False, transforms: Any = None, context: Any = None,
                 scp: Any = None, mlf: Any = None, broadcast: Any = None,
                 defines_mb_size: bool = False, max_sequence_length: int = 65535) -> None:
        unsupported = {"transforms": transforms, "context": context, "scp": scp, "mlf": mlf,
                       "broadcast": broadcast}
        given = [k for k, v in unsupported.items() if v]
        if given:
            raise ValueError(f"StreamDef({', '.join(given)}=...) belongs to CNTK's image and "
                             f"speech readers; recio reads CTF and CBF streams only")
        if shape is not None and not isinstance(shape, (int, np.integer)):
            dims = tuple(shape)
            if len(dims) != 1:
                raise ValueError(f"StreamDef shape must be one dimension, got {shape!r}")
            shape = dims[0]
        super().__init__(field=field, shape=None if shape is None else int(shape),
                         is_sparse=bool(is_sparse), defines_mb_size=bool(defines_mb_size))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def StreamDefs(**streams: StreamDef) -> Dict[str, StreamDef]:
    """``cntk.io.StreamDefs``: the streams of a deserializer by the names minibatches use."""
    return dict(streams)


class StreamInformation:
    """A stream of a source (``source.streams.<name>``): the key of a minibatch's data."""

    __slots__ = ("name", "is_sparse", "shape", "defines_mb_size")

    def __init__(self, name: str, is_sparse: bool, dim: Optional[int],
                 defines_mb_size: bool) -> None:
        self.name, self.is_sparse = name, is_sparse
        self.shape = (dim,) if dim is not None else ()
        self.defines_mb_size = defines_mb_size

    @property
    def m_name(self) -> str:
        """CNTK's field name for ``name``."""
        return self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, StreamInformation):
            return other.name == self.name
        return isinstance(other, str) and other == self.name

    def __repr__(self) -> str:
        return f"StreamInformation(name={self.name!r}, shape={self.shape}, " \
               f"is_sparse={self.is_sparse})"


class _Streams(OrderedDict):
    """``source.streams``: the StreamInformation of each stream, also as attributes."""

    def __getattr__(self, name: str) -> StreamInformation:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no stream {name!r}; the source has {list(self)}") from None


class CTFDeserializer:
    """``cntk.io.CTFDeserializer(filename, streams)``: a CNTK Text Format file; each
    ``StreamDef`` needs ``shape`` (and ``field``, the ``|alias`` in the file, unless it equals
    the key)."""

    def __init__(self, filename: str, streams: Mapping[str, StreamDef]) -> None:
        self.filename, self.streams = filename, _check_streams(streams, "CTFDeserializer", True)

    def open(self) -> Any:
        """The corpus (``recio.sequence.ctf.CTFReader``) with CNTK's chunking."""
        defs = [CTFStream(name, s["field"] or name, s["shape"], s["is_sparse"],
                          s["defines_mb_size"]) for name, s in self.streams.items()]
        return CTFReader(self.filename, defs)


class CBFDeserializer:
    """``cntk.io.CBFDeserializer(filename, streams={})``: a CNTK Binary Format file; ``streams``
    selects and renames the file's streams (``field`` = the name in the file); empty: all."""

    def __init__(self, filename: str, streams: Optional[Mapping[str, StreamDef]] = None) -> None:
        self.filename = filename
        self.streams = _check_streams(streams or {}, "CBFDeserializer", False)

    def open(self) -> Any:
        alias = {name: s["field"] or name for name, s in self.streams.items()}
        per_stream = any(s["defines_mb_size"] for s in self.streams.values())
        return CBFReader(self.filename, alias=alias or None, per_stream_counts=per_stream)


def _check_streams(streams: Mapping[str, Any], who: str, need_shape: bool) -> Dict[str, Any]:
    out = {}
    for name, s in dict(streams).items():
        s = s if isinstance(s, StreamDef) else StreamDef(**dict(s))
        if need_shape and s["shape"] is None:
            raise ValueError(f"{who}: stream {name!r} needs shape= (its sample dimension)")
        out[name] = s
    main = [n for n, s in out.items() if s["defines_mb_size"]]
    if len(main) > 1:
        raise ValueError(f"{who}: only one stream may define the minibatch size, got {main}")
    return out


class MinibatchData:
    """One stream of a minibatch: its sequences (``as_sequences()``), ``number_of_sequences``,
    ``number_of_samples`` (this stream's samples) and ``sweep_end``."""

    __slots__ = ("sequences", "number_of_sequences", "number_of_samples", "sweep_end",
                 "is_sparse")

    def __init__(self, sequences: List[Any], sweep_end: bool, is_sparse: bool) -> None:
        self.sequences = sequences
        self.number_of_sequences = len(sequences)
        self.number_of_samples = int(sum(s.num_samples if isinstance(s, Sparse) else len(s)
                                         for s in sequences))
        self.sweep_end = sweep_end
        self.is_sparse = is_sparse

    @property
    def end_of_sweep(self) -> bool:
        """CNTK's older name of ``sweep_end``."""
        return self.sweep_end

    @property
    def num_sequences(self) -> int:
        """Same as ``number_of_sequences``."""
        return self.number_of_sequences

    @property
    def num_samples(self) -> int:
        """Same as ``number_of_samples``."""
        return self.number_of_samples

    def as_sequences(self) -> List[Any]:
        """One entry per sequence: an ``(N, dim)`` array, or a ``recio.sequence.Sparse``
        (``.to_dense()`` gives the array) for a sparse stream."""
        return list(self.sequences)

    def asarray(self) -> np.ndarray:
        """The sequences as one ``(sequences, longest, dim)`` array, zero-padded."""
        dense = [s.to_dense() if isinstance(s, Sparse) else np.asarray(s)
                 for s in self.sequences]
        if not dense:
            return np.zeros((0, 0, 0), np.float32)
        longest = max(len(d) for d in dense)
        out = np.zeros((len(dense), longest) + dense[0].shape[1:], dense[0].dtype)
        for i, d in enumerate(dense):
            out[i, :len(d)] = d
        return out

    def __repr__(self) -> str:
        return (f"MinibatchData(number_of_sequences={self.number_of_sequences}, "
                f"number_of_samples={self.number_of_samples}, sweep_end={self.sweep_end})")


class _Minibatch(dict):
    """``next_minibatch``'s result: ``{StreamInformation: MinibatchData}``; a stream's name
    works as a key too. Empty (falsy) when the source has ended."""

    def __getitem__(self, key: Any) -> MinibatchData:
        if isinstance(key, str):
            for info, data in self.items():
                if info.name == key:
                    return data
        return dict.__getitem__(self, key)


def _limit(value: Any, name: str) -> int:
    """A ``max_samples``/``max_sweeps`` value (None: ``INFINITELY_REPEAT``)."""
    if value is None:
        return INFINITELY_REPEAT
    value = int(value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    return value


class MinibatchSource:
    """``cntk.io.MinibatchSource`` with CNTK 2.7's parameters, defaults and minibatches (see the
    module docstring). ``deserializers``: a ``CTFDeserializer`` or ``CBFDeserializer`` (or a list
    holding one)."""

    def __init__(self, deserializers: Any, max_samples: int = INFINITELY_REPEAT,
                 max_sweeps: int = INFINITELY_REPEAT,
                 randomization_window_in_chunks: int = DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS,
                 randomization_window_in_samples: int = 0, randomization_seed: int = 0,
                 trace_level: Any = None, multithreaded_deserializer: Any = None,
                 frame_mode: bool = False, truncation_length: int = 0, randomize: bool = True,
                 max_errors: int = 0) -> None:
        if isinstance(deserializers, (list, tuple)):
            if len(deserializers) != 1:
                raise ValueError(f"recio reads one deserializer per MinibatchSource, got "
                                 f"{len(deserializers)} (joining several by sequence key is "
                                 f"not supported)")
            deserializers = deserializers[0]
        if not hasattr(deserializers, "open"):
            raise TypeError(f"deserializers must be a CTFDeserializer or CBFDeserializer, not "
                            f"{type(deserializers).__name__}")
        max_samples, max_sweeps = _limit(max_samples, "max_samples"), \
            _limit(max_sweeps, "max_sweeps")
        if max_samples != INFINITELY_REPEAT and max_sweeps != INFINITELY_REPEAT:
            raise ValueError("max_samples and max_sweeps are mutually exclusive; give one")
        if max_samples == 0:
            raise ValueError("max_samples cannot be 0")
        if truncation_length:
            raise ValueError("truncation_length (truncated BPTT) is not supported by recio")
        if not randomize:
            randomization_window_in_chunks = randomization_window_in_samples = 0
        chunks_window, samples_window = int(randomization_window_in_chunks), \
            int(randomization_window_in_samples)
        if chunks_window < 0 or samples_window < 0:
            raise ValueError("randomization windows must be >= 0")
        if chunks_window and samples_window:
            raise ValueError("randomization_window_in_chunks and randomization_window_in_samples "
                             "are mutually exclusive: to give a window in samples, also pass "
                             "randomization_window_in_chunks=0 (as CNTK requires)")
        if max_samples != INFINITELY_REPEAT and max_samples != FULL_DATA_SWEEP and \
                max_samples > _NO_LIMIT and (chunks_window or samples_window):
            raise ValueError(f"max_samples={max_samples} is too big (CNTK's epoch size limit "
                             f"is {_NO_LIMIT})")
        self.deserializer = deserializers
        self.corpus = deserializers.open()
        definitions = dict(deserializers.streams)
        names = list(self.corpus.stream_names)
        if not definitions:  # a CBF with no StreamDefs: every stream of the file
            definitions = {n: StreamDef() for n in names}
        self.streams = _Streams()
        for name, s in definitions.items():
            is_sparse = bool(s["is_sparse"])
            dim = s["shape"]
            if isinstance(self.corpus, CBFReader):  # the file says what each stream is
                found = next((x for x in self.corpus.streams if x.name == name), None)
                if found is not None:
                    is_sparse, dim = found.is_sparse, found.sample_dim
            self.streams[name] = StreamInformation(name, is_sparse, dim, s["defines_mb_size"])
        main = [n for n, s in definitions.items() if s["defines_mb_size"]]
        column = names.index(main[0]) if main else None
        lengths = []
        for c in range(self.corpus.num_chunks):
            counts = np.asarray(self.corpus.chunk_sample_counts(c))
            if counts.ndim == 2:
                counts = counts[:, column] if column is not None else counts.max(axis=1)
            lengths.append(counts.astype(np.int64).tolist())
        self._table = _Corpus(lengths)
        if self._table.sweep_size == 0:
            raise SequenceError(f"{deserializers.filename} has no samples; nothing to read",
                                path=deserializers.filename)
        if frame_mode and any(n > 1 for c in lengths for n in c):
            raise ValueError("frame_mode=True needs sequences of one sample; this input has "
                             "longer sequences")
        self.max_samples, self.max_sweeps = max_samples, max_sweeps
        self.randomize = bool(chunks_window or samples_window)
        self.randomization_seed = int(randomization_seed)
        if samples_window:
            self._enumerator: Any = _BlockRandomizer(self._table, samples_window, True,
                                                     self.randomization_seed)
        elif chunks_window:
            self._enumerator = _BlockRandomizer(self._table, chunks_window, False,
                                                self.randomization_seed)
        else:
            self._enumerator = _NoRandomizer(self._table)
        self._epoch_size = _epoch_size(self._table, max_samples, max_sweeps)
        self._config: Optional[Tuple[int, int, int]] = None  # (size, K, rank) in use
        self._state = 0           # position after the last returned minibatch
        self._ahead: Any = None   # the minibatch CNTK has already read ahead
        self._pending: Optional[int] = None
        self._ended = False
        self._chunks: "OrderedDict[int, List[Any]]" = OrderedDict()
        windows = chunks_window or 1
        if samples_window:
            windows = max(1, -(-samples_window // max(1, min(
                (s for s in self._table.chunk_samples if s), default=1))))
        self._keep_chunks = min(self._table.num_chunks, windows + 2)

    # -- reading ------------------------------------------------------------------------------
    def _budget(self, size: int, workers: int, rank: int) -> int:
        """``SequencePacker::SetConfiguration``: this worker's share, at least one sample."""
        return max(1, size // workers + (1 if size % workers > rank else 0))

    def _read(self) -> Any:
        return self._enumerator.next_sequences(self._local_budget)

    def _set_state(self, position: int) -> None:
        self._enumerator.set_state(position)
        self._state = self._enumerator.pos

    def next_minibatch(self, minibatch_size_in_samples: int, input_map: Any = None,
                       device: Any = None, num_data_partitions: Optional[int] = None,
                       partition_index: Optional[int] = None) -> Dict[Any, MinibatchData]:
        """The next minibatch of this worker: ``{stream: MinibatchData}``, empty at the end.

        ``num_data_partitions``/``partition_index``: this worker's place among K workers, each
        calling with the same size (its share is about ``size / K``, at least one sample)."""
        size = int(minibatch_size_in_samples)
        if size <= 0:
            raise ValueError("minibatch_size_in_samples must be > 0")
        workers = 1 if num_data_partitions is None else int(num_data_partitions)
        rank = 0 if partition_index is None else int(partition_index)
        if workers < 1 or not 0 <= rank < workers:
            raise ValueError(f"partition_index {rank} is not in [0, num_data_partitions="
                             f"{workers})")
        if self._ended:
            return _Minibatch()
        enum = self._enumerator
        if self._config is None:  # ReaderShim::StartEpoch
            self._ahead = None
            enum.workers, enum.rank, enum.epoch_end = workers, rank, self._epoch_size
            self._local_budget = self._budget(size, workers, rank)
            self._set_state(0)
            self._config = (size, workers, rank)
        if self._config != (size, workers, rank) or self._pending is not None:
            if self._pending is not None:  # ReaderShim::SetState, skipped when already there
                if self._pending != self._state:
                    self._set_state(self._pending)
                self._pending = None
            self._ahead = None  # ReaderShim::SetConfiguration drops the read-ahead and rewinds
            enum.workers, enum.rank = workers, rank
            self._local_budget = self._budget(size, workers, rank)
            self._set_state(self._state)
            self._config = (size, workers, rank)
        taken = self._ahead if self._ahead is not None else self._read()
        self._state = enum.pos
        self._ahead = None
        sequences, sweep_end, epoch_end = taken
        if not epoch_end:
            # CNTK reads the next minibatch ahead with the current settings; what it reads
            # moves the randomizer's window of chunks, which a later seek depends on
            self._ahead = self._read()
        self._ended = epoch_end
        if not sequences and epoch_end:
            return _Minibatch()
        return self._assemble(sequences, sweep_end, input_map)

    def _chunk(self, c: int) -> List[Any]:
        chunk = self._chunks.get(c)
        if chunk is None:
            chunk = self.corpus.read_chunk(c)
            self._chunks[c] = chunk
            while len(self._chunks) > self._keep_chunks:
                self._chunks.popitem(last=False)
        else:
            self._chunks.move_to_end(c)
        return chunk

    def _assemble(self, sequences: Iterable[Tuple[int, int]], sweep_end: bool,
                  input_map: Any) -> Dict[Any, MinibatchData]:
        data: Dict[str, List[Any]] = {name: [] for name in self.streams}
        for c, j in sequences:
            seq = self._chunk(c)[j]
            for name in data:
                data[name].append(seq[name])
        out = _Minibatch()
        if input_map:
            for key, info in dict(input_map).items():
                name = info.name if isinstance(info, StreamInformation) else str(info)
                out[key] = MinibatchData(data[name], sweep_end, self.streams[name].is_sparse)
            return out
        for name, info in self.streams.items():
            out[info] = MinibatchData(data[name], sweep_end, info.is_sparse)
        return out

    # -- checkpoints --------------------------------------------------------------------------
    def get_checkpoint_state(self) -> Dict[str, int]:
        """CNTK's checkpoint: the position after the last returned minibatch."""
        return {POSITION_KEY: int(self._state)}

    @property
    def current_position(self) -> Dict[str, int]:
        """Same as ``get_checkpoint_state()``."""
        return self.get_checkpoint_state()

    def restore_from_checkpoint(self, checkpoint: Mapping[str, Any]) -> None:
        """Continue from a ``get_checkpoint_state()`` of a source over the same data and
        settings (of this worker: positions are per worker, as in CNTK)."""
        try:
            position = int(checkpoint[POSITION_KEY])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"not a MinibatchSource checkpoint (no integer "
                             f"{POSITION_KEY!r}): {checkpoint!r}") from None
        if position < 0:
            raise ValueError(f"checkpoint position {position} is negative")
        if position != self._state:
            self._ahead = None
            self._set_state(position)
        self._pending = position
        self._ended = False
        self._config = None

    def stream_info(self, name: str) -> StreamInformation:
        """The StreamInformation of stream ``name``."""
        return self.streams[name] if name in self.streams else getattr(self.streams, name)

    def stream_infos(self) -> List[StreamInformation]:
        """Every stream's StreamInformation."""
        return list(self.streams.values())

    def close(self) -> None:
        """Drop cached chunks and close the input."""
        self._chunks.clear()
        close = getattr(self.corpus, "close", None)
        if close:
            close()

    def __enter__(self) -> "MinibatchSource":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["MinibatchSource", "MinibatchData", "StreamDef", "StreamDefs", "StreamInformation",
           "CTFDeserializer", "CBFDeserializer", "INFINITELY_REPEAT", "FULL_DATA_SWEEP",
           "DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS", "MT19937_64"]

