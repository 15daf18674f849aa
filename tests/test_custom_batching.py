"""fnx.custom_batching (JAX's jax.custom_batching): custom_vmap and sequential_vmap, with
JAX 0.10.2's results for the same programs (its docstring examples among them)."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import custom_batching as cb
from fnx.errors import CustomRuleError


@cb.custom_vmap
def add(x, y):
    return x + y


@add.def_vmap
def _add_rule(axis_size, in_batched, xs, ys):
    assert in_batched == [True, True] and xs.shape[0] == axis_size
    return xs * ys, True   # a different function on purpose: shows which one ran


def test_rule_replaces_the_function_under_vmap_only():
    xs, ys = fnp.arange(3), fnp.arange(1, 4)
    assert add(xs, ys).tolist() == [1, 3, 5]
    assert fnx.vmap(add)(xs, ys).tolist() == [0, 2, 6]           # JAX: [0, 2, 6]
    assert fnx.jit(fnx.vmap(add))(xs, ys).tolist() == [0, 2, 6]
    assert fnx.vmap(fnx.jit(add))(xs, ys).tolist() == [0, 2, 6]
    assert fnx.jit(add)(xs, ys).tolist() == [1, 3, 5]
    np.testing.assert_array_equal(fnx.vmap(fnx.vmap(add))(fnp.ones((2, 3)), fnp.full((2, 3), 3.0)),
                                  np.full((2, 3), 3.0))


@cb.custom_vmap
def sin_mul(x, y):
    return fnp.sin(x) * y


seen = []


@sin_mul.def_vmap
def _sin_mul_rule(axis_size, in_batched, xs, ys):
    seen.append(list(in_batched))
    if not in_batched[1]:
        ys = fnp.broadcast_to(fnp.asarray(ys), (axis_size,) + fnp.shape(ys))
    return fnp.cos(xs) * ys, True


def test_in_batched_flags_and_jvp():
    seen.clear()
    np.testing.assert_allclose(fnx.vmap(sin_mul, in_axes=(0, None))(fnp.arange(3.0), 2.0),
                               [2.0, 1.0806046, -0.8322936], rtol=1e-6)   # JAX's values
    assert seen == [[True, False]]
    out, t = fnx.jvp(sin_mul, (1.0, 2.0), (1.0, 0.0))     # no vmap: the function's jvp
    np.testing.assert_allclose([out, t], [1.682942, 1.0806046], rtol=1e-6)
    x3 = fnp.arange(3.0)
    out, t = fnx.jvp(fnx.vmap(sin_mul), (x3, x3), (fnp.ones(3), fnp.zeros(3)))
    np.testing.assert_allclose(out, [0.0, 0.5403023, -0.8322937], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(t, [0.0, -0.84147096, -1.8185948], rtol=1e-6)  # the rule's jvp


def test_reverse_mode_needs_a_custom_vjp():
    for attempt in (lambda: fnx.grad(sin_mul)(1.0, 2.0), lambda: fnx.vjp(sin_mul, 1.0, 2.0),
                    lambda: fnx.jit(fnx.grad(sin_mul))(1.0, 2.0)):
        with pytest.raises(CustomRuleError, match="custom_vjp"):
            attempt()


@fnx.custom_vjp
@cb.custom_vmap
def stacked(x, y):
    return fnp.sin(x) * y


@stacked.def_vmap
def _stacked_rule(axis_size, in_batched, xs, ys):
    return fnp.cos(xs) * ys, True


def _stacked_fwd(x, y):
    return stacked(x, y), (fnp.cos(x), fnp.sin(x), y)


def _stacked_bwd(res, g):
    cos_x, sin_x, y = res
    return (cos_x * g * y, sin_x * g)


stacked.defvjp(_stacked_fwd, _stacked_bwd)


def test_custom_vjp_around_custom_vmap_jaxs_docstring_example():
    assert fnx.vmap(stacked)(fnp.zeros(3), fnp.ones(3)).tolist() == [1.0, 1.0, 1.0]
    assert float(fnx.grad(stacked)(fnp.zeros(()), fnp.ones(()))) == 1.0
    assert fnx.jit(fnx.vmap(fnx.grad(stacked)))(fnp.zeros(3), fnp.ones(3)).tolist() == [1.0] * 3


def test_sequential_vmap_and_pytrees():
    calls = []

    def host(x, y):
        calls.append(None)
        return x * 2 + y

    h = cb.sequential_vmap(host)
    np.testing.assert_array_equal(fnx.vmap(h, in_axes=(0, None))(fnp.arange(3.0), 1.0),
                                  [1.0, 3.0, 5.0])
    assert float(h(1.0, 2.0)) == 4.0

    @cb.custom_vmap
    def tree_fn(p):
        return {"s": p["a"] + p["b"]}

    @tree_fn.def_vmap
    def _rule(axis_size, in_batched, p):
        assert in_batched == [{"a": True, "b": False}]   # JAX: one entry per argument
        return {"s": p["a"] - p["b"]}, {"s": True}

    out = fnx.vmap(tree_fn, in_axes=({"a": 0, "b": None},))({"a": fnp.arange(3.0), "b": 1.0})
    np.testing.assert_array_equal(out["s"], [-1.0, 0.0, 1.0])


def test_rule_errors():
    @cb.custom_vmap
    def f(x):
        return x * 2

    with pytest.raises(AttributeError, match="def_vmap"):
        fnx.vmap(f)(fnp.ones(2))

    @f.def_vmap
    def bad(axis_size, in_batched, xs):
        return xs, False   # claims unbatched but has the batch axis

    with pytest.raises(CustomRuleError, match="out_batched"):
        fnx.vmap(f)(fnp.ones(2))

    @cb.custom_vmap
    def g(x):
        return x

    @g.def_vmap
    def not_pair(axis_size, in_batched, xs):
        return xs

    with pytest.raises(CustomRuleError, match="pair"):
        fnx.vmap(g)(fnp.ones(2))

    def closes(y):
        @cb.custom_vmap
        def h(x):
            return x * y

        h.def_vmap(lambda n, b, xs: (xs * y, True))
        return h(fnp.ones(2))

    with pytest.raises(CustomRuleError, match="closes over"):
        fnx.jit(closes)(3.0)
