"""Writes the version-1 files of tests/io_files (run once, with brainx before checksums).

These files were written by brainx.io as it stood at commit d974d17 (format version 1,
no checksum, no arrays of layers); tests/test_io_format.py loads them with today's brainx.
Run from the repository root: ``python tests/io_files/make_v1_files.py``.
"""

import os

import brainunit as u
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import brainx
from brainx import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def model_v1():
    """The states of v1_model.msgpack, as they were saved."""
    lin = nn.Linear(3, 2, w_init=jnp.arange(6.0).reshape(3, 2) / 8 * u.mA,
                    b_init=jnp.array([-1.0, 2.0]) * u.mA)
    return {
        "lin": lin,
        "rng": brainx.random.RandomState(jax.random.key(3)),
        "weak": brainx.State(jnp.asarray(0.5)),
        "bf16": brainx.State(jnp.arange(4, dtype=ml_dtypes.bfloat16)),
        "np": brainx.State(np.arange(6, dtype=np.int16).reshape(2, 3)),
        "py": brainx.State({"n": 3, "s": "text", "f": 2.5, "none": None}),
    }


def conn_v1(seed):
    """An event layer, seeded or not, in a dict (its weights are its only state)."""
    brainx.random.seed(11)
    return {"conn": nn.EventFixedProb(20, 10, conn_num=3, conn_weight=0.25, seed=seed)}


if __name__ == "__main__":
    brainx.environ.set(dt=0.25 * u.ms)
    brainx.io.save(os.path.join(HERE, "v1_model.msgpack"), model_v1(), environ=True)
    brainx.io.save(os.path.join(HERE, "v1_conn_seeded.msgpack"), conn_v1(seed=5))
    brainx.io.save(os.path.join(HERE, "v1_conn_unseeded.msgpack"), conn_v1(seed=None))
