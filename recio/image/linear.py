"""OpenCV's bilinear resize, bit for bit, in NumPy: ``cv2.resize(img, (w, h))`` without OpenCV.

MXNet's ``tools/im2rec.py`` resizes with ``cv2.resize(img, newsize)``, whose default
interpolation is ``INTER_LINEAR``; to write MXNet's bytes without OpenCV installed, recio
computes the same pixels. What OpenCV 4 and 5 do (``modules/imgproc/src/resize.cpp``,
``resizeGeneric_`` with ``HResizeLinear``/``VResizeLinear``), checked against ``cv2.resize``
by tests/test_image_codec.py:

* **Coordinates.** Output column ``x`` samples source ``f = float32((x + 0.5) * scale - 0.5)``
  (``scale = 1 / (dst / src)`` in double), ``s = floor(f)``, weights ``1 - (f - s)`` and
  ``f - s`` (float32). A column left of the image (``s < 0``) or at/after its last one uses
  the edge pixel alone; rows are clamped instead (both taps read the edge row, with the
  unclamped weights).
* **8-bit images:** the weights become 11-bit fixed point (``round(w * 2048)``, ties to even);
  the horizontal pass sums ``pixel * weight`` exactly in integers; the vertical pass is
  OpenCV's SIMD kernel ``VResizeLinearVec_32s8u``: ``(((S0 >> 4) * b0) >> 16) +
  (((S1 >> 4) * b1) >> 16) + 2) >> 2`` (not the scalar ``(b0 S0 + b1 S1 + 2**21) >> 22``,
  which differs in the last bit).
* **16-bit images:** float32 throughout: ``S0 * a0 + S1 * a1`` per pass, rounded half to even
  and saturated to 0-65535.
* **Halving:** when the output is exactly half the source both ways, OpenCV switches to its
  area average: ``(a + b + c + d + 2) >> 2`` of each 2x2 block.
* Same size: a copy.
"""
from __future__ import annotations

import functools
import threading
from typing import Tuple

import numpy as np

#: OpenCV's INTER_RESIZE_COEF_BITS: the fixed-point weights of 8-bit images
COEF_BITS = 11
COEF_SCALE = 1 << COEF_BITS


def _taps(src: int, dst: int, clamp_weights: bool
          ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """First and second source index and their float32 weights for each of ``dst`` outputs
    along an axis of ``src`` pixels (OpenCV's ``xofs``/``alpha`` or ``yofs``/``beta``)."""
    scale = 1.0 / (dst / src)
    f = ((np.arange(dst, dtype=np.float64) + 0.5) * scale - 0.5).astype(np.float32)
    s = np.floor(f).astype(np.int64)
    f = f - s.astype(np.float32)
    if clamp_weights:  # columns: outside the image, the edge pixel alone
        outside = (s < 0) | (s >= src - 1)
        f[outside] = 0
        s = np.clip(s, 0, src - 1)
    first = np.clip(s, 0, src - 1)
    second = np.clip(s + 1, 0, src - 1)
    return first, second, (np.float32(1) - f).astype(np.float32), f


def resize_linear(image: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    """``cv2.resize(image, size)`` (``INTER_LINEAR``): ``size`` is ``(width, height)``;
    ``image`` a uint8 or uint16 array ``(H, W)`` or ``(H, W, C)`` (any channel order)."""
    if image.dtype not in (np.uint8, np.uint16):
        raise TypeError(f"resize_linear takes uint8 or uint16 images, not {image.dtype}")
    width, height = size
    if width <= 0 or height <= 0:
        raise ValueError(f"resize_linear: empty output size {size}")
    src_h, src_w = image.shape[:2]
    if (src_w, src_h) == (width, height):
        return image.copy()
    pixels = image if image.ndim == 3 else image[:, :, None]
    if src_w == 2 * width and src_h == 2 * height:
        out = _halve(pixels)
    elif image.dtype == np.uint8:
        out = _linear_8u(pixels, width, height)
    else:
        out = _linear_16u(pixels, width, height)
    return out if image.ndim == 3 else out[:, :, 0]


def _needed_rows(src_h: int, height: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      np.ndarray, np.ndarray]:
    """The source rows the vertical taps read (each once), and for each output row the
    positions of its two taps among them, with their float32 weights."""
    y0, y1, b0, b1 = _taps(src_h, height, clamp_weights=False)
    rows, where = np.unique(np.concatenate([y0, y1]), return_inverse=True)
    return rows, where[:height], where[height:], b0, b1


def _fixed(weights: np.ndarray) -> np.ndarray:
    """OpenCV's ``saturate_cast<short>(w * 2048)``: round half to even."""
    return np.rint(weights * np.float32(COEF_SCALE)).astype(np.int32)


@functools.lru_cache(maxsize=256)
def _plan_8u(src_h: int, src_w: int, channels: int, height: int, width: int) -> tuple:
    """Everything about a resize that depends on the sizes only (images of one size share it):
    rows to read, the column of every output sample in a row of ``src_w * channels`` samples,
    and the fixed-point weights."""
    x0, x1, a0, a1 = _taps(src_w, width, clamp_weights=True)
    rows, t0, t1, b0, b1 = _needed_rows(src_h, height)
    lanes = np.arange(channels)
    x0 = (x0[:, None] * channels + lanes).ravel()
    x1 = (x1[:, None] * channels + lanes).ravel()
    plan = (rows if len(rows) < src_h else None, x0, x1, np.repeat(_fixed(a0), channels),
            np.repeat(_fixed(a1), channels), t0, t1, _fixed(b0)[:, None], _fixed(b1)[:, None])
    for array in plan:
        if array is not None:
            array.flags.writeable = False
    return plan


_SCRATCH = threading.local()
#: scratch buffers are kept for the next image up to this many bytes each (a resize to a large
#: size gets fresh ones, not kept)
_SCRATCH_KEPT = 16 << 20


def _scratch(slot: str, shape: Tuple[int, int], dtype: type) -> np.ndarray:
    """A reusable buffer of this thread (large NumPy temporaries are fresh memory maps each
    time: zeroed pages the kernel must fault in)."""
    size = shape[0] * shape[1]
    if size * np.dtype(dtype).itemsize > _SCRATCH_KEPT:
        return np.empty(shape, dtype)
    buf = getattr(_SCRATCH, slot, None)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = np.empty(max(size, 1 << 15), dtype)
        setattr(_SCRATCH, slot, buf)
    return buf[:size].reshape(shape)


def _linear_8u(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    src_h, src_w, channels = pixels.shape
    rows, x0, x1, ia0, ia1, t0, t1, ib0, ib1 = _plan_8u(src_h, src_w, channels, height, width)
    band = pixels.reshape(src_h, src_w * channels)
    if rows is not None:
        band = band[rows]
    samples = (band.shape[0], width * channels)
    taken = _scratch("taken", samples, np.uint8)
    horizontal = _scratch("horizontal", samples, np.int32)
    second = _scratch("second", samples, np.int32)
    np.take(band, x0, axis=1, out=taken)
    np.multiply(taken, ia0, out=horizontal)
    np.take(band, x1, axis=1, out=taken)
    np.multiply(taken, ia1, out=second)
    horizontal += second
    horizontal >>= 4
    out = (height, width * channels)
    top = _scratch("top", out, np.int32)
    bottom = _scratch("bottom", out, np.int32)
    np.take(horizontal, t0, axis=0, out=top)
    top *= ib0
    top >>= 16
    np.take(horizontal, t1, axis=0, out=bottom)
    bottom *= ib1
    bottom >>= 16
    top += bottom
    top += 2
    top >>= 2  # at most 255 (weights sum to at most 2049): OpenCV's saturation never acts
    return top.astype(np.uint8).reshape(height, width, channels)


def _linear_16u(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    src_h, src_w = pixels.shape[:2]
    x0, x1, a0, a1 = _taps(src_w, width, clamp_weights=True)
    rows, t0, t1, b0, b1 = _needed_rows(src_h, height)
    band = pixels[rows].astype(np.float32)
    horizontal = band[:, x0] * a0[:, None] + band[:, x1] * a1[:, None]
    out = horizontal[t0] * b0[:, None, None] + horizontal[t1] * b1[:, None, None]
    return np.clip(np.rint(out), 0, 65535).astype(np.uint16)


def _halve(pixels: np.ndarray) -> np.ndarray:
    """OpenCV's area average of 2x2 blocks (what its linear resize does for an exact half):
    ``(a + b + c + d + 2) >> 2``."""
    total = pixels[0::2, 0::2].astype(np.int32)
    total += pixels[0::2, 1::2]
    total += pixels[1::2, 0::2]
    total += pixels[1::2, 1::2]
    total += 2
    total >>= 2
    return total.astype(pixels.dtype)


__all__ = ["resize_linear"]
