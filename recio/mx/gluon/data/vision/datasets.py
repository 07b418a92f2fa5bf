"""``gluon.data.vision.datasets``: ``ImageRecordDataset`` (the datasets that download
themselves, MNIST, CIFAR..., are not here)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from recio.errors import suggests_keywords
from recio.mx import image, recordio
from recio.mx.gluon.data.dataset import RecordFileDataset


@suggests_keywords
class ImageRecordDataset(RecordFileDataset):
    """The images of a ``.rec`` (with its ``.idx`` beside it) and their labels:
    ``dataset[i]`` is ``(image, label)``, the image an ``(H, W, 3)`` uint8 RGB NDArray
    (``flag=0``: ``(H, W, 1)`` greyscale) with MXNet's pixels, the label the record header's
    (a float, or an array for several labels). ``transform(image, label)`` is applied when
    given."""

    def __init__(self, filename: str, flag: int = 1,
                 transform: Optional[Callable[..., Any]] = None) -> None:
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx: int) -> Any:
        header, img = recordio.unpack(super().__getitem__(idx))
        decoded = image.imdecode(img, self._flag)
        if self._transform is not None:
            return self._transform(decoded, header.label)
        return decoded, header.label


__all__ = ["ImageRecordDataset"]
