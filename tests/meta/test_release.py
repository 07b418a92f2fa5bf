"""What a release hands a stranger: the licence, the changelog, ``--version`` on both commands,
and the wheel and sdist themselves, built, checked by twine and installed as a user installs
them.

The wheel test (``test_the_wheel_installs_into_a_fresh_virtualenv_and_packs``) builds both
distributions with ``python -m build``, installs the wheel with its dependencies from the
package index into a new virtualenv that sees nothing of this one, and runs the commands there:
``recio --version``, ``im2rec --version``, ``im2rec --help``, and a real list and pack of the
golden photos, whose ``.rec`` must be MXNet's byte for byte. The four ``release`` tests take
about 20 s together on the project's machine (the build 5 s; pip installing the wheel and
NumPy, Pillow and the rest 9 s, longer where pip has to download them); they run in ``make
test`` like every other test, and ``pytest -m "not release"`` leaves them out of a quick run.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from importlib import metadata

import pytest
from conftest import command, need

import recio

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
PYPROJECT = ROOT / "pyproject.toml"
#: what every sdist must hold besides the package's modules
SDIST_NEEDS = ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "PKG-INFO",
               "recio/py.typed", "recio/__init__.py", "recio/cli/main.py")
#: what no sdist or wheel may hold: bytecode, the tests (they need the whole checkout), build
#: output, the docs site, editor and VCS files
JUNK = re.compile(r"(^|/)(__pycache__|\.git|\.github|\.ci|tests|site|build|dist|examples|"
                  r"benchmarks|docs|\.mypy_cache|\.pytest_cache|\.hypothesis)(/|$)|\.py[cod]$|"
                  r"\.tmp$|~$")


def _text(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8")


def _project_version() -> str:
    found = re.search(r'^version = "([^"]+)"$', _text(PYPROJECT), re.M)
    assert found, "pyproject.toml has no static version"
    return found.group(1)


# -- licence, changelog, version -----------------------------------------------------------------

def test_the_licence_is_apache_2_in_the_file_and_the_metadata():
    licence = _text(ROOT / "LICENSE")
    assert licence.lstrip().startswith("Apache License\n")
    assert "Version 2.0, January 2004" in licence and "END OF TERMS AND CONDITIONS" in licence
    assert "Copyright 2026 the recio authors" in licence
    assert "[yyyy]" not in licence
    text = _text(PYPROJECT)
    assert re.search(r'^license = "Apache-2.0"$', text, re.M)
    assert re.search(r'^license-files = \["LICENSE"\]$', text, re.M)
    # PEP 639: a licence classifier beside the expression is an error for setuptools >= 77
    assert "License ::" not in text
    assert metadata.metadata("recio").get("License-Expression") in ("Apache-2.0", None), \
        "an old editable install: run make install-dev"


def test_the_project_urls_are_one_repository_everywhere():
    urls = dict(re.findall(r'^(\w+) = "(https://[^"]+)"$', _text(PYPROJECT), re.M))
    assert set(urls) >= {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}
    repo = urls["Repository"]
    assert all(u.startswith(repo) for k, u in urls.items() if k != "Documentation"), urls
    readme, changelog = _text(ROOT / "README.md"), _text(CHANGELOG)
    assert repo in readme and urls["Documentation"] in readme
    assert f"{repo}/compare/" in changelog or f"{repo}/releases/tag/" in changelog


def test_the_changelog_keeps_a_changelog_and_names_this_version():
    """Keep a Changelog 1.1: an Unreleased section, then each release newest first as
    ``## [X.Y.Z] - YYYY-MM-DD`` with its sections, and a link for every bracketed version."""
    text = _text(CHANGELOG)
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com" in text and "semver.org" in text
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert releases[0] == ("Unreleased", ""), releases
    assert releases[1][0] == _project_version() == recio.__version__, releases
    assert all(date for _, date in releases[1:]), "every release has its date"
    headings = re.findall(r"^### (.+)$", text, re.M)
    assert headings and set(headings) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed",
                                          "Security"}, headings
    links = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", text, re.M))
    assert {name for name, _ in releases} <= set(links), links


@pytest.mark.slow
def test_both_commands_print_the_same_version_line():
    version = metadata.version("recio")
    assert version == recio.__version__ == _project_version()
    lines = {}
    for name, argv in (("recio", command("recio")), ("im2rec", command("im2rec")),
                       ("recio", command("recio") + ["im2rec"])):
        done = subprocess.run(argv + ["--version"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and not done.stderr, done.stderr
        lines[" ".join(argv[2:])] = done.stdout
        assert done.stdout == f"{name}, version {version}\n", done.stdout
    assert len(lines) == 3


# -- the wheel and the sdist ---------------------------------------------------------------------

def _members(path: pathlib.Path) -> list:
    """The files of a wheel, or of an sdist without its top folder (``recio-X.Y.Z/``)."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as whl:
            return whl.namelist()
    with tarfile.open(path) as sdist:
        return [m.name.split("/", 1)[1] for m in sdist.getmembers()
                if m.isfile() and "/" in m.name]


def _run(argv, cwd=None, timeout=600):
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The sdist and the wheel, built from this checkout by ``python -m build`` (the sdist
    first, the wheel from it, each in an isolated build environment)."""
    need("build")
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    sdist, = out.glob("recio-*.tar.gz")
    wheel, = out.glob("recio-*-py3-none-any.whl")
    return sdist, wheel


@pytest.mark.release
def test_twine_accepts_both_distributions(dists):
    need("twine")
    done = _run([sys.executable, "-m", "twine", "check", "--strict", *dists])
    assert done.stdout.count("PASSED") == 2, done.stdout


@pytest.mark.release
def test_the_sdist_holds_what_a_user_needs_and_nothing_else(dists):
    sdist, _ = dists
    version = _project_version()
    assert sdist.name == f"recio-{version}.tar.gz"
    files = _members(sdist)
    missing = [name for name in SDIST_NEEDS if name not in files]
    assert not missing, missing
    junk = sorted(f for f in files if JUNK.search(f))
    assert not junk, junk
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "recio").rglob("*.py")}
    assert modules <= set(files), sorted(modules - set(files))


@pytest.mark.release
def test_the_wheel_holds_the_package_its_licence_and_metadata(dists):
    _, wheel = dists
    version = _project_version()
    files = _members(wheel)
    info = f"recio-{version}.dist-info"
    assert f"{info}/licenses/LICENSE" in files and "recio/py.typed" in files
    assert not [f for f in files if JUNK.search(f)]
    assert all(f.startswith(("recio/", info + "/")) for f in files), files
    with zipfile.ZipFile(wheel) as whl:
        meta = whl.read(f"{info}/METADATA").decode()
        points = whl.read(f"{info}/entry_points.txt").decode()
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    assert "Project-URL: Changelog, " in meta and "Requires-Python: >=3.9" in meta
    assert "recio = recio.__main__:main" in points and "im2rec = recio.im2rec:main" in points


@pytest.mark.release
def test_the_wheel_installs_into_a_fresh_virtualenv_and_packs(dists, tmp_path, golden):
    """As a user: a new virtualenv (no system or dev site-packages), ``pip install`` of the
    wheel with its dependencies from the index, then the commands from the virtualenv's bin/."""
    _, wheel = dists
    venv = tmp_path / "venv"
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", venv])
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / ("python.exe" if os.name == "nt" else "python")
    _run([python, "-m", "pip", "install", "-q", wheel], timeout=1200)
    installed = time.monotonic() - started
    version = _project_version()
    # the package came from the wheel, not from this checkout (no .pth, nothing on PYTHONPATH)
    where = _run([python, "-c", "import recio, sys; print(recio.__file__); "
                  "print(sys.flags.no_site, sys.prefix != sys.base_prefix)"],
                 cwd=tmp_path).stdout.split("\n")
    assert pathlib.Path(where[0]).resolve().is_relative_to(venv.resolve()), where
    assert where[1] == "0 True", where
    recio_exe, im2rec_exe = (shutil.which(name, path=str(bin_dir)) for name in ("recio", "im2rec"))
    assert recio_exe and im2rec_exe, os.listdir(bin_dir)
    assert _run([recio_exe, "--version"]).stdout == f"recio, version {version}\n"
    assert _run([im2rec_exe, "--version"]).stdout == f"im2rec, version {version}\n"
    usage = _run([im2rec_exe, "--help"]).stdout
    assert usage.startswith("Usage: im2rec [OPTIONS] PREFIX ROOT") and "--resize" in usage
    # a real list and pack, with the installed command, of the photos MXNet's im2rec packed
    shutil.copytree(golden / "im2rec" / "images", tmp_path / "images")
    _run([im2rec_exe, "photos", "images", "--list", "--recursive"], cwd=tmp_path)
    assert (tmp_path / "photos.lst").read_bytes() == (golden / "im2rec" / "all.lst").read_bytes()
    packed = _run([im2rec_exe, "photos", "images", "--resize", "32", "--quality", "90"],
                  cwd=tmp_path)
    assert "packed 13 images, skipped 0" in packed.stderr + packed.stdout
    for ext in (".rec", ".idx"):
        assert (tmp_path / f"photos{ext}").read_bytes() == \
            (golden / "im2rec" / f"all{ext}").read_bytes(), f"photos{ext} is not MXNet's"
    _run([recio_exe, "verify", "photos.rec", "--images"], cwd=tmp_path)
    print(f"fresh virtualenv with the wheel and its dependencies: {installed:.0f} s")


# -- the checks above can fail -------------------------------------------------------------------

def test_the_junk_pattern_catches_what_it_should():
    for bad in ("tests/test_x.py", "recio/__pycache__/a.cpython-311.pyc", "recio/a.pyc",
                "docs/index.md", "site/index.html", ".github/workflows/tests.yml", "x.tmp"):
        assert JUNK.search(bad), bad
    for good in ("recio/records/reader.py", "recio/py.typed", "LICENSE", "README.md",
                 "recio/image/testing_helpers.py", "recio/sitecustom.py"):
        assert not JUNK.search(good), good
