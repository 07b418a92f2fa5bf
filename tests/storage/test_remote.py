"""Object storage: every reader, writer and command against a real S3 API on 127.0.0.1.

The server is moto's server mode in its own process (``s3_server`` in conftest.py) and the
client the real s3fs/botocore stack, configured only through the standard environment
(``AWS_ENDPOINT_URL`` ...), as a user's would be. Nothing here leaves the loopback address.
"""
import os
import pathlib
import shutil
import socket
import subprocess
import threading

import numpy as np
import pytest
from conftest import GOLDEN, command, need
from support import CuttingProxy
from hypothesis import given, settings
from hypothesis import strategies as st

import recio
from recio import storage
from recio.records.indexed import IndexedRecordReader
from recio.records.reader import RecordReader
from recio.records.manifest import load_manifest
from recio.records.shards.commit import combined_index
from recio.records.shards.verify import verify_manifest
from recio.records.shards.shard_set import ShardWriter
from recio.records.split import InputSplit

RECORD_FILES = sorted(GOLDEN.rglob("*.rec"))


def upload_golden(server, bucket):
    """Every golden file into the bucket under its path below golden/; returns the URL base."""
    for path in GOLDEN.rglob("*"):
        if path.is_file():
            server.put(f"{bucket}/{path.relative_to(GOLDEN).as_posix()}", path.read_bytes())
    return bucket


def url_of(bucket, path):
    return f"{bucket}/{pathlib.Path(path).relative_to(GOLDEN).as_posix()}"


def run(argv, env=None, **kwargs):
    return subprocess.run([*command(argv[0]), *argv[1:]], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kwargs)


@pytest.fixture(scope="module")
def golden_bucket(s3_server):
    bucket = s3_server.bucket("golden-files")
    return upload_golden(s3_server, bucket)


# -- reading ------------------------------------------------------------------------------------
def test_every_golden_file_reads_byte_identical_from_the_bucket(s3_server, golden_bucket):
    files = [p for p in GOLDEN.rglob("*") if p.is_file()]
    assert len(files) > 30
    for path in files:
        url = url_of(golden_bucket, path)
        assert storage.read_bytes(url) == path.read_bytes(), url
        with storage.RemoteFile(url) as remote:  # the streaming path, block by block
            streamed = b"".join(iter(lambda: remote.read(1000), b""))
        assert streamed == path.read_bytes(), url


def test_an_s3_scan_is_one_presigned_get_to_the_configured_endpoint(s3):
    """s3fs is recognised by its public ``protocol``; a scan streams from a URL its public
    ``sign`` presigned, on the endpoint the client is configured with (the local server)."""
    server, bucket = s3
    data = bytes(range(256)) * 5000
    server.put(f"{bucket}/blob", data)
    since = server.mark()
    with storage.RemoteFile(f"{bucket}/blob") as remote:
        assert remote.read() == data and remote.requests == 1
    gets = [path for method, path in server.requests(since) if method == "GET"]
    assert len(gets) == 1 and "Signature=" in gets[0], gets  # presigned, not a ranged GET


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: p.name)
def test_records_from_the_bucket_equal_the_local_ones(golden_bucket, path):
    url = url_of(golden_bucket, path)
    with RecordReader(path) as local, RecordReader(url) as remote:
        expected = list(local.records_with_offsets())
        assert list(remote.records_with_offsets()) == expected
        assert remote.source.file.requests == 1  # the whole scan is one streaming GET
        for offset, record in expected[::3]:
            assert remote.read_at(offset) == record
    idx = path.with_suffix(".idx")
    if idx.exists():
        with IndexedRecordReader(path) as local, IndexedRecordReader(url) as remote:
            assert remote.keys() == local.keys()
            before = remote.reader.source.file.requests
            for key in local.keys():
                assert remote[key] == local[key]
            # one ranged GET per keyed read (the record's length comes from the index)
            assert remote.reader.source.file.requests - before == len(local)
            keys = local.keys()
            before = remote.reader.source.file.requests
            assert remote.read_many(keys) == [local[k] for k in keys]
            assert remote.reader.source.file.requests - before < len(keys)  # coalesced


def test_recio_mx_reads_from_the_bucket(golden_bucket):
    from recio.mx import recordio as mx_recordio

    rec = GOLDEN / "im2rec" / "all.rec"
    local = mx_recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    remote = mx_recordio.MXIndexedRecordIO(url_of(golden_bucket, rec.with_suffix(".idx")),
                                           url_of(golden_bucket, rec), "r")
    assert list(remote.keys) == list(local.keys)
    for key in local.keys:
        assert remote.read_idx(key) == local.read_idx(key)
    remote.reset()
    local.reset()
    assert [remote.read() for _ in range(len(local.keys))] == \
        [local.read() for _ in range(len(local.keys))]


@pytest.mark.parametrize("balance", ["bytes", "records"])
def test_input_split_parts_from_the_bucket_equal_the_local_ones(golden_bucket, balance):
    local_source = [str(p) for p in sorted((GOLDEN / "split").glob("*.rec"))]
    remote_source = f"{golden_bucket}/split/"  # a folder of the bucket: its .rec files
    for n in (1, 2, 3, 5, 8):
        local = InputSplit.all_parts(local_source, n, balance=balance)
        remote = InputSplit.all_parts(remote_source, n, balance=balance)
        assert [(p.begin, p.end) for p in remote] == [(p.begin, p.end) for p in local]
        assert [list(p) for p in remote] == [list(p) for p in local]


def test_a_manifest_in_the_bucket_reads_like_its_shards(s3, tmp_path):
    server, bucket = s3
    records = [os.urandom(n) for n in np.random.default_rng(1).integers(0, 5000, 60).tolist()]
    with ShardWriter(f"{bucket}/set/train", max_records=25, checksums=True) as writer:
        for i, data in enumerate(records):
            writer.write(i, data)
    keys = server.keys(bucket)
    assert keys[-1] == "set/train.manifest.json" or "set/train.manifest.json" in keys
    assert len([k for k in keys if k.endswith(".rec")]) == 3
    manifest = load_manifest(f"{bucket}/set/train.manifest.json")
    assert manifest.records == 60
    assert [r for p in InputSplit.all_parts(manifest.path, 3) for r in p] == records
    report = verify_manifest(manifest.path, deep=True)
    assert report.clean, report.problems
    with recio.ShardReader(manifest.path, verify=True) as reader:
        assert [reader[i] for i in range(60)] == records
    # one damaged byte in a shard: named by the manifest check, and the record by --deep
    shard = manifest.shards[1].rec
    data = bytearray(server.get(shard))
    data[100] ^= 0x40
    server.put(shard, bytes(data))
    report = verify_manifest(manifest.path, deep=True)
    assert not report.clean
    assert any(p.path == shard and "CRC-32" in p.problem for p in report.problems)
    assert any(p.path == shard and p.record is not None for p in report.problems)
    proc = run(["recio", "verify", manifest.path, "--deep"])
    assert proc.returncode == 1 and shard in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    # the combined index written into the bucket, as DALI reads it (one index, global offsets)
    out = f"{bucket}/set/all.idx"
    assert combined_index(manifest, out) == 60
    lines = server.get(out).decode().splitlines()
    sizes = np.cumsum([0] + [s.rec_bytes for s in manifest.shards])
    offsets = [int(line.split("\t")[1]) for line in lines]
    blob = b"".join(server.get(s.rec) for s in manifest.shards)
    reader = RecordReader(__import__("io").BytesIO(blob))
    assert [reader.read_at(o) for o in offsets][:25] == records[:25]
    assert offsets[25] == sizes[1]


def test_a_sharded_write_to_the_bucket_that_fails_leaves_nothing(s3):
    server, bucket = s3
    with pytest.raises(RuntimeError):
        with ShardWriter(f"{bucket}/broken/train", max_records=5) as writer:
            for i in range(23):
                writer.write(i, b"x" * i)
            raise RuntimeError("the job died")
    assert server.keys(bucket) == []


# -- torch ----------------------------------------------------------------------------------------
def test_a_torch_dataloader_with_two_workers_reads_the_bucket(golden_bucket):
    need("torch")
    import torch

    from recio.torch import RecordDataset, RecordIterableDataset

    rec = GOLDEN / "im2rec" / "all.rec"
    local = RecordDataset(rec, decode="raw")
    remote = RecordDataset(url_of(golden_bucket, rec), decode="raw")
    loader = torch.utils.data.DataLoader(remote, batch_size=None, num_workers=2)
    got = [(bytes(x), float(y)) for x, y in loader]
    assert got == [(bytes(x), float(y)) for x, y in local]
    stream = RecordIterableDataset(f"{golden_bucket}/split/", decode="raw")
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2)
    remote_labels = sorted(float(y) for _, y in loader)
    local_stream = RecordIterableDataset(str(GOLDEN / "split"), decode="raw")
    assert remote_labels == sorted(float(y) for _, y in local_stream)


def test_image_record_iter_reads_the_bucket(golden_bucket):
    from recio.image.batches.iterators import ImageBatchIter

    rec = GOLDEN / "im2rec" / "all.rec"

    def batches(rec_path, idx_path):
        with ImageBatchIter(rec_path, (3, 16, 16), 4, path_imgidx=idx_path, resize=16,
                             preprocess_threads=1) as it:
            return [(b.data[0].copy(), b.label[0].copy()) for b in it]

    local = batches(str(rec), str(rec.with_suffix(".idx")))
    remote = batches(url_of(golden_bucket, rec), url_of(golden_bucket, rec.with_suffix(".idx")))
    assert len(local) == len(remote) > 0
    for (a, la), (b, lb) in zip(local, remote):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


# -- commands -------------------------------------------------------------------------------------
def test_inspect_verify_and_split_give_the_local_results(golden_bucket):
    rec = GOLDEN / "im2rec" / "all.rec"
    url = url_of(golden_bucket, rec)
    local = run(["recio", "inspect", str(rec), "--json", "-q"])
    remote = run(["recio", "inspect", url, "--json", "-q"])
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert remote.stdout.replace(url, "X").replace(url[:-4] + ".idx", "Y") == \
        local.stdout.replace(str(rec), "X").replace(str(rec.with_suffix(".idx")), "Y")
    proc = run(["recio", "verify", url, "--images"])
    assert proc.returncode == 0 and proc.stdout.startswith("OK:"), proc.stderr
    local = run(["recio", "split", str(GOLDEN / "split"), "-n", "3", "--json"])
    remote = run(["recio", "split", f"{golden_bucket}/split/", "-n", "3", "--json"])
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout.replace(f"{golden_bucket}/split", "X") == \
        local.stdout.replace(str(GOLDEN / "split"), "X")


def test_split_write_extract_convert_and_index_write_to_the_bucket(s3, golden_bucket, tmp_path):
    server, bucket = s3
    proc = run(["recio", "split", f"{golden_bucket}/split/", "-n", "2", "--write",
                f"{bucket}/parts/p", "-q"])
    assert proc.returncode == 0, proc.stderr
    run(["recio", "split", str(GOLDEN / "split"), "-n", "2", "--write", str(tmp_path / "p"),
         "-q"])
    for k in (0, 1):
        for ext in (".rec", ".idx"):
            assert server.get(f"{bucket}/parts/p_{k}{ext}") == \
                (tmp_path / f"p_{k}{ext}").read_bytes()
    again = run(["recio", "split", f"{golden_bucket}/split/", "-n", "2", "--write",
                 f"{bucket}/parts/p", "-q"])
    assert again.returncode == 2 and "already exists" in again.stderr  # nothing replaced
    rec = GOLDEN / "im2rec" / "all.rec"
    proc = run(["recio", "extract", url_of(golden_bucket, rec), f"{bucket}/images", "-q"])
    assert proc.returncode == 0, proc.stderr
    local = tmp_path / "images"
    run(["recio", "extract", str(rec), str(local), "-q"])
    for path in local.rglob("*"):
        if path.is_file():
            assert server.get(f"{bucket}/images/{path.relative_to(local).as_posix()}") == \
                path.read_bytes()
    cbf = GOLDEN / "cbf" / "float.cbf"
    proc = run(["recio", "convert", url_of(golden_bucket, cbf), f"{bucket}/float.rec", "-q"])
    assert proc.returncode == 0, proc.stderr
    run(["recio", "convert", str(cbf), str(tmp_path / "float.rec"), "-q"])
    for ext in (".rec", ".idx", ".len"):
        assert server.get(f"{bucket}/float{ext}") == (tmp_path / f"float{ext}").read_bytes()
    plain = GOLDEN / "records" / "plain.rec"
    proc = run(["recio", "index", url_of(golden_bucket, plain), "-o", f"{bucket}/plain.idx",
                "-q"])
    assert proc.returncode == 0, proc.stderr
    run(["recio", "index", str(plain), "-o", str(tmp_path / "plain.idx"), "-q"])
    assert server.get(f"{bucket}/plain.idx") == (tmp_path / "plain.idx").read_bytes()


def test_im2rec_from_local_images_to_the_bucket_and_back(s3, tmp_path):
    server, bucket = s3
    images = GOLDEN / "im2rec" / "images"
    shutil.copy(GOLDEN / "im2rec" / "noshuffle.lst", tmp_path / "data.lst")
    proc = run(["im2rec", str(tmp_path / "data"), str(images), "--resize", "32"])
    assert proc.returncode == 0, proc.stderr
    server.put(f"{bucket}/train/data.lst", (tmp_path / "data.lst").read_bytes())
    proc = run(["im2rec", f"{bucket}/train/data", str(images), "--resize", "32"])
    assert proc.returncode == 0, proc.stderr
    for ext in (".rec", ".idx"):
        assert server.get(f"{bucket}/train/data{ext}") == (tmp_path / f"data{ext}").read_bytes()
    # and back: read from the bucket, records equal to the local pack's
    with IndexedRecordReader(f"{bucket}/train/data.rec") as remote, \
            IndexedRecordReader(tmp_path / "data.rec") as local:
        assert [remote[k] for k in local.keys()] == [local[k] for k in local.keys()]
    refused = run(["im2rec", f"{bucket}/train/data", str(images), "--resize", "32"])
    assert refused.returncode == 2 and "already exists" in refused.stderr
    # --list straight into the bucket, then a sharded pack with checksums
    proc = run(["im2rec", f"{bucket}/sets/s", str(images), "--list", "--recursive",
                "--no-shuffle", "-q"])
    assert proc.returncode == 0, proc.stderr
    proc = run(["im2rec", f"{bucket}/sets/s", str(images), "--num-shards", "3", "--checksums"])
    assert proc.returncode == 0, proc.stderr
    manifest = load_manifest(f"{bucket}/sets/s.manifest.json")
    assert len(manifest.shards) == 3 and manifest.records == 13
    assert verify_manifest(manifest.path, deep=True).clean
    assert not any(".recio-" in k for k in server.keys(bucket))  # no staging left behind


@pytest.mark.slow
def test_im2rec_shard_size_splits_a_local_pack(tmp_path):
    images = GOLDEN / "im2rec" / "images"
    shutil.copy(GOLDEN / "im2rec" / "noshuffle.lst", tmp_path / "data.lst")
    proc = run(["im2rec", str(tmp_path / "data"), str(images), "--shard-size", "10KB"])
    assert proc.returncode == 0, proc.stderr
    manifest = load_manifest(tmp_path / "data.manifest.json")
    assert len(manifest.shards) > 1 and all(s.rec_bytes <= 10_000 or s.records == 1
                                            for s in manifest.shards)
    shutil.copy(GOLDEN / "im2rec" / "noshuffle.lst", tmp_path / "one.lst")
    assert run(["im2rec", str(tmp_path / "one"), str(images)]).returncode == 0
    with IndexedRecordReader(tmp_path / "one.rec") as whole:
        sharded = [r for p in InputSplit.all_parts(str(manifest.path), 1) for r in p]
        assert sharded == [whole[k] for k in whole.keys()]
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["data.lst", "data.manifest.json", "one.lst", "one.rec", "one.idx"]
        + [os.path.basename(p) for s in manifest.shards for p in (s.rec, s.idx)])


# -- failures -------------------------------------------------------------------------------------
def test_failures_are_one_line_errors(s3_server, golden_bucket, tmp_path):
    url = url_of(golden_bucket, GOLDEN / "im2rec" / "all.rec")
    # a missing object and a missing bucket
    for missing in (f"{golden_bucket}/no/such.rec", "s3://no-such-bucket-here/x.rec"):
        with pytest.raises(FileNotFoundError, match="no such object"):
            RecordReader(missing)
        proc = run(["recio", "inspect", missing])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines() == [f"Error: {missing}: no such object (or "
                                                    f"bucket)"]
    # a permission error: a server that refuses these credentials
    env = {"INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    locked = subprocess.Popen([__import__("sys").executable, "-m", "moto.server", "-H",
                               "127.0.0.1", "-p", str(port)], env={**os.environ, **env},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time
        import urllib.request

        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        proc = run(["recio", "inspect", url],
                   env={"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "access denied" in lines[0] and url in lines[0]
    finally:
        locked.terminate()
        locked.wait(10)
    # a connection dropped mid-read: a 3 MB object cut after 1 MB of response
    big = f"{golden_bucket}/big/cut.rec"
    with recio.RecordWriter(tmp_path / "cut.rec") as writer:
        for i in range(300):
            writer.write(os.urandom(10_000))
    s3_server.put(big, (tmp_path / "cut.rec").read_bytes())
    proxy = CuttingProxy(s3_server.port, 1 << 20)
    try:
        endpoint = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}"}
        proc = run(["recio", "verify", big], env=endpoint, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and big in lines[0] and "retry" in lines[0], lines
    finally:
        proxy.close()


@pytest.mark.posix_only("os.fork")
def test_remote_file_reopens_after_fork(golden_bucket):
    url = url_of(golden_bucket, GOLDEN / "records" / "plain.rec")
    reader = RecordReader(url)
    first = reader.read_at(0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connection, the parent's reader object
        try:
            ok = reader.read_at(0) == first and len(list(RecordReader(url))) == 100
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1 << 22), st.integers(0, 1 << 18)), max_size=60),
       st.integers(1, 1 << 23))
def test_coalesced_ranges_cover_every_range_once(ranges, limit):
    wanted = [(a, a + n) for a, n in ranges]
    merged = storage.coalesce(wanted, limit)
    assert merged == sorted(merged)
    assert all(a < b for a, b in merged)
    assert all(merged[i][1] < merged[i + 1][0] for i in range(len(merged) - 1))
    for a, b in wanted:
        b = min(b, limit)
        if a < b:
            assert any(m[0] <= a and b <= m[1] for m in merged)
    assert len(merged) <= len([1 for a, b in wanted if a < min(b, limit)])


def test_urls_need_no_local_folder_and_make_none(s3, tmp_path):
    server, bucket = s3
    proc = run(["recio", "inspect", f"{bucket}/train.rec"], cwd=tmp_path)
    assert proc.returncode == 2 and os.listdir(tmp_path) == []  # no folder named "s3:"
    proc = run(["im2rec", f"{bucket}/out", str(GOLDEN / "im2rec" / "images")], cwd=tmp_path)
    assert proc.returncode == 2 and "no .lst file" in proc.stderr
    assert os.listdir(tmp_path) == [] and server.keys(bucket) == []


@pytest.mark.slow
def test_a_reader_dropped_mid_scan_stops_its_read_ahead_thread(tmp_path):
    import gc
    import time

    fsspec = need("fsspec")
    with recio.RecordWriter(tmp_path / "x.rec") as writer:
        for _ in range(400):
            writer.write(os.urandom(100_000))
    fsspec.filesystem("memory").pipe("/dropped/x.rec", (tmp_path / "x.rec").read_bytes())
    before = threading.active_count()
    reader = RecordReader("memory://dropped/x.rec")
    records = iter(reader)
    next(records)
    assert threading.active_count() == before + 1  # the read-ahead thread
    del records, reader
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before


def test_http_file_and_memory_urls_read_like_local_paths(s3_server, golden_bucket, tmp_path):
    fsspec = need("fsspec")
    path = GOLDEN / "im2rec" / "all.rec"
    expected = list(RecordReader(path))
    # moto serves public objects over plain HTTP too: an http(s):// URL goes through fsspec's
    # HTTP file system (ranged GETs) and, for scans, one streaming GET
    for name in ("all.rec", "all.idx"):
        s3_server.put(f"{golden_bucket}/public/{name}", (path.parent / name).read_bytes(),
                      public=True)
    http = f"{s3_server.endpoint}/{golden_bucket[len('s3://'):]}/public/all.rec"
    assert list(RecordReader(http)) == expected
    with IndexedRecordReader(http, http[:-4] + ".idx") as remote:
        assert [remote[k] for k in remote.keys()] == expected
    assert list(RecordReader(f"file://{path}")) == expected
    fsspec.filesystem("memory").pipe("/golden/all.rec", path.read_bytes())
    assert list(RecordReader("memory://golden/all.rec")) == expected


def test_buckets_and_show_take_urls(s3, golden_bucket, tmp_path):
    server, bucket = s3
    from recio.sequence import SequenceWriter

    rng = np.random.default_rng(2)
    with SequenceWriter(tmp_path / "seq.rec") as writer:
        for _ in range(50):
            writer.write({"x": rng.random((int(rng.integers(1, 40)), 3)).astype(np.float32)})
    for name in ("seq.rec", "seq.idx", "seq.len"):
        server.put(f"{bucket}/{name}", (tmp_path / name).read_bytes())
    local = run(["recio", "buckets", str(tmp_path / "seq.rec"), "--json", "-q"])
    remote = run(["recio", "buckets", f"{bucket}/seq.rec", "--json", "-q"])
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout.replace(f"{bucket}/seq.rec", "F") == \
        local.stdout.replace(str(tmp_path / "seq.rec"), "F")
    rec = GOLDEN / "im2rec" / "all.rec"
    proc = run(["recio", "show", url_of(golden_bucket, rec), "-o", f"{bucket}/grid.png",
                "-n", "4", "-q"])
    assert proc.returncode == 0, proc.stderr
    assert server.get(f"{bucket}/grid.png")[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def gcs_endpoint():
    """A local Google Cloud Storage API (gcp-storage-emulator, in its own process) on
    127.0.0.1; yields the ``storage_options`` that reach it through gcsfs."""
    for name in ("gcsfs", "gcp_storage_emulator"):
        need(name)
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start",
                               "--host=127.0.0.1", f"--port={port}", "--in-memory"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield {"token": "anon", "project": "test", "endpoint_url": f"http://127.0.0.1:{port}"}
    finally:
        server.terminate()
        server.wait(10)


def test_gs_urls_read_and_write_like_s3(gcs_endpoint):
    import fsspec

    fs = fsspec.filesystem("gs", **gcs_endpoint)
    fs.mkdir("golden-gs")
    path = GOLDEN / "im2rec" / "all.rec"
    for name in ("all.rec", "all.idx"):
        fs.pipe(f"golden-gs/{name}", (path.parent / name).read_bytes())
    expected = list(RecordReader(path))
    with RecordReader("gs://golden-gs/all.rec", storage_options=gcs_endpoint) as remote:
        assert list(remote) == expected
    with IndexedRecordReader("gs://golden-gs/all.rec", storage_options=gcs_endpoint) as remote:
        assert [remote[k] for k in remote.keys()] == expected
        assert remote.reader.source.file.requests == len(expected)  # one ranged GET a record
    with ShardWriter("gs://golden-gs/set/train", max_records=5, checksums=True,
                     storage_options=gcs_endpoint) as writer:
        for key, record in enumerate(expected):
            writer.write(key, record)
    manifest = "gs://golden-gs/set/train.manifest.json"
    assert verify_manifest(manifest, deep=True, storage_options=gcs_endpoint).clean
    split = InputSplit(manifest, storage_options=gcs_endpoint)
    assert list(split) == expected


@pytest.mark.parametrize("extra, message", [
    (["--num-shards", "2", "--shard-size", "1MB"], "not both"),
    (["--checksums"], "--checksums goes with --num-shards or --shard-size"),
    (["--shard-size", "big"], "expected a shard size such as 600 (bytes), 64K"),
])
@pytest.mark.slow
def test_im2rec_shard_options_refuse_what_they_cannot_do(tmp_path, extra, message):
    shutil.copy(GOLDEN / "im2rec" / "noshuffle.lst", tmp_path / "data.lst")
    proc = run(["im2rec", str(tmp_path / "data"), str(GOLDEN / "im2rec" / "images"), *extra])
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["data.lst"]


def test_minibatch_source_reads_sequences_from_the_bucket(s3, tmp_path):
    """MinibatchSource takes a source as every reader does (recio.records.source), URLs
    included: a .rec, a folder and a glob in the bucket give the local minibatches."""
    from recio.sequence import SequenceWriter
    from recio.sequence.minibatch import MinibatchSource

    server, bucket = s3
    rng = np.random.default_rng(4)
    for k in range(2):
        rec = tmp_path / f"part-{k}.rec"
        with SequenceWriter(str(rec)) as w:
            for i in range(12):
                w.write({"x": rng.standard_normal((1 + (i + k) % 5, 3)).astype(np.float32)})
        for suffix in (".rec", ".idx", ".len"):
            local = rec.with_suffix(suffix)
            server.put(f"{bucket}/seq/{local.name}", local.read_bytes())
    server.put(f"{bucket}/seq/notes.cbf", b"a CBF file is not read from a URL")

    def drain(source):
        src = MinibatchSource(source, seed=2, randomization_window=20)
        return [(mb.ids.tolist(), [x.tolist() for x in mb["x"]])
                for mb in iter(lambda: src.next_minibatch(7), None)]

    local = drain(str(tmp_path / "part-0.rec"))
    assert local and drain(f"{bucket}/seq/part-0.rec") == local
    both = drain([str(tmp_path / "part-0.rec"), str(tmp_path / "part-1.rec")])
    assert drain(f"{bucket}/seq/") == both == drain(f"{bucket}/seq/part-*.rec")
    with pytest.raises(recio.errors.SequenceError, match="read from local disk") as info:
        MinibatchSource(f"{bucket}/seq/notes.cbf")
    assert info.value.path == f"{bucket}/seq/notes.cbf"
