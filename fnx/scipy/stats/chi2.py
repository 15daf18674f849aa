"""The chi-squared distribution with ``df`` degrees of freedom (``jax.scipy.stats.chi2``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, df, loc=0, scale=1):
    """-inf below ``loc``. At ``x = loc`` with ``df = 2`` this is ``log(1/2)``, as SciPy
    (JAX: NaN, from ``0 * log 0``)."""
    x, df, loc, scale = promote_inexact("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    k = df / 2
    val = (special.xlogy(k - 1, fnp.maximum(y, 0.0)) - y / 2 - lax.lgamma(k) - k * float(np.log(2))
           - fnp.log(scale))
    return fnp.where(x < loc, -np.inf, val)


def pdf(x, df, loc=0, scale=1):
    return fnp.exp(logpdf(x, df, loc, scale))


def _half(x, loc, scale):
    return fnp.clip((x - loc) / (2 * scale), 0, np.inf)


def cdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("chi2.cdf", x, df, loc, scale)
    return special.gammainc(df / 2, _half(x, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    return fnp.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("chi2.sf", x, df, loc, scale)
    return special.gammaincc(df / 2, _half(x, loc, scale))


def logsf(x, df, loc=0, scale=1):
    return fnp.log(sf(x, df, loc, scale))
