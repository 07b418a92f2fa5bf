"""The one lazy-loading mechanism: a package's public names, imported on first use.

``import recio`` must stay cheap (a command imports only what it runs, and an optional
dependency is needed only by the feature that uses it), so packages name their exports here
instead of importing them::

    __getattr__, __dir__ = lazy_exports(__name__, {"RecordReader": "recio.records.reader"})

The first ``package.RecordReader`` imports ``recio.records.reader`` and stores the value in the
package, so later lookups are ordinary attribute reads.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple


def lazy_exports(package: str, names: Mapping[str, str], submodules: Iterable[str] = (),
                 gone: Optional[Mapping[str, str]] = None,
                 ) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    :param package: the package's ``__name__``.
    :param names: public name -> the module defining it (absolute, or relative to ``package``
        when it starts with ``.``).
    :param submodules: submodule names that ``package.name`` imports on first use
        (``recio.mx``, ``recio.torch``, ...).
    :param gone: a name the package no longer has -> what to use instead, said by the
        ``AttributeError`` (names that are not there get the nearest one that is).
    """
    exported = dict(names)
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        module = exported.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module, package), name)
            setattr(sys.modules[package], name, value)
            return value
        if name in subs:
            return importlib.import_module(f"{package}.{name}")
        if gone and name in gone:
            hint = f": {gone[name]}"
        else:
            near = difflib.get_close_matches(name, sorted(set(exported) | subs), n=1)
            hint = f" (did you mean {package}.{near[0]}?)" if near else ""
        raise AttributeError(f"module {package!r} has no attribute {name!r}{hint}")

    def __dir__() -> List[str]:
        return sorted(set(vars(sys.modules[package])) | set(exported) | subs)

    return __getattr__, __dir__
