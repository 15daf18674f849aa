"""The binomial distribution (``jax.scipy.stats.binom``: ``logpmf`` and ``pmf``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """``log C(n, y) + y log p + (n - y) log(1 - p)`` with ``y = k - loc``; -inf outside
    ``[loc, loc + n]``; exactly 0 where the outcome is certain (``n = y = 0``, or
    ``p`` 0 or 1 at the matching end)."""
    k, n, p, loc = promote_inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = lax.lgamma(n + 1) - (lax.lgamma(y + 1) + lax.lgamma(n - y + 1))
    linear = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    val = fnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, log_comb + linear)
    return fnp.where((k >= loc) & (k < loc + n + 1), val, -np.inf)


def pmf(k, n, p, loc=0):
    return fnp.exp(logpmf(k, n, p, loc))
