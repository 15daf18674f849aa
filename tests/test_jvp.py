"""Forward mode (the first part of issue 3): jvp rules against finite differences,
symbolic zeros, nesting without perturbation confusion, and composition with jit."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import MissingRuleError

# (function, low, high) over float64 inputs inside each function's domain
UNARY = [
    (lax.neg, -3, 3), (lax.abs, 0.1, 3), (lax.exp, -3, 3), (lax.exp2, -3, 3),
    (lax.expm1, -3, 3), (lax.log, 0.1, 3), (lax.log1p, -0.5, 3), (lax.log2, 0.1, 3),
    (lax.log10, 0.1, 3), (lax.sqrt, 0.1, 3), (lax.rsqrt, 0.1, 3), (lax.cbrt, 0.1, 3),
    (lax.square, -3, 3), (lax.reciprocal, 0.2, 3), (lax.sin, -3, 3), (lax.cos, -3, 3),
    (lax.tan, -1.2, 1.2), (lax.asin, -0.9, 0.9), (lax.acos, -0.9, 0.9), (lax.atan, -3, 3),
    (lax.sinh, -3, 3), (lax.cosh, -3, 3), (lax.tanh, -3, 3), (lax.asinh, -3, 3),
    (lax.acosh, 1.1, 3), (lax.atanh, -0.9, 0.9), (lax.logistic, -5, 5), (lax.erf, -2, 2),
    (lax.erfc, -2, 2), (lax.erf_inv, -0.9, 0.9), (lax.lgamma, 0.5, 4),
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


def test_integer_outputs_have_zero_tangents_and_errors_are_clear():
    _, t = fnx.jvp(lambda x: fnp.argmax(x) + 0 * x.sum(), (fnp.ones(3),), (fnp.ones(3),))
    with pytest.raises(MissingRuleError, match="cumprod has no jvp rule"):
        fnx.jvp(lambda x: fnp.cumprod(x), (fnp.ones(3),), (fnp.ones(3),))
    _, t = fnx.jvp(fnp.prod, (fnp.asarray([2.0, 0.0, 3.0]),), (fnp.asarray([1., 1., 1.]),))
    assert float(t) == 6.0  # only the zero's own tangent survives
    _, t = fnx.jvp(fnp.sort, (fnp.asarray([3.0, 1.0, 2.0]),), (fnp.asarray([10., 20., 30.]),))
    np.testing.assert_array_equal(t, [20.0, 30.0, 10.0])  # tangents follow the permutation
    with pytest.raises(ValueError, match="tangent 0 has shape"):
        fnx.jvp(fnp.sin, (fnp.ones(3),), (fnp.ones(4),))
    with pytest.raises(TypeError, match="tuples"):
        fnx.jvp(fnp.sin, fnp.ones(3), fnp.ones(3))
