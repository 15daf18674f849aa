"""Record reference vectors of ``jax.random`` for ``tests/test_random.py``.

Needs JAX (any version whose default generator is threefry-2x32 with
``jax_threefry_partitionable=True``, the default since JAX 0.5; recorded with
JAX 0.10.2). It is never run by the tests, which read its output,
``jax_random_reference.json`` beside it. Regenerate with::

    python tests/data/make_jax_random_reference.py

Each case names a function of ``fnx.random`` (same name and call form as
``jax.random``), its seed and keyword arguments, whether JAX ran in 64-bit
mode (``jax_enable_x64``: float64/int64/uint64 results), the result's dtype
and shape, the flattened result, and ``exact``: whether fnx must reproduce
the numbers bit for bit (bits, keys, integers, uniform floats and what is
computed from them by comparisons and sorts, and the integer samplers whose
loops compare logs: poisson, binomial, multinomial, geometric) or to ``tol``
float epsilons, relative and absolute (results through erf_inv, log, tan, a
Cholesky or QR factor: XLA's and NumPy's transcendental functions differ in
the last bits; 16 unless a case says more: the later samplers' cases allow 64,
as exp, pow and log1p chains in float64 and the gamma family's rejection loop,
which raises samples to powers like ``1/a``, lose a few more bits).

Seeds: ``PRNGKey`` takes a Python int seed as 64 bits with ``jax_enable_x64`` and
as 32 bits without it (fnx as JAX). ``PRNGKey`` cases come from the x64 run (and the
32-bit run for seeds that fit in 32 bits), and every other case is drawn from the key
``uint32[seed >> 32, seed & 0xFFFFFFFF]`` (``PRNGKey(seed)`` under x64), which the
test builds the same way.
"""
import json
import os

import numpy as np

import jax
import jax.numpy as jnp

SEEDS = [0, 1, 42, 2**32 + 7, 2**63 - 1, -1]

cases = []


def make_key(seed):
    """JAX's x64 ``PRNGKey(seed)``: the raw key of the 64-bit seed."""
    seed %= 2**64
    return jnp.asarray(np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32))


def record(fn, seed, kwargs, out, exact=True, x64=False, tol=None):
    out = np.asarray(out)
    data = out.ravel().tolist()
    case = dict(fn=fn, seed=seed, kwargs=kwargs, x64=x64, exact=exact,
                dtype=str(out.dtype), shape=list(out.shape), data=data)
    if tol is not None:
        case["tol"] = tol
    cases.append(case)


def arr(x):
    """A kwarg that is an array: recorded as {"array": values, "dtype": ...}."""
    x = np.asarray(x)
    return {"array": x.tolist(), "dtype": str(x.dtype)}


def unarr(v):
    if isinstance(v, dict) and "array" in v:
        return jnp.asarray(np.asarray(v["array"], dtype=v["dtype"]))
    if isinstance(v, list):
        return tuple(v)
    return v


def run(fn, seed, x64=False, exact=True, tol=None, **kwargs):
    key = make_key(seed)
    out = getattr(jax.random, fn)(key, **{k: unarr(v) for k, v in kwargs.items()})
    record(fn, seed, kwargs, out, exact=exact, x64=x64, tol=tol)


TOL = 64   # the later samplers' float tolerance: see the module docstring


def more_samplers(s, x64):
    """The samplers added after the first recording: each with several shapes, dtypes
    and parameters (float32), or one float64/int64 case each (``x64``)."""
    f = np.float64 if x64 else np.float32
    fl = "float64" if x64 else "float32"
    approx = gam = dict(x64=x64, exact=False, tol=TOL)
    run("cauchy", s, shape=[7], dtype=fl, **approx)
    run("pareto", s, b=arr(f([0.5, 1.0, 3.0])), shape=[2, 3], dtype=fl, **approx)
    run("rayleigh", s, scale=arr(f([0.5, 1.0, 2.0])), shape=[4, 3], dtype=fl, **approx)
    run("weibull_min", s, scale=2.0, concentration=1.5, shape=[7], dtype=fl, **approx)
    run("lognormal", s, sigma=arr(f([0.5, 2.0])), dtype=fl, **approx)
    run("maxwell", s, shape=[7], dtype=fl, **approx)
    run("double_sided_maxwell", s, loc=1.0, scale=2.0, shape=[5], dtype=fl, **approx)
    run("triangular", s, left=arr(f([0.0, -1.0, 2.0])), mode=arr(f([0.3, 0.0, 2.0])),
        right=arr(f([2.0, 1.0, 5.0])), shape=[2, 3], dtype=fl, **approx)
    run("wald", s, mean=arr(f([0.5, 1.5, 4.0])), dtype=fl, **approx)
    run("rademacher", s, shape=[9], dtype="int64" if x64 else "int32", x64=x64)
    run("geometric", s, p=arr(f([0.05, 0.3, 0.5, 0.9])), shape=[2, 4],
        dtype="int64" if x64 else "int32", x64=x64)
    run("poisson", s, lam=arr(np.float32([0.0, 0.5, 5.0, 9.9, 10.0, 30.0, 1000.0])),
        dtype="int64" if x64 else "int32", x64=x64)
    run("binomial", s, n=arr(f([5.0, 20.0, 100.0, 1000.0])),
        p=arr(f([0.1, 0.5, 0.7, 0.95])), dtype=fl, x64=x64)
    run("multinomial", s, n=arr(f([5.0, 60.0])), p=arr(f([[0.1, 0.2, 0.3, 0.4]] * 2)),
        dtype=fl, x64=x64)
    run("gamma", s, a=arr(f([0.05, 0.5, 1.0, 2.5, 30.0])), dtype=fl, **gam)
    run("loggamma", s, a=arr(f([0.05, 0.5, 1.0, 2.5, 30.0])), dtype=fl, **gam)
    run("beta", s, a=arr(f([0.3, 2.0])), b=arr(f([[0.5], [4.0]])), dtype=fl, **gam)
    run("dirichlet", s, alpha=arr(f([0.2, 1.0, 3.0])), shape=[2], dtype=fl, **gam)
    run("t", s, df=arr(f([1.0, 3.0, 30.0])), dtype=fl, **gam)
    run("chisquare", s, df=arr(f([0.5, 2.0, 7.0])), dtype=fl, **gam)
    run("f", s, dfnum=arr(f([1.0, 5.0])), dfden=arr(f([3.0, 20.0])), dtype=fl, **gam)
    run("generalized_normal", s, p=1.5, shape=[7], dtype=fl, **gam)
    run("ball", s, d=3, p=2.0, shape=[4], dtype=fl, **gam)
    run("orthogonal", s, n=3, shape=[2], dtype=fl, **approx)
    if x64:
        return
    run("cauchy", s, shape=[2, 3], exact=False, tol=TOL)
    run("pareto", s, b=2.0, shape=[5], exact=False)
    run("lognormal", s, shape=[4], exact=False)
    run("weibull_min", s, scale=arr(np.float32([1.0, 3.0])), concentration=0.7,
        shape=[2], exact=False)
    run("double_sided_maxwell", s, loc=arr(np.float32([0.0, 5.0])), scale=1.0,
        shape=[3], exact=False)
    run("rademacher", s, shape=[2, 3], dtype="float32")
    run("rademacher", s, shape=[5], dtype="int8")
    run("geometric", s, p=0.5, shape=[9])
    run("poisson", s, lam=3.0, shape=[9])
    run("poisson", s, lam=arr(np.float32([[2.0], [50.0]])), shape=[2, 3], dtype="int16")
    run("binomial", s, n=10, p=0.3, shape=[9])
    run("binomial", s, n=200.0, p=0.5, shape=[6])
    run("multinomial", s, n=20.0, p=arr(np.float32([0.5, 0.25, 0.25])))
    run("gamma", s, a=2.0, shape=[7], exact=False, tol=TOL)
    run("t", s, df=4.0, shape=[5], exact=False, tol=TOL)
    run("generalized_normal", s, p=0.7, shape=[5], exact=False, tol=TOL)
    run("ball", s, d=2, p=1.0, shape=[3], exact=False, tol=TOL)
    run("orthogonal", s, n=2, m=4, exact=False, tol=TOL)
    run("orthogonal", s, n=4, m=2, exact=False, tol=TOL)


def recording(x64):
    jax.config.update("jax_enable_x64", x64)
    f64 = x64
    for s in SEEDS:
        if x64 or 0 <= s < 2**31:
            record("PRNGKey", s, {}, jax.random.PRNGKey(s), x64=x64)
    if f64:
        for s in [0, 42, 2**32 + 7]:
            run("bits", s, x64=True, shape=[7], dtype="uint64")
            run("bits", s, x64=True, shape=[2, 3], dtype="uint64")
            run("uniform", s, x64=True, shape=[7], dtype="float64")
            run("uniform", s, x64=True, shape=[3, 5], dtype="float64", minval=-2.0, maxval=3.5)
            run("normal", s, x64=True, exact=False, shape=[9], dtype="float64")
            run("randint", s, x64=True, shape=[6], minval=0, maxval=2**40, dtype="int64")
            run("randint", s, x64=True, shape=[6], minval=-7, maxval=100, dtype="int64")
            run("bernoulli", s, x64=True, p=arr(np.linspace(0.05, 0.95, 12)))
            run("gumbel", s, x64=True, exact=False, shape=[7], dtype="float64")
            more_samplers(s, True)
        return
    for s in [0, 42, 2**32 + 7]:
        for num in (2, 3, 5, [2, 3]):
            record("split", s, {"num": num},
                   jax.random.split(make_key(s), unarr(num)))
        for data in (0, 1, 7, 2**31, 2**32 - 1):
            record("fold_in", s, {"data": data},
                   jax.random.fold_in(make_key(s), data))
        for shape in ([], [1], [2], [7], [3, 5], [2, 3, 4], [0], [4, 0]):
            run("bits", s, shape=shape)
        run("bits", s, shape=[4, 5], dtype="uint8")
        run("bits", s, shape=[9], dtype="uint16")
        for shape in ([], [7], [3, 5]):
            run("uniform", s, shape=shape)
        run("uniform", s, shape=[3, 5], minval=-2.0, maxval=3.5)
        run("uniform", s, shape=[2, 3], minval=arr(np.float32([0.0, 1.0, 10.0])),
            maxval=20.0)
        for shape in ([], [9], [4, 5]):
            run("normal", s, exact=False, shape=shape)
        run("randint", s, shape=[10], minval=0, maxval=10)
        run("randint", s, shape=[3, 4], minval=-5, maxval=5)
        run("randint", s, shape=[], minval=0, maxval=1000)
        run("randint", s, shape=[7], minval=0, maxval=2**31 - 1)
        run("randint", s, shape=[7], minval=-2**31, maxval=2**31 - 1)
        run("randint", s, shape=[5], minval=3, maxval=3)
        run("randint", s, shape=[5], minval=9, maxval=2)
        run("randint", s, shape=[2, 3], minval=arr(np.int32([0, -10, 100])), maxval=200)
        run("randint", s, shape=[8], minval=0, maxval=256, dtype="uint8")
        run("randint", s, shape=[8], minval=-100, maxval=100, dtype="int8")
        run("bernoulli", s, p=0.3, shape=[11])
        run("bernoulli", s, p=arr(np.float32([[0.1, 0.5, 0.9, 0.0], [1.0, 0.25, 0.75, 0.5],
                                              [0.3, 0.3, 0.3, 0.3]])))
        run("bernoulli", s)
        logits = np.float32(np.linspace(-2, 2, 15).reshape(3, 5))
        run("categorical", s, logits=arr(logits))
        run("categorical", s, logits=arr(logits), axis=0)
        run("categorical", s, logits=arr(logits), shape=[4, 3])
        run("categorical", s, logits=arr(np.float32([0.0, 1.0, 2.0, -1.0])), shape=[6])
        run("permutation", s, x=10)
        run("permutation", s, x=1)
        run("permutation", s, x=arr(np.arange(21, dtype=np.int32).reshape(7, 3)))
        run("permutation", s, x=arr(np.arange(21, dtype=np.int32).reshape(7, 3)), axis=1)
        run("permutation", s, x=arr(np.arange(21, dtype=np.int32).reshape(7, 3)), axis=1,
            independent=True)
        run("choice", s, a=10, shape=[5])
        run("choice", s, a=10, shape=[4], replace=False)
        run("choice", s, a=arr(np.arange(12, dtype=np.int32).reshape(4, 3) * 10), shape=[2],
            axis=1)
        run("choice", s, a=arr(np.arange(12, dtype=np.int32).reshape(4, 3)), shape=[2, 2],
            replace=False)
        run("choice", s, a=5, shape=[8], p=arr(np.float32([0.1, 0.2, 0.3, 0.15, 0.25])))
        run("gumbel", s, exact=False, shape=[7])
        run("gumbel", s, exact=False, shape=[2, 3])
        run("exponential", s, exact=False, shape=[7])
        run("laplace", s, exact=False, shape=[7])
        run("logistic", s, exact=False, shape=[7])
        run("truncated_normal", s, exact=False, lower=-1.0, upper=2.0, shape=[7])
        run("truncated_normal", s, exact=False, lower=arr(np.float32([-3.0, 0.0, 1.0])),
            upper=arr(np.float32([3.0, 0.5, 4.0])))
        run("multivariate_normal", s, exact=False, mean=arr(np.float32([1.0, -1.0, 0.5])),
            cov=arr(np.float32([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])),
            shape=[4])
        more_samplers(s, False)


def main():
    recording(False)
    recording(True)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "jax_random_reference.json")
    with open(path, "w") as f:
        json.dump({"jax_version": jax.__version__, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
