"""Reductions NumPy runs slowly, and the plans the NumPy backend runs instead
(``fnx.core.numpy_rules.reduce_plan``): a ufunc's ``reduce`` over a small window between
kept axes (a 2x2 pooling window after a reshape) as pairwise calls of the ufunc over
strided views.

The plan is chosen by shapes alone, so eager and jit run the same one and stay bitwise
equal; max/min/and/or equal NumPy's own reduction exactly (NaNs included), integer sums
and products too (they wrap alike), float sums and products within rounding (the window
is added in row-major order, NumPy's reduce may group it otherwise).
"""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core.numpy_rules import reduce_plan
from fnx.lax.elementwise import select_n_p

pytestmark = pytest.mark.x64  # float64 and int64 operands stay 64-bit

FEW = settings(max_examples=60, deadline=None, database=None)

# name -> (lax function, ufunc, dtypes)
OPS = {
    "reduce_max": (lax.reduce_max, np.maximum, "biufc"),
    "reduce_min": (lax.reduce_min, np.minimum, "biufc"),
    "reduce_sum": (lax.reduce_sum, np.add, "iufc"),
    "reduce_prod": (lax.reduce_prod, np.multiply, "iufc"),
    "reduce_and": (lax.reduce_and, np.bitwise_and, "biu"),
    "reduce_or": (lax.reduce_or, np.bitwise_or, "biu"),
}
DTYPES = [np.dtype(d) for d in (np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16,
                                np.float32, np.float64, np.complex64)]


def _values(rng, shape, dtype, nans=True):
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-3 if dtype.kind == "i" else 0, 4, shape).astype(dtype)
    x = rng.integers(-4, 5, shape) * 0.75 + rng.standard_normal(shape) * 0.1  # ties too
    if dtype.kind == "c":
        x = x + 1j * rng.integers(-2, 3, shape)
    x = x.astype(dtype)
    if nans and x.size:
        flat = x.reshape(-1)
        flat[rng.random(x.size) < 0.05] = np.nan
    return x


def _reference(name, ufunc, x, axes):
    """NumPy's own reduction, with fnx's result dtype and empty-max/min identity."""
    if x.size == 0 and name in ("reduce_max", "reduce_min"):
        shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        if x.dtype.kind in "fc":
            fill = -np.inf if name == "reduce_max" else np.inf
        elif x.dtype.kind == "b":
            fill = name == "reduce_min"
        else:
            info = np.iinfo(x.dtype)
            fill = info.min if name == "reduce_max" else info.max
        return np.full(shape, fill, x.dtype)
    with np.errstate(all="ignore"):
        return np.asarray(ufunc.reduce(x, axis=axes)).astype(x.dtype)


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def _check(name, x, axes, perm=None):
    """jit, eager and NumPy agree on ``name`` over ``axes`` of ``x`` (transposed by
    ``perm`` first, inside the function: a non-contiguous operand)."""
    fn, ufunc, _ = OPS[name]

    def f(v):
        if perm is not None:
            v = lax.transpose(v, perm)
        return fn(v, axes)
    xa = fnp.asarray(x)
    eager, jitted = np.asarray(f(xa)), np.asarray(fnx.jit(f)(xa))
    what = f"{name} over {axes} of {x.dtype}{x.shape}" + (f" transposed {perm}" if perm else "")
    assert _bits(jitted) == _bits(eager), f"{what}: jit differs from eager"
    xt = x if perm is None else np.transpose(x, perm)
    want = _reference(name, ufunc, xt, axes)
    assert eager.dtype == want.dtype and eager.shape == want.shape, what
    if name in ("reduce_sum", "reduce_prod") and x.dtype.kind in "fc" and xt.size:
        _assert_rounding_close(name, eager, want, xt, axes, what)
    else:  # exact, NaNs where NumPy's are
        np.testing.assert_array_equal(eager, want, err_msg=what)
    return eager


def _assert_rounding_close(name, got, want, x, axes, what):
    """``got`` and ``want`` are two orders of the same float sum (product) of ``n`` terms:
    NaNs and infinities alike, and otherwise within twice the bound of any order's
    rounding error, ``(n - 1) eps`` times the sum of magnitudes (the magnitude of the
    product)."""
    n = math.prod(x.shape[a] for a in axes)
    eps = np.finfo(x.dtype).eps
    got, want = got.astype(np.complex128), want.astype(np.complex128)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=what)
    np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=what)
    if name == "reduce_sum":
        scale = np.add.reduce(np.abs(x.astype(np.complex128)), axis=axes)
    else:
        scale = np.abs(want)
    bound = 2 * max(n - 1, 1) * eps * scale + np.finfo(x.dtype).tiny
    err = np.abs(got - want)
    assert (err[finite] <= bound[finite]).all(), f"{what}: off by {err.max()} (bound {bound.max()})"


# --- the plan is taken where NumPy is slow, and gives NumPy's values -------------------------

# (shape, axes): a pooling window after a reshape, a small trailing axis, a window of 3x3,
# a middle axis with a short run after it.
PLANNED = [((32, 16, 13, 2, 13, 2), (3, 5)), ((64, 2), (1,)), ((4, 3, 6, 3, 5), (1, 3)),
           ((40, 4, 20), (1,)), ((8, 1, 9, 2), (1, 3)), ((50, 2, 2), (2, 1))]


@pytest.mark.parametrize("shape, axes", PLANNED)
def test_small_windows_are_planned(shape, axes):
    for ufunc in (np.maximum, np.add):
        assert reduce_plan(ufunc, shape, np.dtype(np.float32), axes) is not None, (shape, axes)


# sums over leading axes (and trailing ones): BLAS matrix-vector products with ones
MATMUL = [((32, 16, 26, 26), (0, 2, 3)), ((32, 16, 8, 8), (0, 2, 3)), ((1024, 16), (0,)),
          ((64, 8, 64), (0, 2)), ((256, 3, 7), (0, 1)), ((1, 64, 128), (0, 2))]


@pytest.mark.parametrize("shape, axes", MATMUL)
def test_batch_sums_are_matmuls(shape, axes):
    for dt in (np.float32, np.float64):
        plan = reduce_plan(np.add, shape, np.dtype(dt), axes)
        assert plan is not None and plan.__name__ == "matmul_sum", (shape, axes, dt)
    assert reduce_plan(np.add, shape, np.dtype(np.int32), axes) is None
    assert reduce_plan(np.maximum, shape, np.dtype(np.float32), axes) is None


@pytest.mark.parametrize("shape, axes", [
    ((64, 128), (1,)),           # trailing axes only: NumPy (and the fused reductions)
    ((512, 1024), (0,)),         # long rows: NumPy's row adds are nearly as fast
    ((8, 16), (0,)),             # small
    ((32, 16, 26, 26), (1, 3)),  # the kept axes are not one block
])
def test_other_sums_are_not_matmuls(shape, axes):
    plan = reduce_plan(np.add, shape, np.dtype(np.float32), axes)
    assert plan is None or plan.__name__ != "matmul_sum"


@pytest.mark.parametrize("shape, axes", MATMUL)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_sums_jit_eager_numpy(shape, axes, dtype):
    """NaNs, infinities of both signs (their sum NaN) and ordinary values, transposed
    operands too: jit bitwise eager, within rounding of NumPy's own sum."""
    rng = np.random.default_rng(8)
    x = _values(rng, shape, np.dtype(dtype))
    flat = x.reshape(-1)
    flat[rng.random(x.size) < 0.01] = np.inf
    flat[rng.random(x.size) < 0.01] = -np.inf
    _check("reduce_sum", x, axes)
    perm = tuple(reversed(range(len(shape))))
    _check("reduce_sum", np.ascontiguousarray(np.transpose(x, perm)), axes, perm)


@pytest.mark.parametrize("shape, axes", MATMUL)
def test_matmul_sums_are_as_accurate_as_numpys(shape, axes):
    """Positive float32 terms (no cancellation): within 32 eps of the float64 sum, as
    NumPy's own float32 sum is (measured: up to 1.3e-6 for NumPy, 5e-7 for BLAS)."""
    x = (1 + np.random.default_rng(10).random(shape)).astype(np.float32)
    exact = np.add.reduce(x.astype(np.float64), axis=axes)
    got = np.asarray(lax.reduce_sum(fnp.asarray(x), axes)).astype(np.float64)
    assert np.abs(got / exact - 1).max() <= 32 * np.finfo(np.float32).eps


def test_sum_of_negative_zeros_by_matmul_is_positive_zero():
    x = np.full((1024, 16), -0.0, np.float32)
    got = np.asarray(lax.reduce_sum(fnp.asarray(x), (0,)))
    assert not np.signbit(got).any()  # as XLA's sum, which starts from +0.0


@pytest.mark.parametrize("shape, axes", [
    ((100, 4, 1000), (1,)),      # a long contiguous run after the window: reduce is fast
    ((32, 10), (1,)),            # few outputs per term
    ((64, 32), (1,)),            # a window of 32 terms
    ((32, 16, 26, 26), (0, 2, 3)),
    ((6, 5), (0, 1)),            # everything reduced
    ((0, 4, 3), (1,)),           # empty
    ((64, 1), (1,)),             # one term: nothing to combine
])
def test_large_or_tiny_reductions_stay_on_numpy(shape, axes):
    assert reduce_plan(np.maximum, shape, np.dtype(np.float32), axes) is None


def test_float16_sums_stay_on_numpy_but_its_max_is_planned():
    """NumPy accumulates float16 sums in float32: pairwise float16 adds would round more."""
    shape, axes, f16 = (64, 2), (1,), np.dtype(np.float16)
    assert reduce_plan(np.add, shape, f16, axes) is None
    assert reduce_plan(np.multiply, shape, f16, axes) is None
    assert reduce_plan(np.maximum, shape, f16, axes) is not None


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_planned_shapes_every_dtype(name, dtype):
    if dtype.kind not in OPS[name][2]:
        pytest.skip(f"{name} takes no {dtype}")
    rng = np.random.default_rng(1)
    for shape, axes in PLANNED[1:]:
        x = _values(rng, shape, dtype)
        _check(name, x, axes)


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_nan_propagates_exactly_as_numpy(name):
    x = np.arange(64 * 2, dtype=np.float32).reshape(64, 2)
    x[3, 0] = x[7, 1] = x[9, 0] = x[9, 1] = np.nan
    x[11, 1] = np.inf
    x[12, 0] = -np.inf
    got = _check(name, x, (1,))
    assert np.isnan(got).nonzero()[0].tolist() == [3, 7, 9]


def test_signed_zeros_and_infinities_in_max():
    x = np.zeros((64, 2), np.float32)
    x[:, 0] = -0.0
    x[1] = [np.inf, -np.inf]
    x[2] = [-np.inf, -np.inf]
    _check("reduce_max", x, (1,))
    _check("reduce_min", x, (1,))


def test_integer_sums_wrap_as_numpy():
    x = np.full((64, 4), 100, np.int8)
    got = _check("reduce_sum", x, (1,))
    assert got.dtype == np.int8 and got[0] == np.int8(np.int64(400) - 512)
    _check("reduce_prod", x, (1,))


# --- every axes combination, hypothesis shapes -------------------------------------------------

@st.composite
def _cases(draw):
    """``(name, dtype, shape, axes, perm, seed)``: ``axes`` of the operand transposed by
    ``perm`` (None: not transposed). Half the draws are windows (small reduced axes
    between larger kept ones), which the plan takes where the sizes allow."""
    name = draw(st.sampled_from(sorted(OPS)))
    dtype = draw(st.sampled_from([d for d in DTYPES if d.kind in OPS[name][2]]))
    if draw(st.booleans()):  # a window: some small axes reduced, larger ones kept
        nd = draw(st.integers(2, 4))
        axes = tuple(sorted(draw(st.permutations(range(nd)))[:draw(st.integers(1, nd - 1))]))
        small, large = st.sampled_from([1, 2, 2, 3, 4]), st.sampled_from([9, 17, 33, 64])
        shape = [draw(small if d in axes else large) for d in range(nd)]
    else:  # anything: no axes, all axes, size 0 and 1
        nd = draw(st.integers(1, 4))
        axes = draw(st.sampled_from([c for r in range(nd + 1)
                                     for c in itertools.combinations(range(nd), r)]))
        shape = [draw(st.sampled_from([0, 1, 2, 2, 3, 4, 5, 9, 17])) for _ in range(nd)]
    while math.prod(shape) > 20000:
        shape[shape.index(max(shape))] //= 2
    perm = tuple(draw(st.permutations(range(nd)))) if draw(st.booleans()) else None
    if perm is not None:  # the operand's shape, so that its transpose has ``shape``
        inverse = [0] * nd
        for i, q in enumerate(perm):
            inverse[q] = shape[i]
        shape = inverse
    return name, dtype, tuple(shape), axes, perm, draw(st.integers(0, 2**16))


@FEW
@given(_cases())
def test_every_axes_combination_jit_eager_numpy(case):
    name, dtype, shape, axes, perm, seed = case
    x = _values(np.random.default_rng(seed), shape, dtype)
    _check(name, x, axes, perm)


def test_every_axes_combination_of_a_pooling_shape():
    """Every subset of axes of a 5-d float32 array with size-1 and size-2 axes, for every
    reduction of floats: jit, eager and NumPy agree; some of them take the plan."""
    rng = np.random.default_rng(3)
    shape = (12, 2, 1, 9, 2)
    x = _values(rng, shape, np.dtype(np.float32))
    planned = 0
    for r in range(len(shape) + 1):
        for axes in itertools.combinations(range(len(shape)), r):
            planned += reduce_plan(np.maximum, shape, np.dtype(np.float32), axes) is not None
            for name in ("reduce_max", "reduce_min", "reduce_sum", "reduce_prod"):
                _check(name, x, axes)
    assert planned >= 3


# --- jit's code takes the plan for the CNN's pooling -----------------------------------------

def test_jit_source_uses_the_plan_for_reshape_max_pooling():
    """Max pooling written as reshape + max over (3, 5), and its gradient (the tie count,
    a sum over the same window): pairwise calls, no ``ufunc.reduce`` over the window."""
    def loss(h):
        n, c, hh, ww = h.shape
        p = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
        return (p * p).sum()
    h = fnp.asarray(np.random.default_rng(0).standard_normal((32, 16, 26, 26)),
                    dtype=np.float32)
    g = fnx.jit(fnx.grad(loss))
    src = g.lower(h).source
    assert src.count("_pairwise_maximum_reduce") >= 1, src
    assert src.count("_pairwise_add_reduce") >= 1, src   # the tie count
    assert "axis=(3, 5)" not in src, src
    # the max and the cotangent broadcast back over the window: contiguous copies
    assert src.count("_broadcast_copy") == 2, src
    assert ".reshape((32, 16, 13, 1, 13, 1))" not in src, src
    assert _bits(g(h)) == _bits(fnx.grad(loss)(h))


def test_jit_source_sums_bias_gradients_by_matmul():
    """The gradient of a bias added by broadcasting over NCHW is a sum over (0, 2, 3)."""
    rng = np.random.default_rng(9)
    h = fnp.asarray(rng.standard_normal((32, 16, 26, 26)), dtype=np.float32)
    b = fnp.asarray(rng.standard_normal(16), dtype=np.float32)

    def loss(b, h):
        return fnp.sum(fnp.tanh(h + b[None, :, None, None]))
    g = fnx.jit(fnx.grad(loss))
    src = g.lower(b, h).source
    assert "_matmul_sum" in src and "axis=(0, 2, 3)" not in src, src
    assert _bits(g(b, h)) == _bits(fnx.grad(loss)(b, h))


def test_interleaved_broadcasts_are_copied_out_and_bias_broadcasts_are_not():
    """A ufunc against a broadcast over interleaved small axes reads a contiguous copy
    (NumPy would loop over runs of 2); a bias broadcast over (0, 2, 3) is read
    unbroadcast, as before; both bitwise equal to eager."""
    rng = np.random.default_rng(6)
    x = fnp.asarray(rng.standard_normal((8, 16, 13, 2, 13, 2)), dtype=np.float32)
    m = fnp.asarray(rng.standard_normal((8, 16, 13, 13)), dtype=np.float32)
    b = fnp.asarray(rng.standard_normal(16), dtype=np.float32)

    def window(x, m):
        return x * lax.broadcast_in_dim(m, x.shape, (0, 1, 2, 4))

    def bias(x, b):
        y = x.reshape(8, 16, 26, 26)
        return y + lax.broadcast_in_dim(b, y.shape, (1,))
    for f, args, copied in ((window, (x, m), True), (bias, (x, b), False)):
        src = fnx.jit(f).lower(*args).source
        assert ("_broadcast_copy" in src) is copied, src
        assert _bits(fnx.jit(f)(*args)) == _bits(f(*args)), f.__name__


@pytest.mark.parametrize("expanded, shape", [
    ((3, 1, 4, 1), (3, 2, 4, 2)), ((1, 5, 1), (3, 5, 7)), ((2, 1, 1), (2, 3, 4)),
    ((4, 1, 9, 1, 1), (4, 3, 9, 2, 5)), ((1, 1, 1, 9), (2, 3, 4, 9))])
def test_broadcast_copy_is_the_broadcast_contiguous(expanded, shape):
    from fnx.backends.numpy_helpers import _broadcast_copy
    x = np.random.default_rng(7).standard_normal(expanded).astype(np.float32)
    got = _broadcast_copy(x.reshape(-1), expanded=expanded, shape=shape)
    assert got.flags.c_contiguous and got.shape == shape
    np.testing.assert_array_equal(got, np.broadcast_to(x, shape))


# --- select_n with a bool selector, and where: no converted mask -------------------------------

SELECT_DTYPES = [np.dtype(d) for d in (np.bool_, np.int8, np.float16, np.int32, np.float32,
                                       np.float64, np.complex64, np.complex128)]


def _special(rng, shape, dtype):
    x = _values(rng, shape, dtype, nans=False)
    if dtype.kind == "f":
        flat = x.reshape(-1)
        flat[:6] = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0]
        bits = flat.view(f"u{dtype.itemsize}")
        bits[6] = bits[0] | 1  # a NaN with another payload
    return x


@pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=str)
def test_bool_select_is_np_where_bitwise(dtype):
    """Every operand layout the jit lowering passes (full cases, a scalar literal case,
    zero bits, -0.0, broadcast rows and columns, a broadcast selector): the bits of
    ``np.where``, eagerly and in jit."""
    rng = np.random.default_rng(4)
    shape = (48, 40)
    a, b = _special(rng, shape, dtype), _special(rng, shape, dtype)[::-1].copy()
    w = rng.random(shape) < 0.5
    zero, negzero = np.zeros((), dtype), np.asarray(-0.0 if dtype.kind in "fc" else 1).astype(dtype)
    layouts = [(w, b, a), (w, zero, a), (w, b, zero), (w, negzero, a), (w, a[:1], b),
               (w, b, a[:, :1]), (w[:1], b, a), (w, zero, np.ones((), dtype))]
    for which, c0, c1 in layouts:  # the impl, as jit's code calls it
        got = select_n_p.impl(which, c0, c1)
        assert _bits(got) == _bits(np.where(which, c1, c0)), (dtype, which.shape, c0.shape,
                                                              c1.shape)
    got = lax.select_n(fnp.asarray(w), fnp.asarray(b), fnp.asarray(a))
    assert _bits(got) == _bits(np.where(w, a, b))
    wf, af, bf = fnp.asarray(w), fnp.asarray(a), fnp.asarray(b)
    for f in (lambda m, x, y: fnp.where(m, x, y), lambda m, x, y: fnp.where(m, x, 0),
              lambda m, x, y: fnp.where(m, x[:1], y), lambda m, x, y: fnp.where(m[:1], x, y)):
        assert _bits(fnx.jit(f)(wf, af, bf)) == _bits(f(wf, af, bf)), dtype
    if dtype.kind != "b":  # (bool and a Python 0 promote to an integer)
        assert _bits(fnx.jit(lambda m, x: fnp.where(m, x, 0))(wf, af)) == _bits(
            np.where(w, a, np.zeros((), dtype)))


def test_where_and_bool_select_allocate_no_mask():
    """``where(x > 0, x, 0)`` and a bool ``select_n`` of two arrays, jitted: no dtype
    conversion of the mask in the code, and nothing allocated beyond the result and a
    cast buffer (a converted mask of 1M elements would be 4 MB)."""
    import tracemalloc
    x = fnp.asarray(np.random.default_rng(5).standard_normal(1 << 20), dtype=np.float32)
    y = -x
    relu = fnx.jit(lambda x: fnp.where(x > 0, x, 0.0))
    sel = fnx.jit(lambda m, x, y: lax.select_n(m, x, y))
    m = x > 0
    for fn, args in ((relu, (x,)), (sel, (m, x, y))):
        src = fn.lower(*args).source
        assert "astype" not in src and "convert" not in src, src
        fn(*args)
        tracemalloc.start()
        try:
            out = fn(*args)
            extra = tracemalloc.get_traced_memory()[1] - np.asarray(out).nbytes
        finally:
            tracemalloc.stop()
        assert extra < 1 << 20, f"{extra} bytes besides the result"
    np.testing.assert_array_equal(relu(x), np.maximum(np.asarray(x), 0))
