"""A plan that cuts a loop into nested segments (data shared by the strategies and executors).

A :class:`SegmentPlan` says how a checkpointed loop of ``length`` steps is cut:
``count`` segments of ``stride`` steps and a tail, each planned again below.
The strategies (:mod:`brainx.transform.remat.checkpoint_strategies`) build
plans; the executors (:mod:`~brainx.transform.remat.remat_loops`,
:mod:`~brainx.transform.remat.reverse_loops`) and the bounded while loop run
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["SegmentPlan"]


@dataclass(frozen=True)
class SegmentPlan:
    """A loop of ``length`` steps cut into ``count`` segments of ``stride`` steps and a tail.

    A leaf (``stride == 0``) keeps all its carries. ``child`` plans one
    segment; ``tail`` plans the ``length - count * stride`` last steps.
    """

    length: int
    stride: int = 0
    count: int = 0
    child: Optional["SegmentPlan"] = None
    tail: Optional["SegmentPlan"] = None

    @property
    def is_leaf(self) -> bool:
        return self.stride == 0

    @property
    def slots(self) -> int:
        """How many segment-start carries this level keeps."""
        return self.count + (self.tail is not None)

    @staticmethod
    def build(length: int, sizes: Sequence[int]) -> "SegmentPlan":
        sizes = [s for s in sizes if s < length]
        if not sizes:
            return SegmentPlan(length)
        stride, rest = sizes[0], sizes[1:]
        count, left = divmod(length, stride)
        tail = SegmentPlan.build(left, rest) if left else None
        return SegmentPlan(length, stride, count, SegmentPlan.build(stride, rest), tail)

    @staticmethod
    def balanced(length: int, levels: int) -> "SegmentPlan":
        """``levels`` levels of about ``length ** (1 / levels)`` segments each.

        A segment length that divides ``length`` is preferred when one is
        within a factor 1.5 of the ideal: no tail segment, whose reverse
        pass is a separate loop (with its own accumulators under ``NestedRemat``).
        """
        if levels <= 1 or length <= 2:
            return SegmentPlan(length)
        ideal = length ** ((levels - 1) / levels)
        near = [d for d in range(max(2, math.floor(ideal / 1.5)), min(length - 1,
                                                                     math.ceil(ideal * 1.5)) + 1)
                if length % d == 0]
        # Equally near (125 and 128 for 16 000 steps): the shorter segment, whose
        # steps keep residuals, larger than the carries that segment starts keep.
        stride = (min(near, key=lambda d: (round(abs(math.log(d / ideal)), 9), d)) if near
                  else min(length - 1, math.ceil(ideal - 1e-9)))
        count, left = divmod(length, stride)
        tail = SegmentPlan.balanced(left, levels - 1) if left else None
        return SegmentPlan(length, stride, count, SegmentPlan.balanced(stride, levels - 1), tail)

    def peak_carries(self) -> int:
        """Carries alive at once on the reverse pass (segment starts of each level + a leaf)."""
        if self.is_leaf:
            return self.length
        inner = max(self.child.peak_carries(), self.tail.peak_carries() if self.tail else 0)
        return self.slots + inner
