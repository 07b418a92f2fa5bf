"""MinibatchSource: sample-counted minibatches, nominal-time shuffling, exact restore, workers."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import recio
from conftest import need
from recio.sequence.corpora import MemoryCorpus, RecordCorpus
from recio.sequence.minibatch import SWEEP_FOREVER, SWEEP_ONCE, MinibatchSource
from recio.sequence import SequenceWriter, write_sequences


# ----------------------------------------------------------------------------------- helpers

ROOT = []


@pytest.fixture(scope="module", autouse=True)
def _scratch(tmp_path_factory):
    """Hypothesis examples write their corpora under one pytest-managed folder."""
    ROOT.append(str(tmp_path_factory.mktemp("corpora")))
    yield
    ROOT.pop()


def scratch():
    """A fresh folder for one hypothesis example's files."""
    return tempfile.mkdtemp(dir=ROOT[-1])


def make_sequences(lengths, lengths2=None, dim=2):
    """Sequence i: stream x = lengths[i] rows filled with i; optional stream y likewise."""
    out = []
    for i, n in enumerate(lengths):
        seq = {"x": np.full((int(n), dim), i, dtype=np.float32)}
        if lengths2 is not None:
            seq["y"] = np.full(int(lengths2[i]), i, dtype=np.int64)
        out.append(seq)
    return out


def source(seqs, backend, folder=None, chunk=4, **kw):
    if backend == "memory":
        return MinibatchSource(MemoryCorpus(seqs, chunk_sequences=chunk), **kw)
    path = os.path.join(folder, "corpus.rec")
    if not os.path.exists(path):
        write_sequences(path, seqs)
    kw.setdefault("chunk_samples", chunk * 3)
    return MinibatchSource(path, **kw)


def drain(src, size, limit=10_000):
    out = []
    for _ in range(limit):
        mb = src.next_minibatch(size)
        if mb is None:
            return out
        out.append(mb)
    raise AssertionError("source did not finish")


def ids(mbs):
    return [mb.ids.tolist() for mb in mbs]


corpora = st.fixed_dictionaries({
    "lengths": st.lists(st.integers(1, 50), min_size=1, max_size=40),
    "two": st.booleans(),
    "backend": st.sampled_from(["memory", "file"]),
    "chunk": st.integers(1, 6),
    "seed": st.integers(0, 2**32 - 1),
    "window": st.one_of(st.none(), st.integers(1, 400)),
    "size": st.integers(1, 120),
})


def build(case, **kw):
    """(sequences, factory of sources over them) for a drawn corpus case."""
    lengths = case["lengths"]
    lengths2 = None
    if case["two"]:
        rng = np.random.default_rng(case["seed"] % 1000)
        lengths2 = rng.integers(1, 51, len(lengths))
    seqs = make_sequences(lengths, lengths2)
    folder = scratch() if case["backend"] == "file" else None
    kw.setdefault("randomization_window", case["window"])
    kw.setdefault("seed", case["seed"])
    return seqs, (lambda **more: source(seqs, case["backend"], folder, case["chunk"],
                                        **{**kw, **more}))


def seq_size(seq):
    """A sequence's size in samples: its largest stream (no defines_mb_size)."""
    return max(len(v) for v in seq.values())


# ----------------------------------------------------------------------------------- properties

@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(corpora)
def test_every_sequence_once_per_sweep_and_sizes_respected(case):
    seqs, make = build(case)
    src = make(epoch_size=SWEEP_FOREVER, max_sweeps=2)
    mbs = drain(src, case["size"])
    order = [i for mb in mbs for i in mb.ids.tolist()]
    n = len(seqs)
    assert sorted(order[:n]) == list(range(n)) and sorted(order[n:]) == list(range(n))
    emitted = 0
    for mb in mbs:
        # content matches the ids, every stream
        for name in mb.streams:
            for i, data in zip(mb.ids, mb[name]):
                assert np.all(np.asarray(data) == i)
        total = sum(seq_size(seqs[i]) for i in mb.ids)
        assert total == mb.num_samples == mb.global_num_samples
        assert total <= case["size"] or mb.num_sequences == 1
        before, emitted = emitted, emitted + mb.num_sequences
        crosses = any(k * n in range(before + 1, emitted + 1) for k in (1, 2))
        assert mb.sweep_end == crosses
        # packing is greedy: the next sequence would not have fitted
        if emitted < len(order):
            assert total + seq_size(seqs[order[emitted]]) > case["size"]
    assert sum(mb.num_samples for mb in mbs) == 2 * sum(seq_size(s) for s in seqs)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.integers(1, 60), st.integers(1, 16), st.integers(0, 999), st.one_of(st.none(),
       st.integers(1, 40)), st.sampled_from(["memory", "file"]))
def test_single_sample_size_k_equals_k_size_one_and_doubling_merges(n, k, seed, window, backend):
    seqs = make_sequences([1] * n)
    folder = scratch()
    kw = dict(seed=seed, randomization_window=window, epoch_size=SWEEP_FOREVER)
    steps = (3 * n) // k + 2  # runs across several sweep boundaries
    src_1 = source(seqs, backend, folder, **kw)
    ones = [i for _ in range(steps * k) for i in src_1.next_minibatch(1).ids.tolist()]
    src_k = source(seqs, backend, folder, **kw)
    by_k = [src_k.next_minibatch(k).ids.tolist() for _ in range(steps)]
    assert by_k == [ones[j * k:(j + 1) * k] for j in range(steps)]
    src_2k = source(seqs, backend, folder, **kw)
    by_2k = [src_2k.next_minibatch(2 * k).ids.tolist() for _ in range(steps // 2)]
    assert by_2k == [by_k[2 * j] + by_k[2 * j + 1] for j in range(steps // 2)]


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(corpora, st.integers(0, 60))
def test_restore_continues_identically(case, stop):
    seqs, make = build(case)
    src = make(epoch_size=SWEEP_FOREVER)
    for _ in range(stop):
        src.next_minibatch(case["size"])
    state = json.loads(json.dumps(src.get_checkpoint_state()))
    expected = ids(src.next_minibatch(case["size"]) for _ in range(20))
    fresh = make(epoch_size=SWEEP_FOREVER)
    fresh.restore_from_checkpoint(state)
    assert ids(fresh.next_minibatch(case["size"]) for _ in range(20)) == expected


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(corpora, st.integers(1, 5), st.integers(1, 5), st.integers(0, 30))
def test_worker_shares_disjoint_complete_and_k_can_change(case, k1, k2, stop):
    seqs, make = build(case)
    reference = make(epoch_size=SWEEP_FOREVER)
    workers = [make(epoch_size=SWEEP_FOREVER, worker_rank=r, num_workers=k1)
               for r in range(k1)]
    size = case["size"]

    timeline = []  # the single-worker order, pulled as far as the workers have read

    def check_step(group):
        shares = [w.next_minibatch(size) for w in group]
        got = [i for s in shares for i in s.ids.tolist()]
        while len(timeline) < len(got):
            timeline.extend(reference.next_minibatch(size).ids.tolist())
        assert got == timeline[:len(got)]  # disjoint, complete, and in order
        del timeline[:len(got)]
        total = shares[0].global_num_samples
        assert sum(s.num_samples for s in shares) == total
        assert all(s.global_num_samples == total for s in shares)
        assert shares[0].global_num_sequences == len(got)
        if len(got) >= len(group):  # no worker idles while another has data
            assert all(s.num_sequences for s in shares)
        if len(got) > len(group):  # the budget holds unless it was raised to one per worker
            assert total <= size or len(got) == 1 or max(
                seq_size(seqs[i]) for i in got) > size
        for s in shares:  # each share is about size / K (contiguous by sample midpoints)
            assert s.num_samples <= total / len(group) + max(
                (seq_size(seqs[i]) for i in s.ids), default=0) or len(got) >= len(group)

    for _ in range(stop):
        check_step(workers)
    states = [w.get_checkpoint_state() for w in workers]
    assert all(s == states[0] for s in states)  # the checkpoint is global
    resumed = [make(epoch_size=SWEEP_FOREVER, worker_rank=r, num_workers=k2)
               for r in range(k2)]
    for w in resumed:
        w.restore_from_checkpoint(json.loads(json.dumps(states[0])))
    for _ in range(10):
        check_step(resumed)


RESTORE_SCRIPT = textwrap.dedent("""
    import json, sys
    from recio import MinibatchSource
    cases = json.load(open(sys.argv[1]))
    out = []
    for case in cases:
        src = MinibatchSource(case["path"], **case["kw"])
        src.restore_from_checkpoint(case["state"])
        out.append([src.next_minibatch(case["size"]).ids.tolist() for _ in range(20)])
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_restore_in_a_new_process(tmp_path):
    rng = np.random.default_rng(6)
    cases, expected = [], []
    for c in range(8):
        lengths = rng.integers(1, 51, int(rng.integers(1, 80)) if c else 5000)
        two = bool(c % 2)
        seqs = make_sequences(lengths, rng.integers(1, 51, len(lengths)) if two else None)
        path = str(tmp_path / f"c{c}.rec")
        write_sequences(path, seqs)
        kw = dict(seed=int(rng.integers(2**31)), epoch_size=SWEEP_FOREVER,
                  randomization_window=None if c % 3 == 1 else int(rng.integers(1, 500)),
                  num_workers=1 + c % 3, worker_rank=c % (1 + c % 3))
        size = int(rng.integers(1, 150))
        src = MinibatchSource(path, **kw)
        for _ in range(int(rng.integers(0, 100))):
            src.next_minibatch(size)
        cases.append({"path": path, "kw": kw, "size": size, "state": src.get_checkpoint_state()})
        expected.append([src.next_minibatch(size).ids.tolist() for _ in range(20)])
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, "-c", RESTORE_SCRIPT, str(spec)], capture_output=True,
                          text=True, check=True)
    assert json.loads(done.stdout) == expected


def test_lazily_sorted_sweep_plan_matches_a_full_sort():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 51, 9000)
    src = MinibatchSource(MemoryCorpus(make_sequences(lengths, dim=1), 7), seed=8,
                          randomization_window=700, epoch_size=SWEEP_FOREVER)
    for sweep in (0, 1, 977):
        plan = src._make_plan(sweep)
        assert len(plan.seg_first) > 2  # really segmented
        order = np.argsort(plan.keys, kind="stable")
        assert plan.ids(0, plan.n).tolist() == order.tolist() == src.sweep_order(sweep).tolist()
        cum = np.concatenate([[0], np.cumsum(lengths[order])])
        for pos in rng.integers(0, 9001, 30).tolist():
            assert plan.samples_before(pos) == cum[pos]
            budget = int(rng.integers(1, 3000))
            end, used = plan.take(pos, budget)
            expected = int(np.searchsorted(cum, cum[pos] + budget, side="right")) - 1
            assert (end, used) == (expected, cum[expected] - cum[pos])
            b = min(9000, pos + int(rng.integers(0, 5000)))
            assert plan.ids(pos, b).tolist() == order[pos:b].tolist()


@pytest.mark.slow
def test_big_corpus_every_sequence_once_and_restore():
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 51, 9000)
    seqs = make_sequences(lengths, dim=1)

    def make(**kw):
        return MinibatchSource(MemoryCorpus(seqs, 11), seed=2, randomization_window=2000,
                               epoch_size=SWEEP_FOREVER, **kw)

    src = make()
    assert len(src._make_plan(0).seg_first) > 3  # the order is built segment by segment
    order = []
    while len(order) < 2 * len(seqs):
        order += src.next_minibatch(300).ids.tolist()
    n = len(seqs)
    assert sorted(order[:n]) == list(range(n)) and sorted(order[n:2 * n]) == list(range(n))
    state = src.get_checkpoint_state()
    expected = ids(src.next_minibatch(300) for _ in range(20))
    resumed = make()
    resumed.restore_from_checkpoint(state)
    assert ids(resumed.next_minibatch(300) for _ in range(20)) == expected
    shares = [make(worker_rank=r, num_workers=3) for r in range(3)]
    for w in shares:
        w.restore_from_checkpoint(state)
    for glob in expected[:5]:
        assert [i for w in shares for i in w.next_minibatch(300).ids.tolist()] == glob


# ----------------------------------------------------------------------------------- restore cost

class CountingCorpus(MemoryCorpus):
    """Counts chunk reads."""

    reads = 0

    def read_chunk(self, i):
        CountingCorpus.reads += 1
        return super().read_chunk(i)


def test_restore_cost_does_not_depend_on_position(monkeypatch):
    seqs = make_sequences([1] * 10)
    run = MinibatchSource(MemoryCorpus(seqs, 2), seed=5, epoch_size=SWEEP_FOREVER)
    for _ in range(1000):  # 1000 sweeps of one minibatch each
        run.next_minibatch(10)
    state = run.get_checkpoint_state()
    assert state["sweep"] == 1000 and state["offset"] == 0
    expected = ids(run.next_minibatch(3) for _ in range(7))

    orders = []
    real = MinibatchSource._make_plan
    monkeypatch.setattr(MinibatchSource, "_make_plan",
                        lambda self, j: orders.append(j) or real(self, j))
    work = {}
    for sweep in (1, 1000):
        src = MinibatchSource(CountingCorpus(seqs, 2), seed=5, epoch_size=SWEEP_FOREVER)
        orders.clear()
        CountingCorpus.reads = 0
        src.restore_from_checkpoint({**state, "sweep": sweep,
                                     "sample_position": sweep * src.num_samples})
        work[sweep] = (list(orders), CountingCorpus.reads)
        if sweep == 1000:
            assert ids(src.next_minibatch(3) for _ in range(7)) == expected
    # one sweep order computed (that sweep's), no data read: the same work at sweep 1 and 1000
    assert work == {1: ([1], 0), 1000: ([1000], 0)}


# ----------------------------------------------------------------------------------- memory

@pytest.mark.slow
def test_window_bounds_resident_memory(tmp_path):
    rng = np.random.default_rng(2)
    dim = 16
    lengths = rng.integers(1, 51, 3000)
    path = tmp_path / "big.rec"
    with SequenceWriter(path) as w:
        for n in lengths:
            w.write({"x": rng.standard_normal((int(n), dim)).astype(np.float32)})
    total = int(lengths.sum())
    window = 1000  # samples, ~1.3% of the corpus
    bytes_per_sample = dim * 4
    src = MinibatchSource(str(path), randomization_window=window, seed=1)
    max_chunk = int(src.chunk_samples.max())
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        seen = 0
        while True:
            mb = src.next_minibatch(64)
            if mb is None:
                break
            seen += mb.num_samples
            assert src.resident_samples <= window + max_chunk
            del mb
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert seen == total
    corpus_bytes = total * bytes_per_sample
    # generous: decoded data + Python objects of one window, far below the whole corpus
    assert peak < 10 * window * bytes_per_sample + 64 * 3000 + 256 * 1024
    assert peak < corpus_bytes / 4


class GeneratedCorpus:
    """Chunks decoded in full when read (like CBF): fresh arrays each time, nothing cached."""

    stream_names = ["x"]

    def __init__(self, lengths, per_chunk, dim):
        self.lengths, self.per_chunk, self.dim = lengths, per_chunk, dim
        self.num_chunks = -(-len(lengths) // per_chunk)

    def chunk_sample_counts(self, i):
        return self.lengths[i * self.per_chunk:(i + 1) * self.per_chunk]

    def read_chunk(self, i):
        return [{"x": np.full((int(n), self.dim), i, dtype=np.float32)}
                for n in self.chunk_sample_counts(i)]


@pytest.mark.slow
def test_window_bounds_decoded_memory_of_whole_chunk_corpora():
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 51, 8000)  # ~200k samples of 64 bytes: ~13 MB decoded
    dim, window = 16, 2000
    src = MinibatchSource(GeneratedCorpus(lengths, 4, dim), randomization_window=window, seed=2)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        seen = 0
        while True:
            mb = src.next_minibatch(256)
            if mb is None:
                break
            seen += mb.num_samples
            del mb
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert seen == int(lengths.sum())
    decoded_window = window * dim * 4
    # generous: a few windows of decoded arrays + Python objects + the sweep plan's arrays
    assert peak < 6 * decoded_window + 100 * len(lengths) + 512 * 1024
    assert peak < int(lengths.sum()) * dim * 4 / 8  # far below holding the corpus


# ----------------------------------------------------------------------------------- semantics

def test_sweep_once_stops_after_one_pass():
    seqs = make_sequences([3, 5, 2, 7])
    src = MinibatchSource(MemoryCorpus(seqs, 2), seed=1)  # SWEEP_ONCE is the default
    mbs = drain(src, 6)
    assert sorted(i for mb in mbs for i in mb.ids) == [0, 1, 2, 3]
    assert mbs[-1].sweep_end and mbs[-1].end_of_epoch
    assert not any(mb.sweep_end or mb.end_of_epoch for mb in mbs[:-1])
    assert src.next_minibatch(6) is None


def test_max_sweeps_and_sweep_forever():
    seqs = make_sequences([1] * 5)
    src = MinibatchSource(MemoryCorpus(seqs), epoch_size=SWEEP_ONCE, max_sweeps=3)
    assert sum(mb.num_samples for mb in drain(src, 2)) == 15
    src = MinibatchSource(MemoryCorpus(seqs), epoch_size=SWEEP_FOREVER)
    mbs = [src.next_minibatch(2) for _ in range(50)]
    assert all(mb is not None for mb in mbs)
    ends = [i for i, mb in enumerate(mbs) if mb.end_of_epoch]
    assert ends == [i for i, mb in enumerate(mbs) if mb.sweep_end] == [2, 4, 7, 9, 12, 14, 17,
                                                                        19, 22, 24, 27, 29, 32,
                                                                        34, 37, 39, 42, 44, 47,
                                                                        49]


def test_epoch_size_in_samples_marks_epoch_ends():
    src = MinibatchSource(MemoryCorpus(make_sequences([1] * 10)), epoch_size=4)
    flags = [src.next_minibatch(1).end_of_epoch for _ in range(12)]
    assert [i for i, f in enumerate(flags) if f] == [3, 7, 11]
    assert src.next_minibatch(1) is not None  # an epoch size in samples never stops by itself


def test_sweeps_are_shuffled_differently_and_reproducibly():
    seqs = make_sequences([1] * 50)

    def sweeps(seed, n=3):
        src = MinibatchSource(MemoryCorpus(seqs, 5), seed=seed, epoch_size=SWEEP_FOREVER)
        return [src.next_minibatch(50).ids.tolist() for _ in range(n)]

    a = sweeps(0)
    assert a == sweeps(0)
    assert a[0] != a[1] != a[2] and a != sweeps(1)
    assert all(sorted(s) == list(range(50)) for s in a)


def test_randomize_false_reads_in_corpus_order():
    seqs = make_sequences([2, 3, 4, 1, 6])
    src = MinibatchSource(MemoryCorpus(seqs, 2), randomize=False, max_sweeps=2,
                          epoch_size=SWEEP_FOREVER)
    assert [i for mb in drain(src, 7) for i in mb.ids.tolist()] == [0, 1, 2, 3, 4] * 2


def test_window_limits_how_far_a_sequence_moves():
    seqs = make_sequences([1] * 400)
    src = MinibatchSource(MemoryCorpus(seqs, 5), randomization_window=20, seed=3)
    order = src.sweep_order(0)
    chunk_pos = {}
    for rank, i in enumerate(order):
        chunk_pos.setdefault(i // 5, []).append(rank)
    # sequences of one chunk land within window + chunk of each other
    assert max(max(r) - min(r) for r in chunk_pos.values()) < 20 + 5
    assert order.tolist() != list(range(400))


def test_over_long_sequence_forms_its_own_minibatch():
    seqs = make_sequences([3, 100, 2])
    src = MinibatchSource(MemoryCorpus(seqs), randomize=False)
    assert ids(drain(src, 10)) == [[0], [1], [2]]


def test_defines_mb_size_and_stream_selection():
    seqs = make_sequences([10, 20, 30, 40], lengths2=[1, 1, 1, 1])
    src = MinibatchSource(MemoryCorpus(seqs), randomize=False, defines_mb_size="y")
    mbs = drain(src, 2)
    assert ids(mbs) == [[0, 1], [2, 3]]
    assert mbs[0].num_samples == 2 and mbs[0].samples_per_stream == {"x": 30, "y": 2}
    src = MinibatchSource(MemoryCorpus(seqs), randomize=False, streams={"feat": "x"})
    mb = src.next_minibatch(35)
    assert list(mb.streams) == ["feat"] and mb.ids.tolist() == [0, 1]
    data, mask = mb.padded("feat")
    assert data.shape == (2, 20, 2) and mask.sum(axis=1).tolist() == [10, 20]
    with pytest.raises(ValueError, match="not in the input"):
        MinibatchSource(MemoryCorpus(seqs), streams=["nope"])
    with pytest.raises(ValueError, match="defines_mb_size"):
        MinibatchSource(MemoryCorpus(seqs), defines_mb_size="nope")


def test_more_workers_than_sequences_get_empty_shares():
    seqs = make_sequences([1, 1])
    shares = [MinibatchSource(MemoryCorpus(seqs), worker_rank=r, num_workers=4,
                              randomize=False).next_minibatch(2) for r in range(4)]
    assert [s.ids.tolist() for s in shares] == [[], [0], [], [1]]
    assert all(s is not None for s in shares)


def test_checkpoint_is_small_json_and_checked():
    seqs = make_sequences([1, 2, 3])
    src = MinibatchSource(MemoryCorpus(seqs), seed=4, epoch_size=SWEEP_FOREVER)
    src.next_minibatch(2)
    state = src.get_checkpoint_state()
    assert len(json.dumps(state)) < 400
    other = MinibatchSource(MemoryCorpus(seqs), seed=5)
    with pytest.raises(ValueError, match="different corpus or setting"):
        other.restore_from_checkpoint(state)
    with pytest.raises(ValueError, match="checkpoint"):
        src.restore_from_checkpoint({"sweep": 0})
    with pytest.raises(ValueError, match="out of range"):
        src.restore_from_checkpoint({**state, "offset": 99})


@pytest.mark.parametrize("kw", [dict(num_workers=0), dict(worker_rank=2, num_workers=2),
                                dict(randomization_window=0), dict(epoch_size=0),
                                dict(max_sweeps=0), dict(seed=-1)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        MinibatchSource(MemoryCorpus(make_sequences([1])), **kw)


def test_corpus_with_empty_chunks():
    class Gappy(MemoryCorpus):
        """Chunks 0 and 3 hold nothing (a CBF file may have such chunks)."""

        def __init__(self, seqs):
            super().__init__(seqs, 2)
            self.num_chunks += 2

        def chunk_sample_counts(self, i):
            if i in (0, self.num_chunks - 1):
                return np.zeros(0)
            return super().chunk_sample_counts(i - 1)

        def read_chunk(self, i):
            return [] if i in (0, self.num_chunks - 1) else super().read_chunk(i - 1)

    seqs = make_sequences([1, 2, 3, 4, 5])
    mbs = drain(MinibatchSource(Gappy(seqs), seed=3, randomization_window=4), 4)
    assert sorted(i for mb in mbs for i in mb.ids.tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("name", ["INFINITELY_REPEAT", "FULL_DATA_SWEEP"])
def test_cntks_max_samples_constants_are_not_epoch_sizes(name):
    """CNTK's constants (2**64 - 1, 2**64 - 2) are a max_samples of recio.sequence.cntk; as an
    epoch_size they would be a count of samples no corpus reaches, an endless epoch: refused,
    with recio's own names in the message."""
    from recio.sequence import cntk

    value = getattr(cntk, name)
    assert value not in (SWEEP_FOREVER, SWEEP_ONCE) and SWEEP_FOREVER != SWEEP_ONCE
    with pytest.raises(ValueError,
                       match="recio.sequence.SWEEP_FOREVER .* recio.sequence.SWEEP_ONCE"):
        MinibatchSource(MemoryCorpus(make_sequences([1, 2])), epoch_size=value)


def test_bad_size_and_empty_corpus():
    src = MinibatchSource(MemoryCorpus(make_sequences([1])))
    with pytest.raises(ValueError, match=">= 1"):
        src.next_minibatch(0)
    with pytest.raises(recio.errors.SequenceError, match="no samples"):
        MinibatchSource(MemoryCorpus([]))


def test_several_files_are_one_corpus(tmp_path):
    a, b = str(tmp_path / "a.rec"), str(tmp_path / "b.rec")
    write_sequences(a, make_sequences([2, 3, 4]))
    write_sequences(b, make_sequences([5, 6]))
    src = MinibatchSource([a, b], seed=2)
    mbs = drain(src, 8)
    assert sorted(i for mb in mbs for i in mb.ids.tolist()) == [0, 1, 2, 3, 4]
    lengths = {int(i): len(x) for mb in mbs for i, x in zip(mb.ids, mb["x"])}
    assert lengths == {0: 2, 1: 3, 2: 4, 3: 5, 4: 6}


def test_record_corpus_chunks_and_missing_sidecar(tmp_path):
    path = str(tmp_path / "s.rec")
    write_sequences(path, make_sequences([5] * 10))
    corpus = RecordCorpus(path, chunk_samples=12)
    assert corpus.num_chunks == 4 and corpus.chunk_sample_counts(0).tolist() == [[5]] * 3
    os.remove(str(tmp_path / "s.len"))  # falls back to reading each record's stream table
    with pytest.warns(UserWarning, match="rebuild_sidecar"):
        again = RecordCorpus(path, chunk_samples=12)
    assert again.kind == "sequence" and again.counts.tolist() == corpus.counts.tolist()


def test_records_holding_the_magic_and_closing_while_arrays_live(tmp_path):
    from recio.records import framing
    magic = np.frombuffer(framing.MAGIC_BYTES * 6, dtype=np.float32).reshape(3, 2)
    seqs = [{"x": magic}, {"x": np.zeros((2, 2), np.float32)}, {"x": magic[:1].copy()}]
    path = str(tmp_path / "m.rec")
    write_sequences(path, seqs)
    src = MinibatchSource(path, randomize=False)
    mb = src.next_minibatch(100)
    src.close()  # the arrays stay valid: the map is released when they go
    for i, x in zip(mb.ids, mb["x"]):
        assert x.tobytes() == seqs[i]["x"].tobytes()


def test_damaged_record_reports_file_and_offset(tmp_path):
    path = str(tmp_path / "d.rec")
    offsets = []
    with SequenceWriter(path) as w:
        for n in (3, 4, 5):
            offsets.append(w.write({"x": np.zeros((n, 2), np.float32)}))
    with open(path, "r+b") as f:  # break the second record's payload magic
        f.seek(offsets[1] + 8)
        f.write(b"XXXX")
    src = MinibatchSource(path, randomize=False)
    with pytest.raises(recio.errors.SequenceError) as err:
        src.next_minibatch(100)
    assert err.value.path == path and err.value.offset == offsets[1]


# ----------------------------------------------------------------------------------- images

def test_image_records_are_single_sample_sequences(tmp_path):
    rec, idx = str(tmp_path / "img.rec"), str(tmp_path / "img.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(23):
            w.write(i, recio.pack(recio.IRHeader(0, float(i % 7), i, 0), b"JPEG" + bytes([i]) * i))
    src = MinibatchSource(rec, seed=9, epoch_size=SWEEP_FOREVER)
    assert src.stream_names == ["label", "image"] and src.num_samples == 23
    state = None
    seen = []
    for step in range(10):
        if step == 5:
            state = src.get_checkpoint_state()
        mb = src.next_minibatch(4)
        seen.append(mb.ids.tolist())
        for i, label, image in zip(mb.ids, mb["label"], mb["image"]):
            assert label.tolist() == [[float(i % 7)]]
            assert image.tobytes() == b"JPEG" + bytes([i]) * int(i)
    flat = [i for s in seen for i in s]
    assert sorted(flat[:23]) == list(range(23))
    resumed = MinibatchSource(rec, seed=9, epoch_size=SWEEP_FOREVER)
    resumed.restore_from_checkpoint(state)
    assert ids(resumed.next_minibatch(4) for _ in range(5)) == seen[5:]


def test_image_records_with_label_vectors(tmp_path):
    rec, idx = str(tmp_path / "img.rec"), str(tmp_path / "img.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(3):
            w.write(i, recio.pack(recio.IRHeader(2, [i, 2.0 * i], i, 0), b"x" * (i + 1)))
    mb = MinibatchSource(rec, randomize=False).next_minibatch(3)
    assert [lab.tolist() for lab in mb["label"]] == [[[0, 0]], [[1, 2]], [[2, 4]]]
    assert [len(img[0]) for img in mb["image"]] == [1, 2, 3]


# ----------------------------------------------------------------------------------- torch

def test_torch_dataset_state_dict_resumes_exactly():
    torch = need("torch")
    from recio.torch.minibatch import MinibatchDataset

    seqs = make_sequences([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], dim=2)

    def dataset():
        return MinibatchDataset(MinibatchSource(MemoryCorpus(seqs, 3), seed=7,
                                                epoch_size=SWEEP_FOREVER), 8)

    ds = dataset()
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    epoch1 = list(loader)  # one loop = one epoch (a sweep; its last minibatch runs on)
    total = sum(len(s["x"]) for s in seqs)
    assert total <= sum(int(b["x_mask"].sum()) for b in epoch1) < total + 8
    first = next(iter(loader))
    state = json.loads(json.dumps(ds.state_dict()))
    rest = list(loader)
    again = dataset()
    again.load_state_dict(state)
    resumed = list(torch.utils.data.DataLoader(again, batch_size=None))
    assert len(resumed) == len(rest) > 0
    for a, b in zip(rest, resumed):
        assert torch.equal(a["x"], b["x"]) and torch.equal(a["x_mask"], b["x_mask"])
    assert first["x"].dtype == torch.float32 and first["x"].dim() == 3


def test_torch_dataset_with_state_and_one_worker(start_method):
    """Minibatches and their states from one DataLoader worker, forked or spawned (the source
    and its corpus travel pickled): the states resume where each minibatch left off."""
    torch = need("torch")
    from recio.torch.minibatch import MinibatchDataset

    seqs = make_sequences([1] * 12)
    ds = MinibatchDataset(MinibatchSource(MemoryCorpus(seqs, 4), seed=1), 5, transform=None,
                          with_state=True)
    items = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1))
    assert [mb.num_samples for mb, _ in items] == [5, 5, 2]
    again = MinibatchDataset(MinibatchSource(MemoryCorpus(seqs, 4), seed=1), 5, transform=None)
    again.load_state_dict(items[0][1])
    assert [mb.ids.tolist() for mb in again] == [mb.ids.tolist() for mb, _ in items[1:]]


def test_no_worker_idles_while_others_have_data():
    """One-sample sequences, size 2, 3 workers: every worker gets a sequence in every minibatch
    of the sweep (a worker with nothing would hang a synchronous data-parallel job)."""
    seqs = make_sequences([1] * 30)
    workers = [MinibatchSource(MemoryCorpus(seqs), worker_rank=r, num_workers=3,
                               randomize=False) for r in range(3)]
    seen = []
    while True:
        shares = [w.next_minibatch(2) for w in workers]
        if shares[0] is None:
            break
        assert [s.num_sequences for s in shares] == [1, 1, 1]
        seen.extend(i for s in shares for i in s.ids.tolist())
    assert seen == list(range(30))
