"""``mode``, ``rankdata`` and ``sem`` of ``jax.scipy.stats``: sort-based, so they jit and
vmap (no data-dependent shapes)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import lax
from ... import numpy as fnp
from ...core import dtypes
from ._util import promote_inexact

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


def _nan_policy(name, nan_policy):
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"{name}: nan_policy must be 'propagate', 'omit' or 'raise', got "
                         f"{nan_policy!r}")
    if nan_policy != "propagate":
        raise NotImplementedError(f"{name}: nan_policy={nan_policy!r} is not supported (as "
                                  "in JAX: it needs a data-dependent size or error); check "
                                  "for NaNs before the call")


def _runs(sorted_x, nan_equal=False):
    """For each position of ``sorted_x`` (sorted along the last axis): the first and last
    index of its run of equal values (``nan_equal``: the NaNs, sorted last, are one run)."""
    n = sorted_x.shape[-1]
    pos = lax.broadcasted_iota(np.int32, sorted_x.shape, sorted_x.ndim - 1)
    differ = sorted_x[..., 1:] != sorted_x[..., :-1]
    if nan_equal and dtypes.is_inexact(sorted_x.dtype):
        differ = differ & ~(fnp.isnan(sorted_x[..., 1:]) & fnp.isnan(sorted_x[..., :-1]))
    new = fnp.concatenate([fnp.ones(sorted_x.shape[:-1] + (1,), bool), differ], axis=-1)
    last = fnp.concatenate([differ, fnp.ones(sorted_x.shape[:-1] + (1,), bool)], axis=-1)
    start = lax.cummax(fnp.where(new, pos, 0), axis=sorted_x.ndim - 1)
    end = lax.cummin(fnp.where(last, pos, n - 1), axis=sorted_x.ndim - 1, reverse=True)
    return new, start, end


class ModeResult(NamedTuple):
    mode: object
    count: object


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value along ``axis`` (None: over all elements) and its count;
    ties go to the smallest value. An empty slice gives (NaN, 0)."""
    _nan_policy("mode", nan_policy)
    x = fnp.atleast_1d(fnp.asarray(a))
    if axis is None:
        x = fnp.ravel(x)
        ax = 0
        out_shape = (1,) * np.ndim(a) if keepdims else ()
    else:
        ax = int(axis) % x.ndim
        out_shape = tuple(1 if (i == ax and keepdims) else s for i, s in enumerate(x.shape)
                          if keepdims or i != ax)
    x = fnp.moveaxis(x, ax, -1)
    if x.shape[-1] == 0:
        f = dtypes.default_float()
        return ModeResult(fnp.full(out_shape, np.nan, dtype=f), fnp.zeros(out_shape, dtype=f))
    s = fnp.sort(x, axis=-1)
    _, start, end = _runs(s, nan_equal=True)  # NaNs count as one value (JAX, SciPy)
    counts = end - start + 1
    best = fnp.argmax(counts, axis=-1)[..., None]
    value = fnp.take_along_axis(s, best, axis=-1)[..., 0]
    count = fnp.take_along_axis(counts, best, axis=-1)[..., 0]
    return ModeResult(value.reshape(out_shape), count.reshape(out_shape))


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks (from 1) of the data along ``axis`` (None: of the flattened data), ties by
    ``method``: 'average', 'min', 'max', 'dense' or 'ordinal' (order of appearance).
    The default float dtype; a slice containing NaN gives NaNs (as JAX)."""
    _nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"rankdata: method must be 'average', 'min', 'max', 'dense' or "
                         f"'ordinal', got {method!r}")
    x = fnp.asarray(a)
    if axis is None:
        x, ax, shape = fnp.ravel(x), -1, None
    else:
        ax = int(axis) % max(x.ndim, 1)
        x, shape = fnp.moveaxis(x, ax, -1), None
    out = dtypes.default_float()
    order = fnp.argsort(x, axis=-1, stable=True)
    inv = fnp.argsort(order, axis=-1, stable=True)
    if method == "ordinal":
        ranks = (inv + 1).astype(out)
    else:
        s = fnp.take_along_axis(x, order, axis=-1)
        new, start, end = _runs(s)
        if method == "dense":
            by_sorted = fnp.cumsum(new.astype(np.int32), axis=-1).astype(out)
        elif method == "min":
            by_sorted = (start + 1).astype(out)
        elif method == "max":
            by_sorted = (end + 1).astype(out)
        else:
            by_sorted = (start + end).astype(out) / 2 + 1
        ranks = fnp.take_along_axis(by_sorted, inv, axis=-1)
    if x.dtype.kind in "fc":
        ranks = fnp.where(fnp.any(fnp.isnan(x), axis=-1, keepdims=True), np.nan, ranks)
    del shape
    return ranks if axis is None else fnp.moveaxis(ranks, -1, ax)


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean, ``std(a, ddof) / sqrt(n)``, along ``axis`` (None:
    all); ``nan_policy='omit'`` leaves NaNs out."""
    (b,) = promote_inexact("sem", a)
    if nan_policy == "propagate":
        n = b.size if axis is None else b.shape[axis]
        return fnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / float(np.sqrt(n))
    if nan_policy == "omit":
        count = fnp.sum(~fnp.isnan(b), axis=axis, keepdims=keepdims)
        return (fnp.nanstd(b, axis=axis, ddof=ddof, keepdims=keepdims)
                / fnp.sqrt(count.astype(b.dtype)))
    raise ValueError(f"sem: nan_policy must be 'propagate' or 'omit', got {nan_policy!r}")
