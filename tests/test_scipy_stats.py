"""fnx.scipy.stats: JAX's module layout and names, values against SciPy (float64 under
jax_enable_x64, float32 by default), JAX's out-of-support values (literals observed with
jax 0.10.2), dtypes, derivatives, jit and vmap."""
import numpy as np
import pytest
import scipy.stats as ss

import fnx
import fnx.numpy as fnp
from fnx.scipy import stats
from fnx.testing import check_grads


def f32(*a):
    return np.array(a, np.float32)


# the public names of each module in jax.scipy.stats (dir() of jax 0.10.2)
JAX_NAMES = {
    "norm": "cdf isf logcdf logpdf logsf pdf ppf sf",
    "multivariate_normal": "logpdf pdf",
    "t": "logpdf pdf",
    "beta": "cdf logcdf logpdf logsf pdf sf",
    "gamma": "cdf logcdf logpdf logsf pdf sf",
    "poisson": "cdf entropy logpmf pmf",
    "bernoulli": "cdf logpmf pmf ppf",
    "logistic": "cdf isf logpdf pdf ppf sf",
    "laplace": "cdf logpdf pdf",
    "cauchy": "cdf isf logcdf logpdf logsf pdf ppf sf",
    "uniform": "cdf logpdf pdf ppf",
    "expon": "cdf logcdf logpdf logsf pdf ppf sf",
    "dirichlet": "logpdf pdf",
    "binom": "logpmf pmf",
    "betabinom": "logpmf pmf",
    "chi2": "cdf logcdf logpdf logsf pdf sf",
    "gennorm": "cdf logpdf pdf",
    "geom": "logpmf pmf",
    "gumbel_l": "cdf logcdf logpdf logsf pdf ppf sf",
    "gumbel_r": "cdf logcdf logpdf logsf pdf ppf sf",
    "multinomial": "logpmf pmf",
    "nbinom": "logpmf pmf",
    "pareto": "cdf logcdf logpdf logsf pdf ppf sf",
    "truncnorm": "cdf logcdf logpdf logsf pdf sf",
    "vonmises": "logpdf pdf",
    "wrapcauchy": "logpdf pdf",
}
# and the functions: mode, rankdata, sem, gaussian_kde (tested below)


@pytest.mark.parametrize("name", sorted(JAX_NAMES))
def test_module_names_match_jax(name):
    from importlib import import_module
    mod = import_module(f"fnx.scipy.stats.{name}")
    assert mod is getattr(stats, name)
    public = sorted(n for n in mod.__all__)
    assert public == JAX_NAMES[name].split()
    assert all(callable(getattr(mod, n)) for n in public)


rng = np.random.default_rng(0)
X = rng.normal(size=7) * 3
U = rng.uniform(0.01, 0.99, size=7)
POS = rng.uniform(0.05, 6, size=7)
K = np.array([0., 1, 2, 3, 5, 8, 13])

# (fnx function, scipy function, args): params are passed positionally as in both APIs
CASES = [
    ("norm.logpdf", ss.norm.logpdf, (X, 0.5, 1.7)),
    ("norm.pdf", ss.norm.pdf, (X, 0.5, 1.7)),
    ("norm.cdf", ss.norm.cdf, (X, 0.5, 1.7)),
    ("norm.logcdf", ss.norm.logcdf, (np.r_[X, -30, 30], 0.5, 1.7)),
    ("norm.sf", ss.norm.sf, (X, 0.5, 1.7)),
    ("norm.logsf", ss.norm.logsf, (np.r_[X, -30, 30], 0.5, 1.7)),
    ("norm.ppf", ss.norm.ppf, (np.r_[U, 1e-10, 1 - 1e-10], 0.5, 1.7)),
    ("norm.isf", ss.norm.isf, (U, 0.5, 1.7)),
    ("t.logpdf", ss.t.logpdf, (X, POS, 0.3, 2.0)),
    ("t.pdf", ss.t.pdf, (X, POS, 0.3, 2.0)),
    ("beta.logpdf", ss.beta.logpdf, (U, POS, POS[::-1])),
    ("beta.pdf", ss.beta.pdf, (U, POS, POS[::-1])),
    ("beta.cdf", ss.beta.cdf, (U, POS, POS[::-1])),
    ("beta.logcdf", ss.beta.logcdf, (U, POS, POS[::-1])),
    ("beta.sf", ss.beta.sf, (U, POS, POS[::-1])),
    ("beta.logsf", ss.beta.logsf, (U, POS, POS[::-1])),
    ("gamma.logpdf", ss.gamma.logpdf, (POS * 2, POS, 0.1, 1.5)),
    ("gamma.pdf", ss.gamma.pdf, (POS * 2, POS, 0.1, 1.5)),
    ("gamma.cdf", ss.gamma.cdf, (POS * 2, POS, 0.1, 1.5)),
    ("gamma.logcdf", ss.gamma.logcdf, (POS * 2, POS, 0.1, 1.5)),
    ("gamma.sf", ss.gamma.sf, (POS * 2, POS, 0.1, 1.5)),
    ("gamma.logsf", ss.gamma.logsf, (POS * 2, POS, 0.1, 1.5)),
    ("poisson.logpmf", ss.poisson.logpmf, (K, 3.5)),
    ("poisson.pmf", ss.poisson.pmf, (K, 3.5, 1)),
    ("poisson.cdf", ss.poisson.cdf, (K + 0.5, 3.5)),
    ("poisson.entropy", ss.poisson.entropy, (np.array([0.5, 3, 9.9, 10, 50, 99, 100, 400]),)),
    ("bernoulli.logpmf", ss.bernoulli.logpmf, (np.array([0., 1, 0, 1]), np.array([.2, .2, .9, .9]))),
    ("bernoulli.pmf", ss.bernoulli.pmf, (np.array([0., 1, 0, 1]), np.array([.2, .2, .9, .9]))),
    ("bernoulli.cdf", ss.bernoulli.cdf, (np.array([-1, 0., 0.5, 1, 2]), 0.3)),
    ("bernoulli.ppf", ss.bernoulli.ppf, (np.array([0.5, 0.69, 0.71, 1]), 0.3)),  # ppf(0): JAX 0, SciPy -1
    ("binom.logpmf", ss.binom.logpmf, (K[:5], 6.0, 0.35)),
    ("binom.pmf", ss.binom.pmf, (K[:5], 6.0, 0.35)),
    ("logistic.logpdf", ss.logistic.logpdf, (np.r_[X, 300, -300], 0.2, 1.3)),
    ("logistic.pdf", ss.logistic.pdf, (X, 0.2, 1.3)),
    ("logistic.cdf", ss.logistic.cdf, (X, 0.2, 1.3)),
    ("logistic.sf", ss.logistic.sf, (X, 0.2, 1.3)),
    ("logistic.ppf", ss.logistic.ppf, (U, 0.2, 1.3)),
    ("logistic.isf", ss.logistic.isf, (U, 0.2, 1.3)),
    ("laplace.logpdf", ss.laplace.logpdf, (X, -0.4, 0.8)),
    ("laplace.pdf", ss.laplace.pdf, (X, -0.4, 0.8)),
    ("laplace.cdf", ss.laplace.cdf, (X, -0.4, 0.8)),
    ("cauchy.logpdf", ss.cauchy.logpdf, (X, 0.1, 2.0)),
    ("cauchy.pdf", ss.cauchy.pdf, (X, 0.1, 2.0)),
    ("cauchy.cdf", ss.cauchy.cdf, (X, 0.1, 2.0)),
    ("cauchy.logcdf", ss.cauchy.logcdf, (X, 0.1, 2.0)),
    ("cauchy.sf", ss.cauchy.sf, (X, 0.1, 2.0)),
    ("cauchy.logsf", ss.cauchy.logsf, (X, 0.1, 2.0)),
    ("cauchy.ppf", ss.cauchy.ppf, (np.r_[U, 0, 1], 0.1, 2.0)),
    ("cauchy.isf", ss.cauchy.isf, (np.r_[U, 0, 1], 0.1, 2.0)),
    ("uniform.logpdf", ss.uniform.logpdf, (X, -1.0, 3.0)),
    ("uniform.pdf", ss.uniform.pdf, (X, -1.0, 3.0)),
    ("uniform.cdf", ss.uniform.cdf, (X, -1.0, 3.0)),
    ("uniform.ppf", ss.uniform.ppf, (U, -1.0, 3.0)),
    ("expon.logpdf", ss.expon.logpdf, (X, -1.0, 2.0)),
    ("expon.pdf", ss.expon.pdf, (X, -1.0, 2.0)),
    ("expon.cdf", ss.expon.cdf, (X, -1.0, 2.0)),
    ("expon.logcdf", ss.expon.logcdf, (np.abs(X), -1.0, 2.0)),
    ("expon.sf", ss.expon.sf, (X, -1.0, 2.0)),
    ("expon.logsf", ss.expon.logsf, (X, -1.0, 2.0)),
    ("expon.ppf", ss.expon.ppf, (U, -1.0, 2.0)),
    ("chi2.logpdf", ss.chi2.logpdf, (POS * 2, POS, 0.1, 1.5)),
    ("chi2.pdf", ss.chi2.pdf, (POS * 2, POS, 0.1, 1.5)),
    ("chi2.cdf", ss.chi2.cdf, (POS * 2, POS, 0.1, 1.5)),
    ("chi2.logcdf", ss.chi2.logcdf, (POS * 2, POS)),
    ("chi2.sf", ss.chi2.sf, (POS * 2, POS, 0.1, 1.5)),
    ("chi2.logsf", ss.chi2.logsf, (POS * 2, POS)),
    ("gennorm.logpdf", ss.gennorm.logpdf, (X, POS)),
    ("gennorm.pdf", ss.gennorm.pdf, (X, POS)),
    ("gennorm.cdf", ss.gennorm.cdf, (X, POS)),
    ("geom.logpmf", ss.geom.logpmf, (K, 0.3)),
    ("geom.pmf", ss.geom.pmf, (K, 0.3, 1)),
    ("nbinom.logpmf", ss.nbinom.logpmf, (K, 3.5, 0.4)),
    ("nbinom.pmf", ss.nbinom.pmf, (K, 3.5, 0.4)),
    ("betabinom.logpmf", ss.betabinom.logpmf, (K, 13.0, 2.5, 1.5)),
    ("betabinom.pmf", ss.betabinom.pmf, (K, 13.0, 2.5, 1.5)),
    ("gumbel_r.logpdf", ss.gumbel_r.logpdf, (X, 0.3, 1.5)),
    ("gumbel_r.pdf", ss.gumbel_r.pdf, (X, 0.3, 1.5)),
    ("gumbel_r.cdf", ss.gumbel_r.cdf, (X, 0.3, 1.5)),
    ("gumbel_r.logcdf", ss.gumbel_r.logcdf, (X, 0.3, 1.5)),
    ("gumbel_r.sf", ss.gumbel_r.sf, (X, 0.3, 1.5)),
    ("gumbel_r.logsf", ss.gumbel_r.logsf, (X, 0.3, 1.5)),
    ("gumbel_r.ppf", ss.gumbel_r.ppf, (U, 0.3, 1.5)),
    ("gumbel_l.logpdf", ss.gumbel_l.logpdf, (X, 0.3, 1.5)),
    ("gumbel_l.pdf", ss.gumbel_l.pdf, (X, 0.3, 1.5)),
    ("gumbel_l.cdf", ss.gumbel_l.cdf, (X, 0.3, 1.5)),
    ("gumbel_l.logcdf", ss.gumbel_l.logcdf, (X, 0.3, 1.5)),
    ("gumbel_l.sf", ss.gumbel_l.sf, (X, 0.3, 1.5)),
    ("gumbel_l.logsf", ss.gumbel_l.logsf, (X, 0.3, 1.5)),
    ("gumbel_l.ppf", ss.gumbel_l.ppf, (U, 0.3, 1.5)),
    ("pareto.logpdf", ss.pareto.logpdf, (np.abs(X) + 0.5, POS, 0.1, 1.2)),
    ("pareto.pdf", ss.pareto.pdf, (np.abs(X) + 0.5, POS, 0.1, 1.2)),
    ("pareto.cdf", ss.pareto.cdf, (np.abs(X) + 0.5, POS, 0.1, 1.2)),
    ("pareto.logcdf", ss.pareto.logcdf, (np.abs(X) + 1.5, POS, 0.1, 1.2)),
    ("pareto.sf", ss.pareto.sf, (np.abs(X) + 0.5, POS, 0.1, 1.2)),
    ("pareto.logsf", ss.pareto.logsf, (np.abs(X) + 0.5, POS, 0.1, 1.2)),
    ("pareto.ppf", ss.pareto.ppf, (U, POS, 0.1, 1.2)),
    ("vonmises.logpdf", ss.vonmises.logpdf, (X, POS * 50)),
    ("vonmises.pdf", ss.vonmises.pdf, (X, POS)),
    ("wrapcauchy.logpdf", ss.wrapcauchy.logpdf, (np.abs(X), U)),
    ("wrapcauchy.pdf", ss.wrapcauchy.pdf, (np.abs(X), U)),
    ("truncnorm.logpdf", ss.truncnorm.logpdf, (X, -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm.pdf", ss.truncnorm.pdf, (X, -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm.cdf", ss.truncnorm.cdf, (X, -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm.logcdf", ss.truncnorm.logcdf, (X, -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm.sf", ss.truncnorm.sf, (X, -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm.logsf", ss.truncnorm.logsf, (X, -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm.logpdf", ss.truncnorm.logpdf, (X / 3 + 5, 4.0, 9.0)),       # far tails
    ("truncnorm.logcdf", ss.truncnorm.logcdf, (X / 3 + 5, 4.0, 9.0)),
    ("truncnorm.logsf", ss.truncnorm.logsf, (X / 3 - 5, -9.0, -4.0)),
]


def _fn(path):
    mod, name = path.split(".")
    return getattr(getattr(stats, mod), name)


@pytest.mark.parametrize("path,ref,args", CASES, ids=[c[0] for c in CASES])
def test_values_against_scipy(path, ref, args, x64):
    out = _fn(path)(*args)
    assert out.dtype == np.float64
    rtol = 1e-8 if path == "poisson.entropy" else 1e-10   # an asymptotic series from 100
    np.testing.assert_allclose(np.asarray(out), ref(*args), rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("path,ref,args", CASES[::3], ids=[c[0] for c in CASES[::3]])
def test_float32_values_and_dtype(path, ref, args):
    args32 = tuple(np.asarray(a, np.float32) if isinstance(a, np.ndarray) else a
                   for a in args)
    out = _fn(path)(*args32)
    assert out.dtype == np.float32
    ref_args = tuple(np.asarray(a, np.float64) if isinstance(a, np.ndarray) else a
                     for a in args32)
    np.testing.assert_allclose(np.asarray(out), ref(*ref_args), rtol=2e-5, atol=1e-6)


def test_integer_inputs_promote_to_default_float():
    assert stats.norm.logpdf(1).dtype == np.float32
    assert stats.poisson.logpmf(np.arange(3, dtype=np.int32), 2).dtype == np.float32
    assert stats.norm.ppf(np.float16(0.3)).dtype == np.float32   # JAX: asarray(., float)


def test_multivariate_normal(x64):
    cov = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]])
    mean = np.array([0.1, -0.2, 0.3])
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(np.asarray(stats.multivariate_normal.logpdf(x, mean, cov)),
                               ss.multivariate_normal.logpdf(x, mean, cov), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.multivariate_normal.pdf(x, mean, cov)),
                               ss.multivariate_normal.pdf(x, mean, cov), rtol=1e-12)
    # batched covariances and a scalar variance
    covs = np.stack([cov, 2 * cov])
    out = stats.multivariate_normal.logpdf(x[:2], mean, covs)
    np.testing.assert_allclose(np.asarray(out), [ss.multivariate_normal.logpdf(x[i], mean, covs[i])
                                                 for i in range(2)], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.multivariate_normal.logpdf(x, mean, 2.0)),
                               ss.multivariate_normal.logpdf(x, mean, 2.0 * np.eye(3)),
                               rtol=1e-12)
    np.testing.assert_allclose(float(stats.multivariate_normal.logpdf(1.0, 0.0, 2.0)),
                               ss.norm.logpdf(1.0, 0.0, np.sqrt(2.0)), rtol=1e-12)
    with pytest.raises(fnx.errors.ShapeError, match="multivariate_normal.logpdf: cov"):
        stats.multivariate_normal.logpdf(x, mean, np.eye(2))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        stats.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)


def test_multivariate_normal_not_positive_definite_is_nan():
    bad = np.array([[1, 2], [2, 1]], np.float32)
    assert np.isnan(float(stats.multivariate_normal.logpdf(f32(1, 2), f32(0, 0), bad)))


def test_dirichlet(x64):
    alpha = np.array([1.0, 2.0, 3.0])
    x = np.array([[0.2, 0.1], [0.3, 0.6], [0.5, 0.3]])
    np.testing.assert_allclose(np.asarray(stats.dirichlet.logpdf(x, alpha)),
                               [ss.dirichlet.logpdf(x[:, i], alpha) for i in range(2)],
                               rtol=1e-12)
    # K - 1 coordinates: the last is 1 - sum
    np.testing.assert_allclose(np.asarray(stats.dirichlet.logpdf(x[:2], alpha)),
                               np.asarray(stats.dirichlet.logpdf(x, alpha)), rtol=1e-12)
    np.testing.assert_allclose(float(stats.dirichlet.pdf(x[:, 0], alpha)),
                               ss.dirichlet.pdf(x[:, 0], alpha), rtol=1e-12)
    with pytest.raises(fnx.errors.ShapeError, match="one-dimensional"):
        stats.dirichlet.logpdf(x, alpha[None])
    with pytest.raises(fnx.errors.ShapeError, match="3 or 2 entries"):
        stats.dirichlet.logpdf(np.ones(5) / 5, alpha)


# out-of-support and invalid-parameter values: jax 0.10.2's results (float32)
def _eq(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b, np.float32))


def test_out_of_support_values_as_jax():
    inf, nan = np.inf, np.nan
    _eq(stats.norm.logpdf(f32(np.inf, np.nan)), [-inf, nan])
    _eq(stats.norm.ppf(f32(0, 1, 1.5, -0.1)), [-inf, inf, nan, nan])
    _eq(stats.gamma.logpdf(f32(-1, 0, 1), f32(2, 0.5, -1)), [-inf, inf, -inf])
    _eq(stats.gamma.cdf(f32(-1, 0, inf), 2.0), [0, 0, 1])
    _eq(stats.gamma.sf(f32(-1, 0, inf), 2.0), [1, 1, 0])
    _eq(stats.beta.logpdf(f32(-0.1, 1.1, .5, .5), f32(2, 2, 0, 2), f32(2, 2, 2, -1)),
        [-inf, -inf, nan, nan])
    _eq(stats.beta.cdf(f32(-1, 0, 1, 2), 2.0, 3.0), [0, 0, 1, 1])
    _eq(stats.beta.sf(f32(-1, 0, 1, 2), 2.0, 3.0), [1, 1, 0, 0])
    _eq(stats.poisson.logpmf(f32(-1, 1.5), 2.0), [-inf, -inf])
    _eq(stats.poisson.logpmf(f32(0, 1), 0.0), [0, -inf])
    _eq(stats.poisson.cdf(f32(-1), 2.0), [0])
    _eq(stats.bernoulli.logpmf(f32(-1, 2), 0.3), [-inf, -inf])
    _eq(stats.bernoulli.logpmf(f32(0, 1), f32(0, 1)), [0, 0])
    _eq(stats.bernoulli.cdf(f32(-1, 0, .5, 1, nan), 0.3), [0, 0.7, 0.7, 1, nan])
    assert np.isnan(float(stats.bernoulli.cdf(0.0, 1.5)))
    _eq(stats.bernoulli.ppf(f32(0, .7, .71, 1, -1), 0.3), [0, 0, 1, 1, nan])
    _eq(stats.binom.logpmf(f32(-1, 6), 5.0, 0.3), [-inf, -inf])
    _eq(stats.binom.logpmf(f32(0, 5, 0), f32(5, 5, 0), f32(0, 1, .5)), [0, 0, 0])
    _eq(stats.uniform.logpdf(f32(-1, 2)), [-inf, -inf])
    _eq(stats.uniform.cdf(f32(-1, 2)), [0, 1])
    _eq(stats.uniform.ppf(f32(-1, 2, nan)), [nan, nan, nan])
    _eq(stats.expon.logpdf(f32(-1)), [-inf])
    _eq(stats.expon.cdf(f32(-1)), [0])
    _eq(stats.expon.logsf(f32(-1)), [0])
    _eq(stats.expon.logcdf(f32(-1, 0)), [-inf, -inf])
    _eq(stats.expon.ppf(f32(-1, 1, 2)), [nan, inf, nan])
    _eq(stats.laplace.cdf(f32(-inf, inf)), [0, 1])
    _eq(stats.cauchy.cdf(f32(-inf, inf)), [0, 1])
    _eq(stats.logistic.ppf(f32(0, 1)), [-inf, inf])
    _eq(stats.logistic.logpdf(f32(-1e4, 1e4)), [-1e4, -1e4])
    _eq(stats.dirichlet.logpdf(f32(.2, .3, .6), f32(1, 2, 3)), -inf)
    _eq(stats.dirichlet.logpdf(f32(0, .5, .5), f32(1, 2, 3)), -inf)


def test_multinomial(x64):
    x, p = np.array([1, 2, 3]), np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(float(stats.multinomial.logpmf(x, 6, p)),
                               ss.multinomial.logpmf(x, 6, p), rtol=1e-12)
    np.testing.assert_allclose(float(stats.multinomial.pmf(x, 6, p)),
                               ss.multinomial.pmf(x, 6, p), rtol=1e-12)
    assert float(stats.multinomial.logpmf(x, 5, p)) == -np.inf
    with pytest.raises(ValueError, match="x and n must be integers"):
        stats.multinomial.logpmf(x.astype(np.float32), 6, p)


def test_more_out_of_support_values_as_jax():
    inf, nan = np.inf, np.nan
    _eq(stats.chi2.logpdf(f32(-1), 2.0), [-inf])
    _eq(stats.chi2.cdf(f32(-1, 0, inf), 3.0), [0, 0, 1])
    _eq(stats.chi2.sf(f32(-1, 0, inf), 3.0), [1, 1, 0])
    _eq(stats.geom.logpmf(f32(0, -1), 0.3), [-inf, -inf])
    _eq(stats.nbinom.logpmf(f32(-1), 2.0, 0.5), [-inf])
    _eq(stats.betabinom.logpmf(f32(-1, 6), 5.0, 2.0, 3.0), [-inf, -inf])
    _eq(stats.betabinom.logpmf(f32(0, 1), f32(0, -1), 1.0, 1.0), [0, nan])
    assert np.isnan(float(stats.betabinom.logpmf(1.0, 3.0, 0.0, 1.0)))
    _eq(stats.gumbel_r.logpdf(f32(0), 0.0, -1.0), [nan])
    _eq(stats.gumbel_r.ppf(f32(0, 1)), [nan, nan])
    _eq(stats.gumbel_l.ppf(f32(0, 1)), [nan, nan])
    _eq(stats.gumbel_r.logsf(f32(-50, 50)), [-0.0, -50])
    _eq(stats.gumbel_l.logcdf(f32(-50, 50)), [-50, 0])
    _eq(stats.pareto.logpdf(f32(0.5), 2.0), [-inf])
    _eq(stats.pareto.cdf(f32(0.5, 1, inf), 2.0), [0, 0, 1])
    _eq(stats.pareto.logsf(f32(0.5), 2.0), [0])
    _eq(stats.pareto.ppf(f32(-1, 0, 1, 2), 2.0), [nan, 1, inf, nan])
    _eq(stats.vonmises.logpdf(f32(1), f32(0)), [nan])
    _eq(stats.wrapcauchy.logpdf(f32(-1, 7), 0.5), [-inf, -inf])
    _eq(stats.wrapcauchy.logpdf(1.0, f32(0, 1)), [nan, nan])
    _eq(stats.truncnorm.logpdf(f32(-2, 3), -1.0, 2.0), [-inf, -inf])
    assert np.isnan(float(stats.truncnorm.logpdf(0.0, 2.0, 1.0)))
    _eq(stats.truncnorm.cdf(f32(-2, 3), -1.0, 2.0), [0, 1])
    _eq(stats.truncnorm.sf(f32(-2, 3), -1.0, 2.0), [1, 0])
    _eq(stats.gennorm.cdf(f32(-inf, 0, inf), 2.0), [0, 0.5, 1])


def test_where_fnx_does_better_than_jax():
    # JAX: cauchy.ppf(0) = 2.29e7 (tan of a rounded pi/2), t.logpdf(1e20) = -inf (overflow),
    # uniform.cdf(nan) = 0
    _eq(stats.cauchy.ppf(f32(0, 1)), [-np.inf, np.inf])
    _eq(stats.cauchy.isf(f32(0, 1)), [np.inf, -np.inf])
    np.testing.assert_allclose(float(stats.t.logpdf(np.float32(1e20), 3.0)),
                               ss.t.logpdf(1e20, 3.0), rtol=1e-6)
    assert np.isnan(float(stats.uniform.cdf(np.float32(np.nan))))
    # JAX: chi2.logpdf(0, 2) = NaN (0 * log 0); SciPy and fnx: log(1/2)
    np.testing.assert_allclose(float(stats.chi2.logpdf(np.float32(0), 2.0)), np.log(0.5),
                               rtol=1e-6)


def test_grads(x64):
    check_grads(lambda x, m, s: stats.norm.logpdf(x, m, s), (X, 0.3, 1.2), order=2)
    check_grads(lambda x: stats.norm.logcdf(x), (np.r_[X, -25.0],), order=1)
    check_grads(lambda x, df: stats.t.logpdf(x, df), (X, POS), order=2)
    check_grads(lambda x, a, b: stats.beta.logpdf(x, a, b), (np.clip(U, 0.1, 0.9), POS, POS[::-1]),
                order=2)
    check_grads(lambda x: stats.beta.cdf(x, 2.0, 3.0), (U,), order=2)
    check_grads(lambda x, a: stats.gamma.cdf(x, a), (POS * 2, POS), order=1)
    check_grads(lambda mu: stats.poisson.logpmf(K, mu), (3.5,), order=2)
    check_grads(lambda x, s: stats.logistic.logpdf(x, 0.0, s), (X, 1.3), order=2)
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    check_grads(lambda x, c: stats.multivariate_normal.logpdf(x, np.zeros(2), c),
                (rng.normal(size=(3, 2)), cov), order=1)
    check_grads(lambda a: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a),
                (np.array([1.0, 2.0, 3.0]),), order=2)
    check_grads(lambda x, lo: stats.truncnorm.logcdf(x, lo, 2.0), (np.clip(X, -0.9, 1.9), -1.0),
                order=1)
    check_grads(lambda x, k: stats.vonmises.logpdf(x, k), (X, POS), order=2)
    check_grads(lambda x, s: stats.gumbel_r.logsf(x, 0.0, s), (X, 1.3), order=1)


def test_grad_at_support_edges_is_finite():
    g = fnx.grad(lambda x: stats.gamma.logpdf(x, 1.0))(f32(0.0)[0])
    assert np.isfinite(float(g))
    g = fnx.grad(lambda p: stats.bernoulli.logpmf(0.0, p))(np.float32(0.0))
    assert float(g) == -1.0


def test_jit_matches_eager_and_vmap():
    fns = [lambda x: stats.norm.logcdf(x, 0.5, 2.0), lambda x: stats.gamma.cdf(x, 2.5),
           lambda x: stats.beta.logpdf(x, 2.0, 3.0), lambda x: stats.poisson.pmf(x, 2.0),
           lambda x: stats.t.pdf(x, 4.0)]
    x = np.abs(X[:5]).astype(np.float32) / 10
    for f in fns:
        np.testing.assert_allclose(np.asarray(fnx.jit(f)(x)), np.asarray(f(x)), rtol=1e-6)
    v = fnx.vmap(lambda x, m: stats.multivariate_normal.logpdf(x, m, np.eye(2, dtype=np.float32)))
    xs, ms = rng.normal(size=(4, 2)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(v(xs, ms)),
                               ss.multivariate_normal.logpdf(xs - ms, np.zeros(2), np.eye(2)),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fnx.vmap(stats.poisson.entropy)(f32(0.5, 20, 200))),
                               ss.poisson.entropy([0.5, 20, 200]), rtol=1e-5)


def test_poisson_entropy_invalid_mu_is_nan():
    # JAX and SciPy: NaN for mu < 0 (it was the entropy at mu = 1); 0 at mu = 0
    mu = np.array([-1.0, 0.0, -5.0, 0.01, np.nan], np.float32)
    np.testing.assert_allclose(np.asarray(stats.poisson.entropy(mu)),
                               ss.poisson.entropy(mu.astype(np.float64)), rtol=2e-4)


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata_against_scipy(method, x64):
    x = rng.integers(0, 4, size=(5, 7)).astype(float)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(np.asarray(stats.rankdata(x, method, axis=axis)),
                                      ss.rankdata(x, method, axis=axis))


def test_rankdata_mode_sem_as_jax():
    nan = np.nan
    # jax 0.10.2's values
    np.testing.assert_array_equal(np.asarray(stats.rankdata(f32(3, 1, nan, 2))), [nan] * 4)
    np.testing.assert_array_equal(
        np.asarray(stats.rankdata(np.array([[3, 1], [nan, 2]], np.float32), axis=1)),
        [[2, 1], [nan, nan]])
    r = stats.rankdata(np.array([2, 2, 1], np.int32))
    assert r.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(r), [2.5, 2.5, 1])
    m = stats.mode(np.array([1, 2, 2, 3, 3], np.int32))
    assert isinstance(m, stats.ModeResult) and int(m.mode) == 2 and int(m.count) == 2
    m = stats.mode(np.array([], np.float32))
    assert np.isnan(float(m.mode)) and float(m.count) == 0
    np.testing.assert_allclose(float(stats.sem(f32(1, 2, 3, 4))), 0.64549726, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="nan_policy='omit'"):
        stats.mode(f32(1, 2), nan_policy="omit")


def test_mode_counts_nans_as_one_value():
    # JAX and SciPy: the NaNs are one value (sorted last); each NaN was its own run
    for x in ([1.0, np.nan, np.nan, np.nan, 2.0], [1.0, 1.0, np.nan, np.nan, 2.0],
              [1.0, np.nan, 2.0]):
        x = np.array(x, np.float32)
        m, ref = stats.mode(x), ss.mode(x)
        np.testing.assert_array_equal(np.asarray(m.mode), ref.mode)
        assert int(m.count) == ref.count


def test_mode_sem_against_scipy(x64):
    x = rng.integers(0, 4, size=(5, 7)).astype(float)
    for axis in (0, 1):
        r, ref = stats.mode(x, axis=axis), ss.mode(x, axis=axis)
        np.testing.assert_array_equal(np.asarray(r.mode), ref.mode)
        np.testing.assert_array_equal(np.asarray(r.count), ref.count)
    r = stats.mode(x, axis=None)
    assert float(r.mode) == ss.mode(x, axis=None).mode
    assert stats.mode(x, axis=0, keepdims=True).mode.shape == (1, 7)
    for axis in (None, 0, 1):
        np.testing.assert_allclose(np.asarray(stats.sem(x, axis=axis)), ss.sem(x, axis=axis),
                                   rtol=1e-12)
    xn = x.copy()
    xn[0, 0] = np.nan
    np.testing.assert_allclose(np.asarray(stats.sem(xn, axis=1, nan_policy="omit")),
                               ss.sem(xn, axis=1, nan_policy="omit"), rtol=1e-12)


@pytest.mark.parametrize("bw", [None, "silverman", 0.5])
def test_gaussian_kde_against_scipy(bw, x64):
    data, w = rng.normal(size=(2, 30)), rng.uniform(size=30)
    pts = rng.normal(size=(2, 5))
    for weights in (None, w):
        k, ref = stats.gaussian_kde(data, bw, weights), ss.gaussian_kde(data, bw, weights)
        np.testing.assert_allclose(np.asarray(k(pts)), ref(pts), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(k.logpdf(pts)), ref.logpdf(pts), rtol=1e-12)
        np.testing.assert_allclose(float(k.integrate_gaussian(np.zeros(2), np.eye(2))),
                                   ref.integrate_gaussian(np.zeros(2), np.eye(2)), rtol=1e-12)
    k1, ref1 = stats.gaussian_kde(data[0]), ss.gaussian_kde(data[0])
    np.testing.assert_allclose(float(k1.integrate_box_1d(-0.5, 1.0)),
                               ref1.integrate_box_1d(-0.5, 1.0), rtol=1e-12)
    np.testing.assert_allclose(float(k1.integrate_kde(stats.gaussian_kde(data[1]))),
                               ref1.integrate_kde(ss.gaussian_kde(data[1])), rtol=1e-12)


def test_gaussian_kde_pytree_resample_grad():
    import fnx.random as fr
    data = rng.normal(size=(2, 20)).astype(np.float32)
    k = stats.gaussian_kde(data)
    pts = rng.normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fnx.jit(lambda k, p: k(p))(k, pts)),
                               np.asarray(k(pts)), rtol=1e-5)
    draws = k.resample(fr.PRNGKey(0), (500,))
    assert draws.shape == (2, 500)
    np.testing.assert_allclose(np.asarray(fnp.mean(draws, axis=1)), data.mean(axis=1),
                               atol=0.25)
    g = fnx.grad(lambda p: fnp.sum(stats.gaussian_kde(data).logpdf(p)))(pts)
    assert np.isfinite(np.asarray(g)).all()
    with pytest.raises(NotImplementedError, match="set_bandwidth"):
        k.set_bandwidth("scott")
