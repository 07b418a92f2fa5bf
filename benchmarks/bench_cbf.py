"""CBF read and conversion throughput.

Generates a CBF file (default 1 GB) with one dense stream (float32, dim 40) and one sparse
stream (float32, dim 10,000, about 5 non-zeros per sample), sequences of 1..100 samples, then
times, each the median of --repeat runs:

- read: every chunk loaded and decoded to per-sequence NumPy views (CBFReader), MB/s of file
  and of dense data, sequences/s. Target: >= 500 MB/s of dense data.
- cbf -> rec and rec -> cbf conversion (recio.sequence.convert), MB/s of input, sequences/s.

The file is read from the page cache when memory allows (it was just written); say so when
quoting. Usage: python benchmarks/bench_cbf.py [--size-mb 1024] [--repeat 3] [--keep DIR]
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from recio.sequence import Sparse
from recio.sequence.cbf import CBFReader, CBFWriter
from recio.sequence.cbf_format import StreamInfo
from recio.sequence.convert import cbf_to_rec, rec_to_cbf

DENSE_DIM, SPARSE_DIM, NNZ = 40, 10_000, 5
TARGET_DENSE_MBS = 500


def make_pool(rng: np.random.Generator, n: int):
    """``n`` random sequences, reused cyclically to fill the file quickly."""
    pool = []
    for _ in range(n):
        length = int(rng.integers(1, 101))
        counts = rng.poisson(NNZ, size=length).astype(np.int32)
        indices = np.concatenate([np.sort(rng.choice(SPARSE_DIM, c, replace=False))
                                  for c in counts]).astype(np.int32)
        pool.append({
            "features": rng.standard_normal((length, DENSE_DIM)).astype(np.float32),
            "labels": Sparse.from_counts(counts, indices,
                                         rng.random(len(indices), dtype=np.float32), SPARSE_DIM),
        })
    return pool


def generate(path: str, size_bytes: int, chunk_size: int) -> int:
    streams = [StreamInfo("features", "dense", np.float32, DENSE_DIM),
               StreamInfo("labels", "sparse", np.float32, SPARSE_DIM)]
    pool = make_pool(np.random.default_rng(0), 500)
    written = 0
    with CBFWriter(path, streams, chunk_size_bytes=chunk_size) as w:
        i = 0
        while w.tell() < size_bytes:
            w.write(pool[i % len(pool)])
            i += 1
        written = i
    return written


def timed(fn, repeat: int):
    """Median wall seconds, median CPU seconds of this process, and fn's result."""
    wall, cpu, result = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu), result


def read_all(path: str):
    reader = CBFReader(path)
    sequences = dense_bytes = 0
    for i in range(reader.num_chunks):
        for seq in reader.read_chunk(i):
            dense_bytes += seq["features"].nbytes
            sequences += 1
    return sequences, dense_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--chunk-mb", type=float, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="folder for the files (default: a temporary one)")
    args = parser.parse_args()

    folder = args.keep or tempfile.mkdtemp(prefix="bench_cbf_")
    os.makedirs(folder, exist_ok=True)
    cbf, rec, back = (os.path.join(folder, n) for n in ("data.cbf", "data.rec", "back.cbf"))
    try:
        start = time.perf_counter()
        n = generate(cbf, int(args.size_mb * 2**20), int(args.chunk_mb * 2**20))
        size = os.path.getsize(cbf)
        mb = size / 2**20
        print(f"generated {mb:.0f} MiB, {n} sequences, "
              f"{CBFReader(cbf).num_chunks} chunks in {time.perf_counter() - start:.1f} s "
              f"(dense dim {DENSE_DIM}, sparse dim {SPARSE_DIM} ~{NNZ} nnz; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")

        seconds, cpu, (seqs, dense) = timed(lambda: read_all(cbf), args.repeat)
        dense_rate = dense / 2**20 / seconds
        print(f"read:     {mb / seconds:7.0f} MiB/s of file, {dense_rate:7.0f} MiB/s of dense "
              f"data, {seqs / seconds:8.0f} sequences/s | per CPU second: {mb / cpu:6.0f} "
              f"MiB/s file, {dense / 2**20 / cpu:6.0f} MiB/s dense\n"
              f"          dense {dense / 1e6 / seconds:.0f} MB/s wall, {dense / 1e6 / cpu:.0f} "
              f"MB/s per CPU second; target >= {TARGET_DENSE_MBS} MB/s: "
              f"{'met' if dense / 1e6 / seconds >= TARGET_DENSE_MBS else 'NOT met'} (wall)")

        seconds, cpu, _ = timed(lambda: cbf_to_rec(cbf, rec), args.repeat)
        print(f"cbf->rec: {mb / seconds:7.0f} MiB/s of input, {n / seconds:8.0f} sequences/s "
              f"| per CPU second: {mb / cpu:6.0f} MiB/s ({os.path.getsize(rec) / 2**20:.0f} "
              f"MiB written)")

        rec_mb = os.path.getsize(rec) / 2**20
        seconds, cpu, _ = timed(lambda: rec_to_cbf(rec, back, int(args.chunk_mb * 2**20)),
                                args.repeat)
        print(f"rec->cbf: {rec_mb / seconds:7.0f} MiB/s of input, {n / seconds:8.0f} "
              f"sequences/s | per CPU second: {rec_mb / cpu:6.0f} MiB/s")
        print(f"round trip identical: {_same_file(cbf, back)}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def _same_file(a: str, b: str) -> bool:
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 24), fb.read(1 << 24)
            if x != y:
                return False
            if not x:
                return True


if __name__ == "__main__":
    main()
