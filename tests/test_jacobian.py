"""jacfwd, jacrev and hessian: batched (vmap) jvps and vjps against closed forms."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp

# Closed forms checked to 1e-12 in float64: run with x64 on, as JAX's suite does;
# test_default_mode_jacobians_are_float32 covers the default (x64 off) mode.
pytestmark = pytest.mark.x64

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
X = RNG.standard_normal(4)


def test_jacobians_of_a_vector_function_agree_with_the_closed_form():
    f = lambda x: fnp.tanh(fnp.asarray(A) @ x)  # noqa: E731
    ref = (1 - np.tanh(A @ X) ** 2)[:, None] * A
    for jac in (fnx.jacfwd, fnx.jacrev):
        np.testing.assert_allclose(jac(f)(fnp.asarray(X)), ref, rtol=1e-12)
        np.testing.assert_allclose(fnx.jit(jac(f))(fnp.asarray(X)), ref, rtol=1e-12)


def test_default_mode_jacobians_are_float32():
    """With x64 off a float64 NumPy input narrows to float32, and every Jacobian (eager, jit,
    eval_shape) is float32 and agrees with the closed form to float32 precision."""
    f = lambda x: fnp.tanh(fnp.asarray(A) @ x)  # noqa: E731
    ref = (1 - np.tanh(A @ X) ** 2)[:, None] * A
    with fnx.enable_x64(False):
        for jac in (fnx.jacfwd, fnx.jacrev, fnx.hessian):
            got, jitted = jac(f)(X), fnx.jit(jac(f))(X)
            assert got.dtype == jitted.dtype == fnx.eval_shape(jac(f), X).dtype == np.float32
            if jac is not fnx.hessian:
                np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(np.asarray(jitted), ref, rtol=1e-5, atol=1e-6)


def test_hessian_and_jacfwd_of_jacrev():
    f = lambda x: (x ** 3).sum() + (x[0] * x[1])  # noqa: E731
    ref = np.diag(6 * X)
    ref[0, 1] = ref[1, 0] = 1.0
    np.testing.assert_allclose(fnx.hessian(f)(fnp.asarray(X)), ref, rtol=1e-12)
    np.testing.assert_allclose(fnx.jacfwd(fnx.jacrev(f))(fnp.asarray(X)), ref, rtol=1e-12)


def test_pytree_inputs_outputs_and_argnums():
    def f(p, x):
        return {"a": p["w"] @ x, "b": (p["w"] ** 2).sum()}
    p = {"w": fnp.asarray(A)}
    jr = fnx.jacrev(f)(p, fnp.asarray(X))
    jf = fnx.jacfwd(f)(p, fnp.asarray(X))
    assert jr["a"]["w"].shape == (3, 3, 4) and jr["b"]["w"].shape == (3, 4)
    np.testing.assert_allclose(jr["b"]["w"], 2 * A, rtol=1e-12)
    for k in ("a", "b"):
        np.testing.assert_allclose(jr[k]["w"], jf[k]["w"], rtol=1e-12)
    jx = fnx.jacrev(f, argnums=1)(p, fnp.asarray(X))
    np.testing.assert_allclose(jx["a"], A, rtol=1e-12)


def test_has_aux_returns_the_jacobian_and_the_undifferentiated_aux():
    def f(x, label=None):
        y = fnp.tanh(fnp.asarray(A) @ x)
        aux = {"norm": (x ** 2).sum(), "y": y}
        return y, (aux if label is None else dict(aux, label=label, k=3))

    ref = (1 - np.tanh(A @ X) ** 2)[:, None] * A
    for jac in (fnx.jacfwd, fnx.jacrev):
        for wrap in (lambda g: g, fnx.jit):
            j, aux = wrap(jac(f, has_aux=True))(fnp.asarray(X))
            np.testing.assert_allclose(j, ref, rtol=1e-12)
            np.testing.assert_allclose(aux["norm"], (X ** 2).sum(), rtol=1e-12)
            np.testing.assert_allclose(aux["y"], np.tanh(A @ X), rtol=1e-12)
            assert aux["y"].shape == (3,)          # not batched over the basis
        # eagerly, aux leaves that are not arrays come back as they are
        _, aux = jac(lambda x: f(x, "tanh"), has_aux=True)(fnp.asarray(X))
        assert aux["label"] == "tanh" and aux["k"] == 3
    # aux is not differentiated: the Jacobian of (out, aux) ignores aux entirely
    j_plain = fnx.jacrev(lambda x: f(x)[0])(fnp.asarray(X))
    np.testing.assert_allclose(fnx.jacrev(f, has_aux=True)(fnp.asarray(X))[0], j_plain,
                               rtol=1e-15)


def test_has_aux_with_argnums_pytrees_and_hessian():
    def f(p, x):
        out = {"a": p["w"] @ x, "b": (p["w"] ** 2).sum()}
        return out, p["w"].sum() * x
    p = {"w": fnp.asarray(A)}
    for jac in (fnx.jacfwd, fnx.jacrev):
        j, aux = jac(f, argnums=(0, 1), has_aux=True)(p, fnp.asarray(X))
        jp, jx = j["a"]
        np.testing.assert_allclose(jx, A, rtol=1e-12)
        assert jp["w"].shape == (3, 3, 4)
        np.testing.assert_allclose(j["b"][0]["w"], 2 * A, rtol=1e-12)
        np.testing.assert_allclose(aux, A.sum() * X, rtol=1e-12)
    h, aux = fnx.hessian(lambda x: ((x ** 3).sum(), x * 2), has_aux=True)(fnp.asarray(X))
    np.testing.assert_allclose(h, np.diag(6 * X), rtol=1e-12)
    np.testing.assert_allclose(aux, 2 * X, rtol=1e-15)
    # nested inside another transformation: aux stays the primal value
    g = fnx.vmap(lambda x: fnx.jacfwd(lambda v: (fnp.sin(v), fnp.cos(v).sum()),
                                      has_aux=True)(x)[1])(fnp.asarray(A))
    np.testing.assert_allclose(g, np.cos(A).sum(axis=1), rtol=1e-12)
