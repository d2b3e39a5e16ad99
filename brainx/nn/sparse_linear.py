"""`SparseLinear`: ``y = x @ W + b`` for a given sparse ``W`` whose stored entries are trained.

The connectivity comes from the caller as a sparse matrix: a brainunit one
(``brainunit.sparse.CSR``, ``CSC``, ``COO``) or a brainevent one
(``brainevent.CSR``, ``CSC``, ``FixedNumPerPre``, ...). Its structure is
fixed; its stored values become the trainable ``"weight"`` of
``self.weight`` (a :class:`~brainx.ParamState` ``{"weight", "bias"}`` as in
:class:`~brainx.nn.Linear`). With a brainevent matrix, a boolean input is a
spike vector and goes through the event kernel; a float input is multiplied
exactly.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import brainunit as u
import jax.numpy as jnp

from brainx.nn.event_backend import load_brainevent
from brainx.nn.init import param
from brainx.nn.module import Module
from brainx.state.state import ParamState

__all__ = ["SparseLinear"]


class SparseLinear(Module):
    """Linear layer over a fixed sparse structure: ``y = x @ W + b``.

    Parameters
    ----------
    spar_mat : brainunit.sparse.SparseMatrix
        The ``(in, out)`` matrix: its structure is kept, its ``data`` becomes
        the trainable weights.
    b_init : initialiser or array, optional
        Bias ``(out,)``; ``None``: no bias.
    in_size : int or tuple of int, optional
        Input size (default: the matrix's rows).
    name : str, optional
        A label for ``repr``.
    param_type : type
        The State class of the weights.

    Examples
    --------
    >>> import jax.numpy as jnp, brainunit as u, brainx
    >>> W = u.sparse.CSR.fromdense(jnp.array([[1., 0., 2.], [0., 3., 0.]]))
    >>> layer = brainx.nn.SparseLinear(W, b_init=jnp.ones(3))
    >>> layer(jnp.array([1., 1.])).tolist()
    [2.0, 4.0, 3.0]
    """

    def __init__(self, spar_mat: Any, b_init: Any = None, in_size=None,
                 name: Optional[str] = None, param_type: type = ParamState):
        super().__init__(name=name)
        if not isinstance(spar_mat, u.sparse.SparseMatrix):
            raise TypeError(f"SparseLinear: spar_mat must be a sparse matrix (brainunit.sparse "
                            f"CSR/CSC/COO or a brainevent matrix), got {type(spar_mat).__name__}; "
                            f"for a dense matrix use brainx.nn.Linear.")
        rows, cols = spar_mat.shape
        self.in_size = rows if in_size is None else in_size
        if self.in_size[-1] != rows:
            raise ValueError(f"SparseLinear: in_size {self.in_size} does not end with the "
                             f"matrix's {rows} rows.")
        self.out_size = cols
        self.spar_mat = spar_mat
        params = {"weight": spar_mat.data}
        if b_init is not None:
            params["bias"] = param(b_init, (cols,), allow_none=False)
        self.weight = param_type(params, name="weight")

    def update(self, x):
        """``x @ W (+ b)``; a bool ``x`` is a spike vector (event kernel on brainevent matrices)."""
        params = self.weight.value
        mat = self.spar_mat.with_data(params["weight"])
        if jnp.asarray(u.get_mantissa(x)).dtype == jnp.bool_:
            if _is_brainevent(mat):
                x = load_brainevent("SparseLinear").BinaryArray(x)
            else:
                x = jnp.asarray(x, dtype=u.math.asarray(params["weight"]).dtype)
        y = x @ mat
        if "bias" in params:
            y = y + params["bias"]
        return y


def _is_brainevent(mat) -> bool:
    """A brainevent matrix (brainevent is then imported already: never import it here)."""
    be = sys.modules.get("brainevent")
    return be is not None and isinstance(mat, be.DataRepresentation)
