"""Code written for ``mxnet.recordio`` runs on ``recio.mx`` with only the import changed.

The dataset below is InsightFace's ``arcface_torch`` MXFaceDataset pattern: the reader is opened
in the main process, then used in forked workers with ``numpy.int64`` keys; record 0 is a
header-only record whose label holds the image key range.
"""
import multiprocessing
import numbers

import numpy as np

from recio import mx as recordio  # was: from mxnet import recordio


class FaceDataset:
    def __init__(self, path_imgidx, path_imgrec):
        self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
        header, _ = recordio.unpack(self.imgrec.read_idx(0))
        if header.flag > 0:
            self.header0 = (int(header.label[0]), int(header.label[1]))
            self.imgidx = np.array(range(1, int(header.label[0])))
        else:
            self.imgidx = np.array(list(self.imgrec.keys))

    def __getitem__(self, index):
        idx = self.imgidx[index]  # a numpy.int64
        header, img = recordio.unpack(self.imgrec.read_idx(idx))
        label = header.label
        if not isinstance(label, numbers.Number):
            label = label[0]
        return int(label), recordio.unpack_img(self.imgrec.read_idx(idx), 1)[1].shape

    def __len__(self):
        return len(self.imgidx)


def make_face_dataset(folder, num_ids=3, per_id=4):
    """Record 0: flag 2, label [N+1, N+1+num_ids]; images 1..N; one header per identity."""
    rec, idx = str(folder / "train.rec"), str(folder / "train.idx")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    n = num_ids * per_id
    writer.write_idx(0, recordio.pack(recordio.IRHeader(2, [n + 1, n + 1 + num_ids], 0, 0), b""))
    img = np.zeros((8, 8, 3), np.uint8)
    for i in range(1, n + 1):
        identity = (i - 1) // per_id
        header = recordio.IRHeader(2, [identity, 1], i, 0)
        writer.write_idx(i, recordio.pack_img(header, img, img_fmt=".png"))
    for identity in range(num_ids):
        start = 1 + identity * per_id
        writer.write_idx(n + 1 + identity, recordio.pack(
            recordio.IRHeader(2, [start, start + per_id], 0, 0), b""))
    writer.close()
    return idx, rec


_DATASET = None


def _get(i):
    return _DATASET[i]


def test_face_dataset_in_worker_processes(tmp_path, start_method):
    global _DATASET
    idx, rec = make_face_dataset(tmp_path)
    dataset = FaceDataset(idx, rec)
    assert dataset.header0 == (13, 16) and len(dataset) == 12
    expected = [dataset[i] for i in range(len(dataset))]
    assert [e[0] for e in expected] == [0] * 4 + [1] * 4 + [2] * 4
    _DATASET = dataset
    if start_method == "fork":  # the workers inherit the dataset, its reader open
        with multiprocessing.Pool(2) as pool:
            got = pool.map(_get, range(len(dataset)))
    else:  # spawn pickles the dataset (and its reader) into each worker
        with multiprocessing.Pool(2) as pool:
            got = pool.starmap(FaceDataset.__getitem__, [(dataset, i) for i in range(12)])
    assert got == expected
