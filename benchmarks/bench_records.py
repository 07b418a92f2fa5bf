"""Core record throughput: write, sequential read and random keyed read (issue 2).

Prints records/s and MB/s for 200,000 records of 100 bytes and 3,000 of 100 KB, through the
native API and through ``recio.mx``, each the median of several runs, beside its target.
Run: ``python benchmarks/bench_records.py [--runs 5] [--dir /tmp]``.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import tempfile
import time

import recio
from recio import mx

TARGETS = {  # records/s for small records, bytes/s for large ones
    ("small", "write"): 1_000_000,
    ("small", "read"): 2_000_000,
    ("small", "read_batch"): 2_000_000,
    ("small", "random"): 800_000,
    ("large", "read"): 5e9,
}
MX_FLOOR = 0.70  # recio.mx may cost at most 30% of the native rate


def timed(fn, runs):
    """Median seconds of ``runs`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(kind, count, size, folder, runs):
    payloads = [os.urandom(size) for _ in range(min(count, 1000))]
    payloads = [payloads[i % len(payloads)] for i in range(count)]
    rec, idx = os.path.join(folder, f"{kind}.rec"), os.path.join(folder, f"{kind}.idx")
    total_bytes = count * size
    keys = list(range(count))
    order = keys[:]
    random.Random(0).shuffle(order)
    results = {}

    def write_native():
        with recio.IndexedRecordWriter(rec, idx) as w:
            write = w.write
            for i, p in enumerate(payloads):
                write(i, p)

    def write_rec_only():
        with recio.RecordWriter(rec) as w:
            write = w.write
            for p in payloads:
                write(p)

    def write_mx():
        w = mx.MXIndexedRecordIO(idx, rec, "w")
        for i, p in enumerate(payloads):
            w.write_idx(i, p)
        w.close()

    def read_native():
        with recio.RecordReader(rec) as r:
            for _ in r:
                pass

    def read_batch():
        with recio.RecordReader(rec) as r:
            while r.read_batch(4096):
                pass

    def read_mx():
        r = mx.MXRecordIO(rec, "r")
        read = r.read
        while read() is not None:
            pass
        r.close()


    write_native()
    native_index = recio.IndexedRecordReader(rec, idx)
    mx_index = mx.MXIndexedRecordIO(idx, rec, "r")

    def random_native():
        r = native_index
        for k in order:
            r[k]

    def random_batch():
        native_index.read_many(order)

    def random_mx():
        read_idx = mx_index.read_idx
        for k in order:
            read_idx(k)

    def load_index():
        recio.IndexedRecordReader(rec, idx).close()

    for name, fn in [("write", write_native), ("write .rec only", write_rec_only),
                     ("write mx", write_mx), ("read", read_native),
                     ("read_batch", read_batch), ("read mx", read_mx),
                     ("random", random_native), ("random read_many", random_batch),
                     ("random mx", random_mx), ("load .idx", load_index)]:
        if kind == "large" and (name.startswith("random") or name == "read_batch"):
            continue  # batches are for small records; large ones are best read one at a time
        seconds = timed(fn, runs)
        results[name] = (count / seconds, total_bytes / seconds)
    write_native()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to write the test files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        print(f"{'case':<28}{'records/s':>14}{'MB/s':>10}   target")
        for kind, count, size in [("small", 200_000, 100), ("large", 3_000, 100_000)]:
            results = bench(kind, count, size, folder, args.runs)
            for name, (rps, bps) in results.items():
                base = name.split()[0]
                target = TARGETS.get((kind, base))
                if name.endswith(" mx"):
                    native = results[base][0]
                    note = f"{rps / native:.2f} of native"
                    if target is not None:
                        rate = bps if kind == "large" else rps
                        ok = "OK" if rate >= MX_FLOOR * target else "MISS"
                        note += f", {rate / target:.2f} of target (>= {MX_FLOOR:.2f}) {ok}"
                elif target is None:
                    note = ""
                elif kind == "large":
                    note = f">= {target / 1e9:.0f} GB/s  {'OK' if bps >= target else 'MISS'}"
                else:
                    note = f">= {target:,.0f}/s  {'OK' if rps >= target else 'MISS'}"
                print(f"{kind + ' ' + name:<28}{rps:>14,.0f}{bps / 1e6:>10,.0f}   {note}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MB (median of {args.runs} runs per figure)")


if __name__ == "__main__":
    main()
