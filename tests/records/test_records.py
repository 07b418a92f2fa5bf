"""Core RecordIO: byte-exact writing against MXNet's files, reading, framing properties."""
import hashlib
import io
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recio
from recio.errors import ClosedError
from recio.records import framing
from support import golden_payloads
MAGIC = framing.MAGIC_BYTES


def test_tricky_writer_is_byte_identical(golden, tmp_path):
    entries, payloads = golden_payloads(golden, "tricky.rec")
    with recio.IndexedRecordWriter(tmp_path / "t.rec", tmp_path / "t.idx") as writer:
        for entry, payload in zip(entries, payloads):
            writer.write(entry["key"], payload)
    assert (tmp_path / "t.rec").read_bytes() == (golden / "records" / "tricky.rec").read_bytes()
    assert (tmp_path / "t.idx").read_bytes() == (golden / "records" / "tricky.idx").read_bytes()


def test_plain_writer_is_byte_identical(golden, tmp_path):
    _, payloads = golden_payloads(golden, "plain.rec")
    with recio.RecordWriter(tmp_path / "p.rec") as writer:
        offsets = [writer.write(p) for p in payloads]
    assert (tmp_path / "p.rec").read_bytes() == (golden / "records" / "plain.rec").read_bytes()
    assert offsets == recio.build_index(golden / "records" / "plain.rec")


def test_tricky_read_by_key_and_through_mx(golden):
    entries, _ = golden_payloads(golden, "tricky.rec")
    rec, idx = golden / "records" / "tricky.rec", golden / "records" / "tricky.idx"
    by_key = recio.IndexedRecordReader(rec, idx)
    legacy = recio.mx.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert legacy.keys == by_key.keys() == [e["key"] for e in entries]
    for entry in reversed(entries):  # random order, NumPy keys
        key = np.int64(entry["key"])
        for record in (by_key[key], legacy.read_idx(key)):
            assert hashlib.sha256(record).hexdigest() == entry["sha256"]
    sequential = recio.mx.MXRecordIO(str(rec), "r")
    count = 0
    while True:
        record = sequential.read()
        if record is None:
            break
        assert hashlib.sha256(record).hexdigest() == entries[count]["sha256"]
        count += 1
    assert count == len(entries)


def test_multipart_framing_of_the_magic_alone():
    # a payload that is exactly the magic: two empty parts, cflag 1 then cflag 3
    encoded = framing.encode_record(MAGIC)
    assert encoded == MAGIC + struct.pack("<I", 1 << 29) + MAGIC + struct.pack("<I", 3 << 29)
    # unaligned magic is not escaped
    encoded = framing.encode_record(b"x" + MAGIC)
    assert struct.unpack_from("<I", encoded, 4)[0] == 5


payload_strategy = st.lists(
    st.tuples(st.binary(max_size=64), st.integers(0, 40), st.booleans()).map(
        lambda t: t[0][:t[1]] + MAGIC + t[0][t[1]:] if t[2] else t[0]),
    max_size=30)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(payloads=payload_strategy, trailing=st.booleans())
def test_roundtrip_any_payloads(payloads, trailing):
    if trailing and payloads:
        payloads[-1] = payloads[-1] + MAGIC
    out = io.BytesIO()
    writer = recio.RecordWriter(out)
    offsets = [writer.write(p) for p in payloads]
    writer.flush()
    data = out.getvalue()
    assert len(data) % 4 == 0
    # the magic appears at an aligned offset only as a part header
    heads = [i for i in range(0, len(data), 4) if data[i:i + 4] == MAGIC]
    for i in heads:
        assert struct.unpack_from("<I", data, i + 4)[0] >> 29 in (0, 1, 2, 3)
    reader = recio.RecordReader(io.BytesIO(data))
    assert list(reader) == payloads
    assert [reader.read_at(o) for o in offsets] == payloads
    assert reader.read_many_at(offsets[::-1]) == payloads[::-1]
    assert [reader.peek_at(o, 6) for o in offsets] == [p[:6] for p in payloads]
    assert list(recio.RecordReader(io.BytesIO(data)).iter_offsets()) == offsets
    batch_reader = recio.RecordReader(io.BytesIO(data))
    assert batch_reader.read_batch(7) + batch_reader.read_batch(10 ** 6) == payloads


class _Stream(io.RawIOBase):
    """A seekable binary stream with no fileno (like a remote file): exercises the slow path."""

    def __init__(self, data):
        self._inner = io.BytesIO(data)

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, *args):
        return self._inner.seek(*args)

    def readinto(self, b):
        data = self._inner.read(len(b))
        b[:len(data)] = data
        return len(data)


@settings(max_examples=40, deadline=None)
@given(payloads=payload_strategy)
def test_stream_reader_matches(payloads):
    data = b"".join(framing.encode_record(p) for p in payloads)
    reader = recio.RecordReader(io.BufferedReader(_Stream(data)))
    assert list(reader) == payloads


def test_writer_refuses_huge_record_before_writing(tmp_path):
    writer = recio.RecordWriter(tmp_path / "big.rec")
    writer.write(b"ok")
    huge = np.zeros(2 ** 29, dtype=np.uint8)  # calloc'd: no real memory is touched
    with pytest.raises(recio.RecordIOError, match="2\\*\\*29"):
        writer.write(huge)
    writer.close()
    assert list(recio.RecordReader(tmp_path / "big.rec")) == [b"ok"]


def test_atomic_writer_leaves_nothing_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        with recio.IndexedRecordWriter(tmp_path / "a.rec", tmp_path / "a.idx") as writer:
            writer.write(0, b"data")
            assert not (tmp_path / "a.rec").exists()
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_duplicate_keys_warn_on_read_and_last_wins(tmp_path):
    with recio.IndexedRecordWriter(tmp_path / "a.rec", tmp_path / "a.idx") as writer:
        writer.write(1, b"x")
        writer.write(2, b"y")
        writer.write(1, b"z")
    assert (tmp_path / "a.idx").read_text() == "1\t0\n2\t12\n1\t24\n"
    with pytest.warns(recio.errors.DuplicateKeyWarning,
                      match="key 1 appears on 2 lines.*last line"):
        reader = recio.IndexedRecordReader(tmp_path / "a.rec")
    assert reader.keys() == [1, 2] and reader[1] == b"z"


def test_string_keys(tmp_path):
    with recio.IndexedRecordWriter(tmp_path / "s.rec", tmp_path / "s.idx", key_type=str) as w:
        w.write("a/b.jpg", b"1")
        w.write("c d", b"22")
    reader = recio.IndexedRecordReader(tmp_path / "s.rec", tmp_path / "s.idx", key_type=str)
    assert reader.keys() == ["a/b.jpg", "c d"] and reader["c d"] == b"22"
    assert "zz" not in reader and "a/b.jpg" in reader


def test_indexed_reader_without_idx_refuses_or_scans_when_asked(golden, tmp_path):
    """No .idx: MissingIndexError naming both files (never keys 0..n-1 unasked); scan=True
    asks for them, as rec2idx numbers records."""
    data = (golden / "records" / "tricky.rec").read_bytes()
    (tmp_path / "noidx.rec").write_bytes(data)
    with pytest.raises(recio.errors.MissingIndexError, match="noidx.rec.*recio index"):
        recio.IndexedRecordReader(tmp_path / "noidx.rec")
    reader = recio.IndexedRecordReader(tmp_path / "noidx.rec", scan=True)
    assert reader.idx_path is None
    assert reader.keys() == list(range(18))
    assert [reader[k] for k in reader] == list(recio.RecordReader(tmp_path / "noidx.rec"))
    assert reader.read_many(np.arange(17, -1, -1)) == [reader[k] for k in range(17, -1, -1)]
    assert np.int32(3) in reader and len(reader) == 18
    with pytest.raises(KeyError):
        reader[18]


@pytest.mark.parametrize("line, message", [
    (b"0\t0\n1\n", "line 2"),
    (b"0\tzero\n", "line 1"),
    (b"0\t0\n1\t18446744073709551615\n", "line 2.*18446744073709551615.*recio index"),
    (b"0\t0\n1\t6\n", "line 2.*not a record head"),
])
def test_bad_index_lines(golden, tmp_path, line, message):
    (tmp_path / "x.idx").write_bytes(line)
    with pytest.raises(recio.errors.IndexFileError, match=message) as info:
        recio.IndexedRecordReader(golden / "records" / "tricky.rec", tmp_path / "x.idx")
    assert str(tmp_path / "x.idx") in str(info.value)


def test_headers_golden(golden):
    for case in json.loads((golden / "headers" / "manifest.json").read_text()):
        payload = bytes.fromhex(case["payload_hex"])
        header = recio.IRHeader(case["flag"], case["label"], case["id"], case["id2"])
        packed = recio.pack(header, payload)
        assert packed.hex() == case["packed_hex"], case["key"]
        unpacked, rest = recio.unpack(bytes.fromhex(case["packed_hex"]))
        assert rest == payload
        assert (unpacked.flag, unpacked.id, unpacked.id2) == (case["flag"], case["id"], case["id2"])
        if case["flag"] == 0:
            assert unpacked.label == case["label"]
        else:
            assert unpacked.label.dtype == np.float32
            assert unpacked.label.tolist() == case["label"]
        assert recio.mx.pack(header, payload) == packed


def test_headers_golden_rec_file(golden):
    cases = json.loads((golden / "headers" / "manifest.json").read_text())
    reader = recio.IndexedRecordReader(golden / "headers" / "headers.rec")
    assert [reader[c["key"]].hex() for c in cases] == [c["packed_hex"] for c in cases]


def test_unpack_rejects_short_records():
    with pytest.raises(recio.RecordIOError, match="24-byte"):
        recio.unpack(b"abc")
    with pytest.raises(recio.RecordIOError, match="flag 5"):
        recio.unpack(struct.pack("<IfQQ", 5, 0, 0, 0) + b"\0" * 8)


def test_float32_label_warning():
    with pytest.warns(UserWarning, match="25130987.*float32"):
        recio.pack(recio.IRHeader(0, 25130987, 0, 0), b"")
    with pytest.warns(UserWarning, match="2\\*\\*24"):
        recio.pack(recio.IRHeader(0, [1.0, 33554433], 0, 0), b"")


def test_pack_img_roundtrip_rgb_and_mx_bgr():
    rng = np.random.default_rng(0)
    img = np.zeros((20, 30, 3), np.uint8)
    img[:, :, 0] = 250  # pure red in RGB
    png = recio.pack_img(recio.IRHeader(0, 1.5, 7, 0), img, img_fmt=".png")
    header, decoded = recio.unpack_img(png)
    assert header.label == 1.5 and header.id == 7
    assert np.array_equal(decoded, img)
    _, bgr = recio.mx.unpack_img(png, 1)
    assert np.array_equal(bgr[:, :, 2], img[:, :, 0]) and bgr[:, :, 0].max() == 0
    _, grey = recio.mx.unpack_img(png, 0)
    assert grey.shape == (20, 30)
    noisy = rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)
    back = recio.mx.unpack_img(recio.mx.pack_img(recio.IRHeader(0, 0, 0, 0), noisy,
                                                 img_fmt=".png"))[1]
    assert np.array_equal(back, noisy)
    jpg = recio.pack_img(recio.IRHeader(0, 0, 0, 0), noisy, quality=90)
    assert recio.unpack(jpg)[1][:2] == b"\xff\xd8"
    with pytest.raises(recio.errors.ImageError):
        recio.unpack_img(recio.pack(recio.IRHeader(0, 0, 0, 0), b"not an image"))


# -- recio.mx writers: MXNet's bytes through the bound fast paths --------------------------------

def test_mx_writers_are_byte_identical(golden, tmp_path):
    """write_idx and MXRecordIO.write give MXNet's .rec and .idx byte for byte (multi-part
    records, empty ones and 1 MiB ones among them)."""
    entries, payloads = golden_payloads(golden, "tricky.rec")
    rec, idx = str(tmp_path / "t.rec"), str(tmp_path / "t.idx")
    writer = recio.mx.MXIndexedRecordIO(idx, rec, "w")
    for entry, payload in zip(entries, payloads):
        assert writer.write_idx(entry["key"], payload) is None
    assert writer.keys == [e["key"] for e in entries]
    assert writer.idx == {e["key"]: off for e, off in
                          zip(entries, recio.build_index(golden / "records" / "tricky.rec"))}
    writer.close()
    assert (tmp_path / "t.rec").read_bytes() == (golden / "records" / "tricky.rec").read_bytes()
    assert (tmp_path / "t.idx").read_bytes() == (golden / "records" / "tricky.idx").read_bytes()
    _, plain = golden_payloads(golden, "plain.rec")
    writer = recio.mx.MXRecordIO(str(tmp_path / "p.rec"), "w")
    for payload in plain:
        writer.write(payload)
    writer.close()
    assert (tmp_path / "p.rec").read_bytes() == (golden / "records" / "plain.rec").read_bytes()


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 5, 100, 5000, 70_000]), max_size=60),
       keys=st.sampled_from(["int", "str", "repeat"]), plain_every=st.integers(0, 7),
       magic_every=st.integers(0, 5), form=st.sampled_from([bytes, bytearray, memoryview]))
def test_mx_index_lines_follow_their_records(tmp_path_factory, sizes, keys, plain_every,
                                             magic_every, form):
    """The .idx lines, written in batches when the records reach the file and at close(), are
    MXNet's line for line: any key type, repeated keys (every line kept), records written
    with write() between them (no line), small and large records, payloads holding the magic
    word (multi-part records), bytes and other buffers."""
    folder = tmp_path_factory.mktemp("mx")
    rec, idx = str(folder / "m.rec"), str(folder / "m.idx")
    writer = recio.mx.MXIndexedRecordIO(idx, rec, "w", key_type=str if keys == "str" else int)
    lines, offset = [], 0
    payloads = []
    for i, n in enumerate(sizes):
        payload = bytes([i % 251]) * n
        if magic_every and i % magic_every == 0 and n >= 8:
            payload = MAGIC + payload[4:]  # an aligned magic word: a multi-part record
        payloads.append(payload)
        if plain_every and i % plain_every == 0:
            writer.write(form(payload))
        else:
            key = {"int": i, "str": f"k {i}", "repeat": i % 3}[keys]
            writer.write_idx(key, form(payload))
            lines.append(f"{key}\t{offset}\n")
        offset += len(framing.encode_record(payload))
    assert writer.tell() == offset
    writer.close()
    assert (folder / "m.idx").read_text() == "".join(lines)
    assert list(recio.RecordReader(rec)) == payloads


def test_mx_index_lines_reach_the_file_with_their_records(tmp_path):
    """Once the writer hands a buffer of records to the .rec, their .idx lines follow at once
    (a script killed later keeps an index of what reached the disk)."""
    rec, idx = str(tmp_path / "m.rec"), str(tmp_path / "m.idx")
    writer = recio.mx.MXIndexedRecordIO(idx, rec, "w")
    for i in range(20_000):  # 108 bytes each: more than the 1 MiB buffer
        writer.write_idx(i, b"%100d" % i)
    writer.fidx.flush()
    on_disk = (tmp_path / "m.rec").stat().st_size
    lines = (tmp_path / "m.idx").read_text().splitlines()
    assert 0 < on_disk < 20_000 * 108 and len(lines) == on_disk // 108
    writer.close()
    assert len((tmp_path / "m.idx").read_text().splitlines()) == 20_000


def test_mx_writer_checks_hold_after_close_and_in_a_forked_child(tmp_path):
    """The bound fast paths go away when they would skip a check: writing in a forked child
    raises MXNet's RuntimeError, after close() ClosedError naming the file; a reader cannot
    write; a pickled writer does not carry them."""
    import multiprocessing
    import pickle

    rec, idx = str(tmp_path / "m.rec"), str(tmp_path / "m.idx")
    writer = recio.mx.MXIndexedRecordIO(idx, rec, "w")
    writer.write_idx(0, b"a")
    if "fork" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()

        def child():
            messages = []
            for call in (lambda: writer.write_idx(1, b"b"), lambda: writer.write(b"c")):
                try:
                    call()
                    messages.append("wrote")
                except RuntimeError as exc:
                    messages.append(str(exc))
            queue.put(messages)

        proc = ctx.Process(target=child)
        proc.start()
        proc.join(60)
        assert queue.get(timeout=10) == ["Forbidden operation in multiple processes"] * 2
    writer.write_idx(2, b"c")  # the parent goes on
    state = pickle.loads(pickle.dumps(writer))  # MXNet's way: reopened (and emptied) there
    state.write_idx(7, b"z")
    state.close()
    assert (tmp_path / "m.idx").read_text() == "7\t0\n"
    writer = recio.mx.MXIndexedRecordIO(idx, rec, "w")
    writer.write_idx(0, b"a")
    writer.write_idx(2, b"c")
    writer.close()
    with pytest.raises(ClosedError, match="I/O on a closed MXIndexedRecordIO: .*m.rec"):
        writer.write_idx(3, b"d")
    with pytest.raises(ClosedError, match="I/O on a closed MXIndexedRecordIO: .*m.rec"):
        writer.write(b"d")
    assert (tmp_path / "m.idx").read_text() == "0\t0\n2\t12\n"
    reader = recio.mx.MXIndexedRecordIO(idx, rec, "r")
    with pytest.raises(RuntimeError, match="opened for reading"):
        reader.write_idx(5, b"x")
    with pytest.raises(RuntimeError, match="opened for reading"):
        reader.write(b"x")
    assert [reader.read_idx(k) for k in (0, 2)] == [b"a", b"c"]
