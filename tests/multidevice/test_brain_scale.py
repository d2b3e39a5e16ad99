"""A spiking network partitioned over 8 fake devices against one device (issue 46).

The microcircuit of examples/partitioned_microcircuit.py at a small scale and for
few steps here (the 1000-step scale-0.1 runs under --long): the same spikes on 1
and 8 devices, with the spikes exchanged every step or every 5; one all-gather of
packed bits in the compiled step and nothing else; the synapses per device falling
as 1/P; BPTT gradients of a small partitioned network equal to one device's; a network
saved block by block on 8 devices continues bit for bit on 1 (and 4) devices.
"""

import pathlib
import sys

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brainx
from brainx import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import microcircuit_model as model  # noqa: E402
import partitioned_microcircuit as pm  # noqa: E402


@pytest.fixture(autouse=True)
def _dt():
    with brainx.environ.context(dt=model.DT_MS * u.ms):
        yield


def _long(request) -> bool:
    return request.config.getoption("--long", default=False)


@pytest.fixture
def long_only(request):
    if not _long(request):
        pytest.skip("make test-long (--long)")


def test_eight_devices_equal_the_plain_microcircuit_on_one_device(request):
    """model.Microcircuit (DelayedEventConn, one device) against the partitioned network."""
    scale, steps = (0.1, 1000) if _long(request) else (0.05, 300)
    params = pm.exact_parameters(scale)
    n = int(params["sizes"].sum())
    conn = pm.connector(params, n, 55)(0, n)                 # every synapse, one CSR
    plain = nn.init_all_states(model.Microcircuit(params, conn, seed=55))
    ref = pm.simulate(plain, steps, n)
    assert ref.sum() > 100
    np.testing.assert_array_equal(ref, pm.simulate(pm.build(scale, 8), steps, n))


def test_exchange_every_five_steps_on_eight_devices_equals_every_step_on_one(request):
    """Both stored in balanced_order (the contiguous layout: the test above)."""
    scale, steps = (0.1, 1000) if _long(request) else (0.05, 300)
    one = pm.simulate(pm.build(scale, 1, every=1, delay_min_ms=0.45, balanced=True), steps, None)
    net = pm.build(scale, 8, every=5, delay_min_ms=0.45, balanced=True)
    assert one.sum() > 100
    np.testing.assert_array_equal(one[:, :net.n], pm.simulate(net, steps, net.n))


@pytest.mark.parametrize("every,delay_min", [(1, 0.05), (5, 0.45)])
def test_microcircuit_at_scale_0_1_for_1000_steps(long_only, every, delay_min):
    one = pm.simulate(pm.build(0.1, 1, every=every, delay_min_ms=delay_min), 1000, None)
    net = pm.build(0.1, 8, every=every, delay_min_ms=delay_min)
    eight = pm.simulate(net, 1000, net.n)
    assert one.sum() > 1000
    np.testing.assert_array_equal(one[:, :net.n], eight)


def _step_hlo(net):
    step = brainx.transform.jit(net.update)
    return step.lower().compile()


@pytest.mark.parametrize("every", [5, 1])
def test_one_all_gather_of_packed_bits_per_exchange_and_nothing_else(request, every):
    if every == 1 and not _long(request):
        pytest.skip("make test-long (--long)")
    net = pm.build(0.02, 8, every=every, delay_min_ms=0.45)
    compiled = _step_hlo(net)
    ops = brainx.distributed.hlo_collectives(compiled)
    block = net.n_padded // 8
    shape = f"u8[{net.n_padded // 8}]" if every == 1 else f"u8[{every},{net.n_padded // 8}]"
    assert [(op.kind, op.shape, op.in_conditional) for op in ops] == [
        ("all-gather", shape, every > 1)], ops
    assert ops[0].bytes == every * block        # n / 8 bytes per step: bits, not floats
    assert brainx.distributed.collectives_per_step(compiled, every) == {"all-gather": 1 / every}
    assert net.recurrent.exchange_bytes_per_step() == net.n_padded / 8


@pytest.mark.parametrize("balanced", [False, True])
def test_synapses_per_device_fall_as_one_over_p(balanced):
    sizes = {}
    for p in (1, 8):
        net = pm.build(0.02, p, balanced=balanced)
        sizes[p] = (net.recurrent.block_bytes(), net.recurrent.block_nnz)
    nnz = net.recurrent.nnz
    # blocks of consecutive neurons: the populations' in-degrees differ, so the largest block
    # (every device's padded size) has up to 40 % more than the mean at P = 8; stored in
    # balanced_order, every block holds a share of every population
    assert nnz / 8 <= sizes[8][1] < (1.05 if balanced else 1.4) * nnz / 8
    # the synapses fall as 1/P; the row index (n + 2 int32 per device) does not
    assert sizes[8][0] < (0.14 if balanced else 0.2) * sizes[1][0]


def test_balanced_order_at_scale_0_1_for_1000_steps(long_only):
    one = pm.simulate(pm.build(0.1, 1, balanced=True), 1000, None)
    net = pm.build(0.1, 8, balanced=True)
    assert one.sum() > 1000
    np.testing.assert_array_equal(one[:, :net.n], pm.simulate(net, 1000, net.n))


def test_the_whole_connectivity_never_exists_on_one_host(monkeypatch):
    asked = []
    real = nn.fixed_total_number_onto

    def spy(*args, **kwargs):
        asked.append(kwargs["targets"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pm.nn, "fixed_total_number_onto", spy)
    pm.build(0.02, 8)
    blocks = sorted(asked)
    assert len(blocks) == 8 and all(hi - lo == blocks[0][1] - blocks[0][0] for lo, hi in blocks)


class _SmallNet(nn.Module):
    """64 LIF neurons, random delayed recurrent synapses, a constant drive; float spikes with a
    surrogate gradient go through the exchange."""

    def __init__(self, partition, every=1, native=None):
        super().__init__()
        n = partition.n
        self.neurons = nn.IafPscExp(n, tau_syn_ex=0.5 * u.ms, E_L=-65 * u.mV, V_th=-50 * u.mV,
                                    V_reset=-65 * u.mV, I_e=np.linspace(380, 480, n) * u.pA,
                                    V_initializer=np.linspace(-65, -51, n).astype(np.float32) * u.mV)

        def connect(lo, hi):
            return nn.fixed_total_number_onto([n], [n], [[6 * n]], [[40.0]], [[8.0]], [0.3],
                                              [0.1], dt=0.1, delay_min=0.25, seed=3,
                                              targets=(lo, hi), chunk=8, unit=u.pA)
        self.recurrent = brainx.distributed.PartitionedDelayedConn(partition, connect,
                                                                   exchange_every=every,
                                                                   native=native)

    def update(self):
        spikes = self.neurons.update(self.recurrent.current())
        self.recurrent.update(spikes)
        return spikes


def _grads(p, every, loop=brainx.transform.for_loop, native=None):
    part = pm.partition_of(64, p)
    net = part.init_all_states(_SmallNet(part, every, native))

    def loss():
        def step(_):
            s = net.update()
            return (u.get_mantissa(net.neurons.V.value) + 65.0).mean() + s.mean()
        return loop(step, jnp.arange(40)).sum()

    g = brainx.transform.jit(brainx.transform.grad(loss, grad_states=net.recurrent.weight))()
    return np.asarray(u.get_mantissa(g)), net.recurrent


def _by_block(grads, proj, blocks):
    """One device's synapse order (row, then drawing order) rearranged into ``blocks`` blocks."""
    indptr = np.asarray(proj.indptr.value)[0]
    nnz = int(indptr[-2])
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))[:nnz]
    targets = np.asarray(proj.targets.value)[0, :nnz]
    order = np.lexsort((np.arange(nnz), rows, targets // (proj.n // blocks)))
    return grads[0, :nnz][order]


@pytest.mark.parametrize("every,loop,native", [(1, "for_loop", None), (2, "for_loop", None),
                                               (1, "checkpointed_for_loop", None),
                                               (1, "for_loop", False)])
def test_bptt_gradients_of_a_partitioned_network_equal_one_device(request, every, loop, native):
    """native=False: the plain-JAX delivery (what GPUs run) on 8 devices, against the native
    kernel on one."""
    if (every, loop, native) != (1, "for_loop", None) and not _long(request):
        pytest.skip("make test-long (--long)")
    loop = getattr(brainx.transform, loop)
    g1, proj1 = _grads(1, every, loop)
    g8, proj8 = _grads(8, every, loop, native)
    valid = [np.asarray(proj8.indptr.value)[b, -2] for b in range(8)]
    got = np.concatenate([g8[b, :valid[b]] for b in range(8)])
    want = _by_block(g1, proj1, 8)
    assert np.abs(want).max() > 0
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7 * np.abs(want).max())


@pytest.mark.parametrize("devices_after", [1, 4])
def test_saved_on_eight_devices_continues_on_another_count_bit_for_bit(request, tmp_path,
                                                                      devices_after):
    if devices_after == 4 and not _long(request):
        pytest.skip("make test-long (--long)")
    whole = pm.simulate(pm.build(0.05, 8), 300, None)
    first = pm.build(0.05, 8)
    before = pm.simulate(first, 150, None)
    brainx.io.save_partitioned(tmp_path, first, first.recurrent.partition)
    assert len(list(tmp_path.glob("block-*.msgpack"))) == 8
    again = pm.build(0.05, devices_after)          # drawn again, then overwritten by the save
    brainx.io.load_partitioned(tmp_path, again, again.recurrent.partition)
    after = pm.simulate(again, 150, again.n)
    assert whole.sum() > 100
    np.testing.assert_array_equal(np.concatenate([before[:, :again.n], after]), whole[:, :again.n])


def test_a_projection_rebuilt_from_saved_synapses_equals_the_drawn_one(tmp_path):
    net = pm.build(0.02, 8)
    brainx.io.save_partitioned(tmp_path, net, net.recurrent.partition)
    part = pm.partition_of(net.n, 2)
    rebuilt = brainx.distributed.PartitionedDelayedConn(
        part, brainx.io.saved_synapses(tmp_path, "recurrent", part.n, u.pA))
    drawn = pm.build(0.02, 2).recurrent
    for name in ("indptr", "targets", "delays"):
        np.testing.assert_array_equal(np.asarray(getattr(rebuilt, name).value),
                                      np.asarray(getattr(drawn, name).value))


def test_spike_indices_rebuild_the_spikes_and_fall_back_to_bits_when_full():
    from jax.sharding import PartitionSpec as P
    mesh = brainx.distributed.make_mesh((8,), ("neurons",))
    both = jax.jit(jax.shard_map(
        lambda s: (brainx.distributed.exchange_spike_indices(s, "neurons", capacity=3),
                   brainx.distributed.exchange_spikes(s, "neurons")),
        mesh=mesh, in_specs=P("neurons"), out_specs=P(), check_vma=False))
    rng = np.random.default_rng(0)
    for p in (0.0, 0.02, 0.3):                  # none; at most 3 a device; many (bits)
        spikes = jnp.asarray(rng.random(128) < p)
        by_index, by_bits = both(spikes)
        np.testing.assert_array_equal(by_index, spikes)
        np.testing.assert_array_equal(by_bits, spikes)
    ops = brainx.distributed.hlo_collectives(both.lower(spikes).compile())
    kinds = sorted((op.kind, op.shape, op.in_conditional) for op in ops)
    assert ("all-gather", "s32[8,4]", False) in kinds and ("all-gather", "u8[16]", True) in kinds


def test_microcircuit_exchanging_indices_gives_the_bits_spikes(long_only):
    bits = pm.simulate(pm.build(0.05, 8), 300, None)
    net = pm.build(0.05, 8, spike_capacity=8)
    assert net.recurrent.exchange_bytes_per_step() == 4 * 9 * 8
    np.testing.assert_array_equal(pm.simulate(net, 300, None), bits)


@pytest.mark.parametrize("native", [None, False])
def test_a_partitioned_poisson_background_draws_one_block_per_device(native):
    """The same counts as one device, each device drawing only its block (the native call in
    the compiled step is of n / 8 numbers, not n)."""
    n = 8 * 24
    rate = np.repeat([2000.0, 16000.0, 23000.0], n // 3) * u.Hz
    one = nn.PoissonBackground(n, rate=rate, weight=1.0 * u.pA, seed=4, native=native)
    mesh = brainx.distributed.make_mesh((8,), ("neurons",))
    part = brainx.distributed.NeuronPartition(mesh, "neurons", n)
    split = part.init_all_states(nn.PoissonBackground(n, rate=rate, weight=1.0 * u.pA, seed=4,
                                                      native=native))
    draw = lambda bg: brainx.transform.jit(                                   # noqa: E731
        lambda: brainx.transform.for_loop(lambda _: bg.counts(), jnp.arange(5)))
    np.testing.assert_array_equal(np.asarray(draw(split)()), np.asarray(draw(one)()))
    if native is None and jax.default_backend() == "cpu":
        text = brainx.transform.jit(split.counts).lower().compile().as_text()
        assert "brainx_poisson_counts" in text and f"s32[{n // 8}]" in text
