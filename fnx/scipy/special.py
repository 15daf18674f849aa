"""``fnx.scipy.special``: SciPy's special functions over fnx arrays, with derivatives.

Names and signatures follow ``scipy.special`` (and JAX's ``jax.scipy.special``).
Integer inputs are promoted to the default float. Values and derivatives stay
finite wherever the mathematical ones are: ``xlogy(0, y)`` is 0 with derivative 0 in
``y``, ``log_ndtr`` uses an asymptotic series far in its left tail, and branches that
``where`` discards are given safe operands.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..nn.functions import _const
from ..nn.functions import log_sigmoid as _log_sigmoid
from ..nn.functions import log_softmax as _log_softmax
from ..nn.functions import logsumexp
from ..nn.functions import softmax as _softmax
from ..numpy._util import promote
from ..transforms.custom import custom_jvp

__all__ = ["logsumexp", "erf", "erfc", "erfinv", "gammaln", "digamma", "polygamma", "xlogy",
           "xlog1py", "logit", "expit", "log_expit", "ndtr", "log_ndtr", "ndtri", "entr",
           "softmax", "log_softmax"]


def _float(name, *xs):
    return promote(name, *xs, to_inexact=True)


def _broadcast(*xs):
    shape = np.broadcast_shapes(*[x.shape for x in xs])
    return [fnp.broadcast_to(x, shape) for x in xs]


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
    n, x = _broadcast(*_float("polygamma", n, x))
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
    nz = x != 0
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
    return _xlogy(*_broadcast(*_float("xlogy", x, y)))


@custom_jvp
def _xlog1py(x, y):
    nz = x != 0
    return fnp.where(nz, x * fnp.log1p(fnp.where(nz, y, _const(0, y))), _const(0, x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    y1 = fnp.where((x == 0) & (y == -1), _const(0, y), y)   # as in xlogy's rule
    return _xlog1py(x, y), tx * fnp.log1p(y) + ty * (x / (1 + y1))


def xlog1py(x, y):
    """``x * log1p(y)``, 0 where ``x == 0`` (even where ``y == -1``); derivatives as
    ``xlogy``'s."""
    return _xlog1py(*_broadcast(*_float("xlog1py", x, y)))


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
    edge = fnp.where(p == 0, _const(-np.inf, p), _const(np.inf, p))
    return fnp.where(inside, tail, fnp.where((p == 0) | (p == 1), edge, central))


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
