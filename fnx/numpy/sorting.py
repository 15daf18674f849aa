"""Sorting and searching: ``sort``/``argsort`` over the stable ``sort`` primitive,
``searchsorted`` as a binary search of static depth, ``lexsort`` as a
multi-key sort. Everything here works under ``jit``.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, to_array
from ..errors import ShapeError
from .util import broadcast_shapes, broadcast_to_shape, normalize_axis, promote

__all__ = ["sort", "argsort", "searchsorted", "lexsort", "partition", "argpartition",
           "sort_complex"]


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Sorted copy along ``axis`` (``None``: flattened); NaNs sort last."""
    (a,) = promote("sort", a)
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    if a.ndim == 0:
        return a
    axis = normalize_axis("sort", axis, a.ndim)
    out = lax.sort(a, axis)
    return lax.rev(out, (axis,)) if descending else out


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False, dtype=None):
    """Indices that sort ``a`` along ``axis`` (stable; ``None``: flattened), of ``dtype``
    (an integer dtype; default the default int)."""
    idx_dtype = dtypes.default_int() if dtype is None else dtypes.canonical(dtype)
    if idx_dtype.kind not in "iu":
        raise TypeError(f"argsort: dtype must be an integer dtype, got {idx_dtype}")
    (a,) = promote("argsort", a)
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = normalize_axis("argsort", axis, a.ndim)
    if descending:
        a = lax.rev(a, (axis,))
    idx = lax.broadcasted_iota(idx_dtype, a.shape, axis)
    _, perm = lax.sort((a, idx), axis, num_keys=1)
    if descending:
        n = a.shape[axis]
        perm = lax.rev(lax.sub(n - 1, perm), (axis,))
    return perm


def sort_order_less(x, y):
    """``x < y`` in sort order (broadcasting): NaN is greater than every number, as in
    ``sort``; complex numbers compare lexicographically (real part first)."""
    from . import elementwise as ew
    x, y = promote("sort_order_less", x, y)
    if x.dtype.kind == "c":
        xr, yr, xi, yi = ew.real(x), ew.real(y), ew.imag(x), ew.imag(y)
        return ew.logical_or(ew.less(xr, yr), ew.logical_and(ew.equal(xr, yr), ew.less(xi, yi)))
    lt = ew.less(x, y)
    if x.dtype.kind != "f" and x.dtype != dtypes.bfloat16:
        return lt
    return ew.logical_or(lt, ew.logical_and(ew.isnan(y), ew.logical_not(ew.isnan(x))))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion indices of ``v`` into the sorted 1-D ``a`` (int32; NaNs sort last).

    ``method='scan'``: a binary search of ceil(log2(len(a)+1)) gather steps;
    ``'compare_all'``: counts comparisons against every element (O(len(a)*v.size));
    JAX's ``'scan_unrolled'`` and ``'sort'`` give the same result as ``'scan'`` (and run it).
    """
    from . import elementwise as ew
    from .reductions import sum as sum_
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a, v = promote("searchsorted", a, v)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: a must be 1-D, got shape {a.shape}")
    if sorter is not None:
        from ._indexing import take
        a = take(a, sorter)
    n = a.shape[0]

    def before(e, x):  # is the sorted element e placed before the inserted x?
        return sort_order_less(e, x) if side == "left" else ew.logical_not(sort_order_less(x, e))

    if n == 0:
        return lax.broadcast_in_dim(Array._wrap(np.int32(0)), v.shape, ())
    if method == "compare_all":
        av = lax.broadcast_in_dim(a, v.shape + (n,), (v.ndim,))
        vv = lax.broadcast_in_dim(v, v.shape + (n,), tuple(range(v.ndim)))
        return sum_(before(av, vv), axis=-1, dtype=dtypes.int32)
    if method not in ("scan", "scan_unrolled", "sort"):  # JAX's ways to the same result
        raise ValueError("searchsorted: method must be 'scan', 'scan_unrolled', 'sort' or "
                         f"'compare_all', got {method!r}")
    from ._indexing import take
    idx = lax.broadcast_in_dim(Array._wrap(np.int32(0)), v.shape, ())
    step = 1 << (n.bit_length() - 1)  # the largest power of two <= n
    while step:
        cand = lax.add(idx, step)
        elem = take(a, lax.sub(lax.min(cand, n), 1))
        ok = ew.logical_and(ew.less_equal(cand, n), before(elem, v))
        idx = lax.select(ok, cand, idx)
        step >>= 1
    return idx


def lexsort(keys, axis=-1):
    """Indices sorting by several keys, the last key primary (default int, stable)."""
    if isinstance(keys, (Array, np.ndarray)):
        keys = to_array(keys)
        if keys.ndim == 0:
            raise ShapeError("lexsort: keys must be a sequence of arrays or an array of rank >= 1")
        keys = [lax.squeeze(lax.slice_in_dim(keys, i, i + 1, 1, 0), (0,))
                for i in range(keys.shape[0])]
    keys = [to_array(k, "lexsort") for k in keys]
    if not keys:
        raise TypeError("lexsort: needs at least one key")
    shape = broadcast_shapes("lexsort", *[k.shape for k in keys])
    if not shape:
        return Array._wrap(np.array(0, dtypes.default_int())[()])
    keys = [broadcast_to_shape(k, shape) for k in keys]
    axis = normalize_axis("lexsort", axis, len(shape))
    iota = lax.broadcasted_iota(dtypes.default_int(), shape, axis)
    return lax.sort(tuple(reversed(keys)) + (iota,), axis, num_keys=len(keys))[-1]


def _check_kth(name, kth, n):
    for k in np.atleast_1d(np.asarray(kth)).tolist():
        if not -n <= int(k) < n:
            raise ValueError(f"{name}: kth {k} out of bounds for an axis of size {n}")


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """``numpy.partition``, computed as a full sort (which satisfies its contract:
    the kth element is in its sorted place, smaller ones before, larger after)."""
    (a,) = promote("partition", a)
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = normalize_axis("partition", axis, a.ndim)
    _check_kth("partition", kth, a.shape[axis])
    return sort(a, axis)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """``numpy.argpartition``, computed as a full stable ``argsort``."""
    (a,) = promote("argpartition", a)
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = normalize_axis("argpartition", axis, a.ndim)
    _check_kth("argpartition", kth, a.shape[axis])
    return lax.convert_element_type(argsort(a, axis), dtypes.int32)  # JAX's: int32 always


def sort_complex(a):
    """``a`` sorted along its last axis, as complex (real part first, then imaginary)."""
    (a,) = promote("sort_complex", a)
    inexact = dtypes.to_inexact(a.dtype)  # as JAX's to_complex_dtype (whatever the promotion mode)
    target = np.dtype(np.complex128) if inexact in (dtypes.float64, dtypes.complex128) \
        else np.dtype(np.complex64)
    return sort(lax.convert_element_type(a, dtypes.NARROW.get(target, target)), -1)
