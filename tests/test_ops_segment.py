"""``fnx.ops`` (``jax.ops``): segment_sum/prod/max/min against NumPy loop references over
generated data and ids (negative and past-the-end ids, empty segments, several dtypes,
trailing dims), both modes, num_segments inference, bucketing; jit vs eager, vmap vs a
loop, derivatives vs finite differences, the emulated GPU, and the errors. The expected
identities, NaN results and tie-split gradients are JAX 0.10.2's outputs."""
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
import fnx.numpy as jnp
import fnx.ops
from fnx.errors import ConcretizationError
from fnx.test_util import check_grads

OPS = {"sum": (fnx.ops.segment_sum, np.add), "prod": (fnx.ops.segment_prod, np.multiply),
       "max": (fnx.ops.segment_max, np.maximum), "min": (fnx.ops.segment_min, np.minimum)}


def _identity(op, dtype):
    dtype = np.dtype(dtype)
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    if dtype == np.bool_:
        return op == "min"
    if dtype.kind in "iu":
        return np.iinfo(dtype).max if op == "min" else np.iinfo(dtype).min
    return np.inf if op == "min" else -np.inf


def reference(op, data, ids, n, clip=False):
    """The loop: row i goes to segment ids[i] (clamped under clip, else dropped when out of
    [0, n)), combined in order in data's dtype."""
    data, ids = np.asarray(data), np.asarray(ids)
    ufunc = OPS[op][1]
    out = np.full((n,) + data.shape[1:], _identity(op, data.dtype), data.dtype)
    with np.errstate(all="ignore"):
        for i, s in enumerate(ids.tolist()):
            if clip:
                s = min(max(s, 0), n - 1)
            if 0 <= s < n:
                out[s] = ufunc(out[s], data[i])
    return out


def assert_same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                  want.dtype, want.shape)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=1e-3 if want.dtype == np.float16 else 1e-6,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


DATA_DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_]
ID_DTYPES = [np.int32, np.int8, np.uint8]


@st.composite
def segment_cases(draw):
    op = draw(st.sampled_from(sorted(OPS)))
    dtype = np.dtype(draw(st.sampled_from(
        DATA_DTYPES if op in ("max", "min") else DATA_DTYPES[:-1])))
    id_dtype = np.dtype(draw(st.sampled_from(ID_DTYPES)))
    n = draw(st.integers(0, 6))
    rows = draw(st.integers(0, 9))
    trailing = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    if dtype.kind == "f":
        elements = st.floats(-4, 4, width=np.finfo(dtype).bits)
    elif dtype.kind in "iu":
        elements = None  # the whole range: sums and products wrap as in JAX
    else:
        elements = st.booleans()
    data = draw(hnp.arrays(dtype, (rows,) + trailing, elements=elements))
    lo = 0 if id_dtype.kind == "u" else -3
    ids = draw(hnp.arrays(id_dtype, (rows,), elements=st.integers(lo, n + 2)))
    clip = draw(st.booleans()) and n > 0
    return op, data, ids, n, clip


@settings(deadline=None, max_examples=60)
@given(segment_cases())
def test_segment_ops_match_a_loop(case):
    op, data, ids, n, clip = case
    fn = OPS[op][0]
    got = fn(jnp.asarray(data), jnp.asarray(ids), n, mode="clip" if clip else None)
    assert_same(got, reference(op, data, ids, n, clip))


@settings(deadline=None)
@given(segment_cases())
def test_jit_equals_eager(case):
    op, data, ids, n, clip = case
    fn = OPS[op][0]
    mode = "clip" if clip else None
    jitted = fnx.jit(lambda d, i: fn(d, i, n, mode=mode))
    assert_same(jitted(jnp.asarray(data), jnp.asarray(ids)),
                np.asarray(fn(jnp.asarray(data), jnp.asarray(ids), n, mode=mode)))


@settings(deadline=None)
@given(st.sampled_from(sorted(OPS)),
       hnp.arrays(np.int32, st.integers(1, 8), elements=st.integers(-1, 6)))
def test_num_segments_none_is_max_id_plus_one(op, ids):
    data = np.arange(1, ids.size + 1, dtype=np.float32)
    n = int(ids.max()) + 1   # all ids -1: 0 segments (JAX raises below -1)
    assert_same(OPS[op][0](jnp.asarray(data), jnp.asarray(ids)), reference(op, data, ids, n))


@pytest.mark.parametrize("op,dtype,want", [
    ("max", np.int8, -128), ("min", np.uint8, 255), ("max", np.float16, -np.inf),
    ("min", jnp.bfloat16, np.inf), ("max", np.bool_, False), ("min", np.bool_, True),
    ("sum", np.int32, 0), ("prod", np.float32, 1), ("max", np.complex64, -np.inf),
])
def test_empty_segments_hold_jaxs_identity(op, dtype, want):
    data = jnp.asarray(np.ones((2, 3), np.float32)).astype(dtype)
    out = OPS[op][0](data, jnp.asarray([0, 0]), 3)
    assert out.dtype == np.dtype(dtype) and out.shape == (3, 3)
    np.testing.assert_array_equal(np.asarray(out[1:]).astype(np.complex128), want)


def test_edge_values_equal_jaxs():
    """JAX 0.10.2's outputs on the same inputs."""
    d = jnp.asarray([1., 2., 3., 4., 5.])
    np.testing.assert_array_equal(fnx.ops.segment_sum(d, jnp.asarray([0, -1, 1, 2, 3]), 3),
                                  [1., 3., 4.])   # -1 dropped, not wrapped; 3 dropped
    np.testing.assert_array_equal(
        fnx.ops.segment_sum(d, jnp.asarray([0, -1, 1, 2, 3]), 3, mode="clip"), [3., 3., 9.])
    np.testing.assert_array_equal(
        fnx.ops.segment_sum(d, jnp.asarray([0, -1, 1, 2, 3]), 3,
                            mode=fnx.lax.GatherScatterMode.PROMISE_IN_BOUNDS), [1., 3., 4.])
    # int8 ids and more segments than int8 holds: -128 is still dropped, 127 kept
    out = fnx.ops.segment_sum(d, jnp.asarray(np.array([0, 0, 127, -128, 3], np.int8)), 200)
    want = np.zeros(200, np.float32)
    want[[0, 127, 3]] = [3., 3., 5.]
    np.testing.assert_array_equal(out, want)
    nan = np.nan
    x, ids = jnp.asarray([1., nan, 3., 4.]), jnp.asarray([0, 0, 2, 2])
    np.testing.assert_array_equal(fnx.ops.segment_max(x, ids, 3), [nan, -np.inf, 4.])
    np.testing.assert_array_equal(fnx.ops.segment_min(x, ids, 3), [nan, np.inf, 3.])
    np.testing.assert_array_equal(fnx.ops.segment_sum(x, ids, 3), [nan, 0., 7.])
    # data broadcasts against the ids (JAX's x[ids] += data)
    np.testing.assert_array_equal(fnx.ops.segment_sum(2., jnp.asarray([1, 0, 1]), 3),
                                  [2., 4., 0.])
    # all ids negative: max + 1 == 0 segments
    assert fnx.ops.segment_sum(d, jnp.asarray([-3, -1, -2, -2, -5])).shape == (0,)
    empty = fnx.ops.segment_max(jnp.zeros((0, 3), jnp.int8), jnp.zeros((0,), jnp.int32), 2)
    np.testing.assert_array_equal(empty, np.full((2, 3), -128, np.int8))


@settings(deadline=None)
@given(segment_cases(), st.integers(1, 4))
def test_buckets_equal_no_buckets(case, bucket_size):
    op, data, ids, n, clip = case
    fn = OPS[op][0]
    mode = "clip" if clip else None
    assert_same(fn(jnp.asarray(data), jnp.asarray(ids), n, bucket_size=bucket_size,
                   mode=mode),
                reference(op, data, ids, n, clip))


def test_buckets_equal_jaxs():
    np.testing.assert_array_equal(
        fnx.ops.segment_sum(jnp.arange(7.), jnp.asarray([0, 1, 1, 0, 2, 2, 9]), 3,
                            bucket_size=2), [3., 3., 9.])
    np.testing.assert_array_equal(
        fnx.ops.segment_max(jnp.arange(1, 8.), jnp.asarray([0, 1, 1, 0, 2, 2, -1]), 4,
                            bucket_size=3), [4., 3., 6., -np.inf])


@pytest.mark.parametrize("op", sorted(OPS))
def test_vmap_equals_a_loop(op):
    rng = np.random.default_rng(0)
    fn = OPS[op][0]
    data = rng.uniform(-2, 2, (3, 6, 2)).astype(np.float32)
    ids = rng.integers(-1, 5, (3, 6)).astype(np.int32)
    got = fnx.vmap(lambda d, i: fn(d, i, 4))(jnp.asarray(data), jnp.asarray(ids))
    for b in range(3):
        assert_same(got[b], reference(op, data[b], ids[b], 4))
    # only the data batched, ids shared
    got = fnx.vmap(lambda d: fn(d, jnp.asarray(ids[:, 0]), 4), in_axes=1)(jnp.asarray(data))
    for b in range(6):
        assert_same(got[b], reference(op, data[:, b], ids[:, 0], 4))


def test_jit_of_vmap_of_grad_composes():
    ids = jnp.asarray([0, 2, 2, -1, 1])
    f = fnx.jit(fnx.vmap(fnx.grad(lambda d: fnx.ops.segment_prod(d, ids, 3).sum())))
    d = np.array([[1., 2., 3., 4., 5.], [2., 0., 1., 1., 1.]], np.float32)
    np.testing.assert_allclose(f(jnp.asarray(d)), [[1., 3., 2., 0., 1.], [1., 1., 0., 0., 1.]])


IDS = np.array([0, 2, 2, -1, 1, 2, 7, 0], np.int32)


@pytest.mark.parametrize("op,order", [("sum", 2), ("prod", 2), ("max", 1), ("min", 1)])
def test_gradients_match_finite_differences(op, order):
    rng = np.random.default_rng(1)
    fn = OPS[op][0]
    # distinct values: no ties for max/min; away from zero for prod; 3 segments, each
    # non-empty (no -inf to difference), ids -1 and 7 dropped
    data = (rng.permutation(16).reshape(8, 2) * 0.25 + 0.5).astype(np.float32)
    ids = jnp.asarray(IDS)
    check_grads(lambda d: fn(d, ids, 3), (jnp.asarray(data),), order,
                modes=("fwd", "rev"), rtol=2e-2, atol=2e-2)


def test_max_gradient_splits_ties_as_jax():
    ids = jnp.asarray([0, 0, 1, 1, 1])
    x = jnp.asarray([1., 1., 2., 3., 3.])
    np.testing.assert_array_equal(fnx.grad(lambda x: fnx.ops.segment_max(x, ids, 2).sum())(x),
                                  [0.5, 0.5, 0., 0.5, 0.5])
    np.testing.assert_array_equal(fnx.grad(lambda x: fnx.ops.segment_min(x, ids, 2).sum())(x),
                                  [0.5, 0.5, 1., 0., 0.])


def test_sum_gradient_drops_out_of_range_rows():
    g = fnx.grad(lambda d: (fnx.ops.segment_sum(d, jnp.asarray(IDS), 3) ** 2).sum())(
        jnp.arange(8.))
    s = reference("sum", np.arange(8.), IDS, 3)
    want = [2 * s[i] if 0 <= i < 3 else 0. for i in IDS]
    np.testing.assert_allclose(g, want)


@pytest.mark.gpu
def test_on_the_gpu_device(gpu):
    rng = np.random.default_rng(2)
    data = rng.uniform(-2, 2, (9, 3)).astype(np.float32)
    ids = np.array([0, 4, -1, 2, 2, 9, 0, 1, 2], np.int32)

    def f(d, i):
        return (fnx.ops.segment_sum(d, i, 5), fnx.ops.segment_max(d, i, 5),
                fnx.ops.segment_min(d, i, 5, mode="clip"))
    outs = fnx.jit(f)(*fnx.device_put((jnp.asarray(data), jnp.asarray(ids)), gpu))
    assert outs[0].device == gpu
    for got, op, clip in zip(outs, ("sum", "max", "min"), (False, False, True)):
        assert_same(got, reference(op, data, ids, 5, clip))


def test_errors_name_the_function_and_say_what_to_do():
    d = jnp.ones(5)
    with pytest.raises(ConcretizationError, match=r"segment_sum: num_segments=None .*"
                       r"Pass num_segments=N"):
        fnx.jit(fnx.ops.segment_sum)(d, jnp.asarray([0, 0, 1, 2, 3]))
    with pytest.raises(ConcretizationError, match="segment_max: num_segments .*static"):
        fnx.jit(fnx.ops.segment_max)(d, jnp.asarray([0, 0, 1, 2, 3]), 3)
    with pytest.raises(TypeError, match=r"segment_sum: segment_ids must be an array of "
                       r"integers, got float32\[5\].*astype"):
        fnx.ops.segment_sum(d, jnp.asarray([0., 0, 1, 2, 3]), 3)
    with pytest.raises(TypeError, match="segment_sum: data of dtype bool .*astype"):
        fnx.ops.segment_sum(jnp.asarray([True, False]), jnp.asarray([0, 1]), 2)
    with pytest.raises(ValueError, match=r"segment_min: data float32\[5\] does not match "
                       r"segment_ids int32\[3\].*data.shape\[0\] == segment_ids.shape\[0\]"):
        fnx.ops.segment_min(d, jnp.asarray([0, 0, 1]), 3)
    with pytest.raises(ValueError, match="segment_prod: num_segments must be non-negative"):
        fnx.ops.segment_prod(d, jnp.asarray([0, 0, 1, 2, 3]), -1)
    with pytest.raises(TypeError, match="segment_sum: num_segments must be an int"):
        fnx.ops.segment_sum(d, jnp.asarray([0, 0, 1, 2, 3]), 3.0)
    with pytest.raises(ValueError, match="segment_sum: .*segment_ids is empty.*pass "
                       "num_segments"):
        fnx.ops.segment_sum(jnp.zeros(0), jnp.zeros(0, jnp.int32))
    with pytest.raises(ValueError, match="segment_max: bucket_size must be a positive int"):
        fnx.ops.segment_max(d, jnp.asarray([0, 0, 1, 2, 3]), 4, bucket_size=0)
    with pytest.raises(ValueError, match="segment_sum: Unknown .*mode 'foo'"):
        fnx.ops.segment_sum(d, jnp.asarray([0, 0, 1, 2, 3]), 4, mode="foo")
    with pytest.raises(TypeError, match="segment_sum: data must be an array .*list"):
        fnx.ops.segment_sum([1., 2.], jnp.asarray([0, 1]), 2)


def test_module_and_signatures_are_jaxs():
    import importlib
    assert importlib.import_module("fnx.ops") is fnx.ops
    params = ["data", "segment_ids", "num_segments", "indices_are_sorted", "unique_indices",
              "bucket_size", "mode", "out_sharding"]
    for name in ("segment_sum", "segment_prod", "segment_max", "segment_min"):
        fn = getattr(fnx.ops, name)
        assert list(inspect.signature(fn).parameters) == params
        assert fn.__doc__
    out = fnx.ops.segment_sum(jnp.arange(5), jnp.asarray([0, 0, 1, 1, 2]), 3, True, False)
    np.testing.assert_array_equal(out, [1, 5, 4])
    assert out.dtype == np.int32
