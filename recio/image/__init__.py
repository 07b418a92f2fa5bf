"""Image datasets in records, as MXNet's im2rec and ImageRecordIter made them.

* ``header``    the ``IRHeader`` (flag, label, id, id2) in front of every image record.
* ``codec``     the one image decoder (with the pixel limit); ``encoding``, the one encoder.
* ``transform`` im2rec's ``ImageOptions``: decode, crop, resize, encode one image.
* ``lists``     ``.lst`` image lists: parse, write; ``list_folder`` builds them from a folder.
* ``packing``   ``pack_list``: a ``.lst`` into ``.rec`` + ``.idx``, resumable, in parallel
                (``pack_worker``, ``pack_executors``, ``pack_output``, ``pack_prefix``).
* ``imageiter`` ``ImageBatchIter``: batches of augmented images; ``RecordBatchIter``, the
                engine under it and under ``recio.mx.io.ImageRecordIter`` (``batch_engine``:
                the decode thread pool, ``DataBatch``; ``batch_augment``: ``Augmenter``, one
                image into one batch slot).
* ``augment``   MXNet's ``DefaultImageAugmenter`` and normalisation, step by step.
* ``cvops``     the OpenCV operations MXNet's augmentation calls, in NumPy, byte for byte.
* ``stats``     what ``recio inspect`` reports: record and image statistics, damage, index check.
* ``verify``    what ``recio verify`` checks: framing, the ``.idx`` and (optionally) every image.
* ``extract``   images and a ``.lst`` back out of a ``.rec`` (``recio extract``).
* ``id_index``  an ``.idx`` keyed by each record's image id (``recio index --key id``).
* ``png16``     16-bit PNG samples, which Pillow reduces to 8 bits.
"""
from recio.image.header import IRHeader, pack, pack_img, unpack, unpack_img

__all__ = ["IRHeader", "pack", "unpack", "pack_img", "unpack_img"]
