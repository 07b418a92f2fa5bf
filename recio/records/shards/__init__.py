"""Shard sets: many ``.rec``/``.idx`` pairs named by one manifest, on top of the record core.

The manifest's format is the core's (``recio.records.manifest``: a reader opens a set by its
manifest); writing, checking and publishing sets is here.

* ``shard_set``  ``ShardWriter`` and ``ShardReader``: writing and reading shard sets.
* ``verify``     checking a set against its manifest (``recio verify``).
* ``commit``     publishing staged shards as a set; the combined ``.idx`` for DALI.
* ``reshard``    write the parts of a split as files of their own (``recio split --write``).
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.records.shards.commit import combined_index
    from recio.records.shards.shard_set import ShardReader, ShardWriter
    from recio.records.shards.verify import verify_manifest

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "ShardWriter": "recio.records.shards.shard_set",
    "ShardReader": "recio.records.shards.shard_set",
    "verify_manifest": "recio.records.shards.verify",
    "combined_index": "recio.records.shards.commit",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
