"""Save and load the states of a model, its optimiser and its random generators.

:func:`save` writes the value of every state in a target (a module, a state,
or dicts/lists/tuples of them) to one file; :func:`load` reads it back into a
freshly built target of the same structure, checking paths, dtypes, shapes
and units first, so a mismatch is an error naming the state and nothing is
half-loaded. Units (brainunit Quantities), dtypes, PRNG keys (a
:class:`~brainx.random.RandomState` is a state), optax's state (an
:class:`~brainx.optim.OptimState`) and, on request, the ``brainx.environ``
settings come back exactly, so a resumed run is bit-identical to one that
never stopped. ``msgpack_save``/``msgpack_load`` are the same functions under
braintools' names.

A file is checked: every array carries a CRC-32 and the file one over all of
it, verified on load (a flipped bit is an error naming the file and the
array); a load is all or nothing (a failed write, such as a state hook's
refusal, puts back everything written before it); and a module's constants
that are no State (an unseeded sparse layer's synapses) are saved with it
when the module implements :class:`SavesArrays`. Files of format version 1
(before 2026-12-07) load as they did, unchecked.

The format is msgpack: one self-describing file, a small pure dependency, any
metadata (units, keys, settings) next to the raw array bytes, and no limits on
dtypes. The alternatives, for when they fit better:

============  ==============================  ===============================  =======================
format        keeps                           good for                         why not the default
============  ==============================  ===============================  =======================
msgpack       any tree, units, keys, environ  any model of one host, resume    read whole into memory
safetensors   flat dict of arrays + strings   sharing weights (PyTorch, HF)    no tree, units in text
orbax         sharded arrays, async writes    multi-host, very large models    heavy, a folder per save
============  ==============================  ===============================  =======================

Examples
--------
>>> import os, tempfile, jax.numpy as jnp, brainunit as u, brainx
>>> net = brainx.nn.Linear(2, 3, w_init=jnp.ones((2, 3)) * u.mA)
>>> opt = brainx.optim.Adam(lr=0.1)
>>> opt.register_trainable_weights(net.states(brainx.ParamState))
>>> path = os.path.join(tempfile.mkdtemp(), "run.msgpack")
>>> brainx.io.save(path, {"net": net, "opt": opt})
>>> fresh = brainx.nn.Linear(2, 3, w_init=jnp.zeros((2, 3)) * u.mA)
>>> _ = brainx.io.load(path, {"net": fresh, "opt": brainx.optim.Adam(lr=0.1)})  # no weights registered
Traceback (most recent call last):
...
brainx.io.CheckpointError: brainx.io.load: state 'opt.opt_state' has a different structure ...
>>> opt2 = brainx.optim.Adam(lr=0.1)
>>> opt2.register_trainable_weights(fresh.states(brainx.ParamState))
>>> _ = brainx.io.load(path, {"net": fresh, "opt": opt2})
>>> fresh.weight.value["weight"].unit, float(fresh.weight.value["weight"].mantissa.sum())
(Unit("mA"), 6.0)
"""

from brainx.io.errors import CheckpointError
from brainx.io.files import load, save
from brainx.io.layer_arrays import SavesArrays
from brainx.io.partitioned import load_partitioned, save_partitioned, saved_synapses

msgpack_save = save  # braintools.file's names
msgpack_load = load

__all__ = ["save", "load", "msgpack_save", "msgpack_load", "CheckpointError", "SavesArrays",
           "save_partitioned", "load_partitioned", "saved_synapses"]
