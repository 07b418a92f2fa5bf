"""What ``im2rec PREFIX ROOT`` packs for each list: a plain pack, or a pack in parts.

``pack_prefix_to`` packs each list im2rec finds for PREFIX. A local PREFIX and ROOT without
shards or an engine is ``pack_prefix.pack_prefix`` itself: ``pack_list`` writes ``PREFIX.rec``
beside the list, resumable from its journal. Every other pack is a pack in parts
(``recio.image.packing.shards.pack_shards``): a shard set by ``num_shards`` (one shard per part)
or by ``shard_size``, or one ``.rec``/``.idx`` joined from the parts (a URL PREFIX or ROOT,
an engine), each part packed by one task on ``engine`` (this process by default, or
``recio.ray.RayEngine``) into a staging folder beside the outputs (in the bucket for a URL),
where a resume finds it. Either way nothing under the final names looks complete before the
end: an object store shows an object only once its upload completed, and a shard set without
its manifest is unfinished.

A plain pack whose list has an interrupted pack in parts (begun with ``--engine ray``, say)
continues that one when asked to ``resume``.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from recio import storage
from recio.image.packing.prefix import PrefixLists, pack_prefix, prefix_lists
from recio.image.packing.progress import PackProgress, staging_folder
from recio.image.packing.pipeline import PackResult, ProgressCallback, pack_list
from recio.image.packing.parts import FAULT_VARIABLE, Engine, Fault
from recio.image.packing.shards import pack_shards
from recio.image.pixels.transform import ImageOptions

PathLike = Union[str, "os.PathLike[str]"]


def _find_lists_at(prefix: str) -> List[str]:
    """The ``.lst`` files im2rec packs for a URL ``prefix`` (``pack_prefix.find_lists``' rule:
    in its folder, starting with ``prefix``), sorted."""
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
    ``pack_options`` are ``pack_list``'s keywords (``resume`` and ``force`` included);
    ``on_lists`` as ``pack_prefix``'s (the lists found, called before anything is packed).
    ``engine`` runs the parts of a pack in parts (``recio.image.packing.shards``; default: this
    process)."""
    given = storage.local_path(prefix)  # messages name it as the caller wrote it
    prefix = storage.absolute(prefix)
    if num_shards is not None and num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    if shard_size is not None and shard_size < 1:
        raise ValueError(f"shard_size must be at least 1 byte, got {shard_size}")
    fault = Fault.parse(os.environ.get(FAULT_VARIABLE))
    in_parts: Dict[str, Any] = {"num_shards": num_shards, "shard_size": shard_size,
                                "checksums": checksums, "engine": engine, "fault": fault}
    plain = num_shards is None and shard_size is None and engine is None \
        and not storage.is_url(root) and not storage.is_url(prefix)
    if plain:
        def pack_one(lst: str, lst_root: PathLike, lst_options: Optional[ImageOptions],
                     **keywords: Any) -> PackResult:
            if keywords.get("resume") and \
                    PackProgress(staging_folder(os.path.splitext(lst)[0])).job() is not None:
                return pack_shards(lst, lst_root, lst_options, **in_parts,
                                   **keywords)  # begun in parts
            return pack_list(lst, lst_root, lst_options, **keywords)
        yield from pack_prefix(given, root, options, progress_for=progress_for,
                               on_lists=on_lists, pack_one=pack_one, **pack_options)
        return
    found = prefix_lists(given, root, _find_lists_at(prefix) if storage.is_url(prefix) else None)
    if on_lists is not None:
        on_lists(found)
    for lst in found.lists:
        progress = progress_for(lst) if progress_for is not None else None
        yield pack_shards(lst, root, options, progress=progress, **in_parts, **pack_options)
