"""The ``.idx`` index: one ``key<TAB>byte_offset<LF>`` line per record, in write order.

MXNet writes ``str(key)`` and the offset of the record's first part. Offsets are 64-bit: a
multi-GB ``.rec`` is fine, and the value 18446744073709551615 (MXNet once wrote ``tell() == -1``)
is reported as pointing outside the file.

An index of tens of millions of lines is parsed with NumPy in bounded chunks and held as arrays
(``Index``): the usual keys ``0..n-1`` need no key array at all, and forked DataLoader workers
share the arrays instead of copying Python objects page by page. Integer-keyed indexes also get
a binary sidecar cache, ``<name>.idx.recio-cache``, written atomically beside the ``.idx`` and
memory-mapped on later opens (and in every worker). It is trusted only while its header matches
the ``.idx``'s size and modification time, its own length, and the ``.idx``'s first and last
records; anything else (stale, corrupt, truncated, unreadable, read-only folder) silently falls
back to parsing. Turn it off with ``cache=False`` or the environment variable
``RECIO_INDEX_CACHE=0``; ``RECIO_INDEX_CACHE=1`` caches indexes of any size (by default only
``.idx`` files of at least ``CACHE_MIN_BYTES``, below which parsing is as quick as the cache).
"""
from __future__ import annotations

import io
import mmap
import operator
import os
import struct
import warnings
import zlib
from collections.abc import Mapping, Sequence
from itertools import chain, islice
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from recio import portable
from recio.errors import DuplicateKeyWarning, FileInUseError, IndexFileError
from recio.records.atomic import AtomicFile, atomic_open
from recio.storage import RemoteFile, StorageOptions, is_url, local_path

PathLike = Union[str, "os.PathLike[str]"]
KeyType = Optional[Callable[[str], Any]]

#: suffix of the sidecar cache: ``train.idx`` -> ``train.idx.recio-cache``
CACHE_SUFFIX = ".recio-cache"
#: environment variable: ``0``/``off`` disables the cache, ``1``/``on`` caches any size
CACHE_ENV = "RECIO_INDEX_CACHE"
#: by default only an ``.idx`` at least this large gets a cache (about 60,000 lines)
CACHE_MIN_BYTES = 1 << 20

#: the ``.idx`` is read in blocks of this size (memory stays bounded whatever its length)
_CHUNK_BYTES = 1 << 20
#: an offset must leave room for an 8-byte part header below this (the largest file size)
_OFFSET_LIMIT = (1 << 63) - 8
#: digits the vectorised parser reads per number (10**18 - 1 still fits in an int64)
_MAX_DIGITS = 18
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def sibling_index_path(rec_path: PathLike) -> str:
    """``data/train.rec`` -> ``data/train.idx`` (the name MXNet tools use)."""
    return os.path.splitext(os.fspath(rec_path))[0] + ".idx"


def index_cache_path(idx_path: PathLike) -> str:
    """``data/train.idx`` -> ``data/train.idx.recio-cache``, the sidecar cache of an index."""
    return os.fspath(idx_path) + CACHE_SUFFIX


#: what a reader by key does with a repeated key (``warn_repeated_keys``)
BY_KEY = "the last line of a key is used, as MXNet does"
#: what a reader of every line does with one
EVERY_LINE = "every line is read, so a repeated key names several records"


def warn_repeated_keys(index: "Index", effect: str = BY_KEY,
                       rec_path: Optional[PathLike] = None, stacklevel: int = 3) -> None:
    """A ``DuplicateKeyWarning`` when keys of ``index`` repeat: the first repeated key and how
    many lines hold it, how many keys repeat, what the reader does (``effect``) and the
    command that gives every record its own key. Nothing when every key is unique."""
    if not index.has_keys or not index.duplicates:
        return
    repeated = index.repeated_keys()
    key, count = repeated[0]
    shadowed = index.duplicates
    total = f" ({shadowed:,} line(s) repeat an earlier key in all)" if shadowed != count - 1 \
        else ""
    lost = f", so {shadowed:,} record(s) cannot be read by key" if effect == BY_KEY else ""
    rec = os.fspath(rec_path) if rec_path is not None else \
        os.path.splitext(index.path or "x.idx")[0] + ".rec"
    warnings.warn(DuplicateKeyWarning(
        f"{index.path}: key {key_text(key)} appears on {count} lines{total}: {effect}{lost}; "
        f"`recio index {rec} --force --key position` gives every record its own key"),
        stacklevel=stacklevel)


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
    if offset < 0 or offset & 3 or offset > _OFFSET_LIMIT or \
            (rec_size is not None and offset + 8 > rec_size):
        size = "" if rec_size is None else f" of the {rec_size}-byte .rec"
        rec = os.path.splitext(path)[0] + ".rec"
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


def _parse_file(f: Any, path: str, key_type: KeyType, rec_size: Optional[int],
                file_size: int) -> _Collector:
    """Parse an open ``.idx`` in blocks of ``_CHUNK_BYTES`` into a ``_Collector``."""
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
            _slow_block(block[:cut], line, final, key_type, rec_size, path, out)
            line += block.count(b"\n", 0, cut)
        else:
            line += parsed[2]
        if final:
            break
        if cut < len(block):
            pending.append(block[cut:])
    return out


# -- the sidecar cache -------------------------------------------------------------------------
_CACHE_MAGIC = b"RECIOIDX"
_CACHE_VERSION = 2
# magic, version, kind, flags, n, base, unique, idx size, idx mtime_ns, max offset; then the
# crc32 of these fields and the crc32 of the arrays that follow (a damaged cache must never
# give a wrong offset: checking the arrays costs one pass at memory speed on each open)
_CACHE_FIELDS = struct.Struct("<8sIIIxxxxqqqqqq")
_CACHE_CRCS = struct.Struct("<II")
_CACHE_HEADER_SIZE = _CACHE_FIELDS.size + _CACHE_CRCS.size  # arrays start 8-aligned
_KIND_RANGE, _KIND_INT, _KIND_NONE = 0, 1, 2
_FLAG_SORTED = 1  # sorted unique keys and their offsets follow the keys
_EDGE_BYTES = 4096


def _cache_enabled(cache: Optional[bool], idx_size: int) -> bool:
    """Whether to read and write the cache: the parameter, else the environment, else size."""
    if cache is not None:
        return bool(cache)
    setting = os.environ.get(CACHE_ENV, "").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return False
    if setting in ("1", "on", "true", "yes", "always"):
        return True
    return idx_size >= CACHE_MIN_BYTES


def _edge_lines(path: str, size: int) -> Optional[Tuple[bytes, bytes]]:
    """Raw first and last non-blank lines of the ``.idx`` (from two small reads), or None."""
    with open(path, "rb") as f:
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


def _edges_match(index: "Index", path: str, size: int) -> bool:
    """The cache's first and last records equal the ``.idx``'s (a same-size, same-mtime
    rewrite of the ``.idx`` is caught too)."""
    n = len(index)
    if n == 0:
        return True
    try:
        edges = _edge_lines(path, size)
        if edges is None:
            return False
        key_type = str if index._keys is None and index.base is None else int
        for raw, i in ((edges[0], 0), (edges[1], n - 1)):
            parsed = _parse_line(raw, 0, key_type, None, path)
            if parsed is None or parsed[1] != int(index.offsets[i]):
                return False
            if key_type is int and parsed[0] != index.key_at(i):
                return False
    except (OSError, IndexFileError):
        return False
    return True


def _load_cache(idx_path: str, stat: os.stat_result, key_type: KeyType,
                rec_size: Optional[int]) -> Optional["Index"]:
    """The ``Index`` held in the cache of ``idx_path`` if it is valid for this ``.idx`` (and
    ``rec_size``), else None; never raises."""
    cache_path = index_cache_path(idx_path)
    try:
        f = open(cache_path, "rb")
    except OSError:
        return None
    try:
        length = os.fstat(f.fileno()).st_size
        if length < _CACHE_HEADER_SIZE:
            return None
        head = f.read(_CACHE_HEADER_SIZE)
        fields = _CACHE_FIELDS.unpack_from(head)
        crc, data_crc = _CACHE_CRCS.unpack_from(head, _CACHE_FIELDS.size)
        if zlib.crc32(head[:_CACHE_FIELDS.size]) != crc:
            return None
        magic, version, kind, flags, n, base, unique, size, mtime_ns, max_offset = fields
        if magic != _CACHE_MAGIC or version != _CACHE_VERSION or size != stat.st_size or \
                mtime_ns != stat.st_mtime_ns or n < 0 or unique < 0 or kind > _KIND_NONE or \
                flags & ~_FLAG_SORTED or (flags and kind != _KIND_INT):
            return None
        if kind == _KIND_NONE and key_type is not None:
            return None  # keys are not all integers: the caller's parse will say where
        words = n + (n if kind == _KIND_INT else 0) + (2 * unique if flags & _FLAG_SORTED else 0)
        if length != _CACHE_HEADER_SIZE + 8 * words:
            return None
        if n and (max_offset < 0 or max_offset > _OFFSET_LIMIT or
                  (rec_size is not None and max_offset + 8 > rec_size)):
            return None
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with memoryview(buf) as view:
            intact = zlib.crc32(view[_CACHE_HEADER_SIZE:]) == data_crc
        if not intact:
            buf.close()
            return None
        # the check touched every page: let them go from this process (a read-only file map
        # loses nothing)
        portable.advise(buf, "DONTNEED")
        sections = []
        at = _CACHE_HEADER_SIZE
        for count in (n, n if kind == _KIND_INT else 0, unique if flags else 0,
                      unique if flags else 0):
            sections.append(np.frombuffer(buf, np.dtype("<i8"), count=count, offset=at))
            at += 8 * count
    except (OSError, ValueError, struct.error):
        return None
    finally:
        f.close()
    offsets, keys, sorted_keys, sorted_offsets = sections
    index = Index(offsets, keys=keys if kind == _KIND_INT else None,
                  base=base if kind == _KIND_RANGE else None,
                  path=idx_path, key_type=key_type, cache_path=cache_path)
    if flags & _FLAG_SORTED:
        index._sorted_keys, index._sorted_offsets = sorted_keys, sorted_offsets
    elif kind == _KIND_INT:
        index._sorted_keys, index._sorted_offsets = keys, offsets
    if not _edges_match(index, idx_path, stat.st_size):
        return None
    return index


def _write_cache(index: "Index", stat: os.stat_result) -> bool:
    """Write ``index`` as the cache of its ``.idx`` (atomically); False when it cannot be (a
    read-only folder, a full disk, ...) or the ``.idx`` changed while it was read."""
    path = index.path
    assert path is not None
    try:
        now = os.stat(path)
        if (now.st_size, now.st_mtime_ns) != (stat.st_size, stat.st_mtime_ns):
            return False
        n = len(index)
        if index.base is not None:
            kind, arrays, flags, unique = _KIND_RANGE, [index.offsets], 0, 0
        elif isinstance(index._keys, np.ndarray):
            kind, arrays = _KIND_INT, [index.offsets, index._keys]
            sorted_keys, sorted_offsets = index._lookup_arrays()
            flags, unique = 0, len(sorted_keys)
            if sorted_keys is not index._keys:
                flags = _FLAG_SORTED
                arrays += [sorted_keys, sorted_offsets]
        elif index._keys is None:
            kind, arrays, flags, unique = _KIND_NONE, [index.offsets], 0, 0
        else:
            return False
        max_offset = int(index.offsets.max()) if n else -1
        fields = _CACHE_FIELDS.pack(_CACHE_MAGIC, _CACHE_VERSION, kind, flags, n,
                                    index.base or 0, unique, stat.st_size, stat.st_mtime_ns,
                                    max_offset)
        blocks = [memoryview(np.ascontiguousarray(array, np.dtype("<i8"))) for array in arrays]
        data_crc = 0
        for block in blocks:
            data_crc = zlib.crc32(block, data_crc)
        header = fields + _CACHE_CRCS.pack(zlib.crc32(fields), data_crc)
        target = AtomicFile(index_cache_path(path))
        try:
            target.file.write(header)
            for block in blocks:
                target.file.write(block)
            target.commit()
        except BaseException:
            target.discard()
            raise
    except (OSError, FileInUseError):  # FileInUseError: another reader maps the old cache
        return False
    return True


# -- the Index ---------------------------------------------------------------------------------
class Index:
    """A parsed ``.idx`` as arrays: ``offsets`` (int64, one per line, in file order) and keys.

    Keys take the least room they allow: keys ``base, base+1, ...`` in order (the usual
    ``0..n-1``) are just ``base``; other integer keys an int64 array; keys of another
    ``key_type`` a list; with ``key_type=None`` (offsets only) keys that are not integers are
    not kept. Lookups by key follow the dict MXNet builds: with duplicate keys the last line
    wins. Get one from ``open_index`` or ``index_for``.
    """

    def __init__(self, offsets: np.ndarray, *, keys: Any = None, base: Optional[int] = None,
                 path: Optional[str] = None, key_type: KeyType = int,
                 cache_path: Optional[str] = None, rec_size: Optional[int] = None) -> None:
        self.offsets = offsets
        self.base = base
        self._keys = keys
        self.path = path
        self.key_type = key_type
        self.cache_path = cache_path  # set when the arrays are mapped from the cache
        self.rec_size = rec_size
        self._sorted_keys: Optional[np.ndarray] = None
        self._sorted_offsets: Optional[np.ndarray] = None
        self._dict: Optional[dict] = None
        self._first_order: Optional[np.ndarray] = None
        self._views: Optional[Tuple[memoryview, Optional[memoryview]]] = None
        self._bounds: Optional[np.ndarray] = None

    # -- shape ---------------------------------------------------------------------------------
    def record_end(self, offset: int) -> Optional[int]:
        """Where the bytes of the record at ``offset`` end at the latest: the next record's
        offset in the file, else the end of the ``.rec`` (None when ``rec_size`` is unknown).
        A reader of a remote object fetches ``[offset, record_end)`` in one GET."""
        if getattr(self, "_bounds", None) is None:
            ends = self.offsets if self.rec_size is None else np.append(self.offsets,
                                                                          self.rec_size)
            self._bounds = np.unique(ends)
        i = int(np.searchsorted(self._bounds, offset, side="right"))
        return int(self._bounds[i]) if i < len(self._bounds) else self.rec_size

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def has_keys(self) -> bool:
        """False for a ``key_type=None`` index whose keys were not integers (not kept)."""
        return self.base is not None or self._keys is not None

    @property
    def is_range(self) -> bool:
        """True when the keys are ``base, base+1, ...`` in order (the usual ``0..n-1``)."""
        return self.base is not None

    def memoryviews(self) -> Tuple[memoryview, Optional[memoryview]]:
        """``(offsets, int keys or None)`` as memoryviews: indexing one gives a Python int, the
        cheapest lookup there is (hot loops use it)."""
        if self._views is None:
            keys = self._keys if isinstance(self._keys, np.ndarray) else None
            self._views = (_int_view(self.offsets), None if keys is None else _int_view(keys))
        return self._views

    def _require_keys(self) -> None:
        if not self.has_keys:
            raise ValueError(f"{self.path}: keys were not kept (key_type=None and keys that "
                             f"are not integers); open the index with a key_type")

    def key_at(self, i: int) -> Any:
        """Key of line ``i`` (a Python object: an ``int`` for integer keys)."""
        self._require_keys()
        if self.base is not None:
            return range(self.base, self.base + len(self))[i]
        if isinstance(self._keys, np.ndarray):
            return self.memoryviews()[1][i]
        return self._keys[i]

    def key_array(self) -> np.ndarray:
        """Keys of every line as a new NumPy array (int64 for integer keys)."""
        self._require_keys()
        if self.base is not None:
            return np.arange(self.base, self.base + len(self), dtype=np.int64)
        return np.array(self._keys)

    def key_list(self) -> List[Any]:
        """Keys of every line as a list (what ``read_index`` returns)."""
        self._require_keys()
        if self.base is not None:
            return list(range(self.base, self.base + len(self)))
        if isinstance(self._keys, np.ndarray):
            return self._keys.tolist()
        return list(self._keys)

    # -- lookups -------------------------------------------------------------------------------
    def _lookup_arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """Integer keys: ``(sorted unique keys, offset of each)``, the last line winning."""
        if self._sorted_keys is None:
            keys = self._keys
            if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()):
                self._sorted_keys, self._sorted_offsets = keys, self.offsets
            else:
                order = np.argsort(keys, kind="stable")
                ordered = keys[order]
                last = np.empty(len(keys), bool)
                last[-1] = True
                np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
                self._sorted_keys = ordered[last]
                self._sorted_offsets = self.offsets[order[last]]
        return self._sorted_keys, self._sorted_offsets

    def _mapping(self) -> dict:
        """Keys of another type: ``{key: offset}`` as MXNet builds it (last line wins)."""
        if self._dict is None:
            self._dict = dict(zip(self._keys, self.offsets.tolist()))
        return self._dict

    def offset_of(self, key: Any) -> int:
        """Byte offset of the record of ``key`` (NumPy integers work); ``KeyError`` if absent."""
        self._require_keys()
        if self.base is not None or isinstance(self._keys, np.ndarray):
            k = _as_int_key(key)
            if self.base is not None:
                i = k - self.base
                if 0 <= i < len(self.offsets):
                    return self.memoryviews()[0][i]
                raise KeyError(key)
            sorted_keys, sorted_offsets = self._lookup_arrays()
            if not _INT64_MIN <= k <= _INT64_MAX:
                raise KeyError(key)
            j = int(np.searchsorted(sorted_keys, k))
            if j < len(sorted_keys) and sorted_keys[j] == k:
                return int(sorted_offsets[j])
            raise KeyError(key)
        try:
            return self._mapping()[key]
        except TypeError:  # unhashable: not a key
            raise KeyError(key) from None

    def offsets_of(self, keys: Iterable[Any]) -> List[int]:
        """Byte offsets of many keys at once (``KeyError`` for the first one absent); an
        integer NumPy array of keys is looked up without a Python loop."""
        if isinstance(keys, np.ndarray) and keys.ndim == 1 and keys.dtype.kind in "iu" and \
                (keys.dtype.kind == "i" or not len(keys) or int(keys.max()) <= _INT64_MAX):
            wanted = keys.astype(np.int64)
            if self.base is not None:
                positions = wanted - self.base
                missing = (positions < 0) | (positions >= len(self))
                if not missing.any():
                    return self.offsets[positions].tolist()
                raise KeyError(keys[np.argmax(missing)].item())
            if isinstance(self._keys, np.ndarray):
                sorted_keys, sorted_offsets = self._lookup_arrays()
                at = np.searchsorted(sorted_keys, wanted)
                at[at == len(sorted_keys)] = 0
                missing = sorted_keys[at] != wanted if len(sorted_keys) else \
                    np.ones(len(wanted), bool)
                if not missing.any():
                    return sorted_offsets[at].tolist()
                raise KeyError(keys[np.argmax(missing)].item())
        offset_of = self.offset_of
        return [offset_of(k) for k in keys]

    def __contains__(self, key: Any) -> bool:
        try:
            self.offset_of(key)
            return True
        except KeyError:
            return False

    @property
    def duplicates(self) -> int:
        """Lines whose key appears again later (their offsets are shadowed)."""
        if self.base is not None or not self.has_keys:
            return 0
        if isinstance(self._keys, np.ndarray):
            return len(self) - len(self._lookup_arrays()[0])
        return len(self) - len(self._mapping())

    def repeated_keys(self, limit: int = 3) -> List[Tuple[Any, int]]:
        """``(key, lines holding it)`` of the first ``limit`` keys that appear on several lines,
        in the order they first appear (empty when every key is unique)."""
        if not self.duplicates:
            return []
        if isinstance(self._keys, np.ndarray):
            values, first, counts = np.unique(self._keys, return_index=True, return_counts=True)
            many = np.flatnonzero(counts > 1)
            many = many[np.argsort(first[many], kind="stable")][:limit]
            return [(values[i].item(), int(counts[i])) for i in many]
        counts: Dict[Any, int] = {}
        for key in self._keys:
            counts[key] = counts.get(key, 0) + 1
        return [(key, n) for key, n in counts.items() if n > 1][:limit]

    def unique_count(self) -> int:
        """Number of distinct keys (``len`` of the dict MXNet builds)."""
        return len(self) - self.duplicates

    def unique_keys(self) -> Iterable[Any]:
        """Distinct keys in order of first appearance (the dict's order): a ``range`` for range
        keys, else a list."""
        self._require_keys()
        if self.base is not None:
            return range(self.base, self.base + len(self))
        if not self.duplicates:
            return self.key_list()
        if isinstance(self._keys, np.ndarray):
            if self._first_order is None:
                _, first = np.unique(self._keys, return_index=True)
                first.sort()
                self._first_order = first
            return self._keys[self._first_order].tolist()
        return list(self._mapping())

    def keys_view(self) -> "IndexKeys":
        """A read-only list of every line's key, built on demand (``MXIndexedRecordIO.keys``)."""
        return IndexKeys(self)

    def offsets_view(self) -> "IndexOffsets":
        """A read-only ``{key: offset}`` dict, built on demand (``MXIndexedRecordIO.idx``)."""
        return IndexOffsets(self)

    # -- pickling: a cached index reopens its cache on the other side ---------------------------
    def __reduce__(self) -> Any:
        if self.cache_path is not None and self.path is not None:
            return (_reopen, (self.path, self.key_type, self.rec_size))
        state = dict(self.__dict__)
        state["_views"] = None
        return (_restore, (state,))

    def __repr__(self) -> str:
        keys = ("keys %d.." % self.base if self.base is not None else
                "int64 keys" if isinstance(self._keys, np.ndarray) else
                "list keys" if self._keys is not None else "no keys")
        return f"<Index {self.path!r}: {len(self)} lines, {keys}>"


def _restore(state: dict) -> Index:
    index = Index.__new__(Index)
    index.__dict__.update(state)
    return index


def _reopen(path: str, key_type: KeyType, rec_size: Optional[int]) -> Index:
    return open_index(path, key_type, rec_size=rec_size)


def _int_view(array: np.ndarray) -> memoryview:
    """A memoryview of an int64 array whose items index as Python ints."""
    return memoryview(np.ascontiguousarray(array, np.int64))


def _as_int_key(key: Any) -> int:
    """``key`` as an int the way a dict of int keys sees it (NumPy ints, 3.0), else KeyError."""
    if type(key) is int:
        return key
    if isinstance(key, (float, np.floating)):
        if float(key).is_integer():
            return int(key)
        raise KeyError(key)
    try:
        return operator.index(key)
    except TypeError:
        raise KeyError(key) from None


class IndexKeys(Sequence):
    """Every line's key as a read-only list, computed on demand from an ``Index``.

    What old code does with ``MXIndexedRecordIO.keys`` works: ``len``, indexing (Python ints
    come out), slicing (a list), iteration, ``in``, ``list(...)``, ``np.array(...)`` (without a
    Python loop), ``== [...]``.
    """

    __slots__ = ("_index", "_get")

    def __init__(self, index: Index) -> None:
        index._require_keys()
        self._index = index
        if index.base is not None:
            self._get = range(index.base, index.base + len(index)).__getitem__
        elif isinstance(index._keys, np.ndarray):
            self._get = index.memoryviews()[1].__getitem__
        else:
            self._get = index._keys.__getitem__

    def __len__(self) -> int:
        return len(self._index)

    def __reduce__(self) -> Any:
        return (IndexKeys, (self._index,))

    def __getitem__(self, i: Any) -> Any:
        if type(i) is slice:
            got = self._get(i)
            if isinstance(got, range):
                return list(got)
            return got.tolist() if isinstance(got, memoryview) else got
        return self._get(i)

    def __iter__(self) -> Iterator[Any]:
        index = self._index
        if index.base is not None:
            return iter(range(index.base, index.base + len(index)))
        if isinstance(index._keys, np.ndarray):
            return iter(index.memoryviews()[1])
        return iter(index._keys)

    def __contains__(self, key: Any) -> bool:
        return key in self._index

    def index(self, key: Any, start: int = 0, stop: Optional[int] = None) -> int:
        """Position of the first line with ``key`` (``ValueError`` if none), as ``list.index``."""
        index = self._index
        if index.base is None:
            return super().index(key, start, len(self) if stop is None else stop)
        try:
            position = _as_int_key(key) - index.base
        except KeyError:
            raise ValueError(f"{key!r} is not in list") from None
        start, stop, _ = slice(start, stop).indices(len(self))
        if not start <= position < stop:
            raise ValueError(f"{key!r} is not in list")
        return position

    def count(self, key: Any) -> int:
        """Number of lines with ``key``."""
        if self._index.base is not None:
            return int(key in self._index)
        return super().count(key)

    def tolist(self) -> List[Any]:
        """The keys as a real list."""
        return self._index.key_list()

    copy = tolist

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self._index.key_array()
        return array if dtype is None else array.astype(dtype)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, IndexKeys):
            other = other.tolist()
        if not isinstance(other, list):
            return NotImplemented
        return len(other) == len(self) and self.tolist() == other

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Any) -> List[Any]:
        return self.tolist() + list(other)

    def __radd__(self, other: Any) -> List[Any]:
        return list(other) + self.tolist()

    def __repr__(self) -> str:
        if len(self) <= 1000:
            return repr(self.tolist())
        return f"<{len(self)} keys: {self[0]!r}, {self[1]!r}, ..., {self[-1]!r}>"


class IndexOffsets(Mapping):
    """``{key: byte offset}`` as a read-only dict computed on demand from an ``Index``: the
    dict MXNet builds (``MXIndexedRecordIO.idx``), in its order, the last duplicate winning."""

    __slots__ = ("_index",)

    def __init__(self, index: Index) -> None:
        index._require_keys()
        self._index = index

    def __getitem__(self, key: Any) -> int:
        return self._index.offset_of(key)

    def __reduce__(self) -> Any:
        return (IndexOffsets, (self._index,))

    def __contains__(self, key: Any) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return self._index.unique_count()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._index.unique_keys())

    def copy(self) -> dict:
        """The mapping as a real dict."""
        return dict(zip(self._index.key_list(), self._index.offsets.tolist()))

    def __repr__(self) -> str:
        if len(self) <= 1000:
            return repr(self.copy())
        return f"<{len(self)} keys -> offsets>"


# -- opening -----------------------------------------------------------------------------------
def open_index(idx_path: PathLike, key_type: KeyType = int, rec_size: Optional[int] = None,
               cache: Optional[bool] = None, storage_options: StorageOptions = None, *,
               shard_cache: Any = None) -> Index:
    """Parse an ``.idx`` (or map its valid cache) into an ``Index``; bad lines raise
    ``IndexFileError`` naming the file and line.

    ``key_type``: ``int`` (fast, cached), any other callable applied to each key string (slower,
    never cached), or ``None`` when only offsets are needed (any UTF-8 key is accepted; integer
    keys are kept and cached). With ``rec_size`` every offset must leave room for a record
    header in the ``.rec`` (``recio.records.diagnose.open_checked_index`` says instead whether
    the ``.rec`` was cut short or the index belongs to another file). ``cache``: ``None``
    follows ``RECIO_INDEX_CACHE`` and the size threshold, ``True``/``False`` force it on/off. A
    URL is read through fsspec (``storage_options``), or from ``shard_cache``'s local copy (a
    ``recio.records.cache.ShardCache``), and has no sidecar cache.
    """
    path = os.fspath(idx_path)
    cacheable = key_type is int or key_type is None
    if is_url(path):  # read once, streamed; a remote index has no sidecar cache
        with (RemoteFile(path, storage_options) if shard_cache is None
              else shard_cache.open(path)) as f:
            size = os.fstat(f.fileno()).st_size if shard_cache is not None else f.size
            collected = _parse_file(f, path, key_type, rec_size, size)
        offsets, base, keys = collected.finish()
        return Index(offsets, keys=keys, base=base, path=path, key_type=key_type,
                     rec_size=rec_size)
    with open(local_path(path), "rb") as f:
        stat = os.fstat(f.fileno())
        use_cache = cacheable and _cache_enabled(cache, stat.st_size)
        if use_cache:
            index = _load_cache(path, stat, key_type, rec_size)
            if index is not None:
                index.rec_size = rec_size
                return index
        collected = _parse_file(f, path, key_type, rec_size, stat.st_size)
    offsets, base, keys = collected.finish()
    del collected
    index = Index(offsets, keys=keys, base=base, path=path, key_type=key_type,
                  rec_size=rec_size)
    if use_cache and (index.has_keys or key_type is None) and _write_cache(index, stat):
        mapped = _load_cache(path, stat, key_type, rec_size)
        if mapped is not None:  # serve from the map: shared with every process, not private
            mapped.rec_size = rec_size
            return mapped
    return index


#: bytes read past a byte range's end to finish its last line and see the next one
_RANGE_TAIL = 4096


def read_index_range(idx_path: PathLike, start: int, end: int, *, rec_size: Optional[int] = None,
                     storage_options: StorageOptions = None) -> Tuple[Index, Optional[int]]:
    """The lines of an integer-keyed ``.idx`` that *start* in bytes ``[start, end)`` as an
    ``Index``, and the offset of the line after them (None at the end of the file): one
    reader's share when an index is read in parallel by byte ranges, so that ranges cut
    anywhere cover every line exactly once. Reads the range and a little past it (one ranged
    GET for a URL). A bad line raises ``IndexFileError`` naming the file and the byte offset
    where its range starts."""
    path = os.fspath(idx_path)
    with (RemoteFile(path, storage_options) if is_url(path)
          else open(local_path(path), "rb")) as f:
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
        return Index(np.zeros(0, np.int64), keys=np.zeros(0, np.int64), path=path,
                     rec_size=rec_size), None
    stop = end - first  # lines starting before ``stop`` (in ``data``) are ours
    mine_end = data.find(b"\n", stop - 1) + 1 if stop - 1 < len(data) else len(data)
    if mine_end == 0:
        mine_end = len(data)
    ours, rest = data[head:mine_end] if head < stop else b"", data[max(mine_end, head):]
    try:
        collected = _parse_file(io.BytesIO(ours), path, int, rec_size, len(ours))
        offsets, base, keys = collected.finish()
        following = rest.split(b"\n", 1)[0].split(b"\t")
        next_offset = int(following[1]) if len(following) >= 2 and following[1].strip() \
            else None
    except (IndexFileError, ValueError) as exc:
        raise IndexFileError(f"in the lines starting at byte {start}: {exc}", path=path) from None
    return Index(offsets, keys=keys, base=base, path=path, rec_size=rec_size), next_offset


# -- the list API ------------------------------------------------------------------------------
def read_index(idx_path: PathLike, key_type: Callable[[str], Any] = int,
               rec_size: Optional[int] = None) -> Tuple[List[Any], List[int]]:
    """Parse an ``.idx`` into ``(keys, offsets)`` lists; bad lines raise ``IndexFileError``
    with the line. (``open_index`` gives the same as arrays, without the lists' memory.)

    With ``rec_size`` every offset is checked to leave room for a record header in the ``.rec``.
    """
    index = open_index(idx_path, key_type, rec_size=rec_size)
    return index.key_list(), index.offsets.tolist()


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
        yield format_index([k for k, _ in batch], [int(o) for _, o in batch])


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
        digits = widths - negative
        for j in range(int(digits.max())):
            live = digits > j
            out[(last - j)[live]] = (rest[live] % 10).astype(np.uint8) + 48
            rest //= 10
        if negative.any():
            out[(last - digits)[negative]] = 45
    return out.tobytes()


__all__ = ["key_text", "warn_repeated_keys", "BY_KEY", "EVERY_LINE", "read_index",
           "read_index_range", "write_index", "format_index", "iter_index_lines",
           "sibling_index_path", "open_index", "index_cache_path", "Index", "IndexKeys",
           "IndexOffsets", "CACHE_SUFFIX", "CACHE_ENV", "CACHE_MIN_BYTES"]
