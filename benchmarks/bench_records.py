"""Core record throughput against real MXNet: write, sequential read, random keyed read.

For 200,000 records of 100 bytes and 3,000 of 100 KB, each case runs through recio's native API
and through ``recio.mx``, and the same case through ``mxnet.recordio`` in a child process
started with another interpreter (``--mxnet-python``, default ``$RECIO_MXNET_PYTHON``), one run
of each side in turn so both see the same machine load. Printed: the median of ``--runs`` runs
of recio, of MXNet, their ratio, and the target beside it. Both sides write over their own file
of the previous run (page cache warm); "write, new name" deletes it first (not timed). Before
each write run, ``os.sync()`` (not timed) lets the previous run's data reach the disk, so no run
pays for another's writeback.
Run: ``python benchmarks/bench_records.py [--runs 5] [--dir /tmp] [--mxnet-python PATH]``.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from typing import Callable, Dict, List, Optional, Tuple

import recio
from recio import mx

# absolute targets (records/s for small records, bytes/s for large ones), as before
TARGETS = {
    ("small", "write"): 1_000_000,
    ("small", "read"): 2_000_000,
    ("small", "read_batch"): 2_000_000,
    ("small", "random"): 800_000,
    ("large", "read"): 5e9,
}
# recio / MXNet on the same case: (kind, case) -> minimum ratio
RATIO_TARGETS = {
    ("small", "write"): 2.0, ("small", "write mx"): 3.0, ("small", "write mx, no index"): 3.0,
    ("large", "write"): 1.5, ("large", "write mx"): 1.5,
    ("large", "write, new name"): 1.5, ("large", "write mx, new name"): 1.5,
    ("small", "random mx"): 2.5,
}
# which MXNet case each recio case is compared with
MX_PEER = {"write": "write", "write mx": "write", "write mx, no index": "write_plain",
           "write, new name": "write_new",
           "write mx, new name": "write_new", "read": "read", "read mx": "read",
           "read, trust_lengths": "read",
           "read_batch": "read", "random": "random", "random read_many": "random",
           "random mx": "random"}

# The MXNet side: one timed run per request line "kind case count", answered with seconds.
MX_CHILD = r"""
import os, sys, time
from array import array
from mxnet import recordio

folder = sys.argv[1]
data = {}


def load(kind, count):
    if kind not in data:
        with open(os.path.join(folder, kind + ".payloads"), "rb") as f:
            blob = f.read()
        n = int(sys.argv[2] if kind == "small" else sys.argv[3])
        size = len(blob) // n
        distinct = [blob[i * size:(i + 1) * size] for i in range(n)]
        order = array("I")
        with open(os.path.join(folder, kind + ".order"), "rb") as f:
            order.frombytes(f.read())
        data[kind] = ([distinct[i % n] for i in range(count)], order.tolist(), {})
    return data[kind]


def remove(*paths):
    for p in paths:
        if os.path.exists(p):
            os.unlink(p)


print("ready", flush=True)
for line in sys.stdin:
    kind, case, count = line.split()
    payloads, order, opened = load(kind, int(count))
    rec, idx = os.path.join(folder, kind + ".rec"), os.path.join(folder, kind + ".idx")
    out_rec = os.path.join(folder, "mx_" + kind + ".rec")
    out_idx = os.path.join(folder, "mx_" + kind + ".idx")
    if case == "write_new":
        remove(out_rec, out_idx)
    if case.startswith("write"):
        os.sync()  # no earlier run's data still on its way to the disk
    if case == "random" and "r" not in opened:
        opened["r"] = recordio.MXIndexedRecordIO(idx, rec, "r")
    t0 = time.perf_counter()
    if case in ("write", "write_new"):
        w = recordio.MXIndexedRecordIO(out_idx, out_rec, "w")
        for i, p in enumerate(payloads):
            w.write_idx(i, p)
        w.close()
    elif case == "write_plain":
        w = recordio.MXRecordIO(out_rec, "w")
        for p in payloads:
            w.write(p)
        w.close()
    elif case == "read":
        r = recordio.MXRecordIO(rec, "r")
        read = r.read
        while read() is not None:
            pass
        r.close()
    elif case == "random":
        read_idx = opened["r"].read_idx
        for k in order:
            read_idx(k)
    print(time.perf_counter() - t0, flush=True)
"""


class MXNetPeer:
    """The child process running ``mxnet.recordio`` (or nothing when it cannot start)."""

    def __init__(self, python: Optional[str], folder: str, distinct: Dict[str, int]) -> None:
        self.proc: Optional[subprocess.Popen] = None
        self.why = "MXNet not available (pass --mxnet-python or set RECIO_MXNET_PYTHON)"
        if not python:
            return
        if not os.path.exists(python):
            self.why = f"MXNet not available: no interpreter {python}"
            return
        try:
            self.proc = subprocess.Popen(
                [python, "-c", MX_CHILD, folder, str(distinct["small"]), str(distinct["large"])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            first = self.proc.stdout.readline()
        except OSError as exc:
            self.proc, self.why = None, f"MXNet not available: {exc}"
            return
        if first.strip() != "ready":
            err = self.proc.stderr.read().strip().splitlines()
            self.proc = None
            self.why = "MXNet not available: " + (err[-1] if err else "the child did not start")

    def run(self, kind: str, case: str, count: int) -> Optional[float]:
        """Seconds of one run of ``case`` in MXNet, or None without MXNet."""
        if self.proc is None:
            return None
        self.proc.stdin.write(f"{kind} {case} {count}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the MXNet child died: " + self.proc.stderr.read()[-2000:])
        return float(line)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()


def _remove(*paths: str) -> None:
    for p in paths:
        if os.path.exists(p):
            os.unlink(p)


def bench(kind: str, count: int, size: int, folder: str, runs: int,
          peer: MXNetPeer, only: Optional[List[str]] = None
          ) -> Dict[str, Tuple[float, Optional[float]]]:
    """``{case: (recio seconds, MXNet seconds or None)}``, medians of ``runs`` runs."""
    distinct = [os.urandom(size) for _ in range(min(count, 1000))]
    payloads = [distinct[i % len(distinct)] for i in range(count)]
    rec, idx = os.path.join(folder, f"{kind}.rec"), os.path.join(folder, f"{kind}.idx")
    order = list(range(count))
    random.Random(0).shuffle(order)
    with open(os.path.join(folder, f"{kind}.payloads"), "wb") as f:
        f.write(b"".join(distinct))
    with open(os.path.join(folder, f"{kind}.order"), "wb") as f:
        f.write(array("I", order).tobytes())

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

    def write_mx_plain():
        w = mx.MXRecordIO(rec, "w")
        for p in payloads:
            w.write(p)
        w.close()

    def read_native():
        with recio.RecordReader(rec) as r:
            for _ in r:
                pass

    def read_trusting():  # the documented fast mode: no search for swallowed records
        with recio.RecordReader(rec, trust_lengths=True) as r:
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

    cases: List[Tuple[str, Callable[[], None], Optional[Callable[[], None]]]] = [
        ("write", write_native, None), ("write .rec only", write_rec_only, None),
        ("write mx", write_mx, None), ("write mx, no index", write_mx_plain, None),
        ("write, new name", write_native, lambda: _remove(rec, idx)),
        ("write mx, new name", write_mx, lambda: _remove(rec, idx)),
        ("read", read_native, None), ("read, trust_lengths", read_trusting, None),
        ("read_batch", read_batch, None),
        ("read mx", read_mx, None), ("random", random_native, None),
        ("random read_many", random_batch, None), ("random mx", random_mx, None),
        ("load .idx", load_index, None)]
    results: Dict[str, Tuple[float, Optional[float]]] = {}
    for name, fn, before in cases:
        if kind == "large" and (name.startswith("random") or name == "read_batch"):
            continue  # batches are for small records; large ones are best read one at a time
        if kind == "small" and name.endswith("new name"):
            continue  # only large files show the cost of replacing an old one
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        peer_case = MX_PEER.get(name)
        ours: List[float] = []
        theirs: List[float] = []
        for i in range(runs + 1):  # the first run of each side warms up and is not counted
            if peer_case is not None:
                t = peer.run(kind, peer_case, count)
                if i and t is not None:
                    theirs.append(t)
            if before is not None:
                before()
            if name.startswith("write"):
                os.sync()  # no earlier run's data still on its way to the disk
            t0 = time.perf_counter()
            fn()
            if i:
                ours.append(time.perf_counter() - t0)
        results[name] = (statistics.median(ours), statistics.median(theirs) if theirs else None)
    native_index.close()
    mx_index.close()
    write_native()
    return results


def _rate(kind: str, count: int, size: int, seconds: float, name: str = "") -> str:
    if name == "load .idx":  # one file, not a stream of records: its time
        return f"{seconds * 1e3:,.2f} ms"
    if kind == "large":
        return f"{count * size / seconds / 1e6:,.0f} MB/s"
    return f"{count / seconds:,.0f}/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to write the test files")
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                        help="a Python with mxnet installed (default $RECIO_MXNET_PYTHON)")
    parser.add_argument("--kinds", default="small,large", help="small, large or both")
    parser.add_argument("--cases", default="",
                        help="only the cases whose names start with these (comma-separated), "
                             "e.g. 'write mx' for write_idx and MXRecordIO.write")
    args = parser.parse_args()
    sizes = [s for s in [("small", 200_000, 100), ("large", 3_000, 100_000)]
             if s[0] in args.kinds.split(",")]
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; median of {args.runs} runs "
          f"per figure, recio and MXNet runs taken in turn")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        peer = MXNetPeer(args.mxnet_python, folder, {"small": 1000, "large": 1000})
        if peer.proc is None:
            print(peer.why)
        print(f"{'case':<26}{'recio':>14}{'MXNet':>14}{'ratio':>8}   target")
        try:
            for kind, count, size in sizes:
                results = bench(kind, count, size, folder, args.runs, peer,
                                [c.strip() for c in args.cases.split(",") if c.strip()])
                for name, (ours, theirs) in results.items():
                    notes = []
                    ratio = "" if theirs is None else f"{theirs / ours:.2f}x"
                    want = RATIO_TARGETS.get((kind, name))
                    if want is not None:
                        verdict = "" if theirs is None else \
                            (" OK" if theirs / ours >= want else " MISS")
                        notes.append(f">= {want:g}x MXNet{verdict}")
                    target = TARGETS.get((kind, name))
                    if target is not None:
                        rate = count * size / ours if kind == "large" else count / ours
                        shown = f"{target / 1e9:g} GB/s" if kind == "large" else f"{target:,}/s"
                        notes.append(f">= {shown} {'OK' if rate >= target else 'MISS'}")
                    if name == "read, trust_lengths" and "read" in results:  # the check's cost
                        cost = results["read"][0] / ours - 1
                        notes.append(f"the default read checks for swallowed records: "
                                     f"{cost:+.0%} time")
                    mxnet = "" if theirs is None else _rate(kind, count, size, theirs)
                    print(f"{kind + ' ' + name:<26}{_rate(kind, count, size, ours, name):>14}"
                          f"{mxnet:>14}{ratio:>8}   {'; '.join(notes)}")
        finally:
            peer.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MB (recio's process)")


if __name__ == "__main__":
    sys.exit(main())
