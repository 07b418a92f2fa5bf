"""Benchmark: InputSplit partitioning and reading, ``recio inspect`` / ``verify`` scan speed.

Generates (once, then reuses) a ~2 GB record file of image records: a 24-byte IRHeader, a real
small JPEG (so image sizes can be sniffed) padded with random bytes to 20–200 KB, about the size
of training images. Then, each the median of 3 runs, page cache warm:

* time to compute 64 partitions (target < 0.5 s: only a few KB around each boundary are read);
* read throughput of one part of 4 (target >= 1 GB/s from page cache);
* ``recio inspect`` and ``recio verify`` (library scan and the installed command), MB/s
  (target >= 500 MB/s without image decoding).

    python benchmarks/bench_split.py [--size-gb 2] [--dir /tmp] [--keep]
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

import recio
from recio.records import framing
from recio.records.split import InputSplit
from recio.image.tools.stats import scan_file


def make_file(path: str, size: int, seed: int = 0) -> int:
    """Write image-like records until ``size`` bytes; returns the record count."""
    rng = np.random.default_rng(seed)
    noise = rng.bytes(1 << 20)
    jpegs = []
    for w, h in ((64, 48), (48, 64), (32, 32), (100, 75)):
        buf = io.BytesIO()
        Image.new("RGB", (w, h), (w, h, 90)).save(buf, format="JPEG")
        jpegs.append(buf.getvalue())
    count = 0
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        written = 0
        batch = []
        while written < size:
            body = jpegs[count % 4]
            n = int(rng.integers(20_000, 200_000))
            start = int(rng.integers(0, len(noise) - n))
            payload = recio.pack(recio.IRHeader(0, float(count % 1000), count, 0),
                                 body + noise[start:start + n])
            rec = framing.encode_record(payload)
            batch.append(rec)
            written += len(rec)
            count += 1
            if len(batch) >= 256:
                f.write(b"".join(batch))
                batch.clear()
        f.write(b"".join(batch))
    os.replace(tmp, path)
    return count


def median_time(fn, runs: int = 3):
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the generated file for next time")
    args = ap.parse_args()
    size = int(args.size_gb * (1 << 30))
    path = os.path.join(args.dir, f"recio_bench_split_{size}.rec")
    if not os.path.exists(path):
        t = time.perf_counter()
        n = make_file(path, size)
        print(f"generated {path}: {os.path.getsize(path) / 1e9:.2f} GB, {n} records "
              f"in {time.perf_counter() - t:.1f} s")
    total = os.path.getsize(path)
    mb = total / 1e6
    # warm the page cache
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass

    try:
        secs, parts = median_time(lambda: InputSplit.all_parts(path, 64))
        print(f"64 partitions of {total / 1e9:.2f} GB: {secs * 1000:.1f} ms "
              f"(target < 500 ms)")
        secs, _ = median_time(lambda: [InputSplit(path, k, 64) for k in (0, 31, 63)])
        print(f"  one worker's InputSplit(path, k, 64): {secs / 3 * 1000:.2f} ms each")

        part = InputSplit(path, 1, 4)
        secs, nread = median_time(lambda: sum(len(r) for r in part))
        print(f"read part 1/4 ({part.nbytes / 1e6:.0f} MB, default 4 MiB chunks): "
              f"{part.nbytes / secs / 1e9:.2f} GB/s (target >= 1 GB/s)")
        small = InputSplit(path, 1, 4, chunk_size=64 << 10)
        secs, _ = median_time(lambda: sum(len(r) for r in small))
        print(f"  with 64 KiB chunks (smaller than most records): "
              f"{part.nbytes / secs / 1e9:.2f} GB/s")
        secs, count = median_time(part.count_records)
        print(f"  count_records() of that part: {count} records in {secs * 1000:.1f} ms")

        secs, (st, _) = median_time(lambda: scan_file(path, sample=1000))
        print(f"inspect (library scan_file): {mb / secs:,.0f} MB/s over {st.records} records "
              f"(target >= 500 MB/s)")
        secs, (st, _) = median_time(lambda: scan_file(path, sample=0))
        print(f"verify (library, every byte searched for stray magic): {mb / secs:,.0f} MB/s "
              f"(target >= 500 MB/s); damage regions: {len(st.damage)}")
        exe = shutil.which("recio")
        if exe:
            for cmd in ("inspect", "verify"):
                secs, res = median_time(lambda: subprocess.run(
                    [exe, cmd, path, "--quiet"], capture_output=True, text=True))
                print(f"`recio {cmd}` (whole command, incl. start-up): {mb / secs:,.0f} MB/s "
                      f"(exit {res.returncode})")
    finally:
        if not args.keep:
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
