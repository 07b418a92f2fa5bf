"""One ``PackSettings`` and one ``PackPaths`` for every pack.

``PackSettings`` refuses every bad combination once, when it is made, in the library (a
``PackSettingsError``, a ``ValueError``), and im2rec prints the same lines it always printed;
the one value reaches every engine whole (this process, a pack in parts, Ray) and they write
the same bytes. ``PackPaths`` names every file a pack of a list touches from the list's path
alone, and those are the files a real pack writes, interrupted or not, sharded or not.
"""
import dataclasses
import os
import pickle

import pytest
from click.testing import CliRunner

from recio.cli.im2rec import im2rec_cmd
from recio.errors import PackSettingsError
from recio.image.packing import parts as pack_parts, pipeline as packing
from recio.image.packing.parts import Fault, LocalEngine, PartFailedError
from recio.image.packing.paths import PackPaths
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import pack_list
from recio.image.packing.shards import pack_shards
from recio.image.packing.dispatch import pack_prefix_to
from recio.image.pixels.transform import ImageOptions
from support import make_corpus

#: (keyword arguments, what the library says, what im2rec prints, im2rec's options)
BAD = [
    (dict(workers=0), "workers must be at least 1, got 0", None, None),
    (dict(executor="fibers"), "executor must be one of", None, None),
    (dict(max_missing=1.5), "max_missing must be between 0 and 1, got 1.5", None, None),
    (dict(batch_size=-1), "batch_size and window must be 0", None, None),
    (dict(window=-2), "batch_size and window must be 0", None, None),
    (dict(num_shards=0), "num_shards must be at least 1, got 0", None, None),
    (dict(shard_size=0), "shard_size must be at least 1 byte, got 0", None, None),
    (dict(num_shards=2, shard_size=1 << 20), "give num_shards or shard_size, not both",
     "Error: give --num-shards or --shard-size, not both",
     ["--num-shards", "2", "--shard-size", "1MB"]),
    (dict(checksums=True),
     "checksums goes with num_shards or shard_size (a shard set's sidecars)",
     "Error: --checksums goes with --num-shards or --shard-size (a shard set's sidecars)",
     ["--checksums"]),
]


@pytest.mark.parametrize("keywords,library,_command,_options", BAD)
def test_every_bad_combination_is_refused_when_the_settings_are_made(keywords, library,
                                                                     _command, _options):
    with pytest.raises(PackSettingsError) as info:
        PackSettings(**keywords)
    assert library in str(info.value)
    assert isinstance(info.value, ValueError)  # what a caller of the library catches
    restored = pickle.loads(pickle.dumps(info.value))  # crosses processes (Ray) intact
    assert (str(restored), restored.for_command()) == (str(info.value),
                                                       info.value.for_command())


@pytest.mark.parametrize("keywords,_library,command,options",
                         [case for case in BAD if case[2] is not None])
def test_im2rec_prints_the_same_line_for_a_refused_combination(tmp_path, keywords, _library,
                                                                command, options):
    lst = make_corpus(tmp_path, n=4, missing=(), bad_lines=())
    before = sorted(os.listdir(tmp_path))
    result = CliRunner().invoke(im2rec_cmd, [str(tmp_path / "job"), str(tmp_path / "img"),
                                             *options])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == command
    assert sorted(os.listdir(tmp_path)) == before and lst.exists()  # nothing written


def test_the_settings_are_checked_once_per_command(tmp_path, monkeypatch):
    """im2rec makes one PackSettings and no layer below checks or copies it again (a copy
    through ``dataclasses.replace`` would run the check again)."""
    made = []
    original = PackSettings.__post_init__

    def counted(self):
        made.append(self)
        original(self)
    monkeypatch.setattr(PackSettings, "__post_init__", counted)
    make_corpus(tmp_path / "plain", n=6, missing=(), bad_lines=())
    make_corpus(tmp_path / "sharded", n=6, missing=(), bad_lines=())
    for folder, extra in (("plain", []), ("sharded", ["--num-shards", "2", "--checksums"])):
        made.clear()
        result = CliRunner().invoke(im2rec_cmd, [str(tmp_path / folder / "job"),
                                                 str(tmp_path / folder / "img"), "--resize",
                                                 "12", "-q", *extra])
        assert result.exit_code == 0, result.output
        assert len(made) == 1, folder


def test_settings_are_a_frozen_value():
    settings = PackSettings(ImageOptions(resize=8), num_shards=3, checksums=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.workers = 4  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(settings)) == settings  # travels to workers and Ray
    assert (settings.sharded, settings.layout) == (True, "shards")
    assert PackSettings(shard_size=10).layout == "sized"
    assert (PackSettings().sharded, PackSettings().layout) == (False, "joined")
    assert PackSettings(executor="auto").executor_kind == "thread"


class _Recording:
    """The local engine cutting a pack into 3 parts, keeping the settings each part got."""

    name = "local"

    def __init__(self):
        self.seen = []

    def parallelism(self):
        return 3

    def run(self, parts, job, progress):
        for part in LocalEngine().run(parts, job, progress):
            self.seen.append(job.settings)
            yield part


def test_every_engine_gets_the_one_settings_value_and_writes_the_same_bytes(tmp_path,
                                                                             monkeypatch):
    lst = make_corpus(tmp_path, n=14, missing=(3,), bad_lines=(6,))
    for name in ("whole", "parts", "shards"):
        (tmp_path / f"{name}.lst").write_bytes(lst.read_bytes())
    settings = PackSettings(ImageOptions(resize=14), pack_label=True, workers=2)
    jobs = []
    original = packing.make_job

    def recording(root, got, storage_options=None):
        jobs.append(got)
        return original(root, got, storage_options)
    monkeypatch.setattr(packing, "make_job", recording)
    monkeypatch.setattr(pack_parts, "make_job", recording)
    whole = pack_list(tmp_path / "whole.lst", tmp_path / "img", settings)
    engine = _Recording()
    parts = pack_shards(tmp_path / "parts.lst", tmp_path / "img", settings, engine=engine)
    assert len(engine.seen) == parts.parts == 3
    assert all(seen is settings for seen in engine.seen + jobs)  # the same object, whole
    assert len(jobs) == 4  # the plain pack's worker job, then one per part
    for suffix in (".rec", ".idx", ".errors.tsv"):
        assert (tmp_path / f"parts{suffix}").read_bytes() == \
            (tmp_path / f"whole{suffix}").read_bytes(), suffix
    sharded = dataclasses.replace(settings, num_shards=2)
    result = pack_shards(tmp_path / "shards.lst", tmp_path / "img", sharded)
    assert jobs[-1] is sharded and result.packed == whole.packed == 13
    records = b"".join((tmp_path / f"shards-0000{i}.rec").read_bytes() for i in range(2))
    assert records == (tmp_path / "whole.rec").read_bytes()  # shards: the same records


def test_pack_paths_name_every_file_of_a_plain_pack(tmp_path):
    paths = PackPaths.of(tmp_path / "data" / "train.lst")
    stem = str(tmp_path / "data" / "train")
    folder = str(tmp_path / "data")
    assert dataclasses.asdict(paths) == {
        "lst": stem + ".lst", "stem": stem, "rec": stem + ".rec", "idx": stem + ".idx",
        "errors": stem + ".errors.tsv", "rec_partial": stem + ".rec.partial",
        "journal": stem + ".pack.journal", "lock": stem + ".pack.lock",
        "staging": os.path.join(folder, ".recio-pack-train"),
        "manifest": stem + ".manifest.json"}
    assert paths.partial == (paths.rec_partial, paths.journal)
    relative = os.path.relpath(tmp_path / "data" / "train.lst")
    assert PackPaths.of(relative) == paths  # worked out from the absolute path
    url = PackPaths.of("s3://bucket/sets/train.lst")
    assert (url.rec, url.idx, url.errors, url.staging, url.manifest, url.lock) == (
        "s3://bucket/sets/train.rec", "s3://bucket/sets/train.idx",
        "s3://bucket/sets/train.errors.tsv", "s3://bucket/sets/.recio-pack-train",
        "s3://bucket/sets/train.manifest.json", "s3://bucket/sets/train.pack.lock")


def test_a_plain_pack_writes_exactly_its_pack_paths(tmp_path):
    lst = make_corpus(tmp_path, n=20, missing=(2,), bad_lines=(9,))
    paths = PackPaths.of(lst)
    seen = []

    def stop(done, total):
        seen.append(sorted(os.listdir(tmp_path)))
        if done >= 8:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        pack_list(lst, tmp_path / "img", PackSettings(batch_size=4), progress=stop)
    name = os.path.basename
    assert name(paths.lock) in seen[-1]  # held while it runs
    assert sorted(os.listdir(tmp_path)) == sorted(["img", name(paths.lst),
                                                   name(paths.rec_partial),
                                                   name(paths.journal)])
    assert paths.has_partial()
    result = pack_list(lst, tmp_path / "img", PackSettings(resume=True))
    assert (result.rec_path, result.idx_path, result.errors_path) == (paths.rec, paths.idx,
                                                                      paths.errors)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["img", name(paths.lst), name(paths.rec), name(paths.idx), name(paths.errors)])
    assert not paths.has_partial()


def test_a_sharded_pack_writes_its_staging_folder_then_its_manifest(tmp_path):
    lst = make_corpus(tmp_path, n=12, missing=(), bad_lines=())
    paths = PackPaths.of(lst)
    settings = PackSettings(ImageOptions(resize=10), num_shards=3)
    with pytest.raises(PartFailedError):
        pack_shards(lst, tmp_path / "img", settings, fault=Fault("error", 2, always=True))
    assert os.path.isdir(paths.staging)  # the finished parts, kept for a resume
    assert not os.path.exists(paths.manifest) and not os.path.exists(paths.lock)
    result = pack_prefix_to(tmp_path / "job", tmp_path / "img",
                            dataclasses.replace(settings, resume=True))
    (done,) = list(result)
    assert done.rec_path == paths.manifest and done.parts_kept == 2
    assert not os.path.exists(paths.staging)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("job")) == [
        "job-00000.idx", "job-00000.rec", "job-00001.idx", "job-00001.rec", "job-00002.idx",
        "job-00002.rec", "job.combined.idx", "job.lst", "job.manifest.json"]
