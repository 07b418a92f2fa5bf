"""im2rec --list on awkward trees: symlink cycles, unlistable names, existing lists, and saying
what was left out."""
import json
import os
import shutil
import subprocess

import pytest

from recio.errors import OutputExistsError
from recio.image import list_folder
from recio.image.list_folder import make_lists
from recio.image.lists import read_classes, read_list

from conftest import GOLDEN


def _jpeg(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(GOLDEN / "im2rec" / "images" / "cat" / "cat_0.jpg", path)


def _run(script, *args, cwd=None, env=None):
    return subprocess.run([*script("im2rec"), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.mark.slow
@pytest.mark.posix_only("makes symlinks, which Windows allows only with a privilege")
def test_symlink_cycles_end_and_each_folder_is_listed_once(script, tmp_path):
    root = tmp_path / "root"
    _jpeg(root / "a" / "x.jpg")
    _jpeg(root / "b" / "y.jpg")
    (root / "a" / "to_b").symlink_to("../b")  # a two-way cycle a -> b -> a
    (root / "b" / "to_a").symlink_to("../a")
    (root / "a" / "self").symlink_to(".")  # a folder linking to itself
    proc = _run(script, tmp_path / "out", root, "--list", "--recursive", "--no-shuffle")
    assert proc.returncode == 0, proc.stderr
    paths = [item.path for item in read_list(tmp_path / "out.lst")]
    assert sorted(paths) == ["a/x.jpg", "b/y.jpg"]  # each real folder once, by its own name
    assert "did not enter 3 symlinked folder(s)" in proc.stderr  # a/self, a/to_b, b/to_a


@pytest.mark.slow
@pytest.mark.posix_only("makes files named with a tab, CR or LF, which Windows forbids")
@pytest.mark.parametrize("bad", ["ta\tb.jpg", "cr\r.jpg", "lf\n.jpg"])
def test_names_a_list_cannot_hold_are_skipped_and_counted(script, tmp_path, bad):
    root = tmp_path / "root"
    _jpeg(root / "cls" / "good.jpg")
    _jpeg(root / "cls" / bad)
    proc = _run(script, tmp_path / "out", root, "--list", "--recursive")
    assert proc.returncode == 0, proc.stderr
    assert [i.path for i in read_list(tmp_path / "out.lst")] == ["cls/good.jpg"]
    assert "skipped 1 image(s) whose path holds a tab, CR or LF" in proc.stderr
    assert repr(f"cls/{bad}") in proc.stderr
    # and the list packs without stopping on that name
    pack = _run(script, tmp_path / "out", root)
    assert pack.returncode == 0, pack.stderr
    assert (tmp_path / "out.rec").stat().st_size > 0


@pytest.mark.slow
def test_existing_lists_are_kept_unless_force(script, tmp_path):
    root = GOLDEN / "im2rec" / "images"
    (tmp_path / "all.lst").write_text("mine\n")
    proc = _run(script, tmp_path / "all", root, "--list", "--recursive")
    assert proc.returncode == 2 and "already exists; use --force" in proc.stderr
    assert (tmp_path / "all.lst").read_text() == "mine\n"
    assert sorted(os.listdir(tmp_path)) == ["all.lst"]  # no classes file, no temporaries
    proc = _run(script, tmp_path / "all", root, "--list", "--recursive", "--force")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "all.lst").read_bytes() == (GOLDEN / "im2rec" / "all.lst").read_bytes()
    assert read_classes(tmp_path / "all.classes.tsv") == {0: ".", 1: "cat", 2: "dog",
                                                           3: "zebra"}


def test_an_existing_classes_file_is_an_output_too(tmp_path):
    (tmp_path / "all.classes.tsv").write_text("label\tclass\n0\tmine\n")
    with pytest.raises(OutputExistsError):
        make_lists(tmp_path / "all", GOLDEN / "im2rec" / "images", recursive=True)
    assert not (tmp_path / "all.lst").exists()


def test_lists_appear_all_together_or_not_at_all(tmp_path, monkeypatch):
    def broken(f, mapping):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(list_folder, "write_classes_lines", broken)
    with pytest.raises(OSError):
        make_lists(tmp_path / "s", GOLDEN / "im2rec" / "images", recursive=True,
                   train_ratio=0.6, test_ratio=0.2)
    assert os.listdir(tmp_path) == []  # no train/test/val list, no temporary file


@pytest.mark.slow
def test_ratios_over_one_are_warned_and_counted(script, tmp_path):
    root = GOLDEN / "im2rec" / "images"
    proc = _run(script, tmp_path / "r", root, "--list", "--recursive", "--train-ratio", "0.8",
                "--test-ratio", "0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    counts = {os.path.basename(x["path"]): x["images"] for x in report["lists"]}
    assert counts == {"r_test.lst": 6, "r_train.lst": 7}  # MXNet's arithmetic: 13 = 6 + 7
    assert report["skipped"]["in_no_list"] == 0
    assert report["train_shortfall"] == 3  # int(13 * 0.8) = 10 asked, 7 left after test
    assert any("is 1.3, over 1: the train list(s) hold 3 image(s) fewer" in w
               for w in report["warnings"])


@pytest.mark.slow
def test_parts_rounded_down_leave_images_in_no_list(script, tmp_path):
    root = GOLDEN / "im2rec" / "images"
    proc = _run(script, tmp_path / "q", root, "--list", "--recursive", "--train-ratio", "0.7",
                "--test-ratio", "0.3")
    assert proc.returncode == 0, proc.stderr
    listed = sum(1 for name in ("q_train.lst", "q_test.lst")
                 for _ in read_list(tmp_path / name))
    assert listed == 12  # int(13 * 0.7) + int(13 * 0.3) = 9 + 3: one image in no list
    assert "1 image(s) are in no list" in proc.stderr


@pytest.mark.slow
def test_json_report_is_valid_and_complete(script, tmp_path):
    root = GOLDEN / "im2rec" / "images"
    proc = _run(script, tmp_path / "j", root, "--list", "--recursive", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["lists"] == [{"path": str(tmp_path / "j.lst"), "images": 13}]
    assert report["classes_path"] == str(tmp_path / "j.classes.tsv")
    assert [c["folder"] for c in report["classes"]] == [".", "cat", "dog", "zebra"]
    assert report["warnings"] == []


@pytest.mark.slow
def test_listing_logs_progress_and_a_summary(script, tmp_path):
    env = dict(os.environ, RECIO_PROGRESS_SECONDS="0")
    proc = _run(script, tmp_path / "p", GOLDEN / "im2rec" / "images", "--list", "--recursive",
                env=env)
    assert proc.returncode == 0
    assert "listing: " in proc.stderr and "file" in proc.stderr
    assert "listed 13 images" in proc.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_test_ratio_beside_train_ratio_one_is_pointed_out(script, tmp_path):
    proc = _run(script, tmp_path / "t", GOLDEN / "im2rec" / "images", "--list", "--recursive",
                "--test-ratio", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert "--test-ratio is ignored with --train-ratio 1" in proc.stderr
    assert sum(1 for _ in read_list(tmp_path / "t.lst")) == 13
