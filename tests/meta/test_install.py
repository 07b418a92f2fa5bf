"""The install: the ``recio`` and ``im2rec`` console scripts exist for this interpreter and run.

Every other command test runs ``python -m recio`` (independent of PATH); this one checks what
``pip install`` put in place, and fails (never skips) when the scripts are missing.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata

import pytest

import recio

SCRIPTS = {"recio": "recio.__main__:main", "im2rec": "recio.im2rec:main"}


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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.posix_only("makes symlinks, which Windows allows only with a privilege")
def test_a_script_beside_a_folder_named_recio_imports_the_installed_package(tmp_path):
    """A checkout cloned into a folder named ``recio`` (or any folder of that name) next to a
    script must not shadow the installed package: an editable install's import hook used to run
    after the path search, which took the folder for an empty namespace package."""
    checkout = pathlib.Path(recio.__file__).resolve().parent.parent
    (tmp_path / "recio").symlink_to(checkout, target_is_directory=True)
    (tmp_path / "train.py").write_text("import recio\nprint(recio.__file__)\n"
                                       "print(recio.RecordReader.__name__)\n")
    for argv in ([sys.executable, "train.py"], [sys.executable, "-c", "import runpy; "
                                                "runpy.run_path('train.py')"]):
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (
            f"{done.stderr.strip().splitlines()[-1:]}: reinstall recio (pip install -e .) so "
            "the editable install uses pyproject.toml's package-dir")
        assert done.stdout.split() == [recio.__file__, "RecordReader"]
