"""recio.torch and images nothing can decode (``recio.image.undecodable``): both datasets, the
per-sample and the zero-copy ``ImageAugment`` batch path, no workers and two (forked and
spawned), batches of one and more. An epoch never ends because of one image; each undecodable
record is named (file, key or place, byte offset) and counted in ``num_skipped`` across the
workers; ``on_undecodable="raise"`` raises ``ImageError`` at the first one.

The records are MXNet's ``raw_damaged.rec`` (``tests/data/mxnet_damaged``, see
``test_undecodable.py``), keyed 100..114 here with each record's key as its label, so every
sample says which record it is.
"""
import functools
import pickle
import re
import warnings

import cv2
import numpy as np
import pytest

import recio
from conftest import start_method_cases
from recio.errors import ImageError, SkippedRecordWarning
from support import BAD, GOOD, IDX, LIST, REC

try:
    import torch
    from torch.utils.data import DataLoader

    from recio.torch import ImageAugment, RecordDataset, RecordIterableDataset
except ImportError:  # every test needs it: the marker skips (fails under CI=true) with the reason
    torch = None

pytestmark = pytest.mark.needs("torch")

FIRST = 100
KEYS = [FIRST + int(row[0]) for row in LIST]
BAD_KEYS = [FIRST + k for k in BAD]
GOOD_KEYS = [FIRST + k for k in GOOD]
#: a fixed size for the per-sample path's samples, so they stack (picklable for spawn)
SMALL = functools.partial(cv2.resize, dsize=(16, 16))


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """raw_damaged.rec's images as records keyed and labelled 100..114; ``(rec, offsets)``."""
    d = tmp_path_factory.mktemp("keyed")
    rec, idx = str(d / "keyed.rec"), str(d / "keyed.idx")
    with recio.IndexedRecordReader(REC, IDX) as src, recio.IndexedRecordWriter(rec, idx) as w:
        for k in range(len(LIST)):
            _, img = recio.unpack(src[k])
            w.write(FIRST + k, recio.pack(recio.IRHeader(0, float(FIRST + k), FIRST + k, 0), img))
    offsets = {int(k): int(o) for k, o in (line.split("\t") for line in
                                           open(idx).read().splitlines())}
    return rec, offsets


def _map_style(rec, path, **kwargs):
    if path == "batch":  # the zero-copy path: __getitems__ decodes a whole batch in one array
        return RecordDataset(rec, decode="raw", target_transform=int, **kwargs,
                             transform=ImageAugment((3, 16, 16), resize=16, dtype="uint8"))
    return RecordDataset(rec, decode="numpy", transform=SMALL, target_transform=int, **kwargs)


def _labels(loader):
    return [int(v) for _, labels in loader for v in labels.reshape(-1).tolist()]


def _in_place_of(key):
    """The record that stands in for an undecodable one: the next decodable in index order."""
    later = [k for k in GOOD_KEYS if k > key]
    return later[0] if later else GOOD_KEYS[0]


# -- RecordDataset --------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["batch", "per-sample"])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_map_style_epoch_skips_names_and_counts(keyed, path, batch_size):
    rec, offsets = keyed
    ds = _map_style(rec, path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = _labels(DataLoader(ds, batch_size=batch_size))
    if batch_size == 1:  # no empty batch: the next decodable record stands in
        assert labels == [k if k in GOOD_KEYS else _in_place_of(k) for k in KEYS]
    else:  # the batch goes on without them
        assert labels == GOOD_KEYS
    assert ds.num_skipped == len(BAD)
    messages = [str(w.message) for w in caught if w.category is SkippedRecordWarning]
    assert len(messages) == len(BAD)
    for key, message in zip(BAD_KEYS, messages):
        instead = f", key {_in_place_of(key)} in its place" if batch_size == 1 else ""
        assert re.fullmatch(rf"{re.escape(rec)}: byte {offsets[key]}: key {key}: .+; "
                            rf"skipped{re.escape(instead)}", message), message


@pytest.mark.parametrize("path, batch_size, start_method", start_method_cases(
    [("batch", 4), ("batch", 1), ("per-sample", 4), ("per-sample", 1)], [("batch", 1)]),
    indirect=["start_method"])
def test_map_style_counts_across_dataloader_workers(keyed, path, batch_size, start_method):
    rec, _ = keyed
    ds = _map_style(rec, path)
    labels = _labels(DataLoader(ds, batch_size=batch_size, num_workers=2))
    if batch_size == 1:
        assert sorted(labels) == sorted(k if k in GOOD_KEYS else _in_place_of(k) for k in KEYS)
    else:
        assert sorted(labels) == GOOD_KEYS
    assert ds.num_skipped == len(BAD)  # added up over the workers
    again = pickle.loads(pickle.dumps(ds))  # still pickles; the copy keeps the count
    assert again.num_skipped == len(BAD) and again[1][1] == FIRST + 1


def test_reading_one_record_that_does_not_decode(keyed):
    """``ds[i]`` gives the next decodable record in its place (skip), or raises (raise)."""
    rec, offsets = keyed
    ds = _map_style(rec, "per-sample")
    with pytest.warns(SkippedRecordWarning, match=r"key 104: .*; skipped, key 106 in its place"):
        image, label = ds[4]
    assert label == 106 and np.array_equal(image, ds[6][0])
    with pytest.warns(SkippedRecordWarning, match=r"key 114: .*; skipped, key 101 in its place"):
        assert ds[-1][1] == 101  # the last one: wraps around
    assert ds.num_skipped == 2
    strict = _map_style(rec, "per-sample", on_undecodable="raise")
    with pytest.raises(ImageError) as info:
        strict[5]
    assert str(info.value).startswith(f"{rec}: byte {offsets[105]}: key 105: ")
    assert info.value.path == rec and info.value.offset == offsets[105]


@pytest.mark.parametrize("path", ["batch", "per-sample"])
@pytest.mark.parametrize("workers", [0, 2])
def test_map_style_raise_mode_raises_at_the_first(keyed, path, workers):
    rec, offsets = keyed
    ds = _map_style(rec, path, on_undecodable="raise")
    it = iter(DataLoader(ds, batch_size=4, num_workers=workers))
    with pytest.raises(ImageError, match=rf"{re.escape(rec)}: byte 0: key 100: ") as info:
        next(it)
    _let_go(info)
    it = iter(DataLoader(ds, batch_size=2, sampler=[2, 3, 4, 6], num_workers=workers))
    assert _labels([next(it)]) == [102, 103]
    with pytest.raises(ImageError, match=rf"byte {offsets[104]}: key 104: ") as info:
        next(it)
    _let_go(info)


def _let_go(info):
    """Free the DataLoader iterator a worker's error came from at once: torch re-raises it
    from a frame the exception's traceback holds (a reference cycle), and an iterator freed
    later by the garbage collector waits 10 s for its workers (torch's, with or without recio:
    two joins of MP_STATUS_CHECK_INTERVAL)."""
    info.value.__traceback__ = None
    info._excinfo = None


@pytest.mark.parametrize("records", [3, 150])
def test_a_file_of_no_images_is_not_searched_to_its_end(tmp_path, records):
    """A record that does not decode gets the next one that does in its place; past 100 in a
    row (or the whole file) it is a file of other records, and the error says so."""
    rec = str(tmp_path / "none.rec")
    with recio.IndexedRecordWriter(rec, str(tmp_path / "none.idx")) as w:
        for k in range(records):
            w.write(k, recio.pack(recio.IRHeader(0, 0.0, k, 0), b"text"))
    what = ("none of the 3 records decodes" if records == 3 else
            "nor do the 100 records after it")
    with pytest.raises(ImageError, match=rf"^{re.escape(rec)}: byte 0: key 0: .+; {what}, so "
                                         r"nothing can stand in for it"):
        RecordDataset(rec)[0]
    with pytest.raises(ImageError, match=what):
        mx_dataset(rec)[0]


def mx_dataset(rec):
    import recio.mx as mx

    return mx.gluon.data.vision.ImageRecordDataset(rec)


# -- RecordIterableDataset ------------------------------------------------------------------
@pytest.mark.parametrize("shuffle_buffer", [0, 4])
def test_stream_does_not_yield_undecodable_records(keyed, shuffle_buffer):
    rec, offsets = keyed
    ds = RecordIterableDataset(rec, decode="raw", target_transform=int,
                               transform=ImageAugment((3, 16, 16), resize=16),
                               shuffle_buffer=shuffle_buffer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = _labels(DataLoader(ds, batch_size=1))
    assert sorted(labels) == GOOD_KEYS and ds.num_skipped == len(BAD)
    messages = sorted(str(w.message) for w in caught if w.category is SkippedRecordWarning)
    want = sorted(rf"{re.escape(rec)}: byte {offsets[k]}: record #{k - FIRST} of part 0/1 "
                  rf"\(image id {k}\): .+; skipped" for k in BAD_KEYS)
    assert len(messages) == len(BAD)
    for pattern, message in zip(want, messages):
        assert re.fullmatch(pattern, message), message


@pytest.mark.parametrize("batch_size, start_method", start_method_cases([(1,), (4,)], [(4,)]),
                         indirect=["start_method"])
def test_stream_counts_across_dataloader_workers(keyed, batch_size, start_method):
    rec, _ = keyed
    ds = RecordIterableDataset(rec, decode="numpy", transform=SMALL, target_transform=int)
    labels = _labels(DataLoader(ds, batch_size=batch_size, num_workers=2))
    assert sorted(labels) == GOOD_KEYS and ds.num_skipped == len(BAD)


def test_stream_raise_mode_raises_from_a_worker(keyed):
    rec, _ = keyed
    strict = RecordIterableDataset(rec, on_undecodable="raise")
    it = iter(DataLoader(strict, batch_size=None, num_workers=2))
    with pytest.raises(ImageError,
                       match=rf"{re.escape(rec)}: byte 0: record #0 of part 0/2 ") as info:
        next(it)
    del it
    _let_go(info)


# -- a training loop ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("streamed", [False, True])
def test_a_training_epoch_over_the_damaged_file_completes(streamed):
    """docs/training/pytorch.md's loop (ImageAugment, DataLoader workers, SGD) over MXNet's
    raw_damaged.rec, as written there: the epoch goes through every decodable image."""
    from torch import nn

    augment = ImageAugment((3, 32, 32), random_resized_crop=True, rand_mirror=True,
                           dtype="uint8")
    if streamed:
        ds = RecordIterableDataset(REC, decode="raw", transform=augment, target_transform=int,
                                   shuffle_buffer=8)
        loader = DataLoader(ds, batch_size=4, num_workers=2)
    else:
        ds = RecordDataset(REC, decode="raw", transform=augment, target_transform=int)
        loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                            persistent_workers=True)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        if streamed:
            ds.set_epoch(epoch)
        seen = 0
        for images, labels in loader:
            loss = nn.functional.cross_entropy(model(images.float() / 255), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(labels)
        # every decodable image; one more if the shuffle made a batch of the four bad ones
        assert len(GOOD) <= seen <= len(GOOD) + (not streamed) and np.isfinite(loss.item())
    assert ds.num_skipped == 2 * len(BAD)
