"""The augmentation of :class:`~recio.image.batches.iterators.ImageBatchIter`: one image record's
bytes decoded and augmented straight into one slot of the batch array.

Kept apart from the iterator because it is reused on its own: ``recio.torch.ImageAugment`` runs
the same :class:`Augmenter` per sample, and custom loaders may too. Its random numbers are drawn
ahead by the caller (``params``), in stream order, so the pixels do not depend on which thread
decodes an image. ``RRC_AREA`` and ``RRC_RATIO`` are the random resized crop's default ranges.
"""
from __future__ import annotations

import math
import threading
from typing import Optional, Sequence, Tuple

import numpy as np
from PIL import Image

from recio.image.pixels import cvops
from recio.image.batches.mxnet_augment import RRC_ATTEMPTS, random_resized_crop_box
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS, decode, jpeg_size


#: the random resized crop's default ranges, ImageNet's (torchvision's and GluonCV's defaults)
RRC_AREA = (0.08, 1.0)
RRC_RATIO = (3 / 4, 4 / 3)
#: the uniforms one image's random resized crop may use: three a box (area, aspect, side swap)
#: for RRC_ATTEMPTS boxes, and two for the position of the box that fits
_RRC_DRAWS = 3 * RRC_ATTEMPTS + 2


class Augmenter:
    """Decode one image record's bytes and write the augmented result into a batch slot.

    Shared read-only by the worker threads. ``params`` is one row of :meth:`params`: uniform
    numbers in [0, 1) drawn in stream order by the caller (crop x, crop y, mirror, then the
    random resized crop's draws), so a seed gives the same pixels whatever thread runs an image.
    Public so that custom loaders can reuse the augmentation (``recio.torch.ImageAugment`` does).

    ``random_resized_crop=True`` replaces the fixed-size crop by ImageNet's training crop: a box
    of ``area`` (fraction of the image, uniform) and aspect ``ratio`` (width / height, uniform,
    sides swapped with probability 1/2: MXNet's rule, ``recio.image.batches.mxnet_augment``'s
    ``random_resized_crop_box``; ten draws, else the largest centred box within ``ratio``),
    resized to ``data_shape`` bilinearly (``recio.image.pixels.cvops.resize``: OpenCV's pixels). A
    JPEG whose box shrinks by 2 or more is decoded at 1/2, 1/4 or 1/8 scale in the DCT domain first.
    """

    def __init__(self, data_shape: Sequence[int], resize: int = -1, rand_crop: bool = False,
                 rand_mirror: bool = False, mean: Optional[np.ndarray] = None,
                 std: Optional[np.ndarray] = None, scale: float = 1.0, dtype: str = "float32",
                 layout: str = "NCHW", max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 random_resized_crop: bool = False,
                 area: Tuple[float, float] = RRC_AREA,
                 ratio: Tuple[float, float] = RRC_RATIO) -> None:
        c, h, w = (int(v) for v in data_shape)
        self.max_pixels = int(max_pixels)
        self.channels, self.height, self.width = c, h, w
        self.color = 1 if c == 3 else 0  # the decode flag: colour or greyscale
        self.resize = int(resize)
        self.rand_crop, self.rand_mirror = bool(rand_crop), bool(rand_mirror)
        self.random_resized_crop = bool(random_resized_crop)
        #: how many uniform numbers one image takes (a row of ``params``)
        self.draws = 3 + (_RRC_DRAWS if self.random_resized_crop else 0)
        self.area = (float(area[0]), float(area[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        if self.random_resized_crop:
            if not 0 < self.area[0] <= self.area[1] <= 1:
                raise ValueError(f"area must be a range 0 < min <= max <= 1 (fractions of the "
                                 f"image), got {tuple(area)}")
            if not 0 < self.ratio[0] <= self.ratio[1]:
                raise ValueError(f"ratio must be a range 0 < min <= max (width / height), got "
                                 f"{tuple(ratio)}")
        self.dtype, self.layout = np.dtype(dtype), layout
        self.sample_shape = (c, h, w) if layout == "NCHW" else (h, w, c)
        # (x - mean) * k with k = scale / std, shaped to broadcast over one sample
        shape = (c, 1, 1) if layout == "NCHW" else (1, 1, c)
        self.mean: Optional[np.ndarray] = None
        self.k: Optional[np.ndarray] = None
        if self.dtype == np.float32:
            if mean is not None:
                m = np.asarray(mean, dtype=np.float32)
                if m.ndim == 3 and layout == "NHWC":
                    m = m.transpose(1, 2, 0)
                m = m if m.ndim == 3 else m.reshape(shape)
                if np.any(m != 0):
                    self.mean = np.ascontiguousarray(m)
            s = np.ones(c, np.float32) if std is None else np.asarray(std, np.float32)
            k = (np.float32(scale) / s).astype(np.float32).reshape(shape)
            if np.any(k != 1):
                self.k = k
        # a per-channel mean over a CHW slot: the crop is first copied as uint8 CHW into a
        # per-thread scratch, then normalised with contiguous (SIMD) passes
        self._staged = layout == "NCHW" and (self.mean is None or self.mean.shape[1:] == (1, 1))
        self._scratch = threading.local()

    def params(self, rng: np.random.Generator, slots: Sequence[int]) -> np.ndarray:
        """The random numbers of the records going to ``slots``: three uniforms each (crop x,
        crop y, mirror), and with ``random_resized_crop`` the box's draws after them."""
        return rng.random((len(slots), self.draws))

    def decode(self, img_bytes: bytes) -> np.ndarray:
        """The image as a uint8 HWC array (C = 1 or 3), shorter side scaled to ``resize`` if set.

        JPEGs are decoded at 1/2, 1/4 or 1/8 scale in the DCT domain when that still leaves the
        shorter side at least ``resize``, which makes large photos much cheaper to decode.
        Undecodable bytes, or an image declaring more than ``max_pixels`` pixels, raise
        :class:`~recio.errors.ImageError`.
        """
        arr = self._decode(img_bytes)
        return arr[:, :, None] if arr.ndim == 2 else arr

    def _decode(self, img_bytes: bytes, min_side: int = 0, scratch: bool = False) -> np.ndarray:
        """Decoded (HW or HWC) and resized, uncropped (``scratch``: maybe in this thread's
        decode buffer, which the thread's next decode overwrites)."""
        img = decode(img_bytes, self.color, min_side=max(self.resize, min_side, 0),
                     max_pixels=self.max_pixels, scratch=scratch)
        if self.resize > 0:
            h, w = img.shape[:2]
            if min(w, h) != self.resize:
                size = ((self.resize, h * self.resize // w) if w <= h
                        else (w * self.resize // h, self.resize))
                img = _resize(img, max(1, size[0]), max(1, size[1]))
        return img

    def to_array(self, img_bytes: bytes, params: Sequence[float] = (0.5, 0.5, 1.0)) -> np.ndarray:
        """The augmented image as a uint8 HWC view: crop (random with ``rand_crop`` at
        fractions ``params[0:2]``, else centred; the random resized crop with
        ``random_resized_crop``), mirrored when ``params[2] < 0.5``."""
        return self._view(img_bytes, params, scratch=False)

    def _view(self, img_bytes: bytes, params: Sequence[float], scratch: bool) -> np.ndarray:
        if self.random_resized_crop:
            return self._mirror(self._resized_crop(img_bytes, params), params)
        img = self._decode(img_bytes, scratch=scratch)
        h, w = img.shape[:2]
        cw, ch = self.width, self.height
        if w < cw or h < ch:  # too small: scale up (keeping the aspect) until the crop fits
            s = max(cw / w, ch / h)
            w, h = max(cw, math.ceil(w * s)), max(ch, math.ceil(h * s))
            img = _resize(img, w, h)
        if self.rand_crop:
            x0 = min(int(params[0] * (w - cw + 1)), w - cw)
            y0 = min(int(params[1] * (h - ch + 1)), h - ch)
        else:
            x0, y0 = (w - cw) // 2, (h - ch) // 2
        return self._mirror(img[y0:y0 + ch, x0:x0 + cw], params)

    def _mirror(self, view: np.ndarray, params: Sequence[float]) -> np.ndarray:
        if view.ndim == 2:
            view = view[:, :, None]
        if self.rand_mirror and params[2] < 0.5:
            view = view[:, ::-1]
        return view

    def _resized_crop(self, img_bytes: bytes, params: Sequence[float]) -> np.ndarray:
        """The random resized crop (HW or HWC, ``data_shape``'s size), before the mirror."""
        draws = _Draws(params[3:])
        size = None if self.resize > 0 else jpeg_size(img_bytes)
        if size is None:  # not a JPEG (or resized first): decode, then draw on its size
            img, scale = self._decode(img_bytes, scratch=True), 1.0
            width, height = img.shape[1], img.shape[0]
            box = self._box(width, height, draws)
        else:  # a JPEG: draw the box first, then decode no larger than the box needs
            width, height = size
            box = self._box(width, height, draws)
            need = max(self.width / box[2], self.height / box[3])  # the box's scale factor
            min_side = math.ceil(need * min(width, height)) if need < 0.5 else 0
            img = self._decode(img_bytes, min_side, scratch=True)
            scale = img.shape[1] / width
        x, y, bw, bh = box
        x0, y0 = int(x * scale), int(y * scale)
        x1 = max(x0 + 1, min(img.shape[1], int(math.ceil((x + bw) * scale))))
        y1 = max(y0 + 1, min(img.shape[0], int(math.ceil((y + bh) * scale))))
        return cvops.resize(img[y0:y1, x0:x1], self.width, self.height, cvops.INTER_LINEAR)

    def _box(self, width: int, height: int, draws: "_Draws") -> Tuple[int, int, int, int]:
        box = random_resized_crop_box(width, height, self.area, self.ratio, draws)
        if box is not None:
            return box
        # every draw missed (an extreme aspect): the largest centred box within ``ratio``
        bw, bh = width, height
        if width / height < self.ratio[0]:
            bh = max(1, min(height, round(width / self.ratio[0])))
        elif width / height > self.ratio[1]:
            bw = max(1, min(width, round(height * self.ratio[1])))
        return (width - bw) // 2, (height - bh) // 2, bw, bh

    def __call__(self, img_bytes: bytes, out: np.ndarray, params: Sequence[float]) -> None:
        """Decode + augment into ``out`` (one sample of the batch array, in its layout/dtype)."""
        # the view is copied into ``out`` before this thread decodes again: the decode may
        # use the thread's scratch buffer
        view = self._view(img_bytes, params, scratch=True)
        if self.layout == "NCHW":
            src = view.transpose(2, 0, 1)
            if self._staged and (self.mean is not None or self.k is not None):
                src = self._stage(src)
        elif view.strides[1] < 0 and self.mean is None and self.k is None:
            # a mirrored HWC copy is much faster one channel at a time (long inner loops)
            for c in range(self.channels):
                out[:, :, c] = view[:, :, c]
            return
        else:
            src = view
        if self.mean is not None:
            np.subtract(src, self.mean, out=out)
            if self.k is not None:
                np.multiply(out, self.k, out=out)
        elif self.k is not None:
            np.multiply(src, self.k, out=out)
        else:
            out[...] = src

    def _stage(self, chw: np.ndarray) -> np.ndarray:
        """``chw`` (a strided uint8 view) copied into this thread's contiguous scratch: the
        float passes after it then run on contiguous memory (same values)."""
        scratch = getattr(self._scratch, "array", None)
        if scratch is None or scratch.shape != chw.shape:
            scratch = self._scratch.array = np.empty(chw.shape, np.uint8)
        scratch[...] = chw
        return scratch

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_scratch"]  # per thread, and per process
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._scratch = threading.local()


class _Draws:
    """A row of uniforms drawn ahead (in stream order, by the producer), served one by one as
    the two ``Generator`` methods ``random_resized_crop_box`` calls: the box rule stays in one
    place and the pixels do not depend on which thread runs the image."""

    __slots__ = ("values", "next")

    def __init__(self, values: Sequence[float]) -> None:
        self.values, self.next = values, 0

    def random(self) -> float:
        value = float(self.values[self.next])
        self.next += 1
        return value

    def integers(self, low: int, high: int) -> int:
        """Uniform in ``[low, high)``, as ``Generator.integers``."""
        return low + min(int(self.random() * (high - low)), high - low - 1)


def _resize(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Bilinear resize (Pillow's) of a uint8 HW or HWC array."""
    return np.asarray(Image.fromarray(img).resize((width, height), Image.Resampling.BILINEAR))
