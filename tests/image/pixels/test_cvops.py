"""recio.image.pixels.cvops: MXNet's OpenCV operations, OpenCV's own calls but for the two that
today's OpenCV does differently from MXNet's (the bicubic resize and the affine warp).

The resize cases are compared with what ``mx.image.imresize`` of the real MXNet 1.9.1 (its
built-in OpenCV 3.4.2) returned: ``tests/data/mxnet_iter/expected.json["resize"]`` holds the
sha256 of every output, made by ``tests/data/mxnet_iter/make.py`` from the same inputs
(``noise_image``, integer hashing, the same bytes under any NumPy). The affine warp is compared
through the ImageRecordIter configurations that use it (``tests/mx/test_mx_iter.py``, which also
shows why cv2.warpAffine is not used for it).
"""
import hashlib
import json
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cv2

from recio.image.pixels import cvops

DATA = pathlib.Path(__file__).parents[2] / "data" / "mxnet_iter"
RESIZE = json.loads((DATA / "expected.json").read_text())["resize"]


def _make_module():
    """make.py's input generators, without importing MXNet (only its pure helpers are used)."""
    source = (DATA / "make.py").read_text()
    start = source.index("def noise_image")
    end = source.index("def run_resize")
    namespace = {"np": np}
    exec(compile(source[start:end], str(DATA / "make.py"), "exec"), namespace)  # make.py's own code
    return namespace


MAKE = _make_module()
CASES = MAKE["resize_cases"]()


def _digest(img):
    img = img[:, :, None] if img.ndim == 2 else img
    return hashlib.sha256(np.ascontiguousarray(img).tobytes()).hexdigest()


@pytest.mark.parametrize("interp", sorted(cvops.INTERPOLATIONS))
def test_resize_gives_mxnets_bytes(interp):
    wrong = []
    for k, (h, w, c, nh, nw) in enumerate(CASES):
        img = MAKE["noise_image"](h, w, c, k)
        if _digest(cvops.resize(img, nw, nh, interp)) != RESIZE[f"{k}|{interp}"]:
            wrong.append((k, (h, w, c), (nh, nw)))
    assert not wrong, f"{len(wrong)} of {len(CASES)} differ from MXNet's: {wrong[:5]}"


@pytest.mark.parametrize("interp", [0, 1, 3, 4])
def test_opencv_resize_gives_mxnets_bytes(interp):
    """The installed OpenCV gives MXNet's bytes for these, so resize calls it."""
    wrong = []
    for k, (h, w, c, nh, nw) in enumerate(CASES):
        img = MAKE["noise_image"](h, w, c, k)
        out = cv2.resize(img if c > 1 else img[:, :, 0], (nw, nh), interpolation=interp)
        if _digest(out) != RESIZE[f"{k}|{interp}"]:
            wrong.append(k)
    assert not wrong, wrong[:5]


def test_opencv_bicubic_differs_so_numpy_does_it():
    """The reason INTER_CUBIC is recio's own: the installed OpenCV's is not MXNet's."""
    differ = 0
    for k, (h, w, c, nh, nw) in enumerate(CASES):
        img = MAKE["noise_image"](h, w, c, k)
        out = cv2.resize(img if c > 1 else img[:, :, 0], (nw, nh), interpolation=2)
        differ += _digest(out) != RESIZE[f"{k}|2"]
    assert differ > len(CASES) // 2


def test_resize_checks_its_arguments():
    img = np.zeros((4, 4), np.uint8)
    with pytest.raises(ValueError, match="at least 1"):
        cvops.resize(img, 0, 3)
    with pytest.raises(ValueError, match="unknown interpolation 7"):
        cvops.resize(img, 3, 3, 7)
    with pytest.raises(ValueError, match="uint8"):
        cvops.resize(img.astype(np.float32), 3, 3)
    same = cvops.resize(img, 4, 4)
    assert same is not img and np.array_equal(same, img)


@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 30), w=st.integers(1, 30), c=st.sampled_from([1, 3]),
       nh=st.integers(1, 40), nw=st.integers(1, 40), value=st.integers(0, 255))
def test_resizing_a_flat_image_keeps_it_flat(h, w, c, nh, nw, value):
    """Weights sum to one in every method: a constant image stays that constant."""
    img = np.full((h, w, c), value, np.uint8)
    for interp in cvops.INTERPOLATIONS:
        out = cvops.resize(img, nw, nh, interp)
        assert out.shape == (nh, nw, c) and np.all(out == value)


@settings(max_examples=40, deadline=None)
@given(h=st.integers(2, 24), w=st.integers(2, 24), angle=st.floats(-180, 180),
       fill=st.integers(0, 255))
def test_warp_identity_and_rotation_properties(h, w, angle, fill):
    rng = np.random.default_rng(h * 100 + w)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    assert np.array_equal(cvops.warp_affine(img, np.eye(2, 3), w, h, cvops.INTER_LINEAR, fill),
                          img)
    shifted = cvops.warp_affine(img, [[1, 0, 2], [0, 1, 1]], w, h, cvops.INTER_LINEAR, fill)
    assert np.array_equal(shifted[1:, 2:], img[:-1, :-2])
    assert np.all(shifted[0] == fill) and np.all(shifted[:, :2] == fill)
    a = np.deg2rad(angle)
    m = [[np.cos(a), np.sin(a), 0.0], [-np.sin(a), np.cos(a), 0.0]]
    out = cvops.warp_affine(np.full((h, w, 3), 255, np.uint8), m, w, h, cvops.INTER_LINEAR, fill)
    assert out.shape == (h, w, 3) and out.dtype == np.uint8
    nearest = cvops.warp_affine(img, m, w, h, cvops.INTER_NEAREST, fill)
    values = set(np.unique(img).tolist()) | {fill}
    assert set(np.unique(nearest).tolist()) <= values  # nearest never blends


def test_pad_and_fill_per_channel():
    img = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    out = cvops.pad_constant(img, 2, (9, 8, 7, 0))
    assert out.shape == (6, 7, 4)
    assert np.array_equal(out[2:4, 2:5], img) and out[0, 0].tolist() == [9, 8, 7, 0]
    grey = cvops.pad_constant(img[:, :, 0], 1, 5)
    assert grey.shape == (4, 5) and grey[0, 0] == 5
    with pytest.raises(ValueError, match="0..255"):
        cvops.pad_constant(img, 1, 300)


def test_colour_conversions_round_trip_and_match_opencv_rules():
    rng = np.random.default_rng(3)
    bgr = rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)
    back = cvops.hls_to_bgr(cvops.bgr_to_hls(bgr))
    assert np.abs(back.astype(int) - bgr).max() <= 5  # 8-bit HLS loses a little
    grey = np.full((4, 4, 3), 77, np.uint8)
    hls = cvops.bgr_to_hls(grey)
    assert np.all(hls[..., 0] == 0) and np.all(hls[..., 2] == 0) and np.all(hls[..., 1] == 77)
    assert cvops.bgr_to_hls(np.array([[[0, 0, 255]]], np.uint8)).tolist() == [[[0, 128, 255]]]
    assert cvops.bgr_to_hls(np.array([[[255, 0, 0]]], np.uint8)).tolist() == [[[120, 128, 255]]]
    assert cvops.convert_scale(np.array([100, 200], np.uint8), 1.5, 0.5).tolist() == [150, 255]
    assert cvops.saturate_uint8(np.array([0.5, 1.5, 2.5, -3, 300])).tolist() == [0, 2, 2, 0, 255]
    assert cvops.channel_offsets(np.array([[[10, 250]]], np.uint8), (-10.7, 9.9)).tolist() == [
        [[0, 255]]]


def test_convert_scale_is_convert_to_arithmetic():
    """convertTo's saturate_cast(x * alpha + beta) in float32, negative results clipped to 0
    (OpenCV's convertScaleAbs would take their absolute value)."""
    img = np.arange(256, dtype=np.uint8).reshape(16, 16)
    out = cvops.convert_scale(img, 0.5, -20.0)
    want = np.clip(np.rint(img.astype(np.float32) * np.float32(0.5) - np.float32(20)), 0, 255)
    assert np.array_equal(out, want.astype(np.uint8))


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_lookup_tables(channels):
    rng = np.random.default_rng(channels)
    img = rng.integers(0, 256, (17, 23, channels), dtype=np.uint8)
    table = rng.integers(0, 256, 256, dtype=np.uint8)
    tables = rng.integers(0, 256, (256, channels), dtype=np.uint8)
    assert np.array_equal(cvops.lookup(img, table), table[img])
    assert np.array_equal(cvops.lookup(img, tables), np.stack([tables[img[..., k], k]
                                                               for k in range(channels)], -1))
