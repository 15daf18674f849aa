"""The von Mises distribution (``jax.scipy.stats.vonmises``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa):
    """``kappa (cos x - 1) - log(2 pi i0e(kappa))`` (overflow-free); NaN for
    ``kappa <= 0`` (as JAX)."""
    x, kappa = promote_inexact("vonmises.logpdf", x, kappa)
    val = kappa * (fnp.cos(x) - 1) - fnp.log(2 * np.pi * special.i0e(kappa))
    return fnp.where(kappa > 0, val, np.nan)


def pdf(x, kappa):
    return fnp.exp(logpdf(x, kappa))
