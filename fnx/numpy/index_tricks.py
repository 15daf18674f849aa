"""Index helpers of ``jax.numpy``: ``r_``, ``c_``, ``s_``, ``index_exp``, ``mgrid``,
``ogrid``, ``ix_``, ``indices``, the ``*_indices`` families, ``unravel_index``,
``ravel_multi_index``, ``diag``, ``diagflat``, ``fill_diagonal`` (functional),
``fromfunction``, ``ndim``/``shape``/``size``.

Index arrays are the default int (int32, int64 under ``jax_enable_x64``), as JAX's.
"""
from __future__ import annotations

import builtins
import functools
import math

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..errors import ConcretizationError, ShapeError
from .util import concrete_int, normalize_axis

__all__ = ["r_", "c_", "s_", "index_exp", "mgrid", "ogrid", "ix_", "indices", "diag_indices",
           "diag_indices_from", "tril_indices", "tril_indices_from", "triu_indices",
           "triu_indices_from", "mask_indices", "unravel_index", "ravel_multi_index", "diag",
           "diagflat", "fill_diagonal", "fromfunction", "ndim", "shape", "size"]


def _int_array(values):
    """A host index array as an Array of the default int."""
    return Array._wrap(np.asarray(values, dtype=dtypes.default_int()))


# --- r_, c_, s_, index_exp -------------------------------------------------------------------

class _IndexExpression:
    """``s_[...]`` returns the index itself (a tuple for ``index_exp``)."""

    def __init__(self, maketuple):
        self.maketuple = maketuple

    def __getitem__(self, item):
        if self.maketuple and not isinstance(item, tuple):
            return (item,)
        return item


s_ = _IndexExpression(False)
index_exp = _IndexExpression(True)


def _slice_range(name, s):
    """The values of a slice item of r_/mgrid: ``start:stop:step`` as arange, and
    ``start:stop:Nj`` (an imaginary step) as linspace of N points, stop included."""
    from .creation import arange, linspace
    start = 0 if s.start is None else s.start
    stop, step = s.stop, s.step
    if stop is None:
        raise ValueError(f"{name}: a slice needs a stop, got {s}")
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            concrete_int(name, v, "a slice bound")
    if isinstance(step, complex):
        return linspace(start, stop, int(abs(step)), endpoint=True)
    return arange(start, stop, 1 if step is None else step)


class _Concatenator:
    """``r_`` (axis 0) and ``c_`` (last axis, 1-D items become columns): concatenate
    slices (ranges), scalars and arrays, with NumPy's string directives ('0,2,-1',
    'r', 'c')."""

    def __init__(self, name, axis, ndmin, trans1d):
        self.name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def __getitem__(self, key):
        from .creation import array
        from .manipulation import concatenate, transpose
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                matrix = directive
            else:
                try:
                    parts = [int(p) for p in directive.split(",")]
                except ValueError:
                    raise ValueError(f"{self.name}: unknown directive {directive!r} (use 'r', "
                                     "'c' or up to three ints 'axis,ndmin,trans1d')") from None
                axis = parts[0]
                if len(parts) > 1:
                    ndmin = parts[1]
                if len(parts) > 2:
                    trans1d = parts[2]
        arrays = []
        for it in items:
            if isinstance(it, slice):
                a = _slice_range(self.name, it)
            elif isinstance(it, str):
                raise ValueError(f"{self.name}: a string directive must come first")
            else:
                a = array(it) if not isinstance(it, Array) else it
            if ndmin > a.ndim:  # NumPy's rule: pad with leading 1s, then move the dims
                item_ndim = a.ndim
                a = lax.reshape(a, (1,) * (ndmin - item_ndim) + a.shape)
                if trans1d != -1:
                    k2 = ndmin - item_ndim
                    k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                    axes = list(range(ndmin))
                    a = transpose(a, axes[:k1] + axes[k2:] + axes[k1:k2])
            arrays.append(a)
        if not arrays:
            return array([])
        out = concatenate(arrays, axis=axis)
        if matrix is not None:
            if out.ndim == 1:
                out = lax.reshape(out, (1, out.shape[0]))
            if matrix == "c":
                out = transpose(out)
        return out

    def __len__(self):
        return 0


r_ = _Concatenator("r_", 0, 1, -1)
c_ = _Concatenator("c_", -1, 2, 0)


# --- mgrid, ogrid, ix_, indices -------------------------------------------------------------

class _Grid:
    """``mgrid[0:3, 0:1:5j]`` (dense) and ``ogrid`` (open: broadcastable pieces)."""

    def __init__(self, name, sparse):
        self.name, self.sparse = name, sparse

    def __getitem__(self, key):
        from .creation import meshgrid
        from .manipulation import stack
        from .util import promote
        if isinstance(key, slice):
            return _slice_range(self.name, key)
        ranges = [_slice_range(self.name, k) if isinstance(k, slice) else None for k in key]
        if any(r is None for r in ranges):
            raise TypeError(f"{self.name}: every index must be a slice (start:stop:step), "
                            f"got {key!r}")
        ranges = promote(self.name, *ranges)
        grids = meshgrid(*ranges, indexing="ij", sparse=self.sparse)
        if self.sparse:
            return list(grids)
        return stack(grids, 0)


mgrid = _Grid("mgrid", False)
ogrid = _Grid("ogrid", True)


def ix_(*args):
    """An open mesh from 1-D sequences: ``a[ix_(rows, cols)]`` picks the cross product.
    Boolean sequences stand for their nonzero positions (concrete arrays only)."""
    out = []
    n = len(args)
    for k, a in enumerate(args):
        a = to_array(a, "ix_")
        if a.ndim != 1:
            raise ShapeError(f"ix_: arguments must be 1-D, argument {k} has shape {a.shape}")
        if a.dtype == dtypes.bool_:
            from .setops import nonzero
            (a,) = nonzero(a)
        elif a.dtype.kind not in "iu":
            raise TypeError(f"ix_: arguments must be integer or boolean, argument {k} is "
                            f"{a.dtype}")
        out.append(lax.reshape(a, (1,) * k + (a.shape[0],) + (1,) * (n - k - 1)))
    return tuple(out)


def indices(dimensions, dtype=None, sparse=False):
    """Index grids of ``dimensions``: one array per dim, stacked (or open with
    ``sparse=True``)."""
    from .manipulation import stack
    dims = tuple(concrete_int("indices", d, "a dimension") for d in dimensions)
    dt = dtypes.default_int() if dtype is None else dtypes.canonical(dtype)
    n = len(dims)
    grids = []
    for k, d in enumerate(dims):
        shape = (1,) * k + (d,) + (1,) * (n - k - 1)
        g = lax.broadcasted_iota(dt, shape, k)
        grids.append(g if sparse else lax.broadcast_in_dim(g, dims, tuple(range(n))))
    if sparse:
        return tuple(grids)
    return stack(grids, 0) if grids else Array._wrap(np.zeros((0,), dt))


def diag_indices(n, ndim=2):
    n = concrete_int("diag_indices", n, "n")
    if n < 0:
        raise ValueError(f"diag_indices: n must be >= 0, got {n}")
    if ndim < 0:
        raise ValueError(f"diag_indices: ndim must be >= 0, got {ndim}")
    return (_int_array(np.arange(n)),) * int(ndim)


def diag_indices_from(arr):
    a = to_array(arr, "diag_indices_from")
    if a.ndim < 2 or len(set(a.shape)) != 1:
        raise ShapeError(f"diag_indices_from: the array must be at least 2-D with all "
                         f"dimensions equal, got shape {a.shape}")
    return diag_indices(a.shape[0], a.ndim)


def _tri_indices(name, n, k, m, upper):
    n = concrete_int(name, n, "n")
    m = n if m is None else concrete_int(name, m, "m")
    k = concrete_int(name, k, "k")
    rows, cols = (np.triu_indices if upper else np.tril_indices)(n, k, m)
    return _int_array(rows), _int_array(cols)


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle (``k``: diagonal offset)."""
    return _tri_indices("tril_indices", n, k, m, False)


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle (``k``: diagonal offset)."""
    return _tri_indices("triu_indices", n, k, m, True)


def _shape2(name, arr):
    shape = getattr(arr, "shape", None)
    shape = to_array(arr, name).shape if shape is None else tuple(shape)
    if len(shape) != 2:
        raise ShapeError(f"{name}: the array must be 2-D, got shape {shape}")
    return shape


def tril_indices_from(arr, k=0):
    n, m = _shape2("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    n, m = _shape2("triu_indices_from", arr)
    return triu_indices(n, k, m)


def mask_indices(n, mask_func, k=0, *, size=None):
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero (``size=``: a static
    number of results, for jit)."""
    from .creation import ones
    from .setops import nonzero
    n = concrete_int("mask_indices", n, "n")
    return nonzero(mask_func(ones((n, n), dtypes.default_int()), k), size=size)


def unravel_index(indices, shape):
    """The coordinates of flat ``indices`` in an array of ``shape`` (C order), as JAX:
    negative indices count from the end and out-of-range ones are clipped into range
    (so this works under jit; NumPy raises)."""
    from .elementwise import clip, floor_divide, remainder, where
    shape = tuple(concrete_int("unravel_index", d, "a dimension") for d in (
        (shape,) if isinstance(shape, (int, np.integer)) else shape))
    idx = to_array(indices, "unravel_index")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be integers, got {idx.dtype}")
    total = math.prod(shape)
    if idx.dtype.kind == "i":
        idx = where(idx < 0, idx + total, idx)
    idx = clip(idx, 0, builtins.max(total - 1, 0))
    out = []
    for d in reversed(shape):
        out.append(remainder(idx, d) if d else idx)
        idx = floor_divide(idx, d) if d else idx
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Flat indices of the coordinate arrays ``multi_index`` in an array of ``dims``.
    ``mode``: 'raise' (concrete indices out of range raise), 'wrap' or 'clip'."""
    from .elementwise import clip, remainder
    from .reductions import all as all_
    from .util import promote_broadcast
    dims = tuple(concrete_int("ravel_multi_index", d, "a dimension") for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for "
                         f"{len(dims)} dims")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    idx = [to_array(i, "ravel_multi_index") for i in multi_index]
    for i in idx:
        if i.dtype.kind not in "iu":
            raise TypeError(f"ravel_multi_index: indices must be integers, got {i.dtype}")
    dt = dtypes.default_int() if dtype is None else dtypes.canonical(dtype)
    idx = [lax.convert_element_type(i, dt) if i.dtype != dt else i for i in idx]
    if len(idx) > 1:
        idx = promote_broadcast("ravel_multi_index", *idx)
    if mode == "raise":
        for i, d in zip(idx, dims):
            if isinstance(i, Tracer):
                raise ConcretizationError(
                    "ravel_multi_index: mode='raise' checks the indices, which needs them "
                    "concrete; under jit pass mode='wrap' or mode='clip'")
            if not bool(all_((i >= 0) & (i < d))):
                raise ValueError(f"ravel_multi_index: an index is out of range for a dim of "
                                 f"size {d} (mode='raise'); pass mode='wrap' or 'clip'")
    elif mode == "wrap":
        idx = [remainder(i, d) for i, d in zip(idx, dims)]
    elif mode == "clip":
        idx = [clip(i, 0, d - 1) for i, d in zip(idx, dims)]
    else:
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got "
                         f"{mode!r}")
    order_dims = list(range(len(dims)))
    if order == "F":
        order_dims.reverse()
    out = None
    stride = 1
    for k in reversed(order_dims):
        term = idx[k] * stride if stride != 1 else idx[k]
        out = term if out is None else out + term
        stride *= dims[k]
    return out


# --- diag, diagflat, fill_diagonal -----------------------------------------------------------

def diag(v, k=0):
    """1-D ``v``: a square matrix with ``v`` on diagonal ``k``; 2-D ``v``: its diagonal
    ``k``."""
    from .manipulation import diagonal
    v = to_array(v, "diag")
    k = concrete_int("diag", k, "k")
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError(f"diag: v must be 1-D (to build a matrix) or 2-D (to read a "
                         f"diagonal), got shape {v.shape}")
    n = v.shape[0] + builtins.abs(k)
    # row i holds v[i] (k >= 0), column j holds v[j] (k < 0), on the cells j - i == k
    vp = lax.pad(v, lax.convert_element_type(0, v.dtype), [(0, builtins.abs(k), 0)])
    full = lax.broadcast_in_dim(vp, (n, n), (0,) if k >= 0 else (1,))
    rows = lax.broadcasted_iota(np.int32, (n, n), 0)
    cols = lax.broadcasted_iota(np.int32, (n, n), 1)
    on = lax.eq(lax.sub(cols, rows), lax.full((n, n), k, np.int32))
    return lax.select(on, full, lax.full((n, n), 0, v.dtype))


def diagflat(v, k=0):
    """``diag(ravel(v), k)``."""
    v = to_array(v, "diagflat")
    return diag(lax.reshape(v, (v.size,)), k)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """``a`` with its main diagonal set to ``val`` (repeated cyclically), as JAX's
    functional form: arrays are immutable, so pass ``inplace=False`` and use the result.
    ``wrap=True`` (tall matrices: the diagonal restarts every ``m + 1`` rows) is
    supported too."""
    from .manipulation import ravel
    if inplace:
        raise ValueError("fill_diagonal: fnx arrays are immutable, so the diagonal cannot be "
                         "filled in place; call fill_diagonal(a, val, inplace=False) and use "
                         "the returned array (as in JAX)")
    a = to_array(a, "fill_diagonal")
    if a.ndim < 2:
        raise ShapeError(f"fill_diagonal: a must be at least 2-D, got shape {a.shape}")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ShapeError(f"fill_diagonal: an array of rank > 2 must have all dimensions equal, "
                         f"got shape {a.shape}")
    if a.ndim == 2:
        n, m = a.shape
        step = m + 1
        end = n * m if wrap else builtins.min(n, m) * m
    else:
        step = sum(a.shape[0] ** j for j in range(a.ndim))
        end = a.size
    flat_pos = np.arange(0, end, step)
    if not flat_pos.size:
        return a
    vals = ravel(to_array(val, "fill_diagonal"))
    if vals.size == 0:
        return a
    reps = -(-flat_pos.size // vals.shape[0])
    vals = lax.reshape(lax.broadcast_in_dim(vals, (reps, vals.shape[0]), (1,)),
                       (reps * vals.shape[0],))[:flat_pos.size]
    vals = lax.convert_element_type(vals, a.dtype) if vals.dtype != a.dtype else vals
    flat = lax.reshape(a, (a.size,))
    flat = flat.at[_int_array(flat_pos)].set(vals)
    return lax.reshape(flat, a.shape)


# --- fromfunction, ndim, shape, size ---------------------------------------------------------

def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function`` of each index tuple of ``shape`` (scalars of ``dtype``, default the
    default float), as JAX: vmapped over every axis, so a function that returns an array
    gives a result of ``shape`` followed by that array's shape (NumPy calls ``function``
    once on whole index grids instead)."""
    from ..transforms.vmap import vmap
    shape = tuple(concrete_int("fromfunction", d, "a dimension") for d in (
        (shape,) if isinstance(shape, (int, np.integer)) else shape))
    dt = dtypes.canonical(dtype, "fromfunction")
    f = functools.partial(function, **kwargs)
    for axis in reversed(range(len(shape))):   # innermost axis first: the last one varies
        f = vmap(f, in_axes=tuple(0 if k == axis else None for k in range(len(shape))))
    ranges = [lax.iota(dt, n) for n in shape]
    return f(*ranges) if shape else f()


def ndim(a):
    """The rank of ``a`` (an array, a nested sequence or a scalar)."""
    n = getattr(a, "ndim", None)
    return int(n) if n is not None else np.ndim(a)


def shape(a):
    """The shape of ``a`` as a tuple of ints."""
    s = getattr(a, "shape", None)
    return tuple(s) if s is not None else np.shape(a)


def size(a, axis=None):
    """The number of elements of ``a`` (along ``axis``: an int or a tuple of ints)."""
    s = shape(a)
    if axis is None:
        return math.prod(s)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return math.prod(s[normalize_axis("size", ax, len(s))] for ax in axes)
