"""brainx.optim: the same parameters as optax used directly; units; jit; errors change nothing."""

import brainunit as u
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import brainx
from brainx import ParamState
from brainx import optim
from brainx.optim import SGD, Adam, OptaxOptimizer, OptimState

SHAPES = {"a": (3,), "b": (2, 2)}


def _grads(seed, shapes=SHAPES):
    rs = np.random.RandomState(seed)
    return {k: jnp.asarray(rs.randn(*s).astype(np.float32)) for k, s in shapes.items()}


def _init(shapes=SHAPES):
    return {k: jnp.asarray(np.random.RandomState(7).randn(*s).astype(np.float32))
            for k, s in shapes.items()}


def _optax_reference(tx, steps):
    params = _init()
    state = tx.init(params)
    for t in range(steps):
        updates, state = tx.update(_grads(t), state, params)
        params = optax.apply_updates(params, updates)
    return params


CASES = {
    "sgd": (lambda: SGD(lr=0.1), optax.sgd(0.1)),
    "sgd-nesterov-l2": (lambda: SGD(lr=0.1, momentum=0.5, nesterov=True, weight_decay=0.01),
                        optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.1, 0.5, True))),
    "momentum": (lambda: optim.Momentum(lr=0.1, momentum=0.8), optax.sgd(0.1, 0.8)),
    "adam": (lambda: Adam(lr=0.05, betas=(0.8, 0.9), eps=1e-6),
             optax.adam(0.05, b1=0.8, b2=0.9, eps=1e-6)),
    "adam-clipped": (lambda: Adam(lr=0.05, grad_clip_norm=1.0, grad_clip_value=0.5),
                     optax.chain(optax.clip_by_global_norm(1.0), optax.clip(0.5),
                                 optax.adam(0.05))),
    "amsgrad": (lambda: Adam(lr=0.05, amsgrad=True), optax.amsgrad(0.05)),
    "adamw": (lambda: optim.AdamW(lr=0.05, betas=(0.7, 0.95), weight_decay=0.1),
              optax.adamw(0.05, b1=0.7, b2=0.95, weight_decay=0.1)),
    "rmsprop": (lambda: optim.RMSprop(lr=0.01, alpha=0.9, centered=True, momentum=0.5),
                optax.rmsprop(0.01, decay=0.9, eps_in_sqrt=False, centered=True, momentum=0.5)),
    "adagrad": (lambda: optim.Adagrad(lr=0.1, initial_accumulator_value=0.1, eps=1e-7),
                optax.adagrad(0.1, 0.1, 1e-7)),
    "lion": (lambda: optim.Lion(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1),
             optax.lion(0.01, b1=0.8, b2=0.9, weight_decay=0.1)),
    "rprop": (lambda: optim.Rprop(lr=0.01, etas=(0.4, 1.3)), optax.rprop(0.01, 0.4, 1.3)),
    "any-tx": (lambda: OptaxOptimizer(optax.chain(optax.scale_by_belief(), optax.scale(-0.1))),
               optax.chain(optax.scale_by_belief(), optax.scale(-0.1))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_parameters_as_optax_used_directly(name):
    make, tx = CASES[name]
    params = {k: ParamState(v) for k, v in _init().items()}
    opt = make()
    opt.register_trainable_weights(params)
    for t in range(5):
        opt.update(_grads(t))
    ref = _optax_reference(tx, 5)
    for k in SHAPES:
        np.testing.assert_allclose(params[k].value, ref[k], rtol=1e-6, atol=1e-7)
        assert not np.allclose(params[k].value, _init()[k])       # it moved
    assert int(opt.step_count.value) == 5


def test_adam_matches_the_formula_with_l2_weight_decay():
    params = {k: ParamState(jnp.ones(s)) for k, s in SHAPES.items()}
    opt = Adam(lr=0.05, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.01)
    opt.register_trainable_weights(params)
    ref = {k: np.ones(s) for k, s in SHAPES.items()}
    m = {k: np.zeros(s) for k, s in SHAPES.items()}
    v = {k: np.zeros(s) for k, s in SHAPES.items()}
    for t in range(1, 6):
        g = _grads(t)
        opt.update(g)
        for k in SHAPES:
            gk = np.asarray(g[k], np.float64) + 0.01 * ref[k]
            m[k] = 0.8 * m[k] + 0.2 * gk
            v[k] = 0.9 * v[k] + 0.1 * gk ** 2
            ref[k] = ref[k] - 0.05 * (m[k] / (1 - 0.8 ** t)) / (np.sqrt(v[k] / (1 - 0.9 ** t)) + 1e-6)
    for k in SHAPES:
        np.testing.assert_allclose(params[k].value, ref[k], rtol=1e-5, atol=1e-6)


def test_sgd_with_momentum_and_a_schedule():
    w = ParamState(jnp.array([1.0, -2.0]))
    opt = SGD(lr=lambda step: 0.1 / (1 + step), momentum=0.5)
    opt.register_trainable_weights({"w": w})
    ref, vel = np.array([1.0, -2.0]), np.zeros(2)
    for t in range(4):
        assert float(opt.current_lr()) == pytest.approx(0.1 / (1 + t))
        g = np.array([0.5, 1.0]) * (t + 1)
        opt.update({"w": jnp.asarray(g, jnp.float32)})
        vel = 0.5 * vel + g
        ref = ref - 0.1 / (1 + t) * vel
    np.testing.assert_allclose(w.value, ref, rtol=1e-6)


def test_quantities_update_like_their_mantissas_and_keep_units():
    init = _init()
    quantities = {"a": ParamState(init["a"] * u.mV),
                  "b": ParamState({"w": init["b"] * u.nS, "plain": jnp.zeros(2)})}
    opt = Adam(lr=0.05)
    opt.register_trainable_weights(quantities)
    ref_params = {"a": init["a"], "b": {"w": init["b"], "plain": jnp.zeros(2)}}
    tx = optax.adam(0.05)
    ref_state = tx.init(ref_params)
    for t in range(4):
        g = _grads(t)
        plain = {"a": g["a"], "b": {"w": g["b"], "plain": jnp.ones(2)}}
        # a unit-aware gradient (as grad(unit_aware=True) gives): its mantissa is used
        opt.update({"a": g["a"] / u.mV, "b": {"w": g["b"], "plain": jnp.ones(2)}})
        updates, ref_state = tx.update(plain, ref_state, ref_params)
        ref_params = optax.apply_updates(ref_params, updates)
    a, b = quantities["a"].value, quantities["b"].value
    assert a.unit == u.mV and b["w"].unit == u.nS and not isinstance(b["plain"], u.Quantity)
    np.testing.assert_array_equal(a.mantissa, ref_params["a"])
    np.testing.assert_array_equal(b["w"].mantissa, ref_params["b"]["w"])
    np.testing.assert_array_equal(b["plain"], ref_params["b"]["plain"])
    moments = jax.tree.leaves(opt.opt_state.value, is_leaf=lambda x: isinstance(x, u.Quantity))
    assert not any(isinstance(x, u.Quantity) for x in moments)   # optax's state is unitless


def test_update_inside_jit_matches_optax_and_the_states_are_the_optimisers():
    layer = brainx.nn.Linear(3, 2, w_init=jnp.ones((3, 2)) * u.mA)
    params = layer.states(ParamState)
    opt = Adam(lr=0.1)
    opt.register_trainable_weights(params)
    x = jnp.asarray(np.random.RandomState(0).rand(4, 3).astype(np.float32))

    def loss(x):
        return (layer(x).to_decimal(u.mA) ** 2).mean()

    @brainx.transform.jit
    def train(x):
        grads, value = brainx.transform.grad(loss, grad_states=params, return_value=True)(x)
        opt.update(grads)
        return value

    def ref_loss(p, x):
        return ((x @ p["weight"] + p["bias"]) ** 2).mean()

    ref = {"weight": jnp.ones((3, 2)), "bias": jnp.zeros(2)}
    tx = optax.adam(0.1)
    ref_state = tx.init(ref)
    losses = []
    for _ in range(6):
        losses.append(float(train(x)))
        updates, ref_state = tx.update(jax.grad(ref_loss)(ref, x), ref_state, ref)
        ref = optax.apply_updates(ref, updates)
    W = layer.weight.value
    assert W["weight"].unit == u.mA and W["bias"].unit == u.mA
    np.testing.assert_allclose(W["weight"].mantissa, ref["weight"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(W["bias"].mantissa, ref["bias"], rtol=1e-5, atol=1e-6)
    assert losses[-1] < losses[0]
    assert int(opt.step_count.value) == 6
    assert list(opt.states()) == ["step_count", "opt_state"]      # the params are the model's
    assert all(isinstance(s, OptimState) for s in opt.states().values())


def test_bad_gradients_are_refused_and_change_nothing():
    w = ParamState(jnp.ones(3), name="w")
    b = ParamState({"x": jnp.zeros(2)}, name="b")
    opt = Adam(lr=0.1)
    opt.register_trainable_weights({"w": w, "b": b})
    opt.update({"w": jnp.ones(3), "b": {"x": jnp.ones(2)}})
    before = jax.tree.map(np.asarray, [s.value for s in [w, b, *opt.states().values()]])

    with pytest.raises(KeyError, match="unregistered weights \\['c'\\]"):
        opt.update({"w": jnp.ones(3), "b": {"x": jnp.ones(2)}, "c": jnp.ones(1)})
    with pytest.raises(KeyError, match=r"no gradient for the registered weights \['b'\]"):
        opt.update({"w": jnp.ones(3)})
    with pytest.raises(ValueError, match=r"'b' does not match.*name='b'"):
        opt.update({"w": jnp.ones(3), "b": {"x": jnp.ones(5)}})   # w would be valid
    with pytest.raises(TypeError, match="dict of gradients"):
        opt.update([jnp.ones(3)])
    after = jax.tree.map(np.asarray, [s.value for s in [w, b, *opt.states().values()]])
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(after), jax.tree.leaves(before)))


def test_register_errors():
    with pytest.raises(TypeError, match="optax.GradientTransformation"):
        OptaxOptimizer(lambda g: g)
    opt = Adam()
    with pytest.raises(TypeError, match="'w' is .*not a State"):
        opt.register_trainable_weights({"w": jnp.ones(2)})
    w1, w2, w3 = (ParamState(jnp.ones(2)) for _ in range(3))
    opt.register_trainable_weights({"w": w1})
    opt.register_trainable_weights({"w": w1})     # the same state again: fine
    with pytest.raises(ValueError, match="already registered"):
        opt.register_trainable_weights({"w": w2})
    opt.register_trainable_weights([w2])           # a sequence: keys are positions
    assert list(opt.param_states) == ["w", "0"]
    opt.update({"w": jnp.ones(2), "0": jnp.ones(2)})
    opt.register_trainable_weights({"w": w1})     # nothing new: fine after updates too
    with pytest.raises(RuntimeError, match=r"\['late'\] arrive after the first update"):
        opt.register_trainable_weights({"late": w3})


T = np.arange(12)
SCHEDULES = {
    "step": (optim.StepLR(0.1, step_size=3, gamma=0.5), 0.1 * 0.5 ** (T // 3)),
    "multistep": (optim.MultiStepLR(0.1, milestones=[2, 5, 5], gamma=0.1),
                  0.1 * 0.1 ** ((T >= 2) + 2 * (T >= 5))),
    "exponential": (optim.ExponentialLR(0.1, gamma=0.9), 0.1 * 0.9 ** T),
    "exp-decay": (optim.ExponentialDecayLR(0.1, decay_steps=4, decay_rate=0.5,
                                           transition_begin=2),
                  0.1 * 0.5 ** (np.maximum(T - 2, 0) / 4)),
    "cosine": (optim.CosineAnnealingLR(0.1, T_max=8, eta_min=0.01),
               0.01 + 0.09 * (1 + np.cos(np.pi * np.minimum(T, 8) / 8)) / 2),
    "polynomial": (optim.PolynomialLR(0.1, total_iters=6, power=2.0),
                   0.1 * (1 - np.minimum(T, 6) / 6) ** 2),
    "linear": (optim.LinearLR(0.1, start_factor=0.5, end_factor=1.0, total_iters=4),
               0.1 * (0.5 + 0.5 * np.minimum(T, 4) / 4)),
    "constant": (optim.ConstantLR(0.1, factor=0.5, total_iters=3), np.where(T < 3, 0.05, 0.1)),
    "warmup": (optim.WarmupScheduler(0.1, warmup_steps=4, warmup_start_lr=0.02),
               0.02 + 0.08 * np.minimum(T, 4) / 4),
    "warmup-cosine": (optim.WarmupCosineSchedule(0.1, warmup_steps=2, total_steps=10),
                      np.where(T < 2, 0.05 * T,
                               0.05 * (1 + np.cos(np.pi * np.minimum(T - 2, 8) / 8)))),
    "piecewise": (optim.PiecewiseConstantSchedule(0.1, boundaries=[3, 7], values=[1, 0.5, 0.25]),
                  0.1 * np.select([T < 3, T < 7], [1.0, 0.5], 0.25)),
    "sequential": (optim.SequentialLR([optim.ConstantLR(0.1, 1.0, 0), optim.ExponentialLR(0.1, 0.5)],
                                      milestones=[4]),
                   np.where(T < 4, 0.1, 0.1 * 0.5 ** np.maximum(T - 4, 0))),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedules_follow_their_formula(name):
    schedule, expected = SCHEDULES[name]
    got = np.array([float(schedule(t)) for t in T])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8)


def test_one_cycle_rises_to_max_lr_then_falls():
    lr = optim.OneCycleLR(max_lr=0.1, total_steps=10, pct_start=0.3, div_factor=10.0)
    values = np.array([float(lr(t)) for t in range(11)])
    assert values[0] == pytest.approx(0.01) and values[3] == pytest.approx(0.1)
    assert np.all(np.diff(values[:4]) > 0) and np.all(np.diff(values[3:]) < 0)
    with pytest.raises(ValueError, match="3 values need 2 boundaries, got 1"):
        optim.PiecewiseConstantSchedule(1.0, [5], [1.0, 0.5, 0.1])


def test_an_ensemble_of_optimisers_under_vmap_matches_optax_per_lane():
    made = {}

    def build(scale):                       # one model and optimiser per lane
        made["w"] = ParamState(scale * jnp.ones(2))
        made["opt"] = Adam(lr=0.1)
        made["opt"].register_trainable_weights({"w": made["w"]})

    starts = jnp.arange(1.0, 4.0)
    brainx.transform.vmap_new_states(build)(starts)
    w, opt = made["w"], made["opt"]
    assert w.value.shape == (3, 2) and opt.step_count.value.shape == (3,)

    @brainx.transform.jit
    @brainx.transform.vmap(in_states=[w, opt.step_count, opt.opt_state])
    def step(target):
        grads = brainx.transform.grad(lambda: ((w.value - target) ** 2).sum(),
                                      grad_states={"w": w})()
        opt.update(grads)

    for _ in range(4):
        step(jnp.zeros(3))
    tx = optax.adam(0.1)
    for lane, start in enumerate(starts):
        p = start * jnp.ones(2)
        s = tx.init(p)
        for _ in range(4):
            updates, s = tx.update(2 * p, s, p)
            p = optax.apply_updates(p, updates)
        np.testing.assert_allclose(w.value[lane], p, rtol=1e-6)
    assert opt.step_count.value.tolist() == [4, 4, 4]
