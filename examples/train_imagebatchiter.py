"""Feed an image .rec to a training loop with recio.ImageBatchIter (MXNet's parameters, no MXNet).

Run:  python examples/train_imagebatchiter.py [train.rec [train.idx]]

With your own .rec (packed by im2rec, labels = class ids 0..K-1), the number of classes is
read from the data (one pass over the file with ``recio.image.tools.dataset_stats``). Without
arguments it first writes a tiny 2-class dataset (bright vs dark squares) into
examples/out/iter/. The "model" is a NumPy softmax regression on 4x4 average-pooled pixels, so
the example needs nothing beyond recio; with a real framework, hand ``batch.data`` (float32 NCHW)
and ``batch.label`` to it instead (e.g. ``torch.from_numpy(batch.data)``), and ignore the last
``batch.pad`` samples of a batch.
"""
import os
import sys

import numpy as np

import recio
from recio.image.tools.dataset_stats import dataset_stats


def make_tiny_dataset(folder, n=200, seed=0):
    """n images of 48x40: label 1 = brighter than average, label 0 = darker."""
    os.makedirs(folder, exist_ok=True)
    rec, idx = os.path.join(folder, "tiny.rec"), os.path.join(folder, "tiny.idx")
    rng = np.random.default_rng(seed)
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in range(n):
            label = i % 2
            base = 160 if label else 90
            img = np.clip(rng.normal(base, 40, (40, 48, 3)), 0, 255).astype(np.uint8)
            w.write(i, recio.pack_img(recio.IRHeader(0, label, i, 0), img, quality=90))
    return rec, idx


def count_classes(rec):
    """The number of classes: the largest class id in the data, plus one."""
    labels = dataset_stats(rec, sample=1).labels
    if not labels or labels[0].kind != "classes" or not labels[0].values:
        sys.exit(f"{rec}: the labels are not class ids 0..K-1; this example trains a classifier")
    return int(max(labels[0].values)) + 1


def main():
    if len(sys.argv) in (2, 3):
        rec = sys.argv[1]
        idx = sys.argv[2] if len(sys.argv) == 3 else os.path.splitext(rec)[0] + ".idx"
    else:
        rec, idx = make_tiny_dataset(os.path.join(os.path.dirname(__file__), "out", "iter"))
    classes = count_classes(rec)
    print(f"{rec}: {classes} classes")
    it = recio.ImageBatchIter(
        path_imgrec=rec, path_imgidx=idx, data_shape=(3, 32, 32), batch_size=32,
        shuffle=True, seed=0, rand_crop=True, rand_mirror=True,
        mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375,
        preprocess_threads=2, prefetch_buffer=2)
    weights = np.zeros((3 * 8 * 8, classes), np.float32)
    lr = 0.1
    with it:  # stops the decode/prefetch threads at the end
        for epoch in range(3):
            correct = seen = 0
            for batch in it:
                real = batch.data.shape[0] - batch.pad  # skip round_batch filler samples
                pooled = batch.data[:real].reshape(real, 3, 8, 4, 8, 4).mean(axis=(3, 5))
                x = pooled.reshape(real, -1)
                y = batch.label[:real, 0].astype(int)
                logits = x @ weights
                p = np.exp(logits - logits.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                correct += int((p.argmax(1) == y).sum())
                seen += real
                p[np.arange(real), y] -= 1  # softmax cross-entropy gradient
                weights -= lr * x.T @ p / real
            print(f"epoch {epoch}: {seen} images, accuracy {correct / seen:.2f}, "
                  f"skipped {it.num_skipped}")
            it.reset()  # next epoch: a new shuffle order and new random crops


if __name__ == "__main__":
    main()
