"""The beta-binomial distribution (``jax.scipy.stats.betabinom``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0):
    """``log C(n, y) + log B(y + a, n - y + b) - log B(a, b)`` with ``y = floor(k) - loc``;
    -inf outside ``[0, n]``, NaN for ``n < 0`` or non-positive ``a``, ``b`` (as JAX)."""
    k, n, a, b, loc = promote_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = fnp.floor(k) - loc
    invalid = (n < 0) | (a <= 0) | (b <= 0)
    outside = (y < -loc) | (y > n) | (y + a <= 0)
    # the masked elements get harmless operands (no inf - inf on the way)
    skip = invalid | outside
    ys, ns = fnp.where(skip, 0.0, y), fnp.where(skip, 0.0, n)
    as_, bs = fnp.where(invalid, 1.0, a), fnp.where(invalid, 1.0, b)
    log_comb = -(fnp.log1p(ns) + special.betaln(ns - ys + 1, ys + 1))
    val = log_comb + special.betaln(ys + as_, ns - ys + bs) - special.betaln(as_, bs)
    val = fnp.where((y == 0) & (n == 0), 0.0, val)
    val = fnp.where(outside, -np.inf, val)
    return fnp.where(invalid, np.nan, val)


def pmf(k, n, a, b, loc=0):
    return fnp.exp(logpmf(k, n, a, b, loc))
