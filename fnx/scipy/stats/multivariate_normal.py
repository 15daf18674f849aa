"""The multivariate normal distribution (``jax.scipy.stats.multivariate_normal``)."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ...errors import ShapeError
from ...lax import linalg as lax_linalg
from ._util import promote_inexact

__all__ = ["logpdf", "pdf"]

_LOG_2PI = float(np.log(2 * np.pi))


def logpdf(x, mean, cov, allow_singular=None):
    """``x``: (..., n); ``mean``: (..., n) (or a scalar: then ``x`` and ``cov`` are
    scalars too, a univariate normal); ``cov``: (..., n, n), or a scalar variance shared by
    every coordinate. Through the Cholesky factor ``L`` of ``cov``:
    ``-|L^-1 (x - mean)|^2 / 2 - n log(2 pi) / 2 - sum log diag L``. A ``cov`` that is not
    positive definite gives NaN."""
    if allow_singular is not None:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not "
                                  "supported (as in JAX); pass a positive definite cov")
    x, mean, cov = promote_inexact("multivariate_normal.logpdf", x, mean, cov)
    if mean.ndim == 0:
        return -((x - mean) ** 2) / cov / 2 - (_LOG_2PI + fnp.log(cov)) / 2
    n = mean.shape[-1]
    if cov.ndim == 0:
        d = x - mean
        return -fnp.sum(d * d, axis=-1) / cov / 2 - n / 2 * (_LOG_2PI + fnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ShapeError(f"multivariate_normal.logpdf: cov must have shape (..., {n}, {n}) "
                         f"to match mean's last axis of {n}; got cov {cov.shape}, mean "
                         f"{mean.shape}, x {x.shape}")
    d = x - mean
    batch = np.broadcast_shapes(d.shape[:-1], cov.shape[:-2])
    chol = fnp.broadcast_to(lax_linalg.cholesky(cov), batch + (n, n))
    d = fnp.broadcast_to(d, batch + (n,))[..., None]
    y = lax_linalg.triangular_solve(chol, d, left_side=True, lower=True)[..., 0]
    log_det = fnp.sum(fnp.log(fnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -fnp.sum(y * y, axis=-1) / 2 - n / 2 * _LOG_2PI - log_det


def pdf(x, mean, cov):
    return fnp.exp(logpdf(x, mean, cov))
