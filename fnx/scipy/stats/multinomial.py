"""The multinomial distribution (``jax.scipy.stats.multinomial``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from .. import special
from ._util import promote_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    """``log n! + sum(x log p - log x!)`` over the last axis; -inf where ``sum(x) != n``.
    ``x`` and ``n`` must be integers (as JAX)."""
    (p,) = promote_inexact("multinomial.logpmf", p)
    x, n = fnp.asarray(x), fnp.asarray(n)
    if x.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise ValueError(f"multinomial.logpmf: x and n must be integers, got x.dtype={x.dtype}, "
                        f"n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    val = lax.lgamma(n + 1) + fnp.sum(special.xlogy(x, p) - lax.lgamma(x + 1), axis=-1)
    return fnp.where(fnp.sum(x, axis=-1) == n, val, -np.inf)


def pmf(x, n, p):
    return fnp.exp(logpmf(x, n, p))
