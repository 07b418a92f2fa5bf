"""recio: read, write, split, inspect and pack RecordIO (.rec/.idx/.lst) files without MXNet.

The package is layered; each part imports only the ones listed before it:

* ``recio.errors``, ``recio.optional``: the exceptions and optional dependencies every part
  shares.
* ``recio.records``: the RecordIO container (framing, reader, writer, ``.idx``, InputSplit).
* ``recio.image``: image records as im2rec writes them (IRHeader, codec, lists, packing,
  ImageRecordIter).
* ``recio.sequence``: sample-counted sequences (MinibatchSource, bucketing, CBF).
* ``recio.mx`` (a drop-in for ``mxnet.recordio``) and ``recio.torch`` (PyTorch datasets).
* ``recio.cli``: the ``recio`` and ``im2rec`` commands (``python -m recio``).

The names below load on first use, so ``import recio`` stays cheap and an optional dependency is
only needed by the feature that uses it.
"""
from importlib import import_module as _import_module

from recio.errors import (
    CBFError,
    CTFError,
    ChecksumError,
    DuplicateKeyWarning,
    ImageError,
    IndexFileError,
    IndexMismatchError,
    ListFileError,
    ManifestError,
    NothingFoundError,
    NotRecordFileError,
    OutputExistsError,
    RecordIOError,
    SequenceError,
    StorageError,
    TruncatedFileError,
)

__version__ = "0.1.0"

# public name -> module that defines it (loaded lazily on first attribute access)
_LAZY = {
    "RecordWriter": "recio.records.writer",
    "IndexedRecordWriter": "recio.records.writer",
    "RecordReader": "recio.records.reader",
    "IndexedRecordReader": "recio.records.indexed",
    "build_index": "recio.records.indexed",
    "read_index": "recio.records.index",
    "write_index": "recio.records.index_format",
    "IRHeader": "recio.image.header",
    "pack": "recio.image.header",
    "unpack": "recio.image.header",
    "pack_img": "recio.image.header",
    "unpack_img": "recio.image.header",
    "InputSplit": "recio.records.split",
    "ShardWriter": "recio.records.shards",
    "ShardReader": "recio.records.shards",
    "load_manifest": "recio.records.shards",
    "verify_manifest": "recio.records.shards",
    "combined_index": "recio.records.shards",
    "ShardCache": "recio.records.cache",
    "ThreadedIter": "recio.records.threaded",
    "ImageRecordIter": "recio.image.imageiter",
    "DataBatch": "recio.image.imageiter",
    "SkippedRecordWarning": "recio.image.imageiter",
    "pack_sequence": "recio.sequence",
    "unpack_sequence": "recio.sequence",
    "SequenceWriter": "recio.sequence",
    "Sparse": "recio.sequence",
    "sample_counts": "recio.sequence",
    "MinibatchSource": "recio.sequence.minibatch",
    "SWEEP_FOREVER": "recio.sequence.minibatch",
    "SWEEP_ONCE": "recio.sequence.minibatch",
    "bucket_boundaries": "recio.sequence.bucketing",
    "BucketBatchSampler": "recio.sequence.bucketing",
    "padded_cost": "recio.sequence.bucketing",
    "padding_waste": "recio.sequence.bucketing",
    "CBFReader": "recio.sequence.cbf",
    "CBFWriter": "recio.sequence.cbf",
    "dataset_stats": "recio.image.dataset_stats",
    "DatasetStats": "recio.image.dataset_stats",
    "draw_grid": "recio.image.show",
    "repack": "recio.image.repack",
    "repair": "recio.image.repair",
    "check_outputs": "recio.records.atomic",
}
# subpackages, loaded on first attribute access (``recio.records``, ``recio.mx``, ...)
_SUBPACKAGES = {"records", "image", "sequence", "mx", "torch", "cli", "errors"}

__all__ = ["RecordIOError", "IndexFileError", "IndexMismatchError", "ListFileError", "ImageError",
           "CBFError", "CTFError", "SequenceError", "TruncatedFileError", "NotRecordFileError",
           "OutputExistsError", "NothingFoundError", "ManifestError", "ChecksumError",
           "StorageError", "DuplicateKeyWarning", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:
        return _import_module("recio." + name)
    raise AttributeError(f"module 'recio' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBPACKAGES)
