"""im2rec's pack on hostile or mistaken input: the wrong ROOT, paths leaving ROOT, special
files, malformed lines, existing outputs, an early kill; and a fuzzer over mutated lists."""
import hashlib
import itertools
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import running_platform
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from recio.cli.im2rec import im2rec_cmd
from recio.errors import OutputExistsError
from recio.image.packing import worker as pack_worker
from recio.image.packing.paths import PackPaths
from recio.image.packing.settings import PackSettings
from recio.image.packing.pipeline import NothingFoundError, pack_list


SENTINEL = b"SECRET-OUTSIDE-ROOT-0123456789"


def _tree(folder):
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.isfile(path):
                out[os.path.relpath(path, folder)] = hashlib.sha256(
                    open(path, "rb").read()).digest()
    return out


@pytest.fixture
def site(tmp_path):
    """ROOT with 6 JPEGs and a PNG with alpha; a secret file beside ROOT (outside it)."""
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    rng = np.random.default_rng(1)
    for i in range(6):
        Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(
            root / "a" / f"{i}.jpg")
    Image.new("RGBA", (8, 8), (1, 2, 3, 100)).save(root / "a" / "alpha.png")
    (tmp_path / "secret.jpg").write_bytes(SENTINEL)
    if running_platform() != "win32":  # symlinks need a privilege there: its case is posix_only
        (root / "a" / "link.jpg").symlink_to(tmp_path / "secret.jpg")
    return tmp_path, root


def _im2rec(script, *args, **kwargs):
    return subprocess.run([*script("im2rec"), *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kwargs)


@pytest.mark.slow
def test_the_wrong_root_fails_with_no_output(script, site):
    tmp, root = site
    lst = tmp / "data.lst"
    lst.write_text("".join(f"{i}\t0\ta/{i}.jpg\n" for i in range(6)))
    before = _tree(tmp)
    for extra in ([], ["--strict"], ["--num-thread", "2"]):
        proc = _im2rec(script, tmp / "data", tmp, *extra)  # ROOT should have been tmp/root
        assert proc.returncode == 1, proc.stderr
        assert "is ROOT right?" in proc.stderr and str(tmp / "a" / "0.jpg") in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert _tree(tmp) == before  # no .rec/.idx/.errors.tsv, no partial files


@pytest.mark.slow
def test_more_than_half_missing_fails_and_keeps_an_older_output(script, site):
    tmp, root = site
    lst = tmp / "data.lst"
    lst.write_text("".join(f"{i}\t0\ta/{i}.jpg\n" for i in range(6)))
    assert _im2rec(script, tmp / "data", root).returncode == 0
    before = _tree(tmp)
    lst.write_text("".join(f"{i}\t0\ta/{i}.jpg\n" for i in range(2))
                   + "".join(f"{i}\t0\tgone/{i}.jpg\n" for i in range(2, 6)))
    before = _tree(tmp)
    proc = _im2rec(script, tmp / "data", root, "--force")
    assert proc.returncode == 1 and "4 of the 6 images tried are missing" in proc.stderr
    assert _tree(tmp) == before  # the older data.rec/.idx are untouched
    proc = _im2rec(script, tmp / "data", root, "--force", "--max-missing", "0.9")
    assert proc.returncode == 0 and "packed 2 images, skipped 4 (4 missing)" in proc.stdout


def test_the_first_hundred_missing_stop_the_pack_early(site):
    tmp, root = site
    lst = tmp / "big.lst"
    lst.write_text("".join(f"{i}\t0\tnope/{i}.jpg\n" for i in range(5000)))
    seen = []
    with pytest.raises(NothingFoundError, match="is ROOT right"):
        pack_list(lst, root, progress=lambda done, total: seen.append(done))
    assert max(seen) < 200  # stopped after about 100 items, not 5000
    assert not any(os.path.exists(p) for p in PackPaths.of(lst).partial)


@pytest.mark.parametrize("line, cause", [
    ("0\t0\t/etc/passwd", "outside_root"),
    ("0\t0\t../secret.jpg", "outside_root"),
    pytest.param("0\t0\ta/link.jpg", "outside_root", marks=pytest.mark.posix_only(
        "a symlink leading out of ROOT: Windows allows symlinks only with a privilege")),
    ("0\t0\t/dev/zero", "outside_root"),
    ("0\t1e40\ta/0.jpg", "malformed_line"),
    ("0\t0\ta/\x00.jpg", "malformed_line"),
    ("x\t0\ta/0.jpg", "malformed_line"),
    ("0\ta/0.jpg", "malformed_line"),
])
@pytest.mark.slow
def test_refused_lines_are_skipped_per_line(script, site, line, cause):
    tmp, root = site
    lst = tmp / "one.lst"
    lst.write_text(f"{line}\n7\t0\ta/1.jpg\n")
    before = _tree(tmp)
    proc = _im2rec(script, tmp / "one", root, "--pass-through", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["lists"][0]
    assert report["packed"] == 1 and report["skips"] == {cause: 1}
    assert SENTINEL not in (tmp / "one.rec").read_bytes()
    assert b"root:" not in (tmp / "one.rec").read_bytes()
    rows = (tmp / "one.errors.tsv").read_text().splitlines()
    assert rows[1].split("\t")[0] == "1"  # the line number
    if cause == "outside_root":
        assert "--allow-outside-root" in rows[1]
    after = _tree(tmp)
    assert {k: v for k, v in after.items() if k in before} == before


def test_allow_outside_root_reads_there(site):
    tmp, root = site
    lst = tmp / "out.lst"
    lst.write_text("0\t0\t../secret.jpg\n1\t0\ta/1.jpg\n")
    result = pack_list(lst, root, PackSettings(pass_through=True, allow_outside_root=True))
    assert result.packed == 2 and SENTINEL in (tmp / "out.rec").read_bytes()


@pytest.mark.posix_only("FIFOs, /dev/null and symlinks are POSIX's")
def test_a_record_its_header_makes_too_large_is_skipped(tmp_path, monkeypatch):
    """A file that fits in a record but whose record (header + payload) does not is skipped
    as ``too_large``, with the record's size in the reason, and the pack goes on."""
    monkeypatch.setattr(pack_worker, "MAX_RECORD_LENGTH", 1000)
    root = tmp_path / "img"
    root.mkdir()
    (root / "big.jpg").write_bytes(bytes(990))
    (root / "small.jpg").write_bytes(bytes(100))
    lst = tmp_path / "job.lst"
    lst.write_text("0\t0\tbig.jpg\n1\t0\tsmall.jpg\n")
    result = pack_list(lst, root, PackSettings(pass_through=True))
    assert (result.packed, result.skips) == (1, {"too_large": 1})
    assert "record of 1014 bytes is too large" in (tmp_path / "job.errors.tsv").read_text()


def test_fifos_devices_and_folders_are_not_opened(site):
    tmp, root = site
    os.mkfifo(root / "a" / "fifo.jpg")  # opening it for reading would block forever
    (root / "a" / "dir.jpg").mkdir()
    (root / "a" / "dev.jpg").symlink_to("/dev/null")
    lst = tmp / "sp.lst"
    lst.write_text("0\t0\ta/fifo.jpg\n1\t0\ta/dir.jpg\n2\t0\ta/0.jpg\n")
    result = pack_list(lst, root)
    assert result.packed == 1 and result.skips == {"not_a_file": 2}
    rows = (tmp / "sp.errors.tsv").read_text()
    assert "is a FIFO, not a regular file" in rows and "is a directory" in rows
    lst.write_text("0\t0\ta/dev.jpg\n1\t0\ta/0.jpg\n")
    result = pack_list(lst, root, PackSettings(allow_outside_root=True, force=True))
    assert result.skips == {"not_a_file": 1}


@pytest.mark.slow
def test_existing_outputs_need_force_and_resume_continues(script, site):
    tmp, root = site
    lst = tmp / "data.lst"
    lst.write_text("".join(f"{i}\t0\ta/{i}.jpg\n" for i in range(6)))
    assert _im2rec(script, tmp / "data", root).returncode == 0
    before = _tree(tmp)
    proc = _im2rec(script, tmp / "data", root)
    assert proc.returncode == 2 and "already exists; use --force" in proc.stderr
    assert _tree(tmp) == before
    proc = _im2rec(script, tmp / "data", root, "--resume")
    assert proc.returncode == 0 and "already packed" in proc.stdout
    assert _im2rec(script, tmp / "data", root, "--force").returncode == 0
    with pytest.raises(OutputExistsError):
        pack_list(lst, root)


@pytest.mark.parametrize("journal", [b"", b"#recio-pack-jou"])
def test_resume_after_a_kill_in_the_first_moments(site, journal):
    tmp, root = site
    lst = tmp / "early.lst"
    lst.write_text("".join(f"{i}\t0\ta/{i}.jpg\n" for i in range(6)))
    rec_partial, journal_path = PackPaths.of(lst).partial
    open(rec_partial, "wb").close()
    open(journal_path, "wb").write(journal)
    result = pack_list(lst, root, PackSettings(resume=True))
    assert result.packed == 6 and result.resumed == 0
    fresh = tmp / "fresh"
    fresh.mkdir()
    shutil.copy(lst, fresh / "early.lst")
    pack_list(fresh / "early.lst", root)
    assert (fresh / "early.rec").read_bytes() == (tmp / "early.rec").read_bytes()


@pytest.mark.slow
def test_what_is_dropped_is_said(script, site):
    tmp, root = site
    lst = tmp / "d.lst"
    lst.write_text("0\t1\t2\ta/0.jpg\n0\t1\t2\ta/1.jpg\n2\t3\ta/alpha.png\n")
    proc = _im2rec(script, tmp / "d", root, "--json")
    report = json.loads(proc.stdout)["lists"][0]
    assert (report["labels_ignored"], report["repeated_indices"], report["alpha_dropped"]) == \
        (2, 1, 1)
    proc = _im2rec(script, tmp / "d", root, "--force")
    assert "2 line(s) have several labels" in proc.stderr and "--pack-label" in proc.stderr
    assert "1 list index(es) repeat" in proc.stderr
    assert "1 image(s) had transparency" in proc.stderr
    proc = _im2rec(script, tmp / "d", root, "--force", "--pass-through", "--resize", "32",
                   "--quality", "80")
    assert "--resize, --quality ignored" in proc.stderr
    proc = _im2rec(script, tmp / "d", root, "--force", "--color", "-1", "--encoding", ".png",
                   "--pack-label", "--json")
    assert json.loads(proc.stdout)["lists"][0]["alpha_dropped"] == 0


def test_skip_reasons_name_no_in_memory_object(site):
    tmp, root = site
    (root / "a" / "text.jpg").write_text("not an image")
    (root / "a" / "gif.jpg").write_bytes(b"GIF89a" + b"\0" * 20)
    lst = tmp / "r.lst"
    lst.write_text("0\t0\ta/text.jpg\n1\t0\ta/gif.jpg\n2\t0\ta/0.jpg\n")
    pack_list(lst, root)
    text = (tmp / "r.errors.tsv").read_text()
    assert "BytesIO" not in text and " object at 0x" not in text


# -- the fuzzer: mutated lists never give a traceback, a hang or a read outside ROOT -----------

_RUNS = itertools.count()
_GOOD = "".join(f"{i}\t{i % 3}.000000\ta/{i}.jpg\n" for i in range(6))
_NASTY = ["\x00", "\t", "\r", "\n", "..", "/", "../secret.jpg", "/etc/passwd", "/dev/zero",
          "1e40", "-1", "nan", "inf", "18446744073709551616", "a/link.jpg", "\udcff", " ",
          "a/alpha.png", "a/", "a/fifo.jpg"]


@pytest.mark.slow
@pytest.mark.posix_only("a FIFO is among the names the lists may hold")
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_lists_never_crash_hang_or_leave_root(site, data):
    tmp, root = site
    if not (root / "a" / "fifo.jpg").exists():
        os.mkfifo(root / "a" / "fifo.jpg")
    text = _GOOD
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(text)))
        if data.draw(st.booleans()):
            text = text[:pos] + data.draw(st.sampled_from(_NASTY)) + text[pos:]
        else:
            text = text[:pos] + text[pos + data.draw(st.integers(0, 8)):]
    folder = tmp / f"fz{next(_RUNS)}"
    folder.mkdir()
    (folder / "f.lst").write_bytes(text.encode("utf-8", "surrogateescape"))
    args = [str(folder / "f"), str(root), "--pass-through" if data.draw(st.booleans()) else
            "--resize=8", "--num-thread", str(data.draw(st.sampled_from([1, 2])))]
    result = CliRunner().invoke(im2rec_cmd, args)
    assert result.exit_code in (0, 1), (text, result.output, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception,
                                                                     SystemExit)
    rec = folder / "f.rec"
    if result.exit_code == 0:
        assert SENTINEL not in rec.read_bytes() and b"root:" not in rec.read_bytes()
    else:
        assert not rec.exists()
    assert not any(os.path.exists(p) for p in PackPaths.of(folder / "f.lst").partial)


@pytest.mark.slow
def test_a_few_mutated_lists_through_the_real_command(script, site):
    tmp, root = site
    for i, line in enumerate(["0\t1e40\ta/0.jpg", "0\t0\t/dev/zero", "0\t0\ta/\udcff.jpg",
                              "\t\t\t", "0\t0\t../../../../etc/passwd"]):
        lst = tmp / f"m{i}.lst"
        lst.write_bytes((line + "\n" + _GOOD).encode("utf-8", "surrogateescape"))
        proc = _im2rec(script, tmp / f"m{i}", root, "--pass-through")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert SENTINEL not in (tmp / f"m{i}.rec").read_bytes()
