"""The public conversion functions: ``from_*`` build a brainx model, ``to_*`` a foreign one.

Each builds the model in the target framework with the same layers and copies
the weights (and batch-norm running statistics), so the result computes the
same function as the source. Single layers and ``Sequential`` stacks of them
(with plain activation functions between them) convert; see
:func:`~brainx.interop.supported_layers` for the layers.
"""

from __future__ import annotations

from typing import Any, Tuple

from brainx.interop.context import Context, as_shape
from brainx.interop.engine import to_brainx, to_foreign
from brainx.interop.registry import load_framework

__all__ = ["from_nnx", "to_nnx", "from_linen", "to_linen", "from_equinox", "to_equinox"]


def from_nnx(model: Any, *, sample_input: Any = None) -> Any:
    """Convert a flax.nnx model to an equivalent brainx model.

    Parameters
    ----------
    model : flax.nnx.Module
        A supported layer or an ``nnx.Sequential`` of them (functions such as
        ``nnx.relu`` between layers are kept).
    sample_input : array or tuple of int, optional
        One unbatched example of the input, or its shape. Needed when the model
        has a convolution or a batch norm, which brainx builds for a given input
        shape (``in_size``).

    Returns
    -------
    brainx.nn.Module
        The brainx layer or ``brainx.nn.Sequential``, with the same weights.

    Raises
    ------
    MissingDependencyError
        flax is not installed.
    UnmappedLayerError, UnsupportedLayerError, UnsupportedStructureError
        A layer or a container does not convert (the message says what to do).
    MissingShapeError
        ``sample_input`` is needed and was not given.

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from flax import nnx
    >>> from brainx import interop
    >>> src = nnx.Sequential(nnx.Linear(3, 4, rngs=nnx.Rngs(0)), nnx.relu)
    >>> net = interop.from_nnx(src)
    >>> x = jnp.ones((2, 3))
    >>> bool(jnp.allclose(net(x), src(x)))
    True
    """
    adapter = load_framework("nnx")
    return to_brainx(model, adapter, Context("nnx", as_shape(sample_input)))


def to_nnx(model: Any, *, rngs: Any = None) -> Any:
    """Convert a brainx model to an equivalent flax.nnx model.

    Parameters
    ----------
    model : brainx.nn.Module
        A supported layer or a ``brainx.nn.Sequential`` of them.
    rngs : flax.nnx.Rngs, optional
        Handed to the nnx constructors (default ``nnx.Rngs(0)``); their random
        initial weights are replaced by the brainx weights.

    Returns
    -------
    flax.nnx.Module
        The nnx layer or ``nnx.Sequential``. ``Dropout`` and ``BatchNorm`` are in
        evaluation mode (call ``.train()`` on the result to train it).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from flax import nnx
    >>> from brainx import interop
    >>> layer = brainx.nn.Linear(3, 2)
    >>> out = interop.to_nnx(layer, rngs=nnx.Rngs(0))
    >>> x = jnp.ones((4, 3))
    >>> bool(jnp.allclose(out(x), layer(x)))
    True
    """
    adapter = load_framework("nnx")
    return to_foreign(model, adapter, Context("nnx", rngs=rngs))


def from_linen(module: Any, params: Any, *, sample_input: Any = None) -> Any:
    """Convert a flax.linen module and its variables to an equivalent brainx model.

    Parameters
    ----------
    module : flax.linen.Module
        A supported layer or an ``nn.Sequential`` of them.
    params : Mapping
        The variables, as ``module.init`` returns them (``{"params": ...,
        "batch_stats": ...}``), or only the ``"params"`` collection when the
        module has no other.
    sample_input : array or tuple of int, optional
        One unbatched example of the input, or its shape (needed for
        convolutions and batch norms).

    Returns
    -------
    brainx.nn.Module
        The brainx model with the same weights.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> import flax.linen as nn
    >>> from brainx import interop
    >>> mod = nn.Sequential([nn.Dense(4), nn.relu, nn.Dense(2)])
    >>> variables = mod.init(jax.random.PRNGKey(0), jnp.ones((1, 3)))
    >>> net = interop.from_linen(mod, variables)
    >>> x = jnp.ones((5, 3))
    >>> bool(jnp.allclose(net(x), mod.apply(variables, x)))
    True
    """
    adapter = load_framework("linen")
    return to_brainx(adapter.wrap(module, params), adapter,
                     Context("linen", as_shape(sample_input)))


def to_linen(model: Any) -> Tuple[Any, Any]:
    """Convert a brainx model to a flax.linen module and its variables.

    Parameters
    ----------
    model : brainx.nn.Module
        A supported layer or a ``brainx.nn.Sequential`` of them.

    Returns
    -------
    (flax.linen.Module, dict)
        The module and the variables to call it with:
        ``module.apply(variables, x)``. ``Dropout`` and ``BatchNorm`` are built
        in evaluation mode (``deterministic=True``, ``use_running_average=True``).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> from brainx import interop
    >>> layer = brainx.nn.Linear(3, 2)
    >>> module, variables = interop.to_linen(layer)
    >>> x = jnp.ones((4, 3))
    >>> bool(jnp.allclose(module.apply(variables, x), layer(x)))
    True
    """
    adapter = load_framework("linen")
    return adapter.finalize(to_foreign(model, adapter, Context("linen")))


def from_equinox(model: Any, *, sample_input: Any = None) -> Any:
    """Convert an equinox model to an equivalent brainx model.

    equinox layers take one sample (``jax.vmap`` them over a batch) and put
    channels first; the brainx model takes the same sample, or a batch of them,
    in the same layout (convolutions are built with ``channel_first=True``).

    Parameters
    ----------
    model : equinox.Module
        A supported layer or an ``eqx.nn.Sequential`` of them (``eqx.nn.Lambda``
        steps are kept as functions).
    sample_input : array or tuple of int, optional
        One example of the input, or its shape (needed for convolutions).

    Returns
    -------
    brainx.nn.Module
        The brainx model with the same weights.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx, equinox as eqx
    >>> from brainx import interop
    >>> src = eqx.nn.Linear(3, 2, key=jax.random.PRNGKey(0))
    >>> layer = interop.from_equinox(src)
    >>> x = jnp.ones((4, 3))
    >>> bool(jnp.allclose(layer(x), jax.vmap(src)(x)))
    True
    """
    adapter = load_framework("equinox")
    return to_brainx(model, adapter, Context("equinox", as_shape(sample_input)))


def to_equinox(model: Any, *, key: Any = None) -> Any:
    """Convert a brainx model to an equivalent equinox model.

    Parameters
    ----------
    model : brainx.nn.Module
        A supported layer or a ``brainx.nn.Sequential`` of them.
    key : jax.Array, optional
        PRNG key for the equinox constructors (default ``PRNGKey(0)``); their
        random initial weights are replaced by the brainx weights.

    Returns
    -------
    equinox.Module
        The equinox model; it takes one sample (``jax.vmap`` it over a batch).
        A channels-last brainx convolution becomes an ``eqx.nn.Sequential`` that
        moves the channels around the equinox convolution, so the model takes the
        same inputs as the brainx one. ``Dropout`` is built with ``inference=True``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, brainx
    >>> from brainx import interop
    >>> layer = brainx.nn.Linear(3, 2)
    >>> out = interop.to_equinox(layer, key=jax.random.PRNGKey(0))
    >>> x = jnp.ones((4, 3))
    >>> bool(jnp.allclose(jax.vmap(out)(x), layer(x)))
    True
    """
    adapter = load_framework("equinox")
    return to_foreign(model, adapter, Context("equinox", key=key))
