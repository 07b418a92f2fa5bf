"""The one image encoder: pixels to the bytes MXNet's ``pack_img`` writes, by its own call,
``cv2.imencode``; every writer of image records encodes through :func:`encode`.

``quality`` is the JPEG quality (clamped to 0-100) for ``.jpg`` and the PNG compression level
(clamped to 0-9, OpenCV's ``IMWRITE_PNG_COMPRESSION``) for ``.png``, as MXNet's ``pack_img``
passes it; other formats OpenCV writes (``.bmp``, ``.tif``, ``.webp``, ...) get OpenCV's
defaults, as ``pack_img`` passes no parameter for them.

Apart from the decoder (``recio.image.pixels.codec``): a reader needs only decoding.
"""
from __future__ import annotations

import re
from typing import List, Union

import cv2
import numpy as np
from PIL import Image

from recio.errors import ImageError

#: the formats im2rec writes
ENCODINGS = (".jpg", ".png")


def encode(image: Union[np.ndarray, Image.Image], encoding: str = ".jpg", quality: int = 95, *,
           bgr: bool = False) -> bytes:
    """Encode pixels to the bytes MXNet's ``pack_img`` writes (``cv2.imencode``): ``.jpg`` at
    JPEG ``quality`` (clamped to 0-100), ``.png`` at compression level ``quality`` (clamped to
    0-9: the default 95 means 9), any other format OpenCV writes with its defaults.

    ``image``: a uint8 array ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA
    (``bgr=True``: BGR/BGRA, as OpenCV), a uint16 one (PNG keeps 16 bits; JPEG saturates to
    255, as OpenCV), or a Pillow image in mode L, RGB or RGBA. JPEG has no alpha: a fourth
    channel is dropped, as OpenCV does.
    """
    fmt = encoding.lower()
    if not re.fullmatch(r"\.[a-z0-9]{1,5}", fmt):
        raise ImageError(f"unsupported image format {encoding!r}: use '.jpg' or '.png'")
    if isinstance(image, Image.Image):
        pixels, bgr = _pillow_pixels(image), False
    else:
        pixels = _checked_array(image)
    params: List[int] = []
    if fmt in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, min(max(int(quality), 0), 100)]
        if pixels.dtype != np.uint8:  # OpenCV's JPEG encoder takes 8 bits: saturate, as imencode
            pixels = np.minimum(pixels, 255).astype(np.uint8)
        if pixels.ndim == 3 and pixels.shape[2] == 4:
            pixels = pixels[:, :, :3]
    elif fmt == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, min(max(int(quality), 0), 9)]
    if not bgr and pixels.ndim == 3:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR if pixels.shape[2] == 3
                              else cv2.COLOR_RGBA2BGRA)
    try:
        ok, buf = cv2.imencode(fmt, pixels, params)
    except cv2.error as exc:  # e.g. no encoder for that extension
        detail = " ".join(str(exc).split())[-160:]
        raise ImageError(f"cannot encode image as {encoding!r}: {detail}") from None
    if not ok:
        raise ImageError(f"OpenCV could not encode the image as {encoding!r}")
    return buf.tobytes()


def _checked_array(image: np.ndarray) -> np.ndarray:
    """``image`` as a uint8 or uint16 array of a layout the encoder takes, else ImageError."""
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.dtype not in (np.uint8, np.uint16):
        raise ImageError(f"image array must be uint8 or uint16, got {arr.dtype}")
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)) \
            or 0 in arr.shape:
        raise ImageError(f"image array must be HxW, HxWx3 or HxWx4, got shape {arr.shape}")
    return arr


def _pillow_pixels(img: Image.Image) -> np.ndarray:
    """A Pillow image as the array OpenCV would hold for it (RGB order)."""
    if img.mode in ("L", "RGB", "RGBA"):
        return np.asarray(img)
    if img.mode in ("I;16", "I;16L", "I;16B", "I;16N"):
        return np.asarray(img).astype(np.uint16)
    if img.mode == "LA":
        return np.asarray(img.convert("L"))
    if img.mode in ("P", "PA") and "transparency" in img.info or img.mode == "PA":
        return np.asarray(img.convert("RGBA"))
    return np.asarray(img.convert("RGB"))
