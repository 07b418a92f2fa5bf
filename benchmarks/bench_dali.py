"""Training reads against NVIDIA DALI on CPU: the same ``.rec``, cores and work, in one run.

The reader PyTorch users pick instead of MXNet's is DALI, which reads ``.rec`` files itself
(``fn.readers.mxnet``) and runs on CPU (``device_id=None``). This script runs DALI's CPU
pipelines and recio's readers side by side, each in a fresh process, taken in turn (run 1 of
every reader, then run 2, ...), on the benchmark corpus (``corpus.py``: 2,000 photos, packed at
shorter side 256 by ``bench_loader.prepare``; here with each record's number as its label, so
that delivery can be checked), batch 64, 2 threads or workers, 2 epochs, shuffled, output
3x224x224 CHW:

- ``crop``: a random 224x224 crop and a random mirror;
- ``rrc``: ImageNet's RandomResizedCrop (area 0.08-1, aspect 3/4-4/3, ten attempts, then
  224x224) and a random mirror;

each with ``float32`` output normalised by ImageNet's mean/std, and with ``uint8`` output (for
normalising on the GPU). Readers:

- ``dali-window``: DALI decoding only the crop window (``fn.decoders.image_crop``, or
  ``fn.decoders.image_random_crop`` + ``fn.resize``), then ``fn.crop_mirror_normalize``;
- ``dali-full``: ``fn.decoders.image`` then ``fn.crop_mirror_normalize`` with the crop (or
  ``fn.random_resized_crop`` first); DALI's resizes are antialiased by default, so ``rrc``
  also runs both with ``antialias=False`` (``dali-window-noaa``, ``dali-full-noaa``), which is
  the same work as recio's bilinear resize;
- ``iter``: ``recio.ImageBatchIter(preprocess_threads=2)``;
- ``torch``: ``recio.torch.RecordDataset(decode="raw", transform=ImageAugment(...))`` in a
  ``torch.utils.data.DataLoader(num_workers=2, persistent_workers=True)``, as the README shows.

Targets, against the best DALI pipeline of the same case: ``torch`` >= 1.0x, ``iter`` >= 1.2x.
Every run checks that each epoch delivers every record exactly once, and that every batch has
the documented shape, dtype and value range. The clock starts at the first batch (process and
worker start-up, DALI's pipeline build, are left out) and stops after the second epoch; CPU
time is that of every process and thread over the same span, and peak memory the sum of the
peak RSS of every process (shared memory counted in each process that maps it).

DALI runs in its own Python (``--dali-python``, default ``$RECIO_DALI_PYTHON``; ``pip install
nvidia-dali-cuda120``); without one the DALI rows say so and the targets are not judged. Run::

    RECIO_DALI_PYTHON=/path/to/dali/bin/python python benchmarks/bench_dali.py --runs 5

(``--case crop-float32`` etc. to run some cases, ``--only torch`` etc. for some readers.)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

BATCH, SIZE, EPOCHS, THREADS = 64, 224, 2, 2
MEAN = (123.68, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
AREA, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
CASES = ("crop-float32", "crop-uint8", "rrc-float32", "rrc-uint8")
DALI_READERS = ("dali-window", "dali-full", "dali-window-noaa", "dali-full-noaa")
READERS = DALI_READERS + ("iter", "torch")
#: recio's targets: at least this times the best DALI pipeline of the same case
TARGETS = {"iter": 1.2, "torch": 1.0}
#: the value range of a batch: normalised ImageNet pixels, or bytes
RANGES = {"float32": (min((0 - m) / s for m, s in zip(MEAN, STD)) - 1e-4,
                      max((255 - m) / s for m, s in zip(MEAN, STD)) + 1e-4),
          "uint8": (0, 255)}


def readers_for(case: str):
    noaa = case.startswith("rrc")  # antialias=False only matters where DALI resizes
    return [r for r in READERS if noaa or not r.endswith("-noaa")]


# -- data ----------------------------------------------------------------------------------------
def prepare(out_dir: str, n: int) -> str:
    """The benchmark ``.rec`` (``bench_loader.prepare``'s images) with each record's number as
    its label; returns the prefix."""
    import bench_loader

    source = bench_loader.prepare(out_dir, n)
    prefix = os.path.join(out_dir, f"numbered_{n}")
    if os.path.exists(prefix + ".done"):
        return prefix
    import recio

    reader = recio.IndexedRecordReader(source + ".rec", source + ".idx")
    with recio.IndexedRecordWriter(prefix + ".rec", prefix + ".idx") as w:
        for number, key in enumerate(reader.keys()):
            header, image = recio.unpack(reader[key])
            w.write(number, recio.pack(recio.IRHeader(0, float(number), number, 0), image))
    reader.close()
    with open(prefix + ".done", "w", encoding="utf-8") as f:
        f.write(f"{n} records of {source}.rec, label = record number\n")
    return prefix


# -- checks (every child) ------------------------------------------------------------------------
class Delivery:
    """Counts each epoch's labels (record numbers) and checks the batches' form."""

    def __init__(self, n: int, dtype: str) -> None:
        self.n, self.dtype = n, dtype
        self.epochs = []
        self.problems = []

    def start_epoch(self) -> None:
        self.epochs.append([])

    def batch(self, data, labels) -> None:
        """``data``: the batch as a NumPy array (N, 3, 224, 224); ``labels``: record numbers."""
        if data.dtype.name != self.dtype or data.shape[1:] != (3, SIZE, SIZE) \
                or not 0 < data.shape[0] <= BATCH:
            self.problems.append(f"batch {data.dtype}{list(data.shape)}, expected {self.dtype}"
                                 f"[<= {BATCH}, 3, {SIZE}, {SIZE}]")
        lo, hi = RANGES[self.dtype]
        if data.size and (float(data.min()) < lo or float(data.max()) > hi):
            self.problems.append(f"values {float(data.min()):.3f}..{float(data.max()):.3f} "
                                 f"outside {lo:.3f}..{hi:.3f}")
        self.epochs[-1].extend(int(v) for v in labels)

    def verdict(self) -> str:
        for e, got in enumerate(self.epochs):
            if len(got) != self.n or len(set(got)) != self.n or set(got) != set(range(self.n)):
                missing = self.n - len(set(got) & set(range(self.n)))
                self.problems.append(f"epoch {e}: {len(got)} records, {len(set(got))} distinct, "
                                     f"{missing} missing")
        if len(self.epochs) != EPOCHS:
            self.problems.append(f"{len(self.epochs)} epochs, expected {EPOCHS}")
        return "; ".join(dict.fromkeys(self.problems)) or "ok"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _proc(pid: int):
    """(CPU seconds, peak RSS in MB) of a running process (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        return cpu, hwm / 1024
    except (OSError, ValueError, IndexError, StopIteration):
        return 0.0, 0.0


class Clock:
    """Wall and CPU time from the first batch on (``workers``: other processes to count)."""

    def __init__(self) -> None:
        self.t0 = self.c0 = None
        self.workers = []
        self.images = 0

    def tick(self, images: int, workers=()) -> None:
        if self.t0 is None:
            self.workers = list(workers)
            self.c0 = _cpu() + sum(_proc(p)[0] for p in self.workers)
            self.t0 = time.perf_counter()
        else:
            self.images += images

    def result(self, delivery: Delivery) -> dict:
        seconds = time.perf_counter() - self.t0
        procs = [_proc(p) for p in self.workers]
        cpu = _cpu() + sum(c for c, _ in procs) - self.c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 + sum(m for _, m in procs)
        return {"images": self.images, "seconds": seconds, "cpu": cpu, "rss_mb": rss,
                "check": delivery.verdict()}


# -- the readers (each runs in a child process) ---------------------------------------------------
def run_dali(prefix: str, case: str, reader: str) -> dict:
    import numpy as np
    from nvidia.dali import fn, pipeline_def, types

    kind, dtype = case.split("-")
    window, antialias = reader.startswith("dali-window"), not reader.endswith("-noaa")
    n = _count(prefix)
    norm = dict(dtype=types.FLOAT, mean=list(MEAN), std=list(STD)) if dtype == "float32" \
        else dict(dtype=types.UINT8)

    @pipeline_def(batch_size=BATCH, num_threads=THREADS, device_id=None, seed=1,
                  prefetch_queue_depth=2)
    def pipeline():
        jpegs, labels = fn.readers.mxnet(path=[prefix + ".rec"], index_path=[prefix + ".idx"],
                                         random_shuffle=True, pad_last_batch=True,
                                         name="Reader")
        mirror = fn.random.coin_flip()
        if kind == "crop":
            pos = dict(crop_pos_x=fn.random.uniform(range=(0, 1)),
                       crop_pos_y=fn.random.uniform(range=(0, 1)))
            if window:
                images = fn.decoders.image_crop(jpegs, device="cpu", output_type=types.RGB,
                                                crop=(SIZE, SIZE), **pos)
                out = fn.crop_mirror_normalize(images, output_layout="CHW", mirror=mirror, **norm)
            else:
                images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
                out = fn.crop_mirror_normalize(images, crop=(SIZE, SIZE), output_layout="CHW",
                                               mirror=mirror, **pos, **norm)
        else:
            box = dict(random_area=list(AREA), random_aspect_ratio=list(RATIO), num_attempts=10)
            if window:
                images = fn.decoders.image_random_crop(jpegs, device="cpu",
                                                       output_type=types.RGB, **box)
                images = fn.resize(images, resize_x=SIZE, resize_y=SIZE, antialias=antialias)
            else:
                images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
                images = fn.random_resized_crop(images, size=(SIZE, SIZE), antialias=antialias,
                                                **box)
            out = fn.crop_mirror_normalize(images, output_layout="CHW", mirror=mirror, **norm)
        return out, labels

    pipe = pipeline()
    pipe.build()
    delivery, clock = Delivery(n, dtype), Clock()
    for _ in range(EPOCHS):
        delivery.start_epoch()
        left = n
        while left > 0:  # pad_last_batch: the epoch's last batch is padded, the next starts anew
            out, labels = pipe.run()
            data = out.as_array()
            real = min(left, len(data))
            delivery.batch(data[:real], np.asarray(labels.as_array()).reshape(len(data), -1)
                           [:real, 0])
            clock.tick(real)
            left -= real
    return clock.result(delivery)


def run_iter(prefix: str, case: str) -> dict:
    import recio

    kind, dtype = case.split("-")
    kw = dict(path_imgrec=prefix + ".rec", path_imgidx=prefix + ".idx",
              data_shape=(3, SIZE, SIZE), batch_size=BATCH, shuffle=True, rand_mirror=True,
              preprocess_threads=THREADS)
    if kind == "crop":
        kw.update(rand_crop=True)
    else:
        kw.update(random_resized_crop=True, min_random_area=AREA[0], max_random_area=AREA[1],
                  min_aspect_ratio=RATIO[0], max_aspect_ratio=RATIO[1])
    if dtype == "float32":
        kw.update(mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2], std_r=STD[0], std_g=STD[1],
                  std_b=STD[2])
    else:
        kw.update(dtype="uint8")
    delivery, clock = Delivery(_count(prefix), dtype), Clock()
    with recio.ImageBatchIter(**kw) as it:
        for epoch in range(EPOCHS):
            if epoch:
                it.reset()
            delivery.start_epoch()
            for batch in it:
                real = len(batch.data) - batch.pad
                delivery.batch(batch.data[:real], batch.label[:real, 0])
                clock.tick(real)
    return clock.result(delivery)


def run_torch(prefix: str, case: str) -> dict:
    import torch
    from torch.utils.data import DataLoader

    from recio.torch import ImageAugment, RecordDataset

    kind, dtype = case.split("-")
    kw = dict(mean=MEAN, std=STD) if dtype == "float32" else dict(dtype="uint8")
    if kind == "crop":
        kw.update(rand_crop=True)
    else:
        kw.update(random_resized_crop=True, area=AREA, ratio=RATIO)
    augment = ImageAugment((3, SIZE, SIZE), rand_mirror=True, **kw)
    ds = RecordDataset(prefix + ".rec", prefix + ".idx", decode="raw", transform=augment)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=THREADS,
                        persistent_workers=True)
    torch.set_num_threads(1)
    delivery, clock = Delivery(len(ds), dtype), Clock()
    for _ in range(EPOCHS):
        delivery.start_epoch()
        it = iter(loader)
        for images, labels in it:
            delivery.batch(images.numpy(), labels.numpy())
            clock.tick(len(images), [w.pid for w in it._workers])
    return clock.result(delivery)


def _count(prefix: str) -> int:
    with open(prefix + ".idx", encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def child(prefix: str, case: str, reader: str) -> None:
    if reader.startswith("dali"):
        result = run_dali(prefix, case, reader)
    elif reader == "iter":
        result = run_iter(prefix, case)
    else:
        result = run_torch(prefix, case)
    print(json.dumps(result))


# -- driver --------------------------------------------------------------------------------------
LABELS = {"dali-window": "DALI CPU, decodes the crop window only",
          "dali-full": "DALI CPU, decode then crop",
          "dali-window-noaa": "DALI CPU, crop window, no antialias",
          "dali-full-noaa": "DALI CPU, decode then crop, no antialias",
          "iter": "recio.ImageBatchIter(preprocess_threads=2)",
          "torch": "recio.torch RecordDataset + DataLoader(2)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each reader (median quoted)")
    ap.add_argument("--n", type=int, default=2000, help="images in the corpus")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--case", choices=CASES, action="append", help="cases to run (all)")
    ap.add_argument("--only", choices=READERS, action="append", help="readers to run (all)")
    ap.add_argument("--dali-python", default=os.environ.get("RECIO_DALI_PYTHON"),
                    help="a Python with nvidia-dali (default $RECIO_DALI_PYTHON)")
    ap.add_argument("--child", nargs=3, metavar=("PREFIX", "CASE", "READER"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    os.makedirs(args.out, exist_ok=True)
    prefix = prepare(args.out, args.n)
    cases = args.case or list(CASES)
    wanted = args.only or list(READERS)
    dali = args.dali_python
    if dali is None:
        print("# DALI: not run (set RECIO_DALI_PYTHON or pass --dali-python: a Python with "
              "pip install nvidia-dali-cuda120); recio's targets are not judged")
    print(f"# {EPOCHS} epochs x {args.n} images, batch {BATCH}, 3x{SIZE}x{SIZE} CHW, "
          f"{THREADS} threads/workers, shuffled; {args.runs} runs each, taken in turn, median; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    plan = [(case, r) for case in cases for r in readers_for(case) if r in wanted
            and (dali is not None or not r.startswith("dali"))]
    results = {key: [] for key in plan}
    failed = False
    for run in range(args.runs):
        for case, reader in plan:
            python = dali if reader.startswith("dali") else sys.executable
            out = subprocess.run([python, os.path.abspath(__file__), "--child", prefix, case,
                                  reader], capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{case} {reader}: run {run + 1} failed:\n{out.stderr[-2000:]}")
                failed = True
                continue
            results[(case, reader)].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for case in cases:
        rows = [(r, results[(case, r)]) for r in readers_for(case)
                if (case, r) in results and results[(case, r)]]
        rate = {r: statistics.median(x["images"] / x["seconds"] for x in runs)
                for r, runs in rows}
        cpu = {r: statistics.median(1000 * x["cpu"] / x["images"] for x in runs)
               for r, runs in rows}
        dali_rows = [r for r in rate if r.startswith("dali")]
        best = max(dali_rows, key=rate.get) if dali_rows else None
        best_cpu = min((cpu[r] for r in dali_rows), default=None)
        print(f"\n## {case}" + (f" (DALI's best: {LABELS[best]})" if best else ""))
        print(f"{'reader':44s} {'images/s':>9s} {'vs DALI':>8s} {'CPU ms/img':>10s} "
              f"{'vs DALI':>8s} {'peak MB':>8s}  target / check; runs")
        for r, runs in rows:
            vs = f"{rate[r] / rate[best]:.2f}x" if best else "-"
            vs_cpu = f"{best_cpu / cpu[r]:.2f}x" if best_cpu else "-"
            target = TARGETS.get(r)
            verdict = ""
            if target is not None and best:
                verdict = (f">= {target:.1f}x " + ("OK" if rate[r] >= target * rate[best]
                                                   else "BELOW TARGET"))
            checks = sorted({x["check"] for x in runs})
            if checks != ["ok"]:
                failed = True
            rss = max(x["rss_mb"] for x in runs)
            each = ", ".join(f"{x['images'] / x['seconds']:.0f}" for x in runs)
            print(f"{LABELS[r]:44s} {rate[r]:9.0f} {vs:>8s} {cpu[r]:10.2f} {vs_cpu:>8s} "
                  f"{rss:8.0f}  {verdict} delivery {'/'.join(checks)}; {each}")
    print("\n(vs DALI: images/s over DALI's best pipeline of the case; the CPU column: DALI's "
          "lowest CPU per image over this reader's, the load-independent comparison)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
