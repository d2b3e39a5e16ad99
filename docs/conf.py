"""Sphinx configuration for the brainx documentation site (``make docs``).

The stack, and why:

* **Sphinx + MyST + autodoc/autosummary** (not MkDocs + mkdocstrings): the docstrings are
  NumPy-style reStructuredText (``:func:`save```, ``.. note::``, doctest blocks, tables), which
  autodoc + napoleon render as written; MyST keeps the guides in docs/*.md as Markdown
  (tests/test_docs.py keeps running their code blocks).
* **myst-nb** parses every Markdown page (it includes MyST) and executes the pages that are
  notebooks (docs/tutorials/*.md, MyST notebooks with ``{code-cell}``), with a jupyter-cache
  under docs/_build: a tutorial runs again only when its code changes.
* **sphinx-gallery** runs examples/*.py and puts their printed output and figures on the site
  (docs/gallery/, generated, gitignored; docs/_ext/gallery_hooks.py collects the PNGs the
  examples save and gives each example small command-line sizes; the examples that draw no
  figure name a thumbnail drawn by docs/_ext/gallery_thumbnails.py).
* **sphinx-book-theme**, **sphinx-copybutton**, **sphinx-design** (cards on the index).
* **Math offline**: sphinx-mathjax-offline copies MathJax 3 into the site (``_static/mathjax``)
  and points ``mathjax_path`` at it, so no page loads anything from a CDN (``make docs-check``
  fails on any script or stylesheet from another host).

Autosummary writes one page per public object into docs/api/generated/ at every build; the
folder is gitignored, not committed: the pages are derived from the docstrings, so writing
them again each time keeps them in step with the code (several people edit brainx/ at once)
and keeps ~650 derived files out of the history. The grouping (user API first, internals last)
is the hand-written docs/api/*.rst; docs/_ext/api_coverage.py fails the build when a name in a
module's ``__all__`` is on no API page.

The build is offline (no intersphinx) and runs with ``-W``: warnings are errors.
"""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(HERE, "_ext"))

import gallery_hooks  # noqa: E402  (docs/_ext)

# autosummary writes the API pages again at every build (make docs runs with -E): start from
# an empty folder, so that a name removed from the code leaves no stale page behind
shutil.rmtree(os.path.join(HERE, "api", "generated"), ignore_errors=True)

_XLA_FLAGS = gallery_hooks.set_device_count()   # 8 CPU devices for the gallery's examples

project = "brainx"
author = "the brainx developers"
copyright = "2026, the brainx developers"

extensions = [
    "myst_nb",                      # Markdown (MyST) pages and executed MyST notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",       # MathJax 3 copied into _static/mathjax: math renders offline
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx_gallery.gen_gallery",
    "api_coverage",                 # docs/_ext: every public name is on an API page
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "_ext", "_templates",
                    "gallery/*.ipynb", "gallery/*.py", "**.ipynb_checkpoints",
                    "sg_execution_times.rst", "gallery/sg_execution_times.rst"]

# -- autodoc / autosummary: the API reference comes from the public modules' docstrings ------
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "description"        # type hints go under Parameters, not in the signature
autodoc_preserve_defaults = True         # show ``dt=None``, not an evaluated default's repr
autosummary_generate = True              # docs/api/generated/: one page per public object
autosummary_generate_overwrite = True
autosummary_imported_members = True      # the public names are re-exported from submodules
toc_object_entries_show_parents = "hide"  # "Contents" of a class page: update(), not LIF.update()


def _case_safe_filenames():
    """``{name: file name}`` for the public names that differ from another only by case.

    ``brainx.nn.Sigmoid`` (a layer) and ``brainx.nn.sigmoid`` (a function) would get the same
    page file on a case-insensitive file system (macOS, Windows), one overwriting the other; the
    second of each such pair gets its kind in its file name (``brainx.nn.sigmoid-function``).
    """
    import inspect

    from api_coverage import public_names

    groups = {}
    for path, name, obj in public_names():
        if not inspect.ismodule(obj):
            groups.setdefault(f"{path}.{name}".lower(), {})[f"{path}.{name}"] = obj
    renamed = {}
    for names in groups.values():
        ordered = sorted(names, key=lambda n: (not inspect.isclass(names[n]), n))
        for i, full in enumerate(ordered[1:], start=2):
            kind = "class" if inspect.isclass(names[full]) else "function"
            renamed[full] = f"{full}-{kind}" if i == 2 else f"{full}-{kind}-{i}"
    return renamed


autosummary_filename_map = _case_safe_filenames()
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = [("States", "params_style")]   # a neuron's states, listed like parameters

# -- MyST and myst-nb -------------------------------------------------------------------------------
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
nb_execution_mode = "cache"              # run a tutorial only when its code changed
nb_execution_cache_path = os.path.join(HERE, "_build", ".jupyter_cache")
nb_execution_timeout = 300
nb_execution_raise_on_error = True       # a failing tutorial cell fails the build
nb_execution_show_tb = True
nb_merge_streams = True
nb_ipywidgets_js = {}                    # no widgets, and no require.js from a CDN

# The notebook kernels get an IPython folder of their own under _build (their history stays out
# of ~/.ipython) whose kernel config logs errors only: ipykernel's warning that it talks to the
# build over local TCP was printed four times per build, in the middle of make docs's output.
_IPYTHONDIR = os.path.join(HERE, "_build", "ipython")
os.makedirs(os.path.join(_IPYTHONDIR, "profile_default"), exist_ok=True)
with open(os.path.join(_IPYTHONDIR, "profile_default", "ipython_kernel_config.py"), "w") as _f:
    _f.write('c.IPKernelApp.log_level = "ERROR"\n')
os.environ["IPYTHONDIR"] = _IPYTHONDIR

# -- the examples gallery ------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": gallery_hooks.prepare_sources(),   # examples/*.py, copied under _build
    "gallery_dirs": "gallery",
    # every example runs (with the small sizes of gallery_hooks.example_args), except those
    # gallery_hooks.NOT_RUN names, which are shown as code with the reason
    "filename_pattern": r"/(?!(%s)\.py$)[^/]+\.py$" % "|".join(gallery_hooks.NOT_RUN),
    "ignore_pattern": r"__init__\.py",
    "reset_argv": "gallery_hooks.reset_argv",
    "image_scrapers": ("matplotlib", "gallery_hooks.saved_png_scraper"),
    "reset_modules": ("matplotlib", "gallery_hooks.note_start"),
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "write_computation_times": False,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "within_subsection_order": "FileNameSortKey",
}

# -- HTML ---------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "brainx"
html_favicon = "_static/favicon.svg"     # (without one the browser asks for /favicon.ico: a 404)
html_static_path = ["_static"]
html_css_files = ["brainx.css"]
html_theme_options = {
    # the sidebar shows the branch of the current page only: with ~700 API pages, expanding
    # the whole tree on every page made the HTML writing phase 6x slower
    "collapse_navbar": True,
    "max_navbar_depth": 3,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "home_page_in_toc": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
}
html_context = {"default_mode": "auto"}    # light or dark as the reader's system (no console error)
html_last_updated_fmt = None
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True


# -- two docstring habits that napoleon would render wrongly -----------------------------------------
FIELD_SECTIONS = {"parameters", "arguments", "args", "other parameters", "keyword arguments",
                  "attributes", "returns", "yields", "raises", "warns"}


def _is_header(lines, i):
    return (i + 1 < len(lines) and lines[i].strip() and not lines[i].startswith(" ")
            and set(lines[i + 1].strip()) == {"-"})


def close_field_sections(app, what, name, obj, options, lines):
    """End a Parameters/Returns/... section where a free paragraph follows it.

    brainx's docstrings often follow the last parameter with a paragraph about the whole
    function (no header). numpydoc reads that as prose; napoleon would read it as another field
    and break the field list. An unindented line in a field section, after a blank line, with no
    `` : `` and no indented description below it, starts such a paragraph: a ``Notes`` header is
    put before it.
    """
    section, i = None, 0
    while i < len(lines):
        if _is_header(lines, i):
            section = lines[i].strip().lower()
            i += 2
            continue
        line = lines[i]
        starts_paragraph = (
            section in FIELD_SECTIONS and i > 0 and not lines[i - 1].strip()
            and line.strip() and not line.startswith(" ") and " : " not in line
            and i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].startswith(" "))
        if starts_paragraph:
            lines[i:i] = ["Notes", "-----"]
            section = "notes"
            i += 2
        i += 1


def skip_foreign_attributes(app, what, name, obj, skip, options):
    """Skip class attributes that are other libraries' functions (``reduce = jnp.max``)."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and callable(obj) and module and not module.startswith("brainx"):
        return True
    return None


def typing_any_is_not_a_filter(app, doctree):
    """A parameter type ``Any`` is ``typing.Any``, not the filter ``brainx.util.Any``.

    Types in docstring fields (``value : Any``) become cross-references that Sphinx resolves
    by suffix, so a bare ``Any`` would link to the filter class of the same name. Pointing it
    at ``typing.Any`` (not documented here: no intersphinx) leaves it as plain text.
    """
    from sphinx.addnodes import pending_xref

    for node in doctree.findall(pending_xref):
        if node.get("refdomain") == "py" and node.get("reftarget") == "Any":
            node["reftarget"] = "typing.Any"


def api_pages_off_the_toctree(app, doctree):
    """Keep the ~650 generated API pages out of the navigation tree (they are ``:orphan:``).

    The theme renders the navigation tree on every page; with every generated page in it,
    writing the HTML took most of the build (about 0.1 s a page). The pages stay reachable
    from their module's tables (and the search); the sidebar lists the module pages, and on an
    object page the object under its module (:func:`api_page_in_sidebar`).
    """
    from sphinx.ext.autosummary import autosummary_toc

    parents = app.env.__dict__.setdefault("brainx_api_parent", {})
    for node in list(doctree.findall(autosummary_toc)):
        for toctree in node.children:
            for _, docname in toctree.get("entries", ()):
                parents.setdefault(docname, app.env.docname)
        node.parent.remove(node)


def forget_api_parents(app, env, docname):
    parents = env.__dict__.get("brainx_api_parent", {})
    for page in [p for p, parent in parents.items() if parent == docname]:
        del parents[page]


def api_page_in_sidebar(app, pagename, templatename, context, doctree):
    """The sidebar of a generated API page: its module page's, with the page marked under it.

    The generated pages are off the navigation tree (:func:`api_pages_off_the_toctree`), so on
    their own their sidebar would have no current entry. Here the theme's navigation tree is
    the module page's (the page whose table lists the object), its links made relative to
    ``api/generated/``, with one entry added under the module: this page, marked current.
    """
    import html
    import re

    parent = app.env.__dict__.get("brainx_api_parent", {}).get(pagename)
    if (parent is None or "toctree" not in context or not pagename.startswith("api/generated/")
            or parent.count("/") != 1):
        return
    builder = app.builder
    up = "../"       # api/generated/x.html is one folder below the module page api/m.html
    module_uri = up + builder.get_target_uri(parent).split("/")[-1]
    name = (context.get("title") or pagename.rsplit("/", 1)[-1]).rsplit(".", 1)[-1]
    entry = ('<ul class="current"><li class="toctree-l3 current"><a class="current reference '
             'internal" href="#"><code class="docutils literal notranslate"><span class="pre">'
             f'{html.escape(name)}</span></code></a></li></ul>')

    def toctree(**kwargs):   # Sphinx's own context["toctree"], for the module page
        fragment = builder._get_local_toctree(parent, **kwargs)
        fragment = re.sub(r'href="(?![a-z][a-z0-9+.-]*:|/|#)', f'href="{up}', fragment)
        # the module's own entry: a link to it (not "#"), not the current page, and this page
        # under it (Sphinx writes it as <li class="toctree-lN current"><a class="current ..." href="#">)
        fragment, n = re.subn(
            r'(<li class="toctree-l(\d) current">)<a class="current reference internal" '
            r'href="#">(.*?)</a>',
            lambda m: (f'{m.group(1)}<a class="reference internal" href="{module_uri}">'
                       f'{m.group(3)}</a>{entry.replace("toctree-l3", f"toctree-l{int(m.group(2)) + 1}")}'),
            fragment, count=1, flags=re.S)
        return fragment if n else builder._get_local_toctree(pagename, **kwargs)

    context["toctree"] = toctree


def restore_xla_flags(app, env, docnames):
    """After the gallery ran: the notebook kernels start with the user's XLA_FLAGS (1 device)."""
    if _XLA_FLAGS is None:
        os.environ.pop("XLA_FLAGS", None)
    else:
        os.environ["XLA_FLAGS"] = _XLA_FLAGS


def setup(app):
    app.connect("env-before-read-docs", restore_xla_flags)
    app.connect("doctree-read", typing_any_is_not_a_filter)
    app.connect("doctree-read", api_pages_off_the_toctree, priority=400)  # before the toctree collector
    app.connect("env-purge-doc", forget_api_parents)
    # before the theme (500), which renders the sidebar (cached) while it prepares the page
    app.connect("html-page-context", api_page_in_sidebar, priority=400)
    app.connect("autodoc-process-docstring", close_field_sections, priority=400)  # before napoleon
    app.connect("autodoc-skip-member", skip_foreign_attributes)
