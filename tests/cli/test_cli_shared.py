"""The rules every command shares: what an output may replace, progress in logs, mistyped
subcommands, URLs, exit statuses."""
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recio.cli.common import LogProgress
from recio.errors import OutputExistsError, RecordIOError
from recio.records.atomic import check_outputs

from conftest import GOLDEN, command


@pytest.mark.posix_only("makes symlinks, which Windows allows only with a privilege")
def test_an_input_is_never_an_output_even_with_force(tmp_path):
    src = tmp_path / "a.rec"
    src.write_bytes(b"data")
    link = tmp_path / "link.rec"
    link.symlink_to(src)
    hard = tmp_path / "hard.rec"
    os.link(src, hard)
    for out in (src, link, hard, tmp_path / "sub" / ".." / "a.rec"):
        with pytest.raises(OutputExistsError, match="is an input of this command") as err:
            check_outputs([out], [src], force=True)
        assert err.value.path == os.fspath(out)
    assert src.read_bytes() == b"data"


@pytest.mark.posix_only("makes symlinks, which Windows allows only with a privilege")
def test_an_existing_output_needs_force(tmp_path):
    old = tmp_path / "old.idx"
    old.write_text("0\t0\n")
    new = tmp_path / "new.idx"
    with pytest.raises(OutputExistsError, match="already exists; pass force=True") as err:
        check_outputs([new, old], [tmp_path / "in.rec"])
    assert err.value.path == os.fspath(old) and isinstance(err.value, RecordIOError)
    assert err.value.for_command().endswith("already exists; use --force to replace it")
    check_outputs([new, old], [tmp_path / "in.rec"], force=True)  # allowed with force
    check_outputs([new], [tmp_path / "in.rec"])  # nothing exists: allowed
    dangling = tmp_path / "dangling.idx"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputExistsError):
        check_outputs([dangling])


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4),
       inputs=st.sets(st.sampled_from(["a", "b", "c", "d"])),
       existing=st.sets(st.sampled_from(["a", "b", "c", "d"])), force=st.booleans())
def test_check_outputs_refuses_exactly_inputs_and_unforced_existing(tmp_path_factory, names,
                                                                    inputs, existing, force):
    folder = tmp_path_factory.mktemp("outs")
    for name in existing | inputs:
        (folder / name).write_text(name)
    outs = [folder / n for n in names]
    refused = bool(set(names) & inputs) or (not force and bool(set(names) & (existing | inputs)))
    try:
        check_outputs(outs, [folder / n for n in inputs], force=force)
    except OutputExistsError:
        assert refused
    else:
        assert not refused


def test_log_progress_prints_plain_lines_at_its_interval(capsys, monkeypatch):
    monkeypatch.setenv("RECIO_PROGRESS_SECONDS", "0")
    with LogProgress(total=2000, desc="pack", unit="img") as bar:
        bar.update(1000)
        bar.update(1000)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("pack: 1,000/2,000 img (50%)")
    assert lines[1].startswith("pack: 2,000/2,000 img (100%)")
    assert lines[-1].startswith("pack: 2,000/2,000 img (100%)") and len(lines) == 3


def test_log_progress_is_silent_for_short_jobs(capsys, monkeypatch):
    monkeypatch.setenv("RECIO_PROGRESS_SECONDS", "3600")
    with LogProgress(total=10, desc="x") as bar:
        bar.update(10)
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_command_logs_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    rec = GOLDEN / "records" / "tricky.rec"
    env = dict(os.environ, RECIO_PROGRESS_SECONDS="0")
    proc = subprocess.run([*command("recio"), "verify", str(rec)], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "verify: " in proc.stderr and " B" in proc.stderr and "Traceback" not in proc.stderr


def test_a_mistyped_subcommand_gets_a_suggestion():
    proc = subprocess.run([*command("recio"), "inspct", "x.rec"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "No such command 'inspct'. Did you mean 'inspect'?" in proc.stderr


@pytest.mark.slow
def test_version_and_exit_statuses_are_documented():
    proc = subprocess.run([*command("recio"), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("recio, version ")
    help_text = subprocess.run([*command("recio"), "--help"], capture_output=True,
                               text=True).stdout
    for status in ("0 success", "1 damage", "2 usage", "130 interrupted"):
        assert status in help_text
