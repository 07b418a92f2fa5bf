"""The ``.idx`` index: one ``key<TAB>byte_offset<LF>`` line per record, in write order.

MXNet writes ``str(key)`` and the offset of the record's first part. Offsets are 64-bit: a
multi-GB ``.rec`` is fine, and the value 18446744073709551615 (MXNet once wrote ``tell() == -1``)
is reported as pointing outside the file.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

from .atomic import atomic_open
from .errors import IndexFileError

PathLike = Union[str, "os.PathLike[str]"]


def sibling_index_path(rec_path: PathLike) -> str:
    """``data/train.rec`` -> ``data/train.idx`` (the name MXNet tools use)."""
    return os.path.splitext(os.fspath(rec_path))[0] + ".idx"


def read_index(idx_path: PathLike, key_type: Callable[[str], Any] = int,
               rec_size: Optional[int] = None) -> Tuple[List[Any], List[int]]:
    """Parse an ``.idx`` into ``(keys, offsets)``; bad lines raise ``IndexFileError`` with the line.

    With ``rec_size`` every offset is checked to leave room for a record header in the ``.rec``.
    """
    path = os.fspath(idx_path)
    keys: List[Any] = []
    offsets: List[int] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            fields = line.split(b"\t")
            if len(fields) != 2:
                raise IndexFileError(f"expected 'key<TAB>offset', got {raw[:80]!r}", path,
                                     line=number)
            try:
                key = key_type(fields[0].strip().decode())
                offset = int(fields[1])
            except (ValueError, UnicodeDecodeError) as exc:
                raise IndexFileError(f"cannot parse {raw[:80]!r}: {exc}", path, line=number) \
                    from None
            if offset < 0 or offset & 3 or (rec_size is not None and offset + 8 > rec_size):
                size = "" if rec_size is None else f" of the {rec_size}-byte .rec"
                raise IndexFileError(
                    f"offset {offset} for key {key!r} is not a record head{size} (offsets are "
                    f"4-aligned and inside the file); rebuild the index with `recio index`",
                    path, line=number)
            keys.append(key)
            offsets.append(offset)
    return keys, offsets


def write_index(idx_path: PathLike, keys: Iterable[Any], offsets: Iterable[int]) -> None:
    """Write an ``.idx`` atomically, byte-identical to MXNet's."""
    with atomic_open(idx_path, "wb") as f:
        batch: List[str] = []
        for key, offset in zip(keys, offsets):
            batch.append(f"{key}\t{int(offset)}\n")
            if len(batch) >= 8192:
                f.write("".join(batch).encode())
                batch.clear()
        f.write("".join(batch).encode())


def load_index(rec_path: PathLike, idx_path: Optional[PathLike] = None,
               key_type: Callable[[str], Any] = int,
               rec_size: Optional[int] = None) -> Tuple[Optional[str], List[Any], List[int]]:
    """``(idx path used, keys, offsets)`` for a ``.rec``: from ``idx_path``, else from the ``.idx``
    beside it when there is one, else by scanning the file (keys ``0..n-1``, like ``rec2idx``)."""
    if idx_path is None:
        candidate = sibling_index_path(rec_path)
        idx_path = candidate if os.path.exists(candidate) else None
    if idx_path is None:
        offsets = build_index(rec_path)
        return None, list(range(len(offsets))), offsets
    if rec_size is None:
        rec_size = os.path.getsize(rec_path)
    keys, offsets = read_index(idx_path, key_type, rec_size=rec_size)
    return os.fspath(idx_path), keys, offsets


def build_index(rec_path: PathLike) -> List[int]:
    """Offsets of every record in a ``.rec`` by scanning its headers (MXNet's ``rec2idx``)."""
    from .reader import RecordReader

    with RecordReader(rec_path) as reader:
        return list(reader.iter_offsets())


__all__ = ["read_index", "write_index", "build_index", "load_index", "sibling_index_path"]
