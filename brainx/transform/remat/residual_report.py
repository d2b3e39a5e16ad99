"""Where each residual of a gradient comes from, in the user's terms.

Reverse-mode AD keeps *residuals*: values of the forward pass that the
backward pass needs. ``jax.vjp`` returns them as the leaves of its backward
function; this module reads the jaxpr of the forward pass that computes them
and says, for each one, what it is:

==============  ==========================================================
origin kind     meaning
==============  ==========================================================
``state``       the value of a State (``lif.V (HiddenState)``)
``argument``    an argument of the function (``xs``)
``name``        a value named with ``jax.ad_checkpoint.checkpoint_name``
``intermediate``a value an operation computed (with its source line)
``constant``    a constant or literal of the trace
==============  ==========================================================

A residual computed inside a loop (``lax.scan``, so ``for_loop`` and
``scan``) is stacked, one row per step: its origin is found inside the loop
body, and its ``loops`` lists the lengths it was stacked by (``1000 x
f32[256]``). A loop's carry seen from inside the body is the value its
initial carry came from outside: a state written by a loop step shows as that
state. States are recognised by the names of
:mod:`~brainx.transform.remat.state_names`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np
import jax.extend.core as jex_core

from brainx._jax.names import scan_num_consts_carry
from brainx.transform.remat.state_names import PREFIX, label_of_tag
from brainx.transform.remat.value_names import AUTO

__all__ = ["Residual", "ResidualReport", "analyse_residuals"]


def _dtype(dtype: Any) -> Any:
    """``numpy.dtype(dtype)``; a typed PRNG key's dtype (which numpy cannot read) as it is."""
    return dtype if jax.dtypes.issubdtype(dtype, jax.dtypes.extended) else np.dtype(dtype)


@dataclass(frozen=True)
class Residual:
    """One value kept for the backward pass.

    ``shape`` is the shape of what is kept (loop rows included); ``loops``
    the lengths of the loops that stacked it, outermost first; ``kind`` and
    ``origin`` say what it is (see the module docstring); ``source`` the
    ``file:line`` of the operation that made it, when one did.
    """

    shape: Tuple[int, ...]
    dtype: np.dtype
    kind: str
    origin: str
    loops: Tuple[int, ...] = ()
    source: str = ""

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape)) * self.dtype.itemsize

    @property
    def type_str(self) -> str:
        """``1000 x f32[256]``: loop rows, then the per-step type."""
        inner = self.shape[len(self.loops):]
        dtype = self.dtype
        if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):   # a typed PRNG key
            base = str(dtype.name)
        else:
            dtype = np.dtype(dtype)
            base = "bool" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize * 8}"
        text = f"{base}[{','.join(map(str, inner))}]"
        return " x ".join([*map(str, self.loops), text])

    def __str__(self) -> str:
        where = f" at {self.source}" if self.source and self.kind in ("intermediate", "name") \
            else ""
        return f"{self.type_str} {self.kind} {self.origin}{where}"


@dataclass
class ResidualReport:
    """The residuals of a gradient, with their total size.

    A list of :class:`Residual` (``len``, indexing, iteration);
    :attr:`total_bytes` sums them; :meth:`by_origin` groups the bytes by
    origin; ``str(report)`` is a table. ``temp_bytes``, when set, is XLA's
    temporary memory for the compiled gradient (:func:`print_saved_residuals`
    fills it in).
    """

    residuals: List[Residual] = field(default_factory=list)
    temp_bytes: Optional[int] = None

    def __len__(self) -> int:
        return len(self.residuals)

    def __iter__(self):
        return iter(self.residuals)

    def __getitem__(self, i):
        return self.residuals[i]

    @property
    def total_bytes(self) -> int:
        return sum(r.nbytes for r in self.residuals)

    def by_origin(self) -> Dict[str, int]:
        """``{origin: bytes}`` summed over residuals of the same origin."""
        out: Dict[str, int] = {}
        for r in self.residuals:
            out[r.origin] = out.get(r.origin, 0) + r.nbytes
        return out

    def of(self, kind: str) -> List[Residual]:
        """The residuals of one origin kind (``"state"``, ``"argument"``, ...)."""
        return [r for r in self.residuals if r.kind == kind]

    def table(self) -> str:
        rows = [(r.type_str, f"{r.nbytes:,}", r.kind, r.origin,
                 r.source if r.kind in ("intermediate", "name") else "") for r in self]
        head = ("residual", "bytes", "kind", "origin", "source")
        widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(head)]
        line = lambda cells: "  ".join(c.ljust(w) if i != 1 else c.rjust(w)
                                       for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
        out = [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]
        total = f"total {self.total_bytes:,} bytes in {len(self)} residuals"
        if self.temp_bytes is not None:
            total += f"; XLA temp memory of the compiled gradient {self.temp_bytes:,} bytes"
        return "\n".join(out + [total])

    __str__ = table


# -- the analysis -------------------------------------------------------------------------------
_INTERNAL = (os.sep + "jax" + os.sep, os.sep + "jaxlib" + os.sep,
             os.path.join("brainx", "transform") + os.sep, os.path.join("brainx", "state") + os.sep,
             os.sep + "brainunit" + os.sep, os.sep + "contextlib.py", os.sep + "functools.py")


def _source(eqn) -> str:
    """``file:line`` of the innermost frame outside JAX and brainx's transforms."""
    tb = getattr(eqn.source_info, "traceback", None)
    for frame in (tb.frames if tb is not None else ()):
        if not any(p in frame.file_name for p in _INTERNAL):
            return f"{os.path.basename(frame.file_name)}:{frame.line_num} ({frame.function_name})"
    return ""


_Origin = Tuple[str, str, str, Tuple[int, ...]]  # kind, origin, source, loops

#: Calls whose body's inputs and outputs line up with the equation's: parameter of the body.
_BODIES = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "scan": "jaxpr",
           "remat2": "jaxpr", "checkpoint": "jaxpr"}


class _Tracer:
    """Follows a var of ``jaxpr`` back through names, calls and loops to its origin.

    ``input_origin(i)`` is the origin of the jaxpr's ``i``-th input (asked
    only when a residual leads there).
    """

    def __init__(self, jaxpr, input_origin: Callable[[int], _Origin]):
        self.jaxpr = jaxpr
        self.input_origin = input_origin
        self.inputs = {v: i for i, v in enumerate(jaxpr.invars)}
        self.producer = {v: e for e in jaxpr.eqns for v in e.outvars}

    def origin(self, v) -> _Origin:
        if isinstance(v, jex_core.Literal):
            return ("constant", "a literal", "", ())
        if v in self.inputs:
            return self.input_origin(self.inputs[v])
        if v not in self.producer:
            return ("constant", "a constant of the trace", "", ())
        eqn = self.producer[v]
        prim = eqn.primitive.name
        if prim == "name":
            name = eqn.params["name"]
            if name.startswith(PREFIX):
                return ("state", label_of_tag(name), _source(eqn), ())
            if name == AUTO:  # named only so that a policy can keep it: what made it
                return self.origin(eqn.invars[0])
            return ("name", repr(name), _source(eqn), ())
        if prim == "reduce_precision":
            return self.origin(eqn.invars[0])
        body = self._body(eqn)
        if body is None:
            return ("intermediate", f"output of {prim}", _source(eqn), ())
        k = eqn.outvars.index(v)
        inner = _Tracer(body, lambda i: self.origin(eqn.invars[i]))
        kind, origin, src, loops = inner.origin(body.outvars[k])
        if prim == "scan" and k >= scan_num_consts_carry(eqn.params)[1]:  # stacked: a row a step
            loops = (int(eqn.params["length"]),) + loops
        return kind, origin, src, loops

    @staticmethod
    def _body(eqn):
        key = _BODIES.get(eqn.primitive.name)
        if key is None or key not in eqn.params:
            return None
        body = getattr(eqn.params[key], "jaxpr", eqn.params[key])
        if len(body.invars) != len(eqn.invars) or len(body.outvars) != len(eqn.outvars):
            return None
        return body


def analyse_residuals(jaxpr, res_vars: Sequence[Any], arg_labels: Sequence[str]) -> ResidualReport:
    """The :class:`ResidualReport` of the residuals ``res_vars``, outputs of ``jaxpr``.

    ``arg_labels`` gives ``(kind, label)`` for each of the jaxpr's inputs.
    """
    def input_origin(i):
        kind, label = arg_labels[i]
        return (kind, label, "", ())

    tracer = _Tracer(jaxpr, input_origin)
    out = []
    for v in res_vars:
        kind, origin, src, loops = tracer.origin(v)
        aval = v.aval
        out.append(Residual(tuple(aval.shape), _dtype(aval.dtype), kind, origin, loops, src))
    return ResidualReport(out)
