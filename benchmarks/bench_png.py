"""PNG in recio: decoding PNGs (readers, im2rec from PNG sources) and ``im2rec --encoding .png``.

Corpus: ``--n`` large photo-like PNGs (default 40) cut from the same skimage photographs as
``corpus.py``, long side 1200-2400 px, zlib level 6 (what most tools write), about 2 MB each.

Decode: every PNG decoded by ``recio.image.pixels.codec.decode`` (the one decoder behind
``unpack_img``, ``recio.mx``, ``ImageBatchIter``, the torch datasets and im2rec) for the colour
flags 1, 0 and -1, beside the bare ``cv2.imdecode`` of the same bytes (the ceiling: zlib
itself) and, where it runs, the peer MXNet 1.9.1 (``mx.image.imdecode`` in ``--mxnet-python``,
default ``$RECIO_MXNET_PYTHON``). Target: recio within 10% of the bare ``cv2.imdecode`` in CPU
per image (what recio adds: the header's size check, the colour order). Also two threads at
once (the loaders decode in threads).

Encode: ``im2rec PREFIX ROOT --encoding .png --num-thread 2`` (the installed console script)
with ``--resize 256`` and at full size, at ``--quality 1``, ``6`` and the default ``95``,
which means PNG level 9: images/s and bytes written (``--encode-n`` of the PNGs), so
``im2rec --help`` can say what the default costs. No target: the figures are for the help.

Medians of ``--repeats`` runs, with the CPU time per image (steady on a loaded machine).
Benchmark-only requirements: ``pip install -r benchmarks/requirements.txt``.
Usage: ``python benchmarks/bench_png.py [--n 40] [--repeats 3] [--encode-n 8]``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

#: recio's decode must reach this share of the bare cv2.imdecode rate
AUTO_SHARE_TARGET = 0.9


def make_pngs(out_dir: str, n: int, seed: int = 0) -> List[str]:
    """``n`` large PNGs in ``out_dir/pngs/`` (reused when already there)."""
    from PIL import Image

    from corpus import _load_sources

    folder = os.path.join(out_dir, "pngs")
    marker = os.path.join(folder, "done.json")
    paths = [os.path.join(folder, f"img_{i:03d}.png") for i in range(n)]
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            if json.load(f) == {"n": n, "seed": seed}:
                return paths
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    sources = _load_sources()[:7]  # the colour photographs
    for path in paths:
        src = sources[rng.randrange(len(sources))]
        long_side = rng.randint(1200, 2400)
        short_side = int(long_side * rng.uniform(0.56, 0.9))
        size = (long_side, short_side) if rng.random() < 0.7 else (short_side, long_side)
        sw, sh = src.size
        scale = min(sw / size[0], sh / size[1]) * rng.uniform(0.45, 1.0)
        cw, ch = max(8, int(size[0] * scale)), max(8, int(size[1] * scale))
        left, top = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
        img = src.convert("RGB").resize(size, Image.BICUBIC,
                                        box=(left, top, left + cw, top + ch))
        img.save(path, "PNG", compress_level=6)
    with open(marker, "w", encoding="utf-8") as f:
        json.dump({"n": n, "seed": seed}, f)
    return paths


def rate(run: Callable[[], None], count: int, repeats: int) -> Tuple[List[float], float]:
    """Items per second of ``run`` (which handles ``count`` items), once per repeat, and the
    median CPU milliseconds per item (all threads of this process: steady under load)."""
    out, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        out.append(count / (time.perf_counter() - start))
        cpu.append((time.process_time() - start_cpu) * 1000 / count)
    return out, statistics.median(cpu)


def _line(name: str, measured: Tuple[List[float], Optional[float]], extra: str = "") -> float:
    runs, cpu_ms = measured
    median = statistics.median(runs)
    cpu = f", {cpu_ms:6.1f} CPU ms/image" if cpu_ms is not None else ""
    print(f"  {name:36s} {median:6.1f} images/s{cpu} (runs: "
          f"{', '.join(f'{r:.1f}' for r in runs)}){extra}")
    return median


def bench_decode(blobs: List[bytes], repeats: int, mxnet_python: Optional[str],
                 paths: List[str]) -> None:
    import cv2
    import numpy as np

    from recio.image.pixels.codec import decode

    mb = sum(len(b) for b in blobs) / 2**20
    print(f"\n== decode {len(blobs)} PNGs ({mb:.0f} MiB), one thread, median of {repeats}")
    for color, what in {1: "colour", 0: "grey", -1: "as stored"}.items():
        print(f"colour flag {color} ({what}):")
        ours = rate(lambda: [decode(b, color) for b in blobs], len(blobs), repeats)
        _line("recio decode", ours)
        flag = {1: cv2.IMREAD_COLOR, 0: cv2.IMREAD_GRAYSCALE, -1: cv2.IMREAD_UNCHANGED}[color]
        bare = rate(lambda: [cv2.imdecode(np.frombuffer(b, np.uint8), flag) for b in blobs],
                    len(blobs), repeats)
        _line("bare cv2.imdecode (the ceiling)", bare)
        print(f"  CPU per image: bare cv2 / recio = {bare[1] / ours[1]:.2f} "
              f"(target >= {AUTO_SHARE_TARGET})")
    print("colour flag 1, two threads decoding at once:")
    with ThreadPoolExecutor(2) as pool:
        _line("recio decode", rate(lambda: list(pool.map(lambda b: decode(b, 1), blobs)),
                                   len(blobs), repeats))
    _mxnet_peer(mxnet_python, paths, repeats)


def _mxnet_peer(python: Optional[str], paths: List[str], repeats: int) -> None:
    """MXNet 1.9.1's ``mx.image.imdecode`` (its own OpenCV) on the same files, in its venv."""
    if not python or not os.path.exists(python):
        print("  MXNet peer: not run (pass --mxnet-python or set RECIO_MXNET_PYTHON)")
        return
    code = (
        "import sys, time, json, statistics\n"
        "import mxnet as mx\n"
        "blobs = [open(p, 'rb').read() for p in json.loads(sys.argv[1])]\n"
        "runs = []\n"
        f"for _ in range({repeats}):\n"
        "    t = time.perf_counter()\n"
        "    for b in blobs: mx.image.imdecode(b, 1).wait_to_read()\n"
        "    runs.append(len(blobs) / (time.perf_counter() - t))\n"
        "print(json.dumps(runs))\n")
    proc = subprocess.run([python, "-c", code, json.dumps(paths)], capture_output=True,
                          text=True, timeout=1800, env={**os.environ, "OMP_NUM_THREADS": "1",
                                                        "MXNET_CPU_WORKER_NTHREADS": "1"})
    if proc.returncode != 0:
        print(f"  MXNet peer failed: {proc.stderr.strip().splitlines()[-1:]}")
        return
    _line("MXNet 1.9.1 mx.image.imdecode, flag 1", (json.loads(proc.stdout), None))


def bench_encode(paths: List[str], out_dir: str, repeats: int) -> None:
    im2rec = shutil.which("im2rec")
    if im2rec is None:
        print("\nim2rec is not on PATH (pip install -e .): encode benchmark skipped")
        return
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        root = os.path.join(tmp, "img")
        os.mkdir(root)
        for path in paths:
            os.link(path, os.path.join(root, os.path.basename(path)))
        prefix = os.path.join(tmp, "p")
        subprocess.run([im2rec, prefix, root, "--list", "-q"], check=True,
                       stdout=subprocess.DEVNULL)
        for resize in ("256", "0"):
            print(f"\n== im2rec --encoding .png --resize {resize} --num-thread 2, "
                  f"{len(paths)} PNG sources, median of {repeats}")
            for quality, meaning in ((1, "level 1"), (6, "level 6"),
                                     (95, "level 9, the default")):
                runs, size = [], 0
                for _ in range(repeats):
                    start = time.perf_counter()
                    subprocess.run([im2rec, prefix, root, "--encoding", ".png", "--resize",
                                    resize, "--quality", str(quality), "--num-thread", "2",
                                    "--force", "-q"], check=True, stdout=subprocess.DEVNULL)
                    runs.append(len(paths) / (time.perf_counter() - start))
                    size = os.path.getsize(prefix + ".rec")
                _line(f"--quality {quality} ({meaning})", (runs, None),
                      f"  {size / 2**20:7.2f} MiB")


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="PNGs in the corpus")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration")
    parser.add_argument("--out", default=os.path.join(HERE, "out", "png"))
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                        help="a Python with mxnet 1.9.1, for the peer's decode rate (default "
                             "$RECIO_MXNET_PYTHON)")
    parser.add_argument("--encode-n", type=int, default=8,
                        help="PNGs packed by the encode benchmark (level 9 takes seconds each)")
    parser.add_argument("--skip-encode", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    paths = make_pngs(args.out, args.n)
    blobs = []
    for path in paths:
        with open(path, "rb") as f:
            blobs.append(f.read())
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    bench_decode(blobs, args.repeats, args.mxnet_python, paths)
    if not args.skip_encode:
        bench_encode(paths[:args.encode_n], args.out, args.repeats)


if __name__ == "__main__":
    main()
