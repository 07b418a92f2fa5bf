"""Image datasets in records, as MXNet's im2rec and ImageRecordIter made them.

* ``header``    the ``IRHeader`` (flag, label, id, id2) in front of every image record.
* ``codec``     the one image decoder, OpenCV's (with the pixel limit); ``encoding``, the one
                encoder; ``png_srgb``, the one decode rule where OpenCV 5 is not MXNet.
* ``transform`` im2rec's ``ImageOptions``: decode, crop, resize, encode one image.
* ``lists``     ``.lst`` image lists: parse, write; ``list_folder`` builds them from a folder.
* ``packing``   ``pack_list``: a ``.lst`` into ``.rec`` + ``.idx``, resumable, in parallel
                (``pack_worker``, ``pack_executors``, ``pack_output``, ``pack_prefix``).
* ``imageiter`` ``ImageBatchIter``: batches of augmented images; ``RecordBatchIter``, the
                engine under it and under ``recio.mx.io.ImageRecordIter`` (``batch_engine``:
                the decode thread pool, ``DataBatch``; ``batch_augment``: ``Augmenter``, one
                image into one batch slot).
* ``augment``   MXNet's ``DefaultImageAugmenter`` and normalisation, step by step.
* ``cvops``     the OpenCV operations MXNet's augmentation calls (two of them as OpenCV 3.4.2
                computed them, in NumPy).
* ``stats``     what ``recio inspect`` reports: record and image statistics, damage, index check.
* ``undecodable`` the one policy of every image reader for records nothing decodes: skipped,
                named and counted, or raised (``on_undecodable``).
* ``verify``    what ``recio verify`` checks: framing, the ``.idx`` and (optionally) every image.
* ``extract``   images and a ``.lst`` back out of a ``.rec`` (``recio extract``).
* ``id_index``  an ``.idx`` keyed by each record's image id (``recio index --key id``).
"""
from recio.image.header import IRHeader, pack, pack_img, unpack, unpack_img

__all__ = ["IRHeader", "pack", "unpack", "pack_img", "unpack_img"]
