"""recio split / inspect / index / verify / extract, through CliRunner and the installed script."""
import io
import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from PIL import Image

import recio
from recio.records import framing
from recio.cli.main import recio as recio_group


def run(*args):
    return CliRunner().invoke(recio_group, [str(a) for a in args])


def jpeg(w, h):
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (w, h, 0)).save(buf, format="JPEG")
    return buf.getvalue()


@pytest.fixture
def images_rec(tmp_path):
    path = str(tmp_path / "imgs.rec")
    with recio.IndexedRecordWriter(path, str(tmp_path / "imgs.idx")) as w:
        for i in range(6):
            label = float(i % 3) if i % 2 else [float(i % 3), 0.5]
            # vector and scalar labels in one file are unusual but legal
            w.write(i, recio.pack(recio.IRHeader(0, label, 100 + i, 0), jpeg(8 + i, 9)))
    return path


# -- split -----------------------------------------------------------------------------------------
def test_split_table_json_and_part(split_files, golden):
    manifest = json.loads((golden / "split" / "manifest.json").read_text())
    res = run("split", *split_files, "-n", 4)
    assert res.exit_code == 0, res.output
    assert "4 part(s)" in res.output and "part1.rec: [0, 4844)" in res.output
    res = run("split", *split_files, "-n", 4, "--json")
    data = json.loads(res.output)
    assert [p["records"] for p in data["parts"]] == \
        [len(manifest["partitions"][f"{k}/4"]) for k in range(4)]
    assert data["total_bytes"] == sum(os.path.getsize(f) for f in split_files)
    res = run("split", ";".join(split_files), "-n", 4, "--part", 2, "--json")
    (only,) = json.loads(res.output)["parts"]
    assert only == data["parts"][2]
    res = run("split", *split_files, "-n", 4, "--part", 4)
    assert res.exit_code == 2 and "out of range" in res.output


def test_split_write_reshards_every_record_once(split_files, tmp_path):
    out = tmp_path / "out" / "shard"
    res = run("split", *split_files, "-n", 3, "--write", out, "-q")
    assert res.exit_code == 0, res.output
    original = [r for f in split_files for r in recio.RecordReader(f)]
    resharded = []
    for k in range(3):
        reader = recio.IndexedRecordReader(f"{out}_{k}.rec", f"{out}_{k}.idx")
        keys = list(reader.keys())
        records = [reader[key] for key in keys]
        resharded.extend(records)
        # input keys are kept (the golden .idx keys are the labels)
        assert keys == [int(recio.unpack(r)[0].label) for r in records]
    assert resharded == original
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".tmp")]


def test_split_records_balance_and_corrupt_index(split_files, tmp_path):
    res = run("split", *split_files, "-n", 3, "--balance", "records", "--json")
    assert [p["records"] for p in json.loads(res.output)["parts"]] == [34, 34, 32]
    with open(split_files[1][:-4] + ".idx", "w") as f:
        f.write("37\t0\n38\tnot-a-number\n")
    res = run("split", *split_files, "-n", 3, "--balance", "records")
    assert res.exit_code == 2
    assert "part1.idx" in res.output and "line 2" in res.output
    assert "Traceback" not in res.output


def test_split_missing_and_truncated(tmp_path, split_files):
    res = run("split", tmp_path / "nope.rec", "-n", 2)
    assert res.exit_code == 2 and "nope.rec" in res.output and "Traceback" not in res.output
    data = open(split_files[0], "rb").read()
    bad = tmp_path / "trunc.rec"
    bad.write_bytes(data[:-30])
    res = run("split", bad, "-n", 2)
    assert res.exit_code == 2 and "trunc.rec" in res.output and "byte" in res.output
    assert len(res.output.strip().splitlines()) == 1


# -- inspect ---------------------------------------------------------------------------------------
def test_inspect_text_and_json(images_rec):
    res = run("inspect", images_rec, "--show", 2)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "6 records" in out and "image records: 6 (jpeg 6)" in out
    assert "scalar: 3" in out and "vector of 2: 3" in out
    assert "id: 100 .. 105" in out and "index" in out and "consistent" in out
    assert out.count("#0 at byte 0") == 1 and "#1 at byte" in out and "#2" not in out
    data = json.loads(run("inspect", images_rec, "--json").output)
    assert data["images"]["width_range"] == [8, 13] and data["images"]["height_range"] == [9, 9]
    assert data["index"]["ok"] and data["damage"] == []


def test_inspect_face_layout(tmp_path):
    path = str(tmp_path / "faces.rec")
    with recio.IndexedRecordWriter(path, str(tmp_path / "faces.idx")) as w:
        w.write(0, recio.pack(recio.IRHeader(0, [3.0, 5.0], 0, 0), b""))
        w.write(1, recio.pack(recio.IRHeader(0, [0.0, 1.0], 1, 0), jpeg(4, 4)))
        w.write(2, recio.pack(recio.IRHeader(0, [1.0, 1.0], 2, 0), jpeg(4, 4)))
        w.write(3, recio.pack(recio.IRHeader(0, [1.0, 2.0], 3, 0), b""))
        w.write(4, recio.pack(recio.IRHeader(0, [2.0, 3.0], 4, 0), b""))
    res = run("inspect", path)
    assert "layout: face-recognition" in res.output and "consistent" in res.output
    assert "2 images" in res.output and "2 identity records" in res.output


def test_inspect_reports_damage_and_bad_index(split_files):
    with open(split_files[0][:-4] + ".idx", "a") as f:
        f.write("999\t8\n")
    res = run("inspect", split_files[0])
    assert res.exit_code == 0 and "PROBLEMS" in res.output and "key 999 -> byte 8" in res.output
    res = run("inspect", "--index", "/nonexistent.idx", split_files[0])
    assert res.exit_code == 2 and "/nonexistent.idx" in res.output


# -- index -----------------------------------------------------------------------------------------
def test_index_matches_mxnet_rec2idx(golden, tmp_path):
    rec = tmp_path / "tricky.rec"
    shutil.copy(golden / "records" / "tricky.rec", rec)
    res = run("index", rec)
    assert res.exit_code == 0 and "18 records" in res.output
    expected = (golden / "records" / "tricky.idx").read_bytes()
    assert (tmp_path / "tricky.idx").read_bytes() == expected


def test_index_by_id(split_files, golden, tmp_path):
    out = tmp_path / "by_id.idx"
    res = run("index", split_files[2], "--key", "id", "-o", out)
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == (golden / "split" / "part2.idx").read_bytes()
    res = run("index", split_files[2], "--key", "id", "-o", out, "-q", "--force")
    assert res.output == ""


def test_index_errors(tmp_path):
    rec = tmp_path / "plain.rec"
    rec.write_bytes(framing.encode_record(b"short") * 2)
    res = run("index", rec, "--key", "id")
    assert res.exit_code == 2 and "no image header" in res.output and "byte 0" in res.output
    rec.write_bytes(framing.encode_record(b"x" * 40)[:-8])
    res = run("index", rec)
    assert res.exit_code == 2 and "plain.rec" in res.output and "byte 0" in res.output
    assert not (tmp_path / "plain.idx").exists()


# -- verify ----------------------------------------------------------------------------------------
def test_verify_clean_damaged_and_unreadable(split_files, tmp_path):
    res = run("verify", split_files[0])
    assert res.exit_code == 0 and res.output.startswith("OK:")
    data = bytearray(open(split_files[0], "rb").read())
    data[2680:2684] = b"\0\0\0\0"  # the second record's magic
    bad = tmp_path / "bad.rec"
    bad.write_bytes(bytes(data[:-10]))
    res = run("verify", bad)
    assert res.exit_code == 1
    assert "damaged bytes [2680, " in res.output and "DAMAGED" in res.output
    report = json.loads(run("verify", bad, "--json").output)
    assert not report["clean"] and len(report["damage"]) == 2
    assert report["damage"][-1]["end"] == len(data) - 10
    res = run("verify", tmp_path / "missing.rec")
    assert res.exit_code == 2 and "missing.rec" in res.output
    res = run("verify", tmp_path)  # a folder is its .rec files, as every source is
    assert res.exit_code == 1 and "DAMAGED" in res.output and str(bad) in res.output
    (tmp_path / "empty").mkdir()
    res = run("verify", tmp_path / "empty")
    assert res.exit_code == 2 and "no .rec files found" in res.output


def test_verify_index_and_images(images_rec, tmp_path):
    assert run("verify", images_rec, "--images").exit_code == 0
    idx = images_rec[:-4] + ".idx"
    lines = open(idx).read().splitlines()
    with open(idx, "w") as f:
        f.write("\n".join(lines[:-1]) + "\n")  # an entry missing
    res = run("verify", images_rec)
    assert res.exit_code == 1 and "not in the index" in res.output
    with open(idx, "w") as f:
        f.write("0\tgarbage\n")
    res = run("verify", images_rec)
    assert res.exit_code == 1 and "unreadable index" in res.output
    os.unlink(idx)
    broken = str(tmp_path / "broken.rec")
    with recio.RecordWriter(broken) as w:
        w.write(recio.pack(recio.IRHeader(0, 1.0, 1, 0), jpeg(20, 20)))
        w.write(recio.pack(recio.IRHeader(0, 1.0, 2, 0), jpeg(20, 20)[:150]))
    assert run("verify", broken).exit_code == 0  # framing is fine
    res = run("verify", broken, "--images", "--json")
    assert res.exit_code == 1
    (bad,) = json.loads(res.output)["bad_images"]
    assert "id 2" in bad["reason"]


# -- extract ---------------------------------------------------------------------------------------
def test_extract_writes_images_and_a_list_that_repacks(golden, tmp_path):
    src = golden / "im2rec" / "multi.rec"
    out = tmp_path / "ex"
    res = run("extract", src, out)
    assert res.exit_code == 0, res.output
    assert "--pack-label" in res.output
    lst = out / "multi.lst"
    items = list(recio.image.lists.read_list(lst))
    assert len(items) == 13
    # re-pack as im2rec --pass-through --pack-label does: id = index, labels, file bytes
    repacked = [recio.pack(recio.IRHeader(0, list(item.labels), item.index, 0),
                           (out / item.path).read_bytes()) for item in items]
    assert repacked == list(recio.RecordReader(str(src)))


def test_extract_skips_header_only_records(tmp_path):
    path = str(tmp_path / "faces.rec")
    with recio.RecordWriter(path) as w:
        w.write(recio.pack(recio.IRHeader(0, [3.0, 4.0], 0, 0), b""))
        w.write(recio.pack(recio.IRHeader(0, 5.0, 7, 0), jpeg(4, 4)))
        w.write(recio.pack(recio.IRHeader(0, 6.0, 7, 0), jpeg(5, 4)))  # repeated id
    res = run("extract", path, tmp_path / "o", "--json")
    data = json.loads(res.output)
    assert (data["images"], data["skipped"]) == (2, 1)
    assert sorted(os.listdir(tmp_path / "o")) == ["7.jpg", "7_1.jpg", "faces.lst"]
    assert (tmp_path / "o" / "faces.lst").read_text() == \
        "7\t5.000000\t7.jpg\n7\t6.000000\t7_1.jpg\n"
    res = run("extract", tmp_path / "none.rec", tmp_path / "o2")
    assert res.exit_code == 2 and "none.rec" in res.output


# -- help and the installed script ---------------------------------------------------------------
@pytest.mark.parametrize("cmd", ["split", "inspect", "index", "verify", "extract"])
def test_help_has_an_example(cmd):
    res = run(cmd, "--help")
    assert res.exit_code == 0 and "Example" in res.output and f"recio {cmd}" in res.output


@pytest.mark.slow
def test_console_script(script, split_files, tmp_path):
    exe = script("recio")
    ok = subprocess.run([*exe, "verify", split_files[1]], capture_output=True, text=True)
    assert ok.returncode == 0 and "OK" in ok.stdout and ok.stderr == ""
    res = subprocess.run([*exe, "split", *split_files, "-n", "2", "--json"], capture_output=True,
                         text=True)
    assert res.returncode == 0 and len(json.loads(res.stdout)["parts"]) == 2
    res = subprocess.run([*exe, "inspect", split_files[0], "--json"], capture_output=True,
                         text=True)
    assert json.loads(res.stdout)["records"] == 37
    bad = tmp_path / "t.rec"
    bad.write_bytes(open(split_files[1], "rb").read()[:-7])
    res = subprocess.run([*exe, "verify", str(bad)], capture_output=True, text=True)
    assert res.returncode == 1 and "damaged bytes" in res.stdout
    res = subprocess.run([*exe, "index", str(bad)], capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "t.rec" in res.stderr
    res = subprocess.run([*exe, "inspect", str(tmp_path / "absent.rec")], capture_output=True,
                         text=True)
    assert res.returncode == 2 and "absent.rec" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run([*exe, "split", split_files[0], "-n", "0"], capture_output=True, text=True)
    assert res.returncode == 2


@pytest.mark.slow
def test_extract_then_im2rec_gives_the_same_files(script, golden, tmp_path):
    im2rec = script("im2rec")
    for name, extra in (("multi", ["--pack-label"]), ("all", [])):
        out = tmp_path / name
        res = subprocess.run([*script("recio"), "extract", str(golden / "im2rec" / f"{name}.rec"),
                              str(out), "--quiet"], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        res = subprocess.run([*im2rec, str(out / name), str(out), "--pass-through", *extra],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        for ext in (".rec", ".idx"):
            assert (out / (name + ext)).read_bytes() == \
                (golden / "im2rec" / (name + ext)).read_bytes(), name + ext
