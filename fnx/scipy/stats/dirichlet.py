"""The Dirichlet distribution (``jax.scipy.stats.dirichlet``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from ...errors import ShapeError
from .. import special
from ._util import promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, alpha):
    """``alpha``: (K,); ``x``: (K, ...) or (K - 1, ...) (then the last coordinate is
    ``1 - sum``), points along axis 0. -inf off the open simplex (a coordinate <= 0, or
    a sum more than 1e-6 from 1, as JAX)."""
    x, alpha = promote_inexact("dirichlet.logpdf", x, alpha)
    if alpha.ndim != 1:
        raise ShapeError(f"dirichlet.logpdf: alpha must be one-dimensional, got shape "
                         f"{alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ShapeError(f"dirichlet.logpdf: x must have {k} or {k - 1} entries along axis "
                         f"0 (alpha has {k}); got x.shape={x.shape}")
    if x.shape[0] == k - 1:
        x = fnp.concatenate([x, 1 - fnp.sum(x, axis=0, keepdims=True)], axis=0)
    log_norm = fnp.sum(lax.lgamma(alpha)) - lax.lgamma(fnp.sum(alpha))
    a = alpha.reshape((k,) + (1,) * (x.ndim - 1))
    val = fnp.sum(special.xlogy(a - 1, x), axis=0) - log_norm
    simplex = fnp.all(x > 0, axis=0) & (fnp.abs(fnp.sum(x, axis=0) - 1) < 1e-6)
    return fnp.where(simplex, val, -np.inf)


def pdf(x, alpha):
    return fnp.exp(logpdf(x, alpha))
