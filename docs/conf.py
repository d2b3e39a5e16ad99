"""Sphinx configuration for the brainx documentation site (``make docs``).

Why Sphinx + MyST-parser + autodoc/autosummary (and not MkDocs + mkdocstrings): the docstrings are
NumPy-style reStructuredText (``:func:`save```, ``.. note::``, doctest blocks, tables), which
autodoc + napoleon render as written, while mkdocstrings expects Markdown docstrings; MyST lets
the existing Markdown pages in docs/ stay as they are (tests/test_docs.py keeps running their
code blocks). The build is offline (no intersphinx) and runs with ``-W``: warnings are errors.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "brainx"
author = "the brainx developers"
copyright = "2026, the brainx developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# -- autodoc: the API reference comes from the public modules' docstrings -----------------------
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "description"        # type hints go under Parameters, not in the signature
autodoc_preserve_defaults = True         # show ``dt=None``, not an evaluated default's repr
autosummary_generate = False             # the API pages are written by hand, nothing is generated
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

# -- MyST: the hand-written pages are Markdown ----------------------------------------------------
myst_heading_anchors = 3

# -- HTML -----------------------------------------------------------------------------------------
html_theme = "alabaster"                 # ships with Sphinx: no theme package to install
html_title = "brainx"
html_static_path = []


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


def setup(app):
    app.connect("autodoc-process-docstring", close_field_sections, priority=400)  # before napoleon
    app.connect("autodoc-skip-member", skip_foreign_attributes)
