"""The record core: the RecordIO container, with nothing about what the records hold.

Reading from the bottom up:

* ``framing``  the part header (magic, length, cflag) and padding: the one framing check.
* ``atomic``   how every output appears complete or not at all (temporary name, then rename).
* ``index``    the ``.idx`` text format, the ``.idx`` beside a ``.rec``, the parsed ``Index``.
* ``byte_sources`` where a reader's bytes come from: a map, ``pread``, a remote object, a stream.
* ``walker``   the record walker over any source: checked or trusting, resynchronising.
* ``reader``   ``RecordReader``: sequential and by-offset reads of whole records.
* ``writer``   ``RecordWriter`` / ``IndexedRecordWriter``.
* ``indexed``  ``IndexedRecordReader`` and the load-the-index-or-scan decision.
* ``reindex``  rebuild an ``.idx`` by scanning the ``.rec`` (MXNet's ``rec2idx``).
* ``split``    ``InputSplit``: record boundaries for N partitions of one or more files.
* ``cache``    ``ShardCache``: checked local copies of remote objects, bounded, shared by
               the processes of a node (readers' ``cache_dir=``).
* ``shards``   shard sets: ``ShardWriter``, the manifest (written last), checksums, the
               combined ``.idx`` for DALI.
* ``reshard``  write the parts of a split as files of their own (``recio split --write``).
* ``threaded`` ``ThreadedIter``: a bounded background prefetch for any iterator.
"""
from __future__ import annotations

import importlib
from typing import Any

#: exported name -> the module that defines it, imported on first use (``import recio.records``
#: stays cheap for tools that need one module, such as im2rec)
_LAZY = {
    "RecordReader": "reader", "RecordWriter": "writer", "IndexedRecordWriter": "writer",
    "IndexedRecordReader": "indexed", "Index": "index", "open_index": "index",
    "read_index": "index", "write_index": "index", "sibling_index_path": "index",
    "InputSplit": "split", "ThreadedIter": "threaded", "ShardWriter": "shards",
    "ShardReader": "shards", "load_manifest": "shards", "verify_manifest": "shards",
    "combined_index": "shards", "ShardCache": "cache",
}

__all__ = ["RecordReader", "RecordWriter", "IndexedRecordWriter", "IndexedRecordReader", "Index",
           "open_index", "read_index", "write_index", "sibling_index_path", "InputSplit",
           "ThreadedIter", "ShardWriter", "ShardReader", "load_manifest", "verify_manifest",
           "combined_index", "ShardCache"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recio.records' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"recio.records.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
