"""Eager reverse mode (fnx/transforms/tape.py): the tape of cached per-call vjps.

Eager ``grad``/``vjp`` must agree with the jitted ones (which transpose one
whole-function linear IR), both the first time a call signature is seen
(derived afresh) and later (compiled and cached), and must keep eager Python
semantics: control flow on values, user rules that need concrete values,
vjp functions that are themselves transformed.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import LeakedTracerError
from fnx.transforms import tape


def rosenbrock(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def mlp_loss(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return fnp.mean((out - y) ** 2)


def softmax_xent(logits, labels):
    logp = logits - lax.stop_gradient(fnp.max(logits, axis=-1, keepdims=True))
    logp = logp - fnp.log(fnp.sum(fnp.exp(logp), axis=-1, keepdims=True))
    return -fnp.mean(fnp.take_along_axis(logp, labels[:, None], axis=-1))


def _mlp_args(rng):
    params = {"w1": rng.normal(size=(4, 8)), "b1": rng.normal(size=8),
              "w2": rng.normal(size=(8, 2)), "b2": rng.normal(size=2)}
    return (params, rng.normal(size=(5, 4)), rng.normal(size=(5, 2)))


CASES = [
    ("rosenbrock", rosenbrock, lambda r: (r.normal(size=10),)),
    ("mlp", mlp_loss, _mlp_args),
    ("xent", softmax_xent, lambda r: (r.normal(size=(6, 5)).astype(np.float32),
                                      r.integers(0, 5, size=6))),
    ("sort-cumsum", lambda x: fnp.sum(fnp.cumsum(fnp.sort(x)) * fnp.arange(7.0)),
     lambda r: (r.normal(size=7),)),
    ("where-max", lambda x, y: fnp.sum(fnp.where(x > 0, x * y, fnp.maximum(x, y) ** 3)),
     lambda r: (r.normal(size=(3, 4)), r.normal(size=4))),
]


@pytest.mark.parametrize("name,fun,make", CASES, ids=[c[0] for c in CASES])
def test_eager_grad_matches_jit_on_first_and_cached_calls(name, fun, make):
    args = make(np.random.default_rng(0))
    argnums = 0 if name in ("xent", "sort-cumsum", "mlp", "rosenbrock") else (0, 1)
    expected = fnx.jit(fnx.grad(fun, argnums))(*args)
    for _ in range(3):  # derived afresh, then compiled, then from the cache
        got = fnx.grad(fun, argnums)(*args)
        for g, e in zip(fnx.tree_util.tree_leaves(got), fnx.tree_util.tree_leaves(expected)):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6, atol=1e-6)


def test_calls_are_compiled_on_the_second_sighting():
    x = fnp.asarray(np.linspace(-1.0, 1.0, 13))  # a shape no other test uses
    key_sizes = []
    for _ in range(3):
        fnx.grad(lambda v: fnp.sum(fnp.sin(v) * v))(x)
        key_sizes.append(len(tape._RULES))
    assert key_sizes[1] > key_sizes[0] and key_sizes[2] == key_sizes[1]


def test_python_control_flow_on_values_under_eager_grad():
    def f(x):
        y = x
        while float(fnp.sum(y * y)) < 100.0:
            y = y * 2.0
        return fnp.sum(y) if float(y[0]) > 0 else -fnp.sum(y)

    for x0, scale in ((1.0, 8.0), (-1.0, -8.0)):  # three doublings
        x = fnp.asarray([x0, 2.0 * x0])
        g = fnx.grad(f)(x)
        assert np.allclose(np.asarray(g), [scale, scale])


def test_custom_vjp_whose_fwd_needs_concrete_values():
    @fnx.custom_vjp
    def clip_grad(x):
        return x

    def fwd(x):
        big = float(fnp.max(fnp.abs(x))) > 1.0  # Python control flow on a value
        return x, big

    def bwd(big, g):
        return (g * 0.5 if big else g,)

    clip_grad.defvjp(fwd, bwd)
    f = lambda x: fnp.sum(clip_grad(x) * 3.0)
    for _ in range(3):
        assert np.allclose(np.asarray(fnx.grad(f)(fnp.asarray([0.5, 2.0]))), 1.5)
        assert np.allclose(np.asarray(fnx.grad(f)(fnp.asarray([0.5, 0.2]))), 3.0)


def test_param_types_are_part_of_the_cache_key():
    x = fnp.asarray(np.arange(1.0, 4.0))
    for p, expect in ((2, 2 * np.arange(1.0, 4.0)), (3, 3 * np.arange(1.0, 4.0) ** 2)):
        for _ in range(3):
            g = fnx.grad(lambda v: fnp.sum(lax.integer_pow(v, p)))(x)
            assert np.allclose(np.asarray(g), expect)


def test_vjp_function_is_reusable_and_transformable():
    x = fnp.asarray(np.random.default_rng(1).normal(size=(3, 4)))
    f = lambda v: fnp.tanh(v) @ fnp.ones((4, 2)) * fnp.arange(1.0, 3.0)
    y, f_vjp = fnx.vjp(f, x)
    ct = fnp.asarray(np.random.default_rng(2).normal(size=(3, 2)))
    (a,), (b,) = f_vjp(ct), f_vjp(ct)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    (c,) = fnx.jit(f_vjp)(ct)  # traced cotangents: the bwd IRs are bound on jit's trace
    np.testing.assert_allclose(np.asarray(c), np.asarray(a), rtol=1e-12)
    cts = fnp.stack([ct, 2.0 * ct, -ct])
    (batched,) = fnx.vmap(f_vjp)(cts)
    for i, s in enumerate((1.0, 2.0, -1.0)):
        np.testing.assert_allclose(np.asarray(batched[i]), s * np.asarray(a), rtol=1e-12)
    jac = fnx.jacrev(f)(x)
    assert jac.shape == (3, 2, 3, 4)
    np.testing.assert_allclose(np.asarray(jac), np.asarray(fnx.jacfwd(f)(x)), rtol=1e-10)


def test_integer_inputs_and_outputs_carry_no_derivative():
    x, n = fnp.asarray([1.0, 2.0]), fnp.asarray([3, 4])
    (gx, gn), = [fnx.vjp(lambda a, b: a * b.astype(float), x, n)[1](fnp.ones(2))]
    assert np.array_equal(np.asarray(gx), [3.0, 4.0])
    assert gn.dtype == n.dtype and not np.any(np.asarray(gn))
    # an integer intermediate cuts the derivative, as in JAX
    g = fnx.grad(lambda a: fnp.sum(fnp.floor(a).astype(int) * a))(fnp.asarray([1.5, 2.5]))
    assert np.array_equal(np.asarray(g), [1.0, 2.0])


def test_unused_input_and_identity_output():
    y, f_vjp = fnx.vjp(lambda a, b: (a, a * 2.0), fnp.asarray(1.0), fnp.asarray(5.0))
    ga, gb = f_vjp((fnp.asarray(1.0), fnp.asarray(1.0)))
    assert float(ga) == 3.0 and float(gb) == 0.0


def test_leaked_tape_value_raises():
    box = []

    def f(x):
        box.append(x * 2.0)
        return fnp.sum(x)

    fnx.grad(f)(fnp.ones(3))
    with pytest.raises(LeakedTracerError, match="ended"):
        fnp.sin(box[0])


def test_grad_of_grad_and_jit_inside_eager_grad():
    f = lambda x: fnp.sum(fnp.sin(x) * x)
    x = fnp.asarray(np.array([0.3, -1.2]))
    for _ in range(3):
        gg = fnx.grad(lambda v: fnp.sum(fnx.grad(f)(v)))(x)
        xs = np.asarray(x)
        np.testing.assert_allclose(np.asarray(gg), 2 * np.cos(xs) - xs * np.sin(xs), rtol=1e-12)
        gj = fnx.grad(fnx.jit(f))(x)
        np.testing.assert_allclose(np.asarray(gj), np.sin(xs) + xs * np.cos(xs), rtol=1e-12)


@pytest.mark.x64  # checked to 1e-12 against float64 NumPy
def test_checkpoint_under_eager_grad_recomputes():
    calls = []

    def layer(x):
        calls.append(1)
        return fnp.tanh(x) * 2.0

    f = lambda x: fnp.sum(fnx.checkpoint(layer)(x))
    x = fnp.asarray(np.array([0.1, 0.2]))
    g = fnx.grad(f)(x)
    np.testing.assert_allclose(np.asarray(g), 2 / np.cosh([0.1, 0.2]) ** 2, rtol=1e-12)
    assert len(calls) >= 2  # forward, then again in the backward pass


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.x64)])
def test_dtypes_and_weak_types_match_jit(dtype):
    x = fnp.asarray(np.arange(1.0, 5.0, dtype=dtype))
    f = functools.partial(lambda v: fnp.sum(v * 2 + 1.5))
    for _ in range(3):
        g = fnx.grad(f)(x)
        assert g.dtype == dtype
        assert np.array_equal(np.asarray(g), np.full(4, 2.0, dtype))


def test_zero_derivative_outputs_stay_off_the_tape():
    # floor and stop_gradient outputs carry no derivative: later ops see constants
    x = fnp.asarray(np.array([1.5, -2.25]))
    for _ in range(3):
        g = fnx.grad(lambda v: fnp.sum(fnp.floor(v) * v + lax.stop_gradient(v) ** 2 * v))(x)
        xs = np.asarray(x)
        np.testing.assert_allclose(np.asarray(g), np.floor(xs) + xs ** 2)
