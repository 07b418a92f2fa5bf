"""``recio.mx.image``: ``mxnet.image`` for code that reads and augments images from records.

* ``imdecode(buf, flag=1, to_rgb=1)`` / ``imread`` return what MXNet's do, pixel for pixel:
  MXNet decodes with the OpenCV built into it (no EXIF rotation), ``flag=1`` to ``(H, W, 3)``
  (RGB, or BGR with ``to_rgb=0``), ``flag=0`` to OpenCV's greyscale ``(H, W, 1)``, as an
  :class:`~recio.mx.ndarray.NDArray` (``mx.image.imdecode(img).asnumpy()``, as InsightFace's
  arcface_torch calls it, runs unchanged).
* ``imresize`` (OpenCV 3.4.2's bytes, as MXNet's; see ``recio.image.cvops``), ``resize_short``,
  ``fixed_crop``, ``center_crop``, ``random_crop``, ``random_size_crop``, ``scale_down``,
  ``color_normalize``, ``copyMakeBorder`` (constant border).
* The augmenters of ``mx.image`` (``ResizeAug``, ``CenterCropAug``, ``RandomSizedCropAug``,
  ``ColorJitterAug``, ``LightingAug``, ... and ``CreateAugmenter``), with MXNet's arithmetic and
  MXNet's random draws: they use Python's ``random`` and ``numpy.random`` in the same order as
  MXNet's, so seeding those (``random.seed``, ``numpy.random.seed``) gives MXNet's random
  augmentations too.
* :class:`ImageIter` over ``path_imgrec`` (with or without ``path_imgidx``), ``path_imglist`` +
  ``path_root`` or ``imglist``: MXNet's Python iterator, its batches, pads and
  ``last_batch_handle``.
"""
from __future__ import annotations

import json
import os
import random
import warnings
from numbers import Number
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.image import cvops
from recio.image.codec import DEFAULT_MAX_PIXELS, decode
from recio.image.lists import list_path_candidates
from recio.mx import ndarray as nd
from recio.mx import recordio
from recio.mx.iterators import DataBatch, DataIter
from recio.mx.ndarray import NDArray

ImageSource = Union[bytes, bytearray, memoryview, np.ndarray, NDArray]


def imdecode(buf: ImageSource, flag: int = 1, to_rgb: int = 1,
             out: Optional[Union[NDArray, np.ndarray]] = None) -> NDArray:
    """Decode an image to an ``(H, W, 3)`` (``flag=1``) or ``(H, W, 1)`` (``flag=0``) uint8
    :class:`NDArray`, RGB unless ``to_rgb=0`` (BGR), with MXNet's pixels.

    ``out``: an array of the right shape to decode into (returned). Undecodable bytes, or an
    image declaring more than ``recio.image.codec.DEFAULT_MAX_PIXELS`` pixels, raise
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
    1 bilinear, 2 bicubic, 3 area, 4 Lanczos-4; 9 auto, 10 random as ``_get_interp_method``):
    MXNet's bytes."""
    pixels = _pixels(src)
    if pixels.dtype != np.uint8:
        raise ValueError(f"imresize takes uint8 images (as MXNet's OpenCV resize), got "
                         f"{pixels.dtype}")
    sizes = (pixels.shape[0], pixels.shape[1], int(h), int(w))
    return NDArray(cvops.resize(pixels, int(w), int(h), _get_interp_method(interp, sizes)))


def copyMakeBorder(src: Any, top: int, bot: int, left: int, right: int,  # noqa: N802
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


def _get_interp_method(interp: int, sizes: Sequence[int] = ()) -> int:
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
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int,
               size: Optional[Tuple[int, int]] = None, interp: int = 2) -> NDArray:
    """Crop ``w x h`` at ``(x0, y0)``, then resize to ``size`` (w, h) when given and
    different."""
    out = NDArray(_pixels(src)[y0:y0 + h, x0:x0 + w])
    if size is not None and (w, h) != tuple(size):
        sizes = (h, w, size[1], size[0])
        out = imresize(out, size[0], size[1], interp=_get_interp_method(interp, sizes))
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
        warnings.warn("`min_area` is deprecated. Please use `area` instead.", DeprecationWarning)
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


# -- augmenters ---------------------------------------------------------------------------------
class Augmenter:
    """Base class of the image augmenters: ``aug(src) -> augmented NDArray``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = {k: (v.asnumpy().tolist() if isinstance(v, NDArray)
                            else v.tolist() if isinstance(v, np.ndarray) else v)
                        for k, v in kwargs.items()}

    def dumps(self) -> str:
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src: NDArray) -> NDArray:
        raise NotImplementedError("Must override implementation.")


class SequentialAug(Augmenter):
    def __init__(self, ts: List[Augmenter]) -> None:
        super().__init__()
        self.ts = ts

    def dumps(self) -> Any:
        return [type(self).__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src: NDArray) -> NDArray:
        for aug in self.ts:
            src = aug(src)
        return src


class ResizeAug(Augmenter):
    def __init__(self, size: int, interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: NDArray) -> NDArray:
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    def __init__(self, size: Tuple[int, int], interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: NDArray) -> NDArray:
        sizes = (src.shape[0], src.shape[1], self.size[1], self.size[0])
        return imresize(src, *self.size, interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(Augmenter):
    def __init__(self, size: Tuple[int, int], interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: NDArray) -> NDArray:
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    def __init__(self, size: Tuple[int, int], area: Any, ratio: Tuple[float, float],
                 interp: int = 2, **kwargs: Any) -> None:
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size = size
        if "min_area" in kwargs:
            warnings.warn("`min_area` is deprecated. Please use `area` instead.",
                          DeprecationWarning)
            area = kwargs.pop("min_area")
        if kwargs:
            raise ValueError(f"RandomSizedCropAug: unexpected arguments {sorted(kwargs)}")
        self.area, self.ratio, self.interp = area, ratio, interp

    def __call__(self, src: NDArray) -> NDArray:
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(Augmenter):
    def __init__(self, size: Tuple[int, int], interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: NDArray) -> NDArray:
        return center_crop(src, self.size, self.interp)[0]


class RandomOrderAug(Augmenter):
    def __init__(self, ts: List[Augmenter]) -> None:
        super().__init__()
        self.ts = ts

    def dumps(self) -> Any:
        return [type(self).__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src: NDArray) -> NDArray:
        random.shuffle(self.ts)
        for t in self.ts:
            src = t(src)
        return src


_GREY_COEF = np.array([[[0.299, 0.587, 0.114]]], np.float32)


class BrightnessJitterAug(Augmenter):
    def __init__(self, brightness: float) -> None:
        super().__init__(brightness=brightness)
        self.brightness = brightness

    def __call__(self, src: NDArray) -> NDArray:
        alpha = 1.0 + random.uniform(-self.brightness, self.brightness)
        src *= alpha
        return src


class ContrastJitterAug(Augmenter):
    def __init__(self, contrast: float) -> None:
        super().__init__(contrast=contrast)
        self.contrast = contrast
        self.coef = NDArray(_GREY_COEF)

    def __call__(self, src: NDArray) -> NDArray:
        alpha = 1.0 + random.uniform(-self.contrast, self.contrast)
        gray = src * self.coef
        gray = (3.0 * (1.0 - alpha) / gray.size) * gray.sum()
        src *= alpha
        src += gray
        return src


class SaturationJitterAug(Augmenter):
    def __init__(self, saturation: float) -> None:
        super().__init__(saturation=saturation)
        self.saturation = saturation
        self.coef = NDArray(_GREY_COEF)

    def __call__(self, src: NDArray) -> NDArray:
        alpha = 1.0 + random.uniform(-self.saturation, self.saturation)
        gray = (src * self.coef).sum(axis=2, keepdims=True)
        gray *= (1.0 - alpha)
        src *= alpha
        src += gray
        return src


class HueJitterAug(Augmenter):
    def __init__(self, hue: float) -> None:
        super().__init__(hue=hue)
        self.hue = hue
        self.tyiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321],
                              [0.211, -0.523, 0.311]])
        self.ityiq = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647],
                               [1.0, -1.107, 1.705]])

    def __call__(self, src: NDArray) -> NDArray:
        alpha = random.uniform(-self.hue, self.hue)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = np.dot(np.dot(self.ityiq, bt), self.tyiq).T
        return nd.dot(src, nd.array(t))


class ColorJitterAug(RandomOrderAug):
    def __init__(self, brightness: float, contrast: float, saturation: float) -> None:
        ts: List[Augmenter] = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    def __init__(self, alphastd: float, eigval: np.ndarray, eigvec: np.ndarray) -> None:
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd, self.eigval, self.eigvec = alphastd, eigval, eigvec

    def __call__(self, src: NDArray) -> NDArray:
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        src += nd.array(rgb)
        return src


class ColorNormalizeAug(Augmenter):
    def __init__(self, mean: Any, std: Any) -> None:
        super().__init__(mean=mean, std=std)
        self.mean = mean if mean is None or isinstance(mean, NDArray) else nd.array(mean)
        self.std = std if std is None or isinstance(std, NDArray) else nd.array(std)

    def __call__(self, src: NDArray) -> NDArray:
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p
        self.mat = nd.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]])

    def __call__(self, src: NDArray) -> NDArray:
        if random.random() < self.p:
            src = nd.dot(src, self.mat)
        return src


class HorizontalFlipAug(Augmenter):
    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: NDArray) -> NDArray:
        if random.random() < self.p:
            src = nd.flip(src, axis=1)
        return src


class CastAug(Augmenter):
    def __init__(self, typ: str = "float32") -> None:
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src: NDArray) -> NDArray:
        return src.astype(self.typ)


_PCA_EIGVAL = np.array([55.46, 4.794, 1.148])
_PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]])


def CreateAugmenter(data_shape: Sequence[int], resize: int = 0,  # noqa: N802 - MXNet's name
                    rand_crop: bool = False, rand_resize: bool = False,
                    rand_mirror: bool = False, mean: Any = None, std: Any = None,
                    brightness: float = 0, contrast: float = 0, saturation: float = 0,
                    hue: float = 0, pca_noise: float = 0, rand_gray: float = 0,
                    inter_method: int = 2) -> List[Augmenter]:
    """MXNet's standard augmenter list (resize, crop, mirror, cast to float32, colour jitter,
    hue, lighting, grey, normalisation); ``mean=True`` / ``std=True`` are ImageNet's."""
    auglist: List[Augmenter] = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        if not rand_crop:
            raise ValueError("rand_resize=True needs rand_crop=True (as in MXNet)")
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        auglist.append(LightingAug(pca_noise, _PCA_EIGVAL, _PCA_EIGVEC))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = nd.array([123.68, 116.28, 103.53])
    elif mean is not None and not (isinstance(mean, (np.ndarray, NDArray))
                                   and mean.shape[0] in (1, 3)):
        raise ValueError("mean must be True or an array of 1 or 3 values")
    if std is True:
        std = nd.array([58.395, 57.12, 57.375])
    elif std is not None and not (isinstance(std, (np.ndarray, NDArray))
                                  and std.shape[0] in (1, 3)):
        raise ValueError("std must be True or an array of 1 or 3 values")
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist


_AUGMENTER_ARGS = ("resize", "rand_crop", "rand_resize", "rand_mirror", "mean", "std",
                   "brightness", "contrast", "saturation", "hue", "pca_noise", "rand_gray",
                   "inter_method")


class ImageIter(DataIter):
    """MXNet's Python image iterator: batches of ``(batch_size, 3, H, W)`` float32 from a
    ``.rec`` (``path_imgrec``, with ``path_imgidx`` for shuffling and parts), an image list
    (``path_imglist`` + ``path_root``) or ``imglist``, through ``aug_list`` (default:
    :func:`CreateAugmenter` with the remaining keyword arguments). ``last_batch_handle``:
    ``'pad'`` (from the start; ``pad`` says how many), ``'discard'`` or ``'roll_over'``.
    Shuffling uses Python's ``random``, as MXNet's."""

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: Optional[str] = None, path_imglist: Optional[str] = None,
                 path_root: Optional[str] = None, path_imgidx: Optional[str] = None,
                 shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: Optional[List[Callable[[NDArray], NDArray]]] = None,
                 imglist: Optional[list] = None, data_name: str = "data",
                 label_name: str = "softmax_label", dtype: str = "float32",
                 last_batch_handle: str = "pad", **kwargs: Any) -> None:
        super().__init__()
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ValueError("ImageIter needs path_imgrec, path_imglist or imglist")
        if dtype not in ("int32", "float32", "int64", "float64"):
            raise ValueError(f"{dtype} label not supported (int32, float32, int64, float64)")
        unknown = sorted(set(kwargs) - set(_AUGMENTER_ARGS))
        if unknown:
            raise ValueError(f"ImageIter: unknown parameter{'s' * (len(unknown) > 1)} "
                             f"{', '.join(unknown)}; besides its own it takes CreateAugmenter's: "
                             f"{', '.join(_AUGMENTER_ARGS)}")
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"last_batch_handle must be 'pad', 'discard' or 'roll_over', got "
                             f"{last_batch_handle!r}")
        self.imgrec: Any = None
        self.imgidx: Optional[list] = None
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
        imgkeys: list = []
        self.imglist: Optional[Dict[Any, Tuple[NDArray, str]]] = None
        if path_imglist:
            self.imglist = {}
            with open(path_imglist, encoding="utf-8", errors="surrogateescape") as fin:
                for line in iter(fin.readline, ""):
                    fields = line.strip().split("\t")
                    key = int(fields[0])
                    self.imglist[key] = (nd.array(fields[1:-1], dtype=dtype), fields[-1])
                    imgkeys.append(key)
        elif isinstance(imglist, list):
            self.imglist = {}
            for number, img in enumerate(imglist, 1):
                name = str(number)
                if len(img) > 2:
                    label = nd.array(img[:-1], dtype=dtype)
                elif isinstance(img[0], Number):
                    label = nd.array([img[0]], dtype=dtype)
                else:
                    label = nd.array(img[0], dtype=dtype)
                self.imglist[name] = (label, img[-1])
                imgkeys.append(name)
        self.path_root = path_root
        data_shape = tuple(data_shape)
        self.check_data_shape(data_shape)
        self.provide_data = [(data_name, (batch_size,) + data_shape)]
        if label_width > 1:
            self.provide_label: List[Tuple[str, Tuple[int, ...]]] = [
                (label_name, (batch_size, label_width))]
        else:
            self.provide_label = [(label_name, (batch_size,))]
        self.batch_size, self.data_shape = batch_size, data_shape
        self.label_width, self.shuffle = label_width, shuffle
        if self.imgrec is None:
            self.seq: Optional[list] = imgkeys
        elif shuffle or num_parts > 1 or path_imgidx:
            if self.imgidx is None:
                raise ValueError("shuffle and num_parts need path_imgidx with path_imgrec")
            self.seq = self.imgidx
        else:
            self.seq = None
        if num_parts > 1:
            if not 0 <= part_index < num_parts:
                raise ValueError(f"part_index must be in 0..{num_parts - 1}, got {part_index}")
            assert self.seq is not None  # num_parts > 1 gave it one above
            per_part = len(self.seq) // num_parts
            self.seq = self.seq[part_index * per_part:(part_index + 1) * per_part]
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.cur = 0
        self._allow_read = True
        self.last_batch_handle = last_batch_handle
        self.num_image = len(self.seq) if self.seq is not None else None
        self._cache_data: Optional[NDArray] = None
        self._cache_label: Optional[NDArray] = None
        self._cache_idx: Optional[int] = None
        self.reset()

    def reset(self) -> None:
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.last_batch_handle != "roll_over" or self._cache_data is None:
            if self.imgrec is not None:
                self.imgrec.reset()
            self.cur = 0
            self._allow_read = True

    def hard_reset(self) -> None:
        """Back to the start, dropping any rolled-over samples."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True
        self._cache_data = self._cache_label = self._cache_idx = None

    def next_sample(self) -> Tuple[Any, bytes]:
        """``(label, encoded image)`` of the next sample; ``StopIteration`` at the end."""
        if not self._allow_read:
            raise StopIteration
        if self.seq is not None:
            assert self.num_image is not None  # len(self.seq)
            if self.cur < self.num_image:
                idx = self.seq[self.cur]
            else:
                if self.last_batch_handle != "discard":
                    self.cur = 0
                raise StopIteration
            self.cur += 1
            if self.imgrec is not None:
                header, img = recordio.unpack(self.imgrec.read_idx(idx))
                if self.imglist is None:
                    return header.label, img
                return self.imglist[idx][0], img
            assert self.imglist is not None  # no .rec: the samples come from the list
            label, fname = self.imglist[idx]
            return label, self.read_image(fname)
        record = self.imgrec.read()
        if record is None:
            if self.last_batch_handle != "discard":
                self.imgrec.reset()
            raise StopIteration
        header, img = recordio.unpack(record)
        return header.label, img

    def _batchify(self, batch_data: NDArray, batch_label: NDArray, start: int = 0) -> int:
        i = start
        try:
            while i < self.batch_size:
                label, s = self.next_sample()
                data = self.imdecode(s)
                try:
                    self.check_valid_image(data)
                except RuntimeError:
                    continue
                data = self.augmentation_transform(data)
                batch_data[i] = self.postprocess_data(data)
                batch_label[i] = label
                i += 1
        except StopIteration:
            if not i:
                raise
        return i

    def next(self) -> DataBatch:
        c, h, w = self.data_shape
        if self._cache_data is not None:
            batch_data, batch_label, i = self._cache_data, self._cache_label, self._cache_idx
            assert batch_label is not None and i is not None  # cached with batch_data
        else:
            batch_data = nd.zeros((self.batch_size, c, h, w))
            batch_label = nd.zeros(self.provide_label[0][1])
            i = self._batchify(batch_data, batch_label)
        pad = self.batch_size - i
        if pad:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache_data is None:
                self._cache_data, self._cache_label, self._cache_idx = (batch_data, batch_label,
                                                                         i)
                raise StopIteration
            self._batchify(batch_data, batch_label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache_data = self._cache_label = self._cache_idx = None
        return DataBatch([batch_data], [batch_label], pad=pad)

    def check_data_shape(self, data_shape: Sequence[int]) -> None:
        if len(data_shape) != 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if data_shape[0] != 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")

    def check_valid_image(self, data: Any) -> None:
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def imdecode(self, s: bytes) -> NDArray:
        """Decode one image (RGB); a broken one raises ``RuntimeError`` naming the sample."""
        try:
            return imdecode(s)
        except Exception as exc:  # noqa: BLE001 - MXNet's message, the cause kept
            where = self.seq[(self.cur % len(self.seq)) - 1] if self.seq else self.cur - 1
            raise RuntimeError(f"Broken image index: {where}, {exc}") from exc

    def read_image(self, fname: str) -> bytes:
        """The file ``fname`` (a list's path: on POSIX its ``\\`` are separators; see
        ``recio.image.lists.list_path_candidates``) under ``path_root``."""
        paths = [os.path.join(self.path_root or "", name) for name in list_path_candidates(fname)]
        with open(next((p for p in paths if os.path.exists(p)), paths[0]), "rb") as fin:
            return fin.read()

    def augmentation_transform(self, data: NDArray) -> NDArray:
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum: NDArray) -> NDArray:
        return datum.transpose((2, 0, 1))


__all__ = ["imdecode", "imread", "imresize", "resize_short", "fixed_crop", "center_crop",
           "random_crop", "random_size_crop", "scale_down", "color_normalize", "copyMakeBorder",
           "Augmenter", "SequentialAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "RandomOrderAug", "BrightnessJitterAug",
           "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug",
           "LightingAug", "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug",
           "CreateAugmenter", "ImageIter", "NDArray"]
