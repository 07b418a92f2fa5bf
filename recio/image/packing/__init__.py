"""Packing: a ``.lst`` image list into records (im2rec's pack step), on every engine.

What a pack is asked to do is one ``PackSettings`` (``settings``: im2rec's options, checked
once when made) and where it writes one ``PackPaths`` (``paths``: every file worked out once
from the list's path); both are passed whole from the command down:

* ``dispatch``   what ``im2rec PREFIX ROOT`` packs for each list: a plain pack or a pack in parts.
* ``prefix``     which lists a PREFIX names, packed one by one.
* ``shards``     ``pack_shards``: a list packed in parts (shard sets, ``--engine ray``, URLs).
* ``parts``      one part of such a pack: its task, its result, the engines that run tasks.
* ``progress``   where a pack in parts keeps its progress (its staging folder), for ``resume``.
* ``pipeline``   ``pack_list``: one list into ``.rec`` + ``.idx``, in list order, resumable.
* ``executors``  the worker threads or processes of a pack.
* ``output``     the files one pack writes (``.rec.partial``, the journal), and its resume.
* ``worker``     one list item: read, decode, resize, encode into a record.
* ``resume_settings``  what a resumed pack must find unchanged.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.image.packing.dispatch import pack_prefix_to
    from recio.image.packing.paths import PackPaths
    from recio.image.packing.pipeline import PackResult, pack_list
    from recio.image.packing.settings import PackSettings
    from recio.image.packing.shards import ShardPackReport, pack_shards

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "PackSettings": "recio.image.packing.settings",
    "PackPaths": "recio.image.packing.paths",
    "pack_list": "recio.image.packing.pipeline",
    "PackResult": "recio.image.packing.pipeline",
    "pack_shards": "recio.image.packing.shards",
    "ShardPackReport": "recio.image.packing.shards",
    "pack_prefix_to": "recio.image.packing.dispatch",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
