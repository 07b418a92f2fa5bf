"""The ruler for im2rec's speed: the fastest decode -> resize -> encode this machine can do,
beside ``im2rec``'s own images/s as a fraction of it.

Corpus and options are ``bench_im2rec.py``'s: ``benchmarks/corpus.py`` (2,000 photo-like
images, ~15% of them 1200-2400 px, ~3% PNG), ``--resize 256 --quality 95``, every core.

**The limit.** Each candidate pipeline reads a file and makes the same 256 px JPEG with three
C calls and no Python work between them (decode -> resize -> encode), on every core, in threads
and in processes; the limit is the fastest of all. Candidates (each where its libraries are
installed):

- the issue's reference: simplejpeg DCT-scaled decode (libjpeg-turbo picks the smallest scale
  that still covers the target), ``cv2.resize(INTER_AREA)``, simplejpeg encode;
- the same with ``INTER_LINEAR`` and ``INTER_CUBIC``, and with cykooz.resizer (Catmull-Rom);
- MXNet's own calls without its Python: ``cv2.imdecode`` at full size, ``INTER_LINEAR``,
  then the encode (the exact mode's work with OpenCV);
- the exact mode's work without OpenCV: simplejpeg full decode, ``recio.image.linear``'s copy
  of ``INTER_LINEAR`` (NumPy), Pillow's encode (not C calls only: the default install's
  ceiling for MXNet's bytes);
- Pillow alone: ``draft()`` (the DCT scale), ``resize(BICUBIC)``, ``save``.

PNG files are decoded by ``cv2.imdecode`` (Pillow without OpenCV). Every encode is JPEG quality
95 with 4:2:0 chroma, what MXNet's OpenCV and im2rec write (simplejpeg's own default, 4:4:4, is
larger and slower). ``--quality-sample`` also prints each candidate's PSNR against an exact float
Lanczos downscale of the source (as ``bench_im2rec.py``), so a fast but blurry or shifted
pipeline shows as such.

**im2rec.** The installed console script packs the same corpus, as a user runs it
(``--num-thread`` = cores, a fresh output each run, the page cache warm): as installed (the fast
extra when OpenCV is present) and as the default install (``pip install recio``) — simulated by
hiding OpenCV from the child process, or measured for real with ``--im2rec NAME=PATH`` pointing
at the ``im2rec`` of another virtualenv — each in both modes (``--modes``): **exact** (the
default: MXNet's bytes, full-size decode, OpenCV's bilinear or recio's bit-exact copy of it,
libjpeg's accurate DCT) and **fast** (``--resize-mode antialias --encoder fast``: what im2rec
did before it wrote MXNet's bytes; so one run gives the before/after). Each figure is the median
of ``--repeats`` runs, runs of the different configurations taken in turn; peak RSS is the whole
process tree's. ``--scaling`` adds ``--num-thread 1, 2, cores`` for every configuration.

Benchmark-only requirements: ``pip install scikit-image opencv-python-headless``.
MXNet's own ``tools/im2rec.py`` packs too with ``--mxnet-python`` (or ``RECIO_MXNET_PYTHON``).
Usage: ``python benchmarks/bench_pack_limit.py [--n 2000] [--repeats 5] [--scaling]
[--modes exact,fast]``.
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
import tempfile
import threading
import time
from typing import Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_im2rec import run_measured  # noqa: E402
from bench_im2rec_io import mxnet_im2rec, real_script  # noqa: E402
from corpus import make_corpus  # noqa: E402

SIDE = 256
QUALITY = 95
#: fractions of the limit the issue asks for
TARGETS = {"default install": 0.90, "fast extra": 0.95}
MEMORY_TARGET_MB = 300.0


# -- the candidate pipelines --------------------------------------------------------------------
def _target(width: int, height: int) -> Tuple[int, int]:
    """im2rec's output size: shorter side SIDE, longer ``long * SIDE // short``."""
    return (SIDE, height * SIDE // width) if height > width else (width * SIDE // height, SIDE)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _decode_rgb_any(data: bytes):
    """Full-size RGB for a non-JPEG file: OpenCV when installed, else Pillow."""
    import numpy as np

    try:
        import cv2
    except ImportError:
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


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


def _sj_cykooz(path: str) -> bytes:
    import numpy as np
    from cykooz_resizer import FilterType, ResizeAlg, ResizeOptions, Resizer
    from PIL import Image

    data = _read(path)
    array = _sj_decode_scaled(data)
    resizer = _sj_cykooz.__dict__.setdefault("resizer", Resizer())
    options = _sj_cykooz.__dict__.setdefault(
        "options", ResizeOptions(ResizeAlg.convolution(FilterType.catmull_rom)))
    out = Image.new("RGB", _target(*_orig_size(data, array)))
    resizer.resize_pil(Image.fromarray(array), out, options)
    return _sj_encode(np.asarray(out))


def _mxnet_calls(path: str) -> bytes:
    """MXNet im2rec's per-image calls (full decode, INTER_LINEAR, imencode), no Python."""
    import cv2
    import numpy as np

    bgr = cv2.imdecode(np.frombuffer(_read(path), np.uint8), cv2.IMREAD_COLOR)
    small = cv2.resize(bgr, _target(bgr.shape[1], bgr.shape[0]), interpolation=cv2.INTER_LINEAR)
    return cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])[1].tobytes()


def _exact_no_opencv(path: str) -> bytes:
    """The exact mode's per-image work without OpenCV: full-size simplejpeg decode (Pillow for
    other formats), recio's bit-exact copy of OpenCV's bilinear, Pillow's JPEG encode."""
    import numpy as np
    from PIL import Image

    from recio.image.linear import resize_linear

    data = _read(path)
    if data[:3] == b"\xff\xd8\xff":
        import simplejpeg

        array = simplejpeg.decode_jpeg(data, "RGB")
    else:
        array = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    small = resize_linear(array, _target(array.shape[1], array.shape[0]))
    out = io.BytesIO()
    Image.fromarray(small).save(out, "JPEG", quality=QUALITY)
    return out.getvalue()


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
MODES = {"exact": [], "fast": ["--resize-mode", "antialias", "--encoder", "fast"]}


class _Im2recCodec:
    """recio's own per-image work (``transform_image``) with a given resizer and mode, for its
    PSNR."""

    def __init__(self, resizer: str, mode: str = "exact") -> None:
        self.resizer = resizer
        self.mode = mode

    def __call__(self, path: str) -> bytes:
        from recio.image import transform

        transform.RESIZER = self.resizer
        fast = self.mode == "fast"
        try:
            return transform.transform_image(_read(path), transform.ImageOptions(
                resize=SIDE, quality=QUALITY, resize_mode="antialias" if fast else "mxnet",
                encoder="fast" if fast else "exact"))
        finally:
            transform.RESIZER = None


def candidates() -> Dict[str, Callable[[str], bytes]]:
    """The pipelines whose libraries import here, the issue's reference first."""
    found: Dict[str, Callable[[str], bytes]] = {}

    def has(module: str) -> bool:
        try:
            __import__(module)
            return True
        except ImportError:
            return False

    if has("simplejpeg") and has("cv2"):
        found["simplejpeg + cv2 INTER_AREA + simplejpeg"] = _SjCv2("INTER_AREA")
        found["simplejpeg + cv2 INTER_LINEAR + simplejpeg"] = _SjCv2("INTER_LINEAR")
        found["simplejpeg + cv2 INTER_CUBIC + simplejpeg"] = _SjCv2("INTER_CUBIC")
    if has("simplejpeg") and has("cykooz_resizer"):
        found["simplejpeg + cykooz Catmull-Rom + simplejpeg"] = _sj_cykooz
    if has("cv2"):
        found["cv2 full decode + INTER_LINEAR + cv2 (MXNet)"] = _mxnet_calls
    if has("simplejpeg"):
        found["exact without OpenCV: simplejpeg + NumPy + Pillow"] = _exact_no_opencv
    found["Pillow draft + BICUBIC + Pillow"] = _pillow_only
    return found


# -- running them on every core -----------------------------------------------------------------
def _init_worker() -> None:
    try:
        import cv2

        cv2.setNumThreads(1)  # one image per worker: OpenCV's own threads only fight them
    except ImportError:
        pass


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
_HIDER = '''
import importlib.abc, os, sys
_hidden = set(filter(None, os.environ.get("RECIO_BENCH_HIDE", "").split(",")))
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the benchmark)",
                                      name=name)
        return None
sys.meta_path.insert(0, _Hide())
'''


def _child_env(hide: str, hider_dir: str) -> Dict[str, str]:
    """The environment of a child process that cannot import the modules in ``hide``."""
    env = dict(os.environ)
    if hide:
        env["RECIO_BENCH_HIDE"] = hide
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [hider_dir, env.get("PYTHONPATH")]))
    return env


def run_im2rec(im2rec: str, prefix: str, root: str, threads: int, hide: str,
               extra: List[str], hider_dir: str) -> Tuple[float, float, str]:
    """One pack: (images/s over the whole command, peak RSS MiB of the process tree, what
    im2rec reported)."""
    env = _child_env(hide, hider_dir)
    cmd = [im2rec, prefix, root, "--resize", str(SIDE), "--quality", str(QUALITY),
           "--num-thread", str(threads), "--quiet", "--force", *extra]
    n, seconds, peak_mb, err = run_measured(cmd, env)
    return n / seconds, peak_mb, err


def which_codecs(im2rec: str, hide: str, hider_dir: str, extra: List[str]) -> str:
    """What that im2rec's Python would decode, resize and encode with (for the mode of
    ``extra``, im2rec's arguments)."""
    python = _script_python(im2rec)
    env = _child_env(hide, hider_dir)
    fast = "--encoder" in extra
    options = ("ImageOptions(resize_mode='antialias', encoder='fast')" if fast
               else "ImageOptions()")
    code = ("from recio.image.transform import ImageOptions, codec_names; "
            f"print(', '.join(f'{{k}} {{v}}' for k, v in codec_names({options}).items()))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]


def _script_python(script: str) -> str:
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    return first[2:].strip() if first.startswith("#!") else sys.executable


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
    parser.add_argument("--no-simulated", action="store_true",
                        help="only the --im2rec scripts, not the installed one with and "
                             "without OpenCV")
    parser.add_argument("--scaling", action="store_true",
                        help="also --num-thread 1, 2 and the core count")
    parser.add_argument("--out", default=os.path.join(HERE, "out", "im2rec"))
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                        help="a Python with MXNet 1.9.1: its tools/im2rec.py packs too")
    parser.add_argument("--modes", default="exact,fast",
                        help="im2rec modes to measure: exact (the default, MXNet's bytes), "
                             "fast (--resize-mode antialias --encoder fast)")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"--modes takes exact and fast, not {', '.join(sorted(unknown))}")

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
        for name, resizer, mode in (
                ("im2rec exact, OpenCV (MXNet's bytes)", "opencv", "exact"),
                ("im2rec exact, no OpenCV (MXNet's bytes)", "pillow", "exact"),
                ("im2rec fast, fast extra (OpenCV)", "opencv", "fast"),
                ("im2rec fast, default install (cykooz)", "cykooz", "fast"),
                ("im2rec fast, Pillow only", "pillow", "fast")):
            print(f"  {name:46s} {psnr_of(_Im2recCodec(resizer, mode), sample):6.2f} dB")

    configs: List[Tuple[str, str, str, List[str]]] = []  # (name, script, hide, arguments)
    im2rec = None
    installs: List[Tuple[str, str, str]] = []
    if not args.no_simulated:
        im2rec = real_script("im2rec")
        installs += [("fast extra", im2rec, ""), ("default install", im2rec, "cv2")]
    for spec in args.im2rec:
        name, _, path = spec.partition("=")
        installs.append((name, path, ""))
    for mode in modes:
        configs += [(f"{name}, {mode}", script, hide, MODES[mode])
                    for name, script, hide in installs]
    hider_dir = tempfile.mkdtemp(prefix="recio-bench-")
    with open(os.path.join(hider_dir, "sitecustomize.py"), "w") as f:
        f.write(_HIDER)
    prefix = os.path.join(args.out, "limit")
    subprocess.run([im2rec or configs[0][1], prefix, root, "--list", "--recursive", "--quiet",
                    "--force"], check=True, stdout=subprocess.DEVNULL)
    if not configs:
        raise SystemExit("nothing to measure: drop --no-simulated or give --im2rec")
    thread_counts = sorted({1, 2, args.workers}) if args.scaling else [args.workers]

    print(f"\n== im2rec PREFIX ROOT --resize {SIDE} --quality {QUALITY} --num-thread N, "
          "the whole command")
    for name, script, hide, extra in configs:
        print(f"  {name}: {which_codecs(script, hide, hider_dir, extra)}"
              + (f" (hiding {hide})" if hide else ""))
    table: Dict[Tuple[str, int], List[Tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for threads in thread_counts:
            for name, script, hide, extra in configs:  # the configurations taken in turn
                rate, mem, _ = run_im2rec(script, prefix, root, threads, hide, extra,
                                          hider_dir)
                table.setdefault((name, threads), []).append((rate, mem))
    mxnet = mxnet_im2rec(args.mxnet_python)
    if mxnet:  # MXNet's tools/im2rec.py, as it ships, on its own copy of the list
        mx_prefix = os.path.join(args.out, "mxnet_pack")  # not under im2rec's PREFIX
        shutil.copy(prefix + ".lst", mx_prefix + ".lst")
        for threads in thread_counts:
            runs = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                subprocess.run([*mxnet, mx_prefix, root, "--resize", str(SIDE), "--quality",
                                str(QUALITY), "--num-thread", str(threads)], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                runs.append(len(paths) / (time.perf_counter() - start))
            table[("MXNet im2rec.py", threads)] = [(r, 0.0) for r in runs]
        configs.append(("MXNet im2rec.py", "", "", []))
    for threads in thread_counts:
        for name, _, _, _ in configs:
            runs = table[(name, threads)]
            rate = statistics.median(r[0] for r in runs)
            mem = max(r[1] for r in runs)
            target = TARGETS.get(name.rsplit(", ", 1)[0])
            verdict = ""
            if target is not None and threads == args.workers:
                verdict = (f"  target >= {target:.2f} "
                           f"{'OK' if rate / limit >= target else 'MISSED'}")
            memory = (f"; peak RSS {mem:4.0f} MiB (< {MEMORY_TARGET_MB:.0f} "
                      f"{'OK' if mem < MEMORY_TARGET_MB else 'MISSED'})") if mem else ""
            print(f"  {name:24s} N={threads}: {rate:6.0f} images/s = {rate / limit:4.2f} of "
                  f"the limit{verdict}; runs {', '.join(f'{r[0]:.0f}' for r in runs)}"
                  + memory)
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    shutil.rmtree(hider_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
