"""The ruler for im2rec's speed: the fastest decode -> resize -> encode this machine can do,
beside ``im2rec``'s own images/s as a fraction of it (and MXNet's ``im2rec.py``'s, in the same
run, with ``--mxnet-python``).

Corpus and options are ``bench_im2rec.py``'s: ``benchmarks/corpus.py`` (2,000 photo-like
images, ~15% of them 1200-2400 px, ~3% PNG), ``--resize 256 --quality 95``, every core.

**The limit.** Each candidate pipeline reads a file and makes the same 256 px JPEG with three
C calls and no Python work between them (decode -> resize -> encode), on every core, in threads
and in processes; the limit is the fastest of all. Candidates:

- the issue's reference: simplejpeg DCT-scaled decode (libjpeg-turbo picks the smallest scale
  that still covers the target), ``cv2.resize(INTER_AREA)``, simplejpeg encode; the same with
  ``INTER_LINEAR`` and ``INTER_CUBIC``;
- OpenCV alone: ``cv2.imdecode`` at a reduced DCT scale (``IMREAD_REDUCED_*``), ``INTER_AREA``,
  ``cv2.imencode``;
- MXNet's own calls without its Python: ``cv2.imdecode`` at full size, ``INTER_LINEAR``,
  ``cv2.imencode`` (the default mode's work: MXNet's bytes);
- Pillow alone: ``draft()`` (the DCT scale), ``resize(BICUBIC)``, ``save``.

PNG files are decoded by ``cv2.imdecode``. Every encode is JPEG quality 95 with 4:2:0 chroma,
what MXNet's OpenCV and im2rec write. ``--quality-sample`` also prints each candidate's PSNR
against an exact float Lanczos downscale of the source (as ``bench_im2rec.py``), so a fast but
blurry or shifted pipeline shows as such.

**im2rec.** The installed console script packs the same corpus, as a user runs it
(``--num-thread`` = cores, a fresh output each run, the page cache warm), in both modes:
**default** (MXNet's bytes; target >= 0.9 of the limit) and **fast** (``--resize-mode
antialias``); ``--im2rec NAME=PATH`` adds the ``im2rec`` of another virtualenv, and
``--mxnet-python`` MXNet's own ``tools/im2rec.py``. Each figure is the median of ``--repeats``
runs, the configurations taken in turn; peak RSS is the whole process tree's. ``--scaling``
adds ``--num-thread 1, 2, cores`` for every configuration.

Benchmark-only requirements: ``pip install -r benchmarks/requirements.txt``.
Usage: ``python benchmarks/bench_pack_limit.py [--n 2000] [--repeats 5] [--scaling]
[--mxnet-python PATH]``.
"""
from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_im2rec import pack_once, records  # noqa: E402 - after the sys.path line
from bench_im2rec_io import mxnet_im2rec, real_script  # noqa: E402 - after the sys.path line
from corpus import make_corpus  # noqa: E402 - after the sys.path line

SIDE = 256
QUALITY = 95
#: fractions of the limit the default mode must reach
TARGETS = {"im2rec default": 0.90}
MEMORY_TARGET_MB = 300.0


# -- the candidate pipelines --------------------------------------------------------------------
def _target(width: int, height: int) -> Tuple[int, int]:
    """im2rec's output size: shorter side SIDE, longer ``long * SIDE // short``."""
    return (SIDE, height * SIDE // width) if height > width else (width * SIDE // height, SIDE)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _decode_rgb_any(data: bytes):
    """Full-size RGB for a non-JPEG file (OpenCV)."""
    import cv2
    import numpy as np

    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)


def _sj_decode_scaled(data: bytes):
    """simplejpeg's DCT-scaled decode to at least the target size (any libjpeg-turbo scale)."""
    import simplejpeg

    if data[:3] != b"\xff\xd8\xff":
        return _decode_rgb_any(data)
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    short = min(width, height)
    return simplejpeg.decode_jpeg(data, "RGB", min_width=-(-width * SIDE // short),
                                  min_height=-(-height * SIDE // short))


def _sj_encode(array) -> bytes:
    import simplejpeg

    return simplejpeg.encode_jpeg(array, QUALITY, "RGB", "420")


def _orig_size(data: bytes, array) -> Tuple[int, int]:
    """The source's own (width, height): the JPEG header's, else the decoded array's."""
    if data[:3] == b"\xff\xd8\xff":
        import simplejpeg

        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        return width, height
    return array.shape[1], array.shape[0]


class _SjCv2:
    """simplejpeg DCT-scaled decode, ``cv2.resize(interpolation)``, simplejpeg encode."""

    def __init__(self, interpolation: str) -> None:
        self.interpolation = interpolation

    def __call__(self, path: str) -> bytes:
        import cv2

        data = _read(path)
        array = _sj_decode_scaled(data)
        return _sj_encode(cv2.resize(array, _target(*_orig_size(data, array)),
                                     interpolation=getattr(cv2, self.interpolation)))


def _cv2_reduced(path: str) -> bytes:
    """OpenCV alone: the largest IMREAD_REDUCED_COLOR_k decode still covering the target
    (the header read by recio's codec), INTER_AREA, imencode."""
    import cv2
    import numpy as np

    from recio.image.pixels.codec import dct_eighths, image_size

    data = _read(path)
    buf = np.frombuffer(data, np.uint8)
    size = image_size(buf)
    flag = cv2.IMREAD_COLOR
    if size is not None and data[:3] == b"\xff\xd8\xff":
        flag = {1: cv2.IMREAD_REDUCED_COLOR_8, 2: cv2.IMREAD_REDUCED_COLOR_4,
                4: cv2.IMREAD_REDUCED_COLOR_2}.get(dct_eighths(*size, SIDE), cv2.IMREAD_COLOR)
    bgr = cv2.imdecode(buf, flag)
    target = _target(*size) if size is not None else _target(bgr.shape[1], bgr.shape[0])
    small = cv2.resize(bgr, target, interpolation=cv2.INTER_AREA)
    return cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])[1].tobytes()


def _mxnet_calls(path: str) -> bytes:
    """MXNet im2rec's per-image calls (full decode, INTER_LINEAR, imencode), no Python."""
    import cv2
    import numpy as np

    bgr = cv2.imdecode(np.frombuffer(_read(path), np.uint8), cv2.IMREAD_COLOR)
    small = cv2.resize(bgr, _target(bgr.shape[1], bgr.shape[0]), interpolation=cv2.INTER_LINEAR)
    return cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])[1].tobytes()


def _pillow_only(path: str) -> bytes:
    from PIL import Image

    with Image.open(path) as img:
        size = _target(*img.size)
        img.draft("RGB", size)
        small = img.convert("RGB").resize(size, Image.Resampling.BICUBIC)
    out = io.BytesIO()
    small.save(out, "JPEG", quality=QUALITY)
    return out.getvalue()


#: the im2rec arguments of each mode
MODES = {"default": [], "fast": ["--resize-mode", "antialias"]}


class _Im2recCodec:
    """recio's own per-image work (``transform_image``) in a mode, for its PSNR."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __call__(self, path: str) -> bytes:
        from recio.image.pixels import transform
        return transform.transform_image(_read(path), transform.ImageOptions(
            resize=SIDE, quality=QUALITY, resize_mode=self.mode))


def candidates() -> Dict[str, Callable[[str], bytes]]:
    """The pipelines whose libraries import here, the issue's reference first."""
    found: Dict[str, Callable[[str], bytes]] = {
        "simplejpeg + cv2 INTER_AREA + simplejpeg": _SjCv2("INTER_AREA"),
        "simplejpeg + cv2 INTER_LINEAR + simplejpeg": _SjCv2("INTER_LINEAR"),
        "simplejpeg + cv2 INTER_CUBIC + simplejpeg": _SjCv2("INTER_CUBIC"),
    }
    found["cv2 reduced decode + INTER_AREA + cv2"] = _cv2_reduced
    found["cv2 full decode + INTER_LINEAR + cv2 (MXNet)"] = _mxnet_calls
    found["Pillow draft + BICUBIC + Pillow"] = _pillow_only
    return found


# -- running them on every core -----------------------------------------------------------------
def _init_worker() -> None:
    import cv2

    cv2.setNumThreads(1)  # one image per worker: OpenCV's own threads only fight them


def _run_many(fn: Callable[[str], bytes], paths: List[str]) -> int:
    return sum(len(fn(p)) for p in paths)


def rate_threads(fn: Callable[[str], bytes], paths: List[str], workers: int) -> float:
    """Images/s with ``workers`` threads taking files from one shared iterator."""
    _init_worker()
    todo = iter(paths)
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                path = next(todo, None)
            if path is None:
                return
            fn(path)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(paths) / (time.perf_counter() - start)


def rate_processes(fn: Callable[[str], bytes], paths: List[str], workers: int,
                   pool) -> float:
    """Images/s with ``workers`` forked processes (started before the clock), chunks of 16."""
    chunks = [paths[i:i + 16] for i in range(0, len(paths), 16)]
    start = time.perf_counter()
    for _ in pool.imap_unordered(_ChunkRunner(fn), chunks):
        pass
    return len(paths) / (time.perf_counter() - start)


class _ChunkRunner:
    def __init__(self, fn: Callable[[str], bytes]) -> None:
        self.fn = fn

    def __call__(self, chunk: List[str]) -> int:
        return _run_many(self.fn, chunk)


def measure_limit(paths: List[str], workers: int, repeats: int) -> List[Tuple[str, str, float]]:
    """(pipeline, "threads"/"processes", median images/s) for every candidate and both kinds."""
    results = []
    found = candidates()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_init_worker) as pool:
        for name, fn in found.items():
            _run_many(fn, paths[:20])  # warm: imports, first-call setup
            pool.map(_ChunkRunner(fn), [paths[:4]] * workers)
            threads, procs = [], []
            for _ in range(repeats):
                threads.append(rate_threads(fn, paths, workers))
                procs.append(rate_processes(fn, paths, workers, pool))
            results.append((name, "threads", statistics.median(threads)))
            results.append((name, "processes", statistics.median(procs)))
            print(f"  {name:46s} threads {results[-2][2]:6.0f}  processes "
                  f"{results[-1][2]:6.0f} images/s")
    return results


def psnr_of(fn: Callable[[str], bytes], paths: List[str]) -> float:
    """Mean PSNR (dB) of a pipeline's decoded output against an exact float Lanczos downscale."""
    import numpy as np
    from PIL import Image

    scores = []
    for path in paths:
        src = Image.open(path).convert("RGB")
        size = _target(*src.size)
        ref = np.stack([np.asarray(band.convert("F").resize(size, Image.Resampling.LANCZOS))
                        for band in src.split()], axis=-1)
        out = np.asarray(Image.open(io.BytesIO(fn(path))).convert("RGB"), dtype=np.float64)
        mse = np.mean((out - np.clip(ref, 0, 255)) ** 2)
        scores.append(10 * np.log10(255.0 ** 2 / max(mse, 1e-12)))
    return statistics.mean(scores)


# -- im2rec ---------------------------------------------------------------------------------------
def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="corpus size")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="threads/processes (default: every core)")
    parser.add_argument("--quality-sample", type=int, default=0,
                        help="images for each candidate's PSNR (0: skip)")
    parser.add_argument("--im2rec", action="append", default=[], metavar="NAME=PATH",
                        help="also measure the im2rec script at PATH (e.g. another virtualenv's)")
    parser.add_argument("--scaling", action="store_true",
                        help="also --num-thread 1, 2 and the core count")
    parser.add_argument("--out", default=os.path.join(HERE, "out", "im2rec"))
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                        help="a Python with MXNet 1.9.1: its tools/im2rec.py packs too")
    args = parser.parse_args()

    os.makedirs(args.out, exist_ok=True)
    root = os.path.join(args.out, "corpus")
    paths = make_corpus(root, n=args.n)
    size_mb = sum(os.path.getsize(p) for p in paths) / 2**20
    print(f"corpus: {len(paths)} images, {size_mb:.0f} MiB in {root}")
    print(f"machine: {os.cpu_count()} CPUs, {args.workers} workers, load average "
          f"{os.getloadavg()[0]:.2f} at start; median of {args.repeats} runs")
    for p in paths:  # warm the page cache
        _read(p)

    print("\n== the limit: decode -> resize -> encode, no Python between, every core")
    rows = measure_limit(paths, args.workers, args.repeats)
    best_name, best_kind, limit = max(rows, key=lambda r: r[2])
    print(f"LIMIT {limit:.0f} images/s: {best_name}, {best_kind}")
    if args.quality_sample:
        sample = paths[::max(1, len(paths) // args.quality_sample)][:args.quality_sample]
        print(f"\n== PSNR against an exact float Lanczos downscale, {len(sample)} images")
        for name, fn in candidates().items():
            print(f"  {name:46s} {psnr_of(fn, sample):6.2f} dB")
        for name, mode in (("im2rec default (MXNet's bytes)", "mxnet"),
                           ("im2rec fast mode", "antialias")):
            print(f"  {name:46s} {psnr_of(_Im2recCodec(mode), sample):6.2f} dB")

    scripts = [("im2rec", real_script("im2rec"))]
    for spec in args.im2rec:
        name, _, path = spec.partition("=")
        scripts.append((name, path))
    lst = os.path.join(args.out, "limit.lst")
    subprocess.run([scripts[0][1], lst[:-4], root, "--list", "--recursive", "--quiet",
                    "--force"], check=True, stdout=subprocess.DEVNULL)
    thread_counts = sorted({1, 2, args.workers}) if args.scaling else [args.workers]
    mxnet = mxnet_im2rec(args.mxnet_python)

    def command(script: List[str], prefix: str, threads: int, extra: List[str]) -> List[str]:
        return [*script, prefix, root, "--resize", str(SIDE), "--quality", str(QUALITY),
                "--num-thread", str(threads), *extra]

    configs: List[Tuple[str, List[str], List[str]]] = []  # (name, script, extra arguments)
    for name, script in scripts:
        for mode, extra in MODES.items():
            configs.append((f"{name} {mode}", [script], extra + ["--quiet"]))
    if mxnet:
        configs.append(("MXNet im2rec.py", mxnet, []))
    for name, _, _ in configs:  # each its own copy of the list: PREFIX matches only its own
        shutil.copy(lst, os.path.join(args.out, _slug(name) + ".lst"))

    print(f"\n== im2rec PREFIX ROOT --resize {SIDE} --quality {QUALITY} --num-thread N, "
          "the whole command")
    table: Dict[Tuple[str, int], List[Tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for threads in thread_counts:
            for name, script, extra in configs:  # the configurations taken in turn
                prefix = os.path.join(args.out, _slug(name))
                seconds, peak = pack_once(command(script, prefix, threads, extra), prefix)
                table.setdefault((name, threads), []).append((records(prefix) / seconds, peak))
    for threads in thread_counts:
        mx_rate = (statistics.median(r[0] for r in table[("MXNet im2rec.py", threads)])
                   if mxnet else None)
        for name, _, _ in configs:
            runs = table[(name, threads)]
            rate = statistics.median(r[0] for r in runs)
            mem = max(r[1] for r in runs)
            target = TARGETS.get(name)
            verdict = ""
            if target is not None and threads == args.workers:
                verdict = (f"  target >= {target:.2f} "
                           f"{'OK' if rate / limit >= target else 'MISSED'}")
            beside = f", {rate / mx_rate:4.2f}x MXNet" if mx_rate else ""
            print(f"  {name:22s} N={threads}: {rate:6.0f} images/s = {rate / limit:4.2f} of "
                  f"the limit{beside}{verdict}; runs {', '.join(f'{r[0]:.0f}' for r in runs)}"
                  f"; peak RSS {mem:4.0f} MiB (< {MEMORY_TARGET_MB:.0f} "
                  f"{'OK' if mem < MEMORY_TARGET_MB else 'MISSED'})")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def _slug(name: str) -> str:
    return "pack_" + "".join(c if c.isalnum() else "_" for c in name)


if __name__ == "__main__":
    main()
