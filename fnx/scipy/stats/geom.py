"""The geometric distribution on ``1, 2, ...`` (``jax.scipy.stats.geom``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0):
    """``(k - 1) log(1 - p) + log p``; -inf for ``k - loc <= 0``."""
    k, p, loc = promote_inexact("geom.logpmf", k, p, loc)
    y = k - loc
    return fnp.where(y <= 0, -np.inf, special.xlog1py(y - 1, -p) + fnp.log(p))


def pmf(k, p, loc=0):
    return fnp.exp(logpmf(k, p, loc))
