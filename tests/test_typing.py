"""brainx.typing: the aliases take what they name, and the markers only describe."""

import typing

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx.typing import (Array, ArrayLike, Key, Missing, PyTree, SeedOrKey, Size,
                           SupportsDType)


def test_array_like_covers_what_jax_and_brainunit_take():
    members = set(typing.get_args(ArrayLike))
    for value in (jnp.ones(2), np.ones(2), 1, 1.0, True, 1j, np.float32(1), 3 * u.mV):
        assert any(isinstance(value, m) for m in members), value


def test_size_and_seed_aliases_name_the_right_types():
    assert int in typing.get_args(Size)
    assert jax.Array in typing.get_args(SeedOrKey) and int in typing.get_args(SeedOrKey)


def test_markers_describe_and_compare_but_cannot_be_built():
    assert repr(Array["batch, n"]) == "Array['batch, n']"
    assert Array["m"] == Array["m"] and Array["m"] != Array["n"]
    assert repr(PyTree[float, "T"]) == "PyTree[float, 'T']"
    with pytest.raises(TypeError, match="annotation"):
        Array()
    with pytest.raises(TypeError, match="annotation"):
        PyTree()


def test_protocols_check_at_run_time():
    assert isinstance(jnp.ones(2), SupportsDType)
    assert not isinstance(3, SupportsDType)
    assert isinstance("weight", Key) and isinstance(0, Key)


def test_missing_is_a_sentinel_distinct_from_none():
    missing = Missing()
    assert missing is not None and missing != Missing()


def test_typing_is_reachable_as_brainstate_spells_it():
    assert brainx.typing.Filter is brainx.util.filter.Filter


def test_the_package_is_typed_and_its_version_is_written_once():
    import importlib.metadata
    import pathlib

    import brainx
    assert (pathlib.Path(brainx.__file__).parent / "py.typed").is_file()   # PEP 561 marker
    # the distribution is brainx-jax (the package index's "brainx" is another project)
    assert importlib.metadata.version("brainx-jax") == brainx.__version__
