"""FIFOs, sockets, character and block devices and directories where a file is expected.

Every command and every Python reader or writer refuses them in one line, naming the path and
what it is, without blocking (opening a FIFO waits for a writer; ``/dev/zero`` reads forever)
and without writing anything beside them (no ``/dev/zero.idx``) or in their place. Every
command form runs through click's CliRunner under ``hang_guard`` (whose alarm interrupts a
blocked ``open``), and the cases that hung, and the devices themselves, as real processes with
a timeout, so a hang fails the test; the Python API runs under ``hang_guard`` too.
"""
import os
import shutil
import socket
import stat
import subprocess
import sys
import time

import pytest

import recio
from recio.errors import NotRegularFileError
from conftest import need
from support import hang_guard, make_corpus

pytestmark = pytest.mark.posix_only("makes FIFOs and sockets and opens /dev devices")

#: what each kind of special file is called in the messages
KINDS = {"fifo": "a FIFO", "socket": "a socket", "zero": "a character device",
         "null": "a character device", "block": "a block device", "directory": "a directory"}
#: a command that blocks is a failure, not a slow pass
TIMEOUT = 60


def _block_device():
    """A block device of this machine (a loop device, else any in /sys/block), or None."""
    names = sorted(n for n in os.listdir("/dev") if n.startswith("loop") and n[4:].isdigit())
    if os.path.isdir("/sys/block"):
        names += sorted(os.listdir("/sys/block"))
    for name in names:
        path = os.path.join("/dev", name)
        try:
            if stat.S_ISBLK(os.stat(path).st_mode):
                return path
        except OSError:
            continue
    return None


BLOCK = _block_device()


def make_special(kind, name, keep):
    """A special file of ``kind`` at the relative path ``name`` (the cwd is the test's folder):
    made there (FIFO, socket, directory) or a symlink to the device. ``keep`` holds what must
    stay open (a socket's listener). A regular file there is replaced."""
    if os.path.isfile(name) and not os.path.islink(name):
        os.unlink(name)
    if kind == "fifo":
        os.mkfifo(name)
    elif kind == "socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(name)  # a relative name: the 108-byte limit does not bite
        keep.append(listener)
    elif kind == "directory":
        os.mkdir(name)
    else:
        device = {"zero": "/dev/zero", "null": "/dev/null", "block": BLOCK}[kind]
        if device is None:
            pytest.skip("no block device on this machine (no /dev/loop*, nothing in "
                        "/sys/block): the block-device case cannot run here")
        os.symlink(device, name)
    return name


def device_path(kind):
    return {"zero": "/dev/zero", "null": "/dev/null", "block": BLOCK}.get(kind)


@pytest.fixture
def here(tmp_path, monkeypatch, golden):
    """The test's folder as the cwd, holding an image ``img.rec``/``img.idx``/``img.lst``,
    their images under ``imgs/`` and a list ``job.lst`` of them."""
    monkeypatch.chdir(tmp_path)
    for ext in (".rec", ".idx"):
        shutil.copy(golden / "im2rec" / ("all" + ext), tmp_path / ("img" + ext))
    make_corpus(tmp_path, n=6, missing=(), bad_lines=())
    os.rename(tmp_path / "img", tmp_path / "imgs")
    keep = []
    yield tmp_path, keep
    for listener in keep:
        listener.close()


def snapshot(folder):
    """Every name under ``folder`` with its kind of file and size (what a command wrote)."""
    out = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            out[os.path.relpath(path, folder)] = (stat.S_IFMT(st.st_mode),
                                                 st.st_size if stat.S_ISREG(st.st_mode) else 0)
    return out


def dev_names(kind):
    """The names in /dev that mention the device (nothing may appear beside it)."""
    device = device_path(kind)
    if device is None:
        return set()
    base = os.path.basename(device)
    return {n for n in os.listdir("/dev") if base in n}


def run(argv, cwd):
    """``recio ARGV`` as a user runs it; a command still running after TIMEOUT fails."""
    try:
        proc = subprocess.run([sys.executable, "-m", "recio", *argv], cwd=cwd,
                              capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"recio {' '.join(argv)} hung (still running after {TIMEOUT} s)")
    return proc


def run_in_process(argv):
    """``recio ARGV`` through click's CliRunner in this process, under ``hang_guard`` (for the
    outputs, refused before anything is opened: a subprocess each would cost seconds)."""
    from click.testing import CliRunner

    from recio.cli.main import recio as recio_group

    started = time.monotonic()
    with hang_guard(TIMEOUT):
        result = CliRunner().invoke(recio_group, argv)
    if time.monotonic() - started >= TIMEOUT:  # the alarm's TimeoutError may have been caught
        pytest.fail(f"recio {' '.join(argv)} hung (interrupted after {TIMEOUT} s)")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(argv, result.exit_code, result.stdout, result.stderr)


def assert_refused(proc, name, kind, argv):
    """Exit 2 and one error line naming ``name`` and saying what it is; no traceback."""
    err = proc.stderr
    assert proc.returncode == 2, (argv, proc.returncode, err)
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("Error: "), err
    assert os.path.basename(name) in last, err
    if kind == "directory":  # a folder given for a file (click refuses it itself), or a
        # source (inspect, verify, split: a folder of .rec files) that holds none
        assert "directory" in last or "folder" in last or "no .rec files" in last, err
    else:
        assert f"is {KINDS[kind]}" in last, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 or "Usage:" in err, err  # one line (click's usage errors aside)


# -- every command, special file as an input ---------------------------------------------------
#: (id, argv with {S} for the special file, what the special file is called)
INPUTS = [
    ("index", ["index", "{S}"], "s.rec"),
    ("inspect", ["inspect", "{S}"], "s.rec"),
    ("verify", ["verify", "{S}"], "s.rec"),
    ("show", ["show", "{S}", "-o", "grid.png"], "s.rec"),
    ("repair", ["repair", "{S}", "-o", "fixed"], "s.rec"),
    ("repack", ["repack", "{S}", "packed", "--shuffle"], "s.rec"),
    ("extract", ["extract", "{S}", "out"], "s.rec"),
    ("split", ["split", "-n", "2", "{S}"], "s.rec"),
    ("split-write", ["split", "-n", "2", "{S}", "--write", "part"], "s.rec"),
    ("buckets", ["buckets", "{S}"], "s.rec"),
    ("convert-cbf", ["convert", "{S}", "out.rec"], "s.cbf"),
    ("convert-rec", ["convert", "{S}", "out.cbf"], "s.rec"),
    ("inspect-index", ["inspect", "img.rec", "--index", "{S}"], "s.idx"),
    ("verify-index", ["verify", "img.rec", "--index", "{S}"], "s.idx"),
    ("show-index", ["show", "img.rec", "-o", "grid.png", "--index", "{S}"], "s.idx"),
    ("repair-index", ["repair", "img.rec", "-o", "fixed", "--index", "{S}"], "s.idx"),
    ("repack-index", ["repack", "img.rec", "packed", "--shuffle", "--index", "{S}"], "s.idx"),
    ("index-combined", ["index", "--combined", "{S}", "-o", "all.idx"], "s.manifest.json"),
    ("verify-manifest", ["verify", "{S}"], "s.manifest.json"),
    ("im2rec-list", ["im2rec", "s", "imgs"], "s.lst"),
    ("im2rec-list-shards", ["im2rec", "s", "imgs", "--num-shards", "2"], "s.lst"),
    ("im2rec-list-sized", ["im2rec", "s", "imgs", "--shard-size", "1MB"], "s.lst"),
    ("im2rec-root", ["im2rec", "job", "{S}"], "root"),
    ("im2rec-list-root", ["im2rec", "new", "{S}", "--list"], "root"),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("case", INPUTS, ids=[c[0] for c in INPUTS])
def test_every_command_refuses_a_special_input(here, case, kind):
    folder, keep = here
    _, template, name = case
    special = make_special(kind, name, keep)
    before, devices = snapshot(folder), dev_names(kind)
    argv = [a.replace("{S}", special) for a in template]
    proc = run_in_process(argv)
    if case[0] in ("im2rec-root", "im2rec-list-root"):  # ROOT must be a folder
        if kind == "directory":  # an empty folder: a pack that finds nothing, a list of none
            assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, proc.stderr
        else:
            assert proc.returncode == 2 and "not a folder" in proc.stderr, proc.stderr
    else:
        assert_refused(proc, name, kind, argv)
    assert snapshot(folder) == before  # nothing written, nothing replaced or deleted
    assert dev_names(kind) == devices  # nothing beside a device (no /dev/zero.idx)


@pytest.mark.slow
@pytest.mark.parametrize("case", [("index", "fifo"), ("show", "fifo"), ("repair", "fifo"),
                                  ("inspect", "fifo"), ("verify", "fifo"), ("index", "zero"),
                                  ("inspect", "zero"), ("verify", "null"), ("split", "socket"),
                                  ("im2rec-list", "fifo")], ids="-".join)
def test_the_commands_that_hung_run_as_a_user_runs_them(here, case):
    """The cases of issue 40, each a real ``python -m recio`` process with a timeout: ``index``,
    ``show`` and ``repair`` on a FIFO blocked in ``open`` until killed, ``inspect`` and
    ``verify`` called a FIFO or a device "No such file"."""
    folder, keep = here
    command, kind = case
    template, name = next((c[1], c[2]) for c in INPUTS if c[0] == command)
    special = make_special(kind, name, keep)
    before = snapshot(folder)
    argv = [a.replace("{S}", special) for a in template]
    assert_refused(run(argv, folder), name, kind, argv)
    assert snapshot(folder) == before


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zero", "null", "block"])
@pytest.mark.parametrize("command", [["index"], ["inspect"], ["verify"], ["show", "-o", "g.png"],
                                     ["repair", "-o", "fixed"], ["extract"]])
def test_commands_on_a_device_itself(here, command, kind):
    """The device's own path (not a link to it), each a real process: ``recio index /dev/zero``
    writes no ``/dev/zero.idx``."""
    folder, _ = here
    device = device_path(kind)
    if device is None:
        pytest.skip("no block device on this machine (no /dev/loop*, nothing in /sys/block)")
    before, devices = snapshot(folder), dev_names(kind)
    argv = [command[0], device, *command[1:]]
    if command[0] == "extract":
        argv.append("out")
    proc = run(argv, folder)
    assert_refused(proc, device, kind, argv)
    assert snapshot(folder) == before
    assert dev_names(kind) == devices
    assert not os.path.exists(device + ".idx")


# -- every command, special file where it writes -----------------------------------------------
#: (id, argv with {S}, the special file's name, whether --force is given too)
OUTPUTS = [
    ("index", ["index", "img.rec", "-o", "{S}"], "s.idx"),
    ("index-beside", ["index", "img.rec", "--force"], "img.idx"),
    ("show", ["show", "img.rec", "-o", "{S}"], "s.png"),
    ("repair", ["repair", "img.rec", "-o", "s"], "s.rec"),
    ("repair-idx", ["repair", "img.rec", "-o", "s"], "s.idx"),
    ("repack", ["repack", "img.rec", "s", "--shuffle"], "s.rec"),
    ("repack-idx", ["repack", "img.rec", "s", "--shuffle"], "s.idx"),
    ("extract-dir", ["extract", "img.rec", "{S}"], "s"),
    ("split-write", ["split", "-n", "2", "img.rec", "--write", "s"], "s_1.rec"),
    ("inspect-plot", ["inspect", "img.rec", "--plot", "{S}"], "s.png"),
    ("im2rec-list", ["im2rec", "s", "imgs", "--list"], "s.lst"),
    ("im2rec-rec", ["im2rec", "job", "imgs"], "job.rec"),
    ("im2rec-idx", ["im2rec", "job", "imgs"], "job.idx"),
    ("im2rec-errors", ["im2rec", "job", "imgs"], "job.errors.tsv"),
    ("im2rec-partial", ["im2rec", "job", "imgs"], "job.rec.partial"),
    ("im2rec-journal", ["im2rec", "job", "imgs", "--resume"], "job.pack.journal"),
    ("im2rec-lock", ["im2rec", "job", "imgs"], "job.pack.lock"),
    ("im2rec-shard", ["im2rec", "job", "imgs", "--num-shards", "2"], "job-00001.rec"),
    ("im2rec-manifest", ["im2rec", "job", "imgs", "--num-shards", "2"], "job.manifest.json"),
    ("im2rec-sized", ["im2rec", "job", "imgs", "--shard-size", "1MB"], "job.manifest.json"),
]


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
@pytest.mark.parametrize("case, kind", [
    (case, kind) for case in OUTPUTS for kind in sorted(KINDS)
    if not (case[0] == "extract-dir" and kind == "directory")],  # a folder is what it takes
    ids=[f"{case[0]}-{kind}" for case in OUTPUTS for kind in sorted(KINDS)
         if not (case[0] == "extract-dir" and kind == "directory")])
def test_every_command_refuses_a_special_output(here, case, kind, force):
    """Refused whether or not ``--force`` is given: a device, FIFO, socket or folder is never
    written, replaced or deleted, and nothing is written beside it."""
    folder, keep = here
    name, template = case[2], case[1]
    special = make_special(kind, name, keep)
    before, devices = snapshot(folder), dev_names(kind)
    argv = [a.replace("{S}", special) for a in template] + (["--force"] if force else [])
    proc = run_in_process(argv)
    if case[0] == "extract-dir":
        assert proc.returncode == 2 and "not a folder" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    else:
        assert_refused(proc, name, kind, argv)
    assert snapshot(folder) == before
    assert dev_names(kind) == devices


# -- the Python API ----------------------------------------------------------------------------
def _readers():
    import recio.mx.io
    import recio.mx.recordio
    import recio.torch
    from recio.records.index import open_index
    from recio.sequence import MinibatchSource

    mx = recio.mx.recordio
    return {
        "RecordReader": lambda s: recio.RecordReader(s),
        "IndexedRecordReader": lambda s: recio.IndexedRecordReader(s),
        "IndexedRecordReader-idx": lambda s: recio.IndexedRecordReader("img.rec", s),
        "InputSplit": lambda s: list(recio.InputSplit(s)),
        "InputSplit-records": lambda s: list(recio.InputSplit(s, balance="records")),
        "read_index": lambda s: recio.read_index(s),
        "open_index": lambda s: open_index(s),
        "build_index": lambda s: recio.build_index(s),
        "RecordDataset": lambda s: recio.torch.RecordDataset(s),
        "RecordIterableDataset": lambda s: list(recio.torch.RecordIterableDataset(s)),
        "MXRecordIO": lambda s: mx.MXRecordIO(s, "r"),
        "MXIndexedRecordIO-idx": lambda s: mx.MXIndexedRecordIO(s, "img.rec", "r"),
        "MXIndexedRecordIO-rec": lambda s: mx.MXIndexedRecordIO("img.idx", s, "r"),
        "ImageBatchIter": lambda s: next(iter(recio.ImageBatchIter(
            path_imgrec=s, data_shape=(3, 8, 8), batch_size=2))),
        "ImageBatchIter-idx": lambda s: recio.ImageBatchIter(
            path_imgrec="img.rec", path_imgidx=s, data_shape=(3, 8, 8), batch_size=2),
        "mx.io.ImageRecordIter": lambda s: recio.mx.io.ImageRecordIter(
            path_imgrec=s, data_shape=(3, 8, 8), batch_size=2),
        "MinibatchSource": lambda s: MinibatchSource(s),
    }


#: the readers that take a *source*, for which a folder is a folder of .rec files
SOURCES = {"InputSplit", "InputSplit-records", "RecordDataset", "RecordIterableDataset",
           "ImageBatchIter", "mx.io.ImageRecordIter", "MinibatchSource"}
READERS = sorted(_readers())
#: the readers that need torch (recio.torch's datasets)
TORCH_READERS = {"RecordDataset", "RecordIterableDataset"}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("opener", READERS)
def test_every_reader_refuses_a_special_file(here, opener, kind):
    if opener in TORCH_READERS:
        need("torch")
    folder, keep = here
    special = make_special(kind, "s.rec", keep)
    before = snapshot(folder)
    with hang_guard(20):
        if kind == "directory" and opener in SOURCES:  # an empty folder of .rec files
            with pytest.raises(FileNotFoundError, match="no .rec files"):
                _readers()[opener](special)
        else:
            with pytest.raises(NotRegularFileError, match=f"s.rec: is {KINDS[kind]}") as info:
                _readers()[opener](special)
            assert info.value.kind == KINDS[kind] and info.value.path.endswith("s.rec")
    assert snapshot(folder) == before


@pytest.mark.slow
def test_a_shard_set_with_a_special_shard(here):
    """A manifest whose shard was replaced by a FIFO: ShardReader, verify and inspect refuse."""
    folder, keep = here
    with recio.ShardWriter("set", max_records=2) as writer:
        for key in range(5):
            writer.write(key, b"x" * key)
    os.unlink("set-00001.rec")
    make_special("fifo", "set-00001.rec", keep)
    with hang_guard(20), pytest.raises(NotRegularFileError, match="set-00001.rec: is a FIFO"):
        recio.ShardReader("set.manifest.json")
    for command in (["verify", "set.manifest.json"], ["inspect", "set.manifest.json"]):
        assert_refused(run(command, folder), "set-00001.rec", "fifo", command)


def _writers():
    import recio.mx.recordio
    from recio.records.index_format import write_index

    mx = recio.mx.recordio
    return {
        "RecordWriter": lambda s: recio.RecordWriter(s),
        "RecordWriter-in-place": lambda s: recio.RecordWriter(s, atomic=False),
        "IndexedRecordWriter-rec": lambda s: recio.IndexedRecordWriter(s, "new.idx"),
        "IndexedRecordWriter-idx": lambda s: recio.IndexedRecordWriter("new.rec", s),
        "MXRecordIO": lambda s: mx.MXRecordIO(s, "w"),
        "MXIndexedRecordIO": lambda s: mx.MXIndexedRecordIO("new.idx", s, "w"),
        "write_index": lambda s: write_index(s, [0], [0]),
        "ShardWriter": lambda s: recio.ShardWriter(s[:-len("-00000.rec")]).write(0, b"x"),
    }


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("maker", sorted(_writers()))
def test_every_writer_refuses_a_special_output(here, maker, kind):
    folder, keep = here
    name = "set-00000.rec" if maker == "ShardWriter" else "s.rec"
    special = make_special(kind, name, keep)
    before = snapshot(folder)
    with hang_guard(20), pytest.raises(NotRegularFileError, match=f"is {KINDS[kind]}"):
        _writers()[maker](special)
    assert snapshot(folder) == before
