"""When a jit entry is current, and how brainstate's inspection API reads jit's entries.

``JitEntry.holds_states`` / ``is_current`` are the one policy ``jit`` asks "may this entry
run as it is?" with; brainstate's ``get_*_by_cache`` methods read the traces the entries
keep when they are called, not while ``jit`` traces.
"""

import gc

import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.state import structure_changed


def _jitted():
    a = brainx.State(jnp.zeros(3))
    b = brainx.State(jnp.arange(3.0))

    @brainx.transform.jit
    def f(x):
        a.value = a.value + b.value * x * brainx.environ.get("scale", 1.0)
        return a.value.sum()

    return a, b, f


def _entry(f):
    (entry,) = f._entries.values()
    return entry


def test_an_entry_is_current_until_the_structure_changes_then_again_once_revalidated():
    a, b, f = _jitted()
    f(1.0)
    entry = _entry(f)
    assert entry.holds_states() and entry.is_current()
    structure_changed()
    assert not entry.holds_states() and not entry.is_current()
    f(1.0)                                          # the same computation: revalidated
    assert _entry(f) is entry and entry.is_current()


def test_a_changed_setting_leaves_the_states_held_but_the_entry_not_current():
    a, b, f = _jitted()
    with brainx.environ.context(scale=2.0):
        f(1.0)
        entry = _entry(f)
        assert entry.is_current()
    with brainx.environ.context(scale=3.0):
        assert entry.holds_states() and not entry.is_current()
        assert entry.is_current(values=False) is False   # settings are part of both
        np.testing.assert_allclose(f(1.0), (0 + 2 + 4) + (0 + 3 + 6))   # b * 2, then b * 3
    with brainx.environ.context(scale=2.0):
        assert entry.is_current()                       # the settings it read are back


def test_a_state_now_holding_a_string_makes_the_entry_not_current_for_a_call_only():
    s = brainx.State(jnp.zeros(2))

    @brainx.transform.jit
    def f(x):
        return x + 1.0 if isinstance(s.value, str) else s.value + x

    f(1.0)
    entry = _entry(f)
    s.value = "now a string"
    assert entry.holds_states() and entry.is_current(values=False)
    assert not entry.is_current()
    np.testing.assert_allclose(f(1.0), 2.0)             # traced again, the string static


def test_a_collected_state_makes_the_entry_stale():
    class Holder:
        pass

    holder = Holder()
    holder.h = brainx.State(jnp.zeros(2))

    @brainx.transform.jit
    def f(x):
        holder.h.value = holder.h.value + x

    f(1.0)
    entry = _entry(f)
    holder.h = brainx.State(jnp.ones(2))
    gc.collect()
    assert not entry.alive() and not entry.holds_states() and not entry.is_current()


def test_jit_files_nothing_for_the_inspection_api_while_it_traces():
    a, b, f = _jitted()
    f(1.0)
    f(jnp.ones(3))
    assert "_traces" not in f.stateful_fun.__dict__     # no bookkeeping on the trace path
    sf = f.stateful_fun
    assert sf.get_cache_stats()["compilation_cache"]["size"] == 2   # read when asked
    assert sf.get_states_by_cache(sf.get_arg_cache_key(jnp.ones(3))) == (a, b)


def test_the_inspection_api_follows_a_new_trace_of_new_states():
    class Net(brainx.nn.Module):
        def __init__(self):
            super().__init__()
            self.h = brainx.State(jnp.zeros(2))

    net = Net()

    @brainx.transform.jit
    def f(x):
        net.h.value = net.h.value + x
        return net.h.value.sum()

    f(1.0)
    sf = f.stateful_fun
    key = sf.get_arg_cache_key(1.0)
    old = net.h
    assert sf.get_states_by_cache(key) == (old,)
    jaxpr = sf.get_jaxpr_by_cache(key)
    net.h = brainx.State(jnp.zeros(3))                 # rebound (the old one stays alive)
    f(1.0)
    assert sf.get_states_by_cache(key) == (net.h,)      # the newest trace of the key
    new_jaxpr = sf.get_jaxpr_by_cache(key)
    assert new_jaxpr is not jaxpr and new_jaxpr.in_avals[-1].shape == (3,)
    assert old.value.shape == (2,)


def test_a_key_jit_never_traced_is_still_unknown():
    a, b, f = _jitted()
    f(1.0)
    sf = f.stateful_fun
    with pytest.raises(ValueError, match=r"(?s)no trace under this cache key.*Available keys \(1"):
        sf.get_states_by_cache(sf.get_arg_cache_key(jnp.ones(2)))
