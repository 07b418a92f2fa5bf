"""The local shard cache: epochs from a bucket through ``cache_dir=``, against a raw GET of the
same bytes, the same shards on local disk, and MosaicML Streaming's ``StreamingDataset``.

Starts a local S3 server (moto's server mode, ``pip install 'moto[server]' boto3`` with
``recio[remote,torch]``) on 127.0.0.1 in its own process, its request log kept to count GETs.
Writes a shard set of ``--size-mb`` (default 1,000 MB) of 50-150 KB records (image-sized) in
``--shards`` shards with ``recio.ShardWriter``, uploads it, keeps the local copy, and measures
with the real s3fs/botocore client (medians of ``--repeats`` runs; every run starts with an
empty cache folder):

1. **Raw sequential GET** of every shard, one after another (boto3's ``get_object`` body read
   in 8 MB blocks, nothing else done): the peer of epoch 1. Beside it, writing as many bytes
   into a new local file: every cache that keeps copies on this disk pays that in epoch 1
   (on some virtual machines new page-cache pages cost more than the download).
2. **Epoch 1 through the cache**: ``RecordIterableDataset(manifest URL, cache_dir=...,
   decode="raw", transform=len)`` iterated to the end, in the main process and with a
   DataLoader of 2 workers: MB/s as a fraction of the raw GET (target >= 0.8). Every reader
   here reads each record's bytes and hands on their length (as a training loader hands on a
   decoded tensor, not the bytes), so a DataLoader's workers do not measure the pickling of
   100 KB payloads; with workers the fraction of local reads is shown too.
3. **Epoch 2 through the cache** against the same reader on the local copy of the shards (no
   cache, no URL), the same way: fraction (target >= 0.9).
4. **Random keyed reads in epoch 2**: ``RecordDataset(manifest URL, cache_dir=...)`` read in a
   shuffling ``RecordSampler``'s order after an epoch through it, against ``RecordDataset`` on
   the local copy in the same order: records/s and fraction (target >= 0.9).
5. **GETs per epoch** (counted by the server, over every process) beside the shard count.
6. **Disk use under a limit**: the streaming reader (2 workers) for two epochs with
   ``cache_limit`` = ``--limit-shards`` shards; the folder's bytes (every file) are summed
   every 16 records: the peak against the limit plus one shard (target: never above;
   ``tests/records/shards/test_cache.py`` samples every millisecond).
7. **MosaicML Streaming** on the same bytes (MDS shards of the same records, the same shard
   size) when ``--streaming-python`` names a Python that has ``mosaicml-streaming`` (install it
   in its own virtualenv after ``pip install torch==2.13.0``, with the torch pin as a
   constraint: ``pip install -c <(echo torch==2.13.0) mosaicml-streaming``): epoch 1, epoch 2
   and keyed reads, side by side with recio's (``benchmarks/peer_streaming.py`` runs there).

The server shares the machine's cores with the client; the load line says how loaded it was.
Usage: ``python benchmarks/bench_cache.py [--size-mb 1000] [--shards 10] [--repeats 5]
[--streaming-python /path/to/venv/bin/python]``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np
from bench_remote import start_server
from peer_streaming import log_size

import recio
from recio.records.cache.shard_cache import ShardCache

BUCKET = "bench-cache"
HERE = os.path.dirname(os.path.abspath(__file__))


class Server:
    """moto in server mode on 127.0.0.1 (``bench_remote.start_server``), its request log in a
    file: GETs are counted there, over every process."""

    def __init__(self, folder: str) -> None:
        self.log = os.path.join(folder, "moto.log")
        self.proc, self.endpoint = start_server(self.log)

    def mark(self) -> int:
        return log_size(self.log)

    def gets(self, since: int, suffixes=(".rec", ".idx"), until: int = -1) -> int:
        """GETs of the files named ``*suffixes`` the server logged from ``since`` (to
        ``until``)."""
        end = self.mark() if until < 0 else until
        with open(self.log, "rb") as f:
            f.seek(since)
            text = f.read(end - since).decode("utf-8", "replace")
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the server colours some lines
        return sum(1 for path in re.findall(r'"GET (\S+) HTTP/', text)
                   if path.split("?")[0].endswith(suffixes))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def make_set(prefix: str, megabytes: int, shards: int, seed: int, blob: bool) -> tuple:
    """A shard set of IRHeader-packed random 50-150 KB records: ``(manifest, records)``. With
    ``blob`` the records also go, one after another, into ``PREFIX.blob`` with their offsets
    in ``PREFIX.offsets.npy`` (what the Streaming peer writes its MDS shards from)."""
    rng = np.random.default_rng(seed)
    pool = rng.bytes(1 << 22)
    total, n = megabytes * 1_000_000, 0
    out = open(prefix + ".blob", "wb") if blob else None
    offsets = [0]
    with recio.ShardWriter(prefix, max_bytes=-(-total // shards) + 200_000) as writer:
        written = 0
        while written < total:
            size = int(rng.integers(50_000, 150_000))
            start = int(rng.integers(0, len(pool) - size))
            record = recio.pack(recio.IRHeader(0, float(n), n, 0), pool[start:start + size])
            writer.write(n, record)
            if out is not None:
                out.write(record)
                offsets.append(offsets[-1] + len(record))
            n += 1
            written += len(record) + 8
    if out is not None:
        out.close()
        np.save(prefix + ".offsets.npy", np.asarray(offsets, np.int64))
    return writer.manifest, n


def upload(client, manifest, key_prefix: str) -> None:
    for shard in manifest.shards:
        for _, path, _, _ in shard.files():
            client.upload_file(path, BUCKET, f"{key_prefix}/{os.path.basename(path)}")
    client.upload_file(manifest.path, BUCKET, f"{key_prefix}/{os.path.basename(manifest.path)}")


def raw_get(client, keys) -> float:
    start = time.perf_counter()
    for key in keys:
        body = client.get_object(Bucket=BUCKET, Key=key)["Body"]
        while body.read(8 << 20):
            pass
    return time.perf_counter() - start


def write_new(folder: str, nbytes: int) -> float:
    """Seconds to write ``nbytes`` into a new local file in 512 KB writes (as the cache writes
    its copies), deleted afterwards: what any cache that keeps copies on this disk pays."""
    block = memoryview(bytearray(os.urandom(512 << 10)))
    path = os.path.join(folder, "write-test")
    start = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        for _ in range(nbytes // len(block)):
            f.write(block)
    seconds = time.perf_counter() - start
    os.unlink(path)
    return seconds


def stream_epoch(ds, workers: int, each=None) -> float:
    """Seconds to read every record of ``ds`` (a RecordIterableDataset); ``each()`` is called
    for every 16th record."""
    import torch

    start = time.perf_counter()
    records = ds if workers == 0 else torch.utils.data.DataLoader(ds, batch_size=None,
                                                                  num_workers=workers)
    for n, _ in enumerate(records):
        if each is not None and n % 16 == 0:
            each()
    return time.perf_counter() - start


def keyed_epoch(ds, order, workers: int) -> float:
    """Seconds to read the records of ``ds`` (a RecordDataset) in ``order``."""
    import torch

    start = time.perf_counter()
    if workers == 0:
        for i in order:
            ds[i]
    else:
        for _ in torch.utils.data.DataLoader(ds, sampler=order, batch_size=None,
                                             num_workers=workers):
            pass
    return time.perf_counter() - start


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit-shards", type=float, default=3.5)
    parser.add_argument("--streaming-python", default=os.environ.get("RECIO_STREAMING_PYTHON"),
                        help="a Python with mosaicml-streaming (the peer; skipped without it)")
    parser.add_argument("--tmp", default=None, help="where the local files go (default TMPDIR)")
    args = parser.parse_args()
    import boto3

    from recio.torch import RecordDataset, RecordIterableDataset, RecordSampler

    tmp = tempfile.mkdtemp(prefix="bench-cache-", dir=args.tmp)
    server = Server(tmp)
    try:
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        os.makedirs(os.path.join(tmp, "local"))
        manifest, n = make_set(os.path.join(tmp, "local", "train"), args.size_mb, args.shards, 0,
                               blob=bool(args.streaming_python))
        upload(client, manifest, "set")
        url, local = f"s3://{BUCKET}/set/train.manifest.json", manifest.path
        keys = [f"set/{os.path.basename(s.rec)}" for s in manifest.shards]
        nbytes = sum(s.rec_bytes for s in manifest.shards)
        biggest = max(s.rec_bytes for s in manifest.shards)
        shards = len(manifest.shards)
        print(f"# local S3 server: moto (server mode) at {server.endpoint}; load average "
              f"{os.getloadavg()[0]:.2f} before the runs; {os.cpu_count()} cores")
        print(f"# {nbytes / 1e6:,.0f} MB in {shards} shards of up to {biggest / 1e6:,.0f} MB, "
              f"{n:,} records; medians of {args.repeats} runs, each from an empty cache")
        figures: dict = {}

        def add(name: str, value: float) -> None:
            figures.setdefault(name, []).append(value)

        for r in range(args.repeats):
            add("raw", nbytes / raw_get(client, keys))
            add("write", nbytes / write_new(tmp, nbytes))
            for workers in (0, args.workers):
                folder = os.path.join(tmp, f"cache-{r}-{workers}")
                ds = RecordIterableDataset(url, decode="raw", transform=len, cache_dir=folder)
                mark = server.mark()
                add(f"e1 w{workers}", nbytes / stream_epoch(ds, workers))
                add(f"e1 gets w{workers}", server.gets(mark))
                mark = server.mark()
                add(f"e2 w{workers}", nbytes / stream_epoch(ds, workers))
                add(f"e2 gets w{workers}", server.gets(mark))
                add(f"local w{workers}", nbytes / stream_epoch(
                    RecordIterableDataset(local, decode="raw", transform=len), workers))
                add(f"e1/raw w{workers}", figures[f"e1 w{workers}"][-1] / figures["raw"][-1])
                add(f"e2/local w{workers}",
                    figures[f"e2 w{workers}"][-1] / figures[f"local w{workers}"][-1])
                shutil.rmtree(folder)
                # keyed: an epoch in a shuffled order from an empty cache, then the next one
                mark = server.mark()
                keyed = RecordDataset(url, decode="raw", transform=len, cache_dir=folder)
                sampler = RecordSampler(keyed, seed=r)
                add(f"k1 w{workers}", n / keyed_epoch(keyed, sampler, workers))
                add(f"k1 gets w{workers}", server.gets(mark))
                second = RecordSampler(n, seed=r)
                second.set_epoch(1)
                order = list(second)
                mark = server.mark()
                add(f"k2 w{workers}", n / keyed_epoch(keyed, order, workers))
                add(f"k2 gets w{workers}", server.gets(mark))
                plain = RecordDataset(local, decode="raw", transform=len)
                add(f"klocal w{workers}", n / keyed_epoch(plain, order, workers))
                add(f"k2/local w{workers}",
                    figures[f"k2 w{workers}"][-1] / figures[f"klocal w{workers}"][-1])
                shutil.rmtree(folder)
        med = {k: statistics.median(v) for k, v in figures.items()}
        raw = med["raw"]
        print(f"raw sequential GET of every shard          {raw / 1e6:8.0f} MB/s")
        print(f"writing as many bytes to a new local file  {med['write'] / 1e6:8.0f} MB/s  (what "
              f"any cache on this disk pays in epoch 1: new pages of the page cache)")
        for w in (0, args.workers):
            where = "main process" if w == 0 else f"DataLoader, {w} workers"
            print(f"-- RecordIterableDataset, {where}")
            print(f"epoch 1 through the cache                  {med[f'e1 w{w}'] / 1e6:8.0f} MB/s "
                  f"= "
                  f"{med[f'e1/raw w{w}']:.2f} of the raw GET (target >= 0.80) "
                  f"{verdict(med[f'e1/raw w{w}'] >= 0.8)}"
                  + (f"; {med[f'e1 w{w}'] / med[f'local w{w}']:.2f} of local reads" if w else ""))
            print(f"epoch 2 through the cache                  {med[f'e2 w{w}'] / 1e6:8.0f} MB/s "
                  f"= "
                  f"{med[f'e2/local w{w}']:.2f} of local disk (target >= 0.90) "
                  f"{verdict(med[f'e2/local w{w}'] >= 0.9)}")
            print(f"the same shards on local disk, no cache    "
                  f"{med[f'local w{w}'] / 1e6:8.0f} MB/s")
            print(f"GETs of shard files, epoch 1 / epoch 2     {med[f'e1 gets w{w}']:4.0f} / "
                  f"{med[f'e2 gets w{w}']:.0f}  ({shards} shards; target {shards} / 0) "
                  f"{verdict(med[f'e1 gets w{w}'] == shards and med[f'e2 gets w{w}'] == 0)}")
            print(f"-- RecordDataset + RecordSampler (shuffled), {where}")
            print(f"keyed epoch 1 through the cache            {med[f'k1 w{w}']:8.0f} records/s"
                  f" "
                  f"(GETs {med[f'k1 gets w{w}']:.0f}: each shard's .rec and .idx once = "
                  f"{2 * shards}) {verdict(med[f'k1 gets w{w}'] == 2 * shards)}")
            print(f"keyed epoch 2 through the cache            {med[f'k2 w{w}']:8.0f} records/s"
                  f" = "
                  f"{med[f'k2/local w{w}']:.2f} of local keyed reads (target >= 0.90) "
                  f"{verdict(med[f'k2/local w{w}'] >= 0.9)}")
            print(f"local keyed reads, no cache                {med[f'klocal w{w}']:8.0f} "
                  f"records/s")
            print(f"GETs of shard files, keyed epoch 2         {med[f'k2 gets w{w}']:4.0f}  "
                  f"(target 0) {verdict(med[f'k2 gets w{w}'] == 0)}")
        # disk use under a limit
        limit = int(args.limit_shards * biggest)
        folder = os.path.join(tmp, "cache-limit")
        ds = RecordIterableDataset(url, decode="raw", transform=len, cache_dir=folder,
                                   cache_limit=limit)
        gets, peak = [], [0]

        def disk_use() -> None:  # every file in the folder, the cache's own too
            total = 0
            for entry in os.scandir(folder):
                try:
                    total += entry.stat().st_size if entry.is_file() else 0
                except FileNotFoundError:  # renamed or evicted since it was listed
                    pass
            peak[0] = max(peak[0], total)

        for epoch in range(2):
            mark = server.mark()
            stream_epoch(ds, args.workers, disk_use)
            gets.append(server.gets(mark, (".rec",)))
        totals = ShardCache(folder).totals()
        print(f"-- cache_limit {limit / 1e6:,.0f} MB ({args.limit_shards} shards), "
              f"RecordIterableDataset, {args.workers} workers, 2 epochs")
        print(f"peak bytes in the cache folder             {peak[0] / 1e6:8.0f} MB (limit + "
              f"one shard = {(limit + biggest) / 1e6:,.0f} MB; sampled every 16 records) "
              f"{verdict(peak[0] <= limit + biggest)}")
        print(f"GETs of .rec files, epoch 1 / epoch 2      {gets[0]:4d} / {gets[1]}  ({shards} "
              f"shards; downloads {totals['downloads']}, evictions {totals['evictions']})")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process                   {peak:8.0f} MiB")
        if args.streaming_python:
            streaming_peer(args, tmp, server, manifest, n, biggest, med)
        else:
            print("-- MosaicML Streaming: not run (--streaming-python names a Python with "
                  "mosaicml-streaming)")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def streaming_peer(args, tmp: str, server: Server, manifest, n: int, biggest: int,
                   med: dict) -> None:
    """MosaicML Streaming on MDS shards of the same records, in its own virtualenv."""
    from recio.torch import RecordSampler

    prefix = os.path.join(os.path.dirname(manifest.path), "train")
    order = np.asarray(list(RecordSampler(n, seed=0)), np.int64)
    np.save(os.path.join(tmp, "order.npy"), order)
    proc = subprocess.run(
        [args.streaming_python, os.path.join(HERE, "peer_streaming.py"), "--bucket", BUCKET,
         "--blob", prefix + ".blob", "--offsets", prefix + ".offsets.npy",
         "--order", os.path.join(tmp, "order.npy"), "--shard-bytes", str(biggest),
         "--repeats", str(args.repeats), "--workers", str(args.workers), "--tmp", tmp,
         "--log", server.log],
        capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        print(f"-- MosaicML Streaming failed:\n{proc.stderr.strip()[-3000:]}")
        return
    peer = json.loads(proc.stdout.strip().splitlines()[-1])
    nbytes = peer["bytes"]
    peer_gets = statistics.median(server.gets(a, (".mds", "index.json"), b)
                                  for a, b in peer["epoch1_log_ranges"])
    print(f"-- MosaicML Streaming {peer['version']} (StreamingDataset, MDS shards of the same "
          f"records, {peer['shards']} shards), side by side with recio")
    print("                                           recio       Streaming")
    for w in (0, args.workers):
        where = "main process" if w == 0 else f"{w} workers"
        print(f"epoch 1, {where:24s}          {med[f'e1 w{w}'] / 1e6:6.0f} MB/s   "
              f"{nbytes / peer[f'e1 w{w}'] / 1e6:6.0f} MB/s")
        print(f"epoch 2, {where:24s}          {med[f'e2 w{w}'] / 1e6:6.0f} MB/s   "
              f"{nbytes / peer[f'e2 w{w}'] / 1e6:6.0f} MB/s")
    print(f"keyed epoch 2, main process               {med['k2 w0']:6.0f} /s      "
          f"{n / peer['k2 w0']:6.0f} /s")
    print(f"GETs of the set's files in epoch 1         {med['e1 gets w0']:6.0f}        "
          f"{peer_gets:6.0f}   (recio: .rec; Streaming: .mds and index.json)")


if __name__ == "__main__":
    main()
