"""The Pareto distribution with shape ``b`` (``jax.scipy.stats.pareto``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.logpdf", x, b, loc, scale)
    y = (x - loc) / scale
    below = x < loc + scale
    ys = fnp.where(below, 1.0, y)
    return fnp.where(below, -np.inf, -(fnp.log(scale / b) + (b + 1) * fnp.log(ys)))


def pdf(x, b, loc=0, scale=1):
    return fnp.exp(logpdf(x, b, loc, scale))


def _log_y(x, loc, scale):
    below = x < loc + scale
    return below, fnp.log(fnp.where(below, 1.0, (x - loc) / scale))


def logsf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.logsf", x, b, loc, scale)
    below, log_y = _log_y(x, loc, scale)
    return fnp.where(below, 0.0, -b * log_y)


def sf(x, b, loc=0, scale=1):
    return fnp.exp(logsf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.cdf", x, b, loc, scale)
    below, log_y = _log_y(x, loc, scale)
    return fnp.where(below, 0.0, -fnp.expm1(-b * log_y))


def logcdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_inexact("pareto.logcdf", x, b, loc, scale)
    below, log_y = _log_y(x, loc, scale)
    return fnp.where(below, -np.inf, fnp.log(-fnp.expm1(-b * log_y)))


def ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote_inexact("pareto.ppf", q, b, loc, scale)
    bad = fnp.isnan(q) | (q < 0) | (q > 1)
    return fnp.where(bad, np.nan, loc + scale * (1 - q) ** (-1 / b))
