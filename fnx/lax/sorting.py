"""``sort``: a stable, multi-operand sort along one dimension.

The first ``num_keys`` operands are the keys (lexicographic, NaNs last); the
remaining operands are permuted the same way, which is how ``argsort`` and
sort-by-key are written. ``top_k``: the k largest entries along the last axis.

One block per primitive: the definition, then its jvp and batching rules, then its
lowering (``"onnx"``, written with ``fnx.core.onnx_rules``), JAX's ``lax.py`` layout.
"""
from __future__ import annotations

import numpy as np

from ..core import array_library as AL
from ..core import dtypes
from ..core import onnx_rules as O
from ..core.backend import register_lowering
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.vmap import materialize_batch_axis
from .rule_helpers import describe, normalize_axis


# === sort ========================================================================================

def _sort_rule(*operands, dimension, is_stable=True, num_keys=1):
    if not operands or not 1 <= num_keys <= len(operands):
        raise ShapeError(f"sort: num_keys={num_keys} must be between 1 and the number of "
                         f"operands ({len(operands)})")
    if any(o.shape != operands[0].shape for o in operands):
        raise ShapeError(f"sort: operands must have equal shapes, got {describe(*operands)}")
    if operands[0].ndim == 0:
        raise ShapeError(f"sort: operands must have at least one dimension, got rank 0 "
                         f"({describe(*operands)})")
    normalize_axis("sort", dimension, operands[0].ndim)
    return [ShapeDtypeStruct(o.shape, o.dtype, o.weak_type) for o in operands]


def _sortable(key):
    """``key`` as NumPy sorts it right: bfloat16 (an ml_dtypes type, NumPy kind "V")
    compares NaNs unlike NumPy's floats, so its sorts come out unordered; float32
    holds every bfloat16 value exactly, with NaNs last."""
    return key.astype(np.float32) if key.dtype.kind == "V" else key


def _sort_impl(*operands, dimension, is_stable=True, num_keys=1):
    keys = [_sortable(k) for k in operands[:num_keys]]
    if num_keys == 1:
        perm = np.argsort(keys[0], axis=dimension, kind="stable")
    elif AL.is_device(keys[0]):
        # CuPy's lexsort takes no axis: stable sorts from the least significant key on
        perm = np.argsort(keys[-1], axis=dimension, kind="stable")
        for key in keys[-2::-1]:
            step = np.argsort(np.take_along_axis(key, perm, axis=dimension), axis=dimension,
                              kind="stable")
            perm = np.take_along_axis(perm, step, axis=dimension)
    else:
        perm = np.lexsort(keys[::-1], axis=dimension)
    return [np.take_along_axis(o, perm, axis=dimension) for o in operands]


sort_p = Primitive("sort", shape_rule=_sort_rule, impl=_sort_impl, multiple_results=True)


def _sort_jvp(primals, tangents, *, dimension, is_stable=True, num_keys=1):
    from . import ops as L
    from .indexing import gather_p
    shape = tuple(primals[0].shape)
    iota = L.broadcasted_iota(np.int32, shape, dimension)
    *outs, perm = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                              num_keys=num_keys)
    index = [perm if d == dimension else L.broadcasted_iota(np.int32, shape, d)
             for d in range(len(shape))]
    spec = tuple(("a", d) for d in range(len(shape)))
    out_t = [None if t is None else gather_p.bind(t, *index, spec=spec) for t in tangents]
    return outs, out_t


sort_p.jvp = _sort_jvp


def _sort_batch(vals, dims, size, *, dimension, is_stable=True, num_keys=1):
    ops = [materialize_batch_axis(v, d, size, v.shape[1:] if d == 0 else v.shape)
           for v, d in zip(vals, dims)]
    outs = sort_p.bind(*ops, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return outs, [0] * len(outs)


sort_p.batch = _sort_batch


def _onnx_stable_argsort(ctx, key, dt, axis, n):
    """int64 indices that sort ``key`` stably along ``axis`` (NaNs last). ``TopK`` with
    largest=0 keeps equal elements in index order; NaNs are put last explicitly by a
    first, stable pass on isnan (the final order is by (value, isnan))."""
    def topk(values):
        return O.op(ctx, "TopK", values, O.ints(ctx, [n]), axis=axis, largest=0, sorted=1,
                    outputs=2)[1]
    if not O.is_float(dt):
        kk, _, _ = O.exact(ctx, key, dt, O.TOPK_KERNELS, ordered=True)
        return topk(kk)
    kk, kdt, _ = O.exact(ctx, key, dt, O.TOPK_KERNELS)
    nan = O.op(ctx, "IsNaN", kk)
    first = topk(O.cast(ctx, nan, O.BOOL, O.U8))
    values = O.where(ctx, nan, O.scalar(ctx, np.inf, kdt), kk, kdt, signed_zeros=False)  # -0 == 0
    second = topk(O.op(ctx, "GatherElements", values, first, axis=axis))
    return O.op(ctx, "GatherElements", first, second, axis=axis)


def _sort_onnx(ctx, *operands, dimension, is_stable=True, num_keys=1):
    a = ctx.in_avals[0]
    n = a.shape[dimension]
    if n <= 1:
        return list(operands)
    perm = None
    for i in reversed(range(num_keys)):        # least significant key first (as lexsort)
        key = operands[i]
        if perm is not None:
            key = O.op(ctx, "GatherElements", key, perm, axis=dimension)
        order = _onnx_stable_argsort(ctx, key, ctx.in_avals[i].dtype, dimension, n)
        perm = order if perm is None else O.op(ctx, "GatherElements", perm, order,
                                               axis=dimension)
    return [O.op(ctx, "GatherElements", o, perm, axis=dimension) for o in operands]


register_lowering(sort_p, "onnx", _sort_onnx)


# === top_k: the k largest entries along the last axis =============================================

def _top_k_rule(operand, *, k):
    if operand.ndim == 0:
        raise ShapeError(f"top_k: the operand must have at least one dimension, got "
                         f"{describe(operand)}")
    real = operand.dtype.kind in "biuf" or operand.dtype == dtypes.bfloat16
    if not real:
        raise ShapeError(f"top_k: needs a real (not complex) operand, got {describe(operand)}")
    n = operand.shape[-1]
    if n > np.iinfo(np.int32).max:
        raise ValueError(f"top_k returns int32 indices, which will overflow for the last "
                         f"axis of {describe(operand)} (as in JAX)")
    if not 0 <= k <= n:
        raise ShapeError(f"top_k: k={k} must be between 0 and the size of the last axis "
                         f"({n}) of {describe(operand)}")
    shape = tuple(operand.shape[:-1]) + (k,)
    return [ShapeDtypeStruct(shape, operand.dtype, operand.weak_type),
            ShapeDtypeStruct(shape, np.int32)]


def _top_k_impl(operand, *, k):
    """Descending and stable (of equal values the lower index comes first); NaNs rank
    above every number. Sorting the reversed axis ascending, stably, orders equal
    values by decreasing index; reading that order backwards gives the result."""
    n = operand.shape[-1]
    perm = np.argsort(np.flip(_sortable(operand), -1), axis=-1, kind="stable")
    idx = (n - 1 - np.flip(perm, -1)[..., :k]).astype(np.int32)
    return [np.take_along_axis(operand, idx, axis=-1), idx]


top_k_p = Primitive("top_k", shape_rule=_top_k_rule, impl=_top_k_impl, multiple_results=True)


def _top_k_jvp(primals, tangents, *, k):
    """The values' tangent is the operand's tangent at the chosen indices (a gather, so
    it transposes to a scatter-add); the indices are piecewise constant."""
    from .indexing import gather_p
    from . import ops as L
    (x,), (t,) = primals, tangents
    vals, idx = top_k_p.bind(x, k=k)
    if t is None:
        return [vals, idx], [None, None]
    shape = tuple(idx.shape)
    index = [idx if d == len(shape) - 1 else L.broadcasted_iota(np.int32, shape, d)
             for d in range(len(shape))]
    spec = tuple(("a", d) for d in range(len(shape)))
    return [vals, idx], [gather_p.bind(t, *index, spec=spec), None]


top_k_p.jvp = _top_k_jvp


def _top_k_batch(vals, dims, size, *, k):
    # the batch dimension is in front (vmap moves it there) and top_k works on the last
    if vals[0].ndim == 1:  # a batch of scalars: top_k needs rank >= 1 per example
        raise ShapeError("top_k: the operand must have at least one dimension, got rank 0")
    return top_k_p.bind(vals[0], k=k), [0, 0]


top_k_p.batch = _top_k_batch


def _top_k_onnx(ctx, x, *, k):
    """ONNX ``TopK`` (largest=1, sorted=1) along the last axis. ONNX breaks ties by the
    lower index, as the impl does (-0.0 and 0.0 tie); onnxruntime (1.32, CPU) ranks NaN
    above every number, lower index first, which is the impl's order too (the tests
    check it with NaNs). Dtypes without a TopK kernel go through a wider one (uint64:
    int64 with the sign bit flipped, so the order is kept); values are gathered from the
    operand, so they keep their bits."""
    a = ctx.in_avals[0]
    if k == 0:
        shape = tuple(a.shape[:-1]) + (0,)
        return [O.full(ctx, np.zeros((), a.dtype), a.dtype, shape),
                O.full(ctx, np.zeros((), np.int32), np.dtype(np.int32), shape)]
    key, _, _ = O.exact(ctx, x, a.dtype, O.TOPK_KERNELS, ordered=True)
    _, idx = ctx.node("TopK", [key, O.ints(ctx, [k])], outputs=2, axis=-1, largest=1,
                      sorted=1)
    vals = O.op(ctx, "GatherElements", x, idx, axis=a.ndim - 1)
    return [vals, O.cast(ctx, idx, O.I64, np.int32)]


register_lowering(top_k_p, "onnx", _top_k_onnx)
