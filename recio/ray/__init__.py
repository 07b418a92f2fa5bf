"""recio on Ray (``pip install 'recio[ray]'``): distributed packing and RecordIO in Ray Data.

* :class:`RayEngine` runs ``im2rec --num-shards N --engine ray``: one Ray task per shard
  (``recio.image.packing.shards``); :func:`pack_shards_on_ray` is the same from Python, with the same
  ``PackSettings`` as every other engine.
* :func:`read_records` / :class:`RecordDatasource` read ``.rec`` files, folders, globs and
  shard-set manifests into a ``ray.data.Dataset``, in parallel by byte ranges of the ``.idx``.
* :class:`RecordDatasink` writes any Dataset with a payload (or image) column as a shard set:
  ``ds.write_datasink(RecordDatasink("out/train"))``.

Importing this package imports Ray (the engine and Ray Data only when their names are first
used); without Ray the ImportError says what to install.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports
from recio.optional import require

# the imports below need Ray (so E402): without it, require() says what to install instead
require("ray", feature="recio.ray (the Ray engine and Ray Data)")

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.ray.data import RecordDatasink, RecordDatasource, read_records
    from recio.ray.engine import RayEngine, connect, messages_to_stderr
    from recio.ray.pack import pack_shards_on_ray

#: exported name -> the module that defines it, imported on first use (Ray Data and pandas take
#: ~0.5 s to import, which im2rec --engine ray does not need)
_LAZY = {
    "RayEngine": "recio.ray.engine",
    "connect": "recio.ray.engine",
    "messages_to_stderr": "recio.ray.engine",
    "pack_shards_on_ray": "recio.ray.pack",
    "read_records": "recio.ray.data",
    "RecordDatasource": "recio.ray.data",
    "RecordDatasink": "recio.ray.data",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=("data",))
