"""Shape primitives: broadcast, reshape, transpose, slicing, padding, iota.

NumPy impls return views wherever NumPy can (broadcast_to, reshape,
transpose, basic slices, flips): Arrays are immutable, so sharing a buffer
is safe.

One block per primitive: the definition (shape rule, impl), then its jvp, transpose and
batching rules, then its lowerings (``"onnx"``, written with ``fnx.core.onnx_rules``),
JAX's ``lax.py`` layout.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..core import array_library as AL
from ..core import cuda_indexing
from ..core import onnx_rules as O
from ..core.backend import register_lowering
from ..core.numpy_rules import NumpyRule
from ..core.ir import Eqn, Literal, is_identity_permutation, producer_of
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..core.trace import EVAL, get_trace
from ..errors import OutOfMemoryError, ShapeError
from ..transforms.jvp import deflinear, deflinear_in, defjvp_zero, instantiate
from ..transforms.vjp import is_linear
from ..transforms.vmap import batch_shifted, materialize_batch_axis
from .rule_helpers import describe, kind_of, normalize_axes
from . import ops as L  # (rules run after import; ops imports this module)


def _aval(x, shape, dtype=None):
    return ShapeDtypeStruct(shape, x.dtype if dtype is None else dtype, x.weak_type)


# --- sizes: non-negative, and within what this machine could ever hold --------------------
def _physical_memory():
    try:
        n = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if n > 0:
            return n
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        pass
    return 1 << 47  # the 128 TiB a 64-bit process can address


# The bytes an array may take: more than physical memory can never be computed with (a
# broadcast view of that size would be, but every reduction over it runs for hours).
MAX_BYTES = _physical_memory()


def _human(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.1f} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024


def check_shape(name, shape, dtype, what="shape", operand=None, memory=None):
    """Raise unless ``shape`` is non-negative and (``memory``; by default when nothing is
    being traced) an array of it and ``dtype`` (a NumPy dtype) fits in this machine's
    memory (a ShapeError, or an OutOfMemoryError: a MemoryError). Shape rules check sizes
    only: ``eval_shape`` of a model larger than memory is fine; computing it is not (the
    impls and jit's compilation check that)."""
    n = 1
    for d in shape:
        if d < 0:
            raise ShapeError(f"{name}: sizes must be non-negative, got {what} "
                             f"{tuple(shape)}"
                             + ("" if operand is None else f" for {describe(operand)}"))
        n *= d
    if memory or (memory is None and get_trace() is EVAL):
        check_memory(name, shape, dtype, n)


def check_memory(name, shape, dtype, n=None):
    """An OutOfMemoryError unless an array of ``shape`` and ``dtype`` fits in memory."""
    nbytes = (math.prod(shape) if n is None else n) * dtype.itemsize
    if nbytes > MAX_BYTES:
        raise OutOfMemoryError(
            f"{name}: an array of shape {tuple(shape)} and dtype {np.dtype(dtype).name} "
            f"needs {nbytes} bytes ({_human(nbytes)}), more than this machine's "
            f"{_human(MAX_BYTES)} of memory, so nothing could compute with it. Use a "
            "smaller shape or dtype, or work on it in chunks (lax.map, a loop).")


# --- batching helpers (the batch dimension is axis 0 of batched operands) ---------------------
def _shift_dims(dims, rank):
    return tuple(d % rank + 1 for d in dims) if rank else tuple(d + 1 for d in dims)


# --- broadcast_in_dim --------------------------------------------------------------
def _broadcast_in_dim_rule(x, *, shape, broadcast_dimensions):
    check_shape("broadcast_in_dim", shape, x.dtype, operand=x, memory=False)
    bd = broadcast_dimensions
    ok = (len(bd) == x.ndim and all(0 <= d < len(shape) for d in bd)
          and all(d >= 0 for d in shape)
          and all(b > a for a, b in zip(bd, bd[1:]))
          and all(x.shape[i] in (1, shape[d]) for i, d in enumerate(bd)))
    if not ok:
        raise ShapeError(f"broadcast_in_dim: cannot broadcast {describe(x)} to shape {shape} "
                         f"with broadcast_dimensions={bd}: each operand dim i maps to output "
                         "dim broadcast_dimensions[i] (strictly increasing) and must be 1 or "
                         "equal to it")
    return _aval(x, shape)


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    check_memory("broadcast_in_dim", shape, x.dtype)  # a view is cheap, computing on it not
    if not x.ndim and len(shape) == 1 and shape[0] <= 256 and not AL.is_device(x):
        out = np.empty(shape, x.dtype)  # a small filled copy is cheaper than a view
        out.fill(x)
        return out
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


broadcast_in_dim_p = Primitive("broadcast_in_dim", shape_rule=_broadcast_in_dim_rule,
                               impl=_broadcast_in_dim_impl)
deflinear(broadcast_in_dim_p)
broadcast_in_dim_p.broadcasts_operand = True


def _simplify_broadcast_in_dim(e, ins, lits, producer):
    """A broadcast to ``x``'s own shape along its own axes is ``x``."""
    (x,), p = ins, e.params
    if type(x) is Literal:
        return None
    same = (tuple(p["shape"]) == x.aval.shape
            and tuple(p["broadcast_dimensions"]) == tuple(range(x.aval.ndim)))
    return x if same else None


broadcast_in_dim_p.simplify = _simplify_broadcast_in_dim


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    summed = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(d for i, d in enumerate(broadcast_dimensions)
                     if x.shape[i] == 1 and shape[d] != 1)
    out = L.reduce_sum(ct, summed + expanded) if summed + expanded else ct
    return [L.reshape(out, x.shape)]


broadcast_in_dim_p.transpose = _broadcast_in_dim_transpose
batch_shifted(broadcast_in_dim_p, lambda p, n, x: dict(
    shape=(n,) + tuple(p["shape"]),
    broadcast_dimensions=(0,) + tuple(d + 1 for d in p["broadcast_dimensions"])))


def _broadcast_in_dim_onnx(ctx, x, *, shape, broadcast_dimensions):
    a = ctx.in_avals[0]
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = a.shape[i]
    if tuple(expanded) != a.shape:
        x = O.reshape(ctx, x, expanded)
    if tuple(expanded) == tuple(shape):
        return x
    return O.op(ctx, "Expand", x, O.ints(ctx, shape))


register_lowering(broadcast_in_dim_p, "onnx", _broadcast_in_dim_onnx)


# --- reshape, transpose, squeeze, expand_dims, rev -------------------------------------
def _reshaped(ins, params, bind_global, in_avals, out_avals):
    """jit: a view-reshape as one method call (``x.reshape(shape)``, what the impls'
    ``np.reshape``/``np.expand_dims``/``np.squeeze`` come to)."""
    x = ins[0]
    if "new_sizes" in params and params["dimensions"] is not None:  # reshape's permutation
        x = f"{x}.transpose({tuple(params['dimensions'])!r})"
    return f"{x}.reshape({tuple(out_avals[0].shape)!r})"


def _reshape_rule(x, *, new_sizes, dimensions=None):
    if any(d < 0 for d in new_sizes):
        raise ShapeError(f"reshape: sizes must be non-negative, got new_sizes "
                         f"{tuple(new_sizes)} for {describe(x)}")
    if math.prod(new_sizes) != math.prod(x.shape):
        raise ShapeError(f"reshape: cannot reshape {describe(x)} ({math.prod(x.shape)} "
                         f"elements) to {tuple(new_sizes)} ({math.prod(new_sizes)} elements)")
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise ShapeError(f"reshape: dimensions={dimensions} is not a permutation of "
                         f"range({x.ndim})")
    return _aval(x, new_sizes)


def _reshape_impl(x, *, new_sizes, dimensions=None):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


reshape_p = Primitive("reshape", shape_rule=_reshape_rule, impl=_reshape_impl)
register_lowering(reshape_p, "numpy", NumpyRule(expression=_reshaped))
deflinear(reshape_p)


def _reshape_transpose(ct, x, *, new_sizes, dimensions=None):
    if dimensions is None:
        return [L.reshape(ct, x.shape)]
    inv = [0] * len(dimensions)
    for i, d in enumerate(dimensions):
        inv[d] = i
    return [L.transpose(L.reshape(ct, [x.shape[d] for d in dimensions]), inv)]


reshape_p.transpose = _reshape_transpose


def _simplify_reshape(e, ins, lits, producer):
    """``reshape(reshape(x))`` (no ``dimensions`` permutation) is one reshape, and a
    reshape to ``x``'s own shape is ``x``: they only relabel elements."""
    (x,), p = ins, e.params
    if type(x) is Literal or p.get("dimensions") is not None:
        return None
    inner = producer_of(x, producer, reshape_p)
    if inner is not None and inner.params.get("dimensions") is None:
        x = inner.inputs[0]
        if tuple(x.aval.shape) != tuple(p["new_sizes"]):
            return Eqn(e.prim, [x], e.outputs, p, e.source)
    return x if tuple(x.aval.shape) == tuple(p["new_sizes"]) else None


reshape_p.simplify = _simplify_reshape
batch_shifted(reshape_p, lambda p, n, x: dict(
    new_sizes=(n,) + tuple(p["new_sizes"]),
    dimensions=None if p.get("dimensions") is None else
    (0,) + tuple(d + 1 for d in p["dimensions"])))


def _reshape_onnx(ctx, x, *, new_sizes, dimensions=None):
    if dimensions is not None and tuple(dimensions) != tuple(range(len(dimensions))):
        x = O.op(ctx, "Transpose", x, perm=list(dimensions))
    return O.reshape(ctx, x, new_sizes)


register_lowering(reshape_p, "onnx", _reshape_onnx)


def _transpose_rule(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"transpose: permutation {permutation} is not a permutation of the "
                         f"{x.ndim} axes of {describe(x)}")
    return _aval(x, tuple(x.shape[p] for p in permutation))


transpose_p = Primitive("transpose", shape_rule=_transpose_rule,
                        impl=lambda x, *, permutation: np.transpose(x, permutation))
register_lowering(transpose_p, "numpy", NumpyRule(
    expression=lambda ins, params, *_: f"{ins[0]}.transpose({tuple(params['permutation'])!r})"))
deflinear(transpose_p)


def _transpose_transpose(ct, x, *, permutation):
    inv = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inv[p] = i
    return [L.transpose(ct, inv)]


transpose_p.transpose = _transpose_transpose


def _simplify_transpose(e, ins, lits, producer):
    """Two transposes are one, by ``p[q[i]]``; by the identity permutation it is ``x``."""
    (x,), p = ins, e.params
    if type(x) is Literal:
        return None
    perm = tuple(p["permutation"])
    inner = producer_of(x, producer, transpose_p)
    if inner is not None:
        first = tuple(inner.params["permutation"])
        x, perm = inner.inputs[0], tuple(first[i] for i in perm)
        if not is_identity_permutation(perm):
            return Eqn(e.prim, [x], e.outputs, {**p, "permutation": perm}, e.source)
    return x if is_identity_permutation(perm) else None


transpose_p.simplify = _simplify_transpose
transpose_p.permutes = True
batch_shifted(transpose_p, lambda p, n, x: dict(
    permutation=(0,) + tuple(d + 1 for d in p["permutation"])))


def _transpose_onnx(ctx, x, *, permutation):
    return O.op(ctx, "Transpose", x, perm=list(permutation))


register_lowering(transpose_p, "onnx", _transpose_onnx)


def _squeeze_rule(x, *, dimensions):
    dims = normalize_axes("squeeze", dimensions, x.ndim)
    for d in dims:
        if x.shape[d] != 1:
            raise ShapeError(f"squeeze: dimension {d} of {describe(x)} has size "
                             f"{x.shape[d]}, not 1")
    return _aval(x, tuple(s for i, s in enumerate(x.shape) if i not in dims))


squeeze_p = Primitive("squeeze", shape_rule=_squeeze_rule,
                      impl=lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)))
register_lowering(squeeze_p, "numpy", NumpyRule(expression=_reshaped))
deflinear(squeeze_p)
squeeze_p.transpose = lambda ct, x, *, dimensions: [L.reshape(ct, x.shape)]
batch_shifted(squeeze_p, lambda p, n, x: dict(dimensions=_shift_dims(p["dimensions"],
                                                                     x.ndim - 1)))


def _squeeze_onnx(ctx, x, *, dimensions):
    nd = ctx.in_avals[0].ndim
    return O.op(ctx, "Squeeze", x, O.ints(ctx, sorted(d % nd for d in dimensions)))


register_lowering(squeeze_p, "onnx", _squeeze_onnx)


def _expand_dims_rule(x, *, dimensions):
    nd = x.ndim + len(dimensions)
    dims = normalize_axes("expand_dims", dimensions, nd)
    shape, it = [], iter(x.shape)
    for i in range(nd):
        shape.append(1 if i in dims else next(it))
    return _aval(x, tuple(shape))


expand_dims_p = Primitive("expand_dims", shape_rule=_expand_dims_rule,
                          impl=lambda x, *, dimensions: np.expand_dims(x, tuple(dimensions)))
register_lowering(expand_dims_p, "numpy", NumpyRule(expression=_reshaped))
deflinear(expand_dims_p)
expand_dims_p.transpose = lambda ct, x, *, dimensions: [L.reshape(ct, x.shape)]
batch_shifted(expand_dims_p, lambda p, n, x: dict(
    dimensions=_shift_dims(p["dimensions"], x.ndim - 1 + len(p["dimensions"]))))


def _expand_dims_onnx(ctx, x, *, dimensions):
    nd = ctx.out_avals[0].ndim
    return O.op(ctx, "Unsqueeze", x, O.ints(ctx, sorted(d % nd for d in dimensions)))


register_lowering(expand_dims_p, "onnx", _expand_dims_onnx)


def _simplify_no_axes(e, ins, lits, producer):
    """``squeeze``/``expand_dims`` of no axes is ``x``."""
    return ins[0] if not e.params["dimensions"] and type(ins[0]) is not Literal else None


squeeze_p.simplify = expand_dims_p.simplify = _simplify_no_axes


def _rev_rule(x, *, dimensions):
    normalize_axes("rev", dimensions, x.ndim)
    return _aval(x, x.shape)


rev_p = Primitive("rev", shape_rule=_rev_rule,
                  impl=lambda x, *, dimensions: np.flip(x, tuple(dimensions)))
deflinear(rev_p)
rev_p.transpose = lambda ct, x, *, dimensions: [L.rev(ct, dimensions)]
batch_shifted(rev_p, lambda p, n, x: dict(dimensions=_shift_dims(p["dimensions"], x.ndim - 1)))


def _rev_onnx(ctx, x, *, dimensions):
    nd = ctx.in_avals[0].ndim
    axes = sorted({d % nd for d in dimensions})
    if not axes:
        return x
    return O.op(ctx, "Slice", x, O.ints(ctx, [-1] * len(axes)),
                O.ints(ctx, [O.INT64_MIN] * len(axes)), O.ints(ctx, axes),
                O.ints(ctx, [-1] * len(axes)))


register_lowering(rev_p, "onnx", _rev_onnx)


# --- concatenate, pad ------------------------------------------------------------------
def _concatenate_rule(*xs, dimension):
    if not xs:
        raise ShapeError("concatenate: needs at least one operand")
    x0 = xs[0]
    if not 0 <= dimension < max(x0.ndim, 1) or x0.ndim == 0:
        raise ShapeError(f"concatenate: dimension {dimension} is invalid for operands "
                         f"{describe(*xs)}")
    for x in xs:
        if (x.dtype != x0.dtype or x.ndim != x0.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape)) if i != dimension)):
            raise ShapeError(f"concatenate: operands must have one dtype and equal shapes "
                             f"except along dimension {dimension}; got {describe(*xs)}")
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapeDtypeStruct(shape, x0.dtype, all(x.weak_type for x in xs))


concatenate_p = Primitive("concatenate", shape_rule=_concatenate_rule,
                          impl=lambda *xs, dimension: np.concatenate(xs, axis=dimension))
deflinear(concatenate_p)


def _concatenate_transpose(ct, *xs, dimension):
    out, start = [], 0
    for x in xs:
        n = x.shape[dimension]
        out.append(L.slice_in_dim(ct, start, start + n, 1, dimension) if is_linear(x) else None)
        start += n
    return out


concatenate_p.transpose = _concatenate_transpose


def _concatenate_batch(vals, dims, size, *, dimension):
    shapes = [tuple(v.shape[1:]) if d == 0 else tuple(v.shape) for v, d in zip(vals, dims)]
    return concatenate_p.bind(*[materialize_batch_axis(v, d, size, s)
                                for v, d, s in zip(vals, dims, shapes)],
                              dimension=dimension + 1), 0


concatenate_p.batch = _concatenate_batch


def _concatenate_onnx(ctx, *xs, dimension):
    return O.op(ctx, "Concat", *xs, axis=int(dimension))


register_lowering(concatenate_p, "onnx", _concatenate_onnx)


def _pad_rule(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise ShapeError(f"pad: padding_value must be a scalar of the operand's dtype; got "
                         f"operand {describe(x)} and padding_value {describe(padding_value)}")
    if len(padding_config) != x.ndim:
        raise ShapeError(f"pad: padding_config has {len(padding_config)} entries for "
                         f"{describe(x)}; give one (low, high, interior) per dimension")
    shape = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise ShapeError(f"pad: interior padding must be >= 0, got {padding_config}")
        size = lo + hi + n + max(n - 1, 0) * interior
        if size < 0:
            raise ShapeError(f"pad: padding_config {padding_config} gives a negative size "
                             f"for {describe(x)}")
        shape.append(size)
    return ShapeDtypeStruct(shape, x.dtype, x.weak_type)


def _pad_impl(x, padding_value, *, padding_config):
    if all(lo >= 0 and hi >= 0 and not it for lo, hi, it in padding_config):
        # the common case (the transpose of a slice): write x into a filled array
        shape = [lo + n + hi for n, (lo, hi, _) in zip(x.shape, padding_config)]
        if AL.is_device(x):
            out = AL.full(x, shape, padding_value, x.dtype)
        else:
            out = np.empty(shape, x.dtype)
            out.fill(padding_value)
        out[tuple(slice(lo, lo + n) for n, (lo, _, _) in zip(x.shape, padding_config))] = x
        return out
    grown = [max(lo, 0) + max(hi, 0) + n + max(n - 1, 0) * it
             for n, (lo, hi, it) in zip(x.shape, padding_config)]
    out = AL.full(x, grown, padding_value, x.dtype)
    out[tuple(slice(max(lo, 0), max(lo, 0) + max(n - 1, 0) * (it + 1) + 1 if n else max(lo, 0),
                    it + 1) for n, (lo, hi, it) in zip(x.shape, padding_config))] = x
    crop = tuple(slice(-min(lo, 0), g + min(hi, 0))
                 for g, (lo, hi, _) in zip(grown, padding_config))
    return out[crop]


pad_p = Primitive("pad", shape_rule=_pad_rule, impl=_pad_impl)
register_lowering(pad_p, "cuda_kernel", cuda_indexing.pad_kernel)
deflinear(pad_p)  # linear in (operand, padding_value) jointly


def _pad_transpose(ct, x, padding_value, *, padding_config):
    zero = L.convert_element_type(0, ct.dtype)
    unpadded = L.pad(ct, zero, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    ct_x = L.slice(unpadded, [0] * len(x.shape), unpadded.shape,
                   [it + 1 for _, _, it in padding_config])
    ct_pv = None
    if is_linear(padding_value):
        # the cotangents of the padded positions, summed where they lie (the total less the
        # operand's part would cancel: not 0 where nothing is padded, and imprecise where
        # a large interior dwarfs a thin border)
        padded = L.pad(L.full(tuple(x.shape), False, np.bool_), True, padding_config)
        ct_pv = L.reduce_sum(L.select_n(padded, L.full_like(ct, 0), ct),
                             tuple(range(ct.ndim)))
    return [ct_x if is_linear(x) else None, ct_pv]


pad_p.transpose = _pad_transpose


def _pad_batch(vals, dims, size, *, padding_config):
    x, pv = vals
    config = ((0, 0, 0),) + tuple(padding_config)
    if dims[1] is None:
        return pad_p.bind(x, pv, padding_config=config), 0
    # A padding value per example: pad the whole batch with a zero, then select each
    # example's value into the padded positions. The mask is the pad of an
    # all-False array with True (so negative and interior padding need no case of
    # their own), shared by the batch.
    x_shape = tuple(x.shape[1:] if dims[0] == 0 else x.shape)
    _pad_rule(ShapeDtypeStruct(x_shape, x.dtype), ShapeDtypeStruct(tuple(pv.shape[1:]), pv.dtype),
              padding_config=tuple(padding_config))   # per-example checks and messages
    x = materialize_batch_axis(x, dims[0], size, x_shape)
    padded = pad_p.bind(x, L.convert_element_type(0, x.dtype), padding_config=config)
    no = L.broadcast_in_dim(np.bool_(False), tuple(x.shape[1:]), ())
    mask = pad_p.bind(no, L.convert_element_type(True, np.bool_),
                      padding_config=tuple(padding_config))
    shape = tuple(padded.shape)
    mask = L.broadcast_in_dim(mask, shape, tuple(range(1, len(shape))))
    return L.select(mask, L.broadcast_in_dim(pv, shape, (0,)), padded), 0


pad_p.batch = _pad_batch


def _pad_onnx(ctx, x, value, *, padding_config):
    a = ctx.in_avals[0]
    return O.pad_config(ctx, x, a.shape, padding_config, value, a.dtype)


register_lowering(pad_p, "onnx", _pad_onnx)


# --- slice, dynamic_slice, dynamic_update_slice --------------------------------------------
def _slice_rule(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim) or any(
            not (0 <= s <= l <= n) or st < 1
            for s, l, st, n in zip(start_indices, limit_indices, strides, x.shape)):
        raise ShapeError(f"slice: start {start_indices}, limit {limit_indices}, strides "
                         f"{strides} do not fit {describe(x)} (need 0 <= start <= limit <= "
                         "dim and strides >= 1, one entry per dimension)")
    return _aval(x, tuple(-(-(l - s) // st) for s, l, st in
                          zip(start_indices, limit_indices, strides)))


def _slice_impl(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


slice_p = Primitive("slice", shape_rule=_slice_rule, impl=_slice_impl)
deflinear(slice_p)


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * len(x.shape)
    config = []
    for n, s, st, m in zip(x.shape, start_indices, strides, ct.shape):
        last = s + (m - 1) * st + 1 if m else s
        config.append((s, n - last, st - 1) if m else (s, n - s, 0))
    zero = L.convert_element_type(0, ct.dtype)
    return [L.pad(ct, zero, config)]


slice_p.transpose = _slice_transpose
batch_shifted(slice_p, lambda p, n, x: dict(
    start_indices=(0,) + tuple(p["start_indices"]), limit_indices=(n,) + tuple(p["limit_indices"]),
    strides=None if p.get("strides") is None else (1,) + tuple(p["strides"])))


def _slice_onnx(ctx, x, *, start_indices, limit_indices, strides=None):
    nd = ctx.in_avals[0].ndim
    if nd == 0:
        return x
    return O.slice_(ctx, x, start_indices, limit_indices, range(nd),
                    strides if strides is not None else [1] * nd)


register_lowering(slice_p, "onnx", _slice_onnx)


def _check_starts(name, x, starts):
    if len(starts) != x.ndim or any(s.shape != () or s.dtype.kind not in "iu" for s in starts):
        raise ShapeError(f"{name}: needs one scalar integer start index per dimension of "
                         f"{describe(x)}, got {describe(*starts) if starts else 'none'}")


def _clamped_window(x, starts, sizes):
    """The index of the window of ``x`` at ``starts`` (each clamped into ``[0, n - size]``):
    slices, or for starts on a device, open-mesh index arrays computed there (reading the
    starts back to the host would stall the device and stop a CUDA graph's capture)."""
    if not any(AL.is_device(s) for s in starts):
        return tuple(slice(s, s + z) for s, z in
                     ((min(max(int(s), 0), n - z), z) for s, n, z in zip(starts, x.shape, sizes)))
    key = []
    for d, (s, n, z) in enumerate(zip(starts, x.shape, sizes)):
        i = AL.arange(x, z, np.int64)
        if z < n:
            i = i + (np.clip(s.astype(np.int64), 0, n - z) if AL.is_device(s)
                     else min(max(int(s), 0), n - z))
        key.append(i.reshape([z if k == d else 1 for k in range(len(sizes))]))
    return tuple(key)


def _window_indices(x, starts, sizes):
    """Per-dimension index arrays (clamped starts + iota) that select the window."""
    idx = []
    for d, (s, n, z) in enumerate(zip(starts, x.shape, sizes)):
        s = L.clamp(0, L.convert_element_type(s, np.int32), max(n - z, 0))
        shape = [1] * len(sizes)
        shape[d] = z
        idx.append(L.reshape(L.add(s, L.iota(np.int32, z)), shape))
    return idx, tuple(("a", d) for d in range(len(sizes)))


def _vmap_as_gather(vals, dims, size, per_example):
    from ..transforms.vmap import vmap
    return vmap(per_example, in_axes=tuple(dims), axis_size=size)(*vals), 0


def _onnx_clamped_starts(ctx, starts, start_avals, x_shape, sizes):
    """The impl's window starts: each clamped into [0, n - size]; a 1-D int64 tensor."""
    parts = []
    for s, a, n, z in zip(starts, start_avals, x_shape, sizes):
        s = O.index_int64(ctx, s, a.dtype, n)
        s = O.op(ctx, "Max", O.op(ctx, "Min", s, O.scalar(ctx, n - z, O.I64)),
                 O.scalar(ctx, 0, O.I64))
        parts.append(O.op(ctx, "Unsqueeze", s, O.ints(ctx, [0])))
    return parts[0] if len(parts) == 1 else O.op(ctx, "Concat", *parts, axis=0)


def _dynamic_slice_rule(x, *starts, slice_sizes):
    _check_starts("dynamic_slice", x, starts)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise ShapeError(f"dynamic_slice: slice_sizes {tuple(slice_sizes)} do not fit "
                         f"{describe(x)}")
    return _aval(x, tuple(slice_sizes))


dynamic_slice_p = Primitive(
    "dynamic_slice", shape_rule=_dynamic_slice_rule,
    impl=lambda x, *starts, slice_sizes: x[_clamped_window(x, starts, slice_sizes)])
deflinear_in(dynamic_slice_p, 0)


def _dynamic_slice_transpose(ct, x, *starts, slice_sizes):
    zeros = L.broadcast_in_dim(L.convert_element_type(0, ct.dtype), x.shape, ())
    # the bound starts, already counted from the end: no second count
    return [L.dynamic_update_slice(zeros, ct, starts, allow_negative_indices=False)] + \
        [None] * len(starts)


dynamic_slice_p.transpose = _dynamic_slice_transpose


def _dynamic_slice_batch(vals, dims, size, *, slice_sizes):
    if any(d is not None for d in dims[1:]):  # batched starts: a gather of the windows
        from .indexing import gather_p

        def window(x, *starts):
            idx, spec = _window_indices(x, starts, slice_sizes)
            return gather_p.bind(x, *idx, spec=spec)
        return _vmap_as_gather(vals, dims, size, window)
    zero = L.convert_element_type(0, vals[1].dtype if len(vals) > 1 else np.int32)
    return dynamic_slice_p.bind(vals[0], zero, *vals[1:],
                                slice_sizes=(size,) + tuple(slice_sizes)), 0


dynamic_slice_p.batch = _dynamic_slice_batch


def _dynamic_slice_onnx(ctx, x, *starts, slice_sizes):
    a = ctx.in_avals[0]
    if a.ndim == 0:
        return x
    begin = _onnx_clamped_starts(ctx, starts, ctx.in_avals[1:], a.shape, slice_sizes)
    end = O.op(ctx, "Add", begin, O.ints(ctx, slice_sizes))
    return O.op(ctx, "Slice", x, begin, end, O.ints(ctx, range(a.ndim)))


register_lowering(dynamic_slice_p, "onnx", _dynamic_slice_onnx)


def _dynamic_update_slice_rule(x, update, *starts):
    _check_starts("dynamic_update_slice", x, starts)
    if (update.dtype != x.dtype or update.ndim != x.ndim
            or any(u > n for u, n in zip(update.shape, x.shape))):
        raise ShapeError(f"dynamic_update_slice: update {describe(update)} must have the "
                         f"operand's dtype and rank and fit inside operand {describe(x)}")
    return _aval(x, x.shape)


def _dynamic_update_slice_impl(x, update, *starts):
    out = AL.copy(x)
    out[_clamped_window(x, starts, update.shape)] = update
    return out


dynamic_update_slice_p = Primitive("dynamic_update_slice", shape_rule=_dynamic_update_slice_rule,
                                   impl=_dynamic_update_slice_impl)


def _dynamic_update_slice_jvp(primals, tangents):
    x, update, *starts = primals
    out = dynamic_update_slice_p.bind(x, update, *starts)
    if tangents[0] is None and tangents[1] is None:
        return out, None
    return out, dynamic_update_slice_p.bind(instantiate(tangents[0], x),
                                            instantiate(tangents[1], update), *starts)


dynamic_update_slice_p.jvp = _dynamic_update_slice_jvp


def _dynamic_update_slice_transpose(ct, x, update, *starts):
    ct_x = ct_u = None
    if is_linear(x):
        zeros = L.broadcast_in_dim(L.convert_element_type(0, ct.dtype), update.shape, ())
        ct_x = L.dynamic_update_slice(ct, zeros, starts, allow_negative_indices=False)
    if is_linear(update):
        ct_u = L.dynamic_slice(ct, starts, update.shape, allow_negative_indices=False)
    return [ct_x, ct_u] + [None] * len(starts)


dynamic_update_slice_p.transpose = _dynamic_update_slice_transpose


def _dynamic_update_slice_batch(vals, dims, size):
    if any(d is not None for d in dims[2:]):  # batched starts: a scatter into the windows
        from .indexing import scatter_p

        def update(x, upd, *starts):
            idx, spec = _window_indices(x, starts, upd.shape)
            return scatter_p.bind(x, upd, *idx, spec=spec, mode="set")
        return _vmap_as_gather(vals, dims, size, update)
    x, upd, *starts = vals
    x = materialize_batch_axis(x, dims[0], size, x.shape[1:] if dims[0] == 0 else x.shape)
    upd = materialize_batch_axis(upd, dims[1], size, upd.shape[1:] if dims[1] == 0 else upd.shape)
    zero = L.convert_element_type(0, starts[0].dtype if starts else np.int32)
    return dynamic_update_slice_p.bind(x, upd, zero, *starts), 0


dynamic_update_slice_p.batch = _dynamic_update_slice_batch


def _dynamic_update_slice_onnx(ctx, x, update, *starts):
    a, u = ctx.in_avals[0], ctx.in_avals[1]
    if a.ndim == 0:
        return update
    dt = a.dtype
    begin = _onnx_clamped_starts(ctx, starts, ctx.in_avals[2:], a.shape, u.shape)
    end = O.op(ctx, "Sub", O.ints(ctx, [n - z for n, z in zip(a.shape, u.shape)]), begin)
    pads = O.op(ctx, "Concat", begin, end, axis=0)
    placed = O.pad(ctx, update, pads, O.scalar(ctx, 0, dt), dt)
    inside = O.pad(ctx, O.full(ctx, True, O.BOOL, u.shape), pads,
                   O.scalar(ctx, False, O.BOOL), O.BOOL)
    return O.where(ctx, inside, placed, x, dt)


register_lowering(dynamic_update_slice_p, "onnx", _dynamic_update_slice_onnx)


# --- iota ----------------------------------------------------------------------------------
def _iota_rule(*, dtype, shape, dimension):
    if kind_of(dtype) not in "iufc":
        raise ShapeError(f"iota: dtype must be numeric (integer, floating or complex), got "
                         f"{dtype} for shape {shape}")
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"iota: dimension {dimension} out of range for shape {shape}")
    check_shape("iota", shape, dtype, memory=False)
    return ShapeDtypeStruct(shape, dtype)


def _iota_impl(*, dtype, shape, dimension):
    check_memory("iota", shape, np.dtype(dtype))
    r = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(r.reshape([-1 if i == dimension else 1 for i in range(len(shape))]),
                           shape)


iota_p = Primitive("iota", shape_rule=_iota_rule, impl=_iota_impl)
defjvp_zero(iota_p)
iota_p.not_needed = {"batch": "no operands, so vmap never batches it"}


def _iota_onnx(ctx, *, dtype, shape, dimension):
    n = shape[dimension]
    r = O.op(ctx, "Range", O.scalar(ctx, 0, O.I64), O.scalar(ctx, n, O.I64),
             O.scalar(ctx, 1, O.I64))
    r = O.cast(ctx, r, O.I64, dtype)
    r = O.reshape(ctx, r, [n if i == dimension else 1 for i in range(len(shape))])
    if any(s != 1 for i, s in enumerate(shape) if i != dimension):
        r = O.op(ctx, "Expand", r, O.ints(ctx, shape))
    return r


register_lowering(iota_p, "onnx", _iota_onnx)
