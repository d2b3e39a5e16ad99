"""`Embedding`: a learnt table of vectors, looked up by integer index.

The table is one ``ParamState`` ``weight`` of shape
``(num_embeddings, *embedding_size)``; ``layer(indices)`` returns
``weight[indices]``, so its gradient is the sum of the output gradients of
the positions that used each row. Options, as in brainstate (and PyTorch):

- ``padding_idx``: that row starts at zero and gets no gradient;
- ``scale_grad_by_freq``: each row's gradient is divided by how often the
  row occurs in the batch;
- ``max_norm``: rows that are looked up are rescaled to norm ``<= max_norm``
  (``norm_type``-norm); the rescaled table is written back to ``weight``
  and no gradient flows through the rescaling;
- ``freeze``: no gradient to the table at all.

Examples
--------
>>> import jax.numpy as jnp
>>> from brainx import nn
>>> emb = nn.Embedding(4, 2, embedding_init=jnp.arange(8.0).reshape(4, 2))
>>> emb(jnp.array([[3, 0]])).tolist()
[[[6.0, 7.0], [0.0, 1.0]]]
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp

from brainx.nn.init import LecunUniform, param, to_size
from brainx.nn.modules.module import Module
from brainx.state.state import ParamState

__all__ = ["Embedding"]


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of shape ``embedding_size``.

    Parameters
    ----------
    num_embeddings : int
        Number of rows (valid indices ``0 .. num_embeddings - 1``).
    embedding_size : int or sequence of int
        The shape of one vector (``out_size``).
    embedding_init : initialiser or array
        The initial table.
    padding_idx : int, optional
        A row kept at zero, without gradient.
    max_norm : float, optional
        Renormalise looked-up rows to at most this norm.
    norm_type : float
        The ``p`` of the norm for ``max_norm``.
    scale_grad_by_freq : bool
        Divide each row's gradient by its count in the batch.
    freeze : bool
        Stop the gradient to the table.
    """

    def __init__(self, num_embeddings: int, embedding_size: Union[int, Sequence[int]],
                 embedding_init: Union[Callable, Any] = LecunUniform(),
                 padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, freeze: bool = False,
                 name: Optional[str] = None, param_type: type = ParamState):
        super().__init__(name=name)
        self.num_embeddings = int(num_embeddings)
        if self.num_embeddings < 0:
            raise ValueError(f"Embedding: num_embeddings must be >= 0, got {num_embeddings}.")
        self.embedding_size = to_size(embedding_size)
        self.out_size = self.embedding_size
        if padding_idx is not None and not 0 <= int(padding_idx) < self.num_embeddings:
            raise ValueError(f"Embedding: padding_idx must be in [0, {self.num_embeddings}), "
                             f"got {padding_idx}.")
        if max_norm is not None and max_norm <= 0:
            raise ValueError(f"Embedding: max_norm must be positive, got {max_norm}.")
        self.padding_idx = None if padding_idx is None else int(padding_idx)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.freeze = bool(scale_grad_by_freq), bool(freeze)
        table = jnp.asarray(param(embedding_init, (self.num_embeddings,) + self.embedding_size,
                                  allow_none=False))
        if self.padding_idx is not None:
            table = table.at[self.padding_idx].set(0)
        self.weight = param_type(table)

    @classmethod
    def from_pretrained(cls, embeddings: Any, padding_idx: Optional[int] = None,
                        max_norm: Optional[float] = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, freeze: bool = True,
                        name: Optional[str] = None, param_type: type = ParamState) -> "Embedding":
        """An embedding whose table is ``embeddings`` (frozen by default); the padding row is kept."""
        embeddings = jnp.asarray(embeddings)
        if embeddings.ndim < 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be at least 2-D, got "
                             f"shape {embeddings.shape}.")
        layer = cls(embeddings.shape[0], embeddings.shape[1:], embedding_init=embeddings,
                    padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                    scale_grad_by_freq=scale_grad_by_freq, freeze=freeze, name=name,
                    param_type=param_type)
        layer.weight.value = embeddings
        return layer

    def update(self, indices: Any) -> jax.Array:
        """``weight[indices]``: shape ``indices.shape + embedding_size``."""
        indices = jnp.asarray(indices)
        if not jnp.issubdtype(indices.dtype, jnp.integer):
            raise TypeError(f"Embedding: indices must be integers, got dtype {indices.dtype}.")
        table = self.weight.value
        if self.max_norm is not None:
            renormed = self._renorm(table, indices)
            self.weight.value = renormed
            table = table + jax.lax.stop_gradient(renormed - table)
        if self.freeze:
            table = jax.lax.stop_gradient(table)
        if self.padding_idx is not None:
            is_pad = (jnp.arange(self.num_embeddings) == self.padding_idx)
            is_pad = is_pad.reshape((-1,) + (1,) * len(self.embedding_size))
            table = jnp.where(is_pad, jax.lax.stop_gradient(table), table)
        rows = table[indices]
        if self.scale_grad_by_freq:
            counts = jnp.bincount(indices.ravel(), length=self.num_embeddings)[indices]
            scale = (1.0 / counts).reshape(indices.shape + (1,) * len(self.embedding_size))
            rows = jax.lax.stop_gradient(rows) + (rows - jax.lax.stop_gradient(rows)) * scale
        return rows

    def _renorm(self, table, indices):
        """``table`` with the looked-up rows (but the padding row) scaled to norm <= max_norm."""
        flat = table.reshape(self.num_embeddings, -1)
        norms = jnp.linalg.norm(flat, ord=self.norm_type, axis=1)
        used = jnp.zeros(self.num_embeddings, bool).at[indices.ravel()].set(True)
        if self.padding_idx is not None:
            used = used.at[self.padding_idx].set(False)
        factor = jnp.where(used, jnp.minimum(1.0, self.max_norm / (norms + 1e-8)), 1.0)
        return (flat * factor[:, None]).reshape(table.shape)

