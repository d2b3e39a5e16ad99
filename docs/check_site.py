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
  a TeX command such as ``\\frac`` in a paragraph means some math was not recognised as math;
* every gallery card has a thumbnail of its own, not sphinx-gallery's placeholder
  (``no_image.png``, scaled: an example that draws no figure names an image with
  ``# sphinx_gallery_thumbnail_path``); every tutorial and example has its page.

**Browser checks, on every class of page**: the home page, a guide, every tutorial (the pages
under ``tutorials/``, as built), an API module page and an API object page, the gallery's index
and every gallery example, and the search page. Each is opened in headless Chromium at a
1280 x 900 viewport, from a local HTTP server, with every request to another host blocked:

* no console error, no uncaught exception, no failed request (404, blocked);
* every image loaded (``naturalWidth > 0``);
* every math element was typeset by MathJax (it holds an ``mjx-container``) and no raw TeX is
  left in the rendered text (outside code);
* **no code is cut**: no code block (``pre``) is wider than its box (a reader would have to
  scroll sideways to see the end of a line) or reaches past the content column;
* **the left sidebar marks the current page**: it holds a link to the page, marked current
  and shown (not in a collapsed branch); on an API object page, under its module's entry;
* no link in the side columns (the left sidebar, the page's "Contents") reaches past its column;
* the search page finds ``jit``.

Chromium comes from the system (the ``CHROMIUM`` environment variable, else ``chromium``,
``chromium-browser``, ``google-chrome`` on the ``PATH``), driven by playwright (``pip install
playwright``, part of the ``docs`` extra), or else playwright's own download (``playwright
install chromium``). **When no browser can be started the check fails**, saying how to get one:
``sudo apt-get install chromium`` (Debian, Ubuntu), ``brew install --cask chromium`` (macOS),
``CHROMIUM=/path/to/chrome make docs-check``, or ``python -m playwright install chromium``.
``--static-only`` (``make docs-check BROWSER=0``) runs the static checks alone, and says so.

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

# the pages opened in the browser besides every tutorial and gallery page: (path, what it is)
FIXED_PAGES = [
    ("index.html", "the home page"),
    ("checkpoint.html", "a guide"),
    ("api/transform.html", "an API module page"),
    ("api/generated/brainx.nn.LIF.html", "an API object page with math"),
    ("api/generated/brainx.State.html", "an API object page with long method names"),
]

#: how Chromium is started here: headless, and nothing fetched behind the page's back (this
#: also runs in containers without a sandbox or a GPU)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]

HOW_TO_GET_CHROMIUM = """\
the browser checks need Chromium. Get it with one of:
  sudo apt-get install chromium             (Debian, Ubuntu; chromium-browser on older Ubuntu)
  brew install --cask chromium              (macOS)
  CHROMIUM=/path/to/chrome make docs-check  (a Chromium or Chrome already installed)
  .venv/bin/python -m playwright install chromium   (playwright's own build)
or run the static checks alone: make docs-check BROWSER=0 (check_site.py --static-only)"""


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
    problems += gallery_thumbnail_checks(root) + every_source_built(root)
    if not (root / "_static" / "mathjax" / "tex-chtml.js").exists():
        problems.append("_static/mathjax/tex-chtml.js is missing: math cannot render offline")
    print(f"static checks: {len(pages)} pages, {sum(len(p.links) for p in pages.values())} links, "
          f"{sum(len(p.images) for p in pages.values())} images")
    return problems


def gallery_thumbnail_checks(root: pathlib.Path) -> list[str]:
    """The gallery cards whose thumbnail is sphinx-gallery's placeholder (``no_image.png``)."""
    thumbs = sorted((root / "_images").glob("sphx_glr_*_thumb.*"))
    try:
        import tempfile

        import sphinx_gallery
        from PIL import Image, ImageChops
        from sphinx_gallery.utils import scale_image
    except ImportError as e:
        print(f"gallery thumbnails: not compared with the placeholder ({e})")
        return []
    no_image = pathlib.Path(sphinx_gallery.__file__).parent / "_static" / "no_image.png"
    problems, placeholders = [], {}
    for thumb in thumbs:
        if thumb.suffix != ".png":      # an SVG thumbnail is copied as drawn, never the placeholder
            continue
        image = Image.open(thumb).convert("RGBA")
        if image.size not in placeholders:   # the placeholder as sphinx-gallery scales it
            with tempfile.TemporaryDirectory() as tmp:
                scale_image(no_image, pathlib.Path(tmp) / "p.png", *image.size)
                placeholders[image.size] = Image.open(pathlib.Path(tmp) / "p.png").convert("RGBA")
        if ImageChops.difference(image, placeholders[image.size]).getbbox() is None:
            name = thumb.name[len("sphx_glr_"):-len("_thumb.png")]
            problems.append(f"gallery: {name} has the placeholder thumbnail (it draws no figure: "
                            f"give it one with # sphinx_gallery_thumbnail_path)")
    print(f"gallery thumbnails: {len(thumbs)}, {len(problems)} placeholders")
    return problems


def every_source_built(root: pathlib.Path) -> list[str]:
    """Every tutorial and example has its page (where the sources are beside the site)."""
    docs = root.parent.parent            # docs/_build/html -> docs
    if not (docs / "conf.py").exists():
        return []
    wanted = [f"tutorials/{md.stem}.html" for md in (docs / "tutorials").glob("*.md")]
    wanted += [f"gallery/{py.stem}.html" for py in (docs.parent / "examples").glob("*.py")]
    return [f"{page}: not built (its source is there)" for page in wanted
            if not (root / page).exists()]


# -- browser checks ------------------------------------------------------------------------------

def find_chromium() -> str | None:
    """The browser to start: ``CHROMIUM`` when it is set (even if wrong: it is then reported),
    else the first of chromium, chromium-browser, google-chrome on the ``PATH``."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"]) or os.environ["CHROMIUM"]
    for candidate in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(candidate):
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


def browser_pages(root: pathlib.Path) -> list[tuple[str, str]]:
    """The pages opened in the browser: the fixed ones, every tutorial, every gallery page."""
    pages = list(FIXED_PAGES)
    for html_file in sorted((root / "tutorials").glob("*.html")):
        what = "the tutorials' index" if html_file.stem == "index" else "a tutorial"
        pages.append((f"tutorials/{html_file.name}", what))
    for html_file in sorted((root / "gallery").glob("*.html"),
                            key=lambda f: (f.stem != "index", f.name)):
        what = "the gallery" if html_file.stem == "index" else "a gallery example"
        pages.append((f"gallery/{html_file.name}", what))
    return pages


def launch_chromium(p):
    """(browser, where it came from), or (None, why not)."""
    exe, why = find_chromium(), []
    if exe:
        try:
            return p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS), exe
        except Exception as e:
            why.append(f"{exe} did not start: {str(e).splitlines()[0]}")
    else:
        why.append("no chromium, chromium-browser or google-chrome on the PATH, no CHROMIUM=")
    try:
        return p.chromium.launch(headless=True, args=CHROMIUM_ARGS), "playwright's download"
    except Exception as e:
        why.append(f"no playwright download ({str(e).strip().splitlines()[0]})")
    return None, "; ".join(why)


def browser_checks(root: pathlib.Path) -> list[str]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [no_browser("playwright is not installed (pip install playwright, or "
                           "pip install -e '.[docs]')")]
    server, base = serve(root)
    problems = []
    try:
        with sync_playwright() as p:
            browser, where = launch_chromium(p)
            if browser is None:
                return [no_browser(where)]
            pages = browser_pages(root)
            print(f"browser checks: Chromium {browser.version} ({where}), {len(pages) + 1} pages")
            for page_path, what in pages:
                problems += check_page(browser, base, page_path, what, root)
            problems += check_search(browser, base)
            browser.close()
    finally:
        server.shutdown()
    return problems


def no_browser(why: str) -> str:
    print(HOW_TO_GET_CHROMIUM)
    return f"browser checks could not run: {why}"


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
    problems += [f"{page_path} ({what}): {p}" for p in code_not_cut(page) + sidebar_marks(
        page, page_path) + side_columns_not_cut(page)]
    print(f"  {page_path:48s} {len(state['images'])} images, {state['math']} math, "
          f"{page.evaluate(COUNT_CODE)} code blocks, {len(problems)} problems")
    page.close()
    return problems


COUNT_CODE = "() => document.querySelectorAll('article pre').length"

#: the code blocks a reader cannot read whole: wider than their box (a horizontal scrollbar),
#: or reaching past the content column
CUT_CODE = """() => {
  const column = document.querySelector('article').getBoundingClientRect();
  return Array.from(document.querySelectorAll('article pre'))
    .filter(pre => pre.offsetParent !== null)
    .map(pre => {
      const box = pre.getBoundingClientRect();
      const lines = pre.innerText.split('\\n');
      const longest = lines.reduce((a, b) => b.length > a.length ? b : a, '');
      return {hidden: pre.scrollWidth - pre.clientWidth,
              past: Math.round(box.right - column.right),
              width: Math.round(box.width), longest: longest.trim().slice(0, 60),
              chars: longest.length};
    })
    .filter(c => c.hidden > 1 || c.past > 1);
}"""


def code_not_cut(page) -> list[str]:
    return [f"code cut: a {c['chars']}-character line ({c['longest']!r}...) "
            + (f"needs {c['hidden']} px more than its {c['width']} px box" if c["hidden"] > 1
               else f"reaches {c['past']} px past the content column")
            for c in page.evaluate(CUT_CODE)]


#: the left sidebar's links to this page: is each marked current, shown, and under which entry
SIDEBAR = """() => {
  const nav = document.querySelector('.bd-sidebar-primary nav.bd-docs-nav');
  if (!nav) return null;
  const path = a => { try { return new URL(a.href).pathname; } catch (e) { return null; } };
  return Array.from(nav.querySelectorAll('a[href]'))
    .filter(a => path(a) === location.pathname)
    .map(a => {
      const li = a.closest('li'), up = li.parentElement.closest('li');
      const upLink = up ? up.querySelector('a') : null;
      return {marked: a.classList.contains('current') || li.classList.contains('current'),
              shown: a.getClientRects().length > 0,
              under: upLink ? path(upLink) : null};
    });
}"""


#: the links of the side columns (the site's tree on the left, the page's "Contents" on the
#: right) that reach past their column: their end is hidden
CUT_LINKS = """() => {
  const cut = [];
  for (const column of document.querySelectorAll('.bd-sidebar-primary, .bd-sidebar-secondary')) {
    if (!column.getClientRects().length) continue;
    const right = column.getBoundingClientRect().right;
    for (const a of column.querySelectorAll('nav a')) {
      const text = document.createRange();       // the link's text, not its (block) box
      text.selectNodeContents(a);
      if (a.getClientRects().length && text.getBoundingClientRect().right > right + 1)
        cut.push(a.innerText.trim());
    }
  }
  return cut;
}"""


def side_columns_not_cut(page) -> list[str]:
    return [f"a link cut at the edge of a side column: {text!r}"
            for text in page.evaluate(CUT_LINKS)]


def sidebar_marks(page, page_path) -> list[str]:
    links = page.evaluate(SIDEBAR)
    if links is None:
        return ["no left sidebar"]
    if not links:
        return ["the left sidebar has no link to this page"]
    if not any(link["marked"] and link["shown"] for link in links):
        return [f"the left sidebar does not mark this page as current and shown ({links})"]
    if page_path.startswith("api/generated/") and not any(
            link["under"] and link["under"].startswith("/api/") and "/generated/" not in
            link["under"] for link in links):
        return [f"the left sidebar does not show this object under its module's page ({links})"]
    return []


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
    parser.add_argument("--static-only", action="store_true",
                        help="the static checks alone, no browser (make docs-check BROWSER=0)")
    args = parser.parse_args(argv)
    root = args.html.resolve()
    if not (root / "index.html").exists():
        print(f"{root}/index.html not found: build the site first (make docs)")
        return 1
    problems = static_checks(root)
    if args.static_only:
        print("browser checks SKIPPED (--static-only): only the static checks ran")
    else:
        problems += browser_checks(root)
    for problem in problems:
        print("FAIL", problem)
    print(f"{len(problems)} problems" if problems else "site check passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
