"""Shard sets: a dataset in several ``.rec``/``.idx`` files, described by a manifest written last.

``ShardWriter("out/train", max_records=..., max_bytes=...)`` writes ``out/train-00000.rec`` and
``.idx``, ``out/train-00001.rec`` and ``.idx``, ... and, last, ``out/train.manifest.json``.
Every file is written under a temporary name; none is renamed into place before every shard is
complete, and the manifest is renamed last, so **a manifest means "finished"**: an error, an
``abort()``, Ctrl-C or a writer dropped unclosed leaves no shard and no manifest, and a process
killed while the files are being renamed leaves shards without a manifest (not finished).

The manifest (JSON, UTF-8; file names are relative to the manifest's folder)::

    {"format": "recio.shards", "version": 1,
     "checksum": "crc32",              # zlib's CRC-32 of each whole file, 8 hex digits
     "record_checksums": "crc32",      # or null: the per-record sidecars below
     "records": 10000, "bytes": 81920000,       # over all shards (.rec bytes)
     "shards": [{"rec": "train-00000.rec", "idx": "train-00000.idx",
                 "crc": "train-00000.crc32",    # or null
                 "records": 5000, "rec_bytes": 40960000, "idx_bytes": 48890, "crc_bytes": 20000,
                 "rec_crc32": "1a2b3c4d", "idx_crc32": "...", "crc_crc32": "...",
                 "min_key": 0, "max_key": 4999}, ...],
     "made_by": {"tool": "recio 0.1.0", ...}}

The per-record sidecar ``PREFIX-NNNNN.crc32`` (``checksums=True``) holds one little-endian
uint32 a record, the CRC-32 of the record's payload, in the order of the shard's ``.idx``: a
reader opened with ``verify=True`` and ``recio verify --deep`` name the exact damaged record.
Plain MXNet files without a manifest are unaffected by all of this.

``combined_index`` writes one ``.idx`` whose offsets run across the shards in manifest order
(shard k's offsets shifted by the sizes of shards 0..k-1): the layout DALI's
``readers.mxnet(path=[shard0.rec, shard1.rec, ...], index_path=[all.idx])`` expects.
"""
from __future__ import annotations

import array
import json
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio import portable, storage
from recio.errors import (
    ChecksumError,
    IndexFileError,
    ManifestError,
    RecordIOError,
    StorageError,
)
from recio.records.atomic import (
    AtomicFile,
    ManagedWriter,
    OutputSet,
    atomic_open,
    check_outputs,
    drop_aside,
    set_aside,
)
from recio.records.cache import READ_AHEAD, ShardCache
from recio.records.framing import HEADER_SIZE
from recio.records.diagnose import open_checked_index
from recio.records.index import open_index
from recio.records.index_format import iter_index_lines
from recio.records.reader import RecordReader
from recio.records.writer import IndexedRecordWriter
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

_MANIFEST_SUFFIX = ".manifest.json"
MANIFEST_FORMAT = "recio.shards"
MANIFEST_VERSION = 1
CHECKSUM = "crc32"
#: the per-record checksum sidecar of a shard: ``train-00000.rec`` -> ``train-00000.crc32``
RECORD_CHECKSUM_SUFFIX = ".crc32"
#: digits of the shard number in a shard's name (``PREFIX-00000``); more shards use more digits
SHARD_DIGITS = 5
#: files are checksummed and compared in blocks of this size
_BLOCK = 8 << 20
#: per-record checksums are written to the sidecar in batches of this many
_CRC_BATCH = 8192
_LE_U32 = np.dtype("<u4")
#: a remote deep check fetches this many records' bytes at a time
_FETCH_BATCH = 256
#: shards moved into place at once in a bucket (each move is a copy on the server)
_COMMIT_THREADS = 16


def shard_stem(prefix: PathLike, number: int) -> str:
    """``out/train`` and 3 -> ``out/train-00003`` (the shard's ``.rec``/``.idx`` without suffix)."""
    return f"{os.fspath(prefix)}-{number:0{SHARD_DIGITS}d}"


def manifest_path(prefix: PathLike) -> str:
    """``out/train`` -> ``out/train.manifest.json``."""
    return os.fspath(prefix) + _MANIFEST_SUFFIX


def is_manifest(path: PathLike) -> bool:
    """True for a path named like a manifest (``*.manifest.json``)."""
    return os.fspath(path).endswith(_MANIFEST_SUFFIX)


def file_crc32(path: PathLike, storage_options: StorageOptions = None) -> Tuple[int, str]:
    """``(size, crc32 as 8 hex digits)`` of a whole file (or object, streamed), read in blocks."""
    crc, size = 0, 0
    with storage.open_input(path, storage_options) as f:
        while True:
            block = f.read(_BLOCK)
            if not block:
                break
            crc = zlib.crc32(block, crc)
            size += len(block)
    return size, f"{crc:08x}"


def _existing_shard_files(prefix: PathLike, storage_options: StorageOptions = None) -> List[str]:
    """Files already in ``prefix``'s folder named like one of its shards' (``PREFIX-NNNNN.rec``,
    ``.idx``, ``.crc32``), sorted: what a new set under ``prefix`` would replace or leave
    stale beside its manifest."""
    prefix = storage.absolute(prefix)
    folder, base = storage.dirname(prefix), storage.basename(prefix)
    pattern = re.compile(re.escape(base) + r"-\d{%d,}(\.rec|\.idx|%s)\Z"
                         % (SHARD_DIGITS, re.escape(RECORD_CHECKSUM_SUFFIX)))
    if storage.is_url(prefix) and not storage.isdir(folder, storage_options):
        return []
    return sorted(p for p in storage.listdir(folder, storage_options)
                  if pattern.match(storage.basename(p)))


def _padded(n: int) -> int:
    return HEADER_SIZE + ((n + 3) & ~3)


# -- the manifest --------------------------------------------------------------------------------
@dataclass
class Shard:
    """One shard as the manifest describes it; paths are absolute."""

    rec: str
    idx: str
    crc: Optional[str]
    records: int
    rec_bytes: int
    idx_bytes: int
    rec_crc32: str
    idx_crc32: str
    crc_bytes: Optional[int] = None
    crc_crc32: Optional[str] = None
    min_key: Any = None
    max_key: Any = None

    def files(self) -> List[Tuple[str, str, int, str]]:
        """``(role, path, size, crc32)`` of each file the shard has."""
        out = [("rec", self.rec, self.rec_bytes, self.rec_crc32),
               ("idx", self.idx, self.idx_bytes, self.idx_crc32)]
        if self.crc is not None:
            out.append(("crc", self.crc, self.crc_bytes or 0, self.crc_crc32 or ""))
        return out

    def to_dict(self, folder: str) -> Dict[str, Any]:
        rel = (lambda p: None if p is None else
               storage.basename(p) if storage.is_url(p) else os.path.relpath(p, folder))
        return {"rec": rel(self.rec), "idx": rel(self.idx), "crc": rel(self.crc),
                "records": self.records, "rec_bytes": self.rec_bytes,
                "idx_bytes": self.idx_bytes, "crc_bytes": self.crc_bytes,
                "rec_crc32": self.rec_crc32, "idx_crc32": self.idx_crc32,
                "crc_crc32": self.crc_crc32, "min_key": self.min_key, "max_key": self.max_key}


@dataclass
class Manifest:
    """A shard set: its manifest's ``path``, the ``shards`` in order and how it was made."""

    path: str
    shards: List[Shard]
    made_by: Dict[str, Any] = field(default_factory=dict)
    record_checksums: Optional[str] = None
    #: how the shards are reached when they are URLs (not written to the manifest)
    storage_options: StorageOptions = field(default=None, compare=False)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards)

    @property
    def nbytes(self) -> int:
        """Bytes of all the ``.rec`` files."""
        return sum(s.rec_bytes for s in self.shards)

    def rec_paths(self) -> List[str]:
        """The shards' ``.rec`` files in manifest order (what multi-file readers read)."""
        return [s.rec for s in self.shards]

    def to_dict(self) -> Dict[str, Any]:
        folder = storage.dirname(storage.absolute(self.path))
        return {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "checksum": CHECKSUM,
                "record_checksums": self.record_checksums, "records": self.records,
                "bytes": self.nbytes, "shards": [s.to_dict(folder) for s in self.shards],
                "made_by": self.made_by}

    def to_bytes(self) -> bytes:
        """The manifest file's bytes (the one serialisation of a manifest)."""
        return json.dumps(self.to_dict(), indent=1).encode("utf-8") + b"\n"


_SHARD_INTS = ("records", "rec_bytes", "idx_bytes")


def load_manifest(path: PathLike, storage_options: StorageOptions = None) -> Manifest:
    """Read and check a manifest (a local path or a URL: its shards are then URLs beside it);
    :class:`ManifestError` (naming the file and the field) for anything malformed,
    ``FileNotFoundError`` when it does not exist."""
    path = storage.absolute(path)
    try:
        doc = json.loads(storage.read_bytes(path, storage_options).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestError(f"is not UTF-8 text ({exc.reason})", path=path) from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"is not valid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f"is not a recio shard manifest (no \"format\": "
                            f"\"{MANIFEST_FORMAT}\")", path=path)
    if doc.get("version") != MANIFEST_VERSION:
        raise ManifestError(f"has version {doc.get('version')!r}; this recio reads version "
                            f"{MANIFEST_VERSION} (upgrade recio)", path=path)
    if doc.get("checksum") != CHECKSUM:
        raise ManifestError(f"uses checksum {doc.get('checksum')!r}; this recio knows "
                            f"{CHECKSUM!r}", path=path)
    entries = doc.get("shards")
    if not isinstance(entries, list):
        raise ManifestError("has no \"shards\" list", path=path)
    folder = storage.dirname(path)
    shards = [_shard_from(entry, i, folder, path) for i, entry in enumerate(entries)]
    made_by = doc["made_by"] if isinstance(doc.get("made_by"), dict) else {}
    return Manifest(path, shards, made_by, doc.get("record_checksums"), storage_options)


def _shard_from(entry: Any, i: int, folder: str, path: str) -> Shard:
    where = f"shard {i}"
    if not isinstance(entry, dict):
        raise ManifestError(f"{where} is not an object", path=path)
    for name in ("rec", "idx", "rec_crc32", "idx_crc32"):
        if not isinstance(entry.get(name), str) or not entry[name]:
            raise ManifestError(f"{where} has no {name!r} string", path=path)
    for name in _SHARD_INTS:
        value = entry.get(name)
        if type(value) is not int or value < 0:
            raise ManifestError(f"{where}: {name!r} must be a whole number >= 0, got {value!r}",
                                path=path)
    files: Dict[str, Any] = {}  # rec and idx: strings (checked above); crc: or None
    for name in ("rec", "idx", "crc"):
        rel = entry.get(name)
        if rel is None:
            files[name] = None
            continue
        if not isinstance(rel, str) or os.path.isabs(rel) or os.path.splitdrive(rel)[0] \
                or storage.is_windows_absolute(rel) or rel.startswith(("/", "\\")) \
                or ".." in rel.replace("\\", "/").split("/"):
            raise ManifestError(f"{where}: {name!r} must be a file name beside the manifest, got "
                                f"{rel!r}", path=path)
        files[name] = storage.join(folder, rel)
    if files["crc"] is not None and not isinstance(entry.get("crc_crc32"), str):
        raise ManifestError(f"{where} has a 'crc' file but no 'crc_crc32'", path=path)
    return Shard(files["rec"], files["idx"], files["crc"], entry["records"], entry["rec_bytes"],
                 entry["idx_bytes"], entry["rec_crc32"], entry["idx_crc32"],
                 entry.get("crc_bytes"), entry.get("crc_crc32"), entry.get("min_key"),
                 entry.get("max_key"))


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
        folder = storage.dirname(self.prefix)
        if not storage.is_url(folder) and not os.path.isdir(folder):
            raise FileNotFoundError(2, "No such folder for the shards", folder)
        # every shard of an earlier set, not only the ones this set will write: with force the
        # rest are deleted when this set is committed, so no stale shard stays beside it
        stale = _existing_shard_files(self.prefix, storage_options)
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
            crc_file.file.write(np.frombuffer(self._crcs, np.uint32).astype(_LE_U32).tobytes())
            del self._crcs[:]

    def write(self, key: Any, data: Union[bytes, bytearray, memoryview]) -> Tuple[int, int]:
        """Append a record under ``key``; returns ``(shard number, offset in that shard)``."""
        if self.closed:
            raise ValueError("write to a closed ShardWriter")
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
def record_checksums(shard: Shard, storage_options: StorageOptions = None) -> np.ndarray:
    """The shard's per-record CRC-32s (uint32, in ``.idx`` order); ManifestError without a
    sidecar or when its size does not hold ``records`` values."""
    if shard.crc is None:
        raise ManifestError("has no per-record checksums (written without checksums=True)",
                            path=shard.rec)
    raw = storage.read_bytes(shard.crc, storage_options)
    if len(raw) != 4 * shard.records:
        raise ManifestError(f"holds {len(raw)} bytes; {shard.records} records "
                            f"need {4 * shard.records}", path=shard.crc)
    return np.frombuffer(raw, dtype=_LE_U32)


class ShardReader:
    """Records of a shard set in manifest order, by position or by key.

    ``verify=True`` checks every record read against its shard's per-record CRC-32 and raises
    :class:`~recio.errors.ChecksumError` naming the shard, the record's key and byte offset.
    A set at URLs is read by ranged GETs, or, with ``cache_dir`` (or ``RECIO_CACHE_DIR``),
    from local copies of its whole shards kept in that folder, at most ``cache_limit`` bytes
    (``recio.records.cache``): a shard is downloaded when first read, and iterating the set
    downloads the next shard while one is read.
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

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _reader(self, n: int) -> RecordReader:
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
            mismatch = _checksum_mismatch(data, int(self._crcs[shard_number][i]), i,
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
        if self._by_key is None:
            self._by_key = {}
            for n, index in enumerate(self._indexes):
                for i in range(len(index)):
                    self._by_key[index.key_at(i)] = (n, i)
        if key not in self._by_key:
            raise KeyError(key)
        return self.read(*self._by_key[key])

    def __iter__(self) -> Iterator[bytes]:
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
        for reader in self._readers:
            if reader is not None:
                reader.close()

    def __enter__(self) -> "ShardReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- checking ------------------------------------------------------------------------------------
@dataclass
class ShardProblem:
    """One thing that differs from the manifest: the file, what differs, and where."""

    path: str
    problem: str
    record: Optional[int] = None
    key: Any = None
    offset: Optional[int] = None

    def __str__(self) -> str:
        where = "" if self.offset is None else f" (byte {self.offset})"
        return f"{self.path}: {self.problem}{where}"


@dataclass
class ManifestReport:
    """What ``verify_manifest`` found: ``problems`` (empty when the set matches its manifest)."""

    path: str
    shards: int
    records: int
    nbytes: int
    deep: bool
    problems: List[ShardProblem] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        """``OK``; ``BAD INDEX`` when only shards' ``.idx`` files differ (the records are
        intact: rebuild those indexes); ``DAMAGED`` otherwise."""
        if not self.problems:
            return "OK"
        if all(p.path.endswith(".idx") for p in self.problems):
            return "BAD INDEX"
        return "DAMAGED"

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "shards": self.shards, "records": self.records,
                "bytes": self.nbytes, "deep": self.deep, "clean": self.clean,
                "verdict": self.verdict, "problems": [vars(p) for p in self.problems]}


def verify_manifest(path: PathLike, *, deep: bool = False,
                    progress: Optional[Callable[[int], Any]] = None,
                    storage_options: StorageOptions = None) -> ManifestReport:
    """Check every shard against the manifest: each file's presence, size and CRC-32, and the
    ``.idx``'s record count. ``deep=True`` also reads every record and compares it with the
    per-record checksums (where the set has them), naming each damaged record by shard, number,
    key and offset. ``progress(n)``: bytes checked since the last call. Differences are
    reported, not raised; a malformed manifest raises :class:`ManifestError`."""
    manifest = load_manifest(path, storage_options)
    report = ManifestReport(manifest.path, len(manifest.shards), manifest.records,
                            manifest.nbytes, deep)
    options = storage_options
    for shard in manifest.shards:
        for role, file, size, crc in shard.files():
            if not storage.exists(file, options):
                report.problems.append(ShardProblem(file, "is missing"))
                continue
            actual_size = storage.size(file, options)
            if actual_size != size:
                report.problems.append(ShardProblem(
                    file, f"has {actual_size} bytes; the manifest says {size}"))
                continue
            _, actual_crc = file_crc32(file, options)
            if progress is not None:
                progress(actual_size)
            if actual_crc != crc:
                report.problems.append(ShardProblem(
                    file, f"has CRC-32 {actual_crc}; the manifest says {crc} (its bytes changed)"))
        index = None
        if storage.exists(shard.idx, options):
            try:
                index = open_index(shard.idx, key_type=None, cache=False,
                                   storage_options=options)
            except IndexFileError as exc:
                where = "" if exc.line is None else f"line {exc.line}: "
                report.problems.append(ShardProblem(shard.idx, where + exc.message,
                                                    offset=exc.offset))
            else:
                if len(index) != shard.records:
                    report.problems.append(ShardProblem(
                        shard.idx, f"has {len(index)} records; the manifest says {shard.records}"))
        if deep and index is not None and storage.exists(shard.rec, options):
            report.problems.extend(_deep_check(shard, index, options))
    return report


def _checksum_mismatch(data: Any, expected: int, i: int, key: Any) -> Optional[str]:
    """The one per-record check: None when ``data`` has CRC-32 ``expected``, else what to say
    about record ``i`` (``key``)."""
    if zlib.crc32(data) == expected:
        return None
    return f"record {i} (key {key}) differs from its checksum {expected:08x}: its bytes are damaged"


def _deep_check(shard: Shard, index: Any,
                storage_options: StorageOptions = None) -> List[ShardProblem]:
    """Every record of ``shard`` (at the offsets of its parsed ``index``) read and compared with
    its CRC-32 (framing damage found on the way is named too)."""
    problems: List[ShardProblem] = []
    crcs: Optional[np.ndarray] = None
    if shard.crc is not None and storage.exists(shard.crc, storage_options):
        try:
            crcs = record_checksums(shard, storage_options)
        except ManifestError as exc:
            problems.append(ShardProblem(shard.crc, exc.message))
    with RecordReader(shard.rec, storage_options=storage_options) as reader:
        offsets = index.offsets.tolist()
        index.rec_size = reader.size
        for i, offset in enumerate(offsets):
            if reader.source.remote and i % _FETCH_BATCH == 0:  # coalesced, concurrent GETs
                reader.source.fetch([(o, index.record_end(o) or reader.size)
                                     for o in offsets[i:i + _FETCH_BATCH]])
            key = index.key_at(i) if index.has_keys else i
            try:
                data = reader.read_at(offset)
            except StorageError:
                raise  # the network failed, not the shard
            except RecordIOError as exc:
                problems.append(ShardProblem(shard.rec, f"record {i} (key {key}): {exc.message}",
                                             i, key, offset))
                continue
            if crcs is not None and i < len(crcs):
                mismatch = _checksum_mismatch(data, int(crcs[i]), i, key)
                if mismatch is not None:
                    problems.append(ShardProblem(shard.rec, mismatch, i, key, offset))
    return problems


# -- the combined index ---------------------------------------------------------------------------
def combined_index(manifest: Union[PathLike, Manifest], out_path: PathLike, *,
                   force: bool = False, storage_options: StorageOptions = None) -> int:
    """Write one ``.idx`` for the whole set: each shard's lines in manifest order, offsets
    shifted by the total size of the shards before it (DALI's layout for several ``.rec``
    paths). The shards' sizes come from the files (checked against the manifest). Returns the
    number of lines. Refuses an existing ``out_path`` unless ``force``."""
    manifest = (manifest if isinstance(manifest, Manifest)
                else load_manifest(manifest, storage_options))
    options = manifest.storage_options if storage_options is None else storage_options
    inputs = [manifest.path] + [p for s in manifest.shards for p in (s.rec, s.idx)]
    check_outputs([out_path], inputs, force=force, storage_options=options)
    lines = 0
    with atomic_open(out_path, "wb", storage_options=options) as out:
        for block in combined_lines(manifest.shards, options):
            out.write(block)
            lines += block.count(b"\n")
    return lines


def combined_lines(shards: Sequence[Shard], storage_options: StorageOptions = None
                   ) -> Iterator[bytes]:
    """The ``.idx`` lines of ``shards`` one after another, each shard's offsets moved up by the
    sizes of the ``.rec`` files before it (taken from the files, checked against
    ``rec_bytes``), in blocks: the index of the shards' records joined into one file."""
    base = 0
    for shard in shards:
        size = storage.size(shard.rec, storage_options)
        if size != shard.rec_bytes:
            raise ManifestError(f"has {size} bytes; the manifest says {shard.rec_bytes} "
                                f"(run recio verify on the manifest)", path=shard.rec)
        index = open_checked_index(shard.rec, shard.idx, key_type=int, rec_size=size,
                                   storage_options=storage_options)
        yield from iter_index_lines(index.key_array(), index.offsets + base)
        base += size


#: ``PREFIX.combined.idx``: the combined index a set made by parts gets beside its manifest
COMBINED_INDEX_SUFFIX = ".combined.idx"


def set_outputs(prefix: PathLike, storage_options: StorageOptions = None) -> List[str]:
    """Everything a set published by :func:`commit_staged` at ``prefix`` writes, or would
    leave stale beside its manifest: the manifest, the combined index and every file named
    like a shard of ``prefix`` (what an existing set there means, for ``check_outputs``)."""
    return [manifest_path(prefix), os.fspath(prefix) + COMBINED_INDEX_SUFFIX,
            *_existing_shard_files(prefix, storage_options)]


def commit_staged(prefix: PathLike, staged: Sequence[Shard], made_by: Dict[str, Any], *,
                  checksums: bool, force: bool = False,
                  storage_options: StorageOptions = None) -> Manifest:
    """Publish shards that were written elsewhere (by parallel tasks, into a staging folder,
    each fully written) as the set ``prefix``, in the order given: each renamed to
    ``PREFIX-NNNNN.*`` (numbered from 0 without gaps; on a URL a copy on the server), then
    ``PREFIX.combined.idx``, then the manifest, last. With ``force`` an old manifest is
    deleted first (so no manifest ever describes a mix) and the old set's other shards last.
    The caller checked, before any work, that nothing was in the way (``check_outputs``).

    It can be done again after it was interrupted: a staged file that is gone was moved by
    the interrupted commit, so its final file must have the staged size and CRC-32
    (:class:`~recio.errors.ManifestError` otherwise)."""
    prefix = storage.absolute(prefix)
    stale = _existing_shard_files(prefix, storage_options) if force else []
    suffixes = {"rec": ".rec", "idx": ".idx", "crc": RECORD_CHECKSUM_SUFFIX}
    moves: List[Tuple[str, str, int, str]] = []
    shards: List[Shard] = []
    for shard in staged:
        final = shard_stem(prefix, len(shards))
        for role, path, size, crc in shard.files():
            moves.append((path, final + suffixes[role], size, crc))
            setattr(shard, role, final + suffixes[role])
        shards.append(shard)
    aside: List[Tuple[str, str]] = []
    if portable.is_windows() and not storage.is_url(prefix):
        # a file in use cannot be replaced or deleted there: move the old files out of the
        # way first, which fails (FileInUseError, everything put back) before anything
        # changes; not the new shards an interrupted commit already moved into place
        placed = {target for source, target, _, _ in moves if not os.path.exists(source)}
        aside = set_aside([p for p in set_outputs(prefix, storage_options) if p not in placed])
    storage.remove(manifest_path(prefix), storage_options)

    def move(source: str, target: str, size: int, crc: str) -> None:
        try:
            storage.move(source, target, storage_options)
        except FileNotFoundError:
            try:
                moved = file_crc32(target, storage_options) == (size, crc)
            except FileNotFoundError:
                moved = False
            if not moved:
                raise ManifestError(f"is gone from the staging folder and {target} is not "
                                    "that file; start the pack over", path=source) from None
    if storage.is_url(prefix):  # copies on the server: run them side by side
        with ThreadPoolExecutor(min(_COMMIT_THREADS, max(len(moves), 1))) as pool:
            for done in [pool.submit(move, *m) for m in moves]:
                done.result()
    else:
        for m in moves:
            move(*m)
    manifest = Manifest(manifest_path(prefix), shards, dict(made_by),
                        CHECKSUM if checksums else None, storage_options)
    combined_index(manifest, os.fspath(prefix) + COMBINED_INDEX_SUFFIX, force=True,
                   storage_options=storage_options)
    with atomic_open(manifest.path, "wb", storage_options=storage_options) as out:
        out.write(manifest.to_bytes())
    kept = {p for s in shards for _, p, _, _ in s.files()}
    for path in stale:
        if path not in kept:
            storage.remove(path, storage_options)
    drop_aside(aside)
    return manifest


__all__ = ["ShardWriter", "ShardReader", "Manifest", "Shard", "load_manifest", "verify_manifest",
           "ManifestReport", "ShardProblem", "combined_index", "record_checksums", "manifest_path"]
