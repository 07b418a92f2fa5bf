"""Batches: image records decoded and augmented into training batches.

* ``iterators``  ``ImageBatchIter``: batches of augmented images; ``RecordBatchIter``, the
                 iterator under it and under ``recio.mx.io.ImageRecordIter``.
* ``engine``     ``BatchEngine``: the decode thread pool filling batch arrays; ``DataBatch``.
* ``augmenter``  ``Augmenter``: one image record into one batch slot (``ImageBatchIter``'s
                 augmentation, reused by ``recio.torch.ImageAugment``).
* ``mxnet_augment``  MXNet's ``DefaultImageAugmenter`` and normalisation, step by step (what
                 ``recio.mx.io.ImageRecordIter`` runs).
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.image.batches.augmenter import Augmenter
    from recio.image.batches.engine import DataBatch
    from recio.image.batches.iterators import ImageBatchIter, RecordBatchIter

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "ImageBatchIter": "recio.image.batches.iterators",
    "RecordBatchIter": "recio.image.batches.iterators",
    "DataBatch": "recio.image.batches.engine",
    "Augmenter": "recio.image.batches.augmenter",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
