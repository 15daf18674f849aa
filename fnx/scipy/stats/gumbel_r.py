"""The right-skewed Gumbel distribution (``jax.scipy.stats.gumbel_r``); NaN where
``scale <= 0``."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _ok(scale, val):
    return fnp.where(scale > 0, val, np.nan)


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_r.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return _ok(scale, -(z + fnp.exp(-z)) - fnp.log(fnp.where(scale > 0, scale, 1.0)))


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_r.logcdf", x, loc, scale)
    return _ok(scale, -fnp.exp((loc - x) / scale))


def cdf(x, loc=0, scale=1):
    return fnp.exp(logcdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_r.sf", x, loc, scale)
    return _ok(scale, -fnp.expm1(-fnp.exp((loc - x) / scale)))


def logsf(x, loc=0, scale=1):
    """``log(1 - exp(-t))``, ``t = exp(-z)``, through ``log(-expm1(-t))`` for small ``t``
    and ``log1p(-exp(-t))`` for large."""
    x, loc, scale = promote_inexact("gumbel_r.logsf", x, loc, scale)
    t = fnp.exp((loc - x) / scale)
    small = t < float(np.log(2))
    ts = fnp.where(small, t, 1.0)
    tl = fnp.where(small, 1.0, t)
    return _ok(scale, fnp.where(small, fnp.log(-fnp.expm1(-ts)), fnp.log1p(-fnp.exp(-tl))))


def ppf(p, loc=0, scale=1):
    p, loc, scale = promote_inexact("gumbel_r.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    return fnp.where(ok, loc - scale * fnp.log(-fnp.log(fnp.where(ok, p, 0.5))), np.nan)
