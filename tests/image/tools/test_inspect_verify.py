"""recio.image.tools.stats: one-pass statistics, image sizes from headers, layouts, damage,
indexes."""
import io
import json
import os
import statistics

import numpy as np
import pytest
from PIL import Image, features

import recio
from conftest import skip_or_fail
from recio.records import framing
from recio.image.tools.verify import check_images
from recio.image.tools.stats import check_index_file, image_format, image_size, scan_file

MAGIC = framing.MAGIC_BYTES


def encode(fmt, w, h, mode="RGB"):
    buf = io.BytesIO()
    Image.new(mode, (w, h), (10, 200, 30) if mode == "RGB" else 7).save(buf, format=fmt)
    return buf.getvalue()


def write_rec(path, payloads, index=False):
    offsets = []
    with open(path, "wb") as f:
        for p in payloads:
            offsets.append(f.tell())
            f.write(framing.encode_record(p))
    if index:
        recio.records.write_index(os.path.splitext(str(path))[0] + ".idx", range(len(offsets)),
                                  offsets)
    return str(path)


@pytest.mark.parametrize("fmt,w,h", [("JPEG", 37, 21), ("PNG", 5, 300), ("GIF", 64, 2),
                                     ("BMP", 13, 17), ("WEBP", 40, 30)])
def test_image_size_from_headers(fmt, w, h):
    if fmt == "WEBP" and not features.check("webp"):  # (Image.SAVE lists WEBP only after init)
        skip_or_fail("this Pillow was built without WebP")
    data = encode(fmt, w, h)
    assert image_size(data) == (fmt.lower(), w, h)
    # inside a larger buffer, at an offset, without copying
    padded = b"\0" * 28 + data + b"junk"
    assert image_size(padded, 28, 28 + len(data)) == (fmt.lower(), w, h)


def test_image_size_jpeg_with_big_segments_before_the_frame():
    data = encode("JPEG", 50, 60)
    comment = b"\xff\xfe" + (2 + 60000).to_bytes(2, "big") + MAGIC * 15000
    data = data[:2] + comment + data[2:]
    assert Image.open(io.BytesIO(data)).size == (50, 60)
    assert image_size(data) == ("jpeg", 50, 60)


def test_image_format_rejects_non_images():
    assert image_format(b"hello world") is None
    assert image_format(b"\xff\xd8") is None  # too short
    assert image_size(b"RIFF\0\0\0\0WAVEfmt ") == (None, None, None)


def test_golden_split_file_stats(golden):
    path = golden / "split" / "part0.rec"
    st, heads = scan_file(path, show=3, collect_heads=True)
    assert st.records == 37 and st.size == os.path.getsize(path)
    assert st.multipart_records > 0 and st.parts > st.records
    assert list(heads) == recio.build_index(path)
    img = st.images
    assert img.records == 37 and img.formats == {"jpeg": 37} and img.scalar_labels == 37
    assert (img.label_min, img.label_max, img.distinct_labels) == (0.0, 36.0, 37)
    assert (img.id_min, img.id_max) == (0, 36)
    # sizes read from headers agree with decoding, including multi-part records
    reader = recio.IndexedRecordReader(str(path))
    decoded = {}
    for key in reader.keys():
        h, arr = recio.unpack_img(reader[key])
        decoded[f"{arr.shape[1]}x{arr.shape[0]}"] = decoded.get(f"{arr.shape[1]}x{arr.shape[0]}",
                                                                   0) + 1
    assert img.sampled == 37
    assert sum(img.sizes.values()) <= 37
    assert len(img.sizes) == min(20, len(decoded))  # the 20 most common sizes: never empty here
    for k, v in img.sizes.items():
        assert decoded[k] == v
    assert [e["id"] for e in st.shown] == [0, 1, 2]
    assert st.shown[0]["format"] == "jpeg" and st.shown[0]["offset"] == 0
    assert st.index is not None and st.index.ok and st.index.keys_are_positions
    assert not st.damage
    json.dumps(st.to_dict())


def test_golden_vector_labels(golden):
    st, _ = scan_file(golden / "im2rec" / "multi.rec")
    assert st.images.label_widths == {3: 13} and st.images.vector_labels == 13
    assert st.index.ok and not st.index.keys_are_positions  # keys are list indices, shuffled


def test_tricky_records_are_not_images(golden):
    st, _ = scan_file(golden / "records" / "tricky.rec")
    manifest = json.loads((golden / "records" / "manifest.json").read_text())
    lengths = [r["length"] for r in manifest["tricky.rec"]]  # MXNet's record lengths, in order
    assert len(lengths) == st.records == 18
    assert st.images.records == 0 and st.non_image_records == 18
    assert not st.damage and st.stray_heads == 0
    assert (st.size_min, st.size_max) == (min(lengths), max(lengths)) == (0, 1 << 20)
    assert st.payload_bytes == sum(lengths)
    assert st.size_median == statistics.median(lengths) and st.size_median_exact


def test_face_recognition_layout(tmp_path):
    jpeg = encode("JPEG", 8, 8)
    n_img, ids = 5, 2
    payloads = [recio.pack(recio.IRHeader(0, [n_img + 1.0, n_img + 1.0 + ids], 0, 0), b"")]
    for i in range(n_img):
        payloads.append(recio.pack(recio.IRHeader(0, [float(i % ids), 1.0], i + 1, 0), jpeg))
    payloads.append(recio.pack(recio.IRHeader(0, [1.0, 4.0], n_img + 1, 0), b""))
    payloads.append(recio.pack(recio.IRHeader(0, [4.0, 6.0], n_img + 2, 0), b""))
    st, _ = scan_file(write_rec(tmp_path / "faces.rec", payloads))
    assert st.layout == {"name": "face-recognition", "images": 5, "identities": 2,
                         "first_identity_key": 6, "records_expected": 8, "identity_records": 2,
                         "consistent": True}
    assert st.images.records == 5 and st.header_only_records == 3
    assert st.images.distinct_labels == 2 and st.images.label_widths == {2: 5}
    # a plain image file is not mistaken for it
    st2, _ = scan_file(write_rec(tmp_path / "plain.rec", payloads[1:6]))
    assert st2.layout is None


def damaged_file(tmp_path):
    payloads = [b"a" * 100, b"b" * 100, b"c" * 100, b"d" * 100]
    path = write_rec(tmp_path / "d.rec", payloads)
    data = bytearray(open(path, "rb").read())
    return path, data  # each record is 108 bytes


def test_damage_bad_magic_is_one_region_up_to_the_next_head(tmp_path):
    path, data = damaged_file(tmp_path)
    data[108:112] = b"XXXX"
    open(path, "wb").write(bytes(data))
    st, _ = scan_file(path)
    assert [(d.start, d.end) for d in st.damage] == [(108, 216)]
    assert "magic" in st.damage[0].reason and st.records == 3


def test_damage_truncated_and_overlong(tmp_path):
    path, data = damaged_file(tmp_path)
    open(path, "wb").write(bytes(data[:-50]))
    st, _ = scan_file(path)
    assert [(d.start, d.end) for d in st.damage] == [(324, 382)] and st.records == 3
    assert "it ends 50 bytes into the data of the record at byte 324, which claims 100 bytes" \
        in st.damage[0].reason and st.damage[0].truncated
    open(path, "wb").write(bytes(data[:-105]))
    st, _ = scan_file(path)
    assert [(d.start, d.end) for d in st.damage] == [(324, 327)]
    assert "it ends 3 bytes into the header of the record at byte 324" in st.damage[0].reason


def test_damage_orphan_and_interrupted_parts(tmp_path):
    path, data = damaged_file(tmp_path)
    data[112:116] = ((3 << 29) | 100).to_bytes(4, "little")  # cflag 3 with no first part
    open(path, "wb").write(bytes(data))
    st, _ = scan_file(path)
    assert [(d.start, d.end) for d in st.damage] == [(108, 216)]
    assert "record starts with cflag 3" in st.damage[0].reason
    path, data = damaged_file(tmp_path)
    data[112:116] = ((1 << 29) | 100).to_bytes(4, "little")  # first part followed by a new record
    open(path, "wb").write(bytes(data))
    st, _ = scan_file(path)
    assert [(d.start, d.end) for d in st.damage] == [(108, 216)]
    assert "expects a middle or last part" in st.damage[0].reason and st.records == 3


def test_multipart_records_are_joined(tmp_path):
    payload = b"head" + MAGIC + b"middle!!" + MAGIC + b"end"
    path = write_rec(tmp_path / "m.rec", [payload, b"x"])
    st, _ = scan_file(path)
    assert (st.records, st.parts, st.multipart_records) == (2, 4, 1)
    assert st.size_max == len(payload) and not st.damage


def test_scan_finds_unescaped_magic_as_the_readers_do(tmp_path):
    # a record whose data holds an aligned magic (a length that swallows a record, or a writer
    # that did not escape it) is damage; skip mode resynchronises at that inner head
    raw = framing.PART_HEADER.pack(framing.MAGIC, 16) + b"abcd" + MAGIC + b"\0\0\0\0" + b"wxyz"
    path = tmp_path / "foreign.rec"
    path.write_bytes(raw + framing.encode_record(b"ok"))
    st, _ = scan_file(path)
    assert st.stray_heads == 1 and st.records == 2
    assert [(d.start, d.end) for d in st.damage] == [(0, 12), (20, 24)]
    assert "swallows" in st.damage[0].reason
    with recio.RecordReader(path, on_error="skip") as reader:
        assert [(o, r) for o, r in reader.records_with_offsets()] == [(12, b""), (24, b"ok")]
    with pytest.raises(recio.RecordIOError, match="swallows") as info:
        list(recio.RecordReader(path))
    assert info.value.offset == 0


def test_index_check_finds_problems(tmp_path):
    path = write_rec(tmp_path / "i.rec", [b"a" * 10, b"b" * 10, b"c" * 10], index=True)
    heads = recio.build_index(path)
    idx = str(tmp_path / "i.idx")
    assert check_index_file(idx, heads, os.path.getsize(path)).ok
    with open(idx, "w") as f:
        f.write("0\t0\n1\t4\n1\t20\n")
    chk = check_index_file(idx, heads, os.path.getsize(path))
    assert not chk.ok and chk.bad_offsets == 1 and chk.duplicate_keys == 1
    assert chk.unindexed_records == 1 and chk.first_bad_offsets == [("1", 4)]
    assert len(chk.problems()) == 3  # the counts agree (3 and 3)
    with open(idx, "w") as f:
        f.write("0\t18446744073709551615\n")  # MXNet's tell() == -1 bug
    chk = check_index_file(idx, heads, os.path.getsize(path))
    assert chk.error is not None and not chk.ok
    st, _ = scan_file(path)  # picked up beside the .rec
    assert st.index is not None and st.index.error is not None


def test_check_images_reports_undecodable(tmp_path):
    good = recio.pack(recio.IRHeader(0, 1.0, 7, 0), encode("PNG", 4, 4))
    broken = recio.pack(recio.IRHeader(0, 2.0, 8, 0), encode("JPEG", 30, 30)[:200])
    notimg = recio.pack(recio.IRHeader(0, 3.0, 9, 0), b"plain text, not an image")
    labels_only = recio.pack(recio.IRHeader(2, [5.0, 6.0], 11, 0), b"")  # an identity record
    path = write_rec(tmp_path / "img.rec", [good, broken, notimg, recio.pack(
        recio.IRHeader(0, 4.0, 10, 0), b""), labels_only])
    heads = recio.build_index(path)
    bad = check_images(path, heads)
    assert [d.start for d in bad] == heads[1:4]
    assert "id 8" in bad[0].reason and "id 9" in bad[1].reason
    assert "id 10: holds no image" in bad[2].reason


def test_empty_file(tmp_path):
    path = tmp_path / "e.rec"
    path.write_bytes(b"")
    st, heads = scan_file(path, collect_heads=True)
    assert st.records == 0 and not st.damage and list(heads) == []


def test_progress_reports_every_byte(tmp_path):
    path = write_rec(tmp_path / "p.rec", [np.random.default_rng(0).bytes(5000) for _ in range(20)])
    seen = []
    scan_file(path, progress=seen.append)
    assert sum(seen) == os.path.getsize(path)
