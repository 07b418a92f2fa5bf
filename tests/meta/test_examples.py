"""The training examples run on a user's own .rec: number of classes read from the data."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import command, need

EXAMPLES = pathlib.Path(__file__).parents[2] / "examples"


pytestmark = pytest.mark.slow  # every test here runs the commands many times or waits


def _user_dataset(tmp_path, classes=3, per_class=12):
    """A folder per class, listed and packed by im2rec as a user would."""
    rng = np.random.default_rng(0)
    for c in range(classes):
        folder = tmp_path / "photos" / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = np.clip(rng.normal(60 + 60 * c, 20, (40, 44, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.jpg")
    prefix, root = str(tmp_path / "mine"), str(tmp_path / "photos")
    for extra in (["--list", "--recursive"], []):
        proc = subprocess.run([*command("im2rec"), prefix, root, *extra], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
    return prefix + ".rec"


def test_imagebatchiter_example_on_a_users_rec(tmp_path):
    rec = _user_dataset(tmp_path)
    proc = subprocess.run([sys.executable, str(EXAMPLES / "train_imagebatchiter.py"), rec],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"{rec}: 3 classes" in proc.stdout and "epoch 2: 36 images" in proc.stdout


def test_torch_example_on_a_users_rec(tmp_path):
    need("torch")
    rec = _user_dataset(tmp_path, classes=4)
    proc = subprocess.run([sys.executable, str(EXAMPLES / "train_torch.py"), rec],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"{rec}: 4 classes" in proc.stdout and proc.stdout.count("epoch 1: 48 images") == 2


def test_an_example_refuses_labels_that_are_not_class_ids(tmp_path):
    import recio

    rec = str(tmp_path / "float.rec")
    with recio.IndexedRecordWriter(rec, rec[:-4] + ".idx") as w:
        for i in range(4):
            w.write(i, recio.pack_img(recio.IRHeader(0, i + 0.5, i, 0),
                                      np.zeros((40, 40, 3), np.uint8)))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "train_imagebatchiter.py"), rec],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "not class ids" in proc.stderr


@pytest.mark.posix_only("runs examples/demo.sh (make demo) with bash and ls")
def test_make_demo_says_where_its_files_are_and_keeps_its_tables_whole(tmp_path):
    """examples/demo.sh (`make demo`) names its output folder first and last, and its last table
    keeps its header above the rows it shows."""
    out = tmp_path / "demo"
    env = {**os.environ, "PYTHON": sys.executable, "DEMO_OUT": str(out)}
    proc = subprocess.run(["bash", str(EXAMPLES / "demo.sh")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"The demo writes its files to {out}/"
    start = lines.index(f"== the demo's files, in {out}/")
    listed = {line.split()[-1] for line in lines[start:] if line.startswith("-rw")}
    assert listed == set(os.listdir(out)) >= {"records.rec", "records.idx", "photos.lst",
                                              "photos.rec", "photos.idx", "minibatch_seq.rec"}
    header = lines.index("step  seqs  samples  minibatch-ids     loss      | uninterrupted run")
    assert "== 4." in lines[header - 4] and lines[header + 1].split()[0].isdigit()
    assert "  -- killed here; a new process restored the checkpoint --" in lines[header:start]
    assert lines[start - 2] == ("minibatch stream and final weights identical to the "
                                "uninterrupted run: True")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("mine")
    refused = subprocess.run(["bash", str(EXAMPLES / "demo.sh")], capture_output=True,
                             text=True, env={**env, "DEMO_OUT": str(tmp_path / "mine")})
    assert refused.returncode == 2 and "is not empty" in refused.stderr
    assert os.listdir(tmp_path / "mine") == ["keep.txt"]


def test_the_torch_example_explains_itself_and_a_wrong_path(tmp_path):
    need("torch")
    script = str(EXAMPLES / "train_torch.py")
    helped = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True,
                            timeout=300)
    assert helped.returncode == 0 and "usage:" in helped.stdout
    missing = str(tmp_path / "nope.rec")
    proc = subprocess.run([sys.executable, script, missing], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"{missing}: no such file (give a .rec packed by im2rec)"
