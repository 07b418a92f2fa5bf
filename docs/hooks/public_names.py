"""MkDocs hooks for the API reference: the page of ``recio`` lists every top-level name, generated
at build time, and the docstrings' Sphinx roles become code and links.

``recio``'s names load on first use, so a static reading of ``recio/__init__.py`` (what
mkdocstrings does) cannot see them. This hook imports ``recio`` and replaces the marker
``<!-- recio-public-names -->`` with a table: each name of ``recio.__all__``, linked to where its
defining module documents it, with the first line of its docstring. The links are autorefs, so
``mkdocs build --strict`` fails when a public name is documented nowhere, and a name added to,
renamed in or removed from ``recio.__all__`` changes the page without anyone editing it.

The docstrings are written with Sphinx roles (``:class:`~recio.errors.OutputExistsError```),
which Markdown leaves as text; ``on_page_content`` turns each into code, linked (an autoref, so
checked by ``--strict`` too) where it names a full ``recio.`` path.
"""
from __future__ import annotations

import functools
import importlib
import re
import inspect
import sys
from typing import Dict, List

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


@functools.lru_cache(maxsize=None)
def documented_paths() -> Dict[str, str]:
    """``recio.NAME`` -> where NAME is documented (``recio.records.reader.RecordReader``), for
    every name of ``recio.__all__``."""
    recio = importlib.import_module("recio")
    return {f"recio.{name}": f"{defining_module(name, getattr(recio, name))}.{name}"
            for name in recio.__all__}


def public_names_table() -> str:
    recio = importlib.import_module("recio")
    paths = documented_paths()
    rows: List[str] = ["| name | what it is |", "| --- | --- |"]
    for name in sorted(recio.__all__, key=str.lower):
        obj = getattr(recio, name)
        target = paths[f"recio.{name}"]
        doc = inspect.getdoc(obj) if (inspect.isclass(obj) or inspect.isroutine(obj)) else None
        summary = (doc or "").strip().split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
        rows.append(f"| [`{name}`][{target}] | {summary} |")
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, public_names_table())
    return markdown


#: a Sphinx role left in a rendered docstring: ``:class:`~recio.errors.OutputExistsError```
#: comes out of Markdown as ``:class:<code>~recio.errors.OutputExistsError</code>``
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|exc|data|obj):"
                  r"<code>(~?)([\w.]+)(\(\))?</code>")


def _role(match: "re.Match[str]") -> str:
    short, target, call = match.groups()
    text = (target.rpartition(".")[2] if short else target) + (call or "")
    code = f"<code>{text}</code>"
    if target.startswith("recio."):  # a full path: a link, and a missing one fails --strict
        target = documented_paths().get(target, target)  # recio.NAME: where NAME is documented
        return f'<autoref identifier="{target}">{code}</autoref>'
    return code


def on_page_content(html: str, page, config, files) -> str:
    """The docstrings' Sphinx roles as code, linked where they name a full ``recio.`` path (a
    short name stays plain code: which object it means depends on the docstring's module)."""
    return ROLE.sub(_role, html)
