"""CNTK's number parsing, vectorised: the value texts of many samples of one stream parsed
together by NumPy, in the same double-precision operations CNTK 2.7 uses.

CNTK reads ``[+-]digits[.digits*][(e|E)[+-]digits]`` digit by digit into a double (not
correctly rounded, and not what ``float()`` gives). Here plain tokens are checked with
byte-class tables, every digit run becomes an exact integer (8 digits per word operation), and
the runs are combined as CNTK combines them: ``±(int + frac / 10**len(frac)) * pow(10, exp)``.
A sample the kernel cannot vouch for (an unusual byte, more than 15 digits in a run, an index
out of range) is marked bad, for the exact parser (``recio.sequence.ctf_exact``) to decide.

Apart from the reader (``recio.sequence.ctf``) because it is the hot arithmetic, with its own
tables, that the index pass (sequence ids) and the exact parser (``pow10``) also use.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

#: a C ``size_t``'s wrap-around: CNTK accumulates ids and sparse indices in 64 bits
UINT64_MASK = (1 << 64) - 1
_BATCH = 4 << 20                     # bytes of sample text the number kernel takes at a time


def pow10(exponent: float) -> float:
    """``pow(10.0, exponent)`` as C's libm gives it (overflow is infinity, not an exception)."""
    try:
        return math.pow(10.0, exponent)
    except OverflowError:
        return math.inf


#: pow(10, e) for e in [-400, 400] (beyond, the result is 0 or infinity either way)
_POW10 = np.array([pow10(float(e)) for e in range(-400, 401)], dtype=np.float64)
#: 10**k exactly, as the double CNTK's "divider *= 10" reaches (exact up to 10**22)
_P10F = np.array([10.0 ** k for k in range(23)], dtype=np.float64)

# byte classes of the number kernel
_SEP, _DIG, _SIGN, _DOT, _EXP, _COLON, _OTHER = range(7)
_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_CLASS[[9, 10, 32]] = _SEP
_CLASS[48:58] = _DIG
_CLASS[[43, 45]] = _SIGN
_CLASS[46] = _DOT
_CLASS[[69, 101]] = _EXP
_CLASS[58] = _COLON


def _pair_table(pairs: Sequence[Tuple[int, int]]) -> np.ndarray:
    table = np.zeros(64, dtype=bool)
    for a, b in pairs:
        table[a * 8 + b] = True
    return table


# neighbouring byte classes allowed inside (and at the edges of) a plain token: a dense value
# [+-]D+[.D*][eE[+-]D+] (an exponent only right after a digit), a sparse item D+:value
_NUMBER_PAIRS = [(_SIGN, _DIG), (_DIG, _DIG), (_DIG, _DOT), (_DIG, _EXP), (_DIG, _SEP),
                 (_DOT, _DIG), (_DOT, _SEP), (_EXP, _DIG), (_EXP, _SIGN)]
_DENSE_PAIRS = _pair_table([(_SEP, _SEP), (_SEP, _DIG), (_SEP, _SIGN), *_NUMBER_PAIRS])
_SPARSE_PAIRS = _pair_table([(_SEP, _SEP), (_SEP, _DIG), (_DIG, _COLON), (_COLON, _DIG),
                             (_COLON, _SIGN), *_NUMBER_PAIRS])
# consecutive '.', 'e' and ':' within one token: at most '.' then 'e' (after ':' for sparse)
_DENSE_MARKERS = _pair_table([(_DOT, _EXP)])
_SPARSE_MARKERS = _pair_table([(_DOT, _EXP), (_COLON, _DOT), (_COLON, _EXP)])
_MAX_DIGITS = 15       # below 2**53: CNTK's digit-by-digit double accumulation is exact


class Numbers:
    """What the number kernel found in a list of sample texts of one stream."""

    __slots__ = ("counts", "values", "indices", "bad")

    def __init__(self, counts: np.ndarray, values: np.ndarray, indices: Optional[np.ndarray],
                 bad: np.ndarray) -> None:
        self.counts = counts      # tokens of each sample (values, or index:value items)
        self.values = values      # float64, every token's value in order
        self.indices = indices    # int64 sparse indices (None for dense)
        self.bad = bad            # samples the kernel cannot vouch for (exact path decides)


def parse_numbers(texts: List[bytes], sparse: bool, dim: int) -> Numbers:
    """Parse the value text of each sample (``b"1 2.5 -3e2"`` or ``b"3:1.5 7:2"``) with CNTK's
    arithmetic, in batches of about ``_BATCH`` bytes."""
    parts = []
    start = 0
    size = 0
    for i, text in enumerate(texts):
        size += len(text) + 1
        if size >= _BATCH:
            parts.append(_parse_batch(texts[start:i + 1], sparse, dim))
            start, size = i + 1, 0
    if start < len(texts) or not parts:
        parts.append(_parse_batch(texts[start:], sparse, dim))
    if len(parts) == 1:
        return parts[0]
    return Numbers(np.concatenate([p.counts for p in parts]),
                    np.concatenate([p.values for p in parts]),
                    np.concatenate([p.indices for p in parts]) if sparse else None,
                    np.concatenate([p.bad for p in parts]))


class _Batch:
    """The sample texts of one batch joined as ``\n t0 \n t1 ... \n`` with their byte
    classes, class pairs, token starts and sample bounds."""

    def __init__(self, texts: List[bytes]) -> None:
        # 8 spare bytes at the end: _run_values reads 8-byte words from any run start
        self.buf = np.frombuffer(b"\n" + b"\n".join(texts) + b"\n" + bytes(8), dtype=np.uint8)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        self.bounds = np.zeros(len(texts) + 1, dtype=np.int64)   # the newline before each
        np.cumsum(lengths + 1, out=self.bounds[1:])
        self.cls = cls = _CLASS[self.buf[:-8]]
        self.pair = cls[:-1] * np.uint8(8) + cls[1:]     # at i: classes of bytes i and i + 1
        gap = cls == _SEP
        self.starts = np.flatnonzero(gap[:-1] > gap[1:]) + 1
        self.counts = np.diff(np.searchsorted(self.starts, self.bounds))

    def samples_at(self, positions: np.ndarray) -> np.ndarray:
        """Which sample each byte position lies in."""
        found = np.searchsorted(self.bounds, positions, side="right") - 1
        return np.clip(found, 0, len(self.bounds) - 2)

    def invalid(self, sparse: bool) -> np.ndarray:
        """Samples holding something other than plain tokens (``[+-]D+[.D*][eE[+-]D+]``, or
        ``D+:`` and that for sparse): a bool per sample."""
        bad = np.zeros(len(self.bounds) - 1, dtype=bool)
        wrong = np.flatnonzero(~(_SPARSE_PAIRS if sparse else _DENSE_PAIRS)[self.pair])
        if wrong.size:
            bad[self.samples_at(wrong)] = True
            bad[self.samples_at(wrong + 1)] = True
        cls = self.cls
        markers = np.flatnonzero((cls >= _DOT) & (cls <= _COLON))   # '.', 'e' and ':'
        if markers.size > 1:   # positions with the same count of separators before them
            token = np.cumsum(cls == _SEP, dtype=np.int32)[markers]
            same = token[1:] == token[:-1]
            pair = cls[markers[:-1]] * np.uint8(8) + cls[markers[1:]]
            wrong = markers[1:][same & ~(_SPARSE_MARKERS if sparse else _DENSE_MARKERS)[pair]]
            if wrong.size:
                bad[self.samples_at(wrong)] = True
        if sparse:  # every item needs its ':' (at most one each, by the marker rule)
            colons = np.flatnonzero(cls == _COLON)
            bad |= self.counts != np.diff(np.searchsorted(colons, self.bounds))
        return bad


def _parse_batch(texts: List[bytes], sparse: bool, dim: int) -> Numbers:
    """The kernel on one batch: plain tokens are checked with byte-class tables and their digit
    runs turned into exact integers; samples holding anything else are marked bad and emptied
    (then the batch is joined again without them)."""
    batch = _Batch(texts)
    bad = batch.invalid(sparse)
    if bad.any():
        batch = _Batch([b"" if b else t for t, b in zip(texts, bad.tolist())])
        if batch.invalid(sparse).any():   # emptied samples cannot be invalid: stay exact
            return Numbers(np.zeros(len(texts), np.int64), np.zeros(0),
                            np.zeros(0, np.int64) if sparse else None,
                            np.ones(len(texts), bool))
    return _convert(batch, sparse, dim, bad)


def _digits8(words: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The number spelt by the first ``size`` (1..8) ASCII digits of each little-endian 8-byte
    word (the bytes after them are ignored), with a few integer operations per word."""
    x = (words - np.uint64(0x3030303030303030)) << ((np.uint64(8) - size) * np.uint64(8))
    x = (x * np.uint64(2561)) >> np.uint64(8)          # the bytes are 0..9: no mask needed
    x = ((x & np.uint64(0x00FF00FF00FF00FF)) * np.uint64(6553601)) >> np.uint64(16)
    return ((x & np.uint64(0x0000FFFF0000FFFF)) * np.uint64(42949672960001)) >> np.uint64(32)


def byte_words(buf: np.ndarray) -> np.ndarray:
    """The little-endian 8-byte word starting at each byte of ``buf`` (a view, no copy)."""
    return np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))


def decimal_runs(words: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The uint64 each run of ``length`` (1..19) ASCII digits at ``start`` spells: the first
    1..8 digits, then 8 at a time. ``words`` (see byte_words) must reach 8 bytes past each run."""
    if length.size == 0 or int(length.max()) <= 8:
        return _digits8(words[start], length.astype(np.uint64))
    length = length.astype(np.int64)
    head = (length - 1) % 8 + 1
    value = _digits8(words[start], head.astype(np.uint64))
    pos, rest = start + head, length - head
    eight = np.uint64(8)
    while True:
        more = np.flatnonzero(rest > 0)
        if not more.size:
            return value
        value[more] = value[more] * np.uint64(10**8) + \
            _digits8(words[pos[more]], np.full(more.size, eight))
        pos[more] += 8
        rest[more] -= 8


def _run_values(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The integer (uint64) each digit run spells (runs of more than 19 digits give garbage for
    the caller to refuse). ``buf`` must have 8 bytes after the last run."""
    return decimal_runs(byte_words(buf), start, np.minimum(length, 19))


def _convert(batch: _Batch, sparse: bool, dim: int, bad: np.ndarray) -> Numbers:
    """Numbers of a batch of plain tokens, computed as CNTK computes them:
    ``±(int + frac / 10**len(frac)) * pow(10, exp)`` in double, every digit run an exact
    integer (longer runs and out-of-range indices mark their sample bad)."""
    buf, cls = batch.buf, batch.cls
    digit = cls == _DIG
    start = np.flatnonzero(digit[:-1] < digit[1:]) + 1
    length = np.flatnonzero(digit[:-1] > digit[1:]) + 1 - start
    ntokens = batch.starts.size
    if start.size == 0:
        return Numbers(batch.counts, np.zeros(0), np.zeros(0, np.int64) if sparse else None,
                        bad)
    whole_value = _run_values(buf, start, length)
    run_value = whole_value.astype(np.float64)     # exact up to _MAX_DIGITS digits
    before, before2 = cls[start - 1], cls[start - 2]
    signed_exp = (before == _SIGN) & (before2 == _EXP)
    exp_run = (before == _EXP) | signed_exp
    frac_run = before == _DOT
    lead = _COLON if sparse else _SEP
    signed_int = (before == _SIGN) & (before2 == lead)
    int_run = (before == lead) | signed_int
    minus = buf[start - 1] == 45
    refuse = length > _MAX_DIGITS
    index: Optional[np.ndarray] = None
    if sparse:
        index_run = before == _SEP
        index_value = whole_value[index_run]
        refuse[np.flatnonzero(index_run)[index_value >= dim]] = True
        index = index_value.astype(np.int64)
    if refuse.any():
        bad = bad.copy()
        bad[batch.samples_at(start[refuse])] = True
    first = np.flatnonzero(int_run)            # each token's integer run; then its fraction
    if first.size != ntokens:  # not one integer part per token: a kernel bug, stay exact
        return Numbers(batch.counts, np.zeros(ntokens), np.zeros(ntokens, np.int64)
                        if sparse else None, np.ones(len(bad), bool))
    frac_run = np.append(frac_run, False)      # run k + 1, then k + 2, may follow run k
    exp_run = np.append(exp_run, (False, False))
    coefficient = run_value[first]
    after = first + 1
    has_frac = frac_run[after]
    if has_frac.any():
        at = after[has_frac]
        coefficient[has_frac] += run_value[at] / _P10F[np.minimum(length[at], 22)]
    np.negative(coefficient, out=coefficient, where=minus[first] & signed_int[first])
    after += has_frac
    has_exp = exp_run[after]
    if has_exp.any():
        at = after[has_exp]
        exponent = np.minimum(run_value[at], 400).astype(np.int64)
        np.negative(exponent, out=exponent, where=minus[at] & signed_exp[at])
        with np.errstate(invalid="ignore", over="ignore"):  # 0 * inf is NaN in CNTK too
            coefficient[has_exp] *= _POW10[exponent + 400]
    return Numbers(batch.counts, coefficient, index, bad)
