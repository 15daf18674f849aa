"""``fnx.scipy.stats``: JAX's ``jax.scipy.stats``, one module per distribution.

``from fnx.scipy.stats import norm; norm.logpdf(x, loc, scale)``. Each module has the
functions JAX's has (``logpdf``/``pdf``/``cdf``/``logcdf``/``sf``/``logsf``/``ppf``/
``isf``, ``logpmf``/``pmf`` for discrete ones), with JAX's signatures, promotion (ints
become the default float) and out-of-support values (-inf log densities, 0 or 1 cdfs, NaN
for invalid parameters where JAX gives NaN). All are compositions of ``fnx.numpy`` and
``fnx.scipy.special``, so ``grad``, ``jit`` and ``vmap`` apply.
"""
from . import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon,  # noqa: F401
               gamma, gennorm, geom, gumbel_l, gumbel_r, laplace, logistic, multinomial,
               multivariate_normal, nbinom, norm, pareto, poisson, t, truncnorm, uniform,
               vonmises, wrapcauchy)
from ._core import ModeResult, mode, rankdata, sem  # noqa: F401
from .kde import gaussian_kde  # noqa: F401

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon",
           "gamma", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic",
           "multinomial", "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "t",
           "truncnorm", "uniform", "vonmises", "wrapcauchy", "ModeResult", "mode", "rankdata",
           "sem", "gaussian_kde"]
