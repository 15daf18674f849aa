"""``fnx.experimental.jet`` (JAX's ``jax.experimental.jet``): Taylor terms of a function
along a curve, against Faa di Bruno's formula, closed-form series and JAX's values."""
import math

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.experimental.jet import jet, jet2


def test_jax_docstring_example_faa_di_bruno():
    # h(z) = z**3 at 0.5 with its derivatives; f = sin: jet gives f(h(z))'s derivatives
    h0, h1, h2 = 0.5 ** 3.0, 3.0 * 0.5 ** 2.0, 6.0 * 0.5
    f0, (f1, f2) = jet(fnp.sin, (h0,), ((h1, h2),))
    np.testing.assert_allclose(f0, np.sin(h0), rtol=1e-6)
    np.testing.assert_allclose(f1, np.cos(h0) * h1, rtol=1e-6)
    np.testing.assert_allclose(f2, -np.sin(h0) * h1 ** 2 + np.cos(h0) * h2, rtol=1e-6)
    # JAX 0.10.2 prints 0.12467473 0.74414825 2.9064636
    np.testing.assert_allclose([f0, f1, f2], [0.12467473, 0.74414825, 2.9064636], rtol=1e-6)


def test_exp_along_a_line_gives_powers_and_jet2_gives_coefficients():
    # exp(x0 + v t): the k-th derivative is exp(x0) v**k
    x0, v = np.float32(0.3), np.float32(1.5)
    y, terms = jet(fnp.exp, (x0,), ([v, 0.0, 0.0, 0.0],))
    want = [np.exp(x0) * v ** k for k in range(1, 5)]
    np.testing.assert_allclose(terms, want, rtol=1e-5)
    _, coeffs = jet2(fnp.exp, (x0,), ([v, 0.0, 0.0, 0.0],))
    np.testing.assert_allclose(coeffs, [w / math.factorial(k + 1) for k, w in enumerate(want)],
                               rtol=1e-5)


def test_pytree_outputs_several_arguments_and_recorded_jax_values():
    x = np.linspace(0.1, 1, 4).astype(np.float32)
    y, t = jet(lambda a, b: {"p": fnp.exp(a) * b, "q": fnp.tanh(a)}, (x, x),
               ([x, x, x], [x * 0, x, x]))
    assert set(y) == {"p", "q"} and len(t["p"]) == 3 and t["q"][0].shape == (4,)
    # JAX 0.10.2's jet on the same inputs
    np.testing.assert_allclose(t["p"][2], [0.15814999, 1.8761194, 7.912239, 24.464548],
                               rtol=2e-6)
    np.testing.assert_allclose(t["q"][1], [0.09703308, 0.2382238, 0.06837375, -0.21972583],
                               rtol=2e-5, atol=1e-7)


def test_matches_nested_forward_derivatives_under_jit():
    def f(x):
        return fnp.sum(fnp.sin(x) * fnp.log1p(x * x))
    x, v = np.float32([0.2, 0.7]), np.float32([1.0, -0.5])
    _, terms = fnx.jit(lambda x, v: jet(f, (x,), ([v, 0 * v, 0 * v],)))(x, v)

    def along(t):
        return f(x + t * v)
    d1 = fnx.grad(along)
    np.testing.assert_allclose(terms[0], d1(0.0), rtol=1e-5)
    np.testing.assert_allclose(terms[2], fnx.grad(fnx.grad(d1))(0.0), rtol=1e-4)


def test_integer_outputs_have_zero_terms_and_bad_series_raise():
    x = np.float32([0.2, 0.9])
    y, t = jet(lambda a: (a > 0.5).astype(fnp.int32), (x,), ([x],))
    assert y.tolist() == [0, 1] and np.asarray(t[0]).tolist() == [0, 0]
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(fnp.add, (1.0, 2.0), ([1.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        jet(lambda d: d["a"], ({"a": 1.0},), ([1.0],))
