"""Draw the gallery thumbnails of the examples that make no figure (docs/_static/gallery-thumbs/).

Four examples only print: a checkpointed step's memory, a static flag, and the two distributed
runs. Without a figure, sphinx-gallery gives their cards its placeholder image; each of them
names one of these pictures instead (``# sphinx_gallery_thumbnail_path = ...``), a small
diagram of what the example shows. ``docs/check_site.py`` fails on a card with the placeholder.

Run ``python docs/_ext/gallery_thumbnails.py`` after changing a drawing; the SVG files are
committed (text, and written the same each time: no date, fixed ids).
"""

import pathlib

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "brainx"         # the same ids at every run
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "_static" / "gallery-thumbs"
COLORS = plt.get_cmap("tab10").colors
DEVICES = 8


def _figure():
    fig = plt.figure(figsize=(4.0, 2.8), dpi=100)      # sphinx-gallery's thumbnail box, 400 x 280
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 40)
    ax.set_ylim(0, 28)
    ax.axis("off")
    return fig, ax


def _box(ax, x, y, w, h, text="", color="white", size=9, **kw):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor="0.25", lw=1, **kw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", size=size)


def _arrow(ax, start, end, text="", size=8):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="0.3"))
    if text:
        ax.text((start[0] + end[0]) / 2 + 0.5, (start[1] + end[1]) / 2, text, size=size,
                va="center")


def checkpointed_step(ax):
    """XLA's temporary memory of the gradient, plain and checkpointed (the example's output)."""
    kib = {"plain": 4009.3, "checkpointed": 2009.2}     # T=1000, n=256 on CPU, as printed
    ax.text(20, 26, "gradient through 1000 steps", ha="center", size=11, weight="bold")
    ax.text(20, 23.3, "XLA temporary memory", ha="center", size=9, color="0.3")
    for i, (name, value) in enumerate(kib.items()):
        y, w = 14 - 8 * i, 34 * value / max(kib.values())
        _box(ax, 3, y, w, 5, color=COLORS[i], alpha=0.85)
        ax.text(3, y + 6, name, size=9)
        ax.text(3 + w - 0.5, y + 2.5, f"{value / 1024:.1f} MiB", ha="right", va="center",
                size=9, color="white", weight="bold")


def static_argnums_train_eval(ax):
    """One step function, a Python flag: two traces, two compiled functions."""
    _box(ax, 9, 20, 22, 5.5, "step(x, training)", color="0.93", size=10)
    for i, (flag, what) in enumerate([("training=True", "input noise\nspike dropout"),
                                      ("training=False", "no noise\nall spikes")]):
        x = 2 + 20 * i
        _arrow(ax, (20, 20), (x + 8, 14.5))
        ax.text(x + 8 + (-1 if i == 0 else 1), 17.6, flag, size=8,
                ha="right" if i == 0 else "left")
        _box(ax, x, 4, 16, 10, what, color=COLORS[2 + i], alpha=0.35, size=9)
        ax.text(x + 8, 1.5, "compiled once", ha="center", size=8, color="0.3")


def data_parallel_snn(ax):
    """A batch split over 8 devices, the parameters on each, the gradients all-reduced."""
    ax.text(20, 26, "batch split over 8 devices", ha="center", size=11, weight="bold")
    width = 4.2
    for d in range(DEVICES):
        x = 1.5 + d * (width + 0.5)
        _box(ax, x, 12, width, 9, color=COLORS[d % 10], alpha=0.45)   # its trials
        _box(ax, x, 6.5, width, 4, "W", color="0.9", size=8)        # the parameters, replicated
        ax.text(x + width / 2, 16.5, f"{d}", ha="center", va="center", size=9)
    _arrow(ax, (3, 4.5), (37.5, 4.5))
    _arrow(ax, (37.5, 4.5), (3, 4.5))
    ax.text(20, 1.5, "gradients all-reduced", ha="center", size=9, color="0.3")


def model_parallel_network(ax):
    """The neurons (V) and the recurrent weights' columns that feed them, over 8 devices."""
    ax.text(20, 26, "neurons split over 8 devices", ha="center", size=11, weight="bold")
    x0, width, col = 8, 24, 24 / DEVICES
    for d in range(DEVICES):
        _box(ax, x0 + d * col, 19.5, col, 2, color=COLORS[d % 10], alpha=0.8)      # V[block]
        _box(ax, x0 + d * col, 3, col, 14, color=COLORS[d % 10], alpha=0.45)       # W[:, block]
        ax.text(x0 + (d + 0.5) * col, 10, f"{d}", ha="center", va="center", size=9)
    ax.text(x0 - 0.8, 20.5, "V", ha="right", va="center", size=10)
    ax.text(x0 - 0.8, 10, "W", ha="right", va="center", size=10)
    ax.text(x0 + width + 0.8, 20.5, "P('model')", va="center", size=8)
    ax.text(x0 + width + 0.8, 10, "P(None,\n'model')", va="center", size=8)
    ax.text(20, 0.8, "each step: all spikes to every device", ha="center", size=8, color="0.3")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for draw in (checkpointed_step, static_argnums_train_eval, data_parallel_snn,
                 model_parallel_network):
        fig, ax = _figure()
        draw(ax)
        fig.savefig(OUT / f"{draw.__name__}.svg", metadata={"Date": None})
        plt.close(fig)
        print(OUT / f"{draw.__name__}.svg")


if __name__ == "__main__":
    main()
