"""The image functions of ``mx.image``: decoding (``imdecode``, ``imread``), resizing and cropping
(``imresize``, ``resize_short``, ``fixed_crop``, ``center_crop``, ``random_crop``,
``random_size_crop``, ``scale_down``), ``color_normalize`` and ``copyMakeBorder``, with MXNet's
pixels and MXNet's random draws.

User code reaches them as ``mx.image.imdecode`` etc. (``recio.mx.image`` imports them); they live
here because the augmenters (``recio.mx.image_aug``) and ``ImageIter`` both build on them.
"""
from __future__ import annotations

import os
import random
import warnings
from numbers import Number
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from recio.image.pixels import cvops
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS, decode
from recio.mx.ndarray import NDArray

ImageSource = Union[bytes, bytearray, memoryview, np.ndarray, NDArray]


def imdecode(buf: ImageSource, flag: int = 1, to_rgb: int = 1,
             out: Optional[Union[NDArray, np.ndarray]] = None) -> NDArray:
    """Decode an image to an ``(H, W, 3)`` (``flag=1``) or ``(H, W, 1)`` (``flag=0``) uint8
    :class:`NDArray`, RGB unless ``to_rgb=0`` (BGR), with MXNet's pixels.

    ``out``: an array of the right shape to decode into (returned). Undecodable bytes, or an
    image declaring more than ``recio.image.pixels.codec.DEFAULT_MAX_PIXELS`` pixels, raise
    :class:`~recio.errors.ImageError` (MXNet raises ``MXNetError``).
    """
    if isinstance(buf, NDArray):
        buf = buf.asnumpy()
    if not isinstance(buf, (bytes, bytearray, memoryview, np.ndarray)):
        raise ValueError("buf must be of type bytes, bytearray or numpy.ndarray,"
                         "if you would like to input type str, please convert to bytes")
    if flag not in (0, 1):
        raise ValueError(f"flag must be 1 (colour) or 0 (greyscale), got {flag!r}")
    pixels = decode(buf, int(flag), bgr=not to_rgb, max_pixels=DEFAULT_MAX_PIXELS)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if out is not None:
        if out.shape != pixels.shape:
            raise ValueError(f"out has shape {out.shape}, the image is {pixels.shape}")
        out[...] = pixels
        return out if isinstance(out, NDArray) else NDArray(out)
    return NDArray(pixels)


def imread(filename: Union[str, "os.PathLike[str]"], flag: int = 1, to_rgb: int = 1,
           out: Optional[Union[NDArray, np.ndarray]] = None) -> NDArray:
    """Read and decode an image file, as :func:`imdecode` (MXNet's ``mx.image.imread``)."""
    with open(filename, "rb") as f:
        return imdecode(f.read(), flag, to_rgb, out)


def _pixels(src: Any) -> np.ndarray:
    return src.asnumpy() if isinstance(src, NDArray) else np.asarray(src)


def imresize(src: Any, w: int, h: int, interp: int = 1) -> NDArray:
    """Resize a uint8 ``(H, W, C)`` image to ``w x h`` with OpenCV's ``interp`` (0 nearest,
    1 bilinear, 2 bicubic, 3 area, 4 Lanczos-4; 9 auto, 10 random as ``get_interp_method``):
    MXNet's bytes."""
    pixels = _pixels(src)
    if pixels.dtype != np.uint8:
        raise ValueError(f"imresize takes uint8 images (as MXNet's OpenCV resize), got "
                         f"{pixels.dtype}")
    sizes = (pixels.shape[0], pixels.shape[1], int(h), int(w))
    return NDArray(cvops.resize(pixels, int(w), int(h), get_interp_method(interp, sizes)))


def copyMakeBorder(src: Any, top: int, bot: int, left: int, right: int,  # MXNet's name
                   type: int = 0, value: float = 0.0,  # noqa: A002 - MXNet's name
                   values: Sequence[float] = ()) -> NDArray:
    """Pad an image with a constant border (MXNet's ``type=0``)."""
    if type != 0:
        raise ValueError(f"copyMakeBorder: only type=0 (constant border) is implemented, not "
                         f"{type}")
    pixels = _pixels(src)
    fill = list(values) or [value]
    channels = pixels.shape[2] if pixels.ndim == 3 else 1
    fill = (fill + [0.0] * channels)[:channels] if len(fill) > 1 else fill * channels
    widths = ((top, bot), (left, right)) + (((0, 0),) if pixels.ndim == 3 else ())
    out = np.empty(tuple(n + a + b for n, (a, b) in zip(pixels.shape, widths)), pixels.dtype)
    out[...] = np.asarray(fill, pixels.dtype)
    out[top:top + pixels.shape[0], left:left + pixels.shape[1]] = pixels
    return NDArray(out)


def get_interp_method(interp: int, sizes: Sequence[int] = ()) -> int:
    """MXNet's choice of OpenCV interpolation: 9 bicubic to enlarge, area to shrink, bilinear
    otherwise (bicubic without sizes); 10 a random one of 0-4 (``random.randint``)."""
    if interp == 9:
        if not sizes:
            return 2
        oh, ow, nh, nw = sizes
        if nh > oh and nw > ow:
            return 2
        if nh < oh and nw < ow:
            return 3
        return 1
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise ValueError("Unknown interp method %d" % interp)
    return interp


def resize_short(src: Any, size: int, interp: int = 2) -> NDArray:
    """Resize so the shorter side is ``size`` (the longer ``long * size // short``)."""
    h, w = src.shape[:2]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int,
               size: Optional[Tuple[int, int]] = None, interp: int = 2) -> NDArray:
    """Crop ``w x h`` at ``(x0, y0)``, then resize to ``size`` (w, h) when given and
    different."""
    out = NDArray(_pixels(src)[y0:y0 + h, x0:x0 + w])
    if size is not None and (w, h) != tuple(size):
        sizes = (h, w, size[1], size[0])
        out = imresize(out, size[0], size[1], interp=get_interp_method(interp, sizes))
    return out


def scale_down(src_size: Tuple[int, int], size: Tuple[int, int]) -> Tuple[int, int]:
    """Shrink a crop ``size`` (w, h) to fit ``src_size`` (w, h), keeping its aspect."""
    w: float
    h: float
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def random_crop(src: Any, size: Tuple[int, int], interp: int = 2
                ) -> Tuple[NDArray, Tuple[int, int, int, int]]:
    """A random ``size`` (w, h) crop (scaled up when the image is smaller) and its box."""
    h, w = src.shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src: Any, size: Tuple[int, int], interp: int = 2
                ) -> Tuple[NDArray, Tuple[int, int, int, int]]:
    """The centred ``size`` (w, h) crop (scaled up when the image is smaller) and its box."""
    h, w = src.shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src: NDArray, mean: Any, std: Any = None) -> NDArray:
    """``src -= mean; src /= std`` (in place, as MXNet's)."""
    if mean is not None:
        src -= mean
    if std is not None:
        src /= std
    return src


def random_size_crop(src: Any, size: Tuple[int, int], area: Union[float, Tuple[float, float]],
                     ratio: Tuple[float, float], interp: int = 2, **kwargs: Any
                     ) -> Tuple[NDArray, Tuple[int, int, int, int]]:
    """MXNet's Python random resized crop: area uniform in ``area`` (a number means
    ``(area, 1)``), aspect log-uniform in ``ratio``, ten attempts, else the centre crop."""
    h, w = src.shape[:2]
    src_area = h * w
    if "min_area" in kwargs:
        warnings.warn("`min_area` is deprecated. Please use `area` instead.", DeprecationWarning,
                      stacklevel=2)
        area = kwargs.pop("min_area")
    if kwargs:
        raise ValueError(f"random_size_crop: unexpected arguments {sorted(kwargs)}")
    if isinstance(area, (float, int, Number)):
        area = (area, 1.0)
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * src_area
        log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
        new_ratio = np.exp(random.uniform(*log_ratio))
        new_w = int(round(np.sqrt(target_area * new_ratio)))
        new_h = int(round(np.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)
