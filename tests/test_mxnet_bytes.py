"""recio writes the bytes MXNet 1.9.1 writes: ``pack_img`` and ``im2rec``, byte for byte.

The references in tests/data/mxnet_bytes were made once by the real MXNet (its
``recordio.pack_img`` and its own ``tools/im2rec.py``, with OpenCV 4.11) by ``make.py`` there.
Every comparison runs twice: with OpenCV installed (recio then calls ``cv2.resize`` and
``cv2.imencode``, as MXNet does) and without it (recio's own bit-exact copy of OpenCV's bilinear
resize, Pillow's JPEG encoder, and ``recio.image.pngenc``'s copy of libpng's choices).
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import recio
import recio.optional
from recio import mx
from recio.image import codec, transform
from recio.image.encoding import encode
from recio.image.linear import resize_linear
from recio.image.pngenc import encode_png
from recio.image.transform import ImageOptions

from conftest import need

DATA = pathlib.Path(__file__).parent / "data"
HERE = DATA / "mxnet_bytes"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
ARRAYS = np.load(HERE / "arrays.npz")
#: runs a Python in which OpenCV cannot be imported (as after a plain ``pip install recio``)
WITHOUT_OPENCV = "import sys; sys.modules['cv2'] = None\n"


@pytest.fixture(params=["opencv", "no opencv"])
def opencv(request, monkeypatch):
    """Each test twice: OpenCV installed, and hidden (the default install's code paths)."""
    if request.param == "opencv":
        need("cv2")
        monkeypatch.setattr(transform, "RESIZER", "opencv")
    else:
        monkeypatch.setitem(recio.optional._found, "cv2", None)
        monkeypatch.setattr(transform, "RESIZER", "pillow")
    return request.param


def _mxnet_records(prefix: pathlib.Path) -> dict:
    reader = mx.MXIndexedRecordIO(str(prefix.with_suffix(".idx")), str(prefix.with_suffix(".rec")),
                                  "r")
    return {key: reader.read_idx(key) for key in reader.keys}


# -- pack_img -------------------------------------------------------------------------------------

def test_pack_img_writes_mxnets_bytes(opencv):
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


def test_pack_img_of_a_pillow_image_is_mxnets_too(opencv):
    """A Pillow image encodes as its pixels do (the pack_img of a face crop)."""
    expected = _mxnet_records(HERE / "pack_img")
    for key, name, img_fmt, quality in MANIFEST["pack_img"]:
        if name != "face_112x112" or img_fmt == ".jpeg":
            continue
        image = Image.fromarray(np.ascontiguousarray(ARRAYS[name][:, :, ::-1]))
        header = recio.IRHeader(0, float(key), key, 0)
        assert recio.pack(header, encode(image, img_fmt, quality)) == expected[key]


def test_pack_img_of_other_formats_is_opencvs(monkeypatch):
    """As MXNet's pack_img, other extensions go to cv2.imencode with its defaults; without
    OpenCV they are refused, saying what to install."""
    cv2 = need("cv2")
    bgr = ARRAYS["bgr_101x77"]
    header = mx.IRHeader(0, 1.0, 1, 0)
    for img_fmt in (".bmp", ".BMP", ".tif", ".ppm"):
        assert mx.pack_img(header, bgr, 95, img_fmt) == mx.pack(
            header, cv2.imencode(img_fmt, bgr)[1].tobytes())
    monkeypatch.setitem(recio.optional._found, "cv2", None)
    with pytest.raises(recio.errors.ImageError, match="need OpenCV"):
        mx.pack_img(header, bgr, 95, ".bmp")


# -- im2rec ---------------------------------------------------------------------------------------

def _run_im2rec(tmp_path, name, prelude=""):
    spec = MANIFEST["im2rec"][name]
    prefix = tmp_path / name
    shutil.copy(HERE / "im2rec" / spec["list"], prefix.with_suffix(".lst"))
    code = prelude + "from recio.im2rec import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, str(prefix), str(DATA), *spec["args"],
                           "--quiet"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RECIO_RESIZER": "auto"})
    assert proc.returncode == 0, proc.stderr
    return prefix


@pytest.mark.parametrize("name", sorted(MANIFEST["im2rec"]))
def test_im2rec_writes_mxnets_rec_and_idx(tmp_path, name):
    """The command as users run it, on the list MXNet's tools/im2rec.py packed (45 images: every
    decoding rule of OpenCV, photos shrunk 1.3x-5x, halved, enlarged, EXIF-rotated, alpha,
    16-bit): the .rec and .idx are MXNet's, byte for byte. Runs: --resize with and without
    --center-crop, --color 0/1/-1, --quality 50-100, --encoding .png at levels 3 and 9."""
    need("cv2")
    prefix = _run_im2rec(tmp_path, name)
    for suffix in (".rec", ".idx"):
        assert prefix.with_suffix(suffix).read_bytes() == \
            (HERE / "im2rec" / name).with_suffix(suffix).read_bytes(), suffix


@pytest.mark.parametrize("name", ["resize64_crop_q75", "grey_crop_resize100_q50",
                                  "unchanged_q85", "png_resize40", "png_unchanged_level3"])
def test_im2rec_writes_mxnets_bytes_without_opencv(tmp_path, name):
    """The same without OpenCV (a plain pip install): recio's copies of OpenCV's resize and of
    libpng, Pillow's JPEG encoder."""
    prefix = _run_im2rec(tmp_path, name, WITHOUT_OPENCV)
    for suffix in (".rec", ".idx"):
        assert prefix.with_suffix(suffix).read_bytes() == \
            (HERE / "im2rec" / name).with_suffix(suffix).read_bytes(), suffix


def test_im2rec_library_writes_mxnets_bytes(opencv, tmp_path):
    """recio.image.packing.pack_list (what the command calls) with the options of each run,
    with and without OpenCV, in threads."""
    from recio.image.packing import pack_list

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
        pack_list(lst, DATA, options, workers=2)
        assert lst.with_suffix(".rec").read_bytes() == (
            HERE / "im2rec" / name).with_suffix(".rec").read_bytes(), name


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


# -- the opt-in fast paths ------------------------------------------------------------------------

def test_fast_options_trade_mxnets_bytes_for_speed(tmp_path):
    """--encoder fast (simplejpeg) and --resize-mode antialias write other bytes, with MXNet's
    sizes, labels and record count; --help states the cost of each."""
    need("simplejpeg")
    spec = MANIFEST["im2rec"]["resize64_crop_q75"]
    expected = _mxnet_records(HERE / "im2rec" / "resize64_crop_q75")
    for extra in (["--encoder", "fast"], ["--resize-mode", "antialias"]):
        prefix = tmp_path / extra[1]
        shutil.copy(HERE / "im2rec" / spec["list"], prefix.with_suffix(".lst"))
        proc = subprocess.run([sys.executable, "-m", "recio.im2rec", str(prefix), str(DATA),
                               *spec["args"], *extra, "--quiet"], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        ours = _mxnet_records(prefix)
        assert ours.keys() == expected.keys()
        differ = 0
        for key, record in ours.items():
            header, img = mx.unpack_img(record)
            theirs_header, theirs = mx.unpack_img(expected[key])
            assert header == theirs_header and img.shape == theirs.shape
            differ += record != expected[key]
        assert differ > len(ours) // 2, extra
    proc = subprocess.run([sys.executable, "-m", "recio.im2rec", "--help"], capture_output=True,
                          text=True, timeout=60)
    text = " ".join(proc.stdout.split())
    assert "--encoder [exact|fast]" in text and "dB PSNR" in text and "byte for byte" in text
    assert "--resize-mode [mxnet|antialias]" in text


def test_simplejpeg_cannot_write_libjpegs_bytes_below_quality_96():
    """Why the exact encoder is not simplejpeg: its TurboJPEG call (tjCompress2) takes the fast
    integer DCT below quality 96 unless asked for the accurate one, which simplejpeg never
    does (its fastdct flag changes nothing); at 96 and above the bytes are libjpeg's. Should a
    simplejpeg release change this, this test says so."""
    simplejpeg = need("simplejpeg")
    rgb = np.ascontiguousarray(ARRAYS["bgr_101x77"][:, :, ::-1])
    for quality in (50, 90, 95, 96, 100):
        exact = encode(rgb, ".jpg", quality)
        for fastdct in (False, True):
            ours = simplejpeg.encode_jpeg(rgb, quality, "RGB", "420", fastdct=fastdct)
            assert (ours == exact) == (quality >= 96), (quality, fastdct)
        assert (encode(rgb, ".jpg", quality, encoder="fast") == exact) == (quality >= 96)


# -- the pieces, against OpenCV itself ------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(height=st.integers(1, 90), width=st.integers(1, 90), channels=st.sampled_from([0, 3, 4]),
       quality=st.integers(0, 100), seed=st.integers(0, 2**32 - 1), bgr=st.booleans())
def test_exact_jpeg_encoders_agree_with_opencv(height, width, channels, quality, seed, bgr):
    """OpenCV's imencode and Pillow's save (recio's exact encoder with and without OpenCV) give
    the same JPEG bytes for grey, colour and BGRA arrays of any size and quality."""
    cv2 = need("cv2")
    rng = np.random.default_rng(seed)
    shape = (height, width) if channels == 0 else (height, width, channels)
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    as_bgr = pixels if channels == 0 or bgr else pixels[:, :, [2, 1, 0, 3][:channels]]
    if channels == 4:
        as_bgr = as_bgr[:, :, :3]
    reference = cv2.imencode(".jpg", np.ascontiguousarray(as_bgr),
                             [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()
    assert encode(pixels, ".jpg", quality, bgr=bgr) == reference
    saved = recio.optional._found.get("cv2")
    recio.optional._found["cv2"] = None
    try:
        assert encode(pixels, ".jpg", quality, bgr=bgr) == reference
    finally:
        recio.optional._found["cv2"] = saved


@settings(max_examples=80, deadline=None)
@given(height=st.integers(1, 70), width=st.integers(1, 70), channels=st.sampled_from([1, 3, 4]),
       deep=st.booleans(), level=st.integers(0, 9), kind=st.sampled_from(["noise", "smooth",
                                                                         "flat"]),
       seed=st.integers(0, 2**32 - 1))
def test_png_copy_of_libpng_agrees_with_opencv(height, width, channels, deep, level, kind, seed):
    """recio.image.pngenc writes OpenCV's PNG bytes: every filter choice, window size, level,
    8 and 16 bits, grey, RGB and RGBA."""
    cv2 = need("cv2")
    rng = np.random.default_rng(seed)
    top = 65535 if deep else 255
    shape = (height, width, channels)
    if kind == "noise":
        pixels = rng.integers(0, top + 1, shape)
    elif kind == "smooth":
        pixels = np.clip(np.cumsum(rng.integers(-3, 4, shape), axis=1) + top // 2, 0, top)
    else:
        pixels = np.full(shape, rng.integers(0, top + 1))
    pixels = pixels.astype(np.uint16 if deep else np.uint8)
    bgr = pixels[:, :, 0] if channels == 1 else pixels[:, :, [2, 1, 0, 3][:channels]]
    reference = cv2.imencode(".png", np.ascontiguousarray(bgr),
                             [cv2.IMWRITE_PNG_COMPRESSION, level])[1].tobytes()
    assert encode_png(pixels if channels > 1 else pixels[:, :, 0], level) == reference


@pytest.mark.parametrize("shape", [(112, 112, 3), (200, 300, 3), (500, 700, 4), (181, 181, 1),
                                   (3, 12000, 3), (130, 64, 1)])
def test_uncompressed_png_blocks_are_zlibs(shape):
    """Level 0: zlib's stored blocks end where zlib ends them under libpng's calls (rows fed
    one by one, an 8 KiB output buffer), also past 64 KiB and for rows of 36 KB."""
    cv2 = need("cv2")
    for dtype in (np.uint8, np.uint16):
        pixels = np.random.default_rng(sum(shape)).integers(0, 256, shape).astype(dtype)
        bgr = pixels[:, :, 0] if shape[2] == 1 else pixels[:, :, [2, 1, 0, 3][:shape[2]]]
        reference = cv2.imencode(".png", np.ascontiguousarray(bgr),
                                 [cv2.IMWRITE_PNG_COMPRESSION, 0])[1].tobytes()
        assert encode_png(pixels if shape[2] > 1 else pixels[:, :, 0], 0) == reference


@settings(max_examples=150, deadline=None)
@given(height=st.integers(1, 120), width=st.integers(1, 120), channels=st.sampled_from([0, 3, 4]),
       out_h=st.integers(1, 150), out_w=st.integers(1, 150), halve=st.booleans(),
       deep=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_linear_resize_is_opencvs(height, width, channels, out_h, out_w, halve, deep, seed):
    """recio.image.linear.resize_linear equals cv2.resize(INTER_LINEAR) bit for bit: shrinking,
    enlarging, exact halving (OpenCV's area average), one-pixel sides; 16-bit images against
    OpenCV's own code (its pip build sends them to Intel IPP otherwise)."""
    cv2 = need("cv2")
    rng = np.random.default_rng(seed)
    if halve and height % 2 == 0 and width % 2 == 0:
        out_h, out_w = height // 2, width // 2
    shape = (height, width) if channels == 0 else (height, width, channels)
    pixels = rng.integers(0, 65536 if deep else 256, shape).astype(
        np.uint16 if deep else np.uint8)
    used = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        reference = cv2.resize(pixels, (out_w, out_h))
    finally:
        cv2.ipp.setUseIPP(used)
    assert np.array_equal(resize_linear(pixels, (out_w, out_h)), reference)


def test_linear_resize_refuses_what_it_cannot_do():
    with pytest.raises(TypeError, match="uint8 or uint16"):
        resize_linear(np.zeros((4, 4), np.float32), (2, 2))
    with pytest.raises(ValueError, match="empty output size"):
        resize_linear(np.zeros((4, 4), np.uint8), (0, 2))
    same = np.arange(12, dtype=np.uint8).reshape(3, 4)
    copy = resize_linear(same, (4, 3))
    assert np.array_equal(copy, same) and copy is not same


def test_codec_names_say_what_makes_the_bytes(monkeypatch):
    """What the default options use, with and without OpenCV, and with the fast options."""
    need("cv2")
    monkeypatch.setattr(transform, "RESIZER", "opencv")
    assert transform.codec_names() == {"decoder": "simplejpeg", "resizer": "opencv",
                                   "encoder": "opencv"}
    fast = ImageOptions(resize_mode="antialias", encoder="fast")
    assert transform.codec_names(fast)["encoder"] == "simplejpeg"
    monkeypatch.setitem(recio.optional._found, "cv2", None)
    monkeypatch.setattr(transform, "RESIZER", "cykooz")
    assert transform.codec_names() == {"decoder": "simplejpeg", "resizer": "numpy",
                                   "encoder": "pillow"}
    assert transform.codec_names(fast)["resizer"] == "cykooz"
    with pytest.raises(ValueError, match="encoder must be"):
        ImageOptions(encoder="turbo")
    with pytest.raises(ValueError, match="resize_mode must be"):
        ImageOptions(resize_mode="lanczos")
    with pytest.raises(ValueError, match="encoder must be"):
        encode(np.zeros((2, 2), np.uint8), ".jpg", encoder="turbo")


def test_sixteen_bit_sources_as_mxnet_keeps_them(opencv):
    """--color -1 keeps 16 bits, as cv2.imread(-1): a PNG output stays 16-bit, a JPEG output
    saturates (OpenCV's imencode converts with saturation), as MXNet's im2rec writes them."""
    source = (HERE / "images" / "grey16_60x44.png").read_bytes()
    png = transform.transform_image(source, ImageOptions(color=-1, encoding=".png"))
    assert np.array_equal(codec.decode(png, -1), codec.decode(source, -1))
    jpeg = transform.transform_image(source, ImageOptions(color=-1, quality=100))
    deep = codec.decode(source, -1)
    assert deep.dtype == np.uint16 and deep.max() > 255
    assert jpeg == encode(np.minimum(deep, 255).astype(np.uint8), ".jpg", 100)
    with pytest.raises(recio.errors.ImageError, match="render_pixels"):
        transform.render_image((DATA / "mxnet_pixels" / "images" / "rgb16.png").read_bytes(),
                           ImageOptions(color=-1, encoding=".png"))


def test_the_reference_files_are_what_make_py_says():
    """The manifest matches the files (a regenerated folder must keep its promises)."""
    versions = MANIFEST["versions"]
    assert versions["mxnet"] == "1.9.1" and versions["cv2"].startswith("4.")
    for name, count in versions["packed"].items():
        assert len(_mxnet_records(HERE / "im2rec" / name)) == count
        listed = (HERE / "im2rec" / MANIFEST["im2rec"][name]["list"]).read_text()
        assert count == len(listed.splitlines()) == versions["listed"][
            MANIFEST["im2rec"][name]["list"][:-4]]
