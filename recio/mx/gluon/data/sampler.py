"""Samplers, as ``mxnet.gluon.data.sampler``."""
from __future__ import annotations

from typing import Any, Iterator, List

import numpy as np


class Sampler:
    """Base class: iterates over sample indices."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``start, start + 1, ..., start + length - 1``."""

    def __init__(self, length: int, start: int = 0) -> None:
        self._length, self._start = length, start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """``0..length-1`` shuffled with ``numpy.random`` on every pass."""

    def __init__(self, length: int) -> None:
        self._length = length

    def __iter__(self) -> Iterator[int]:
        indices = np.arange(self._length)
        np.random.shuffle(indices)
        return iter(indices.tolist())

    def __len__(self) -> int:
        return self._length


class BatchSampler(Sampler):
    """Groups ``sampler``'s indices into lists of ``batch_size``; ``last_batch``: ``'keep'``,
    ``'discard'`` or ``'rollover'`` (the rest starts the next pass)."""

    def __init__(self, sampler: Sampler, batch_size: int, last_batch: str = "keep") -> None:
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError(f"last_batch must be one of 'keep', 'discard', or 'rollover', "
                             f"but got {last_batch}")
        self._sampler, self._batch_size, self._last_batch = sampler, batch_size, last_batch
        self._prev: List[Any] = []

    def __iter__(self) -> Iterator[List[Any]]:
        batch, self._prev = self._prev, []
        for i in self._sampler:
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        if self._last_batch == "keep":
            return (len(self._sampler) + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return len(self._sampler) // self._batch_size
        return (len(self._prev) + len(self._sampler)) // self._batch_size


__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler"]
