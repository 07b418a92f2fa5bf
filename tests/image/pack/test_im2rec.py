"""im2rec pack mode: MXNet's headers and sizes, list order with workers, bad images, resume."""
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SIGKILL, START_METHODS, as_in_a_terminal
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import recio
from recio.cli.im2rec import im2rec_cmd
from recio.errors import ImageError
from recio.image.packing.paths import PackPaths
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import pack_list
from recio.image.pixels.transform import (
    ImageOptions,
    center_crop_box,
    render_pixels,
    target_size,
    transform_image,
)
from support import hook_env, make_corpus


@pytest.fixture(scope="module")
def manifest(golden):
    with open(golden / "im2rec" / "manifest.json") as f:
        return json.load(f)


def records(rec, idx=None):
    """What a packed .rec holds, as the manifest describes it (plus image mode)."""
    out = []
    reader = recio.IndexedRecordReader(str(rec), str(idx or str(rec)[:-4] + ".idx"))
    for key in reader.keys():
        header, payload = recio.unpack(reader[key])
        image = Image.open(io.BytesIO(payload))
        label = header.label.tolist() if header.flag else header.label
        out.append({"key": key, "flag": header.flag, "label": label, "id": header.id,
                    "id2": header.id2, "height": image.height, "width": image.width,
                    "mode": image.mode})
    return out


def as_manifest(recs):
    return [{k: r[k] for k in ("key", "flag", "label", "id", "height", "width")} for r in recs]


def pack_args(manifest, case, prefix, root):
    """The manifest's command (``all ROOT --resize ...``) with our prefix and root."""
    args = list(manifest["commands"][case]["args"])
    assert args[1] == "ROOT"
    return [str(prefix), str(root)] + args[2:]


# --------------------------------------------------------------------------------- golden cases


@pytest.mark.parametrize("workers, executor", [(1, "auto"), (2, "thread")])
@pytest.mark.parametrize("name", ["all", "multi"])
def test_pack_matches_mxnet_headers_and_sizes(name, workers, executor, manifest, golden, tmp_path):
    _pack_golden(name, workers, executor, manifest, golden, tmp_path)


@pytest.mark.parametrize("name", ["all", "multi"])
def test_pack_in_worker_processes_matches_mxnet_headers_and_sizes(name, start_method, manifest,
                                                                 golden, tmp_path):
    """--executor process with forked workers, or spawned ones (the default on Windows and
    macOS), which get the job pickled and set themselves up afresh: MXNet's records still."""
    _pack_golden(name, 2, "process", manifest, golden, tmp_path)


def test_the_fast_mode_packs_the_same_in_processes_and_threads(start_method, golden, tmp_path):
    """--resize-mode antialias in worker processes (forked or spawned) writes what threads
    write."""
    options = ImageOptions(resize=20, resize_mode="antialias", quality=95)
    packed = {}
    for executor in ("process", "thread"):
        folder = tmp_path / executor
        folder.mkdir()
        shutil.copy(golden / "im2rec" / "all.lst", folder)
        pack_list(folder / "all.lst", golden / "im2rec" / "images",
                  PackSettings(options, workers=2, executor=executor))
        packed[executor] = (folder / "all.rec").read_bytes()
    assert packed["process"] == packed["thread"]


def _pack_golden(name, workers, executor, manifest, golden, tmp_path):
    """Pack the golden list ``name`` with im2rec (in this process, so that a test's start
    method holds) and check the records against MXNet's headers and sizes."""
    shutil.copy(golden / "im2rec" / f"{name}.lst", tmp_path)
    args = pack_args(manifest, f"pack_{name}", tmp_path / name, golden / "im2rec" / "images")
    result = CliRunner().invoke(im2rec_cmd, args + ["--num-thread", str(workers),
                                                    "--executor", executor])
    assert result.exit_code == 0, result.output
    assert "packed 13 images, skipped 0" in result.stdout
    recs = records(tmp_path / f"{name}.rec")
    assert as_manifest(recs) == manifest["packed"][name]
    assert all(r["id2"] == 0 and r["mode"] == "RGB" for r in recs)
    # the index is MXNet's: the key column in list order, offsets of each record's head
    keys, offsets = recio.read_index(str(tmp_path / f"{name}.idx"))
    assert keys == [r["key"] for r in manifest["packed"][name]]
    assert offsets == recio.build_index(str(tmp_path / f"{name}.rec"))
    assert not os.path.exists(tmp_path / f"{name}.errors.tsv")
    assert sorted(os.listdir(tmp_path)) == sorted(f"{name}{s}" for s in (".lst", ".rec", ".idx"))


@pytest.mark.slow
def test_console_scripts_pack(script, manifest, golden, tmp_path):
    shutil.copy(golden / "im2rec" / "all.lst", tmp_path)
    args = pack_args(manifest, "pack_all", tmp_path / "all", golden / "im2rec" / "images")
    proc = subprocess.run([*script("im2rec"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert as_manifest(records(tmp_path / "all.rec")) == manifest["packed"]["all"]
    proc = subprocess.run([*script("recio"), "im2rec", *args, "--force"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert as_manifest(records(tmp_path / "all.rec")) == manifest["packed"]["all"]


def test_every_list_with_the_prefix_is_packed(golden, tmp_path):
    root = str(golden / "im2rec" / "images")
    for name in ("split_train", "split_test", "split_val"):
        shutil.copy(golden / "im2rec" / f"{name}.lst", tmp_path)
    result = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "split"), root, "--resize", "16"])
    assert result.exit_code == 0, result.output
    sizes = {n: len(records(tmp_path / f"{n}.rec")) for n in ("split_train", "split_test",
                                                                "split_val")}
    assert sizes == {"split_train": 7, "split_test": 2, "split_val": 4}


def test_no_list_found_is_a_usage_error(golden, tmp_path):
    result = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "none"),
                                             str(golden / "im2rec" / "images")])
    assert result.exit_code == 2 and "--list" in result.output


# ---------------------------------------------------------------------------- image processing


@settings(max_examples=25, deadline=None)
@given(w=st.integers(1, 90), h=st.integers(1, 90), size=st.integers(1, 40), crop=st.booleans(),
       fmt=st.sampled_from(["JPEG", "PNG"]), mode=st.sampled_from(["mxnet", "antialias"]))
def test_output_size_follows_mxnet_rule(w, h, size, crop, fmt, mode):
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 30, 90)).save(buf, fmt)
    box = center_crop_box(w, h) if crop else (0, 0, w, h)
    expected = target_size(box[2] - box[0], box[3] - box[1], size)
    out = transform_image(buf.getvalue(), ImageOptions(resize=size, center_crop=crop,
                                                       resize_mode=mode))
    assert Image.open(io.BytesIO(out)).size == expected


def _smooth_jpeg(w=160, h=120, quality=95):
    x = np.linspace(0, 255, w)
    y = np.linspace(0, 255, h)[:, None]
    smooth = np.stack([np.broadcast_to(x, (h, w)), np.broadcast_to(y, (h, w)),
                       (x + y) / 2], axis=-1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(smooth).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def _record_decodes(monkeypatch):
    """Spy on the codec's two decoders (OpenCV's, and simplejpeg's for a full-size JPEG): the
    returned list collects each decode's (height, width)."""
    from recio.image.pixels import codec
    calls = []

    def spy(decoder):
        def recorded(*args, **kwargs):
            array = decoder(*args, **kwargs)
            if array is not None:
                calls.append(array.shape[:2])
            return array
        return recorded

    monkeypatch.setattr(codec, "_imdecode", spy(codec._imdecode))
    monkeypatch.setattr(codec, "_decode_simplejpeg", spy(codec._decode_simplejpeg))
    return calls


def _pillow_reference(data, size, crop):
    """An independent reference for the fast mode: Pillow's full-size decode and its exact
    antialiased bicubic resize of the same box."""
    img = Image.open(io.BytesIO(data)).convert("RGB")
    box = center_crop_box(*img.size) if crop else (0, 0) + img.size
    out = img.resize(target_size(box[2] - box[0], box[3] - box[1], size),
                     Image.Resampling.BICUBIC, box=box)
    return np.asarray(out, dtype=float)


@pytest.mark.parametrize("size, crop, scale", [(120, False, 8), (85, False, 8), (60, False, 4),
                                               (40, False, 4), (20, False, 2), (70, True, 8)])
def test_the_fast_mode_decodes_at_the_dct_scale_and_keeps_the_geometry(monkeypatch, size, crop,
                                                                       scale):
    """--resize-mode antialias decodes a JPEG at 1/8, 2/8, 4/8 or 8/8, the smallest not below
    the target; the output has MXNet's size and nearly the pixels of an exact resize."""
    data = _smooth_jpeg()
    calls = _record_decodes(monkeypatch)
    fast = render_pixels(data, ImageOptions(resize=size, center_crop=crop,
                                            resize_mode="antialias")).astype(float)
    assert calls == [(-(-120 * scale // 8), -(-160 * scale // 8))]
    full = _pillow_reference(data, size, crop)
    assert fast.shape == full.shape
    assert fast.shape[:2][::-1] == target_size(*((120, 120) if crop else (160, 120)), size)
    assert np.abs(fast - full).mean() < 2.0  # same geometry: no shift, no scale error


@pytest.mark.parametrize("crop", [False, True])
def test_the_fast_mode_keeps_the_exact_fractional_geometry(crop):
    """An odd-sized JPEG decoded at 1/2 has a rounded-up size (102x76 for 101.5x75.5 pixels):
    the resize must map pixels as an exact box does, not stretch the extra half pixel (a plain
    dsize resize is off by ~10 grey levels on this pattern, we are within 2.5)."""
    x, y = np.arange(203)[None, :], np.arange(151)[:, None]
    wave = np.broadcast_to(127.5 + 100 * np.sin(x / 3.0) * np.cos(y / 4.0), (151, 203))
    buf = io.BytesIO()
    Image.fromarray(np.stack([wave, wave[::-1], wave[:, ::-1]], -1).astype(np.uint8)).save(
        buf, "JPEG", quality=98)
    fast = render_pixels(buf.getvalue(), ImageOptions(resize=60, center_crop=crop,
                                                      resize_mode="antialias")).astype(float)
    exact = _pillow_reference(buf.getvalue(), 60, crop)
    assert fast.shape == exact.shape == ((60, 60, 3) if crop else (60, 80, 3))
    assert np.abs(fast - exact).mean() < 2.5


@settings(max_examples=20, deadline=None)
@given(w=st.integers(1, 70), h=st.integers(1, 70), size=st.integers(1, 40), crop=st.booleans(),
       color=st.sampled_from([-1, 0, 1]), mode=st.sampled_from(["RGB", "L", "RGBA", "P"]),
       fmt=st.sampled_from(["JPEG", "PNG"]), encoding=st.sampled_from([".jpg", ".png"]))
def test_both_modes_give_the_same_sizes_and_layouts(w, h, size, crop, color, mode, fmt,
                                                    encoding):
    """Every format, colour mode and encoding works in both modes with identical sizes and
    channel layouts, and pixels of a flat image agree."""
    if fmt == "JPEG" and mode not in ("RGB", "L"):
        mode = "RGB"
    buf = io.BytesIO()
    Image.new(mode, (w, h), 90 if mode in ("L", "P") else (200, 30, 90, 255)[:len(mode)]
              ).save(buf, fmt)
    data = buf.getvalue()
    out = {}
    for resize_mode in ("mxnet", "antialias"):
        options = ImageOptions(resize=size, center_crop=crop, color=color, encoding=encoding,
                               resize_mode=resize_mode)
        pixels = render_pixels(data, options)
        out[resize_mode] = pixels
        encoded = Image.open(io.BytesIO(transform_image(data, options)))
        assert encoded.size == (pixels.shape[1], pixels.shape[0])
    box = center_crop_box(w, h) if crop else (0, 0, w, h)
    expected = target_size(box[2] - box[0], box[3] - box[1], size)
    reference = out["mxnet"]
    for pixels in out.values():
        assert (pixels.shape[1], pixels.shape[0]) == expected
        assert pixels.shape[2:] == reference.shape[2:]
        assert np.abs(pixels.astype(float) - reference.astype(float)).max() <= 8


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["mxnet", "antialias"])
def test_console_script_packs_golden_sizes_in_both_modes(mode, script, manifest, golden,
                                                        tmp_path):
    shutil.copy(golden / "im2rec" / "multi.lst", tmp_path)
    args = pack_args(manifest, "pack_multi", tmp_path / "multi", golden / "im2rec" / "images")
    proc = subprocess.run([*script("im2rec"), *args, "--num-thread", "2", "--resize-mode", mode],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert as_manifest(records(tmp_path / "multi.rec")) == manifest["packed"]["multi"]


def test_geometry_helpers():
    assert target_size(50, 20, 32) == (80, 32) and target_size(30, 88, 32) == (32, 93)
    assert center_crop_box(10, 4) == (3, 0, 7, 4) and center_crop_box(4, 9) == (0, 2, 4, 6)


def _png(mode, size=(20, 10), color=None):
    buf = io.BytesIO()
    Image.new(mode, size, color).save(buf, "PNG")
    return buf.getvalue()


def test_color_modes_and_alpha():
    rgba = _png("RGBA", color=(10, 200, 30, 0))
    img = render_pixels(rgba, ImageOptions(color=1))
    assert img.shape == (10, 20, 3) and img[0, 0].tolist() == [10, 200, 30]  # dropped, not blended
    assert render_pixels(rgba, ImageOptions(color=0)).shape == (10, 20)
    assert render_pixels(rgba, ImageOptions(color=-1, encoding=".png")).shape == (10, 20, 4)
    assert render_pixels(rgba, ImageOptions(color=-1)).shape == (10, 20, 3)  # JPEG: no alpha
    gray = render_pixels(_png("L", color=77), ImageOptions(color=-1))
    assert gray.shape == (10, 20)
    deep = Image.fromarray(np.full((4, 6), 0xABCD, dtype=np.uint16))
    buf = io.BytesIO()
    deep.save(buf, "PNG")
    assert render_pixels(buf.getvalue(), ImageOptions(color=0))[0, 0] == 0xAB
    out = transform_image(rgba, ImageOptions(color=-1, encoding=".png", quality=95))
    assert Image.open(io.BytesIO(out)).format == "PNG"


@pytest.mark.parametrize("resize_mode", ["mxnet", "antialias"])
def test_exif_orientation_as_opencv_imread(resize_mode):
    """By default the EXIF orientation is applied as MXNet's im2rec gets it from cv2.imread:
    for --color 1 and 0, not -1; exif_transpose forces it either way."""
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees when displayed
    buf = io.BytesIO()
    Image.new("RGB", (40, 20), (1, 2, 3)).save(buf, "JPEG", exif=exif.tobytes())
    data = buf.getvalue()
    for color, exif_transpose, size in [(1, None, (10, 20)), (0, None, (10, 20)),
                                        (-1, None, (20, 10)), (1, False, (20, 10)),
                                        (-1, True, (10, 20))]:
        options = ImageOptions(resize=10, color=color, exif_transpose=exif_transpose,
                               resize_mode=resize_mode)
        pixels = render_pixels(data, options)
        assert (pixels.shape[1], pixels.shape[0]) == size, (color, exif_transpose)


def test_decode_failures_become_image_errors():
    jpeg = io.BytesIO()
    Image.effect_noise((64, 64), 50).convert("RGB").save(jpeg, "JPEG")
    bad = {
        "text": b"this is not an image\n",
        "headers only": jpeg.getvalue()[:400],
        "empty": b"",
        "bomb": _declared_png(50_000, 50_000),
    }
    for what, data in bad.items():
        with pytest.raises(ImageError, match=what):
            transform_image(data, ImageOptions(resize=32), what)
    # a JPEG that lost its second half decodes as libjpeg recovers it (the rest grey), as
    # cv2.imread and so MXNet's im2rec read it
    half = transform_image(jpeg.getvalue()[: len(jpeg.getvalue()) // 2], ImageOptions())
    assert Image.open(io.BytesIO(half)).size == (64, 64)
    with pytest.raises(ImageError, match="decompression-bomb"):
        transform_image(jpeg.getvalue(), ImageOptions(max_pixels=1000))


def _declared_png(width, height):
    """A tiny PNG whose header declares a huge image (a decompression bomb)."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


# ------------------------------------------------------------------------------- bad input


def _folder_with_bad_images(tmp_path):
    root = tmp_path / "img"
    (root / "ok").mkdir(parents=True)
    good = []
    for i in range(6):
        Image.new("RGB", (30 + i, 20), (i * 40, 0, 0)).save(root / "ok" / f"g{i}.jpg")
        good.append(f"ok/g{i}.jpg")
    full = (root / "ok" / "g0.jpg").read_bytes()
    (root / "trunc.jpg").write_bytes(full[: len(full) // 2])
    (root / "text.jpg").write_text("hello, I am not a JPEG\n")
    (root / "bomb.png").write_bytes(_declared_png(60_000, 60_000))
    names = ["ok/g0.jpg", "missing.jpg", "ok/g1.jpg", "trunc.jpg", "ok/g2.jpg", "text.jpg",
             "ok/g3.jpg", "bomb.png", "ok/g4.jpg", "ok/g5.jpg"]
    lst = tmp_path / "data.lst"
    lst.write_text("".join(f"{i}\t{i % 3}.000000\t{n}\n" for i, n in enumerate(names)))
    return root, lst, names


@pytest.mark.parametrize("workers", [1, 2])
def test_bad_images_are_skipped_reported_and_good_ones_kept(tmp_path, workers):
    root, lst, names = _folder_with_bad_images(tmp_path)
    args = [str(tmp_path / "data"), str(root), "--resize", "16", "--num-thread", str(workers)]
    result = CliRunner().invoke(im2rec_cmd, args)
    assert result.exit_code == 0, result.output
    assert "packed 6 images, skipped 4" in result.stdout and "Traceback" not in result.output
    assert [r["key"] for r in records(tmp_path / "data.rec")] == [0, 2, 4, 6, 8, 9]
    rows = (tmp_path / "data.errors.tsv").read_text().splitlines()
    assert rows[0] == "line\tindex\tpath\treason"
    table = {row.split("\t")[2]: row.split("\t") for row in rows[1:]}
    assert sorted(table) == ["bomb.png", "missing.jpg", "text.jpg", "trunc.jpg"]
    assert table["missing.jpg"][:2] == ["2", "1"] and "no such file" in table["missing.jpg"][3]
    assert "truncated" in table["trunc.jpg"][3] or "decode" in table["trunc.jpg"][3]
    assert "pixels" in table["bomb.png"][3] or "bomb" in table["bomb.png"][3].lower()
    strict = CliRunner().invoke(im2rec_cmd, args + ["--strict", "--force"])
    assert strict.exit_code == 1 and "4 image(s) could not be packed" in strict.output


def test_a_clean_rerun_removes_a_stale_errors_file(tmp_path):
    root, lst, names = _folder_with_bad_images(tmp_path)
    pack_list(lst, root)
    assert os.path.exists(tmp_path / "data.errors.tsv")
    lst.write_text("0\t0\tok/g0.jpg\n")
    result = pack_list(lst, root, PackSettings(force=True))
    assert result.errors_path is None and not os.path.exists(tmp_path / "data.errors.tsv")


def test_pass_through_stores_file_bytes(golden, tmp_path):
    shutil.copy(golden / "im2rec" / "multi.lst", tmp_path)
    root = golden / "im2rec" / "images"
    result = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "multi"), str(root),
                                             "--pass-through"])
    assert result.exit_code == 0, result.output
    reader = recio.IndexedRecordReader(str(tmp_path / "multi.rec"), str(tmp_path / "multi.idx"))
    header, payload = recio.unpack(reader[2])
    assert payload == (root / "cat" / "cat_1.jpeg").read_bytes()
    assert header.flag == 0 and header.label == 1.0  # first label only without --pack-label


@pytest.mark.parametrize("pack_label", [False, True])
def test_inspect_reads_packed_headers_as_the_header_module_does(golden, tmp_path, pack_label):
    """``recio.image.tools.stats`` reads IRHeaders on the raw map, without building records: on what
    im2rec packs it must agree with ``unpack_header``."""
    from recio.image.header import unpack_header
    from recio.image.tools.stats import scan_file

    shutil.copy(golden / "im2rec" / "multi.lst", tmp_path)
    result = pack_list(tmp_path / "multi.lst", golden / "im2rec" / "images",
                       PackSettings(pack_label=pack_label))
    st, _ = scan_file(result.rec_path, show=100)
    reader = recio.RecordReader(result.rec_path)
    assert len(st.shown) == st.records == st.images.records == result.packed
    for entry in st.shown:
        header, end = unpack_header(reader.read_at(entry["offset"]))
        assert (entry["flag"], entry["id"], entry["id2"]) == (header.flag, header.id, header.id2)
        label = header.label.tolist() if header.flag else header.label
        assert entry["label"] == pytest.approx(label)
        assert entry["format"] == "jpeg" and entry["length"] > end
    assert st.images.vector_labels == (result.packed if pack_label else 0)
    assert st.index is not None and st.index.ok and st.index.path == result.idx_path


def test_scan_file_takes_idx_path(golden, tmp_path):
    from recio.image.tools.stats import scan_file

    shutil.copy(golden / "im2rec" / "multi.lst", tmp_path)
    result = pack_list(tmp_path / "multi.lst", golden / "im2rec" / "images")
    elsewhere = tmp_path / "elsewhere.idx"
    shutil.move(result.idx_path, elsewhere)
    assert scan_file(result.rec_path)[0].index is None  # none beside the file
    st, _ = scan_file(result.rec_path, idx_path=str(elsewhere))
    assert st.index.path == str(elsewhere) and st.index.ok


def test_a_malformed_list_line_is_skipped_with_its_line_and_the_pack_goes_on(tmp_path, golden):
    lst = tmp_path / "bad.lst"
    lst.write_text("0\t0.000000\ttop_level.jpg\n1\tcat/cat_0.jpg\n2\t1.0\tcat/cat_0.jpg\n")
    args = [str(tmp_path / "bad"), str(golden / "im2rec" / "images")]
    result = CliRunner().invoke(im2rec_cmd, args)
    assert result.exit_code == 0 and "Traceback" not in result.output
    assert "packed 2 images, skipped 1 (1 malformed line)" in result.stdout
    rows = (tmp_path / "bad.errors.tsv").read_text().splitlines()
    line, index, path, reason = rows[1].split("\t")
    assert (line, index, path) == ("2", "-", "-") and "3 tab-separated fields" in reason
    assert [r["key"] for r in records(tmp_path / "bad.rec")] == [0, 2]
    strict = CliRunner().invoke(im2rec_cmd, args + ["--force", "--strict"])
    assert strict.exit_code == 1


# ----------------------------------------------------------------------- interruption, resume


_BLOCKING_HOOK = """
import os
if os.environ.get("RECIO_TEST_BLOCK_ON"):
    import recio.image.packing.worker as pack_worker

    def _blocking(job, relpath, _read=pack_worker._read_image_file):
        if relpath == os.environ["RECIO_TEST_BLOCK_ON"]:
            with open(os.environ["RECIO_TEST_FIFO"], "rb") as fifo:  # blocks: no writer
                fifo.read()
        return _read(job, relpath)

    pack_worker._read_image_file = _blocking
"""


def _blocking_folder(tmp_path, n=40, blocker=25):
    """Images 0..n-1 and the environment of a packer that blocks when it reads image
    ``blocker`` (it opens a FIFO nobody writes to; im2rec itself never opens a FIFO), so a test
    can interrupt it there: a ``sitecustomize`` on PYTHONPATH wraps the file reader."""
    root = tmp_path / "img"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(
            root / f"{i}.jpg", quality=90)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_BLOCKING_HOOK)
    os.mkfifo(tmp_path / "block.fifo")
    env = dict(os.environ, RECIO_TEST_BLOCK_ON=f"{blocker}.jpg",
               RECIO_TEST_FIFO=str(tmp_path / "block.fifo"),
               PYTHONPATH=os.pathsep.join([str(hook)] + [p for p in [
                   os.environ.get("PYTHONPATH")] if p]))
    lst = tmp_path / "job.lst"
    lst.write_text("".join(f"{i}\t{i % 5}.000000\t{i}.jpg\n" for i in range(n)))
    return root, lst, env


def _wait_for_journal(journal, entries, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(journal):
            with open(journal, "rb") as f:
                if f.read().count(b"\n") >= entries + 1:  # + the header line
                    return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("the packer made no progress")


@pytest.mark.posix_only("blocks the packer on a FIFO, then sends it SIGKILL or SIGINT")
@pytest.mark.parametrize("sig, workers", [
    (SIGKILL, ["--num-thread", "1"]),
    (signal.SIGINT, ["--num-thread", "1"]),
    (signal.SIGINT, ["--num-thread", "2", "--executor", "process"]),
    (signal.SIGINT, ["--num-thread", "2", "--executor", "thread"]),
], ids=["kill", "ctrl-c", "ctrl-c-processes", "ctrl-c-threads"])
@pytest.mark.slow
def test_interrupted_pack_leaves_no_complete_output_and_resume_finishes(script, tmp_path, sig,
                                                                        workers):
    """A worker blocks reading image 25; the packer is killed or interrupted there
    (a stuck worker must not keep Ctrl-C from stopping it), then --resume completes the job."""
    root, lst, env = _blocking_folder(tmp_path)
    prefix = str(tmp_path / "job")
    cmd = [*script("im2rec"), prefix, str(root), "--resize", "16", "--quality", "90", *workers]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_in_a_terminal, env=env)
    rec_partial, journal = PackPaths.of(lst).partial
    try:
        _wait_for_journal(journal, 24, proc)  # batches of 4 or 8: 0..23 done, blocked on 25.jpg
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a failed wait must not leave the packer running
            proc.kill()
            proc.communicate()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Traceback" not in err and "--resume" in err
        assert err.count("Interrupted") == 1  # said once, with what to do
    else:
        assert proc.returncode == -signal.SIGKILL
    # nothing that looks like a finished pack
    assert not os.path.exists(prefix + ".rec") and not os.path.exists(prefix + ".idx")
    assert os.path.exists(rec_partial) and os.path.exists(journal)
    # a torn tail (half a record, half a journal line) must be ignored on resume
    with open(rec_partial, "ab") as f:
        f.write(recio.records.framing.MAGIC_BYTES + b"\x10\x00")
    with open(journal, "ab") as f:
        f.write(b"R\t24\t24\t99")
    os.unlink(root / "25.jpg")
    Image.new("RGB", (32, 24), (9, 9, 9)).save(root / "25.jpg", quality=90)
    done = subprocess.run(cmd + ["--resume", "--num-thread", "2"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resumed after 24" in done.stdout
    recs = records(prefix + ".rec")
    assert [r["key"] for r in recs] == list(range(40))  # every record exactly once, in order
    assert [r["label"] for r in recs] == [float(i % 5) for i in range(40)]
    assert not os.path.exists(rec_partial) and not os.path.exists(journal)
    # byte-identical to an uninterrupted run
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(lst, fresh / "job.lst")
    pack_list(fresh / "job.lst", root, PackSettings(ImageOptions(resize=16, quality=90)))
    assert (fresh / "job.rec").read_bytes() == open(prefix + ".rec", "rb").read()
    assert (fresh / "job.idx").read_bytes() == open(prefix + ".idx", "rb").read()


#: a ``sitecustomize`` that holds each spawned worker process at the start for 3 s (where it
#: imports Python's and recio's modules) after it creates the file ``PID`` in the folder
#: RECIO_TEST_STARTING, and ``PID.interrupted`` there if a KeyboardInterrupt stops it meanwhile
_SLOW_SPAWN_HOOK = """
import os, sys
if "--multiprocessing-fork" in sys.argv and os.environ.get("RECIO_TEST_STARTING"):
    import multiprocessing.spawn, time
    _prepare = multiprocessing.spawn.prepare

    def _slow_prepare(data):
        mark = os.path.join(os.environ["RECIO_TEST_STARTING"], str(os.getpid()))
        open(mark, "w").close()
        try:
            time.sleep(3)
        except KeyboardInterrupt:
            open(mark + ".interrupted", "w").close()
            raise
        _prepare(data)
    multiprocessing.spawn.prepare = _slow_prepare
"""


def _im2rec_with(method):
    """``python -c`` code that runs im2rec with multiprocessing's start method ``method`` (as on
    a platform whose default it is), arguments after it."""
    return (f"import multiprocessing, sys; multiprocessing.set_start_method({method!r}); "
            f"sys.argv[0] = 'im2rec'; from recio.cli.im2rec import main; main()")


#: im2rec as run where multiprocessing spawns (Windows, macOS), arguments after it
_SPAWNING_IM2REC = _im2rec_with("spawn")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
@pytest.mark.parametrize("method", START_METHODS)
def test_a_worker_killed_mid_pack_stops_it_with_an_error_and_resume_finishes(tmp_path, method):
    """A worker process killed while it packs (as by the OOM killer; here each kills itself at
    its third image), forked or spawned: multiprocessing's pool replaces it, but the batch it
    held never comes back, and the pack waited for it for ever. Now the pack stops with one
    line that says so, keeping its progress, and --resume finishes it."""
    lst = make_corpus(tmp_path, n=30)
    cmd = [sys.executable, "-c", _im2rec_with(method), str(tmp_path / "job"),
           str(tmp_path / "img"), "--resize", "16", "--num-thread", "2", "--executor", "process"]
    env = hook_env(tmp_path, kill_at="recio.image.packing.worker:_read_image_file:3:KILL")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{lst}: a worker process was killed by signal {int(signal.SIGKILL)} (out of " \
        "memory?) before its images were packed" in proc.stderr
    assert "--resume" in proc.stderr and os.path.exists(PackPaths.of(lst).partial[0])
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "packed 29 images" in done.stdout and not os.path.exists(PackPaths.of(lst).partial[0])


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="a terminal's Ctrl-C to a process group "
                    "is POSIX's (a Windows console's reaches every process attached to it)")
def test_ctrl_c_while_spawned_workers_start_says_interrupted_once(tmp_path):
    """A terminal's Ctrl-C reaches the whole process group, worker processes included. A
    spawned worker (the default on Windows and macOS) needs a moment to start before it can
    ignore Ctrl-C; a Ctrl-C then must not raise KeyboardInterrupt in it (whose traceback
    reaches the terminal when the worker prints it before the packer stops it): the packer
    says "Interrupted" once and keeps its progress for --resume."""
    make_corpus(tmp_path, n=8, missing=(), bad_lines=())
    root = tmp_path / "img"
    starting, hook = tmp_path / "starting", tmp_path / "hook"
    starting.mkdir()
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SLOW_SPAWN_HOOK)
    env = dict(os.environ, RECIO_TEST_STARTING=str(starting), PYTHONPATH=os.pathsep.join(
        [str(hook)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.Popen([sys.executable, "-c", _SPAWNING_IM2REC, str(tmp_path / "job"),
                             str(root), "--num-thread", "2", "--executor", "process"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=as_in_a_terminal, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(starting)) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        assert len(os.listdir(starting)) == 2, "the workers did not start"
        time.sleep(0.5)  # both are in their 3 s start
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the packer and both starting workers
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert not [n for n in os.listdir(starting) if n.endswith(".interrupted")]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.count("Interrupted") == 1 and "--resume" in err, err


#: a library user's script that packs on worker processes, as it runs where multiprocessing
#: spawns (Windows, macOS), written without ``if __name__ == "__main__":``
_UNGUARDED_SCRIPT = """
import multiprocessing, sys
multiprocessing.set_start_method("spawn", force=True)
from recio.errors import RecordIOError
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import pack_list
try:
    pack_list(sys.argv[1], sys.argv[2], PackSettings(workers=2, executor="process"))
except RecordIOError as exc:
    sys.exit(str(exc))
"""


@pytest.mark.slow
def test_a_script_without_a_main_guard_gets_an_error_not_a_hang(tmp_path):
    """A spawned worker first runs the script that started the pack again (as its main module);
    without ``if __name__ == "__main__":`` that second pack fails (the first holds the lock)
    and the worker ends before it starts. multiprocessing's pool replaces such workers for
    ever: the pack waited for batches that never came. Now it stops at once and says what to
    do, keeping its partial output for resume."""
    lst, root = make_corpus(tmp_path, n=8, missing=(), bad_lines=()), tmp_path / "img"
    (tmp_path / "pack.py").write_text(_UNGUARDED_SCRIPT)
    proc = subprocess.run([sys.executable, str(tmp_path / "pack.py"), str(lst), str(root)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "job.lst: a worker process exited with status 1" in last, proc.stderr
    assert 'inside if __name__ == "__main__"' in last and "resume" in last, last
    assert not (tmp_path / "job.rec").exists() and os.path.exists(PackPaths.of(lst).partial[0])


def test_resume_refuses_other_settings_and_skips_finished_lists(golden, tmp_path):
    root = golden / "im2rec" / "images"
    shutil.copy(golden / "im2rec" / "all.lst", tmp_path)
    lst = tmp_path / "all.lst"

    def stop(done, total):
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pack_list(lst, root, PackSettings(ImageOptions(resize=20)), progress=stop)
    other = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "all"), str(root), "--resize", "30",
                                            "--resume"])
    assert other.exit_code == 2, other.output
    assert f"{lst}: the interrupted pack used other settings: --resize was 20, now 30; resume " \
           "it as it was started (--resize 20), or start over with --force (which deletes " \
           "all.rec.partial and all.pack.journal)" in other.output
    again = pack_list(lst, root, PackSettings(ImageOptions(resize=20), resume=True))
    assert again.resumed == 4 and again.packed == 13
    finished = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "all"), str(root), "--resize",
                                               "20", "--resume"])
    assert finished.exit_code == 0 and "already packed" in finished.output


@pytest.mark.slow
@pytest.mark.posix_only("blocks the packer on a FIFO, then sends it SIGINT, SIGTERM or SIGKILL")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, SIGKILL],
                         ids=["ctrl-c", "sigterm", "kill"])
def test_an_interrupted_sharded_pack_publishes_nothing_and_resume_finishes(script, tmp_path,
                                                                          sig):
    """--num-shards packs in a staging folder: stopped half way, no shard and no manifest
    appears; the finished shard is kept and --resume finishes the set byte for byte."""
    import glob

    from support import assert_same_files

    root, lst, env = _blocking_folder(tmp_path)
    prefix = str(tmp_path / "job")
    cmd = [*script("im2rec"), prefix, str(root), "--resize", "16", "--num-shards", "3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_in_a_terminal, env=env)
    try:
        deadline = time.monotonic() + 60
        # 40 items in 3 shards of 14: shard 0 is done and shard 1 has journaled images 14..21
        # (batches of 4) when the packer blocks on image 25
        journal = str(tmp_path / ".recio-pack-*" / "part-00001.*.pack.journal")
        while not glob.glob(journal):
            assert proc.poll() is None and time.monotonic() < deadline, "no progress"
            time.sleep(0.02)
        _wait_for_journal(glob.glob(journal)[0], 8, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    names = set(os.listdir(tmp_path))
    assert not any(n.startswith("job-") or n.endswith(".manifest.json") for n in names)
    staged = tmp_path / ".recio-pack-job"
    assert (staged / "part-00000.json").exists() and (staged / "job.json").exists()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
        assert "Traceback" not in err
        assert "finished parts of" in err and "rerun with --resume" in err
        assert err.count("Interrupted") + err.count("Terminated") == 1, err  # said once
        # the stopped part kept its progress (journal and partial records) for the resume,
        # beside its attempt's record
        assert sorted(os.path.basename(p).split(".")[-1] for p in
                      glob.glob(str(staged / "part-00001.*"))) == ["attempt1", "journal",
                                                                   "partial"]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "--resume, or start over with --force" in again.stderr
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 of 3 parts kept" in done.stdout
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(lst, clean / "job.lst")
    fresh = subprocess.run([*script("im2rec"), str(clean / "job"), str(root), "--resize", "16",
                            "--num-shards", "3"], capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert_same_files(tmp_path, clean, "job")


@pytest.mark.posix_only("sends itself SIGTERM, which ends the process at once on Windows")
def test_sigterm_is_reported_as_sigterm_when_a_library_turns_it_into_a_plain_ctrl_c(
        tmp_path, monkeypatch):
    """Ray's driver, waiting in ray.get/ray.wait, catches the Terminated that im2rec's SIGTERM
    handler raises and raises a plain KeyboardInterrupt instead: im2rec still says
    "Terminated (SIGTERM)" and exits 143, not "Interrupted" and 130 (found by the issue-30
    check: ``--engine ray`` killed with SIGTERM mid-pack exited 130 about half the time)."""
    import recio.cli.im2rec as cli
    (tmp_path / "img").mkdir()
    lst = tmp_path / "p.lst"
    lst.write_text("0\t0.000000\ta.jpg\n")

    def fake_pack(prefix, root, settings, progress_for, on_lists, **kwargs):
        progress_for(str(lst))
        try:  # as Ray's check_signals does with the handler's exception
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            raise KeyboardInterrupt() from None
        yield  # a generator, as pack_prefix_to

    monkeypatch.setattr(cli, "pack_prefix_to", fake_pack)
    result = CliRunner().invoke(cli.im2rec_cmd, [str(tmp_path / "p"), str(tmp_path / "img"),
                                                 "-q"])
    assert result.exit_code == 143, result.output
    assert "Terminated (SIGTERM)" in result.stderr, result.stderr
    assert "Interrupted" not in result.stderr, result.stderr
