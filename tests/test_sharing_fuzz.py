"""Property test: two instances of a random attribute graph share a trace only when sound.

Hypothesis builds random graphs of allowed and disallowed attribute types
(floats with signed zeros and NaNs, containers and their subclasses,
partials, arrays, states with metadata), makes two instances that differ in
one place (or nowhere), and checks each jitted call against the same method
run eagerly.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brainx
from brainx import transform
from sharing_support import close, eager, scale, shift

# -- 12. property: random attribute graphs ------------------------------------------------------
#
# A *spec* describes an attribute graph as plain data; ``build`` makes fresh objects from it
# (so every instance, jitted or eager, gets its own states). ``fold`` reads every place of the
# graph and turns it into numbers, writing every ParamState it meets.

class XFloat(float):
    pass


class XDict(dict):
    pass


FNS = {"scale": scale, "shift": shift}
TYPE_CODE = {"list": 1.0, "tuple": 2.0, "dict": 3.0, "xdict": 4.0}


def build(spec):
    kind = spec[0]
    if kind in ("float", "int", "bool", "str"):
        return spec[1]
    if kind == "array":
        return np.asarray(spec[1], dtype=spec[2])
    if kind == "state":
        return brainx.ParamState(jnp.asarray(spec[1], jnp.float32), coef=spec[2], label=spec[3])
    if kind == "partial":
        _, cls, fn, k = spec
        make = functools.partial if cls == "functools" else jax.tree_util.Partial
        return make(scale, k) if fn == "scale" else make(shift, by=k)
    if kind == "xfloat":
        f = XFloat(spec[1])
        f.extra = spec[2]
        return f
    if kind == "list":
        return [build(s) for s in spec[1]]
    if kind == "tuple":
        return tuple(build(s) for s in spec[1])
    if kind == "dict":
        return {k: build(s) for k, s in spec[1]}
    if kind == "xdict":
        d = XDict((k, build(s)) for k, s in spec[1])
        d.extra = spec[2]
        return d
    raise AssertionError(spec)


def _float_parts(v):
    return [float(v), math.copysign(1.0, v)]


def _text(s):
    return [float(len(s)), float(sum((i + 1) * ord(c) for i, c in enumerate(s)))]


def fold(x, arg, parts):
    """Append to ``parts`` numbers (Python values or traced arrays) that depend on every place."""
    if isinstance(x, brainx.State):
        parts += [jnp.ravel(x.value), *_float_parts(x.coef), *_text(x.label), 10.0]
        x.value = x.value * 2.0 + arg * x.coef
    elif isinstance(x, functools.partial):         # jax.tree_util.Partial too
        kind = 12.0 if isinstance(x, jax.tree_util.Partial) else 11.0
        parts += [kind, jnp.ravel(x(arg))]
    elif isinstance(x, bool):
        parts += [20.0, float(x)]
    elif isinstance(x, XFloat):
        parts += [21.0, *_float_parts(x), *_float_parts(x.extra)]
    elif isinstance(x, float):
        parts += [22.0, *_float_parts(x)]
    elif isinstance(x, int):
        parts += [23.0, float(x)]
    elif isinstance(x, str):
        parts += [24.0, *_text(x)]
    elif isinstance(x, np.ndarray):
        parts += [25.0 + (x.dtype == np.int32), jnp.asarray(x, jnp.float32),
                  jnp.asarray(np.signbit(x), jnp.float32)]
    elif isinstance(x, (list, tuple)):
        parts += [TYPE_CODE[type(x).__name__], float(len(x))]
        for v in x:
            fold(v, arg, parts)
    elif isinstance(x, dict):
        parts += [TYPE_CODE["xdict" if isinstance(x, XDict) else "dict"], float(len(x))]
        for k, v in x.items():
            parts += _text(k)
            fold(v, arg, parts)
        if isinstance(x, XDict):
            parts += _float_parts(x.extra)
    else:
        raise AssertionError(type(x))
    return parts


def states_of(x):
    if isinstance(x, brainx.State):
        return [x]
    if isinstance(x, (list, tuple)):
        return [s for v in x for s in states_of(v)]
    if isinstance(x, dict):
        return [s for v in x.values() for s in states_of(v)]
    return []


def make_graph_class():
    """A fresh class per example: each example starts with no shared traces (reproducible)."""

    class Graph(brainx.nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.data = build(spec)
            self.calls = brainx.State(jnp.zeros(()))

        @transform.jit
        def step(self, arg):
            parts = fold(self.data, arg, [])
            self.calls.value = self.calls.value + arg.sum()
            return jnp.concatenate([jnp.ravel(jnp.asarray(p, jnp.float32)) for p in parts])

    return Graph


special_floats = st.sampled_from([0.0, -0.0, 1.5, -2.0, math.nan, math.inf, -math.inf])
floats = st.one_of(special_floats, st.floats(-10, 10, width=32))
small_text = st.text(alphabet="abz", max_size=3)
array_values = st.lists(floats, min_size=2, max_size=2).map(tuple)

leaf_specs = st.one_of(
    floats.map(lambda v: ("float", v)),
    st.integers(-3, 3).map(lambda v: ("int", v)),
    st.booleans().map(lambda v: ("bool", v)),
    small_text.map(lambda v: ("str", v)),
    st.tuples(st.just("array"), array_values, st.sampled_from(["float32", "int32"])).map(
        lambda s: s if s[2] == "float32" else
        ("array", tuple(0 if math.isnan(v) or math.isinf(v) else int(v) for v in s[1]), s[2])),
    st.tuples(st.just("state"), array_values, floats, small_text),
    st.tuples(st.just("partial"), st.sampled_from(["functools", "jax"]),
              st.sampled_from(["scale", "shift"]), floats),
    st.tuples(st.just("xfloat"), floats, floats),
)


def _containers(children):
    keyed = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), children), max_size=3,
                     unique_by=lambda kv: kv[0]).map(tuple)
    return st.one_of(
        st.lists(children, max_size=3).map(lambda l: ("list", tuple(l))),
        st.lists(children, max_size=3).map(lambda l: ("tuple", tuple(l))),
        keyed.map(lambda kv: ("dict", kv)),
        st.tuples(st.just("xdict"), keyed, floats),
    )


graph_specs = st.recursive(leaf_specs, _containers, max_leaves=8)


def places(spec, path=()):
    """Every path in a spec (the root included), to change one of them."""
    yield path
    if spec[0] in ("list", "tuple"):
        for i, s in enumerate(spec[1]):
            yield from places(s, path + (i,))
    elif spec[0] in ("dict", "xdict"):
        for i, (_, s) in enumerate(spec[1]):
            yield from places(s, path + (i,))


def replace(spec, path, new):
    if not path:
        return new
    i, rest = path[0], path[1:]
    items = list(spec[1])
    if spec[0] in ("list", "tuple"):
        items[i] = replace(items[i], rest, new)
    else:
        items[i] = (items[i][0], replace(items[i][1], rest, new))
    return (spec[0], tuple(items)) + tuple(spec[2:])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=graph_specs, data=st.data())
def test_random_attribute_graphs_share_only_when_sound(spec, data):
    if data.draw(st.booleans(), label="identical"):
        other = spec
    else:
        where = data.draw(st.sampled_from(list(places(spec))), label="where")
        other = replace(spec, where, data.draw(graph_specs, label="new"))
    args = (jnp.array([1.0, 2.0]), jnp.array([3.0, -1.0]))

    def scenario():
        Graph = make_graph_class()
        a, b = Graph(spec), Graph(other)
        outs = [a.step(args[0]), b.step(args[1]), a.step(args[1])]
        values = [s.value for m in (a, b) for s in states_of(m.data) + [m.calls]]
        return outs, values

    got_outs, got_values = scenario()
    want_outs, want_values = eager(scenario)
    for got, want in zip(got_outs, want_outs):
        close(got, want)
    assert len(got_values) == len(want_values)
    for got, want in zip(got_values, want_values):
        close(got, want)


