"""CNTK Text Format (CTF): stream definitions and a chunked reader that gives exactly what CNTK
2.7's ``CTFDeserializer`` gives.

A CTF file holds one sample per stream occurrence, grouped into sequences by a leading numeric
id::

    0 |features 0.1 0.2 0.3 |labels 2:1
    0 |features 0.4 0.5 0.6
    1 |features 0.7 0.8 0.9 |labels 0:1 |# a comment, up to the next '|' or the end of line

The stream *definitions* are not in the file: each stream has a ``name`` (what the reader
returns), an ``alias`` (the text after ``|``), a ``dim`` and dense or sparse storage
(:class:`CTFStream`; :func:`read_header` reads them from ctf2bin's header file, one
``NAME ALIAS dense|sparse DIM`` per line).

:class:`CTFReader` reproduces CNTK's rules, not a cleaned-up version of them:

* **Sequences** (CNTK's ``TextInputIndexBuilder``). A UTF-8 BOM and all leading whitespace are
  skipped; a UTF-16 BOM or an empty file is an error. If the first remaining byte is ``|`` every
  line is a sequence of its own (*line mode*, keys = 0-based line numbers). Otherwise the first
  line must start with digits (*id mode*): consecutive lines with the same id (compared as
  numbers, so ``01`` is ``1``) form one sequence, a line without an id continues the current one,
  and an id that comes back later starts a new sequence with the same key.
* **Sequence size** (the sample count minibatch budgets use): the number of lines, or with a
  ``defines_mb_size`` stream the number of lines holding that stream; a sequence with no such
  line is left out, as CNTK leaves it out (counted in ``skipped_sequences``).
* **Chunks**: a sequence joins the current chunk unless that takes the chunk past
  ``min(chunk_size_bytes, file size)``; sequences are never split.
* **Samples**: each ``|alias`` occurrence is one sample of its stream; streams are not aligned to
  lines. A dense sample with fewer than ``dim`` values is padded with zeros (none at all gives
  zeros), with more is an error. A sparse sample is ``index:value`` pairs kept in file order
  (duplicates kept); an empty one is a sample with no non-zeros. Unknown names are skipped
  silently; ``|#`` starts a comment that ends at the next ``|`` or the end of the line; tabs,
  ``\\r``, other control bytes and bytes >= 0x80 separate samples.
* **Numbers**: CNTK's own parser, ``[+-]?digits[.digits*][(e|E)[+-]?digits]`` computed in double
  precision the way CNTK computes it (not correctly rounded, and not what ``float()`` gives),
  then cast to float32 (or kept as float64 with ``dtype=numpy.float64``). ``.5``, ``inf``,
  ``nan``, ``1,5`` are errors; ``1-2`` is the two values 1 and -2.
* **Checks** per sequence: every stream has at least one sample; no stream has more samples
  than the sequence size and the largest (or the ``defines_mb_size`` stream) has exactly that
  many; every line yields a sample (a blank or comment-only line inside a sequence is an error).

Every error CNTK raises (with its default ``maxErrors=0`` every parse error is fatal) raises
:class:`recio.errors.CTFError` with the file, 1-based line and byte offset and the cause in
plain words. Cases where CNTK reads undefined memory (a file that ends, without a final newline,
inside a dense sample of the wrong length) are errors too.

The reader indexes the file with one streamed pass (bounded memory, no numbers parsed) and
parses a chunk at a time: lines are split with bytes methods and the numbers of a chunk are
parsed together by NumPy, in the same double-precision operations CNTK uses. A sequence the fast
path cannot vouch for (an unusual byte, a number of more than 15 digits, a mistake) is parsed
again by an exact byte-by-byte emulation of CNTK's parser, which gives the values or the error.
It is a chunked corpus for :class:`recio.MinibatchSource` (``stream_names``, ``num_chunks``,
``chunk_sample_counts(i)``, ``read_chunk(i)``).

The reader and its chunk parser are here; the stream definitions are
``recio.sequence.ctf_streams``, the index pass ``recio.sequence.ctf_index``, the vectorised
number kernel ``recio.sequence.ctf_numbers`` and the byte-by-byte emulation of CNTK's parser
``recio.sequence.ctf_exact``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import CTFError
from recio.records.closed import check_open
from recio.sequence.ctf_exact import ExactParser, SequenceDict
from recio.sequence.ctf_index import Scanner, chunk_bounds
from recio.sequence.ctf_numbers import Numbers, parse_numbers
from recio.sequence.ctf_streams import CTFStream, check_streams
from recio.sequence.records import Sparse
from recio.storage import open_regular

PathLike = Union[str, "os.PathLike[str]"]

#: CNTK's default chunk size for text input (``chunkSizeInBytes``)
DEFAULT_CHUNK_SIZE = 32 << 20

_DIGITS = b"0123456789"
#: bytes CNTK's parser treats as plain text, plus tab, newline and carriage return: a chunk made
#: only of these (and whose every ``\r`` precedes a ``\n``) can take the fast path
_PLAIN = bytes([9, 10, 13, *range(0x20, 0x80)])
_CR_TO_SPACE = bytes.maketrans(b"\r", b" ")


class CTFReader:
    """Reads a CTF file as CNTK 2.7's ``CTFDeserializer`` does; a chunked corpus.

    ``streams``: :class:`CTFStream` objects (or tuples of their fields), e.g. from
    :func:`read_header`. ``chunk_size_bytes``: CNTK's ``chunkSizeInBytes`` (the randomization
    chunks). ``dtype``: ``numpy.float32`` (what CNTK's Python API gives) or ``numpy.float64``
    (CNTK's double-precision reader).

    Opening the reader indexes the file (raising CTFError for what CNTK refuses when it is
    constructed: an empty or UTF-16 file, a missing or overflowing first id). ``read_chunk(i)``
    parses chunk ``i`` into a list of ``{name: (N, dim) array | recio.sequence.Sparse}`` and
    raises CTFError for what CNTK refuses while loading it. Per sequence, in file order:
    ``keys`` (the ids; 0-based line numbers in line mode), ``sizes`` (the sample count CNTK gives
    it), ``lines`` (its first line, 1-based), ``offsets`` (its first byte) and ``counts`` (each
    stream's samples). ``skipped_sequences``: sequences left out for having no
    ``defines_mb_size`` line.
    """

    def __init__(self, path: PathLike, streams: Optional[Sequence[Any]],
                 chunk_size_bytes: int = DEFAULT_CHUNK_SIZE, dtype: Any = np.float32) -> None:
        self.path = os.fspath(path)
        self.streams: List[CTFStream] = check_streams(streams, self.path)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be float32 or float64 (CNTK's element types), not "
                             f"{self.dtype}")
        chunk_size_bytes = int(chunk_size_bytes)
        if chunk_size_bytes < 1:
            raise ValueError(f"chunk_size_bytes must be >= 1, got {chunk_size_bytes}")
        self.chunk_size_bytes = chunk_size_bytes
        scanner = Scanner(self.path, self.streams)
        index, self.skipped_sequences, self.size, self.line_mode, self.data_offset = scanner.run()
        n = len(self.streams)

        def joined(parts: List[np.ndarray], dtype: Any, shape: Tuple[int, ...] = ()):
            return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype)

        self.offsets = joined(index.offsets, np.int64)
        self._sizes_bytes = joined(index.sizes, np.int64)
        self.keys: np.ndarray = joined(index.keys, np.uint64)
        self.sizes: np.ndarray = joined(index.samples, np.int64)
        self.lines: np.ndarray = joined(index.lines, np.int64)
        self.counts: np.ndarray = joined(index.counts, np.int64, (n,))
        self._bounds = chunk_bounds(self.offsets, self._sizes_bytes,
                                     min(chunk_size_bytes, self.size))
        self._mtime = os.stat(self.path).st_mtime_ns
        self._alias = {s.alias.encode("ascii"): i for i, s in enumerate(self.streams)}
        self._main = next((i for i, s in enumerate(self.streams) if s.defines_mb_size), None)

    # ---- description ------------------------------------------------------------------
    @property
    def stream_names(self) -> List[str]:
        """Names of the streams, in definition order."""
        return [s.name for s in self.streams]

    @property
    def num_chunks(self) -> int:
        """Number of chunks (CNTK's, for ``chunk_size_bytes``)."""
        return len(self._bounds) - 1

    @property
    def num_sequences(self) -> int:
        """Number of sequences CNTK reads from the file."""
        return len(self.offsets)

    @property
    def num_samples(self) -> int:
        """Sum of the sequence sizes (CNTK's sample count of the file)."""
        return int(self.sizes.sum())

    def chunk_range(self, i: int) -> Tuple[int, int]:
        """``(first, end)``: the sequences of chunk ``i`` are ``first .. end - 1``."""
        i = int(i)
        if not 0 <= i < self.num_chunks:
            raise IndexError(f"chunk {i} out of range: {self.path} has {self.num_chunks} chunks")
        return int(self._bounds[i]), int(self._bounds[i + 1])

    def chunk_sample_counts(self, i: int) -> np.ndarray:
        """Samples of each stream of each sequence of chunk ``i``, shape ``(S_i, streams)``,
        from the index pass (no number is parsed). For a sequence CNTK accepts, the largest
        (or the ``defines_mb_size`` stream's) equals its size in ``sizes``."""
        check_open(self._closed, "CTFReader", self.path)
        first, end = self.chunk_range(i)
        return self.counts[first:end]

    def describe(self) -> Dict[str, Any]:
        """A JSON-ready summary of the index."""
        return {"path": self.path, "size": self.size, "line_mode": self.line_mode,
                "streams": [{"name": s.name, "alias": s.alias, "storage": s.storage,
                             "dim": s.dim, "defines_mb_size": s.defines_mb_size}
                            for s in self.streams],
                "num_sequences": self.num_sequences, "num_samples": self.num_samples,
                "num_chunks": self.num_chunks, "skipped_sequences": self.skipped_sequences,
                "dtype": self.dtype.name}

    def __repr__(self) -> str:
        kinds = ", ".join(f"{s.name}:{s.storage}[{s.dim}]" for s in self.streams)
        return (f"CTFReader({self.path!r}, {self.num_chunks} chunks, {self.num_sequences} "
                f"sequences, streams {kinds})")

    # ---- reading ----------------------------------------------------------------------
    def chunk_span(self, i: int) -> Tuple[int, int]:
        """``(start, end)`` file offsets of chunk ``i``: its first sequence's first byte to
        its last sequence's last byte (plus one)."""
        first, end = self.chunk_range(i)
        return int(self.offsets[first]), int(self.offsets[end - 1] + self._sizes_bytes[end - 1])

    def chunk_bytes(self, i: int) -> Tuple[int, bytes]:
        """``(file offset, bytes)`` of chunk ``i`` (its ``chunk_span``), refusing a file that
        changed since it was indexed."""
        check_open(self._closed, "CTFReader", self.path)
        start, stop = self.chunk_span(i)
        with open_regular(self.path) as f:
            if os.fstat(f.fileno()).st_mtime_ns != self._mtime or \
                    os.fstat(f.fileno()).st_size != self.size:
                raise CTFError("the file changed since it was indexed; open a new CTFReader",
                               path=self.path, offset=start)
            f.seek(start)
            data = f.read(stop - start)
        if len(data) != stop - start:
            raise CTFError(f"the file ends after {len(data)} of {stop - start} bytes of chunk "
                           f"{i} (truncated since it was indexed)", path=self.path,
                           offset=start + len(data))
        return start, data

    def read_chunk(self, i: int) -> List[SequenceDict]:
        """The sequences of chunk ``i``, in file order: dicts ``{name: data}`` with dense
        ``(N, dim)`` arrays and :class:`recio.sequence.Sparse` streams (of ``dtype``)."""
        first, end = self.chunk_range(i)
        start, data = self.chunk_bytes(i)
        rel = (self.offsets[first:end] - start).tolist()
        size = self._sizes_bytes[first:end].tolist()
        return _ChunkParser(self, data, start, first, rel, size).parse()

    def __iter__(self) -> Iterator[SequenceDict]:
        for i in range(self.num_chunks):
            yield from self.read_chunk(i)

    def __len__(self) -> int:
        check_open(self._closed, "CTFReader", self.path)
        return self.num_sequences

    #: set by ``close()``: every later read raises ``ClosedError``
    _closed = False

    def close(self) -> None:
        """Nothing stays open between reads; any later read raises ``ClosedError``."""
        self._closed = True

    def __getstate__(self) -> Dict[str, Any]:
        check_open(self._closed, "CTFReader", self.path)
        return dict(self.__dict__)

    def __enter__(self) -> "CTFReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _ChunkParser:
    """Parses one chunk: the fast path (bytes methods per line, the number kernel per stream)
    for the sequences it can vouch for, the exact parser for the others."""

    def __init__(self, reader: CTFReader, data: bytes, start: int, first: int,
                 rel: List[int], size: List[int]) -> None:
        self.reader, self.data, self.start, self.first = reader, data, start, first
        self.rel, self.size = rel, size
        self.n = len(rel)
        self.exact: Optional[ExactParser] = None

    def parse(self) -> List[SequenceDict]:
        reader, n = self.reader, self.n
        first = self.first
        counts = reader.counts[first:first + n]
        expected = reader.sizes[first:first + n]
        slow = self._suspect(counts, expected)
        text = self._plain_text(slow)
        streams = reader.streams
        width = len(streams)
        texts: List[List[bytes]] = [[] for _ in streams]
        lookup = reader._alias.get
        expected_counts = counts.tolist()
        slow_list = slow.tolist()
        have = [0] * width                  # samples of each stream taken so far
        marks: List[List[int]] = []
        for j in range(n):
            marks.append(have[:])
            if slow_list[j]:
                continue
            a = self.rel[j]
            got = [0] * width
            ok = True
            for line in text[a:a + self.size[j] - 1].split(b"\n"):
                parts = line.lstrip(_DIGITS).split(b"|")
                if len(parts) < 2 or parts[0].strip(b" \t"):
                    ok = False
                    break
                row = 0
                for piece in parts[1:]:
                    name, _, values = piece.partition(b" ")
                    index = lookup(name)
                    if index is None:
                        if not name or b"\t" in name:    # an empty name, or one ended by a tab
                            if not piece or piece[0] in (32, 9):
                                ok = False
                                break
                            name, _, values = piece.replace(b"\t", b" ", 1).partition(b" ")
                            index = lookup(name)
                        if index is None:   # a comment or an unknown stream: skipped, as CNTK
                            continue
                    texts[index].append(values)
                    got[index] += 1
                    row += 1
                if not ok or not row:
                    ok = False
                    break
            if ok and got == expected_counts[j]:
                have = [h + g for h, g in zip(have, got)]
            else:
                slow_list[j] = True
                for t, mark in zip(texts, have):
                    del t[mark:]
        marks.append(have[:])
        bounds = np.asarray(marks, dtype=np.int64).reshape(n + 1, width)
        slow = np.asarray(slow_list, dtype=bool)
        arrays = []
        for s, stream in enumerate(streams):
            numbers = parse_numbers(texts[s], stream.is_sparse, stream.dim)
            bad = numbers.bad
            if not stream.is_sparse:
                bad = bad | (numbers.counts > stream.dim)
            if bad.any():
                owners = np.searchsorted(bounds[:, s], np.flatnonzero(bad), side="right") - 1
                slow[owners] = True
            arrays.append(self._stream_arrays(stream, numbers, bad))
        return self._assemble(arrays, bounds, slow)

    def _suspect(self, counts: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """Sequences the index already shows CNTK refuses, or that end the file without a
        newline: the exact parser takes them (and raises)."""
        main = self.reader._main
        slow = (counts == 0).any(axis=1)
        if main is None:
            slow |= counts.max(axis=1) != expected
        else:
            slow |= counts[:, main] != expected
        if self.n and not self.data.endswith(b"\n"):
            slow[-1] = True
        return slow

    def _plain_text(self, slow: np.ndarray) -> bytes:
        """The chunk with every ``\\r`` that ends a line made a space (the same samples for
        CNTK); sequences holding other control bytes, bytes >= 0x80 or a lone ``\\r`` are marked
        for the exact parser."""
        data = self.data
        odd = data.translate(None, _PLAIN)
        lone_cr = b"\r" in data and data.count(b"\r") != data.count(b"\r\n")
        if odd or lone_cr:
            buf = np.frombuffer(data, dtype=np.uint8)
            unusual = (buf < 32) & (buf != 9) & (buf != 10) & (buf != 13) | (buf >= 128)
            if lone_cr:
                after = np.append(buf[1:], 0)
                unusual |= (buf == 13) & (after != 10)
            where = np.flatnonzero(unusual)
            owners = np.searchsorted(np.asarray(self.rel), where, side="right") - 1
            slow[owners] = True
        return data.translate(_CR_TO_SPACE) if b"\r" in data else data

    def _stream_arrays(self, stream: CTFStream, numbers: Numbers, bad: np.ndarray):
        """The chunk's samples of one stream in ``dtype``: a ``(samples, dim)`` matrix for
        dense (short samples zero-padded), ``(indptr, indices, values)`` for sparse."""
        dtype = self.reader.dtype
        with np.errstate(over="ignore"):
            values = numbers.values.astype(dtype)
        counts = numbers.counts
        if stream.is_sparse:
            indptr = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            assert numbers.indices is not None  # parse_numbers gives a sparse stream indices
            return indptr, numbers.indices.astype(np.int32), values
        dim = stream.dim
        if counts.size and np.all(counts == dim):
            return values.reshape(len(counts), dim)
        matrix = np.zeros((len(counts), dim), dtype=dtype)
        fits = ~bad & (counts <= dim)
        rows = np.repeat(np.arange(len(counts)), counts)
        cols = np.arange(len(values)) - np.repeat(np.cumsum(counts) - counts, counts)
        use = np.repeat(fits, counts)
        matrix[rows[use], cols[use]] = values[use]
        return matrix

    def _assemble(self, arrays: list, marks: np.ndarray, slow: np.ndarray) -> List[SequenceDict]:
        reader = self.reader
        streams = reader.streams
        out: List[SequenceDict] = []
        lo = marks[:-1].tolist()
        hi = marks[1:].tolist()
        slow_list = slow.tolist()
        for j in range(self.n):
            if slow_list[j]:
                out.append(self._exact(j))
                continue
            seq: SequenceDict = {}
            for s, stream in enumerate(streams):
                a, b = lo[j][s], hi[j][s]
                data = arrays[s]
                if stream.is_sparse:
                    indptr, indices, values = data
                    p, q = int(indptr[a]), int(indptr[b])
                    seq[stream.name] = Sparse(indptr[a:b + 1] - p, indices[p:q], values[p:q],
                                              stream.dim)
                else:
                    seq[stream.name] = data[a:b]
            out.append(seq)
        return out

    def _exact(self, j: int) -> SequenceDict:
        """Sequence ``j`` of the chunk by the exact parser (one per chunk parse, so readers
        in several threads never share one)."""
        reader = self.reader
        if self.exact is None:
            self.exact = ExactParser(reader.path, reader.streams, reader.dtype)
        a = self.rel[j]
        k = self.first + j
        return self.exact.sequence(self.data[a:a + self.size[j]], self.start + a,
                                   int(reader.lines[k]), int(reader.sizes[k]))
