"""The exponential distribution (``jax.scipy.stats.expon``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("expon.logpdf", x, loc, scale)
    return fnp.where(x < loc, -np.inf, -((x - loc) / scale + fnp.log(scale)))


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("expon.cdf", x, loc, scale)
    return fnp.where(x < loc, 0.0, -fnp.expm1((loc - x) / scale))


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("expon.logsf", x, loc, scale)
    return fnp.where(x < loc, 0.0, (loc - x) / scale)


def sf(x, loc=0, scale=1):
    return fnp.exp(logsf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    return fnp.log1p(-sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_inexact("expon.ppf", q, loc, scale)
    bad = fnp.isnan(q) | (q < 0) | (q > 1)
    return fnp.where(bad, np.nan, loc - scale * fnp.log1p(-q))
