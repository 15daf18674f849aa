"""The normal distribution (``jax.scipy.stats.norm``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from ._util import default_float, promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.logpdf", x, loc, scale)
    var = scale * scale
    return -(fnp.log((2 * np.pi) * var) + (x - loc) * (x - loc) / var) / 2


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.cdf", x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.logcdf", x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("norm.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function; the result has the default float dtype (as JAX)."""
    return default_float(special.ndtri(q) * scale + loc)


def isf(q, loc=0, scale=1):
    (q,) = promote_inexact("norm.isf", q)
    return ppf(1 - q, loc, scale)
