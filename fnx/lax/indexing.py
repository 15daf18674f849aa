"""``gather`` and ``scatter``: NumPy-style indexing as two primitives.

Both take a static index *spec* (one entry per indexed item, Ellipsis already
expanded) and the dynamic integer index arrays as operands:

- ``None``: a new axis of size 1;
- an ``int``: a static, in-bounds, non-negative index;
- ``('s', start, stop, step)``: a static slice (``stop`` may be None for
  negative steps);
- ``('a', k)``: the k-th index operand, an integer array.

The result shape follows NumPy's rules for mixing basic and advanced indices
(advanced indices that are not adjacent put their broadcast dims first).
Out-of-range dynamic indices follow JAX: negative ones wrap once, then
``gather`` clamps them into range and ``scatter`` drops their updates.
``scatter``'s ``mode`` is one of set/add/mul/min/max; add and mul accumulate
repeated indices.

One block per primitive: the definition (shape rule, impl, jit specialization), then its
jvp, transpose and batching rules, then its lowering (``"onnx"``, written with
``fnx.core.onnx_rules``), JAX's ``lax.py`` layout. Helpers both primitives' rules use come
first.
"""
from __future__ import annotations

import functools

import numpy as np

from ..core import array_library as AL
from ..core import cuda_indexing
from ..core import onnx_rules as O
from ..core.backend import register_lowering
from ..core.numpy_rules import NumpyRule
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.jvp import deflinear_in, instantiate, sum_tangents
from ..transforms.vjp import is_linear
from ..transforms.vmap import materialize_batch_axis
from .rule_helpers import describe, quiet

SCATTER_MODES = ("set", "add", "mul", "min", "max")


def _slice_len(n, start, stop, step):
    return len(range(*slice(start, stop, step).indices(n)))


def indexed_shape(shape, spec, index_shapes):
    """The shape of ``x[spec]`` for ``x`` of ``shape`` (NumPy's rules)."""
    has_arrays = any(type(it) is tuple and it[0] == "a" for it in spec)
    consumed = sum(1 for it in spec if it is not None)
    if consumed != len(shape):
        raise ShapeError(f"gather: the index spec covers {consumed} dimensions of an "
                         f"array of rank {len(shape)}")
    pieces, adv_pos, adv_shapes, dim = [], [], [], 0
    for pos, it in enumerate(spec):
        if it is None:
            pieces.append((1,))
            continue
        if type(it) is tuple and it[0] == "s" and it[3] == 0:
            raise ShapeError(f"gather: slice step cannot be zero (spec item {pos}: {it})")
        if type(it) is tuple and it[0] == "a" and not 0 <= it[1] < len(index_shapes):
            raise ShapeError(f"gather: spec item {pos} names index operand {it[1]}, but "
                             f"there are {len(index_shapes)}")
        n = shape[dim]
        dim += 1
        if type(it) is int:
            if not 0 <= it < n:
                raise ShapeError(f"gather: static index {it} out of range for a dimension "
                                 f"of size {n}")
            if has_arrays:
                adv_pos.append(pos)
                adv_shapes.append(())
                pieces.append("adv")
        elif it[0] == "s":
            pieces.append((_slice_len(n, *it[1:]),))
        else:
            adv_pos.append(pos)
            adv_shapes.append(index_shapes[it[1]])
            pieces.append("adv")
    if not adv_pos:
        return tuple(d for p in pieces for d in p)
    try:
        bshape = np.broadcast_shapes(*adv_shapes)
    except ValueError:
        raise ShapeError(f"gather: index arrays of shapes {adv_shapes} do not broadcast "
                         "together") from None
    basic = [p for p in pieces if p != "adv"]
    if adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)):
        first = pieces.index("adv")
        before = [d for p in pieces[:first] for d in p]
        after = [d for p in pieces[first:] if p != "adv" for d in p]
        return tuple(before) + tuple(bshape) + tuple(after)
    return tuple(bshape) + tuple(d for p in basic for d in p)


def _check_indices(name, x, spec, indices):
    for k, i in enumerate(indices):
        if i.dtype.kind not in "iu":
            raise ShapeError(f"{name}: index operand {k} must be an integer array, got "
                             f"{describe(i)}")
    return indexed_shape(x.shape, spec, [i.shape for i in indices])


@functools.lru_cache(maxsize=None)
def _int_range(dtype):
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _key(x_shape, spec, indices, oob):
    """The NumPy index tuple, and the dims where ``oob="drop"`` found out-of-bounds
    indices (``oob="clip"``: clamped into bounds).

    An index ``i`` of a dim of size ``n`` means ``i + n`` when negative (JAX's rule, and
    NumPy's own for ``-n <= i < 0``), so clamping to ``[-n, n - 1]`` and letting NumPy
    wrap is the whole "clip" rule: one ``maximum`` and one ``minimum``. "drop" marks an
    index outside ``[-n, n - 1]`` to point into a padding slot (index ``n``)."""
    indices = [AL.as_array(i) for i in indices]
    key, adv = _key_template(x_shape, spec, indices)
    bad = []
    for pos, k, dim, n, lo, hi in adv:
        i = indices[k]
        if oob == "clip":
            i = np.minimum(i, hi) if lo == 0 else np.minimum(np.maximum(i, lo), hi)
        elif i.size and (AL.is_device(i) or i.min() < -n or i.max() >= n):
            # on a device the range is not read back to the host (that would stall it and
            # stop a CUDA graph's capture): its indices always take the padding-slot rule
            bad.append(dim)
            i = i.astype(np.int64)
            i = np.where((i < -n) | (i >= n), n, np.where(i < 0, i + n, i))
        key[pos] = i
    return tuple(key), bad


def _key_template(x_shape, spec, index_avals):
    """The index tuple of ``spec`` as a list with the static entries filled in, and
    ``(position, operand, dim, n, lo, hi)`` for each index operand (``[lo, hi]``: the
    clamp range of ``_key``, in the operand's dtype). Eager calls build it per call, jit
    once per equation."""
    template, adv, dim = [], [], 0
    for it in spec:
        if it is None:
            template.append(None)
            continue
        n = x_shape[dim]
        if type(it) is int:
            template.append(it)
        elif it[0] == "s":
            template.append(slice(*it[1:]))
        else:
            low, high = _int_range(index_avals[it[1]].dtype)
            adv.append((len(template), it[1], dim, n, max(-n, low), min(max(n - 1, 0), high)))
            template.append(None)
        dim += 1
    return template, adv


# --- helpers of both primitives' transpose and batching rules -----------------------------------

def _in_range_indices(shape, spec, indices, oob):
    """Index operands rewritten so that no element is out of range, and their spec.

    Dynamic indices wrap once (negative ones), then ``oob="clip"`` clamps them as
    ``gather`` does (into ``[-n, n - 1]``: gather and scatter wrap the negative ones
    themselves), and ``oob="drop"`` sends the out-of-range ones to index ``n``:
    a padding slot the caller appends to those dimensions (third result). The
    transposes use these, because gather clamps where scatter drops: the
    transpose of a clamping gather must add at the clamped element, and that of
    a dropping scatter must give its dropped updates a zero cotangent.
    """
    from . import ops as L
    from ..core.array import Tracer
    if not any(isinstance(i, Tracer) for i in indices) and _all_in_range(shape, spec, indices):
        return list(indices), tuple(spec), []     # concrete and in range: nothing to do
    new_idx, new_spec, pad_dims, dim = [], [], [], 0
    for it in spec:
        if it is None:
            new_spec.append(it)
            continue
        if type(it) is tuple and it[0] == "a":
            n = shape[dim]
            i = indices[it[1]]
            i = L.convert_element_type(i, np.int64 if n >= 2 ** 31 - 1 else np.int32)
            signed = indices[it[1]].dtype.kind == "i"
            if oob == "clip":  # negative indices in [-n, -1] wrap in gather and scatter
                i = L.clamp(-n if signed else 0, i, max(n - 1, 0))
            else:
                if signed:
                    i = L.select(L.lt(i, 0), L.add(i, n), i)
                bad = L.bitwise_or(L.lt(i, 0), L.ge(i, n))
                i = L.select(bad, L.broadcast_in_dim(L.convert_element_type(n, i.dtype),
                                                     tuple(i.shape), ()), i)
                pad_dims.append(dim)
            new_spec.append(("a", len(new_idx)))
            new_idx.append(i)
        else:
            new_spec.append(it)
        dim += 1
    return new_idx, tuple(new_spec), pad_dims


def _all_in_range(shape, spec, indices):
    dims = [it for it in spec if it is not None]
    for n, it in zip(shape, dims):
        if type(it) is tuple and it[0] == "a":
            i = np.asarray(indices[it[1]])
            if i.size and (i.min() < 0 or i.max() >= n):
                return False
    return True


def _batch_position(spec, index_shapes):
    """Where a leading full slice's dimension lands in the result of ``x[spec]``."""
    adv = [k for k, it in enumerate(spec)
           if type(it) is int or (type(it) is tuple and it[0] == "a")]
    if not any(type(it) is tuple and it[0] == "a" for it in spec):
        return 0
    if adv == list(range(adv[0], adv[-1] + 1)):
        return 0
    return len(np.broadcast_shapes(*[index_shapes[it[1]] for it in spec
                                     if type(it) is tuple and it[0] == "a"]))


def _batched_operand(x, d, size):
    return materialize_batch_axis(x, d, size, x.shape[1:] if d == 0 else x.shape)


def _batched_index_spec(idx, dims, size, spec):
    """Index arrays aligned so an iota can index the batch dim too, the new spec, and the
    permutation from its result, (batch, *S, basic dims...), to the per-example order."""
    from . import ops as L
    shapes = [i.shape[1:] if d == 0 else i.shape for i, d in zip(idx, dims)]
    rank = max(len(s) for s in shapes)
    aligned = [L.reshape(i, ((size,) if d == 0 else (1,)) + (1,) * (rank - len(s)) + tuple(s))
               for i, d, s in zip(idx, dims, shapes)]
    aligned.append(L.broadcasted_iota(aligned[0].dtype, (size,) + (1,) * rank, 0))
    new_spec = (("a", len(aligned) - 1),) + tuple(spec)
    adv = [k for k, it in enumerate(spec)
           if type(it) is int or (type(it) is tuple and it[0] == "a")]
    before = sum(1 for it in spec[:adv[0]] if it is None or (type(it) is tuple and it[0] == "s"))
    perm = None
    if before and adv == list(range(adv[0], adv[-1] + 1)):
        out_rank = 1 + len(indexed_shape_rank(spec, shapes))
        perm = ([0] + list(range(1 + rank, 1 + rank + before)) + list(range(1, 1 + rank))
                + list(range(1 + rank + before, out_rank)))
    return aligned, new_spec, perm


def indexed_shape_rank(spec, shapes):
    """Dims of a per-example result: the broadcast index dims plus the basic dims."""
    basic = [it for it in spec if it is None or (type(it) is tuple and it[0] == "s")]
    return list(np.broadcast_shapes(*shapes)) + basic


def _onnx_index_grid(ctx, x_shape, spec, indices, index_avals, out_shape, oob):
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
            col = O.scalar(ctx, it, O.I64)
        elif it[0] == "s":
            start, stop, step = slice(*it[1:]).indices(n)
            values = np.arange(start, stop, step, dtype=np.int64)
            shape = [1] * rank
            shape[out_pos[p]] = len(values)
            col = ctx.const(values.reshape(shape))
        else:
            a = index_avals[it[1]]
            col = O.index_int64(ctx, indices[it[1]], a.dtype, n)
            if a.dtype.kind == "i":
                col = O.op(ctx, "Where", O.op(ctx, "Less", col, O.scalar(ctx, 0, O.I64)),
                           O.op(ctx, "Add", col, O.scalar(ctx, n, O.I64)), col)
            if oob == "clip":
                col = O.op(ctx, "Max",
                           O.op(ctx, "Min", col, O.scalar(ctx, max(n - 1, 0), O.I64)),
                           O.scalar(ctx, 0, O.I64))
            else:
                bad = O.or_(ctx, O.op(ctx, "Less", col, O.scalar(ctx, 0, O.I64)),
                            O.op(ctx, "GreaterOrEqual", col, O.scalar(ctx, n, O.I64)))
                col = O.op(ctx, "Where", bad, O.scalar(ctx, n, O.I64), col)
            shape = [1] * rank
            shape[adv_at + len(bshape) - a.ndim: adv_at + len(bshape)] = a.shape
            col = O.reshape(ctx, col, shape)
        col = O.op(ctx, "Expand", col, O.ints(ctx, out_shape))
        columns.append(O.op(ctx, "Unsqueeze", col, O.ints(ctx, [rank])))
        dim += 1
    return columns[0] if len(columns) == 1 else O.op(ctx, "Concat", *columns, axis=rank)


# === gather =====================================================================================

def _gather_rule(x, *indices, spec):
    shape = _check_indices("gather", x, spec, indices)
    dims = [it for it in spec if it is not None]
    for d, it in enumerate(dims):
        if (type(it) is tuple and it[0] == "a" and x.shape[d] == 0
                and indices[it[1]].size):   # nothing to clamp into (NumPy, JAX: IndexError)
            raise ShapeError(f"gather: index operand {it[1]} ({describe(indices[it[1]])}) "
                             f"indexes dimension {d} of {describe(x)}, which is empty")
    return ShapeDtypeStruct(shape, x.dtype, x.weak_type)


def _gather_impl(x, *indices, spec):
    return x[_key(x.shape, spec, indices, "clip")[0]]


gather_p = Primitive("gather", shape_rule=_gather_rule, impl=_gather_impl)


def _gather_specialize(in_avals, params, permutation=None):
    """jit: ``_gather_impl`` with the index tuple's static part and clamp ranges worked
    out once."""
    template, adv = _key_template(in_avals[0].shape, params["spec"], in_avals[1:])
    lower, upper = np.maximum, np.minimum

    def gather(x, *indices):
        key = template.copy()
        for pos, k, _, _, lo, hi in adv:
            key[pos] = upper(lower(indices[k], lo), hi)
        out = x[tuple(key)]
        return out if permutation is None else out.transpose(permutation)
    return gather


register_lowering(gather_p, "numpy", NumpyRule(specialize=_gather_specialize,
                                               transposes=True))
register_lowering(gather_p, "cuda_kernel", cuda_indexing.gather_kernel)
deflinear_in(gather_p, 0)


def _gather_transpose(ct, x, *indices, spec):
    from . import ops as L
    zeros = L.broadcast_in_dim(L.convert_element_type(0, ct.dtype), tuple(x.shape), ())
    idx, spec2, _ = _in_range_indices(tuple(x.shape), spec, indices, "clip")
    return [scatter_p.bind(zeros, ct, *idx, spec=spec2, mode="add")] + [None] * len(indices)


gather_p.transpose = _gather_transpose


def _gather_batch(vals, dims, size, *, spec):
    x, *idx = vals
    if all(d is None for d in dims[1:]):
        out = gather_p.bind(x, *idx, spec=(("s", 0, size, 1),) + tuple(spec))
        return out, _batch_position(spec, [i.shape for i in idx])
    x = _batched_operand(x, dims[0], size)
    aligned, new_spec, perm = _batched_index_spec(idx, dims[1:], size, spec)
    out = gather_p.bind(x, *aligned, spec=new_spec)
    from . import ops as L
    return (L.transpose(out, perm) if perm else out), 0


gather_p.batch = _gather_batch


def _gather_onnx(ctx, x, *indices, spec):
    a, out = ctx.in_avals[0], ctx.out_avals[0]
    if a.ndim == 0:                               # only new axes
        return O.reshape(ctx, x, out.shape)
    grid = _onnx_index_grid(ctx, a.shape, spec, indices, ctx.in_avals[1:], out.shape, "clip")
    return O.op(ctx, "GatherND", x, grid)


register_lowering(gather_p, "onnx", _gather_onnx)


# === scatter ====================================================================================

def _scatter_rule(x, updates, *indices, spec, mode):
    if mode not in SCATTER_MODES:
        raise ShapeError(f"scatter: mode must be one of {SCATTER_MODES}, got {mode!r}")
    shape = _check_indices("scatter", x, spec, indices)
    if updates.shape != shape or updates.dtype != x.dtype:
        raise ShapeError(f"scatter: updates must have the indexed shape {shape} and the "
                         f"operand's dtype; got operand {describe(x)}, updates "
                         f"{describe(updates)}")
    return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)


_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_impl(x, updates, *indices, spec, mode):
    key, bad = _key(x.shape, spec, indices, "drop")
    if bad:  # updates aimed outside the array land in padding that is then cut off
        out = np.pad(x, [(0, 1 if d in bad else 0) for d in range(x.ndim)])
    else:
        out = AL.copy(x)
    if mode == "set":
        out[key] = updates
    elif any(k is not None and type(k) not in (int, slice) for k in key):  # index arrays
        AL.ufunc_at(_UFUNCS[mode], out, key, updates)
    else:  # basic indices never repeat an element
        out[key] = _UFUNCS[mode](out[key], updates)
    if bad:
        out = out[tuple(slice(0, n) for n in x.shape)]
    return out


scatter_p = Primitive("scatter", shape_rule=_scatter_rule, impl=quiet(_scatter_impl))
register_lowering(scatter_p, "cuda_kernel", cuda_indexing.scatter_kernel)


def _scatter_specialize(in_avals, params, permutation=None):
    """jit: ``_scatter_impl`` with the index tuple's static part worked out once (indices
    out of range go to ``_scatter_impl``'s padding path)."""
    spec, mode = params["spec"], params["mode"]
    template, adv = _key_template(in_avals[0].shape, spec, in_avals[2:])
    ufunc = _UFUNCS.get(mode)

    def scatter(x, updates, *indices):
        key = template.copy()
        for pos, k, _, n, _, _ in adv:
            i = indices[k]
            if i.size and (i.min() < -n or i.max() >= n):
                out = _scatter_impl(x, updates, *indices, spec=spec, mode=mode)
                break
            key[pos] = i
        else:
            key = tuple(key)
            out = np.array(x, copy=True)
            if mode == "set":
                out[key] = updates
            elif adv:
                ufunc.at(out, key, updates)
            else:
                out[key] = ufunc(out[key], updates)
        return out if permutation is None else out.transpose(permutation)
    return scatter


register_lowering(scatter_p, "numpy", NumpyRule(specialize=_scatter_specialize,
                                                transposes=True))


def _scatter_jvp(primals, tangents, *, spec, mode):
    x, updates, *indices = primals
    out = scatter_p.bind(x, updates, *indices, spec=spec, mode=mode)
    tx, tu = tangents[0], tangents[1]
    if tx is None and tu is None:
        return out, None
    if mode in ("set", "add"):
        t = scatter_p.bind(instantiate(tx, x), instantiate(tu, updates),
                           *indices, spec=spec, mode=mode)
        return out, t
    if x.dtype.kind not in "fc":
        return out, None
    rule = _scatter_mul_tangent if mode == "mul" else _scatter_extreme_tangent
    return out, rule(x, updates, indices, out, tx, tu, spec)


def _scatter_into(like, updates, indices, spec, mode="add", fill=0):
    """``updates`` scattered (``mode``) into an array of ``fill`` shaped like ``like``."""
    from . import ops as L
    base = L.broadcast_in_dim(L.convert_element_type(fill, updates.dtype), tuple(like.shape), ())
    return scatter_p.bind(base, updates, *indices, spec=spec, mode=mode)


def _const_like(value, a):
    from . import ops as L
    return L.broadcast_in_dim(L.convert_element_type(value, a.dtype), tuple(a.shape), ())


def _scatter_mul_tangent(x, updates, indices, out, tx, tu, spec):
    """out[p] = x[p] * (product of the updates aimed at p), so
    d out[p] = tx[p] * prod + x[p] * sum_j tu[j] * (product of the other updates at p).

    The operand part is ``scatter_mul(tx, updates)`` (linear in ``tx``; see the
    transpose rule). For the updates part, "the product of the others" is formed
    without dividing by a zero: per target element, the number of zero updates
    ``z`` and the product ``P`` of the nonzero ones; then the others' product is
    ``P / u`` for a nonzero ``u`` when ``z == 0``, ``P`` for the zero update when
    ``z == 1`` and 0 otherwise. JAX differentiates scatter-mul in the updates only
    for unique indices; this covers repeated ones too. With unique indices the
    others' product is ``u / u = 1`` (also in its derivative, up to rounding), so
    every derivative order is exact; with repeated indices and updates that are
    exactly zero, the first derivative is exact but higher ones treat the zero
    count as constant.
    """
    from . import ops as L
    parts = []
    if tx is not None:
        parts.append(scatter_p.bind(tx, updates, *indices, spec=spec, mode="mul"))
    if tu is not None:
        dt = updates.dtype
        is_zero = L.eq(updates, L.convert_element_type(0, dt))
        safe = L.select(is_zero, _const_like(1, updates), updates)
        zeros_at = gather_p.bind(_scatter_into(x, L.convert_element_type(is_zero, dt), indices,
                                               spec), *indices, spec=spec)
        prod_at = gather_p.bind(_scatter_into(x, safe, indices, spec, "mul", 1), *indices,
                                spec=spec)
        zero = _const_like(0, updates)
        others = L.select(is_zero, L.select(L.eq(zeros_at, L.convert_element_type(1, dt)),
                                            prod_at, zero),
                          L.select(L.eq(zeros_at, zero), L.div(prod_at, safe), zero))
        parts.append(L.mul(x, _scatter_into(x, L.mul(tu, others), indices, spec)))
    return sum_tangents(parts)


def _scatter_extreme_tangent(x, updates, indices, out, tx, tu, spec):
    """scatter-min/max: each output element takes the mean of the tangents of the
    contenders (the operand element and every update aimed at it) that equal the
    result (NaN counts as equal to NaN). Elements no update beats keep the operand's
    tangent; ties are shared equally, as reduce_max/reduce_min do here (and as
    JAX's scatter-min/max rule does)."""
    from . import ops as L
    dt = x.dtype

    def hits(a, b):
        same = L.bitwise_or(L.eq(a, b), L.bitwise_and(L.isnan(a), L.isnan(b))) \
            if dt.kind == "f" else L.eq(a, b)
        return L.convert_element_type(same, dt)

    hit_x = hits(x, out)
    hit_u = hits(updates, gather_p.bind(out, *indices, spec=spec))
    count = L.add(hit_x, _scatter_into(x, hit_u, indices, spec))
    parts = []
    if tx is not None:
        parts.append(L.mul(tx, hit_x))
    if tu is not None:
        parts.append(_scatter_into(x, L.mul(tu, hit_u), indices, spec))
    return L.div(sum_tangents(parts), count)


scatter_p.jvp = _scatter_jvp


def _gather_dropping(ct, indices, spec):
    """``ct[spec]`` with zeros where an index is out of range (what a scatter dropped)."""
    from . import ops as L
    idx, spec2, pad_dims = _in_range_indices(tuple(ct.shape), spec, indices, "drop")
    if pad_dims:
        ct = L.pad(ct, L.convert_element_type(0, ct.dtype),
                   [(0, 1 if d in pad_dims else 0, 0) for d in range(ct.ndim)])
    return gather_p.bind(ct, *idx, spec=spec2)


def _scatter_transpose(ct, x, updates, *indices, spec, mode):
    from . import ops as L
    from ..errors import MissingRuleError
    if mode == "mul":   # linear in the operand only: out = x * (product of the updates)
        if is_linear(updates):
            raise MissingRuleError("scatter (mode='mul') is not linear in its updates, so it "
                                   "has no transpose for them")
        return [scatter_p.bind(ct, updates, *indices, spec=spec, mode="mul"), None] + \
            [None] * len(indices)
    if mode not in ("add", "set"):
        raise MissingRuleError(f"scatter (mode={mode!r}) is not linear in either operand, so "
                               "it has no transpose rule")
    ct_x = ct_u = None
    if is_linear(x):
        if mode == "add":
            ct_x = ct
        else:
            zeros = L.broadcast_in_dim(L.convert_element_type(0, ct.dtype),
                                       tuple(updates.shape), ())
            ct_x = scatter_p.bind(ct, zeros, *indices, spec=spec, mode="set")
    if is_linear(updates):
        ct_u = _gather_dropping(ct, indices, spec)
        if mode == "set":   # of updates aimed at one element, only the one written counts
            ct_u = L.select(_set_winners(tuple(x.shape), updates, indices, spec), ct_u,
                            _const_like(0, ct_u))
    return [ct_x, ct_u] + [None] * len(indices)


def _set_winners(shape, updates, indices, spec):
    """Which updates a scatter-set writes (the others are overwritten by a repeated
    index): scatter the updates' ids the same way and read back who won."""
    from . import ops as L
    n = int(np.prod(updates.shape, dtype=np.int64))
    ids = L.reshape(L.iota(np.int32, n), tuple(updates.shape))
    base = L.broadcast_in_dim(L.convert_element_type(-1, np.int32), shape, ())
    won = scatter_p.bind(base, ids, *indices, spec=spec, mode="set")
    return L.eq(gather_p.bind(won, *indices, spec=spec), ids)


scatter_p.transpose = _scatter_transpose


def _scatter_batch(vals, dims, size, *, spec, mode):
    from . import ops as L
    if any(d is not None for d in dims[2:]):
        x, upd, *idx = vals
        x = _batched_operand(x, dims[0], size)
        aligned, new_spec, perm = _batched_index_spec(idx, dims[2:], size, spec)
        per_example = indexed_shape(tuple(x.shape[1:]), tuple(spec),
                                    [i.shape[1:] if d == 0 else i.shape
                                     for i, d in zip(idx, dims[2:])])
        upd = materialize_batch_axis(upd, dims[1], size, per_example)
        if perm:
            inv = [0] * len(perm)
            for k, p in enumerate(perm):
                inv[p] = k
            upd = L.transpose(upd, inv)
        return scatter_p.bind(x, upd, *aligned, spec=new_spec, mode=mode), 0
    x, upd, *idx = vals
    x = materialize_batch_axis(x, dims[0], size, x.shape[1:] if dims[0] == 0 else x.shape)
    new_spec = (("s", 0, size, 1),) + tuple(spec)
    target = indexed_shape(tuple(x.shape), new_spec, [i.shape for i in idx])
    pos = _batch_position(spec, [i.shape for i in idx])
    if dims[1] is None:
        keep = tuple(d for d in range(len(target)) if d != pos)
        upd = L.broadcast_in_dim(upd, target, keep)
    elif pos != 0:
        perm = list(range(1, upd.ndim))
        perm.insert(pos, 0)
        upd = L.transpose(upd, perm)
    return scatter_p.bind(x, upd, *idx, spec=new_spec, mode=mode), 0


scatter_p.batch = _scatter_batch


_ONNX_SCATTER_REDUCTION = {"set": "none", "add": "add", "mul": "mul", "min": "min", "max": "max"}


def _scatter_onnx(ctx, x, updates, *indices, spec, mode):
    a, u = ctx.in_avals[0], ctx.in_avals[1]
    dt = a.dtype
    if a.ndim == 0:                   # only new axes: one element, updated once
        updates = O.reshape(ctx, updates, []) if u.ndim else updates
        if mode == "set":
            return updates
        if mode in ("min", "max"):
            return O.extremum(ctx, x, updates, dt, "Max" if mode == "max" else "Min")
        if dt == O.BOOL:                # add is or, mul is and
            return O.op(ctx, "Or" if mode == "add" else "And", x, updates)
        return O.op(ctx, "Add" if mode == "add" else "Mul", x, updates)
    # out-of-range updates land in a padding slot (index n) that is cut off afterwards
    dims = [it for it in spec if it is not None]
    grow = [1 if type(it) is tuple and it[0] == "a" else 0 for it in dims]
    grid = _onnx_index_grid(ctx, a.shape, spec, indices, ctx.in_avals[2:], u.shape, "drop")

    def scatter(data, upd, src, work, reduction):
        """ScatterND of ``src``-typed data and updates, computed in ``work``."""
        data, upd = O.cast(ctx, data, src, work), O.cast(ctx, upd, src, work)
        if any(grow):
            data = O.pad(ctx, data, [0] * a.ndim + grow, O.scalar(ctx, 0, work), work)
        out = O.op(ctx, "ScatterND", data, grid, upd, reduction=reduction)
        if any(grow):
            out = O.slice_(ctx, out, [0] * a.ndim, a.shape, range(a.ndim))
        return O.cast(ctx, out, work, src)

    reduction = _ONNX_SCATTER_REDUCTION[mode]
    # no bool kernels for these: 0/1 as uint8 (mul and min are and, max is or)
    work = O.U8 if dt == O.BOOL and reduction in ("mul", "min", "max") else dt
    out = scatter(x, updates, dt, work, reduction)
    if O.is_float(dt) and mode in ("min", "max"):
        # np.minimum.at propagates NaN from the operand and from any update
        hit = scatter(O.full(ctx, False, O.BOOL, a.shape), O.op(ctx, "IsNaN", updates), O.BOOL,
                      O.U8, "max")
        out = O.where(ctx, O.or_(ctx, O.op(ctx, "IsNaN", x), hit), O.scalar(ctx, np.nan, dt),
                      out, dt)
    return out


register_lowering(scatter_p, "onnx", _scatter_onnx)
