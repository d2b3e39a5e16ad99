"""`SparseLinear`: ``y = x @ W + b`` for a given sparse ``W`` whose stored entries are trained.

The connectivity comes from the caller as a sparse matrix: a brainunit one
(``brainunit.sparse.CSR``, ``CSC``, ``COO``) or a brainevent one
(``brainevent.CSR``, ``CSC``, ``FixedNumPerPre``, ...). Its structure is
fixed; its stored values become the trainable ``"weight"`` of
``self.weight`` (a :class:`~brainx.ParamState` ``{"weight", "bias"}`` as in
:class:`~brainx.nn.Linear`).

A brainevent matrix multiplies with brainevent's kernels (a boolean input is
a spike vector and goes through the event kernel). A brainunit matrix is
read once into its ``(row, column)`` coordinates and multiplied by brainx: on
CPU by the native kernel (:mod:`brainx.nn.connectivity.native`: only the rows
of nonzero inputs are visited), elsewhere in plain JAX, a gather and a
``segment_sum`` over the stored entries. (brainunit 0.5.2's own ``x @ csr``
gives a wrong gradient with respect to the stored values, which training
needs.)
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np

from brainx.nn.connectivity.event_backend import native_by_default
from brainx.nn.connectivity.event_conn import _matmul_last_axis, _native_product
from brainx.nn.connectivity.native.rows import SynapseRows
from brainx.nn.init import param
from brainx.nn.modules.module import Module
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
        self._coords = None if _is_brainevent(spar_mat) else _coordinates(spar_mat)
        self.rows = None     # the native kernel's layout (CPU, a brainunit matrix)
        if self._coords is not None and native_by_default():
            self.rows = SynapseRows.coordinates(*map(np.asarray, self._coords), rows, cols)
        params = {"weight": spar_mat.data}
        if b_init is not None:
            params["bias"] = param(b_init, (cols,), allow_none=False)
        self.weight = param_type(params)

    def update(self, x):
        """``x @ W (+ b)``; a bool ``x`` is a spike vector (event kernel on brainevent matrices)."""
        params = self.weight.value
        if self.rows is not None:
            spikes = jnp.asarray(u.get_mantissa(x)).dtype == jnp.bool_   # events, else x @ W
            y = _native_product(x, params["weight"], self.rows, spikes, "SparseLinear",
                                self.in_size[-1])
        elif self._coords is None:
            mat = self.spar_mat.with_data(params["weight"])
            spikes = jnp.asarray(u.get_mantissa(x)).dtype == jnp.bool_
            y = _matmul_last_axis(x, mat, spikes, "SparseLinear", self.in_size[-1])
        else:
            y = _coo_matmul(x, params["weight"], *self._coords, self.out_size[-1])
        if "bias" in params:
            y = y + params["bias"]
        return y


def _is_brainevent(mat) -> bool:
    """A brainevent matrix (brainevent is then imported already: never import it here)."""
    be = sys.modules.get("brainevent")
    return be is not None and isinstance(mat, be.DataRepresentation)


def _coordinates(mat):
    """``(rows, cols)`` of a brainunit CSR / CSC / COO's stored entries, in ``data``'s order."""
    if hasattr(mat, "row") and hasattr(mat, "col"):
        return jnp.asarray(mat.row), jnp.asarray(mat.col)
    major = np.repeat(np.arange(len(mat.indptr) - 1), np.diff(np.asarray(mat.indptr)))
    minor = np.asarray(mat.indices)
    is_csc = type(mat).__name__ == "CSC"
    rows, cols = (minor, major) if is_csc else (major, minor)
    return jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32)


def _coo_matmul(x, data, rows, cols, n_out: int):
    """``x @ W`` for ``W[rows[k], cols[k]] = data[k]`` (repeated pairs add); ``x``: ``(..., in)``.
    """
    x = u.math.asarray(x)
    if x.dtype == jnp.bool_:
        x = x.astype(u.math.asarray(data).dtype)
    contrib = x[..., rows] * data                           # (..., nse)
    moved = u.math.moveaxis(contrib, -1, 0)
    y = jax.ops.segment_sum(u.get_mantissa(moved), cols, num_segments=n_out)
    y = u.math.moveaxis(y, 0, -1)
    unit = u.get_unit(contrib)
    return y if unit.is_unitless else u.Quantity(y, unit=unit)
