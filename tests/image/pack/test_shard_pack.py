"""Shard sets packed by list range (recio.image.packing.shards) on the local engine, and the .idx
byte ranges parallel readers take (read_index_range). Ray's engine: tests/with_ray/test_ray.py."""
import json
import os
import re
import zlib

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from recio.cli.im2rec import im2rec_cmd
from recio.errors import InterruptedPackError, OutputExistsError
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import NothingFoundError, pack_list
from recio.image.packing.pipeline import PackResult
from recio.image.packing.parts import Fault, PartFailedError
from recio.image.packing.shards import ShardPackReport, pack_shards, part_size, split_list
from recio.image.pixels.transform import ImageOptions
from recio.records.index import open_index, read_index_range
from recio.records.index_format import write_index
from recio.records.reader import RecordReader
from recio.records.manifest import load_manifest, record_checksums
from recio.records.shards.verify import verify_manifest
from support import assert_same_files, make_corpus, records_of


def test_shards_are_list_ranges_with_the_records_of_an_unsharded_pack(tmp_path):
    lst = make_corpus(tmp_path)
    whole = tmp_path / "whole.lst"
    whole.write_bytes(lst.read_bytes())
    options = ImageOptions(resize=16)
    expected = pack_list(whole, tmp_path / "img", PackSettings(options, pack_label=True))
    with RecordReader(expected.rec_path) as reader:
        index = open_index(expected.idx_path, rec_size=os.path.getsize(expected.rec_path))
        want = [(k, reader.read_at(o)) for k, o in
                zip(index.key_array().tolist(), index.offsets.tolist())]
    report = ShardPackReport("local")
    result = pack_shards(lst, tmp_path / "img",
                         PackSettings(options, num_shards=4, pack_label=True,
                                      checksums=True), report=report)
    manifest = tmp_path / "job.manifest.json"
    assert result.rec_path == str(manifest) and result.packed == len(want) == 29
    assert result.skips == {"missing": 1, "malformed_line": 1}
    assert records_of(manifest) == want  # the same records, keys and order
    # 31 items (29 images, 1 missing, 1 malformed) in parts of ceil(31 / 4) = 8 list items
    shards = load_manifest(manifest).shards
    assert [s.records for s in shards] == [7, 7, 8, 7]
    assert [p["items"] for p in report.timings()] == [8, 8, 8, 7]
    # the errors report keeps the list's own line numbers, in list order
    errors = (tmp_path / "job.errors.tsv").read_text().splitlines()
    assert errors[0] == "line\tindex\tpath\treason"
    assert [row.split("\t")[:3] for row in errors[1:]] == [["6", "4", "4.jpg"],
                                                           ["15", "-", "-"]]
    assert errors == (tmp_path / "whole.errors.tsv").read_text().splitlines()
    # checksums and the combined index
    assert verify_manifest(manifest, deep=True).clean
    for shard in shards:
        with RecordReader(shard.rec) as reader:
            assert record_checksums(shard).tolist() == [zlib.crc32(r) for r in reader]
    combined = open_index(tmp_path / "job.combined.idx")
    sizes = np.cumsum([0] + [s.rec_bytes for s in shards])
    assert combined.key_array().tolist() == [k for k, _ in want]
    assert combined.offsets.tolist() == [
        int(o + sizes[i]) for i, s in enumerate(shards)
        for o in open_index(s.idx).offsets.tolist()]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".recio-")]


def test_shards_packed_by_worker_processes_are_those_packed_by_threads(tmp_path, start_method):
    """The local engine's parts on --executor process, forked or spawned workers (each gets
    the part's job pickled): the same shard set, byte for byte, as on threads."""
    sets = {}
    for executor in ("thread", "process"):
        lst = make_corpus(tmp_path / executor, n=20)
        pack_shards(lst, tmp_path / executor / "img",
                    PackSettings(ImageOptions(resize=16), num_shards=3, pack_label=True,
                                 checksums=True, workers=2, executor=executor))
        sets[executor] = tmp_path / executor
    assert_same_files(sets["process"], sets["thread"], "job")
    assert len(load_manifest(sets["process"] / "job.manifest.json").shards) == 3


def test_a_part_whose_images_are_all_missing_gets_no_shard_and_numbers_stay_dense(tmp_path):
    lst = make_corpus(tmp_path, n=12, missing=(4, 5, 6, 7), bad_lines=(), multi=False)
    result = pack_shards(lst, tmp_path / "img",
                         PackSettings(ImageOptions(resize=12), num_shards=3))
    shards = load_manifest(result.rec_path).shards
    assert [os.path.basename(s.rec) for s in shards] == ["job-00000.rec", "job-00001.rec"]
    assert [(s.min_key, s.max_key) for s in shards] == [(0, 3), (8, 11)]
    assert result.skips == {"missing": 4}


def test_a_pack_that_finds_nothing_writes_nothing(tmp_path):
    lst = make_corpus(tmp_path, n=6, missing=(), bad_lines=())
    with pytest.raises(NothingFoundError, match="is ROOT right"):
        pack_shards(lst, tmp_path / "elsewhere", PackSettings(num_shards=2, max_missing=0.5))
    assert sorted(os.listdir(tmp_path)) == ["img", "job.lst"]


def test_existing_outputs_are_refused_and_force_replaces_the_whole_set(tmp_path):
    lst = make_corpus(tmp_path, n=10, missing=(), bad_lines=())
    pack_shards(lst, tmp_path / "img", PackSettings(num_shards=5))
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutputExistsError):
        pack_shards(lst, tmp_path / "img", PackSettings(num_shards=2))
    assert sorted(os.listdir(tmp_path)) == before
    pack_shards(lst, tmp_path / "img", PackSettings(num_shards=2, force=True))
    names = sorted(n for n in os.listdir(tmp_path) if n.startswith("job-"))
    assert names == ["job-00000.idx", "job-00000.rec", "job-00001.idx", "job-00001.rec"]
    assert load_manifest(tmp_path / "job.manifest.json").records == 10


def test_a_failed_part_names_its_shard_publishes_nothing_and_resume_finishes(tmp_path):
    lst = make_corpus(tmp_path, n=12, missing=(), bad_lines=())
    with pytest.raises(PartFailedError) as err:
        pack_shards(lst, tmp_path / "img", PackSettings(num_shards=3),
                    fault=Fault("error", 1, always=True))
    assert str(err.value).startswith(f"{lst}: shard 1 (list lines ")
    assert "no manifest" in str(err.value) and "--resume" in str(err.value)
    assert "\n" not in str(err.value)
    # nothing published; part 0 is kept (the failed part's files are gone) for a resume
    assert sorted(os.listdir(tmp_path)) == [".recio-pack-job", "img", "job.lst"]
    staged = [re.sub(r"\.h[0-9a-f]{8}-p\d+-r[0-9a-f]+\.", ".ATTEMPT.", n)
              for n in os.listdir(tmp_path / ".recio-pack-job") if ".attempt" not in n]
    assert sorted(staged) == ["job.json", "part-00000.ATTEMPT.idx", "part-00000.ATTEMPT.rec",
                              "part-00000.json"]
    with pytest.raises(InterruptedPackError, match="--resume, or start over with --force"):
        pack_shards(lst, tmp_path / "img", PackSettings(num_shards=3))
    report = ShardPackReport("local")
    result = pack_shards(lst, tmp_path / "img", PackSettings(num_shards=3, resume=True),
                         report=report)
    assert (result.parts, result.parts_kept, result.resumed) == (3, 1, 4)
    assert [t["kept"] for t in report.timings()] == [True, False, False]
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "job.lst").write_bytes(lst.read_bytes())
    pack_shards(clean / "job.lst", tmp_path / "img", PackSettings(num_shards=3))
    assert_same_files(tmp_path, clean, "job")


def test_the_cli_packs_shards_and_refuses_what_it_cannot_do(tmp_path):
    lst = make_corpus(tmp_path, n=8, missing=(), bad_lines=())
    prefix = str(tmp_path / "job")
    run = CliRunner().invoke
    ok = run(im2rec_cmd, [prefix, str(tmp_path / "img"), "--num-shards", "3", "--resize", "10",
                          "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["lists"][0]["packed"] == 8
    assert load_manifest(tmp_path / "job.manifest.json").made_by["list"] == "job.lst"
    for args, message in [
        (["--ray-address", "auto", "--num-shards", "2"], "--ray-address goes with --engine ray"),
    ]:
        refused = run(im2rec_cmd, [prefix, str(tmp_path / "img"), *args])
        assert refused.exit_code == 2 and message in refused.output, refused.output
    missing_root = run(im2rec_cmd, [prefix, str(tmp_path / "nowhere")])
    assert missing_root.exit_code == 2 and "no such folder" in missing_root.output
    assert lst.exists()


def test_fault_injection_settings_are_checked():
    assert Fault.parse("crash:1") == Fault("crash", 1)
    assert Fault.parse("error:0:always") == Fault("error", 0, True)
    assert Fault.parse("") is None
    for bad in ("boom:1", "crash", "crash:x", "error:1:sometimes"):
        with pytest.raises(ValueError, match="RECIO_FAULT_INJECTION"):
            Fault.parse(bad)


def test_split_list_cuts_in_list_order_without_holding_the_list(tmp_path):
    lst = make_corpus(tmp_path, n=10, missing=(), bad_lines=(3,))
    result = PackResult(str(lst), "", "", None)
    total, parts = split_list(str(lst), part_size(11, 4), False, result)
    parts = list(parts)
    assert total == 11 and [len(p.tasks) for p in parts] == [3, 3, 3, 2]
    assert [t[0] for p in parts for t in p.tasks] == list(range(11))
    assert result.labels_ignored == 10  # two labels a line, only the first kept
    assert parts[1].lines.startswith("list lines ")


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 10**12), max_size=40), st.data())
def test_byte_ranges_of_an_index_cover_every_line_once(tmp_path_factory, offsets, data):
    """Wherever the cuts fall, each line is in exactly one range, in file order, and each
    range knows the offset of the line after it."""
    path = tmp_path_factory.mktemp("idx") / "a.idx"
    offsets = [4 * o for o in offsets]
    keys = data.draw(st.permutations(range(len(offsets))))
    write_index(path, keys, offsets)
    size = os.path.getsize(path)
    cuts = sorted(set([0, size] + data.draw(st.lists(st.integers(0, size), max_size=8))))
    seen, nexts = [], []
    for start, end in zip(cuts, cuts[1:]):
        index, following = read_index_range(path, start, end)
        seen += zip(index.key_array().tolist(), index.offsets.tolist())
        nexts.append((len(seen), following))
    assert seen == list(zip(keys, offsets))
    for count, following in nexts:
        assert following == (offsets[count] if count < len(offsets) else None)


class _TwoParts:
    """The local engine, but cutting an unsharded pack into 3 parts (as Ray's does)."""

    name = "local"

    def parallelism(self):
        return 3

    def run(self, parts, job, progress):
        from recio.image.packing.parts import LocalEngine

        return LocalEngine().run(parts, job, progress)


def test_a_pack_without_shards_joined_from_parts_is_pack_lists_output(tmp_path):
    lst = make_corpus(tmp_path, n=25, missing=(2, 20), bad_lines=(5,))
    (tmp_path / "whole.lst").write_bytes(lst.read_bytes())
    options = ImageOptions(resize=20)
    whole = pack_list(tmp_path / "whole.lst", tmp_path / "img",
                      PackSettings(options, pack_label=True))
    joined = pack_shards(lst, tmp_path / "img", PackSettings(options, pack_label=True),
                         engine=_TwoParts())
    assert (joined.rec_path, joined.idx_path) == (str(tmp_path / "job.rec"),
                                                  str(tmp_path / "job.idx"))
    for suffix in (".rec", ".idx", ".errors.tsv"):
        assert (tmp_path / f"job{suffix}").read_bytes() == \
            (tmp_path / f"whole{suffix}").read_bytes(), suffix
    assert (joined.packed, joined.skipped, joined.bytes) == (whole.packed, whole.skipped,
                                                             whole.bytes)
    assert not [n for n in os.listdir(tmp_path) if n.startswith((".recio-", "job-", "job.man"))]
    with pytest.raises(OutputExistsError):
        pack_shards(lst, tmp_path / "img", PackSettings(options), engine=_TwoParts())


@pytest.mark.slow
def test_engine_ray_without_ray_installed_says_what_to_install(tmp_path):
    """As on a machine without Ray (the import made to fail): one line, exit 2, no output."""
    import subprocess
    import sys

    make_corpus(tmp_path, n=4, missing=(), bad_lines=())
    code = ("import sys; sys.modules['ray'] = None\n"
            "from recio.cli.im2rec import main\n"
            f"main([{str(tmp_path / 'job')!r}, {str(tmp_path / 'img')!r}, '--engine', 'ray', "
            "'--num-shards', '2'])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("Error: --engine ray: ") and "pip install 'recio[ray]'" in \
        proc.stderr and "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["img", "job.lst"]
