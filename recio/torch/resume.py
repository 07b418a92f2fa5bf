"""The arithmetic behind exact mid-epoch resume of ``RecordSampler`` and ``RecordIterableDataset``.

Both follow the protocol of torchdata's ``StatefulDataLoader`` (``state_dict()`` /
``load_state_dict()``; torchdata is not needed by recio itself), and both keep their state as a
small dict of plain ints and lists whose size does not grow with the position in the epoch.

``RecordSampler`` (map-style). The epoch's order is ``G`` (a permutation that is a pure function
of ``(seed, epoch)``, or ``0..N-1``). The *base* of a state is what was delivered before the
current run: every position below ``cursor`` plus the positions in ``skip`` (sorted, all above
``cursor``). The remaining positions ``Rm`` (those ``>= cursor`` not in ``skip``) are dealt
round-robin: rank ``r`` of ``R`` takes ``Rm[r], Rm[r + R], ...`` (padded or cut as
``DistributedSampler`` does), and its state says how many it has handed out (``yielded``).
Merging the states of a save (every rank's, or one rank's when the ranks run in lockstep) gives
a new base: ``cursor`` moves to the first position not delivered by any rank, ``skip`` keeps the
few delivered past it. The merge costs ``O(len(skip) + ranks)``, whatever the position.

``RecordIterableDataset`` (streaming). Each reader (a rank's DataLoader worker) keeps its
*remaining work*: the byte ranges of its part not read yet (global offsets over the files as
one stream), the records it read into its shuffle buffer but has not handed out (their global
offsets, in buffer order), records it must read by offset before its ranges, and its shuffle
generator. The remaining work of a save is the union over every reader, so merging is a set
union; a new set of readers splits the union again (byte ranges at record heads, or by record
count with ``balance="records"``) and deals the pending records round-robin.

``resume_state()`` is the public entry point: it accepts what a job saved (the state dicts of a
``StatefulDataLoader``, or of the sampler / dataset, one or a list of them: one per rank) and
returns one merged state that fits any number of ranks and DataLoader workers.
"""
from __future__ import annotations

import bisect
import zlib
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

#: the ``format`` of a RecordSampler state
SAMPLER_FORMAT = "recio.RecordSampler"
#: the ``format`` of a RecordIterableDataset state
STREAM_FORMAT = "recio.RecordIterableDataset"
#: the state layout version this recio writes (and the newest it reads)
VERSION = 1
_FORMATS = (SAMPLER_FORMAT, STREAM_FORMAT)
_INF = float("inf")

Interval = List[int]  # [begin, end): global byte offsets


# -- finding recio states in whatever was saved ----------------------------------------------------

def _collect_states(saved: Any) -> List[Dict[str, Any]]:
    """Every recio sampler / dataset state inside ``saved``: a state itself, a
    ``StatefulDataLoader.state_dict()`` (0 or N workers), a checkpoint dict holding one, or a
    list of any of these (e.g. one per rank). A loader state taken with
    ``snapshot_every_n_steps > 1`` is refused (its worker states lag the delivered batches)."""
    found: List[Dict[str, Any]] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, Mapping):
            if obj.get("format") in _FORMATS:
                found.append(dict(obj))
                return
            steps = obj.get("_steps_since_snapshot")
            if isinstance(steps, int) and steps > 0:
                raise ValueError(
                    f"this StatefulDataLoader state was taken {steps} batch(es) after its last "
                    f"snapshot (snapshot_every_n_steps > 1), so the readers' states lag what was "
                    f"delivered; create the loader with snapshot_every_n_steps=1 (the default) "
                    f"to resume with another number of ranks or workers")
            for value in obj.values():
                walk(value)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                if isinstance(value, (Mapping, list, tuple)):
                    walk(value)

    walk(saved)
    return found


def states_of(saved: Any, fmt: str, what: str) -> List[Dict[str, Any]]:
    """The states of format ``fmt`` in ``saved`` (see ``_collect_states``); ValueError when there
    is none, or when ``saved`` holds states of the other kind only."""
    found = _collect_states(saved)
    mine = [s for s in found if s["format"] == fmt]
    if not mine:
        other = {s["format"] for s in found} - {fmt}
        if other:
            raise ValueError(f"{what}.load_state_dict got the state of a {other.pop()[6:]}, "
                             f"not of a {what}")
        raise ValueError(f"{what}.load_state_dict: no {what} state found in the object given "
                         f"(pass {what}.state_dict(), StatefulDataLoader.state_dict(), or a "
                         f"list of them, one per rank)")
    for s in mine:
        version = s.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise ValueError(f"a {what} state of version {version!r}: this recio reads "
                             f"versions up to {VERSION} (upgrade recio)")
        _check_fields(s, what)
    return mine


def stream_left(state: Mapping[str, Any]) -> bool:
    """Whether a RecordIterableDataset state still has records to deliver."""
    return bool(state["intervals"] or state["queued"] or state["buffer"])


# -- checking a state's fields (a damaged or hand-edited state is refused, never half-used) --------

def _int(state: Mapping[str, Any], key: str, what: str, lo: int = 0,
         hi: Optional[int] = None) -> int:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"not a valid {what} state: {key} is {_show(value)}, not an integer")
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo:,}..{hi:,}" if hi is not None else f">= {lo:,}"
        raise ValueError(f"not a valid {what} state: {key} = {_show(value)} is outside "
                         f"{bound}")
    return int(value)


def _ints(state: Mapping[str, Any], key: str, what: str) -> List[int]:
    values = state.get(key)
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"not a valid {what} state: {key} is {_show(values)}, not a list")
    bad = [v for v in values
           if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0]
    if bad:
        raise ValueError(f"not a valid {what} state: {key} holds {_show(bad[0])}, not an "
                         f"integer >= 0")
    return [int(v) for v in values]


def _check_fields(state: Mapping[str, Any], what: str) -> None:
    """ValueError naming the first field of ``state`` that is missing, of the wrong type or out
    of range (a state damaged or edited by hand would otherwise repeat or drop records)."""
    if state["format"] == SAMPLER_FORMAT:
        n = _int(state, "num_records", what)
        replicas = _int(state, "num_replicas", what, 1)
        _int(state, "rank", what, 0, replicas - 1)
        _int(state, "epoch", what, 0)
        _int(state, "seed", what, -(1 << 63), (1 << 64) - 1)
        cursor = _int(state, "cursor", what, 0, n)
        _int(state, "yielded", what, 0, n)
        skip = _ints(state, "skip", what)
        if any(b <= a for a, b in zip(skip, skip[1:])) or (skip and (skip[0] <= cursor
                                                                    or skip[-1] >= n)):
            raise ValueError(f"not a valid {what} state: skip must hold increasing positions "
                             f"between cursor ({cursor:,}) and num_records ({n:,})")
        return
    slots = _int(state, "slots", what, 1)
    _int(state, "slot", what, 0, slots - 1)
    if "ranks" in state:  # states saved before recio recorded it have none
        _int(state, "ranks", what, 1, slots)
    _int(state, "epoch", what, 0)
    _int(state, "resumes", what, 0)
    _int(state, "base_delivered", what, 0)
    _int(state, "yielded", what, 0)
    intervals = state.get("intervals")
    if not isinstance(intervals, (list, tuple)) or any(
            not isinstance(iv, (list, tuple)) or len(iv) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in iv)
            or not 0 <= iv[0] < iv[1] for iv in intervals):
        raise ValueError(f"not a valid {what} state: intervals must be a list of [begin, end) "
                         f"byte ranges with 0 <= begin < end")
    _ints(state, "queued", what)
    _ints(state, "buffer", what)


def mismatch(state: Mapping[str, Any], here: Mapping[str, Any], what: str) -> None:
    """ValueError naming every field of ``here`` whose value differs in ``state``."""
    diffs = [f"{k} {_show(state.get(k))} in the state, {_show(v)} here"
             for k, v in here.items() if state.get(k) != v]
    if diffs:
        raise ValueError(f"this {what} state was saved for other data or settings: "
                         + "; ".join(diffs))


def _show(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def same(states: Sequence[Mapping[str, Any]], keys: Iterable[str], what: str) -> None:
    for key in keys:
        values = {repr(s.get(key)) for s in states}
        if len(values) > 1:
            raise ValueError(f"these {what} states do not come from one save: they differ in "
                             f"{key} ({', '.join(sorted(values))})")


def token(*parts: Any) -> str:
    """A short stable digest of ``parts`` (names a merged base)."""
    return f"{zlib.crc32(repr(parts).encode()):08x}"


# -- RecordSampler ---------------------------------------------------------------------------------

def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The epoch's shuffled order of ``0..n-1``: a pure function of ``(seed, epoch)`` (PCG64)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, int(epoch)]).permutation(n)


def remaining_count(n: int, cursor: int, skip: Sequence[int]) -> int:
    """How many positions are left after a base: ``n - cursor - len(skip)``."""
    return max(0, n - cursor - len(skip))


def rank_count(m: int, replicas: int, rank: int, drop_last: bool, pad: bool) -> int:
    """How many of ``m`` remaining positions rank ``rank`` of ``replicas`` is dealt."""
    if drop_last:
        return m // replicas
    if pad:
        return -(-m // replicas)
    return len(range(rank, m, replicas))


def positions(cursor: int, skip: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``Rm[t]`` for an array ``t`` of indices into the remaining positions (those ``>= cursor``
    not in the sorted array ``skip``): the fixpoint of ``p = cursor + t + #(skip <= p)``, reached
    from below in at most ``len(skip) + 1`` vectorised steps (usually two)."""
    t = np.asarray(t, dtype=np.int64)
    p = cursor + t
    if len(skip) == 0:
        return p
    while True:
        q = cursor + t + np.searchsorted(skip, p, side="right")
        if np.array_equal(q, p):
            return p
        p = q


def dealt_indices(rank: int, replicas: int, start: int, stop: int, m: int) -> np.ndarray:
    """Indices into the remaining positions of rank ``rank``'s items ``start..stop-1`` (padding
    past ``m`` wraps around, as DistributedSampler repeats its first indices)."""
    t = rank + np.arange(start, stop, dtype=np.int64) * replicas
    if m:
        t = np.where(t >= m, t % m, t)
    return t


def rank_positions(states: Sequence[Mapping[str, Any]], n: int) -> Dict[int, int]:
    """How many indices each rank of the save had handed out, ``{rank: count}`` for every
    rank, from ``states`` (one base, one rank count): the one rule for what a state means.

    A rank's state is its own position: the indices it handed out since the base. Given
    every rank's state, each counts for itself. Given only some (ranks that ran in lockstep,
    as DDP does, save one rank's state), the state of rank ``r`` at ``k`` stands for every
    rank: while ``k`` is below ``r``'s share, every rank handed out ``k`` (the shares of
    ``pad=False`` differ by at most one, so ``k`` is below every share); once ``r`` handed
    out its whole share the pass was over, and every rank handed out its whole share, the
    longer ones' last index included (a state saved at the end of an epoch). A count is never
    more than the rank's share, so nothing after a load is negative."""
    s0 = states[0]
    cursor, skip = int(s0["cursor"]), [int(v) for v in s0["skip"]]
    replicas = int(s0["num_replicas"])
    drop_last, pad = bool(s0["drop_last"]), bool(s0.get("pad", True))
    m = remaining_count(n, cursor, skip)
    shares = {r: rank_count(m, replicas, r, drop_last, pad) for r in range(replicas)}
    by_rank = {int(s["rank"]): int(s["yielded"]) for s in states}
    if len(by_rank) < replicas:  # lockstep: one rank's count stands for every rank
        rank, k = next(iter(by_rank.items()))
        if k >= shares[rank]:
            by_rank = dict(shares)
        else:
            by_rank = {r: k for r in range(replicas)}
    return {r: min(k, shares[r]) for r, k in by_rank.items()}


def merge_sampler(states: Sequence[Mapping[str, Any]], n: int) -> Tuple[int, List[int]]:
    """The base ``(cursor, skip)`` after the runs described by ``states`` (one base, one rank
    count; every rank's state, or any of them when the ranks ran in lockstep:
    ``rank_positions``)."""
    s0 = states[0]
    cursor, skip = int(s0["cursor"]), [int(v) for v in s0["skip"]]
    replicas = int(s0["num_replicas"])
    drop_last, pad = bool(s0["drop_last"]), bool(s0.get("pad", True))
    m = remaining_count(n, cursor, skip)
    counts = rank_positions(states, n)
    live = [r + counts[r] * replicas for r in range(replicas)
            if counts[r] < rank_count(m, replicas, r, drop_last, pad)]
    first = min(live) if live else m  # the first remaining index nobody handed out
    if first >= m:
        return n, []
    # delivered past `first`: only the lead of the ranks ahead (O(lag), not O(position))
    later = [t for r in range(replicas)
             for t in range(r + max(0, (first - r) // replicas + 1) * replicas,
                            min(m, r + counts[r] * replicas), replicas)]
    skip_arr = np.asarray(skip, dtype=np.int64)
    new_cursor = int(positions(cursor, skip_arr, np.asarray([first]))[0])
    delivered = positions(cursor, skip_arr, np.asarray(sorted(later), dtype=np.int64)).tolist()
    new_skip = sorted(set(delivered) | {v for v in skip if v > new_cursor})
    return new_cursor, new_skip


# -- RecordIterableDataset -------------------------------------------------------------------------

def coalesce(intervals: Iterable[Sequence[int]]) -> List[Interval]:
    """Sorted, non-empty, touching ranges joined. ValueError when two overlap (states that do
    not come from one save)."""
    out: List[Interval] = []
    for a, b in sorted((int(a), int(b)) for a, b in intervals if int(a) < int(b)):
        if out and a < out[-1][1]:
            raise ValueError(f"the states overlap (bytes {a:,}..{min(b, out[-1][1]):,} are "
                             f"unread in two of them): they do not come from one save")
        if out and a == out[-1][1]:
            out[-1][1] = b
        else:
            out.append([a, b])
    return out


def merge_stream(states: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """One state holding the remaining work of every reader in ``states`` (which must be all the
    readers of one run: slots ``0..slots-1``)."""
    s0 = states[0]
    same(states, ("epoch", "seed", "source", "base", "slots"), "RecordIterableDataset")
    slots = int(s0["slots"])
    have = sorted(int(s["slot"]) for s in states)
    if len(set(have)) != len(have):
        raise ValueError(f"two states of the same reader (slots {have}): pass each reader's "
                         f"state once")
    missing = sorted(set(range(slots)) - set(have))
    if missing:
        raise ValueError(
            f"the states of readers {_ranges(missing)} of {slots} are missing (got "
            f"{_ranges(have)}); a reader is one DataLoader worker of one rank, numbered "
            f"rank * num_workers + worker: pass the saved loader state of every rank")
    intervals = coalesce(iv for s in states for iv in s["intervals"])
    pending = sorted(int(v) for s in states for v in list(s["queued"]) + list(s["buffer"]))
    if len(set(pending)) != len(pending):
        raise ValueError("a record is pending in two of these states: they do not come from "
                         "one save")
    starts = [a for a, _ in intervals]
    for v in pending:
        i = bisect.bisect_right(starts, v) - 1
        if i >= 0 and v < intervals[i][1]:
            raise ValueError(f"the record at byte {v:,} is both pending and unread in these "
                             f"states: they do not come from one save")
    delivered = int(s0["base_delivered"]) + sum(int(s["yielded"]) for s in states)
    return stream_state(
        epoch=int(s0["epoch"]), seed=s0["seed"], source=s0["source"], slot=0, slots=1,
        intervals=intervals, queued=pending, resumes=int(s0["resumes"]) + 1,
        base_delivered=delivered)


def stream_state(*, epoch: int, seed: int, source: Any, slot: int, slots: int,
                 intervals: List[Interval], queued: List[int], resumes: int,
                 base_delivered: int, base: Optional[str] = None, buffer: Optional[List[int]] =
                 None, draining: bool = False, rng: Any = None, yielded: int = 0,
                 ranks: int = 1) -> Dict[str, Any]:
    """A RecordIterableDataset state (a reader's, or a merged one: slot 0 of 1). ``ranks``: how
    many processes the ``slots`` readers were spread over (the rest are DataLoader workers), so
    that a resume as 2 ranks x 1 worker does not pass for 1 rank x 2 workers."""
    if base is None:
        base = token(epoch, seed, source, intervals, queued, resumes)
    return {"format": STREAM_FORMAT, "version": VERSION, "epoch": epoch, "seed": seed,
            "source": source, "base": base, "resumes": resumes, "slot": slot, "slots": slots,
            "ranks": ranks,
            "intervals": intervals, "queued": queued, "buffer": list(buffer or []),
            "draining": draining, "rng": rng, "base_delivered": base_delivered,
            "yielded": yielded, "delivered": base_delivered + yielded}


def _ranges(values: Sequence[int]) -> str:
    out, values = [], sorted(values)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out)


def clip(intervals: Sequence[Interval], lo: float, hi: float) -> List[Interval]:
    """The parts of ``intervals`` inside ``[lo, hi)``."""
    out = []
    for a, b in intervals:
        a2, b2 = max(a, lo), min(b, hi)
        if a2 < b2:
            out.append([int(a2), int(b2)])
    return out


def byte_bounds(intervals: Sequence[Interval], parts: int,
                to_head: Callable[[int], int]) -> List[float]:
    """``parts + 1`` global offsets splitting ``intervals`` into ``parts`` pieces of about equal
    bytes, each inner one moved forward to the next record head (``to_head``)."""
    lengths = [b - a for a, b in intervals]
    total = sum(lengths)
    cum = [0]
    for n in lengths:
        cum.append(cum[-1] + n)
    step = -(-total // parts) if total else 0
    bounds: List[float] = [-_INF]
    for k in range(1, parts):
        v = k * step
        if v >= total:
            bounds.append(_INF)
            continue
        i = bisect.bisect_right(cum, v) - 1
        a, b = intervals[i]
        real = a + (v - cum[i])
        head: float = to_head(real) if real > a else a
        if head >= b:  # no head left in this range: the piece starts with the next range
            head = intervals[i + 1][0] if i + 1 < len(intervals) else _INF
        bounds.append(max(head, bounds[-1]))
    bounds.append(_INF)
    return bounds


def record_bounds(intervals: Sequence[Interval], parts: int,
                  heads: np.ndarray) -> List[float]:
    """``parts + 1`` global offsets splitting ``intervals`` into ``parts`` pieces of
    ``ceil(records / parts)`` records; ``heads`` are the sorted global offsets of all records."""
    inside = [heads[np.searchsorted(heads, a):np.searchsorted(heads, b)] for a, b in intervals]
    rem = np.concatenate(inside) if inside else np.empty(0, np.int64)
    m = len(rem)
    step = -(-m // parts) if m else 0
    bounds: List[float] = [-_INF]
    for k in range(1, parts):
        bounds.append(int(rem[k * step]) if k * step < m else _INF)
    bounds.append(_INF)
    return bounds


def share(merged: Mapping[str, Any], slot: int, slots: int, bounds: Sequence[float],
          ranks: int = 1) -> Dict[str, Any]:
    """Reader ``slot`` of ``slots``'s part of a merged state: the byte ranges between its two
    ``bounds`` and every ``slots``-th pending record."""
    return stream_state(
        epoch=merged["epoch"], seed=merged["seed"], source=merged["source"], slot=slot,
        slots=slots, intervals=clip(merged["intervals"], bounds[slot], bounds[slot + 1]),
        queued=[int(v) for v in merged["queued"][slot::slots]], resumes=merged["resumes"],
        base_delivered=int(merged["base_delivered"]), base=merged["base"], ranks=ranks)


# -- the public entry point ------------------------------------------------------------------------

def resume_state(saved: Any) -> Dict[str, Any]:
    """One state to resume from with any number of ranks and DataLoader workers.

    ``saved``: what the job saved when it stopped: ``StatefulDataLoader.state_dict()`` (any
    ``num_workers``), ``RecordSampler.state_dict()`` or ``RecordIterableDataset.state_dict()``,
    or a checkpoint dict holding one, or a list of these, one per rank. For a
    ``RecordIterableDataset`` pass every rank's state (each rank streams its own part); for a
    ``RecordSampler`` one rank's state is enough when the ranks ran in lockstep (DDP), else pass
    every rank's.

    Load the result with ``sampler.load_state_dict(state)`` / ``dataset.load_state_dict(state)``
    in every (new) rank, then build a *new* loader with any ``num_workers`` (do not call
    ``loader.load_state_dict``: StatefulDataLoader itself refuses another worker count). The
    result is small (its size does not grow with the position in the epoch) and plain
    (ints, lists, strings), so it can be saved on its own. Raises ``ValueError`` for states that
    do not fit together (another epoch, seed, data; a missing rank; overlapping work).
    """
    found = _collect_states(saved)
    if not found:
        raise ValueError("resume_state: no recio sampler or dataset state in the object given "
                         "(pass StatefulDataLoader.state_dict(), RecordSampler.state_dict() or "
                         "RecordIterableDataset.state_dict(), or a list of them, one per rank)")
    kinds = {s["format"] for s in found}
    if len(kinds) > 1:
        raise ValueError("resume_state: the object holds the states of both a RecordSampler "
                         "and a RecordIterableDataset; pass the states of one loader")
    fmt = kinds.pop()
    what = fmt[len("recio."):]
    states = states_of(found, fmt, what)
    if fmt == SAMPLER_FORMAT:
        return _merged_sampler_state(states)
    return merge_stream(states)


def _merged_sampler_state(states: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The states of one save (one base) as one base: rank 0 of 1, nothing handed out yet."""
    check_sampler_group(states)
    s0 = states[0]
    cursor, skip = merge_sampler(states, int(s0["num_records"]))
    out = dict(s0)
    out.update(cursor=cursor, skip=skip, num_replicas=1, rank=0, yielded=0)
    return out


def check_sampler_group(states: Sequence[Mapping[str, Any]]) -> None:
    """ValueError unless ``states`` are ranks of one save whose positions can be merged."""
    same(states, ("epoch", "seed", "shuffle", "num_records", "source", "cursor", "skip",
                   "num_replicas", "drop_last", "pad"), "RecordSampler")
    replicas = int(states[0]["num_replicas"])
    ranks = [int(s["rank"]) for s in states]
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"two states of the same rank (ranks {sorted(ranks)}): pass each "
                         f"rank's state once")
    if any(not 0 <= r < replicas for r in ranks):
        raise ValueError(f"a state of rank {max(ranks)} in a job of {replicas} ranks")
    if len(ranks) < replicas and len({int(s["yielded"]) for s in states}) > 1:
        raise ValueError(
            f"got the states of ranks {_ranges(ranks)} of {replicas}, at different positions: "
            f"pass every rank's state (or one rank's when the ranks run in lockstep, as DDP "
            f"does)")
