"""Checking a shard set against its manifest (``recio verify`` on a ``*.manifest.json``).

Each file's presence, size and CRC-32 and each ``.idx``'s record count; ``deep=True`` reads every
record and compares it with the per-record checksums. Differences are collected in a
:class:`ManifestReport`, not raised, so one run names every damaged file and record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from recio import storage
from recio.errors import IndexFileError, ManifestError, RecordIOError, StorageError
from recio.records.index import open_index
from recio.records.manifest import Shard, checksum_mismatch, file_crc32, load_manifest, \
    record_checksums
from recio.records.reader import RecordReader
from recio.storage import PathLike, StorageOptions

#: a remote deep check fetches this many records' bytes at a time
_FETCH_BATCH = 256


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
            storage.check_regular(file)  # a FIFO or a device: refused, never read
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
                mismatch = checksum_mismatch(data, int(crcs[i]), i, key)
                if mismatch is not None:
                    problems.append(ShardProblem(shard.rec, mismatch, i, key, offset))
    return problems
