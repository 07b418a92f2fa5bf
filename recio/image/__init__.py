"""Image datasets in records, as MXNet's im2rec and ImageRecordIter made them.

* ``header``    the ``IRHeader`` (flag, label, id, id2) in front of every image record.
* ``codec``     the one image codec: decode (with the pixel limit) and encode, resize, crop.
* ``lists``     ``.lst`` image lists: parse, write, build from a folder.
* ``packing``   ``pack_list``: a ``.lst`` into ``.rec`` + ``.idx``, resumable, in parallel.
* ``imageiter`` ``ImageRecordIter``: MXNet's batch iterator with its augmentations.
"""
from recio.image.header import IRHeader, pack, pack_img, unpack, unpack_img

__all__ = ["IRHeader", "pack", "unpack", "pack_img", "unpack_img"]
