"""``gluon.data.vision.datasets``: ``ImageRecordDataset`` (the datasets that download
themselves, MNIST, CIFAR..., are not here)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from recio.errors import ImageError, suggests_keywords
from recio.image.undecodable import (RAISE, SKIP, SkipCount, check_policy, next_decodable,
                                     undecodable, warn_skipped)
from recio.mx import image, recordio
from recio.mx.gluon.data.dataset import RecordFileDataset
from recio.records.index_format import key_text


@suggests_keywords
class ImageRecordDataset(RecordFileDataset):
    """The images of a ``.rec`` (with its ``.idx`` beside it) and their labels:
    ``dataset[i]`` is ``(image, label)``, the image an ``(H, W, 3)`` uint8 RGB NDArray
    (``flag=0``: ``(H, W, 1)`` greyscale) with MXNet's pixels, the label the record header's
    (a float, or an array for several labels). ``transform(image, label)`` is applied when
    given.

    A record whose image nothing decodes gives the next decodable record in index order in its
    place, with a ``SkippedRecordWarning`` naming both (file, key, byte offset, why), and is
    counted in ``num_skipped``, so a ``DataLoader`` epoch goes on; ``on_undecodable="raise"``
    (recio's own parameter; MXNet raises) raises ``ImageError`` instead
    (``recio.image.undecodable``)."""

    def __init__(self, filename: str, flag: int = 1,
                 transform: Optional[Callable[..., Any]] = None,
                 on_undecodable: str = SKIP) -> None:
        super().__init__(filename)
        self._flag = flag
        self._transform = transform
        self.on_undecodable = check_policy(on_undecodable)
        self._skipped = SkipCount()

    @property
    def num_skipped(self) -> int:
        """Records asked for so far whose image did not decode (another stood in for each)."""
        return self._skipped.value

    def __getitem__(self, idx: int) -> Any:
        try:
            return self._sample(idx)
        except ImageError as exc:
            keys = self._record.keys
            key = keys[idx]
            error = undecodable(exc.message, self.filename, f"key {key_text(key)}",
                                int(self._record.idx[key]))
        if self.on_undecodable == RAISE:
            raise error
        position, sample = next_decodable(error, idx % len(keys), len(keys), self._sample)
        self._skipped.add()
        warn_skipped(str(error), f"key {key_text(keys[position])}")
        return sample

    def _sample(self, idx: int) -> Any:
        header, img = recordio.unpack(super().__getitem__(idx))
        decoded = image.imdecode(img, self._flag)
        if self._transform is not None:
            return self._transform(decoded, header.label)
        return decoded, header.label


__all__ = ["ImageRecordDataset"]
