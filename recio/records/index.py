"""The index of a ``.rec``: the parsed ``.idx`` as arrays (``Index``), the lookups by key, the
list and dict views MXNet's ``MXIndexedRecordIO`` exposes, and ``open_index``.

An index of tens of millions of lines is held as arrays: the usual keys ``0..n-1`` need no key
array at all, and forked DataLoader workers share the arrays instead of copying Python objects
page by page. The text format is ``recio.records.index_format``'s; integer-keyed indexes are
memory-mapped from their sidecar cache, ``recio.records.index_cache``, when it is valid.
"""
from __future__ import annotations

import operator
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from recio.errors import DuplicateKeyWarning, MissingKeyError
from recio.records.index_cache import cache_enabled, load_cache, write_cache
from recio.records.index_format import (KeyType, PathLike, key_text, parse_index_file,
                                        parse_index_range, sibling_record_path)
from recio.storage import RemoteFile, StorageOptions, is_url, open_regular

#: keys that fit the int64 key arrays
_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


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
        sibling_record_path(index.path or "x.idx")
    warnings.warn(DuplicateKeyWarning(
        f"{index.path}: key {key_text(key)} appears on {count} lines{total}: {effect}{lost}; "
        f"`recio index {rec} --force --key position` gives every record its own key"),
        stacklevel=stacklevel)


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
        self._lookup: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self._dict: Optional[dict] = None
        self._first_order: Optional[np.ndarray] = None
        self._views: Optional[Tuple[memoryview, Optional[memoryview]]] = None
        self._bounds: Optional[np.ndarray] = None

    # -- shape ---------------------------------------------------------------------------------
    def record_end(self, offset: int) -> Optional[int]:
        """Where the bytes of the record at ``offset`` end at the latest: the next record's
        offset in the file, else the end of the ``.rec`` (None when ``rec_size`` is unknown).
        A reader of a remote object fetches ``[offset, record_end)`` in one GET."""
        bounds = getattr(self, "_bounds", None)
        if bounds is None:
            ends = self.offsets if self.rec_size is None else np.append(self.offsets,
                                                                          self.rec_size)
            self._bounds = bounds = np.unique(ends)
        i = int(np.searchsorted(bounds, offset, side="right"))
        return int(bounds[i]) if i < len(bounds) else self.rec_size

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

    def _key_view(self) -> memoryview:
        """The int64 key array as a memoryview (an index that has one)."""
        view = self.memoryviews()[1]
        assert view is not None, "keys that are not an int64 array have no view"
        return view

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
            # an int64 key array always has a key view, which mypy cannot see
            return self.memoryviews()[1][i]  # type: ignore[index]
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
        if self._lookup is None:
            keys = self._keys
            if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()):
                self._lookup = keys, self.offsets
            else:
                order = np.argsort(keys, kind="stable")
                ordered = keys[order]
                last = np.empty(len(keys), bool)
                last[-1] = True
                np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
                self._lookup = ordered[last], self.offsets[order[last]]
        return self._lookup

    def _mapping(self) -> dict:
        """Keys of another type: ``{key: offset}`` as MXNet builds it (last line wins)."""
        if self._dict is None:
            self._dict = dict(zip(self._keys, self.offsets.tolist()))
        return self._dict

    def offset_of(self, key: Any) -> int:
        """Byte offset of the record of ``key`` (NumPy integers work);
        :class:`~recio.errors.MissingKeyError` (a ``KeyError``) if absent."""
        self._require_keys()
        try:
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
            return self._mapping()[key]
        except (KeyError, TypeError):  # TypeError: unhashable, not a key
            raise self.missing_key(key) from None

    def missing_key(self, key: Any) -> MissingKeyError:
        """The error for ``key``, which this index does not hold: its message (made only when
        shown) says what keys the file has, with an example (``_describe_keys``)."""
        def message() -> str:
            int_keys = self.base is not None or isinstance(self._keys, np.ndarray)
            shown = repr(key) if isinstance(key, str) == int_keys else key_text(key)
            return f"no record with key {shown} in {self._file()}: {_describe_keys(self, key)}"
        return MissingKeyError(key, message, self.path)

    #: the ``.rec`` this index is of, when a reader says so (messages name it)
    rec_path: Optional[str] = None

    def _file(self) -> str:
        return self.rec_path or (sibling_record_path(self.path) if self.path else "the index")

    def offsets_of(self, keys: Iterable[Any]) -> List[int]:
        """Byte offsets of many keys at once (:class:`~recio.errors.MissingKeyError` for the
        first one absent); an integer NumPy array of keys is looked up without a Python loop."""
        if isinstance(keys, np.ndarray) and keys.ndim == 1 and keys.dtype.kind in "iu" and \
                (keys.dtype.kind == "i" or not len(keys) or int(keys.max()) <= _INT64_MAX):
            wanted = keys.astype(np.int64)
            if self.base is not None:
                positions = wanted - self.base
                missing = (positions < 0) | (positions >= len(self))
                if not missing.any():
                    return self.offsets[positions].tolist()
                raise self.missing_key(keys[np.argmax(missing)].item())
            if isinstance(self._keys, np.ndarray):
                sorted_keys, sorted_offsets = self._lookup_arrays()
                at = np.searchsorted(sorted_keys, wanted)
                at[at == len(sorted_keys)] = 0
                missing = sorted_keys[at] != wanted if len(sorted_keys) else \
                    np.ones(len(wanted), bool)
                if not missing.any():
                    return sorted_offsets[at].tolist()
                raise self.missing_key(keys[np.argmax(missing)].item())
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
        tally: Dict[Any, int] = {}
        for key in self._keys:
            tally[key] = tally.get(key, 0) + 1
        return [(key, n) for key, n in tally.items() if n > 1][:limit]

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


def _describe_keys(index: Index, wanted: Any = None) -> str:
    """What keys ``index`` holds, for the message of a key it lacks (``wanted``): record
    numbers ``0..n-1``, ids (im2rec's keys: the ``.lst``'s index column, in no file order),
    or text, with an example, and the lookup that was probably meant."""
    n = len(index)
    if n == 0:
        return "it holds no record"
    first = key_text(index.key_at(0))
    text_wanted = isinstance(wanted, str)
    if index.base is not None or isinstance(index._keys, np.ndarray):
        meant = ""
        if text_wanted and wanted.strip().lstrip("-").isdigit():
            meant = f"; its keys are integers: did you mean {int(wanted)}?"
        if index.base is not None:
            return (f"its {n:,} keys are the record numbers {index.base:,} to "
                    f"{index.base + n - 1:,}{meant}")
        keys = index._keys
        return (f"its {n:,} keys are ids from {int(keys.min()):,} to {int(keys.max()):,} (as "
                f"im2rec writes them: each image's index in its .lst), not record numbers; the "
                f"first record's is {first}, and .keys() lists them in file order{meant}")
    kind = type(index.key_at(0)).__name__
    meant = (f"; did you mean {key_text(wanted)!r}?" if not text_wanted and kind == "str"
             and wanted is not None else "")
    return f"its {n:,} keys are of type {kind} (key_type), e.g. {index.key_at(0)!r}{meant}"


def _restore(state: dict) -> Index:
    index = Index.__new__(Index)
    index.__dict__.update(state)
    return index


def _reopen(path: str, key_type: KeyType, rec_size: Optional[int]) -> Index:
    return open_index(path, key_type, rec_size=rec_size)


def _int_view(array: np.ndarray) -> memoryview:
    """A memoryview of an int64 array whose items index as Python ints."""
    return np.ascontiguousarray(array, np.int64).data


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
        self._get: Callable[[Any], Any]
        if index.base is not None:
            self._get = range(index.base, index.base + len(index)).__getitem__
        elif isinstance(index._keys, np.ndarray):
            self._get = index._key_view().__getitem__
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
            return iter(index._key_view())
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
    ``recio.records.cache.shard_cache.ShardCache``), and has no sidecar cache.
    """
    path = os.fspath(idx_path)
    cacheable = key_type is int or key_type is None
    if is_url(path):  # read once, streamed; a remote index has no sidecar cache
        with (RemoteFile(path, storage_options) if shard_cache is None
              else shard_cache.open(path)) as f:
            size = os.fstat(f.fileno()).st_size if shard_cache is not None else f.size
            offsets, base, keys = parse_index_file(f, path, key_type, rec_size, size)
        return Index(offsets, keys=keys, base=base, path=path, key_type=key_type,
                     rec_size=rec_size)
    with open_regular(path) as f:  # a FIFO or a device: refused, without blocking
        stat = os.fstat(f.fileno())
        use_cache = cacheable and cache_enabled(cache, stat.st_size)
        if use_cache:
            index = _mapped(path, stat, key_type, rec_size)
            if index is not None:
                return index
        offsets, base, keys = parse_index_file(f, path, key_type, rec_size, stat.st_size)
    index = Index(offsets, keys=keys, base=base, path=path, key_type=key_type,
                  rec_size=rec_size)
    if use_cache and (index.has_keys or key_type is None) and \
            write_cache(path, stat, index.offsets, index.base, index._keys, index._lookup_arrays):
        mapped = _mapped(path, stat, key_type, rec_size)
        if mapped is not None:  # serve from the map: shared with every process, not private
            return mapped
    return index


def _mapped(path: str, stat: os.stat_result, key_type: KeyType,
            rec_size: Optional[int]) -> Optional[Index]:
    """The ``Index`` mapped from the sidecar cache of the ``.idx`` at ``path`` when the cache is
    valid for it, else None."""
    cached = load_cache(path, stat, key_type, rec_size)
    if cached is None:
        return None
    index = Index(cached.offsets, keys=cached.keys, base=cached.base, path=path,
                  key_type=key_type, cache_path=cached.cache_path, rec_size=rec_size)
    index._lookup = cached.lookup
    return index


def read_index_range(idx_path: PathLike, start: int, end: int, *, rec_size: Optional[int] = None,
                     storage_options: StorageOptions = None) -> Tuple[Index, Optional[int]]:
    """The lines of an integer-keyed ``.idx`` that *start* in bytes ``[start, end)`` as an
    ``Index``, and the offset of the line after them (None at the end of the file): one
    reader's share when an index is read in parallel by byte ranges, so that ranges cut
    anywhere cover every line exactly once. Reads the range and a little past it (one ranged
    GET for a URL). A bad line raises ``IndexFileError`` naming the file and the byte offset
    where its range starts."""
    (offsets, base, keys), next_offset = parse_index_range(idx_path, start, end, rec_size,
                                                           storage_options)
    return Index(offsets, keys=keys, base=base, path=os.fspath(idx_path),
                 rec_size=rec_size), next_offset


# -- the list API ------------------------------------------------------------------------------
def read_index(idx_path: PathLike, key_type: Callable[[str], Any] = int,
               rec_size: Optional[int] = None) -> Tuple[List[Any], List[int]]:
    """Parse an ``.idx`` into ``(keys, offsets)`` lists; bad lines raise ``IndexFileError``
    with the line. (``open_index`` gives the same as arrays, without the lists' memory.)

    With ``rec_size`` every offset is checked to leave room for a record header in the ``.rec``.
    """
    index = open_index(idx_path, key_type, rec_size=rec_size)
    return index.key_list(), index.offsets.tolist()
