"""Sequence records: payload layout, zero-copy decoding, the sample-count sidecar, the writer."""
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import recio
from recio.records import framing
from recio.errors import RecordIOError, SequenceError
from recio.sequence import (Sparse, SequenceWriter, pack_sequence, read_sidecar, rebuild_sidecar,
                            sample_counts, sequence_sample_counts, sidecar_path, unpack_sequence,
                            write_sequences)

DTYPES = ["<f4", "<f8", "<f2", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8"]


def assert_same(a, b):
    if isinstance(a, Sparse):
        assert isinstance(b, Sparse) and a.dim == b.dim
        for x, y in zip(a[:3], b[:3]):
            np.testing.assert_array_equal(x, y)
    else:
        a = np.asarray(a)
        assert b.shape == a.shape and b.dtype == a.dtype.newbyteorder("<")
        np.testing.assert_array_equal(a, b)


def test_exact_bytes_of_a_small_sequence():
    payload = pack_sequence({"a": np.array([[1.0, 2.0]], dtype=np.float32)})
    expected = (b"RSEQ" + struct.pack("<HH", 1, 1)
                + struct.pack("<BBBBIIQ", 0, 0, 0, 1, 2, 1, 0) + b"a" + b"\0" * 3
                + struct.pack("<2f", 1.0, 2.0))
    assert payload == expected


def test_exact_bytes_of_a_sparse_stream():
    sp = Sparse.from_lists([([3], [0.5]), ([], [])], dim=5)
    payload = pack_sequence({"s": sp})
    expected = (b"RSEQ" + struct.pack("<HH", 1, 1)
                + struct.pack("<BBBBIIQ", 1, 0, 0, 1, 5, 2, 1) + b"s" + b"\0" * 3
                + struct.pack("<3q", 0, 1, 1)            # indptr, int64
                + struct.pack("<i", 3) + b"\0" * 4       # indices, int32, padded to 8
                + struct.pack("<f", 0.5) + b"\0" * 4)    # values
    assert payload == expected


dense = st.sampled_from(DTYPES).flatmap(lambda dt: hnp.arrays(
    dt, st.one_of(st.tuples(st.integers(0, 6)), st.tuples(st.integers(0, 6), st.integers(1, 4))),
    elements=hnp.from_dtype(np.dtype(dt), allow_nan=False)))


@st.composite
def sparse(draw):
    dim = draw(st.integers(1, 20))
    n = draw(st.integers(0, 6))
    samples = []
    for _ in range(n):
        k = draw(st.integers(0, 4))
        samples.append((draw(st.lists(st.integers(0, dim - 1), min_size=k, max_size=k)),
                        draw(st.lists(st.floats(-1e3, 1e3, width=32), min_size=k, max_size=k))))
    return Sparse.from_lists(samples, dim, dtype=draw(st.sampled_from(["<f4", "<f8"])))


sequences = st.dictionaries(st.text("abcxyz_", min_size=1, max_size=8),
                            st.one_of(dense, sparse()), min_size=1, max_size=4)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(sequences)
def test_round_trip(seq):
    payload = pack_sequence(seq)
    out = unpack_sequence(payload)
    assert list(out) == list(seq)
    for name in seq:
        assert_same(seq[name], out[name])
    counts = sequence_sample_counts(payload)
    assert counts == {k: (v.num_samples if isinstance(v, Sparse) else len(v))
                      for k, v in seq.items()}


@settings(max_examples=40, deadline=None)
@given(sequences, st.data())
def test_truncated_or_damaged_payload_raises_sequence_error(seq, data):
    payload = pack_sequence(seq)
    cut = data.draw(st.integers(0, len(payload) - 1))
    try:
        out = unpack_sequence(payload[:cut])
    except SequenceError:
        return
    # a cut inside trailing padding can still decode: then the data must be intact
    for name in seq:
        assert_same(seq[name], out[name])


def test_decoding_is_zero_copy():
    buf = bytearray(pack_sequence({"x": np.zeros((3, 2), np.float32),
                                   "s": Sparse.from_lists([([1], [1.0])], 4)}))
    out = unpack_sequence(buf)
    out["x"][1, 1] = 7.0  # writable view into the bytearray
    assert unpack_sequence(bytes(buf))["x"][1, 1] == 7.0
    assert np.shares_memory(out["s"].values, np.frombuffer(buf, np.uint8))
    ro = unpack_sequence(bytes(buf))["x"]
    assert not ro.flags.writeable


def test_one_dimensional_stream_stays_one_dimensional():
    out = unpack_sequence(pack_sequence({"labels": np.arange(4, dtype=np.int64)}))
    assert out["labels"].shape == (4,)


def test_sparse_to_dense():
    sp = Sparse.from_lists([([0, 2], [1.0, 2.0]), ([], []), ([1], [3.0])], dim=3)
    np.testing.assert_array_equal(sp.to_dense(), [[1, 0, 2], [0, 0, 0], [0, 3, 0]])


@pytest.mark.parametrize("bad, words", [
    ({}, "at least one stream"),
    ({"x": np.zeros((2, 2, 2))}, "N x dim"),
    ({"x": np.zeros(2, dtype=complex)}, "cannot hold"),
    ({"x": np.array(["a"])}, "cannot hold"),
    ({"": np.zeros(1)}, "1..255 bytes"),
    ({"s": Sparse(np.array([0, 2]), np.array([0], np.int32), np.array([1.0]), 3)}, "indptr"),
    ({"s": Sparse(np.array([0, 1]), np.array([5], np.int32), np.array([1.0]), 3)}, "outside"),
])
def test_bad_input_is_refused(bad, words):
    with pytest.raises(SequenceError, match=words):
        pack_sequence(bad)


@pytest.mark.parametrize("payload, words", [
    (b"", "shorter"),
    (b"IMGx\x01\x00\x01\x00", "not a sequence record"),
    (b"RSEQ\x02\x00\x01\x00", "version 2"),
    (b"RSEQ\x01\x00\x01\x00" + bytes(10), "truncated"),
])
def test_bad_payload_is_refused(payload, words):
    with pytest.raises(SequenceError, match=words):
        unpack_sequence(payload)


def corpus(n=7):
    rng = np.random.default_rng(0)
    return [{"feat": rng.standard_normal((int(k), 3)).astype(np.float32),
             "label": np.array([i], dtype=np.int32)} for i, k in enumerate(rng.integers(1, 9, n))]


def test_writer_writes_rec_idx_and_sidecar(tmp_path):
    seqs = corpus()
    rec = tmp_path / "train.rec"
    with SequenceWriter(rec) as w:
        offsets = [w.write(s) for s in seqs]
    assert sorted(os.listdir(tmp_path)) == ["train.idx", "train.len", "train.rec"]
    keys, idx_offsets = recio.read_index(tmp_path / "train.idx")
    assert keys == list(range(len(seqs))) and idx_offsets == offsets
    reader = recio.IndexedRecordReader(str(rec), str(tmp_path / "train.idx"))
    for key, seq in zip(keys, seqs):
        out = unpack_sequence(reader[key])
        assert_same(seq["feat"], out["feat"])
    np.testing.assert_array_equal(sample_counts(rec), [len(s["feat"]) for s in seqs])
    np.testing.assert_array_equal(sample_counts(rec, "label"), [1] * len(seqs))
    names, counts = read_sidecar(sidecar_path(rec))
    assert names == ["feat", "label"] and counts.shape == (len(seqs), 2)


def test_payload_containing_the_magic_round_trips(tmp_path):
    magic = np.frombuffer(framing.MAGIC_BYTES * 8, dtype=np.float32).reshape(4, 2)
    rec = tmp_path / "m.rec"
    write_sequences(rec, [{"x": magic}, {"x": magic[:1]}])
    raw = open(rec, "rb").read()
    assert framing.decode_cflag(struct.unpack_from("<I", raw, 4)[0]) == 1  # multi-part record
    reader = recio.RecordReader(str(rec))
    out = [unpack_sequence(r)["x"] for r in reader]
    assert_same(magic, out[0]) and assert_same(magic[:1], out[1])


def test_writer_keys_and_custom_idx_path(tmp_path):
    rec, idx = tmp_path / "a.rec", tmp_path / "other.idx"
    with SequenceWriter(rec, idx) as w:
        w.write({"x": np.zeros(2)}, key=10)
        w.write({"x": np.zeros(3)}, key=11)
    assert recio.read_index(idx)[0] == [10, 11]
    np.testing.assert_array_equal(sample_counts(rec), [2, 3])


def test_writer_is_atomic(tmp_path):
    rec = tmp_path / "a.rec"
    with pytest.raises(RuntimeError):
        with SequenceWriter(rec) as w:
            w.write({"x": np.zeros(2)})
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_writer_refuses_changing_streams(tmp_path):
    with pytest.raises(SequenceError, match="same"):
        with SequenceWriter(tmp_path / "a.rec") as w:
            w.write({"x": np.zeros(2)})
            w.write({"y": np.zeros(2)})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("other, said", [
    (np.zeros((3, 4), np.float64), "stream 'x' is dense float64 of dim 4 where sequence 0 has "
                                   "dense float32 of dim 4"),
    (np.zeros((3, 5), np.float32), "dense float32 of dim 5 where sequence 0"),
    (np.zeros(3, np.float32), "dense float32 (1-D) where sequence 0"),
    (Sparse.from_lists([([1], [1.0])], dim=4), "sparse float32 of dim 4 where sequence 0"),
])
def test_writer_refuses_a_record_whose_stream_layout_differs(tmp_path, other, said):
    """A record that every reader would refuse (MinibatchSource: "record 2 ... every record of
    a file needs the same stream layout", or "record 0 is damaged" when it is the first) is
    refused when it is written, naming the record and the stream, and nothing is left."""
    first = {"x": np.zeros((2, 4), np.float32), "y": np.array([1])}
    with pytest.raises(SequenceError, match="sequence 2: ") as info:
        with SequenceWriter(tmp_path / "a.rec") as w:
            w.write(first)
            w.write({"x": np.ones((5, 4), np.float32), "y": np.array([2])})  # same layouts
            w.write({"x": other, "y": np.array([3])})
    assert said in info.value.message and ".astype()" in info.value.message
    assert os.listdir(tmp_path) == []


def test_writer_accepts_streams_in_any_order(tmp_path):
    rec = tmp_path / "a.rec"
    write_sequences(rec, [{"x": np.zeros(2), "y": np.zeros(1)},
                          {"y": np.zeros(4), "x": np.zeros(1)}])
    np.testing.assert_array_equal(sample_counts(rec, "y"), [1, 4])
    assert list(unpack_sequence(recio.RecordReader(str(rec)).read_at(0))) == ["x", "y"]


def test_sample_counts_errors(tmp_path):
    rec = tmp_path / "a.rec"
    write_sequences(rec, corpus(3))
    with pytest.raises(SequenceError, match="not in the file"):
        sample_counts(rec, "nope")
    with open(rec, "ab") as f:  # the .rec changed after the sidecar was written
        f.write(framing.encode_record(pack_sequence({"feat": np.zeros((1, 3), np.float32),
                                                     "label": np.zeros(1, np.int32)})))
    with pytest.raises(SequenceError, match="rebuild"):
        sample_counts(rec)
    os.remove(sidecar_path(rec))
    with pytest.raises(SequenceError, match="no sample-count sidecar"):
        sample_counts(rec)
    bad = tmp_path / "b.rec"
    bad.write_bytes(b"")
    (tmp_path / "b.len").write_bytes(b"garbage")
    with pytest.raises(SequenceError) as err:
        sample_counts(bad)
    assert isinstance(err.value, RecordIOError) and err.value.path.endswith("b.len")


def test_rebuild_sidecar_reproduces_the_writer(tmp_path):
    rec = tmp_path / "a.rec"
    write_sequences(rec, corpus(9))
    original = open(sidecar_path(rec), "rb").read()
    os.remove(sidecar_path(rec))
    assert rebuild_sidecar(rec) == sidecar_path(rec)
    assert open(sidecar_path(rec), "rb").read() == original


def test_rebuild_sidecar_without_an_index_follows_file_order(tmp_path):
    """With no .idx the rows follow file order, the order RecordCorpus then reads in."""
    rec = tmp_path / "a.rec"
    write_sequences(rec, corpus(5))
    original = open(sidecar_path(rec), "rb").read()
    os.remove(sidecar_path(rec))
    os.remove(tmp_path / "a.idx")
    rebuild_sidecar(rec)
    assert open(sidecar_path(rec), "rb").read() == original
    assert recio.MinibatchSource(str(rec), randomize=False).num_sequences == 5


@settings(max_examples=40, deadline=None)
@given(sparse())
def test_sparse_counts_form_is_the_indptr_form(sp):
    """counts/nnz/from_counts/from_dense agree with indptr (what CBF code relies on)."""
    assert sp.counts.tolist() == np.diff(sp.indptr).tolist()
    assert sp.nnz == len(sp.values) == int(sp.counts.sum())
    assert sp.sample_dim == sp.dim
    again = Sparse.from_counts(sp.counts, sp.indices, sp.values, sp.dim)
    assert again.indptr.tolist() == sp.indptr.tolist() and again.indptr.dtype == np.int64
    dense = sp.to_dense()
    np.testing.assert_array_equal(sp.toarray(), dense)
    np.testing.assert_array_equal(Sparse.from_dense(dense).to_dense(), dense)
    assert Sparse.from_dense(dense).nnz == np.count_nonzero(dense)


def test_sparse_from_dense_refuses_other_shapes():
    with pytest.raises(SequenceError, match="2-D"):
        Sparse.from_dense(np.zeros(3))
