"""Building and stepping a spiking network never imports PyTorch (issue 45).

brainunit's ``asarray``, ``isscalar``, ``where``, ``maximum`` ... ask which
array library their input belongs to and import each one to rule it out:
5-7 s where PyTorch is installed, before the first step of a network that
never uses it. brainx's construction and step paths convert plain values
themselves (``brainx.nn.plain_arrays``). Checked two ways: the helpers give
exactly what brainunit gives, and in a subprocess a fake ``torch`` package on
``sys.path`` records whether anything imported it.
"""

import os
import subprocess
import sys
import textwrap

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

from brainx.nn import plain_arrays as plain

VALUES = [0.6, 3, True, np.float64(0.5), np.int64(3), np.ones(3), jnp.ones(2),
          jnp.ones(2, jnp.int32), 2.0 * u.mS, np.ones(2) * u.mV, jnp.arange(3.0) * u.ms]


def _described(x):
    m = getattr(x, "mantissa", x)
    return (type(x), type(m), np.dtype(m.dtype), getattr(m, "weak_type", None),
            u.get_unit(x), np.shape(m), np.asarray(m).tolist())


@pytest.mark.parametrize("x", VALUES, ids=lambda x: repr(x)[:24])
@pytest.mark.parametrize("dtype", [None, float])
def test_as_array_is_brainunits_asarray(x, dtype):
    assert _described(plain.as_array(x, dtype=dtype)) == _described(u.math.asarray(x, dtype=dtype))


def test_is_scalar_is_brainunits_isscalar():
    for x in VALUES + [[1, 2], np.ones(1), jnp.ones(()), 3.0 * u.mV, "text"]:
        assert plain.is_scalar(x) == bool(u.math.isscalar(x)), x


def test_where_and_maximum_are_brainunits():
    cond = jnp.array([True, False, True])
    cases = [(5.0 * u.ms, jnp.zeros(3) * u.ms), (jnp.ones(3), 0.0), (-60.0 * u.mV, jnp.arange(3.0) * u.mV),
             (1.0 * u.second, jnp.ones(3) * u.ms)]       # the last: two units, left to brainunit
    for x, y in cases:
        assert _described(plain.where(cond, x, y)) == _described(u.math.where(cond, x, y))
        assert _described(plain.maximum(x, y)) == _described(u.math.maximum(x, y))
    for x in VALUES:
        assert _described(plain.reshape(x, (-1, 1))) == _described(u.math.reshape(x, (-1, 1)))
    with pytest.raises(u.UnitMismatchError):
        plain.where(cond, 1.0 * u.mV, jnp.ones(3) * u.ms)


FAKE_TORCH = '''
import os
with open(os.environ["FAKE_TORCH_LOG"], "a") as f:
    import traceback
    f.write("".join(traceback.format_stack()) + "=====\\n")
raise ImportError("a fake torch that records its import")
'''

PROGRAM = '''
import sys
sys.path.insert(0, {root!r})
import brainunit as u
import jax.numpy as jnp
import brainx
from brainx import nn


class EINet(nn.Module):
    """COBA: LIF neurons with a refractory period, two event projections, conductances."""

    def __init__(self, n):
        super().__init__()
        self.n_exc = int(n * 0.8)
        self.neurons = nn.LIFRef(n, R=1.0, tau=20.0 * u.ms, tau_ref=5.0 * u.ms,
                                 V_rest=-60.0 * u.mV, V_th=-50.0 * u.mV, V_reset=-60.0 * u.mV,
                                 spk_reset="hard", V_initializer=nn.init.Normal(-55.0, 2.0, unit=u.mV))
        self.exc = nn.EventFixedProb(self.n_exc, n, conn_num=0.02, conn_weight=0.6, seed=0)
        self.inh = nn.EventFixedProb(n - self.n_exc, n, conn_num=0.02, conn_weight=6.7, seed=1)
        self.dense = nn.EventLinear(n - self.n_exc, 3, weight=0.1)
        self.g_exc, self.g_inh = nn.Expon(n, tau=5.0 * u.ms), nn.Expon(n, tau=10.0 * u.ms)
        self.out_exc, self.out_inh = nn.COBA(E=0.0 * u.mV), nn.COBA(E=-80.0 * u.mV)
        self.neurons.add_current_input("exc", self.out_exc)
        self.neurons.add_current_input("inh", self.out_inh)

    def update(self):
        spikes = self.neurons.get_spike()
        self.out_exc.bind_cond(self.g_exc(self.exc(spikes[:self.n_exc])))
        self.out_inh.bind_cond(self.g_inh(self.inh(spikes[self.n_exc:])))
        return self.neurons(20.0 * u.mV).sum() + self.dense(spikes[self.n_exc:]).sum()


brainx.random.seed(0)
with brainx.environ.context(dt=0.1 * u.ms):
    net = nn.init_all_states(EINet(400))
    run = brainx.transform.jit(
        lambda: brainx.transform.for_loop(lambda i: net.update(), jnp.arange(20)))
    print("spikes", float(run().sum()))
print("torch imported:", "torch" in sys.modules)
'''


def test_building_and_running_a_coba_network_never_imports_torch(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    log = tmp_path / "torch.log"
    program = tmp_path / "coba.py"
    program.write_text(textwrap.dedent(PROGRAM.format(root=str(tmp_path))))
    env = dict(os.environ, FAKE_TORCH_LOG=str(log))
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "spikes" in done.stdout
    assert not log.exists(), "torch was imported by:\n" + log.read_text()[-3000:]
    # the control: brainunit's own asarray does import the fake torch in that environment
    control = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
         "import brainunit as u; u.math.asarray(1.0)"],
        capture_output=True, text=True, env=env, timeout=120)
    assert control.returncode == 0, control.stderr
    assert log.exists() and "a fake torch" not in log.read_text() and "=====" in log.read_text()
