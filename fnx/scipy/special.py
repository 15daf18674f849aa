"""``fnx.scipy.special``: SciPy's special functions over fnx arrays, with derivatives.

Names and signatures follow ``scipy.special`` (and JAX's ``jax.scipy.special``).
Integer inputs are promoted to the default float. Values and derivatives stay
finite wherever the mathematical ones are: ``xlogy(0, y)`` is 0 with derivative 0 in
``y``, ``log_ndtr`` uses an asymptotic series far in its left tail, and branches that
``where`` discards are given safe operands.

Functions without a closed form in ``fnx.lax`` ops are primitives defined here (through
``fnx.extend``), each with a NumPy impl in ``fnx.scipy._special_impl`` (float64 inside,
rounded once to the input's dtype) and jvp rules written with fnx ops: ``gammainc``,
``gammaincc`` (derivatives in ``a`` and ``x``), ``betainc`` (in ``x``; in ``a``/``b`` it
raises, as JAX), ``betaln``, ``erfcx``, ``i0e``, ``i1e``, ``zeta``, ``expn``/``exp1``,
``expi``, ``spence``, ``dawsn``, ``sici``, ``fresnel``, ``hyp1f1``, ``owens_t`` and
``bessel_jn``, and the complex ``wofz``. They run eagerly, under ``jit`` (the generated code calls the impl),
``vmap`` and both modes of differentiation. Where JAX's values are wrong or NaN and
SciPy's are right (``bessel_jn`` for small or large ``z``, ``expn(n, 0)``, ``exp1(inf)``,
``expi(0)``, ``gamma`` near integers), fnx gives SciPy's. ``sph_harm_y`` is a composition (orthonormal Legendre recurrences up to
a static ``n_max``). ``hyp2f1`` covers real ``x <= 1`` (JAX: inf below -1).
"""
from __future__ import annotations

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..core.array import Tracer
from ..nn.functions import log_sigmoid as _log_sigmoid
from ..nn.functions import log_softmax as _log_softmax
from ..nn.functions import logsumexp
from ..nn.functions import softmax as _softmax
from ..numpy.util import promote, promote_broadcast
from ..lax.rule_helpers import broadcast_ranked
from ..extend import Primitive, ShapeDtypeStruct, ShapeError, batch_elementwise, defjvp
from ..transforms.custom import custom_jvp
from . import _special_impl as _impl

__all__ = ["logsumexp", "erf", "erfc", "erfinv", "gammaln", "digamma", "polygamma", "xlogy",
           "xlog1py", "logit", "expit", "log_expit", "ndtr", "log_ndtr", "ndtri", "entr",
           "softmax", "log_softmax", "erfcx", "i0e", "i1e", "i0", "i1", "zeta", "gammainc",
           "gammaincc", "betainc", "betaln", "beta", "gamma", "gammasgn", "loggamma",
           "multigammaln", "factorial", "kl_div", "rel_entr", "expn", "exp1", "expi", "poch",
           "comb", "boxcox", "boxcox1p", "bernoulli", "bessel_jn", "spence", "dawsn", "sici",
           "fresnel", "hyp1f1", "owens_t", "wofz", "sph_harm_y", "hyp2f1"]


def _float(name, *xs):
    return promote(name, *xs, to_inexact=True)


def _const(v, like):
    """``v`` broadcast to the shape and dtype of ``like``."""
    return lax.full_like(like, v)


def _promote_broadcast(name, *xs):
    """``xs`` promoted to one inexact dtype and broadcast to one shape (a ShapeError
    naming ``name`` where they do not broadcast)."""
    return promote_broadcast(name, *xs, to_inexact=True)


def erf(x):
    (x,) = _float("erf", x)
    return lax.erf(x)


def erfc(x):
    (x,) = _float("erfc", x)
    return lax.erfc(x)


def erfinv(x):
    (x,) = _float("erfinv", x)
    return lax.erf_inv(x)


def gammaln(x):
    """``log|Gamma(x)|``."""
    (x,) = _float("gammaln", x)
    return lax.lgamma(x)


def digamma(x):
    (x,) = _float("digamma", x)
    return lax.digamma(x)


def polygamma(n, x):
    """The ``n``-th derivative of digamma at ``x`` (``n``: non-negative integers)."""
    n, x = _promote_broadcast("polygamma", n, x)
    return lax.polygamma(n, x)


def expit(x):
    """The logistic function ``1 / (1 + exp(-x))``."""
    (x,) = _float("expit", x)
    return lax.logistic(x)


def log_expit(x):
    """``log(expit(x)) = -log(1 + exp(-x))`` without overflow."""
    (x,) = _float("log_expit", x)
    return _log_sigmoid(x)


def logit(x):
    """``log(x / (1 - x))``, the inverse of ``expit``."""
    (x,) = _float("logit", x)
    return fnp.log(x) - fnp.log1p(-x)


@custom_jvp
def _xlogy(x, y):
    nz = (x != 0) | fnp.isnan(y)    # a NaN y propagates at x == 0 too, as SciPy and JAX
    return fnp.where(nz, x * fnp.log(fnp.where(nz, y, _const(1, y))), _const(0, x))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    # x / y, with y taken as 1 where x == y == 0: the derivative in y is 0 wherever x is
    # (finite at the origin, where JAX's is NaN), and still differentiable in x (1 / y)
    y1 = fnp.where((x == 0) & (y == 0), _const(1, y), y)
    return _xlogy(x, y), tx * fnp.log(y) + ty * (x / y1)


def xlogy(x, y):
    """``x * log(y)``, 0 where ``x == 0`` (even where ``y == 0``). Derivatives, as JAX:
    ``log(y)`` in ``x``; ``x / y`` in ``y``, which is 0 where ``x == 0``, at ``y == 0`` too
    (JAX: NaN there)."""
    return _xlogy(*_promote_broadcast("xlogy", x, y))


@custom_jvp
def _xlog1py(x, y):
    nz = (x != 0) | fnp.isnan(y)    # a NaN y propagates at x == 0 too, as SciPy and JAX
    return fnp.where(nz, x * fnp.log1p(fnp.where(nz, y, _const(0, y))), _const(0, x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    y1 = fnp.where((x == 0) & (y == -1), _const(0, y), y)   # as in xlogy's rule
    return _xlog1py(x, y), tx * fnp.log1p(y) + ty * (x / (1 + y1))


def xlog1py(x, y):
    """``x * log1p(y)``, 0 where ``x == 0`` (even where ``y == -1``); derivatives as
    ``xlogy``'s."""
    return _xlog1py(*_promote_broadcast("xlog1py", x, y))


@custom_jvp
def _entr(x):
    pos = x > 0
    safe = fnp.where(pos, x, _const(1, x))
    return fnp.where(pos, -x * fnp.log(safe), fnp.where(x == 0, _const(0, x),
                                                         _const(-np.inf, x)))


@_entr.defjvp
def _entr_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _entr(x), -(fnp.log(x) + 1) * t


def entr(x):
    """``-x log(x)`` for ``x > 0``, 0 at 0, ``-inf`` for ``x < 0`` (derivative
    ``-(log(x) + 1)``)."""
    (x,) = _float("entr", x)
    return _entr(x)


def ndtr(x):
    """The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2``: through ``erfc`` in both
    tails, which keeps their small values accurate."""
    (x,) = _float("ndtr", x)
    z = x * float(1 / np.sqrt(2))
    small = fnp.abs(z) < float(1 / np.sqrt(2))
    tail = fnp.where(z > 0, 2 - lax.erfc(z), lax.erfc(-z))
    return 0.5 * fnp.where(small, 1 + lax.erf(z), tail)


def _log_ndtr_series(x):
    """``log Phi(x)`` for ``x`` far below 0: ``log(phi(x) / -x) + log(S)`` with the
    asymptotic series ``S = 1 - 1/x^2 + 3/x^4 - 15/x^6 + ...`` (5 terms)."""
    r = 1 / (x * x)
    s, term = _const(1, x), _const(1, x)
    for k in range(1, 6):
        term = term * (-(2 * k - 1)) * r
        s = s + term
    return -0.5 * x * x - fnp.log(-x) - float(0.5 * np.log(2 * np.pi)) + fnp.log(s)


def log_ndtr(x):
    """``log(ndtr(x))``, accurate and with finite derivatives in both tails: for
    ``x > 0`` it is ``log1p(-ndtr(-x))``; far in the left tail (below -20 in float64,
    -7 in float32), where ``ndtr`` underflows, the asymptotic series."""
    (x,) = _float("log_ndtr", x)
    # float32: below about -9, 1 / ndtr(x)^2 (in the second derivative) overflows
    lower = -20.0 if x.dtype == np.float64 else -7.0
    far = x < lower
    pos = x > 0
    mid = fnp.where(far, _const(lower, x), fnp.where(pos, _const(0, x), x))
    right = fnp.where(pos, x, _const(0, x))
    left = fnp.where(far, x, _const(lower, x))
    return fnp.where(far, _log_ndtr_series(left),
                     fnp.where(pos, fnp.log1p(-ndtr(-right)), fnp.log(ndtr(mid))))


_NDTRI_TAIL = 0.05   # below this distance from 0 or 1, ndtri is solved in log space


@custom_jvp
def _ndtri(p):
    central = float(np.sqrt(2)) * lax.erf_inv(2 * p - 1)
    # Tails: 2p - 1 rounds to -1 long before p underflows (float32: p < 3e-8 gave -inf).
    # Solve log_ndtr(x) = log(t), t = min(p, 1 - p), by Newton from the asymptotic
    # x0 = -sqrt(-2 log t - log(-2 log t) - log(2 pi)); four steps reach the dtype's
    # precision from t = 0.05 down to the smallest normal numbers.
    t = fnp.minimum(p, 1 - p)
    inside = (t > 0) & (t < _NDTRI_TAIL)
    t = fnp.where(inside, t, _const(_NDTRI_TAIL, t))
    log_t = fnp.log(t)
    u = -2 * log_t
    x = -fnp.sqrt(u - fnp.log(u) - float(np.log(2 * np.pi)))
    for _ in range(4):
        log_pdf = -0.5 * x * x - float(0.5 * np.log(2 * np.pi))
        ln = log_ndtr(x)
        x = x - (ln - log_t) / fnp.exp(log_pdf - ln)
    tail = fnp.where(p < 0.5, x, -x)
    # p == 0 and 1 are erf_inv's -1 and 1: central is -inf and inf there (no inf constant,
    # which jax_debug_infs would report for every p, as JAX does not)
    return fnp.where(inside, tail, central)


@_ndtri.defjvp
def _ndtri_jvp(primals, tangents):
    (p,), (tp,) = primals, tangents
    x = _ndtri(p)
    # 1 / phi(x) = sqrt(2 pi) exp(x^2 / 2)
    return x, tp * (float(np.sqrt(2 * np.pi)) * fnp.exp(0.5 * x * x))


def ndtri(p):
    """The inverse of ``ndtr``: ``sqrt(2) erfinv(2 p - 1)`` in the middle; within 0.05 of
    0 or 1 a Newton solve of ``log_ndtr(x) = log(min(p, 1 - p))``, accurate down to the
    smallest normal ``p`` (``2p - 1`` loses every digit of a tiny ``p``). -inf at 0, inf
    at 1, NaN outside [0, 1]. The derivative is ``1 / phi(ndtri(p))``."""
    (p,) = _float("ndtri", p)
    return _ndtri(p)


def softmax(x, axis=None):
    """``scipy.special.softmax``: over all axes by default."""
    return _softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """``scipy.special.log_softmax``: over all axes by default."""
    return _log_softmax(x, axis=axis)


# --- primitives with NumPy impls (fnx.scipy._special_impl) and their derivatives ----------

def _is_real_float(dtype):
    return dtypes.is_inexact(dtype) and np.dtype(dtype).kind != "c"


def _elementwise_prim(name, impl, nargs):
    """An elementwise primitive over ``nargs`` float operands of one dtype and shape, where
    a rank-0 operand stands for a full one (the public functions promote and broadcast
    first; vmap keeps unbatched scalars rank-0)."""
    def shape_rule(*xs):
        x0 = max(xs, key=lambda x: len(x.shape))
        if any((x.shape and x.shape != x0.shape) or x.dtype != x0.dtype for x in xs) \
                or not _is_real_float(x0.dtype):
            raise ShapeError(f"{name}: operands must be floating with one shape and dtype; got "
                             + ", ".join(f"{x.dtype}{list(x.shape)}" for x in xs)
                             + f". Call fnx.scipy.special.{name}, which promotes and "
                             "broadcasts.")
        return ShapeDtypeStruct(x0.shape, x0.dtype, all(x.weak_type for x in xs))
    prim = Primitive(name, shape_rule=shape_rule, impl=impl)
    batch_elementwise(prim)
    return prim


erfcx_p = _elementwise_prim("erfcx", _impl.erfcx, 1)
i0e_p = _elementwise_prim("i0e", _impl.i0e, 1)
i1e_p = _elementwise_prim("i1e", _impl.i1e, 1)
zeta_p = _elementwise_prim("zeta", _impl.zeta, 2)
zeta_grad_s_p = _elementwise_prim("zeta_grad_s", _impl.zeta_grad_s, 2)
gammainc_p = _elementwise_prim("gammainc", _impl.gammainc, 2)
gammaincc_p = _elementwise_prim("gammaincc", _impl.gammaincc, 2)
gammainc_grad_a_p = _elementwise_prim("gammainc_grad_a", _impl.gammainc_grad_a, 2)
betainc_p = _elementwise_prim("betainc", _impl.betainc, 3)
betaln_p = _elementwise_prim("betaln", _impl.betaln, 2)
expn_p = _elementwise_prim("expn", _impl.expn, 2)
expi_p = _elementwise_prim("expi", _impl.expi, 1)
spence_p = _elementwise_prim("spence", _impl.spence, 1)
dawsn_p = _elementwise_prim("dawsn", _impl.dawsn, 1)

_INV_SQRT_PI_2 = float(2 / np.sqrt(np.pi))

def _expn_order_jvp(g, ans, n, x):
    raise ValueError("expn: the derivative with respect to the order n is not defined (n is "
                     "an integer); wrap n in fnx.lax.stop_gradient")


def _expn_x_jvp(g, ans, n, x):
    # E_n' = -E_(n-1) for n >= 1; E_0 = e^-x / x has E_0' = -e^-x (x + 1) / x^2
    lower = expn_p.bind(fnp.maximum(n - 1, 0.0), x)
    zeroth = fnp.exp(-x) * (x + 1) / (x * x)
    return -g * fnp.where(n >= 1, lower, zeroth)


defjvp(expn_p, _expn_order_jvp, _expn_x_jvp)
defjvp(expi_p, lambda g, ans, x: g * fnp.exp(x) / x)
defjvp(dawsn_p, lambda g, ans, x: g * (1 - 2 * x * ans))


def _spence_jvp(g, ans, z):
    # d/dz Li2(1 - z) = log(z) / (1 - z) = -(1 - u/2 + u^2/3 - ...), u = z - 1, the series
    # near z = 1 (so that higher derivatives are right there too)
    near = fnp.abs(z - 1) < 0.01
    u = fnp.where(near, z - 1, _const(0, z))
    series = _const(0, z)
    for k in range(9, 0, -1):
        series = series * (-u) + (1.0 / k)
    zs = fnp.where(near, _const(2, z), z)
    return g * fnp.where(near, -series, fnp.log(zs) / (1 - zs))


defjvp(spence_p, _spence_jvp)

defjvp(betaln_p, lambda g, ans, a, b: g * (lax.digamma(a) - lax.digamma(a + b)),
       lambda g, ans, a, b: g * (lax.digamma(b) - lax.digamma(a + b)))

defjvp(erfcx_p, lambda g, ans, x: g * (2 * x * ans - _INV_SQRT_PI_2))
defjvp(i0e_p, lambda g, ans, x: g * (i1e_p.bind(x) - fnp.sign(x) * ans))


def _i1e_jvp(g, ans, x):
    zero = x == 0
    safe = fnp.where(zero, _const(1, x), x)
    d = i0e_p.bind(x) - ans * (fnp.sign(x) + 1 / safe)
    return g * fnp.where(zero, _const(0.5, x), d)


defjvp(i1e_p, _i1e_jvp)


defjvp(zeta_p, lambda g, ans, s, q: g * zeta_grad_s_p.bind(s, q),
       lambda g, ans, s, q: g * (-s) * zeta_p.bind(s + 1, q))


def _zeta_ss_jvp(g, ans, s, q):
    raise ValueError("zeta: second derivatives with respect to the exponent x are not "
                     "implemented (first derivatives in x, and all in q, are)")


# d/dq d/ds zeta(s, q) = d/ds (-s zeta(s + 1, q))
defjvp(zeta_grad_s_p, _zeta_ss_jvp,
       lambda g, ans, s, q: -g * (zeta_p.bind(s + 1, q) + s * zeta_grad_s_p.bind(s + 1, q)))


def _log_gamma_density(a, x):
    """log of x^(a-1) e^-x / Gamma(a), the derivative of P(a, x) in x (0 where x = 0 < a - 1)."""
    return xlogy(a - 1, x) - x - lax.lgamma(a)


defjvp(gammainc_p, lambda g, ans, a, x: g * gammainc_grad_a_p.bind(a, x),
       lambda g, ans, a, x: g * fnp.exp(_log_gamma_density(a, x)))
defjvp(gammaincc_p, lambda g, ans, a, x: -(g * gammainc_grad_a_p.bind(a, x)),
       lambda g, ans, a, x: -(g * fnp.exp(_log_gamma_density(a, x))))


def _gammainc_grad_aa(g, ans, a, x):
    raise ValueError("gammainc: second derivatives with respect to a are not implemented "
                     "(first derivatives in a, and all derivatives in x, are)")


defjvp(gammainc_grad_a_p, _gammainc_grad_aa,
       lambda g, ans, a, x: g * fnp.exp(_log_gamma_density(a, x))
       * (fnp.log(x) - lax.digamma(a)))


def _betainc_ab_jvp(g, ans, a, b, x):
    raise ValueError("betainc: derivatives with respect to a and b are not implemented (as "
                     "in JAX); differentiate with respect to x, or wrap a and b in "
                     "fnx.lax.stop_gradient")


defjvp(betainc_p, _betainc_ab_jvp, _betainc_ab_jvp,
       lambda g, ans, a, b, x: g * fnp.exp(xlogy(a - 1, x) + xlog1py(b - 1, -x)
                                           - betaln(a, b)))


def erfcx(x):
    """The scaled complementary error function ``exp(x^2) erfc(x)``, accurate where
    ``erfc`` underflows (``erfcx(x) ~ 1 / (x sqrt(pi))`` for large ``x``)."""
    (x,) = _float("erfcx", x)
    return erfcx_p.bind(x)


def i0e(x):
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``."""
    (x,) = _float("i0e", x)
    return i0e_p.bind(x)


def i1e(x):
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``."""
    (x,) = _float("i1e", x)
    return i1e_p.bind(x)


def i0(x):
    """The modified Bessel function of order 0, ``I0(x)`` (inf past about 713 in float64)."""
    (x,) = _float("i0", x)
    return fnp.exp(fnp.abs(x)) * i0e_p.bind(x)


def i1(x):
    """The modified Bessel function of order 1, ``I1(x)``."""
    (x,) = _float("i1", x)
    return fnp.exp(fnp.abs(x)) * i1e_p.bind(x)


def zeta(x, q=None):
    """The Hurwitz zeta function ``sum_k (k + q)^-x`` (``x > 1``; NaN for ``x < 1``, inf at
    ``x = 1`` and at the poles ``q = 0, -1, ...``). ``q=None`` gives the Riemann zeta
    function ``zeta(x, 1)`` (JAX raises there). Differentiable in ``q`` (to any order)
    and once in ``x``."""
    if q is None:
        q = 1
    x, q = _promote_broadcast("zeta", x, q)
    return zeta_p.bind(x, q)


def gammainc(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)`` (``a >= 0``,
    ``x >= 0``; NaN elsewhere), differentiable in ``x`` and (once) in ``a``."""
    a, x = _promote_broadcast("gammainc", a, x)
    return gammainc_p.bind(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, computed
    directly (accurate where it is small)."""
    a, x = _promote_broadcast("gammaincc", a, x)
    return gammaincc_p.bind(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)`` (``a, b >= 0``,
    ``0 <= x <= 1``; NaN elsewhere), differentiable in ``x`` (in ``a`` and ``b`` it raises,
    as in JAX)."""
    a, b, x = _promote_broadcast("betainc", a, b, x)
    return betainc_p.bind(a, b, x)


def betaln(a, b):
    """``log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)``, the sum formed in
    float64 and rounded once (float32 keeps full relative accuracy)."""
    a, b = _promote_broadcast("betaln", a, b)
    return betaln_p.bind(a, b)


def gammasgn(x):
    """The sign of the gamma function: 1 for ``x > 0`` (and ``+0``), ``-1`` for ``-0``,
    ``(-1)^ceil(-x)`` between the negative poles, NaN at the poles ``-1, -2, ...``, at
    ``-inf`` and for NaN (JAX's values)."""
    (x,) = _float("gammasgn", x)
    pole = (x < 0) & (x == fnp.floor(x))
    odd = fnp.fmod(fnp.floor(-x), 2) == 0          # floor(-x) even -> negative Gamma
    neg = fnp.where(odd, _const(-1, x), _const(1, x))
    sgn = fnp.where(x > 0, _const(1, x), fnp.where(x == 0, fnp.where(fnp.signbit(x),
                    _const(-1, x), _const(1, x)), neg))
    return fnp.where(pole | fnp.isnan(x), _const(np.nan, x), sgn)


def gamma(x):
    """The gamma function, ``gammasgn(x) * exp(gammaln(x))``."""
    (x,) = _float("gamma", x)
    return gammasgn(x) * fnp.exp(lax.lgamma(x))


def loggamma(x):
    """``log(gamma(x))`` for real ``x``: ``gammaln`` for ``x >= 0``, NaN for ``x < 0``
    (where gamma may be negative), as ``scipy.special.loggamma`` on reals."""
    (x,) = _float("loggamma", x)
    return fnp.where(x < 0, _const(np.nan, x), lax.lgamma(x))


def beta(a, b):
    """The beta function ``B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)`` with its sign."""
    a, b = _promote_broadcast("beta", a, b)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * fnp.exp(betaln(a, b))


def multigammaln(a, d):
    """The multivariate log-gamma function of dimension ``d`` (a static positive int)."""
    d = int(d)
    if d < 1:
        raise ValueError(f"multigammaln: d must be a positive integer, got {d}")
    (a,) = _float("multigammaln", a)
    js = lax.broadcast_in_dim(fnp.arange(d, dtype=a.dtype) / 2, a.shape + (d,), (a.ndim,))
    terms = lax.lgamma(fnp.expand_dims(a, -1) - js)
    return fnp.sum(terms, axis=-1) + float(d * (d - 1) / 4 * np.log(np.pi))


def factorial(n, exact=False):
    """``n!`` as ``gamma(n + 1)`` (0 for ``n < 0``, as SciPy). ``exact=True`` is not
    supported (JAX neither): it raises."""
    if exact:
        raise NotImplementedError("factorial: exact=True is not supported (as in JAX); use "
                                  "math.factorial on Python ints")
    (n,) = _float("factorial", n)
    return fnp.where(n < 0, _const(0, n), fnp.exp(lax.lgamma(n + 1)))


def rel_entr(p, q):
    """``p log(p / q)`` for ``p, q > 0``, 0 where ``p == 0 <= q``, inf elsewhere."""
    p, q = _promote_broadcast("rel_entr", p, q)
    both = (p > 0) & (q > 0)
    safe_q = fnp.where(both, q, _const(1, q))
    safe_p = fnp.where(both, p, _const(1, p))
    val = safe_p * (fnp.log(safe_p) - fnp.log(safe_q))
    return fnp.where(both, val, fnp.where((p == 0) & (q >= 0), _const(0, p),
                                          _const(np.inf, p)))


def kl_div(p, q):
    """``p log(p / q) - p + q`` for ``p, q > 0``; ``q`` where ``p == 0 <= q``; inf
    elsewhere."""
    p, q = _promote_broadcast("kl_div", p, q)
    both = (p > 0) & (q > 0)
    return fnp.where(both, rel_entr(p, q) - p + q,
                     fnp.where((p == 0) & (q >= 0), q, _const(np.inf, p)))


def expn(n, x):
    """The generalized exponential integral ``E_n(x) = int_1^inf e^(-x t) / t^n dt`` for
    integer ``n >= 0`` and ``x >= 0`` (NaN elsewhere); SciPy's values at the edges
    (``E_n(0) = 1 / (n - 1)`` for ``n > 1``, where JAX's differ). Differentiable in ``x``:
    ``-E_(n-1)(x)``."""
    n, x = _promote_broadcast("expn", n, x)
    return expn_p.bind(n, x)


def exp1(x):
    """The exponential integral ``E_1(x)`` (``x >= 0``; NaN for ``x < 0``, where it is
    complex; 0 at inf, where JAX gives NaN)."""
    (x,) = _float("exp1", x)
    return expn_p.bind(fnp.ones_like(x), x)


def expi(x):
    """The exponential integral ``Ei(x)`` (principal value); ``-inf`` at 0 (JAX: NaN).
    Derivative ``e^x / x``."""
    (x,) = _float("expi", x)
    return expi_p.bind(x)


def poch(z, m):
    """The Pochhammer symbol ``(z)_m = Gamma(z + m) / Gamma(z)``, with its sign; 1 where
    ``m == 0``."""
    z, m = _promote_broadcast("poch", z, m)
    none = m == 0
    zs = fnp.where(none, _const(1, z), z)
    ms = fnp.where(none, _const(1, m), m)
    mag = fnp.exp(lax.lgamma(zs + ms) - lax.lgamma(zs))
    return fnp.where(none, _const(1, z), gammasgn(zs + ms) * gammasgn(zs) * mag)


def comb(N, k, *, repetition=False):
    """The binomial coefficient ``C(N, k)`` as a float (through ``gammaln``); 0 where
    ``k < 0``, ``k > N`` or ``N < 0``. ``repetition``: combinations with repetition,
    ``C(N + k - 1, k)``."""
    N, k = _promote_broadcast("comb", N, k)
    if repetition:
        N = N + k - 1
    ok = (k >= 0) & (k <= N) & (N >= 0)
    kk = fnp.where(ok, k, _const(0, k))
    NN = fnp.where(ok, N, _const(0, N))
    val = fnp.exp(lax.lgamma(NN + 1) - lax.lgamma(kk + 1) - lax.lgamma(NN - kk + 1))
    return fnp.where(ok, val, _const(0, N))


def boxcox(x, lmbda):
    """The Box-Cox transform ``(x^l - 1) / l`` (``log x`` at ``l = 0``), as
    ``expm1(l log x) / l``, accurate for small ``l``."""
    x, lmbda = _promote_broadcast("boxcox", x, lmbda)
    return _boxcox_of_log(fnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """``boxcox(1 + x, lmbda)`` accurate for small ``x``."""
    x, lmbda = _promote_broadcast("boxcox1p", x, lmbda)
    return _boxcox_of_log(fnp.log1p(x), lmbda)


def _boxcox_of_log(log_x, lmbda):
    zero = lmbda == 0
    safe = fnp.where(zero, _const(1, lmbda), lmbda)
    return fnp.where(zero, log_x, fnp.expm1(safe * log_x) / safe)


def bernoulli(n):
    """The Bernoulli numbers ``B_0 ... B_n`` (``B_1 = -1/2``, as SciPy) as an array of the
    default float dtype; ``n`` is a static non-negative int."""
    from fractions import Fraction
    from math import comb as _comb
    n = int(n)
    if n < 0:
        raise ValueError(f"bernoulli: n must be a non-negative integer, got {n}")
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum(_comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return fnp.asarray(np.array([float(v) for v in b]), dtype=dtypes.default_float())


# bessel_jn(z, v): (v + 1, *z.shape), the orders stacked in front
def _bessel_jn_rule(z, *, v):
    if not _is_real_float(z.dtype):
        raise ShapeError(f"bessel_jn: z must be real floating, got {z.dtype}{list(z.shape)}")
    return ShapeDtypeStruct((v + 1,) + tuple(z.shape), z.dtype, z.weak_type)


bessel_jn_p = Primitive("bessel_jn", shape_rule=_bessel_jn_rule, impl=_impl.bessel_jn)


def _bessel_jn_batch(vals, dims, size, *, v):
    return bessel_jn_p.bind(vals[0], v=v), 1        # the batch axis follows the orders


bessel_jn_p.batch = _bessel_jn_batch


def _bessel_jn_jvp(primals, tangents, *, v):
    (z,), (t,) = primals, tangents
    out = bessel_jn_p.bind(z, v=v)
    if t is None:
        return out, None
    j = bessel_jn_p.bind(z, v=v + 1)                  # J_0 ... J_(v+1)
    below = fnp.concatenate([-j[1:2], j[:v]], axis=0)  # J_(n-1), J_(-1) = -J_1
    return out, (below - j[1:]) / 2 * t


bessel_jn_p.jvp = _bessel_jn_jvp


def bessel_jn(z, *, v, n_iter=50):
    """Bessel functions of the first kind ``J_0(z) ... J_v(z)`` of real ``z``, stacked:
    shape ``(v + 1, *z.shape)``. Computed in float64 (the power series for ``|z| < 1``,
    else Miller's backward recurrence started far enough past ``max(v, |z|)``), so
    ``n_iter`` (JAX's fixed recurrence length, which gives NaN for small ``z`` in float32
    and wrong values for ``|z| > n_iter``) is accepted and not needed. Differentiable:
    ``J_n' = (J_(n-1) - J_(n+1)) / 2``."""
    del n_iter
    try:
        v = int(v)
    except TypeError:
        raise TypeError(f"bessel_jn: v must be a static non-negative int, got {v!r}") from None
    if v < 0:
        raise ValueError(f"bessel_jn: v must be non-negative, got {v}")
    (z,) = _float("bessel_jn", z)
    if z.dtype.kind == "c":
        raise ValueError("bessel_jn: complex z is not supported (as in JAX)")
    return bessel_jn_p.bind(z, v=v)


def spence(z):
    """Spence's function ``int_1^z log(t) / (1 - t) dt = Li2(1 - z)`` for ``z >= 0`` (NaN
    for ``z < 0`` and at inf, as SciPy and JAX); derivative ``log(z) / (1 - z)`` (JAX:
    NaN)."""
    (z,) = _float("spence", z)
    return spence_p.bind(z)


def dawsn(x):
    """Dawson's integral ``exp(-x^2) int_0^x exp(t^2) dt``; derivative ``1 - 2 x D(x)``."""
    (x,) = _float("dawsn", x)
    return dawsn_p.bind(x)


def _pair_prim(name, impl):
    """An elementwise primitive of one float operand with two outputs of its shape."""
    def shape_rule(x):
        if not _is_real_float(x.dtype):
            raise ShapeError(f"{name}: x must be real floating, got {x.dtype}{list(x.shape)}")
        out = ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)
        return [out, out]
    prim = Primitive(name, shape_rule=shape_rule, impl=impl, multiple_results=True)

    def batch(vals, dims, size):
        return prim.bind(vals[0]), [0, 0]
    prim.batch = batch
    return prim


sici_p = _pair_prim("sici", _impl.sici)
fresnel_p = _pair_prim("fresnel", _impl.fresnel)


def _sici_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    si, ci = sici_p.bind(x)
    if t is None:
        return [si, ci], [None, None]
    zero = x == 0
    xs = fnp.where(zero, _const(1, x), x)
    dsi = fnp.where(zero, _const(1, x), fnp.sin(xs) / xs)      # sin(x) / x
    dci = fnp.cos(x) / x                                         # cos(x) / x (inf at 0)
    return [si, ci], [dsi * t, dci * t]


def _fresnel_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    s, c = fresnel_p.bind(x)
    if t is None:
        return [s, c], [None, None]
    phase = (np.pi / 2) * x * x
    return [s, c], [fnp.sin(phase) * t, fnp.cos(phase) * t]


sici_p.jvp = _sici_jvp
fresnel_p.jvp = _fresnel_jvp


def sici(x):
    """The sine and cosine integrals ``(Si(x), Ci(x))``: ``Si = int_0^x sin(t)/t dt``,
    ``Ci = gamma + log|x| + int_0^x (cos(t) - 1)/t dt`` (for ``x < 0`` the real part, as
    SciPy); derivatives ``sin(x)/x`` and ``cos(x)/x``."""
    (x,) = _float("sici", x)
    if x.dtype.kind == "c":
        raise ValueError(f"Argument `x` to sici must be real-valued. (sici: got "
                         f"{x.dtype}{list(x.shape)})")
    return tuple(sici_p.bind(x))


def fresnel(x):
    """The Fresnel integrals ``(S(x), C(x))`` of ``sin`` and ``cos`` of ``pi t^2 / 2``;
    derivatives ``sin(pi x^2 / 2)`` and ``cos(pi x^2 / 2)``."""
    (x,) = _float("fresnel", x)
    return tuple(fresnel_p.bind(x))


hyp1f1_p = _elementwise_prim("hyp1f1", _impl.hyp1f1, 3)
hyp1f1_grad_a_p = _elementwise_prim("hyp1f1_grad_a", _impl.hyp1f1_grad_a, 3)
hyp1f1_grad_b_p = _elementwise_prim("hyp1f1_grad_b", _impl.hyp1f1_grad_b, 3)
owens_t_p = _elementwise_prim("owens_t", _impl.owens_t, 2)


def _hyp1f1_dx(g, ans, a, b, x):
    return g * (a / b) * hyp1f1_p.bind(a + 1, b + 1, x)      # M' = (a / b) M(a+1, b+1, x)


defjvp(hyp1f1_p, lambda g, ans, a, b, x: g * hyp1f1_grad_a_p.bind(a, b, x),
       lambda g, ans, a, b, x: g * hyp1f1_grad_b_p.bind(a, b, x), _hyp1f1_dx)


def _hyp1f1_second(g, ans, a, b, x):
    raise ValueError("hyp1f1: second derivatives with respect to a and b are not "
                     "implemented (first derivatives in a, b and all in x are)")


defjvp(hyp1f1_grad_a_p, _hyp1f1_second, _hyp1f1_second,
       lambda g, ans, a, b, x: g * (hyp1f1_p.bind(a + 1, b + 1, x) / b
                                    + (a / b) * hyp1f1_grad_a_p.bind(a + 1, b + 1, x)))
defjvp(hyp1f1_grad_b_p, _hyp1f1_second, _hyp1f1_second,
       lambda g, ans, a, b, x: g * (-(a / (b * b)) * hyp1f1_p.bind(a + 1, b + 1, x)
                                    + (a / b) * hyp1f1_grad_b_p.bind(a + 1, b + 1, x)))

_INV_2PI = float(1 / (2 * np.pi))
_INV_SQRT_2PI = float(1 / np.sqrt(2 * np.pi))
defjvp(owens_t_p,
       lambda g, ans, h, a: g * (-0.5 * _INV_SQRT_2PI) * fnp.exp(-0.5 * h * h)
       * lax.erf(a * h * float(1 / np.sqrt(2))),
       lambda g, ans, h, a: g * _INV_2PI * fnp.exp(-0.5 * h * h * (1 + a * a)) / (1 + a * a))


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function ``M(a, b, x) = 1F1(a; b; x)``: its
    series (for ``x < 0`` after Kummer's transformation ``e^x M(b - a, b, -x)``), in
    float64. Differentiable in ``x`` (``(a/b) M(a+1, b+1, x)``, any order) and once in
    ``a`` and ``b``."""
    a, b, x = _promote_broadcast("hyp1f1", a, b, x)
    return hyp1f1_p.bind(a, b, x)


def owens_t(h, a):
    """Owen's T function ``int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt / (2 pi)``
    (Gauss-Legendre on geometric panels for ``|a| <= 1``, else the reflection identity
    in upper-tail probabilities), with derivatives in both arguments."""
    h, a = _promote_broadcast("owens_t", h, a)
    return owens_t_p.bind(h, a)


def _wofz_rule(z):
    if z.dtype.kind != "c":
        raise ShapeError(f"wofz: z must be complex, got {z.dtype}{list(z.shape)}; call "
                         "fnx.scipy.special.wofz, which converts")
    return ShapeDtypeStruct(z.shape, z.dtype, z.weak_type)


wofz_p = Primitive("wofz", shape_rule=_wofz_rule, impl=_impl.wofz)
batch_elementwise(wofz_p)
_TWO_I_OVER_SQRT_PI = complex(0, 2 / np.sqrt(np.pi))
# holomorphic: w'(z) = -2 z w(z) + 2i / sqrt(pi)
defjvp(wofz_p, lambda g, ans, z: g * (-2 * z * ans + _TWO_I_OVER_SQRT_PI))


def wofz(z):
    """The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)`` (complex; real input gives the
    matching complex dtype, as JAX): Weideman's rational approximation (40 terms) in the
    upper half plane, ``2 exp(-z^2) - w(-z)`` in the lower. Holomorphic derivative
    ``-2 z w(z) + 2i / sqrt(pi)``."""
    (z,) = _float("wofz", z)
    if z.dtype.kind != "c":
        z = z.astype(np.result_type(z.dtype, np.complex64))
    return wofz_p.bind(z)


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """Spherical harmonics ``Y_n^m(theta, phi)`` (SciPy's ``sph_harm_y``: ``theta`` the
    colatitude, ``phi`` the longitude; orthonormal, with the Condon-Shortley phase),
    complex. ``n_max`` (JAX's extra argument) bounds the degrees and is read from ``n``
    when not given (which needs a concrete ``n``: pass ``n_max`` under ``jit``); degrees
    above it are clipped to it, as JAX; ``|m| > n`` gives 0. From the stable recurrences
    of the normalized associated Legendre functions, written with fnx ops, so it
    differentiates in ``theta`` and ``phi``. ``diff_n`` is not supported (as JAX)."""
    if diff_n not in (None, 0):
        raise NotImplementedError("sph_harm_y: diff_n is not supported (as in JAX)")
    n, m = fnp.asarray(n), fnp.asarray(m)
    if n.dtype.kind not in "iu" or m.dtype.kind not in "iu":
        raise TypeError(f"sph_harm_y: n and m must be integers, got {n.dtype} and {m.dtype}")
    theta, phi = _float("sph_harm_y", theta, phi)
    if n_max is None:
        if isinstance(n, Tracer):
            raise TypeError("sph_harm_y: under jit/vmap pass n_max (a Python int), the "
                            "largest degree in n")
        n_max = int(np.max(np.asarray(n))) if n.size else 0
    n_max = int(n_max)
    shape = np.broadcast_shapes(n.shape, m.shape, theta.shape, phi.shape)
    n, m, theta, phi = (fnp.ravel(fnp.broadcast_to(v, shape)) for v in (n, m, theta, phi))
    # |sin(theta)| = sqrt(1 - cos(theta)^2), as SciPy and JAX: theta outside [0, pi] gives
    # the values at its reflection, not a flipped sign for odd orders
    x, y = fnp.cos(theta), fnp.abs(fnp.sin(theta))
    zero = fnp.zeros_like(x)
    table = [[zero] * (n_max + 1) for _ in range(n_max + 1)]     # table[l][k] = p_l^k
    pmm = zero + float(np.sqrt(1 / (4 * np.pi)))
    for k in range(n_max + 1):
        if k > 0:
            pmm = -float(np.sqrt((2 * k + 1) / (2 * k))) * y * pmm
        table[k][k] = pmm
        if k + 1 <= n_max:
            table[k + 1][k] = float(np.sqrt(2 * k + 3)) * x * pmm
        for l in range(k + 2, n_max + 1):
            a_l = float(np.sqrt((4 * l * l - 1) / (l * l - k * k)))
            a_prev = float(np.sqrt((4 * (l - 1) ** 2 - 1) / ((l - 1) ** 2 - k * k)))
            table[l][k] = a_l * (x * table[l - 1][k] - table[l - 2][k] / a_prev)
    stacked = fnp.stack([fnp.stack(row) for row in table])     # (n_max+1, n_max+1, K)
    l_idx = fnp.clip(n, 0, n_max).astype(np.int32)
    am = fnp.abs(m)
    k_idx = fnp.clip(am, 0, n_max).astype(np.int32)
    p = stacked[l_idx, k_idx, fnp.arange(l_idx.shape[0], dtype=np.int32)]
    p = fnp.where((am > l_idx) | (am > n_max), zero, p)
    sign = fnp.where((m < 0) & (am % 2 == 1), -1.0, 1.0).astype(p.dtype)
    ang = m.astype(p.dtype) * phi
    cdt = np.result_type(p.dtype, np.complex64)
    out = (sign * p).astype(cdt) * (fnp.cos(ang).astype(cdt) + 1j * fnp.sin(ang).astype(cdt))
    return out.reshape(shape)


hyp2f1_p = _elementwise_prim("hyp2f1", _impl.hyp2f1, 4)


def _hyp2f1_param_jvp(g, ans, a, b, c, x):
    raise ValueError("hyp2f1: derivatives with respect to a, b and c are not implemented; "
                     "differentiate with respect to x, or wrap them in "
                     "fnx.lax.stop_gradient")


defjvp(hyp2f1_p, _hyp2f1_param_jvp, _hyp2f1_param_jvp, _hyp2f1_param_jvp,
       lambda g, ans, a, b, c, x: g * (a * b / c) * hyp2f1_p.bind(a + 1, b + 1, c + 1, x))


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function ``2F1(a, b; c; x)`` for real ``x <= 1``: its series
    on ``[0, 1)`` (up to 40000 terms: accurate to ``x`` ~ 0.999 and, through Pfaff's
    transformation ``(1 - x)^-a 2F1(a, c - b; c; x / (x - 1))``, down to ``x`` ~ -500),
    Gauss's sum at 1, inf above 1 (as SciPy and JAX; JAX also gives inf below -1).
    Differentiable in ``x``: ``(a b / c) 2F1(a + 1, b + 1; c + 1; x)``."""
    a, b, c, x = _promote_broadcast("hyp2f1", a, b, c, x)
    return hyp2f1_p.bind(a, b, c, x)


# --- the names jax.lax gives these functions ---------------------------------------------------
# JAX's lax has igamma, igammac, igamma_grad_a, betainc, zeta, bessel_i0e and bessel_i1e: the
# primitives above, on floating operands of one dtype and rank (lax does not promote; it
# broadcasts dimensions of size 1 only). fnx.lax sits below this module, so they are
# attached to it from here.

def _lax_special(name, fn, arity, scipy_name):
    def f(*args):
        if len(args) != arity:
            raise TypeError(f"{name}: takes {arity} operands, got {len(args)}")
        xs = [fnp.asarray(a) for a in args]
        if len({x.dtype for x in xs}) != 1 or not dtypes.is_floating(xs[0].dtype):
            raise TypeError(f"{name}: needs floating operands of one dtype, got "
                            f"{', '.join(str(x.dtype) for x in xs)}; convert them with "
                            "lax.convert_element_type")
        return fn(*broadcast_ranked(name, xs))
    f.__name__ = f.__qualname__ = name
    f.__module__ = "fnx.lax"
    f.__doc__ = f"JAX's ``lax.{name}``: ``fnx.scipy.special.{scipy_name}`` without promotion."
    return f


for _name, _fn, _arity, _sp in (("igamma", gammainc, 2, "gammainc"),
                                ("igammac", gammaincc, 2, "gammaincc"),
                                ("igamma_grad_a", gammainc_grad_a_p.bind, 2,
                                 "gammainc's derivative in a"),
                                ("betainc", betainc, 3, "betainc"), ("zeta", zeta, 2, "zeta"),
                                ("bessel_i0e", i0e, 1, "i0e"), ("bessel_i1e", i1e, 1, "i1e")):
    setattr(lax, _name, _lax_special(_name, _fn, _arity, _sp))
del _name, _fn, _arity, _sp
