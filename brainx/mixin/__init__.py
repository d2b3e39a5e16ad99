"""Mixin classes, parameter describers, type combinations and computation modes.

brainstate's ``brainstate.mixin``, with the same names:

- :class:`Mixin`: the base of behaviour-only classes;
- :class:`ParamDesc` and :class:`ParamDescriber`: ``Layer.desc(...)``
  records a class and arguments and builds instances later
  (:class:`brainx.nn.Module` is a ``ParamDesc``); :class:`HashableDict` and
  :class:`NoSubclassMeta` are their helpers;
- :data:`JointTypes` and :data:`OneOfTypes`: intersection and union of
  classes for ``isinstance`` checks;
- :class:`Mode`, :class:`Training`, :class:`Batching` and
  :class:`JointMode`: computation modes;
- :func:`hashable`, :func:`not_implemented` and :func:`is_not_implemented`.

Examples
--------
>>> import brainx
>>> from brainx.mixin import Batching, JointMode, Training
>>> mode = JointMode(Training(), Batching(batch_size=8))
>>> mode.has(Training), mode.batch_size
(True, 8)
"""

from brainx.mixin.base import Mixin
from brainx.mixin.helpers import hashable, is_not_implemented, not_implemented
from brainx.mixin.modes import Batching, JointMode, Mode, Training
from brainx.mixin.param_desc import HashableDict, NoSubclassMeta, ParamDesc, ParamDescriber
from brainx.mixin.type_algebra import JointTypes, OneOfTypes, _JointGenericAlias, _OneOfGenericAlias

__all__ = [
    "Mixin",
    "ParamDesc", "ParamDescriber", "HashableDict", "NoSubclassMeta",
    "JointTypes", "OneOfTypes", "_JointGenericAlias", "_OneOfGenericAlias",
    "Mode", "JointMode", "Batching", "Training",
    "hashable", "not_implemented", "is_not_implemented",
]

# Names brainstate.mixin forwards to brainpy (with a DeprecationWarning). brainx does not
# depend on brainpy, so it says where they went instead of importing it.
_MOVED_TO_BRAINPY = ("AlignPost", "BindCondData")


def __getattr__(name):
    if name in _MOVED_TO_BRAINPY:
        raise AttributeError(
            f"brainx.mixin.{name} is not provided: brainstate forwards it to brainpy.mixin.{name} "
            f"(deprecated there); import it from brainpy.mixin.")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
