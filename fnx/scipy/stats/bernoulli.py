"""The Bernoulli distribution (``jax.scipy.stats.bernoulli``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf", "cdf", "ppf"]


def logpmf(k, p, loc=0):
    """``k log p + (1 - k) log(1 - p)``; -inf outside ``[loc, loc + 1]`` (as JAX,
    non-integer ``k`` inside is not masked)."""
    k, p, loc = promote_inexact("bernoulli.logpmf", k, p, loc)
    y = k - loc
    val = special.xlogy(y, p) + special.xlog1py(1 - y, -p)
    return fnp.where((y < 0) | (y > 1), -np.inf, val)


def pmf(k, p, loc=0):
    return fnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    """0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1; NaN for NaN input or ``p`` outside
    ``[0, 1]``."""
    k, p = promote_inexact("bernoulli.cdf", k, p)
    val = fnp.where(k < 0, 0.0, fnp.where(k < 1, 1 - p, 1.0))
    bad = fnp.isnan(k) | fnp.isnan(p) | (p < 0) | (p > 1)
    return fnp.where(bad, np.nan, val)


def ppf(q, p):
    q, p = promote_inexact("bernoulli.ppf", q, p)
    bad = fnp.isnan(q) | fnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return fnp.where(bad, np.nan, fnp.where(q <= 1 - p, 0.0, 1.0))
