"""MinibatchSource throughput, restore latency and memory over ~1 GB of sequence records.

Writes (or reuses) a corpus of variable-length sequences (1..50 frames of 40 float32, plus a
one-sample int32 label stream) in ``--dir``, then, each configuration in a fresh process and
reported as the median of ``--runs`` runs:

- samples/s and minibatches/s of ``next_minibatch(--mb)`` over one full sweep, sequential
  (``randomize=False``) and randomized with windows of 1%, 10% and 100% of the corpus;
- peak anonymous memory (RssAnon, sampled after every minibatch; the mmapped file is not
  counted) and the largest resident decoded data (``resident_samples``) at each window;
- restore latency (``restore_from_checkpoint``, then the first minibatch) at sweeps 1, 100, 10,000.

Targets: randomization adds at most 20% to the sequential read cost; restore < 50 ms anywhere.
Run: ``python benchmarks/bench_minibatch.py [--size-mb 1024] [--runs 3] [--dir benchmarks/out]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DIM = 40
TARGET_OVERHEAD = 0.20
TARGET_RESTORE_S = 0.050


def make_corpus(path: str, size_mb: int, seed: int = 0) -> None:
    """Variable-length sequences until the .rec reaches ``size_mb`` MB (reused when present)."""
    from recio.sequence import SequenceWriter

    marker = path + ".json"
    wanted = {"size_mb": size_mb, "seed": seed, "dim": DIM, "version": 1}
    if os.path.exists(marker) and os.path.exists(path):
        with open(marker) as f:
            if json.load(f) == wanted:
                return
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((4096 + 50, DIM)).astype(np.float32)  # frames are slices of it
    target = size_mb * 1024 * 1024
    t0 = time.perf_counter()
    with SequenceWriter(path) as w:
        i = 0
        while w.tell() < target:
            lengths = rng.integers(1, 51, 1024)
            starts = rng.integers(0, 4096, 1024)
            for n, s in zip(lengths.tolist(), starts.tolist()):
                w.write({"x": pool[s:s + n], "label": np.array([i % 1000], dtype=np.int32)})
                i += 1
    with open(marker, "w") as f:
        json.dump(wanted, f)
    print(f"wrote {path}: {os.path.getsize(path) / 2**20:.0f} MB, {i} sequences in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)


def rss_anon_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def child_sweep(path: str, window_frac: float, mb: int, measure_memory: bool) -> dict:
    """One full sweep; returns seconds, counts and (optionally) memory peaks."""
    import recio

    kw = dict(randomize=False) if window_frac == 0 else dict(seed=1)
    src = recio.MinibatchSource(path, **kw)
    if window_frac:
        window = max(1, int(src.num_samples * window_frac))
        src = recio.MinibatchSource(path, seed=1, randomization_window=window)
    base = rss_anon_kb()
    peak_anon, peak_resident, samples, batches = base, 0, 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        batch = src.next_minibatch(mb)
        if batch is None:
            break
        samples += batch.num_samples
        batches += 1
        if measure_memory:
            peak_anon = max(peak_anon, rss_anon_kb())
            peak_resident = max(peak_resident, src.resident_samples)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert samples == src.num_samples
    return {"seconds": seconds, "cpu": cpu, "samples": samples, "batches": batches,
            "peak_anon_mb": (peak_anon - base) / 1024,
            "resident_samples": peak_resident, "corpus_samples": src.num_samples,
            "window": src.window}


def child_restore(path: str, mb: int) -> dict:
    """Median restore and first-minibatch latency at sweeps 1, 100, 10,000 (10% window)."""
    import recio

    src = recio.MinibatchSource(path, seed=1, epoch_size=recio.sequence.SWEEP_FOREVER)
    window = src.num_samples // 10
    src = recio.MinibatchSource(path, seed=1, epoch_size=recio.sequence.SWEEP_FOREVER,
                                randomization_window=window)
    for _ in range(3):
        src.next_minibatch(mb)
    state = src.get_checkpoint_state()
    out = {}
    for sweep in (1, 100, 10_000):
        restore, first = [], []
        for rep in range(5):
            s = dict(state, sweep=sweep, offset=src.num_sequences // 2 + rep,
                     sample_position=0)
            fresh = recio.MinibatchSource(path, seed=1, epoch_size=recio.sequence.SWEEP_FOREVER,
                                          randomization_window=window)
            t0 = time.perf_counter()
            fresh.restore_from_checkpoint(s)
            t1 = time.perf_counter()
            fresh.next_minibatch(mb)
            t2 = time.perf_counter()
            restore.append(t1 - t0)
            first.append(t2 - t0)
        out[str(sweep)] = {"restore": statistics.median(restore),
                           "first_minibatch": statistics.median(first)}
    return {"latency": out, "sequences": src.num_sequences}


def run_child(args, *extra) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *extra, "--path", args.path,
                           "--mb", str(args.mb)], capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"child {extra} failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=2048, help="minibatch size in samples")
    parser.add_argument("--dir", default=os.path.join(HERE, "out"))
    parser.add_argument("--child", nargs="*")
    parser.add_argument("--path")
    args = parser.parse_args()
    if args.child is not None:
        if args.child[0] == "sweep":
            result = child_sweep(args.path, float(args.child[1]), args.mb, args.child[2] == "1")
        else:
            result = child_restore(args.path, args.mb)
        print(json.dumps(result))
        return 0

    os.makedirs(args.dir, exist_ok=True)
    args.path = os.path.join(args.dir, f"minibatch_{args.size_mb}mb.rec")
    make_corpus(args.path, args.size_mb)
    size = os.path.getsize(args.path)
    print(f"corpus {size / 2**20:.0f} MB; minibatch {args.mb} samples; median of {args.runs} "
          f"runs, each in a fresh process (machine shared, figures are noisy)")
    configs = [("sequential", 0.0), ("window 1%", 0.01), ("window 10%", 0.10),
               ("window 100%", 1.0)]
    runs = {name: [] for name, _ in configs}
    for _ in range(args.runs):  # interleaved, so a change in the machine's load hits all alike
        for name, frac in configs:
            runs[name].append(run_child(args, "sweep", str(frac), "0"))
    results = {}
    for name, frac in configs:
        mem = run_child(args, "sweep", str(frac), "1")
        cpu = statistics.median(r["cpu"] for r in runs[name])
        wall = statistics.median(r["seconds"] for r in runs[name])
        results[name] = (cpu, wall, runs[name][0], mem)
    base = results["sequential"][0]
    print("rates per CPU second of the reading process (the machine is shared; wall-clock "
          "MB/s beside)")
    print(f"{'':12s} {'samples/s':>11s} {'minibatch/s':>11s} {'MB/s':>7s} {'wall MB/s':>9s} "
          f"{'vs seq':>7s} {'peak anon MB':>12s} {'resident samples':>17s}")
    for name, (cpu, wall, r, mem) in results.items():
        over = cpu / base - 1
        verdict = "" if name == "sequential" else \
            (" ok" if over <= TARGET_OVERHEAD else " OVER TARGET")
        print(f"{name:12s} {r['samples'] / cpu:11.0f} {r['batches'] / cpu:11.1f} "
              f"{size / 2**20 / cpu:7.0f} {size / 2**20 / wall:9.0f} {over:+7.1%} "
              f"{mem['peak_anon_mb']:12.0f} {mem['resident_samples']:>9d} of "
              f"{mem['corpus_samples']}{verdict}")
    print(f"target: randomization adds at most {TARGET_OVERHEAD:.0%} to the sequential cost "
          f"(CPU time)")

    lat = run_child(args, "restore")
    print(f"restore latency ({lat['sequences']} sequences, window 10%; median of 5):")
    for sweep, v in lat["latency"].items():
        ok = "ok" if v["restore"] < TARGET_RESTORE_S else "OVER TARGET"
        print(f"  sweep {int(sweep):>6,d}: restore {v['restore'] * 1e3:6.1f} ms, "
              f"+ first minibatch {v['first_minibatch'] * 1e3:6.1f} ms  "
              f"(target < {TARGET_RESTORE_S * 1e3:.0f} ms) {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
