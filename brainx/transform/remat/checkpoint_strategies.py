"""How a checkpointed loop trades memory for recomputation: the strategy objects.

A strategy says which carries a loop keeps for its reverse pass and how it
recomputes the rest. Every strategy gives the same outputs, final states and
gradients; they differ in memory, time and which JAX transforms they support
(``L`` is the number of levels, T the number of steps):

==================  =====================================  ===========================  ============
strategy            keeps                                  recomputes each step         transforms
==================  =====================================  ===========================  ============
``NoRemat``         every step's residuals (``lax.scan``)  never                        all
``PerStepRemat``    every step's carry                     once (``jax.checkpoint``)    all
``Nested``          one carry per segment, per level,      ``L - 1`` times              reverse mode
(the default)       one innermost segment's residuals
``NestedRemat``     as ``Nested``, plus one gradient       ``L - 1`` times (``L`` with  all
                    buffer per level for each constant     a ``policy``)
``Binomial``        a fixed number of carries              O(log T) times, +1           reverse mode
==================  =====================================  ===========================  ============

``Nested`` and ``Binomial`` write their own reverse pass (a ``jax.custom_vjp``)
that threads one gradient accumulator through every level, so a
differentiated loop constant (a weight matrix) costs one buffer, not one per
level; ``NestedRemat`` builds the same segments from ``jax.checkpoint`` and
nested ``lax.scan``, the nested scan one writes by hand, which JAX
differentiates in any mode (forward mode, higher order).

Ring buffers (delays). A state the step writes one row of (``buffer.at[i].set(row)``, as
``Delay.update`` does) is found in the step's jaxpr
(:mod:`~brainx.transform.remat.ring_buffers`) and costs the reverse pass less than a
whole carry where a step's carry is kept: ``PerStepRemat`` keeps the overwritten row
per step (a loop with its own reverse pass, reverse mode only); ``Nested`` keeps the
buffer at each segment start and, for a checkpointed step, the row per step inside the
innermost segment; ``NestedRemat`` and ``NoRemat`` run a checkpointed step inlined (the
plain step's residuals keep the write index only); ``Binomial`` keeps it in each snapshot.
``brainx.environ.set(ring_buffer_remat=False)`` turns this off.

Policies. ``PerStepRemat``, ``Nested`` and ``NestedRemat`` take a
``policy`` (any ``jax.checkpoint_policies`` policy, or one of
:mod:`brainx.transform.policies`: by state, or "everything except these
names") for the values each step keeps; ``NoRemat`` keeps everything and
``Binomial`` keeps whole carries only, so they take none
(:func:`with_policy` says so).

How many levels. Unless ``levels``, ``segments`` or ``base`` is given,
``Nested`` takes the fewest levels with at most :data:`SEGMENTS_PER_LEVEL`
(100) segments per level (:func:`default_levels`); ``NestedRemat`` takes 2:

==================  ======  ==================================================
steps T             levels  segments (balanced, a divisor of T when one is near)
==================  ======  ==================================================
up to 10 000        2       about sqrt(T) of about sqrt(T) steps
up to 1 000 000     3       about T^(1/3) per level (16 000: 25 x 32 x 20)
each factor 100     +1
==================  ======  ==================================================

A level more keeps about ``3 T^(1/3)`` values instead of ``2 sqrt(T)`` (at
16 000 steps, 256 units: 264 KiB instead of 827 KiB) for one more forward
pass of the carries, about +0.3x the no-remat time on CPU. ``Nested``
unrolls its reverse sweep by 5 by default (a loop's ``unroll``), which more
than pays for it: at 16 000 steps three levels ran in about 1.1x the no-remat
time (``benchmarks/remat_memory.py``; 1.7x rolled).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple, Union

from brainx.transform.remat.remat_loops import nested_remat_scan, remat_scan, take
from brainx.transform.remat.reverse_loops import vjp_scan
from brainx.transform.remat.ring_buffers import PER_STEP, find_ring_plan, inline_checkpoints
from brainx.transform.control.segment_plan import SegmentPlan

__all__ = ["CheckpointStrategy", "NoRemat", "PerStepRemat", "NestedRemat", "Nested", "Binomial",
           "as_strategy", "with_policy", "POLICY_STRATEGIES", "segment_sizes", "default_levels",
           "SEGMENTS_PER_LEVEL", "SegmentPlan"]


class CheckpointStrategy:
    """Base class of the loop checkpointing strategies."""

    #: the strategy runs its own reverse pass (``jax.custom_vjp``)
    custom_vjp: bool = False
    #: what a loop's default ``unroll=None`` means with this strategy
    default_unroll: int = 1

    def scan(self, body: Callable, consts, init, xs, length: int, *, reverse: bool,
             unroll: int, monitor: Optional[Callable] = None):
        """``(final_carry, ys)`` of ``body(consts, carry, x) -> (carry, y)`` over ``length`` steps.

        ``monitor(steps_done, carry, y)``, if given, is called in the traced
        loop after each step of the forward pass (a progress bar).
        """
        raise NotImplementedError


@dataclass(frozen=True)
class NoRemat(CheckpointStrategy):
    """No checkpointing: a plain ``lax.scan``, which keeps every step's residuals.

    The fastest and the largest; the reference :func:`~brainx.transform.memory_report`
    compares the other strategies with.
    """

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        # a step that calls checkpoint() is run with it inlined: a real no-remat program
        return remat_scan(inline_checkpoints(body), consts, init, xs, length, reverse=reverse,
                          unroll=unroll, policy=None, prevent_cse=False, monitor=monitor,
                          remat=False)


@dataclass(frozen=True)
class PerStepRemat(CheckpointStrategy):
    """``jax.checkpoint`` on every step: keep each step's carry, recompute the step's insides.

    Memory grows with the number of steps (one carry per step); time is about
    one extra forward pass. Works under every JAX transform.

    Parameters
    ----------
    policy : callable, optional
        A ``jax.checkpoint_policies`` policy naming intermediate values that
        may be kept instead of recomputed.
    prevent_cse : bool
        Passed to ``jax.checkpoint``; ``False`` (the default) is safe inside a loop.
    """

    policy: Optional[Callable] = None
    prevent_cse: bool = False

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        if self.policy is None and length and _ring_plan(body, consts, init, xs, False):
            return vjp_scan(body, consts, init, xs, length, reverse=reverse, unroll=unroll,
                            schedule=PER_STEP, monitor=monitor)
        return remat_scan(body, consts, init, xs, length, reverse=reverse, unroll=unroll,
                          policy=self.policy, prevent_cse=self.prevent_cse, monitor=monitor)


#: The default plan has at most about this many segments per level.
SEGMENTS_PER_LEVEL = 100


def default_levels(length: int) -> int:
    """Levels of the default plan for ``length`` steps: the fewest with at most
    :data:`SEGMENTS_PER_LEVEL` segments per level, and at least 2.

    >>> default_levels(1000), default_levels(10_000), default_levels(16_000), default_levels(10**7)
    (2, 2, 3, 4)
    """
    levels = 2
    while SEGMENTS_PER_LEVEL ** levels < length:
        levels += 1
    return levels


@dataclass(frozen=True)
class _Segmented(CheckpointStrategy):
    levels: Optional[int] = None
    segments: Union[None, int, Tuple[int, ...]] = None
    base: Optional[int] = None
    policy: Optional[Callable] = None

    def __post_init__(self):
        if self.segments is not None:
            segs = (self.segments,) if isinstance(self.segments, int) else tuple(self.segments)
            if not segs or any(not isinstance(s, int) or s < 1 for s in segs):
                raise ValueError(f"{type(self).__name__}: segments must be positive ints, got "
                                 f"{self.segments!r}.")
            object.__setattr__(self, "segments", segs)
        if self.levels is not None and (not isinstance(self.levels, int) or self.levels < 1):
            raise ValueError(f"{type(self).__name__}: levels must be an int >= 1 or None (chosen "
                             f"from the length), got {self.levels!r}.")
        if self.base is not None and (not isinstance(self.base, int) or self.base < 2):
            raise ValueError(f"{type(self).__name__}: base must be an int >= 2, got {self.base!r}.")

    def plan(self, length: int) -> "SegmentPlan":
        if self.segments is None and self.base is None:
            return SegmentPlan.balanced(length, self.levels or default_levels(length))
        return SegmentPlan.build(length, segment_sizes(length, segments=self.segments,
                                                       base=self.base))


@dataclass(frozen=True)
class NestedRemat(_Segmented):
    """Nested segments built from ``jax.checkpoint`` and ``lax.scan``.

    The loop is cut into segments (and each segment into sub-segments, for
    ``levels`` > 2); only the carries at segment starts are kept, and each
    level recomputes its segment on the way back, as the nested scan written
    by hand does: ``jax.checkpoint`` on each segment, none on the step, so
    the innermost segment is differentiated as JAX differentiates a scan (it
    keeps the steps' residuals while it is reversed). Works under every JAX
    transform (forward mode and higher order included), but JAX gives each
    level its own accumulator for the gradient of a differentiated loop
    constant; :class:`Nested` avoids that. A progress bar also moves while
    segments are recomputed on the backward pass.

    Parameters
    ----------
    levels : int
        Number of levels; segment lengths are about ``length ** (k / levels)``.
        2 by default, whatever the length: each level has its own gradient
        buffers, so a third level can cost more than it saves (at 16 000
        steps, 256 units: 1376 KiB for three levels, 1144 KiB for two).
    segments : int or tuple of int, optional
        Explicit segment lengths, outermost first (overrides ``levels``).
    base : int, optional
        brainstate's ``base``: segments of ``base ** k`` steps, as many levels as needed.
    policy : callable, optional
        A ``jax.checkpoint_policies`` policy put on each step with
        ``jax.checkpoint``: ``nothing_saveable`` keeps only each step's carry
        (less memory, one more forward pass).
    """

    levels: Optional[int] = 2

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        if self.policy is None and length and _ring_plan(body, consts, init, xs, True):
            body = inline_checkpoints(body)  # the innermost scan keeps a buffer's row, not it
        return nested_remat_scan(body, consts, init, xs, self.plan(length), reverse=reverse,
                                 unroll=unroll, policy=self.policy, monitor=monitor)


@dataclass(frozen=True)
class Nested(_Segmented):
    """Nested segments with a hand-written reverse pass (the default strategy).

    Like :class:`NestedRemat` (same parameters, but ``levels`` defaults to
    :func:`default_levels`, more for long loops), but the reverse pass is a
    ``jax.custom_vjp``: it walks the segments
    backwards, recomputes each innermost segment's step residuals and applies
    each step's VJP, threading one gradient accumulator through all levels.
    Memory: the segment-start carries of every level plus one innermost
    segment's residuals. Time: one forward pass per level plus one step VJP
    per step. Reverse mode only (``jax.grad``, ``jax.vjp``,
    ``brainx.transform.grad``, grad of grad); use :class:`NestedRemat` for
    forward mode. A loop's ``unroll`` (5 by default) unrolls the loops that
    apply the step VJPs, where XLA then merges consecutive steps' gradient
    updates; the forward loops stay rolled (unrolled, they ran slower on CPU).

    ``policy`` (a ``jax.checkpoint_policies`` policy) limits the residuals
    the innermost segment keeps: ``nothing_saveable`` keeps only each step's
    inputs and recomputes the step once more on the way back.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from brainx.transform import Nested, checkpointed_scan
    >>> step = lambda c, x: (jnp.sin(c) + x, c)
    >>> loss = lambda a, k: checkpointed_scan(step, a, jnp.ones(97), checkpoint=k)[1].sum()
    >>> g = jax.grad(loss)(0.5, Nested(levels=3))
    >>> bool(jnp.allclose(g, jax.grad(loss)(0.5, "per_step_remat")))
    True
    """

    custom_vjp = True
    #: innermost segments of a checkpointed step restore its ring buffers (ring_buffers.py)
    ring_buffers = "checkpointed"
    #: the reverse sweep unrolled by 5 ran 1.3x-2x faster on CPU (256 units) for +0.2-1 s compile
    default_unroll = 5

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        return vjp_scan(body, consts, init, xs, length, reverse=reverse, unroll=unroll,
                        schedule=self, monitor=monitor)


@dataclass(frozen=True)
class Binomial(CheckpointStrategy):
    """Binomial (treeverse / revolve) checkpointing with a fixed number of snapshots.

    The reverse pass keeps at most ``snapshots`` carries and places them by
    the binomial rule, which reverses ``binom(s + r + 1, r)`` steps with each
    step recomputed at most ``r`` times. It needs no length in advance, so it
    also reverses :func:`checkpointed_while_loop`. Reverse mode only, first
    order (its reverse pass is a ``while_loop``).

    Parameters
    ----------
    snapshots : int
        Carries kept besides the initial one.
    """

    snapshots: int = 32
    custom_vjp = True

    def __post_init__(self):
        if not isinstance(self.snapshots, int) or self.snapshots < 1:
            raise ValueError(f"Binomial: snapshots must be an int >= 1, got {self.snapshots!r}.")

    def scan(self, body, consts, init, xs, length, *, reverse, unroll, monitor=None):
        return vjp_scan(body, consts, init, xs, length, reverse=reverse, unroll=unroll,
                        schedule=self, monitor=monitor)


def _ring_plan(body, consts, init, xs, need_checkpoint: bool) -> bool:
    """Whether the step ``body`` writes a ring buffer the reverse pass can restore."""
    x0 = None if xs is None else take(xs, 0)
    return find_ring_plan(body, consts, init, x0, need_checkpoint=need_checkpoint) is not None


_NAMES = {"no_remat": NoRemat, "per_step_remat": PerStepRemat, "remat": PerStepRemat,
          "nested": Nested, "nested_remat": NestedRemat, "binomial": Binomial}

#: The strategies that take a ``policy``.
POLICY_STRATEGIES = (PerStepRemat, Nested, NestedRemat)


def as_strategy(spec, base: Optional[int] = None) -> CheckpointStrategy:
    """A strategy object from ``None`` (the default), a name, or a strategy.

    ``base`` (brainstate's keyword) selects ``Nested(base=base)`` when no
    strategy is named.
    """
    if spec is None:
        return Nested(base=base) if base is not None else Nested()
    if isinstance(spec, CheckpointStrategy):
        if base is not None:
            raise ValueError("Pass either base= or a checkpoint strategy, not both; use "
                             f"{type(spec).__name__}(base={base}) instead.")
        return spec
    if isinstance(spec, str) and spec in _NAMES:
        cls = _NAMES[spec]
        if base is not None:
            if cls not in (Nested, NestedRemat):
                raise ValueError(f"base= applies to 'nested' and 'nested_remat', not {spec!r}.")
            return cls(base=base)
        return cls()
    raise ValueError(f"Unknown checkpoint strategy {spec!r}: use one of {sorted(_NAMES)} or an "
                     "instance of NoRemat, PerStepRemat, Nested, NestedRemat or Binomial.")


def with_policy(strategy: CheckpointStrategy, policy: Optional[Callable],
                what: str = "checkpointed loop") -> CheckpointStrategy:
    """``strategy`` with its ``policy`` set to ``policy`` (``None``: unchanged).

    >>> with_policy(PerStepRemat(), "p").policy
    'p'
    """
    if policy is None:
        return strategy
    if not isinstance(strategy, POLICY_STRATEGIES):
        why = ("it keeps every value" if isinstance(strategy, NoRemat) else
               "it keeps whole carries only" if isinstance(strategy, Binomial) else
               "it checkpoints no single step")
        raise ValueError(
            f"{what}: policy= needs a strategy that checkpoints single steps, but "
            f"{strategy!r} takes no policy ({why}). Use PerStepRemat, Nested or NestedRemat "
            "('remat', 'nested', 'nested_remat'), or drop policy=.")
    if strategy.policy is not None and strategy.policy is not policy:
        raise ValueError(f"{what}: policy= given, and {strategy!r} has a policy of its own; "
                         "pass only one.")
    return dataclasses.replace(strategy, policy=policy)


def segment_sizes(length: int, levels: int = 2, segments: Optional[Sequence[int]] = None,
                  base: Optional[int] = None) -> Tuple[int, ...]:
    """Segment lengths, outermost first, for a loop of ``length`` steps.

    >>> segment_sizes(1000), segment_sizes(1000, levels=3), segment_sizes(1000, base=16)
    ((32,), (100, 10), (256, 16))
    """
    if segments is not None:
        sizes = sorted(set(int(s) for s in segments), reverse=True)
    elif base is not None:
        n = max(1, math.ceil(math.log(max(length, 1), base) - 1e-9))
        sizes = [base ** k for k in range(n - 1, 0, -1)]
    else:
        sizes = [math.ceil(length ** (k / levels) - 1e-9) for k in range(levels - 1, 0, -1)]
    return tuple(s for s in sizes if 1 <= s < length)
