"""Shape manipulation of ``fnx.numpy``: thin functions over the shape primitives."""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..errors import ShapeError
from ..lax.shape import check_shape
from .util import (AxisError, broadcast_shapes as _bshapes, broadcast_to_shape, concrete_int,
                    normalize_axes, normalize_axis, placed, promote)


@placed("astype")
def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` converted to ``dtype`` (arrays are immutable, so ``copy`` changes nothing),
    on ``device`` when one is given."""
    x = to_array(x)
    return lax.convert_element_type(x, dtypes.canonical(dtype, "astype"))


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """``numpy.reshape``; one dimension may be -1. ``order``: "C" (row-major) or "F"
    (column-major: the reversed shape of the transposed array, transposed), as JAX."""
    if order not in ("C", "F"):
        raise NotImplementedError(f"reshape: order={order!r} is not implemented (as JAX): "
                                  "use 'C' or 'F'")
    a = to_array(a)
    shape = newshape if shape is None else shape
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = [concrete_int("reshape", d, "a dimension") for d in shape]
    if any(d < -1 for d in shape):
        raise ShapeError(f"reshape: sizes must be non-negative (one may be -1, the size that "
                         f"fits), got {tuple(shape)} for an array of shape {a.shape}")
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: can only infer one dimension (-1) in {tuple(shape)}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or a.size % known:
            raise ShapeError(f"reshape: cannot reshape an array of shape {a.shape} "
                             f"({a.size} elements) into {tuple(shape)}")
        shape[shape.index(-1)] = a.size // known
    if order == "F":
        flipped = lax.reshape(transpose(a), tuple(reversed(shape)))
        return transpose(flipped)
    return lax.reshape(a, tuple(shape))


def ravel(a, order="C"):
    """``numpy.ravel`` in "C" or "F" order (``reshape``'s)."""
    a = to_array(a)
    return reshape(a, (a.size,), order=order)


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


def expand_dims(a, axis=0):
    a = to_array(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    n = a.ndim + len(axes)
    for ax in axes:
        if not -n <= int(ax) < n:
            raise AxisError(f"expand_dims: axis {ax} is out of bounds for a rank-{a.ndim} array "
                            f"given {len(axes)} new axes (valid: {-n} to {n - 1})")
    return lax.expand_dims(a, normalize_axes("expand_dims", axes, n))


def broadcast_to(array, shape):
    array = to_array(array)
    shape = tuple(concrete_int("broadcast_to", d, "a dimension") for d in (
        (shape,) if isinstance(shape, (int, np.integer)) else shape))
    check_shape("broadcast_to", shape, array.dtype)  # >= 0, and within memory
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
    if isinstance(indices_or_sections, (int, np.integer)) or \
            getattr(indices_or_sections, "ndim", None) == 0:   # a count, maybe in an array
        k = concrete_int(name, indices_or_sections, "the number of sections")
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
    if axis is None or (a.ndim == 0 and int(axis) in (0, -1)):
        a, axis = ravel(a), 0  # a 0-d array repeats as a 1-d one (NumPy's and JAX's)
    axis = normalize_axis("repeat", axis, a.ndim)
    n = a.shape[axis]
    if isinstance(repeats, (int, np.integer)) and total_repeat_length in (None, n * int(repeats)):
        r = int(repeats)
        shape = a.shape[:axis + 1] + (r,) + a.shape[axis + 1:]
        out = lax.broadcast_in_dim(a, shape, tuple(d if d <= axis else d + 1
                                                   for d in range(a.ndim)))
        return lax.reshape(out, a.shape[:axis] + (n * r,) + a.shape[axis + 1:])
    reps = to_array(repeats)
    from ._indexing import take
    if total_repeat_length is not None and isinstance(reps, Tracer):
        # traced counts, a static length (JAX's way under jit): output position k takes
        # the element whose running count first exceeds k; past the counts' total, the
        # last element (JAX's padding)
        length = concrete_int("repeat", total_repeat_length, "total_repeat_length")
        from .sorting import searchsorted
        ends = lax.cumsum(lax.broadcast_in_dim(lax.convert_element_type(reps, np.int32),
                                               (n,), () if reps.ndim == 0 else (0,)), 0)
        idx = searchsorted(ends, lax.iota(np.int32, length), side="right")
        idx = lax.min(idx, lax.full((), max(n - 1, 0), np.int32))
        return take(a, idx, axis=axis, mode="clip")
    counts = np.broadcast_to(np.asarray(reps._concrete("repeat: repeats")), (n,))
    idx = np.repeat(np.arange(n, dtype=np.int32), counts)
    if total_repeat_length is not None:   # JAX: cut to the length, or the last one repeated
        length = concrete_int("repeat", total_repeat_length, "total_repeat_length")
        idx = idx[:length] if idx.size >= length else np.concatenate(
            [idx, np.full(length - idx.size, max(n - 1, 0), np.int32)])
    return take(a, Array._wrap(idx), axis=axis, mode="promise_in_bounds")  # in range


def _shift_items(shift):
    """``roll``'s shifts as a tuple: one per entry of a list, tuple or 1-D array (NumPy's,
    fnx's or traced), or the one of a scalar."""
    if isinstance(shift, (list, tuple)):
        return tuple(shift)
    if isinstance(shift, (int, np.integer)):
        return (shift,)
    s = shift if isinstance(shift, Tracer) else to_array(shift, "roll")
    if s.dtype.kind not in "iu":
        raise TypeError(f"roll: shift must be integers, got {s.dtype}")
    if s.ndim > 1:
        raise ShapeError(f"roll: shift must be a scalar or 1-D, got shape {tuple(s.shape)}")
    return (s,) if s.ndim == 0 else tuple(s[i] for i in range(s.shape[0]))


def roll(a, shift, axis=None):
    """Elements shifted along ``axis`` (the flattened array when None), wrapping around.
    A shift known when tracing rolls by two slices; a traced one (as JAX allows) by a
    dynamic slice of the axis doubled."""
    a = to_array(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts = _shift_items(shift)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes; give one shift, "
                         "one axis, or as many of each")
    for s, ax in zip(shifts, axes):
        ax = normalize_axis("roll", ax, a.ndim)
        n = a.shape[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            size = lax.convert_element_type(n, s.dtype)
            s = lax.rem(lax.add(lax.rem(s, size), size), size)   # in [0, n)
            a = lax.dynamic_slice_in_dim(lax.concatenate([a, a], ax), lax.sub(size, s), n, ax,
                                         allow_negative_indices=False)
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
        hi = lax.slice_in_dim(a, builtins.min(1, m), m, 1, axis)   # empty stays empty
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
    return lax.index_gather(a, [r, c], spec)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    from .reductions import sum
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


_PAD_KWARGS = {"constant": {"constant_values"}, "edge": set(), "empty": set(),
               "linear_ramp": {"end_values"}, "maximum": {"stat_length"},
               "mean": {"stat_length"}, "median": {"stat_length"}, "minimum": {"stat_length"},
               "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}, "wrap": set()}


def _pad_pairs(name, value, ndim, integral=False):
    """``value`` broadcast to ``ndim`` (before, after) pairs of Python numbers."""
    v = np.asarray(value)
    if integral:
        if v.dtype.kind not in "iub":
            raise TypeError(f"pad: {name} must be integers, got {value!r}")
        if (v < 0).any():
            raise ValueError(f"pad: {name} must not contain negative values, got {value!r}")
    try:
        v = np.broadcast_to(v, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: {name} {value!r} cannot be broadcast to ({ndim}, 2) "
                         "(one (before, after) pair per axis)") from None
    return v.tolist()


def pad(array, pad_width, mode="constant", **kwargs):
    """``numpy.pad``: every NumPy mode ('constant', 'edge', 'linear_ramp', 'maximum',
    'mean', 'median', 'minimum', 'reflect', 'symmetric', 'wrap', 'empty') with their
    options, or a function ``f(vector, pad_width, iaxis, kwargs) -> vector`` applied
    along each axis (as ``jax.numpy.pad``: it returns the padded vector)."""
    array = to_array(array)
    nd = array.ndim
    if isinstance(pad_width, Array):
        pad_width = np.asarray(pad_width._concrete("pad: pad_width (it sets the output shape)"))
    pw = [[int(a), int(b)] for a, b in _pad_pairs("pad_width", pad_width, nd, True)]
    if callable(mode):
        return _pad_function(array, pw, mode, kwargs)
    if mode not in _PAD_KWARGS:
        raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad. Use one "
                                  f"of {', '.join(sorted(_PAD_KWARGS))} or a function (pad)")
    unknown = set(kwargs) - _PAD_KWARGS[mode]
    if unknown:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: "
                         f"{sorted(unknown)}")
    if mode in ("constant", "empty"):
        return _pad_constant(array, pw, kwargs.get("constant_values", 0))
    for ax, (lo, hi) in enumerate(pw):
        if array.shape[ax] == 0 and (lo or hi):
            raise ValueError(f"pad: cannot extend the empty axis {ax} in mode {mode!r} "
                             "(only 'constant' and 'empty' can)")
    out = array
    if mode == "linear_ramp":
        ends = _pad_pairs("end_values", kwargs.get("end_values", 0), nd)
        for ax, (lo, hi) in enumerate(pw):
            out = _pad_linear_ramp(out, ax, lo, hi, ends[ax])
        return out
    if mode in ("maximum", "minimum", "mean", "median"):
        sl = kwargs.get("stat_length")
        sl = [[None, None]] * nd if sl is None else _pad_pairs("stat_length", sl, nd, True)
        for ax, (lo, hi) in enumerate(pw):
            out = _pad_stat(out, ax, lo, hi, mode, sl[ax])
        return out
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    for ax, (lo, hi) in enumerate(pw):
        if not (lo or hi):
            continue
        n = out.shape[ax]
        if mode in ("reflect", "symmetric") and reflect_type == "odd" and n > 1:
            out = _pad_reflect_odd(out, ax, lo, hi, mode == "symmetric")
            continue
        if mode == "edge" or (mode in ("reflect", "symmetric") and n == 1):
            idx = np.clip(np.arange(-lo, n + hi), 0, n - 1)   # NumPy: singletons extend
        elif mode == "wrap":
            idx = np.arange(-lo, n + hi) % n
        else:
            period = 2 * (n - 1) if mode == "reflect" else 2 * n
            idx = np.mod(np.arange(-lo, n + hi), period)
            idx = np.where(idx >= n, period - idx - (0 if mode == "reflect" else 1), idx)
        from ._indexing import take
        out = take(out, Array._wrap(idx.astype(np.int32)), axis=ax)
    return out


def _pad_constant(array, pw, constant_values):
    if isinstance(constant_values, Array) and constant_values.ndim == 0:
        cv = [[constant_values, constant_values]] * array.ndim
    else:
        cv = _pad_pairs("constant_values", constant_values, array.ndim)
    values = {(type(v), v) for pair in cv for v in pair if not isinstance(v, Array)}
    if len(values) <= 1 and not any(isinstance(v, Array) for pair in cv for v in pair):
        fill = lax.convert_element_type(cv[0][0] if cv else 0, array.dtype)
        return lax.pad(array, fill, [(lo, hi, 0) for lo, hi in pw])
    out = array
    for ax, ((lo, hi), (before, after)) in enumerate(zip(pw, cv)):
        for width, value, side in ((lo, before, 0), (hi, after, 1)):
            if width:
                cfg = [(0, 0, 0)] * array.ndim
                cfg[ax] = (width, 0, 0) if side == 0 else (0, width, 0)
                out = lax.pad(out, lax.convert_element_type(value, array.dtype), cfg)
    return out


def _edge(x, ax, last):
    n = x.shape[ax]
    return lax.slice_in_dim(x, n - 1, n, 1, ax) if last else lax.slice_in_dim(x, 0, 1, 1, ax)


def _along(x, ax, width, block):
    """``block`` (size 1 along ``ax``) repeated ``width`` times along ``ax``."""
    shape = list(x.shape)
    shape[ax] = width
    return broadcast_to_shape(block, tuple(shape))


def _pad_linear_ramp(x, ax, lo, hi, ends):
    from .elementwise import add, floor, multiply, subtract, true_divide
    if not (lo or hi):
        return x
    dt = x.dtype
    calc = dtypes.float64 if dt.kind in "iub" else dt  # NumPy computes ramps in float64
    parts = []
    for width, end, last in ((lo, ends[0], False), (hi, ends[1], True)):
        if not width:
            parts.append(None)
            continue
        edge = lax.convert_element_type_exact(_edge(x, ax, last), calc)
        endv = lax.convert_element_type_exact(end, calc)
        step = true_divide(subtract(edge, endv), width)
        shape = [1] * x.ndim
        shape[ax] = width
        i = lax.convert_element_type_exact(  # calc may be float64, whatever the x64 flag
            lax.broadcasted_iota(dtypes.int32, tuple(shape), ax), calc)
        ramp = add(multiply(i, step), endv)
        if dt.kind in "iu":
            ramp = floor(ramp)
        ramp = lax.convert_element_type(ramp, dt)
        parts.append(lax.rev(ramp, (ax,)) if last else ramp)
    pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
    return lax.concatenate(pieces, ax)


def _pad_stat(x, ax, lo, hi, mode, lengths):
    from . import reductions as rd
    from .elementwise import rint
    if not (lo or hi):
        return x
    n = x.shape[ax]
    stats = []
    for width, length, last in ((lo, lengths[0], False), (hi, lengths[1], True)):
        if not width:
            stats.append(None)
            continue
        k = n if length is None else min(int(length), n)
        if k == 0:
            raise ValueError(f"pad: stat_length of 0 gives no value to pad axis {ax} with")
        chunk = lax.slice_in_dim(x, n - k, n, 1, ax) if last else lax.slice_in_dim(x, 0, k, 1, ax)
        if mode == "maximum":
            st = rd.max(chunk, axis=ax, keepdims=True)
        elif mode == "minimum":
            st = rd.min(chunk, axis=ax, keepdims=True)
        else:
            calc = dtypes.float64 if x.dtype.kind in "iub" else x.dtype
            chunk = lax.convert_element_type_exact(chunk, calc)
            if mode == "mean":
                st = rd.mean(chunk, axis=ax, keepdims=True)
            else:
                srt = lax.sort(chunk, ax)
                a = lax.slice_in_dim(srt, (k - 1) // 2, (k - 1) // 2 + 1, 1, ax)
                b = lax.slice_in_dim(srt, k // 2, k // 2 + 1, 1, ax)
                st = lax.div(lax.add(a, b), 2.0) if k % 2 == 0 else a
            if x.dtype.kind in "iu":
                st = rint(st)  # NumPy rounds integer means and medians (half to even)
            st = lax.convert_element_type(st, x.dtype)
        stats.append(_along(x, ax, width, st))
    pieces = [p for p in (stats[0], x, stats[1]) if p is not None]
    return lax.concatenate(pieces, ax)


def _pad_reflect_odd(x, ax, lo, hi, include_edge):
    """NumPy's iterative odd reflection (``2 * edge - reflected``), step for step."""
    from .elementwise import multiply, subtract
    period = x.shape[ax]
    eo = 1 if include_edge else 0
    cur = x
    while lo > 0 or hi > 0:
        m = cur.shape[ax]
        if include_edge:
            old = m // period * period
        else:
            old = (m - 1) // (period - 1) * (period - 1) + 1 - 1
        if lo > 0:
            cl = min(old, lo)
            s0 = 1 - eo
            chunk = lax.rev(lax.slice_in_dim(cur, s0, s0 + cl, 1, ax), (ax,))
            chunk = subtract(multiply(_edge(cur, ax, False), 2), chunk)
            cur = lax.concatenate([chunk, cur], ax)
            lo -= cl
        if hi > 0:
            m = cur.shape[ax]
            cl = min(old, hi)
            chunk = lax.rev(lax.slice_in_dim(cur, m - 1 + eo - cl, m - 1 + eo, 1, ax), (ax,))
            chunk = subtract(multiply(_edge(cur, ax, True), 2), chunk)
            cur = lax.concatenate([cur, chunk], ax)
            hi -= cl
    return cur


def _pad_function(array, pw, func, kwargs):
    """JAX's callable mode: pad with zeros, then ``func`` rewrites each 1-D vector along
    each axis in turn and returns it."""
    out = _pad_constant(array, pw, 0)
    for ax in range(out.ndim):
        moved = moveaxis(out, ax, -1)
        rows = lax.reshape(moved, (math.prod(moved.shape[:-1]), moved.shape[-1]))
        new = [to_array(func(rows[i], tuple(pw[ax]), ax, kwargs)) for i in range(rows.shape[0])]
        if new:
            rows = stack(new) if len(new) > 1 else lax.expand_dims(new[0], (0,))
        if rows.dtype != out.dtype:
            rows = lax.convert_element_type(rows, out.dtype)
        out = moveaxis(lax.reshape(rows, moved.shape), -1, ax)
    return out


def copy(a, order=None):
    return to_array(a)


# ``from .manipulation import *`` in fnx/numpy/__init__.py exports exactly the functions defined
# here (not the modules and helpers this file imports, which would shadow real ones).
__all__ = sorted(_n for _n, _v in list(globals().items())
                 if not _n.startswith("_") and callable(_v)
                 and getattr(_v, "__module__", None) == __name__)


def array_view(a, dtype=None, type=None):
    """``Array.view``: ``a``'s bits seen as ``dtype``, NumPy's way (the last axis scales by
    the width ratio), through ``lax.bitcast_convert_type``."""
    if type is not None:
        raise NotImplementedError("view: the type argument is not supported (as JAX); "
                                  "fnx arrays have one type")
    a = to_array(a, "view")
    if dtype is None:
        return a
    new = np.dtype(dtypes.canonical(dtype, "view"))   # float64 is float32 without x64
    if new.itemsize > a.dtype.itemsize:   # (..., k * ratio) -> (..., k, ratio)
        ratio = new.itemsize // a.dtype.itemsize
        if not a.ndim or a.shape[-1] % ratio:
            raise ValueError(f"view: the last axis of {a.dtype}{list(a.shape)} must be a "
                             f"multiple of {ratio} to be seen as {new}")
        return lax.bitcast_convert_type(
            lax.reshape(a, a.shape[:-1] + (a.shape[-1] // ratio, ratio)), new)
    out = lax.bitcast_convert_type(a, new)
    if new.itemsize < a.dtype.itemsize:   # (..., k, ratio) -> (..., k * ratio)
        if not a.ndim:
            raise ValueError(f"view: a 0-d {a.dtype} cannot be seen as the narrower {new}; "
                             "reshape it to (1,) first")
        out = lax.reshape(out, a.shape[:-1] + (out.shape[-2] * out.shape[-1],))
    return out
