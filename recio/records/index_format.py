"""The ``.idx`` text format, its one owner: one ``key<TAB>byte_offset<LF>`` line per record, in
write order, parsed and written here and nowhere else.

MXNet writes ``str(key)`` and the offset of the record's first part. Offsets are 64-bit: a
multi-GB ``.rec`` is fine, and the value 18446744073709551615 (MXNet once wrote ``tell() == -1``)
is reported as pointing outside the file.

An index of tens of millions of lines is parsed with NumPy in bounded chunks into arrays (the
usual keys ``0..n-1`` as just their first key), and written without a Python loop when its keys
and offsets are integer arrays; ``recio.records.index`` holds the parsed arrays as an ``Index``.
"""
from __future__ import annotations

import io
import os
from collections.abc import Sequence
from itertools import chain, islice
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from recio.errors import IndexFileError, RecordIOError
from recio.records.atomic import atomic_open
from recio.storage import RemoteFile, StorageOptions, is_url, open_regular

PathLike = Union[str, "os.PathLike[str]"]
KeyType = Optional[Callable[[str], Any]]
#: ``(offsets, base, keys)`` of a parse: int64 offsets; ``base`` when the keys run ``base,
#: base+1, ...`` (no key array), else ``keys``: an int64 array, a list, or None (not kept)
Parsed = Tuple[np.ndarray, Optional[int], Any]


#: the ``.idx`` is read in blocks of this size (memory stays bounded whatever its length)
_CHUNK_BYTES = 1 << 20
#: an offset must leave room for an 8-byte part header below this (the largest file size)
OFFSET_LIMIT = (1 << 63) - 8
#: digits the vectorised parser reads per number (10**18 - 1 still fits in an int64)
_MAX_DIGITS = 18
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def sibling_index_path(rec_path: PathLike) -> str:
    """``data/train.rec`` -> ``data/train.idx`` (the name MXNet tools use)."""
    return os.path.splitext(os.fspath(rec_path))[0] + ".idx"


def sibling_record_path(path: PathLike) -> str:
    """``data/train.idx`` (or another sidecar, ``train.len``) -> ``data/train.rec``: the
    ``.rec`` a message tells the user to check."""
    return os.path.splitext(os.fspath(path))[0] + ".rec"


def key_text(key: Any) -> str:
    """A key as messages spell it: as it stands in the ``.idx`` (``99``, never ``'99'``),
    quoted only when it is empty or holds blanks or control characters."""
    text = str(key.item() if isinstance(key, np.generic) else key)
    if text and text.isprintable() and not any(c.isspace() for c in text):
        return text
    return repr(text)


# -- one line: the rule ------------------------------------------------------------------------
def _parse_line(raw: bytes, number: int, key_type: Callable[[str], Any],
                rec_size: Optional[int], path: str) -> Optional[Tuple[Any, int]]:
    """``(key, offset)`` of one raw ``.idx`` line (``None`` for a blank one), or
    ``IndexFileError`` naming the line.

    The one rule for a line: surrounding whitespace is ignored, exactly two tab-separated
    fields, the key is ``key_type`` of the stripped UTF-8 first field, the offset an integer
    that is 4-aligned, below 2**63 and (with ``rec_size``) leaves room for a record header in
    the ``.rec``. The vectorised parser accepts only a subset of lines whose result it knows
    to be the same, and hands every other line here.
    """
    line = raw.strip()
    if not line:
        return None
    fields = line.split(b"\t")
    if len(fields) != 2:
        raise IndexFileError(f"expected 'key<TAB>offset', got {raw[:80]!r}", path, line=number)
    try:
        key = key_type(fields[0].strip().decode())
        offset = int(fields[1])
    except (ValueError, UnicodeDecodeError) as exc:
        raise IndexFileError(f"cannot parse {raw[:80]!r}: {exc}", path, line=number) from None
    if offset < 0 or offset & 3 or offset > OFFSET_LIMIT or \
            (rec_size is not None and offset + 8 > rec_size):
        size = "" if rec_size is None else f" of the {rec_size}-byte .rec"
        rec = sibling_record_path(path)
        raise IndexFileError(
            f"offset {offset} for key {key_text(key)} is not a record head{size} (offsets are "
            f"4-aligned and inside the file); `recio verify {rec}` checks the .rec, "
            f"`recio index {rec} --force` rebuilds the index", path, line=number)
    return key, offset


def _raw_lines(data: bytes, final: bool) -> List[bytes]:
    """The raw lines of a block (each with its ``\\n``; the file's last may lack it)."""
    pieces = data.split(b"\n")
    last = pieces.pop()
    lines = [piece + b"\n" for piece in pieces]
    if last:
        assert final, "a block handed to the parser ends with a newline"
        lines.append(last)
    return lines


# -- many lines: NumPy -------------------------------------------------------------------------
def _digit_fields(a: np.ndarray, ends: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Values of the all-digit fields ``a[end - width:end]`` (widths 1.._MAX_DIGITS), by Horner's
    rule one column at a time (temporaries stay one int64 per line). Columns left of a
    shorter field read as ``'0'``; the ``'0'`` (48) of every column is taken off at the end."""
    longest, shortest = int(widths.max()), int(widths.min())
    count = len(ends)
    value = np.zeros(count, np.int64)
    position = np.empty(count, np.int64)
    column = np.empty(count, np.uint8)
    for j in range(longest, 0, -1):
        np.subtract(ends, j, out=position)
        np.take(a, position, out=column)
        if j > shortest:
            column[widths < j] = 48
        value *= 10
        value += column
    value -= 48 * ((10 ** longest - 1) // 9)
    return value


def _fast_block(a: np.ndarray,
                rec_size: Optional[int]) -> Optional[Tuple[np.ndarray, np.ndarray, int]]:
    """``(keys, offsets, number of lines)`` of a block of whole lines (ending with ``\\n``)
    when every line is ``-?DIGITS<TAB>DIGITS\\r?`` or blank, with at most 18 digits per number,
    and every offset passes ``_parse_line``'s checks; ``None`` otherwise (the caller then parses
    line by line, which finds the exact error or the unusual-but-valid lines). On the lines it
    accepts the result equals ``_parse_line``'s with ``key_type=int``."""
    nondigit = np.flatnonzero((a - np.uint8(48)) > 9)
    chars = a[nondigit]
    is_newline = chars == 10
    is_tab = chars == 9
    newlines = nondigit[is_newline]
    tabs = nondigit[is_tab]
    starts = np.empty_like(newlines)
    starts[0] = 0
    starts[1:] = newlines[:-1] + 1
    ends = newlines
    minus = None
    if len(tabs) + len(newlines) != len(nondigit):  # a '-' or '\r', else not for this parser
        other = nondigit[~(is_newline | is_tab)]
        other_chars = a[other]
        minus = other[other_chars == 45]
        returns = other[other_chars == 13]
        if len(minus) + len(returns) != len(other):
            return None
        if len(returns):
            if not (a[returns + 1] == 10).all():  # '\r' only right before '\n'
                return None
            ends = newlines.copy()
            ends[np.searchsorted(newlines, returns)] -= 1
        if len(minus) and not (a[minus - 1] == 10).all():  # '-' only first (a[-1] is '\n')
            return None
    filled = ends > starts
    if not filled.all():
        starts, ends = starts[filled], ends[filled]
    # as many tabs as non-blank lines, each strictly inside its own line: one tab per line
    if len(tabs) != len(starts) or not ((tabs > starts) & (tabs < ends)).all():
        return None
    if minus is not None and len(minus):
        negative = a[starts] == 45
        key_starts = starts + negative
    else:
        negative = None
        key_starts = starts
    key_widths = tabs - key_starts
    offset_widths = ends - tabs - 1
    if not len(tabs):
        return np.empty(0, np.int64), np.empty(0, np.int64), len(newlines)
    if key_widths.min() < 1 or offset_widths.min() < 1 or \
            key_widths.max() > _MAX_DIGITS or offset_widths.max() > _MAX_DIGITS:
        return None
    offsets = _digit_fields(a, ends, offset_widths)
    if (offsets & 3).any() or (rec_size is not None and int(offsets.max()) + 8 > rec_size):
        return None
    keys = _digit_fields(a, tabs, key_widths)
    if negative is not None:
        np.negative(keys, out=keys, where=negative)
    return keys, offsets, len(newlines)


def _grown(array: np.ndarray, used: int, cap: int) -> np.ndarray:
    """A new uninitialised int64 array of ``cap`` items starting with ``array[:used]``."""
    grown = np.empty(cap, np.int64)
    grown[:used] = array[:used]
    return grown


class _Collector:
    """Appends parsed blocks into growing arrays (no list of Python ints for the whole file).

    ``mode``: ``"int"`` (int64 keys, or just a base while they run ``base, base+1, ...``),
    ``"list"`` (keys of any type in a list) or ``"none"`` (keys not kept).
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.n = 0
        self.offsets = np.empty(0, np.int64)
        self.base: Optional[int] = None  # int mode while keys are base, base+1, ...
        self.keys: Any = None  # int64 array (int mode, not a range) or list (list mode)
        self.ranged = mode == "int"

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more lines, growing by at least half (amortised). New room is
        ``np.empty``: pages not yet written are not resident (``ndarray.resize`` would
        zero-fill them)."""
        need = self.n + extra
        if need <= len(self.offsets):
            return
        cap = max(need, len(self.offsets) * 3 // 2, 1024)
        self.offsets = _grown(self.offsets, self.n, cap)
        if isinstance(self.keys, np.ndarray):
            self.keys = _grown(self.keys, self.n, cap)

    def add(self, keys: Any, offsets: np.ndarray) -> None:
        """Append a block: ``keys`` an int64 array (int mode), a list, or None (none mode)."""
        count = len(offsets)
        if not count:
            return
        self.reserve(count)
        start = self.n
        self.offsets[start:start + count] = offsets
        if self.mode == "int":
            if self.ranged:
                if self.base is None:
                    self.base = int(keys[0])
                first = self.base + start
                if int(keys[0]) == first and (count == 1 or (
                        int(keys[-1]) == first + count - 1 and (np.diff(keys) == 1).all())):
                    self.n += count
                    return
                self.ranged = False
                self.keys = np.empty(len(self.offsets), np.int64)
                if self.base is not None:
                    self.keys[:start] = np.arange(self.base, self.base + start, dtype=np.int64)
                self.base = None
            self.keys[start:start + count] = keys
        elif self.mode == "list":
            self.keys.extend(keys)
        self.n += count

    def to_list_mode(self) -> None:
        """Keys that are not all int64 (huge integers): keep them in a list from now on."""
        if self.ranged:
            base = 0 if self.base is None else self.base
            self.keys = list(range(base, base + self.n))
        else:
            self.keys = [] if self.keys is None else self.keys[:self.n].tolist()
        self.mode, self.ranged, self.base = "list", False, None

    def to_none_mode(self) -> None:
        """Keys that are not integers (a ``key_type=None`` parse): stop keeping them."""
        self.mode, self.ranged, self.base, self.keys = "none", False, None, None

    def finish(self) -> Tuple[np.ndarray, Optional[int], Any]:
        """``(offsets, base, keys)`` trimmed to the lines read (shrinking in place)."""
        self.offsets.resize(self.n, refcheck=False)
        keys = self.keys
        if isinstance(keys, np.ndarray):
            keys.resize(self.n, refcheck=False)
        base = self.base
        if self.mode == "int" and self.ranged and base is None:
            base = 0  # an empty index: keys 0..-1
        if self.mode == "list" and keys is None:
            keys = []
        return self.offsets, base, keys


def _slow_block(data: bytes, first_line: int, final: bool, key_type: KeyType,
                rec_size: Optional[int], path: str, out: _Collector) -> None:
    """Parse a block line by line with ``_parse_line`` (unusual lines, or errors to report)."""
    keys: List[Any] = []
    offsets: List[int] = []
    parse_key = str if key_type is None else key_type
    for number, raw in enumerate(_raw_lines(data, final), first_line):
        parsed = _parse_line(raw, number, parse_key, rec_size, path)
        if parsed is not None:
            keys.append(parsed[0])
            offsets.append(parsed[1])
    if out.mode == "none":
        out.add(None, np.array(offsets, np.int64))
        return
    if key_type is None:  # keys are not asked for: keep them only while they are integers
        try:
            keys = [int(k) for k in keys]
        except ValueError:
            out.to_none_mode()
            out.add(None, np.array(offsets, np.int64))
            return
    if out.mode == "int":
        if all(_INT64_MIN <= k <= _INT64_MAX for k in keys):
            out.add(np.array(keys, np.int64), np.array(offsets, np.int64))
            return
        if key_type is None:
            out.to_none_mode()
            out.add(None, np.array(offsets, np.int64))
            return
        out.to_list_mode()
    out.add(keys, np.array(offsets, np.int64))


def parse_index_file(f: Any, path: str, key_type: KeyType, rec_size: Optional[int],
                     file_size: int) -> Parsed:
    """Parse the open ``.idx`` ``f`` (``file_size`` bytes, named ``path`` in errors) in blocks
    of ``_CHUNK_BYTES`` into ``(offsets, base, keys)``; a bad line raises ``IndexFileError``
    naming it. ``key_type`` as ``recio.records.index.open_index`` takes it."""
    out = _Collector("int" if key_type is int or key_type is None else "list")
    if out.mode == "list":
        out.keys = []
    line = 1  # number of the first line of the next block
    pending: List[bytes] = []  # a line longer than a block, so far
    estimated = False
    read_size = min(_CHUNK_BYTES, file_size + 1)  # a small file costs no 1 MiB buffer
    while True:
        block = f.read(read_size)
        final = not block
        if pending:
            if not final and block.find(b"\n") < 0:
                pending.append(block)
                continue
            pending.append(block)
            block = b"".join(pending)
            pending = []
        if final:
            if not block:
                break
            cut = len(block)
        else:
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                pending.append(block)
                continue
        parsed = None
        if out.mode != "list":
            a = np.frombuffer(block, np.uint8, count=cut)
            if a[-1] != 10:
                a = np.append(a, np.uint8(10))  # the last line, without its newline
            parsed = _fast_block(a, rec_size)
            if parsed is not None:
                if not estimated:  # size the output from the first block's lines per byte
                    out.reserve(int(len(parsed[1]) * (file_size / max(cut, 1)) * 1.02) + 16)
                    estimated = True
                out.add(parsed[0] if out.mode == "int" else None, parsed[1])
        if parsed is None:
            try:
                _slow_block(block[:cut], line, final, key_type, rec_size, path, out)
            except IndexFileError as exc:
                raise _cut_short(exc, block[:cut], line, final, path) from None
            line += block.count(b"\n", 0, cut)
        else:
            line += parsed[2]
        if final:
            break
        if cut < len(block):
            pending.append(block[cut:])
    return out.finish()


def _cut_short(exc: IndexFileError, block: bytes, first_line: int, final: bool,
               path: str) -> IndexFileError:
    """``exc``, or when it is about the file's last line and that line has no newline (the
    file ends in the middle of it), the error that says so: a copy or a write that stopped
    cut the index short, which no line of it can be blamed for."""
    if not final or not block or block.endswith(b"\n"):
        return exc
    last = first_line + block.count(b"\n")
    if exc.line != last:
        return exc
    rec = sibling_record_path(path)
    tail = block[block.rfind(b"\n") + 1:][:80]
    return IndexFileError(
        f"the index is cut short: it ends in the middle of its last line "
        f"({tail!r}, no newline), as a copy or a write that "
        f"stopped leaves it; `recio verify {rec}` checks the .rec and prints the command that "
        f"rebuilds the index", path, line=last)


# -- the first and last lines (what the sidecar cache checks itself against) -----------------
#: bytes read at each end of an ``.idx`` for its first and last lines
_EDGE_BYTES = 4096


def _edge_lines(path: str, size: int) -> Optional[Tuple[bytes, bytes]]:
    """Raw first and last non-blank lines of the ``.idx`` (from two small reads), or None."""
    with open_regular(path) as f:
        head = f.read(_EDGE_BYTES)
        f.seek(max(0, size - _EDGE_BYTES))
        tail = f.read(_EDGE_BYTES)
    pieces = head.split(b"\n")
    if size > _EDGE_BYTES:
        pieces = pieces[:-1]  # the last piece may be cut
    first = next((ln for ln in pieces if ln.strip()), None)
    lines = tail.split(b"\n")
    if size > _EDGE_BYTES:
        lines = lines[1:]  # the first piece may be cut
    last = next((ln for ln in reversed(lines) if ln.strip()), None)
    if first is None or last is None:
        return None
    return first, last


def edge_records(path: str, size: int,
                 key_type: Callable[[str], Any]) -> Optional[Tuple[Tuple[Any, int], ...]]:
    """``(key, offset)`` of the first and of the last record of the ``.idx`` at ``path``
    (``size`` bytes), from two small reads; None when it holds no record. A bad line raises
    ``IndexFileError``, an unreadable file ``OSError``."""
    edges = _edge_lines(path, size)
    if edges is None:
        return None
    first, last = (_parse_line(raw, 0, key_type, None, path) for raw in edges)
    if first is None or last is None:
        return None
    return first, last


# -- a byte range of lines (one reader's share of a parallel read) -----------------------------
#: bytes read past a byte range's end to finish its last line and see the next one
_RANGE_TAIL = 4096


def parse_index_range(idx_path: PathLike, start: int, end: int, rec_size: Optional[int] = None,
                      storage_options: StorageOptions = None) -> Tuple[Parsed, Optional[int]]:
    """The lines of an integer-keyed ``.idx`` that *start* in bytes ``[start, end)``, parsed,
    and the offset of the line after them (None at the end of the file): the rule of
    ``recio.records.index.read_index_range``, by which ranges cut anywhere cover every line
    exactly once."""
    path = os.fspath(idx_path)
    with (RemoteFile(path, storage_options) if is_url(path)
          else open_regular(path)) as f:
        first = max(start - 1, 0)
        f.seek(first)
        data = f.read(end - first + _RANGE_TAIL)
        while True:  # read on until the line after the range is complete (or the file ends)
            cut = data.find(b"\n", end - first - 1)
            after = data.find(b"\n", cut + 1) if cut >= 0 else -1
            more = f.read(_RANGE_TAIL) if after < 0 else b""
            if not more:
                break
            data += more
    head = 0 if start == 0 else data.find(b"\n") + 1  # the first line starting at >= start
    if start > 0 and head == 0:
        return (np.zeros(0, np.int64), None, np.zeros(0, np.int64)), None
    stop = end - first  # lines starting before ``stop`` (in ``data``) are ours
    mine_end = data.find(b"\n", stop - 1) + 1 if stop - 1 < len(data) else len(data)
    if mine_end == 0:
        mine_end = len(data)
    ours, rest = data[head:mine_end] if head < stop else b"", data[max(mine_end, head):]
    try:
        parsed = parse_index_file(io.BytesIO(ours), path, int, rec_size, len(ours))
        following = rest.split(b"\n", 1)[0].split(b"\t")
        next_offset = int(following[1]) if len(following) >= 2 and following[1].strip() \
            else None
    except (IndexFileError, ValueError) as exc:
        raise IndexFileError(f"in the lines starting at byte {start}: {exc}", path=path) from None
    return parsed, next_offset


# -- writing -----------------------------------------------------------------------------------
def check_key(key: Any, key_type: KeyType = None, idx_path: Optional[PathLike] = None) -> Any:
    """``key`` when its ``.idx`` line reads back as the same key, else ``RecordIOError``
    naming it (and ``idx_path``) before anything is written.

    The line is ``str(key)<TAB>offset``, and reading (``_parse_line``, and MXNet's reader)
    splits it at tabs and strips each end, so a key cannot hold a tab or a line break (``\n``,
    ``\r``), start or end with a blank, or be empty; it must be UTF-8 text; and ``key_type``
    (the writer's) of its text must give it back (``float('nan')`` does not). Integer keys
    always pass and are not looked at by the writers' hot paths."""
    text = "%s" % (key,)
    problem = None
    if not text:
        problem = "it is empty, and a line needs a key before its tab"
    elif "\t" in text:
        problem = "it holds a tab, which separates the key from the offset"
    elif "\n" in text or "\r" in text:
        problem = "it holds a line break, which would end the line"
    elif text[0].isspace() or text[-1].isspace():
        problem = "it starts or ends with a blank, which reading strips"
    else:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            problem = "it is not valid UTF-8 text"
    if problem is None and key_type is not None and key_type is not int:
        try:
            back = key_type(text)
            same = bool(back == key)
        except Exception as exc:  # any failure of the user's key_type
            back, same = f"an error ({type(exc).__name__}: {exc})", False
        if not same:
            problem = f"its text {text!r} reads back as {back!r}"
    if problem is not None:
        raise RecordIOError(f"key {key_text(key)} cannot be written to an .idx: {problem}; "
                            "nothing was written for it",
                            None if idx_path is None else os.fspath(idx_path))
    return key


def format_index(keys: Sequence[Any], offsets: Sequence[int]) -> bytes:
    """MXNet's ``.idx`` lines (``key<TAB>offset<LF>``, ``str(key)``) for a batch, formatted in
    one C-level pass: the one place the line format is written (writers and ``write_index``)."""
    return (("%s\t%d\n" * len(keys)) % tuple(chain.from_iterable(zip(keys, offsets)))).encode()


def write_index(idx_path: PathLike, keys: Iterable[Any], offsets: Iterable[int]) -> None:
    """Write an ``.idx`` atomically, byte-identical to MXNet's. Integer NumPy arrays (or a
    ``range`` of keys) are formatted without a Python loop."""
    with atomic_open(idx_path, "wb") as f:
        for block in iter_index_lines(keys, offsets):
            f.write(block)


def iter_index_lines(keys: Iterable[Any], offsets: Iterable[int]) -> Iterator[bytes]:
    """The ``.idx`` lines of ``keys`` and ``offsets`` in blocks of bytes, for writers that
    stream an index (``write_index``, the combined index of a shard set). Integer NumPy arrays
    (or a ``range`` of keys) are formatted without a Python loop."""
    if _formattable(keys) and _formattable(offsets):
        key_array, offset_array = _as_int64(keys), _as_int64(offsets)
        n = min(len(key_array), len(offset_array))
        key_array, offset_array = key_array[:n], offset_array[:n]
        if n == 0 or int(offset_array[:n].min()) >= 0:
            step = 1 << 20
            for start in range(0, n, step):
                yield _format_lines(key_array[start:start + step],
                                    offset_array[start:start + step])
            return
    pairs = zip(keys, offsets)
    while True:
        batch = list(islice(pairs, 8192))
        if not batch:
            break
        yield format_index([k if type(k) is int else check_key(k) for k, _ in batch],
                           [int(o) for _, o in batch])


def _formattable(values: Any) -> bool:
    """A ``range`` or an integer NumPy array (whose ``str`` of each item is plain digits)."""
    return isinstance(values, range) or (isinstance(values, np.ndarray) and values.ndim == 1
                                         and values.dtype.kind in "iu"
                                         and values.dtype.itemsize <= 8
                                         and not (values.dtype.kind == "u"
                                                  and values.dtype.itemsize == 8))


def _as_int64(values: Any) -> np.ndarray:
    if isinstance(values, range):
        return np.arange(values.start, values.stop, values.step, dtype=np.int64)
    return values.astype(np.int64, copy=False)


def _decimal_widths(values: np.ndarray) -> np.ndarray:
    """Number of characters of ``str(v)`` for each int64 ``v`` (with the sign)."""
    magnitude = np.abs(values)  # -2**63 stays negative: it has 19 digits, like 10**18
    widths = np.ones(len(values), np.int64)
    for exponent in range(1, 19):
        widths += magnitude >= 10 ** exponent
    widths[magnitude < 0] = 19
    return widths + (values < 0)


def _format_lines(keys: np.ndarray, offsets: np.ndarray) -> bytes:
    """``"".join(f"{k}\\t{o}\\n")`` of int64 keys and non-negative offsets, vectorised."""
    key_widths = _decimal_widths(keys)
    offset_widths = _decimal_widths(offsets)
    ends = np.cumsum(key_widths + offset_widths + 2)
    out = np.empty(int(ends[-1]), np.uint8)
    newline_at = ends - 1
    tab_at = newline_at - offset_widths - 1
    out[newline_at] = 10
    out[tab_at] = 9
    for values, widths, last in ((offsets, offset_widths, newline_at - 1),
                                 (keys, key_widths, tab_at - 1)):
        negative = values < 0
        rest = np.abs(values).astype(np.uint64)  # -2**63 too
        digits: np.ndarray = widths - negative
        for j in range(int(digits.max())):
            live = digits > j
            out[(last - j)[live]] = (rest[live] % 10).astype(np.uint8) + 48
            rest //= 10
        if negative.any():
            out[(last - digits)[negative]] = 45
    return out.tobytes()
