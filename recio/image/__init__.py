"""Image datasets in records, as MXNet's im2rec and ImageRecordIter made them.

The rooms, by job, from the ground floor up (each imports only the ones before it; ``packing``
and ``batches`` do not import each other):

* ``pixels``    one image's bytes: the decoder (``codec``), the encoder (``encoding``), im2rec's
                ``ImageOptions`` (``transform``), MXNet's OpenCV operations (``cvops``).
* here          what every image record and list shares:

  * ``header``      the ``IRHeader`` (flag, label, id, id2) in front of every image record.
  * ``lists``       ``.lst`` image lists: parse, write; ``list_folder`` builds them from a folder.
  * ``undecodable`` the one policy of every image reader for records nothing decodes: skipped,
                    named and counted, or raised (``on_undecodable``).

* ``packing``   a ``.lst`` into ``.rec`` + ``.idx`` (im2rec's pack step): resumable, in
                parallel, in parts, on Ray (``pack_list``, ``pack_shards``).
* ``batches``   training batches: ``ImageBatchIter``, its engine and augmenters, and MXNet's
                augmentation under ``recio.mx.io.ImageRecordIter``.
* ``tools``     what the commands do to a ``.rec`` of images: ``inspect`` (``stats``),
                ``verify``, ``repair``, ``repack``, ``extract``, ``show``, ``index --key id``.
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.image.header import IRHeader, pack, pack_img, unpack, unpack_img

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "IRHeader": "recio.image.header",
    "pack": "recio.image.header",
    "unpack": "recio.image.header",
    "pack_img": "recio.image.header",
    "unpack_img": "recio.image.header",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=(
        "header", "pixels", "packing", "batches", "tools"))
