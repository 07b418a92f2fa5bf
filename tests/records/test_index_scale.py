"""The ``.idx`` at scale: the vectorised parser against a plain reference, the sidecar cache,
arrays shared with forked workers, and the list/dict views of ``recio.mx``."""
import io
import mmap
import multiprocessing
import os
import pickle
import struct
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import recio
from recio.records import index as index_mod, index_cache, index_format
from recio import mx
from recio.errors import IndexFileError
from recio.records.index import open_index, read_index
from recio.records.index_cache import CACHE_SUFFIX
from recio.records.index_format import write_index
from recio.records.indexed import IndexedRecordReader


# -- the reference: the straightforward parse (read_index as it was, one line at a time) -------
def reference_parse(data, key_type=int, rec_size=None):
    """``(keys, offsets)`` or the 1-based number of the line that must be rejected.

    This is the old loop verbatim, plus one rule the arrays need: an offset must leave room
    for a record header below 2**63 (the largest file size), which only matters without a
    ``rec_size`` (with one, such offsets were already outside the file)."""
    keys, offsets = [], []
    for number, raw in enumerate(io.BytesIO(data), 1):
        line = raw.strip()
        if not line:
            continue
        fields = line.split(b"\t")
        if len(fields) != 2:
            return number
        try:
            key = key_type(fields[0].strip().decode())
            offset = int(fields[1])
        except (ValueError, UnicodeDecodeError):
            return number
        if offset < 0 or offset & 3 or (rec_size is not None and offset + 8 > rec_size) \
                or offset + 8 > 2 ** 63:
            return number
        keys.append(key)
        offsets.append(offset)
    return keys, offsets


def as_int64(text):
    try:
        value = int(text)
    except ValueError:
        return None
    return value if -2 ** 63 <= value < 2 ** 63 else None


def parse_with_recio(path, key_type, rec_size, chunk, cache=False):
    """``(index, None)`` or ``(None, line number of the IndexFileError)``."""
    with mock.patch.object(index_format, "_CHUNK_BYTES", chunk):
        try:
            return open_index(path, key_type, rec_size=rec_size, cache=cache), None
        except IndexFileError as exc:
            assert exc.path == str(path)
            assert str(path) in str(exc) and f"line {exc.line}" in str(exc)
            return None, exc.line


KEY_TEXT = st.one_of(
    st.integers(-10 ** 19, 10 ** 19).map(str),
    st.sampled_from(["007", "-0", "+5", "1_0", "\u0663", " 5", "5 ", "--1", "-", "a", "img 1.jpg",
                     "", "\x0b3", "99999999999999999999", "9223372036854775808", "١٢"]),
    st.text(max_size=4),
)
OFFSET_TEXT = st.one_of(
    st.integers(0, 300).map(lambda v: str(4 * v)),
    st.integers(-5, 2 ** 64 + 5).map(str),
    st.sampled_from(["18446744073709551615", "9223372036854775800", "9223372036854775804",
                     "999999999999999996", "1" * 25, "0x10", " 8", "8 ", "+8", "4_0", "", "00016",
                     "-0", "\u0668"]),
)
CANONICAL = st.tuples(st.integers(0, 10 ** 6), st.integers(0, 300)).map(
    lambda t: f"{t[0]}\t{4 * t[1]}".encode())
WEIRD = st.one_of(
    st.tuples(KEY_TEXT, OFFSET_TEXT).map(lambda t: f"{t[0]}\t{t[1]}".encode("utf-8", "replace")),
    st.tuples(KEY_TEXT, OFFSET_TEXT, KEY_TEXT).map(lambda t: "\t".join(t).encode()),
    st.sampled_from([b"", b"\r", b" ", b"\t", b"5", b"\t8", b"5\t", b"\xff\t4", b"\xc3\xa9\t4",
                     b"5\t\t8", b"5\r\t8", b"\x00\t4", b"-5\t4", b"1e3\t4"]),
    st.binary(max_size=6),
)
ENDING = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b" \n", b"\t\n", b"\r\r\n"])


@st.composite
def idx_texts(draw):
    """An ``.idx`` text: mostly canonical lines (keys 0..n-1 or random), some of anything."""
    count = draw(st.integers(0, 40))
    sequential = draw(st.booleans())
    weird_rate = draw(st.sampled_from([0.0, 0.05, 0.3]))
    lines = []
    for i in range(count):
        if draw(st.floats(0, 1)) < weird_rate:
            body = draw(WEIRD)
        else:
            body = draw(CANONICAL)
            if sequential:
                body = str(i).encode() + body[body.index(b"\t"):]
        lines.append(body + (draw(ENDING) if weird_rate else b"\n"))
    data = b"".join(lines)
    if data and draw(st.booleans()):
        data = data.rstrip(b"\n")  # no final newline
    return data


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=idx_texts(), rec_size=st.one_of(st.none(), st.integers(0, 1300)),
       chunk=st.sampled_from([1, 7, 64, 1 << 20]))
def test_parser_equals_reference_int_keys(tmp_path_factory, data, rec_size, chunk):
    path = tmp_path_factory.mktemp("p") / "x.idx"
    path.write_bytes(data)
    expected = reference_parse(data, int, rec_size)
    index, line = parse_with_recio(path, int, rec_size, chunk)
    if isinstance(expected, int):
        assert line == expected
        return
    assert line is None
    assert index.key_list() == expected[0] and index.offsets.tolist() == expected[1]
    assert all(type(k) is int for k in index.key_list())
    assert read_index(path, rec_size=rec_size) == expected


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=idx_texts(), rec_size=st.one_of(st.none(), st.integers(0, 1300)),
       chunk=st.sampled_from([1, 7, 64, 1 << 20]))
def test_parser_equals_reference_str_and_offset_only(tmp_path_factory, data, rec_size, chunk):
    path = tmp_path_factory.mktemp("p") / "x.idx"
    path.write_bytes(data)
    expected = reference_parse(data, str, rec_size)
    for key_type in (str, None):  # None: offsets only, the keys validated as str does
        index, line = parse_with_recio(path, key_type, rec_size, chunk)
        if isinstance(expected, int):
            assert line == expected
            continue
        assert line is None and index.offsets.tolist() == expected[1]
        if key_type is str:
            assert index.key_list() == expected[0]
        else:  # integer keys (int() of the text, within int64) are kept, and cacheable
            ints = [as_int64(k) for k in expected[0]]
            assert index.has_keys == (None not in ints)
            if index.has_keys:
                assert index.key_list() == ints


@pytest.mark.parametrize("bad, why", [
    (b"7\n", "wrong field count"),
    (b"7\t8\t9\n", "wrong field count"),
    (b"7\tzero\n", "non-numeric offset"),
    (b"7\t-8\n", "negative offset"),
    (b"7\t6\n", "not 4-aligned"),
    (b"7\t4000000\n", "outside the .rec"),
    (b"7\t18446744073709551615\n", "MXNet's tell() == -1"),
    (b"7\t" + b"4" * 30 + b"\n", "over-long offset"),
    (b"7\t" + b"9" * 5000 + b"\n", "longer than int() reads"),
    (b"\xff\xfe\x00garbage\t12\n", "garbage bytes"),
    (b"7" * 30 + b"x\t8\n", "non-numeric key"),
])
@pytest.mark.parametrize("where", [1, 2, 150_001])
def test_bad_line_reports_its_number(tmp_path, bad, why, where):
    good = b"".join(b"%d\t%d\n" % (i, 16 * i) for i in range(where - 1))
    data = good + bad + b"".join(b"%d\t%d\n" % (i, 16 * i) for i in range(10))
    (tmp_path / "x.idx").write_bytes(data)
    with pytest.raises(IndexFileError) as info:
        open_index(tmp_path / "x.idx", rec_size=3_000_000, cache=True)
    assert info.value.line == where, why
    assert info.value.path == str(tmp_path / "x.idx")
    assert not (tmp_path / ("x.idx" + CACHE_SUFFIX)).exists()


def test_no_final_newline_crlf_and_blank_lines(tmp_path):
    (tmp_path / "x.idx").write_bytes(b"\n0\t0\r\n\r\n1\t16\n\n2\t32")
    index = open_index(tmp_path / "x.idx")
    assert index.is_range and index.key_list() == [0, 1, 2]
    assert index.offsets.tolist() == [0, 16, 32]


@pytest.mark.slow
def test_large_index_in_many_blocks(tmp_path):
    """Range keys across block boundaries; keys that stop being a range; duplicates."""
    n = 300_000
    offsets = np.arange(n, dtype=np.int64) * 12
    write_index(tmp_path / "r.idx", range(n), offsets)
    index = open_index(tmp_path / "r.idx", cache=False)
    assert index.is_range and index.base == 0 and len(index) == n
    assert np.array_equal(index.offsets, offsets)
    keys = np.arange(n, dtype=np.int64)
    keys[250_000] = 7  # a duplicate late in the file: the last offset wins
    write_index(tmp_path / "d.idx", keys, offsets)
    index = open_index(tmp_path / "d.idx", cache=False)
    assert not index.is_range and index.key_list() == keys.tolist()
    assert index.duplicates == 1 and index.offset_of(7) == 250_000 * 12
    assert 250_000 not in index and index.offset_of(np.int64(249_999)) == 249_999 * 12


# -- the sidecar cache -------------------------------------------------------------------------
def make_rec(folder, keys, name="d"):
    """A .rec of 8-byte records (payload = the key) and its .idx; returns the paths."""
    rec, idx = folder / f"{name}.rec", folder / f"{name}.idx"
    with recio.IndexedRecordWriter(rec, idx) as writer:
        for k in keys:
            writer.write(k, struct.pack("<q", k))
    return rec, idx


def parse_forbidden():
    return mock.patch.object(index_mod, "parse_index_file", side_effect=AssertionError("parsed"))


def test_cache_written_then_mapped(tmp_path):
    rec, idx = make_rec(tmp_path, range(50))
    first = open_index(idx, cache=True)
    cache = tmp_path / ("d.idx" + CACHE_SUFFIX)
    assert cache.exists() and first.cache_path == str(cache)
    with parse_forbidden():
        again = open_index(idx, cache=True)
        reader = IndexedRecordReader(rec, cache=True)
        assert [struct.unpack("<q", reader[k])[0] for k in range(50)] == list(range(50))
    base = again.offsets.base  # NumPy < 1.23 gives the map itself, newer ones a memoryview of it
    assert isinstance(getattr(base, "obj", base), mmap.mmap) and not again.offsets.flags.writeable
    assert again.is_range and again.offsets.tolist() == first.offsets.tolist()
    assert sorted(os.listdir(tmp_path)) == ["d.idx", "d.idx" + CACHE_SUFFIX, "d.rec"]


@pytest.mark.parametrize("keys", [[5, 3, 9, 3, 1], [10, 20, 30], [-4, -2, 0]])
def test_cache_of_int_keys(tmp_path, keys):
    rec, idx = make_rec(tmp_path, keys)
    parsed = open_index(idx, cache=False)
    open_index(idx, cache=True)
    with parse_forbidden():
        cached = open_index(idx, cache=True)
    assert cached.key_list() == parsed.key_list() == keys
    for k in set(keys):
        assert cached.offset_of(k) == parsed.offset_of(k) == dict(zip(keys, parsed.offsets))[k]
    assert cached.unique_keys() == list(dict.fromkeys(keys))


@pytest.mark.slow
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.sampled_from([list(range(40)), [5, 3, 9, 3, 1, 40, 2]]),
       where=st.integers(0, 10 ** 6), flip=st.integers(0, 7))
def test_a_damaged_cache_is_never_trusted(tmp_path, keys, where, flip):
    # any flipped bit (header or arrays) makes the cache be ignored: offsets come from the .idx
    rec, idx = make_rec(tmp_path, keys)
    expected = open_index(idx, cache=False)
    os.unlink(index_cache.index_cache_path(idx)) if os.path.exists(
        index_cache.index_cache_path(idx)) else None
    open_index(idx, cache=True)
    cache = index_cache.index_cache_path(idx)
    data = bytearray(open(cache, "rb").read())
    data[where % len(data)] ^= 1 << flip
    stat = os.stat(cache)
    with open(cache, "wb") as f:
        f.write(bytes(data))
    os.utime(cache, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert index_cache.load_cache(str(idx), os.stat(idx), int, None) is None
    got = open_index(idx, cache=True)
    assert got.offsets.tolist() == expected.offsets.tolist()
    assert got.key_list() == expected.key_list()


def test_cache_off_by_default_for_small_and_by_environment(tmp_path, monkeypatch):
    rec, idx = make_rec(tmp_path, range(20))
    open_index(idx)
    assert not (tmp_path / ("d.idx" + CACHE_SUFFIX)).exists()  # below CACHE_MIN_BYTES
    monkeypatch.setattr(index_cache, "CACHE_MIN_BYTES", 10)
    monkeypatch.setenv("RECIO_INDEX_CACHE", "0")
    open_index(idx)
    assert not (tmp_path / ("d.idx" + CACHE_SUFFIX)).exists()
    monkeypatch.setenv("RECIO_INDEX_CACHE", "")
    assert open_index(idx).cache_path is not None


def rewrite(path, data, mtime_ns=None):
    path.write_bytes(data)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


@pytest.mark.parametrize("change", ["size", "mtime", "content only"])
def test_cache_invalidated_when_idx_changes(tmp_path, change):
    idx = tmp_path / "x.idx"
    rewrite(idx, b"0\t0\n1\t16\n2\t32\n")
    open_index(idx, cache=True)
    old = os.stat(idx).st_mtime_ns
    new = {"size": b"0\t0\n1\t160\n2\t32\n",  # first and last lines as before
           "mtime": b"0\t0\n1\t20\n2\t32\n",  # same size, first and last lines
           "content only": b"0\t0\n1\t16\n2\t48\n"}[change]  # caught by the last line
    rewrite(idx, new, old if change != "mtime" else old + 10 ** 9)
    assert os.stat(idx).st_mtime_ns == (old + 10 ** 9 if change == "mtime" else old)
    index = open_index(idx, cache=True)
    assert index.offsets.tolist() == reference_parse(new)[1]


def test_stale_cache_against_a_shorter_rec_is_not_trusted(tmp_path):
    idx = tmp_path / "x.idx"
    rewrite(idx, b"0\t0\n1\t16\n2\t32\n")
    open_index(idx, rec_size=100, cache=True)
    with pytest.raises(IndexFileError) as info:
        open_index(idx, rec_size=30, cache=True)
    assert info.value.line == 3


def corruptions(data):
    yield "truncated", data[:-8]
    yield "header only", data[:64]
    yield "empty", b""
    yield "garbage", os.urandom(len(data))
    yield "one header bit", data[:20] + bytes([data[20] ^ 1]) + data[21:]
    yield "longer", data + b"\0" * 8
    header = bytearray(data)
    header[0:8] = b"NOTRECIO"
    yield "magic", bytes(header)


@pytest.mark.parametrize("what", [name for name, _ in corruptions(b"x" * 200)])
def test_corrupt_cache_is_ignored_and_replaced(tmp_path, what):
    rec, idx = make_rec(tmp_path, [4, 8, 15, 16, 23, 42])
    open_index(idx, cache=True)
    cache = tmp_path / ("d.idx" + CACHE_SUFFIX)
    good = cache.read_bytes()
    cache.write_bytes(dict(corruptions(good))[what])
    index = open_index(idx, cache=True)
    assert index.key_list() == [4, 8, 15, 16, 23, 42]
    assert index.offsets.tolist() == read_index(idx)[1]
    assert cache.read_bytes() == good  # rewritten


def test_cache_not_required(tmp_path, monkeypatch):
    """A folder where the cache cannot be written or read: parsing, silently, nothing left."""
    rec, idx = make_rec(tmp_path, range(30))
    (tmp_path / ("d.idx" + CACHE_SUFFIX)).mkdir()  # in the way: cannot be opened or replaced
    reader = IndexedRecordReader(rec, cache=True)
    assert reader.keys() == list(range(30)) and reader.index.cache_path is None
    os.rmdir(tmp_path / ("d.idx" + CACHE_SUFFIX))

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")
    monkeypatch.setattr(index_cache, "AtomicFile", read_only)
    index = open_index(idx, cache=True)
    assert index.cache_path is None and index.key_list() == list(range(30))
    assert sorted(os.listdir(tmp_path)) == ["d.idx", "d.rec"]


def test_cache_write_failure_leaves_no_temp_file(tmp_path, monkeypatch):
    rec, idx = make_rec(tmp_path, range(30))
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith(CACHE_SUFFIX):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)
    monkeypatch.setattr(os, "replace", failing_replace)
    assert open_index(idx, cache=True).key_list() == list(range(30))
    assert sorted(os.listdir(tmp_path)) == ["d.idx", "d.rec"]


def test_offset_only_index_caches_and_serves_int_readers(tmp_path):
    idx = tmp_path / "s.idx"
    rewrite(idx, b"a\t0\nb\t16\n")
    none = open_index(idx, None, cache=True)
    assert not none.has_keys and none.offsets.tolist() == [0, 16]
    with parse_forbidden():
        assert open_index(idx, None, cache=True).offsets.tolist() == [0, 16]
    with pytest.raises(IndexFileError) as info:  # an int reader is not served keys it lacks
        open_index(idx, int, cache=True)
    assert info.value.line == 1


# -- fork and pickle ---------------------------------------------------------------------------
def _child_reads(reader, rec_io, keys, queue):
    queue.put(([reader[k] for k in keys], [rec_io.read_idx(k) for k in keys],
               rec_io.keys[len(rec_io.keys) - 1], len(rec_io.idx)))


@pytest.mark.parametrize("keys", [list(range(500)), [3 * i for i in range(500)][::-1]])
def test_workers_read_through_the_arrays(tmp_path, monkeypatch, keys, start_method):
    monkeypatch.setenv("RECIO_INDEX_CACHE", "1")
    rec, idx = make_rec(tmp_path, keys)
    reader = IndexedRecordReader(rec)
    rec_io = mx.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert rec_io._index.cache_path is not None
    wanted = [keys[i] for i in (0, 17, 499, 250)]
    expected = [struct.pack("<q", k) for k in wanted]
    assert [reader[k] for k in wanted] == expected
    # the child must not parse: fork shares the arrays, spawn maps the cache
    monkeypatch.setattr(index_mod, "parse_index_file", None)
    queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=_child_reads, args=(reader, rec_io, wanted, queue))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert got == (expected, expected, keys[-1], 500)
    clone = pickle.loads(pickle.dumps(rec_io))
    assert [clone.read_idx(np.int64(k)) for k in wanted] == expected


def test_pickled_index_without_cache_carries_its_arrays(tmp_path):
    rec, idx = make_rec(tmp_path, [9, 2, 7])
    rec_io = mx.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert rec_io._index.cache_path is None
    clone = pickle.loads(pickle.dumps(rec_io))
    assert clone.keys == [9, 2, 7] and clone.read_idx(7) == struct.pack("<q", 7)
    reader = pickle.loads(pickle.dumps(IndexedRecordReader(rec)))
    assert reader[2] == struct.pack("<q", 2)


# -- recio.mx .keys and .idx: what old code does with MXNet's list and dict ---------------------
@pytest.mark.parametrize("keys", [list(range(40)), [5, 1, 9, 1, 30, 2],
                                  list(range(7, 47)), [-3, 0, 2 ** 62]])
def test_mx_keys_and_idx_behave_as_list_and_dict(tmp_path, keys):
    rec, idx = make_rec(tmp_path, keys)
    _, offsets = read_index(idx)
    want_idx = dict(zip(keys, offsets))  # what MXNet builds
    r = mx.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert r.keys == keys and len(r.keys) == len(keys) and list(r.keys) == keys
    assert [r.keys[i] for i in range(-len(keys), len(keys))] == keys + keys
    assert all(type(r.keys[i]) is int for i in range(len(keys)))
    assert r.keys[1:4] == keys[1:4] and r.keys[::-2] == keys[::-2] and r.keys[-2:] == keys[-2:]
    assert r.keys[np.int64(1)] == keys[1]
    with pytest.raises(IndexError):
        r.keys[len(keys)]
    array = np.array(r.keys)
    assert array.dtype == np.array(keys).dtype and array.tolist() == keys
    assert keys[2] in r.keys and 10 ** 30 not in r.keys and "x" not in r.keys
    assert r.keys.index(keys[2]) == keys.index(keys[2])
    assert r.keys.count(keys[1]) == keys.count(keys[1])
    assert sorted(r.keys) == sorted(keys) and r.keys + [1] == keys + [1]
    assert len(r.idx) == len(want_idx) and dict(r.idx) == want_idx and r.idx == want_idx
    assert list(r.idx) == list(want_idx) and list(r.idx.items()) == list(want_idx.items())
    for k in want_idx:
        assert r.idx[k] == want_idx[k] and r.idx[np.int64(k)] == want_idx[k] and k in r.idx
        assert r.read_idx(k) == r.read_idx(np.int64(k)) == struct.pack("<q", k)
    assert r.idx.get(123456) is None and 123456 not in r.idx
    for missing in (123456, "a", 1.5, None):
        with pytest.raises(KeyError):
            r.read_idx(missing)
    assert r.idx.get(float(keys[0])) == want_idx[keys[0]]  # 3.0 finds 3, as in a dict


def test_mx_read_after_read_idx_continues_after_that_record(tmp_path):
    rec, idx = make_rec(tmp_path, range(10))
    r = mx.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert r.read_idx(4) == struct.pack("<q", 4)
    assert r.tell() == 5 * 16
    assert r.read() == struct.pack("<q", 5)
    r.read_idx(9)
    assert r.read() is None
    r.read_idx(2)
    r.seek(7)
    assert r.read() == struct.pack("<q", 7)


def test_mx_string_keys(tmp_path):
    rec, idx = tmp_path / "s.rec", tmp_path / "s.idx"
    with recio.IndexedRecordWriter(rec, idx, key_type=str) as writer:
        writer.write("a/b.jpg", b"1")
        writer.write("c d", b"22")
    r = mx.MXIndexedRecordIO(str(idx), str(rec), "r", key_type=str)
    assert r.keys == ["a/b.jpg", "c d"] and r.idx == {"a/b.jpg": 0, "c d": 12}
    assert r.read_idx("c d") == b"22" and r.keys[0:1] == ["a/b.jpg"]


# -- write_index: the vectorised formatter is byte-identical -----------------------------------
@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=30),
       offsets=st.lists(st.integers(0, 2 ** 63 - 1), max_size=30))
def test_write_index_arrays_byte_identical(tmp_path_factory, keys, offsets):
    folder = tmp_path_factory.mktemp("w")
    write_index(folder / "a.idx", np.array(keys, np.int64), np.array(offsets, np.int64))
    expected = "".join(f"{k}\t{o}\n" for k, o in zip(keys, offsets)).encode()
    assert (folder / "a.idx").read_bytes() == expected
    small = np.array([o % 2 ** 32 for o in offsets], np.uint32)
    write_index(folder / "r.idx", range(3, 3 + len(offsets)), small)
    expected = "".join(f"{k}\t{o % 2 ** 32}\n" for k, o in zip(range(3, 99), offsets)).encode()
    assert (folder / "r.idx").read_bytes() == expected


# -- IndexedRecordReader on the arrays ---------------------------------------------------------
def test_indexed_reader_api_on_arrays(tmp_path):
    keys = [30, 10, 20, 10]
    rec, idx = make_rec(tmp_path, keys)
    with pytest.warns(recio.errors.DuplicateKeyWarning, match="key 10 appears on 2 lines"):
        reader = IndexedRecordReader(rec)
    assert reader.keys() == [30, 10, 20] and list(reader) == [30, 10, 20] and len(reader) == 3
    assert reader.offsets == {30: 0, 10: 48, 20: 32} and reader.offsets[10] == 48
    assert reader[np.int32(10)] == struct.pack("<q", 10)
    assert reader.read_many(np.array([20, 30])) == [struct.pack("<q", 20), struct.pack("<q", 30)]
    assert reader.read_many(np.array([10], np.uint64)) == reader.read_many([10]) == [reader[10]]
    for missing in ([40], [10, 11], [5], [2 ** 64 - 1]):
        with pytest.raises(KeyError):
            reader.read_many(np.array(missing, np.uint64 if missing[0] >= 2 ** 63 else np.int64))
    assert 20 in reader and 21 not in reader and dict(reader)[20] == struct.pack("<q", 20)
    dense = IndexedRecordReader(*make_rec(tmp_path, range(6), "r"))
    assert dense.read_many(np.arange(5, -1, -1)) == [struct.pack("<q", k) for k in range(5, -1, -1)]
    with pytest.raises(KeyError):
        dense.read_many(np.array([6]))
    with pytest.raises(KeyError):
        dense[-1]
