"""``recio.mx.io``: ``mx.io.ImageRecordIter`` and its ``DataBatch``, with MXNet's parameter names
(recio's own implementation: ``recio.image.imageiter``)."""
from recio.image.imageiter import DataBatch, ImageRecordIter

__all__ = ["ImageRecordIter", "DataBatch"]
