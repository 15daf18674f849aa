"""``fnx.flatten_util.ravel_pytree`` (``jax.flatten_util``): round trips over generated
trees of mixed dtypes and shapes, JAX's dtype rules (the expected dtypes are JAX 0.10.2's
outputs), unravel's checks, and jit, grad (through flat and through unravel) and vmap."""
import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
import fnx.numpy as jnp
from fnx.flatten_util import ravel_pytree
from fnx.test_util import check_grads

DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_, np.complex64]


def _leaf(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        elements = st.complex_numbers(max_magnitude=8, width=64)
    elif dtype.kind == "f":
        elements = st.floats(-8, 8, width=np.finfo(dtype).bits)
    elif dtype.kind in "iu":   # small enough for any common dtype (float16 too) to hold
        elements = st.integers(0 if dtype.kind == "u" else -100, 100)
    else:
        elements = None
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                               max_side=3), elements=elements)


leaves = st.sampled_from(DTYPES).flatmap(_leaf)
trees = st.recursive(
    leaves, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                   st.dictionaries(st.sampled_from("abc"), kids, max_size=3),
                                   st.tuples(kids, kids)),
    max_leaves=6)

Point = collections.namedtuple("Point", "x y")


def _leaves_of(tree):
    return fnx.tree_util.tree_leaves(tree)


@settings(deadline=None, max_examples=60)
@given(trees)
def test_round_trip_keeps_structure_shapes_dtypes_and_values(tree):
    flat, unravel = ravel_pytree(tree)
    arrays = [np.asarray(x) for x in _leaves_of(tree)]
    want_dtype = np.dtype(jnp.result_type(*[a.dtype for a in arrays])) if arrays \
        else np.dtype(np.float32)
    assert flat.dtype == want_dtype and flat.shape == (sum(a.size for a in arrays),)
    if arrays:
        np.testing.assert_array_equal(
            flat, np.concatenate([a.ravel().astype(want_dtype) for a in arrays]))
    back = unravel(flat)
    assert fnx.tree_util.tree_structure(back) == fnx.tree_util.tree_structure(tree)
    for got, want in zip(_leaves_of(back), arrays):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)   # each leaf fits the common dtype exactly
    if arrays:   # and under jit, the same
        jitted = fnx.jit(lambda t: ravel_pytree(t)[0])(tree)
        np.testing.assert_array_equal(jitted, flat)
        back = fnx.jit(unravel)(flat)
        for got, want in zip(_leaves_of(back), arrays):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("tree,dtype", [
    ((np.ones(2, np.int8), np.ones(1, np.uint8)), np.int16),
    ((jnp.ones(2, jnp.bfloat16), np.ones(1, np.float16)), np.float32),
    ((jnp.ones(2), jnp.ones(1, jnp.complex64)), np.complex64),
    ((np.array([True]), np.ones(1, np.int32)), np.int32),
    ((np.array([True]), np.array(False)), np.bool_),
    ((1, 2.0), np.float32),              # Python scalars count as their default dtypes,
    ((np.ones(2, np.float16), 1.0), np.float32),   # not weakly
    ((np.ones(2, np.int8), 1), np.int32),
    (Point(np.ones(3, np.float32), np.zeros((2, 2), np.int32)), np.float32),
])
def test_dtypes_equal_jaxs(tree, dtype):
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.dtype(dtype)
    back = unravel(flat)
    assert type(back) is type(tree)
    for got, leaf in zip(_leaves_of(back), _leaves_of(tree)):
        want = np.asarray(fnx.numpy.asarray(leaf))
        assert got.dtype == want.dtype and got.shape == want.shape


def test_scalars_empty_trees_and_empty_leaves():
    flat, unravel = ravel_pytree(1.0)
    assert flat.shape == (1,) and flat.dtype == np.float32 and flat.weak_type   # as JAX
    assert unravel(jnp.asarray([3.])).shape == ()
    for empty in ({}, [], [None, {}], None):
        flat, unravel = ravel_pytree(empty)
        assert flat.shape == (0,) and flat.dtype == np.float32
        assert unravel(flat) == empty
    flat, unravel = ravel_pytree([jnp.zeros((0, 3)), jnp.ones(2)])
    np.testing.assert_array_equal(flat, [1., 1.])
    a, b = unravel(jnp.asarray([4., 5.]))
    assert a.shape == (0, 3) and b.shape == (2,)
    np.testing.assert_array_equal(b, [4., 5.])


def test_unravel_converts_back_like_jax():
    flat, unravel = ravel_pytree({"a": jnp.ones((2, 2)), "b": jnp.zeros(3, jnp.int32)})
    out = unravel(jnp.arange(7.) + 0.7)
    np.testing.assert_allclose(out["a"], [[0.7, 1.7], [2.7, 3.7]])
    np.testing.assert_array_equal(out["b"], [4, 5, 6])
    assert out["b"].dtype == np.int32
    # complex flat back to a float leaf: the real part
    _, unravel = ravel_pytree((jnp.ones(1), jnp.ones(1, jnp.complex64)))
    r, c = unravel(jnp.asarray(np.array([1 + 1j, 2 + 2j], np.complex64)))
    assert r.dtype == np.float32 and c.dtype == np.complex64
    np.testing.assert_array_equal(r, [1.])


def test_one_dtype_unravel_takes_any_dtype():
    """JAX: with one leaf dtype nothing is converted, so unravel is dtype-polymorphic."""
    _, unravel = ravel_pytree({"a": jnp.ones((2, 2)), "b": jnp.zeros(3)})
    out = unravel(jnp.ones(7, jnp.int32))
    assert out["a"].dtype == np.int32 and out["b"].dtype == np.int32


def test_unravel_errors_say_what_was_expected():
    _, unravel = ravel_pytree({"a": jnp.ones((2, 2)), "b": jnp.zeros(3, jnp.int32)})
    with pytest.raises(TypeError, match="unravel function given array of dtype int32, but "
                       "expected dtype float32.*astype"):
        unravel(jnp.ones(7, jnp.int32))
    with pytest.raises(ValueError, match=r"unravel: expected a 1-D array of 7 elements .* "
                       r"got shape \(6,\)"):
        unravel(jnp.ones(6))
    _, unravel = ravel_pytree([jnp.ones(3)])
    with pytest.raises(ValueError, match=r"unravel: .*3 elements.*got shape \(\)"):
        unravel(jnp.asarray(1.))
    with pytest.raises(TypeError, match="unravel: .*got a list.*asarray"):
        unravel([1., 2., 3.])
    with pytest.raises(TypeError, match="ravel_pytree: leaf 1 .*str"):
        ravel_pytree([1.0, "a"])


def test_unravel_is_hashable_and_equal_for_equal_trees():
    _, u1 = ravel_pytree({"a": jnp.ones((2, 2)), "b": jnp.zeros(3)})
    _, u2 = ravel_pytree({"a": jnp.zeros((2, 2)), "b": jnp.ones(3)})
    _, u3 = ravel_pytree({"a": jnp.zeros((2, 2)), "b": jnp.ones(4)})
    assert u1 == u2 and hash(u1) == hash(u2) and u1 != u3
    # so it can be a static argument
    f = fnx.jit(lambda v, u: u(v)["b"], static_argnums=1)
    np.testing.assert_array_equal(f(jnp.arange(7.), u1), [4., 5., 6.])


def test_grad_through_flat_and_through_unravel():
    tree = {"w": jnp.asarray([[1., 2.], [3., 4.]]), "b": jnp.asarray([0.5, -1.]),
            "n": jnp.asarray([3], jnp.int32)}
    g = fnx.grad(lambda w, b: jnp.sum(ravel_pytree({"w": w, "b": b, "n": tree["n"]})[0] ** 2),
                 argnums=(0, 1))(tree["w"], tree["b"])
    g = {"w": g[0], "b": g[1]}
    np.testing.assert_allclose(g["w"], 2 * np.asarray(tree["w"]))
    np.testing.assert_allclose(g["b"], 2 * np.asarray(tree["b"]))
    flat, unravel = ravel_pytree(tree)

    def loss(v):
        t = unravel(v)
        return jnp.sum(t["w"] ** 3) + jnp.sum(jnp.sin(t["b"])) * t["n"][0]
    n_at = int(unravel(jnp.arange(7.))["n"][0])   # where the int leaf's piece lies
    flat = flat.at[n_at].set(3.5)   # unravel truncates it to 3 on both sides of a difference
    check_grads(loss, (flat,), 2, rtol=1e-2, atol=1e-2)
    g = fnx.grad(loss)(flat)
    assert g.shape == flat.shape
    assert float(g[n_at]) == 0.0   # the int leaf's piece gets no gradient

    def roundtrip(w, b):
        f, u = ravel_pytree((w, b))
        w2, b2 = u(f * 2.)
        return jnp.sum(w2 * b2[:, None]) + jnp.sum(f ** 2)
    check_grads(roundtrip, (tree["w"], tree["b"]), 2, rtol=1e-2, atol=1e-2)


def test_vmap_of_ravel_and_of_unravel():
    a, b = np.arange(8, dtype=np.float32).reshape(4, 2), np.arange(4, dtype=np.float32)
    tree = {"a": jnp.asarray(a), "b": jnp.asarray(b)}
    flat = fnx.vmap(lambda t: ravel_pytree(t)[0])(tree)
    np.testing.assert_array_equal(flat, np.c_[a, b])
    _, unravel = ravel_pytree({"a": jnp.ones(2), "b": jnp.ones(())})
    back = fnx.vmap(unravel)(flat)
    np.testing.assert_array_equal(back["a"], tree["a"])
    np.testing.assert_array_equal(back["b"], tree["b"])
    back = fnx.jit(fnx.vmap(unravel, in_axes=1))(flat.T)
    np.testing.assert_array_equal(back["a"], a)


def test_module_is_registered():
    import importlib

    import fnx.flatten_util
    assert importlib.import_module("fnx.flatten_util") is fnx.flatten_util
    assert fnx.flatten_util.ravel_pytree is ravel_pytree
