"""fnx.random: JAX's bits (recorded vectors), keys through jit/vmap/scan, the samplers'
distributions (moments and KS tests at fixed seeds), dropout masks, errors."""
from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest
from scipy import stats

import fnx
import fnx.numpy as fnp
from fnx import random

REFERENCE = json.loads((pathlib.Path(__file__).parent / "data" /
                        "jax_random_reference.json").read_text())["cases"]


def _arg(v):
    if isinstance(v, dict):
        return np.asarray(v["array"], dtype=v["dtype"])
    return tuple(v) if isinstance(v, list) else v


def _case_id(i, c):
    return f"{i}-{c['fn']}-{c['dtype']}{c['shape']}"


def _is_64_bit(case):
    """Whether JAX computed ``case`` with 64-bit types (recorded under jax_enable_x64)."""
    dtypes = [case["dtype"]] + [v["dtype"] for v in case["kwargs"].values()
                                if isinstance(v, dict)]
    dtypes += [v for k, v in case["kwargs"].items() if k == "dtype"]
    return any(str(d).endswith("64") and d != "complex64" for d in dtypes)


# --- JAX's numbers ---------------------------------------------------------------------

@pytest.mark.parametrize("case", REFERENCE, ids=[_case_id(i, c) for i, c in enumerate(REFERENCE)])
def test_matches_jax(case):
    kwargs = {k: _arg(v) for k, v in case["kwargs"].items()}
    with fnx.enable_x64(_is_64_bit(case) or case["x64"]):
        if case["fn"] == "PRNGKey":
            out = random.PRNGKey(case["seed"])
        else:   # the recorder's key: the seed's 64 bits (PRNGKey's under x64)
            seed = case["seed"] % 2**64
            key = fnp.asarray(np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32))
            out = getattr(random, case["fn"])(key, **kwargs)
    out = np.asarray(out)
    expected = np.asarray(case["data"], dtype=case["dtype"]).reshape(case["shape"])
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if case["exact"]:
        np.testing.assert_array_equal(out, expected)
    else:   # through erf_inv, log, tan, a Cholesky factor: XLA's last bits differ
        eps = np.finfo(expected.dtype).eps * case.get("tol", 16)
        np.testing.assert_allclose(out, expected, rtol=eps, atol=eps)


def test_reference_covers_the_api():
    assert {c["fn"] for c in REFERENCE} >= {
        "PRNGKey", "split", "fold_in", "bits", "uniform", "normal", "randint", "bernoulli",
        "categorical", "permutation", "choice", "gumbel", "truncated_normal",
        "multivariate_normal", "exponential", "laplace", "logistic", "gamma", "loggamma",
        "beta", "dirichlet", "cauchy", "pareto", "rayleigh", "weibull_min", "lognormal",
        "maxwell", "double_sided_maxwell", "triangular", "wald", "rademacher", "geometric",
        "poisson", "binomial", "multinomial", "t", "chisquare", "f", "generalized_normal",
        "ball", "orthogonal"}
    assert any(c["dtype"] == "float64" for c in REFERENCE)
    assert any(c["shape"] == [] for c in REFERENCE if c["fn"] == "uniform")


def test_threefry_known_answers():
    # Random123's known-answer vectors for threefry2x32 with 20 rounds
    kat = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
           ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
           ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for (k1, k2), (x1, x2), want in kat:
        got = random.threefry2x32(*(np.uint32(v) for v in (k1, k2, x1, x2)))
        assert tuple(int(np.asarray(g)) for g in got) == want


def test_prngkey_seeds():
    # JAX 0.10.2's keys: a Python int seed is 32-bit without x64 (fnx warns where that
    # drops bits), 64-bit with it
    random._api._warned_seed.clear()
    with pytest.warns(UserWarning, match="does not fit in 32 bits"):
        assert np.asarray(random.PRNGKey(2**32 + 7)).tolist() == [0, 7]
    assert np.asarray(random.PRNGKey(-1)).tolist() == [0, 2**32 - 1]
    assert np.asarray(random.PRNGKey(2**40 + 3)).tolist() == [0, 3]
    with fnx.enable_x64():
        assert np.asarray(random.PRNGKey(2**32 + 7)).tolist() == [1, 7]
        assert np.asarray(random.PRNGKey(-1)).tolist() == [2**32 - 1] * 2
        assert np.asarray(random.PRNGKey(2**40 + 3)).tolist() == [256, 3]
    assert np.asarray(random.key(5)).tolist() == [0, 5]
    with fnx.enable_x64():  # a 64-bit seed array needs x64 (else it is narrowed to int32)
        traced = fnx.jit(random.PRNGKey)(np.int64(2**40 + 3))
        np.testing.assert_array_equal(traced, random.PRNGKey(2**40 + 3))
    np.testing.assert_array_equal(fnx.jit(random.PRNGKey)(np.int32(9)), random.PRNGKey(9))
    keys = fnx.vmap(random.PRNGKey)(np.arange(3, dtype=np.int32))
    np.testing.assert_array_equal(keys, np.stack([random.PRNGKey(i) for i in range(3)]))


# --- keys through transformations ---------------------------------------------------------

SAMPLERS = {
    "bits": lambda k: random.bits(k, (5,)),
    "uniform": lambda k: random.uniform(k, (2, 3), minval=-1.0, maxval=2.0),
    "normal": lambda k: random.normal(k, (7,)),
    "normal64": lambda k: random.normal(k, (3,), dtype="float64"),
    "randint": lambda k: random.randint(k, (6,), -3, 9),
    "bernoulli": lambda k: random.bernoulli(k, 0.3, (8,)),
    "categorical": lambda k: random.categorical(k, fnp.array([[0.0, 1.0, 2.0]] * 2)),
    "permutation": lambda k: random.permutation(k, 6),
    "choice": lambda k: random.choice(k, 5, (3,), replace=False),
    "gumbel": lambda k: random.gumbel(k, (4,)),
    "truncated_normal": lambda k: random.truncated_normal(k, -1.0, 1.5, (4,)),
    "mvn": lambda k: random.multivariate_normal(k, fnp.zeros(2), fnp.eye(2) * 2.0, (3,)),
    "gamma": lambda k: random.gamma(k, fnp.array([0.3, 1.0, 4.0])),
    "beta": lambda k: random.beta(k, 2.0, 3.0, (3,)),
    "dirichlet": lambda k: random.dirichlet(k, fnp.array([1.0, 2.0, 0.5])),
    "split": lambda k: random.split(k, 3),
    "fold_in": lambda k: random.fold_in(k, 17),
    "cauchy": lambda k: random.cauchy(k, (3,)),
    "pareto": lambda k: random.pareto(k, fnp.array([1.0, 3.0])),
    "rayleigh": lambda k: random.rayleigh(k, 2.0, (3,)),
    "weibull_min": lambda k: random.weibull_min(k, 1.0, 1.5, (3,)),
    "lognormal": lambda k: random.lognormal(k, 0.5, (3,)),
    "maxwell": lambda k: random.maxwell(k, (3,)),
    "double_sided_maxwell": lambda k: random.double_sided_maxwell(k, 1.0, 2.0, (3,)),
    "triangular": lambda k: random.triangular(k, 0.0, 0.2, 1.0, (3,)),
    "wald": lambda k: random.wald(k, 1.5, (3,)),
    "rademacher": lambda k: random.rademacher(k, (8,)),
    "geometric": lambda k: random.geometric(k, 0.3, (4,)),
    "poisson": lambda k: random.poisson(k, fnp.array([0.5, 4.0, 30.0, 500.0])),
    "binomial": lambda k: random.binomial(k, fnp.array([5.0, 50.0, 500.0]), 0.7),
    "multinomial": lambda k: random.multinomial(k, 30.0, fnp.array([0.2, 0.3, 0.5])),
    "t": lambda k: random.t(k, 3.0, (3,)),
    "chisquare": lambda k: random.chisquare(k, fnp.array([0.5, 4.0])),
    "f": lambda k: random.f(k, 3.0, 5.0, (3,)),
    "generalized_normal": lambda k: random.generalized_normal(k, 1.5, (3,)),
    "ball": lambda k: random.ball(k, 3, 1.0, (2,)),
    "orthogonal": lambda k: random.orthogonal(k, 3),
    "clone": lambda k: random.clone(k),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_same_key_same_numbers_eager_jit_vmap(name, request):
    if name.endswith("64"):
        request.getfixturevalue("x64")
    f = SAMPLERS[name]
    key = random.PRNGKey(123)
    eager = np.asarray(f(key))
    np.testing.assert_array_equal(np.asarray(f(key)), eager)
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(key)), eager)
    keys = random.split(random.PRNGKey(7), 3)
    batched = np.asarray(fnx.vmap(f)(keys))
    looped = np.stack([np.asarray(f(keys[i])) for i in range(3)])
    np.testing.assert_array_equal(batched, looped)
    np.testing.assert_array_equal(np.asarray(fnx.jit(fnx.vmap(f))(keys)), looped)
    other = np.asarray(f(random.PRNGKey(124)))
    assert not np.array_equal(other, eager) or name in ("categorical", "clone")


def test_vmap_over_parameters_not_keys():
    key = random.PRNGKey(0)
    ps = fnp.array([0.1, 0.5, 0.9])
    out = fnx.vmap(lambda p: random.bernoulli(key, p, (4,)))(ps)
    loop = np.stack([np.asarray(random.bernoulli(key, ps[i], (4,))) for i in range(3)])
    np.testing.assert_array_equal(out, loop)
    a = fnp.array([0.5, 2.0])
    g = fnx.vmap(lambda al: random.gamma(key, al, (3,)))(a)
    np.testing.assert_array_equal(g, np.stack([np.asarray(random.gamma(key, a[i], (3,)))
                                               for i in range(2)]))
    # rejection loops (while_loop) with a batched condition: each lane as if alone
    lam = fnp.array([0.5, 7.0, 40.0])
    pois = fnx.vmap(lambda lm: random.poisson(key, lm, (5,)))(lam)
    np.testing.assert_array_equal(pois, np.stack([np.asarray(random.poisson(key, lam[i], (5,)))
                                                  for i in range(3)]))
    n = fnp.array([3.0, 80.0])
    bino = fnx.jit(fnx.vmap(lambda m: random.binomial(key, m, 0.4, (4,))))(n)
    np.testing.assert_array_equal(bino, np.stack([np.asarray(random.binomial(key, n[i], 0.4, (4,)))
                                                  for i in range(2)]))


def test_keys_under_scan():
    scan = getattr(fnx.lax, "scan", None)
    if scan is None:
        pytest.skip("fnx.lax.scan does not exist yet")

    def step(key, _):
        key, sub = random.split(key)
        return key, random.normal(sub, (2,))

    _, xs = scan(step, random.PRNGKey(3), None, length=4)
    key, expect = random.PRNGKey(3), []
    for _ in range(4):
        key, sub = random.split(key)
        expect.append(np.asarray(random.normal(sub, (2,))))
    np.testing.assert_array_equal(np.asarray(xs), np.stack(expect))


def test_split_and_fold_in_give_distinct_keys():
    key = random.PRNGKey(0)
    ks = np.asarray(random.split(key, 100))
    assert ks.shape == (100, 2) and ks.dtype == np.uint32
    assert len({tuple(k) for k in ks.tolist()}) == 100
    assert np.asarray(random.split(key, (2, 3))).shape == (2, 3, 2)
    folded = {tuple(np.asarray(random.fold_in(key, i)).tolist()) for i in range(50)}
    assert len(folded) == 50
    np.testing.assert_array_equal(random.fold_in(key, np.int32(-1)),
                                  random.fold_in(key, 2**32 - 1))


def test_zero_size_and_scalar_shapes():
    key = random.PRNGKey(1)
    assert random.uniform(key, (0, 3)).shape == (0, 3)
    assert random.normal(key).shape == ()
    assert random.randint(key, (), 0, 5).shape == ()
    assert random.choice(key, 5, (0,)).shape == (0,)
    assert random.gamma(key, 2.0, (0,)).shape == (0,)
    assert random.poisson(key, 3.0, (0,)).shape == (0,)
    assert random.binomial(key, 5, 0.5, (0, 2)).shape == (0, 2)
    assert random.orthogonal(key, 3, (0,)).shape == (0, 3, 3)
    assert random.ball(key, 0, shape=(2,)).shape == (2, 0)
    assert random.multinomial(key, 4.0, np.ones(3, np.float32) / 3).shape == (3,)


# --- distributions ------------------------------------------------------------------------
# One fixed seed each: deterministic, so a test that passes always passes. Sample sizes
# make a wrong distribution fail by many standard errors and a right one pass with room.

N = 20_000
KEY = random.PRNGKey(20240601)


def _ks(x, cdf, *args):
    p = stats.kstest(np.asarray(x, np.float64).ravel(), cdf, args=args).pvalue
    assert p > 1e-3, f"KS test rejects: p = {p:.2e}"


def test_uniform_distribution():
    u = np.asarray(random.uniform(KEY, (N,)))
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    _ks(u, "uniform")
    with fnx.enable_x64():
        v = np.asarray(random.uniform(KEY, (N,), "float64", minval=-3.0, maxval=5.0))
    assert v.dtype == np.float64 and v.min() >= -3.0 and v.max() < 5.0
    _ks(v, "uniform", -3.0, 8.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_distribution(dtype, request):
    if dtype == "float64":
        request.getfixturevalue("x64")
    x = np.asarray(random.normal(KEY, (N,), dtype))
    assert x.dtype == dtype and np.isfinite(x).all()
    assert abs(x.mean()) < 4 / math.sqrt(N) and abs(x.std() - 1) < 0.03
    _ks(x, "norm")


def test_truncated_normal_distribution():
    x = np.asarray(random.truncated_normal(KEY, -0.5, 2.0, (N,)))
    assert x.min() > -0.5 and x.max() < 2.0
    _ks(x, "truncnorm", -0.5, 2.0)


@pytest.mark.parametrize("name,dist", [("exponential", "expon"), ("laplace", "laplace"),
                                       ("logistic", "logistic"), ("gumbel", "gumbel_r")])
def test_simple_continuous(name, dist):
    x = np.asarray(getattr(random, name)(KEY, (N,)))
    assert np.isfinite(x).all()
    _ks(x, dist)


@pytest.mark.parametrize("alpha", [0.2, 0.9, 1.0, 2.5, 30.0])
def test_gamma_distribution(alpha):
    x = np.asarray(random.gamma(KEY, alpha, (N,)))
    assert (x >= 0).all() and np.isfinite(x).all()
    assert abs(x.mean() - alpha) < 5 * math.sqrt(alpha / N)
    _ks(x, "gamma", alpha)


def test_gamma_float64_and_loggamma(x64):
    x = np.asarray(random.gamma(KEY, 0.05, (N,), dtype="float64"))
    assert x.dtype == np.float64
    _ks(x, "gamma", 0.05)
    lx = np.asarray(random.loggamma(KEY, 0.05, (N,), dtype="float64"))
    # the same draws, in log space (where tiny samples keep their precision)
    np.testing.assert_allclose(np.exp(lx), x, rtol=1e-10, atol=1e-300)
    assert np.isfinite(lx).all()


def test_gamma_parameters_broadcast_and_invalid():
    a = fnp.array([[0.5], [3.0]])
    x = np.asarray(random.gamma(KEY, a, (2, N // 2)))
    _ks(x[0], "gamma", 0.5)
    _ks(x[1], "gamma", 3.0)
    edge = fnp.array([-1.0, np.nan, 0.0, np.inf, 2.0])
    bad = np.asarray(random.gamma(KEY, edge))     # as JAX: NaN, NaN, 0, inf, a sample
    assert np.isnan(bad[:2]).all() and bad[2] == 0 and bad[3] == np.inf
    assert np.isfinite(bad[4])
    log = np.asarray(random.loggamma(KEY, edge))
    assert np.isnan(log[:2]).all() and log[2] == -np.inf and log[3] == np.inf


def test_beta_distribution():
    x = np.asarray(random.beta(KEY, 0.7, 2.5, (N,)))
    assert (x >= 0).all() and (x <= 1).all()
    _ks(x, "beta", 0.7, 2.5)


def test_dirichlet_distribution():
    alpha = np.array([0.5, 2.0, 3.5])
    x = np.asarray(random.dirichlet(KEY, fnp.asarray(alpha.astype(np.float32)), (N,)))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)
    for i, a in enumerate(alpha):   # marginals are Beta(a_i, sum - a_i)
        _ks(x[:, i], "beta", a, alpha.sum() - a)


def test_multivariate_normal_moments():
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    x = np.asarray(random.multivariate_normal(KEY, mean, cov, (N,), dtype="float64"))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.mean(0), mean, atol=4 * math.sqrt(2.0 / N))
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.06)
    w = np.linalg.solve(np.linalg.cholesky(cov), (x - mean).T)   # whitened: N(0, I)
    _ks(w, "norm")


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_methods(method):
    if method != "cholesky" and not hasattr(fnp.linalg, method):
        pytest.skip(f"fnx.numpy.linalg.{method} does not exist")
    cov = np.array([[1.5, 0.4], [0.4, 0.8]])
    x = np.asarray(random.multivariate_normal(KEY, np.zeros(2), cov, (N,), "float64", method))
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.05)


def test_fallback_cholesky(x64):
    from fnx.random._api import _cholesky
    a = np.random.default_rng(0).standard_normal((2, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    np.testing.assert_allclose(_cholesky(fnp.asarray(spd)), np.linalg.cholesky(spd),
                               rtol=1e-12, atol=1e-12)


def _chi2_ok(counts, probs):
    p = stats.chisquare(counts, np.asarray(probs) * counts.sum()).pvalue
    assert p > 1e-3, f"chi-square test rejects: p = {p:.2e}"


def test_randint_distribution():
    x = np.asarray(random.randint(KEY, (N,), -3, 7))
    assert x.dtype == np.int32 and x.min() == -3 and x.max() == 6
    _chi2_ok(np.bincount(x + 3, minlength=10), [0.1] * 10)
    big = np.asarray(random.randint(KEY, (N,), -2**31, 2**31 - 1))
    _ks((big.astype(np.float64) + 2**31) / (2**32 - 1), "uniform")
    assert np.asarray(random.randint(KEY, (5,), 4, 2)).tolist() == [4] * 5


def test_bernoulli_frequency():
    x = np.asarray(random.bernoulli(KEY, 0.3, (N,)))
    assert x.dtype == np.bool_
    assert abs(x.mean() - 0.3) < 4 * math.sqrt(0.21 / N)
    assert not np.asarray(random.bernoulli(KEY, 0.0, (100,))).any()
    assert np.asarray(random.bernoulli(KEY, 1.0, (100,))).all()


def test_categorical_frequencies():
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4], np.float32))
    x = np.asarray(random.categorical(KEY, logits, shape=(N,)))
    _chi2_ok(np.bincount(x, minlength=4), [0.1, 0.2, 0.3, 0.4])
    y = np.asarray(random.categorical(KEY, np.stack([logits, logits[::-1]]), axis=-1,
                                      shape=(N // 2, 2)))
    _chi2_ok(np.bincount(y[:, 1], minlength=4), [0.4, 0.3, 0.2, 0.1])
    z = np.asarray(random.categorical(KEY, logits, shape=(3,), replace=False))
    assert len(set(z.tolist())) == 3


def test_permutation_uniform_over_orders():
    keys = random.split(KEY, 6000)
    perms = np.asarray(fnx.vmap(lambda k: random.permutation(k, 3))(keys))
    assert (np.sort(perms, axis=1) == np.arange(3)).all()
    codes = perms[:, 0] * 9 + perms[:, 1] * 3 + perms[:, 2]
    _, counts = np.unique(codes, return_counts=True)
    assert len(counts) == 6
    _chi2_ok(counts, [1 / 6] * 6)
    x = np.arange(12).reshape(4, 3)
    rows = np.asarray(random.permutation(KEY, x))
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, x.tolist()))
    ind = np.asarray(random.permutation(KEY, x, axis=1, independent=True))
    assert (np.sort(ind, axis=1) == x).all()


def test_choice_frequencies():
    p = np.array([0.5, 0.1, 0.4], np.float32)
    x = np.asarray(random.choice(KEY, 3, (N,), p=p))
    _chi2_ok(np.bincount(x, minlength=3), p)
    y = np.asarray(random.choice(KEY, 10, (10,), replace=False))
    assert sorted(y.tolist()) == list(range(10))
    z = np.asarray(random.choice(KEY, fnp.arange(6) * 10, (4,), replace=False, p=np.ones(6)))
    assert len(set(z.tolist())) == 4 and all(v % 10 == 0 for v in z.tolist())
    rows = np.asarray(random.choice(KEY, np.arange(12).reshape(4, 3), (2,), axis=0))
    assert rows.shape == (2, 3)


@pytest.mark.parametrize("name,args,dist,dist_args", [
    ("cauchy", (), "cauchy", ()),
    ("pareto", (2.5,), "pareto", (2.5,)),
    ("rayleigh", (1.7,), "rayleigh", (0.0, 1.7)),
    ("weibull_min", (2.0, 1.5), "weibull_min", (1.5, 0.0, 2.0)),
    ("lognormal", (0.6,), "lognorm", (0.6,)),
    ("maxwell", (), "maxwell", ()),
    ("triangular", (-1.0, 0.5, 2.0), "triang", (0.5, -1.0, 3.0)),
    ("wald", (1.7,), "invgauss", (1.7,)),
    ("t", (3.0,), "t", (3.0,)),
    ("t", (0.7,), "t", (0.7,)),
    ("chisquare", (0.6,), "chi2", (0.6,)),
    ("chisquare", (9.0,), "chi2", (9.0,)),
    ("f", (4.0, 7.0), "f", (4.0, 7.0)),
    ("generalized_normal", (0.8,), "gennorm", (0.8,)),
    ("generalized_normal", (3.0,), "gennorm", (3.0,)),
])
def test_more_continuous_distributions(name, args, dist, dist_args):
    x = np.asarray(getattr(random, name)(KEY, *args, shape=(N,)))
    assert x.shape == (N,) and x.dtype == np.float32 and np.isfinite(x).all()
    _ks(x, dist, *dist_args)


def test_double_sided_maxwell_and_float64(x64):
    x = np.asarray(random.double_sided_maxwell(KEY, 1.0, 2.0, (N,), dtype="float64"))
    assert x.dtype == np.float64
    _ks(np.abs(x - 1.0) / 2.0, "maxwell")            # |x - loc| / scale is Maxwell
    assert abs((x > 1.0).mean() - 0.5) < 4 * math.sqrt(0.25 / N)   # symmetric
    y = np.asarray(random.pareto(KEY, 3.0, (N,), dtype="float64"))
    assert y.dtype == np.float64 and y.min() >= 1.0
    _ks(y, "pareto", 3.0)
    z = np.asarray(random.t(KEY, 5.0, (N,), dtype="float64"))
    _ks(z, "t", 5.0)


@pytest.mark.parametrize("p", [1.0, 2.0, 4.0])
def test_ball_uniform(p):
    d = 3
    x = np.asarray(random.ball(KEY, d, p, (N // 2,)))
    assert x.shape == (N // 2, d)
    r = (np.abs(x.astype(np.float64)) ** p).sum(-1) ** (1 / p)
    assert r.max() <= 1.0 + 1e-6
    _ks(r ** d, "uniform")                          # P(r <= s) = s^d in the unit ball
    assert abs(np.mean(x[:, 0] > 0) - 0.5) < 4 * math.sqrt(0.25 / (N // 2))


def test_orthogonal_haar():
    q = np.asarray(random.orthogonal(KEY, 3, (N // 4,)), np.float64)
    assert q.shape == (N // 4, 3, 3)
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(3), q.shape),
                               atol=1e-5)
    # a column of a Haar-random O(3) matrix is uniform on the sphere, so each entry is
    # uniform on [-1, 1] (Archimedes); the sign fix leaves the determinant +-1 equally
    _ks(q[:, 0, 0], "uniform", -1.0, 2.0)
    _ks(q[:, 2, 1], "uniform", -1.0, 2.0)
    det = np.linalg.det(q)
    assert abs((det > 0).mean() - 0.5) < 4 * math.sqrt(0.25 / len(det))
    wide = np.asarray(random.orthogonal(KEY, 2, m=5))
    np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-5)
    tall = np.asarray(random.orthogonal(KEY, 5, m=2))
    np.testing.assert_allclose(tall.T @ tall, np.eye(2), atol=1e-5)


def _chi2_pmf(x, dist, lo, hi):
    """Chi-square test of integer samples against the frozen scipy ``dist`` over
    ``lo..hi`` (the tails lumped into the end bins)."""
    k = np.arange(lo, hi + 1)
    probs = dist.pmf(k)
    probs[0] += dist.cdf(lo - 1)
    probs[-1] += dist.sf(hi)
    counts = np.bincount(np.clip(np.asarray(x).astype(np.int64), lo, hi) - lo,
                         minlength=len(k))
    _chi2_ok(counts, probs)


@pytest.mark.parametrize("lam", [0.7, 4.0, 9.9, 25.0, 300.0])
def test_poisson_distribution(lam):
    x = np.asarray(random.poisson(KEY, lam, (N,)))
    assert x.dtype == np.int32 and x.min() >= 0
    sd = math.sqrt(lam)
    lo, hi = max(0, int(lam - 4 * sd)), int(lam + 4 * sd) + 1
    _chi2_pmf(x, stats.poisson(lam), lo, hi)
    assert abs(x.mean() - lam) < 5 * sd / math.sqrt(N)
    zero = np.asarray(random.poisson(KEY, fnp.array([0.0, 0.0])))
    assert zero.tolist() == [0, 0]


@pytest.mark.parametrize("n,p", [(7, 0.3), (30, 0.2), (200, 0.4), (200, 0.85), (5000, 0.5)])
def test_binomial_distribution(n, p):
    x = np.asarray(random.binomial(KEY, n, p, (N,)))
    assert x.dtype == np.float32 and (x == np.round(x)).all() and 0 <= x.min() <= x.max() <= n
    sd = math.sqrt(n * p * (1 - p))
    lo, hi = max(0, int(n * p - 4 * sd)), min(n, int(n * p + 4 * sd) + 1)
    _chi2_pmf(x, stats.binom(n, p), lo, hi)


def test_binomial_edge_parameters():
    x = np.asarray(random.binomial(KEY, fnp.array([5.0, -1.0, np.nan, 5.0, np.inf, 4.7, 6.0]),
                                   fnp.array([0.0, 0.5, 0.5, np.nan, 0.5, 1.0, 1.0])))
    assert x[0] == 0 and np.isnan(x[1:4]).all() and x[4] == np.inf
    assert x[5] == 4 and x[6] == 6                  # n is floored; p = 1 gives n


def test_geometric_and_rademacher():
    x = np.asarray(random.geometric(KEY, 0.3, (N,)))
    assert x.dtype == np.int32 and x.min() >= 1
    _chi2_pmf(x, stats.geom(0.3), 1, 20)
    r = np.asarray(random.rademacher(KEY, (N,)))
    assert r.dtype == np.int32 and set(np.unique(r).tolist()) == {-1, 1}
    assert abs(r.mean()) < 4 / math.sqrt(N)
    assert np.asarray(random.rademacher(KEY, (3,), "float32")).dtype == np.float32


def test_multinomial_distribution():
    p = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    x = np.asarray(random.multinomial(KEY, 25.0, p, shape=(N // 4, 4)))
    assert x.shape == (N // 4, 4) and x.dtype == np.float32
    assert (x.sum(-1) == 25).all() and x.min() >= 0
    for i in range(4):                              # marginals are Binomial(n, p_i)
        _chi2_pmf(x[:, i], stats.binom(25, p[i]), 0, 20)
    b = np.asarray(random.multinomial(KEY, fnp.array([3.0, 40.0]), fnp.array([[0.5, 0.5, 0.0],
                                                                             [0.2, 0.0, 0.8]])))
    assert b.tolist()[0][2] == 0 and b.tolist()[1][1] == 0
    np.testing.assert_array_equal(b.sum(-1), [3, 40])


def test_key_utilities():
    key = random.PRNGKey(3)
    assert random.key_impl(key) == "threefry2x32"
    assert random.key_impl(random.split(key, 4)) == "threefry2x32"
    np.testing.assert_array_equal(random.clone(key), key)
    np.testing.assert_array_equal(random.uniform(random.clone(key), (3,)),
                                  random.uniform(key, (3,)))
    with pytest.raises(TypeError, match=r"key_impl: .*f32\[3\].*PRNGKey"):
        random.key_impl(np.zeros(3, np.float32))


# --- dropout masks ---------------------------------------------------------------------

def dropout(key, x, rate):
    keep = random.bernoulli(key, 1.0 - rate, x.shape)
    return fnp.where(keep, x / (1.0 - rate), 0.0), keep


def test_dropout_masks_reproducible_from_the_key():
    x = fnp.ones((64, 128))
    key = random.PRNGKey(42)
    y1, m1 = dropout(key, x, 0.25)
    y2, m2 = fnx.jit(dropout, static_argnums=2)(key, x, 0.25)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(y1, y2)
    _, m3 = dropout(random.fold_in(key, 1), x, 0.25)
    _, m4 = dropout(random.split(key)[0], x, 0.25)
    m1, m3, m4 = (np.asarray(m) for m in (m1, m3, m4))
    assert (m1 != m3).mean() > 0.2 and (m1 != m4).mean() > 0.2
    n = m1.size
    assert abs(m1.mean() - 0.75) < 4 * math.sqrt(0.75 * 0.25 / n)
    np.testing.assert_allclose(np.asarray(y1)[m1], 1 / 0.75)
    # a training loop: one key per step, the same masks on a rerun
    rerun = [np.asarray(dropout(random.fold_in(key, s), x, 0.5)[1]) for s in range(3)]
    again = [np.asarray(dropout(random.fold_in(key, s), x, 0.5)[1]) for s in range(3)]
    for a, b in zip(rerun, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(rerun[0], rerun[1])


def test_dropout_gradient_flows_through_the_mask():
    key = random.PRNGKey(0)
    x = fnp.linspace(1.0, 2.0, 10)
    g = fnx.grad(lambda x: dropout(key, x, 0.5)[0].sum())(x)
    keep = np.asarray(dropout(key, x, 0.5)[1])
    np.testing.assert_allclose(g, np.where(keep, 2.0, 0.0))


# --- errors -------------------------------------------------------------------------------

def test_bad_keys_name_the_function_and_the_fix():
    with pytest.raises(TypeError, match=r"uniform: .*float32\[2\].*PRNGKey"):
        random.uniform(fnp.zeros(2), (3,))
    with pytest.raises(TypeError, match=r"normal: .*uint32\[3\].*PRNGKey"):
        random.normal(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match=r"split: .*uint32\[4,2\].*vmap"):
        random.split(random.split(random.PRNGKey(0), 4))
    with pytest.raises(TypeError, match=r"bits: .*number 3.*PRNGKey\(3\)"):
        random.bits(3)
    with pytest.raises(TypeError, match="PRNGKey: seed must be"):
        random.PRNGKey(1.5)
    with pytest.raises(OverflowError, match="64 bits"):
        random.PRNGKey(2**64)


def test_bad_shapes_and_parameters():
    key = random.PRNGKey(0)
    with pytest.raises(ValueError, match="uniform: shape"):
        random.uniform(key, (-1,))
    with pytest.raises(ValueError, match="uniform: parameter shapes"):
        random.uniform(key, (3,), minval=fnp.zeros(4))
    with pytest.raises(ValueError, match="bernoulli: parameter shapes"):
        random.bernoulli(key, fnp.full((2,), 0.5), (3,))
    with pytest.raises(ValueError, match="normal: dtype must be a float"):
        random.normal(key, (2,), "int32")
    with pytest.raises(TypeError, match="randint: dtype must be an integer"):
        random.randint(key, (2,), 0, 3, "float32")
    with pytest.raises(ValueError, match="bits: dtype must be an unsigned"):
        random.bits(key, (2,), "int32")
    with pytest.raises(ValueError, match="choice: cannot take 6 samples"):
        random.choice(key, 5, (6,), replace=False)
    with pytest.raises(ValueError, match=r"choice: p must have shape \(5,\)"):
        random.choice(key, 5, (2,), p=np.ones(4))
    with pytest.raises(ValueError, match="categorical: 5 samples without replacement"):
        random.categorical(key, np.zeros(3), shape=(5,), replace=False)
    with pytest.raises(ValueError, match="multivariate_normal: cov must have shape"):
        random.multivariate_normal(key, np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="dirichlet: alpha must have rank"):
        random.dirichlet(key, 1.0)
    with pytest.raises(ValueError, match="bernoulli: mode"):
        random.bernoulli(key, 0.5, mode="medium")
    with pytest.raises(TypeError, match="fold_in: data must be a scalar"):
        random.fold_in(key, np.arange(3))


def test_bad_parameters_of_the_later_samplers(x64):
    key = random.PRNGKey(0)
    with pytest.raises(ValueError, match="cauchy: dtype must be a float dtype, got int32; pass"):
        random.cauchy(key, (2,), "int32")
    with pytest.raises(ValueError, match="geometric: dtype must be an integer dtype"):
        random.geometric(key, 0.5, (2,), "float32")
    with pytest.raises(TypeError, match="poisson: dtype must be an integer dtype"):
        random.poisson(key, 3.0, (2,), "float32")
    with pytest.raises(ValueError, match="binomial: dtype must be a float"):
        random.binomial(key, 3, 0.5, dtype="int32")
    with pytest.raises(ValueError, match=r"pareto: parameter shapes \(3,\) must broadcast to "
                                         r"the shape argument \(2,\)"):
        random.pareto(key, fnp.ones(3), (2,))
    with pytest.raises(ValueError, match="triangular: parameter shapes"):
        random.triangular(key, fnp.zeros(2), 0.5, fnp.ones(3))
    with pytest.raises(fnx.dtypes.TypePromotionError,
                       match=r"t: cannot safely cast .* float64 to dtype=float32; pass"):
        random.t(key, np.ones(2), dtype="float32")
    with pytest.raises(ValueError, match="ball: d must be a non-negative int, got -1"):
        random.ball(key, -1)
    with pytest.raises(TypeError, match="orthogonal: n must be a static non-negative int"):
        fnx.jit(lambda n: random.orthogonal(key, n))(3)
    with pytest.raises(ValueError, match="multinomial: p must have rank >= 1"):
        random.multinomial(key, 3.0, 0.5)
    with pytest.raises(ValueError, match=r"multinomial: n \(shape \(3,\)\) must broadcast"):
        random.multinomial(key, fnp.ones(3), fnp.ones((2, 4)) / 4)
    with pytest.raises(ValueError, match="double_sided_maxwell: loc and scale must broadcast"):
        random.double_sided_maxwell(key, fnp.zeros(2), fnp.ones(3))
    with pytest.raises(TypeError, match=r"poisson: .*number 3.*PRNGKey\(3\)"):
        random.poisson(3, 1.0)


def test_gamma_gradient_raises_clearly():
    with pytest.raises(NotImplementedError, match="not differentiable with respect to alpha"):
        fnx.grad(lambda a: random.gamma(random.PRNGKey(0), a))(2.0)
    # without a gradient through alpha, gamma samples are fine inside grad
    g = fnx.grad(lambda s: (s * random.gamma(random.PRNGKey(0), 2.0, (3,))).sum())(1.0)
    np.testing.assert_allclose(g, np.asarray(random.gamma(random.PRNGKey(0), 2.0, (3,))).sum(),
                               rtol=1e-6)
