"""A small recurrent network and its data-parallel training step, shared by the tests."""

import jax
import jax.numpy as jnp
import numpy as np

import brainx
from brainx import nn
from jax.sharding import PartitionSpec as P


class Net(nn.Module):
    def __init__(self, n_in=6, n_rec=16, n_out=3):
        super().__init__()
        self.rec = nn.Linear(n_in + n_rec, n_rec)
        self.out = nn.Linear(n_rec, n_out)
        self.n_rec = n_rec

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainx.HiddenState(jnp.zeros((batch_size, self.n_rec)))

    def update(self, x):
        self.h.value = jnp.tanh(self.rec(jnp.concatenate([x, self.h.value], axis=-1)))
        return self.out(self.h.value)


def build(batch, seed=0):
    brainx.random.seed(seed)
    net = nn.init_all_states(Net(), batch_size=batch)
    params = net.states(brainx.ParamState)
    opt = brainx.optim.SGD(lr=0.1)
    opt.register_trainable_weights(params)
    return net, params, opt


def data(batch, T=5, seed=0):
    rng = np.random.RandomState(seed)
    xs = jnp.asarray(rng.randn(T, batch, 6).astype(np.float32))
    labels = jnp.asarray(rng.randint(3, size=batch))
    return xs, labels


def make_loss(net):
    def loss(xs, labels):
        nn.reset_all_states(net, batch_size=xs.shape[1])
        logits = brainx.transform.for_loop(net.update, xs)[-1]
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()
    return loss


def jit_step(net, params, opt):
    """One compiled SGD step; on a mesh, XLA partitions it by the states' shardings."""
    loss_fn = make_loss(net)

    @brainx.transform.jit
    def step(xs, labels):
        grads, loss = brainx.transform.grad(loss_fn, grad_states=params,
                                            return_value=True)(xs, labels)
        opt.update(grads)
        return loss
    return step


def shard_map_step(net, params, opt, mesh):
    """The same step as per-device code: each device's batch block, gradients averaged by pmean."""
    loss_fn = make_loss(net)

    def local(xs, labels):
        grads, loss = brainx.transform.grad(loss_fn, grad_states=params,
                                            return_value=True)(xs, labels)
        grads = jax.lax.pmean(grads, "data")
        opt.update(grads)
        return jax.lax.pmean(loss, "data")

    return brainx.transform.jit(brainx.transform.shard_map(
        local, mesh=mesh, in_specs=(P(None, "data"), P("data")), out_specs=P(),
        state_in_specs={net.h: P("data")}))


def train(step, batches):
    return [float(step(xs, labels)) for xs, labels in batches]
