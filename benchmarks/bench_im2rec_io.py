"""im2rec where no pixels are touched: ``--pass-through`` packing (MB/s of source files) and
``--list --recursive`` over a million files, flat and in 1,000 folders, beside MXNet's
``im2rec.py`` where it can run.

Pass-through packs ``bench_im2rec.py``'s corpus (``benchmarks/corpus.py``) with the page cache
warm; the figure is source megabytes per second of the whole command (target >= 200 MB/s).
The listing trees are made of empty ``.jpg`` files in a scratch folder (``--tree-dir``, on the
same disk as a real dataset would be; about 1 GB of inodes, kept between runs): one folder of
``--files`` files, and 1,000 folders holding them between them. Each listing runs in a fresh
process, after one warm-up listing of the same tree (so the directory entries are cached for
both tools alike). MXNet: ``--mxnet-python`` (or ``RECIO_MXNET_PYTHON``), a Python with MXNet
1.9.1, whose ``mxnet/tools/im2rec.py`` is run as it ships.

Usage: ``python benchmarks/bench_im2rec_io.py [--files 1000000] [--repeats 3]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from corpus import make_corpus  # noqa: E402 - after the sys.path line

PASS_THROUGH_TARGET_MB_S = 200.0


def make_tree(root: str, files: int, folders: int) -> None:
    """``files`` empty .jpg files spread over ``folders`` folders (1: all in ``root``); made
    once (a ``done`` marker records it)."""
    marker = os.path.join(root, ".done")
    if os.path.exists(marker):
        return
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    per = -(-files // folders)
    made = 0
    for f in range(folders):
        folder = root if folders == 1 else os.path.join(root, f"class_{f:04d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(min(per, files - made)):
            os.close(os.open(os.path.join(folder, f"img_{made:07d}.jpg"),
                             os.O_CREAT | os.O_WRONLY, 0o644))
            made += 1
    open(marker, "w").close()


def timed(cmd: List[str], cwd: Optional[str] = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    return time.perf_counter() - start


def real_script(name: str) -> str:
    """The console script itself (not a pyenv shim, which would add its own start-up)."""
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"the {name} console script is not installed: pip install -e .")
    if os.sep + "shims" + os.sep not in path:  # a virtualenv's own script, or a real one
        return path
    try:
        found = subprocess.run(["pyenv", "which", name], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    except FileNotFoundError:
        pass
    return path


def mxnet_im2rec(python: Optional[str]) -> Optional[List[str]]:
    if not python:
        return None
    code = ("import mxnet, cv2, os; "  # its im2rec.py needs OpenCV too
            "print(os.path.join(os.path.dirname(mxnet.__file__), 'tools'))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"MXNet not usable with {python}: {out.stderr.strip().splitlines()[-1:]}")
        return None
    return [python, os.path.join(out.stdout.strip(), "im2rec.py")]


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree-dir", default=os.path.join(HERE, "out", "listing"))
    parser.add_argument("--out", default=os.path.join(HERE, "out", "im2rec"))
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"))
    args = parser.parse_args()
    im2rec = real_script("im2rec")
    mxnet = mxnet_im2rec(args.mxnet_python)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
          f"median of {args.repeats} runs")

    # -- pass-through ---------------------------------------------------------------------------
    root = os.path.join(args.out, "corpus")
    paths = make_corpus(root)
    megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
    prefix = os.path.join(args.out, "passthrough")
    subprocess.run([im2rec, prefix, root, "--list", "--recursive", "--quiet", "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    for p in paths:
        with open(p, "rb") as f:
            f.read()
    print(f"\n== --pass-through: {len(paths)} files, {megabytes:.0f} MB, page cache warm")
    for threads in (1, 2):
        runs = [timed([im2rec, prefix, root, "--pass-through", "--num-thread", str(threads),
                       "--quiet", "--force"]) for _ in range(args.repeats)]
        rate = megabytes / statistics.median(runs)
        print(f"  recio --num-thread {threads}: {rate:6.0f} MB/s of source files "
              f"(target >= {PASS_THROUGH_TARGET_MB_S:.0f} "
              f"{'OK' if rate >= PASS_THROUGH_TARGET_MB_S else 'MISSED'}); runs "
              + ", ".join(f"{megabytes / r:.0f}" for r in runs))
    if mxnet:
        mx_prefix = os.path.join(args.out, "mxnet_passthrough")  # not under our PREFIX
        shutil.copy(prefix + ".lst", mx_prefix + ".lst")
        runs = [timed([*mxnet, mx_prefix, root, "--pass-through", "--num-thread", "2"])
                for _ in range(args.repeats)]
        print(f"  MXNet --num-thread 2: {megabytes / statistics.median(runs):6.0f} MB/s")

    # -- listing --------------------------------------------------------------------------------
    for folders in (1, 1000):
        tree = os.path.join(args.tree_dir, f"{args.files}_in_{folders}")
        t0 = time.perf_counter()
        make_tree(tree, args.files, folders)
        print(f"\n== --list --recursive over {args.files:,} files in "
              f"{'one folder' if folders == 1 else f'{folders:,} folders'} "
              f"({time.perf_counter() - t0:.0f} s to make or reuse the tree)")
        work = os.path.join(args.out, f"listing_{folders}")
        os.makedirs(work, exist_ok=True)
        tools = [("recio", [im2rec, os.path.join(work, "r"), tree, "--list", "--recursive",
                            "--quiet", "--force"])]
        if mxnet:
            tools.append(("MXNet", [*mxnet, os.path.join(work, "m"), tree, "--list",
                                    "--recursive"]))
        results = {}
        timed(tools[0][1])  # warm the directory cache
        for _ in range(args.repeats):
            for name, cmd in tools:  # taken in turn
                results.setdefault(name, []).append(timed(cmd))
        for name, runs in results.items():
            print(f"  {name:6s} {statistics.median(runs):6.2f} s  (runs "
                  + ", ".join(f"{r:.2f}" for r in runs) + ")")
        if "MXNet" in results:
            ratio = statistics.median(results["MXNet"]) / statistics.median(results["recio"])
            print(f"  recio is {ratio:.1f}x MXNet's speed (baseline to beat)")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
