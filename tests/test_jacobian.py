"""jacfwd, jacrev and hessian: batched (vmap) jvps and vjps against closed forms."""
import numpy as np

import fnx
import fnx.numpy as fnp

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
X = RNG.standard_normal(4)


def test_jacobians_of_a_vector_function_agree_with_the_closed_form():
    f = lambda x: fnp.tanh(fnp.asarray(A) @ x)  # noqa: E731
    ref = (1 - np.tanh(A @ X) ** 2)[:, None] * A
    for jac in (fnx.jacfwd, fnx.jacrev):
        np.testing.assert_allclose(jac(f)(fnp.asarray(X)), ref, rtol=1e-12)
        np.testing.assert_allclose(fnx.jit(jac(f))(fnp.asarray(X)), ref, rtol=1e-12)


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
