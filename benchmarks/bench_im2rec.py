"""Benchmark ``im2rec`` packing: speed, peak memory, resize and encoder quality, beside the
targets, for both ways of packing.

Corpus: ``benchmarks/corpus.py`` (2,000 photo-like images cut from skimage.data photographs,
10 class folders, ~85% with the long side 400-640 px, ~15% 1200-2400 px, a few PNG).
Packs with ``im2rec PREFIX ROOT --resize 256 --quality 95 --num-thread 2`` (the installed
console script, as a user runs it) in two modes, measured in the same run:

- **exact** (the default, ``--resize-mode mxnet --encoder exact``): MXNet's bytes. Full-size
  decode, OpenCV's bilinear resize (``cv2.resize``, or recio's bit-exact NumPy copy of it when
  ``RECIO_RESIZER`` is not opencv), libjpeg's accurate DCT (OpenCV's imencode, else Pillow).
- **fast** (``--resize-mode antialias --encoder fast``, what im2rec did before it wrote MXNet's
  bytes): DCT-scaled decode (simplejpeg), antialiased resize (OpenCV, cykooz.resizer or
  Pillow, ``RECIO_RESIZER``), simplejpeg encode.

Also: the other decoder + resizer pairs, process workers, and an MXNet-like OpenCV baseline
(imread, INTER_LINEAR resize, imencode, 2 processes; MXNet itself is not needed); CPU cost per
image by stage; whether two threads scale; resize quality (PSNR against an exact
floating-point Lanczos downscale of the full-resolution source); the JPEG encoders' PSNR, size
and time on the same pixels.

Benchmark-only requirements: ``pip install scikit-image opencv-python-headless simplejpeg``.
(opencv-python-headless is also the resizer of the ``recio[fast]`` extra.)
Usage: ``python benchmarks/bench_im2rec.py [--n 2000] [--repeats 3] [--quality-sample 150]``.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from corpus import make_corpus  # noqa: E402

TARGETS = {"fast": 1000.0, "pillow": 700.0, "mem_mb": 300.0}
#: CPU ms per image one thread may spend for the wall-clock targets on 2 idle cores
CPU_BUDGET_MS = {"simplejpeg": 2000 / TARGETS["fast"], "pillow": 2000 / TARGETS["pillow"]}


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


def run_pack(prefix: str, root: str, extra: list, resizer: str = "auto") -> tuple:
    """One pack run: (images/s, seconds, peak RSS MiB of the whole process tree)."""
    im2rec = shutil.which("im2rec")
    if im2rec is None:
        raise SystemExit("the im2rec console script is not installed: pip install -e .")
    for suffix in (".rec", ".idx", ".errors.tsv", ".rec.partial", ".pack.journal"):
        if os.path.exists(prefix + suffix):
            os.unlink(prefix + suffix)
    cmd = [im2rec, prefix, root, "--resize", "256", "--quality", "95", "--num-thread", "2",
           "--quiet", *extra]
    n, seconds, peak_mb, _ = run_measured(cmd, {**os.environ, "RECIO_RESIZER": resizer})
    return n / seconds, seconds, peak_mb


def run_measured(cmd: list, env: dict) -> tuple:
    """Run an im2rec pack command: (images it reports packed, seconds, peak RSS MiB of the
    whole process tree, its stderr); SystemExit with its error if it fails."""
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
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()}")
    # "packed 2,000 images": im2rec groups thousands
    packed = int(out.split("packed ")[1].split(" ")[0].replace(",", ""))
    return packed, seconds, peak[0] / 1024, err.strip()


def _cv2_one(path: str) -> bytes:
    import cv2

    img = cv2.imread(path, 1)
    h, w = img.shape[:2]
    size = (256, h * 256 // w) if h > w else (w * 256 // h, 256)
    img = cv2.resize(img, size)
    return cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


def _cv2_init() -> None:
    import cv2

    cv2.setNumThreads(1)


def run_opencv_baseline(paths: list) -> float:
    """MXNet im2rec's per-image work with OpenCV in 2 processes, in order; images/s."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(2, initializer=_cv2_init) as pool:
        start = time.perf_counter()
        total = sum(len(b) for b in pool.imap(_cv2_one, paths, chunksize=8))
        seconds = time.perf_counter() - start
    assert total > 0
    return len(paths) / seconds


#: --resize-mode and --encoder of the two modes
MODES = {"exact": ("mxnet", "exact"), "fast": ("antialias", "fast")}


def mode_args(mode: str) -> list:
    resize_mode, encoder = MODES[mode]
    return ["--resize-mode", resize_mode, "--encoder", encoder]


def cpu_cost(paths: list, decoder: str, resizer: str, mode: str = "fast",
             sample: int = 400) -> tuple:
    """CPU milliseconds per image for read + transform + pack in one thread (load-independent),
    and where they go: ``{"resize": ms, "encode": ms, "decode and rest": ms}`` per image."""
    from PIL import Image

    from recio.image import transform as imageproc
    from recio.image import linear
    from recio.image.header import IRHeader, pack
    from recio.image.transform import ImageOptions, transform_image

    imageproc.RESIZER = resizer
    cv2 = imageproc._cv2()

    resize_mode, encoder = MODES[mode]
    options = ImageOptions(resize=256, quality=95, decoder=decoder, resize_mode=resize_mode,
                           encoder=encoder)
    chosen = paths[::max(1, len(paths) // sample)][:sample]
    spent = {"resize": 0.0, "encode": 0.0}
    originals = {"resize": Image.Image.resize, "encode": imageproc.encode,
                 "linear": linear.resize_linear}

    def timed(stage):
        def call(*args, **kwargs):
            start = time.process_time()
            try:
                return originals[stage](*args, **kwargs)
            finally:
                spent[stage] += time.process_time() - start
        return call

    Image.Image.resize, imageproc.encode = timed("resize"), timed("encode")
    imageproc.resize_linear = timed("linear")
    spent["linear"] = 0.0
    if cv2 is not None:
        originals["cv2"] = cv2.resize
        cv2.resize = lambda *a, **k: timed("cv2")(*a, **k)
        spent["cv2"] = 0.0
    try:
        start = time.process_time()
        for path in chosen:
            with open(path, "rb") as f:
                pack(IRHeader(0, 0.0, 0, 0), transform_image(f.read(), options))
        total = time.process_time() - start
    finally:
        Image.Image.resize, imageproc.encode = originals["resize"], originals["encode"]
        imageproc.resize_linear = originals["linear"]
        spent["resize"] += spent.pop("linear")
        if cv2 is not None:
            cv2.resize = originals["cv2"]
            spent["resize"] += spent.pop("cv2")
        imageproc.RESIZER = None
    stages = {k: 1000 * v / len(chosen) for k, v in spent.items()}
    stages["decode and rest"] = 1000 * (total - sum(spent.values())) / len(chosen)
    return 1000 * total / len(chosen), stages


def thread_speedup(paths: list, decoder: str, resizer: str, mode: str = "fast",
                   sample: int = 200) -> float:
    """Wall-clock speed-up of 2 threads over 1 on the same images (2.0: the codecs release the
    GIL all the time; a loaded machine lowers it too)."""
    from recio.image import transform as imageproc
    from recio.image.transform import ImageOptions, transform_image

    imageproc.RESIZER = resizer
    resize_mode, encoder = MODES[mode]
    options = ImageOptions(resize=256, quality=95, decoder=decoder, resize_mode=resize_mode,
                           encoder=encoder)
    datas = []
    for path in paths[::max(1, len(paths) // sample)][:sample]:
        with open(path, "rb") as f:
            datas.append(f.read())

    def work(part):
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
    imageproc.RESIZER = None
    return one / (time.perf_counter() - start)


def resize_quality(paths: list, sample: int) -> dict:
    """Mean PSNR (dB) of each resizer against an exact float Lanczos downscale of the source."""
    import cv2
    import numpy as np
    from PIL import Image

    from recio.image import transform as imageproc
    from recio.image.transform import ImageOptions, render_image, target_size

    def psnr(a, ref):
        mse = np.mean((a.astype(np.float64) - np.clip(ref, 0, 255)) ** 2)
        return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))

    step = max(1, len(paths) // sample)
    scores: dict = {}
    for path in paths[::step][:sample]:
        data = open(path, "rb").read()
        src = Image.open(io.BytesIO(data)).convert("RGB")
        size = target_size(src.width, src.height, 256)
        ref = np.stack([np.asarray(band.convert("F").resize(size, Image.LANCZOS))
                        for band in src.split()], axis=-1)
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        linear = cv2.cvtColor(cv2.resize(bgr, size, interpolation=cv2.INTER_LINEAR),
                              cv2.COLOR_BGR2RGB)
        scores.setdefault("opencv INTER_LINEAR (MXNet)", []).append(psnr(linear, ref))
        for mode, decoder, resizer in combos():
            imageproc.RESIZER = resizer
            ours = np.asarray(render_image(data, ImageOptions(
                resize=256, decoder=decoder, resize_mode=MODES[mode][0])))
            scores.setdefault(f"recio {mode} ({decoder} + {resizer})", []).append(
                psnr(ours, ref))
    imageproc.RESIZER = None
    return {k: (statistics.mean(v), min(v), len(v)) for k, v in scores.items()}


def encoder_quality(paths: list, sample: int, qualities=(95, 85)) -> list:
    """The JPEG encoders on the same pixels: ``[(set, encoder, quality, mean PSNR dB of the
    decoded JPEG against the
    pixels encoded, mean bytes, CPU ms per encode)]`` (each row starting with the set: the
    images resized to 256 px, and as decoded). ``exact`` is MXNet's bytes (OpenCV's imencode
    here, else Pillow's save), ``fast`` simplejpeg (TurboJPEG's fast DCT below 96)."""
    import numpy as np

    from recio.image.codec import decode
    from recio.image.encoding import encode
    from recio.image.transform import ImageOptions, render_pixels
    from recio.optional import optional

    def psnr(a, ref):
        mse = np.mean((a.astype(np.float64) - ref.astype(np.float64)) ** 2)
        return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))

    step = max(1, len(paths) // sample)
    sets = {"resized to 256": [], "full size": []}
    for path in paths[::step][:sample]:
        with open(path, "rb") as f:
            data = f.read()
        sets["resized to 256"].append(np.asarray(render_pixels(data, ImageOptions(resize=256))))
        sets["full size"].append(decode(data, 1))
    encoders = ["exact"] + (["fast"] if optional("simplejpeg") is not None else [])
    rows = []
    for name, pixels in sets.items():
        for quality in qualities:
            for encoder in encoders:
                scores, sizes, seconds = [], [], 0.0
                for array in pixels:
                    start = time.process_time()
                    data = encode(array, ".jpg", quality, encoder=encoder)
                    seconds += time.process_time() - start
                    sizes.append(len(data))
                    scores.append(psnr(decode(data, 1 if array.ndim == 3 else 0), array))
                rows.append((name, encoder, quality, statistics.mean(scores),
                             statistics.mean(sizes), 1000 * seconds / len(pixels)))
    return rows


def combos() -> list:
    """The (mode, decoder, resizer) triples that can run here: the exact mode with OpenCV's
    resize and with recio's NumPy copy of it ("pillow" as ``RECIO_RESIZER`` selects it), then
    the fast mode's pairs, Pillow-only first."""
    from recio.image.codec import have_fast_decoder

    from recio.optional import optional

    resizers = ["pillow"] + [name for name, module in (("cykooz", "cykooz_resizer"),
                                                        ("opencv", "cv2"))
                             if optional(module) is not None]
    decoders = ["pillow"] + (["simplejpeg"] if have_fast_decoder() else [])
    exact = [("exact", decoders[-1], r) for r in ("opencv", "pillow") if r in resizers]
    return exact + [("fast", d, r) for d in decoders for r in resizers]


def _resizer_label(mode: str, resizer: str) -> str:
    return "numpy" if mode == "exact" and resizer != "opencv" else resizer


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # figures appear as they are measured
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="corpus size")
    parser.add_argument("--repeats", type=int, default=3, help="runs per main configuration")
    parser.add_argument("--quality-sample", type=int, default=150, help="images for PSNR")
    parser.add_argument("--out", default=os.path.join(HERE, "out", "im2rec"))
    args = parser.parse_args()

    from recio.image.codec import have_fast_decoder
    from recio.image.transform import resizer_name

    os.makedirs(args.out, exist_ok=True)
    root = os.path.join(args.out, "corpus")
    t0 = time.perf_counter()
    paths = make_corpus(root, n=args.n)
    print(f"corpus: {len(paths)} images in {root} ({time.perf_counter() - t0:.1f} s to "
          f"make or reuse), {sum(os.path.getsize(p) for p in paths) / 2**20:.0f} MiB")
    prefix = os.path.join(args.out, "bench")
    subprocess.run([shutil.which("im2rec"), prefix, root, "--list", "--recursive", "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")

    fast_decoder = "simplejpeg" if have_fast_decoder() else "pillow"
    fast_resizer = resizer_name()  # RECIO_RESIZER and whether cv2 imports, as im2rec decides
    print(f"installed here: decoder {fast_decoder}, resizer {fast_resizer} "
          "(pip install 'recio[fast]' for OpenCV)")
    configs = [("exact (default)", ["--decoder", fast_decoder] + mode_args("exact"),
                fast_resizer, "fast"),
               (f"fast ({fast_decoder} + {fast_resizer})",
                ["--decoder", fast_decoder] + mode_args("fast"), fast_resizer, "fast"),
               ("fast, Pillow only", ["--decoder", "pillow"] + mode_args("fast"), "pillow",
                "pillow")]
    print(f"\n== im2rec --resize 256 --quality 95 --num-thread 2 (median of {args.repeats}, "
          "the configurations taken in turn)")
    runs: dict = {}
    for _ in range(args.repeats):
        for name, extra, resizer, _target in configs:
            runs.setdefault(name, []).append(run_pack(prefix, root, extra, resizer))
    for name, extra, resizer, target in configs:
        rate = statistics.median(r[0] for r in runs[name])
        mem = max(r[2] for r in runs[name])
        print(f"{name:32s} {rate:7.0f} images/s (runs: "
              f"{', '.join(f'{r[0]:.0f}' for r in runs[name])}; target >= "
              f"{TARGETS[target]:.0f})  peak RSS {mem:5.0f} MiB (target < "
              f"{TARGETS['mem_mb']:.0f})")
    print("\n== other mode, decoder + resizer triples, threads (1 run each)")
    for mode, decoder, resizer in combos():
        if (mode, decoder, resizer) in (("fast", "pillow", "pillow"),
                                        ("fast", fast_decoder, fast_resizer),
                                        ("exact", fast_decoder, fast_resizer)):
            continue
        rate, seconds, mem = run_pack(prefix, root, ["--decoder", decoder] + mode_args(mode),
                                      resizer)
        print(f"{mode + ': ' + decoder + ' + ' + _resizer_label(mode, resizer):32s} "
              f"{rate:7.0f} images/s  peak RSS {mem:5.0f} MiB")
    print("\n== workers: processes instead of the default threads (1 run each)")
    for name, extra, resizer, _ in configs:
        rate, seconds, mem = run_pack(prefix, root, extra + ["--executor", "process"], resizer)
        print(f"{name + ', processes':32s} {rate:7.0f} images/s  peak RSS {mem:5.0f} MiB, "
              "all processes")
    try:
        rate = run_opencv_baseline(paths)
        print(f"{'OpenCV baseline (MXNet-like)':32s} {rate:7.0f} images/s  (imread + "
              "INTER_LINEAR + imencode, 2 processes, no writing)")
    except ImportError:
        print("opencv-python-headless not installed: baseline skipped")

    print("\n== CPU cost per image, one thread (independent of the machine's load)")
    for mode, decoder, resizer in combos():
        ms, stages = cpu_cost(paths, decoder, resizer, mode)
        budget = CPU_BUDGET_MS["pillow" if (decoder, resizer) == ("pillow", "pillow")
                               else "simplejpeg"]
        label = f"{mode}: {decoder} + {_resizer_label(mode, resizer)}"
        print(f"{label:32s} {ms:5.2f} CPU ms/image (budget for the target "
              f"{budget:.1f}) -> {2000 / ms:5.0f} images/s on 2 idle cores if "
              "the work splits perfectly")
        print(f"{'':32s} " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    print("\n== 2 threads vs 1, in one process (do the codecs release the GIL?)")
    for mode, decoder, resizer in combos():
        speedup = thread_speedup(paths, decoder, resizer, mode)
        label = f"{mode}: {decoder} + {_resizer_label(mode, resizer)}"
        print(f"{label:32s} {speedup:5.2f}x wall-clock speed-up "
              f"(load average {os.getloadavg()[0]:.2f})")

    print(f"\n== resize quality: PSNR vs exact float Lanczos, {args.quality_sample} images "
          "(higher is better; the exact mode equals OpenCV INTER_LINEAR by design)")
    try:
        for name, (mean, low, count) in resize_quality(paths, args.quality_sample).items():
            print(f"{name:40s} mean {mean:6.2f} dB  (min {low:5.2f}, {count} images)")
    except ImportError as exc:
        print(f"quality skipped: {exc}")
    print(f"\n== JPEG encoders on the same pixels, {args.quality_sample} images (PSNR of the "
          "decoded JPEG against the pixels encoded)")
    for name, encoder, quality, score, size, ms in encoder_quality(paths, args.quality_sample):
        print(f"{name:16s} {encoder:6s} q{quality}  {score:6.2f} dB  {size / 1024:6.1f} KiB  "
              f"{ms:.3f} CPU ms/image")
    import resource

    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"largest single child process over the whole run (getrusage): {largest:.0f} MiB")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
