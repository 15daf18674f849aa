"""The Laplace distribution (``jax.scipy.stats.laplace``)."""
from __future__ import annotations

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("laplace.logpdf", x, loc, scale)
    return -(fnp.abs(x - loc) / scale + fnp.log(2 * scale))


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    below = z <= 0
    # each branch exponentiates a non-positive number (no overflow in either)
    e = fnp.exp(-fnp.abs(z))
    return fnp.where(below, e / 2, 1 - e / 2)
