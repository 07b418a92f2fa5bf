"""Publishing a shard set's files: the combined ``.idx`` for DALI, and shards written elsewhere.

``combined_index`` writes one ``.idx`` whose offsets run across the shards in manifest order
(shard k's offsets shifted by the sizes of shards 0..k-1): the layout DALI's
``readers.mxnet(path=[shard0.rec, shard1.rec, ...], index_path=[all.idx])`` expects.
``commit_staged`` turns shards written by parallel tasks into a set (renamed into place, the
combined index, the manifest last): what sharded packing on processes or Ray ends with.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Sequence, Tuple, Union

from recio import portable, storage
from recio.errors import ManifestError
from recio.records.atomic import atomic_open, check_outputs, drop_aside, set_aside
from recio.records.diagnose import open_checked_index
from recio.records.index_format import iter_index_lines
from recio.records.manifest import (
    CHECKSUM,
    RECORD_CHECKSUM_SUFFIX,
    Manifest,
    Shard,
    existing_shard_files,
    file_crc32,
    load_manifest,
    manifest_path,
    shard_stem,
)
from recio.storage import PathLike, StorageOptions

#: shards moved into place at once in a bucket (each move is a copy on the server)
_COMMIT_THREADS = 16


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
            *existing_shard_files(prefix, storage_options)]


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
    stale = existing_shard_files(prefix, storage_options) if force else []
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
