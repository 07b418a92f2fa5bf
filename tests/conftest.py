"""Shared test helpers: the golden MXNet files, running the commands, and optional dependencies.

Commands run as ``[sys.executable, "-m", "recio", ...]`` (the ``script`` fixture), so a test never
depends on which ``recio`` is first on PATH; tests/meta/test_install.py checks the console scripts.

Optional dependencies (torch, fsspec, Ray) go through ``need("torch")`` or the
``@pytest.mark.needs("torch")`` marker. Outside CI a test needing a missing one is skipped with
the reason (``pytest -rs`` prints it). Under ``CI=true`` (set by ``make test`` and so by .ci/run,
which install the optional dependencies) a skip is reported as a failure, except for a module
that ``RECIO_TEST_WITHOUT`` (comma-separated) says was left out on purpose: ``make test`` sets it
to ``torch`` on a Python for which no torch build is pinned.
"""
import contextlib
import importlib
import importlib.util
import inspect
import os
import pathlib
import re
import shutil
import signal
import sys
from types import ModuleType
from typing import Callable, List, Tuple

import click.testing
import pytest

# RECIO_TEST_REMOVE: run as if on a platform without some of Linux's facilities (see
# tests/simulate/sitecustomize.py); the commands and workers the tests start inherit the mode
SIMULATE = pathlib.Path(__file__).parent / "simulate"
if os.environ.get("RECIO_TEST_REMOVE"):
    sys.path.insert(0, str(SIMULATE))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(SIMULATE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    _spec = importlib.util.spec_from_file_location("recio_simulate", SIMULATE / "sitecustomize.py")
    simulate = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(simulate)  # applies the mode (once per process)

from recio.optional import install_hint  # noqa: E402 - once the simulation above is applied

GOLDEN = pathlib.Path(__file__).parent / "data" / "golden"

# gcsfs's experimental bucket-type probe speaks gRPC over TLS, which the local GCS emulator of
# tests/storage/test_remote.py does not (each probe would wait 60 s before falling back); read once,
# when gcsfs is first imported
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

#: True when the suite runs in CI, where every optional dependency is installed.
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
#: optional dependencies left out on purpose: their tests skip even under CI=true
LEFT_OUT = {n.strip() for n in os.environ.get("RECIO_TEST_WITHOUT", "").split(",") if n.strip()}
#: how the skip reason of such a test starts (the CI hook lets these skips through)
LEFT_OUT_REASON = "left out on purpose (RECIO_TEST_WITHOUT)"
#: what this run took away (RECIO_TEST_REMOVE, see tests/simulate/sitecustomize.py); a test
#: marked ``needs_facility(item)`` checks what one of them gives, so it is skipped without it
REMOVED = frozenset(getattr(os, "_recio_removed", ()))
#: how the skip reason of such a test starts (the CI hook lets these skips through)
REMOVED_REASON = "left out on purpose (RECIO_TEST_REMOVE)"
#: how the skip reason of a GPU-only check starts on a machine without a CUDA device (CI's and
#: the developers' have none): the CPU half of such a feature is tested everywhere, the GPU
#: half where there is a device; the CI hook lets these skips through too
NO_CUDA_REASON = "left out on purpose (no CUDA device here)"

#: command name -> the module that ``python -m`` runs for it
COMMANDS = {"recio": "recio", "im2rec": "recio.im2rec"}


@pytest.fixture(scope="session")
def golden() -> pathlib.Path:
    """Folder of files written by the real MXNet 1.9.1 (never edit them)."""
    return GOLDEN


def command(name: str) -> List[str]:
    """The argv prefix that runs command ``name`` (``recio`` or ``im2rec``) with the interpreter
    running the tests: ``[sys.executable, "-m", "recio"]``. Independent of PATH."""
    return [sys.executable, "-m", COMMANDS[name]]


@pytest.fixture
def script() -> Callable[[str], List[str]]:
    """``[*script("recio"), "inspect", path]`` -> the argv that runs the ``recio`` command."""
    return command


def as_in_a_terminal() -> None:
    """``preexec_fn`` for a command a test interrupts with SIGINT: Ctrl-C's default action, as in
    a terminal, even when the test run itself was started in the background (where a shell
    ignores SIGINT, and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# -- optional dependencies ------------------------------------------------------------------------

def skip_or_fail(reason: str) -> None:
    """Skip with ``reason`` (shown by ``pytest -rs``); under CI=true fail with it instead."""
    if CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def need(name: str) -> ModuleType:
    """Import optional dependency ``name`` for a test: the module, or skip (fail under CI=true)
    saying what to install. An import that fails for another reason (a broken install) is
    reported the same way, with the original error."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        error = exc
    if name in LEFT_OUT:
        pytest.skip(f"{LEFT_OUT_REASON}: {name} is not installed ({error})")
    skip_or_fail(f"{name} cannot be imported ({error}): {install_hint(name)}")


def need_cuda() -> ModuleType:
    """torch with a CUDA device for a GPU-only check: torch, or a skip with NO_CUDA_REASON
    (allowed under CI=true) when there is no device. A machine with a device runs the check."""
    torch = need("torch")
    if not torch.cuda.is_available():
        pytest.skip(f"{NO_CUDA_REASON}: torch.cuda.is_available() is False")
    return torch


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(module, ...): the test needs these optional "
                                       "dependencies (skip outside CI, fail under CI=true)")
    config.addinivalue_line("markers", "needs_facility(item, ...): the test checks what these "
                                       "RECIO_TEST_REMOVE items give (none named: every one); "
                                       "skipped in a run that removed one")
    config.addinivalue_line("markers", "slow: needs a cluster (Ray), a server (moto's S3, the GCS "
                                       "emulator), spawned workers, packs in subprocesses or "
                                       "otherwise takes seconds; `make test-fast` (-m 'not slow') "
                                       "leaves it out, `make test` runs it (is_slow() below marks "
                                       "some itself)")
    for name, (_, where) in PLATFORM_MARKS.items():
        config.addinivalue_line("markers", f"{name}(reason): the test can only run on {where} "
                                           "(elsewhere a skip with the reason, allowed under CI)")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        for name in mark.args:
            need(name)
    for mark in item.iter_markers("needs_facility"):
        gone = sorted(REMOVED & set(mark.args)) if mark.args else sorted(REMOVED)
        if gone:
            pytest.skip(f"{REMOVED_REASON}: it checks the behaviour of {', '.join(gone)}, "
                        "which this run removed; tests/portable/test_portable.py checks the "
                        "fallback")


def _fail_skips_under_ci(report) -> None:
    """Under CI=true a skip (from any source: a skipif marker, importorskip) becomes a failure
    that names the skipped test and the reason, so CI never passes a test it did not run."""
    if CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        if str(reason).startswith(tuple(prefix + why for prefix in ("Skipped: ", "")
                                        for why in (LEFT_OUT_REASON, NO_CUDA_REASON,
                                                    REMOVED_REASON, *PLATFORM_REASONS))):
            return
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (where nothing may be skipped): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and \
            pathlib.Path(report.longrepr[0]).name == "conftest.py":
        # a skip raised by need() here: report it at the test, so -rs says which test skipped
        path, line = item.reportinfo()[:2]
        report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
    _fail_skips_under_ci(report)
    if report.when == "call":
        item.call_report = report  # for fixtures that judge a test after it ran


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skips_under_ci(outcome.get_result())


# -- the same CliRunner on every supported click --------------------------------------------------

if "mix_stderr" in inspect.signature(click.testing.CliRunner.__init__).parameters:
    # click < 8.2 puts stderr into ``result.stdout`` unless mix_stderr=False; 8.2 keeps them apart
    # and ``result.output`` holds both. The tests assert 8.2's behaviour, so on older click
    # (down to the 8.0 floor) the runner keeps the streams apart and ``output`` joins them.
    _original_init = click.testing.CliRunner.__init__

    def _separate_streams_init(self, *args, mix_stderr=False, **kwargs):
        _original_init(self, *args, mix_stderr=mix_stderr, **kwargs)

    def _both_streams(self) -> str:
        err = self.stderr_bytes.decode(self.runner.charset, "replace") if self.stderr_bytes else ""
        return self.stdout + err

    click.testing.CliRunner.__init__ = _separate_streams_init
    click.testing.Result.output = property(_both_streams)


@pytest.fixture(autouse=True)
def _no_tty_progress(monkeypatch):
    """Progress bars off in tests, whatever the terminal."""
    monkeypatch.setenv("COLUMNS", os.environ.get("COLUMNS", "100"))


@pytest.fixture
def split_files(golden, tmp_path):
    """The three MXNet-written parts of the split golden set, copied with their ``.idx`` files;
    returns the ``.rec`` paths."""
    files = []
    for name in ("part0", "part1", "part2"):
        for ext in (".rec", ".idx"):
            shutil.copy(golden / "split" / (name + ext), tmp_path / (name + ext))
        files.append(str(tmp_path / (name + ".rec")))
    return files


# -- platforms (issue 33) -------------------------------------------------------------------------
# A test that can only run on Linux (it reads /proc, relies on PR_SET_PDEATHSIG) or on a POSIX
# system (it sends SIGKILL or SIGINT to a process, forks, makes FIFOs or symlinks, checks
# permission bits, runs bash) says so: ``@pytest.mark.linux_only("reads /proc/self/fd")``,
# ``@pytest.mark.posix_only("...")``. Elsewhere it is skipped with a reason that starts with
# PLATFORM_REASONS, so ``pytest -rs`` lists it and why, and CI=true lets it through: a declared
# skip, not a silent one. RECIO_TEST_PLATFORM (a ``sys.platform`` value: win32, darwin) makes
# the markers decide as there, so on Linux ``RECIO_TEST_PLATFORM=win32 pytest -rs tests/x.py``
# shows what a Windows run leaves out.

#: marker -> (how its skip reason starts, where the test runs)
PLATFORM_MARKS = {"linux_only": ("left out on purpose (Linux only)", "Linux"),
                  "posix_only": ("left out on purpose (POSIX only)", "Linux and macOS")}
PLATFORM_REASONS = tuple(reason for reason, _ in PLATFORM_MARKS.values())
#: ``signal.SIGKILL``, which Windows lacks: the tests that send it are posix_only, but their
#: parameters are made when the module is collected, on every platform
SIGKILL = getattr(signal, "SIGKILL", 9)


def running_platform() -> str:
    """The ``sys.platform`` the markers decide on (RECIO_TEST_PLATFORM, when set, instead)."""
    return os.environ.get("RECIO_TEST_PLATFORM") or sys.platform


def platform_skip_reason(item) -> str:
    """Why ``item`` cannot run here (its linux_only or posix_only reason), or "" when it can."""
    platform = running_platform()
    runs_here = {"linux_only": platform.startswith("linux"), "posix_only": platform != "win32"}
    for name, (prefix, _) in PLATFORM_MARKS.items():
        for mark in item.iter_markers(name):
            if len(mark.args) != 1 or not isinstance(mark.args[0], str) or mark.kwargs:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name}(reason) takes one "
                                        "string, why the test cannot run elsewhere")
            if not runs_here[name]:
                return f"{prefix}: {mark.args[0]} (here: {platform})"
    return ""


#: fixtures that make a test slow wherever it is: a server in its own process
SLOW_FIXTURES = {"s3_server", "gcs_endpoint"}


def is_slow(item) -> bool:
    """Whether ``make test-fast`` leaves the test out (``-m "not slow"``), besides the tests
    marked ``slow`` by hand: one that needs Ray (a local instance or cluster), starts a local
    server (moto's S3, the GCS emulator), is the spawn variant of the ``start_method`` fixture
    (each spawned worker imports recio, numpy and OpenCV again) or a release check."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return bool(SLOW_FIXTURES.intersection(item.fixturenames)
                or any("ray" in mark.args for mark in item.iter_markers("needs"))
                or (params.get("start_method") == "spawn" and START_METHODS[0] != "spawn")
                or item.get_closest_marker("release"))


def pytest_collection_modifyitems(items):
    for item in items:
        reason = platform_skip_reason(item)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


# -- a local S3 server ----------------------------------------------------------------------------

class S3Server:
    """A real S3 API (moto's server mode) on 127.0.0.1, in its own process, for the remote
    tests: ``endpoint`` is its URL, ``env`` the environment a client (or a command run as a
    subprocess) needs, ``bucket(name)`` makes a bucket and returns ``s3://name``.
    ``requests(since)`` lists the requests the server logged (from every client process)."""

    def __init__(self) -> None:
        import socket
        import subprocess
        import tempfile
        import time
        import urllib.request

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        # delete=False: requests() reopens the log by its name, which Windows refuses for a
        # file NamedTemporaryFile deletes on close; stop() removes it
        self.log = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto's S3 server did not start on 127.0.0.1") from None
                time.sleep(0.1)
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                    "AWS_EC2_METADATA_DISABLED": "true", "NO_PROXY": "127.0.0.1",
                    "no_proxy": "127.0.0.1"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def put(self, url: str, data: bytes, public: bool = False) -> None:
        """Upload ``data`` to ``url``; ``public``: readable over plain HTTP without signing."""
        bucket, _, key = url[len("s3://"):].partition("/")
        extra = {"ACL": "public-read"} if public else {}
        self.client().put_object(Bucket=bucket, Key=key, Body=data, **extra)

    def get(self, url: str) -> bytes:
        bucket, _, key = url[len("s3://"):].partition("/")
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def keys(self, bucket_url: str) -> List[str]:
        bucket = bucket_url[len("s3://"):].strip("/")
        found = self.client().list_objects_v2(Bucket=bucket).get("Contents", [])
        return sorted(o["Key"] for o in found)

    def mark(self) -> int:
        """Where the request log ends now (for ``requests``)."""
        self._settle()
        return os.path.getsize(self.log.name)

    def requests(self, since: int = 0) -> List[Tuple[str, str]]:
        """``(method, path)`` of every request the server logged after ``since`` (a ``mark``),
        in order."""
        self._settle()
        with open(self.log.name, "rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the server colours some lines
        return re.findall(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/', text)

    def _settle(self) -> None:
        """Wait until the log stops growing: the server logs a request after answering it."""
        import time

        size = -1
        while size != os.path.getsize(self.log.name):
            size = os.path.getsize(self.log.name)
            time.sleep(0.3)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except Exception:
            self.process.kill()
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)


@pytest.fixture(scope="session")
def s3_server():
    """The local S3 server (needs moto[server], s3fs and boto3: ``pip install -e '.[dev,remote]'``);
    the process environment points every S3 client at it while the session runs."""
    for name in ("moto.server", "s3fs", "boto3"):
        need(name)
    server = S3Server()
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture
def s3(s3_server, request):
    """A fresh bucket for one test: ``(server, "s3://bucket")``."""
    import re as _re

    name = _re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-")
    name = f"t-{name}-{len(s3_server.client().list_buckets()['Buckets'])}"
    return s3_server, s3_server.bucket(name)


# --- start methods (issue 33) ------------------------------------------------------------------
# Windows and macOS start worker processes with ``spawn`` (a fresh interpreter that imports
# what it needs and unpickles its task), Linux with ``fork`` (a copy of the parent; from Python
# 3.14 ``forkserver``, which pickles the task as spawn does). Code that works forked can fail
# spawned: an object that does not pickle, module state set in the parent, an initialiser that
# assumes the parent's memory. The tests of worker processes (DataLoader workers, im2rec's
# process executor, readers and InputSplit in workers) take the ``start_method`` fixture and so
# run under the platform's default and spawn, in the ordinary ``pytest tests`` run.

import multiprocessing  # noqa: E402  (this section is kept apart from the top of the file)
import multiprocessing.context  # noqa: E402 - as the line above

#: the start methods the tests of worker processes run under: the platform's default (fork on
#: Linux before Python 3.14, forkserver from 3.14, spawn on Windows and macOS, where fork is
#: unsafe) and spawn
START_METHODS = list(dict.fromkeys([multiprocessing.get_start_method(), "spawn"]))


def count_process_starts(monkeypatch) -> List[str]:
    """Record the start method of every process multiprocessing starts from now on (a Pool's,
    a DataLoader's or a plain Process's: all go through their context's ``Process._Popen``)."""
    started: List[str] = []
    for name in ("ForkProcess", "SpawnProcess", "ForkServerProcess"):
        cls = getattr(multiprocessing.context, name, None)
        if cls is None:
            continue

        def counted(process_obj, _popen=cls._Popen, _method=cls._start_method):
            started.append(_method)
            return _popen(process_obj)

        monkeypatch.setattr(cls, "_Popen", staticmethod(counted))
    return started


def start_method_cases(cases, spawn_too):
    """Parameters for a test too slow to run every case spawned (a spawned DataLoader worker
    imports torch again, 1-2 s): every case of ``cases`` under the platform's default method
    and those of ``spawn_too`` under spawn as well (where spawn is the default: every case). Use
    with ``@pytest.mark.parametrize("a, b, start_method", start_method_cases(...),
    indirect=["start_method"])``."""
    first = START_METHODS[0]
    params = [(*case, first) for case in cases]
    if first != "spawn":
        params += [(*case, "spawn") for case in spawn_too]
    return params


@pytest.fixture(params=START_METHODS)
def start_method(request, monkeypatch) -> str:
    """Run the test with multiprocessing's default start method set to one of START_METHODS
    (the test's id says which), as on a platform whose default it is: every Pool, Process and
    DataLoader that does not name its own context uses it. Afterwards the test must have
    started at least one process, every one with this method; otherwise the variant would
    pass without testing what it names (code or a test that picks its own context)."""
    saved = multiprocessing.get_start_method(allow_none=True)
    started = count_process_starts(monkeypatch)
    multiprocessing.set_start_method(request.param, force=True)
    try:
        yield request.param
    finally:
        multiprocessing.set_start_method(saved, force=True)
    call = getattr(request.node, "call_report", None)
    if call is None or not call.passed:  # skipped (say, torch left out) or already failed
        return
    wrong = start_method_mismatch(request.param, started)
    if wrong:
        pytest.fail(wrong, pytrace=False)


def start_method_mismatch(method: str, started: List[str]) -> str:
    """Why a test run under start method ``method`` that started processes with the methods
    ``started`` did not test ``method`` ("" if it did)."""
    if not started:
        return f"the {method} variant started no process: it tests nothing the other does not"
    if set(started) != {method}:
        return (f"the {method} variant started processes with {sorted(set(started))}: "
                f"something chose its own start method")
    return ""
