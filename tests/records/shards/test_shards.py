"""Shard sets: ShardWriter and its manifest, checksums, verify, the combined index, and every
multi-file reader taking a manifest."""
import json
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recio
from recio.errors import ChecksumError, ManifestError, OutputExistsError
from recio.records.manifest import load_manifest
from recio.records.shards.commit import combined_index
from recio.records.shards.verify import verify_manifest
from recio.records.shards.shard_set import ShardReader, ShardWriter
from conftest import need
from support import golden_payloads


def write_set(prefix, payloads, **options):
    with ShardWriter(prefix, **options) as writer:
        for key, data in enumerate(payloads):
            writer.write(key, data)
    return writer.manifest


def files_in(folder):
    return sorted(os.listdir(folder))


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        value = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([value ^ 0x01]))


# -- writing --------------------------------------------------------------------------------------
def test_golden_records_in_one_shard_are_byte_identical(golden, tmp_path):
    """Without limits the one shard is exactly the file MXNet wrote (multi-part records too)."""
    _, payloads = golden_payloads(golden, "tricky.rec")
    manifest = write_set(tmp_path / "t", payloads)
    assert [os.path.basename(s.rec) for s in manifest.shards] == ["t-00000.rec"]
    assert (tmp_path / "t-00000.rec").read_bytes() == \
        (golden / "records" / "tricky.rec").read_bytes()
    assert (tmp_path / "t-00000.idx").read_bytes() == \
        (golden / "records" / "tricky.idx").read_bytes()


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), min_size=0, max_size=40),
       max_records=st.one_of(st.none(), st.integers(1, 7)),
       max_bytes=st.one_of(st.none(), st.integers(1, 900)),
       checksums=st.booleans())
def test_shards_hold_every_record_in_order_within_the_limits(tmp_path_factory, sizes,
                                                              max_records, max_bytes, checksums):
    folder = tmp_path_factory.mktemp("set")
    rng = np.random.default_rng(len(sizes))
    payloads = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    manifest = write_set(folder / "d", payloads, max_records=max_records, max_bytes=max_bytes,
                         checksums=checksums)
    doc = json.loads((folder / "d.manifest.json").read_text())
    assert doc["records"] == len(payloads) and len(doc["shards"]) == len(manifest.shards)
    seen = []
    for i, (shard, entry) in enumerate(zip(manifest.shards, doc["shards"])):
        assert entry["rec"] == f"d-{i:05d}.rec" and entry["idx"] == f"d-{i:05d}.idx"
        records = list(recio.RecordReader(shard.rec))
        assert entry["records"] == len(records) >= 1
        if max_records is not None:
            assert len(records) <= max_records
        if max_bytes is not None and len(records) > 1:
            assert entry["rec_bytes"] <= max_bytes
        for role in ("rec", "idx") + (("crc",) if checksums else ()):
            data = (folder / entry[role]).read_bytes()
            assert entry[f"{role}_bytes"] == len(data)
            assert entry[f"{role}_crc32"] == f"{zlib.crc32(data):08x}"
        keys = recio.read_index(shard.idx)[0]
        assert (entry["min_key"], entry["max_key"]) == (min(keys), max(keys))
        if checksums:
            crcs = np.frombuffer((folder / entry["crc"]).read_bytes(), "<u4")
            assert crcs.tolist() == [zlib.crc32(r) for r in records]
        else:
            assert entry["crc"] is None
        seen += records
    assert seen == payloads
    assert verify_manifest(folder / "d.manifest.json", deep=True).clean


def test_no_manifest_and_no_shard_unless_every_shard_is_complete(tmp_path):
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path / "t", max_records=2, checksums=True) as writer:
            for key in range(5):
                writer.write(key, b"x" * 100)
            raise RuntimeError("the job failed")
    assert files_in(tmp_path) == []  # not even temporary files
    writer = ShardWriter(tmp_path / "t", max_records=2)
    for key in range(5):
        writer.write(key, b"y" * 10)
    writer.abort()
    assert files_in(tmp_path) == []


@pytest.mark.slow
def test_a_writer_dropped_unclosed_leaves_nothing(tmp_path):
    writer = ShardWriter(tmp_path / "t", max_records=2)
    for key in range(5):
        writer.write(key, b"y" * 10)
    with pytest.warns(ResourceWarning):
        del writer
        import gc
        gc.collect()
    assert files_in(tmp_path) == []


@pytest.mark.posix_only("the writer's process sends itself SIGKILL")
def test_a_killed_writer_leaves_no_manifest_and_no_final_name(tmp_path):
    code = textwrap.dedent(f"""
        import os, signal, recio
        w = recio.ShardWriter({str(tmp_path / 't')!r}, max_records=3)
        for key in range(10):
            w.write(key, b"z" * 1000)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code])
    assert proc.returncode == -9
    names = files_in(tmp_path)
    assert not any(n.endswith(".manifest.json") or not n.endswith(".tmp") for n in names), names


def test_existing_outputs_are_refused_without_force(tmp_path):
    write_set(tmp_path / "t", [b"a", b"b"], max_records=1)
    before = {n: (tmp_path / n).read_bytes() for n in files_in(tmp_path)}
    with pytest.raises(OutputExistsError) as err:
        ShardWriter(tmp_path / "t", max_records=1)
    assert "t.manifest.json" in str(err.value)
    assert {n: (tmp_path / n).read_bytes() for n in files_in(tmp_path)} == before
    manifest = write_set(tmp_path / "t", [b"c", b"d", b"e"], max_records=1, force=True)
    assert [list(recio.RecordReader(s.rec)) for s in manifest.shards] == [[b"c"], [b"d"], [b"e"]]


def test_every_shard_of_an_earlier_set_is_refused_and_with_force_none_stays_stale(tmp_path):
    write_set(tmp_path / "t", [b"a", b"b", b"c", b"d"], max_records=1, checksums=True)
    os.remove(tmp_path / "t.manifest.json")
    os.remove(tmp_path / "t-00000.rec")
    os.remove(tmp_path / "t-00000.idx")
    os.remove(tmp_path / "t-00000.crc32")  # shard 0 gone: shards 1..3 still there
    before = files_in(tmp_path)
    with pytest.raises(OutputExistsError) as err:
        ShardWriter(tmp_path / "t", max_records=1)
    assert "t-00001" in str(err.value)
    assert files_in(tmp_path) == before
    aborted = ShardWriter(tmp_path / "t", max_records=2, force=True)
    aborted.write(0, b"x")
    aborted.abort()  # nothing is deleted before the new set is committed
    assert files_in(tmp_path) == before
    write_set(tmp_path / "t", [b"x", b"y", b"z"], max_records=2, force=True)
    assert files_in(tmp_path) == ["t-00000.idx", "t-00000.rec", "t-00001.idx", "t-00001.rec",
                                  "t.manifest.json"]
    assert list(recio.InputSplit(str(tmp_path / "t-*.rec"))) == [b"x", b"y", b"z"]


def test_made_by_is_kept(tmp_path):
    write_set(tmp_path / "t", [b"a"], made_by={"command": "im2rec x y"})
    made_by = load_manifest(tmp_path / "t.manifest.json").made_by
    assert made_by["command"] == "im2rec x y" and made_by["tool"].startswith("recio ")


# -- verifying ------------------------------------------------------------------------------------
@pytest.fixture
def shard_set(tmp_path):
    payloads = [bytes([i]) * (50 + i) for i in range(12)]
    write_set(tmp_path / "t", payloads, max_records=4, checksums=True)
    return tmp_path / "t.manifest.json", payloads


def test_a_flipped_byte_is_named_by_shard_and_by_record(shard_set):
    path, payloads = shard_set
    manifest = load_manifest(path)
    shard = manifest.shards[1]
    offsets = recio.read_index(shard.idx)[1]
    flip_byte(shard.rec, offsets[2] + 8 + 5)  # inside record 2 of shard 1 (key 6)
    shallow = verify_manifest(path)
    assert [p.path for p in shallow.problems] == [shard.rec]
    assert "CRC-32" in shallow.problems[0].problem
    deep = verify_manifest(path, deep=True)
    named = [p for p in deep.problems if p.record is not None]
    assert [(p.path, p.record, p.key, p.offset) for p in named] == \
        [(shard.rec, 2, 6, offsets[2])]
    with ShardReader(path, verify=True) as reader:
        assert reader[5] == payloads[5]
        with pytest.raises(ChecksumError) as err:
            reader[6]
        assert err.value.path == shard.rec and err.value.offset == offsets[2]
        assert "key 6" in str(err.value)
    with ShardReader(path) as reader:  # without verify the damage passes unseen
        assert reader[6] != payloads[6] and len(reader[6]) == len(payloads[6])


def test_missing_truncated_and_miscounted_shards_are_named(shard_set):
    path, _ = shard_set
    manifest = load_manifest(path)
    os.remove(manifest.shards[0].crc)
    with open(manifest.shards[1].rec, "r+b") as f:
        f.truncate(os.path.getsize(manifest.shards[1].rec) - 4)
    with open(manifest.shards[2].idx, "a") as f:
        f.write("99\t0\n")
    problems = [str(p) for p in verify_manifest(path).problems]
    assert any(manifest.shards[0].crc in p and "missing" in p for p in problems)
    assert any(manifest.shards[1].rec in p and "bytes; the manifest says" in p for p in problems)
    assert any(manifest.shards[2].idx in p and "has 5 records" in p for p in problems)
    with open(manifest.shards[2].idx, "a") as f:
        f.write("x\ty\n")
    problems = [str(p) for p in verify_manifest(path).problems]
    assert any(manifest.shards[2].idx in p and "line 6: cannot parse" in p for p in problems)


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ('{"format": "other"}', "not a recio shard manifest"),
    ('{"format": "recio.shards", "version": 9}', "version 9"),
    ('{"format": "recio.shards", "version": 1, "checksum": "crc32", "shards": '
     '[{"rec": "../x.rec", "idx": "x.idx", "rec_crc32": "0", "idx_crc32": "0", '
     '"records": 1, "rec_bytes": 1, "idx_bytes": 1}]}', "beside the manifest"),
    ('{"format": "recio.shards", "version": 1, "checksum": "crc32", "shards": '
     '[{"rec": "x.rec", "idx": "x.idx", "rec_crc32": "0", "idx_crc32": "0", '
     '"records": -1, "rec_bytes": 1, "idx_bytes": 1}]}', "whole number"),
])
def test_malformed_manifests_are_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.manifest.json"
    path.write_text(text)
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert message in str(err.value) and str(path) in str(err.value)


@pytest.mark.slow
def test_recio_verify_on_a_manifest(shard_set, script):
    path, _ = shard_set
    ok = subprocess.run([*script("recio"), "verify", str(path), "--deep"], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("OK: ") and "12 records" in ok.stdout
    shard = load_manifest(path).shards[2]
    flip_byte(shard.rec, 20)
    bad = subprocess.run([*script("recio"), "verify", str(path), "--deep", "--json"],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    report = json.loads(bad.stdout)
    assert not report["clean"] and {p["path"] for p in report["problems"]} == {shard.rec}
    assert [p["key"] for p in report["problems"] if p["record"] is not None] == [8]
    plain = subprocess.run([*script("recio"), "verify", shard.rec, "--deep"],
                           capture_output=True, text=True)
    assert plain.returncode == 2 and "--deep takes a manifest" in plain.stderr
    assert "Traceback" not in plain.stderr
    (path.parent / "x.manifest.json").write_text("{")
    broken = subprocess.run([*script("recio"), "verify", str(path.parent / "x.manifest.json")],
                            capture_output=True, text=True)
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr
    assert "Traceback" not in broken.stderr


# -- the combined index and the readers ------------------------------------------------------------
def test_combined_index_runs_across_the_shards_as_dali_reads_them(shard_set, tmp_path):
    path, payloads = shard_set
    out = tmp_path / "all.idx"
    assert combined_index(path, out) == len(payloads)
    keys, offsets = recio.read_index(out)
    assert keys == list(range(len(payloads)))
    joined = b"".join(open(s.rec, "rb").read() for s in load_manifest(path).shards)
    ends = offsets[1:] + [len(joined)]
    for payload, start, end in zip(payloads, offsets, ends):  # DALI: size = next offset - this
        assert recio.RecordReader(__import__("io").BytesIO(joined[start:end])).read() == payload
    with pytest.raises(OutputExistsError):
        combined_index(path, out)
    with pytest.raises(OutputExistsError):  # never over one of the inputs
        combined_index(path, load_manifest(path).shards[0].idx, force=True)


@pytest.mark.slow
def test_recio_index_combined(shard_set, tmp_path, script):
    path, payloads = shard_set
    out = tmp_path / "all.idx"
    done = subprocess.run([*script("recio"), "index", "--combined", str(path), "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(recio.read_index(out)[0]) == len(payloads)
    again = subprocess.run([*script("recio"), "index", "--combined", str(path), "-o", str(out)],
                           capture_output=True, text=True)
    assert again.returncode == 2 and "--force" in again.stderr


@pytest.mark.slow
def test_input_split_inspect_and_split_take_a_manifest(shard_set, script):
    path, payloads = shard_set
    rec_paths = load_manifest(path).rec_paths()
    for parts in (1, 2, 3, 5):
        by_manifest = [list(recio.InputSplit(str(path), i, parts)) for i in range(parts)]
        by_list = [list(recio.InputSplit(rec_paths, i, parts)) for i in range(parts)]
        assert by_manifest == by_list
        assert sum(by_manifest, []) == payloads
    with ShardReader(path) as reader:
        assert list(reader) == payloads and reader.by_key(7) == payloads[7]
    inspected = subprocess.run([*script("recio"), "inspect", str(path), "--json"],
                               capture_output=True, text=True)
    assert inspected.returncode == 0, inspected.stderr
    assert inspected.stdout.count("t-0000") >= 3
    planned = subprocess.run([*script("recio"), "split", str(path), "-n", "2"],
                             capture_output=True, text=True)
    assert planned.returncode == 0 and "3 file(s)" in planned.stdout


def _image_set(tmp_path):
    """A shard set of 30 image records (IRHeader, label = key % 5) and its shard paths."""
    from recio.image.header import IRHeader, pack

    rng = np.random.default_rng(3)
    bodies = [rng.bytes(int(n)) for n in rng.integers(10, 400, 30)]
    with ShardWriter(tmp_path / "img", max_records=8) as writer:
        for key, body in enumerate(bodies):
            writer.write(key, pack(IRHeader(0, float(key % 5), key, 0), body))
    return writer.manifest, bodies


def test_record_dataset_takes_a_manifest_a_list_and_a_glob(tmp_path):
    need("torch")
    from recio.torch import RecordDataset

    manifest, bodies = _image_set(tmp_path)
    expected = [(body, float(key % 5)) for key, body in enumerate(bodies)]
    for source in (manifest.path, manifest.rec_paths(), str(tmp_path / "img-*.rec")):
        ds = RecordDataset(source, decode="raw")
        assert [(bytes(x), float(y)) for x, y in ds] == expected, source
    chosen = RecordDataset(manifest.path, keys=[29, 0, 9], decode="raw")
    assert [bytes(x) for x, _ in chosen] == [bodies[29], bodies[0], bodies[9]]
    with pytest.raises(KeyError, match="not in the shard set"):
        RecordDataset(manifest.path, keys=[30])


@pytest.mark.slow
def test_minibatch_source_and_verify_take_a_manifest_and_a_glob(tmp_path, script):
    from recio.sequence import pack_sequence
    from recio.sequence.minibatch import MinibatchSource

    rng = np.random.default_rng(5)
    with ShardWriter(tmp_path / "seq", max_records=7) as writer:
        for key in range(20):
            writer.write(key, pack_sequence(
                {"x": rng.random((int(rng.integers(1, 6)), 2)).astype(np.float32)}))

    def batches(source):
        mbs = MinibatchSource(source, randomize=False)
        out = []
        while (mb := mbs.next_minibatch(8)) is not None:
            out.append([s.tolist() for s in mb["x"]])
        return out

    with pytest.warns(UserWarning):  # no .len sidecars: the shards are scanned for counts
        from_manifest = batches(str(writer.manifest.path))
    with pytest.warns(UserWarning):
        from_glob = batches(str(tmp_path / "seq-*.rec"))
    assert from_manifest == from_glob and sum(len(b) for b in from_manifest) == 20
    proc = subprocess.run([*script("recio"), "verify", str(tmp_path / "seq-*.rec"),
                           str(writer.manifest.path), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["clean"] and len(report["files"]) == 4  # 3 shards and the manifest
