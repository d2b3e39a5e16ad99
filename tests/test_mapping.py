"""vmap, vmap_new_states and map against jax.vmap / lax.map with explicit state passing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import transform as bt
from brainx.errors import BatchAxisError, StateTypeError
from brainx._jax.names import scan_num_consts_carry


def _bits(x):
    """A typed PRNG key (a RandomState's value) as its raw uint32 data; anything else as is."""
    if jax.numpy.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key):
        return jax.random.key_data(x)
    return x


def close(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(_bits(x), _bits(y), rtol=1e-5,
                                                         atol=1e-6), a, b)


def snapshot(*states):
    return [s.value for s in states]


def make():
    w = brainx.ParamState(jnp.array([[1.0, -1.0], [0.5, 2.0]]), name="w")
    h = brainx.HiddenState(jnp.arange(8.0).reshape(4, 2) / 10, name="h")
    return w, h


def pure_step(w, h, x):
    h = jnp.tanh(h @ w + x)
    return h.sum(), h


# --- vmap -----------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["state", "list", "dict", "axis_dict"])
def test_vmap_in_states_formats(spec):
    w, h = make()
    xs = jnp.linspace(-1, 1, 8).reshape(4, 2)
    want_out, want_h = jax.vmap(pure_step, in_axes=(None, 0, 0))(w.value, h.value, xs)
    in_states = {"state": h, "list": [h], "dict": {"h": h}, "axis_dict": {0: {"h": h}}}[spec]

    @bt.vmap(in_states=in_states)
    def step(x):
        h.value = jnp.tanh(h.value @ w.value + x)
        return h.value.sum()

    close(step(xs), want_out)
    close(h.value, want_h)


def test_vmap_state_on_axis_1_and_in_axes_out_axes():
    w, _ = make()
    hT = brainx.HiddenState(jnp.arange(8.0).reshape(2, 4) / 10, name="hT")  # lanes on axis 1
    xs = jnp.linspace(-1, 1, 8).reshape(2, 4)                               # lanes on axis 1
    scale = jnp.array(3.0)

    def pure(w, h, x, s):
        h = jnp.tanh(h @ w + x) * s
        return h, h
    want_out, want_h = jax.vmap(pure, in_axes=(None, 1, 1, None), out_axes=(1, 1))(
        w.value, hT.value, xs, scale)

    @bt.vmap(in_axes=(1, None), out_axes=1, in_states={1: [hT]})
    def step(x, s):
        hT.value = jnp.tanh(hT.value @ w.value + x) * s
        return hT.value

    close(step(xs, scale), want_out)
    close(hT.value, want_h)


def test_vmap_keyword_arguments_map_over_axis_0():
    w, h = make()
    xs = jnp.ones((4, 2))
    step = bt.vmap(lambda x: (w.value @ x).sum(), in_axes=0)
    close(step(x=xs), jax.vmap(lambda x: (w.value @ x).sum())(xs))


def test_vmap_out_states_become_batched():
    acc = brainx.State(jnp.zeros(2), name="acc")
    xs = jnp.arange(6.0).reshape(3, 2)

    @bt.vmap(out_states=acc)
    def f(x):
        acc.value = acc.value + x
        return x.sum()

    f(xs)
    close(acc.value, xs)


def test_vmap_undeclared_batched_write_is_an_error_and_changes_nothing():
    w, h = make()
    shared = brainx.State(jnp.zeros(2), name="shared")
    rng = brainx.random.RandomState(0)
    xs = jnp.ones((4, 2))

    @bt.vmap(in_states=h)
    def f(x):
        h.value = h.value + rng.normal(size=2)
        shared.value = shared.value + x * h.value
        return x

    before = snapshot(w, h, shared, rng)
    with pytest.raises(BatchAxisError, match="shared"):
        f(xs)
    close(snapshot(w, h, shared, rng), before)


def test_vmap_unbatched_write_to_shared_state_is_fine():
    count = brainx.State(jnp.zeros(()), name="count")
    f = bt.vmap(lambda x: (count.__setattr__("value", count.value + 1), x * 2)[1])
    close(f(jnp.arange(3.0)), jnp.arange(3.0) * 2)
    assert float(count.value) == 1.0


def test_vmap_axis_mismatch_errors():
    s = brainx.State(jnp.zeros((3, 2)), name="s")
    with pytest.raises(BatchAxisError, match="axis"):
        bt.vmap(lambda: s.value, in_states={0: [s]}, out_states={1: [s]})
    with pytest.raises(TypeError, match="States"):
        bt.vmap(lambda: 0, in_states=[jnp.zeros(2)])
    f = bt.vmap(lambda x: s.value.sum() + x, in_states=s)
    with pytest.raises(ValueError, match="different sizes"):
        f(jnp.ones(5))
    close(s.value, jnp.zeros((3, 2)))


def test_vmap_axis_name_collectives():
    h = brainx.HiddenState(jnp.arange(4.0), name="h")

    @bt.vmap(in_states=h, axis_name="i")
    def center(x):
        h.value = h.value - jax.lax.pmean(h.value, "i") + x
        return jax.lax.psum(x, "i")

    want = jax.vmap(lambda h, x: (h - jax.lax.pmean(h, "i") + x, jax.lax.psum(x, "i")),
                    axis_name="i")(jnp.arange(4.0), jnp.ones(4))
    close(center(jnp.ones(4)), want[1])
    close(h.value, want[0])


def test_vmap_under_jit_threads_states_across_calls():
    w, h = make()
    xs = jnp.linspace(-1, 1, 8).reshape(4, 2)
    step = bt.jit(bt.vmap(lambda x: (h.__setattr__("value", jnp.tanh(h.value @ w.value + x)),
                                     h.value.sum())[1], in_states=h))
    hv = h.value
    for _ in range(3):
        out = step(xs)
        want_out, hv = jax.vmap(pure_step, in_axes=(None, 0, 0))(w.value, hv, xs)
        close(out, want_out)
        close(h.value, hv)


def test_grad_through_vmap():
    w, h = make()
    h0, xs = h.value, jnp.linspace(-1, 1, 8).reshape(4, 2)

    @bt.vmap(in_states=h)
    def step(x):
        h.value = jnp.tanh(h.value @ w.value + x)
        return h.value.sum()

    g = bt.grad(lambda: jnp.sum(step(xs) ** 2), grad_states=w)()
    batched = jax.vmap(pure_step, in_axes=(None, 0, 0))
    close(g, jax.grad(lambda w_: jnp.sum(batched(w_, h0, xs)[0] ** 2))(w.value))
    close(h.value, batched(w.value, h0, xs)[1])


def test_nested_vmap():
    grid = brainx.State(jnp.arange(12.0).reshape(3, 4), name="grid")
    inner = bt.vmap(lambda y: (grid.__setattr__("value", grid.value * y), grid.value)[1],
                    in_states=grid)
    outer = bt.vmap(lambda ys: inner(ys), in_states=grid)
    ys = jnp.arange(12.0).reshape(3, 4)
    close(outer(ys), jnp.arange(12.0).reshape(3, 4) * ys)
    close(grid.value, jnp.arange(12.0).reshape(3, 4) * ys)


def test_vmap_needs_axis_size_for_random_without_batched_inputs():
    rng = brainx.random.RandomState(1)
    f = bt.vmap(lambda: rng.normal(), in_axes=())
    with pytest.raises(ValueError, match="axis_size"):
        f()
    assert bt.vmap(lambda: rng.normal(), axis_size=3)().shape == (3,)


# --- vmap_new_states ------------------------------------------------------------------------

def test_vmap_new_states_batches_created_states():
    rng = brainx.random.RandomState(7)
    key = rng.value

    class Layer:
        def __init__(self, x):
            self.w = brainx.ParamState(rng.normal(size=2) + x, name="w")
            self.n = brainx.State(jnp.zeros(()), name="n")

    layer = bt.vmap_new_states(Layer, axis_size=None)(jnp.arange(3.0))
    assert isinstance(layer, Layer)
    next_key, lanes = jax.random.split(key)
    lane_keys = jax.random.split(lanes, 3)
    want = jax.vmap(lambda k, x: jax.random.normal(jax.random.split(k)[1], (2,)) + x)(
        lane_keys, jnp.arange(3.0))
    close(layer.w.value, want)
    close(layer.n.value, jnp.zeros(3))
    close(rng.value, next_key)

    @bt.vmap(in_states=[layer.w, layer.n])
    def use(x):
        layer.n.value = layer.n.value + 1
        return layer.w.value @ x

    close(use(jnp.ones((3, 2))), want.sum(1))
    close(layer.n.value, jnp.ones(3))


def test_vmap_new_states_exclusion_and_outer_catchers():
    with brainx.catch_new_states() as catcher:
        def init():
            return (brainx.ParamState(brainx.random.rand(2), name="p"),
                    brainx.LongTermState(jnp.ones(2), name="const"))
        p, const = bt.vmap_new_states(init, axis_size=4,
                                      state_to_exclude=lambda s: s.name == "const")()
    assert p.value.shape == (4, 2) and const.value.shape == (2,)
    assert catcher.get_states() == (p, const)        # discovery's throwaway states are not seen
    bad = bt.vmap_new_states(lambda: brainx.State(brainx.random.rand(2), name="x"), axis_size=2,
                             state_to_exclude=brainx.State)
    before = brainx.random.get_key()
    with pytest.raises(BatchAxisError, match="excluded"):
        bad()
    close(brainx.random.get_key(), before)


def test_vmap_new_states_shares_nonbatch_states_and_checks_them():
    from brainx.state import NonBatchState
    from brainx.util.filter import OfType
    made = {}

    def init(x):
        made["shared"] = NonBatchState(jnp.array([1.0, 2.0]))
        made["tagged"] = brainx.ShortTermState(jnp.ones(()), tag="INIT_NO_BATCHING")
        made["per"] = brainx.ShortTermState(made["shared"].value.sum() + x * 10.0)
        return made["per"].value

    xs = jnp.arange(3.0)
    out = bt.vmap_new_states(init, axis_size=3)(xs)
    close(out, 3.0 + xs * 10.0)                       # eager: 1 + 2 + 10 x per lane
    close(made["per"].value, 3.0 + xs * 10.0)
    close(made["shared"].value, jnp.array([1.0, 2.0]))  # one value, no lane axis
    assert made["tagged"].value.shape == ()

    # a shared state whose value depends on the lane: ValueError naming it, RNG untouched
    brainx.random.seed(0)
    key = brainx.random.get_key()

    def bad():
        r = brainx.ShortTermState(brainx.random.randn(2))
        NonBatchState(r.value * 2.0, name="contradiction")

    with pytest.raises(ValueError, match="contradiction.*shared by all lanes"):
        bt.vmap_new_states(bad, axis_size=4)()
    close(brainx.random.get_key(), key)
    assert not isinstance(brainx.random.DEFAULT.value, jax.core.Tracer)

    # state_to_exclude takes brainstate's filters (OfType, tags, (path, state) predicates)
    for spec in (OfType(brainx.BatchState), "const", lambda path, s: s.name == "const"):
        def init2():
            return (brainx.ParamState(brainx.random.rand(2), name="p"),
                    brainx.BatchState(jnp.ones(2), name="const", tag="const"))
        p, const = bt.vmap_new_states(init2, axis_size=4, state_to_exclude=spec)()
        assert p.value.shape == (4, 2) and const.value.shape == (2,), spec


def test_vmap_axis_size_conflict_names_both_sizes_and_changes_nothing():
    s = brainx.ShortTermState(jnp.zeros(3), name="s")
    brainx.random.seed(1)
    key = brainx.random.get_key()

    def f(x):
        s.value = x + brainx.random.rand()
        return x

    for mapped in (bt.vmap(f, out_states=s, axis_size=5), bt.vmap2(f, axis_size=5),
                   bt.vmap_new_states(lambda x: brainx.State(x).value, axis_size=5)):
        with pytest.raises(ValueError, match="axis_size=5 conflicts with the mapped axis size 3"):
            mapped(jnp.arange(3.0))
    close(s.value, jnp.zeros(3))
    close(brainx.random.get_key(), key)
    out = bt.vmap(f, out_states=s, axis_size=3)(jnp.arange(3.0))   # agreeing sizes run
    close(out, jnp.arange(3.0))


def test_decorator_forms_are_partials():
    import functools
    for deco in (bt.vmap(in_axes=0), bt.vmap2(in_axes=0), bt.vmap_new_states(axis_size=2),
                 bt.pmap2(in_axes=0)):
        assert isinstance(deco, functools.partial)
    close(bt.vmap(in_axes=0)(lambda x: x * 2)(jnp.arange(3.0)), jnp.arange(3.0) * 2)
    close(bt.vmap2(in_axes=0)(lambda x: x * 2)(jnp.arange(3.0)), jnp.arange(3.0) * 2)
    # pmap2's unsupported options are refused when the decorator is applied
    deco = bt.pmap2(static_broadcasted_argnums=(0,))
    with pytest.raises(NotImplementedError, match="static_broadcasted_argnums"):
        deco(lambda x: x)


# --- map ------------------------------------------------------------------------------

def test_map_sequential_threads_written_states():
    total = brainx.State(jnp.zeros(()), name="total")
    w = brainx.ParamState(jnp.array(2.0), name="w")
    xs = jnp.arange(5.0)

    def f(x):
        total.value = total.value + w.value * x
        return total.value

    def pure(c, x):
        c = c + 2.0 * x
        return c, c
    want_total, want = jax.lax.scan(pure, jnp.zeros(()), xs)
    close(bt.map(f, xs), want)
    close(total.value, want_total)
    # read-only w is a loop constant: only the written state is carried
    jaxpr, _ = bt.make_jaxpr(lambda: bt.map(f, xs))()
    scans = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(scans) == 1 and scan_num_consts_carry(scans[0].params)[1] == 1


@pytest.mark.parametrize("batch_size", [2, 3, 6, 7])
def test_map_batch_size_matches_lax_map(batch_size):
    w = brainx.ParamState(jnp.array([1.0, -2.0]), name="w")
    xs = jnp.arange(12.0).reshape(6, 2)
    out = bt.map(lambda x: jnp.sin(w.value * x), xs, batch_size=batch_size)
    close(out, jax.lax.map(lambda x: jnp.sin(jnp.array([1.0, -2.0]) * x), xs,
                           batch_size=batch_size))


def test_map_with_several_inputs_under_grad_and_jit():
    w = brainx.ParamState(jnp.array(0.5), name="w")
    xs, ys = jnp.arange(4.0), jnp.ones(4)
    loss = bt.jit(bt.grad(lambda: jnp.sum(bt.map(lambda x, y: jnp.sin(w.value * x) * y, xs, ys)),
                          grad_states=w))
    close(loss(), jax.grad(lambda w_: jnp.sum(jnp.sin(w_ * xs) * ys))(0.5))


def test_map_errors_leave_states_unchanged():
    s = brainx.State(jnp.zeros(2), name="grows")
    xs = jnp.arange(3.0)
    with pytest.raises(StateTypeError, match="grows"):
        bt.map(lambda x: s.__setattr__("value", jnp.zeros(3)), xs)
    close(s.value, jnp.zeros(2))
    with pytest.raises(ValueError, match="leading axis"):
        bt.map(lambda x, y: x, jnp.ones(3), jnp.ones(4))
    with pytest.raises(ValueError, match="batch_size"):
        bt.map(lambda x: x, xs, batch_size=0)


def test_map_batch_size_refuses_per_slice_writes_to_a_state():
    acc = brainx.ShortTermState(jnp.zeros(()), name="acc")

    def f(x):
        acc.value = acc.value + x
        return x * 2

    with pytest.raises(BatchAxisError, match=r"batch_size=3.*acc.*batch_size=None"):
        bt.map(f, jnp.arange(6.0), batch_size=3)
    close(acc.value, 0.0)
    close(bt.map(f, jnp.arange(6.0)), jnp.arange(6.0) * 2)   # sequential: accumulates
    close(acc.value, 15.0)
