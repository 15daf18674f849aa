"""The logistic distribution (``jax.scipy.stats.logistic``)."""
from __future__ import annotations

from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.logpdf", x, loc, scale)
    h = (x - loc) / scale / 2
    # log(e^-z / (1 + e^-z)^2) = -2 log(e^(z/2) + e^(-z/2)), symmetric and overflow-free
    return -2 * fnp.logaddexp(h, -h) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.cdf", x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.sf", x, loc, scale)
    return special.expit((loc - x) / scale)


def ppf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.ppf", x, loc, scale)
    return special.logit(x) * scale + loc


def isf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("logistic.isf", x, loc, scale)
    return loc - special.logit(x) * scale
