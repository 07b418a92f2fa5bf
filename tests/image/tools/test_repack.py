"""recio repack --images-only [--shuffle]: a DALI-ready copy of a face-recognition set."""
import hashlib
import io
import json
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

import recio
from recio import mx
from recio.errors import OutputExistsError, RecordIOError
from recio.image.tools.repack import record_kind, repack


def _face_set(folder, images_per_id=(4, 2, 3), with_junk=False):
    """InsightFace's layout: header record 0, image keys 1..N, identity records at the tail."""
    rec, idx = str(folder / "faces.rec"), str(folder / "faces.idx")
    rng = np.random.default_rng(0)
    n, ids = sum(images_per_id), len(images_per_id)
    images = []
    with recio.IndexedRecordWriter(rec, idx) as w:
        w.write(0, recio.pack(recio.IRHeader(2, [n + 1, n + 1 + ids], 0, 0), b""))
        key, ranges = 1, []
        for identity, count in enumerate(images_per_id):
            ranges.append((key, key + count))
            for _ in range(count):
                face = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
                record = recio.pack_img(recio.IRHeader(2, [identity, 0], key, 0), face)
                w.write(key, record)
                images.append(record)
                key += 1
        for first, end in ranges:
            w.write(key, recio.pack(recio.IRHeader(2, [first, end], key, 0), b""))
            key += 1
        if with_junk:
            w.write(key, recio.pack(recio.IRHeader(0, 1.0, key, 0), b"not an image at all"))
    return rec, idx, images


def _digest(*paths):
    return [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths]


def test_images_only_keeps_exactly_the_image_records(tmp_path):
    rec, idx, images = _face_set(tmp_path, with_junk=True)
    before = _digest(rec, idx)
    result = repack(rec, tmp_path / "dali", images_only=True)
    assert _digest(rec, idx) == before
    assert result.records_in == 1 + 9 + 3 + 1 and result.records_out == 9
    assert result.dropped == {"header": 1, "identity": 3, "not_an_image": 1}
    out = recio.IndexedRecordReader(result.rec_path, result.idx_path)
    assert list(out.keys()) == list(range(9))
    assert [out[k] for k in range(9)] == images  # byte for byte, in order
    # what DALI's readers.mxnet does: every .idx entry is a sample with a decodable image
    reader = mx.MXIndexedRecordIO(result.idx_path, result.rec_path, "r")
    for key in reader.keys:
        header, img = mx.unpack(reader.read_idx(key))
        Image.open(io.BytesIO(img)).load()


def test_shuffle_is_a_seeded_global_permutation(tmp_path):
    rec, _, images = _face_set(tmp_path, images_per_id=(5, 7, 4, 6))
    a = repack(rec, tmp_path / "a", shuffle=True, seed=3)
    b = repack(rec, tmp_path / "b.rec", shuffle=True, seed=3)
    c = repack(rec, tmp_path / "c", shuffle=True, seed=4)
    assert _digest(a.rec_path, a.idx_path) == _digest(b.rec_path, b.idx_path)
    read = [list(recio.IndexedRecordReader(r.rec_path, r.idx_path).values()) for r in (a, c)]
    assert sorted(read[0]) == sorted(images) == sorted(read[1])
    assert read[0] != images and read[0] != read[1]


def test_record_kinds():
    header = recio.pack(recio.IRHeader(2, [10, 13], 0, 0), b"")
    identity = recio.pack(recio.IRHeader(2, [1, 4], 10, 0), b"")
    assert record_kind(header, 0) == "header"
    assert record_kind(header, 5) == "identity"
    assert record_kind(identity, 10) == "identity"
    assert record_kind(recio.pack(recio.IRHeader(0, 1.0, 1, 0), b"\xff\xd8\xff\xe0" + b"0" * 8),
                       1) == "image"
    assert record_kind(b"short", 0) == "not_an_image"


def test_the_input_is_never_an_output_and_outputs_need_force(tmp_path):
    rec, idx, _ = _face_set(tmp_path)
    before = _digest(rec, idx)
    with pytest.raises(OutputExistsError):
        repack(rec, tmp_path / "faces")  # OUT.rec would be the input
    repack(rec, tmp_path / "out")
    with pytest.raises(OutputExistsError):
        repack(rec, tmp_path / "out")
    repack(rec, tmp_path / "out", force=True)
    assert _digest(rec, idx) == before


def test_a_file_without_images_writes_nothing(tmp_path):
    rec, idx = str(tmp_path / "h.rec"), str(tmp_path / "h.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        w.write(0, recio.pack(recio.IRHeader(2, [1, 1], 0, 0), b""))
    with pytest.raises(RecordIOError, match="holds no image record"):
        repack(rec, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["h.idx", "h.rec"]


def test_a_failed_write_leaves_no_output(tmp_path, monkeypatch):
    rec, idx, _ = _face_set(tmp_path)
    from recio.records.reader import RecordReader

    calls = []

    def failing(self, offset):
        calls.append(offset)
        if len(calls) > 3:
            raise OSError(5, "Input/output error")
        return original(self, offset)

    original = RecordReader.read_at
    monkeypatch.setattr(RecordReader, "read_at", failing)
    with pytest.raises(OSError):
        repack(rec, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["faces.idx", "faces.rec"]  # no temporaries either


@pytest.mark.slow
def test_the_command(script, tmp_path):
    rec, idx, images = _face_set(tmp_path)
    before = _digest(rec, idx)
    def run(*a):
        return subprocess.run([*script("recio"), "repack", *map(str, a)], capture_output=True,
                              text=True)

    proc = run(rec, tmp_path / "dali", "--images-only")
    assert proc.returncode == 0, proc.stderr
    assert "wrote 9 of 13 records" in proc.stdout
    assert "left out 1 header, 3 identity" in proc.stdout
    proc = run(rec, tmp_path / "dali", "--images-only", "--json")
    assert proc.returncode == 2 and "already exists; use --force" in proc.stderr
    proc = run(rec, tmp_path / "dali", "--images-only", "--shuffle", "--seed", "1", "--json",
               "--force")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["records_out"] == 9 and report["shuffled"] and report["seed"] == 1
    assert report["dropped"] == {"header": 1, "identity": 3, "not_an_image": 0}
    proc = run(rec, tmp_path / "faces", "--images-only")
    assert proc.returncode == 2 and "is an input of this command" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run(rec, tmp_path / "x")
    assert proc.returncode == 2 and "nothing to do" in proc.stderr
    assert _digest(rec, idx) == before
