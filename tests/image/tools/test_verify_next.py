"""Every ``next:`` line ``recio verify`` prints is a command that works on that file: each
case below makes the damage, runs verify, runs the command its ``next:`` line gives, and
verifies again. And the verdict line says what was checked (framing and index; --images
decodes every image)."""
import os
import random
import shlex
import shutil
import subprocess

import pytest

import recio
from recio.records.writer import IndexedRecordWriter

from support import make_corpus


pytestmark = pytest.mark.slow  # every test here runs the commands many times or waits


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """An im2rec pack of a shuffled list (keys in no file order, as a real one), and a second
    list's pack: another list's .idx."""
    folder = tmp_path_factory.mktemp("packed")
    lst = make_corpus(folder, n=40)
    good = [ln for ln in lst.read_text().splitlines() if ln.count("\t") >= 2]
    random.Random(5).shuffle(good)
    lst.write_text("\n".join(good) + "\n")
    other = folder / "other.lst"
    other.write_text("".join(f"{100 + 3 * i}\t1.000000\t{ln.split(chr(9))[-1]}\n"
                             for i, ln in enumerate(good[:15])))
    for stem in ("job", "other"):
        subprocess.run([os.sys.executable, "-m", "recio.im2rec", str(folder / stem),
                        str(folder / "img"), "-q"], check=True, capture_output=True)
    return folder


def _case(packed, tmp_path, kind):
    rec, idx = tmp_path / "t.rec", tmp_path / "t.idx"
    shutil.copy(packed / "job.rec", rec)
    shutil.copy(packed / "job.idx", idx)
    if kind == "another list's index":
        shutil.copy(packed / "other.idx", idx)
    elif kind == "index cut mid-line":
        data = idx.read_bytes()
        idx.write_bytes(data[:len(data) - 4])
    elif kind == "index cut at a line":
        lines = idx.read_bytes().splitlines(keepends=True)
        idx.write_bytes(b"".join(lines[:-5]))
    elif kind == "no index":
        idx.unlink()
    elif kind == "repeated keys":
        lines = idx.read_bytes().splitlines(keepends=True)
        key = lines[0].split(b"\t")[0]
        lines[3] = key + b"\t" + lines[3].split(b"\t")[1]
        idx.write_bytes(b"".join(lines))
    elif kind == "truncated":
        data = rec.read_bytes()
        rec.write_bytes(data[:len(data) * 2 // 3 + 5])
    elif kind == "overwritten":  # bytes over a record head and into its payload
        with recio.IndexedRecordReader(packed / "job.rec") as reader:
            head = int(reader.index.offsets[3])
        data = bytearray(rec.read_bytes())
        data[head:head + 300] = b"\xff" * 300
        rec.write_bytes(bytes(data))
    elif kind == "written by position":
        idx.unlink()
        with IndexedRecordWriter(tmp_path / "p.rec", tmp_path / "p.idx") as writer:
            for i in range(20):
                writer.write(i, b"payload %d" % i)
        os.replace(tmp_path / "p.rec", rec)
        os.unlink(tmp_path / "p.idx")
    return rec


KINDS = ["another list's index", "index cut mid-line", "index cut at a line", "no index",
         "repeated keys", "truncated", "overwritten", "written by position"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_next_line_is_a_command_that_works(script, packed, tmp_path, kind):
    rec = _case(packed, tmp_path, kind)
    first = subprocess.run(script("recio") + ["verify", str(rec)], capture_output=True,
                           text=True, cwd=tmp_path)
    assert first.returncode in (0, 1) and "Traceback" not in first.stderr, first.stderr
    verdict = first.stdout.splitlines()[-2].split(":")[0]
    if kind == "no index":  # no damage: exit 0, and the verdict says what is missing
        assert (first.returncode, verdict) == (0, "NO INDEX"), first.stdout
    steps = [ln for ln in first.stdout.splitlines() if ln.startswith("next: ")]
    assert len(steps) == 1, first.stdout
    command = shlex.split(steps[0].split("`")[1])
    assert command[0] == "recio", steps
    fixed = subprocess.run(script("recio") + command[1:], capture_output=True, text=True,
                           cwd=tmp_path)
    assert fixed.returncode == 0, (kind, steps, fixed.stderr)
    target = rec
    if command[1] == "repair":  # a new file: PREFIX.rec
        target = tmp_path / (command[command.index("-o") + 1] + ".rec")
    again = subprocess.run(script("recio") + ["verify", str(target)], capture_output=True,
                           text=True, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("OK: "), (kind, verdict,
                                                                       again.stdout)
    if kind in ("another list's index", "index cut mid-line", "index cut at a line",
                "no index", "repeated keys", "overwritten"):
        # the new index reads every record of an im2rec pack under its own image id
        with recio.IndexedRecordReader(target) as reader:
            for key in reader.keys():
                assert recio.unpack(reader[key])[0].id == key


def test_a_cut_index_is_reported_as_cut_short(script, packed, tmp_path):
    """An .idx cut in the middle of its last line: verify and every reader say the index was
    cut short, not that an offset is no record head."""
    rec = _case(packed, tmp_path, "index cut mid-line")
    done = subprocess.run(script("recio") + ["verify", str(rec)], capture_output=True,
                          text=True)
    assert done.returncode == 1 and "cut short" in done.stdout, done.stdout
    assert "is not a record head" not in done.stdout
    data = (tmp_path / "t.idx").read_bytes()
    for cut in range(1, 9):  # wherever the cut falls in the last line
        (tmp_path / "t.idx").write_bytes(data[:len(data) - cut] if data.endswith(b"\n")
                                         else data)
        report = subprocess.run(script("recio") + ["verify", str(rec)], capture_output=True,
                                text=True)
        if cut > 1:  # (cut == 1 takes the newline only: every line is whole)
            assert report.returncode == 1 and "BAD INDEX" in report.stdout, report.stdout
            assert "cut short" in report.stdout or "not in the index" in report.stdout
        try:  # a reader says the index was cut short, or answers every key right
            with recio.IndexedRecordReader(rec) as reader:
                for key in reader.keys():
                    assert recio.unpack(reader[key])[0].id == key
        except recio.errors.IndexFileError as exc:
            assert "cut short" in str(exc), exc


def test_the_verdict_line_says_what_was_checked(script, packed, tmp_path):
    """A JPEG whose bytes were overwritten keeps its framing: plain verify says OK and that
    it checked the framing and the index, not the images (--images decodes every image);
    --images finds the image."""
    rec = tmp_path / "t.rec"
    shutil.copy(packed / "job.idx", tmp_path / "t.idx")
    data = bytearray((packed / "job.rec").read_bytes())
    with recio.IndexedRecordReader(packed / "job.rec") as reader:
        offset = int(reader.index.offsets[5])
    start = offset + 8 + 24 + 300
    data[start:start + 100] = bytes(range(100))
    rec.write_bytes(bytes(data))
    plain = subprocess.run(script("recio") + ["verify", str(rec)], capture_output=True,
                           text=True)
    assert plain.returncode == 0
    line = plain.stdout.splitlines()[-1]
    assert line.startswith("OK: ") and "checked the framing of every record and its index" \
        in line and "--images decodes every image" in line, line
    images = subprocess.run(script("recio") + ["verify", str(rec), "--images"],
                            capture_output=True, text=True)
    assert images.returncode == 1 and "DAMAGED" in images.stdout
    assert "decoded every image" in images.stdout
