"""``RecordSampler``: a ``DistributedSampler`` for ``RecordDataset`` whose order is a pure
function of ``(seed, epoch)`` and which resumes exactly mid-epoch (``recio.torch.resume`` holds
the arithmetic of its state)."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from recio.optional import require
from recio.torch import resume as _rs
from recio.torch.datasets import RecordDataset

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
    from torch.utils.data import Sampler
else:
    torch = require("torch", feature="recio.torch")
    Sampler = torch.utils.data.Sampler


def _world(num_replicas: Optional[int], rank: Optional[int]) -> Tuple[int, int]:
    """``(num_replicas, rank)``: as given, else from ``torch.distributed`` when initialised,
    else ``(1, 0)``."""
    dist = torch.distributed
    ready = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if ready else 1
    if rank is None:
        rank = dist.get_rank() if ready else 0
    num_replicas, rank = int(num_replicas), int(rank)
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, num_replicas={num_replicas}), got {rank}")
    return num_replicas, rank


class _Run:
    """One pass of a RecordSampler: the base it starts from and how far this rank got."""

    __slots__ = ("epoch", "cursor", "skip", "start", "yielded", "active")

    def __init__(self, epoch: int, cursor: int = 0, skip: Sequence[int] = (),
                 yielded: int = 0) -> None:
        self.epoch, self.cursor, self.skip = int(epoch), int(cursor), [int(v) for v in skip]
        self.start = self.yielded = int(yielded)
        self.active = False


class RecordSampler(Sampler):
    """A ``DistributedSampler`` for ``RecordDataset`` that resumes exactly, mid-epoch.

    ``RecordSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
    drop_last=False, pad=False)``: rank ``rank`` of ``num_replicas`` (default: the
    ``torch.distributed`` rank and world size when initialised, else 0 of 1) gets every
    ``num_replicas``-th index of the epoch's order, a permutation that depends only on
    ``(seed, epoch)`` (NumPy PCG64; call ``set_epoch`` each epoch). ``data_source`` is the
    dataset (its length is used; a ``RecordDataset`` is also fingerprinted, and one reading
    URLs through a cache is told each pass's order, so it downloads the shards in the order
    their records come) or a record count.

    End of the epoch: by default (``pad=False``) every record is handed out exactly once, also
    across a resume into another number of ranks, and ranks may get one index fewer (DDP then
    needs ``join()`` or ``drop_last`` on the loader). ``pad=True`` is ``DistributedSampler``'s
    rule: every rank gets the same count, so up to ``num_replicas - 1`` records are handed out
    a second time at the end of the epoch (after a resume, at the end of the resumed part);
    ``drop_last=True`` instead leaves out up to ``num_replicas - 1`` records. With one rank,
    or a count that ``num_replicas`` divides, all three give every record exactly once.

    Resume (the ``Stateful`` protocol of torchdata's ``StatefulDataLoader``, which saves and
    restores it as part of ``loader.state_dict()``): ``state_dict()`` is a small dict (epoch,
    seed, the base ``cursor``/``skip`` of positions delivered before this run, this rank's
    ``yielded`` count); its size does not grow with the position, and ``load_state_dict``
    rebuilds the epoch's order and continues at the next unseen index without replaying.
    ``load_state_dict`` takes this rank's own state, any rank's (ranks in lockstep, as DDP),
    every rank's (a list), a ``StatefulDataLoader`` state or ``recio.torch.resume_state()``'s
    merged state, and adapts to another ``num_replicas``: every new rank loads the same saved
    state and the ranks together hand out each remaining record once (padding aside). The
    state counts what the loader *delivered* only through ``StatefulDataLoader`` (or a plain
    ``DataLoader`` with ``num_workers=0``): a plain loader with workers draws indices ahead.

    What one rank's state means when shares differ (``pad=False`` and a count ``num_replicas``
    does not divide: ranks get ``ceil`` or ``floor`` of ``n / num_replicas``): it says how many
    indices that rank handed out. Every rank's states: each rank continues from its own. One
    rank's state (lockstep): part-way through that rank's share, every rank handed out as many;
    its whole share handed out, the pass was over on every rank (the longer shares' last index
    included: a state saved after the epoch's loop), so nothing is left to hand out. To resume
    exactly from the moment the shorter ranks finished and the longer had one index left, save
    rank 0's state (the longest share) or every rank's (``recio.torch.resume.rank_positions``
    is the rule). After any load of a state a sampler produced, ``len()`` is never negative and
    is what iterating hands out.
    """

    def __init__(self, data_source: Any, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, pad: bool = False) -> None:
        if isinstance(data_source, (int, np.integer)):
            self.num_records, fingerprint = int(data_source), None
        else:
            self.num_records = len(data_source)
            fp = getattr(data_source, "fingerprint", None)
            fingerprint = fp() if callable(fp) else None
        if self.num_records < 0:
            raise ValueError(f"a record count must be >= 0, got {self.num_records}")
        self.source = fingerprint
        self.num_replicas, self.rank = _world(num_replicas, rank)
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.drop_last, self.pad = bool(drop_last), bool(pad)
        self.epoch = 0
        # a RecordDataset with a cache: told the order of each pass (it downloads ahead)
        self._dataset = data_source if isinstance(data_source, RecordDataset) else None
        self._pending: Optional[_Run] = None  # a loaded state, used by the next __iter__
        self._run: Optional[_Run] = None  # the pass in progress (or the last one)
        self._order: Optional[Tuple[Tuple[int, int, int], np.ndarray]] = None

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order from the next iteration on (as
        ``DistributedSampler.set_epoch``); a loaded state of another epoch is dropped."""
        self.epoch = int(epoch)
        run = self._pending
        if run is not None and run.epoch != self.epoch and self._counts(run)[1] <= run.start:
            self._pending = None  # that epoch was over: nothing is dropped
        if self._pending is not None and self._pending.epoch != self.epoch:
            warnings.warn(f"set_epoch({self.epoch}) drops the loaded state of epoch "
                          f"{self._pending.epoch}: this epoch starts from its beginning "
                          f"(call set_epoch with the saved epoch to resume it)", stacklevel=2)
            self._pending = None

    # -- iteration ------------------------------------------------------------------------
    def _counts(self, run: _Run) -> Tuple[int, int]:
        m = _rs.remaining_count(self.num_records, run.cursor, run.skip)
        return m, _rs.rank_count(m, self.num_replicas, self.rank, self.drop_last, self.pad)

    def __len__(self) -> int:
        run = self._pending
        if run is None and self._run is not None and self._run.active:
            run = self._run
        if run is None:
            run = _Run(self.epoch)
        return self._counts(run)[1] - run.start

    def _epoch_order(self, epoch: int) -> np.ndarray:
        key = (self.seed, epoch, self.num_records)
        if self._order is None or self._order[0] != key:
            self._order = (key, _rs.epoch_order(self.seed, epoch, self.num_records))
        return self._order[1]

    def __iter__(self) -> Iterator[int]:
        # a generator: StatefulDataLoader calls iter() before load_state_dict, and the body
        # (which takes the loaded state) runs at the first next()
        run = self._pending if self._pending is not None else _Run(self.epoch)
        self._pending = None
        run.active = True
        self._run = run
        if self._dataset is not None:
            self._dataset.prefetch(self._chunks(run, 1 << 16, 1 << 20))
        for indices in self._chunks(run, 256, 1 << 16):  # small first: the first comes at once
            for index in indices.tolist():
                run.yielded += 1  # before the yield: the loader reads the state between batches
                yield index
        run.active = False

    def _chunks(self, run: _Run, first: int, most: int) -> Iterator[np.ndarray]:
        """The indices ``run`` hands out from its start, in chunks of ``first`` growing to
        ``most``."""
        m, count = self._counts(run)
        order = self._epoch_order(run.epoch) if self.shuffle else None
        skip = np.asarray(run.skip, dtype=np.int64)
        lo, chunk = run.start, first
        while lo < count:
            hi = min(count, lo + chunk)
            t = _rs.dealt_indices(self.rank, self.num_replicas, lo, hi, m)
            pos = _rs.positions(run.cursor, skip, t)
            yield order[pos] if order is not None else pos
            lo, chunk = hi, min(chunk * 2, most)

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """This rank's position: what was delivered before this pass (``cursor``, ``skip``)
        and how many indices it has handed out since (``yielded``). Plain ints and lists."""
        run = self._pending
        if run is None:
            run = self._run if self._run is not None and self._run.epoch == self.epoch \
                else _Run(self.epoch)
        return {"format": _rs.SAMPLER_FORMAT, "version": _rs.VERSION,
                "num_records": self.num_records, "source": self.source, "seed": self.seed,
                "shuffle": self.shuffle, "epoch": run.epoch, "drop_last": self.drop_last,
                "pad": self.pad, "num_replicas": self.num_replicas, "rank": self.rank,
                "cursor": run.cursor, "skip": list(run.skip), "yielded": run.yielded}

    def load_state_dict(self, state_dict: Any) -> None:
        """Continue from a saved position (see the class docstring for what it accepts); the
        next iteration hands out this rank's share of the records not delivered yet, in the
        saved epoch's order. ``ValueError`` when the state is for other data (record count,
        files) or another seed / shuffle, or when the states given do not fit together."""
        states = _rs.states_of(state_dict, _rs.SAMPLER_FORMAT, "RecordSampler")
        for s in states:
            _rs.mismatch(s, {"num_records": self.num_records, "source": self.source,
                             "seed": self.seed, "shuffle": self.shuffle}, "RecordSampler")
        _rs.check_sampler_group(states)
        s0 = states[0]
        epoch = int(s0["epoch"])
        same_shape = (int(s0["num_replicas"]) == self.num_replicas
                      and bool(s0["drop_last"]) == self.drop_last
                      and bool(s0.get("pad", True)) == self.pad
                      and len({int(s["yielded"]) for s in states}) == 1)
        if same_shape:  # every rank continues where it was: exactly the uninterrupted order
            # (ranks at different positions get a new base instead, where they all start at 0,
            # so that a lockstep state saved later says the same for every rank)
            mine = _rs.rank_positions(states, self.num_records)[self.rank]
            run = _Run(epoch, s0["cursor"], s0["skip"], mine)
        else:
            cursor, skip = _rs.merge_sampler(states, self.num_records)
            run = _Run(epoch, cursor, skip)
        self.epoch = epoch
        self._pending = run
