"""One policy for images nothing can decode (``recio.image.undecodable``), in every reader that
decodes images and in the commands: skipped and counted, each named once with its file, key (or
place in the stream) and byte offset, an epoch never ended by one image; ``"raise"`` raises
``ImageError`` at the first one.

The data is MXNet's: ``tests/data/mxnet_damaged`` (``make.py`` ran the real MXNet 1.9.1).
``raw_damaged.rec`` holds the 15 images of ``damaged.lst`` as they are (``--pass-through``):
four that nothing decodes (a cut PNG, an empty file, a JPEG of headers only, text) and eleven
damaged JPEGs libjpeg recovers or whole ones; MXNet's own ``ImageRecordIter`` died of SIGFPE on
it, and gave 11 batches of one over ``raw_recoverable.rec`` (the eleven alone). The torch
datasets' tests are in ``test_torch_undecodable.py``.
"""
import json
import re
import subprocess
import sys
import warnings

import cv2
import numpy as np
import pytest
from click.testing import CliRunner

import recio
import recio.mx as mx
from conftest import need
from support import BAD, GOOD, IDX, LIST, MXNET_DAMAGED, REC
from recio.errors import ImageError, SkippedRecordWarning
from recio.image.undecodable import ON_UNDECODABLE

MX = MXNET_DAMAGED / "mxnet"
MANIFEST = json.loads((MX / "manifest.json").read_text())
EXPECTED = np.load(MX / "expected.npz")
#: each record's byte offset, by key
OFFSET = {int(k): int(o) for k, o in (line.split("\t") for line in open(IDX).read().split("\n")
                                       if line)}
#: what MXNet 1.9.1's ImageRecordIter made of the decodable records alone
MX_BATCHES = MANIFEST["iter"]["recoverable_batches"]


def test_the_golden_data_says_what_these_tests_assume():
    assert BAD == [0, 4, 5, 14] and len(GOOD) == MX_BATCHES == 11
    assert MANIFEST["iter"]["damaged"]["returncode"] == -8  # MXNet died of SIGFPE on it
    assert MANIFEST["im2rec"]["raw_recoverable"]["keys"] == GOOD


def _skipped(caught):
    """The messages of the SkippedRecordWarnings among ``caught``."""
    return [str(w.message) for w in caught if issubclass(w.category, SkippedRecordWarning)]


def _names_each_once(messages, where):
    """Every bad record named exactly once, ``where(key)`` giving how (a regex)."""
    for key in BAD:
        hits = [m for m in messages if re.search(where(key), m)]
        assert len(hits) == 1, (key, messages)
    assert len(messages) == len(BAD), messages


# -- recio.ImageBatchIter -------------------------------------------------------------------------
@pytest.mark.parametrize("indexed", [True, False])
def test_native_iterator_skips_counts_and_names_each_undecodable_record(indexed):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with recio.ImageBatchIter(REC, (3, 48, 48), 1, path_imgidx=IDX if indexed else None,
                                   resize=48, round_batch=False, dtype="uint8") as it:
            ids = [int(b.index[0]) for b in it]
            assert it.num_skipped == len(BAD)
            it.reset()
            assert len(list(it)) == MX_BATCHES and it.num_skipped == 2 * len(BAD)
    assert ids == GOOD and len(ids) == MX_BATCHES
    first = _skipped(caught)[:len(BAD)]
    name = (lambda k: f"key {k}") if indexed else (lambda k: f"record #{k}")
    _names_each_once(first, lambda k: rf"^{re.escape(REC)}: byte {OFFSET[k]}: {name(k)}: "
                                      r".+; skipped$")


@pytest.mark.filterwarnings("ignore::recio.errors.SkippedRecordWarning")
def test_the_records_kept_are_the_decodable_records_alone():
    """Over raw_damaged.rec the iterator gives exactly what it gives over raw_recoverable.rec
    (the eleven decodable records alone, as MXNet packed them), pixel for pixel, with the labels
    MXNet's iterator gave there: the skipped records leave no trace."""
    with recio.mx.io.ImageRecordIter(path_imgrec=REC, **MANIFEST["iter"]["args"]) as it:
        batches = list(it)
        assert it.num_skipped == len(BAD)
    alone = recio.mx.io.ImageRecordIter(path_imgrec=str(MX / "raw_recoverable.rec"),
                                        **MANIFEST["iter"]["args"])
    assert len(batches) == MX_BATCHES and alone.num_skipped == 0
    for k, (batch, want) in enumerate(zip(batches, alone)):
        assert np.array_equal(batch.data[0].asnumpy(), want.data[0].asnumpy()), k
        assert batch.label[0].asnumpy().tolist() == EXPECTED[f"iter|{k}|label"].tolist()


@pytest.mark.parametrize("indexed", [True, False])
def test_raise_mode_raises_at_the_first_undecodable_record(indexed):
    it = recio.ImageBatchIter(REC, (3, 48, 48), 4, path_imgidx=IDX if indexed else None,
                               resize=48, on_undecodable="raise")
    with it, pytest.raises(ImageError) as info:
        next(it)
    name = "key 0" if indexed else "record #0"
    assert str(info.value).startswith(f"{REC}: byte 0: {name}: ")
    assert info.value.path == REC and info.value.offset == 0


def test_every_reader_refuses_an_unknown_policy():
    with pytest.raises(ValueError, match="on_undecodable must be 'skip'.* or 'raise'"):
        recio.ImageBatchIter(REC, (3, 8, 8), 1, on_undecodable="ignore")
    with pytest.raises(ValueError, match="on_undecodable must be one of skip, raise"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=1,
                              on_undecodable="ignore")
    with pytest.raises(ValueError, match="on_undecodable"):
        mx.image.ImageIter(1, (3, 8, 8), path_imgrec=REC, on_undecodable="warn")
    with pytest.raises(ValueError, match="on_undecodable"):
        mx.gluon.data.vision.ImageRecordDataset(REC, on_undecodable=None)
    assert ON_UNDECODABLE == ("skip", "raise")


@pytest.mark.slow
def test_python_shows_each_skipped_record_once_across_epochs(tmp_path):
    """Default warning filters, a real process: three epochs name each bad record once."""
    code = (f"import recio\n"
            f"it = recio.ImageBatchIter({REC!r}, (3, 16, 16), 2, path_imgidx={IDX!r},\n"
            f"                           resize=16, shuffle=True, preprocess_threads=2)\n"
            f"for epoch in range(3):\n"
            f"    n = sum(2 - b.pad for b in it)\n"
            f"    it.reset()\n"
            f"print(n, it.num_skipped)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(len(GOOD)), str(3 * len(BAD))]
    lines = [line for line in proc.stderr.splitlines() if "SkippedRecordWarning" in line]
    _names_each_once(lines, lambda k: rf"byte {OFFSET[k]}: key {k}: .+; skipped$")


# -- recio.mx ---------------------------------------------------------------------------------
@pytest.mark.parametrize("indexed", [True, False])
def test_mx_image_record_iter_skips_where_mxnet_dies(indexed):
    """MXNet 1.9.1's ImageRecordIter was killed by SIGFPE over this file (manifest.json);
    recio's gives the batches MXNet gives for the decodable records alone, names the rest."""
    args = dict(MANIFEST["iter"]["args"], path_imgrec=REC, path_imgidx=IDX if indexed else "")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        it = mx.io.ImageRecordIter(**args)
        labels = [b.label[0].asnumpy().tolist() for b in it]
    assert len(labels) == MX_BATCHES and it.num_skipped == len(BAD)
    assert labels == [EXPECTED[f"iter|{k}|label"].tolist() for k in range(MX_BATCHES)]
    name = (lambda k: f"key {k}") if indexed else (lambda k: f"record #{k}")
    _names_each_once(_skipped(caught), lambda k: rf"byte {OFFSET[k]}: {name(k)}: .+; skipped$")
    with pytest.raises(ImageError, match=rf"^{re.escape(REC)}: byte 0: "):
        mx.io.ImageRecordIter(**args, on_undecodable="raise")


def test_mx_image_record_iter_over_nothing_decodable_says_so(tmp_path):
    rec = str(tmp_path / "none.rec")
    with recio.RecordWriter(rec) as w:
        for i in range(3):
            w.write(recio.pack(recio.IRHeader(0, 0.0, i, 0), b"not an image"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedRecordWarning)
        with pytest.raises(recio.RecordIOError, match="none of the 3 records read holds an "
                                                      "image that decodes"):
            mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2)


@pytest.mark.parametrize("source", ["indexed", "sequential", "list"])
def test_mx_image_iter_skips_counts_and_names(source):
    """MXNet's Python ImageIter raises RuntimeError('Broken image ...') on these; recio's skips
    them (named, counted), or raises ImageError with on_undecodable='raise'."""
    kwargs = {"indexed": dict(path_imgrec=REC, path_imgidx=IDX),
              "sequential": dict(path_imgrec=REC),
              "list": dict(path_imglist=str(MXNET_DAMAGED / "damaged.lst"), path_root=str(MXNET_DAMAGED))}[source]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        it = mx.image.ImageIter(1, (3, 16, 16), resize=16, **kwargs)
        labels = [float(b.label[0].asnumpy()[0]) for b in it]
    assert labels == [float(LIST[k][1]) for k in GOOD] and it.num_skipped == len(BAD)
    if source == "list":
        def where(k):
            return rf"^{re.escape(str(MXNET_DAMAGED / LIST[k][2]))}: key {k}: .+; skipped$"
    else:
        name = (lambda k: f"key {k}") if source == "indexed" else (lambda k: f"record #{k}")
        def where(k):
            return rf"^{re.escape(REC)}: byte {OFFSET[k]}: {name(k)}: .+; skipped$"
    _names_each_once(_skipped(caught), where)
    it = mx.image.ImageIter(2, (3, 16, 16), resize=16, on_undecodable="raise", **kwargs)
    with pytest.raises(ImageError, match="key 0: |record #0: "):
        it.next()


def test_gluon_image_record_dataset_puts_the_next_decodable_record_in_place():
    ds = mx.gluon.data.vision.ImageRecordDataset(REC)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        image, label = ds[0]
        assert np.array_equal(image.asnumpy(), ds[1][0].asnumpy()) and label == ds[1][1]
        assert np.array_equal(ds[14][0].asnumpy(), ds[1][0].asnumpy())  # wraps around
        assert np.array_equal(ds[4][0].asnumpy(), ds[6][0].asnumpy())  # 5 is bad too
    assert _skipped(caught) == [
        f"{REC}: byte 0: key 0: {_reason(0)}; skipped, key 1 in its place",
        f"{REC}: byte {OFFSET[14]}: key 14: {_reason(14)}; skipped, key 1 in its "
        f"place",
        f"{REC}: byte {OFFSET[4]}: key 4: {_reason(4)}; skipped, key 6 in its place"]
    assert ds.num_skipped == 3
    loader = mx.gluon.data.DataLoader(ds.transform_first(lambda x: mx.image.imresize(x, 8, 8)),
                                      batch_size=4, num_workers=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedRecordWarning)
        assert sum(data.shape[0] for data, _ in loader) == len(LIST)
    assert ds.num_skipped == 3 + len(BAD)
    strict = mx.gluon.data.vision.ImageRecordDataset(REC, on_undecodable="raise")
    with pytest.raises(ImageError, match=rf"^{re.escape(REC)}: byte {OFFSET[5]}: key 5: "):
        strict[5]


def _reason(key):
    """What the decoder says of a bad record's image."""
    header, img = recio.unpack(recio.IndexedRecordReader(REC, IDX)[key])
    try:
        recio.image.pixels.codec.decode(img)
    except ImageError as exc:
        return exc.message
    raise AssertionError(f"key {key} decodes")


# -- every reader, on a file made here -------------------------------------------------------
def _made(tmp_path):
    """A .rec (keys 10..17, label = key) whose keys 11, 13, 14 and 16 hold what nothing decodes:
    text, nothing, a PNG cut in half, a JPEG's headers without its scan."""
    rng = np.random.default_rng(0)
    photo = rng.integers(0, 256, (24, 32, 3), np.uint8)
    png = cv2.imencode(".png", photo)[1].tobytes()
    jpeg = cv2.imencode(".jpg", photo)[1].tobytes()
    payloads = {10: png, 11: b"this is not an image", 12: jpeg, 13: b"", 14: png[:len(png) // 2],
                15: png, 16: jpeg[:jpeg.index(b"\xff\xda")], 17: jpeg}
    rec, idx = str(tmp_path / "made.rec"), str(tmp_path / "made.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        for key, payload in payloads.items():
            w.write(key, recio.pack(recio.IRHeader(0, float(key), key, 0), payload))
    with recio.IndexedRecordReader(rec, idx) as r:
        offsets = {key: r.index.offset_of(key) for key in payloads}
    return rec, idx, offsets


def _labels_read_by(reader, rec, idx):
    """(labels of the samples, num_skipped) of one epoch of ``reader`` over ``rec``."""
    shape = (3, 16, 16)
    if reader in ("native", "native streamed"):
        with recio.ImageBatchIter(rec, shape, 3, path_imgidx=idx if reader == "native" else None,
                                   resize=16, round_batch=False) as it:
            return [v for b in it for v in b.label[:3 - b.pad, 0].tolist()], it.num_skipped
    if reader == "mx.io":
        it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=shape,
                                   batch_size=3, resize=16, round_batch=False)
        return [v for b in it for v in b.label[0].asnumpy()[:3 - b.pad].tolist()], it.num_skipped
    if reader == "mx.image":
        it = mx.image.ImageIter(3, shape, path_imgrec=rec, path_imgidx=idx, resize=16,
                                last_batch_handle="discard")
        return [v for b in it for v in b.label[0].asnumpy().tolist()], it.num_skipped
    if reader == "gluon":
        ds = mx.gluon.data.vision.ImageRecordDataset(rec)
        return [float(ds[i][1]) for i in range(len(ds))], ds.num_skipped
    need("torch")
    from torch.utils.data import DataLoader

    from recio.torch import RecordDataset, RecordIterableDataset

    ds = RecordDataset(rec) if reader == "torch" else RecordIterableDataset(rec)
    return [float(label) for _, label in DataLoader(ds, batch_size=None)], ds.num_skipped


@pytest.mark.parametrize("reader", ["native", "native streamed", "mx.io", "mx.image", "gluon",
                                    "torch", "torch streamed"])
def test_every_reader_of_a_file_of_undecodable_payloads(tmp_path, reader):
    rec, idx, offsets = _made(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels, skipped = _labels_read_by(reader, rec, idx)
    bad = [11, 13, 14, 16]
    if reader in ("gluon", "torch"):  # one sample a key: the next decodable one in its place
        assert labels == [10, 12, 12, 15, 15, 15, 17, 17]
    elif reader == "mx.image":  # last_batch_handle="discard": one full batch of three
        assert labels == [10, 12, 15, 17][:3]
    else:
        assert labels == [10, 12, 15, 17]
    assert skipped == len(bad)
    messages = _skipped(caught)
    assert len(messages) == len(bad), messages
    for key, message in zip(bad, messages):
        place = f"record #{key - 10}" if "streamed" in reader else f"key {key}"
        assert message.startswith(f"{rec}: byte {offsets[key]}: {place}") and "; skipped" in \
            message, message


# -- the commands -----------------------------------------------------------------------------
@pytest.mark.slow
def test_show_skips_and_names_each_undecodable_image(script, tmp_path):
    out = tmp_path / "grid.png"
    proc = subprocess.run([*script("recio"), "show", REC, "-o", str(out), "-n", "20"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"drew {len(GOOD)} images from {len(LIST)} records" in proc.stdout
    assert f"{len(BAD)} undecodable" in proc.stdout
    named = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")
             and "; skipped" in line]
    _names_each_once(named, lambda k: rf"^warning: {re.escape(REC)}: byte {OFFSET[k]}: "
                                      rf"key {k}: .+; skipped$")
    proc = subprocess.run([*script("recio"), "show", REC, "-o", str(tmp_path / "g.png"),
                           "--json"], capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout)
    assert [(s["key"], s["offset"]) for s in report["undecodable"]] == \
        [(k, OFFSET[k]) for k in BAD]
    assert report["skipped"]["undecodable"] == len(BAD)


@pytest.mark.slow
def test_verify_images_lists_each_undecodable_image_and_exits_1(script):
    """A checker: it lists every image that does not decode, the empty one (an IRHeader and
    nothing after it, which the readers skip too) among them, and exits 1. It also names the
    JPEGs libjpeg had to repair, which the readers decode as MXNet's do
    (test_damaged_jpegs.py)."""
    proc = subprocess.run([*script("recio"), "verify", "--images", REC], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    bad = [(int(o), int(k)) for o, k, why in re.findall(
        r"bad image at byte (\d+): record id (\d+): (.*)", proc.stdout)
        if "repairs it" not in why and "marker it lacks" not in why]
    assert bad == [(OFFSET[k], k) for k in BAD]
    assert "holds no image" in proc.stdout and "DAMAGED" in proc.stdout


def test_im2rec_skips_counts_and_lists_each_undecodable_image(tmp_path):
    from recio.cli.im2rec import im2rec_cmd

    lst = tmp_path / "p.lst"
    lst.write_text((MXNET_DAMAGED / "damaged.lst").read_text())
    result = CliRunner().invoke(im2rec_cmd, [str(lst), str(MXNET_DAMAGED), "--resize", "64", "--quality",
                                             "90"])
    assert result.exit_code == 0, result.output
    assert f"skipped {len(BAD)}" in result.output
    with recio.IndexedRecordReader(str(tmp_path / "p.rec"), str(tmp_path / "p.idx")) as r:
        assert sorted(r.keys()) == MANIFEST["im2rec"]["resize64_q90"]["keys"] == GOOD
    rows = [row.split("\t") for row in (tmp_path / "p.errors.tsv").read_text().splitlines()[1:]]
    assert sorted(int(row[1]) for row in rows) == BAD
    assert sorted(row[2] for row in rows) == sorted(LIST[k][2] for k in BAD)
