"""The bounded shuffle buffer of the streaming readers, resumable at any item.

A stream too large to permute whole is shuffled through a buffer of ``size`` items: while the
buffer fills, items are only taken; once it is full, each new item takes the place of one drawn
at random, which is given out; when the stream ends, the items still held are given out in a
random permutation. Every item comes exactly once, and the order is a pure function of the
items and the generator, so a seeded generator gives a reproducible epoch.

The buffer's position is the items it holds, whether it is draining (then only the items not
yet given out), and the generator's state. A reader that saves those (``RecordIterableDataset``
saves each held record as its byte offset, and the generator's ``bit_generator.state``) builds
the buffer again from them and goes on with exactly the order an uninterrupted run gives.
``ImageBatchIter`` (``recio.image.batches.iterators``) and ``recio.torch.RecordIterableDataset``
both shuffle with this one buffer.
"""
from __future__ import annotations

from typing import Generic, Iterable, Iterator, List, TypeVar

import numpy as np

T = TypeVar("T")


class ShuffleBuffer(Generic[T]):
    """At most ``size`` held items, drawn from with ``rng`` (a ``numpy.random.Generator``).

    ``held`` and ``draining`` restore a saved position (see the module docstring): the items
    :meth:`held` returned then, and :attr:`draining` then, with ``rng`` set back to its state
    then. A buffer may be given more than ``size`` items to hold (the merged buffers of several
    readers); the draws replace only the first ``size`` of them, the rest wait for the drain.
    """

    __slots__ = ("size", "rng", "items", "draining", "drained")

    def __init__(self, size: int, rng: np.random.Generator, held: Iterable[T] = (),
                 draining: bool = False) -> None:
        if int(size) < 1:
            raise ValueError(f"a shuffle buffer holds at least 1 item, got size={size}")
        self.size, self.rng = int(size), rng
        self.items: List[T] = list(held)
        #: True once the stream has ended: the held items are in their final order
        self.draining = bool(draining)
        self.drained = 0  # items of the drain given out so far

    def held(self) -> List[T]:
        """The items held and not yet given out; while draining, in the order they will come."""
        return self.items[self.drained:] if self.draining else list(self.items)

    def shuffle(self, stream: Iterable[T]) -> Iterator[T]:
        """Give out every item held and every item of ``stream``, each once, shuffled.

        The position (:meth:`held`, :attr:`draining`, the generator) is brought up to date
        before each item is given out, so it can be saved while the consumer holds the item.
        A buffer restored as draining takes nothing more from ``stream``.
        """
        items, size, draw = self.items, self.size, self.rng.integers
        if not self.draining:
            for item in stream:
                if len(items) < size:
                    items.append(item)
                    continue
                j = int(draw(size))
                gone, items[j] = items[j], item
                yield gone
            order = self.rng.permutation(len(items))
            items[:] = [items[j] for j in order]
            self.draining, self.drained = True, 0
        while self.drained < len(items):
            self.drained += 1
            yield items[self.drained - 1]
