"""``num_skipped`` of ``recio.torch``'s datasets: one count over the main process and every
DataLoader worker, forked or spawned (the policy itself: ``recio.image.undecodable``).

The count is a small int64 tensor in shared memory, made with the dataset, so the workers
(which get the dataset by fork or by pickling) add to the same memory the main process reads,
as ``RecordIterableDataset``'s epoch cell does. Each process adds to a slot of its own (the main
process to slot 0, worker ``w`` to slot ``1 + w``), so no two processes ever add to one cell at
once; the total is the sum.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from recio.errors import ImageError
from recio.image.undecodable import skip_or_raise
from recio.optional import require

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
    from torch.utils.data import get_worker_info
else:
    torch = require("torch", feature="recio.torch")
    get_worker_info = torch.utils.data.get_worker_info

#: slots of a count: the main process's, then one for each DataLoader worker (a worker whose id
#: is past the last one shares a slot: 8 KiB of shared memory covers any real loader)
_SLOTS = 1024
#: the threads of one process (a thread pool calling ``ds[i]``) add one at a time
_LOCK = threading.Lock()
#: what :meth:`SkipCount.decoded` gives for a skipped record (a sample may be None)
SKIPPED = object()


class SkipCount:
    """The records a dataset skipped, counted across processes (see the module docstring);
    pickles (by value with plain ``pickle``, as shared memory into DataLoader workers)."""

    def __init__(self) -> None:
        self.cells = torch.zeros(_SLOTS, dtype=torch.int64).share_memory_()

    def add(self, n: int = 1) -> None:
        info = get_worker_info()
        slot = 0 if info is None else 1 + info.id % (_SLOTS - 1)
        with _LOCK:
            self.cells[slot] += n

    @property
    def value(self) -> int:
        return int(self.cells.sum())

    def decoded(self, on_undecodable: str, decode: Callable[..., Any], *args: Any,
                **kwargs: Any) -> Any:
        """``decode(*args, **kwargs)``, or :data:`SKIPPED` for an undecodable record (it raised
        ``ImageError``), warned about and counted; ``on_undecodable="raise"`` raises."""
        try:
            return decode(*args, **kwargs)
        except ImageError as error:
            skip_or_raise(error, on_undecodable)
            self.add()
            return SKIPPED
