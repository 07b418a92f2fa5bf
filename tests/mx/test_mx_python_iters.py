"""recio.mx's NDArray, NDArrayIter, ImageIter, gluon datasets and DataLoader against MXNet 1.9.1.

The reference outputs come from ``tests/data/mxnet_iter/make.py`` (run with the real MXNet):
``nd|...`` (``mx.io.NDArrayIter``), ``imageiter|...`` (``mx.image.ImageIter``, the random
configuration after ``random.seed(7)``/``numpy.random.seed(7)``), ``dataset|...`` and
``loader|...`` (``gluon.data.vision.ImageRecordDataset`` and a ``DataLoader``).
"""
import hashlib
import json
import pathlib
import random

import numpy as np
import pytest

import recio.mx as mx
from conftest import need
from recio.errors import RecordIOError

DATA = pathlib.Path(__file__).parents[1] / "data" / "mxnet_iter"
META = json.loads((DATA / "expected.json").read_text())
EXPECTED = np.load(DATA / "expected.npz")


def describe(descs):
    return [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout] for d in descs]


# -- NDArray ------------------------------------------------------------------------------------
def test_ndarray_looks_like_mxnets():
    a = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    assert a.dtype is np.float32 and a.shape == (2, 3) and a.size == 6 and a.ndim == 2
    assert str(a.context) == "cpu(0)" and a.ctx == mx.cpu() and a.stype == "default"
    assert repr(a).endswith("<NDArray 2x3 @cpu(0)>")
    copy = a.asnumpy()
    assert type(copy) is np.ndarray and copy.tolist() == [[1, 2, 3], [4, 5, 6]]
    copy[0, 0] = 99
    assert a.asnumpy()[0, 0] == 1  # asnumpy copies
    assert a[1].shape == (3,) and a[1, 2].shape == (1,) and a[1, 2].asscalar() == 6
    assert type(a[1, 2].asscalar()) is np.float32
    assert [row.shape for row in a] == [(3,), (3,)] and len(a) == 2
    assert (a * 2 + 1).asnumpy().tolist() == [[3, 5, 7], [9, 11, 13]]
    assert (a == 2).asnumpy().tolist() == [[0, 1, 0], [0, 0, 0]] and (a == 2).dtype is np.float32
    u8 = mx.nd.array(np.arange(6).reshape(2, 3), dtype="uint8")
    assert (u8 * 0.5).asnumpy().tolist() == [[0, 0, 0], [0, 0, 0]]  # MXNet casts 0.5 to uint8
    assert (u8 + 1.7).asnumpy().tolist() == [[1, 2, 3], [4, 5, 6]]
    assert u8.argmax(axis=1).dtype is np.uint8 and u8.mean().asnumpy().tolist() == [2]
    assert a.sum().shape == (1,) and a.flatten().shape == (2, 3) and a.T.shape == (3, 2)
    assert a.reshape((3, 2)).shape == (3, 2) and a.reshape(0, -1).shape == (2, 3)
    assert a.astype("int32").dtype is np.int32 and a.astype("float32", copy=False) is a
    assert np.asarray(a).base is not None or np.shares_memory(np.asarray(a), a._data)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    with pytest.raises(ValueError, match="on the CPU"):
        a.as_in_context(mx.gpu(0))
    assert a.as_in_context(mx.cpu()) is a
    b = mx.nd.zeros((2, 3))
    a.copyto(b)
    assert b.asnumpy().tolist() == a.asnumpy().tolist()
    assert mx.nd.array(np.arange(3)).dtype is np.float32  # as MXNet: float32 unless told
    assert mx.nd.concat(a, a, dim=0).shape == (4, 3) and mx.nd.stack(a, a).shape == (2, 2, 3)
    with mx.Context("cpu", 1):
        assert mx.nd.ones((1,)).context == mx.cpu(1)


def test_ndarray_element_is_a_writable_view():
    """MXNet-era iterators fill labels element by element through the view indexing gives
    (InsightFace's FaceImageIter: ``batch_label = nd.empty((B,)); batch_label[i][:] = label``);
    a copy would leave the labels as nd.empty's garbage."""
    labels = mx.nd.empty((4,))
    for i, value in enumerate([3.0, 1.0, 4.0, 1.5]):
        labels[i][:] = value
    assert labels.asnumpy().tolist() == [3.0, 1.0, 4.0, 1.5]
    labels[-1][:] = 9
    assert labels.asnumpy()[3] == 9 and labels[2].shape == (1,)
    grid = mx.nd.zeros((2, 3))
    grid[1][2][:] = 5
    grid[0, 1][:] = 4
    assert grid.asnumpy().tolist() == [[0, 4, 0], [0, 0, 5]]
    grid[np.int64(1), np.int64(0)][:] = 2
    assert grid.asnumpy()[1, 0] == 2


def test_nd_module_functions_as_mxnets():
    """The mx.nd functions MXNet-era data code calls (InsightFace's FaceImageIter: nd.transpose,
    nd.sum(..., axis=2, keepdims=True); GluonCV's tutorial: nd.transpose); values from MXNet
    1.9.1."""
    a = mx.nd.array(np.arange(24, dtype="float32").reshape(2, 3, 4))
    assert mx.nd.transpose(a).shape == (4, 3, 2)
    assert mx.nd.transpose(a, axes=(2, 0, 1)).shape == (4, 2, 3)
    assert mx.nd.transpose(data=a, axes=(1, 0, 2)).asnumpy().tolist() == \
        a.asnumpy().transpose(1, 0, 2).tolist()
    total = mx.nd.sum(a)
    assert isinstance(total, mx.nd.NDArray) and total.shape == (1,) and total.asscalar() == 276
    assert mx.nd.sum(a, axis=2, keepdims=True).shape == (2, 3, 1)
    assert mx.nd.sum(a, axis=(0, 2)).asnumpy().tolist() == [60, 92, 124]
    assert mx.nd.sum(a, axis=1, exclude=True).asnumpy().tolist() == [60, 92, 124]
    assert mx.nd.mean(a, axis=0).shape == (3, 4) and mx.nd.max(a).asnumpy().tolist() == [23]
    assert mx.nd.min(a, axis=1).shape == (2, 4)
    assert mx.nd.clip(a, 2, 5).asnumpy().ravel()[:8].tolist() == [2, 2, 2, 3, 4, 5, 5, 5]
    assert mx.nd.reshape(a, shape=(4, -1)).shape == (4, 6)
    assert mx.nd.expand_dims(a, axis=1).shape == (2, 1, 3, 4)
    assert mx.nd.swapaxes(a, 0, 2).shape == (4, 3, 2)
    assert mx.nd.cast(a, dtype="uint8").dtype is np.uint8
    assert mx.nd.zeros_like(a).shape == (2, 3, 4) and mx.nd.ones_like(a).asnumpy().sum() == 24
    u8 = mx.nd.array(np.ones((2, 3)), dtype="uint8")
    assert mx.nd.sum(u8).dtype is np.uint8  # MXNet keeps the input's dtype
    assert mx.nd.mean(mx.nd.array([1, 2], dtype="int32")).asnumpy().tolist() == [1]
    assert sum([1, 2]) == 3  # the module's names do not leak into builtins


def test_ndarray_goes_to_torch_without_a_copy():
    torch = need("torch")
    a = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.utils.dlpack.from_dlpack(a.to_dlpack_for_read())
    assert t.shape == (2, 3) and t.dtype == torch.float32
    assert torch.from_dlpack(a).data_ptr() == t.data_ptr()
    assert torch.as_tensor(np.asarray(a)).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_nd_save_and_load_read_mxnets_files(tmp_path):
    mean = mx.nd.load(str(DATA / "mean.nd"))
    assert list(mean) == ["mean_img"] and mean["mean_img"].shape == (3, 32, 32)
    assert mean["mean_img"].dtype is np.float32
    path = tmp_path / "arrays.nd"
    arrays = [mx.nd.array([1, 2, 3]), mx.nd.array([[7]], dtype="uint8"),
              mx.nd.array([1.5], dtype="float64")]
    mx.nd.save(str(path), arrays)
    back = mx.nd.load(str(path))
    assert [a.dtype for a in back] == [np.float32, np.uint8, np.float64]
    assert [a.asnumpy().tolist() for a in back] == [[1, 2, 3], [[7]], [1.5]]
    mx.nd.save(str(path), {"a": mx.nd.ones((2, 2)), "bb": mx.nd.zeros((1,), dtype="int32")})
    named = mx.nd.load(str(path))
    assert list(named) == ["a", "bb"] and named["bb"].dtype is np.int32
    raw = path.read_bytes()
    path.write_bytes(raw[:40])
    with pytest.raises(RecordIOError, match="ends inside an array"):
        mx.nd.load(str(path))


# -- NDArrayIter --------------------------------------------------------------------------------
def _from_make(first, end):
    """make.py's definitions from ``first`` up to ``end``, with ``mx`` = recio.mx: the
    configurations it ran on MXNet, run here on recio."""
    source = (DATA / "make.py").read_text()
    namespace = {"np": np, "mx": mx}
    exec(compile(source[source.index(first):source.index(end)], str(DATA / "make.py"), "exec"),
         namespace)  # make.py's own code
    return namespace


_CONFIGS = _from_make("ND_X = ", "def run_ndarrayiter")
X, Y = _CONFIGS["ND_X"], _CONFIGS["ND_Y"]
ND_CONFIGS, IMAGEITER = _CONFIGS["ND_CONFIGS"], _CONFIGS["IMAGEITER_CONFIGS"]


@pytest.mark.parametrize("name", sorted(ND_CONFIGS))
def test_ndarrayiter_equals_mxnets(name):
    want = META["nd|" + name]
    it = ND_CONFIGS[name]()
    assert describe(it.provide_data) == want["provide_data"]
    assert describe(it.provide_label) == want["provide_label"]
    for epoch, batches in enumerate(want["epochs"]):
        got = list(it)
        assert len(got) == len(batches)
        for b, (batch, exp) in enumerate(zip(got, batches)):
            key = f"nd|{name}|{epoch}|{b}"
            assert batch.pad == exp["pad"] and batch.index is None
            assert len(batch.data) == exp["data"] and len(batch.label) == exp["label"]
            for k, arr in enumerate(batch.data):
                np.testing.assert_array_equal(arr.asnumpy(), EXPECTED[f"{key}|data{k}"])
                assert arr.dtype is EXPECTED[f"{key}|data{k}"].dtype.type
            for k, arr in enumerate(batch.label):
                np.testing.assert_array_equal(arr.asnumpy(), EXPECTED[f"{key}|label{k}"])
        it.reset()


def test_ndarrayiter_shuffles_with_numpy_random():
    np.random.seed(1)
    it = mx.io.NDArrayIter(X, Y, 5, shuffle=True)
    labels = [v for b in it for v in b.label[0].asnumpy().tolist()]
    assert sorted(labels) == list(range(10)) and labels != list(range(10))
    data = [row for b in it for row in b.data[0].asnumpy().tolist()]
    assert data == []  # one epoch until reset()
    it.reset()
    pairs = [(b.data[0].asnumpy()[:, 0] // 4).tolist() == b.label[0].asnumpy().tolist()
             for b in it]
    assert all(pairs)


def test_resize_and_prefetching_iters():
    base = mx.io.NDArrayIter(X, Y, 3)
    resized = mx.io.ResizeIter(base, 6)
    labels = [b.label[0].asnumpy().tolist() for b in resized]
    assert len(labels) == 6 and labels[4] == [0.0, 1.0, 2.0]  # wrapped around
    a = mx.io.NDArrayIter(X, Y, 4, data_name="a", label_name="la")
    b = mx.io.NDArrayIter(X * 2, Y, 4, data_name="b", label_name="lb")
    both = mx.io.PrefetchingIter([a, b], rename_data=[{"a": "x"}, {"b": "y"}])
    assert [d.name for d in both.provide_data] == ["x", "y"]
    batches = list(both)
    assert len(batches) == 3 and len(batches[0].data) == 2 and batches[-1].pad == 2
    np.testing.assert_array_equal(batches[0].data[1].asnumpy(), batches[0].data[0].asnumpy() * 2)
    both.reset()
    assert len(list(both)) == 3


def test_prefetching_iter_passes_the_iterators_descriptions_through():
    """MXNet's PrefetchingIter hands on its iterators' provide_data/provide_label as they are
    when nothing is renamed: InsightFace's FaceImageIter gives (name, shape) tuples, which
    MXNet's PrefetchingIter and its batches keep as tuples."""
    class TupleIter(mx.io.DataIter):
        def __init__(self):
            super().__init__(2)
            self.provide_data = [("data", (2, 3))]
            self.provide_label = [("softmax_label", (2,))]
            self.done = False

        def reset(self):
            self.done = False

        def next(self):
            if self.done:
                raise StopIteration
            self.done = True
            return mx.io.DataBatch([mx.nd.zeros((2, 3))], [mx.nd.zeros((2,))])

    it = mx.io.PrefetchingIter(TupleIter())
    assert it.provide_data == [("data", (2, 3))] and type(it.provide_data[0]) is tuple
    assert type(it.provide_label[0]) is tuple and it.batch_size == 2
    batch = next(iter(it))
    assert type(batch.provide_data[0]) is tuple and batch.provide_label == [("softmax_label", (2,))]


def test_databatch_and_datadesc():
    desc = mx.io.DataDesc("data", (2, 3), np.uint8, "NHWC")
    name, shape = desc
    assert desc[0] == desc.name == name == "data" and shape == (2, 3)
    assert repr(desc) == "DataDesc[data,(2, 3),<class 'numpy.uint8'>,NHWC]"
    assert mx.io.DataDesc.get_batch_axis("TNC") == 1
    assert mx.io.DataDesc.get_list([("a", (1,))], [("a", np.int32)])[0].dtype is np.int32
    batch = mx.io.DataBatch([mx.nd.zeros((2, 3))], [mx.nd.zeros((2,))], pad=1)
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    with pytest.raises(TypeError, match="list of NDArrays"):
        mx.io.DataBatch(mx.nd.zeros((1,)))


# -- ImageIter ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(IMAGEITER))
def test_imageiter_equals_mxnets(name):
    """Deterministic settings bit for bit; the random one too, within float rounding, because
    the augmenters draw from Python's random and numpy.random exactly as MXNet's do."""
    rec, kwargs = IMAGEITER[name]
    kwargs = dict(kwargs)
    seed = kwargs.pop("seed", None)
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed)
    if kwargs.pop("path_imgidx", False):
        kwargs["path_imgidx"] = str(DATA / f"{rec}.idx")
    it = mx.image.ImageIter(batch_size=5, data_shape=(3, 32, 32),
                            path_imgrec=str(DATA / f"{rec}.rec"), **kwargs)
    want = META["imageiter|" + name]
    assert [list(map(str, d)) for d in it.provide_data] == want["provide_data"]
    assert [list(map(str, d)) for d in it.provide_label] == want["provide_label"]
    for epoch, batches in enumerate(want["epochs"]):
        got = list(it)
        assert [b.pad for b in got] == [b["pad"] for b in batches]
        for b, (batch, exp) in enumerate(zip(got, batches)):
            key = f"imageiter|{name}|{epoch}|{b}"
            data = batch.data[0].asnumpy()
            assert str(batch.data[0].dtype) == exp["dtype"] and batch.index is None
            np.testing.assert_array_equal(batch.label[0].asnumpy(), EXPECTED[key + "|label"])
            if epoch == 0:
                ref = EXPECTED["data|" + want["refs"][key]].astype(np.float32)
                np.testing.assert_allclose(data, ref, atol=1e-4)
            if name != "random":
                assert hashlib.sha256(data.tobytes()).hexdigest() == want["digests"][key]
        it.reset()


def test_imageiter_refuses_unknown_arguments_by_name():
    with pytest.raises(ValueError, match=r"unknown parameter colour.*CreateAugmenter's: resize"):
        mx.image.ImageIter(batch_size=2, data_shape=(3, 8, 8),
                           path_imgrec=str(DATA / "train.rec"), colour=True)
    with pytest.raises(ValueError, match="3 channels"):
        mx.image.ImageIter(batch_size=2, data_shape=(1, 8, 8),
                           path_imgrec=str(DATA / "train.rec"))


def test_image_functions():
    img = mx.image.imdecode((DATA.parent / "mxnet_pixels" / "images" / "c420.jpg").read_bytes())
    assert img.shape == (23, 37, 3) and img.dtype is np.uint8
    small = mx.image.resize_short(img, 10)
    assert small.shape == (10, 16, 3)
    crop, box = mx.image.center_crop(img, (20, 20))
    assert crop.shape == (20, 20, 3) and box == (8, 1, 20, 20)
    big, box = mx.image.center_crop(img, (40, 40))
    assert big.shape == (40, 40, 3) and box == (7, 0, 23, 23)
    assert mx.image.scale_down((640, 480), (720, 120)) == (640, 106)
    padded = mx.image.copyMakeBorder(img, 1, 2, 3, 4, values=(9, 8, 7))
    assert padded.shape == (26, 44, 3) and padded.asnumpy()[0, 0].tolist() == [9, 8, 7]
    norm = mx.image.color_normalize(img.astype("float32"), mx.nd.array([1, 2, 3]),
                                    mx.nd.array([2, 2, 2]))
    np.testing.assert_allclose(norm.asnumpy(), (img.asnumpy() - [1, 2, 3]) / 2.0, rtol=1e-6)
    augs = mx.image.CreateAugmenter((3, 16, 16), resize=20, rand_mirror=True, mean=True,
                                    std=True, hue=0.1, rand_gray=0.2)
    names = [type(a).__name__ for a in augs]
    assert names == ["ResizeAug", "CenterCropAug", "HorizontalFlipAug", "CastAug",
                     "HueJitterAug", "RandomGrayAug", "ColorNormalizeAug"]
    out = img
    for aug in augs:
        out = aug(out)
    assert out.shape == (16, 16, 3) and out.dtype is np.float32
    assert json.loads(augs[0].dumps()) == ["resizeaug", {"size": 20, "interp": 2}]


# -- gluon --------------------------------------------------------------------------------------
def test_image_record_dataset_equals_mxnets():
    rec = str(DATA / "train.rec")
    refs = META["dataset|refs"]
    for flag in (1, 0):
        ds = mx.gluon.data.vision.ImageRecordDataset(rec, flag=flag)
        want = META[f"dataset|{flag}"]
        assert len(ds) == want["len"]
        for i in range(len(ds)):
            img, label = ds[i]
            assert isinstance(img, mx.nd.NDArray) and img.dtype is np.uint8
            np.testing.assert_array_equal(img.asnumpy(), EXPECTED["data|" + refs[f"dataset|{flag}|{i}"]])
            assert [type(label).__name__, float(label)] == want["labels"][i]


def test_dataloader_over_the_dataset_equals_mxnets():
    ds = mx.gluon.data.vision.ImageRecordDataset(
        str(DATA / "train.rec"), transform=lambda data, label: (data.astype("float32") / 255, label))
    refs = META["dataset|refs"]
    for workers in (0, 3):
        loader = mx.gluon.data.DataLoader(ds.transform_first(lambda x: mx.image.imresize(
            (x * 255).astype("uint8"), 24, 20)), batch_size=5, last_batch="keep",
            num_workers=workers)
        assert len(loader) == 3
        for b, (data, label) in enumerate(loader):
            want = META["loader"][b]
            assert [list(data.shape), str(data.dtype), list(label.shape), str(label.dtype)] == want
            np.testing.assert_array_equal(data.asnumpy(), EXPECTED["data|" + refs[f"loader|{b}|data"]])
            np.testing.assert_array_equal(label.asnumpy(), EXPECTED[f"loader|{b}|label"])


def test_dataloader_last_batch_and_samplers():
    ds = mx.gluon.data.ArrayDataset(np.arange(10), np.arange(10) * 2)
    keep = [len(b[0]) for b in mx.gluon.data.DataLoader(ds, batch_size=4)]
    discard = [len(b[0]) for b in mx.gluon.data.DataLoader(ds, batch_size=4, last_batch="discard")]
    assert keep == [4, 4, 2] and discard == [4, 4]
    roll = mx.gluon.data.DataLoader(ds, batch_size=4, last_batch="rollover")
    assert [len(b[0]) for b in roll] == [4, 4] and [b[0].asnumpy()[0] for b in roll][0] == 8
    np.random.seed(0)
    shuffled = [v for b in mx.gluon.data.DataLoader(ds, batch_size=3, shuffle=True)
                for v in b[0].asnumpy().tolist()]
    assert sorted(shuffled) == list(range(10)) and shuffled != list(range(10))
    assert [len(ds.shard(3, i)) for i in range(3)] == [4, 3, 3]
    assert len(ds.take(4)) == 4 and ds.transform_first(lambda x: x + 1)[2] == (3, 4)
    with pytest.raises(ValueError, match="last_batch"):
        mx.gluon.data.DataLoader(ds, batch_size=4, last_batch="drop")


def test_split_and_load():
    x = mx.nd.array(np.arange(12).reshape(6, 2))
    parts = mx.gluon.utils.split_and_load(x, [mx.cpu(0), mx.cpu(1)])
    assert [p.shape for p in parts] == [(3, 2), (3, 2)] and parts[1].context == mx.cpu(1)
    assert mx.gluon.utils.split_and_load(x, [mx.cpu()])[0] is x
    with pytest.raises(ValueError, match="evenly split"):
        mx.gluon.utils.split_data(x, 4)
    assert [p.shape[0] for p in mx.gluon.utils.split_data(x, 4, even_split=False)] == [1, 1, 1, 3]
