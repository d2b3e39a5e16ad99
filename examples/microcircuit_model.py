"""The Potjans & Diesmann (2014) cortical microcircuit, as NEST's reference implementation runs it.
================================================================================================

The parameters and the rules are those of the model's specification (docs/microcircuit.md
summarises it; written from NEST's PyNEST example): eight populations (L23E ... L6I), synapse
counts from the connection probabilities by the fixed-total-number rule with *full-scale*
sizes, weights from PSP amplitudes (585.39 pA per mV), per-synapse delays (normal, redrawn
below 0.05 ms, rounded to the 0.1 ms grid), down-scaling with weights / sqrt(f), the background
in-degree times f and the lost mean input restored by a DC ``Delta I_y``, and the optimized
initial potentials.

:func:`network_parameters` computes every number of the model for a scale; :func:`build` draws
the recurrent synapses (all 64 population pairs in one CSR by source, in seconds:
:func:`brainx.nn.fixed_total_number_blocks`); :class:`Microcircuit` is the network: one
:class:`brainx.nn.IafPscExp` population of all neurons, one
:class:`brainx.nn.DelayedEventConn` of all recurrent synapses, and the background (Poisson,
one draw per neuron and step, or DC).

Examples
--------
>>> p = network_parameters(scale=0.1)
>>> p["sizes"].tolist(), int(p["counts"].sum())
([2068, 583, 2192, 548, 485, 106, 1440, 295], 2988807)
>>> [round(float(i), 1) for i in p["I_e"]]        # Poisson background: ΔI only
[29.0, 112.4, 113.0, 115.0, 125.4, 151.7, 43.8, 153.7]
"""

from __future__ import annotations

import os
from typing import Optional

import brainunit as u
import numpy as np

import brainx
from brainx import nn

POPULATIONS = ("L23E", "L23I", "L4E", "L4I", "L5E", "L5I", "L6E", "L6I")
FULL_SIZES = np.array([20683, 5834, 21915, 5479, 4850, 1065, 14395, 2948])
#: connection probabilities [target, source] (the thalamic column left out: no thalamus here)
CONN_PROBS = np.array([
    [0.1009, 0.1689, 0.0437, 0.0818, 0.0323, 0.0, 0.0076, 0.0],
    [0.1346, 0.1371, 0.0316, 0.0515, 0.0755, 0.0, 0.0042, 0.0],
    [0.0077, 0.0059, 0.0497, 0.1350, 0.0067, 0.0003, 0.0453, 0.0],
    [0.0691, 0.0029, 0.0794, 0.1597, 0.0033, 0.0, 0.1057, 0.0],
    [0.1004, 0.0622, 0.0505, 0.0057, 0.0831, 0.3726, 0.0204, 0.0],
    [0.0548, 0.0269, 0.0257, 0.0022, 0.0600, 0.3158, 0.0086, 0.0],
    [0.0156, 0.0066, 0.0211, 0.0166, 0.0572, 0.0197, 0.0396, 0.2252],
    [0.0364, 0.0010, 0.0034, 0.0005, 0.0277, 0.0080, 0.0658, 0.1443]])
K_EXT = np.array([1600, 1500, 2100, 1900, 2000, 1900, 2900, 2100])
FULL_MEAN_RATES = np.array([0.903, 2.965, 4.414, 5.876, 7.569, 8.633, 1.105, 7.829])   # Hz
V0_MEAN = np.array([-68.28, -63.16, -63.33, -63.45, -63.11, -61.66, -66.72, -61.43])  # mV
V0_SD = np.array([5.36, 4.57, 4.74, 4.94, 4.94, 4.55, 5.46, 4.48])                      # mV
EXCITATORY = np.array([True, False] * 4)
DT_MS, BG_RATE_HZ, TAU_SYN_MS = 0.1, 8.0, 0.5
C_M_PF, TAU_M_MS = 250.0, 10.0
PSP_E_MV, G = 0.15, -4.0
DELAY_MEAN_MS = np.where(EXCITATORY, 1.5, 0.75)
NEURON = dict(C_m=C_M_PF * u.pF, tau_m=TAU_M_MS * u.ms, tau_syn_ex=TAU_SYN_MS * u.ms,
              E_L=-65.0 * u.mV, V_th=-50.0 * u.mV, V_reset=-65.0 * u.mV, t_ref=2.0 * u.ms)


def psc_per_psp() -> float:
    """pA of current jump per mV of PSP peak (585.39 for the model's constants)."""
    ts, tm, c = TAU_SYN_MS, TAU_M_MS, C_M_PF
    t_max = ts * tm / (tm - ts) * np.log(tm / ts)
    return 1.0 / (ts * tm / (c * (tm - ts)) * (np.exp(-t_max / tm) - np.exp(-t_max / ts)))


def full_scale_counts() -> np.ndarray:
    """``Q_yx`` at full scale (float), from the probabilities and the full-scale sizes."""
    pairs = np.outer(FULL_SIZES, FULL_SIZES).astype(np.float64)
    return np.log(1.0 - CONN_PROBS) / np.log(1.0 - 1.0 / pairs)


def network_parameters(scale: float = 1.0, background: str = "poisson") -> dict:
    """Every number of the model at ``scale`` (N_scaling = K_scaling = scale)."""
    if background not in ("poisson", "dc"):
        raise ValueError(f"background must be 'poisson' or 'dc', got {background!r}.")
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}.")
    f = float(scale)
    sizes = np.round(FULL_SIZES * f).astype(np.int64)            # NumPy rounding, halves to even
    q_full = full_scale_counts()
    counts = np.round(q_full * f * f).astype(np.int64)           # N_scaling * K_scaling
    w_e = PSP_E_MV * psc_per_psp()                               # 87.8085 pA
    w_full = np.where(EXCITATORY[None, :], w_e, G * w_e) * np.ones((8, 8))
    w_full[0, 2] = 2 * w_e                                       # L4E -> L23E doubled
    k_full = q_full / FULL_SIZES[:, None]                        # in-degrees at full scale
    k_ext = np.round(K_EXT * f).astype(np.int64)
    rates = FULL_MEAN_RATES * 1e-3                               # 1/ms
    loss = 1.0 - np.sqrt(f)
    delta_i = TAU_SYN_MS * loss * (w_full * k_full * rates[None, :]).sum(axis=1)
    if background == "poisson":
        delta_i = delta_i + TAU_SYN_MS * loss * w_e * K_EXT * BG_RATE_HZ * 1e-3
        i_e = delta_i
    else:
        i_e = BG_RATE_HZ * 1e-3 * K_EXT * w_e * TAU_SYN_MS + delta_i
    return dict(scale=f, background=background, sizes=sizes, counts=counts,
                weight_mean=w_full / np.sqrt(f), weight_sd=0.1 * np.abs(w_full) / np.sqrt(f),
                w_ext=w_e / np.sqrt(f), k_ext=k_ext, I_e=i_e,
                delay_mean=DELAY_MEAN_MS, delay_sd=0.5 * DELAY_MEAN_MS)


def build(params: dict, seed: int = 55, progress: Optional[bool] = None) -> nn.DelayedCSR:
    """Draw the recurrent synapses: one CSR by source over all neurons, weights in pA."""
    return nn.fixed_total_number_blocks(
        params["sizes"], params["sizes"], params["counts"], params["weight_mean"] * u.pA,
        params["weight_sd"] * u.pA, params["delay_mean"] * u.ms, params["delay_sd"] * u.ms,
        dt=DT_MS * u.ms, delay_min=0.05 * u.ms, seed=seed, progress=progress)


def cached_build(params: dict, seed: int, path: Optional[str],
                 progress: Optional[bool] = None) -> tuple:
    """:func:`build`, or the synapses a previous run saved at ``path`` with :mod:`brainx.io`
    (the arrays as States; the file is named by scale and seed). Returns ``(conn, loaded)``."""
    n, nnz = int(params["sizes"].sum()), int(params["counts"].sum())
    if path and os.path.exists(path):
        like = nn.DelayedCSR.placeholder(n, n, nnz, unit=u.pA)
        return nn.DelayedCSR.from_states(brainx.io.load(path, like.as_states())), True
    conn = build(params, seed, progress)
    if path:
        brainx.io.save(path, conn.as_states())
    return conn, False


class Microcircuit(nn.Module):
    """All populations as one ``IafPscExp`` of ``sum(sizes)`` neurons, the recurrent synapses
    as one ``DelayedEventConn``; background Poisson (in the step) or DC (in ``I_e``)."""

    def __init__(self, params: dict, conn: nn.DelayedCSR, seed: int = 55):
        super().__init__()
        sizes = params["sizes"]
        self.sizes, self.n = sizes, int(sizes.sum())
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        per_neuron = lambda v: np.repeat(np.asarray(v, np.float64), sizes)    # noqa: E731
        rng = np.random.default_rng(seed + 1)
        v0 = rng.normal(per_neuron(V0_MEAN), per_neuron(V0_SD)).astype(np.float32)
        self.neurons = nn.IafPscExp(self.n, **NEURON, I_e=per_neuron(params["I_e"]) * u.pA,
                                    V_initializer=v0 * u.mV)
        self.recurrent = nn.DelayedEventConn(conn, release=True)
        # Poisson background: K_ext,y * 8 Hz per neuron through weight w_ext (its fixed 1.5 ms
        # delay changes nothing for independent Poisson input), drawn in the step
        self.background = (nn.PoissonBackground(self.n, rate=per_neuron(params["k_ext"]) *
                                                BG_RATE_HZ * u.Hz, weight=params["w_ext"] * u.pA,
                                                seed=seed + 2)
                           if params["background"] == "poisson" else None)

    def update(self):
        """One step: arrivals (recurrent + background) in, this step's spikes out (bool)."""
        current = self.recurrent.current()
        if self.background is not None:
            current = current + self.background.update()
        spikes = self.neurons.update(current) > 0
        self.recurrent.update(spikes)
        return spikes

    def population_of(self, neuron: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, neuron, side="right") - 1
