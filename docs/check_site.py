"""Check the built site (``make docs-check``): what a reader would see, not just what Sphinx wrote.

Two parts.

**Static checks, over every page** of ``docs/_build/html`` (no browser needed):

* every internal link (``href``) points to a file that exists, and its ``#fragment`` to an
  element with that ``id`` on that page;
* every ``<img>`` points to a file that exists;
* nothing is loaded from another host: no ``<script src>``, stylesheet or image whose address
  starts with ``http(s)://`` or ``//`` (math is rendered by the copy of MathJax in
  ``_static/mathjax``, which must be there);
* no raw TeX in the text outside the math elements and the code: ``$$``, ``\\(``, ``\\[`` or
  a TeX command such as ``\\frac`` in a paragraph means some math was not recognised as math.

**Browser checks, on a sample of pages** (the index, a guide, two API pages, two tutorials,
two gallery pages and the search page), each opened in headless Chromium from a local HTTP
server with every request to another host blocked:

* no console error, no uncaught exception, no failed request (404, blocked);
* every image loaded (``naturalWidth > 0``);
* every math element was typeset by MathJax (it holds an ``mjx-container``) and no raw TeX is
  left in the rendered text (outside code);
* the search page finds ``jit``.

Chromium comes from the system (``chromium``, ``chromium-browser``, ``google-chrome``; or the
``CHROMIUM`` environment variable) driven by playwright (``pip install playwright``, part of
the ``docs`` extra), or else playwright's own download (``playwright install chromium``).
**When neither is available the browser checks are skipped**, with a message saying so, and
only the static checks run (``--require-browser`` makes that a failure instead).

Exit status 0 when every check passes, 1 otherwise (each problem is printed).
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import os
import pathlib
import re
import shutil
import sys
import threading
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_HTML = HERE / "_build" / "html"

# the pages opened in the browser: (path, what it stands for)
SAMPLE = [
    ("index.html", "the index"),
    ("checkpoint.html", "a guide"),
    ("api/transform.html", "an API module page"),
    ("api/generated/brainx.nn.LIF.html", "an API object page with math"),
    ("tutorials/snn-bptt.html", "a tutorial"),
    ("tutorials/checkpointing-memory.html", "a tutorial with a memory report"),
    ("gallery/index.html", "the gallery"),
    ("gallery/ei_delay_network.html", "a gallery example"),
]

# TeX left as text: display/inline delimiters and common commands
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\(?:frac|tau|alpha|beta|sigma|mathrm|mathcal|"
                     r"left|right|sum|int|begin|end|quad|cdot|varphi|sqrt|partial)\b")
SKIP_TEXT_TAGS = {"script", "style", "pre", "code", "kbd", "samp", "textarea"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
             "source", "track", "wbr"}


# -- static checks -------------------------------------------------------------------------------

class PageParser(html.parser.HTMLParser):
    """The ids, links, images, external resources and plain text (outside math/code) of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.images, self.external = set(), [], [], []
        self.text, self._stack = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        rel = (a.get("rel") or "").split()
        loaded = {"script": "src", "img": "src", "iframe": "src", "source": "src"}.get(tag)
        if tag == "link" and {"stylesheet", "icon", "preload", "modulepreload"} & set(rel):
            loaded = "href"
        url = a.get(loaded) or "" if loaded else ""
        if url.startswith(("http://", "https://", "//")):
            self.external.append(f"<{tag} {loaded}={url}>")
        if tag in VOID_TAGS:
            return
        classes = (a.get("class") or "").split()
        self._stack.append(tag in SKIP_TEXT_TAGS or "math" in classes or "highlight" in classes)

    def handle_endtag(self, tag):
        if tag not in VOID_TAGS and self._stack:
            self._stack.pop()

    def handle_data(self, data):
        if not any(self._stack):
            self.text.append(data)


def static_checks(root: pathlib.Path) -> list[str]:
    problems, pages = [], {}
    for path in sorted(root.rglob("*.html")):
        parser = PageParser()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        pages[path.resolve()] = parser
    for path, page in pages.items():
        rel = path.relative_to(root.resolve())
        for href in page.links:
            parts = urllib.parse.urlsplit(href)
            if parts.scheme or href.startswith(("//", "mailto:", "javascript:")):
                continue
            target = (path.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path \
                else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{rel}: broken link {href!r} (no file {target.name})")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if urllib.parse.unquote(parts.fragment) not in ids:
                    problems.append(f"{rel}: broken link {href!r} (no #{parts.fragment})")
        for src in page.images:
            if src.startswith(("data:", "http://", "https://", "//")):
                continue
            if not (path.parent / urllib.parse.unquote(urllib.parse.urlsplit(src).path)).exists():
                problems.append(f"{rel}: missing image {src!r}")
        for ext in page.external:
            problems.append(f"{rel}: loads from another host: {ext}")
        text = " ".join(" ".join(page.text).split())
        for m in RAW_TEX.finditer(text):
            around = text[max(0, m.start() - 40):m.end() + 40]
            problems.append(f"{rel}: raw TeX in the text: ...{around}...")
            break
    if not (root / "_static" / "mathjax" / "tex-chtml.js").exists():
        problems.append("_static/mathjax/tex-chtml.js is missing: math cannot render offline")
    print(f"static checks: {len(pages)} pages, {sum(len(p.links) for p in pages.values())} links, "
          f"{sum(len(p.images) for p in pages.values())} images")
    return problems


# -- browser checks ------------------------------------------------------------------------------

def find_chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                      "google-chrome", "google-chrome-stable"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def serve(root: pathlib.Path):
    """A local HTTP server for ``root`` on a free port, in a thread; returns (server, base URL)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


PAGE_STATE = """() => {
  const clone = document.querySelector('article') || document.body;
  const copy = clone.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container, .highlight, .math')
      .forEach(e => e.remove());
  const maths = Array.from(document.querySelectorAll('span.math, div.math'));
  return {
    text: copy.innerText,
    images: Array.from(document.images).map(i => [i.getAttribute('src'),
                                                  i.complete && i.naturalWidth > 0]),
    math: maths.length,
    typeset: maths.filter(m => m.querySelector('mjx-container')).length,
  };
}"""


def browser_checks(root: pathlib.Path, require: bool) -> list[str]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return skipped("playwright is not installed (pip install playwright)", require)
    server, base = serve(root)
    problems = []
    try:
        with sync_playwright() as p:
            exe = find_chromium()
            try:
                browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"]) if exe \
                    else p.chromium.launch()
            except Exception as e:  # no system browser and no playwright download
                return skipped(f"no Chromium could be started ({str(e).splitlines()[0]})", require)
            print(f"browser checks: {browser.version} ({exe or 'playwright download'})")
            for page_path, what in SAMPLE:
                problems += check_page(browser, base, page_path, what, root)
            problems += check_search(browser, base)
            browser.close()
    finally:
        server.shutdown()
    return problems


def skipped(why: str, require: bool) -> list[str]:
    message = f"browser checks SKIPPED: {why}; only the static checks ran"
    print(message)
    return [message] if require else []


def open_page(browser, url):
    """A page whose console errors, exceptions, failed and external requests are collected."""
    page, errors = browser.new_page(viewport={"width": 1280, "height": 900}), []
    host = urllib.parse.urlsplit(url).netloc

    def route(r):
        if urllib.parse.urlsplit(r.request.url).netloc != host:
            errors.append(f"request to another host blocked: {r.request.url}")
            return r.abort()
        return r.continue_()

    page.route("**/*", route)
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught exception: {e}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400 else None)
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}")
            if urllib.parse.urlsplit(r.url).netloc == host else None)
    return page, errors


def check_page(browser, base, page_path, what, root) -> list[str]:
    if not (root / page_path).exists():
        return [f"{page_path} ({what}): not built"]
    page, errors = open_page(browser, base + page_path)
    page.goto(base + page_path, wait_until="networkidle")
    if page.evaluate("() => document.querySelector('span.math, div.math') !== null"):
        try:   # MathJax typesets after load
            page.wait_for_function("() => window.MathJax && MathJax.startup && "
                                   "MathJax.startup.promise", timeout=15000)
            page.evaluate("() => MathJax.startup.promise")
        except Exception as e:
            errors.append(f"MathJax did not start: {str(e).splitlines()[0]}")
    state = page.evaluate(PAGE_STATE)
    state["text"] = " ".join(state["text"].split())
    problems = [f"{page_path} ({what}): {e}" for e in errors]
    for src, ok in state["images"]:
        if not ok:
            problems.append(f"{page_path} ({what}): image did not load: {src}")
    if state["typeset"] != state["math"]:
        problems.append(f"{page_path} ({what}): {state['math'] - state['typeset']} of "
                        f"{state['math']} math elements not typeset by MathJax")
    m = RAW_TEX.search(state["text"])
    if m:
        problems.append(f"{page_path} ({what}): raw TeX in the rendered text: "
                        f"...{state['text'][max(0, m.start() - 40):m.end() + 40]}...")
    print(f"  {page_path:45s} {len(state['images'])} images, {state['math']} math, "
          f"{len(problems)} problems")
    page.close()
    return problems


def check_search(browser, base) -> list[str]:
    page, errors = open_page(browser, base + "search.html?q=jit")
    page.goto(base + "search.html?q=jit", wait_until="networkidle")
    try:
        page.wait_for_selector("#search-results li", timeout=15000)
        found = page.locator("#search-results li").count()
    except Exception:
        found = 0
    problems = [f"search.html: {e}" for e in errors]
    if not found:
        problems.append("search.html?q=jit: no result")
    print(f"  {'search.html?q=jit':45s} {found} results, {len(problems)} problems")
    page.close()
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=pathlib.Path, default=DEFAULT_HTML,
                        help="the built site (default: docs/_build/html)")
    parser.add_argument("--static-only", action="store_true", help="skip the browser checks")
    parser.add_argument("--require-browser", action="store_true",
                        help="fail when no browser can be started (default: static checks only)")
    args = parser.parse_args(argv)
    root = args.html.resolve()
    if not (root / "index.html").exists():
        print(f"{root}/index.html not found: build the site first (make docs)")
        return 1
    problems = static_checks(root)
    if not args.static_only:
        problems += browser_checks(root, args.require_browser)
    for problem in problems:
        print("FAIL", problem)
    print(f"{len(problems)} problems" if problems else "site check passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
