"""Read a face-recognition dataset laid out as InsightFace's train.rec/train.idx, without MXNet.

Run:  python examples/face_dataset.py [train.rec train.idx]

The layout (MS1M, Glint360K, WebFace ... as packed for InsightFace):

- key 0: a header-only record (no image), ``flag = 2``, ``label = [N + 1, N + 1 + num_ids]``;
- keys 1..N: the face images, usually ``flag = 2`` with ``label = [identity, 0]`` (so the class
  is ``label[0]``), or a scalar label;
- keys N+1 .. N+num_ids: one header-only record per identity, ``label = [first, end)``, the
  range of image keys of that identity.

Tools that treat every record as an image fail on the header records; the fix is to read key 0
first and use only keys 1..N. Without arguments this script writes a tiny such dataset (3
identities) into examples/out/face/ and reads it three ways: the header, ``recio.mx`` as
arcface_torch's code does (index path first, NumPy integer keys, safe after fork), and
``recio.torch.RecordDataset`` restricted to the image keys.
"""
import os
import sys

import numpy as np

import recio
from recio import mx


def make_face_dataset(folder, images_per_id=(4, 2, 3), seed=0):
    """Write a dataset in the layout above; returns (rec, idx)."""
    os.makedirs(folder, exist_ok=True)
    rec, idx = os.path.join(folder, "train.rec"), os.path.join(folder, "train.idx")
    rng = np.random.default_rng(seed)
    n, num_ids = sum(images_per_id), len(images_per_id)
    with recio.IndexedRecordWriter(rec, idx) as w:
        w.write(0, recio.pack(recio.IRHeader(2, [n + 1, n + 1 + num_ids], 0, 0), b""))
        key, ranges = 1, []
        for identity, count in enumerate(images_per_id):
            ranges.append((key, key + count))
            for _ in range(count):
                face = rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)  # 112x112 aligned faces
                w.write(key, recio.pack_img(recio.IRHeader(2, [identity, 0], key, 0), face))
                key += 1
        for first, end in ranges:
            w.write(key, recio.pack(recio.IRHeader(2, [first, end], key, 0), b""))
            key += 1
    return rec, idx


def read_layout(rec, idx):
    """(image keys, {identity: (first, end)}) from the header records; error if not this layout."""
    with recio.IndexedRecordReader(rec, idx) as records:
        header, image = recio.unpack(records[0])
        if header.flag == 0 or image:
            raise ValueError(f"{rec}: record 0 is not a header-only record with an id range; "
                             "this is not a face-recognition layout, use all keys")
        first_id_key, end_id_key = (int(v) for v in header.label[:2])
        image_keys = list(range(1, first_id_key))
        identities = {}
        for number, key in enumerate(range(first_id_key, end_id_key)):
            ident_header, _ = recio.unpack(records[key])
            identities[number] = tuple(int(v) for v in ident_header.label[:2])
    return image_keys, identities


def identity_of(label):
    """The class of a face record: label[0] of a vector label (a module-level function, so that
    it pickles into spawned DataLoader workers too)."""
    return int(label[0]) if np.ndim(label) else int(label)


def main():
    if len(sys.argv) == 3:
        rec, idx = sys.argv[1:]
    else:
        rec, idx = make_face_dataset(os.path.join(os.path.dirname(__file__), "out", "face"))
    image_keys, identities = read_layout(rec, idx)
    print(f"{len(image_keys)} face images (keys 1..{len(image_keys)}), "
          f"{len(identities)} identities")
    for identity, (first, end) in list(identities.items())[:5]:
        print(f"  identity {identity}: keys [{first}, {end})")

    # 1. the MXNet API, as arcface_torch's MXFaceDataset uses it (index path first!)
    imgrec = mx.MXIndexedRecordIO(idx, rec, "r")
    header, img = mx.unpack(imgrec.read_idx(np.int64(image_keys[0])))
    label = header.label[0] if header.flag > 0 else header.label
    print(f"recio.mx: key {image_keys[0]} -> identity {int(label)}, {len(img)} JPEG bytes")
    imgrec.close()

    # 2. PyTorch: only the image keys; the class is label[0]
    try:
        from recio.torch import RecordDataset
    except ImportError as exc:
        print(f"(skipping the PyTorch part: {exc})")
        return
    from torch.utils.data import DataLoader

    ds = RecordDataset(rec, idx, keys=image_keys, target_transform=identity_of)
    for images, labels in DataLoader(ds, batch_size=4, num_workers=2):
        print(f"batch {tuple(images.shape)} identities {labels.tolist()}")


if __name__ == "__main__":
    main()
