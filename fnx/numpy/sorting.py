"""Sorting and searching: ``sort``/``argsort`` over the stable ``sort`` primitive."""
from __future__ import annotations

from .. import lax
from ..core import dtypes
from ..core.array import to_array
from ._util import normalize_axis, promote


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


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Indices that sort ``a`` along ``axis`` (stable; ``None``: flattened)."""
    (a,) = promote("argsort", a)
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = normalize_axis("argsort", axis, a.ndim)
    if descending:
        a = lax.rev(a, (axis,))
    idx = lax.broadcasted_iota(dtypes.int32, a.shape, axis)
    _, perm = lax.sort((a, idx), axis, num_keys=1)
    if descending:
        n = a.shape[axis]
        perm = lax.rev(lax.sub(n - 1, perm), (axis,))
    return perm
