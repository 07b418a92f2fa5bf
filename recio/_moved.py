"""Module paths from before the subpackages (``recio.reader``, ``recio.imageproc``, ...).

Until 0.2 every module lived directly in ``recio/``. Code and pickles that name an old path keep
working for one release: ``import recio.reader`` (or ``recio.reader`` as an attribute) returns
the module's new home, with a ``DeprecationWarning`` naming it.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Optional

# old module path -> the module that now holds the same names
MOVED = {
    "recio.framing": "recio.records.framing",
    "recio.atomic": "recio.records.atomic",
    "recio.index": "recio.records.index",
    "recio.indexed": "recio.records.indexed",
    "recio.reader": "recio.records.reader",
    "recio.writer": "recio.records.writer",
    "recio.split": "recio.records.split",
    "recio.stats": "recio.records.stats",
    "recio.threaded": "recio.records.threaded",
    "recio.header": "recio.image.header",
    "recio.imageproc": "recio.image.codec",
    "recio.lists": "recio.image.lists",
    "recio.packing": "recio.image.packing",
    "recio.imageiter": "recio.image.imageiter",
    "recio.minibatch": "recio.sequence.minibatch",
    "recio.bucketing": "recio.sequence.bucketing",
    "recio.cbf": "recio.sequence.cbf",
    "recio.convert": "recio.sequence.convert",
    "recio.torch_minibatch": "recio.torch.minibatch",
}


def load_moved(old: str) -> ModuleType:
    """The new module for an old path, with a DeprecationWarning (stacklevel: the importer)."""
    new = MOVED[old]
    warnings.warn(f"{old} moved to {new}; the old path goes away in the next release",
                  DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)


class _MovedLoader(importlib.abc.Loader):
    def create_module(self, spec):  # the new module object itself stands in for the old name
        return load_moved(spec.name)

    def exec_module(self, module):  # already executed under its new name
        pass


class MovedFinder(importlib.abc.MetaPathFinder):
    """Resolves ``import recio.<old>`` to the module's new home."""

    def find_spec(self, fullname, path=None, target=None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader())


def install() -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
