"""recio: read, write, split, inspect and pack RecordIO (.rec/.idx/.lst) files without MXNet.

The package is layered; each part imports only the ones listed before it:

* ``recio.errors``, ``recio.optional``: the exceptions and optional dependencies every part
  shares.
* ``recio.records``: the RecordIO container (framing, reader, writer, ``.idx``, InputSplit,
  shard sets).
* ``recio.image``: image records as im2rec writes them (IRHeader, codec, lists, packing,
  ImageBatchIter).
* ``recio.sequence``: sample-counted sequences (MinibatchSource, bucketing, CBF).
* ``recio.mx`` (a drop-in for ``mxnet.recordio``), ``recio.torch`` (PyTorch datasets) and
  ``recio.ray`` (Ray packing and Ray Data).
* ``recio.cli``: the ``recio`` and ``im2rec`` commands (``python -m recio``).

The top level holds what most programs need: readers and writers, the index, ``InputSplit``,
the image header, shard sets, ``ImageBatchIter``, ``MinibatchSource`` and ``RecordIOError``.
Everything else lives in its subpackage (``recio.records.write_index``,
``recio.sequence.SWEEP_FOREVER``, ``recio.errors.TruncatedFileError``). The names load on first
use, so ``import recio`` stays cheap and an optional dependency is only needed by the feature
that uses it.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports
from recio.errors import RecordIOError

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.image.header import IRHeader, pack, pack_img, unpack, unpack_img
    from recio.image.batches.iterators import ImageBatchIter
    from recio.records.index import read_index
    from recio.records.indexed import IndexedRecordReader, build_index
    from recio.records.reader import RecordReader
    from recio.records.manifest import load_manifest
    from recio.records.shards.shard_set import ShardReader, ShardWriter
    from recio.records.split import InputSplit
    from recio.records.writer import IndexedRecordWriter, RecordWriter
    from recio.sequence.minibatch import MinibatchSource

__version__ = "0.1.0"

#: public name -> the module that defines it, imported on first use
_LAZY = {
    "RecordReader": "recio.records.reader",
    "RecordWriter": "recio.records.writer",
    "IndexedRecordReader": "recio.records.indexed",
    "IndexedRecordWriter": "recio.records.writer",
    "build_index": "recio.records.indexed",
    "read_index": "recio.records.index",
    "InputSplit": "recio.records.split",
    "IRHeader": "recio.image.header",
    "pack": "recio.image.header",
    "unpack": "recio.image.header",
    "pack_img": "recio.image.header",
    "unpack_img": "recio.image.header",
    "ShardWriter": "recio.records.shards.shard_set",
    "ShardReader": "recio.records.shards.shard_set",
    "load_manifest": "recio.records.manifest",
    "ImageBatchIter": "recio.image.batches.iterators",
    "MinibatchSource": "recio.sequence.minibatch",
}

__all__ = [*_LAZY, "RecordIOError"]

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=(
        "records", "image", "sequence", "mx", "torch", "ray", "errors"), gone={
        "ImageRecordIter": "MXNet's iterator, whose batches hold NDArrays "
                           "(batch.data[0].asnumpy()), is recio.mx.io.ImageRecordIter; recio's "
                           "own, whose batch.data is a NumPy array, is recio.ImageBatchIter"})
