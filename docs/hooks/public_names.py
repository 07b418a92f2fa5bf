"""MkDocs hook: the API page of ``recio`` lists every top-level name, generated at build time.

``recio``'s names load on first use, so a static reading of ``recio/__init__.py`` (what
mkdocstrings does) cannot see them. This hook imports ``recio`` and replaces the marker
``<!-- recio-public-names -->`` with a table: each name of ``recio.__all__``, linked to where its
defining module documents it, with the first line of its docstring. The links are autorefs, so
``mkdocs build --strict`` fails when a public name is documented nowhere, and a name added to,
renamed in or removed from ``recio.__all__`` changes the page without anyone editing it.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from typing import List

MARKER = "<!-- recio-public-names -->"


def defining_module(name: str, obj: object) -> str:
    """The module whose page documents ``obj``: its ``__module__`` for classes and functions;
    for a constant, the one module (not a package) that holds that very object."""
    module = getattr(obj, "__module__", None)
    if (inspect.isclass(obj) or inspect.isroutine(obj)) and module:
        return module
    holders = sorted(mod_name for mod_name, mod in list(sys.modules.items())
                     if mod_name.startswith("recio.") and not hasattr(mod, "__path__")
                     and vars(mod).get(name) is obj)
    if len(holders) != 1:
        raise ValueError(f"recio.{name}: defined in {holders or 'no module'}; the API page "
                         "cannot tell which documents it")
    return holders[0]


def public_names_table() -> str:
    recio = importlib.import_module("recio")
    rows: List[str] = ["| name | what it is |", "| --- | --- |"]
    for name in sorted(recio.__all__, key=str.lower):
        obj = getattr(recio, name)
        target = f"{defining_module(name, obj)}.{name}"
        doc = inspect.getdoc(obj) if (inspect.isclass(obj) or inspect.isroutine(obj)) else None
        summary = (doc or "").strip().split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
        rows.append(f"| [`recio.{name}`][{target}] | {summary} |")
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, public_names_table())
    return markdown
