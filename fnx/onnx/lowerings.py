"""Where the ONNX lowerings of the built-in primitives are.

Each primitive's ``"onnx"`` lowering is registered beside its other rules (definition,
jvp, transpose, batching) in the ``fnx.lax`` module that defines it, with
``register_lowering(prim, "onnx", rule)``; the helpers the rules are written with
(``where``, ``cast``, ``exact``, the onnxruntime kernel sets, ...) are in
``fnx.core.onnx_rules``, whose docstring also lists how the lowerings reproduce the NumPy
impls, the onnxruntime workarounds, and the primitives left out (and why).

This module keeps the names code outside fnx.lax used from it: ``ONNXRUNTIME_GAPS``,
``install()`` (nothing to do now: importing ``fnx.lax`` registers every rule) and, for
lowerings not yet moved to the public helpers, the helpers' former private names
(``_op``, ``_k``, ``_cast``, ...).
"""
from __future__ import annotations

import math

import numpy as np

from ..core.backend import lowering, register_lowering
from ..core.primitive import REGISTRY
from ..core.onnx_rules import (BOOL, F16, F32, F64, I8, I16, I32, I64,  # noqa: F401
                               ONNXRUNTIME_GAPS, U8, U16, U32, U64)

__all__ = ["ONNXRUNTIME_GAPS", "install"]


# The helpers' former private names, for lowerings not yet written with the public ones.
from ..core.onnx_rules import (  # noqa: E402,F401
    ARGMAX_KERNELS as _ARGMAX, COMPARE_KERNELS as _COMPARE, CUMSUM_KERNELS as _CUMSUM,
    EINSUM_KERNELS as _EINSUM, INT64_MIN as _INT64_MIN, MINMAX_KERNELS as _MINMAX,
    NEG_KERNELS as _NEG, PAD_KERNELS as _PAD, REDUCE_ARITH_KERNELS as _REDUCE_ARITH,
    REDUCE_ORDER_KERNELS as _REDUCE_ORDER, TOPK_KERNELS as _TOPK, WHERE_KERNELS as _WHERE,
    WIDER as _WIDER, and_ as _and, any_ as _any, arithmetic as _arithmetic,
    binary as _simple_binary, cast as _cast, compare as _compare, comparison as _comparison,
    eq as _eq, exact as _exact, expm1 as _expm1, extremum as _max, full as _full,
    hillis_steele as _hillis_steele, identity as _identity, index_int64 as _index_int64,
    ints as _ints, is_float as _is_float, is_int as _is_int, log1p as _log1p,
    logaddexp as _logaddexp, logic as _logic, not_ as _not, op as _op, or_ as _or, pad as _pad,
    pad_config as _pad_config, reshape as _reshape, scalar as _k, signbit as _signbit,
    slice_ as _slice, tree_reduce as _tree_reduce, unary as _simple_unary, where as _where,
    wider_dtype as _wide)


# --- dot_general ---------------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_equation(lhs_ndim, rhs_ndim, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs_ndim + rhs_ndim > len(_LETTERS):
        raise ValueError("dot_general: too many dimensions for an ONNX Einsum equation")
    letters = iter(_LETTERS)
    lhs = [next(letters) for _ in range(lhs_ndim)]
    rhs = [None] * rhs_ndim
    for a, b in zip(lc, rc):
        rhs[b] = lhs[a]
    for a, b in zip(lb, rb):
        rhs[b] = lhs[a]
    rhs = [r if r is not None else next(letters) for r in rhs]
    lf = [d for d in range(lhs_ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs_ndim) if d not in rc and d not in rb]
    out = [lhs[d] for d in lb] + [lhs[d] for d in lf] + [rhs[d] for d in rf]
    return f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"


def _lower_dot_general(ctx, lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    la, ra = ctx.in_avals
    dt = ctx.out_avals[0].dtype             # the impl casts the operands to it first
    lhs, rhs = _cast(ctx, lhs, la.dtype, dt), _cast(ctx, rhs, ra.dtype, dt)
    eq = _einsum_equation(la.ndim, ra.ndim, dimension_numbers)
    if dt in _EINSUM:
        return _op(ctx, "Einsum", lhs, rhs, equation=eq)
    if dt == BOOL:                          # or of ands: a sum of 0/1 products > 0
        r = _op(ctx, "Einsum", _cast(ctx, lhs, BOOL, I64), _cast(ctx, rhs, BOOL, I64),
                equation=eq)
        return _op(ctx, "Greater", r, _k(ctx, 0, I64))
    # narrow or unsigned integers wrap: int64 and back gives the same value mod 2**bits;
    # float16/bfloat16 accumulate in float32
    wide = I64 if _is_int(dt) else F32
    r = _op(ctx, "Einsum", _cast(ctx, lhs, dt, wide), _cast(ctx, rhs, dt, wide), equation=eq)
    return _cast(ctx, r, wide, dt)


# --- sort ---------------------------------------------------------------------------------------

def _stable_argsort(ctx, key, dt, axis, n):
    """int64 indices that sort ``key`` stably along ``axis`` (NaNs last). ``TopK`` with
    largest=0 keeps equal elements in index order; NaNs are put last explicitly by a
    first, stable pass on isnan (the final order is by (value, isnan))."""
    def topk(values):
        return _op(ctx, "TopK", values, _ints(ctx, [n]), axis=axis, largest=0, sorted=1,
                   outputs=2)[1]
    if not _is_float(dt):
        kk, _, _ = _exact(ctx, key, dt, _TOPK, ordered=True)
        return topk(kk)
    kk, kdt, _ = _exact(ctx, key, dt, _TOPK)
    nan = _op(ctx, "IsNaN", kk)
    first = topk(_cast(ctx, nan, BOOL, U8))
    values = _where(ctx, nan, _k(ctx, np.inf, kdt), kk, kdt, signed_zeros=False)  # -0 == 0
    second = topk(_op(ctx, "GatherElements", values, first, axis=axis))
    return _op(ctx, "GatherElements", first, second, axis=axis)


def _lower_sort(ctx, *operands, dimension, is_stable=True, num_keys=1):
    a = ctx.in_avals[0]
    n = a.shape[dimension]
    if n <= 1:
        return list(operands)
    perm = None
    for i in reversed(range(num_keys)):        # least significant key first (as lexsort)
        key = operands[i]
        if perm is not None:
            key = _op(ctx, "GatherElements", key, perm, axis=dimension)
        order = _stable_argsort(ctx, key, ctx.in_avals[i].dtype, dimension, n)
        perm = order if perm is None else _op(ctx, "GatherElements", perm, order,
                                              axis=dimension)
    return [_op(ctx, "GatherElements", o, perm, axis=dimension) for o in operands]


# --- gather / scatter ---------------------------------------------------------------------------

def _index_grid(ctx, x_shape, spec, indices, index_avals, out_shape, oob):
    """An int64 tensor of shape ``out_shape + (ndim,)``: for each element of ``x[spec]``
    the position in ``x`` it comes from. Dynamic indices wrap once when negative, then
    ``oob="clip"`` clamps them into range (gather) and ``oob="drop"`` sends the ones out
    of range to index n (a padding slot the caller adds, as scatter's impl does)."""
    rank = len(out_shape)
    has_arrays = any(type(it) is tuple and it[0] == "a" for it in spec)
    # where each spec item's dims land in the output
    pieces = []
    for it in spec:
        if it is None or (type(it) is tuple and it[0] == "s"):
            pieces.append("basic")
        elif type(it) is int and not has_arrays:
            pieces.append("gone")
        else:
            pieces.append("adv")
    adv = [p for p, kind in enumerate(pieces) if kind == "adv"]
    bshape = ()
    if adv:
        bshape = np.broadcast_shapes(*[() if type(spec[p]) is int else
                                       index_avals[spec[p][1]].shape for p in adv])
    contiguous = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
    pos, adv_at = 0, None
    if adv and not contiguous:
        adv_at, pos = 0, len(bshape)
    out_pos = {}
    for p, kind in enumerate(pieces):
        if kind == "adv":
            if adv_at is None:
                adv_at = pos
                pos += len(bshape)
        elif kind == "basic":
            out_pos[p] = pos
            pos += 1

    columns, dim = [], 0
    for p, it in enumerate(spec):
        if it is None:
            continue
        n = x_shape[dim]
        if type(it) is int:
            col = _k(ctx, it, I64)
        elif it[0] == "s":
            start, stop, step = slice(*it[1:]).indices(n)
            values = np.arange(start, stop, step, dtype=np.int64)
            shape = [1] * rank
            shape[out_pos[p]] = len(values)
            col = ctx.const(values.reshape(shape))
        else:
            a = index_avals[it[1]]
            col = _index_int64(ctx, indices[it[1]], a.dtype, n)
            if a.dtype.kind == "i":
                col = _op(ctx, "Where", _op(ctx, "Less", col, _k(ctx, 0, I64)),
                          _op(ctx, "Add", col, _k(ctx, n, I64)), col)
            if oob == "clip":
                col = _op(ctx, "Max", _op(ctx, "Min", col, _k(ctx, max(n - 1, 0), I64)),
                          _k(ctx, 0, I64))
            else:
                bad = _or(ctx, _op(ctx, "Less", col, _k(ctx, 0, I64)),
                          _op(ctx, "GreaterOrEqual", col, _k(ctx, n, I64)))
                col = _op(ctx, "Where", bad, _k(ctx, n, I64), col)
            shape = [1] * rank
            shape[adv_at + len(bshape) - a.ndim: adv_at + len(bshape)] = a.shape
            col = _reshape(ctx, col, shape)
        col = _op(ctx, "Expand", col, _ints(ctx, out_shape))
        columns.append(_op(ctx, "Unsqueeze", col, _ints(ctx, [rank])))
        dim += 1
    return columns[0] if len(columns) == 1 else _op(ctx, "Concat", *columns, axis=rank)


def _lower_gather(ctx, x, *indices, spec):
    a, out = ctx.in_avals[0], ctx.out_avals[0]
    if a.ndim == 0:                               # only new axes
        return _reshape(ctx, x, out.shape)
    grid = _index_grid(ctx, a.shape, spec, indices, ctx.in_avals[1:], out.shape, "clip")
    return _op(ctx, "GatherND", x, grid)


_SCATTER_REDUCTION = {"set": "none", "add": "add", "mul": "mul", "min": "min", "max": "max"}


def _lower_scatter(ctx, x, updates, *indices, spec, mode):
    a, u = ctx.in_avals[0], ctx.in_avals[1]
    dt = a.dtype
    if a.ndim == 0:                   # only new axes: one element, updated once
        updates = _reshape(ctx, updates, []) if u.ndim else updates
        if mode == "set":
            return updates
        if mode in ("min", "max"):
            return _max(ctx, x, updates, dt, "Max" if mode == "max" else "Min")
        if dt == BOOL:                # add is or, mul is and
            return _op(ctx, "Or" if mode == "add" else "And", x, updates)
        return _op(ctx, "Add" if mode == "add" else "Mul", x, updates)
    # out-of-range updates land in a padding slot (index n) that is cut off afterwards
    dims = [it for it in spec if it is not None]
    grow = [1 if type(it) is tuple and it[0] == "a" else 0 for it in dims]
    grid = _index_grid(ctx, a.shape, spec, indices, ctx.in_avals[2:], u.shape, "drop")

    def scatter(data, upd, src, work, reduction):
        """ScatterND of ``src``-typed data and updates, computed in ``work``."""
        data, upd = _cast(ctx, data, src, work), _cast(ctx, upd, src, work)
        if any(grow):
            data = _pad(ctx, data, [0] * a.ndim + grow, _k(ctx, 0, work), work)
        out = _op(ctx, "ScatterND", data, grid, upd, reduction=reduction)
        if any(grow):
            out = _slice(ctx, out, [0] * a.ndim, a.shape, range(a.ndim))
        return _cast(ctx, out, work, src)

    reduction = _SCATTER_REDUCTION[mode]
    # no bool kernels for these: 0/1 as uint8 (mul and min are and, max is or)
    work = U8 if dt == BOOL and reduction in ("mul", "min", "max") else dt
    out = scatter(x, updates, dt, work, reduction)
    if _is_float(dt) and mode in ("min", "max"):
        # np.minimum.at propagates NaN from the operand and from any update
        hit = scatter(_full(ctx, False, BOOL, a.shape), _op(ctx, "IsNaN", updates), BOOL, U8,
                      "max")
        out = _where(ctx, _or(ctx, _op(ctx, "IsNaN", x), hit), _k(ctx, np.nan, dt), out, dt)
    return out


# --- the table of the rules not yet moved beside their primitives -------------------------------

def _table():
    return {
        "dot_general": _lower_dot_general, "sort": _lower_sort,
        "gather": _lower_gather, "scatter": _lower_scatter,
    }


LOWERINGS = _table()


def install():
    """Attach the rules above to their primitives (leaving any rule already set alone)."""
    for name, rule in LOWERINGS.items():
        prim = REGISTRY.get(name)
        if prim is not None and lowering(prim, "onnx") is None:
            register_lowering(prim, "onnx", rule)
