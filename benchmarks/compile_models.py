"""The realistic models of ``compile_time.py``'s phases table, each built for brainx and raw JAX.

A. a 10-layer model of 1000 small states: 50 neuron groups per layer, each with a
   ``ParamState`` (a plastic weight, Hebbian update) and a ``HiddenState``, every state read
   and written, with ``jnp.clip`` / ``jnp.where`` per group and ``jnp.linalg.norm`` per layer.
B. an SNN training step by BPTT: 100 Poisson inputs -> 256 recurrent LIF (arctan surrogate,
   soft reset) -> 10 leaky readouts (exponential synapses), T=200, batch 64, cross-entropy,
   one Adam step.

Each builder makes everything anew (model, states, step function, transform object) and
returns a ``Built``: ``jitted.lower(*args)`` lowers it (for brainx, the
``brainx.transform.jit`` object's ``lower``; for raw JAX, ``jax.jit(f).lower``), ``call()``
runs its first call and returns what it computed (the outputs and the states' new values, raw
JAX's explicitly, brainx's read from the states), which ``check_model`` / ``check_snn``
compare between the sides.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import brainx
from brainx import transform as bt


class Counter:
    """How many times a step function ran."""

    def __init__(self):
        self.n = 0


class Built:
    def __init__(self, jitted, args, call, counter):
        self.jitted, self.args, self.call, self.counter = jitted, args, call, counter


# -- A. a 10-layer model of 1000 small states ------------------------------------------------
#
# Each layer holds GROUPS neuron groups of GSIZE units; a group has a ParamState ``w`` (a
# plastic weight) and a HiddenState ``v``: 10 x 50 x 2 = 1000 states. The step sends the input
# through the layers; in a layer every group integrates it, clipped (``jnp.clip``) and rectified
# (``jnp.where``), with a Hebbian update of its ``w``; the layer's output is the sum of its
# groups', normalised (``jnp.linalg.norm``). Every state is read and written.

LAYERS, GROUPS, GSIZE = 10, 50, 8


def _group(w, v, x):
    v = jnp.clip(0.9 * v + w * x, -1.0, 1.0)
    y = jnp.where(v > 0.1, v, 0.0)
    w = w + 1e-2 * (y * x - y * y * w)        # Oja's rule
    return w, v, y


def _mix(ys):
    h = sum(ys)
    return jnp.tanh(h / (jnp.linalg.norm(h) + 1e-6))


def _model_init(seed=0):
    """Initial values, ``[layer][group] -> (w, v)``, the same for both sides."""
    rng = np.random.RandomState(seed)
    return [[(rng.uniform(0.1, 1.0, GSIZE).astype(np.float32),
              rng.uniform(-0.5, 0.5, GSIZE).astype(np.float32)) for _ in range(GROUPS)]
            for _ in range(LAYERS)]


def raw_model_step(x):
    c = Counter()
    init = _model_init()
    params = {f"layers.{i}.w.{j}": jnp.asarray(w) for i, layer in enumerate(init)
              for j, (w, _) in enumerate(layer)}
    hidden = {f"layers.{i}.v.{j}": jnp.asarray(v) for i, layer in enumerate(init)
              for j, (_, v) in enumerate(layer)}

    def step(params, hidden, x):
        c.n += 1
        params, hidden = dict(params), dict(hidden)
        for i in range(LAYERS):
            ys = []
            for j in range(GROUPS):
                wk, vk = f"layers.{i}.w.{j}", f"layers.{i}.v.{j}"
                params[wk], hidden[vk], y = _group(params[wk], hidden[vk], x)
                ys.append(y)
            x = _mix(ys)
        return x, params, hidden

    f = jax.jit(step)
    return Built(f, (params, hidden, x), lambda: f(params, hidden, x), c)


class _Layer(brainx.nn.Module):
    def __init__(self, values):
        super().__init__()
        self.w = [brainx.ParamState(jnp.asarray(w)) for w, _ in values]
        self.v = [brainx.HiddenState(jnp.asarray(v)) for _, v in values]

    def update(self, x):
        ys = []
        for w, v in zip(self.w, self.v):
            w.value, v.value, y = _group(w.value, v.value, x)
            ys.append(y)
        return _mix(ys)


class _Model(brainx.nn.Module):
    def __init__(self, init):
        super().__init__()
        self.layers = [_Layer(values) for values in init]

    def update(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def brainx_model_step(x):
    c = Counter()
    net = _Model(_model_init())

    def step(x):
        c.n += 1
        return net(x)

    f = bt.jit(step)
    states = net.states()
    params, hidden = ({k: s for k, s in states.items() if isinstance(s, t)}
                      for t in (brainx.ParamState, brainx.HiddenState))
    assert len(params) + len(hidden) == LAYERS * GROUPS * 2

    def call():
        out = f(x)
        return (out, {str(k): s.value for k, s in params.items()},
                {str(k): s.value for k, s in hidden.items()})
    return Built(f, (x,), call, c)


# -- B. SNN training step by BPTT --------------------------------------------------------------
#
# 100 Poisson inputs -> 256 recurrent LIF (arctan surrogate, soft reset) -> 10 leaky readouts
# (exponential synapses), T=200 steps of dt=1, batch 64; the loss is the cross-entropy of the
# mean readout over the second half; one Adam step. brainx: brainx.nn.Linear / LIF / Expon
# (plain numbers, no units), transform.for_loop, transform.grad, brainx.optim.Adam, all under
# one transform.jit. Raw: the same equations under lax.scan, jax.grad, optax.adam, jax.jit.

SNN_IN, SNN_REC, SNN_OUT, SNN_T, SNN_BATCH, SNN_LR, SNN_TAU = 100, 256, 10, 200, 64, 1e-2, 10.0


def snn_data(seed=0):
    """Poisson spikes ``(T, batch, in)``, labels."""
    # 10 Hz everywhere, and a bump of channels up to 40 Hz whose place is the class
    rng = np.random.RandomState(seed)
    channels = np.arange(SNN_IN)
    centers = (np.arange(SNN_OUT) + 0.5) * SNN_IN / SNN_OUT
    rates = 10.0 + 30.0 * np.exp(-0.5 * ((channels[None] - centers[:, None]) / 5.0) ** 2)
    labels = rng.randint(SNN_OUT, size=SNN_BATCH)
    spikes = rng.rand(SNN_T, SNN_BATCH, SNN_IN) < rates[labels][None] * 1e-3
    return jnp.asarray(spikes.astype(np.float32)), jnp.asarray(labels)


def _snn_init(seed=1):
    rng = np.random.RandomState(seed)
    w_rec = rng.normal(0.0, 2.0 / np.sqrt(SNN_IN + SNN_REC), (SNN_IN + SNN_REC, SNN_REC))
    w_out = rng.normal(0.0, 1.0 / np.sqrt(SNN_REC), (SNN_REC, SNN_OUT))
    return (jnp.asarray(w_rec, jnp.float32), jnp.zeros(SNN_REC, jnp.float32),
            jnp.asarray(w_out, jnp.float32))


def _cross_entropy(out, labels):
    logits = out[out.shape[0] // 2:].mean(axis=0)
    ce = -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1).mean()
    return ce, (logits.argmax(axis=1) == labels).mean()


@jax.custom_jvp
def _spike(x):
    return (x >= 0).astype(x.dtype)


@_spike.defjvp
def _spike_jvp(primals, tangents):
    (x,), (tx,) = primals, tangents
    alpha = 2.0  # brainx.nn.surrogate.Arctan(alpha=2.0)
    return _spike(x), alpha / 2 / (1 + (np.pi / 2 * alpha * x) ** 2) * tx


def raw_snn_step(xs, labels):
    c = Counter()
    w_rec, b_rec, w_out = _snn_init()
    params = {"rec": {"weight": w_rec, "bias": b_rec}, "readout": {"weight": w_out}}
    tx = optax.adam(SNN_LR)
    opt_state = tx.init(params)
    decay = float(np.exp(-1.0 / SNN_TAU))

    def loss_fn(params, xs, labels):
        def body(carry, x):
            c.n += 1
            V, g = carry
            last = _spike(V - 1.0)
            current = jnp.concatenate([x, last], axis=-1) @ params["rec"]["weight"] \
                + params["rec"]["bias"]
            V = V - last                                  # soft reset by V_th - V_reset = 1
            V = current + (V - current) * decay           # exact step, R = 1, V_rest = 0
            g = g * decay + _spike(V - 1.0) @ params["readout"]["weight"]
            return (V, g), g

        batch = xs.shape[1]
        carry = (jnp.zeros((batch, SNN_REC)), jnp.zeros((batch, SNN_OUT)))
        _, out = jax.lax.scan(body, carry, xs)
        return _cross_entropy(out, labels)

    def train_step(params, opt_state, xs, labels):
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, xs, labels)
        updates, opt_state = tx.update(grads, opt_state, params)
        return loss, acc, optax.apply_updates(params, updates), opt_state

    f = jax.jit(train_step)

    def call():
        loss, acc, new, _ = f(params, opt_state, xs, labels)
        return loss, acc, [new["rec"]["weight"], new["rec"]["bias"], new["readout"]["weight"]]
    return Built(f, (params, opt_state, xs, labels), call, c)


class _SNN(brainx.nn.Module):
    def __init__(self, counter):
        super().__init__()
        w_rec, b_rec, w_out = _snn_init()
        nn = brainx.nn
        self.counter = counter
        self.rec = nn.Linear(SNN_IN + SNN_REC, SNN_REC, w_init=w_rec, b_init=b_rec)
        self.lif = nn.LIF(SNN_REC, R=1.0, tau=SNN_TAU, V_th=1.0, V_reset=0.0, V_rest=0.0,
                          V_initializer=nn.init.Constant(0.0),
                          spk_fun=nn.surrogate.Arctan(alpha=2.0))
        self.readout = nn.Linear(SNN_REC, SNN_OUT, w_init=w_out, b_init=None)
        self.out = nn.Expon(SNN_OUT, tau=SNN_TAU, g_initializer=nn.init.Constant(0.0))

    def update(self, x):
        self.counter.n += 1
        current = self.rec(jnp.concatenate([x, self.lif.get_spike()], axis=-1))
        return self.out(self.readout(self.lif(current)))


def brainx_snn_step(xs, labels):
    c = Counter()
    brainx.environ.set(dt=1.0)
    net = brainx.nn.init_all_states(_SNN(c), batch_size=SNN_BATCH)
    params = net.states(brainx.ParamState)
    opt = brainx.optim.Adam(lr=SNN_LR)
    opt.register_trainable_weights(params)

    def loss_fn(xs, labels):
        brainx.nn.reset_all_states(net, batch_size=xs.shape[1])
        return _cross_entropy(bt.for_loop(net.update, xs), labels)

    def train_step(xs, labels):
        grads, loss, acc = bt.grad(loss_fn, grad_states=params, has_aux=True,
                                   return_value=True)(xs, labels)
        opt.update(grads)
        return loss, acc

    f = bt.jit(train_step)

    def call():
        loss, acc = f(xs, labels)
        rec, out = net.rec.weight.value, net.readout.weight.value
        return loss, acc, [rec["weight"], rec["bias"], out["weight"]]
    return Built(f, (xs, labels), call, c)


# -- checks: the sides computed the same -----------------------------------------------------

def allclose(a, b, name, rtol=1e-4, atol=1e-5):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=rtol, atol=atol,
                                   err_msg=f"{name} differs from raw")


def check_model(raw, ours, name):
    out, params, hidden = raw
    b_out, b_params, b_hidden = ours
    assert set(params) == set(b_params) and set(hidden) == set(b_hidden), "state names differ"
    allclose([out, params, hidden], [b_out, b_params, b_hidden], name)


def check_snn(raw, ours, name):
    (loss, acc, new), (b_loss, b_acc, b_new) = raw, ours
    # a near-tie of two logits may flip one trial's class between the two float orders
    assert abs(float(acc) - float(b_acc)) <= 1.01 / SNN_BATCH, \
        f"{name}: accuracy {float(b_acc)} != raw {float(acc)}"
    allclose([loss, new], [b_loss, b_new], name, rtol=1e-4, atol=1e-6)
