"""A `TracerLeakError` names the state by its path in the model (issue 45).

The errors named a state by its repr (``HiddenState(f32[3])``), which does not
say which of a model's states it is. A walk of the model (``init_all_states``,
``Module.states()``, ``graph.states``) now notes each state's path, and the
errors name it so (``HiddenState 'cells.1.h' of Net``), falling back to the
repr where the path is unknown or no longer holds. Each case also checks
that the state kept its value (no tracer left in it).
"""

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn
from brainx.state.known_paths import describe_state, path_of


class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = brainx.ParamState(jnp.ones(3))

    def init_state(self, *args, **kwargs):
        self.h = brainx.HiddenState(jnp.zeros(3))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.cells = [Cell(), Cell()]


def _write_in_raw_jit(state):
    def f(x):
        state.value = x
        return x
    jax.jit(f)(jnp.ones(3))


def test_a_read_after_a_raw_jit_wrote_the_state_names_its_path():
    net = nn.init_all_states(Net())
    _write_in_raw_jit(net.cells[1].h)
    with pytest.raises(brainx.TracerLeakError, match=r"^HiddenState 'cells\.1\.h' of Net still"):
        net.cells[1].h.value
    np.testing.assert_array_equal(net.cells[1].h.value, np.zeros(3))


def test_a_raw_jit_inside_a_brainx_jit_names_the_path_and_changes_nothing():
    net = nn.init_all_states(Net())

    def step(x):
        _write_in_raw_jit(net.cells[0].h)
        return x

    with pytest.raises(brainx.TracerLeakError, match=r"^HiddenState 'cells\.0\.h' of Net was"):
        brainx.transform.jit(step)(jnp.ones(3))
    np.testing.assert_array_equal(net.cells[0].h.value, np.zeros(3))


def test_a_dead_tracer_written_outside_any_transform_names_the_path():
    net = Net()
    _ = net.states()                      # a walk: the parameters' paths are known
    kept = []
    jax.jit(lambda x: kept.append(x) or x)(jnp.ones(3))
    with pytest.raises(brainx.TracerLeakError, match=r"^ParamState 'cells\.1\.w' of Net was"):
        net.cells[1].w.value = kept[0]
    np.testing.assert_array_equal(net.cells[1].w.value, np.ones(3))


def test_unknown_or_stale_paths_fall_back_to_the_repr():
    lone = brainx.HiddenState(jnp.zeros(2))
    assert describe_state(lone) == repr(lone) == "HiddenState(f32[2])"
    net = nn.init_all_states(Net())
    first = net.cells[0].h
    assert describe_state(first) == "HiddenState 'cells.0.h' of Net"
    net.cells.reverse()                   # 'cells.0.h' now leads to the other cell's state
    assert describe_state(first) == repr(first)
    _ = brainx.graph.states(net)          # walked again: the new path
    assert describe_state(first) == "HiddenState 'cells.1.h' of Net"


def test_the_path_from_the_whole_model_wins_and_nothing_is_kept_alive():
    net = nn.init_all_states(Net())
    net.cells[1].states()                 # a walk from a part: a shorter path
    assert path_of(net.cells[1].h) == (net, "cells.1.h")
    ref = weakref.ref(net)
    state_ref = weakref.ref(net.cells[1].h)
    del net
    gc.collect()
    assert ref() is None and state_ref() is None
