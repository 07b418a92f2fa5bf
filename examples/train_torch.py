"""Train a small PyTorch model straight from a .rec with recio.torch (no MXNet).

Run:  python examples/train_torch.py [train.rec]

Needs ``pip install 'recio[torch]'``. With your own .rec (packed by im2rec, labels = class ids
0..K-1) the number of classes is read from the data (one pass with
``recio.image.tools.dataset_stats``). Without an argument it writes a tiny 2-class dataset into
examples/out/torch/ first. Shown twice:

1. ``RecordDataset`` (map-style, uses the .idx): ``DataLoader(shuffle=True, num_workers=2)``;
   the dataset may be created in the main process — each worker reopens the file itself. With
   ``decode="raw"`` and an ``ImageAugment`` transform this is recio's fast path: each batch is
   decoded in one call into one uint8 array, which reaches the loop without a copy, and the
   loop normalises it on the device (one line).
2. ``RecordIterableDataset`` (streams the file): each DataLoader worker, on each rank of a
   ``torch.distributed`` job, reads its own part (part = rank * num_workers + worker_id), so no
   record is read twice; ``set_epoch`` changes its buffered shuffle order.
"""
import argparse
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

import recio
from recio.image.tools.dataset_stats import dataset_stats
from recio.torch import ImageAugment, RecordDataset, RecordIterableDataset

MEAN = torch.tensor([123.68, 116.28, 103.53]).view(1, 3, 1, 1)
STD = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
#: a random 32x32 crop, flipped half the time, as uint8 CHW (normalised in the training loop)
AUGMENT = ImageAugment((3, 32, 32), rand_crop=True, rand_mirror=True, dtype="uint8")


def make_tiny_dataset(folder, n=256, seed=0):
    os.makedirs(folder, exist_ok=True)
    rec, idx = os.path.join(folder, "tiny.rec"), os.path.join(folder, "tiny.idx")
    rng = np.random.default_rng(seed)
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(n):
            label = i % 2
            img = np.clip(rng.normal(160 if label else 90, 40, (40, 48, 3)), 0, 255)
            w.write(i, recio.pack_img(recio.IRHeader(0, label, i, 0), img.astype(np.uint8)))
    return rec


def train(model, loader, epochs, set_epoch=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        if set_epoch is not None:
            set_epoch(epoch)
        total = correct = 0
        for images, labels in loader:
            target = labels.long()  # labels arrive as float32, as stored in the record
            images = (images.float() - MEAN) / STD  # on the device: after images.to(device)
            logits = model(images)
            loss = nn.functional.cross_entropy(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            correct += int((logits.argmax(1) == target).sum())
            total += len(target)
        print(f"  epoch {epoch}: {total} images, loss {loss.item():.3f}, "
              f"accuracy {correct / total:.2f}")


def count_classes(rec):
    """The number of classes: the largest class id in the data, plus one."""
    labels = dataset_stats(rec, sample=1).labels
    if not labels or labels[0].kind != "classes" or not labels[0].values:
        sys.exit(f"{rec}: the labels are not class ids 0..K-1; this example trains a classifier")
    return int(max(labels[0].values)) + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rec", nargs="?", help="a .rec packed by im2rec (labels = class ids "
                        "0..K-1), with its .idx beside it; default: a tiny dataset made here")
    rec = parser.parse_args().rec or make_tiny_dataset(
        os.path.join(os.path.dirname(__file__), "out", "torch"))
    if not os.path.isfile(rec):
        sys.exit(f"{rec}: no such file (give a .rec packed by im2rec)")
    try:
        run(rec)
    except recio.RecordIOError as exc:
        sys.exit(f"error: {exc}")


def run(rec):
    classes = count_classes(rec)
    print(f"{rec}: {classes} classes")
    torch.manual_seed(0)

    def model():
        return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(8, classes))

    print("RecordDataset + DataLoader(shuffle=True, num_workers=2)")
    ds = RecordDataset(rec, decode="raw", transform=AUGMENT)  # finds tiny.idx beside tiny.rec
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)
    train(model(), loader, epochs=2)

    print("RecordIterableDataset + DataLoader(num_workers=2)")
    stream = RecordIterableDataset(rec, decode="raw", transform=AUGMENT, shuffle_buffer=64)
    loader = DataLoader(stream, batch_size=32, num_workers=2)
    train(model(), loader, epochs=2, set_epoch=stream.set_epoch)


if __name__ == "__main__":
    main()
