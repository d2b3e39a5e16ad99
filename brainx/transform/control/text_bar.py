"""A plain-text progress bar, used by :class:`ProgressBar` when tqdm is not installed.

:class:`~brainx.transform.ProgressBar` draws with ``tqdm`` when it can. A
program that asks for a bar (``pbar=True``) should not fail because an
optional package is missing, so without tqdm the bar is drawn by
:class:`TextBar`: the slice of tqdm's interface the loops use (``n``,
``update``, ``set_description``, ``close``) and a one-line display::

    Running for 10 steps:  50%|#####     | 5/10 [00:01<00:01, 4.00it/s]

On an interactive terminal the line is redrawn in place (``\\r``); written to
a file or a log, each update is a line of its own, so no carriage return
ends up in the text. ``disable=True`` draws nothing. tqdm's other keyword
arguments (``ascii``, ``colour``, ``position``, ...) are accepted and
ignored, so one ``ProgressBar(...)`` works with or without tqdm.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

__all__ = ["TextBar"]

_BAR_WIDTH = 20  # characters between the | |, when the line has room


class TextBar:
    """A tqdm-like bar for ``total`` steps, written to ``file`` (default: stderr).

    Parameters
    ----------
    total : int
        The number of steps (100%).
    desc : str, optional
        Written before the bar.
    file : file-like, optional
        Where to write; default ``sys.stderr``.
    disable : bool
        Draw nothing.
    ncols : int, optional
        The width of the line (default 80): the bar is 20 characters wide,
        narrower on a narrow line, and dropped (the counts are kept) where
        it would be narrower than 10.
    **ignored
        tqdm's other options, accepted and ignored.

    Examples
    --------
    >>> import io
    >>> from brainx.transform.control.text_bar import TextBar
    >>> out = io.StringIO()
    >>> bar = TextBar(total=4, desc="train", file=out)
    >>> bar.update(2); bar.update(2); bar.close()
    >>> out.getvalue().splitlines()[-1].split("[")[0]
    'train: 100%|####################| 4/4 '
    """

    def __init__(self, total: int, desc: Optional[str] = None, file: Optional[TextIO] = None,
                 disable: bool = False, ncols: Optional[int] = None, **ignored: Any):
        self.total = int(total)
        self.desc = desc or ""
        self.file = file
        self.disable = bool(disable)
        self.ncols = int(ncols) if ncols else 80
        self.n = 0
        self.closed = False
        self._start = time.monotonic()
        self._drawn = False

    def set_description(self, desc: Optional[str] = None, refresh: bool = True) -> None:
        """Replace the text written before the bar."""
        self.desc = desc or ""
        if refresh and self._drawn:
            self._draw()

    def update(self, n: int = 1) -> None:
        """Advance by ``n`` steps and redraw (nothing after :meth:`close`)."""
        if self.closed:
            return
        self.n += int(n)
        self._draw()

    def close(self) -> None:
        """End the line; later calls do nothing."""
        if self.closed:
            return
        self.closed = True
        if self._drawn and self._is_tty():
            self._write("\n")

    # -- drawing ---------------------------------------------------------------------------

    def line(self) -> str:
        """The current display, as one line of text."""
        elapsed = time.monotonic() - self._start
        rate = self.n / elapsed if elapsed > 0 and self.n else None
        left = (self.total - self.n) / rate if rate and self.total else None
        frac = min(max(self.n / self.total, 0.0), 1.0) if self.total > 0 else 0.0
        prefix = f"{self.desc}: " if self.desc else ""
        counts = (f"{self.n}/{self.total} [{_interval(elapsed)}<"
                  f"{_interval(left) if left is not None else '?'}, "
                  f"{f'{rate:.2f}' if rate else '?'}it/s]")
        width = min(_BAR_WIDTH, self.ncols - len(prefix) - len(counts) - 8)
        bar = f"|{'#' * int(frac * width):<{width}}| " if width >= 10 else " "
        return f"{prefix}{100 * frac:3.0f}%{bar}{counts}"

    def _is_tty(self) -> bool:
        isatty = getattr(self._stream(), "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stream
            return False

    def _stream(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def _draw(self) -> None:
        if self.disable:
            return
        self._drawn = True
        text = self.line()
        self._write(f"\r{text}" if self._is_tty() else f"{text}\n")

    def _write(self, text: str) -> None:
        stream = self._stream()
        try:
            stream.write(text)
        except UnicodeEncodeError:
            stream.write(text.encode("ascii", "replace").decode("ascii"))
        flush = getattr(stream, "flush", None)
        if flush is not None:
            flush()


def _interval(seconds: float) -> str:
    """``mm:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = int(seconds)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
