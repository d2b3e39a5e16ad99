"""The migration hint: modules of the real brainstate inside a brainx model (issue 45).

A brainstate program moved to brainx by changing its import alone, which also
imports a library built on the real brainstate (braintools, brainpy), holds
that library's modules inside a brainx model: ``init_all_states`` cannot
initialise them. brainx must say so and name the cure
(``brainx.compat.install_as_brainstate()`` before those libraries are
imported). brainstate is not needed: a small fake ``brainstate`` package and a
fake client library on ``sys.path``, in a subprocess (imports are for good).
"""

import json
import subprocess
import sys
import textwrap
import warnings

import jax.numpy as jnp

import brainx
from brainx.nn.modules.brainstate_objects import real_brainstate_class, real_brainstate_objects

FAKE_BRAINSTATE = '''
__version__ = "0.5.4"
class State:
    def __init__(self, value):
        self.value = value
class HiddenState(State):
    pass
from . import nn
'''
FAKE_BRAINSTATE_NN = '''
class Module:
    def __init__(self, *args, **kwargs):
        pass
class Dynamics(Module):
    pass
'''
FAKE_CLIENT = '''
import brainstate
import jax.numpy as jnp
class Expon(brainstate.nn.Dynamics):
    def __init__(self, n):
        super().__init__(n)
        self.n = n
    def init_state(self, *args, **kwargs):
        self.g = brainstate.HiddenState(jnp.zeros(self.n))
    def update(self, x):
        self.g.value = self.g.value * 0.5 + x
        return self.g.value
'''
PROGRAM = '''
import json, sys, warnings
sys.path.insert(0, {root!r})
import brainx as brainstate          # the migration: this import changed, nothing else
if {install!r}:
    import brainx.compat
    brainx.compat.install_as_brainstate()
import fakeclient
import jax.numpy as jnp

class Net(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.syn = fakeclient.Expon(3)
        self.more = [brainstate.nn.Linear(2, 2), {{"e": fakeclient.Expon(2)}}]
        self.raw = fakeclient.brainstate.State(1.0)

net = Net()
# a class of a file named as brainstate's own (its test files, run on brainx by the peer suite)
import importlib.util
spec = importlib.util.spec_from_file_location("brainstate.nn._lookalike_test",
                                              {root!r} + "/lookalike_test.py")
lookalike = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = lookalike
spec.loader.exec_module(lookalike)
net.extra = lookalike.Thing()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    brainstate.nn.init_all_states(net)
out = {{"warnings": [str(w.message) for w in caught], "lines": [w.lineno for w in caught],
        "files": [w.filename for w in caught], "has_g": hasattr(net.syn, "g")}}
if out["has_g"]:
    out["step"] = [float(v) for v in net.syn.update(jnp.ones(3) * 2.0)]
print(json.dumps(out))
'''


def _run(tmp_path, install):
    (tmp_path / "brainstate" / "nn").mkdir(parents=True)
    (tmp_path / "brainstate" / "__init__.py").write_text(FAKE_BRAINSTATE)
    (tmp_path / "brainstate" / "nn" / "__init__.py").write_text(FAKE_BRAINSTATE_NN)
    (tmp_path / "fakeclient.py").write_text(FAKE_CLIENT)
    (tmp_path / "lookalike_test.py").write_text("class Thing:\n    pass\n")
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(PROGRAM.format(root=str(tmp_path), install=install)))
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), str(program)


def test_a_model_holding_the_real_brainstates_modules_is_told_to_install_first(tmp_path):
    out, program = _run(tmp_path, install=False)
    assert not out["has_g"]                      # brainx could not initialise it: the bug
    (message,) = out["warnings"]
    assert "install_as_brainstate()" in message and "before those libraries" in message
    for path in ("syn (fakeclient.Expon, a brainstate.nn.Dynamics)", "more.1.e", "raw", "extra"):
        assert path in message
    assert str(tmp_path / "brainstate") in message
    assert out["files"] == [program]             # points at the user's call


def test_after_install_as_brainstate_the_same_program_initialises_silently(tmp_path):
    # (and a class from a file of brainstate's name is brainx's then: no alarm)
    out, _ = _run(tmp_path, install=True)
    assert out["warnings"] == [] and out["has_g"]
    assert out["step"] == [2.0, 2.0, 2.0]        # 0.5 * 0 + 2: the client's own update


def test_brainx_models_and_lookalike_names_raise_no_alarm():
    assert real_brainstate_class(brainx.nn.LIF) is None
    lookalike = type("Expon", (), {"__module__": "brainstate.not_loaded"})
    assert real_brainstate_class(lookalike) is None      # no such module loaded from a file
    net = brainx.nn.Sequential(brainx.nn.Linear(2, 3), brainx.nn.ReLU())
    assert list(real_brainstate_objects(net)) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        brainx.nn.init_all_states(net)
        assert net(jnp.ones(2)).shape == (3,)
