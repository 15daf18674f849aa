"""``fnx.scipy.stats``: JAX's ``jax.scipy.stats``, one module per distribution.

``from fnx.scipy.stats import norm; norm.logpdf(x, loc, scale)``. Each module has the
functions JAX's has (``logpdf``/``pdf``/``cdf``/``logcdf``/``sf``/``logsf``/``ppf``/
``isf``, ``logpmf``/``pmf`` for discrete ones), with JAX's signatures, promotion (ints
become the default float) and out-of-support values (-inf log densities, 0 or 1 cdfs, NaN
for invalid parameters where JAX gives NaN). All are compositions of ``fnx.numpy`` and
``fnx.scipy.special``, so ``grad``, ``jit`` and ``vmap`` apply. Also ``mode``,
``rankdata``, ``sem`` and ``gaussian_kde`` (a pytree).

Where JAX's values are off, fnx's are SciPy's: ``cauchy.ppf(0)``/``ppf(1)`` are -inf/inf
(JAX: +-2.3e7 in float32), ``t.logpdf`` is finite far out (JAX: -inf past ~1e19),
``uniform.cdf(nan)`` is NaN (JAX: 0), ``chi2.logpdf(0, df=2)`` is log(1/2) (JAX: NaN), and
``poisson.entropy`` is accurate to 1e-8 (JAX: 4e-6).
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
