"""recio.torch: RecordDataset / RecordIterableDataset, alone and in DataLoader workers."""
import pickle

import numpy as np
import pytest

import recio
from conftest import start_method_cases
from recio.errors import ImageError

try:
    import torch
    from torch.utils.data import DataLoader

    from recio.torch import RecordDataset, RecordIterableDataset
except ImportError:  # every test but the first needs it: see needs_torch
    torch = None

needs_torch = pytest.mark.needs("torch")  # skips with the reason; under CI=true fails


@pytest.mark.slow
def test_missing_torch_gives_install_hint():
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    from recio.torch import RecordDataset\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'recio[torch]'" in out.stdout, out.stderr
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in out.stdout


@pytest.mark.slow
def test_names_load_on_first_use():
    """recio.torch imports a module when one of its names is used: resume_state (NumPy only)
    works without torch, and MinibatchDataset does not load the record datasets."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "from recio.torch import resume_state\n"
            "print(callable(resume_state), 'recio.torch.datasets' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr
    if torch is not None:
        code = ("import sys, recio.torch.minibatch\n"
                "print('recio.torch.datasets' in sys.modules)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)
        assert out.stdout.split() == ["False"], out.stderr

N = 37


def _image(i):
    y, x = np.mgrid[0:6, 0:5]
    return np.stack([(x + i) % 256, (y * 3 + i) % 256, np.full_like(x, i % 256)],
                    axis=-1).astype(np.uint8)


def _write(rec, idx, keys, start=0):
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for i in keys:
            w.write(i, recio.pack_img(recio.IRHeader(0, float(i), i, 0), _image(i), img_fmt=".png"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("torchds")
    _write(d / "data.rec", d / "data.idx", range(N))
    return d / "data.rec", d / "data.idx"


@needs_torch
def test_record_dataset_items(dataset):
    rec, idx = dataset
    ds = RecordDataset(rec, idx)
    assert len(ds) == N
    img, label = ds[np.int64(5)]
    assert img.dtype == torch.uint8 and img.shape == (3, 6, 5)
    np.testing.assert_array_equal(img.permute(1, 2, 0).numpy(), _image(5))
    assert label.dtype == torch.float32 and float(label) == 5.0
    np.testing.assert_array_equal(ds[-1][0].permute(1, 2, 0).numpy(), _image(N - 1))
    with pytest.raises(IndexError):
        ds[N]
    arr, _ = RecordDataset(rec, decode="numpy")[2]  # the .idx beside the .rec is found
    np.testing.assert_array_equal(arr, _image(2))
    pil, _ = RecordDataset(rec, idx, decode="pil", mode="L")[3]
    assert pil.mode == "L" and pil.size == (5, 6)
    raw, _ = RecordDataset(rec, idx, decode="raw")[3]
    assert raw.startswith(b"\x89PNG")


@needs_torch
def test_transforms_and_keys(dataset):
    rec, idx = dataset
    ds = RecordDataset(rec, idx, keys=np.array([4, 2, 9]), transform=lambda t: t.float() / 255,
                       target_transform=lambda lab: int(lab) * 10)
    assert len(ds) == 3
    img, label = ds[1]
    assert img.dtype == torch.float32 and label == 20
    with pytest.raises(KeyError, match="not in the index"):
        RecordDataset(rec, idx, keys=[1, 1000])


@needs_torch
def test_vector_labels(tmp_path):
    rec, idx = tmp_path / "v.rec", tmp_path / "v.idx"
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        w.write(0, recio.pack_img(recio.IRHeader(2, [7.0, 1.0], 0, 0), _image(0), img_fmt=".png"))
    _, label = RecordDataset(rec, idx)[0]
    assert label.tolist() == [7.0, 1.0]


@needs_torch
def test_undecodable_raises_image_error_with_key(tmp_path):
    rec, idx = tmp_path / "b.rec", tmp_path / "b.idx"
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        w.write(42, recio.pack(recio.IRHeader(0, 1.0, 42, 0), b"junk"))
        w.write(43, b"short")  # not even an image record header
    strict = RecordDataset(rec, idx, on_undecodable="raise")
    with pytest.raises(ImageError, match="key 42") as info:
        strict[0]
    assert info.value.path.endswith("b.rec") and info.value.offset == 0
    with pytest.raises(ImageError, match="key 43.*IRHeader") as info:
        strict[1]
    assert info.value.offset > 0
    with pytest.raises(ImageError, match="key 42: .*; none of the 2 records decodes"):
        RecordDataset(rec, idx)[0]  # skipping: nothing could stand in for it


@needs_torch
def test_record_dataset_reopens_after_pickling(dataset):
    rec, idx = dataset
    ds = RecordDataset(rec, idx)
    ds[0]  # opens the file in this process
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._readers == {}
    assert float(clone[7][1]) == 7.0
    assert clone._readers[0] is not ds._readers[0]


def _labels(loader):
    out = []
    for _, labels in loader:
        out.extend(int(v) for v in labels.reshape(-1).tolist())
    return out


@needs_torch
def test_record_dataset_dataloader_two_workers_each_record_once(dataset, start_method):
    """Two DataLoader workers read every record once. The dataset has its file open when the
    workers start: forked ones must reopen it, not share the parent's; spawned ones get the
    dataset pickled, which must leave the parent's open reader behind."""
    rec, idx = dataset
    ds = RecordDataset(rec, idx)
    ds[0]  # opened in the parent before the workers start
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                        generator=torch.Generator().manual_seed(0))
    labels = _labels(loader)
    assert sorted(labels) == list(range(N))


@pytest.mark.parametrize("balance, start_method",
                         start_method_cases([("bytes",), ("records",)], [("bytes",)]),
                         indirect=["start_method"])
@needs_torch
def test_iterable_dataset_dataloader_two_workers_each_record_once(dataset, balance, start_method):
    """Each of two workers reads its InputSplit part of the stream (made in the worker, forked
    or spawned): together every record once."""
    rec, _ = dataset
    ds = RecordIterableDataset(rec, balance=balance)
    labels = _labels(DataLoader(ds, batch_size=5, num_workers=2))
    assert sorted(labels) == list(range(N))


@needs_torch
def test_iterable_dataset_single_process_and_shuffle(dataset):
    rec, _ = dataset
    ds = RecordIterableDataset(rec)
    assert [int(lab) for _, lab in ds] == list(range(N))
    shuffled = RecordIterableDataset(rec, shuffle_buffer=8, seed=1)
    e0 = [int(lab) for _, lab in shuffled]
    assert e0 == [int(lab) for _, lab in shuffled]  # same epoch, same order
    shuffled.set_epoch(1)
    e1 = [int(lab) for _, lab in shuffled]
    assert sorted(e0) == sorted(e1) == list(range(N)) and e0 != e1


@pytest.mark.slow
@needs_torch
def test_iterable_dataset_set_epoch_reaches_persistent_workers(dataset):
    """Persistent workers keep the dataset copy they started with: set_epoch in the main
    process must still give each epoch its own order, the one fresh workers give."""
    rec, _ = dataset

    def orders(persistent):
        ds = RecordIterableDataset(rec, shuffle_buffer=8, seed=1)
        loader = DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=persistent)
        out = []
        for epoch in range(3):
            ds.set_epoch(epoch)
            out.append(_labels(loader))
        return out

    fresh, persistent = orders(False), orders(True)
    assert all(sorted(o) == list(range(N)) for o in persistent)
    assert len({tuple(o) for o in fresh}) == 3
    assert persistent == fresh


@needs_torch
def test_iterable_dataset_set_epoch_reaches_a_persistent_worker_forked_or_spawned(dataset,
                                                                                 start_method):
    """set_epoch reaches a persistent worker through shared memory, which a spawned worker gets
    pickled (as a handle to the same memory), not inherited: each epoch its own order, the one
    the main process reads for that epoch (one worker reads what the main process does)."""
    rec, _ = dataset
    ds = RecordIterableDataset(rec, shuffle_buffer=8, seed=1)
    loader = DataLoader(ds, batch_size=5, num_workers=1, persistent_workers=True)
    got, want = [], []
    for epoch in range(3):
        ds.set_epoch(epoch)
        got.append(_labels(loader))
        want.append([int(lab) for _, lab in ds])
    assert got == want and len({tuple(o) for o in got}) == 3


@needs_torch
def test_iterable_dataset_ranks_and_workers_partition(tmp_path):
    _write(tmp_path / "a.rec", tmp_path / "a.idx", range(0, 20))
    _write(tmp_path / "b.rec", tmp_path / "b.idx", range(20, 45))
    seen = []
    for part in range(2):
        ds = RecordIterableDataset([tmp_path / "a.rec", tmp_path / "b.rec"], part_index=part,
                                   num_parts=2)
        assert ds.part() == (part, 2)
        seen.extend(_labels(DataLoader(ds, batch_size=3, num_workers=2)))
    assert sorted(seen) == list(range(45))


@needs_torch
def test_iterable_dataset_bad_arguments(dataset):
    rec, _ = dataset
    with pytest.raises(ValueError, match="both part_index and num_parts"):
        RecordIterableDataset(rec, part_index=0)
    with pytest.raises(ValueError, match="part_index must be"):
        RecordIterableDataset(rec, part_index=2, num_parts=2)
    with pytest.raises(ValueError, match="decode"):
        RecordIterableDataset(rec, decode="jpeg")


@needs_torch
def test_jpeg_records_decode_the_same_after_pickling(tmp_path):
    rec, idx = tmp_path / "j.rec", tmp_path / "j.idx"
    rng = np.random.default_rng(0)
    img = np.clip(rng.normal(128, 40, (20, 30, 3)), 0, 255).astype(np.uint8)
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        w.write(0, recio.pack_img(recio.IRHeader(0, 1.0, 0, 0), img, quality=90))
    auto = RecordDataset(rec, idx, decode="numpy")
    with recio.IndexedRecordReader(str(rec), str(idx)) as reader:
        np.testing.assert_array_equal(auto[0][0], recio.unpack_img(reader[0])[1])
    clone = pickle.loads(pickle.dumps(auto))
    np.testing.assert_array_equal(clone[0][0], auto[0][0])
    grey = RecordDataset(rec, idx, mode="L")[0][0]
    assert grey.shape == (1, 20, 30)


@needs_torch
def test_image_augment_transform_matches_imageiter_augmentation(dataset):
    from recio.torch import ImageAugment
    rec, idx = dataset
    aug = ImageAugment((3, 4, 4), mean=(1, 2, 3), std=(2, 2, 2))
    img, label = RecordDataset(rec, idx, decode="raw", transform=aug)[6]
    assert img.dtype == torch.float32 and img.shape == (3, 4, 4)
    want = (_image(6)[1:5, 0:4].astype(np.float32) - np.float32([1, 2, 3])) / 2
    np.testing.assert_allclose(img.numpy(), want.transpose(2, 0, 1))
    rand = ImageAugment((3, 4, 4), rand_crop=True, rand_mirror=True, dtype="uint8")
    loader = DataLoader(RecordDataset(rec, idx, decode="raw", transform=rand), batch_size=8,
                        num_workers=2)
    batches = list(loader)
    assert sum(len(lab) for _, lab in batches) == N
    assert batches[0][0].dtype == torch.uint8 and batches[0][0].shape == (8, 3, 4, 4)
    with pytest.raises(ValueError, match="uint8"):
        ImageAugment((3, 4, 4), dtype="uint8", mean=(1, 1, 1))
