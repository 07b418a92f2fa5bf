"""Every entry point names the real culprit of a damaged dataset, and its message leads to a fix.

The scenarios of a newcomer's first hour, replayed on a small im2rec-style dataset: a ``.rec``
cut short with its old ``.idx``, an ``.idx`` of another file, a manifest / ``.idx`` / ``.lst``
given where a ``.rec`` belongs, an index whose keys repeat, and ``recio index --force`` over
im2rec's keys. Commands run the way users run them (CliRunner, and a subprocess for the exit
codes and the one-line message).
"""
import io
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import recio
from recio.cli.main import recio as recio_group
from recio.image.tools.verify import verify_file
from recio.records.index import open_index
from recio.sequence.corpora import MemoryCorpus
from recio.sequence.minibatch import Minibatch


def run(*args):
    return CliRunner().invoke(recio_group, [str(a) for a in args])


def jpeg(seed):
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (9, 7, 3), dtype=np.uint8)).save(buf, format="JPEG")
    return buf.getvalue()


@pytest.fixture
def dataset(tmp_path):
    """``data/train.rec`` + ``.idx`` keyed as im2rec keys them (shuffled .lst indices = image
    ids), and ``other.rec`` + ``.idx``, a different file."""
    folder = tmp_path / "data"
    folder.mkdir()
    ids = [int(i) for i in np.random.default_rng(5).permutation(12) + 20]
    with recio.IndexedRecordWriter(folder / "train.rec", folder / "train.idx") as w:
        for n, i in enumerate(ids):
            w.write(i, recio.pack(recio.IRHeader(0, float(n % 3), i, 0), jpeg(i)))
    with recio.IndexedRecordWriter(folder / "other.rec", folder / "other.idx") as w:
        for i in range(12):
            w.write(i, recio.pack(recio.IRHeader(0, 0.0, i, 0), jpeg(100 + i) * 2))
    return folder, ids


def cut(folder, records=7, into=40):
    """``short.rec``: train.rec cut ``into`` bytes into its record ``records``, with the old
    train.idx as its index; returns the byte of the cut record."""
    offsets = [int(o) for o in recio.IndexedRecordReader(folder / "train.rec").index.offsets]
    data = (folder / "train.rec").read_bytes()
    (folder / "short.rec").write_bytes(data[:offsets[records] + into])
    shutil.copy(folder / "train.idx", folder / "short.idx")
    return offsets[records]


# -- a .rec cut short ----------------------------------------------------------------------
def test_a_rec_cut_between_two_records_is_truncated_not_a_bad_index(dataset):
    """Cut at a record boundary (or in the last record's padding) the .rec holds only whole
    records, but its .idx lists more past the end: verify says TRUNCATED and points to repair,
    as the readers do, not BAD INDEX with `recio index --force` (which would make a shorter
    file look whole)."""
    folder, _ = dataset
    whole = recio.IndexedRecordReader(folder / "train.rec")
    offsets = [int(o) for o in whole.index.offsets]
    padding = [offsets[r + 1] - offsets[r] - 8 - len(whole[k])
               for r, k in enumerate(whole.keys()[:-1])]
    padded = next(r for r, pad in enumerate(padding) if pad > 0)
    # at a boundary; inside the padding of the record before the next
    for records, into in ((7, 0), (padded + 1, -padding[padded])):
        head = cut(folder, records=records, into=into)
        size = (folder / "short.rec").stat().st_size
        res = run("verify", folder / "short.rec")
        last = res.output.strip().splitlines()
        assert res.exit_code == 1 and "BAD INDEX" not in res.output, res.output
        assert last[-2].startswith(f"TRUNCATED: {folder / 'short.rec'}: the file ends at byte "
                                   f"{size:,}, between two records") and \
            f"the {records} records before it are intact" in last[-2], (into, res.output)
        assert last[-1].startswith("next: rescue the intact records: `recio repair")
        with pytest.raises(recio.errors.TruncatedFileError):
            recio.IndexedRecordReader(folder / "short.rec")
        assert verify_file(folder / "short.rec").truncated_at == size == head + into


def test_verify_says_truncated_counts_the_intact_records_and_points_to_repair(dataset):
    folder, _ = dataset
    head = cut(folder)
    res = run("verify", folder / "short.rec")
    assert res.exit_code == 1
    last = res.output.strip().splitlines()
    assert last[-2].startswith(f"TRUNCATED: {folder / 'short.rec'}: the file ends inside the "
                               f"record at byte {head:,}") and "the 7 records before it are " \
        "intact" in last[-2]
    assert last[-1].startswith("next: rescue the intact records: `recio repair") and \
        "DAMAGED" not in res.output
    # the command it names works and gives the 7 records back, keys kept
    res = run("repair", folder / "short.rec", "-o", folder / "short_repaired")
    assert res.exit_code == 0
    fixed = recio.IndexedRecordReader(folder / "short_repaired.rec")
    whole = recio.IndexedRecordReader(folder / "train.rec")
    assert fixed.keys() == whole.keys()[:7] and all(fixed[k] == whole[k] for k in fixed)


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["index", "{short}", "--force"], ["extract", "{short}", "{out}"],
    ["repack", "{short}", "{out}", "--shuffle"], ["split", "{short}", "-n", "2", "--write",
                                                   "{out}/x"],
    ["show", "{short}", "-o", "{out}.png"]])
def test_every_command_says_truncated_and_names_repair(dataset, script, argv):
    folder, _ = dataset
    head = cut(folder)
    args = [a.format(short=folder / "short.rec", out=folder / "out") for a in argv]
    proc = subprocess.run([*script("recio"), *args], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "truncated file" in proc.stderr and f"record at byte {head}" in proc.stderr
    assert "recio repair" in proc.stderr and "Traceback" not in proc.stderr
    assert "recio index" not in proc.stderr  # no dead end


def test_readers_say_truncated(dataset):
    folder, _ = dataset
    head = cut(folder)
    with pytest.raises(recio.errors.TruncatedFileError,
                       match="the 7 record.s. before it are intact") as info:
        recio.IndexedRecordReader(folder / "short.rec")
    assert info.value.offset == head and info.value.path == str(folder / "short.rec")
    with pytest.raises(recio.errors.TruncatedFileError):
        recio.mx.MXIndexedRecordIO(str(folder / "short.idx"), str(folder / "short.rec"), "r")
    with pytest.raises(recio.errors.TruncatedFileError):
        next(iter(recio.ImageBatchIter(path_imgrec=str(folder / "short.rec"),
                                        path_imgidx=str(folder / "short.idx"),
                                        data_shape=(3, 8, 8), batch_size=2)))
    with pytest.raises(recio.errors.TruncatedFileError, match="recio repair"):
        list(recio.RecordReader(folder / "short.rec"))


@pytest.mark.needs("torch")
def test_record_dataset_says_truncated_and_foreign(dataset):
    from recio.torch import RecordDataset

    folder, _ = dataset
    cut(folder)
    with pytest.raises(recio.errors.TruncatedFileError):
        RecordDataset(str(folder / "short.rec"))
    with pytest.raises(recio.errors.IndexMismatchError, match="does not belong to this .rec"):
        RecordDataset(str(folder / "train.rec"), str(folder / "other.idx"))  # offsets past
    shifted(folder)  # offsets inside the file, none on a record head
    ds = RecordDataset(str(folder / "train.rec"), str(folder / "shifted.idx"))
    with pytest.raises(recio.errors.IndexMismatchError, match="does not belong to this .rec"):
        ds.read_record(3)


# -- an index of another file ----------------------------------------------------------------
def shifted(folder):
    """``shifted.idx``: train.idx with every offset moved 16 bytes, into the records."""
    lines = [line.split("\t") for line in (folder / "train.idx").read_text().splitlines()]
    (folder / "shifted.idx").write_text("".join(f"{k}\t{int(o) + 16}\n" for k, o in lines))


def test_an_index_whose_offsets_land_inside_records_is_named(dataset):
    folder, ids = dataset
    shifted(folder)
    reader = recio.IndexedRecordReader(folder / "train.rec", folder / "shifted.idx")
    with pytest.raises(recio.errors.IndexMismatchError,
                       match=f"key {ids[0]} at byte 16: no record starts there; this index "
                             f"does not belong to this .rec"):
        reader[ids[0]]
    res = run("verify", folder / "train.rec", "--index", folder / "shifted.idx")
    assert res.exit_code == 1 and "BAD INDEX" in res.output and "DAMAGED" not in res.output


@pytest.mark.slow
def test_an_index_of_another_file_is_named_not_the_healthy_rec(dataset, script):
    folder, _ = dataset
    res = run("verify", folder / "train.rec", "--index", folder / "other.idx")
    assert res.exit_code == 1 and "DAMAGED" not in res.output
    assert "this index does not belong to this .rec" in res.output
    assert f"BAD INDEX: {folder / 'other.idx'} does not match" in res.output
    assert "the .rec itself is intact: 12 records" in res.output
    assert "next: the .rec is intact; rebuild the index with `recio index" in res.output
    for argv in (["show", folder / "train.rec", "--index", folder / "other.idx", "-o",
                  folder / "g.png"],
                 ["repack", folder / "train.rec", folder / "rp", "--shuffle", "--index",
                  folder / "other.idx"]):
        proc = subprocess.run([*script("recio"), *map(str, argv)], capture_output=True,
                              text=True)
        assert proc.returncode == 2 and "does not belong to this .rec" in proc.stderr
        assert "bad magic" not in proc.stderr and "corrupt" not in proc.stderr
    with pytest.raises(recio.errors.IndexMismatchError) as info:
        recio.IndexedRecordReader(folder / "train.rec", folder / "other.idx")
    assert info.value.path == str(folder / "other.idx")
    shifted(folder)
    mx = recio.mx.MXIndexedRecordIO(str(folder / "shifted.idx"), str(folder / "train.rec"), "r")
    with pytest.raises(recio.errors.IndexMismatchError):
        [mx.read_idx(k) for k in mx.keys]


def test_split_write_never_renumbers_records_its_index_does_not_list(dataset):
    folder, _ = dataset
    shifted(folder)
    shutil.copy(folder / "shifted.idx", folder / "train.idx")
    res = run("split", folder / "train.rec", "-n", "2", "--write", folder / "out" / "x")
    assert res.exit_code == 2 and "is in no entry of its index" in res.output
    assert "--keys renumber" in res.output and not (folder / "out" / "x_0.rec").exists()
    res = run("split", folder / "train.rec", "-n", "2", "--write", folder / "out" / "x",
              "--keys", "renumber")
    assert res.exit_code == 0


def test_an_index_of_a_longer_file(dataset):
    folder, _ = dataset
    shutil.copy(folder / "other.idx", folder / "x.idx")
    shutil.copy(folder / "train.rec", folder / "x.rec")
    (folder / "x.rec").write_bytes((folder / "train.rec").read_bytes()[:3000])
    with pytest.raises((recio.errors.IndexMismatchError, recio.errors.TruncatedFileError)) as info:
        recio.IndexedRecordReader(folder / "x.rec")
    assert "does not belong" in str(info.value) or "truncated" in str(info.value)


def test_one_wrong_index_line_is_named(dataset):
    folder, ids = dataset
    lines = (folder / "train.idx").read_text().splitlines()
    key, offset = lines[4].split("\t")
    lines[4] = f"{key}\t{int(offset) + 16}"
    (folder / "train.idx").write_text("\n".join(lines) + "\n")
    reader = recio.IndexedRecordReader(folder / "train.rec")
    with pytest.raises(recio.errors.IndexFileError,
                       match=f"key {key} of .* says byte {int(offset) + 16}, which lies inside "
                             f"the record at byte {offset}"):
        reader[int(key)]


# -- the wrong kind of file ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("which, words", [
    ("manifest", "a shard set's manifest"),
    ("idx", "an index (.idx)"), ("lst", "an image list (.lst)"), ("png", "an image (png)")])
def test_a_file_that_is_no_rec_is_named(tmp_path, script, which, words):
    if which == "manifest":
        with recio.ShardWriter(str(tmp_path / "s"), max_records=2) as w:
            for i in range(3):
                w.write(i, b"x" * i)
        path = tmp_path / "s.manifest.json"
    elif which == "idx":
        path = tmp_path / "t.idx"
        path.write_text("3\t0\n1\t1516\n")
    elif which == "lst":
        path = tmp_path / "t.lst"
        path.write_text("0\t1.000000\tcat/a.jpg\n1\t0.000000\tdog/b.jpg\n")
    else:
        path = tmp_path / "t.png"
        Image.new("RGB", (3, 3)).save(path)
    for argv in (["show", path, "-o", tmp_path / "g.png"], ["extract", path, tmp_path / "o"],
                 ["index", path], ["repair", path, "-o", tmp_path / "r"],
                 ["verify", path]):
        if which == "manifest" and argv[0] in ("verify",):
            continue  # verify reads manifests
        proc = subprocess.run([*script("recio"), *map(str, argv)], capture_output=True,
                              text=True)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert words in proc.stderr and "bad magic" not in proc.stderr, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) <= 3 and "Traceback" not in proc.stderr
    with pytest.raises(recio.errors.NotRecordFileError, match=words.replace("(", r"\(")
                       .replace(")", r"\)")):
        recio.IndexedRecordReader(path)


def test_extract_names_a_missing_or_wrong_input_before_a_full_folder(dataset, tmp_path):
    """`recio extract` of a mistyped or wrong file into a folder that holds files: the input
    is the culprit, not the folder (which the corrected command would then be refused for)."""
    folder, _ = dataset
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.jpg").write_bytes(b"x")
    (folder / "train.lst").write_text("0\t1.000000\tcat/a.jpg\n")
    for rec, words in ((folder / "trian.rec", "No such file"),
                       (folder / "train.lst", "not a RecordIO file: this is an image list"),
                       (folder / "train.idx", "not a RecordIO file: this is an index")):
        res = run("extract", rec, full)
        assert res.exit_code == 2 and words in res.output and "not empty" not in res.output, \
            res.output
    res = run("extract", folder / "train.rec", full)  # the right file: the folder is named
    assert res.exit_code == 2 and "the folder is not empty" in res.output
    assert os.listdir(full) == ["keep.jpg"]


def test_index_of_a_manifest_suggests_combined(tmp_path):
    with recio.ShardWriter(str(tmp_path / "s"), max_records=2) as w:
        w.write(0, b"x")
    res = run("index", tmp_path / "s.manifest.json")
    assert res.exit_code == 2 and "--combined" in res.output


# -- recio index over an index that had keys -------------------------------------------------
def test_index_force_keeps_im2rec_keys(dataset):
    folder, _ = dataset
    before = (folder / "train.idx").read_text()
    res = run("index", folder / "train.rec", "--force")
    assert res.exit_code == 0 and "keys: id as the index it replaced" in res.output
    assert (folder / "train.idx").read_text() == before
    recio.records.write_index(folder / "train.idx", range(12),
                              recio.build_index(folder / "train.rec"))
    res = run("index", folder / "train.rec", "--force")
    assert res.exit_code == 0 and "keys: position" in res.output


def test_index_force_refuses_to_renumber_keys_it_cannot_keep(dataset):
    folder, _ = dataset
    offsets = recio.build_index(folder / "train.rec")
    recio.records.write_index(folder / "train.idx", [f"img{i}" for i in range(12)], offsets)
    before = (folder / "train.idx").read_bytes()
    res = run("index", folder / "train.rec", "--force")
    assert res.exit_code == 2 and "neither positions nor image ids (e.g. key img0)" in \
        res.output and "--key id" in res.output and "--key position" in res.output
    assert (folder / "train.idx").read_bytes() == before
    shutil.copy(folder / "other.idx", folder / "train.idx")  # another file's index
    res = run("index", folder / "train.rec", "--force")
    assert res.exit_code == 2 and "belongs to another file" in res.output
    res = run("index", folder / "train.rec", "--force", "--key", "id")
    assert res.exit_code == 0 and "keys: id" in res.output
    assert recio.IndexedRecordReader(folder / "train.rec").keys() == dataset[1]


def test_index_over_repeated_image_ids_names_the_option_that_works(tmp_path):
    """im2rec packs a .lst whose indices repeat into records whose ids (and keys) repeat: an
    index by id cannot be made, and the refusal names the option to type."""
    rec, idx = tmp_path / "dup.rec", tmp_path / "dup.idx"
    with recio.IndexedRecordWriter(rec, idx) as w:
        for i in (5, 6, 5, 7):
            w.write(i, recio.pack(recio.IRHeader(0, 0.0, i, 0), jpeg(i)))
    before = idx.read_bytes()
    for key in ([], ["--key", "id"]):
        res = run("index", rec, "--force", *key)
        assert res.exit_code == 2 and "record id 5 is also the id of the record at byte 0" in \
            res.output and "`recio index --key position`" in res.output, res.output
        assert idx.read_bytes() == before
    res = run("index", rec, "--force", "--key", "position")
    assert res.exit_code == 0 and recio.IndexedRecordReader(rec).keys() == [0, 1, 2, 3]


# -- repeated keys -----------------------------------------------------------------------------
@pytest.fixture
def repeated(dataset):
    folder, ids = dataset
    lines = (folder / "train.idx").read_text().splitlines()
    lines[7] = f"{ids[2]}\t{lines[7].split(chr(9))[1]}"  # key of line 3 again on line 8
    (folder / "train.idx").write_text("\n".join(lines) + "\n")
    return folder, ids[2]


def test_repeated_keys_warn_naming_the_key_everywhere(repeated):
    folder, key = repeated
    rec, idx = str(folder / "train.rec"), str(folder / "train.idx")
    pattern = f"key {key} appears on 2 lines"
    with pytest.warns(recio.errors.DuplicateKeyWarning, match=pattern + ".*last line.*1 record"):
        reader = recio.IndexedRecordReader(rec)
    assert len(reader) == 11
    with pytest.warns(recio.errors.DuplicateKeyWarning, match=pattern + ".*as MXNet does"):
        mx = recio.mx.MXIndexedRecordIO(idx, rec, "r")
    assert len(mx.keys) == 12  # MXNet's list keeps every line, its dict the last offset
    with pytest.warns(recio.errors.DuplicateKeyWarning, match=pattern + ".*every line is read"):
        next(iter(recio.ImageBatchIter(path_imgrec=rec, path_imgidx=idx,
                                        data_shape=(3, 8, 8), batch_size=2)))
    res = run("verify", rec)
    assert res.exit_code == 1 and f"key {key} on 2 lines" in res.output
    # every record its own key: the records' image ids are unique, so im2rec's keys come back
    assert "BAD INDEX" in res.output and "--force --key id" in res.output
    with warnings.catch_warnings():
        warnings.simplefilter("error", recio.errors.DuplicateKeyWarning)  # strict users: an error
        with pytest.raises(recio.errors.DuplicateKeyWarning):
            recio.IndexedRecordReader(rec)


@pytest.mark.needs("torch")
def test_record_dataset_reads_every_line_of_an_index_whose_key_repeats(repeated):
    from recio.torch import RecordDataset

    folder, key = repeated
    with pytest.warns(recio.errors.DuplicateKeyWarning, match=f"key {key} appears on 2 lines"):
        ds = RecordDataset(str(folder / "train.rec"))
    assert len(ds) == 12  # 12 records, 12 items: nothing dropped
    with pytest.warns(recio.errors.DuplicateKeyWarning, match="last line"):
        assert len(RecordDataset(str(folder / "train.rec"), keys=[key])) == 1


def test_keys_are_spelled_one_way(tmp_path):
    """``key 99``, never ``key '99'``: int and str keys read the same in every message."""
    with recio.IndexedRecordWriter(tmp_path / "a.rec", tmp_path / "a.idx") as w:
        w.write(99, b"x")
    (tmp_path / "a.idx").write_text("99\t400\n")
    for key_type in (int, str):
        with pytest.raises(recio.errors.IndexFileError) as info:
            recio.IndexedRecordReader(tmp_path / "a.rec", key_type=key_type)
        assert "key 99 -> byte 400" in str(info.value) and "'99'" not in str(info.value)
        with pytest.raises(recio.errors.IndexFileError) as info:
            open_index(tmp_path / "a.idx", key_type, rec_size=12)
        assert "for key 99 is not" in str(info.value) and "'99'" not in str(info.value)
    (tmp_path / "a.idx").write_text("99\t0\n99\t0\n")
    for key_type in (int, str):
        with pytest.warns(recio.errors.DuplicateKeyWarning, match="key 99 appears"):
            recio.IndexedRecordReader(tmp_path / "a.rec", key_type=key_type)


# -- sequences whose layouts disagree --------------------------------------------------------
def test_memory_corpus_and_padded_name_the_sequence():
    with pytest.raises(recio.errors.SequenceError,
                       match="sequence 1: stream 's' is dense float32 of dim 4 where sequence 0 "
                             "has dense float32 of dim 3"):
        MemoryCorpus([{"s": np.zeros((2, 3), np.float32)}, {"s": np.zeros((2, 4), np.float32)}])
    mb = Minibatch({"s": [np.zeros((1, 3)), np.zeros((2, 5))]}, np.array([7, 9]), 3, 3, 2, 0,
                   False, False)
    with pytest.raises(recio.errors.SequenceError,
                       match="sequence 9 of the corpus: .* dim 5 where sequence 7 has .* dim 3"):
        mb.padded("s")


def test_a_shard_sets_index_only_problem_is_not_damaged(tmp_path):
    with recio.ShardWriter(str(tmp_path / "s"), max_records=2) as w:
        for i in range(5):
            w.write(i, b"record %d" % i)
    with open(tmp_path / "s-00001.idx", "a") as f:
        f.write("junk\n")
    res = run("verify", tmp_path / "s.manifest.json")
    assert res.exit_code == 1 and "BAD INDEX:" in res.output and "DAMAGED" not in res.output
    with open(tmp_path / "s-00002.rec", "ab") as f:
        f.write(b"\0\0\0\0")
    res = run("verify", tmp_path / "s.manifest.json")
    assert res.exit_code == 1 and "DAMAGED:" in res.output


@pytest.mark.parametrize("missing", [1, 2, 3])
def test_a_rec_cut_inside_its_last_records_padding_is_truncated_and_repaired_whole(
        tmp_path, missing):
    """A file 1-3 bytes short, inside its last record's padding: every recio reader reads
    the records whole, but MXNet's reader reads each part with its padding and stops there, so
    verify says TRUNCATED (not OK) and repair writes the whole file back, byte for byte."""
    whole = tmp_path / "whole.rec"
    with recio.IndexedRecordWriter(whole, tmp_path / "whole.idx") as w:
        for i in range(5):
            w.write(i, recio.pack(recio.IRHeader(0, float(i), i, 0), b"y" * (9 + 4 * i)))
    data = whole.read_bytes()
    last = recio.IndexedRecordReader(whole)[4]
    assert (-len(last)) & 3 == 3  # the last record has 3 bytes of padding to cut into
    (tmp_path / "short.rec").write_bytes(data[:-missing])
    shutil.copy(tmp_path / "whole.idx", tmp_path / "short.idx")
    assert list(recio.RecordReader(tmp_path / "short.rec")) == list(recio.RecordReader(whole))
    report = verify_file(tmp_path / "short.rec")
    assert report.verdict == "TRUNCATED" and report.padding_missing == missing
    res = run("verify", tmp_path / "short.rec")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and lines[-2] == (
        f"TRUNCATED: {tmp_path / 'short.rec'}: the file ends {missing} byte(s) short of its "
        "last record's padding; all 5 records are whole, but MXNet's reader stops at the cut "
        "('Invalid RecordIO File')")
    assert lines[-1].startswith("next: rescue the intact records: `recio repair")
    res = run("repair", tmp_path / "short.rec", "-o", tmp_path / "fixed")
    assert res.exit_code == 0 and "lacked" in res.output and "dropped 0 region(s)" in res.output
    assert (tmp_path / "fixed.rec").read_bytes() == data
    assert (tmp_path / "fixed.idx").read_bytes() == (tmp_path / "whole.idx").read_bytes()
    assert (tmp_path / "short.rec").read_bytes() == data[:-missing]  # the input untouched


def test_an_extract_that_finds_no_image_writes_nothing_and_leaves_the_retry_free(tmp_path):
    """A .rec with no image record (the wrong file): exit 1, nothing written, so the same
    folder takes the right .rec at once."""
    plain = tmp_path / "plain.rec"
    with recio.IndexedRecordWriter(plain, tmp_path / "plain.idx") as w:
        w.write(0, b"no image header here")
    out = tmp_path / "out"
    res = run("extract", plain, out)
    assert res.exit_code == 1 and res.output.strip() == (
        f"Error: {plain}: holds no image record: nothing to extract (nothing was written)")
    assert not out.exists()
    images = tmp_path / "images.rec"
    with recio.IndexedRecordWriter(images, tmp_path / "images.idx") as w:
        w.write(0, recio.pack(recio.IRHeader(0, 1.0, 0, 0), jpeg(0)))
    res = run("extract", images, out)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["0.jpg", "images.lst"]
