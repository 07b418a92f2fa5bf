"""The parameters of MXNet 1.9.1's ``ImageRecordIter``: the table of every one with MXNet's
default, how a value given the way MXNet accepts it (``data_shape="(3,224,224)"``,
``shuffle=1``) is read, and what the values become in recio's augmentation settings.

``recio.mx.io.ImageRecordIter`` reads its keyword arguments here, then builds the iterator.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from recio.errors import closest, unknown_names
from recio.image.batches.mxnet_augment import OutputParams
from recio.image.undecodable import ON_UNDECODABLE, SKIP


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


#: Every parameter of MXNet 1.9.1's ImageRecordIter (``help(mx.io.ImageRecordIter)``), plus
#: ``data_name``/``label_name`` (MXDataIter's) and ``rotate_list`` (read by MXNet's augmenter,
#: undocumented), with MXNet's defaults; and one of recio's own, ``on_undecodable``
#: (``recio.image.undecodable``). What each does here: the documentation's "Training:
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
    # recio's own (MXNet has no such choice: it aborts on an image nothing decodes)
    "on_undecodable": Param(_choice(*ON_UNDECODABLE), SKIP),
}
#: how many batches MXNet's ImageRecordIter producer thread may make ahead of the consumer
#: (``kMaxPrefetchBuffer``): where ``reset()`` decides whether the next epoch carries on
MXNET_PRODUCER_AHEAD = 16
#: parameters accepted with no effect here (MXNet's thread and device plumbing, its logging)
_NO_EFFECT = ("ctx", "verbose", "shuffle_chunk_seed")


def read_parameters(iterator: str, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """Every parameter's value (MXNet's default where not given), read from ``kwargs``; a name
    MXNet does not have, or a missing required one, raises ``ValueError`` naming it."""
    unknown = set(kwargs) - set(PARAMETERS)
    if unknown:
        suggested = all(closest(name, PARAMETERS) for name in unknown)
        raise ValueError(f"{iterator}: {unknown_names('parameter', unknown, PARAMETERS)}; "
                         + (f"MXNet 1.9.1's {len(PARAMETERS)} parameters are in "
                            "recio.mx.io_params.PARAMETERS" if suggested else
                            f"MXNet 1.9.1's {iterator} takes: {', '.join(sorted(PARAMETERS))}"))
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


def output_params(v: Dict[str, Any], dtype: str, mean_img: Optional[np.ndarray]
                  ) -> OutputParams:
    """The normalisation settings (ImageNormalizeParam) of the parameter values ``v``."""
    return OutputParams(
        mean=(v["mean_r"], v["mean_g"], v["mean_b"], v["mean_a"]),
        std=(v["std_r"], v["std_g"], v["std_b"], v["std_a"]), scale=v["scale"],
        mean_img=mean_img, mirror=v["mirror"], rand_mirror=v["rand_mirror"],
        max_random_contrast=v["max_random_contrast"],
        max_random_illumination=v["max_random_illumination"], dtype=dtype)


#: records held by the shuffle buffer of a file read without its .idx, per MB of
#: ``shuffle_chunk_size`` (MXNet shuffles chunks of that size; recio shuffles records)
_RECORDS_PER_MB = 16


def shuffle_buffer(v: Dict[str, Any]) -> int:
    """Records in the shuffle buffer of a file read without its ``.idx``."""
    if v["shuffle_chunk_size"] > 0:
        return max(1, v["shuffle_chunk_size"] * _RECORDS_PER_MB)
    return 1024
