"""The manifest of a shard set: the file that says a set is finished, and what it holds.

A shard set is a dataset in several ``.rec``/``.idx`` files, ``PREFIX-00000.rec``/``.idx``, ...,
described by ``PREFIX.manifest.json``, written last (``recio.records.shards.shard_set`` writes and
reads sets; ``shards.verify`` checks them; ``shards.commit`` publishes staged shards and the
combined ``.idx``). This module owns the names of a set's files, the manifest's format and its
checks, and the per-record checksum sidecar, which all of them share.

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
"""
from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from recio import storage
from recio.errors import ManifestError
from recio.storage import PathLike, StorageOptions

_MANIFEST_SUFFIX = ".manifest.json"
_MANIFEST_FORMAT = "recio.shards"
_MANIFEST_VERSION = 1
CHECKSUM = "crc32"
#: the per-record checksum sidecar of a shard: ``train-00000.rec`` -> ``train-00000.crc32``
RECORD_CHECKSUM_SUFFIX = ".crc32"
#: digits of the shard number in a shard's name (``PREFIX-00000``); more shards use more digits
_SHARD_DIGITS = 5
#: files are checksummed and compared in blocks of this size
_BLOCK = 8 << 20
#: the per-record sidecar's values: little-endian uint32
LE_U32 = np.dtype("<u4")


def shard_stem(prefix: PathLike, number: int) -> str:
    """``out/train`` and 3 -> ``out/train-00003`` (the shard's ``.rec``/``.idx`` without suffix)."""
    return f"{os.fspath(prefix)}-{number:0{_SHARD_DIGITS}d}"


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


def existing_shard_files(prefix: PathLike, storage_options: StorageOptions = None) -> List[str]:
    """Files already in ``prefix``'s folder named like one of its shards' (``PREFIX-NNNNN.rec``,
    ``.idx``, ``.crc32``), sorted: what a new set under ``prefix`` would replace or leave
    stale beside its manifest."""
    prefix = storage.absolute(prefix)
    folder, base = storage.dirname(prefix), storage.basename(prefix)
    pattern = re.compile(re.escape(base) + r"-\d{%d,}(\.rec|\.idx|%s)\Z"
                         % (_SHARD_DIGITS, re.escape(RECORD_CHECKSUM_SUFFIX)))
    if storage.is_url(prefix) and not storage.isdir(folder, storage_options):
        return []
    return sorted(p for p in storage.listdir(folder, storage_options)
                  if pattern.match(storage.basename(p)))


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
        def rel(p: Optional[str]) -> Optional[str]:
            return None if p is None else \
                storage.basename(p) if storage.is_url(p) else os.path.relpath(p, folder)

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
        return {"format": _MANIFEST_FORMAT, "version": _MANIFEST_VERSION, "checksum": CHECKSUM,
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
    if not isinstance(doc, dict) or doc.get("format") != _MANIFEST_FORMAT:
        raise ManifestError(f"is not a recio shard manifest (no \"format\": "
                            f"\"{_MANIFEST_FORMAT}\")", path=path)
    if doc.get("version") != _MANIFEST_VERSION:
        raise ManifestError(f"has version {doc.get('version')!r}; this recio reads version "
                            f"{_MANIFEST_VERSION} (upgrade recio)", path=path)
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


# -- per-record checksums -----------------------------------------------------------------------
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
    return np.frombuffer(raw, dtype=LE_U32)


def checksum_mismatch(data: Any, expected: int, i: int, key: Any) -> Optional[str]:
    """The one per-record check: None when ``data`` has CRC-32 ``expected``, else what to say
    about record ``i`` (``key``)."""
    if zlib.crc32(data) == expected:
        return None
    return f"record {i} (key {key}) differs from its checksum {expected:08x}: its bytes are damaged"
