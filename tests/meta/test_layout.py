"""The package's import graph: data flows downward, with no cycles and no hidden internal imports.

Layers, bottom to top (a module may import its own layer and the ones below):

0. ``recio.errors``, ``recio.optional``, ``recio.storage``, ``recio.portable``, ``recio._lazy``:
   exceptions, optional-dependency imports, where files live (local paths and URLs), where
   operating systems differ, lazy exports
1. ``recio.records``: the container, on three floors: ``recio.records.cache`` (the shard cache,
   which the core reads through), the core (framing, index, reader, writer, split, atomic
   files), ``recio.records.shards`` (shard sets)
2. ``recio.image``: image records, on four floors: ``recio.image.pixels`` (decode, encode,
   transform), ``recio.image`` itself (IRHeader, lists), then ``recio.image.packing`` and
   ``recio.image.batches`` side by side (neither imports the other), then ``recio.image.tools``
3. ``recio.sequence``: sample-counted sequences, MinibatchSource, bucketing, CBF
4. ``recio.mx``, ``recio.torch``, ``recio.ray``: integrations (they do not import each other)
5. ``recio.cli``: the command line
6. ``recio`` itself, ``recio.__main__``, ``recio.im2rec``: entry points
"""
import ast
import pathlib
from typing import Dict, List, Set, Tuple

import recio

ROOT = pathlib.Path(recio.__file__).parent
LAYERS = [
    ("recio.errors", 0), ("recio.optional", 0), ("recio.storage", 0), ("recio.portable", 0),
    ("recio._lazy", 0),
    ("recio.records.cache", 1.0), ("recio.records", 1.1), ("recio.records.shards", 1.2),
    ("recio.image.pixels", 2.0), ("recio.image", 2.1), ("recio.image.packing", 2.2),
    ("recio.image.batches", 2.2), ("recio.image.tools", 2.3), ("recio.sequence", 3),
    ("recio.mx", 4), ("recio.torch", 4), ("recio.ray", 4), ("recio.cli", 5),
    ("recio.__main__", 6), ("recio.im2rec", 6), ("recio", 6),
]


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def group_of(module: str) -> Tuple[str, float]:
    """The layer group a module belongs to (the longest matching prefix) and its rank."""
    matches = [(prefix, rank) for prefix, rank in LAYERS
               if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS in {__file__}"
    return max(matches, key=lambda match: len(match[0]))


MODULES: Dict[str, pathlib.Path] = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def resolve(name: str) -> str:
    """The recio module an imported name refers to (``recio.records.reader.RecordReader`` ->
    ``recio.records.reader``)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(module: str) -> List[Tuple[str, int, bool, str]]:
    """(imported recio module, line, inside a function?, imported name) for every import."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "recio" or alias.name.startswith("recio."):
                        found.append((resolve(alias.name), child.lineno, in_function, ""))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if base == "recio" or base.startswith("recio."):
                    for alias in child.names:
                        target = f"{base}.{alias.name}"
                        found.append((resolve(target) if target in MODULES else resolve(base),
                                      child.lineno, in_function, alias.name))
            visit(child, nested)

    visit(tree, False)
    return found


def test_every_module_has_a_layer():
    for module in MODULES:
        group_of(module)


def test_no_upward_or_sideways_imports():
    problems = []
    for module in MODULES:
        group, rank = group_of(module)
        face = MODULES[module].name == "__init__.py"
        for target, line, _, _ in imports_of(module):
            if face and target.startswith(module + "."):
                continue  # a package's face names what its rooms define, whatever their floor
            tgroup, trank = group_of(target)
            sideways = trank == rank and tgroup != group and int(rank) not in (0, 6)
            if trank > rank or sideways:
                problems.append(f"{MODULES[module]}:{line}: {module} (layer {rank}) imports "
                                f"{target} (layer {trank})")
    assert not problems, "\n".join(problems)


def test_no_import_cycles():
    graph: Dict[str, Set[str]] = {m: {t for t, *_ in imports_of(m) if t != m} for m in MODULES}
    # the package __init__ files that re-export their submodules are part of their submodules'
    # import chain only when a submodule names the package itself, which the layering forbids
    cycles = []
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()

    def strongconnect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            strongconnect(v)
    assert not cycles, f"import cycles: {cycles}"


# imports inside functions that stay there, with the reason
FUNCTION_LEVEL_ALLOWED: Dict[Tuple[str, str], str] = {
    ("recio.cli.im2rec", "recio.ray"): "importing recio.ray imports Ray (hundreds of MB, an "
                                       "extra): only im2rec --engine ray pays for it",
    ("recio.cli.entry", "recio.cli.common"): "recio.cli.entry is all an entry point loads "
                                             "before it can answer a Ctrl-C (run_command); the "
                                             "commands' modules (click, NumPy, OpenCV) load "
                                             "after it",
}


def test_no_internal_imports_inside_functions():
    hidden = [f"{MODULES[m]}:{line}: imports {target} inside a function"
              for m in MODULES for target, line, in_function, _ in imports_of(m)
              if in_function and (m, target) not in FUNCTION_LEVEL_ALLOWED
              and group_of(m)[1] < 6]
    assert not hidden, "\n".join(hidden)


def test_no_private_names_across_modules():
    leaks = [f"{MODULES[m]}:{line}: {m} imports private {name!r} from {target}"
             for m in MODULES for target, line, _, name in imports_of(m)
             if name.startswith("_") and name != "__all__" and target != m
             and not target.startswith(m + ".")]
    assert not leaks, "\n".join(leaks)


def test_modules_and_classes_stay_small():
    """A module does one job in at most 600 lines and a class in at most 300: a larger one is
    split by job (issue 32 measured the package by these two numbers)."""
    too_long = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        lines = len(path.read_text().splitlines())
        if lines > 600:
            too_long.append(f"{name}: {lines} lines")
        too_long.extend(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
                        for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                        and node.end_lineno - node.lineno + 1 > 300)
    assert too_long == []


#: plain modules that are a public face of their own, as a package is: ``recio.errors``, and the
#: modules of ``recio.mx`` that stand in for MXNet's own (``mx.io``, ``mx.image``,
#: ``mx.gluon.utils``, ...), whose ``__all__`` is what ``from mxnet.io import *`` gives
FACES = {"recio.errors", "recio.mx.io", "recio.mx.image", "recio.mx.recordio", "recio.mx.ndarray",
         "recio.mx.context", "recio.mx.gluon.utils", "recio.mx.gluon.data.dataset",
         "recio.mx.gluon.data.dataloader", "recio.mx.gluon.data.sampler",
         "recio.mx.gluon.data.vision.datasets"}


def test_only_packages_list_their_public_names():
    """``__all__`` is a package's list of what users call; a module inside a package has none
    (what only its module uses is underscored, what recio's modules share is not)."""
    def names_all(node: ast.stmt) -> bool:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        return any(getattr(target, "id", None) == "__all__" for target in targets)

    listed = [name for name, path in MODULES.items()
              if path.name != "__init__.py" and name not in FACES
              and any(names_all(node) for node in ast.parse(path.read_text()).body)]
    assert listed == []


#: packages whose ``__init__`` imports its modules when it is imported, as MXNet's do: ``import
#: recio.mx as mx`` stands in for ``import mxnet as mx``, whose ``mx.io``, ``mx.nd`` and
#: ``mx.gluon.data.vision`` a type checker must see as modules
EAGER_FACES = {"recio.mx", "recio.mx.gluon", "recio.mx.gluon.data", "recio.mx.gluon.data.vision"}


def test_every_package_loads_its_names_on_first_use():
    """One ``__init__`` pattern: the package's names in ``_LAZY`` for ``recio._lazy``, the same
    names imported under ``if TYPE_CHECKING:`` (tests/test_lazy.py), and no code of its own."""
    eager = [name for name, path in MODULES.items() if path.name == "__init__.py"
             and name not in EAGER_FACES
             and "_lazy_exports(__name__, _LAZY" not in path.read_text()]
    assert eager == []
