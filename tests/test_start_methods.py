"""The ``start_method`` fixture of tests/conftest.py, which runs the tests of worker processes
under fork and spawn: it must really switch the method the code under test gets, and a variant
that starts no process, or starts one another way, must fail rather than pass untested."""
import multiprocessing

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


@pytest.mark.parametrize("started, wrong", [
    ([], "started no process"),
    (["fork"], "started processes with ['fork']"),
    (["spawn", "fork"], "started processes with ['fork', 'spawn']"),
    (["spawn", "spawn"], ""),
])
def test_a_variant_that_did_not_use_its_method_fails(started, wrong):
    message = start_method_mismatch("spawn", started)
    assert (wrong in message) if wrong else message == ""
