"""JAX's ``lax.gather`` / ``lax.scatter*`` on XLA dimension numbers: against a loop-by-loop
NumPy reference of XLA's semantics over random dimension numbers (batching dimensions,
collapsed and inserted dimensions, permuted start maps, out-of-bounds starts in every
mode), and through jit, vmap, jvp/vjp and the emulated GPU. Expected values in the
examples are JAX 0.10's for the same calls."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import ShapeError
from fnx.test_util import check_grads

GDN, SDN = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers


# --- the reference: XLA's definitions, one element at a time ------------------------------

def ref_gather(x, idx, dn, sizes, mode, fill):
    R = x.ndim
    batch_shape = idx.shape[:-1]
    kept = [d for d in range(R) if d not in dn.collapsed_slice_dims
            and d not in dn.operand_batching_dims]
    rank = len(batch_shape) + len(kept)
    batch_pos = [p for p in range(rank) if p not in dn.offset_dims]
    out_shape = [0] * rank
    for p, n in zip(batch_pos, batch_shape):
        out_shape[p] = n
    for p, d in zip(dn.offset_dims, kept):
        out_shape[p] = sizes[d]
    out = np.empty(out_shape, x.dtype)
    for o in itertools.product(*map(range, out_shape)):
        b = tuple(o[p] for p in batch_pos)
        at, ok = [0] * R, True
        for j, d in enumerate(dn.start_index_map):
            s = int(idx[b + (j,)])
            ok &= 0 <= s <= x.shape[d] - sizes[d]
            at[d] = min(max(s, 0), x.shape[d] - sizes[d])
        for a, k in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            at[a] = b[k]
        for p, d in zip(dn.offset_dims, kept):
            at[d] += o[p]
        out[o] = x[tuple(at)] if ok or mode != "fill" else fill
    return out


def ref_scatter(x, idx, u, dn, mode, how):
    out = x.copy()
    R = x.ndim
    kept = [d for d in range(R) if d not in dn.inserted_window_dims
            and d not in dn.operand_batching_dims]
    scatter_pos = [p for p in range(u.ndim) if p not in dn.update_window_dims]
    ext = [1] * R
    for d, p in zip(kept, dn.update_window_dims):
        ext[d] = u.shape[p]
    for e in itertools.product(*map(range, u.shape)):
        b = tuple(e[p] for p in scatter_pos)
        at, ok = [0] * R, True
        for j, d in enumerate(dn.scatter_dims_to_operand_dims):
            s = int(idx[b + (j,)])
            ok &= 0 <= s <= x.shape[d] - ext[d]
            at[d] = min(max(s, 0), x.shape[d] - ext[d])
        if not ok and mode != "clip":
            continue
        for a, k in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
            at[a] = b[k]
        for d, p in zip(kept, dn.update_window_dims):
            at[d] += e[p]
        at = tuple(at)
        v = u[e]
        out[at] = {"set": v, "add": out[at] + v, "sub": out[at] - v, "mul": out[at] * v,
                   "min": min(out[at], v), "max": max(out[at], v)}[how]
    return out


# --- random dimension numbers ---------------------------------------------------------------

@st.composite
def gathers(draw):
    R = draw(st.integers(1, 3))
    shape = draw(st.lists(st.integers(1, 4), min_size=R, max_size=R))
    dims = list(range(R))
    op_batch = draw(st.sampled_from([[]] + [[d] for d in dims]))
    rest = [d for d in dims if d not in op_batch]
    start_map = draw(st.permutations(rest).flatmap(
        lambda p: st.integers(0, len(p)).map(lambda k: list(p[:k]))))
    collapsed = sorted(draw(st.lists(st.sampled_from(rest), unique=True)) if rest else [])
    sizes = [1 if d in collapsed or d in op_batch else draw(st.integers(0, shape[d]))
             for d in dims]
    n_batch = draw(st.integers(len(op_batch), len(op_batch) + 2))
    ix_batch = draw(st.permutations(range(n_batch)))[:len(op_batch)]
    batch_shape = [draw(st.integers(1, 3)) for _ in range(n_batch)]
    for a, k in zip(op_batch, ix_batch):
        batch_shape[k] = shape[a]
    kept = [d for d in rest if d not in collapsed]
    rank = n_batch + len(kept)
    offset = sorted(draw(st.permutations(range(rank)))[:len(kept)])
    dn = GDN(tuple(offset), tuple(collapsed), tuple(start_map), tuple(op_batch), tuple(ix_batch))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    idx = rng.integers(-2, max(shape) + 2, batch_shape + [len(start_map)]).astype(np.int32)
    return x, idx, dn, tuple(sizes)


@settings(max_examples=60, deadline=None)
@given(gathers(), st.sampled_from([None, "clip", "fill", "promise_in_bounds"]))
def test_gather_equals_xlas_definition(case, mode):
    x, idx, dn, sizes = case
    got = lax.gather(x, idx, dn, sizes, mode=mode)
    want = ref_gather(x, idx, dn, sizes, "fill" if mode == "fill" else "clip", np.nan)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    jitted = fnx.jit(lambda a, i: lax.gather(a, i, dn, sizes, mode=mode))(x, idx)
    np.testing.assert_array_equal(np.asarray(jitted), want)


@st.composite
def scatters(draw):
    x, idx, gdn, sizes = draw(gathers())
    # the gather's result is exactly a valid updates array for the mirror-image scatter
    dn = SDN(gdn.offset_dims, gdn.collapsed_slice_dims, gdn.start_index_map,
             gdn.operand_batching_dims, gdn.start_indices_batching_dims)
    u = np.asarray(ref_gather(x, idx, gdn, sizes, "clip", 0)) * 2 + 1
    return x, idx, u.astype(np.float32), dn


@settings(max_examples=60, deadline=None)
@given(scatters(), st.sampled_from([None, "clip", "fill", "promise_in_bounds"]),
       st.sampled_from(["set", "add", "sub", "mul", "min", "max"]))
def test_scatters_equal_xlas_definition(case, mode, how):
    x, idx, u, dn = case
    f = {"set": lax.scatter, "add": lax.scatter_add, "sub": lax.scatter_sub,
         "mul": lax.scatter_mul, "min": lax.scatter_min, "max": lax.scatter_max}[how]
    got = np.asarray(f(x, idx, u, dn, mode=mode))
    want = ref_scatter(x, idx, u, dn, "clip" if mode == "clip" else "drop", how)
    if how == "set":   # overlapping windows: XLA leaves the winner open, so compare where
        hits = ref_scatter(np.zeros_like(x), idx, np.ones_like(u), dn,   # one window wrote
                           "clip" if mode == "clip" else "drop", "add")
        got, want = got[hits <= 1], want[hits <= 1]
    np.testing.assert_allclose(got, want, rtol=1e-6 if how in ("add", "sub") else 0)


# --- JAX's own examples --------------------------------------------------------------------

def test_jax_values_for_every_mode():
    x = fnp.arange(10.0)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
    i = np.array([[0], [8], [9], [-1], [20]])
    assert lax.gather(x, i, dn, (3,)).tolist() == [[0, 1, 2], [7, 8, 9], [7, 8, 9],
                                                    [0, 1, 2], [7, 8, 9]]
    filled = np.asarray(lax.gather(x, i, dn, (3,), mode="fill"))
    assert filled[0].tolist() == [0, 1, 2] and np.isnan(filled[1:]).all()
    assert lax.gather(fnp.arange(5, dtype=np.uint8), np.array([[3], [7]]),
                      GDN((), (0,), (0,)), (1,), mode="fill").tolist() == [3, 255]
    assert lax.gather(fnp.arange(5), np.array([[9]]), GDN((), (0,), (0,)), (1,),
                      mode="fill", fill_value=-7).tolist() == [-7]
    sdn = SDN(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    i = np.array([[0], [8], [-1], [2]])
    assert lax.scatter_add(fnp.zeros(10), i, fnp.ones((4, 3)), sdn).tolist() == \
        [1, 1, 2, 1, 1, 0, 0, 0, 0, 0]
    assert lax.scatter_add(fnp.zeros(10), i, fnp.ones((4, 3)), sdn, mode="clip").tolist() == \
        [2, 2, 3, 1, 1, 0, 0, 1, 1, 1]
    one = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    assert lax.scatter_apply(fnp.arange(5.0), np.array([[1], [1], [3], [9]]),
                             lambda v: v * 2 + 1, one, update_shape=(4,)).tolist() == \
        [0, 7, 2, 7, 4]   # index 1 twice: 1 -> 3 -> 7


def test_batching_dims_and_index_take():
    x = fnp.arange(24.0).reshape(2, 3, 4)
    dn = GDN(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
             operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    out = np.asarray(lax.gather(x, np.array([[[2], [0]], [[1], [5]]]), dn, (1, 1, 4),
                                mode="fill"))
    np.testing.assert_array_equal(out[:, 0], [[8, 9, 10, 11], [16, 17, 18, 19]])
    assert out[0, 1].tolist() == [0, 1, 2, 3] and np.isnan(out[1, 1]).all()
    a = np.arange(24.0).reshape(2, 3, 4)
    got = lax.index_take(a, (np.array([0, 1, 1]), np.array([3, 0, 2])), (0, 2))
    np.testing.assert_array_equal(got, a[[0, 1, 1], :, [3, 0, 2]])


def test_scalar_operand_takes_every_window():
    dn = SDN(update_window_dims=(), inserted_window_dims=(), scatter_dims_to_operand_dims=())
    assert float(lax.scatter_add(fnp.float32(1.0), np.zeros((3, 0), np.int32),
                                 fnp.array([1.0, 2.0, 3.0]), dn)) == 7.0


# --- transformations -----------------------------------------------------------------------

EMBED = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
ROWS = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


def test_derivatives_match_finite_differences():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((5, 3))
    ids = np.array([[4], [0], [4], [7]])   # a repeat and, for the scatter, a dropped row
    with fnx.enable_x64(True):
        check_grads(lambda t: lax.gather(t, ids, EMBED, (1, 3)), (table,), 2)
        check_grads(lambda t: lax.gather(t, ids, EMBED, (1, 3), mode="fill", fill_value=0.0),
                    (table,), 2)
        u = rng.standard_normal((4, 3))
        check_grads(lambda t, v: lax.scatter_add(t, ids, v, ROWS), (table, u), 2)
        check_grads(lambda t, v: lax.scatter_mul(t, ids, v, ROWS), (table, u), 1)
        g = fnx.grad(lambda t: lax.gather(t, ids, EMBED, (1, 3)).sum())(table)
        np.testing.assert_array_equal(np.asarray(g)[:, 0], [1, 0, 0, 0, 3])  # 7 clamps to 4


def test_vmap_equals_a_loop():
    rng = np.random.default_rng(1)
    tables = rng.standard_normal((3, 5, 2)).astype(np.float32)
    ids = rng.integers(-1, 6, (3, 4, 1)).astype(np.int32)
    f = lambda t, i: lax.scatter_add(t, i, lax.gather(t, i, EMBED, (1, 2)), ROWS)  # noqa: E731
    got = np.asarray(fnx.vmap(f)(tables, ids))
    want = np.stack([np.asarray(f(t, i)) for t, i in zip(tables, ids)])
    np.testing.assert_array_equal(got, want)
    got = np.asarray(fnx.vmap(f, in_axes=(None, 0))(tables[0], ids))
    np.testing.assert_array_equal(got, np.stack([np.asarray(f(tables[0], i)) for i in ids]))


def test_on_the_emulated_gpu(gpu):
    rng = np.random.default_rng(2)
    t = rng.standard_normal((6, 4)).astype(np.float32)
    i = rng.integers(-2, 8, (5, 1)).astype(np.int32)

    def step(t, i):
        rows = lax.gather(t, i, EMBED, (1, 4), mode="fill", fill_value=0.0)
        return lax.scatter_add(t, i, rows * 2, ROWS)
    want = np.asarray(fnx.jit(step)(t, i))
    got = fnx.jit(step)(*fnx.device_put((t, i), gpu))
    assert got.device == gpu
    np.testing.assert_array_equal(np.asarray(got), want)


# --- errors ----------------------------------------------------------------------------------

def test_errors_name_the_op_and_what_to_do():
    x = fnp.zeros((4, 3))
    i = np.zeros((2, 1), np.int32)
    with pytest.raises(TypeError, match="index_gather"):
        lax.gather(x, [i], (("a", 0),), (1, 3))
    with pytest.raises(ShapeError, match=r"slice_sizes \(1,\).*f32\[4,3\]"):
        lax.gather(x, i, EMBED, (1,))
    with pytest.raises(ShapeError, match="start_index_map"):
        lax.gather(x, np.zeros((2, 2), np.int32), EMBED, (1, 3))
    with pytest.raises(ShapeError, match="slice size 1"):
        lax.gather(x, i, EMBED, (2, 3))
    with pytest.raises(TypeError, match="integers"):
        lax.gather(x, i.astype(np.float32), EMBED, (1, 3))
    with pytest.raises(TypeError, match="dtype float32.*convert_element_type"):
        lax.scatter_add(x, i, np.ones((2, 3), np.int32), ROWS)
    with pytest.raises(ShapeError, match=r"updates f32\[3,3\] do not match"):
        lax.scatter_add(x, i, fnp.ones((3, 3)), ROWS)
    with pytest.raises(ShapeError, match=r"updates f32\[2,4\] is larger.*f32\[4,3\]"):
        lax.scatter_add(x, i, fnp.ones((2, 4)), ROWS)
    with pytest.raises(ValueError, match="Unknown gather mode 'wrap'"):
        lax.gather(x, i, EMBED, (1, 3), mode="wrap")
    with pytest.raises(NotImplementedError, match="one_hot"):
        lax.gather(x, i, EMBED, (1, 3), mode="one_hot")
