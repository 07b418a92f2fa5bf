"""Sequence bucketing: the DP against brute force, the cost model, the sampler, `recio buckets`."""
import itertools
import json
import math
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import recio
from conftest import need
from recio.sequence import bucketing as bk
from recio.errors import RecordIOError, SequenceError

FAST = settings(deadline=None, max_examples=60)

small_lengths = st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=40)


def lognormal_lengths(n, seed=0, median=40, sigma=1.0):
    rng = np.random.default_rng(seed)
    return np.maximum(1, np.round(rng.lognormal(np.log(median), sigma, n))).astype(np.int64)


def brute_force(lengths, num_buckets, batch_size):
    """Least padded cost over every set of at most num_buckets boundaries."""
    values, _ = bk.length_histogram(lengths)
    inner = [int(v) for v in values[:-1]]
    best = math.inf
    for q in range(1, num_buckets + 1):
        for cut in itertools.combinations(inner, q - 1):
            best = min(best, bk.padded_cost(lengths, list(cut) + [int(values[-1])], batch_size))
    return best


def expected_max_exhaustive(lengths, k):
    """E[max of k drawn without replacement], by listing every k-subset."""
    subsets = list(itertools.combinations(lengths, k))
    return sum(max(s) for s in subsets) / len(subsets)


# ----------------------------------------------------------------------------- DP and cost

@FAST
@given(small_lengths, st.integers(1, 4), st.integers(1, 6))
def test_dp_never_worse_than_brute_force(lengths, num_buckets, batch_size):
    edges = bk.bucket_boundaries(lengths, num_buckets, batch_size=batch_size)
    assert 1 <= len(edges) <= num_buckets
    assert edges == sorted(set(edges)) and edges[-1] == max(lengths)
    cost = bk.padded_cost(lengths, edges, batch_size)
    assert cost <= brute_force(lengths, num_buckets, batch_size) * (1 + 1e-9) + 1e-9


@FAST
@given(st.lists(st.integers(1, 300), min_size=1, max_size=200), st.integers(1, 6),
       st.integers(1, 40))
def test_optimal_never_worse_than_equal_width_or_quantile(lengths, num_buckets, batch_size):
    opt = bk.padded_cost(lengths, bk.bucket_boundaries(lengths, num_buckets, batch_size),
                         batch_size)
    for method in ("equal_width", "quantile"):
        other = bk.bucket_boundaries(lengths, num_buckets, batch_size, method=method)
        assert len(other) <= num_buckets
        assert opt <= bk.padded_cost(lengths, other, batch_size) * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("lengths,k", [([1, 2, 3, 4, 5], 2), ([3, 3, 7, 9, 9, 20, 1], 3),
                                       ([5, 1, 1, 1, 1, 1, 1, 8], 4), ([2, 9], 1)])
def test_cost_model_is_exact_expected_max(lengths, k):
    expected = len(lengths) * expected_max_exhaustive(lengths, k)
    assert bk.padded_cost(lengths, None, k) == pytest.approx(expected, rel=1e-9)


def test_small_buckets_pad_to_their_maximum():
    lengths = [1, 2, 2, 5, 6, 9, 10, 10]
    # every bucket fits in one batch of 4: cost = size x longest
    assert bk.padded_cost(lengths, [2, 6, 10], 4) == 3 * 2 + 2 * 6 + 3 * 10
    assert bk.padding_waste(lengths, [2, 6, 10], 4) == pytest.approx(48 / sum(lengths))


def test_lognormal_figures_match_the_issue():
    lengths = lognormal_lengths(5000)
    random = bk.padding_waste(lengths, None, 32)
    opt3 = bk.padding_waste(lengths, bk.bucket_boundaries(lengths, 3, 32), 32)
    assert 4.5 < random < 6.5 and 1.8 < opt3 < 2.4
    assert 2.3 < random / opt3 < 2.9
    rows = bk.bucketing_report(lengths, 32, 6)
    wastes = [r["optimal"]["waste"] for r in rows]
    assert wastes == sorted(wastes, reverse=True)
    assert rows[0]["predicted_speedup"] == pytest.approx(1.0)
    for r in rows:
        assert r["optimal"]["waste"] <= r["equal_width"]["waste"] + 1e-9
        assert r["optimal"]["waste"] <= r["quantile"]["waste"] + 1e-9


def test_cost_model_agrees_with_the_sampler():
    lengths = lognormal_lengths(3000, seed=4)
    edges = bk.bucket_boundaries(lengths, 3, 32)
    sampler = bk.BucketBatchSampler(lengths, edges, 32, seed=1)
    measured = []
    for epoch in range(5):
        sampler.set_epoch(epoch)
        measured.append(sum(len(b) * lengths[b].max() for b in sampler))
    assert np.mean(measured) == pytest.approx(bk.padded_cost(lengths, edges, 32), rel=0.05)


@pytest.mark.slow
def test_histogram_scale_dp():
    # a million sequences with ~2,000 distinct lengths: the DP only sees the histogram
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 2000, size=1_000_000)
    edges = bk.bucket_boundaries(lengths, 4, 64)
    assert len(edges) == 4 and edges[-1] == lengths.max()
    assert bk.padded_cost(lengths, edges, 64) < bk.padded_cost(lengths, None, 64)


def test_fewer_distinct_lengths_than_buckets():
    assert bk.bucket_boundaries([7, 7, 7], 5) == [7]
    assert bk.bucket_boundaries([3, 9, 3], 8, batch_size=2) == [3, 9]
    assert bk.bucket_boundaries([], 3) == []
    assert bk.padding_waste([], None, 4) == 1.0


def test_baselines():
    lengths = list(range(1, 101))
    assert bk.equal_width_boundaries(lengths, 4) == [25, 50, 75, 100]
    assert bk.quantile_boundaries(lengths, 4) == [25, 50, 75, 100]
    skewed = [1] * 90 + [100] * 10
    assert bk.quantile_boundaries(skewed, 4) == [1, 100]   # empty buckets merged
    assert bk.equal_width_boundaries(skewed, 3) == [34, 100]  # (34, 67] was empty


def test_assign_buckets_upper_edges_inclusive():
    got = bk.assign_buckets([1, 5, 6, 10, 11, 99], [5, 10])
    assert got.tolist() == [0, 0, 1, 1, 2, 2]   # 2 = the overflow bucket


@pytest.mark.parametrize("bad", [[-1, 3], [1.5, 2], [[1, 2]], ["a"]])
def test_bad_lengths_raise_sequence_error(bad):
    with pytest.raises(SequenceError):
        bk.bucket_boundaries(bad, 2)


def test_bad_arguments():
    with pytest.raises(ValueError):
        bk.bucket_boundaries([1, 2], 0)
    with pytest.raises(ValueError):
        bk.bucket_boundaries([1, 2], 2, batch_size=0)
    with pytest.raises(ValueError):
        bk.bucket_boundaries([1, 2], 2, method="kmeans")
    with pytest.raises(ValueError):
        bk.padded_cost([1, 2], [5, 5], 2)
    with pytest.raises(ValueError):
        bk.BucketBatchSampler([1, 2], 2, 2, part_index=1)
    with pytest.raises(ValueError):
        bk.BucketBatchSampler([1, 2], 2, 2, batch_size_in="tokens")


def test_buckets_true_says_what_buckets_is():
    """A bool is neither a number of buckets nor their boundaries (it was iterated, and
    failed with "'bool' object is not iterable")."""
    with pytest.raises(TypeError, match="buckets is a number of buckets or their boundaries"):
        bk.BucketBatchSampler([1, 2], True, 2)


def test_public_exports():
    assert recio.sequence.bucket_boundaries is bk.bucket_boundaries
    assert recio.sequence.BucketBatchSampler is bk.BucketBatchSampler


# ----------------------------------------------------------------------------- sampler

def flat(batches):
    return sorted(i for b in batches for i in b)


sampler_args = st.fixed_dictionaries({
    "lengths": st.lists(st.integers(0, 60), min_size=0, max_size=120),
    "buckets": st.one_of(st.integers(1, 5), st.just([10, 30])),
    "batch_size": st.integers(1, 9),
    "shuffle": st.booleans(),
    "seed": st.integers(0, 2 ** 32),
})


@FAST
@given(sampler_args, st.integers(0, 3))
def test_every_sequence_once_per_epoch_and_within_bucket(args, epoch):
    s = bk.BucketBatchSampler(**args)
    s.set_epoch(epoch)
    batches = list(s)
    assert len(batches) == len(s)
    assert flat(batches) == list(range(len(args["lengths"])))
    which = bk.assign_buckets(args["lengths"], s.boundaries)
    for b in batches:
        assert 1 <= len(b) <= args["batch_size"]
        assert len(set(which[b].tolist())) == 1
    assert all(isinstance(i, int) for b in batches for i in b)


@FAST
@given(st.lists(st.integers(1, 50), min_size=1, max_size=150), st.integers(1, 120),
       st.booleans())
def test_samples_mode_packs_whole_sequences_within_budget(lengths, budget, shuffle):
    s = bk.BucketBatchSampler(lengths, [10, 25], budget, batch_size_in="samples",
                                 shuffle=shuffle, seed=3)
    batches = list(s)
    assert flat(batches) == list(range(len(lengths)))
    arr = np.asarray(lengths)
    for b in batches:
        assert arr[b].sum() <= budget or len(b) == 1
    if not shuffle:  # greedy packing: the next sequence of a bucket would not have fitted
        which = bk.assign_buckets(lengths, s.boundaries)
        for b, nxt in zip(batches, batches[1:]):
            if which[b[0]] == which[nxt[0]]:
                assert arr[b].sum() + arr[nxt[0]] > budget


def test_samples_mode_long_sequence_alone():
    s = bk.BucketBatchSampler([5, 50, 5, 5], [100], 10, batch_size_in="samples", shuffle=False)
    assert list(s) == [[0], [1], [2, 3]]


def test_reproducible_from_seed_and_epoch():
    lengths = lognormal_lengths(500, seed=2)
    a = bk.BucketBatchSampler(lengths, 3, 16, seed=7)
    b = bk.BucketBatchSampler(lengths, 3, 16, seed=7)
    a.set_epoch(3)
    b.set_epoch(3)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(4)
    assert list(a) != first
    c = bk.BucketBatchSampler(lengths, 3, 16, seed=8)
    c.set_epoch(3)
    assert list(c) != first


def test_no_shuffle_ascending_buckets():
    lengths = [9, 1, 5, 2, 8, 3]
    s = bk.BucketBatchSampler(lengths, [3, 9], 2, shuffle=False)
    assert list(s) == [[1, 3], [5], [0, 2], [4]]


def test_drop_last_drops_partial_bucket_batches():
    lengths = [1] * 5 + [10] * 4
    s = bk.BucketBatchSampler(lengths, [1, 10], 2, shuffle=False, drop_last=True)
    assert list(s) == [[0, 1], [2, 3], [5, 6], [7, 8]]


@FAST
@given(sampler_args, st.integers(1, 4), st.booleans())
def test_parts_disjoint_and_complete(args, parts, drop_last):
    per_part = []
    for part in range(parts):
        s = bk.BucketBatchSampler(num_parts=parts, part_index=part, drop_last=drop_last,
                                     **args)
        s.set_epoch(2)
        per_part.append(list(s))
    everything = [i for batches in per_part for b in batches for i in b]
    assert len(everything) == len(set(everything))          # disjoint
    counts = [len(batches) for batches in per_part]
    if drop_last:
        assert len(set(counts)) == 1
    else:
        assert sorted(everything) == list(range(len(args["lengths"])))  # complete
        assert max(counts) - min(counts) <= 1


def test_parts_step_through_the_same_bucket():
    lengths = lognormal_lengths(2000, seed=5)
    parts = [bk.BucketBatchSampler(lengths, 3, 8, num_parts=2, part_index=r, drop_last=True)
             for r in range(2)]
    which = bk.assign_buckets(lengths, parts[0].boundaries)
    pairs = list(zip(*[list(s) for s in parts]))
    same = sum(which[a[0]] == which[b[0]] for a, b in pairs)
    assert same >= len(pairs) - 3   # only the mixed groups of leftovers can differ


@FAST
@given(sampler_args, st.integers(0, 5), st.data())
def test_resume_from_state_dict_is_exact(args, epoch, data):
    s = bk.BucketBatchSampler(**args)
    s.set_epoch(epoch)
    full = list(s)
    stop = data.draw(st.integers(0, len(full)))
    s.set_epoch(epoch)
    it = iter(s)
    seen = [next(it) for _ in range(stop)]
    state = json.loads(json.dumps(s.state_dict()))   # survives a checkpoint file
    fresh = bk.BucketBatchSampler(**args)
    fresh.load_state_dict(state)
    assert seen + list(fresh) == full
    assert list(fresh) == full          # the iteration after a resumed one is the whole epoch


def test_state_dict_with_batches_done_and_mismatch():
    lengths = lognormal_lengths(300)
    s = bk.BucketBatchSampler(lengths, 2, 10, seed=1)
    full = list(s)
    state = s.state_dict(batches_done=4)
    assert state["epoch"] == 0 and state["batches_done"] == 4
    other = bk.BucketBatchSampler(lengths, 2, 10, seed=1)
    other.load_state_dict(state)
    assert list(other) == full[4:]
    with pytest.raises(ValueError, match="seed"):
        bk.BucketBatchSampler(lengths, 2, 10, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="batches"):
        bk.BucketBatchSampler(lengths, 2, 5, seed=1).load_state_dict(state)


def test_torch_dataloader_batch_sampler():
    torch = need("torch")
    lengths = lognormal_lengths(200, seed=9)

    class Seqs(torch.utils.data.Dataset):
        def __len__(self):
            return len(lengths)

        def __getitem__(self, i):
            return torch.full((int(lengths[i]),), i, dtype=torch.long)

    def collate(items):
        return torch.nn.utils.rnn.pad_sequence(items, batch_first=True, padding_value=-1)

    sampler = bk.BucketBatchSampler(lengths, 3, 16, seed=2)
    loader = torch.utils.data.DataLoader(Seqs(), batch_sampler=sampler, collate_fn=collate)
    got = [sorted(set(b.flatten().tolist()) - {-1}) for b in loader]
    assert got == [sorted(b) for b in sampler]
    assert len(loader) == len(sampler)


# ----------------------------------------------------------------------------- from .rec and CLI

@pytest.fixture
def seq_rec(tmp_path):
    from recio.sequence import SequenceWriter

    lengths = lognormal_lengths(400, seed=11)
    rec = tmp_path / "seq.rec"
    with SequenceWriter(rec) as w:
        for n in lengths:
            w.write({"x": np.zeros((int(n), 2), np.float32), "y": np.zeros(1, np.int32)})
    return rec, lengths


def test_sampler_from_rec(seq_rec):
    rec, lengths = seq_rec
    s = bk.BucketBatchSampler.from_rec(rec, 3, 16, seed=4)
    assert s.boundaries == bk.bucket_boundaries(lengths, 3, 16)
    assert list(s) == list(bk.BucketBatchSampler(lengths, 3, 16, seed=4))
    y = bk.BucketBatchSampler.from_rec(rec, 2, 4, stream="y")
    assert y.lengths.tolist() == [1] * len(lengths)


def test_cli_text(seq_rec):
    from recio.cli.buckets import buckets_cmd

    rec, lengths = seq_rec
    result = CliRunner().invoke(buckets_cmd, [str(rec), "-n", "3"])
    assert result.exit_code == 0, result.output
    edges = bk.bucket_boundaries(lengths, 3, 32)
    assert f"Optimal boundaries for Q=3 (upper edges, inclusive): {', '.join(map(str, edges))}" \
        in result.output
    assert "400 sequences" in result.output and "#" in result.output
    table = [line.split() for line in result.output.splitlines()
             if line.split() and line.split()[0].isdigit() and line.split()[1].endswith("x")]
    assert [int(r[0]) for r in table] == list(range(1, 9))


def test_cli_json(seq_rec):
    from recio.cli.buckets import buckets_cmd

    rec, lengths = seq_rec
    result = CliRunner().invoke(buckets_cmd, [str(rec), "-n", "4", "-b", "8", "--max-buckets", "5",
                                              "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["sequences"] == 400 and out["samples"] == int(lengths.sum())
    assert out["boundaries"] == bk.bucket_boundaries(lengths, 4, 8)
    assert out["padding_waste"] == pytest.approx(bk.padding_waste(lengths, out["boundaries"], 8))
    assert out["random_waste"] == pytest.approx(bk.padding_waste(lengths, None, 8))
    assert [row["buckets"] for row in out["table"]] == [1, 2, 3, 4, 5]
    assert sum(b["count"] for b in out["histogram"]) == 400
    for row in out["table"]:
        assert row["optimal"]["waste"] <= row["equal_width"]["waste"] + 1e-9


def test_cli_missing_sidecar_one_line_exit_2(tmp_path):
    from recio.cli.buckets import buckets_cmd

    rec = tmp_path / "plain.rec"
    rec.write_bytes(b"")
    result = CliRunner().invoke(buckets_cmd, [str(rec)])
    assert result.exit_code == 2
    assert "sidecar" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_console_script(script, seq_rec):
    rec, lengths = seq_rec
    proc = subprocess.run([*script("recio"), "buckets", str(rec), "-n", "2", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["boundaries"] == bk.bucket_boundaries(lengths, 2, 32)
    bad = subprocess.run([*script("recio"), "buckets", str(rec), "--stream", "nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "nope" in bad.stderr
    assert isinstance(SequenceError("x"), RecordIOError)
