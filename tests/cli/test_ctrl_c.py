"""Ctrl-C at any moment, with OpenCV's work running: a clean exit, nothing lost.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group (worker processes
included); these tests do the same (``support.run_signalled`` with ``group=True``) at moments
spread evenly over a command's or a script's run, from the moment recio's code starts (the
``started`` mark of ``support.hook_env``: before it the interpreter is still starting, and a
Ctrl-C there is Python's) to just past its end:

* ``im2rec`` packing on threads, on worker processes and in shards, and making a list: exit
  status 130 saying "Interrupted" once (0 when the Ctrl-C came after the work was done), no
  traceback, no abort; the pack then finishes with ``--resume``, byte for byte the pack that
  was never interrupted. (SIGTERM, SIGKILL and interrupts at chosen points: test_pack_resume.)
* a script iterating ``recio.ImageBatchIter`` or ``recio.mx.io.ImageRecordIter``, and one
  iterating a PyTorch ``DataLoader`` with 2 worker processes over the ``recio.torch``
  datasets: the KeyboardInterrupt reaches the script's main thread at once, and the script
  then ends as Python ends one that does not catch it (killed by SIGINT, which a shell reports
  as 130), with no abort.

What aborted before (``terminate called without an active exception``, status -6): a pack's
worker thread still inside OpenCV when Python shut down. Python ends such a daemon thread by
unwinding its C++ frames, and C++ calls std::terminate. The pack did wait for its threads, but
with ``Thread.join``, which a Ctrl-C arriving in it makes believe the thread has ended (Python
3.9 to 3.12), so the command went on to shut down with the thread still decoding.
"""
import itertools
import os
import random
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import need
from PIL import Image

from support import assert_same_files, hook_env, run_signalled

#: Ctrl-Cs per case. Before the fix, of 40 spread over a pack on 2 threads, 4 aborted (about
#: 1 in 4 of those that came while images were packed) and 15 more ended with a traceback or
#: killed by SIGINT (those while the command loaded its modules). A fault that hits 1 in 4 of
#: the Ctrl-Cs during packing shows in the 10 or more that land there with a probability
#: above 94% (one that hits 1 in 10 of all 30, 96%), and each kind of pack is tried.
TRIES = 30
#: the packs interrupted: (id, options); OpenCV decodes and resizes on 2 or 3 of the packer's
#: threads (one part of a pack in shards at a time) or on 2 worker processes
PACKS = [("threads", ["--num-thread", "2"]),
         ("shards-3-threads", ["--num-shards", "3", "--num-thread", "3"]),
         ("processes", ["--num-thread", "2", "--executor", "process"])]


pytestmark = pytest.mark.slow  # every test here runs the commands many times or waits


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """``img/``: 160 photo-like JPEGs of 800x600 to 872x660 (each keeps OpenCV busy for a few
    milliseconds: a worker is inside OpenCV most of the time), and ``job.lst`` of them."""
    folder = tmp_path_factory.mktemp("photos")
    (folder / "img").mkdir()
    rng = np.random.default_rng(39)
    lines = []
    for i in range(160):
        width, height = 800 + (i % 3) * 36, 600 + (i % 4) * 20
        coarse = rng.integers(0, 256, (height // 16, width // 16, 3), dtype=np.uint8)
        Image.fromarray(coarse).resize((width, height), Image.BILINEAR).save(
            folder / "img" / f"{i}.jpg", quality=90)
        lines.append(f"{i}\t{i % 3}\t{i}.jpg\n")
    (folder / "job.lst").write_text("".join(lines))
    return folder


def _spread(rng, span, tries=TRIES):
    """``tries`` delays in ``[0, span)``, one in each of ``tries`` equal slices (so the run is
    covered from its start to its end whatever the draw), in random order."""
    delays = [span * (i + rng.random()) / tries for i in range(tries)]
    rng.shuffle(delays)
    return delays


def _assert_clean_end(proc, what, allowed=(0, 130)):
    """A command that got a Ctrl-C (or finished first): exit status 130 saying so once, or 0;
    no traceback, no abort (``std::terminate``), no core dump; within a few seconds."""
    assert proc.returncode in allowed, (what, proc.returncode, proc.err)
    assert "Traceback" not in proc.err and "terminate called" not in proc.err, (what, proc.err)
    assert "Fatal Python error" not in proc.err, (what, proc.err)
    if proc.returncode == 130:
        assert proc.err.count("Interrupted") == 1, (what, proc.err)


@pytest.mark.posix_only("sends SIGINT to a process group, as a terminal's Ctrl-C does")
@pytest.mark.parametrize("kind, options", PACKS, ids=[k for k, _ in PACKS])
def test_ctrl_c_at_any_moment_exits_130_and_resume_gives_the_same_bytes(script, photos,
                                                                        tmp_path, kind,
                                                                        options):
    """30 Ctrl-Cs spread evenly from the start of an uninterrupted run to just past its end
    (measured first; more inside the pack while fewer than a third landed mid-pack), each
    interrupting a pack or a ``--resume`` of an interrupted one: each ends with 130 (or 0),
    cleanly; every pack, finished with ``--resume``, is byte for byte
    the uninterrupted pack. At least a third of them land while images are being packed."""
    def cmd(folder):
        return [*script("im2rec"), str(folder / "job"), str(photos / "img"), "--resize", "256",
                "--quality", "95", *options, "--resume"]

    started = tmp_path / "started"
    env = hook_env(tmp_path, started=started)
    clean = _fresh(tmp_path / "clean", photos)
    whole = run_signalled(cmd(clean), env, signal.SIGINT, None, started)
    assert whole.returncode == 0, whole.err
    os.unlink(started)
    rng = random.Random(f"ctrl-c-{kind}")
    folder, runs, packs, mid_pack = None, [], 0, 0
    # then, while fewer than a third landed mid-pack (a loaded machine starts Python slower
    # than the measured run did), up to TRIES more inside the pack's middle
    middle = (rng.uniform(0.3, 0.9) * whole.took for _ in range(TRIES))
    for tried, delay in enumerate(itertools.chain(_spread(rng, whole.took * 1.1), middle)):
        if tried >= TRIES and mid_pack >= TRIES // 3:
            break
        if folder is None:
            packs += 1
            folder, runs = _fresh(tmp_path / f"pack-{packs}", photos), []
        proc = run_signalled(cmd(folder), env, signal.SIGINT, delay, started, group=True)
        if started.exists():
            os.unlink(started)
        runs.append(f"Ctrl-C {delay:.2f} s after the start: {proc.returncode}")
        _assert_clean_end(proc, runs)
        assert proc.took < delay + 15, (runs, proc.took)  # no hang: a stuck thread waits 5 s
        mid_pack += proc.returncode == 130 and "--resume" in proc.err
        if proc.returncode == 0 or len(runs) == 5:
            _finish(cmd(folder), folder, clean, runs)
            folder = None
    if folder is not None:
        _finish(cmd(folder), folder, clean, runs)
    assert mid_pack >= TRIES // 3, mid_pack


def _fresh(folder, photos):
    folder.mkdir()
    shutil.copy(photos / "job.lst", folder / "job.lst")
    return folder


def _finish(cmd, folder, clean, runs):
    """``--resume`` finishes the pack in ``folder`` (or finds it finished) as ``clean``."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (runs, done.stderr)
    assert_same_files(folder, clean, "job")


@pytest.mark.posix_only("a pseudo-terminal, and SIGINT to a process group")
def test_ctrl_c_with_the_progress_bar_on_a_terminal(script, photos, tmp_path):
    """On a terminal the pack draws a tqdm bar (whose monitor thread runs beside the workers):
    12 Ctrl-Cs spread over a pack on 2 threads end it as cleanly as without one."""
    import fcntl
    import pty
    import struct
    import termios
    import time

    cmd = [*script("im2rec"), str(tmp_path / "job"), str(photos / "img"), "--resize", "256",
           "--num-thread", "2", "--force"]
    started = tmp_path / "started"
    env = hook_env(tmp_path, started=started)
    drawn = 0
    for delay in _spread(random.Random("ctrl-c-tty"), 1.2, tries=12):
        for name in os.listdir(tmp_path):
            if name.startswith(("job", ".", "started")):
                shutil.rmtree(tmp_path / name) if (tmp_path / name).is_dir() \
                    else os.unlink(tmp_path / name)
        shutil.copy(photos / "job.lst", tmp_path / "job.lst")
        terminal, stderr = pty.openpty()
        fcntl.ioctl(stderr, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                start_new_session=True, preexec_fn=_as_in_a_terminal())
        os.close(stderr)
        shown, sent = b"", None
        while True:
            if sent is None and started.exists():
                sent = time.monotonic() + delay
            if sent and time.monotonic() >= sent and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                sent = 0
            try:
                chunk = os.read(terminal, 65536) if _readable(terminal) else b""
            except OSError:  # the terminal's other end is closed: the command ended
                break
            if not chunk and proc.poll() is not None:
                break
            shown += chunk
        os.close(terminal)
        proc.wait(60)
        err = shown.decode(errors="replace")
        proc.err = err
        _assert_clean_end(proc, f"Ctrl-C {delay:.2f} s after the start: {proc.returncode}")
        drawn += "img/s" in err
    assert drawn, "the bar was never drawn"


def _readable(fd):
    import select

    return bool(select.select([fd], [], [], 0.01)[0])


def _as_in_a_terminal():
    from conftest import as_in_a_terminal

    return as_in_a_terminal


@pytest.mark.posix_only("sends SIGINT to a process group, as a terminal's Ctrl-C does")
def test_ctrl_c_while_making_a_list_exits_130_and_leaves_no_half_list(script, photos,
                                                                     tmp_path):
    """``im2rec --list`` (a folder's files listed into PREFIX.lst): 30 Ctrl-Cs spread over its
    run end it cleanly, each leaving the whole list or none."""
    cmd = [*script("im2rec"), str(tmp_path / "made"), str(photos / "img"), "--list",
           "--recursive"]
    started = tmp_path / "started"
    env = hook_env(tmp_path, started=started)
    whole = run_signalled(cmd, env, signal.SIGINT, None, started)
    assert whole.returncode == 0, whole.err
    listed = _made(tmp_path)
    assert "made.lst" in listed
    for delay in _spread(random.Random("ctrl-c-list"), whole.took * 1.1):
        for name in list(listed) + ["started"]:
            if (tmp_path / name).exists():
                os.unlink(tmp_path / name)
        proc = run_signalled(cmd, env, signal.SIGINT, delay, started, group=True)
        what = f"Ctrl-C {delay:.2f} s after the start: {proc.returncode}"
        _assert_clean_end(proc, what)
        made = _made(tmp_path)
        assert made == (listed if proc.returncode == 0 else {}) or \
            (proc.returncode == 130 and made in ({}, listed)), (what, sorted(made))
        assert not [n for n in os.listdir(tmp_path) if n.startswith(".")], what


def _made(folder):
    """The files ``im2rec made ROOT --list`` wrote in ``folder``: name -> bytes."""
    return {n: (folder / n).read_bytes() for n in os.listdir(folder) if n.startswith("made.")}


@pytest.mark.posix_only("sends itself SIGINT through a sitecustomize hook")
def test_ctrl_c_in_clicks_own_code_says_interrupted_not_aborted(script, photos, tmp_path):
    """A Ctrl-C while click parses the arguments, before the command runs: click would turn
    its KeyboardInterrupt into "Aborted!" and exit status 1; the command says "Interrupted."
    and exits 130 as at any other moment."""
    env = hook_env(tmp_path, kill_at="click.core:Command.parse_args:1:INT")
    proc = subprocess.run([*script("im2rec"), str(tmp_path / "job"), str(photos / "img"),
                           "--list"], capture_output=True, text=True, timeout=120, env=env)
    assert (proc.returncode, proc.stderr) == (130, "Interrupted.\n")
    assert not os.path.exists(tmp_path / "job.lst")


# -- a user's script ----------------------------------------------------------------------
#: a training script's loop over one of recio's iterators (argv: which, the .rec, a file it
#: creates once batches come): ImageBatchIter, recio.mx's, or recio.mx's PrefetchingIter
#: reading batches of recio.mx.image.ImageIter (which decodes in the thread that asks)
_ITERATOR_SCRIPT = """
import sys
which, rec, ready = sys.argv[1:]
if which == "recio":
    import recio
    make = recio.ImageBatchIter
else:
    import recio.mx
    make = recio.mx.io.ImageRecordIter
settings = dict(path_imgrec=rec, path_imgidx=rec[:-4] + ".idx", data_shape=(3, 224, 224),
                batch_size=16, shuffle=True, rand_crop=True, rand_mirror=True)
if which == "prefetching":
    it = recio.mx.io.PrefetchingIter(recio.mx.image.ImageIter(**settings))
else:
    it = make(preprocess_threads=2, **settings)
next(it)
open(ready, "w").close()
while True:
    for batch in it:
        pass
    it.reset()
"""

#: a training script's loop over a DataLoader with 2 worker processes (argv: start method,
#: "map" or "iterable", the .rec, a file it creates once both workers have given a batch)
_DATALOADER_SCRIPT = """
import sys
import torch
from torch.utils.data import DataLoader
from recio.torch import RecordDataset, RecordIterableDataset


def crop(image):
    return image[:, :224, :224]


if __name__ == "__main__":
    method, kind, rec, ready = sys.argv[1:]
    if kind == "map":
        dataset = RecordDataset(rec, transform=crop)
    else:
        dataset = RecordIterableDataset(rec, transform=crop)
    loader = DataLoader(dataset, batch_size=4, num_workers=2, persistent_workers=True,
                        shuffle=kind == "map", multiprocessing_context=method)
    batches = 0
    while True:
        for images, labels in loader:
            batches += 1
            if batches == 2:
                open(ready, "w").close()
"""


@pytest.fixture(scope="module")
def packed(photos, tmp_path_factory):
    """``photos`` packed at 256 pixels: ``job.rec`` and ``job.idx``."""
    folder = tmp_path_factory.mktemp("packed")
    shutil.copy(photos / "job.lst", folder / "job.lst")
    done = subprocess.run([sys.executable, "-m", "recio.im2rec", str(folder / "job"),
                           str(photos / "img"), "--resize", "256", "--num-thread", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return folder / "job.rec"


def _script_interrupted(tmp_path, code, args, delay):
    """Run the script ``code`` with ``args`` in a process group of its own; ``delay`` seconds
    after it says it is ready, Ctrl-C. Returns the finished process (``took``: from then)."""
    path = tmp_path / "train.py"
    path.write_text(code)
    ready = tmp_path / "ready"
    if ready.exists():
        os.unlink(ready)
    return run_signalled([sys.executable, str(path), *args, str(ready)], dict(os.environ),
                         signal.SIGINT, delay, ready, group=True)


def _assert_python_ends_on_ctrl_c(proc, what):
    """Python's own end of a script that does not catch Ctrl-C: the KeyboardInterrupt raised
    in the main thread is the last thing said, the process then kills itself with SIGINT
    (a shell reports 130); nothing aborts, within a few seconds."""
    assert proc.signalled, what
    assert proc.returncode == -signal.SIGINT, (what, proc.returncode, proc.err)
    assert proc.err.rstrip().endswith("KeyboardInterrupt"), (what, proc.err)
    assert "terminate called" not in proc.err and "Fatal Python error" not in proc.err, (
        what, proc.err)
    assert proc.took < 20, (what, proc.took)


@pytest.mark.posix_only("sends SIGINT to a process group, as a terminal's Ctrl-C does")
@pytest.mark.parametrize("which", ["recio", "mx", "prefetching"])
def test_ctrl_c_in_a_script_iterating_image_record_iter(packed, tmp_path, which):
    """8 Ctrl-Cs spread over 1.5 s of epochs (decoding on 2 threads, prefetching on a third)
    of a script that does not catch KeyboardInterrupt: the main thread gets it at once, one
    traceback (the script's own) is printed, nothing aborts. The image record iterators'
    decoding threads belong to a thread pool, which Python joins before it shuts down, so none
    is inside OpenCV then (no failure in 10 and 20 tries before the fix: a guard). recio.mx's
    PrefetchingIter decoded in daemon threads, waited for with Thread.join: 12 aborts in 16
    tries before it let Python wait for them."""
    rng = random.Random(f"ctrl-c-iter-{which}")
    for delay in _spread(rng, 1.5, tries=8):
        proc = _script_interrupted(tmp_path, _ITERATOR_SCRIPT, [which, str(packed)], delay)
        _assert_python_ends_on_ctrl_c(proc, f"Ctrl-C {delay:.2f} s after the first batch")
        assert proc.err.count("Traceback") == 1, proc.err


@pytest.mark.posix_only("sends SIGINT to a process group, as a terminal's Ctrl-C does")
@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("kind", ["map", "iterable"])
def test_ctrl_c_in_a_script_iterating_a_dataloader_over_recio_torch(packed, tmp_path, method,
                                                                    kind):
    """A DataLoader with 2 worker processes, forked or spawned, decoding with recio.torch's
    datasets: Ctrl-Cs at moments spread over 1.5 s once both workers have given a batch
    reach the workers and the script at once; the workers end quietly (PyTorch's worker loop
    takes their KeyboardInterrupt: no traceback shows recio's code), the script with its own
    traceback, nothing aborts. (PyTorch's own plumbing may print one more: the thread that
    hands a worker's tensor to the main process finds it gone.)
    A guard, not a hunt: 4 tries forked and 2 spawned (a spawned worker imports torch again,
    2-4 s a try); no failure in 48 tries before the fix. (A Ctrl-C while a spawned worker
    still imports torch makes it print its own traceback: that is Python starting the worker,
    before any of recio runs, so the moments here begin once both workers have given a
    batch.)"""
    need("torch")
    tries = 4 if method == "fork" else 2
    rng = random.Random(f"ctrl-c-dataloader-{method}-{kind}")
    for delay in _spread(rng, 1.5, tries=tries):
        proc = _script_interrupted(tmp_path, _DATALOADER_SCRIPT, [method, kind, str(packed)],
                                   delay)
        _assert_python_ends_on_ctrl_c(proc, f"Ctrl-C {delay:.2f} s after two batches")
        assert f"{os.sep}recio{os.sep}" not in proc.err, proc.err  # none of recio's frames
