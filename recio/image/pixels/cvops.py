"""The OpenCV operations of MXNet's image pipeline: OpenCV's own calls, and the two that
MXNet's OpenCV does differently from today's.

MXNet 1.9.1 augments images with the OpenCV 3.4.2 built into it (``cv::resize``,
``cv::warpAffine``, ``cv::copyMakeBorder``, ``cvtColor``, ``convertTo``, ``addWeighted``). The
installed OpenCV gives the same bytes for all of them but two, which are reproduced here in
NumPy with OpenCV 3.4.2's arithmetic, each pinned by a golden test against MXNet's own output:

* :func:`resize` with ``INTER_CUBIC``: OpenCV 3.4.2's SSE2 vertical pass works in float32
  eight values at a time (the row's last ``width % 8`` values in fixed point); OpenCV 4 and 5
  differ from it by 1 here and there (``tests/image/pixels/test_cvops.py``,
  ``test_opencv_bicubic_differs_so_numpy_does_it``).
* :func:`warp_affine` with ``INTER_LINEAR`` and ``INTER_NEAREST``: OpenCV's 1/32-pixel grid
  and 15-bit weights as 3.4.2 computes them; OpenCV 5 differs
  (``test_opencv_warp_differs_so_numpy_does_it``).

Everything else calls OpenCV: resizes (nearest, bilinear, area, Lanczos), borders, colour
conversions and blends. Images are uint8, ``(H, W)`` or ``(H, W, C)``; the result has the same
layout.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import cv2
import numpy as np

#: OpenCV's interpolation codes (``cv2.INTER_*``), as MXNet's ``inter_method`` numbers them
INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
INTERPOLATIONS = {INTER_NEAREST: "nearest", INTER_LINEAR: "bilinear", INTER_CUBIC: "bicubic",
                  INTER_AREA: "area", INTER_LANCZOS4: "Lanczos-4"}

# OpenCV's fixed point: resize weights have 11 fractional bits, remap (warp) weights 15, and a
# warp's source coordinates are kept in 1/32 of a pixel
_RESIZE_BITS = 11
_RESIZE_ONE = 1 << _RESIZE_BITS
_REMAP_BITS = 15
_INTER_BITS = 5
_INTER_TAB = 1 << _INTER_BITS
_AB_BITS = 10  # MAX(10, INTER_BITS): the warp's coordinate arithmetic
_F32 = np.float32


def _as_hwc(img: np.ndarray) -> Tuple[np.ndarray, bool]:
    """``img`` as ``(H, W, C)`` and whether it was ``(H, W)``."""
    if img.ndim == 2:
        return img[:, :, None], True
    if img.ndim != 3:
        raise ValueError(f"expected an (H, W) or (H, W, C) image, got shape {img.shape}")
    return img, False


def _same_layout(out: np.ndarray, img: np.ndarray) -> np.ndarray:
    """OpenCV returns ``(H, W)`` for one channel: give it back the ``(H, W, 1)`` it came as."""
    return out[:, :, None] if img.ndim == 3 and out.ndim == 2 else out


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise ValueError(f"cannot resize to {width}x{height}: both sides must be at least 1")


def _check_interpolation(interpolation: int) -> None:
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"unknown interpolation {interpolation}: expected one of "
                         f"{sorted(INTERPOLATIONS)} ({', '.join(INTERPOLATIONS.values())})")


# -- resize -------------------------------------------------------------------------------------
def resize(img: np.ndarray, width: int, height: int,
           interpolation: int = INTER_LINEAR) -> np.ndarray:
    """``cv::resize(img, (width, height), interpolation)`` with OpenCV 3.4.2's bytes (MXNet's):
    ``cv2.resize``, but for ``INTER_CUBIC`` (see the module docstring)."""
    width, height = int(width), int(height)
    _check_size(width, height)
    _check_interpolation(interpolation)
    if img.dtype != np.uint8:
        raise ValueError(f"resize takes uint8 images, got {img.dtype}")
    h, w = img.shape[:2]
    if (w, h) == (width, height):
        return img.copy()
    if interpolation != INTER_CUBIC:
        out = cv2.resize(np.ascontiguousarray(img), (width, height), interpolation=interpolation)
        return _same_layout(out, img)
    src, flat = _as_hwc(img)
    out = _resize_cubic(src, width, height)
    return out[:, :, 0] if flat else out


def _source_positions(src_size: int, dst_size: int) -> Tuple[np.ndarray, np.ndarray]:
    """OpenCV's sampling positions: ``f = (float)((d + 0.5) * scale - 0.5)`` in float32 (scale
    in double), split into ``floor(f)`` and the fraction."""
    scale = 1.0 / (dst_size / src_size)
    f = ((np.arange(dst_size) + 0.5) * scale - 0.5).astype(_F32)
    start = np.floor(f)
    return start.astype(np.intp), (f - start).astype(_F32)


def _fixed(weights: np.ndarray) -> np.ndarray:
    """Float weights as OpenCV's 11-bit fixed point (``saturate_cast<short>(w * 2048)``)."""
    return np.rint(weights * _F32(_RESIZE_ONE)).astype(np.int64)


def _cubic_weights(x: np.ndarray) -> np.ndarray:
    """OpenCV's ``interpolateCubic`` (A = -0.75) in float32, one row of 4 weights per ``x``."""
    a = _F32(-0.75)
    one = _F32(1)
    x = x.astype(_F32)
    x1 = x + one
    c0 = ((a * x1 - _F32(5) * a) * x1 + _F32(8) * a) * x1 - _F32(4) * a
    c1 = ((a + _F32(2)) * x - (a + _F32(3))) * x * x + one
    y = one - x
    c2 = ((a + _F32(2)) * y - (a + _F32(3))) * y * y + one
    c3 = one - c0 - c1 - c2
    return np.stack([c0, c1, c2, c3], axis=-1).astype(_F32)


def _resize_cubic(src: np.ndarray, width: int, height: int) -> np.ndarray:
    h, w, c = src.shape
    sx, fx = _source_positions(w, width)
    ax = _fixed(_cubic_weights(fx))  # (width, 4)
    taps_x = np.clip(sx[:, None] + np.arange(-1, 3)[None, :], 0, w - 1)
    sy, fy = _source_positions(h, height)
    by = _fixed(_cubic_weights(fy))  # (height, 4)
    taps_y = np.clip(sy[:, None] + np.arange(-1, 3)[None, :], 0, h - 1)
    rows, where = np.unique(taps_y, return_inverse=True)
    part = src[rows].astype(np.int64)
    hpass: np.ndarray = np.zeros((len(rows), width, c), np.int64)  # then flattened per row
    for k in range(4):
        hpass += part[:, taps_x[:, k]] * ax[None, :, k, None]
    hpass = hpass.reshape(len(rows), width * c)
    where = where.reshape(height, 4)
    # vertical pass: float32 for the first floor(n / 8) * 8 values of a row, as OpenCV's SSE2
    # code, fixed point with a rounding shift for the rest
    n = width * c
    vec = n - n % 8
    out = np.empty((height, n), np.int64)
    if vec:
        scale = _F32(1.0) / _F32(_RESIZE_ONE * _RESIZE_ONE)
        beta = (by.astype(_F32) * scale).astype(_F32)
        acc = hpass[where[:, 0], :vec].astype(_F32) * beta[:, 0, None]
        for k in range(1, 4):
            acc += hpass[where[:, k], :vec].astype(_F32) * beta[:, k, None]
        out[:, :vec] = np.rint(acc).astype(np.int64)
    if vec < n:
        acc_i = np.zeros((height, n - vec), np.int64)
        for k in range(4):
            acc_i += hpass[where[:, k], vec:] * by[:, k, None]
        out[:, vec:] = (acc_i + (1 << (2 * _RESIZE_BITS - 1))) >> (2 * _RESIZE_BITS)
    return np.clip(out, 0, 255).astype(np.uint8).reshape(height, width, c)


# -- borders and affine warps -------------------------------------------------------------------
Fill = Union[int, Sequence[int]]


def _fill_values(fill: Fill, channels: int) -> np.ndarray:
    """A border value per channel (a number fills every channel)."""
    values = np.broadcast_to(np.asarray(fill, np.int64), (channels,))
    if values.min() < 0 or values.max() > 255:
        raise ValueError(f"border values must be 0..255, got {fill}")
    return values.astype(np.uint8)


def _border(values: np.ndarray) -> Tuple[int, int, int, int]:
    """OpenCV's border value (a 4-tuple) for per-channel ``values``."""
    return tuple(int(v) for v in values[:4]) + (0,) * (4 - min(4, len(values)))  # type: ignore[return-value]


def pad_constant(img: np.ndarray, pad: int, fill: Fill) -> np.ndarray:
    """``cv::copyMakeBorder(img, pad, pad, pad, pad, BORDER_CONSTANT, fill)``."""
    src, _ = _as_hwc(img)
    values = _fill_values(fill, src.shape[2])
    out = cv2.copyMakeBorder(np.ascontiguousarray(img), pad, pad, pad, pad, cv2.BORDER_CONSTANT,
                             value=_border(values))
    return _same_layout(out, img)


def warp_affine(img: np.ndarray, matrix: np.ndarray, width: int, height: int,
                interpolation: int = INTER_LINEAR, fill: Fill = 0) -> np.ndarray:
    """``cv::warpAffine(img, M, (width, height), interpolation, BORDER_CONSTANT, fill)``.

    ``matrix`` is the 2x3 forward map (as OpenCV takes it without ``WARP_INVERSE_MAP``);
    ``fill`` the border value (a number, or one per channel). ``INTER_LINEAR`` (and
    ``INTER_AREA``, which OpenCV's warps treat as linear) and ``INTER_NEAREST`` are done in
    NumPy with OpenCV 3.4.2's arithmetic; cubic and Lanczos warps by ``cv2.warpAffine``.
    """
    width, height = int(width), int(height)
    _check_size(width, height)
    if interpolation == INTER_AREA:
        interpolation = INTER_LINEAR
    _check_interpolation(interpolation)
    m = np.asarray(matrix, np.float64).reshape(2, 3)
    src, flat = _as_hwc(img)
    values = _fill_values(fill, src.shape[2])
    if interpolation in (INTER_CUBIC, INTER_LANCZOS4):
        out = cv2.warpAffine(np.ascontiguousarray(img), m, (width, height), flags=interpolation,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=_border(values))
        return _same_layout(out, img)
    out = _warp(src, m, width, height, values, interpolation == INTER_NEAREST)
    return out[:, :, 0] if flat else out


def _warp(src: np.ndarray, m: np.ndarray, width: int, height: int, fill: np.ndarray,
          nearest: bool) -> np.ndarray:
    h, w, c = src.shape
    # the inverse map, as warpAffine computes it (in double)
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    det = 1.0 / det if det != 0 else 0.0
    a11, a22 = m[1, 1] * det, m[0, 0] * det
    a12, a21 = -m[0, 1] * det, -m[1, 0] * det
    b1 = -a11 * m[0, 2] - a12 * m[1, 2]
    b2 = -a21 * m[0, 2] - a22 * m[1, 2]
    scale = float(1 << _AB_BITS)
    round_delta = (1 << _AB_BITS) // 2 if nearest else (1 << _AB_BITS) // _INTER_TAB // 2
    xs = np.arange(width)
    ys = np.arange(height)
    adelta = np.rint(a11 * xs * scale).astype(np.int64)
    bdelta = np.rint(a21 * xs * scale).astype(np.int64)
    x0 = np.rint((a12 * ys + b1) * scale).astype(np.int64) + round_delta
    y0 = np.rint((a22 * ys + b2) * scale).astype(np.int64) + round_delta
    out: np.ndarray  # uint8 pixels, or the int64 sums of the bilinear taps
    if nearest:
        sx = (x0[:, None] + adelta[None, :]) >> _AB_BITS
        sy = (y0[:, None] + bdelta[None, :]) >> _AB_BITS
        inside = (sx >= 0) & (sx < w) & (sy >= 0) & (sy < h)
        out = np.empty((height, width, c), np.uint8)
        out[...] = fill
        out[inside] = src[sy[inside], sx[inside]]
        return out
    gx = (x0[:, None] + adelta[None, :]) >> (_AB_BITS - _INTER_BITS)
    gy = (y0[:, None] + bdelta[None, :]) >> (_AB_BITS - _INTER_BITS)
    sx, sy = gx >> _INTER_BITS, gy >> _INTER_BITS
    tx = gx & (_INTER_TAB - 1)
    ty = gy & (_INTER_TAB - 1)
    # OpenCV's bilinear table: (1 - t/32, t/32) products, exact in 15-bit fixed point (the
    # corner entry 32768 is stored as 32767 plus 1 on the opposite tap: the same result)
    unit = 1 << (_REMAP_BITS - 2 * _INTER_BITS)
    weights = ((_INTER_TAB - ty) * (_INTER_TAB - tx) * unit, (_INTER_TAB - ty) * tx * unit,
               ty * (_INTER_TAB - tx) * unit, ty * tx * unit)
    padded = np.empty((h + 2, w + 2, c), np.int64)
    padded[...] = fill.astype(np.int64)
    padded[1:-1, 1:-1] = src
    acc = np.zeros((height, width, c), np.int64)
    for (dy, dx), wgt in zip(((0, 0), (0, 1), (1, 0), (1, 1)), weights):
        px = np.clip(sx + dx, -1, w) + 1
        py = np.clip(sy + dy, -1, h) + 1
        acc += padded[py, px] * wgt[:, :, None]
    out = (acc + (1 << (_REMAP_BITS - 1))) >> _REMAP_BITS
    outside = (sx >= w) | (sx + 1 < 0) | (sy >= h) | (sy + 1 < 0)
    out[outside] = fill.astype(np.int64)
    return np.clip(out, 0, 255).astype(np.uint8)


# -- colour -------------------------------------------------------------------------------------
_LEVELS = np.arange(256, dtype=_F32)


def saturate_uint8(values: np.ndarray) -> np.ndarray:
    """OpenCV's ``saturate_cast<uchar>`` of float values: round half to even, clip to 0..255."""
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def lookup(img: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``cv2.LUT``: ``table[img]`` for a uint8 image; ``table`` has 256 entries, or ``(256, C)``
    for one per channel."""
    tab = table.reshape(256, 1, -1) if table.ndim == 2 else table
    return cv2.LUT(np.ascontiguousarray(img), np.ascontiguousarray(tab)).reshape(img.shape)


def convert_scale(img: np.ndarray, alpha: float, beta: float = 0.0) -> np.ndarray:
    """``img.convertTo(out, -1, alpha, beta)``: ``saturate_cast<uchar>(x * alpha + beta)`` in
    float32, as a table of the 256 results (OpenCV's Python has no ``convertTo``, and
    ``convertScaleAbs`` takes the absolute value)."""
    return lookup(img, saturate_uint8(_LEVELS * _F32(alpha) + _F32(beta)))


def add_weighted(a: np.ndarray, alpha: float, b: np.ndarray, beta: float,
                 gamma: float = 0.0) -> np.ndarray:
    """``cv::addWeighted(a, alpha, b, beta, gamma)`` on uint8 images; ``b`` may have fewer
    channels (a grey image, spread to ``a``'s channels as MXNet's ``cvtColor`` back does)."""
    if b.shape != a.shape:
        b = np.broadcast_to(b, a.shape)
    return cv2.addWeighted(np.ascontiguousarray(a), float(alpha), np.ascontiguousarray(b),
                           float(beta), float(gamma))


def bgr_to_hls(bgr: np.ndarray) -> np.ndarray:
    """``cvtColor(bgr, COLOR_BGR2HLS)`` for uint8: H in 0..180 (degrees / 2), L and S 0..255."""
    return cv2.cvtColor(np.ascontiguousarray(bgr), cv2.COLOR_BGR2HLS)


def hls_to_bgr(hls: np.ndarray) -> np.ndarray:
    """``cvtColor(hls, COLOR_HLS2BGR)`` for uint8 (H in 0..180)."""
    return cv2.cvtColor(np.ascontiguousarray(hls), cv2.COLOR_HLS2BGR)


def rgb_to_grey(rgb: np.ndarray) -> np.ndarray:
    """``cvtColor(rgb, COLOR_RGB2GRAY)`` (``RGBA2GRAY`` for 4 channels): OpenCV's greyscale of
    a uint8 ``(H, W, 3)`` or ``(H, W, 4)`` image, channels taken in that order, ``(H, W)``."""
    code = cv2.COLOR_RGB2GRAY if rgb.shape[2] == 3 else cv2.COLOR_RGBA2GRAY
    return cv2.cvtColor(np.ascontiguousarray(rgb), code)


def channel_offsets(img: np.ndarray, offsets: Sequence[float],
                    limits: Optional[Sequence[int]] = None) -> np.ndarray:
    """``int v = pixel; v += offset; clamp`` for each channel, as MXNet's HSL and PCA-noise loops
    do (``int += float`` truncates toward zero); ``limits``: each channel's maximum (255)."""
    limits = limits if limits is not None else (255,) * img.shape[-1]
    tables = np.stack([np.clip(np.trunc(_LEVELS + _F32(offset)), 0, limit).astype(np.uint8)
                       for offset, limit in zip(offsets, limits)], axis=1)
    return lookup(img, tables)
