"""``fnx.numpy`` against the Array API standard 2024.12: what the official
``array-api-tests`` suite found and fnx fixed, each checked here eager and under jit.

The suite itself (data-apis/array-api-tests) is not vendored; the README says how it
was run and what it reports.
"""
import inspect
import math

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import ShapeError

INF, NAN = math.inf, math.nan


@pytest.fixture(autouse=True)
def x64():
    """The standard's 64-bit dtypes need jax_enable_x64, as JAX's conformance runs."""
    with fnx.enable_x64():
        yield


def _same(out, expected):
    """Equal values with NaNs and the signs of zeros (real and imaginary parts)."""
    out, expected = np.asarray(out), np.asarray(expected)
    assert out.shape == expected.shape and out.dtype == expected.dtype, (out, expected)
    for part in ((np.real, np.imag) if out.dtype.kind == "c" else (lambda v: v,)):
        a, b = part(out), part(expected)
        assert np.array_equal(a, b, equal_nan=True), (out, expected)
        signs = ~np.isnan(a)
        assert np.array_equal(np.signbit(a[signs]), np.signbit(b[signs])), (out, expected)


def _both(f, *args):
    """``f`` eager and under jit (they must agree bit for bit)."""
    eager = f(*args)
    _same(fnx.jit(f)(*args), eager)
    return eager


def test_version_and_namespace():
    assert fnp.__array_api_version__ == "2024.12"
    x = fnp.ones(2)
    assert x.__array_namespace__(api_version="2024.12") is fnp
    assert x.__array_namespace__(api_version="2023.12") is fnp
    with pytest.raises(ValueError, match="2024.12"):
        x.__array_namespace__(api_version="2025.12")


def test_functions_new_in_2024_bind_as_the_standard_says():
    """2024.12's additions, called the way the standard writes them (positional-only
    arrays, keyword-only options) and against NumPy's values."""
    a = np.array([[3, 1, 4], [1, 5, 9]], np.int64)
    _same(fnp.diff(a, axis=1, n=1), np.diff(a, axis=1))
    _same(fnp.diff(a, axis=0, prepend=a[:1], append=a[-1:]),
          np.diff(a, axis=0, prepend=a[:1], append=a[-1:]))
    _same(fnp.count_nonzero(fnp.asarray(a) - 1, axis=1, keepdims=True),
          np.count_nonzero(a - 1, axis=1, keepdims=True))
    _same(fnp.cumulative_prod(a, axis=1, include_initial=True),
          np.concatenate([np.ones((2, 1), np.int64), np.cumprod(a, axis=1)], axis=1))
    _same(fnp.take_along_axis(a, np.argsort(a, axis=1), axis=1), np.sort(a, axis=1))
    _same(fnp.take_along_axis(a, np.argsort(a, axis=-1)), np.sort(a, axis=-1))  # axis=-1
    _same(fnp.reciprocal(np.array([2.0, -0.0])), np.array([0.5, -INF]))
    _same(fnp.nextafter(np.float32(1), np.float32(2)), np.nextafter(np.float32(1), np.float32(2)))
    x = np.array([4.0, 1.0, 3.0])
    np.testing.assert_array_equal(
        fnp.searchsorted(x, np.array([2.0, 4.0]), side="right", sorter=np.argsort(x)),
        np.searchsorted(x, [2.0, 4.0], side="right", sorter=np.argsort(x)))
    # Python scalars as either operand of the elementwise functions (new in 2024.12)
    _same(fnp.add(2, np.float32([1.0])), np.float32([3.0]))
    _same(fnp.maximum(np.int8([1, 7]), 5), np.int8([5, 7]))
    inspect.signature(fnp.diff).bind(a, axis=0, n=1, prepend=None, append=None)
    inspect.signature(fnp.cumulative_prod).bind(a, axis=0, dtype=None, include_initial=False)


def test_capabilities_give_max_dimensions():
    """2024.12 adds "max dimensions" (NumPy's limit, 64: a 64-dim array works)."""
    caps = fnp.__array_namespace_info__().capabilities()
    assert caps["max dimensions"] == 64
    assert fnp.ones((1,) * 64).ndim == 64


def test_dtype_objects_compare_unequal_to_non_dtypes():
    """``fnp.float32 == x`` is False for anything np.dtype rejects with TypeError *or*
    ValueError (dicts, comma strings): the suite's reporting compares dtypes with both."""
    for other in ({"dtype": 1}, "- 20 passing examples, 0 failing", "not a dtype", None, 3):
        assert (fnp.float32 == other) is False
        assert (fnp.bool == other) is False
    assert fnp.float32 == "float32" and fnp.int8 == np.int8
    assert (fnp.float64 == None) is False  # noqa: E711 (np.dtype(None) is float64)


def test_expand_dims_axis_out_of_range_is_an_index_error():
    x = fnp.ones((2, 3, 4))
    assert fnp.expand_dims(x, axis=3).shape == (2, 3, 4, 1)
    assert fnp.expand_dims(x, axis=-4).shape == (1, 2, 3, 4)
    for axis in (4, -5, 8):
        with pytest.raises(IndexError, match=r"expand_dims: axis .* rank-3"):
            fnp.expand_dims(x, axis=axis)
        with pytest.raises(ValueError):  # and a ValueError, as NumPy's AxisError
            fnp.expand_dims(x, axis=axis)
        with pytest.raises(fnx.errors.ShapeError):
            fnp.expand_dims(x, axis=axis)
    with pytest.raises(IndexError):
        fnp.sum(x, axis=3)


@pytest.mark.parametrize("batch", [(), (2,)])
def test_linalg_of_empty_matrices(batch):
    e = np.ones(batch + (0, 0))
    _same(_both(fnp.linalg.inv, e), np.linalg.inv(e))
    _same(_both(fnp.linalg.solve, e, np.ones(batch + (0, 2))), np.ones(batch + (0, 2)))
    _same(_both(fnp.linalg.det, e), np.linalg.det(e))
    sign, logdet = fnp.linalg.slogdet(e)
    _same(sign, np.ones(batch))
    _same(logdet, np.zeros(batch))
    g = fnx.grad(lambda a: fnp.linalg.inv(a).sum())(e)
    assert g.shape == e.shape


def test_floor_divide_of_infinities_follows_the_standard():
    """inf // finite is a signed infinity and finite // inf a signed zero (x1 / x2), where
    NumPy and JAX give NaN and -1; every other case stays NumPy's."""
    x1 = np.array([INF, INF, -INF, -INF, 1.0, 1.0, -1.0, -1.0, 0.0, INF, NAN, 7.0, -7.0,
                   1.0, 5.0])
    x2 = np.array([2.0, -2.0, 2.0, -2.0, INF, -INF, INF, -INF, INF, INF, INF, 2.0, 2.0,
                   0.0, NAN])
    expected = np.array([INF, -INF, -INF, INF, 0.0, -0.0, -0.0, 0.0, 0.0, NAN, NAN, 3.0,
                         -4.0, INF, NAN])
    for dt in (np.float32, np.float64):
        _same(_both(fnp.floor_divide, x1.astype(dt), x2.astype(dt)), expected.astype(dt))
        _same(fnp.asarray(x1.astype(dt)) // x2.astype(dt), expected.astype(dt))
    _same(_both(fnp.floor_divide, np.int32([7, -7]), np.int32([2, 2])), np.int32([3, -4]))
    assert float(fnp.floor_divide(INF, 2.0)) == INF


def test_complex_expm1_special_cases():
    z = np.array([complex(INF, 0.0), complex(-INF, INF), complex(INF, INF),
                  complex(-INF, NAN), complex(INF, NAN), complex(NAN, 0.0), complex(0.0, 0.0),
                  complex(-0.0, 0.0), complex(1.0, -0.0), complex(-INF, 2.0),
                  complex(-INF, -2.0)])
    expected = [complex(INF, 0.0), complex(-1.0, 0.0), complex(INF, NAN), complex(-1.0, 0.0),
                complex(INF, NAN), complex(NAN, 0.0), complex(0.0, 0.0), complex(0.0, 0.0),
                complex(math.expm1(1.0), -0.0), complex(-1.0, 0.0), complex(-1.0, -0.0)]
    for dt in (np.complex64, np.complex128):
        out = np.asarray(_both(fnp.expm1, z.astype(dt)))
        exp = np.array(expected, dt)
        # the standard leaves the sign of -1 + 0j's zero for a non-finite y unspecified
        exp.imag[[1, 3]] = out.imag[[1, 3]]
        assert out.dtype == dt
        np.testing.assert_allclose(out.real, exp.real, rtol=1e-6)
        _same(out.imag, exp.imag)
    # finite values: NumPy's
    w = np.array([0.3 + 0.4j, -2 + 5j, 1e-4 - 1e-4j])
    np.testing.assert_allclose(np.asarray(fnp.expm1(w)), np.expm1(w), rtol=1e-12)
    # real inputs keep the real expm1 (and its gradient)
    _same(_both(fnp.expm1, np.array([-0.0, INF, -INF])), np.array([-0.0, INF, -1.0]))
    g = fnx.grad(lambda t: fnp.real(fnp.expm1(t * 1j)))(0.3)
    assert float(g) == pytest.approx(-math.sin(0.3))


def test_complex_tanh_at_infinite_real_part():
    z = np.array([complex(INF, 3.0), complex(INF, 1e300), complex(-INF, 2.0),
                  complex(-INF, -2.0), complex(INF, -0.0), 0.5 + 0.5j])
    expected = np.array([complex(1, 0.0), complex(1, 0.0), complex(-1, 0.0),
                         complex(-1, -0.0), complex(1, -0.0), np.tanh(0.5 + 0.5j)])
    _same(_both(fnp.tanh, z), expected)
    _same(_both(fnp.tanh, np.float32([0.5, -INF])), np.tanh(np.float32([0.5, -INF])))


def test_repeat_of_empty_uint64_with_array_repeats():
    out = fnp.repeat(fnp.asarray(np.array([], np.uint64)), fnp.asarray(np.array([], np.int8)))
    _same(out, np.array([], np.uint64))
    _same(fnp.repeat(np.uint64([2**64 - 1, 3]), np.int8([2, 1])),
          np.uint64([2**64 - 1, 2**64 - 1, 3]))


def test_a_boolean_mask_must_match_the_dimensions_it_covers():
    """As NumPy and JAX (and array-api-tests' test_getitem_masking): a mask whose size
    differs from the dimension it indexes is an IndexError, not a selection; a mask
    dimension of size 0 selects nothing."""
    x = fnp.arange(12).reshape(3, 4)
    for bad in (np.array([True, False]), (slice(None), np.array([True, False, True]))):
        with pytest.raises(IndexError, match="does not match the array of shape"):
            x[bad]
    with pytest.raises(IndexError, match=r"dimension 0 has size 1 where .* has 0"):
        fnp.zeros((0,), bool)[np.array([False])]
    assert x[np.array([True, False, True])].shape == (2, 4)
    assert x[:, np.array([True, False, True, True])].shape == (3, 3)
    assert x[np.zeros((0, 4), bool)].shape == (0,)
    assert fnp.zeros((0,), bool)[np.asarray(False)].shape == (0, 0)


def test_vecdot_does_not_broadcast_the_contracted_axis():
    """The Array API and JAX: the vectors must have equal lengths (NumPy's gufunc agrees);
    a length-1 vector used to be dotted with every element."""
    for a, b in (((0,), (1,)), ((2, 3), (1,))):
        with pytest.raises(ShapeError, match="must be equal"):
            fnp.vecdot(np.ones(a, np.float32), np.ones(b, np.float32))
    _same(fnp.vecdot(np.ones((2, 3), np.float32), np.ones(3, np.float32)),
          np.full(2, 3, np.float32))
