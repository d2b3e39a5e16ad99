"""Raw JAX helpers that read states, called under every brainx transform.

A *raw helper* is an ordinary ``jax.jit`` / ``jax.checkpoint`` / ``lax.scan`` /
``lax.fori_loop`` / ``lax.cond`` / ``lax.while_loop`` function, defined once at
module level, that reads ``W.value`` inside its own JAX transform. JAX caches
such a helper's trace by function identity; inside a brainx trace the state's
value is a tracer of that trace, so brainx must make JAX trace the helper again
there. A stale cached trace shows up as a constant where the state should be:
a wrong value after ``W.value = ...`` or a zero gradient.

Every case is compared with the same helper in plain JAX with the weight passed
explicitly (``pure(kind, w, x)``).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import brainx
from brainx import transform

W0 = jnp.array([1.0, 2.0])
W2 = jnp.array([-0.5, 1.5])
W = brainx.ParamState(W0, name="W")
X = jnp.array([0.3, -0.2])
XS = jnp.array([[0.3, -0.2], [0.1, 0.4], [-0.6, 0.2]])

KINDS = ["jit", "checkpoint", "scan", "fori_loop", "cond", "while_loop"]
DIFFERENTIABLE = [k for k in KINDS if k != "while_loop"]  # lax.while_loop: no reverse mode


def _helpers(read):
    """One helper per raw transform, each calling ``read()`` inside that transform.

    Bodies are built once per ``read``, so JAX's caches keyed on the function
    (``jax.jit``, ``lax.scan``'s body, ``lax.cond``'s branches) are hit on
    every later call: exactly the situation in which a stale trace would leak.
    """

    @jax.jit
    def jit_(x):
        return jnp.tanh(read() * x) + read()

    @jax.checkpoint
    def checkpoint_(x):
        return jnp.sin(read() * x) * read()

    def scan_step(c, _):
        return jnp.tanh(c * read()) + 0.5, c.sum()

    def scan_(x):
        c, ys = lax.scan(scan_step, x, None, length=3)
        return c + ys.mean()

    def fori_body(i, c):
        return jnp.sin(c) * read() + 0.1 * i

    def fori_(x):
        return lax.fori_loop(0, 3, fori_body, x)

    def if_true(c):
        return c * read()

    def if_false(c):
        return c - read()

    def cond_(x):
        return lax.cond(x.sum() > 0, if_true, if_false, x)

    def while_cond(c):
        return c[0] < 3

    def while_body(c):
        return c[0] + 1, c[1] * 0.5 + read()

    def while_(x):
        return lax.while_loop(while_cond, while_body, (0, x))[1]

    return {"jit": jit_, "checkpoint": checkpoint_, "scan": scan_, "fori_loop": fori_,
            "cond": cond_, "while_loop": while_}


RAW = _helpers(lambda: W.value)


@functools.partial(jax.jit, static_argnums=0)  # compiled once per kind and shape, for speed
def pure(kind, w, x):
    """The helper ``kind`` in plain JAX, with the weight ``w`` explicit."""
    return _helpers(lambda: w)[kind](x)


def close(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b), (a, b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert not isinstance(x, jax.core.Tracer)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def _reset_w():
    W.value = W0
    yield
    W.value = W0


def _loss(y):
    return jnp.sum(y ** 2)


# -- one brainx transform at a time ------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_jit_uses_each_new_value_of_the_state(kind):
    h = RAW[kind]
    f = transform.jit(lambda x: h(x))
    close(f(X), pure(kind, W0, X))
    W.value = W2
    close(f(X), pure(kind, W2, X))
    close(f(-X), pure(kind, W2, -X))
    W.value = W0
    close(f(X), pure(kind, W0, X))


@pytest.mark.parametrize("kind", KINDS)
def test_jit_helper_sees_a_write_made_earlier_in_the_same_trace(kind):
    h = RAW[kind]

    @transform.jit
    def f(x):
        W.value = W.value * 2.0
        return h(x)

    close(f(X), pure(kind, W0 * 2, X))
    close(W.value, W0 * 2)
    close(f(X), pure(kind, W0 * 4, X))
    close(W.value, W0 * 4)


def test_the_minimal_repro_grad_through_a_raw_jit():
    @jax.jit
    def project(x):
        return W.value @ x

    g = transform.grad(lambda x: project(x) ** 2, grad_states=W)(jnp.array([3.0, 4.0]))
    close(g, jnp.array([66.0, 88.0]))


@pytest.mark.parametrize("kind", DIFFERENTIABLE)
def test_grad(kind):
    h = RAW[kind]
    g, v = transform.grad(lambda x: _loss(h(x)), grad_states=W, return_value=True)(X)
    close(g, jax.grad(lambda w: _loss(pure(kind, w, X)))(W0))
    close(v, _loss(pure(kind, W0, X)))
    (gw, gx) = transform.grad(lambda x: _loss(h(x)), grad_states=W, argnums=0)(X)
    want_w, want_x = jax.grad(lambda w, x: _loss(pure(kind, w, x)), argnums=(0, 1))(W0, X)
    close((gw, gx), (want_w, want_x))
    close(W.value, W0)


@pytest.mark.parametrize("kind", DIFFERENTIABLE)
def test_vector_grad(kind):
    g = transform.vector_grad(RAW[kind], grad_states=W)(X)
    y, vjp = jax.vjp(lambda w: pure(kind, w, X), W0)
    close(g, vjp(jnp.ones_like(y))[0])


@pytest.mark.parametrize("kind", DIFFERENTIABLE)
def test_jacrev(kind):
    close(transform.jacrev(RAW[kind], grad_states=W)(X),
          jax.jacrev(lambda w: pure(kind, w, X))(W0))


@pytest.mark.parametrize("kind", KINDS)
def test_checkpoint(kind):
    h = RAW[kind]
    close(transform.checkpoint(h)(X), pure(kind, W0, X))
    W.value = W2
    close(transform.checkpoint(h)(X), pure(kind, W2, X))
    if kind in DIFFERENTIABLE:
        g = transform.grad(lambda x: _loss(transform.checkpoint(h)(x)), grad_states=W)(X)
        close(g, jax.grad(lambda w: _loss(pure(kind, w, X)))(W2))


@pytest.mark.parametrize("kind", KINDS)
def test_vmap_with_a_shared_and_with_a_batched_state(kind):
    h = RAW[kind]
    close(transform.vmap(h)(XS), jax.vmap(lambda x: pure(kind, W0, x))(XS))
    wb = jnp.stack([W0, W2, W0 + W2])
    W.value = wb
    got = transform.vmap(h, in_states=W)(XS)
    close(got, jax.vmap(lambda w, x: pure(kind, w, x))(wb, XS))
    close(W.value, wb)


def _loop_reference(kind, w, xs):
    """A state ``acc`` updated by the helper at each step, and its sum recorded."""
    acc, ys = jnp.zeros(2), []
    for x in xs:
        acc = pure(kind, w, acc + x)
        ys.append(acc.sum())
    return jnp.stack(ys), acc


@pytest.mark.parametrize("loop", ["for_loop", "checkpointed_for_loop"])
@pytest.mark.parametrize("kind", KINDS)
def test_for_loops(kind, loop):
    h = RAW[kind]
    acc = brainx.State(jnp.zeros(2), name="acc")
    run = getattr(transform, loop)

    def step(x):
        acc.value = h(acc.value + x)
        return acc.value.sum()

    ys = run(step, XS)
    want_ys, want_acc = _loop_reference(kind, W0, XS)
    close((ys, acc.value), (want_ys, want_acc))
    if loop == "checkpointed_for_loop" and kind in DIFFERENTIABLE:  # the gradient once per kind
        acc.value = jnp.zeros(2)
        g = transform.grad(lambda xs: run(step, xs).sum(), grad_states=W)(XS)
        close(g, jax.grad(lambda w: _loop_reference(kind, w, XS)[0].sum())(W0))
        close(acc.value, want_acc)


@pytest.mark.parametrize("kind", KINDS)
def test_scan(kind):
    h = RAW[kind]
    c, ys = transform.scan(lambda c, x: (h(c + x), c.sum()), jnp.zeros(2), XS)

    def ref(c, x):
        return pure(kind, W0, c + x), c.sum()

    close((c, ys), lax.scan(ref, jnp.zeros(2), XS))


@pytest.mark.parametrize("pred", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_cond(kind, pred):
    h = RAW[kind]
    out = transform.cond(jnp.array(pred), lambda x: h(x), lambda x: h(-x) * 2.0, X)
    close(out, pure(kind, W0, X) if pred else pure(kind, W0, -X) * 2.0)


@pytest.mark.parametrize("kind", KINDS)
def test_while_loop(kind):
    h = RAW[kind]
    n, v = transform.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, h(c[1]) * 0.5), (0, X))
    want = X
    for _ in range(3):
        want = pure(kind, W0, want) * 0.5
    assert int(n) == 3
    close(v, want)


# -- the same helper under several transforms, and after an eager call ------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_one_helper_under_several_transforms_in_a_row(kind):
    h = RAW[kind]
    jitted = transform.jit(lambda x: h(x))
    close(jitted(X), pure(kind, W0, X))
    W.value = W2
    close(transform.vmap(h)(XS), jax.vmap(lambda x: pure(kind, W2, x))(XS))
    if kind in DIFFERENTIABLE:
        close(transform.grad(lambda x: _loss(h(x)), grad_states=W)(X),
              jax.grad(lambda v: _loss(pure(kind, v, X)))(W2))
    close(transform.checkpoint(h)(X), pure(kind, W2, X))
    close(jitted(X), pure(kind, W2, X))
    W.value = W0
    close(transform.for_loop(h, XS), jax.vmap(lambda x: pure(kind, W0, x))(XS))
    close(jitted(X), pure(kind, W0, X))


# A second weight and helper set used only by the next test, so the eager call there is
# the first time JAX traces these helpers outside brainx.
V0 = jnp.array([0.7, -1.1])
V = brainx.ParamState(V0, name="V")
RAW_V = _helpers(lambda: V.value)


@pytest.mark.parametrize("kind", KINDS)
def test_helper_called_eagerly_first_then_inside_brainx(kind):
    h = RAW_V[kind]
    close(h(X), pure(kind, V0, X))  # JAX now holds a trace with V0 as a constant
    if kind in DIFFERENTIABLE:  # same value: a constant would give a zero gradient
        close(transform.grad(lambda x: _loss(h(x)), grad_states=V)(X),
              jax.grad(lambda v: _loss(pure(kind, v, X)))(V0))
    V.value = V0 * -2.0
    try:
        close(transform.jit(lambda x: h(x))(X), pure(kind, V0 * -2.0, X))
        close(transform.vmap(h)(XS), jax.vmap(lambda x: pure(kind, V0 * -2.0, x))(XS))
    finally:
        V.value = V0


# -- helpers that write states ------------------------------------------------------------------

H0 = jnp.array([5.0, 6.0])
H = brainx.HiddenState(H0, name="H")
C = brainx.State(jnp.zeros(2), name="C")


def _writers():
    """One raw helper per transform that writes ``H`` inside it (and returns an array)."""

    @jax.jit
    def jit_(x):
        H.value = H.value + x * W.value
        return x

    @jax.checkpoint
    def checkpoint_(x):
        H.value = x * W.value
        return x

    def scan_step(c, _):
        H.value = c
        return c * W.value, None

    def fori_body(i, c):
        H.value = c
        return c * W.value

    def if_true(c):
        H.value = c
        return c * W.value

    def while_body(c):
        H.value = c[1]
        return c[0] + 1, c[1] * W.value

    return {
        "jit": jit_,
        "checkpoint": checkpoint_,
        "scan": lambda x: lax.scan(scan_step, x, None, length=2)[0],
        "fori_loop": lambda x: lax.fori_loop(0, 2, fori_body, x),
        "cond": lambda x: lax.cond(x.sum() > 0, if_true, lambda c: c, x),
        "while_loop": lambda x: lax.while_loop(lambda c: c[0] < 2, while_body, (0, x))[1],
    }


WRITERS = _writers()
ENCLOSING = {
    "jit": lambda f: transform.jit(f)(X),
    "grad": lambda f: transform.grad(lambda x: jnp.sum(f(x)), grad_states=W)(X),
    "checkpoint": lambda f: transform.checkpoint(f)(X),
    "vmap": lambda f: transform.vmap(f)(XS),
    "for_loop": lambda f: transform.for_loop(f, XS),
    "cond": lambda f: transform.cond(True, f, lambda x: x, X),
}


@pytest.mark.parametrize("outer", list(ENCLOSING))
@pytest.mark.parametrize("kind", KINDS)
def test_a_helper_writing_a_state_is_a_tracer_leak_and_changes_nothing(kind, outer):
    H.value, C.value = H0, jnp.zeros(2)
    writer = WRITERS[kind]

    def f(x):
        C.value = C.value + 1.0  # a legitimate write before the leak: undone too
        return writer(x) * W.value

    with pytest.raises(brainx.TracerLeakError) as info:
        ENCLOSING[outer](f)
    message = str(info.value)
    assert "name='H'" in message and "raw JAX transform" in message, message
    for state, want in ((H, H0), (C, jnp.zeros(2)), (W, W0)):
        for leaf in jax.tree.leaves(state.value):
            assert not isinstance(leaf, jax.core.Tracer)
        close(state.value, want)


def test_using_the_dead_value_a_helper_left_behind_is_an_error_and_changes_nothing():
    H.value = H0

    @transform.jit
    def f(x):
        WRITERS["jit"](x)
        return H.value * 2  # the raw jit's tracer, dead now

    with pytest.raises(brainx.TracerLeakError, match="name='H'"):
        f(X)
    close(H.value, H0)


@pytest.mark.parametrize("outer", ["jit", "grad", "checkpoint", "for_loop"])
def test_a_scan_body_writing_a_state_then_writing_the_carry_back_works(outer):
    H.value = H0

    def threaded(x):
        def body(c, t):
            H.value = c  # the body's own tracer, overwritten after the scan
            H.value = jnp.tanh(H.value * W.value + t)
            return H.value, H.value.sum()

        final, ys = lax.scan(body, H.value, jnp.stack([x, 2 * x]))
        H.value = final
        return ys.sum() * jnp.ones(2)

    def ref(w, h, x):
        ys = []
        for t in (x, 2 * x):
            h = jnp.tanh(h * w + t)
            ys.append(h.sum())
        return sum(ys) * jnp.ones(2), h

    if outer == "jit":
        close(transform.jit(threaded)(X), ref(W0, H0, X)[0])
        close(H.value, ref(W0, H0, X)[1])
    elif outer == "grad":
        g = transform.grad(lambda x: jnp.sum(threaded(x)), grad_states=W)(X)
        close(g, jax.grad(lambda w: jnp.sum(ref(w, H0, X)[0]))(W0))
        close(H.value, ref(W0, H0, X)[1])
    elif outer == "checkpoint":
        close(transform.checkpoint(threaded)(X), ref(W0, H0, X)[0])
        close(H.value, ref(W0, H0, X)[1])
    else:
        ys = transform.for_loop(threaded, XS)
        h, want = H0, []
        for x in XS:
            y, h = ref(W0, h, x)
            want.append(y)
        close((ys, H.value), (jnp.stack(want), h))


@pytest.mark.parametrize("kind", KINDS)
def test_helper_called_twice_in_one_trace_with_a_write_in_between(kind):
    h = RAW[kind]

    @transform.jit
    def f(x):
        first = h(x)
        W.value = W.value * 2.0
        return first, h(x)  # the second call must see the doubled weight

    close(f(X), (pure(kind, W0, X), pure(kind, W0 * 2.0, X)))
