"""The fast paths of im2rec's pack: they must give what the plain paths give.

The ROOT check on the opened file (``/proc/self/fd``) and its ``realpath`` fallback; the thread
pipeline whose workers write in list order themselves; framing's NumPy check for magic words.
"""
from __future__ import annotations

import io
import os
import random
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from recio import portable
from recio.image.packing import executors as pack_executors
from recio.image.packing.paths import PackPaths
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import pack_list
from recio.records.framing import MAGIC_BYTES, split_payload


def _jpeg(seed: int, size=(40, 30)) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(
        buf, "JPEG", quality=90)
    return buf.getvalue()


@pytest.fixture
def tree(tmp_path):
    """ROOT with images, a symlink inside ROOT, and symlinks (a file, a folder) leading out."""
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    for i in range(3):
        (root / "a" / f"{i}.jpg").write_bytes(_jpeg(i))
    (outside / "secret.jpg").write_bytes(_jpeg(99))
    os.symlink(root / "a" / "0.jpg", root / "a" / "inner.jpg")
    os.symlink(outside / "secret.jpg", root / "a" / "out.jpg")
    os.symlink(outside, root / "away")
    return tmp_path, root


@pytest.mark.posix_only("makes symlinks, which Windows allows only with a privilege")
@pytest.mark.parametrize("proc_fd", [pytest.param(True, marks=[pytest.mark.linux_only(
    "the ROOT check through /proc/self/fd"), pytest.mark.needs_facility("procfd")]), False])
def test_root_check_on_the_opened_file_and_without_proc(tree, monkeypatch, proc_fd):
    """The same skips whether ROOT is checked on the opened file (Linux /proc/self/fd) or with
    realpath first (elsewhere)."""
    tmp, root = tree
    assert portable.has_proc_fd() or not proc_fd  # the Linux run checks the /proc path
    if not proc_fd:
        monkeypatch.setattr(portable, "has_proc_fd", lambda: False)
    lst = tmp / "x.lst"
    lst.write_text("0\t0\ta/0.jpg\n1\t0\ta/inner.jpg\n2\t0\ta/out.jpg\n3\t0\taway/secret.jpg\n"
                   "4\t0\ta/../a/1.jpg\n5\t0\ta/2.jpg\n")
    result = pack_list(lst, root, PackSettings(pass_through=True))
    assert result.packed == 4 and result.skips == {"outside_root": 2}
    errors = (tmp / "x.errors.tsv").read_text()
    assert "a/out.jpg" in errors and "away/secret.jpg" in errors
    assert _jpeg(99) not in (tmp / "x.rec").read_bytes()
    assert pack_list(lst, root,
                     PackSettings(pass_through=True, allow_outside_root=True,
                                  force=True)).packed == 6


def _list(tmp, n):
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    for i in range(n):
        (root / f"{i}.jpg").write_bytes(_jpeg(i, (24 + i % 7, 20)))
    lst = tmp / "many.lst"
    lst.write_text("".join(f"{i}\t{i % 3}\t{i}.jpg\n" for i in range(n)))
    return root, lst


def test_thread_pipeline_writes_in_list_order_with_bounded_lookahead(tmp_path, monkeypatch):
    """Workers finishing in random order still give the bytes of a one-worker pack, and no
    batch gets more than ``window`` batches ahead of the writing."""
    root, lst = _list(tmp_path, 60)
    pack_list(lst, root, PackSettings(workers=1))
    expected = (tmp_path / "many.rec").read_bytes(), (tmp_path / "many.idx").read_bytes()
    original = pack_executors.encode_batch
    ahead = []
    pipelines = []
    real_init = pack_executors._ThreadPipeline.__init__

    def remember(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        pipelines.append(self)

    def slow(job, batch, stop=None):
        time.sleep(random.random() * 0.01)
        pipeline = pipelines[-1]
        with pipeline.state:
            ahead.append(batch[0][0] // pipeline.batch_size - pipeline.next_write)
        return original(job, batch, stop)

    monkeypatch.setattr(pack_executors._ThreadPipeline, "__init__", remember)
    monkeypatch.setattr(pack_executors, "encode_batch", slow)
    pack_list(lst, root, PackSettings(workers=4, batch_size=2, window=3, force=True))
    assert ((tmp_path / "many.rec").read_bytes(), (tmp_path / "many.idx").read_bytes()) == expected
    assert max(ahead) < 3 and len(ahead) == 30


def test_thread_pipeline_error_stops_the_pack_and_resume_finishes_it(tmp_path, monkeypatch):
    """A worker's error reaches the caller; nothing final appears; resume gives the same
    bytes as an uninterrupted pack."""
    root, lst = _list(tmp_path, 40)
    pack_list(lst, root, PackSettings(workers=1))
    expected = (tmp_path / "many.rec").read_bytes()
    for name in ("many.rec", "many.idx"):
        (tmp_path / name).unlink()
    original = pack_executors.encode_batch
    calls = []
    lock = threading.Lock()

    def failing(job, batch, stop=None):
        with lock:
            calls.append(1)
            if len(calls) == 5:
                raise RuntimeError("disk on fire")
        return original(job, batch, stop)

    monkeypatch.setattr(pack_executors, "encode_batch", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        pack_list(lst, root, PackSettings(workers=3, batch_size=2))
    assert not (tmp_path / "many.rec").exists() and not (tmp_path / "many.idx").exists()
    assert all(os.path.exists(p) for p in PackPaths.of(lst).partial)
    monkeypatch.setattr(pack_executors, "encode_batch", original)
    result = pack_list(lst, root, PackSettings(workers=3, batch_size=2, resume=True))
    assert result.packed == 40 and (tmp_path / "many.rec").read_bytes() == expected


def _busy_transform(monkeypatch, seconds=0.01, stuck_at=None):
    """Make each image's transform take ``seconds`` (the worker is "inside OpenCV" meanwhile),
    ten times that on the first worker thread (the one the pack waited for first), and count
    those in progress; ``stuck_at`` (an image name) blocks its read until the
    returned event is set, as a file that never answers would, and then sends the main
    thread a Ctrl-C. Returns (inside, stuck)."""
    from recio.image.packing import worker as pack_worker
    inside, lock, stuck = [0], threading.Lock(), threading.Event()
    transform, read = pack_worker._transform, pack_worker._read_image_file

    def busy(job, data, path):
        with lock:
            inside[0] += 1
        try:
            first = threading.current_thread().name == pack_executors.PACK_THREAD + "0"
            time.sleep(seconds * (10 if first else 1))
            return transform(job, data, path)
        finally:
            with lock:
                inside[0] -= 1

    def blocking(job, path):
        if stuck_at is not None and os.path.basename(path) == stuck_at:
            import _thread

            _thread.interrupt_main()  # Ctrl-C, while this worker is stuck
            stuck.wait(60)
        return read(job, path)
    monkeypatch.setattr(pack_worker, "_transform", busy)
    monkeypatch.setattr(pack_worker, "_read_image_file", blocking)
    return inside, stuck


def _ctrl_c_after(monkeypatch, images):
    """A Ctrl-C in the main thread (which waits for the workers) once ``images`` images have
    been written."""
    import _thread

    written = []

    def progress(done, total):
        if done >= images and not written:
            written.append(done)
            _thread.interrupt_main()
    return progress


@pytest.mark.slow
def test_a_ctrl_c_returns_only_once_the_worker_threads_have_left(tmp_path, monkeypatch):
    """A pack on threads stopped by Ctrl-C raises KeyboardInterrupt only once its threads have
    left, each after the image it was on: a program that ends on it never shuts Python down
    with one inside OpenCV, which aborts ("terminate called without an active exception").
    The pack waited with Thread.join, which a Ctrl-C arriving in it leaves believing the thread
    has ended (Python 3.9 to 3.12). Resume then finishes the pack."""
    root, lst = _list(tmp_path, 120)
    inside, _ = _busy_transform(monkeypatch)
    for attempt in range(5):  # the Ctrl-C reaches the main thread at a different moment each
        with pytest.raises(KeyboardInterrupt):
            pack_list(lst, root, PackSettings(workers=3, batch_size=2, resume=attempt > 0),
                      progress=_ctrl_c_after(monkeypatch, 10 + 8 * attempt))
        assert inside[0] == 0 and pack_executors.pack_threads_running() == 0, attempt
    assert pack_list(lst, root, PackSettings(workers=3, resume=True)).packed == 120


@pytest.mark.slow
def test_a_worker_stuck_reading_is_left_behind_counted(tmp_path, monkeypatch):
    """A worker thread stuck reading a file does not keep Ctrl-C from stopping the pack: it
    is waited for ``STOP_WAIT`` seconds, then left behind, counted by
    ``pack_threads_running`` (the CLI then exits without Python's shutdown) until it ends."""
    root, lst = _list(tmp_path, 60)
    inside, stuck = _busy_transform(monkeypatch, stuck_at="30.jpg")
    monkeypatch.setattr(pack_executors, "STOP_WAIT", 0.5)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pack_list(lst, root, PackSettings(workers=2, batch_size=2))
    assert time.monotonic() - started < 30
    assert pack_executors.pack_threads_running() == 1 and inside[0] == 0
    stuck.set()
    deadline = time.monotonic() + 30
    while pack_executors.pack_threads_running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pack_executors.pack_threads_running() == 0


def _split_reference(data: bytes) -> list:
    pieces, start, pos = [], 0, data.find(MAGIC_BYTES)
    while pos >= 0:
        if pos % 4 == 0:
            pieces.append(data[start:pos])
            start = pos + 4
            pos = data.find(MAGIC_BYTES, start)
        else:
            pos = data.find(MAGIC_BYTES, pos + 1)
    return pieces + [data[start:]]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 5000), seed=st.integers(0, 2**32 - 1),
       places=st.lists(st.integers(0, 4999), max_size=6))
def test_split_payload_agrees_with_a_plain_search(size, seed, places):
    """The NumPy pre-check (payloads of 1 KiB and more) never changes where a payload is cut:
    magic words at aligned and unaligned offsets, overlapping, at the ends."""
    data = bytearray(np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8))
    for place in places:
        if place + 4 <= size:
            data[place:place + 4] = MAGIC_BYTES
    for payload in (bytes(data), bytearray(data), memoryview(bytes(data))):
        assert [bytes(p) for p in split_payload(payload)] == _split_reference(bytes(data))
