"""Special functions on NumPy arrays: ``erf``, ``erfc``, ``erf_inv``, ``lgamma``
and ``digamma``.

This module depends on NumPy and the standard library only.

Every public function accepts a NumPy array, a NumPy scalar (or a Python
number) and returns an ``ndarray`` with the same shape as the input, including
0-d inputs (which give a 0-d ``ndarray``).  Floating inputs keep their dtype
(``float16``, ``float32`` or ``float64``); bool / integer inputs are promoted
to ``float64``.  All arithmetic is done in float64 and the result is rounded
once to the input dtype at the end.  Other dtypes (complex, ``longdouble``,
object, ...) raise ``TypeError``.

All functions are vectorised: the input is partitioned by range with boolean
masks and each part is evaluated with a fixed number of whole-array NumPy
passes (no Python loop over elements).  All computations run under
``np.errstate(all="ignore")``, so no NumPy ``RuntimeWarning`` is ever emitted.

Algorithms
----------
``erf`` / ``erfc``
    W. J. Cody, "Rational Chebyshev approximations for the error function",
    Math. Comp. 23 (1969) 631-638 (the coefficient sets of his CALERF
    routine), on three ranges of ``|x|``:
    ``[0, 0.46875)`` erf = x R1(x^2);  ``[0.46875, 4]`` erfc = exp(-x^2) R2(x);
    ``(4, inf)`` erfc = exp(-x^2)/x (1/sqrt(pi) + R3(1/x^2)/x^2).
    ``exp(-x^2)`` is formed as ``exp(-s^2) * exp(-(x - s)(x + s))`` with
    ``s = trunc(16 x)/16`` (exact ``s^2``) so that erfc keeps full relative
    accuracy in its tail; for ``x > 4`` the factor ``exp(-s^2)`` is applied as
    two halves so that results in the subnormal range (26.55 < x < 27.3) are
    rounded only once.
``erf_inv``
    P. J. Acklam's rational approximation of the normal quantile (relative
    error < 1.2e-9) written in terms of erf, followed by one Halley step
    ``z -= u / (1 + z u)``, ``u = (erf(z) - y) / (2/sqrt(pi) exp(-z^2))``.
    For ``|y| > 1/2`` the residual is computed as ``(1 - |y|) - erfc(z)``
    (``1 - |y|`` is exact there), which keeps full accuracy next to +-1.
``lgamma``
    ``x >= 8``: Stirling series with 10 Bernoulli terms.
    ``1.5 <= x < 8``: ``lgamma(x) = S(t) + log((x-1)...(x-n))`` with
    ``t = x - 2 - n`` in ``[-0.5, 0.5)``, where
    ``S(t) = lgamma(2 + t) = (1-gamma) t + sum_k (-1)^k (zeta(k)-1)/k t^k``
    (32 terms; the coefficients are the exact Taylor coefficients).
    ``0.5 <= x < 1.5``: ``S(x-1) - log1p(x-1)``; ``0 < x < 0.5``:
    ``S(x) - log1p(x) - log(x)``.  The zeros at 1 and 2 are therefore
    reproduced with full relative accuracy.
    ``x < 0``: reflection ``lgamma(x) = log(pi / (|sin(pi x)| |x|)) - lgamma(-x)``
    with an exactly reduced ``sin(pi x)``.
``digamma``
    ``x >= 10``: asymptotic series (8 Bernoulli terms).
    ``1 <= x < 2.5``: ``psi(x) = (x - x0) P(x - 2)`` where ``x0`` is the
    positive zero of psi (used as a double-double ``x0_hi + x0_lo``) and ``P``
    is the Taylor series of ``psi(2 + t)/(t - t0)`` (62 terms), so the zero at
    ``x0 = 1.4616...`` has full relative accuracy.
    ``2.5 <= x < 10``: downward recurrence ``psi(x) = psi(x-n) + sum 1/(x-i)``.
    ``0 < x < 1``: ``psi(x) = psi(x + 1) - 1/x``.
    ``x < 0``: reflection ``psi(x) = psi(1 - x) - pi cot(pi x)``.

Special values
--------------
* ``erf(+-0) = +-0``, ``erf(+-inf) = +-1``, ``erfc(+inf) = 0``,
  ``erfc(-inf) = 2``; NaN -> NaN.
* ``erf_inv(+-1) = +-inf``, ``erf_inv(y) = NaN`` for ``|y| > 1``,
  ``erf_inv(+-0) = +-0``; NaN -> NaN.
* ``lgamma``: ``+inf`` at the poles ``0, -0, -1, -2, ...`` (as
  ``scipy.special.gammaln``; every float64 with ``|x| >= 2**52`` is an
  integer, so all such negative values are poles), ``lgamma(+inf) = +inf``,
  ``lgamma(-inf) = +inf`` (C99 / ``math.lgamma``; scipy returns ``-inf``).
  NaN -> NaN.  This is ``log|Gamma(x)|``; the sign of Gamma is not returned.
* ``digamma`` (as ``scipy.special.psi``): ``digamma(+0) = -inf``,
  ``digamma(-0) = +inf``, NaN at the negative integers and at ``-inf``,
  ``digamma(+inf) = +inf``; NaN -> NaN.

Accuracy (float64, measured against mpmath): erf / erfc within a few ulp
everywhere (erfc with relative accuracy down to the underflow threshold),
erf_inv within a few ulp; lgamma and digamma within ~1e-15 relative for
``x > 0`` and ~1e-13 relative for ``x < 0`` except close to the zeros of the
functions on the negative axis, where the reflection formula leaves an
absolute (not relative) error of a few ulp of the larger reflection term.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["erf", "erfc", "erf_inv", "lgamma", "digamma"]

_F64 = np.dtype(np.float64)
_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), _F64)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def _prepare(x):
    """Return (flat float64 array, output dtype, shape)."""
    a = np.asarray(x)
    dt = a.dtype
    if dt in _FLOAT_DTYPES:
        out_dt = dt
    elif dt.kind in "biu":
        out_dt = _F64
    else:
        raise TypeError(
            f"unsupported dtype {dt}; expected float16, float32 or float64")
    flat = np.asarray(a, dtype=np.float64).reshape(-1)
    return flat, out_dt, a.shape


def _finish(res, out_dt, shape):
    return res.reshape(shape).astype(out_dt, copy=False)


def _poly(t, coefs):
    """Horner evaluation of ``coefs[0] t^n + ... + coefs[n]`` (n >= 1)."""
    r = t * coefs[0]
    r += coefs[1]
    for c in coefs[2:]:
        r *= t
        r += c
    return r


def _poly_monic(t, coefs):
    """Horner evaluation of ``t^n + coefs[0] t^(n-1) + ... + coefs[n-1]``."""
    r = t + coefs[0]
    for c in coefs[1:]:
        r *= t
        r += c
    return r


# ---------------------------------------------------------------------------
# erf / erfc  (Cody 1969)
# ---------------------------------------------------------------------------

_THRESH = 0.46875
_SQRPI = 0.56418958354775628695  # 1/sqrt(pi)

# |x| < 0.46875: erf(x) = x * A(x^2) / B(x^2)
_A_NUM = (1.85777706184603153e-1, 3.16112374387056560e00,
          1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03)
_B_DEN = (2.36012909523441209e01, 2.44024637934444173e02,
          1.28261652607737228e03, 2.84423683343917062e03)

# 0.46875 <= x <= 4: erfc(x) = exp(-x^2) * erfcx(x), with erfcx evaluated by
# piecewise Taylor polynomials on 30 pieces of width 1/8 centred at
# c_j = (2j + 7)/16.  The Taylor coefficients follow exactly from the ODE
# erfcx' = 2 x erfcx - 2/sqrt(pi):
#     a_1 = 2 c a_0 - 2/sqrt(pi),   (k+1) a_{k+1} = 2 c a_k + 2 a_{k-1},
# starting from a_0 = erfcx(c_j) (given to 32 digits below); they are
# generated once at import time in exact rational arithmetic.
_ERFCX_A0 = (
    "6.4919325005386473948023569555138e-1", "5.8499862147496577762338678054397e-1",
    "5.3087087241755447460404566312917e-1", "4.8481082856162021662420793426316e-1",
    "4.452822731368816786059247755797e-1", "4.1109205444483048430181272942771e-1",
    "3.8130405896671789807662503477295e-1", "3.5517678649763414444212783080308e-1",
    "3.3211756272837233590908590602491e-1", "3.1164860864813005306751590233885e-1",
    "2.9338164876527723789389177229012e-1", "2.7699873067305275045376445978571e-1",
    "2.622376065503814388225336718258e-1", "2.4888049618416236122800473974155e-1",
    "2.367453787401462899469969207004e-1", "2.2567919160681938599933217555455e-1",
    "2.1555247915117748834033708326241e-1", "2.0625515238650089856201859661784e-1",
    "1.9769310614997297355038325113929e-1", "1.8978550290899462351241267218202e-1",
    "1.8246257834403471777359829218207e-1", "1.7566385800258433536151850459794e-1",
    "1.6933669983724776302380415854713e-1", "1.6343509664662231749545321558685e-1",
    "1.5791868699072760905978378239428e-1", "1.5275193425284749719565363904285e-1",
    "1.4790344203958999168146406647391e-1", "1.4334538069033210576901975732368e-1",
    "1.3905300477781452339694446098329e-1", "1.3500424547381067831080067145643e-1",
)
_TWO_OVER_SQRTPI_STR = "1.128379167095512573896158903121545171688"
_ERFCX_DEG = 12


def _make_erfcx_table():
    """Rows: a_0 (high part), a_0 (low part), a_1, ..., a_DEG; columns: pieces."""
    tsp = Fraction(_TWO_OVER_SQRTPI_STR)
    cols = []
    for j, a0s in enumerate(_ERFCX_A0):
        c = Fraction(2 * j + 7, 16)
        a = [Fraction(a0s)]
        a.append(2 * c * a[0] - tsp)
        for k in range(1, _ERFCX_DEG):
            a.append((2 * c * a[k] + 2 * a[k - 1]) / (k + 1))
        hi = float(a[0])
        cols.append([hi, float(a[0] - Fraction(hi))] + [float(v) for v in a[1:]])
    return np.ascontiguousarray(np.array(cols, dtype=np.float64).T)


_ERFCX_TABLE = _make_erfcx_table()

# x > 4: erfc(x) = exp(-x^2)/x * (1/sqrt(pi) - z P(z)/Q(z)),  z = 1/x^2
_P_NUM = (1.63153871373020978e-2, 3.05326634961232344e-1,
          3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4)
_Q_DEN = (2.56852019228982242e00, 1.87295284992346725e00,
          5.27905102951428412e-1, 6.05183413124413191e-2,
          2.33520497626869185e-3)

# erfc(x) == 0 in float64 for x >= 27.3; clamping avoids inf - inf.
_ERFC_CLAMP = 30.0
# Split point used to form exp(-y^2) exactly (see _exp_minus_sq).
_SPLIT = 1048576.0  # 2**20
# erfc(x) is below the smallest normal float64 for x > 26.55.
_ERFC_SUBNORMAL = 26.5
# erf(x) rounds to exactly 1.0 in float64 for x >= 5.93.
_ERF_ONE = 6.0


def _erf_small(x):
    """erf(x) for |x| < 0.46875 (sign and -0 preserved)."""
    t = x * x
    r = _poly(t, _A_NUM)
    r /= _poly_monic(t, _B_DEN)
    r *= x
    return r


def _exp_minus_sq(y, r):
    """Return ``r * exp(-y*y)`` for 0 <= y <= 30 without the error of
    rounding ``y*y`` (Cody's device, with a finer split): ``y*y = s*s + d``
    where ``s = trunc(y 2^20) / 2^20`` has at most 25 significant bits (so
    ``s*s`` is exact) and ``d = (y - s)(y + s)`` is tiny."""
    s = y * _SPLIT
    np.trunc(s, out=s)
    s *= 1.0 / _SPLIT
    d = y - s
    d *= y + s
    np.negative(d, out=d)
    np.exp(d, out=d)
    r *= d
    s *= s
    np.negative(s, out=s)
    np.exp(s, out=s)
    r *= s
    return r


def _erfc_mid(y):
    """erfc(y) for 0.46875 <= y <= 4 (NaN allowed)."""
    tab = _ERFCX_TABLE
    u = y * 8.0
    np.floor(u, out=u)
    np.fmax(u, 3.0, out=u)           # NaN -> piece 0 (the result stays NaN)
    np.fmin(u, len(_ERFCX_A0) + 2.0, out=u)   # y = 4 -> last piece
    j = u.astype(np.intp)
    j -= 3
    u *= 0.125
    u += 0.0625                      # centre of the piece
    np.subtract(y, u, out=u)         # exact (Sterbenz), |u| <= 1/16
    buf = np.empty_like(u)
    r = tab[-1].take(j)
    for k in range(len(tab) - 2, 1, -1):
        r *= u
        np.take(tab[k], j, out=buf, mode="clip")
        r += buf
    r *= u
    np.take(tab[1], j, out=buf, mode="clip")
    r += buf
    np.take(tab[0], j, out=buf, mode="clip")
    r += buf
    return _exp_minus_sq(y, r)


def _erfc_tail(y):
    """erfc(y) for y > 4 (inf and NaN allowed)."""
    y = np.minimum(y, _ERFC_CLAMP)   # NaN propagates
    z = y * y
    np.reciprocal(z, out=z)
    r = _poly(z, _P_NUM)
    r /= _poly_monic(z, _Q_DEN)
    r *= z
    np.subtract(_SQRPI, r, out=r)
    r /= y
    isub = np.flatnonzero(y > _ERFC_SUBNORMAL)
    if isub.size == 0:
        return _exp_minus_sq(y, r)
    # Results below the normal range: apply exp(-s*s) as two equal (normal)
    # factors, exp(-s*s/2) with s*s/2 exact, so that the subnormal result is
    # rounded only once.
    ys = y.take(isub)
    rs = r.take(isub)
    s = ys * _SPLIT
    np.trunc(s, out=s)
    s *= 1.0 / _SPLIT
    rs *= np.exp(-((ys - s) * (ys + s)))
    h = np.exp(-0.5 * (s * s))
    rs *= h
    rs *= h
    r = _exp_minus_sq(y, r)
    r[isub] = rs
    return r


def _erfc_big(y):
    """erfc(y) for y >= 0.46875, y = +inf or NaN (1-D float64)."""
    tail = y > 4.0
    it = np.flatnonzero(tail)
    if it.size == 0:                 # common case: no tail at all
        return _erfc_mid(y)
    if it.size == y.size:
        return _erfc_tail(y)
    out = np.empty_like(y)
    out[it] = _erfc_tail(y.take(it))
    im = np.flatnonzero(~tail)       # NaN goes to the mid branch: stays NaN
    out[im] = _erfc_mid(y.take(im))
    return out


def _split_small(x):
    """|x|, and the indices of |x| < 0.46875 and of the rest (incl. NaN)."""
    ax = np.abs(x)
    small = ax < _THRESH
    return ax, np.flatnonzero(small), np.flatnonzero(~small)


def _erf_flat(x):
    ax, i_s, i_b = _split_small(x)
    if i_b.size == 0:
        return _erf_small(x)
    out = np.empty_like(x)
    if i_s.size:
        out[i_s] = _erf_small(x.take(i_s))
    # erf(x) = sign(x) * (1 - erfc(|x|)); erf rounds to +-1 for |x| >= 5.93.
    ab = np.minimum(ax.take(i_b), _ERF_ONE)
    e = _erfc_big(ab)
    np.subtract(0.5, e, out=e)
    e += 0.5
    out[i_b] = np.copysign(e, x.take(i_b))
    return out


def _erfc_flat(x):
    ax, i_s, i_b = _split_small(x)
    if i_b.size == 0:
        return 1.0 - _erf_small(x)
    out = np.empty_like(x)
    if i_s.size:
        out[i_s] = 1.0 - _erf_small(x.take(i_s))
    xb = x.take(i_b)
    e = _erfc_big(ax.take(i_b))
    ineg = np.flatnonzero(xb < 0.0)  # erfc(-y) = 2 - erfc(y)
    if ineg.size:
        e[ineg] = 2.0 - e.take(ineg)
    out[i_b] = e
    return out


def erf(x):
    """Error function ``2/sqrt(pi) * int_0^x exp(-t^2) dt``.

    Same dtype and shape as ``x`` (float16/32/64); see the module docstring.
    """
    flat, dt, shape = _prepare(x)
    with np.errstate(all="ignore"):
        res = _erf_flat(flat)
        return _finish(res, dt, shape)


def erfc(x):
    """Complementary error function ``1 - erf(x)``, accurate in the tail.

    Same dtype and shape as ``x`` (float16/32/64); see the module docstring.
    """
    flat, dt, shape = _prepare(x)
    with np.errstate(all="ignore"):
        res = _erfc_flat(flat)
        return _finish(res, dt, shape)


# ---------------------------------------------------------------------------
# erf_inv  (Acklam initial approximation + one Halley step)
# ---------------------------------------------------------------------------

# Acklam's approximation of the standard normal quantile Phi^{-1}(p).
_ACK_A = (-3.969683028665376e+01, 2.209460984245205e+02,
          -2.759285104469687e+02, 1.383577518672690e+02,
          -3.066479806614716e+01, 2.506628277459239e+00)
_ACK_B = (-5.447609879822406e+01, 1.615858368580409e+02,
          -1.556989798598866e+02, 6.680131188771972e+01,
          -1.328068155288572e+01, 1.0)
_ACK_C = (-7.784894002430293e-03, -3.223964580411365e-01,
          -2.400758277161838e+00, -2.549732539343734e+00,
          4.374664141464968e+00, 2.938163982698783e+00)
_ACK_D = (7.784695709041462e-03, 3.224671290700398e-01,
          2.445134137142996e+00, 3.754408661907416e+00, 1.0)
_ACK_PLOW = 0.02425
_INV_SQRT2 = 0.7071067811865475244
_TWO_OVER_SQRTPI = 1.1283791670955125739


def _erf_inv_open(a):
    """erf_inv(a) for 0 <= a < 1 (1-D float64)."""
    z = np.empty_like(a)
    # Central region: p = (1 + a)/2 >= 1 - p_low, written with q = p - 1/2 = a/2.
    central = a <= 1.0 - 2.0 * _ACK_PLOW
    ac = a[central]
    r = ac * ac
    r *= 0.25
    z[central] = ac * (_poly(r, _ACK_A) / _poly(r, _ACK_B) * (0.5 * _INV_SQRT2))
    tailm = ~central
    if tailm.any():
        q = (1.0 - a[tailm]) * 0.5    # exact upper-tail probability
        s = np.sqrt(-2.0 * np.log(q))
        z[tailm] = -(_poly(s, _ACK_C) / _poly(s, _ACK_D)) * _INV_SQRT2
    # One Halley step on f(z) = erf(z) - a  (f'' = -2 z f').
    f = np.empty_like(a)
    lo = a <= 0.5
    f[lo] = _erf_flat(z[lo]) - a[lo]
    hi = ~lo
    if hi.any():
        f[hi] = (1.0 - a[hi]) - _erfc_flat(z[hi])   # 1 - a exact for a >= 1/2
    u = f / (_TWO_OVER_SQRTPI * np.exp(-(z * z)))
    z -= u / (1.0 + z * u)
    return z


def erf_inv(x):
    """Inverse error function on ``[-1, 1]``.

    ``erf_inv(+-1) = +-inf``; ``NaN`` for ``|x| > 1`` and for NaN.
    Same dtype and shape as ``x`` (float16/32/64).
    """
    flat, dt, shape = _prepare(x)
    with np.errstate(all="ignore"):
        a = np.abs(flat)
        inside = a < 1.0
        out = np.where(a == 1.0, np.inf, np.nan)
        if inside.any():
            out[inside] = _erf_inv_open(a[inside])
        res = np.copysign(out, flat)
        return _finish(res, dt, shape)


# ---------------------------------------------------------------------------
# lgamma
# ---------------------------------------------------------------------------

# Taylor coefficients of lgamma(2 + t) = sum_{k>=1} S_k t^k:
# S_1 = 1 - euler_gamma, S_k = (-1)^k (zeta(k) - 1) / k.  (Highest degree first.)
_LG_S = (
    0.42278433509846713, 0.3224670334241132, -0.0673523010531981,
    0.020580808427784546, -0.007385551028673986, 0.0028905103307415234,
    -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939,
    9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05,
    -9.439488275268397e-06, 4.374866789907488e-06, -2.039215753801366e-06,
    9.55141213040742e-07, -4.492469198764566e-07, 2.1207184805554665e-07,
    -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08,
    1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09,
    -1.1921401405860912e-09, 5.731367241678862e-10, -2.7595228851242334e-10,
    1.330476437424449e-10, -6.4229645638381e-11, 3.1044247747322276e-11,
    -1.5021384080754142e-11, 7.275974480239079e-12,
)[::-1]

# Stirling series: B_{2k} / (2k (2k-1)), k = 1..10 (highest k first).
_STIRLING = (
    -1.3924322169059011164, 0.17964437236883057316, -0.02955065359477124183,
    0.0064102564102564102564, -0.0019175269175269175269,
    0.00084175084175084175084, -0.0005952380952380952381,
    0.00079365079365079365079, -0.0027777777777777777778,
    0.083333333333333333333,
)
_HALF_LOG_2PI = 0.9189385332046728
_LOG_PI = 1.1447298858494002
_LG_STIRLING_MIN = 8.0
_POLE_FREE = 4503599627370496.0  # 2**52: every float with |x| >= this is an integer


def _lg_s(t):
    """lgamma(2 + t) for |t| <= 0.5 (t * polynomial: exact zero at t = 0)."""
    return t * _poly(t, _LG_S)


def _lgamma_pos(x):
    """lgamma(x) for x > 0 or x = +inf (1-D float64)."""
    out = np.empty_like(x)
    # large: Stirling
    m = x >= _LG_STIRLING_MIN
    if m.any():
        xl = x[m]
        z = 1.0 / xl
        w = z * z
        ser = _poly(w, _STIRLING) * z
        out[m] = ((xl - 0.5) * (np.log(xl) - 1.0) + (_HALF_LOG_2PI - 0.5)) + ser
    # 1.5 <= x < 8: recurrence down to [1.5, 2.5)
    m = (x >= 1.5) & (x < _LG_STIRLING_MIN)
    if m.any():
        xm = x[m]
        n = np.floor(xm - 1.5)
        t = xm - 2.0 - n               # exact
        prod = np.ones_like(xm)
        for i in range(1, 7):
            prod *= np.where(n >= i, xm - i, 1.0)
        out[m] = _lg_s(t) + np.log(prod)
    # 0.5 <= x < 1.5: lgamma(x) = lgamma(x + 1) - log(x)
    m = (x >= 0.5) & (x < 1.5)
    if m.any():
        t = x[m] - 1.0                 # exact
        out[m] = _lg_s(t) - np.log1p(t)
    # 0 < x < 0.5: lgamma(x) = lgamma(x + 2) - log(x + 1) - log(x)
    m = x < 0.5
    if m.any():
        xs = x[m]
        out[m] = (_lg_s(xs) - np.log1p(xs)) - np.log(xs)
    return out


def _sinpi_abs(x):
    """|sin(pi x)| with exact argument reduction."""
    ax = np.abs(x)
    f = ax - np.floor(ax)              # exact, in [0, 1)
    f = np.minimum(f, 1.0 - f)         # in [0, 0.5]
    return np.sin(np.pi * f)


def _lgamma_flat(x):
    out = np.empty_like(x)
    pos = x > 0.0
    out[pos] = _lgamma_pos(x[pos])
    neg = x < 0.0
    if neg.any():
        xn = x[neg]
        pole = xn == np.floor(xn)      # negative integers and -inf
        res = np.full_like(xn, np.inf)
        ok = ~pole
        if ok.any():
            xo = xn[ok]
            ax = -xo
            res[ok] = (_LOG_PI - np.log(_sinpi_abs(xo) * ax)) - _lgamma_pos(ax)
        out[neg] = res
    out[x == 0.0] = np.inf
    nan = np.isnan(x)
    out[nan] = x[nan]
    return out


def lgamma(x):
    """``log|Gamma(x)|`` for real ``x``.

    Poles (``0, -0, -1, -2, ...``) give ``+inf``; ``lgamma(+-inf) = +inf``;
    NaN -> NaN.  Same dtype and shape as ``x`` (float16/32/64).
    """
    flat, dt, shape = _prepare(x)
    with np.errstate(all="ignore"):
        res = _lgamma_flat(flat)
        return _finish(res, dt, shape)


# ---------------------------------------------------------------------------
# digamma
# ---------------------------------------------------------------------------

# Positive zero of digamma as a double-double.
_PSI_X0_HI = 1.4616321449683622
_PSI_X0_LO = 9.549995429965697e-17

# Taylor coefficients (in t = x - 2) of psi(2 + t) / (t - t0), t0 = x0 - 2.
# (Highest degree first after the reversal.)
_PSI_P = (
    0.7853075386041053, -0.2607389546830014, 0.1089999170176284,
    -0.04955103291767398, 0.023447309597565465, -0.011338432553254141,
    0.0055522541760143805, -0.0027395728855010622, 0.0013581421189715706,
    -0.000675313334099637, 0.00033643303233535095, -0.00016781551532639953,
    8.37757442729561e-05, -4.184426875361533e-05, 2.0907697852676147e-05,
    -1.0449060788916702e-05, 5.222940271669262e-06, -2.610941558884154e-06,
    1.305294949842276e-06, -6.525889550906296e-07, 3.262749933175349e-07,
    -1.6313100748676914e-07, 8.156334207375286e-08, -4.0780950826276905e-08,
    2.0390235429229937e-08, -1.019503774151291e-08, 5.09749221843159e-09,
    -2.5487372264499276e-09, 1.2743656526383071e-09, -6.371818395406985e-10,
    3.1859059086512636e-10, -1.5929518580271865e-10, 7.964755635938476e-11,
    -3.982376599936084e-11, 1.9911878939651547e-11, -9.955938116503222e-12,
    4.977968607149195e-12, -2.4889841532084003e-12, 1.244492026482453e-12,
    -6.222459965340573e-13, 3.111229926979921e-13, -1.5556149449265554e-13,
    7.778074662754884e-14, -3.8890373107515085e-14, 1.944518648500451e-14,
    -9.722593219584597e-15, 4.861296602153084e-15, -2.4306482985301384e-15,
    1.2153241484162683e-15, -6.076620739252006e-16, 3.038310368682891e-16,
    -1.5191551840270752e-16, 7.595775919087474e-17, -3.797887959194436e-17,
    1.8989439794807847e-17, -9.494719897015811e-18, 4.747359948378536e-18,
    -2.3736799741461443e-18, 1.1868399870586976e-18, -5.934199935245573e-19,
    2.9670999676068146e-19, -1.4835499837980836e-19,
)[::-1]

# Asymptotic series: B_{2k} / (2k), k = 1..8 (highest k first).
_PSI_ASYM = (
    -0.44325980392156862745, 0.083333333333333333333,
    -0.021092796092796092796, 0.0075757575757575757576,
    -0.0041666666666666666667, 0.003968253968253968254,
    -0.0083333333333333333333, 0.083333333333333333333,
)
_PSI_ASYM_MIN = 10.0


def _psi_base(y):
    """digamma(y) for 1 <= y <= 2.5 (y - 2 exact)."""
    return ((y - _PSI_X0_HI) - _PSI_X0_LO) * _poly(y - 2.0, _PSI_P)


def _digamma_pos(x):
    """digamma(x) for x > 0 or x = +inf (1-D float64)."""
    out = np.empty_like(x)
    m = x >= _PSI_ASYM_MIN
    if m.any():
        xl = x[m]
        w = 1.0 / (xl * xl)
        out[m] = (np.log(xl) - 0.5 / xl) - w * _poly(w, _PSI_ASYM)
    m = (x >= 2.5) & (x < _PSI_ASYM_MIN)
    if m.any():
        xm = x[m]
        n = np.floor(xm - 1.5)          # 1..8
        acc = _psi_base(xm - n)         # xm - n exact, in [1.5, 2.5)
        for i in range(1, 9):
            acc += np.where(n >= i, 1.0 / (xm - i), 0.0)
        out[m] = acc
    m = (x >= 1.0) & (x < 2.5)
    if m.any():
        out[m] = _psi_base(x[m])
    m = x < 1.0
    if m.any():
        xs = x[m]
        out[m] = _psi_base(xs + 1.0) - 1.0 / xs
    return out


def _digamma_flat(x):
    out = np.empty_like(x)
    pos = x > 0.0
    out[pos] = _digamma_pos(x[pos])
    neg = x < 0.0
    if neg.any():
        xn = x[neg]
        pole = xn == np.floor(xn)       # negative integers and -inf
        res = np.full_like(xn, np.nan)
        ok = ~pole
        if ok.any():
            xo = xn[ok]
            r = xo - np.round(xo)       # exact, in [-0.5, 0.5]
            pr = np.pi * r
            cot = np.cos(pr) / np.sin(pr)
            res[ok] = _digamma_pos(1.0 - xo) - np.pi * cot
        out[neg] = res
    zero = x == 0.0
    out[zero] = -np.copysign(np.inf, x[zero])
    nan = np.isnan(x)
    out[nan] = x[nan]
    return out


def digamma(x):
    """Digamma function ``psi(x) = d/dx log Gamma(x)`` for real ``x``.

    ``digamma(+0) = -inf``, ``digamma(-0) = +inf``; NaN at negative integers
    and ``-inf``; ``digamma(+inf) = +inf``; NaN -> NaN (scipy.special.psi
    conventions).  Same dtype and shape as ``x`` (float16/32/64).
    """
    flat, dt, shape = _prepare(x)
    with np.errstate(all="ignore"):
        res = _digamma_flat(flat)
        return _finish(res, dt, shape)

