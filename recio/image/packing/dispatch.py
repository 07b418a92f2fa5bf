"""What ``im2rec PREFIX ROOT`` packs for each list: a plain pack, or a pack in parts.

``pack_prefix_to`` packs each list im2rec finds for PREFIX (``pack_prefix.prefix_lists``) with
one ``PackSettings``. A local PREFIX and ROOT without shards or an engine is a plain pack:
``pack_list`` writes ``PREFIX.rec`` beside the list, resumable from its journal. Every other
pack is a pack in parts (``recio.image.packing.shards.pack_shards``): a shard set by
``num_shards`` (one shard per part) or by ``shard_size``, or one ``.rec``/``.idx`` joined from
the parts (a URL PREFIX or ROOT, an engine), each part packed by one task on ``engine`` (this
process by default, or ``recio.ray.RayEngine``) into a staging folder beside the outputs (in
the bucket for a URL), where a resume finds it. Either way nothing under the final names looks complete before the
end: an object store shows an object only once its upload completed, and a shard set without
its manifest is unfinished.

A plain pack whose list has an interrupted pack in parts (begun with ``--engine ray``, say)
continues that one when asked to ``resume``.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator, List, Optional, Union

from recio import storage
from recio.image.packing.parts import FAULT_VARIABLE, Engine, Fault
from recio.image.packing.paths import PackPaths
from recio.image.packing.prefix import PrefixLists, prefix_lists
from recio.image.packing.progress import PackProgress
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import PackResult, ProgressCallback, pack_list
from recio.image.packing.shards import pack_shards

PathLike = Union[str, "os.PathLike[str]"]


def _find_lists_at(prefix: str) -> List[str]:
    """The ``.lst`` files im2rec packs for a URL ``prefix`` (``pack_prefix.find_lists``' rule:
    in its folder, starting with ``prefix``), sorted."""
    folder = prefix.rstrip("/") if prefix.endswith("/") else storage.dirname(prefix)
    if not storage.isdir(folder):
        return []
    return [p for p in storage.listdir(folder) if p.startswith(prefix) and p.endswith(".lst")]


def pack_prefix_to(prefix: PathLike, root: PathLike, settings: Optional[PackSettings] = None, *,
                   engine: Optional[Engine] = None,
                   progress_for: Optional[Callable[[str], Optional[ProgressCallback]]] = None,
                   on_lists: Optional[Callable[[PrefixLists], None]] = None
                   ) -> Iterator[PackResult]:
    """What ``im2rec PREFIX ROOT`` does, for a local or URL PREFIX: packs every list it names
    as ``settings`` say (shards included) and yields each list's ``PackResult`` (for a shard
    set, ``rec_path`` is the manifest and ``idx_path`` None). ``on_lists(found)`` is called
    once, before anything is packed, with the lists found (``pack_prefix.prefix_lists``);
    ``progress_for(lst_path)`` gives one list's progress callback (or None). ``engine`` runs
    the parts of a pack in parts (``recio.image.packing.shards``; default: this process)."""
    settings = settings or PackSettings()
    given = storage.local_path(prefix)  # messages name it as the caller wrote it
    prefix = storage.absolute(prefix)
    fault = Fault.parse(os.environ.get(FAULT_VARIABLE))
    plain = not settings.sharded and engine is None \
        and not storage.is_url(root) and not storage.is_url(prefix)
    found = prefix_lists(given, root, _find_lists_at(prefix) if storage.is_url(prefix) else None)
    if on_lists is not None:
        on_lists(found)
    for lst in found.lists:
        progress = progress_for(lst) if progress_for is not None else None
        if plain and not (settings.resume and  # a plain pack begun in parts goes on in parts
                          PackProgress(PackPaths.of(lst).staging).job() is not None):
            yield pack_list(lst, root, settings, progress=progress)
        else:
            yield pack_shards(lst, root, settings, engine=engine, progress=progress,
                              fault=fault)


