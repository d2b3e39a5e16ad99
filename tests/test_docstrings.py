"""The examples in public docstrings run (doctest)."""

import doctest
import gc
import importlib
import pkgutil

import pytest

import brainx
from brainx.state.hook_manager import hooks_active

MODULES = sorted(m.name for m in pkgutil.walk_packages(brainx.__path__, "brainx."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    if hooks_active():
        # a state with a hook, left in a reference cycle by an earlier test of this worker,
        # turns instance sharing off until it is collected (graph_definition's example)
        gc.collect()
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
