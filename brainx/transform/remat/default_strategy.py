"""The strategy of a checkpointed loop that names none: the ``checkpoint_strategy`` setting.

``checkpointed_scan`` and ``checkpointed_for_loop`` called without
``checkpoint=``, ``base=`` or ``memory_budget=`` run the strategy set with
``brainx.environ.set(checkpoint_strategy=...)``, or inside a block with
``brainx.environ.context(checkpoint_strategy=...)`` (this thread only):
a strategy object or its name (``"nested"``, ``"binomial"``, ...). Unset, it
is :class:`~brainx.transform.Nested`. A loop that names its strategy keeps it.

This is how a function written once, with plain ``checkpointed_for_loop(step,
xs)`` calls, is tried under several strategies
(:func:`~brainx.transform.memory_report` does exactly that). The setting is
read when a loop is traced: a function compiled before (a
``brainx.transform.jit`` already called) keeps the strategy it was traced
with. Each read is counted, so a caller can tell whether any loop asked.

>>> import jax.numpy as jnp, brainx
>>> v = brainx.HiddenState(jnp.zeros(()))
>>> def step(x):
...     v.value = v.value + x
...     return v.value
>>> with brainx.environ.context(checkpoint_strategy="binomial"):
...     before = default_strategy_reads()
...     ys = brainx.transform.checkpointed_for_loop(step, jnp.ones(4))
...     default_strategy_reads() - before
1
"""

from __future__ import annotations

import threading
from typing import Any

from brainx import environ

__all__ = ["KEY", "default_strategy", "default_strategy_reads"]

#: The ``brainx.environ`` key.
KEY = "checkpoint_strategy"


class _Reads(threading.local):
    count = 0


_READS = _Reads()


def default_strategy() -> Any:
    """The ``checkpoint_strategy`` setting (``None`` if unset); counts the read."""
    _READS.count += 1
    return environ.get(KEY, None)


def default_strategy_reads() -> int:
    """How many times this thread's loops have read the setting so far."""
    return _READS.count
