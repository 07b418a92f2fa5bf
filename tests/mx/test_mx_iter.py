"""``recio.mx.io.ImageRecordIter`` against what the real MXNet 1.9.1 returned.

``tests/data/mxnet_iter/make.py`` ran MXNet's ``mx.io.ImageRecordIter`` on the records of that
folder (written by MXNet) for each configuration of its ``CONFIGS`` and recorded, for three
epochs with ``reset()`` after each, the batch count, pads, labels, dtypes, ``provide_data`` /
``provide_label`` and the data (arrays of the first epoch, sha256 of every batch). The same
arguments go to ``recio.mx.io.ImageRecordIter`` here: the data must be equal (float batches
within 1e-4; they are in fact bit for bit, which the digests check).

Where MXNet 1.9.1 reports a ``pad`` that is not the number of filler samples (``round_batch=
False``: 0; a full batch that reuses a buffer which once held a padded batch: that stale
``pad``), recio reports the number of filler samples; the tests check MXNet's value was the
stale one. The random augmentations are compared by their statistics (``STATS`` in make.py).
"""
import hashlib
import json
import math
import os
import pathlib
import re
import warnings

import numpy as np
import pytest

import recio
import recio.mx as mx
from recio.errors import RecordIOError, SkippedRecordWarning
from recio.image.batches.mxnet_augment import AugmentParams
from recio.mx.io_params import PARAMETERS

DATA = pathlib.Path(__file__).parents[1] / "data" / "mxnet_iter"
META = json.loads((DATA / "expected.json").read_text())
EXPECTED = np.load(DATA / "expected.npz")
BASE = dict(data_shape=(3, 32, 32), batch_size=5, preprocess_threads=1)
CONFIGS = [name for name, info in META.items()
           if isinstance(info, dict) and "rec" in info and not name.startswith("photos_")]
N = 12  # images in train.rec


def make_iter(name, **extra):
    """recio.mx.io.ImageRecordIter with make.py's arguments for configuration ``name``."""
    info = META[name]
    rec = info["rec"]
    args = dict(BASE, path_imgrec=str(DATA / f"{rec}.rec"), path_imgidx=str(DATA / f"{rec}.idx"))
    kwargs = dict(info["args"])
    kind = kwargs.pop("_iter", "ImageRecordIter")
    args.update(kwargs)
    if args["path_imgidx"] is None:
        del args["path_imgidx"]
    for key in ("path_imglist", "mean_img"):
        if key in args:
            args[key] = str(DATA / args[key])
    if "data_shape" in kwargs:
        args["data_shape"] = tuple(kwargs["data_shape"])
    args.update(extra)
    return getattr(mx.io, kind)(**args)


def describe(descs):
    return [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout] for d in descs]


def true_pads(pads):
    """MXNet's pads with the stale ones (a pad on a batch that is not the epoch's last) zeroed."""
    return [0] * (len(pads) - 1) + pads[-1:] if pads else []


@pytest.mark.parametrize("name", CONFIGS)
def test_batches_equal_mxnets(name):
    info = META[name]
    it = make_iter(name)
    assert type(it).__name__ == "MXDataIter" and isinstance(it, mx.io.DataIter)
    assert describe(it.provide_data) == info["provide_data"]
    assert describe(it.provide_label) == info["provide_label"]
    assert all(isinstance(d, mx.io.DataDesc) and isinstance(d, tuple)
               for d in it.provide_data + it.provide_label)
    rbf = info["args"].get("round_batch") is False
    for epoch, expected in enumerate(info["epochs"]):
        batches = list(it)
        assert len(batches) == expected["batches"], f"epoch {epoch}"
        pads = [b.pad for b in batches]
        if rbf:  # MXNet says 0; its last batch holds N % batch_size real samples
            assert expected["pads"] == [0] * len(pads)
            assert pads == [0] * (len(pads) - 1) + [-N % info["provide_data"][0][1][0]]
        else:
            assert pads == true_pads(expected["pads"]), f"epoch {epoch}: MXNet {expected['pads']}"
            assert expected["pads"][-1] == pads[-1]
        for b, batch in enumerate(batches):
            key = f"{name}|{epoch}|{b}"
            assert isinstance(batch, mx.io.DataBatch)
            assert isinstance(batch.data, list) and isinstance(batch.label, list)
            data, label = batch.data[0], batch.label[0]
            assert isinstance(data, mx.nd.NDArray) and isinstance(label, mx.nd.NDArray)
            assert [str(data.dtype), str(label.dtype)] == info["dtypes"][key]
            want_label = EXPECTED[key + "|label"]
            real = len(want_label)
            got = data.asnumpy()[:real]
            np.testing.assert_array_equal(label.asnumpy()[:real], want_label, err_msg=key)
            if epoch == 0:
                want = EXPECTED["data|" + info["refs"][key]].astype(got.dtype)
                assert got.shape == want.shape
                diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
                assert diff.max() <= 1e-4, f"{key}: max difference {diff.max()}"
            assert hashlib.sha256(got.tobytes()).hexdigest() == info["digests"][key], key
            if rbf:  # the filler: zeros (MXNet leaves whatever the buffer held)
                assert not data.asnumpy()[real:].any() and not label.asnumpy()[real:].any()
        it.reset()


def test_opencv_5s_warp_is_not_mxnets_so_cvops_keeps_its_own(monkeypatch):
    """Why recio.image.pixels.cvops.warp_affine is recio's own: cv2.warpAffine of OpenCV 5 does not
    give the rotations MXNet's OpenCV 3.4.2 gave (OpenCV 4's does)."""
    import cv2

    from recio.image.pixels import cvops
    def opencv_warp(img, matrix, width, height, interpolation=1, fill=0):
        values = np.broadcast_to(np.asarray(fill), (img.shape[2],)).tolist()
        out = cv2.warpAffine(np.ascontiguousarray(img), np.asarray(matrix, np.float64),
                             (int(width), int(height)), flags=interpolation,
                             borderMode=cv2.BORDER_CONSTANT,
                             borderValue=tuple(values[:4]) + (0,) * (4 - len(values[:4])))
        return out[:, :, None] if out.ndim == 2 else out

    monkeypatch.setattr(cvops, "warp_affine", opencv_warp)
    differ = []
    for name in ("rotate", "rotate77"):
        info = META[name]
        batch = next(iter(make_iter(name)))
        got = batch.data[0].asnumpy()
        if hashlib.sha256(got.tobytes()).hexdigest() != info["digests"][f"{name}|0|0"]:
            differ.append(name)
    assert bool(differ) == (int(cv2.__version__.split(".")[0]) >= 5), (cv2.__version__, differ)


@pytest.mark.parametrize("name", [n for n in META if n.startswith("photos_")])
def test_photo_sized_batches_equal_mxnets(name):
    """ImageNet-sized JPEGs through the GluonCV validation settings (resize 256, crop 224,
    mean/std), as uint8, and bicubic: bit for bit."""
    info = META[name]
    it = make_iter(name)
    assert describe(it.provide_data) == info["provide_data"]
    for b, batch in enumerate(it):
        data = batch.data[0].asnumpy()
        key = f"{name}|0|{b}"
        np.testing.assert_allclose(data[:, :, ::8, ::8], EXPECTED[key + "|sample"], atol=1e-4)
        assert hashlib.sha256(data.tobytes()).hexdigest() == info["digests"][key]


EXIF = pathlib.Path(__file__).parents[1] / "data" / "mxnet_exif"


@pytest.mark.parametrize("channels", [3, 1])
def test_jpeg_exif_orientation_applied_as_mxnets_iterator(tmp_path, channels):
    """MXNet's parser decodes with OpenCV 3.4's ``imdecode``, which turns a JPEG by its EXIF
    orientation (colour and grey; a PNG's eXIf chunk is not read): the pixels MXNet 1.9.1 gave
    for each orientation (``tests/data/mxnet_exif/make.py``)."""
    expected = np.load(EXIF / "expected.npz")
    reader = mx.recordio.MXIndexedRecordIO(str(EXIF / "exif.idx"), str(EXIF / "exif.rec"), "r")
    for key in reader.keys:
        one = tmp_path / f"{key}.rec"
        writer = mx.recordio.MXRecordIO(str(one), "w")
        writer.write(reader.read_idx(key))
        writer.close()
        want = expected[f"{key}|{channels}"]
        it = mx.io.ImageRecordIter(path_imgrec=str(one), data_shape=want.shape, batch_size=1,
                                   dtype="uint8")
        np.testing.assert_array_equal(it.next().data[0].asnumpy()[0], want, err_msg=str(key))


def test_mean_image_read_from_and_written_as_mxnets_nd_file(tmp_path):
    """mean_img: MXNet's .nd file is read; a missing one is computed as MXNet does (equal to
    MXNet's to the last bit here) and saved in MXNet's format, atomically."""
    mine = tmp_path / "mean.nd"
    it = make_iter("mean_img", mean_img=str(mine))
    want = mx.nd.load(str(DATA / "mean.nd"))
    got = mx.nd.load(str(mine))
    assert list(got) == ["mean_img"] and got["mean_img"].shape == (3, 32, 32)
    np.testing.assert_array_equal(got["mean_img"].asnumpy(), want["mean_img"].asnumpy())
    assert [p.name for p in tmp_path.iterdir()] == ["mean.nd"]  # no temporary file left
    assert mine.read_bytes() == (DATA / "mean.nd").read_bytes()
    it.close()
    made = tmp_path / "made.npy"  # a missing .npy is written as one
    make_iter("mean_img", mean_img=str(made)).close()
    np.testing.assert_array_equal(np.load(made), want["mean_img"].asnumpy())
    npy = tmp_path / "mean.npy"
    np.save(npy, want["mean_img"].asnumpy())
    a = make_iter("mean_img", mean_img=str(npy)).next().data[0].asnumpy()
    b = make_iter("mean_img").next().data[0].asnumpy()
    np.testing.assert_array_equal(a, b)
    with pytest.raises(RecordIOError, match="shape"):
        make_iter("mean_img", mean_img=str(npy), data_shape=(3, 20, 20))


# -- GluonCV's recipe and MXNet's tutorial loops, unchanged but for the import -----------------
def _from_make(first, end, **names):
    """Definitions of make.py (which imports MXNet) from ``first`` up to ``end``, with
    ``names`` as their globals (``mx=recio.mx`` runs them on recio)."""
    source = (DATA / "make.py").read_text()
    namespace = {"np": np, "os": os, "math": math, **names}
    code = source[source.index(first):source.index(end)]
    exec(compile(code, str(DATA / "make.py"), "exec"), namespace)  # make.py's own code
    return namespace


#: GluonCV's get_data_rec, verbatim in make.py (which ran it on MXNet), and its arguments
_GLUONCV = _from_make("def get_data_rec", "def run_gluoncv")
get_data_rec, gluoncv_args = _GLUONCV["get_data_rec"], _GLUONCV["gluoncv_args"]


def test_gluoncv_get_data_rec_runs_unchanged_and_equals_mxnet():
    """train_imagenet.py's loop resets each iterator before every epoch, the first time right
    after making it: MXNet's producer has then made the whole (short) epoch, so the next one
    carries on after its padded batch, which recio reproduces."""
    train_data, val_data = get_data_rec(*gluoncv_args(str(DATA)), mx)
    for name, it in (("train", train_data), ("val", val_data)):
        want = META["gluoncv"][name]
        assert describe(it.provide_data) == want["provide_data"]
        assert describe(it.provide_label) == want["provide_label"]
        for epoch, batches in enumerate(want["epochs"]):
            it.reset()
            got = list(it)
            assert len(got) == len(batches), f"{name} epoch {epoch}"
            assert [b.pad for b in got] == true_pads([b["pad"] for b in batches])
            for b, (mine, theirs) in enumerate(zip(got, batches)):
                data = mine.data[0].asnumpy()
                assert list(data.shape) == theirs["shape"] and data.dtype.name == theirs["dtype"]
                labels = mine.label[0].asnumpy()
                if name == "val":  # deterministic: the same pixels and labels
                    assert labels.tolist() == theirs["labels"]
                    assert hashlib.sha256(data.tobytes()).hexdigest() == theirs["sha"]
                    if epoch == 0:
                        np.testing.assert_allclose(data, EXPECTED[f"gluoncv|val|{b}"], atol=1e-4)
                else:  # shuffled and augmented: which records, not their order or pixels
                    assert sorted(labels.tolist()) != [] and np.isfinite(data).all()
            if name == "train":
                real = [v for b, bt in zip(got, batches)
                        for v in b.label[0].asnumpy()[:len(b.index) - b.pad].tolist()]
                pads = true_pads([bt["pad"] for bt in batches])
                theirs = [v for bt, pad in zip(batches, pads) for v in bt["labels"][:5 - pad]]
                assert len(real) == len(theirs) and len(set(real)) == len(real)


def test_tutorial_loop_with_asnumpy():
    """The loop of MXNet's tutorials and the issue: batch.data[0].asnumpy()."""
    it = mx.io.ImageRecordIter(path_imgrec=str(DATA / "train.rec"), data_shape=(3, 32, 32),
                               batch_size=4)
    seen = []
    for batch in it:
        x = batch.data[0].asnumpy()      # MXNet: batch.data is [NDArray (4,3,32,32)]
        y = batch.label[0].asnumpy()     #        batch.label is [NDArray (4,)]
        assert x.shape == (4, 3, 32, 32) and x.dtype == np.float32 and y.shape == (4,)
        assert type(x) is np.ndarray and x.base is None  # a copy, as MXNet's asnumpy
        seen.extend(y.tolist())
    assert seen == [float(i) for i in range(N)]
    it.reset()
    batch = it.next()  # MXNet's spelling
    assert batch.data[0].shape == (4, 3, 32, 32) and batch.pad == 0
    assert it.iter_next() and it.getdata().shape == (4, 3, 32, 32)
    assert it.getlabel().asnumpy().tolist() == [4.0, 5.0, 6.0, 7.0]
    assert it.getpad() == 0 and it.getindex().tolist() == [4, 5, 6, 7]
    assert it.iter_next() and not it.iter_next()


class DataIterLoader():
    """MXNet's datasets tutorial (docs/.../gluon/data/datasets.md), verbatim: a DataIter in a
    Gluon-style loop."""
    def __init__(self, data_iter):
        self.data_iter = data_iter

    def __iter__(self):
        self.data_iter.reset()
        return self

    def __next__(self):
        batch = self.data_iter.__next__()
        assert len(batch.data) == len(batch.label) == 1
        data = batch.data[0]
        label = batch.label[0]
        return data, label

    def next(self):
        return self.__next__() # for Python 2


def test_gluon_tutorial_data_iter_loader():
    it = mx.io.ImageRecordIter(path_imgrec=str(DATA / "train.rec"),
                               path_imgidx=str(DATA / "train.idx"), data_shape=(3, 32, 32),
                               batch_size=6)
    for X_batch, y_batch in DataIterLoader(it):
        assert X_batch.shape == (6, 3, 32, 32)
        assert y_batch.shape == (6,)


# -- parameters ---------------------------------------------------------------------------------
def test_every_documented_parameter_is_accepted_with_its_default():
    """Passing every parameter of MXNet 1.9.1's ImageRecordIter at its default value (as MXNet
    documents it) changes nothing."""
    defaults = {name: p.default for name, p in PARAMETERS.items()
                if name not in ("path_imgrec", "data_shape", "batch_size")}
    plain = make_iter("default")
    full = make_iter("default", **defaults)
    assert describe(full.provide_data) == describe(plain.provide_data)
    for a, b in zip(plain, full):
        np.testing.assert_array_equal(a.data[0].asnumpy(), b.data[0].asnumpy())
        assert a.pad == b.pad


def test_parameter_names_match_mxnets_documentation():
    """The documented list (make.py could not record it: the names are in MXNet's docstring),
    checked by name here: nothing missing, nothing invented."""
    documented = set("""path_imglist path_imgrec path_imgidx aug_seq label_width data_shape
        preprocess_threads verbose num_parts part_index device_id shuffle_chunk_size
        shuffle_chunk_seed seed_aug shuffle seed batch_size round_batch prefetch_buffer ctx
        dtype resize rand_crop random_resized_crop max_rotate_angle max_aspect_ratio
        min_aspect_ratio max_shear_ratio max_crop_size min_crop_size max_random_scale
        min_random_scale max_random_area min_random_area max_img_size min_img_size brightness
        contrast saturation pca_noise random_h random_s random_l rotate fill_value inter_method
        pad mirror rand_mirror mean_img mean_r mean_g mean_b mean_a std_r std_g std_b std_a
        scale max_random_contrast max_random_illumination""".split())
    extra = {"data_name", "label_name", "rotate_list"}  # MXDataIter's, the augmenter's
    own = {"on_undecodable"}  # recio's: MXNet has no choice there
    assert set(PARAMETERS) == documented | extra | own
    page = (pathlib.Path(__file__).parents[2] / "docs" / "training" / "mxnet.md").read_text(
        encoding="utf-8")
    table = {name for line in page.splitlines() if line.startswith("| `")
             for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert documented | extra | own <= table, sorted((documented | extra | own) - table)


@pytest.mark.parametrize("kwargs, message", [
    (dict(facebook_aug=True), r"unknown parameter facebook_aug; MXNet 1\.9\.1's "
                              r"ImageRecordIter takes: aug_seq, batch_size"),
    (dict(dtype="float16"), r"dtype='float16' is not made by MXNet's ImageRecordIter either"),
    (dict(aug_seq="det_aug_default"), r"only MXNet's 'aug_default'"),
    (dict(random_resized_crop=True, rand_crop=True), r"conflicts with rand_crop"),
    (dict(inter_method=5), r"inter_method must be one of"),
    (dict(resize=0), r"resize must be -1"),
    (dict(data_shape=(2, 8, 8)), r"1, 3 or 4 channels"),
    (dict(data_shape=(1, 8, 8), brightness=0.2), r"brightness work on colour images"),
    (dict(rotate=10, inter_method=0), r"inter_method=0 \(nearest\) cannot be used"),
    (dict(shuffle="maybe"), r"shuffle must be a boolean"),
    (dict(batch_size=2.5), r"batch_size must be an integer"),
    (dict(std_g=0), r"must not be 0"),
])
def test_bad_parameters_are_refused_in_one_line(kwargs, message):
    args = dict(path_imgrec=str(DATA / "train.rec"), data_shape=(3, 8, 8), batch_size=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message) as info:
        mx.io.ImageRecordIter(**args)
    assert "\n" not in str(info.value)


def test_required_and_positional_arguments():
    with pytest.raises(ValueError, match="needs path_imgrec"):
        mx.io.ImageRecordIter(data_shape=(3, 8, 8), batch_size=2)
    with pytest.raises(ValueError, match="needs data_shape"):
        mx.io.ImageRecordIter(path_imgrec=str(DATA / "train.rec"), batch_size=2)
    with pytest.raises(ValueError, match="keyword arguments only"):
        mx.io.ImageRecordIter(str(DATA / "train.rec"), (3, 8, 8), 2)
    with pytest.raises(FileNotFoundError):
        mx.io.ImageRecordIter(path_imgrec=str(DATA / "missing.rec"), data_shape=(3, 8, 8),
                              batch_size=2)


def test_values_as_mxnet_accepts_them():
    """MXNet passes every value as a string to C++: strings work too."""
    it = mx.io.ImageRecordIter(path_imgrec=str(DATA / "train.rec"), data_shape="(3, 16, 20)",
                               batch_size="4", shuffle="0", rand_mirror="False",
                               min_aspect_ratio="None", label_width="1")
    assert it.provide_data[0].shape == (4, 3, 16, 20)


def test_label_width_must_match_the_records_as_mxnet_requires():
    with pytest.raises(RecordIOError, match=r"has 1 label but label_width=2.*path_imglist"):
        make_iter("default", label_width=2)
    with pytest.raises(RecordIOError, match=r"has 2 labels but label_width=1"):
        make_iter("label_width2", label_width=1)


def test_imglist_missing_id_is_an_error(tmp_path):
    lst = tmp_path / "short.lst"
    lst.write_text("0\t1.0\ta.jpg\n1\t2.0\tb.jpg\n")
    with pytest.raises(RecordIOError, match="image id 2 is not in path_imglist"):
        list(make_iter("default", path_imglist=str(lst), batch_size=4))


def test_empty_rec_is_refused(tmp_path):
    rec, idx = tmp_path / "empty.rec", tmp_path / "empty.idx"
    with recio.IndexedRecordWriter(str(rec), str(idx)):
        pass
    with pytest.raises(RecordIOError, match="no image records"):
        mx.io.ImageRecordIter(path_imgrec=str(rec), path_imgidx=str(idx), data_shape=(3, 8, 8),
                              batch_size=2)


def test_undecodable_images_are_skipped_counted_and_reported(tmp_path):
    rec, idx = tmp_path / "bad.rec", tmp_path / "bad.idx"
    good = (DATA / "train.rec").read_bytes()  # reuse MXNet's records
    reader = mx.recordio.MXIndexedRecordIO(str(DATA / "train.idx"), str(DATA / "train.rec"), "r")
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for key in range(6):
            payload = reader.read_idx(key)
            if key == 2:
                payload = recio.pack(recio.IRHeader(0, 2.0, 2, 0), b"not an image")
            w.write(key, payload)
    assert good
    with pytest.warns(SkippedRecordWarning, match=r"bad\.rec: byte \d+: key 2: its 12 bytes "
                                                  r"are not an image .*; skipped$"):
        it = mx.io.ImageRecordIter(path_imgrec=str(rec), path_imgidx=str(idx),
                                   data_shape=(3, 16, 16), batch_size=5)
        labels = [v for b in it for v in b.label[0].asnumpy()[:5 - b.pad].tolist()]
    assert labels == [0.0, 1.0, 3.0, 4.0, 5.0] and it.num_skipped == 1


# -- epochs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("indexed", [True, False])
def test_reset_mid_epoch_carries_on_only_when_mxnet_would(indexed):
    """MXNet's producer works up to 16 batches ahead: reset() right after the iterator is made
    carries on after the padded batch when that is within 16 batches (make.py's gluoncv run
    shows MXNet doing it), and starts afresh when it is further."""
    near = make_iter("default", **({} if indexed else {"path_imgidx": None}))
    near.reset()  # 3 batches: the padded one is within reach
    assert near.next().label[0].asnumpy().tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    kwargs = dict(path_imgrec=str(DATA / "stats_grid60.rec"), data_shape=(3, 8, 8),
                  batch_size=3, dtype="uint8")  # 100 records: 34 batches, 2 filler
    if indexed:
        kwargs["path_imgidx"] = str(DATA / "stats_grid60.idx")
    far = mx.io.ImageRecordIter(**kwargs)
    far.reset()  # 33 batches to go: MXNet's producer is not there yet
    assert far.next().label[0].asnumpy().tolist() == [0.0, 1.0, 2.0]
    for _ in range(20):
        far.next()
    far.reset()  # 12 batches to go: MXNet's has made them; 2 records were borrowed
    assert far.next().label[0].asnumpy().tolist() == [2.0, 3.0, 4.0]
    exact = make_iter("batch4")
    exact.reset()  # 12 records in batches of 4: no padded batch, the next epoch starts afresh
    assert exact.next().label[0].asnumpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_fixed_seed_reproduces_random_epochs():
    kwargs = dict(shuffle=True, random_resized_crop=True, min_random_area=0.3,
                  max_aspect_ratio=4 / 3, min_aspect_ratio=3 / 4, rand_mirror=True,
                  brightness=0.3, contrast=0.3, saturation=0.3, pca_noise=0.1, seed=11,
                  preprocess_threads=3)
    a, b = make_iter("default", **kwargs), make_iter("default", **kwargs)
    epochs_a, epochs_b = [], []
    for _ in range(2):
        epochs_a.append([x.data[0].asnumpy() for x in a])
        epochs_b.append([x.data[0].asnumpy() for x in b])
        a.reset()
        b.reset()
    for ea, eb in zip(epochs_a, epochs_b):
        for x, y in zip(ea, eb):
            np.testing.assert_array_equal(x, y)
    assert not np.array_equal(epochs_a[0][0], epochs_a[1][0])
    other = make_iter("default", **dict(kwargs, seed=12))
    assert not np.array_equal(other.next().data[0].asnumpy(), epochs_a[0][0])


def test_seed_aug_gives_every_slot_its_own_fixed_draws():
    """MXNet's seed_aug reseeds each image's generator from its position in the batch."""
    it = mx.io.ImageRecordIter(path_imgrec=str(DATA / "stats_grey100.rec"),
                               data_shape=(3, 16, 16), batch_size=4, brightness=0.5,
                               dtype="uint8", seed_aug=3)
    first, second = [b.data[0].asnumpy()[:, 0, 0, 0] for b in (it.next(), it.next())]
    assert np.array_equal(first, second) and len(set(first.tolist())) > 1


# -- statistics of the random augmentations -----------------------------------------------------
def ks_statistic(a, b):
    """The two-sample Kolmogorov-Smirnov statistic."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, side="right") / len(a)
    cdf_b = np.searchsorted(b, grid, side="right") / len(b)
    return np.abs(cdf_a - cdf_b).max()


def ks_critical(n, m, alpha=0.001):
    return math.sqrt(-0.5 * math.log(alpha / 2)) * math.sqrt((n + m) / (n * m))


#: make.py's STATS (configurations) and reduce_sample (what a sample says about its draws)
STATS = _from_make("STATS = {", "STAT_EPOCHS")["STATS"]
reduce_sample = _from_make("def reduce_sample", "def iterator")["reduce_sample"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATS))
def test_random_augmentations_have_mxnets_distributions(name):
    """1000 samples of each random augmentation against MXNet's 1000: every statistic passes a
    two-sample Kolmogorov-Smirnov test at 0.1% and has the same mean within 4 standard errors.
    (recio's generator is seeded, so the test gives the same verdict every run.)"""
    image, kwargs = STATS[name]
    it = mx.io.ImageRecordIter(path_imgrec=str(DATA / f"stats_{image}.rec"),
                               path_imgidx=str(DATA / f"stats_{image}.idx"),
                               data_shape=(3, 32, 32), batch_size=50, seed=5, **kwargs)
    ours = []
    for _ in range(10):
        for batch in it:
            ours.extend(reduce_sample(name, s) for s in batch.data[0].asnumpy())
        it.reset()
    ours = np.array(ours)
    theirs = EXPECTED["stats|" + name]
    assert ours.shape == theirs.shape
    for k in range(theirs.shape[1]):
        a, b = ours[:, k], theirs[:, k]
        if a.std() == 0 and b.std() == 0:
            assert a[0] == b[0]
            continue
        d = ks_statistic(a, b)
        assert d < ks_critical(len(a), len(b)), f"statistic {k}: KS {d:.3f}"
        se = math.sqrt(a.var() / len(a) + b.var() / len(b))
        assert abs(a.mean() - b.mean()) < 4 * se + 1e-9, f"statistic {k}"


def test_random_resized_crop_box_follows_mxnets_rule():
    """Area fraction and aspect of the boxes drawn directly (no image): uniform as MXNet draws
    them, sides swapped half the time."""
    from recio.image.batches.mxnet_augment import random_resized_crop_box
    rng = np.random.default_rng(0)
    boxes = [random_resized_crop_box(300, 300, (0.08, 1.0), (3 / 4, 4 / 3), rng)
             for _ in range(4000)]
    boxes = np.array([b for b in boxes if b is not None], float)
    assert len(boxes) > 3900
    x, y, w, h = boxes.T
    assert (x >= 0).all() and (x + w <= 300).all() and (y >= 0).all() and (y + h <= 300).all()
    area = w * h / 90000
    assert 0.07 < area.min() and area.max() <= 1.0
    aspect = w / h  # on a square image the swap makes landscape and portrait equally likely
    assert (aspect > 1).mean() == pytest.approx((aspect < 1).mean(), abs=0.05)
    assert aspect.min() >= 3 / 4 - 0.02 and aspect.max() <= 4 / 3 + 0.02
    # boxes of up to 30% always fit (rejected large ones are drawn again), so there the area
    # is uniform
    counts, _ = np.histogram(area, bins=4, range=(0.09, 0.29))
    assert counts.min() > 0.8 * counts.mean() and counts.max() < 1.2 * counts.mean()


def test_augment_params_know_their_parameters():
    assert AugmentParams.names()[0] == "data_shape"
    p = AugmentParams((3, 8, 8))
    assert not p.random and not p.affine and p.aspect_range == (1.0, 1.0)
    assert AugmentParams((3, 8, 8), max_aspect_ratio=0.25).aspect_range == (0.75, 1.25)
    assert AugmentParams((3, 8, 8), rotate=5).affine
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        AugmentParams((3, 8, 8), random_resized_crop=True, min_random_area=0.1)


@pytest.mark.parametrize("level", [0, 3])
def test_image_classification_example_arguments(level):
    """MXNet's example/image-classification passes every augmentation argument, at its command
    line defaults (level 0) or at its strongest augmentation level (3): accepted, and at level 0
    the batches are those of a plain iterator."""
    aug = dict(rand_crop=0, max_random_scale=1, pad=0, fill_value=127, random_resized_crop=0,
               min_random_scale=1, max_aspect_ratio=0, min_aspect_ratio=None,
               max_random_area=1, min_random_area=1, min_crop_size=-1, max_crop_size=-1,
               brightness=0, contrast=0, saturation=0, pca_noise=0, random_h=0, random_s=0,
               random_l=0, max_rotate_angle=0, max_shear_ratio=0, rand_mirror=0)
    if level == 3:
        aug.update(rand_crop=1, rand_mirror=1, random_h=36, random_s=50, random_l=50,
                   max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                   max_random_scale=1, min_random_scale=0.533)
    it = mx.io.ImageRecordIter(
        path_imgrec=str(DATA / "train.rec"), path_imgidx=str(DATA / "train.idx"),
        label_width=1, data_name="data", label_name="softmax_label", data_shape=(3, 28, 28),
        batch_size=4, preprocess_threads=2, shuffle=level > 0, num_parts=1, part_index=0,
        mean_r=123.68, mean_g=116.779, mean_b=103.939, std_r=58.393, std_g=57.12,
        std_b=57.375, **aug)
    it.batch_size = 4  # the examples set it, as a plain attribute
    batches = list(it)
    assert len(batches) == 3 and all(b.data[0].shape == (4, 3, 28, 28) for b in batches)
    if level == 0:
        plain = mx.io.ImageRecordIter(
            path_imgrec=str(DATA / "train.rec"), path_imgidx=str(DATA / "train.idx"),
            data_shape=(3, 28, 28), batch_size=4, mean_r=123.68, mean_g=116.779,
            mean_b=103.939, std_r=58.393, std_g=57.12, std_b=57.375)
        for a, b in zip(batches, plain):
            np.testing.assert_array_equal(a.data[0].asnumpy(), b.data[0].asnumpy())
