"""Full disks and read-only file systems under every writer and command, on real ones: a small
tmpfs the test mounts (filled to many sizes, so the failure falls in the .rec, the .idx, a
list, a lock, at the rename...), /dev/full, and a tmpfs remounted read-only. Each failure is
one line naming the user's file (never a temporary, lock or staging name), exit status 2, no
traceback, nothing left that looks complete, and in Python an ``OutputWriteError`` (an
``OSError`` too) whose ``__cause__`` is the OS's error.

EDQUOT and EIO cannot be produced for real here: this kernel's tmpfs has no quota support and
there is no device-mapper (dm-error) or block-layer fault injection; a loop device over a full
file system reports ENOSPC, not EIO. Their errno takes the same path as ENOSPC's
(``atomic.write_failed``, ``cli.common.os_error_line``), which ``test_advice_for_each_errno``
checks line by line.
"""
import errno
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import recio
from recio.errors import OutputWriteError
from recio.image.packing.settings import PackSettings
from recio.mx import recordio as mx_recordio

from conftest import skip_or_fail
from support import make_corpus

pytestmark = pytest.mark.linux_only("mounts a tmpfs (as root) and writes to /dev/full")

#: free bytes left on the disk before the command runs: the failure falls in every place
FREE = [0, 4096, 12288, 40960, 131072]
FILLER = "filler"


def _mount(folder, options):
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode:
        skip_or_fail(f"cannot mount a tmpfs here: {done.stderr.strip()}")


@pytest.fixture
def disk(tmp_path):
    """A 1 MiB tmpfs, unmounted after the test."""
    folder = tmp_path / "disk"
    _mount(folder, "size=1m")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder, free):
    """Leave about ``free`` bytes on the disk of ``folder`` (a file named FILLER takes the rest)."""
    filler = folder / FILLER
    if filler.exists():
        filler.unlink()
    st = os.statvfs(folder)
    with open(filler, "wb") as f:
        f.write(b"\0" * max(st.f_bavail * st.f_frsize - free, 0))


def left(folder, *also):
    return sorted(n for n in os.listdir(folder) if n not in (FILLER,) + also)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    make_corpus(folder, n=40)
    subprocess.run([sys.executable, "-m", "recio.im2rec", str(folder / "job"),
                    str(folder / "img"), "-q"], check=True, capture_output=True)
    with recio.IndexedRecordWriter(folder / "big.rec", folder / "big.idx") as writer:
        for i in range(300):
            writer.write(i, bytes([i % 251]) * 3000)
    from recio.sequence.writer import SequenceWriter

    with SequenceWriter(folder / "seq.rec") as writer:
        for i in range(200):
            writer.write({"x": np.full((100, 3), i, dtype=np.float32)})
    return folder


# -- Python -------------------------------------------------------------------------------------
@pytest.mark.parametrize("free", FREE)
@pytest.mark.parametrize("which", ["RecordWriter", "IndexedRecordWriter", "MXIndexedRecordIO",
                                   "SequenceWriter", "CBFWriter"])
def test_writers_into_a_full_disk(disk, free, which):
    """The write that meets the full disk raises OutputWriteError (ENOSPC, the OS's error as
    __cause__) naming the .rec or .idx (.len, .cbf), never a BufferError; the writer is closed
    and no file of it is left."""
    from recio.sequence.cbf import CBFWriter
    from recio.sequence.writer import SequenceWriter

    fill(disk, free)
    rec, idx = str(disk / "a.rec"), str(disk / "a.idx")
    sequence = {"x": np.arange(600, dtype=np.float32).reshape(200, 3)}
    with pytest.raises(OutputWriteError) as info:
        if which == "SequenceWriter":
            with SequenceWriter(rec) as writer:
                for _ in range(500):
                    writer.write(sequence)
        elif which == "CBFWriter":
            rec = str(disk / "a.cbf")
            with CBFWriter(rec, [("x", "dense", np.float32, 3)],
                           chunk_size_bytes=20_000) as writer:
                for _ in range(500):
                    writer.write(sequence)
        elif which == "RecordWriter":
            with recio.RecordWriter(rec) as writer:
                for i in range(400):
                    writer.write(bytes([i % 256]) * (100 + 37 * i))
        elif which == "IndexedRecordWriter":
            with recio.IndexedRecordWriter(rec, idx) as writer:
                for i in range(400):
                    writer.write(i, bytes([i % 256]) * (100 + 37 * i))
        else:
            writer = mx_recordio.MXIndexedRecordIO(idx, rec, "w")
            try:
                for i in range(400):
                    writer.write_idx(i, bytes([i % 256]) * (100 + 37 * i))
            finally:
                writer.close()
    exc = info.value
    assert exc.errno == errno.ENOSPC and isinstance(exc, OSError)
    assert isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.ENOSPC
    assert exc.path in (rec, idx, str(disk / "a.len")) and "No space left" in str(exc)
    assert left(disk) == []


def test_a_writer_that_failed_refuses_more_and_close_writes_nothing(disk):
    fill(disk, 8192)
    writer = recio.IndexedRecordWriter(disk / "a.rec", disk / "a.idx")
    with pytest.raises(OutputWriteError):
        for i in range(400):
            writer.write(i, b"x" * 5000)
    assert writer.closed
    with pytest.raises(ValueError, match="closed"):
        writer.write(0, b"y" * 5000)
    writer.close()
    assert left(disk) == []


def test_dev_full():
    """/dev/full answers every write with ENOSPC: a writer over it (a borrowed file) raises
    OutputWriteError naming it. (An atomic writer is never pointed at /dev: it would write a
    temporary file there.)"""
    with open("/dev/full", "wb", buffering=0) as f:
        writer = recio.RecordWriter(f)
        with pytest.raises(OutputWriteError) as info:
            for _ in range(10):
                writer.write(b"x" * 100_000)
            writer.close()
    assert info.value.path == "/dev/full" and info.value.errno == errno.ENOSPC


@pytest.mark.slow
def test_the_pack_keeps_what_resume_continues(disk, corpus):
    """pack_list into a full disk: OutputWriteError with resumable=True; once there is room,
    resume=True finishes it with the bytes of an uninterrupted pack."""
    from recio.image.packing.pipeline import pack_list

    shutil.copy(corpus / "job.lst", disk / "job.lst")
    fill(disk, 40960)
    with pytest.raises(OutputWriteError) as info:
        pack_list(disk / "job.lst", corpus / "img")
    assert info.value.resumable and info.value.path == str(disk / "job.rec")
    assert left(disk, "job.lst") == ["job.pack.journal", "job.rec.partial"]
    (disk / FILLER).unlink()
    pack_list(disk / "job.lst", corpus / "img", PackSettings(resume=True))
    for suffix in (".rec", ".idx"):
        assert (disk / f"job{suffix}").read_bytes() == (corpus / f"job{suffix}").read_bytes()


# -- the commands -------------------------------------------------------------------------------
def _commands(corpus, disk):
    recio_cmd = [sys.executable, "-m", "recio"]
    im2rec = [sys.executable, "-m", "recio.im2rec"]
    return {
        "index": recio_cmd + ["index", str(corpus / "big.rec"), "-o", str(disk / "x.idx")],
        "repair": recio_cmd + ["repair", str(corpus / "big.rec"), "-o", str(disk / "r")],
        "repack": recio_cmd + ["repack", str(corpus / "job.rec"), str(disk / "r"),
                               "--shuffle"],
        "extract": recio_cmd + ["extract", str(corpus / "job.rec"), str(disk / "out")],
        "split": recio_cmd + ["split", str(corpus / "big.rec"), "-n", "2", "--write",
                              str(disk / "s")],
        "show": recio_cmd + ["show", str(corpus / "job.rec"), "-o", str(disk / "g.png")],
        "convert": recio_cmd + ["convert", str(corpus / "seq.rec"), str(disk / "c.cbf"),
                                "--chunk-size", "20000"],
        "list": im2rec + [str(disk / "l"), str(corpus / "img"), "--list"],
        "pack": im2rec + [str(disk / "job"), str(corpus / "img")],
        "shards": im2rec + [str(disk / "job"), str(corpus / "img"), "--num-shards", "2"],
    }


INTERNAL = (".tmp", ".pack.lock", ".recio-pack-job", ".partial", ".journal")


@pytest.mark.slow
@pytest.mark.parametrize("free", FREE)
@pytest.mark.parametrize("name", ["index", "repair", "repack", "extract", "split", "show",
                                  "convert", "list", "pack", "shards"])
def test_commands_into_a_full_disk(disk, corpus, name, free):
    """One line naming the user's file or folder and what to do, exit 2, no traceback;
    nothing left but what --resume continues (im2rec, which then finishes)."""
    shutil.copy(corpus / "job.lst", disk / "job.lst")
    fill(disk, free)
    cmd = _commands(corpus, disk)[name]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 0:  # it fitted: a whole output, nothing else
        assert "Traceback" not in done.stderr
        return
    assert done.returncode == 2, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    line = errors[0]
    assert "No space left on device" in line and "free space" in line, line
    assert not any(word in line for word in INTERNAL), line
    rest = left(disk, "job.lst")
    if "--resume" in line:
        assert name in ("pack", "shards")
        (disk / FILLER).unlink()
        again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
    else:
        assert rest == [], (line, rest)
        (disk / FILLER).unlink()
        again = subprocess.run(cmd, capture_output=True, text=True)  # "the same command again"
        assert again.returncode == 0, again.stderr


@pytest.fixture
def read_only(tmp_path, corpus):
    folder = tmp_path / "ro"
    _mount(folder, "size=1m")
    shutil.copy(corpus / "job.lst", folder / "job.lst")
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["index", "repair", "extract", "split", "list", "pack",
                                  "shards"])
def test_commands_on_a_read_only_file_system(read_only, corpus, name):
    """EROFS (a tmpfs remounted read-only): one line naming the output (or its folder) and
    saying the file system is read-only, exit 2, nothing written."""
    done = subprocess.run(_commands(corpus, read_only)[name], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "read-only" in done.stderr and str(read_only) in done.stderr, done.stderr
    assert not any(word in done.stderr for word in INTERNAL), done.stderr
    assert os.listdir(read_only) == ["job.lst"]


def test_advice_for_each_errno():
    """What a command says for each disk error (the errors this machine cannot make for real
    go through the same function as the ones it can)."""
    from recio.cli.common import os_error_line
    from recio.records.atomic import write_failed

    for number, words in ((errno.ENOSPC, "free space"), (errno.EDQUOT, "quota"),
                          (errno.EIO, "I/O error"), (errno.EROFS, "read-only"),
                          (errno.EFBIG, "files this large")):
        plain = write_failed(OSError(number, os.strerror(number)), "out/a.rec")
        line = os_error_line(plain)
        assert line.startswith("out/a.rec: cannot write it") and words in line, line
        assert "run the same command again" in line or "run the command again" in line
        kept = write_failed(OSError(number, os.strerror(number)), "out/a.rec", resumable=True)
        if number != errno.EROFS:
            assert "--resume" in os_error_line(kept)
    temp = OSError(errno.ENOSPC, "No space left on device", "out/.a.rec.123.0badcafe.tmp")
    assert os_error_line(temp).startswith("out/a.rec: No space left on device")
    assert pathlib.Path("out/a.rec").name in os_error_line(temp)
