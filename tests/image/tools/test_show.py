"""recio show: a grid of known images lands where it should, with labels, by key/label/random."""
import json
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

import recio
from recio.errors import OutputExistsError, RecordIOError
from recio.image.lists import write_classes
from recio.image.tools.show import CAPTION, draw_grid

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]


@pytest.fixture
def coloured(tmp_path):
    """20 solid-colour PNGs, label i % 4, behind a face-layout header record (key 0)."""
    rec, idx = str(tmp_path / "c.rec"), str(tmp_path / "c.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        w.write(0, recio.pack(recio.IRHeader(2, [1, 21], 0, 0), b""))
        for key in range(1, 21):
            img = np.full((30 + key, 50, 3), COLOURS[key % 4], np.uint8)
            w.write(key, recio.pack_img(recio.IRHeader(0, key % 4, key, 0), img, img_fmt=".png"))
    return rec


def _tile_colours(path, n, cols, size):
    grid = np.asarray(Image.open(path).convert("RGB"))
    return [tuple(int(v) for v in grid[(i // cols) * (size + CAPTION) + size // 2,
                                       (i % cols) * size + size // 2]) for i in range(n)]


def test_first_images_in_index_order_skipping_the_header_record(coloured, tmp_path):
    out = tmp_path / "grid.png"
    result = draw_grid(coloured, out, count=6, columns=3, tile_size=64)
    assert [t.key for t in result.tiles] == [1, 2, 3, 4, 5, 6]
    assert result.skipped_not_image == 1
    assert Image.open(out).size == (3 * 64, 2 * (64 + CAPTION))
    assert _tile_colours(out, 6, 3, 64) == [COLOURS[k % 4] for k in range(1, 7)]


def test_by_key_by_label_and_random(coloured, tmp_path):
    out = tmp_path / "k.png"
    result = draw_grid(coloured, out, keys=[7, 2, 11], tile_size=32)
    assert [t.key for t in result.tiles] == [7, 2, 11]
    assert _tile_colours(out, 3, 2, 32) == [COLOURS[3], COLOURS[2], COLOURS[3]]
    result = draw_grid(coloured, tmp_path / "l.png", count=4, label=2, tile_size=32)
    assert [t.key for t in result.tiles] == [2, 6, 10, 14]
    assert all(t.label == [2.0] for t in result.tiles)
    a = draw_grid(coloured, tmp_path / "r1.png", count=5, randomly=True, seed=7)
    b = draw_grid(coloured, tmp_path / "r2.png", count=5, randomly=True, seed=7)
    c = draw_grid(coloured, tmp_path / "r3.png", count=5, randomly=True, seed=8)
    assert [t.key for t in a.tiles] == [t.key for t in b.tiles] != [t.key for t in c.tiles]
    assert (tmp_path / "r1.png").read_bytes() == (tmp_path / "r2.png").read_bytes()
    with pytest.raises(RecordIOError, match="key 99 is not in the index"):
        draw_grid(coloured, tmp_path / "m.png", keys=[99])
    with pytest.raises(RecordIOError, match="no image record with label 9"):
        draw_grid(coloured, tmp_path / "m.png", label=9)


def test_class_names_come_from_the_classes_file(coloured, tmp_path):
    write_classes(tmp_path / "c.classes.tsv", [("red", 0), ("green", 1), ("blue", 2),
                                               ("yellow", 3)])
    result = draw_grid(coloured, tmp_path / "n.png", count=4)
    assert [t.class_name for t in result.tiles] == ["green", "blue", "yellow", "red"]


def test_never_over_an_input_or_an_existing_picture(coloured, tmp_path):
    before = open(coloured, "rb").read()
    with pytest.raises(OutputExistsError):
        draw_grid(coloured, coloured)
    (tmp_path / "old.png").write_bytes(b"mine")
    with pytest.raises(OutputExistsError):
        draw_grid(coloured, tmp_path / "old.png")
    assert (tmp_path / "old.png").read_bytes() == b"mine"
    draw_grid(coloured, tmp_path / "old.png", force=True)
    assert open(coloured, "rb").read() == before


@pytest.mark.slow
def test_the_command(script, coloured, tmp_path):
    out = tmp_path / "cmd.png"
    proc = subprocess.run([*script("recio"), "show", coloured, "-o", str(out), "-n", "4",
                           "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [t["key"] for t in report["tiles"]] == [1, 2, 3, 4]
    assert report["skipped"] == {"not_an_image": 1, "undecodable": 0}
    Image.open(out).verify()
    proc = subprocess.run([*script("recio"), "show", coloured, "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "use --force" in proc.stderr
    proc = subprocess.run([*script("recio"), "show", coloured, "-o", str(tmp_path / "x.png"),
                           "--keys", "a,b"], capture_output=True, text=True)
    assert proc.returncode == 2 and "integer keys" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([*script("recio"), "show", coloured, "-o", str(tmp_path / "y.png"),
                           "--label", "1", "-n", "100"], capture_output=True, text=True)
    assert proc.returncode == 0 and "drew 5 images" in proc.stdout
    assert "only 5 of the 100 images" in proc.stderr
    assert not os.path.exists(tmp_path / "x.png")


def test_undecodable_images_are_skipped_and_counted(tmp_path):
    rec, idx = str(tmp_path / "b.rec"), str(tmp_path / "b.idx")
    good = np.full((20, 20, 3), COLOURS[1], np.uint8)
    with recio.IndexedRecordWriter(rec, idx) as w:
        w.write(0, recio.pack(recio.IRHeader(0, 0, 0, 0), b"\x89PNG\r\n\x1a\n" + b"\0" * 40))
        w.write(1, recio.pack_img(recio.IRHeader(0, 1, 1, 0), good, img_fmt=".png"))
    result = draw_grid(rec, tmp_path / "g.png", count=4)
    assert [t.key for t in result.tiles] == [1]
    assert result.skipped_undecodable == 1 and result.skipped_not_image == 0
