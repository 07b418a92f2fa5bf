"""What im2rec says after an interruption: a refused --resume names every changed option with its
old and new value (and the options it names resume the pack), and a resumed pack's summary
counts the whole pack, exactly as an uninterrupted pack of the same list prints it.

The packs run as users run them (subprocesses) and are stopped at chosen points by a hook
(``support.hook_env``: SIGKILL, SIGINT or SIGTERM just before the N-th call of a function).
"""
import json
import re
import shlex
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from support import hook_env, make_corpus


pytestmark = pytest.mark.slow  # every test here runs the commands many times or waits


@pytest.fixture
def corpus(tmp_path):
    """A list with everything a summary counts: missing images, malformed lines, lines with
    several labels, a repeated index and images with transparency (dropped in JPEG)."""
    make_corpus(tmp_path, n=60, missing=(3, 30), bad_lines=(9, 40))
    rng = np.random.default_rng(1)
    lines = (tmp_path / "job.lst").read_text().splitlines(True)
    for i in (5, 25, 50):
        Image.fromarray(rng.integers(0, 255, (20, 20, 4), dtype=np.uint8), "RGBA").save(
            tmp_path / "img" / f"t{i}.png")
        lines.insert(i, f"{100 + i}\t1.000000\tt{i}.png\n")
    lines.insert(45, "7\t1.000000\t7.jpg\n")  # index 7 again
    (tmp_path / "job.lst").write_text("".join(lines))
    return tmp_path


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=180,
                          **kw)


def _pack(script, corpus, name, options):
    """``[im2rec name/job ROOT ...]`` with ``name/job.lst`` a fresh copy of the list."""
    folder = corpus / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    shutil.copy(corpus / "job.lst", folder / "job.lst")
    return [*script("im2rec"), folder / "job", corpus / "img", "--resize", "24", *options]


#: what differs between a resumed pack's summary and an uninterrupted one's by nature: the
#: time, the rate and what the resume kept
_TIMING = re.compile(r"[\d.]+ s \(\d+ images/s(, resumed after \d+)?(; \d+ of \d+ parts kept)?\)")


def _summary(proc, name):
    return _TIMING.sub("TIME", (proc.stdout + proc.stderr).replace(f"/{name}/", "/NAME/"))


def _counts(proc):
    [doc] = json.loads(proc.stdout)["lists"]
    for key in ("seconds", "resumed", "parts_kept", "retried", "seconds_lost", "lst", "rec",
                "idx", "errors"):
        doc.pop(key)
    return doc


PLAIN = ["recio.image.packing.output:PackOutput.write:2:KILL",
         "recio.image.packing.output:PackOutput.write:9:INT",
         "recio.image.packing.worker:_read_image_file:50:TERM"]
PARTS = ["recio.image.packing.progress:PackProgress.write_done:2:KILL",
         "recio.image.packing.progress:PackProgress.write_done:3:INT",
         "recio.image.packing.worker:_read_image_file:45:TERM"]


@pytest.mark.posix_only("stops the pack with SIGKILL, SIGINT or SIGTERM")
@pytest.mark.parametrize("options, points", [([], PLAIN), (["--num-thread", "2"], PLAIN[:1]),
                                             (["--num-shards", "3"], PARTS)],
                         ids=["plain", "threads", "shards"])
def test_a_resumed_pack_summarises_the_whole_pack(script, corpus, options, points):
    clean = _run(_pack(script, corpus, "clean", options))
    assert clean.returncode == 0, clean.stderr
    text = _summary(clean, "clean")
    # the summary has everything to count: the resumed one must count it all
    for part in ("packed 62 images, skipped 4 (2 missing, 2 malformed lines)",
                 "4 items skipped (first, line 5: no such file)",
                 "60 line(s) have several labels", "1 list index(es) repeat",
                 "3 image(s) had transparency"):
        assert part in text, text
    clean_json = _run(_pack(script, corpus, "clean", options) + ["--json"])
    for at in points:
        cmd = _pack(script, corpus, "cut", options)
        stopped = _run(cmd, env=hook_env(corpus, kill_at=at))
        assert stopped.returncode in (-9, 130, 143), (at, stopped.stderr)
        resumed = _run(cmd + ["--resume"])
        assert resumed.returncode == 0 and "resumed after" in resumed.stdout, (at, resumed)
        assert _summary(resumed, "cut") == text, at
        stopped = _run(cmd + ["--force"], env=hook_env(corpus, kill_at=at))
        resumed = _run(cmd + ["--resume", "--json"])
        assert resumed.returncode == 0 and json.loads(resumed.stdout)["lists"][0]["resumed"]
        assert _counts(resumed) == _counts(clean_json), at


def _started(message):
    """The options a refused resume says the pack was started with."""
    found = re.search(r"resume it as it was started \((.*?)\), or start over", message)
    assert found, message
    options = []
    for part in found.group(1).split(", "):
        if not part.startswith("without "):
            options += shlex.split(part)
    return options, [part[len("without "):] for part in found.group(1).split(", ")
                     if part.startswith("without ")]


@pytest.mark.posix_only("stops the pack with SIGKILL")
@pytest.mark.parametrize("kind", ["plain", "shards"])
def test_a_refused_resume_names_each_changed_option_and_how_to_resume(script, corpus, kind):
    started = ["--quality", "90", "--color", "0"] + (["--num-shards", "3"] if kind == "shards"
                                                     else [])
    cmd = _pack(script, corpus, "cut", started)
    at = PLAIN[0] if kind == "plain" else PARTS[0]
    assert _run(cmd, env=hook_env(corpus, kill_at=at)).returncode == -9
    base = [*script("im2rec"), corpus / "cut" / "job", corpus / "img"]
    changed = ["--resize", "32", "--center-crop", "--quality", "80", "--exif-transpose"] + (
        ["--num-shards", "4", "--checksums"] if kind == "shards" else [])
    refused = _run(base + changed + ["--resume"])
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    message = refused.stderr
    lst = corpus / "cut" / "job.lst"
    assert message.startswith(f"Error: {lst}: the interrupted pack used other settings: ")
    for said in ["--color was 0, now 1", "--resize was 24, now 32",
                 "--center-crop was not given, now given", "--quality was 90, now 80",
                 "--exif-transpose was the default, now --exif-transpose"] + (
            ["--num-shards was 3, now 4", "--checksums was not given, now given"]
            if kind == "shards" else []):
        assert said in message, (said, message)
    kept = ".recio-pack-job" if kind == "shards" else "job.rec.partial and job.pack.journal"
    assert f"or start over with --force (which deletes {kept})" in message
    # what it says to type resumes the pack
    options, without = _started(message)
    assert sorted(without) == sorted(["--center-crop", "--exif-transpose"]
                                     + (["--checksums"] if kind == "shards" else []))
    resumed = _run(base + options + ["--resume"])
    assert resumed.returncode == 0 and "resumed after" in resumed.stdout, resumed.stderr
    clean = _run(_pack(script, corpus, "clean", started))
    assert _summary(resumed, "cut") == _summary(clean, "clean")


def test_a_refused_resume_of_a_changed_list_says_to_start_over(script, corpus):
    cmd = _pack(script, corpus, "cut", [])
    assert _run(cmd, env=hook_env(corpus, kill_at=PLAIN[0])).returncode == -9
    with open(corpus / "cut" / "job.lst", "a") as f:
        f.write("99\t1\t0.jpg\n")
    refused = _run(cmd + ["--resume"])
    assert refused.returncode == 2
    assert "the interrupted pack used other settings: the list changed since: " in refused.stderr
    assert "resume it as" not in refused.stderr
    assert "start over with --force (which deletes job.rec.partial and job.pack.journal)" \
        in refused.stderr
    again = _run(cmd + ["--force"])
    assert again.returncode == 0 and "packed 63 images" in again.stdout, again.stderr
