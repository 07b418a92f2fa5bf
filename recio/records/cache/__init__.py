"""The shard cache: checked local copies of remote objects, bounded, shared by the processes of a
node (readers' ``cache_dir=``). A floor under the record core, which reads through it; it knows
nothing of records.

* ``shard_cache``  ``ShardCache``: what a reader asks for (a local copy of a URL), checked
                   against the size and checksum it expects.
* ``folder``       a cache folder's files, locks and eviction.
* ``prefetch``     background downloads ahead of a reader.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.records.cache.shard_cache import ShardCache

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "ShardCache": "recio.records.cache.shard_cache",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
