"""CBF <-> RecordIO sequence records: library conversion, round trips, the `recio convert` CLI."""
import json
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recio
from recio.sequence.cbf import CBFReader, CBFWriter
from recio.sequence.cbf_format import StreamInfo
from recio.sequence.convert import cbf_to_rec, convert, rec_to_cbf
from recio.sequence import Sparse, SequenceWriter, sample_counts, unpack_sequence
from recio.cli.numbers import Size
from recio.cli.convert import convert_cmd

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def assert_same_cbf_sequences(path_a, path_b):
    """Both files decode to the same sequences: values bit-exact, dtypes, shapes, counts."""
    a, b = CBFReader(path_a), CBFReader(path_b)
    assert a.streams == b.streams
    pairs = list(zip(a.sequences_with_counts(), b.sequences_with_counts()))
    assert len(pairs) == a.num_sequences == b.num_sequences
    for (count_a, x), (count_b, y) in pairs:
        assert count_a == count_b
        for name in x:
            if isinstance(x[name], Sparse):
                for field in ("indptr", "indices", "values"):
                    u, v = getattr(x[name], field), getattr(y[name], field)
                    assert u.dtype == v.dtype and u.tobytes() == v.tobytes()
            else:
                assert x[name].dtype == y[name].dtype and x[name].shape == y[name].shape
                assert x[name].tobytes() == y[name].tobytes()


@pytest.mark.parametrize("name", ["float.cbf", "double.cbf"])
def test_golden_round_trip(golden, tmp_path, name):
    src = golden / "cbf" / name
    summary = cbf_to_rec(src, tmp_path / "seq.rec")
    assert summary["sequences"] == 23 and summary["samples"] == 127
    assert (tmp_path / "seq.idx").exists() and (tmp_path / "seq.len").exists()
    # one sequence record per CBF sequence, readable with recio.sequence
    manifest = json.loads((golden / "cbf" / "manifest.json").read_text())
    records = list(recio.RecordReader(tmp_path / "seq.rec"))
    assert len(records) == 23
    dtype = np.float32 if name == "float.cbf" else np.float64
    for record, want in zip(records, manifest["sequences"]):
        seq = unpack_sequence(record)
        assert list(seq) == ["features", "labels"]
        np.testing.assert_array_equal(seq["features"], np.array(want["features"], dtype))
        assert isinstance(seq["labels"], Sparse) and seq["labels"].dim == 5
        assert seq["labels"].values.dtype == dtype
        assert np.diff(seq["labels"].indptr).tolist() == [len(s) for s in want["labels"]]
    assert sample_counts(tmp_path / "seq.rec").tolist() == \
        [s["num_samples"] for s in manifest["sequences"]]
    back = rec_to_cbf(tmp_path / "seq.rec", tmp_path / "back.cbf", chunk_size_bytes=600)
    assert back["sequences"] == 23 and back["chunks_written"] < 20
    assert_same_cbf_sequences(src, tmp_path / "back.cbf")


def test_round_trip_through_convert_is_byte_stable(golden, tmp_path):
    """CBF -> rec -> CBF -> rec: the second .rec equals the first, byte for byte."""
    convert(golden / "cbf" / "double.cbf", tmp_path / "a.rec")
    convert(tmp_path / "a.rec", tmp_path / "a.cbf", chunk_size_bytes=1000)
    convert(tmp_path / "a.cbf", tmp_path / "b.rec")
    for ext in (".rec", ".idx", ".len"):
        assert (tmp_path / f"a{ext}").read_bytes() == (tmp_path / f"b{ext}").read_bytes()


@st.composite
def cbf_files(draw):
    kinds = draw(st.lists(st.tuples(st.sampled_from(["dense", "sparse"]),
                                    st.sampled_from([np.float32, np.float64]),
                                    st.integers(1, 9)), min_size=1, max_size=3))
    streams = [StreamInfo(f"in{i}", *k) for i, k in enumerate(kinds)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    seqs = []
    for _ in range(draw(st.integers(1, 20))):
        seq = {}
        for s in streams:
            n = int(rng.integers(0, 6))
            if s.is_sparse:
                counts = rng.integers(0, min(3, s.sample_dim) + 1, size=n).astype(np.int32)
                idx = [rng.choice(s.sample_dim, c, replace=False) for c in counts]
                idx = np.concatenate(idx).astype(np.int32) if n else np.zeros(0, np.int32)
                seq[s.name] = Sparse.from_counts(counts, idx,
                                                 rng.standard_normal(len(idx)).astype(s.dtype),
                                                 s.sample_dim)
            else:
                seq[s.name] = rng.standard_normal((n, s.sample_dim)).astype(s.dtype)
        seqs.append(seq)
    return streams, seqs, draw(st.sampled_from([1, 200, 1 << 20]))


@SETTINGS
@given(cbf_files())
def test_random_round_trip_cbf_rec_cbf(tmp_path, data):
    streams, seqs, chunk = data
    src = tmp_path / "src.cbf"
    with CBFWriter(src, streams, chunk_size_bytes=chunk) as w:
        for seq in seqs:
            w.write(seq)
    cbf_to_rec(src, tmp_path / "mid.rec")
    rec_to_cbf(tmp_path / "mid.rec", tmp_path / "out.cbf", chunk_size_bytes=chunk)
    assert_same_cbf_sequences(src, tmp_path / "out.cbf")
    # same chunk size, same sequences: the very same file
    assert (tmp_path / "out.cbf").read_bytes() == src.read_bytes()


def test_alias_renames_streams_in_records(golden, tmp_path):
    cbf_to_rec(golden / "cbf" / "float.cbf", tmp_path / "a.rec", alias={"x": "features"})
    first = unpack_sequence(next(iter(recio.RecordReader(tmp_path / "a.rec"))))
    assert list(first) == ["x", "labels"]


def test_progress_covers_the_input(golden, tmp_path):
    seen = []
    cbf_to_rec(golden / "cbf" / "float.cbf", tmp_path / "p.rec", progress=seen.append)
    reader = CBFReader(golden / "cbf" / "float.cbf")
    assert sum(seen) == reader.header_offset - 12 and len(seen) == reader.num_chunks
    seen.clear()
    rec_to_cbf(tmp_path / "p.rec", tmp_path / "p.cbf", progress=seen.append)
    assert sum(seen) == (tmp_path / "p.rec").stat().st_size


def test_meta_count_other_than_largest_stream_warns(tmp_path):
    src = tmp_path / "meta.cbf"
    with CBFWriter(src, [("x", "dense", "float32", 2)]) as w:
        w.write({"x": np.zeros((3, 2))}, num_samples=7)
    with pytest.warns(UserWarning, match="meta sample count"):
        cbf_to_rec(src, tmp_path / "meta.rec")


def test_rec_to_cbf_rejects_what_cbf_cannot_hold(tmp_path):
    rec = tmp_path / "ints.rec"
    with SequenceWriter(rec) as w:
        w.write({"tokens": np.arange(6, dtype=np.int32).reshape(3, 2)})
    with pytest.raises(recio.errors.CBFError,
                       match="int32; CBF stores only float32 or float64") as info:
        rec_to_cbf(rec, tmp_path / "ints.cbf")
    assert info.value.offset == 0 and info.value.path == str(rec)
    assert not (tmp_path / "ints.cbf").exists()

    mixed = tmp_path / "mixed.rec"
    with recio.RecordWriter(mixed) as w:
        from recio.sequence import pack_sequence
        w.write(pack_sequence({"x": np.zeros((1, 2), np.float32)}))
        second = w.write(pack_sequence({"x": np.zeros((1, 3), np.float32)}))
    with pytest.raises(recio.errors.SequenceError,
                       match="dim 3 here but dense float32 dim 2") as info:
        rec_to_cbf(mixed, tmp_path / "mixed.cbf")
    assert info.value.offset == second
    assert list(p.name for p in tmp_path.iterdir() if p.suffix == ".cbf" or
                p.name.endswith(".tmp")) == []

    images = tmp_path / "plain.rec"
    with recio.RecordWriter(images) as w:
        w.write(b"not a sequence record")
    with pytest.raises(recio.errors.SequenceError, match="not a sequence record") as info:
        rec_to_cbf(images, tmp_path / "plain.cbf")
    assert info.value.offset == 0

    empty = tmp_path / "empty.rec"
    empty.write_bytes(b"")
    with pytest.raises(recio.errors.SequenceError, match="no sequence records"):
        rec_to_cbf(empty, tmp_path / "empty.cbf")


def test_convert_direction_from_extensions(golden, tmp_path):
    with pytest.raises(ValueError, match="cannot tell the direction"):
        convert(golden / "cbf" / "float.cbf", tmp_path / "x.cbf")
    with pytest.raises(ValueError, match="alias"):
        convert(tmp_path / "x.rec", tmp_path / "x.cbf", alias={"a": "b"})


def test_corrupt_cbf_fails_before_writing(golden, tmp_path):
    raw = bytearray((golden / "cbf" / "float.cbf").read_bytes())
    raw[804 + 4:804 + 8] = (10**5).to_bytes(4, "little")   # chunk 1: dense N overruns
    bad = tmp_path / "bad.cbf"
    bad.write_bytes(bytes(raw))
    with pytest.raises(recio.errors.CBFError, match="chunk 1") as info:
        cbf_to_rec(bad, tmp_path / "bad.rec")
    assert info.value.offset == 808
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.cbf"]


# ---------------------------------------------------------------------------- MinibatchSource

def test_minibatch_source_reads_cbf_like_the_converted_records(golden, tmp_path):
    from recio.sequence.minibatch import cbf_minibatch_source as minibatch_source

    cbf_to_rec(golden / "cbf" / "double.cbf", tmp_path / "d.rec")
    a = minibatch_source(golden / "cbf" / "double.cbf", randomize=False)
    b = recio.MinibatchSource(str(tmp_path / "d.rec"), randomize=False)
    while True:
        x, y = a.next_minibatch(12), b.next_minibatch(12)
        if x is None:
            assert y is None
            break
        assert x.ids.tolist() == y.ids.tolist() and x.num_samples == y.num_samples
        for name in ("features", "labels"):
            px, mx = x.padded(name)
            py, my = y.padded(name)
            assert px.dtype == py.dtype == np.float64
            np.testing.assert_array_equal(px, py)
            np.testing.assert_array_equal(mx, my)


def test_minibatch_source_cntk_parameters(golden):
    from recio.sequence.minibatch import cbf_minibatch_source as minibatch_source

    path = golden / "cbf" / "float.cbf"
    reader = CBFReader(path)

    def sweep(**kw):
        src = minibatch_source(path, **kw)
        ids, samples = [], 0
        while (mb := src.next_minibatch(10)) is not None:
            ids += mb.ids.tolist()
            samples += mb.num_samples
        return src, ids, samples

    src, ids, samples = sweep(randomization_window=20, randomization_seed=5,
                              keep_data_in_memory=True)
    assert sorted(ids) == list(range(23)) and samples == reader.num_samples == 127
    # the CBF chunks are the randomization chunks
    assert src.corpus.num_chunks == reader.num_chunks
    assert src.chunk_samples.tolist() == [c.num_samples for c in reader.chunks]
    assert len(src.corpus._cache) == reader.num_chunks  # keep_data_in_memory kept them all
    assert sweep(randomization_window=20, randomization_seed=5)[1] == ids
    assert sweep(randomization_window=20, randomization_seed=6)[1] != ids
    assert sweep(randomize=False)[1] == list(range(23))
    # alias and defines_mb_size (counts per stream: 'labels' has fewer samples)
    src = minibatch_source(path, randomize=False, alias={"y": "labels"}, defines_mb_size="y")
    mb = src.next_minibatch(11)
    assert mb.samples_per_stream == {"features": 9 + 5, "y": 9 + 2}
    assert mb.num_samples == 11 and mb.ids.tolist() == [0, 1]
    # by default the stored meta count (largest stream) decides: 9 + 5 > 11
    assert minibatch_source(path, randomize=False).next_minibatch(11).ids.tolist() == [0]


# ---------------------------------------------------------------------------- CLI

@pytest.mark.parametrize("text,value", [("600", 600), ("64K", 65536), ("32MB", 32_000_000),
                                        ("32MiB", 32 << 20), ("32m", 32 << 20), ("1.5K", 1536),
                                        ("2GB", 2 * 10**9)])
def test_parse_size(text, value):
    assert Size().convert(text, None, None) == value


@pytest.mark.parametrize("text", ["", "MB", "12XB", "-3", "0"])
def test_parse_size_rejects(text):
    import click

    with pytest.raises(click.BadParameter, match="expected a size such as 600 \\(bytes\\), 64K"):
        Size().convert(text, None, None)


def test_cli_both_directions(golden, tmp_path):
    runner = CliRunner()
    rec, cbf = tmp_path / "s.rec", tmp_path / "s.cbf"
    result = runner.invoke(convert_cmd, [str(golden / "cbf" / "float.cbf"), str(rec), "-q"])
    assert result.exit_code == 0, result.output
    assert "23 sequences" in result.output
    result = runner.invoke(convert_cmd, [str(rec), str(cbf), "--chunk-size", "1K", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["direction"] == "rec->cbf" and summary["sequences"] == 23
    assert summary["chunk_size_bytes"] == 1024
    assert all(c.size <= 1024 for c in CBFReader(cbf).chunks)
    assert_same_cbf_sequences(golden / "cbf" / "float.cbf", cbf)


def test_cli_errors_are_one_line_exit_2(golden, tmp_path):
    runner = CliRunner()
    raw = bytearray((golden / "cbf" / "float.cbf").read_bytes())
    raw[3296] ^= 0xFF                        # the header sentinel
    bad = tmp_path / "bad.cbf"
    bad.write_bytes(bytes(raw))
    cases = [
        ([str(bad), str(tmp_path / "o.rec")], "byte 3296"),
        ([str(golden / "cbf" / "float.cbf"), str(tmp_path / "o.txt")], "direction"),
        ([str(tmp_path / "missing.cbf"), str(tmp_path / "o.rec")], "no such file"),
        ([str(golden / "cbf" / "float.cbf"), str(tmp_path / "o.rec"), "--alias", "x=nope"],
         "no stream 'nope'"),
        ([str(golden / "cbf" / "float.cbf"), str(tmp_path / "o.rec"), "--alias", "bad"],
         "NEW=OLD"),
        ([str(golden / "cbf" / "float.cbf"), str(tmp_path / "o.rec"), "--chunk-size", "lots"],
         "expected a chunk size such as 600 (bytes), 64K, 32MB, 32MiB or 50GB, got 'lots'"),
        ([str(golden / "cbf" / "float.cbf"), str(tmp_path / "o.rec"), "--chunk-size", "1K"],
         "use it with IN.rec OUT.cbf"),
    ]
    for args, needle in cases:
        result = runner.invoke(convert_cmd, args)
        assert result.exit_code == 2, (args, result.output)
        assert needle in result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "o.rec").exists()


@pytest.mark.slow
def test_console_script(golden, tmp_path, script):
    rec = tmp_path / "c.rec"
    done = subprocess.run([*script("recio"), "convert", str(golden / "cbf" / "double.cbf"),
                           str(rec), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sequences"] == 23
    done = subprocess.run([*script("recio"), "convert", str(rec), str(tmp_path / "c.cbf"),
                           "--chunk-size", "32MB"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert CBFReader(tmp_path / "c.cbf").num_chunks == 1
    done = subprocess.run([*script("recio"), "convert", str(tmp_path / "c.cbf"),
                           str(tmp_path / "x.idx")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("Error: ")


def test_minibatch_source_on_cbf_path_honours_defines_mb_size(golden):
    path = str(golden / "cbf" / "float.cbf")
    mb = recio.MinibatchSource(path, randomize=False, defines_mb_size="labels").next_minibatch(11)
    assert mb.ids.tolist() == [0, 1] and mb.num_samples == 11
    assert recio.MinibatchSource(path, randomize=False).next_minibatch(11).ids.tolist() == [0]


class _OneCountCorpus:
    """A corpus that knows only one sample count per sequence (as a plain CBF reader does)."""
    stream_names = ["a", "b"]
    num_chunks = 1

    def chunk_sample_counts(self, i):
        return np.array([2, 3])

    def read_chunk(self, i):
        return [{"a": np.zeros((2, 1)), "b": np.zeros((1, 1))},
                {"a": np.zeros((3, 1)), "b": np.zeros((1, 1))}]


def test_defines_mb_size_needs_per_stream_counts():
    with pytest.raises(ValueError, match="defines_mb_size='b' needs each stream"):
        recio.MinibatchSource(_OneCountCorpus(), defines_mb_size="b")
    assert recio.MinibatchSource(_OneCountCorpus(), randomize=False).next_minibatch(5).num_samples == 5
