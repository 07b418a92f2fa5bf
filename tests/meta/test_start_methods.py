"""The ``start_method`` fixture of tests/conftest.py, which runs the tests of worker processes
under the platform's default start method and spawn: it must really switch the method the code
under test gets, and a variant that starts no process, or starts one another way, must fail
rather than pass untested."""
import multiprocessing
import os
import subprocess
import sys

import pytest

from conftest import START_METHODS, count_process_starts, start_method_mismatch


def _report_start_method(queue):
    queue.put(multiprocessing.get_start_method())


def test_the_fixture_sets_the_default_start_method(start_method):
    """A Process of the default context (as a Pool or a DataLoader without a context makes)
    starts with the fixture's method: a spawned child reports spawn, a forked one fork."""
    queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=_report_start_method, args=(queue,))
    child.start()
    assert queue.get(timeout=60) == start_method
    child.join(60)
    assert child.exitcode == 0


def test_process_starts_are_counted_by_method(monkeypatch):
    """Every start is counted with the method it used, whichever context started it."""
    started = count_process_starts(monkeypatch)
    for method in START_METHODS:
        ctx = multiprocessing.get_context(method)
        child = ctx.Process(target=len, args=((),))
        child.start()
        child.join(60)
        assert child.exitcode == 0
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(len, ((1, 2),)) == 2
    assert started == START_METHODS + ["spawn"]


_INNER_TESTS = """
import multiprocessing


def _start(context):
    child = context.Process(target=len, args=((),))
    child.start()
    child.join(60)


def test_starts_with_it(start_method):
    _start(multiprocessing)


def test_starts_nothing(start_method):
    pass


def test_chooses_its_own(start_method):  # where there is another method (not on Windows)
    others = [m for m in multiprocessing.get_all_start_methods() if m != start_method]
    _start(multiprocessing.get_context(others[0]) if others else multiprocessing)
"""


@pytest.mark.slow
def test_a_variant_that_did_not_use_its_method_fails(tmp_path):
    """A test run with the fixture (conftest loaded as a plugin) that starts no process, or
    starts one with another method than its variant's, errors, saying so; one that starts its
    processes with the variant's method passes."""
    (tmp_path / "test_inner.py").write_text(_INNER_TESTS)
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [tests] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-rE",
                           "-p", "no:cacheprovider", str(tmp_path / "test_inner.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    out = proc.stdout
    n, other = len(START_METHODS), len(multiprocessing.get_all_start_methods()) > 1
    assert f"{3 * n} passed, {(1 + other) * n} errors" in out, out
    for method in START_METHODS:
        assert f"the {method} variant started no process" in out, out
        assert (f"the {method} variant started processes with" in out) == other, out
    assert start_method_mismatch("spawn", ["spawn", "spawn"]) == ""
