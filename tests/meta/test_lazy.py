"""The lazy exports (``recio._lazy.lazy_exports``): what a package loads on first use is what a type
checker sees, and what ``import recio`` offers is the small public surface.

A package that exports names lazily lists them twice: in ``_LAZY`` (name -> defining module, what
runs) and in an ``if TYPE_CHECKING:`` block of imports (what mypy and pyright read, since they
cannot run ``__getattr__``). These tests read both from the source, so the two cannot drift apart,
and then import every name to show that each module really defines it.
"""
import ast
import importlib
import os
import pathlib
import subprocess
import sys
from typing import Dict

import pytest

import recio
from conftest import need

ROOT = pathlib.Path(recio.__file__).parent


def module_of(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: every recio module that exports names through lazy_exports
LAZY_MODULES: Dict[str, ast.Module] = {
    module_of(path): ast.parse(path.read_text(), str(path))
    for path in sorted(ROOT.rglob("*.py")) if "_lazy_exports(" in path.read_text()}


def lazy_map(tree: ast.Module) -> Dict[str, str]:
    """The module's ``_LAZY`` literal."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] \
                == ["_LAZY"]:
            return ast.literal_eval(node.value)
    raise AssertionError("no _LAZY = {...} at the module's top level")


def type_checking_imports(tree: ast.Module) -> Dict[str, str]:
    """name -> module of every import inside the module's ``if TYPE_CHECKING:`` blocks."""
    found: Dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                   "_typing.TYPE_CHECKING"):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module, \
                    ast.unparse(stmt)
                for alias in stmt.names:
                    assert alias.asname is None, f"{ast.unparse(stmt)}: no renaming"
                    found[alias.name] = stmt.module
    return found


def test_the_packages_with_lazy_names():
    assert set(LAZY_MODULES) == {"recio", "recio.records", "recio.records.cache",
                                 "recio.records.shards", "recio.image", "recio.image.pixels", "recio.image.packing",
                                 "recio.image.batches", "recio.image.tools", "recio.sequence",
                                 "recio.storage", "recio.torch", "recio.ray", "recio.cli"}


@pytest.mark.parametrize("package", sorted(LAZY_MODULES))
def test_type_checker_sees_what_runs(package):
    tree = LAZY_MODULES[package]
    assert type_checking_imports(tree) == lazy_map(tree)


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(LAZY_MODULES))
def test_every_lazy_name_is_public_and_defined_where_it_says(package):
    if package in ("recio.ray", "recio.torch"):
        need(package.split(".")[1])
    module = importlib.import_module(package)
    for name, home in lazy_map(LAZY_MODULES[package]).items():
        assert name in module.__all__ and name in dir(module), f"{package}.{name}"
        assert getattr(module, name) is vars(importlib.import_module(home))[name], \
            f"{package}.{name} is not {home}.{name}"


#: the top level: readers, writers, the index, InputSplit, the image header, shard sets, the two
#: training iterators and the root of the errors; everything else lives in its subpackage
SURFACE = {"RecordReader", "RecordWriter", "IndexedRecordReader", "IndexedRecordWriter",
           "build_index", "read_index", "InputSplit", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "ShardWriter", "ShardReader", "load_manifest", "ImageBatchIter",
           "MinibatchSource", "RecordIOError"}
SUBPACKAGES = {"records", "image", "sequence", "mx", "torch", "ray", "errors"}


@pytest.mark.slow
def test_mypy_sees_the_real_types_and_nothing_else(tmp_path):
    """mypy (which cannot run ``__getattr__``) gives every lazy name its real type, not ``Any``,
    and reports a name that is not exported (a user's typo, or a name moved to a subpackage)."""
    need("mypy")
    lines = ["import " + ", ".join(sorted(LAZY_MODULES))]
    for package in sorted(LAZY_MODULES):
        lines += [f"reveal_type({package}.{name})" for name in lazy_map(LAZY_MODULES[package])]
    lines.append("recio.write_index")
    (tmp_path / "use.py").write_text("\n".join(lines) + "\n")
    # recio's own modules are read; the big dependencies (Ray, torch, pandas) are not: minutes
    (tmp_path / "mypy.ini").write_text("[mypy]\nfollow_imports = silent\nignore_missing_imports = "
                                       "True\n[mypy-ray.*,torch.*,pandas.*,pyarrow.*]\n"
                                       "follow_imports = skip\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
                          "--no-incremental", "--cache-dir", os.devnull, str(tmp_path / "use.py")],
                         capture_output=True, text=True,
                         cwd=ROOT.parent).stdout.splitlines()
    revealed = [line for line in out if "Revealed type is" in line]
    assert len(revealed) == len(lines) - 2, out
    assert not [line for line in revealed if line.endswith('"Any"')], out
    assert [line.split(": ", 1)[1] for line in out if ": error:" in line] == [
        'error: Module has no attribute "write_index"  [attr-defined]'], out


def fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter (where nothing but ``import recio`` ran)."""
    return subprocess.run([sys.executable, "-c", "import sys, recio\n" + code],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_top_level_is_small():
    assert set(recio.__all__) == SURFACE and len(recio.__all__) == len(SURFACE)
    public = fresh("print(' '.join(n for n in dir(recio) if not n.startswith('_')))").split()
    assert set(public) == SURFACE | SUBPACKAGES


def test_other_names_live_in_their_subpackage():
    for name, home in [("write_index", recio.records), ("SWEEP_FOREVER", recio.sequence),
                       ("TruncatedFileError", recio.errors), ("CBFReader", recio.sequence)]:
        with pytest.raises(AttributeError, match=f"module 'recio' has no attribute '{name}'"):
            getattr(recio, name)
        assert name in home.__all__ and getattr(home, name) is not None


def test_import_recio_loads_nothing_else():
    """``import recio`` is cheap: every name, subpackage and optional dependency loads on first
    use."""
    loaded = fresh("print(*sorted(m for m in sys.modules if m.startswith('recio') or m in "
                   "('numpy', 'PIL', 'torch', 'ray', 'fsspec')))")
    assert loaded.split() == ["recio", "recio._lazy", "recio.errors"]


@pytest.mark.slow
def test_subpackages_load_on_first_use():
    assert fresh("print(recio.sequence.SWEEP_ONCE == sys.maxsize - 2, "
                 "recio.records.write_index.__module__)").split() == ["True", "recio.records.index_format"]
