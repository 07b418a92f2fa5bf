"""recio on Ray (``pip install 'recio[ray]'``): distributed packing and RecordIO in Ray Data.

* :class:`RayEngine` runs ``im2rec --num-shards N --engine ray``: one Ray task per shard
  (``recio.image.shard_pack``); :func:`pack` is the same from Python.
* :func:`read_records` / :class:`RecordDatasource` read ``.rec`` files, folders, globs and
  shard-set manifests into a ``ray.data.Dataset``, in parallel by byte ranges of the ``.idx``.
* :class:`RecordDatasink` writes any Dataset with a payload (or image) column as a shard set:
  ``ds.write_datasink(RecordDatasink("out/train"))``.

Importing this package imports Ray (Ray Data only when its names are first used); without Ray
the ImportError says what to install.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Union

from recio.optional import require

require("ray", feature="recio.ray (the Ray engine and Ray Data)")

from recio.image.packing import PackResult  # noqa: E402
from recio.image.shard_pack import ShardPackReport, pack_shards  # noqa: E402
from recio.image.transform import ImageOptions  # noqa: E402
from recio.ray.engine import RayEngine, connect, messages_to_stderr  # noqa: E402

#: names from recio.ray.data, imported on first use (Ray Data and pandas take ~0.5 s to import,
#: which im2rec --engine ray does not need)
_DATA_NAMES = ("read_records", "RecordDatasource", "RecordDatasink")


def __getattr__(name: str) -> Any:
    if name in _DATA_NAMES:
        from recio.ray import data

        return getattr(data, name)
    raise AttributeError(f"module 'recio.ray' has no attribute {name!r}")


def pack(lst_path: Union[str, "os.PathLike[str]"], root: Union[str, "os.PathLike[str]"],
         options: Optional[ImageOptions] = None, *, num_shards: int,
         address: Optional[str] = None, report: Optional[ShardPackReport] = None,
         **pack_options: Any) -> PackResult:
    """Pack ``lst_path`` into a shard set of ``num_shards`` shards on a Ray cluster
    (``address``; see :func:`connect`): what ``im2rec PREFIX ROOT --num-shards N --engine
    ray`` does for one list. ``pack_options`` are ``recio.image.shard_pack.pack_shards``'s."""
    return pack_shards(lst_path, root, options, num_shards=num_shards,
                       engine=RayEngine(address), report=report, **pack_options)


__all__ = ["RayEngine", "connect", "messages_to_stderr", "pack", "read_records",
           "RecordDatasource", "RecordDatasink"]
