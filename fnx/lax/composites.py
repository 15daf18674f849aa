"""JAX's ``jax.lax`` functions that are compositions of other primitives: ``reduce`` (with
any computation), ``reduce_xor``, ``associative_scan``, ``split``, ``collapse``,
``index_in_dim``, ``dynamic_update_index_in_dim``, ``broadcast_to_rank``, ``batch_matmul``,
``stack``, ``unstack``, ``tile``, ``empty``, ``optimization_barrier``,
``with_sharding_constraint`` and ``broadcast_shapes``, with JAX's signatures and results.
(The special functions ``lax`` names, ``igamma`` and the rest, are ``fnx.scipy.special``'s
primitives; that module attaches them here.) Being compositions, their
derivatives, batching and lowerings are those of the primitives they bind.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import tree_util
from ..core.array import to_array
from ..errors import ShapeError
from . import ops as L
from .convolution import _concrete_scalar, _which_computation, is_identity

__all__ = ["reduce", "reduce_xor", "associative_scan", "split", "collapse", "index_in_dim",
           "dynamic_update_index_in_dim", "broadcast_to_rank", "batch_matmul", "stack",
           "unstack", "tile", "empty", "optimization_barrier", "with_sharding_constraint",
           "broadcast_shapes", "broadcast_like", "conv_general_dilated_patches", "conv_general_dilated_local",
           "conv_shape_tuple", "reduce_window_shape_tuple"]


def _axis(what, axis, ndim):
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise ShapeError(f"{what}: axis {axis} is out of range for rank {ndim}")
    return a % ndim


def _apply(what, fn, tree, a, b):
    """``fn`` of two flat lists of arrays seen as pytrees of ``tree``: its result's leaves,
    which must make the same pytree."""
    out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
    flat, out_tree = tree_util.tree_flatten(out)
    if out_tree != tree:
        raise TypeError(f"{what}: the function must return its arguments' structure {tree}, "
                        f"got {out_tree}")
    return [to_array(v) for v in flat]


# --- reduce -----------------------------------------------------------------------------------

def _monoid(computation, init, dtype):
    """The reduction primitive ``computation`` with ``init`` amounts to, or None. As in
    JAX, ``init`` is compared with the computation's identity in its own dtype: 0 for add,
    1 for mul, -inf (the dtype's least value) for max, +inf for min, and False / True /
    False for a boolean or / and / xor."""
    which = _which_computation(computation)
    if which is None:
        which = {L.mul: "prod", L.bitwise_or: "or", L.bitwise_and: "and",
                 L.bitwise_xor: "xor"}.get(computation)
    if which is None or init is None:
        return None
    if which == "sum":
        return L.reduce_sum if init == 0 else None
    if which == "prod":
        return L.reduce_prod if init == 1 else None
    if which in ("max", "min"):
        if is_identity(init, dtype, which):
            return L.reduce_max if which == "max" else L.reduce_min
        return None
    if np.dtype(dtype) != np.bool_:
        return None
    if which == "or":
        return L.reduce_or if not init else None
    if which == "and":
        return L.reduce_and if init else None
    return reduce_xor if not init else None


def _dtype_of(v):
    d = getattr(v, "dtype", None)
    return np.dtype(d if d is not None else np.asarray(v).dtype)


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """JAX's ``lax.reduce``: ``operands`` (an array or a pytree of same-shaped arrays)
    reduced over ``dimensions`` by ``computation``, starting from ``init_values`` (the
    same pytree of scalars). A single operand with one of lax's monoids (add, mul, max,
    min; and, or, xor on booleans) and its identity as the init value is that reduction
    primitive (the identity is read in the init value's own dtype, as JAX does: -inf is
    max's identity for an integer operand too). Any other computation is applied
    pairwise, halving the reduced axis each round, and the init value is combined once,
    first. XLA requires the computation to be associative and leaves the order open; a
    computation that is not (``lambda a, b: a + 2 * b``) gives another result here than
    JAX's CPU backend, which folds the elements one by one."""
    flat_ops, tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"reduce: operands and init_values must have one tree structure, "
                         f"got {tree} and {init_tree}")
    if not flat_ops:
        raise ValueError("reduce: no operands")
    flat_ops = [to_array(x) for x in flat_ops]
    shape = flat_ops[0].shape
    for x in flat_ops[1:]:
        if x.shape != shape:
            raise ShapeError(f"reduce: every operand must have one shape, got "
                             f"{[tuple(o.shape) for o in flat_ops]}")
    dims = tuple(_axis("reduce", d, len(shape)) for d in dimensions)
    if len(set(dims)) != len(dims):
        raise ValueError(f"reduce: duplicate value in 'axes' of reduction: {tuple(dimensions)}")
    dims = tuple(sorted(dims))
    for i in flat_inits:
        if np.ndim(i):
            raise ValueError(f"reduce found non-scalar initial value: shape {np.shape(i)}")
    # JAX's weak type: an output is weak where its operand and init value both are
    out_weak = [x.weak_type and (type(i) in (bool, int, float, complex)
                             or bool(getattr(i, "weak_type", False)))
            for x, i in zip(flat_ops, flat_inits)]

    def typed(outs):
        return tree_util.tree_unflatten(tree, [
            o if o.weak_type == w else L.convert_element_type_exact(o, o.dtype, w)
            for o, w in zip(outs, out_weak)])
    if len(flat_ops) == 1:
        x, init = flat_ops[0], flat_inits[0]
        reducer = _monoid(computation, _concrete_scalar(init), _dtype_of(init))
        if reducer is not None:
            return typed([reducer(x, dims)])
    for x, init in zip(flat_ops, flat_inits):
        # a Python number takes the operand's dtype (JAX's weak type), unless it is a
        # float for an integer operand; an array must have the operand's dtype
        weak = type(init) in (bool, int, float, complex)
        if (_dtype_of(init) != x.dtype and not weak) or (
                weak and _dtype_of(init).kind in "fc" and x.dtype.kind in "biu"):
            raise TypeError(f"reduce: operand dtypes must match their init values' dtypes, "
                            f"as in JAX; got operand {x.dtype} and init value {init!r} "
                            f"({_dtype_of(init)})")
    return typed(tree_util.tree_leaves(_pairwise(flat_ops, flat_inits, computation, dims,
                                                 tree)))


def _pairwise(flat_ops, flat_inits, computation, dims, tree):
    """``reduce``'s general path: ``computation`` applied to the two halves of the reduced
    axis (the reduced dimensions moved last and merged) until one element is left, then
    to the init value and that."""
    shape = flat_ops[0].shape

    def combine(a, b):
        out = _apply("reduce", computation, tree, a, b)
        return [L.convert_element_type(v, o.dtype) for v, o in zip(out, a)]

    kept = [d for d in range(len(shape)) if d not in dims]
    n = int(np.prod([shape[d] for d in dims], dtype=np.int64))
    out_shape = tuple(shape[d] for d in kept)
    # the reduced axes moved last and merged into one
    vals = [L.reshape(L.transpose(x, tuple(kept) + dims), out_shape + (n,)) for x in flat_ops]
    inits = [L.broadcast_in_dim(L.convert_element_type(to_array(i), x.dtype), out_shape, ())
             for i, x in zip(flat_inits, flat_ops)]
    if n == 0:
        return tree_util.tree_unflatten(tree, inits)
    last = len(out_shape)
    while n > 1:
        half = n // 2
        heads = [L.slice_in_dim(v, 0, half, axis=last) for v in vals]
        tails = [L.slice_in_dim(v, half, 2 * half, axis=last) for v in vals]
        paired = combine(heads, tails)
        if n % 2:
            paired = [L.concatenate([p, L.slice_in_dim(v, 2 * half, n, axis=last)], last)
                      for p, v in zip(paired, vals)]
        vals, n = paired, half + n % 2
    result = combine(inits, [L.reshape(v, out_shape) for v in vals])
    return tree_util.tree_unflatten(tree, result)


def reduce_xor(operand, axes):
    """JAX's ``lax.reduce_xor``: the bitwise xor (for booleans: parity) over ``axes``."""
    x = to_array(operand)
    dims = tuple(sorted({_axis("reduce_xor", d, x.ndim) for d in axes}))
    _, tree = tree_util.tree_flatten(x)
    return _pairwise([x], [np.zeros((), x.dtype)], L.bitwise_xor, dims, tree)


# --- scans ------------------------------------------------------------------------------------

def associative_scan(fn, elems, reverse=False, axis=0):
    """JAX's ``lax.associative_scan``: the inclusive scan of ``elems`` (a pytree of arrays
    with one length along ``axis``) under ``fn``, an associative function of two pytrees
    of the same structure, applied elementwise to slices (``fn(a, b)`` with ``a`` before
    ``b``). Computed in ``ceil(log2 n)`` rounds, each combining every element with the one
    ``2**k`` before it (so floating-point results may differ from JAX's in the last bits:
    both depend on the order of combination)."""
    flat, tree = tree_util.tree_flatten(elems)
    if not flat:
        raise ValueError("associative_scan: elems holds no arrays")
    flat = [to_array(x) for x in flat]
    a = _axis("associative_scan", axis, flat[0].ndim)
    n = flat[0].shape[a]
    if any(x.shape[a] != n for x in flat):
        raise ShapeError(f"associative_scan: every array of elems must have one length "
                         f"along axis {axis}, got {[tuple(x.shape) for x in flat]}")
    if reverse:
        flat = [L.rev(x, (a,)) for x in flat]

    def combine(p, q):
        return _apply("associative_scan", fn, tree, p, q)

    step = 1
    while step < n:
        earlier = [L.slice_in_dim(x, 0, n - step, axis=a) for x in flat]
        later = [L.slice_in_dim(x, step, n, axis=a) for x in flat]
        flat = [L.concatenate([L.slice_in_dim(x, 0, step, axis=a), c], a)
                for x, c in zip(flat, combine(earlier, later))]
        step *= 2
    if reverse:
        flat = [L.rev(x, (a,)) for x in flat]
    return tree_util.tree_unflatten(tree, flat)


# --- shapes -----------------------------------------------------------------------------------

def split(operand, sizes, axis=0):
    """JAX's ``lax.split``: ``operand`` cut along ``axis`` into pieces of ``sizes`` (which
    must add up to that dimension)."""
    x = to_array(operand)
    a = _axis("split", axis, x.ndim)
    sizes = [operator.index(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[a]:
        raise ShapeError(f"split: sizes {sizes} must be non-negative and add up to "
                         f"dimension {a} of shape {tuple(x.shape)} ({x.shape[a]})")
    out, start = [], 0
    for s in sizes:
        out.append(L.slice_in_dim(x, start, start + s, axis=a))
        start += s
    return out


def collapse(operand, start_dimension, stop_dimension=None):
    """JAX's ``lax.collapse``: dimensions ``start_dimension`` up to ``stop_dimension``
    (exclusive; None: the last) merged into one."""
    x = to_array(operand)
    nd = x.ndim
    lo = operator.index(start_dimension)
    hi = nd if stop_dimension is None else operator.index(stop_dimension)
    lo, hi = (lo + nd if lo < 0 else lo), (hi + nd if hi < 0 else hi)
    if not 0 <= lo <= hi <= nd:
        raise ShapeError(f"collapse: dimensions {start_dimension}..{stop_dimension} are "
                         f"not a range of rank {nd}")
    merged = int(np.prod(x.shape[lo:hi], dtype=np.int64))
    return L.reshape(x, tuple(x.shape[:lo]) + (merged,) + tuple(x.shape[hi:]))


def index_in_dim(operand, index, axis=0, keepdims=True):
    """JAX's ``lax.index_in_dim``: the slice at static ``index`` (negative counts from the
    end) along ``axis``, kept as a dimension of 1 unless ``keepdims=False``."""
    x = to_array(operand)
    a = _axis("index_in_dim", axis, x.ndim)
    n = x.shape[a]
    i = operator.index(index)
    if not -n <= i < n:
        raise IndexError(f"index {index} is out of bounds for axis {a} with size {n}")
    i %= n
    y = L.slice_in_dim(x, i, i + 1, axis=a)
    return y if keepdims else L.squeeze(y, (a,))


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    """JAX's ``lax.dynamic_update_index_in_dim``: ``update`` (with ``operand``'s rank, its
    ``axis`` of 1, or without that axis) written at ``index`` (a traced value may do;
    negative counts from the end unless ``allow_negative_indices=False``) along ``axis``."""
    x, u = to_array(operand), to_array(update)
    a = _axis("dynamic_update_index_in_dim", axis, x.ndim)
    if u.ndim == x.ndim - 1:
        u = L.expand_dims(u, (a,))
    return L.dynamic_update_slice_in_dim(x, u, index, a,
                                         allow_negative_indices=allow_negative_indices)


def broadcast_to_rank(x, rank):
    """JAX's ``lax.broadcast_to_rank``: ``x`` with leading dimensions of 1 up to ``rank``
    (as it is when its rank is that or more)."""
    x = to_array(x)
    if x.ndim >= rank:
        return x
    return L.reshape(x, (1,) * (rank - x.ndim) + tuple(x.shape))


def batch_matmul(lhs, rhs, precision=None):
    """JAX's ``lax.batch_matmul``: matrix products over the last two dimensions, the
    leading ones batch dimensions of both operands (same rank, at least 2)."""
    a, b = to_array(lhs), to_array(rhs)
    if min(a.ndim, b.ndim) < 2:
        raise ValueError("Arguments to batch_matmul must be at least 2D, got "
                         f"{a.ndim}D and {b.ndim}D")
    if a.ndim != b.ndim:
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {a.ndim} and "
                         f"{b.ndim}")
    batch = tuple(range(a.ndim - 2))
    return L.dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)),
                         precision=precision)


def stack(operands, axis=0):
    """JAX's ``lax.stack``: the operands (one shape) along a new ``axis``."""
    xs = [to_array(x) for x in operands]
    if not xs:
        raise ValueError("stack: no operands")
    a = _axis("stack", axis, xs[0].ndim + 1)
    return L.concatenate([L.expand_dims(x, (a,)) for x in xs], a)


def unstack(x, axis=0):
    """JAX's ``lax.unstack``: the slices of ``x`` along ``axis``, as a tuple."""
    x = to_array(x)
    a = _axis("unstack", axis, x.ndim)
    return tuple(index_in_dim(x, i, a, keepdims=False) for i in range(x.shape[a]))


def tile(operand, reps):
    """JAX's ``lax.tile``: ``operand`` repeated ``reps[d]`` times along each dimension
    ``d`` (one rep per dimension)."""
    x = to_array(operand)
    reps = tuple(operator.index(r) for r in reps)
    if len(reps) != x.ndim:
        raise TypeError(f"reps length must be equal to the ndim of x, got len(reps)="
                        f"{len(reps)} and x.ndim={x.ndim}.")
    big = L.broadcast_in_dim(x, tuple(v for r, s in zip(reps, x.shape) for v in (r, s)),
                             tuple(range(1, 2 * x.ndim, 2)))
    return L.reshape(big, tuple(r * s for r, s in zip(reps, x.shape)))


def empty(shape, dtype, *, out_sharding=None):
    """JAX's ``lax.empty``: an array of ``shape`` (a tuple, or an int for one dimension)
    and ``dtype`` whose values are not to be read (zeros here, as JAX's are in practice)."""
    shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(shape)
    return L.full(shape, 0, dtype)


def broadcast_like(arr, like_arr):
    """JAX's ``lax.broadcast_like``: ``arr`` broadcast (NumPy's rules, trailing dimensions
    aligned) to ``like_arr``'s shape."""
    x, like = to_array(arr), to_array(like_arr)
    shape = tuple(like.shape)
    if len(x.shape) > len(shape) or any(
            d not in (1, t) for d, t in zip(reversed(x.shape), reversed(shape))):
        raise ShapeError(f"broadcast_like: {tuple(x.shape)} does not broadcast to "
                         f"{shape}")
    return L.broadcast_in_dim(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))


def optimization_barrier(operand, /):
    """JAX's ``lax.optimization_barrier``: ``operand`` (a pytree) with its leaves as
    arrays, values unchanged. fnx's compiler does not move computations across values,
    so there is nothing to stop."""
    return tree_util.tree_map(to_array, operand)


def with_sharding_constraint(x, shardings):
    """JAX's ``lax.with_sharding_constraint``: ``x`` as it is, each leaf on the process's
    one device (``fnx.sharding``'s meshes span one device), so every sharding holds."""
    return x


def broadcast_shapes(*shapes):
    """JAX's ``lax.broadcast_shapes``: the shape NumPy broadcasting gives ``shapes``."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(sh) for sh in shapes)))
    except ValueError:
        raise ShapeError(f"broadcast_shapes: incompatible shapes for broadcasting: "
                         f"{', '.join(str(tuple(sh)) for sh in shapes)}") from None


# --- convolution helpers ----------------------------------------------------------------------

def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """JAX's ``lax.conv_general_dilated_patches``: each output position's receptive field
    flattened into the output's feature dimension, ordered channel first, then the window
    dimensions in ``rhs_spec``'s order (``"c" + rhs_spec without O and I``). As JAX, a
    convolution with a one-hot kernel per (channel, tap) in groups of one channel (so a
    NaN or inf input spreads to the patches that multiply it by 0, as in JAX)."""
    from .convolution import conv_dimension_numbers, conv_general_dilated
    x = to_array(lhs)
    filter_shape = tuple(operator.index(k) for k in filter_shape)
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    lhs_spec, rhs_spec, _ = dn
    taps = int(np.prod(filter_shape, dtype=np.int64))
    channels = x.shape[lhs_spec[1]]
    # (channels * taps, 1, *window) in O, I, window order: output c * taps + t is tap t
    eye = np.eye(taps, dtype=x.dtype).reshape((taps, 1) + filter_shape)
    rhs = np.concatenate([eye] * channels, axis=0) if channels else eye[:0]
    # laid out as rhs_spec says: its dimension rhs_spec[k] holds canonical dimension k
    rhs = np.moveaxis(rhs, tuple(range(rhs.ndim)), tuple(rhs_spec))
    return conv_general_dilated(x, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                dn, feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """JAX's ``lax.conv_general_dilated_local``: a convolution whose weights differ at
    every output position (unshared, "locally connected"). ``rhs``'s window dimensions are
    the output's spatial positions and its I dimension the flattened patch (channel, then
    window, as ``conv_general_dilated_patches`` orders it)."""
    from .convolution import conv_dimension_numbers
    x, w = to_array(lhs), to_array(rhs)
    filter_shape = tuple(operator.index(k) for k in filter_shape)
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           precision)
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    lhs_spec, rhs_spec, out_spec = dn
    # to canonical layouts: patches (N, P, *S), weights (O, P, *S)
    p = L.transpose(patches, tuple(out_spec))
    k = L.transpose(w, tuple(rhs_spec))
    if k.shape[1] != p.shape[1] or tuple(k.shape[2:]) != tuple(p.shape[2:]):
        raise ShapeError(f"conv_general_dilated_local: rhs {tuple(w.shape)} must hold one "
                         f"{p.shape[1]}-item patch weight per output position "
                         f"{tuple(p.shape[2:])} and output feature")
    n_sp = p.ndim - 2
    sp = tuple(range(2, 2 + n_sp))
    # out[n, o, s] = sum_p patches[n, p, s] * k[o, p, s]: batch over s, contract p
    out = L.dot_general(p, k, (((1,), (1,)), (sp, sp)), precision=precision)   # (S.., N, O)
    out = L.transpose(out, (n_sp, n_sp + 1) + tuple(range(n_sp)))              # (N, O, S..)
    inverse = tuple(int(i) for i in np.argsort(out_spec))
    return L.transpose(out, inverse)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """JAX's ``lax.conv_shape_tuple``: the NC... output shape of a convolution of NC...
    ``lhs_shape`` by OI... ``rhs_shape`` (``pads``: a padding string or (low, high)
    pairs)."""
    from .convolution import padtype_to_pads
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise ShapeError(f"conv_shape_tuple: {len(lhs_shape) - 2} spatial dimensions, but "
                         f"{len(pads)} padding pairs")
    spatial = tuple(max(0, (n + lo + hi - k) // s + 1) if n + lo + hi >= k else 0
                    for n, k, s, (lo, hi) in zip(lhs_shape[2:], rhs_shape[2:], strides, pads))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + spatial


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """JAX's ``lax.reduce_window_shape_tuple``: the result shape of a ``reduce_window``
    (``padding``: (low, high) pairs)."""
    shape = tuple(operand_shape)
    n = len(shape)
    base = tuple(base_dilation or (1,) * n)
    wdil = tuple(window_dilation or (1,) * n)
    out = []
    for d, w, s, (lo, hi), b, r in zip(shape, window_dimensions, window_strides, padding,
                                       base, wdil):
        size = (d - 1) * b + 1 + lo + hi if d else lo + hi
        span = (w - 1) * r + 1
        out.append(max(0, (size - span) // s + 1) if size >= span else 0)
    return tuple(out)
