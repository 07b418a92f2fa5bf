"""A drop-in for the record-reading parts of MXNet: change the import, keep the code.

* ``from recio import mx as recordio`` (was ``from mxnet import recordio``): the names of
  ``mxnet.recordio`` are here at the top (``MXRecordIO``, ``MXIndexedRecordIO``, ``IRHeader``,
  ``pack``, ``unpack``, ``pack_img``, ``unpack_img``).
* ``import recio.mx as mx`` (was ``import mxnet as mx``): ``mx.recordio`` (those names),
  ``mx.image.imdecode``/``imread`` (MXNet's pixels, an array with ``asnumpy()``) and
  ``mx.io.ImageRecordIter``, the parts that code reading ``.rec`` datasets reaches for (such as
  InsightFace's arcface_torch ``MXFaceDataset``).

Arrays are BGR where MXNet's are (``recordio.unpack_img``, as ``cv2.imdecode``), RGB where
MXNet's are (``image.imdecode``), and the pixels are MXNet's exactly (see
``recio.image.codec``).
"""
from recio.mx import image, io, recordio
from recio.mx.recordio import (
    IRHeader,
    MXIndexedRecordIO,
    MXRecordIO,
    pack,
    pack_img,
    unpack,
    unpack_img,
)

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "recordio", "image", "io"]
