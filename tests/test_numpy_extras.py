"""Tests for fnx.numpy sorting/searching, set operations, statistics, einsum and linalg
(the functions without factorizations), against NumPy, eagerly and under jit."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
import fnx.numpy as fnp
from fnx.errors import ConcretizationError

SETTINGS = settings(max_examples=50, deadline=None)


# --- helpers ---------------------------------------------------------------------------------

def check(actual, expected, dtype=None, rtol=1e-5, atol=1e-5):
    """Shapes and values (NaN where NaN) agree; the dtype is ``dtype`` when given."""
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        assert actual_np.dtype == np.dtype(dtype), (actual_np.dtype, dtype)
    if expected.dtype.kind in "fc" or actual_np.dtype.kind in "fc":
        np.testing.assert_allclose(actual_np, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual_np, expected)


def jit_matches(f, *args):
    """``fnx.jit(f)(*args)`` equals ``f(*args)`` (same pytree, shapes, dtypes, values)."""
    eager = f(*args)
    jitted = fnx.jit(f)(*args)
    e_leaves, e_tree = fnx.tree_util.tree_flatten(eager)
    j_leaves, j_tree = fnx.tree_util.tree_flatten(jitted)
    assert e_tree == j_tree
    for e, j in zip(e_leaves, j_leaves):
        assert e.shape == j.shape and e.dtype == j.dtype
        np.testing.assert_array_equal(np.asarray(e), np.asarray(j))
    return eager


def floats_with_ties(nan=False):
    """float32 elements from a small set (many ties), optionally with NaN."""
    vals = [-3.5, -1.0, 0.0, 0.5, 1.0, 2.0, 7.25]
    base = st.one_of(st.sampled_from(vals),
                     st.floats(-100, 100, width=32, allow_nan=False))
    return st.one_of(base, st.just(np.nan)) if nan else base


def arrays(shape=None, nan=False, min_dims=1, max_dims=3, max_side=5, min_side=1):
    shapes = shape if shape is not None else hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
    return hnp.arrays(np.float32, shapes, elements=floats_with_ties(nan))


def axis_for(ndim):
    return st.one_of(st.none(), st.integers(-ndim, ndim - 1))


# --- sorting ----------------------------------------------------------------------------------

@SETTINGS
@given(arrays(nan=True, max_dims=1, min_side=0, max_side=9), arrays(nan=True, max_dims=2),
       st.sampled_from(["left", "right"]), st.sampled_from(["scan", "compare_all"]))
def test_searchsorted_matches_numpy(a, v, side, method):
    a = np.sort(a)
    out = jit_matches(lambda a, v: fnp.searchsorted(a, v, side=side, method=method), a, v)
    check(out, np.searchsorted(a, v, side=side), dtype=np.int32)


@SETTINGS
@given(arrays(nan=True, max_dims=1, max_side=9), st.sampled_from(["left", "right"]))
def test_searchsorted_sorter(a, side):
    sorter = np.argsort(a, kind="stable")
    v = np.array([-1.0, 0.0, 1.0, 2.5, np.nan], np.float32)
    out = jit_matches(lambda a, v, s: fnp.searchsorted(a, v, side, sorter=s), a, v,
                      sorter.astype(np.int32))
    check(out, np.searchsorted(a, v, side, sorter=sorter))


def test_searchsorted_errors_and_scalar():
    with pytest.raises(ValueError, match="searchsorted"):
        fnp.searchsorted(np.arange(3.0), 1.0, side="middle")
    with pytest.raises(fnx.errors.ShapeError, match="searchsorted"):
        fnp.searchsorted(np.ones((2, 2)), 1.0)
    check(fnp.searchsorted(np.array([1, 2, 3]), 2, side="right"), np.int32(2), dtype=np.int32)


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 8), st.data())
def test_lexsort_matches_numpy(nkeys, n, data):
    keys = [data.draw(hnp.arrays(np.int32, (n,), elements=st.integers(0, 2)))
            for _ in range(nkeys)]
    out = jit_matches(lambda *k: fnp.lexsort(k), *keys)
    check(out, np.lexsort(keys), dtype=np.int32)
    check(fnp.lexsort(np.stack(keys)), np.lexsort(np.stack(keys)))


def test_lexsort_2d_axis():
    k1 = np.array([[3, 1, 2], [1, 1, 0]])
    k2 = np.array([[0, 0, 1], [1, 0, 0]])
    for axis in (0, 1, -1):
        check(fnp.lexsort((k1, k2), axis=axis), np.lexsort((k1, k2), axis=axis))


@SETTINGS
@given(arrays(nan=False, max_dims=2), st.data())
def test_partition_contract(a, data):
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    kth = data.draw(st.integers(-n, n - 1))
    part = np.asarray(jit_matches(lambda a: fnp.partition(a, kth, axis=axis), a))
    ref = np.partition(a, kth, axis=axis)
    k = kth % n
    # the kth element is the one NumPy puts there; smaller ones before, larger after
    check(np.take(part, k, axis), np.take(ref, k, axis))
    assert np.all(np.take(part, range(k), axis) <= np.expand_dims(np.take(part, k, axis), axis))
    assert np.all(np.take(part, range(k + 1, n), axis) >=
                  np.expand_dims(np.take(part, k, axis), axis))
    idx = np.asarray(fnp.argpartition(a, kth, axis=axis))
    check(np.take_along_axis(a, idx, axis), part)
    with pytest.raises(ValueError, match="partition"):
        fnp.partition(a, n, axis=axis)


def test_sort_complex():
    a = np.array([3.0, 1.0, 2.0], np.float32)
    check(fnp.sort_complex(a), np.sort_complex(a), dtype=np.complex64)
    z = np.array([1 + 2j, 1 - 1j, 0 + 5j])
    check(fnp.sort_complex(z), np.sort_complex(z), dtype=np.complex64)  # x64 off: narrowed
    with fnx.enable_x64(True):
        check(fnp.sort_complex(z), np.sort_complex(z), dtype=np.complex128)
        i = np.array([3, 1, 2], np.int32)  # JAX: int32 -> complex64, int64 -> complex128
        assert fnp.sort_complex(i).dtype == np.complex64
        assert fnp.sort_complex(i.astype(np.int64)).dtype == np.complex128
    with fnx.numpy_dtype_promotion("strict"):  # not a promotion: raised TypePromotionError
        check(fnp.sort_complex(np.array([3, 1, 2], np.int8)), [1, 2, 3], dtype=np.complex64)


# --- nonzero and friends ------------------------------------------------------------------------

int_arrays = hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                        elements=st.integers(-1, 1))


def padded(indices, size, fill):
    out = np.full(size, fill, np.int64)
    k = min(size, len(indices))
    out[:k] = indices[:k]
    return out


@SETTINGS
@given(int_arrays, st.integers(0, 8), st.sampled_from([None, -1, 7]))
def test_nonzero_eager_and_sized(a, size, fill):
    out = fnp.nonzero(a)
    ref = np.nonzero(a)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        check(o, r, dtype=np.int32)
    sized = jit_matches(lambda a: fnp.nonzero(a, size=size, fill_value=fill), a)
    for o, r in zip(sized, ref):
        check(o, padded(r, size, 0 if fill is None else fill), dtype=np.int32)
    check(jit_matches(lambda a: fnp.flatnonzero(a, size=size), a),
          padded(np.flatnonzero(a), size, 0))
    check(fnp.flatnonzero(a), np.flatnonzero(a))
    check(fnp.argwhere(a), np.argwhere(a))


def test_nonzero_per_dimension_fill_and_argwhere_sized():
    a = np.array([[0, 3], [4, 0]])
    r, c = fnx.jit(lambda a: fnp.nonzero(a, size=3, fill_value=(-1, -2)))(a)
    check(r, [0, 1, -1])
    check(c, [1, 0, -2])
    check(fnx.jit(lambda a: fnp.argwhere(a, size=3, fill_value=9))(a),
          [[0, 1], [1, 0], [9, 9]])
    with pytest.raises(ValueError, match="nonzero"):
        fnp.nonzero(np.int32(3))


@pytest.mark.parametrize("fn", [
    lambda x: fnp.nonzero(x), lambda x: fnp.flatnonzero(x), lambda x: fnp.argwhere(x),
    lambda x: fnp.unique(x), lambda x: fnp.unique_counts(x), lambda x: fnp.union1d(x, x),
    lambda x: fnp.intersect1d(x, x), lambda x: fnp.setdiff1d(x, x),
    lambda x: fnp.setxor1d(x, x), lambda x: fnp.where(x),
])
def test_data_dependent_shape_raises_under_jit(fn):
    with pytest.raises(ConcretizationError) as info:
        fnx.jit(fn)(np.array([1.0, 0.0, 2.0], np.float32))
    msg = str(info.value)
    assert "depends on the values" in msg and "size=" in msg


def test_bincount_without_length_raises_under_jit():
    with pytest.raises(ConcretizationError, match="length="):
        fnx.jit(fnp.bincount)(np.array([1, 2], np.int32))


# --- unique --------------------------------------------------------------------------------------

@SETTINGS
@given(arrays(nan=True, max_dims=2, max_side=6), st.booleans())
def test_unique_matches_numpy(a, equal_nan):
    out = fnp.unique(a, return_index=True, return_inverse=True, return_counts=True,
                     equal_nan=equal_nan)
    ref = np.unique(a, return_index=True, return_inverse=True, return_counts=True,
                    equal_nan=equal_nan)
    check(out[0], ref[0], dtype=np.float32)
    for o, r in zip(out[1:], ref[1:]):
        check(o, r, dtype=np.int32)
    check(fnp.unique(a), np.unique(a))


@SETTINGS
@given(arrays(nan=True, max_dims=1, max_side=8), st.integers(1, 10))
def test_unique_sized_under_jit(a, size):
    vals, idx, inv, cnt = jit_matches(
        lambda a: fnp.unique(a, return_index=True, return_inverse=True, return_counts=True,
                             size=size, fill_value=-9.0), a)
    rv, ri, rinv, rc = np.unique(a, return_index=True, return_inverse=True,
                                 return_counts=True)
    k = min(size, len(rv))
    check(vals, np.concatenate([rv[:k], np.full(size - k, -9.0, np.float32)]))
    check(np.asarray(idx)[:k], ri[:k])
    check(np.asarray(cnt), np.concatenate([rc[:k], np.zeros(size - k, np.int64)]))
    if size >= len(rv):
        check(inv, rinv)
    # default fill: the smallest unique value
    dflt = fnx.jit(lambda a: fnp.unique(a, size=size))(a)
    check(np.asarray(dflt)[k:], np.full(size - k, rv[0], np.float32))


def test_unique_axis_and_dtypes():
    m = np.array([[1, 2], [0, 5], [1, 2], [0, 1]], np.int32)
    for axis in (0, 1, -1):
        out = fnp.unique(m, axis=axis, return_index=True, return_inverse=True,
                         return_counts=True)
        ref = np.unique(m, axis=axis, return_index=True, return_inverse=True,
                        return_counts=True)
        for o, r in zip(out, ref):
            check(o, r)
    vals, counts = jit_matches(lambda m: fnp.unique(m, axis=0, size=4, return_counts=True), m)
    check(vals, [[0, 1], [0, 5], [1, 2], [0, 1]])  # padded with the smallest row
    check(counts, [1, 1, 2, 0])
    assert fnp.unique(m).dtype == np.int32
    assert fnp.unique(m.astype(np.float64)).dtype == np.float32   # x64 off: narrowed (JAX)
    with fnx.enable_x64(True):
        assert fnp.unique(m.astype(np.float64)).dtype == np.float64
    check(fnp.unique(np.zeros((0,), np.float32)), np.zeros((0,), np.float32))


@SETTINGS
@given(arrays(nan=True, max_dims=2, max_side=5))
def test_array_api_unique_functions(a):
    nan = np.isnan(a).any()
    for name in ("unique_all", "unique_counts", "unique_inverse"):
        out, ref = getattr(fnp, name)(a), getattr(np, name)(a)
        assert type(out).__name__ == type(ref).__name__
        assert out._fields == ref._fields
        for field, o, r in zip(out._fields, out, ref):
            if field in ("values", "counts") or not nan:
                check(o, r)
        if "inverse_indices" in out._fields:  # NaNs are distinct: which is which is free
            check(np.asarray(out.values)[np.asarray(out.inverse_indices)], a)
        if "indices" in out._fields:
            check(a.ravel()[np.asarray(out.indices)], out.values)
    check(fnp.unique_values(a), np.unique_values(a))


# --- membership and set operations ---------------------------------------------------------------

@SETTINGS
@given(arrays(nan=True, max_dims=2), arrays(nan=True, max_dims=2, min_side=0),
       st.booleans())
def test_isin_matches_numpy_under_jit(e, t, invert):
    out = jit_matches(lambda e, t: fnp.isin(e, t, invert=invert), e, t)
    check(out, np.isin(e, t, invert=invert), dtype=np.bool_)
    check(fnp.in1d(e, t), np.isin(e.ravel(), t))


small_sets = hnp.arrays(np.float32, st.integers(0, 7),
                        elements=st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, np.nan]))


@SETTINGS
@given(small_sets, small_sets)
def test_set_operations_match_numpy(a, b):
    for name in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
        out = getattr(fnp, name)(a, b)
        check(out, getattr(np, name)(a, b), dtype=np.float32)
    ua, ub = np.unique(a), np.unique(b)
    for name in ("intersect1d", "setdiff1d", "setxor1d"):
        check(getattr(fnp, name)(ua, ub, assume_unique=True),
              getattr(np, name)(ua, ub, assume_unique=True))
    out = fnp.intersect1d(a, b, return_indices=True)
    ref = np.intersect1d(a, b, return_indices=True)
    for o, r in zip(out, ref):
        check(o, r)


@SETTINGS
@given(small_sets.filter(lambda x: x.size), small_sets.filter(lambda x: x.size))
def test_set_operations_sized_under_jit(a, b):
    size = 4
    for name in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
        out = jit_matches(lambda a, b: getattr(fnp, name)(a, b, size=size, fill_value=-1.0),
                          a, b)
        ref = getattr(np, name)(a, b)[:size]
        check(np.asarray(out)[:len(ref)], ref)
        check(np.asarray(out)[len(ref):], np.full(size - len(ref), -1.0, np.float32))


# --- quantiles ----------------------------------------------------------------------------------

METHODS = ["linear", "lower", "higher", "nearest", "midpoint"]


@SETTINGS
@given(arrays(nan=False), st.data(), st.sampled_from(METHODS), st.booleans())
def test_quantile_matches_numpy(a, data, method, keepdims):
    axis = data.draw(axis_for(a.ndim))
    # q as float32 holds it (as fnx and JAX do without x64): a q that float32 rounds to 0,
    # e.g. 1e-210, picks another element than NumPy's float64 q for 'higher'
    q32 = st.floats(0, 1, width=32)
    q = data.draw(st.one_of(q32, st.lists(q32, min_size=1, max_size=3)))
    out = jit_matches(lambda a: fnp.quantile(a, q, axis=axis, method=method,
                                             keepdims=keepdims), a)
    check(out, np.quantile(a, q, axis=axis, method=method, keepdims=keepdims),
          dtype=np.float32, rtol=1e-5, atol=1e-4)
    pq = np.asarray(q) * 100
    check(fnp.percentile(a, pq, axis=axis, method=method, keepdims=keepdims),
          np.percentile(a, pq, axis=axis, method=method, keepdims=keepdims),
          rtol=1e-5, atol=1e-4)


@SETTINGS
@given(arrays(nan=True), st.data(), st.booleans())
def test_median_and_nan_quantiles(a, data, keepdims):
    axis = data.draw(st.one_of(axis_for(a.ndim), st.just(tuple(range(a.ndim)))))
    method = data.draw(st.sampled_from(METHODS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(jit_matches(lambda a: fnp.median(a, axis=axis, keepdims=keepdims), a),
              np.median(a, axis=axis, keepdims=keepdims), dtype=np.float32)
        check(jit_matches(lambda a: fnp.nanmedian(a, axis=axis, keepdims=keepdims), a),
              np.nanmedian(a, axis=axis, keepdims=keepdims), dtype=np.float32)
        q = [0.0, 0.3, 1.0]
        check(jit_matches(lambda a: fnp.nanquantile(a, q, axis=axis, method=method), a),
              np.nanquantile(a, q, axis=axis, method=method), atol=1e-4)
        check(fnp.nanpercentile(a, 75, axis=axis, method=method),
              np.nanpercentile(a, 75, axis=axis, method=method), atol=1e-4)


def test_quantile_dtypes_and_errors():
    i32 = np.array([1, 4, 2, 8], np.int32)
    assert fnp.median(i32).dtype == np.float32
    assert fnp.quantile(i32, 0.5).dtype == np.float32
    assert fnp.median(i32.astype(np.float64)).dtype == np.float32  # x64 off: narrowed (JAX)
    assert fnp.median(i32.astype(np.int64)).dtype == np.float32
    with fnx.enable_x64(True):
        assert fnp.median(i32).dtype == np.float32    # int32 -> float32 even under x64 (JAX)
        assert fnp.median(i32.astype(np.float64)).dtype == np.float64
        assert fnp.median(i32.astype(np.int64)).dtype == np.float64
    check(fnp.median(i32), 3.0)
    with pytest.raises(ValueError, match="quantile"):
        fnp.quantile(i32, 1.5)
    with pytest.raises(ValueError, match=r"percentile.*\[0, 100\]"):
        fnp.percentile(i32, -1)
    with pytest.raises(ValueError, match="method"):
        fnp.quantile(i32, 0.5, method="bogus")
    # a traced q works too
    check(fnx.jit(lambda a, q: fnp.quantile(a, q))(i32, np.float32(0.25)),
          np.quantile(i32, 0.25))


# --- NaN-aware reductions ------------------------------------------------------------------------

NAN_REDUCTIONS = ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd"]


@SETTINGS
@given(arrays(nan=True, max_side=4), st.data(), st.sampled_from(NAN_REDUCTIONS), st.booleans())
def test_nan_reductions_match_numpy(a, data, name, keepdims):
    a = np.clip(a, -5, 5)  # keep products representable
    axis = data.draw(axis_for(a.ndim))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    out = jit_matches(lambda a: getattr(fnp, name)(a, axis=axis, keepdims=keepdims), a)
    check(out, ref, dtype=np.float32, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(arrays(nan=True, max_dims=2), st.data())
def test_nanarg_and_nancum(a, data):
    axis = data.draw(axis_for(a.ndim))
    for name in ("nanargmax", "nanargmin"):
        out = jit_matches(lambda a: getattr(fnp, name)(a, axis=axis), a)
        allnan = np.all(np.isnan(a), axis=axis)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            safe = np.where(np.isnan(a), np.inf if name == "nanargmin" else -np.inf, a)
        ref = getattr(np, name[3:])(safe, axis=axis)
        check(out, np.where(allnan, -1, ref), dtype=np.int32)  # all-NaN: -1 (as JAX)
        if not np.any(allnan):
            check(out, getattr(np, name)(a, axis=axis))
    for name in ("nancumsum", "nancumprod"):
        x = np.clip(a, -2, 2)
        check(jit_matches(lambda a: getattr(fnp, name)(a, axis=axis), x),
              getattr(np, name)(x, axis=axis), rtol=1e-4, atol=1e-4)


def test_nan_reductions_dtypes_and_options():
    i = np.array([[1, 2], [3, 4]], np.int32)
    assert fnp.nanmean(i).dtype == np.float32
    assert fnp.nanvar(i.astype(np.float64)).dtype == np.float32   # x64 off: narrowed (JAX)
    with fnx.enable_x64(True):
        assert fnp.nanvar(i.astype(np.float64)).dtype == np.float64
        assert fnp.nanmean(i).dtype == np.float32     # int32 -> float32 even under x64 (JAX)
    assert fnp.nansum(i).dtype == np.int32
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(fnp.nanvar(x, axis=1, ddof=1), np.nanvar(x, axis=1, ddof=1))
        check(fnp.nanstd(x, axis=1, ddof=2), np.nanstd(x, axis=1, ddof=2))
        check(fnp.nanmax(x, axis=1), np.nanmax(x, axis=1))
    check(fnp.nanargmax(x, axis=1), [2, -1])
    w = np.array([[True, True, False], [True, True, True]])
    check(fnp.nansum(x, axis=1, where=w), np.nansum(x, axis=1, where=w))
    check(fnp.nanmean(x, axis=1, where=w)[0], 1.0)


# --- covariance ----------------------------------------------------------------------------------

@pytest.mark.x64   # float64 references to 1e-8
@SETTINGS
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(2, 6)),
                  elements=st.floats(-10, 10)), st.booleans(), st.booleans(), st.data())
def test_cov_corrcoef_match_numpy(m, rowvar, bias, data):
    x = m if rowvar else m.T
    check(jit_matches(lambda x: fnp.cov(x, rowvar=rowvar, bias=bias), x),
          np.cov(x, rowvar=rowvar, bias=bias), dtype=np.float64, atol=1e-8)
    n = m.shape[1]
    fw = data.draw(hnp.arrays(np.int32, (n,), elements=st.integers(1, 3)))
    aw = data.draw(hnp.arrays(np.float64, (n,), elements=st.floats(0.1, 2)))
    check(fnp.cov(m, fweights=fw, aweights=aw), np.cov(m, fweights=fw, aweights=aw), atol=1e-8)
    check(fnp.cov(m, ddof=0, aweights=aw), np.cov(m, ddof=0, aweights=aw), atol=1e-8)
    check(fnp.cov(m[0], m[-1]), np.cov(m[0], m[-1]), atol=1e-8)
    if np.all(np.std(m, axis=1) > 1e-3):
        check(fnp.corrcoef(x, rowvar=rowvar), np.corrcoef(x, rowvar=rowvar), atol=1e-8)


def test_cov_dtypes():
    assert fnp.cov(np.arange(6, dtype=np.int32).reshape(2, 3)).dtype == np.float32
    assert fnp.cov(np.arange(4.0, dtype=np.float32)).shape == ()
    m = np.array([[1.0, 2.5, -3.0, 4.0], [0.5, 0.0, 2.0, -1.0]])
    check(fnp.cov(m), np.cov(m), dtype=np.float32)                # x64 off: narrowed (JAX)
    check(fnp.corrcoef(m), np.corrcoef(m), dtype=np.float32)


# --- histograms and counting ---------------------------------------------------------------------

@SETTINGS
@given(arrays(nan=False, max_side=6), st.integers(1, 6))
def test_histogram_matches_numpy(a, bins):
    counts, edges = jit_matches(lambda a: fnp.histogram(a, bins), a)
    _, ref_edges = np.histogram(a, bins)
    check(edges, ref_edges, dtype=np.float32, rtol=1e-6, atol=1e-5)
    # counts are those of NumPy with these edges (edge rounding may differ by an ulp), as
    # float32: JAX's counts are sums of ones of a's float dtype
    check(counts, np.histogram(a, np.asarray(edges))[0], dtype=np.float32)
    check(counts.sum(), a.size)
    e = np.array([-50.0, -1.0, 0.0, 0.5, 7.25, 60.0], np.float32)
    check(fnp.histogram(a, e)[0], np.histogram(a, e)[0])
    w = np.ones_like(a) * 0.5
    d, _ = fnp.histogram(a, e, weights=w, density=True)
    check(d, np.histogram(a, e, weights=w, density=True)[0])
    counts3, edges3 = jit_matches(lambda a: fnp.histogram(a, 3, range=(-1, 1)), a)
    check(edges3, np.histogram_bin_edges(a, 3, range=(-1, 1)), dtype=np.float32, rtol=1e-6)
    check(counts3, np.histogram(a, np.asarray(edges3))[0])  # float32 edges, as computed


@SETTINGS
@given(hnp.arrays(np.int32, st.integers(0, 10), elements=st.integers(0, 6)),
       st.integers(0, 9))
def test_bincount_matches_numpy(x, minlength):
    check(fnp.bincount(x, minlength=minlength), np.bincount(x, minlength=minlength),
          dtype=np.int32)
    w = np.linspace(0, 1, x.size).astype(np.float32)
    check(fnp.bincount(x, weights=w), np.bincount(x, weights=w), dtype=np.float32)
    out = jit_matches(lambda x: fnp.bincount(x, length=5), x)
    check(out, np.bincount(x, minlength=7)[:5])


def test_bincount_errors():
    with pytest.raises(ValueError, match="bincount"):
        fnp.bincount(np.array([1, -1]))
    with pytest.raises(TypeError, match="bincount"):
        fnp.bincount(np.array([1.0]))
    # negatives under jit are dropped, not wrapped around
    check(fnx.jit(lambda x: fnp.bincount(x, length=3))(np.array([-1, 2], np.int32)), [0, 0, 1])


@SETTINGS
@given(arrays(nan=True, max_dims=2), hnp.arrays(np.float32, st.integers(1, 5),
                                                   elements=floats_with_ties(), unique=True),
       st.booleans(), st.booleans())
def test_digitize_matches_numpy(x, bins, right, decreasing):
    bins = np.sort(bins)[::-1] if decreasing else np.sort(bins)
    out = jit_matches(lambda x, b: fnp.digitize(x, b, right=right), x, bins.copy())
    check(out, np.digitize(x, bins, right=right), dtype=np.int32)


@SETTINGS
@given(arrays(nan=True, max_dims=2),
       hnp.arrays(np.float32, st.integers(1, 6), elements=floats_with_ties()),
       st.data())
def test_interp_matches_numpy(x, xp, data):
    xp = np.sort(xp)
    fp = data.draw(hnp.arrays(np.float32, xp.shape, elements=st.floats(-10, 10, width=32)))
    left = data.draw(st.one_of(st.none(), st.just(-99.0)))
    out = jit_matches(lambda x, xp, fp: fnp.interp(x, xp, fp, left=left, right=99.0),
                      x, xp, fp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = np.interp(x, xp, fp, left=left, right=99.0)
    check(out, ref, dtype=np.float32, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("x64", [False, True])
def test_interp_period(x64):
    x = np.array([-180.0, -170, -185, 185, -10, -5, 0, 365], np.float64)
    xp = np.array([190.0, -190, 350, -350])
    fp = np.array([5.0, 10, 3, 4])
    with fnx.enable_x64(x64):
        check(fnx.jit(lambda x: fnp.interp(x, xp, fp, period=360))(x),
              np.interp(x, xp, fp, period=360), dtype=np.float64 if x64 else np.float32)


@SETTINGS
@given(hnp.arrays(np.float32, st.integers(1, 9), elements=st.floats(-5, 5, width=32)),
       hnp.arrays(np.float32, st.integers(1, 9), elements=st.floats(-5, 5, width=32)),
       st.sampled_from(["full", "same", "valid"]))
def test_convolve_correlate_match_numpy(a, v, mode):
    for name in ("convolve", "correlate"):
        out = jit_matches(lambda a, v: getattr(fnp, name)(a, v, mode), a, v)
        check(out, getattr(np, name)(a, v, mode), dtype=np.float32, rtol=1e-4, atol=1e-4)
    z = a + 1j * a[::-1]
    check(fnp.correlate(z, v * 1j, mode), np.correlate(z, v * 1j, mode), rtol=1e-4, atol=1e-4)


def test_convolve_is_one_dot_general_and_ints():
    ir = fnx.make_ir(lambda a, v: fnp.convolve(a, v))(np.ones(50, np.float32),
                                                    np.ones(3, np.float32))
    names = [e.prim.name for e in ir.eqns]
    assert names.count("dot_general") == 1
    rng = np.random.default_rng(7)
    for n, m in [(300, 40), (40, 300), (700, 300), (1, 300)]:
        a, v = rng.normal(size=n), rng.normal(size=m)
        with fnx.enable_x64(True):   # float64 references to 1e-5 over up to 700 terms
            for mode in ("full", "same", "valid"):
                check(fnp.convolve(a, v, mode), np.convolve(a, v, mode), dtype=np.float64)
                check(fnp.correlate(a, v, mode), np.correlate(a, v, mode), dtype=np.float64)
    a, v = rng.normal(size=30), rng.normal(size=7)
    check(fnp.convolve(a, v), np.convolve(a, v), dtype=np.float32)  # x64 off: narrowed (JAX)
    a, v = np.array([1, 2, 3], np.int32), np.array([0, 1], np.int32)
    check(fnp.convolve(a, v), np.convolve(a, v), dtype=np.float32)   # inexact, as JAX
    with pytest.raises(ValueError, match="convolve"):
        fnp.convolve(a, np.zeros(0, np.int32))


# --- einsum --------------------------------------------------------------------------------------

def _r(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).normal(size=shape).astype(np.float32)


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),          # matrix product
    ("ij,jk", [(2, 3), (3, 4)]),              # implicit output
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),  # batch matmul
    ("ii", [(3, 3)]),                         # trace
    ("ii->i", [(3, 3)]),                      # diagonal
    ("i,j->ij", [(3,), (4,)]),                # outer
    ("ij->", [(2, 3)]),                       # sum
    ("ij->ji", [(2, 3)]),                     # transpose
    ("ji", [(2, 3)]),                         # implicit transpose
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (5, 3, 4)]),  # ellipsis, broadcasting
    ("...ij,...jk", [(7, 2, 3), (3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),  # three operands
    ("i,j,ij->", [(3,), (4,), (3, 4)]),
    ("iij->j", [(3, 3, 4)]),                  # repeated index
    ("iji->j", [(3, 4, 3)]),
    ("iii->i", [(3, 3, 3)]),
    ("bii,bjj->bij", [(2, 3, 3), (2, 4, 4)]),
    ("aab,bcc,d->ad", [(2, 2, 3), (3, 4, 4), (5,)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("i,i", [(3,), (3,)]),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 2)]),
    ("ij,jk", [(2, 1), (3, 4)]),              # size-1 broadcast of a label
    ("ij,kl->", [(2, 3), (4, 5)]),
    (",i->i", [(), (3,)]),
]


@pytest.mark.parametrize("optimize", [None, False])
@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES)
def test_einsum_matches_numpy(subscripts, shapes, optimize):
    ops = [_r(*s) for s in shapes]
    out = jit_matches(lambda *o: fnp.einsum(subscripts, *o, optimize=optimize), *ops)
    check(out, np.einsum(subscripts, *ops), dtype=np.float32, rtol=1e-4, atol=1e-4)


def test_einsum_ir_is_one_dot_general():
    ir = fnx.make_ir(lambda a, b: fnp.einsum("ij,jk->ik", a, b))(_r(2, 3), _r(3, 4))
    assert [e.prim.name for e in ir.eqns] == ["dot_general"]
    assert "dot_general" in str(ir)
    ir3 = fnx.make_ir(lambda a, b, c: fnp.einsum("ij,jk,kl->il", a, b, c))(
        _r(2, 3), _r(3, 4), _r(4, 5))
    assert [e.prim.name for e in ir3.eqns].count("dot_general") == 2


def test_einsum_dtypes_interleaved_and_errors():
    a, b = _r(2, 3), _r(3, 4)
    check(fnp.einsum(a, [0, 1], b, [1, 2], [0, 2]), a @ b, rtol=1e-5)
    check(fnp.einsum(a, [Ellipsis, 1], b, [1, 2]), a @ b, rtol=1e-5)
    assert fnp.einsum("ij,jk", a, b.astype(np.float64)).dtype == np.float32  # x64 off (JAX)
    with fnx.enable_x64(True):
        assert fnp.einsum("ij,jk", a, b.astype(np.float64)).dtype == np.float64
    i8 = np.full((2, 3), 100, np.int8)
    out = fnp.einsum("ij,ij->", i8, i8, preferred_element_type=np.int32)
    check(out, np.int32(60000), dtype=np.int32)
    for bad, ops in [("ij,jk->il", (a, b)), ("ij,jk", (a, _r(4, 4))), ("ij->ii", (a,)),
                     ("ijk", (a,)), ("i...->i", (_r(2, 3),)), ("ij,jk", (a,))]:
        with pytest.raises(ValueError, match="einsum"):
            fnp.einsum(bad, *ops)


def test_einsum_bool_preferred_type_and_paths():
    # bools sum by "or" (JAX's einsum): reduce_sum rejected them
    b = np.array([[True, False], [False, False]])
    check(fnp.einsum("ij->i", b), np.array([True, False]), dtype=np.bool_)
    check(fnp.einsum("ba,b->", b, np.array([False, True])), np.bool_(False), dtype=np.bool_)
    # preferred_element_type goes to dot_general (no converts of the operands); by default
    # it is the operands' dtype, as in JAX
    x, y = np.ones((2, 2), fnp.bfloat16), np.ones(2, fnp.bfloat16)
    ir = fnx.make_jaxpr(lambda a, c: fnp.einsum("ij,j->i", a, c))(x, y)
    assert [e.prim.name for e in ir.eqns] == ["dot_general"]
    assert ir.eqns[0].params["preferred_element_type"] == fnp.bfloat16
    ir = fnx.make_jaxpr(lambda a, c: fnp.einsum("ij,j->i", a, c,
                                                preferred_element_type="float32"))(x, y)
    assert [e.prim.name for e in ir.eqns] == ["dot_general"]
    assert ir.eqns[0].params["preferred_element_type"] == np.float32
    assert fnp.einsum(",", 2.0, 3.0).weak_type
    assert not fnp.einsum(",", 2.0, 3.0, preferred_element_type=np.float32).weak_type
    # an explicit contraction path is followed; 3-operand steps are not supported (JAX)
    a, c, d = _r(2, 3), _r(2, 4), _r(2, 5)
    path = fnp.einsum_path("ij,ik,il->jkl", a, c, d, optimize="greedy")[0]
    check(fnp.einsum("ij,ik,il->jkl", a, c, d, optimize=path),
          np.einsum("ij,ik,il->jkl", a, c, d), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="3 or more operands"):
        fnp.einsum("ij,ik,il->jkl", a, c, d, optimize=[(0, 1, 2)])
    with pytest.raises(NotImplementedError):
        fnp.einsum("i->i", a[0], out=a[0])


# --- linalg --------------------------------------------------------------------------------------

VECTOR_ORDS = [2, 1, np.inf, -np.inf, 0, 3, 0.5]
MATRIX_ORDS = ["fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"]


@SETTINGS
@given(arrays(nan=False, min_dims=1, max_dims=3), st.sampled_from(VECTOR_ORDS), st.booleans(),
       st.data())
def test_vector_norm_matches_numpy(x, ord, keepdims, data):
    axis = data.draw(st.one_of(axis_for(x.ndim), st.just(tuple(range(x.ndim)))))
    out = jit_matches(lambda x: fnp.linalg.vector_norm(x, axis=axis, keepdims=keepdims,
                                                       ord=ord), x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    check(out, ref, dtype=np.float32, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(arrays(nan=False, min_dims=2, max_dims=3), st.sampled_from(MATRIX_ORDS), st.booleans())
def test_matrix_norm_and_norm_match_numpy(x, ord, keepdims):
    out = jit_matches(lambda x: fnp.linalg.matrix_norm(x, keepdims=keepdims, ord=ord), x)
    check(out, np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord), dtype=np.float32,
          rtol=1e-4, atol=1e-4)
    m = x.reshape(-1, x.shape[-1])
    for axis in (None, (0, 1), (1, 0)):
        check(fnp.linalg.norm(m, ord, axis, keepdims), np.linalg.norm(m, ord, axis, keepdims),
              rtol=1e-4, atol=1e-4)
    check(fnp.linalg.norm(x), np.linalg.norm(x), rtol=1e-4)
    check(fnp.linalg.norm(x, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-4)
    vord = 1 if isinstance(ord, str) else ord   # "fro"/"nuc" are matrix-only
    check(fnp.linalg.norm(m[0], vord), np.linalg.norm(m[0], vord), rtol=1e-4)


def test_norm_errors_and_dtypes():
    with pytest.raises(ValueError, match="norm"):
        fnp.linalg.norm(_r(2, 2, 2), 1)
    assert fnp.linalg.vector_norm(np.arange(3, dtype=np.int32)).dtype == np.float32
    assert fnp.linalg.vector_norm(np.ones(3, np.complex128)).dtype == np.float32  # x64 off
    with fnx.enable_x64(True):
        assert fnp.linalg.vector_norm(np.ones(3, np.complex128)).dtype == np.float64


@SETTINGS
@given(arrays(nan=False, min_dims=2, max_dims=3), st.integers(-3, 3))
def test_diagonal_trace_transpose(x, offset):
    L = fnp.linalg
    check(jit_matches(lambda x: L.diagonal(x, offset=offset), x),
          np.linalg.diagonal(x, offset=offset), dtype=np.float32)
    check(jit_matches(lambda x: L.trace(x, offset=offset), x),
          np.linalg.trace(x, offset=offset), rtol=1e-4, atol=1e-4)
    check(L.matrix_transpose(x), np.linalg.matrix_transpose(x))
    check(L.vecdot(x, x), np.linalg.vecdot(x, x), rtol=1e-4, atol=1e-3)
    check(L.matmul(x, L.matrix_transpose(x)), x @ np.swapaxes(x, -1, -2), rtol=1e-4, atol=1e-3)
    check(L.outer(x[..., 0, :].ravel(), x[..., 0].ravel()),
          np.outer(x[..., 0, :].ravel(), x[..., 0].ravel()), rtol=1e-5)
    check(L.tensordot(x, x, axes=x.ndim), np.tensordot(x, x, axes=x.ndim), rtol=1e-4, atol=1e-3)
    assert L.trace(np.ones((2, 2), np.int8)).dtype == np.int32


def test_cross():
    a, b = _r(4, 3), _r(3)
    check(jit_matches(fnp.linalg.cross, a, b), np.linalg.cross(a, b), rtol=1e-5)
    check(fnp.linalg.cross(a.T, b[:, None], axis=0), np.cross(a.T, b[:, None], axis=0),
          rtol=1e-5)
    with pytest.raises(fnx.errors.ShapeError, match="cross"):
        fnp.linalg.cross(_r(2), _r(2))
