"""``brainx.compat.private.autodiff``: brainstate's private autodiff and check helpers."""

import brainunit as u
import jax
import jax.numpy as jnp
import pytest

from brainx.compat.private.autodiff import (_check_nan_jit_compatible, _error_msg, _jacfwd,
                                            _jacrev)


def test_jacobians_are_jax_s_and_unit_aware_on_request():
    f = lambda x: (x ** 3, {"sq": x ** 2})
    jac, aux = _jacfwd(f, has_aux=True)(2.0)
    assert float(jac) == 12.0 and float(aux["sq"]) == 4.0
    assert float(_jacrev(lambda x: x ** 2)(3.0)) == float(jax.jacrev(lambda x: x ** 2)(3.0))
    jac = _jacrev(lambda x: x ** 2, unit_aware=True)(3.0 * u.mV)
    assert u.get_unit(jac) == u.mV and float(u.get_mantissa(jac)) == 6.0


def test_nan_check_reads_inexact_leaves_only():
    assert not bool(_check_nan_jit_compatible({"i": jnp.array([1, 2]), "b": jnp.array([True])}))
    assert bool(_check_nan_jit_compatible(jnp.array([complex(1.0, float("nan"))])))
    assert bool(jax.jit(_check_nan_jit_compatible)({"f": jnp.array([1.0, jnp.inf])}))


@pytest.mark.parametrize("args, kwargs, text", [((42,), {}, "value is 42"), ((), {"x": 9}, "x=9"),
                                                ((5,), {}, "brace 5"), ((), {}, "plain")])
def test_error_msg_formats_every_style(args, kwargs, text):
    msg = {"value is 42": "value is %d", "x=9": "x={x}", "brace 5": "brace {}",
           "plain": "plain"}[text]
    with pytest.raises(ValueError, match=text):
        _error_msg(msg, *args, **kwargs)
