"""docs/check_site.py (``make docs-check``) finds what it is meant to find, on tiny made-up sites."""

import pathlib
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
sys.path.insert(0, str(DOCS))
import check_site  # noqa: E402

PAGE = """<html><body>
<nav class="bd-docs-nav"></nav>
<article>{body}</article></body></html>"""


def _site(tmp_path, pages):
    for name, body in pages.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(PAGE.format(body=body))
    (tmp_path / "_static" / "mathjax").mkdir(parents=True)
    (tmp_path / "_static" / "mathjax" / "tex-chtml.js").write_text("")
    return tmp_path


def test_static_checks_find_broken_links_remote_scripts_and_raw_tex(tmp_path):
    root = _site(tmp_path, {
        "index.html": '<a href="a.html#here">a</a> <a href="gone.html">x</a> '
                      '<script src="https://cdn.example/x.js"></script>',
        "a.html": '<p id="here">the rate is \\frac{1}{\\tau}</p>',
    })
    problems = check_site.static_checks(root)
    assert any("broken link 'gone.html'" in p for p in problems)
    assert not any("a.html#here" in p for p in problems)
    assert any("loads from another host" in p for p in problems)
    assert any(p.startswith("a.html: raw TeX") for p in problems)


def test_a_gallery_card_with_the_placeholder_thumbnail_is_found(tmp_path):
    pytest.importorskip("sphinx_gallery")
    Image = pytest.importorskip("PIL.Image")
    from sphinx_gallery.utils import scale_image

    images = tmp_path / "_images"
    images.mkdir()
    no_image = pathlib.Path(sys.modules["sphinx_gallery"].__file__).parent / "_static" / "no_image.png"
    scale_image(no_image, images / "sphx_glr_quiet_thumb.png", 400, 280)    # as sphinx-gallery does
    Image.new("RGB", (400, 280), (30, 120, 200)).save(images / "sphx_glr_plots_thumb.png")
    problems = check_site.gallery_thumbnail_checks(tmp_path)
    assert len(problems) == 1 and "gallery: quiet has the placeholder" in problems[0]


def test_static_only_says_the_browser_checks_were_skipped(tmp_path, capsys):
    root = _site(tmp_path, {"index.html": "<p>home</p>"})
    assert check_site.main(["--html", str(root), "--static-only"]) == 0
    out = capsys.readouterr().out
    assert "browser checks SKIPPED" in out and out.rstrip().endswith("site check passed")


def test_no_browser_is_a_failure_that_says_how_to_get_one(tmp_path, capsys, monkeypatch):
    root = _site(tmp_path, {"index.html": "<p>home</p>"})
    monkeypatch.setattr(check_site, "browser_checks",
                        lambda root: [check_site.no_browser("none here")])
    assert check_site.main(["--html", str(root)]) == 1
    out = capsys.readouterr().out
    assert "apt-get install chromium" in out and "BROWSER=0" in out
    assert "FAIL browser checks could not run: none here" in out


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser, where = check_site.launch_chromium(p)
        if browser is None:
            pytest.skip(f"no Chromium: {where}")
        yield browser
        browser.close()


SIDEBAR = """<div class="bd-sidebar-primary"><nav class="bd-docs-nav"><ul>
<li class="toctree-l1 {cls}"><a class="reference internal" href="#">this page</a></li>
<li class="toctree-l1"><a class="reference internal" href="other.html">another</a></li>
</ul></nav></div>"""


@pytest.mark.parametrize("css, cut", [("", True), ("pre { white-space: pre-wrap; }", False)])
def test_a_code_line_wider_than_its_box_is_found(browser, css, cut):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content(f"<style>pre {{ overflow-x: auto; }} {css}</style>"
                     f"<article style='width: 400px'><pre>{'x = 1 + ' * 40}</pre></article>")
    problems = check_site.code_not_cut(page)
    assert bool(problems) == cut
    if cut:
        assert "code cut: a 320-character line" in problems[0]
    page.close()


@pytest.mark.parametrize("cls, marked", [("current", True), ("", False)])
def test_the_sidebar_must_mark_the_current_page(browser, cls, marked):
    page = browser.new_page()
    page.set_content(SIDEBAR.format(cls=cls) + "<article>text</article>")
    assert (check_site.sidebar_marks(page, "a.html") == []) == marked
    page.close()


@pytest.mark.parametrize("name, cut", [("update()", False), ("update_from_a_state_dict()", True)])
def test_a_link_past_the_edge_of_a_side_column_is_found(browser, name, cut):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content("<div style='display: flex'><article style='width: 1100px'>text</article>"
                     "<div class='bd-sidebar-secondary' style='width: 150px; overflow: hidden'>"
                     f"<nav><a href='#x'><code style='white-space: nowrap'>{name}</code></a>"
                     "</nav></div></div>")
    assert bool(check_site.side_columns_not_cut(page)) == cut
    page.close()
