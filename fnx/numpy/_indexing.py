"""NumPy indexing for fnx arrays: ``x[idx]`` and ``x.at[idx].set(v)``.

Basic indices (ints, slices, None, Ellipsis) become ``slice``/``rev``/
``reshape``; integer arrays become ``gather`` (reads) and ``scatter``
(functional updates) with a static spec. Static integer indices out of range
raise IndexOutOfBoundsError (an IndexError: NumPy's behaviour; JAX silently
clamps them) unless a ``mode`` asks for JAX's handling. Dynamic ones follow
JAX: negative ones count from the end, then reads clamp (``mode="clip"``, the
default; ``"fill"``/``"drop"`` give ``fill_value``) and updates drop them
(``"drop"``, the default; ``"clip"`` clamps). Boolean masks need concrete
values (their result shape depends on them), except in
``x.at[mask].set(scalar)`` style updates with a full-shape mask, which become
a ``where`` and so also work under ``jit``.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, DeletedBuffer, Tracer, to_array
from ..core.trace import EVAL, get_trace
from ..errors import (ConcretizationError, IndexOutOfBoundsError, IndexTypeError,
                      NonConcreteBooleanIndexError)
from ..lax.indexing import indexed_shape
from ..lax.shape import slice_p as _slice_p


class _Array:
    """Marker for a dynamic index array in a parsed index; ``mask``: for the indices of one
    dimension of a boolean mask, that mask's shape and which of its dimensions."""
    __slots__ = ("value", "mask")

    def __init__(self, value, mask=None):
        self.value = value
        self.mask = mask


class _Bool0:
    """Marker for a 0-d boolean index (``x[True]``): a new axis, kept or emptied."""
    __slots__ = ("flag",)

    def __init__(self, flag):
        self.flag = bool(flag)


def _holds_arrays(obj):
    if isinstance(obj, (list, tuple)):
        return any(_holds_arrays(o) for o in obj)
    return isinstance(obj, Array)


def _what(it, a):
    if isinstance(it, (float, complex, str, bytes)):
        return f"a {type(it).__name__} ({it!r})"
    return f"an array of {a.dtype}"


def _bad_index(it, a):
    raise IndexTypeError(
        f"Indexer must have integer or boolean type, got indexer with type {a.dtype}: "
        "indices must be integers, slices, None, Ellipsis or integer/boolean arrays; got "
        f"{_what(it, a)}. Convert it with int(i) or .astype(int)")


def _oob(i, dim, n):
    return IndexOutOfBoundsError(
        f"index {i} is out of bounds for axis {dim} with size {n}. fnx raises for a "
        "static index out of range (JAX would clamp it silently); for JAX's behaviour ask "
        "for it: x.at[idx].get(mode='clip') clamps, mode='fill' gives fill_value, and "
        "x.at[idx].set(v, mode='drop') drops the update.")


def _static_oob_to_arrays(x, items, wrap=True):
    """Static ints out of range (negative ones too, unless ``wrap``) turned into index
    arrays, so that an explicit ``mode`` (clip, fill, drop) treats them as JAX treats
    every index."""
    dim, out = 0, []
    for it in items:
        if it is not None and type(it) is int:
            n = x.shape[dim]
            if not (-n if wrap else 0) <= it < n:
                it = _Array(Array._wrap(np.asarray(it, np.int64 if abs(it) >= 2 ** 31
                                                   else np.int32)))
        out.append(it)
        if it is not None:
            dim += 1
    return out


def _check_static_unwrapped(x, items):
    """With ``wrap_negative_indices=False`` a static negative int is out of range: it
    raises, as any static int out of range does when no mode asks for JAX's handling."""
    dim = 0
    for it in items:
        if it is None:
            continue
        if type(it) is int and it < 0:
            raise _oob(it, dim, x.shape[dim])
        dim += 1


def _no_wrap(x, spec, arrays):
    """Index arrays whose negative entries are moved to ``-n - 1``, out of range even
    after the negative ones wrap once, so that each mode clamps, fills or drops them as
    JAX does under ``wrap_negative_indices=False``."""
    from .elementwise import where
    arrays, dim = list(arrays), 0
    for it in spec:
        if it is None:
            continue
        if type(it) is tuple and it[0] == "a" and arrays[it[1]].dtype.kind == "i":
            n = x.shape[dim]
            i = arrays[it[1]]
            if np.iinfo(i.dtype).min > -(n + 1):  # int8/int16: -n - 1 needs a wider type
                i = lax.convert_element_type(i, np.int32 if n < 2**31 - 1 else np.int64)
            arrays[it[1]] = where(lax.lt(i, lax.convert_element_type(0, i.dtype)),
                                  lax.convert_element_type(-(n + 1), i.dtype), i)
        dim += 1
    return arrays


class _TracedSliceError(ConcretizationError, IndexError):
    """A traced slice start, stop or step: an IndexError, as in JAX, and a
    ConcretizationError (a TypeError), as fnx's other uses of traced values."""


def _static_int(v, what):
    if isinstance(v, Tracer):
        raise _TracedSliceError(
            f"indexing: a traced value used as a slice {what} makes the result shape depend "
            "on data. Use fnx.lax.dynamic_slice(x, starts, sizes) for windows of static "
            "size at traced offsets.")
    return None if v is None else int(v)


def _parse(x, idx):
    """``(x2, items)``: the index expanded into per-dimension items (int, slice, None or
    _Array) of ``x2``, which is ``x`` with a size-1 axis inserted for each 0-d boolean
    index (``x[True]``), indexed by an integer array of length 1 (True) or 0 (False)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = []
    for it in idx:
        if it is None or it is Ellipsis:
            items.append(it)
        elif isinstance(it, slice):
            items.append(slice(_static_int(it.start, "start"), _static_int(it.stop, "stop"),
                               _static_int(it.step, "step")))
        elif isinstance(it, (bool, np.bool_)):
            items.append(_Bool0(it))
        elif isinstance(it, (int, np.integer)):
            items.append(int(it))
        elif isinstance(it, (str, bytes)):
            raise IndexTypeError(f"JAX does not support string indexing; got idx={it!r}")
        else:
            if isinstance(it, (list, tuple)) and _holds_arrays(it):
                from .creation import array
                it = array(it)  # a list holding traced values is stacked, not converted
            elif isinstance(it, (list, tuple)):
                it = np.asarray(it)
                if it.size == 0 and it.dtype.kind == "f":
                    it = it.astype(np.int32)  # x[[]]: an empty integer index, as NumPy
            if not isinstance(it, Array) and isinstance(it, (float, complex, np.ndarray,
                                                             np.generic)) \
                    and np.asarray(it).dtype.kind not in "biu":
                _bad_index(it, np.asarray(it))  # before converting: no narrowing warning
            a = it if isinstance(it, Array) else to_array(it, "index")
            if a.dtype == dtypes.bool_ and a.ndim == 0 and not isinstance(a, Tracer):
                items.append(_Bool0(np.asarray(a)))
            elif a.dtype == dtypes.bool_:
                if isinstance(a, Tracer):
                    raise NonConcreteBooleanIndexError(
                        "indexing: a boolean mask that is a traced value gives a result "
                        "whose shape depends on data, which jit cannot compile. Use "
                        "fnx.numpy.where(mask, x, other) instead, or x.at[mask].set(v) "
                        "with a full-shape mask.")
                for k, nz in enumerate(np.nonzero(np.asarray(a))):
                    items.append(_Array(Array._wrap(nz.astype(np.int64 if nz.size and nz.max()
                                                              >= 2**31 else np.int32)),
                                        mask=(a.shape, k)))
            elif a.dtype.kind in "iu":
                items.append(_Array(a))
            else:
                _bad_index(it, a)
    n_consume = sum(1 for it in items if it is not None and it is not Ellipsis
                    and type(it) is not _Bool0)
    if n_consume > x.ndim:
        raise IndexError(_too_many(x.ndim, n_consume))
    n_ellipsis = sum(1 for it in items if it is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("indexing: an index can only have a single Ellipsis ('...')")
    fill = [slice(None)] * (x.ndim - n_consume)
    if n_ellipsis:
        i = next(k for k, it in enumerate(items) if it is Ellipsis)
        items[i:i + 1] = fill
    else:
        items += fill
    _check_masks(x, items)
    if any(type(it) is _Bool0 for it in items):
        new_shape, dim = [], 0
        for k, it in enumerate(items):
            if type(it) is _Bool0:
                new_shape.append(1)
                items[k] = _Array(Array._wrap(np.zeros((1 if it.flag else 0,), np.int32)))
            elif it is not None:
                new_shape.append(x.shape[dim])
                dim += 1
        x = lax.reshape(x, tuple(new_shape))
    return x, items


def _too_many(ndim, n):
    return f"Too many indices: array is {ndim}-dimensional, but {n} were indexed"


def _check_masks(x, items):
    """A boolean mask's dimensions must be those of ``x`` it covers, as in NumPy and JAX
    (a dimension of size 0 selects nothing from any size, as the Array API's tests take
    it): else IndexError, instead of a selection from the wrong elements."""
    dim = 0
    for it in items:
        if it is None or type(it) is _Bool0:
            continue
        if type(it) is _Array and it.mask is not None:
            shape, k = it.mask
            if shape[k] not in (x.shape[dim], 0):
                raise IndexError(f"boolean index did not match shape of indexed array in index "
                                 f"{dim}: a boolean index of shape {shape} does not match "
                                 f"the array of shape {x.shape} it indexes: its dimension {k} "
                                 f"has size {shape[k]} where the array's dimension {dim} has "
                                 f"{x.shape[dim]}")
        dim += 1


def _spec(x, items):
    """(spec, index arrays) for gather/scatter; static ints are bounds-checked."""
    spec, arrays, dim = [], [], 0
    for it in items:
        if it is None:
            spec.append(None)
            continue
        n = x.shape[dim]
        if type(it) is int:
            if not -n <= it < n:
                raise _oob(it, dim, n)
            spec.append(it % n)
        elif type(it) is slice:
            start, stop, step = it.indices(n)
            if not len(range(start, stop, step)):
                spec.append(("s", 0, 0, 1))  # (a start of -1 would read as "the last")
            else:
                spec.append(("s", start, None if stop < 0 else stop, step))
        else:
            spec.append(("a", len(arrays)))
            arrays.append(it.value)
        dim += 1
    return tuple(spec), arrays


_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)


def _is_basic(idx):
    if isinstance(idx, tuple):
        return all(isinstance(i, _BASIC) and type(i) is not bool for i in idx)
    return isinstance(idx, _BASIC) and type(idx) is not bool


def getitem(x, idx, mode=None, fill_value=None, wrap=True):
    """``x[idx]``. Out-of-range indices: ``mode=None`` clamps dynamic ones and raises for
    static ones; ``'clip'`` (and ``'promise_in_bounds'``) clamp; ``'fill'`` (and
    ``'drop'``) give ``fill_value`` (default NaN, the dtype's minimum for signed
    integers, its maximum for unsigned ones, True for bool), as JAX. ``wrap=False``:
    negative integer indices are out of range rather than counted from the end."""
    if type(x) is Array and mode is None and wrap and get_trace() is EVAL \
            and _is_basic(idx):
        # Eager basic indexing is the buffer's own (NumPy's or the device array
        # library's: a view; IndexError out of range).
        v = x._value
        if type(v) is DeletedBuffer:
            v.dtype  # raises DeletedArrayError
        try:
            return Array._wrap(v[idx], x.weak_type)
        except IndexError as e:
            if "too many indices" in str(e) or "invalid index to scalar" in str(e):
                raise IndexError(_too_many(x.ndim, sum(
                    1 for i in (idx if isinstance(idx, tuple) else (idx,))
                    if i is not None and i is not Ellipsis))) from None
            if "out of bounds" not in str(e):
                raise
            bad = _first_oob(x.shape, idx)
            raise (_oob(*bad) if bad else e) from None
    if type(idx) is slice and idx.step is None and x.ndim:  # x[a:b] of a tracer: one slice
        start, stop = idx.start, idx.stop
        if (start is None or type(start) is int) and (stop is None or type(stop) is int):
            shape = x.shape
            start, stop, _ = idx.indices(shape[0])
            if start < stop:
                if start == 0 and stop == shape[0]:
                    return x
                nd = len(shape)
                return _slice_p.bind(x, start_indices=(start,) + (0,) * (nd - 1),
                                     limit_indices=(stop,) + shape[1:], strides=None)
    x, items = _parse(x, idx)
    if mode in ("fill", "drop", "clip"):
        items = _static_oob_to_arrays(x, items, wrap)
    elif not wrap:
        _check_static_unwrapped(x, items)
    if any(type(it) is _Array for it in items):
        spec, arrays = _spec(x, items)
        _check_empty_dims(x, spec, arrays)
        if not wrap:
            arrays = _no_wrap(x, spec, arrays)
        if mode in ("fill", "drop"):
            x, arrays = _fill_out_of_range(x, spec, arrays, fill_value)
        out = lax.index_gather(x, arrays, spec)
        block = _numpy_front(idx, spec, arrays)
        if block is not None:  # NumPy's order: the index dimensions first
            p, k = block
            out = lax.transpose(out, tuple(range(p, p + k)) + tuple(range(p))
                                + tuple(range(p + k, out.ndim)))
        return out
    return _basic_getitem(x, items)


def _check_empty_dims(x, spec, arrays):
    """An index array reading a dimension of size 0 has nothing to read (nor clamp into):
    IndexError, as NumPy and JAX (traced or not)."""
    dim = 0
    for it in spec:
        if it is None:
            continue
        if type(it) is tuple and it[0] == "a" and x.shape[dim] == 0 and arrays[it[1]].size:
            raise IndexError(f"index is out of bounds for axis {dim} with size 0")
        dim += 1


def _numpy_front(idx, spec, arrays):
    """``(p, k)`` when NumPy puts the ``k`` broadcast index dimensions first where the
    spec has them in place, at ``p``: an Ellipsis standing for no dimensions still
    separates the advanced indices on either side of it (``x[:, i, ..., j]`` of a rank-3
    ``x``), as in NumPy and JAX. None otherwise."""
    if not isinstance(idx, tuple) or not any(it is Ellipsis for it in idx):
        return None
    has_arrays = any(type(it) is tuple and it[0] == "a" for it in spec)
    if not has_arrays:
        return None

    def advanced(it):
        if it is None or it is Ellipsis or isinstance(it, slice):
            return False
        return not isinstance(it, (bool, np.bool_))

    raw = [k for k, it in enumerate(idx) if advanced(it)]
    e = next(k for k, it in enumerate(idx) if it is Ellipsis)
    if not raw or not raw[0] < e < raw[-1]:
        return None
    pos = [k for k, it in enumerate(spec) if type(it) is int
           or type(it) is tuple and it[0] == "a"]
    if pos != list(range(pos[0], pos[-1] + 1)):
        return None  # the spec separates them too
    k = len(np.broadcast_shapes(*[arrays[it[1]].shape for it in spec
                                  if type(it) is tuple and it[0] == "a"]))
    return pos[0] - sum(1 for it in spec[:pos[0]] if type(it) is int), k


def _first_oob(shape, idx):
    """(index, axis, size) of the first static int of a basic index out of range."""
    items = idx if isinstance(idx, tuple) else (idx,)
    n_consume = sum(1 for it in items if it is not None and it is not Ellipsis)
    dim = 0
    for it in items:
        if it is Ellipsis:
            dim += len(shape) - (n_consume - 0)
            continue
        if it is None:
            continue
        if isinstance(it, (int, np.integer)) and dim < len(shape) and \
                not -shape[dim] <= it < shape[dim]:
            return int(it), dim, shape[dim]
        dim += 1
    return None


def _default_fill(dtype):
    if dtype.kind in "fc" or dtype.name == "bfloat16":
        return np.nan
    if dtype.kind == "b":
        return True
    info = np.iinfo(dtype)
    # a NumPy scalar of the dtype itself: a Python int (uint32 max) need not fit int32
    return dtype.type(info.min if dtype.kind == "i" else info.max)


def _fill_out_of_range(x, spec, arrays, fill_value):
    """Pad each dimension indexed by an array with one ``fill_value`` slot and point the
    out-of-range indices at it."""
    from .elementwise import where
    fill = lax.convert_element_type(_default_fill(x.dtype) if fill_value is None
                                    else fill_value, x.dtype)
    config, new_arrays, dim = [], list(arrays), 0
    for it in spec:
        if it is None:
            continue
        n = x.shape[dim]
        if type(it) is tuple and it[0] == "a":
            i = arrays[it[1]]
            wrapped = where(lax.lt(i, lax.convert_element_type(0, i.dtype)), i + n, i) \
                if i.dtype.kind == "i" else i
            bad = (wrapped < 0) | (wrapped >= n)
            new_arrays[it[1]] = where(bad, n, wrapped)
            config.append((0, 1, 0))
        else:
            config.append((0, 0, 0))
        dim += 1
    return lax.pad(x, fill, config), new_arrays


def _clip_indices(x, spec, arrays):
    """Index arrays with negative values wrapped once and the rest clamped into range."""
    from .elementwise import clip, where
    arrays, dim = list(arrays), 0
    for it in spec:
        if it is None:
            continue
        if type(it) is tuple and it[0] == "a":
            n = x.shape[dim]
            i = arrays[it[1]]
            if i.dtype.kind == "i":
                i = where(lax.lt(i, lax.convert_element_type(0, i.dtype)), i + n, i)
            arrays[it[1]] = clip(i, 0, max(n - 1, 0))
        dim += 1
    return arrays


def _basic_getitem(x, items):
    starts, limits, strides, flip, shape = [], [], [], [], []
    dim = 0
    for it in items:
        if it is None:
            shape.append(1)
            continue
        n = x.shape[dim]
        if type(it) is int:
            if not -n <= it < n:
                raise _oob(it, dim, n)
            i = it % n
            starts.append(i), limits.append(i + 1), strides.append(1)
        else:
            start, stop, step = it.indices(n)
            length = len(range(start, stop, step))
            if step < 0 and length:
                lo = start + (length - 1) * step
                starts.append(lo), limits.append(start + 1), strides.append(-step)
                flip.append(dim)
            else:
                start = min(start, n) if length else 0
                starts.append(start), limits.append(start + (length - 1) * abs(step) + 1
                                                     if length else start)
                strides.append(abs(step))
            shape.append(length)
        dim += 1
    out = lax.slice(x, starts, limits, strides)
    out = lax.rev(out, flip)
    return lax.reshape(out, shape)


# --- functional updates ------------------------------------------------------------------

class IndexUpdateHelper:
    """``x.at``: index it to get an ``IndexUpdateRef``."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return IndexUpdateRef(self.array, idx)

    def __repr__(self):
        return f"IndexUpdateHelper({self.array!r})"


_MODES = {"set": "set", "add": "add", "multiply": "mul", "mul": "mul", "min": "min",
          "max": "max"}


class IndexUpdateRef:
    """``x.at[idx]``: functional updates of the indexed elements of ``x``.

    Repeated indices accumulate for ``add``/``multiply``/``min``/``max``; for
    ``set`` one of the values wins. ``mode``: how out-of-range indices are handled
    (JAX's modes): updates drop them by default (``'drop'``, ``'fill'``,
    ``'promise_in_bounds'``) or clamp them (``'clip'``); reads clamp by default
    (``'clip'``, ``'promise_in_bounds'``) or give ``fill_value`` (``'fill'``,
    ``'drop'``). A static int index out of range raises IndexOutOfBoundsError
    unless a mode other than ``'promise_in_bounds'`` is given. ``indices_are_sorted``
    and ``unique_indices`` are accepted hints (results never depend on them).
    """
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None, out_sharding=None, wrap_negative_indices=True):
        """``x[idx]``, with ``mode`` for out-of-range indices (see the class)."""
        _check_mode(mode)
        return getitem(self.array, self.index, mode, fill_value, wrap_negative_indices)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None, wrap_negative_indices=True):
        return _scatter(self.array, self.index, values, "set", mode, wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None, wrap_negative_indices=True):
        return _scatter(self.array, self.index, values, "add", mode, wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 out_sharding=None, wrap_negative_indices=True):
        from .elementwise import negative
        return _scatter(self.array, self.index, negative(values), "add", mode,
                        wrap_negative_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 out_sharding=None, wrap_negative_indices=True):
        return _scatter(self.array, self.index, values, "mul", mode, wrap_negative_indices)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               out_sharding=None, wrap_negative_indices=True):
        """``x / d`` where ``d`` is 1 except at the indexed elements, which are divided
        by each of their values (repeated indices divide repeatedly, as JAX)."""
        from .creation import ones_like
        from .elementwise import true_divide
        denom = _scatter(ones_like(self.array), self.index, values, "mul", mode,
                         wrap_negative_indices)
        return true_divide(self.array, denom)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              out_sharding=None, wrap_negative_indices=True):
        """``x ** e`` where ``e`` is 1 except at the indexed elements (repeated indices
        multiply their exponents, as JAX)."""
        from .creation import ones_like
        from .elementwise import power
        exponent = _scatter(ones_like(self.array), self.index, values, "mul", mode,
                            wrap_negative_indices)
        return power(self.array, exponent)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None, wrap_negative_indices=True):
        return _scatter(self.array, self.index, values, "min", mode, wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None, wrap_negative_indices=True):
        return _scatter(self.array, self.index, values, "max", mode, wrap_negative_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              out_sharding=None, wrap_negative_indices=True):
        """``x`` with the elementwise ``func`` applied to the indexed elements, once per
        time the index names an element (``x.at[[1, 1]].apply(f)`` gives ``f(f(x[1]))``,
        as JAX)."""
        from .elementwise import where
        x = to_array(self.array)
        idx = self.index
        if isinstance(idx, Array) and idx.dtype == dtypes.bool_ and idx.shape == x.shape:
            # a full-shape mask, possibly traced: each element at most once
            return where(idx, lax.convert_element_type(func(x), x.dtype), x)
        zeros = lax.broadcast_in_dim(lax.convert_element_type(0, np.int32), x.shape, ())
        hits = _scatter(zeros, idx, np.int32(1), "add", mode,
                        wrap_negative_indices)  # times each element is named

        def step(y, k):
            return where(lax.gt(hits, lax.convert_element_type(k, np.int32)),
                         lax.convert_element_type(func(y), x.dtype), y)

        if unique_indices or _is_basic(idx):
            return step(x, 0)
        if not isinstance(hits, Tracer):
            y = x
            for k in range(int(np.asarray(hits).max(initial=0))):
                y = step(y, k)
            return y
        bound = _index_count(x, idx)
        if bound <= 8:  # unrolled: stays reverse-differentiable
            y = x
            for k in range(bound):
                y = step(y, k)
            return y
        from ..lax import while_loop, reduce_max
        top = reduce_max(hits, tuple(range(hits.ndim)))
        return while_loop(lambda c: lax.lt(c[1], top),
                          lambda c: (step(c[0], c[1]), lax.add(c[1], np.int32(1))),
                          (x, Array._wrap(np.int32(0))))[0]


def _index_count(x, idx):
    """How many elements an index names (a bound on how often it names one)."""
    x2, items = _parse(x, idx)
    spec, arrays = _spec(x2, _static_oob_to_arrays(x2, items))
    return int(np.prod(indexed_shape(x2.shape, spec, [a.shape for a in arrays]),
                       dtype=np.int64))


_INDEX_MODES = (None, "clip", "drop", "fill", "promise_in_bounds")


def _check_mode(mode):
    if mode not in _INDEX_MODES:
        raise ValueError(f"indexing: mode must be one of {_INDEX_MODES[1:]}, got {mode!r}")


def _scatter(x, idx, values, mode, index_mode=None, wrap=True):
    """Out-of-range dynamic indices: dropped (default, 'drop', 'fill',
    'promise_in_bounds') or clamped ('clip'); static ones likewise when a mode other
    than 'promise_in_bounds' is given, else IndexOutOfBoundsError. ``wrap=False``:
    negative integer indices are out of range rather than counted from the end."""
    _check_mode(index_mode)
    x = to_array(x)
    values, work = _scatter_values(x, values, mode)
    if work is not None:  # as JAX: updated in the promoted dtype, then cast back
        out = _scatter(lax.convert_element_type(x, work), idx, values, mode, index_mode, wrap)
        return lax.convert_element_type(out, x.dtype, weak_type=x.weak_type)
    mask = idx if isinstance(idx, Array) and idx.dtype == dtypes.bool_ else None
    if mask is not None and mask.shape == x.shape and values.ndim == 0:
        return _masked_update(x, mask, values, mode)
    shape = x.shape
    x, items = _parse(x, idx)
    if index_mode in ("fill", "drop", "clip"):
        items = _static_oob_to_arrays(x, items, wrap)
    elif not wrap:
        _check_static_unwrapped(x, items)
    spec, arrays = _spec(x, items)
    if not wrap:
        arrays = _no_wrap(x, spec, arrays)
    if index_mode == "clip":
        arrays = _clip_indices(x, spec, arrays)
    target = indexed_shape(x.shape, spec, [a.shape for a in arrays])
    block = _numpy_front(idx, spec, arrays)
    if block is not None:  # values come in NumPy's order: the index dimensions first
        p, k = block
        target = target[p:p + k] + target[:p] + target[p + k:]
    try:
        np.broadcast_shapes(values.shape, target)
        ok = np.broadcast_shapes(values.shape, target) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"x.at[...].{mode}: values of shape {values.shape} cannot be "
                         f"broadcast to the indexed shape {tuple(target)}")
    values = lax.broadcast_in_dim(values, tuple(target),
                                  tuple(range(len(target) - values.ndim, len(target))))
    if block is not None:
        values = lax.transpose(values, tuple(range(k, k + p)) + tuple(range(k))
                               + tuple(range(p + k, values.ndim)))
    out = lax.index_scatter(x, values, arrays, spec, mode)
    return out if out.shape == shape else lax.reshape(out, shape)


def _scatter_values(x, values, mode):
    """``(values, work)`` for an update of ``x``, as JAX's scatter: values of a dtype that
    ``x``'s cannot hold safely warn (FutureWarning; strict promotion raises
    TypePromotionError) and, but for ``set``, are combined with ``x`` in the promoted
    ``work`` dtype (None: in ``x``'s dtype, ``values`` cast to it). A Python int is made
    directly in ``x``'s dtype when it fits (2**32 - 1 into uint32)."""
    if dtypes.python_scalar_dtype(values) is not None:
        out = dtypes.result_type(values, x.dtype)
        if out == x.dtype and (type(values) is not int or x.dtype.kind in "iu"
                               and np.iinfo(x.dtype).min <= values <= np.iinfo(x.dtype).max):
            return Array._wrap(np.asarray(values).astype(x.dtype)), None
    else:
        values = to_array(values)
        out = x.dtype if values.dtype == x.dtype else dtypes.result_type(values, x.dtype)
    values = to_array(values)
    if out != x.dtype:
        import warnings
        from .._config import config
        warnings.warn(
            "scatter inputs have incompatible types: cannot safely cast value from "
            f"dtype={values.dtype} to dtype={x.dtype} with jax_numpy_dtype_promotion="
            f"{config.values['jax_numpy_dtype_promotion']}. In future JAX releases this "
            "will result in an error.", FutureWarning, stacklevel=4)
        if mode != "set":
            return lax.convert_element_type(values, out), out
    if values.dtype != x.dtype:
        values = lax.convert_element_type(values, x.dtype)
    return values, None


def _masked_update(x, mask, v, mode):
    from . import elementwise as ew
    if mode == "set":
        new = v
    else:
        new = {"add": ew.add, "mul": ew.multiply, "min": ew.minimum, "max": ew.maximum}[mode](x, v)
    return ew.where(mask, new, x)


# --- take and friends --------------------------------------------------------------------

def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (None: the flattened array).

    ``mode`` (JAX's): None (default) or 'fill': negative indices count from the end and
    out-of-range ones give ``fill_value`` (default NaN, the dtype's minimum for signed
    integers, its maximum for unsigned, True for bool); 'clip': NumPy's clip, indices
    clamped to ``[0, n - 1]`` (so -1 is 0); 'wrap': taken modulo ``n``;
    'promise_in_bounds' (an fnx extra): negative indices count from the end and the
    rest are clamped, as ``x[indices]``.
    """
    if out is not None:
        raise ValueError("take: fnx arrays are immutable, so out= is not supported; use "
                         "the returned array")
    a = to_array(a)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    from .util import normalize_axis
    axis = normalize_axis("take", axis, a.ndim)
    idx = to_array(indices)
    if idx.dtype.kind not in "iu":
        raise IndexTypeError(f"take: indices must be integers, got {idx.dtype}")
    n = a.shape[axis]
    if n == 0 and idx.size:
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    if mode == "wrap":
        from .elementwise import remainder
        idx = remainder(idx, n) if n else idx
    elif mode == "clip":
        from .elementwise import clip
        idx = clip(idx, 0, max(n - 1, 0))
    elif mode not in (None, "fill", "promise_in_bounds"):
        raise ValueError(f"take: mode must be 'fill', 'clip', 'wrap' or "
                         f"'promise_in_bounds', got {mode!r}")
    spec = tuple(("s", 0, a.shape[d], 1) if d != axis else ("a", 0) for d in range(a.ndim))
    arrays = [idx]
    if mode in (None, "fill"):
        a, arrays = _fill_out_of_range(a, spec, arrays, fill_value)
    return lax.index_gather(a, arrays, spec)


def _along_axis_spec(arr, indices, axis, name):
    from .util import broadcast_shapes, normalize_axis
    arr, indices = to_array(arr), to_array(indices)
    if indices.ndim != arr.ndim:
        raise ValueError(f"{name}: indices (rank {indices.ndim}) must have the same rank as "
                         f"the array (rank {arr.ndim})")
    axis = normalize_axis(name, axis, arr.ndim)
    shape = list(broadcast_shapes(name, tuple(s if d != axis else 1 for d, s in
                                              enumerate(arr.shape)),
                                  tuple(s if d != axis else 1 for d, s in
                                        enumerate(indices.shape))))
    shape[axis] = indices.shape[axis]
    shape = tuple(shape)
    index_arrays = []
    for d in range(arr.ndim):
        if d == axis:
            index_arrays.append(lax.broadcast_in_dim(indices, shape, tuple(range(arr.ndim))))
        elif arr.shape[d] == 1 and shape[d] != 1:  # arr broadcasts along d: always its 0
            index_arrays.append(lax.broadcast_in_dim(lax.convert_element_type(0, np.int32),
                                                     shape, ()))
        else:
            index_arrays.append(lax.broadcasted_iota(dtypes.int32, shape, d))
    return arr, index_arrays, tuple(("a", d) for d in range(arr.ndim)), shape


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """``arr`` gathered along ``axis`` at ``indices`` (same rank; other dims broadcast).
    ``axis`` defaults to the last one, as in the Array API (2024.12); NumPy and JAX make
    the caller name it.

    ``mode`` as JAX's: None or 'fill' (default): out-of-range indices give
    ``fill_value`` (as ``take``); 'clip' and 'promise_in_bounds': clamped. Negative
    indices count from the end first if ``wrap_negative_indices``, which defaults as in
    JAX 0.10.2 to True except under 'promise_in_bounds'."""
    if axis is None:
        arr = to_array(arr)
        arr, axis = lax.reshape(arr, (arr.size,)), 0
    if mode not in (None, "fill", "clip", "promise_in_bounds"):
        raise ValueError(f"take_along_axis: mode must be 'fill', 'clip' or "
                         f"'promise_in_bounds', got {mode!r}")
    if to_array(indices).dtype.kind not in "iu":
        raise IndexTypeError(f"take_along_axis: indices must be integers, got "
                             f"{to_array(indices).dtype}")
    arr, index_arrays, spec, _ = _along_axis_spec(arr, indices, axis, "take_along_axis")
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    if not wrap_negative_indices:
        index_arrays = _no_wrap(arr, spec, index_arrays)
    if mode in (None, "fill"):
        arr, index_arrays = _fill_out_of_range(arr, spec, index_arrays, fill_value)
    return lax.index_gather(arr, index_arrays, spec)


def put_along_axis(arr, indices, values, axis, inplace=True, mode=None):
    """Functional ``numpy.put_along_axis``: returns the updated array.

    As in JAX, ``inplace=False`` must be passed: NumPy's form updates ``arr`` in place
    and returns None, which code ported unchanged would silently rely on.
    """
    if inplace:
        raise ValueError("put_along_axis: fnx arrays are immutable, so it cannot update "
                         "arr in place; pass inplace=False and use the returned array")
    arr, index_arrays, spec, shape = _along_axis_spec(arr, indices, axis, "put_along_axis")
    values = to_array(values)
    if values.dtype != arr.dtype:
        values = lax.convert_element_type(values, arr.dtype)
    values = lax.broadcast_in_dim(values, shape, tuple(range(len(shape) - values.ndim,
                                                             len(shape))))
    return lax.index_scatter(arr, values, index_arrays, spec, "set")
