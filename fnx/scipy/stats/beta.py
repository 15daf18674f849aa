"""The beta distribution on ``[loc, loc + scale]`` (``jax.scipy.stats.beta``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, b, loc=0, scale=1):
    """-inf outside ``[loc, loc + scale]``; NaN where ``a``, ``b`` or ``scale`` is not
    positive (as JAX)."""
    x, a, b, loc, scale = promote_inexact("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    val = (special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y) - special.betaln(a, b)
           - fnp.log(scale))
    val = fnp.where((x < loc) | (x > loc + scale), -np.inf, val)
    return fnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, val)


def pdf(x, a, b, loc=0, scale=1):
    return fnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("beta.cdf", x, a, b, loc, scale)
    return special.betainc(a, b, fnp.clip((x - loc) / scale, 0, 1))


def logcdf(x, a, b, loc=0, scale=1):
    return fnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_inexact("beta.sf", x, a, b, loc, scale)
    return special.betainc(b, a, 1 - fnp.clip((x - loc) / scale, 0, 1))


def logsf(x, a, b, loc=0, scale=1):
    return fnp.log(sf(x, a, b, loc, scale))
