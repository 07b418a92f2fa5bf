"""recio on Ray (``pip install 'recio[ray]'``): distributed packing and RecordIO in Ray Data.

* :class:`RayEngine` runs ``im2rec --num-shards N --engine ray``: one Ray task per shard
  (``recio.image.shard_pack``); :func:`pack_list` is the same from Python.
* :func:`read_records` / :class:`RecordDatasource` read ``.rec`` files, folders, globs and
  shard-set manifests into a ``ray.data.Dataset``, in parallel by byte ranges of the ``.idx``.
* :class:`RecordDatasink` writes any Dataset with a payload (or image) column as a shard set:
  ``ds.write_datasink(RecordDatasink("out/train"))``.

Importing this package imports Ray (Ray Data only when its names are first used); without Ray
the ImportError says what to install.
"""
from __future__ import annotations

import os
import typing as _typing
from typing import Any, Optional, Union

from recio._lazy import lazy_exports as _lazy_exports
from recio.optional import require

# the imports below need Ray (so E402): without it, require() says what to install instead
require("ray", feature="recio.ray (the Ray engine and Ray Data)")

from recio.image.packing import PackResult  # noqa: E402
from recio.image.shard_pack import ShardPackReport, pack_shards  # noqa: E402
from recio.image.transform import ImageOptions  # noqa: E402
from recio.ray.engine import RayEngine, connect, messages_to_stderr  # noqa: E402

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/test_lazy.py)
    from recio.ray.data import RecordDatasink, RecordDatasource, read_records

#: names from recio.ray.data, imported on first use (Ray Data and pandas take ~0.5 s to import,
#: which im2rec --engine ray does not need)
_LAZY = {
    "read_records": "recio.ray.data",
    "RecordDatasource": "recio.ray.data",
    "RecordDatasink": "recio.ray.data",
}

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=("data",))


def pack_list(lst_path: Union[str, "os.PathLike[str]"], root: Union[str, "os.PathLike[str]"],
              options: Optional[ImageOptions] = None, *, num_shards: int,
              address: Optional[str] = None, report: Optional[ShardPackReport] = None,
              **pack_options: Any) -> PackResult:
    """Pack ``lst_path`` into a shard set of ``num_shards`` shards on a Ray cluster
    (``address``; see :func:`connect`): what ``im2rec PREFIX ROOT --num-shards N --engine
    ray`` does for one list. ``pack_options`` are ``recio.image.shard_pack.pack_shards``'s."""
    return pack_shards(lst_path, root, options, num_shards=num_shards,
                       engine=RayEngine(address), report=report, **pack_options)


__all__ = ["RayEngine", "connect", "messages_to_stderr", "pack_list", *_LAZY]
