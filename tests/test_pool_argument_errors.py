"""Window arguments of the wrong type are a ``TypeError`` (brainstate's), a wrong length a ``ValueError``."""

import numpy as np
import pytest

from brainx import nn


@pytest.mark.parametrize("make", [
    lambda: nn.MaxPool2d(2.5), lambda: nn.MaxPool2d((2, "a")), lambda: nn.AvgPool1d(True),
    lambda: nn.MaxPool2d(2, padding=2.5), lambda: nn.LPPool2d(2, 2, stride=1.5),
    lambda: nn.MaxUnpool2d(2, stride=(1.5, 2)), lambda: nn.Conv2d((4, 4, 1), 2, 2.5),
])
def test_wrong_types_are_type_errors(make):
    with pytest.raises(TypeError, match="must be"):
        make()


def test_wrong_lengths_are_value_errors_and_numpy_ints_are_fine():
    with pytest.raises(ValueError, match="sequence of 1 or 2 ints"):
        nn.MaxPool2d(2, stride=(2, 2, 2))
    assert nn.MaxPool2d(np.int64(2)).kernel_size == (2, 2)
    assert nn.Conv2d((4, 4, 1), 2, (np.int64(3), 3)).kernel_size == (3, 3)
