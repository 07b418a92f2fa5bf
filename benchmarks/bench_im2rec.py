"""Benchmark ``im2rec`` packing against MXNet's own ``tools/im2rec.py``: speed on the same list
and cores, byte identity, the fast mode's PSNR, peak memory, CPU per stage.

Corpus: ``benchmarks/corpus.py`` (2,000 photo-like images cut from skimage.data photographs,
10 class folders, ~85% with the long side 400-640 px, ~15% 1200-2400 px, a few PNG). Every pack
is ``PREFIX ROOT --resize 256 --quality 95 --num-thread 2`` of one ``.lst`` (the installed
console script, as a user runs it; a fresh output each run, the page cache warm):

- **recio, default** (``--resize-mode mxnet``): MXNet's bytes (target: >= 1.5x MXNet, and the
  ``.rec`` and ``.idx`` byte for byte MXNet's);
- **recio, fast mode** (``--resize-mode antialias``: DCT-scaled decode, area and bicubic
  resize): target >= 1.8x MXNet, its PSNR against MXNet's own output printed beside it;
- **MXNet 1.9.1's tools/im2rec.py** as it ships (``--mxnet-python`` or ``RECIO_MXNET_PYTHON``:
  a Python with MXNet 1.9.1 and the OpenCV its im2rec.py imports), on a copy of the same list.

The three are run in turn ``--repeats`` times and the medians compared. Also: CPU milliseconds
per image by stage in one thread (independent of the machine's load), whether two threads
scale, and each mode's resize quality (PSNR against an exact float Lanczos downscale).

Benchmark-only requirements: ``pip install -r benchmarks/requirements.txt``.
Usage: ``python benchmarks/bench_im2rec.py [--n 2000] [--repeats 5] [--quality-sample 150]
[--mxnet-python PATH]``.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_im2rec_io import mxnet_im2rec, real_script  # noqa: E402 - after the sys.path line
from corpus import make_corpus  # noqa: E402 - after the sys.path line

SIDE, QUALITY, THREADS = 256, 95, 2
#: speed against MXNet's im2rec.py (same run), and peak memory of the whole process tree
TARGETS = {"recio, default": 1.5, "recio, fast mode": 1.8}
MEMORY_TARGET_MB = 300.0
#: im2rec's arguments of each recio configuration
MODES = {"recio, default": [], "recio, fast mode": ["--resize-mode", "antialias"]}


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc), in KiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def run_measured(cmd: List[str], env: Optional[Dict[str, str]] = None
                 ) -> Tuple[float, float, str]:
    """Run a pack command: (seconds, peak RSS MiB of the whole process tree, its stderr);
    SystemExit with its error if it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[-800:]}")
    return seconds, peak[0] / 1024, err.strip()


def pack_once(cmd: List[str], prefix: str) -> Tuple[float, float]:
    """One pack into ``prefix`` (its old outputs removed first): (seconds, peak RSS MiB)."""
    for suffix in (".rec", ".idx", ".errors.tsv", ".rec.partial", ".pack.journal"):
        if os.path.exists(prefix + suffix):
            os.unlink(prefix + suffix)
    seconds, peak, _ = run_measured(cmd)
    return seconds, peak


def records(prefix: str) -> int:
    with open(prefix + ".idx") as f:
        return sum(1 for _ in f)


def psnr(a, b) -> float:
    import numpy as np

    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0 ** 2 / max(mse, 1e-12)))


def psnr_against(prefix: str, reference: str) -> Tuple[float, float]:
    """Mean and lowest PSNR (dB) of each record's image in ``prefix.rec`` against the same
    key's in ``reference.rec``."""
    import recio

    scores = []
    with recio.IndexedRecordReader(prefix + ".rec") as ours, \
            recio.IndexedRecordReader(reference + ".rec") as theirs:
        for key in theirs.keys():
            a = recio.unpack_img(ours[key])[1]
            b = recio.unpack_img(theirs[key])[1]
            scores.append(psnr(a, b))
    return statistics.mean(scores), min(scores)


def stage_costs(paths: List[str], mode: str, sample: int = 300) -> Dict[str, float]:
    """CPU ms per image in one thread for each stage of ``mode`` ("mxnet" or "antialias"):
    reading the file, decode + crop + resize (``render_pixels``), decode alone, encode."""
    from recio.image.pixels.codec import decode_scaled
    from recio.image.pixels.encoding import encode
    from recio.image.pixels.transform import ImageOptions, render_pixels

    options = ImageOptions(resize=SIDE, quality=QUALITY, resize_mode=mode)
    chosen = paths[::max(1, len(paths) // sample)][:sample]
    spent = {"read": 0.0, "decode": 0.0, "decode+resize": 0.0, "encode": 0.0}
    for path in chosen:
        start = time.process_time()
        with open(path, "rb") as f:
            data = f.read()
        spent["read"] += time.process_time() - start
        start = time.process_time()
        decode_scaled(data, 1, min_side=SIDE if mode == "antialias" else 0,
                      exif_transpose=True)
        spent["decode"] += time.process_time() - start
        start = time.process_time()
        pixels = render_pixels(data, options)
        spent["decode+resize"] += time.process_time() - start
        start = time.process_time()
        encode(pixels, ".jpg", QUALITY)
        spent["encode"] += time.process_time() - start
    return {k: 1000 * v / len(chosen) for k, v in spent.items()}


def thread_speedup(paths: List[str], mode: str, sample: int = 200) -> float:
    """Wall-clock speed-up of 2 threads over 1 on the same images (2.0: OpenCV releases the
    GIL all the time; a loaded machine lowers it too)."""
    from recio.image.pixels.transform import ImageOptions, transform_image

    options = ImageOptions(resize=SIDE, quality=QUALITY, resize_mode=mode)
    datas = []
    for path in paths[::max(1, len(paths) // sample)][:sample]:
        with open(path, "rb") as f:
            datas.append(f.read())

    def work(part: List[bytes]) -> None:
        for data in part:
            transform_image(data, options)

    start = time.perf_counter()
    work(datas)
    one = time.perf_counter() - start
    threads = [threading.Thread(target=work, args=(datas[i::2],)) for i in range(2)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return one / (time.perf_counter() - start)


def resize_quality(paths: List[str], sample: int) -> Dict[str, Tuple[float, float]]:
    """Mean and lowest PSNR (dB) of each mode against an exact float Lanczos downscale."""
    import numpy as np
    from PIL import Image

    from recio.image.pixels.transform import ImageOptions, render_pixels, target_size

    scores: Dict[str, List[float]] = {}
    for path in paths[::max(1, len(paths) // sample)][:sample]:
        with open(path, "rb") as f:
            data = f.read()
        src = Image.open(io.BytesIO(data)).convert("RGB")
        size = target_size(src.width, src.height, SIDE)
        ref = np.clip(np.stack([np.asarray(band.convert("F").resize(size, Image.LANCZOS))
                                for band in src.split()], axis=-1), 0, 255)
        for name, mode in (("default (OpenCV bilinear, MXNet's)", "mxnet"),
                           ("fast mode (DCT scale, area + bicubic)", "antialias")):
            ours = render_pixels(data, ImageOptions(resize=SIDE, resize_mode=mode))
            scores.setdefault(name, []).append(psnr(ours, ref))
    return {k: (statistics.mean(v), min(v)) for k, v in scores.items()}


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # figures appear as they are measured
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="corpus size")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each configuration")
    parser.add_argument("--quality-sample", type=int, default=150, help="images for PSNR")
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                        help="a Python with MXNet 1.9.1: its tools/im2rec.py packs too")
    parser.add_argument("--out", default=os.path.join(HERE, "out", "im2rec"))
    args = parser.parse_args()

    import cv2

    os.makedirs(args.out, exist_ok=True)
    root = os.path.join(args.out, "corpus")
    paths = make_corpus(root, n=args.n)
    print(f"corpus: {len(paths)} images in {root}, "
          f"{sum(os.path.getsize(p) for p in paths) / 2**20:.0f} MiB; OpenCV {cv2.__version__}")
    im2rec = real_script("im2rec")
    prefix = os.path.join(args.out, "bench")
    subprocess.run([im2rec, prefix, root, "--list", "--recursive", "--quiet", "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    for path in paths:  # warm the page cache
        with open(path, "rb") as f:
            f.read()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")

    # every configuration packs its own copy of the list (its PREFIX must not match another's)
    configs: List[Tuple[str, List[str], str]] = []
    for name, extra in MODES.items():
        own = os.path.join(args.out, name.split(", ")[1].replace(" ", "_"))
        shutil.copy(prefix + ".lst", own + ".lst")
        configs.append((name, [im2rec, own, root, "--resize", str(SIDE), "--quality",
                               str(QUALITY), "--num-thread", str(THREADS), "--quiet",
                               *extra], own))
    mxnet = mxnet_im2rec(args.mxnet_python)
    if mxnet:
        own = os.path.join(args.out, "mxnet")
        shutil.copy(prefix + ".lst", own + ".lst")
        configs.append(("MXNet im2rec.py", [*mxnet, own, root, "--resize", str(SIDE),
                                            "--quality", str(QUALITY), "--num-thread",
                                            str(THREADS)], own))
    else:
        print("MXNet im2rec.py: not measured (pass --mxnet-python or set RECIO_MXNET_PYTHON "
              "to a Python with MXNet 1.9.1)")

    print(f"\n== PREFIX ROOT --resize {SIDE} --quality {QUALITY} --num-thread {THREADS}, the "
          f"whole command, median of {args.repeats} (the configurations taken in turn)")
    runs: Dict[str, List[Tuple[float, float]]] = {name: [] for name, _, _ in configs}
    for _ in range(args.repeats):
        for name, cmd, own in configs:
            seconds, peak = pack_once(cmd, own)
            runs[name].append((records(own) / seconds, peak))
    rates = {name: statistics.median(r[0] for r in found) for name, found in runs.items()}
    mx_rate = rates.get("MXNet im2rec.py")
    for name, cmd, own in configs:
        rate, peak = rates[name], max(r[1] for r in runs[name])
        line = (f"{name:18s} {rate:7.0f} images/s (runs "
                f"{', '.join(f'{r[0]:.0f}' for r in runs[name])}); peak RSS {peak:4.0f} MiB")
        if name != "MXNet im2rec.py":
            line += f" (target < {MEMORY_TARGET_MB:.0f}: " \
                    f"{'OK' if peak < MEMORY_TARGET_MB else 'MISSED'})"
        if mx_rate and name in TARGETS:
            ratio = rate / mx_rate
            line += (f"\n{'':18s} = {ratio:.2f}x MXNet (target >= {TARGETS[name]:.1f}x: "
                     f"{'OK' if ratio >= TARGETS[name] else 'MISSED'})")
        print(line)
    if mxnet:
        mx_prefix = configs[-1][2]
        default = configs[0][2]
        same = all(open(default + s, "rb").read() == open(mx_prefix + s, "rb").read()
                   for s in (".rec", ".idx"))
        print(f"default mode's .rec and .idx byte for byte MXNet's: {'yes' if same else 'NO'} "
              f"({records(default)} records)")
        mean, low = psnr_against(configs[1][2], mx_prefix)
        print(f"fast mode against MXNet's output: PSNR mean {mean:.2f} dB, lowest {low:.2f} dB")

    print("\n== CPU ms per image, one thread (independent of the machine's load)")
    for name, mode in (("default", "mxnet"), ("fast mode", "antialias")):
        costs = stage_costs(paths, mode)
        print(f"{name:10s} " + ", ".join(f"{k} {v:.2f}" for k, v in costs.items())
              + f" -> decode+resize+encode {costs['decode+resize'] + costs['encode']:.2f}")
    print("\n== 2 threads vs 1, in one process (does OpenCV release the GIL?)")
    for name, mode in (("default", "mxnet"), ("fast mode", "antialias")):
        print(f"{name:10s} {thread_speedup(paths, mode):.2f}x wall-clock speed-up "
              f"(load average {os.getloadavg()[0]:.2f})")
    print(f"\n== resize quality: PSNR against an exact float Lanczos downscale, "
          f"{args.quality_sample} images (higher is better)")
    for name, (mean, low) in resize_quality(paths, args.quality_sample).items():
        print(f"{name:40s} mean {mean:6.2f} dB  (lowest {low:5.2f})")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
