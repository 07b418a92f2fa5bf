"""``DataLoader``, as MXNet 1.9.1's ``gluon.data.DataLoader`` (in one process).

``num_workers=N`` loads samples in ``N`` threads (MXNet uses processes); the batches and their
order are the same.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, List, Optional

import numpy as np

from recio.errors import suggests_keywords
from recio.mx import ndarray as nd
from recio.mx.gluon.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from recio.mx.ndarray import NDArray


def default_batchify_fn(data: List[Any]) -> Any:
    """Stack NDArrays into one, batch tuples element-wise, numbers into an NDArray of their
    NumPy dtype (MXNet's default)."""
    if isinstance(data[0], NDArray):
        return nd.stack(*data)
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(i)) for i in zip(*data)]
    array = np.asarray(data)
    return nd.array(array, dtype=array.dtype)


@suggests_keywords
class DataLoader:
    """Batches from a dataset, as MXNet's ``gluon.data.DataLoader``: ``batch_size``,
    ``shuffle`` (``numpy.random``), ``sampler``/``batch_sampler``, ``last_batch`` (``'keep'``,
    ``'discard'``, ``'rollover'``), ``batchify_fn``; ``num_workers > 0`` loads samples in that
    many threads. Other MXNet arguments (``pin_memory``, ``prefetch``, ``thread_pool``,
    ``timeout``) are accepted and have no effect."""

    def __init__(self, dataset: Any, batch_size: Optional[int] = None, shuffle: bool = False,
                 sampler: Optional[Sampler] = None, last_batch: Optional[str] = None,
                 batch_sampler: Optional[Sampler] = None,
                 batchify_fn: Optional[Callable[[List[Any]], Any]] = None,
                 num_workers: int = 0, pin_memory: bool = False, pin_device_id: int = 0,
                 prefetch: Optional[int] = None, thread_pool: bool = False,
                 timeout: int = 120) -> None:
        self._dataset = dataset
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is")
            if sampler is None:
                sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(
                    len(dataset))
            elif shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch or "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError("batch_size, shuffle, sampler and last_batch must not be specified "
                             "if batch_sampler is specified.")
        self._batch_sampler = batch_sampler
        self._num_workers = max(0, int(num_workers))
        self._batchify_fn = batchify_fn or default_batchify_fn

    def __iter__(self) -> Iterator[Any]:
        if not self._num_workers:
            for batch in self._batch_sampler:
                yield self._batchify_fn([self._dataset[idx] for idx in batch])
            return
        with ThreadPoolExecutor(self._num_workers, thread_name_prefix="recio-DataLoader") as pool:
            for batch in self._batch_sampler:
                yield self._batchify_fn(list(pool.map(self._dataset.__getitem__, batch)))

    def __len__(self) -> int:
        return len(self._batch_sampler)


__all__ = ["DataLoader", "default_batchify_fn"]
