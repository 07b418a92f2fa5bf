"""``IndexedRecordReader``: a read-only mapping ``key -> record`` over a ``.rec`` and its ``.idx``."""
from __future__ import annotations

import operator
import os
import warnings
from array import array
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Union

from .index import load_index
from .reader import RecordReader


def _is_range(keys: List[Any]) -> bool:
    """True when ``keys`` are exactly the ints 0..n-1 in order (the usual MXNet index)."""
    return all(type(k) is int for k in keys[:1]) and keys == list(range(len(keys)))


class IndexedRecordReader(Mapping):
    """Read-only mapping ``key -> record`` over a ``.rec`` and its ``.idx`` (index order).

    Without ``idx_path`` the ``.idx`` beside the ``.rec`` is used when present; otherwise the index
    is built by scanning the file, with keys ``0..n-1`` as MXNet's ``rec2idx`` does.
    """

    def __init__(self, rec_path: Union[str, "os.PathLike[str]"],
                 idx_path: Optional[Union[str, "os.PathLike[str]"]] = None,
                 key_type: Callable[[str], Any] = int) -> None:
        self.path = os.fspath(rec_path)
        self.reader = RecordReader(self.path)
        self.idx_path, keys, offsets = load_index(self.path, idx_path, key_type,
                                                  rec_size=self.reader.size)
        self._read_at = self.reader.read_at
        self._dense: Optional[array] = None  # offsets by position when the keys are 0..n-1
        self._offsets: Optional[dict] = None
        if keys == range(len(keys)) or (isinstance(keys, list) and _is_range(keys)):
            self._dense = array("q", offsets)
            self._keys: Sequence[Any] = range(len(keys))
            return
        self._offsets = dict(zip(keys, offsets))
        if len(self._offsets) != len(keys):
            warnings.warn(f"{self.idx_path}: {len(keys) - len(self._offsets)} duplicate keys; "
                          f"the last offset of each is used (as MXNet does)", stacklevel=2)
            keys = list(self._offsets)
        self._keys = list(keys)

    @property
    def offsets(self) -> dict:
        """``{key: byte offset}`` (built on first use when the keys are simply 0..n-1)."""
        if self._offsets is None:
            self._offsets = dict(zip(self._keys, self._dense))
        return self._offsets

    def _offset(self, key: Any) -> int:
        """Byte offset of ``key``; ``KeyError`` if it is not in the index."""
        dense = self._dense
        if dense is not None:
            try:
                position = operator.index(key)
            except TypeError:
                raise KeyError(key) from None
            if 0 <= position < len(dense):
                return dense[position]
            raise KeyError(key)
        try:
            return self._offsets[key]
        except (KeyError, TypeError):
            raise KeyError(key) from None

    def __getitem__(self, key: Any) -> bytes:
        dense = self._dense
        if dense is not None and type(key) is int and 0 <= key < len(dense):  # hot path
            return self._read_at(dense[key])
        return self._read_at(self._offset(key))

    def read_many(self, keys: Iterable[Any]) -> List[bytes]:
        """The records of ``keys`` as a list (a batch read: one call instead of many)."""
        return self.reader.read_many_at(map(self._offset, keys))

    def __iter__(self) -> Iterator[Any]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: Any) -> bool:
        try:
            self._offset(key)
            return True
        except KeyError:
            return False

    def keys(self) -> List[Any]:  # type: ignore[override]
        """Keys in index order (a list, like MXNet's ``MXIndexedRecordIO.keys``)."""
        return list(self._keys)

    def close(self) -> None:
        """Close the underlying reader."""
        self.reader.close()

    def __enter__(self) -> "IndexedRecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["IndexedRecordReader"]
