"""The install: the ``recio`` and ``im2rec`` console scripts exist for this interpreter and run.

Every other command test runs ``python -m recio`` (independent of PATH); this one checks what
``pip install`` put in place, and fails (never skips) when the scripts are missing.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata

import pytest

import recio

SCRIPTS = {"recio": "recio.cli.main:main", "im2rec": "recio.cli.im2rec:main"}


def installed_script(name: str) -> str:
    """Path of console script ``name`` installed for this interpreter: in its scripts folder (a
    virtualenv's bin/, whether or not that is on PATH) or its user scheme's (pip --user). Not
    any ``name`` on PATH: that may belong to another Python."""
    folders = [sysconfig.get_path("scripts")]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        folders.append(sysconfig.get_path("scripts", user_scheme))
    for folder in folders:
        found = shutil.which(name, path=folder)
        if found:
            return found
    pytest.fail(f"console script {name!r} is not installed for {sys.executable} (looked in "
                f"{', '.join(folders)}): run `make install` or `pip install -e .`", pytrace=False)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_entry_point_is_declared(name):
    points = {ep.name: ep.value for ep in metadata.distribution("recio").entry_points
              if ep.group == "console_scripts"}
    assert points.get(name) == SCRIPTS[name]


def test_console_scripts_exist_and_work(golden, tmp_path):
    recio_exe, im2rec_exe = installed_script("recio"), installed_script("im2rec")
    for exe in (recio_exe, im2rec_exe):
        done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Usage:" in done.stdout, done.stderr
    rec = tmp_path / "r.rec"
    with recio.RecordWriter(str(rec)) as writer:
        for payload in (b"", b"one", b"two" * 1000):
            writer.write(payload)
    done = subprocess.run([recio_exe, "inspect", str(rec), "--json"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 3
    shutil.copytree(golden / "im2rec" / "images", tmp_path / "images")
    done = subprocess.run([im2rec_exe, str(tmp_path / "photos"), str(tmp_path / "images"),
                           "--list", "--recursive"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "photos.lst").read_bytes() == (golden / "im2rec" / "all.lst").read_bytes()
