"""The record core: the RecordIO container, with nothing about what the records hold.

Reading from the bottom up:

* ``framing``  the part header (magic, length, cflag) and padding: the one framing check.
* ``atomic``   how every output appears complete or not at all (temporary name, then rename).
* ``index_format``  the ``.idx`` text format (parse, write) and the ``.idx`` beside a ``.rec``.
* ``index_cache``   the binary sidecar cache of an ``.idx``, memory-mapped on later opens.
* ``index``    the parsed ``Index``, its lookups and MXNet views, ``open_index``.
* ``byte_sources`` where a reader's bytes come from: a map, ``pread``, a remote object, a stream.
* ``walker``   the record walker over any source: checked or trusting, resynchronising.
* ``reader``   ``RecordReader``: sequential and by-offset reads of whole records.
* ``writer``   ``RecordWriter`` / ``IndexedRecordWriter``.
* ``indexed``  ``IndexedRecordReader``, ``build_index`` and the load-the-index-or-scan decision.
* ``reindex``  rebuild an ``.idx`` by scanning the ``.rec`` (MXNet's ``rec2idx``).
* ``split``    ``InputSplit``: record boundaries for N partitions of one or more files.
* ``threaded`` ``ThreadedIter``: a bounded background prefetch for any iterator.
* ``closed``   what a closed reader, writer, split or dataset is: every use raises
               ``ClosedError`` naming its file.
* ``manifest`` a shard set's manifest (written last), its files' names, the checksums: the
               format a reader opens a set by.

Two rooms of their own sit beside the core, one floor each:

* ``cache``    (below the core, which reads through it) ``ShardCache``: checked local copies of
               remote objects, bounded, shared by the processes of a node (readers'
               ``cache_dir=``), with its folder and background downloads.
* ``shards``   (above the core) shard sets: ``ShardWriter`` and ``ShardReader``, checking a set
               against its manifest, publishing staged shards, writing a split's parts as files.
"""
from __future__ import annotations

import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.records.cache.shard_cache import ShardCache
    from recio.records.index import Index, open_index, read_index
    from recio.records.index_format import sibling_index_path, write_index
    from recio.records.indexed import IndexedRecordReader, build_index
    from recio.records.reader import RecordReader
    from recio.records.manifest import load_manifest
    from recio.records.shards.commit import combined_index
    from recio.records.shards.verify import verify_manifest
    from recio.records.shards.shard_set import ShardReader, ShardWriter
    from recio.records.split import InputSplit
    from recio.records.threaded import ThreadedIter
    from recio.records.writer import IndexedRecordWriter, RecordWriter

#: exported name -> the module that defines it, imported on first use (``import recio.records``
#: stays cheap for tools that need one module, such as im2rec)
_LAZY = {
    "RecordReader": "recio.records.reader",
    "RecordWriter": "recio.records.writer",
    "IndexedRecordWriter": "recio.records.writer",
    "IndexedRecordReader": "recio.records.indexed",
    "build_index": "recio.records.indexed",
    "Index": "recio.records.index",
    "open_index": "recio.records.index",
    "read_index": "recio.records.index",
    "write_index": "recio.records.index_format",
    "sibling_index_path": "recio.records.index_format",
    "InputSplit": "recio.records.split",
    "ThreadedIter": "recio.records.threaded",
    "ShardWriter": "recio.records.shards.shard_set",
    "ShardReader": "recio.records.shards.shard_set",
    "load_manifest": "recio.records.manifest",
    "verify_manifest": "recio.records.shards.verify",
    "combined_index": "recio.records.shards.commit",
    "ShardCache": "recio.records.cache.shard_cache",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
