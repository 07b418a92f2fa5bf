"""Helpers shared by several test modules."""
import hashlib
import json
import os
import pathlib
import signal
import socket
import threading
from contextlib import contextmanager

import numpy as np
from PIL import Image

from recio.records.index import open_index
from recio.records.reader import RecordReader
from recio.records.manifest import load_manifest


@contextmanager
def hang_guard(seconds=30):
    """Fail instead of hanging forever (a generous bound, not a speed test)."""
    def on_alarm(*_):
        raise TimeoutError(f"did not finish within {seconds} s")
    if not hasattr(signal, "SIGALRM"):  # Windows: a timer interrupts the main thread instead
        with _timer_guard(seconds, on_alarm):
            yield
        return
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _timer_guard(seconds, on_timeout):
    """hang_guard without SIGALRM: a timer thread raises KeyboardInterrupt in the main thread
    (``_thread.interrupt_main``), which becomes ``on_timeout``'s TimeoutError here. As with
    SIGALRM, the main thread sees it between bytecodes: a wait that Windows does not let a
    signal interrupt (a lock, a join without timeout) is stopped only when it returns."""
    import _thread
    import threading

    fired = threading.Event()

    def interrupt():
        fired.set()
        _thread.interrupt_main()
    timer = threading.Timer(seconds, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    except KeyboardInterrupt:
        if not fired.is_set():
            raise
        on_timeout()
    finally:
        timer.cancel()


def make_corpus(folder, n=30, missing=(4,), bad_lines=(11,), multi=True):
    """Images 0..n-1 (varied sizes), a list with two labels a line, some images missing and
    some malformed lines; returns the list's path."""
    img = folder / "img"
    img.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    lines = []
    for i in range(n):
        if i not in missing:
            Image.fromarray(rng.integers(0, 255, (20 + i, 30 + 2 * i, 3), dtype=np.uint8)).save(
                img / f"{i}.jpg", quality=90)
        labels = f"{i % 3}.000000\t{i / 2:f}\t" if multi else f"{i % 3}.000000\t"
        lines.append(f"{i}\t{labels}{i}.jpg\n")
        if i in bad_lines:
            lines.append("not a list line\n")
        if i % 9 == 0:
            lines.append("\n")  # blank lines count in line numbers, not as items
    lst = folder / "job.lst"
    lst.write_text("".join(lines))
    return lst


def records_of(manifest):
    out = []
    for shard in load_manifest(manifest).shards:
        index = open_index(shard.idx, rec_size=os.path.getsize(shard.rec))
        with RecordReader(shard.rec) as reader:
            out.extend((k, reader.read_at(o)) for k, o in
                       zip(index.key_array().tolist(), index.offsets.tolist()))
    return out


def output_files(folder, stem):
    """The names of ``stem``'s pack outputs in ``folder`` (``stem.*`` and ``stem-*``, the list
    excluded): what a pack wrote, and anything it left behind under those names."""
    return sorted(n for n in os.listdir(folder) if n.startswith((stem + ".", stem + "-"))
                  and n != stem + ".lst")


def assert_same_files(folder, clean, stem):
    """``stem``'s outputs in ``folder`` are byte for byte those of an uninterrupted pack in
    ``clean`` (every shard, index, sidecar, error report and the manifest), with nothing else
    left beside them (no staging folder, lock, partial or temporary file)."""
    names = output_files(folder, stem)
    assert names == output_files(clean, stem)
    for name in names:
        with open(os.path.join(folder, name), "rb") as a, \
                open(os.path.join(clean, name), "rb") as b:
            assert a.read() == b.read(), name
    assert not [n for n in os.listdir(folder) if n.startswith(".")]


#: a ``sitecustomize`` for commands a test interrupts at chosen moments (see ``hook_env``)
HOOK = '''
import os
if os.environ.get("RECIO_TEST_SLOW") or os.environ.get("RECIO_TEST_KILL_AT"):
    import importlib, signal, threading, time

    def _wrap(spec, before):
        module_name, _, attr = spec.partition(":")
        owner = importlib.import_module(module_name)
        names = attr.split(".")
        for name in names[:-1]:
            owner = getattr(owner, name)
        original = getattr(owner, names[-1])

        def wrapped(*args, **kwargs):
            before()
            return original(*args, **kwargs)
        setattr(owner, names[-1], wrapped)

    if os.environ.get("RECIO_TEST_SLOW"):
        _delay = float(os.environ["RECIO_TEST_SLOW"])
        _ready = os.environ.get("RECIO_TEST_READY")

        def _slow():
            if _ready and not os.path.exists(_ready):  # the pack has begun: tell the test
                open(_ready, "w").close()
            time.sleep(_delay)
        _wrap("recio.image.packing.worker:_read_image_file", _slow)
    if os.environ.get("RECIO_TEST_KILL_AT"):
        _target, _count, _signal = os.environ["RECIO_TEST_KILL_AT"].rsplit(":", 2)
        _calls = [0]
        _lock = threading.Lock()

        def _maybe_die():
            with _lock:
                _calls[0] += 1
                due = _calls[0] == int(_count)
            if due:
                os.kill(os.getpid(), getattr(signal, "SIG" + _signal))
                time.sleep(0.5)  # SIGTERM: the handler runs in the main thread meanwhile
        _wrap(_target, _maybe_die)
if os.environ.get("RECIO_TEST_STARTED"):
    import importlib

    _import_module = importlib.import_module

    def _import_marked(name, package=None):  # recio.cli.run_command loads the command
        if name.startswith("recio.cli."):
            open(os.environ["RECIO_TEST_STARTED"], "a").close()
        return _import_module(name, package)
    importlib.import_module = _import_marked
'''


def hook_env(folder, slow=None, kill_at=None, base=None, ready=None, started=None):
    """The environment of a command that ``slow``s each image read by that many seconds
    and/or kills itself at ``kill_at`` = ``"module:function:N:SIGNAL"`` (just before the N-th
    call of that function, e.g. ``"recio.storage:move:3:KILL"``), through a ``sitecustomize``
    written to ``folder/hook``. With ``slow``, the first image read creates the file
    ``ready`` (if given): the command is past its start-up, where a signal is the
    interpreter's business, not recio's. ``started`` (a file) is created as the command's
    entry point begins to load the command (``recio.cli.run_command``): from then on a Ctrl-C
    is recio's to answer; before, the interpreter is still starting."""
    hook = folder / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(hook)] + [p for p in [env.get("PYTHONPATH")] if p])
    for name, value in (("RECIO_TEST_SLOW", slow), ("RECIO_TEST_KILL_AT", kill_at),
                        ("RECIO_TEST_READY", ready), ("RECIO_TEST_STARTED", started)):
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    return env


def assert_bucket_set(server, prefix_url, clean, out):
    """The objects under ``prefix_url`` (``s3://bucket/r0``: a folder of the bucket),
    downloaded into the new folder ``out``, are the files of the local pack in ``clean``:
    ``assert_same_files``, and the same names besides (the list)."""
    bucket, _, under = prefix_url[len("s3://"):].partition("/")
    out.mkdir()
    for key in server.keys(f"s3://{bucket}"):
        if key.startswith(under + "/"):
            (out / key[len(under) + 1:]).write_bytes(server.get(f"s3://{bucket}/{key}"))
    assert_same_files(out, clean, "job")
    assert sorted(os.listdir(out)) == sorted(os.listdir(clean))


def run_signalled(cmd, env, sig, delay, after=None, cwd=None, group=False):
    """Run ``cmd``; ``delay`` seconds after the file ``after`` appears (a ``ready`` or
    ``started`` mark of ``hook_env``; None: from the start; ``delay`` None: let it end by itself,
    e.g. its hook kills it) send it ``sig``, with its default action as in a terminal. With
    ``group`` the command runs in a process group of its own and ``sig`` goes to the whole
    group, worker processes too, as a terminal's Ctrl-C does. Returns the finished process:
    its output in ``out`` and ``err``, whether ``sig`` was sent in ``signalled``, and in
    ``took`` the seconds from ``after`` to its end."""
    import subprocess
    import time

    from conftest import as_in_a_terminal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd, preexec_fn=as_in_a_terminal,
                            start_new_session=group)
    proc.signalled = False
    try:
        deadline = time.monotonic() + 120
        while after is not None and not os.path.exists(after) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.002)
        began = time.monotonic()
        if delay is not None:
            try:
                proc.wait(delay)
            except subprocess.TimeoutExpired:
                if group:
                    os.killpg(proc.pid, sig)
                else:
                    proc.send_signal(sig)
                proc.signalled = True
        proc.out, proc.err = finish(proc)
        proc.took = time.monotonic() - began
    finally:
        if group and proc.poll() is None:  # a failed wait leaves no worker of it running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc


def finish(proc, timeout=120):
    """Wait for ``proc`` (``Popen`` with pipes) to end; returns ``(out, err)``. Kills it if
    the wait fails, so no test leaves a command running."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def clean_pack(corpus, name, args):
    """``corpus/name/``: ``corpus/job.lst`` packed there without interruption by
    ``im2rec name/job ROOT`` + ``args`` (``args(prefix)`` gives the whole command line), the
    pack an interrupted one must end equal to; made once."""
    import shutil
    import subprocess

    folder = corpus / name
    if not folder.exists():
        folder.mkdir()
        shutil.copy(corpus / "job.lst", folder / "job.lst")
        proc = subprocess.run(args(folder / "job"), capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
    return folder


def golden_payloads(golden, name):
    """The payloads of golden file ``name`` under ``golden/records``, each checked against the
    manifest beside it (length, sha256, and the bytes where it lists them in hex):
    ``(entries, records)``."""
    entries = json.loads((golden / "records" / "manifest.json").read_text())[name]
    records = list(RecordReader(golden / "records" / name))
    assert len(records) == len(entries)
    for entry, record in zip(entries, records):
        assert len(record) == entry["length"]
        assert hashlib.sha256(record).hexdigest() == entry["sha256"]
        if entry.get("hex") is not None:
            assert record.hex() == entry["hex"]
    return entries, records


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 that forwards to the S3 server and drops each connection after
    ``limit`` bytes of response: a connection lost mid-read."""

    def __init__(self, upstream_port: int, limit: int) -> None:
        self.limit, self.upstream = limit, upstream_port
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pipe, args=(client, upstream, None),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.limit),
                             daemon=True).start()

    @staticmethod
    def _pipe(src, dst, limit) -> None:
        sent = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if limit is not None and sent + len(data) > limit:
                    dst.sendall(data[:limit - sent])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.server.close()


#: MXNet 1.9.1's pack of a folder of damaged JPEGs (tests/data/mxnet_damaged, made by its
#: make.py): the .rec and .idx, the list's lines, and the keys (= .lst indices) of the images
#: that neither cv2.imread nor recio decodes (BAD) and of the rest (GOOD)
MXNET_DAMAGED = pathlib.Path(__file__).parent / "data" / "mxnet_damaged"
REC = str(MXNET_DAMAGED / "mxnet" / "raw_damaged.rec")
IDX = str(MXNET_DAMAGED / "mxnet" / "raw_damaged.idx")
LIST = [line.split("\t") for line in (MXNET_DAMAGED / "damaged.lst").read_text().splitlines()]
_DECODERS = json.loads((MXNET_DAMAGED / "mxnet" / "manifest.json").read_text())["decoders"]
BAD = [int(i) for i, _, path in LIST if _DECODERS[os.path.basename(path)]["cv2.imread"] is None]
GOOD = [int(i) for i, _, _ in LIST if int(i) not in BAD]
