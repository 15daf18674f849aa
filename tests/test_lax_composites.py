"""JAX's lax functions that fnx builds from other primitives (``fnx.lax.composites``):
values against NumPy, and, being compositions, their derivatives and batching through the
primitives they bind (checked with ``check_grads``, ``vmap`` against a loop, and ``jit``
against eager). Each was also run beside JAX 0.10.2 on the same inputs when written."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.testing import check_grads

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4, 5)).astype(np.float32)
XI = np.arange(12, dtype=np.int32).reshape(3, 4) - 5


@pytest.mark.parametrize("dims", [(0,), (1,), (2,), (0, 2), (0, 1, 2)])
def test_reduce_monoids_and_any_computation(dims):
    np.testing.assert_allclose(lax.reduce(X, 0.0, lax.add, dims), X.sum(dims), rtol=1e-5)
    np.testing.assert_array_equal(lax.reduce(X, -np.inf, lax.max, dims), X.max(dims))
    # a computation that is no lax monoid: pairwise, with the init value combined once
    got = lax.reduce(X, np.float32(1.5), lambda a, b: fnp.logaddexp(a, b), dims)
    want = np.logaddexp(np.log(np.exp(X.astype(np.float64)).sum(dims)), 1.5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # a non-identity init with a monoid: combined once, as JAX's XLA does
    np.testing.assert_allclose(lax.reduce(X, np.float32(1.5), lax.add, dims),
                               X.sum(dims) + 1.5, rtol=1e-5)


def test_reduce_variadic_integer_and_boolean():
    xi = (X * 10).astype(np.int32)
    s, m = lax.reduce((X, xi), (np.float32(0), np.int32(-1000)),
                      lambda a, b: (a[0] + b[0], fnp.maximum(a[1], b[1])), (1,))
    np.testing.assert_allclose(s, X.sum(1), rtol=1e-5)
    assert m.dtype == np.int32
    np.testing.assert_array_equal(m, xi.max(1))
    np.testing.assert_array_equal(lax.reduce(XI, -np.inf, lax.max, (0, 1)), XI.max())
    np.testing.assert_array_equal(lax.reduce(XI > 0, False, lax.bitwise_or, (1,)),
                                  (XI > 0).any(1))
    np.testing.assert_array_equal(lax.reduce(XI > 0, True, lax.bitwise_and, (1,)),
                                  (XI > 0).all(1))
    np.testing.assert_array_equal(lax.reduce_xor(XI, (1,)), np.bitwise_xor.reduce(XI, 1))
    np.testing.assert_array_equal(lax.reduce_xor(XI > 0, (0, 1)),
                                  np.logical_xor.reduce((XI > 0).ravel()))
    assert lax.reduce(np.zeros((2, 0), np.float32), np.float32(7), lambda a, b: a * b,
                      (1,)).tolist() == [7.0, 7.0]
    with pytest.raises(TypeError, match="init values' dtypes"):
        lax.reduce(XI, 0.5, lax.max, (0,))
    with pytest.raises(ValueError, match="one tree structure"):
        lax.reduce((X, X), np.float32(0), lax.add, (0,))


def test_reduce_derivatives_batching_and_jit():
    f = lambda v: lax.reduce(v, np.asarray(0.5, v.dtype), lambda a, b: a * b + a + b, (1,))  # noqa: E731
    v = RNG.uniform(0.1, 0.6, (3, 5)).astype(np.float64)
    with fnx.enable_x64(True):
        check_grads(f, (v,), order=2, modes=("fwd", "rev"))
    v = v.astype(np.float32)
    np.testing.assert_allclose(fnx.jit(f)(v), f(v), rtol=1e-6)
    np.testing.assert_allclose(fnx.vmap(f)(np.stack([v, v * 0.5])),
                               np.stack([f(v), f(v * 0.5)]), rtol=1e-6)


def test_associative_scan():
    x = RNG.standard_normal((7, 3)).astype(np.float32)
    np.testing.assert_allclose(lax.associative_scan(fnp.add, x), np.cumsum(x, 0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(lax.associative_scan(fnp.add, x, reverse=True),
                               np.cumsum(x[::-1], 0)[::-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(lax.associative_scan(fnp.maximum, XI, axis=1),
                                  np.maximum.accumulate(XI, 1))
    # a pytree: the linear recurrence h_t = a_t h_{t-1} + b_t
    a, b = np.full(9, 0.5), np.arange(9.0)
    _, h = lax.associative_scan(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]),
                                (a.astype(np.float32), b.astype(np.float32)))
    want, acc = [], 0.0
    for t in range(9):
        acc = a[t] * acc + b[t]
        want.append(acc)
    np.testing.assert_allclose(h, want, rtol=1e-6)
    with fnx.enable_x64(True):
        check_grads(lambda v: lax.associative_scan(fnp.multiply, v),
                    (RNG.uniform(0.5, 1.5, 6),), order=2, modes=("fwd", "rev"))
    f = lambda v: lax.associative_scan(fnp.add, v, axis=1)  # noqa: E731
    np.testing.assert_allclose(fnx.vmap(f)(X), np.stack([f(x) for x in X]), rtol=1e-6)
    np.testing.assert_allclose(fnx.jit(f)(X[0]), f(X[0]), rtol=1e-6)


def test_shape_functions():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(lax.tile(x, (2, 1)), np.tile(x, (2, 1)))
    with pytest.raises(TypeError, match="reps length"):
        lax.tile(x, (2,))
    np.testing.assert_array_equal(lax.index_in_dim(x, -1, 1, False), x[:, -1])
    assert lax.index_in_dim(x, 0, 1).shape == (2, 1)
    with pytest.raises(IndexError, match="out of bounds"):
        lax.index_in_dim(x, 3, 1)
    a, b = lax.split(x, (1, 2), 1)
    np.testing.assert_array_equal(a, x[:, :1])
    np.testing.assert_array_equal(b, x[:, 1:])
    with pytest.raises(fnx.errors.ShapeError, match="add up"):
        lax.split(x, (1, 1), 1)
    big = np.ones((2, 3, 4, 5), np.float32)
    assert lax.collapse(big, 1, 3).shape == (2, 12, 5)
    assert lax.collapse(big, 1).shape == (2, 60)
    assert lax.collapse(big, -3, -1).shape == (2, 12, 5)
    assert lax.broadcast_to_rank(x, 4).shape == (1, 1, 2, 3)
    assert lax.broadcast_to_rank(x, 1).shape == (2, 3)
    np.testing.assert_array_equal(lax.stack([x, 2 * x], 1), np.stack([x, 2 * x], 1))
    assert [u.tolist() for u in lax.unstack(x, 1)] == [c.tolist() for c in x.T]
    assert lax.empty((2, 3), np.float32).shape == (2, 3)
    y = np.ones((4, 2, 3), np.float32)
    np.testing.assert_allclose(lax.batch_matmul(y, y.transpose(0, 2, 1)), y @ y.transpose(0, 2, 1))
    with pytest.raises(ValueError, match="same ndim"):
        lax.batch_matmul(y, x)
    t = lax.optimization_barrier((x, 3))
    assert t[1].dtype == np.int32 and np.asarray(t[0]).tolist() == x.tolist()
    assert lax.with_sharding_constraint(x, None) is x


def test_dynamic_update_index_in_dim():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = lax.dynamic_update_index_in_dim(x, np.array([9.0, 9.0], np.float32), -1, 1)
    want = x.copy()
    want[:, -1] = 9
    np.testing.assert_array_equal(got, want)
    f = fnx.jit(lambda x, i: lax.dynamic_update_index_in_dim(
        x, np.array([[7.0, 8.0, 9.0]], np.float32), i, 0))
    assert f(x, -1).tolist() == [[0, 1, 2], [7, 8, 9]]
    assert f(x, 0).tolist() == [[7, 8, 9], [3, 4, 5]]


# --- convolution helpers ----------------------------------------------------------------------

def _patches_ref(x, filter_shape, strides, pads, rhs_dilation):
    """im2col, NC... layout, element by element: feature c * taps + t is tap t (C order
    over the window) of channel c."""
    xp = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    n, c = x.shape[:2]
    span = [(k - 1) * r + 1 for k, r in zip(filter_shape, rhs_dilation)]
    out_sp = [(xp.shape[2 + i] - span[i]) // strides[i] + 1 for i in range(len(span))]
    taps = list(np.ndindex(*filter_shape))
    out = np.zeros((n, c * len(taps), *out_sp), x.dtype)
    for o in np.ndindex(*out_sp):
        for t, tap in enumerate(taps):
            at = tuple(o[i] * strides[i] + tap[i] * rhs_dilation[i] for i in range(len(o)))
            out[(slice(None), slice(t, None, len(taps))) + o] = xp[(slice(None), slice(None)) + at]
    return out


@pytest.mark.parametrize("shape, filt, strides, pads, rdil", [
    ((2, 3, 7, 6), (3, 2), (1, 1), [(0, 0), (0, 0)], (1, 1)),
    ((1, 2, 8, 5), (2, 3), (2, 1), [(1, 2), (0, 1)], (2, 1)),
    ((2, 1, 9), (4,), (3,), [(2, 2)], (1,))])
def test_conv_patches_and_local_conv_equal_im2col(shape, filt, strides, pads, rdil):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    want = _patches_ref(x, filt, strides, pads, rdil)
    got = lax.conv_general_dilated_patches(x, filt, strides, pads, rhs_dilation=rdil)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    # channels last in and out: the same patches, moved
    nd = len(shape) - 2
    sp = "HWD"[:nd]
    dn = (f"N{sp}C", f"{sp}IO", f"N{sp}C")
    last = lax.conv_general_dilated_patches(np.moveaxis(x, 1, -1), filt, strides, pads,
                                            rhs_dilation=rdil, dimension_numbers=dn)
    np.testing.assert_allclose(np.moveaxis(np.asarray(last), -1, 1), want, rtol=1e-6, atol=1e-6)
    # locally connected: its own weights at every output position
    w = rng.standard_normal((5,) + want.shape[1:]).astype(np.float32)
    local = lax.conv_general_dilated_local(x, w, strides, pads, filt, rhs_dilation=rdil)
    np.testing.assert_allclose(np.asarray(local), np.einsum("np...,op...->no...", want, w),
                               rtol=1e-4, atol=1e-4)
    with fnx.enable_x64(True):
        check_grads(lambda v, k: lax.conv_general_dilated_local(v, k, strides, pads, filt,
                                                                rhs_dilation=rdil),
                    (x.astype(np.float64), w.astype(np.float64)), 1)
    g = fnx.jit(fnx.grad(lambda v: (lax.conv_general_dilated_patches(
        v, filt, strides, pads, rhs_dilation=rdil) ** 2).sum()))(x)
    # each input element's gradient: 2 * x times how many patches read it
    count = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        probe = np.zeros_like(x)
        probe[idx] = 1
        count[idx] = _patches_ref(probe, filt, strides, pads, rdil).sum()
    np.testing.assert_allclose(np.asarray(g), 2 * x * count, rtol=1e-5, atol=1e-5)


def test_conv_and_window_shape_tuples():
    pads = [(1, 1), (0, 0)]
    assert lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), pads) == (1, 4, 4, 3)
    assert lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (2, 2), "SAME") == (1, 4, 4, 4)
    assert lax.conv_shape_tuple((4, 3, 8, 8), (6, 3, 3, 3), (1, 1), "VALID", 2) == (2, 6, 6, 6)
    assert lax.reduce_window_shape_tuple((1, 3, 8, 7), (1, 1, 2, 3), (1, 1, 2, 2),
                                         [(0, 0), (0, 0), (1, 0), (0, 2)], (1, 1, 2, 1),
                                         (1, 1, 1, 2)) == (1, 3, 8, 3)   # JAX 0.10's values
    x = np.ones((1, 3, 8, 7), np.float32)
    got = lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 3), (1, 1, 2, 2),
                            [(0, 0), (0, 0), (1, 0), (0, 2)], (1, 1, 2, 1), (1, 1, 1, 2))
    assert got.shape == (1, 3, 8, 3)
