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

Chunked-corpus protocol (what the source reads; ``RecordCorpus`` implements it for indexed
``.rec`` files, ``recio.sequence.cbf.CBFReader`` for CBF files)::

    stream_names: Sequence[str]                # names of the streams every sequence has
    num_chunks: int
    chunk_sample_counts(i) -> np.ndarray       # samples per sequence of chunk i, WITHOUT decoding:
                                               #   shape (S_i, len(stream_names)) per stream, or
                                               #   shape (S_i,) when only one count is known
    read_chunk(i) -> list[dict]                # the S_i sequences of chunk i, {stream: data}, in
                                               #   the same order; data = N x dim array or Sparse
                                               #   (any object with len() and [j] will do)
    close() (optional)

Chunks should be small next to the randomization window (a few per window) and cheap to read
whole (consecutive records). ``MemoryCorpus`` wraps a list of sequence dicts. ``RecordCorpus``
chunks are lazy: a sequence is decoded, as NumPy views into the memory-mapped ``.rec``, when the
minibatch needs it, so a worker decodes only its own share and a resident chunk costs only
its list of offsets (the window then bounds the file's working set in the page cache).
"""
from __future__ import annotations

import heapq
import mmap
import os
import sys
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from recio import portable, storage
from recio.errors import RecordIOError, SequenceError
from recio.image.header import unpack_header
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.source import SourceFile, resolve_source
from recio.sequence import records as sequence
from recio.sequence.cbf import CBFReader
from recio.sequence.ctf import CTFReader, CTFStream
from recio.sequence.records import (
    Sparse,
    sequence_sample_counts,
    stream_sample_counts,
    unpack_sequence,
)

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

#: default target of samples per chunk for ``RecordCorpus``
DEFAULT_CHUNK_SAMPLES = 4096
STATE_FORMAT = "recio.MinibatchSource"
STATE_VERSION = 1

IMAGE_STREAMS = ("label", "image")


# --------------------------------------------------------------------------- corpora

class RecordCorpus:
    """An indexed ``.rec`` as a chunked corpus: chunks are consecutive index ranges.

    Sequence records (with a ``PREFIX.len`` sidecar) give their own streams; plain image records
    give two single-sample streams: ``label`` (float32, 1 x label_width, from the IRHeader) and
    ``image`` (uint8, 1 x nbytes, the encoded image). ``rec_path`` may be a URL: each record is
    then one ranged read (the index and the sidecar are fetched whole). ``rec_size``: the size
    of the ``.rec`` when a manifest says it (None: looked up).
    """

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Optional[Union[str, "os.PathLike[str]"]] = None,
                 chunk_samples: int = DEFAULT_CHUNK_SAMPLES,
                 rec_size: Optional[int] = None) -> None:
        self.rec_path = os.fspath(rec_path)
        if chunk_samples < 1:
            raise ValueError(f"chunk_samples must be >= 1, not {chunk_samples}")
        if rec_size is None:
            rec_size = storage.size(self.rec_path)
        index = index_for(self.rec_path, idx_path, None, rec_size=rec_size)
        self.idx_path = index.path
        self.offsets = np.asarray(index.offsets, dtype=np.int64)
        # records are decoded as NumPy views straight into the reader's read-only map (no copy)
        self._reader = RecordReader(self.rec_path)
        self._size = rec_size
        side = sequence.sidecar_path(self.rec_path)
        #: each stream's layout (sparse?, dtype, dim, 1-D?) as record 0 gives it: every record
        #: decoded must match (None: image records, whose image streams vary in size)
        self.layouts: Optional[Dict[str, sequence.Layout]] = None
        if storage.exists(side):
            self.kind = "sequence"
            with storage.local_copy(side) as local_side:  # a URL's sidecar: fetched (it is small)
                names, counts = sequence.read_sidecar(local_side, rec_size, len(self.offsets))
            self.stream_names = list(names)
            self.counts = counts
        elif len(self.offsets) and self._reader.read_at(int(self.offsets[0]))[:4] == \
                sequence.SEQUENCE_MAGIC:
            # sequence records without a sidecar: read each stream table (slow, but no payloads)
            warnings.warn(f"{side} is missing: reading the stream table of every record of "
                          f"{self.rec_path} to count samples; write it once with "
                          f"recio.sequence.rebuild_sidecar", stacklevel=3)
            self.kind = "sequence"
            self.stream_names, self.counts = self._count_samples()
        else:
            self.kind = "image"
            self.stream_names = list(IMAGE_STREAMS)
            self.counts = np.ones((len(self.offsets), 2), dtype=np.uint32)
        self._side = side
        if self.kind == "sequence" and len(self.offsets):
            self.layouts = self._reference_layouts()
        # the layout check of decode_at, per stream in stream_names order: (sparse?, dtype,
        # dim for sparse or the shape after N for dense)
        self._expected = [] if self.layouts is None else [
            None if lay is None else
            (lay[0], lay[1], lay[2] if lay[0] else (() if lay[3] else (lay[2],)))
            for lay in (self.layouts.get(name) for name in self.stream_names)]
        # the counts as a flat buffer of Python-int items, for the per-record check in decode_at
        self._flat_counts = memoryview(
            np.ascontiguousarray(self.counts, dtype=np.uint32).reshape(-1))
        # chunk boundaries: close a chunk once it holds >= chunk_samples samples
        size = self.counts.max(axis=1).astype(np.int64) if self.counts.shape[1] else \
            np.zeros(len(self.counts), np.int64)
        before = np.concatenate([[0], np.cumsum(size)[:-1]]) if len(size) else size
        _, starts = np.unique(before // chunk_samples, return_index=True)
        self.bounds = np.append(starts, len(size)).astype(np.int64)
        self.num_chunks = len(self.bounds) - 1

    def _reference_layouts(self) -> Dict[str, sequence.Layout]:
        """The stream layouts every record must have: record 0's, unless the next records
        (up to 3) agree on others, which names record 0 as damaged (before a minibatch pads
        what its damaged dimension claims)."""
        def layouts(row: int) -> Dict[str, sequence.Layout]:
            offset = int(self.offsets[row])
            try:
                return sequence.sequence_layouts(self._reader.read_at(offset))
            except RecordIOError as exc:
                raise type(exc)(f"record {row}: {exc.message}", path=self.rec_path,
                                offset=offset) from None

        first = layouts(0)
        others = []
        for row in range(1, min(4, len(self.offsets))):
            try:
                others.append(layouts(row))
            except RecordIOError:  # its own read will say so, in its turn
                return first
        differ = [n for n in first if others and n in others[0] and first[n] != others[0][n]]
        if differ and all(o == others[0] for o in others):
            name = differ[0]
            rows = ", ".join(str(r) for r in range(1, len(others) + 1))
            raise SequenceError(
                f"record 0: stream {name!r} is {sequence.describe_layout(first[name])} where "
                f"the records after it ({rows}) have "
                f"{sequence.describe_layout(others[0][name])}; record 0 is damaged",
                path=self.rec_path, offset=int(self.offsets[0]))
        return first

    def _count_samples(self) -> Tuple[List[str], np.ndarray]:
        """Stream names and ``counts[records, streams]`` from every record's stream table."""
        names: List[str] = []
        counts = None
        for row, offset in enumerate(self.offsets.tolist()):
            try:
                got = sequence_sample_counts(self._reader.read_at(offset))
            except RecordIOError as exc:
                raise type(exc)(exc.message, path=self.rec_path, offset=offset) from None
            if counts is None:
                names = list(got)
                counts = np.zeros((len(self.offsets), len(names)), np.uint32)
            elif list(got) != names:
                raise SequenceError(f"record {row} has streams {list(got)}, the first record "
                                    f"has {names}; all records need the same streams",
                                    path=self.rec_path, offset=offset)
            counts[row] = list(got.values())
        return names, counts

    def chunk_sample_counts(self, i: int) -> np.ndarray:
        """Samples per stream of each sequence of chunk ``i`` (from the sidecar, no decoding)."""
        return self.counts[self.bounds[i]:self.bounds[i + 1]]

    def read_chunk(self, i: int) -> "_LazyChunk":
        """The sequences of chunk ``i``, each decoded when first indexed (zero-copy views into
        the mapped file), so a worker decodes only its own share."""
        offsets = self.offsets[self.bounds[i]:self.bounds[i + 1]]
        mapped = self._reader.buffer
        if isinstance(mapped, mmap.mmap) and len(offsets):
            # one read-ahead request for the chunk's byte range (a cold file is read in chunks)
            start = int(offsets[0]) & ~(mmap.ALLOCATIONGRANULARITY - 1)
            end = int(self.offsets[self.bounds[i + 1]]) if i + 1 < self.num_chunks else self._size
            # a chunk about to be read: start reading its byte range from disk at once
            portable.advise(mapped, "WILLNEED", start, end - start)
        return _LazyChunk(self, offsets, int(self.bounds[i]))

    def decode_at(self, offset: int, row: Optional[int] = None) -> Dict[str, Any]:
        """The sequence (or image record as a sequence) whose record starts at ``offset``.

        With ``row`` (the record's place in the index), a sequence must have the streams and
        sample counts the sidecar gives for that row: the minibatch plan was made from those.
        """
        # checked like every read (framing and swallowed heads); a zero-copy view of the map
        record = self._reader.view_at(offset)
        try:
            if self.kind != "sequence":
                return _image_sequence(record)
            seq = unpack_sequence(record)
            if row is not None:
                self._check_counts(seq, row)
            return seq
        except RecordIOError as exc:
            raise type(exc)(exc.message, path=self.rec_path, offset=offset) from None

    def _check_counts(self, seq: Dict[str, Any], row: int) -> None:
        """A decoded record against its row of ``counts`` (same streams, same sample counts)
        and against record 0's stream layouts (same kind, dtype and dimension: a damaged
        dimension must not reach NumPy as a shape mismatch later)."""
        names, flat, width = self.stream_names, self._flat_counts, len(self.stream_names)
        base = row * width
        same = len(seq) == width
        expected = self._expected
        laid_out = True
        if same:
            for k, (name, data) in enumerate(seq.items()):
                # a stream's samples as recio.sequence.records._samples_of counts them and its
                # layout as stream_layout gives it (inlined: this runs for every record
                # decoded; decoded arrays are never 0-d)
                want = expected[k] if expected else None
                if type(data) is Sparse:
                    n = data.num_samples
                    if want is not None:
                        laid_out = want[0] and data.dim == want[2] and \
                            data.values.dtype == want[1]
                else:
                    n = len(data)
                    if want is not None:
                        laid_out = not want[0] and data.dtype == want[1] and \
                            data.shape[1:] == want[2]
                if name != names[k] or n != flat[base + k]:
                    same = False
                    break
                if not laid_out:
                    problem = sequence.layout_mismatch({name: data}, self.layouts, "record 0")
                    raise SequenceError(
                        f"record {row}: {problem}; every record of a file needs the same "
                        f"stream layouts, so one of the two records is damaged")
        if not same:
            got = stream_sample_counts(seq)
            expected = self.counts[row].tolist()
            raise SequenceError(
                f"record {row} decodes to {got} samples but the sample-count sidecar "
                f"{self._side} says {dict(zip(self.stream_names, expected))}; the record or "
                f"the sidecar is damaged (if the records are right, rebuild the sidecar with "
                f"recio.sequence.rebuild_sidecar)")

    def close(self) -> None:
        """Release the memory map (left to the garbage collector while arrays still use it)."""
        self._reader.close()


class _LazyChunk:
    """A chunk's records as a list-like of sequence dicts, each decoded when indexed.

    Nothing decoded is kept: every sequence is used once per sweep, and keeping tens of
    thousands of small objects alive only feeds the garbage collector.
    """

    __slots__ = ("corpus", "offsets", "first")

    def __init__(self, corpus: RecordCorpus, offsets: np.ndarray, first: int) -> None:
        self.corpus, self.offsets = corpus, offsets  # a view: no Python int per record
        self.first = first  # the index row of offsets[0]

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, j: int) -> Dict[str, Any]:
        if j < 0:
            j += len(self.offsets)
        return self.corpus.decode_at(int(self.offsets[j]), self.first + j)

    def __iter__(self):
        return (self[j] for j in range(len(self.offsets)))


def _image_sequence(record: bytes) -> Dict[str, np.ndarray]:
    """An image record as two one-sample streams, as views into ``record`` (ImageError when
    its header is damaged)."""
    header, end = unpack_header(record)
    if header.flag:
        labels = header.label.reshape(1, header.flag)
    else:
        labels = np.array([[header.label]], dtype=np.float32)
    image = np.frombuffer(record, np.uint8, offset=end).reshape(1, -1)
    return {"label": labels, "image": image}


def _source_name(source: Any) -> Optional[str]:
    """The file a corpus source names (a path, or a reader's ``path``/``rec_path``), if any."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    name = getattr(source, "path", None) or getattr(source, "rec_path", None)
    return None if name is None else os.fspath(name)


class MemoryCorpus:
    """In-memory sequences (a list of ``{stream: array or Sparse}``) as a chunked corpus.

    Handy for tests and small data; chunks are ``chunk_sequences`` consecutive sequences.
    """

    def __init__(self, sequences: Sequence[Mapping[str, Any]], chunk_sequences: int = 64) -> None:
        if chunk_sequences < 1:
            raise ValueError(f"chunk_sequences must be >= 1, not {chunk_sequences}")
        self.sequences = [dict(s) for s in sequences]
        self.stream_names = list(self.sequences[0]) if self.sequences else []
        self.layouts = {name: sequence.stream_layout(data)
                        for name, data in self.sequences[0].items()} if self.sequences else {}
        for i, seq in enumerate(self.sequences):
            if list(seq) != self.stream_names:
                raise SequenceError(f"sequence {i} has streams {list(seq)}, the first has "
                                    f"{self.stream_names}")
            problem = sequence.layout_mismatch(seq, self.layouts, "sequence 0")
            if problem is not None:
                raise SequenceError(f"sequence {i}: {problem}; every sequence needs the same "
                                    f"stream layouts")
        self.counts = np.array([list(stream_sample_counts(s).values()) for s in self.sequences],
                               dtype=np.int64).reshape(len(self.sequences), len(self.stream_names))
        self.chunk_sequences = chunk_sequences
        self.num_chunks = -(-len(self.sequences) // chunk_sequences)

    def chunk_sample_counts(self, i: int) -> np.ndarray:
        """Samples per stream of each sequence of chunk ``i``."""
        k = self.chunk_sequences
        return self.counts[i * k:(i + 1) * k]

    def read_chunk(self, i: int) -> List[Dict[str, Any]]:
        """The sequences of chunk ``i`` (the dicts given, not copies)."""
        k = self.chunk_sequences
        return self.sequences[i * k:(i + 1) * k]


class ConcatCorpus:
    """Several corpora with the same streams, one after another (chunks numbered across them)."""

    def __init__(self, corpora: Sequence[Any]) -> None:
        if not corpora:
            raise ValueError("no input files given")
        self.corpora = list(corpora)
        self.stream_names = list(self.corpora[0].stream_names)
        first = self.corpora[0]
        for c in self.corpora[1:]:
            if list(c.stream_names) != self.stream_names:
                raise SequenceError(f"inputs have different streams: {self.stream_names} and "
                                    f"{list(c.stream_names)}")
            theirs, ours = getattr(c, "layouts", None), getattr(first, "layouts", None)
            if theirs and ours and theirs != ours:
                name = next(n for n in ours if ours[n] != theirs.get(n, ours[n]))
                raise SequenceError(
                    f"inputs have different layouts of stream {name!r}: "
                    f"{sequence.describe_layout(ours[name])} in {_source_name(first)} and "
                    f"{sequence.describe_layout(theirs[name])} in {_source_name(c)}",
                    path=_source_name(c))
        self._first = np.cumsum([0] + [c.num_chunks for c in self.corpora])
        self.num_chunks = int(self._first[-1])

    def _locate(self, i: int) -> Tuple[Any, int]:
        k = int(np.searchsorted(self._first, i, side="right")) - 1
        return self.corpora[k], i - int(self._first[k])

    def chunk_sample_counts(self, i: int) -> np.ndarray:
        """Sample counts of chunk ``i`` of the concatenation."""
        corpus, j = self._locate(i)
        return corpus.chunk_sample_counts(j)

    def read_chunk(self, i: int) -> List[Dict[str, Any]]:
        """Sequences of chunk ``i`` of the concatenation."""
        corpus, j = self._locate(i)
        return corpus.read_chunk(j)

    def close(self) -> None:
        """Close every input that can be closed."""
        for c in self.corpora:
            close = getattr(c, "close", None)
            if close:
                close()


def open_corpus(source: Any, chunk_samples: int = DEFAULT_CHUNK_SAMPLES,
                per_stream_counts: bool = False,
                ctf_streams: Optional[Sequence[CTFStream]] = None) -> Any:
    """A corpus for a source (``recio.records.source``: paths, URLs, ``;``-joined, folders,
    globs, a shard set's manifest; each file a ``.rec``, or a local ``.cbf`` read by
    recio.sequence.cbf or ``.ctf`` read by recio.sequence.ctf), a corpus, or a list of them.

    ``per_stream_counts`` asks corpora that can give each stream's sample counts (CBF, at the cost
    of reading chunk bodies) to do so: ``defines_mb_size`` needs them.

    A CTF file does not name its streams or their dimensions, so a ``.ctf`` path needs
    ``ctf_streams`` (:class:`CTFStream` objects, e.g. from ``recio.sequence.ctf.read_header``);
    without them it is refused with a ValueError saying so.
    """
    if _is_corpus(source):
        return source
    if isinstance(source, (list, tuple)) and any(_is_corpus(s) for s in source):
        parts = [open_corpus(s, chunk_samples, per_stream_counts, ctf_streams) for s in source]
    elif isinstance(source, (str, os.PathLike, SourceFile, list, tuple)):
        parts = [_open_file(f, chunk_samples, per_stream_counts, ctf_streams)
                 for f in resolve_source(source)]
    else:
        raise TypeError(f"cannot read minibatches from {source!r}: give a .rec path, a list of "
                        f"paths or an object with num_chunks / chunk_sample_counts / read_chunk")
    return parts[0] if len(parts) == 1 else ConcatCorpus(parts)


def _is_corpus(source: Any) -> bool:
    return hasattr(source, "read_chunk") and hasattr(source, "chunk_sample_counts")


def _open_file(source: SourceFile, chunk_samples: int, per_stream_counts: bool,
               ctf_streams: Optional[Sequence[CTFStream]]) -> Any:
    """The corpus of one resolved file, by its name: CBF, CTF or (anything else) records."""
    path = source.path
    kind = os.path.splitext(path)[1].lower()
    if kind in (".cbf", ".ctf") and storage.is_url(path):
        raise SequenceError(f"{kind[1:].upper()} files are read from local disk; copy it "
                            f"here first (a .rec can be read from its URL)", path=path)
    if kind == ".cbf":
        return CBFReader(path, per_stream_counts=per_stream_counts)
    if kind == ".ctf":  # CTFReader refuses it without ctf_streams
        return CTFReader(path, ctf_streams)
    return RecordCorpus(path, source.idx_path, chunk_samples=chunk_samples,
                        rec_size=source.size)


# --------------------------------------------------------------------------- minibatch

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


class _SweepPlan:
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
    name their streams, the list of :class:`recio.sequence.ctf.CTFStream` definitions (e.g.
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
        ctf_streams = None
        if streams is not None and not isinstance(streams, Mapping) \
                and any(isinstance(s, CTFStream) for s in streams):
            ctf_streams = list(streams)  # definitions for .ctf inputs, all of them returned
            if not all(isinstance(s, CTFStream) for s in ctf_streams):
                raise TypeError("streams mixes CTFStream definitions with other values; give "
                                "CTF stream definitions alone")
            streams = [s.name for s in ctf_streams]
            if defines_mb_size is None:  # as in CNTK, a stream's own flag sets the mb size
                defines_mb_size = next((s.name for s in ctf_streams if s.defines_mb_size), None)
        self.corpus = open_corpus(files, chunk_samples,
                                  per_stream_counts=defines_mb_size is not None,
                                  ctf_streams=ctf_streams)
        names = list(self.corpus.stream_names)
        self.stream_map = _stream_map(streams, names, defines_mb_size)
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
        sizes, chunk_len = self._sequence_sizes(mb_column)
        self.sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        self.chunk_first = np.concatenate([[0], np.cumsum(chunk_len)]).astype(np.int64)
        self.seq_chunk = np.repeat(np.arange(len(chunk_len), dtype=np.int64), chunk_len)
        self.chunk_samples = np.bincount(self.seq_chunk, weights=self.sizes,
                                         minlength=len(chunk_len)).round().astype(np.int64)
        self.num_sequences = len(self.sizes)
        self.num_samples = int(self.sizes.sum())
        if self.num_samples == 0:
            where = ";".join(filter(None, map(_source_name, files))) \
                if isinstance(files, (list, tuple)) else _source_name(files)
            raise SequenceError(f"the input has {self.num_sequences} sequences and no samples; "
                                f"nothing to make minibatches from", path=where)
        self.window = self.num_samples if randomization_window is None else \
            int(min(randomization_window, self.num_samples))
        self._epoch = self.num_samples if self.epoch_size in (SWEEP_FOREVER, SWEEP_ONCE) \
            else self.epoch_size
        self._chunks: Dict[int, List[Dict[str, Any]]] = {}
        self._heap: List[Tuple[float, int]] = []  # (last key, chunk) of resident chunks
        self._plan: Optional[_SweepPlan] = None
        self._sweep = 0
        self._offset = 0  # index into the sweep's order of the next sequence

    def _sequence_sizes(self, mb_column: Optional[int]) -> Tuple[List[np.ndarray], List[int]]:
        """Each chunk's sequence sizes (samples, as int64) and sequence count, from the corpus's
        sample counts alone (no chunk is read): the largest stream, or column ``mb_column``
        (``defines_mb_size``), which needs a corpus that counts every stream."""
        sizes, chunk_len = [], []
        for i in range(self.corpus.num_chunks):
            counts = np.asarray(self.corpus.chunk_sample_counts(i))
            if counts.ndim == 1 and mb_column is not None:
                raise ValueError(f"defines_mb_size={self.defines_mb_size!r} needs each stream's "
                                 f"sample counts, but this corpus gives one count per sequence")
            if counts.ndim == 1:
                size = counts
            elif mb_column is not None:
                size = counts[:, mb_column]
            else:
                size = counts.max(axis=1) if counts.shape[1] else np.zeros(len(counts))
            sizes.append(size.astype(np.int64))
            chunk_len.append(len(size))
        return sizes, chunk_len

    # -- the order of a sweep -----------------------------------------------------------------
    def sweep_order(self, sweep: int) -> np.ndarray:
        """Sequence ids (corpus order) of sweep ``sweep``: a pure function of (seed, sweep)."""
        plan = self._make_plan(sweep)
        return plan.ids(0, plan.n).astype(np.int64)

    def _make_plan(self, sweep: int) -> _SweepPlan:
        """Keys of sweep ``sweep``: the chunk order is shuffled, then each sequence is placed at
        a uniform random point within ``window`` samples after its chunk's start. Costs O(n)."""
        n = self.num_sequences
        if not self.randomize:
            order = np.arange(n, dtype=np.int64)
            return _SweepPlan(sweep, self.sizes, order.astype(np.float64), order)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, sweep])))
        if self.window >= self.num_samples:  # the whole corpus is one window: a plain shuffle
            order = rng.permutation(n).astype(np.int64)
            keys = np.empty(n, dtype=np.float64)
            keys[order] = np.arange(n, dtype=np.float64)
            return _SweepPlan(sweep, self.sizes, keys, order)
        num_chunks = len(self.chunk_samples)
        chunk_perm = rng.permutation(num_chunks)
        start = np.empty(num_chunks, dtype=np.float64)
        start[chunk_perm] = np.concatenate([[0], np.cumsum(self.chunk_samples[chunk_perm])[:-1]])
        keys = start[self.seq_chunk] + rng.random(n) * self.window
        return _SweepPlan(sweep, self.sizes, keys)

    def _plan_for(self, sweep: int) -> _SweepPlan:
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

        Returns ``None`` when a finite source (``SWEEP_ONCE`` / ``max_sweeps``) is done.
        """
        size = int(minibatch_size_in_samples)
        if size < 1:
            raise ValueError(f"minibatch_size_in_samples must be >= 1, not {size}")
        if self._finished():
            return None
        n = self.num_sequences
        start_sweep = self._sweep
        t0 = self._sweep * self.num_samples + self._plan_for(self._sweep).samples_before(
            self._offset)
        spans: List[Tuple[_SweepPlan, int, int]] = []
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
        return {"format": STATE_FORMAT, "version": STATE_VERSION, "sweep": self._sweep,
                "offset": self._offset,
                "sample_position": self._sweep * self.num_samples + within,
                "corpus": self._fingerprint()}

    def restore_from_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from ``get_checkpoint_state``, any worker count): no replay."""
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise ValueError(f"not a {STATE_FORMAT} v{STATE_VERSION} checkpoint: "
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
        """Drop resident chunks and close the inputs."""
        self._drop_chunks(None)
        close = getattr(self.corpus, "close", None)
        if close:
            close()

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


__all__ = ["MinibatchSource", "Minibatch", "RecordCorpus", "MemoryCorpus", "ConcatCorpus",
           "open_corpus", "cbf_minibatch_source", "SWEEP_FOREVER", "SWEEP_ONCE"]
