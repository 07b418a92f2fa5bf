"""ImageBatchIter: exactly-once epochs, pad, parts, reproducibility, augmentation, errors."""
import gc
import io
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import recio
from recio.errors import ClosedError, ImageError, RecordIOError, SkippedRecordWarning
from recio.image.batches.augmenter import Augmenter
from recio.image.batches.iterators import ImageBatchIter

N = 24
H, W = 12, 16


def _image(i, h=H, w=W):
    """A PNG-exact image whose pixels encode its number and position."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 13 + i) % 256, (y * 17 + 3 * i) % 256, (x * y + 7 * i) % 256],
                    axis=-1).astype(np.uint8)


def _write(rec, idx, n=N, bad=(), start=0):
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for i in range(start, start + n):
            header = recio.IRHeader(0, float(i), i, 0)
            if i in bad:
                w.write(i, recio.pack(header, b"not an image at all"))
            else:
                w.write(i, recio.pack_img(header, _image(i), img_fmt=".png"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("imageiter")
    _write(d / "data.rec", d / "data.idx")
    return d / "data.rec", d / "data.idx"


def _iter(dataset, indexed=True, **kw):
    rec, idx = dataset
    kw.setdefault("data_shape", (3, 8, 8))
    kw.setdefault("batch_size", 5)
    return ImageBatchIter(path_imgrec=rec, path_imgidx=idx if indexed else None, **kw)


def _epoch(it):
    """(ids of real samples, list of pads, list of batches) for one epoch."""
    batches = list(it)
    ids = []
    for b in batches:
        real = len(b.index) - b.pad
        ids.extend(int(v) for v in b.index[:real])
    return ids, [b.pad for b in batches], batches


@pytest.mark.parametrize("indexed", [True, False])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("batch_size,round_batch", [(6, True), (5, True), (5, False), (30, True),
                                                    (30, False)])
def test_every_record_once_per_epoch(dataset, indexed, shuffle, threads, batch_size, round_batch):
    with _iter(dataset, indexed, shuffle=shuffle, preprocess_threads=threads,
               batch_size=batch_size, round_batch=round_batch, shuffle_buffer=7) as it:
        for _ in range(2):
            ids, pads, batches = _epoch(it)
            assert sorted(ids) == list(range(N))
            expected_pad = -N % batch_size
            assert pads == [0] * (len(pads) - 1) + [expected_pad]
            assert all(b.data.shape == (batch_size, 3, 8, 8) for b in batches)
            assert all(b.label.shape == (batch_size, 1) for b in batches)
            for b in batches:  # the label is the record's number, as written
                np.testing.assert_array_equal(b.label[:, 0], b.index.astype(np.float32))
            last = batches[-1]
            if expected_pad and round_batch:  # filler = the epoch's first records, in order
                filler = [int(v) for v in last.index[batch_size - expected_pad:]]
                assert filler == (ids * 2)[:expected_pad]
            elif expected_pad:
                assert not last.data[batch_size - expected_pad:].any()
            if not shuffle:
                assert ids == list(range(N))
            it.reset()


@pytest.mark.parametrize("indexed", [True, False])
@pytest.mark.parametrize("num_parts", [1, 2, 3, 5])
def test_parts_partition_the_file(dataset, indexed, num_parts):
    seen = []
    for k in range(num_parts):
        with _iter(dataset, indexed, num_parts=num_parts, part_index=k, batch_size=4,
                   shuffle=True, round_batch=False) as it:
            ids, _, _ = _epoch(it)
            assert len(set(ids)) == len(ids)
            seen.extend(ids)
    assert sorted(seen) == list(range(N))


def test_same_seed_same_batches_and_epochs_differ(dataset):
    kw = dict(shuffle=True, rand_crop=True, rand_mirror=True, batch_size=6, seed=7)
    with _iter(dataset, **kw) as a, _iter(dataset, **kw) as b:
        first_a = [x.data.copy() for x in a]
        first_b = [x.data.copy() for x in b]
        assert all(np.array_equal(p, q) for p, q in zip(first_a, first_b))
        a.reset()
        ids_a2, _, batches_a2 = _epoch(a)
        b.reset()
        ids_b2, _, _ = _epoch(b)
        assert ids_a2 == ids_b2
    with _iter(dataset, **kw) as c:
        ids_c1, _, _ = _epoch(c)
    assert ids_c1 != ids_a2  # epoch 0 and epoch 1 are in different orders
    with _iter(dataset, **dict(kw, seed=8)) as d:
        ids_d1, _, _ = _epoch(d)
    assert ids_d1 != ids_c1


def test_streamed_shuffle_is_reproducible_and_changes_per_epoch(dataset):
    kw = dict(shuffle=True, shuffle_buffer=5, batch_size=6, seed=3)
    with _iter(dataset, False, **kw) as a, _iter(dataset, False, **kw) as b:
        e0 = _epoch(a)[0]
        assert e0 == _epoch(b)[0]
        a.reset()
        e1 = _epoch(a)[0]
    assert sorted(e0) == sorted(e1) == list(range(N)) and e0 != e1


def test_normalisation_matches_numpy(dataset):
    mean, std, scale = (10.0, 20.0, 30.0), (2.0, 4.0, 5.0), 0.5
    with _iter(dataset, batch_size=N, data_shape=(3, 8, 10), mean_r=mean[0], mean_g=mean[1],
               mean_b=mean[2], std_r=std[0], std_g=std[1], std_b=std[2], scale=scale) as it:
        batch = next(it)
    assert batch.data.dtype == np.float32
    for row, i in zip(batch.data, batch.index):
        crop = _image(int(i))[2:10, 3:13].astype(np.float32)  # centred 8x10 crop of 12x16
        want = ((crop - np.float32(mean)) / np.float32(std) * scale).transpose(2, 0, 1)
        np.testing.assert_allclose(row, want, rtol=1e-6, atol=1e-5)


def test_uint8_nhwc_fast_path_is_the_raw_crop(dataset):
    with _iter(dataset, batch_size=N, dtype="uint8", layout="NHWC") as it:
        assert it.provide_data == [("data", (N, 8, 8, 3))]
        batch = next(it)
    assert batch.data.dtype == np.uint8 and batch.data.shape == (N, 8, 8, 3)
    for row, i in zip(batch.data, batch.index):
        np.testing.assert_array_equal(row, _image(int(i))[2:10, 4:12])


def test_mean_img(dataset, tmp_path):
    mean_img = np.arange(3 * 8 * 8, dtype=np.float32).reshape(3, 8, 8)
    np.save(tmp_path / "mean.npy", mean_img)
    with _iter(dataset, batch_size=N, mean_img=str(tmp_path / "mean.npy")) as it:
        batch = next(it)
    i = int(batch.index[0])
    want = _image(i)[2:10, 4:12].astype(np.float32).transpose(2, 0, 1) - mean_img
    np.testing.assert_allclose(batch.data[0], want)
    with pytest.raises(ValueError, match="shape"):
        _iter(dataset, mean_img=np.zeros((3, 4, 4)))


def test_random_crop_and_mirror_are_windows_of_the_image(dataset):
    with _iter(dataset, batch_size=N, dtype="uint8", layout="NHWC", rand_crop=True,
               rand_mirror=True, seed=1) as it:
        batch = next(it)
    positions, mirrored = set(), 0
    for row, i in zip(batch.data, batch.index):
        img = _image(int(i))
        hits = [(y, x, m) for y in range(H - 8 + 1) for x in range(W - 8 + 1) for m in (0, 1)
                if np.array_equal(row, img[y:y + 8, x:x + 8][:, ::-1] if m
                                  else img[y:y + 8, x:x + 8])]
        assert hits, "output is not a crop of the image"
        positions.add(hits[0][:2])
        mirrored += hits[0][2]
    assert len(positions) > 3 and 0 < mirrored < N


def test_resize_and_small_images_are_scaled(tmp_path):
    rec, idx = tmp_path / "big.rec", tmp_path / "big.idx"
    rng = np.random.default_rng(0)
    sizes = [(200, 300), (300, 200), (40, 50), (5, 7)]
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for i, (h, w_) in enumerate(sizes):
            img = rng.integers(0, 256, (h, w_, 3), dtype=np.uint8)
            w.write(i, recio.pack_img(recio.IRHeader(0, i, i, 0), img, quality=90))
    aug = Augmenter((3, 24, 24), resize=32)
    for i, (h, w_) in enumerate(sizes):
        _, payload = recio.unpack(recio.IndexedRecordReader(str(rec), str(idx))[i])
        arr = aug.decode(payload)
        assert min(arr.shape[:2]) == 32 and arr.shape[2] == 3
        assert max(arr.shape[:2]) == max(h, w_) * 32 // min(h, w_)
        assert (arr.shape[0] > arr.shape[1]) == (h > w_)
    with ImageBatchIter(rec, (3, 24, 24), 4, path_imgidx=idx, resize=32) as it:
        batch = next(it)
        assert batch.data.shape == (4, 3, 24, 24) and batch.pad == 0
    with ImageBatchIter(rec, (3, 24, 24), 4, path_imgidx=idx) as it:  # no resize: 5x7 scaled up
        assert next(it).pad == 0


def test_grey_data_shape_gives_opencvs_greyscale(dataset):
    """A 1-channel data_shape decodes as MXNet's (OpenCV's IMREAD_GRAYSCALE): for a PNG that is
    libpng's RGB-to-grey, 0.299/0.587/0.114 in 15-bit fixed point, truncated (not Pillow's
    convert("L"), which differs by 1 on about half of these pixels)."""
    with _iter(dataset, batch_size=N, data_shape=(1, 8, 8)) as it:
        batch = next(it)
    i = int(batch.index[0])
    rgb = _image(i).astype(np.int64)
    grey = (rgb[..., 0] * 9797 + rgb[..., 1] * 19234 + rgb[..., 2] * 3737) >> 15
    np.testing.assert_array_equal(batch.data[0, 0], grey[2:10, 4:12].astype(np.float32))
    pillow = np.asarray(Image.fromarray(_image(i)).convert("L"))[2:10, 4:12]
    assert (pillow != batch.data[0, 0]).any()


def test_label_width(tmp_path):
    rec, idx = tmp_path / "v.rec", tmp_path / "v.idx"
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for i in range(6):
            labels = np.array([i, 10 * i, 100 * i], np.float32)
            w.write(i, recio.pack_img(recio.IRHeader(3, labels, i, 0), _image(i), img_fmt=".png"))
    with ImageBatchIter(rec, (3, 8, 8), 6, path_imgidx=idx, label_width=2) as it:
        batch = next(it)
    assert batch.label.shape == (6, 2)
    np.testing.assert_array_equal(batch.label[:, 1], batch.label[:, 0] * 10)
    with pytest.warns(SkippedRecordWarning, match="label_width=4"):
        with ImageBatchIter(rec, (3, 8, 8), 6, path_imgidx=idx, label_width=4) as it:
            assert list(it) == []
            assert it.num_skipped == 6


@pytest.mark.parametrize("indexed", [True, False])
def test_undecodable_records_are_skipped_counted_and_named(tmp_path, indexed):
    rec, idx = tmp_path / "bad.rec", tmp_path / "bad.idx"
    bad = {3, 10, 11}
    _write(rec, idx, n=20, bad=bad)
    with pytest.warns(SkippedRecordWarning) as caught:
        with ImageBatchIter(rec, (3, 8, 8), 4, path_imgidx=idx if indexed else None,
                             preprocess_threads=2) as it:
            ids, pads, _ = _epoch(it)
            assert it.num_skipped == 3
    assert sorted(ids) == sorted(set(range(20)) - bad)
    assert pads[-1] == -17 % 4
    messages = " ".join(str(w.message) for w in caught)
    names = ["key 3", "key 10", "key 11"] if indexed else ["record #3", "record #10"]
    assert all(name in messages for name in names)
    assert "bad.rec" in messages


def test_corrupt_file_raises_in_consumer(tmp_path):
    rec, idx = tmp_path / "c.rec", tmp_path / "c.idx"
    _write(rec, idx, n=10)
    data = bytearray(rec.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = b"\xff" * 64  # smash a record in the middle
    rec.write_bytes(bytes(data[:len(data) - 100]))
    with pytest.raises(RecordIOError) as info:
        with ImageBatchIter(rec, (3, 8, 8), 2) as it:
            list(it)
    assert "c.rec" in str(info.value)


def _our_threads():
    return [t for t in threading.enumerate() if t.is_alive()
            and t.name.startswith(("recio-ImageBatchIter", "recio-decode"))]


@pytest.mark.slow
def test_no_threads_left_after_close_or_early_stop(dataset):
    it = _iter(dataset, preprocess_threads=3, prefetch_buffer=2)
    next(it)
    it.close()
    it.close()
    assert _our_threads() == []
    with pytest.raises(ClosedError, match="I/O on a closed ImageBatchIter"):
        next(it)

    def stop_early():
        it = _iter(dataset, preprocess_threads=2, prefetch_buffer=1)
        for _ in it:
            break

    stop_early()
    gc.collect()
    for t in [t for t in threading.enumerate() if t.name.startswith("recio-")]:
        t.join(5)
    assert _our_threads() == []


def test_reset_mid_epoch_starts_a_new_full_epoch(dataset):
    with _iter(dataset, shuffle=True) as it:
        next(it)
        it.reset()
        ids, _, _ = _epoch(it)
        assert sorted(ids) == list(range(N))
        assert it.epoch == 1


def test_multi_file_stream(tmp_path):
    _write(tmp_path / "a.rec", tmp_path / "a.idx", n=7)
    _write(tmp_path / "b.rec", tmp_path / "b.idx", n=9, start=7)
    with ImageBatchIter([tmp_path / "a.rec", tmp_path / "b.rec"], (3, 8, 8), 4,
                         round_batch=False) as it:
        ids, pads, _ = _epoch(it)
    assert ids == list(range(16)) and pads[-1] == 0


def test_bad_parameters(dataset):
    for kw, msg in [(dict(data_shape=(2, 8, 8)), "data_shape"), (dict(batch_size=0), "batch_size"),
                    (dict(part_index=2, num_parts=2), "part_index"), (dict(dtype="int8"), "dtype"),
                    (dict(layout="CHWN"), "layout"), (dict(std_g=0), "std"),
                    (dict(dtype="uint8", mean_r=1.0), "uint8"),
                    (dict(mean_img="mean.nd"), ".npy")]:
        with pytest.raises(ValueError, match=msg):
            _iter(dataset, **kw)


def test_augmenter_raises_image_error_for_undecodable_bytes():
    aug = Augmenter((3, 4, 4))
    with pytest.raises(ImageError, match="its 11 bytes are not an image OpenCV can decode"):
        aug(b"\x89PNG broken", np.empty((3, 4, 4), np.float32), (0.5, 0.5, 1.0))
    buf = io.BytesIO()
    Image.fromarray(_image(0)).save(buf, "PNG")
    out = np.empty((3, 4, 4), np.float32)
    aug(buf.getvalue(), out, (0.5, 0.5, 1.0))
    np.testing.assert_array_equal(out, _image(0)[4:8, 6:10].transpose(2, 0, 1))


def test_batches_still_held_are_never_recycled(dataset):
    with _iter(dataset, batch_size=2, prefetch_buffer=2, shuffle=True) as it:
        kept, copies, views, view_copies = [], [], [], []
        reused = 0
        for n, b in enumerate(it):
            if n < 1:
                kept.append(b)
                copies.append(b.data.copy())
            elif n < 2:
                views.append(b.data[1])  # only a view of the batch array survives
                view_copies.append(views[-1].copy())
            else:
                reused += any(b.data is x for x in it._engine.buffers)
        assert all(np.array_equal(b.data, c) for b, c in zip(kept, copies))
        assert all(np.array_equal(v, c) for v, c in zip(views, view_copies))
        assert reused > 0  # batches dropped by the consumer do get reused
        assert len(it._engine.buffers) <= it.prefetch_buffer + 3


def test_no_hang_at_exit_with_an_unclosed_iterator(dataset):
    import subprocess
    import sys
    rec, idx = dataset
    code = ("import recio\n"
            f"it = recio.ImageBatchIter({str(rec)!r}, (3, 8, 8), 2, path_imgidx={str(idx)!r},"
            " prefetch_buffer=1)\n"
            "print(next(it).pad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_mirrored_and_normalised_in_both_layouts(dataset, layout):
    mean, std = np.float32([5, 6, 7]), np.float32([2, 3, 4])
    with _iter(dataset, batch_size=N, rand_mirror=True, layout=layout, mean_r=5, mean_g=6,
               mean_b=7, std_r=2, std_g=3, std_b=4, seed=2) as it:
        batch = next(it)
    flipped = 0
    for row, i in zip(batch.data, batch.index):
        crop = _image(int(i))[2:10, 4:12].astype(np.float32)
        options = [(crop - mean) / std, (crop[:, ::-1] - mean) / std]
        if layout == "NCHW":
            options = [o.transpose(2, 0, 1) for o in options]
        match = [np.allclose(row, o, atol=1e-5) for o in options]
        assert any(match)
        flipped += match[1] and not match[0]
    assert 0 < flipped < N


_DATASETS = {}


def _dataset_of(n, tmp_root):
    """A dataset of n records, written once per test session (hypothesis calls this often)."""
    if (tmp_root, n) not in _DATASETS:
        rec, idx = tmp_root / f"n{n}.rec", tmp_root / f"n{n}.idx"
        _write(rec, idx, n=n)
        _DATASETS[tmp_root, n] = (rec, idx)
    return _DATASETS[tmp_root, n]


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("prop")


@settings(deadline=None, max_examples=25)
@given(n=st.integers(0, 20), batch_size=st.integers(1, 9), shuffle=st.booleans(),
       round_batch=st.booleans(), indexed=st.booleans(), num_parts=st.integers(1, 3),
       seed=st.integers(0, 5))
def test_property_parts_and_epochs_cover_every_record_once(tmp_root, n, batch_size, shuffle,
                                                           round_batch, indexed, num_parts, seed):
    rec, idx = _dataset_of(n, tmp_root)
    seen = []
    for k in range(num_parts):
        with ImageBatchIter(rec, (3, 4, 4), batch_size, path_imgidx=idx if indexed else None,
                             shuffle=shuffle, round_batch=round_batch, num_parts=num_parts,
                             part_index=k, seed=seed, preprocess_threads=2, shuffle_buffer=3,
                             prefetch_buffer=1) as it:
            ids, pads, batches = _epoch(it)
            part_size = len(ids)
            assert pads[:-1] == [0] * (len(pads) - 1)
            if batches:
                assert pads[-1] == -part_size % batch_size
            seen.extend(ids)
    assert sorted(seen) == list(range(n))


def test_bad_index_raises_and_leaves_no_threads(tmp_path):
    rec, idx = tmp_path / "x.rec", tmp_path / "x.idx"
    _write(rec, idx, n=3)
    idx.write_text("0\t0\n1\tnot-a-number\n")
    with pytest.raises(recio.errors.IndexFileError, match="line 2"):
        ImageBatchIter(rec, (3, 4, 4), 2, path_imgidx=idx)
    assert _our_threads() == []
