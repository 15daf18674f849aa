"""fnx.example_libraries.{stax, optimizers} against jax.example_libraries (JAX 0.10.2).

Expected values were recorded from JAX with the same keys and inputs."""
import numpy as np
import pytest

import fnx
import fnx.numpy as jnp
from fnx import random
from fnx.example_libraries import optimizers as O
from fnx.example_libraries import stax as S
from fnx.nn import initializers as I


def leaves(tree):
    return [np.asarray(x) for x in fnx.tree_util.tree_leaves(tree)]


# --- stax -------------------------------------------------------------------------------------

def test_dense_init_matches_jax_bits():
    init, apply = S.serial(S.Dense(3, W_init=I.glorot_uniform()), S.Relu,
                           S.Dense(2, W_init=I.he_uniform(), b_init=I.zeros))
    shape, params = init(random.PRNGKey(0), (-1, 4))
    assert shape == (-1, 2)
    w1, b1, w2, b2 = leaves(params)
    assert [w1.shape, b1.shape, w2.shape, b2.shape] == [(4, 3), (3,), (3, 2), (2,)]
    np.testing.assert_array_equal(w1.ravel(), np.float32(
        [0.14596923, -0.5173531, -0.7331321, -0.29498786, -0.6345759, 0.20881425,
         0.62961096, 0.35341448, -0.50253224, 0.689922, -0.0070755873, 0.3214654]))
    np.testing.assert_array_equal(w2.ravel(), np.float32(
        [0.04176584, -1.1904161, -0.3614136, 0.99487364, 0.28739867, 0.9487114]))
    # the default bias init is normal(1e-2): JAX's to a few ulp
    np.testing.assert_allclose(b1, [-0.01335625, -0.00352563, 0.0030970403], rtol=1e-6)
    np.testing.assert_array_equal(b2, [0, 0])
    x = jnp.ones((5, 4))
    np.testing.assert_allclose(apply(params, x), np.maximum(np.ones((5, 4)) @ w1 + b1, 0)
                               @ w2 + b2, rtol=1e-6)


def _big_net():
    return S.serial(
        S.Conv(4, (3, 3), padding="SAME"), S.BatchNorm(), S.Relu,
        S.MaxPool((2, 2), strides=(2, 2)),
        S.FanOut(2), S.parallel(S.Conv(3, (1, 1)),
                                S.serial(S.Conv(3, (3, 3), (1, 1), "SAME"), S.Tanh)),
        S.FanInConcat(), S.AvgPool((2, 2), padding="SAME"), S.SumPool((1, 2)),
        S.ConvTranspose(2, (2, 2), (2, 2)), S.Flatten, S.Dense(5), S.Gelu, S.Dropout(0.9),
        S.Dense(3), S.LogSoftmax)


def test_layer_zoo_shapes_and_output_match_jax():
    init, apply = _big_net()
    shape, params = init(random.PRNGKey(1), (2, 7, 7, 2))
    assert shape == (2, 3)
    assert [p.shape for p in leaves(params)] == [
        (3, 3, 2, 4), (1, 1, 1, 4), (4,), (4,), (1, 1, 4, 3), (1, 1, 1, 3), (3, 3, 4, 3),
        (1, 1, 1, 3), (2, 2, 6, 2), (1, 1, 1, 2), (48, 5), (5,), (5, 3), (3,)]
    x = random.uniform(random.PRNGKey(2), (2, 7, 7, 2))
    out = apply(params, x, rng=random.PRNGKey(3))
    np.testing.assert_allclose(np.asarray(out).ravel(), [
        -1.1981909, -1.2607759, -0.87989515, -1.704432, -1.4359334, -0.54432875], rtol=2e-6)
    # the same under jit; a -1 batch size stays -1 (JAX's pooling turns it into 0)
    out2 = fnx.jit(lambda p, x, k: apply(p, x, rng=k))(params, x, random.PRNGKey(3))
    np.testing.assert_allclose(out2, out, rtol=1e-6)
    assert init(random.PRNGKey(1), (-1, 7, 7, 2))[0] == (-1, 3)


def test_conv_variants_shapes():
    init, apply = S.Conv1DTranspose(2, (3,), (2,), "SAME")
    shape, p = init(random.PRNGKey(4), (1, 5, 3))
    assert shape == (1, 10, 2) and apply(p, jnp.ones((1, 5, 3))).shape == shape
    init, apply = S.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (2, 3), (1, 2), "VALID")
    shape, (w, b) = init(random.PRNGKey(5), (2, 3, 6, 7))
    assert shape == (2, 4, 5, 3) and w.shape == (4, 3, 2, 3) and b.shape == (1, 4, 1, 1)
    assert apply((w, b), jnp.ones((2, 3, 6, 7))).shape == shape
    # the kernel's default init is glorot_normal over its I and O axes (JAX's numbers)
    np.testing.assert_allclose(np.asarray(w).ravel()[:3],
                               [0.09807705879211426, 0.2657265365123749, -0.1563570499420166],
                               rtol=2e-6)
    init, apply = S.ConvTranspose(3, (3, 3), (2, 2), "VALID")
    shape, p = init(random.PRNGKey(0), (1, 4, 4, 2))
    assert shape == (1, 9, 9, 3) and apply(p, jnp.ones((1, 4, 4, 2))).shape == shape
    init, apply = S.MaxPool((2, 2), spec="NCHW")
    assert init(None, (2, 3, 6, 7))[0] == (2, 3, 5, 6)
    assert apply((), jnp.ones((2, 3, 6, 7))).shape == (2, 3, 5, 6)


def test_pooling_and_norm_values():
    x = jnp.arange(16.0).reshape(1, 4, 4, 1)
    mx = S.MaxPool((2, 2), (2, 2))[1]((), x)
    np.testing.assert_array_equal(np.asarray(mx).ravel(), [5, 7, 13, 15])
    sm = S.SumPool((2, 2), (2, 2))[1]((), x)
    np.testing.assert_array_equal(np.asarray(sm).ravel(), [10, 18, 42, 50])
    av = S.AvgPool((2, 2), (2, 2), "SAME")[1]((), jnp.arange(9.0).reshape(1, 3, 3, 1))
    # SAME padding: edge windows average only their real elements
    np.testing.assert_allclose(np.asarray(av).ravel(), [2, 3.5, 6.5, 8])
    init, apply = S.BatchNorm(axis=0, center=False)
    shape, (beta, gamma) = init(random.PRNGKey(0), (4, 3))
    assert shape == (4, 3) and beta == () and gamma.shape == (3,)
    z = np.asarray(apply((beta, gamma), jnp.arange(12.0).reshape(4, 3)))
    np.testing.assert_allclose(z[:, 0], [-1.3416401, -0.4472134, 0.4472134, 1.3416401],
                               rtol=1e-6)


def test_dropout_combinators_and_elementwise():
    init, apply = S.Dropout(0.5)
    x = jnp.ones((1000,))
    y = np.asarray(apply((), x, rng=random.PRNGKey(0)))
    assert set(np.unique(y)) <= {0.0, 2.0} and 400 < np.count_nonzero(y) < 600
    assert S.Dropout(0.5, mode="test")[1]((), x) is x
    with pytest.raises(ValueError, match="needs a PRNG key"):
        apply((), x)
    with pytest.raises(ValueError, match="probability of keeping"):
        S.Dropout(0.0)
    init, apply = S.serial(S.FanOut(3), S.parallel(S.Identity, S.Exp, S.Tanh), S.FanInSum)
    shape, params = init(random.PRNGKey(0), (2,))
    assert shape == (2,) and list(params) == [(), ((), (), ()), ()]
    v = jnp.array([0.0, 1.0])
    np.testing.assert_allclose(apply(params, v), np.array([0, 1]) + np.exp([0, 1])
                               + np.tanh([0, 1]), rtol=1e-6)
    np.testing.assert_allclose(S.Selu[1]((), jnp.array([-1.0, 1.0])),
                               [-1.1113307, 1.050701], rtol=1e-6)
    np.testing.assert_allclose(S.Softplus[1]((), jnp.array([0.0])), [0.6931472], rtol=1e-6)
    sd_init, sd_apply = S.shape_dependent(lambda s: S.Dense(s[-1] * 2))
    shape, p = sd_init(random.PRNGKey(0), (3, 4))
    assert shape == (3, 8) and sd_apply(p, jnp.ones((3, 4))).shape == (3, 8)
    assert S.FanInConcat(0)[0](None, [(2, 3), (4, 3)])[0] == (6, 3)
    with pytest.raises(TypeError, match=r"must be called: Dense\(10\)"):
        S.serial(S.Dense)
    with pytest.raises(ValueError, match="Dense.*input_shape"):
        S.Dense(3)[0](random.PRNGKey(0), ())
    with pytest.raises(ValueError, match="smaller than the kernel"):
        S.Conv(2, (5, 5))[0](random.PRNGKey(0), (1, 3, 3, 1))


# --- optimizers -------------------------------------------------------------------------------

A = np.array([[3.0, 0.5], [0.5, 1.0]], np.float32)
B = np.array([1.0, -2.0], np.float32)


def _quad_loss(p):
    x = p["x"]
    return 0.5 * x @ A @ x - B @ x + jnp.sum(p["y"] ** 2)


P0 = {"x": np.array([1.0, 1.0], np.float32),
      "y": np.array([[0.5, -1.5], [2.0, 0.1]], np.float32)}

# params (x then y) after 5 jitted steps, from jax.example_libraries.optimizers
TRAJECTORIES = {
    "sgd": (lambda: O.sgd(0.1), [0.41830718517303467, -0.35725095868110657,
            0.16383998095989227, -0.4915200173854828, 0.6553599238395691,
            0.032767996191978455]),
    "momentum": (lambda: O.momentum(0.1, 0.9), [-0.11219777911901474, -2.3479158878326416,
                 -0.29020997881889343, 0.8706299662590027, -1.1608399152755737,
                 -0.058042000979185104]),
    "nesterov": (lambda: O.nesterov(0.1, 0.9), [0.4139903783798218, -2.520986557006836,
                 -0.20785877108573914, 0.623576283454895, -0.8314350843429565,
                 -0.04157175496220589]),
    "adagrad": (lambda: O.adagrad(0.1), [0.9062089920043945, 0.9054417014122009,
                0.4066969156265259, -1.4056272506713867, 1.905497431755066,
                0.014412816613912582]),
    "rmsprop": (lambda: O.rmsprop(0.1), [0.3508869707584381, 0.022330550476908684,
                0.002174626337364316, -0.5955653190612793, 1.0489271879196167,
                -0.004872552119195461]),
    "rmsprop_momentum": (lambda: O.rmsprop_momentum(0.05), [-0.11006905138492584,
                         -0.44960880279541016, -0.3927101194858551, -0.12071064114570618,
                         0.5725176334381104, 0.10114743560552597]),
    "adam": (lambda: O.adam(0.1), [0.5140681862831116, 0.5024203062057495,
             0.02781769633293152, -1.0043619871139526, 1.5029596090316772,
             -0.010853249579668045]),
    "adamax": (lambda: O.adamax(0.1), [0.5718492269515991, 0.5217372179031372,
               0.10018382966518402, -1.0344799757003784, 1.5257775783538818,
               -0.03211260959506035]),
    "sm3": (lambda: O.sm3(0.1), [0.9062089920043945, 0.9054417014122009,
            0.43751591444015503, -1.4056272506713867, 1.905497431755066,
            0.05522065609693527]),
    "adam_exponential_decay": (lambda: O.adam(O.exponential_decay(0.1, 2, 0.5)), [
        0.7219648361206055, 0.7195345163345337, 0.22451061010360718, -1.2199769020080566,
        1.7196588516235352, -0.044901881366968155]),
    "sgd_polynomial_decay": (lambda: O.sgd(O.polynomial_decay(0.1, 3, 0.01, 2.0)), [
        0.6232935786247253, 0.3870958089828491, 0.3319142460823059, -0.9957427382469177,
        1.3276569843292236, 0.06638284027576447]),
    "sgd_piecewise_constant": (lambda: O.sgd(O.piecewise_constant([1, 3], [0.1, 0.05, 0.01])),
                               [0.5021250247955322, 0.0674750953912735, 0.2540159821510315,
                                -0.7620480060577393, 1.016063928604126,
                                0.05080319568514824]),
    "sgd_inverse_time_decay": (lambda: O.sgd(O.inverse_time_decay(0.1, 2, 1.0, True)), [
        0.48885059356689453, 0.012762377969920635, 0.24191997945308685,
        -0.7257599830627441, 0.9676799178123474, 0.04838399589061737]),
}


@pytest.mark.parametrize("name", list(TRAJECTORIES))
def test_optimizer_trajectory_matches_jax(name):
    make, expected = TRAJECTORIES[name]
    init, update, get_params = make()
    state = init(P0)

    def step(i, s):
        return update(i, fnx.grad(_quad_loss)(get_params(s)), s)
    if name != "sm3":   # sm3's state holds the parameter's shape as ints, as JAX's
        step = fnx.jit(step)
    for i in range(5):
        state = step(i, state)
    p = get_params(state)
    got = np.concatenate([np.asarray(p["x"]).ravel(), np.asarray(p["y"]).ravel()])
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6)


def test_utilities_and_state_packing():
    g = {"a": jnp.array([3.0, 4.0]), "b": jnp.array(12.0)}
    assert float(O.l2_norm(g)) == 13.0
    c = O.clip_grads(g, 6.5)
    np.testing.assert_allclose(c["a"], [1.5, 2.0])
    np.testing.assert_allclose(c["b"], 6.0)
    np.testing.assert_allclose(O.clip_grads(g, 20.0)["a"], [3.0, 4.0])
    init, update, get_params = O.adam(0.1)
    s = init(P0)
    assert isinstance(s, O.OptimizerState)
    u = O.unpack_optimizer_state(s)
    assert sorted(u) == ["x", "y"] and isinstance(u["x"], O.JoinPoint)
    s2 = O.pack_optimizer_state(u)
    assert s2.tree_def == s.tree_def and s2.subtree_defs == s.subtree_defs
    for a, b in zip(leaves(s), leaves(s2)):
        np.testing.assert_array_equal(a, b)
    assert O.make_schedule(0.5)(7) == 0.5
    assert O.constant(0.3)(100) == 0.3
    with pytest.raises(TypeError, match="gradient tree whose structure differs"):
        update(0, {"x": P0["x"]}, s)
    with pytest.raises(TypeError, match="every leaf must be a JoinPoint"):
        O.pack_optimizer_state({"x": 1.0})
    with pytest.raises(ValueError, match="b1 must be in"):
        O.adam(0.1, b1=1.5)
    with pytest.raises(ValueError, match="one shorter"):
        O.piecewise_constant([1, 2], [0.1])
    with pytest.raises(TypeError, match="scalar or a callable"):
        O.sgd(np.ones(3))


def test_stax_and_optimizers_training_loop_reaches_jax_loss():
    X = random.uniform(random.PRNGKey(10), (64, 8), minval=-1.0, maxval=1.0)
    Y = fnx.nn.one_hot(jnp.argmax(X[:, :3], axis=1), 3)
    init, predict = S.serial(S.Dense(16), S.Tanh, S.Dense(3), S.LogSoftmax)
    _, params = init(random.PRNGKey(0), (-1, 8))

    def loss(p):
        return -jnp.mean(jnp.sum(predict(p, X) * Y, axis=1))
    opt_init, opt_update, get_params = O.adam(0.05)
    state = opt_init(params)
    step = fnx.jit(lambda i, s: opt_update(i, fnx.grad(loss)(get_params(s)), s))
    np.testing.assert_allclose(float(loss(params)), 1.1016569137573242, rtol=1e-5)
    losses = []
    for i in range(30):
        state = step(i, state)
        if i % 10 == 9:
            losses.append(float(loss(get_params(state))))
    # JAX's losses after 10, 20 and 30 steps
    np.testing.assert_allclose(losses, [0.21435926854610443, 0.07993044704198837,
                                        0.03128020465373993], rtol=1e-4)
