"""The errors brainx raises when a state would be left inconsistent."""

from brainx import _import_check  # noqa: F401  (an ImportError that names a folder shadowing brainx)

__all__ = ["BrainxError", "TracerLeakError", "ExpiredStateError", "StateTypeError", "BatchAxisError",
           "TraceContextError", "BrainStateError", "ArgnumsError", "StepOutputError", "IRError",
           "IRValidationError", "UnhashableStaticError"]


class BrainxError(Exception):
    """Base class of brainx's own errors."""


class TraceContextError(BrainxError, RuntimeError):
    """A state was used in a way its trace context does not allow (brainstate's name)."""


class TracerLeakError(TraceContextError):
    """A JAX tracer would have been stored in a :class:`~brainx.State`.

    This happens when a raw JAX transform (``jax.jit``, ``jax.grad``,
    ``jax.vmap``, ...) traces a function that writes a state. Use the
    matching ``brainx.transform`` function, which threads the state through.
    A :class:`TraceContextError`, so code that catches brainstate's error
    for this case catches it too.
    """


class ExpiredStateError(TraceContextError):
    """A state created inside a transform was read after the transform ended.

    Its value was a tracer of that transform's trace. A
    :class:`TraceContextError` (and so a ``RuntimeError``), as brainstate
    raises for the same read.
    """


class StateTypeError(BrainxError, TypeError, ValueError):
    """A state was given a value it cannot hold (another State, or a changed type inside a loop).

    Both a ``TypeError`` and a ``ValueError``: brainstate raises ``ValueError``
    for these (a State assigned as a value, a value of another tree under
    :func:`~brainx.check_state_value_tree`), so code written for it catches
    this too.
    """


class BatchAxisError(BrainxError, ValueError):
    """A state would mix batched and unbatched values across vmap lanes.

    Raised by ``brainx.transform.vmap`` when a state that was not declared in
    ``in_states`` / ``out_states`` is written with a per-lane value, and by a
    random sampler called under a raw ``jax.vmap`` (every lane would draw the
    same numbers).
    """


BrainStateError = BrainxError  # brainstate's name for the base class


class ArgnumsError(BrainxError, TypeError, ValueError):
    """A transform's ``argnums`` is not a valid set of positional-argument indices.

    Raised for an index that is not an ``int`` (a float, a bool, a string),
    for an index out of range for the call, and for two indices naming the
    same argument (``(0, 0)``, or ``(0, -2)`` with two arguments), which would
    otherwise leave one of them with a silently zero gradient. Both a
    ``TypeError`` (as ``jax.grad`` raises for a bad type) and a ``ValueError``
    (as brainstate raises).
    """


class UnhashableStaticError(BrainxError, TypeError, ValueError):
    """A static argument (``static_argnums`` / ``static_argnames``) is not hashable.

    Static arguments key the trace cache, so they must be hashable (a tuple,
    not a list). Both a ``ValueError`` (as ``jax.jit`` raises) and a
    ``TypeError`` (as brainstate raises).
    """


class StepOutputError(BrainxError, TypeError, ValueError):
    """A loop's step function returned something that is not a ``(new_carry, y)`` pair.

    Raised by ``scan``, ``checkpointed_scan`` and the other loops that take a
    ``(carry, x) -> (new_carry, y)`` step, before any state changes. Both a
    ``TypeError`` (as ``jax.lax.scan`` raises for an output of the wrong
    structure) and a ``ValueError`` (as brainstate raises).

    Examples
    --------
    >>> import jax.numpy as jnp, brainx
    >>> try:
    ...     brainx.transform.scan(lambda c, x: c + x, 0.0, jnp.arange(3.0))
    ... except brainx.errors.StepOutputError as err:
    ...     print(str(err)[:45])
    the step of scan (<lambda>) must return a pai
    """


class IRError(BrainxError):
    """A jaxpr tool (``optimize_jaxpr``, ``inline_jit``, ``fn_to_python_code``...) cannot do its job.

    The base of :class:`IRValidationError` and of
    :class:`~brainx.transform.UnsupportedPrimitiveError` (brainstate's hierarchy of
    the same names), so ``except IRError`` catches every error of these tools.
    """


class IRValidationError(IRError, TypeError, ValueError):
    """A jaxpr tool was given something that is not what it works on.

    Raised for an argument that is neither a ``Jaxpr`` nor a ``ClosedJaxpr``, a
    variable list holding a literal or another object, an unknown pass name, or an
    iteration count that is not a positive integer. Both a ``TypeError`` and a
    ``ValueError``: brainstate raises ``ValueError`` subclasses for these, earlier
    brainx releases ``TypeError`` for a wrong type, and code written for either
    catches this.

    Examples
    --------
    >>> import brainx
    >>> try:
    ...     brainx.transform.optimize_jaxpr("not a jaxpr")
    ... except brainx.errors.IRValidationError as err:
    ...     print(err)
    optimize_jaxpr: Expected Jaxpr or ClosedJaxpr, got str.
    """
