"""Training-time loading throughput: ImageBatchIter and the PyTorch datasets.

Packs the benchmark corpus (``corpus.py``: 2,000 photo-like images) with ``im2rec --resize 256``
(or, while the im2rec command is unavailable, the same resize with ``recio.pack_img``), then
iterates 2 epochs with ``batch_size=64, data_shape=(3, 224, 224)``, random crop + mirror,
``preprocess_threads=2``:

- float32 NCHW with mean/std normalisation     target >= 1,800 images/s (MXNet C++: ~1,770)
- uint8 NHWC, no normalisation (fast path)      target >= 2,700 images/s
- ``RecordDataset`` + ``DataLoader(num_workers=2)``, float32 output with the same augmentation:
  through ``recio.torch.ImageAugment`` ("torch"), and as torch ops on a decoded uint8 tensor
  ("torch-ops") (reported, no target)
- ``recio.mx.io.ImageRecordIter`` (MXNet's batches and pixels): the float32 configuration above
  ("mx-float32", target: recio's own float32 target, the wrapper must not cost more); GluonCV's
  ImageNet training settings (``random_resized_crop``, brightness/contrast/saturation 0.4, PCA
  noise 0.1, mirror, mean/std: "mx-gluoncv") and its validation settings (``resize=256``, centre
  crop, mean/std: "mx-val"), each beside the real MXNet 1.9.1 running the same configuration
  ("mxnet-gluoncv", "mxnet-val", with ``--mxnet-python``, default ``$RECIO_MXNET_PYTHON``);
  target: at least MXNet's rate

Each configuration runs in a fresh process, ``--runs`` times (default 3), and the median is
printed beside its target with the peak RSS (target < 500 MB; for the DataLoader, the main
process and the largest worker). On a shared machine the wall-clock rate depends on the load, so
the CPU time per image (all threads and workers) is printed too, with the rate two idle cores
would reach at that cost. Run: ``python benchmarks/bench_loader.py [--runs 3] [--n 2000]
[--only KIND ...] [--mxnet-python PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TARGETS = {"float32": 1800, "uint8": 2700, "torch": None, "torch-ops": None,
           "mx-float32": 1800, "mx-gluoncv": "mxnet-gluoncv", "mx-val": "mxnet-val",
           "mxnet-gluoncv": None, "mxnet-val": None}
#: MXNet ImageRecordIter arguments of the recio.mx / MXNet configurations
MX_CONFIGS = {
    "float32": dict(shuffle=True, rand_crop=True, rand_mirror=True),
    "gluoncv": dict(shuffle=True, rand_mirror=True, random_resized_crop=True,
                    max_aspect_ratio=4. / 3., min_aspect_ratio=3. / 4., max_random_area=1,
                    min_random_area=0.08, brightness=0.4, saturation=0.4, contrast=0.4,
                    pca_noise=0.1),
    "val": dict(shuffle=False, resize=256),
}
RSS_LIMIT_MB = 500
BATCH, SHAPE, EPOCHS = 64, (3, 224, 224), 2
MEAN = (123.68, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


# -- data --------------------------------------------------------------------------------------
def _pack_with_im2rec(corpus_dir: str, prefix: str) -> bool:
    exe = shutil.which("im2rec")
    if exe is None:
        return False
    try:
        for args in ([prefix, corpus_dir, "--list", "--recursive"],
                     [prefix, corpus_dir, "--resize", "256", "--quality", "95"]):
            subprocess.run([exe, *args], check=True, capture_output=True, timeout=1800)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return False
    return os.path.exists(prefix + ".rec") and os.path.exists(prefix + ".idx")


def _pack_with_recio(paths, corpus_dir: str, prefix: str) -> None:
    """Fallback packer: shorter side to 256 (``long * 256 // short``), JPEG quality 95."""
    import numpy as np
    from PIL import Image

    import recio

    classes = sorted({os.path.relpath(p, corpus_dir).split(os.sep)[0] for p in paths})
    with recio.IndexedRecordWriter(prefix + ".rec", prefix + ".idx") as w:
        for i, path in enumerate(paths):
            im = Image.open(path).convert("RGB")
            width, height = im.size
            size = ((256, height * 256 // width) if width <= height
                    else (width * 256 // height, 256))
            im = im.resize(size, Image.BILINEAR)
            label = classes.index(os.path.relpath(path, corpus_dir).split(os.sep)[0])
            w.write(i, recio.pack_img(recio.IRHeader(0, float(label), i, 0), np.asarray(im),
                                      quality=95))


def prepare(out_dir: str, n: int) -> str:
    """Corpus + packed ``.rec``/``.idx``; returns the prefix (reused when already there)."""
    from corpus import make_corpus

    corpus_dir = os.path.join(out_dir, "corpus")
    prefix = os.path.join(out_dir, f"loader_{n}")
    marker = prefix + ".done"
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            print(f"# reusing {prefix}.rec (packed by {f.read().strip()})")
        return prefix
    paths = make_corpus(corpus_dir, n=n, seed=0)
    how = "im2rec --resize 256"
    if not _pack_with_im2rec(corpus_dir, prefix):
        how = "recio.pack_img fallback (im2rec unavailable)"
        _pack_with_recio(paths, corpus_dir, prefix)
    with open(marker, "w", encoding="utf-8") as f:
        f.write(how + "\n")
    print(f"# packed {n} images into {prefix}.rec with {how} "
          f"({os.path.getsize(prefix + '.rec') / 1e6:.0f} MB)")
    return prefix


# -- one measurement (in a child process) ------------------------------------------------------
def _run_imageiter(prefix: str, kind: str) -> dict:
    import recio

    kw = dict(path_imgrec=prefix + ".rec", path_imgidx=prefix + ".idx", data_shape=SHAPE,
              batch_size=BATCH, shuffle=True, rand_crop=True, rand_mirror=True,
              preprocess_threads=2)
    if kind == "float32":
        kw.update(mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2], std_r=STD[0], std_g=STD[1],
                  std_b=STD[2])
    else:
        kw.update(dtype="uint8", layout="NHWC")
    images = 0
    with recio.ImageBatchIter(**kw) as it:
        c0 = _cpu()
        t0 = time.perf_counter()
        for epoch in range(EPOCHS):
            if epoch:
                it.reset()
            for batch in it:
                images += batch.data.shape[0] - batch.pad
        seconds = time.perf_counter() - t0
        cpu = _cpu() - c0
        skipped = it.num_skipped
    return {"images": images, "seconds": seconds, "cpu": cpu, "skipped": skipped}


def _cpu() -> float:
    """CPU seconds used so far by this process (all threads)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _run_torch(prefix: str, torch_ops: bool) -> dict:
    import torch
    from torch.utils.data import DataLoader

    from recio.torch import ImageAugment, RecordDataset

    torch.set_num_threads(1)
    if torch_ops:  # decode to a uint8 tensor, then crop/flip/normalise with torch ops
        mean = torch.tensor(MEAN).view(3, 1, 1)
        inv_std = 1 / torch.tensor(STD).view(3, 1, 1)
        ds = RecordDataset(prefix + ".rec", prefix + ".idx",
                           transform=CropFlipNormalise(mean, inv_std))
    else:  # recio's transform: ImageBatchIter's augmentation, decoded straight into the crop
        ds = RecordDataset(prefix + ".rec", prefix + ".idx", decode="raw", transform=ImageAugment(
            SHAPE, rand_crop=True, rand_mirror=True, mean=MEAN, std=STD))
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=2, persistent_workers=True,
                        prefetch_factor=2)
    # the clock starts once the workers are up (the first batch of epoch 0 is excluded): starting
    # two processes that import torch costs seconds of CPU that says nothing about the loader
    images = 0
    t0 = c0 = None
    workers = []
    for _ in range(EPOCHS):
        it = iter(loader)
        for data, _label in it:
            if t0 is None:
                workers = [w.pid for w in it._workers]
                c0 = _cpu() + sum(_proc_cpu(pid) for pid in workers)
                t0 = time.perf_counter()
                continue
            images += data.shape[0]
    seconds = time.perf_counter() - t0
    cpu = _cpu() + sum(_proc_cpu(pid) for pid in workers) - c0
    return {"images": images, "seconds": seconds, "cpu": cpu, "skipped": 0}


def _proc_cpu(pid: int) -> float:
    """CPU seconds used so far by a running process (Linux /proc), 0 where unavailable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class CropFlipNormalise:
    """Random 224 crop, random flip, (x - mean) / std on a uint8 CHW tensor (picklable)."""

    def __init__(self, mean, inv_std):
        self.mean, self.inv_std = mean, inv_std

    def __call__(self, img):
        import torch

        _, h, w = img.shape
        y = int(torch.randint(0, h - SHAPE[1] + 1, ()))
        x = int(torch.randint(0, w - SHAPE[2] + 1, ()))
        img = img[:, y:y + SHAPE[1], x:x + SHAPE[2]]
        if torch.rand(()) < 0.5:
            img = img.flip(2)
        return (img.float() - self.mean) * self.inv_std


def _run_mx(prefix: str, kind: str) -> dict:
    """recio.mx's ImageRecordIter ("mx-...") or the real MXNet's ("mxnet-..."), same arguments."""
    if kind.startswith("mxnet-"):
        import mxnet as mx
    else:
        import recio.mx as mx
    kw = dict(path_imgrec=prefix + ".rec", path_imgidx=prefix + ".idx", data_shape=SHAPE,
              batch_size=BATCH, preprocess_threads=2, mean_r=MEAN[0], mean_g=MEAN[1],
              mean_b=MEAN[2], std_r=STD[0], std_g=STD[1], std_b=STD[2],
              **MX_CONFIGS[kind.split("-", 1)[1]])
    c0 = _cpu()
    t0 = time.perf_counter()
    it = mx.io.ImageRecordIter(**kw)
    images = 0
    for epoch in range(EPOCHS):
        if epoch:
            it.reset()
        for batch in it:
            images += batch.data[0].shape[0] - batch.pad
    batch.data[0].asnumpy()  # MXNet computes lazily: wait for the last batch
    seconds = time.perf_counter() - t0
    return {"images": images, "seconds": seconds, "cpu": _cpu() - c0,
            "skipped": getattr(it, "num_skipped", 0)}


def child(prefix: str, kind: str) -> None:
    if kind.startswith("torch"):
        result = _run_torch(prefix, kind == "torch-ops")
    elif kind.startswith("mx"):
        result = _run_mx(prefix, kind)
    else:
        result = _run_imageiter(prefix, kind)
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["children_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(result))


# -- driver ------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=2000, help="images in the corpus")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--only", choices=sorted(TARGETS), action="append")
    ap.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                    help="a Python with MXNet 1.9.1, for the mxnet-* comparisons "
                         "(default $RECIO_MXNET_PYTHON)")
    ap.add_argument("--child", nargs=2, metavar=("PREFIX", "KIND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    os.makedirs(args.out, exist_ok=True)
    prefix = prepare(args.out, args.n)
    print(f"# {EPOCHS} epochs x {args.n} images, batch {BATCH}, {SHAPE}, rand_crop+mirror, "
          f"2 threads/workers, median of {args.runs} runs; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    kinds = args.only or ["float32", "uint8", "torch", "torch-ops", "mxnet-gluoncv",
                          "mx-gluoncv", "mxnet-val", "mx-val", "mx-float32"]
    failed = False
    measured = {}
    for kind in kinds:
        if kind.startswith("torch"):
            try:
                import torch  # noqa: F401 - whether it imports
            except ImportError:
                print("torch      skipped: PyTorch not installed (pip install 'recio[torch]')")
                continue
        python = sys.executable
        if kind.startswith("mxnet-"):
            if not args.mxnet_python:
                print(f"{kind} skipped: no MXNet 1.9.1 (pass --mxnet-python or set "
                      "RECIO_MXNET_PYTHON)")
                continue
            python = args.mxnet_python
        runs = []
        for _ in range(args.runs):
            out = subprocess.run([python, os.path.abspath(__file__), "--child", prefix,
                                  kind], capture_output=True,
                                 text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        rates = [r["images"] / r["seconds"] for r in runs]
        rate = statistics.median(rates)
        measured[kind] = rate
        cpu_ms = statistics.median(1000 * r["cpu"] / r["images"] for r in runs)
        rss = max(r["rss_mb"] for r in runs)
        worker_rss = max(r["children_rss_mb"] for r in runs)
        target = TARGETS[kind]
        if isinstance(target, str):  # the peer's measured rate
            target = measured.get(target)
            target = None if target is None else round(target)
        verdict = "" if target is None else ("OK" if rate >= target else "BELOW TARGET")
        label = {"float32": "ImageBatchIter float32 NCHW", "uint8": "ImageBatchIter uint8 NHWC",
                 "torch": "RecordDataset+ImageAugment, 2 workers",
                 "torch-ops": "RecordDataset+torch-op transform, 2 wk",
                 "mx-float32": "recio.mx ImageRecordIter, as float32",
                 "mx-gluoncv": "recio.mx ImageRecordIter, GluonCV train",
                 "mx-val": "recio.mx ImageRecordIter, GluonCV val",
                 "mxnet-gluoncv": "MXNet 1.9.1 ImageRecordIter, GluonCV train",
                 "mxnet-val": "MXNet 1.9.1 ImageRecordIter, GluonCV val"}[kind]
        tgt = (f"target >= {target:,}" if target else "no target") + (
            " = MXNet's" if isinstance(TARGETS[kind], str) else "")
        extra = f", largest worker {worker_rss:.0f} MB" if kind.startswith("torch") else ""
        print(f"{label:38s} {rate:7.0f} img/s ({tgt}) {verdict:12s} runs "
              f"{', '.join(f'{r:.0f}' for r in rates)}; peak RSS {rss:.0f} MB{extra} "
              f"(limit {RSS_LIMIT_MB})")
        # load-independent: CPU time per image, and what 2 idle cores would give at that cost
        print(f"{'':38s} CPU {cpu_ms:.2f} ms/image -> {2000 / cpu_ms:.0f} img/s on 2 idle cores")
        if rss >= RSS_LIMIT_MB:
            print(f"  peak RSS {rss:.0f} MB is over the {RSS_LIMIT_MB} MB limit")
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
