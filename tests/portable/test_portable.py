"""recio where Linux's facilities are missing (Windows, macOS), tested on Linux by taking them
away: the same bytes through the fallbacks, readers that let go of their files, writers that
follow Windows' file rules, and no Linux-only call outside ``recio.portable``.

The whole record, index, im2rec and reader suites also run with every facility removed
(``RECIO_TEST_REMOVE=all``, a second pass of ``make test``; see tests/simulate/sitecustomize.py).
"""
import ast
import ctypes
import errno
import importlib.util
import json
import mmap
import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import recio
from recio import portable
from recio.cli.main import recio as recio_command
from recio.errors import FileInUseError
from recio.image.tools.repair import repair
from recio.records.atomic import AtomicFile, OutputSet

from conftest import GOLDEN, SIMULATE

ROOT = pathlib.Path(recio.__file__).parent
#: the simulation of a platform without Linux's facilities sees open files and maps in /proc
SEES_OPEN_FILES = pytest.mark.linux_only("finds open descriptors and maps in /proc/self")
IMAGES = GOLDEN / "im2rec" / "images"
WORKLOAD = pathlib.Path(__file__).parent / "portable_workload.py"

_spec = importlib.util.spec_from_file_location("recio_simulate_rules",
                                               SIMULATE / "sitecustomize.py")
simulate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(simulate)


def run_workload(tmp_path: pathlib.Path, removed: str) -> dict:
    env = dict(os.environ, RECIO_TEST_REMOVE=removed,
               PYTHONPATH=os.pathsep.join([str(SIMULATE)] + [
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                   if p and p != str(SIMULATE)]))
    if not removed:
        env.pop("RECIO_TEST_REMOVE")
    work = tmp_path / (removed or "linux")
    work.mkdir()
    done = subprocess.run([sys.executable, str(WORKLOAD), str(work), str(IMAGES)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def linux_digests(tmp_path_factory) -> dict:
    """The workload's digests with every facility this machine has (none removed)."""
    found = run_workload(tmp_path_factory.mktemp("reference"), "")
    assert found.pop("removed") == []
    return found


@pytest.mark.slow
@SEES_OPEN_FILES
@pytest.mark.needs_facility()  # its reference run needs every one (it removes them itself)
@pytest.mark.parametrize("removed", simulate.ITEMS + ("all",))
def test_same_bytes_without_each_linux_facility(removed, tmp_path, linux_digests):
    """Records written and read every way, InputSplit parts, a repair and im2rec's list and
    packs (thread and process workers) give the same bytes with each facility taken away as
    with all of them: the fallbacks change how, never what."""
    found = run_workload(tmp_path, removed)
    expected = sorted(simulate.ITEMS) if removed == "all" else [removed]
    assert found.pop("removed") == expected  # the mode really reached the process
    assert found == linux_digests


@pytest.mark.slow
def test_the_issue_snippet_reads_without_pread(tmp_path):
    """``del os.pread; import recio`` then reading every record: once an AttributeError."""
    rec = GOLDEN / "records" / "tricky.rec"
    code = ("import os, sys; os.__dict__.pop('pread', None); import recio; "
            "print(sum(1 for _ in recio.RecordReader(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", code, str(rec)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with recio.RecordReader(rec) as reader:
        assert int(done.stdout) == sum(1 for _ in reader) > 0


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=0, max_size=3 * mmap.ALLOCATIONGRANULARITY),
       offset=st.integers(0, 4 * mmap.ALLOCATIONGRANULARITY),
       size=st.integers(0, 2 * mmap.ALLOCATIONGRANULARITY))
def test_read_at_without_pread_is_pread(tmp_path_factory, data, offset, size):
    """The fallback (a map of just the window) returns what ``pread`` returns, at any offset
    (not a multiple of the allocation granularity too), past the end included, and leaves the
    file position where it was."""
    path = tmp_path_factory.mktemp("read_at") / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    real = os.__dict__.pop("pread", None)
    try:
        os.lseek(fd, 3, os.SEEK_SET)
        assert portable.read_at(fd, size, offset) == data[offset:offset + size]
        assert os.lseek(fd, 0, os.SEEK_CUR) == 3
    finally:
        os.close(fd)
        if real is not None:
            os.pread = real


def test_write_at_without_pwrite(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    monkeypatch.delattr(os, "pwrite", raising=False)
    fd = os.open(path, os.O_RDWR)
    try:
        assert portable.write_at(fd, b"ab", 4) == 2
    finally:
        os.close(fd)
    assert path.read_bytes() == b"0123ab6789"


def test_open_fd_asks_for_binary_mode(tmp_path, monkeypatch):
    """On Windows a descriptor opened without ``O_BINARY`` turns ``\\r\\n`` into ``\\n`` when
    read (an image or a record would change): every recio ``os.open`` goes through
    ``open_fd``, which adds the flag where the OS has it."""
    seen = []
    real_open = os.open
    monkeypatch.setattr(os, "O_BINARY", 0x8000, raising=False)
    monkeypatch.setattr(os, "open", lambda path, flags, mode=0o777: seen.append(flags) or
                        real_open(path, flags & ~0x8000, mode))
    os.close(portable.open_fd(tmp_path / "f", os.O_WRONLY | os.O_CREAT))
    assert seen and seen[0] & 0x8000


def test_advice_is_skipped_where_the_os_has_none(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 4096)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert portable.advise(mapped, "SEQUENTIAL") is hasattr(mmap, "MADV_SEQUENTIAL")
        for name in [n for n in dir(mmap) if n.startswith("MADV_")]:
            monkeypatch.delattr(mmap, name)
        assert portable.advise(mapped, "SEQUENTIAL") is False
        assert portable.advise(mapped, "WILLNEED", 0, 4096) is False


def test_process_alive_never_signals_on_windows(monkeypatch):
    """On Windows ``os.kill(pid, 0)`` terminates the process: there the exit code is read
    through the Win32 API instead (its calls are stood in for here; the rule under test is
    which answer each outcome gives, and that no signal is ever sent)."""
    class Kernel32:
        def __init__(self, alive: dict):
            self.alive = alive

        def OpenProcess(self, access, inherit, pid):
            return pid if pid in self.alive else 0

        def GetExitCodeProcess(self, handle, code):
            code._obj.value = 259 if self.alive[handle] else 0
            return 1

        def CloseHandle(self, handle):
            return 1

    def no_signal(*args):
        raise AssertionError("os.kill called on Windows")

    monkeypatch.setattr(os, "kill", no_signal)
    monkeypatch.setattr(ctypes, "windll", type("W", (), {"kernel32": Kernel32(
        {101: True, 102: False})})(), raising=False)
    monkeypatch.setattr(ctypes, "GetLastError", lambda: 87, raising=False)
    with monkeypatch.context() as m:
        m.setattr(os, "name", "nt")
        answers = [portable.process_alive(pid) for pid in (101, 102, 103, 0, "x")]
    assert answers == [True, False, False, False, False]


@pytest.mark.slow
def test_no_linux_only_call_outside_portable():
    """Every use of a facility that some OS lacks goes through ``recio.portable``, where each
    has its fallback: no ``os.open`` (binary mode), ``os.pread``/``os.pwrite``, ``madvise``,
    ``os.kill`` (terminates on Windows), ``sys.platform``, ``fcntl``, ``pthread_sigmask`` or
    ``/proc`` anywhere else."""
    banned = {("os", "open"), ("os", "pread"), ("os", "pwrite"), ("os", "kill"),
              ("sys", "platform"), ("signal", "pthread_sigmask")}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "portable.py" and path.parent == ROOT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute):
                if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in banned:
                    found.append(f"{where} {node.value.id}.{node.attr}")
                elif node.attr == "madvise":
                    found.append(f"{where} .madvise")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.startswith("/proc/"):
                found.append(f"{where} {node.value!r}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and "fcntl" in (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]):
                found.append(f"{where} import fcntl")
    assert found == []


# -- readers let go of their files -------------------------------------------------------------

def held(*paths: pathlib.Path) -> list:
    """Which of ``paths`` this process still has open or memory-mapped."""
    now = simulate.held_paths()
    return [str(p) for p in paths if os.path.realpath(p) in now]


@pytest.fixture
def indexed(tmp_path):
    rec, idx = tmp_path / "d.rec", tmp_path / "d.idx"
    with recio.IndexedRecordWriter(rec, idx) as writer:
        for key in range(20):
            writer.write(key, bytes([key]) * (10 + key * 5000))
    return rec, idx


def _read_some(reader):
    next(iter(reader))


CLOSERS = {
    "RecordReader": lambda rec, idx: recio.RecordReader(rec),
    "IndexedRecordReader": lambda rec, idx: recio.IndexedRecordReader(rec, idx),
    "InputSplit": lambda rec, idx: recio.InputSplit(str(rec), part_index=1, num_parts=2),
    "mx.MXRecordIO": lambda rec, idx: recio.mx.recordio.MXRecordIO(str(rec), "r"),
    "mx.MXIndexedRecordIO": lambda rec, idx: recio.mx.recordio.MXIndexedRecordIO(
        str(idx), str(rec), "r"),
}


@SEES_OPEN_FILES
@pytest.mark.parametrize("name", sorted(CLOSERS))
def test_closed_readers_hold_no_descriptor_or_map(name, indexed):
    """A reader that read (and one left mid-file) holds its ``.rec`` and ``.idx`` open or
    mapped until ``close()``, then nothing: on Windows a file still held cannot be replaced or
    deleted, by recio's writers or by anyone."""
    rec, idx = indexed
    reader = CLOSERS[name](rec, idx)
    if hasattr(reader, "read"):
        assert reader.read()
    else:
        _read_some(reader)
    reader.close()
    assert held(rec, idx) == []
    if hasattr(reader, "__enter__"):  # and through `with` (MXNet's classes have none)
        with CLOSERS[name](rec, idx) as again:
            _read_some(again) if not hasattr(again, "read") else again.read()
        assert held(rec, idx) == []


@SEES_OPEN_FILES
def test_a_closed_reader_lets_go_of_the_index_cache(tmp_path):
    """A large ``.idx`` is served from its sidecar cache, memory-mapped: ``close()`` unmaps it
    too, even while the reader object lives on."""
    from recio.records.index_cache import CACHE_MIN_BYTES, index_cache_path

    rec, idx = tmp_path / "big.rec", tmp_path / "big.idx"
    with recio.IndexedRecordWriter(rec, idx) as writer:
        for key in range(200_000):
            writer.write(key, b"x")
    assert idx.stat().st_size >= CACHE_MIN_BYTES
    for _ in range(2):  # the first open writes the cache, the second maps it
        reader = recio.IndexedRecordReader(rec, idx)
        assert reader[123_456] == b"x"
        cache = pathlib.Path(index_cache_path(idx))
        assert cache.exists() and held(rec)
        reader.close()
        assert held(rec, idx, cache) == []


@SEES_OPEN_FILES
def test_other_readers_hold_nothing_after_close(tmp_path):
    """ImageBatchIter, ShardReader, MinibatchSource and CBFReader let go of their files on
    ``close()`` (mid-epoch, after reading some)."""
    import numpy as np

    from recio.sequence import SequenceWriter

    rec, idx = GOLDEN / "im2rec" / "all.rec", GOLDEN / "im2rec" / "all.idx"
    it = recio.ImageBatchIter(path_imgrec=str(rec), path_imgidx=str(idx), data_shape=(3, 24, 24),
                               batch_size=2, resize=32)
    next(iter(it))
    it.close()
    assert held(rec, idx) == []

    with recio.ShardWriter(tmp_path / "s", max_records=3) as writer:
        for i in range(7):
            writer.write(i, bytes([i]) * 100)
    shards = sorted(tmp_path.glob("s*"))
    reader = recio.ShardReader(str(tmp_path / "s.manifest.json"))
    next(iter(reader))
    reader.close()
    assert held(*shards) == []

    corpus = tmp_path / "seq.rec"
    with SequenceWriter(corpus) as writer:
        for n in range(1, 30):
            writer.write({"x": np.full((n, 3), n, dtype=np.float32)})
    source = recio.MinibatchSource(str(corpus), randomization_window=50, seed=1)
    assert source.next_minibatch(20) is not None
    source.close()
    assert held(corpus) == []

    cbf = GOLDEN / "cbf" / "float.cbf"
    with recio.sequence.CBFReader(str(cbf)) as reader:
        assert reader.num_chunks
    assert held(cbf) == []


@SEES_OPEN_FILES
def test_writers_and_tools_hold_nothing_after_they_return(indexed, tmp_path):
    """Indexing, verifying, repairing and reading records through the index cache leave no
    descriptor or map of their inputs or outputs behind."""
    rec, idx = indexed
    recio.build_index(rec, tmp_path / "built.idx")
    repair(str(rec), str(tmp_path / "fixed"))
    from recio.image.tools.verify import verify_file

    verify_file(rec, images=True, idx_path=idx)
    with recio.IndexedRecordReader(rec, idx) as reader:
        reader[3]
    assert held(rec, idx, tmp_path / "built.idx", tmp_path / "fixed.rec",
                tmp_path / "fixed.idx") == []
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# -- Windows' file rules -----------------------------------------------------------------------

@pytest.fixture
def windows_rules(monkeypatch):
    """Windows' file rules in this process (see tests/simulate/sitecustomize.py)."""
    monkeypatch.setattr(os, "replace", simulate._checked(simulate._real_replace, 2))
    monkeypatch.setattr(os, "rename", simulate._checked(simulate._real_rename, 2))
    monkeypatch.setattr(os, "unlink", simulate._checked(simulate._real_unlink, 1))
    monkeypatch.setattr(os, "remove", simulate._checked(simulate._real_remove, 1))
    monkeypatch.setattr(os, "open", simulate._open)
    monkeypatch.setattr(portable, "system", lambda: "win32")


def _snapshot(folder: pathlib.Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@SEES_OPEN_FILES
def test_writers_publish_under_windows_rules(indexed, tmp_path, windows_rules):
    """With nothing holding the old files, a writer replaces them (data and index together);
    the old copies it set aside are gone afterwards."""
    rec, idx = indexed
    with recio.IndexedRecordWriter(rec, idx) as writer:
        writer.write(7, b"new")
    with recio.IndexedRecordReader(rec, idx) as reader:
        assert reader[7] == b"new" and len(reader) == 1
    assert sorted(p.name for p in rec.parent.iterdir()) == ["d.idx", "d.rec"]


@SEES_OPEN_FILES
@pytest.mark.parametrize("held_file", ["rec", "idx"])
def test_replacing_a_held_output_is_one_error_and_changes_nothing(indexed, windows_rules,
                                                                  held_file):
    """Where Windows cannot replace a file a reader holds, the writer's ``close()`` raises
    ``FileInUseError`` naming it, and the old ``.rec`` and ``.idx`` are both as they were (no
    new data beside an old index, no temporary file left)."""
    rec, idx = indexed
    before = _snapshot(rec.parent)
    target = rec if held_file == "rec" else idx
    with open(target, "rb") as holder, mmap.mmap(holder.fileno(), 0, access=mmap.ACCESS_READ):
        writer = recio.IndexedRecordWriter(rec, idx)
        writer.write(1, b"replacement")
        with pytest.raises(FileInUseError) as caught:
            writer.close()
        assert caught.value.path == str(target)
        assert "close what reads it" in str(caught.value)
    assert _snapshot(rec.parent) == before


@SEES_OPEN_FILES
def test_mxnet_in_place_writer_over_a_mapped_file(indexed, windows_rules):
    """``MXRecordIO(path, "w")`` writes in place, as MXNet does; over a file a reader has
    mapped Windows refuses the truncation: one error, and the old file keeps its bytes."""
    rec, _ = indexed
    before = rec.read_bytes()
    with recio.RecordReader(rec) as reader:
        _read_some(reader)
        with pytest.raises(FileInUseError):
            recio.mx.recordio.MXRecordIO(str(rec), "w")
    assert rec.read_bytes() == before
    writer = recio.mx.recordio.MXRecordIO(str(rec), "w")  # released: it works
    writer.write(b"x")
    writer.close()
    with recio.RecordReader(rec) as reader:
        assert list(reader) == [b"x"]


@SEES_OPEN_FILES
def test_command_replacing_a_held_output_says_what_to_close(indexed, tmp_path, windows_rules):
    """``recio repair --force`` over an output a reader holds: exit status 2, one line naming
    the file and what to do, no traceback; the outputs are untouched."""
    from click.testing import CliRunner

    rec, _ = indexed
    out = tmp_path / "out"
    repair(str(rec), str(out))
    before = _snapshot(tmp_path)
    with recio.RecordReader(tmp_path / "out.rec") as reader:
        _read_some(reader)
        result = CliRunner().invoke(recio_command, ["repair", str(rec), "-o", str(out), "--force"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "out.rec" in lines[0] and "close what reads it" in lines[0]
    assert "Traceback" not in result.output
    assert _snapshot(tmp_path) == before


@SEES_OPEN_FILES
def test_atomic_file_set_aside_is_put_back_when_a_later_file_is_held(tmp_path, windows_rules):
    """All or nothing across a set: the data file's old copy is set aside first; when the
    index's rename then fails, the data file is put back."""
    data, index = tmp_path / "a.rec", tmp_path / "a.idx"
    data.write_bytes(b"old data")
    index.write_bytes(b"old index")
    outputs = OutputSet([AtomicFile(data, "wb"), AtomicFile(index, "wb")])
    outputs.files[0].file.write(b"new data")
    outputs.files[1].file.write(b"new index")
    with open(index, "rb"):
        with pytest.raises(FileInUseError):
            outputs.commit()
    assert (data.read_bytes(), index.read_bytes()) == (b"old data", b"old index")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.idx", "a.rec"]


@SEES_OPEN_FILES
def test_simulated_rules_match_windows_errors(tmp_path, windows_rules):
    """The simulation refuses what Windows refuses, with Windows' error numbers, and allows
    the rest (the fixture other tests rely on must itself be right)."""
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    with open(path, "rb"):
        with pytest.raises(PermissionError) as caught:
            os.unlink(path)
        assert caught.value.winerror == 32 and caught.value.errno == errno.EACCES
        assert portable.in_use(caught.value)
    os.replace(path, tmp_path / "g")  # closed: allowed
    with open(tmp_path / "g", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ):
        with pytest.raises(PermissionError) as caught:
            os.open(tmp_path / "g", os.O_WRONLY | os.O_TRUNC)
        assert caught.value.winerror == 1224


def test_the_test_mode_reached_this_process():
    """Under ``RECIO_TEST_REMOVE`` the named facilities are gone from the test process (and,
    through ``PYTHONPATH``, from the commands it runs); without it they are all here."""
    removed = simulate.requested()
    assert set(getattr(os, "_recio_removed", ())) == removed
    linux = sys.platform.startswith("linux")  # where every facility is there to remove
    assert hasattr(os, "pread") is ("pread" not in removed) or not linux
    assert hasattr(mmap, "MADV_DONTNEED") is ("madvise" not in removed) or not linux
    assert portable.is_windows() is ("windows-files" in removed or sys.platform == "win32")
    code = "import os; print(hasattr(os, 'pread'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == str(hasattr(os, "pread"))


@pytest.mark.slow
def test_commands_print_names_their_output_cannot_encode(tmp_path):
    """A pipe on Windows encodes in the ANSI code page (cp1252): a file name outside it is
    printed as an escape, never a ``UnicodeEncodeError`` that fails the command."""
    folder = tmp_path / "données_日本"
    folder.mkdir()
    rec = folder / "a.rec"
    with recio.RecordWriter(rec) as writer:
        writer.write(b"x")
    env = dict(os.environ, PYTHONIOENCODING="cp1252")
    done = subprocess.run([sys.executable, "-m", "recio", "inspect", str(rec)], env=env,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "donn\xe9es_\\u65e5\\u672c".encode("cp1252") in done.stdout


def _golden_list(tmp_path: pathlib.Path) -> pathlib.Path:
    lst = tmp_path / "all.lst"
    lst.write_bytes((GOLDEN / "im2rec" / "all.lst").read_bytes())
    return lst


def _im2rec(*args: str):
    from click.testing import CliRunner

    from recio.cli.im2rec import im2rec_cmd

    return CliRunner().invoke(im2rec_cmd, [*args, "-q"])


def _one_line(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert all(word in lines[0] for word in words), lines[0]


@SEES_OPEN_FILES
def test_im2rec_force_over_a_held_rec_keeps_the_pack_for_resume(tmp_path, windows_rules):
    """``im2rec --force`` over a ``.rec`` a reader holds: one line that says to close it and
    resume; the old outputs are untouched, and ``--resume`` then finishes the pack with the
    bytes of a pack nothing interrupted (MXNet's)."""
    _golden_list(tmp_path)
    prefix, root = str(tmp_path / "all"), str(IMAGES)
    assert _im2rec(prefix, root, "--resize", "32", "--quality", "50").exit_code == 0
    old = {n: (tmp_path / n).read_bytes() for n in ("all.rec", "all.idx")}
    with recio.RecordReader(tmp_path / "all.rec") as reader:
        _read_some(reader)
        result = _im2rec(prefix, root, "--resize", "32", "--quality", "90", "--force")
        _one_line(result, "all.rec", "close what reads it", "--resume")
    assert {n: (tmp_path / n).read_bytes() for n in old} == old
    assert _im2rec(prefix, root, "--resize", "32", "--quality", "90", "--resume").exit_code == 0
    for name in ("all.rec", "all.idx"):
        assert (tmp_path / name).read_bytes() == (GOLDEN / "im2rec" / name).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.idx", "all.lst", "all.rec"]


@SEES_OPEN_FILES
@pytest.mark.parametrize("held_shard", [0, 1])
def test_a_shard_set_in_use_is_not_replaced_in_part(tmp_path, windows_rules, held_shard):
    """``im2rec --num-shards 2 --force`` over a set whose shard a reader holds: one line, and
    the old set (manifest, shards, combined index) is exactly as it was."""
    _golden_list(tmp_path)
    prefix, root = str(tmp_path / "all"), str(IMAGES)
    assert _im2rec(prefix, root, "--resize", "32", "--num-shards", "2").exit_code == 0
    before = _snapshot(tmp_path)
    assert "all.manifest.json" in before
    with recio.RecordReader(tmp_path / f"all-0000{held_shard}.rec") as reader:
        _read_some(reader)
        result = _im2rec(prefix, root, "--resize", "32", "--quality", "50", "--num-shards",
                         "2", "--force")
        _one_line(result, f"all-0000{held_shard}.rec", "close what reads it")
    assert _snapshot(tmp_path) == before


@SEES_OPEN_FILES
def test_split_write_replaces_every_part_or_none(tmp_path, windows_rules):
    """``recio split --write --force`` over parts one of which a reader holds: no part is
    replaced (a mix of old and new parts would repeat keys across them)."""
    from click.testing import CliRunner

    source = GOLDEN / "im2rec" / "all.rec"
    out = str(tmp_path / "out")
    run = ["split", str(source), "-n", "3", "--write", out]
    assert CliRunner().invoke(recio_command, run).exit_code == 0
    before = _snapshot(tmp_path)
    with recio.RecordReader(tmp_path / "out_1.rec") as reader:
        _read_some(reader)
        result = CliRunner().invoke(recio_command, run + ["--keys", "renumber", "--force"])
        _one_line(result, "out_1.rec", "close what reads it")
    assert _snapshot(tmp_path) == before


@SEES_OPEN_FILES
@pytest.mark.needs("torch")
def test_torch_record_dataset_closes(tmp_path):
    """``recio.torch.RecordDataset`` lets go of its ``.rec`` on ``close()`` and ``with``; a
    closed dataset reads no more (``ClosedError``, test_misuse.py)."""
    from recio.torch import RecordDataset

    rec = GOLDEN / "im2rec" / "all.rec"
    dataset = RecordDataset(str(rec))
    first = dataset.read_record(0)
    assert held(rec)
    dataset.close()
    assert held(rec) == []
    with RecordDataset(str(rec)) as again:
        assert again.read_record(0) == first
    assert held(rec) == []
