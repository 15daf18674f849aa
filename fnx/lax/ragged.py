"""JAX's ragged matrix products: ``ragged_dot``, ``ragged_dot_general`` and
``RaggedDotDimensionNumbers`` (``jax.lax``'s, with JAX 0.10's semantics on the CPU).

One dimension of ``lhs`` is *ragged*: split into ``g`` consecutive groups whose sizes are
``group_sizes[..., :]`` (group ``i`` covers the indices ``start_i <= j < end_i`` with
``end = cumsum(group_sizes)`` and ``start = end - group_sizes``, in ``group_sizes``'s own
integer dtype). The kind of the ragged dimension picks the mode:

1. a non-contracting dimension: ``rhs`` has a group dimension of size ``g``, and each
   lhs slice in group ``i`` is contracted with ``rhs``'s group ``i`` (mixture-of-experts
   matmuls). Indices in no group (past ``sum(group_sizes)``) give zeros.
2. a contracting dimension: each group contracts only its own part of the dimension; the
   result gets a leading dimension of size ``g``, one partial product per group.
3. a batch dimension: a ``dot_general`` (JAX's CPU computation ignores ``group_sizes``
   here beyond checking its shape and dtype, and so does this one).

``group_sizes`` of shape ``[g]`` is broadcast over the dimensions before the ragged one
(lhs's batch dimensions, then in mode 1 the non-contracting and in mode 2 the contracting
dimensions that precede it); a higher-rank one must have exactly that shape.

These are compositions, as JAX's CPU lowering is: the ragged operand is expanded to
``[g, ...]`` with the slices outside each group selected to zero, then one ``dot_general``
contracts (mode 1) or batches (mode 2) over the groups. So the values (``0 * inf`` is
``nan`` as in JAX) and dtypes are JAX's, and grad, vmap, jit and the ONNX export come from
the primitives bound. (JAX differentiates mode 1 only and vmaps only over lhs/rhs; these
differentiate every mode and vmap ``group_sizes`` too.)
"""
from __future__ import annotations

import dataclasses
import operator

import numpy as np

from ..core import dtypes
from ..core.array import to_array
from ..errors import ShapeError
from . import ops as L
from .linalg_prims import _dot_general_rule
from .rule_helpers import describe, kind_of

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """The dimension numbers of ``ragged_dot_general`` (JAX's): ``dot_dimension_numbers``
    as ``dot_general``'s ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``,
    ``lhs_ragged_dimensions`` (exactly one lhs dimension) and ``rhs_group_dimensions``
    (one rhs dimension of size ``g`` when the ragged dimension is non-contracting, none
    otherwise). Sequences are stored as tuples, so equal numbers compare and hash equal."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        try:
            (lc, rc), (lb, rb) = dot_dimension_numbers
            dn = tuple(tuple(tuple(operator.index(d) for d in dims) for dims in pair)
                       for pair in ((lc, rc), (lb, rb)))
            ragged = tuple(operator.index(d) for d in lhs_ragged_dimensions)
            group = tuple(operator.index(d) for d in rhs_group_dimensions)
        except (TypeError, ValueError):
            raise TypeError(
                "RaggedDotDimensionNumbers: dot_dimension_numbers must be "
                "((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)) and "
                "lhs_ragged_dimensions, rhs_group_dimensions sequences of ints; got "
                f"{dot_dimension_numbers!r}, {lhs_ragged_dimensions!r}, "
                f"{rhs_group_dimensions!r}") from None
        object.__setattr__(self, "dot_dimension_numbers", dn)
        object.__setattr__(self, "lhs_ragged_dimensions", ragged)
        object.__setattr__(self, "rhs_group_dimensions", group)


# The numbers of ragged_dot: [m, k] x [g, k, n] -> [m, n], m ragged.
_BASIC = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))

_NONCONTRACTING, _CONTRACTING, _BATCH = "non-contracting", "contracting", "batch"


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """JAX's ``lax.ragged_dot``: ``lhs`` ``[m, k]`` times ``rhs`` ``[g, k, n]`` with the
    rows of ``lhs`` in ``g`` consecutive groups of ``group_sizes`` (``[g]``, integers):
    row ``j`` of group ``i`` is ``lhs[j] @ rhs[i]``; rows past ``sum(group_sizes)`` are
    zeros. Result ``[m, n]`` in ``dot_general``'s dtype (``preferred_element_type`` when
    given). See ``ragged_dot_general``."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision=precision,
                              preferred_element_type=preferred_element_type,
                              group_offset=group_offset, out_sharding=out_sharding)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """JAX's ``lax.ragged_dot_general`` (modes in this module's docstring): with ``lhs``
    ragged dimension non-contracting, ``[b..., m..., k...] x [g, b..., k..., n...]`` ->
    ``[b..., m..., n...]``; contracting, ``[b..., m..., k...] x [b..., k..., n...]`` ->
    ``[g, b..., m..., n...]``; batch, ``dot_general``'s result. ``group_sizes`` has
    integer dtype and shape ``[g]`` or ``[<dims before the ragged one>..., g]``.
    ``precision`` and ``preferred_element_type`` are ``dot_general``'s; mixed operand
    dtypes give JAX's (XLA's) result dtype. ``group_offset`` is refused, as by JAX on
    CPU and GPU; ``out_sharding`` is accepted and ignored (one device)."""
    what = "ragged_dot_general"
    if group_offset is not None:
        raise NotImplementedError(
            f"{what}: group_offset is not supported (JAX 0.10 implements it on no CPU or "
            "GPU path either); pass group_offset=None and select the groups to compute by "
            "slicing group_sizes and rhs, or zero the sizes of the groups to skip")
    dn = ragged_dot_dimension_numbers
    if not isinstance(dn, RaggedDotDimensionNumbers):
        raise TypeError(f"{what}: ragged_dot_dimension_numbers must be a "
                        f"lax.RaggedDotDimensionNumbers, got {dn!r}")
    lhs, rhs, gs = to_array(lhs), to_array(rhs), to_array(group_sizes)
    mode, ragged, (lc, rc), (lb, rb), prefix = _check(what, lhs, rhs, gs, dn)
    L.canonicalize_precision(precision, what)

    # JAX's result dtype for mixed operands (XLA's HigherPrecisionType); equal: as they are.
    if lhs.dtype != rhs.dtype:
        dt = _higher_precision(what, lhs, rhs)
        lhs, rhs = L.convert_element_type(lhs, dt), L.convert_element_type(rhs, dt)
    if preferred_element_type is not None:   # checked on the operands as given
        pet = dtypes.canonical(preferred_element_type, what)
        try:
            _dot_general_rule(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)),
                              preferred_element_type=pet)
        except ShapeError as e:
            raise ShapeError(f"{what}: {str(e).split(': ', 1)[1]}") from None

    if gs.ndim == 1 and prefix:
        gs = L.broadcast(gs, [lhs.shape[d] for d in prefix])

    def dot(x, y, contract, batch):
        try:
            return L.dot_general(x, y, (contract, batch), precision=precision,
                                 preferred_element_type=preferred_element_type)
        except ShapeError as e:
            raise ShapeError(f"{what}: {e}") from None

    up = lambda dims: tuple(d + 1 for d in dims)   # noqa: E731 (past the new group dim)
    if mode == _BATCH:
        return dot(lhs, rhs, (lc, rc), (lb, rb))
    if mode == _NONCONTRACTING:
        x = _expand(lhs, ragged, gs, prefix)
        return dot(x, rhs, (up(lc) + (0,), rc + dn.rhs_group_dimensions), (up(lb), rb))
    r_ragged = rc[lc.index(ragged)]
    r_prefix = rb + rc[:rc.index(r_ragged)]
    x = _expand(lhs, ragged, gs, prefix)
    y = _expand(rhs, r_ragged, gs, r_prefix)
    return dot(x, y, (up(lc), up(rc)), ((0,) + up(lb), (0,) + up(rb)))


def _expand(x, dim, gs, prefix):
    """``x`` as ``[g, *x.shape]``: slice ``i`` keeps the indices of ``dim`` in group ``i``
    (``start <= j < end``, per the entries of ``gs`` ``[*(x.shape[p] for p in prefix), g]``)
    and is zero elsewhere."""
    shape = (gs.shape[-1],) + tuple(x.shape)
    ends = L.cumsum(gs, axis=gs.ndim - 1)
    starts = L.sub(ends, gs)
    # gs's axes land at 1 + prefix[j] and 0 (its last); broadcast_in_dim wants them sorted
    targets = [1 + p for p in prefix] + [0]
    order = sorted(range(len(targets)), key=targets.__getitem__)
    dims = sorted(targets)
    ends, starts = (L.broadcast_in_dim(L.transpose(v, order), shape, dims)
                    for v in (ends, starts))
    j = L.broadcasted_iota(gs.dtype, shape, 1 + dim)
    mask = L.bitwise_and(L.le(starts, j), L.lt(j, ends))
    big = L.broadcast_in_dim(x, shape, tuple(range(1, 1 + x.ndim)))
    return L.select(mask, big, L.full(shape, 0, x.dtype))


def _check(what, lhs, rhs, gs, dn):
    """Validate; return (mode, the lhs ragged dim, contracting pair, batch pair, the lhs
    dims group_sizes spans before its last)."""
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    ctx = (f"lhs {describe(lhs)}, rhs {describe(rhs)}, group_sizes {describe(gs)}, "
           f"dot_dimension_numbers={dn.dot_dimension_numbers}, "
           f"lhs_ragged_dimensions={dn.lhs_ragged_dimensions}, "
           f"rhs_group_dimensions={dn.rhs_group_dimensions}")

    def bad(why, fix):
        raise ShapeError(f"{what}: {why}; {ctx}. {fix}")

    if len(lc) != len(rc) or len(lb) != len(rb):
        bad("the contracting and batch dimension lists must pair up (as many lhs as rhs)",
            "List one rhs dimension for each lhs dimension.")
    for dims, x, side in ((lc + lb, lhs, "lhs"), (rc + rb, rhs, "rhs")):
        if any(not 0 <= d < x.ndim for d in dims) or len(set(dims)) != len(dims):
            bad(f"the {side} contracting and batch dimensions {dims} must be distinct and "
                f"in [0, {x.ndim}) for a rank-{x.ndim} {side}",
                "Check the dimension numbers against the operands' ranks (ragged_dot "
                "takes lhs [m, k] and rhs [g, k, n]).")
    for a, b, kind in [(a, b, "contracting") for a, b in zip(lc, rc)] + \
                      [(a, b, "batch") for a, b in zip(lb, rb)]:
        if lhs.shape[a] != rhs.shape[b]:
            bad(f"{kind} dimensions lhs {a} (size {lhs.shape[a]}) and rhs {b} (size "
                f"{rhs.shape[b]}) differ in size", "Paired dimensions must have equal sizes.")
    if len(dn.lhs_ragged_dimensions) != 1:
        bad("expects exactly one lhs ragged dimension", "Name one in lhs_ragged_dimensions.")
    ragged = dn.lhs_ragged_dimensions[0]
    if not 0 <= ragged < lhs.ndim:
        bad(f"the lhs ragged dimension {ragged} must be in [0, {lhs.ndim})",
            "Give a dimension of lhs (negative numbers are refused, as by JAX).")
    if kind_of(gs.dtype) not in "iu":
        bad("group_sizes must have an integer dtype",
            "Convert it, e.g. group_sizes.astype('int32').")
    if gs.ndim == 0:
        bad("group_sizes must have rank >= 1 (its last dimension counts the groups)",
            "Pass an array of shape [g].")
    free = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    if ragged in free:
        mode, prefix = _NONCONTRACTING, lb + tuple(free[:free.index(ragged)])
    elif ragged in lc:
        mode, prefix = _CONTRACTING, lb + lc[:lc.index(ragged)]
    else:
        mode, prefix = _BATCH, lb[:lb.index(ragged)]
    g = gs.shape[-1]
    if gs.ndim != 1:
        want = tuple(lhs.shape[d] for d in prefix) + (g,)
        if tuple(gs.shape) != want:
            bad(f"group_sizes must have shape {want} (the lhs dimensions {prefix} before "
                f"the ragged one, then the group count) or [g]",
                "Pass group sizes of shape [g] to share them, or of that shape.")
    group = dn.rhs_group_dimensions
    if mode != _NONCONTRACTING:
        if group:
            bad(f"the ragged dimension is a {mode} dimension, so rhs has no group dimension",
                "Pass rhs_group_dimensions=[].")
    else:
        if len(group) != 1:
            bad("the ragged dimension is non-contracting, so rhs needs exactly one group "
                "dimension", "Name it in rhs_group_dimensions (ragged_dot's is 0).")
        r = group[0]
        if not 0 <= r < rhs.ndim:
            bad(f"the rhs group dimension {r} must be in [0, {rhs.ndim})",
                "Give a dimension of rhs (negative numbers are refused, as by JAX).")
        if r in rc or r in rb:
            bad(f"the rhs group dimension {r} is also a contracting or batch dimension",
                "Use a dimension of its own.")
        if rhs.shape[r] != g:
            bad(f"the rhs group dimension {r} has size {rhs.shape[r]} but group_sizes counts "
                f"{g} groups", "One group size per rhs group.")
    return mode, ragged, (lc, rc), (lb, rb), prefix


def _higher_precision(what, lhs, rhs):
    """XLA's (and JAX's ``dot_general``'s) result dtype for operands of two dtypes: complex
    over real, then the wider exponent, the wider mantissa, more bits, signed over
    unsigned; a tie of different dtypes is an error."""
    def props(dt):
        dt = np.dtype(dt)
        c = kind_of(dt) == "c"
        real = np.dtype(f"float{dt.itemsize * 4}") if c else dt
        fl = kind_of(real) == "f"
        info = dtypes.finfo(real) if fl else None
        bits = 1 if real.kind == "b" else real.itemsize * 8
        return (c, int(info.maxexp) if fl else -1, int(info.nmant) if fl else -1, bits,
                real.kind != "u")
    a, b = props(lhs.dtype), props(rhs.dtype)
    if a == b:
        raise ShapeError(f"{what}: operands of dtypes {describe(lhs, rhs)} have no common "
                         "result dtype; convert one to the other's dtype first")
    return lhs.dtype if a > b else rhs.dtype
