"""The negative binomial distribution (``jax.scipy.stats.nbinom``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """``log C(y + n - 1, y) + n log p + y log(1 - p)`` with ``y = k - loc``; -inf below
    ``loc``."""
    k, n, p, loc = promote_inexact("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    comb = lax.lgamma(y + n) - lax.lgamma(n) - lax.lgamma(y + 1)
    return fnp.where(k < loc, -np.inf, comb + special.xlogy(n, p) + special.xlogy(y, 1 - p))


def pmf(k, n, p, loc=0):
    return fnp.exp(logpmf(k, n, p, loc))
