"""InputSplit: MXNet's partitions (golden), each record in exactly one part, streaming, indexes."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recio
from recio import portable
from recio.records import framing
from recio.errors import IndexFileError, RecordIOError
from recio.records.source import expand_source
from recio.records.split import (InputSplit, iter_span, nominal_range, record_heads,
                                 seek_record_head, split_boundaries)

MAGIC = framing.MAGIC_BYTES


def write_rec(path, payloads):
    with open(path, "wb") as f:
        for p in payloads:
            f.write(framing.encode_record(p))
    return str(path)


def write_idx(rec_path, keys=None):
    offsets = recio.build_index(rec_path)
    keys = list(range(len(offsets))) if keys is None else keys
    recio.records.write_index(os.path.splitext(rec_path)[0] + ".idx", keys, offsets)


def label_keys(records):
    return [int(recio.unpack(r)[0].label) for r in records]


@pytest.fixture(scope="module")
def golden_split(golden):
    manifest = json.loads((golden / "split" / "manifest.json").read_text())
    files = [str(golden / "split" / name) for name in manifest["files"]]
    return files, manifest


# -- golden: what MXNet's InputSplit delivers ------------------------------------------------------
def test_golden_every_part_matches_mxnet(golden_split):
    files, manifest = golden_split
    source = ";".join(files)
    assert len(manifest["partitions"]) == 36  # n = 1..8
    for kn, keys in manifest["partitions"].items():
        k, n = map(int, kn.split("/"))
        part = InputSplit(source, k, n)
        assert label_keys(part) == keys, kn
        assert part.count_records() == len(keys), kn


def _part_keys(split):
    """A worker's job: the keys of the records its InputSplit reads from where it stands."""
    return label_keys(split)


def test_golden_parts_read_in_worker_processes(golden_split, start_method):
    """InputSplits handed to a pool of worker processes, as a data loader does: each pickled
    (a spawned worker, with nothing of the parent's, opens the files itself), one of them
    already read from in the parent (a pickled split reads its part from the start, as
    test_pickles_mid_epoch says). Together the workers read MXNet's partition."""
    import multiprocessing

    files, manifest = golden_split
    splits = [InputSplit(files, k, 3) for k in range(3)]
    want = [manifest["partitions"][f"{k}/3"] for k in range(3)]
    assert label_keys([splits[1].read()]) == want[1][:1]  # the parent's file is open
    with multiprocessing.Pool(2) as pool:
        got = pool.map(_part_keys, splits, chunksize=1)
    assert got == want


@pytest.mark.parametrize("chunk_size", [8, 100, 1024])
def test_golden_with_chunks_smaller_than_records(golden_split, chunk_size):
    files, manifest = golden_split
    for n in (3, 7, 8):
        parts = InputSplit.all_parts(files, n, chunk_size=chunk_size)
        for k, part in enumerate(parts):
            assert label_keys(part) == manifest["partitions"][f"{k}/{n}"]


def test_golden_holds_multipart_records(golden_split):
    files, _ = golden_split
    data = open(files[0], "rb").read()
    # some records were cut at an aligned magic: continuation parts exist
    assert any((int.from_bytes(data[i + 4:i + 8], "little") >> 29) == 3
               for i in range(0, len(data) - 8, 4) if data[i:i + 4] == MAGIC)


def test_all_parts_agrees_with_single_parts(golden_split):
    files, _ = golden_split
    for n in (1, 2, 5, 8):
        together = InputSplit.all_parts(files, n)
        for k in range(n):
            alone = InputSplit(files, k, n)
            assert (alone.begin, alone.end) == (together[k].begin, together[k].end)


def test_spans_cover_the_stream_once(golden_split):
    files, _ = golden_split
    sizes = [os.path.getsize(f) for f in files]
    parts = InputSplit.all_parts(files, 5)
    assert parts[0].begin == 0 and parts[-1].end == sum(sizes)
    for a, b in zip(parts, parts[1:]):
        assert a.end == b.begin
    per_file = {f: 0 for f in files}
    for p in parts:
        assert sum(s.end - s.start for s in p.spans) == p.nbytes
        for s in p.spans:
            per_file[s.path] += s.end - s.start
    assert [per_file[f] for f in files] == sizes
    assert split_boundaries(files, 5) == [p.begin for p in parts] + [sum(sizes)]


# -- arithmetic and resync -------------------------------------------------------------------------
def test_nominal_range_is_dmlc_arithmetic():
    # step = ceil(T/n) rounded up to a multiple of 4
    assert nominal_range(100, 0, 3) == (0, 36)
    assert nominal_range(100, 2, 3) == (72, 100)
    assert nominal_range(10, 3, 4) == (10, 10)  # step 4: 12 > 10, empty
    assert nominal_range(0, 0, 2) == (0, 0)
    with pytest.raises(ValueError, match="part_index"):
        nominal_range(10, 2, 2)
    with pytest.raises(ValueError, match="num_parts"):
        nominal_range(10, 0, 0)


def test_seek_record_head_across_window_edges(tmp_path):
    payloads = [b"x" * 4090, MAGIC * 3 + b"tail", b"y" * 10000, b""]
    path = write_rec(tmp_path / "a.rec", payloads)
    heads = list(record_heads(path))
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        for pos in range(0, size + 1, 4):
            expect = next((h for h in heads if h >= pos), size)
            assert seek_record_head(fd, size, pos, max_window=16) == expect, pos
    finally:
        os.close(fd)


def test_boundaries_read_only_near_themselves(tmp_path, monkeypatch):
    path = write_rec(tmp_path / "big.rec", [bytes([i % 251]) * 3000 for i in range(2000)])
    read = []
    real = portable.read_at  # os.pread, or its fallback where there is none

    def counting(fd, n, off):
        data = real(fd, n, off)
        read.append(len(data))
        return data

    monkeypatch.setattr(portable, "read_at", counting)
    InputSplit.all_parts(path, 64)
    assert read
    assert sum(read) < 64 * 8192  # a few KB per boundary, not the 6 MB file


# -- property: every record in exactly one part, in order ------------------------------------------
payload = st.one_of(
    st.binary(max_size=5000),
    st.lists(st.sampled_from([MAGIC, b"\0\0\0\0", b"ab", b"\x0a\x23", b"xyz!"]),
             max_size=12).map(b"".join),
    st.integers(0, 1200).map(lambda n: (MAGIC + b"1234") * n),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.lists(payload, max_size=6), min_size=1, max_size=4),
       chunk_size=st.sampled_from([8, 64, 1000, 1 << 20]))
def test_concatenation_of_parts_is_the_input(tmp_path_factory, files, chunk_size):
    folder = tmp_path_factory.mktemp("prop")
    paths = [write_rec(folder / f"f{i}.rec", recs) for i, recs in enumerate(files)]
    expected = [r for recs in files for r in recs]
    for n in range(1, 2 * len(expected) + 2):
        got = []
        for part in InputSplit.all_parts(paths, n, chunk_size=chunk_size):
            records = list(part)
            assert part.count_records() == len(records)
            got.extend(records)
        assert got == expected, n
    if expected:  # one part alone, not computed together with the others
        n = len(expected)
        assert [r for k in range(n) for r in InputSplit(paths, k, n, chunk_size=chunk_size)] \
            == expected


# -- sources ---------------------------------------------------------------------------------------
def test_source_forms_and_empty_files(tmp_path):
    a = write_rec(tmp_path / "a.rec", [b"1", b"2"])
    write_rec(tmp_path / "b.rec", [])  # empty: skipped
    c = write_rec(tmp_path / "c.rec", [b"3"])
    (tmp_path / "c.idx").write_text("0\t0\n")  # not a .rec: ignored in a directory
    want = [b"1", b"2", b"3"]
    for source in ([a, str(tmp_path / "b.rec"), c], f"{a};{tmp_path / 'b.rec'};{c}",
                   str(tmp_path), str(tmp_path / "*.rec")):
        split = InputSplit(source)
        assert list(split) == want
        assert split.files == [a, c]
    assert expand_source(str(tmp_path)) == [a, str(tmp_path / "b.rec"), c]


def test_missing_sources(tmp_path):
    with pytest.raises(FileNotFoundError):
        InputSplit(str(tmp_path / "nope.rec"))
    with pytest.raises(FileNotFoundError):
        InputSplit(str(tmp_path / "*.rec"))
    with pytest.raises(ValueError, match="chunk_size"):
        InputSplit(write_rec(tmp_path / "a.rec", [b"x"]), chunk_size=4)


def test_read_and_reset(tmp_path):
    path = write_rec(tmp_path / "a.rec", [b"a", b"b", b"c"])
    split = InputSplit(path)
    assert [split.read(), split.read()] == [b"a", b"b"]
    split.reset()
    assert [split.read(), split.read(), split.read(), split.read()] == [b"a", b"b", b"c", None]


def test_corruption_raises_with_offset(tmp_path):
    path = write_rec(tmp_path / "a.rec", [b"a" * 40, b"b" * 40, b"c" * 40])
    data = bytearray(open(path, "rb").read())
    data[48:52] = b"JUNK"  # the second record's magic
    open(path, "wb").write(bytes(data))
    with pytest.raises(RecordIOError) as info:
        list(InputSplit(path))
    assert info.value.offset == 48 and info.value.path == path
    data[48:52] = MAGIC
    with open(path, "wb") as f:
        f.write(bytes(data[:120]))  # truncated inside the third record
    with pytest.raises(recio.errors.TruncatedFileError,
                       match="it ends 16 bytes into the data of the record at byte 96"):
        list(iter_span(path, 0, 120))


# -- indexed split ---------------------------------------------------------------------------------
@pytest.fixture
def indexed(tmp_path):
    paths = []
    key = 0
    for i, count in enumerate([7, 0, 3, 10]):
        recs = [b"%d" % (key + j) * (1 + (key + j) % 50) for j in range(count)]
        path = write_rec(tmp_path / f"s{i}.rec", recs)
        if count:
            write_idx(path, list(range(key, key + count)))
        key += count
        paths.append(path)
    return paths, key


def test_records_balance(indexed):
    paths, total = indexed
    for n in (1, 3, 4, 6, 25):
        parts = InputSplit.all_parts(paths, n, balance="records")
        counts = [p.count_records() for p in parts]
        step = -(-total // n)
        assert counts == [max(0, min(step, total - k * step)) for k in range(n)]
        everything = [r for p in parts for r in p]
        assert len(everything) == total
        assert everything == [r for p in InputSplit.all_parts(paths, 1) for r in p]
        for p in parts:  # the byte range holds exactly the part's records
            assert list(p) == [r for s in p.spans for r in iter_span(s.path, s.start, s.end)]


def test_shuffle_is_a_deterministic_permutation_per_epoch(indexed):
    paths, total = indexed
    plain = list(InputSplit(paths, 1, 2, balance="records"))
    a = InputSplit(paths, 1, 2, balance="records", shuffle=True, seed=3)
    b = InputSplit(paths, 1, 2, balance="records", shuffle=True, seed=3)
    e0 = list(a)
    assert e0 == list(b) and sorted(e0) == sorted(plain) and e0 != plain
    a.reset()
    e1 = list(a)
    assert sorted(e1) == sorted(plain) and e1 != e0
    a.set_epoch(0)
    assert list(a) == e0
    other_seed = list(InputSplit(paths, 1, 2, balance="records", shuffle=True, seed=4))
    assert other_seed != e0
    # byte-balanced parts can shuffle too (offsets found by hopping over headers)
    bytes_part = InputSplit(paths, 0, 2, shuffle=True, seed=1)
    assert sorted(bytes_part) == sorted(InputSplit(paths, 0, 2))


def test_missing_index_is_scanned_with_a_warning(tmp_path):
    path = write_rec(tmp_path / "a.rec", [b"x", b"y", b"z"])
    with pytest.warns(UserWarning, match="recio index"):
        parts = InputSplit.all_parts(path, 2, balance="records")
    assert [list(p) for p in parts] == [[b"x", b"y"], [b"z"]]


def test_corrupt_index_is_an_index_error(tmp_path):
    path = write_rec(tmp_path / "a.rec", [b"x", b"y"])
    (tmp_path / "a.idx").write_text("0\t0\n1\tbanana\n")
    with pytest.raises(IndexFileError):
        InputSplit(path, balance="records")
    (tmp_path / "a.idx").write_text("0\t0\n1\t0\n")
    with pytest.raises(IndexFileError, match="entries 1 and 2 both point at the record"):
        InputSplit(path, balance="records")


def test_pickles_mid_epoch(tmp_path):
    import pickle

    path = write_rec(tmp_path / "a.rec", [b"a", b"b", b"c"])
    split = InputSplit(path, 0, 1)
    assert split.read() == b"a"
    clone = pickle.loads(pickle.dumps(split))
    assert list(clone) == [b"a", b"b", b"c"]
    assert (clone.begin, clone.end) == (split.begin, split.end)
