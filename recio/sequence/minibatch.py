"""A CNTK-style ``MinibatchSource``: sample-counted minibatches, nominal time axis, exact resume.

Semantics (those of CNTK's ``MinibatchSource``):

- A *sample* is one item of a sequence; a minibatch of size K packs whole sequences, in the
  randomized order, while their total stays within K samples. A sequence longer than K forms a
  minibatch of its own. A sequence's size is its largest stream, or the stream named by
  ``defines_mb_size``.
- The corpus of M samples is repeated on a nominal time axis; sweep j covers ``[jM, (j+1)M)`` and
  is shuffled within itself only. The order of sweep j is a pure function of ``(seed, j)``
  (and the corpus), so a checkpoint is just ``(sweep, offset)`` and restoring never replays data.
  Minibatches run on across sweep boundaries, so for single-sample data ``next_minibatch(K)``
  equals K calls of ``next_minibatch(1)``.
- Randomization is chunk-wise: the chunk order is shuffled per sweep, then each sequence gets a
  random place within ``randomization_window`` samples after the start of its chunk on the sweep's
  time axis. A chunk is read when its first sequence is due and dropped after its last, so at
  most about ``window + one chunk`` samples are resident (plus the current minibatch). Building
  a sweep's order is O(number of sequences) with no full sort (keys are bucketed, a bucket is
  sorted when reached), so restoring at sweep 10,000 costs what restoring at sweep 1 does.
- With ``num_workers = K``, all workers compute the same global minibatch; worker r keeps the
  sequences whose sample-midpoint falls in the r-th K-th of it (contiguous, about size/K samples).
  The union of the shares is the global minibatch and the checkpoint is global, so it restores
  with any number of workers. No worker idles while another has data: a global minibatch takes
  at least K sequences (past the budget if need be) and, when the midpoints would leave a worker
  out, is cut into K runs of equal sequence counts instead.
  (``recio.sequence.cntk.MinibatchSource`` has CNTK's own rules instead: per-worker budgets and
  sequence ``i mod K``.)

The corpora it reads (``RecordCorpus``, ``MemoryCorpus``, ``ConcatCorpus``, and the protocol
any corpus follows) are ``recio.sequence.corpora``; the order of a sweep is
``recio.sequence.sweep_order``.
"""
from __future__ import annotations

import heapq
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

import numpy as np

from recio.errors import SequenceError
from recio.records.closed import check_open
from recio.sequence import records as sequence
from recio.sequence.cbf import CBFReader
from recio.sequence.corpora import DEFAULT_CHUNK_SAMPLES, open_corpus, sequence_sizes, source_name
from recio.sequence.ctf_streams import CTFStream
from recio.sequence.sweep_order import SweepPlan, make_sweep_plan

# The two ``epoch_size`` values that are not a number of samples. Both make an epoch one sweep
# (one pass over the corpus); they differ in when the source ends. Their names are not CNTK's
# INFINITELY_REPEAT / FULL_DATA_SWEEP on purpose: ``recio.sequence.cntk`` keeps those for CNTK's
# ``max_samples`` (2**64 - 1 and 2**64 - 2, a count of samples across workers), a different
# parameter with a different rule, and one name must not mean both.
#: ``epoch_size``: an epoch is one sweep, and the source never ends (``max_sweeps`` can end it)
SWEEP_FOREVER = sys.maxsize
#: ``epoch_size`` (the default): an epoch is one sweep, and the source ends after it (after
#: ``max_sweeps`` sweeps when that is given)
SWEEP_ONCE = sys.maxsize - 2

_STATE_FORMAT = "recio.MinibatchSource"
_STATE_VERSION = 1


class Minibatch:
    """One worker's share of a global minibatch.

    ``streams[name]`` (also ``mb[name]``) is a list with one entry per sequence: an ``N x dim``
    array (N = that sequence's samples in that stream) or a ``Sparse``; ``padded(name)`` gives
    ``(B x T x dim array, B x T bool mask)``. ``ids`` are the sequences' positions in corpus order.
    ``num_samples`` counts this share's samples (mb-size definition), ``global_num_samples`` the
    whole minibatch's. ``sweep_end``: the minibatch holds the last sequence of a sweep;
    ``end_of_epoch``: it reaches or crosses an epoch boundary. An empty share (more workers than
    sequences) has ``num_sequences == 0``; the source returns ``None`` only when it is done.
    """

    __slots__ = ("streams", "ids", "num_samples", "num_sequences", "global_num_samples",
                 "global_num_sequences", "sweep", "sweep_end", "end_of_epoch")

    def __init__(self, streams, ids, num_samples, global_num_samples, global_num_sequences,
                 sweep, sweep_end, end_of_epoch) -> None:
        self.streams: Dict[str, List[Any]] = streams
        self.ids: np.ndarray = ids
        self.num_samples: int = num_samples
        self.num_sequences: int = len(ids)
        self.global_num_samples: int = global_num_samples
        self.global_num_sequences: int = global_num_sequences
        self.sweep: int = sweep
        self.sweep_end: bool = sweep_end
        self.end_of_epoch: bool = end_of_epoch

    @property
    def samples_per_stream(self) -> Dict[str, int]:
        """``{stream: samples of this share in that stream}``."""
        return {name: int(sum(_num_samples(s) for s in seqs))
                for name, seqs in self.streams.items()}

    def __getitem__(self, name: str) -> List[Any]:
        return self.streams[name]

    def __len__(self) -> int:
        return self.num_sequences

    def __repr__(self) -> str:
        return (f"Minibatch(num_sequences={self.num_sequences}, num_samples={self.num_samples}, "
                f"sweep={self.sweep}, sweep_end={self.sweep_end}, "
                f"end_of_epoch={self.end_of_epoch}, streams={list(self.streams)})")

    def padded(self, name: str, pad_value: float = 0) -> Tuple[np.ndarray, np.ndarray]:
        """``(data B x T x dim, mask B x T)`` for a stream; sparse streams are densified.

        The stream's sequences must share one layout (dense or sparse, dtype, dimension);
        ``SequenceError`` names the first sequence that differs (corpora check this when
        they read a record, so it means sequences of different sources were mixed)."""
        raw = self.streams[name]
        if raw:
            first = sequence.stream_layout(raw[0])
            for i, s in enumerate(raw):
                if sequence.stream_layout(s) != first:
                    problem = sequence.layout_mismatch({name: s}, {name: first},
                                                       f"sequence {int(self.ids[0])}")
                    raise SequenceError(f"sequence {int(self.ids[i])} of the corpus: {problem}; "
                                        f"padded() needs one layout")
        seqs = [s.to_dense() if hasattr(s, "to_dense") else np.asarray(s) for s in raw]
        lengths = [len(s) for s in seqs]
        t = max(lengths, default=0)
        tail = seqs[0].shape[1:] if seqs else ()
        dtype = seqs[0].dtype if seqs else np.float32
        data = np.full((len(seqs), t) + tuple(tail), pad_value, dtype=dtype)
        mask = np.zeros((len(seqs), t), dtype=bool)
        for i, s in enumerate(seqs):
            data[i, :len(s)] = s
            mask[i, :len(s)] = True
        return data, mask


def _check_source_arguments(randomization_window: Optional[int], seed: int, epoch_size: int,
                            max_sweeps: Optional[int], worker_rank: int, num_workers: int) -> None:
    """Refuse ``MinibatchSource`` settings outside their ranges before any file is opened."""
    if num_workers < 1 or not 0 <= worker_rank < num_workers:
        raise ValueError(f"worker_rank must be in 0..num_workers-1 and num_workers >= 1; got "
                         f"worker_rank={worker_rank}, num_workers={num_workers}")
    if randomization_window is not None and randomization_window < 1:
        raise ValueError(f"randomization_window must be >= 1 sample, not "
                         f"{randomization_window}")
    if epoch_size is None or epoch_size < 1:
        raise ValueError(f"epoch_size must be >= 1 sample, recio.sequence.SWEEP_FOREVER or "
                         f"recio.sequence.SWEEP_ONCE, not {epoch_size}")
    if epoch_size > sys.maxsize:  # CNTK's constants are 2**64 - 1 and 2**64 - 2
        raise ValueError(f"epoch_size={epoch_size} is not a size recio.MinibatchSource takes: "
                         f"recio.sequence.cntk's INFINITELY_REPEAT and FULL_DATA_SWEEP are CNTK's "
                         f"max_samples values; for an epoch of one sweep pass "
                         f"recio.sequence.SWEEP_FOREVER (never ends) or "
                         f"recio.sequence.SWEEP_ONCE (ends after one sweep)")
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0, not {seed}")
    if max_sweeps is not None and max_sweeps < 1:
        raise ValueError(f"max_sweeps must be >= 1 or None, not {max_sweeps}")


def _ctf_definitions(streams: Union[None, Sequence[str], Sequence[CTFStream],
                                     Mapping[str, str]]
                     ) -> Tuple[Union[None, Sequence[str], Mapping[str, str]],
                                Optional[List[CTFStream]]]:
    """``streams`` as names (or a name map), and the CTF stream definitions when it is those
    (for ``.ctf`` inputs, which do not name their streams; every one of them is returned)."""
    if streams is None or isinstance(streams, Mapping) \
            or not any(isinstance(s, CTFStream) for s in streams):
        return cast(Union[Sequence[str], Mapping[str, str], None], streams), None
    definitions = [s for s in streams if isinstance(s, CTFStream)]
    if len(definitions) != len(streams):
        raise TypeError("streams mixes CTFStream definitions with other values; give "
                        "CTF stream definitions alone")
    return [s.name for s in definitions], definitions


def _stream_map(streams: Union[None, Sequence[str], Mapping[str, str]], names: List[str],
                defines_mb_size: Optional[str]) -> Dict[str, str]:
    """``{output name: stream name}`` for ``streams`` (None: every stream of the input), every
    stream checked to be in the input, and ``defines_mb_size`` to be an output or input name."""
    if streams is None:
        stream_map = {n: n for n in names}
    elif isinstance(streams, Mapping):
        stream_map = dict(streams)
    else:
        stream_map = {n: n for n in streams}
    for alias, name in stream_map.items():
        if name not in names:
            raise ValueError(f"stream {name!r} (for {alias!r}) is not in the input; it has "
                             f"{names}")
    if defines_mb_size is not None and defines_mb_size not in stream_map \
            and defines_mb_size not in names:
        raise ValueError(f"defines_mb_size={defines_mb_size!r} is not one of the streams "
                         f"{list(stream_map)}")
    return stream_map


class MinibatchSource:
    """Sample-counted minibatches over sequence or image records, with exact checkpoint/restore.

    ``files``: a source as every recio reader takes it (``recio.records.source``: a path or
    URL, a list, ``a.rec;b.rec``, a folder, a glob, a shard set's manifest) of ``.rec`` files
    (sequence records with a ``.len`` sidecar, or image records) or local ``.cbf``/``.ctf``
    files; or a corpus object, or a list of them. ``streams``: None (all), a
    list of stream names, or ``{output name: stream name}``; for ``.ctf`` files, which do not
    name their streams, the list of :class:`recio.sequence.ctf_streams.CTFStream` definitions (e.g.
    ``read_header(header_file)``), every one of them returned. ``randomization_window`` in
    samples (None: whole corpus).
    ``epoch_size`` in samples, :data:`SWEEP_FOREVER` (epoch = sweep, forever) or
    :data:`SWEEP_ONCE` (the default: epoch = sweep, stop after one unless ``max_sweeps``).
    (CNTK's ``INFINITELY_REPEAT``/``FULL_DATA_SWEEP`` belong to ``recio.sequence.cntk``, whose
    ``MinibatchSource`` takes CNTK's ``max_samples``.)
    """

    def __init__(self, files: Any,
                 streams: Union[None, Sequence[str], Sequence[CTFStream],
                                Mapping[str, str]] = None,
                 randomize: bool = True, randomization_window: Optional[int] = None, seed: int = 0,
                 epoch_size: int = SWEEP_ONCE, max_sweeps: Optional[int] = None,
                 defines_mb_size: Optional[str] = None, worker_rank: int = 0,
                 num_workers: int = 1, chunk_samples: Optional[int] = None) -> None:
        _check_source_arguments(randomization_window, seed, epoch_size, max_sweeps,
                                worker_rank, num_workers)
        if chunk_samples is None:
            chunk_samples = DEFAULT_CHUNK_SAMPLES if randomization_window is None else \
                max(1, min(DEFAULT_CHUNK_SAMPLES, randomization_window // 8))
        names_or_map, ctf_streams = _ctf_definitions(streams)
        if ctf_streams and defines_mb_size is None:  # as in CNTK, a stream's flag sets it
            defines_mb_size = next((s.name for s in ctf_streams if s.defines_mb_size), None)
        self.corpus = open_corpus(files, chunk_samples,
                                  per_stream_counts=defines_mb_size is not None,
                                  ctf_streams=ctf_streams)
        names = list(self.corpus.stream_names)
        self.stream_map = _stream_map(names_or_map, names, defines_mb_size)
        self.randomize = bool(randomize)
        self.seed = int(seed)
        self.epoch_size = int(epoch_size)
        self.max_sweeps = max_sweeps
        if self.epoch_size == SWEEP_ONCE and max_sweeps is None:
            self.max_sweeps = 1
        self.worker_rank, self.num_workers = int(worker_rank), int(num_workers)
        self.defines_mb_size = defines_mb_size

        # per-sequence sizes, chunk of each sequence and index inside it (from counts alone)
        mb_column = None
        if defines_mb_size is not None:
            mb_column = names.index(self.stream_map.get(defines_mb_size, defines_mb_size))
        sizes, chunk_len = sequence_sizes(self.corpus, mb_column, defines_mb_size)
        self.sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        self.chunk_first = np.concatenate([[0], np.cumsum(chunk_len)]).astype(np.int64)
        self.seq_chunk = np.repeat(np.arange(len(chunk_len), dtype=np.int64), chunk_len)
        self.chunk_samples = np.bincount(self.seq_chunk, weights=self.sizes,
                                         minlength=len(chunk_len)).round().astype(np.int64)
        self.num_sequences = len(self.sizes)
        self.num_samples = int(self.sizes.sum())
        #: the inputs' names, for messages
        self.where = ";".join(filter(None, map(source_name, files))) \
            if isinstance(files, (list, tuple)) else source_name(files)
        if self.num_samples == 0:
            raise SequenceError(f"the input has {self.num_sequences} sequences and no samples; "
                                f"nothing to make minibatches from", path=self.where)
        self.window = self.num_samples if randomization_window is None else \
            int(min(randomization_window, self.num_samples))
        self._epoch = self.num_samples if self.epoch_size in (SWEEP_FOREVER, SWEEP_ONCE) \
            else self.epoch_size
        self._chunks: Dict[int, List[Dict[str, Any]]] = {}
        self._heap: List[Tuple[float, int]] = []  # (last key, chunk) of resident chunks
        self._plan: Optional[SweepPlan] = None
        self._sweep = 0
        self._offset = 0  # index into the sweep's order of the next sequence

    # -- the order of a sweep -----------------------------------------------------------------
    def sweep_order(self, sweep: int) -> np.ndarray:
        """Sequence ids (corpus order) of sweep ``sweep``: a pure function of (seed, sweep)."""
        plan = self._make_plan(sweep)
        return plan.ids(0, plan.n).astype(np.int64)

    def _make_plan(self, sweep: int) -> SweepPlan:
        """The order of sweep ``sweep`` (``recio.sequence.sweep_order``). Costs O(n)."""
        return make_sweep_plan(sweep, self.sizes, self.seq_chunk, self.chunk_samples,
                               self.num_samples, self.window, self.seed, self.randomize)

    def _plan_for(self, sweep: int) -> SweepPlan:
        if self._plan is None or self._plan.sweep != sweep:
            self._plan = self._make_plan(sweep)
            # a chunk is finished once the reader is past the largest key of its sequences
            keys = self._plan.keys
            nonempty = self.chunk_first[1:] > self.chunk_first[:-1]
            last = np.full(len(self.chunk_samples), -np.inf)
            if len(keys):
                last[nonempty] = np.maximum.reduceat(keys, self.chunk_first[:-1][nonempty])
            self._chunk_last_key = last
        return self._plan

    # -- reading ------------------------------------------------------------------------------
    def _finished(self) -> bool:
        return self.max_sweeps is not None and self._sweep >= self.max_sweeps

    def next_minibatch(self, minibatch_size_in_samples: int) -> Optional[Minibatch]:
        """The next global minibatch of at most this many samples (this worker's share of it).

        Returns ``None`` when a finite source (``SWEEP_ONCE`` / ``max_sweeps``) is done. After
        ``close()``: ``ClosedError``.
        """
        check_open(self._closed, "MinibatchSource", self.where)
        size = int(minibatch_size_in_samples)
        if size < 1:
            raise ValueError(f"minibatch_size_in_samples must be >= 1, not {size}")
        if self._finished():
            return None
        n = self.num_sequences
        start_sweep = self._sweep
        t0 = self._sweep * self.num_samples + self._plan_for(self._sweep).samples_before(
            self._offset)
        spans: List[Tuple[SweepPlan, int, int]] = []
        total = count = 0
        sweep_end = False
        # Sequences in sweep order until the budget is spent. Every worker gets a sequence while
        # data remains: a minibatch of fewer sequences than workers takes more, one at a time,
        # past the budget (CNTK gives each worker at least one sample for the same reason).
        while True:
            if self._offset >= n:  # end of a sweep: go on to the next one unless that was the last
                self._sweep += 1
                self._offset = 0
                if self._finished():
                    break
            plan = self._plan_for(self._sweep)
            pos = self._offset
            end, used = plan.take(pos, size - total)
            if end <= pos:
                if total and count >= self.num_workers:
                    break
                # an over-long sequence alone, or one more for a worker that would idle
                end, used = pos + 1, int(self.sizes[plan.ids(pos, pos + 1)[0]])
            if spans and spans[-1][0] is plan and spans[-1][2] == pos:  # one span per sweep
                spans[-1] = (plan, spans[-1][1], end)
            else:
                spans.append((plan, pos, end))
            total += used
            count += end - pos
            self._offset = end
            if end >= n:
                sweep_end = True
            elif count >= self.num_workers:
                break
        if not spans:
            return None
        mb = self._assemble(spans, total, start_sweep, sweep_end)
        t1 = t0 + total
        mb.end_of_epoch = (t1 // self._epoch) > (t0 // self._epoch)
        if self._finished():
            self._drop_chunks(None)
        elif self._offset:
            plan = self._plan_for(self._sweep)
            current = plan.keys[plan.ids(self._offset - 1, self._offset)[0]]
            self._drop_chunks(float(current))
        else:  # the minibatch ended a sweep: nothing of the next one is needed yet
            self._drop_chunks(None)
        return mb

    def _assemble(self, spans, total, start_sweep, sweep_end) -> Minibatch:
        ids_all = np.concatenate([plan.ids(a, b) for plan, a, b in spans])
        k = self.num_workers
        if k > 1:
            sizes = self.sizes[ids_all]
            before = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            if total > 0:
                owner = np.minimum((2 * before + sizes) * k // (2 * total), k - 1)
            else:
                owner = np.arange(len(ids_all)) % k
            if len(ids_all) >= k and len(np.unique(owner)) < k:
                # the sample midpoints leave a worker out (very unequal sequences): contiguous
                # shares of equal sequence counts instead, so no worker idles
                owner = np.arange(len(ids_all)) * k // len(ids_all)
            keep = owner == self.worker_rank
        else:
            keep = np.ones(len(ids_all), dtype=bool)
        streams: Dict[str, List[Any]] = {alias: [] for alias in self.stream_map}
        items = list(self.stream_map.items())
        seq_chunk, first = self.seq_chunk, self.chunk_first
        pos = 0
        for i, (plan, a, b) in enumerate(spans):
            if i:  # a new sweep starts inside this minibatch: the old sweep's chunks are done
                self._drop_chunks(None)
            seg = ids_all[pos:pos + b - a][keep[pos:pos + b - a]]
            pos += b - a
            chunk_ids = seq_chunk[seg]
            get = self._chunks.get
            for c, j in zip(chunk_ids.tolist(), (seg - first[chunk_ids]).tolist()):
                chunk = get(c)
                if chunk is None:
                    chunk = self._load_chunk(c)
                seq = chunk[j]
                for alias, name in items:
                    streams[alias].append(seq[name])
        mine = ids_all[keep]
        return Minibatch(streams, mine, int(self.sizes[mine].sum()), total, len(ids_all),
                         start_sweep, sweep_end, False)

    def _load_chunk(self, c: int) -> List[Dict[str, Any]]:
        chunk = self.corpus.read_chunk(c)
        expected = int(self.chunk_first[c + 1] - self.chunk_first[c])
        if len(chunk) != expected:
            raise SequenceError(f"chunk {c} has {len(chunk)} sequences, its sample counts "
                                f"promised {expected}")
        self._chunks[c] = chunk
        heapq.heappush(self._heap, (float(self._chunk_last_key[c]), c))
        return chunk

    def _drop_chunks(self, upto: Optional[float]) -> None:
        """Forget chunks whose last sequence lies at or before sort key ``upto`` (None: all)."""
        if upto is None:
            self._chunks.clear()
            self._heap.clear()
            return
        heap = self._heap
        while heap and heap[0][0] <= upto:
            self._chunks.pop(heapq.heappop(heap)[1], None)

    @property
    def resident_samples(self) -> int:
        """Samples of the chunks currently held in memory (bounded by about window + a chunk)."""
        return int(sum(self.chunk_samples[c] for c in self._chunks))

    # -- checkpoints --------------------------------------------------------------------------
    def _fingerprint(self) -> Dict[str, Any]:
        return {"num_sequences": self.num_sequences, "num_samples": self.num_samples,
                "num_chunks": int(len(self.chunk_samples)), "seed": self.seed,
                "randomize": self.randomize, "window": self.window}

    def get_checkpoint_state(self) -> Dict[str, Any]:
        """A small JSON-serialisable dict: the global position on the nominal time axis."""
        within = self._plan_for(self._sweep).samples_before(self._offset) \
            if self._offset < self.num_sequences else self.num_samples
        return {"format": _STATE_FORMAT, "version": _STATE_VERSION, "sweep": self._sweep,
                "offset": self._offset,
                "sample_position": self._sweep * self.num_samples + within,
                "corpus": self._fingerprint()}

    #: set by ``close()``
    _closed = False

    def restore_from_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from ``get_checkpoint_state``, any worker count): no replay."""
        check_open(self._closed, "MinibatchSource", self.where)
        if state.get("format") != _STATE_FORMAT or state.get("version") != _STATE_VERSION:
            raise ValueError(f"not a {_STATE_FORMAT} v{_STATE_VERSION} checkpoint: "
                             f"format={state.get('format')!r}, version={state.get('version')!r}")
        expected = self._fingerprint()
        if dict(state.get("corpus", {})) != expected:
            raise ValueError(f"checkpoint was taken over a different corpus or setting "
                             f"({state.get('corpus')}); this source is {expected}")
        sweep, offset = int(state["sweep"]), int(state["offset"])
        if sweep < 0 or not 0 <= offset <= self.num_sequences:
            raise ValueError(f"checkpoint position sweep={sweep} offset={offset} is out of range")
        self._drop_chunks(None)
        self._sweep, self._offset = sweep, offset
        if self._finished():
            return
        self._plan_for(sweep)

    @property
    def position(self) -> Tuple[int, int]:
        """``(sweep, index of the next sequence within that sweep's order)``."""
        return self._sweep, self._offset

    @property
    def stream_names(self) -> List[str]:
        """Names of the streams in each minibatch."""
        return list(self.stream_map)

    def close(self) -> None:
        """Drop resident chunks and close the inputs: every later minibatch, restore or
        pickling raises ``ClosedError`` naming them. Closing again does nothing."""
        self._drop_chunks(None)
        close = getattr(self.corpus, "close", None)
        if close:
            close()
        self._closed = True

    def __getstate__(self) -> Dict[str, Any]:
        check_open(self._closed, "MinibatchSource", self.where)
        return dict(self.__dict__)

    def __enter__(self) -> "MinibatchSource":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self):
        raise TypeError("call next_minibatch(size) in a loop; a MinibatchSource has no fixed size")


def _num_samples(data: Any) -> int:
    n = getattr(data, "num_samples", None)
    return int(n) if n is not None else int(np.shape(data)[0])


def cbf_minibatch_source(path: Union[str, "os.PathLike[str]"], streams: Any = None,
                         randomize: bool = True,
                         randomization_window: Optional[int] = None, randomization_seed: int = 0,
                         keep_data_in_memory: bool = False,
                         alias: Optional[Mapping[str, str]] = None, **kwargs: Any) -> Any:
    """A :class:`recio.MinibatchSource` reading a CBF file directly, with the parameters of
    CNTK's binary reader; its chunks are the randomization chunks. The minibatches follow
    recio's rules (see the module docstring); ``recio.sequence.cntk.MinibatchSource`` with a
    ``CBFDeserializer`` gives CNTK 2.7's own.

    ``randomization_window`` is in samples (None: the whole corpus), ``randomization_seed``
    seeds sweep 0 (each sweep gets its own order), ``keep_data_in_memory`` keeps decoded chunks
    after their last use. Other keywords (``epoch_size``, ``max_sweeps``, ``defines_mb_size``,
    ``worker_rank``, ``num_workers``) pass to MinibatchSource; ``defines_mb_size`` makes the
    reader count samples per stream (one decoding pass over the file at start).
    """
    reader = CBFReader(path, alias=alias, keep_data_in_memory=keep_data_in_memory,
                       per_stream_counts=kwargs.get("defines_mb_size") is not None)
    return MinibatchSource(reader, streams=streams, randomize=randomize,
                           randomization_window=randomization_window, seed=randomization_seed,
                           **kwargs)
