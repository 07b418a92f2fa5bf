"""im2rec outputs that are not one local ``.rec``/``.idx``: a bucket (a URL PREFIX) and shard sets.

``pack_prefix_to`` packs each list im2rec finds for PREFIX. A local PREFIX without sharding is
``packing.pack_prefix`` itself (resumable, written beside the list). Otherwise the list is packed
in a private staging folder (beside the list for a local PREFIX, in ``RECIO_STAGING_DIR`` or
the temporary folder for a URL) with the same pipeline, then published:

* unsharded, to a URL: the ``.rec`` uploaded, then the ``.idx`` (an old ``.idx`` is deleted
  first, so a new ``.rec`` never sits beside a stale index), then ``.errors.tsv`` if any;
* sharded by size (``shard_size``): the staged records copied in list order into a
  :class:`~recio.records.shards.ShardWriter` set ``STEM-00000.rec``/``.idx``, ...,
  ``STEM.manifest.json`` (local or URL), whose manifest is written last.

A shard count (``num_shards``) is different: the list is cut into that many ranges of items
and each range is packed by one task (``recio.image.shard_pack``) on an ``engine`` (this
process by default, or ``recio.ray.RayEngine``), which also writes ``STEM.combined.idx``.

Either way nothing under the final names looks complete before the end: an object store shows
an object only once its upload completed, and a shard set without its manifest is unfinished.
The staging folder is deleted whatever happens. ``resume`` needs a local, unsharded PREFIX.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Iterator, List, Optional, Union

from recio import storage
from recio.image.codec import ImageOptions
from recio.image.packing import (
    PackResult,
    PrefixLists,
    ProgressCallback,
    output_paths,
    pack_list,
    pack_prefix,
    prefix_lists,
)
from recio.image.shard_pack import FAULT_VARIABLE, Engine, Fault, pack_shards
from recio.records.atomic import check_outputs, publish_staged
from recio.records.index import open_index
from recio.records.reader import RecordReader
from recio.records.shards import ShardWriter, existing_shard_files, manifest_path

PathLike = Union[str, "os.PathLike[str]"]


def find_lists_at(prefix: str) -> List[str]:
    """The ``.lst`` files im2rec packs for a URL ``prefix`` (``packing.find_lists``' rule: in
    its folder, starting with ``prefix``), sorted."""
    folder = prefix.rstrip("/") if prefix.endswith("/") else storage.dirname(prefix)
    if not storage.isdir(folder):
        return []
    return [p for p in storage.listdir(folder) if p.startswith(prefix) and p.endswith(".lst")]


def pack_prefix_to(prefix: PathLike, root: PathLike, options: Optional[ImageOptions] = None, *,
                   num_shards: Optional[int] = None, shard_size: Optional[int] = None,
                   checksums: bool = False, engine: Optional[Engine] = None,
                   progress_for: Optional[Callable[[str], Optional[ProgressCallback]]] = None,
                   on_lists: Optional[Callable[[PrefixLists], None]] = None,
                   **pack_options: Any) -> Iterator[PackResult]:
    """What ``im2rec PREFIX ROOT [--num-shards N | --shard-size BYTES]`` does, for a local or
    URL PREFIX; yields each list's ``PackResult`` (for a shard set, ``rec_path`` is the
    manifest and ``idx_path`` None). ``checksums``: shards get per-record CRC-32 sidecars.
    ``pack_options`` are ``pack_list``'s keywords; ``on_lists`` as ``pack_prefix``'s (the
    lists found, called before anything is packed). ``engine`` runs the tasks of a pack by list
    ranges (``recio.image.shard_pack``; default: this process): every pack with
    ``num_shards``, and with an engine or a URL ROOT also an unsharded one."""
    given = storage.local_path(prefix)  # messages name it as the caller wrote it
    prefix = storage.absolute(prefix)
    sharded = num_shards is not None or shard_size is not None
    if num_shards is not None and num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    if shard_size is not None and shard_size < 1:
        raise ValueError(f"shard_size must be at least 1 byte, got {shard_size}")
    if (engine is not None or storage.is_url(root)) and shard_size is not None:
        raise ValueError("shard_size cuts a list packed whole; an engine or a URL ROOT packs "
                         "list ranges: give num_shards (--num-shards N) instead")
    in_parts = num_shards is not None or engine is not None or storage.is_url(root)
    if not in_parts and not sharded and not storage.is_url(prefix):
        yield from pack_prefix(given, root, options, progress_for=progress_for,
                               on_lists=on_lists, **pack_options)
        return
    if pack_options.get("resume"):
        raise ValueError("--resume continues a local, unsharded pack; a pack to a URL or into "
                         "shards starts over (its staging folder is not kept)")
    pack_options.pop("resume", None)
    force = bool(pack_options.pop("force", False))
    found = prefix_lists(given, root, find_lists_at(prefix) if storage.is_url(prefix) else None)
    if on_lists is not None:
        on_lists(found)
    for lst in found.lists:
        progress = progress_for(lst) if progress_for is not None else None
        if in_parts:
            yield pack_shards(lst, root, options, num_shards=num_shards, engine=engine,
                              checksums=checksums, force=force, progress=progress,
                              fault=Fault.parse(os.environ.get(FAULT_VARIABLE)),
                              **pack_options)
            continue
        yield _pack_one(lst, root, options, (shard_size, checksums), force, progress,
                        pack_options)


def _outputs_of(lst: str, sharded: bool) -> List[str]:
    stem = os.path.splitext(lst)[0]
    if sharded:
        return [manifest_path(stem), *existing_shard_files(stem)]
    return list(output_paths(lst)[:2])


def _pack_one(lst: str, root: PathLike, options: Optional[ImageOptions], sharding: tuple,
              force: bool, progress: Optional[ProgressCallback], pack_options: dict
              ) -> PackResult:
    shard_size, checksums = sharding
    sharded = shard_size is not None
    if not sharded or not force:  # a sharded set with force replaces (and clears) its own
        check_outputs(_outputs_of(lst, sharded), [lst], force=force)
    where = (os.environ.get("RECIO_STAGING_DIR") or None) if storage.is_url(lst) \
        else os.path.dirname(lst)
    staging = tempfile.mkdtemp(prefix=".recio-pack-", dir=where)
    try:
        staged_lst = os.path.join(staging, storage.basename(lst))
        storage.download(lst, staged_lst)
        result = pack_list(staged_lst, root, options, force=True, progress=progress,
                           **pack_options)
        staged_rec, staged_idx, staged_errors = output_paths(staged_lst)
        rec, idx, errors = output_paths(lst)
        published = []
        if sharded:
            made_by = {"tool": "im2rec", "list": storage.basename(lst), "images": result.packed}
            manifest = _reshard(staged_rec, staged_idx, os.path.splitext(lst)[0], shard_size,
                                checksums, force, made_by)
            result.rec_path, result.idx_path = manifest, None  # type: ignore[assignment]
        else:
            published = [(staged_rec, rec), (staged_idx, idx)]
            result.rec_path, result.idx_path = rec, idx
        if result.errors_path is not None:
            published.append((staged_errors, errors))
            result.errors_path = errors
        publish_staged(published)
        result.lst_path = lst
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _reshard(rec: str, idx: str, stem: str, shard_size: int, checksums: bool, force: bool,
             made_by: dict) -> str:
    """Copy the staged ``rec`` (records in ``idx`` order, keys kept) into a shard set at
    ``stem`` of shards of at most ``shard_size`` bytes; returns the manifest's path."""
    index = open_index(idx, key_type=int, rec_size=os.path.getsize(rec), cache=False)
    keys = index.key_array().tolist()
    with RecordReader(rec) as reader, \
            ShardWriter(stem, max_bytes=shard_size, checksums=checksums,
                        force=force, made_by=made_by) as writer:
        for key, offset in zip(keys, index.offsets.tolist()):
            writer.write(key, reader.read_at(offset))
    return writer.manifest_path


__all__ = ["pack_prefix_to", "find_lists_at"]
