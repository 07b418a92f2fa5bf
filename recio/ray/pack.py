"""A shard set packed on a Ray cluster from Python: what ``im2rec --engine ray`` runs."""
from __future__ import annotations

import os
from typing import Optional, Union

from recio.image.packing.parts import Fault
from recio.image.packing.pipeline import PackResult
from recio.image.packing.settings import PackSettings
from recio.image.packing.shards import ShardPackReport, pack_shards
from recio.ray.engine import RayEngine


def pack_shards_on_ray(lst_path: Union[str, "os.PathLike[str]"],
                       root: Union[str, "os.PathLike[str]"], settings: PackSettings, *,
                       address: Optional[str] = None, report: Optional[ShardPackReport] = None,
                       fault: Optional[Fault] = None) -> PackResult:
    """Pack ``lst_path`` into a shard set on a Ray cluster (``address``; see
    :func:`~recio.ray.engine.connect`) as ``settings`` say: with ``num_shards``, one Ray task
    per shard, what ``im2rec PREFIX ROOT --num-shards N --engine ray`` does for one list
    (``shard_size``, or neither: parts cut as ``recio.image.packing.shards.pack_shards`` does).
    ``report`` collects each part's timing; ``fault`` injects a failure into one part, to test
    retries."""
    return pack_shards(lst_path, root, settings, engine=RayEngine(address), report=report,
                       fault=fault)
