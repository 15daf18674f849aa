"""The wrapped Cauchy distribution on ``[0, 2 pi]`` (``jax.scipy.stats.wrapcauchy``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    """-inf outside ``[0, 2 pi]``, NaN unless ``0 < c < 1``."""
    x, c = promote_inexact("wrapcauchy.logpdf", x, c)
    val = (fnp.log(1 - c * c) - float(np.log(2 * np.pi))
           - fnp.log(1 + c * c - 2 * c * fnp.cos(x)))
    val = fnp.where((x >= 0) & (x <= 2 * np.pi), val, -np.inf)
    return fnp.where((c > 0) & (c < 1), val, np.nan)


def pdf(x, c):
    return fnp.exp(logpdf(x, c))
