"""Text files are the same bytes on every OS: recio never opens a text file with the
platform's defaults.

Python's text mode takes its encoding from the locale (cp1252 on Windows before Python 3.15,
so a non-ASCII image path in a ``.lst`` is mangled or refused) and, when writing, turns ``\\n``
into ``os.linesep`` (``\\r\\n`` on Windows, so a ``.lst``/``.idx``/manifest written there
differs from the one written on Linux). The rule this file keeps true: every text-mode open in
``recio/`` names its ``encoding``, and every text-mode write also names ``newline``
(``"\\n"``) or the code writes bytes. Readers leave ``newline`` to Python's universal newlines,
which is what lets them take the CRLF files MXNet wrote on Windows (tests/image/pack/test_lists.py
and tests/records/test_records.py read such files).

The check is a walk of the syntax tree of every module (not a run: it sees code no test
reaches). What it recognises: builtin ``open``/``io.open``/``os.fdopen``, ``X.open(MODE, ...)``
with a literal mode (``pathlib.Path.open``), ``read_text``/``write_text``, ``io.TextIOWrapper``,
``tempfile``'s temporary files, and recio's own ``atomic_open``/``AtomicFile``/``InPlaceFile``
(which cannot take an encoding, so they must be given a binary mode). A mode held in a
variable is not judged where it is passed on (``AtomicFile``'s ``os.fdopen(fd, mode)``): the
callers that name it are.
"""
import ast
import pathlib
from typing import Iterator, List, Optional, Set, Tuple

import pytest

RECIO = pathlib.Path(__file__).resolve().parents[2] / "recio"

#: call name -> (position of the mode among the positional arguments, default mode)
_OPENERS = {"open": (1, "r"), "io.open": (1, "r"), "os.fdopen": (1, "r"),
            "codecs.open": (1, "r"),
            "tempfile.NamedTemporaryFile": (0, "w+b"), "tempfile.TemporaryFile": (0, "w+b"),
            "tempfile.SpooledTemporaryFile": (1, "w+b")}
#: recio's writers that hand out a file object but take no encoding: binary modes only
_BINARY_ONLY = {"atomic_open": (1, "wb"), "AtomicFile": (1, "wb"), "InPlaceFile": (1, "wb")}


def _name(node: ast.expr) -> str:
    """``open``, ``io.open``, ``self.path.open``: the dotted name of a call's function."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else f"?.{node.attr}"
    return ""


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _modes(node: Optional[ast.expr], default: str) -> Optional[Set[str]]:
    """The modes an argument can be: a literal, either branch of ``a if c else b``, or
    None when it is computed elsewhere (not judged here)."""
    if node is None:
        return {default}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        body, orelse = _modes(node.body, default), _modes(node.orelse, default)
        return None if body is None or orelse is None else body | orelse
    return None


def _mode_arg(call: ast.Call, position: int) -> Optional[ast.expr]:
    found = _keyword(call, "mode")
    if found is None and len(call.args) > position:
        found = call.args[position]
    return found


def _given(call: ast.Call, name: str) -> bool:
    """True when the call passes ``name=`` with something other than None."""
    value = _keyword(call, name)
    return value is not None and not (isinstance(value, ast.Constant) and value.value is None)


def _writes(mode: str) -> bool:
    return any(c in mode for c in "wax+")


def _problems_in_call(call: ast.Call) -> Iterator[str]:
    """What is wrong with one call, as sentences (none: nothing)."""
    name = _name(call.func)
    short = name.rsplit(".", 1)[-1]
    if short in ("read_text", "write_text") and name != short:
        if short == "write_text":
            yield ("write_text: use write_bytes(text.encode('utf-8')) (write_text's newline= "
                   "needs Python 3.10)")
        elif not _given(call, "encoding"):
            yield "read_text without encoding="
        return
    if name in ("io.TextIOWrapper", "TextIOWrapper"):
        if not _given(call, "encoding"):
            yield "TextIOWrapper without encoding="
        if not _given(call, "newline"):
            yield "TextIOWrapper without newline="
        return
    if name in _BINARY_ONLY or short in _BINARY_ONLY and name.endswith("." + short):
        position, default = _BINARY_ONLY[short]
        modes = _modes(_mode_arg(call, position), default)
        if modes is not None and any("b" not in m for m in modes):
            yield f"{short} in text mode {sorted(modes)}: it takes no encoding; write bytes"
        return
    if name in _OPENERS:
        position, default = _OPENERS[name]
    elif short == "open" and name != short and not name.startswith("os."):
        # a method ``open``: judged only when given a literal mode (pathlib.Path.open)
        position, default = 0, "r"
        mode = _mode_arg(call, position)
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                and set(mode.value) <= set("rwxabt+")):
            return
    else:
        return
    modes = _modes(_mode_arg(call, position), default)
    if modes is None:
        return
    text = [m for m in modes if "b" not in m]
    if not text:
        return
    if not _given(call, "encoding"):
        yield f"{name} in text mode {sorted(text)} without encoding="
    if any(_writes(m) for m in text) and not _given(call, "newline"):
        yield f"{name} writing text (mode {sorted(text)}) without newline="


def problems(source: str, filename: str = "<source>") -> List[Tuple[int, str]]:
    """``(line, what)`` for every text-mode open in ``source`` that leaves the encoding (or,
    writing, the newline) to the platform."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call):
            out.extend((node.lineno, what) for what in _problems_in_call(node))
    return sorted(out)


@pytest.mark.slow
def test_every_text_open_in_recio_names_its_encoding_and_newline():
    """The whole package: a text-mode open without ``encoding=`` (or a text-mode write without
    ``newline=``) reads or writes different bytes on Windows than on Linux."""
    found = []
    for path in sorted(RECIO.rglob("*.py")):
        for line, what in problems(path.read_text(encoding="utf-8"), str(path)):
            found.append(f"{path.relative_to(RECIO.parent)}:{line}: {what}")
    assert not found, "text opened with the platform's defaults:\n" + "\n".join(found)


@pytest.mark.parametrize("code", [
    "open(p)",
    "open(p, 'r')",
    "open(p, 'w', encoding='utf-8')",
    "open(p, mode='a', encoding='utf-8')",
    "io.open(p, 'rt')",
    "os.fdopen(fd, 'w', encoding='utf-8')",
    "path.open('r')",
    "path.open('w', encoding='utf-8')",
    "path.read_text()",
    "path.write_text(text, encoding='utf-8')",
    "io.TextIOWrapper(raw, encoding='utf-8')",
    "tempfile.NamedTemporaryFile('w', encoding='utf-8')",
    "open(p, 'w' if new else 'a', encoding='utf-8')",
    "atomic_open(p, 'w')",
    "AtomicFile(p, 'w')",
    "open(p, encoding=None)",
])
def test_the_check_finds_each_kind_of_platform_text_open(code):
    """Each recognised way of opening text with a platform default is reported: without this
    the package-wide test above could pass by recognising nothing."""
    assert problems(code), code


@pytest.mark.parametrize("code", [
    "open(p, 'rb')",
    "open(p, 'wb')",
    "open(p, encoding='utf-8')",
    "open(p, 'r', encoding='utf-8', newline=None)",
    "open(p, 'w', encoding='utf-8', newline='\\n')",
    "open(p, 'r+b' if resume else 'wb')",
    "os.fdopen(fd, mode, buffering)",
    "path.open('rb')",
    "path.read_text(encoding='utf-8')",
    "io.TextIOWrapper(raw, encoding='utf-8', newline='\\n')",
    "tempfile.NamedTemporaryFile()",
    "atomic_open(p, 'wb')",
    "AtomicFile(p)",
    "cache.open(url, cached_only=True)",
    "os.open(p, os.O_RDONLY)",
    "Image.open(io.BytesIO(data))",
])
def test_the_check_lets_explicit_and_binary_opens_through(code):
    """Binary opens, explicit encodings and newlines, and calls that are not file opens are
    not reported (the package-wide test would otherwise demand nonsense)."""
    assert problems(code) == [], code
