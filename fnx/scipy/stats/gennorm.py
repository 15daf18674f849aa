"""The generalized normal distribution with shape ``beta`` (``jax.scipy.stats.gennorm``)."""
from __future__ import annotations

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, beta):
    x, beta = promote_inexact("gennorm.logpdf", x, beta)
    return fnp.log(beta / 2) - lax.lgamma(1 / beta) - fnp.abs(x) ** beta


def pdf(x, beta):
    return fnp.exp(logpdf(x, beta))


def cdf(x, beta):
    x, beta = promote_inexact("gennorm.cdf", x, beta)
    return (1 + fnp.sign(x) * special.gammainc(1 / beta, fnp.abs(x) ** beta)) / 2
