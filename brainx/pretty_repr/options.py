"""What a pretty repr looks like: its options, the size summary of a model, and array summaries.

A :class:`ReprOptions` holds the settings every pretty repr consults (a state's
``repr``, ``print(module)``, :func:`~brainx.util.pretty_format`): the line
``width`` a repr is fitted to, how deep (``max_depth``) and how long
(``max_items``) it goes, whether a model's repr ends with its parameter count
(``summary``), whether ``print`` colours it (``color``) and whether arrays show
short dtypes (``f32[3]``, ``short_dtypes``).

* :func:`get_repr_options` returns the options in force in this thread;
* :func:`set_repr_options` changes the process-wide defaults and returns the old ones;
* :func:`repr_options` changes them inside a ``with`` block, in this thread only, and puts
  them back on leaving it, also when the block raises.

:class:`ReprSummary` is the size of a graph node's states (``# 26 params (104 B)``),
:func:`format_array_like` the one-word summary of an array (``f32[3,4]``) and
:func:`format_bytes` a byte count for people (``'1.5 KiB'``).

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from brainx.util import repr_options
>>> w = brainx.ParamState(jnp.zeros((2, 3)))
>>> w
ParamState(f32[2,3])
>>> with repr_options(short_dtypes=False):
...     print(repr(w))
ParamState(float32[2,3])
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from typing import Any, Dict, Iterator, Optional

import brainunit as u
import jax
import numpy as np

__all__ = [
    "ReprOptions", "ReprSummary", "PrettyReprContext", "CONTEXT", "get_repr_options",
    "set_repr_options", "repr_options", "format_bytes", "format_array_like",
]


@dataclasses.dataclass(frozen=True)
class ReprOptions:
    """The settings of pretty reprs (immutable; :meth:`replace` makes a changed copy).

    Parameters
    ----------
    width : int, default 88
        A group (an object's attributes, a list's items) that fits in the columns left on
        its line is printed on that line; otherwise one item per line, each followed by a
        comma.
    max_depth : int or None, default None
        How many levels of named objects below the root are expanded; deeper ones print as
        ``Type(...)``. ``0`` collapses every child of the root. ``None``: no limit.
    max_items : int or None, default 64
        At most this many items of a group are shown, then ``... (+N more)``. ``None``: all.
    summary : bool, default True
        End a graph node's repr with the size of its states (``# 26 params (104 B)``), and
        note the size of each sub-node on its line when the repr is broken over lines.
    color : bool, default False
        Let ``str()`` and ``print`` colour the output with ANSI codes (``repr`` never
        does); ignored when the ``NO_COLOR`` environment variable is set. The default is
        taken from ``BRAINX_REPR_COLOR`` (or brainstate's ``BRAINSTATE_REPR_COLOR``).
    short_dtypes : bool, default True
        Show arrays as ``f32[3]`` rather than ``float32[3]``.

    Raises
    ------
    ValueError
        If ``width`` is not a positive int, ``max_depth`` a non-negative int or None, or
        ``max_items`` a positive int or None.
    TypeError
        If ``summary``, ``color`` or ``short_dtypes`` is not a bool.

    Examples
    --------
    >>> from brainx.util import ReprOptions
    >>> opts = ReprOptions()
    >>> opts.width, opts.max_items, opts.short_dtypes
    (88, 64, True)
    >>> opts.replace(width=40).width
    40
    """

    width: int = 88
    max_depth: Optional[int] = None
    max_items: Optional[int] = 64
    summary: bool = True
    color: bool = False
    short_dtypes: bool = True

    def __post_init__(self):
        if not _is_int(self.width) or self.width < 1:
            raise ValueError(f"ReprOptions.width must be a positive int, got {self.width!r}.")
        if self.max_depth is not None and (not _is_int(self.max_depth) or self.max_depth < 0):
            raise ValueError("ReprOptions.max_depth must be None or an int >= 0, "
                             f"got {self.max_depth!r}.")
        if self.max_items is not None and (not _is_int(self.max_items) or self.max_items < 1):
            raise ValueError("ReprOptions.max_items must be None or an int >= 1, "
                             f"got {self.max_items!r}.")
        for name in ("summary", "color", "short_dtypes"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"ReprOptions.{name} must be True or False, "
                                f"got {getattr(self, name)!r}.")

    def replace(self, **changes: Any) -> "ReprOptions":
        """A copy with the named options changed (``TypeError`` for an unknown name).

        Examples
        --------
        >>> from brainx.util import ReprOptions
        >>> ReprOptions().replace(max_depth=1).max_depth
        1
        """
        known = {f.name for f in dataclasses.fields(ReprOptions)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(f"Unknown repr option(s) {', '.join(map(repr, unknown))}; "
                            f"the options are {', '.join(sorted(known))}.")
        return dataclasses.replace(self, **changes)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _env_flag(*names: str) -> bool:
    return any(os.environ.get(n, "").strip().lower() in ("1", "true", "yes", "on") for n in names)


@dataclasses.dataclass
class PrettyReprContext(threading.local):
    """Per thread: what the repr being printed needs to know.

    ``seen_modules_repr`` holds the objects already yielded by the outermost
    :func:`~brainx.util.yield_unique_pretty_repr_items` call, ``options`` the
    options of the innermost open :func:`repr_options` block (``None``: none
    open) and ``render_depth`` how many renders are running (only the outermost
    one, at depth 0, adds a summary footer).
    """

    seen_modules_repr: Optional[Dict[int, Any]] = None
    options: Optional[ReprOptions] = None
    render_depth: int = 0


CONTEXT = PrettyReprContext()
_GLOBAL = [ReprOptions(color=_env_flag("BRAINX_REPR_COLOR", "BRAINSTATE_REPR_COLOR"))]


def get_repr_options() -> ReprOptions:
    """The repr options in force in this thread.

    Returns
    -------
    ReprOptions
        Those of the innermost open :func:`repr_options` block of this thread, otherwise
        the process-wide defaults (see :func:`set_repr_options`).

    Examples
    --------
    >>> from brainx.util import get_repr_options, repr_options
    >>> with repr_options(width=40):
    ...     get_repr_options().width
    40
    """
    options = CONTEXT.options
    return _GLOBAL[0] if options is None else options


def _start_from(options: Optional[ReprOptions], base: ReprOptions) -> ReprOptions:
    if options is None:
        return base
    if not isinstance(options, ReprOptions):
        raise TypeError(f"Expected a ReprOptions, got {type(options).__name__}: {options!r}.")
    return options


def set_repr_options(options: Optional[ReprOptions] = None, /, **changes: Any) -> ReprOptions:
    """Change the process-wide default repr options; returns the previous defaults.

    An open :func:`repr_options` block keeps its own options until it ends.

    Parameters
    ----------
    options : ReprOptions, optional
        Defaults to start from instead of the current ones: ``set_repr_options(old)`` puts
        back what an earlier call returned (as does brainstate's
        ``set_repr_options(**dataclasses.asdict(old))``).
    **changes
        Options to change (the fields of :class:`ReprOptions`).

    Returns
    -------
    ReprOptions
        The defaults before the call.

    Raises
    ------
    TypeError
        If a name is not an option, or ``options`` is not a :class:`ReprOptions`.
    ValueError
        If a value is invalid.

    Examples
    --------
    >>> from brainx.util import set_repr_options, get_repr_options
    >>> old = set_repr_options(width=100)
    >>> get_repr_options().width
    100
    >>> _ = set_repr_options(old)
    >>> get_repr_options().width
    88
    """
    new = _start_from(options, _GLOBAL[0]).replace(**changes)
    old, _GLOBAL[0] = _GLOBAL[0], new
    return old


@contextlib.contextmanager
def repr_options(options: Optional[ReprOptions] = None, /,
                 **changes: Any) -> Iterator[ReprOptions]:
    """Change the repr options inside a ``with`` block, in this thread.

    Blocks nest; on leaving one, also by an exception, the options in force before it
    are back.

    Parameters
    ----------
    options : ReprOptions, optional
        Options to start from instead of those in force.
    **changes
        Options to change (the fields of :class:`ReprOptions`).

    Yields
    ------
    ReprOptions
        The options in force inside the block.

    Raises
    ------
    TypeError
        On entering, if a name is not an option.
    ValueError
        On entering, if a value is invalid.

    Examples
    --------
    >>> from brainx.util import PrettyMapping, repr_options
    >>> m = PrettyMapping({"a": 1, "b": 2})
    >>> with repr_options(width=8):
    ...     print(repr(m))
    {
      'a': 1,
      'b': 2,
    }
    """
    new = _start_from(options, get_repr_options()).replace(**changes)
    previous = CONTEXT.options
    CONTEXT.options = new
    try:
        yield new
    finally:
        CONTEXT.options = previous


def color_enabled() -> bool:
    """Whether ``str()`` colours pretty reprs now (the ``color`` option, unless ``NO_COLOR``)."""
    return get_repr_options().color and "NO_COLOR" not in os.environ


# --------------------------------------------------------------------------------------------
# Summaries


@dataclasses.dataclass(frozen=True)
class ReprSummary:
    """The size of a graph node's states, shown as a ``# ...`` comment in its repr.

    A node's ``__pretty_repr_summary__()`` returns one (see
    :meth:`brainx.graph.Node.__pretty_repr_summary__`); the repr of the root ends
    with its :meth:`footer`, and the line of each sub-node of a repr broken over
    lines with its :meth:`comment`.

    Parameters
    ----------
    n_params : int
        Elements of parameter (``ParamState``) values.
    param_bytes : int
        Their memory size.
    n_state_values : int
        Elements of the other states' values.
    state_bytes : int
        Their memory size.

    Examples
    --------
    >>> from brainx.util import ReprSummary
    >>> s = ReprSummary(n_params=26, param_bytes=104)
    >>> s.footer(), s.comment()
    ('26 params (104 B)', '26 params')
    >>> ReprSummary(0, 0, 1, 4).footer()
    '1 state value (4 B)'
    """

    n_params: int = 0
    param_bytes: int = 0
    n_state_values: int = 0
    state_bytes: int = 0

    def footer(self) -> str:
        """The long form, after the root's repr (``''`` when everything is zero)."""
        parts = []
        if self.n_params:
            parts.append(f"{_count(self.n_params, 'param')} ({format_bytes(self.param_bytes)})")
        if self.n_state_values:
            parts.append(f"{_count(self.n_state_values, 'state value')} "
                         f"({format_bytes(self.state_bytes)})")
        return ", ".join(parts)

    def comment(self) -> str:
        """The short form, after a sub-node (the parameter count, else the state values)."""
        if self.n_params:
            return _count(self.n_params, "param")
        if self.n_state_values:
            return _count(self.n_state_values, "state value")
        return ""


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def format_bytes(num_bytes: int) -> str:
    """A byte count for people, in powers of 1024: ``'512 B'``, ``'1.5 KiB'``, ``'2.0 GiB'``.

    Parameters
    ----------
    num_bytes : int
        The number of bytes.

    Returns
    -------
    str
        Below 1024 the count and ``B``; otherwise one decimal in KiB, MiB or GiB (the
        largest that keeps the number at least 1; GiB beyond).

    Raises
    ------
    ValueError
        If ``num_bytes`` is negative.

    Examples
    --------
    >>> from brainx.util import format_bytes
    >>> format_bytes(512), format_bytes(1536), format_bytes(3 * 1024 ** 3)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    if num_bytes < 0:
        raise ValueError(f"format_bytes takes a count >= 0, got {num_bytes!r}.")
    if num_bytes < 1024:
        return f"{int(num_bytes)} B"
    size = float(num_bytes)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024:
            break
    return f"{size:.1f} {unit}"


# --------------------------------------------------------------------------------------------
# Arrays

_SHORT_PREFIXES = (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i"),
                   ("complex", "c"))


def short_dtype_name(name: str) -> str:
    """``'float32'`` as ``'f32'`` (``bf16``, ``u8``, ``i64``, ``c64``); other names unchanged.

    Examples
    --------
    >>> from brainx.pretty_repr.options import short_dtype_name
    >>> short_dtype_name("bfloat16"), short_dtype_name("uint8"), short_dtype_name("bool")
    ('bf16', 'u8', 'bool')
    """
    for prefix, short in _SHORT_PREFIXES:
        bits = name[len(prefix):]
        if name.startswith(prefix) and bits.isdigit():
            return short + bits
    return name


def _is_array(x: Any) -> bool:
    if isinstance(x, (np.ndarray, np.generic, jax.Array, jax.ShapeDtypeStruct)):
        return True
    return isinstance(x, jax.core.ShapedArray)


def _has_values(x: Any) -> bool:
    """Whether ``x`` holds concrete values (not a tracer or an abstract value)."""
    return isinstance(x, (np.ndarray, np.generic)) or (
        isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer))


def format_array_like(x: Any, short_dtypes: Optional[bool] = None) -> Optional[str]:
    """The one-word summary of an array: ``dtype[shape]``, or ``None`` for anything else.

    Parameters
    ----------
    x : object
        A JAX array (a tracer too), a NumPy array or scalar, a ``jax.ShapeDtypeStruct``,
        a ``ShapedArray``, or a brainunit ``Quantity`` of one of them.
    short_dtypes : bool, optional
        Short dtype names (``f32``); ``None``: as the repr options say.

    Returns
    -------
    str or None
        ``'f32[3,4]'``; a scalar with a value as its value (``'f32(0.5)'``); a Quantity
        with its unit (``'f32[3] mV'``, a scalar one as brainunit prints it: ``'5. ms'``);
        ``None`` when ``x`` is not an array.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp, brainunit as u
    >>> from brainx.util import format_array_like
    >>> format_array_like(np.zeros((3, 4), np.float32))
    'f32[3,4]'
    >>> format_array_like(np.zeros(3, np.float32), short_dtypes=False)
    'float32[3]'
    >>> format_array_like(np.float32(0.5)), format_array_like(jnp.ones(3) * u.mV)
    ('f32(0.5)', 'f32[3] mV')
    >>> format_array_like([1, 2]) is None
    True
    """
    if short_dtypes is None:
        short_dtypes = get_repr_options().short_dtypes
    if isinstance(x, u.Quantity):
        return _format_quantity(x, short_dtypes)
    if not _is_array(x):
        return None
    try:
        dtype, plain = np.dtype(x.dtype).name, True
    except TypeError:  # an extended dtype: a typed PRNG key (``key<fry>``)
        dtype, plain = str(x.dtype), False
    if short_dtypes:
        dtype = short_dtype_name(dtype)
    shape = tuple(x.shape)
    if not shape and plain and _has_values(x):
        return f"{dtype}({np.asarray(x)[()]})"  # NumPy's shortest text for its precision
    return f"{dtype}[{','.join(str(n) for n in shape)}]"


def _format_quantity(x: Any, short_dtypes: bool) -> Optional[str]:
    mantissa = x.mantissa
    if isinstance(mantissa, (int, float, complex)) and not isinstance(mantissa, bool):
        return str(x)
    if not _is_array(mantissa):
        return None
    if x.is_unitless:
        return format_array_like(mantissa, short_dtypes)
    if np.ndim(mantissa) == 0 and _has_values(mantissa):
        return str(x)
    return f"{format_array_like(mantissa, short_dtypes)} {x.unit}"
