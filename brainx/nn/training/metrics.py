"""Running metrics for evaluation loops: sums kept in states, read out with ``compute()``.

A metric accumulates over batches: ``update(**batch)`` adds a batch's
numbers, ``compute()`` reads the result, ``reset()`` starts over. Its
accumulators are :class:`MetricState` s (long-term states), so ``update``
may run inside ``brainx.transform.jit``: the compiled step reads and writes
them like any other state.

====================  =========================================  ====================
metric                ``update`` takes                           ``compute`` returns
====================  =========================================  ====================
``AverageMetric(a)``  ``a=values`` (a number or an array)        the mean of all values
``AccuracyMetric()``  ``logits=(..., classes)``, ``labels=(...)``  the fraction ``argmax == label``
``MultiMetric(**m)``  every keyword any of ``m`` needs           ``{name: m.compute()}``
====================  =========================================  ====================
"""

from __future__ import annotations

from typing import Any, Dict

import jax
import jax.numpy as jnp

from brainx.state.state import LongTermState

__all__ = ["MetricState", "Metric", "AverageMetric", "AccuracyMetric", "MultiMetric"]


class MetricState(LongTermState):
    """The state type of a metric's accumulators (a :class:`~brainx.LongTermState`)."""


class Metric:
    """The interface: ``reset()``, ``update(**kwargs)``, ``compute()``."""

    def reset(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} must implement reset().")

    def update(self, **kwargs) -> None:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} must implement update(**kwargs).")

    def compute(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} must implement compute().")


class AverageMetric(Metric):
    """The mean of every value passed as the keyword ``argname`` since the last reset.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import AverageMetric
    >>> m = AverageMetric("loss")
    >>> m.update(loss=jnp.array([1.0, 2.0]))
    >>> m.update(loss=6.0)
    >>> float(m.compute())                       # (1 + 2 + 6) / 3
    3.0
    """

    def __init__(self, argname: str = "values"):
        self.argname = argname
        self.total = MetricState(jnp.array(0.0, jnp.float32), name=f"{argname}_total")
        self.count = MetricState(jnp.array(0, jnp.int32), name=f"{argname}_count")

    def reset(self) -> None:
        self.total.value = jnp.array(0.0, jnp.float32)
        self.count.value = jnp.array(0, jnp.int32)

    def update(self, **kwargs) -> None:
        if self.argname not in kwargs:
            raise TypeError(f"{type(self).__name__}.update: expected the keyword argument "
                            f"{self.argname!r} (the values to average), got {sorted(kwargs)}.")
        values = kwargs[self.argname]
        if isinstance(values, (int, float)):
            self.total.value = self.total.value + values
            self.count.value = self.count.value + 1
        else:
            values = jnp.asarray(values)
            self.total.value = self.total.value + values.sum()
            self.count.value = self.count.value + values.size

    def compute(self) -> jax.Array:
        return self.total.value / self.count.value


class AccuracyMetric(AverageMetric):
    """The fraction of samples whose ``argmax(logits)`` equals the integer label.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import AccuracyMetric
    >>> acc = AccuracyMetric()
    >>> acc.update(logits=jnp.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), labels=jnp.array([1, 1, 1]))
    >>> round(float(acc.compute()), 4)
    0.6667
    """

    def __init__(self):
        super().__init__("values")

    def update(self, *, logits: jax.Array, labels: jax.Array, **_) -> None:
        logits, labels = jnp.asarray(logits), jnp.asarray(labels)
        if logits.ndim != labels.ndim + 1:
            raise ValueError(f"AccuracyMetric: logits need one more axis (the classes) than "
                             f"labels, got logits {logits.shape} and labels {labels.shape}.")
        if not jnp.issubdtype(labels.dtype, jnp.integer):
            raise ValueError(f"AccuracyMetric: labels must be integer class indices, got "
                             f"dtype {labels.dtype}.")
        super().update(values=logits.argmax(axis=-1) == labels)


class MultiMetric(Metric):
    """Several named metrics updated together; ``compute()`` gives ``{name: value}``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from brainx.nn import AccuracyMetric, AverageMetric, MultiMetric
    >>> ms = MultiMetric(loss=AverageMetric("loss"), accuracy=AccuracyMetric())
    >>> ms.update(loss=jnp.array(0.5), logits=jnp.eye(2), labels=jnp.array([0, 0]))
    >>> {k: float(v) for k, v in ms.compute().items()}
    {'loss': 0.5, 'accuracy': 0.5}
    """

    _RESERVED = ("reset", "update", "compute", "_metric_names")

    def __init__(self, **metrics: Metric):
        self._metric_names = []
        for name, metric in metrics.items():
            if name in self._RESERVED:
                raise ValueError(f"MultiMetric: the name {name!r} is taken by a method; "
                                 f"use another (reserved: {self._RESERVED}).")
            if not isinstance(metric, Metric):
                raise TypeError(f"MultiMetric: {name!r} must be a Metric, got "
                                f"{type(metric).__name__}.")
            self._metric_names.append(name)
            setattr(self, name, metric)

    def reset(self) -> None:
        for name in self._metric_names:
            getattr(self, name).reset()

    def update(self, **updates) -> None:
        for name in self._metric_names:
            getattr(self, name).update(**updates)

    def compute(self) -> Dict[str, Any]:
        return {name: getattr(self, name).compute() for name in self._metric_names}
