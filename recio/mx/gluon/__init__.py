"""``recio.mx.gluon``: the data side of ``mxnet.gluon`` that reads ``.rec`` files.

``gluon.data``: ``Dataset`` (``transform``, ``transform_first``, ``take``, ``shard``),
``SimpleDataset``, ``ArrayDataset``, ``RecordFileDataset``, ``DataLoader`` (batching as MXNet's
default ``batchify_fn``, ``last_batch`` ``'keep'``/``'discard'``/``'rollover'``, samplers),
``gluon.data.vision.ImageRecordDataset``; ``gluon.utils.split_data`` / ``split_and_load``.
Networks, losses, trainers and ``gluon.data.vision.transforms`` are not here.
"""
from recio.mx.gluon import data, utils

__all__ = ["data", "utils"]
