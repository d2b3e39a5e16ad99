"""Hooks that let sphinx-gallery run examples/*.py as they are, at small sizes.

The examples are command-line programs: each parses its own arguments, saves its figures as
PNG files (``fig.savefig``) and closes them. :func:`prepare_sources` copies them, with the
gallery's header page, into ``docs/_build/gallery-src/`` (the gallery's source folder, so
nothing is added to examples/); sphinx-gallery runs each one there, in the Sphinx process,
with ``sys.argv`` from :func:`reset_argv` (the sizes in :func:`example_args`: seconds each).
:func:`saved_png_scraper` puts on the page the PNGs an example wrote into its own output
folder (``docs/_build/gallery-out/<example>/``, emptied before the example runs by
:func:`clear_saved_pngs`); figures left open are picked up by sphinx-gallery's own matplotlib
scraper.

sphinx-gallery caches by content: an example runs again only when its file changes.
"""

import ast
import os
import pathlib
import shutil

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parent.parent / "examples"
SRC = HERE.parent / "_build" / "gallery-src"
OUT = HERE.parent / "_build" / "gallery-out"

# Two examples need 8 (fake) CPU devices; XLA reads the count once, when JAX starts its CPU
# backend, which in the Sphinx process is the first example that computes. conf.py sets it
# before any example runs (docs_setup puts the old value back for the notebook kernels).
XLA_DEVICES = "--xla_force_host_platform_device_count=8"

# Examples not executed on the site, with the reason (shown on the gallery's index page).
NOT_RUN = {}


def _out(stem):
    return OUT / stem


def example_args(stem):
    """The command line of each example: small sizes, figures into its output folder."""
    out = _out(stem)
    return {
        # the main demo, 150 of its 400 training iterations (the rest is the same)
        "snn_bptt": ["--quiet", "--iters", "150", "--plot", str(out / "snn_bptt.png"),
                     "--checkpoint", str(out / "snn_bptt.msgpack")],
        # 300 ms of the 1 s run: the network has settled into asynchronous firing by 150 ms
        "ei_delay_network": ["--quiet", "--duration", "300", "--plot-dir", str(out)],
        "ei_network": ["--quiet", "--plot", str(out / "ei_network.png")],
        "checkpointed_step": [],
        "static_argnums_train_eval": ["--iters", "40"],
        "data_parallel_snn": ["--fast"],
        "model_parallel_network": ["--fast"],
    }.get(stem, [])


def reset_argv(gallery_conf, script_vars):
    """``sys.argv[1:]`` for the example sphinx-gallery is about to run.

    Also gives the example its module docstring back: sphinx-gallery runs the code without it
    (``__doc__`` is empty), and the examples' argument parsers read their description there.
    """
    src = pathlib.Path(script_vars["src_file"])
    script_vars["example_globals"]["__doc__"] = ast.get_docstring(
        ast.parse(src.read_text()), clean=False)
    _out(src.stem).mkdir(parents=True, exist_ok=True)
    return example_args(src.stem)


def clear_saved_pngs(gallery_conf, fname, when):
    """Before an example runs: empty its output folder (no figure of an earlier run shows)."""
    if fname is None or when != "before":
        return
    out = _out(pathlib.Path(fname).stem)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def saved_png_scraper(block, block_vars, gallery_conf):
    """The reST for the PNGs the example saved into its output folder since the last block."""
    from sphinx_gallery.scrapers import figure_rst

    out = _out(pathlib.Path(block_vars["src_file"]).stem)
    shown = block_vars.setdefault("brainx_shown_pngs", set())
    images = []
    for png in sorted(out.glob("*.png")) if out.exists() else []:
        if png.name in shown:
            continue
        shown.add(png.name)
        target = next(block_vars["image_path_iterator"])
        shutil.copyfile(png, target)
        images.append(target)
    return figure_rst(images, gallery_conf["src_dir"])


HEADER = """\
Examples gallery
================

The programs in ``examples/``, run when this site is built, with their printed output and
figures. Each runs with smaller sizes than its defaults, so that building the site stays
quick; run one yourself (``python examples/<name>.py``, ``--help`` for its options) for the
full size. The command lines used here (``OUT``: a folder under ``docs/_build`` whose PNGs
are shown on the example's page):

{table}

The two distributed examples run on 8 CPU devices that XLA fakes on one machine; their
output shows the checks they make (one device against all of them).{not_run}
"""


def _header():
    rows = [("example", "arguments on this site")]
    for py in sorted(EXAMPLES.glob("*.py")):
        out = str(_out(py.stem))
        args = "(not run)" if py.stem in NOT_RUN else " ".join(
            a.replace(out, "OUT") for a in example_args(py.stem))
        rows.append((f"``{py.name}``", f"``{args}``" if args else "(the defaults)"))
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    rule = "=" * w0 + "  " + "=" * w1
    lines = [rule, f"{rows[0][0]:{w0}}  {rows[0][1]}", rule]
    lines += [f"{a:{w0}}  {b}" for a, b in rows[1:]] + [rule]
    not_run = "".join(f"\n\n``{k}.py`` is shown but not run: {why}" for k, why in NOT_RUN.items())
    return HEADER.format(table="\n".join(lines), not_run=not_run)


def prepare_sources():
    """Copy examples/*.py and the header into the gallery's source folder (only what changed)."""
    SRC.mkdir(parents=True, exist_ok=True)
    wanted = {"GALLERY_HEADER.rst": _header()}
    wanted.update({py.name: py.read_text() for py in EXAMPLES.glob("*.py")})
    for old in SRC.iterdir():
        if old.is_file() and old.name not in wanted:
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
