"""JAX's ``lax.gather`` and ``lax.scatter`` family on XLA's dimension numbers.

``GatherDimensionNumbers``, ``ScatterDimensionNumbers`` and ``GatherScatterMode`` are JAX's,
with the same fields and defaults. Each call becomes an index grid over fnx's own indexing
primitives (``fnx.lax.indexing``'s ``gather``/``scatter``, what ``x[...]`` and
``x.at[...]`` bind): one integer index array per operand dimension, the slice's start
(from the start indices, clamped or checked) plus an iota over the slice's extent, so
their derivatives, batching rules and lowerings (NumPy, GPU kernels, ONNX) are those
primitives'.

Out-of-bounds starts follow JAX: ``gather`` by default (``mode=None``, JAX's
``PROMISE_IN_BOUNDS``) and with ``"clip"`` clamps each start so the slice fits, and with
``"fill"`` returns ``fill_value`` (NaN, the integer's least value for signed, its largest
for unsigned, True) for every slice whose start does not fit; the scatters by default
(``FILL_OR_DROP``, and ``PROMISE_IN_BOUNDS``) skip every update window that does not
fit whole, and with ``"clip"`` clamp its start.
"""
from __future__ import annotations

import enum
import operator
from typing import NamedTuple, Sequence

import numpy as np

from ..core.array import to_array
from ..errors import ShapeError
from . import ops as L
from .control_flow import while_loop
from .rule_helpers import describe

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode",
           "gather", "scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min",
           "scatter_max", "scatter_apply", "index_take"]


class GatherDimensionNumbers(NamedTuple):
    """XLA's gather dimension numbers (JAX's fields): ``offset_dims``, the result's
    dimensions that index into a slice; ``collapsed_slice_dims``, the operand's size-1
    slice dimensions left out of the result; ``start_index_map``, the operand dimension
    each entry of an index vector starts; ``operand_batching_dims`` and
    ``start_indices_batching_dims``, operand and index dimensions that are batch
    dimensions of both, pairwise."""
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """XLA's scatter dimension numbers (JAX's fields): ``update_window_dims``, the
    updates' dimensions that lie in a window; ``inserted_window_dims``, the operand's
    size-1 window dimensions the updates leave out; ``scatter_dims_to_operand_dims``, the
    operand dimension each entry of an index vector starts; ``operand_batching_dims`` and
    ``scatter_indices_batching_dims``, operand and index dimensions that are batch
    dimensions of both, pairwise."""
    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """How out-of-bounds starts are handled (see the module docstring)."""
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f"Unknown gather mode {s!r}: use 'clip', 'fill' (or 'drop'), "
                         "'promise_in_bounds' or a GatherScatterMode")


# --- checks ---------------------------------------------------------------------------------

def _dims(what, field, dims, rank, *, sorted_=True):
    dims = tuple(operator.index(d) for d in dims)
    if any(not 0 <= d < rank for d in dims):
        raise ShapeError(f"{what}: {field} {dims} must lie in [0, {rank})")
    if len(set(dims)) != len(dims) or (sorted_ and list(dims) != sorted(dims)):
        raise ShapeError(f"{what}: {field} {dims} must be distinct"
                         + (" and in ascending order" if sorted_ else ""))
    return dims


def _indices(what, indices):
    indices = to_array(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{what}: indices must be integers, got {describe(indices)}")
    if indices.ndim == 0:
        raise ShapeError(f"{what}: indices must have at least one dimension (the index "
                         "vector, last), got a scalar; reshape it to (1,)")
    return indices


def _mode(what, mode):
    mode = GatherScatterMode.from_any(mode)
    if mode is GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"{what}: mode='one_hot' (a TPU strategy) is not "
                                  "implemented; the default mode gives the same values for "
                                  "in-bounds indices")
    return mode


# --- the index grid -------------------------------------------------------------------------

def _starts(indices, k, limit):
    """Entry ``k`` of each index vector, clamped into [0, limit] in its own dtype (so no
    unsigned or 64-bit value wraps first), as int32 or int64; and whether it was in range."""
    s = L.squeeze(L.slice_in_dim(indices, k, k + 1, axis=indices.ndim - 1), (indices.ndim - 1,))
    dt = indices.dtype
    lo, hi = L.full((), 0, dt), L.full((), max(limit, 0), dt)
    fits = L.bitwise_and(L.ge(s, lo), L.le(s, hi))
    wide = np.int64 if limit >= 2**31 - 1 else np.int32
    return L.convert_element_type(L.clamp(lo, s, hi), wide), fits


def _place(a, rank, positions):
    """``a``'s dimensions at ``positions`` (ascending) of an array of ``rank``, size 1
    elsewhere."""
    rest = tuple(p for p in range(rank) if p not in positions)
    return L.expand_dims(a, rest) if rest else a


def _iota(size, rank, position, dtype):
    shape = [1] * rank
    shape[position] = size
    return L.broadcasted_iota(dtype, tuple(shape), position)


def _add(a, b):
    """``a + b`` of two arrays of one rank whose sizes may be 1 where the other's are not."""
    shape = tuple(n if m == 1 else m for m, n in zip(a.shape, b.shape))
    dims = tuple(range(len(shape)))
    if tuple(a.shape) != shape:
        a = L.broadcast_in_dim(a, shape, dims)
    if tuple(b.shape) != shape:
        b = L.broadcast_in_dim(b, shape, dims)
    return L.add(a, b)


def _grid(operand, indices, rank, batch_positions, start_map, window, batching,
          extents, clip):
    """One index array per operand dimension over a result (gather) or updates (scatter)
    of ``rank``: the start of dimension ``d`` (entry ``start_map.index(d)`` of the index
    vectors, at ``batch_positions``) plus an iota at ``window[d]``; a batching dimension
    is an iota at its position. Starts are clamped so ``extents[d]`` items fit; returns
    the arrays and whether every start fitted (at the batch positions), or None when
    nothing is checked."""
    shape = tuple(operand.shape)
    fits_all = None
    grid = []
    dtype = np.int64 if max(shape, default=0) >= 2**31 - 1 else np.int32
    for d, n in enumerate(shape):
        parts = []
        if d in start_map:
            s, fits = _starts(indices, start_map.index(d), n - extents[d])
            parts.append(_place(L.convert_element_type(s, dtype), rank, batch_positions))
            if not clip:
                fits_all = fits if fits_all is None else L.bitwise_and(fits_all, fits)
        if d in window:
            parts.append(_iota(extents[d], rank, window[d], dtype))
        if d in batching:
            parts.append(_iota(n, rank, batching[d], dtype))
        if not parts:
            parts.append(L.full((1,) * rank, 0, dtype))
        idx = parts[0]
        for p in parts[1:]:
            idx = _add(idx, p)
        grid.append(idx)
    if fits_all is not None:
        fits_all = _place(fits_all, rank, batch_positions)
    return grid, fits_all


def _spec(rank):
    return tuple(("a", k) for k in range(rank))


# --- gather ---------------------------------------------------------------------------------

def _fill_value(dtype, fill_value):
    if fill_value is not None:
        return fill_value
    dtype = np.dtype(dtype)
    if dtype.kind in "fcV" or dtype.name == "bfloat16":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    return True


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA's gather, JAX's signature: for each index vector (the last dimension of
    ``start_indices``), the slice of ``slice_sizes`` of ``operand`` starting there, laid
    out by ``dimension_numbers`` (a ``GatherDimensionNumbers``). ``unique_indices`` and
    ``indices_are_sorted`` are hints, accepted and unused."""
    what = "gather"
    operand, indices = to_array(operand), _indices(what, start_indices)
    dn = dimension_numbers
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(f"{what}: dimension_numbers must be a lax.GatherDimensionNumbers, "
                        f"got {type(dn).__name__}. (NumPy-style indexing with a static "
                        "spec is fnx.lax.index_gather.)")
    mode = GatherScatterMode.CLIP if mode is None else _mode(what, mode)
    R, shape = operand.ndim, tuple(operand.shape)
    sizes = tuple(operator.index(s) for s in slice_sizes)
    if len(sizes) != R or any(not 0 <= s <= n for s, n in zip(sizes, shape)):
        raise ShapeError(f"{what}: slice_sizes {sizes} must have one size per dimension of "
                         f"the operand {describe(operand)}, each within it")
    batch_shape = tuple(indices.shape[:-1])
    start_map = _dims(what, "start_index_map", dn.start_index_map, R, sorted_=False)
    if len(start_map) != indices.shape[-1]:
        raise ShapeError(f"{what}: the index vectors (the last dimension of start_indices "
                         f"{describe(indices)}) have {indices.shape[-1]} "
                         f"entries, but start_index_map {start_map} names {len(start_map)}")
    collapsed = _dims(what, "collapsed_slice_dims", dn.collapsed_slice_dims, R)
    op_batch = _dims(what, "operand_batching_dims", dn.operand_batching_dims, R)
    ix_batch = _dims(what, "start_indices_batching_dims", dn.start_indices_batching_dims,
                     len(batch_shape), sorted_=False)
    if len(op_batch) != len(ix_batch):
        raise ShapeError(f"{what}: operand_batching_dims {op_batch} and "
                         f"start_indices_batching_dims {ix_batch} must pair up")
    for d in collapsed + op_batch:
        if sizes[d] != 1:
            raise ShapeError(f"{what}: collapsed and batching dimension {d} must have "
                             f"slice size 1, got {sizes[d]}")
    if set(collapsed) & set(op_batch) or set(start_map) & set(op_batch):
        raise ShapeError(f"{what}: operand_batching_dims {op_batch} must not be collapsed "
                         "or in start_index_map")
    kept = [d for d in range(R) if d not in collapsed and d not in op_batch]
    rank = len(batch_shape) + len(kept)
    offset = _dims(what, "offset_dims", dn.offset_dims, rank)
    if len(offset) != len(kept):
        raise ShapeError(f"{what}: offset_dims {offset} must name one result dimension for "
                         f"each operand dimension neither collapsed nor batching ({kept})")
    for a, b in zip(op_batch, ix_batch):
        if shape[a] != batch_shape[b]:
            raise ShapeError(f"{what}: operand batching dimension {a} (size {shape[a]}) "
                             f"and start_indices dimension {b} (size {batch_shape[b]}) differ")
    batch_positions = tuple(p for p in range(rank) if p not in offset)
    out_shape = [0] * rank
    for p, n in zip(batch_positions, batch_shape):
        out_shape[p] = n
    for p, d in zip(offset, kept):
        out_shape[p] = sizes[d]
    grid, fits = _grid(operand, indices, rank, batch_positions, start_map,
                       dict(zip(kept, offset)),
                       {a: batch_positions[b] for a, b in zip(op_batch, ix_batch)},
                       sizes, mode is GatherScatterMode.CLIP
                       or mode is GatherScatterMode.PROMISE_IN_BOUNDS)
    out = L.index_gather(operand, grid, _spec(R)) if R else operand
    out = L.broadcast_in_dim(out, tuple(out_shape), tuple(range(rank))) \
        if tuple(out.shape) != tuple(out_shape) else out
    if fits is not None:
        fill = L.full((), _fill_value(operand.dtype, fill_value), operand.dtype)
        out = L.select(L.broadcast_in_dim(fits, tuple(out_shape), tuple(range(rank))),
                       out, L.broadcast_in_dim(fill, tuple(out_shape), ()))
    return out


def index_take(src, idxs, axes):
    """``src`` at the points of ``idxs`` (a sequence of equal-shape index arrays, one per
    axis of ``axes``), JAX's ``lax.index_take``: a gather of whole slices of the other
    axes."""
    src = to_array(src)
    idxs = [to_array(i) for i in idxs]
    axes = tuple(operator.index(a) for a in axes)
    if len(idxs) != len(axes):
        raise ShapeError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
    indices = L.concatenate([L.expand_dims(i, (i.ndim,)) for i in idxs], idxs[0].ndim) \
        if idxs else L.full((1, 0), 0, np.int32)
    kept = [d for d in range(src.ndim) if d not in axes]
    first = indices.ndim - 1
    dn = GatherDimensionNumbers(offset_dims=tuple(range(first, first + len(kept))),
                                collapsed_slice_dims=tuple(sorted(axes)),
                                start_index_map=axes)
    sizes = tuple(1 if d in axes else src.shape[d] for d in range(src.ndim))
    return gather(src, indices, dn, sizes, mode="clip")


# --- scatter --------------------------------------------------------------------------------

def _scatter(what, operand, scatter_indices, updates, dimension_numbers, mode, combine):
    operand, indices, updates = (to_array(operand), _indices(what, scatter_indices),
                                 to_array(updates))
    dn = dimension_numbers
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"{what}: dimension_numbers must be a lax.ScatterDimensionNumbers, "
                        f"got {type(dn).__name__}. (Functional x[spec] = updates with a "
                        "static spec is fnx.lax.index_scatter.)")
    if updates.dtype != operand.dtype:
        raise TypeError(f"{what}: updates {describe(updates)} must have the "
                        f"operand's dtype {operand.dtype}; convert them with "
                        "lax.convert_element_type")
    mode = _mode(what, mode)
    R, shape, U = operand.ndim, tuple(operand.shape), tuple(updates.shape)
    batch_shape = tuple(indices.shape[:-1])
    start_map = _dims(what, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                      R, sorted_=False)
    if len(start_map) != indices.shape[-1]:
        raise ShapeError(f"{what}: the index vectors (the last dimension of scatter_indices "
                         f"{describe(indices)}) have {indices.shape[-1]} "
                         f"entries, but scatter_dims_to_operand_dims {start_map} names "
                         f"{len(start_map)}")
    window_dims = _dims(what, "update_window_dims", dn.update_window_dims, len(U))
    inserted = _dims(what, "inserted_window_dims", dn.inserted_window_dims, R)
    op_batch = _dims(what, "operand_batching_dims", dn.operand_batching_dims, R)
    ix_batch = _dims(what, "scatter_indices_batching_dims",
                     dn.scatter_indices_batching_dims, len(batch_shape), sorted_=False)
    if len(op_batch) != len(ix_batch) or set(inserted) & set(op_batch):
        raise ShapeError(f"{what}: operand_batching_dims {op_batch} must pair up with "
                         f"scatter_indices_batching_dims {ix_batch} and not be inserted")
    kept = [d for d in range(R) if d not in inserted and d not in op_batch]
    scatter_positions = tuple(p for p in range(len(U)) if p not in window_dims)
    if len(kept) != len(window_dims) or len(scatter_positions) != len(batch_shape) or any(
            U[p] != n for p, n in zip(scatter_positions, batch_shape)):
        raise ShapeError(
            f"{what}: updates {describe(updates)} do not match: their window "
            f"dimensions {window_dims} must pair with the operand's dimensions {kept} "
            f"(operand {describe(operand)}, less inserted_window_dims {inserted} "
            f"and batching dimensions), and the rest with the scatter indices' leading "
            f"dimensions {list(batch_shape)}")
    extents = [1] * R
    for d, p in zip(kept, window_dims):
        if U[p] > shape[d]:
            raise ShapeError(f"{what}: window dimension {p} of updates {describe(updates)} "
                             f"is larger than dimension {d} of the operand "
                             f"{describe(operand)}")
        extents[d] = U[p]
    for a, b in zip(op_batch, ix_batch):
        if shape[a] != batch_shape[b]:
            raise ShapeError(f"{what}: operand batching dimension {a} (size {shape[a]}) "
                             f"and scatter_indices dimension {b} (size {batch_shape[b]}) "
                             "differ")
    rank = len(U)
    grid, fits = _grid(operand, indices, rank, scatter_positions, start_map,
                       dict(zip(kept, window_dims)),
                       {a: scatter_positions[b] for a, b in zip(op_batch, ix_batch)},
                       extents, mode is GatherScatterMode.CLIP)
    if not R:   # a scalar operand: every window is the whole of it
        zeros = L.full(U, 0, np.int32)
        return L.reshape(combine(L.reshape(operand, (1,)), updates, [zeros]), ())
    first = L.broadcast_in_dim(grid[0], U, tuple(range(rank)))
    if fits is not None:   # a window that does not fit whole is skipped: aim it past the end
        past = L.full((), shape[0], first.dtype)
        first = L.select(L.broadcast_in_dim(fits, U, tuple(range(rank))), first,
                         L.broadcast_in_dim(past, U, ()))
    return combine(operand, updates, [first] + grid[1:])


def _combining(name, how, prepare=None):
    """The scatter that combines each window with the operand by ``how``."""
    def scatter_fn(operand, scatter_indices, updates, dimension_numbers, *,
                   indices_are_sorted=False, unique_indices=False, mode=None):
        def combine(x, u, grid):
            if prepare is not None:
                u = prepare(u)
            return L.index_scatter(x, u, grid, _spec(x.ndim), how)
        return _scatter(name, operand, scatter_indices, updates, dimension_numbers, mode,
                        combine)
    scatter_fn.__name__ = scatter_fn.__qualname__ = name
    return scatter_fn


scatter = _combining("scatter", "set")
scatter.__doc__ = (
    "XLA's scatter, JAX's signature: ``operand`` with each window of ``updates`` written "
    "at its index vector (the last dimension of ``scatter_indices``), laid out by "
    "``dimension_numbers`` (a ``ScatterDimensionNumbers``). Where windows overlap, the "
    "last one's values stay (JAX leaves the order unspecified).")
scatter_add = _combining("scatter_add", "add")
scatter_add.__doc__ = "``scatter``, adding the windows to the operand (overlaps accumulate)."
scatter_sub = _combining("scatter_sub", "add", prepare=L.neg)
scatter_sub.__doc__ = "``scatter``, subtracting the windows from the operand."
scatter_mul = _combining("scatter_mul", "mul")
scatter_mul.__doc__ = "``scatter``, multiplying the operand by the windows."
scatter_min = _combining("scatter_min", "min")
scatter_min.__doc__ = "``scatter``, keeping the least of the operand and the windows."
scatter_max = _combining("scatter_max", "max")
scatter_max.__doc__ = "``scatter``, keeping the greatest of the operand and the windows."


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``func`` applied to the operand's elements that the windows of ``update_shape``
    reach, once per window reaching each (JAX's ``lax.scatter_apply``: ``func`` is
    elementwise). Counts the windows per element with ``scatter_add``, then applies
    ``func`` where the count is still above the round's number."""
    operand = to_array(operand)
    counts = scatter_add(L.full(tuple(operand.shape), 0, np.int32), scatter_indices,
                         L.full(tuple(update_shape), 1, np.int32), dimension_numbers,
                         mode=mode)
    rounds = L.reduce_max(counts, tuple(range(counts.ndim))) if counts.ndim else counts

    def body(carry):
        i, y = carry
        return L.add(i, np.int32(1)), L.select(L.gt(counts, i), to_array(func(y)), y)
    return while_loop(lambda c: L.lt(c[0], rounds), body, (np.int32(0), operand))[1]
