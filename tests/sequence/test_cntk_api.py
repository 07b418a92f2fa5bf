"""recio.sequence.cntk: CNTK's reader API with CNTK 2.7's behaviour, checked against traces the
real CNTK 2.7 recorded (tests/data/cntk/make_traces.py) on the same files."""
import importlib.util
import json
import os

import numpy as np
import pytest

from recio.sequence import cntk as C
from recio.sequence.cbf import CBFReader
from recio.sequence.cntk_randomizers import MT19937_64

HERE = os.path.join(os.path.dirname(__file__), "..", "data", "cntk")
with open(os.path.join(HERE, "traces.json")) as _f:
    TRACES = json.load(_f)["cases"]


_spec = importlib.util.spec_from_file_location("make_traces", os.path.join(HERE, "make_traces.py"))
_traces = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_traces)  # the code that recorded CNTK's traces records recio's


def _source(case, **override):
    return _traces.make_source(C, case, **override)


def _trace(case):
    """What make_traces.py recorded from CNTK, recorded from recio by the same code."""
    return _traces.record(C, case)


@pytest.mark.parametrize("case", TRACES, ids=[c["name"] for c in TRACES])
def test_trace_matches_cntk(case):
    """Every minibatch of every worker: the same sequences in the same order, sample counts,
    sweep_end and checkpoint position as CNTK 2.7 gave."""
    got = _trace(case)
    for step, (mine, cntk) in enumerate(zip(got, case["trace"])):
        assert mine == cntk, f"{case['name']}: minibatch {step} differs"
    assert len(got) == len(case["trace"])


def _case(name):
    return next(c for c in TRACES if c["name"] == name)


def test_d1_source_never_ends_by_default():
    """No max_samples/max_sweeps: sweeps repeat; sweep_end marks each crossing."""
    src = _source(_case("d1_default_no_randomize"))
    ends = 0
    for _ in range(100):  # 100 x 7 samples over a 40-sample corpus: 17 sweeps
        mb = src.next_minibatch(7)
        assert mb
        ends += mb[src.streams.id].sweep_end
    assert ends == 17


def test_d2_max_samples_caps_the_last_minibatch():
    """max_samples=25 at size 20: 19 samples, then the 8-sample sequence whole (27), then end."""
    trace = _case("d2_max_samples_25")["trace"]
    assert [r[0] and r[0]["samples"] for r in trace] == [19, 8, None]
    src = _source(_case("d2_max_samples_25"))
    assert src.next_minibatch(20) and src.next_minibatch(20)
    assert not src.next_minibatch(20) and not src.next_minibatch(20)  # ended for good


def _chunk_of_ids(corpus):
    reader = CBFReader(os.path.join(HERE, corpus))
    return np.repeat(np.arange(reader.num_chunks), [c.num_sequences for c in reader.chunks])


@pytest.mark.parametrize("name, most", [("d4_window_1_chunk", 1), ("d4_window_100_samples", 1),
                                        ("d4_window_300_samples", 3)])
def test_d4_window_bounds_open_chunks(name, most):
    """A 1-chunk or 100-sample window never interleaves chunks; 300 samples opens at most 3
    (14+ chunks of about 75-88 samples)."""
    case = _case(name)
    chunk_of = _chunk_of_ids(case["corpus"])
    order = [int(i) for row in _trace(case) for w in row if w for i in w["ids"]]
    sweep = chunk_of[order[:len(chunk_of)]]
    # chunks open at position t: those begun and not finished
    first = {c: np.argmax(sweep == c) for c in set(sweep.tolist())}
    last = {c: len(sweep) - 1 - np.argmax(sweep[::-1] == c) for c in first}
    open_at = [sum(first[c] <= t <= last[c] for c in first) for t in range(len(sweep))]
    assert max(open_at) <= most


def test_d5_every_worker_gets_data():
    """One-sample sequences, size 2, 3 workers: each worker 1 sample per minibatch, sequence i
    to worker i mod 3."""
    for row in _trace(_case("d5_size2_3workers"))[:10]:
        assert [len(w["ids"]) for w in row] == [1, 1, 1]
        assert [int(w["ids"][0]) % 3 for w in row] == [0, 1, 2]


def test_mt19937_64_is_the_standard_engine():
    """C++11 requires the 10000th output of a default-seeded mt19937_64 to be this value."""
    rng = MT19937_64(5489)
    for _ in range(9999):
        rng.next()
    assert rng.next() == 9981545732273789042


def test_restore_continues_where_it_stopped():
    """A checkpoint restored into a new source gives the same following minibatches."""
    case = dict(_case("d4_window_3_chunks"))
    src = _source(case)
    for _ in range(5):
        src.next_minibatch(32)
    state = src.get_checkpoint_state()
    expected = [src.next_minibatch(32)[src.streams.id].as_sequences() for _ in range(5)]
    again = _source(case)
    again.restore_from_checkpoint(state)
    got = [again.next_minibatch(32)[again.streams.id].as_sequences() for _ in range(5)]
    assert [[s.tolist() for s in mb] for mb in got] == [[s.tolist() for s in mb]
                                                        for mb in expected]


@pytest.mark.parametrize("kwargs, message", [
    ({"max_samples": 10, "max_sweeps": 1}, "mutually exclusive"),
    ({"randomization_window_in_samples": 100}, "randomization_window_in_chunks=0"),
    ({"truncation_length": 5}, "truncation"),
    ({"max_samples": 0}, "cannot be 0"),
])
def test_settings_cntk_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _source({"corpus": "var.cbf", "source": {}}, **kwargs)


def test_bad_calls():
    src = _source({"corpus": "var.cbf", "source": {}})
    with pytest.raises(ValueError, match="> 0"):
        src.next_minibatch(0)
    with pytest.raises(ValueError, match="partition_index"):
        src.next_minibatch(4, num_data_partitions=2, partition_index=2)
    with pytest.raises(ValueError, match="checkpoint"):
        src.restore_from_checkpoint({"position": 3})
