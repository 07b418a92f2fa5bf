"""recio writes the bytes MXNet 1.9.1 writes: ``pack_img`` and ``im2rec``, byte for byte.

The references in tests/data/mxnet_bytes were made once by the real MXNet (its
``recordio.pack_img`` and its own ``tools/im2rec.py``, with OpenCV 4.11) by ``make.py`` there.
recio makes them with MXNet's own calls (``cv2.imdecode``, ``cv2.resize``, ``cv2.imencode``) and
whatever OpenCV release is installed.
"""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import cv2

import recio
from recio import mx
from recio.image.pixels import codec, transform
from recio.image.pixels.encoding import encode
from recio.image.packing.settings import PackSettings
from recio.image.pixels.transform import ImageOptions

DATA = pathlib.Path(__file__).parents[2] / "data"
HERE = DATA / "mxnet_bytes"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
ARRAYS = np.load(HERE / "arrays.npz")
def _mxnet_records(prefix: pathlib.Path) -> dict:
    reader = mx.MXIndexedRecordIO(str(prefix.with_suffix(".idx")), str(prefix.with_suffix(".rec")),
                                  "r")
    return {key: reader.read_idx(key) for key in reader.keys}


# -- pack_img -------------------------------------------------------------------------------------

def test_pack_img_writes_mxnets_bytes():
    """Every array of arrays.npz (colour at odd sizes, grey, BGRA, a face crop, 16-bit grey) at
    JPEG qualities 1-100 and PNG levels 0-9 and 95: recio.mx.pack_img, recio.mx.recordio's and
    recio.pack_img (RGB) give MXNet's record, byte for byte."""
    expected = _mxnet_records(HERE / "pack_img")
    assert len(expected) == len(MANIFEST["pack_img"]) == 98
    for key, name, img_fmt, quality in MANIFEST["pack_img"]:
        bgr = ARRAYS[name]
        header = mx.IRHeader(0, float(key), key, 0)
        rgb = bgr[:, :, [2, 1, 0, 3][:bgr.shape[2]]] if bgr.ndim == 3 else bgr
        for record in (mx.pack_img(header, bgr, quality, img_fmt),
                       mx.recordio.pack_img(header, bgr, quality=quality, img_fmt=img_fmt),
                       recio.pack_img(header, rgb, quality, img_fmt)):
            assert record == expected[key], (name, img_fmt, quality)


def test_pack_img_of_a_pillow_image_is_mxnets_too():
    """A Pillow image encodes as its pixels do (the pack_img of a face crop)."""
    expected = _mxnet_records(HERE / "pack_img")
    for key, name, img_fmt, quality in MANIFEST["pack_img"]:
        if name != "face_112x112" or img_fmt == ".jpeg":
            continue
        image = Image.fromarray(np.ascontiguousarray(ARRAYS[name][:, :, ::-1]))
        header = recio.IRHeader(0, float(key), key, 0)
        assert recio.pack(header, encode(image, img_fmt, quality)) == expected[key]


def test_pack_img_of_other_formats_is_opencvs():
    """As MXNet's pack_img, other extensions go to cv2.imencode with its defaults."""
    bgr = ARRAYS["bgr_101x77"]
    header = mx.IRHeader(0, 1.0, 1, 0)
    for img_fmt in (".bmp", ".BMP", ".tif", ".ppm"):
        assert mx.pack_img(header, bgr, 95, img_fmt) == mx.pack(
            header, cv2.imencode(img_fmt, bgr)[1].tobytes())


# -- im2rec ---------------------------------------------------------------------------------------

def _run_im2rec(tmp_path, name):
    spec = MANIFEST["im2rec"][name]
    prefix = tmp_path / name
    shutil.copy(HERE / "im2rec" / spec["list"], prefix.with_suffix(".lst"))
    proc = subprocess.run([sys.executable, "-m", "recio.im2rec", str(prefix), str(DATA),
                           *spec["args"], "--quiet"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return prefix


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MANIFEST["im2rec"]))
def test_im2rec_writes_mxnets_rec_and_idx(tmp_path, name):
    """The command as users run it, on the list MXNet's tools/im2rec.py packed (45 images: every
    decoding rule of OpenCV, photos shrunk 1.3x-5x, halved, enlarged, EXIF-rotated, alpha,
    16-bit): the .rec and .idx are MXNet's, byte for byte. Runs: --resize with and without
    --center-crop, --color 0/1/-1, --quality 50-100, --encoding .png at levels 3 and 9."""
    prefix = _run_im2rec(tmp_path, name)
    for suffix in (".rec", ".idx"):
        assert prefix.with_suffix(suffix).read_bytes() == \
            (HERE / "im2rec" / name).with_suffix(suffix).read_bytes(), suffix


def test_im2rec_library_writes_mxnets_bytes(tmp_path):
    """recio.image.packing.pipeline.pack_list (what the command calls) with the options of each run,
    in threads."""
    from recio.image.packing.pipeline import pack_list

    for name, spec in MANIFEST["im2rec"].items():
        args = spec["args"]
        value = {a: b for a, b in zip(args, args[1:] + [""])}
        options = ImageOptions(resize=int(value.get("--resize", 0)),
                               center_crop="--center-crop" in args,
                               color=int(value.get("--color", 1)),
                               quality=int(value.get("--quality", 95)),
                               encoding=value.get("--encoding", ".jpg"))
        lst = tmp_path / f"{name}.lst"
        shutil.copy(HERE / "im2rec" / spec["list"], lst)
        pack_list(lst, DATA, PackSettings(options, workers=2))
        assert lst.with_suffix(".rec").read_bytes() == (
            HERE / "im2rec" / name).with_suffix(".rec").read_bytes(), name


@pytest.mark.slow
def test_the_older_im2rec_references_are_reproduced(golden, tmp_path):
    """tests/data/golden/im2rec (made by MXNet for the sizes and headers): all.rec and
    multi.rec are now reproduced byte for byte too."""
    root = str(golden / "im2rec" / "images")
    for name, args in (("all", ["--resize", "32", "--quality", "90"]),
                       ("multi", ["--pack-label", "--resize", "24", "--center-crop"])):
        shutil.copy(golden / "im2rec" / f"{name}.lst", tmp_path)
        proc = subprocess.run([sys.executable, "-m", "recio.im2rec", str(tmp_path / name), root,
                               *args, "--quiet"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        for suffix in (".rec", ".idx"):
            assert (tmp_path / f"{name}{suffix}").read_bytes() == \
                (golden / "im2rec" / f"{name}{suffix}").read_bytes()


# -- the opt-in fast mode -------------------------------------------------------------------------

@pytest.mark.slow
def test_the_fast_mode_trades_mxnets_bytes_for_speed(tmp_path):
    """--resize-mode antialias writes other bytes, with MXNet's sizes, labels and record count;
    --help states the cost."""
    spec = MANIFEST["im2rec"]["resize64_crop_q75"]
    expected = _mxnet_records(HERE / "im2rec" / "resize64_crop_q75")
    prefix = tmp_path / "antialias"
    shutil.copy(HERE / "im2rec" / spec["list"], prefix.with_suffix(".lst"))
    proc = subprocess.run([sys.executable, "-m", "recio.im2rec", str(prefix), str(DATA),
                           *spec["args"], "--resize-mode", "antialias", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ours = _mxnet_records(prefix)
    assert ours.keys() == expected.keys()
    differ = 0
    for key, record in ours.items():
        header, img = mx.unpack_img(record)
        theirs_header, theirs = mx.unpack_img(expected[key])
        assert header == theirs_header and img.shape == theirs.shape
        differ += record != expected[key]
    assert differ > len(ours) // 2
    proc = subprocess.run([sys.executable, "-m", "recio.im2rec", "--help"], capture_output=True,
                          text=True, timeout=60)
    text = " ".join(proc.stdout.split())
    assert "dB PSNR" in text and "byte for byte" in text
    assert "--resize-mode [mxnet|antialias]" in text


def test_options_are_checked():
    with pytest.raises(ValueError, match="resize_mode must be"):
        ImageOptions(resize_mode="lanczos")
    with pytest.raises(ValueError, match="JPEG quality must be 1-100"):
        ImageOptions(quality=0)


@settings(max_examples=60, deadline=None)
@given(height=st.integers(1, 90), width=st.integers(1, 90), channels=st.sampled_from([0, 3, 4]),
       quality=st.integers(0, 100), seed=st.integers(0, 2**32 - 1), bgr=st.booleans())
def test_encode_is_cv2_imencode_in_any_layout(height, width, channels, quality, seed, bgr):
    """encode's channel order, alpha and quality handling end at MXNet's own call: the bytes
    are cv2.imencode's of the BGR pixels, for grey, colour and BGRA arrays of any size."""
    rng = np.random.default_rng(seed)
    shape = (height, width) if channels == 0 else (height, width, channels)
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    as_bgr = pixels if channels == 0 or bgr else pixels[:, :, [2, 1, 0, 3][:channels]]
    if channels == 4:
        as_bgr = as_bgr[:, :, :3]
    reference = cv2.imencode(".jpg", np.ascontiguousarray(as_bgr),
                             [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()
    assert encode(pixels, ".jpg", quality, bgr=bgr) == reference


def test_sixteen_bit_sources_as_mxnet_keeps_them():
    """--color -1 keeps 16 bits, as cv2.imread(-1): a PNG output stays 16-bit, a JPEG output
    saturates (OpenCV's imencode converts with saturation), as MXNet's im2rec writes them."""
    source = (HERE / "images" / "grey16_60x44.png").read_bytes()
    png = transform.transform_image(source, ImageOptions(color=-1, encoding=".png"))
    assert np.array_equal(codec.decode(png, -1), codec.decode(source, -1))
    jpeg = transform.transform_image(source, ImageOptions(color=-1, quality=100))
    deep = codec.decode(source, -1)
    assert deep.dtype == np.uint16 and deep.max() > 255
    assert jpeg == encode(np.minimum(deep, 255).astype(np.uint8), ".jpg", 100)


def test_the_reference_files_are_what_make_py_says():
    """The manifest matches the files (a regenerated folder must keep its promises)."""
    versions = MANIFEST["versions"]
    assert versions["mxnet"] == "1.9.1" and versions["cv2"].startswith("4.")
    for name, count in versions["packed"].items():
        assert len(_mxnet_records(HERE / "im2rec" / name)) == count
        listed = (HERE / "im2rec" / MANIFEST["im2rec"][name]["list"]).read_text()
        assert count == len(listed.splitlines()) == versions["listed"][
            MANIFEST["im2rec"][name]["list"][:-4]]
