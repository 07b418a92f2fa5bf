"""``import recio.mx as mx`` runs code written for ``import mxnet as mx`` that reads records.

The dataset class below is InsightFace's arcface_torch ``MXFaceDataset``
(recognition/arcface_torch/dataset.py), with only its ``import mxnet as mx`` changed. It reads
tests/data/mxnet_pixels/face.rec, written by the real MXNet, and its images must equal what
MXNet's ``mx.image.imdecode(img).asnumpy()`` returned for them (expected.npz, see make.py).
"""
import numbers
import os
import pathlib

import numpy as np
import pytest

import recio
import recio.mx as mx  # was: import mxnet as mx
from conftest import need
from recio import mx as recordio  # the older spelling keeps working
from recio.errors import ImageError

DATA = pathlib.Path(__file__).parents[1] / "data" / "mxnet_pixels"
EXPECTED = dict(np.load(DATA / "expected.npz"))


def _transforms():
    """torchvision's transforms when installed, else the four MXFaceDataset uses, as
    torchvision defines them (so that the class below runs as written)."""
    try:
        from torchvision import transforms
        return transforms
    except ImportError:
        pass
    import torch
    from PIL import Image

    class Compose:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, x):
            for step in self.steps:
                x = step(x)
            return x

    class ToPILImage:
        def __call__(self, array):
            return Image.fromarray(array)

    class RandomHorizontalFlip:
        def __call__(self, img):
            return img.transpose(Image.FLIP_LEFT_RIGHT) if torch.rand(1) < 0.5 else img

    class ToTensor:
        def __call__(self, img):
            return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float() / 255

    class Normalize:
        def __init__(self, mean, std):
            self.mean = torch.tensor(mean).view(-1, 1, 1)
            self.std = torch.tensor(std).view(-1, 1, 1)

        def __call__(self, t):
            return (t - self.mean) / self.std

    class Namespace:
        pass

    ns = Namespace()
    ns.Compose, ns.ToPILImage, ns.RandomHorizontalFlip = Compose, ToPILImage, RandomHorizontalFlip
    ns.ToTensor, ns.Normalize = ToTensor, Normalize
    return ns


def make_dataset_class(torch, Dataset, transforms):
    """arcface_torch's MXFaceDataset, verbatim but for the import of mx."""

    class MXFaceDataset(Dataset):
        def __init__(self, root_dir, local_rank):
            super(MXFaceDataset, self).__init__()
            self.transform = transforms.Compose(
                [transforms.ToPILImage(),
                 transforms.RandomHorizontalFlip(),
                 transforms.ToTensor(),
                 transforms.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5]),
                 ])
            self.root_dir = root_dir
            self.local_rank = local_rank
            path_imgrec = os.path.join(root_dir, 'train.rec')
            path_imgidx = os.path.join(root_dir, 'train.idx')
            self.imgrec = mx.recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, 'r')
            s = self.imgrec.read_idx(0)
            header, _ = mx.recordio.unpack(s)
            if header.flag > 0:
                self.header0 = (int(header.label[0]), int(header.label[1]))
                self.imgidx = np.array(range(1, int(header.label[0])))
            else:
                self.imgidx = np.array(list(self.imgrec.keys))

        def __getitem__(self, index):
            idx = self.imgidx[index]
            s = self.imgrec.read_idx(idx)
            header, img = mx.recordio.unpack(s)
            label = header.label
            if not isinstance(label, numbers.Number):
                label = label[0]
            label = torch.tensor(label, dtype=torch.long)
            sample = mx.image.imdecode(img).asnumpy()
            if self.transform is not None:
                sample = self.transform(sample)
            return sample, label

        def __len__(self):
            return len(self.imgidx)

    return MXFaceDataset


@pytest.fixture(scope="module")
def face_root(tmp_path_factory):
    """face.rec/.idx (written by MXNet) as arcface_torch expects them: root/train.rec."""
    root = tmp_path_factory.mktemp("faces")
    (root / "train.rec").write_bytes((DATA / "face.rec").read_bytes())
    (root / "train.idx").write_bytes((DATA / "face.idx").read_bytes())
    return root


@pytest.fixture(scope="module")
def face_dataset_class():
    torch = need("torch")
    return make_dataset_class(torch, torch.utils.data.Dataset, _transforms())


IDENTITIES = [0, 0, 1, 1, 1, 2]


def test_arcface_dataset_reads_mxnets_pixels(face_root, face_dataset_class):
    dataset = face_dataset_class(str(face_root), 0)
    assert dataset.header0 == (7, 10) and len(dataset) == 6
    dataset.transform = None  # the decoded image itself: MXNet's pixels, exactly
    for index in range(len(dataset)):
        sample, label = dataset[index]
        assert int(label) == IDENTITIES[index]
        want = EXPECTED[f"face|{index + 1}"]
        assert type(sample) is np.ndarray and sample.dtype == np.uint8
        assert sample.shape == want.shape == (24, 20, 3)
        assert np.array_equal(sample, want)


def test_arcface_dataset_with_its_transform_in_dataloader_workers(face_root, face_dataset_class):
    torch = need("torch")
    dataset = face_dataset_class(str(face_root), 0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=3, num_workers=2, shuffle=False)
    samples, labels = zip(*loader)
    samples, labels = torch.cat(samples), torch.cat(labels)
    assert labels.tolist() == IDENTITIES and labels.dtype == torch.long
    assert samples.shape == (6, 3, 24, 20) and samples.dtype == torch.float32
    for i, sample in enumerate(samples):
        want = torch.from_numpy(EXPECTED[f"face|{i + 1}"]).permute(2, 0, 1).float() / 127.5 - 1
        flipped = want.flip(2)
        assert (torch.allclose(sample, want, atol=1e-6)
                or torch.allclose(sample, flipped, atol=1e-6))  # RandomHorizontalFlip


def test_imdecode_is_mxnets():
    data = (DATA / "images" / "c420.jpg").read_bytes()
    rgb = mx.image.imdecode(data)
    assert isinstance(rgb, mx.image.NDArray) and isinstance(rgb, mx.nd.NDArray)
    assert rgb.shape == (23, 37, 3) and rgb.dtype is np.uint8 and rgb.context == mx.cpu(0)
    plain = rgb.asnumpy()
    assert type(plain) is np.ndarray and np.array_equal(plain, EXPECTED["imdecode|c420.jpg|1|1"])
    plain[...] = 0  # asnumpy is a copy, as MXNet's
    assert rgb.max() > 0
    assert np.array_equal(mx.image.imdecode(bytearray(data), 1, 0),
                          EXPECTED["imdecode|c420.jpg|1|0"])
    grey = mx.image.imdecode(np.frombuffer(data, np.uint8), flag=0)
    assert grey.shape == (23, 37, 1) and np.array_equal(grey, EXPECTED["imdecode|c420.jpg|0|0"])
    out = np.zeros((23, 37, 3), np.uint8)
    assert np.array_equal(mx.image.imdecode(data, out=out), rgb) and out.max() > 0
    assert np.array_equal(mx.image.imread(DATA / "images" / "c420.jpg"), rgb)
    assert mx.image.NDArray.asscalar(rgb[:1, :1, :1]) == rgb[0, 0, 0]
    with pytest.raises(ValueError, match="bytes"):
        mx.image.imdecode("c420.jpg")
    with pytest.raises(ValueError, match="flag"):
        mx.image.imdecode(data, flag=-1)
    with pytest.raises(ImageError):
        mx.image.imdecode(b"not an image")


def test_both_import_spellings_have_the_mxnet_recordio_names():
    names = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
             "unpack_img"]
    for name in names:
        assert getattr(recordio, name) is getattr(mx.recordio, name)
    # MXNet's iterator (MXNet's batches) and recio's own (NumPy batches) are different things
    assert mx.io.ImageRecordIter is not recio.ImageBatchIter


def test_image_record_iter_reads_the_mxnet_made_records():
    """Every format of pixels.rec through MXNet's iterator: the centred 7x7 crops (the smallest
    image is 9x7) of the pixels MXNet's imdecode gave (the iterator decodes as it does, but
    turns a JPEG by its EXIF orientation, which imdecode ignores: the real MXNet 1.9.1's
    iterator gives exif6.jpg turned 90 degrees clockwise)."""
    with mx.io.ImageRecordIter(path_imgrec=str(DATA / "pixels.rec"),
                               path_imgidx=str(DATA / "pixels.idx"), data_shape=(3, 7, 7),
                               batch_size=5, dtype="uint8") as it:
        batches = list(it)
    assert it.num_skipped == 0
    names = list(EXPECTED["names"])
    samples = [(int(i), s) for b in batches
               for i, s in zip(b.index[:5 - b.pad], b.data[0].asnumpy()[:5 - b.pad])]
    assert [i for i, _ in samples] == list(range(len(names)))
    for key, sample in samples:
        full = EXPECTED[f"imdecode|{names[key]}|1|1"]
        if names[key] == "exif6.jpg":
            full = np.rot90(full, -1)
        h, w = full.shape[:2]
        y, x = (h - 7) // 2, (w - 7) // 2
        assert np.array_equal(sample.transpose(1, 2, 0), full[y:y + 7, x:x + 7]), names[key]
