"""No command writes over one of its inputs, or over an existing output without --force; a
multi-file output appears whole or not at all. Each case runs the real command and checks that
every input is byte-identical afterwards."""
import hashlib
import json
import os
import shutil
import subprocess

import pytest

import recio
from recio.errors import RecordIOError
from recio.records.shards import reshard as reshard_module
from recio.records.shards.reshard import reshard

from conftest import GOLDEN


def _tree(folder):
    """{relative path: sha256} of every file under ``folder``."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, folder)] = hashlib.sha256(open(path, "rb").read()).digest()
    return out


def _recio(script, *args, cwd=None):
    return subprocess.run([*script("recio"), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture
def packed(tmp_path):
    """data.rec/.idx/.lst: 13 images packed by MXNet (the golden im2rec output)."""
    for ext in ("rec", "idx", "lst"):
        shutil.copy(GOLDEN / "im2rec" / f"all.{ext}", tmp_path / f"data.{ext}")
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("how", ["same", pytest.param("symlink", marks=pytest.mark.posix_only(
    "makes a symlink, which Windows allows only with a privilege")), "hardlink"])
def test_index_never_writes_over_its_rec(script, packed, how):
    rec = packed / "data.rec"
    target = {"same": rec, "symlink": packed / "link.idx", "hardlink": packed / "hard.idx"}[how]
    if how == "symlink":
        target.symlink_to(rec)
    elif how == "hardlink":
        os.link(rec, target)
    before = _tree(packed)
    proc = _recio(script, "index", rec, "-o", target, "--force")
    assert proc.returncode == 2 and "is an input of this command" in proc.stderr
    assert _tree(packed) == before and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_index_replaces_an_existing_idx_only_with_force(script, packed):
    (packed / "data.idx").write_text("0\t0\n")
    before = _tree(packed)
    proc = _recio(script, "index", packed / "data.rec")
    assert proc.returncode == 2 and "already exists; use --force" in proc.stderr
    assert _tree(packed) == before
    proc = _recio(script, "index", packed / "data.rec", "--force", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["records"] == 13 and report["idx_path"] == str(packed / "data.idx")
    assert (packed / "data.idx").read_text().splitlines()[1].startswith("1\t")


def _shards(folder, n=4):
    folder.mkdir()
    proc = reshard(str(GOLDEN / "im2rec" / "all.rec"), n, folder / "train", keys="renumber")
    return [p.rec_path for p in proc.parts]


def test_resharding_in_place_is_refused_before_anything_is_written(script, tmp_path):
    _shards(tmp_path / "shards")
    before = _tree(tmp_path)
    proc = _recio(script, "split", str(tmp_path / "shards" / "train_*.rec"), "-n", "8",
                  "--write", tmp_path / "shards" / "train")
    assert proc.returncode == 2 and "is an input of this command" in proc.stderr
    assert _tree(tmp_path) == before


@pytest.mark.slow
def test_existing_parts_are_replaced_only_with_force(script, tmp_path):
    rec = GOLDEN / "im2rec" / "all.rec"
    (tmp_path / "out_1.idx").write_text("mine")
    proc = _recio(script, "split", rec, "-n", "2", "--write", tmp_path / "out")
    assert proc.returncode == 2 and "already exists; use --force" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["out_1.idx"]
    proc = _recio(script, "split", rec, "-n", "2", "--write", tmp_path / "out", "--force")
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["out_0.idx", "out_0.rec", "out_1.idx", "out_1.rec"]


@pytest.mark.slow
def test_merging_files_with_the_same_keys_refuses_or_renumbers(script, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        for ext in ("rec", "idx"):
            shutil.copy(GOLDEN / "im2rec" / f"all.{ext}", folder / f"x.{ext}")
    before = _tree(tmp_path)
    proc = _recio(script, "split", a / "x.rec", b / "x.rec", "-n", "2", "--write",
                  tmp_path / "m")
    assert proc.returncode == 2 and "repeats" in proc.stderr and "--keys renumber" in proc.stderr
    assert _tree(tmp_path) == before  # no part, no temporary file
    proc = _recio(script, "split", a / "x.rec", b / "x.rec", "-n", "2", "--write",
                  tmp_path / "m", "--keys", "renumber")
    assert proc.returncode == 0, proc.stderr
    keys = []
    for k in range(2):
        keys += [line.split("\t")[0] for line in
                 (tmp_path / f"m_{k}.idx").read_text().splitlines()]
    assert keys == [str(i) for i in range(26)]
    records = [r for k in range(2) for r in recio.RecordReader(str(tmp_path / f"m_{k}.rec"))]
    assert records == list(recio.RecordReader(str(a / "x.rec"))) * 2


def test_a_failure_in_a_later_part_leaves_no_part_at_all(tmp_path, monkeypatch):
    real = reshard_module._copy_range
    calls = []

    def failing(span, dst, progress):
        calls.append(span)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(span, dst, progress)

    monkeypatch.setattr(reshard_module, "_copy_range", failing)
    with pytest.raises(OSError):
        reshard(str(GOLDEN / "im2rec" / "all.rec"), 4, tmp_path / "p")
    assert os.listdir(tmp_path) == []  # parts 0 and 1 were complete: they are gone too


@pytest.mark.slow
def test_extract_into_a_folder_that_is_not_empty_needs_force(script, packed):
    before = _tree(packed)
    proc = _recio(script, "extract", packed / "data.rec", packed)
    assert proc.returncode == 2
    assert f"Error: {packed}: the folder is not empty (" in proc.stderr
    assert "use --force to extract into it anyway" in proc.stderr
    assert _tree(packed) == before  # the original paths are still there
    (packed / "out").mkdir()
    (packed / "out" / "3.jpg").write_bytes(b"mine")
    (packed / "out" / "notes.txt").write_bytes(b"keep")
    proc = _recio(script, "extract", packed / "data.rec", packed / "out")
    assert proc.returncode == 2 and "(2 entries: 3.jpg, notes.txt)" in proc.stderr
    assert sorted(os.listdir(packed / "out")) == ["3.jpg", "notes.txt"]  # nothing written
    proc = _recio(script, "extract", packed / "data.rec", packed / "out", "--force")
    assert proc.returncode == 0, proc.stderr
    assert f"warning: replaced 1 existing file in {packed / 'out'} (--force): " \
        f"{packed / 'out' / '3.jpg'}" in proc.stderr  # never silently
    assert len(os.listdir(packed / "out")) == 15 and (packed / "out" / "notes.txt").exists()
    again = _recio(script, "extract", packed / "data.rec", packed / "out", "--force",
                   "--json")
    assert again.returncode == 0 and len(json.loads(again.stdout)["replaced"]) == 14


@pytest.mark.slow
def test_extract_never_writes_over_the_rec(script, packed):
    before = _tree(packed)
    proc = _recio(script, "extract", packed / "data.rec", packed, "--lst", "data.rec",
                  "--force")
    assert proc.returncode == 2 and "is an input of this command" in proc.stderr
    assert _tree(packed) == before


def test_reshard_keys_argument_is_checked(tmp_path):
    with pytest.raises(ValueError):
        reshard(str(GOLDEN / "im2rec" / "all.rec"), 2, tmp_path / "q", keys="fresh")
    with pytest.raises(RecordIOError):
        rec = str(GOLDEN / "im2rec" / "all.rec")
        reshard([rec, rec], 1, tmp_path / "dup")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_extract_puts_images_in_their_class_folders_and_repacks_the_same(script, tmp_path):
    root = GOLDEN / "im2rec" / "images"
    prefix = tmp_path / "data"
    for extra in (["--list", "--recursive", "--no-shuffle"], ["--pass-through"]):
        proc = subprocess.run([*script("im2rec"), prefix, root, *extra], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    proc = _recio(script, "extract", f"{prefix}.rec", out, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["classes"] == str(out / "data.classes.tsv")
    lines = (out / "data.lst").read_text().splitlines()
    folders = {line.split("\t")[-1].split("/")[0] for line in lines if "/" in line}
    assert folders == {"cat", "dog", "zebra"}  # "." (images at the top) stays flat
    proc = subprocess.run([*script("im2rec"), out / "data", out, "--pass-through"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    original = list(recio.RecordReader(f"{prefix}.rec"))
    assert list(recio.RecordReader(str(out / "data.rec"))) == original
