"""The gamma distribution with shape ``a`` (``jax.scipy.stats.gamma``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_inexact("gamma.logpdf", x, a, loc, scale)
    inside = x >= loc
    y = fnp.where(inside, (x - loc) / scale, 1.0)
    val = special.xlogy(a - 1, y) - y - lax.lgamma(a) - fnp.log(scale)
    return fnp.where(inside, val, -np.inf)


def pdf(x, a, loc=0, scale=1):
    return fnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_inexact("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, fnp.clip((x - loc) / scale, 0, np.inf))


def logcdf(x, a, loc=0, scale=1):
    return fnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_inexact("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return fnp.where(y < 0, 1.0, special.gammaincc(a, fnp.maximum(y, 0.0)))


def logsf(x, a, loc=0, scale=1):
    return fnp.log(sf(x, a, loc, scale))
