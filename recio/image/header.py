"""Image record header (MXNet ``IRHeader``) and packing images into records.

An image record's payload is::

    +------------+--------------+-----------+------------+------------------------+-------+
    | flag <u32> | label <f32>  | id <u64>  | id2 <u64>  | flag x label <f32>     | image |
    +------------+--------------+-----------+------------+------------------------+-------+
      24 bytes, struct '<IfQQ'                             only when flag > 0

A scalar label lives in the header (``flag = 0``); a vector of N labels sets ``flag = N``, writes
``0.0`` in the header's label field, and follows the header with N float32 values.
"""
from __future__ import annotations

import numbers
import struct
import warnings
from collections import namedtuple
from typing import Any, Tuple, Union

import numpy as np

from recio.errors import ImageError
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS, decode
from recio.image.pixels.encoding import encode

_IR_FORMAT = "<IfQQ"
IR_STRUCT = struct.Struct(_IR_FORMAT)
IR_SIZE = IR_STRUCT.size  # 24

#: MXNet's field names, so ``header.label`` / ``header.id`` code keeps working (and MXNet's
#: class name, HEADER, which its repr shows; a checker wants the variable's name)
IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])  # type: ignore[name-match]
IRHeader.__doc__ = "Image record header: flag (label count), label, id, id2 (MXNet layout)."

#: float32 represents every integer up to this exactly; larger integer labels change silently
_FLOAT32_EXACT_INT = 1 << 24

Record = Union[bytes, bytearray, memoryview]


def pack(header: IRHeader, payload: Record) -> bytes:
    """Prefix ``payload`` with the 24-byte header (and the label vector when the label is one).

    A scalar label forces ``flag = 0``, exactly as MXNet's ``recordio.pack`` does.
    """
    flag, label, id_, id2 = header
    if isinstance(label, numbers.Number):
        if abs(label) > _FLOAT32_EXACT_INT:  # type: ignore[arg-type]  # a real: int, float, NumPy
            _warn_if_inexact(np.asarray([label]))
        return IR_STRUCT.pack(0, label, id_, id2) + bytes(payload)
    original = np.asarray(label)
    labels = original.astype(np.float32).ravel()
    if original.dtype != np.float32 and labels.size and np.abs(labels).max() > _FLOAT32_EXACT_INT:
        _warn_if_inexact(original.ravel())
    return IR_STRUCT.pack(labels.size, 0.0, id_, id2) + labels.tobytes() + bytes(payload)


def _warn_if_inexact(values: np.ndarray) -> None:
    """Warn when float32 storage changes a label (integers above 2**24 lose their last bits)."""
    stored = values.astype(np.float32).astype(np.float64)
    changed = np.flatnonzero(stored != values.astype(np.float64))
    if changed.size:
        i = changed[0]
        warnings.warn(f"label {values[i]!r} is stored as float32 {stored[i]!r}: labels are float32 "
                      f"in RecordIO, so integers above 2**24 = {_FLOAT32_EXACT_INT} are not exact",
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


def read_head(reader: Any, offset: int, payload_bytes: int = 12) -> bytes:
    """The first bytes of the record at ``offset`` of a ``RecordReader``: its image header, its
    label vector and ``payload_bytes`` of the payload (enough to tell an image's format), without
    reading the rest of the record."""
    head = bytes(reader.peek_at(offset, IR_SIZE))
    if len(head) < IR_SIZE:
        return head
    flag = IR_STRUCT.unpack_from(head, 0)[0]
    labels = 4 * flag if 0 < flag < (1 << 20) else 0
    return bytes(reader.peek_at(offset, IR_SIZE + labels + payload_bytes))


def unpack(record: Record) -> Tuple[IRHeader, bytes]:
    """Split an image record into its header and payload; vector labels become float32 arrays.

    A damaged header raises :class:`ImageError` (see :func:`unpack_header`).
    """
    header, end = unpack_header(record)
    return header, bytes(record[end:])


def decode_image(data: Record, iscolor: int = -1) -> np.ndarray:
    """Decode image bytes to a uint8 **RGB** array with MXNet's (OpenCV's) pixels: ``iscolor``
    1 = ``(H, W, 3)`` RGB, 0 = ``(H, W)`` greyscale, -1 = as stored (see
    :func:`recio.image.pixels.codec.decode`).

    Damaged data raises :class:`ImageError`, and so does an image declaring more than
    ``recio.image.pixels.codec.DEFAULT_MAX_PIXELS`` pixels (the decompression-bomb guard), before
    its pixels are allocated.
    """
    return decode(data, iscolor, max_pixels=DEFAULT_MAX_PIXELS)


def pack_img(header: IRHeader, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode an **RGB** array (``.jpg`` at JPEG ``quality``, ``.png`` at compression level
    ``quality`` clamped to 0-9) and pack it with ``header``: the bytes MXNet's ``pack_img``
    writes for the same pixels in BGR order (see ``recio.image.pixels.encoding.encode``)."""
    return pack(header, encode(img, img_fmt, quality))


def unpack_img(record: Record, iscolor: int = -1) -> Tuple[IRHeader, np.ndarray]:
    """Unpack an image record and decode its image to an RGB (or grey) uint8 array, with
    MXNet's pixels (:func:`decode_image`)."""
    header, payload = unpack(record)
    return header, decode_image(payload, iscolor)
