"""A checkpointed simulation step, differentiated through a long simulation.
=========================================================================

A leaky recurrent layer is stepped T times with ``@transform.checkpoint`` on
the step; ``transform.grad`` differentiates the loss w.r.t. the weights. We
check the gradient against the un-checkpointed version and print XLA's
temporary memory for both.

Run: ``python examples/checkpointed_step.py``.
"""

# sphinx_gallery_thumbnail_path = "_static/gallery-thumbs/checkpointed_step.svg"

import argparse

import jax
import jax.numpy as jnp

import brainx
from brainx import transform


def build(n: int, seed: int = 0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    W = brainx.ParamState(jax.random.normal(k1, (n, n)) / jnp.sqrt(n), name="W")
    h = brainx.HiddenState(jnp.zeros(n), name="h")
    s = brainx.HiddenState(jnp.zeros(n), name="s")
    return W, h, s, k2


def make_loss(W, h, s, remat: bool):
    def step(x):
        h.value = 0.9 * h.value * (1 - s.value) + W.value @ x
        s.value = jax.nn.sigmoid(5 * (h.value - 1))
        return jnp.mean((s.value - 0.1) ** 2)

    step = transform.checkpoint(step, prevent_cse=False) if remat else step

    def loss(xs):
        def body(carry, x):
            h.value, s.value = carry
            err = step(x)
            return (h.value, s.value), err

        (h.value, s.value), errs = jax.lax.scan(body, (h.value, s.value), xs)
        return errs.mean()

    return transform.grad(loss, grad_states=W, return_value=True)


def main(T: int = 1000, n: int = 256):
    W, h, s, key = build(n)
    xs = jax.random.normal(key, (T, n)) * 0.5
    results = {}
    for remat in (False, True):
        h.value, s.value = jnp.zeros(n), jnp.zeros(n)
        grad_fn = transform.jit(make_loss(W, h, s, remat))
        temp = grad_fn.lower(xs).compile().memory_analysis().temp_size_in_bytes
        grads, loss = grad_fn(xs)
        results[remat] = grads
        print(f"checkpoint={str(remat):5}  loss={float(loss):.5f}  |dW|={float(jnp.linalg.norm(grads)):.5f}"
              f"  XLA temp memory: {temp / 1024:8.1f} KiB  final mean h={float(h.value.mean()):.4f}")
    err = float(jnp.max(jnp.abs(results[True] - results[False])))
    print(f"max |dW(checkpoint) - dW(plain)| = {err:.2e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--T", type=int, default=1000)
    parser.add_argument("--n", type=int, default=256)
    args = parser.parse_args()
    main(args.T, args.n)
