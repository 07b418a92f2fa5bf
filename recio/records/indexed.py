"""Records found by key: the one load-the-``.idx``-or-scan decision (``index_for``) and
``IndexedRecordReader``, a read-only mapping ``key -> record`` over a ``.rec`` and its ``.idx``."""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import IndexChangedError, RecordIOError
from recio.records.cache.shard_cache import ShardCache
from recio.records.closed import Closed, check_open, is_closed
from recio.records.diagnose import explain_indexed_read, open_checked_index
from recio.records.index import BY_KEY, Index, IndexOffsets, warn_repeated_keys
from recio.records.index_format import sibling_index_path
from recio.records.pair import missing_index_error, open_pair
from recio.records.reader import RecordReader
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]
KeyType = Optional[Callable[[str], Any]]


def build_index(rec_path: PathLike, storage_options: StorageOptions = None,
                shard_cache: Any = None) -> List[int]:
    """Offsets of every record in a ``.rec`` by scanning its headers (MXNet's ``rec2idx``)."""
    with RecordReader(rec_path, storage_options=storage_options,
                      shard_cache=shard_cache) as reader:
        return list(reader.iter_offsets())


def index_for(rec_path: PathLike, idx_path: Optional[PathLike] = None,
              key_type: KeyType = int, rec_size: Optional[int] = None,
              cache: Optional[bool] = None, warn_on_scan: bool = False,
              storage_options: StorageOptions = None, *, shard_cache: Any = None,
              scan: bool = True) -> Index:
    """The ``Index`` of a ``.rec``: from ``idx_path``, else the ``.idx`` beside it when there
    is one, else by scanning the file (keys ``0..n-1``, like ``rec2idx``; ``path`` is None).

    This is the one place that decides between loading an index and scanning for one; a
    reader by key passes ``scan=False``: a missing ``.idx`` then raises ``MissingIndexError``
    (``recio.records.pair``), since positions would answer another record for a key. With
    ``warn_on_scan`` a missing ``.idx`` is reported (a ``UserWarning`` saying how to write it)
    before the scan starts, for callers whose users expect an index to exist. URLs are read
    through ``shard_cache`` when one is given (``recio.records.cache.shard_cache.ShardCache``; an
    index a manifest names needs no lookup). An index whose offsets run past the end of the ``.rec``
    raises ``TruncatedFileError`` (the ``.rec`` was cut short) or ``IndexMismatchError`` (the index
    belongs to another file).
    """
    if idx_path is None:
        candidate = sibling_index_path(rec_path)
        if (shard_cache is not None and shard_cache.knows(candidate)) or \
                storage.exists(candidate, storage_options):
            idx_path = candidate
        else:
            if not scan:
                raise missing_index_error(os.fspath(rec_path), candidate)
            if warn_on_scan:
                warnings.warn(f"{candidate} not found: scanning {os.fspath(rec_path)} for its "
                              f"records (write it once with `recio index {os.fspath(rec_path)}`)",
                              stacklevel=3)
            # keys 0..n-1 whatever key_type says, as rec2idx writes them
            return Index(np.asarray(build_index(rec_path, storage_options, shard_cache),
                                    np.int64), base=0, key_type=key_type, rec_size=rec_size)
    if rec_size is None:
        rec_size = (shard_cache.size(os.fspath(rec_path))
                    if shard_cache is not None and storage.is_url(rec_path)
                    else storage.size(rec_path, storage_options))
    return open_checked_index(rec_path, idx_path, key_type, rec_size=rec_size, cache=cache,
                              storage_options=storage_options, shard_cache=shard_cache)


def load_index(rec_path: PathLike, idx_path: Optional[PathLike] = None,
               key_type: Callable[[str], Any] = int,
               rec_size: Optional[int] = None) -> Tuple[Optional[str], List[Any], List[int]]:
    """``(idx path used or None, keys, offsets)`` as lists: ``index_for`` for list users."""
    index = index_for(rec_path, idx_path, key_type, rec_size=rec_size)
    return index.path, index.key_list(), index.offsets.tolist()


class IndexedRecordReader(Mapping):
    """Read-only mapping ``key -> record`` over a ``.rec`` and its ``.idx`` (index order).

    Without ``idx_path`` the ``.idx`` beside the ``.rec`` is used. The two are opened as one
    consistent pair even while a writer replaces them (``recio.records.pair``: the reader
    retries, or raises ``IndexChangedError`` naming both files). A ``.rec`` without its
    ``.idx`` raises ``MissingIndexError`` saying what to do: it is never numbered by position
    silently, which for im2rec's files (keyed by image id) would answer another record for a
    key. ``scan=True`` asks for that numbering when there is no ``.idx``: the index is built
    by scanning the file, with keys ``0..n-1`` as MXNet's ``rec2idx`` does. The index is
    held as arrays (``index``, see ``recio.records.index``), memory-mapped from its sidecar cache when
    there is one, so forked workers share it; ``cache`` is passed to ``recio.records.index.open_index``.
    A URL is read by ranged GETs, or, with ``cache_dir`` (or ``RECIO_CACHE_DIR``), from a
    local copy of the whole ``.rec`` and ``.idx`` kept in that folder (at most
    ``cache_limit`` bytes; see ``recio.records.cache.shard_cache``).
    """

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Optional[Union[str, "os.PathLike[str]"]] = None,
                 key_type: Callable[[str], Any] = int, cache: Optional[bool] = None, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None, scan: bool = False) -> None:
        self.path = os.fspath(rec_path)
        shard_cache = (ShardCache.configured(cache_dir, cache_limit, storage_options)
                       if storage.is_url(self.path) else None)

        def open_both(idx: Optional[str]) -> Tuple[RecordReader, Index]:
            reader = RecordReader(self.path, storage_options=storage_options,
                                  shard_cache=shard_cache)
            try:
                return reader, index_for(self.path, idx, key_type, rec_size=reader.size,
                                         cache=cache, storage_options=storage_options,
                                         shard_cache=shard_cache)
            except BaseException:
                reader.close()
                raise

        given = None if idx_path is None else os.fspath(idx_path)
        if scan and given is None and not storage.exists(sibling_index_path(self.path),
                                                         storage_options):
            self.reader, self.index = open_both(None)  # keys 0..n-1, as asked
        else:
            self.reader, self.index = open_pair(
                self.path, given, open_both, lambda pair: pair[0].close(),
                positions="scan=True numbers them so", storage_options=storage_options,
                shard_cache=shard_cache)
        self.idx_path = self.index.path
        self._rec_stamp = _rec_stamp(self.reader)  # a copy in another process checks it
        self.index.rec_path = self.path  # what a missing key's message names
        self.key_type = key_type
        self._bind()
        warn_repeated_keys(self.index, BY_KEY, self.path)

    def _bind(self) -> None:
        """Hot-path shortcuts: the reader's ``read_at`` and, for keys ``0..n-1``, the offsets
        as a memoryview indexed by key. The reader gets the index, so a read of a remote
        object is one GET of the record's bytes."""
        self.reader.source.use_index(self.index)
        self._read_at = self.reader.read_at
        index = self.index
        self._dense = index.memoryviews()[0] if index.base == 0 else None
        self._offset = index.offset_of

    @property
    def offsets(self) -> IndexOffsets:
        """``{key: byte offset}``, a read-only dict view over the index arrays."""
        return self.index.offsets_view()

    def __getitem__(self, key: Any) -> bytes:
        dense = self._dense
        offset = dense[key] if dense is not None and type(key) is int and \
            0 <= key < len(dense) else self._offset(key)  # the hot path first
        try:
            return self._read_at(offset)
        except RecordIOError as exc:
            raise explain_indexed_read(self.reader, self.index, offset, exc) from None

    def read_at(self, offset: int) -> bytes:
        """The record at byte ``offset`` (one of the index's), a failure explained as
        ``__getitem__`` explains it."""
        try:
            return self._read_at(offset)
        except RecordIOError as exc:
            raise explain_indexed_read(self.reader, self.index, offset, exc) from None

    def peek_at(self, offset: int, n: int) -> bytes:
        """The first ``n`` bytes of the record at ``offset`` (``RecordReader.peek_at``), a
        failure explained as ``__getitem__`` explains it."""
        try:
            return self.reader.peek_at(offset, n)
        except RecordIOError as exc:
            raise explain_indexed_read(self.reader, self.index, offset, exc) from None

    def read_many(self, keys: Iterable[Any]) -> List[bytes]:
        """The records of ``keys`` as a list (a batch read: one call instead of many)."""
        offsets = self.index.offsets_of(keys)
        try:
            return self.reader.read_many_at(offsets)
        except RecordIOError as exc:
            offset = exc.offset if exc.offset in offsets else offsets[0]
            raise explain_indexed_read(self.reader, self.index, offset, exc) from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.index.unique_keys())

    def __len__(self) -> int:
        return self.index.unique_count()

    def __contains__(self, key: Any) -> bool:
        return key in self.index

    def keys(self) -> List[Any]:  # type: ignore[override]
        """Keys in index order (a list, like MXNet's ``MXIndexedRecordIO.keys``)."""
        return list(self.index.unique_keys())

    def close(self) -> None:
        """Close the underlying reader and let go of the index: a large index is a memory map
        of its sidecar cache, which Windows would not let anyone replace or delete while it is
        mapped. Every later use raises :class:`~recio.errors.ClosedError` (``I/O on a closed
        reader: PATH``); closing again does nothing."""
        self.reader.close()
        self._dense = None  # a view of the index's arrays
        # what every method reads through: each raises ClosedError, at no cost while open
        closed = Closed("reader", self.path)
        self._offset = self._read_at = closed  # type: ignore[assignment]
        self.index = closed  # type: ignore[assignment]

    def __enter__(self) -> "IndexedRecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        """Pickle without the memoryview shortcuts; a cached index reopens its cache."""
        check_open(is_closed(self.index), "reader", self.path)  # it would reopen elsewhere
        state = dict(self.__dict__)
        for name in ("_read_at", "_dense", "_offset"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)  # the .rec reopens by its path (RecordReader.__setstate__)
        if state.get("_rec_stamp") != _rec_stamp(self.reader):
            self.reader.close()  # another file now: the index read with the old one is not its
            raise IndexChangedError(
                f"{self.path} was replaced since this reader was opened (before it was pickled "
                f"into this process): the index it holds is the old file's; open a new "
                f"reader", path=self.idx_path or self.path)
        self._bind()


def _rec_stamp(reader: RecordReader) -> Optional[tuple]:
    """What tells the local ``.rec`` a reader has open from a file put at its path since (a
    replaced pair): its inode (a file renamed into place has another one, and the old one is
    not reused while this reader holds it) and size, which every host of a shared file system
    reports alike. None for a URL or a file object."""
    file = getattr(reader.source, "file", None)
    if storage.is_url(reader.path or "") or file is None or not hasattr(file, "fileno"):
        return None
    try:
        st = os.fstat(file.fileno())
    except (OSError, ValueError):
        return None
    return st.st_ino, st.st_size
