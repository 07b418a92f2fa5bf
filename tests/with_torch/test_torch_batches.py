"""recio.torch's batch path: RecordDataset.__getitems__ with ImageAugment, through DataLoader.

Whole batches decoded into one array and collated without a copy, from shared buffers that a
worker reuses only once the main process let go of them: the same pixels and labels as the
per-sample path, every record once per epoch, and no batch (or view of one) that the training
loop still holds is ever overwritten, whatever it holds and whatever the collate_fn.
"""
import numpy as np
import pytest

import recio
from conftest import start_method_cases
from recio.errors import ImageError

try:
    import torch
except ImportError:  # every test needs it: the marker skips (fails under CI=true) with the reason
    torch = None

pytestmark = pytest.mark.needs("torch")

N = 50
H, W = 20, 24
MEAN, STD = (10.0, 20.0, 30.0), (2.0, 4.0, 5.0)


def _image(i):
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([(x * 7 + i) % 256, (y * 11 + 3 * i) % 256, np.full_like(x, i % 256)],
                    axis=-1).astype(np.uint8)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("batches")
    with recio.IndexedRecordWriter(str(d / "b.rec"), str(d / "b.idx")) as w:
        for i in range(N):
            w.write(i, recio.pack_img(recio.IRHeader(0, float(i), i, 0), _image(i),
                                      img_fmt=".png"))
    return str(d / "b.rec"), str(d / "b.idx")


def _dataset(data, **augment):
    from recio.torch import ImageAugment, RecordDataset

    kw = dict(mean=MEAN, std=STD)
    kw.update(augment)
    return RecordDataset(*data, decode="raw", transform=ImageAugment((3, 16, 16), **kw))


def _want(i, dtype="float32"):
    """The centred 16x16 crop of image i, as ImageAugment makes it."""
    crop = _image(i)[2:18, 4:20].transpose(2, 0, 1)
    if dtype == "uint8":
        return crop
    return (crop.astype(np.float32) - np.float32(MEAN).reshape(3, 1, 1)) * \
        (np.float32(1) / np.float32(STD)).reshape(3, 1, 1)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_batches_have_the_per_sample_pixels_and_labels(data, workers, dtype):
    from torch.utils.data import DataLoader

    ds = _dataset(data) if dtype == "float32" else _dataset(data, mean=None, std=None,
                                                          dtype="uint8")
    loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=workers)
    seen = []
    for images, labels in loader:
        assert isinstance(images, torch.Tensor) and images.dtype == getattr(torch, dtype)
        assert images.shape[1:] == (3, 16, 16) and labels.dtype == torch.float32
        for img, lab in zip(images, labels):
            i = int(lab)
            np.testing.assert_allclose(img.numpy(), _want(i, dtype), rtol=1e-6)
            np.testing.assert_array_equal(img.numpy(), ds[i][0].numpy())  # the per-sample path
            seen.append(i)
    assert sorted(seen) == list(range(N))


def test_the_batch_is_collated_without_a_copy(data):
    from torch.utils.data import default_collate

    ds = _dataset(data)
    samples = ds.__getitems__([3, 1, 4, 1, 5])
    assert [tuple(map(type, s)) for s in samples] == [(torch.Tensor, torch.Tensor)] * 5
    images, labels = default_collate(samples)
    assert images.data_ptr() == samples[0][0].data_ptr()  # the decoded array itself
    assert labels.tolist() == [3, 1, 4, 1, 5]
    # samples of two batches, or out of order: collated as default_collate does, by copying
    mixed = samples[:2] + ds.__getitems__([7])
    images, labels = default_collate(mixed)
    assert labels.tolist() == [3, 1, 7] and images.data_ptr() != samples[0][0].data_ptr()
    np.testing.assert_array_equal(images[2].numpy(), _want(7))
    images, labels = default_collate(samples[::-1])
    assert labels.tolist() == [5, 1, 4, 1, 3]


def test_main_process_buffers_are_reused_only_when_released(data):
    from torch.utils.data import default_collate

    ds = _dataset(data)
    held, _ = default_collate(ds.__getitems__(list(range(8))))
    view = held[2:4]
    del held
    again, _ = default_collate(ds.__getitems__(list(range(8, 16))))
    assert again.data_ptr() != view.data_ptr()  # a view keeps its batch's buffer busy
    np.testing.assert_array_equal(view[0].numpy(), _want(2))
    ptr = again.data_ptr()
    del again
    third, _ = default_collate(ds.__getitems__(list(range(16, 24))))
    assert third.data_ptr() == ptr  # released: reused
    np.testing.assert_array_equal(view[1].numpy(), _want(3))


@pytest.mark.slow
@pytest.mark.parametrize("persistent, start_method",
                         start_method_cases([(True,), (False,)], [(True,)]),
                         indirect=["start_method"])
def test_batches_held_in_the_main_process_are_never_overwritten(data, persistent, start_method):
    """Whole batches, views of them and pinned-style copies kept while the workers go on
    (forked or spawned: the buffers are shared memory either way)."""
    from torch.utils.data import DataLoader

    ds = _dataset(data)
    loader = DataLoader(ds, batch_size=5, shuffle=True, num_workers=2,
                        persistent_workers=persistent, prefetch_factor=2)
    kept, views = [], []
    for epoch in range(3):
        for n, (images, labels) in enumerate(loader):
            if n % 3 == 0:
                kept.append((images, labels))
            elif n % 3 == 1:
                views.append((images[1:3], labels[1:3]))
    assert kept and views
    for images, labels in kept + views:
        for img, lab in zip(images, labels):
            np.testing.assert_allclose(img.numpy(), _want(int(lab)), rtol=1e-6)


def test_worker_buffers_are_reused(data, start_method):
    """A worker reuses its buffers (the labels say how many it had made), whether it was
    forked with the parent's pool of buffers or spawned without one."""
    from torch.utils.data import DataLoader

    from recio.torch import batching

    ds = _dataset(data)
    ds._decoder.target_transform = _buffers_made
    loader = DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=True)
    made = [int(labels.max()) for _ in range(4) for _, labels in loader]
    assert len(made) == 40 and max(made) <= 4, made  # 40 batches from a handful of buffers
    assert batching.POOL_SIZE >= 4


def _buffers_made(label):
    from recio.torch import batching

    return batching.pool().created


@pytest.mark.slow
def test_a_custom_collate_fn_gets_plain_samples_and_they_stay_intact(data):
    """A collate_fn that keeps the samples as they are: their buffers are never reused."""
    from torch.utils.data import DataLoader

    ds = _dataset(data)
    loader = DataLoader(ds, batch_size=5, num_workers=2, collate_fn=list)
    kept = [batch for _ in range(3) for batch in loader]
    for batch in kept:
        assert all(type(s) is tuple for s in batch)
        for img, lab in batch:
            np.testing.assert_allclose(img.numpy(), _want(int(lab)), rtol=1e-6)


def test_workers_and_integer_labels(data, start_method):
    """uint8 batches with integer labels (the target_transform ``int``) from a worker, forked
    or spawned (then the dataset, its ImageAugment and its transforms travel pickled)."""
    from torch.utils.data import DataLoader

    ds = _dataset(data, mean=None, std=None, dtype="uint8")
    ds._decoder.target_transform = int
    loader = DataLoader(ds, batch_size=16, num_workers=1)
    batches = list(loader)
    assert [b[1].dtype for b in batches] == [torch.int64] * 4
    assert sorted(v for _, labels in batches for v in labels.tolist()) == list(range(N))
    for images, labels in batches:
        for img, i in zip(images, labels.tolist()):
            np.testing.assert_array_equal(img.numpy(), _want(i, "uint8"))


def _broken_rec(tmp_path):
    """Six records; key 4's image bytes are not an image."""
    rec, idx = str(tmp_path / "bad.rec"), str(tmp_path / "bad.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(6):
            payload = b"broken" if i == 4 else recio.pack_img(
                recio.IRHeader(0, float(i), i, 0), _image(i), img_fmt=".png")[24:]
            w.write(i, recio.pack(recio.IRHeader(0, float(i), i, 0), payload))
    return rec, idx


def test_undecodable_record_in_a_batch_names_its_key(tmp_path):
    from torch.utils.data import DataLoader

    from recio.torch import ImageAugment, RecordDataset

    rec, idx = _broken_rec(tmp_path)
    ds = RecordDataset(rec, idx, decode="raw", transform=ImageAugment((3, 8, 8)),
                       on_undecodable="raise")
    with pytest.raises(ImageError, match="key 4"):
        list(DataLoader(ds, batch_size=3, num_workers=2))
    # skipping (the default): the batch goes on without it, from shared memory as ever
    ds = RecordDataset(rec, idx, decode="raw", transform=ImageAugment((3, 8, 8)))
    batches = [labels.tolist() for _, labels in DataLoader(ds, batch_size=3, num_workers=2)]
    assert batches == [[0.0, 1.0, 2.0], [3.0, 5.0]] and ds.num_skipped == 1


def test_other_transforms_keep_the_per_sample_path(data):
    from recio.torch import RecordDataset

    ds = RecordDataset(*data)  # uint8 tensors of each image's own size
    samples = ds.__getitems__([1, 2])
    assert [type(s) for s in samples] == [tuple, tuple]
    np.testing.assert_array_equal(samples[1][0].numpy(), _image(2).transpose(2, 0, 1))


@pytest.mark.slow
def test_random_resized_crop_boxes(tmp_path):
    """The box: area 8-100 % of the image, aspect 3/4-4/3 (its sides read back from a gradient
    image), positions all over; a large JPEG decoded at a reduced DCT scale gives the same
    crops; the draws come in stream order, so a seed gives the same pixels."""
    from recio.image.batches.mxnet_augment import random_resized_crop_box
    from recio.image.batches.augmenter import Augmenter

    h, w = 600, 800
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), np.zeros_like(x)], -1).astype(np.uint8)
    jpeg = recio.pack_img(recio.IRHeader(0, 0.0, 0, 0), img, quality=100)[24:]
    png = recio.pack_img(recio.IRHeader(0, 0.0, 0, 0), img, img_fmt=".png")[24:]
    aug = Augmenter((3, 32, 32), random_resized_crop=True, dtype="uint8")
    params = aug.params(np.random.default_rng(0), range(300))
    out = np.empty((3, 32, 32), np.uint8)
    areas, aspects, lefts = [], [], []
    for row in params:
        aug(jpeg, out, row)
        x0, x1 = out[0, :, 0].mean() * (w - 1) / 255, out[0, :, -1].mean() * (w - 1) / 255
        y0, y1 = out[1, 0, :].mean() * (h - 1) / 255, out[1, -1, :].mean() * (h - 1) / 255
        bw, bh = (x1 - x0) * 32 / 31, (y1 - y0) * 32 / 31  # centres of the edge pixels
        areas.append(bw * bh / (w * h))
        aspects.append(bw / bh)
        lefts.append(x0)
        png_out = np.empty_like(out)
        aug(png, png_out, row)  # decoded whole, never DCT-scaled
        assert np.abs(png_out.astype(int) - out).mean() < 6
    areas, aspects = np.array(areas), np.array(aspects)
    # the rule's own distribution (boxes that do not fit are drawn again: smaller on average)
    rng = np.random.default_rng(5)
    ref = [random_resized_crop_box(w, h, (0.08, 1.0), (3 / 4, 4 / 3), rng) for _ in range(4000)]
    ref_areas = np.array([bw * bh / (w * h) for _, _, bw, bh in ref])
    assert 0.06 < areas.min() and areas.max() < 1.05
    assert abs(areas.mean() - ref_areas.mean()) < 0.04, (areas.mean(), ref_areas.mean())
    assert 0.70 < aspects.min() and aspects.max() < 1.43
    assert (aspects < 0.95).sum() > 50 and (aspects > 1.05).sum() > 50
    assert np.ptp(lefts) > w / 2
    again = np.empty_like(out)
    aug(jpeg, again, params[7])
    aug(jpeg, out, params[7])
    np.testing.assert_array_equal(again, out)


def test_random_resized_crop_in_image_record_iter_and_image_augment(data):
    from recio.torch import ImageAugment

    with recio.ImageBatchIter(data[0], (3, 16, 16), 10, path_imgidx=data[1], shuffle=True,
                               random_resized_crop=True, rand_mirror=True, seed=3,
                               dtype="uint8") as it, \
            recio.ImageBatchIter(data[0], (3, 16, 16), 10, path_imgidx=data[1], shuffle=True,
                                  random_resized_crop=True, rand_mirror=True, seed=3,
                                  dtype="uint8") as again:
        for a, b in zip(it, again):
            np.testing.assert_array_equal(a.data, b.data)
    with pytest.raises(ValueError, match="choose one"):
        recio.ImageBatchIter(data[0], (3, 16, 16), 10, rand_crop=True, random_resized_crop=True)
    with pytest.raises(ValueError, match="choose one"):
        ImageAugment((3, 16, 16), rand_crop=True, random_resized_crop=True)
    with pytest.raises(ValueError, match="area"):
        recio.ImageBatchIter(data[0], (3, 16, 16), 10, random_resized_crop=True,
                              min_random_area=0)
    out = ImageAugment((3, 16, 16), random_resized_crop=True, dtype="uint8")(
        recio.unpack(recio.IndexedRecordReader(*data)[0])[1])
    assert out.shape == (3, 16, 16) and out.dtype == torch.uint8


def test_draws_serve_uniform_integers():
    from recio.image.batches.augmenter import _Draws

    u = np.random.default_rng(1).random(60000)
    d = _Draws(u)
    counts = np.bincount([d.integers(2, 5) for _ in range(60000)], minlength=5)[2:]
    assert counts.min() > 19000 and counts.max() < 21000
    assert _Draws([0.9999999]).integers(0, 3) == 2 and _Draws([0.0]).integers(4, 5) == 4


def test_encoded_batches_decode_on_the_cpu_as_the_codec_does(data, tmp_path):
    """collate_encoded carries the images' bytes (JPEG and PNG mixed); decode_on_device on the
    CPU gives recio's pixels (on a CUDA device nvJPEG decodes the JPEGs: the next test)."""
    from torch.utils.data import DataLoader

    from recio.torch import RecordDataset, collate_encoded, decode_on_device

    rec, idx = str(tmp_path / "mixed.rec"), str(tmp_path / "mixed.idx")
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(6):
            w.write(i, recio.pack_img(recio.IRHeader(0, float(i), i, 0), _image(i), quality=95,
                                      img_fmt=".png" if i % 2 else ".jpg"))
    loader = DataLoader(RecordDataset(rec, idx, decode="raw"), batch_size=3, num_workers=2,
                        collate_fn=collate_encoded)
    for encoded, labels in loader:
        assert all(e.dtype == torch.uint8 and e.ndim == 1 for e in encoded)
        images = decode_on_device(encoded, "cpu")
        grey = decode_on_device([bytes(e.numpy()) for e in encoded], "cpu", mode="L")
        for img, g, e in zip(images, grey, encoded):
            want = recio.image.pixels.codec.decode(bytes(e.numpy()), 1)
            np.testing.assert_array_equal(img.numpy(), want.transpose(2, 0, 1))
            assert g.shape == (1, H, W) and g.dtype == torch.uint8
        assert labels.tolist() == sorted(labels.tolist()) and len(labels) == 3
    with pytest.raises(ValueError, match="mode"):
        decode_on_device([], "cpu", mode="BGR")


def test_encoded_batches_decode_on_a_cuda_device(data):
    """nvJPEG through torchvision: the same images as the CPU decode, give or take nvJPEG's
    rounding (checked only where there is a CUDA device)."""
    from conftest import need, need_cuda

    need_cuda()
    need("torchvision")
    from recio.torch import decode_on_device

    encoded = [recio.pack_img(recio.IRHeader(0, 0.0, i, 0), _image(i), quality=95)[24:]
               for i in range(4)]
    images = decode_on_device(encoded, "cuda")
    assert all(img.device.type == "cuda" and img.dtype == torch.uint8 for img in images)
    for img, e in zip(images, encoded):
        want = recio.image.pixels.codec.decode(e, 1).transpose(2, 0, 1).astype(int)
        assert np.abs(img.cpu().numpy().astype(int) - want).max() <= 2


def test_undecodable_record_read_one_at_a_time_names_its_record(tmp_path):
    """ImageAugment on raw bytes outside the batch path (``ds[i]``, the streaming dataset):
    the error names the record, the file and its byte offset, as a batch's does; a streamed
    record, which has no key, by its place and its image id."""
    from torch.utils.data import DataLoader

    from recio.torch import ImageAugment, RecordDataset, RecordIterableDataset

    rec, idx = _broken_rec(tmp_path)
    augment = ImageAugment((3, 8, 8), dtype="uint8")
    with pytest.raises(ImageError, match=r"bad\.rec: byte \d+: key 4: "):
        RecordDataset(rec, idx, decode="raw", transform=augment, on_undecodable="raise")[4]
    stream = RecordIterableDataset(rec, decode="raw", transform=augment, on_undecodable="raise")
    with pytest.raises(ImageError,
                       match=r"bad\.rec: byte \d+: record #\d+ of part \d/2 \(image id 4\): "):
        list(DataLoader(stream, batch_size=3, num_workers=2))
