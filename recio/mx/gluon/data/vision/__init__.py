"""``gluon.data.vision``: ``ImageRecordDataset`` (also as ``vision.datasets``)."""
from recio.mx.gluon.data.vision import datasets
from recio.mx.gluon.data.vision.datasets import ImageRecordDataset

__all__ = ["ImageRecordDataset", "datasets"]
