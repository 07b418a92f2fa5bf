"""The batch engine is made from a typed settings value (``EngineSettings``), never from the
iterator: the value alone makes the iterator's batches, cannot change under a running engine,
and the engine keeps no reference back to the iterator."""
import dataclasses
import gc
import weakref

import numpy as np
import pytest

import recio
from recio.image.batches.augmenter import Augmenter
from recio.image.batches.engine import BatchEngine, EngineSettings
from recio.image.batches.iterators import ImageBatchIter
from recio.mx.io import ImageRecordIter


def _write(rec, idx, n=17):
    with recio.IndexedRecordWriter(str(rec), str(idx)) as w:
        for i in range(n):
            pixels = np.full((10, 12, 3), (i * 9) % 256, np.uint8)
            w.write(i, recio.pack_img(recio.IRHeader(0, float(i), i, 0), pixels, img_fmt=".png"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine_settings")
    _write(d / "data.rec", d / "data.idx")
    return str(d / "data.rec"), str(d / "data.idx")


def _batches(engine):
    try:
        return [(b.data.copy(), b.label.copy(), b.pad, b.index.copy())
                for b, _, _ in engine.batches(0, 0)]
    finally:
        engine.close()


@pytest.mark.parametrize("indexed", [True, False])
def test_the_settings_alone_make_the_iterators_batches(dataset, indexed):
    rec, idx = dataset
    kw = dict(data_shape=(3, 8, 8), batch_size=4, shuffle=True, seed=7, rand_crop=True,
              preprocess_threads=2)
    with ImageBatchIter(path_imgrec=rec, path_imgidx=idx if indexed else None, **kw) as it:
        expected = [(b.data.copy(), b.label.copy(), b.pad, b.index.copy()) for b in it]
    settings = EngineSettings(
        rec, idx if indexed else None, Augmenter((3, 8, 8), rand_crop=True), batch_size=4,
        label_width=1, shuffle=True, seed=7, shuffle_buffer=1024, round_batch=True,
        carry_over=False, part_index=0, num_parts=1, labels=None, strict_labels=False,
        on_undecodable="skip", preprocess_threads=2, prefetch_buffer=4)
    got = _batches(BatchEngine(settings))
    assert len(got) == len(expected) == 5
    for (data, label, pad, index), (data2, label2, pad2, index2) in zip(got, expected):
        np.testing.assert_array_equal(data, data2)
        np.testing.assert_array_equal(label, label2)
        np.testing.assert_array_equal(index, index2)
        assert pad == pad2


def test_the_settings_are_frozen_and_the_engine_holds_no_iterator(dataset):
    rec, idx = dataset
    it = ImageBatchIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 8, 8), batch_size=4)
    engine = it._engine
    settings = EngineSettings(rec, idx, it.augmenter, 4, 1, False, 0, 1024, True, False, 0, 1,
                              None, False, "skip", 4, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.batch_size = 8  # type: ignore[misc]
    gone = weakref.ref(it)
    it.close()
    del it
    gc.collect()
    assert gone() is None  # nothing in the engine kept the iterator alive
    assert engine.settings.batch_size == 4 and engine.path == rec


def test_mxnets_image_record_iter_builds_its_engine_from_settings_too(dataset):
    rec, idx = dataset
    it = ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 8, 8), batch_size=5,
                         round_batch=False)
    try:
        engine = it._core._engine
        assert isinstance(engine, BatchEngine) and engine.settings.batch_size == 5
        assert engine.settings.round_batch is False and engine.path == rec
        assert sum(5 - b.pad for b in it) == 17
    finally:
        it.close()
