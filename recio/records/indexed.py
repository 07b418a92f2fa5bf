"""``IndexedRecordReader``: a read-only mapping ``key -> record`` over a ``.rec`` and ``.idx``."""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator, List, Optional, Union

from recio.records.index import Index, IndexOffsets, index_for
from recio.records.reader import RecordReader


class IndexedRecordReader(Mapping):
    """Read-only mapping ``key -> record`` over a ``.rec`` and its ``.idx`` (index order).

    Without ``idx_path`` the ``.idx`` beside the ``.rec`` is used when present; otherwise the index
    is built by scanning the file, with keys ``0..n-1`` as MXNet's ``rec2idx`` does. The index is
    held as arrays (``index``, see ``recio.records.index``), memory-mapped from its sidecar cache when
    there is one, so forked workers share it; ``cache`` is passed to ``recio.records.index.open_index``.
    """

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Optional[Union[str, "os.PathLike[str]"]] = None,
                 key_type: Callable[[str], Any] = int, cache: Optional[bool] = None) -> None:
        self.path = os.fspath(rec_path)
        self.reader = RecordReader(self.path)
        self.index: Index = index_for(self.path, idx_path, key_type, rec_size=self.reader.size,
                                      cache=cache)
        self.idx_path = self.index.path
        self.key_type = key_type
        self._bind()
        duplicates = self.index.duplicates
        if duplicates:
            warnings.warn(f"{self.idx_path}: {duplicates} duplicate keys; the last offset of "
                          f"each is used (as MXNet does)", stacklevel=2)

    def _bind(self) -> None:
        """Hot-path shortcuts: the reader's ``read_at`` and, for keys ``0..n-1``, the offsets
        as a memoryview indexed by key."""
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
        if dense is not None and type(key) is int and 0 <= key < len(dense):  # hot path
            return self._read_at(dense[key])
        return self._read_at(self._offset(key))

    def read_many(self, keys: Iterable[Any]) -> List[bytes]:
        """The records of ``keys`` as a list (a batch read: one call instead of many)."""
        return self.reader.read_many_at(self.index.offsets_of(keys))

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
        """Close the underlying reader."""
        self.reader.close()

    def __enter__(self) -> "IndexedRecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        """Pickle without the memoryview shortcuts; a cached index reopens its cache."""
        state = dict(self.__dict__)
        for name in ("_read_at", "_dense", "_offset"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind()


__all__ = ["IndexedRecordReader"]
