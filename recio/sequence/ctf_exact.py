"""CNTK 2.7's text parser, emulated byte by byte: the values of a CTF sequence, or the error
CNTK raises for it.

The reader (``recio.sequence.ctf``) parses a chunk's numbers in bulk
(``recio.sequence.ctf_numbers``); a sequence that fast path cannot vouch for (an unusual byte,
a number of more than 15 digits, a mistake) is parsed again here, following CNTK's
``TextParser`` function by function, so that odd input gives exactly CNTK's values and every
input CNTK refuses gives a :class:`recio.errors.CTFError` naming the line and byte offset.

Apart from the fast path because it is the reference: slow, exact, and written to be read
beside CNTK's source.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from recio.errors import CTFError
from recio.sequence.ctf_numbers import UINT64_MASK, pow10
from recio.sequence.ctf_streams import CTFStream
from recio.sequence.records import Sparse

#: one sequence as the reader gives it: ``{stream name: (N, dim) array | Sparse}``
SequenceDict = Dict[str, Any]


class ExactParser:
    """A byte-by-byte emulation of CNTK 2.7's ``TextParser::LoadSequence`` (TryReadRow,
    TryReadSample, TryGetInputId, TryReadDenseSample, TryReadSparseSample, TryReadUint64,
    TryReadRealNumber), used for the sequences the fast path leaves to it. Raises CTFError
    where CNTK counts an error (its default allows none)."""

    def __init__(self, path: str, streams: List[CTFStream], dtype: Any) -> None:
        self.path, self.dtype = path, dtype
        self.streams = streams
        self.alias = {s.alias.encode("ascii"): i for i, s in enumerate(self.streams)}
        self.max_alias = max(len(a) for a in self.alias)
        self.data = b""
        self.pos = self.end = 0
        self.base = self.line0 = 0

    # -- errors ---------------------------------------------------------------------------
    def fail(self, message: str, pos: Optional[int] = None) -> CTFError:
        pos = self.pos if pos is None else pos
        line = self.line0 + self.data.count(b"\n", 0, min(pos, self.end))
        return CTFError(message, path=self.path, line=line, offset=self.base + pos)

    def char(self, pos: Optional[int] = None) -> str:
        byte = self.data[self.pos if pos is None else pos]
        return repr(chr(byte)) if 0x20 <= byte < 0x7F else f"byte 0x{byte:02x}"

    # -- a sequence -----------------------------------------------------------------------
    def sequence(self, data: bytes, base: int, line0: int, expected: int) -> SequenceDict:
        """Parse one sequence's bytes (starting at file offset ``base`` on line ``line0``)."""
        self.data, self.pos, self.end = data, 0, len(data)
        self.base, self.line0 = base, line0
        n = len(self.streams)
        self.dense: List[List[float]] = [[] for _ in range(n)]
        self.sparse_index: List[List[int]] = [[] for _ in range(n)]
        self.nnz: List[List[int]] = [[] for _ in range(n)]
        self.samples = [0] * n
        while self.pos < self.end:
            row_start = self.pos
            if not self.row():
                raise self.fail("this line holds no sample of a configured stream (blank, only "
                                "a comment, or only unknown stream names); CNTK refuses such a "
                                "line inside a sequence: remove it or give it a sample",
                                row_start)
        return self.finish(expected)

    def finish(self, expected: int) -> SequenceDict:
        """CNTK's per-sequence checks, then the sequence's arrays."""
        names = [s.name for s, k in zip(self.streams, self.samples) if k == 0]
        if names:
            raise self.fail(f"stream(s) {', '.join(map(repr, names))} have no sample in this "
                            f"sequence; CNTK needs every stream in every sequence (\"Malformed "
                            f"input file\")", 0)
        main = [i for i, s in enumerate(self.streams) if s.defines_mb_size]
        checked = main or range(len(self.streams))
        for i in checked:
            if self.samples[i] > expected:
                raise self.fail(f"stream {self.streams[i].name!r} has {self.samples[i]} samples "
                                f"but the sequence has {expected} "
                                f"{'lines with it' if main else 'lines'}; a stream may appear "
                                f"at most once per line on average (split the sequence or "
                                f"fix its ids)", 0)
        most = max(self.samples[i] for i in checked)
        if most < expected:
            what = (f"stream {self.streams[main[0]].name!r} has" if main
                    else "its largest stream has")
            raise self.fail(f"the sequence has {expected} lines but {what} only {most} samples; "
                            f"CNTK needs a sample of the longest stream on every line", 0)
        dtype = self.dtype
        out: SequenceDict = {}
        for i, stream in enumerate(self.streams):
            if stream.is_sparse:
                values = _cast(self.dense[i], dtype)
                indices = np.asarray(self.sparse_index[i], dtype=np.int32)
                out[stream.name] = Sparse.from_counts(np.asarray(self.nnz[i], np.int64),
                                                      indices, values, stream.dim)
            else:
                out[stream.name] = _cast(self.dense[i], dtype).reshape(self.samples[i],
                                                                       stream.dim)
        return out

    # -- TryReadRow -----------------------------------------------------------------------
    def row(self) -> bool:
        data, end = self.data, self.end
        while self.pos < end and 48 <= data[self.pos] <= 57:   # the sequence id
            self.pos += 1
        read = 0
        while self.pos < end:
            c = data[self.pos]
            if c == 10:
                self.pos += 1
                return read > 0
            if c == 32 or c == 9 or c < 32 or c >= 128:    # column delimiters
                self.pos += 1
                continue
            if self.sample():
                read += 1
            else:
                self.skip_to_next_input()
        return True   # the file ends without a newline: CNTK accepts the row as it is

    def skip_to_next_input(self) -> None:
        data, end = self.data, self.end
        while self.pos < end and data[self.pos] not in (124, 10):
            self.pos += 1

    # -- TryReadSample --------------------------------------------------------------------
    def sample(self) -> bool:
        if self.data[self.pos] != 124:
            raise self.fail(f"unexpected {self.char()} where a sample should start with '|' "
                            f"(a stream name); a line is an optional id, then '|name values' "
                            f"samples")
        at = self.pos
        self.pos += 1
        if self.pos < self.end and self.data[self.pos] == 35:   # '|#': a comment
            self.pos += 1
            return False
        index = self.input_id()
        if index is None:
            return False
        stream = self.streams[index]
        if stream.is_sparse:
            self.read_sparse(index, stream, at)
        else:
            self.read_dense(index, stream, at)
        self.samples[index] += 1
        return True

    def input_id(self) -> Optional[int]:
        data, end, start = self.data, self.end, self.pos
        while self.pos < end:
            c = data[self.pos]
            if c == 32 or c == 9 or c == 124 or c < 32 or c >= 128:
                if self.pos > start:
                    return self.alias.get(data[start:self.pos])  # unknown: skipped silently
                raise self.fail(f"'|' is followed by {self.char()} instead of a stream name")
            if self.pos - start >= self.max_alias:
                return None       # longer than every alias: skipped silently, as CNTK does
            self.pos += 1
        raise self.fail(f"the file ends inside the stream name "
                        f"{data[start:end].decode('latin-1')!r}; end the file with a newline "
                        f"(or remove the dangling '|name')", start - 1)

    def read_dense(self, index: int, stream: CTFStream, start: int) -> None:
        """A dense sample whose ``|`` is at ``start``."""
        data, end, dim = self.data, self.end, stream.dim
        values = self.dense[index]
        counter = 0
        while self.pos < end:
            c = data[self.pos]
            if c == 32 or c == 9:
                self.pos += 1
                continue
            if c < 32 or c >= 128 or c == 124:
                if counter > dim:
                    raise self.fail(f"dense sample of stream {stream.name!r} has {counter} "
                                    f"values, more than its dim {dim}", start)
                values.extend([0.0] * (dim - counter))   # a short sample is zero-padded
                return
            values.append(self.number())
            counter += 1
        if counter == 0:
            raise self.fail(f"the file ends right after the name of dense stream "
                            f"{stream.name!r}, without values or a final newline; end the file "
                            f"with a newline", start)
        if counter != dim:
            raise self.fail(f"the file ends, without a final newline, inside a dense sample of "
                            f"stream {stream.name!r} with {counter} values instead of {dim}; "
                            f"CNTK reads such a sample as undefined memory: end the file with a "
                            f"newline (short samples are then zero-padded)", start)

    def read_sparse(self, index: int, stream: CTFStream, start: int) -> None:
        """A sparse sample whose ``|`` is at ``start``."""
        data, end, dim = self.data, self.end, stream.dim
        values, indices = self.dense[index], self.sparse_index[index]
        before = len(values)
        while self.pos < end:
            c = data[self.pos]
            if c == 32 or c == 9:
                self.pos += 1
                continue
            if c < 32 or c >= 128 or c == 124:
                self.nnz[index].append(len(values) - before)
                return
            at = self.pos
            item = self.uint64()
            if item >= dim:
                raise self.fail(f"sparse index {item} of stream {stream.name!r} is not below "
                                f"its dim {dim}", at)
            if data[self.pos] != 58:
                raise self.fail(f"expected ':' after sparse index {item} of stream "
                                f"{stream.name!r}, found {self.char()}; write index:value with "
                                f"no spaces")
            self.pos += 1
            values.append(self.number())
            indices.append(item)
        if not values:  # CNTK checks the stream's values so far in this sequence, not the sample's
            raise self.fail(f"the file ends inside sparse stream {stream.name!r} before any "
                            f"index:value; end the file with a newline", start)
        self.nnz[index].append(len(values) - before)

    def uint64(self) -> int:
        data, end = self.data, self.end
        value, start = 0, self.pos
        while self.pos < end:
            c = data[self.pos]
            if not 48 <= c <= 57:
                if self.pos == start:
                    raise self.fail(f"expected a sparse index (digits) but found {self.char()}; "
                                    f"a sparse sample is index:value items")
                return value
            old = value
            value = (value * 10 + c - 48) & UINT64_MASK
            if old > value:
                raise self.fail("sparse index overflows a 64-bit unsigned integer", start)
            self.pos += 1
        raise self.fail("the file ends inside a sparse index; end the file with a newline",
                        start)

    # -- TryReadRealNumber ----------------------------------------------------------------
    def number(self) -> float:
        """One number by CNTK's state machine (the double before the cast to ElemType)."""
        data, end, start = self.data, self.end, self.pos
        state = 0   # 0 init, 1 sign, 2 integral, 3 period, 4 fraction, 5 e, 6 exp sign, 7 exp
        coefficient = number = divider = 0.0
        negative = False
        while self.pos < end:
            c = data[self.pos]
            digit = 48 <= c <= 57
            if state == 0:
                if digit:
                    state, number = 2, float(c - 48)
                elif c == 43 or c == 45:
                    state, negative = 1, c == 45
                else:
                    raise self.fail(f"{self.char()} cannot start a number (CNTK's numbers are "
                                    f"[+-]digits[.digits][e[+-]digits]; no '.5', 'inf' or "
                                    f"'nan')")
            elif state == 1:
                if not digit:
                    raise self.fail(f"a sign is followed by {self.char()} instead of a digit")
                state, number = 2, float(c - 48)
            elif state == 2:
                if digit:
                    number = number * 10.0 + float(c - 48)
                elif c == 46:
                    state = 3
                elif c == 69 or c == 101:
                    state, coefficient, number = 5, (-number if negative else number), 0.0
                else:
                    return -number if negative else number
            elif state == 3:
                if not digit:
                    return -number if negative else number
                state, coefficient, number, divider = 4, number, float(c - 48), 10.0
            elif state == 4:
                if digit:
                    number = number * 10.0 + float(c - 48)
                    divider *= 10.0
                elif c == 69 or c == 101:
                    state = 5
                    coefficient += number / divider
                    if negative:
                        coefficient = -coefficient
                else:
                    coefficient += number / divider
                    return -coefficient if negative else coefficient
            elif state == 5:
                if digit:
                    state, negative, number = 7, False, float(c - 48)
                elif c == 43 or c == 45:
                    state, negative = 6, c == 45
                else:
                    raise self.fail(f"an exponent 'e' is followed by {self.char()} instead of "
                                    f"a digit or sign")
            elif state == 6:
                if not digit:
                    raise self.fail(f"an exponent sign is followed by {self.char()} instead of "
                                    f"a digit")
                state, number = 7, float(c - 48)
            else:
                if digit:
                    number = number * 10.0 + float(c - 48)
                else:
                    return coefficient * pow10(-number if negative else number)
            self.pos += 1
        # the sequence's bytes end inside the number (the file has no final newline)
        if state in (2, 3):
            return -number if negative else number
        if state == 4:
            coefficient += number / divider
            return -coefficient if negative else coefficient
        if state == 7:
            return coefficient * pow10(-number if negative else number)
        raise self.fail("the file ends inside a number; end the file with a newline", start)


def _cast(values: List[float], dtype: np.dtype) -> np.ndarray:
    """Python doubles to ``dtype`` (C's double -> float rounding; overflow gives infinity)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(dtype)
