"""Data-dependent shapes: ``nonzero``, ``unique`` and the set operations.

Their output shape depends on the values. Without ``size=`` they run eagerly
only, and under ``jit`` raise a ConcretizationError that says to pass
``size=``; with a static ``size`` the result is truncated or padded to that
length (with ``fill_value``) and everything works under ``jit``. ``isin``
has a static output shape and always works under ``jit``.

Indices are JAX's default int (int32; int64 under x64); values keep their (promoted) dtype.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..errors import ConcretizationError
from .util import normalize_axis, promote

__all__ = ["nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
           "unique_inverse", "unique_all", "UniqueAllResult", "UniqueCountsResult",
           "UniqueInverseResult", "isin", "in1d", "intersect1d", "union1d", "setdiff1d",
           "setxor1d"]


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


def _no_size_error(name):
    return ConcretizationError(
        f"{name}: the output shape depends on the values of the input, which are not known "
        f"under jit (a traced value). Pass size=N (a static int) to get a result of fixed "
        f"length N, truncated or padded with fill_value; or call {name} outside jit.")


def _int32(v):
    """An index scalar of the default int (int32, int64 under x64), as JAX's indices."""
    return Array._wrap(np.array(v, dtypes.default_int())[()])


def _iota(n):
    return lax.iota(dtypes.default_int(), n)


def _truthy(a):
    from .elementwise import not_equal
    return a if a.dtype == dtypes.bool_ else not_equal(a, _zero_of(a.dtype))


def _zero_of(dtype):
    return Array._wrap(np.zeros((), dtype)[()])


def _static_size(name, size):
    if isinstance(size, Tracer):
        raise ConcretizationError(f"{name}: size must be a static Python int, got a traced "
                                  "value; mark it static (jit(f, static_argnames=...)).")
    size = int(size)
    if size < 0:
        raise ValueError(f"{name}: size must be >= 0, got {size}")
    return size


def _compact(name, mask, size):
    """Positions (default int) of the True entries of the 1-D bool ``mask``, and ``valid``.

    Without ``size`` the mask must be concrete and ``valid`` is None. With ``size``
    the positions are truncated or padded to ``size``: padding repeats the first
    position found (0 if none), and ``valid`` marks the real entries.
    """
    from .reductions import cumsum, sum as sum_
    if size is None:
        if isinstance(mask, Tracer):
            raise _no_size_error(name)
        m = np.asarray(mask._concrete(name))
        return Array._wrap(np.flatnonzero(m).astype(dtypes.default_int())), None
    size = _static_size(name, size)
    n = mask.shape[0]
    count = sum_(mask, dtype=dtypes.default_int())
    pos = lax.select(mask, lax.sub(cumsum(mask), 1),
                     lax.broadcast_in_dim(_int32(size), (n,), ()))  # size: dropped
    out = lax.broadcast_in_dim(_int32(0), (size,), ())
    out = out.at[pos].set(_iota(n))
    valid = lax.lt(_iota(size), lax.broadcast_in_dim(count, (size,), ()))
    if size:
        first = lax.broadcast_in_dim(lax.slice(out, (0,), (1,)), (size,), (0,))
        out = lax.select(valid, out, first)
    return out, valid


def _fill(values, valid, fill_value):
    """``values`` (padded along axis 0) with the padding replaced by ``fill_value``."""
    if valid is None or fill_value is None:
        return values
    from .elementwise import where
    fill = lax.convert_element_type(to_array(fill_value), values.dtype)
    v = lax.broadcast_in_dim(valid, values.shape, (0,))
    return where(v, values, fill)


# --- nonzero -------------------------------------------------------------------------------

def nonzero(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements, one default-int array per dimension (int32; int64
    under x64).

    With ``size`` (static) the arrays have that length: truncated, or padded
    with ``fill_value`` (default 0; a scalar or one value per dimension). Without
    it the call is eager only.
    """
    a = to_array(a, "nonzero")
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0-d arrays is not allowed (as in "
                         "NumPy 2); use atleast_1d(a).nonzero()")
    if size is None and isinstance(a, Tracer):
        raise _no_size_error("nonzero")
    flat = lax.reshape(_truthy(a), (a.size,))
    idx, valid = _compact("nonzero", flat, size)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * a.ndim
    if len(fills) != a.ndim:
        raise ValueError(f"nonzero: fill_value has {len(fills)} entries for an array of "
                         f"rank {a.ndim}; give a scalar or one per dimension")
    out = []
    for d, n in enumerate(a.shape):
        stride = int(np.prod(a.shape[d + 1:], dtype=np.int64))
        coord = lax.rem(lax.div(idx, stride), n) if a.size else idx
        if valid is not None:
            fill = 0 if fills[d] is None else fills[d]
            coord = _fill(coord, valid, fill)
        out.append(coord)
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices (default int) of the non-zero elements of ``ravel(a)``."""
    a = to_array(a, "flatnonzero")
    return nonzero(lax.reshape(a, (a.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements as a default-int array of shape ``(N, a.ndim)``."""
    from .manipulation import stack
    a = to_array(a, "argwhere")
    if a.ndim == 0:
        if size is None and isinstance(a, Tracer):
            raise _no_size_error("argwhere")
        n = (1 if bool(a) else 0) if size is None else _static_size("argwhere", size)
        return lax.broadcast_in_dim(_int32(0), (n, 0), ())
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=1)


# --- unique ------------------------------------------------------------------------------------

def _differs(x, y, equal_nan):
    """``x != y``, where two NaNs count as equal when ``equal_nan``."""
    from . import elementwise as ew
    ne = ew.not_equal(x, y)
    if not equal_nan or x.dtype.kind not in "fc":
        return ne
    if x.dtype.kind == "c":
        def nan(z):
            return ew.logical_or(ew.isnan(ew.real(z)), ew.isnan(ew.imag(z)))
    else:
        nan = ew.isnan
    return ew.logical_and(ne, ew.logical_not(ew.logical_and(nan(x), nan(y))))


def _sorted_groups(keys, n, equal_nan):
    """Sort rows given as column ``keys``: (perm, sorted keys, first-of-group mask)."""
    from .elementwise import logical_or
    iota = _iota(n)
    if keys:
        out = lax.sort(tuple(keys) + (iota,), 0, num_keys=len(keys))
        skeys, perm = list(out[:-1]), out[-1]
    else:
        skeys, perm = [], iota
    new = lax.broadcast_in_dim(Array._wrap(np.bool_(False)), (n - 1,), ())
    for k in skeys:
        new = logical_or(new, _differs(lax.slice(k, (1,), (n,)), lax.slice(k, (0,), (n - 1,)),
                                       equal_nan))
    mask = lax.concatenate([Array._wrap(np.ones((1,), np.bool_)), new], 0)
    return perm, skeys, mask


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           size=None, fill_value=None, equal_nan=True, sorted=True):
    """Sorted unique elements (or slices along ``axis``), as ``numpy.unique``.

    Eager only, unless a static ``size`` is given: then the result is truncated
    or padded to ``size`` with ``fill_value`` (default: the smallest unique
    value; counts pad with 0) and works under ``jit``. The result is always
    sorted (``sorted=False`` is accepted and ignored).
    """
    from .reductions import cumsum
    from ._indexing import take
    from .manipulation import moveaxis
    (ar,) = promote("unique", ar)
    if size is None and isinstance(ar, Tracer):
        raise _no_size_error("unique")
    if axis is None:
        rows = lax.reshape(ar, (ar.size,))
        n, keys, rest = ar.size, [rows], ()
        inv_shape = ar.shape
    else:
        ax = normalize_axis("unique", axis, ar.ndim)
        moved = moveaxis(ar, ax, 0)
        n, rest = moved.shape[0], moved.shape[1:]
        k = int(np.prod(rest, dtype=np.int64))
        rows = lax.reshape(moved, (n, k))
        keys = [lax.reshape(lax.slice_in_dim(rows, j, j + 1, 1, 1), (n,)) for j in range(k)]
        inv_shape = (n,)
    if n == 0:
        length = 0 if size is None else _static_size("unique", size)
        fill = 0 if fill_value is None else fill_value
        values = lax.broadcast_in_dim(lax.convert_element_type(fill, ar.dtype),
                                      (length,) + rest, ())
        zeros = lax.broadcast_in_dim(_int32(0), (length,), ())
        results = [values, zeros, lax.broadcast_in_dim(_int32(0), inv_shape, ()), zeros]
    else:
        perm, _, mask = _sorted_groups(keys, n, equal_nan)
        idx, valid = _compact("unique", mask, size)
        length = idx.shape[0]
        srows = take(rows, perm, axis=0)
        values = _fill(take(srows, idx, axis=0), valid, fill_value)
        group = lax.sub(cumsum(mask), 1)
        inverse = lax.broadcast_in_dim(_int32(0), (n,), ()).at[perm].set(group)
        counts = lax.broadcast_in_dim(_int32(0), (length,), ()).at[group].add(
            lax.broadcast_in_dim(_int32(1), (n,), ()))
        results = [values, take(perm, idx), lax.reshape(inverse, inv_shape), counts]
    values = results[0]
    if axis is not None:
        values = moveaxis(lax.reshape(values, (length,) + rest), 0, ax)
    out = [values] + [r for r, want in zip(results[1:], (return_index, return_inverse,
                                                          return_counts)) if want]
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x, /, *, size=None, fill_value=None):
    """Array API ``unique_values``: sorted unique elements (NaNs all distinct)."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """Array API ``unique_counts``: ``(values, counts)`` (NaNs all distinct)."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                      fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """Array API ``unique_inverse``: ``(values, inverse_indices)``, the inverse shaped like x."""
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_all(x, /, *, size=None, fill_value=None):
    """Array API ``unique_all``: ``(values, indices, inverse_indices, counts)``."""
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                   return_counts=True, equal_nan=False, size=size,
                                   fill_value=fill_value))


# --- membership and set operations ---------------------------------------------------------------

def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None,
         method="auto"):
    """Whether each element of ``element`` is in ``test_elements`` (shape of ``element``;
    sort + binary search, works under ``jit``; NaN is never found). ``method`` (JAX's
    algorithm choice) is validated; the result is the same."""
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"isin: method must be 'auto', 'compare_all', 'binary_search' or "
                         f"'sort', got {method!r}")
    from .elementwise import equal, logical_not
    from ._indexing import take
    from .sorting import searchsorted, sort
    if kind not in (None, "sort", "table"):
        raise ValueError(f"isin: kind must be None, 'sort' or 'table', got {kind!r}")
    e, t = promote("isin", element, test_elements)
    t = lax.reshape(t, (t.size,))
    if t.size == 0:
        found = lax.broadcast_in_dim(Array._wrap(np.bool_(False)), e.shape, ())
    else:
        st = sort(t)
        found = equal(take(st, searchsorted(st, e), mode="clip"), e)  # clamps the end position
    return logical_not(found) if invert else found


def in1d(ar1, ar2, assume_unique=False, invert=False, *, kind=None):
    """``isin`` of the flattened ``ar1`` (NumPy's older name; removed in NumPy 2.4)."""
    ar1 = to_array(ar1, "in1d")
    return isin(lax.reshape(ar1, (ar1.size,)), ar2, assume_unique, invert, kind=kind)


def _flat_pair(name, ar1, ar2):
    a, b = promote(name, ar1, ar2)
    return lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))


def _check_traced(name, size, *xs):
    if size is None and any(isinstance(x, Tracer) for x in xs):
        raise _no_size_error(name)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """Sorted unique values in both arrays (with ``return_indices``: the indices of
    their first occurrences in each). Eager, or ``jit`` with a static ``size``."""
    from ._indexing import take
    from .elementwise import logical_and
    from .sorting import argsort, searchsorted
    _check_traced("intersect1d", size, ar1, ar2)
    a, b = _flat_pair("intersect1d", ar1, ar2)
    if a.size == 0 or b.size == 0:
        out = _empty_intersection(a.dtype, size, fill_value)
        return out if return_indices else out[0]
    perm_a, sa, first = _sorted_groups([a], a.size, True)
    keep = logical_and(first, isin(sa[0], b))
    idx, valid = _compact("intersect1d", keep, size)
    values = _fill(take(sa[0], idx), valid, fill_value)
    if not return_indices:
        return values
    perm_b = argsort(b)
    sb = take(b, perm_b)
    found = take(sa[0], idx)
    return values, take(perm_a, idx), take(perm_b, searchsorted(sb, found))


def _empty_intersection(dtype, size, fill_value):
    n = 0 if size is None else _static_size("intersect1d", size)
    fill = 0 if fill_value is None else fill_value
    z = lax.broadcast_in_dim(_int32(0), (n,), ())
    return lax.broadcast_in_dim(lax.convert_element_type(fill, dtype), (n,), ()), z, z


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """Sorted unique values in either array. Eager, or ``jit`` with a static ``size``."""
    _check_traced("union1d", size, ar1, ar2)
    a, b = _flat_pair("union1d", ar1, ar2)
    return unique(lax.concatenate([a, b], 0), size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted unique values of ``ar1`` not in ``ar2`` (``assume_unique``: ``ar1`` in its
    own order). Eager, or ``jit`` with a static ``size``."""
    from ._indexing import take
    from .elementwise import logical_and, logical_not
    _check_traced("setdiff1d", size, ar1, ar2)
    a, b = _flat_pair("setdiff1d", ar1, ar2)
    if a.size == 0:
        return unique(a, size=size, fill_value=fill_value)
    if assume_unique:
        vals, keep = a, logical_not(isin(a, b))
    else:
        _, sa, first = _sorted_groups([a], a.size, True)
        vals, keep = sa[0], logical_and(first, logical_not(isin(sa[0], b)))
    idx, valid = _compact("setdiff1d", keep, size)
    return _fill(take(vals, idx), valid, fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted unique values in exactly one of the arrays. Eager, or ``jit`` with a
    static ``size``."""
    from ._indexing import take
    from .elementwise import logical_and, logical_not, not_equal
    from .reductions import sum as sum_
    _check_traced("setxor1d", size, ar1, ar2)
    a, b = _flat_pair("setxor1d", ar1, ar2)
    parts, marks = [], []
    for x in (a, b):
        if x.size == 0:
            continue
        if assume_unique:
            parts.append(x)
            marks.append(lax.broadcast_in_dim(Array._wrap(np.bool_(True)), (x.size,), ()))
        else:
            _, sx, first = _sorted_groups([x], x.size, True)
            parts.append(sx[0])
            marks.append(first)
    if not parts:
        return unique(a, size=size, fill_value=fill_value)
    vals, ok = lax.concatenate(parts, 0), lax.concatenate(marks, 0)
    n = vals.shape[0]
    # the first occurrences of each array, sorted, first; then the rest
    _, aux = lax.sort((logical_not(ok), vals), 0, num_keys=2)
    count = sum_(ok, dtype=dtypes.default_int())
    pos = _iota(n)
    inside = lax.lt(pos, lax.broadcast_in_dim(count, (n,), ()))
    true1 = Array._wrap(np.ones((1,), np.bool_))
    diff = not_equal(lax.slice(aux, (1,), (n,)), lax.slice(aux, (0,), (n - 1,)))  # NaN != NaN
    nxt_inside = lax.concatenate([lax.slice(inside, (1,), (n,)),
                                  Array._wrap(np.zeros((1,), np.bool_))], 0)
    prev_ok = lax.concatenate([true1, diff], 0)
    next_ok = lax.bitwise_or(lax.concatenate([diff, true1], 0), logical_not(nxt_inside))
    keep = logical_and(logical_and(inside, prev_ok), next_ok)
    idx, valid = _compact("setxor1d", keep, size)
    return _fill(take(aux, idx), valid, fill_value)
