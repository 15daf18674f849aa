"""Shape manipulation of ``fnx.numpy``: thin functions over the shape primitives."""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, to_array
from ..errors import ShapeError
from ._util import (broadcast_shapes as _bshapes, broadcast_to_shape, concrete_int, normalize_axes,
                    normalize_axis, promote)


def astype(x, dtype, /, *, copy=True, device=None):
    x = to_array(x)
    return lax.convert_element_type(x, dtypes.canonicalize(dtype))


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """``numpy.reshape``; one dimension may be -1. Only C order is supported."""
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    a = to_array(a)
    shape = newshape if shape is None else shape
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = [concrete_int("reshape", d, "a dimension") for d in shape]
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: can only infer one dimension (-1) in {tuple(shape)}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or a.size % known:
            raise ShapeError(f"reshape: cannot reshape an array of shape {a.shape} "
                             f"({a.size} elements) into {tuple(shape)}")
        shape[shape.index(-1)] = a.size // known
    return lax.reshape(a, tuple(shape))


def ravel(a, order="C"):
    a = to_array(a)
    return lax.reshape(a, (a.size,))


def transpose(a, axes=None):
    a = to_array(a)
    axes = tuple(reversed(range(a.ndim))) if axes is None else normalize_axes(
        "transpose", axes, a.ndim)
    if len(axes) != a.ndim:
        raise ShapeError(f"transpose: axes {axes} do not match an array of rank {a.ndim}")
    return lax.transpose(a, axes)


def permute_dims(a, /, axes):
    return transpose(a, axes)


def matrix_transpose(x, /):
    x = to_array(x)
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: needs rank >= 2, got shape {x.shape}")
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return lax.transpose(x, perm)


def moveaxis(a, source, destination):
    a = to_array(a)
    src = normalize_axes("moveaxis", source, a.ndim)
    dst = normalize_axes("moveaxis", destination, a.ndim)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    order = [d for d in range(a.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(a, order)


def swapaxes(a, axis1, axis2):
    a = to_array(a)
    perm = list(range(a.ndim))
    i, j = normalize_axis("swapaxes", axis1, a.ndim), normalize_axis("swapaxes", axis2, a.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


def squeeze(a, axis=None):
    a = to_array(a)
    if axis is None:
        dims = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        dims = normalize_axes("squeeze", axis, a.ndim)
    return lax.squeeze(a, dims)


def expand_dims(a, axis):
    a = to_array(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return lax.expand_dims(a, normalize_axes("expand_dims", axes, a.ndim + len(axes)))


def broadcast_to(array, shape):
    array = to_array(array)
    shape = tuple(concrete_int("broadcast_to", d, "a dimension") for d in (
        (shape,) if isinstance(shape, int) else shape))
    if _bshapes("broadcast_to", array.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {array.shape} to {shape}")
    return broadcast_to_shape(array, shape)


def broadcast_arrays(*args):
    arrays = [to_array(a) for a in args]
    shape = _bshapes("broadcast_arrays", *[a.shape for a in arrays])
    return [broadcast_to_shape(a, shape) for a in arrays]


def broadcast_shapes(*shapes):
    return _bshapes("broadcast_shapes", *shapes)


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along ``axis`` (promoting dtypes); ``axis=None`` flattens first."""
    arrays = promote("concatenate", *arrays)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    if not arrays:
        raise ValueError("concatenate: need at least one array")
    if arrays[0].ndim == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis("concatenate", axis, arrays[0].ndim)
    out = lax.concatenate(arrays, axis)
    return out if dtype is None else astype(out, dtype)


concat = concatenate


def stack(arrays, axis=0, dtype=None):
    arrays = promote("stack", *arrays)
    if not arrays:
        raise ValueError("stack: need at least one array")
    shape = arrays[0].shape
    if any(a.shape != shape for a in arrays):
        raise ShapeError(f"stack: all arrays must have the same shape, got "
                         f"{[a.shape for a in arrays]}")
    axis = normalize_axis("stack", axis, len(shape) + 1)
    return concatenate([lax.expand_dims(a, (axis,)) for a in arrays], axis, dtype)


def unstack(x, /, *, axis=0):
    x = to_array(x)
    axis = normalize_axis("unstack", axis, x.ndim)
    return tuple(lax.squeeze(lax.slice_in_dim(x, i, i + 1, 1, axis), (axis,))
                 for i in range(x.shape[axis]))


def atleast_1d(*arys):
    out = [reshape(a, (1,)) if to_array(a).ndim == 0 else to_array(a) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    out = []
    for a in arys:
        a = to_array(a)
        out.append(lax.reshape(a, (1,) * (2 - a.ndim) + a.shape) if a.ndim < 2 else a)
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    out = []
    for a in arys:
        a = to_array(a)
        if a.ndim == 0:
            a = lax.reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = lax.reshape(a, (1, a.shape[0], 1))
        elif a.ndim == 2:
            a = lax.reshape(a, a.shape + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


def vstack(tup, dtype=None):
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


def hstack(tup, dtype=None):
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if arrs[0].ndim == 1 else 1, dtype)


def dstack(tup, dtype=None):
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    arrs = [to_array(a) for a in tup]
    return concatenate([lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a for a in arrs], 1)


def _split_points(name, n, indices_or_sections, even):
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{name}: number of sections must be > 0")
        if even and n % k:
            raise ValueError(f"{name}: array split does not result in an equal division "
                             f"({n} into {k}); use array_split")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return list(np.cumsum([0] + sizes))
    pts = [concrete_int(name, i, "a split index") for i in indices_or_sections]
    return [0] + [min(max(p + n if p < 0 else p, 0), n) for p in pts] + [n]


def _split(name, ary, indices_or_sections, axis, even):
    ary = to_array(ary)
    axis = normalize_axis(name, axis, ary.ndim)
    pts = _split_points(name, ary.shape[axis], indices_or_sections, even)
    return [lax.slice_in_dim(ary, int(s), int(max(s, e)), 1, axis) for s, e in zip(pts, pts[1:])]


def split(ary, indices_or_sections, axis=0):
    return _split("split", ary, indices_or_sections, axis, True)


def array_split(ary, indices_or_sections, axis=0):
    return _split("array_split", ary, indices_or_sections, axis, False)


def tile(A, reps):
    A = to_array(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    reps = (1,) * (A.ndim - len(reps)) + tuple(int(r) for r in reps)
    A = lax.reshape(A, (1,) * (len(reps) - A.ndim) + A.shape)
    # broadcast each dim to (rep, size) then merge
    shape = []
    dims = []
    for i, (r, s) in enumerate(zip(reps, A.shape)):
        shape += [r, s]
        dims.append(2 * i + 1)
    out = lax.broadcast_in_dim(A, tuple(shape), tuple(dims))
    return lax.reshape(out, tuple(r * s for r, s in zip(reps, A.shape)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Repeat elements; ``repeats`` must be a static int or a concrete array."""
    a = to_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis("repeat", axis, a.ndim)
    n = a.shape[axis]
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        shape = a.shape[:axis + 1] + (r,) + a.shape[axis + 1:]
        out = lax.broadcast_in_dim(a, shape, tuple(d if d <= axis else d + 1
                                                   for d in range(a.ndim)))
        return lax.reshape(out, a.shape[:axis] + (n * r,) + a.shape[axis + 1:])
    reps = to_array(repeats)
    counts = np.broadcast_to(np.asarray(reps._concrete("repeat: repeats")), (n,))
    idx = np.repeat(np.arange(n, dtype=np.int32), counts)
    from ._indexing import take
    return take(a, Array._wrap(idx), axis=axis)


def roll(a, shift, axis=None):
    a = to_array(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts = (shift,) if isinstance(shift, (int, np.integer)) else tuple(shift)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    for s, ax in zip(shifts, axes):
        ax = normalize_axis("roll", ax, a.ndim)
        n = a.shape[ax]
        if n == 0:
            continue
        s = concrete_int("roll", s, "shift") % n
        if s:
            a = lax.concatenate([lax.slice_in_dim(a, n - s, n, 1, ax),
                                 lax.slice_in_dim(a, 0, n - s, 1, ax)], ax)
    return a


def flip(m, axis=None):
    m = to_array(m)
    return lax.rev(m, normalize_axes("flip", axis, m.ndim))


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def rot90(m, k=1, axes=(0, 1)):
    m = to_array(m)
    k %= 4
    a0, a1 = normalize_axes("rot90", axes, m.ndim)
    if k == 0:
        return m
    if k == 2:
        return flip(m, (a0, a1))
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return lax.transpose(flip(m, a1), perm) if k == 1 else flip(lax.transpose(m, perm), a1)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    from .elementwise import not_equal, subtract
    a = to_array(a)
    axis = normalize_axis("diff", axis, a.ndim)
    parts = []
    if prepend is not None:
        p = to_array(prepend)
        parts.append(broadcast_to(p, a.shape[:axis] + (1,) + a.shape[axis + 1:]) if p.ndim == 0
                     else p)
    parts.append(a)
    if append is not None:
        p = to_array(append)
        parts.append(broadcast_to(p, a.shape[:axis] + (1,) + a.shape[axis + 1:]) if p.ndim == 0
                     else p)
    if len(parts) > 1:
        a = concatenate(parts, axis)
    for _ in range(n):
        m = a.shape[axis]
        hi = lax.slice_in_dim(a, 1, m, 1, axis)
        lo = lax.slice_in_dim(a, 0, builtins.max(m - 1, 0), 1, axis)
        a = not_equal(hi, lo) if a.dtype == dtypes.bool_ else subtract(hi, lo)
    return a


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal of the (axis1, axis2) planes, as the last axis."""
    a = to_array(a)
    a1, a2 = normalize_axis("diagonal", axis1, a.ndim), normalize_axis("diagonal", axis2, a.ndim)
    a = moveaxis(a, (a1, a2), (-2, -1))
    n, m = a.shape[-2:]
    rows = np.arange(builtins.max(0, -offset), n)
    rows = rows[rows + offset < m]
    spec = tuple(("s", 0, d, 1) for d in a.shape[:-2]) + (("a", 0), ("a", 1))
    r = Array._wrap(rows.astype(np.int32))
    c = Array._wrap((rows + offset).astype(np.int32))
    return lax.gather(a, [r, c], spec)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    from .reductions import sum
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def pad(array, pad_width, mode="constant", constant_values=0):
    """``numpy.pad`` in 'constant', 'edge', 'reflect', 'symmetric' and 'wrap' modes."""
    array = to_array(array)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (array.ndim, 2)).tolist()
    if mode == "constant":
        cv = lax.convert_element_type(constant_values, array.dtype)
        return lax.pad(array, cv, [(lo, hi, 0) for lo, hi in pw])
    out = array
    for ax, (lo, hi) in enumerate(pw):
        n = out.shape[ax]
        if mode == "edge":
            idx = np.clip(np.arange(-lo, n + hi), 0, n - 1)
        elif mode == "wrap":
            idx = np.arange(-lo, n + hi) % n
        elif mode in ("reflect", "symmetric"):
            idx = np.arange(-lo, n + hi)
            period = 2 * (n - 1) if mode == "reflect" else 2 * n
            idx = np.mod(idx, builtins.max(period, 1))
            idx = np.where(idx >= n, period - idx - (0 if mode == "reflect" else 1), idx)
        else:
            raise NotImplementedError(f"pad: mode {mode!r} is not supported")
        if lo or hi:
            from ._indexing import take
            out = take(out, Array._wrap(idx.astype(np.int32)), axis=ax)
    return out


def copy(a, order=None):
    return to_array(a)
