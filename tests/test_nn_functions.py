"""``fnx.nn`` and ``fnx.scipy.special`` functions: ``check_op`` against NumPy/SciPy
references (values, inferred shapes, jit, vmap, both derivative modes to order 2), and
their behaviour at extreme inputs (+-1e4, -inf masks): values and gradients finite
wherever the mathematical ones are."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as ss
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx import nn
from fnx.scipy import special as fs
from fnx.testing import Example, check_op

FLOAT = (np.float32, np.float64)
# for parametrize: the float64 case runs with jax_enable_x64 on (off, it would narrow)
FLOAT_CASES = [np.float32, pytest.param(np.float64, marks=pytest.mark.x64)]
SHAPES = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)
SHAPES1 = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


def uniform(lo, hi, kinks=(), gap=0.05):
    """``make`` of one operand uniform in [lo, hi], at least ``gap`` from every kink."""
    def make(rng, dtype, shape, **_):
        x = rng.uniform(lo, hi, shape)
        for k in kinks:
            near = np.abs(x - k) < gap
            x = np.where(near, k + np.where(x >= k, gap, -gap), x)
        return (np.asarray(x).astype(dtype),)
    return make


def example(make, shapes=SHAPES, dtypes=FLOAT, **params):
    """Examples of ``make(rng, dtype, shape, **params)``; vmap lanes are further draws
    with the same dtype, shape and params; callable params are drawn: ``(draw, shape)``.
    (Also test_selection's.)"""
    @st.composite
    def draw(d):
        dtype = np.dtype(d(st.sampled_from(dtypes)))
        shape = d(shapes)
        p = {k: (v(d, shape) if callable(v) else v) for k, v in params.items()}
        seed = d(st.integers(0, 2 ** 32 - 1))
        ops = make(np.random.default_rng(seed), dtype, shape, **p)
        more = np.random.default_rng(seed + 1)
        return Example(*ops, **p).lanes(lambda k: make(more, dtype, shape, **p))
    return draw()


def axis_of(d, shape):
    return d(st.integers(-len(shape), len(shape) - 1))


def axes_of(d, shape):
    if d(st.booleans()):
        return axis_of(d, shape)
    return tuple(sorted(d(st.sets(st.integers(0, len(shape) - 1), min_size=1))))


def _cast(f):
    """A float64 reference computed from the operands, returned in the first one's dtype."""
    def ref(*xs, **kw):
        out = f(*[np.asarray(x, np.float64) for x in xs], **kw)
        return np.asarray(out).astype(xs[0].dtype)
    return ref


SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _gelu_tanh(x):
    # x (1 + tanh(u)) / 2 as x expit(2 u): 1 + tanh(u) cancels in the left tail
    return x * ss.expit(2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))


def _standardize(x, axis, epsilon=1e-5):
    m = np.mean(x, axis, keepdims=True)
    return (x - m) / np.sqrt(np.var(x, axis, keepdims=True) + epsilon)


def _glu(x, axis):
    a, b = np.split(x, 2, axis)
    return a * ss.expit(b)


# (name, function, reference, strategy, check_op keywords)
ELEMENTWISE = [
    ("relu", nn.relu, lambda x: np.maximum(x, 0), uniform(-3, 3, (0,))),
    ("relu6", nn.relu6, lambda x: np.clip(x, 0, 6), uniform(-2, 8, (0, 6))),
    ("leaky_relu", nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x), uniform(-3, 3, (0,))),
    ("elu", nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), uniform(-4, 3, (0,))),
    ("selu", nn.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(np.minimum(x, 0))),
     uniform(-4, 3, (0,))),
    ("celu", lambda x: nn.celu(x, 0.7), lambda x: np.maximum(x, 0) + 0.7 * np.expm1(
        np.minimum(x, 0) / 0.7), uniform(-4, 3, (0,))),
    ("gelu_tanh", nn.gelu, _gelu_tanh, uniform(-5, 5)),
    ("gelu_erf", lambda x: nn.gelu(x, approximate=False), lambda x: x * ss.ndtr(x),
     uniform(-6, 5)),
    ("silu", nn.silu, lambda x: x * ss.expit(x), uniform(-8, 8)),
    ("softplus", nn.softplus, lambda x: np.logaddexp(x, 0), uniform(-15, 15)),
    ("sigmoid", nn.sigmoid, ss.expit, uniform(-8, 8)),
    ("log_sigmoid", nn.log_sigmoid, ss.log_expit, uniform(-15, 15)),
    ("hard_tanh", nn.hard_tanh, lambda x: np.clip(x, -1, 1), uniform(-3, 3, (-1, 1))),
    ("hard_sigmoid", nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6,
     uniform(-5, 5, (-3, 3))),
    ("hard_silu", nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6, uniform(-5, 5, (-3, 3))),
    ("soft_sign", nn.soft_sign, lambda x: x / (np.abs(x) + 1), uniform(-4, 4, (0,))),
    # fnx.scipy.special
    ("erf", fs.erf, ss.erf, uniform(-3, 3)),
    ("erfc", fs.erfc, ss.erfc, uniform(-3, 3)),
    ("erfinv", fs.erfinv, ss.erfinv, uniform(-0.9, 0.9)),
    ("gammaln", fs.gammaln, ss.gammaln, uniform(0.3, 6)),
    ("digamma", fs.digamma, ss.digamma, uniform(0.3, 6)),
    ("expit", fs.expit, ss.expit, uniform(-8, 8)),
    ("log_expit", fs.log_expit, ss.log_expit, uniform(-15, 15)),
    ("logit", fs.logit, ss.logit, uniform(0.05, 0.95)),
    ("ndtr", fs.ndtr, ss.ndtr, uniform(-6, 6)),
    ("log_ndtr", fs.log_ndtr, ss.log_ndtr, uniform(-30, 8)),
    # (second-order finite differences lose ~(eps/p)^2 near the tails; test_ndtri_tails)
    ("ndtri", fs.ndtri, ss.ndtri, uniform(0.1, 0.9)),
    ("entr", fs.entr, ss.entr, uniform(0.05, 3)),
]


@pytest.mark.parametrize("name,fn,ref,make", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise(name, fn, ref, make):
    check_op(lambda x: fn(x), example(make), reference=_cast(ref), name=name)


def _two(lo1, hi1, lo2, hi2, zeros=False):
    def make(rng, dtype, shape):
        x = rng.uniform(lo1, hi1, shape)
        if zeros:
            x = np.where(rng.random(shape) < 0.3, 0.0, x)
        return np.asarray(x).astype(dtype), rng.uniform(lo2, hi2, shape).astype(dtype)
    return make


def _polygamma_make(rng, dtype, shape):
    return (rng.integers(0, 4, shape).astype(dtype), rng.uniform(0.5, 4, shape).astype(dtype))


BINARY = [
    ("xlogy", fs.xlogy, ss.xlogy, _two(-2, 2, 0.2, 3, zeros=True), {}),
    ("xlog1py", fs.xlog1py, ss.xlog1py, _two(-2, 2, -0.8, 3, zeros=True), {}),
    # the order n is integer-valued: held fixed when differentiating
    ("polygamma", fs.polygamma, ss.polygamma, _polygamma_make, {"nondiff_argnums": (0,)}),
]


@pytest.mark.parametrize("name,fn,ref,make,kw", BINARY, ids=[e[0] for e in BINARY])
def test_binary(name, fn, ref, make, kw):
    check_op(lambda x, y: fn(x, y), example(make), reference=_cast(ref), name=name, **kw)


# --- functions over axes ------------------------------------------------------------------

def test_softmax():
    check_op(lambda x, axis: nn.softmax(x, axis), example(uniform(-5, 5), SHAPES1, axis=axes_of),
             reference=_cast(lambda x, axis: ss.softmax(x, axis)), name="nn.softmax")


def test_log_softmax():
    check_op(lambda x, axis: nn.log_softmax(x, axis),
             example(uniform(-5, 5), SHAPES1, axis=axes_of),
             reference=_cast(lambda x, axis: ss.log_softmax(x, axis)), name="nn.log_softmax")


def test_logsumexp():
    check_op(lambda x, axis, keepdims: nn.logsumexp(x, axis, keepdims=keepdims),
             example(uniform(-5, 5), SHAPES1, axis=axes_of,
                     keepdims=lambda d, s: d(st.booleans())),
             reference=_cast(lambda x, axis, keepdims: ss.logsumexp(x, axis, keepdims=keepdims)),
             name="nn.logsumexp")


def test_logsumexp_weighted_with_sign():
    """``b`` weights of both signs (sums kept away from 0) and ``return_sign``."""
    def make(rng, dtype, shape, axis):
        a = rng.uniform(-2, 2, shape)
        b = rng.uniform(0.5, 2, shape) * np.where(rng.random(shape) < 0.3, -1, 1)
        s = np.sum(b * np.exp(a), axis=axis, keepdims=True)
        b = np.where(np.abs(s) < 0.3, np.abs(b), b)   # no sum near zero (log|s| blows up)
        return a.astype(dtype), b.astype(dtype)
    check_op(lambda a, b, axis: fs.logsumexp(a, axis, b=b, return_sign=True),
             example(make, SHAPES1, axis=axis_of),
             reference=lambda a, b, axis: tuple(
                 np.asarray(r).astype(a.dtype)
                 for r in ss.logsumexp(a.astype(np.float64), axis, b=b.astype(np.float64),
                                       return_sign=True)),
             # order 1: in float32 the second derivative of a + log|b| (0 in a) is rounding
             order=1, name="scipy.special.logsumexp[b, return_sign]")


def test_glu():
    def make(rng, dtype, shape, axis):
        shape = list(shape)
        shape[axis] *= 2
        return (rng.uniform(-4, 4, shape).astype(dtype),)
    check_op(lambda x, axis: nn.glu(x, axis), example(make, SHAPES1, axis=axis_of),
             reference=_cast(_glu), name="nn.glu")


def test_standardize():
    def make(rng, dtype, shape, axis):
        return (rng.uniform(-3, 3, shape).astype(dtype),)
    # sides >= 3: over two entries standardize is +-1 up to epsilon, with derivatives that
    # are all cancellation
    check_op(lambda x, axis: nn.standardize(x, axis),
             example(make, st.lists(st.integers(3, 4), min_size=1, max_size=3).map(tuple),
                     axis=axes_of),
             reference=_cast(_standardize), name="nn.standardize")


@pytest.mark.x64  # a float64 reference to 1e-12
def test_standardize_where_and_given_statistics():
    x = np.array([[1.0, 2.0, 3.0, 100.0], [4.0, 4.0, 5.0, -50.0]])
    mask = np.array([[True, True, True, False], [True, True, True, False]])
    got = nn.standardize(x, axis=1, where=mask)
    want = _standardize(x[:, :3], 1)
    np.testing.assert_allclose(np.asarray(got)[:, :3], want, rtol=1e-12)
    got2 = nn.standardize(x, axis=0, mean=1.0, variance=4.0, epsilon=0.0)
    np.testing.assert_allclose(np.asarray(got2), (x - 1.0) / 2.0)


@pytest.mark.x64  # SciPy float64 references to 1e-12
def test_scipy_softmax_aliases_reduce_all_axes():
    x = np.random.default_rng(0).normal(size=(2, 3))
    np.testing.assert_allclose(np.asarray(fs.softmax(x)), ss.softmax(x), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fs.log_softmax(x)), ss.log_softmax(x), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fs.softmax(x, axis=0)), ss.softmax(x, axis=0),
                               rtol=1e-12)


# --- one_hot --------------------------------------------------------------------------------

def test_one_hot():
    x = np.array([[0, 2], [-1, 3]])
    out = nn.one_hot(x, 3)
    assert out.dtype == np.float32 and out.shape == (2, 2, 3)
    np.testing.assert_array_equal(np.asarray(out), np.eye(3)[[[0, 2], [0, 0]]] *
                                  np.array([[1, 1], [0, 0]])[..., None])
    first = nn.one_hot(np.array([1, 5, 0]), 3, dtype=np.int8, axis=0)
    assert first.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(first), [[0, 0, 1], [1, 0, 0], [0, 0, 0]])
    jitted = fnx.jit(lambda i: nn.one_hot(i, 4, dtype=fnp.bool_))(np.array([3, -2], np.int8))
    np.testing.assert_array_equal(np.asarray(jitted), [[0, 0, 0, 1], [0, 0, 0, 0]])
    batched = fnx.vmap(lambda i: nn.one_hot(i, 2))(np.array([[0, 1], [1, 7]]))
    np.testing.assert_array_equal(np.asarray(batched), [[[1, 0], [0, 1]], [[0, 1], [0, 0]]])


# --- extreme inputs -------------------------------------------------------------------------

EXTREME = [(n, f, r) for n, f, r, _ in ELEMENTWISE[:16]] + [
    ("log_ndtr", fs.log_ndtr, ss.log_ndtr), ("ndtr", fs.ndtr, ss.ndtr),
    ("expit", fs.expit, ss.expit), ("log_expit", fs.log_expit, ss.log_expit),
    ("erfc", fs.erfc, ss.erfc),
]


@pytest.mark.parametrize("dtype", FLOAT_CASES)
@pytest.mark.parametrize("name,fn,ref", EXTREME, ids=[e[0] for e in EXTREME])
def test_extreme_inputs(name, fn, ref, dtype):
    """At +-1e4 (and ordinary points): values match the reference, gradients are finite
    and match the reference's central differences (computed in float64)."""
    x = np.array([-1e4, -30.0, -2.5, -0.5, 0.5, 2.5, 30.0, 1e4], dtype)
    got = np.asarray(fn(x))
    want = ref(x.astype(np.float64))
    assert np.isfinite(got).all(), (name, got)
    # float32: values below its range (ndtr(-30) ~ 5e-198) are 0
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-37 if dtype == np.float32 else 0)
    g = np.asarray(fnx.vmap(fnx.grad(fn))(x))
    assert np.isfinite(g).all(), (name, g)
    xs = x.astype(np.float64)
    h = 1e-6 * np.maximum(1, np.abs(xs))
    fd = (ref(xs + h) - ref(xs - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-6, err_msg=name)
    gg = np.asarray(fnx.vmap(fnx.grad(fnx.grad(fn)))(x))
    assert np.isfinite(gg).all(), (name, gg)


def test_relu_conventions():
    for f in (nn.relu, nn.relu6):
        assert float(fnx.grad(f)(0.0)) == 0.0
    assert float(fnx.grad(nn.relu6)(6.0)) == 0.0
    assert np.isnan(float(nn.relu(np.nan)))
    assert nn.relu(np.array([-2, 3], np.int32)).dtype == np.int32


NEG = -np.inf


@pytest.mark.parametrize("dtype", FLOAT_CASES)
def test_softmax_masks_and_extremes(dtype):
    x = np.array([[0.0, NEG, 1.0, NEG], [1e4, -1e4, 1e4, 0.0], [NEG, NEG, NEG, NEG]], dtype)
    w = np.array([1.0, 2.0, 3.0, 4.0], dtype)
    y = np.asarray(nn.softmax(x))
    np.testing.assert_allclose(y[:2], ss.softmax(x[:2].astype(np.float64), axis=-1), rtol=1e-6)
    assert np.isnan(y[2]).all()                                    # JAX: NaN
    ly = np.asarray(nn.log_softmax(x))
    np.testing.assert_allclose(ly[:2], ss.log_softmax(x[:2].astype(np.float64), axis=-1),
                               rtol=1e-6)
    assert np.isnan(ly[2]).all()
    for f in (nn.softmax, nn.log_softmax):
        g = np.asarray(fnx.grad(lambda v: fnp.sum(fnp.where(np.isinf(x[:2]), 0, f(v)) * w))(
            x[:2]))
        assert np.isfinite(g).all(), (f.__name__, g)
        assert (g[0, [1, 3]] == 0).all()                            # -inf entries: 0
    # softmax's gradient against the closed form y (w - <y, w>)
    g = np.asarray(fnx.grad(lambda v: fnp.sum(nn.softmax(v) * w))(x[:2]))
    y64 = ss.softmax(x[:2].astype(np.float64), axis=-1)
    np.testing.assert_allclose(g, y64 * (w - (y64 * w).sum(-1, keepdims=True)), atol=1e-6)


@pytest.mark.parametrize("dtype", FLOAT_CASES)
def test_logsumexp_masks_and_extremes(dtype):
    x = np.array([[0.0, NEG, 1.0], [1e4, -1e4, 1e4], [NEG, NEG, NEG]], dtype)
    out = np.asarray(nn.logsumexp(x, axis=-1))
    np.testing.assert_allclose(out, ss.logsumexp(x.astype(np.float64), axis=-1), rtol=1e-6)
    assert out[2] == -np.inf                                        # as JAX and SciPy
    g = np.asarray(fnx.grad(lambda v: fnp.sum(fnp.where(np.arange(3)[:, None] < 2,
                                                        nn.logsumexp(v, -1, keepdims=True),
                                                        0.0)))(x))
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g[:2], ss.softmax(x[:2].astype(np.float64), -1), atol=1e-6)
    assert (g[2] == 0).all() and g[0, 1] == 0
    # a row of only -inf: its own gradient is 0 too (JAX gives NaN)
    g_all = np.asarray(fnx.grad(lambda v: nn.logsumexp(v))(np.full(3, NEG, dtype)))
    np.testing.assert_array_equal(g_all, 0)
    # fully masked rows through where=: softmax 0, log_softmax -inf, logsumexp -inf
    mask = np.array([[True, False, True], [True, True, False], [False, False, False]])
    xm = np.array([[0.0, 50.0, 1.0], [2.0, 1.0, 1e4], [1.0, 2.0, 3.0]], dtype)
    sm = np.asarray(nn.softmax(xm, where=mask))
    np.testing.assert_allclose(sm[0], [ss.expit(-1.0), 0, ss.expit(1.0)], rtol=1e-6)
    np.testing.assert_array_equal(sm[2], 0)
    assert np.asarray(nn.log_softmax(xm, where=mask))[2].tolist() == [NEG] * 3
    lse = np.asarray(nn.logsumexp(xm, axis=1, where=mask))
    np.testing.assert_allclose(lse[:2], [np.logaddexp(0, 1), np.logaddexp(2, 1)], rtol=1e-6)
    assert lse[2] == NEG
    gm = np.asarray(fnx.grad(lambda v: fnp.sum(nn.softmax(v, where=mask) * xm))(xm))
    assert np.isfinite(gm).all() and (gm[~mask] == 0).all()


@pytest.mark.x64  # a float64 value to 1e-7
def test_logsumexp_negative_sum_is_nan_without_sign():
    a, b = np.array([0.0, 1.0]), np.array([1.0, -1.0])
    assert np.isnan(float(fs.logsumexp(a, b=b)))
    val, sign = fs.logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(float(val), np.log(np.e - 1))
    assert float(sign) == -1.0


def test_xlogy_at_zero():
    assert float(fs.xlogy(0.0, 0.0)) == 0.0 and float(fs.xlog1py(0.0, -1.0)) == 0.0
    gx, gy = fnx.grad(fs.xlogy, argnums=(0, 1))(0.0, 2.0)
    assert np.isclose(float(gx), np.log(2.0)) and float(gy) == 0.0
    gy0 = fnx.grad(fs.xlogy, argnums=1)(0.0, 0.0)
    assert float(gy0) == 0.0                    # finite: x = 0 takes no derivative in y
    gy1 = fnx.grad(fs.xlog1py, argnums=1)(0.0, -1.0)
    assert float(gy1) == 0.0
    assert float(fs.entr(0.0)) == 0.0 and float(fs.entr(-1.0)) == NEG


@pytest.mark.x64  # float64 tails down to 1e-300, to 1e-13
def test_ndtri_tails():
    """Down to the smallest normal p (2p - 1 keeps none of a tiny p's digits), in both
    dtypes; the edges; the derivative 1 / phi(ndtri(p)) in the tails."""
    for dtype, tiny, rtol in ((np.float64, 1e-300, 1e-13), (np.float32, 1e-37, 2e-6)):
        p = np.array([tiny, 1e-20, 1e-10, 1e-4, 0.049, 0.051, 0.5, 0.9999, 1 - 1e-6], dtype)
        np.testing.assert_allclose(np.asarray(fs.ndtri(p)), ss.ndtri(p.astype(np.float64)),
                                   rtol=rtol, atol=rtol)
        np.testing.assert_allclose(np.asarray(fnx.jit(fs.ndtri)(p)), np.asarray(fs.ndtri(p)))
    edges = np.asarray(fs.ndtri(np.array([0.0, 1.0, -0.5, 1.5])))
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2:]).all()
    q = np.array([1e-10, 1e-3, 0.999])
    x = ss.ndtri(q)
    np.testing.assert_allclose(np.asarray(fnx.grad(lambda q: fs.ndtri(q).sum())(q)),
                               np.sqrt(2 * np.pi) * np.exp(x * x / 2), rtol=1e-12)


def test_logsumexp_shifts_by_the_largest_counted_entry_and_keeps_debug_infs_quiet():
    # SciPy and JAX: entries with b == 0 do not set the shift (fnx gave -inf here)
    x = np.array([-1000.0, -2.0], np.float32)
    np.testing.assert_allclose(fnx.nn.logsumexp(x, b=np.array([1.0, 0.0], np.float32)),
                               -1000.0)
    with fnx.debug_infs(True):      # no -inf constant on the way to a finite result
        np.testing.assert_allclose(fnx.nn.logsumexp(np.ones((3, 4), np.float32), axis=1),
                                   np.full(3, 1 + np.log(4), np.float32), rtol=1e-6)
    with fnx.numpy_dtype_promotion("strict"):        # complex input, real shift
        z = fnx.nn.logsumexp(np.array([1 + 1j, 2 - 1j], np.complex64))
    np.testing.assert_allclose(z, np.log(np.exp(1 + 1j) + np.exp(2 - 1j)), rtol=1e-6)
    g = fnx.grad(lambda v: fnx.nn.logsumexp(v))(np.full(2, -np.inf, np.float32))
    np.testing.assert_array_equal(g, [0.0, 0.0])


def test_one_hot_of_floats_under_strict_promotion_and_initializers_of_bf16_and_complex():
    with fnx.numpy_dtype_promotion("strict"):      # classes compared in x's own dtype
        np.testing.assert_array_equal(fnx.nn.one_hot(fnp.array([0.0, 2.0]), 3),
                                      [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(fnx.nn.one_hot(np.array([True, False]), 2), [[0, 1], [1, 0]])
    key = fnx.random.PRNGKey(0)
    u = fnx.nn.initializers.uniform()(key, (3,), fnp.bfloat16)
    assert u.dtype == fnp.bfloat16
    # JAX 0.10.2: uniform()(PRNGKey(0), (3,), bfloat16)
    np.testing.assert_array_equal(np.asarray(u, np.float32),
                                  [0.006500244140625, 0.005706787109375, 0.00156402587890625])
    z = fnx.nn.initializers.normal()(key, (3,), fnp.complex64)
    assert z.dtype == np.complex64
    # JAX 0.10.2's values (its erf_inv differs from fnx's in the last bits)
    np.testing.assert_allclose(z, [0.0070994524 - 0.01727077j, -0.0064087715 - 0.014394434j,
                                   -0.0052903765 + 0.0014534172j], rtol=1e-6)
    # complex normal draws have variance 1 (real and imaginary parts 1/2 each)
    draws = np.asarray(fnx.random.normal(key, (20000,), fnp.complex64))
    assert abs(np.var(draws.real) - 0.5) < 0.03 and abs(np.var(draws.imag) - 0.5) < 0.03
