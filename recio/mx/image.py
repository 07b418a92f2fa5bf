"""``recio.mx.image``: the image decoding of ``mxnet.image`` that code reading records uses.

``imdecode(buf, flag=1, to_rgb=1)`` returns what MXNet's does, pixel for pixel: MXNet decodes
with the OpenCV built into it (no EXIF rotation), ``flag=1`` to ``(H, W, 3)`` (RGB, or BGR with
``to_rgb=0``), ``flag=0`` to OpenCV's greyscale ``(H, W, 1)``. The result is an :class:`NDArray`:
a NumPy array with the ``asnumpy()`` of MXNet's, so ``mx.image.imdecode(img).asnumpy()`` (as in
InsightFace's arcface_torch) runs unchanged.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Union

import numpy as np

from recio.image.codec import DEFAULT_MAX_PIXELS, decode


class NDArray(np.ndarray):
    """A NumPy array standing in for MXNet's ``NDArray`` on the CPU (what ``imdecode`` returns).

    Everything NumPy does works on it; ``asnumpy()`` gives a plain NumPy copy, as MXNet's does.
    """

    def asnumpy(self) -> np.ndarray:
        """A copy as a plain ``numpy.ndarray`` (MXNet's ``NDArray.asnumpy``)."""
        return np.array(self, copy=True, subok=False)

    def asscalar(self) -> Any:
        """The value of a one-element array (MXNet's ``NDArray.asscalar``)."""
        if self.size != 1:
            raise ValueError("The current array is not a scalar")
        return self.reshape(-1)[0].item()

    @property
    def context(self) -> str:
        """Where the array lives: always the CPU."""
        return "cpu(0)"

    ctx = context


def imdecode(buf: Union[bytes, bytearray, memoryview, np.ndarray], flag: int = 1,
             to_rgb: int = 1, out: Optional[np.ndarray] = None) -> NDArray:
    """Decode an image to an ``(H, W, 3)`` (``flag=1``) or ``(H, W, 1)`` (``flag=0``) uint8
    :class:`NDArray`, RGB unless ``to_rgb=0`` (BGR), with MXNet's pixels.

    ``out``: an array of the right shape to decode into (returned). Undecodable bytes, or an
    image declaring more than ``recio.image.codec.DEFAULT_MAX_PIXELS`` pixels, raise
    :class:`~recio.errors.ImageError` (MXNet raises ``MXNetError``).
    """
    if isinstance(buf, str):
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
        return out if isinstance(out, NDArray) else out.view(NDArray)
    return pixels.view(NDArray)


def imread(filename: Union[str, "os.PathLike[str]"], flag: int = 1, to_rgb: int = 1,
           out: Optional[np.ndarray] = None) -> NDArray:
    """Read and decode an image file, as :func:`imdecode` (MXNet's ``mx.image.imread``)."""
    with open(filename, "rb") as f:
        return imdecode(f.read(), flag, to_rgb, out)


__all__ = ["NDArray", "imdecode", "imread"]
