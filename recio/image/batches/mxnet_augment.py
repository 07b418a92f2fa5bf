"""MXNet's image augmentation for record iterators, step by step as MXNet 1.9.1 runs it.

:class:`_DefaultAugmenter` is MXNet's C++ ``DefaultImageAugmenter``
(``src/io/image_aug_default.cc``, what ``ImageRecordIter`` applies to each decoded image) and
:class:`_OutputWriter` the last step of its ``ImageRecordIOParser2`` (``ProcessImage``): channel
order, mirror, mean/std/scale, dtype. :class:`MXAugmenter` chains decode -> augment -> write for a
batch slot, which is what ``recio.mx.io.ImageRecordIter`` runs in its decode threads.

The deterministic steps give MXNet's bytes: the shorter-side ``resize``, the centre crop (and the
upscale of an image smaller than the crop), ``pad``, a fixed ``rotate`` or ``max_img_size`` warp,
``mirror``, and the normalisation ``(x - mean) * (scale / std)`` in float32, all through
:mod:`recio.image.pixels.cvops` (OpenCV's arithmetic). The random steps draw the same distributions
as MXNet, in MXNet's order (each draw is noted below): random resized crop (area uniform in
``[min_random_area, max_random_area]``, aspect uniform in ``[min_aspect_ratio, max_aspect_ratio]``,
sides swapped with probability 1/2, ten attempts, else the centre crop), random crop size, rotation,
shear, scale and aspect by an affine warp, brightness / contrast / saturation in a random order, HSL
offsets, PCA lighting noise, mirror, and the parser's ``max_random_contrast`` /
``max_random_illumination``. The random numbers come from a NumPy ``Generator`` given per image
(MXNet's ``std::mt19937`` streams are not reproduced).

Working order is MXNet's: images are BGR (or grey, or BGRA) ``uint8`` ``(H, W, C)`` until
:class:`_OutputWriter` swaps them to RGB. Two of MXNet's quirks are kept because they change the
pixels: contrast and saturation take the grey level of the BGR image through OpenCV's *RGB*
weights (blue weighted 0.299), and a 4-channel image is padded (``pad``, warps) with alpha 0
(MXNet's fill is ``cv::Scalar(v, v, v)``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Optional, Protocol, Sequence, Tuple

import numpy as np

from recio.errors import ImageError
from recio.image.pixels import cvops
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS, decode
from recio.image.pixels.transform import target_size
from recio.records.sniff import image_signature

_F32 = np.float32
#: ``inter_method`` values MXNet accepts: OpenCV's 0-4, 9 (auto: cubic to enlarge, area to
#: shrink, bilinear otherwise) and 10 (one of 0-4 at random for each resize)
_INTER_METHODS = (0, 1, 2, 3, 4, 9, 10)
INTER_AUTO, INTER_RANDOM = 9, 10
#: MXNet's PCA lighting basis: eigenvalue * eigenvector, one row per RGB channel, in float32
_PCA_EIGVEC = (np.array([[55.46, 4.794, 1.148]] * 3, _F32)
               * np.array([[-0.5675, 0.7192, 0.4009],
                           [-0.5808, -0.0045, -0.8140],
                           [-0.5836, -0.6948, 0.4203]], _F32))
#: random resized crop: how many boxes are drawn before falling back to the centre crop
RRC_ATTEMPTS = 10
#: the HSL offsets' upper limits (H is in 0..180 in OpenCV's 8-bit HLS)
_HLS_LIMITS = (180, 255, 255)


@dataclass(frozen=True)
class AugmentParams:
    """The parameters of MXNet's ``DefaultImageAugmenter`` (``help(mx.io.ImageRecordIter)``),
    with MXNet's defaults. ``data_shape`` is ``(channels, height, width)``; ``rotate_list`` is
    MXNet's undocumented list of angles to choose from."""

    data_shape: Tuple[int, int, int]
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    max_rotate_angle: int = 0
    max_aspect_ratio: float = 0.0
    min_aspect_ratio: Optional[float] = None
    max_shear_ratio: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_random_area: float = 1.0
    min_random_area: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    rotate: int = -1
    rotate_list: Tuple[int, ...] = ()
    fill_value: int = 255
    inter_method: int = 1
    pad: int = 0

    def __post_init__(self) -> None:
        c, h, w = self.data_shape
        if c not in (1, 3, 4) or h < 1 or w < 1:
            raise ValueError(f"data_shape must be (channels, height, width) with 1, 3 or 4 "
                             f"channels, got {tuple(self.data_shape)}")
        if self.resize != -1 and self.resize < 1:
            raise ValueError(f"resize must be -1 (no resize) or a size of at least 1, "
                             f"got {self.resize}")
        if self.inter_method not in _INTER_METHODS:
            raise ValueError(f"inter_method must be one of {_INTER_METHODS} (0 nearest, "
                             f"1 bilinear, 2 bicubic, 3 area, 4 Lanczos-4, 9 auto, 10 random), "
                             f"got {self.inter_method}")
        lo, hi = self.aspect_range
        if self.random_resized_crop:
            conflicts = [name for name, bad in (
                ("min_random_scale", self.min_random_scale != 1),
                ("max_random_scale", self.max_random_scale != 1),
                ("min_crop_size", self.min_crop_size != -1),
                ("max_crop_size", self.max_crop_size != -1), ("rand_crop", self.rand_crop)) if bad]
            if conflicts:
                raise ValueError(f"random_resized_crop=True conflicts with {', '.join(conflicts)} "
                                 "(MXNet refuses the combination)")
            if lo <= 0 or lo > hi:
                raise ValueError(f"random_resized_crop draws the aspect ratio from [{lo}, {hi}]: "
                                 "it must be a non-empty range of positive numbers")
            if not 0 < self.min_random_area <= self.max_random_area:
                raise ValueError(f"random_resized_crop draws the area from [min_random_area="
                                 f"{self.min_random_area}, max_random_area="
                                 f"{self.max_random_area}]: it must be a non-empty range above 0")
        elif self.max_crop_size != -1 or self.min_crop_size != -1:
            if not 1 <= self.min_crop_size <= self.max_crop_size:
                raise ValueError(f"min_crop_size={self.min_crop_size} and max_crop_size="
                                 f"{self.max_crop_size}: set both, 1 <= min <= max")
        if self.min_random_scale > self.max_random_scale or self.min_random_scale <= 0:
            raise ValueError(f"min_random_scale={self.min_random_scale} and max_random_scale="
                             f"{self.max_random_scale} must satisfy 0 < min <= max")
        if self.pad < 0:
            raise ValueError(f"pad must be 0 or more, got {self.pad}")
        if not 0 <= self.fill_value <= 255:
            raise ValueError(f"fill_value must be 0..255, got {self.fill_value}")
        colour = [name for name in ("brightness", "contrast", "saturation", "pca_noise",
                                    "random_h", "random_s", "random_l") if getattr(self, name)]
        if colour and c != 3:
            raise ValueError(f"{', '.join(colour)} work on colour images: data_shape needs 3 "
                             f"channels, not {c} (MXNet's OpenCV calls fail on them)")
        if self.affine and self.inter_method == cvops.INTER_NEAREST:
            raise ValueError("inter_method=0 (nearest) cannot be used with rotation, shear, "
                             "random scale or aspect, or max/min_img_size: MXNet refuses it")

    @property
    def aspect_range(self) -> Tuple[float, float]:
        """``[min_aspect_ratio, max_aspect_ratio]``, or ``[1 - max, 1 + max]`` when no minimum is
        given (MXNet's reading of ``max_aspect_ratio``)."""
        if self.min_aspect_ratio is not None:
            return float(_F32(self.min_aspect_ratio)), float(_F32(self.max_aspect_ratio))
        return float(_F32(1) - _F32(self.max_aspect_ratio)), float(_F32(1)
                                                                   + _F32(self.max_aspect_ratio))

    @property
    def affine(self) -> bool:
        """Whether MXNet's affine-warp step runs (rotation, shear, random scale or aspect,
        image size limits)."""
        lo, hi = self.aspect_range
        return bool(self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0
                    or self.rotate_list or self.max_random_scale != 1
                    or self.min_random_scale != 1
                    or (not self.random_resized_crop and (lo != 1 or hi != 1))
                    or self.max_img_size != _F32(1e10) or self.min_img_size != 0)

    @property
    def random(self) -> bool:
        """Whether any step draws random numbers."""
        lo, hi = self.aspect_range
        return bool(self.rand_crop or self.random_resized_crop or self.max_rotate_angle > 0
                    or self.max_shear_ratio > 0 or self.rotate_list
                    or self.max_random_scale != self.min_random_scale or lo != hi
                    or self.max_crop_size != self.min_crop_size or self.brightness
                    or self.contrast or self.saturation or self.pca_noise or self.random_h
                    or self.random_s or self.random_l or self.inter_method == INTER_RANDOM)

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        """The parameter names (``data_shape`` first)."""
        return tuple(f.name for f in fields(cls))


# -- the random draws, as MXNet makes them -------------------------------------------------------
class _Uniforms(Protocol):
    """What ``uniform``, ``randint`` and ``random_resized_crop_box`` draw from: a
    ``numpy.random.Generator``, or draws made ahead (``recio.image.batches.iterators``)."""

    def random(self) -> float: ...

    def integers(self, low: int, high: int) -> int: ...


def uniform(rng: _Uniforms, low: float, high: float) -> float:
    """``std::uniform_real_distribution<float>(low, high)``: ``low + (high - low) * u``."""
    return float(_F32(low) + (_F32(high) - _F32(low)) * _F32(rng.random()))


def randint(rng: _Uniforms, low: int, high: int) -> int:
    """``std::uniform_int_distribution(low, high)``: both ends included."""
    return int(rng.integers(low, high + 1))


def _inter_method_for(inter_method: int, old_w: float, old_h: float, new_w: float, new_h: float,
                      rng: np.random.Generator) -> int:
    """MXNet's ``GetInterMethod``: 9 is bicubic to enlarge both sides, area to shrink both,
    bilinear otherwise; 10 draws one of 0-4; others are themselves."""
    if inter_method == INTER_AUTO:
        if new_w > old_w and new_h > old_h:
            return cvops.INTER_CUBIC
        if new_w < old_w and new_h < old_h:
            return cvops.INTER_AREA
        return cvops.INTER_LINEAR
    if inter_method == INTER_RANDOM:
        return randint(rng, 0, 4)
    return inter_method


def random_resized_crop_box(width: int, height: int, area: Tuple[float, float],
                            ratio: Tuple[float, float], rng: _Uniforms,
                            attempts: int = RRC_ATTEMPTS) -> Optional[Tuple[int, int, int, int]]:
    """MXNet's random resized crop box ``(x, y, w, h)`` of a ``width x height`` image, or None
    when ``attempts`` draws all miss (the caller then centre-crops).

    Each attempt: area fraction uniform in ``area``, aspect (w/h) uniform in ``ratio``, sides
    ``round(sqrt(A / r))`` and ``round(sqrt(A * r))`` swapped with probability 1/2; a box that
    fits gets a uniform position. (A box with a side of 0 counts as a miss; MXNet fails on it.)
    """
    total = _F32(height) * _F32(width)
    for _ in range(attempts):
        fraction = _F32(uniform(rng, area[0], area[1]))
        aspect = _F32(uniform(rng, ratio[0], ratio[1]))
        target = total * fraction
        box_h = _round_half_away(np.sqrt(target / aspect, dtype=_F32))
        box_w = _round_half_away(np.sqrt(target * aspect, dtype=_F32))
        if rng.random() > 0.5:
            box_h, box_w = box_w, box_h
        if 1 <= box_h <= height and 1 <= box_w <= width:
            y = randint(rng, 0, height - box_h)
            x = randint(rng, 0, width - box_w)
            return x, y, box_w, box_h
    return None


def _round_half_away(value: Any) -> int:
    """``std::round``: halves away from zero."""
    return int(math.floor(abs(float(value)) + 0.5)) * (1 if value >= 0 else -1)


# -- the augmenter ------------------------------------------------------------------------------
class _DefaultAugmenter:
    """MXNet's ``DefaultImageAugmenter``: ``process(image, rng)`` turns a decoded BGR (or grey,
    or BGRA) ``uint8`` ``(H, W, C)`` image into the ``(height, width, C)`` image of
    ``data_shape``. Stateless and shared by the decode threads."""

    def __init__(self, params: AugmentParams) -> None:
        self.p = params
        self.height, self.width = params.data_shape[1], params.data_shape[2]
        self.aspect = params.aspect_range
        self.affine = params.affine
        v = params.fill_value  # MXNet's border is cv::Scalar(v, v, v): alpha 0
        self.fill = (v, v, v, 0) if params.data_shape[0] == 4 else v
        self.rrc = params.random_resized_crop and (
            params.max_random_area != 1 or params.min_random_area != 1
            or self.aspect != (1.0, 1.0))

    def process(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = self.p
        res = img
        if p.resize != -1:
            h, w = res.shape[:2]
            new_w, new_h = target_size(w, h, p.resize)
            res = cvops.resize(res, new_w, new_h,
                               _inter_method_for(p.inter_method, w, h, new_w, new_h, rng))
        if self.affine:
            res = self._warp(res, rng)
        if p.pad > 0:
            res = cvops.pad_constant(res, p.pad, self.fill)
        res = self._crop(res, rng)
        if p.brightness > 0 or p.contrast > 0 or p.saturation > 0:
            res = self._jitter(res, rng)
        if p.random_h or p.random_s or p.random_l:
            res = self._hls(res, rng)
        if p.pca_noise > 0:
            res = self._pca(res, rng)
        return res

    def _warp(self, res: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Rotation, shear, scale and aspect in one affine warp (draws: shear, angle, [angle from
        rotate_list], scale, aspect, [interpolation])."""
        p = self.p
        rows, cols = res.shape[:2]
        shear = _F32(rng.random()) * _F32(p.max_shear_ratio) * _F32(2) - _F32(p.max_shear_ratio)
        angle = randint(rng, -p.max_rotate_angle, p.max_rotate_angle)
        if p.rotate > 0:
            angle = p.rotate
        if p.rotate_list:
            angle = p.rotate_list[randint(rng, 0, len(p.rotate_list) - 1)]
        a = _F32(math.cos(angle / 180.0 * math.pi))
        b = _F32(math.sin(angle / 180.0 * math.pi))
        scale = ratio = _F32(1)
        if not p.random_resized_crop:
            scale = (_F32(rng.random()) * (_F32(p.max_random_scale) - _F32(p.min_random_scale))
                     + _F32(p.min_random_scale))
            lo, hi = self.aspect
            ratio = _F32(rng.random()) * (_F32(hi) - _F32(lo)) + _F32(lo)
        hs = _F32(2) * scale / (_F32(1) + ratio)
        ws = ratio * hs
        new_w = max(_F32(p.min_img_size), min(_F32(p.max_img_size), scale * _F32(cols)))
        new_h = max(_F32(p.min_img_size), min(_F32(p.max_img_size), scale * _F32(rows)))
        m = np.zeros((2, 3), _F32)
        m[0, 0] = hs * a - shear * b * ws
        m[1, 0] = -b * ws
        m[0, 1] = hs * b + shear * a * ws
        m[1, 1] = a * ws
        centre_w = m[0, 0] * _F32(cols) + m[0, 1] * _F32(rows)
        centre_h = m[1, 0] * _F32(cols) + m[1, 1] * _F32(rows)
        m[0, 2] = (new_w - centre_w) / _F32(2)
        m[1, 2] = (new_h - centre_h) / _F32(2)
        interp = _inter_method_for(p.inter_method, cols, rows, float(new_w), float(new_h), rng)
        return cvops.warp_affine(res, m.astype(np.float64), int(new_w), int(new_h), interp,
                                 self.fill)

    def _crop(self, res: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Random resized crop, random-size crop, or the centre (or ``rand_crop``) crop."""
        p, out_h, out_w = self.p, self.height, self.width
        rows, cols = res.shape[:2]
        if self.rrc:
            box = random_resized_crop_box(cols, rows, (p.min_random_area, p.max_random_area),
                                          self.aspect, rng)
            if box is not None:
                x, y, w, h = box
                interp = _inter_method_for(p.inter_method, w, h, out_w, out_h, rng)
                return cvops.resize(res[y:y + h, x:x + w], out_w, out_h, interp)
        elif not p.random_resized_crop and (p.max_crop_size != -1 or p.min_crop_size != -1):
            if cols < p.max_crop_size or rows < p.max_crop_size:
                raise ImageError(f"the image ({cols}x{rows} after resize and pad) is smaller than "
                                 f"max_crop_size={p.max_crop_size}")
            size = randint(rng, p.min_crop_size, p.max_crop_size)
            y, x = rows - size, cols - size
            if p.rand_crop:
                y, x = randint(rng, 0, y), randint(rng, 0, x)
            else:
                y, x = y // 2, x // 2
            interp = _inter_method_for(p.inter_method, size, size, out_w, out_h, rng)
            return cvops.resize(res[y:y + size, x:x + size], out_w, out_h, interp)
        interp = _inter_method_for(p.inter_method, cols, rows, out_w, out_h, rng)
        if rows < out_h:  # too small: scale up (float32 arithmetic, truncated) to cover the crop
            cols = int(_F32(out_h) / _F32(rows) * _F32(cols))
            rows = out_h
            res = cvops.resize(res, cols, rows, interp)
        if cols < out_w:
            rows = int(_F32(out_w) / _F32(cols) * _F32(rows))
            cols = out_w
            res = cvops.resize(res, cols, rows, interp)
        y, x = rows - out_h, cols - out_w
        if p.rand_crop:
            y, x = randint(rng, 0, y), randint(rng, 0, x)
        else:
            y, x = y // 2, x // 2
        return res[y:y + out_h, x:x + out_w]

    def _jitter(self, res: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Brightness, contrast and saturation factors ``1 + U(-v, v)``, applied in a random
        order (draws: three factors, then the order)."""
        p = self.p
        factors = [_F32(1.0 + uniform(rng, -p.brightness, p.brightness)),
                   _F32(1.0 + uniform(rng, -p.contrast, p.contrast)),
                   _F32(1.0 + uniform(rng, -p.saturation, p.saturation))]
        for step in rng.permutation(3):
            alpha = factors[step]
            if step == 0:
                res = cvops.convert_scale(res, alpha)
            elif step == 1:
                grey_mean = float(cvops.rgb_to_grey(res).mean())
                res = cvops.convert_scale(res, alpha, (1 - float(alpha)) * grey_mean)
            else:  # the grey image is cvtColor'ed back to 3 equal channels: broadcast it
                res = cvops.add_weighted(res, alpha, cvops.rgb_to_grey(res)[:, :, None], _F32(1) - alpha)
        return res

    def _hls(self, res: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Offsets to H, L and S, each ``(u1 + 4 u2) / 5`` scaled to ``[-v, v]`` (draws: two
        uniforms for each of H, S, L)."""
        p = self.p
        offsets = []
        for limit in (p.random_h, p.random_s, p.random_l):
            r = _F32(rng.random())
            r = (r + _F32(4) * _F32(rng.random())) / _F32(5)
            offsets.append(int(r * _F32(limit) * _F32(2) - _F32(limit)))
        h, s, light = offsets
        hls = cvops.channel_offsets(cvops.bgr_to_hls(res), (h, light, s), _HLS_LIMITS)
        return cvops.hls_to_bgr(hls)

    def _pca(self, res: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """AlexNet-style lighting noise: ``alpha ~ N(0, pca_noise)`` per eigenvector (draws:
        three normals)."""
        alphas = np.array([rng.normal(0.0, self.p.pca_noise) for _ in range(3)], _F32)
        rgb = (_PCA_EIGVEC * alphas[None, :]).sum(axis=1, dtype=_F32)
        return cvops.channel_offsets(res, (rgb[2], rgb[1], rgb[0]))


# -- the parser's last step ---------------------------------------------------------------------
@dataclass(frozen=True)
class OutputParams:
    """How MXNet's parser writes an augmented image into the batch (``ImageNormalizeParam``)."""

    mean: Tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    std: Tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    scale: float = 1.0
    mean_img: Optional[np.ndarray] = None  # (C, H, W) float32
    mirror: bool = False
    rand_mirror: bool = False
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if np.dtype(self.dtype) not in (np.float32, np.uint8, np.int8):
            raise ValueError(f"dtype must be 'float32', 'uint8' or 'int8' (MXNet's "
                             f"ImageRecordIter makes no other), got {self.dtype!r}")
        if any(s == 0 for s in self.std):
            raise ValueError("std_r/std_g/std_b/std_a must not be 0: the data is divided by them")


class _OutputWriter:
    """Writes an augmented BGR image into one ``(C, H, W)`` slot of the batch as MXNet's
    ``ProcessImage``: RGB(A) order, mirrored when drawn, and

    * float32: ``(x - mean) * (c / std) + i / std`` with ``c = (1 + U(-mc, mc)) * scale`` and
      ``i = U(-mi, mi) * scale`` (``mc``/``mi``: ``max_random_contrast``/``_illumination``);
      ``mean`` is the ``mean_img`` pixel when given;
    * uint8: the pixels;
    * int8: ``saturate(x - round(mean))``.

    Draws (after the augmenter's): the mirror coin when ``rand_mirror``, then contrast and
    illumination unless the dtype is uint8.
    """

    def __init__(self, params: OutputParams, channels: int) -> None:
        self.p = params
        self.channels = channels
        self.dtype = np.dtype(params.dtype)
        c = channels
        order = {1: [0], 3: [0, 1, 2], 4: [0, 1, 2, 3]}[c]
        self.mean = np.array([params.mean[k] for k in order], _F32).reshape(c, 1, 1)
        self.std = np.array([params.std[k] for k in order], _F32).reshape(c, 1, 1)
        self.mean_img = None if params.mean_img is None else np.ascontiguousarray(
            params.mean_img, _F32)
        if self.dtype == np.int8:
            rounded = (self.mean_img if self.mean_img is not None else self.mean)
            self.mean_int = np.vectorize(_round_half_away)(rounded).astype(np.int16)
        self.plain = (self.mean_img is None and not self.mean.any() and bool(np.all(self.std == 1))
                      and params.scale == 1 and not params.max_random_contrast
                      and not params.max_random_illumination)

    def draw(self, rng: np.random.Generator) -> Tuple[bool, _F32, _F32]:
        """(mirror?, contrast factor, illumination offset) for one image."""
        p = self.p
        mirror = (p.rand_mirror and bool(rng.random() < 0.5)) or p.mirror
        contrast, illumination = _F32(1), _F32(0)
        if self.dtype != np.uint8:
            mc, mi = _F32(p.max_random_contrast), _F32(p.max_random_illumination)
            contrast = (_F32(rng.random()) * mc * _F32(2) - mc + _F32(1)) * _F32(p.scale)
            illumination = (_F32(rng.random()) * mi * _F32(2) - mi) * _F32(p.scale)
        return mirror, contrast, illumination

    def write(self, img: np.ndarray, out: np.ndarray, mirror: bool, contrast: _F32,
              illumination: _F32) -> None:
        """``img``: augmented ``(H, W, C)`` BGR(A) or grey; ``out``: the ``(C, H, W)`` slot."""
        if img.ndim == 2:
            img = img[:, :, None]
        if img.shape[2] != self.channels or out.shape[1:] != img.shape[:2]:
            raise ImageError(f"the augmented image is {img.shape[1]}x{img.shape[0]} with "
                             f"{img.shape[2]} channels; the batch expects {out.shape[2]}x"
                             f"{out.shape[1]} with {self.channels}")
        chw = img.transpose(2, 0, 1)
        if self.channels == 3:
            chw = chw[::-1]
        elif self.channels == 4:
            chw = chw[[2, 1, 0, 3]]
        dst = out[:, :, ::-1] if mirror else out
        if self.dtype == np.uint8:
            dst[...] = chw
        elif self.dtype == np.int8:
            np.clip(chw.astype(np.int16) - self.mean_int, -128, 127, out=dst, casting="unsafe")
        elif self.plain:
            dst[...] = chw
        else:
            mean = self.mean_img if self.mean_img is not None else self.mean
            np.subtract(chw, mean, out=dst, dtype=_F32)
            np.multiply(dst, contrast / self.std, out=dst)
            if illumination != 0:
                np.add(dst, illumination / self.std, out=dst)


class MXAugmenter:
    """Decode -> :class:`_DefaultAugmenter` -> :class:`_OutputWriter` for one record, as MXNet's
    ``ImageRecordIOParser2`` does each image (what ``recio.mx.io.ImageRecordIter`` runs).

    Images decode as MXNet's iterator decodes them (``recio.image.pixels.codec.decode``: MXNet's
    pixels, full size): colour for 3 channels, greyscale for 1, as stored for 4 (which must
    then have an alpha channel). A JPEG is turned by its EXIF orientation for colour and grey,
    as the ``cv::imdecode`` of MXNet's built-in OpenCV 3.4 does in its parser (a PNG's eXIf
    chunk is not read; ``mx.image.imdecode`` ignores the orientation). Each record gets its
    own random generator, seeded from the iterator's stream (``params``), so a seed gives the
    same batches whatever the thread timing; ``seed_aug`` reseeds it from the record's slot in the batch, as MXNet's
    ``seed_aug`` does.
    """

    def __init__(self, augment: AugmentParams, output: OutputParams,
                 seed_aug: Optional[int] = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        self.augment = _DefaultAugmenter(augment)
        self.channels = augment.data_shape[0]
        self.writer = _OutputWriter(output, self.channels)
        self.seed_aug = seed_aug
        self.max_pixels = int(max_pixels)
        self.sample_shape = tuple(augment.data_shape)
        self.dtype = np.dtype(output.dtype)
        self.color = {1: 0, 3: 1, 4: -1}[self.channels]

    def params(self, rng: np.random.Generator, slots: Sequence[int]) -> np.ndarray:
        """One seed per record (from the iterator's stream, or from the slot with seed_aug)."""
        if self.seed_aug is not None:
            return np.array([[self.seed_aug % 2 ** 64, slot] for slot in slots], np.uint64)
        return rng.integers(0, 2 ** 63 - 1, size=(len(slots), 1), dtype=np.int64)

    def decode(self, img_bytes: bytes) -> np.ndarray:
        """The image as MXNet's iterator decodes it: BGR(A) or grey, ``(H, W, C)``."""
        exif = self.color != -1 and image_signature(img_bytes[:3]) == "jpeg"
        img = decode(img_bytes, self.color, bgr=True, max_pixels=self.max_pixels,
                     exif_transpose=exif)
        if img.ndim == 2:
            img = img[:, :, None]
        if self.channels == 4 and img.shape[2] != 4:
            raise ImageError(f"data_shape has 4 channels but the image has {img.shape[2]} "
                             "(MXNet reads 4-channel images as stored: they need an alpha "
                             "channel)")
        if img.dtype != np.uint8:
            raise ImageError(f"a {img.dtype} image (16-bit PNG) cannot be read as 4 channels")
        return img

    def __call__(self, img_bytes: bytes, out: np.ndarray, params: np.ndarray) -> None:
        rng = np.random.default_rng([int(v) for v in params])
        img = self.augment.process(self.decode(img_bytes), rng)
        self.writer.write(img, out, *self.writer.draw(rng))
