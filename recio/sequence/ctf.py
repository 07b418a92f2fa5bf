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
  silently; ``|#`` starts a comment that ends at the next ``|`` or the end of the line; tabs, ``\\r``,
  other control bytes and bytes >= 0x80 separate samples.
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
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import CTFError
from recio.sequence.records import Sparse

PathLike = Union[str, "os.PathLike[str]"]
SequenceDict = Dict[str, Any]

#: CNTK's default chunk size for text input (``chunkSizeInBytes``)
DEFAULT_CHUNK_SIZE = 32 << 20

_BOM = b"\xef\xbb\xbf"
_UTF16_BOM = b"\xff\xfe"            # 0xFEFF read as a little-endian uint16, as CNTK checks it
_SPACE = b" \t\n\v\f\r"              # C isspace(): what CNTK skips before the first line
_DIGITS = b"0123456789"
_MASK64 = (1 << 64) - 1
_DIGIT_RUN = re.compile(rb"[0-9]+")
_BLOCK = 8 << 20                     # bytes read at a time by the index pass
_BATCH = 4 << 20                     # bytes of sample text the number kernel takes at a time
_INT32_MAX = 2**31 - 1


def _is_terminator(byte: int) -> bool:
    """What ends a stream name for CNTK: a space, a tab, ``|``, a control byte or a byte >= 0x80
    (``char`` is signed on x86, so those count as "non-printable")."""
    return byte <= 0x20 or byte == 0x7C or byte >= 0x80


#: terminator table for NumPy lookups
_TERMINATOR = np.array([_is_terminator(b) for b in range(256)])
#: bytes CNTK's parser treats as plain text, plus tab, newline and carriage return: a chunk made
#: only of these (and whose every ``\r`` precedes a ``\n``) can take the fast path
_PLAIN = bytes([9, 10, 13, *range(0x20, 0x80)])
_CR_TO_SPACE = bytes.maketrans(b"\r", b" ")


# --------------------------------------------------------------------------- stream definitions

@dataclass(frozen=True)
class CTFStream:
    """One stream of a CTF file.

    ``name``: what the reader returns the stream as (CNTK's ``StreamDefs`` key, the first column
    of ctf2bin's header). ``alias``: the text after ``|`` in the file (``StreamDef(field=...)``).
    ``dim``: values per dense sample, or the bound of sparse indices. ``defines_mb_size``: this
    stream's line count is the sequence size (at most one stream may set it).
    """

    name: str
    alias: str
    dim: int
    is_sparse: bool = False
    defines_mb_size: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"stream name {self.name!r} must be a non-empty string")
        alias = self.alias
        if not isinstance(alias, str) or not alias:
            raise ValueError(f"stream {self.name!r}: the alias (the text after '|' in the "
                             f"file) must be a non-empty string")
        raw = alias.encode("latin-1", "replace")
        if not alias.isascii() or any(_is_terminator(b) for b in raw) or alias.startswith("#"):
            raise ValueError(f"stream {self.name!r}: alias {alias!r} can never match in a CTF "
                             f"file: an alias is printable ASCII without spaces or '|' and does "
                             f"not start with '#' ('|#' starts a comment)")
        if isinstance(self.dim, bool) or not isinstance(self.dim, (int, np.integer)):
            raise ValueError(f"stream {self.name!r}: dim must be an integer, not {self.dim!r}")
        if not 1 <= int(self.dim) <= _INT32_MAX:
            raise ValueError(f"stream {self.name!r}: dim {self.dim} must be in [1, {_INT32_MAX}] "
                             f"(CNTK's limit)")
        object.__setattr__(self, "dim", int(self.dim))
        object.__setattr__(self, "is_sparse", bool(self.is_sparse))
        object.__setattr__(self, "defines_mb_size", bool(self.defines_mb_size))

    @property
    def storage(self) -> str:
        """``"sparse"`` or ``"dense"`` (CBF's and ctf2bin's word for it)."""
        return "sparse" if self.is_sparse else "dense"

    @classmethod
    def parse(cls, spec: str) -> "CTFStream":
        """A stream from ``NAME:ALIAS:dense|sparse:DIM`` (the CLI's ``--stream``); ValueError
        saying what is wrong otherwise."""
        parts = spec.split(":")
        if len(parts) != 4:
            raise ValueError(f"{spec!r}: write NAME:ALIAS:dense|sparse:DIM, e.g. "
                             f"features:F:dense:40")
        return _stream_from_fields(parts)


def _stream_from_fields(fields: Sequence[str]) -> CTFStream:
    """A stream from ``(name, alias, dense|sparse, dim)`` text fields (ValueError if bad)."""
    name, alias, storage, dim = fields
    kind = storage.lower()
    if kind not in ("dense", "sparse"):
        raise ValueError(f"storage {storage!r} must be 'dense' or 'sparse'")
    try:
        size = int(dim)
    except ValueError:
        raise ValueError(f"dim {dim!r} is not an integer") from None
    return CTFStream(name, alias, size, kind == "sparse")


def read_header(path: PathLike) -> List[CTFStream]:
    """The streams of a ctf2bin header file: one ``NAME ALIAS dense|sparse DIM`` per line,
    fields separated by any whitespace, in stream order. Blank lines and lines starting with
    ``#`` are ignored (ctf2bin itself crashes on a blank line). Raises CTFError naming the file
    and line for a malformed line or a name or alias given twice."""
    path = os.fspath(path)
    streams: List[CTFStream] = []
    seen: Dict[str, int] = {}
    offset = 0
    with open(path, "rb") as f:
        raw_lines = f.read().splitlines(keepends=True)
    for number, raw in enumerate(raw_lines, 1):
        at, offset = offset, offset + len(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CTFError("line is not UTF-8 text; a header line is NAME ALIAS dense|sparse "
                           "DIM", path=path, line=number, offset=at) from None
        fields = text.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise CTFError(f"expected 4 fields NAME ALIAS dense|sparse DIM, found {len(fields)} "
                           f"({text.strip()!r})", path=path, line=number, offset=at)
        try:
            stream = _stream_from_fields(fields)
        except ValueError as exc:
            raise CTFError(f"{exc} (line {text.strip()!r}; expected NAME ALIAS dense|sparse "
                           f"DIM)", path=path, line=number, offset=at) from None
        for key, what in ((f"name {stream.name}", "name"), (f"alias {stream.alias}", "alias")):
            if key in seen:
                raise CTFError(f"stream {what} {key.split(' ', 1)[1]!r} is already defined on "
                               f"line {seen[key]}; each stream needs its own {what}",
                               path=path, line=number, offset=at)
            seen[key] = number
        streams.append(stream)
    if not streams:
        raise CTFError("no stream definitions (one NAME ALIAS dense|sparse DIM per line)",
                       path=path, line=1, offset=0)
    return streams


def _check_streams(streams: Optional[Sequence[Any]], path: str) -> List[CTFStream]:
    """The stream list a reader of ``path`` is given: CTFStream objects (or ``(name, alias, dim,
    is_sparse[, defines_mb_size])`` tuples), at least one (a CTF file cannot say them), unique
    names and aliases, at most one ``defines_mb_size`` (CNTK's configuration errors, as
    ValueError)."""
    out = [s if isinstance(s, CTFStream) else CTFStream(*s) for s in streams or []]
    if not out:
        raise ValueError(f"{path}: a CTF file does not name its streams or their dimensions; "
                         f"give streams=[CTFStream(name, alias, dim, is_sparse), ...] or "
                         f"streams=recio.sequence.ctf.read_header(header_file)")
    for attr in ("name", "alias"):
        values = [getattr(s, attr) for s in out]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"stream {attr}(s) {twice} given twice; each stream needs its own "
                             f"{attr}")
    main = [s.name for s in out if s.defines_mb_size]
    if len(main) > 1:
        raise ValueError(f"only one stream may define the minibatch size, but {len(main)} do: "
                         f"{', '.join(main)}")
    return out


# --------------------------------------------------------------------------- numbers

def _pow10(exponent: float) -> float:
    """``pow(10.0, exponent)`` as C's libm gives it (overflow is infinity, not an exception)."""
    try:
        return math.pow(10.0, exponent)
    except OverflowError:
        return math.inf


#: pow(10, e) for e in [-400, 400] (beyond, the result is 0 or infinity either way)
_POW10 = np.array([_pow10(float(e)) for e in range(-400, 401)], dtype=np.float64)
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


class _Numbers:
    """What the number kernel found in a list of sample texts of one stream."""

    __slots__ = ("counts", "values", "indices", "bad")

    def __init__(self, counts: np.ndarray, values: np.ndarray, indices: Optional[np.ndarray],
                 bad: np.ndarray) -> None:
        self.counts = counts      # tokens of each sample (values, or index:value items)
        self.values = values      # float64, every token's value in order
        self.indices = indices    # int64 sparse indices (None for dense)
        self.bad = bad            # samples the kernel cannot vouch for (exact path decides)


def _parse_numbers(texts: List[bytes], sparse: bool, dim: int) -> _Numbers:
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
    return _Numbers(np.concatenate([p.counts for p in parts]),
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


def _parse_batch(texts: List[bytes], sparse: bool, dim: int) -> _Numbers:
    """The kernel on one batch: plain tokens are checked with byte-class tables and their digit
    runs turned into exact integers; samples holding anything else are marked bad and emptied
    (then the batch is joined again without them)."""
    batch = _Batch(texts)
    bad = batch.invalid(sparse)
    if bad.any():
        batch = _Batch([b"" if b else t for t, b in zip(texts, bad.tolist())])
        if batch.invalid(sparse).any():   # emptied samples cannot be invalid: stay exact
            return _Numbers(np.zeros(len(texts), np.int64), np.zeros(0),
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


def _words(buf: np.ndarray) -> np.ndarray:
    """The little-endian 8-byte word starting at each byte of ``buf`` (a view, no copy)."""
    return np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))


def _decimal(words: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The uint64 each run of ``length`` (1..19) ASCII digits at ``start`` spells: the first
    1..8 digits, then 8 at a time. ``words`` (see _words) must reach 8 bytes past each run."""
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
    return _decimal(_words(buf), start, np.minimum(length, 19))


def _convert(batch: _Batch, sparse: bool, dim: int, bad: np.ndarray) -> _Numbers:
    """Numbers of a batch of plain tokens, computed as CNTK computes them:
    ``±(int + frac / 10**len(frac)) * pow(10, exp)`` in double, every digit run an exact
    integer (longer runs and out-of-range indices mark their sample bad)."""
    buf, cls = batch.buf, batch.cls
    digit = cls == _DIG
    start = np.flatnonzero(digit[:-1] < digit[1:]) + 1
    length = np.flatnonzero(digit[:-1] > digit[1:]) + 1 - start
    ntokens = batch.starts.size
    if start.size == 0:
        return _Numbers(batch.counts, np.zeros(0), np.zeros(0, np.int64) if sparse else None,
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
        return _Numbers(batch.counts, np.zeros(ntokens), np.zeros(ntokens, np.int64)
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
    return _Numbers(batch.counts, coefficient, index, bad)


class _ExactParser:
    """A byte-by-byte emulation of CNTK 2.7's ``TextParser::LoadSequence`` (TryReadRow,
    TryReadSample, TryGetInputId, TryReadDenseSample, TryReadSparseSample, TryReadUint64,
    TryReadRealNumber), used for the sequences the fast path leaves to it. Raises CTFError
    where CNTK counts an error (its default allows none)."""

    def __init__(self, reader: "CTFReader") -> None:
        self.reader = reader
        self.streams = reader.streams
        self.alias = {s.alias.encode("ascii"): i for i, s in enumerate(self.streams)}
        self.max_alias = max(len(a) for a in self.alias)
        self.data = b""
        self.pos = self.end = 0
        self.base = self.line0 = 0

    # -- errors ---------------------------------------------------------------------------
    def fail(self, message: str, pos: Optional[int] = None) -> CTFError:
        pos = self.pos if pos is None else pos
        line = self.line0 + self.data.count(b"\n", 0, min(pos, self.end))
        return CTFError(message, path=self.reader.path, line=line, offset=self.base + pos)

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
        dtype = self.reader.dtype
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
            value = (value * 10 + c - 48) & _MASK64
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
                    return coefficient * _pow10(-number if negative else number)
            self.pos += 1
        # the sequence's bytes end inside the number (the file has no final newline)
        if state in (2, 3):
            return -number if negative else number
        if state == 4:
            coefficient += number / divider
            return -coefficient if negative else coefficient
        if state == 7:
            return coefficient * _pow10(-number if negative else number)
        raise self.fail("the file ends inside a number; end the file with a newline", start)


def _cast(values: List[float], dtype: np.dtype) -> np.ndarray:
    """Python doubles to ``dtype`` (C's double -> float rounding; overflow gives infinity)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(dtype)


# --------------------------------------------------------------------------- the index

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
        value = (value * 10 + c - 48) & _MASK64
        if old > value:
            raise CTFError(f"sequence id {digits[:40].decode()}... overflows a 64-bit unsigned "
                           f"integer; use shorter ids", path=path, line=line, offset=offset)
    return value


class _Scanner:
    """The index pass: one streamed read of the file, a block of whole lines at a time, that
    finds the sequences (CNTK's grouping), their sizes and each stream's samples per sequence
    (counting ``|alias`` occurrences; no number is parsed)."""

    def __init__(self, reader: "CTFReader") -> None:
        self.path = reader.path
        self.streams = reader.streams
        self.aliases = [np.frombuffer(s.alias.encode("ascii"), np.uint8) for s in self.streams]
        main = [i for i, s in enumerate(self.streams) if s.defines_mb_size]
        self.main: Optional[int] = main[0] if main else None
        self.index = _Index()
        self.skipped = 0
        # the open sequence: [offset, key, first line, samples, counts]
        self.open: Optional[list] = None
        self.key = 0

    def run(self) -> Tuple[_Index, int, int, bool, int]:
        with open(self.path, "rb") as f:
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
        values = _decimal(_words(buf), at, np.minimum(length, 19))
        for k in np.flatnonzero(length == 20).tolist():
            digits = _DIGIT_RUN.match(data, int(at[k])).group()
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


def _chunk_bounds(offsets: np.ndarray, sizes: np.ndarray, limit: int) -> np.ndarray:
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


# --------------------------------------------------------------------------- the reader

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
        self.streams: List[CTFStream] = _check_streams(streams, self.path)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be float32 or float64 (CNTK's element types), not "
                             f"{self.dtype}")
        chunk_size_bytes = int(chunk_size_bytes)
        if chunk_size_bytes < 1:
            raise ValueError(f"chunk_size_bytes must be >= 1, got {chunk_size_bytes}")
        self.chunk_size_bytes = chunk_size_bytes
        scanner = _Scanner(self)
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
        self._bounds = _chunk_bounds(self.offsets, self._sizes_bytes,
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
        start, stop = self.chunk_span(i)
        with open(self.path, "rb") as f:
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
        return self.num_sequences

    def close(self) -> None:
        """Nothing stays open between reads; kept for the corpus protocol."""

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
        self.exact: Optional[_ExactParser] = None

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
        marks = np.asarray(marks, dtype=np.int64).reshape(n + 1, width)
        slow = np.asarray(slow_list, dtype=bool)
        arrays = []
        for s, stream in enumerate(streams):
            numbers = _parse_numbers(texts[s], stream.is_sparse, stream.dim)
            bad = numbers.bad
            if not stream.is_sparse:
                bad = bad | (numbers.counts > stream.dim)
            if bad.any():
                owners = np.searchsorted(marks[:, s], np.flatnonzero(bad), side="right") - 1
                slow[owners] = True
            arrays.append(self._stream_arrays(stream, numbers, bad))
        return self._assemble(arrays, marks, slow)

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

    def _stream_arrays(self, stream: CTFStream, numbers: _Numbers, bad: np.ndarray):
        """The chunk's samples of one stream in ``dtype``: a ``(samples, dim)`` matrix for
        dense (short samples zero-padded), ``(indptr, indices, values)`` for sparse."""
        dtype = self.reader.dtype
        with np.errstate(over="ignore"):
            values = numbers.values.astype(dtype)
        counts = numbers.counts
        if stream.is_sparse:
            indptr = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
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
            self.exact = _ExactParser(reader)
        a = self.rel[j]
        k = self.first + j
        return self.exact.sequence(self.data[a:a + self.size[j]], self.start + a,
                                   int(reader.lines[k]), int(reader.sizes[k]))


__all__ = ["CTFReader", "CTFStream", "read_header", "DEFAULT_CHUNK_SIZE"]
