"""Opening a big ``.idx``: time and memory of recio (native and ``recio.mx``) and MXNet.

Builds datasets the size of MS1M (5.8 million records) and WebFace42M (42 million) under
``--dir``, then, each open in a fresh process (the files are in the page cache, as on a second
epoch), prints the open time and the resident memory it added for

* ``IndexedRecordReader`` and ``recio.mx.MXIndexedRecordIO`` when parsing with the cache off
  (``RECIO_INDEX_CACHE=0``, e.g. a read-only folder), on the first open (parse and write the
  sidecar cache) and on later opens (map the cache),
* MXNet's ``MXIndexedRecordIO`` (``--mxnet-python``, default ``$RECIO_MXNET_PYTHON``; only at
  5.8M by default: at 42M it needs more memory than this machine has),

then random ``read_idx`` per second, and a forked worker (as a DataLoader's): how long its first
``read_idx`` takes and how much private memory it holds after 100,000 random reads. Each figure
is beside its target. The 5.8M records have 100-byte payloads (the ``read_idx`` target is for
100-byte records); the 42M ones 8-byte payloads.
Run: ``python benchmarks/bench_index.py [--runs 5] [--runs-large 2] [--dir /tmp]
[--sizes 5.8M,42M] [--mxnet-python PATH] [--keep]``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from recio.records.framing import MAGIC
from recio.records.index_cache import index_cache_path
from recio.records.index_format import write_index

#: MXNet at 5.8M records, a reference figure for when MXNet cannot run here
AUTHOR_MXNET = {"open_s": 2.7, "rss_mb": 734.0}
TARGETS = {"speedup": 4.0, "memory_share": 0.25, "read_idx_vs_mxnet": 2.5,
           "first_open_42m_s": 15.0, "later_open_42m_s": 1.0, "resident_42m_mb": 1024.0}
RANDOM_READS = 200_000
WORKER_READS = 100_000

CHILD = r"""
import json, os, random, sys, time
impl, rec, idx, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def rss_mb(field="VmRSS:"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0

def private_mb():
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total / 1024.0

if impl == "mxnet":
    from mxnet import recordio
    def make():
        return recordio.MXIndexedRecordIO(idx, rec, "r")
elif impl == "mx":
    from recio import mx as recordio
    def make():
        return recordio.MXIndexedRecordIO(idx, rec, "r")
else:
    from recio.records.indexed import IndexedRecordReader
    def make():
        return IndexedRecordReader(rec, idx)
import numpy  # both sides: imports are not part of the open
before = rss_mb()
t0 = time.perf_counter()
opened = make()
seconds = time.perf_counter() - t0
after = rss_mb()
out = {"open_s": seconds, "rss_before_mb": before, "rss_after_mb": after,
       "peak_mb": rss_mb("VmHWM:")}
if impl != "native" and len(sys.argv) > 5:
    rng = random.Random(0)
    keys = [rng.randrange(n) for _ in range(int(sys.argv[5]))]
    read_idx = opened.read_idx
    read_idx(0)
    t0 = time.perf_counter()
    for k in keys:
        read_idx(k)
    out["read_idx_per_s"] = len(keys) / (time.perf_counter() - t0)
    worker_keys = keys[:int(sys.argv[6])]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a DataLoader worker
        os.close(r)
        t0 = time.perf_counter()
        read_idx(worker_keys[0])
        first = time.perf_counter() - t0
        for k in worker_keys:
            read_idx(k)
        os.write(w, json.dumps({"first_read_s": first, "private_mb": private_mb()}).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    out["worker"] = json.loads(data)
print(json.dumps(out))
"""


def build(folder: str, n: int, payload: int) -> Dict[str, str]:
    """A ``.rec`` of ``n`` records of ``payload`` bytes (the key, then zeros) and its ``.idx``
    with keys ``0..n-1``, written with NumPy in blocks."""
    rec = os.path.join(folder, f"d{n}.rec")
    idx = os.path.join(folder, f"d{n}.idx")
    size = 8 + payload + (-payload & 3)
    block = 1 << 20
    with open(rec, "wb") as f:
        for start in range(0, n, block):
            count = min(block, n - start)
            records = np.zeros((count, size // 4), np.uint32)
            records[:, 0] = MAGIC
            records[:, 1] = payload
            keys = np.arange(start, start + count, dtype=np.uint64)
            records[:, 2] = (keys & 0xFFFFFFFF).astype(np.uint32)
            f.write(records.tobytes())
    write_index(idx, range(n), np.arange(n, dtype=np.int64) * size)
    return {"rec": rec, "idx": idx, "n": str(n)}


def run_child(python: str, impl: str, files: Dict[str, str], env_cache: str,
              reads: bool) -> dict:
    """One open in a fresh process: its figures as a dict."""
    env = dict(os.environ, RECIO_INDEX_CACHE=env_cache,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = [python, "-c", CHILD, impl, files["rec"], files["idx"], files["n"]]
    if reads:
        args += [str(RANDOM_READS), str(WORKER_READS)]
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{impl} child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_of(results: List[dict], *path: str) -> float:
    values = []
    for r in results:
        for p in path:
            r = r[p]
        values.append(r)
    return statistics.median(values)


def measure(python: str, impl: str, files: Dict[str, str], mode: str, runs: int,
            reads: bool) -> Dict[str, float]:
    """Medians over ``runs`` fresh processes; ``mode``: parse (no cache), first, later."""
    cache = index_cache_path(files["idx"])
    results = []
    for _ in range(runs):
        if mode in ("parse", "first") and os.path.exists(cache):
            os.unlink(cache)
        if mode == "later" and not os.path.exists(cache):
            run_child(python, impl, files, "", False)  # writes it
        results.append(run_child(python, impl, files, "0" if mode == "parse" else "", reads))
    out = {"open_s": median_of(results, "open_s"),
           "grew_mb": statistics.median(r["rss_after_mb"] - r["rss_before_mb"] for r in results),
           "rss_mb": median_of(results, "rss_after_mb"),
           "peak_grew_mb": statistics.median(r["peak_mb"] - r["rss_before_mb"] for r in results)}
    if reads:
        out["read_idx_per_s"] = median_of(results, "read_idx_per_s")
        out["worker_first_s"] = median_of(results, "worker", "first_read_s")
        out["worker_private_mb"] = median_of(results, "worker", "private_mb")
    return out


def mxnet_works(python: Optional[str]) -> Optional[str]:
    """None when ``python`` can import mxnet, else why not."""
    if not python:
        return "MXNet not available (pass --mxnet-python or set RECIO_MXNET_PYTHON)"
    if not os.path.exists(python):
        return f"MXNet not available: no interpreter {python}"
    done = subprocess.run([python, "-c", "import mxnet.recordio"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return "MXNet not available: " + (lines[-1] if lines else "import failed")
    return None


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure at 5.8M")
    parser.add_argument("--runs-large", type=int, default=2, help="runs per figure at 42M")
    parser.add_argument("--dir", default="/tmp", help="where to build the datasets")
    parser.add_argument("--sizes", default="5.8M,42M")
    parser.add_argument("--mxnet-python", default=os.environ.get("RECIO_MXNET_PYTHON"),
                        help="a Python with mxnet installed (default $RECIO_MXNET_PYTHON)")
    parser.add_argument("--mxnet-large", action="store_true",
                        help="also run MXNet at 42M (needs about 6 GB of free memory)")
    parser.add_argument("--keep", action="store_true", help="keep the datasets afterwards")
    args = parser.parse_args()
    no_mxnet = mxnet_works(args.mxnet_python)
    sizes = {"5.8M": (5_800_000, 100), "42M": (42_000_000, 8)}
    folder = tempfile.mkdtemp(prefix="bench_index_", dir=args.dir)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"load average before: {load}; {os.cpu_count()} cores; .idx files in the page cache")
    try:
        for label in args.sizes.split(","):
            n, payload = sizes[label]
            runs = args.runs if n < 10_000_000 else args.runs_large
            t0 = time.perf_counter()
            files = build(folder, n, payload)
            idx_mb = os.path.getsize(files["idx"]) / 1e6
            print(f"\n== {label} records: .idx {idx_mb:,.0f} MB, .rec "
                  f"{os.path.getsize(files['rec']) / 1e6:,.0f} MB ({payload}-byte records; built "
                  f"in {time.perf_counter() - t0:.0f} s); median of {runs} runs, each a fresh "
                  f"process")
            rows = {}
            for impl in ("native", "mx"):
                for mode in ("parse", "first", "later"):
                    rows[(impl, mode)] = measure(sys.executable, impl, files, mode, runs,
                                                 reads=impl == "mx" and mode == "later")
            peer = None
            if no_mxnet is None and (n < 10_000_000 or args.mxnet_large):
                peer = measure(args.mxnet_python, "mxnet", files, "parse", runs, reads=True)
            report(label, n, rows, peer, no_mxnet)
            if not args.keep:
                for path in (files["rec"], files["idx"], index_cache_path(files["idx"])):
                    if os.path.exists(path):
                        os.unlink(path)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    with open("/proc/loadavg") as f:
        print(f"\nload average after: {' '.join(f.read().split()[:3])}")


def report(label: str, n: int, rows: Dict[tuple, Dict[str, float]],
           peer: Optional[Dict[str, float]], no_mxnet: Optional[str]) -> None:
    """Print one size's table, each figure beside its target."""
    names = {"native": "IndexedRecordReader", "mx": "recio.mx"}
    modes = {"parse": "parse, no cache", "first": "first open (+cache)",
             "later": "later open (cache)"}
    print(f"{'':<42}{'open s':>9}{'+RSS MB':>9}{'+peak':>7}{'RSS MB':>8}   target "
          f"(+RSS: resident memory the open added; +peak: the most it added while opening)")
    if peer is not None:
        print(f"{'MXNet MXIndexedRecordIO':<42}{peer['open_s']:>9.3f}{peer['grew_mb']:>9.0f}"
              f"{peer['peak_grew_mb']:>7.0f}{peer['rss_mb']:>8.0f}   (the peer)")
        base_s, base_mb, source = peer["open_s"], peer["grew_mb"], "measured MXNet"
    else:
        print(f"MXNet: {no_mxnet or 'not run at this size'}")
        base_s, base_mb = AUTHOR_MXNET["open_s"], AUTHOR_MXNET["rss_mb"]
        source = "the author's MXNet figures"
    large = n >= 10_000_000
    for (impl, mode), row in rows.items():
        name = f"{names[impl]}: {modes[mode]}"
        if large:
            limit = TARGETS["first_open_42m_s"] if mode != "later" else TARGETS["later_open_42m_s"]
            ok_time = row["open_s"] <= limit
            ok_mem = row["rss_mb"] <= TARGETS["resident_42m_mb"]
            note = (f"<= {limit:.0f} s {verdict(ok_time)}; resident <= "
                    f"{TARGETS['resident_42m_mb']:.0f} MB {verdict(ok_mem)}")
        else:
            speed = base_s / row["open_s"]
            share = row["grew_mb"] / base_mb
            note = (f"{speed:,.1f}x faster (>= {TARGETS['speedup']:.0f}x "
                    f"{verdict(speed >= TARGETS['speedup'])}), "
                    f"{share:.2f} of the memory (<= {TARGETS['memory_share']:.2f} "
                    f"{verdict(share <= TARGETS['memory_share'])}) vs {source}")
        print(f"{name:<42}{row['open_s']:>9.3f}{row['grew_mb']:>9.0f}{row['peak_grew_mb']:>7.0f}"
              f"{row['rss_mb']:>8.0f}   {note}")
    mine = rows[("mx", "later")]
    print(f"random read_idx/s: recio.mx {mine['read_idx_per_s']:,.0f}", end="")
    if peer is not None:
        ratio = mine["read_idx_per_s"] / peer["read_idx_per_s"]
        print(f", MXNet {peer['read_idx_per_s']:,.0f}: {ratio:.2f}x (>= "
              f"{TARGETS['read_idx_vs_mxnet']} {verdict(ratio >= TARGETS['read_idx_vs_mxnet'])})")
    else:
        print(" (no MXNet to compare with)")
    print(f"forked worker, first read_idx s / private MB after {WORKER_READS:,} random reads: "
          f"recio.mx {mine['worker_first_s']:.4f} / {mine['worker_private_mb']:.0f}", end="")
    if peer is not None:
        print(f"; MXNet {peer['worker_first_s']:.3f} / {peer['worker_private_mb']:.0f}")
    else:
        print()


if __name__ == "__main__":
    main()
