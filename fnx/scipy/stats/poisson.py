"""The Poisson distribution (``jax.scipy.stats.poisson``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf", "cdf", "entropy"]


def logpmf(k, mu, loc=0):
    """-inf below ``loc`` and at non-integer ``k``."""
    k, mu, loc = promote_inexact("poisson.logpmf", k, mu, loc)
    y = k - loc
    val = special.xlogy(y, mu) - lax.lgamma(y + 1) - mu
    return fnp.where((y < 0) | (fnp.round(k) != k), -np.inf, val)


def pmf(k, mu, loc=0):
    return fnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """``P(K <= k) = Q(floor(k - loc) + 1, mu)``; 0 below ``loc``."""
    k, mu, loc = promote_inexact("poisson.cdf", k, mu, loc)
    y = k - loc
    return fnp.where(y < 0, 0.0, special.gammaincc(fnp.floor(fnp.maximum(y, 0.0) + 1), mu))


def _entropy_sum(mu, n_terms, upper):
    """``sum_k entr(pmf(k, mu))`` over ``k < min(n_terms, upper)``."""
    ks = fnp.arange(n_terms, dtype=mu.dtype).reshape((n_terms,) + (1,) * mu.ndim)
    p = pmf(ks, mu)
    return fnp.sum(special.entr(fnp.where(ks < upper, p, 0.0)), axis=0)


def entropy(mu, loc=0):
    """The entropy ``-sum_k p_k log p_k``: summed over ``k < ceil(mu + 10 sqrt(mu) + 30)``
    (static bounds of 80 terms for ``mu < 10`` and 250 for ``mu < 100``), else the
    asymptotic series ``log(2 pi e mu) / 2 - 1/(12 mu) - 1/(24 mu^2) - 19/(360 mu^3)``;
    0 at ``mu = 0``, NaN for ``mu < 0``. JAX sums fewer terms and stops the series after ``1/(12 mu)``, which
    costs it up to 4e-6 (at ``mu = 100``); this agrees with SciPy to 1e-8. ``loc`` does
    not change the entropy (it only broadcasts the result)."""
    mu, loc = promote_inexact("poisson.entropy", mu, loc)
    safe = fnp.where(mu > 0, mu, 1.0)
    upper = fnp.ceil(safe + 10 * fnp.sqrt(safe) + 30)
    small = _entropy_sum(fnp.where(mu < 10, safe, 1.0), 80, upper)
    medium = _entropy_sum(fnp.where((mu >= 10) & (mu < 100), safe, 10.0), 250, upper)
    r = 1 / safe
    large = fnp.log(2 * np.pi * np.e * safe) / 2 - r * (1 / 12 + r * (1 / 24 + r * (19 / 360)))
    out = fnp.where(mu == 0, 0.0, fnp.where(mu < 10, small,
                                             fnp.where(mu < 100, medium, large)))
    out = fnp.where(mu >= 0, out, np.nan)  # NaN for a negative (or NaN) mu, as JAX, SciPy
    return fnp.broadcast_to(out, np.broadcast_shapes(mu.shape, loc.shape))
