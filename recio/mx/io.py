"""``recio.mx.io``: MXNet's data iterators (``mx.io``) for code that feeds training from ``.rec``.

* :func:`ImageRecordIter` (and ``ImageRecordUInt8Iter`` / ``ImageRecordInt8Iter``): MXNet 1.9.1's
  C++ ``ImageRecordIter``, every documented parameter, returning an :class:`MXDataIter` as MXNet
  does. Its batches are :class:`DataBatch` objects whose ``data`` and ``label`` are lists of one
  :class:`~recio.mx.ndarray.NDArray` each (``batch.data[0].asnumpy()``): data ``(B, C, H, W)``
  float32 (or the ``dtype``), label ``(B,)`` for ``label_width=1`` and ``(B, W)`` above; ``pad``
  is the number of filler samples at the end of the last batch; ``index`` the records' image
  ids. ``provide_data`` / ``provide_label`` are lists of :class:`DataDesc`. Pixels, labels, pads
  and batch counts are MXNet's (tested against the real MXNet 1.9.1; see
  ``recio.image.augment`` for the augmentations). With ``round_batch`` (the default) the last
  batch is filled from the start of the next pass and the next epoch continues after those
  records, as MXNet does; ``round_batch=False`` pads with zeros.
* :class:`NDArrayIter`, :class:`ResizeIter`, :class:`PrefetchingIter` and the :class:`DataIter`
  base class, as MXNet's Python ones.

Deliberate differences from MXNet 1.9.1, where its behaviour is a bug: ``pad`` is always the
number of filler samples (MXNet reports 0 with ``round_batch=False``, and with recycled batch
buffers sometimes a stale ``pad`` on a full batch); ``index`` holds the record ids (MXNet's are
zeros); an undecodable image is skipped with a ``SkippedRecordWarning`` and counted
(``num_skipped``) where MXNet's iterator aborts; a parameter MXNet does not know is refused
(MXNet ignores it silently).
"""
from __future__ import annotations

import os
import threading
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import RecordIOError
from recio.image.augment import AugmentParams, MXAugmenter, OutputParams
from recio.image.imageiter import RecordBatchIter
from recio.image.lists import read_list
from recio.mx import ndarray as nd
from recio.mx.ndarray import NDArray
from recio.records.atomic import atomic_open


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of an input: a ``(name, shape)`` tuple (``desc[0]``,
    ``desc.name``, ``name, shape = desc``) with ``dtype`` and ``layout`` attributes."""

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: Tuple[int, ...], dtype: Any = np.float32,
                layout: str = "NCHW") -> "DataDesc":
        desc = super().__new__(cls, name, shape)
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: Optional[str]) -> int:
        """The axis of ``N`` in ``layout`` (0 when there is no layout)."""
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes: Sequence[Tuple[str, Tuple[int, ...]]],
                 types: Optional[Sequence[Tuple[str, Any]]]) -> List["DataDesc"]:
        """DataDescs from ``(name, shape)`` pairs and optional ``(name, dtype)`` pairs."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        by_name = dict(types)
        return [DataDesc(name, shape, by_name[name]) for name, shape in shapes]


class DataBatch:
    """One batch: ``data`` and ``label`` are lists of NDArrays; ``pad`` filler samples at the
    end; ``index`` the samples' ids (or None)."""

    # lists of NDArrays, None only where the caller gave None: code indexes them unchecked
    data: Any
    label: Any

    def __init__(self, data: Optional[Sequence[Any]], label: Optional[Sequence[Any]] = None,
                 pad: Optional[int] = None, index: Any = None, bucket_key: Any = None,
                 provide_data: Optional[List[DataDesc]] = None,
                 provide_label: Optional[List[DataDesc]] = None) -> None:
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError("DataBatch data must be a list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError("DataBatch label must be a list of NDArrays")
        self.data, self.label, self.pad, self.index = data, label, pad, index
        self.bucket_key = bucket_key
        self.provide_data, self.provide_label = provide_data, provide_label

    def __str__(self) -> str:
        data = [d.shape for d in self.data]
        label = [x.shape for x in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data} label shapes: {label}"


class DataIter:
    """MXNet's iterator base class: ``next()`` builds a :class:`DataBatch` from
    ``iter_next()``, ``getdata()``, ``getlabel()``, ``getpad()`` and ``getindex()``."""

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> "DataIter":
        return self

    def reset(self) -> None:
        """Go back to the start of the data."""

    def next(self) -> DataBatch:
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Move to the next batch; False at the end."""
        return False

    def getdata(self) -> Any:
        return None

    def getlabel(self) -> Any:
        return None

    def getindex(self) -> Any:
        return None

    def getpad(self) -> Any:
        return None


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
            raise RecordIOError("no image records to read (an empty file, or an empty part "
                                "of it)", path=_path_of(core)) from None
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

    def reset(self) -> None:
        self.first_batch = None
        self._current = None
        self._core.reset()

    def next(self) -> DataBatch:
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
        """Stop the decode threads and close the file (garbage collection does it too)."""
        self._core.close()

    def __enter__(self) -> "MXDataIter":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _path_of(core: RecordBatchIter) -> str:
    path = core.path_imgrec
    return path if isinstance(path, str) else ";".join(path)


@dataclass(frozen=True)
class Param:
    """One ImageRecordIter parameter: how its value is read, and its default."""

    kind: Callable[[Any, str], Any]
    default: Any = None


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("1", "true"):
            return True
        if low in ("0", "false"):
            return False
        raise ValueError(f"{name} must be a boolean, got {value!r}")
    return bool(value)


def _int(value: Any, name: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if not number.is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(number)


def _float(value: Any, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def _optional(kind: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def read(value: Any, name: str) -> Any:
        if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
            return None
        return kind(value, name)
    return read


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _shape(value: Any, name: str) -> Tuple[int, ...]:
    if isinstance(value, str):
        value = [v for v in value.strip("()[] ").split(",") if v.strip()]
    try:
        return tuple(_int(v, name) for v in value)
    except TypeError:
        raise ValueError(f"{name} must be a tuple such as (3, 224, 224), got {value!r}") from None


def _int_list(value: Any, name: str) -> Tuple[int, ...]:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    return tuple(_int(v, name) for v in value)


def _choice(*choices: str) -> Callable[[Any, str], str]:
    def read(value: Any, name: str) -> str:
        text = str(value)
        if text not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return text
    return read


_DTYPES = ("float32", "uint8", "int8")

#: Every parameter of MXNet 1.9.1's ImageRecordIter (``help(mx.io.ImageRecordIter)``), plus
#: ``data_name``/``label_name`` (MXDataIter's) and ``rotate_list`` (read by MXNet's augmenter,
#: undocumented), with MXNet's defaults. What each does here: the documentation's "Training:
#: recio.mx and ImageRecordIter" page (docs/training/mxnet.md).
PARAMETERS: Dict[str, Param] = {
    # the records
    "path_imgrec": Param(_text, ""),
    "path_imgidx": Param(_text, ""),
    "path_imglist": Param(_text, ""),
    "label_width": Param(_int, 1),
    "num_parts": Param(_int, 1),
    "part_index": Param(_int, 0),
    "shuffle": Param(_bool, False),
    "seed": Param(_int, 0),
    "shuffle_chunk_size": Param(_int, 0),
    "shuffle_chunk_seed": Param(_int, 0),
    # batches and threads
    "data_shape": Param(_shape),
    "batch_size": Param(_int),
    "round_batch": Param(_bool, True),
    "preprocess_threads": Param(_int, 4),
    "prefetch_buffer": Param(_int, 4),
    "dtype": Param(_optional(_choice("float32", "uint8", "int8", "float16", "float64",
                                     "bfloat16", "int32", "int64")), None),
    "ctx": Param(_choice("cpu", "gpu"), "gpu"),
    "device_id": Param(_int, 0),
    "verbose": Param(_bool, True),
    "aug_seq": Param(_text, "aug_default"),
    "data_name": Param(_text, "data"),
    "label_name": Param(_text, "softmax_label"),
    "seed_aug": Param(_optional(_int), None),
    # DefaultImageAugmenter
    "resize": Param(_int, -1),
    "rand_crop": Param(_bool, False),
    "random_resized_crop": Param(_bool, False),
    "max_rotate_angle": Param(_int, 0),
    "max_aspect_ratio": Param(_float, 0.0),
    "min_aspect_ratio": Param(_optional(_float), None),
    "max_shear_ratio": Param(_float, 0.0),
    "max_crop_size": Param(_int, -1),
    "min_crop_size": Param(_int, -1),
    "max_random_scale": Param(_float, 1.0),
    "min_random_scale": Param(_float, 1.0),
    "max_random_area": Param(_float, 1.0),
    "min_random_area": Param(_float, 1.0),
    "max_img_size": Param(_float, 1e10),
    "min_img_size": Param(_float, 0.0),
    "brightness": Param(_float, 0.0),
    "contrast": Param(_float, 0.0),
    "saturation": Param(_float, 0.0),
    "pca_noise": Param(_float, 0.0),
    "random_h": Param(_int, 0),
    "random_s": Param(_int, 0),
    "random_l": Param(_int, 0),
    "rotate": Param(_int, -1),
    "rotate_list": Param(_int_list, ()),
    "fill_value": Param(_int, 255),
    "inter_method": Param(_int, 1),
    "pad": Param(_int, 0),
    # normalisation (ImageNormalizeParam)
    "mirror": Param(_bool, False),
    "rand_mirror": Param(_bool, False),
    "mean_img": Param(_text, ""),
    "mean_r": Param(_float, 0.0),
    "mean_g": Param(_float, 0.0),
    "mean_b": Param(_float, 0.0),
    "mean_a": Param(_float, 0.0),
    "std_r": Param(_float, 1.0),
    "std_g": Param(_float, 1.0),
    "std_b": Param(_float, 1.0),
    "std_a": Param(_float, 1.0),
    "scale": Param(_float, 1.0),
    "max_random_contrast": Param(_float, 0.0),
    "max_random_illumination": Param(_float, 0.0),
}
#: how many batches MXNet's ImageRecordIter producer thread may make ahead of the consumer
#: (``kMaxPrefetchBuffer``): where ``reset()`` decides whether the next epoch carries on
MXNET_PRODUCER_AHEAD = 16
#: parameters accepted with no effect here (MXNet's thread and device plumbing, its logging)
NO_EFFECT = ("ctx", "verbose", "shuffle_chunk_seed")


def _read_parameters(iterator: str, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    unknown = sorted(set(kwargs) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"{iterator}: unknown parameter{'s' * (len(unknown) > 1)} "
                         f"{', '.join(unknown)}; MXNet 1.9.1's {iterator} takes: "
                         f"{', '.join(sorted(PARAMETERS))}")
    values = {}
    for name, param in PARAMETERS.items():
        if name in kwargs:
            values[name] = param.kind(kwargs[name], name)
        else:
            values[name] = param.default
    for name in ("data_shape", "batch_size"):
        if values[name] is None:
            raise ValueError(f"{iterator} needs {name}")
    if not values["path_imgrec"]:
        raise ValueError(f"{iterator} needs path_imgrec, the .rec file to read")
    return values


def _make_iter(iterator: str, args: Tuple[Any, ...], kwargs: Dict[str, Any],
               dtype: Optional[str] = None) -> MXDataIter:
    if args:
        raise ValueError(f"{iterator} takes keyword arguments only (as MXNet's), e.g. "
                         f"{iterator}(path_imgrec='train.rec', data_shape=(3, 224, 224), "
                         "batch_size=32)")
    v = _read_parameters(iterator, kwargs)
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
    output = _output_params(v, out_dtype, mean_img)
    labels = None
    if v["path_imglist"]:
        labels = _read_labels(v["path_imglist"], v["label_width"])
    augmenter = MXAugmenter(augment, output, seed_aug=v["seed_aug"])
    core = RecordBatchIter(
        v["path_imgrec"], augmenter, v["batch_size"], path_imgidx=v["path_imgidx"] or None,
        label_width=v["label_width"], shuffle=v["shuffle"], seed=v["seed"],
        preprocess_threads=v["preprocess_threads"], prefetch_buffer=max(1, v["prefetch_buffer"]),
        num_parts=v["num_parts"], part_index=v["part_index"], round_batch=v["round_batch"],
        shuffle_buffer=_shuffle_buffer(v), labels=labels, strict_labels=True, carry_over=True,
        carry_lookahead=MXNET_PRODUCER_AHEAD)
    context = nd.cpu(0) if v["device_id"] == -1 else nd.cpu_pinned(v["device_id"])
    return MXDataIter(core, v["data_name"], v["label_name"], context,
                      flat_label=v["label_width"] == 1)


def _output_params(v: Dict[str, Any], dtype: str, mean_img: Optional[np.ndarray]
                   ) -> OutputParams:
    return OutputParams(
        mean=(v["mean_r"], v["mean_g"], v["mean_b"], v["mean_a"]),
        std=(v["std_r"], v["std_g"], v["std_b"], v["std_a"]), scale=v["scale"],
        mean_img=mean_img, mirror=v["mirror"], rand_mirror=v["rand_mirror"],
        max_random_contrast=v["max_random_contrast"],
        max_random_illumination=v["max_random_illumination"], dtype=dtype)


#: records held by the shuffle buffer of a file read without its .idx, per MB of
#: ``shuffle_chunk_size`` (MXNet shuffles chunks of that size; recio shuffles records)
_RECORDS_PER_MB = 16


def _shuffle_buffer(v: Dict[str, Any]) -> int:
    if v["shuffle_chunk_size"] > 0:
        return max(1, v["shuffle_chunk_size"] * _RECORDS_PER_MB)
    return 1024


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
    output = _output_params(v, "float32", None)
    core = RecordBatchIter(
        v["path_imgrec"], MXAugmenter(augment, output, seed_aug=v["seed_aug"]), 1,
        path_imgidx=v["path_imgidx"] or None, label_width=v["label_width"],
        preprocess_threads=v["preprocess_threads"], num_parts=v["num_parts"],
        part_index=v["part_index"], round_batch=False,
        labels=_read_labels(v["path_imglist"], v["label_width"]) if v["path_imglist"] else None)
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


def ImageRecordIter(*args: Any, **kwargs: Any) -> MXDataIter:  # noqa: N802 - MXNet's name
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

    A parameter MXNet does not have raises ``ValueError`` naming it and listing the ones it
    takes; values may be given as MXNet accepts them (``data_shape="(3,224,224)"``,
    ``shuffle=1``).
    """
    return _make_iter("ImageRecordIter", args, kwargs)


def ImageRecordUInt8Iter(*args: Any, **kwargs: Any) -> MXDataIter:  # noqa: N802
    """:func:`ImageRecordIter` with ``dtype='uint8'`` (MXNet's deprecated spelling)."""
    return _make_iter("ImageRecordUInt8Iter", args, kwargs, dtype="uint8")


def ImageRecordInt8Iter(*args: Any, **kwargs: Any) -> MXDataIter:  # noqa: N802
    """:func:`ImageRecordIter` with ``dtype='int8'`` (MXNet's deprecated spelling)."""
    return _make_iter("ImageRecordInt8Iter", args, kwargs, dtype="int8")


# -- Python iterators ---------------------------------------------------------------------------
def _as_array(value: Any) -> np.ndarray:
    """NDArrays keep their dtype; everything else becomes float32, as MXNet's ``nd.array``."""
    if isinstance(value, NDArray):
        return value.asnumpy()
    return np.array(value, dtype=np.float32)


def _named_arrays(data: Any, allow_empty: bool, default_name: str
                  ) -> List[Tuple[str, np.ndarray]]:
    """MXNet's ``_init_data``: an array, a list or a dict of arrays, as sorted (name, array)."""
    if data is None:
        if not allow_empty:
            raise ValueError("data must not be None")
        return []
    if not isinstance(data, (list, tuple, dict)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not allow_empty and not data:
            raise ValueError("data must not be empty")
        names = [default_name] if len(data) == 1 else [f"_{i}_{default_name}"
                                                       for i in range(len(data))]
        data = dict(zip(names, data))
    return sorted((name, _as_array(value)) for name, value in data.items())


class NDArrayIter(DataIter):
    """Batches from arrays in memory, as MXNet's ``mx.io.NDArrayIter``.

    ``data`` and ``label``: an array, a list or a dict of them (NumPy arrays or NDArrays;
    NumPy data becomes float32, as in MXNet). ``last_batch_handle``: ``'pad'`` fills the last
    batch from the start (``pad`` says how many), ``'discard'`` drops it, ``'roll_over'`` keeps
    the rest for the first batch of the next epoch. ``shuffle`` permutes the samples with
    ``numpy.random`` on every ``reset()`` (seed it with ``numpy.random.seed``, as for MXNet).
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label", layout: str = "NCHW") -> None:
        super().__init__(batch_size)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"last_batch_handle must be 'pad', 'discard' or 'roll_over', got "
                             f"{last_batch_handle!r}")
        self.data = _named_arrays(data, False, data_name)
        self.label = _named_arrays(label, True, label_name)
        self.layout = layout
        self.axis = layout.find("N")
        self.num_data = self.data[0][1].shape[self.axis]
        for name, arr in self.data + self.label:
            if arr.shape[self.axis] != self.num_data:
                raise ValueError(f"{name} has {arr.shape[self.axis]} samples, "
                                 f"{self.data[0][0]} has {self.num_data}")
        self.idx = np.arange(self.num_data)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self._cache: Optional[Tuple[List[NDArray], List[NDArray]]] = None
        self.reset()

    def _descs(self, arrays: List[Tuple[str, np.ndarray]]) -> List[DataDesc]:
        out = []
        for name, arr in arrays:
            shape = list(arr.shape)
            shape[self.axis] = self.batch_size
            out.append(DataDesc(name, tuple(shape), arr.dtype.type, layout=self.layout))
        return out

    @property
    def provide_data(self) -> List[DataDesc]:
        return self._descs(self.data)

    @property
    def provide_label(self) -> List[DataDesc]:
        return self._descs(self.label)

    def hard_reset(self) -> None:
        """Back to the start, dropping any rolled-over samples."""
        if self.shuffle:
            self._shuffle()
        self.cursor = -self.batch_size
        self._cache = None

    def reset(self) -> None:
        if self.shuffle:
            self._shuffle()
        if (self.last_batch_handle == "roll_over"
                and self.num_data - self.batch_size < self.cursor < self.num_data):
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def _shuffle(self) -> None:
        np.random.shuffle(self.idx)
        self.data = [(name, np.take(arr, self.idx, axis=self.axis)) for name, arr in self.data]
        self.label = [(name, np.take(arr, self.idx, axis=self.axis)) for name, arr in self.label]
        self.idx = np.arange(self.num_data)

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        data, label = self.getdata(), self.getlabel()
        if data[0].shape[self.axis] != self.batch_size:  # roll_over: keep for the next epoch
            self._cache = (data, label)
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _slice(self, arrays: List[Tuple[str, np.ndarray]], start: int, end: int) -> List[np.ndarray]:
        return [np.take(arr, np.arange(start, end), axis=self.axis) for _, arr in arrays]

    def _batchify(self, arrays: List[Tuple[str, np.ndarray]], which: int) -> List[NDArray]:
        if self.cursor >= self.num_data:
            raise RuntimeError("NDArrayIter needs reset()")
        bs, n, axis = self.batch_size, self.num_data, self.axis
        if self.last_batch_handle == "roll_over" and -bs < self.cursor < 0:
            cached = self._cache[which] if self._cache is not None else None
            if cached is None:
                raise RuntimeError("the next epoch should have rolled-over samples")
            parts = zip([c.asnumpy() for c in cached],
                        self._slice(arrays, 0, self.cursor + bs))
            out = [np.concatenate(p, axis=axis) for p in parts]
        elif self.last_batch_handle == "pad" and self.cursor + bs > n:
            pad = bs - n + self.cursor
            head = self._slice(arrays, self.cursor, n)
            fill = [np.take(arr, np.arange(pad) % n, axis=axis) for _, arr in arrays]
            out = [np.concatenate(p, axis=axis) for p in zip(head, fill)]
        else:
            out = self._slice(arrays, self.cursor, min(self.cursor + bs, n))
        return [NDArray(a) for a in out]

    def getdata(self) -> List[NDArray]:
        return self._batchify(self.data, 0)

    def getlabel(self) -> List[NDArray]:
        return self._batchify(self.label, 1)

    def getpad(self) -> int:
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0


class _OverBatches(DataIter):
    """An iterator whose ``getdata()`` etc. read its ``current_batch``."""

    current_batch: Optional[DataBatch] = None

    def getdata(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.data

    def getlabel(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.label

    def getindex(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.index

    def getpad(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.pad


class ResizeIter(_OverBatches):
    """``size`` batches per epoch from ``data_iter``, restarting it when it runs out."""

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__()
        self.data_iter, self.size, self.reset_internal = data_iter, size, reset_internal
        self.cur = 0
        self.current_batch: Optional[DataBatch] = None
        # MXNet's iterators all have these; its DataIter base class (so this one) does not
        self.provide_data = data_iter.provide_data  # type: ignore[attr-defined]
        self.provide_label = data_iter.provide_label  # type: ignore[attr-defined]
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True



class PrefetchingIter(_OverBatches):
    """Reads the next batches of one or more iterators in background threads and joins them
    (``rename_data`` / ``rename_label``: one ``{old: new}`` dict per iterator)."""

    def __init__(self, iters: Union[DataIter, List[DataIter]],
                 rename_data: Optional[List[Dict[str, str]]] = None,
                 rename_label: Optional[List[Dict[str, str]]] = None) -> None:
        super().__init__()
        self.iters = iters if isinstance(iters, list) else [iters]
        if not self.iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        self.rename_data, self.rename_label = rename_data, rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch: Optional[DataBatch] = None
        self._pending: List[threading.Thread] = []
        self._results: List[Any] = []
        self._fetch()

    def _fetch(self) -> None:
        self._results = [None] * len(self.iters)

        def run(i: int) -> None:
            try:
                self._results[i] = ("batch", self.iters[i].next())
            except StopIteration:
                self._results[i] = ("end", None)
            except BaseException as exc:  # re-raised in the consumer
                self._results[i] = ("error", exc)

        self._pending = [threading.Thread(target=run, args=(i,), daemon=True,
                                          name="recio-PrefetchingIter")
                         for i in range(len(self.iters))]
        for thread in self._pending:
            thread.start()

    def _wait(self) -> List[Any]:
        for thread in self._pending:
            thread.join()
        for kind, value in self._results:
            if kind == "error":
                raise value
        return self._results

    def _renamed(self, which: str, renames: Optional[List[Dict[str, str]]]) -> List[DataDesc]:
        out: List[DataDesc] = []
        for i, it in enumerate(self.iters):
            if renames is None:  # as MXNet: the iterators' own, (name, shape) tuples included
                out.extend(getattr(it, which))
                continue
            for desc in getattr(it, which):
                desc = desc if isinstance(desc, DataDesc) else DataDesc(*desc)
                if renames is not None:
                    desc = DataDesc(renames[i][desc.name], desc.shape, desc.dtype)
                out.append(desc)
        return out

    @property
    def provide_data(self) -> List[DataDesc]:
        return self._renamed("provide_data", self.rename_data)

    @property
    def provide_label(self) -> List[DataDesc]:
        return self._renamed("provide_label", self.rename_label)

    def reset(self) -> None:
        self._wait()
        for it in self.iters:
            it.reset()
        self._fetch()

    def iter_next(self) -> bool:
        results = self._wait()
        if results[0][0] == "end":
            if any(kind != "end" for kind, _ in results):
                raise RuntimeError("the iterators of a PrefetchingIter ended at different "
                                   "batches")
            return False
        batches = [batch for _, batch in results]
        if any(b is None or b.pad != batches[0].pad for b in batches):
            raise RuntimeError("the iterators of a PrefetchingIter disagree on the batch "
                               "boundaries")
        self.current_batch = DataBatch(sum((list(b.data) for b in batches), []),
                                       sum((list(b.label) for b in batches), []),
                                       batches[0].pad, batches[0].index,
                                       provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        self._fetch()
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            assert self.current_batch is not None  # iter_next() set it
            return self.current_batch
        raise StopIteration



__all__ = ["DataDesc", "DataBatch", "DataIter", "MXDataIter", "ImageRecordIter",
           "ImageRecordUInt8Iter", "ImageRecordInt8Iter", "NDArrayIter", "ResizeIter",
           "PrefetchingIter", "PARAMETERS"]
