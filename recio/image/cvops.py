"""The OpenCV operations MXNet's image pipeline calls, reproduced in NumPy byte for byte.

MXNet 1.9.1 augments images with the OpenCV 3.4.2 built into it (``cv::resize``,
``cv::warpAffine``, ``cv::copyMakeBorder``, ``cvtColor``, ``convertTo``, ``addWeighted``). Code
ported from MXNet expects those pixels, and OpenCV is only an extra here (``recio[fast]``), so
the operations whose results training code compares are done in NumPy with OpenCV's own
arithmetic:

* :func:`resize` with ``INTER_NEAREST``, ``INTER_LINEAR`` (the default:
  :func:`recio.image.linear.resize_linear`, the one owner of OpenCV's fixed-point bilinear) and
  ``INTER_CUBIC`` (fixed-point horizontal pass; the vertical pass in float32 as OpenCV 3.4.2's
  SSE2 code does, eight values at a time, the row's last ``width % 8`` values in fixed point).
  ``INTER_AREA`` and ``INTER_LANCZOS4`` use OpenCV itself (pip's OpenCV 4 and 5 give MXNet's
  bytes for them, ``tests/test_mx_iter.py`` checks it), else :func:`resize` raises an
  ``ImportError`` naming the extra. With OpenCV installed, ``cv2.resize`` also does
  ``INTER_NEAREST`` and ``INTER_LINEAR`` (the same bytes, faster); never ``INTER_CUBIC``, whose
  pip builds differ from MXNet's by 1 here and there.
* :func:`warp_affine`: ``INTER_LINEAR`` with OpenCV's 1/32-pixel grid and 15-bit weights (pip's
  OpenCV 4 gives the same bytes, OpenCV 5 does not), ``INTER_NEAREST``, a constant border;
  cubic and Lanczos warps through OpenCV.
* the colour operations of MXNet's random augmentations (:func:`convert_scale`,
  :func:`add_weighted`, :func:`bgr_to_hls`, :func:`hls_to_bgr`): float32 arithmetic and
  OpenCV's rounding (``saturate_cast``: round half to even, then clip).

Images are uint8, ``(H, W)`` or ``(H, W, C)``; the result has the same layout. The vectorised
passes work on whole arrays (NumPy releases the GIL), never per pixel in Python.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from recio.image.linear import COEF_BITS, COEF_SCALE, resize_linear
from recio.optional import optional, require

#: OpenCV's interpolation codes (``cv2.INTER_*``), as MXNet's ``inter_method`` numbers them
INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
INTERPOLATIONS = {INTER_NEAREST: "nearest", INTER_LINEAR: "bilinear", INTER_CUBIC: "bicubic",
                  INTER_AREA: "area", INTER_LANCZOS4: "Lanczos-4"}
#: what resize does in NumPy when OpenCV is not installed
NUMPY_RESIZE = (INTER_NEAREST, INTER_LINEAR, INTER_CUBIC)
#: where cv2.resize is known to give OpenCV 3.4.2's (MXNet's) bytes, and so may be used
_CV2_EXACT_RESIZE = (INTER_NEAREST, INTER_LINEAR, INTER_AREA, INTER_LANCZOS4)

# OpenCV's fixed point: resize weights have 11 fractional bits, remap (warp) weights 15, and a
# warp's source coordinates are kept in 1/32 of a pixel
_RESIZE_BITS, _RESIZE_ONE = COEF_BITS, COEF_SCALE
_REMAP_BITS = 15
_INTER_BITS = 5
_INTER_TAB = 1 << _INTER_BITS
_AB_BITS = 10  # MAX(10, INTER_BITS): the warp's coordinate arithmetic
_F32 = np.float32


def _cv2() -> Any:
    return optional("cv2")


def _as_hwc(img: np.ndarray) -> Tuple[np.ndarray, bool]:
    """``img`` as ``(H, W, C)`` and whether it was ``(H, W)``."""
    if img.ndim == 2:
        return img[:, :, None], True
    if img.ndim != 3:
        raise ValueError(f"expected an (H, W) or (H, W, C) image, got shape {img.shape}")
    return img, False


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise ValueError(f"cannot resize to {width}x{height}: both sides must be at least 1")


# -- saturate_cast ------------------------------------------------------------------------------
def saturate_uint8(values: np.ndarray) -> np.ndarray:
    """OpenCV's ``saturate_cast<uchar>`` of float values: round half to even, clip to 0..255."""
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


# -- resize -------------------------------------------------------------------------------------
def resize(img: np.ndarray, width: int, height: int,
           interpolation: int = INTER_LINEAR) -> np.ndarray:
    """``cv::resize(img, (width, height), interpolation)`` with OpenCV 3.4.2's bytes (MXNet's).

    ``interpolation`` is one of ``INTER_NEAREST`` .. ``INTER_LANCZOS4``; ``INTER_AREA`` and
    ``INTER_LANCZOS4`` need OpenCV (``ImportError`` saying what to install).
    """
    width, height = int(width), int(height)
    _check_size(width, height)
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"unknown interpolation {interpolation}: expected one of "
                         f"{sorted(INTERPOLATIONS)} ({', '.join(INTERPOLATIONS.values())})")
    if img.dtype != np.uint8:
        raise ValueError(f"resize takes uint8 images, got {img.dtype}")
    h, w = img.shape[:2]
    if (w, h) == (width, height):
        return img.copy()
    cv2 = _cv2() if interpolation in _CV2_EXACT_RESIZE else None
    if cv2 is not None and (img.ndim == 2 or img.shape[2] <= 4):
        out = cv2.resize(np.ascontiguousarray(img), (width, height), interpolation=interpolation)
        return out[:, :, None] if img.ndim == 3 and out.ndim == 2 else out
    if interpolation not in NUMPY_RESIZE:
        require("cv2", feature=f"resizing with inter_method={interpolation} "
                               f"({INTERPOLATIONS[interpolation]}, as MXNet's OpenCV does it)")
    src, flat = _as_hwc(img)
    if interpolation == INTER_NEAREST:
        out = _resize_nearest(src, width, height)
    elif interpolation == INTER_LINEAR:
        out = resize_linear(src, (width, height))
    else:
        out = _resize_cubic(src, width, height)
    return out[:, :, 0] if flat else out


def _resize_nearest(src: np.ndarray, width: int, height: int) -> np.ndarray:
    """OpenCV's ``resizeNN``: source index ``floor(dst * (1 / (dst_size / src_size)))``."""
    h, w = src.shape[:2]
    xs = np.minimum(np.floor(np.arange(width) * (1.0 / (width / w))).astype(np.intp), w - 1)
    ys = np.minimum(np.floor(np.arange(height) * (1.0 / (height / h))).astype(np.intp), h - 1)
    return src[ys][:, xs]


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


def pad_constant(img: np.ndarray, pad: int, fill: Fill) -> np.ndarray:
    """``cv::copyMakeBorder(img, pad, pad, pad, pad, BORDER_CONSTANT, fill)``."""
    src, flat = _as_hwc(img)
    h, w, c = src.shape
    out = np.empty((h + 2 * pad, w + 2 * pad, c), np.uint8)
    out[...] = _fill_values(fill, c)
    out[pad:pad + h, pad:pad + w] = src
    return out[:, :, 0] if flat else out


def warp_affine(img: np.ndarray, matrix: np.ndarray, width: int, height: int,
                interpolation: int = INTER_LINEAR, fill: Fill = 0) -> np.ndarray:
    """``cv::warpAffine(img, M, (width, height), interpolation, BORDER_CONSTANT, fill)``.

    ``matrix`` is the 2x3 forward map (as OpenCV takes it without ``WARP_INVERSE_MAP``);
    ``fill`` the border value (a number, or one per channel).
    ``INTER_LINEAR`` (and ``INTER_AREA``, which OpenCV's warps treat as linear) is done in NumPy
    with OpenCV's arithmetic; cubic and Lanczos warps need OpenCV.
    """
    width, height = int(width), int(height)
    _check_size(width, height)
    if interpolation == INTER_AREA:
        interpolation = INTER_LINEAR
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"unknown interpolation {interpolation}: expected one of "
                         f"{sorted(INTERPOLATIONS)}")
    m = np.asarray(matrix, np.float64).reshape(2, 3)
    src, flat = _as_hwc(img)
    values = _fill_values(fill, src.shape[2])
    if interpolation in (INTER_CUBIC, INTER_LANCZOS4):
        cv2 = require("cv2", feature=f"an affine warp with inter_method={interpolation} "
                                     f"({INTERPOLATIONS[interpolation]})")
        border = tuple(int(v) for v in values[:4]) + (0,) * (4 - min(4, len(values)))
        out = cv2.warpAffine(np.ascontiguousarray(img), m, (width, height), flags=interpolation,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=border)
        return out[:, :, None] if img.ndim == 3 and out.ndim == 2 else out
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


def lookup(img: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[img]`` for a uint8 image: ``table`` has 256 entries, or ``(256, C)`` for one per
    channel (``cv2.LUT`` when OpenCV is installed: the same bytes, several times faster)."""
    cv2 = _cv2()
    per_channel = table.ndim == 2
    if cv2 is not None and img.ndim == 3 and img.shape[2] <= 4:
        tab = table.reshape(256, 1, -1) if per_channel else table
        out = cv2.LUT(np.ascontiguousarray(img), np.ascontiguousarray(tab))
        return out.reshape(img.shape)
    if not per_channel:
        return np.take(table, img)
    out = np.empty(img.shape, table.dtype)
    for k in range(img.shape[-1]):
        out[..., k] = np.take(table[:, k], img[..., k])
    return out


def convert_scale(img: np.ndarray, alpha: float, beta: float = 0.0) -> np.ndarray:
    """``img.convertTo(out, -1, alpha, beta)``: ``saturate_cast<uchar>(x * alpha + beta)`` in
    float32 (through a table of the 256 results)."""
    return lookup(img, saturate_uint8(_LEVELS * _F32(alpha) + _F32(beta)))


def add_weighted(a: np.ndarray, alpha: float, b: np.ndarray, beta: float,
                 gamma: float = 0.0) -> np.ndarray:
    """``cv::addWeighted(a, alpha, b, beta, gamma)`` on uint8 images, in float32 (within 1 of
    OpenCV's SIMD rounding). ``b`` may have fewer channels (broadcast), as a grey image."""
    out = a.astype(_F32)
    out *= _F32(alpha)
    out += b.astype(_F32) * _F32(beta)
    if gamma:
        out += _F32(gamma)
    np.rint(out, out=out)
    np.clip(out, 0, 255, out=out)
    return out.astype(np.uint8)


def bgr_to_hls(bgr: np.ndarray) -> np.ndarray:
    """``cvtColor(bgr, CV_BGR2HLS)`` for uint8: H in 0..180 (degrees / 2), L and S in 0..255."""
    f = bgr.astype(_F32) * _F32(1.0 / 255.0)
    b, g, r = f[..., 0], f[..., 1], f[..., 2]
    vmax = np.maximum(np.maximum(r, g), b)
    vmin = np.minimum(np.minimum(r, g), b)
    diff = vmax - vmin
    light = (vmax + vmin) * _F32(0.5)
    has_hue = diff > np.finfo(_F32).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        sat = np.where(light < _F32(0.5), diff / (vmax + vmin), diff / (_F32(2) - vmax - vmin))
        k = _F32(60) / diff
        hue = np.where(vmax == r, (g - b) * k,
                       np.where(vmax == g, (b - r) * k + _F32(120), (r - g) * k + _F32(240)))
    hue = np.where(hue < 0, hue + _F32(360), hue)
    hue = np.where(has_hue, hue, _F32(0))
    sat = np.where(has_hue, sat, _F32(0))
    out = np.empty(bgr.shape, np.uint8)
    out[..., 0] = saturate_uint8(hue * _F32(0.5))
    out[..., 1] = saturate_uint8(light * _F32(255))
    out[..., 2] = saturate_uint8(sat * _F32(255))
    return out


# OpenCV's HLS2RGB sector table: which of (p2, p1, rising, falling) each of b, g, r takes
_HLS_SECTORS = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def hls_to_bgr(hls: np.ndarray) -> np.ndarray:
    """``cvtColor(hls, CV_HLS2BGR)`` for uint8 (H in 0..180)."""
    h = hls[..., 0].astype(_F32)
    light = hls[..., 1].astype(_F32) * _F32(1.0 / 255.0)
    sat = hls[..., 2].astype(_F32) * _F32(1.0 / 255.0)
    p2 = np.where(light <= _F32(0.5), light * (_F32(1) + sat), light + sat - light * sat)
    p1 = _F32(2) * light - p2
    h = h * _F32(6.0 / 180.0)
    h = np.mod(h, _F32(6))
    sector = np.minimum(np.floor(h).astype(np.intp), 5)
    frac = h - sector.astype(_F32)
    tab = np.stack([p2, p1, p1 + (p2 - p1) * (_F32(1) - frac), p1 + (p2 - p1) * frac], axis=-1)
    picks = _HLS_SECTORS[sector]  # (..., 3)
    bgr = np.take_along_axis(tab, picks, axis=-1)
    grey = sat == 0
    bgr[grey] = light[grey][:, None]
    return saturate_uint8(bgr * _F32(255))


def channel_offsets(img: np.ndarray, offsets: Sequence[float],
                    limits: Optional[Sequence[int]] = None) -> np.ndarray:
    """``int v = pixel; v += offset; clamp`` for each channel, as MXNet's HSL and PCA-noise loops
    do (``int += float`` truncates toward zero); ``limits``: each channel's maximum (255)."""
    limits = limits if limits is not None else (255,) * img.shape[-1]
    tables = np.stack([np.clip(np.trunc(_LEVELS + _F32(offset)), 0, limit).astype(np.uint8)
                       for offset, limit in zip(offsets, limits)], axis=1)
    return lookup(img, tables)


__all__ = ["INTER_NEAREST", "INTER_LINEAR", "INTER_CUBIC", "INTER_AREA", "INTER_LANCZOS4",
           "INTERPOLATIONS", "resize", "warp_affine", "pad_constant", "convert_scale",
           "add_weighted", "bgr_to_hls", "hls_to_bgr", "channel_offsets", "saturate_uint8",
           "lookup"]
