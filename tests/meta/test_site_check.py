""".ci/site_check.py, which `make test` and `make site-check` run over the built site in a
headless Chromium: here, what it does when it cannot run (the browser search itself runs in
`make test`, after the strict build, where the site exists), and its parts that need no browser.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "site_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("site_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(site, **env):
    return subprocess.run([sys.executable, str(SCRIPT), str(site)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})


def _fake_site(tmp_path):
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.json").write_text(json.dumps({"docs": []}))
    return tmp_path


@pytest.mark.slow
def test_without_a_browser_it_fails_under_ci_and_says_what_to_install(tmp_path):
    site = _fake_site(tmp_path)
    nowhere = str(tmp_path / "no-such-chromium")
    done = _run(site, CI="true", RECIO_CHROMIUM=nowhere)
    assert done.returncode == 1, done.stdout
    assert "FAILED, the site's search cannot be checked" in done.stderr
    assert nowhere in done.stderr or "Playwright is not installed" in done.stderr
    done = _run(site, CI="", RECIO_CHROMIUM=nowhere)  # a developer's machine: says so, exit 0
    assert done.returncode == 0 and "not run: " in done.stdout, done.stderr
    assert "under CI=true this fails" in done.stdout


def test_without_a_built_site_it_says_to_build_one(tmp_path):
    done = _run(tmp_path / "site", CI="true")
    assert done.returncode == 1 and "run mkdocs build (make docs) first" in done.stderr


def test_the_expected_pages_exist_and_are_guides():
    """Every page a query must find first is a page of the site's navigation, not API."""
    module = _load()
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for query, pages in module.EXPECTED.items():
        for page in (pages,) if isinstance(pages, str) else pages:
            source = page.replace(".html", ".md")
            assert (ROOT / "docs" / source).is_file() and f" {source}" in nav, (query, page)
            assert not source.startswith("api/"), query
    assert {"--resize", "--force", "--num-thread", "--resume"} <= set(module.EXPECTED)
    assert {"DataLoader", "InputSplit", "IndexedRecordReader"} <= set(module.EXPECTED)


def test_a_result_link_gives_its_page():
    module = _load()
    assert module.first_page("http://127.0.0.1:8000/im2rec.html?h=resize#resuming") == \
        "im2rec.html"
    assert module.first_page("http://127.0.0.1:1/training/pytorch.html?h=") == \
        "training/pytorch.html"


def test_the_search_ranking_hook_puts_guides_above_the_reference():
    spec = importlib.util.spec_from_file_location(
        "search_ranking", ROOT / "docs" / "hooks" / "search_ranking.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    guides = [hook.boost_for(p) for p in ("im2rec.md", "training/pytorch.md", "index.md")]
    others = [hook.boost_for(p) for p in ("benchmarks.md", "design.md")]
    reference = hook.boost_for("api/records.md")
    assert min(guides) > max(others) > reference
    # a member titled by a name (title weight 1000) stays below a guide's text (BM25: <= 2.2x)
    assert 1000 * reference < 2.2 * min(guides)
