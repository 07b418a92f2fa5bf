"""The index pass of a CTF file: one streamed read that finds the sequences (CNTK's
``TextInputIndexBuilder`` grouping), their sizes, each stream's samples per sequence and the
chunks, without parsing a number.

A block of whole lines at a time (bounded memory) is examined with NumPy: line starts, sequence
ids (digit runs decoded 8 bytes per operation, CNTK's 64-bit overflow check for longer ones),
``|alias`` occurrences per line. The reader (``recio.sequence.ctf``) keeps the arrays and
parses a chunk when asked.

Apart from the reader because it is the other pass over the file: it decides what a sequence
and a chunk are, and what CNTK refuses when it opens a file (empty, UTF-16, no first id).
"""
from __future__ import annotations

import os
import re
from typing import Any, List, Optional, Tuple

import numpy as np

from recio.errors import CTFError
from recio.sequence.ctf_numbers import UINT64_MASK, byte_words, decimal_runs
from recio.sequence.ctf_streams import CTFStream, is_terminator
from recio.storage import open_regular

_BOM = b"\xef\xbb\xbf"
_UTF16_BOM = b"\xff\xfe"            # 0xFEFF read as a little-endian uint16, as CNTK checks it
_SPACE = b" \t\n\v\f\r"              # C isspace(): what CNTK skips before the first line
_DIGIT_RUN = re.compile(rb"[0-9]+")
_BLOCK = 8 << 20                     # bytes read at a time by the index pass
#: terminator table for NumPy lookups
_TERMINATOR = np.array([is_terminator(b) for b in range(256)])


class _Index:
    """The result of the index pass (per-sequence arrays, in file order)."""

    def __init__(self) -> None:
        self.offsets: List[np.ndarray] = []
        self.sizes: List[np.ndarray] = []
        self.keys: List[np.ndarray] = []
        self.samples: List[np.ndarray] = []
        self.lines: List[np.ndarray] = []
        self.counts: List[np.ndarray] = []


def _numeric_id(digits: bytes, path: str, offset: int, line: int) -> int:
    """A sequence id as CNTK reads it: a size_t accumulated digit by digit, refused when a step
    wraps below the previous value (a longer wrap goes unnoticed, as in CNTK)."""
    if len(digits) <= 19:
        return int(digits)
    value = 0
    for c in digits:
        old = value
        value = (value * 10 + c - 48) & UINT64_MASK
        if old > value:
            raise CTFError(f"sequence id {digits[:40].decode()}... overflows a 64-bit unsigned "
                           f"integer; use shorter ids", path=path, line=line, offset=offset)
    return value


class Scanner:
    """The index pass: one streamed read of the file, a block of whole lines at a time, that
    finds the sequences (CNTK's grouping), their sizes and each stream's samples per sequence
    (counting ``|alias`` occurrences; no number is parsed)."""

    def __init__(self, path: str, streams: List[CTFStream]) -> None:
        self.path = path
        self.streams = streams
        self.aliases = [np.frombuffer(s.alias.encode("ascii"), np.uint8) for s in self.streams]
        main = [i for i, s in enumerate(self.streams) if s.defines_mb_size]
        self.main: Optional[int] = main[0] if main else None
        self.index = _Index()
        self.skipped = 0
        # the open sequence: [offset, key, first line, samples, counts]
        self.open: Optional[list] = None
        self.key = 0

    def run(self) -> Tuple[_Index, int, int, bool, int]:
        with open_regular(self.path) as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise CTFError("the file is empty; CNTK refuses an empty input file",
                               path=self.path, line=1, offset=0)
            start, lines_before, block = self._skip_leading(f, size)
            line_mode = block[:1] == b"|"
            if not line_mode and not 48 <= block[0] <= 57:
                raise CTFError(f"expected a sequence id (digits) at the start of the first "
                               f"line, found {block[:1]!r}; start every sequence's lines with "
                               f"its id, or start the file with '|' for one sequence per line",
                               path=self.path, line=lines_before + 1, offset=start)
            self.line_mode = line_mode
            base, line = start, lines_before + 1
            read_to = f.tell()
            while block:
                cut = block.rfind(b"\n") + 1
                while cut == 0 and read_to < size:       # a line longer than a block
                    more = f.read(_BLOCK)
                    if not more:          # shorter than when it was sized: stop there
                        size = read_to
                        break
                    read_to += len(more)
                    block += more
                    cut = block.rfind(b"\n") + 1
                at_eof = read_to >= size
                if at_eof:
                    cut = len(block)
                self._block(block[:cut], base, line, at_eof)
                line += block.count(b"\n", 0, cut)
                base += cut
                block = block[cut:]
                if read_to < size:
                    more = f.read(_BLOCK)
                    read_to += len(more)
                    block += more
        self._close(size)
        return self.index, self.skipped, size, line_mode, start

    def _skip_leading(self, f: Any, size: int) -> Tuple[int, int, bytes]:
        """Skip a UTF-8 BOM and every leading whitespace byte, as CNTK does: returns the offset
        of the first line, the newlines skipped and the rest of the first block."""
        block = f.read(_BLOCK)
        if block[:2] == _UTF16_BOM:
            raise CTFError("the file starts with a UTF-16 byte order mark; CNTK reads only "
                           "UTF-8/ASCII text: convert the file to UTF-8", path=self.path,
                           line=1, offset=0)
        skip = 0
        while skip < 3 and block[skip:skip + 1] == _BOM[skip:skip + 1]:
            skip += 1
        newlines = 0
        offset = 0
        while True:
            rest = block[skip:].lstrip(_SPACE)
            newlines += block.count(b"\n", skip, len(block) - len(rest))
            if rest:
                return offset + len(block) - len(rest), newlines, rest
            offset += len(block)
            block, skip = f.read(_BLOCK), 0
            if not block:
                raise CTFError("the file holds only whitespace; CNTK refuses it as an empty "
                               "input file", path=self.path, line=newlines + 1, offset=size)

    def _block(self, data: bytes, base: int, line: int, at_eof: bool) -> None:
        """Index the whole lines in ``data`` (file offset ``base``, first line number ``line``)."""
        if not data:
            return
        # a newline, then spare bytes for the 8-byte words and 20-byte windows read at line starts
        buf = np.frombuffer(data + b"\n" + bytes(24), dtype=np.uint8)
        newlines = np.flatnonzero(buf[:len(data)] == 10)
        starts = np.concatenate(([0], newlines + 1))
        if starts[-1] == len(data):
            starts = starts[:-1]
        nlines = len(starts)
        counts = self._alias_counts(buf, len(data), newlines, nlines, at_eof)
        counted = np.ones(nlines, dtype=bool)
        has_id = (buf[starts] >= 48) & (buf[starts] <= 57)
        if at_eof and not data.endswith(b"\n") and data[starts[-1]:].isdigit():
            # CNTK's id reader runs into the end of the file: not an id, and not a line
            has_id[-1] = False
            counted[-1] = self.line_mode
        ends = np.append(starts[1:], len(data))
        if self.line_mode:
            keep = counts[:, self.main] > 0 if self.main is not None else counted
            self.skipped += int(nlines - np.count_nonzero(keep))
            rows = np.flatnonzero(keep)
            self._emit(base + starts[rows], ends[rows] - starts[rows], line - 1 + rows,
                       np.ones(len(rows), np.int64), line + rows, counts[rows])
            return
        id_rows = np.flatnonzero(has_id)
        if self.open is None and (id_rows.size == 0 or id_rows[0] != 0):
            raise CTFError("the first line has no sequence id: its digits run into the end of "
                           "the file; a line is an id, then '|name values' samples",
                           path=self.path, line=line, offset=base)
        values = self._ids(data, buf, starts[id_rows], base, line + id_rows)
        previous = np.empty_like(values)           # uint64 throughout: ids use all 64 bits
        previous[:1] = self.key
        previous[1:] = values[:-1]
        is_new = values != previous
        if self.open is None:
            is_new[0] = True
        new_rows = id_rows[is_new]
        new_keys = values[is_new]
        if values.size:
            self.key = int(values[-1])
        per_line = counts[:, self.main] > 0 if self.main is not None else counted
        samples = (per_line & counted).astype(np.int64)
        bounds = np.concatenate(([0], new_rows)).astype(np.int64)
        seg_samples = np.add.reduceat(samples, bounds)
        seg_counts = np.add.reduceat(counts, bounds, axis=0)
        empty = bounds == np.append(bounds[1:], nlines)
        seg_samples[empty] = 0
        seg_counts[empty] = 0
        # segment 0 continues the open sequence; each other one starts a new sequence
        if self.open is not None:
            self.open[3] += int(seg_samples[0])
            self.open[4] = self.open[4] + seg_counts[0]
        if not new_rows.size:
            return
        offsets = base + starts[new_rows]
        self._close(int(offsets[0]))
        done = slice(1, len(bounds) - 1)      # the segments that end inside this block
        self._emit(offsets[:-1], np.diff(offsets), new_keys[:-1], seg_samples[done],
                   line + new_rows[:-1], seg_counts[done])
        self.open = [int(offsets[-1]), int(new_keys[-1]), int(line + new_rows[-1]),
                     int(seg_samples[-1]), seg_counts[-1].copy()]

    def _ids(self, data: bytes, buf: np.ndarray, at: np.ndarray, base: int,
             lines: np.ndarray) -> np.ndarray:
        """The numeric ids (uint64) of the lines starting at ``at``: up to 19 digits decoded
        together; longer ones one by one, with CNTK's overflow check."""
        window = np.lib.stride_tricks.sliding_window_view(buf, 20)[at]
        digit = (window - np.uint8(48)) < 10
        length = np.where(digit.all(axis=1), 20, digit.argmin(axis=1))
        values = decimal_runs(byte_words(buf), at, np.minimum(length, 19))
        for k in np.flatnonzero(length == 20).tolist():
            run = _DIGIT_RUN.match(data, int(at[k]))
            assert run is not None  # the line starts with a digit: has_id
            digits = run.group()
            values[k] = _numeric_id(digits, self.path, base + int(at[k]), int(lines[k]))
        return values

    def _alias_counts(self, buf: np.ndarray, n: int, newlines: np.ndarray, nlines: int,
                      at_eof: bool) -> np.ndarray:
        """``|alias`` occurrences of each stream on each line, an alias counting only when a
        terminator (or the end of the file) follows it, as CNTK's parser and index read names."""
        counts = np.zeros((nlines, len(self.streams)), dtype=np.int64)
        pipes = np.flatnonzero(buf[:n] == 124)
        if pipes.size == 0:
            return counts
        padded = np.concatenate((buf[:n], np.zeros(max(len(a) for a in self.aliases) + 2,
                                                   np.uint8)))   # zeros end every name
        for s, alias in enumerate(self.aliases):
            hit = np.ones(pipes.size, dtype=bool)
            for k, byte in enumerate(alias.tolist(), 1):
                hit &= padded[pipes + k] == byte
            after = pipes + len(alias) + 1
            hit &= _TERMINATOR[padded[after]] | ((after >= n) & at_eof)
            hit &= after <= n
            if hit.any():
                rows = np.searchsorted(newlines, pipes[hit])
                counts[:, s] = np.bincount(rows, minlength=nlines)
        return counts

    def _emit(self, offsets, sizes, keys, samples, lines, counts) -> None:
        """Add finished sequences (arrays); in id mode those without a ``defines_mb_size`` line
        are left out and counted."""
        samples = np.asarray(samples, np.int64)
        if not self.line_mode and self.main is not None and not samples.all():
            keep = samples > 0
            self.skipped += int(keep.size - np.count_nonzero(keep))
            offsets, sizes, keys, lines = (np.asarray(a)[keep] for a in
                                           (offsets, sizes, keys, lines))
            samples, counts = samples[keep], np.asarray(counts)[keep]
        index = self.index
        index.offsets.append(np.asarray(offsets, np.int64))
        index.sizes.append(np.asarray(sizes, np.int64))
        index.keys.append(np.asarray(keys, np.uint64))
        index.samples.append(np.asarray(samples, np.int64))
        index.lines.append(np.asarray(lines, np.int64))
        index.counts.append(np.asarray(counts, np.int64).reshape(-1, len(self.streams)))

    def _close(self, end: int) -> None:
        """Finish the open sequence at file offset ``end`` (left out when it has no line with
        the ``defines_mb_size`` stream, as CNTK leaves it out)."""
        seq = self.open
        if seq is None or self.line_mode:
            return
        self.open = None
        self._emit([seq[0]], [end - seq[0]], [seq[1]], [seq[3]], [seq[2]], [seq[4]])


def chunk_bounds(offsets: np.ndarray, sizes: np.ndarray, limit: int) -> np.ndarray:
    """CNTK's chunking: a sequence starts a new chunk when the chunk's byte span (first
    sequence's start to last sequence's end) plus its size exceeds ``limit``. Returns the index
    of each chunk's first sequence and, last, the number of sequences."""
    n = len(offsets)
    if n == 0:
        return np.zeros(1, np.int64)
    ends = offsets + sizes
    contiguous = bool(np.all(offsets[1:] == ends[:-1]))
    firsts = [0]
    if contiguous:   # span + size > limit  <=>  the sequence's end passes chunk start + limit
        i = 0
        while True:
            j = int(np.searchsorted(ends, offsets[i] + limit, side="right"))
            j = max(j, i + 1)
            if j >= n:
                break
            firsts.append(j)
            i = j
    else:
        start = int(offsets[0])
        last_end = int(ends[0])
        for j in range(1, n):
            if last_end - start + int(sizes[j]) > limit:
                firsts.append(j)
                start = int(offsets[j])
            last_end = int(ends[j])
    firsts.append(n)
    return np.asarray(firsts, np.int64)
