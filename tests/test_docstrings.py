"""The examples in public docstrings run (doctest)."""

import doctest
import importlib
import pkgutil

import pytest

import brainx

MODULES = sorted(m.name for m in pkgutil.walk_packages(brainx.__path__, "brainx."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
