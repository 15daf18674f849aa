"""``lax.custom_linear_solve``, ``lax.custom_root`` and ``custom_derivatives.linear_call``:
iterative solves differentiated implicitly in both modes, under jit and vmap, against
dense solves and finite differences; the Krylov solvers of ``fnx.scipy.sparse.linalg``
through them (JAX's values where recorded)."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.custom_derivatives import linear_call
from fnx.scipy.sparse.linalg import bicgstab, cg, gmres
from fnx.test_util import check_grads

A0 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
B0 = np.array([1.0, 2.0, 3.0])


def _dense(mv, b):
    """A solve that only sees ``mv``: the matrix rebuilt column by column."""
    m = fnx.vmap(mv)(fnp.eye(b.shape[0], dtype=b.dtype)).T
    return fnp.linalg.solve(m, b)


def _iterative(mv, b):
    """A solve whose loop cannot be transposed: Richardson iteration in a while_loop."""
    def body(c):
        x, k = c
        return x + 0.2 * (b - mv(x)), k + 1
    return lax.while_loop(lambda c: c[1] < 300, body, (fnp.zeros_like(b), 0))[0]


def test_linear_call_uses_the_given_transpose():
    a = fnp.asarray(np.array([[2.0, 1.0], [0.0, 3.0]], np.float32))
    f = lambda x: linear_call(lambda r, v: r @ v, lambda r, ct: r.T @ ct, a, x)  # noqa: E731
    x = fnp.asarray(np.array([1.0, 2.0], np.float32))
    w = fnp.asarray(np.array([1.0, 5.0], np.float32))
    assert f(x).tolist() == [4, 6] and fnx.jit(f)(x).tolist() == [4, 6]
    assert fnx.grad(lambda v: (f(v) * w).sum())(x).tolist() == [2, 16]
    assert fnx.jvp(f, (x,), (fnp.ones(2),))[1].tolist() == [3, 3]
    assert fnx.linear_transpose(f, x)(w)[0].tolist() == [2, 16]
    np.testing.assert_array_equal(fnx.jacrev(f)(x), np.asarray(a))
    assert fnx.vmap(f)(fnp.stack([x, 2 * x])).tolist() == [[4, 6], [8, 12]]


@pytest.mark.parametrize("solve", [_dense, _iterative], ids=["dense", "while_loop"])
def test_custom_linear_solve_derivatives(solve):
    with fnx.enable_x64(True):
        def f(s, b):
            x = lax.custom_linear_solve(lambda v: s * (fnp.asarray(A0) @ v), b, solve,
                                        transpose_solve=solve)
            return (x ** 2).sum()
        s, b = 2.0, fnp.asarray(B0)
        want = fnx.grad(lambda s, b: (fnp.linalg.solve(s * A0, b) ** 2).sum(),
                        argnums=(0, 1))(s, b)
        for g in (fnx.grad(f, argnums=(0, 1)), fnx.jit(fnx.grad(f, argnums=(0, 1)))):
            got = g(s, b)
            np.testing.assert_allclose(float(got[0]), float(want[0]), rtol=1e-9)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-9)
        # JAX 0.10's values for the same program
        np.testing.assert_allclose(float(want[0]), -0.6240995, rtol=1e-6)
        check_grads(lambda b: lax.custom_linear_solve(lambda v: fnp.asarray(A0) @ v, b, solve,
                                                      symmetric=True),
                    (fnp.asarray(B0),), 2)
        batched = fnx.vmap(lambda b: lax.custom_linear_solve(
            lambda v: fnp.asarray(A0) @ v, b, solve, symmetric=True))(fnp.stack([b, 2 * b]))
        np.testing.assert_allclose(batched, np.linalg.solve(A0, np.stack([B0, 2 * B0]).T).T,
                                   rtol=1e-9)


def test_custom_linear_solve_needs_a_transpose_for_reverse_mode():
    f = lambda b: lax.custom_linear_solve(lambda v: fnp.asarray(A0) @ v, b, _dense)  # noqa
    with fnx.enable_x64(True):
        assert fnx.jvp(f, (fnp.asarray(B0),), (fnp.ones(3),))[1].shape == (3,)
        with pytest.raises(TypeError, match="transpose_solve"):
            fnx.grad(lambda b: f(b).sum())(fnp.asarray(B0))


def test_custom_root_differentiates_through_the_solution():
    def newton(fun, x0):
        return lax.fori_loop(0, 30, lambda i, x: x - fun(x) / fnx.grad(fun)(x), x0)

    def sqrt_root(a):
        return lax.custom_root(lambda x: x ** 2 - a, 1.0, newton, lambda g, y: y / g(1.0))
    with fnx.enable_x64(True):
        assert abs(float(sqrt_root(2.0)) - np.sqrt(2.0)) < 1e-12
        for g in (fnx.grad(sqrt_root), fnx.jit(fnx.grad(sqrt_root))):
            np.testing.assert_allclose(float(g(2.0)), 0.5 / np.sqrt(2.0), rtol=1e-12)
        np.testing.assert_allclose(float(fnx.jvp(sqrt_root, (2.0,), (1.0,))[1]),
                                   0.5 / np.sqrt(2.0), rtol=1e-12)
        # a vector root: x = tanh(W x + p), solved by fixed-point iteration
        w = 0.3 * np.array([[0.5, -0.2], [0.1, 0.4]])

        def fixed(p):
            f = lambda x: x - fnp.tanh(fnp.asarray(w) @ x + p)  # noqa: E731
            solve = lambda fun, x0: lax.fori_loop(0, 200, lambda i, x: x - fun(x), x0)  # noqa
            tsolve = lambda g, y: _dense(g, y)  # noqa: E731
            return lax.custom_root(f, fnp.zeros(2), solve, tsolve)
        p = fnp.asarray(np.array([0.3, -0.5]))
        check_grads(fixed, (p,), 1)


def test_krylov_solvers_differentiate_in_reverse_mode():
    """grad through cg, gmres and bicgstab solves the transposed system (JAX's
    custom_linear_solve), through b and through the matrix."""
    with fnx.enable_x64(True):
        a, b = fnp.asarray(A0), fnp.asarray(B0)
        for solver in (cg, gmres, bicgstab):
            g_b = fnx.grad(lambda v: solver(a, v, tol=1e-12)[0].sum())(b)
            np.testing.assert_allclose(g_b, np.linalg.solve(A0.T, np.ones(3)), rtol=1e-8)
            g_a = fnx.jit(fnx.grad(lambda m: solver(m, b, tol=1e-12)[0].sum()))(a)
            np.testing.assert_allclose(
                g_a, fnx.grad(lambda m: fnp.linalg.solve(m, b).sum())(a), rtol=1e-7)
        g_s = fnx.grad(lambda s: cg(lambda v: s * (a @ v), b, tol=1e-12)[0].sum())(2.0)
        np.testing.assert_allclose(float(g_s), -np.linalg.solve(A0, B0).sum() / 4.0,
                                   rtol=1e-8)   # x = A^-1 b / s: dx/ds = -x / s
