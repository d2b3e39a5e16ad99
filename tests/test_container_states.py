"""States holding containers (dicts, lists, nested dicts, string leaves) mutated in place.

``d.value["a"] = ...`` and ``lst.value.append(x)`` change the container a state
holds without assigning ``d.value``. Eagerly that is an ordinary mutation;
under a transform brainx reads a copy of the container, so the mutation must be
noticed as a write, threaded like an assignment and written back. Every case
runs the same function eagerly on a fresh state and compares the output and
the final value.

A mutation that changes the container's structure (a new list item, a new key,
a new string) cannot travel through a loop carry or a branch output: there it
is a ``StateTypeError`` naming the state, and nothing changes. An exception
inside a transform leaves every state, and the container objects themselves,
exactly as they were.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform

X = jnp.array([0.5, -1.0])
XS = jnp.array([[0.5, -1.0], [0.25, 2.0], [-0.75, 0.5]])
LANES = XS.shape[0]


def _initial(kind):
    """A new container for ``kind`` (fresh objects on every call)."""
    return {
        "dict": lambda: {"a": jnp.zeros(2), "b": jnp.ones(3)},
        "list_item": lambda: [jnp.zeros(2), jnp.ones(2)],
        "list_append": lambda: [jnp.ones(2)],
        "string_leaf": lambda: {"tag": "neuron", "v": jnp.zeros(2)},
        "string_change": lambda: {"tag": "neuron", "v": jnp.zeros(2)},
        "nested": lambda: {"o": {"i": jnp.zeros(2), "j": jnp.ones(1)}, "p": jnp.ones(2)},
        "new_key": lambda: {"o": {"i": jnp.zeros(2)}},
    }[kind]()


def _mutate(kind, s, x):
    """Change ``s.value`` in place (never assign it); return a float32 scalar."""
    v = s.value
    if kind == "dict":
        v["a"] = v["a"] * 0.5 + x
        return v["a"].sum() + v["b"].sum()
    if kind == "list_item":
        v[1] = v[1] * x + v[0]
        v[0] = v[0] + x
        return v[1].sum()
    if kind == "list_append":
        v.append(v[-1] * x)
        return v[-1].sum()
    if kind == "string_leaf":
        v["v"] = jnp.tanh(v["v"] + x)
        return v["v"].sum()
    if kind == "string_change":
        v["v"] = v["v"] + x
        v["tag"] = v["tag"] + "!"
        return v["v"].sum()
    if kind == "nested":
        v["o"]["i"] = v["o"]["i"] + x * v["p"]
        v["o"]["j"] = v["o"]["j"] * 2
        return v["o"]["i"].sum()
    if kind == "new_key":
        v["o"]["k"] = v["o"]["i"] + x
        return v["o"]["k"].sum()
    raise AssertionError(kind)


KINDS = ["dict", "list_item", "list_append", "string_leaf", "string_change", "nested", "new_key"]
CHANGES_STRUCTURE = {"list_append", "string_change", "new_key"}

# How each transform calls the step ``f``, and the same computation done eagerly.
ONE = {  # called once on X
    "jit": (lambda f: transform.jit(f)(X), lambda f: f(X)),
    "checkpoint": (lambda f: transform.checkpoint(f)(X), lambda f: f(X)),
    "grad": (lambda f: transform.grad(f, argnums=0, return_value=True)(X)[1], lambda f: f(X)),
    "vector_grad": (lambda f: transform.vector_grad(f, argnums=0, return_value=True)(X)[1],
                    lambda f: f(X)),
    "jacrev": (lambda f: transform.jacrev(f, argnums=0, return_value=True)(X)[1],
               lambda f: f(X)),
    "cond": (lambda f: transform.cond(True, f, lambda x: jnp.sum(x) * 0.0, X), lambda f: f(X)),
}
LOOPS = {  # a carry or a loop: the structure must be kept
    "for_loop": (lambda f: transform.for_loop(f, XS), lambda f: jnp.stack([f(x) for x in XS])),
    "checkpointed_for_loop": (lambda f: transform.checkpointed_for_loop(f, XS),
                              lambda f: jnp.stack([f(x) for x in XS])),
    "scan": (lambda f: transform.scan(lambda c, x: (c + f(x), c), jnp.float32(0), XS),
             lambda f: _eager_scan(f)),
    "while_loop": (lambda f: transform.while_loop(
        lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + f(X)), (0, jnp.float32(0)))[1],
        lambda f: f(X) + f(X)),
}
TRANSFORMS = {**ONE, **LOOPS}


def _eager_scan(f):
    c, ys = jnp.float32(0), []
    for x in XS:
        ys.append(c)
        c = c + f(x)
    return c, jnp.stack(ys)


def same(a, b):
    """Equal trees (strings compared exactly, arrays to float tolerance), no tracer in ``a``."""
    assert jax.tree.structure(a) == jax.tree.structure(b), (a, b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert not isinstance(x, jax.core.Tracer), a
        if isinstance(y, str):
            assert x == y
        else:
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6)


def _refused(kind, transform_name):
    return kind in CHANGES_STRUCTURE and (transform_name in LOOPS or transform_name == "cond")


@pytest.mark.parametrize("name", list(TRANSFORMS))
@pytest.mark.parametrize("kind", KINDS)
def test_in_place_mutation_is_a_write_equal_to_the_eager_result(kind, name):
    run, eager = TRANSFORMS[name]
    s = brainx.State(_initial(kind), name="box")
    original = s.value
    if _refused(kind, name):
        with pytest.raises(brainx.StateTypeError, match="name='box'"):
            run(lambda x: _mutate(kind, s, x))
        assert s.value is original
        same(s.value, _initial(kind))
        return
    out = run(lambda x: _mutate(kind, s, x))
    ref = brainx.State(_initial(kind))
    want = eager(lambda x: _mutate(kind, ref, x))
    same(out, want)
    same(s.value, ref.value)
    for leaf in jax.tree.leaves(original):  # the old container may be replaced, never poisoned
        assert not isinstance(leaf, jax.core.Tracer)


@pytest.mark.parametrize("kind", KINDS)
def test_in_place_mutation_is_recorded_as_a_write(kind):
    s = brainx.State(_initial(kind), name="box")
    sig = transform.StatefulFunction(lambda x: _mutate(kind, s, x)).signature((X,), {})
    assert sig.write_states == (s,)
    same(s.value, _initial(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_jit_threads_the_mutation_over_repeated_calls(kind):
    s = brainx.State(_initial(kind))
    ref = brainx.State(_initial(kind))
    f = transform.jit(lambda x: _mutate(kind, s, x))
    for x in XS:
        same(f(x), _mutate(kind, ref, x))
        same(s.value, ref.value)


def _lane(tree, i):
    return jax.tree.map(lambda a: a if isinstance(a, str) else a[i], tree)


def _stack(trees):
    return jax.tree.map(lambda *a: a[0] if isinstance(a[0], str) else jnp.stack(a), *trees)


@pytest.mark.parametrize("kind", KINDS)
def test_vmap_of_a_batched_container(kind):
    batched = _stack([_initial(kind)] * LANES)
    batched = jax.tree.map(lambda a: a if isinstance(a, str) else a * jnp.arange(
        1.0, LANES + 1).reshape((LANES,) + (1,) * (a.ndim - 1)), batched)
    s = brainx.State(batched, name="box")
    out = transform.vmap(lambda x: _mutate(kind, s, x), in_states=s)(XS)
    outs, finals = [], []
    for i in range(LANES):
        ref = brainx.State(_lane(batched, i))
        outs.append(_mutate(kind, ref, XS[i]))
        finals.append(ref.value)
    same(out, jnp.stack(outs))
    same(s.value, _stack(finals))


@pytest.mark.parametrize("kind", ["dict", "nested", "list_item"])
def test_vmap_refuses_a_per_lane_mutation_of_a_shared_container(kind):
    s = brainx.State(_initial(kind), name="box")
    original = s.value
    with pytest.raises(brainx.BatchAxisError, match="name='box'"):
        transform.vmap(lambda x: _mutate(kind, s, x))(XS)
    assert s.value is original
    same(s.value, _initial(kind))


@pytest.mark.parametrize("name", list(TRANSFORMS) + ["vmap"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_exception_leaves_states_and_containers_untouched(kind, name):
    s = brainx.State(_initial(kind), name="box")
    other = brainx.State({"n": jnp.zeros(())}, name="other")
    original, other_original = s.value, other.value
    leaves, inner = jax.tree.leaves(original), [c for c in jax.tree.leaves(
        original, is_leaf=lambda c: isinstance(c, (dict, list)) and c is not original)]
    copies = [(c, dict(c) if isinstance(c, dict) else list(c)) for c in inner
              if isinstance(c, (dict, list))]

    class Boom(Exception):
        pass

    def f(x):
        other.value["n"] = other.value["n"] + 1.0
        out = _mutate(kind, s, x)
        raise Boom("inside the transform")
        return out  # noqa

    with pytest.raises(Boom):
        if name == "vmap":
            transform.vmap(f)(XS)
        else:
            TRANSFORMS[name][0](f)
    assert s.value is original and other.value is other_original
    assert all(a is b for a, b in zip(jax.tree.leaves(s.value), leaves))
    assert len(jax.tree.leaves(s.value)) == len(leaves)
    for container, copy in copies:  # inner containers were not changed in place either
        assert container == copy
    same(s.value, _initial(kind))
    same(other.value, {"n": jnp.zeros(())})


# -- minimal repros of the bugs marked above ---------------------------------------------------

def test_jit_sees_a_changed_string_leaf():
    s = brainx.State({"tag": "a", "v": jnp.zeros(2)})
    f = transform.jit(lambda: jnp.float32(len(s.value["tag"])))
    assert float(f()) == 1.0
    s.value = {"tag": "abc", "v": jnp.zeros(2)}
    assert float(f()) == 3.0  # brainx: 1.0


def test_jit_appends_to_a_string_leaf_on_every_call():
    t = brainx.State({"tag": "a"})

    @transform.jit
    def g():
        t.value["tag"] = t.value["tag"] + "!"

    g()
    g()
    assert t.value == {"tag": "a!!"}  # brainx: {"tag": "a!"}


def test_vmap_in_states_with_a_string_leaf():
    b = brainx.State({"tag": "a", "v": jnp.zeros((3, 2))})
    out = transform.vmap(lambda x: b.value["v"].sum() + x, in_states=b)(jnp.ones(3))
    same(out, jnp.ones(3))


def test_loop_changing_a_string_leaf_names_the_types():
    s = brainx.State({"tag": "a", "v": jnp.zeros(2)}, name="box")
    with pytest.raises(brainx.StateTypeError, match="name='box'") as info:
        transform.for_loop(lambda x: _mutate("string_change", s, x), XS)
    assert "StaticLeaves" not in str(info.value), str(info.value)


def test_grad_through_checkpointed_for_loop_writing_a_state_with_a_string_leaf():
    s = brainx.State({"tag": "t", "v": jnp.zeros(2)}, name="box")
    p = brainx.ParamState(jnp.ones(2), name="p")

    def step(x):
        s.value["v"] = jnp.tanh(s.value["v"] + p.value * x)
        return s.value["v"].sum()

    want = transform.grad(lambda: transform.for_loop(step, XS[:, 0]).sum(), grad_states=p)()
    want_s = s.value
    s.value = {"tag": "t", "v": jnp.zeros(2)}
    got = transform.grad(lambda: transform.checkpointed_for_loop(step, XS[:, 0]).sum(),
                         grad_states=p)()
    same(got, want)
    same(s.value, want_s)
