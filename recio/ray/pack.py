"""A shard set packed on a Ray cluster from Python: what ``im2rec --engine ray`` runs."""
from __future__ import annotations

import os
from typing import Any, Optional, Union

from recio.image.packing.pipeline import PackResult
from recio.image.packing.shards import ShardPackReport, pack_shards
from recio.image.pixels.transform import ImageOptions
from recio.ray.engine import RayEngine


def pack_shards_on_ray(lst_path: Union[str, "os.PathLike[str]"],
                       root: Union[str, "os.PathLike[str]"],
                       options: Optional[ImageOptions] = None, *, num_shards: int,
                       address: Optional[str] = None, report: Optional[ShardPackReport] = None,
                       **pack_options: Any) -> PackResult:
    """Pack ``lst_path`` into a shard set of ``num_shards`` shards on a Ray cluster
    (``address``; see :func:`~recio.ray.engine.connect`): what ``im2rec PREFIX ROOT
    --num-shards N --engine ray`` does for one list. ``pack_options`` are
    ``recio.image.packing.shards.pack_shards``'s."""
    return pack_shards(lst_path, root, options, num_shards=num_shards,
                       engine=RayEngine(address), report=report, **pack_options)
