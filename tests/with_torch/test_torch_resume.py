"""Exact mid-epoch resume of recio.torch's readers, through torchdata's StatefulDataLoader.

Every test runs a real loader part of an epoch, saves ``loader.state_dict()``, resumes with the
same or another number of DataLoader workers / ranks (ranks simulated by giving each reader its
``num_replicas``/``rank`` or ``part_index``/``num_parts``) and checks that the records delivered
before and after the stop are every record exactly once (multiset equality).
"""
import collections
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import recio
from conftest import start_method_cases

try:
    import torch
    from torch.utils.data import DataLoader

    from recio.torch import RecordDataset, RecordIterableDataset, RecordSampler, resume_state
except ImportError:  # the marker below reports it (a failure under CI=true)
    torch = None

try:
    from torchdata.stateful_dataloader import StatefulDataLoader
except ImportError:
    StatefulDataLoader = None

pytestmark = [pytest.mark.needs("torch", "torchdata"),
              # torchdata 0.11 on torch >= 2.9: "set_vital is deprecated" (harmless)
              pytest.mark.filterwarnings("ignore:.*set_vital.*:UserWarning")]

N_A, N_B = 61, 42        # two files: the iterable reader crosses a file boundary
N = N_A + N_B
B = 4                    # batch size


def _write(rec, keys, rng):
    with recio.IndexedRecordWriter(str(rec), str(rec.with_suffix(".idx"))) as w:
        for i in keys:  # records of varied sizes: byte-balanced parts hold different counts
            w.write(i, recio.pack(recio.IRHeader(0, float(i), i, 0),
                                  bytes(int(rng.integers(0, 60)))))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("resume")
    rng = np.random.default_rng(0)
    _write(d / "a.rec", range(N_A), rng)
    _write(d / "b.rec", range(N_A, N), rng)
    return [str(d / "a.rec"), str(d / "b.rec")]


def _labels(batch):
    return [int(v) for v in batch[1].reshape(-1).tolist()]


def _take(loader, batches):
    """The labels of the first ``batches`` batches, and the loader's state after them."""
    out, it = [], iter(loader)
    for _ in range(batches):
        out += _labels(next(it))
    return out, loader.state_dict()


def _stopped(loader, stop, middle):
    """Stop at the "start", after ``middle`` batches, or at the "end" of an epoch: the labels
    delivered before the stop, and the loader's state then."""
    if stop == "end":
        before = _drain(loader)
        return before, loader.state_dict()
    return _take(loader, {"start": 0, "middle": middle}[stop])


def _drain(loader):
    return [x for b in loader for x in _labels(b)]


def _once(*runs, n=N):
    got = collections.Counter(x for run in runs for x in run)
    assert got == collections.Counter(range(n)), (
        f"missing {sorted(set(range(n)) - set(got))}, "
        f"twice {sorted(k for k, c in got.items() if c > 1)}")


def _iterable(files, **kw):
    return RecordIterableDataset(files, decode="raw", **kw)


def _loader(ds, workers, **kw):
    return StatefulDataLoader(ds, batch_size=B, num_workers=workers, **kw)


# -- RecordIterableDataset ------------------------------------------------------------------------

@pytest.mark.parametrize("shuffle_buffer", [0, 7])
@pytest.mark.parametrize("balance", ["bytes", "records"])
def test_iterable_two_to_three_workers(files, shuffle_buffer, balance):
    kw = dict(shuffle_buffer=shuffle_buffer, balance=balance, seed=3)
    before, saved = _take(_loader(_iterable(files, **kw), 2), 5)
    ds = _iterable(files, **kw)
    ds.load_state_dict(saved)  # the documented way to change shape: a new loader
    after = _drain(_loader(ds, 3))
    _once(before, after)


@pytest.mark.parametrize("shuffle_buffer", [0, 5])
def test_iterable_one_to_two_ranks(files, shuffle_buffer):
    before, saved = _take(_loader(_iterable(files, shuffle_buffer=shuffle_buffer), 2), 4)
    after = []
    for rank in range(2):  # every new rank loads the same saved state
        ds = _iterable(files, shuffle_buffer=shuffle_buffer, part_index=rank, num_parts=2)
        ds.load_state_dict(saved)
        after.append(_drain(_loader(ds, 2)))
    assert after[0] and after[1]  # both ranks got a share
    _once(before, *after)


@pytest.mark.slow
def test_iterable_two_ranks_to_one_and_three_to_two_workers(files):
    before, saved = [], []
    for rank, stop in ((0, 3), (1, 5)):  # ranks need not be in lockstep
        got, state = _take(_loader(_iterable(files, shuffle_buffer=4, part_index=rank,
                                             num_parts=2), 3), stop)
        before += got
        saved.append(state)
    ds = _iterable(files, shuffle_buffer=4)
    ds.load_state_dict(saved)  # every rank's state, as a list
    mid, saved2 = _take(_loader(ds, 2), 2)
    ds2 = _iterable(files, shuffle_buffer=4)
    ds2.load_state_dict(resume_state(saved2))  # the merged state is a plain, small dict
    _once(before, mid, _drain(_loader(ds2, 0)))


@pytest.mark.slow
def test_iterable_chain_of_resumes(files):
    """0 -> 3 workers -> 2 ranks x 2 workers -> 1 rank, 2 workers: each record once."""
    runs = []
    got, saved = _take(_loader(_iterable(files, shuffle_buffer=3), 0), 3)
    runs.append(got)
    ds = _iterable(files, shuffle_buffer=3)
    ds.load_state_dict(saved)
    got, saved = _take(_loader(ds, 3), 4)
    runs.append(got)
    states = []
    for rank, stop in ((0, 2), (1, 1)):
        ds = _iterable(files, shuffle_buffer=3, part_index=rank, num_parts=2)
        ds.load_state_dict(saved)
        got, state = _take(_loader(ds, 2), stop)
        runs.append(got)
        states.append(state)
    merged = resume_state(states)
    assert merged["delivered"] == sum(map(len, runs))
    assert len(pickle.dumps(merged)) < 2000  # small: no record list of the position
    ds = _iterable(files, shuffle_buffer=3)
    ds.load_state_dict(merged)
    runs.append(_drain(_loader(ds, 2)))
    _once(*runs)


@pytest.mark.parametrize("shuffle_buffer", [0, 6])
def test_iterable_same_shape_continues_the_uninterrupted_order(files, shuffle_buffer):
    full = _drain(_loader(_iterable(files, shuffle_buffer=shuffle_buffer), 2))
    before, saved = _take(_loader(_iterable(files, shuffle_buffer=shuffle_buffer), 2), 5)
    loader = _loader(_iterable(files, shuffle_buffer=shuffle_buffer), 2)
    loader.load_state_dict(saved)  # StatefulDataLoader's own path: each worker its state
    assert before + _drain(loader) == full


@pytest.mark.parametrize("stop", ["start", "middle", "end"])
def test_iterable_stop_at_start_middle_end(files, stop):
    loader = _loader(_iterable(files, shuffle_buffer=5), 2)
    before, saved = _stopped(loader, stop, middle=13)
    ds = _iterable(files, shuffle_buffer=5)
    ds.load_state_dict(saved)
    after = _drain(_loader(ds, 3))
    assert len(after) == N - len(before)
    _once(before, after)


def test_iterable_single_process_state_and_next_epoch(files):
    ds = _iterable(files, shuffle_buffer=4, seed=1)
    it = iter(ds)
    before = [int(next(it)[1]) for _ in range(30)]
    state = ds.state_dict()  # no DataLoader: the dataset's own position
    assert state["delivered"] == 30
    fresh = _iterable(files, shuffle_buffer=4, seed=1)
    fresh.load_state_dict(state)
    fresh.set_epoch(0)  # the saved epoch: kept
    _once(before, [int(lab) for _, lab in fresh])
    fresh.set_epoch(1)  # the next epoch starts afresh
    assert sorted(int(lab) for _, lab in fresh) == list(range(N))
    other = _iterable(files, shuffle_buffer=4, seed=1)
    other.load_state_dict(state)
    with pytest.warns(UserWarning, match="drops the loaded state of epoch 0"):
        other.set_epoch(1)  # another epoch than the state's: the state is dropped, loudly
    assert sorted(int(lab) for _, lab in other) == list(range(N))


@pytest.mark.parametrize("workers, persistent, start_method",
                         start_method_cases([(0, False), (2, False), (2, True)], [(2, True)]),
                         indirect=["start_method"])
def test_iterable_resumed_pass_is_used_once(files, workers, persistent, start_method):
    """The pass after the resumed one reads the whole epoch again (as without a state), with
    or without set_epoch: new workers started from the main process's dataset, which holds the
    loaded state, and persistent workers, which keep their dataset copy (spawned ones share
    the mark of the used state with the main process only through shared memory)."""
    before, saved = _take(_loader(_iterable(files, shuffle_buffer=3), 2), 4)
    ds = _iterable(files, shuffle_buffer=3)
    ds.load_state_dict(saved)
    loader = _loader(ds, workers, persistent_workers=persistent)
    _once(before, _drain(loader))
    _once(_drain(loader))
    _once([int(lab) for _, lab in ds])  # and in the main process


def test_iterable_errors_on_mismatched_state(files, tmp_path):
    _, saved = _take(_loader(_iterable(files), 2), 2)
    with pytest.raises(ValueError, match="other data: 2 file.*1 file"):
        _iterable(files[:1]).load_state_dict(saved)
    with pytest.raises(ValueError, match="seed 0 in the state, 7 here"):
        _iterable(files, seed=7).load_state_dict(saved)
    renamed = [str(tmp_path / "x.rec"), str(tmp_path / "y.rec")]
    for src, dst in zip(files, renamed):
        with open(src, "rb") as f, open(dst, "wb") as g:
            g.write(f.read())
    with pytest.raises(ValueError, match="other names"):
        _iterable(renamed).load_state_dict(saved)
    one_worker = saved["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]
    with pytest.raises(ValueError, match="readers 1 of 2 are missing"):
        resume_state(one_worker)
    with pytest.raises(ValueError, match="not of a RecordIterableDataset"):
        _iterable(files).load_state_dict(RecordSampler(N).state_dict())


@pytest.mark.slow
def test_iterable_misuse_of_a_reader_state_is_refused(files):
    """A reader's state in a reader of another shape raises instead of duplicating records."""
    _, saved = _take(_loader(_iterable(files), 2), 3)
    worker0 = saved["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]
    ds = _iterable(files)
    ds.load_state_dict(worker0)  # one reader's state given to every worker of a new loader
    with pytest.raises(ValueError, match="reader 0 of 2 but runs as reader 1 of 2"):
        _drain(_loader(ds, 2))
    loader = _loader(_iterable(files, part_index=1, num_parts=2), 2)
    loader.load_state_dict(saved)  # rank 1 of a new job given the old rank 0's loader state
    with pytest.raises(Exception, match="resume_state"):
        _drain(loader)
    loader = _loader(_iterable(files), 3)
    loader.load_state_dict(saved)  # StatefulDataLoader refuses another worker count itself
    with pytest.raises((AssertionError, ValueError)):
        _drain(loader)


def test_iterable_refuses_lagging_snapshots(files):
    loader = _loader(_iterable(files), 2, snapshot_every_n_steps=4)
    _, saved = _take(loader, 6)
    with pytest.raises(ValueError, match="snapshot_every_n_steps=1"):
        resume_state(saved)


# -- RecordSampler --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mapped(files):
    return RecordDataset(files, decode="raw")


def _sampled(ds, sampler, workers):
    return StatefulDataLoader(ds, sampler=sampler, batch_size=B, num_workers=workers)


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_sampler_two_to_three_workers(mapped, shuffle):
    before, saved = _take(_sampled(mapped, RecordSampler(mapped, shuffle=shuffle, seed=4), 2), 7)
    sampler = RecordSampler(mapped, shuffle=shuffle, seed=4)
    sampler.load_state_dict(saved)  # the loader state; a new loader with 3 workers
    _once(before, _drain(_sampled(mapped, sampler, 3)))


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_sampler_one_to_two_ranks(mapped, shuffle):
    before, saved = _take(_sampled(mapped, RecordSampler(mapped, shuffle=shuffle), 2), 5)
    after = []
    for rank in range(2):
        sampler = RecordSampler(mapped, num_replicas=2, rank=rank, shuffle=shuffle, pad=False)
        sampler.load_state_dict(saved)
        after.append(_drain(_sampled(mapped, sampler, 2)))
    _once(before, *after)
    # pad=True pads like DistributedSampler: equal counts, the padding repeats records
    padded = []
    for rank in range(2):
        sampler = RecordSampler(mapped, num_replicas=2, rank=rank, shuffle=shuffle, pad=True)
        sampler.load_state_dict(resume_state(saved))
        assert len(sampler) == -(-(N - len(before)) // 2)
        padded.append(list(sampler))
    assert len(padded[0]) == len(padded[1])
    got = collections.Counter(before + padded[0] + padded[1])
    assert set(got) == set(range(N)) and sum(got.values()) - N <= 1


def test_sampler_ranks_in_lockstep_need_one_state(mapped):
    """DDP: every rank is at the same step; one rank's state resumes any number of ranks."""
    before, saved = [], None
    loaders = [_sampled(mapped, RecordSampler(mapped, num_replicas=2, rank=r, seed=9), 0)
               for r in range(2)]
    for r, loader in enumerate(loaders):
        got, state = _take(loader, 6)
        before += got
        saved = saved or state  # rank 0's only
    after = []
    for rank in range(3):
        sampler = RecordSampler(mapped, num_replicas=3, rank=rank, seed=9, pad=False)
        sampler.load_state_dict(saved)
        after += list(sampler)
    _once(before, [mapped.keys[i] for i in after])


@pytest.mark.slow
def test_sampler_ranks_not_in_lockstep(mapped):
    before, states = [], []
    for rank, stop in ((0, 2), (1, 6), (2, 4)):
        got, state = _take(_sampled(mapped, RecordSampler(mapped, num_replicas=3, rank=rank,
                                                          pad=False), 2), stop)
        before += got
        states.append(state)
    with pytest.raises(ValueError, match="different positions"):
        RecordSampler(mapped).load_state_dict(states[:2])
    sampler = RecordSampler(mapped, pad=False)
    sampler.load_state_dict(states)
    merged = sampler.state_dict()
    assert len(merged["skip"]) <= 3 * 4 * B  # only the lead of the ranks ahead
    _once(before, _drain(_sampled(mapped, sampler, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_sampler_same_shape_continues_the_uninterrupted_order(mapped, shuffle):
    full = _drain(_sampled(mapped, RecordSampler(mapped, shuffle=shuffle, seed=2), 2))
    before, saved = _take(_sampled(mapped, RecordSampler(mapped, shuffle=shuffle, seed=2), 2), 6)
    loader = _sampled(mapped, RecordSampler(mapped, shuffle=shuffle, seed=2), 2)
    loader.load_state_dict(saved)
    assert before + _drain(loader) == full


@pytest.mark.parametrize("stop", ["start", "middle", "end"])
def test_sampler_stop_at_start_middle_end(mapped, stop):
    loader = _sampled(mapped, RecordSampler(mapped, seed=1), 2)
    before, saved = _stopped(loader, stop, middle=11)
    sampler = RecordSampler(mapped, seed=1)
    sampler.load_state_dict(saved)
    assert len(sampler) == N - len(before)
    _once(before, _drain(_sampled(mapped, sampler, 3)))


def test_sampler_epochs(mapped):
    sampler = RecordSampler(mapped, seed=1)
    e0 = list(sampler)
    assert list(sampler) == e0 and sorted(e0) == list(range(N))  # a pure function of the epoch
    sampler.set_epoch(1)
    e1 = list(sampler)
    assert e1 != e0 and sorted(e1) == list(range(N))
    it = iter(sampler)
    head = [next(it) for _ in range(10)]
    state = sampler.state_dict()
    assert state["epoch"] == 1 and state["yielded"] == 10
    again = RecordSampler(mapped, seed=1)
    again.load_state_dict(state)
    assert again.epoch == 1 and head + list(again) == e1
    assert list(again) == e1  # the resumed pass is used once; the next pass is the whole epoch
    again.load_state_dict(state)
    with pytest.warns(UserWarning, match="drops the loaded state of epoch 1"):
        again.set_epoch(2)  # another epoch: the loaded state is dropped, loudly
    assert len(again) == N and sorted(again) == list(range(N))


def test_sampler_distributed_shapes_like_distributed_sampler():
    for n, replicas, drop_last in ((10, 3, False), (10, 3, True), (9, 3, False)):
        ours = [list(RecordSampler(n, replicas, r, shuffle=False, drop_last=drop_last,
                                   pad=True))
                for r in range(replicas)]
        theirs = [list(torch.utils.data.DistributedSampler(range(n), replicas, r, shuffle=False,
                                                           drop_last=drop_last))
                  for r in range(replicas)]
        assert ours == theirs
    assert [len(RecordSampler(10, 3, r)) for r in range(3)] == [4, 3, 3]  # default: no padding


def test_sampler_errors_on_mismatched_state(mapped, files):
    _, saved = _take(_sampled(mapped, RecordSampler(mapped, seed=1), 0), 2)
    with pytest.raises(ValueError, match="num_records 103 in the state, 61 here"):
        RecordSampler(RecordDataset(files[0]), seed=1).load_state_dict(saved)
    with pytest.raises(ValueError, match="seed 1 in the state, 2 here"):
        RecordSampler(mapped, seed=2).load_state_dict(saved)
    with pytest.raises(ValueError, match="shuffle True in the state, False here"):
        RecordSampler(mapped, seed=1, shuffle=False).load_state_dict(saved)
    reordered = RecordDataset(files, decode="raw", keys=list(reversed(mapped.keys)))
    with pytest.raises(ValueError, match="source"):
        RecordSampler(reordered, seed=1).load_state_dict(saved)
    with pytest.raises(ValueError, match="not of a RecordSampler"):
        RecordSampler(mapped).load_state_dict(_iterable(files).state_dict())
    with pytest.raises(ValueError, match="no RecordSampler state"):
        RecordSampler(mapped).load_state_dict({"model": 1})
    future = dict(RecordSampler(mapped).state_dict(), version=99)
    with pytest.raises(ValueError, match="version 99"):
        RecordSampler(mapped).load_state_dict(future)


def test_sampler_with_a_plain_dataloader_and_no_workers(mapped):
    """Without torchdata: a plain DataLoader with num_workers=0 draws indices as it goes, so
    the sampler's own state is exact."""
    sampler = RecordSampler(mapped, seed=6)
    loader = DataLoader(mapped, sampler=sampler, batch_size=B)
    before, it = [], iter(loader)
    for _ in range(3):
        before += _labels(next(it))
    state = sampler.state_dict()
    resumed = RecordSampler(mapped, seed=6)
    resumed.load_state_dict(state)
    _once(before, _drain(DataLoader(mapped, sampler=resumed, batch_size=B, num_workers=2)))


# -- the state arithmetic, over random stops and shapes -------------------------------------------

def _run_sampler(n, replicas, stops, base, pad, drop_last=False):
    """Ranks of ``replicas`` each hand out ``stops[r]`` indices after loading ``base``."""
    out, states = [], []
    for r in range(replicas):
        s = RecordSampler(n, replicas, r, shuffle=True, seed=11, pad=pad, drop_last=drop_last)
        if base is not None:
            s.load_state_dict(base)
        it = iter(s)
        for _ in range(stops[r] if stops is not None else len(s)):
            v = next(it, None)
            if v is None:
                break
            out.append(v)
        states.append(s.state_dict())
    return out, states


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 40), st.lists(st.tuples(st.integers(1, 4), st.integers(0, 12),
                                              st.booleans()), min_size=1, max_size=3),
       st.integers(1, 4), st.data())
def test_sampler_arithmetic_property(n, segments, last_replicas, data):
    """Any chain of resumes (random rank counts, stops, lockstep or not) then a full pass:
    without padding every record exactly once."""
    delivered, base = [], None
    for replicas, most, lockstep in segments:
        stops = ([data.draw(st.integers(0, most))] * replicas if lockstep else
                 [data.draw(st.integers(0, most)) for _ in range(replicas)])
        got, states = _run_sampler(n, replicas, stops, base, pad=False)
        delivered += got
        base = states[:1] if lockstep else states
    got, _ = _run_sampler(n, last_replicas, None, base, pad=False)
    _once(delivered, got, n=n)
    merged = resume_state(base) if n else None
    assert merged is None or len(merged["skip"]) <= 4 * 12


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 4), st.integers(0, 10), st.integers(1, 4),
       st.booleans())
def test_sampler_padding_property(n, replicas, stop, new_replicas, drop_last):
    """With padding every record comes at least once (drop_last: at most replicas - 1 left out
    at each end of a pass) and every rank gets the same count."""
    got, states = _run_sampler(n, replicas, [stop] * replicas, None, pad=True,
                               drop_last=drop_last)
    rest, _ = _run_sampler(n, new_replicas, None, states[:1], pad=True, drop_last=drop_last)
    seen = collections.Counter(got + rest)
    counts = [len(RecordSampler(n, new_replicas, r, drop_last=drop_last, pad=True)) for r in
              range(new_replicas)]
    assert len(set(counts)) == 1
    if drop_last:
        assert max(seen.values(), default=1) == 1
        assert n - len(seen) <= (replicas - 1) + (new_replicas - 1)
    else:
        assert set(seen) == set(range(n))


def test_one_ranks_end_of_epoch_state_loaded_on_every_rank():
    """Issue 40's case: RecordSampler(25, num_replicas=4, pad=False) gives shares 7, 6, 6, 6;
    any rank's end-of-epoch state, loaded on every rank, leaves nothing (it used to give a
    negative ``len()`` on the ranks with a shorter share than the saving rank's)."""
    for saver in range(4):
        done = RecordSampler(25, 4, saver, pad=False)
        list(done)
        for rank in range(4):
            again = RecordSampler(25, 4, rank, pad=False)
            again.load_state_dict(done.state_dict())
            assert len(again) == 0 and list(again) == []


def _lockstep(n, replicas, k, **kw):
    """Ranks that ran ``k`` steps in lockstep: their indices, states and shares."""
    got, states, shares = [], [], []
    for r in range(replicas):
        s = RecordSampler(n, replicas, r, **kw)
        shares.append(len(s))
        it = iter(s)
        got += [v for v in (next(it, None) for _ in range(k)) if v is not None]
        states.append(s.state_dict())
    return got, states, shares


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(n=st.integers(0, 60), replicas=st.integers(1, 6), new=st.integers(1, 6),
       pad=st.booleans(), drop_last=st.booleans(), shuffle=st.booleans(), data=st.data())
def test_any_produced_state_loads_without_a_negative_length(n, replicas, new, pad, drop_last,
                                                           shuffle, data):
    """Whatever state a sampler produced (any size, ranks, pad, drop_last, shuffle, position;
    lockstep or not), loaded as one rank's state, every rank's, or their merge into any number
    of ranks: ``len()`` is never negative and is what iterating hands out, and a state taken
    after the load loads again. Without padding or dropping, every record comes exactly once
    where the states say unambiguously what was handed out (every rank's; one rank's while it
    is part-way through its share; or a pass that was over), and never twice otherwise."""
    kw = dict(pad=pad, drop_last=drop_last, shuffle=shuffle, seed=3)
    lockstep = data.draw(st.booleans(), "lockstep")
    if lockstep:
        k = data.draw(st.integers(0, n // replicas + 2), "steps")
        before, states, shares = _lockstep(n, replicas, k, **kw)
        ranks_k = [min(k, share) for share in shares]
    else:
        before, states, shares, ranks_k = [], [], [], []
        for r in range(replicas):
            s = RecordSampler(n, replicas, r, **kw)
            shares.append(len(s))
            stop = data.draw(st.integers(0, len(s)), f"stop of rank {r}")
            it = iter(s)
            before += [next(it) for _ in range(stop)]
            ranks_k.append(stop)
            states.append(s.state_dict())
    how = data.draw(st.sampled_from(["one", "all", "merged"] if lockstep else ["all", "merged"]),
                    "load")
    one = data.draw(st.integers(0, replicas - 1), "which rank's state")
    given_state = {"one": states[one], "all": states,
                   "merged": resume_state(states) if n else states}[how]
    after = []
    for rank in range(new):
        s = RecordSampler(n, new, rank, **kw)
        s.load_state_dict(given_state)
        length = len(s)
        assert length >= 0
        mine = list(s)
        assert len(mine) == length
        again = RecordSampler(n, new, rank, **kw)
        again.load_state_dict(s.state_dict())  # a state taken after a load loads too
        assert len(again) >= 0
        after += mine
    counts = collections.Counter(before + after)
    if pad:
        return  # padding repeats records by design (test_sampler_padding_property)
    assert max(counts.values(), default=1) == 1, "a record came twice"
    if drop_last:
        return
    clear = how != "one" or ranks_k[one] < shares[one] or ranks_k == shares
    if clear:
        assert sorted(counts) == list(range(n))


def test_a_stream_readers_state_is_its_own(stream_files):
    """A RecordIterableDataset reader's state is its own remaining work: another rank given it
    refuses with ValueError when it starts (it cannot know what the others read), its own
    rank continues, and every rank's states together resume every record once."""
    before, states = _run_stream(stream_files, 3, [4, 2, 5], None)
    for saved in range(3):
        for rank in range(3):
            ds = RecordIterableDataset(stream_files, decode="raw", part_index=rank, num_parts=3)
            ds.load_state_dict(states[saved])
            if rank != saved:
                with pytest.raises(ValueError, match=f"state of reader {saved} of 3"):
                    next(iter(ds))
            else:
                assert len(list(ds)) >= 0
    rest, _ = _run_stream(stream_files, 3, None, states)
    _once(before, rest, n=40)


@pytest.fixture(scope="module")
def stream_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("prop")
    rng = np.random.default_rng(5)
    _write(d / "p.rec", range(0, 25), rng)
    _write(d / "q.rec", range(25, 40), rng)
    return [str(d / "p.rec"), str(d / "q.rec")]


def _run_stream(files, slots, stops, saved, **kw):
    """Readers 0..slots-1 (as ranks: part_index/num_parts) read ``stops[q]`` records each."""
    out, states = [], []
    for q in range(slots):
        ds = RecordIterableDataset(files, decode="raw", part_index=q, num_parts=slots, **kw)
        if saved is not None:
            ds.load_state_dict(saved)
        it = iter(ds)
        for _ in range(stops[q] if stops is not None else 10 ** 9):
            item = next(it, None)
            if item is None:
                break
            out.append(int(item[1]))
        states.append(ds.state_dict())
    return out, states


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 4), st.lists(st.integers(0, 15), min_size=4,
                                                      max_size=4)), min_size=1, max_size=3),
       st.integers(1, 4), st.sampled_from([0, 1, 4]), st.sampled_from(["bytes", "records"]))
def test_stream_arithmetic_property(stream_files, segments, last_slots, shuffle_buffer,
                                    balance):
    """Random chains of reader counts and stop points, with and without a shuffle buffer:
    every record exactly once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        delivered, saved = [], None
        for slots, stops in segments:
            got, saved = _run_stream(stream_files, slots, stops[:slots], saved,
                                     shuffle_buffer=shuffle_buffer, balance=balance)
            delivered += got
        got, _ = _run_stream(stream_files, last_slots, None, saved,
                             shuffle_buffer=shuffle_buffer, balance=balance)
    _once(delivered, got, n=40)


def test_sampler_one_finished_rank_state_stands_for_all(mapped):
    """Lockstep ranks whose shares differ by one: the shorter rank's state at the end of the
    epoch means every rank finished (no record handed out again)."""
    n = len(mapped)
    states = []
    for rank in range(2):
        sampler = RecordSampler(mapped, num_replicas=2, rank=rank, shuffle=False)
        list(sampler)
        states.append(sampler.state_dict())
    shorter = min(states, key=lambda s: s["yielded"])
    assert n % 2 == 1 and shorter["rank"] == 1
    resumed = RecordSampler(mapped, num_replicas=3, rank=0, shuffle=False)
    resumed.load_state_dict(shorter)
    assert list(resumed) == []


def test_iterable_refuses_a_partial_set_of_readers(files):
    """Two readers of a 2-rank x 2-worker save are not a resumable set: refused at load time."""
    states = []
    for part in range(4):
        ds = _iterable(files, shuffle_buffer=0)
        ds.part_index, ds.num_parts = part, 4
        states.append(ds.state_dict())
    with pytest.raises(ValueError, match=r"readers \[2, 3\] are missing"):
        _iterable(files, shuffle_buffer=0).load_state_dict(states[:2])


@pytest.mark.slow
def test_iterable_balanced_ranks_after_one_rank_of_two_workers_becomes_two_ranks(files):
    """1 rank x 2 workers -> 2 ranks x 1 worker is two readers before and after, but not the
    same readers: with balance="records" the new ranks get equal shares (DDP needs them), not
    one old worker's leftover each."""
    kw = dict(balance="records", seed=5)
    before, saved = _take(_loader(_iterable(files, **kw), 2), 3)  # worker 0 is a batch ahead
    after = []
    for rank in range(2):
        ds = _iterable(files, part_index=rank, num_parts=2, **kw)
        ds.load_state_dict(saved)
        after.append(_drain(_loader(ds, 1)))
    _once(before, *after)
    assert abs(len(after[0]) - len(after[1])) <= 1, [len(a) for a in after]
    # (the same shape still continues exactly: test_iterable_same_shape_continues_...)


@pytest.mark.parametrize("workers", [0, 2])
def test_no_warning_when_a_used_or_finished_state_meets_the_next_epoch(files, mapped, workers):
    # a resumed pass that ran to its end, then the next epoch
    ds = _iterable(files, shuffle_buffer=3)
    _, saved = _take(_loader(_iterable(files, shuffle_buffer=3), workers), 2)
    ds.load_state_dict(saved)
    loader = _loader(ds, workers)
    first = _drain(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.set_epoch(1)
    assert sorted(_drain(loader)) == list(range(N)) and first
    # a checkpoint taken at the very end of an epoch, resumed into the next epoch
    for make in (lambda: _iterable(files),
                 lambda: RecordSampler(mapped, seed=2)):
        reader = make()
        src = _loader(reader, 0) if isinstance(reader, RecordIterableDataset) else \
            _sampled(mapped, reader, 0)
        _drain(src)
        end_state = src.state_dict()
        fresh = make()
        fresh.load_state_dict(end_state)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fresh.set_epoch(1)
        assert len(list(fresh)) == N
    # a state with records left still warns when another epoch drops it
    _, mid = _take(_sampled(mapped, RecordSampler(mapped, seed=2), 0), 2)
    sampler = RecordSampler(mapped, seed=2)
    sampler.load_state_dict(mid)
    with pytest.warns(UserWarning, match="drops the loaded state of epoch 0"):
        sampler.set_epoch(1)


@pytest.mark.parametrize("field, value, message", [
    ("cursor", -5, "cursor = -5 is outside 0..103"),
    ("cursor", 10 ** 9, "cursor = 1,000,000,000 is outside"),
    ("yielded", -3, "yielded = -3 is outside"),
    ("skip", [5, 5, 2], "skip must hold increasing positions"),
    ("skip", None, "skip is None, not a list"),
    ("cursor", None, "cursor is None, not an integer"),
    ("rank", 4, "rank = 4 is outside 0..0"),
])
def test_sampler_refuses_a_damaged_state(mapped, field, value, message):
    _, saved = _take(_sampled(mapped, RecordSampler(mapped, seed=1), 0), 2)
    state = dict(resume_state(saved))
    state[field] = value
    with pytest.raises(ValueError, match="not a valid RecordSampler state: " + message):
        RecordSampler(mapped, seed=1).load_state_dict(state)


@pytest.mark.parametrize("field, value, message", [
    ("intervals", [[10, 5]], "intervals must be a list of"),
    ("intervals", None, "intervals must be a list of"),
    ("queued", [10 ** 9, -1], "queued holds -1"),
    ("buffer", "x", "buffer is 'x', not a list"),
    ("yielded", -1, "yielded = -1 is outside"),
    ("slot", 3, "slot = 3 is outside 0..0"),
])
def test_iterable_refuses_a_damaged_state(files, field, value, message):
    _, saved = _take(_loader(_iterable(files), 0), 2)
    state = dict(resume_state(saved))
    state[field] = value
    with pytest.raises(ValueError, match="not a valid RecordIterableDataset state: " + message):
        _iterable(files).load_state_dict(state)
    missing = dict(resume_state(saved))
    del missing["yielded"]
    with pytest.raises(ValueError, match="yielded is None, not an integer"):
        _iterable(files).load_state_dict(missing)
