"""The uniform distribution on ``[loc, loc + scale]`` (``jax.scipy.stats.uniform``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("uniform.logpdf", x, loc, scale)
    outside = (x < loc) | (x > loc + scale)
    return fnp.where(outside, -np.inf, -fnp.log(scale))


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """0 below ``loc``, 1 above ``loc + scale``; NaN in, NaN out (SciPy's value; JAX
    gives 0 there)."""
    x, loc, scale = promote_inexact("uniform.cdf", x, loc, scale)
    return fnp.where(x < loc, 0.0, fnp.where(x > loc + scale, 1.0, (x - loc) / scale))


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_inexact("uniform.ppf", q, loc, scale)
    bad = fnp.isnan(q) | (q < 0) | (q > 1)
    return fnp.where(bad, np.nan, loc + scale * q)
