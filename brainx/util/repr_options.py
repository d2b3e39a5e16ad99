"""How reprs show arrays: options, a context manager to change them, and the short forms.

A :class:`ReprOptions` holds the settings that brainx's reprs consult: the repr of a
:class:`~brainx.State`, ``print(module)`` and :func:`~brainx.util.pretty_format`.
The defaults give brainx's usual output (arrays as ``float32[2,3]`` summaries);
``summary=False`` shows their values instead, abbreviated past
``max_array_elements`` elements as NumPy does.

* :func:`get_repr_options` returns the options in force;
* :func:`set_repr_options` changes them until changed back (and returns the old ones);
* :func:`repr_options` changes them inside a ``with`` block only, in this thread, and
  restores them on leaving it, also when the block raises.

:class:`ReprSummary` is the short form of one array (dtype, shape, unit, bytes);
:func:`format_array_like` formats one array as the options ask; :func:`format_bytes`
writes a byte count for people (``'1.5 KiB'``).

Examples
--------
>>> import jax.numpy as jnp, brainx
>>> from brainx.util import repr_options
>>> w = brainx.State(jnp.arange(3.0), name="w")
>>> w
State(name='w', shape=(3,), dtype=float32)
>>> with repr_options(summary=False):
...     print(repr(w))
State(name='w', shape=(3,), dtype=float32, value=[0., 1., 2.])
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from brainx.dtype_names import dtype_name

__all__ = [
    "ReprOptions", "ReprSummary", "get_repr_options", "set_repr_options", "repr_options",
    "format_bytes", "format_array_like", "describe_with_options", "is_array_like", "one_line",
]


@dataclasses.dataclass(frozen=True)
class ReprOptions:
    """The settings of brainx's reprs (immutable; :meth:`replace` makes a changed copy).

    Parameters
    ----------
    summary : bool, default True
        Show arrays as summaries (``float32[2,3]``, or ``shape=(2, 3), dtype=float32`` in a
        state's repr). ``False`` also shows their values.
    max_array_elements : int, default 10
        With ``summary=False``: an array with more elements than this is abbreviated, only
        its first and last ``edge_items`` along each axis shown around ``...`` (NumPy's
        ``threshold``).
    edge_items : int, default 3
        How many items to keep at each end of an abbreviated axis.
    precision : int or None, default None
        Digits after the point for floating-point values; ``None`` keeps NumPy's setting.
    show_nbytes : bool, default False
        Add each array's memory size (see :func:`format_bytes`) to summaries.
    max_items : int or None, default None
        :func:`pretty_format` shows at most this many items of a list, tuple or dict,
        then ``...``. ``None``: all of them.
    max_depth : int or None, default None
        :func:`pretty_format` shows containers nested deeper than this as ``[...]``,
        ``{...}``. ``None``: no limit.
    indent : int, default 2
        Spaces per nesting level in :func:`pretty_format`.
    width : int, default 80
        :func:`pretty_format` keeps a container on one line when it fits in this many
        columns.

    Raises
    ------
    TypeError
        If an option has the wrong type.
    ValueError
        If a count or width is negative.

    Examples
    --------
    >>> from brainx.util import ReprOptions
    >>> opts = ReprOptions()
    >>> opts.summary, opts.max_array_elements, opts.edge_items
    (True, 10, 3)
    >>> opts.replace(summary=False).summary
    False
    """

    summary: bool = True
    max_array_elements: int = 10
    edge_items: int = 3
    precision: Optional[int] = None
    show_nbytes: bool = False
    max_items: Optional[int] = None
    max_depth: Optional[int] = None
    indent: int = 2
    width: int = 80

    def __post_init__(self):
        for name in ("summary", "show_nbytes"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"ReprOptions.{name} must be True or False, "
                                f"got {getattr(self, name)!r}.")
        for name, optional in (("max_array_elements", False), ("edge_items", False),
                               ("precision", True), ("max_items", True), ("max_depth", True),
                               ("indent", False), ("width", False)):
            value = getattr(self, name)
            if value is None and optional:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"ReprOptions.{name} must be an int"
                                f"{' or None' if optional else ''}, got {value!r}.")
            if value < 0:
                raise ValueError(f"ReprOptions.{name} must be >= 0, got {value}.")

    def replace(self, **changes: Any) -> "ReprOptions":
        """A copy with the named options changed.

        Parameters
        ----------
        **changes
            Option names (the fields of :class:`ReprOptions`) and their new values.

        Returns
        -------
        ReprOptions
            The changed copy; ``self`` is not changed.

        Raises
        ------
        TypeError
            If a name is not an option.

        Examples
        --------
        >>> from brainx.util import ReprOptions
        >>> ReprOptions().replace(width=40).width
        40
        """
        _check_names(changes)
        return dataclasses.replace(self, **changes)


def _check_names(changes: dict) -> None:
    known = {f.name for f in dataclasses.fields(ReprOptions)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise TypeError(f"Unknown repr option(s) {', '.join(map(repr, unknown))}; "
                        f"the options are {', '.join(sorted(known))}.")


_GLOBAL = [ReprOptions()]  # what set_repr_options changes outside any repr_options block


class _Local(threading.local):
    def __init__(self):
        self.stack: List[ReprOptions] = []  # one entry per open repr_options block


_LOCAL = _Local()


def get_repr_options() -> ReprOptions:
    """The repr options in force in this thread.

    Returns
    -------
    ReprOptions
        Those of the innermost open :func:`repr_options` block of this thread, otherwise
        those last given to :func:`set_repr_options` (at first, the defaults).

    Examples
    --------
    >>> from brainx.util import get_repr_options, repr_options
    >>> get_repr_options().summary
    True
    >>> with repr_options(summary=False):
    ...     get_repr_options().summary
    False
    """
    stack = _LOCAL.stack
    return stack[-1] if stack else _GLOBAL[0]


def set_repr_options(options: Optional[ReprOptions] = None, /, **changes: Any) -> ReprOptions:
    """Change the repr options until they are changed again.

    Outside a :func:`repr_options` block the change is for every thread; inside one it
    is for that block only, and ends with it.

    Parameters
    ----------
    options : ReprOptions, optional
        Options to start from instead of those in force: ``set_repr_options(old)``
        puts back what an earlier call returned, ``set_repr_options(ReprOptions())``
        the defaults.
    **changes
        Options to change (the fields of :class:`ReprOptions`).

    Returns
    -------
    ReprOptions
        The options that were in force before the call.

    Raises
    ------
    TypeError
        If a name is not an option, or ``options`` is not a :class:`ReprOptions`.

    Examples
    --------
    >>> from brainx.util import set_repr_options, get_repr_options
    >>> old = set_repr_options(max_array_elements=100)
    >>> get_repr_options().max_array_elements
    100
    >>> _ = set_repr_options(old)
    >>> get_repr_options().max_array_elements
    10
    """
    new = _new_options(options, changes)
    stack = _LOCAL.stack
    if stack:
        old, stack[-1] = stack[-1], new
    else:
        old, _GLOBAL[0] = _GLOBAL[0], new
    return old


def _new_options(options: Optional[ReprOptions], changes: dict) -> ReprOptions:
    if options is None:
        options = get_repr_options()
    elif not isinstance(options, ReprOptions):
        raise TypeError(f"Expected a ReprOptions, got {type(options).__name__}: {options!r}.")
    return options.replace(**changes)


@contextlib.contextmanager
def repr_options(options: Optional[ReprOptions] = None, /,
                 **changes: Any) -> Iterator[ReprOptions]:
    """Change the repr options inside a ``with`` block, in this thread.

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

    Notes
    -----
    On leaving the block, also by an exception, the options in force before it are back,
    including after a :func:`set_repr_options` call inside the block. Blocks nest.

    Examples
    --------
    >>> import numpy as np
    >>> from brainx.util import repr_options, format_array_like
    >>> x = np.arange(20.0)
    >>> format_array_like(x)
    'float64[20]'
    >>> with repr_options(summary=False, max_array_elements=5, edge_items=2):
    ...     format_array_like(x)
    '[ 0.,  1., ..., 18., 19.]'
    """
    new = _new_options(options, changes)
    stack = _LOCAL.stack
    depth = len(stack)
    stack.append(new)
    try:
        yield new
    finally:
        del stack[depth:]


# --------------------------------------------------------------------------------------------
# Short forms


def format_bytes(num_bytes: int) -> str:
    """A byte count for people, in powers of 1024: ``'512 B'``, ``'1.5 KiB'``, ``'2.0 GiB'``.

    Parameters
    ----------
    num_bytes : int
        The number of bytes (an int, or a float that is one).

    Returns
    -------
    str
        Below 1024 the count and ``B``; otherwise the value in the largest unit that
        keeps it at least 1 (KiB, MiB, GiB, TiB, PiB), with one decimal.

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
    num = int(num_bytes)
    if num < 0:
        raise ValueError(f"format_bytes takes a count >= 0, got {num_bytes!r}.")
    if num < 1024:
        return f"{num} B"
    value = float(num)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024.0
        if value < 1024.0 or unit == "PiB":
            text = f"{value:.1f}"
            if text == "1024.0" and unit != "PiB":  # 1023.95+ rounds up: next unit
                continue
            return f"{text} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


@dataclasses.dataclass(frozen=True)
class ReprSummary:
    """The short form of one array: dtype, shape, unit and size, without the values.

    Its ``repr`` is ``float32[2,3]``, with `` mV`` for a Quantity with a unit and
    `` (24 B)`` when the options in force have ``show_nbytes``. Summaries stand in for the
    arrays of a tree (``jax.tree.map(ReprSummary.of, tree)``) to print its structure.

    Parameters
    ----------
    shape : tuple of int
        The array's shape.
    dtype : str
        The dtype's name (``'key<fry>'`` for a typed PRNG key).
    unit : str or None, default None
        The unit of a brainunit Quantity (``None``: none, or dimensionless).
    nbytes : int or None, default None
        The memory size, where known.

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u
    >>> from brainx.util import ReprSummary
    >>> ReprSummary.of(jnp.zeros((2, 3)))
    float32[2,3]
    >>> s = ReprSummary.of(jnp.ones(4) * u.mV)
    >>> s, s.shape, s.nbytes
    (float32[4] mV, (4,), 16)
    """

    shape: Tuple[int, ...]
    dtype: str
    unit: Optional[str] = None
    nbytes: Optional[int] = None

    @classmethod
    def of(cls, x: Any) -> "ReprSummary":
        """The summary of an array, a Quantity, a tracer or a ``jax.ShapeDtypeStruct``.

        Parameters
        ----------
        x : array-like
            Anything with ``shape`` and ``dtype``.

        Returns
        -------
        ReprSummary

        Raises
        ------
        TypeError
            If ``x`` has no ``shape`` or ``dtype``.

        Examples
        --------
        >>> import numpy as np
        >>> from brainx.util import ReprSummary
        >>> ReprSummary.of(np.zeros(3, np.int8)).nbytes
        3
        """
        if not is_array_like(x):
            raise TypeError(f"ReprSummary.of takes an array (something with shape and dtype), "
                            f"got {type(x).__name__}: {x!r}.")
        shape = tuple(int(n) for n in x.shape)
        unit = getattr(x, "unit", None)
        unit_text = None if unit is None or getattr(unit, "is_unitless", False) else str(unit)
        return cls(shape, dtype_name(x.dtype), unit_text, _nbytes(x, shape))

    def __repr__(self) -> str:
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.unit is not None:
            text = f"{text} {self.unit}"
        if self.nbytes is not None and get_repr_options().show_nbytes:
            text = f"{text} ({format_bytes(self.nbytes)})"
        return text

    __str__ = __repr__


def _nbytes(x: Any, shape: Tuple[int, ...]) -> Optional[int]:
    x = getattr(x, "mantissa", x)
    try:
        return int(x.nbytes)
    except Exception:  # a tracer, a ShapeDtypeStruct: from the shape and the item size
        try:
            return int(np.prod(shape, dtype=np.int64)) * int(np.dtype(x.dtype).itemsize)
        except Exception:  # an extended dtype (typed PRNG key)
            return None


def is_array_like(x: Any) -> bool:
    """Whether ``x`` has a ``shape`` and a ``dtype`` (arrays, Quantities, tracers, structs)."""
    return not isinstance(x, type) and hasattr(x, "shape") and hasattr(x, "dtype")


def _concrete(x: Any) -> Optional[np.ndarray]:
    """The values of ``x`` as a NumPy array, or None if it has none to show."""
    import jax

    x = getattr(x, "mantissa", x)
    if isinstance(x, (jax.core.Tracer, jax.ShapeDtypeStruct)):
        return None
    try:
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
            return None
        return np.asarray(x)
    except Exception:
        return None


def format_array_like(x: Any, options: Optional[ReprOptions] = None) -> str:
    """One array as the repr options ask: its summary, or its values.

    Parameters
    ----------
    x : object
        An array, a brainunit Quantity, a tracer, a ``jax.ShapeDtypeStruct``; anything
        else is shown by ``repr``.
    options : ReprOptions, optional
        Options to use instead of those in force.

    Returns
    -------
    str
        With ``summary`` (the default): the :class:`ReprSummary` (``'float32[2,3]'``).
        Otherwise the values as NumPy writes them, comma-separated, abbreviated past
        ``max_array_elements`` elements, followed by the unit of a Quantity. A tracer or a
        struct has no values and is always summarised.

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u
    >>> from brainx.util import format_array_like, ReprOptions
    >>> format_array_like(jnp.zeros((2, 3)))
    'float32[2,3]'
    >>> full = ReprOptions(summary=False)
    >>> format_array_like(jnp.arange(3.0) * u.mV, full)
    '[0., 1., 2.] mV'
    >>> format_array_like(jnp.arange(100), full)
    '[ 0,  1,  2, ..., 97, 98, 99]'
    >>> format_array_like("text")
    "'text'"
    """
    if not is_array_like(x):
        return repr(x)
    if options is None:
        options = get_repr_options()
    if not options.summary:
        values = _concrete(x)
        if values is not None:
            text = np.array2string(
                values, separator=", ", threshold=options.max_array_elements,
                edgeitems=options.edge_items, precision=options.precision,
                max_line_width=max(options.width, 20))
            unit = getattr(x, "unit", None)
            if unit is not None and not getattr(unit, "is_unitless", False):
                text = f"{text} {unit}"
            return text
    if options is get_repr_options():
        return repr(ReprSummary.of(x))
    with repr_options(options):
        return repr(ReprSummary.of(x))


def one_line(text: str) -> str:
    """NumPy's text of an array of several dimensions on one line (for one-line reprs).

    Examples
    --------
    >>> from brainx.util.repr_options import one_line
    >>> one_line("[[0., 1.],\\n [2., 3.]]")
    '[[0., 1.], [2., 3.]]'
    """
    return " ".join(line.strip() for line in text.splitlines())


class _Text:
    """Prints as the text it holds (a leaf of a tree shown by its repr)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def describe_with_options(value: Any, options: ReprOptions, summary: str) -> str:
    """A state value's description (``summary``, from ``describe_value``) with what
    ``options`` add: the values (``summary=False``), the memory size (``show_nbytes``).

    Examples
    --------
    >>> import numpy as np
    >>> from brainx.util import ReprOptions
    >>> from brainx.util.repr_options import describe_with_options
    >>> describe_with_options(np.zeros(2), ReprOptions(summary=False, show_nbytes=True),
    ...                       "shape=(2,), dtype=float64")
    'shape=(2,), dtype=float64, nbytes=16 B, value=[0., 0.]'
    """
    import jax

    leaves = jax.tree.leaves(value)
    arrays = [x for x in leaves if is_array_like(x)]
    parts = [summary]
    if options.show_nbytes and arrays:
        sizes = [ReprSummary.of(x).nbytes for x in arrays]
        if None not in sizes:
            parts.append(f"nbytes={format_bytes(sum(sizes))}")
    if not options.summary and arrays:
        if summary.startswith("shape="):  # one array: its values after the summary
            if _concrete(value) is not None:
                parts.append(f"value={one_line(format_array_like(value, options))}")
        else:  # a tree: its arrays' values in place of their summaries
            shown = jax.tree.map(lambda x: _Text(one_line(format_array_like(x, options)))
                                 if is_array_like(x) else x, value)
            parts[0] = f"value={shown!r}"
    return ", ".join(parts)
