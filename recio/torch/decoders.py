"""What a record becomes in ``recio.torch``'s datasets: their ``decode=`` argument.

``decode`` is the name of a built-in image decoder or any callable ``bytes -> sample``:

- ``"tensor"`` (the default), ``"numpy"``, ``"pil"``, ``"raw"``: image records (an ``IRHeader``
  then the encoded image, as im2rec packs them). The sample is ``(image, label)``: the image
  decoded by ``recio.image.pixels.codec.decode`` (uint8 CHW tensor, uint8 HWC array, PIL image, or
  the encoded bytes for ``ImageAugment``), then ``transform``; the label a float32 tensor (scalar,
  or the record's label vector), or ``target_transform``'s value.
- a callable: any record. The sample is ``decode(payload)`` of the whole record payload, then
  ``transform``; ``recio.sequence.unpack_sequence`` reads sequence records, ``bytes`` gives the
  payloads as they are. There is no label to convert: ``target_transform`` is refused. A
  ``RecordIOError`` the callable raises (``SequenceError`` for a damaged sequence record) comes
  out naming the record, its file and byte offset; other exceptions pass unchanged. In
  ``DataLoader`` workers started by spawn (macOS, Windows) the callable must pickle: a
  module-level function or a class, not a lambda.

A record that raises :class:`~recio.errors.ImageError` (an image nothing decodes, a damaged
``IRHeader``; from a callable too) is an undecodable record, skipped or raised as the dataset's
``on_undecodable`` says (``recio.image.undecodable``).

Either way the readers, their ``state_dict()`` / ``load_state_dict()``, ``RecordSampler`` and
DataLoader workers work the same: the decoder only sees the bytes of each record.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

from recio.errors import ImageError, RecordIOError
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS, decode as decode_image
from recio.image.header import unpack
from recio.image.undecodable import undecodable
from recio.optional import require
from recio.torch import batching as _batching
from recio.torch.augment import ImageAugment

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
else:
    torch = require("torch", feature="recio.torch")

#: the names of the built-in image decoders
_IMAGE_DECODES = ("tensor", "numpy", "pil", "raw")
#: what ``decode=`` takes: a name of ``IMAGE_DECODES`` or a callable ``bytes -> sample``
Decode = Union[str, Callable[[bytes], Any]]


class ImageDecoder:
    """The built-in image decoders: an image record's payload -> ``(image, label)`` (picklable,
    shared by both datasets)."""

    def __init__(self, decode: str, mode: str, transform: Optional[Callable],
                 target_transform: Optional[Callable],
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        if decode not in _IMAGE_DECODES:
            raise ValueError(f"decode must be one of {_IMAGE_DECODES} or a callable bytes -> "
                             f"sample, got {decode!r}")
        if mode not in ("RGB", "L"):
            raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
        self.decode, self.mode = decode, mode
        self.max_pixels = int(max_pixels)
        self.transform, self.target_transform = transform, target_transform

    def __call__(self, payload: bytes, path: Optional[str], name: str,
                 offset: Optional[int] = None, keyed: bool = True) -> Tuple[Any, Any]:
        try:
            header, img_bytes = unpack(payload)
        except ImageError as exc:  # a damaged IRHeader: the record is no image to use
            raise undecodable(exc.message, path, name, offset) from None
        image: Any = img_bytes
        try:
            if self.decode != "raw":
                image = self._image(img_bytes)
            if self.transform is not None:
                image = self.transform(image)  # ImageAugment may decode the raw bytes itself
        except ImageError as exc:  # say which record: one without a key by its image id too
            who = name if keyed else f"{name} (image id {header.id})"
            raise undecodable(exc.message, path, who, offset) from None
        return image, self.label(header)

    def label(self, header: Any) -> Any:
        """The sample's label: ``target_transform``'s value, else a float32 tensor (a scalar,
        or the record's label vector)."""
        if self.target_transform is not None:
            return self.target_transform(header.label)
        if header.flag == 0:
            return torch.tensor(header.label, dtype=torch.float32)
        return torch.from_numpy(np.array(header.label, dtype=np.float32))

    def batch_augment(self) -> Optional[ImageAugment]:
        """The ``ImageAugment`` that can decode a whole batch at once (``decode="raw"`` and an
        ``ImageAugment`` transform), else None."""
        if self.decode == "raw" and isinstance(self.transform, ImageAugment):
            return self.transform
        return None

    def batch(self, payloads: Sequence[Tuple[bytes, Optional[str], str, Optional[int]]],
              augment: ImageAugment, skip: bool = False) -> Tuple[List[Any], List[ImageError]]:
        """Decode and augment ``(payload, path, name, offset)`` records into one batch array
        (``recio.torch.batching``): the samples ``DataLoader`` collates without a copy, and the
        errors naming the undecodable records left out (``skip``; else the first raises)."""
        n = len(payloads)
        buf = _batching.pool().take((n,) + augment.shape, augment.dtype)
        params = augment.draw(n)
        labels: List[Any] = []
        errors: List[ImageError] = []
        run = augment.augmenter
        for j, (payload, path, name, offset) in enumerate(payloads):
            try:  # into the next free row: a skipped record leaves no gap
                header, img_bytes = unpack(payload)
                run(img_bytes, buf.array[len(labels)], params[j])
            except ImageError as exc:
                error = undecodable(exc.message, path, name, offset)
                if not skip:
                    _batching.give_back(buf)
                    raise error from None
                errors.append(error)
                continue
            labels.append(self.label(header))
        if not labels:
            _batching.give_back(buf)
            return [], errors
        if len(labels) < n:
            buf = _batching.shrink(buf, len(labels))
        collated = _batching.collate_labels(labels)
        return _batching.samples(buf, collated, labels), errors

    def _image(self, img_bytes: bytes) -> Any:
        """The decoded image as ``decode`` asks: a PIL image, an HWC array or a CHW tensor."""
        arr = decode_image(img_bytes, 1 if self.mode == "RGB" else 0,
                           max_pixels=self.max_pixels)
        if self.decode == "pil":
            return Image.fromarray(arr)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if self.decode == "numpy":
            return arr
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


class PayloadDecoder:
    """``decode=`` a callable: the sample is ``transform(decode(payload))`` of the whole record
    payload, whatever the record holds (picklable when ``decode`` and ``transform`` are)."""

    def __init__(self, decode: Callable[[bytes], Any], transform: Optional[Callable],
                 target_transform: Optional[Callable]) -> None:
        if target_transform is not None:
            raise ValueError("target_transform converts an image record's label; with decode= a "
                             "callable, the callable (or transform) makes the whole sample")
        self.decode, self.transform = decode, transform

    def __call__(self, payload: bytes, path: Optional[str], name: str,
                 offset: Optional[int] = None, keyed: bool = True) -> Any:
        try:
            sample = self.decode(payload)
            return sample if self.transform is None else self.transform(sample)
        except RecordIOError as exc:  # say which record, when the error class lets us
            if type(exc).__init__ is not RecordIOError.__init__:
                raise
            raise type(exc)(f"{name}: {exc.message}", path, offset) from None

def make_decoder(decode: Decode, mode: str, transform: Optional[Callable],
                 target_transform: Optional[Callable],
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> Union[ImageDecoder, PayloadDecoder]:
    """The decoder of a dataset's ``decode=``: a built-in image decoder by name (``ValueError``
    for an unknown one), or the callable (``TypeError`` for anything else)."""
    if isinstance(decode, str):
        return ImageDecoder(decode, mode, transform, target_transform, max_pixels)
    if callable(decode):
        return PayloadDecoder(decode, transform, target_transform)
    raise TypeError(f"decode must be a callable bytes -> sample or one of {_IMAGE_DECODES}, "
                    f"got {type(decode).__name__} {decode!r}")
