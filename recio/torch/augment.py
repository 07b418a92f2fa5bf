"""``ImageAugment``: ImageBatchIter's decode + augmentation as a transform of ``recio.torch``'s
datasets (with ``decode="raw"``), from the encoded image bytes straight to a CHW tensor.

The augmentation itself is ``recio.image.batches.augmenter.Augmenter`` (MXNet's arithmetic); this
module draws its random numbers from torch's generator, which ``DataLoader`` seeds differently
in each worker, and gives the batch path (``recio.torch.batching``) the shape, dtype and random
numbers of a whole batch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import numpy as np

from recio.image.pixels.codec import DEFAULT_MAX_PIXELS
from recio.image.batches.augmenter import RRC_AREA, RRC_RATIO, Augmenter
from recio.optional import require

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
else:
    torch = require("torch", feature="recio.torch")


class ImageAugment:
    """A transform for ``decode="raw"``: ImageBatchIter's decode + augmentation in one step.

    Decodes the image bytes, then resize / crop (random with ``rand_crop``, or ImageNet's random
    resized crop with ``random_resized_crop``) / mirror / ``(x - mean) / std * scale`` exactly as
    ``recio.ImageBatchIter`` does, straight into a float32 CHW tensor (uint8 with
    ``dtype="uint8"``, for normalising on the device). Random choices use torch's generator,
    which ``DataLoader`` seeds differently in each worker.

    Given to ``RecordDataset``, it is also the fast path: ``DataLoader`` then gets each batch
    decoded in one call into one array and passed from the worker without a copy (see
    ``RecordDataset.__getitems__``)::

        ds = RecordDataset("train.rec", decode="raw", transform=ImageAugment(
            (3, 224, 224), random_resized_crop=True, rand_mirror=True, dtype="uint8"))

    ``random_resized_crop``: a box of ``area`` (fraction of the image, default 0.08-1) and
    aspect ``ratio`` (width / height, default 3/4-4/3) resized to ``data_shape``
    (``recio.image.batches.augmenter.Augmenter`` says how the box is drawn and decoded).
    """

    def __init__(self, data_shape: Sequence[int], resize: int = -1, rand_crop: bool = False,
                 rand_mirror: bool = False, mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, scale: float = 1.0,
                 dtype: str = "float32", max_pixels: int = DEFAULT_MAX_PIXELS, *, random_resized_crop: bool = False,
                 area: Tuple[float, float] = RRC_AREA,
                 ratio: Tuple[float, float] = RRC_RATIO) -> None:
        shape = tuple(int(v) for v in data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3):
            raise ValueError(f"data_shape must be (channels, height, width) with 1 or 3 "
                             f"channels, got {tuple(data_shape)}")
        if np.dtype(dtype) not in (np.float32, np.uint8):
            raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
        if np.dtype(dtype) == np.uint8 and (mean is not None or std is not None or scale != 1):
            raise ValueError("dtype='uint8' skips normalisation: leave mean/std/scale unset")
        if random_resized_crop and rand_crop:
            raise ValueError("random_resized_crop and rand_crop are two kinds of crop: choose one")
        self.shape, self.dtype = shape, np.dtype(dtype)
        self._torch_dtype = torch.uint8 if self.dtype == np.uint8 else torch.float32
        mean_, std_ = (None if v is None else np.asarray(v, np.float32) for v in (mean, std))
        self.augmenter = Augmenter(shape, resize, rand_crop, rand_mirror, mean_, std_, scale,
                                   dtype, "NCHW", max_pixels,
                                   random_resized_crop=random_resized_crop, area=area,
                                   ratio=ratio)

    def draw(self, n: int) -> np.ndarray:
        """The random numbers of ``n`` images (``Augmenter.params``' rows), from torch's
        generator."""
        return torch.rand((n, self.augmenter.draws), dtype=torch.float64).numpy()

    def __call__(self, img_bytes: bytes) -> "torch.Tensor":
        out = torch.empty(self.shape, dtype=self._torch_dtype)  # torch's allocator, reused
        self.augmenter(img_bytes, out.numpy(), self.draw(1)[0])
        return out
