"""recio: read, write, split, inspect and pack RecordIO (.rec/.idx/.lst) files without MXNet.

The core (framing, reader, writer, index, image headers) is imported eagerly; heavier parts
(image iterators, sequence tools, CBF, PyTorch) load on first use, so ``import recio`` stays
cheap and an optional dependency is only needed by the feature that uses it.
"""
from importlib import import_module as _import_module

from .errors import (CBFError, ImageError, IndexFileError, ListFileError, RecordIOError,
                     SequenceError)

__version__ = "0.1.0"

# public name -> module that defines it (loaded lazily on first attribute access)
_LAZY = {
    "RecordWriter": "recio.writer",
    "IndexedRecordWriter": "recio.writer",
    "RecordReader": "recio.reader",
    "IndexedRecordReader": "recio.indexed",
    "build_index": "recio.index",
    "read_index": "recio.index",
    "write_index": "recio.index",
    "IRHeader": "recio.header",
    "pack": "recio.header",
    "unpack": "recio.header",
    "pack_img": "recio.header",
    "unpack_img": "recio.header",
    "InputSplit": "recio.split",
    "ThreadedIter": "recio.threaded",
    "ImageRecordIter": "recio.imageiter",
    "DataBatch": "recio.imageiter",
    "SkippedRecordWarning": "recio.imageiter",
    "pack_sequence": "recio.sequence",
    "unpack_sequence": "recio.sequence",
    "SequenceWriter": "recio.sequence",
    "Sparse": "recio.sequence",
    "sample_counts": "recio.sequence",
    "MinibatchSource": "recio.minibatch",
    "FULL_DATA_SWEEP": "recio.minibatch",
    "INFINITELY_REPEAT": "recio.minibatch",
    "bucket_boundaries": "recio.bucketing",
    "BucketBatchSampler": "recio.bucketing",
    "padded_cost": "recio.bucketing",
    "padding_waste": "recio.bucketing",
    "CBFReader": "recio.cbf",
    "CBFWriter": "recio.cbf",
}
_SUBMODULES = {"mx", "cbf", "torch", "framing", "lists", "packing", "sequence", "minibatch",
               "stats", "convert", "imageproc", "bucketing", "split", "imageiter", "threaded",
               "atomic", "torch_minibatch", "indexed", "index", "reader", "writer", "errors"}

__all__ = ["RecordIOError", "IndexFileError", "ListFileError", "ImageError", "CBFError",
           "SequenceError", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return _import_module("recio." + name)
    raise AttributeError(f"module 'recio' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)
