"""The one image codec: MXNet's exact pixels from every entry point, DCT scaling, the
decompression-bomb guard everywhere, and one encode.

The reference arrays in tests/data/mxnet_pixels/expected.npz were made once by the real MXNet
1.9.1 (``make.py`` there): ``mx.image.imdecode`` (the OpenCV built into MXNet) and
``mx.recordio.unpack_img`` (``cv2.imdecode``), on the records of ``pixels.rec``.
"""
import importlib.util
import io
import pathlib
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image, ImageOps

import recio
import recio.mx as mx
from conftest import need
from recio.errors import ImageError, SkippedRecordWarning
from recio.image.pixels import png_srgb
from recio.image.batches.augmenter import Augmenter
from recio.image.pixels.codec import dct_eighths, decode, decode_scaled
from recio.image.pixels.encoding import encode
from recio.image.header import decode_image
from recio.image.batches.iterators import ImageBatchIter
from recio.image.pixels.transform import ImageOptions, render_pixels, transform_image
from recio.image.tools.verify import check_images

DATA = pathlib.Path(__file__).parents[2] / "data" / "mxnet_pixels"
EXPECTED = dict(np.load(DATA / "expected.npz"))
NAMES = [str(n) for n in EXPECTED["names"]]
with recio.IndexedRecordReader(str(DATA / "pixels.rec"), str(DATA / "pixels.idx")) as _reader:
    RECORDS = {key: _reader[key] for key in _reader.keys()}
    OFFSETS = list(_reader.offsets.values())


def record(name):
    return RECORDS[NAMES.index(name)]


def image_bytes(name):
    return (DATA / "images" / name).read_bytes()


def assert_exact(got, want, name=""):
    got = np.asarray(got)
    if got.ndim == 2 and want.ndim == 3 and want.shape[2] == 1:
        got = got[:, :, None]
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() == 0, f"{name}: {np.count_nonzero(diff)} pixels differ, by up to {diff.max()}"


# -- MXNet's pixels -----------------------------------------------------------------------------

@pytest.mark.parametrize("iscolor", [1, 0, -1])
@pytest.mark.parametrize("name", NAMES)
def test_mx_unpack_img_gives_mxnets_pixels(name, iscolor):
    """recio.mx.unpack_img(s, iscolor) == mxnet.recordio.unpack_img(s, iscolor): BGR, OpenCV's
    greyscale (libjpeg's luma, libpng's weights with the file's gamma, cvtColor's weights),
    OpenCV's channel layout for -1, and OpenCV 4's EXIF orientation for 1 and 0."""
    want = EXPECTED[f"unpack_img|{name}|{iscolor}"]
    header, got = mx.unpack_img(record(name), iscolor)
    assert header.id == NAMES.index(name)
    assert_exact(got, want, name)


@pytest.mark.parametrize("flag, to_rgb", [(1, 1), (1, 0), (0, 0)])
@pytest.mark.parametrize("name", NAMES)
def test_mx_image_imdecode_gives_mxnets_pixels(name, flag, to_rgb):
    """recio.mx.image.imdecode == mxnet.image.imdecode (MXNet's own OpenCV: no EXIF rotation,
    (H, W, 1) for greyscale)."""
    want = EXPECTED[f"imdecode|{name}|{flag}|{to_rgb}"]
    got = mx.image.imdecode(image_bytes(name), flag=flag, to_rgb=to_rgb)
    assert_exact(got.asnumpy(), want, name)


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith(".jpg")])
def test_jpegs_decode_to_mxnets_pixels(name):
    for color, key in ((1, "1|1"), (0, "0|0")):
        assert_exact(decode(image_bytes(name), color), EXPECTED[f"imdecode|{name}|{key}"],
                     f"{name} {color}")


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith(".png")])
def test_pngs_decode_to_mxnets_pixels_for_every_flag(name):
    """PNGs decode to MXNet's cv2.imdecode pixels for every flag (16-bit samples kept for -1),
    in OpenCV's order with bgr=True and in RGB order without, from every entry point
    (recio.mx's unpack_img asks for the EXIF orientation, which these files do not have)."""
    for color in (1, 0, -1):
        want = EXPECTED[f"unpack_img|{name}|{color}"]  # cv2.imdecode: BGR order
        got = decode(image_bytes(name), color, bgr=True)
        assert_exact(got, want, f"{name} {color}")
        assert got.flags.c_contiguous
        rgb = decode(image_bytes(name), color)
        assert_exact(rgb, want[..., [2, 1, 0, 3][:want.shape[2]]] if want.ndim == 3 else want)
        assert_exact(mx.unpack_img(record(name), color)[1], want, f"{name} mx {color}")


def _entry_points(payload, color):
    """The pixels of one image record through every decoding entry point of recio, RGB."""
    rgb = color == 1
    shape = (3, 4, 4) if rgb else (1, 4, 4)
    record_bytes = recio.pack(recio.IRHeader(0, 1.0, 0, 0), payload)
    got = {
        "recio.unpack_img": recio.unpack_img(record_bytes, color)[1],
        "header.decode_image": decode_image(payload, color),
        "mx.unpack_img (BGR)": mx.unpack_img(record_bytes, color)[1][..., ::-1] if rgb
        else mx.unpack_img(record_bytes, color)[1],
        "mx.image.imdecode": mx.image.imdecode(payload, flag=color).asnumpy(),
        "Augmenter.decode": Augmenter(shape).decode(payload),
        "render_pixels": render_pixels(payload, ImageOptions(color=color, encoding=".png")),
    }
    return got


@pytest.mark.parametrize("name", ["c420.jpg", "progressive.jpg", "cmyk.jpg", "rgb.png",
                                  "gamma_045.png", "palette.png", "rgb.bmp"])
def test_every_entry_point_decodes_the_same_pixels(name):
    """One codec: unpack_img, decode_image, recio.mx, imdecode, the ImageBatchIter's
    augmenter and im2rec's render all give MXNet's pixels (RGB order here)."""
    payload = image_bytes(name)
    for color, key in ((1, "1|1"), (0, "0|0")):
        want = EXPECTED[f"imdecode|{name}|{key}"]
        for entry, got in _entry_points(payload, color).items():
            assert_exact(got, want, f"{entry} color={color}")


def test_torch_datasets_decode_mxnets_pixels(tmp_path):
    need("torch")
    from recio.torch import RecordDataset

    rec, idx = tmp_path / "t.rec", tmp_path / "t.idx"
    names = ["c420.jpg", "gamma_045.png", "cmyk.jpg"]
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for key, name in enumerate(names):
            w.write(key, recio.pack(recio.IRHeader(0, float(key), key, 0), image_bytes(name)))
    for mode, key in (("RGB", "1|1"), ("L", "0|0")):
        for decode_as in ("numpy", "tensor", "pil"):
            ds = RecordDataset(rec, idx, decode=decode_as, mode=mode)
            for i, name in enumerate(names):
                img = ds[i][0]
                arr = (img.permute(1, 2, 0).numpy() if decode_as == "tensor"
                       else np.asarray(img))
                assert_exact(arr, EXPECTED[f"imdecode|{name}|{key}"], f"{name} {decode_as}")


def test_verify_images_accepts_every_reference_image():
    assert check_images(DATA / "pixels.rec", OFFSETS) == []


# -- EXIF, DCT scaling --------------------------------------------------------------------------

@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_as_pillow_and_opencv(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    Image.open(DATA / "images" / "c420.jpg").save(buf, "PNG", exif=exif.tobytes())
    want = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(buf.getvalue()))))
    assert_exact(decode(buf.getvalue(), 1, exif_transpose=True), want)
    assert_exact(decode(buf.getvalue(), 1), np.asarray(Image.open(DATA / "images" / "c420.jpg")))


def _jpeg(w, h, seed=0, grey=False):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 3 % 256, y * 5 % 256, (x * y) % 256], -1) + rng.integers(0, 40, (h, w, 3))
    im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    (im.convert("L") if grey else im).save(buf, "JPEG", quality=90)
    return buf.getvalue()


@settings(max_examples=40, deadline=None)
@given(w=st.integers(1, 120), h=st.integers(1, 120), min_side=st.integers(0, 60),
       color=st.sampled_from([1, 0, -1]), grey=st.booleans())
def test_dct_scaled_decode_is_libjpegs_scaled_decode(w, h, min_side, color, grey):
    """The DCT scale (1/8, 1/4, 1/2 or 1) is never below the image scaled to shorter side
    ``min_side``, and the pixels at it are libjpeg's scaled decode as Pillow's ``draft()``
    (another caller of the same library) gets it."""
    data = _jpeg(w, h, grey=grey)
    got, size, scale = decode_scaled(data, color, min_side=min_side)
    assert size == (w, h)
    s = int(round(1 / scale))
    assert s in (1, 2, 4, 8) and got.shape[:2] == (-(-h // s), -(-w // s))
    short = min(w, h)
    if min_side and min_side < short and color != -1:
        assert s * -(-w * min_side // short) <= w and s * -(-h * min_side // short) <= h
    img = Image.open(io.BytesIO(data))
    img.draft("L" if color == 0 or (color == -1 and grey) else "RGB",  # scale s: w // s fits
              (w // s, h // s) if s > 1 else None)
    if color == 1 and img.mode == "L":  # a grey JPEG in colour: libjpeg copies the channel
        img = img.convert("RGB")
    assert_exact(got, np.asarray(img))


def test_dct_scale_rule():
    assert dct_eighths(1000, 800, 100) == 1  # 125x100 still covers 125x100
    assert dct_eighths(1000, 800, 101) == 2
    assert dct_eighths(1000, 800, 0) == 8 and dct_eighths(100, 80, 80) == 8
    assert dct_eighths(999, 500, 125) == 4  # as Pillow's draft: the long side needs 250 > 999/4
    assert dct_eighths(8, 8, 1) == 1 and dct_eighths(3, 3, 1) == 4  # 3/8 of a pixel: too few


@settings(max_examples=60, deadline=None)
@given(w=st.integers(1, 90), h=st.integers(1, 90), seed=st.integers(0, 2 ** 32 - 1),
       grey=st.booleans(), quality=st.integers(1, 100), progressive=st.booleans(),
       restart=st.sampled_from([0, 1, 7]),
       sampling=st.sampled_from(["411", "420", "422", "440", "444"]))
def test_full_size_jpegs_take_the_faster_road_to_opencvs_pixels(w, h, seed, grey, quality,
                                                                progressive, restart, sampling):
    """A full-size JPEG decodes through simplejpeg (less CPU, a reusable buffer) to exactly
    cv2.imdecode's pixels, whatever the encoder's chroma sampling, progression, restart
    interval, quality or size; the scratch buffer changes nothing but where they live."""
    import cv2

    pixels = np.random.default_rng(seed).integers(0, 256, (h, w) if grey else (h, w, 3),
                                                  dtype=np.uint8)
    factors = {"411": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411,
               "420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
               "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
               "440": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_440,
               "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444}
    ok, buf = cv2.imencode(".jpg", pixels, [
        cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_PROGRESSIVE, int(progressive),
        cv2.IMWRITE_JPEG_RST_INTERVAL, restart,
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR, factors[sampling]])
    assert ok
    for color, flag in ((1, cv2.IMREAD_COLOR_RGB), (0, cv2.IMREAD_GRAYSCALE),
                        (-1, cv2.IMREAD_UNCHANGED)):
        want = cv2.imdecode(buf, flag | (cv2.IMREAD_IGNORE_ORIENTATION if color != -1 else 0))
        if color == -1 and want.ndim == 3:
            want = cv2.cvtColor(want, cv2.COLOR_BGR2RGB)
        assert_exact(decode(buf.tobytes(), color), want, f"color {color}")
        assert_exact(decode(buf.tobytes(), color, scratch=True).copy(), want, "scratch")


def test_jpegs_simplejpeg_refuses_go_to_opencv(monkeypatch):
    """Where simplejpeg says no (a damaged JPEG, a colour space it converts otherwise), the
    pixels are OpenCV's; without simplejpeg (a platform with no wheel) every JPEG is."""
    import recio.optional

    cmyk = image_bytes("cmyk.jpg")
    calls = []
    import simplejpeg

    real = simplejpeg.decode_jpeg
    monkeypatch.setattr(simplejpeg, "decode_jpeg", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert_exact(decode(cmyk, 1), EXPECTED["imdecode|cmyk.jpg|1|1"])
    assert calls == []  # CMYK: never handed to simplejpeg
    assert_exact(decode(image_bytes("c420.jpg"), 1), EXPECTED["imdecode|c420.jpg|1|1"])
    assert calls == [1]
    monkeypatch.setitem(recio.optional._found, "simplejpeg", None)
    assert_exact(decode(image_bytes("c420.jpg"), 1), EXPECTED["imdecode|c420.jpg|1|1"])
    assert calls == [1]


# -- decompression bombs ------------------------------------------------------------------------

def _claiming(width, height):
    """A tiny valid JPEG whose frame header claims ``width x height``."""
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (120, 30, 200)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


BOMB = _claiming(12_000, 12_000)  # 144 megapixels, 432 MB of RGB: above the default limit


def _bounded(call, limit=20 << 20):
    """Run ``call``; fail if it allocated more than ``limit`` bytes at its peak."""
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < limit, f"allocated {peak} bytes"


def test_bomb_is_refused_before_allocation_by_every_entry_point(tmp_path):
    rec = recio.pack(recio.IRHeader(0, 1.0, 0, 0), BOMB)
    calls = {
        "decode": lambda: decode(BOMB, 1),
        "recio.unpack_img": lambda: recio.unpack_img(rec, 1),
        "mx.unpack_img": lambda: mx.unpack_img(rec, 0),
        "mx.image.imdecode": lambda: mx.image.imdecode(BOMB),
        "Augmenter": lambda: Augmenter((3, 8, 8))(
            BOMB, np.empty((3, 8, 8), np.float32), (0.5, 0.5, 1.0)),
        "transform_image": lambda: transform_image(BOMB, ImageOptions(resize=32)),
    }
    for entry, call in calls.items():
        with pytest.raises(ImageError, match="decompression-bomb guard"):
            _bounded(call)


def test_bomb_records_are_skipped_by_every_reader_or_refused_when_asked(tmp_path):
    rec, idx = tmp_path / "b.rec", tmp_path / "b.idx"
    small = _claiming(3000, 3000)  # 9 megapixels: above max_pixels=1_000_000 below
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        w.write(0, recio.pack(recio.IRHeader(0, 0.0, 0, 0), image_bytes("c420.jpg")))
        w.write(1, recio.pack(recio.IRHeader(0, 1.0, 1, 0), small))
        w.write(2, recio.pack(recio.IRHeader(0, 2.0, 2, 0), BOMB))
    with pytest.warns(SkippedRecordWarning, match="decompression-bomb guard") as caught:
        with ImageBatchIter(rec, (3, 8, 8), 1, path_imgidx=idx, max_pixels=1_000_000,
                             round_batch=False) as it:
            _bounded(lambda: list(it))
            assert it.num_skipped == 2
    assert {"key 1", "key 2"} <= {m for w in caught for m in ("key 1", "key 2")
                                  if m in str(w.message)}
    with recio.IndexedRecordReader(str(rec), str(idx)) as reader:
        bad = check_images(rec, list(reader.offsets.values()), max_pixels=1_000_000)
    assert [d.reason[:11] for d in bad] == ["record id 1", "record id 2"]
    need("torch")
    from recio.torch import ImageAugment, RecordDataset, RecordIterableDataset

    kept = []
    with pytest.warns(SkippedRecordWarning, match="decompression-bomb guard"):
        _bounded(lambda: kept.extend(RecordIterableDataset(rec, max_pixels=1_000_000)))
    assert len(kept) == 1
    ds = RecordDataset(rec, idx, max_pixels=1_000_000, on_undecodable="raise")
    assert ds[0][0].shape == (3, 23, 37)
    for i in (1, 2):
        with pytest.raises(ImageError, match=f"key {i}: .*decompression-bomb guard"):
            _bounded(lambda: ds[i])
    with pytest.raises(ImageError, match="decompression-bomb guard"):
        _bounded(lambda: list(RecordIterableDataset(rec, max_pixels=1_000_000,
                                                    on_undecodable="raise")))
    raw = RecordDataset(rec, idx, decode="raw", transform=ImageAugment((3, 8, 8)),
                        on_undecodable="raise")
    with pytest.raises(ImageError, match="decompression-bomb guard"):
        _bounded(lambda: raw[2])


# -- errors ---------------------------------------------------------------------------------------

def test_undecodable_bytes_raise_image_errors_with_the_reason():
    with pytest.raises(ImageError, match="the image is empty"):
        decode(b"")
    with pytest.raises(ImageError, match=r"x.bin: its 12 bytes are not an image OpenCV can "
                                          r"decode \(first bytes 6e 6f 74"):
        decode(b"not an image", name="x.bin")
    header_only = image_bytes("c420.jpg")[:300]  # no scan data at all: nothing to recover
    with pytest.raises(ImageError, match="x.jpg: cannot decode its 300 bytes of JPEG"):
        decode(header_only, name="x.jpg")
    with pytest.raises(ValueError, match="color must be"):
        decode(image_bytes("rgb.png"), 2)
    with pytest.raises(ValueError, match="iscolor must be"):
        mx.unpack_img(record("rgb.png"), 3)


# -- encode ---------------------------------------------------------------------------------------

def test_one_encode_same_png_compression_for_the_same_quality_everywhere():
    """quality is the PNG compression level, clamped to 0-9 as OpenCV's IMWRITE_PNG_COMPRESSION
    that MXNet's pack_img passes: the default 95 means 9, in every writer."""
    rgb = np.asarray(Image.open(DATA / "images" / "rgb.png"))
    header = recio.IRHeader(0, 1.0, 0, 0)
    level9 = encode(rgb, ".png", 9)
    assert encode(rgb, ".png", 95) == level9 != encode(rgb, ".png", 0)
    assert encode(rgb, ".png", -3) == encode(rgb, ".png", 0)
    assert recio.unpack(recio.pack_img(header, rgb, 95, ".png"))[1] == level9
    assert recio.unpack(mx.pack_img(header, rgb[..., ::-1], 95, ".png"))[1] == level9
    assert recio.unpack(mx.recordio.pack_img(header, rgb[..., ::-1], img_fmt=".png"))[1] == level9
    packed = transform_image(image_bytes("rgb.png"), ImageOptions(encoding=".png", quality=95))
    assert packed == level9
    assert encode(rgb, ".jpg", 150) == encode(rgb, ".jpg", 100)
    assert encode(Image.fromarray(rgb), ".jpg", 80) == encode(rgb, ".jpg", 80)


def test_encode_layouts_and_round_trips():
    rng = np.random.default_rng(1)
    bgra = rng.integers(0, 256, (9, 7, 4), dtype=np.uint8)
    png = encode(bgra, ".png", 3, bgr=True)
    assert_exact(decode(png, -1, bgr=True), bgra)
    assert_exact(mx.unpack_img(recio.pack(recio.IRHeader(0, 0, 0, 0), png), -1)[1], bgra)
    deep = rng.integers(0, 65536, (5, 6), dtype=np.uint16)
    assert_exact(decode(encode(deep, ".png"), -1), deep)
    assert_exact(decode(encode(deep[:, :, None].astype(np.uint8), ".png"), 0),
                 deep.astype(np.uint8))
    jpeg = encode(bgra, ".jpg", 90, bgr=True)  # JPEG has no alpha: dropped, as OpenCV does
    assert decode(jpeg, -1).shape == (9, 7, 3)
    for bad in (np.zeros((4, 4, 2), np.uint8), np.zeros((4, 4), np.float32)):
        with pytest.raises(ImageError):
            encode(bad, ".png")
    with pytest.raises(ImageError, match="'.jpg' or '.png'"):
        encode(bgra, "gif")
    with pytest.raises(ImageError, match="cannot encode image"):
        encode(bgra, ".nope")  # OpenCV has no encoder for it (without OpenCV: refused at once)


# -- 16-bit PNGs ----------------------------------------------------------------------------------

def _png_writer():
    """The hand-written 16-bit PNG encoder of tests/data/mxnet_pixels/make_images.py (every
    filter type, optional Adam7 interlacing): its files decode in libpng as written."""
    spec = importlib.util.spec_from_file_location("make_images", DATA / "make_images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.png16


PNG16 = _png_writer()


@settings(max_examples=40, deadline=None)
@given(w=st.integers(1, 12), h=st.integers(1, 12), color_type=st.sampled_from([2, 4, 6]),
       interlace=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_sixteen_bit_png_samples_as_opencv(w, h, color_type, interlace, seed):
    """Every filter type and every Adam7 pass (tiny images have empty passes): uint16 samples
    for -1 (grey + alpha as RGBA, as OpenCV), libpng's 16-bit greyscale kept to the high byte
    for 0, the high bytes for 1."""
    channels = {2: 3, 4: 2, 6: 4}[color_type]
    samples = np.random.default_rng(seed).integers(0, 65536, (h, w, channels)).astype(np.uint16)
    data = PNG16(samples, color_type, interlace=interlace)
    unchanged = decode(data, -1)
    if color_type == 4:
        grey, alpha = samples[..., 0], samples[..., 1]
        assert_exact(unchanged, np.stack([grey, grey, grey, alpha], -1))
        assert_exact(decode(data, 0), (grey >> 8).astype(np.uint8))
        return
    assert_exact(unchanged, samples)
    assert_exact(decode(data, 1), (samples[..., :3] >> 8).astype(np.uint8))
    r, g, b = (samples[..., i].astype(np.int64) for i in range(3))
    grey = np.where((r == g) & (g == b), r, (r * 9797 + g * 19234 + b * 3737 + 16384) >> 15)
    assert_exact(decode(data, 0), (grey >> 8).astype(np.uint8))


def test_damaged_sixteen_bit_png_is_an_image_error():
    data = PNG16(np.zeros((4, 5, 3), np.uint16), 2)
    idat = data.index(b"IDAT")
    for bad in (data[:idat + 10], data[:idat + 4] + b"\xff" * 8 + data[idat + 12:]):
        with pytest.raises(ImageError):
            decode(bad, -1)


ICC = pathlib.Path(__file__).parents[2] / "data" / "mxnet_png_icc"
ICC_EXPECTED = dict(np.load(ICC / "expected.npz"))


@pytest.mark.parametrize("name", ["hp_srgb.png", "hp_srgb_gama22.png", "hp_srgb_palette.png",
                                  "hp_srgb_rgba.png", "lcms_srgb.png"])
def test_png_with_a_known_srgb_profile_greys_as_mxnet(name):
    """libpng takes HP/Microsoft's sRGB IEC61966-2.1 ICC profile (in countless PNGs) for sRGB,
    so MXNet's greyscale of such a PNG is computed in linear light (up to 35 levels off the
    plain weighted sum here); a profile libpng does not know (lcms_srgb.png) changes nothing.
    OpenCV 5 ignores the profile, so recio keeps this one rule (recio.image.pixels.png_srgb). Arrays
    from the real MXNet 1.9.1 (tests/data/mxnet_png_icc/make.py)."""
    payload = (ICC / name).read_bytes()
    for color in (0, 1):
        want = ICC_EXPECTED[f"{name}|{color}"]
        got = decode(payload, color)
        assert_exact(got[..., None] if got.ndim == 2 else got, want, f"{name} {color}")
    assert_exact(mx.image.imdecode(payload, flag=0).asnumpy(), ICC_EXPECTED[f"{name}|0"])
    rec = recio.pack(recio.IRHeader(0, 1.0, 0, 0), payload)
    assert_exact(recio.unpack_img(rec, 0)[1][..., None], ICC_EXPECTED[f"{name}|0"])


def test_opencv_5_greys_known_srgb_pngs_differently_so_recio_keeps_the_rule():
    """Why recio.image.pixels.png_srgb exists: OpenCV 5's own greyscale of these PNGs is not MXNet's
    (OpenCV 4's is: the rule is then the same either way)."""
    import cv2

    payload = np.frombuffer((ICC / "hp_srgb.png").read_bytes(), np.uint8)
    opencv = cv2.imdecode(payload, cv2.IMREAD_GRAYSCALE)
    same = np.array_equal(opencv[..., None], ICC_EXPECTED["hp_srgb.png|0"])
    assert same == (int(cv2.__version__.split(".")[0]) < 5), cv2.__version__


def test_known_srgb_profile_needs_its_exact_bytes():
    """An edited copy of a known profile is not sRGB to libpng (adler32 and crc32 decide)."""
    profile = Image.open(ICC / "hp_srgb.png").info["icc_profile"]
    assert png_srgb.is_known_srgb_profile(profile)
    assert not png_srgb.is_known_srgb_profile(profile[:-1] + bytes([profile[-1] ^ 1]))
    assert not png_srgb.is_known_srgb_profile(None)
    assert not png_srgb.is_known_srgb_profile(b"x" * 50)
