"""The test suite's own layout: folders like the package's, names pytest can import, and the
fast lane (``make test-fast``, ``pytest -m "not slow"``) leaving out what needs a server or Ray.

The test modules are imported by their base name (``rootdir``-relative folders have no
``__init__.py``; tests/ is on the path for conftest and support), so two files with one name
would shadow each other, and a folder named like a module the tests import (``torch``, ``ray``)
would be imported in its place as an empty namespace package where that module is missing,
turning a clear "not installed" skip into an AttributeError.
"""
import collections
import importlib.util
import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
#: folders under tests/ that hold no test modules of their own
NOT_TESTS = {"data", "simulate", "__pycache__"}


def _test_files():
    return sorted(p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts)


def test_every_test_file_sits_in_a_folder_and_its_name_is_unique():
    files = _test_files()
    assert files, TESTS
    assert [p.name for p in files if p.parent == TESTS] == []
    twice = [name for name, n in collections.Counter(p.name for p in files).items() if n > 1]
    assert twice == []


def test_no_test_folder_is_named_like_a_module_the_code_imports():
    """A folder of tests/ found before site-packages must not stand in for a real module."""
    folders = {p.name for p in TESTS.rglob("*")
               if p.is_dir() and not NOT_TESTS.intersection(p.relative_to(TESTS).parts)}
    # sys.stdlib_module_names is Python 3.10+; on 3.9 find_spec below finds the stdlib too
    imported = set(getattr(sys, "stdlib_module_names", ())) | {"recio", "torch", "torchdata", "ray", "numpy",
                                               "cv2", "PIL", "click", "tqdm", "fsspec", "s3fs",
                                               "gcsfs", "moto", "boto3", "pyarrow", "pandas",
                                               "matplotlib", "hypothesis", "pytest", "mxnet"}
    assert sorted(folders & imported) == []
    for name in sorted(folders):  # nor one installed here
        spec = importlib.util.find_spec(name) if name.isidentifier() else None
        origins = list(spec.submodule_search_locations or []) if spec else []
        outside = [o for o in origins if not o.startswith(str(TESTS))]
        assert spec is None or not (spec.origin or outside), (name, spec)


@pytest.mark.slow
def test_the_fast_lane_leaves_out_ray_and_spawned_workers():
    """``-m "not slow"`` deselects every test that needs Ray and the spawn variants, which
    tests/conftest.py marks itself, and keeps the default start method's variants."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "-m", "not slow", "tests/with_ray",
                           "tests/records/test_split.py"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    chosen = [ln for ln in done.stdout.splitlines() if "::" in ln]
    assert chosen, done.stdout + done.stderr
    assert not [ln for ln in chosen if not ln.startswith("tests/records/test_split.py::")]
    assert not [ln for ln in chosen if "spawn" in ln], chosen
    assert [ln for ln in chosen if "fork" in ln], chosen
