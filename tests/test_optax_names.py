"""optax's names in fnx.optim, against optax 0.2.8 (values recorded from optax with JAX
0.10.2 on the same inputs)."""
import numpy as np
import pytest

import fnx
import fnx.numpy as jnp
import fnx.optim as optax

P = jnp.array([[0.5, -2.0, 3.0], [1.2, 0.1, -0.4]])
T = jnp.array([[0.0, 1.0, 0.5], [1.0, -1.0, 0.0]])
LOGITS = jnp.array([[1.2, -0.8, -0.5], [0.9, -1.2, 1.1], [30.0, -30.0, 0.0]])
LABELS = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
WHERE = jnp.array([[True, True, False], [True, False, True], [False, False, False]])


def close(got, want, rtol=2e-6):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32), rtol=rtol,
                               atol=1e-7 if rtol < 1e-5 else 0)


def test_regression_losses_match_optax():
    close(optax.l2_loss(P, T), [[0.125, 4.5, 3.125], [0.02000000886619091, 0.6050000190734863,
                                                      0.08000000566244125]])
    close(optax.l2_loss(P), [[0.125, 2.0, 4.5], [0.7200000286102295, 0.005000000353902578,
                                                 0.08000000566244125]])
    close(optax.squared_error(P, T), [[0.25, 9.0, 6.25], [0.04000001773238182,
                                                           1.2100000381469727,
                                                           0.1600000113248825]])
    close(optax.huber_loss(P, T), [[0.125, 2.5, 2.0], [0.02000000886619091,
                                                       0.6000000238418579,
                                                       0.08000000566244125]])
    close(optax.huber_loss(P, T, delta=0.5), [[0.125, 1.375, 1.125], [0.02000000886619091,
                                                                      0.42500001192092896,
                                                                      0.08000000566244125]])
    close(optax.huber_loss(P), [[0.125, 1.5, 2.5], [0.7000000476837158, 0.005000000353902578,
                                                    0.08000000566244125]])
    assert optax.l2_loss(P, T).dtype == np.float32


def test_classification_losses_match_optax():
    close(optax.sigmoid_binary_cross_entropy(LOGITS, LABELS), [
        [0.26328244805336, 0.37110063433647156, 0.4740769863128662],
        [1.2411538362503052, 1.4632824659347534, 1.3873353004455566],
        [24.0, 9.0, 0.6931471824645996]])
    close(optax.softmax_cross_entropy(LOGITS, LABELS), [0.27612969279289246, 2.951798915863037,
                                                        33.0])
    close(optax.softmax_cross_entropy(LOGITS, LABELS, axis=0),
          [28.799999237060547, 9.826920509338379, 0.7641894817352295])
    close(optax.softmax_cross_entropy(LOGITS, LABELS, where=WHERE), [0.12692804634571075, 0, 0])
    il = jnp.array([0, 1, 2])
    close(optax.softmax_cross_entropy_with_integer_labels(LOGITS, il),
          [0.27612972259521484, 2.951798915863037, 30.0])
    close(optax.softmax_cross_entropy_with_integer_labels(LOGITS, il, where=WHERE),
          [0.12692809104919434, 2.898138999938965, 0.0])
    close(optax.softmax_cross_entropy_with_integer_labels(LOGITS, il, axis=0),
          [28.799999237060547, 0.9130153059959412, 1.528378963470459])
    logits = jnp.arange(24, dtype=jnp.float32).reshape(1, 2, 3, 4) / 5
    close(optax.softmax_cross_entropy_with_integer_labels(logits, jnp.array([[5, 11]]),
                                                          axis=(2, 3)),
          [[2.8126718997955322, 1.6126723289489746]])
    close(optax.softmax_cross_entropy_with_integer_labels(
        logits, jnp.array([[1, 2, 0, 1]]), axis=(1, 2)),
        [[3.7883541584014893, 2.988353729248047, 4.588353633880615, 3.78835391998291]])
    # optax's docstring example
    np.testing.assert_allclose(optax.softmax_cross_entropy_with_integer_labels(
        LOGITS[:2], jnp.array([0, 1])), [0.2761, 2.9518], atol=5e-5)


def test_losses_do_better_than_nan_and_check_inputs():
    # a -inf logit with label 0: optax gives nan (0 * -inf)
    lg = jnp.array([[0.0, -jnp.inf, 1.0]])
    out = optax.softmax_cross_entropy(lg, jnp.array([[1.0, 0.0, 0.0]]))
    close(out, [np.log(1 + np.e)])
    g = fnx.grad(lambda x: optax.softmax_cross_entropy(x, jnp.array([[1.0, 0.0, 0.0]]))[0])(lg)
    assert np.all(np.isfinite(np.asarray(g)))
    with pytest.raises(TypeError, match="labels must be integers"):
        optax.softmax_cross_entropy_with_integer_labels(LOGITS, jnp.array([0.0, 1.0, 2.0]))
    with pytest.raises(TypeError, match="logits must be floating point"):
        optax.softmax_cross_entropy_with_integer_labels(jnp.array([[1, 2]]), jnp.array([0]))
    with pytest.raises(ValueError, match="do not match"):
        optax.softmax_cross_entropy_with_integer_labels(LOGITS, jnp.array([0, 1]))
    with pytest.raises(ValueError, match="same shape"):
        optax.l2_loss(P, T[0])


def test_safe_norm_and_global_norm():
    close(optax.safe_norm(jnp.array([3.0, 4.0]), 1.0), 5.0)
    close(optax.safe_norm(jnp.array([0.0, 0.0]), 0.5), 0.5)
    x = jnp.array([[3.0, 4.0], [0.1, 0.0]])
    close(optax.safe_norm(x, 1.0, axis=1), [5.0, 1.0])
    close(optax.safe_norm(x, 1.0, ord=1, axis=1, keepdims=True), [[7.0], [1.0]])
    g = fnx.grad(lambda v: optax.safe_norm(v, 1e-3))(jnp.zeros(3))
    np.testing.assert_array_equal(g, [0, 0, 0])
    assert float(optax.global_norm({"a": jnp.array([3.0, 4.0]), "b": jnp.array(12.0)})) == 13


def test_types_and_gradient_transformation():
    gt = optax.adam(1e-3)
    assert isinstance(gt, optax.GradientTransformation) and isinstance(gt, tuple)
    assert optax.GradientTransformation._fields == ("init", "update")
    init, update = gt
    assert callable(init) and callable(update)
    assert optax.GradientTransformationExtraArgs is optax.GradientTransformation
    for name in ("Params", "Updates", "OptState"):
        assert hasattr(optax, name)
    p = {"w": jnp.ones(2, dtype="float16")}
    new = optax.apply_updates(p, {"w": jnp.array([0.5, 0.25])})
    assert new["w"].dtype == np.float16


PARAMS = {"w": jnp.array([1.0, -2.0, 0.5]), "b": jnp.array(0.3)}


def _loss(p):
    return jnp.sum((p["w"] * jnp.array([1.0, 2.0, 3.0]) + p["b"] - 1.0) ** 2)


def test_inject_hyperparams_matches_optax():
    opt = optax.inject_hyperparams(optax.adam)(
        learning_rate=optax.exponential_decay(0.1, 2, 0.5), b1=0.8)
    st = opt.init(PARAMS)
    close(st.hyperparams["learning_rate"], 0.1)
    close(st.hyperparams["b1"], 0.8)

    @fnx.jit
    def step(p, s):
        u, s = opt.update(fnx.grad(_loss)(p), s, p)
        return optax.apply_updates(p, u), s
    p = PARAMS
    for _ in range(4):
        p, st = step(p, st)
    close(p["w"], [0.7439391016960144, -1.7452465295791626, 0.25256115198135376], 1e-6)
    close(p["b"], 0.5555315613746643, 1e-6)
    close(st.hyperparams["learning_rate"], 0.0353553406894207)
    assert int(st.count) == 4
    st.hyperparams["b1"] = jnp.asarray(0.5)     # changed between steps, as in optax
    p, st = step(p, st)
    close(p["w"], [0.7234309911727905, -1.725691795349121, 0.23769311606884003], 1e-6)
    close(p["b"], 0.5756137371063232, 1e-6)
    with pytest.raises(ValueError, match="static_args"):
        optax.inject_hyperparams(optax.adam, static_args=("nope",))
    with pytest.raises(ValueError, match="b1"):
        optax.inject_hyperparams(optax.adam)(0.1, b1=2.0)


def test_flatten_matches_optax():
    opt = optax.flatten(optax.adam(0.1))
    s = opt.init(PARAMS)
    p = PARAMS
    for _ in range(3):
        u, s = opt.update(fnx.grad(_loss)(p), s, p)
        assert u["w"].shape == (3,) and u["b"].shape == ()
        p = optax.apply_updates(p, u)
    close(p["w"], [0.7000030279159546, -1.700854778289795, 0.20735298097133636], 1e-6)
    close(p["b"], 0.5996831655502319, 1e-6)


def test_getting_started_linear_regression_reaches_optax_numbers():
    """optax's getting-started idiom (adam + apply_updates on an l2 loss), imports
    changed: the same losses and weights as optax."""
    k1, k2, _ = fnx.random.split(fnx.random.PRNGKey(42), 3)
    xs = fnx.random.uniform(k1, (16, 10), minval=-1.0, maxval=1.0)
    ys = jnp.sum(xs * 0.5, axis=-1)
    params = {"w": fnx.random.uniform(k2, (10,)), "b": jnp.zeros(())}

    def loss(p, x, y):
        return optax.l2_loss(jnp.dot(x, p["w"]) + p["b"], y).mean()
    optimizer = optax.adam(learning_rate=1e-1)
    opt_state = optimizer.init(params)

    @fnx.jit
    def step(p, s, x, y):
        value, grads = fnx.value_and_grad(loss)(p, x, y)
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value
    values = {}
    for i in range(100):
        params, opt_state, value = step(params, opt_state, xs, ys)
        values[i] = float(value)
    close([values[0], values[25], values[50]],
          [0.14448177814483643, 0.0032162428833544254, 8.683365012984723e-05], 1e-4)
    close(values[99], 2.17386241274653e-06, 1e-3)
    close(params["w"], [0.504996, 0.501436, 0.498906, 0.501526, 0.495677, 0.501048,
                        0.502934, 0.498784, 0.499942, 0.502271], 1e-5)


@pytest.mark.parametrize("factory,kwargs", [
    (optax.sgd, dict(learning_rate=0.1, momentum=0.9)),
    (optax.sgd, dict(learning_rate=0.1, momentum=0.9, nesterov=True)),
    (optax.sgd, dict(learning_rate=0.1)),
    (optax.rmsprop, dict(learning_rate=0.1)),
    (optax.adagrad, dict(learning_rate=0.1, weight_decay=0.1)),
    (optax.adamw, dict(learning_rate=0.1)),
    (optax.lion, dict(learning_rate=0.1)),
    (optax.lamb, dict(learning_rate=0.1)),
], ids=["sgd-momentum", "sgd-nesterov", "sgd", "rmsprop", "adagrad-wd", "adamw", "lion",
        "lamb"])
def test_inject_hyperparams_under_jit_agrees_with_plain(factory, kwargs):
    """Injected (traced) hyperparameters give the plain optimizer's updates: optional parts
    (momentum, weight decay) stay in the chain for array hyperparameters, so the state's
    structure does not depend on their values."""
    params = {"w": jnp.array([1.0, -0.5, 2.0])}
    grads = [{"w": jnp.array([0.3, -1.0, 0.5])}, {"w": jnp.array([-0.2, 0.4, 1.5])}]
    injected, plain = optax.inject_hyperparams(factory)(**kwargs), factory(**kwargs)
    si, sp = injected.init(params), plain.init(params)
    step = fnx.jit(lambda g, s, p: injected.update(g, s, p))
    for g in grads:
        ui, si = step(g, si, params)
        up, sp = plain.update(g, sp, params)
        # float32 hyperparameters round 1 - b2 differently from Python's float (as in
        # optax, whose injected adam differs from its plain one the same way)
        close(ui["w"], up["w"], 2e-5)
    assert int(si.count) == 2


def test_inject_sgd_momentum_values():
    opt = optax.inject_hyperparams(optax.sgd)(0.1, momentum=0.9)
    p = {"w": jnp.ones(3)}
    s = opt.init(p)
    step = fnx.jit(lambda g, s: opt.update(g, s, p))
    u, s = step({"w": jnp.ones(3)}, s)
    close(u["w"], [-0.1] * 3)
    u, s = step({"w": jnp.ones(3)}, s)
    close(u["w"], [-0.19] * 3)        # optax: trace 1 + 0.9 * 1
    s.hyperparams["learning_rate"] = jnp.asarray(0.5)
    u, s = step({"w": jnp.ones(3)}, s)
    close(u["w"], [-0.5 * (1 + 0.9 * 1.9)] * 3)
