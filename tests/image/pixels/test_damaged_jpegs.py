"""Damaged JPEGs as MXNet handles them: what libjpeg decodes with a warning (a cut-off end, stray
bytes, a corrupt stretch of scan data) decodes; what nothing decodes is skipped.

The references in tests/data/mxnet_damaged were made once by the real MXNet 1.9.1
(``make.py`` there, on the images ``make_images.py`` damaged): its own ``tools/im2rec.py``
packs of the folder, its ``ImageRecordIter`` over a ``--pass-through`` pack of the damaged
bytes, and what ``cv2.imread`` and ``mx.image.imdecode`` made of each file.
"""
import json
import pathlib
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pytest

import recio
import recio.mx as mx
from recio.image.pixels.codec import decode

HERE = pathlib.Path(__file__).parents[2] / "data" / "mxnet_damaged"
MXNET = HERE / "mxnet"
MANIFEST = json.loads((MXNET / "manifest.json").read_text())
EXPECTED = np.load(MXNET / "expected.npz")
#: what libjpeg recovers, and how (MXNet's cv2.imread decoded every one of them)
RECOVERED = ("cut_40.jpg", "cut_75.jpg", "cut_98.jpg", "no_end_marker.jpg", "stray_bytes.jpg",
             "reserved_marker.jpg")


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, run in MANIFEST["im2rec"].items()
                                  if "--pass-through" not in run["args"]])
def test_a_pack_of_damaged_jpegs_is_mxnets_byte_for_byte(tmp_path, name):
    """im2rec, as users run it, on the folder MXNet's im2rec.py packed: the same images
    recovered, the same ones skipped, the .rec and .idx byte for byte MXNet's."""
    run = MANIFEST["im2rec"][name]
    prefix = tmp_path / name
    shutil.copy(HERE / run["list"], prefix.with_suffix(".lst"))
    proc = subprocess.run([sys.executable, "-m", "recio.im2rec", str(prefix), str(HERE),
                           *run["args"], "--num-thread", "2"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"packed {run['records']} images, skipped 4" in proc.stdout
    for suffix in (".rec", ".idx"):
        assert prefix.with_suffix(suffix).read_bytes() == \
            (MXNET / name).with_suffix(suffix).read_bytes(), suffix
    errors = prefix.with_suffix(".errors.tsv").read_text()
    for unreadable in ("cut.png", "empty.jpg", "headers_only.jpg", "text.jpg"):
        assert unreadable in errors


@pytest.mark.slow
def test_a_pass_through_pack_keeps_the_damaged_bytes(tmp_path):
    """--pass-through stores the files as they are, damaged ones too, as MXNet's does; an
    empty file is the one record recio leaves out (counted: MXNet stores a record with no
    image, which its own ImageRecordIter dies on, see the manifest)."""
    prefix = tmp_path / "raw"
    shutil.copy(HERE / "damaged.lst", prefix.with_suffix(".lst"))
    proc = subprocess.run([sys.executable, "-m", "recio.im2rec", str(prefix), str(HERE),
                           "--pass-through", "--quiet"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    with recio.IndexedRecordReader(prefix.with_suffix(".rec")) as ours, \
            recio.IndexedRecordReader(MXNET / "raw_damaged.rec") as theirs:
        assert set(theirs.keys()) - set(ours.keys()) == {4}  # empty.jpg
        for key in ours.keys():
            assert ours[key] == theirs[key]
    assert MANIFEST["iter"]["damaged"]["returncode"] == -8  # MXNet's iterator: SIGFPE


@pytest.mark.parametrize("name", RECOVERED)
def test_a_recovered_jpeg_is_cv2_imread_of_the_file(tmp_path, name):
    """The codec's rule: the pixels are those cv2.imread gives for the file (libjpeg's own
    recovery: a file that ends early is read as if it ended there), whatever entry point
    decodes the bytes."""
    data = (HERE / "images" / name).read_bytes()
    want = cv2.imread(str(HERE / "images" / name), cv2.IMREAD_COLOR)
    assert want is not None and MANIFEST["decoders"][name]["cv2.imread"] == list(want.shape)
    np.testing.assert_array_equal(decode(data, 1, bgr=True), want)
    header = recio.IRHeader(0, 1.0, 7, 0)
    np.testing.assert_array_equal(mx.unpack_img(recio.pack(header, data), 1)[1], want)
    np.testing.assert_array_equal(recio.unpack_img(recio.pack(header, data))[1],
                                  want[:, :, ::-1])


@pytest.mark.parametrize("name", RECOVERED)
def test_mx_image_imdecode_agrees_with_mxnet_above_the_damage(name):
    """mx.image.imdecode gives MXNet's image size, and MXNet's pixels up to the damage: its
    built-in OpenCV 3.4.2 repeats the last row it decoded where libjpeg's recovery (and so
    recio's, and cv2.imread's) gives grey."""
    data = (HERE / "images" / name).read_bytes()
    ours = mx.image.imdecode(data, to_rgb=0).asnumpy()
    theirs = EXPECTED[f"imdecode|{name}"]
    assert ours.shape == theirs.shape
    differ = np.nonzero((ours != theirs).any(axis=(1, 2)))[0]
    first = differ[0] if len(differ) else ours.shape[0]
    # the share of the rows that arrived, at least (a file cut at 40% of its bytes keeps a
    # third of its rows: the JPEG's headers come first)
    kept = {"cut_40.jpg": 0.3, "cut_75.jpg": 0.6, "cut_98.jpg": 0.85, "no_end_marker.jpg": 0.85}
    assert first >= ours.shape[0] * kept.get(name, 1.0), (name, first)


def test_the_iterator_yields_what_mxnets_yields():
    """recio.mx.io.ImageRecordIter over the damaged bytes: as many batches as MXNet's (11:
    every recoverable image), MXNet's labels, MXNet's pixels for every image nothing was cut
    from."""
    args = dict(MANIFEST["iter"]["args"])
    args["data_shape"] = tuple(args["data_shape"])
    it = mx.io.ImageRecordIter(path_imgrec=str(MXNET / "raw_recoverable.rec"),
                               path_imgidx=str(MXNET / "raw_recoverable.idx"), **args)
    names = [line.split("\t")[2].strip() for line in
             (HERE / "recoverable.lst").read_text().splitlines()]
    batches = list(it)
    assert len(batches) == MANIFEST["iter"]["recoverable_batches"] == 11
    assert it.num_skipped == 0
    for k, batch in enumerate(batches):
        np.testing.assert_array_equal(batch.label[0].asnumpy(), EXPECTED[f"iter|{k}|label"])
        if not names[k].startswith("images/cut_") and "no_end" not in names[k]:
            np.testing.assert_array_equal(batch.data[0].asnumpy(), EXPECTED[f"iter|{k}|data"])


@pytest.mark.slow
def test_verify_images_names_what_libjpeg_had_to_repair(script):
    """The readers decode a repaired JPEG, as MXNet's do; recio verify --images, a checker,
    reports it (libjpeg's own warning, or the missing end marker) and exits 1."""
    proc = subprocess.run(script("recio") + ["verify", str(MXNET / "raw_recoverable.rec"),
                                             "--images"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.count("decodes only as libjpeg repairs it") == 5  # cut_*, reserved, stray
    assert "extraneous bytes before marker" in out and "premature end of data segment" in out
    assert out.count("the end-of-image marker it lacks") == 1  # no_end_marker.jpg
    assert "DAMAGED" in out and "6 bad images" in out
