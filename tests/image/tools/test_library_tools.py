"""The library side of the commands: resharding, index rebuilding, extraction, verification,
bucket summaries, the split plan; and the thin CLI over them (help, -q, refusing to overwrite)."""
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import recio
from recio.errors import OutputExistsError, RecordIOError
from recio.image.tools.extract import extract_images
from recio.image.header import IR_STRUCT
from recio.image.tools.id_index import index_by_id, record_ids
from recio.image.lists import read_list
from recio.image.packing.settings import PackSettings
from recio.image.tools.verify import verify_file
from recio.records import framing
from recio.records.index import read_index
from recio.records.index_cache import index_cache_path
from recio.records.reindex import rebuild_index, scan_record_offsets
from recio.records.shards.reshard import part_paths, reshard
from recio.records.split import InputSplit, plan_split
from recio.sequence.bucket_summary import bucket_summary, length_bins
from recio.sequence import bucketing as bk

COMMANDS = ["buckets", "convert", "extract", "im2rec", "index", "inspect", "split", "verify"]


def recio_cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "recio", *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kwargs)


def jpeg(w, h):
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (w, h, 0)).save(buf, format="JPEG")
    return buf.getvalue()


def write_rec(path, payloads):
    with open(path, "wb") as f:
        for p in payloads:
            f.write(framing.encode_record(p))
    return str(path)


def leftovers(folder):
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


# -- plan_split and the idx_paths keyword --------------------------------------------------------
def test_plan_split_counts_are_mxnets(golden):
    manifest = json.loads((golden / "split" / "manifest.json").read_text())
    files = [str(golden / "split" / name) for name in manifest["files"]]
    for n in (1, 3, 8):
        calls = []
        plan = plan_split(files, n, progress=calls.append)
        assert [p.records for p in plan.parts] == \
            [len(manifest["partitions"][f"{k}/{n}"]) for k in range(n)]
        assert calls == [1] * n
        assert plan.parts[0].begin == 0 and plan.parts[-1].end == plan.total_bytes
        assert all(a.end == b.begin for a, b in zip(plan.parts, plan.parts[1:]))
    only = plan_split(files, 4, 2, count=False)
    assert [p.part_index for p in only.parts] == [2] and only.parts[0].records is None
    data = only.to_dict()
    assert set(data["parts"][0]) == {"part", "begin", "end", "bytes", "records", "spans"}
    with pytest.raises(ValueError, match="part_index"):
        plan_split(files, 4, 4)


def test_idx_paths_keyword(split_files, tmp_path):
    elsewhere = []
    for f in split_files:
        target = tmp_path / ("moved_" + os.path.basename(f)[:-4] + ".idx")
        os.replace(f[:-4] + ".idx", target)
        elsewhere.append(str(target))
    split = InputSplit(split_files, 1, 3, balance="records", idx_paths=elsewhere)
    assert split.count_records() == 34
    parts = InputSplit.all_parts(split_files, 3, balance="records", idx_paths=elsewhere)
    assert [p.count_records() for p in parts] == [34, 34, 32]
    assert list(parts[1]) == list(split)


# -- reshard -------------------------------------------------------------------------------------
def test_reshard_parts_concatenate_to_the_golden_input(golden, tmp_path):
    src = golden / "split" / "part0.rec"
    for n in (1, 2, 5):
        prefix = tmp_path / f"n{n}" / "shard"
        copied = []
        plan = reshard(str(src), n, prefix, progress=copied.append)
        outs = [part_paths(prefix, k) for k in range(n)]
        joined = b"".join(open(rec, "rb").read() for rec, _ in outs)
        assert joined == src.read_bytes()
        assert sum(copied) == src.stat().st_size
        assert [p.rec_path for p in plan.parts] == [rec for rec, _ in outs]
        keys, offsets = [], []
        base = 0
        for rec, idx in outs:
            k, o = read_index(idx, key_type=str)
            keys += k
            offsets += [base + x for x in o]
            base += os.path.getsize(rec)
        # the input's keys, at the input's offsets: the .idx lines are the golden ones
        assert "".join(f"{k}\t{o}\n" for k, o in zip(keys, offsets)).encode() == \
            (golden / "split" / "part0.idx").read_bytes()
    one = tmp_path / "whole"
    reshard(str(golden / "split" / "part2.rec"), 1, one)
    for ext in (".rec", ".idx"):
        assert open(f"{one}_0{ext}", "rb").read() == (golden / "split" / f"part2{ext}").read_bytes()


def test_reshard_matches_input_split_and_writes_one_part(split_files, tmp_path):
    prefix = tmp_path / "out" / "p"
    plan = reshard(split_files, 4, prefix, balance="records")
    expected = [list(p) for p in InputSplit.all_parts(split_files, 4, balance="records")]
    for k, part in enumerate(plan.parts):
        rec, idx = part_paths(prefix, k)
        assert list(recio.RecordReader(rec)) == expected[k]
        assert part.records == len(expected[k]) == len(read_index(idx)[0])
    only = tmp_path / "only" / "p"
    plan = reshard(split_files, 4, only, 2)
    assert sorted(os.listdir(tmp_path / "only")) == ["p_2.idx", "p_2.rec"]
    assert plan.parts[0].to_dict()["output"] == f"{only}_2.rec"


def test_reshard_numbers_unindexed_records(tmp_path):
    rec = write_rec(tmp_path / "plain.rec", [bytes([i]) * (i + 1) for i in range(10)])
    reshard(rec, 3, tmp_path / "o")
    keys = [read_index(part_paths(tmp_path / "o", k)[1])[0] for k in range(3)]
    assert sum(keys, []) == list(range(10))


def test_reshard_damaged_input_leaves_nothing(split_files, tmp_path):
    data = bytearray(open(split_files[1], "rb").read())
    data[-30:] = b""
    with open(split_files[1], "wb") as f:
        f.write(data)
    out = tmp_path / "out"
    with pytest.raises(RecordIOError) as err:
        reshard(split_files, 3, out / "p")
    assert err.value.path == split_files[1] and err.value.offset is not None
    assert not out.exists() or os.listdir(out) == []


@pytest.mark.slow
def test_reshard_refuses_to_replace_an_input(tmp_path):
    rec = write_rec(tmp_path / "s_0.rec", [b"a" * 9, b"b" * 3])
    before = open(rec, "rb").read()
    with pytest.raises(OutputExistsError) as err:
        reshard(rec, 2, tmp_path / "s")
    assert err.value.path == rec
    assert open(rec, "rb").read() == before and leftovers(tmp_path) == []
    res = recio_cli("split", rec, "-n", "2", "--write", tmp_path / "s")
    assert res.returncode == 2 and "s_0.rec" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(payloads=st.lists(st.binary(max_size=300), min_size=1, max_size=30),
       n=st.integers(1, 7), use_idx=st.booleans())
def test_reshard_property(tmp_path_factory, payloads, n, use_idx):
    folder = tmp_path_factory.mktemp("rs")
    rec = write_rec(folder / "in.rec", payloads)
    if use_idx:
        recio.records.write_index(folder / "in.idx", [f"k{i}" for i in range(len(payloads))],
                          recio.build_index(rec))
    reshard(rec, n, folder / "o")
    outs = [part_paths(folder / "o", k) for k in range(n)]
    assert b"".join(open(r, "rb").read() for r, _ in outs) == open(rec, "rb").read()
    got_keys, got = [], []
    for r, idx in outs:
        keys, offsets = read_index(idx, key_type=str)
        with recio.RecordReader(r) as reader:
            got += [reader.read_at(o) for o in offsets]
        got_keys += keys
    assert got == payloads
    assert got_keys == ([f"k{i}" for i in range(len(payloads))] if use_idx
                        else [str(i) for i in range(len(payloads))])


# -- rebuild_index and index_by_id ---------------------------------------------------------------
def test_rebuild_index_is_rec2idx(golden, tmp_path):
    rec = tmp_path / "tricky.rec"
    shutil.copy(golden / "records" / "tricky.rec", rec)
    open(index_cache_path(tmp_path / "tricky.idx"), "wb").close()
    scanned = []
    written = rebuild_index(rec, progress=scanned.append)
    assert written.records == 18 and written.idx_path == str(tmp_path / "tricky.idx")
    assert (tmp_path / "tricky.idx").read_bytes() == \
        (golden / "records" / "tricky.idx").read_bytes()
    assert sum(scanned) == rec.stat().st_size
    assert not os.path.exists(index_cache_path(tmp_path / "tricky.idx"))
    assert scan_record_offsets(rec).tolist() == recio.build_index(str(rec))


def test_rebuild_index_damage_and_refusals(tmp_path):
    rec = tmp_path / "bad.rec"
    rec.write_bytes(framing.encode_record(b"x" * 40) + framing.encode_record(b"y" * 40)[:-8])
    with pytest.raises(RecordIOError) as err:
        rebuild_index(rec)
    assert err.value.path == str(rec) and err.value.offset == 48
    assert not (tmp_path / "bad.idx").exists()
    good = write_rec(tmp_path / "good.rec", [b"abc"])
    with pytest.raises(OutputExistsError):
        rebuild_index(good, good)
    assert open(good, "rb").read() == framing.encode_record(b"abc")


@pytest.mark.parametrize("folder, name", [("im2rec", "all"), ("im2rec", "multi"),
                                          ("split", "part2")])
def test_index_by_id_gives_mxnets_idx(golden, tmp_path, folder, name):
    rec = tmp_path / f"{name}.rec"
    shutil.copy(golden / folder / f"{name}.rec", rec)
    written = index_by_id(rec)
    assert (tmp_path / f"{name}.idx").read_bytes() == \
        (golden / folder / f"{name}.idx").read_bytes()
    assert written.records == len(read_index(golden / folder / f"{name}.idx")[0])


def test_index_by_id_rejects_repeats_and_short_records(tmp_path):
    rec = str(tmp_path / "dup.rec")
    with recio.RecordWriter(rec) as w:
        for rid in (5, 6, 5, 6):
            w.write(recio.pack(recio.IRHeader(0, 1.0, rid, 0), b"img"))
    offsets = scan_record_offsets(rec)
    assert record_ids(rec, offsets) == [5, 6, 5, 6]
    with pytest.raises(RecordIOError, match="2 repeated ids") as err:
        index_by_id(rec)
    assert err.value.offset == int(offsets[2]) and f"byte {int(offsets[0])}" in str(err.value)
    assert not (tmp_path / "dup.idx").exists()
    short = write_rec(tmp_path / "short.rec", [b"x" * 30, b"tiny"])
    with pytest.raises(RecordIOError, match="no image header") as err:
        index_by_id(short)
    assert err.value.offset == 40
    big = str(tmp_path / "big.rec")
    with recio.RecordWriter(big) as w:
        w.write(recio.pack(recio.IRHeader(0, 1.0, 2**64 - 1, 0), b""))
        w.write(recio.pack(recio.IRHeader(0, 1.0, 3, 0), b""))
    index_by_id(big)
    assert read_index(tmp_path / "big.idx") == ([2**64 - 1, 3], [0, 32])


# -- extract_images ------------------------------------------------------------------------------
def test_extract_golden_lists_match_mxnets_ids_and_labels(golden, tmp_path):
    for name in ("all", "multi"):
        src = golden / "im2rec" / f"{name}.rec"
        read = []
        result = extract_images(src, tmp_path / name, progress=read.append)
        assert sum(read) == src.stat().st_size
        assert (result.images, result.skipped) == (13, 0)
        assert result.vector_labels == (name == "multi") and result.warnings() == []
        ours = [line.split("\t")[:-1] for line in open(result.lst_path)]
        mxnet = [line.split("\t")[:-1] for line in open(golden / "im2rec" / f"{name}.lst")]
        assert sorted(ours) == sorted(mxnet)  # same ids and labels, written as MXNet does
        for item in read_list(result.lst_path):
            assert (tmp_path / name / item.path).exists()
        repacked = [recio.pack(recio.IRHeader(0, list(i.labels) if len(i.labels) > 1
                                              else i.labels[0], i.index, 0),
                               (tmp_path / name / i.path).read_bytes())
                    for i in read_list(result.lst_path)]
        assert repacked == list(recio.RecordReader(str(src)))


def test_extract_reports_what_a_list_cannot_carry(tmp_path):
    rec = str(tmp_path / "odd.rec")
    with recio.RecordWriter(rec) as w:
        w.write(recio.pack(recio.IRHeader(0, 0.123456789, 1, 7), jpeg(4, 4)))
        w.write(recio.pack(recio.IRHeader(0, [2.0], 2, 0), jpeg(4, 4)))
        w.write(b"not an image record at all, long enough for a header")
        w.write(IR_STRUCT.pack(9, 0.0, 3, 0) + b"\xff\xd8\xff")  # 9 labels announced, 3 bytes
    result = extract_images(rec, tmp_path / "o")
    assert (result.images, result.skipped) == (2, 2)
    assert (result.inexact_labels, result.id2_dropped, result.single_vectors) == (1, 1, 1)
    assert len(result.warnings()) == 3
    assert sorted(os.listdir(tmp_path / "o")) == ["1.jpg", "2.jpg", "odd.lst"]


def test_extract_damaged_input_and_refusal(golden, tmp_path):
    data = (golden / "im2rec" / "all.rec").read_bytes()
    bad = tmp_path / "bad.rec"
    bad.write_bytes(data[:-100])
    with pytest.raises(RecordIOError) as err:
        extract_images(bad, tmp_path / "o")
    assert err.value.path == str(bad) and err.value.offset is not None
    assert not (tmp_path / "o").exists()  # the damage is found before anything is written
    good = tmp_path / "good.rec"
    good.write_bytes(data)
    with pytest.raises(OutputExistsError):
        extract_images(good, tmp_path, lst_name="good.rec")
    assert good.read_bytes() == data


# -- verify_file ---------------------------------------------------------------------------------
def test_verify_file(split_files, tmp_path):
    report = verify_file(split_files[0], images=True)
    assert report.clean and report.images_checked
    assert report.idx_path == split_files[0][:-4] + ".idx"
    assert report.to_dict()["records"] == 37
    data = bytearray(open(split_files[0], "rb").read())
    data[2680:2684] = b"\0\0\0\0"
    bad = tmp_path / "bad.rec"
    bad.write_bytes(bytes(data))
    report = verify_file(bad)
    assert not report.clean and report.stats.damage[0].start == 2680
    with pytest.raises(FileNotFoundError):
        verify_file(split_files[0], idx_path=tmp_path / "none.idx")
    broken = str(tmp_path / "broken.rec")
    with recio.RecordWriter(broken) as w:
        w.write(recio.pack(recio.IRHeader(0, 1.0, 4, 0), jpeg(20, 20)[:150]))
    decoded = []
    report = verify_file(broken, images=True, image_progress=decoded.append)
    assert sum(decoded) == 1 and not report.clean and "id 4" in report.bad_images[0].reason


# -- bucket_summary ------------------------------------------------------------------------------
@pytest.fixture
def seq_rec(tmp_path):
    from recio.sequence import SequenceWriter

    lengths = np.random.default_rng(3).integers(1, 300, 120)
    rec = tmp_path / "seq.rec"
    with SequenceWriter(rec) as w:
        for n in lengths:
            w.write({"x": np.zeros((int(n), 2), np.float32)})
    return rec, lengths


def test_bucket_summary(seq_rec):
    rec, lengths = seq_rec
    steps = []
    s = bucket_summary(rec, 4, 8, 5, progress=steps.append)
    assert steps == [1] * 5 and len(s["table"]) == 5
    assert s["boundaries"] == bk.bucket_boundaries(lengths, 4, 8)
    assert s["padding_waste"] == pytest.approx(bk.padding_waste(lengths, s["boundaries"], 8))
    assert (s["sequences"], s["samples"]) == (120, int(lengths.sum()))
    assert s["max_length"] == lengths.max() and sum(b["count"] for b in s["histogram"]) == 120
    json.dumps(s)


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=200), st.integers(1, 20))
def test_length_bins_cover_every_length_once(values, bins):
    out = length_bins(np.asarray(values), bins)
    assert sum(b["count"] for b in out) == len(values)
    assert out[0]["low"] == min(values) and out[-1]["high"] == max(values)
    assert all(a["high"] + 1 == b["low"] for a, b in zip(out, out[1:]))
    assert len(out) <= max(bins, 1)


# -- the command line over them ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_explains_itself(cmd):
    res = recio_cli(cmd, "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"Usage: recio {cmd}") and "--quiet" in res.stdout
    assert "Example" in res.stdout or "im2rec data/train" in res.stdout


@pytest.mark.slow
def test_im2rec_module_help():
    res = subprocess.run([sys.executable, "-m", "recio.im2rec", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and "Usage: im2rec" in res.stdout


@pytest.mark.slow
def test_buckets_q_is_quiet_and_n_is_the_count(seq_rec):
    rec, lengths = seq_rec
    new = recio_cli("buckets", rec, "-n", "2", "-q", "--json")
    assert new.returncode == 0 and new.stderr == ""
    assert json.loads(new.stdout)["boundaries"] == bk.bucket_boundaries(lengths, 2, 32)


@pytest.mark.slow
def test_index_and_extract_commands_call_the_library(golden, tmp_path):
    rec = tmp_path / "multi.rec"
    shutil.copy(golden / "im2rec" / "multi.rec", rec)
    res = recio_cli("index", rec, "--key", "id")
    assert res.returncode == 0 and "13 records (keys: id)" in res.stdout
    assert (tmp_path / "multi.idx").read_bytes() == (golden / "im2rec" / "multi.idx").read_bytes()
    res = recio_cli("extract", rec, tmp_path, "--lst", "multi.rec", "--force")
    assert res.returncode == 2 and "multi.rec: is an input of this command" in res.stderr
    assert "Traceback" not in res.stderr
    assert rec.read_bytes() == (golden / "im2rec" / "multi.rec").read_bytes()


# -- pack_prefix: what `im2rec PREFIX ROOT` does -------------------------------------------------
def test_pack_prefix_packs_every_list_of_the_prefix_like_mxnet(golden, tmp_path):
    from recio.image.packing.prefix import pack_prefix
    from recio.image.pixels.transform import ImageOptions

    for name in ("chunks_0.lst", "chunks_1.lst"):
        shutil.copy(golden / "im2rec" / name, tmp_path / name)
    seen = []
    results = list(pack_prefix(tmp_path / "chunks", golden / "im2rec" / "images",
                               PackSettings(ImageOptions(resize=0), pass_through=True),
                               progress_for=lambda lst: seen.append(os.path.basename(lst))))
    assert [os.path.basename(r.lst_path) for r in results] == ["chunks_0.lst", "chunks_1.lst"]
    assert seen == ["chunks_0.lst", "chunks_1.lst"]
    for r in results:
        items = list(read_list(r.lst_path))
        assert r.skipped == 0 and r.packed == len(items) > 0
        with recio.IndexedRecordReader(r.rec_path, r.idx_path) as records:
            assert list(records) == [item.index for item in items]  # keys: the list's indices
            for item in items:  # each record: the list line's id and label, the image's bytes
                header, payload = recio.unpack(records[item.index])
                assert (header.id, header.label) == (item.index, item.labels[0])
                assert payload == (golden / "im2rec" / "images" / item.path).read_bytes()


def test_pack_prefix_without_lists_says_how_to_make_them(tmp_path):
    from recio.errors import ListFileError
    from recio.image.packing.prefix import pack_prefix

    with pytest.raises(ListFileError, match="--list --recursive"):
        list(pack_prefix(tmp_path / "train", tmp_path))
    with pytest.raises(ListFileError, match="no such folder"):
        list(pack_prefix(tmp_path / "missing" / "train", tmp_path))


def test_check_images_reports_a_damaged_irheader_instead_of_skipping_it(tmp_path):
    from recio.image.tools.verify import check_images

    good = recio.pack_img(recio.IRHeader(0, 1.0, 7, 0), np.zeros((4, 4, 3), np.uint8))
    bad_flag = IR_STRUCT.pack(1000, 0.0, 8, 0) + b"\xff\xd8"  # announces 1000 labels
    rec = write_rec(tmp_path / "x.rec", [good, bad_flag, b"short"])
    heads = [0, 8 + len(good) + (-len(good) % 4)]
    heads.append(heads[1] + 8 + len(bad_flag) + (-len(bad_flag) % 4))
    regions = check_images(rec, heads)
    assert [r.start for r in regions] == heads[1:]
    assert all("IRHeader" in r.reason for r in regions)
