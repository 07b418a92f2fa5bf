"""recio inspect's dataset statistics, checked against datasets whose label and size
distributions are known; the --plot picture; files that are not record files."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import recio
from recio.image.tools.dataset_stats import (
    BINS,
    PERCENTILES,
    dataset_stats,
    weighted_percentiles,
)
from recio.image.lists import write_classes

from conftest import command, need

#: (width, height) of the images, cycling with the record number
SIZES = [(20, 10), (30, 30), (10, 40), (64, 48)]


def _write(path, n, label=lambda i: i % 7, ids=lambda i: i, header=None, png=True):
    """``n`` image records with known labels and sizes; optionally InsightFace header record 0
    and identity records at the tail."""
    rec, idx = str(path), str(path)[:-4] + ".idx"
    with recio.IndexedRecordWriter(rec, idx) as w:
        key = 0
        if header is not None:
            w.write(key, recio.pack(recio.IRHeader(2, header, 0, 0), b""))
            key += 1
        for i in range(n):
            width, height = SIZES[i % len(SIZES)]
            img = np.full((height, width, 3), i % 255, np.uint8)
            w.write(key, recio.pack_img(recio.IRHeader(0, label(i), ids(i), 0), img,
                                        img_fmt=".png" if png else ".jpg"))
            key += 1
    return rec


def test_known_labels_sizes_and_duplicates(tmp_path):
    rec = _write(tmp_path / "k.rec", 700, ids=lambda i: i if i not in (5, 6) else 4)
    stats = dataset_stats(rec, sample=0)
    hist = stats.labels[0]
    assert hist.kind == "classes" and hist.values == list(range(7))
    assert hist.counts == [100] * 7 and stats.num_classes == 7
    assert stats.image_records == 700 and stats.header_records == 0
    assert stats.duplicate_ids == 2 and stats.duplicate_examples == [(4, 3)]
    assert stats.sizes_sampled == 700
    # 175 images of each size: percentiles are exact
    widths = sorted(w for w, _ in SIZES)
    assert stats.sizes["width"]["p0"] == widths[0] and stats.sizes["width"]["p100"] == widths[-1]
    assert stats.sizes["width"]["p25"] == widths[0] and stats.sizes["width"]["p50"] == widths[1]
    assert stats.sizes["short_side"]["p50"] == 10 and stats.sizes["short_side"]["p75"] == 30
    assert stats.sizes["aspect"]["p0"] == 0.25 and stats.sizes["aspect"]["p100"] == 2.0


def test_label_vectors_are_counted_per_position_and_floats_are_binned(tmp_path):
    rec, idx = str(tmp_path / "v.rec"), str(tmp_path / "v.idx")
    img = np.zeros((8, 8, 3), np.uint8)
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(300):
            w.write(i, recio.pack_img(recio.IRHeader(3, [i % 3, 10 + i % 2, i / 7.0], i, 0),
                                      img, img_fmt=".png"))
    stats = dataset_stats(rec)
    assert [h.kind for h in stats.labels] == ["classes", "classes", "bins"]
    assert stats.labels[0].counts == [100, 100, 100]
    assert stats.labels[1].values == [10, 11] and stats.labels[1].counts == [150, 150]
    assert len(stats.labels[2].counts) == BINS and sum(stats.labels[2].counts) == 300
    assert stats.label_widths == {3: 300}


def test_face_layout_header_records_and_the_suggestion(tmp_path):
    rec = str(tmp_path / "faces.rec")
    with recio.IndexedRecordWriter(rec, rec[:-4] + ".idx") as w:
        w.write(0, recio.pack(recio.IRHeader(2, [7, 9], 0, 0), b""))
        img = np.zeros((12, 12, 3), np.uint8)
        for key in range(1, 7):
            w.write(key, recio.pack_img(recio.IRHeader(2, [key // 4, 0], key, 0), img))
        w.write(7, recio.pack(recio.IRHeader(2, [1, 4], 7, 0), b""))
        w.write(8, recio.pack(recio.IRHeader(2, [4, 7], 8, 0), b""))
    stats = dataset_stats(rec)
    assert stats.image_records == 6 and stats.header_records == 3
    assert stats.face_layout_files == [rec]
    assert any("recio repack" in s and "--images-only" in s for s in stats.suggestions)
    assert stats.labels[0].counts == [3, 3]


@pytest.mark.slow
def test_infinite_header_labels_do_not_crash_and_json_is_valid(script, tmp_path):
    rec = _write(tmp_path / "inf.rec", 5, header=[float("inf"), float("inf")])
    for cmd in (["inspect", rec], ["verify", rec], ["inspect", rec, "--json"],
                ["verify", rec, "--json"]):
        proc = subprocess.run([*script("recio"), *cmd], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        if "--json" in cmd:
            json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    rec = _write(tmp_path / "nan.rec", 4, label=lambda i: float("nan") if i % 2 else i)
    proc = subprocess.run([*script("recio"), "inspect", rec, "--json", "--show", "4"],
                          capture_output=True, text=True)
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert data["dataset"]["labels"][0]["nonfinite"] == 2


@pytest.mark.parametrize("kind, content, expect", [
    ("jpeg", None, "an image (jpeg)"),
    ("lst", "0\t1.000000\ta/b.jpg\n1\t0.000000\tc.jpg\n", "an image list (.lst)"),
    ("idx", "0\t0\n1\t1056\n", "an index (.idx)"),
    ("txt", "hello world\n", "a text file"),
])
@pytest.mark.slow
def test_files_that_are_not_record_files_are_named(script, tmp_path, kind, content, expect):
    path = tmp_path / f"x.{kind}"
    if content is None:
        Image.new("RGB", (4, 4)).save(path, format="JPEG")
    else:
        path.write_text(content)
    proc = subprocess.run([*script("recio"), "inspect", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and expect in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_empty_file_has_no_records(tmp_path):
    empty = tmp_path / "e.rec"
    empty.write_bytes(b"")
    stats = dataset_stats(str(empty))
    assert stats.records == 0 and stats.labels == []


@pytest.mark.slow
def test_many_files_by_glob_with_class_names(script, tmp_path):
    (tmp_path / "shards").mkdir()
    for k in range(3):
        _write(tmp_path / "shards" / f"train_{k}.rec", 40 + 10 * k, label=lambda i: i % 4)
    write_classes(tmp_path / "shards" / "train.classes.tsv",
                  [("cat", 0), ("dog", 1), ("owl", 2), ("yak", 3)])
    pattern = str(tmp_path / "shards" / "train_*.rec")
    stats = dataset_stats(pattern, sample=0)
    assert len(stats.files) == 3 and stats.image_records == 40 + 50 + 60
    assert stats.class_names == {0: "cat", 1: "dog", 2: "owl", 3: "yak"}
    assert sum(stats.labels[0].counts) == 150
    proc = subprocess.run([*script("recio"), "inspect", pattern], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert "dataset (3 files, 150 records" in proc.stdout and "(cat)" in proc.stdout
    data = json.loads(subprocess.run([*script("recio"), "inspect", pattern, "--json"],
                                     capture_output=True, text=True).stdout)
    assert len(data["files"]) == 3 and data["dataset"]["num_classes"] == 4
    with pytest.raises(FileNotFoundError, match="no file matches"):
        dataset_stats(str(tmp_path / "nothing_*.rec"))


def test_sampled_sizes_are_weighted_by_file(tmp_path):
    big = _write(tmp_path / "big.rec", 400, label=lambda i: 0)  # all four sizes
    rec, idx = str(tmp_path / "small.rec"), str(tmp_path / "small.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:  # 4 images of 100x100
        for i in range(4):
            w.write(i, recio.pack_img(recio.IRHeader(0, 0, i, 0),
                                      np.zeros((100, 100, 3), np.uint8), img_fmt=".png"))
    stats = dataset_stats([big, rec], sample=40, seed=3)
    assert stats.sizes_sampled == 44
    # the 4 large images are 1% of the data: only p100 sees them
    assert stats.sizes["width"]["p99"] <= 64 and stats.sizes["width"]["p100"] == 100


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.integers(0, 1000), min_size=1, max_size=60))
def test_unweighted_percentiles_are_numpys_inverted_cdf(values):
    got = weighted_percentiles(np.array(values, float))
    ordered = sorted(values)
    for q in PERCENTILES:
        k = max(0, int(np.ceil(q / 100 * len(ordered))) - 1)
        assert got[f"p{q:g}"] == ordered[k]


@pytest.mark.slow
def test_plot_draws_a_picture(script, tmp_path):
    need("matplotlib")
    rec = _write(tmp_path / "p.rec", 120)
    out = tmp_path / "stats.png"
    proc = subprocess.run([*script("recio"), "inspect", rec, "--plot", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    img = Image.open(out)
    img.verify()
    pixels = np.asarray(Image.open(out).convert("L"))
    assert img.size[0] >= 600 and len(np.unique(pixels)) > 10  # not a blank canvas
    proc = subprocess.run([*script("recio"), "inspect", rec, "--plot", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "use --force" in proc.stderr
    proc = subprocess.run([*script("recio"), "inspect", rec, "--plot", rec, "--force"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "is an input of this command" in proc.stderr


@pytest.mark.slow
def test_plot_without_matplotlib_says_what_to_install(tmp_path):
    rec = _write(tmp_path / "m.rec", 10)
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from recio.cli.main import main\n"
            f"sys.argv = ['recio', 'inspect', {rec!r}, '--plot', {str(tmp_path / 'x.png')!r}]\n"
            "main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2 and "pip install" in proc.stderr and "plot" in proc.stderr
    assert "Traceback" not in proc.stderr and not os.path.exists(tmp_path / "x.png")


@pytest.mark.slow
def test_the_command_prints_the_histogram_and_percentiles(tmp_path):
    rec = _write(tmp_path / "c.rec", 70)
    proc = subprocess.run([*command("recio"), "inspect", rec], capture_output=True, text=True)
    assert "label: 7 classes, 10 .. 10 records per class" in proc.stdout
    assert "image size percentiles (all 70 images):" in proc.stdout
    assert "image size (all 70 images): width 10..64" in proc.stdout


def _percentile_rows(stdout):
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "image size percentiles" in line)
    return lines[start + 1:start + 6]


@pytest.mark.slow
def test_the_percentile_table_keeps_its_columns_apart(tmp_path):
    """Aspect ratios such as 0.442623 once ran into each other (0.4426230.442623...): every
    row has one cell per column, right-aligned under its header."""
    rec = str(tmp_path / "a.rec")
    with recio.IndexedRecordWriter(rec, rec[:-4] + ".idx") as w:
        for i, (width, height) in enumerate([(27, 61), (61, 27), (44, 47), (100, 7), (3, 97)]):
            img = np.full((height, width, 3), 9, np.uint8)
            w.write(i, recio.pack_img(recio.IRHeader(0, 0.0, i, 0), img, img_fmt=".png"))
    proc = subprocess.run([*command("recio"), "inspect", rec], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    header, *rows = _percentile_rows(proc.stdout)
    assert header.split() == [f"p{q:g}" for q in PERCENTILES]
    for row in rows:
        name, *cells = row.split()
        assert name in ("width:", "height:", "short_side:", "aspect:") and len(cells) == 9, row
        assert row.endswith(cells[-1]) and len(row) == len(header)  # aligned to the header
    aspect = dict(zip(header.split(), rows[3].split()[1:]))
    assert aspect["p0"] == "0.03093" and aspect["p100"] == "14.29"  # 3/97 and 100/7


@pytest.mark.slow
def test_every_image_is_measured_when_there_are_fewer_than_the_sample(tmp_path):
    """A small first image once made the sampler guess a large file and skip images ("sample of
    286" of 300); a file with fewer images than --sample has every one measured, and a larger
    one says how many of how many."""
    rec = str(tmp_path / "s.rec")
    rng = np.random.default_rng(0)
    with recio.IndexedRecordWriter(rec, rec[:-4] + ".idx") as w:
        for i in range(300):
            side = 8 if i == 0 else 64 + i % 50
            img = rng.integers(0, 255, (side, side + 3, 3), dtype=np.uint8)
            w.write(i, recio.pack_img(recio.IRHeader(0, 0.0, i, 0), img, quality=90))
        w.write(300, recio.pack(recio.IRHeader(0, 0.0, 300, 0), b"\xff\xd8\xff\xda\x00\x02"))
    proc = subprocess.run([*command("recio"), "inspect", rec], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "image size (all 301 images; 1 of them without a size in their header): width " \
        "11..116, height 8..113" in proc.stdout
    assert "image size percentiles (all 301 images; 1 of them without a size in their " \
        "header):" in proc.stdout
    assert dataset_stats(rec).files[0].images.sampled == 301
    proc = subprocess.run([*command("recio"), "inspect", rec, "--sample", "100"],
                          capture_output=True, text=True)
    assert "image size percentiles (a sample of 100 of 301 images" in proc.stdout
    report = json.loads(subprocess.run([*command("recio"), "inspect", rec, "--json"],
                                       capture_output=True, text=True).stdout)
    assert report["images"]["sampled"] == 301 and report["images"]["unsized"] == 1
    assert report["dataset"]["sizes_sampled"] == 300 and report["dataset"]["sizes_unsized"] == 1


@pytest.mark.slow
def test_plot_axes_show_whole_counts_and_a_single_value_as_itself(tmp_path, monkeypatch):
    """All images 256 x 256 in 3 records: each size panel is one bar labelled 256 (aspect 1),
    not an axis from 255.5 to 256.5, and no count axis has a fractional tick."""
    need("matplotlib")
    from click.testing import CliRunner

    from recio.cli.main import recio as recio_group
    from recio.image.tools import plot
    rec = str(tmp_path / "one.rec")
    with recio.IndexedRecordWriter(rec, rec[:-4] + ".idx") as w:
        for i in range(3):
            img = np.full((256, 256, 3), 40 * i, np.uint8)
            w.write(i, recio.pack_img(recio.IRHeader(0, float(i % 2), i, 0), img))
    drawn = []
    real = plot.draw_stats
    monkeypatch.setattr(plot, "draw_stats", lambda *a, **k: drawn.append(real(*a, **k))
                        or drawn[-1])
    out = tmp_path / "stats.png"
    result = CliRunner().invoke(recio_group, ["inspect", rec, "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG") and f"plot: {out}" in result.output
    fig, = drawn
    label_axes, *size_axes = fig.axes
    assert [ax.get_title().rsplit(" (", 1)[0] for ax in size_axes] == [
        "width", "height", "short side", "aspect (w/h)"]
    for ax, value in zip(size_axes, ["256", "256", "256", "1"]):
        assert [t.get_text() for t in ax.get_xticklabels()] == [value], ax.get_title()
        low, high = ax.get_xlim()
        assert low < float(value) < high
    for ax in fig.axes:
        ticks = ax.get_yticks()
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ax.get_title()
