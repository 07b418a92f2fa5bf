"""Readers by key while a writer replaces the ``.rec``/``.idx`` pair they read, and a pack killed
between its two renames: a reader answers the right record or raises a documented error,
never another record (recio.records.pair, docs/design.md "One .rec, one .idx")."""
import multiprocessing
import os
import random
import shlex
import signal
import subprocess
import time

import pytest

import recio
from recio.errors import IndexChangedError, MissingIndexError
from recio.mx import recordio as mx_recordio
from recio.records.writer import IndexedRecordWriter

from conftest import need
from support import finish, hook_env, make_corpus

N_KEYS = 40


def _payload(generation, key):
    """Each generation's record of a key differs in content and length (so offsets move)."""
    return f"gen={generation} key={key} ".encode() + b"x" * ((generation * 7 + key * 13) % 97)


def _replace_pairs(stem, seconds, ready, count):
    """The writer: replaces the pair again and again with recio's IndexedRecordWriter, keys in
    no file order (as im2rec writes them: a shuffled list), new payloads each generation."""
    rng = random.Random(1)
    generation = 1
    ready.set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        generation += 1
        keys = list(range(N_KEYS))
        rng.shuffle(keys)
        with IndexedRecordWriter(stem + ".rec", stem + ".idx") as writer:
            for key in keys:
                writer.write(key, _payload(generation, key))
        count.value = generation


def _read_pairs(stem, seconds, kind, results):
    """A reader: opens the pair again and again and reads keys, counting right answers,
    documented errors and wrong answers (a record of another key, or of two generations in
    one open)."""
    rng = random.Random(os.getpid())
    right = wrong = errors = opens = 0
    other = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if kind == "mx":
                reader = mx_recordio.MXIndexedRecordIO(stem + ".idx", stem + ".rec", "r")
                read = reader.read_idx
            else:
                reader = recio.IndexedRecordReader(stem + ".rec")
                read = reader.__getitem__
        except (MissingIndexError, IndexChangedError):
            errors += 1
            continue
        except Exception as exc:  # anything else is a failure of the rule
            other.append(f"{type(exc).__name__}: {exc}")
            continue
        opens += 1
        seen = set()
        try:
            for key in rng.sample(range(N_KEYS), 8):
                record = bytes(read(key))
                gen, got = record.split(b" ")[:2]
                seen.add(gen)
                if got != f"key={key}".encode():
                    wrong += 1
                else:
                    right += 1
        except Exception as exc:  # a read that fails once the pair is open: not allowed
            other.append(f"{type(exc).__name__}: {exc}")
        wrong += max(len(seen) - 1, 0)  # one open reads one pair: one generation
        reader.close()
    results.put((right, wrong, errors, opens, other[:3], len(other)))


@pytest.mark.slow
@pytest.mark.posix_only("forks reader and writer processes")
@pytest.mark.parametrize("kind", ["reader", "mx"])
def test_readers_never_answer_another_record_while_the_pair_is_replaced(tmp_path, kind):
    """A real race: one process replaces a.rec/a.idx as fast as it can (about as often as
    the readers open it) while two processes open it and read keys, for 3 s. Every answer
    is the record of its key, from one generation per open; a reader that meets the gap
    between the renames gets MissingIndexError or IndexChangedError, nothing else."""
    ctx = multiprocessing.get_context("fork")
    stem = str(tmp_path / "a")
    with IndexedRecordWriter(stem + ".rec", stem + ".idx") as writer:
        for key in range(N_KEYS):
            writer.write(key, _payload(1, key))
    ready, count, results = ctx.Event(), ctx.Value("i", 1), ctx.Queue()
    seconds = 3.0
    writer_proc = ctx.Process(target=_replace_pairs, args=(stem, seconds, ready, count))
    writer_proc.start()
    assert ready.wait(30)
    readers = [ctx.Process(target=_read_pairs, args=(stem, seconds, kind, results))
               for _ in range(2)]
    for proc in readers:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in readers]
    for proc in readers + [writer_proc]:
        proc.join(60)
        assert proc.exitcode == 0
    right = sum(o[0] for o in outcomes)
    wrong = sum(o[1] for o in outcomes)
    opens = sum(o[3] for o in outcomes)
    other = [text for o in outcomes for text in o[4]]
    assert wrong == 0, outcomes
    assert not other, other
    assert count.value > 20 and opens > 20 and right > 100, (count.value, outcomes)


def test_a_rec_without_its_idx_is_refused_by_every_reader_by_key(tmp_path):
    """No silent numbering by position: IndexedRecordReader, MXIndexedRecordIO and
    RecordDataset(keys=...) raise MissingIndexError (a FileNotFoundError, as MXNet's reader
    raises) naming both files; scan=True asks for keys 0..n-1 and gets them."""
    stem = tmp_path / "a"
    with IndexedRecordWriter(f"{stem}.rec", f"{stem}.idx") as writer:
        for key in (5, 3, 9):
            writer.write(key, _payload(1, key))
    os.unlink(f"{stem}.idx")
    with pytest.raises(MissingIndexError) as info:
        recio.IndexedRecordReader(f"{stem}.rec")
    assert info.value.path == f"{stem}.idx" and info.value.rec_path == f"{stem}.rec"
    assert f"{stem}.rec" in str(info.value) and "recio index" in str(info.value)
    with pytest.raises(FileNotFoundError):
        mx_recordio.MXIndexedRecordIO(f"{stem}.idx", f"{stem}.rec", "r")
    with recio.IndexedRecordReader(f"{stem}.rec", scan=True) as reader:
        assert reader.keys() == [0, 1, 2] and reader[0] == _payload(1, 5)
    need("torch")
    from recio.torch import RecordDataset

    with pytest.raises(MissingIndexError):
        RecordDataset(f"{stem}.rec", keys=[5], decode="raw")
    assert len(RecordDataset(f"{stem}.rec", decode="raw")) == 3  # by line: positions are lines


def test_a_pair_that_keeps_changing_raises_index_changed_error(tmp_path, monkeypatch):
    """While every open meets a replaced .idx (here: a writer that rewrites it between the
    reader's steps, at each try), the reader gives up with IndexChangedError naming both
    files instead of reading a mixed pair."""
    from recio.records import pair
    stem = str(tmp_path / "a")
    generation = [1]

    def write(gen):
        with IndexedRecordWriter(stem + ".rec", stem + ".idx") as writer:
            for key in range(N_KEYS):
                writer.write(key, _payload(gen, key))

    write(1)
    real = pair.open_pair

    def racing_open_pair(rec_path, idx_path, open_both, close, **kw):
        def open_then_replace(idx):
            result = open_both(idx)
            generation[0] += 1
            write(generation[0])  # a writer publishes between the reader's steps
            return result
        return real(rec_path, idx_path, open_then_replace, close, **kw)

    monkeypatch.setattr("recio.records.indexed.open_pair", racing_open_pair)
    with pytest.raises(IndexChangedError) as info:
        recio.IndexedRecordReader(stem + ".rec")
    assert stem + ".rec" in str(info.value) and info.value.path == stem + ".idx"
    assert generation[0] == 1 + len(pair._WAITS)


@pytest.mark.slow
@pytest.mark.posix_only("kills im2rec with SIGKILL between its renames")
def test_im2rec_killed_between_its_renames(script, tmp_path):
    """im2rec killed after renaming job.rec into place, before job.idx: every reader by key
    refuses job.rec, naming the journal and --resume; `recio verify` says INCOMPLETE and its
    next: line is the command that finishes the pack, which then reads every key right."""
    lst = make_corpus(tmp_path, n=40)
    lines = lst.read_text().splitlines()
    good = [ln for ln in lines if ln.count("\t") >= 2]
    random.Random(3).shuffle(good)  # keys (list indices) in no file order
    lst.write_text("\n".join(good) + "\n")
    cmd = script("im2rec") + [str(tmp_path / "job"), str(tmp_path / "img"), "--quality", "80"]
    env = hook_env(tmp_path, kill_at="recio.records.atomic:replace_file:2:KILL")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    finish(proc)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (tmp_path / "job.rec").exists() and not (tmp_path / "job.idx").exists()
    with pytest.raises(MissingIndexError, match="--resume"):
        recio.IndexedRecordReader(tmp_path / "job.rec")
    with pytest.raises(MissingIndexError, match="job.pack.journal"):
        mx_recordio.MXIndexedRecordIO(str(tmp_path / "job.idx"), str(tmp_path / "job.rec"),
                                      "r")
    verify = subprocess.run(script("recio") + ["verify", str(tmp_path / "job.rec")],
                            capture_output=True, text=True)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "INCOMPLETE" in verify.stdout
    step = [ln for ln in verify.stdout.splitlines() if ln.startswith("next: ")][-1]
    command = step.split("`")[1]
    assert command.startswith("im2rec ") and "--resume" in command and "--quality 80" in command
    inspect = subprocess.run(script("recio") + ["inspect", str(tmp_path / "job.rec")],
                             capture_output=True, text=True)
    assert inspect.returncode == 0 and "--resume" in inspect.stdout
    argv = shlex.split(command)
    done = subprocess.run(script("im2rec") + argv[1:], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ids = {int(ln.split("\t")[0]) for ln in good
           if (tmp_path / "img" / ln.split("\t")[-1]).exists()}  # a missing image is skipped
    with recio.IndexedRecordReader(tmp_path / "job.rec") as reader:
        assert set(reader.keys()) == ids
        for key in ids:
            assert recio.unpack(reader[key])[0].id == key


def test_a_pickled_reader_refuses_a_rec_replaced_since(tmp_path):
    """A reader pickled into a worker (a DataLoader's) reopens the .rec by its path: if the
    pair was replaced meanwhile, the index it carries is the old file's, so unpickling raises
    IndexChangedError instead of reading the new file through the old offsets."""
    import pickle

    stem = str(tmp_path / "a")

    def write(generation):
        keys = list(range(N_KEYS))
        random.Random(generation).shuffle(keys)
        with IndexedRecordWriter(stem + ".rec", stem + ".idx") as writer:
            for key in keys:
                writer.write(key, _payload(generation, key))

    write(1)
    reader = recio.IndexedRecordReader(stem + ".rec")
    blob = pickle.dumps(reader)
    copy = pickle.loads(blob)  # unchanged: reads as the original
    assert copy[7] == reader[7] == _payload(1, 7)
    write(2)
    with pytest.raises(IndexChangedError, match="was replaced since"):
        pickle.loads(blob)
    assert reader[7] == _payload(1, 7)  # the open reader keeps the old pair
