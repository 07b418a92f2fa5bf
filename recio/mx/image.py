"""``recio.mx.image``: ``mxnet.image`` for code that reads and augments images from records.

* ``imdecode(buf, flag=1, to_rgb=1)`` / ``imread`` return what MXNet's do, pixel for pixel:
  MXNet decodes with the OpenCV built into it (no EXIF rotation), ``flag=1`` to ``(H, W, 3)``
  (RGB, or BGR with ``to_rgb=0``), ``flag=0`` to OpenCV's greyscale ``(H, W, 1)``, as an
  :class:`~recio.mx.ndarray.NDArray` (``mx.image.imdecode(img).asnumpy()``, as InsightFace's
  arcface_torch calls it, runs unchanged).
* ``imresize`` (OpenCV 3.4.2's bytes, as MXNet's; see ``recio.image.pixels.cvops``),
  ``resize_short``, ``fixed_crop``, ``center_crop``, ``random_crop``, ``random_size_crop``,
  ``scale_down``, ``color_normalize``, ``copyMakeBorder`` (constant border).
* The augmenters of ``mx.image`` (``ResizeAug``, ``CenterCropAug``, ``RandomSizedCropAug``,
  ``ColorJitterAug``, ``LightingAug``, ... and ``CreateAugmenter``), with MXNet's arithmetic and
  MXNet's random draws: they use Python's ``random`` and ``numpy.random`` in the same order as
  MXNet's, so seeding those (``random.seed``, ``numpy.random.seed``) gives MXNet's random
  augmentations too.
* :class:`ImageIter` over ``path_imgrec`` (with or without ``path_imgidx``), ``path_imglist`` +
  ``path_root`` or ``imglist``: MXNet's Python iterator, its batches, pads and
  ``last_batch_handle``; an image nothing decodes is skipped and counted (``num_skipped``) where
  MXNet's raises, unless ``on_undecodable="raise"`` (``recio.image.undecodable``).
"""
from __future__ import annotations

import inspect
import os
import random
from numbers import Number
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from recio.errors import ImageError, unknown_names
from recio.image.lists import list_path_candidates
from recio.image.undecodable import SKIP, SkipCount, check_policy, skip_or_raise, undecodable
from recio.mx import ndarray as nd
from recio.mx import recordio
from recio.mx.image_aug import (
    Augmenter,
    BrightnessJitterAug,
    CastAug,
    CenterCropAug,
    ColorJitterAug,
    ColorNormalizeAug,
    ContrastJitterAug,
    CreateAugmenter,
    ForceResizeAug,
    HorizontalFlipAug,
    HueJitterAug,
    LightingAug,
    RandomCropAug,
    RandomGrayAug,
    RandomOrderAug,
    RandomSizedCropAug,
    ResizeAug,
    SaturationJitterAug,
    SequentialAug,
)
from recio.mx.image_ops import (
    center_crop,
    color_normalize,
    copyMakeBorder,
    fixed_crop,
    imdecode,
    imread,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
    scale_down,
)
from recio.mx.iterators import DataBatch, DataIter
from recio.mx.ndarray import NDArray
from recio.storage import open_regular


_AUGMENTER_ARGS = ("resize", "rand_crop", "rand_resize", "rand_mirror", "mean", "std",
                   "brightness", "contrast", "saturation", "hue", "pca_noise", "rand_gray",
                   "inter_method")


class ImageIter(DataIter):
    """MXNet's Python image iterator: batches of ``(batch_size, 3, H, W)`` float32 from a
    ``.rec`` (``path_imgrec``, with ``path_imgidx`` for shuffling and parts), an image list
    (``path_imglist`` + ``path_root``) or ``imglist``, through ``aug_list`` (default:
    :func:`CreateAugmenter` with the remaining keyword arguments). ``last_batch_handle``:
    ``'pad'`` (from the start; ``pad`` says how many), ``'discard'`` or ``'roll_over'``.
    Shuffling uses Python's ``random``, as MXNet's.

    An image nothing decodes (``imdecode`` raises) is skipped with a ``SkippedRecordWarning``
    naming its file, key (or place in the file) and byte offset, and counted in
    ``num_skipped``; with ``on_undecodable="raise"`` (recio's own parameter) it raises
    ``ImageError`` instead. MXNet 1.9.1's raises ``RuntimeError("Broken image ...")``; what its
    ``check_valid_image`` refuses is skipped unwarned, as there."""

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: Optional[str] = None, path_imglist: Optional[str] = None,
                 path_root: Optional[str] = None, path_imgidx: Optional[str] = None,
                 shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: Optional[List[Callable[[NDArray], NDArray]]] = None,
                 imglist: Optional[list] = None, data_name: str = "data",
                 label_name: str = "softmax_label", dtype: str = "float32",
                 last_batch_handle: str = "pad", on_undecodable: str = SKIP,
                 **kwargs: Any) -> None:
        super().__init__()
        self.on_undecodable = check_policy(on_undecodable)
        self._skipped = SkipCount()
        self._where = (0, 0)  # (records read in sequence, offset of the last one)
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ValueError("ImageIter needs path_imgrec, path_imglist or imglist")
        if dtype not in ("int32", "float32", "int64", "float64"):
            raise ValueError(f"{dtype} label not supported (int32, float32, int64, float64)")
        unknown = set(kwargs) - set(_AUGMENTER_ARGS)
        if unknown:
            own = [n for n in inspect.signature(ImageIter.__init__).parameters
                   if n not in ("self", "kwargs")]
            names = unknown_names("parameter", unknown, own + list(_AUGMENTER_ARGS))
            raise ValueError(f"ImageIter: {names}; besides its own it takes CreateAugmenter's: "
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
            with open_regular(path_imglist, "r", encoding="utf-8",
                              errors="surrogateescape") as fin:
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
            self._where = (0, 0)

    @property
    def num_skipped(self) -> int:
        """Images skipped so far (all epochs) because they did not decode."""
        return self._skipped.value

    def hard_reset(self) -> None:
        """Back to the start, dropping any rolled-over samples."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True
        self._where = (0, 0)
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
        self._where = (self._where[0] + 1, self.imgrec.tell())
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
                try:
                    label, s = self.next_sample()
                    data = self.imdecode(s)
                except (RuntimeError, ImageError) as exc:  # a header or an image that is bad
                    skip_or_raise(self._undecodable(exc), self.on_undecodable)
                    self._skipped.add()
                    continue
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

    def _undecodable(self, exc: Exception) -> ImageError:
        """The error naming the sample just read: its ``.rec`` (key and byte offset, or its
        place in the file) or its image file."""
        cause = exc.__cause__ if isinstance(exc.__cause__, ImageError) else exc
        reason = cause.message if isinstance(cause, ImageError) else str(cause)
        if self.seq is None:
            n, offset = self._where
            return undecodable(reason, self.imgrec.uri, f"record #{n - 1}", offset)
        key = self.seq[self.cur - 1]
        if self.imgrec is not None:
            return undecodable(reason, self.imgrec.uri, f"key {key}", int(self.imgrec.idx[key]))
        assert self.imglist is not None  # no .rec: the samples come from the list
        return undecodable(reason, os.path.join(self.path_root or "", self.imglist[key][1]),
                           f"key {key}")

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
        except Exception as exc:  # MXNet's message, the cause kept
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
