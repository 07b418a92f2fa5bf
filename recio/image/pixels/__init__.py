"""Pixels: one image's bytes decoded, transformed and encoded; the ground floor of ``recio.image``.

* ``codec``      the one image decoder, OpenCV's (with the pixel limit).
* ``encoding``   the one encoder.
* ``png_srgb``   the one decode rule where OpenCV 5 is not MXNet.
* ``transform``  im2rec's ``ImageOptions``: decode, crop, resize, encode one image.
* ``cvops``      the OpenCV operations MXNet's augmentation calls (two of them as OpenCV 3.4.2
                 computed them, in NumPy).
"""
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.image.pixels.codec import decode
    from recio.image.pixels.encoding import encode
    from recio.image.pixels.transform import ImageOptions

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "decode": "recio.image.pixels.codec",
    "encode": "recio.image.pixels.encoding",
    "ImageOptions": "recio.image.pixels.transform",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)
