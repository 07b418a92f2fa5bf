"""The binary sidecar cache of an ``.idx``, its one owner: built, validated, mapped, discarded.

Integer-keyed indexes get a cache, ``<name>.idx.recio-cache``, written atomically beside the
``.idx`` and memory-mapped on later opens (and in every worker): forked DataLoader workers share
its pages instead of parsing or copying. It is trusted only while its header matches the
``.idx``'s size and modification time, its own length and checksums, and the ``.idx``'s first and
last records; anything else (stale, corrupt, truncated, unreadable, read-only folder) silently
falls back to parsing. Turn it off with ``cache=False`` or the environment variable
``RECIO_INDEX_CACHE=0``; ``RECIO_INDEX_CACHE=1`` caches indexes of any size (by default only
``.idx`` files of at least ``CACHE_MIN_BYTES``, below which parsing is as quick as the cache).
``recio.records.index.open_index`` decides when to use it.
"""
from __future__ import annotations

import mmap
import os
import struct
import zlib
from typing import Any, Callable, NamedTuple, Optional, Tuple

import numpy as np

from recio import portable
from recio.errors import FileInUseError, IndexFileError, NotRegularFileError
from recio.records.atomic import AtomicFile
from recio.records.index_format import OFFSET_LIMIT, KeyType, PathLike, edge_records
from recio.storage import open_regular

#: suffix of the sidecar cache: ``train.idx`` -> ``train.idx.recio-cache``
CACHE_SUFFIX = ".recio-cache"
#: environment variable: ``0``/``off`` disables the cache, ``1``/``on`` caches any size
_CACHE_ENV = "RECIO_INDEX_CACHE"
#: by default only an ``.idx`` at least this large gets a cache (about 60,000 lines)
CACHE_MIN_BYTES = 1 << 20

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


def index_cache_path(idx_path: PathLike) -> str:
    """``data/train.idx`` -> ``data/train.idx.recio-cache``, the sidecar cache of an index."""
    return os.fspath(idx_path) + CACHE_SUFFIX


def discard_cache(idx_path: PathLike) -> None:
    """Remove the cache of a local ``.idx`` that was just rewritten (it no longer applies; a
    later open would ignore it anyway); nothing when there is none or it cannot go."""
    try:
        os.remove(index_cache_path(idx_path))
    except OSError:
        pass


class CachedIndex(NamedTuple):
    """The arrays of an index as its cache holds them (read-only, mapped from the file)."""
    offsets: np.ndarray
    keys: Optional[np.ndarray]  # int64 keys; None for range keys or keys not kept
    base: Optional[int]  # keys ``base, base+1, ...``
    #: integer keys: ``(sorted unique keys, offset of each)``, the last line winning
    lookup: Optional[Tuple[np.ndarray, np.ndarray]]
    cache_path: str


def cache_enabled(cache: Optional[bool], idx_size: int) -> bool:
    """Whether to read and write the cache: the parameter, else the environment, else size."""
    if cache is not None:
        return bool(cache)
    setting = os.environ.get(_CACHE_ENV, "").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return False
    if setting in ("1", "on", "true", "yes", "always"):
        return True
    return idx_size >= CACHE_MIN_BYTES


def load_cache(idx_path: str, stat: os.stat_result, key_type: KeyType,
               rec_size: Optional[int]) -> Optional[CachedIndex]:
    """The arrays held in the cache of ``idx_path``, mapped, if it is valid for this ``.idx``
    (``stat``), ``key_type`` and ``rec_size``, else None; never raises."""
    cache_path = index_cache_path(idx_path)
    try:
        f = open_regular(cache_path)
    except (OSError, ValueError):  # missing, unreadable, or not a regular file
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
        if n and (max_offset < 0 or max_offset > OFFSET_LIMIT or
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
    lookup = None
    if flags & _FLAG_SORTED:
        lookup = sorted_keys, sorted_offsets
    elif kind == _KIND_INT:
        lookup = keys, offsets
    cached = CachedIndex(offsets, keys if kind == _KIND_INT else None,
                         base if kind == _KIND_RANGE else None, lookup, cache_path)
    if not _edges_match(cached, idx_path, stat.st_size):
        return None
    return cached


def _edges_match(cached: CachedIndex, path: str, size: int) -> bool:
    """The cache's first and last records equal the ``.idx``'s (a same-size, same-mtime
    rewrite of the ``.idx`` is caught too)."""
    n = len(cached.offsets)
    if n == 0:
        return True
    key_type = str if cached.keys is None and cached.base is None else int
    try:
        edges = edge_records(path, size, key_type)
    except (OSError, IndexFileError):
        return False
    if edges is None:
        return False
    for (key, offset), i in zip(edges, (0, n - 1)):
        if offset != int(cached.offsets[i]):
            return False
        if cached.base is not None:
            if key != cached.base + i:
                return False
        elif cached.keys is not None and key != int(cached.keys[i]):
            return False
    return True


def write_cache(path: str, stat: os.stat_result, offsets: np.ndarray, base: Optional[int],
                keys: Any, lookup: Callable[[], Tuple[np.ndarray, np.ndarray]]) -> bool:
    """Write the cache of the ``.idx`` at ``path`` (atomically), read when it had ``stat``:
    its ``offsets`` and keys (``base`` for keys ``base, base+1, ...``, else ``keys``: an int64
    array, or None when not kept; ``lookup()`` gives an array's sorted unique keys and their
    offsets). False when it cannot be (keys of another type, a read-only folder, a full disk,
    ...) or the ``.idx`` changed while it was read."""
    try:
        now = os.stat(path)
        if (now.st_size, now.st_mtime_ns) != (stat.st_size, stat.st_mtime_ns):
            return False
        n = len(offsets)
        if base is not None:
            kind, arrays, flags, unique = _KIND_RANGE, [offsets], 0, 0
        elif isinstance(keys, np.ndarray):
            kind, arrays = _KIND_INT, [offsets, keys]
            sorted_keys, sorted_offsets = lookup()
            flags, unique = 0, len(sorted_keys)
            if sorted_keys is not keys:
                flags = _FLAG_SORTED
                arrays += [sorted_keys, sorted_offsets]
        elif keys is None:
            kind, arrays, flags, unique = _KIND_NONE, [offsets], 0, 0
        else:
            return False
        max_offset = int(offsets.max()) if n else -1
        fields = _CACHE_FIELDS.pack(_CACHE_MAGIC, _CACHE_VERSION, kind, flags, n,
                                    base or 0, unique, stat.st_size, stat.st_mtime_ns,
                                    max_offset)
        blocks = [np.ascontiguousarray(array, np.dtype("<i8")).data for array in arrays]
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
    except (OSError, FileInUseError, NotRegularFileError):  # FileInUseError: another reader
        return False  # maps the old cache; NotRegularFileError: a folder or FIFO in the way
    return True
