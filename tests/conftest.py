"""Shared fixtures: the golden MXNet files (copied into tests/data/golden) and script lookup."""
import os
import pathlib
import shutil

import pytest

GOLDEN = pathlib.Path(__file__).parent / "data" / "golden"


@pytest.fixture(scope="session")
def golden() -> pathlib.Path:
    """Folder of files written by the real MXNet 1.9.1 (never edit them)."""
    return GOLDEN


def console_script(name: str) -> str:
    """Path of an installed console script (``recio``, ``im2rec``), or skip if not installed."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"console script {name!r} is not installed (run `make install`)")
    return path


@pytest.fixture
def script():
    """``script("recio")`` -> path of the installed console script."""
    return console_script


@pytest.fixture(autouse=True)
def _no_tty_progress(monkeypatch):
    """Progress bars off in tests, whatever the terminal."""
    monkeypatch.setenv("COLUMNS", os.environ.get("COLUMNS", "100"))
