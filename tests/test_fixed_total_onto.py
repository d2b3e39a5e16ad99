"""nn.fixed_total_number_onto: the connector drawn by target block, and its partitioned projection's
checks on one device (the multi-device runs are tests/multidevice/test_brain_scale.py)."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn

KW = dict(sizes_pre=[50, 14], sizes_post=[50, 14], counts=[[400, 120], [90, 30]],
          weight_mean=[[1.0, -4.0], [1.0, -4.0]], weight_sd=[[0.1, 0.4], [0.1, 0.4]],
          delay_mean=[1.5, 0.75], delay_sd=[0.75, 0.375], dt=0.1, seed=11, chunk=16)


def _coo(conn, lo=0):
    rows = np.repeat(np.arange(conn.n_pre), np.diff(conn.indptr))
    return rows, conn.targets + lo, conn.delays, conn.weights


def test_blocks_of_any_split_are_the_whole_restricted_to_them():
    whole = nn.fixed_total_number_onto(**KW)
    rows, targets, delays, weights = _coo(whole)
    for edges in ([0, 64], [0, 32, 64], [0, 8, 24, 40, 64], [0, 5, 17, 64]):
        got = [_coo(nn.fixed_total_number_onto(**KW, targets=(lo, hi)), lo)
               for lo, hi in zip(edges[:-1], edges[1:])]
        for (r, t, d, w), lo, hi in zip(got, edges[:-1], edges[1:]):
            keep = (targets >= lo) & (targets < hi)
            for a, b in zip((r, t, d, w), (rows, targets, delays, weights)):
                np.testing.assert_array_equal(a, b[keep])


def test_counts_per_pair_and_sign_of_weights():
    whole = nn.fixed_total_number_onto(**KW)
    rows, targets, _, weights = _coo(whole)
    pair = (targets >= 50).astype(int) * 2 + (rows >= 50)
    assert np.bincount(pair, minlength=4).tolist() == [400, 120, 90, 30]
    assert np.all(weights[rows < 50] >= 0) and np.all(weights[rows >= 50] <= 0)
    assert whole.delays.min() >= 1


def test_padding_rows_and_targets_receive_nothing():
    conn = nn.fixed_total_number_onto(**KW, targets=(48, 72), n_pre=72)
    assert conn.n_pre == 72 and conn.n_post == 24
    assert np.all(np.diff(conn.indptr)[64:] == 0) and conn.targets.max() < 16


def _partition(n=16):
    mesh = brainx.distributed.make_mesh((1,), ("neurons",))
    return brainx.distributed.NeuronPartition(mesh, "neurons", n)


def test_partition_names_the_padded_size():
    mesh = brainx.distributed.make_mesh((1,), ("neurons",))
    with pytest.raises(ValueError, match="give the network 16 neurons"):
        brainx.distributed.NeuronPartition(mesh, "neurons", 13)
    with pytest.raises(ValueError, match="not 'cells'"):
        brainx.distributed.NeuronPartition(mesh, "cells", 16)


def _connect(lo, hi):
    return nn.fixed_total_number_onto([16], [16], [[40]], [[1.0]], [[0.0]], [0.3], [0.05],
                                      dt=0.1, delay_min=0.25, seed=1, targets=(lo, hi),
                                      unit=u.pA)


def test_exchange_every_longer_than_the_shortest_delay_is_refused():
    with pytest.raises(ValueError, match="shortest delay is 3 steps"):
        brainx.distributed.PartitionedDelayedConn(_partition(), _connect, exchange_every=4)


def test_partition_places_neuron_states_and_keeps_declared_ones():
    part = _partition()
    neurons = nn.LIF(16)
    proj = brainx.distributed.PartitionedDelayedConn(part, _connect, exchange_every=3)
    net = {"neurons": neurons, "proj": proj}
    part.init_all_states(net)
    assert neurons.V.sharding.spec == part.spec(1)
    assert proj.buffer.sharding.spec == part.spec(2) and proj.history.value.shape == (3, 16)
    assert proj.weight.value.shape == (1, proj.block_nnz)
    with pytest.raises(ValueError, match=r"must be \(16,\)"):
        proj.update(jnp.zeros(8, bool))


def test_balanced_order_relabels_the_same_synapses_and_keeps_every_block_in_proportion():
    pos = brainx.distributed.balanced_order(KW["sizes_post"])
    whole = nn.fixed_total_number_onto(**KW)
    stored = nn.fixed_total_number_onto(**KW, position=pos)
    rows, targets, delays, weights = _coo(whole)
    key = lambda r, t: np.lexsort((t, r))                             # noqa: E731
    a = key(pos[rows], pos[targets])
    r2, t2, d2, w2 = _coo(stored)
    b = key(r2, t2)
    for x, y in ((pos[rows][a], r2[b]), (pos[targets][a], t2[b]), (delays[a], d2[b]),
                 (weights[a], w2[b])):
        np.testing.assert_array_equal(x, y)
    blocks = [nn.fixed_total_number_onto(**KW, position=pos, targets=(lo, lo + 16))
              for lo in range(0, 64, 16)]
    assert sum(b.nnz for b in blocks) == whole.nnz
    inhibitory = np.arange(64) >= 50            # 14 of 64: 3 or 4 in every block of 16
    assert [int(np.sum(inhibitory & (pos >= lo) & (pos < lo + 16))) for lo in range(0, 64, 16)] \
        in ([3, 4, 3, 4], [4, 3, 4, 3], [3, 4, 4, 3], [4, 3, 3, 4])
    with pytest.raises(ValueError, match="increasing within each population"):
        nn.fixed_total_number_onto(**KW, position=pos[::-1].copy())
