"""Interrupted packs of every kind resume byte for byte, and two packs never share outputs.

The commands run as users run them (subprocesses), killed at seeded random moments (SIGTERM,
SIGKILL, SIGINT, after a random delay) or at chosen points (a hook in a ``sitecustomize``:
``support.hook_env``), resumed with ``--resume`` (killed again, sometimes) from another working
directory with another temporary folder, and compared with an uninterrupted pack: every shard,
index, checksum sidecar, error report and manifest, byte for byte, and nothing left beside them.
A bucket is the local S3 server (moto, 127.0.0.1). Ray's engine: tests/with_ray/test_ray.py (one
node) and tests/with_ray/test_ray_cluster.py (several nodes, a node lost, the driver killed).
"""
import json
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from recio import portable
from recio.errors import InterruptedPackError, OutputBusyError, RecordIOError
from recio.image.packing.paths import PackPaths
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import pack_list
from recio.image.packing.parts import Fault
from recio.image.packing.shards import pack_shards
from recio.image.pixels.transform import ImageOptions
from recio.records import lock as lock_module
from recio.records.lock import OutputLock
from recio.records.manifest import load_manifest
from recio.records.shards.verify import verify_manifest
from support import (
    assert_bucket_set,
    assert_same_files,
    clean_pack,
    finish,
    hook_env,
    make_corpus,
    run_signalled,
)

HOST = socket.gethostname()
#: the packs the random kills interrupt: (id, options)
PACKS = [("shards", ["--num-shards", "5", "--checksums"]),
         ("sized", ["--shard-size", "24KB", "--checksums"]),
         ("threads", ["--num-shards", "3", "--num-thread", "2"]),
         ("plain", ["--num-thread", "2"])]
#: where a hook may kill each kind of pack: (function, N) kills just before one of its first
#: N calls
_PARTS = [("recio.image.packing.worker:_read_image_file", 40),
          ("recio.image.packing.progress:PackProgress.write_done", 5),
          ("recio.image.packing.progress:PackProgress.attempt", 5),
          ("recio.image.packing.shards:_write_errors", 1),
          ("recio.image.packing.progress:PackProgress.finish", 1),
          ("recio.storage:remove_tree", 1),
          ("recio.records.atomic:AtomicFile.publish", 4)]
POINTS = {
    "shards": _PARTS + [("recio.storage:move", 12),
                        ("recio.records.shards.commit:combined_index", 1)],
    "sized": _PARTS + [("recio.records.shards.shard_set:ShardWriter.close", 1)],
    "threads": _PARTS + [("recio.storage:move", 6)],
    "plain": [("recio.image.packing.worker:_read_image_file", 40),
              ("recio.records.atomic:AtomicFile.publish", 3),
              ("recio.image.packing.output:PackOutput.write", 10)],
}


@pytest.fixture
def corpus(tmp_path):
    """40 images (2 missing, 1 malformed line) and ``clean/``: the list packed without
    interruption by each kind of pack (made on demand by ``_clean``)."""
    make_corpus(tmp_path, n=40, missing=(3, 17), bad_lines=(9,))
    return tmp_path


def _cmd(script, prefix, root, options):
    return [*script("im2rec"), str(prefix), str(root), "--resize", "24", "--pack-label",
            *options]


def _clean(script, corpus, options, name="clean"):
    return clean_pack(corpus, name, lambda prefix: _cmd(script, prefix, corpus / "img", options))


def _run_killed(cmd, env, sig, delay, cwd=None):
    """Run ``cmd``; ``delay`` seconds after its pack began (its first image read: the
    ``RECIO_TEST_READY`` file of ``hook_env``; None: let it end by itself, e.g. its hook
    kills it) send ``sig``. Returns the finished process, its output in ``out`` and
    ``err``."""
    return run_signalled(cmd, env, sig, delay, env.get("RECIO_TEST_READY") if delay is not None
                         else None, cwd)


def _no_half_published_set(folder, stem):
    """What a kill may leave under the final names never looks complete when it is not: a
    manifest verifies; a .rec with its .idx is a whole pack."""
    manifest = folder / f"{stem}.manifest.json"
    if manifest.exists():
        assert verify_manifest(manifest, deep=True).clean
    if (folder / f"{stem}.rec").exists() and (folder / f"{stem}.idx").exists():
        from recio.records.indexed import IndexedRecordReader

        with IndexedRecordReader(folder / f"{stem}.rec") as reader:
            assert len(reader.keys()) == 38


def _interrupt(rng, cmd, env_folder, kind, cwd=None, base_env=None):
    """One interruption drawn from ``rng``: a signal after a random delay, or a hook that
    kills at a random point. Returns a description for failure messages."""
    sig = rng.choice(["TERM", "KILL", "INT"])
    if rng.random() < 0.5:
        delay = rng.uniform(0.0, 2.0)
        ready = env_folder / f"ready-{rng.random()}"
        env = hook_env(env_folder, slow=0.04, base=base_env, ready=ready)
        proc = _run_killed(cmd, env, getattr(signal, "SIG" + sig), delay, cwd)
        what = f"SIG{sig} after {delay:.2f} s"
    else:
        target, most = rng.choice(POINTS[kind])
        at = f"{target}:{rng.randint(1, most)}:{sig}"
        proc = _run_killed(cmd, hook_env(env_folder, kill_at=at, base=base_env), None, None,
                           cwd)
        what = f"SIG{sig} at {at}"
    assert "Traceback" not in proc.err and "terminate called" not in proc.err, (what, proc.err)
    assert proc.returncode in (0, 130, 143, -signal.SIGKILL, -signal.SIGTERM), (
        what, proc.returncode, proc.err)
    return what, proc


@pytest.mark.slow
@pytest.mark.posix_only("kills the pack with SIGTERM, SIGKILL or SIGINT")
@pytest.mark.parametrize("kind, options", PACKS, ids=[k for k, _ in PACKS])
def test_packs_killed_at_random_moments_resume_to_the_uninterrupted_pack(script, corpus, kind,
                                                                        options):
    """Seeded: each round kills a pack once or twice (its resumes too), then --resume, from
    another working directory and temporary folder, finishes it; the files are those of a
    pack that was never interrupted."""
    clean = _clean(script, corpus, options, f"clean-{kind}")
    rng = random.Random(f"resume-{kind}")
    for round_ in range(6):
        folder = corpus / f"{kind}-{round_}"
        folder.mkdir()
        shutil.copy(corpus / "job.lst", folder / "job.lst")
        cmd = _cmd(script, folder / "job", corpus / "img", options)
        history = []
        for attempt in range(rng.randint(1, 2)):
            what, proc = _interrupt(rng, cmd + (["--resume"] if attempt else []), folder, kind)
            history.append(what)
            _no_half_published_set(folder, "job")
        other = corpus / f"elsewhere-{kind}-{round_}"
        (other / "tmp").mkdir(parents=True)
        env = dict(os.environ, TMPDIR=str(other / "tmp"), RECIO_STAGING_DIR=str(other / "tmp"))
        relative = _cmd(script, os.path.relpath(folder / "job", other),
                        os.path.relpath(corpus / "img", other), options)
        done = subprocess.run(relative + ["--resume"], capture_output=True, text=True,
                              timeout=120, cwd=other, env=env)
        assert done.returncode == 0, (history, done.stderr)
        assert_same_files(folder, clean, "job")
        assert not os.listdir(other / "tmp"), history


@pytest.mark.slow
@pytest.mark.posix_only("kills the pack with SIGKILL")
@pytest.mark.parametrize("options", [["--num-shards", "2"], ["--shard-size", "40KB"]],
                         ids=["shards", "sized"])
def test_a_shard_pack_killed_every_few_seconds_still_finishes(script, tmp_path, options):
    """Issue 40: a pack in parts killed (SIGKILL) 0.5 to 3 s after each start, again and again,
    as a preempted cluster job is, finishes, and its files are byte for byte an uninterrupted
    pack's. Each part needs more than 3 s of work (the images are read slowly), so a resume
    that started the unfinished part over would never finish: each resume goes on from the
    part's journal instead."""
    make_corpus(tmp_path, n=60, missing=(5,), bad_lines=(7,))
    args = [*options, "--num-thread", "1"]
    clean = clean_pack(tmp_path, "clean",
                       lambda prefix: _cmd(script, prefix, tmp_path / "img", args))
    folder = tmp_path / "killed"
    folder.mkdir()
    shutil.copy(tmp_path / "job.lst", folder / "job.lst")
    env = hook_env(tmp_path, slow=0.1)  # 0.1 s an image: 3 s of work in each of two shards
    rng = random.Random(f"killed-every-few-seconds-{options[0]}")
    kills, history = 0, []
    for run in range(150):
        cmd = _cmd(script, folder / "job", tmp_path / "img", args) + (["--resume"] if run else [])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        delay = rng.uniform(0.5, 3.0)
        try:
            proc.wait(delay)
        except subprocess.TimeoutExpired:
            proc.kill()
            kills += 1
        out, err = finish(proc)
        history.append((round(delay, 2), proc.returncode))
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL and "Traceback" not in err, (history, err)
        _no_half_published_set(folder, "job")
    else:
        pytest.fail(f"still not finished after {len(history)} runs killed 0.5-3 s after their "
                    f"start: {history}")
    assert kills >= 3, history  # killed mid-pack, again and again
    assert_same_files(folder, clean, "job")


@pytest.mark.posix_only("kills the pack with SIGTERM, SIGKILL or SIGINT")
def test_an_unsharded_pack_in_parts_resumes_to_pack_lists_bytes(script, corpus, s3):
    """A URL ROOT packs an unsharded list in parts joined into job.rec/.idx: killed while
    joining, resumed, it is byte for byte the plain local pack."""
    server, bucket = s3
    for name in os.listdir(corpus / "img"):
        server.put(f"{bucket}/img/{name}", (corpus / "img" / name).read_bytes())
    clean = _clean(script, corpus, [])
    cmd = _cmd(script, corpus / "job", f"{bucket}/img", [])
    for at in ("recio.image.packing.shards:_join:1:KILL",
               "recio.records.atomic:AtomicFile.publish:2:TERM"):
        proc = _run_killed(cmd + ["--resume"], hook_env(corpus, kill_at=at), None, None)
        assert proc.returncode in (-signal.SIGKILL, 143), proc.err
        assert (corpus / ".recio-pack-job" / "job.json").exists()
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 parts kept" in done.stdout
    for suffix in (".rec", ".idx"):
        assert (corpus / f"job{suffix}").read_bytes() == (clean / f"job{suffix}").read_bytes()
    rows = [(corpus / f"{d}job.errors.tsv").read_text().splitlines()
            for d in ("", "clean/")]
    assert [r.split("\t")[:3] for r in rows[0]] == [r.split("\t")[:3] for r in rows[1]]
    assert not [n for n in os.listdir(corpus) if n.startswith(".") or n.endswith(".lock")]


@pytest.mark.posix_only("kills the pack with SIGTERM, SIGKILL or SIGINT")
def test_bucket_packs_killed_at_random_resume_from_another_machine(script, corpus, s3):
    """PREFIX in the bucket: the progress lives in the bucket (nothing in this machine's
    temporary folder is needed), so a resume from another working directory with a fresh
    temporary folder finishes the set; the objects equal a local uninterrupted pack's."""
    server, bucket = s3
    options = ["--num-shards", "4", "--checksums"]
    clean = _clean(script, corpus, options)
    rng = random.Random("bucket")
    for round_ in range(4):
        prefix = f"{bucket}/r{round_}/job"
        server.put(prefix + ".lst", (corpus / "job.lst").read_bytes())
        first = corpus / f"machine-a-{round_}"
        (first / "tmp").mkdir(parents=True)
        env = dict(os.environ, TMPDIR=str(first / "tmp"), RECIO_STAGING_DIR=str(first / "tmp"))
        cmd = _cmd(script, prefix, corpus / "img", options)
        history = [_interrupt(rng, cmd, first, "shards", base_env=env)[0]]
        if f"r{round_}/job.manifest.json" in server.keys(bucket):  # published: it verifies
            assert verify_manifest(prefix + ".manifest.json", deep=True).clean, history
        shutil.rmtree(first)  # "machine A" is gone
        second = corpus / f"machine-b-{round_}"
        (second / "tmp").mkdir(parents=True)
        env = dict(os.environ, TMPDIR=str(second / "tmp"), RECIO_STAGING_DIR=str(second / "tmp"))
        done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120,
                              cwd=second, env=env)
        assert done.returncode == 0, (history, done.stderr)
        assert_bucket_set(server, f"{bucket}/r{round_}", clean, corpus / f"got-{round_}")
        assert not os.listdir(second / "tmp")


# -- what resume keeps and refuses -----------------------------------------------------------
def test_resume_keeps_only_the_parts_whose_checksums_verify(corpus):
    lst = corpus / "job.lst"
    options = ImageOptions(resize=24)
    with pytest.raises(RecordIOError, match=r"shard 3 \(list lines .*\) failed"):
        pack_shards(lst, corpus / "img", PackSettings(options, num_shards=4),
                    fault=Fault("error", 3, always=True))
    staged = corpus / ".recio-pack-job"
    done = sorted(n for n in os.listdir(staged) if n.startswith("part-") and
                  n.endswith(".json"))
    assert done == ["part-00000.json", "part-00001.json", "part-00002.json"]
    (damaged,) = staged.glob("part-00001.*.rec")
    with open(damaged, "r+b") as f:  # a part done, damaged meanwhile
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    (staged / "part-00003.zombie.rec.partial").write_bytes(b"left by a killed attempt")
    result = pack_shards(lst, corpus / "img", PackSettings(options, num_shards=4, resume=True))
    assert (result.parts, result.parts_kept) == (4, 2)  # parts 0 and 2; 1 packed again
    clean = corpus / "clean"
    clean.mkdir()
    shutil.copy(lst, clean / "job.lst")
    pack_shards(clean / "job.lst", corpus / "img", PackSettings(options, num_shards=4))
    assert_same_files(corpus, clean, "job")


@pytest.mark.slow
def test_resume_refuses_other_settings_and_a_changed_list(script, corpus):
    lst = corpus / "job.lst"
    with pytest.raises(RecordIOError, match=r"shard 2 \(list lines .*\) failed"):
        pack_shards(lst, corpus / "img", PackSettings(ImageOptions(resize=24), num_shards=4),
                    fault=Fault("error", 2, always=True))
    prefix, root = corpus / "job", corpus / "img"
    for extra, says, started in [
            (["--resize", "30", "--num-shards", "4"], "--resize was 24, now 30", "--resize 24"),
            (["--resize", "24", "--num-shards", "5"], "--num-shards was 4, now 5",
             "--num-shards 4"),
            (["--resize", "24"], "--num-shards was 4, now not given", "--num-shards 4"),
            (["--resize", "24", "--num-shards", "4", "--checksums"],
             "--checksums was not given, now given", "without --checksums"),
            (["--resize", "20", "--num-shards", "4", "--quality", "90", "--color", "0"],
             "--color was 1, now 0; --resize was 24, now 20; --quality was 95, now 90",
             "--color 1, --resize 24, --quality 95")]:
        proc = subprocess.run([*script("im2rec"), str(prefix), str(root), *extra, "--resume"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (extra, proc.stderr)
        assert f"{lst}: the interrupted pack used other settings: {says}; resume it as it was " \
               f"started ({started}), or start over with --force (which deletes " \
               ".recio-pack-job)" in proc.stderr, (extra, proc.stderr)
    with open(lst, "a") as f:
        f.write("99\t1\t0.jpg\n")
    proc = subprocess.run([*script("im2rec"), str(prefix), str(root), "--resize", "24",
                           "--num-shards", "4", "--resume"], capture_output=True, text=True)
    assert proc.returncode == 2 and "the list changed since: " in proc.stderr
    assert "start over with --force" in proc.stderr and "resume it as" not in proc.stderr
    forced = subprocess.run([*script("im2rec"), str(prefix), str(root), "--resize", "24",
                             "--num-shards", "4", "--force"], capture_output=True, text=True)
    assert forced.returncode == 0, forced.stderr
    assert load_manifest(corpus / "job.manifest.json").records == 39
    again = subprocess.run([*script("im2rec"), str(prefix), str(root), "--resize", "24",
                            "--num-shards", "4", "--resume"], capture_output=True, text=True)
    assert again.returncode == 0 and "already packed (" in again.stdout


@pytest.mark.slow
@pytest.mark.posix_only("kills the pack with SIGTERM, SIGKILL or SIGINT")
def test_a_new_pack_over_an_interrupted_one_is_refused_not_discarded(script, corpus):
    """Plain and in parts: without --resume the progress is refused in one line that says
    --resume or --force; --force starts over; nothing is lost unasked."""
    prefix, root = str(corpus / "job"), str(corpus / "img")
    plain = [*script("im2rec"), prefix, root, "--resize", "24"]
    at = "recio.image.packing.worker:_read_image_file:20:INT"
    proc = _run_killed(plain, hook_env(corpus, kill_at=at), None, None)
    assert proc.returncode == 130
    partial = [open(p, "rb").read() for p in PackPaths.of(corpus / "job.lst").partial]
    again = subprocess.run(plain, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert again.stderr.count("\n") == 1
    assert "job.rec.partial and job.pack.journal" in again.stderr
    assert "continue it with --resume, or start over with --force" in again.stderr
    assert [open(p, "rb").read() for p in PackPaths.of(corpus / "job.lst").partial] == partial
    # a pack in parts of the same list is refused too (it would not continue the journal)
    parts = subprocess.run(plain + ["--num-shards", "2", "--resume"], capture_output=True,
                           text=True, timeout=60)
    assert parts.returncode == 2 and "the way it was started" in parts.stderr
    forced = subprocess.run(plain + ["--force"], capture_output=True, text=True, timeout=60)
    assert forced.returncode == 0 and "resumed" not in forced.stdout, forced.stderr
    assert not any(os.path.exists(p) for p in PackPaths.of(corpus / "job.lst").partial)
    # an interrupted pack in parts: refused by a plain pack and by one in parts
    os.unlink(corpus / "job.rec")
    os.unlink(corpus / "job.idx")
    sharded = plain + ["--num-shards", "4"]
    proc = _run_killed(sharded, hook_env(corpus, kill_at=at), None, None)
    assert proc.returncode == 130
    for cmd in (sharded, plain):
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert again.returncode == 2 and "interrupted pack of this list" in again.stderr
        assert "--resume" in again.stderr and "--force" in again.stderr
    assert (corpus / ".recio-pack-job" / "job.json").exists()
    with pytest.raises(InterruptedPackError):
        pack_list(corpus / "job.lst", root)
    done = subprocess.run(sharded + ["--resume"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# -- one live pack per outputs --------------------------------------------------------------
def _wait_for(path, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("options", [[], ["--num-shards", "3"]], ids=["plain", "shards"])
def test_a_second_pack_of_the_same_prefix_is_refused_at_once_naming_the_first(
        script, corpus, options):
    """A job launched twice: the second stops at once, in one line naming the first (its pid
    and command); the first is undisturbed and writes the same files as a pack alone."""
    prefix, root = corpus / "job", corpus / "img"
    cmd = _cmd(script, prefix, root, options)
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=hook_env(corpus, slow=0.1))
    try:
        _wait_for(corpus / ("job.pack.journal" if not options else ".recio-pack-job/job.json"),
                  first)
        started = time.monotonic()
        for extra in ([], ["--resume"], ["--force"]):
            second = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=60)
            assert second.returncode == 2, second.stderr
            assert second.stderr.startswith(f"Error: {corpus / 'job.pack.lock'}: another pack "
                                            f"is writing these outputs (pid {first.pid} on "
                                            f"{HOST}, since ")
            assert "im2rec" in second.stderr and second.stderr.count("\n") == 1
        assert time.monotonic() - started < 30  # no waiting for the first to end
    finally:
        out, err = finish(first)
    assert first.returncode == 0, err
    clean = _clean(script, corpus, options)
    assert_same_files(corpus, clean, "job")


@pytest.mark.slow
@pytest.mark.posix_only("kills the pack with SIGTERM, SIGKILL or SIGINT")
def test_a_killed_pack_never_leaves_its_lock_stuck(script, corpus):
    cmd = _cmd(script, corpus / "job", corpus / "img", ["--num-shards", "3"])
    proc = _run_killed(cmd, hook_env(corpus, kill_at="recio.image.packing.worker:_read_image_file:"
                                     "18:KILL"), None, None)
    assert proc.returncode == -signal.SIGKILL
    holder = json.loads((corpus / "job.pack.lock").read_text())
    assert holder["pid"] == proc.pid and holder["host"] == HOST
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (corpus / "job.pack.lock").exists()


def _children(pid):
    """The pids of ``pid``'s child processes (Linux's /proc)."""
    found = set()
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        found.update(int(c) for c in (task / "children").read_text().split())
    return found


@pytest.mark.slow
@pytest.mark.linux_only("PR_SET_PDEATHSIG is Linux's; the workers are found in /proc")
def test_worker_processes_end_with_a_pack_killed_by_sigkill(script, corpus):
    """SIGKILL gives the parent no chance to stop its worker processes: they end with it
    (quietly, so nothing but the shell's word reaches the terminal), and --resume finishes."""
    cmd = _cmd(script, corpus / "job", corpus / "img", ["--num-thread", "2",
                                                        "--executor", "process"])
    ready = corpus / "ready"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=hook_env(corpus, slow=0.2, ready=ready))
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        workers = _children(proc.pid)
        assert len(workers) >= 2, workers  # the pool's processes (and its resource tracker)
        proc.kill()
        out, err = finish(proc, timeout=30)  # the workers would hold stderr open
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{w}") for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [w for w in workers if os.path.exists(f"/proc/{w}")
            and "Z" not in pathlib.Path(f"/proc/{w}/stat").read_text().split()[2]]
    assert not left, left
    assert "Traceback" not in err, err
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_file_lock_and_its_fallback(tmp_path, monkeypatch):
    path = tmp_path / "x.pack.lock"
    with OutputLock(path) as held:
        with pytest.raises(OutputBusyError, match=f"pid {os.getpid()} on "):
            OutputLock(path).acquire()  # another open file: flock refuses it too
        assert json.loads(path.read_text())["token"] == held.info["token"]
    assert not path.exists()
    monkeypatch.setattr(portable, "has_file_locks", lambda: False)  # a system without flock
    with OutputLock(path):
        with pytest.raises(OutputBusyError, match="another pack is writing these outputs"):
            OutputLock(path).acquire()
    assert not path.exists()
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    path.write_text(json.dumps({"pid": gone.pid, "host": HOST, "since": "then"}))
    with OutputLock(path) as taken:  # its holder is gone: taken over
        assert json.loads(path.read_text())["token"] == taken.info["token"]
    live = os.getppid()  # the test run's parent: alive (Windows has no pid 1, init)
    path.write_text(json.dumps({"pid": live, "host": HOST, "since": "then", "command": "init"}))
    with pytest.raises(OutputBusyError, match=f"pid {live} on "):  # a live process: refused
        OutputLock(path).acquire()


@pytest.mark.posix_only("fcntl.flock is POSIX's (Windows always takes the fallback)")
def test_a_file_system_that_refuses_flock_gets_the_fallback(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(fcntl, "flock", no_flock)
    path = tmp_path / "x.pack.lock"
    with OutputLock(path) as held:
        assert held._exclusive and json.loads(path.read_text())["pid"] == os.getpid()
        with pytest.raises(OutputBusyError, match=f"pid {os.getpid()} on "):
            OutputLock(path).acquire()
    assert not path.exists()


def test_only_the_temporary_files_of_dead_writers_are_removed(tmp_path):
    from recio.records.atomic import remove_orphaned_temps

    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    names = [f".job.idx.{gone.pid}.0123abcd.tmp", f".job-00003.rec.{gone.pid}.89abcdef.tmp",
             f".job.idx.{os.getpid()}.0123abcd.tmp", f".jobs.idx.{gone.pid}.0123abcd.tmp",
             "job.rec", f"job.idx.{gone.pid}.0123abcd.tmp"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    removed = remove_orphaned_temps(tmp_path / "job")
    assert sorted(os.path.basename(p) for p in removed) == sorted(names[:2])
    assert sorted(os.listdir(tmp_path)) == sorted(names[2:])


def test_the_lease_in_a_bucket(s3, monkeypatch):
    server, bucket = s3
    url = f"{bucket}/sets/job.pack.lock"
    monkeypatch.setattr(lock_module, "SETTLE_SECONDS", 0.2)
    with OutputLock(url) as held:
        assert json.loads(server.get(url))["token"] == held.info["token"]
        with pytest.raises(OutputBusyError, match=f"pid {os.getpid()} on .*expires after"):
            OutputLock(url).acquire()
    assert server.keys(bucket) == []
    now = time.time()
    for holder, taken in [({"pid": 1, "host": "elsewhere", "renewed": now}, False),
                          ({"pid": 1, "host": "elsewhere", "renewed": now - 600}, True),
                          ({"pid": 2 ** 22 + 7, "host": HOST, "renewed": now}, True)]:
        server.put(url, json.dumps(holder).encode())
        if taken:
            with OutputLock(url):
                pass
        else:
            with pytest.raises(OutputBusyError, match="on elsewhere"):
                OutputLock(url).acquire()
    # two packs starting together: exactly one keeps the lease
    server.client().delete_object(Bucket=bucket[5:], Key="sets/job.pack.lock")
    outcomes = []

    def take():
        try:
            lock = OutputLock(url).acquire()
            outcomes.append(lock)
        except OutputBusyError as exc:
            outcomes.append(exc)
    threads = [threading.Thread(target=take) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if isinstance(o, OutputLock)]
    assert len(winners) == 1 and len(outcomes) == 3
    # a lease another pack took over (renewals failed meanwhile) is noticed before publishing
    monkeypatch.setattr(lock_module, "RENEW_SECONDS", 0.1)
    winner = winners[0]
    winner.release()
    with OutputLock(url) as held:
        server.put(url, json.dumps({"pid": 9, "host": "other", "token": "theirs",
                                    "renewed": time.time()}).encode())
        deadline = time.monotonic() + 10
        while held.lost is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(OutputBusyError, match="took over"):
            held.check()
    assert json.loads(server.get(url))["token"] == "theirs"  # not ours to delete


def test_a_second_pack_into_a_bucket_is_refused_while_the_first_runs(script, corpus, s3):
    server, bucket = s3
    prefix = f"{bucket}/sets/job"
    server.put(prefix + ".lst", (corpus / "job.lst").read_bytes())
    cmd = _cmd(script, prefix, corpus / "img", ["--num-shards", "3"])
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=hook_env(corpus, slow=0.1))
    try:
        deadline = time.monotonic() + 60
        while "sets/.recio-pack-job/job.json" not in server.keys(bucket):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert f"{prefix}.pack.lock: another pack is writing these outputs (pid {first.pid}" \
            in second.stderr
    finally:
        out, err = finish(first)
    assert first.returncode == 0, err
    assert sorted(k for k in server.keys(bucket) if not k.startswith("sets/job-")) == \
        ["sets/job.combined.idx", "sets/job.errors.tsv", "sets/job.lst",
         "sets/job.manifest.json"]
