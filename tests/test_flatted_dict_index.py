"""`FlattedDict` finds a key by its dotted string in one lookup (issue 42.10).

A path with a number in it can be spelled two ways (``("layers", 0, "w")`` or
``"layers.0.w"``); the mapping used to scan every stored key to match the
second spelling, so ``graph.states`` of a model with n layers in a list took
n^2 steps (64 s for 10 000 layers). It now keeps an index of the dotted forms.
The reference here is a plain dict searched key by key (the old rule).
"""

import copy
import pickle
import random

import jax
import jax.numpy as jnp

import brainx
from brainx import nn
from brainx.util import DottedPath, FlattedDict


class _Scanned:
    """The old lookup: the path as a tuple, else the first stored key with its dotted form."""

    def __init__(self):
        self.d = {}

    def key(self, key):
        path = DottedPath(key) if isinstance(key, (tuple, str)) else DottedPath((key,))
        if path in self.d or not any(str(p).isdigit() for p in path):
            return path
        for stored in self.d:
            if stored.dotted == path.dotted:
                return stored
        return path


def _spell(parts, rng):
    return rng.choice([tuple(parts), ".".join(map(str, parts)), DottedPath(parts)])


def test_random_operations_match_the_scanning_lookup():
    rng = random.Random(0)
    flat, ref = FlattedDict(), _Scanned()
    for step in range(3000):
        parts = ("a", rng.randrange(6), rng.choice(["w", 0, "1"]))
        if rng.random() < 0.1:   # one part whose dotted form is that of a longer path
            parts = (f"a.{rng.randrange(6)}", rng.choice(["w", 0, "1"]))
        key = _spell(parts, rng)
        op = rng.choice(["set", "set", "get", "del", "pop", "setdefault", "contains", "popitem"])
        if op == "set":
            flat[key] = step
            ref.d[ref.key(key)] = step
        elif op == "setdefault":
            assert flat.setdefault(key, step) == ref.d.setdefault(ref.key(key), step)
        elif op == "get":
            assert flat.get(key, "none") == ref.d.get(ref.key(key), "none")
        elif op == "contains":
            assert (key in flat) == (ref.key(key) in ref.d)
        elif op == "del":
            k = ref.key(key)
            if k in ref.d:
                del flat[key]
                del ref.d[k]
        elif op == "pop":
            assert flat.pop(key, "none") == ref.d.pop(ref.key(key), "none")
        elif op == "popitem" and ref.d:
            assert flat.popitem() == ref.d.popitem()
        assert [tuple(k) for k in dict.keys(flat)] == [tuple(k) for k in ref.d]
        assert list(dict.values(flat)) == list(ref.d.values())


def test_two_keys_of_one_dotted_form_and_removal():
    flat = FlattedDict()
    flat[("a", 0)] = "int"
    flat[("a.0",)] = "one part"                     # a second key spelled "a.0"
    assert len(flat) == 2
    assert flat["a.0"] == "int"                     # the first stored, as the scan found
    del flat[("a", 0)]
    assert flat["a.0"] == "one part"                # the other one is found again
    flat.clear()
    assert "a.0" not in flat and len(flat) == 0
    flat |= {("b", 1): 2}
    assert flat["b.1"] == 2


def test_copies_pickles_and_pytrees_keep_finding_dotted_keys():
    flat = FlattedDict({("layers", i, "w"): i for i in range(5)})
    assert flat["layers.3.w"] == 3
    for other in (copy.deepcopy(flat), pickle.loads(pickle.dumps(flat)), flat.copy(),
                  copy.copy(flat), jax.tree.map(lambda v: v * 10, flat)):
        assert vars(other).get("_index") is not vars(flat).get("_index")
        assert other["layers.4.w"] in (4, 40)
        other[("layers", 5, "w")] = 5
        assert other["layers.5.w"] == 5 and len(other) == 6
        other[("x",)] = 0                 # a key without a number: the index is the copy's own
    assert len(flat) == 5 and "layers.5.w" not in flat and flat["layers.4.w"] == 4


_ZERO = jnp.zeros(())


class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = brainx.ParamState(_ZERO)


class _Deep(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = [_Layer() for _ in range(n)]


def test_states_of_10000_layers_in_a_list_is_linear(monkeypatch):
    """Counted, not timed: the work of matching keys is the number of dotted forms made (a scan
    of every stored key per lookup, the old quadratic path, makes n^2/2 of them)."""
    from brainx.util import mappings, path
    net = _Deep(10_000)
    made = [0]

    def counting(parts, _dotted=path.dotted):
        made[0] += 1
        return _dotted(parts)

    monkeypatch.setattr(path, "dotted", counting)       # DottedPath.dotted and str()
    monkeypatch.setattr(mappings, "dotted", counting)   # the index of FlattedDict
    states = brainx.graph.states(net)
    assert made[0] < 20 * 10_000, f"{made[0]} dotted forms for 10 000 layers: not linear"
    assert [tuple(k) for k in states] == [("layers", i, "w") for i in range(10_000)]
    assert all(states[f"layers.{i}.w"] is layer.w for i, layer in enumerate(net.layers))
    assert list(net.states()) == list(states)
