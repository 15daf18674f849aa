"""holomorphic=True for grad, value_and_grad, jacfwd, jacrev, jacobian and hessian, and
JAX's dtype checks without it. Expected values are JAX 0.10.2's outputs."""
import numpy as np
import pytest

import fnx
import fnx.numpy as jnp

Z = jnp.asarray(3 + 4j, dtype=jnp.complex64)
ZZ = jnp.array([1 + 2j, 3 - 1j], dtype=jnp.complex64)


def close(a, b, rtol=2e-6):
    a = np.asarray(a)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)


def test_grad_is_the_complex_derivative():
    g = fnx.grad(lambda z: z ** 2, holomorphic=True)(Z)
    assert g.dtype == np.complex64
    close(g, 6 + 8j)
    close(fnx.grad(lambda z: z ** 2, holomorphic=True)(3 + 4j), 6 + 8j)  # a Python complex
    close(fnx.grad(jnp.sin, holomorphic=True)(Z), -27.034946 - 3.8511534j)
    close(fnx.grad(lambda z: jnp.exp(z) * z, holomorphic=True)(Z), 8.288007 - 113.318275j)
    v, g = fnx.value_and_grad(lambda z: z ** 3, holomorphic=True)(Z)
    close(v, -117 + 44j)
    close(g, -21 + 72j)


def test_holomorphic_grad_composes():
    f = lambda z: z ** 2  # noqa: E731
    close(fnx.jit(fnx.grad(f, holomorphic=True))(Z), 6 + 8j)
    close(fnx.vmap(fnx.grad(f, holomorphic=True))(ZZ), [2 + 4j, 6 - 2j])
    d2 = fnx.grad(fnx.grad(lambda z: z ** 3, holomorphic=True), holomorphic=True)(Z)
    close(d2, 18 + 24j)
    ga, gb = fnx.grad(lambda a, b: a * b, argnums=(0, 1), holomorphic=True)(Z, Z + 1)
    close(ga, 4 + 4j)
    close(gb, 3 + 4j)
    close(fnx.grad(lambda d: d["a"] ** 2, holomorphic=True)({"a": Z})["a"], 6 + 8j)
    g, aux = fnx.grad(lambda z: (z ** 2, 1), holomorphic=True, has_aux=True)(Z)
    close(g, 6 + 8j)
    assert aux == 1


def test_holomorphic_jacobians():
    f = lambda z: jnp.array([z ** 2, jnp.sin(z)])  # noqa: E731
    want = [6 + 8j, -27.034946 - 3.8511534j]
    close(fnx.jacrev(f, holomorphic=True)(Z), want)
    close(fnx.jacfwd(f, holomorphic=True)(Z), want)
    g = lambda z: z ** 2 * z[0]  # noqa: E731
    want = [[-9 + 12j, 0], [8 - 6j, 10 + 10j]]
    close(fnx.jacrev(g, holomorphic=True)(ZZ), want)
    close(fnx.jacfwd(g, holomorphic=True)(ZZ), want)
    close(fnx.transforms.jacobian.jacobian(lambda z: z ** 2, holomorphic=True)(ZZ),
          [[2 + 4j, 0], [0, 6 - 2j]])
    close(fnx.hessian(lambda z: (z ** 3).sum(), holomorphic=True)(ZZ),
          [[6 + 12j, 0], [0, 18 - 6j]])


def test_non_holomorphic_complex_inputs_keep_jax_conventions():
    close(fnx.grad(lambda z: jnp.abs(z) ** 2)(Z), 6 - 8j)
    close(fnx.grad(lambda z: jnp.real(z * z))(Z), 6 + 8j)
    close(fnx.jacrev(lambda z: jnp.abs(z))(ZZ),
          [[0.4472136 - 0.8944272j, 0], [0, 0.94868326 + 0.31622776j]])


@pytest.mark.parametrize("call, match", [
    (lambda: fnx.grad(lambda z: z ** 2, holomorphic=True)(3.0),
     "holomorphic=True requires inputs with complex dtype, but got float\\d+"),
    (lambda: fnx.grad(lambda z: jnp.abs(z), holomorphic=True)(Z),
     "holomorphic=True requires outputs with complex dtype, but got float\\d+"),
    (lambda: fnx.grad(lambda z: z ** 2)(Z),
     "grad requires real-valued outputs .* but got complex64. For holomorphic "
     "differentiation, pass holomorphic=True"),
    (lambda: fnx.grad(lambda z: z ** 2)(3),
     "grad requires real- or complex-valued inputs .* but got int\\d+"),
    (lambda: fnx.jacrev(lambda z: z ** 2)(ZZ),
     "jacrev requires real-valued outputs .* but got complex64"),
    (lambda: fnx.jacfwd(lambda z: z ** 2)(ZZ),
     "jacfwd requires real-valued inputs .* but got complex64"),
    (lambda: fnx.jacfwd(lambda z: z ** 2, holomorphic=True)(jnp.ones(2)),
     "jacfwd with holomorphic=True requires inputs with complex dtype, but got float\\d+"),
    (lambda: fnx.jacrev(lambda z: jnp.abs(z), holomorphic=True)(ZZ),
     "jacrev with holomorphic=True requires outputs with complex dtype, but got float\\d+"),
])
def test_dtype_mistakes_raise_type_error_as_jax(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_allow_int_gives_float0_gradients():
    gx, gy = fnx.grad(lambda x, y: x * y, allow_int=True, argnums=(0, 1))(2.0, 3)
    close(gx, 3.0)
    assert gy.dtype == fnx.transforms.vjp.float0 and gy.shape == ()
    j = fnx.jacrev(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(jnp.ones(2), 3)
    close(j[0], 3 * np.eye(2))
    assert j[1].dtype == fnx.transforms.vjp.float0 and j[1].shape == (2,)
