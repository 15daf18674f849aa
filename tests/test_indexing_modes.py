"""Out-of-range indices and ``mode=`` as in JAX (expected values recorded from JAX
0.10.2), except that a static index out of range raises unless a mode is given."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.numpy as jnp
from fnx.errors import IndexOutOfBoundsError
from fnx.testing import check_grads

X = jnp.arange(5.0)
IDX = jnp.array([1, 5, -1, -5, -6])     # in range, past the end, -1, -n, below -n
UIDX = jnp.array([1, 5, -1, -6])


def eq(a, b):
    np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6)


def test_static_index_out_of_range_raises_unless_a_mode_is_given():
    for bad in (lambda: X[7], lambda: X[-7], lambda: X.at[11].get(),
                lambda: X.at[11].set(9.0), lambda: X.at[-6].add(1.0),
                lambda: X.at[10].mul(2.0), lambda: fnx.jit(lambda x: x[7])(X),
                lambda: X.at[7].get(mode="promise_in_bounds")):
        with pytest.raises(IndexOutOfBoundsError, match="out of bounds.*mode="):
            bad()
    eq(X.at[11].get(mode="fill"), np.nan)
    eq(X.at[11].get(mode="fill", fill_value=-1), -1.0)
    eq(X.at[-6].get(mode="fill"), np.nan)
    eq(X.at[-5].get(mode="fill"), 0.0)
    eq(X.at[7].get(mode="drop"), np.nan)
    eq(X.at[11].get(mode="clip"), 4.0)
    eq(X.at[7].set(1.0, mode="clip"), [0, 1, 2, 3, 1])
    eq(X.at[-7].set(1.0, mode="clip"), [1, 1, 2, 3, 4])
    eq(X.at[-7].add(1.0, mode="drop"), [0, 1, 2, 3, 4])
    eq(X.at[7].apply(jnp.sin, mode="clip"), [0, 1, 2, 3, np.sin(4.0)])
    m = jnp.arange(12.0).reshape(3, 4)
    eq(m.at[1, 9].get(mode="fill", fill_value=-1.0), -1.0)
    eq(m.at[5].get(mode="fill"), [np.nan] * 4)
    eq(m.at[5].set(1.0, mode="drop"), np.arange(12.0).reshape(3, 4))
    eq(m.at[5].set(1.0, mode="clip"), [[0, 1, 2, 3], [4, 5, 6, 7], [1, 1, 1, 1]])
    eq(m.at[:, jnp.array([0, 9])].get(mode="fill"), [[0, np.nan], [4, np.nan], [8, np.nan]])


def test_traced_and_array_indices_follow_jax():
    eq(X[jnp.array([7])], [4.0])
    eq(X[jnp.array([-7])], [0.0])
    eq(fnx.jit(lambda x, i: x[i])(X, 7), 4.0)
    eq(fnx.jit(lambda x, i: x[i])(X, -7), 0.0)
    eq(fnx.jit(lambda x, i: x[i])(X, -2), 3.0)
    eq(X[IDX], [1, 4, 4, 0, 0])
    eq(X.at[IDX].get(), [1, 4, 4, 0, 0])
    eq(X.at[IDX].get(mode="clip"), [1, 4, 4, 0, 0])
    eq(X.at[IDX].get(mode="fill"), [1, np.nan, 4, 0, np.nan])
    eq(X.at[jnp.array([1, 7])].get(mode="drop"), [1, np.nan])
    eq(X.at[jnp.array([1, 3])].get(mode="promise_in_bounds", unique_indices=True,
                                   indices_are_sorted=True), [1, 3])
    eq(fnx.vmap(lambda i: X[i])(jnp.array([7, -7, -1, 2])), [4, 0, 4, 2])
    eq(fnx.jit(lambda i: X.at[i].get(mode="fill", fill_value=3.0))(jnp.array([7, -7, -1, 2])),
       [3, 3, 4, 2])
    eq(jnp.arange(12.0).reshape(3, 4)[jnp.array([5]), 1], [9.0])


def test_fill_values_per_dtype():
    i = jnp.array([1, 5])
    lowest = int(np.iinfo(jnp.arange(5).dtype).min)   # int32's, or int64's under x64
    assert np.asarray(jnp.arange(5).at[i].get(mode="fill")).tolist() == [1, lowest]
    assert np.asarray(jnp.arange(5, dtype=jnp.uint8).at[i].get(mode="fill")).tolist() == \
        [1, 255]
    assert np.asarray((jnp.arange(5) > 2).at[i].get(mode="fill")).tolist() == [False, True]
    assert int(jnp.arange(5).at[11].get(mode="fill")) == lowest


def test_scatter_modes():
    eq(X.at[UIDX].set(9.0), [0, 9, 2, 3, 9])
    eq(X.at[UIDX].set(9.0, mode="drop"), [0, 9, 2, 3, 9])
    eq(X.at[UIDX].set(9.0, mode="fill"), [0, 9, 2, 3, 9])
    eq(X.at[UIDX].set(9.0, mode="clip"), [9, 9, 2, 3, 9])
    eq(X.at[UIDX].add(9.0, mode="clip"), [9, 10, 2, 3, 22])
    eq(X.at[UIDX].mul(9.0), [0, 9, 2, 3, 36])
    eq(X.at[UIDX].min(-9.0), [0, -9, 2, 3, -9])
    eq(X.at[UIDX].max(9.0, mode="clip"), [9, 9, 2, 3, 9])
    eq(X.at[jnp.array([1, 3])].set(9.0, mode="promise_in_bounds"), [0, 9, 2, 9, 4])
    eq(X.at[jnp.array([1, 3])].set(9.0, unique_indices=True, indices_are_sorted=True),
       [0, 9, 2, 9, 4])
    eq(X.at[2:9].get(mode="fill"), [2, 3, 4])
    eq(X.at[2:].set(1.0, mode="fill"), [0, 1, 1, 1, 1])
    eq(fnx.jit(lambda i: X.at[i].set(9.0, mode="clip"))(UIDX), [9, 9, 2, 3, 9])
    with pytest.raises(ValueError, match="mode must be one of"):
        X.at[jnp.array([1, 3])].get(mode="bad")
    with pytest.raises(TypeError, match="unexpected keyword"):
        X.at[1].set(1.0, foo=1)


def test_apply_once_per_occurrence():
    s = np.sin
    eq(X.at[jnp.array([1, 1])].apply(jnp.sin), [0, s(s(1.0)), 2, 3, 4])
    eq(X.at[jnp.array([1, 1, 7])].apply(jnp.sin, mode="drop"), [0, s(s(1.0)), 2, 3, 4])
    eq(X.at[jnp.array([1, 1, 7])].apply(jnp.sin, mode="clip"), [0, s(s(1.0)), 2, 3, s(4.0)])
    eq(X.at[UIDX].apply(jnp.sin), [0, s(1.0), 2, 3, s(4.0)])
    eq(X.at[UIDX].apply(jnp.sin, mode="clip"), [0, s(1.0), 2, 3, s(s(4.0))])
    eq(X.at[1:3].apply(jnp.sin), [0, s(1.0), s(2.0), 3, 4])
    eq(fnx.jit(lambda i: X.at[i].apply(jnp.sin))(jnp.array([1, 1])), [0, s(s(1.0)), 2, 3, 4])
    many = jnp.array([2] * 12)   # more repeats than the unrolled bound: a while loop
    want = 2.0
    for _ in range(12):
        want = s(want)
    eq(fnx.jit(lambda i: X.at[i].apply(jnp.sin))(many), [0, 1, want, 3, 4])
    g = fnx.grad(lambda x: x.at[jnp.array([1, 1])].apply(jnp.sin).sum())(X)
    eq(g, [1, np.cos(s(1.0)) * np.cos(1.0), 1, 1, 1])


def test_take_and_take_along_axis_default_to_fill():
    eq(jnp.take(X, jnp.array([7, -7])), [np.nan, np.nan])
    eq(jnp.take(X, jnp.array([7, -7]), mode="clip"), [4, 0])
    eq(jnp.take(X, jnp.array([7, -7]), mode="wrap"), [2, 3])
    eq(jnp.take(jnp.arange(6.0).reshape(2, 3), jnp.array([0, 6, -7, -6])), [0, np.nan, np.nan, 0])
    eq(jnp.take(jnp.arange(6.0).reshape(2, 3), jnp.array([0, 9]), axis=1, fill_value=-2.0),
       [[0, -2], [3, -2]])
    assert np.asarray(jnp.take(jnp.arange(5), jnp.array([7]), mode="fill",
                               fill_value=3)).tolist() == [3]
    eq(fnx.jit(lambda i: jnp.take(X, i))(jnp.array([7, -1])), [np.nan, 4])
    eq(jnp.take_along_axis(X, jnp.array([7, -7, -1]), axis=0), [np.nan, np.nan, 4])
    eq(jnp.take_along_axis(X, jnp.array([7, -7, -1]), axis=0, mode="clip"), [4, 0, 4])
    eq(jnp.take_along_axis(jnp.arange(6.0).reshape(2, 3), jnp.array([[0, 5], [-1, -4]]),
                           axis=1), [[0, np.nan], [5, np.nan]])
    eq(jnp.take_along_axis(jnp.arange(6.0).reshape(2, 3), jnp.array([[0, 5]]), axis=1,
                           fill_value=-1), [[0, -1], [3, -1]])


def test_gradients_follow_each_mode():
    # fill/drop: an out-of-range read contributes nothing; clip: it reads (and gets the
    # gradient at) the clamped element
    eq(fnx.grad(lambda x: x.at[IDX].get(mode="fill", fill_value=0.0).sum())(X), [1, 1, 0, 0, 1])
    eq(fnx.grad(lambda x: x.at[IDX].get(mode="clip").sum())(X), [2, 1, 0, 0, 2])
    eq(fnx.grad(lambda x: x.at[UIDX].get(mode="fill", fill_value=0.0).sum())(X), [0, 1, 0, 0, 1])
    eq(fnx.grad(lambda u: X.at[UIDX].set(u).sum())(jnp.ones(4)), [1, 0, 1, 0])
    eq(fnx.grad(lambda u: (X.at[UIDX].set(u, mode="clip") * X).sum())(jnp.ones(4)),
       [1, 0, 4, 0])
    eq(fnx.grad(lambda x: x.at[7].get(mode="clip"))(X), [0, 0, 0, 0, 1])
    eq(fnx.grad(lambda x: x.at[7].get(mode="fill", fill_value=0.0))(X), [0, 0, 0, 0, 0])
    eq(fnx.jit(fnx.grad(lambda x, i: x[i]))(X, 7), [0, 0, 0, 0, 1])
    check_grads(lambda x: x.at[IDX].get(mode="fill", fill_value=0.5), (X,), order=2)
    check_grads(lambda x, u: x.at[UIDX].set(u, mode="clip"), (X, jnp.arange(4.0) + 0.5),
                order=1)
    check_grads(lambda x, u: x.at[UIDX].add(u, mode="drop"), (X, jnp.arange(4.0) + 0.5),
                order=2)
    check_grads(lambda x: jnp.take(x, jnp.array([0, 9, -2]), fill_value=0.0), (X,), order=2)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(-9, 9), min_size=1, max_size=4),
       st.sampled_from(["fill", "clip", "drop"]))
def test_modes_jit_and_vmap_agree_with_eager(idx, mode):
    x = jnp.arange(1.0, 6.0)
    i = jnp.array(idx)
    get = lambda x, i: x.at[i].get(mode=mode, fill_value=-1.0)  # noqa: E731
    put = lambda x, i: x.at[i].add(10.0, mode=mode)  # noqa: E731
    for f in (get, put):
        eager = np.asarray(f(x, i))
        np.testing.assert_array_equal(np.asarray(fnx.jit(f)(x, i)), eager)
        per_index = [np.asarray(f(x, i[k])) for k in range(len(idx))]  # static ints
        np.testing.assert_array_equal(np.asarray(fnx.vmap(f, (None, 0))(x, i)),
                                      np.stack(per_index))


def test_default_fill_of_unsigned_and_narrow_ints_is_the_dtype_extreme():
    # JAX 0.10.2: take of uint32 out of range gives 4294967295, int8 gives -128 (the fill
    # once went through a Python int, which overflowed int32 and broke jnp.unique on uint32)
    x = jnp.asarray(np.array([1, 2, 3], np.uint32))
    assert jnp.take(x, jnp.asarray([0, 5])).tolist() == [1, 4294967295]
    assert jnp.unique(x).tolist() == [1, 2, 3]
    y = jnp.asarray(np.array([1, 2, 3], np.int8))
    assert jnp.take(y, jnp.asarray([0, 5])).tolist() == [1, -128]


def test_wrap_negative_indices_false_makes_negative_indices_out_of_range():
    # JAX 0.10.2's .at[...] methods and take_along_axis take wrap_negative_indices
    i = jnp.array([-1, 2, 7, -7])
    eq(X.at[i].get(mode="fill", wrap_negative_indices=False), [np.nan, 2, np.nan, np.nan])
    eq(X.at[i].get(mode="clip", wrap_negative_indices=False), [0, 2, 4, 0])
    eq(X.at[i].set(9.0, wrap_negative_indices=False), [0, 1, 9, 3, 4])
    eq(X.at[i].set(9.0, mode="clip", wrap_negative_indices=False), [9, 1, 9, 3, 9])
    eq(X.at[jnp.array([-1, 1])].apply(lambda v: v * 10, wrap_negative_indices=False),
       [0, 10, 2, 3, 4])
    eq(X.at[-1].get(mode="fill", wrap_negative_indices=False), np.nan)
    eq(X.at[-1].add(9.0, mode="drop", wrap_negative_indices=False), [0, 1, 2, 3, 4])
    eq(X.at[-3:].get(wrap_negative_indices=False), [2, 3, 4])  # slices are not indices
    with pytest.raises(IndexOutOfBoundsError):  # static and no mode: raises, as 7 does
        X.at[-1].get(wrap_negative_indices=False)
    big = jnp.arange(300.0)  # an int8 index cannot hold -301: widened
    eq(big.at[jnp.array([-1, 5], np.int8)].get(mode="fill", wrap_negative_indices=False),
       [np.nan, 5])
    f = fnx.jit(lambda x, i: x.at[i].multiply(2.0, mode="drop", wrap_negative_indices=False))
    eq(f(X, i), [0, 1, 4, 3, 4])
    eq(jnp.take_along_axis(X, i, 0, mode="fill", wrap_negative_indices=False),
       [np.nan, 2, np.nan, np.nan])
    # its default: wrap, except under promise_in_bounds (JAX's legacy rule)
    eq(jnp.take_along_axis(X, i, 0, mode="promise_in_bounds"), [0, 2, 4, 0])
    eq(jnp.take_along_axis(X, i, 0, mode="clip"), [4, 2, 4, 0])


def test_take_along_axis_broadcasts_size_one_dimensions_of_the_array():
    # arr's size-1 dimensions broadcast against the indices' (NumPy, JAX): they read
    # element 0, not an out-of-range iota (which filled NaN)
    y = np.arange(3.0, dtype=np.float32).reshape(1, 3)
    idx = np.repeat(np.arange(3), 10).reshape(30, 1)
    eq(jnp.take_along_axis(jnp.asarray(y), jnp.asarray(idx), -1), np.take_along_axis(y, idx, -1))
    rng = np.random.default_rng(0)
    h = rng.random((2, 1, 5, 7, 13)).astype(np.float32)
    g = rng.integers(0, 7, (2, 3, 5, 11, 1)).astype(np.uint8)
    eq(jnp.take_along_axis(jnp.asarray(h), jnp.asarray(g), axis=-2),
       np.take_along_axis(h, g, axis=-2))
    f = lambda x: jnp.take_along_axis(x * jnp.arange(3.0).reshape(1, 3), idx, -1).sum()  # noqa: E731
    check_grads(f, (jnp.asarray(1.0),), order=1)
