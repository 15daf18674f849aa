"""Student's t distribution (``jax.scipy.stats.t``: ``logpdf`` and ``pdf``)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from ._util import promote_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half = df / 2
    log_norm = (lax.lgamma(half) - lax.lgamma(half + 0.5)
                + fnp.log(np.pi * scale * scale * df) / 2)
    # log1p(z^2 / df), written for large |z| as 2 log|z| - log df + log1p(df / z^2) so
    # that z^2 cannot overflow (JAX gives -inf far out)
    big = fnp.abs(z) > fnp.sqrt(df)
    zb = fnp.where(big, fnp.abs(z), 1.0)
    zs = fnp.where(big, 0.0, z)
    log_q = fnp.where(big, 2 * fnp.log(zb) - fnp.log(df) + fnp.log1p(df / zb / zb),
                      fnp.log1p(zs * zs / df))
    return -(log_norm + (half + 0.5) * log_q)


def pdf(x, df, loc=0, scale=1):
    return fnp.exp(logpdf(x, df, loc, scale))
