"""Tests for fnx.lax.special_math (erf, erfc, erf_inv, lgamma, digamma, polygamma)."""

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fnx.lax import special_math as sm

FUNCS = {
    "erf": sm.erf,
    "erfc": sm.erfc,
    "erf_inv": sm.erf_inv,
    "lgamma": sm.lgamma,
    "digamma": sm.digamma,
    "trigamma": lambda x: sm.polygamma(1, x),
    "polygamma4": lambda x: sm.polygamma(4, x),
}
DTYPES = [np.float16, np.float32, np.float64]
EULER = 0.57721566490153286061
PSI_X0_HI = 1.4616321449683622       # positive zero of digamma (double-double)
PSI_X0_LO = 9.549995429965697e-17
TRIGAMMA_X0 = 0.96767224544762117     # digamma'(x0)
TETRAGAMMA_X0 = -0.88552633796718421  # digamma''(x0)

PROP = settings(max_examples=80, deadline=None, database=None)

finite64 = st.floats(allow_nan=False, allow_infinity=False)
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


def arrays(dtype, elements, max_size=48):
    return hnp.arrays(dtype, st.integers(1, max_size), elements=elements)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def ulp_dist(a, b):
    """Number of representable values between a and b (same float dtype),
    computed exactly with Python ints; +0 and -0 are the same point."""
    a = np.asarray(a)
    b = np.asarray(b)
    assert a.dtype == b.dtype and a.dtype.kind == "f"
    nbits = 8 * a.dtype.itemsize
    itype = {16: np.int16, 32: np.int32, 64: np.int64}[nbits]
    mag = (1 << (nbits - 1)) - 1

    def key(v):
        out = []
        for i in np.ascontiguousarray(v).reshape(-1).view(itype).tolist():
            out.append(-(i & mag) if i < 0 else i)
        return out

    return np.array([abs(p - q) for p, q in zip(key(a), key(b))], dtype=float)


def max_ulp(got, ref):
    got = np.asarray(got)
    ref = np.asarray(ref, dtype=got.dtype)
    assert not np.isnan(got).any() and not np.isnan(ref).any()
    d = ulp_dist(got, ref)
    return d.max() if d.size else 0.0


def math_ref(fn, x, dtype=np.float64):
    """Reference from a `math` function, evaluated in float64 then rounded."""
    return np.array([fn(float(v)) for v in np.asarray(x).reshape(-1)],
                    dtype=np.float64).astype(dtype)


def lgamma_ref(v):
    try:
        return math.lgamma(v)
    except OverflowError:
        return math.inf


def no_warnings(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args)


# ---------------------------------------------------------------------------
# erf / erfc against math.erf / math.erfc
# ---------------------------------------------------------------------------

@PROP
@given(arrays(np.float64, finite64))
def test_erf_float64_all_finite(x):
    got = no_warnings(sm.erf, x)
    assert got.dtype == np.float64 and got.shape == x.shape
    assert max_ulp(got, math_ref(math.erf, x)) <= 4


@PROP
@given(arrays(np.float64, finite64))
def test_erfc_float64_all_finite(x):
    got = no_warnings(sm.erfc, x)
    assert got.dtype == np.float64 and got.shape == x.shape
    # ulps also count in the subnormal range, so this is a relative-accuracy
    # requirement all the way down to underflow.
    assert max_ulp(got, math_ref(math.erfc, x)) <= 4


@PROP
@given(arrays(np.float64, st.floats(-30.0, 30.0)))
def test_erf_erfc_float64_moderate_range(x):
    # Dense sampling where erf / erfc are not saturated.
    assert max_ulp(sm.erf(x), math_ref(math.erf, x)) <= 4
    assert max_ulp(sm.erfc(x), math_ref(math.erfc, x)) <= 4


@PROP
@given(arrays(np.float32, finite32))
def test_erf_erfc_float32_all_finite(x):
    for fn, ref in ((sm.erf, math.erf), (sm.erfc, math.erfc)):
        got = no_warnings(fn, x)
        assert got.dtype == np.float32 and got.shape == x.shape
        assert max_ulp(got, math_ref(ref, x, np.float32)) <= 1


def _all_finite_float16():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    v = bits.view(np.float16)
    return v[np.isfinite(v)]


def test_erf_erfc_float16_exhaustive():
    x = _all_finite_float16()
    for fn, ref in ((sm.erf, math.erf), (sm.erfc, math.erfc)):
        got = no_warnings(fn, x)
        assert got.dtype == np.float16
        assert max_ulp(got, math_ref(ref, x, np.float16)) <= 1


def test_erfc_tail_relative_accuracy():
    x = np.array([5.0, 10.0, 15.5, 20.0, 26.0, 26.5, 26.6, 27.0, 27.2])
    got = sm.erfc(x)
    assert got[1] == pytest.approx(2.088487583762545e-45, rel=1e-15)
    assert got[4] == pytest.approx(5.663192408856143e-296, rel=1e-15)
    assert max_ulp(got, math_ref(math.erfc, x)) <= 4
    # far tail is exactly zero, negative tail exactly two
    big = np.array([27.5, 30.0, 1e10, 1e308])
    assert np.all(sm.erfc(big) == 0.0)
    assert np.all(sm.erfc(-big) == 2.0)
    assert np.all(sm.erfc(-np.array([6.0, 27.0])) == 2.0)


def test_erfc_dense_grid():
    x = np.linspace(-7.0, 27.2, 20001)
    assert max_ulp(sm.erfc(x), math_ref(math.erfc, x)) <= 4
    assert max_ulp(sm.erf(x), math_ref(math.erf, x)) <= 4


def test_erf_erfc_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    e = sm.erf(x)
    assert e[0] == 0.0 and not np.signbit(e[0])
    assert e[1] == 0.0 and np.signbit(e[1])
    assert e[2] == 1.0 and e[3] == -1.0 and np.isnan(e[4])
    c = sm.erfc(x)
    assert c[0] == 1.0 and c[1] == 1.0
    assert c[2] == 0.0 and c[3] == 2.0 and np.isnan(c[4])
    # smallest subnormals: erf(x) = 2/sqrt(pi) x
    tiny = np.array([5e-324, -5e-324, 1e-310, -1e-310])
    assert max_ulp(sm.erf(tiny), math_ref(math.erf, tiny)) <= 1
    for dt in DTYPES:
        z = np.array([-0.0, 0.0], dtype=dt)
        r = sm.erf(z)
        assert r.dtype == dt and list(np.signbit(r)) == [True, False]
        r = sm.erf(np.array([np.inf, -np.inf, np.nan], dtype=dt))
        assert r[0] == 1 and r[1] == -1 and np.isnan(r[2])


@PROP
@given(arrays(np.float64, st.floats(0.0, 40.0)))
def test_erf_symmetry_and_complement(x):
    assert np.array_equal(sm.erf(-x), -sm.erf(x))
    small = x < 0.4
    s = sm.erf(x[small]) + sm.erfc(x[small])
    np.testing.assert_allclose(s, 1.0, rtol=0, atol=4e-16)
    np.testing.assert_allclose(sm.erfc(-x), 2.0 - sm.erfc(x), rtol=4e-16)


# ---------------------------------------------------------------------------
# erf_inv
# ---------------------------------------------------------------------------

open_unit64 = st.floats(-1.0, 1.0, exclude_min=True, exclude_max=True)


@PROP
@given(arrays(np.float64, open_unit64))
def test_erf_inv_round_trip_float64(y):
    x = no_warnings(sm.erf_inv, y)
    assert x.dtype == np.float64 and np.all(np.isfinite(x))
    assert np.array_equal(np.signbit(x), np.signbit(y))
    assert max_ulp(sm.erf(x), y) <= 4
    # for |y| > 1/2 the complement carries the information; a one-ulp change
    # of x changes erfc(x) by a relative 2 x^2 eps
    hi = np.abs(y) > 0.5
    ax = np.abs(x[hi])
    c = sm.erfc(ax)
    rel = np.abs(c - (1.0 - np.abs(y[hi]))) / (1.0 - np.abs(y[hi]))
    assert np.all(rel <= 4 * 2.3e-16 * (1.0 + 2.0 * ax * ax))


def test_erf_inv_near_one():
    k = np.arange(1, 54)
    y = 1.0 - np.ldexp(1.0, -k)           # down to the largest double < 1
    x = sm.erf_inv(y)
    assert np.all(np.diff(x) > 0) and x[-1] == pytest.approx(5.863584748755168)
    rel = np.abs(sm.erfc(x) - (1.0 - y)) / (1.0 - y)
    assert rel.max() < 1e-14
    assert np.array_equal(sm.erf_inv(-y), -x)


@PROP
@given(arrays(np.float32, st.floats(-1.0, 1.0, width=32, exclude_min=True,
                                    exclude_max=True)))
def test_erf_inv_float32(y):
    x = no_warnings(sm.erf_inv, y)
    assert x.dtype == np.float32
    ref = sm.erf_inv(y.astype(np.float64)).astype(np.float32)
    assert max_ulp(x, ref) == 0
    # round trip at float32 resolution
    back = sm.erf(x.astype(np.float64))
    np.testing.assert_allclose(back, y, rtol=2e-6, atol=1e-44)


def test_erf_inv_special_values():
    y = np.array([0.0, -0.0, 1.0, -1.0, 1.0000001, -2.0, np.inf, -np.inf,
                  np.nan])
    x = no_warnings(sm.erf_inv, y)
    assert x[0] == 0.0 and not np.signbit(x[0])
    assert x[1] == 0.0 and np.signbit(x[1])
    assert x[2] == np.inf and x[3] == -np.inf
    assert np.all(np.isnan(x[4:]))
    assert sm.erf_inv(np.float64(0.5)) == pytest.approx(0.4769362762044699,
                                                        rel=1e-15)
    for dt in DTYPES:
        r = sm.erf_inv(np.array([1, -1, 0.5, 2], dtype=dt))
        assert r.dtype == dt and r[0] == np.inf and r[1] == -np.inf
        assert np.isnan(r[3])


def test_erf_inv_float16_exhaustive():
    y = _all_finite_float16()
    y = y[np.abs(y) < 1]
    got = no_warnings(sm.erf_inv, y)
    ref = sm.erf_inv(y.astype(np.float64)).astype(np.float16)
    assert max_ulp(got, ref) == 0
    np.testing.assert_allclose(sm.erf(got.astype(np.float64)), y,
                               rtol=2e-3, atol=1e-7)


# ---------------------------------------------------------------------------
# lgamma
# ---------------------------------------------------------------------------

@PROP
@given(arrays(np.float64, st.floats(min_value=0.0, exclude_min=True,
                                    allow_infinity=False)))
def test_lgamma_positive_float64(x):
    got = no_warnings(sm.lgamma, x)
    ref = np.array([lgamma_ref(v) for v in x.tolist()])
    inf = np.isinf(ref)
    assert np.all(got[inf] == np.inf)
    # math.lgamma itself has ~1e-15 absolute error around its zeros at 1, 2
    np.testing.assert_allclose(got[~inf], ref[~inf], rtol=1e-13, atol=1e-14)


@PROP
@given(arrays(np.float64, st.floats(-1e15, 0.0, exclude_max=True)))
def test_lgamma_negative_float64(x):
    x = x[x != np.floor(x)]
    got = no_warnings(sm.lgamma, x)
    ref = np.array([math.lgamma(v) for v in x.tolist()])
    # The reflection formula cancels near the zeros of lgamma on the
    # negative axis: the error is relative to the size of its terms.
    scale = (np.abs(ref) + np.abs(np.log(np.abs(x)))
             + np.array([abs(math.lgamma(-v)) for v in x.tolist()]))
    assert np.all(np.abs(got - ref) <= 1e-13 * scale)


@PROP
@given(arrays(np.float32, finite32))
def test_lgamma_float32(x):
    x = x[(x > 0) | (x != np.floor(x))]
    got = no_warnings(sm.lgamma, x)
    assert got.dtype == np.float32
    ref64 = np.array([lgamma_ref(float(v)) for v in x])
    with np.errstate(over="ignore"):
        ref = ref64.astype(np.float32)
    ok = ulp_dist(got, ref) <= 1
    # near a zero of lgamma (negative axis) allow an absolute error
    scale = np.abs(ref64) + np.abs(sm.lgamma(-x.astype(np.float64)))
    ok |= np.abs(got.astype(np.float64) - ref64) <= 1e-13 * scale + 1e-45
    assert ok.all()


def test_lgamma_negative_near_poles():
    n = np.arange(1.0, 40.0)
    eps = np.array([1e-12, 1e-9, 1e-6, 1e-3, 0.25])
    x = (-n[:, None] + np.concatenate([eps, -eps])[None, :]).ravel()
    x = x[x != np.floor(x)]
    got = no_warnings(sm.lgamma, x)
    ref = np.array([math.lgamma(v) for v in x.tolist()])
    scale = np.abs(ref) + np.array([abs(math.lgamma(-v)) for v in x.tolist()])
    assert np.all(np.abs(got - ref) <= 1e-13 * scale)
    # psi has a simple pole with residue -1:  psi(-n + e) ~ -1/e
    x = -n + 1e-9
    e = x + n                                # exact offset from the pole
    np.testing.assert_allclose(no_warnings(sm.digamma, x) * e, -1.0, rtol=1e-7)


def test_lgamma_relative_accuracy_at_its_zeros():
    h = np.array([1e-300, 1e-100, 1e-12, 1e-8, -1e-12, -1e-8])
    # lgamma(1 + h) = -gamma h + (pi^2/12) h^2 + O(h^3)
    got = sm.lgamma(1.0 + h[2:])
    hh = (1.0 + h[2:]) - 1.0
    ref = -EULER * hh + (math.pi ** 2 / 12) * hh * hh
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # lgamma(2 + h) = (1 - gamma) h + (pi^2/12 - 1/2) h^2 + O(h^3)
    got = sm.lgamma(2.0 + h[2:])
    hh = (2.0 + h[2:]) - 2.0
    ref = (1 - EULER) * hh + (math.pi ** 2 / 12 - 0.5) * hh * hh
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert sm.lgamma(np.array([1.0, 2.0])).tolist() == [0.0, 0.0]
    # tiny arguments: lgamma(x) = -log|x| - gamma x
    t = np.array([1e-300, -1e-300, 5e-324, -5e-324])
    np.testing.assert_allclose(sm.lgamma(t), -np.log(np.abs(t)), rtol=1e-15)


def test_lgamma_special_values():
    x = np.array([0.0, -0.0, -1.0, -2.0, -1e300, np.inf, -np.inf, np.nan,
                  -4503599627370496.0])
    got = no_warnings(sm.lgamma, x)
    assert np.all(got[:7] == np.inf) and np.isnan(got[7]) and got[8] == np.inf
    np.testing.assert_allclose(
        sm.lgamma(np.array([0.5, 3.0, 10.0, -0.5, -2.5, 171.5, 1e300])),
        [0.5 * math.log(math.pi), math.log(2.0), math.log(362880.0),
         math.log(2 * math.sqrt(math.pi)),
         -0.056243716497674054,              # log(8 sqrt(pi) / 15)
         math.lgamma(171.5), 1e300 * (math.log(1e300) - 1)],
        rtol=1e-15, atol=2e-16)
    assert sm.lgamma(np.float64(1e308)) == np.inf


# ---------------------------------------------------------------------------
# digamma
# ---------------------------------------------------------------------------

def test_digamma_known_values():
    x = np.array([1.0, 0.5, 2.0, 3.0, 0.25, 100.0])
    ref = [-EULER, -EULER - 2 * math.log(2), 1 - EULER, 1.5 - EULER,
           -EULER - math.pi / 2 - 3 * math.log(2),
           4.600161852738087]
    np.testing.assert_allclose(sm.digamma(x), ref, rtol=2e-16 * 4)


def test_digamma_relative_accuracy_at_its_zero():
    k = np.array([-1e6, -3.0, -1.0, 1.0, 2.0, 1e6, 1e9])
    x = PSI_X0_HI + k * np.spacing(PSI_X0_HI)
    got = sm.digamma(x)
    d = (x - PSI_X0_HI) - PSI_X0_LO
    ref = TRIGAMMA_X0 * d + 0.5 * TETRAGAMMA_X0 * d * d
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert abs(sm.digamma(np.float64(PSI_X0_HI))) < 1e-16


@PROP
@given(arrays(np.float64, st.floats(1e-3, 1e6)))
def test_digamma_vs_lgamma_finite_difference(x):
    h = 1e-5 * x
    h = ((x + h) - x)                       # exactly representable step
    fd = np.array([(math.lgamma(a + b) - math.lgamma(a - b)) / (2 * b)
                   for a, b in zip(x.tolist(), h.tolist())])
    got = no_warnings(sm.digamma, x)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


@PROP
@given(arrays(np.float64, st.floats(-1e6, 1e6)))
def test_digamma_recurrence(x):
    x = x[(x != np.floor(x)) & (np.abs(x) > 1e-3)]
    a = sm.digamma(x + 1.0)
    b = sm.digamma(x) + 1.0 / x
    # error relative to the size of the terms of the identity
    scale = np.abs(a) + np.abs(sm.digamma(x)) + np.abs(1.0 / x)
    scale += np.abs(np.pi / np.tan(np.pi * x)) * (x < 0)
    assert np.all(np.abs(a - b) <= 1e-13 * scale)


@PROP
@given(arrays(np.float64, finite64))
def test_digamma_vs_scipy(x):
    special = pytest.importorskip("scipy.special")
    got = no_warnings(sm.digamma, x)
    ref = special.psi(x)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    g, r, xv = got[~nan], ref[~nan], x[~nan]
    inf = np.isinf(r)
    assert np.array_equal(g[inf], r[inf])
    g, r, xv = g[~inf], r[~inf], xv[~inf]
    # negative axis: cancellation in the reflection formula; scipy also
    # loses ~eps |x| / r^2 (r = distance to the nearest pole) there
    with np.errstate(all="ignore"):
        rr = np.abs(xv - np.round(xv))
        neg = xv < 0
        scale = np.abs(r) + np.where(neg, np.pi / np.tan(np.pi * rr), 0.0)
        scipy_err = np.where(neg, 4e-16 * np.abs(xv) / (rr * rr), 0.0)
    assert np.all(np.abs(g - r) <= 1e-13 * scale + scipy_err + 1e-300)


def test_digamma_special_values():
    x = np.array([0.0, -0.0, -1.0, -2.0, -1e300, np.inf, -np.inf, np.nan])
    got = no_warnings(sm.digamma, x)
    assert got[0] == -np.inf and got[1] == np.inf
    assert np.all(np.isnan(got[[2, 3, 4, 6, 7]])) and got[5] == np.inf
    # huge arguments
    assert sm.digamma(np.float64(1e300)) == pytest.approx(math.log(1e300),
                                                          rel=1e-15)
    for dt in DTYPES:
        r = sm.digamma(np.array([0.0, -0.0, -3.0, 1.0], dtype=dt))
        assert r.dtype == dt and r[0] == -np.inf and r[1] == np.inf
        assert np.isnan(r[2]) and r[3] == pytest.approx(-EULER, rel=1e-3)


def test_lgamma_digamma_vs_scipy_float64():
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(1234)
    x = np.concatenate([rng.uniform(0.0, 12.0, 4000),
                        np.exp(rng.uniform(-700, 700, 2000)),
                        rng.uniform(0.99, 1.01, 500),
                        rng.uniform(1.99, 2.01, 500)])
    # gammaln has ~1e-16 absolute (not relative) error next to 1 and 2
    np.testing.assert_allclose(sm.lgamma(x), special.gammaln(x), rtol=1e-14,
                               atol=1e-15)
    np.testing.assert_allclose(sm.digamma(x), special.psi(x), rtol=1e-14,
                               atol=0)


# ---------------------------------------------------------------------------
# polygamma
# ---------------------------------------------------------------------------

ZETA3 = 1.2020569031595942854


def test_polygamma_closed_forms():
    pi = math.pi
    cases = [(1, 1.0, pi ** 2 / 6), (1, 0.5, pi ** 2 / 2), (1, 2.0, pi ** 2 / 6 - 1),
             (2, 1.0, -2 * ZETA3), (2, 0.5, -14 * ZETA3), (3, 1.0, pi ** 4 / 15),
             (3, 0.5, pi ** 4), (5, 1.0, 8 * pi ** 6 / 63), (1, 1e-8, 1e16 + pi ** 2 / 6),
             # the negative axis (reflection): psi_1(x) = psi_1(x + 1) + 1/x^2
             (1, -0.5, pi ** 2 / 2 + 4), (2, -0.5, -14 * ZETA3 + 16)]
    for n, x, want in cases:
        got = no_warnings(sm.polygamma, n, np.float64(x))
        assert got == pytest.approx(want, rel=4e-16 * 4), (n, x)


def test_polygamma_order_zero_is_digamma_and_bad_orders_are_nan():
    x = np.linspace(-3.7, 40.0, 101)
    assert np.array_equal(sm.polygamma(0, x), sm.digamma(x), equal_nan=True)
    got = sm.polygamma(np.array([-1.0, 1.5, np.nan, np.inf, -np.inf]), 2.0)
    assert np.isnan(got).all()


def test_polygamma_special_values():
    x = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan])
    for n in (1, 2, 3, 4):
        got = no_warnings(sm.polygamma, n, x)
        sign = 1.0 if n % 2 else -1.0
        assert (got[:4] == sign * np.inf).all()
        assert got[4] == 0.0 and np.isnan(got[5:]).all()
    # where n! x^-(n+1) leaves the float64 range the result does not overflow or
    # underflow early
    assert sm.polygamma(1, np.float64(1e300)) == pytest.approx(1e-300, rel=1e-15)
    assert sm.polygamma(2, np.float64(1e-200)) == -np.inf
    assert sm.polygamma(1, np.float64(5e-324)) == np.inf
    assert sm.polygamma(3, np.float64(1e200)) == 0.0      # 2e-600 underflows


def test_polygamma_broadcasts_and_keeps_the_dtype_of_x():
    n = np.array([[0.0], [1.0], [2.0]], np.float32)
    x = np.array([0.5, 1.0, 7.25, 30.0], np.float32)
    got = sm.polygamma(n, x)
    assert got.shape == (3, 4) and got.dtype == np.float32
    want = sm.polygamma(n.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(got, want)
    assert sm.polygamma(2, np.float16(3.0)).dtype == np.float16
    with pytest.raises(TypeError):
        sm.polygamma(np.array([1j]), 1.0)


@PROP
@given(st.integers(1, 12), arrays(np.float64, st.floats(1e-3, 1e3)))
def test_polygamma_recurrence(n, x):
    """psi_n(x + 1) = psi_n(x) + (-1)^n n! / x^(n+1)."""
    a = no_warnings(sm.polygamma, n, x + 1.0)
    b = no_warnings(sm.polygamma, n, x)
    step = (-1.0) ** n * math.factorial(n) / x ** (n + 1)
    ok = np.isfinite(b) & np.isfinite(step)
    scale = np.abs(a) + np.abs(b) + np.abs(step)
    assert np.all(np.abs(a - (b + step))[ok] <= 2e-15 * 8 * scale[ok])


@PROP
@given(st.integers(1, 8), arrays(np.float64, st.floats(-60.0, -1e-3)))
def test_polygamma_reflection_on_the_negative_axis(n, x):
    """psi_n(x) - (-1)^n psi_n(1 - x) = -pi d^n/dx^n cot(pi x): checked through the
    recurrence instead (x -> x + k until positive), which uses no cotangent."""
    assume_ok = x != np.floor(x)
    x = x[assume_ok]
    if not x.size:
        return
    got = no_warnings(sm.polygamma, n, x)
    k = np.ceil(-x) + 1.0
    acc = sm.polygamma(n, x + k)
    scale = np.abs(acc)
    sign = -((-1.0) ** n) * math.factorial(n)
    for j in range(int(k.max())):
        term = np.where(j < k, sign / (x + j) ** (n + 1), 0.0)
        acc = acc + term
        scale = scale + np.abs(term)
    assert np.all(np.abs(got - acc) <= 1e-13 * scale)


def test_polygamma_vs_scipy():
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(0.0, 30.0, 2000), np.exp(rng.uniform(-30, 30, 500)),
                        rng.uniform(-20.0, 0.0, 500)])
    for n in range(7):
        got = no_warnings(sm.polygamma, n, x)
        ref = special.polygamma(n, x)
        pos = x > 0
        np.testing.assert_allclose(got[pos], ref[pos], rtol=1e-14, atol=0)
        # negative axis: both lose accuracy next to the zeros of psi_n there; compare
        # on the scale of the terms of the recurrence (scipy sums them directly)
        with np.errstate(all="ignore"):
            r = np.abs(x[~pos] - np.round(x[~pos]))
            scale = np.abs(ref[~pos]) + math.factorial(n) / r ** (n + 1)
        assert np.all(np.abs(got[~pos] - ref[~pos]) <= 1e-13 * scale)


def test_polygamma_max_ulp_error_against_mpmath():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    rng = np.random.default_rng(17)

    def worst(n, xs):
        got = sm.polygamma(n, xs)
        errs = []
        for g, v in zip(got.tolist(), xs.tolist()):
            e = mp.polygamma(n, mp.mpf(v))
            errs.append(float(abs(mp.mpf(g) - e)) / float(np.spacing(abs(float(e)))))
        return max(errs)

    for n in (1, 2, 3, 6, 13, 40, 100, 170):
        xs = np.concatenate([rng.uniform(0, 12, 40), np.exp(rng.uniform(-20, 20, 20)),
                             np.exp(rng.uniform(-600, 600, 10)) ** (1 / max(1, n / 10))])
        xs = np.array([v for v in xs if 1e-300 < abs(float(mp.polygamma(n, mp.mpf(v))))
                       < 1e300])
        assert worst(n, xs) <= 16, n
    # past 170! the result goes through logs: relative error ~ |log result| eps
    x = np.array([10.0, 50.0, 400.0])
    got = sm.polygamma(200, x)
    want = np.array([float(mp.polygamma(200, mp.mpf(v))) for v in x])
    np.testing.assert_allclose(got, want, rtol=2e-12)


# ---------------------------------------------------------------------------
# high-precision accuracy check (optional: needs mpmath)
# ---------------------------------------------------------------------------

def test_max_ulp_error_against_mpmath():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    rng = np.random.default_rng(99)

    def worst(fn, mfn, xs):
        got = fn(xs)
        errs = []
        for g, v in zip(got.tolist(), xs.tolist()):
            e = mfn(mp.mpf(v))
            r = float(e)
            ulp = float(np.spacing(np.abs(np.float64(r))))
            errs.append(float(abs(mp.mpf(g) - e)) / ulp)
        return max(errs)

    x = np.concatenate([rng.uniform(-6, 6, 300),
                        np.exp(rng.uniform(-30, 3.3, 100))])
    assert worst(sm.erf, mp.erf, x) <= 4
    xc = np.concatenate([x, rng.uniform(4, 26.5, 100)])
    assert worst(sm.erfc, mp.erfc, xc) <= 4
    y = np.concatenate([rng.uniform(-1, 1, 300),
                        1 - np.exp(rng.uniform(-36, 0, 100))])
    assert worst(sm.erf_inv, mp.erfinv, y) <= 4
    g = np.concatenate([rng.uniform(0, 12, 300),
                        np.exp(rng.uniform(-50, 50, 100))])
    assert worst(sm.lgamma, mp.loggamma, g) <= 8
    assert worst(sm.digamma, mp.digamma, g) <= 6


# ---------------------------------------------------------------------------
# dtype / shape / warnings / dependencies
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FUNCS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_and_shape_preserved(name, dtype):
    fn = FUNCS[name]
    base = np.linspace(-0.9, 0.9, 24).astype(dtype)
    for arr in (base.reshape(2, 3, 4), base.reshape(4, 6).T, base[::3],
                np.empty((0, 3), dtype)):
        out = fn(arr)
        assert isinstance(out, np.ndarray)
        assert out.dtype == dtype and out.shape == arr.shape
        flat = fn(np.ascontiguousarray(arr).reshape(-1))
        assert np.array_equal(out.reshape(-1), flat, equal_nan=True)
    # 0-d array and NumPy scalar give a 0-d ndarray
    for x in (np.array(0.25, dtype=dtype), dtype(0.25)):
        out = fn(x)
        assert type(out) is np.ndarray and out.shape == () and out.dtype == dtype
        assert out == fn(np.array([0.25], dtype=dtype))[0]
    # the input is not modified
    before = base.copy()
    fn(base)
    assert np.array_equal(base, before)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_integer_input_promotes_and_bad_dtype_raises(name):
    fn = FUNCS[name]
    out = fn(np.array([0, 1, 2], dtype=np.int32))
    assert out.dtype == np.float64
    assert np.array_equal(out, fn(np.array([0.0, 1.0, 2.0])), equal_nan=True)
    with pytest.raises(TypeError):
        fn(np.array([1 + 1j]))


def _nasty_values(dtype):
    fi = np.finfo(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, fi.max, -fi.max,
            fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, -fi.tiny,
            1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 0.46875, 4.0, 6.0, 27.0, 30.0,
            -27.5, 1e-8, -1e-8, 0.9999, -0.9999, 1.5, -3.5, 8.0, 10.0, 2.5]
    with np.errstate(all="ignore"):
        return np.array(vals, dtype=np.float64).astype(dtype)


@pytest.mark.parametrize("name", sorted(FUNCS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_no_runtime_warnings(name, dtype):
    rng = np.random.default_rng(7)
    with np.errstate(all="ignore"):
        rand = np.concatenate([rng.standard_normal(200) * 10,
                               np.exp(rng.uniform(-700, 700, 200)),
                               -np.exp(rng.uniform(-700, 700, 200)),
                               rng.uniform(-1, 1, 200)]).astype(dtype)
    x = np.concatenate([_nasty_values(dtype), rand])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="warn"):
            FUNCS[name](x)
            for v in x[:40]:
                FUNCS[name](v)


def test_module_depends_only_on_numpy_and_stdlib():
    path = Path(sm.__file__)
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('sm_alone', {str(path)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "bad = [k for k in sys.modules\n"
        "       if k.split('.')[0] in ('scipy', 'fnx', 'mpmath')]\n"
        "assert not bad, bad\n"
        "assert float(m.erf(m.np.float64(1.0))) > 0.84\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
