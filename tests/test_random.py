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
    with fnx.enable_x64(_is_64_bit(case)):
        if case["fn"] == "PRNGKey":
            out = random.PRNGKey(case["seed"])
        else:
            out = getattr(random, case["fn"])(random.PRNGKey(case["seed"]), **kwargs)
    out = np.asarray(out)
    expected = np.asarray(case["data"], dtype=case["dtype"]).reshape(case["shape"])
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if case["exact"]:
        np.testing.assert_array_equal(out, expected)
    else:   # through erf_inv, log, tan, a Cholesky factor: XLA's last bits differ
        eps = np.finfo(expected.dtype).eps
        np.testing.assert_allclose(out, expected, rtol=16 * eps, atol=16 * eps)


def test_reference_covers_the_api():
    assert {c["fn"] for c in REFERENCE} >= {
        "PRNGKey", "split", "fold_in", "bits", "uniform", "normal", "randint", "bernoulli",
        "categorical", "permutation", "choice", "gumbel", "truncated_normal",
        "multivariate_normal", "exponential", "laplace", "logistic"}
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
    assert np.asarray(random.PRNGKey(2**32 + 7)).tolist() == [1, 7]
    assert np.asarray(random.PRNGKey(-1)).tolist() == [2**32 - 1] * 2
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
    assert not np.array_equal(other, eager) or name in ("categorical",)


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
    bad = np.asarray(random.gamma(KEY, fnp.array([-1.0, 0.0, np.nan, 2.0])))
    assert np.isnan(bad[:3]).all() and np.isfinite(bad[3])


def test_beta_distribution():
    x = np.asarray(random.beta(KEY, 0.7, 2.5, (N,)))
    assert (x >= 0).all() and (x <= 1).all()
    _ks(x, "beta", 0.7, 2.5)


def test_dirichlet_distribution():
    alpha = np.array([0.5, 2.0, 3.5])
    x = np.asarray(random.dirichlet(KEY, fnp.asarray(alpha), (N,)))
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


def test_gamma_gradient_raises_clearly():
    with pytest.raises(NotImplementedError, match="not differentiable with respect to alpha"):
        fnx.grad(lambda a: random.gamma(random.PRNGKey(0), a))(2.0)
    # without a gradient through alpha, gamma samples are fine inside grad
    g = fnx.grad(lambda s: (s * random.gamma(random.PRNGKey(0), 2.0, (3,))).sum())(1.0)
    np.testing.assert_allclose(g, np.asarray(random.gamma(random.PRNGKey(0), 2.0, (3,))).sum(),
                               rtol=1e-6)
