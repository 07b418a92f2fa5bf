"""recio is typed for its users: a type checker reads its annotations (PEP 561, ``py.typed``).

``make test`` type-checks recio itself (``python -m mypy recio``, configured by pyproject.toml's
``[tool.mypy]``). These tests check the other side, what a user gets: mypy run on a small
script outside the checkout, which finds recio as an installed package does (its search path,
where recio without ``py.typed`` would be "missing library stubs"), reveals real types for the
public API, not ``Any``, and flags a wrong call.
"""
import re
import subprocess
import sys

import pytest
from conftest import need

# (expression, a part of the type mypy must reveal for it)
REVEALED = [
    ("recio.RecordIOError", "recio.errors.RecordIOError"),
    ("reader", "recio.records.reader.RecordReader"),
    ("reader.read()", "bytes"),
    ("writer", "recio.records.writer.RecordWriter"),
    ("writer.write(b'payload')", "int"),
    ("IndexedRecordWriter('x.rec', 'x.idx')", "recio.records.writer.IndexedRecordWriter"),
    ("pack(IRHeader(0, 1.0, 7, 0), b'jpeg')", "bytes"),
    ("unpack(b'record')", "bytes"),
    ("mx.recordio.MXIndexedRecordIO('x.idx', 'x.rec', 'r')",
     "recio.mx.recordio.MXIndexedRecordIO"),
    ("mx.recordio.MXIndexedRecordIO('x.idx', 'x.rec', 'r').read_idx(0)", "bytes"),
    ("mx.io.DataDesc('data', (1, 3, 224, 224))", "recio.mx.iterators.DataDesc"),
]

# what a user writes: the names above, and two wrong calls (a checker that saw Any would accept)
USER_SCRIPT = """\
import recio
import recio.mx as mx
from recio.image.header import IRHeader, pack, unpack
from recio.records.reader import RecordReader
from recio.records.writer import IndexedRecordWriter, RecordWriter

reader = RecordReader("x.rec")
writer = RecordWriter("x.rec")
writer.write(42)
reader.seek("start")
""" + "".join(f"reveal_type({expr})\n" for expr, _ in REVEALED)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    """mypy's report on ``USER_SCRIPT``, run as a user runs it: in a folder of their own (so
    recio is found where it is installed), with mypy's defaults. One run: it reads all of
    recio."""
    need("mypy")
    folder = tmp_path_factory.mktemp("typing")
    (folder / "user.py").write_text(USER_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(folder / "cache"),
                           "--no-error-summary", "user.py"],
                          cwd=folder, capture_output=True, text=True, timeout=600)
    assert not done.stderr, done.stderr
    assert "missing library stubs or py.typed" not in done.stdout, done.stdout
    return done.stdout


@pytest.mark.slow
def test_the_public_api_has_types_not_any(report):
    revealed = re.findall(r'^user\.py:\d+: note: Revealed type is "(.*)"$', report, re.M)
    assert len(revealed) == len(REVEALED), report
    for (expr, expected), found in zip(REVEALED, revealed):
        assert found != "Any" and expected in found, f"{expr}: {found}"


def test_a_wrong_call_is_flagged_and_nothing_else(report):
    errors = [line for line in report.splitlines() if ": error:" in line]
    assert len(errors) == 2, report
    assert re.match(r'user\.py:9: error: .*"write" of "RecordWriter"', errors[0]), report
    assert re.match(r'user\.py:10: error: .*"seek" of "RecordReader"', errors[1]), report
