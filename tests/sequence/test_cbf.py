"""CNTK Binary Format: golden files from CNTK's converter, writer/reader round trips, corruption."""
import json
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recio
from recio.errors import ClosedError
from recio.sequence import Sparse
from recio.sequence.cbf import CBFReader, CBFWriter, encode_dense, encode_sparse
from recio.sequence.cbf_format import CBF_MAGIC, CHUNK_ENTRY, StreamInfo, read_header

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = {"float.cbf": np.float32, "double.cbf": np.float64}


@pytest.fixture(scope="module")
def manifest(golden):
    with open(golden / "cbf" / "manifest.json") as f:
        return json.load(f)


def manifest_sparse(sample_pairs, dtype, dim=5):
    """Sparse from the manifest's per-sample [[index, value], ...] lists."""
    return Sparse.from_counts(np.array([len(s) for s in sample_pairs], np.int32),
                              np.array([i for s in sample_pairs for i, _ in s], np.int32),
                              np.array([v for s in sample_pairs for _, v in s], dtype), dim)


def assert_same_sequence(a, b):
    """Bit-exact equality of two decoded sequences (dtypes, shapes, values, NaNs included)."""
    assert list(a) == list(b)
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, Sparse):
            assert isinstance(y, Sparse) and x.dim == y.dim
            for field in ("indptr", "indices", "values"):
                u, v = getattr(x, field), getattr(y, field)
                assert u.dtype == v.dtype and u.shape == v.shape
                assert u.tobytes() == v.tobytes(), (name, field)
        else:
            assert x.dtype == y.dtype and x.shape == y.shape
            assert x.tobytes() == y.tobytes(), name


# ---------------------------------------------------------------------------- golden files

@pytest.mark.parametrize("name", ["float.cbf", "double.cbf"])
def test_golden_header_and_chunk_table(golden, manifest, name):
    r = CBFReader(golden / "cbf" / name)
    info = manifest["files"][name]
    assert r.version == 1
    assert r.header_offset == info["header_offset"]
    assert [[c.offset, c.num_sequences, c.num_samples] for c in r.chunks] == \
        info["chunks_offset_sequences_samples"]
    assert [(s.name, s.storage, s.sample_dim) for s in r.streams] == \
        [(s["name"], s["storage"], s["sample_dim"]) for s in manifest["streams"]]
    assert all(s.dtype == np.dtype(info["element_type"]) for s in r.streams)
    assert r.num_sequences == len(r) == len(manifest["sequences"])
    assert r.num_samples == sum(s["num_samples"] for s in manifest["sequences"])
    assert r.describe()["chunks"] == info["chunks_offset_sequences_samples"]
    # chunks tile the data section exactly
    assert r.chunks[0].offset == 12
    assert sum(c.size for c in r.chunks) == r.header_offset - 12


@pytest.mark.parametrize("name", ["float.cbf", "double.cbf"])
def test_golden_sequences_match_manifest(golden, manifest, name):
    dtype = DTYPES[name]
    r = CBFReader(golden / "cbf" / name)
    decoded = list(r.sequences_with_counts())
    assert len(decoded) == len(manifest["sequences"])
    for (count, seq), want in zip(decoded, manifest["sequences"]):
        assert count == want["num_samples"]
        features = seq["features"]
        assert features.dtype == dtype and features.shape == (len(want["features"]), 3)
        # float32 values are the float32 rounding of the text (as the converter's struct 'f')
        np.testing.assert_array_equal(features, np.array(want["features"], dtype=dtype))
        labels = seq["labels"]
        assert type(labels) is Sparse  # the one sparse type, as sequence records decode to
        expected = manifest_sparse(want["labels"], dtype)
        assert labels.values.dtype == dtype
        np.testing.assert_array_equal(labels.counts, expected.counts)
        np.testing.assert_array_equal(labels.indices, expected.indices)
        np.testing.assert_array_equal(labels.values, expected.values)
        assert labels.num_samples == len(want["labels"])


def test_golden_chunk_sample_counts_and_iteration(golden, manifest):
    r = CBFReader(golden / "cbf" / "float.cbf")
    counts = [int(c) for i in range(r.num_chunks) for c in r.chunk_sample_counts(i)]
    assert counts == [s["num_samples"] for s in manifest["sequences"]]
    assert sum(len(r.read_chunk(i)) for i in range(r.num_chunks)) == 23
    assert len(list(r)) == 23
    assert r.validate() == 23
    with pytest.raises(IndexError):
        r.read_chunk(r.num_chunks)


def test_golden_densify_and_alias(golden, manifest):
    r = CBFReader(golden / "cbf" / "double.cbf", alias={"y": "labels", "x": "features"},
                  densify=True)
    assert r.stream_names == ["x", "y"]
    first = next(iter(r))
    assert set(first) == {"x", "y"}
    want = manifest["sequences"][0]
    dense = np.zeros((len(want["labels"]), 5))
    for row, pairs in enumerate(want["labels"]):
        for index, value in pairs:
            dense[row, index] = value
    np.testing.assert_array_equal(first["y"], dense)
    np.testing.assert_array_equal(first["x"], np.array(want["features"]))
    with pytest.raises(ValueError, match="no stream 'nope'"):
        CBFReader(golden / "cbf" / "double.cbf", alias={"z": "nope"})
    with pytest.raises(ValueError, match="same name"):
        CBFReader(golden / "cbf" / "double.cbf", alias={"labels": "features"})


def test_reader_pickles_for_worker_processes(golden):
    import pickle

    r = CBFReader(golden / "cbf" / "double.cbf", alias={"x": "features"})
    copy = pickle.loads(pickle.dumps(r))
    assert copy.stream_names == ["x", "labels"] and copy.chunks == r.chunks
    np.testing.assert_array_equal(copy.read_chunk(3)[0]["x"], r.read_chunk(3)[0]["x"])


def test_keep_data_in_memory_caches_chunks(golden):
    r = CBFReader(golden / "cbf" / "float.cbf", keep_data_in_memory=True)
    first = r.read_chunk(0)
    assert r.read_chunk(0) is first
    assert r.chunk_sample_counts(0).tolist() == [9, 5, 6, 8]
    r.close()  # drops the cached chunks; the reader reads no more
    with pytest.raises(ClosedError, match="I/O on a closed CBFReader: .*float.cbf"):
        r.read_chunk(0)


@pytest.mark.parametrize("name", ["float.cbf", "double.cbf"])
def test_writer_reproduces_golden_bytes(golden, manifest, tmp_path, name):
    """Given CNTK's chunk boundaries, the writer's bytes are identical to the converter's."""
    dtype = DTYPES[name]
    table = manifest["files"][name]["chunks_offset_sequences_samples"]
    boundaries = set(np.cumsum([c[1] for c in table]).tolist())
    out = tmp_path / name
    streams = [("features", "dense", dtype, 3), ("labels", "sparse", dtype, 5)]
    with CBFWriter(out, streams, chunk_size_bytes=1 << 30) as w:
        for i, seq in enumerate(manifest["sequences"]):
            w.write({"features": np.array(seq["features"], dtype),
                     "labels": manifest_sparse(seq["labels"], dtype)})
            if i + 1 in boundaries:
                w.end_chunk()
    assert out.read_bytes() == (golden / "cbf" / name).read_bytes()


def test_writer_fixes_never_reset_chunk_estimate(golden, tmp_path):
    """CNTK's converter put one sequence in every chunk after the first; we fill every chunk."""
    r = CBFReader(golden / "cbf" / "float.cbf")
    assert [c.num_sequences for c in r.chunks[1:]] == [1] * (r.num_chunks - 1)
    out = tmp_path / "refilled.cbf"
    with CBFWriter(out, r.streams, chunk_size_bytes=600) as w:
        for count, seq in r.sequences_with_counts():
            w.write(seq, num_samples=count)
    sizes = [c.size for c in CBFReader(out).chunks]
    assert len(sizes) < r.num_chunks // 2
    assert all(s <= 600 for s in sizes)
    # greedy: a chunk closed only because the next sequence did not fit
    copy = CBFReader(out)
    for a, b in zip(copy.chunks, copy.chunks[1:]):
        assert a.size + sequence_bytes(copy.streams, copy.read_chunk(b.index)[0]) > 600
    for a, b in zip(r, copy):
        assert_same_sequence(a, b)


def sequence_bytes(streams, seq):
    """Bytes one sequence adds to a chunk: its count word and its data in every stream."""
    return 4 + sum(len((encode_sparse if s.is_sparse else encode_dense)(s, seq[s.name]))
                   for s in streams)


def test_oversized_sequence_gets_its_own_chunk(tmp_path):
    streams = [("a", "dense", "float32", 4)]
    out = tmp_path / "big.cbf"
    with CBFWriter(out, streams, chunk_size_bytes=64) as w:
        w.write({"a": np.ones((1, 4))})       # 4 + 4 + 16 = 24 bytes
        w.write({"a": np.ones((10, 4))})      # 4 + 4 + 160 bytes, alone
        w.write({"a": np.ones((1, 4))})
        w.write({"a": np.ones((1, 4))})
    chunks = CBFReader(out).chunks
    assert [c.num_sequences for c in chunks] == [1, 1, 2]
    assert [c.size for c in chunks] == [24, 168, 48]


# ---------------------------------------------------------------------------- round trips

@st.composite
def corpora(draw):
    """(streams, sequences, chunk size) with dense and sparse streams of both float types."""
    kinds = draw(st.lists(st.tuples(st.sampled_from(["dense", "sparse"]),
                                    st.sampled_from([np.float32, np.float64]),
                                    st.integers(1, 12)), min_size=1, max_size=3))
    streams = [StreamInfo(f"s{i}", storage, dtype, dim)
               for i, (storage, dtype, dim) in enumerate(kinds)]
    seed = draw(st.integers(0, 2**32 - 1))
    n_seqs = draw(st.integers(0, 25))
    max_len = draw(st.sampled_from([0, 1, 3, 8]))
    chunk_size = draw(st.sampled_from([1, 40, 300, 1 << 30]))
    rng = np.random.default_rng(seed)
    seqs = []
    for _ in range(n_seqs):
        seq = {}
        for s in streams:
            n = int(rng.integers(0, max_len + 1))
            if s.is_sparse:
                counts = rng.integers(0, min(s.sample_dim, 4) + 1, size=n).astype(np.int32)
                counts[rng.random(n) < 0.3] = 0          # empty samples
                indices = [np.sort(rng.choice(s.sample_dim, c, replace=False)) for c in counts]
                indices = np.concatenate(indices).astype(np.int32) if n else \
                    np.zeros(0, np.int32)
                values = rng.standard_normal(len(indices)).astype(s.dtype)
                seq[s.name] = Sparse.from_counts(counts, indices, values, s.sample_dim)
            else:
                data = rng.standard_normal((n, s.sample_dim)).astype(s.dtype)
                if data.size:
                    data.flat[0] = draw(st.sampled_from([0.0, -0.0, np.nan, np.inf, 1e-45]))
                seq[s.name] = data
        seqs.append(seq)
    return streams, seqs, chunk_size


@SETTINGS
@given(corpora())
def test_writer_reader_round_trip(tmp_path, corpus):
    streams, seqs, chunk_size = corpus
    out = tmp_path / "rt.cbf"
    with CBFWriter(out, streams, chunk_size_bytes=chunk_size) as w:
        for seq in seqs:
            w.write(seq)
    r = CBFReader(out)
    assert r.streams == streams
    assert r.num_sequences == len(seqs)
    assert sum(c.size for c in r.chunks) == r.header_offset - 12
    if chunk_size == 1 << 30:
        assert r.num_chunks == (1 if seqs else 0)
    elif chunk_size == 1:
        assert r.num_chunks == len(seqs)
    back = list(r.sequences_with_counts())
    for (count, got), want in zip(back, seqs):
        assert_same_sequence(got, want)
        assert count == max(v.num_samples if isinstance(v, Sparse) else len(v)
                            for v in want.values())
    assert len(back) == len(seqs)
    for got, want in zip(CBFReader(out, densify=True), seqs):
        for s in streams:
            expect = want[s.name].toarray() if s.is_sparse else want[s.name]
            np.testing.assert_array_equal(got[s.name], expect)
    # byte-identical on rewrite from what was read
    again = tmp_path / "again.cbf"
    with CBFWriter(again, r.streams, chunk_size_bytes=chunk_size) as w:
        for count, seq in r.sequences_with_counts():
            w.write(seq, num_samples=count)
    assert again.read_bytes() == out.read_bytes()


def test_writer_accepts_other_sparse_forms(tmp_path):
    dense = np.array([[0, 2.5, 0, 0], [0, 0, 0, 0], [1, 0, 0, -1]], np.float32)
    forms = [dense,
             Sparse.from_dense(dense),
             (np.array([2.5, 1, -1]), np.array([1, 0, 3]), np.array([1, 0, 2])),
             Sparse(np.array([0, 1, 1, 3]), np.array([1, 0, 3]), np.array([2.5, 1, -1]), 4)]
    out = tmp_path / "forms.cbf"
    with CBFWriter(out, [StreamInfo("x", "sparse", np.float32, 4)]) as w:
        for form in forms:
            w.write({"x": form})
    for seq in CBFReader(out):
        assert seq["x"].counts.tolist() == [1, 0, 2]
        np.testing.assert_array_equal(seq["x"].toarray(), dense)
        np.testing.assert_array_equal(seq["x"].indptr, [0, 1, 1, 3])


def test_writer_rejects_bad_arguments(tmp_path):
    out = tmp_path / "bad.cbf"
    with pytest.raises(ValueError, match="storage"):
        StreamInfo("x", "ragged", np.float32, 3)
    with pytest.raises(ValueError, match="float32 or float64"):
        StreamInfo("x", "dense", np.int32, 3)
    with pytest.raises(ValueError, match="sample_dim"):
        StreamInfo("x", "dense", np.float32, 0)
    with pytest.raises(ValueError, match="unique"):
        CBFWriter(out, [("x", "dense", "float32", 1), ("x", "dense", "float32", 1)])
    with CBFWriter(out, [("x", "dense", "float32", 3), ("y", "sparse", "float64", 5)]) as w:
        with pytest.raises(ValueError, match=r"shape \(N, 3\)"):
            w.write({"x": np.zeros((2, 4)), "y": np.zeros((2, 5))})
        with pytest.raises(ValueError, match="no data for stream 'y'"):
            w.write({"x": np.zeros((2, 3))})
        with pytest.raises(ValueError, match="unknown stream"):
            w.write({"x": np.zeros((2, 3)), "y": np.zeros((2, 5)), "z": 1})
        with pytest.raises(ValueError, match=r"indices must be in \[0, 5\)"):
            w.write({"x": np.zeros((1, 3)), "y": ([1.0], [5], [1])})
        with pytest.raises(ValueError, match="add up"):
            w.write({"x": np.zeros((1, 3)), "y": ([1.0], [2], [2])})
        w.write({"x": np.zeros((0, 3)), "y": np.zeros((0, 5))})
    assert CBFReader(out).num_sequences == 1


def test_writer_is_atomic(tmp_path):
    out = tmp_path / "atomic.cbf"
    with pytest.raises(RuntimeError):
        with CBFWriter(out, [("x", "dense", "float32", 1)]) as w:
            w.write({"x": np.zeros((3, 1))})
            assert not out.exists()
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    w = CBFWriter(out, [("x", "dense", "float32", 1)])
    w.write({"x": np.zeros(3)})
    w.discard()
    assert list(tmp_path.iterdir()) == []


def test_empty_file_round_trip(tmp_path):
    out = tmp_path / "empty.cbf"
    CBFWriter(out, [("x", "sparse", "float64", 7)]).close()
    r = CBFReader(out)
    assert r.num_chunks == 0 and list(r) == [] and r.streams[0].sample_dim == 7
    assert out.stat().st_size == 12 + 16 + 1 + 4 + 1 + 1 + 4 + 8


# ---------------------------------------------------------------------------- corruption

def corrupt(src, dst, offset, data):
    raw = bytearray(src.read_bytes())
    raw[offset:offset + len(data)] = data
    dst.write_bytes(bytes(raw))
    return dst


def read_all(path):
    r = CBFReader(path)
    for i in range(r.num_chunks):
        r.read_chunk(i)


def test_truncated_files(golden, tmp_path):
    raw = (golden / "cbf" / "float.cbf").read_bytes()
    for cut in [0, 5, 11, 12, 40, 1000, 3296, 3300, len(raw) - 8, len(raw) - 1]:
        path = tmp_path / f"cut{cut}.cbf"
        path.write_bytes(raw[:cut])
        with pytest.raises(recio.errors.CBFError) as info:
            read_all(path)
        assert info.value.path == str(path)
        assert info.value.offset is not None and 0 <= info.value.offset <= cut
        assert f"byte {info.value.offset}" in str(info.value)


def test_truncated_after_open(golden, tmp_path):
    path = tmp_path / "shrinks.cbf"
    path.write_bytes((golden / "cbf" / "float.cbf").read_bytes())
    r = CBFReader(path)
    os.truncate(path, 500)
    with pytest.raises(recio.errors.CBFError, match="truncated") as info:
        r.read_chunk(0)
    assert info.value.offset == 500


def test_bad_magic_and_version(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    with pytest.raises(recio.errors.CBFError, match="bad magic") as info:
        CBFReader(corrupt(src, tmp_path / "m.cbf", 0, b"X"))
    assert info.value.offset == 0
    with pytest.raises(recio.errors.CBFError, match="version 2") as info:
        CBFReader(corrupt(src, tmp_path / "v.cbf", 8, struct.pack("<I", 2)))
    assert info.value.offset == 8


def test_wrong_sentinel(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    with pytest.raises(recio.errors.CBFError, match="sentinel") as info:
        CBFReader(corrupt(src, tmp_path / "s.cbf", 3296, b"\0"))
    assert info.value.offset == 3296
    # a header offset that points elsewhere finds no sentinel either
    size = src.stat().st_size
    with pytest.raises(recio.errors.CBFError, match="sentinel") as info:
        CBFReader(corrupt(src, tmp_path / "h.cbf", size - 8, struct.pack("<q", 3288)))
    assert info.value.offset == 3288
    for bad in (-5, size, 10**12):   # before the data, past the end
        with pytest.raises(recio.errors.CBFError, match=f"header offset {bad} is outside") as info:
            CBFReader(corrupt(src, tmp_path / "n.cbf", size - 8, struct.pack("<q", bad)))
        assert info.value.offset == size - 8


def chunk_entry_offset(reader, index):
    """File offset of a chunk-table entry: after the streams' descriptions."""
    header = 16 + sum(1 + 4 + len(s.name) + 1 + 4 for s in reader.streams)
    return reader.header_offset + header + index * CHUNK_ENTRY.size


@pytest.mark.parametrize("bad_offset", [5, 10**9, -1, 3296 + 1])
def test_chunk_offsets_out_of_range(golden, tmp_path, bad_offset):
    src = golden / "cbf" / "float.cbf"
    r = CBFReader(src)
    index = 19  # the last chunk: must end at the header
    at = chunk_entry_offset(r, index)
    path = corrupt(src, tmp_path / "o.cbf", at, struct.pack("<q", bad_offset))
    with pytest.raises(recio.errors.CBFError, match="chunk 19 offset") as info:
        CBFReader(path)
    assert info.value.offset == at


def test_chunk_offsets_out_of_order(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    r = CBFReader(src)
    at = chunk_entry_offset(r, 3)
    path = corrupt(src, tmp_path / "o.cbf", at, struct.pack("<q", 2000))  # past chunk 4 (1360)
    with pytest.raises(recio.errors.CBFError, match="chunk 3 offset 2000") as info:
        CBFReader(path)
    assert info.value.offset == at


def test_nnz_larger_than_chunk(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    r = CBFReader(src)
    chunk = r.chunks[1]                    # one sequence of 9 feature samples
    labels_at = chunk.offset + 4 + 4 + 9 * 3 * 4
    path = corrupt(src, tmp_path / "nnz.cbf", labels_at + 4, struct.pack("<i", 10**6))
    with pytest.raises(recio.errors.CBFError, match="nnz 1000000.*overrun the chunk") as info:
        CBFReader(path).read_chunk(1)
    assert info.value.offset == labels_at
    assert "chunk 1" in str(info.value) and str(path) in str(info.value)
    path = corrupt(src, tmp_path / "neg.cbf", labels_at + 4, struct.pack("<i", -3))
    with pytest.raises(recio.errors.CBFError, match="negative nnz") as info:
        CBFReader(path).read_chunk(1)
    assert info.value.offset == labels_at + 4


def test_dense_count_overruns_chunk(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    chunk = CBFReader(src).chunks[1]
    path = corrupt(src, tmp_path / "n.cbf", chunk.offset + 4, struct.pack("<I", 1000))
    with pytest.raises(recio.errors.CBFError, match="1000 samples of dim 3") as info:
        CBFReader(path).read_chunk(1)
    assert info.value.offset == chunk.offset + 4


def test_sparse_index_out_of_range(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    chunk = CBFReader(src).chunks[1]
    labels_at = chunk.offset + 4 + 4 + 9 * 3 * 4
    nnz = struct.unpack_from("<i", src.read_bytes(), labels_at + 4)[0]
    second_index = labels_at + 8 + nnz * 4 + 4
    path = corrupt(src, tmp_path / "i.cbf", second_index, struct.pack("<i", 5))
    with pytest.raises(recio.errors.CBFError, match=r"index 5 is outside \[0, 5\)") as info:
        CBFReader(path).read_chunk(1)
    assert info.value.offset == second_index


def test_sparse_counts_do_not_add_up(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    chunk = CBFReader(src).chunks[1]
    labels_at = chunk.offset + 4 + 4 + 9 * 3 * 4
    nnz = struct.unpack_from("<i", src.read_bytes(), labels_at + 4)[0]
    counts_at = labels_at + 8 + nnz * 8
    path = corrupt(src, tmp_path / "c.cbf", counts_at, struct.pack("<i", 7))
    with pytest.raises(recio.errors.CBFError, match="do not add up") as info:
        CBFReader(path).read_chunk(1)
    assert info.value.offset == counts_at


def test_chunk_sequence_count_overruns(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    r = CBFReader(src)
    at = chunk_entry_offset(r, 1) + 8
    path = corrupt(src, tmp_path / "s.cbf", at, struct.pack("<I", 10**6))
    with pytest.raises(recio.errors.CBFError, match="chunk 1:.*sample counts need") as info:
        CBFReader(path).read_chunk(1)
    assert info.value.offset == r.chunks[1].offset


def test_bad_stream_description(golden, tmp_path):
    src = golden / "cbf" / "float.cbf"
    header = CBFReader(src).header_offset
    with pytest.raises(recio.errors.CBFError, match="storage type 7") as info:
        CBFReader(corrupt(src, tmp_path / "st.cbf", header + 16, b"\x07"))
    assert info.value.offset == header + 16
    with pytest.raises(recio.errors.CBFError, match="header ends inside stream 0") as info:
        CBFReader(corrupt(src, tmp_path / "nl.cbf", header + 17, struct.pack("<I", 10**6)))
    assert info.value.offset == header + 21


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_damage_raises_only_cbf_error(golden, tmp_path_factory, data):
    """Any byte flipped anywhere: either the file still decodes, or CBFError with an offset."""
    raw = bytearray((golden / "cbf" / "double.cbf").read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    path = tmp_path_factory.mktemp("fuzz") / "f.cbf"
    path.write_bytes(bytes(raw))
    try:
        read_all(path)
    except recio.errors.CBFError as exc:
        assert exc.offset is not None and exc.path == str(path)


def test_read_header_reports_layout(golden):
    version, streams, chunks, header_offset, size = read_header(golden / "cbf" / "float.cbf")
    assert (version, header_offset, size) == (1, 3296, 3674)
    assert CBF_MAGIC == int.from_bytes(b"cntk_bin", "big")
    assert [s.name for s in streams] == ["features", "labels"] and len(chunks) == 20


def test_sparse_from_other_forms_is_checked(tmp_path):
    stream = StreamInfo("x", "sparse", np.float32, 4)
    with pytest.raises(ValueError, match="2-D"):
        encode_sparse(stream, np.zeros(4))
    with pytest.raises(ValueError, match=">= 0"):
        encode_sparse(stream, (np.array([1.0]), np.array([0]), np.array([2, -1])))
    with pytest.raises(ValueError, match="start with 0"):
        encode_sparse(stream, Sparse(np.array([1, 1]), np.array([0]), np.array([1.0]), 4))
    with pytest.raises(ValueError, match="dim 5"):
        encode_sparse(stream, Sparse.from_counts([1], [0], [1.0], 5))
