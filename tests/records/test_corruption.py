"""Damaged input: every corruption kind names its byte offset; skip mode recovers the rest."""
import io
import multiprocessing
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recio
from support import hang_guard
from recio.records import framing
MAGIC = framing.MAGIC_BYTES


def build(payloads):
    """(file bytes, offsets) of the records."""
    out, offsets = [], []
    pos = 0
    for p in payloads:
        offsets.append(pos)
        encoded = framing.encode_record(p)
        out.append(encoded)
        pos += len(encoded)
    return bytearray(b"".join(out)), offsets


PAYLOADS = [b"first", b"x" * 100, MAGIC + b"multi" + MAGIC + b"part", b"y" * 37, b"last one"]


def read_all(data, tmp_path, on_error="raise"):
    path = tmp_path / "c.rec"
    path.write_bytes(bytes(data))
    with hang_guard():
        reader = recio.RecordReader(path, on_error=on_error)
        return reader, list(reader)


def expect_error(data, tmp_path, offset, pattern):
    with pytest.raises(recio.RecordIOError, match=pattern) as info:
        read_all(data, tmp_path)
    assert info.value.offset == offset
    assert str(tmp_path / "c.rec") in str(info.value) and f"byte {offset}" in str(info.value)


def test_bad_magic(tmp_path):
    data, offsets = build(PAYLOADS)
    data[offsets[3]] ^= 0xFF
    expect_error(data, tmp_path, offsets[3], "bad magic")


def test_truncated_header(tmp_path):
    data, offsets = build(PAYLOADS)
    expect_error(data[:offsets[4] + 5], tmp_path, offsets[4],
                 "truncated file: it ends 5 bytes into the header of the record at byte "
                 f"{offsets[4]}; the records before it are not affected: `recio repair`")


def test_truncated_payload(tmp_path):
    data, offsets = build(PAYLOADS)
    expect_error(data[:offsets[4] + 10], tmp_path, offsets[4],
                 "truncated file: it ends 2 bytes into the data of the record.*claims 8 bytes")


def test_length_past_end_is_not_allocated(tmp_path):
    data, offsets = build(PAYLOADS)
    struct.pack_into("<I", data, offsets[1] + 4, (1 << 29) - 1)  # claims 512 MiB
    expect_error(data, tmp_path, offsets[1], "claims 536870911 bytes")


def test_continuation_without_start(tmp_path):
    data, offsets = build(PAYLOADS)
    struct.pack_into("<I", data, offsets[1] + 4, (2 << 29) | 100)
    expect_error(data, tmp_path, offsets[1], "starts with cflag 2")


def test_first_part_followed_by_whole_record(tmp_path):
    data, offsets = build(PAYLOADS)
    struct.pack_into("<I", data, offsets[1] + 4, (1 << 29) | 100)  # now a "first part"
    expect_error(data, tmp_path, offsets[2], "record started at byte %d expects" % offsets[1])


def test_multipart_cut_off_at_end(tmp_path):
    data, offsets = build([b"a", MAGIC + b"tail"])
    expect_error(data[:offsets[1] + 8], tmp_path, offsets[1],
                 "truncated file: it ends inside the record at byte %d, before that "
                 "record's next part" % offsets[1])


def test_read_at_outside_and_misaligned(golden):
    reader = recio.RecordReader(golden / "records" / "tricky.rec")
    with pytest.raises(recio.RecordIOError, match="outside"):
        reader.read_at(reader.size + 100)
    with pytest.raises(recio.RecordIOError, match="outside"):
        reader.read_at(2 ** 64 - 1)
    with pytest.raises(recio.RecordIOError, match="bad magic"):
        reader.read_at(4)


def test_skip_mode_recovers_around_damage(tmp_path):
    data, offsets = build(PAYLOADS)
    data[offsets[1]:offsets[1] + 4] = b"\0\0\0\0"  # record 1 loses its magic
    struct.pack_into("<I", data, offsets[3] + 4, 10 ** 6)  # record 3 claims too much
    reader, records = read_all(data, tmp_path, on_error="skip")
    assert records == [PAYLOADS[0], PAYLOADS[2], PAYLOADS[4]]
    assert reader.skipped_bytes == (offsets[2] - offsets[1]) + (offsets[4] - offsets[3])
    assert [e.offset for e in reader.errors] == [offsets[1], offsets[3]]


def test_skip_mode_drops_record_whose_length_swallows_the_next(tmp_path):
    data, offsets = build(PAYLOADS)
    struct.pack_into("<I", data, offsets[0] + 4, offsets[2] - offsets[0] - 8)
    _, records = read_all(data, tmp_path, on_error="skip")
    assert records == PAYLOADS[1:]


def test_garbage_terminates_quickly(tmp_path):
    rng = np.random.default_rng(1)
    garbage = bytearray(rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes())
    for i in range(0, len(garbage), 64):  # fake heads everywhere, all claiming too much
        garbage[i:i + 8] = MAGIC + struct.pack("<I", (1 << 29) - 1)
    good, _ = build([b"survivor"])
    reader, records = read_all(garbage + good, tmp_path, on_error="skip")
    assert records == [b"survivor"]
    with pytest.raises(recio.RecordIOError):
        read_all(garbage + good, tmp_path)


payloads = st.lists(st.binary(max_size=80).map(
    lambda b: b if len(b) < 8 else b[:4] + MAGIC + b[4:]), min_size=2, max_size=12)


@settings(max_examples=150, deadline=None)
@given(payloads=payloads, data=st.data())
def test_skip_mode_keeps_every_undamaged_record(payloads, data):
    buf, offsets = build(payloads)
    k = data.draw(st.integers(0, len(payloads) - 1))
    end = offsets[k + 1] if k + 1 < len(offsets) else len(buf)
    where = data.draw(st.integers(offsets[k], end - 1))
    width = data.draw(st.integers(1, min(8, end - where)))
    for i in range(where, where + width):
        buf[i] ^= data.draw(st.integers(1, 255))
    with hang_guard():
        out = list(recio.RecordReader(io.BytesIO(bytes(buf)), on_error="skip"))
    expected = payloads[:k] + payloads[k + 1:]
    it = iter(out)
    assert all(any(r == p for r in it) for p in expected), "an undamaged record was lost"
    assert len(out) <= len(payloads)


def _read_in_child(obj, keys, queue):
    queue.put([obj.read_idx(k) for k in keys])


def test_mx_indexed_reader_in_child_process(golden, start_method):
    rec, idx = golden / "records" / "tricky.rec", golden / "records" / "tricky.idx"
    parent = recio.mx.MXIndexedRecordIO(str(idx), str(rec), "r")
    keys = [np.int64(k) for k in (17, 3, 6, 0)]
    expected = [parent.read_idx(k) for k in keys]
    parent.read()  # the parent's position must not matter to the child
    clone = pickle.loads(pickle.dumps(parent))
    assert [clone.read_idx(k) for k in keys] == expected
    queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=_read_in_child, args=(parent, keys, queue))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and got == expected


def test_mx_writer_roundtrip(tmp_path):
    rec, idx = str(tmp_path / "m.rec"), str(tmp_path / "m.idx")
    writer = recio.mx.MXIndexedRecordIO(idx, rec, "w")
    for i in range(5):
        writer.write_idx(i, recio.mx.pack(recio.mx.IRHeader(0, float(i), i, 0), b"img%d" % i))
    writer.close()
    reader = recio.mx.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == list(range(5))
    header, payload = recio.mx.unpack(reader.read_idx(3))
    assert header.label == 3.0 and payload == b"img3"
    assert reader.read() == recio.mx.pack(recio.mx.IRHeader(0, 4.0, 4, 0), b"img4")
    assert reader.read() is None
    reader.reset()
    assert recio.mx.unpack(reader.read())[1] == b"img0"
    with pytest.raises(ValueError, match="Invalid flag"):
        recio.mx.MXRecordIO(rec, "x")
