"""A drop-in for the data-loading parts of MXNet: change the import, keep the code.

* ``from recio import mx as recordio`` (was ``from mxnet import recordio``): the names of
  ``mxnet.recordio`` are here at the top (``MXRecordIO``, ``MXIndexedRecordIO``, ``IRHeader``,
  ``pack``, ``unpack``, ``pack_img``, ``unpack_img``).
* ``import recio.mx as mx`` (was ``import mxnet as mx``): ``mx.recordio``; ``mx.io``
  (``ImageRecordIter`` with every MXNet parameter and MXNet's batches, ``NDArrayIter``,
  ``DataBatch``, ``DataDesc``, ...); ``mx.image`` (``imdecode``, ``imread``, ``ImageIter``, the
  augmenters); ``mx.gluon.data`` (``ImageRecordDataset``, ``DataLoader``, ...) and
  ``mx.gluon.utils.split_and_load``; ``mx.nd`` (``NDArray`` with ``asnumpy()``, ``array``,
  ``zeros``, ``save``/``load`` of ``.nd`` files); ``mx.cpu()``, ``mx.gpu()``, ``mx.Context``.

Arrays are BGR where MXNet's are (``recordio.unpack_img``, as ``cv2.imdecode``), RGB where
MXNet's are (``image.imdecode``, the iterators), and the pixels are MXNet's exactly (see
``recio.image.pixels.codec`` and ``recio.image.batches.mxnet_augment``). Everything runs on the CPU
with NumPy: there are no networks, symbols, autograd or GPU arrays.
"""
from recio.mx import context, gluon, image, io, ndarray, recordio
from recio.mx import ndarray as nd
from recio.mx.context import Context, cpu, cpu_pinned, current_context, gpu
from recio.mx.recordio import (
    IRHeader,
    MXIndexedRecordIO,
    MXRecordIO,
    pack,
    pack_img,
    unpack,
    unpack_img,
)

#: the MXNet release whose API and behaviour recio.mx follows (code may test mx.__version__)
__version__ = "1.9.1"

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "recordio", "image", "io", "nd", "ndarray", "gluon", "context",
           "Context", "cpu", "gpu", "cpu_pinned", "current_context"]
