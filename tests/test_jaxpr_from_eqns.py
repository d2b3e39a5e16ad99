"""``eqns_to_jaxpr`` / ``eqns_to_closed_jaxpr``: a piece of a jaxpr runs as that piece of the function."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brainx.transform import eqns_to_closed_jaxpr, eqns_to_jaxpr

run = jax.extend.core.jaxpr_as_fun


def _closed():
    return jax.make_jaxpr(lambda x, y: (jnp.sin(x) * y + 1.0, jnp.cos(y)))(1.0, 2.0)


def test_inputs_and_outputs_follow_from_the_equations():
    closed = _closed()
    sin, mul, add, cos = closed.eqns
    piece = eqns_to_closed_jaxpr([mul, add])          # (s * y) + 1 of s = sin x
    assert piece.jaxpr.invars == [sin.outvars[0], closed.jaxpr.invars[1]]
    assert piece.jaxpr.outvars == [add.outvars[0]]
    assert float(run(piece)(0.5, 4.0)[0]) == pytest.approx(3.0)
    whole = eqns_to_closed_jaxpr(closed.eqns)
    x, y = 0.3, 1.7
    np.testing.assert_allclose([float(v) for v in run(whole)(x, y)],
                               [np.sin(x) * y + 1.0, np.cos(y)], rtol=1e-6)


def test_given_binders_and_constants():
    closed = _closed()
    sin, mul, add, cos = closed.eqns
    x, y = closed.jaxpr.invars
    jaxpr = eqns_to_jaxpr([sin, mul], invars=[y], constvars=[x], outvars=[mul.outvars[0]])
    piece = jax.extend.core.ClosedJaxpr(jaxpr, [np.float32(0.5)])
    assert float(run(piece)(2.0)[0]) == pytest.approx(np.sin(0.5) * 2.0, rel=1e-6)
    with_consts = eqns_to_closed_jaxpr([sin, mul], invars=[y], constvars=[x],
                                       consts=[np.float32(0.5)])
    assert float(run(with_consts)(2.0)[0]) == pytest.approx(np.sin(0.5) * 2.0, rel=1e-6)
    with pytest.raises(ValueError, match="1 constvars"):
        eqns_to_closed_jaxpr([sin, mul], invars=[y], constvars=[x])
    with pytest.raises(TypeError, match="invars must be jaxpr variables"):
        eqns_to_jaxpr([sin], invars=[1.0])
