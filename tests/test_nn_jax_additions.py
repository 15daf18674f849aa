"""The ``jax.nn`` functions added after the first set: identity, tanh, mish, squareplus,
sparse_plus, sparse_sigmoid, log1mexp, logmeanexp and dot_product_attention.

Each is checked against a float64 NumPy/SciPy reference (``check_op``: values, jit, vmap,
both derivative modes to order 2), at extreme inputs drawn by hypothesis over the whole
float32 range (values, and derivatives against float64 closed forms), for the dtypes JAX
0.10.2 gives, and ``dot_product_attention`` against a loop-by-loop NumPy definition for
every masking option, grouped-query attention and its errors."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx import nn
from fnx.testing import check_op
from test_nn_functions import SHAPES1, _cast, axes_of, example, uniform

# --- float64 references ----------------------------------------------------------------------


def _softplus(x):
    return np.logaddexp(x, 0.0)


def _mish(x):
    return x * np.tanh(_softplus(x))


def _mish_d(x):
    sp = _softplus(x)
    with np.errstate(over="ignore"):
        sech2 = 1 / np.cosh(sp) ** 2
    return np.tanh(sp) + x * sech2 * ss.expit(x)


def _squareplus(x, b=4.0):
    r = np.hypot(x, np.sqrt(b))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < 0, b / (2 * (r - x)), (x + r) / 2)


def _squareplus_d(x, b=4.0):
    r = np.hypot(x, np.sqrt(b))
    with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x < 0, b / (2 * r * (r - x)), (1 + x / r) / 2)


def _sparse_plus(x):
    return np.where(x <= -1, 0.0, np.where(x >= 1, x, (np.clip(x, -1, 1) + 1) ** 2 / 4))


def _sparse_sigmoid(x):
    return np.clip((x + 1) / 2, 0, 1)


def _log1mexp(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < np.log(2), np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))


def _log1mexp_d(x):
    with np.errstate(divide="ignore", over="ignore"):
        return 1 / np.expm1(x)


# (name, function, reference, strategy)
ELEMENTWISE = [
    ("identity", nn.identity, lambda x: x, uniform(-5, 5)),
    ("tanh", nn.tanh, np.tanh, uniform(-5, 5)),
    ("mish", nn.mish, _mish, uniform(-10, 10)),
    ("squareplus", nn.squareplus, _squareplus, uniform(-10, 10)),
    ("squareplus_b", lambda x: nn.squareplus(x, 0.5), lambda x: _squareplus(x, 0.5),
     uniform(-10, 10)),
    ("sparse_plus", nn.sparse_plus, _sparse_plus, uniform(-3, 3, (-1, 1))),
    ("sparse_sigmoid", nn.sparse_sigmoid, _sparse_sigmoid, uniform(-3, 3, (-1, 1))),
    # second-order finite differences near 0 lose (eps / x^2)^2: kept away from it
    ("log1mexp", nn.log1mexp, _log1mexp, uniform(0.05, 20, (np.log(2),))),
]


@pytest.mark.parametrize("name,fn,ref,make", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise(name, fn, ref, make):
    check_op(lambda x: fn(x), example(make), reference=_cast(ref), name=f"nn.{name}")


def test_squareplus_in_b():
    def make(rng, dtype, shape):
        x, b = rng.uniform(-6, 6, shape), rng.uniform(0.2, 5, shape)
        return x.astype(dtype), b.astype(dtype)
    check_op(lambda x, b: nn.squareplus(x, b), example(make),
             reference=_cast(_squareplus), name="nn.squareplus[b]")


# --- the whole float32 range ---------------------------------------------------------------

F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
# (name, function, reference, its derivative, domain, the derivative's atol)
EXTREME = [
    ("mish", nn.mish, _mish, _mish_d, F32, 0),
    ("squareplus", nn.squareplus, _squareplus, _squareplus_d, F32, 0),
    ("sparse_plus", nn.sparse_plus, _sparse_plus, _sparse_sigmoid, F32, 0),
    ("sparse_sigmoid", nn.sparse_sigmoid, _sparse_sigmoid,
     lambda x: np.where(np.abs(x) < 1, 0.5, np.where(np.abs(x) == 1, 0.25, 0.0)), F32, 0),
    ("log1mexp", nn.log1mexp, _log1mexp, _log1mexp_d, F32.filter(lambda x: x >= 0), 0),
    # (1 - tanh^2, as JAX's rule: it cancels to float32's eps where tanh nears 1)
    ("tanh", nn.tanh, np.tanh, lambda x: 1 / np.cosh(np.clip(x, -300, 300)) ** 2, F32, 2e-7),
]


@pytest.mark.parametrize("name,fn,ref,deriv,dom,datol", EXTREME, ids=[e[0] for e in EXTREME])
def test_whole_float32_range(name, fn, ref, deriv, dom, datol):
    """Values to a few ulps of the float64 reference (absolutely, below float32's normal
    range), derivatives to 1e-5 of the float64 closed form wherever it is representable,
    second derivatives never NaN, jit equal to eager, for inputs from subnormals to
    +-3.4e38."""
    tiny = float(np.finfo(np.float32).tiny)

    @settings(max_examples=150, deadline=None)
    @given(st.lists(dom, min_size=1, max_size=8))
    def check(xs):
        x = np.array(xs, np.float32)
        x64 = x.astype(np.float64)
        got = np.asarray(fn(x))
        assert got.dtype == np.float32
        want = ref(x64)
        np.testing.assert_allclose(got, want, rtol=4e-6, atol=tiny, err_msg=name)
        np.testing.assert_array_equal(np.asarray(fnx.jit(fn)(x)), got)
        g = np.asarray(fnx.vmap(fnx.grad(fn))(x))
        d = deriv(x64)
        ok = np.abs(d) < np.finfo(np.float32).max
        assert np.isfinite(g[ok]).all(), (name, x[ok], g[ok])
        np.testing.assert_allclose(g[ok], d[ok], rtol=1e-5, atol=max(tiny, datol),
                                   err_msg=name)
        gg = np.asarray(fnx.vmap(fnx.grad(fnx.grad(fn)))(x))
        assert not np.isnan(gg[np.isfinite(want)]).any(), (name, x, gg)

    check()


def test_log1mexp_edges():
    """``-inf`` at 0 (derivative inf), NaN below 0 (as JAX), ``-0`` at ``inf``; the two
    branches agree at ``log 2``; second derivatives finite for x > 0."""
    out = np.asarray(nn.log1mexp(np.array([0.0, -1.0, np.inf], np.float32)))
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == 0
    assert float(fnx.grad(nn.log1mexp)(0.0)) == np.inf
    assert float(fnx.grad(nn.log1mexp)(np.float32(np.inf))) == 0
    l2 = np.float32(np.log(2))
    near = np.array([np.nextafter(l2, np.float32(0)), l2, np.nextafter(l2, np.float32(1))])
    np.testing.assert_allclose(np.asarray(nn.log1mexp(near)), _log1mexp(near.astype(float)),
                               rtol=2e-7)
    x = np.array([1e-30, 1e-3, 0.5, 1.0, 30.0, 1e4], np.float32)
    gg = np.asarray(fnx.vmap(fnx.grad(fnx.grad(nn.log1mexp)))(x))
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = -np.exp(x64) / np.expm1(x64) ** 2
    ok = np.abs(want) < 3e38
    np.testing.assert_allclose(gg[ok], want[ok], rtol=1e-5, atol=1e-37)


def test_squareplus_and_sparse_plus_far_out():
    """Where JAX's direct forms cancel or overflow: squareplus(-1e4) is 1e-4, not 0, and
    squareplus(-1e20) is 1e-20, not inf."""
    x = np.array([-3e38, -1e20, -1e4, 1e4, 1e20, 3e38], np.float32)
    np.testing.assert_allclose(np.asarray(nn.squareplus(x)), _squareplus(x.astype(float)),
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(nn.sparse_plus(x)), np.maximum(x, 0))
    h = np.array([-1e4, 300.0, 6e4], np.float16)     # (x + 1)^2 would overflow float16
    assert np.isfinite(np.asarray(fnx.vmap(fnx.grad(nn.sparse_plus))(h))).all()


def test_sparse_kinks_follow_jax():
    """At -1 and 1: sparse_plus's derivative is 0 and 1; sparse_sigmoid's is 1/4 (JAX's
    clip splits a tie between its two sides)."""
    x = np.array([-1.0, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(fnx.vmap(fnx.grad(nn.sparse_plus))(x)), [0, 1])
    np.testing.assert_array_equal(np.asarray(fnx.vmap(fnx.grad(nn.sparse_sigmoid))(x)),
                                  [0.25, 0.25])


# --- dtypes ----------------------------------------------------------------------------------

INPUT_DTYPES = ["int32", "int8", "bool", "float16", "bfloat16", "float32"]
FUNCS = ["identity", "tanh", "mish", "squareplus", "sparse_plus", "sparse_sigmoid",
         "log1mexp", "logmeanexp"]


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
def test_output_dtypes(name, dtype):
    """As JAX 0.10.2: floats keep their dtype, ints and bools give float32 (identity keeps
    every dtype); a Python scalar gives a weakly typed float32 (int32 for identity of an
    int), except logmeanexp's, which is strong (its count is a strong array)."""
    f = getattr(nn, name)
    out = f(fnp.array([1, 0], dtype))
    want = dtype if name == "identity" or "float" in dtype else "float32"
    assert out.dtype == want
    assert fnx.jit(f)(fnp.array([1, 0], dtype)).dtype == want
    for scalar, identity_dtype in ((2.0, "float32"), (2, "int32")):
        r = f(scalar)
        assert r.dtype == (identity_dtype if name == "identity" else "float32")
        assert r.weak_type == (name != "logmeanexp")


def test_squareplus_b_promotes():
    assert nn.squareplus(fnp.float16(1), 4.0).dtype == "float16"
    assert nn.squareplus(fnp.float16(1), fnp.float32(4)).dtype == "float32"


# --- logmeanexp ------------------------------------------------------------------------------

def _logmeanexp(x, axis, keepdims):
    n = np.prod([x.shape[a] for a in np.atleast_1d(axis)])
    return ss.logsumexp(x, axis, keepdims=keepdims) - np.log(n)


def test_logmeanexp():
    check_op(lambda x, axis, keepdims: nn.logmeanexp(x, axis, keepdims=keepdims),
             example(uniform(-5, 5), SHAPES1, axis=axes_of,
                     keepdims=lambda d, s: d(st.booleans())),
             reference=_cast(_logmeanexp), name="nn.logmeanexp")


@pytest.mark.x64  # float64 references to 1e-12
def test_logmeanexp_where_and_extremes():
    x = np.array([[1.0, 2.0, 1e4], [3.0, -1e4, 4.0], [5.0, 6.0, 7.0]])
    w = np.array([[True, True, False], [True, True, True], [False, False, False]])
    out = np.asarray(nn.logmeanexp(x, axis=1, where=w))
    np.testing.assert_allclose(out[:2], [np.logaddexp(1, 2) - np.log(2),
                                         ss.logsumexp([3, -1e4, 4]) - np.log(3)], rtol=1e-12)
    assert np.isnan(out[2])                                  # nothing kept: NaN, as JAX
    assert nn.logmeanexp(x, axis=1, where=w, keepdims=True).shape == (3, 1)
    np.testing.assert_allclose(float(nn.logmeanexp(x)), ss.logsumexp(x) - np.log(9),
                               rtol=1e-12)
    g = np.asarray(fnx.grad(lambda v: fnp.sum(nn.logmeanexp(v, axis=1, where=w)[:2]))(x))
    np.testing.assert_allclose(g[0], [ss.expit(-1), ss.expit(1), 0], rtol=1e-12)
    assert np.isfinite(g).all()


# --- dot_product_attention ------------------------------------------------------------------


def _4d(t):
    t = np.asarray(t)
    return t.reshape((1,) * (4 - t.ndim) + t.shape)


def ref_attention(q, k, v, bias=None, mask=None, *, scale=None, is_causal=False,
                  query_seq_lengths=None, key_value_seq_lengths=None,
                  local_window_size=None, return_residual=False):
    """The definition, one query row at a time, in float64: query head n reads key/value
    head n // (N // K); a row with no key left attends to all of them uniformly (JAX's
    large-negative fill); query rows past their length give 0."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    B, T, N, H = q.shape
    _, S, K, _ = k.shape
    scale = 1 / np.sqrt(H) if scale is None else scale
    if bias is not None:
        bias = np.broadcast_to(_4d(bias).astype(np.float64), (B, N, T, S))
    mask = None if mask is None else np.broadcast_to(_4d(mask), (B, N, T, S))
    w = local_window_size
    w = (w, w) if isinstance(w, int) else w
    out, lse = np.zeros((B, T, N, H)), np.zeros((B, T, N))
    for b in range(B):
        for n in range(N):
            kh = n // (N // K)
            for t in range(T):
                logit = k[b, :, kh] @ q[b, t, n] * scale
                if bias is not None:
                    logit = logit + bias[b, n, t]
                s = np.arange(S)
                keep = np.ones(S, bool) if mask is None else mask[b, n, t].copy()
                if is_causal:
                    keep &= s <= t
                if w is not None:
                    keep &= (t - w[0] <= s) & (s <= t + w[1])
                if key_value_seq_lengths is not None:
                    keep &= s < key_value_seq_lengths[b]
                if query_seq_lengths is not None:
                    keep &= t < query_seq_lengths[b]
                if keep.any():
                    p = np.where(keep, np.exp(logit - logit[keep].max()), 0)
                    lse[b, t, n] = np.log(p.sum()) + logit[keep].max()
                    p = p / p.sum()
                else:
                    p = np.full(S, 1 / S)
                    lse[b, t, n] = -np.inf               # (JAX: fill + log S, -0.7 * max)
                if query_seq_lengths is None or t < query_seq_lengths[b]:
                    out[b, t, n] = p @ v[b, :, kh]
    return (out, lse) if return_residual else out


@st.composite
def attention_cases(draw, dtype=np.float64):
    """Shapes (GQA included), and any subset of the options, with bias/mask shapes that
    broadcast (size-1 dims, fewer leading dims)."""
    B, T, S, K, G, H = (draw(st.integers(1, n)) for n in (2, 4, 4, 2, 3, 4))
    N = K * G
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    q = rng.normal(size=(B, T, N, H)).astype(dtype)
    k = rng.normal(size=(B, S, K, H)).astype(dtype)
    v = rng.normal(size=(B, S, K, H)).astype(dtype)

    def logit_shape():
        full = (B, N, T, S)
        shape = tuple(n if draw(st.booleans()) else 1 for n in full)
        return shape[draw(st.integers(0, 2)):]
    kw = {}
    if draw(st.booleans()):
        kw["bias"] = rng.normal(size=logit_shape()).astype(dtype)
    if draw(st.booleans()):
        kw["mask"] = rng.random(logit_shape()) < 0.7
    if draw(st.booleans()):
        kw["is_causal"] = True
    if draw(st.booleans()):
        kw["scale"] = draw(st.floats(0.1, 2.0))
    if draw(st.booleans()):
        kw["local_window_size"] = draw(st.one_of(
            st.integers(0, 3), st.tuples(st.integers(0, 3), st.integers(0, 3))))
    if draw(st.booleans()):
        kw["query_seq_lengths"] = rng.integers(0, T + 1, B).astype(np.int32)
    if draw(st.booleans()):
        kw["key_value_seq_lengths"] = rng.integers(0, S + 1, B).astype(np.int32)
    return q, k, v, kw


@pytest.mark.x64   # a float64 reference to 1e-12
@settings(max_examples=60, deadline=None)
@given(attention_cases())
def test_attention_against_reference(case):
    q, k, v, kw = case
    got, res = nn.dot_product_attention(q, k, v, return_residual=True, **kw)
    want, lse = ref_attention(q, k, v, return_residual=True, **kw)
    assert got.dtype == np.float64 and got.shape == q.shape and res.shape == q.shape[:3]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    res = np.asarray(res)
    rows = np.isfinite(lse)
    np.testing.assert_allclose(res[rows], lse[rows], rtol=1e-12, atol=1e-12)
    assert (res[~rows] < -1e38).all()                        # JAX's fill, not -inf
    jitted = fnx.jit(lambda q, k, v: nn.dot_product_attention(q, k, v, **kw))(q, k, v)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(got), rtol=1e-14, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(attention_cases(np.float32))
def test_attention_float32_jit_and_vmap(case):
    """float32 against the float64 reference; vmap over a stacked batch equals a loop."""
    q, k, v, kw = case
    f = lambda q, k, v: nn.dot_product_attention(q, k, v, **kw)   # noqa: E731
    got = np.asarray(f(q, k, v))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref_attention(q, k, v, **kw), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(fnx.jit(f)(q, k, v)), got, rtol=1e-6, atol=1e-7)
    arrays = {n: a for n, a in kw.items() if isinstance(a, np.ndarray)}   # traced under jit
    static = {n: a for n, a in kw.items() if n not in arrays}
    traced = fnx.jit(lambda q, k, v, arrays: nn.dot_product_attention(q, k, v, **arrays,
                                                                       **static))
    np.testing.assert_allclose(np.asarray(traced(q, k, v, arrays)), got, rtol=1e-6, atol=1e-7)
    qs, ks, vs = (np.stack([t, 0.5 * t[::-1]]) for t in (q, k, v))
    batched = np.asarray(fnx.vmap(f)(qs, ks, vs))
    looped = np.stack([np.asarray(f(qs[i], ks[i], vs[i])) for i in range(2)])
    np.testing.assert_allclose(batched, looped, rtol=1e-6, atol=1e-7)


def _directional_check(f, args, rng, eps=1e-6, rtol=1e-6):
    """grad (reverse) and jvp (forward) of a scalar ``f`` against a central difference
    along a random direction, in float64."""
    dirs = [rng.normal(size=np.shape(a)) for a in args]
    fd = (f(*[a + eps * d for a, d in zip(args, dirs)]) -
          f(*[a - eps * d for a, d in zip(args, dirs)])) / (2 * eps)
    grads = fnx.grad(f, argnums=tuple(range(len(args))))(*args)
    rev = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(grads, dirs))
    _, fwd = fnx.jvp(f, tuple(args), tuple(dirs))
    np.testing.assert_allclose(rev, float(fd), rtol=rtol, atol=1e-9)
    np.testing.assert_allclose(float(fwd), float(fd), rtol=rtol, atol=1e-9)
    return grads


@pytest.mark.x64   # float64 finite differences
@settings(max_examples=25, deadline=None)
@given(attention_cases())
def test_attention_derivatives(case):
    """In query, key, value and bias, against finite differences; the residual carries
    no derivative (as JAX's stop_gradient)."""
    q, k, v, kw = case
    bias = kw.pop("bias", np.zeros((1, 1, 1, 1)))
    w = np.random.default_rng(0).normal(size=q.shape)

    def f(q, k, v, bias):
        return fnp.sum(nn.dot_product_attention(q, k, v, bias, **kw) * w)
    grads = _directional_check(f, [q, k, v, bias], np.random.default_rng(1))
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    g_res = fnx.grad(lambda q: fnp.sum(
        nn.dot_product_attention(q, k, v, bias, return_residual=True, **kw)[1]))(q)
    np.testing.assert_array_equal(np.asarray(g_res), 0)


_RNG = np.random.default_rng(8)
ONE_OPTION = [
    ("plain", {}),
    ("causal", dict(is_causal=True)),
    ("window_left", dict(local_window_size=(2, 0))),
    ("window_right", dict(local_window_size=(0, 1))),
    ("window_int", dict(local_window_size=1)),
    ("q_lengths", dict(query_seq_lengths=np.array([2, 5], np.int32))),
    ("kv_lengths", dict(key_value_seq_lengths=np.array([1, 4], np.int32))),
    ("mask_full", dict(mask=_RNG.random((2, 4, 5, 6)) < 0.6)),
    ("mask_2d", dict(mask=_RNG.random((5, 6)) < 0.6)),
    ("bias_heads", dict(bias=_RNG.normal(size=(4, 1, 6)))),
    ("bias_batch", dict(bias=_RNG.normal(size=(2, 1, 5, 6)))),
    ("scale", dict(scale=0.25)),
]


@pytest.mark.x64   # a float64 reference to 1e-12
@pytest.mark.parametrize("kw", [o[1] for o in ONE_OPTION], ids=[o[0] for o in ONE_OPTION])
def test_attention_one_option(kw):
    """Each option alone, T != S, 4 query heads over 2 key/value heads."""
    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=s) for s in ((2, 5, 4, 3), (2, 6, 2, 3), (2, 6, 2, 3)))
    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(q, k, v, **kw)),
                               ref_attention(q, k, v, **kw), rtol=1e-12, atol=1e-12)


def test_attention_gqa_is_mha_with_repeated_heads():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(2, 3, 6, 4)).astype(np.float32)
    for K in (1, 2, 3):
        k = rng.normal(size=(2, 5, K, 4)).astype(np.float32)
        v = rng.normal(size=(2, 5, K, 4)).astype(np.float32)
        gqa = np.asarray(nn.dot_product_attention(q, k, v, is_causal=True))
        mha = np.asarray(nn.dot_product_attention(q, np.repeat(k, 6 // K, 2),
                                                  np.repeat(v, 6 // K, 2), is_causal=True))
        np.testing.assert_allclose(gqa, mha, rtol=1e-6, atol=1e-7)


def test_attention_unbatched_layout_and_causal_alignment():
    """(T, N, H) inputs give (T, N, H); causal masks are top-left aligned (query t sees
    keys s <= t, also when T != S), as JAX."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=s).astype(np.float32)
               for s in ((3, 2, 4), (5, 1, 4), (5, 1, 4)))
    out = nn.dot_product_attention(q, k, v, is_causal=True)
    assert out.shape == (3, 2, 4)
    np.testing.assert_allclose(np.asarray(out), ref_attention(
        q[None], k[None], v[None], is_causal=True)[0], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(out)[0], np.repeat(v[0], 2, 0), rtol=1e-6)


def test_attention_fully_masked_rows_and_padding():
    """A row with every key masked averages all values (JAX's large-negative fill, not
    NaN), with finite derivatives; query rows past their length give 0 and no gradient."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 3, 2, 4)).astype(np.float32) for _ in range(3))
    mask = np.ones((1, 1, 3, 3), bool)
    mask[..., 1, :] = False
    out = np.asarray(nn.dot_product_attention(q, k, v, mask=mask))
    np.testing.assert_allclose(out[:, 1], np.broadcast_to(v.mean(1), out[:, 1].shape),
                               rtol=1e-5, atol=1e-6)
    kv0 = np.asarray(nn.dot_product_attention(
        q, k, v, key_value_seq_lengths=np.array([0, 3], np.int32)))
    np.testing.assert_allclose(kv0[0], np.broadcast_to(v[0].mean(0), kv0[0].shape),
                               rtol=1e-5, atol=1e-6)
    ql = np.array([1, 0], np.int32)
    padded = np.asarray(nn.dot_product_attention(q, k, v, query_seq_lengths=ql))
    assert (padded[0, 1:] == 0).all() and (padded[1] == 0).all()
    gq = fnx.grad(lambda q: fnp.sum(nn.dot_product_attention(q, k, v, mask=mask,
                                                             query_seq_lengths=ql) ** 2))(q)
    gq = np.asarray(gq)
    assert np.isfinite(gq).all() and (gq[0, 1:] == 0).all() and (gq[1] == 0).all()


def test_attention_large_logits():
    """Logits of +-1e4 (and a bias of -1e30 standing for a mask) stay finite, values
    and derivatives."""
    rng = np.random.default_rng(6)
    q = (rng.normal(size=(1, 3, 2, 4)) * 100).astype(np.float32)
    k = (rng.normal(size=(1, 4, 2, 4)) * 100).astype(np.float32)
    v = rng.normal(size=(1, 4, 2, 4)).astype(np.float32)
    bias = np.where(rng.random((1, 1, 3, 4)) < 0.3, -1e30, 0).astype(np.float32)
    f = lambda q, k: fnp.sum(nn.dot_product_attention(q, k, v, bias))  # noqa: E731
    out = np.asarray(nn.dot_product_attention(q, k, v, bias))
    np.testing.assert_allclose(out, ref_attention(q, k, v, bias), rtol=1e-4, atol=1e-5)
    assert all(np.isfinite(np.asarray(g)).all() for g in fnx.grad(f, argnums=(0, 1))(q, k))


@pytest.mark.parametrize("dtype,atol", [("float16", 4e-3), ("bfloat16", 3e-2),
                                        ("float32", 2e-6)])
def test_attention_dtypes(dtype, atol):
    """As JAX: the output and residual have the inputs' dtype, whatever the bias's; the
    logits and softmax are float32 (so half-precision values are the reference's to
    rounding of the probabilities and output)."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=s) for s in ((2, 3, 4, 5), (2, 4, 2, 5), (2, 4, 2, 5)))
    bias = rng.normal(size=(1, 1, 3, 4))
    c = lambda t: fnp.asarray(t, np.float32).astype(dtype)  # noqa: E731
    out, res = nn.dot_product_attention(c(q), c(k), c(v), fnp.asarray(bias, np.float32),
                                         is_causal=True, return_residual=True)
    assert out.dtype == dtype and res.dtype == dtype and res.shape == (2, 3, 4)
    want, lse = ref_attention(*(np.asarray(c(t).astype(np.float32)) for t in (q, k, v)),
                              bias.astype(np.float32), is_causal=True, return_residual=True)
    np.testing.assert_allclose(np.asarray(out.astype(np.float32)), want, atol=atol, rtol=0)
    np.testing.assert_allclose(np.asarray(res.astype(np.float32)), lse, atol=atol * 8,
                               rtol=atol)
    jitted = fnx.jit(lambda a, b, d: nn.dot_product_attention(a, b, d, is_causal=True))
    assert jitted(c(q), c(k), c(v)).dtype == dtype


# --- errors ---------------------------------------------------------------------------------

_Q, _K = np.zeros((2, 3, 4, 5), np.float32), np.zeros((2, 6, 2, 5), np.float32)
ERRORS = [
    ("dtypes", dict(query=_Q.astype(np.float16)), ValueError, r"float16.*float32.*astype"),
    ("value", dict(value=_K[:, :2]), ValueError, r"value has shape \(2, 2, 2, 5\).*key has"),
    ("batch", dict(query=_Q[:1]), ValueError, r"query of shape \(1, 3, 4, 5\).*batch B"),
    ("head_size", dict(query=_Q[..., :3]), ValueError, r"head size H"),
    ("groups", dict(query=_Q[:, :, :3]), ValueError, r"N = 3 must be a multiple of.*K = 2"),
    ("bias_heads", dict(bias=np.zeros((1, 2, 3, 6))), ValueError,
     r"bias of shape \(1, 2, 3, 6\).*\(B, N, T, S\) = \(2, 4, 3, 6\).*number of query heads"),
    ("mask_shape", dict(mask=np.ones((3, 5), bool)), ValueError,
     r"mask of shape \(1, 1, 3, 5\)"),
    ("mask_dtype", dict(mask=np.ones((3, 6))), ValueError, r"mask must be boolean.*bias"),
    ("rank", dict(bias=np.zeros((1, 1, 1, 3, 6))), ValueError, r"bias has shape.*rank <= 4"),
    ("seq_shape", dict(query_seq_lengths=np.array([1, 2, 3])), ValueError,
     r"query_seq_lengths must be an integer array of shape \(B,\) = \(2,\)"),
    ("seq_dtype", dict(key_value_seq_lengths=np.array([1.0, 2.0])), ValueError,
     r"key_value_seq_lengths must be an integer"),
    ("window", dict(local_window_size=(1, 2, 3)), ValueError, r"local_window_size"),
    ("cudnn", dict(implementation="cudnn"), NotImplementedError, r"only the 'xla' path"),
    ("cudnn_runtime", dict(implementation="cudnn"), RuntimeError, r"cudnn"),
    ("implementation", dict(implementation="flash"), ValueError,
     r"unsupported implementation"),
]


@pytest.mark.parametrize("kw,exc,msg", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_attention_errors(kw, exc, msg):
    args = dict(query=_Q, key=_K, value=_K)
    args.update(kw)
    with pytest.raises(exc, match=r"^dot_product_attention: ") as info:
        nn.dot_product_attention(**args)
    assert info.match(msg)


def test_jax_nn_names():
    # jax.nn 0.10.2's functions (less its fp8/fp4 scaled_* helpers), all in fnx.nn
    names = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid",
             "hard_silu", "hard_swish", "hard_tanh", "identity", "initializers",
             "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax", "logmeanexp",
             "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu",
             "soft_sign", "softmax", "softplus", "sparse_plus", "sparse_sigmoid",
             "squareplus", "standardize", "swish", "tanh"]
    assert [n for n in names if not hasattr(nn, n)] == []


def test_activations_of_python_scalars_are_weak_as_jaxs():
    """Weak typing decides later promotions (``relu(2.0) * a_bfloat16`` stays bfloat16):
    every activation of a Python float is weakly typed as in JAX 0.10, except gelu, which
    JAX makes strong (its constants are NumPy scalars)."""
    import fnx
    names = ["relu", "relu6", "elu", "softplus", "hard_tanh", "silu", "sigmoid", "celu",
             "selu", "leaky_relu", "log_sigmoid", "soft_sign", "hard_sigmoid", "hard_silu",
             "mish", "squareplus", "sparse_plus", "sparse_sigmoid", "tanh", "identity",
             "log1mexp"]
    for n in names:
        assert getattr(fnx.nn, n)(1.0).weak_type, n
    assert not fnx.nn.gelu(1.0).weak_type and not fnx.nn.gelu(1.0, approximate=False).weak_type
    assert fnx.lax.full_like(1.0, 2).weak_type


def test_dot_product_attention_under_strict_promotion_and_vjp_with_none_args():
    # fnx's own conversions (half-precision inputs in float32 logits, a causal mask with
    # a 4-D one) do not depend on the user's promotion modes; vjp takes None arguments
    q = fnx.random.normal(fnx.random.PRNGKey(0), (2, 5, 4, 8), "bfloat16")
    mask = fnp.ones((2, 1, 5, 5), bool)
    bias = fnp.zeros((2, 4, 5, 5), "bfloat16")
    with fnx.numpy_dtype_promotion("strict"), fnx.numpy_rank_promotion("raise"):
        out = nn.dot_product_attention(q, q, q, bias, mask, is_causal=True)
        assert out.dtype == np.dtype("bfloat16") and out.shape == q.shape
        ref = nn.dot_product_attention(q.astype("float32"), q.astype("float32"),
                                       q.astype("float32"), None, mask, is_causal=True)
        np.testing.assert_allclose(np.asarray(out, "float32"), ref, atol=0.05)
        y, f_vjp = fnx.vjp(nn.dot_product_attention, q, q, q, None, mask)
        dq, dk, dv, db, dm = f_vjp(fnp.ones_like(y))
        assert dq.dtype == np.dtype("bfloat16") and db is None
    out, f_vjp = fnx.vjp(lambda x, b: x * 2, fnp.ones(2), None)
    assert f_vjp(fnp.ones(2))[1] is None
