"""brainstate's switches that change nothing in brainx, kept so its programs run unchanged.

brainstate lets a program turn some checks on for a block of code; brainx makes
those checks always, so the block has nothing to switch. The names live here,
with the rest of brainstate compatibility, and ``brainx/__init__.py`` sets them
where brainstate's users look for them (``brainx.check_state_jax_tracer``,
``brainx.state.check_state_jax_tracer``).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["check_state_jax_tracer"]


@contextlib.contextmanager
def check_state_jax_tracer(val: bool = True) -> Iterator[None]:
    """Brainstate's switch for refusing JAX tracers written outside a transform.

    brainx always refuses them (:class:`~brainx.TracerLeakError`), so this
    block changes nothing; it is here for programs written for brainstate.

    Examples
    --------
    >>> import brainx
    >>> with brainx.check_state_jax_tracer():
    ...     s = brainx.State(1.0)
    """
    yield
