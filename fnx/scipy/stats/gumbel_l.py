"""The left-skewed Gumbel distribution (``jax.scipy.stats.gumbel_l``); NaN where
``scale <= 0``."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _ok(scale, val):
    return fnp.where(scale > 0, val, np.nan)


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_l.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return _ok(scale, z - fnp.exp(z) - fnp.log(fnp.where(scale > 0, scale, 1.0)))


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_l.logcdf", x, loc, scale)
    return _ok(scale, fnp.log(-fnp.expm1(-fnp.exp((x - loc) / scale))))


def cdf(x, loc=0, scale=1):
    return fnp.exp(logcdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("gumbel_l.logsf", x, loc, scale)
    return _ok(scale, -fnp.exp((x - loc) / scale))


def sf(x, loc=0, scale=1):
    return fnp.exp(logsf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    p, loc, scale = promote_inexact("gumbel_l.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    return fnp.where(ok, loc + scale * fnp.log(-fnp.log1p(-fnp.where(ok, p, 0.5))), np.nan)
