"""The sampling methods of :class:`~brainx.random.RandomState`, gathered from their families.

Each family module defines its samplers once, as methods drawing with
``self._next_key(key)``; :class:`Samplers` joins the families, ``RandomState``
inherits it, and :mod:`brainx.random.default` exposes every method as a
module-level function on the default generator. Every sampler takes ``key=``:
with it, the given key is used and the generator's own key is left untouched;
without it, the generator's key is split once (read and written, so it threads
through the stateful transforms).

=================  ===========================================  ==============================
family             samplers                                     module
=================  ===========================================  ==============================
basic              rand, randn, random (and its aliases),       :mod:`~brainx.random.basic`
                   randint, random_integers, ``*_like``,
                   choice, permutation, shuffle
continuous         uniform, normal, lognormal, exponential,     :mod:`~brainx.random.continuous`
                   gumbel, laplace, logistic, pareto, ...
gamma family       gamma, beta, chisquare, f, t, noncentral     :mod:`~brainx.random.gamma_family`
discrete           bernoulli, binomial, poisson, geometric,     :mod:`~brainx.random.discrete`
                   hypergeometric, zipf, categorical, ...
multivariate       dirichlet, multinomial, multivariate_normal, :mod:`~brainx.random.multivariate`
                   orthogonal
=================  ===========================================  ==============================
"""

from __future__ import annotations

from brainx.random.basic import BasicSamplers
from brainx.random.continuous import ContinuousSamplers
from brainx.random.discrete import DiscreteSamplers
from brainx.random.gamma_family import GammaFamilySamplers
from brainx.random.multivariate import MultivariateSamplers

__all__ = ["Samplers", "FAMILIES", "SAMPLERS"]


class Samplers(BasicSamplers, ContinuousSamplers, GammaFamilySamplers, DiscreteSamplers,
               MultivariateSamplers):
    """Mixin: every sampler, drawing with ``self._next_key(key)``."""


FAMILIES = {
    "basic": BasicSamplers,
    "continuous": ContinuousSamplers,
    "gamma family": GammaFamilySamplers,
    "discrete": DiscreteSamplers,
    "multivariate": MultivariateSamplers,
}

#: The names of all samplers, family by family.
SAMPLERS = tuple(name for family in FAMILIES.values() for name, member in vars(family).items()
                 if callable(member) and not name.startswith("_"))
