"""Datasets, as ``mxnet.gluon.data.dataset``."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from recio.errors import suggests_keywords
from recio.mx import recordio
from recio.mx.ndarray import NDArray
from recio.records.index_format import sibling_index_path


class Dataset:
    """Base class: ``__getitem__`` and ``__len__``."""

    def __getitem__(self, idx: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def transform(self, fn: Callable[..., Any], lazy: bool = True) -> "Dataset":
        """A dataset whose samples are ``fn(*sample)`` (computed on access when ``lazy``)."""
        trans = _LazyTransformDataset(self, fn)
        return trans if lazy else SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn: Callable[[Any], Any], lazy: bool = True) -> "Dataset":
        """Apply ``fn`` to the first element of each sample (the data), keep the rest."""
        return self.transform(_TransformFirst(fn), lazy)

    def take(self, count: Optional[int]) -> "Dataset":
        """The first ``count`` samples."""
        if count is None or count > len(self):
            count = len(self)
        return _SampledDataset(self, list(range(count)))

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """Part ``index`` of ``num_shards`` contiguous parts (the first ones one longer)."""
        if not 0 <= index < num_shards:
            raise ValueError(f"shard index {index} is out of 0..{num_shards - 1}")
        length = len(self)
        step, rest = divmod(length, num_shards)
        start = step * index + min(index, rest)
        return _SampledDataset(self, list(range(start, start + step + (index < rest))))

    def filter(self, fn: Callable[[Any], bool]) -> "Dataset":
        """The samples for which ``fn(sample)`` is true."""
        return _SampledDataset(self, [i for i in range(len(self)) if fn(self[i])])


class SimpleDataset(Dataset):
    """A dataset over a list (or anything indexable with a length)."""

    def __init__(self, data: Sequence[Any]) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        return self._data[idx]


class _LazyTransformDataset(Dataset):
    def __init__(self, data: Dataset, fn: Callable[..., Any]) -> None:
        self._data, self._fn = data, fn

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        item = self._data[idx]
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)


class _TransformFirst:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def __call__(self, x: Any, *args: Any) -> Any:
        return (self._fn(x),) + args if args else self._fn(x)


class _SampledDataset(Dataset):
    def __init__(self, dataset: Dataset, indices: List[int]) -> None:
        self._dataset, self._indices = dataset, indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, idx: int) -> Any:
        return self._dataset[self._indices[idx]]


@suggests_keywords
class ArrayDataset(Dataset):
    """Samples from several arrays of the same length: ``(a[i], b[i], ...)``."""

    def __init__(self, *args: Any) -> None:
        if not args:
            raise ValueError("ArrayDataset needs at least 1 array")
        self._length = len(args[0])
        self._data = []
        for i, data in enumerate(args):
            if len(data) != self._length:
                raise ValueError(f"All arrays must have the same length; array[0] has length "
                                 f"{self._length} while array[{i}] has {len(data)}.")
            if isinstance(data, NDArray) and len(data.shape) == 1:
                data = data.asnumpy()
            self._data.append(data)

    def __getitem__(self, idx: int) -> Any:
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)

    def __len__(self) -> int:
        return self._length


@suggests_keywords
class RecordFileDataset(Dataset):
    """The raw records of a ``.rec`` by position, through the ``.idx`` beside it."""

    def __init__(self, filename: str) -> None:
        self.idx_file = sibling_index_path(filename)
        self.filename = filename
        self._record = recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx: int) -> bytes:
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self) -> int:
        return len(self._record.keys)


__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset"]
