"""Property-based fuzzing: random stateful programs against an interpreter in plain JAX.

Hypothesis draws a small program: a list of operations on a fixed set of states
(arrays, a dict, a list, a dict with a string leaf, a nested dict, a batch of
lanes, and an ``nn.Module`` whose ``w`` attribute points to one of two
parameters). Operations read and write states, mutate containers in place, call
raw ``jax.jit`` / ``jax.checkpoint`` / ``lax.scan`` / ``lax.fori_loop`` /
``lax.cond`` / ``lax.while_loop`` helpers that read states, raise at trace
time, and nest brainx transforms (``jit``, ``checkpoint``, ``for_loop``,
``checkpointed_for_loop``, ``cond``, ``vmap`` with ``in_states``).

The program runs two ways:

* **brainx**: the operations act on ``State`` objects, blocks are brainx
  transforms, and the whole program is a ``transform.jit``, a
  ``transform.grad`` w.r.t. a ``ParamState``, or a jit of that grad, called
  a few times with changes in between (``P.value = ...``, a new dict in a
  state, ``module.w`` rebound to the other parameter);
* **reference**: the same operations on an explicit ``dict`` of values,
  blocks run as Python loops and ``jnp.where`` selections, raw helpers closed
  over the explicit values, gradients by ``jax.value_and_grad``.

After every call the outputs, gradients and every state must agree. A program
that raises inside a transform must leave every state as it was.

Every operation calls the same module-level raw helpers, so a program may call
one helper twice in a trace with the state it reads written in between
(``BRAINX_FUZZ_SHARED_HELPERS=0`` gives each operation its own; see
:func:`raw_helper_for_site`).

``BRAINX_FUZZ_KNOWN_BUGS=1`` also runs programs that hit a bug already pinned by
an xfail test (see :func:`known_bug`).

``BRAINX_FUZZ_EXAMPLES`` sets the number of programs (default 4, about 20 s on
two cores); ``make fuzz`` runs 10000. The default run is derandomised, so CI
sees the same programs every time; ``BRAINX_FUZZ_RANDOM=1`` explores new ones.
"""

import os
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from jax import lax

import brainx
from brainx import transform

EXAMPLES = int(os.environ.get("BRAINX_FUZZ_EXAMPLES", "4"))
RANDOM = bool(os.environ.get("BRAINX_FUZZ_RANDOM"))
SHARED_HELPERS = os.environ.get("BRAINX_FUZZ_SHARED_HELPERS", "1") != "0"
KNOWN_BUGS = bool(os.environ.get("BRAINX_FUZZ_KNOWN_BUGS"))  # also run programs of known_bug()

# -- the states of one program, and two views of them ------------------------------------------

LANES = 3
SOURCES = ["P", "Q", "X", "A", "D", "L", "S", "N", "M"]  # readable as a float32[2]
TARGETS = ["A", "D", "L", "S", "N", "P", "M"]  # writable (containers in place)
RAW_KINDS = ["jit", "checkpoint", "scan", "fori_loop", "cond", "while_loop"]


def initial_values(seed):
    r = np.random.RandomState(seed)

    def a(*shape):
        return jnp.asarray(r.uniform(-1, 1, shape), jnp.float32)

    return {"P": a(2), "Q": a(2), "X": a(2), "A": a(3), "D": {"a": a(2), "b": a(3)},
            "L": [a(2), a(2)], "S": {"tag": "neuron", "v": a(2)}, "N": {"o": {"i": a(2)}},
            "B": a(LANES, 2)}


class Holder(brainx.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w


# The current program's states: the raw helpers below read them from here, so the same
# module-level (JAX-cached) helpers meet new State objects in every program.
ENV = types.SimpleNamespace(states={}, module=None, boom=False)


class StateStore:
    """The brainx view: names are States (``M`` is ``ENV.module.w``)."""

    def state(self, name):
        return ENV.module.w if name == "M" else ENV.states[name]

    def get(self, name):
        return self.state(name).value

    def set(self, name, value):
        self.state(name).value = value


class DictStore:
    """The reference view: names are entries of an explicit dict (``M`` is ``target``)."""

    def __init__(self, env, target):
        self.env, self.target = env, target

    def get(self, name):
        return self.env[self.target if name == "M" else name]

    def set(self, name, value):
        self.env[self.target if name == "M" else name] = value


def vec(store, src):
    """A float32[2] read from state ``src``."""
    v = store.get(src)
    if src == "A":
        return v[:2]
    if src in ("D",):
        return v["a"]
    if src == "L":
        return v[0]
    if src == "S":
        return v["v"]
    if src == "N":
        return v["o"]["i"]
    return v


# -- raw helpers ---------------------------------------------------------------------------------

def make_helper(kind, read):
    """A raw JAX helper ``float32[2] -> float32[2]`` that calls ``read()`` inside its transform."""
    if kind == "jit":
        return jax.jit(lambda x: jnp.tanh(read() * x) + 0.5 * read())
    if kind == "checkpoint":
        return jax.checkpoint(lambda x: jnp.sin(read() * x + 0.3))
    if kind == "scan":
        def step(c, _):
            return jnp.tanh(c * read() + 0.2), c.sum()
        return lambda x: (lambda r: r[0] + 0.1 * r[1].mean())(lax.scan(step, x, None, length=2))
    if kind == "fori_loop":
        def body(i, c):
            return jnp.sin(c + read()) * 0.9
        return lambda x: lax.fori_loop(0, 2, body, x)
    if kind == "cond":
        def yes(c):
            return jnp.tanh(c * read())
        def no(c):
            return jnp.tanh(c - read())
        return lambda x: lax.cond(x.sum() > 0, yes, no, x)
    if kind == "while_loop":
        def body(c):
            return c[0] + 1, jnp.tanh(c[1] + read())
        return lambda x: lax.while_loop(lambda c: c[0] < 2, body, (0, x))[1]
    raise AssertionError(kind)


_STATES = StateStore()
RAW = {(k, s): make_helper(k, lambda s=s: vec(_STATES, s)) for k in RAW_KINDS for s in SOURCES}


class Boom(Exception):
    """Raised at trace time by a ``("boom",)`` operation while ``ENV.boom`` is set."""


# -- operations ------------------------------------------------------------------------------------

def leaf_op(store, op, helper):
    """Run one non-block operation on ``store``; ``helper(kind, src)`` gives a raw helper."""
    tag = op[0]
    if tag == "add":
        store.set("X", store.get("X") + 0.5 * jnp.tanh(vec(store, op[1])))
    elif tag == "nonlin":
        store.set("X", jnp.tanh(store.get("X") * vec(store, "P") + 0.1))
    elif tag == "raw":
        store.set("X", helper(op[1], op[2])(store.get("X")))
    elif tag == "append":
        store.get("L").append(store.get("X") * 0.5)
    elif tag == "boom":
        if ENV.boom:
            raise Boom("raised while tracing")
    elif tag == "write":
        x, dst = store.get("X"), op[1]
        if dst == "A":
            store.set("A", 0.9 * store.get("A") + jnp.sin(x).sum())
        elif dst == "D":
            d = store.get("D")
            d["b"] = jnp.cos(d["b"]) + x[0]
        elif dst == "L":
            lst = store.get("L")
            lst[1] = 0.5 * lst[1] + x
        elif dst == "S":
            s = store.get("S")
            s["v"] = jnp.tanh(s["v"] + x)
        elif dst == "N":
            n = store.get("N")
            n["o"]["i"] = n["o"]["i"] * 0.5 + x
        else:  # P or M: a parameter
            store.set(dst, store.get(dst) * 0.9 + 0.1 * jnp.tanh(x))
    else:
        raise AssertionError(op)


def vmap_lane(store, src, kind, helper):
    """One lane of a ``("vmap", kind, src)`` block: updates its row of ``B``."""
    b = jnp.tanh(store.get("B") * vec(store, src) + store.get("X"))
    if kind is not None:
        b = helper(kind, src)(b)
    store.set("B", b)
    return b.sum()


def build(ops):
    """The brainx program for ``ops``: a function of no arguments acting on the States.

    Nested transforms are made here, once, so they are reused by every call.
    """
    store = StateStore()
    steps = [build_op(op) for op in ops]

    def run():
        for step in steps:
            step()

    run.store = store
    return run


def build_op(op):
    store, tag = StateStore(), op[0]
    if tag == "jit":
        return transform.jit(build(op[1]))
    if tag == "ckpt":
        return transform.checkpoint(build(op[1]))
    if tag in ("for", "ckfor"):
        body, n = build(op[1]), op[2]
        loop = transform.for_loop if tag == "for" else transform.checkpointed_for_loop

        def step(t):
            store.set("X", store.get("X") + 0.1 * t)
            body()
            return store.get("X").sum()

        def run_loop():
            ys = loop(step, jnp.arange(n, dtype=jnp.float32))
            store.set("X", store.get("X") + 0.01 * ys.sum())

        return run_loop
    if tag == "cond":
        yes, no = build(op[1]), build(op[2])
        return lambda: transform.cond(store.get("X").sum() > 0, yes, no)
    if tag == "vmap":
        kind, src = op[1], op[2]
        helper = raw_helper_for_site()
        lanes = transform.vmap(lambda: vmap_lane(store, src, kind, helper),
                               in_states=ENV.states["B"])

        def run_vmap():
            store.set("X", store.get("X") + 0.1 * lanes().mean())

        return run_vmap
    helper = raw_helper_for_site()
    return lambda: leaf_op(store, op, helper)


def raw_helper_for_site():
    """The raw helpers one operation calls: ``helper(kind, src)``.

    With ``SHARED_HELPERS`` (the default) every operation calls the
    module-level ones, so a program may call the same helper twice in one
    trace with the state it reads written in between (this once gave the
    first value: see ``test_a_shared_helper_twice_in_one_trace``). Otherwise
    each operation gets its own helpers, built once per program and reused by
    every call of it (so JAX's caches are still hit across calls).
    """
    if SHARED_HELPERS:
        return lambda k, s: RAW[k, s]
    own = {}

    def helper(kind, src):
        if (kind, src) not in own:
            own[kind, src] = make_helper(kind, lambda: vec(_STATES, src))
        return own[kind, src]

    return helper


def interpret(ops, store):
    """Run ``ops`` on a :class:`DictStore` in plain JAX."""
    def helper(kind, src):
        return make_helper(kind, lambda: vec(store, src))

    for op in ops:
        tag = op[0]
        if tag in ("jit", "ckpt"):
            interpret(op[1], store)
        elif tag in ("for", "ckfor"):
            ys = []
            for t in range(op[2]):
                store.set("X", store.get("X") + 0.1 * t)
                interpret(op[1], store)
                ys.append(store.get("X").sum())
            store.set("X", store.get("X") + 0.01 * sum(ys))
        elif tag == "cond":
            pred = store.get("X").sum() > 0
            branches = []
            for sub in (op[1], op[2]):
                env = copy(store.env)
                interpret(sub, DictStore(env, store.target))
                branches.append(env)
            store.env.update(jax.tree.map(
                lambda a, b: a if isinstance(a, str) else jnp.where(pred, a, b), *branches))
        elif tag == "vmap":
            rows, outs = [], []
            for i in range(LANES):
                env = copy(store.env)
                env["B"] = store.env["B"][i]
                lane = DictStore(env, store.target)
                outs.append(vmap_lane(lane, op[2], op[1], lambda k, s: make_helper(
                    k, lambda: vec(lane, s))))
                rows.append(env["B"])
            store.set("B", jnp.stack(rows))
            store.set("X", store.get("X") + 0.1 * jnp.stack(outs).mean())
        else:
            leaf_op(store, op, helper)


def copy(env):
    """New containers, the same arrays."""
    return jax.tree.map(lambda x: x, env)


def result(store):
    return (jnp.sum(store.get("X") ** 2) + 0.1 * jnp.sum(store.get("P") ** 2)
            + 0.01 * jnp.sum(store.get("A")))


def known_bug(mode, ops):
    """Programs that hit a bug already pinned by an xfail test (skipped unless asked for).

    None at present. (The last one, ``grad`` through a ``checkpointed_for_loop``
    whose step touches a state with a string leaf, is fixed: ``StaticLeaves``
    keeps which leaves are arrays when JAX maps its own objects over them.)
    Add a predicate here, with the xfail test that pins the bug, when the fuzzer
    finds one that cannot be fixed at once.
    """
    return False


def has_boom(ops):
    return any(op[0] == "boom" or any(isinstance(part, list) and has_boom(part)
                                      for part in op[1:]) for op in ops)


# -- program generation ------------------------------------------------------------------------

def ops_strategy(mode, depth, straight):
    """Lists of operations; ``straight``: not inside a loop, a branch or a vmap (append allowed)."""
    raw_kinds = RAW_KINDS if mode == "jit" else [k for k in RAW_KINDS if k != "while_loop"]
    leaves = [
        st.tuples(st.just("add"), st.sampled_from(SOURCES)),
        st.tuples(st.just("write"), st.sampled_from(TARGETS)),
        st.just(("nonlin",)),
        st.tuples(st.just("raw"), st.sampled_from(raw_kinds), st.sampled_from(SOURCES)),
    ]
    if straight:
        leaves.append(st.just(("append",)))
    options = list(leaves)
    if depth > 0:
        inner, looped = ops_strategy(mode, depth - 1, straight), ops_strategy(mode, depth - 1, False)
        options += [
            st.tuples(st.just("jit"), inner),
            st.tuples(st.just("ckpt"), inner),
            st.tuples(st.sampled_from(["for", "ckfor"]), looped, st.integers(1, 3)),
            st.tuples(st.just("cond"), looped, looped),
            st.tuples(st.just("vmap"), st.sampled_from([None] + raw_kinds),
                      st.sampled_from(SOURCES)),
        ]
    return st.lists(st.one_of(options), min_size=1, max_size=4)


def op_lists(ops):
    """``ops`` and every list of operations nested in it."""
    yield ops
    for op in ops:
        for part in op[1:]:
            if isinstance(part, list):
                yield from op_lists(part)


CHANGES = ["none", "set_param", "swap_module", "new_dict"]


@st.composite
def programs(draw):
    mode = draw(st.sampled_from(["jit", "grad", "jit_grad"]))
    ops = draw(ops_strategy(mode, 2, True))
    if draw(st.booleans()):  # raise at trace time somewhere (in a branch, a loop, a vmap...)
        blocks = list(op_lists(ops))
        where = blocks[draw(st.integers(0, len(blocks) - 1))]
        where.insert(draw(st.integers(0, len(where))), ("boom",))
    changes = draw(st.lists(st.sampled_from(CHANGES), min_size=1, max_size=2))
    return mode, ops, ["none"] + changes, draw(st.integers(0, 2 ** 16))


# -- running and checking --------------------------------------------------------------------------

def make_program(mode, ops):
    body = build(ops)
    store = StateStore()

    def program():
        body()
        return result(store)

    if mode == "jit":
        return transform.jit(program)
    grad = transform.grad(program, grad_states=ENV.states["P"], return_value=True)
    return grad if mode == "grad" else transform.jit(grad)


def reference(mode, ops, env, target):
    """``(value, grad or None, new env)`` of one call, in plain JAX."""
    def run(p):
        e = copy(env)
        e["P"] = p
        store = DictStore(e, target)
        interpret(ops, store)
        return result(store), e

    if mode == "jit":
        value, new_env = run(env["P"])
        return value, None, new_env
    (value, new_env), g = jax.value_and_grad(run, has_aux=True)(env["P"])
    return value, g, new_env


def apply_change(change, env, target):
    """Change the states between calls (outside every transform) and the reference alike."""
    if change == "set_param":
        ENV.states["P"].value = ENV.states["P"].value * -0.5 + 0.25
        env["P"] = env["P"] * -0.5 + 0.25
    elif change == "new_dict":
        new = {"a": env["D"]["a"] + 1.0, "b": env["D"]["b"] * 0.5}
        ENV.states["D"].value = dict(new)
        env["D"] = new
    elif change == "swap_module":
        target = "Q" if target == "P" else "P"
        ENV.module.w = ENV.states[target]
    return target


def check_states(env, target, where):
    assert ENV.module.w is ENV.states[target]
    for name, state in ENV.states.items():
        check_close(state.value, env[name], f"{where}: state {name}")


def check_close(got, want, what):
    assert jax.tree.structure(got) == jax.tree.structure(want), (what, got, want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert not isinstance(a, jax.core.Tracer), (what, a)
        if isinstance(b, str):
            assert a == b, (what, a, b)
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5,
                                       err_msg=what)


def run_program(mode, ops, changes, seed):
    env = initial_values(seed)
    ENV.states = {name: (brainx.ParamState if name in "PQ" else brainx.State)(
        copy(value), name=name) for name, value in env.items()}
    ENV.module = Holder(ENV.states["P"])
    ENV.boom = False
    target = "P"
    program = make_program(mode, ops)
    if has_boom(ops):  # the first call raises while tracing: nothing may change
        ENV.boom = True
        with pytest.raises(Boom):
            program()
        ENV.boom = False
        check_states(env, target, "after an exception at trace time")
    for call, change in enumerate(changes):
        target = apply_change(change, env, target)
        got = program()
        value, grad, env = reference(mode, ops, env, target)
        where = f"call {call} ({change})"
        if mode == "jit":
            check_close(got, value, f"{where}: value")
        else:
            check_close(got[1], value, f"{where}: value")
            check_close(got[0], grad, f"{where}: gradient w.r.t. P")
        check_states(env, target, where)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
          print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_random_programs_match_plain_jax(program):
    assume(KNOWN_BUGS or not known_bug(program[0], program[1]))
    run_program(*program)


def test_a_shared_helper_twice_in_one_trace(monkeypatch):
    """Once a bug: the second call reused JAX's cached trace with the state's first value."""
    monkeypatch.setitem(globals(), "SHARED_HELPERS", True)
    run_program("jit", [("raw", "scan", "X"), ("raw", "scan", "X")], ["none"], 0)
