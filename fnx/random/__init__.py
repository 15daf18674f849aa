"""``fnx.random``: explicit-key random numbers over threefry-2x32 (JAX's bits).

Keys are raw ``uint32[2]`` arrays, as JAX's ``PRNGKey`` makes them: ``PRNGKey(seed)``
(or ``key(seed)``) makes one, ``split(key, n)`` gives ``uint32[n, 2]``, ``fold_in``
derives one from an integer. Every sampler takes a key and is a pure function of
it, so the same key gives the same numbers eagerly, under ``jit``, under ``vmap``
(map over a batch of keys) and inside ``scan`` loops.

The bits are those of JAX's default generator (threefry-2x32 with JAX's
partitionable key derivation, its default since JAX 0.5), and every sampler follows
JAX's algorithm, so for the same key:

- exactly JAX's numbers: ``PRNGKey``, ``split``, ``fold_in``, ``bits``, ``uniform``,
  ``randint``, ``bernoulli``, ``categorical``, ``permutation``, ``choice``,
  ``rademacher``, and (at the recorded seeds; a draw within a float ulp of a
  comparison's threshold could differ) the integer-valued ``poisson``, ``binomial``,
  ``multinomial`` and ``geometric``;
- JAX's numbers to float rounding (XLA's and NumPy's transcendental functions
  differ in the last bits): ``normal``, ``truncated_normal``, ``gumbel``,
  ``exponential``, ``laplace``, ``logistic``, ``multivariate_normal``, ``cauchy``,
  ``pareto``, ``rayleigh``, ``weibull_min``, ``lognormal``, ``maxwell``,
  ``double_sided_maxwell``, ``triangular``, ``wald``, ``orthogonal``, and the gamma
  family (JAX's Marsaglia-Tsang loop, per-sample keys): ``gamma``, ``loggamma``,
  ``beta``, ``dirichlet``, ``chisquare``, ``f``, ``t``, ``generalized_normal``,
  ``ball``.

JAX's ``rbg`` and ``unsafe_rbg`` generators are there too: ``PRNGKey(seed, impl='rbg')``
(or ``jax_default_prng_impl`` set to one of them) makes a ``uint32[4]`` key, whose bits come
from ``lax.rng_bit_generator`` and whose ``split`` and ``fold_in`` are JAX's for that
generator, so the exact samplers above draw JAX's numbers under them too (``gamma`` and its
family are threefry-only in fnx; ``poisson`` is in JAX as well). A 4-word key is taken as
``unsafe_rbg`` when that is the default generator, else ``rbg``.

``clone`` is the identity and ``key_impl`` names the generator of a key by its length;
there is no ``key_dtype``, as fnx keys are raw ``uint32`` data, not a typed key dtype.

    import fnx.random as random
    key = random.PRNGKey(0)
    key, sub = random.split(key)
    x = random.normal(sub, (3, 4))
    mask = random.bernoulli(random.fold_in(key, step), 0.9, x.shape)   # dropout
"""
from ._api import *  # noqa: F401,F403
from ._api import __all__  # noqa: F401
from ._threefry import threefry2x32, threefry2x32_p  # noqa: F401
from ._gamma import random_gamma_p  # noqa: F401
