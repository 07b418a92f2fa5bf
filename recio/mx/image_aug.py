"""The augmenters of ``mx.image`` (``ResizeAug``, ``CenterCropAug``, ``RandomSizedCropAug``,
``ColorJitterAug``, ``LightingAug``, ... and ``CreateAugmenter``, MXNet's standard list), with
MXNet's arithmetic and its random draws in MXNet's order.

User code reaches them as ``mx.image.ResizeAug`` etc. (``recio.mx.image`` imports them), as in
MXNet; ``ImageIter`` runs the list ``CreateAugmenter`` makes.
"""
from __future__ import annotations

import json
import random
import warnings
from typing import Any, List, Sequence, Tuple

import numpy as np

from recio.errors import suggests_keywords
from recio.mx import ndarray as nd
from recio.mx.image_ops import (
    center_crop,
    color_normalize,
    get_interp_method,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
)
from recio.mx.ndarray import NDArray


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
        return imresize(src, *self.size, interp=get_interp_method(self.interp, sizes))


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
                          DeprecationWarning, stacklevel=2)
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


@suggests_keywords
def CreateAugmenter(data_shape: Sequence[int], resize: int = 0,  # MXNet's name
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
