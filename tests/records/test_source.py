"""recio.records.source: the one resolver of sources (paths, ``;``, lists, folders, globs,
manifests; URLs in tests/storage/test_remote.py), and every reader taking a source the same way."""
import os

import numpy as np
import pytest
from conftest import need

import recio
from recio.image.tools.dataset_stats import dataset_stats
from recio.records.source import SourceFile, expand_source, resolve_source
from recio.records.split import InputSplit
from recio.sequence import SequenceWriter
from recio.sequence.corpora import open_corpus
from recio.sequence.minibatch import MinibatchSource


def _sequences(path, first, count):
    """A sequence .rec (+ .idx, .len) of ``count`` sequences whose stream x holds their number."""
    with SequenceWriter(str(path)) as w:
        for i in range(first, first + count):
            w.write({"x": np.full((1 + i % 3, 2), i, np.float32)}, key=i)
    return str(path)


@pytest.fixture
def corpus(tmp_path):
    """A folder with three sequence .rec files (and a .txt that a folder listing leaves out)."""
    folder = tmp_path / "data"
    folder.mkdir()
    paths = [_sequences(folder / f"part-{k}.rec", 10 * k, 5 + k) for k in range(3)]
    (folder / "notes.txt").write_text("not records")
    return folder, paths


def test_each_form_names_the_files_in_order(corpus):
    folder, (a, b, c) = corpus
    assert expand_source(a) == [a]
    assert expand_source(f"{c};{a}") == [c, a]
    assert expand_source([b, a]) == [b, a]
    assert expand_source(str(folder)) == [a, b, c]  # its .rec files, in name order
    assert expand_source(str(folder / "part-[02].rec")) == [a, c]
    assert expand_source([str(folder / "notes.txt")]) == [str(folder / "notes.txt")]  # named
    assert all(f == SourceFile(f.path) for f in resolve_source(str(folder)))


def test_a_manifest_gives_its_shards_with_their_index_and_size(tmp_path):
    with recio.ShardWriter(str(tmp_path / "set"), max_records=4) as w:
        for i in range(10):
            w.write(i, bytes(i))
    manifest = recio.load_manifest(str(tmp_path / "set.manifest.json"))
    files = resolve_source(str(tmp_path / "set.manifest.json"))
    assert [(f.path, f.idx_path, f.size, f.manifest) for f in files] == [
        (s.rec, s.idx, s.rec_bytes, manifest.path) for s in manifest.shards]
    assert [f.size for f in files] == [os.path.getsize(f.path) for f in files]
    os.remove(manifest.shards[1].rec)
    with pytest.raises(FileNotFoundError, match="a shard of") as info:
        resolve_source(manifest.path)
    assert info.value.filename == manifest.shards[1].rec


def test_a_resolved_file_is_taken_as_it_is():
    """What an entry point resolved once is not looked up again (the path need not exist)."""
    given = [SourceFile("/nowhere/a.rec", "/nowhere/a.idx", 12), SourceFile("/nowhere/b.rec")]
    assert resolve_source(given) == given
    assert resolve_source(given[0]) == given[:1]


@pytest.mark.parametrize("name, words", [
    ("missing.rec", "No such file"),
    ("missing-*.rec", "no file matches the pattern"),
    ("empty", "no .rec files found"),
])
def test_nothing_there_is_file_not_found_naming_it(tmp_path, name, words):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=words) as info:
        resolve_source(str(tmp_path / name))
    assert info.value.filename == str(tmp_path / name)


def test_every_reader_takes_a_source_the_same_way(corpus):
    """A folder, a ';' string and a glob name the same files for InputSplit, dataset_stats,
    MinibatchSource's corpus and the PyTorch dataset."""
    folder, paths = corpus
    total = sum(5 + k for k in range(3))
    for source in (str(folder), ";".join(paths), str(folder / "part-*.rec")):
        assert expand_source(source) == paths
        assert InputSplit(source).layout.paths == paths
        assert [st.path for st in dataset_stats(source).files] == paths
        corpus_ = open_corpus(source)
        assert [c.rec_path for c in corpus_.corpora] == paths
        src = MinibatchSource(source, randomize=False)
        ids = [i for mb in iter(lambda: src.next_minibatch(4), None) for i in mb.ids.tolist()]
        assert ids == list(range(total))
    need("torch")
    from recio.torch import RecordDataset

    assert RecordDataset(str(folder), decode="raw")._files == paths
