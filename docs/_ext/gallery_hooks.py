"""Hooks that let sphinx-gallery run examples/*.py as they are, at small sizes.

The examples are command-line programs: each parses its own arguments, saves its figures as
PNG files (``fig.savefig``) in the working folder and closes them. :func:`prepare_sources`
copies them, with the gallery's header page, into ``docs/_build/gallery-src/`` (the gallery's
source folder, so nothing is added to examples/); sphinx-gallery runs each one there, in the
Sphinx process, with ``sys.argv`` from :func:`reset_argv` (the sizes in :func:`example_args`:
seconds each). :func:`saved_png_scraper` puts on the page the PNGs the example wrote there
while it ran (new or rewritten since :func:`note_start`); figures left open are picked up by sphinx-gallery's
own matplotlib scraper.

sphinx-gallery caches by content: an example runs again only when its file changes (after a
change here, or in brainx, ``rm -rf docs/gallery`` runs them all again).
"""

import ast
import os
import pathlib
import shutil

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parent.parent / "examples"
SRC = HERE.parent / "_build" / "gallery-src"

# Two examples need 8 (fake) CPU devices; XLA reads the count once, when JAX starts its CPU
# backend, which in the Sphinx process is the first example that computes. conf.py sets it
# before any example runs (docs_setup puts the old value back for the notebook kernels).
XLA_DEVICES = "--xla_force_host_platform_device_count=8"

# Examples not executed on the site, with the reason (shown on the gallery's index page).
NOT_RUN = {}


def example_args(stem):
    """The command line of each example: small sizes (their figures go to the working folder)."""
    return {
        # the main demo, 150 of its 400 training iterations (the rest is the same)
        "snn_bptt": ["--quiet", "--iters", "150"],
        # 300 ms of the 1 s run: the network has settled into asynchronous firing by 150 ms
        "ei_delay_network": ["--quiet", "--duration", "300"],
        "ei_network": ["--quiet"],
        "checkpointed_step": [],
        "static_argnums_train_eval": ["--iters", "40"],
        "data_parallel_snn": ["--fast"],
        "model_parallel_network": ["--fast"],
        # 65 536 neurons (not a million) over the gallery's 8 CPU devices, 100 steps
        "brain_scale": ["--fast"],
        # scale 0.05 for 300 steps, one device against eight
        "partitioned_microcircuit": ["--fast"],
        # a tenth of the default scale (772 neurons, 30 k synapses), 100 ms warm-up, 300 ms
        "microcircuit": ["--scale", "0.01", "--t-presim", "100", "--t-sim", "300"],
    }.get(stem, [])


def reset_argv(gallery_conf, script_vars):
    """``sys.argv[1:]`` for the example sphinx-gallery is about to run.

    Also gives the example its module docstring back: sphinx-gallery runs the code without it
    (``__doc__`` is empty), and the examples' argument parsers read their description there.
    """
    src = pathlib.Path(script_vars["src_file"])
    script_vars["example_globals"]["__doc__"] = ast.get_docstring(
        ast.parse(src.read_text()), clean=False)
    return example_args(src.stem)


_BEFORE = {}   # example name -> {png name: mtime} in the working folder before it ran


def _pngs(folder):
    return {png.name: png.stat().st_mtime_ns for png in folder.glob("*.png")}


def note_start(gallery_conf, fname, when):
    """Before an example runs: note the PNGs already there (the example's are new or rewritten)."""
    if fname is not None and when == "before":
        _BEFORE[pathlib.Path(fname).stem] = _pngs(SRC)   # fname: the file name only


def saved_png_scraper(block, block_vars, gallery_conf):
    """The reST for the PNGs the example saved in its working folder since it started."""
    from sphinx_gallery.scrapers import figure_rst

    src = pathlib.Path(block_vars["src_file"])
    before = _BEFORE.get(src.stem, {})
    shown = block_vars.setdefault("brainx_shown_pngs", set())
    images = []
    for name, mtime in sorted(_pngs(src.parent).items()):
        if name in shown or before.get(name) == mtime:
            continue
        shown.add(name)
        target = next(block_vars["image_path_iterator"])
        shutil.copyfile(src.parent / name, target)
        images.append(target)
    return figure_rst(images, gallery_conf["src_dir"])


HEADER = """\
Examples gallery
================

The programs in ``examples/``, run when this site is built, with their printed output and
figures. Each runs with smaller sizes than its defaults, so that building the site stays
quick; run one yourself (``python examples/<name>.py``, ``--help`` for its options) for the
full size. The command lines used here (the PNG files an example saves are shown on its
page):

{table}

The two distributed examples run on 8 CPU devices that XLA fakes on one machine; their
output shows the checks they make (one device against all of them).{not_run}
"""


def _header():
    rows = [("example", "arguments on this site")]
    for py in sorted(EXAMPLES.glob("*.py")):
        args = "(not run)" if py.stem in NOT_RUN else " ".join(example_args(py.stem))
        rows.append((f"``{py.name}``", f"``{args}``" if args else "(the defaults)"))
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    rule = "=" * w0 + "  " + "=" * w1
    lines = [rule, f"{rows[0][0]:{w0}}  {rows[0][1]}", rule]
    lines += [f"{a:{w0}}  {b}" for a, b in rows[1:]] + [rule]
    not_run = "".join(f"\n\n``{k}.py`` is shown but not run: {why}" for k, why in NOT_RUN.items())
    return HEADER.format(table="\n".join(lines), not_run=not_run)


def prepare_sources():
    """Copy examples/*.py and the header into the gallery's source folder (only what changed).

    Anything else there (the figures and files the examples wrote last time) is removed.
    """
    SRC.mkdir(parents=True, exist_ok=True)
    wanted = {"GALLERY_HEADER.rst": _header()}
    wanted.update({py.name: py.read_text() for py in EXAMPLES.glob("*.py")})
    for old in SRC.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
        elif old.name not in wanted:
            old.unlink()
    for name, text in wanted.items():
        target = SRC / name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    return str(SRC)


def set_device_count():
    """Give the Sphinx process 8 CPU devices (for the two distributed examples)."""
    old = os.environ.get("XLA_FLAGS")
    if XLA_DEVICES not in (old or ""):
        os.environ["XLA_FLAGS"] = f"{old} {XLA_DEVICES}".strip() if old else XLA_DEVICES
    return old
