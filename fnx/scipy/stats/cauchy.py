"""The Cauchy distribution (``jax.scipy.stats.cauchy``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(fnp.log(np.pi * scale) + fnp.log1p(z * z))


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("cauchy.cdf", x, loc, scale)
    return 0.5 + fnp.arctan((x - loc) / scale) / np.pi


def logcdf(x, loc=0, scale=1):
    return fnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
    """``tan(pi (q - 1/2)) = -cot(pi q)``, taken from the nearer end of ``[0, 1]``, so
    ``ppf(0) = -inf`` and ``ppf(1) = inf`` (JAX's ``tan`` of a rounded ``pi/2`` gives
    finite values of the wrong sign there)."""
    q, loc, scale = promote_inexact("cauchy.ppf", q, loc, scale)
    return _cot_from_ends(q, -1.0) * scale + loc


def isf(q, loc=0, scale=1):
    """``cot(pi q)``: ``isf(0) = inf``, ``isf(1) = -inf``."""
    q, loc, scale = promote_inexact("cauchy.isf", q, loc, scale)
    return _cot_from_ends(q, 1.0) * scale + loc


def _cot_from_ends(q, sign):
    """``sign * cot(pi q)``, as ``sign / tan(pi q)`` below 1/2 and ``-sign / tan(pi (1 - q))``
    above (``tan`` of a small exact argument keeps the poles at 0 and 1 exact)."""
    low = q <= 0.5
    r = fnp.where(low, q, 1 - q)
    return fnp.where(low, sign, -sign) / fnp.tan(np.pi * r)
