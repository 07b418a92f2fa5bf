"""Module paths from before the subpackages (``recio.reader``, ``recio.imageproc``, ...).

Until 0.2 every module lived directly in ``recio/``. Code and pickles that name an old path keep
working for one release: ``import recio.reader`` (or ``recio.reader`` as an attribute) gives a
stand-in module whose names come from their new homes, with a ``DeprecationWarning`` naming them.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

# old module path -> (the module that now holds its names, {old name: "module:new name"} for
# the names that moved elsewhere)
MOVED: Dict[str, Tuple[str, Dict[str, str]]] = {
    "recio.framing": ("recio.records.framing", {}),
    "recio.atomic": ("recio.records.atomic", {}),
    "recio.index": ("recio.records.index", {
        "build_index": "recio.records.indexed:build_index",
        "index_for": "recio.records.indexed:index_for",
        "load_index": "recio.records.indexed:load_index"}),
    "recio.indexed": ("recio.records.indexed", {}),
    "recio.reader": ("recio.records.reader", {
        "IndexedRecordReader": "recio.records.indexed:IndexedRecordReader"}),
    "recio.writer": ("recio.records.writer", {}),
    "recio.split": ("recio.records.split", {}),
    "recio.stats": ("recio.image.stats", {}),
    "recio.threaded": ("recio.records.threaded", {}),
    "recio.header": ("recio.image.header", {}),
    "recio.imageproc": ("recio.image.codec", {}),
    "recio.lists": ("recio.image.lists", {}),
    "recio.packing": ("recio.image.packing", {}),
    "recio.imageiter": ("recio.image.imageiter", {}),
    "recio.minibatch": ("recio.sequence.minibatch", {}),
    "recio.bucketing": ("recio.sequence.bucketing", {}),
    "recio.cbf": ("recio.sequence.cbf", {
        "minibatch_source": "recio.sequence.minibatch:cbf_minibatch_source"}),
    "recio.convert": ("recio.sequence.convert", {}),
    "recio.torch_minibatch": ("recio.torch.minibatch", {}),
}


class MovedModule(ModuleType):
    """Stands in for an old module path: every attribute is looked up in the new home."""

    def __init__(self, old: str) -> None:
        super().__init__(old, f"moved to {MOVED[old][0]}")
        self._home, self._renamed = MOVED[old]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        module, _, attr = self._renamed.get(name, f"{self._home}:{name}").partition(":")
        return getattr(importlib.import_module(module), attr)

    def __dir__(self) -> List[str]:
        return sorted(set(dir(importlib.import_module(self._home))) | set(self._renamed))


def load_moved(old: str) -> ModuleType:
    """The stand-in for an old path, with a DeprecationWarning pointing at the importer."""
    home = MOVED[old][0]
    warnings.warn(f"{old} moved to {home}; the old path goes away in the next release",
                  DeprecationWarning, stacklevel=3)
    importlib.import_module(home)  # an import error shows now, not on first attribute
    return sys.modules.get(old) or MovedModule(old)


class _MovedLoader(importlib.abc.Loader):
    def create_module(self, spec: Any) -> ModuleType:
        return load_moved(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        pass


class MovedFinder(importlib.abc.MetaPathFinder):
    """Resolves ``import recio.<old>`` to its stand-in."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader())


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
