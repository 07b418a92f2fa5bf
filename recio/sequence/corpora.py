"""The chunked corpora a ``MinibatchSource`` reads: indexed ``.rec`` files (``RecordCorpus``),
sequences in memory (``MemoryCorpus``), several corpora as one (``ConcatCorpus``), and
``open_corpus``, which turns any source into one.

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

Apart from the source (``recio.sequence.minibatch``) because a corpus is what is read, and the
source is the order it is read in: the sweeps, the randomization, the workers' shares.
"""
from __future__ import annotations

import mmap
import os
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
from recio.sequence.ctf import CTFReader
from recio.sequence.ctf_streams import CTFStream
from recio.sequence.records import (
    Sparse,
    sequence_sample_counts,
    stream_sample_counts,
    unpack_sequence,
)
from recio.sequence.sidecar import read_sidecar, sidecar_path

#: default target of samples per chunk for ``RecordCorpus``
DEFAULT_CHUNK_SAMPLES = 4096
#: the streams of a plain image record read as a sequence
_IMAGE_STREAMS = ("label", "image")


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
        side = sidecar_path(self.rec_path)
        #: each stream's layout (sparse?, dtype, dim, 1-D?) as record 0 gives it: every record
        #: decoded must match (None: image records, whose image streams vary in size)
        self.layouts: Optional[Dict[str, sequence.Layout]] = None
        if storage.exists(side):
            self.kind = "sequence"
            with storage.local_copy(side) as local_side:  # a URL's sidecar: fetched (it is small)
                names, counts = read_sidecar(local_side, rec_size, len(self.offsets))
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
            self.stream_names = list(_IMAGE_STREAMS)
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
        self._flat_counts = np.ascontiguousarray(self.counts, dtype=np.uint32).reshape(-1).data
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
        assert counts is not None  # only a file with records is counted
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
                # a stream's samples as recio.sequence.records.samples_of counts them and its
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
                    assert self.layouts is not None  # laid_out is checked against them
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


def source_name(source: Any) -> Optional[str]:
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
                    f"{sequence.describe_layout(ours[name])} in {source_name(first)} and "
                    f"{sequence.describe_layout(theirs[name])} in {source_name(c)}",
                    path=source_name(c))
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
    ``ctf_streams`` (:class:`CTFStream` objects, e.g. from
    ``recio.sequence.ctf_streams.read_header``); without them it is refused with a ValueError
    saying so.
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


def sequence_sizes(corpus: Any, mb_column: Optional[int],
                   defines_mb_size: Optional[str]) -> Tuple[List[np.ndarray], List[int]]:
    """Each chunk's sequence sizes (samples, as int64) and sequence count, from the corpus's
    sample counts alone (no chunk is read): the largest stream, or column ``mb_column``
    (``defines_mb_size``), which needs a corpus that counts every stream."""
    sizes, chunk_len = [], []
    for i in range(corpus.num_chunks):
        counts = np.asarray(corpus.chunk_sample_counts(i))
        if counts.ndim == 1 and mb_column is not None:
            raise ValueError(f"defines_mb_size={defines_mb_size!r} needs each stream's "
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
