"""What a source names: the one place that turns a user's source into files.

A *source* is how a user names record files anywhere in recio (``InputSplit``, the PyTorch
datasets, Ray Data, ``MinibatchSource``, ``recio inspect`` and ``recio verify``):

* a path or a URL (``s3://bucket/train.rec``), or a list of them;
* a string of several joined by ``;`` (dmlc's and MXNet's way of naming several files);
* a folder: its ``*.rec`` files, in name order;
* a glob pattern (``shards/*.rec``, ``s3://bucket/part-*.rec``): its matches, in name order;
* a shard set's manifest (``PREFIX.manifest.json``): its shards, in manifest order, each with
  the ``.idx`` and the size the manifest records for it.

A file named explicitly may have any name (a ``.cbf``, a ``.ctf``, or a file that is not
RecordIO at all, which the reader then describes); only a folder's listing is limited to
``.rec`` (regular files: a FIFO or device there is not listed). A FIFO, socket or device named
explicitly is :class:`~recio.errors.NotRegularFileError` (``recio.storage.regular``). A named file, folder or pattern that holds nothing is ``FileNotFoundError`` naming it.
Every caller resolves through :func:`resolve_source` (or :func:`expand_source`, its paths), so
the rule is the same everywhere, URLs included. A :class:`SourceFile` it returned is itself a
source, taken as it is: an entry point that resolves once can hand its files on without their
being looked up again.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from recio import storage
from recio.records.cache.shard_cache import ShardCache
from recio.records.manifest import is_manifest, load_manifest
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]
Source = Union[PathLike, "SourceFile", Sequence[Union[PathLike, "SourceFile"]]]

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class SourceFile:
    """One file a source names, with what its manifest says about it (if it came from one)."""

    #: the file (a local path or a URL)
    path: str
    #: the shard's index as its manifest names it; None: no manifest (the ``.idx`` beside
    #: ``path`` is the usual one)
    idx_path: Optional[str] = None
    #: the file's size in bytes as its manifest records it (None: not known without a lookup)
    size: Optional[int] = None
    #: the manifest that named the file, if any
    manifest: Optional[str] = None


def _entries(source: Source) -> List[Union[str, SourceFile]]:
    if isinstance(source, SourceFile):
        return [source]
    if isinstance(source, (str, os.PathLike)):
        return [e for e in os.fspath(source).split(";") if e]
    return [e if isinstance(e, SourceFile) else os.fspath(e) for e in source]


def is_remote_source(source: Source) -> bool:
    """Whether ``source`` names a URL (looking it up would cost a request)."""
    return any(storage.is_url(e.path if isinstance(e, SourceFile) else e)
               for e in _entries(source))


def resolve_source(source: Source, storage_options: StorageOptions = None,
                   shard_cache: Optional[ShardCache] = None) -> List[SourceFile]:
    """The files ``source`` names, in order (see the module docstring for the forms it takes).

    URLs are looked up with ``storage_options``. A manifest's files are described to
    ``shard_cache`` (their sizes and checksums), which then needs no lookup of them; a
    manifest's local shard that is missing is ``FileNotFoundError`` naming it.
    """
    entries = _entries(source)
    files: List[SourceFile] = []
    for entry in entries:
        if isinstance(entry, SourceFile):  # resolved already
            files.append(entry)
        elif is_manifest(entry):
            manifest = load_manifest(entry, storage_options)
            if shard_cache is not None:
                shard_cache.expect_manifest(manifest)
            for shard in manifest.shards:
                known = shard_cache is not None and shard_cache.knows(shard.rec)
                if not known and not storage.isfile(shard.rec, storage_options):
                    storage.check_regular(shard.rec)  # a FIFO or device: say so
                    error = storage.missing(shard.rec)
                    raise FileNotFoundError(error.errno, f"{error.strerror} (a shard of "
                                                         f"{manifest.path})", shard.rec)
                files.append(SourceFile(shard.rec, shard.idx, shard.rec_bytes, manifest.path))
        elif storage.isdir(entry, storage_options):
            found = storage.listdir(entry, storage_options)
            files.extend(SourceFile(p) for p in found
                         if p.endswith(".rec") and (storage.is_url(p) or os.path.isfile(p)))
        elif _GLOB_CHARS & set(entry) and not storage.exists(entry, storage_options):
            matches = storage.glob(entry, storage_options)
            if not matches:
                raise FileNotFoundError(2, "no file matches the pattern", entry)
            files.extend(SourceFile(p) for p in matches)
        elif storage.isfile(entry, storage_options):
            files.append(SourceFile(entry))
        else:
            storage.check_regular(entry)  # a FIFO, socket or device is refused as what it is
            raise storage.missing(entry)
    if not files:
        raise FileNotFoundError(2, "no .rec files found",
                                ";".join(map(str, entries)) or "(empty source)")
    return files


def expand_source(source: Source, storage_options: StorageOptions = None,
                  shard_cache: Optional[ShardCache] = None) -> List[str]:
    """The paths of :func:`resolve_source`'s files, in order."""
    return [f.path for f in resolve_source(source, storage_options, shard_cache)]
