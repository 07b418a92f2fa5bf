"""PyTorch ``IterableDataset`` over a :class:`recio.MinibatchSource`, resumable exactly.

Each item is one minibatch (use ``DataLoader(ds, batch_size=None)``). ``state_dict()`` is the
source's checkpoint after the last item handed out, so saving it with the model and calling
``load_state_dict()`` after a restart continues with exactly the minibatches an uninterrupted run
would have produced. The state lives in the process that iterates: use the dataset directly or
with ``num_workers=0``; with one DataLoader worker pass ``with_state=True`` and keep the state
that comes with each item. For data-parallel training give each rank its own source
(``worker_rank``, ``num_workers``).

This module imports torch; ``recio`` imports it only on demand (``pip install 'recio[torch]'``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Mapping, Optional

import numpy as np

from recio.optional import require
from recio.sequence.minibatch import Minibatch, MinibatchSource

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
else:
    torch = require("torch", feature="recio.torch.minibatch")
    IterableDataset = torch.utils.data.IterableDataset
    get_worker_info = torch.utils.data.get_worker_info


def _to_tensors(mb: Minibatch) -> Dict[str, torch.Tensor]:
    """Default transform: per stream a padded ``B x T x ...`` tensor and a ``name_mask`` (B x T)."""
    out: Dict[str, torch.Tensor] = {}
    for name in mb.streams:
        data, mask = mb.padded(name)
        out[name] = torch.from_numpy(np.ascontiguousarray(data))
        out[name + "_mask"] = torch.from_numpy(mask)
    return out


class MinibatchDataset(IterableDataset):
    """Yields ``transform(minibatch)`` for minibatches of ``minibatch_size`` samples.

    One ``for`` loop runs to the end of the current epoch (``stop_at_epoch_end=True``) or until the
    source is exhausted; the next loop continues on the same nominal timeline.
    """

    def __init__(self, source: MinibatchSource, minibatch_size: int,
                 transform: Optional[Callable[[Minibatch], Any]] = _to_tensors,
                 stop_at_epoch_end: bool = True, with_state: bool = False) -> None:
        super().__init__()
        if minibatch_size < 1:
            raise ValueError(f"minibatch_size must be >= 1 sample, not {minibatch_size}")
        self.source = source
        self.minibatch_size = int(minibatch_size)
        self.transform = transform
        self.stop_at_epoch_end = stop_at_epoch_end
        self.with_state = with_state

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError("MinibatchDataset yields one global stream: use DataLoader "
                               "num_workers=0 or 1, and worker_rank/num_workers of the "
                               "MinibatchSource for data-parallel ranks")
        while True:
            mb = self.source.next_minibatch(self.minibatch_size)
            if mb is None:
                return
            item = self.transform(mb) if self.transform is not None else mb
            if self.with_state:
                yield item, self.state_dict()
            else:
                yield item
            if self.stop_at_epoch_end and mb.end_of_epoch:
                return

    def state_dict(self) -> Dict[str, Any]:
        """JSON-serialisable position after the last minibatch handed out."""
        return {"source": self.source.get_checkpoint_state(),
                "minibatch_size": self.minibatch_size}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state_dict()`` output (taken in this or another process)."""
        self.source.restore_from_checkpoint(state["source"])
        self.minibatch_size = int(state.get("minibatch_size", self.minibatch_size))
