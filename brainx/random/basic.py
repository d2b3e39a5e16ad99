"""Uniform numbers, integers, and random arrangements of arrays.

``rand``/``randn``/``random`` and numpy's aliases of ``random``
(``random_sample``, ``ranf``, ``sample``), integers (``randint``,
``random_integers``), PyTorch-style ``*_like`` samplers that copy a template's
shape, and ``choice``/``permutation``/``shuffle``. All draw with
``self._next_key(key)``: one split of the generator's key per call.
"""

from __future__ import annotations

from typing import Any

import brainunit as u
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax.core import Tracer

from brainx.random.params import (
    SamplerMixin, Size, float_dtype, in_common_unit, int_dtype, out_shape, shape_of, unitless,
    with_unit,
)

__all__ = ["BasicSamplers"]


def _float_like(sampler: str, x: Any, dtype: Any) -> Any:
    if dtype is None:
        dtype = u.math.get_dtype(x)
        return dtype if jnp.issubdtype(dtype, jnp.floating) else float_dtype(None)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"{sampler}: dtype must be a float dtype, got {dtype}; the samples "
                         "would be truncated to integers.")
    return dtype


def _is_text(a: Any) -> bool:
    """Whether ``a`` holds strings or Python objects (which JAX arrays cannot)."""
    if isinstance(a, np.ndarray):
        return a.dtype.kind in "USO"
    return isinstance(a, (list, tuple)) and any(isinstance(x, (str, bytes)) for x in a)


class BasicSamplers(SamplerMixin):
    """Uniform numbers, integers and arrangements."""

    def rand(self, *dn: int, key: Any = None, dtype: Any = None):
        """Uniform samples in ``[0, 1)`` of shape ``dn`` (``numpy.random.rand``).

        Examples
        --------
        >>> import brainx
        >>> brainx.random.RandomState(0).rand(2, 3).shape
        (2, 3)
        """
        return jr.uniform(self._next_key(key), dn, float_dtype(dtype))

    def randn(self, *dn: int, key: Any = None, dtype: Any = None):
        """Standard normal samples of shape ``dn`` (``numpy.random.randn``)."""
        return jr.normal(self._next_key(key), dn, float_dtype(dtype))

    def random(self, size: Size = None, key: Any = None, dtype: Any = None):
        """Uniform samples in ``[0, 1)`` of shape ``size``."""
        return jr.uniform(self._next_key(key), shape_of(size), float_dtype(dtype))

    random_sample = ranf = sample = random   # numpy's aliases

    def randint(self, low, high=None, size: Size = None, dtype: Any = None, key: Any = None):
        """Integers in ``[low, high)`` (``[0, low)`` if ``high`` is omitted)."""
        if high is None:
            low, high = 0, low
        low, high = unitless("randint", "low", low), unitless("randint", "high", high)
        shape = out_shape(size, low, high)
        return jr.randint(self._next_key(key), shape, low, high, int_dtype(dtype))

    def random_integers(self, low, high=None, size: Size = None, key: Any = None,
                        dtype: Any = None):
        """Integers in ``[low, high]``, both ends included (``[1, low]`` if ``high`` is omitted).

        Examples
        --------
        >>> import brainx
        >>> x = brainx.random.RandomState(0).random_integers(3, size=1000)
        >>> sorted(set(x.tolist()))
        [1, 2, 3]
        """
        if high is None:
            low, high = 1, low
        low = unitless("random_integers", "low", low)
        high = jnp.asarray(unitless("random_integers", "high", high)) + 1
        shape = out_shape(size, low, high)
        return jr.randint(self._next_key(key), shape, low, high, int_dtype(dtype))

    # -- shaped like a template (PyTorch) --------------------------------------------
    def rand_like(self, input, dtype: Any = None, key: Any = None):
        """Uniform samples in ``[0, 1)`` with the shape of ``input`` (``torch.rand_like``).

        ``dtype`` defaults to ``input``'s if that is a float dtype, else to the
        default float dtype; the sample never carries ``input``'s unit.

        Examples
        --------
        >>> import jax.numpy as jnp, brainx
        >>> x = brainx.random.RandomState(0).rand_like(jnp.zeros((2, 3), jnp.float16))
        >>> x.shape, x.dtype
        ((2, 3), dtype('float16'))
        """
        dtype = _float_like("rand_like", input, dtype)
        return jr.uniform(self._next_key(key), u.math.shape(input), dtype)

    def randn_like(self, input, dtype: Any = None, key: Any = None):
        """Standard normal samples with the shape of ``input`` (``torch.randn_like``)."""
        dtype = _float_like("randn_like", input, dtype)
        return jr.normal(self._next_key(key), u.math.shape(input), dtype)

    def randint_like(self, input, low=0, high=None, dtype: Any = None, key: Any = None):
        """Integers in ``[low, high)`` with the shape of ``input`` (``torch.randint_like``).

        ``high`` defaults to ``input.max()``; ``dtype`` to ``input``'s dtype.
        """
        low = unitless("randint_like", "low", low)
        high = jnp.max(unitless("randint_like", "input", input)) if high is None else unitless(
            "randint_like", "high", high)
        out = jr.randint(self._next_key(key), u.math.shape(input), low, high, int_dtype(None))
        return out.astype(u.math.get_dtype(input) if dtype is None else dtype)

    # -- arrangements --------------------------------------------------------------------
    def choice(self, a, size: Size = None, replace: bool = True, p=None, key: Any = None):
        """Samples from ``a`` (an array, or ``arange(a)`` for an integer), with probabilities
        ``p`` (uniform if omitted), as ``numpy.random.choice``.

        ``a`` may hold strings (a list or a numpy array): the indices are drawn with JAX
        and the sample is a numpy array of ``a``'s entries, so this case works only
        outside ``jit`` (the indices must be concrete).

        Examples
        --------
        >>> import brainx
        >>> rng = brainx.random.RandomState(0)
        >>> rng.choice(5, 3, replace=False).shape
        (3,)
        >>> names = rng.choice(['pooh', 'rabbit', 'piglet'], 4, p=[0.5, 0.25, 0.25])
        >>> names.shape, set(names.tolist()) <= {'pooh', 'rabbit', 'piglet'}
        ((4,), True)
        """
        if _is_text(a):
            items = np.asarray(a)
            if items.ndim != 1:
                raise ValueError(f"choice: a must be one-dimensional, got shape {items.shape}.")
            index = self.choice(items.shape[0], size, replace, p, key)
            if isinstance(index, Tracer):
                raise TypeError(
                    "choice: a holds strings, which cannot be picked inside a traced function "
                    "(jit, vmap, loops). Draw indices there with choice(len(a), ...) and pick "
                    "the strings outside.")
            return items[np.asarray(index)]
        (a,), unit = in_common_unit(a)
        p = unitless("choice", "p", p)
        r = jr.choice(self._next_key(key), a, shape_of(size), replace=replace, p=p)
        return with_unit(r, unit)

    def permutation(self, x, axis: int = 0, independent: bool = False, key: Any = None):
        """A permuted copy of ``x`` along ``axis`` (or a permutation of ``arange(x)``)."""
        (x,), unit = in_common_unit(x)
        r = jr.permutation(self._next_key(key), x, axis, independent=independent)
        return with_unit(r, unit)

    def shuffle(self, x, axis: int = 0, key: Any = None):
        """``x`` shuffled along ``axis``, returned (JAX arrays cannot be shuffled in place)."""
        return self.permutation(x, axis=axis, key=key)
