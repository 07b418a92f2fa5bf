"""MkDocs hook: the site's search ranks the guide that explains a name above the pages that
only mention it.

A name (``DataLoader``, ``InputSplit``, ``--resize``) appears in a guide that explains it, in the
API reference (where members are sections titled by their own names, which the search weighs
1000 times the text), and on the Benchmarks and Design pages. Material for MkDocs multiplies a
page's scores by its ``search: boost:`` (front matter); this hook sets it from the page's place
in mkdocs.yml's navigation instead of front matter on every page, so a new page gets its rank
without anyone remembering to: the guides (and the home and install pages) first, then the
Benchmarks and Design pages, then the API reference. .ci/site_check.py checks the result in a
real browser (``make site-check``).
"""
from __future__ import annotations

from typing import Any

#: page boost by where the page is (its path under docs/); the first prefix that matches wins.
#: The API reference's members are sections titled by their names, and a title counts 1000
#: times the text (Material's default field boosts), while lunr's scoring (BM25, k1 = 1.2)
#: gives a word at most 2.2 times its weight however often a text repeats it: at 0.005 against
#: the guides' 4 a member titled ``DataLoader`` (1000 x 0.005 = 5) stays below a guide that
#: uses the name in its text (up to 2.2 x 4 = 8.8), and far below one with it in a heading.
BOOSTS = (
    ("api/", 0.005),
    ("benchmarks.md", 0.3),
    ("design.md", 0.3),
    ("", 4.0),  # the guides, the home page, Install
)


def boost_for(path: str) -> float:
    """The search boost of the page at ``path`` (relative to docs/, with ``/``)."""
    return next(boost for prefix, boost in BOOSTS if path.startswith(prefix))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    search = page.meta.setdefault("search", {})
    search.setdefault("boost", boost_for(page.file.src_uri))
    return markdown
