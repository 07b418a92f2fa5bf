"""The local shard cache (``recio.records.cache.shard_cache``) against a real S3 API on 127.0.0.1.

Readers of a bucket given ``cache_dir=`` download each shard once (one GET), check it against the
manifest, and read later epochs from local disk. GETs are counted by the S3 server itself (its
request log), so the counts cover every process: DataLoader workers (forked and spawned), other
processes sharing the folder, the main process's prefetch. Disk use is watched by a thread that
sums the folder's files while the readers run.
"""
import collections
import hashlib
import os
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from typing import List

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recio
from recio.records.cache.shard_cache import CACHE_DIR_ENV, CACHE_LIMIT_ENV, ShardCache
from recio.records.cache.folder import copy_name
from recio.records.indexed import IndexedRecordReader
from recio.records.reader import RecordReader
from recio.records.split import InputSplit

pytestmark = pytest.mark.posix_only("the shard cache needs POSIX file locks (fcntl.flock); on "
                                    "Windows it refuses in one line (tests/meta/test_platforms.py)")

SHARDS, PER_SHARD = 6, 40
N = SHARDS * PER_SHARD


@dataclass
class Bucket:
    """A shard set in the bucket: its manifest's URL, the records (IRHeader-packed) in manifest
    order, the manifest, and the server."""

    server: object
    url: str
    payloads: List[bytes]
    manifest: object

    @property
    def images(self) -> List[bytes]:
        """What ``decode="raw"`` gives for each record."""
        return [recio.unpack(p)[1] for p in self.payloads]

    def rec(self, n: int) -> str:
        return self.manifest.shards[n].rec


@pytest.fixture(scope="module")
def dataset(s3_server):
    bucket = s3_server.bucket("cache-set")
    rng = np.random.default_rng(5)
    payloads = []
    with recio.ShardWriter(f"{bucket}/set/train", max_records=PER_SHARD,
                           checksums=True) as writer:
        for i in range(N):  # small PNGs of noise: 0.2 to 7 KB
            side = int(rng.integers(8, 48))
            image = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
            payload = recio.pack_img(recio.IRHeader(0, float(i), i, 0), image, img_fmt=".png")
            payloads.append(payload)
            writer.write(i, payload)
    return Bucket(s3_server, writer.manifest.path, payloads, writer.manifest)


def gets(server, since):
    """How many GETs each object (by name) got since the mark ``since``."""
    return collections.Counter(path.split("?")[0].rsplit("/", 1)[-1]
                               for method, path in server.requests(since) if method == "GET")


def shard_gets(dataset, since, suffix=".rec"):
    """GETs of each shard's ``suffix`` file since ``since``, in shard order."""
    counted = gets(dataset.server, since)
    return [counted[os.path.basename(s.rec)[:-4] + suffix] for s in dataset.manifest.shards]


class DiskWatch:
    """The largest number of bytes the cache folder held while the ``with`` block ran."""

    def __init__(self, folder) -> None:
        self.folder, self.peak, self._stop = str(folder), 0, threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for name in os.listdir(self.folder):
                try:
                    total += os.path.getsize(os.path.join(self.folder, name))
                except FileNotFoundError:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.001)

    def __enter__(self) -> "DiskWatch":
        os.makedirs(self.folder, exist_ok=True)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _loader(ds, workers, **kw):
    import torch

    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, **kw)


# -- training: two epochs from the bucket -------------------------------------------------------
@pytest.mark.needs("torch")
def test_two_epochs_of_keyed_random_reads(dataset, tmp_path, start_method):
    """RecordDataset + a shuffling RecordSampler, 2 workers: epoch 1 downloads each shard (and
    its index) exactly once; epoch 2 sends the bucket nothing; every record comes once, in the
    sampler's order, with its bytes."""
    from recio.torch import RecordDataset, RecordSampler

    server, images = dataset.server, dataset.images
    ds = RecordDataset(dataset.url, decode="raw", cache_dir=tmp_path / "cache")
    sampler = RecordSampler(ds, seed=11)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        order = RecordSampler(N, seed=11)
        order.set_epoch(epoch)
        mark = server.mark()
        with DiskWatch(tmp_path / "cache") as disk:
            got = [(int(y), bytes(x)) for x, y in _loader(ds, 2, sampler=sampler)]
        assert [k for k, _ in got] == list(order)  # each record once, in the sampler's order
        assert all(x == images[k] for k, x in got)
        if epoch == 0:
            assert shard_gets(dataset, mark) == [1] * SHARDS
        else:
            assert server.requests(mark) == []  # local disk only
    held = sum(s.rec_bytes + s.idx_bytes for s in dataset.manifest.shards)
    assert disk.peak <= held + 4096  # the copies, their records and the folder's own files
    totals = ShardCache(tmp_path / "cache").totals()
    assert totals["downloads"] == 2 * SHARDS and totals["damaged"] == 0


@pytest.mark.needs("torch")
def test_two_epochs_of_streaming_under_a_limit(dataset, tmp_path, start_method):
    """RecordIterableDataset (2 workers, a shuffle buffer) with a limit of 2.5 shards: every
    record once in each epoch and the folder never above the limit plus one shard. The two
    workers read one shard each and want two more ahead, more than the limit holds, so a shard
    may be downloaded twice in an epoch (the one their parts share, which each reads at
    another time, and one a worker's demand evicted before the other reached it), never more
    than twice; a shard still in the folder when an epoch starts may not be downloaded in it.
    Without a limit: each shard once in epoch 1, nothing in epoch 2."""
    from recio.torch import RecordIterableDataset

    server, images = dataset.server, dataset.images
    biggest = max(s.rec_bytes for s in dataset.manifest.shards)
    limit = int(2.5 * biggest)
    for cache_limit in (limit, None):
        folder = tmp_path / f"cache-{cache_limit}"
        ds = RecordIterableDataset(dataset.url, decode="raw", shuffle_buffer=16, seed=3,
                                   cache_dir=folder, cache_limit=cache_limit)
        done = 0
        for epoch in (0, 1):
            ds.set_epoch(epoch)
            mark = server.mark()
            # under the limit, epoch 1's last shards may still be here for epoch 2
            kept = [(folder / copy_name(dataset.rec(i))).exists() for i in range(SHARDS)]
            with DiskWatch(folder) as disk:
                got = [(int(y), bytes(x)) for x, y in _loader(ds, 2)]
            assert sorted(k for k, _ in got) == list(range(N))
            assert all(x == images[k] for k, x in got)
            if cache_limit is not None:  # some shards twice (see the docstring), none more
                downloads = ShardCache(folder).totals()["downloads"]
                assert SHARDS - sum(kept) <= downloads - done <= 2 * SHARDS
                assert all(n >= 1 for n, here in zip(shard_gets(dataset, mark), kept)
                           if not here)
                done = downloads
            elif epoch == 0:
                assert shard_gets(dataset, mark) == [1] * SHARDS
            else:
                assert server.requests(mark) == []
            if cache_limit is not None:
                assert disk.peak <= cache_limit + biggest
        if cache_limit is not None:
            assert ShardCache(folder).totals()["evictions"] > 0


def test_processes_on_a_node_share_one_cache(dataset, tmp_path):
    """Four processes read the set through one folder at once: each shard and index is
    downloaded once in all, and every process reads every record."""
    script = ("import hashlib, sys, recio\n"
              "with recio.ShardReader(sys.argv[1], cache_dir=sys.argv[2]) as reader:\n"
              "    print(hashlib.sha256(b''.join(reader)).hexdigest())\n")
    mark = dataset.server.mark()
    procs = [subprocess.Popen([sys.executable, "-c", script, dataset.url, str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
    digest = hashlib.sha256(b"".join(dataset.payloads)).hexdigest()
    assert [out.strip() for out, _ in results] == [digest] * 4
    assert shard_gets(dataset, mark) == [1] * SHARDS
    assert shard_gets(dataset, mark, ".idx") == [1] * SHARDS
    totals = ShardCache(tmp_path).totals()
    assert totals["downloads"] == 2 * SHARDS
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".part")]


# -- checking ------------------------------------------------------------------------------------
def test_a_damaged_copy_is_downloaded_again(dataset, tmp_path):
    with recio.ShardReader(dataset.url, cache_dir=tmp_path) as reader:
        assert list(reader) == dataset.payloads
    copy = tmp_path / copy_name(dataset.rec(2))
    before = os.stat(copy)
    with open(copy, "r+b") as f:  # one byte changed, its mtime put back: the ctime tells
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0x20]))
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    mark = dataset.server.mark()
    with recio.ShardReader(dataset.url, cache_dir=tmp_path) as reader:
        assert list(reader) == dataset.payloads
    assert gets(dataset.server, mark) == {"train.manifest.json": 1, "train-00002.rec": 1}
    assert ShardCache(tmp_path).totals()["damaged"] == 1
    # a copy whose record is lost is checked against the manifest again, and kept
    os.unlink(str(tmp_path / copy_name(dataset.rec(4))) + ".ok")
    mark = dataset.server.mark()
    with recio.ShardReader(dataset.url, cache_dir=tmp_path) as reader:
        assert list(reader) == dataset.payloads
    assert gets(dataset.server, mark) == {"train.manifest.json": 1}
    assert ShardCache(tmp_path).totals()["damaged"] == 1


def test_a_damaged_copy_of_a_plain_rec_url(s3, tmp_path):
    """A .rec URL without a manifest: its CRC-32 is recorded at download and checked later."""
    server, bucket = s3
    records = [os.urandom(n) for n in range(100, 3000, 97)]
    local = tmp_path / "plain.rec"
    with recio.IndexedRecordWriter(local, tmp_path / "plain.idx") as writer:
        for i, data in enumerate(records):
            writer.write(i, data)
    for name in ("plain.rec", "plain.idx"):
        server.put(f"{bucket}/{name}", (tmp_path / name).read_bytes())
    cache = tmp_path / "cache"
    with IndexedRecordReader(f"{bucket}/plain.rec", cache_dir=cache) as reader:
        assert [reader[i] for i in range(len(records))] == records
    copy = cache / copy_name(f"{bucket}/plain.rec")
    data = bytearray(copy.read_bytes())
    data[50] ^= 1
    copy.write_bytes(bytes(data))
    mark = server.mark()
    with IndexedRecordReader(f"{bucket}/plain.rec", cache_dir=cache) as reader:
        assert [reader[i] for i in range(len(records))] == records
    assert gets(server, mark)["plain.rec"] == 1
    assert ShardCache(cache).totals()["damaged"] == 1
    # the object replaced in the bucket (a new ETag): the old copy is not used
    records[0] = b"new version"
    with recio.IndexedRecordWriter(tmp_path / "new.rec", tmp_path / "new.idx") as writer:
        for i, data in enumerate(records):
            writer.write(i, data)
    for name in ("rec", "idx"):
        server.put(f"{bucket}/plain.{name}", (tmp_path / f"new.{name}").read_bytes())
    with IndexedRecordReader(f"{bucket}/plain.rec", cache_dir=cache) as reader:
        assert reader[0] == b"new version"


def test_an_object_that_differs_from_its_manifest_is_refused(s3, tmp_path):
    server, bucket = s3
    with recio.ShardWriter(f"{bucket}/set/train", max_records=5) as writer:
        for i in range(10):
            writer.write(i, b"record %d" % i)
    shard = writer.manifest.shards[1].rec
    data = bytearray(server.get(shard))
    data[10] ^= 0xFF
    server.put(shard, bytes(data))
    with recio.ShardReader(writer.manifest.path, cache_dir=tmp_path) as reader:
        assert reader[0] == b"record 0"
        with pytest.raises(recio.errors.ChecksumError, match="the manifest says") as info:
            reader[7]
    assert info.value.path == shard and "recio verify" in str(info.value)
    names = os.listdir(tmp_path)
    assert not [n for n in names if n.endswith(".part")]
    assert not (tmp_path / copy_name(shard)).exists()
    assert ShardCache(tmp_path).totals()["damaged"] == 2  # downloaded twice, refused


# -- the limit, eviction, interruption ------------------------------------------------------------
def test_a_limit_smaller_than_two_shards(dataset, tmp_path):
    """Each shard is needed whole: the cache holds one and a half, readers still get every
    record, and the folder never holds more than the limit plus one shard."""
    biggest = max(s.rec_bytes for s in dataset.manifest.shards)
    limit = int(1.5 * biggest)
    with DiskWatch(tmp_path) as disk:
        for _ in range(2):
            with recio.ShardReader(dataset.url, cache_dir=tmp_path, cache_limit=limit) as r:
                assert list(r) == dataset.payloads
            split = InputSplit(dataset.url, 0, 1, cache_dir=tmp_path, cache_limit=limit)
            assert list(split) == dataset.payloads
    assert 0 < disk.peak <= limit + biggest
    totals = ShardCache(tmp_path).totals()
    assert totals["evictions"] > 0 and totals["damaged"] == 0


def test_eviction_leaves_an_open_reader_its_map(dataset, tmp_path):
    shards = dataset.manifest.shards
    cache = ShardCache(tmp_path, limit=max(s.rec_bytes for s in shards) + 100)
    cache.expect_manifest(dataset.manifest)
    first = RecordReader(shards[0].rec, shard_cache=cache)
    # a prefetch never evicts what a reader has open: no room, so nothing happens
    cache.prefetch([shards[1].rec]).join()
    assert not (tmp_path / copy_name(shards[1].rec)).exists()
    assert cache.stats["evictions"] == 0
    # a reader that needs shard 1 now evicts shard 0 from the folder; the open reader reads on
    second = RecordReader(shards[1].rec, shard_cache=cache)
    assert not (tmp_path / copy_name(shards[0].rec)).exists()
    assert cache.stats["evicted_in_use"] == 1
    assert list(first) == dataset.payloads[:PER_SHARD]
    assert list(second) == dataset.payloads[PER_SHARD:2 * PER_SHARD]
    first.close()
    second.close()


@pytest.mark.linux_only("counts deleted files still open through /proc/self/fd")
@pytest.mark.needs("torch")
def test_a_keyed_reader_under_a_limit_lets_evicted_copies_go(dataset, tmp_path, monkeypatch):
    """Random reads under a limit of 1.5 shards: the dataset closes the readers of evicted
    copies (it looks every RECHECK_SECONDS; here at every read), so only what the last
    download evicted is still held by open files (two smaller shards fit the limit at most),
    never every shard it has read."""
    import recio.torch as rt

    monkeypatch.setattr(rt.datasets, "RECHECK_SECONDS", 0.0)
    biggest = max(s.rec_bytes for s in dataset.manifest.shards)
    ds = rt.RecordDataset(dataset.url, decode="raw", cache_dir=tmp_path,
                          cache_limit=int(1.5 * biggest))

    def deleted_but_open():  # a reader holds two descriptors of its file (its map dups one)
        targets = {_target(fd) for fd in os.listdir("/proc/self/fd")}
        return sum(1 for t in targets if t.startswith(str(tmp_path)) and t.endswith("(deleted)"))

    held = 0
    for i in list(rt.RecordSampler(N, seed=3))[:60]:
        assert bytes(ds[i][0]) == dataset.images[i]
        held = max(held, deleted_but_open())
    assert ShardCache(tmp_path).totals()["evictions"] > 10
    assert 1 <= held <= 2


@pytest.mark.needs("torch")
def test_a_keyed_reader_keeps_few_files_open(dataset, tmp_path, monkeypatch):
    """A set of more shards than a RecordDataset keeps open (two descriptors each): the least
    recently used reader is closed, and reopened from the cache when needed again."""
    import recio.torch as rt

    monkeypatch.setattr(rt.datasets, "_MOST_OPEN", 2)
    ds = rt.RecordDataset(dataset.url, decode="raw", cache_dir=tmp_path)
    for i in list(rt.RecordSampler(N, seed=4))[:80]:
        assert bytes(ds[i][0]) == dataset.images[i]
        assert len(ds._readers) <= 2
    assert ShardCache(tmp_path).totals()["downloads"] == 2 * SHARDS  # reopened, not fetched


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def test_a_killed_download_leaves_no_torn_copy(s3, tmp_path):
    server, bucket = s3
    data = np.random.default_rng(1).bytes(96 << 20)
    url = f"{bucket}/big.rec"
    server.put(url, data)
    script = ("import sys\nfrom recio.records.cache.shard_cache import ShardCache\n"
              "ShardCache(sys.argv[2]).open(sys.argv[1])\n")
    proc = subprocess.Popen([sys.executable, "-c", script, url, str(tmp_path)])
    try:
        deadline = time.monotonic() + 120
        while not any(n.endswith(".part") and os.path.getsize(tmp_path / n) > 0
                      for n in os.listdir(tmp_path)):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.002)
    finally:
        proc.kill()  # SIGKILL; TerminateProcess on Windows
        proc.wait()
    assert not (tmp_path / copy_name(url)).exists()  # a .part only, never a copy
    cache = ShardCache(tmp_path)
    mark = server.mark()
    with cache.open(url) as copy:
        assert zlib.crc32(open(copy.name, "rb").read()) == zlib.crc32(data)
    assert gets(server, mark)["big.rec"] == 1
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith(".")) == \
        sorted([copy_name(url), copy_name(url) + ".ok"])  # the dead .part is gone


def test_a_download_cut_off_leaves_nothing(s3_server, dataset, tmp_path):
    from support import CuttingProxy

    proxy = CuttingProxy(s3_server.port, 2000)
    try:
        options = {"endpoint_url": f"http://127.0.0.1:{proxy.port}"}
        cache = ShardCache(tmp_path, storage_options=options)
        cache.expect_manifest(dataset.manifest)
        with pytest.raises(recio.errors.StorageError, match="retry") as info:
            cache.open(dataset.rec(0))
        assert info.value.path == dataset.rec(0)
    finally:
        proxy.close()
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []


@pytest.mark.linux_only("tells the copy's descriptor by its name in /proc/self/fd")
def test_a_full_disk_fails_the_download_cleanly(dataset, tmp_path, monkeypatch):
    """ENOSPC while a copy is written: one StorageError naming the URL and the cache folder,
    and no .part or copy left."""
    real_write = os.write

    def full_disk(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".part"):
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    cache = ShardCache(tmp_path)
    cache.expect_manifest(dataset.manifest)
    with pytest.raises(recio.errors.StorageError,
                       match="no space left on the cache's disk") as info:
        cache.open(dataset.rec(0))
    assert info.value.path == dataset.rec(0) and str(tmp_path) in str(info.value)
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []


def test_a_stopped_prefetch_leaves_nothing_half_written(s3, tmp_path):
    server, bucket = s3
    url = f"{bucket}/big.rec"
    server.put(url, np.random.default_rng(2).bytes(96 << 20))
    cache = ShardCache(tmp_path)
    ahead = cache.prefetch([url])
    deadline = time.monotonic() + 120
    while not any(n.endswith(".part") for n in os.listdir(tmp_path)):
        assert ahead.running and time.monotonic() < deadline
        time.sleep(0.002)
    ahead.stop(wait=True)
    assert not ahead.running and ahead.error is None
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []


def test_a_set_rewritten_at_the_same_urls_is_read_anew(s3, tmp_path):
    server, bucket = s3
    for version in (b"old", b"new"):
        with recio.ShardWriter(f"{bucket}/set/train", max_records=4, force=True) as writer:
            for i in range(8):
                writer.write(i, version + b" %d" % i)
        with recio.ShardReader(writer.manifest.path, cache_dir=tmp_path) as reader:
            assert list(reader) == [version + b" %d" % i for i in range(8)]
    # both shards twice; their indexes once: the new ones are the same bytes (same sizes)
    assert ShardCache(tmp_path).totals()["downloads"] == 6


def test_waiting_readers_share_one_download(dataset, tmp_path):
    """Threads of one process that need the same shard: one downloads, the others wait."""
    cache = ShardCache(tmp_path)
    cache.expect_manifest(dataset.manifest)
    mark = dataset.server.mark()
    barrier = threading.Barrier(6)
    results = []

    def read():
        barrier.wait()
        with RecordReader(dataset.rec(3), shard_cache=cache) as reader:
            results.append(list(reader))

    threads = [threading.Thread(target=read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [dataset.payloads[3 * PER_SHARD:4 * PER_SHARD]] * 6
    assert shard_gets(dataset, mark) == [0, 0, 0, 1, 0, 0]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=6),
       reads=st.lists(st.integers(0, 5), min_size=1, max_size=30),
       limit=st.integers(1, 12000))
def test_lru_within_the_limit(tmp_path_factory, sizes, reads, limit):
    """Any sequence of reads of objects of any sizes under any limit: each read gives the
    object's bytes, the folder holds at most max(limit, the largest object), the object just
    read stays, and the copies that went were the least recently used."""
    import fsspec

    fs = fsspec.filesystem("memory")
    folder = tmp_path_factory.mktemp("lru")
    blobs = {}
    for i, n in enumerate(sizes):
        blobs[f"memory://lru-{folder.name}/{i}.rec"] = os.urandom(n)
        fs.pipe(f"/lru-{folder.name}/{i}.rec", blobs[f"memory://lru-{folder.name}/{i}.rec"])
    urls = list(blobs)
    cache = ShardCache(folder, limit)
    for url in urls:
        cache.expect(url, len(blobs[url]), f"{zlib.crc32(blobs[url]):08x}")
    used = []
    for r in reads:
        url = urls[r % len(urls)]
        with cache.open(url) as copy:
            assert open(copy.name, "rb").read() == blobs[url]
        used = [u for u in used if u != url] + [url]
        assert cache.usage() <= max(limit, max(sizes))
        present = [u for u in urls if (folder / copy_name(u)).exists()]
        assert url in present
        # what stays is a most-recently-used tail of the reads
        assert set(present) == set(used[len(used) - len(present):])


# -- the readers and their settings ---------------------------------------------------------------
def test_every_reader_takes_a_cache(dataset, tmp_path, monkeypatch):
    """IndexedRecordReader, ShardReader, InputSplit and ImageBatchIter read the same records
    through the cache; a second round costs no GET of a shard."""
    from recio.image.batches.iterators import ImageBatchIter

    folder = tmp_path / "cache"

    def read_all():
        out = {}
        with recio.ShardReader(dataset.url, cache_dir=folder) as reader:
            out["shards"] = [reader[i] for i in range(0, N, 7)]
        out["split"] = [r for k in range(3)
                        for r in InputSplit(dataset.url, k, 3, cache_dir=folder)]
        with IndexedRecordReader(dataset.rec(1), cache_dir=folder) as reader:
            out["indexed"] = [reader[k] for k in reader.keys()]
        with ImageBatchIter(dataset.url, (3, 8, 8), 16, resize=8, cache_dir=folder,
                             preprocess_threads=1) as it:
            out["iter"] = [int(v) for batch in it for v in batch.label.ravel()]
        return out

    expected = {"shards": dataset.payloads[::7], "split": dataset.payloads,
                "indexed": dataset.payloads[PER_SHARD:2 * PER_SHARD], "iter": list(range(N))}
    assert read_all() == expected
    mark = dataset.server.mark()
    assert read_all() == expected
    assert shard_gets(dataset, mark) == [0] * SHARDS
    assert shard_gets(dataset, mark, ".idx") == [0] * SHARDS
    # the environment's folder and limit are the default; cache_dir=False turns it off
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env"))
    monkeypatch.setenv(CACHE_LIMIT_ENV, "1MB")
    with recio.ShardReader(dataset.url) as reader:
        assert reader._cache.folder == str(tmp_path / "env")
        assert reader._cache.limit == 1_000_000
        assert list(reader) == dataset.payloads
    with recio.ShardReader(dataset.url, cache_dir=False) as reader:
        assert reader._cache is None
    monkeypatch.setenv(CACHE_LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match=CACHE_LIMIT_ENV):
        recio.ShardReader(dataset.url)


def test_a_cache_is_refused_clearly(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    assert ShardCache.configured() is None
    with pytest.raises(ValueError, match="cache_limit needs cache_dir"):
        ShardCache.configured(cache_limit=5)
    with pytest.raises(ValueError, match="not a size"):
        ShardCache(tmp_path, "ten gigs")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OSError, match="cannot make the cache folder") as info:
        ShardCache(tmp_path / "file" / "cache")
    assert info.value.filename == str(tmp_path / "file" / "cache")
    assert ShardCache(tmp_path, "2GB").limit == 2_000_000_000


# -- exact resume --------------------------------------------------------------------------------
@pytest.mark.needs("torch", "torchdata")
@pytest.mark.filterwarnings("ignore:.*set_vital.*:UserWarning")
def test_exact_resume_reads_through_the_cache(dataset, tmp_path):
    """A StatefulDataLoader stopped mid-epoch and resumed (in a new loader, another number of
    workers) delivers the rest exactly once, from the cache, as without it."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from recio.torch import RecordDataset, RecordIterableDataset, RecordSampler

    folder = tmp_path / "cache"
    for kind in ("sampler", "iterable"):
        def make():
            if kind == "sampler":
                ds = RecordDataset(dataset.url, decode="raw", cache_dir=folder)
                return dict(dataset=ds, sampler=RecordSampler(ds, seed=5))
            return dict(dataset=RecordIterableDataset(dataset.url, decode="raw",
                                                      shuffle_buffer=9, cache_dir=folder))

        whole = [int(y) for _, labels in StatefulDataLoader(**make(), batch_size=8,
                                                            num_workers=2)
                 for y in labels]
        loader = StatefulDataLoader(**make(), batch_size=8, num_workers=2)
        it = iter(loader)
        before = [int(y) for _ in range(7) for y in next(it)[1]]
        saved = loader.state_dict()
        del it
        mark = dataset.server.mark()
        resumed = StatefulDataLoader(**make(), batch_size=8, num_workers=2)
        resumed.load_state_dict(saved)
        after = [int(y) for _, labels in resumed for y in labels]
        assert before + after == whole  # the uninterrupted order, each record once
        assert sorted(whole) == list(range(N))
        assert shard_gets(dataset, mark) == [0] * SHARDS
