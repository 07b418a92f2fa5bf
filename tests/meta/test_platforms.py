"""The platforms recio claims, and what keeps the claim true (issue 33).

pyproject.toml's classifiers and requires-python, the README, docs/platforms.md and the CI
workflow for the systems this machine cannot run (.github/workflows/tests.yml) must say the
same: Linux, macOS and Windows, each tested on the oldest and the newest Python claimed, Windows
with the Makefile's commands spelled out. The linux_only / posix_only markers of
tests/conftest.py are checked here too: a test another platform cannot run is skipped there
with its reason, which CI=true accepts.
"""
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import need

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "tests.yml"
SYSTEMS = {"ubuntu-latest": "Operating System :: POSIX :: Linux",
           "macos-latest": "Operating System :: MacOS",
           "windows-latest": "Operating System :: Microsoft :: Windows"}


def _text(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8")


def _pythons():
    """The Python versions pyproject.toml claims, oldest first, as (major, minor)."""
    text = _text(ROOT / "pyproject.toml")
    found = sorted({(3, int(m)) for m in re.findall(
        r'"Programming Language :: Python :: 3\.(\d+)"', text)})
    floor = re.search(r'^requires-python = ">=3\.(\d+)"', text, re.M)
    assert floor and found[0] == (3, int(floor.group(1))), "requires-python and classifiers"
    assert found == [(3, m) for m in range(found[0][1], found[-1][1] + 1)], found  # no gap
    return found


def _workflow():
    yaml = need("yaml")
    return yaml.safe_load(_text(WORKFLOW))["jobs"]["test"]


def _dotted(version) -> str:
    return "%d.%d" % version


def test_the_classifiers_name_the_three_systems():
    text = _text(ROOT / "pyproject.toml")
    assert all(f'"{c}"' in text for c in SYSTEMS.values())


def test_the_workflow_runs_every_system_on_the_oldest_and_newest_python():
    pythons = _pythons()
    matrix = _workflow()["strategy"]["matrix"]
    assert set(matrix["os"]) == set(SYSTEMS)
    assert matrix["python"] == [_dotted(pythons[0]), _dotted(pythons[-1])]
    for extra in matrix.get("include", []):  # additions to those jobs, never new jobs
        assert extra["os"] in matrix["os"] and extra["python"] in matrix["python"], extra


def test_the_documentation_says_the_same_pythons_and_systems():
    pythons = _pythons()
    readme = _text(ROOT / "README.md")
    assert (f"recio runs on Python {_dotted(pythons[0])} to {_dotted(pythons[-1])}, on Linux, "
            "macOS and Windows") in readme
    page = _text(ROOT / "docs" / "platforms.md")
    assert page.startswith("# Platforms\n"), "docs/platforms.md has no Platforms page"
    for name in ("Linux", "macOS", "Windows", "RECIO_TEST_REMOVE", ".github/workflows/tests.yml"):
        assert name in page, name


def test_the_workflow_pins_the_makefiles_torch():
    pin = re.search(r'"(torch==[\d.]+)" if sys.version_info\[:2\] == \(3, (\d+)\)',
                    _text(ROOT / "Makefile"))
    assert pin, "the Makefile's TORCH_PIN"
    for extra in _workflow()["strategy"]["matrix"]["include"]:
        if "torch" in extra:
            assert extra["torch"] in (pin.group(1), pin.group(1) + "+cpu"), extra


def _steps(windows: bool) -> str:
    steps = _workflow()["steps"]
    return "\n".join(s.get("run", "") for s in steps
                     if ("runner.os == 'Windows'" in s.get("if", "")) == windows)


def test_linux_and_macos_run_make_test():
    assert re.search(r"^make test PYTHON=python$", _steps(windows=False), re.M)


def test_windows_runs_the_makefiles_commands():
    """Windows has no make: its steps must install the same extras, check the same imports,
    pin the same torchdata and run ruff, mypy and pytest as ``make test`` does, under CI=true."""
    makefile = _text(ROOT / "Makefile")
    windows = _steps(windows=True)
    extras = re.search(r"install -q -e '(\.\[[\w,]+\])'", makefile).group(1)
    assert f"pip install -q -e '{extras}'" in windows
    check = re.search(r"^check-install:\n\t\$\(PYTHON\) (\.ci/check_install\.py)"
                      r"\$\(if \$\(strip \$\(TORCH_PIN\)\), (--torch)\)", makefile, re.M)
    assert check, "the Makefile's check-install recipe"
    assert re.search(rf"^python {re.escape(check.group(1))} "
                     r'\$\(\[ -n "\$TORCH_PIN" \] && echo --torch\)$', windows, re.M)
    torchdata = re.search(r"--no-deps '(torchdata==[\d.]+)'", makefile).group(1)
    assert f"--no-deps '{torchdata}'" in windows
    test_recipe = re.search(r"^test:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    pytest_run = re.search(r"\$\(PYTHON\) (-m pytest .*)$", test_recipe, re.M).group(1)
    assert f"python {pytest_run}" in windows
    lint = re.search(r"^LINT = \$\(PYTHON\) (-m ruff .*)$", makefile, re.M).group(1)
    assert "\t$(LINT)" in test_recipe and f"python {lint}" in windows
    type_check = re.search(r"^\t\$\(PYTHON\) (-m mypy .*)$", makefile, re.M).group(1)
    assert f"python {type_check}" in windows
    assert "CI=true" in windows and "RECIO_TEST_WITHOUT" in windows
    assert "python .ci/check_python.py" in windows


# -- every Python line of the workflow runs here ----------------------------------------------

CHECK_INSTALL = ROOT / ".ci" / "check_install.py"


def _workflow_commands():
    """Every command line of the workflow's run steps (continuations joined), all systems."""
    text = "\n".join(s.get("run", "") for s in _workflow()["steps"])
    return [ln.strip() for ln in text.replace("\\\n", " ").splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def test_the_workflow_runs_no_python_code_of_its_own():
    """Python code written into the workflow (``python -c``) runs only on CI's machines, where
    a moved name broke the Windows job unseen; the workflow runs scripts of the repository and
    the Makefile's commands instead, and every script it runs is run by a test here."""
    lines = _workflow_commands()
    assert not [ln for ln in lines if re.search(r"\bpython3? -c\b", ln)]
    scripts = set(re.findall(r"\bpython3? ((?:\.ci|tests|examples)/[\w/.-]+\.py)", "\n".join(lines)))
    assert scripts == {".ci/check_python.py", ".ci/check_install.py"}, scripts
    tests_text = "\n".join(_text(f) for f in (ROOT / "tests").rglob("test_*.py"))
    for script in scripts:
        assert (ROOT / script).is_file(), script
        assert pathlib.Path(script).name in tests_text, f"no test runs {script}"
    makefile = _text(ROOT / "Makefile")
    assert re.search(r"^test: .*\bcheck-install\b", makefile, re.M), "make test runs check-install"
    test_recipe = re.search(r"^test:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    assert "$(SITE_CHECK)" in test_recipe and re.search(
        r"^SITE_CHECK = CI=true \$\(PYTHON\) \.ci/site_check\.py site$", makefile, re.M)


def test_every_pytest_pass_of_make_test_leaves_out_an_unpinned_torch():
    """Both pytest passes (the suite, and the portable files without Linux's facilities) run
    under CI=true with RECIO_TEST_WITHOUT=torch where no torch build is pinned (Python 3.9 and
    3.13): the second pass once lacked it and failed there on every torch test."""
    makefile = _text(ROOT / "Makefile")
    env = re.search(r"^TEST_ENV = (.*)$", makefile, re.M)
    assert env and env.group(1) == \
        "CI=true RECIO_TEST_WITHOUT='$(if $(strip $(TORCH_PIN)),,torch)'", env
    passes = [ln for ln in makefile.splitlines() if "-m pytest" in ln and "$(PYTHON)" in ln]
    assert all("$(TEST_ENV) " in ln for ln in passes), passes  # make test-fast's too
    test_recipe = re.search(r"^test:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    assert len([ln for ln in passes if ln in test_recipe]) == 2, passes


def _check_install(*args, pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(CHECK_INSTALL), *args], capture_output=True,
                          text=True, timeout=600, env=env, cwd=ROOT)


def test_the_python_check_passes_here():
    """``make check-python`` / the workflow's first step: this interpreter (a virtualenv's)
    is accepted without a word."""
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "check_python.py")],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done


@pytest.mark.slow
def test_the_install_check_passes_here():
    """What ``make check-install`` and the Windows job run: every requirement of recio and its
    extras (the dev environment has them all) imports, and the commands list, pack and verify."""
    done = _check_install()
    assert done.returncode == 0, done.stderr
    assert re.search(r"recio\[[\w,]*dev[\w,]*\]: \d+ requirements installed and importing; ran "
                     r"recio --version, im2rec --version, a list, a pack", done.stdout), done.stdout


@pytest.mark.slow
@pytest.mark.needs("torch", "torchdata")
def test_the_install_check_with_torch_passes_here():
    done = _check_install("--torch", "--extras", "torch")
    assert done.returncode == 0, done.stderr
    assert "torch and torchdata" in done.stdout


@pytest.mark.slow
def test_the_install_check_names_a_broken_an_old_and_a_missing_dependency(tmp_path):
    """A dependency that does not import (a package shadowing it that raises), one at a version
    recio excludes (an older click's metadata found first), and an extra recio lacks: each
    gets its line naming what to install, and the commands are not run."""
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError('broken on purpose')")
    info = tmp_path / "click-7.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: click\nVersion: 7.1\n")
    done = _check_install("--extras", "plot,nosuch", pythonpath=tmp_path)
    assert done.returncode == 1 and not done.stdout, done.stdout
    lines = done.stderr.splitlines()
    assert any("`import matplotlib` fails: ImportError: broken on purpose (needed by "
               "recio[plot]): pip install 'matplotlib>=" in ln for ln in lines), lines
    assert "check_install: click 7.1 is installed, which click>=8.0 excludes (needed by recio): " \
           "pip install 'click>=8.0'" in lines, lines
    assert any("recio declares no extra 'nosuch'" in ln for ln in lines), lines
    assert all(ln.startswith("check_install: ") for ln in lines), lines


def test_the_install_check_finds_import_names_in_the_distributions_files():
    from importlib import metadata

    spec = importlib.util.spec_from_file_location("check_install", CHECK_INSTALL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.import_names(metadata.distribution("click")) == ["click"]
    names = module.import_names(metadata.distribution("pytest"))
    assert "pytest" in names and "_pytest" not in names
    assert "PIL" in module.import_names(metadata.distribution("pillow"))


def test_the_shard_cache_without_posix_locks_refuses_in_one_line(tmp_path, monkeypatch):
    """Windows has no fcntl: ShardCache (cache_dir=) says so and what to do instead, and
    tests/records/shards/test_cache.py is posix_only."""
    from recio import portable
    from recio.records.cache import shard_cache as cache
    monkeypatch.setattr(portable, "has_file_locks", lambda: False)
    with pytest.raises(OSError, match="needs POSIX file locks") as info:
        cache.ShardCache(tmp_path / "cache")
    assert "\n" not in str(info.value) and "without cache_dir" in str(info.value)
    assert not (tmp_path / "cache").exists()


def test_no_test_needs_files_outside_the_repository():
    """The workflow checks out the repository alone (no ../shared beside it)."""
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == pathlib.Path(__file__).name or "data" in path.relative_to(ROOT).parts:
            continue
        assert not re.search(r"\.\./shared|/work/", _text(path)), path.name


# -- the platform markers ---------------------------------------------------------------------

MARKED = '''
import pytest


@pytest.mark.linux_only("reads /proc/self/fd")
def test_linux():
    pass


@pytest.mark.posix_only("sends SIGKILL")
def test_posix():
    pass


@pytest.mark.parametrize("method", [pytest.param("fork", marks=pytest.mark.posix_only("fork")),
                                    "spawn"])
def test_method(method):
    pass
'''


def _run_marked(tmp_path, platform, extra=""):
    folder = tmp_path / platform
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", folder / "conftest.py")
    (folder / "test_marked.py").write_text(MARKED + textwrap.dedent(extra))
    env = {"CI": "true", "RECIO_TEST_PLATFORM": platform}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "test_marked.py"], cwd=folder, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


@pytest.mark.slow
def test_marked_tests_run_on_linux_and_skip_elsewhere_with_their_reason(tmp_path):
    linux = _run_marked(tmp_path, "linux")
    assert linux.returncode == 0 and "4 passed" in linux.stdout, linux.stdout
    mac = _run_marked(tmp_path, "darwin")
    assert mac.returncode == 0 and "3 passed, 1 skipped" in mac.stdout, mac.stdout
    assert "left out on purpose (Linux only): reads /proc/self/fd (here: darwin)" in mac.stdout
    windows = _run_marked(tmp_path, "win32")  # CI=true: the declared skips are allowed
    assert windows.returncode == 0 and "1 passed, 3 skipped" in windows.stdout, windows.stdout
    for reason in ("(POSIX only): sends SIGKILL (here: win32)", "(POSIX only): fork (here: win32)",
                   "(Linux only): reads /proc/self/fd (here: win32)"):
        assert reason in windows.stdout, windows.stdout


@pytest.mark.slow
def test_an_undeclared_skip_still_fails_under_ci(tmp_path):
    done = _run_marked(tmp_path, "win32", '''
        def test_silent():
            pytest.skip("not here")
    ''')
    assert done.returncode == 1 and "skipped under CI=true" in done.stdout, done.stdout


@pytest.mark.slow
def test_a_marker_without_its_reason_is_refused(tmp_path):
    done = _run_marked(tmp_path, "linux", '''
        @pytest.mark.posix_only
        def test_why():
            pass
    ''')
    assert done.returncode != 0 and "takes one string" in done.stdout + done.stderr
