"""Reading RecordIO from object storage: recio against the server's own raw GET.

Starts a local S3 server (moto's server mode, ``pip install 'moto[server]' boto3``, with
``recio[remote]``) on 127.0.0.1 in its own process and measures, with the real s3fs/botocore
client:

1. **Sequential read** of a ``--size-mb`` (default 1,000 MB) ``.rec`` of 50-150 KB records
   (image-sized): ``RecordReader(url)`` iterated to the end (every record checked and copied
   out), as MB/s and as a fraction of the server's raw single-object GET throughput (boto3's
   ``get_object`` body read in 8 MB blocks, nothing else done). Target >= 0.8.
2. **Keyed random reads** through ``IndexedRecordReader(url)[key]`` with 1, 8 and 32 threads
   reading at once (records/s). These use a separate ``--keyed-mb`` (default 8 MB) object:
   moto answers a ranged GET by reading the whole object first (its cost grows with the
   object, unlike S3's), so the figure measures recio and the protocol, not moto's copy of 1 GB
   per request.
3. **GETs per record**: requests recio sent for single keyed reads (target 1.0) and for
   batched ``read_many`` of 64 random keys and of 64 neighbouring keys, whose ranges are
   coalesced and fetched concurrently (target < 1).

Each figure is the median of ``--repeats`` runs (the raw GET and recio's read alternate). The
server shares this machine's cores with the client: moto is a Python server and takes about one
core at these rates, which the printed load line shows.
Usage: ``python benchmarks/bench_remote.py [--size-mb 1000] [--repeats 5]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Optional
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from recio import IndexedRecordWriter
from recio.records.indexed import IndexedRecordReader
from recio.records.reader import RecordReader

BUCKET = "bench"


def start_server(log: Optional[str] = None) -> tuple:
    """moto's S3 server on 127.0.0.1 and this process's environment pointed at it:
    ``(process, endpoint)``. ``log``: a file for the server's request log."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(log or os.devnull, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                 str(port)], stdout=subprocess.DEVNULL, stderr=out)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_EC2_METADATA_DISABLED="true")
    return proc, endpoint


def make_rec(path: str, megabytes: int, seed: int) -> int:
    """A .rec (+ .idx) of random 50-150 KB records; returns the record count."""
    rng = np.random.default_rng(seed)
    pool = rng.bytes(1 << 22)
    n, total = 0, 0
    with IndexedRecordWriter(path, path[:-4] + ".idx") as writer:
        while total < megabytes * 1_000_000:
            size = int(rng.integers(50_000, 150_000))
            start = int(rng.integers(0, len(pool) - size))
            writer.write(n, pool[start:start + size])
            n += 1
            total += size + 8
    return n


def raw_get(client, key: str) -> float:
    start = time.perf_counter()
    body = client.get_object(Bucket=BUCKET, Key=key)["Body"]
    while body.read(8 << 20):
        pass
    return time.perf_counter() - start


def recio_scan(url: str) -> float:
    start = time.perf_counter()
    with RecordReader(url) as reader:
        for _ in reader:
            pass
    return time.perf_counter() - start


def keyed(url: str, n_records: int, threads: int, reads: int) -> float:
    """Random keyed reads per second with ``threads`` readers sharing one reader object."""
    rng = np.random.default_rng(threads)
    keys = rng.integers(0, n_records, reads).tolist()
    with IndexedRecordReader(url) as reader:
        reader[keys[0]]  # the index is loaded; the connection pool warm
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            for _ in pool.map(reader.__getitem__, keys):
                pass
        return reads / (time.perf_counter() - start)


def gets_per_record(url: str, n_records: int) -> dict:
    rng = np.random.default_rng(7)
    out = {}
    with IndexedRecordReader(url) as reader:
        remote = reader.reader.source.file
        keys = rng.integers(0, n_records, 200).tolist()
        before = remote.requests
        for key in keys:
            reader[key]
        # the same keys twice would hit the block cache: count distinct ones
        out["single"] = (remote.requests - before) / len(set(keys))
    with IndexedRecordReader(url) as reader:
        remote = reader.reader.source.file
        batch = sorted(set(rng.integers(0, n_records, 64).tolist()))
        before = remote.requests
        reader.read_many(batch)
        out["batch of 64 random"] = (remote.requests - before) / len(batch)
    with IndexedRecordReader(url) as reader:
        remote = reader.reader.source.file
        first = int(rng.integers(0, n_records - 64))
        before = remote.requests
        reader.read_many(range(first, first + 64))
        out["batch of 64 neighbours"] = (remote.requests - before) / 64
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--keyed-mb", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    import boto3

    proc, endpoint = start_server()
    try:
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        with tempfile.TemporaryDirectory() as tmp:
            big = os.path.join(tmp, "big.rec")
            small = os.path.join(tmp, "keyed.rec")
            make_rec(big, args.size_mb, 0)
            n_small = make_rec(small, args.keyed_mb, 1)
            for path in (big, big[:-4] + ".idx", small, small[:-4] + ".idx"):
                client.upload_file(path, BUCKET, os.path.basename(path))
            size = os.path.getsize(big)
        print(f"# local S3 server: moto (server mode) at {endpoint}; load average "
              f"{os.getloadavg()[0]:.2f} before the runs; {os.cpu_count()} cores")
        print(f"# sequential: {size / 1e6:,.0f} MB object; keyed: {args.keyed_mb} MB object, "
              f"{n_small} records; medians of {args.repeats} runs")
        raw, ours = [], []
        for _ in range(args.repeats):
            raw.append(size / raw_get(client, "big.rec") / 1e6)
            ours.append(size / recio_scan(f"s3://{BUCKET}/big.rec") / 1e6)
        raw_mb, ours_mb = statistics.median(raw), statistics.median(ours)
        fraction = statistics.median([o / r for o, r in zip(ours, raw)])
        print(f"raw single-object GET            {raw_mb:8.0f} MB/s")
        print(f"recio sequential read (checked)  {ours_mb:8.0f} MB/s = {fraction:.2f} of raw "
              f"GET (target >= 0.80) {'OK' if fraction >= 0.8 else 'MISSED'}")
        url = f"s3://{BUCKET}/keyed.rec"
        for threads in (1, 8, 32):
            rates = [keyed(url, n_small, threads, args.reads) for _ in range(args.repeats)]
            print(f"keyed random reads, {threads:2d} at once     {statistics.median(rates):8.0f} "
                  f"records/s")
        for name, value in gets_per_record(url, n_small).items():
            target = "1.0" if name == "single" else "< 1"
            ok = value <= 1.0 if name == "single" else value < 1
            print(f"GETs per record, {name:22s} {value:5.2f} (target {target}) "
                  f"{'OK' if ok else 'MISSED'}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process         {peak:8.0f} MiB")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
