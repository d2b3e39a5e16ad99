"""`StateLike`: what the containers of :mod:`brainx.util` treat as a state.

``brainx.util`` sits below ``brainx.state`` and may not import it, yet its
mappings read and write states (:meth:`FlattedDict.to_dict_values`,
:meth:`PrettyDict.treefy_state`). They test ``isinstance(x, StateLike)``;
:class:`brainx.State` registers itself as one (a virtual subclass: nothing
changes in its class hierarchy).
"""

from __future__ import annotations

import abc

__all__ = ["StateLike"]


class StateLike(abc.ABC):
    """An object holding a mutable ``.value``, with ``to_state_ref()`` giving a snapshot.

    Examples
    --------
    >>> import brainx
    >>> from brainx.util.state_like import StateLike
    >>> isinstance(brainx.ParamState(1.0), StateLike), isinstance(1.0, StateLike)
    (True, False)
    """
