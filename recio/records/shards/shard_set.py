"""Shard sets: a dataset in several ``.rec``/``.idx`` files, described by a manifest written last.

``ShardWriter("out/train", max_records=..., max_bytes=...)`` writes ``out/train-00000.rec`` and
``.idx``, ``out/train-00001.rec`` and ``.idx``, ... and, last, ``out/train.manifest.json``.
Every file is written under a temporary name; none is renamed into place before every shard is
complete, and the manifest is renamed last, so **a manifest means "finished"**: an error, an
``abort()``, Ctrl-C or a writer dropped unclosed leaves no shard and no manifest, and a process
killed while the files are being renamed leaves shards without a manifest (not finished).
``ShardReader`` reads a finished set by position or by key.

The manifest's format and the per-record checksum sidecars are ``recio.records.manifest``'s;
checking a set against its manifest is ``verify``'s; publishing shards written by
parallel tasks and the combined ``.idx`` for DALI are ``commit``'s.
Plain MXNet files without a manifest are unaffected by all of this.
"""
from __future__ import annotations

import array
import os
import zlib
from importlib import metadata
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import ChecksumError, ManifestError
from recio.records.atomic import AtomicFile, ManagedWriter, OutputSet, check_outputs
from recio.records.cache.shard_cache import READ_AHEAD, ShardCache
from recio.records.closed import check_open
from recio.records.diagnose import open_checked_index
from recio.records.framing import HEADER_SIZE
from recio.records.manifest import (
    CHECKSUM,
    LE_U32,
    RECORD_CHECKSUM_SUFFIX,
    Manifest,
    Shard,
    checksum_mismatch,
    existing_shard_files,
    file_crc32,
    load_manifest,
    manifest_path,
    record_checksums,
    shard_stem,
)
from recio.records.reader import RecordReader
from recio.records.writer import IndexedRecordWriter
from recio.storage import PathLike, StorageOptions

#: per-record checksums are written to the sidecar in batches of this many
_CRC_BATCH = 8192


def _padded(n: int) -> int:
    return HEADER_SIZE + ((n + 3) & ~3)


# -- writing -------------------------------------------------------------------------------------
class ShardWriter(ManagedWriter):
    """Write records into shards of at most ``max_records`` records and ``max_bytes`` bytes of
    ``.rec`` each (either limit may be None; a record larger than ``max_bytes`` gets a shard of
    its own), then the manifest. ``write(key, data)`` returns ``(shard number, offset)``.

    ``checksums=True`` also writes each shard's per-record CRC-32 sidecar. Existing outputs
    (the manifest and any file named like a shard of ``prefix``, ``PREFIX-NNNNN.rec``/``.idx``/
    ``.crc32``) are refused unless ``force=True``: :class:`~recio.errors.OutputExistsError`
    before anything is written. With ``force`` the shards of an earlier set that this one does
    not replace are deleted when it is committed (not before).
    ``made_by`` is stored in the manifest (how the set was made). ``with`` closes on success
    and aborts on an exception; see the module docstring for what appears when.
    """

    def __init__(self, prefix: PathLike, max_records: Optional[int] = None,
                 max_bytes: Optional[int] = None, *, checksums: bool = False,
                 key_type: Callable[[Any], Any] = int, force: bool = False, fsync: bool = False,
                 made_by: Optional[Dict[str, Any]] = None,
                 storage_options: StorageOptions = None) -> None:
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be at least 1, got {max_records}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.prefix = storage.absolute(prefix)
        self.storage_options = storage_options
        self.max_records, self.max_bytes = max_records, max_bytes
        self.checksums, self.key_type, self.force, self.fsync = checksums, key_type, force, fsync
        self.made_by = dict(made_by or {})
        self.made_by.setdefault("tool", f"recio {_version()}")
        self.manifest_path = manifest_path(self.prefix)
        self.path = self.manifest_path  # what a closed writer's errors name
        folder = storage.dirname(self.prefix)
        if not storage.is_url(folder) and not os.path.isdir(folder):
            raise FileNotFoundError(2, "No such folder for the shards", folder)
        # every shard of an earlier set, not only the ones this set will write: with force the
        # rest are deleted when this set is committed, so no stale shard stays beside it
        stale = existing_shard_files(self.prefix, storage_options)
        check_outputs([self.manifest_path, *stale], force=force, storage_options=storage_options)
        self.shards: List[Shard] = []
        self._current: Any = None
        self._crc_file: Optional[AtomicFile] = None
        self._crcs: "array.array[int]" = array.array("I")
        self._count = 0
        self._min_key: Any = None
        self._max_key: Any = None
        outputs = OutputSet()
        outputs.obsolete = stale
        self._begin(outputs, f"ShardWriter({self.prefix!r})")

    # -- shards
    def _open_shard(self) -> None:
        stem = shard_stem(self.prefix, len(self.shards))
        if not self.force:
            check_outputs([stem + ".rec", stem + ".idx", stem + RECORD_CHECKSUM_SUFFIX],
                          storage_options=self.storage_options)
        self._current = IndexedRecordWriter(stem + ".rec", stem + ".idx", self.key_type,
                                           fsync=self.fsync, storage_options=self.storage_options)
        if self.checksums:
            self._crc_file = AtomicFile(stem + RECORD_CHECKSUM_SUFFIX, "wb", fsync=self.fsync,
                                        storage_options=self.storage_options)
        self._count, self._min_key, self._max_key = 0, None, None

    def _close_shard(self) -> None:
        writer, self._current = self._current, None
        outputs = writer.hand_over()
        for f in outputs.files:
            self._outputs.add(f)
        rec_file, idx_file = outputs.files[0], outputs.files[1]
        rec_bytes, rec_crc = file_crc32(rec_file.temp_path)
        idx_bytes, idx_crc = file_crc32(idx_file.temp_path)
        shard = Shard(rec_file.path, idx_file.path, None, self._count, rec_bytes, idx_bytes,
                      rec_crc, idx_crc, min_key=self._min_key, max_key=self._max_key)
        if self._crc_file is not None:
            crc_file, self._crc_file = self._crc_file, None
            self._outputs.add(crc_file)
            self._flush_crcs(crc_file)
            crc_file.finish_file()
            shard.crc = crc_file.path
            shard.crc_bytes, shard.crc_crc32 = file_crc32(crc_file.temp_path)
        self.shards.append(shard)

    def _flush_crcs(self, crc_file: AtomicFile) -> None:
        if self._crcs:
            crc_file.file.write(np.frombuffer(self._crcs, np.uint32).astype(LE_U32).tobytes())
            del self._crcs[:]

    def write(self, key: Any, data: Union[bytes, bytearray, memoryview]) -> Tuple[int, int]:
        """Append a record under ``key``; returns ``(shard number, offset in that shard)``."""
        check_open(self.closed, "writer", self.path)
        size = memoryview(data).nbytes
        if self._current is not None and self._count and (
                (self.max_records is not None and self._count >= self.max_records)
                or (self.max_bytes is not None
                    and self._current.tell() + _padded(size) > self.max_bytes)):
            self._close_shard()
        if self._current is None:
            self._open_shard()
        offset = self._current.write(key, data)
        self._count += 1
        if type(key) is int:
            if self._min_key is None or key < self._min_key:
                self._min_key = key
            if self._max_key is None or key > self._max_key:
                self._max_key = key
        if self._crc_file is not None:
            self._crcs.append(zlib.crc32(data))
            if len(self._crcs) >= _CRC_BATCH:
                self._flush_crcs(self._crc_file)
        return len(self.shards), offset

    # -- the lifecycle
    def _finish(self) -> None:
        if self._current is not None:
            self._close_shard()
        manifest = Manifest(self.manifest_path, self.shards, self.made_by,
                            CHECKSUM if self.checksums else None, self.storage_options)
        target = self._outputs.add(AtomicFile(self.manifest_path, "wb", fsync=self.fsync,
                                              storage_options=self.storage_options))
        target.file.write(manifest.to_bytes())
        self.manifest = manifest

    def _drop(self) -> None:
        if self._current is not None:
            current, self._current = self._current, None
            current.abort()
        if self._crc_file is not None:
            crc_file, self._crc_file = self._crc_file, None
            crc_file.discard()

    def close(self) -> Manifest:  # type: ignore[override]
        """Finish the last shard, write the manifest and rename every file into place (the
        manifest last); returns the :class:`Manifest`."""
        super().close()
        return self.manifest

    def abort(self) -> None:
        """Stop without producing any shard or manifest."""
        super().abort()


def _version() -> str:
    try:
        return metadata.version("recio")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


# -- reading -------------------------------------------------------------------------------------
class ShardReader:
    """Records of a shard set in manifest order, by position or by key.

    ``verify=True`` checks every record read against its shard's per-record CRC-32 and raises
    :class:`~recio.errors.ChecksumError` naming the shard, the record's key and byte offset.
    A set at URLs is read by ranged GETs, or, with ``cache_dir`` (or ``RECIO_CACHE_DIR``),
    from local copies of its whole shards kept in that folder, at most ``cache_limit`` bytes
    (``recio.records.cache.shard_cache``): a shard is downloaded when first read, and iterating the
    set downloads the next shard while one is read.
    """

    def __init__(self, manifest: Union[PathLike, Manifest], *, verify: bool = False,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None) -> None:
        self.manifest = (manifest if isinstance(manifest, Manifest)
                         else load_manifest(manifest, storage_options))
        options = self.manifest.storage_options
        self.verify = verify
        self._cache = (ShardCache.configured(cache_dir, cache_limit, options)
                       if storage.is_url(self.manifest.path) else None)
        if self._cache is not None:
            self._cache.expect_manifest(self.manifest)
        shards = self.manifest.shards
        # with a cache a shard is opened (downloaded) when first read
        self._readers: List[Optional[RecordReader]] = [None] * len(shards)
        self._indexes = [open_checked_index(s.rec, s.idx, key_type=None, rec_size=s.rec_bytes,
                                            storage_options=options, shard_cache=self._cache)
                         for s in shards]
        for n, (shard, index) in enumerate(zip(shards, self._indexes)):
            if len(index) != shard.records:
                raise ManifestError(f"has {len(index)} index lines; the manifest says "
                                    f"{shard.records} records", path=shard.idx)
            if self._cache is None:
                self._reader(n)
        self._crcs = ([record_checksums(s, options) for s in shards] if verify else None)
        self._starts = np.cumsum([0] + [len(i) for i in self._indexes])
        self._by_key: Optional[Dict[Any, Tuple[int, int]]] = None

    #: set by ``close()``: every method then raises ``ClosedError`` naming the manifest
    _closed = False

    def __len__(self) -> int:
        check_open(self._closed, "ShardReader", self.manifest.path)
        return int(self._starts[-1])

    def _reader(self, n: int) -> RecordReader:
        check_open(self._closed, "ShardReader", self.manifest.path)
        reader = self._readers[n]
        if reader is None:
            reader = self._readers[n] = RecordReader(
                self.manifest.shards[n].rec, storage_options=self.manifest.storage_options,
                shard_cache=self._cache)
            reader.source.use_index(self._indexes[n])  # a remote shard: one GET a record
        return reader

    def read(self, shard_number: int, i: int) -> bytes:
        """Record ``i`` (in ``.idx`` order) of shard ``shard_number``."""
        index = self._indexes[shard_number]
        offset = int(index.offsets[i])
        data = self._reader(shard_number).read_at(offset)
        if self._crcs is not None:
            mismatch = checksum_mismatch(data, int(self._crcs[shard_number][i]), i,
                                          index.key_at(i) if index.has_keys else i)
            if mismatch is not None:
                raise ChecksumError(mismatch, path=self.manifest.shards[shard_number].rec,
                                    offset=offset)
        return data

    def __getitem__(self, position: int) -> bytes:
        """The record at ``position`` across all shards (0 .. len-1, manifest order)."""
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError(f"position {position} outside 0..{len(self) - 1}")
        shard = int(np.searchsorted(self._starts, position, side="right")) - 1
        return self.read(shard, position - int(self._starts[shard]))

    def by_key(self, key: Any) -> bytes:
        """The record written under ``key`` (the last one, if a key repeats)."""
        check_open(self._closed, "ShardReader", self.manifest.path)
        if self._by_key is None:
            self._by_key = {}
            for n, index in enumerate(self._indexes):
                for i in range(len(index)):
                    self._by_key[index.key_at(i)] = (n, i)
        if key not in self._by_key:
            raise KeyError(key)
        return self.read(*self._by_key[key])

    def __iter__(self) -> Iterator[bytes]:
        check_open(self._closed, "ShardReader", self.manifest.path)
        return self._records()

    def _records(self) -> Iterator[bytes]:
        ahead = None
        if self._cache is not None:
            ahead = self._cache.prefetch(self.manifest.rec_paths(), ahead=READ_AHEAD)
        try:
            for n, index in enumerate(self._indexes):
                if ahead is not None:
                    ahead.reached(n)
                for i in range(len(index)):
                    yield self.read(n, i)
        finally:
            if ahead is not None:
                ahead.stop()

    def close(self) -> None:
        """Close every shard's file; any later use raises ``ClosedError``."""
        for reader in self._readers:
            if reader is not None:
                reader.close()
        self._closed = True

    def __getstate__(self) -> dict:
        check_open(self._closed, "ShardReader", self.manifest.path)
        return dict(self.__dict__)

    def __enter__(self) -> "ShardReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
