"""Forward mode (the first part of issue 3): jvp rules against finite differences,
symbolic zeros, nesting without perturbation confusion, and composition with jit."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import MissingRuleError

# float64 references and finite differences at 1e-6: the module runs with jax_enable_x64 on,
# as JAX's own suite runs its 64-bit tests (test_jvp_in_default_mode_narrows_as_jax runs
# with the flag off)
pytestmark = pytest.mark.x64

# (function, low, high) over float64 inputs inside each function's domain
UNARY = [
    (lax.neg, -3, 3), (lax.abs, 0.1, 3), (lax.exp, -3, 3), (lax.exp2, -3, 3),
    (lax.expm1, -3, 3), (lax.log, 0.1, 3), (lax.log1p, -0.5, 3), (lax.log2, 0.1, 3),
    (lax.log10, 0.1, 3), (lax.sqrt, 0.1, 3), (lax.rsqrt, 0.1, 3), (lax.cbrt, 0.1, 3),
    (lax.square, -3, 3), (lax.reciprocal, 0.2, 3), (lax.sin, -3, 3), (lax.cos, -3, 3),
    (lax.tan, -1.2, 1.2), (lax.asin, -0.9, 0.9), (lax.acos, -0.9, 0.9), (lax.atan, -3, 3),
    (lax.sinh, -3, 3), (lax.cosh, -3, 3), (lax.tanh, -3, 3), (lax.asinh, -3, 3),
    (lax.acosh, 1.1, 3), (lax.atanh, -0.9, 0.9), (lax.logistic, -5, 5), (lax.erf, -2, 2),
    (lax.erfc, -2, 2), (lax.erf_inv, -0.9, 0.9), (lax.lgamma, 0.5, 4), (lax.digamma, 0.3, 4),
    (lambda x: lax.polygamma(1.0, x), 0.3, 4), (lambda x: lax.polygamma(3.0, x), -2.8, -2.2),
    (lambda x: lax.integer_pow(x, 3), -2, 2), (lambda x: lax.integer_pow(x, -2), 0.5, 2),
    (lambda x: lax.reduce_max(x, (0,)), -3, 3), (lambda x: lax.cumsum(x, 0), -3, 3),
]
BINARY = [
    (lax.add, -3, 3), (lax.sub, -3, 3), (lax.mul, -3, 3), (lax.div, 0.5, 3),
    (lax.pow, 0.5, 2), (lax.max, -3, 3), (lax.min, -3, 3), (lax.atan2, 0.5, 3),
    (lax.hypot, 0.5, 3), (lax.logaddexp, -3, 3), (lax.rem, 0.7, 3),
]


def _fd(f, xs, ts, eps=1e-6):
    plus = f(*[x + eps * t for x, t in zip(xs, ts)])
    minus = f(*[x - eps * t for x, t in zip(xs, ts)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


def _points(lo, hi, n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, n)


@pytest.mark.parametrize("f,lo,hi", UNARY, ids=lambda v: getattr(v, "__name__", ""))
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_unary_jvp_matches_finite_differences(f, lo, hi, seed):
    x = _points(lo, hi, 5, seed)
    t = _points(-1, 1, 5, seed + 1)
    out, tan = fnx.jvp(f, (fnp.asarray(x),), (fnp.asarray(t),))
    np.testing.assert_allclose(out, f(fnp.asarray(x)), rtol=1e-12)
    np.testing.assert_allclose(tan, _fd(f, [fnp.asarray(x)], [t]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f,lo,hi", BINARY, ids=lambda v: getattr(v, "__name__", ""))
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_binary_jvp_matches_finite_differences(f, lo, hi, seed):
    x, y = _points(lo, hi, 5, seed), _points(lo, hi, 5, seed + 7)
    if f is lax.max or f is lax.min:
        y[0] = x[0] + 0.5  # keep away from ties, where the derivative is a convention
    tx, ty = _points(-1, 1, 5, seed + 1), _points(-1, 1, 5, seed + 2)
    _, tan = fnx.jvp(f, (fnp.asarray(x), fnp.asarray(y)), (fnp.asarray(tx), fnp.asarray(ty)))
    np.testing.assert_allclose(tan, _fd(f, [fnp.asarray(x), fnp.asarray(y)], [tx, ty]),
                               rtol=1e-5, atol=1e-7)


def test_jvp_through_numpy_code_shapes_and_indexing():
    def f(w, x):
        h = fnp.tanh(x @ w)
        return (h[:, ::-1] ** 2).mean(axis=0) + fnp.concatenate([h[0], h[1, :1]]).sum()

    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((3, 4)), rng.standard_normal((5, 3))
    tw = rng.standard_normal((3, 4))
    _, tan = fnx.jvp(f, (fnp.asarray(w), fnp.asarray(x)), (fnp.asarray(tw), fnp.zeros((5, 3),
                                                                                    "float64")))
    np.testing.assert_allclose(tan, _fd(lambda w: f(w, fnp.asarray(x)), [fnp.asarray(w)], [tw]),
                               rtol=1e-5, atol=1e-8)


def test_no_perturbation_confusion():
    def outer(x):
        return fnx.jvp(lambda y: x * y, (fnp.asarray(1.0),), (fnp.asarray(1.0),))[1]
    _, d = fnx.jvp(outer, (fnp.asarray(2.0),), (fnp.asarray(1.0),))
    assert float(d) == 1.0


def test_higher_order_jvp_of_jvp():
    def dsin(x):
        return fnx.jvp(fnp.sin, (x,), (fnp.ones_like(x),))[1]
    _, d2 = fnx.jvp(dsin, (fnp.asarray(0.7),), (fnp.asarray(1.0),))
    np.testing.assert_allclose(d2, -np.sin(0.7), rtol=1e-6)


def test_symbolic_zeros_record_no_tangent_work():
    c = fnp.asarray([0.5, 1.5])

    def f(x):
        return x * fnp.sin(c)  # sin(c) has a zero tangent: no cos anywhere

    ir = fnx.make_ir(lambda x, t: fnx.jvp(f, (x,), (t,)))(fnp.ones(2), fnp.ones(2))
    names = [e.prim.name for e in ir.eqns]
    assert "cos" not in names and names.count("mul") == 2
    fnx.check_ir(ir)


def test_python_control_flow_on_concrete_primals():
    def f(x):
        return x * x if x > 0 else -x
    assert float(fnx.jvp(f, (fnp.asarray(3.0),), (fnp.asarray(1.0),))[1]) == 6.0
    assert float(fnx.jvp(f, (fnp.asarray(-3.0),), (fnp.asarray(1.0),))[1]) == -1.0


def test_jvp_composes_with_jit_both_ways():
    f = fnx.jit(lambda x: fnp.sin(x) * x)
    x, t = fnp.asarray([0.3, 1.2]), fnp.asarray([1.0, 2.0])
    eager = fnx.jvp(lambda x: fnp.sin(x) * x, (x,), (t,))
    np.testing.assert_allclose(fnx.jvp(f, (x,), (t,))[1], eager[1], rtol=1e-6)
    jitted = fnx.jit(lambda x, t: fnx.jvp(lambda x: fnp.sin(x) * x, (x,), (t,)))
    np.testing.assert_allclose(jitted(x, t)[1], eager[1], rtol=1e-6)


def test_integer_outputs_have_zero_tangents_and_errors_are_clear(monkeypatch):
    _, t = fnx.jvp(lambda x: fnp.argmax(x) + 0 * x.sum(), (fnp.ones(3),), (fnp.ones(3),))
    monkeypatch.setattr(fnx.lax.reduction.cummax_p, "jvp", None)   # a primitive without one
    with pytest.raises(MissingRuleError, match="cummax has no jvp rule"):
        fnx.jvp(lax.cummax, (fnp.ones(3),), (fnp.ones(3),))
    monkeypatch.undo()
    _, t = fnx.jvp(fnp.prod, (fnp.asarray([2.0, 0.0, 3.0]),), (fnp.asarray([1., 1., 1.]),))
    assert float(t) == 6.0  # only the zero's own tangent survives
    _, t = fnx.jvp(fnp.sort, (fnp.asarray([3.0, 1.0, 2.0]),), (fnp.asarray([10., 20., 30.]),))
    np.testing.assert_array_equal(t, [20.0, 30.0, 10.0])  # tangents follow the permutation
    with pytest.raises(ValueError, match="tangent 0 has shape"):
        fnx.jvp(fnp.sin, (fnp.ones(3),), (fnp.ones(4),))
    with pytest.raises(TypeError, match="tuples"):
        fnx.jvp(fnp.sin, fnp.ones(3), fnp.ones(3))


# --- cumulative products and extremes, scatter-mul/min/max, polygamma ----------------------------
# Each new rule: forward mode against finite differences (or an exact Jacobian), reverse
# mode against forward mode through the dot-product identity <ct, J t> = <J^T ct, t>, and
# second derivatives where the function has them.

def _f64(a):
    return fnp.asarray(np.asarray(a, np.float64))


def _dot_identity(f, args, seed=0):
    """<ct, jvp(t)> == <vjp(ct), t> for random t, ct (all arguments differentiated)."""
    rng = np.random.default_rng(seed)
    ts = [_f64(rng.standard_normal(np.shape(a))) for a in args]
    out, t_out = fnx.jvp(f, tuple(args), tuple(ts))
    ct = _f64(rng.standard_normal(np.shape(out)))
    _, f_vjp = fnx.vjp(f, *args)
    cts = f_vjp(ct)
    lhs = float(np.sum(np.asarray(ct) * np.asarray(t_out)))
    rhs = sum(float(np.sum(np.asarray(c) * np.asarray(t))) for c, t in zip(cts, ts))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-12)


def _cumprod_jacobian(x, reverse=False):
    """d cumprod(x)_i / d x_k = prod of x_j over the prefix of i without k (explicit loops)."""
    x = np.asarray(x, np.float64)
    n = len(x)
    jac = np.zeros((n, n))
    for i in range(n):
        prefix = range(i, n) if reverse else range(i + 1)
        for k in prefix:
            jac[i, k] = math.prod(x[j] for j in prefix if j != k)
    return jac


CUMPROD_POINTS = [
    [1.5, -0.7, 2.0, 0.9, -1.3, 0.4],
    [1.5, 0.0, 2.0, 0.9, -1.3, 0.4],          # one zero
    [0.0, 2.0, 0.0, 3.0, 0.5, 1.0],           # two zeros
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [2.0],
]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("x", CUMPROD_POINTS)
def test_cumprod_jacobian_is_exact_with_zeros(x, reverse):
    f = lambda v: lax.cumprod(v, 0, reverse=reverse)  # noqa: E731
    want = _cumprod_jacobian(x, reverse)
    np.testing.assert_allclose(fnx.jacfwd(f)(_f64(x)), want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(fnx.jacrev(f)(_f64(x)), want, rtol=1e-14, atol=1e-15)
    _dot_identity(f, [_f64(x)])


@pytest.mark.parametrize("x", CUMPROD_POINTS[:4])
def test_cumprod_hessian_is_exact_with_zeros(x):
    """d^2 sum(cumprod(x)) / dx_k dx_l = sum_{i >= k, l} prod_{j <= i, j != k, l} x_j (k != l):
    nonzero at a zero of x, where a rule that divides (or masks the zero) gets it wrong."""
    xs = np.asarray(x, np.float64)
    n = len(xs)
    want = np.zeros((n, n))
    for k in range(n):
        for m in range(n):
            if k != m:
                want[k, m] = sum(math.prod(xs[j] for j in range(i + 1) if j not in (k, m))
                                 for i in range(max(k, m), n))
    f = lambda v: lax.cumprod(v, 0).sum()  # noqa: E731
    np.testing.assert_allclose(fnx.hessian(f)(_f64(x)), want, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(fnx.jacfwd(fnx.grad(f))(_f64(x)), want, rtol=1e-13,
                               atol=1e-14)


def test_cumprod_third_derivative_and_2d_axes():
    # cumprod(x)[2] = x0 x1 x2: its mixed third derivative is 1, at zero too
    d3 = fnx.jacfwd(fnx.jacfwd(fnx.jacrev(lambda v: lax.cumprod(v, 0)[2])))(_f64([0.0, 0, 0]))
    assert float(d3[0, 1, 2]) == 1.0 and float(d3[0, 0, 1]) == 0.0
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5))
    x[1, 2] = 0.0
    for axis in (0, 1):
        for reverse in (False, True):
            f = lambda v: lax.cumprod(v, axis, reverse=reverse)  # noqa: E731
            t = rng.standard_normal(x.shape)
            _, tan = fnx.jvp(f, (_f64(x),), (_f64(t),))
            np.testing.assert_allclose(tan, _fd(f, [_f64(x)], [t]), rtol=1e-7, atol=1e-8)
            _dot_identity(f, [_f64(x)], seed=axis)


def test_cumprod_complex_jvp_is_the_holomorphic_derivative():
    x = np.array([1 + 2j, 0.5 - 1j, 0j, -1 + 0.3j])
    t = np.array([0.3 - 1j, 1 + 1j, 2j, 1.0])
    _, tan = fnx.jvp(lambda v: lax.cumprod(v, 0), (fnp.asarray(x),), (fnp.asarray(t),))
    np.testing.assert_allclose(tan, _cumprod_jacobian_complex(x) @ t, rtol=1e-14)


def _cumprod_jacobian_complex(x):
    n = len(x)
    return np.array([[math.prod([x[j] for j in range(i + 1) if j != k], start=1 + 0j)
                      if k <= i else 0 for k in range(n)] for i in range(n)])


@pytest.mark.parametrize("which", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_cummin_follow_the_running_extreme(which, reverse):
    f = lambda v: getattr(lax, which)(v, 0, reverse=reverse)  # noqa: E731
    rng = np.random.default_rng(1)
    x = rng.standard_normal(8)           # no ties: the derivative is a selection
    t = rng.standard_normal(8)
    _, tan = fnx.jvp(f, (_f64(x),), (_f64(t),))
    np.testing.assert_allclose(tan, _fd(f, [_f64(x)], [t]), rtol=1e-7, atol=1e-9)
    pick = np.minimum if which == "cummin" else np.maximum
    seq = x[::-1] if reverse else x
    idx = [int(np.flatnonzero(seq[: i + 1] == pick.accumulate(seq)[i])[-1])
           for i in range(8)]
    want = np.eye(8)[idx]
    if reverse:
        want = want[::-1, ::-1]
    np.testing.assert_array_equal(fnx.jacrev(f)(_f64(x)), want)
    _dot_identity(f, [_f64(x)])


def test_cummax_ties_go_to_the_most_recent_element():
    x = _f64([1.0, 3.0, 2.0, 3.0, 5.0, 5.0, 4.0])
    t = _f64([1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6])
    _, tan = fnx.jvp(lambda v: lax.cummax(v, 0), (x,), (t,))
    np.testing.assert_array_equal(tan, [1.0, 10.0, 10.0, 1e3, 1e4, 1e5, 1e5])
    _, tan = fnx.jvp(lambda v: lax.cummax(v, 0, reverse=True), (x,), (t,))
    np.testing.assert_array_equal(tan, [1e4, 1e4, 1e4, 1e4, 1e4, 1e5, 1e6])
    _, tan = fnx.jvp(lambda v: lax.cummin(v, 0), (x,), (t,))
    np.testing.assert_array_equal(tan, [1.0] * 7)
    # a nondecreasing input with plateaus: cummax is the identity, and so is its Jacobian
    up = _f64([0.0, 1.0, 1.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(fnx.jacfwd(lambda v: lax.cummax(v, 0))(up), np.eye(6))
    # NaN: the output is NaN from the first NaN on and follows the most recent NaN
    _, tan = fnx.jvp(lambda v: lax.cummax(v, 0), (_f64([1.0, np.nan, 2.0, np.nan, 3.0]),),
                     (_f64([1.0, 2.0, 3.0, 4.0, 5.0]),))
    np.testing.assert_array_equal(tan, [1.0, 2.0, 2.0, 4.0, 4.0])


def test_cummax_on_2d_axes_and_grad_of_grad():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 6))
    for axis in (0, 1):
        f = lambda v: lax.cummax(v, axis) * lax.cummin(v, axis, reverse=True)  # noqa: E731
        t = rng.standard_normal(x.shape)
        _, tan = fnx.jvp(f, (_f64(x),), (_f64(t),))
        np.testing.assert_allclose(tan, _fd(f, [_f64(x)], [t]), rtol=1e-7, atol=1e-9)
        _dot_identity(f, [_f64(x)], seed=axis)
    # piecewise linear, so the Hessian of a smooth function of it is the chain rule's
    g = lambda v: (lax.cummax(v, 0) ** 3).sum()  # noqa: E731
    v = _f64([0.5, -1.0, 2.0, 1.5, 3.0])
    ymax = np.maximum.accumulate(np.asarray(v))
    sel = np.eye(5)[[0, 0, 2, 2, 4]]
    want = sel.T @ np.diag(6 * ymax) @ sel
    np.testing.assert_allclose(fnx.hessian(g)(v), want, rtol=1e-13)


def _scatter_f(mode, idx, spec=(("a", 0),)):
    return lambda x, u: lax.index_scatter(x, u, [fnp.asarray(np.asarray(idx, np.int32))], spec, mode)


def _scatter_mul_jacobians(x, u, idx):
    """Exact Jacobians of x.at[idx].multiply(u) (dropping out-of-range idx), by loops."""
    n, m = len(x), len(u)
    tgt = [i + n if i < 0 else i for i in idx]
    tgt = [i if 0 <= i < n else None for i in tgt]
    jx, ju = np.zeros((n, n)), np.zeros((n, m))
    for p in range(n):
        hits = [j for j in range(m) if tgt[j] == p]
        jx[p, p] = math.prod(u[j] for j in hits)
        for j in hits:
            ju[p, j] = x[p] * math.prod(u[k] for k in hits if k != j)
    return jx, ju


@pytest.mark.parametrize("u", [
    [2.0, -0.5, 3.0, 4.0, 1.5],
    [2.0, 0.0, 3.0, 4.0, 1.5],            # one zero among repeated indices
    [0.0, 0.0, 3.0, 0.0, 1.5],            # two zeros at one element, one alone
])
def test_scatter_mul_jacobians_with_repeats_zeros_and_dropped_indices(u):
    x = [1.0, 2.0, -3.0, 4.0, 5.0]
    idx = [1, 1, -2, 7, 1]                # -2 wraps to 3; 7 is dropped
    f = _scatter_f("mul", idx)
    jx, ju = _scatter_mul_jacobians(x, u, idx)
    for jac in (fnx.jacfwd, fnx.jacrev):
        gx, gu = jac(f, argnums=(0, 1))(_f64(x), _f64(u))
        np.testing.assert_allclose(gx, jx, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(gu, ju, rtol=1e-14, atol=1e-15)
    _dot_identity(f, [_f64(x), _f64(u)])


def test_scatter_mul_second_derivatives():
    x, u = _f64([1.0, 2.0, -3.0, 4.0]), _f64([2.0, 0.0, 3.0])
    # unique indices: every order is exact (the zero update included)
    f = lambda x, u: (_scatter_f("mul", [0, 2, 3])(x, u) ** 2).sum()  # noqa: E731
    h = fnx.jacfwd(fnx.grad(f, argnums=1), argnums=1)(x, u)
    np.testing.assert_allclose(h, np.diag(2 * np.asarray([1.0, 9.0, 16.0])), atol=1e-13)
    hxu = fnx.jacfwd(fnx.grad(f, argnums=0), argnums=1)(x, u)
    gx = fnx.grad(f, argnums=0)
    for j in range(3):   # against finite differences of the gradient
        e = np.zeros(3)
        e[j] = 1e-6
        fd = (np.asarray(gx(x, u + _f64(e))) - np.asarray(gx(x, u - _f64(e)))) / 2e-6
        np.testing.assert_allclose(np.asarray(hxu)[:, j], fd, rtol=1e-6, atol=1e-8)
    # repeated indices, no zeros: second derivative against finite differences of the gradient
    g = lambda x, u: (_scatter_f("mul", [1, 1, 1])(x, u) ** 2).sum()  # noqa: E731
    u2 = _f64([2.0, -0.5, 3.0])
    gu = fnx.grad(g, argnums=1)
    h = fnx.jacfwd(gu, argnums=1)(x, u2)
    for j in range(3):
        e = np.zeros(3)
        e[j] = 1e-6
        fd = (np.asarray(gu(x, u2 + _f64(e))) - np.asarray(gu(x, u2 - _f64(e)))) / 2e-6
        np.testing.assert_allclose(np.asarray(h)[:, j], fd, rtol=1e-6)


@pytest.mark.parametrize("mode", ["min", "max"])
def test_scatter_min_max_take_the_winners_tangent(mode):
    x = _f64([1.0, 2.0, -3.0, 4.0, 5.0])
    u = _f64([0.3, 2.5, -4.0, 9.0, -1.0, 7.0])
    idx = [0, 1, 2, 3, 3, 9]                         # 9 dropped
    f = _scatter_f(mode, idx)
    rng = np.random.default_rng(2)
    tx, tu = rng.standard_normal(5), rng.standard_normal(6)
    _, tan = fnx.jvp(f, (x, u), (_f64(tx), _f64(tu)))
    np.testing.assert_allclose(tan, _fd(f, [x, u], [tx, tu]), rtol=1e-7, atol=1e-9)
    _dot_identity(f, [x, u])
    # a plain value: no rule for the index operand, integer outputs have no tangent
    xi = fnp.asarray(np.array([1, 2, 3], np.int32))
    _, ti = fnx.jvp(lambda a: _scatter_f(mode, [0])(xi, fnp.asarray(np.array([5], np.int32)))
                    + 0 * a, (_f64(0.0),), (_f64(1.0),))
    assert np.asarray(ti).dtype == np.float64


def test_scatter_max_ties_share_the_tangent_equally():
    x = _f64([1.0, 2.0, 3.0])
    u = _f64([2.0, 2.0, 0.5, 4.0, 4.0])
    idx = [1, 1, 0, 2, 2]      # element 1: operand and two updates tie; 2: two updates tie
    f = _scatter_f("max", idx)
    jx, ju = fnx.jacfwd(f, argnums=(0, 1))(x, u)
    np.testing.assert_allclose(jx, np.diag([1.0, 1 / 3, 0.0]), rtol=1e-15)
    np.testing.assert_allclose(ju, [[0, 0, 0, 0, 0], [1 / 3, 1 / 3, 0, 0, 0],
                                    [0, 0, 0, 0.5, 0.5]], rtol=1e-15)
    rx, ru = fnx.jacrev(f, argnums=(0, 1))(x, u)
    np.testing.assert_allclose(rx, jx, rtol=1e-15)
    np.testing.assert_allclose(ru, ju, rtol=1e-15)
    # NaN wins a max and takes the tangent
    _, t = fnx.jvp(_scatter_f("max", [0]), (x, _f64([np.nan])), (_f64([1.0, 1, 1]), _f64([5.0])))
    assert np.asarray(t)[0] == 5.0


def test_scatter_rules_with_slices_and_2d_indices():
    x = _f64(np.arange(1.0, 13.0).reshape(3, 4))
    u = _f64(np.linspace(-2, 2, 6).reshape(3, 2) + 0.25)
    spec = (("s", 0, 3, 1), ("a", 0))
    for mode in ("mul", "min", "max", "add", "set"):
        f = _scatter_f(mode, [3, 0], spec)
        _dot_identity(f, [x, u], seed=len(mode))
        rng = np.random.default_rng(5)
        tx, tu = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
        _, tan = fnx.jvp(f, (x, u), (_f64(tx), _f64(tu)))
        np.testing.assert_allclose(tan, _fd(f, [x, u], [tx, tu]), rtol=1e-7, atol=1e-8)


def test_transposes_of_out_of_range_gathers_and_scatters():
    """gather clamps, scatter drops (JAX): reverse mode must agree with forward mode."""
    x = _f64([1.0, 2.0, 3.0, 4.0, 5.0])
    g = lambda v: lax.index_gather(v, [fnp.asarray(np.array([1, -1, -7, 7], np.int32))],  # noqa
                             (("a", 0),))
    np.testing.assert_array_equal(fnx.jacrev(g)(x), fnx.jacfwd(g)(x))
    np.testing.assert_array_equal(fnx.jacrev(g)(x)[3], [0, 0, 0, 0, 1])   # clamped to 4
    u = _f64([2.0, 3.0, 4.0, 5.0])
    for mode in ("add", "set"):
        f = _scatter_f(mode, [1, 1, 3, 7])     # 7 dropped; set: one of the two 1s wins
        for a, b in zip(fnx.jacrev(f, argnums=(0, 1))(x, u), fnx.jacfwd(f, argnums=(0, 1))(x, u)):
            np.testing.assert_array_equal(a, b)
        assert np.asarray(fnx.jacrev(f, argnums=1)(x, u))[:, 3].sum() == 0   # dropped
    assert np.asarray(fnx.jacrev(_scatter_f("set", [1, 1]), argnums=1)(x, u[:2])).sum() == 1


def test_polygamma_derivatives_and_the_order_has_none():
    x = _f64([0.3, 1.0, 2.5, 7.0])
    np.testing.assert_allclose(fnx.grad(lambda v: lax.digamma(v).sum())(x),
                               lax.polygamma(1.0, x), rtol=1e-15)
    d2 = fnx.jacfwd(fnx.grad(lambda v: lax.lgamma(v).sum()))(x)
    np.testing.assert_allclose(np.diag(np.asarray(d2)), lax.polygamma(1.0, x), rtol=1e-15)
    d3 = fnx.grad(lambda v: fnx.grad(lambda w: lax.polygamma(1.0, w).sum())(v).sum())(x)
    np.testing.assert_allclose(d3, lax.polygamma(3.0, x), rtol=1e-15)
    m = _f64([0.0, 1.0, 2.0, 5.0])
    _, t = fnx.jvp(lambda v: lax.polygamma(m, v), (x,), (fnp.ones_like(x),))
    np.testing.assert_allclose(t, lax.polygamma(m + 1.0, x), rtol=1e-15)
    _dot_identity(lambda v: lax.polygamma(m, v), [x])
    with pytest.raises(ValueError, match="order m"):
        fnx.grad(lambda k: lax.polygamma(k, 2.0))(_f64(1.0))
    # m only as a constant (or under stop_gradient) is fine
    g = fnx.jit(fnx.grad(lambda k: lax.polygamma(lax.stop_gradient(k), 2.0) * k))(_f64(1.0))
    np.testing.assert_allclose(g, lax.polygamma(1.0, _f64(2.0)), rtol=1e-15)


def test_eager_grad_through_stop_gradient_of_the_polygamma_order():
    # eager grad's tape keeps stop_gradient's output off the tape: no tangent reaches m
    for _ in range(3):  # derived afresh, then compiled and cached
        g = fnx.grad(lambda k: lax.polygamma(lax.stop_gradient(k), 2.0) * k)(_f64(1.0))
        np.testing.assert_allclose(g, lax.polygamma(1.0, _f64(2.0)), rtol=1e-15)


def test_float32_and_complex_rules_that_use_constants_abs_and_imag():
    """jvp rules with constants (ln 2, 2/sqrt(pi), ...) keep float32; |z| and imag(z) of
    complex z differentiate (JAX's values: d|z| = Re(conj(z) dz)/|z|, grad imag = -1j)."""
    x = fnp.asarray(np.array([0.3, 0.7], np.float32))
    for f in (lax.exp2, lax.log2, lax.log10, lax.erf, lax.erfc, lax.erf_inv):
        _, t = fnx.jvp(f, (x,), (fnp.ones_like(x),))
        assert np.asarray(t).dtype == np.float32
        np.testing.assert_allclose(t, _fd(f, [fnp.asarray(np.asarray(x, np.float64))],
                                          [np.ones(2)]), rtol=1e-5)
    z = fnp.asarray(np.array([3 + 4j, -1 + 0.5j, 0j]))
    dz = np.array([1 - 2j, 0.5 + 1j, 1 + 1j])
    _, t = fnx.jvp(lax.abs, (z,), (fnp.asarray(dz),))
    np.testing.assert_allclose(t, [(3 - 8) / 5, (-0.5 + 0.5) / np.sqrt(1.25), 0.0], atol=1e-15)
    np.testing.assert_allclose(fnx.grad(lambda v: lax.abs(v).sum())(z),
                               [0.6 - 0.8j, (-1 - 0.5j) / np.sqrt(1.25), 0], rtol=1e-15)
    # second order: the Hessian of |z|^2 / 2 written through abs is the identity on R^2
    # (jvp, not jacfwd: jacfwd of a complex input needs holomorphic=True, as in JAX)
    h = fnx.jvp(fnx.grad(lambda v: lax.abs(v) ** 2 / 2), (fnp.asarray(1.5 - 0.5j),),
                (fnp.asarray(1 + 0j),))[1]
    np.testing.assert_allclose(h, 1.0, rtol=1e-14)
    np.testing.assert_allclose(fnx.grad(lambda v: lax.imag(v).sum())(z), [-1j] * 3)
    assert float(fnx.grad(lambda v: lax.imag(v) + v)(_f64(2.0))) == 1.0


def test_jvp_in_default_mode_narrows_as_jax():
    """With jax_enable_x64 off (the default), float64 primals and tangents narrow to float32
    as in JAX 0.10.2, in eager jvp, linearize, jit, vmap and eval_shape alike; a tangent
    of another kind than its primal is an error naming both dtypes."""
    x, t = np.array([0.3, 0.7]), np.array([1.0, 2.0])
    with fnx.enable_x64(False):
        out, tan = fnx.jvp(fnp.sin, (x,), (t,))
        assert out.dtype == tan.dtype == np.float32
        np.testing.assert_allclose(tan, np.cos(x) * t, rtol=1e-6)
        # a float32 primal with a float64 tangent: both float32 (JAX: float32, float32)
        out, tan = fnx.jvp(lambda v: v * 2, (np.float32(1.0),), (np.float64(1.0),))
        assert out.dtype == tan.dtype == np.float32 and float(tan) == 2.0
        assert fnx.linearize(fnp.sin, x)[1](t).dtype == np.float32

        def both(x, t):
            return fnx.jvp(fnp.sin, (x,), (t,))
        assert [o.dtype for o in fnx.jit(both)(x, t)] == [np.float32] * 2
        assert [o.dtype for o in fnx.vmap(both)(x, t)] == [np.float32] * 2
        assert [o.dtype for o in fnx.eval_shape(both, x, t)] == [np.float32] * 2
        with pytest.raises(TypeError, match="tangent 0 has dtype int32.*float32"):
            fnx.jvp(fnp.sin, (np.float32(1.0),), (np.int32(1),))


def test_float0_tangents_of_integer_primals():
    # JAX asks for float0 tangents of integer and bool primals (np.zeros(shape, float0))
    x, i = fnp.ones((3, 4)), fnp.ones((3,), np.int32)
    f = lambda x, i: fnp.sum(x[i])  # noqa: E731
    t0 = np.zeros(i.shape, fnx.dtypes.float0)
    g, gt = fnx.jvp(fnx.grad(f), (x, i), (x, t0))
    np.testing.assert_array_equal(g, np.broadcast_to(np.array([0, 3, 0.0])[:, None], (3, 4)))
    np.testing.assert_array_equal(gt, np.zeros((3, 4)))
    out = fnx.jit(lambda x, i: fnx.jvp(fnx.grad(f), (x, i), (x, t0))[0])(x, i)
    np.testing.assert_array_equal(out, g)
    with pytest.raises(TypeError, match="float0"):
        fnx.jvp(fnp.sin, (x,), (np.zeros(x.shape, fnx.dtypes.float0),))
    with pytest.raises(ValueError, match="shape"):
        fnx.jvp(f, (x, i), (x, np.zeros((2,), fnx.dtypes.float0)))
