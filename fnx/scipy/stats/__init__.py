"""``fnx.scipy.stats``: JAX's ``jax.scipy.stats``, one module per distribution.

``from fnx.scipy.stats import norm; norm.logpdf(x, loc, scale)``. Each module has the
functions JAX's has (``logpdf``/``pdf``/``cdf``/``logcdf``/``sf``/``logsf``/``ppf``/
``isf``, ``logpmf``/``pmf`` for discrete ones), with JAX's signatures, promotion (ints
become the default float) and out-of-support values (-inf log densities, 0 or 1 cdfs, NaN
for invalid parameters where JAX gives NaN). All are compositions of ``fnx.numpy`` and
``fnx.scipy.special``, so ``grad``, ``jit`` and ``vmap`` apply.
"""
from . import (bernoulli, beta, binom, cauchy, dirichlet, expon, gamma, laplace,  # noqa: F401
               logistic, multivariate_normal, norm, poisson, t, uniform)

__all__ = ["bernoulli", "beta", "binom", "cauchy", "dirichlet", "expon", "gamma", "laplace",
           "logistic", "multivariate_normal", "norm", "poisson", "t", "uniform"]
