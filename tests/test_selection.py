"""Cumulative and selection functions against NumPy, through jit, vmap and both modes of
differentiation (``check_op``), plus their edge cases: ``top_k``, ``cumlogsumexp``,
multi-key ``sort``, ``argsort`` (stable, descending), ``searchsorted`` (side, sorter),
``bincount`` (static length, weights), ``take``/``take_along_axis`` gradients and the
Array API ``cumulative_sum``/``cumulative_prod``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.testing import check_op
from test_nn_functions import FLOAT, FLOAT_CASES, SHAPES1, axis_of
from test_nn_functions import example as _example


def example(make, **params):
    """``dtypes -> `` a strategy of ``test_nn_functions.example``s of rank >= 1."""
    return lambda dtypes=FLOAT: _example(make, SHAPES1, dtypes, **params)


def distinct(rng, dtype, shape, lo=-3.0, hi=3.0):
    """Values at least (hi - lo) / (4 n) apart: no ties."""
    n = int(np.prod(shape))
    gap = (hi - lo) / max(n, 1)
    return (lo + gap * (rng.permutation(n) + rng.uniform(0.25, 0.75, n))).reshape(shape) \
        .astype(dtype)


# --- cumlogsumexp ------------------------------------------------------------------------------

def _cumlogsumexp_ref(x, axis, reverse):
    if reverse:
        return np.flip(np.logaddexp.accumulate(np.flip(x, axis), axis=axis), axis)
    return np.logaddexp.accumulate(x, axis=axis)


def test_cumlogsumexp_matches_numpy():
    make = example(lambda rng, dt, s, axis, reverse: (rng.uniform(-3, 3, s).astype(dt),),
                   axis=axis_of, reverse=lambda d, s: d(st.booleans()))
    check_op(lambda x, axis, reverse: lax.cumlogsumexp(x, axis, reverse), make(),
             reference=_cumlogsumexp_ref, name="lax.cumlogsumexp")


@pytest.mark.parametrize("dtype", FLOAT_CASES)   # float64 (1e-9 references) under x64
@pytest.mark.parametrize("reverse", [False, True])
def test_cumlogsumexp_extremes(dtype, reverse):
    """Entries +-1e4 and -inf: values as NumPy's, gradients finite and equal to
    sum_i w_i exp(x_j - y_i) (0 at -inf entries and where only -inf has been seen)."""
    x = np.array([-np.inf, 1e4, -1e4, -np.inf, 3.0, 1e4, -2.0], dtype)
    w = np.linspace(0.5, 2.0, x.size)
    y = _cumlogsumexp_ref(x.astype(np.float64), 0, reverse)
    got = lax.cumlogsumexp(x, 0, reverse)
    np.testing.assert_allclose(np.asarray(got), y, rtol=1e-6)
    g = fnx.grad(lambda v: fnp.sum(lax.cumlogsumexp(v, 0, reverse) * w.astype(dtype)))(x)
    xs = x.astype(np.float64)
    pairs = [(i, j) for i in range(x.size) for j in range(x.size)
             if (j <= i if not reverse else j >= i) and np.isfinite(y[i])]
    want = np.zeros(x.size)
    for i, j in pairs:
        want[j] += w[i] * np.exp(xs[j] - y[i])
    assert np.isfinite(np.asarray(g)).all()
    # float32: y ~ 1e4 is known to ~1e-3 (its spacing there), and so are the exp(x - y)
    rtol = 2e-3 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(np.asarray(g), want, rtol=rtol, atol=1e-6)
    leading = np.array([-np.inf, -np.inf, 0.5], dtype)
    g0 = fnx.grad(lambda v: fnp.sum(lax.cumlogsumexp(v)))(leading)
    np.testing.assert_array_equal(np.asarray(g0), [0.0, 0.0, 1.0])


@pytest.mark.x64   # float64 references to 1e-12
def test_cumulative_functions_take_reverse():
    x = np.array([[1.0, 3.0, 2.0], [0.5, -1.0, 4.0]])
    for fn, ref in ((lax.cumsum, np.cumsum), (lax.cumprod, np.cumprod),
                    (lax.cummax, np.maximum.accumulate), (lax.cummin, np.minimum.accumulate),
                    (lax.cumlogsumexp, np.logaddexp.accumulate)):
        for axis in (0, 1):
            got = fn(x, axis=axis, reverse=True)
            want = np.flip(ref(np.flip(x, axis), axis=axis), axis)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, err_msg=fn.__name__)


def test_cumlogsumexp_rejects_integers():
    with pytest.raises(fnx.errors.ShapeError, match="cumlogsumexp"):
        lax.cumlogsumexp(np.arange(3))


# --- top_k ---------------------------------------------------------------------------------------

def _top_k_ref(x, k):
    idx = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, -1), idx.astype(np.int32)


def test_top_k_matches_numpy():
    make = example(lambda rng, dt, s, k: (distinct(rng, dt, s),),
                   k=lambda d, s: d(st.integers(0, s[-1])))
    check_op(lambda x, k: lax.top_k(x, k), make(), reference=_top_k_ref, name="lax.top_k")


def test_top_k_ties_nan_and_integers():
    x = np.array([[3.0, 1.0, 3.0, np.nan, 2.0], [0.0, 5.0, 5.0, -1.0, 5.0]], np.float32)
    vals, idx = lax.top_k(x, 4)
    assert idx.dtype == np.int32 and vals.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(idx), [[3, 0, 2, 4], [1, 2, 4, 0]])
    np.testing.assert_array_equal(np.asarray(vals), [[np.nan, 3, 3, 2], [5, 5, 5, 0]])
    xi = np.array([7, -3, 7, 100, -128], np.int8)
    v, i = lax.top_k(xi, 3)
    assert v.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(v), [100, 7, 7])
    np.testing.assert_array_equal(np.asarray(i), [3, 0, 2])


def test_top_k_grad_jit_vmap():
    x = np.array([[0.3, 2.0, -1.0, 1.5], [4.0, 0.0, 3.0, -2.0]], np.float32)
    w = np.array([1.0, 10.0], np.float32)

    def loss(v):
        return fnp.sum(lax.top_k(v, 2)[0] * w)
    want = np.array([[0, 1, 0, 10], [1, 0, 10, 0]], float)
    np.testing.assert_array_equal(np.asarray(fnx.grad(loss)(x)), want)
    np.testing.assert_array_equal(np.asarray(fnx.jit(fnx.grad(loss))(x)), want)
    vals, idx = fnx.vmap(lambda v: lax.top_k(v, 3), in_axes=1, out_axes=1)(x.T)
    ref_v, ref_i = _top_k_ref(x, 3)
    np.testing.assert_array_equal(np.asarray(vals), ref_v.T)
    np.testing.assert_array_equal(np.asarray(idx), ref_i.T)


def test_top_k_errors():
    with pytest.raises(fnx.errors.ShapeError, match="k=5"):
        lax.top_k(np.ones(4), 5)
    with pytest.raises(fnx.errors.ShapeError, match="at least one dimension"):
        lax.top_k(np.float32(1.0), 1)
    with pytest.raises(fnx.errors.ShapeError, match="complex"):
        lax.top_k(np.ones(3, np.complex64), 1)


# --- sort with several keys ----------------------------------------------------------------

def _sort2_ref(k1, k2, v, dimension):
    perm = np.lexsort((k2, k1), axis=dimension)
    return tuple(np.take_along_axis(a, perm, dimension) for a in (k1, k2, v))


def test_sort_num_keys_through_every_transform():
    """Two keys (the first with many ties), one payload: values against np.lexsort, jit,
    vmap, and derivatives in the payload (the keys held fixed: at a tie, moving a key
    changes the permutation)."""
    def make(rng, dt, s, dimension):
        return (rng.integers(-1, 2, s).astype(dt), distinct(rng, dt, s),
                rng.uniform(-2, 2, s).astype(dt))
    strat = example(make, dimension=lambda d, s: d(st.integers(0, len(s) - 1)))
    check_op(lambda k1, k2, v, dimension: lax.sort((k1, k2, v), dimension, num_keys=2),
             strat(), reference=_sort2_ref, nondiff_argnums=(0, 1), name="lax.sort[num_keys=2]")


# --- argsort, searchsorted ------------------------------------------------------------------

def test_argsort_stable_and_descending():
    def ref(x, axis, descending):
        key = -x if descending else x
        return np.argsort(key, axis=axis, kind="stable").astype(np.int32)

    def make(rng, dt, s, axis, descending):   # few distinct values: many ties
        return (rng.integers(-2, 3, s).astype(dt),)
    strat = example(make, axis=axis_of, descending=lambda d, s: d(st.booleans()))
    check_op(lambda x, axis, descending: fnp.argsort(x, axis=axis, descending=descending),
             strat(FLOAT + (np.int32,)), reference=ref, skip=("jvp", "vjp"),
             name="fnx.numpy.argsort")


def test_argsort_descending_nan_first_and_ties_in_order():
    x = np.array([1.0, np.nan, 3.0, 1.0, 3.0])
    X = fnp.asarray(x)  # the methods take sort's keywords, as JAX's
    np.testing.assert_array_equal(np.asarray(X.argsort(descending=True, stable=True)),
                                  [1, 2, 4, 0, 3])
    np.testing.assert_array_equal(np.asarray(X.sort(stable=False, descending=True))[1:],
                                  [3, 3, 1, 1])
    np.testing.assert_array_equal(np.asarray(fnp.argsort(x, descending=True)), [1, 2, 4, 0, 3])
    np.testing.assert_array_equal(np.asarray(fnp.argsort(x)), [0, 3, 2, 4, 1])
    np.testing.assert_array_equal(np.asarray(fnp.argsort(x, axis=None)), [0, 3, 2, 4, 1])


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("use_sorter", [False, True])
def test_searchsorted_matches_numpy(side, use_sorter):
    def make(rng, dt, s):
        n = int(rng.integers(1, 7))
        a = rng.integers(-3, 4, n).astype(dt)       # ties, and values equal to v's
        v = rng.integers(-4, 5, s).astype(dt)
        return (a, v, np.argsort(a, kind="stable").astype(np.int32)) if use_sorter else \
            (np.sort(a), v)

    def ref(a, v, sorter=None):
        return np.searchsorted(a, v, side=side, sorter=sorter).astype(np.int32)

    def fn(a, v, sorter=None):
        return fnp.searchsorted(a, v, side=side, sorter=sorter)
    # jit and vmap only: the result is an integer, and a and v hold ties by design
    check_op(fn, example(make)(), reference=ref, skip=("jvp", "vjp"),
             name=f"fnx.numpy.searchsorted[{side}]")


def test_searchsorted_methods_agree_under_jit():
    a = np.array([0.0, 1.0, 1.0, 2.5, np.nan])
    v = np.array([-1.0, 1.0, 2.0, 3.0, np.nan, np.inf])
    for side in ("left", "right"):
        want = np.searchsorted(a, v, side=side)
        for method in ("scan", "compare_all", "scan_unrolled", "sort"):  # JAX's four
            got = fnx.jit(lambda a, v: fnp.searchsorted(a, v, side=side, method=method))(a, v)
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{side} {method}")


# --- bincount -------------------------------------------------------------------------------

def test_bincount_weights_and_static_length():
    def make(rng, dt, s, length):
        n = int(np.prod(s))
        return rng.integers(0, length + 2, n).astype(np.int32), rng.uniform(-2, 2, n).astype(dt)

    def ref(x, w, length):
        keep = x < length
        return np.bincount(x[keep], w[keep], minlength=length)[:length].astype(w.dtype)
    strat = example(make, length=lambda d, s: d(st.integers(1, 6)))
    check_op(lambda x, w, length: fnp.bincount(x, w, length=length), strat(), reference=ref,
             name="fnx.numpy.bincount")


def test_bincount_counts_and_grad_in_weights():
    x = np.array([0, 2, 2, 5, 1])
    np.testing.assert_array_equal(np.asarray(fnp.bincount(x)), np.bincount(x))
    np.testing.assert_array_equal(np.asarray(fnp.bincount(x, minlength=8)),
                                  np.bincount(x, minlength=8))
    out = fnx.jit(lambda x: fnp.bincount(x, length=3))(x)   # 5 is past the end: dropped
    np.testing.assert_array_equal(np.asarray(out), [1, 1, 2])
    c = np.array([1.0, 2.0, 3.0])
    g = fnx.grad(lambda w: fnp.sum(fnp.bincount(x, w, length=3) * c))(np.ones(5))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 3.0, 3.0, 0.0, 2.0])


# --- take, take_along_axis -------------------------------------------------------------------

@pytest.mark.parametrize("mode", [None, "clip", "wrap", "fill"])
def test_take_gradients(mode):
    def make(rng, dt, s, axis, ishape):
        n = s[axis]
        lo, hi = {None: (-n, n - 1), "clip": (-2, n + 1), "wrap": (-2 * n, 2 * n),
                  "fill": (-n - 1, n)}[mode]
        return rng.uniform(-2, 2, s).astype(dt), rng.integers(lo, hi + 1, ishape).astype(np.int32)

    def ref(a, idx, axis, ishape):
        n = a.shape[axis]
        if mode == "fill":
            ok = (idx >= -n) & (idx < n)
            out = np.take(a, np.where(ok, idx, 0), axis=axis)
            bad = np.expand_dims(~ok, tuple(range(axis))) if axis else ~ok
            bad = bad.reshape(bad.shape + (1,) * (out.ndim - bad.ndim))
            return np.where(bad, -7.0, out).astype(a.dtype)
        return np.take(a, idx, axis=axis, mode={None: "raise"}.get(mode, mode))
    strat = example(make, axis=lambda d, s: d(st.integers(0, len(s) - 1)),
                    ishape=lambda d, s: d(st.sampled_from([(), (3,), (2, 2)])))
    # fill: a finite fill value (the default NaN has NaN finite differences)
    fill = -7.0 if mode == "fill" else None
    check_op(lambda a, i, axis, ishape: fnp.take(a, i, axis=axis, mode=mode, fill_value=fill),
             strat(),
             reference=ref, name=f"fnx.numpy.take[{mode}]")


def test_take_along_axis_gradients():
    def make(rng, dt, s, axis):
        ishape = list(s)
        ishape[axis] = int(rng.integers(1, 4))
        ishape = tuple(1 if (d != axis and rng.random() < 0.3) else n
                       for d, n in enumerate(ishape))   # broadcasting index dims
        return (rng.uniform(-2, 2, s).astype(dt),
                rng.integers(-s[axis], s[axis], ishape).astype(np.int32))

    def ref(a, idx, axis):
        shape = np.broadcast_shapes(tuple(1 if d == axis else n for d, n in enumerate(a.shape)),
                                    tuple(1 if d == axis else n for d, n in enumerate(idx.shape)))
        a_shape = tuple(a.shape[d] if d == axis else n for d, n in enumerate(shape))
        i_shape = tuple(idx.shape[d] if d == axis else n for d, n in enumerate(shape))
        return np.take_along_axis(np.broadcast_to(a, a_shape), np.broadcast_to(idx, i_shape),
                                  axis)
    strat = example(lambda rng, dt, s, axis: make(rng, dt, s, axis),
                    axis=lambda d, s: d(st.integers(0, len(s) - 1)))
    check_op(lambda a, i, axis: fnp.take_along_axis(a, i, axis), strat(), reference=ref,
             name="fnx.numpy.take_along_axis")


def test_take_grad_accumulates_repeated_indices():
    a = np.arange(4.0)
    idx = np.array([1, 1, 3, -1])
    g = fnx.grad(lambda a: fnp.sum(fnp.take(a, idx) ** 2))(a)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 4.0, 0.0, 12.0])
    gv = fnx.vmap(fnx.grad(lambda a, i: fnp.sum(fnp.take_along_axis(a, i, 0))),
                  in_axes=(0, 0))(np.ones((2, 3)), np.array([[0, 0], [2, 1]]))
    np.testing.assert_array_equal(np.asarray(gv), [[2, 0, 0], [0, 1, 1]])


# --- Array API cumulative functions -------------------------------------------------------

@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_array_api(name):
    def make(rng, dt, s, axis, include_initial):
        return (rng.uniform(0.5, 1.5, s).astype(dt),)
    strat = example(make, axis=axis_of, include_initial=lambda d, s: d(st.booleans()))
    check_op(lambda x, axis, include_initial: getattr(fnp, name)(
        x, axis=axis, include_initial=include_initial), strat(),
        reference=lambda x, axis, include_initial: getattr(np, name)(
            x, axis=axis, include_initial=include_initial), name=f"fnx.numpy.{name}")


def test_cumulative_array_api_dtypes_and_axis():
    x = np.array([True, False, True])
    out = fnp.cumulative_sum(x, include_initial=True)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 1, 2])
    with pytest.raises(fnx.errors.ShapeError, match="axis must be given"):
        fnp.cumulative_sum(np.ones((2, 2)))
