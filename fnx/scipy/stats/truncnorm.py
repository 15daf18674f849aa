"""The normal distribution truncated to ``[a, b]`` in standard units
(``jax.scipy.stats.truncnorm``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from . import norm
from ._util import promote_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_sub(x, y):
    """``log(exp(x) - exp(y))`` for ``x >= y``."""
    gone = y == -np.inf
    d = fnp.where(gone, -np.inf, fnp.where(gone, 0.0, y) - fnp.where(gone, 0.0, x))
    return x + fnp.log(-fnp.expm1(d))


def _log_mass(a, b):
    """``log(Phi(b) - Phi(a))`` for ``a <= b``: in the tails through ``log_ndtr`` on the
    side away from the mean, in the middle ``log1p(-Phi(a) - Phi(-b))``."""
    left = b <= 0
    right = a > 0
    lo = fnp.where(right, -b, a)
    hi = fnp.where(right, -a, b)
    tail = _log_sub(special.log_ndtr(hi), special.log_ndtr(lo))
    central = fnp.log1p(-special.ndtr(a) - special.ndtr(-b))
    return fnp.where(left | right, tail, central)


def logpdf(x, a, b, loc=0, scale=1):
    """-inf outside ``[a, b]``; NaN where ``a >= b``."""
    x, a, b, loc, scale = promote_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    val = norm.logpdf(x, loc, scale) - _log_mass(a, b)
    val = fnp.where((z < a) | (z > b), -np.inf, val)
    return fnp.where(a >= b, np.nan, val)


def pdf(x, a, b, loc=0, scale=1):
    return fnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    shape = np.broadcast_shapes(z.shape, a.shape, b.shape)
    z, a, b = (fnp.broadcast_to(v, shape) for v in (z, a, b))
    inside = (z > a) & (z < b)
    zi = fnp.where(inside, z, (a + b) / 2)
    total = _log_mass(a, b)
    log_cdf = _log_mass(a, zi) - total
    log_sf = _log_mass(zi, b) - total
    # near 1 the complement is the accurate one
    val = fnp.where(log_cdf > -0.1, fnp.log1p(-fnp.exp(log_sf)), log_cdf)
    val = fnp.where(z >= b, 0.0, fnp.where(z <= a, -np.inf, val))
    return fnp.where(a >= b, np.nan, val)


def cdf(x, a, b, loc=0, scale=1):
    return fnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
    return fnp.exp(logsf(x, a, b, loc, scale))
