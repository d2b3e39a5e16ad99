"""A progress bar for compiled loops, updated from inside the loop.

The loop stays compiled: every few steps it calls back to Python (an ordered
``jax.debug.callback``) to move the bar. The bar is drawn with ``tqdm`` when
it is installed, and otherwise with the plain-text
:class:`~brainx.transform.control.text_bar.TextBar`, so asking for a bar
never makes a program depend on an optional package.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Optional, Tuple, Union

import jax
import jax.numpy as jnp

from brainx.transform.control.text_bar import TextBar

__all__ = ["ProgressBar"]

Desc = Union[str, Tuple[str, Callable[[Dict[str, Any]], Dict[str, Any]]]]


def _bar_class() -> Callable[..., Any]:
    """``tqdm.auto.tqdm`` if tqdm is installed, else the plain-text :class:`TextBar`."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return TextBar
    return tqdm


class ProgressBar:
    """A progress bar for :func:`scan` and :func:`for_loop`, drawn with tqdm.

    Without tqdm installed, the bar is drawn as plain text (as brainstate
    does), by :class:`~brainx.transform.control.text_bar.TextBar`.

    The loop stays compiled: every ``freq`` steps it calls back to Python
    (``jax.debug.callback``, ordered) to move the bar. Results are the same
    as without the bar.

    Parameters
    ----------
    freq : int, optional
        Update the bar every ``freq`` steps. Default: about 20 updates in all.
    count : int, optional
        Update the bar about ``count`` times in all (instead of ``freq``):
        every ``n // count`` steps, as brainstate.
    desc : str or (str, callable), optional
        The bar's description. A pair ``(template, fn)`` formats ``template``
        with ``fn(data)``, where ``data`` is ``{"i": step index, "carry":
        carry, "y": step output}``; ``fn`` runs in the traced loop and returns
        a dict of arrays.
    **kwargs
        Passed to ``tqdm`` (``file``, ``ncols``, ``leave``, ...); ``total``,
        ``mininterval``, ``maxinterval`` and ``miniters`` are dropped (the
        loop decides when the bar moves).

    ``print_freq`` and ``print_count`` (brainstate's names) read ``freq`` and
    ``count``. Unlike brainstate, a ``freq`` larger than the loop, or a
    ``count`` larger than its number of steps, is not an error: the bar
    moves after the first and the last step (and every step, respectively).

    Examples
    --------
    >>> import io, jax.numpy as jnp, brainx
    >>> out = io.StringIO()
    >>> bar = brainx.transform.ProgressBar(freq=5, file=out)
    >>> ys = brainx.transform.for_loop(lambda x: x * 2, jnp.arange(10.0), pbar=bar)
    >>> "10/10" in out.getvalue(), float(ys.sum())
    (True, 90.0)
    """

    def __init__(self, freq: Optional[int] = None, count: Optional[int] = None,
                 desc: Optional[Desc] = None, **kwargs):
        for name, value in (("freq", freq), ("count", count)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                raise ValueError(f"ProgressBar: {name} must be a positive int, got {value!r}.")
        if freq is not None and count is not None:
            raise ValueError(f"ProgressBar: give freq or count, not both (got freq={freq}, "
                             f"count={count}).")
        _check_desc(desc)
        for managed in ("total", "mininterval", "maxinterval", "miniters"):
            kwargs.pop(managed, None)  # the loop decides when the bar moves
        self.freq = freq
        self.count = count
        self.desc = desc
        self.kwargs = kwargs

    @property
    def print_freq(self) -> Optional[int]:
        """brainstate's name for ``freq``."""
        return self.freq

    @property
    def print_count(self) -> Optional[int]:
        """brainstate's name for ``count``."""
        return self.count

    def init(self, n: int) -> "ProgressRunner":
        """The runner for a loop of ``n`` steps."""
        if self.count is not None:
            freq = max(1, n // self.count)
        elif self.freq is not None:
            freq = self.freq
        else:
            freq = max(1, n // 20)
        return ProgressRunner(n, max(1, min(freq, n)), self.desc, self.kwargs)

    def __repr__(self) -> str:
        return f"ProgressBar(freq={self.freq}, count={self.count}, desc={self.desc!r})"


def _check_desc(desc: Any) -> None:
    if desc is None or isinstance(desc, str):
        return
    if not isinstance(desc, (tuple, list)):
        raise TypeError(f"ProgressBar: desc must be a string or a pair (format string, "
                        f"function), got {type(desc).__name__}.")
    if len(desc) != 2:
        raise ValueError(f"ProgressBar: desc must be a pair (format string, function), got "
                         f"{len(desc)} elements.")
    if not isinstance(desc[0], str):
        raise TypeError(f"ProgressBar: the first element of desc must be a format string, got "
                        f"{type(desc[0]).__name__}.")
    if not callable(desc[1]):
        raise TypeError(f"ProgressBar: the second element of desc must be a function of the "
                        f"step's data returning a dict, got {type(desc[1]).__name__}.")


class ProgressRunner:
    """The bar of one loop: ``runner(steps_done, carry, y)`` is called in the traced step."""

    def __init__(self, n: int, freq: int, desc: Optional[Desc], kwargs: dict):
        self.n = n
        self.freq = freq
        self.desc = desc
        self.kwargs = kwargs
        self.bar = None

    @property
    def print_freq(self) -> int:
        """brainstate's name for ``freq``: the bar moves every ``print_freq`` steps."""
        return self.freq

    @property
    def remainder(self) -> int:
        """The steps after the last multiple of ``freq`` (``n % freq``); the bar
        moves once more after the last step, so it always ends at ``n``."""
        return self.n % self.freq

    def __call__(self, done, carry: Any = None, y: Any = None) -> None:
        """Move the bar after a step; ``done`` counts the steps finished (traced int)."""
        data: Dict[str, Any] = {}
        if isinstance(self.desc, (tuple, list)):
            data = self.desc[1]({"i": done - 1, "carry": carry, "y": y})
            if not isinstance(data, dict):
                raise TypeError(f"ProgressBar: the desc function must return a dict, got "
                                f"{type(data).__name__}.")
        # A loop that counts past n (a skipped step) never moves a closed bar.
        show = ((done == 1) | (done % self.freq == 0) | (done == self.n)) & (done <= self.n)
        jax.lax.cond(show, lambda d, x: jax.debug.callback(self.update, d, x, ordered=True),
                     lambda d, x: None, jnp.asarray(done, jnp.int32), data)

    def update(self, done, data: Optional[dict] = None) -> None:
        """Host side: show ``done`` steps finished."""
        done = int(done)
        if self.bar is None or done <= self.bar.n:  # first update of a run
            self.close()
            self.bar = _bar_class()(total=self.n, **self.kwargs)
            if isinstance(self.desc, str):
                self.bar.set_description(self.desc, refresh=False)
            elif self.desc is None:
                self.bar.set_description(f"Running for {self.n:,} steps", refresh=False)
        if isinstance(self.desc, (tuple, list)):
            self.bar.set_description(self.desc[0].format(**(data or {})), refresh=False)
        self.bar.update(done - self.bar.n)
        if done >= self.n:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def as_progress_bar(pbar: Any) -> Tuple[Optional[ProgressBar], Hashable]:
    """``(bar, cache_key)`` for a loop's ``pbar`` argument (None, bool, int or ProgressBar)."""
    if pbar is None or pbar is False:
        return None, None
    if pbar is True:
        return ProgressBar(), ("default",)
    if isinstance(pbar, int):
        return ProgressBar(freq=pbar), ("freq", pbar)
    if isinstance(pbar, ProgressBar):
        if not pbar.kwargs and (pbar.desc is None or isinstance(pbar.desc, str)):
            # By value: `pbar=ProgressBar(freq=10)` written inline compiles once.
            return pbar, ("bar", pbar.freq, pbar.count, pbar.desc)
        return pbar, pbar  # a file or a desc function: this very bar
    raise TypeError(f"pbar must be None, a bool, an int (the update frequency) or a "
                    f"ProgressBar, got {pbar!r}.")
