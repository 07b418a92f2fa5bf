"""CNTK Text Format: parse and ctf -> cbf conversion speed, against CNTK's ctf2bin.py.

Generates a CTF file (default 64 MB): sequences of 1..19 lines, each line a dense stream
``|F`` of 40 values (``%.5g``) and, on the first line and about a third of the others, a sparse
stream ``|L`` (dim 1000, 1..9 index:value pairs). Then times, each the median of --repeat runs:

- recio parse: ``CTFReader`` indexes the file and parses every chunk (float32 values).
- recio convert: ``python -m recio convert data.ctf data.cbf --header header.txt`` (the command
  as users run it, interpreter start included).
- ctf2bin.py: ``PYTHON ctf2bin.py --input data.ctf --header header.txt --chunk_size 33554432
  --output data.cbf``, only with ``--ctf2bin PATH``. ctf2bin.py is not part of recio: fetch it
  from github.com/microsoft/CNTK (Scripts/ctf2bin.py). The copy there (March 2017) fails under
  Python 3 on the first sparse sample; run it with ``--ctf2bin-python`` set to a Python 2.7,
  where it behaves as the July 2017 version shipped with CNTK 2.x does on this file.

Figures are MB/s of CTF text and samples/s (CNTK's sample count: lines). The target is to be
faster than ctf2bin.py. The file is read from the page cache (it was just written).

Usage: python benchmarks/bench_ctf.py [--size-mb 64] [--repeat 3] [--keep DIR]
       [--ctf2bin PATH [--ctf2bin-python PYTHON]]
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

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from recio.sequence.ctf import CTFReader
from recio.sequence.ctf_streams import read_header

DENSE_DIM, SPARSE_DIM = 40, 1000
HEADER = f"features\tF\tdense\t{DENSE_DIM}\nlabels\tL\tsparse\t{SPARSE_DIM}\n"


def generate(path: str, size_bytes: int) -> int:
    """Write the CTF file; returns its number of sequences."""
    rng = np.random.default_rng(0)
    written = sequences = 0
    with open(path, "w") as out:
        while written < size_bytes:
            lines = []
            for t in range(int(rng.integers(1, 20))):
                values = " ".join(f"{v:.5g}" for v in rng.standard_normal(DENSE_DIM))
                line = f"{sequences} |F {values}"
                if t == 0 or rng.random() < 0.3:
                    k = int(rng.integers(1, 10))
                    pairs = zip(rng.choice(SPARSE_DIM, k, replace=False), rng.random(k))
                    line += " |L " + " ".join(f"{i}:{v:.3g}" for i, v in pairs)
                lines.append(line)
            text = "\n".join(lines) + "\n"
            out.write(text)
            written += len(text)
            sequences += 1
    return sequences


def timed(fn, repeat: int):
    """Median wall seconds and fn's (last) result."""
    wall, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        wall.append(time.perf_counter() - start)
    return statistics.median(wall), result


def parse(path: str, header: str) -> int:
    reader = CTFReader(path, read_header(header))
    for i in range(reader.num_chunks):
        reader.read_chunk(i)
    return reader.num_samples


def run(argv) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default=None, help="folder for the files (kept)")
    parser.add_argument("--ctf2bin", default=None, help="path of CNTK's ctf2bin.py")
    parser.add_argument("--ctf2bin-python", default=sys.executable,
                        help="the Python that runs ctf2bin.py (a 2.7 for the March 2017 copy)")
    args = parser.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="bench_ctf_")
    os.makedirs(folder, exist_ok=True)
    try:
        data, header = os.path.join(folder, "data.ctf"), os.path.join(folder, "header.txt")
        with open(header, "w") as f:
            f.write(HEADER)
        sequences = generate(data, int(args.size_mb * 1e6))
        size = os.path.getsize(data)
        print(f"{data}: {size / 1e6:.1f} MB, {sequences:,} sequences; median of {args.repeat} "
              f"runs; load average {os.getloadavg()[0]:.2f} at the start")
        rows = []
        seconds, samples = timed(lambda: parse(data, header), args.repeat)
        rows.append(("recio parse (CTFReader)", seconds))
        out = os.path.join(folder, "recio.cbf")
        seconds, _ = timed(lambda: run([sys.executable, "-m", "recio", "convert", data, out,
                                        "--header", header, "--force", "--quiet"]),
                           args.repeat)
        rows.append(("recio convert ctf -> cbf", seconds))
        peer = None
        if args.ctf2bin:
            theirs = os.path.join(folder, "ctf2bin.cbf")
            peer, _ = timed(lambda: run([args.ctf2bin_python, args.ctf2bin, "--input", data,
                                         "--header", header, "--chunk_size", str(32 << 20),
                                         "--output", theirs]), args.repeat)
            rows.append(("ctf2bin.py", peer))
        print(f"{'case':28} {'seconds':>8} {'MB/s':>8} {'samples/s':>12}   target")
        for name, seconds in rows:
            if name == "ctf2bin.py":
                target = "(the peer)"
            elif peer is None:
                target = "faster than ctf2bin.py: not run (give --ctf2bin PATH)"
            else:
                target = (f"faster than ctf2bin.py: {peer / seconds:.1f}x "
                          f"{'OK' if seconds < peer else 'MISSED'}")
            print(f"{name:28} {seconds:8.2f} {size / 1e6 / seconds:8.1f} "
                  f"{samples / seconds:12,.0f}   {target}")
        if not args.ctf2bin:
            print(f"{'ctf2bin.py':28} not run (give --ctf2bin PATH)")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
