"""``RecordIterableDataset``: streams ``.rec`` files, one ``InputSplit`` part per reader.

The process's part (``part_index``/``num_parts``, by default the ``torch.distributed`` rank and
world size) is split again among its DataLoader workers, so no two workers (on any rank) read
the same record. Each reader keeps its remaining work as a small state (``recio.torch.resume``
holds the arithmetic), so it resumes exactly mid-epoch, also with another number of ranks or
workers. What a record becomes is its ``decode=`` (``recio.torch.decoders``: an image by default,
or any callable); a record whose image nothing decodes is not yielded (or raises), as
``on_undecodable`` says (``recio.image.undecodable``).
"""
from __future__ import annotations

import os
import warnings
import zlib
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union, cast)

import numpy as np

from recio.image.pixels.codec import DEFAULT_MAX_PIXELS
from recio.image.undecodable import SKIP, check_policy
from recio.optional import require
from recio.records.cache.shard_cache import READ_AHEAD, ShardCache
from recio.records.reader import RecordReader
from recio.records.shuffle import ShuffleBuffer
from recio.records.split import InputSplit, SourceLayout, load_record_offsets
from recio.storage import PathLike, StorageOptions
from recio.torch import resume as _rs
from recio.torch.decoders import Decode, make_decoder
from recio.torch.skipcount import SKIPPED, SkipCount

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
else:
    torch = require("torch", feature="recio.torch")
    IterableDataset = torch.utils.data.IterableDataset
    get_worker_info = torch.utils.data.get_worker_info


def _process_part(part_index: Optional[int], num_parts: Optional[int]) -> Tuple[int, int]:
    """This process's ``(part_index, num_parts)``: as given, else the ``torch.distributed`` rank
    and world size when initialised, else ``(0, 1)``."""
    if part_index is not None and num_parts is not None:
        return int(part_index), int(num_parts)
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class _Resume:
    """A loaded RecordIterableDataset state: the readers' states by slot (all of them, or the
    one StatefulDataLoader hands a worker) and, when complete, their merge (fits any shape)."""

    __slots__ = ("epoch", "slots", "by_slot", "merged")

    def __init__(self, epoch: int, slots: int, by_slot: Dict[int, Dict[str, Any]],
                 merged: Optional[Dict[str, Any]]) -> None:
        self.epoch, self.slots, self.by_slot, self.merged = epoch, slots, by_slot, merged


class _Live:
    """A reader's progress through its work, kept up to date before every record is handed
    out (what ``state_dict()`` reports while iterating)."""

    __slots__ = ("plan", "intervals", "iv", "pos", "queued", "qi", "buf_off", "draining",
                 "shuffler", "rng", "yielded")

    def __init__(self, plan: Dict[str, Any], rng: Optional[np.random.Generator]) -> None:
        self.plan = plan
        self.intervals = [list(iv) for iv in plan["intervals"]]
        self.iv = 0
        self.pos = self.intervals[0][0] if self.intervals else 0
        self.queued = [int(v) for v in plan["queued"]]
        self.qi = 0
        # a restored shuffle buffer (records by offset), until the pass makes the buffer
        self.buf_off = [int(v) for v in plan["buffer"]]
        self.draining = bool(plan["draining"]) and rng is not None
        if rng is None and self.buf_off:  # no shuffling now: buffered records go first
            self.queued, self.buf_off = self.buf_off + self.queued, []
        #: the pass's shuffle buffer of records (offset at [1]), once it is made
        self.shuffler: Optional[ShuffleBuffer] = None
        self.rng = rng
        self.yielded = int(plan["yielded"])

    def state(self) -> Dict[str, Any]:
        intervals: List[List[int]] = []
        if self.iv < len(self.intervals):
            a, b = self.intervals[self.iv]
            if max(self.pos, a) < b:
                intervals.append([max(self.pos, a), b])
            intervals.extend(list(iv) for iv in self.intervals[self.iv + 1:])
        if self.shuffler is not None:
            buffer, draining = [rec[1] for rec in self.shuffler.held()], self.shuffler.draining
        else:
            buffer, draining = list(self.buf_off), self.draining
        p = self.plan
        return _rs.stream_state(
            epoch=p["epoch"], seed=p["seed"], source=p["source"], slot=p["slot"],
            slots=p["slots"], intervals=intervals, queued=self.queued[self.qi:],
            resumes=p["resumes"], base_delivered=p["base_delivered"], base=p["base"],
            buffer=buffer, draining=draining,
            rng=self.rng.bit_generator.state if self.rng is not None else None,
            yielded=self.yielded, ranks=int(p.get("ranks", 1)))


def _files_in_order(layout: Any, live: _Live) -> List[int]:
    """The numbers of the files a reader's pass reads, in the order it first reads them: the
    files of its restored shuffle buffer and queued records, then of its byte ranges."""
    order: Dict[int, None] = {}
    for g in live.buf_off + live.queued:
        order.setdefault(layout.file_of(g), None)
    for a, b in live.intervals:
        i = layout.file_of(a)
        while i < len(layout.paths) and layout.starts[i] < b:
            order.setdefault(i, None)
            i += 1
    return list(order)


def _source_id(layout: Any) -> Dict[str, Any]:
    """What a RecordIterableDataset state was saved for: the number of (non-empty) files, their
    bytes, and a digest of their names and sizes (names without folders: the data may move)."""
    names = "\n".join(f"{os.path.basename(p)}:{n}" for p, n in zip(layout.paths, layout.sizes))
    return {"files": len(layout.paths), "bytes": layout.total,
            "names": f"{zlib.crc32(names.encode()):08x}"}


def _check_source(saved: Any, here: Dict[str, Any]) -> None:
    if saved == here:
        return
    saved = saved if isinstance(saved, Mapping) else {}
    if saved.get("files") != here["files"] or saved.get("bytes") != here["bytes"]:
        what = (f"{saved.get('files')} file(s) of {saved.get('bytes', 0):,} bytes in the state, "
                f"{here['files']} file(s) of {here['bytes']:,} bytes here")
    else:
        what = "files of the same sizes but other names (or sizes in another order)"
    raise ValueError(f"this RecordIterableDataset state was saved for other data: {what}")


def _bounds(balance: str, intervals: List[List[int]], slots: int, layout: Any) -> List[float]:
    """Where ``slots`` new readers split the remaining ``intervals``: at record heads, by bytes
    or (``balance="records"``) by record count."""
    if balance == "records":
        records = np.asarray(load_record_offsets(layout, None), dtype=np.int64).reshape(-1, 2)
        heads = np.sort(np.asarray(layout.starts, np.int64)[records[:, 0]] + records[:, 1])
        return _rs.record_bounds(intervals, slots, heads)
    return _rs.byte_bounds(intervals, slots, lambda pos: layout.to_head(pos, 4 << 20))


def _loaded(state_dict: Any, here: Dict[str, Any], seed: int) -> _Resume:
    """A loaded state, checked against the dataset's files (``here``) and ``seed``: the
    readers' states by slot and, when every reader's is there, their merge."""
    states = _rs.states_of(state_dict, _rs.STREAM_FORMAT, "RecordIterableDataset")
    for s in states:
        _check_source(s.get("source"), here)
        _rs.mismatch(s, {"seed": seed}, "RecordIterableDataset")
    _rs.same(states, ("epoch", "base", "slots"), "RecordIterableDataset")
    slots = int(states[0]["slots"])
    by_slot = {int(s["slot"]): s for s in states}
    if len(by_slot) != len(states):
        raise ValueError("two states of the same reader: pass each reader's state once")
    if len(states) > 1 and set(by_slot) != set(range(slots)):
        missing = sorted(set(range(slots)) - set(by_slot))
        raise ValueError(f"got the states of {len(by_slot)} of the {slots} readers of the "
                         f"saved job (readers {missing} are missing; a reader is one "
                         f"DataLoader worker of one rank): pass every rank's saved state")
    # every reader's state: their merge fits any shape (a lone reader's fits only its own)
    merged = _rs.merge_stream(states) if set(by_slot) == set(range(slots)) else None
    return _Resume(int(states[0]["epoch"]), slots, by_slot, merged)


def _misfit(r: _Resume, slot: int, slots: int) -> str:
    """Why reader ``slot`` of ``slots`` cannot take the loaded readers' states."""
    have = ", ".join(str(q) for q in sorted(r.by_slot))
    return (f"this RecordIterableDataset was given the state of reader {have} of {r.slots} "
            f"but runs as reader {slot} of {slots} (a reader is one DataLoader worker of "
            f"one rank, numbered rank * num_workers + worker): the number of ranks or "
            f"DataLoader workers changed. StatefulDataLoader.load_state_dict cannot change "
            f"them; instead pass every rank's saved loader state to "
            f"dataset.load_state_dict([...]) (or recio.torch.resume_state) and iterate a "
            f"new loader without calling loader.load_state_dict")


class RecordIterableDataset(IterableDataset):
    """Streams records; each (process, DataLoader worker) reads its own ``InputSplit`` part.

    The samples are ``(image, label)`` of image records by default; ``decode=`` a callable
    ``bytes -> sample`` serves any record (``recio.torch.decoders``).

    The process reads part ``part_index`` of ``num_parts`` (default: the ``torch.distributed``
    rank and world size when initialised, else the whole input); its DataLoader workers split
    that again: worker ``w`` of ``W`` reads part ``part_index * W + w`` of ``num_parts * W``. So
    the parts together are the whole input, each record read once. ``source`` is anything
    ``InputSplit`` takes (a path, a list, ``a.rec;b.rec``, a directory, a glob, a shard set's
    manifest; URLs too, streamed through fsspec with ``storage_options``, or with ``cache_dir``
    (or ``RECIO_CACHE_DIR``) read from local copies of the whole files kept in that folder, at
    most ``cache_limit`` bytes, each reader downloading its next files while it reads one:
    see ``recio.records.cache.shard_cache``). The files are found when the dataset is made.
    ``shuffle_buffer > 0`` shuffles within a bounded buffer, seeded by ``(seed, epoch, part)``;
    call ``set_epoch`` each epoch. ``balance="records"`` splits by record count from the
    ``.idx`` files so that ranks get equal shares (needed by DDP, which expects the same number
    of batches on every rank). A record whose image nothing decodes is not yielded: a
    ``SkippedRecordWarning`` names it (file, byte offset, place, image id), ``num_skipped``
    counts it (with the workers'); ``on_undecodable="raise"`` raises ``ImageError`` instead.

    Exact mid-epoch resume (torchdata's ``StatefulDataLoader`` protocol): ``state_dict()`` is
    a reader's *remaining work* (its unread byte ranges, the records in its shuffle buffer and
    the buffer's generator), which ``StatefulDataLoader`` saves for each worker as part of
    ``loader.state_dict()``; its size does not grow with the position, and a restore reads
    only what is still to be read. Same ranks and workers: ``loader.load_state_dict(saved)``
    continues every reader exactly where it was (the same order an uninterrupted run gives).
    Another number of ranks or workers (which StatefulDataLoader refuses): give the dataset
    what every rank saved and iterate a **new** loader::

        ds = RecordIterableDataset("train.rec", shuffle_buffer=1000, part_index=rank,
                                   num_parts=world)
        ds.load_state_dict([torch.load(f"loader{r}.pt") for r in range(old_world)])
        loader = StatefulDataLoader(ds, batch_size=64, num_workers=3)   # any shape
        for batch in loader: ...   # the records not delivered before the stop, each once

    (``recio.torch.resume_state(saved)`` gives the same merged state as one small dict to keep.)
    A loaded state is used by one pass (the loader's next iteration, in all its workers); the
    pass after it reads the whole epoch. It belongs to its epoch: ``set_epoch`` with another
    epoch drops it. Loading a state saved for other files or another ``seed`` raises
    ``ValueError``; so does a reader's state loaded into a reader of another shape (see above
    for the way to change shape).
    """

    def __init__(self, source: Union[PathLike, Sequence[PathLike]],
                 transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: Decode = "tensor",
                 mode: str = "RGB", shuffle_buffer: int = 0, seed: int = 0,
                 part_index: Optional[int] = None, num_parts: Optional[int] = None,
                 balance: str = "bytes", max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None, on_undecodable: str = SKIP) -> None:
        super().__init__()
        self.on_undecodable = check_policy(on_undecodable)
        self._skips = SkipCount()  # shared memory: DataLoader workers add to it
        self.storage_options = storage_options
        if isinstance(source, (list, tuple)):
            self.source: Any = [os.fspath(p) for p in source]
        else:
            self.source = os.fspath(cast(PathLike, source))
        if int(shuffle_buffer) < 0:
            raise ValueError(f"shuffle_buffer must be >= 0, got {shuffle_buffer}")
        if (part_index is None) != (num_parts is None):
            raise ValueError("give both part_index and num_parts, or neither")
        if part_index is not None and num_parts is not None and not 0 <= part_index < num_parts:
            raise ValueError(f"part_index must be in [0, num_parts={num_parts}), "
                             f"got {part_index}")
        self.shuffle_buffer, self.seed, self.epoch = int(shuffle_buffer), int(seed), 0
        self.part_index, self.num_parts, self.balance = part_index, num_parts, balance
        self._decoder = make_decoder(decode, mode, transform, target_transform, max_pixels)
        self._cache = ShardCache.configured(cache_dir, cache_limit, storage_options)
        # the files, their sizes (and with a cache what each must be), found once: every
        # reader and pass uses these
        self._layout = SourceLayout(self.source, storage_options, self._cache)
        self._resume: Optional[_Resume] = None
        # a state loaded in the main process is for one pass: the first pass of DataLoader
        # workers to start writes its base seed here (shared memory), later passes skip it
        self._claim: Optional[Any] = None
        self._live: Optional[_Live] = None
        self._loads = 0  # bumped by every load: a cached plan is for one loaded state
        self._planned: Optional[Tuple[Any, Any]] = None
        # persistent DataLoader workers keep the copy of the dataset they started with:
        # set_epoch writes [epoch, calls so far] here (shared memory) for them to take up
        self._epoch_cell = torch.zeros(2, dtype=torch.int64).share_memory_()
        self._epoch_seen = 0

    @property
    def num_skipped(self) -> int:
        """Undecodable records met so far, in this process and its DataLoader workers."""
        return self._skips.value

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffle order is used (like ``DistributedSampler.set_epoch``);
        a loaded state of another epoch is dropped. Persistent DataLoader workers take it up
        at their next pass."""
        self._set_epoch(epoch)
        cell = self._epoch_cell
        cell[0], cell[1] = self.epoch, int(cell[1]) + 1
        self._epoch_seen = int(cell[1])

    def _set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        r = self._resume
        if r is not None and r.epoch != self.epoch:
            used = self._claim is not None and int(self._claim[0]) != -1  # by workers' pass
            if not used and any(_rs.stream_left(st) for st in r.by_slot.values()):
                warnings.warn(f"set_epoch({self.epoch}) drops the loaded state of epoch "
                              f"{r.epoch}: this epoch starts from its beginning (call "
                              f"set_epoch with the saved epoch to resume it)", stacklevel=2)
            self._resume, self._claim = None, None

    def part(self) -> Tuple[int, int]:
        """``(part_index, num_parts)`` of the ``InputSplit`` this process/worker reads."""
        info = get_worker_info()
        num_workers, worker_id = (1, 0) if info is None else (info.num_workers, info.id)
        index, count = _process_part(self.part_index, self.num_parts)
        return index * num_workers + worker_id, count * num_workers

    # -- what a reader reads ------------------------------------------------------------------
    def _plan(self, slot: int, slots: int) -> Tuple[Dict[str, Any], Any]:
        """Reader ``slot`` of ``slots``'s work for this pass, as a state, and the layout."""
        r = self._resume_for_this_pass()
        key = (self.epoch, slot, slots, self._loads, r is not None)
        if self._planned is not None and self._planned[0] == key:
            return self._planned[1]
        ranks = _process_part(self.part_index, self.num_parts)[1]
        if r is not None:
            layout = self._layout
            _check_source(next(iter(r.by_slot.values()))["source"], _source_id(layout))
            mine = r.by_slot.get(slot) if r.slots == slots else None
            if mine is not None and int(mine.get("ranks", ranks)) == ranks:
                plan = dict(mine)  # the same reader of the same shape: exactly where it was
            elif r.merged is not None:  # another shape: a share of everything left
                plan = _rs.share(r.merged, slot, slots,
                                 _bounds(self.balance, r.merged["intervals"], slots, layout), ranks)
            else:
                raise ValueError(_misfit(r, slot, slots))
        else:
            split = InputSplit(self.source, slot, slots, balance=self.balance,
                               storage_options=self.storage_options, _layout=self._layout)
            layout = split.layout
            plan = _rs.stream_state(
                epoch=self.epoch, seed=self.seed, source=_source_id(layout), slot=slot,
                slots=slots, intervals=[[split.begin, split.end]] if split.begin < split.end
                else [], queued=[], resumes=0, base_delivered=0, base="start", ranks=ranks)
        self._planned = (key, (plan, layout))
        return plan, layout

    def _resume_for_this_pass(self) -> Optional[_Resume]:
        """The loaded state, unless it is for another epoch or an earlier pass used it."""
        r = self._resume
        if r is None or r.epoch != self.epoch:
            return None
        if self._claim is None:
            return r
        claimed, info = int(self._claim[0]), get_worker_info()
        if info is None:  # the main process: only before any pass of workers used it
            return r if claimed == -1 else None
        this_pass = int(info.seed) - int(info.id)  # the loader iterator's base seed
        if claimed == -1:
            self._claim[0] = this_pass  # its workers start together and write the same value
            return r
        return r if claimed == this_pass else None

    def __iter__(self) -> Iterator[Any]:
        calls = int(self._epoch_cell[1])
        if calls != self._epoch_seen and get_worker_info() is not None:
            # a persistent worker: the main process called set_epoch since this copy was made
            self._epoch_seen = calls
            self._set_epoch(int(self._epoch_cell[0]))
        self._live = None  # state_dict() reports this pass's start until it begins
        return self._records()

    def _records(self) -> Iterator[Any]:
        part_index, num_parts = self.part()
        plan, layout = self._plan(part_index, num_parts)
        if self._resume is not None:
            self._resume, self._claim = None, None  # used once: the next pass starts afresh
            self._loads += 1  # (and the plan made from it is not reused)
        rng = None
        if self.shuffle_buffer:
            if plan["rng"] is None and plan["resumes"] == 0:
                rng = np.random.default_rng([self.seed, self.epoch, part_index])
            else:
                rng = np.random.default_rng([self.seed, self.epoch, part_index, num_parts,
                                             int(plan["resumes"])])
            if plan["rng"] is not None:
                rng.bit_generator.state = plan["rng"]
        live = self._live = _Live(plan, rng)
        decode = self._decoder
        where = f"of part {part_index}/{num_parts}"
        readers: Dict[str, Any] = {}

        def read_at(g: int) -> Tuple[None, int, str, int, bytes]:
            i = layout.file_of(g)
            path, off = layout.paths[i], g - layout.starts[i]
            reader = readers.get(path)
            if reader is None:
                reader = readers[path] = RecordReader(path, storage_options=self.storage_options,
                                                      shard_cache=self._cache)
            return None, g, path, off, reader.read_at(off)

        def records() -> Iterator[Tuple[Optional[int], int, str, int, bytes]]:
            n = 0
            while live.qi < len(live.queued):
                rec = read_at(live.queued[live.qi])
                live.qi += 1
                yield (n,) + rec[1:]
                n += 1
            while live.iv < len(live.intervals):
                end = live.intervals[live.iv][1]
                i = layout.file_of(live.pos)
                while i < len(layout.paths) and layout.starts[i] < end:
                    first, path = layout.starts[i], layout.paths[i]
                    lo, hi = max(live.pos, first) - first, min(end, layout.starts[i + 1]) - first
                    if lo < hi:
                        if ahead is not None:
                            ahead.reached(step[i])
                        with RecordReader(path, storage_options=self.storage_options,
                                          shard_cache=self._cache) as rd:
                            rd.source.limit(hi)
                            rd.seek(lo)
                            for off, payload in rd.records_with_offsets():
                                after = rd.tell()
                                live.pos = first + after  # read: no longer unread work
                                yield n, first + off, path, off, payload
                                n += 1
                                if after >= hi:
                                    break
                    live.pos = max(live.pos, first + hi)
                    i += 1
                live.iv += 1
                if live.iv < len(live.intervals):
                    live.pos = live.intervals[live.iv][0]

        def out(rec: Tuple[Optional[int], int, str, int, bytes]) -> Any:
            n, _, path, off, payload = rec
            name = f"record #{n} {where}" if n is not None else f"record at byte {off} {where}"
            return self._skips.decoded(self.on_undecodable, decode, payload, path, name, off,
                                       keyed=False)

        files = _files_in_order(layout, live)
        step = {f: k for k, f in enumerate(files)}
        ahead = None if self._cache is None else self._cache.prefetch(
            [layout.paths[i] for i in files], ahead=READ_AHEAD)
        try:
            stream: Iterator[Any] = records()
            if rng is not None:  # a restored buffer's records are read by offset (as saved)
                live.shuffler = ShuffleBuffer(self.shuffle_buffer, rng,
                                              [read_at(g) for g in live.buf_off], live.draining)
                stream = live.shuffler.shuffle(stream)
            for rec in stream:
                item = out(rec)
                if item is SKIPPED:
                    continue
                live.yielded += 1  # before the yield: the loader reads the state then
                yield item
        finally:
            if ahead is not None:
                ahead.stop()
            for reader in readers.values():
                reader.close()

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """This reader's remaining work in the epoch (see the class docstring): plain ints,
        lists and strings. In a DataLoader worker it is the worker's own; use the loader's
        ``state_dict()`` to save them all."""
        if self._live is not None:
            return self._live.state()
        plan, _ = self._plan(*self.part())
        return dict(plan)

    def load_state_dict(self, state_dict: Any) -> None:
        """Resume from what was saved: this reader's own state (as ``StatefulDataLoader`` gives
        it to each worker), or every reader's (a ``StatefulDataLoader`` state, a list of them
        with one per rank, or ``recio.torch.resume_state``'s merge), which fits any number of
        ranks and workers. The next pass delivers the records not delivered before, each once.
        ``ValueError`` for a state of other files or another seed, states that do not fit
        together, or a reader's state in a reader of another shape."""
        resume = _loaded(state_dict, _source_id(self._layout), self.seed)
        if get_worker_info() is not None:  # StatefulDataLoader restoring its workers
            slot, now = self.part()
            if resume.merged is None and not (resume.slots == now and slot in resume.by_slot):
                raise ValueError(_misfit(resume, slot, now))
            self._claim = None
        else:
            self._claim = torch.full((1,), -1, dtype=torch.int64).share_memory_()
        self._resume, self.epoch = resume, resume.epoch
        self._loads += 1
        self._live = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_live"], state["_planned"] = None, None  # per process
        return state
