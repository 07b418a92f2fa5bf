"""One writer lifecycle for every writer: close commits, anything else leaves no final file.

Covered for RecordWriter, IndexedRecordWriter, SequenceWriter, CBFWriter and im2rec's packer
(through ``pack_list``): ``close()``, ``abort()``, an exception inside ``with``, a writer dropped
without ``close()`` (ResourceWarning), a constructor that fails, a process that exits, dies
(``os._exit``) or is killed (SIGKILL) mid-write, ``fsync=True``, borrowed file objects, and the
MXNet-compatible writer of ``recio.mx`` (which keeps its file, as MXNet does).
"""
import gc
import io
import os
import signal
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from conftest import SIGKILL
from hypothesis import given, settings, strategies as st

import recio
from recio.image.packing.settings import PackSettings
from recio.records import framing
from recio.sequence.cbf import CBFReader, CBFWriter
from recio.image.packing.paths import PackPaths
from recio.image.packing.pipeline import pack_list
from recio.sequence import SequenceWriter, sample_counts, unpack_sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAGIC = framing.MAGIC_BYTES

# payloads that take every path of the record writer: tiny, aligned magic (multi-part),
# unaligned magic, a large one written straight to the OS, a large one with an aligned magic
PAYLOADS = [b"a", b"", MAGIC + b"xyz", b"x" + MAGIC + b"yyy", os.urandom(100_000),
            os.urandom(70_000) + MAGIC + os.urandom(10)]


# --------------------------------------------------------------------------- the writer kinds

def _records(folder):
    return recio.RecordWriter(os.path.join(folder, "a.rec"))


def _indexed(folder):
    return recio.IndexedRecordWriter(os.path.join(folder, "a.rec"), os.path.join(folder, "a.idx"))


def _sequence(folder):
    return SequenceWriter(os.path.join(folder, "a.rec"))


def _cbf(folder):
    return CBFWriter(os.path.join(folder, "a.cbf"), [("x", "dense", "float32", 2)],
                     chunk_size_bytes=64)


def _write(kind, w):
    if kind in ("records", "indexed"):
        for i, p in enumerate(PAYLOADS):
            w.write(p) if kind == "records" else w.write(i, p)
    else:
        for n in range(1, 6):
            data = {"x": np.arange(2 * n, dtype=np.float32).reshape(n, 2)}
            w.write(data)


def _check(kind, folder):
    """The committed output holds exactly what was written."""
    if kind == "records":
        assert list(recio.RecordReader(os.path.join(folder, "a.rec"))) == PAYLOADS
    elif kind == "indexed":
        r = recio.IndexedRecordReader(os.path.join(folder, "a.rec"), os.path.join(folder, "a.idx"))
        assert [r[k] for k in range(len(PAYLOADS))] == PAYLOADS
    elif kind == "sequence":
        rec = os.path.join(folder, "a.rec")
        np.testing.assert_array_equal(sample_counts(rec), [1, 2, 3, 4, 5])
        last = unpack_sequence(recio.IndexedRecordReader(rec)[4])["x"]
        np.testing.assert_array_equal(last, np.arange(10, dtype=np.float32).reshape(5, 2))
    else:
        r = CBFReader(os.path.join(folder, "a.cbf"))
        assert r.num_sequences == 5 and r.num_chunks > 1


MAKERS = {"records": _records, "indexed": _indexed, "sequence": _sequence, "cbf": _cbf}
FINALS = {"records": ["a.rec"], "indexed": ["a.idx", "a.rec"],
          "sequence": ["a.idx", "a.len", "a.rec"], "cbf": ["a.cbf"]}
KINDS = list(MAKERS)


def _names(folder):
    return sorted(os.listdir(folder))


def _temps(folder):
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


# --------------------------------------------------------------------------- in one process

@pytest.mark.parametrize("kind", KINDS)
def test_close_commits_and_nothing_shows_before(kind, tmp_path):
    w = MAKERS[kind](tmp_path)
    _write(kind, w)
    assert not set(FINALS[kind]) & set(_names(tmp_path))  # only temporary files so far
    w.close()
    assert _names(tmp_path) == FINALS[kind]
    _check(kind, tmp_path)
    w.close()  # idempotent
    with pytest.raises(ValueError):
        _write(kind, w)


@pytest.mark.parametrize("kind", KINDS)
def test_abort_discards(kind, tmp_path):
    w = MAKERS[kind](tmp_path)
    _write(kind, w)
    w.abort()
    assert _names(tmp_path) == []
    w.close()  # a no-op after abort: still nothing
    assert _names(tmp_path) == []
    with pytest.raises(ValueError):
        _write(kind, w)


@pytest.mark.parametrize("kind", KINDS)
def test_exception_inside_with_discards(kind, tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with MAKERS[kind](tmp_path) as w:
            _write(kind, w)
            raise RuntimeError("boom")
    assert _names(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_dropped_without_close_discards_and_warns(kind, tmp_path):
    w = MAKERS[kind](tmp_path)
    _write(kind, w)
    with pytest.warns(ResourceWarning, match="not closed"):
        del w
        gc.collect()
    assert _names(tmp_path) == []


@pytest.mark.parametrize("kind", KINDS)
def test_old_output_stays_until_close_replaces_it(kind, tmp_path):
    w = MAKERS[kind](tmp_path)
    _write(kind, w)
    w.close()
    before = {n: (tmp_path / n).read_bytes() for n in FINALS[kind]}
    w = MAKERS[kind](tmp_path)
    w.abort()
    assert {n: (tmp_path / n).read_bytes() for n in FINALS[kind]} == before
    w = MAKERS[kind](tmp_path)
    _write(kind, w)
    w.close()
    assert _names(tmp_path) == FINALS[kind]
    _check(kind, tmp_path)


FAILING = {
    "records": lambda d: recio.RecordWriter(os.path.join(d, "nodir", "a.rec")),
    # the second of two outputs cannot be created: the first must go too
    "indexed": lambda d: recio.IndexedRecordWriter(os.path.join(d, "x.rec"),
                                                   os.path.join(d, "nodir", "x.idx")),
    "sequence": lambda d: SequenceWriter(os.path.join(d, "x.rec"),
                                         os.path.join(d, "nodir", "x.idx")),
    "cbf": lambda d: CBFWriter(os.path.join(d, "nodir", "a.cbf"), [("x", "dense", "float32", 1)]),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_failing_constructor_leaves_nothing(kind, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with pytest.raises(FileNotFoundError):
            FAILING[kind](tmp_path)
        gc.collect()
    assert _names(tmp_path) == []


def test_in_place_indexed_writer_whose_index_cannot_be_created_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        recio.IndexedRecordWriter(tmp_path / "x.rec", tmp_path / "nodir" / "x.idx", atomic=False)
    assert _names(tmp_path) == []


@pytest.mark.parametrize("kind", ["records", "indexed", "sequence"])
def test_failing_commit_raises_and_leaves_no_new_file(kind, tmp_path):
    final = FINALS[kind][0]  # the .idx of indexed/sequence, the .rec of records
    w = MAKERS[kind](tmp_path)
    _write(kind, w)
    # a folder where the file should go, made while the writer writes (one there before is
    # refused when the writer opens: test_special_files.py): the rename fails
    os.mkdir(tmp_path / final)
    with pytest.raises(OSError):
        w.close()
    assert _names(tmp_path) == [final] and (tmp_path / final).is_dir()


@pytest.mark.needs_facility("windows-files")  # POSIX's rename rules; Windows': test_portable.py
def test_index_goes_last_and_an_old_index_never_meets_a_new_rec(tmp_path, monkeypatch):
    w = _indexed(tmp_path)
    _write("indexed", w)
    w.close()
    renames = []
    real_replace = os.replace

    def spy(src, dst):
        renames.append((os.path.basename(dst), sorted(os.listdir(tmp_path))))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    w = _indexed(tmp_path)
    w.write(0, b"new")
    w.close()
    assert [r[0] for r in renames] == ["a.rec", "a.idx"]
    assert "a.idx" not in renames[0][1]  # the old index was gone before the new .rec came
    assert (tmp_path / "a.idx").read_text() == "0\t0\n"


@pytest.mark.needs_facility("windows-files")  # POSIX's rename rules; Windows': test_portable.py
@pytest.mark.linux_only("names each fsynced descriptor through /proc/self/fd")
@pytest.mark.parametrize("kind", KINDS)
def test_fsync_syncs_every_file_before_its_rename_and_the_folder_after(kind, tmp_path,
                                                                       monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.path.abspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    folder = str(tmp_path)
    if kind == "cbf":
        w = CBFWriter(os.path.join(folder, "a.cbf"), [("x", "dense", "float32", 2)], fsync=True)
    elif kind == "sequence":
        w = SequenceWriter(os.path.join(folder, "a.rec"), fsync=True)
    elif kind == "indexed":
        w = recio.IndexedRecordWriter(os.path.join(folder, "a.rec"),
                                      os.path.join(folder, "a.idx"), fsync=True)
    else:
        w = recio.RecordWriter(os.path.join(folder, "a.rec"), fsync=True)
    _write(kind, w)
    w.close()
    _check(kind, tmp_path) if kind != "cbf" else None
    renamed = [e[1] for e in events if e[0] == "replace"]
    assert sorted(os.path.basename(p) for p in renamed) == FINALS[kind]
    synced = [e[1] for e in events if e[0] == "fsync"]
    for final in renamed:
        at = events.index(("replace", final))
        temps = [p for kind_, p in events[:at] if kind_ == "fsync" and
                 os.path.basename(p).startswith("." + os.path.basename(final) + ".")]
        assert temps, f"{final} was renamed without an fsync of its data"
    assert events[-1] == ("fsync", os.path.realpath(folder))  # the renames themselves
    assert os.path.realpath(folder) in synced


# --------------------------------------------------------------------------- borrowed files

def test_borrowed_file_is_flushed_never_closed_and_abort_drops_only_the_buffer(tmp_path):
    out = io.BytesIO()
    w = recio.RecordWriter(out)
    w.write(b"kept")
    w.flush()  # handed to the file: abort cannot take it back
    w.write(b"dropped")
    w.abort()
    assert not out.closed and out.getvalue() == framing.encode_record(b"kept")
    out = io.BytesIO()
    with recio.RecordWriter(out) as w:
        w.write(b"small")
        w.write(PAYLOADS[4])
    assert not out.closed
    assert out.getvalue() == framing.encode_record(b"small") + framing.encode_record(PAYLOADS[4])


@pytest.mark.slow
def test_borrowed_file_dropped_with_buffered_records_warns(tmp_path):
    out = io.BytesIO()
    w = recio.RecordWriter(out)
    w.write(b"lost")
    with pytest.warns(ResourceWarning, match="12 buffered bytes"):
        del w
        gc.collect()
    assert out.getvalue() == b"" and not out.closed
    w = recio.RecordWriter(out)
    w.write(b"x")
    w.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)  # nothing lost, nothing to say
        del w
        gc.collect()


def test_raw_file_object_gets_the_same_bytes(tmp_path):
    with open(tmp_path / "raw.rec", "wb", buffering=0) as f:
        f.write(b"\0" * 8)  # the writer starts where the file is
        with recio.RecordWriter(f) as w:
            offsets = [w.write(p) for p in PAYLOADS]
        assert not f.closed
    data = (tmp_path / "raw.rec").read_bytes()
    assert data == b"\0" * 8 + b"".join(framing.encode_record(p) for p in PAYLOADS)
    assert offsets[0] == 8


# --------------------------------------------------------------------------- written in place

@pytest.mark.slow
def test_atomic_false_writes_in_place_abort_deletes_and_a_dropped_writer_keeps(tmp_path):
    path = tmp_path / "a.rec"
    w = recio.RecordWriter(path, atomic=False)
    w.write(b"x")
    assert path.exists()
    w.abort()
    assert _names(tmp_path) == []
    w = recio.IndexedRecordWriter(path, tmp_path / "a.idx", atomic=False)
    for i, p in enumerate(PAYLOADS):
        w.write(i, p)
    with pytest.warns(ResourceWarning, match="closed as written"):
        del w
        gc.collect()
    _check("indexed", tmp_path)


@pytest.mark.slow
def test_mx_writer_keeps_its_files_when_dropped_like_mxnet(tmp_path):
    rec, idx = str(tmp_path / "m.rec"), str(tmp_path / "m.idx")
    w = recio.mx.MXIndexedRecordIO(idx, rec, "w")
    for i, p in enumerate(PAYLOADS):
        w.write_idx(i, p)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del w
        gc.collect()
    r = recio.mx.MXIndexedRecordIO(idx, rec, "r")
    assert [r.read_idx(i) for i in range(len(PAYLOADS))] == PAYLOADS


def test_mx_writer_whose_index_cannot_be_opened_leaves_no_rec(tmp_path):
    with pytest.raises(FileNotFoundError):
        recio.mx.MXIndexedRecordIO(str(tmp_path / "nodir" / "m.idx"), str(tmp_path / "m.rec"),
                                   "w")
    assert _names(tmp_path) == []


@pytest.mark.needs_facility("windows-files")  # POSIX's rename rules; Windows': test_portable.py
@pytest.mark.posix_only("replaces a file a reader maps, which Windows refuses; keeps 0o640")
def test_mx_writer_replaces_a_file_a_reader_still_maps(tmp_path):
    rec = str(tmp_path / "m.rec")
    w = recio.mx.MXRecordIO(rec, "w")
    for p in PAYLOADS:
        w.write(p)
    w.close()
    os.chmod(rec, 0o640)
    reader = recio.RecordReader(rec)
    w = recio.mx.MXRecordIO(rec, "w")
    w.write(b"new")
    w.close()
    assert list(reader) == PAYLOADS  # the old file, intact: no fault, no mixed records
    assert list(recio.RecordReader(rec)) == [b"new"]
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o640


@pytest.mark.posix_only("makes symlinks, which Windows allows only with a privilege")
def test_mx_writer_through_a_symlink_writes_the_target(tmp_path):
    target = tmp_path / "real.rec"
    target.write_bytes(b"old")
    link = tmp_path / "link.rec"
    link.symlink_to(target)
    w = recio.mx.MXRecordIO(str(link), "w")
    w.write(b"new")
    w.close()
    assert link.is_symlink() and list(recio.RecordReader(str(target))) == [b"new"]


# --------------------------------------------------------------------------- the bytes

@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 3, 4, 100, 4095, 4096, 5000, 65535, 65536, 70001]),
                      min_size=1, max_size=8),
       magic_at=st.lists(st.integers(0, 70_000), max_size=3),
       form=st.sampled_from(["bytes", "bytearray", "memoryview", "numpy"]))
def test_every_write_path_gives_the_framing_bytes(tmp_path_factory, sizes, magic_at, form):
    rng = np.random.default_rng(len(sizes))
    payloads = []
    for n in sizes:
        p = bytearray(rng.bytes(n))
        for at in magic_at:  # aligned and unaligned magic words
            if at + 4 <= n:
                p[at:at + 4] = MAGIC
        payloads.append(bytes(p))
    path = tmp_path_factory.mktemp("w") / "p.rec"
    with recio.RecordWriter(path, buffer_size=1 << 16) as w:
        for p in payloads:
            arg = {"bytes": p, "bytearray": bytearray(p), "memoryview": memoryview(p),
                   "numpy": np.frombuffer(p, np.uint8)}[form]
            w.write(arg)
    assert path.read_bytes() == b"".join(framing.encode_record(p) for p in payloads)


@pytest.mark.slow
@pytest.mark.parametrize("atomic", [True, False])
def test_disk_space_reserved_ahead_is_given_back(tmp_path, atomic):
    path = tmp_path / "big.rec"
    with recio.RecordWriter(path, atomic=atomic) as w:
        for _ in range(40):
            w.write(PAYLOADS[4])
    size = path.stat().st_size
    assert size == 40 * len(framing.encode_record(PAYLOADS[4]))
    assert path.stat().st_blocks * 512 < size + (64 << 10)  # no reserved tail left behind
    w = recio.RecordWriter(path, atomic=False)
    for _ in range(40):
        w.write(PAYLOADS[4])
    w.write(b"buffered")
    with pytest.warns(ResourceWarning):
        del w
        gc.collect()
    assert list(recio.RecordReader(path)) == [PAYLOADS[4]] * 40 + [b"buffered"]
    assert path.stat().st_blocks * 512 < path.stat().st_size + (64 << 10)


def _scribble(arg, n):
    """Overwrite a mutable payload in place with magic words (what a caller reusing its buffer
    does once ``write()`` returned)."""
    junk = (MAGIC * (n // 4 + 1))[:n]
    if isinstance(arg, np.ndarray):
        arg[:] = np.frombuffer(junk, np.uint8)
    else:
        arg[:] = junk


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 10, 5000, 65536, 100_001, 400_000]), min_size=1,
                      max_size=24),
       forms=st.lists(st.sampled_from(["bytes", "bytearray", "numpy", "memoryview"]),
                      min_size=1, max_size=5),
       atomic=st.booleans())
def test_a_buffer_changed_after_write_returns_is_written_as_it_was(tmp_path_factory, sizes,
                                                                   forms, atomic):
    """Large ``bytes`` payloads are held by reference until a batch is written; any other
    buffer must be written (or copied) before ``write()`` returns."""
    rng = np.random.default_rng(len(sizes) * 7 + len(forms))
    path = tmp_path_factory.mktemp("m") / "m.rec"
    payloads, offsets = [], []
    with recio.RecordWriter(path, atomic=atomic) as w:
        for i, n in enumerate(sizes):
            p = rng.bytes(n)
            form = forms[i % len(forms)]
            arg = {"bytes": p, "bytearray": bytearray(p), "memoryview": memoryview(bytearray(p)),
                   "numpy": np.frombuffer(p, np.uint8).copy()}[form]
            offsets.append(w.write(arg))
            assert w.tell() == offsets[-1] + len(framing.encode_record(p))
            if form != "bytes":
                _scribble(arg, n)
            payloads.append(p)
    framed = [framing.encode_record(p) for p in payloads]
    assert path.read_bytes() == b"".join(framed)
    assert offsets == [sum(map(len, framed[:i])) for i in range(len(framed))]


def test_records_held_by_reference_go_out_in_bounded_batches_and_on_flush(tmp_path, monkeypatch):
    from recio.records import writer
    monkeypatch.setattr(writer, "_BATCH_PIECES", 7)  # as if IOV_MAX were 8
    monkeypatch.setattr(writer, "_BATCH_BYTES", 1 << 40)
    calls = []
    real = writer._writev
    monkeypatch.setattr(writer, "_writev", lambda fd, chunks: calls.append(len(chunks))
                        or real(fd, chunks))
    payloads = [p for i in range(12) for p in (os.urandom(70_001 + i), b"s%d" % i)]
    path = tmp_path / "b.rec"
    with recio.RecordWriter(path, atomic=False) as w:
        offsets = [w.write(p) for p in payloads[:9]]
        w.flush()  # everything written so far is in the file, not only in the writer
        assert path.read_bytes() == b"".join(framing.encode_record(p) for p in payloads[:9])
        assert w.tell() == len(path.read_bytes())
        offsets += [w.write(p) for p in payloads[9:]]
    data = path.read_bytes()
    assert data == b"".join(framing.encode_record(p) for p in payloads)
    with recio.RecordReader(path) as r:
        assert [r.read_at(o) for o in offsets] == payloads
    assert calls and max(calls) <= 8 and len(calls) >= 4


def test_borrowed_raw_file_gets_each_large_record_at_once(tmp_path):
    with open(tmp_path / "raw.rec", "wb", buffering=0) as f:
        w = recio.RecordWriter(f)
        w.write(b"small")
        w.write(PAYLOADS[4])  # handed to the file with the buffered record before it
        w.write(b"dropped")
        w.abort()
    assert (tmp_path / "raw.rec").read_bytes() == \
        framing.encode_record(b"small") + framing.encode_record(PAYLOADS[4])


# --------------------------------------------------------------------------- process endings

CHILD = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    sys.path.insert(0, {repo!r})
    import recio
    from recio.sequence.cbf import CBFWriter
    from recio.sequence import SequenceWriter
    kind, ending, folder = sys.argv[1:4]
    j = os.path.join
    w = {{"records": lambda: recio.RecordWriter(j(folder, "a.rec")),
          "indexed": lambda: recio.IndexedRecordWriter(j(folder, "a.rec"), j(folder, "a.idx")),
          "sequence": lambda: SequenceWriter(j(folder, "a.rec")),
          "cbf": lambda: CBFWriter(j(folder, "a.cbf"), [("x", "dense", "float32", 1)], 64),
          "mx": lambda: recio.mx.MXIndexedRecordIO(j(folder, "a.idx"), j(folder, "a.rec"), "w"),
          }}[kind]()
    for i in range(200):
        if kind in ("records",):
            w.write(os.urandom(20000))
        elif kind in ("indexed",):
            w.write(i, os.urandom(20000))
        elif kind == "mx":
            w.write_idx(i, b"%d" % i)
        else:
            w.write({{"x": np.zeros((i % 7 + 1, 1), np.float32)}})
    if ending == "exit":
        sys.exit(3)  # the writer is still referenced: it meets interpreter exit unclosed
    if ending == "raise":
        raise RuntimeError("the script fails outside a with block")
    if ending == "os_exit":
        os._exit(4)
    print("ready", flush=True)  # "kill": the parent sends SIGKILL now
    sys.stdin.read()
""")


#: the ending "kill" as a parameter: SIGKILL is POSIX's
KILL = pytest.param("kill", marks=pytest.mark.posix_only("sends the writer's process SIGKILL"))


def _child(tmp_path, kind, ending):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=REPO))
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-W", "always::ResourceWarning", str(script), kind, ending, str(out)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if ending == "kill":
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, str(out)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ending", ["exit", "raise"])
def test_process_exiting_without_close_leaves_nothing(kind, ending, tmp_path):
    code, err, out = _child(tmp_path, kind, ending)
    assert code == (3 if ending == "exit" else 1), err
    assert "ResourceWarning" in err and "not closed" in err
    assert _names(out) == []  # no final file and no temporary file


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ending", ["os_exit", KILL])
def test_process_dying_mid_write_leaves_no_final_name(kind, ending, tmp_path):
    code, err, out = _child(tmp_path, kind, ending)
    assert code == (4 if ending == "os_exit" else -SIGKILL), err
    assert not set(FINALS[kind]) & set(_names(out))
    assert _names(out) == sorted(_temps(out))  # what is left is visibly temporary


@pytest.mark.slow
def test_mx_script_that_never_closes_keeps_complete_files_like_mxnet(tmp_path):
    code, err, out = _child(tmp_path, "mx", "exit")
    assert code == 3 and "ResourceWarning" not in err, err
    r = recio.mx.MXIndexedRecordIO(os.path.join(out, "a.idx"), os.path.join(out, "a.rec"), "r")
    assert r.keys == list(range(200)) and r.read_idx(199) == b"199"


# --------------------------------------------------------------------------- im2rec's packer

def _image_list(tmp_path, n=40):
    root = tmp_path / "imgs"
    root.mkdir()
    lines = []
    for i in range(n):
        (root / f"{i}.bin").write_bytes(os.urandom(3000 + i))
        lines.append(f"{i}\t{i % 3}.000000\t{i}.bin\n")
    lines.append(f"{n}\t0.000000\tmissing.bin\n")  # one skip: an .errors.tsv is written
    lst = tmp_path / "data.lst"
    lst.write_text("".join(lines))
    return lst, root


PACK_FINALS = ["data.errors.tsv", "data.idx", "data.rec"]


def test_pack_interrupted_by_an_exception_leaves_no_final_file_and_resumes(tmp_path):
    lst, root = _image_list(tmp_path)

    def stop(done, total):
        if done >= 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pack_list(lst, root, PackSettings(pass_through=True), progress=stop)
    left = _names(tmp_path)
    assert not set(PACK_FINALS) & set(left)
    assert all(os.path.exists(p) for p in PackPaths.of(lst).partial) and not _temps(tmp_path)
    resumed = pack_list(lst, root, PackSettings(pass_through=True, resume=True))
    assert resumed.resumed >= 12 and resumed.packed == 40 and resumed.skipped == 1
    data = {n: (tmp_path / n).read_bytes() for n in PACK_FINALS}
    assert set(PACK_FINALS) <= set(_names(tmp_path)) and not _temps(tmp_path)
    assert not any(os.path.exists(p) for p in PackPaths.of(lst).partial)
    fresh = pack_list(lst, root,
                      PackSettings(pass_through=True, force=True))  # same as one clean run
    assert fresh.packed == 40
    assert {n: (tmp_path / n).read_bytes() for n in PACK_FINALS} == data


@pytest.mark.posix_only("makes a symlink")
def test_pack_whose_journal_cannot_be_created_leaves_nothing(tmp_path):
    lst, root = _image_list(tmp_path)
    rec_partial, journal = PackPaths.of(lst).partial
    # the second output cannot be created: a link into a folder that does not exist (a folder
    # or a FIFO there is refused before anything is opened: test_special_files.py)
    os.symlink(tmp_path / "no-such-folder" / "journal", journal)
    before = _names(tmp_path)
    with pytest.raises(OSError):
        pack_list(lst, root, PackSettings(pass_through=True))
    assert _names(tmp_path) == before


@pytest.mark.needs_facility("windows-files")  # POSIX's rename rules; Windows': test_portable.py
@pytest.mark.linux_only("names each fsynced descriptor through /proc/self/fd")
def test_pack_commit_order_and_fsync(tmp_path, monkeypatch):
    lst, root = _image_list(tmp_path)
    pack_list(lst, root, PackSettings(pass_through=True))
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(
        ("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda s, d: (events.append(
        ("replace", os.path.basename(d), sorted(os.listdir(tmp_path)))), real_replace(s, d)))
    pack_list(lst, root, PackSettings(pass_through=True, fsync=True, force=True))
    replaces = [e for e in events if e[0] == "replace"]
    assert [e[1] for e in replaces] == ["data.rec", "data.idx", "data.errors.tsv"]
    assert "data.idx" not in replaces[0][2]  # no new .rec beside the old index
    assert ("fsync", "data.rec.partial") in events[:events.index(replaces[0])]
    assert events[-1] == ("fsync", tmp_path.name)


PACK_CHILD = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {repo!r})
    from recio.image.packing.settings import PackSettings
    from recio.image.packing.pipeline import pack_list
    lst, root, ending = sys.argv[1:4]

    def progress(done, total):
        if done < 12:
            return
        if ending == "exit":
            sys.exit(3)
        if ending == "os_exit":
            os._exit(4)
        print("ready", flush=True)
        sys.stdin.read()

    pack_list(lst, root, PackSettings(pass_through=True), progress=progress)
""")


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["exit", "os_exit", KILL])
def test_pack_process_ending_mid_pack_leaves_no_final_file(ending, tmp_path):
    lst, root = _image_list(tmp_path)
    script = tmp_path / "child.py"
    script.write_text(PACK_CHILD.format(repo=REPO))
    proc = subprocess.Popen([sys.executable, str(script), str(lst), str(root), ending],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if ending == "kill":
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == {"exit": 3, "os_exit": 4, "kill": -SIGKILL}[ending], err
    assert not set(PACK_FINALS) & set(_names(tmp_path))
    assert all(os.path.exists(p) for p in PackPaths.of(lst).partial)  # what resume continues from
    assert pack_list(lst, root, PackSettings(pass_through=True, resume=True)).packed == 40
