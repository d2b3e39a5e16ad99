"""Property test: no brainx trace is replayed for a tree of another structure.

Hypothesis draws a pytree (dicts with keys from a small alphabet, tuples,
lists, ``None``, float32 arrays of a few shapes, brainunit Quantities, and a
registered dataclass with a static field) and derives a second one with the
same leaves (shapes and dtypes) but, usually, another structure: a dict key
renamed, a tuple made a list, a static field flipped, a unit changed, an
array wrapped in a Quantity, a dataclass or a 1-tuple, ``None`` made an empty
container, two children swapped (or no change at all). Such a pair is what a
trace's key has to tell apart (see ``tests/test_trace_keys.py`` for a
hand-written case of each).

The function under test weighs every leaf by a hash of its path (node types
and dict keys), reads each Quantity in a fixed unit of its dimension and
branches on the dataclass's static field, so a trace replayed for the other
structure computes other numbers. It returns a scalar and a transformed copy
of its argument, and writes a copy of a tree-valued state, so output and
written trees (keys, node types, units, static fields) are checked too.

Each brainx transform (``jit``, eager ``for_loop``/``scan``/``cond``,
``vmap``, ``grad``, ``checkpoint``, a ``jit`` of an eager-style loop of a
``jit``, a shared ``@transform.jit`` method of two ``nn.Module`` instances
whose states or plain tree attributes differ) is called on three calls mixing
the two structures for the argument and for the state (A A, then B B, A A or
other mixes) and compared, after every call, with the plain JAX equivalent on
explicit state values (``jax.jit``, ``jax.lax.scan``, ``jax.lax.cond``,
``jax.vmap``, ``jax.grad``; eagerly where ``jax.jit`` takes no strings). The
brainx functions are module-level, so their caches also see the structures of
every earlier example.

``BRAINX_TRACE_KEYS_EXAMPLES`` sets the number of examples per test (default
5: about 30 s of CPU, each new structure compiles twice); the default run is
derandomised, ``BRAINX_FUZZ_RANDOM=1`` explores new ones (then
``--hypothesis-seed`` applies).
"""

import dataclasses
import os
import zlib

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import brainx
from brainx import nn, transform

EXAMPLES = int(os.environ.get("BRAINX_TRACE_KEYS_EXAMPLES", "5"))
RANDOM = bool(os.environ.get("BRAINX_FUZZ_RANDOM"))

SHAPES = [(), (2,), (3,)]
KEYS = "abcd"
UNITS = [u.mV, u.volt, u.ms, u.second, u.nA, u.uA]
REFERENCE_UNITS = [u.mV, u.ms, u.nA]  # a Quantity is read in the one of its dimension
FLAGS = [True, False, "tanh", "sin"]  # the dataclass's static field
WORDS = ["tanh", "sin", "relu"]  # string leaves (in states only: baked into a trace)
T = 2  # steps of the loops, lanes of vmap

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                    print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Cfg:
    w: jax.Array
    flag: object = dataclasses.field(metadata=dict(static=True))


# -- specs: a tree as plain data, and its twins with the same leaves ---------------------------
#
# ("x", shape)             a float32 array
# ("none",)                None
# ("q", unit index, shape) a Quantity
# ("c", flag, shape)       Cfg(w=array, flag=flag)
# ("t", specs) ("l", specs) a tuple, a list
# ("d", ((key, spec), ...)) a dict
# ("s", word)              a string (only where strings=True)

def base_specs(strings):
    shapes = st.sampled_from(SHAPES)
    bases = [st.tuples(st.just("x"), shapes),
             st.just(("none",)),
             st.tuples(st.just("q"), st.integers(0, len(UNITS) - 1), shapes),
             st.tuples(st.just("c"), st.sampled_from(FLAGS), shapes)]
    if strings:
        bases.append(st.tuples(st.just("s"), st.sampled_from(WORDS)))
    return st.one_of(bases)


def extend(children):
    seqs = st.tuples(st.sampled_from("tl"), st.lists(children, max_size=3).map(tuple))
    dicts = st.lists(st.tuples(st.sampled_from(KEYS), children), max_size=3,
                     unique_by=lambda kv: kv[0]).map(lambda kvs: ("d", tuple(kvs)))
    return st.one_of(seqs, dicts)


SPECS = {strings: st.recursive(base_specs(strings), extend, max_leaves=6)
         for strings in (False, True)}


def local_twins(spec):
    """Specs that differ from ``spec`` at its root only, with the same leaves."""
    kind = spec[0]
    if kind == "x":
        shape = spec[1]
        yield ("q", 0, shape)
        yield ("c", True, shape)
        yield ("t", (spec,))
        yield ("l", (spec,))
    elif kind == "none":
        yield from (("t", ()), ("l", ()), ("d", ()))
    elif kind == "s":
        yield from (("s", w) for w in WORDS if w != spec[1])
    elif kind == "q":
        yield from (("q", i, spec[2]) for i in range(len(UNITS)) if i != spec[1])
        yield ("x", spec[2])
    elif kind == "c":
        yield from (("c", f, spec[2]) for f in FLAGS if f != spec[1])
        yield ("x", spec[2])
    elif kind in ("t", "l"):
        items = spec[1]
        yield ("l" if kind == "t" else "t", items)
        if not items:
            yield ("none",)
        if len(items) == 1:
            yield items[0]
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                if items[i] != items[j]:
                    swapped = list(items)
                    swapped[i], swapped[j] = items[j], items[i]
                    yield (kind, tuple(swapped))
    elif kind == "d":
        items = spec[1]
        if not items:
            yield ("none",)
        keys = [k for k, _ in items]
        for i, (k, v) in enumerate(items):
            for new in KEYS:
                if new not in keys:
                    yield ("d", items[:i] + ((new, v),) + items[i + 1:])
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                if items[i][1] != items[j][1]:
                    swapped = list(items)
                    swapped[i] = (items[i][0], items[j][1])
                    swapped[j] = (items[j][0], items[i][1])
                    yield ("d", tuple(swapped))


def twins(spec):
    """Every spec that differs from ``spec`` in one place, with the same leaves."""
    out = list(local_twins(spec))
    if spec[0] in ("t", "l"):
        items = spec[1]
        for i, child in enumerate(items):
            out += [(spec[0], items[:i] + (m,) + items[i + 1:]) for m in twins(child)]
    elif spec[0] == "d":
        items = spec[1]
        for i, (k, child) in enumerate(items):
            out += [("d", items[:i] + ((k, m),) + items[i + 1:]) for m in twins(child)]
    return out


def leaf_types(spec):
    if spec[0] == "x":
        return [spec[1]]
    if spec[0] in ("q", "c"):
        return [spec[2]]
    if spec[0] in ("t", "l"):
        return [s for c in spec[1] for s in leaf_types(c)]
    if spec[0] == "d":
        return [s for _, c in spec[1] for s in leaf_types(c)]
    return []


@st.composite
def pairs(draw, strings=False):
    """``(a, b)``: two specs with the same leaves; ``b`` is ``a`` changed in 0, 1 or 2 places."""
    a = draw(SPECS[strings])
    b = a
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 2]))):
        options = twins(b)
        if options:
            b = draw(st.sampled_from(options))
    assert sorted(leaf_types(a)) == sorted(leaf_types(b))
    return a, b


# which of the two structures each call uses: (the argument's, the state's); A, A first
orders = st.sampled_from([((0, 0), (1, 1), (0, 0)), ((0, 0), (1, 0), (1, 1)),
                          ((0, 0), (0, 1), (1, 0))])


def build(spec, batch=(), counter=None):
    """A fresh value for ``spec`` (arrays with a leading ``batch`` shape)."""
    counter = [0] if counter is None else counter
    kind = spec[0]

    def array(shape):
        counter[0] += 1
        r = np.random.RandomState(counter[0])
        return jnp.asarray(r.uniform(0.5, 1.5, batch + shape), jnp.float32)

    if kind == "x":
        return array(spec[1])
    if kind == "none":
        return None
    if kind == "s":
        return spec[1]
    if kind == "q":
        return array(spec[2]) * UNITS[spec[1]]
    if kind == "c":
        return Cfg(array(spec[2]), spec[1])
    if kind == "t":
        return tuple(build(s, batch, counter) for s in spec[1])
    if kind == "l":
        return [build(s, batch, counter) for s in spec[1]]
    return {k: build(s, batch, counter) for k, s in spec[1]}


# -- the function: sensitive to every part of the structure ------------------------------------

def weight(path: str) -> float:
    return (zlib.crc32(path.encode()) % 1000) / 1000 + 0.5


BRANCHES = {True: lambda w: 0.5 * w, False: lambda w: -w, "tanh": jnp.tanh, "sin": jnp.sin}


def weigh(tree, path):
    """``(scalar, copy)``: a weighted sum of the leaves, and a copy of ``tree`` with new leaves.

    A leaf's weight is a hash of its path, which names every node type and dict
    key on the way; a Quantity is read in the reference unit of its dimension,
    a ``Cfg`` goes through the branch its static flag picks.
    """
    w = weight(path)
    if tree is None:
        return jnp.float32(w), None
    if isinstance(tree, str):
        return jnp.float32(weight(path + tree)), tree
    if isinstance(tree, u.Quantity):
        ref = next(r for r in REFERENCE_UNITS if r.dim == tree.unit.dim)
        return w * jnp.sum(tree.to_decimal(ref)), tree * w
    if isinstance(tree, Cfg):
        y = BRANCHES[tree.flag](tree.w)
        return w * jnp.sum(y), Cfg(y + w, tree.flag)
    if isinstance(tree, (tuple, list, dict)):
        total, copies = jnp.float32(w), []
        if isinstance(tree, dict):
            items = [(f"{{{k}}}", v) for k, v in tree.items()]
        else:
            tag = "t" if isinstance(tree, tuple) else "l"
            items = [(f"{tag}{i}", v) for i, v in enumerate(tree)]
        for name, child in items:
            s, c = weigh(child, path + name)
            total, copies = total + s, copies + [c]
        if isinstance(tree, dict):
            return total, dict(zip(tree, copies))
        return total, type(tree)(copies)
    return w * jnp.sum(tree), tree * w + weight(path + "+")


def core(x, s, c):
    """``(out, new_s, new_c)`` of one step on explicit values."""
    a, x_copy = weigh(x, "x")
    b, s_copy = weigh(s, "s")
    return (a - b, x_copy), s_copy, c + a * b


def assert_same(got, want):
    """The same tree (keys, node types, units, static fields) with close leaves."""
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    assert got_tree == want_tree, f"{got_tree} != {want_tree}"
    for g, w in zip(got_leaves, want_leaves):
        if isinstance(w, str):
            assert g == w, (g, w)
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), ((g.shape, g.dtype), (w.shape, w.dtype))
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


# -- the brainx side: module-level states and functions, so caches persist across examples -----

S = brainx.State(jnp.zeros((), jnp.float32))  # holds a drawn tree
C = brainx.State(jnp.zeros((), jnp.float32))
C0 = jnp.float32(1.0)


def step(x):
    out, S.value, C.value = core(x, S.value, C.value)
    return out


def pure_step(vals, x):
    out, s, c = core(x, *vals)
    return out, (s, c)


def set_states(spec, batch=()):
    """Puts a fresh value for ``spec`` in ``S`` (and ``C0`` in ``C``); returns a copy of both.

    ``S`` holds it in a 1-tuple, and holds ``()`` in between: a State refuses a Quantity leaf
    written with a value of another dimension or none, but not a value of another tree.
    """
    spec = ("t", (spec,))
    S.value = ()
    S.value, C.value = build(spec, batch), C0
    return build(spec, batch), C0


def check_states(want_vals):
    assert_same(S.value, want_vals[0])
    assert_same(C.value, want_vals[1])


jit_step = transform.jit(step)
ref_jit_step = jax.jit(pure_step)


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders,
       by_name=st.lists(st.booleans(), min_size=3, max_size=3))
def test_jit(args, states, order, by_name):
    for (ai, si), kw in zip(order, by_name):  # x by name or by position: another argument tree
        x = build(args[ai])
        vals = set_states(states[si])
        want, want_vals = ref_jit_step(vals, x)
        assert_same(jit_step(x=x) if kw else jit_step(x), want)
        check_states(want_vals)


def loop_body(x):
    out, S.value, C.value = core(x, S.value, C.value)
    return out


def ref_loop_step(vals, x):
    out, vals = pure_step(vals, x)
    return vals, out


def ref_loop(vals, xs):
    vals, outs = jax.lax.scan(ref_loop_step, vals, xs, length=T)
    return outs, vals


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders)
def test_eager_for_loop(args, states, order):
    for ai, si in order:
        xs = build(args[ai], (T,))
        vals = set_states(states[si])
        want, want_vals = ref_loop(vals, xs)
        assert_same(transform.for_loop(loop_body, xs, length=T), want)
        check_states(want_vals)


@SETTINGS
@given(args=pairs(), states=pairs(strings=True), words=st.tuples(*[st.sampled_from(WORDS)] * 2),
       order=orders)
def test_jit_with_string_leaves_in_the_state(args, states, words, order):
    for ai, si in order:
        x = build(args[ai])
        vals = set_states(("t", (states[si], ("s", words[si]))))
        want, want_vals = pure_step(vals, x)  # eagerly: jax.jit takes no string
        assert_same(jit_step(x), want)  # the same entry saw states without strings
        check_states(want_vals)


@transform.jit
def jitted_loop_of_jitted_step(xs):
    return transform.for_loop(jit_step, xs, length=T)


ref_jitted_loop = jax.jit(ref_loop)


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders)
def test_jit_of_a_loop_of_a_jitted_step(args, states, order):
    for ai, si in order:
        xs = build(args[ai], (T,))
        vals = set_states(states[si])
        want, want_vals = ref_jitted_loop(vals, xs)
        assert_same(jitted_loop_of_jitted_step(xs), want)
        check_states(want_vals)


def scan_body(carry, x):
    a, carry = weigh(carry, "carry")
    out, S.value, C.value = core(x, S.value, C.value + a)
    return carry, out


def ref_scan_body(carry_vals, x):
    carry, (s, c) = carry_vals
    a, carry = weigh(carry, "carry")
    out, s, c = core(x, s, c + a)
    return (carry, (s, c)), out


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders)
def test_eager_scan(args, states, order):
    for ai, si in order:
        init, xs = build(args[ai]), build(args[ai], (T,))
        vals = set_states(states[si])
        (want_carry, want_vals), want_ys = jax.lax.scan(ref_scan_body, (init, vals), xs, length=T)
        carry, ys = transform.scan(scan_body, init, xs, length=T)
        assert_same(carry, want_carry)
        assert_same(ys, want_ys)
        check_states(want_vals)


def true_branch(x):
    out, S.value, C.value = core(x, S.value, C.value)
    return out


def false_branch(x):
    (a, x_copy), S.value, C.value = core(x, S.value, -C.value)
    return 2 * a, jax.tree.map(lambda v: v - 1, x_copy)


def ref_false(vals, x):
    (a, x_copy), (s, c) = pure_step((vals[0], -vals[1]), x)
    return (2 * a, jax.tree.map(lambda v: v - 1, x_copy)), (s, c)


ref_cond = jax.jit(lambda pred, vals, x: jax.lax.cond(pred, pure_step, ref_false, vals, x))


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders,
       preds=st.lists(st.booleans(), min_size=3, max_size=3))
def test_eager_cond(args, states, order, preds):
    for (ai, si), pred in zip(order, preds):
        x = build(args[ai])
        vals = set_states(states[si])
        want, want_vals = ref_cond(pred, vals, x)
        assert_same(transform.cond(pred, true_branch, false_branch, x), want)
        check_states(want_vals)


def lane_step(x):
    (a, x_copy), S.value, _ = core(x, S.value, C.value)  # C is shared: read, not written
    return a * C.value, x_copy


def ref_lane_step(s, c, x):
    (a, x_copy), s, _ = core(x, s, c)
    return (a * c, x_copy), s


vmapped_step = transform.vmap(lane_step, in_states=S, axis_size=T)
ref_vmapped_step = jax.vmap(ref_lane_step, in_axes=(0, None, 0), axis_size=T)


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders)
def test_vmap_with_a_batched_state(args, states, order):
    for ai, si in order:
        xs = build(args[ai], (T,))
        s, c = set_states(states[si], (T,))
        want, want_s = ref_vmapped_step(s, c, xs)
        assert_same(vmapped_step(xs), want)
        check_states((want_s, c))


W = brainx.State(jnp.zeros((), jnp.float32))  # only written by the loss


def loss(x):
    (a, _), W.value, C.value = core(x, S.value, C.value)
    return a * a


def ref_loss(s, x, c):
    (a, _), w, c = core(x, s, c)
    return a * a, (w, c)


grad_loss = transform.grad(loss, grad_states=S, argnums=0, return_value=True)
ref_grad_loss = jax.jit(jax.value_and_grad(ref_loss, argnums=(0, 1), has_aux=True))


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders)
def test_grad_of_states_and_arguments(args, states, order):
    for ai, si in order:
        x = build(args[ai])
        s, c = set_states(states[si])
        W.value = jnp.zeros((), jnp.float32)
        (want_value, (want_w, want_c)), want_grads = ref_grad_loss(s, x, c)
        grads, value = grad_loss(x)
        assert_same(grads, want_grads)
        assert_same(value, want_value)
        assert_same(W.value, want_w)
        assert_same(C.value, want_c)
        assert_same(S.value, s)


checkpointed_step = transform.checkpoint(step)


@SETTINGS
@given(args=pairs(), states=pairs(), order=orders)
def test_checkpoint(args, states, order):
    for ai, si in order:
        x = build(args[ai])
        vals = set_states(states[si])
        want, want_vals = pure_step(vals, x)
        assert_same(checkpointed_step(x), want)
        check_states(want_vals)


class Net(nn.Module):
    def __init__(self, value):
        super().__init__()
        self.s = brainx.State(value)
        self.c = brainx.State(C0)

    @transform.jit
    def __call__(self, x):
        out, self.s.value, self.c.value = core(x, self.s.value, self.c.value)
        return out


@SETTINGS
@given(args=pairs(), states=pairs(), second=st.booleans())
def test_shared_jit_method_of_two_instances(args, states, second):
    nets = [Net(build(states[0])), Net(build(states[1]))]
    vals = [(build(states[0]), C0), (build(states[1]), C0)]
    calls = [0, 1, 0, 1] if second else [0, 1, 1, 0]
    for i in calls:
        x = build(args[i])
        want, vals[i] = ref_jit_step(vals[i], x)
        assert_same(nets[i](x), want)
        assert_same(nets[i].s.value, vals[i][0])
        assert_same(nets[i].c.value, vals[i][1])


class Holder(nn.Module):
    """A plain tree attribute (no State): part of what two instances must agree on to share."""

    def __init__(self, const, value):
        super().__init__()
        self.const = const
        self.s = brainx.State(value)
        self.c = brainx.State(C0)

    @transform.jit
    def __call__(self, x):
        (a, x_copy), self.s.value, self.c.value = core(x, self.s.value, self.c.value)
        k, k_copy = weigh(self.const, "k")
        return a * k, x_copy, k_copy


@jax.jit
def ref_holder_step(const, vals, x):
    (a, x_copy), vals = pure_step(vals, x)
    k, k_copy = weigh(const, "k")
    return (a * k, x_copy, k_copy), vals


@SETTINGS
@given(consts=pairs(), states=pairs(), x=SPECS[False], second=st.booleans())
def test_shared_jit_method_reading_a_plain_tree_attribute(consts, states, x, second):
    holders = [Holder(build(consts[i]), build(states[i])) for i in (0, 1)]
    vals = [(build(states[i]), C0) for i in (0, 1)]
    x = build(x)
    for i in [0, 1, 0, 1] if second else [0, 1, 1, 0]:
        want, vals[i] = ref_holder_step(build(consts[i]), vals[i], x)
        assert_same(holders[i](x), want)
        assert_same(holders[i].s.value, vals[i][0])
        assert_same(holders[i].c.value, vals[i][1])
