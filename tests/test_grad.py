"""Reverse mode (issue 3, in progress): vjp/grad derived from the jvp rules by
linearize + transpose, checked against jvp (the dot-product identity) and finite
differences, nested, under jit, and with clear errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.numpy as fnp

FUNCS = {
    "mlp": lambda w, x: fnp.tanh(x @ w).sum(axis=1),
    "elementwise": lambda w, x: fnp.exp(fnp.sin(w)) * fnp.log1p(w ** 2) / (1 + w * w) - w,
    "reductions": lambda w, x: fnp.concatenate([w.max(axis=0), w.mean(axis=1), w[::-1, 1:].sum(0)]),
    "indexing": lambda w, x: w[[0, 2, 2], 1] * 3 + w.T[1, :2].sum(),
    "updates": lambda w, x: w.at[1].set(w[0] * 2).at[[0, 0]].add(w[2]) ** 2,
    "where_clip": lambda w, x: fnp.where(w > 0, w ** 3, fnp.clip(w, -0.5, 0.5)),
    "shapes": lambda w, x: fnp.pad(w.reshape(2, 3), ((1, 0), (0, 2))).cumsum(axis=1).ravel(),
    "einsum": lambda w, x: fnp.einsum("ij,kj->ik", x, w @ w.T),
    "sort": lambda w, x: fnp.sort(w, axis=0) * fnp.arange(1.0, 4.0)[:, None] + fnp.sort(w.T)[:, :1].T,
    "prod": lambda w, x: fnp.prod(w, axis=0) + fnp.prod(w.at[1, 0].set(0.0)),
    "softmax": lambda w, x: fnp.exp(w - w.max(axis=1, keepdims=True)) / fnp.exp(
        w - w.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True),
}


def _data(seed):
    rng = np.random.default_rng(seed)
    return fnp.asarray(rng.standard_normal((3, 2))), fnp.asarray(rng.standard_normal((4, 3)))


@pytest.mark.x64  # the identity is checked to 1e-9: float64 work
@pytest.mark.parametrize("name", sorted(FUNCS))
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_vjp_agrees_with_jvp_dot_product_identity(name, seed):
    f = FUNCS[name]
    w, x = _data(seed)
    rng = np.random.default_rng(seed + 1)
    t = fnp.asarray(rng.standard_normal(w.shape))
    out, jvp_out = fnx.jvp(lambda w: f(w, x), (w,), (t,))
    ct = fnp.asarray(rng.standard_normal(out.shape))
    out2, f_vjp = fnx.vjp(lambda w: f(w, x), w)
    (vjp_out,) = f_vjp(ct)
    np.testing.assert_allclose(out2, out)
    lhs = float((vjp_out * t).sum())
    rhs = float((ct * jvp_out).sum())
    assert np.isclose(lhs, rhs, rtol=1e-9, atol=1e-9), (lhs, rhs)


@pytest.mark.x64  # central differences with eps=1e-6 need float64
def test_grad_matches_finite_differences():
    w, x = _data(0)
    f = lambda w: (fnp.tanh(x @ w) ** 2).mean()  # noqa: E731
    g = np.asarray(fnx.grad(f)(w))
    eps, fd = 1e-6, np.zeros(w.shape)
    for i in np.ndindex(*w.shape):
        d = np.zeros(w.shape)
        d[i] = eps
        fd[i] = (float(f(w + d)) - float(f(w - d))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_value_and_grad_argnums_has_aux_and_pytrees():
    params = {"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}
    x = fnp.ones((4, 3))

    def loss(params, x, scale):
        h = x @ params["w"] + params["b"]
        return (h ** 2).sum() * scale, h.shape

    (value, aux), grads = fnx.value_and_grad(loss, has_aux=True)(params, x, 0.5)
    assert float(value) == 0.5 * 4 * 2 * 9 and aux == (4, 2)
    np.testing.assert_allclose(grads["w"], np.full((3, 2), 12.0))
    np.testing.assert_allclose(grads["b"], np.full(2, 12.0))
    gx, gs = fnx.grad(lambda p, x, s: loss(p, x, s)[0], argnums=(1, 2))(params, x, 0.5)
    assert gx.shape == (4, 3) and float(gs) == 72.0


def test_no_perturbation_confusion_and_second_order():
    assert float(fnx.grad(lambda x: fnx.grad(lambda y: x * y)(1.0))(2.0)) == 1.0
    d2 = fnx.grad(fnx.grad(fnp.sin))(0.7)
    np.testing.assert_allclose(d2, -np.sin(0.7), rtol=1e-6)


def test_maml_grad_through_an_inner_sgd_step():
    x, y = fnp.asarray([1.0, 2.0]), fnp.asarray([3.0, 5.0])

    def loss(w):
        return ((w * x - y) ** 2).mean()

    def meta(w):
        w1 = w - 0.1 * fnx.grad(loss)(w)
        return loss(w1)

    w = fnp.asarray(0.5)
    eps = 1e-3
    fd = (float(meta(w + eps)) - float(meta(w - eps))) / (2 * eps)
    np.testing.assert_allclose(fnx.grad(meta)(w), fd, rtol=1e-3)


def test_grad_under_jit_is_one_ir_with_forward_and_backward():
    w, x = _data(3)
    f = lambda w, x: fnp.tanh(x @ w).sum()  # noqa: E731
    eager = fnx.value_and_grad(f)(w, x)
    jitted = fnx.jit(fnx.value_and_grad(f))
    out = jitted(w, x)
    np.testing.assert_allclose(out[0], eager[0], rtol=1e-12)
    np.testing.assert_allclose(out[1], eager[1], rtol=1e-12)
    ir = jitted.lower(w, x).ir
    fnx.check_ir(ir)
    names = [e.prim.name for e in ir.eqns]
    assert names.count("dot_general") == 2  # forward x @ w, backward x^T @ ct
    assert names.count("tanh") == 1  # no duplicated forward computation
    # forward, the sum, then tanh' = 1 - tanh^2 feeding the backward dot: nothing else
    # (no zero-tangent arithmetic, no multiplication by the seed cotangent)
    # (x^T @ ct comes out in w's layout: no transpose of the weight gradient)
    assert sorted(names) == sorted(["dot_general", "tanh", "reduce_sum", "square", "sub",
                                    "dot_general"])
    np.testing.assert_allclose(fnx.grad(fnx.jit(f))(w, x), eager[1], rtol=1e-12)


def test_eager_python_control_flow_under_grad():
    def f(x):
        for _ in range(3):
            if x.sum() > 0:
                x = x * 2
            else:
                x = -x
        return x.sum()
    np.testing.assert_allclose(fnx.grad(f)(fnp.ones(2)), [8.0, 8.0])


def test_errors_are_clear():
    with pytest.raises(TypeError, match="real scalar"):
        fnx.grad(lambda x: x * 2)(fnp.ones(3))
    with pytest.raises(TypeError, match="int32"):
        fnx.grad(lambda x: x.sum())(fnp.ones(3, dtype="int32"))
    with pytest.raises(ValueError, match="argnums"):
        fnx.grad(lambda x: x.sum(), argnums=2)(fnp.ones(3))
    from fnx.core.primitive import REGISTRY, Primitive
    from fnx.errors import MissingRuleError
    no_rule = Primitive("test_grad_no_jvp", shape_rule=lambda x: x.aval, impl=lambda x: x)
    try:
        with pytest.raises(MissingRuleError, match="test_grad_no_jvp has no jvp rule"):
            fnx.grad(lambda x: no_rule.bind(x).sum())(fnp.ones(3))
    finally:
        del REGISTRY[no_rule.name]


def test_linearize_matches_jvp():
    w, x = _data(5)
    out, f_jvp = fnx.linearize(lambda w: fnp.sin(x @ w), w)
    t = fnp.ones_like(w)
    np.testing.assert_allclose(f_jvp(t), fnx.jvp(lambda w: fnp.sin(x @ w), (w,), (t,))[1],
                               rtol=1e-12)


def test_linearize_has_aux():
    # as JAX's linearize(fun, *primals, has_aux=True): (out, f_jvp, aux); the aux carries no
    # tangent of this linearize but keeps an enclosing grad's (JAX's test_linearize_aux)
    out, f_jvp, aux = fnx.linearize(lambda x: (x * 2 - 3, x > 0), 3.4, has_aux=True)
    np.testing.assert_allclose(out, 3.8, rtol=1e-6)
    np.testing.assert_allclose(f_jvp(5.0), 10.0)
    assert bool(aux) is True
    g = fnx.grad(lambda y: fnx.linearize(lambda x: (x * y, x * y), 2.0, has_aux=True)[2])(3.0)
    np.testing.assert_allclose(g, 2.0)
    with pytest.raises(TypeError, match="pair"):
        fnx.linearize(lambda x: x, 1.0, has_aux=True)


def test_stop_gradient_blocks_derivatives_only():
    def f(x):
        return (x * fnx.stop_gradient(x)).sum()
    x = fnp.asarray([1.0, -2.0])
    np.testing.assert_allclose(fnx.grad(f)(x), [1.0, -2.0])  # d/dx of x*c is c
    assert fnx.lax.stop_gradient is fnx.stop_gradient
    p = fnx.stop_gradient({"a": x, "b": (x, 1.0)})
    np.testing.assert_array_equal(p["b"][0], x)
    np.testing.assert_allclose(fnx.jit(f)(x), 5.0)


def test_jitted_training_step_frees_residuals_and_gradients_early():
    import tracemalloc
    n_layers, d, b = 16, 128, 256
    rng = np.random.default_rng(0)
    params = [fnp.asarray(rng.standard_normal((d, d)) / 12) for _ in range(n_layers)]
    x = fnp.asarray(rng.standard_normal((b, d)))

    def loss(ps, x):
        for w in ps:
            x = fnp.tanh(x @ w)
        return (x ** 2).mean()

    @fnx.jit
    def step(ps, x):
        value, g = fnx.value_and_grad(loss)(ps, x)
        return value, [w - 0.1 * gw for w, gw in zip(ps, g)]

    step(params, x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        step(params, x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    residuals = n_layers * 2 * b * d * 8      # each layer's input and tanh output
    grads = new_params = n_layers * d * d * 8
    # Residuals die during the backward pass as gradients appear: never all at once.
    assert peak < 0.8 * (residuals + grads + new_params), peak


def test_aux_outputs_keep_the_derivatives_of_enclosing_transformations():
    inner = lambda x: (lambda y: (x * y, x * x))  # noqa: E731
    vg = lambda x: fnx.value_and_grad(inner(x), has_aux=True)(1.0)[0][1]  # noqa: E731
    g = lambda x: fnx.grad(inner(x), has_aux=True)(1.0)[1]  # noqa: E731
    v = lambda x: fnx.vjp(inner(x), 1.0, has_aux=True)[2]  # noqa: E731
    for f in (vg, g, v):
        assert float(fnx.grad(f)(2.0)) == 4.0
        assert float(fnx.jit(fnx.grad(f))(2.0)) == 4.0
        assert float(fnx.jvp(f, (2.0,), (1.0,))[1]) == 4.0
    # and the aux itself is a plain value of the enclosing level
    _, aux = fnx.grad(lambda y: (y * 3.0, y * 2.0), has_aux=True)(1.0)
    assert type(aux) is fnx.Array and float(aux) == 2.0


@pytest.mark.x64  # a float64 cotangent stays float64 only with x64 on
def test_vjp_checks_cotangents():
    _, f_vjp = fnx.vjp(fnp.sin, fnp.ones(3, dtype="float32"))
    with pytest.raises(ValueError, match=r"cotangent 0 has shape \(4,\), but output 0"):
        f_vjp(fnp.ones(4, dtype="float32"))
    with pytest.raises(TypeError, match="cotangent 0 has dtype float64"):
        f_vjp(np.ones(3, np.float64))
    _, f_vjp64 = fnx.vjp(lambda x: fnp.sum(fnp.sin(x)), fnp.ones(3, dtype="float64"))
    (g,) = f_vjp64(1.0)  # a Python scalar takes the output's dtype
    assert g.dtype == np.float64
    np.testing.assert_allclose(np.asarray(g), np.cos(np.ones(3)))


def test_vjp_cotangents_narrow_like_inputs_with_x64_off():
    """As in JAX with x64 off: a NumPy float64 cotangent narrows to float32 and is accepted;
    a cotangent of another dtype (float16, int32) is still an error."""
    _, f_vjp = fnx.vjp(fnp.sin, fnp.ones(3, dtype="float32"))
    (g,) = f_vjp(np.ones(3, np.float64))
    assert g.dtype == np.float32
    np.testing.assert_allclose(np.asarray(g), np.cos(np.ones(3)), rtol=1e-6)
    with pytest.raises(TypeError, match="cotangent 0 has dtype float16"):
        f_vjp(fnp.ones(3, dtype="float16"))
    with pytest.raises(TypeError, match="cotangent 0 has dtype int32"):
        f_vjp(np.ones(3, np.int32))


def test_select_transpose_gives_real_zeros_to_the_unselected_case():
    """The unselected case's cotangent is 0, not ct * 0 (NaN where ct is inf or NaN)."""
    which = np.array([True, False, True])
    x = np.ones(3, np.float32)
    _, pullback = fnx.vjp(lambda a, b: fnx.lax.select(which, a, b), x, x)
    ct_a, ct_b = pullback(np.array([np.inf, np.nan, 2.0], np.float32))
    np.testing.assert_array_equal(np.asarray(ct_a), [np.inf, 0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(ct_b), [0.0, np.nan, 0.0])
    _, t = fnx.jvp(lambda x: fnx.lax.clamp(0.0, x, 1.0), (np.float32([2.0, 0.5]),),
                   (np.float32([np.inf, 1.0]),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 1.0])


def test_bfloat16_inputs_and_outputs_are_differentiable():
    """bfloat16 is a float (NumPy calls its kind "V"): grad, jacrev and jacfwd take it, as
    JAX's do, and give bfloat16 derivatives."""
    import ml_dtypes
    x = fnp.asarray(np.array([1.5, 2.0], ml_dtypes.bfloat16))
    g = fnx.grad(lambda v: (v * v).sum())(x)
    assert g.dtype == ml_dtypes.bfloat16 and np.asarray(g, np.float32).tolist() == [3.0, 4.0]
    for jac in (fnx.jacrev, fnx.jacfwd):
        j = jac(lambda v: v * v)(x)
        assert j.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(np.asarray(j, np.float32), [[3, 0], [0, 4]])
    g = fnx.jit(fnx.grad(lambda v: fnp.sin(v).sum()))(x)
    np.testing.assert_allclose(np.asarray(g, np.float32), np.cos([1.5, 2.0]), atol=4e-3)


def test_abs_derivative_is_jaxs_at_zero_and_nan():
    """JAX's rule for real abs: +1 where x >= 0 (0 and -0 included), -1 elsewhere (NaN
    included); an L1 penalty at exactly 0 then moves as in JAX (JAX 0.10's values)."""
    x = fnp.array([0.0, -0.0, np.nan, 2.0, -3.0])
    for g in (fnx.grad(lambda v: fnp.abs(v).sum()), fnx.jit(fnx.grad(lambda v: fnp.abs(v).sum()))):
        assert np.asarray(g(x)).tolist() == [1, 1, -1, 1, -1]
    assert float(fnx.grad(fnp.abs)(0.0)) == 1.0
