"""Sequence bucketing on a real (small) LSTM: does the cost model's speed-up show up in wall-clock?

One epoch of a small PyTorch LSTM (CPU) over 5,000 synthetic sequences whose lengths are
log-normal (median 40, sigma 1.0: a long tail, like handwriting lines), batch size 32, padded
minibatches as in Khomenko et al., "Accelerating recurrent neural network training using
sequence bucketing and multi-GPU data parallelization" (2016). Compared: random batching,
optimal buckets at Q = 1..6 and equal-width buckets at Q = 2..6. For each: the cost model's padding waste (padded /
real samples) and predicted speed-up over random batching, the waste of the batches actually
drawn, and the measured epoch time (median of --repeats runs, interleaved and rotated so load
drifts hit all configurations alike) and speed-up, by wall clock and by process CPU time.

Targets: measured speed-up at Q = 3 >= 2.0x; measured within 25% of predicted at every
Q (checked for the optimal buckets; equal-width shown for information); optimal boundaries never
worse than equal-width ones.

    python benchmarks/bench_bucketing.py              # ~3 min on an idle core, ~7 min loaded
    python benchmarks/bench_bucketing.py --repeats 1 --n 1000   # quick look
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from recio.sequence import bucketing as bk
from recio.sequence.bucketing import BucketBatchSampler


#: glibc: keep freed memory instead of returning big buffers to the OS after every batch, so a
#: long padded batch is not also charged for page faults (set before the process starts)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 32)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000, help="sequences")
    ap.add_argument("--median", type=float, default=40.0)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-q", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", help="also write the results here")
    ap.add_argument("--default-malloc", action="store_true",
                    help="do not re-run with the glibc malloc settings (page faults then add a "
                         "cost that grows faster than padded samples)")
    args = ap.parse_args()
    if not args.default_malloc and sys.platform.startswith("linux") and \
            any(os.environ.get(key) != value for key, value in MALLOC_ENV.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **MALLOC_ENV})

    try:
        import torch
    except ImportError:
        print("bench_bucketing: skipped, it needs PyTorch: pip install 'recio[torch]'")
        return 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    rng = np.random.default_rng(args.seed)
    lengths = np.maximum(1, np.round(rng.lognormal(np.log(args.median), args.sigma, args.n)))
    lengths = lengths.astype(np.int64)
    real = int(lengths.sum())
    feats = [torch.randn(int(n), args.features) for n in lengths]
    labels = torch.from_numpy(rng.integers(0, 10, args.n))
    k = args.batch_size

    configs = [("random", [])]
    qs = range(1, args.max_q + 1)
    configs += [(f"optimal Q={q}", bk.bucket_boundaries(lengths, q, k)) for q in qs]
    configs += [(f"equal-width Q={q}", bk.equal_width_boundaries(lengths, q))
                for q in range(2, args.max_q + 1)]
    random_cost = bk.padded_cost(lengths, None, k)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(args.features, args.hidden, batch_first=True)
            self.out = torch.nn.Linear(args.hidden, 10)

        def forward(self, x, last):
            y, _ = self.lstm(x)
            return self.out(y[torch.arange(len(last)), last])

    def epoch(boundaries, seed):
        """One training epoch; returns (wall seconds, CPU seconds, padded samples processed)."""
        torch.manual_seed(seed)
        net = Net()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        sampler = BucketBatchSampler(lengths, boundaries, k, seed=seed)
        padded = 0
        start, cpu_start = time.perf_counter(), time.process_time()
        for batch in sampler:
            x = torch.nn.utils.rnn.pad_sequence([feats[i] for i in batch], batch_first=True)
            padded += x.shape[0] * x.shape[1]
            last = torch.from_numpy(lengths[batch] - 1)
            loss = torch.nn.functional.cross_entropy(net(x, last), labels[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
        return time.perf_counter() - start, time.process_time() - cpu_start, padded

    print(f"bench_bucketing: {args.n} log-normal lengths (median {args.median:g}, sigma "
          f"{args.sigma:g}; {real:,} samples, longest {lengths.max()}), batch {k}, "
          f"LSTM {args.features}->{args.hidden}, torch {torch.__version__}, "
          f"{args.threads} thread(s), median of {args.repeats} runs", flush=True)
    if not args.default_malloc:
        print("  (glibc malloc keeps freed memory: " +
              " ".join(f"{k}={v}" for k, v in MALLOC_ENV.items()) + ")", flush=True)
    epoch([], 12345)  # warm-up: one untimed random epoch (allocator, kernels)
    times = {name: [] for name, _ in configs}
    cpu = {name: [] for name, _ in configs}
    load_before = os.getloadavg()[0]
    actual = {name: [] for name, _ in configs}
    for r in range(args.repeats):
        for name, edges in configs[r % len(configs):] + configs[:r % len(configs)]:
            seconds, cpu_seconds, padded = epoch(edges, args.seed + r)
            times[name].append(seconds)
            cpu[name].append(cpu_seconds)
            actual[name].append(padded / real)
        print(f"  run {r + 1}/{args.repeats} done", file=sys.stderr, flush=True)

    base = statistics.median(times["random"])
    cpu_base = statistics.median(cpu["random"])

    def ratio(row):
        """Measured speed-up as a fraction of the predicted one."""
        return row["measured_speedup"] / row["predicted_speedup"]

    rows = []
    for name, edges in configs:
        cost = bk.padded_cost(lengths, edges, k)
        t = statistics.median(times[name])
        rows.append({"config": name, "boundaries": edges, "model_waste": cost / real,
                     "actual_waste": float(np.mean(actual[name])),
                     "predicted_speedup": random_cost / cost,
                     "epoch_seconds": t, "measured_speedup": base / t, "times": times[name],
                     "cpu_seconds": cpu[name],
                     "cpu_speedup": cpu_base / statistics.median(cpu[name])})

    print(f"{'config':<17} {'waste(model)':>12} {'waste(actual)':>13} {'predicted':>9} "
          f"{'epoch s':>8} {'measured':>8} {'meas/pred':>9} {'cpu-time':>8}  boundaries")
    for row in rows:
        print(f"{row['config']:<17} {row['model_waste']:>11.2f}x {row['actual_waste']:>12.2f}x "
              f"{row['predicted_speedup']:>8.2f}x {row['epoch_seconds']:>8.2f} "
              f"{row['measured_speedup']:>7.2f}x {ratio(row):>9.2f} {row['cpu_speedup']:>7.2f}x"
              f"  {', '.join(map(str, row['boundaries'])) or '-'}")

    by = {row["config"]: row for row in rows}
    q3 = by.get("optimal Q=3")
    optimal = [row for row in rows if row["config"].startswith("optimal")]
    not_worse = all(by[f"optimal Q={q}"]["model_waste"]
                    <= by[f"equal-width Q={q}"]["model_waste"] + 1e-9
                    for q in range(2, args.max_q + 1))
    print(f"(speed-ups are over random batching; cpu-time = the same from process CPU time, less "
          f"sensitive to other load; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after)")
    print("targets (wall-clock):")
    if q3:
        print(f"  measured speed-up at Q=3 >= 2.0x: {q3['measured_speedup']:.2f}x "
              f"{'MET' if q3['measured_speedup'] >= 2.0 else 'NOT MET'}")
    for label, group in (("optimal Q=1..%d" % args.max_q, optimal), ("all configurations", rows)):
        worst = max(group, key=lambda row: abs(ratio(row) - 1))
        ok = all(abs(ratio(row) - 1) <= 0.25 for row in group)
        print(f"  measured within 25% of predicted, {label}: {'MET' if ok else 'NOT MET'} "
              f"(worst {worst['config']}: {ratio(worst):.2f}"
              f" of predicted){'' if group is optimal else ' [informational]'}")
    print("  optimal never worse than equal-width (model waste): "
          f"{'MET' if not_worse else 'NOT MET'}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
