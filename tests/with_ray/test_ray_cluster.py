"""im2rec --engine ray on a real multi-node Ray cluster on this machine: a worker node lost
mid-pack, the driver killed (SIGTERM, SIGKILL) and --resume, each against the local engine byte
for byte.

The cluster is made as an administrator makes one: ``ray start --head`` (0 CPUs, so every task
runs on a worker node) and two worker nodes ``ray start --address ... --num-cpus 1``, each in its
own process group, with ports of their own and this module's own ``--temp-dir``; it is stopped
by killing those process groups (never ``ray stop``, which would stop every Ray instance on the
machine). A node is lost the hard way: every process of it killed at once (SIGKILL), while one
of the pack's tasks runs there. Ray replaces ``127.0.0.1`` by this machine's own address, which
the kernel routes over the loopback device: nothing leaves the machine. Token authentication is
off for the cluster and its drivers alike (``RAY_AUTH_MODE=disabled``), whatever
``~/.ray/auth_token`` holds. The nodes' workers slow each image down (``RECIO_TEST_SLOW``,
``support.hook_env``) so that the tasks last long enough to be interrupted.
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import SIGKILL, as_in_a_terminal

from support import (
    assert_bucket_set,
    assert_same_files,
    clean_pack,
    finish,
    hook_env,
    make_corpus,
)

pytestmark = [pytest.mark.needs("ray"), pytest.mark.linux_only(
    "multi-node Ray clusters run on Linux; a node's processes are found in /proc")]

RAY = os.path.join(os.path.dirname(sys.executable), "ray")
#: every image read by the nodes' workers takes this long (so tasks last ~1 s)
SLOW = 0.12
#: options of every pack here
OPTIONS = ["--resize", "24", "--pack-label", "--checksums"]


_TAKEN = set()


def _free_port():
    """A port free now and not handed out before by this module (Ray refuses a port given to
    two of its components)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _TAKEN:
            _TAKEN.add(port)
            return port


def _processes_of(group):
    """The pids of the processes in process group ``group`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group:
                found.append(int(entry))
    return found


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Cluster:
    """A head node and worker nodes started with ``ray start`` (see the module docstring)."""

    def __init__(self, env):
        self.temp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths
        self.env = dict(env, RAY_AUTH_MODE="disabled", RAY_ADDRESS="",
                        RAY_health_check_period_ms="1000",
                        RAY_health_check_failure_threshold="3",
                        RAY_health_check_timeout_ms="1000")
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes = {}  # name -> (process, node manager port)
        self._start("head", ["--head", "--port", str(self.port), "--num-cpus", "0",
                             "--include-dashboard", "false",
                             "--dashboard-port", str(_free_port()),
                             "--ray-client-server-port", str(_free_port()),
                             "--temp-dir", self.temp])

    def _start(self, name, args):
        manager = _free_port()
        # the workers' ports below Linux's ephemeral range (32768-60999), where the OS hands
        # out the ports other Ray components bind at random (a clash failed a node's start)
        low = 20000 + (_free_port() % 120) * 100
        log = open(os.path.join(self.temp, f"{name}.log"), "w")
        proc = subprocess.Popen(
            [RAY, "start", *args, "--block", "--disable-usage-stats",
             "--node-manager-port", str(manager), "--object-manager-port", str(_free_port()),
             "--runtime-env-agent-port", str(_free_port()),
             "--dashboard-agent-listen-port", str(_free_port()),
             "--dashboard-agent-grpc-port", str(_free_port()),
             "--metrics-export-port", str(_free_port()),
             "--min-worker-port", str(low), "--max-worker-port", str(low + 99),
             "--object-store-memory", str(150 << 20)],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.nodes[name] = (proc, manager)
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in open(log.name).read():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start ({name}) failed:\n" + open(log.name).read())
            time.sleep(0.2)

    def add_worker(self):
        name = f"worker{len(self.nodes)}"
        self._start(name, ["--address", self.address, "--num-cpus", "1"])
        return name

    def workers(self):
        return [n for n, (p, _) in self.nodes.items() if n != "head" and p.poll() is None]

    def node_id(self, name):
        """The Ray node id of node ``name`` (its raylet's ``--node_id``)."""
        proc, _ = self.nodes[name]
        for pid in _processes_of(proc.pid):
            line = _cmdline(pid)
            if "raylet" in line and "--node_id=" in line:
                return line.split("--node_id=", 1)[1].split()[0]
        raise AssertionError(f"no raylet for {name}")

    def kill(self, name):
        """Lose node ``name``: every one of its processes killed at once."""
        proc, manager = self.nodes[name]
        victims = set(_processes_of(proc.pid))
        victims |= {int(p) for p in os.listdir("/proc") if p.isdigit()
                    and f"--node-manager-port={manager}" in _cmdline(p)}
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(30)

    def stop(self):
        for name in list(self.nodes):
            try:
                self.kill(name)
            except Exception:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory):
    """A head and two 1-CPU worker nodes (started after the S3 server: the nodes' workers
    reach it through the environment they inherit)."""
    env = hook_env(tmp_path_factory.mktemp("nodes"), slow=SLOW)
    made = Cluster(env)
    try:
        made.add_worker()
        made.add_worker()
        yield made
    finally:
        made.stop()


@pytest.fixture
def two_workers(cluster):
    """The cluster with two live worker nodes (a test before may have lost one)."""
    while len(cluster.workers()) < 2:
        cluster.add_worker()
    return cluster


@pytest.fixture
def corpus(tmp_path):
    make_corpus(tmp_path, n=40, missing=(3, 17), bad_lines=(9,))
    return tmp_path


def _im2rec(script, prefix, root, shards, *extra):
    return [*script("im2rec"), str(prefix), str(root), *OPTIONS, "--num-shards", str(shards),
            *extra]


def _local_pack(script, corpus, shards):
    return clean_pack(corpus, "clean",
                      lambda prefix: _im2rec(script, prefix, corpus / "img", shards))


def _driver(script, cluster, prefix, root, shards, *extra, cwd=None):
    """``im2rec --engine ray`` on ``cluster`` in its own process (a user's terminal)."""
    return subprocess.Popen(
        _im2rec(script, prefix, root, shards, "--engine", "ray", "--ray-address",
                cluster.address, *extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        env=dict(os.environ, RAY_AUTH_MODE="disabled", RAY_ADDRESS=""),
        preexec_fn=as_in_a_terminal)


def _attempts(staging):
    """``{part: [where each attempt ran]}`` from the attempt records in the staging folder."""
    found = {}
    for path in glob.glob(os.path.join(staging, "part-*.attempt*")):
        try:
            doc = json.loads(open(path).read())
        except (OSError, ValueError):
            continue
        found.setdefault(int(os.path.basename(path)[5:10]), []).append(doc["where"])
    return found


def _done(staging):
    return {int(os.path.basename(p)[5:10]) for p in
            glob.glob(os.path.join(staging, "part-*.json"))}


def _wait(condition, proc, timeout=120, what="the pack to get there"):
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"the driver ended before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_worker_node_lost_mid_pack_is_retried_and_the_time_lost_reported(script,
                                                                           two_workers,
                                                                           corpus):
    """Node A dies (every process of it, SIGKILL) while it runs a part: Ray runs the lost part
    again on node B, the set equals the local engine's byte for byte, and the driver says how
    many parts ran again and the time that cost."""
    cluster = two_workers
    clean = _local_pack(script, corpus, 6)
    victim = cluster.workers()[0]
    node = "node " + cluster.node_id(victim)[:12]
    staging = str(corpus / ".recio-pack-job")
    proc = _driver(script, cluster, corpus / "job", corpus / "img", 6, "--json")
    try:
        lost = _wait(lambda: [n for n, where in _attempts(staging).items()
                              if node in where and n not in _done(staging)], proc,
                     what="a part running on the victim node")
        cluster.kill(victim)
    finally:
        out, err = finish(proc, timeout=300)
    assert proc.returncode == 0, err
    report = json.loads(out)["lists"][0]  # stdout is only the JSON (Ray's notes: stderr)
    assert report["retried"] >= len(lost) >= 1 and report["seconds_lost"] > 0, report
    assert (report["packed"], report["skipped"], report["parts"]) == (38, 3, 6)
    # Ray's own note of the retry, worded by Ray 2.60 ("the node it was running on is dead")
    # and by 2.51, the last for Python 3.9 ("the node (where this task was running)  was dead")
    assert re.search(r"node it was running on is dead|node \(where this task was running\)\s+"
                     r"was dead", err), err
    assert not os.path.exists(staging)  # deleted once the set is published
    assert_same_files(corpus, clean, "job")


@pytest.mark.parametrize("sig", [signal.SIGTERM, SIGKILL], ids=["sigterm", "sigkill"])
def test_a_killed_driver_resumes_on_the_cluster(script, two_workers, corpus, sig):
    """The driver killed once a part is done (its tasks die with it); --resume, from another
    working directory, keeps the done parts and finishes the set as the local engine."""
    cluster = two_workers
    clean = _local_pack(script, corpus, 6)
    staging = str(corpus / ".recio-pack-job")
    proc = _driver(script, cluster, corpus / "job", corpus / "img", 6)
    try:
        _wait(lambda: _done(staging), proc, what="a part done")
        proc.send_signal(sig)
    finally:
        out, err = finish(proc)
    if sig == signal.SIGTERM:
        assert proc.returncode == 143 and "Traceback" not in err, err
        assert "rerun with --resume" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert not (corpus / "job.manifest.json").exists()
    elsewhere = corpus / "elsewhere"
    elsewhere.mkdir()
    resumed = _driver(script, cluster, os.path.relpath(corpus / "job", elsewhere),
                      os.path.relpath(corpus / "img", elsewhere), 6, "--resume", cwd=elsewhere)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert "parts kept" in out
    assert_same_files(corpus, clean, "job")


def test_drivers_killed_at_random_moments_then_resumed(script, two_workers, corpus, s3):
    """Seeded random kills of the driver (SIGTERM or SIGKILL, at any moment) of a pack into
    the bucket, then --resume on the same cluster: the bucket holds the local pack's bytes."""
    server, bucket = s3
    cluster = two_workers
    clean = _local_pack(script, corpus, 5)
    rng = random.Random("ray-driver")
    for round_ in range(3):
        prefix = f"{bucket}/r{round_}/job"
        server.put(prefix + ".lst", (corpus / "job.lst").read_bytes())
        history = []
        for attempt in range(rng.randint(1, 2)):
            sig = rng.choice([signal.SIGTERM, signal.SIGKILL])
            delay = rng.uniform(3.0, 12.0)  # the driver starts in ~4 s, packs in ~5 s
            proc = _driver(script, cluster, prefix, corpus / "img", 5,
                           *(["--resume"] if attempt else []))
            try:
                proc.wait(delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(sig)
            out, err = finish(proc)
            history.append((sig, round(delay, 2), proc.returncode))
            assert "Traceback" not in err, (history, err)
        done = _driver(script, cluster, prefix, corpus / "img", 5, "--resume")
        out, err = done.communicate(timeout=300)
        assert done.returncode == 0, (history, err)
        assert_bucket_set(server, f"{bucket}/r{round_}", clean, corpus / f"got-{round_}")
