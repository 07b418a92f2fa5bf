"""recio on a real local Ray instance (``ray.init(num_cpus=2)``, no dashboard): im2rec
--engine ray against --engine local byte for byte, retries after a crash or an error, a shard
that cannot be written, images and shards in a bucket (the local S3 server), and Ray Data's
read_records / RecordDatasink round trip on MXNet's own files."""
import filecmp
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from recio.cli.im2rec import im2rec_cmd
from recio.image.pixels.codec import decode
from recio.image.header import unpack
from recio.image.packing.settings import PackSettings
from recio.records.index import open_index
from recio.records.reader import RecordReader
from recio.records.manifest import load_manifest
from recio.records.shards.verify import verify_manifest
from support import make_corpus, records_of

pytestmark = pytest.mark.needs("ray")


@pytest.fixture(scope="module")
def ray_cluster(s3_server):
    """A local Ray instance with 2 CPUs for this module (started after the S3 server, so its
    workers inherit the environment that points S3 clients at it)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    context = ray.data.DataContext.get_current()
    saved, context.execution_options.preserve_order = \
        context.execution_options.preserve_order, True
    try:
        yield ray
    finally:
        context.execution_options.preserve_order = saved
        ray.shutdown()


def set_files(folder, stem):
    """The files of the shard set ``stem`` in ``folder`` (names without the stem)."""
    return sorted(n[len(stem):] for n in os.listdir(folder) if n.startswith(stem + "-")
                  or n.startswith(stem + "."))


def assert_same_sets(folder_a, stem_a, folder_b, stem_b, same_reasons=True):
    """Every file of two shard sets is byte-identical (the manifests up to the names; the
    errors reports but for the reasons when images came from elsewhere)."""
    names = set_files(folder_a, stem_a)
    assert names == set_files(folder_b, stem_b)
    assert ".manifest.json" in names and ".combined.idx" in names
    for suffix in names:
        a, b = os.path.join(folder_a, stem_a + suffix), os.path.join(folder_b, stem_b + suffix)
        if suffix == ".manifest.json":
            text = open(a).read().replace(stem_a, "STEM")
            assert text == open(b).read().replace(stem_b, "STEM")
        elif suffix == ".errors.tsv" and not same_reasons:
            rows = [[line.split("\t")[:3] for line in open(p)] for p in (a, b)]
            assert rows[0] == rows[1]
        elif suffix != ".lst":
            assert filecmp.cmp(a, b, shallow=False), suffix


def pack(engine, folder, name, root, *extra, env_fault=None, monkeypatch=None):
    lst = folder / f"{name}.lst"
    if env_fault is not None:
        monkeypatch.setenv("RECIO_FAULT_INJECTION", env_fault)
    result = CliRunner().invoke(im2rec_cmd, [str(folder / name), str(root), "--num-shards", "4",
                                             "--resize", "24", "--pack-label", "--checksums",
                                             "--engine", engine, *extra])
    if monkeypatch is not None:
        monkeypatch.delenv("RECIO_FAULT_INJECTION", raising=False)
    return lst, result


@pytest.fixture
def corpus(tmp_path):
    lst = make_corpus(tmp_path, n=40, missing=(3, 17), bad_lines=(9,))
    for name in ("local", "ray"):
        shutil.copy(lst, tmp_path / f"{name}.lst")
    return tmp_path


@pytest.mark.posix_only("sends itself SIGTERM, which ends the process at once on Windows")
def test_sigterm_while_the_driver_connects_is_im2recs_sigterm(corpus, monkeypatch):
    """ray.init first sets a SIGTERM handler of its own (``sys.exit(15)``): a SIGTERM then
    (im2rec --engine ray killed in its first second) made im2rec exit 15 without a word; it
    says what it kept and exits 143, as later in the pack (found by the issue-30 check). The
    SIGTERM is sent the moment Ray has set its handler, before Ray starts anything."""
    import signal

    import ray
    from ray._private import utils as ray_utils

    original = ray_utils.set_sigterm_handler

    def set_then_terminated(handler):
        original(handler)
        os.kill(os.getpid(), signal.SIGTERM)
    monkeypatch.setattr(ray_utils, "set_sigterm_handler", set_then_terminated)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    _, result = pack("ray", corpus, "ray", corpus / "img")
    assert result.exit_code == 143, (result.exit_code, result.output)
    assert "Terminated (SIGTERM)" in result.stderr, result.stderr
    assert "rerun with --resume" in result.stderr, result.stderr


def test_ray_engine_output_is_byte_identical_to_the_local_engine(ray_cluster, corpus):
    _, local = pack("local", corpus, "local", corpus / "img")
    assert local.exit_code == 0, local.output
    _, remote = pack("ray", corpus, "ray", corpus / "img")
    assert remote.exit_code == 0, remote.output
    assert_same_sets(corpus, "local", corpus, "ray")
    assert (corpus / "ray.errors.tsv").read_bytes() == (corpus / "local.errors.tsv").read_bytes()
    assert verify_manifest(corpus / "ray.manifest.json", deep=True).clean
    assert "packed 38 images, skipped 3 (2 missing, 1 malformed line)" in remote.output
    assert not [n for n in os.listdir(corpus) if n.startswith(".recio-")]


def test_shards_by_size_on_ray_are_the_local_engines(ray_cluster, corpus):
    """--shard-size on Ray: the parts packed as tasks, the records cut into shards of at most
    that size by the driver; the same set as the local engine writes."""
    run = CliRunner().invoke
    args = ["--resize", "24", "--pack-label", "--shard-size", "20KB", "--checksums"]
    local = run(im2rec_cmd, [str(corpus / "local"), str(corpus / "img"), *args])
    remote = run(im2rec_cmd, [str(corpus / "ray"), str(corpus / "img"), *args, "--engine", "ray"])
    assert local.exit_code == 0 and remote.exit_code == 0, (local.output, remote.output)
    names = set_files(corpus, "ray")
    assert names == set_files(corpus, "local") and "-00002.rec" in names
    for suffix in names:
        if suffix == ".manifest.json":
            assert (corpus / "ray.manifest.json").read_text().replace("ray", "STEM") == \
                (corpus / "local.manifest.json").read_text().replace("local", "STEM")
        elif suffix != ".lst":
            assert filecmp.cmp(corpus / f"ray{suffix}", corpus / f"local{suffix}",
                               shallow=False), suffix


def test_without_shards_the_ray_engine_writes_the_local_rec_and_idx(ray_cluster, corpus):
    """No --num-shards: Ray packs parts side by side and joins them into PREFIX.rec/.idx, the
    bytes im2rec writes on its own."""
    run = CliRunner().invoke
    args = ["--resize", "24", "--pack-label"]
    local = run(im2rec_cmd, [str(corpus / "local"), str(corpus / "img"), *args])
    remote = run(im2rec_cmd, [str(corpus / "ray"), str(corpus / "img"), *args, "--engine", "ray"])
    assert local.exit_code == 0 and remote.exit_code == 0, (local.output, remote.output)
    for suffix in (".rec", ".idx", ".errors.tsv"):
        assert (corpus / f"ray{suffix}").read_bytes() == (corpus / f"local{suffix}").read_bytes()
    assert not [n for n in os.listdir(corpus) if n.startswith((".recio-", "ray-", "ray.man"))]


@pytest.mark.parametrize("fault", ["crash:1", "error:2"])
def test_a_task_that_fails_once_is_retried_and_the_output_is_unchanged(ray_cluster, corpus,
                                                                      fault, monkeypatch):
    from recio.image.packing.parts import Fault
    from recio.image.packing.shards import ShardPackReport
    from recio.image.pixels.transform import ImageOptions
    import recio.ray

    _, local = pack("local", corpus, "local", corpus / "img")
    assert local.exit_code == 0, local.output
    report = ShardPackReport("ray")
    recio.ray.pack_shards_on_ray(corpus / "ray.lst", corpus / "img",
                        PackSettings(ImageOptions(resize=24), num_shards=4, pack_label=True,
                                     checksums=True), fault=Fault.parse(fault), report=report)
    attempts = {t["shard"]: t["attempt"] for t in report.timings()}
    failed = int(fault.split(":")[1])
    assert attempts == {k: 2 if k == failed else 1 for k in range(4)}
    assert_same_sets(corpus, "local", corpus, "ray")


def test_the_cli_with_an_injected_crash_as_users_run_it(ray_cluster, corpus, script):
    """``im2rec --engine ray --ray-address`` in its own process, on the test's Ray instance,
    with a worker killed half way through shard 0: the same files as a local pack."""
    _, local = pack("local", corpus, "local", corpus / "img")
    assert local.exit_code == 0, local.output
    address = ray_cluster.get_runtime_context().gcs_address
    env = dict(os.environ, RECIO_FAULT_INJECTION="crash:0")
    proc = subprocess.run([*script("im2rec"), str(corpus / "ray"), str(corpus / "img"),
                           "--num-shards", "4", "--resize", "24", "--pack-label", "--checksums",
                           "--engine", "ray", "--ray-address", address],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout
    assert "ray.lst: 1 part(s) ran again after a failure" in proc.stderr
    assert " s of work lost" in proc.stderr
    assert_same_sets(corpus, "local", corpus, "ray")


def test_a_shard_that_cannot_be_written_fails_the_job_in_one_line(ray_cluster, corpus,
                                                                 monkeypatch):
    _, result = pack("ray", corpus, "ray", corpus / "img", env_fault="error:2:always",
                     monkeypatch=monkeypatch)
    assert result.exit_code == 2
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "shard 2 (list lines " in error[0] and "no manifest" in error[0]
    assert "Traceback" not in result.output
    assert not [n for n in os.listdir(corpus) if n.startswith(("ray-", "ray.manifest",
                                                              "ray.combined"))]
    # the other shards are kept: with the cause gone, --resume packs shard 2 and publishes
    staged = corpus / ".recio-pack-ray"
    assert {n for n in os.listdir(staged) if n.endswith(".json")} == \
        {"job.json", "part-00000.json", "part-00001.json", "part-00003.json"}
    _, resumed = pack("ray", corpus, "ray", corpus / "img", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "3 of 4 parts kept" in resumed.output
    _, local = pack("local", corpus, "local", corpus / "img")
    assert_same_sets(corpus, "local", corpus, "ray")
    assert not [n for n in os.listdir(corpus) if n.startswith(".recio-")]


def test_a_shard_that_cannot_be_staged_fails_the_job_and_the_bucket_gets_nothing(
        ray_cluster, corpus, s3):
    """A real write failure: the tasks' local staging folder (RECIO_STAGING_DIR, handed to
    the workers through ray_remote_args' runtime_env) does not exist, so no task can stage
    its shard for the bucket; after the retries the job fails naming a shard, and nothing
    appears under the final names (the bucket's staging prefix keeps the job for a
    resume)."""
    from recio.image.packing.parts import PartFailedError
    from recio.image.packing.shards import pack_shards
    from recio.image.pixels.transform import ImageOptions
    from recio.ray import RayEngine

    server, bucket = s3
    server.put(f"{bucket}/sets/job.lst", (corpus / "ray.lst").read_bytes())
    engine = RayEngine(max_retries=1, ray_remote_args={"runtime_env": {"env_vars": {
        "RECIO_STAGING_DIR": str(corpus / "no-such-folder")}}})
    with pytest.raises(PartFailedError) as err:
        pack_shards(f"{bucket}/sets/job.lst", corpus / "img",
                    PackSettings(ImageOptions(resize=24), num_shards=4), engine=engine)
    message = str(err.value)
    assert "\n" not in message and " failed: " in message and "no manifest" in message
    assert message.startswith(f"{bucket}/sets/job.lst: shard ")
    assert "no-such-folder" in message
    assert server.keys(bucket) == ["sets/.recio-pack-job/job.json", "sets/job.lst"]


def test_images_and_shards_in_a_bucket(ray_cluster, corpus, s3):
    """ROOT and PREFIX are s3:// URLs (the local S3 server): the ray engine reads each image
    with one GET and writes the shards to the bucket, identical to a local pack."""
    server, bucket = s3
    _, local = pack("local", corpus, "local", corpus / "img")
    assert local.exit_code == 0, local.output
    for name in os.listdir(corpus / "img"):
        server.put(f"{bucket}/img/{name}", (corpus / "img" / name).read_bytes())
    server.put(f"{bucket}/sets/ray.lst", (corpus / "ray.lst").read_bytes())
    _, remote = pack("ray", corpus, "ray", f"{bucket}/img")
    # the CLI call above packs the local list; pack the bucket's list into the bucket too
    result = CliRunner().invoke(im2rec_cmd, [f"{bucket}/sets/ray", f"{bucket}/img",
                                             "--num-shards", "4", "--resize", "24",
                                             "--pack-label", "--checksums", "--engine", "ray"])
    assert remote.exit_code == 0 and result.exit_code == 0, (remote.output, result.output)
    assert_same_sets(corpus, "local", corpus, "ray", same_reasons=False)
    out = corpus / "downloaded"
    out.mkdir()
    for key in server.keys(bucket):
        if key.startswith("sets/ray") and not key.endswith(".lst"):
            (out / os.path.basename(key)).write_bytes(server.get(f"{bucket}/{key}"))
    assert not [k for k in server.keys(bucket) if ".recio-" in k]
    shutil.copy(corpus / "ray.lst", out / "ray.lst")
    assert_same_sets(corpus, "local", out, "ray", same_reasons=False)


# -- Ray Data ---------------------------------------------------------------------------------------
def mxnet_records(rec):
    index = open_index(os.path.splitext(rec)[0] + ".idx", rec_size=os.path.getsize(rec))
    with RecordReader(rec) as reader:
        return [(k, reader.read_at(o)) for k, o in
                zip(index.key_array().tolist(), index.offsets.tolist())]


def rows_as_records(rows):
    from recio.image.header import IRHeader, pack

    out = []
    for row in rows:
        labels = list(row["labels"])
        label = labels if row["flag"] else labels[0]
        out.append((row["key"], pack(IRHeader(int(row["flag"]), label, int(row["id"]),
                                              int(row["id2"])), bytes(row["payload"]))))
    return out


@pytest.mark.parametrize("name", ["all", "multi"])
def test_read_records_reads_mxnet_files_in_parallel_byte_ranges(ray_cluster, golden, name):
    import recio.ray

    rec = str(golden / "im2rec" / f"{name}.rec")
    expected = mxnet_records(rec)
    ds = recio.ray.read_records(rec, override_num_blocks=3).materialize()
    assert ds.num_blocks() >= 2  # one .rec read by several tasks
    rows = ds.take_all()
    assert [r["key"] for r in rows] == [k for k, _ in expected]
    assert rows_as_records(rows) == expected
    head, payload = unpack(expected[0][1])
    assert rows[0]["label"] == np.float32(np.atleast_1d(head.label)[0])
    images = recio.ray.read_records(rec, decode=True).take(2)
    for row, (_, record) in zip(images, expected):
        assert np.array_equal(row["image"], decode(unpack(record)[1], 1))
    raw = recio.ray.read_records(rec, header=False).take(1)[0]
    assert set(raw) == {"key", "payload"} and raw["payload"] == expected[0][1]


def test_read_records_without_an_index_says_how_to_make_one(ray_cluster, golden, tmp_path):
    import recio.ray
    from recio.errors import IndexFileError

    shutil.copy(golden / "im2rec" / "all.rec", tmp_path / "lone.rec")
    with pytest.raises(IndexFileError, match="recio index .*lone.rec"):
        recio.ray.read_records(str(tmp_path / "lone.rec"))


def test_write_datasink_round_trip_is_exact(ray_cluster, golden, tmp_path):
    """read_records(write_datasink(read_records(x))) == x: keys, headers and bytes; the shards
    concatenated are MXNet's .rec byte for byte."""
    import recio.ray

    rec = str(golden / "im2rec" / "multi.rec")
    ds = recio.ray.read_records(rec, override_num_blocks=3)
    ds.write_datasink(recio.ray.RecordDatasink(str(tmp_path / "out" / "copy"), checksums=True))
    manifest = tmp_path / "out" / "copy.manifest.json"
    assert verify_manifest(manifest, deep=True).clean
    assert records_of(manifest) == mxnet_records(rec)
    again = recio.ray.read_records(str(manifest)).take_all()
    assert rows_as_records(again) == mxnet_records(rec)
    joined = b"".join(open(s.rec, "rb").read() for s in load_manifest(manifest).shards)
    assert joined == open(rec, "rb").read()
    assert (tmp_path / "out" / "copy.combined.idx").exists()
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".recio-")]


def test_the_datasink_refuses_existing_sets_and_leaves_nothing_on_failure(ray_cluster, tmp_path):
    import ray
    import recio.ray

    items = [{"payload": bytes([i]) * (i + 1), "label": float(i)} for i in range(20)]
    ray.data.from_items(items).write_datasink(recio.ray.RecordDatasink(str(tmp_path / "s")))
    rows = recio.ray.read_records(str(tmp_path / "s.manifest.json")).take_all()
    assert [(r["key"], r["label"], r["payload"], r["id"]) for r in rows] == \
        [(i, float(i), bytes([i]) * (i + 1), 0) for i in range(20)]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(Exception, match="exists"):
        ray.data.from_items(items).write_datasink(recio.ray.RecordDatasink(str(tmp_path / "s")))
    with pytest.raises(Exception, match="needs a 'payload'"):
        ray.data.from_items([{"x": 1}] * 5).write_datasink(
            recio.ray.RecordDatasink(str(tmp_path / "t")))
    assert sorted(os.listdir(tmp_path)) == before


def test_read_and_write_in_a_bucket(ray_cluster, golden, s3):
    import recio.ray

    server, bucket = s3
    for ext in (".rec", ".idx"):
        server.put(f"{bucket}/in/all{ext}", (golden / "im2rec" / f"all{ext}").read_bytes())
    ds = recio.ray.read_records(f"{bucket}/in/all.rec", override_num_blocks=2)
    ds.write_datasink(recio.ray.RecordDatasink(f"{bucket}/out/all"))
    manifest = json.loads(server.get(f"{bucket}/out/all.manifest.json"))
    assert manifest["records"] == len(mxnet_records(str(golden / "im2rec" / "all.rec")))
    rows = recio.ray.read_records(f"{bucket}/out/all.manifest.json").take_all()
    assert rows_as_records(rows) == mxnet_records(str(golden / "im2rec" / "all.rec"))
    assert not [k for k in server.keys(bucket) if ".recio-" in k]
