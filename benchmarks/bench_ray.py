"""Benchmark ``im2rec --engine ray`` against ``--engine local`` on one machine, per-task timing,
and the figures the scale-out model in benchmarks/README.md is built from.

Corpus: ``benchmarks/corpus.py`` (2,000 photo-like images; see bench_im2rec.py). Every pack is
``im2rec PREFIX ROOT --resize 256 --quality 95 --num-shards S`` run as a user runs it (the
console script, in its own process):

* local: ``--engine local --num-thread 2`` (the shards one after another, 2 threads each);
* ray: ``--engine ray --ray-address ADDRESS`` on a Ray instance started once beforehand with
  ``ray start --head --num-cpus N`` (N = 2, and 1 for the scaling check), so that the
  figure is the packing, not Ray's start-up, which is measured on its own (a fresh local
  instance, as ``--engine ray`` without an address starts).

Targets: Ray's overhead over the local engine <= 15% (wall time, N = 2). Per task: seconds,
images, CPU ms per image; the driver's share (list split, commit: renames, combined index,
manifest) from the library call ``recio.ray.pack_shards_on_ray(..., report=...)``.

Usage: ``python benchmarks/bench_ray.py [--n 2000] [--shards 8] [--repeats 3] [--copies 1]``
(``--copies 4``: each image listed 4 times, a job 4 times longer from the same corpus).
Needs ``pip install -e '.[ray]'`` and the benchmark requirements (scikit-image).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_im2rec import run_measured  # noqa: E402 - after the sys.path line
from corpus import make_corpus  # noqa: E402 - after the sys.path line

TARGET_OVERHEAD = 0.15


def write_list(root: str, prefix: str, copies: int) -> str:
    """A list of every image under ``root`` (im2rec --list --recursive --no-shuffle), listed
    ``copies`` times under new indices (a longer job from the same corpus)."""
    subprocess.run([shutil.which("im2rec"), prefix, root, "--list", "--recursive",
                    "--no-shuffle", "--quiet", "--force"], check=True, capture_output=True)
    with open(prefix + ".lst") as f:
        lines = [line.split("\t", 1)[1] for line in f if line.strip()]
    with open(prefix + ".lst", "w") as f:
        for i, rest in enumerate(lines * copies):
            f.write(f"{i}\t{rest}")
    return prefix + ".lst"


def clear(prefix: str) -> None:
    folder, stem = os.path.split(prefix)
    for name in os.listdir(folder):
        if name.startswith(stem + "-") or name.startswith(stem + ".") and not \
                name.endswith(".lst"):
            os.unlink(os.path.join(folder, name))


def pack(prefix: str, root: str, shards: int, extra: list) -> tuple:
    clear(prefix)
    cmd = [shutil.which("im2rec"), prefix, root, "--resize", "256", "--quality", "95",
           "--num-shards", str(shards), "--quiet", *extra]
    n, seconds, peak_mb, _ = run_measured(cmd, dict(os.environ))
    return n, seconds, peak_mb


def ray_head(cpus: int, temp: str) -> str:
    """Start a Ray head with ``cpus`` CPUs (no dashboard); returns its address."""
    ray = shutil.which("ray")
    subprocess.run([ray, "stop", "--force"], capture_output=True)
    proc = subprocess.run([ray, "start", "--head", f"--num-cpus={cpus}",
                           "--include-dashboard=false", f"--temp-dir={temp}",
                           "--port=0"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ray start failed: {proc.stderr.strip()[-400:]}")
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        if "--address=" in line:
            return line.split("--address=")[1].split()[0].strip("'\"")
    raise SystemExit("ray start printed no address:\n" + proc.stdout[-400:])


def driver_share(lst: str, root: str, shards: int, address: str) -> dict:
    """The library call on the running cluster, timed part by part."""
    code = f"""
import json, sys, time
import recio.ray
from recio.image.packing.settings import PackSettings
from recio.image.packing.shards import ShardPackReport
from recio.image.pixels.transform import ImageOptions
report = ShardPackReport("ray")
recio.ray.connect({address!r})
connected = time.time()
start = time.perf_counter()
settings = PackSettings(ImageOptions(resize=256, quality=95), num_shards={shards}, force=True)
result = recio.ray.pack_shards_on_ray({lst!r}, {root!r}, settings, address={address!r}, report=report)
total = time.perf_counter() - start
print(json.dumps({{"total": total, "tasks": report.timings(), "packed": result.packed,
                  "start": connected, "end": time.time()}}))
"""
    import json

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-800:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def ray_startup() -> float:
    code = ("import time, ray; t = time.perf_counter(); "
            "ray.init(num_cpus=2, include_dashboard=False, logging_level='ERROR'); "
            "ray.get(ray.remote(lambda: 1).remote()); print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    return float(out.stdout.strip().splitlines()[-1])


def driver_rates(items: int = 1_000_000) -> None:
    """What the driver does per item, on a synthetic list of ``items`` lines: cutting the list
    into parts (parse and count, no image touched) and joining the parts' indexes into the
    combined index (``combined_lines``)."""
    import numpy as np

    from recio.image.packing.pipeline import PackResult
    from recio.image.packing.shards import part_size, split_list
    from recio.records.index_format import write_index
    from recio.records.manifest import Shard
    from recio.records.shards.commit import combined_lines

    folder = tempfile.mkdtemp(prefix="bench-ray-driver-")
    try:
        lst = os.path.join(folder, "big.lst")
        with open(lst, "w") as f:
            for start in range(0, items, 100_000):
                f.write("".join(f"{i}\t{i % 1000}.000000\tclass_{i % 1000}/img_{i}.jpg\n"
                                for i in range(start, min(items, start + 100_000))))
        t = time.perf_counter()
        _, parts = split_list(lst, part_size(items, 64), False, PackResult(lst, "", "", None),
                              items)
        count = sum(len(p.tasks) for p in parts)
        split_s = time.perf_counter() - t
        shards = []
        per = items // 64
        for k in range(64):
            rec, idx = os.path.join(folder, f"s{k}.rec"), os.path.join(folder, f"s{k}.idx")
            with open(rec, "wb") as f:
                f.truncate(per * 112_000)
            write_index(idx, range(k * per, (k + 1) * per), np.arange(per) * 112_000)
            shards.append(Shard(rec, idx, None, per, per * 112_000, 0, "", ""))
        t = time.perf_counter()
        lines = sum(block.count(b"\n") for block in combined_lines(shards))
        join_s = time.perf_counter() - t
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"driver, list cut into parts: {count / split_s:,.0f} items/s ({items:,} lines in "
          f"{split_s:.2f} s); combined index: {lines / join_s:,.0f} lines/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--copies", type=int, default=1,
                        help="list every image this many times (a longer job)")
    parser.add_argument("--driver-only", action="store_true",
                        help="only the driver's per-item rates (no Ray, no images)")
    args = parser.parse_args()
    if args.driver_only:
        driver_rates()
        return
    # the benchmark's own cluster on 127.0.0.1-only use: no token to hand to every client
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    work = os.path.join(HERE, "out", "ray")
    os.makedirs(work, exist_ok=True)
    root = os.path.join(HERE, "out", "im2rec", f"corpus-{args.n}")
    if not os.path.isdir(root):
        make_corpus(root, args.n)
    lst = write_list(root, os.path.join(work, "local"), args.copies)
    shutil.copy(lst, os.path.join(work, "ray.lst"))
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.n} images "
          f"listed {args.copies}x, "
          f"{args.shards} shards, median of {args.repeats} runs, local and ray runs in turn")
    results: dict = {"local": [], "ray2": [], "ray1": []}
    try:
        for cpus in (2, 1):
            address = ray_head(cpus, temp)
            env_key = f"ray{cpus}"
            for _ in range(args.repeats):
                if cpus == 2:
                    results["local"].append(pack(os.path.join(work, "local"), root,
                                                 args.shards,
                                                 ["--engine", "local", "--num-thread", "2"]))
                results[env_key].append(pack(os.path.join(work, "ray"), root, args.shards,
                                             ["--engine", "ray", "--ray-address", address]))
            if cpus == 2:
                same = all(open(os.path.join(work, f"local{s}"), "rb").read() ==
                           open(os.path.join(work, f"ray{s}"), "rb").read()
                           for s in [f"-{i:05d}.rec" for i in range(args.shards)]
                           + [".combined.idx"])
                share = driver_share(os.path.join(work, "ray.lst"), root, args.shards, address)
        startup = ray_startup()
    finally:
        subprocess.run([shutil.which("ray"), "stop", "--force"], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)

    def med(key: str, i: int) -> float:
        return statistics.median(r[i] for r in results[key])

    n = results["local"][0][0]
    local_s, ray_s, ray1_s = med("local", 1), med("ray2", 1), med("ray1", 1)
    overhead = ray_s / local_s - 1
    print(f"{'case':40} {'seconds':>8} {'images/s':>9} {'peak MB':>8}   target")
    print(f"{'local engine, --num-thread 2':40} {local_s:8.2f} {n / local_s:9.0f} "
          f"{med('local', 2):8.0f}")
    verdict = "OK" if overhead <= TARGET_OVERHEAD else "MISSED"
    print(f"{'ray engine, 2 CPUs (running cluster)':40} {ray_s:8.2f} {n / ray_s:9.0f} "
          f"{med('ray2', 2):8.0f}   overhead {overhead:+.1%} (<= +15% {verdict})")
    print(f"{'ray engine, 1 CPU (running cluster)':40} {ray1_s:8.2f} {n / ray1_s:9.0f} "
          f"{med('ray1', 2):8.0f}   2 CPUs / 1 CPU = {ray1_s / ray_s:.2f}x")
    print(f"{'Ray start-up (fresh local instance)':40} {startup:8.2f}")
    print(f"ray output identical to local: {same}")
    tasks = share["tasks"]
    task_s = [t["seconds"] for t in tasks]
    per_image = [1000 * t["seconds"] / t["items"] for t in tasks]
    busy = sum(task_s)
    print(f"per task ({len(tasks)} tasks, library call, 2 CPUs): median "
          f"{statistics.median(task_s):.2f} s (min {min(task_s):.2f}, max {max(task_s):.2f}), "
          f"{statistics.median(per_image):.2f} ms/image inside a task")
    first = min(t["started"] for t in tasks)
    last = max(t["started"] + t["seconds"] for t in tasks)
    driver_rates()
    print(f"driver (connected beforehand): whole call {share['total']:.2f} s = first task "
          f"starts after {first - share['start']:.2f} s (worker start-up) + tasks "
          f"{last - first:.2f} s (busy {busy / 2:.2f} s on 2 CPUs, idle "
          f"{last - first - busy / 2:.2f} s) + commit {share['end'] - last:.2f} s")


if __name__ == "__main__":
    main()
