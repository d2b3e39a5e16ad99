"""optim's clip_grad_norm and the running metrics, against NumPy."""

import brainunit as u
import jax.numpy as jnp
import numpy as np
import pytest

from brainx import environ, nn

DT = 0.1  # ms


@pytest.fixture(autouse=True)
def dt_context():
    with environ.context(dt=DT * u.ms):
        yield



# -- clip_grad_norm and the running metrics ----------------------------------------------------
def test_clip_grad_norm_scales_to_the_global_norm():
    rng = np.random.RandomState(0)
    grads = {"a": rng.randn(3, 2).astype(np.float32), "b": [rng.randn(4).astype(np.float32)]}
    flat = np.concatenate([grads["a"].ravel(), grads["b"][0]])
    for order, ref in ((2.0, np.linalg.norm(flat)), ("inf", np.abs(flat).max()),
                       (1, np.abs(flat).sum())):
        clipped, norm = nn.clip_grad_norm(grads, max_norm=0.5, norm_type=order, return_norm=True)
        assert float(norm) == pytest.approx(ref, rel=1e-5)
        np.testing.assert_allclose(clipped["a"], grads["a"] * 0.5 / (ref + 1e-6), rtol=1e-5)
    kept = nn.clip_grad_norm(grads, max_norm=1e3)                          # below the bound
    np.testing.assert_allclose(kept["b"][0], grads["b"][0], rtol=1e-6)
    assert nn.clip_grad_norm({}, 1.0) == {}


def test_metrics_accumulate_inside_jit_and_reset():
    import brainx
    rng = np.random.RandomState(1)
    metrics = nn.MultiMetric(loss=nn.AverageMetric("loss"), accuracy=nn.AccuracyMetric())

    @brainx.transform.jit
    def eval_step(logits, labels, loss):
        metrics.update(loss=loss, logits=logits, labels=labels)

    batches = [(rng.randn(8, 5).astype(np.float32), rng.randint(0, 5, 8), rng.rand(8).astype(np.float32))
               for _ in range(3)]
    for logits, labels, loss in batches:
        eval_step(jnp.asarray(logits), jnp.asarray(labels), jnp.asarray(loss))
    out = metrics.compute()
    all_logits = np.concatenate([b[0] for b in batches])
    all_labels = np.concatenate([b[1] for b in batches])
    assert float(out["accuracy"]) == pytest.approx(np.mean(all_logits.argmax(-1) == all_labels))
    assert float(out["loss"]) == pytest.approx(np.concatenate([b[2] for b in batches]).mean(), rel=1e-5)
    metrics.reset()
    eval_step(jnp.asarray(batches[0][0]), jnp.asarray(batches[0][1]), jnp.asarray(batches[0][2]))
    assert float(metrics.compute()["loss"]) == pytest.approx(batches[0][2].mean(), rel=1e-5)


def test_metric_errors_say_what_is_wrong():
    with pytest.raises(TypeError, match="'loss'"):
        nn.AverageMetric("loss").update(values=1.0)
    with pytest.raises(ValueError, match="one more axis"):
        nn.AccuracyMetric().update(logits=jnp.zeros(3), labels=jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match="integer class indices"):
        nn.AccuracyMetric().update(logits=jnp.zeros((3, 2)), labels=jnp.zeros(3))
    with pytest.raises(ValueError, match="taken by a method"):
        nn.MultiMetric(update=nn.AverageMetric())
