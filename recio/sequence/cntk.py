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

CNTK's randomizers, which choose the sequences of each minibatch, are in
:mod:`recio.sequence.cntk_randomizers`; this module holds the names ``cntk.io`` users call.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from recio.errors import SequenceError
from recio.sequence.cbf import CBFReader
from recio.sequence.cntk_randomizers import (
    FULL_DATA_SWEEP,
    INFINITELY_REPEAT,
    NO_LIMIT,
    BlockRandomizer,
    ChunkTable,
    NoRandomizer,
    epoch_size,
)
from recio.sequence.ctf import CTFReader
from recio.sequence.ctf_streams import CTFStream
from recio.sequence.records import Sparse

#: CNTK's default window: 4 GB of 32 MB chunks
DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS = 128
_POSITION_KEY = "minibatchSourcePosition"


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
                max_samples > NO_LIMIT and (chunks_window or samples_window):
            raise ValueError(f"max_samples={max_samples} is too big (CNTK's epoch size limit "
                             f"is {NO_LIMIT})")
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
        self._table = ChunkTable(lengths)
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
            self._enumerator: Any = BlockRandomizer(self._table, samples_window, True,
                                                     self.randomization_seed)
        elif chunks_window:
            self._enumerator = BlockRandomizer(self._table, chunks_window, False,
                                                self.randomization_seed)
        else:
            self._enumerator = NoRandomizer(self._table)
        self._epoch_size = epoch_size(self._table, max_samples, max_sweeps)
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
        return {_POSITION_KEY: int(self._state)}

    @property
    def current_position(self) -> Dict[str, int]:
        """Same as ``get_checkpoint_state()``."""
        return self.get_checkpoint_state()

    def restore_from_checkpoint(self, checkpoint: Mapping[str, Any]) -> None:
        """Continue from a ``get_checkpoint_state()`` of a source over the same data and
        settings (of this worker: positions are per worker, as in CNTK)."""
        try:
            position = int(checkpoint[_POSITION_KEY])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"not a MinibatchSource checkpoint (no integer "
                             f"{_POSITION_KEY!r}): {checkpoint!r}") from None
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
