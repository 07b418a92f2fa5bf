"""An output folder that refuses new files: every command that writes says so in the user's terms.

A real read-only file system (a tmpfs filled, then remounted read-only: ``chmod`` would not
stop root, which this machine and CI run as) and a real folder without write permission (the
command run as root without the capability to override it, ``setpriv``). Each command that writes (im2rec's list and pack
modes, a resume, repair, repack, index, extract, split, convert, show, inspect --plot) must
name the user's own output and its folder, never a temporary (``.x.rec.4242.6f42b951.tmp``)
or lock (``x.pack.lock``) name, say what to do, and leave nothing behind; and what it says to
do must work when done. ``recio buckets`` only reads: it works on a read-only folder.
"""
import os
import pathlib
import re
import shutil
import subprocess

import pytest
from conftest import GOLDEN, skip_or_fail

from recio.errors import OutputFolderError
from recio.image.packing.paths import PackPaths
from recio.records.writer import RecordWriter
from support import hook_env, make_corpus

pytestmark = pytest.mark.linux_only("mounts a tmpfs read-only and drops root's capabilities "
                                    "(setpriv)")

#: what a message must never show: the writers' own names
INTERNAL = re.compile(r"\.tmp\b|\.pack\.lock|\.pack\.journal|\.partial|\.recio-pack-")


def _can_mount() -> str:
    """Why a read-only tmpfs cannot be mounted here ("" when it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a tmpfs needs root (CI and the development machine run as root)"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount/umount are not installed"
    return ""


class ReadOnly:
    """Folders on read-only tmpfs mounts, made by :meth:`folder` and unmounted at the end."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base, self.mounts = base, []

    def folder(self, name: str, files=()) -> pathlib.Path:
        """A new folder ``name`` holding copies of ``files``, then made read-only."""
        folder = self.base / name
        folder.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)],
                       check=True)
        self.mounts.append(folder)
        for path in files:
            shutil.copy(path, folder / pathlib.Path(path).name)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        with pytest.raises(OSError):  # root cannot write there either
            (folder / "probe").write_bytes(b"")
        return folder

    def close(self) -> None:
        for folder in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def read_only(tmp_path):
    why = _can_mount()
    if why:
        skip_or_fail(why)
    mounts = ReadOnly(tmp_path)
    try:
        yield mounts
    finally:
        mounts.close()


@pytest.fixture
def corpus(tmp_path):
    """A list of 30 images (one missing, one malformed line) and its pack in ``done/``."""
    make_corpus(tmp_path, n=30, missing=(4,), bad_lines=(11,))
    return tmp_path


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120,
                          **kw)


def _refused(proc, output, folder, what_to_do):
    """The command failed in one line naming the user's ``output`` and ``folder`` (never an
    internal name) and saying ``what_to_do``."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert line.count("\n") == 0, line
    assert str(output) in line and str(folder) in line, line
    assert not INTERNAL.search(line), line
    assert what_to_do in line, line


def _im2rec(script, prefix, root, *extra):
    return [*script("im2rec"), prefix, root, "--resize", "24", *extra]


@pytest.mark.slow
def test_im2rec_pack_into_a_read_only_folder_names_its_outputs_and_the_copy_to_make(
        script, corpus, read_only):
    rom = read_only.folder("rom", [corpus / "job.lst"])
    root = corpus / "img"
    for extra in ([], ["--num-shards", "2"], ["--shard-size", "20KB"], ["--resume"],
                  ["--force"], ["--num-thread", "2", "--executor", "process"]):
        proc = _run(_im2rec(script, rom / "job", root, *extra))
        _refused(proc, rom / ("job.manifest.json" if "--num-shards" in extra or
                              "--shard-size" in extra else "job.rec"), rom,
                 "copy job.lst into a folder you can write to and pack that copy")
        assert "read-only file system" in proc.stderr
    assert sorted(os.listdir(rom)) == ["job.lst"]
    # what it says to do: the copy packs the same images
    rw = corpus / "rw"
    rw.mkdir()
    shutil.copy(rom / "job.lst", rw / "job.lst")
    done = _run(_im2rec(script, rw / "job", root))
    assert done.returncode == 0, done.stderr
    assert "packed 29 images" in done.stdout


@pytest.mark.slow
@pytest.mark.posix_only("kills the pack")
def test_resuming_an_interrupted_pack_whose_folder_became_read_only(script, corpus, tmp_path):
    """Interrupted (SIGKILL) in a folder that is then remounted read-only: --resume names the
    pack's .rec, not its lock, journal or partial file."""
    why = _can_mount()
    if why:
        skip_or_fail(why)
    folder = tmp_path / "mnt"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)], check=True)
    try:
        shutil.copy(corpus / "job.lst", folder / "job.lst")
        cmd = _im2rec(script, folder / "job", corpus / "img")
        killed = _run(cmd, env=hook_env(tmp_path, kill_at="recio.image.packing.output:"
                                                          "PackOutput.write:3:KILL"))
        assert killed.returncode == -9, killed.stderr
        assert all(os.path.exists(p) for p in PackPaths.of(folder / "job.lst").partial)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        proc = _run(cmd + ["--resume"])
        _refused(proc, folder / "job.rec", folder, "copy job.lst into a folder")
        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
        resumed = _run(cmd + ["--resume"])  # writable again: the kept progress is used
        assert resumed.returncode == 0 and "resumed after" in resumed.stdout, resumed.stderr
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
def test_im2rec_list_into_a_read_only_folder(script, corpus, read_only):
    rom = read_only.folder("rom")
    images = corpus / "img"
    proc = _run([*script("im2rec"), rom / "train", images, "--list"])
    _refused(proc, rom / "train.lst", rom, "write it to a folder on a writable disk")
    assert os.listdir(rom) == []
    proc = _run([*script("im2rec"), rom / "train", images, "--list", "--train-ratio", "0.8"])
    _refused(proc, rom / "train_", rom, "write it to a folder on a writable disk")
    done = _run([*script("im2rec"), corpus / "train", images, "--list"])
    assert done.returncode == 0 and (corpus / "train.lst").exists(), done.stderr


def _packed(corpus, script):
    """``corpus/done/job.rec`` + ``.idx``: the list packed, for the commands that read one."""
    done = corpus / "done"
    if not done.exists():
        done.mkdir()
        shutil.copy(corpus / "job.lst", done / "job.lst")
        proc = _run(_im2rec(script, done / "job", corpus / "img"))
        assert proc.returncode == 0, proc.stderr
    return done / "job.rec", done / "job.idx"


@pytest.mark.parametrize("name, args, output", [
    ("repair", ["repair", "{in}", "-o", "{out}/fixed.rec"], "fixed.rec"),
    ("repack", ["repack", "{in}", "{out}/shuffled.rec", "--shuffle"], "shuffled.rec"),
    ("index", ["index", "{in}", "-o", "{out}/other.idx"], "other.idx"),
    ("index in place", ["index", "{ro}/job.rec", "--force"], "job.idx"),
    ("extract", ["extract", "{in}", "{out}/images"], "images"),
    ("split", ["split", "{in}", "-n", "2", "--write", "{out}/part"], "part_0.rec"),
    ("split, new folder", ["split", "{in}", "-n", "2", "--write", "{out}/parts/p"], "parts"),
    ("show", ["show", "{in}", "-o", "{out}/grid.png"], "grid.png"),
    ("inspect --plot", ["inspect", "{in}", "--plot", "{out}/stats.png"], "stats.png"),
])
@pytest.mark.slow
def test_recio_commands_writing_into_a_read_only_folder(script, corpus, read_only, name, args,
                                                         output):
    rec, idx = _packed(corpus, script)
    rom = read_only.folder("rom", [rec, idx])

    def command(out):
        return [*script("recio"), *[a.format(**{"in": rec, "out": out, "ro": rom})
                                   for a in args]]

    proc = _run(command(rom))
    _refused(proc, rom / output, rom, "write it to a folder on a writable disk")
    assert sorted(os.listdir(rom)) == ["job.idx", "job.rec"]
    if name == "index in place":
        return  # its next step is -o into another folder: the "index" case
    rw = corpus / "rw"
    rw.mkdir()
    done = _run(command(rw))
    assert done.returncode == 0, done.stderr
    assert (rw / output).exists()


@pytest.mark.slow
def test_convert_into_a_read_only_folder_and_buckets_from_one(script, corpus, read_only):
    rom = read_only.folder("rom", [GOLDEN / "cbf" / "float.cbf"])
    proc = _run([*script("recio"), "convert", rom / "float.cbf", rom / "seq.rec"])
    _refused(proc, rom / "seq.rec", rom, "write it to a folder on a writable disk")
    done = _run([*script("recio"), "convert", rom / "float.cbf", corpus / "seq.rec"])
    assert done.returncode == 0, done.stderr
    # buckets only reads (the .rec and its .len sidecar): a read-only folder is no obstacle
    ro2 = read_only.folder("ro2", [corpus / "seq.rec", corpus / "seq.idx", corpus / "seq.len"])
    proc = _run([*script("recio"), "buckets", ro2 / "seq.rec", "-n", "2"])
    assert proc.returncode == 0, proc.stderr


def test_the_library_raises_output_folder_error_which_is_an_os_error(corpus, read_only):
    rom = read_only.folder("rom")
    with pytest.raises(OutputFolderError) as info:
        RecordWriter(rom / "x.rec")
    error = info.value
    assert isinstance(error, OSError) and error.errno == 30 and error.filename == str(rom / "x.rec")
    assert error.folder == str(rom)
    assert str(error).startswith(f"{rom / 'x.rec'}: cannot be written: its folder {rom} is on a "
                                 "read-only file system")


def _without_root_override():
    """The argv prefix that runs a command as root without the capabilities that let root write
    anywhere (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): a folder's mode bits then hold for it as
    for any user, while the interpreter and its packages (which may live under /root) stay
    readable."""
    if shutil.which("setpriv") is None:
        skip_or_fail("setpriv (util-linux) is not installed: it drops root's capabilities")
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]


@pytest.mark.slow
def test_a_folder_this_user_may_not_write_in(script, corpus, tmp_path):
    """EACCES: a folder this user may not write in (chmod 555; the command runs as root without
    the capability to override a folder's mode)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        skip_or_fail("dropping root's capabilities needs root")
    limited = _without_root_override()
    locked = corpus / "locked"
    locked.mkdir()
    shutil.copy(corpus / "job.lst", locked / "job.lst")
    os.chmod(locked / "job.lst", 0o644)
    os.chmod(locked, 0o555)
    proc = _run(limited + _im2rec(script, locked / "job", corpus / "img"))
    _refused(proc, locked / "job.rec", locked, "copy job.lst into a folder you can write to")
    assert "this user may not create files in its folder" in proc.stderr
    rec, _ = _packed(corpus, script)
    proc = _run(limited + [*script("recio"), "repair", rec, "-o", locked / "fixed.rec"])
    _refused(proc, locked / "fixed.rec", locked, "write it to a folder you can write to")
    own = corpus / "own"
    own.mkdir()
    os.chmod(own, 0o777)
    done = _run(limited + [*script("recio"), "repair", rec, "-o", own / "fixed.rec"])
    assert done.returncode == 0, done.stderr
