"""`IafPscExp` against NEST's own ``iaf_psc_exp``: the same spike train in, the same membrane trace out.

NEST lives in an environment of its own (it does not install beside jax); the test runs it in a
subprocess with the Python named by ``BRAINX_NEST_PYTHON`` (e.g. ``/tmp/nest-venv/bin/python``,
made with ``python3.11 -m venv /tmp/nest-venv && /tmp/nest-venv/bin/pip install nest-simulator``)
and is skipped without it.

Timing, NEST's way: a ``spike_generator`` spike at time ``t`` is emitted in the step ending at
``t`` and, over a delay ``d``, is added to the target's current in the step ending at ``t + d``,
i.e. brainx's step ``round((t + d) / h) - 1``. A multimeter sample at time ``(k + 1) h`` is the
state after step ``k``; it reports one ``min_delay`` late, so NEST runs one delay longer.
"""

import json
import os
import subprocess
import textwrap

import brainunit as u
import numpy as np
import pytest

import brainx
from brainx import nn

NEST_PYTHON = os.environ.get("BRAINX_NEST_PYTHON")
pytestmark = pytest.mark.skipif(not NEST_PYTHON, reason="set BRAINX_NEST_PYTHON to a Python "
                                "with NEST (pip install nest-simulator) to compare with NEST")

H, DELAY, T = 0.1, 1.0, 60.0
PARAMS = dict(C_m=250.0, tau_m=10.0, tau_syn_ex=0.5, tau_syn_in=0.5, E_L=-65.0, V_th=-50.0,
              V_reset=-65.0, t_ref=2.0, I_e=300.0, V_m=-58.0)
# (spike time in ms, weight in pA): excitatory and inhibitory, a burst that crosses threshold,
# one arriving while the neuron is refractory, two in one step
SPIKES = [(2.0, 800.0), (3.5, -1500.0), (6.0, 5000.0), (7.0, 9000.0), (7.0, -1000.0),
          (15.0, 6000.0), (15.2, 6000.0), (30.0, -3000.0), (40.0, 4000.0), (40.1, 4000.0),
          (41.0, 2500.0)]

SCRIPT = textwrap.dedent("""
    import json, sys
    import nest
    spec = json.load(sys.stdin)
    nest.set_verbosity("M_ERROR")
    nest.ResetKernel()
    nest.resolution = spec["h"]
    n = nest.Create("iaf_psc_exp", params=spec["params"])
    mm = nest.Create("multimeter", params={"record_from": ["V_m"], "interval": spec["h"]})
    sr = nest.Create("spike_recorder")
    for t, w in spec["spikes"]:
        sg = nest.Create("spike_generator", params={"spike_times": [t]})
        nest.Connect(sg, n, syn_spec={"weight": w, "delay": spec["delay"]})
    nest.Connect(mm, n)
    nest.Connect(n, sr)
    nest.Simulate(spec["T"] + spec["delay"])
    ev = mm.get("events")
    print(json.dumps({"t": [float(x) for x in ev["times"]], "V": [float(x) for x in ev["V_m"]],
                      "spikes": [float(x) for x in sr.get("events")["times"]]}))
""")


def nest_trace():
    spec = {"h": H, "delay": DELAY, "T": T, "params": PARAMS, "spikes": SPIKES}
    done = subprocess.run([NEST_PYTHON, "-c", SCRIPT], input=json.dumps(spec), text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    t, V = np.array(out["t"]), np.array(out["V"])
    keep = t <= T + H / 2
    return t[keep], V[keep], np.array(out["spikes"])


def brainx_trace():
    steps = int(round(T / H))
    x = np.zeros(steps)
    for t, w in SPIKES:
        x[int(round((t + DELAY) / H)) - 1] += w
    p = PARAMS
    with brainx.environ.context(dt=H * u.ms):
        n = nn.init_all_states(nn.IafPscExp(
            1, C_m=p["C_m"] * u.pF, tau_m=p["tau_m"] * u.ms, tau_syn_ex=p["tau_syn_ex"] * u.ms,
            E_L=p["E_L"] * u.mV, V_th=p["V_th"] * u.mV, V_reset=p["V_reset"] * u.mV,
            t_ref=p["t_ref"] * u.ms, I_e=p["I_e"] * u.pA, V_initializer=p["V_m"] * u.mV))
        step = brainx.transform.jit(lambda xj: (n.update(xj * u.pA), n.V.value.to_decimal(u.mV)))
        spikes, V = [], []
        for k in range(steps):
            s, v = step(np.float32(x[k]))
            V.append(float(v[0]))
            if float(s[0]):
                spikes.append((k + 1) * H)             # NEST stamps a spike at the step's end
    return (np.arange(steps) + 1) * H, np.array(V), np.array(spikes)


def test_membrane_trace_and_spikes_equal_nest():
    t_n, V_n, s_n = nest_trace()
    t_b, V_b, s_b = brainx_trace()
    assert len(s_n) >= 3                               # the drive does cross threshold
    np.testing.assert_allclose(t_b, t_n, atol=1e-9)
    np.testing.assert_allclose(s_b, s_n, atol=1e-9)
    # float32 against NEST's double: a few ulps of a potential of ~65 mV
    err = np.abs(V_b - V_n)
    assert err.max() < 2e-4, (err.max(), t_n[np.argmax(err)])
