"""`make site-check` (and `make test`, after the strict build): search the built documentation
site in a real headless Chromium, as a reader does, and check what it finds.

The site is served on 127.0.0.1 from SITE (default site/). For each query below the search must
answer without a console error and list first the page named beside it: the guide that explains
an option or a name, not an API member or a benchmark that mentions it. The page may load
nothing from outside the site (every request to another address fails the check).

The browser: RECIO_CHROMIUM if set, else a Chromium or Chrome on this machine (Debian's
`apt-get install chromium`), else Playwright's own (`python -m playwright install chromium`);
Playwright itself comes with the docs extra. Without them the check says what to install and
fails under CI=true (as `make test` sets it); otherwise it says so and exits 0.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

#: query -> the page (or pages) its first result must be, relative to the site
EXPECTED: Dict[str, Union[str, Tuple[str, ...]]] = {
    "--resize": "im2rec.html",
    "--num-thread": "im2rec.html",
    "num-thread": "im2rec.html",
    "--resume": "im2rec.html",
    "--recursive": "im2rec.html",
    "--force": ("commands.html", "im2rec.html"),  # the rule for every command, or im2rec's
    "DataLoader": "training/pytorch.html",
    "RecordDataset": "training/pytorch.html",
    "InputSplit": "commands.html",
    "IndexedRecordReader": "records.html",
    "MinibatchSource": "sequences.html",
    "recio verify": "damaged.html",
}
#: docs/javascripts/search_options.js's rewriting, checked in the page itself
REWRITES = {"--resize": "+resize", "--num-thread": "+num +thread", "-n": "+n",
            "num-thread": "+num +thread*", "DataLoader": "DataLoader",
            "recio --force x": "recio +force x", "--resize=256": "+resize"}
#: where Chromium or Chrome is usually installed
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
            "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
            "/Applications/Chromium.app/Contents/MacOS/Chromium")
#: a quiet, local headless browser: no GPU, no sandbox (CI runs as root), no background traffic
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"]
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def find_browser() -> Optional[str]:
    """A Chromium or Chrome executable: RECIO_CHROMIUM, else the first of BROWSERS found."""
    if os.environ.get("RECIO_CHROMIUM"):
        return os.environ["RECIO_CHROMIUM"]
    for name in BROWSERS:
        found = shutil.which(name) or (name if os.path.isabs(name) and os.access(name, os.X_OK)
                                       else None)
        if found:
            return found
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


def serve(site: Path) -> http.server.ThreadingHTTPServer:
    """The site on 127.0.0.1, a free port, in a daemon thread."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def first_page(href: str) -> str:
    """The page of a result link: its path on the site, without host, query or fragment."""
    return urlsplit(href).path.lstrip("/")


def run_checks(page, base: str) -> List[str]:
    """Every query of EXPECTED and REWRITES in ``page``; the problems found."""
    problems: List[str] = []
    console: List[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}")
            if msg.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: console.append(f"page error: {exc}"))
    page.goto(f"{base}/index.html")
    rewritten = page.evaluate("queries => typeof window.recioRewriteSearchQuery === 'function'"
                              " ? queries.map(q => window.recioRewriteSearchQuery(q)) : null",
                              list(REWRITES))
    if rewritten is None:
        problems.append("the page has no recioRewriteSearchQuery: mkdocs.yml's extra_javascript "
                        "does not load docs/javascripts/search_options.js")
    for (query, want), got in zip(REWRITES.items(), rewritten or []):
        if got != want:
            problems.append(f"search_options.js rewrites {query!r} to {got!r}, not {want!r}")
    box = page.locator("input[data-md-component=search-query]")
    meta = page.locator(".md-search-result__meta")
    for query, expected in EXPECTED.items():
        wanted = (expected,) if isinstance(expected, str) else expected
        console.clear()
        box.click()
        box.fill(query)
        box.press("End")  # the search reads the box on a key's keyup, not on fill's input event
        try:  # the worker answers with a count, or "No matching documents"
            page.wait_for_function(
                "q => document.querySelector('input[data-md-component=search-query]').value"
                " === q && /matching document/i.test(document.querySelector("
                "'.md-search-result__meta').textContent)", arg=query, timeout=20000)
        except Exception as exc:  # Playwright's TimeoutError
            problems.append(f"{query!r}: no search answer ({type(exc).__name__}; the result "
                            f"line says {meta.inner_text()!r})")
            continue
        page.wait_for_timeout(300)  # results of the last keystroke
        links = page.locator(".md-search-result__item > a.md-search-result__link")
        pages = [first_page(links.nth(i).get_attribute("href") or "")
                 for i in range(min(links.count(), 8))]
        answer = meta.inner_text()
        if console:
            problems.append(f"{query!r}: the console says {console[:3]}")
        if not pages:
            problems.append(f"{query!r}: {answer}")
        elif pages[0] not in wanted:
            order = list(dict.fromkeys(pages))
            problems.append(f"{query!r}: the first result is {pages[0]}, not "
                            f"{' or '.join(wanted)} (results: {', '.join(order[:5])})")
        else:
            print(f"  {query!r}: {answer}, first {pages[0]}")
    return problems


def check(site: Path, browser: Optional[str]) -> List[str]:
    from playwright.sync_api import sync_playwright

    server = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    outside: List[str] = []
    try:
        with sync_playwright() as play:
            launch = {"args": BROWSER_ARGS}
            if browser:
                launch["executable_path"] = browser
            chromium = play.chromium.launch(**launch)
            try:
                context = chromium.new_context()

                def local_only(route) -> None:
                    url = route.request.url
                    if url.startswith((base + "/", "data:", "blob:")):
                        route.continue_()
                    else:
                        outside.append(url)
                        route.abort()

                context.route("**/*", local_only)
                problems = run_checks(context.new_page(), base)
            finally:
                chromium.close()
    finally:
        server.shutdown()
    return problems + [f"the page asked for {url}, outside the site" for url in outside]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", default="site", type=Path,
                        help="the built site (mkdocs build), default site/")
    args = parser.parse_args(argv)
    if not (args.site / "search" / "search_index.json").is_file():
        print(f"site_check: {args.site} holds no built site with a search index: run "
              "mkdocs build (make docs) first", file=sys.stderr)
        return 1
    try:
        import playwright.sync_api  # noqa: F401 - whether it imports
    except ImportError:
        missing = "Playwright is not installed (pip install -e '.[docs]', or pip install playwright)"
    else:
        missing = ""
    browser = find_browser()
    if browser and not os.access(browser, os.X_OK):
        missing = f"RECIO_CHROMIUM={browser} is not an executable"
    if not missing and browser is None and not _playwright_has_chromium():
        missing = ("no Chromium: apt-get install chromium (Debian, Ubuntu), or python -m "
                   "playwright install chromium, or RECIO_CHROMIUM=/path/to/chrome")
    if missing:
        if CI:
            print(f"site_check: FAILED, the site's search cannot be checked: {missing}",
                  file=sys.stderr)
            return 1
        print(f"site_check: not run: {missing} (under CI=true this fails)")
        return 0
    started = time.monotonic()
    print(f"site_check: searching {args.site} in {browser or 'Playwright’s Chromium'}")
    problems = check(args.site, browser)
    for problem in problems:
        print(f"site_check: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"site_check: {len(EXPECTED)} searches found their guide first, "
          f"{len(REWRITES)} query rewrites as expected, nothing loaded from outside the site "
          f"({time.monotonic() - started:.0f} s)")
    return 0


def _playwright_has_chromium() -> bool:
    """Whether ``python -m playwright install chromium`` put a browser where Playwright looks."""
    try:
        from playwright.sync_api import sync_playwright
        with sync_playwright() as play:
            return Path(play.chromium.executable_path).exists()
    except Exception:  # no driver, no browser: either way none to use
        return False


if __name__ == "__main__":
    sys.exit(main())
