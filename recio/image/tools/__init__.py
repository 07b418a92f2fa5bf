"""Tools: what the ``recio`` commands do to a ``.rec`` of images, on top of the rest of
``recio.image``.

* ``stats``      what ``recio inspect`` reports: record and image statistics, damage, index check;
                 ``dataset_stats`` the labels and image sizes of a dataset (``plot`` draws them).
* ``verify``     what ``recio verify`` checks: framing, the ``.idx`` and (optionally) every image.
* ``repair``     a damaged ``.rec`` rewritten from what can be read (``recio repair``);
                 ``repack`` one ``.rec`` copied into a new one (``recio repack``).
* ``extract``    images and a ``.lst`` back out of a ``.rec`` (``recio extract``).
* ``show``       a grid of a file's images (``recio show``).
* ``id_index``   an ``.idx`` keyed by each record's image id (``recio index --key id``).
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.image.tools.extract import extract_images
    from recio.image.tools.stats import scan_file
    from recio.image.tools.verify import verify_file

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "scan_file": "recio.image.tools.stats",
    "verify_file": "recio.image.tools.verify",
    "extract_images": "recio.image.tools.extract",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
