"""``recio repair``: how fast the intact records of a damaged file are rescued.

Writes a file of image-like records (an image header and 20-200 KB of payload ending like a
JPEG) with its ``.idx`` under ``--dir``, then damages copies of it three ways: cut short
(the commonest: a copy or download that stopped), a zeroed range in the middle, and one byte
inserted in the middle (the records after it move off the 4-byte grid and are found in a
second segment). For each it prints the median time of ``recio.image.tools.repair.repair`` over
``--repeats`` runs as MB/s of input and records/s, beside ``verify_file``'s scan of the same
file (what a user runs first) and the target. The file is in the page cache (a second read).
Run: ``python benchmarks/bench_repair.py [--mb 1000] [--repeats 3] [--dir /tmp] [--keep]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import recio
from recio.image.tools.repair import repair
from recio.image.tools.verify import verify_file

#: repair should cost about what a full scan costs (it scans, then copies each record once)
TARGET_MB_S = 300.0


def make_file(folder: str, mb: int) -> str:
    """``clean.rec`` + ``.idx`` of about ``mb`` MB of image-like records; returns its path."""
    rng = np.random.default_rng(0)
    rec = os.path.join(folder, "clean.rec")
    block = rng.integers(0, 255, 1 << 22, dtype=np.uint8).tobytes().replace(b"\xff", b"\x7f")
    written, key = 0, 0
    with recio.IndexedRecordWriter(rec, os.path.join(folder, "clean.idx")) as w:
        while written < mb * 1_000_000:
            size = int(rng.integers(20_000, 200_000))
            start = int(rng.integers(0, len(block) - size))
            body = b"\xff\xd8\xff" + block[start:start + size] + b"\xff\xd9"
            w.write(key, recio.pack(recio.IRHeader(0, float(key % 10), key, 0), body))
            written += size
            key += 1
    return rec


def damaged(folder: str, clean: str, how: str) -> str:
    """A copy of ``clean`` (with its .idx) damaged ``how``."""
    data = bytearray(open(clean, "rb").read())
    middle = len(data) // 2
    if how == "cut":
        data = data[:len(data) - len(data) // 7]
    elif how == "zeroed":
        data[middle:middle + 100_000] = bytes(100_000)
    else:
        data[middle:middle] = b"\x5a"
    path = os.path.join(folder, f"{how}.rec")
    with open(path, "wb") as f:
        f.write(data)
    shutil.copy(os.path.splitext(clean)[0] + ".idx", os.path.splitext(path)[0] + ".idx")
    return path


def median_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="size of the file (MB)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--dir", default=None, help="where to write the files")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="bench-repair-", dir=args.dir)
    try:
        clean = make_file(folder, args.mb)
        records = len(recio.IndexedRecordReader(clean))
        print(f"{os.path.getsize(clean) / 1e6:,.0f} MB, {records:,} records; median of "
              f"{args.repeats}; target >= {TARGET_MB_S:,.0f} MB/s")
        for how in ("cut", "zeroed", "inserted"):
            path = damaged(folder, clean, how)
            mb = os.path.getsize(path) / 1e6
            out = os.path.join(folder, "out")
            scan = median_seconds(lambda: verify_file(path), args.repeats)
            result = None

            def rescue():
                nonlocal result
                result = repair(path, out, force=True)

            secs = median_seconds(rescue, args.repeats)
            print(f"{how:>9}: repair {mb / secs:8,.0f} MB/s {result.records / secs:9,.0f} "
                  f"records/s ({result.records:,} rescued, {result.dropped_bytes:,} bytes "
                  f"dropped) | verify {mb / scan:8,.0f} MB/s | target >= {TARGET_MB_S:,.0f} MB/s")
    finally:
        if args.keep:
            print(f"files kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
