"""``recio.mx.io``: MXNet's data iterators (``mx.io``) for code that feeds training from ``.rec``.

* :func:`ImageRecordIter` (and ``ImageRecordUInt8Iter`` / ``ImageRecordInt8Iter``): MXNet 1.9.1's
  C++ ``ImageRecordIter``, every documented parameter, returning an :class:`MXDataIter` as MXNet
  does. Its batches are :class:`DataBatch` objects whose ``data`` and ``label`` are lists of one
  :class:`~recio.mx.ndarray.NDArray` each (``batch.data[0].asnumpy()``): data ``(B, C, H, W)``
  float32 (or the ``dtype``), label ``(B,)`` for ``label_width=1`` and ``(B, W)`` above; ``pad``
  is the number of filler samples at the end of the last batch; ``index`` the records' image
  ids. ``provide_data`` / ``provide_label`` are lists of :class:`DataDesc`. Pixels, labels, pads
  and batch counts are MXNet's (tested against the real MXNet 1.9.1; see
  ``recio.image.batches.mxnet_augment`` for the augmentations). With ``round_batch`` (the default)
  the last batch is filled from the start of the next pass and the next epoch continues after those
  records, as MXNet does; ``round_batch=False`` pads with zeros.
* :class:`NDArrayIter`, :class:`ResizeIter`, :class:`PrefetchingIter` and the :class:`DataIter`
  base class, as MXNet's Python ones.

Deliberate differences from MXNet 1.9.1, where its behaviour is a bug: ``pad`` is always the
number of filler samples (MXNet reports 0 with ``round_batch=False``, and with recycled batch
buffers sometimes a stale ``pad`` on a full batch); ``index`` holds the record ids (MXNet's are
zeros); an image nothing decodes is skipped with a ``SkippedRecordWarning`` naming its file, key
and byte offset, and counted (``num_skipped``), where MXNet's iterator aborts (or its process
dies of SIGFPE): recio's own parameter ``on_undecodable="raise"`` raises ``ImageError`` instead
(``recio.image.undecodable``); a parameter MXNet does not know is refused (MXNet ignores it
silently).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from recio.errors import RecordIOError
from recio.image.batches.mxnet_augment import AugmentParams, MXAugmenter
from recio.image.batches.iterators import RecordBatchIter
from recio.image.lists import read_list
from recio.mx import ndarray as nd
from recio.mx.io_params import MXNET_PRODUCER_AHEAD, output_params, read_parameters, shuffle_buffer
from recio.mx.iterators import (
    DataBatch,
    DataDesc,
    DataIter,
    NDArrayIter,
    PrefetchingIter,
    ResizeIter,
)
from recio.mx.ndarray import NDArray
from recio.records.atomic import atomic_open
from recio.records.closed import check_open


# -- ImageRecordIter ----------------------------------------------------------------------------
class MXDataIter(DataIter):
    """What MXNet's C++ iterators return (``type(mx.io.ImageRecordIter(...))``): reads the first
    batch at once (as MXNet, so a bad file or image fails here), then one per ``next()``."""

    def __init__(self, core: RecordBatchIter, data_name: str = "data",
                 label_name: str = "softmax_label", context: Optional[nd.Context] = None,
                 flat_label: bool = True) -> None:
        super().__init__()
        self._core = core
        self._context = context or nd.cpu()
        self._flat_label = flat_label
        self._current: Optional[DataBatch] = None
        self.first_batch: Optional[DataBatch] = None
        try:
            self.first_batch = self._advance()
        except StopIteration:
            core.close()
            skipped = core.num_skipped
            raise RecordIOError("no image records to read (an empty file, or an empty part "
                                "of it)" if not skipped else f"none of the {skipped} records "
                                "read holds an image that decodes", path=_path_of(core)) from None
        data, label = self.first_batch.data[0], self.first_batch.label[0]
        self.provide_data = [DataDesc(data_name, data.shape, data.dtype)]
        self.provide_label = [DataDesc(label_name, label.shape, label.dtype)]
        self.batch_size = data.shape[0]

    def _advance(self) -> DataBatch:
        raw = next(self._core)
        label = raw.label[:, 0] if self._flat_label else raw.label
        self._current = DataBatch(data=[NDArray(raw.data, self._context)],
                                  label=[NDArray(label, self._context)], pad=raw.pad,
                                  index=raw.index)
        return self._current

    @property
    def num_skipped(self) -> int:
        """Records skipped so far because their image could not be decoded."""
        return self._core.num_skipped

    def _check_open(self) -> None:
        """``ClosedError`` naming the file once ``close()`` was called."""
        check_open(self._core.closed, "ImageRecordIter", _path_of(self._core))

    def reset(self) -> None:
        self._check_open()
        self.first_batch = None
        self._current = None
        self._core.reset()

    def next(self) -> DataBatch:
        self._check_open()
        if self.first_batch is not None:
            batch, self.first_batch = self.first_batch, None
            self._current = batch
            return batch
        return self._advance()

    def iter_next(self) -> bool:
        try:
            self.next()
        except StopIteration:
            return False
        return True

    def _batch(self) -> DataBatch:
        self._check_open()
        if self._current is None:
            raise RuntimeError("no current batch: call iter_next() or next() first")
        return self._current

    def getdata(self) -> NDArray:
        return self._batch().data[0]

    def getlabel(self) -> NDArray:
        return self._batch().label[0]

    def getindex(self) -> np.ndarray:
        return self._batch().index

    def getpad(self) -> int:
        pad = self._batch().pad
        assert pad is not None  # _advance gives every batch its pad
        return pad

    def close(self) -> None:
        """Stop the decode threads and close the file (garbage collection does it too); every
        later call raises ``ClosedError``."""
        self._core.close()

    def __getstate__(self) -> Any:
        return self._core.__getstate__()  # not picklable: the reason, or ClosedError

    def __enter__(self) -> "MXDataIter":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _path_of(core: RecordBatchIter) -> str:
    path = core.path_imgrec
    return path if isinstance(path, str) else ";".join(path)


_DTYPES = ("float32", "uint8", "int8")


def _make_iter(iterator: str, args: Tuple[Any, ...], kwargs: Dict[str, Any],
               dtype: Optional[str] = None) -> MXDataIter:
    if args:
        raise ValueError(f"{iterator} takes keyword arguments only (as MXNet's), e.g. "
                         f"{iterator}(path_imgrec='train.rec', data_shape=(3, 224, 224), "
                         "batch_size=32)")
    v = read_parameters(iterator, kwargs)
    if dtype is not None:
        v["dtype"] = dtype
    out_dtype = v["dtype"] or "float32"
    if out_dtype not in _DTYPES:
        raise ValueError(f"{iterator}: dtype={out_dtype!r} is not made by MXNet's "
                         f"ImageRecordIter either; use one of {', '.join(_DTYPES)}")
    if v["aug_seq"] != "aug_default":
        raise ValueError(f"{iterator}: aug_seq={v['aug_seq']!r}: only MXNet's 'aug_default' "
                         "augmenter is implemented")
    shape = v["data_shape"]
    if len(shape) != 3:
        raise ValueError(f"{iterator}: data_shape must be (channels, height, width), got "
                         f"{shape}")
    augment = AugmentParams(**{name: v[name] for name in AugmentParams.names()
                               if name != "data_shape"}, data_shape=shape)
    mean_img = None
    if v["mean_img"] and out_dtype != "uint8":
        mean_img = _mean_image(v, augment, shape)
    output = output_params(v, out_dtype, mean_img)
    labels = None
    if v["path_imglist"]:
        labels = _read_labels(v["path_imglist"], v["label_width"])
    augmenter = MXAugmenter(augment, output, seed_aug=v["seed_aug"])
    core = RecordBatchIter(
        v["path_imgrec"], augmenter, v["batch_size"], path_imgidx=v["path_imgidx"] or None,
        label_width=v["label_width"], shuffle=v["shuffle"], seed=v["seed"],
        preprocess_threads=v["preprocess_threads"], prefetch_buffer=max(1, v["prefetch_buffer"]),
        num_parts=v["num_parts"], part_index=v["part_index"], round_batch=v["round_batch"],
        shuffle_buffer=shuffle_buffer(v), labels=labels, strict_labels=True, carry_over=True,
        carry_lookahead=MXNET_PRODUCER_AHEAD, on_undecodable=v["on_undecodable"])
    context = nd.cpu(0) if v["device_id"] == -1 else nd.cpu_pinned(v["device_id"])
    return MXDataIter(core, v["data_name"], v["label_name"], context,
                      flat_label=v["label_width"] == 1)


def _read_labels(path: str, label_width: int) -> Dict[int, np.ndarray]:
    """image id -> its first ``label_width`` labels, from a ``.lst`` (MXNet's ImageLabelMap)."""
    labels = {}
    for line, item in enumerate(read_list(path), 1):
        if len(item.labels) < label_width:
            raise RecordIOError(f"image {item.index} has {len(item.labels)} labels, fewer than "
                                f"label_width={label_width}", path=path)
        labels[item.index] = np.array(item.labels[:label_width], np.float32)
    return labels


def _mean_image(v: Dict[str, Any], augment: AugmentParams, shape: Tuple[int, ...]
                ) -> np.ndarray:
    """MXNet's ``mean_img``: read the file (MXNet's ``.nd`` format, or ``.npy``), or, when it
    does not exist, compute the mean of the part's images as MXNet does (each record once,
    through the same augmentation and ``(x - mean_rgb) * scale / std``) and save it there (in
    MXNet's format, or NumPy's for a ``.npy`` name)."""
    path = v["mean_img"]
    if os.path.exists(path):
        if path.endswith(".npy"):
            mean = np.load(path)
        else:
            arrays = nd.load(path)
            values = list(arrays.values()) if isinstance(arrays, dict) else arrays
            if len(values) != 1:
                raise RecordIOError(f"a mean image file holds one array, this one has "
                                    f"{len(values)}", path=path)
            mean = values[0].asnumpy()
        mean = np.asarray(mean, np.float32)
        if mean.shape != tuple(shape):
            raise RecordIOError(f"the mean image has shape {mean.shape}, data_shape is "
                                f"{tuple(shape)}", path=path)
        return mean
    output = output_params(v, "float32", None)
    core = RecordBatchIter(
        v["path_imgrec"], MXAugmenter(augment, output, seed_aug=v["seed_aug"]), 1,
        path_imgidx=v["path_imgidx"] or None, label_width=v["label_width"],
        preprocess_threads=v["preprocess_threads"], num_parts=v["num_parts"],
        part_index=v["part_index"], round_batch=False,
        labels=_read_labels(v["path_imglist"], v["label_width"]) if v["path_imglist"] else None,
        on_undecodable=v["on_undecodable"])
    total = np.zeros(shape, np.float32)
    count = 0
    with core:
        for batch in core:
            total += batch.data[0]
            count += 1
    if not count:
        raise RecordIOError("no images to compute the mean image from", path=v["path_imgrec"])
    mean = total * np.float32(1.0 / count)
    if path.endswith(".npy"):
        with atomic_open(path, "wb") as f:
            np.save(f, mean)
    else:
        nd.save(path, {"mean_img": NDArray(mean)})
    return mean


def ImageRecordIter(*args: Any, **kwargs: Any) -> MXDataIter:  # MXNet's name
    """Iterate over the images of a ``.rec`` in batches, as MXNet 1.9.1's ``ImageRecordIter``.

    Keyword arguments only, with MXNet's names and defaults: ``path_imgrec``, ``data_shape``
    ``(channels, height, width)`` and ``batch_size`` are required; see MXNet's documentation or
    recio's documentation (docs/training/mxnet.md) for the others. Returns an
    :class:`MXDataIter`::

        train = mx.io.ImageRecordIter(path_imgrec="train.rec", path_imgidx="train.idx",
                                      data_shape=(3, 224, 224), batch_size=32, shuffle=True,
                                      random_resized_crop=True, rand_mirror=True)
        for batch in train:
            x = batch.data[0].asnumpy()    # (32, 3, 224, 224) float32, RGB
            y = batch.label[0].asnumpy()   # (32,)
        train.reset()

    A parameter MXNet does not have raises ``ValueError`` naming it and the nearest one it
    takes (``rand_crops``: "did you mean rand_crop?"); values may be given as MXNet accepts
    them (``data_shape="(3,224,224)"``, ``shuffle=1``). One parameter is recio's own:
    ``on_undecodable`` (``"skip"``, the default: an image nothing decodes is left out, warned
    about and counted in ``num_skipped``; ``"raise"``: ``ImageError``).
    """
    return _make_iter("ImageRecordIter", args, kwargs)


def ImageRecordUInt8Iter(*args: Any, **kwargs: Any) -> MXDataIter:  # MXNet's name
    """:func:`ImageRecordIter` with ``dtype='uint8'`` (MXNet's deprecated spelling)."""
    return _make_iter("ImageRecordUInt8Iter", args, kwargs, dtype="uint8")


def ImageRecordInt8Iter(*args: Any, **kwargs: Any) -> MXDataIter:  # MXNet's name
    """:func:`ImageRecordIter` with ``dtype='int8'`` (MXNet's deprecated spelling)."""
    return _make_iter("ImageRecordInt8Iter", args, kwargs, dtype="int8")


__all__ = ["DataDesc", "DataBatch", "DataIter", "MXDataIter", "ImageRecordIter",
           "ImageRecordUInt8Iter", "ImageRecordInt8Iter", "NDArrayIter", "ResizeIter",
           "PrefetchingIter"]
