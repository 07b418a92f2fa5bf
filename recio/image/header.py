"""Image record header (MXNet ``IRHeader``) and Pillow-based image packing.

An image record's payload is::

    +------------+--------------+-----------+------------+------------------------+-------+
    | flag <u32> | label <f32>  | id <u64>  | id2 <u64>  | flag x label <f32>     | image |
    +------------+--------------+-----------+------------+------------------------+-------+
      24 bytes, struct '<IfQQ'                             only when flag > 0

A scalar label lives in the header (``flag = 0``); a vector of N labels sets ``flag = N``, writes
``0.0`` in the header's label field, and follows the header with N float32 values.
"""
from __future__ import annotations

import io
import numbers
import struct
import warnings
from collections import namedtuple
from typing import Tuple, Union

import numpy as np

from recio.errors import ImageError
from recio.image.codec import DEFAULT_MAX_PIXELS

IR_FORMAT = "<IfQQ"
IR_STRUCT = struct.Struct(IR_FORMAT)
IR_SIZE = IR_STRUCT.size  # 24

#: MXNet's field names, so ``header.label`` / ``header.id`` code keeps working
IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = "Image record header: flag (label count), label, id, id2 (MXNet layout)."

#: float32 represents every integer up to this exactly; larger integer labels change silently
FLOAT32_EXACT_INT = 1 << 24

Record = Union[bytes, bytearray, memoryview]


def pack(header: IRHeader, payload: Record) -> bytes:
    """Prefix ``payload`` with the 24-byte header (and the label vector when the label is one).

    A scalar label forces ``flag = 0``, exactly as MXNet's ``recordio.pack`` does.
    """
    flag, label, id_, id2 = header
    if isinstance(label, numbers.Number):
        if abs(label) > FLOAT32_EXACT_INT:
            _warn_if_inexact(np.asarray([label]))
        return IR_STRUCT.pack(0, label, id_, id2) + bytes(payload)
    original = np.asarray(label)
    labels = original.astype(np.float32).ravel()
    if original.dtype != np.float32 and labels.size and np.abs(labels).max() > FLOAT32_EXACT_INT:
        _warn_if_inexact(original.ravel())
    return IR_STRUCT.pack(labels.size, 0.0, id_, id2) + labels.tobytes() + bytes(payload)


def _warn_if_inexact(values: np.ndarray) -> None:
    """Warn when float32 storage changes a label (integers above 2**24 lose their last bits)."""
    stored = values.astype(np.float32).astype(np.float64)
    changed = np.flatnonzero(stored != values.astype(np.float64))
    if changed.size:
        i = changed[0]
        warnings.warn(f"label {values[i]!r} is stored as float32 {stored[i]!r}: labels are float32 "
                      f"in RecordIO, so integers above 2**24 = {FLOAT32_EXACT_INT} are not exact",
                      stacklevel=3)


def unpack_header(record: Record) -> Tuple[IRHeader, int]:
    """The header of an image record and the byte where its image starts.

    The one rule for reading an IRHeader: a record shorter than 24 bytes, or whose ``flag``
    announces more float32 labels than the record holds, raises :class:`ImageError` (checked
    before anything is allocated). Vector labels are float32 views into ``record``.
    """
    if len(record) < IR_SIZE:
        raise ImageError(f"image record of {len(record)} bytes is shorter than the "
                         f"{IR_SIZE}-byte IRHeader; is this an image .rec?")
    flag, label, id_, id2 = IR_STRUCT.unpack_from(record, 0)
    if flag == 0:
        return IRHeader(0, label, id_, id2), IR_SIZE
    end = IR_SIZE + 4 * flag
    if end > len(record):
        raise ImageError(f"IRHeader flag {flag} announces {flag} float32 labels "
                         f"({4 * flag} bytes) but the record has only "
                         f"{len(record) - IR_SIZE} bytes after the header")
    labels = np.frombuffer(record, dtype="<f4", count=flag, offset=IR_SIZE)
    return IRHeader(flag, labels, id_, id2), end


def unpack(record: Record) -> Tuple[IRHeader, bytes]:
    """Split an image record into its header and payload; vector labels become float32 arrays.

    A damaged header raises :class:`ImageError` (see :func:`unpack_header`).
    """
    header, end = unpack_header(record)
    return header, bytes(record[end:])


def _pil():
    from PIL import Image  # Pillow is a core dependency; imported here to keep `import recio` light

    return Image


def encode_image(img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode an RGB (H, W, 3), RGBA (H, W, 4) or grey (H, W) uint8 array as JPEG or PNG."""
    Image = _pil()
    arr = np.ascontiguousarray(img)
    if arr.dtype != np.uint8:
        raise ImageError(f"image array must be uint8, got {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
        raise ImageError(f"image array must be HxW, HxWx3 or HxWx4, got shape {arr.shape}")
    image = Image.fromarray(arr)
    out = io.BytesIO()
    fmt = img_fmt.lower()
    if fmt in (".jpg", ".jpeg"):
        if image.mode == "RGBA":
            image = image.convert("RGB")
        image.save(out, format="JPEG", quality=int(quality))
    elif fmt == ".png":
        image.save(out, format="PNG", compress_level=int(quality) if 0 <= quality <= 9 else 3)
    else:
        raise ImageError(f"unsupported image format {img_fmt!r}: use '.jpg' or '.png'")
    return out.getvalue()


def decode_image(data: Record, iscolor: int = -1) -> np.ndarray:
    """Decode image bytes to a uint8 array: ``iscolor`` 1 = RGB, 0 = grey, -1 = as stored.

    Damaged data raises :class:`ImageError`, and so does an image declaring more than
    ``recio.image.codec.DEFAULT_MAX_PIXELS`` pixels (the packer's decompression-bomb limit),
    before its pixels are allocated.
    """
    Image = _pil()
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > DEFAULT_MAX_PIXELS:
            raise ImageError(f"image declares {width}x{height} = {width * height} pixels, above "
                             f"the limit of {DEFAULT_MAX_PIXELS} (decompression-bomb guard)")
        image.load()
    except ImageError:
        raise
    except Exception as exc:  # Pillow raises many types for bad data; report them as one
        raise ImageError(f"cannot decode image ({len(data)} bytes): {exc}") from exc
    if iscolor == 1:
        image = image.convert("RGB")
    elif iscolor == 0:
        image = image.convert("L")
    elif image.mode not in ("L", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    return np.asarray(image)


def pack_img(header: IRHeader, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode an RGB array with Pillow and pack it with ``header`` (``quality``: JPEG 1-100,
    PNG 0-9)."""
    return pack(header, encode_image(img, quality, img_fmt))


def unpack_img(record: Record, iscolor: int = -1) -> Tuple[IRHeader, np.ndarray]:
    """Unpack an image record and decode its image to an RGB (or grey) uint8 array."""
    header, payload = unpack(record)
    return header, decode_image(payload, iscolor)


__all__ = ["IRHeader", "IR_FORMAT", "IR_SIZE", "pack", "unpack", "unpack_header", "pack_img",
           "unpack_img",
           "encode_image", "decode_image", "FLOAT32_EXACT_INT"]
