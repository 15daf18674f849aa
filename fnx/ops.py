"""``jax.ops``: segment reductions (``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``), JAX 0.10.2's signatures and semantics.

``segment_<op>(data, segment_ids, num_segments)`` reduces the rows of ``data`` (its
leading axis; trailing dimensions are carried) into ``num_segments`` rows: row ``s`` of the
result combines every ``data[i]`` with ``segment_ids[i] == s``. A segment nothing lands in
holds the operation's identity (0, 1, the dtype's least value for max -- ``-inf`` for
inexact dtypes, ``False`` for bool -- and its greatest for min). Ids outside
``[0, num_segments)`` are dropped (``mode`` None, ``"fill"``/``"drop"``, or
``"promise_in_bounds"``, which gives the same values on JAX's CPU); ``mode="clip"`` clamps
them into range. Negative ids are never wrapped (unlike ``x.at[i]``).

Each is one functional scatter (``fnx.lax.index_scatter``) into an array of the identity,
so jit, grad, vmap and the GPU backend come from the scatter primitive's rules. (JAX
differentiates ``segment_prod`` only with ``unique_indices=True``; the scatter's rule here
covers repeated ids too.)
"""
from __future__ import annotations

import operator

import numpy as np

from . import lax as L
from .core.array import Tracer, to_array
from .errors import ConcretizationError, ShapeError
from .lax.xla_indexing import GatherScatterMode
from .numpy.util import compiled_when_eager

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]

_REDUCERS = {"add": L.reduce_sum, "mul": L.reduce_prod, "max": L.reduce_max,
             "min": L.reduce_min}


def _identity(how, dtype):
    """JAX's identity of each scatter (``_get_identity`` in ``jax/_src/ops/scatter.py``)."""
    if how == "add":
        return 0
    if how == "mul":
        return 1
    if dtype == np.bool_:
        return how == "min"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.max if how == "min" else info.min)
    return float("inf") if how == "min" else -float("inf")


def _int_or_error(name, what, value):
    if isinstance(value, Tracer):
        raise ConcretizationError(
            f"{name}: {what} sets the output's shape, so it must be a concrete Python int, "
            "but it is a traced value (under jit, vmap or make_ir). Pass a Python int, or "
            "mark it static: jit(f, static_argnums=...) / static_argnames=...")
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic):
        v = np.asarray(value)
        if v.ndim == 0 and v.dtype.kind in "iu":
            return int(v)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: {what} must be an int, got {value!r} of type "
                        f"{type(value).__name__}") from None


def _num_segments(name, ids, num_segments):
    if num_segments is None:
        if isinstance(ids, Tracer):
            raise ConcretizationError(
                f"{name}: num_segments=None infers the number of segments as "
                f"max(segment_ids) + 1, which needs concrete segment_ids, but they are a "
                f"traced value ({ids.dtype}{list(ids.shape)}, under jit, vmap or make_ir). "
                f"Pass num_segments=N, a static Python int: {name}(data, segment_ids, "
                f"num_segments=N), with jit(f, static_argnums=...) if N is an argument.")
        v = np.asarray(ids)
        if v.size == 0:
            raise ValueError(
                f"{name}: num_segments=None infers max(segment_ids) + 1, but segment_ids "
                f"is empty (shape {v.shape}); pass num_segments explicitly")
        n = int(v.max()) + 1
    else:
        n = _int_or_error(name, "num_segments", num_segments)
    if n < 0:
        raise ValueError(f"{name}: num_segments must be non-negative, got {n}")
    return n


def _mode_clips(name, mode):
    try:
        mode = GatherScatterMode.from_any(mode)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    # JAX (CPU/GPU) gives the dropping mode's values for PROMISE_IN_BOUNDS and ONE_HOT too.
    return mode is GatherScatterMode.CLIP


def _wide_int(n):
    return np.int64 if n >= 2**31 - 1 else np.int32


def _ids_for_scatter(ids, n, clip):
    """Segment ids as indices for ``index_scatter``, whose negative indices wrap once:
    under ``clip`` clamped into ``[0, n)``, else negative ids aimed past the end (``n``,
    which the scatter drops) so they are never wrapped."""
    dt = ids.dtype
    info = np.iinfo(dt)
    if clip:
        lo = L.full((), 0, dt)
        hi = L.full((), min(n - 1, int(info.max)), dt)
        return L.clamp(lo, ids, hi)
    if info.min == 0:  # unsigned: nothing negative; ids >= n the scatter drops itself
        return ids
    if n > info.max:   # ``n`` does not fit the ids' dtype: widen them (losslessly) first
        ids, dt = L.convert_element_type(ids, _wide_int(n)), np.dtype(_wide_int(n))
    past = L.full(tuple(ids.shape), n, dt)
    return L.select(L.lt(ids, L.full(tuple(ids.shape), 0, dt)), past, ids)


def _trailing_spec(shape):
    return tuple(("s", 0, d, 1) for d in shape)


def _segment(data, ids, n, how, clip, bucket_size):
    """The scatter itself (traced once per signature when called eagerly)."""
    trailing = tuple(data.shape[1:])
    out_shape = (n,) + trailing
    if n == 0:
        return L.full(out_shape, _identity(how, data.dtype), data.dtype)
    idx = _ids_for_scatter(ids, n, clip)
    if bucket_size is None:
        target = tuple(ids.shape) + trailing
        upd = data if tuple(data.shape) == target else L.broadcast_in_dim(
            data, target, tuple(range(len(target) - data.ndim, len(target))))
        out = L.full(out_shape, _identity(how, data.dtype), data.dtype)
        return L.index_scatter(out, upd, [idx], (("a", 0),) + _trailing_spec(trailing), how)
    # JAX's bucketing: id i goes to bucket i // bucket_size, each bucket reduced on its own
    # (smaller partial sums), then the buckets reduced together.
    m = ids.shape[0]
    buckets = -(-m // bucket_size)
    target = (m,) + trailing
    upd = data if tuple(data.shape) == target else L.broadcast_in_dim(
        data, target, tuple(range(len(target) - data.ndim, len(target))))
    which = L.div(L.iota(np.int32, m), L.full((m,), bucket_size, np.int32))
    out = L.full((buckets,) + out_shape, _identity(how, data.dtype), data.dtype)
    out = L.index_scatter(out, upd, [which, idx],
                          (("a", 0), ("a", 1)) + _trailing_spec(trailing), how)
    return _REDUCERS[how](out, (0,))


_segment_eager = compiled_when_eager(_segment, static_argnums=(2, 3, 4, 5))


def _segment_update(name, how, data, segment_ids, num_segments, bucket_size, mode):
    for what, v in (("data", data), ("segment_ids", segment_ids)):
        if isinstance(v, (list, tuple)):
            raise TypeError(f"{name}: {what} must be an array or a scalar, got a "
                            f"{type(v).__name__}; wrap it: jnp.asarray({what})")
    data, ids = to_array(data, name), to_array(segment_ids, name)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name}: segment_ids must be an array of integers, got "
                        f"{ids.dtype}{list(ids.shape)}; convert it, e.g. "
                        "segment_ids.astype(jnp.int32)")
    if data.dtype == np.bool_ and how in ("add", "mul"):
        raise TypeError(f"{name}: data of dtype bool cannot be "
                        f"{'summed' if how == 'add' else 'multiplied'} (JAX's scatter takes "
                        "no bool here either); convert it first, e.g. data.astype(jnp.int32)"
                        + (", or use segment_max for a logical or" if how == "add" else
                           ", or use segment_min for a logical and"))
    clip = _mode_clips(name, mode)
    n = _num_segments(name, ids, num_segments)
    trailing = tuple(data.shape[1:])
    target = tuple(ids.shape) + trailing
    try:
        np.broadcast_shapes(tuple(data.shape), target)
        ok = len(target) >= data.ndim
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(
            f"{name}: data {data.dtype}{list(data.shape)} does not match segment_ids "
            f"{ids.dtype}{list(ids.shape)}: data needs one row per segment id along its "
            f"leading axis (data.shape[0] == segment_ids.shape[0]); the rows "
            f"(data.shape[1:] = {trailing}) are carried into the result of shape "
            f"{(n,) + trailing}")
    if bucket_size is not None:
        bucket_size = _int_or_error(name, "bucket_size", bucket_size)
        if bucket_size <= 0:
            raise ValueError(f"{name}: bucket_size must be a positive int (ids per "
                             f"bucket), got {bucket_size}; or None for no bucketing")
        if ids.ndim != 1:
            raise ShapeError(f"{name}: bucket_size needs 1-D segment_ids, got "
                             f"{ids.dtype}{list(ids.shape)}; reshape data and ids so the "
                             "ids are one vector")
    return _segment_eager(data, ids, n, how, clip, bucket_size)


def _doc(what, identity):
    return (f"The {what} of the rows of ``data`` (its leading axis) in each of "
            f"``num_segments`` segments, ``segment_ids[i]`` naming the segment of "
            f"``data[i]``: an array of shape ``(num_segments,) + data.shape[1:]`` and "
            f"``data``'s dtype. Empty segments hold {identity}. ``num_segments=None`` means "
            "``max(segment_ids) + 1`` (concrete ids only: under ``jit`` pass it as a static "
            "int). Ids outside ``[0, num_segments)`` are dropped; ``mode='clip'`` clamps "
            "them. ``indices_are_sorted`` and ``unique_indices`` are accepted as JAX's "
            "hints (they change no value); ``bucket_size`` reduces each run of that many "
            "ids separately, then the runs (JAX's numerical-stability option); "
            "``out_sharding`` is accepted and ignored (fnx places the result with "
            "``data``).")


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    return _segment_update("segment_sum", "add", data, segment_ids, num_segments,
                           bucket_size, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    return _segment_update("segment_prod", "mul", data, segment_ids, num_segments,
                           bucket_size, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    return _segment_update("segment_max", "max", data, segment_ids, num_segments,
                           bucket_size, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    return _segment_update("segment_min", "min", data, segment_ids, num_segments,
                           bucket_size, mode)


segment_sum.__doc__ = _doc("sum", "0")
segment_prod.__doc__ = _doc("product", "1")
segment_max.__doc__ = _doc("maximum", "the dtype's least value (``-inf`` for inexact "
                           "dtypes, ``False`` for bool); NaN propagates")
segment_min.__doc__ = _doc("minimum", "the dtype's greatest value (``inf`` for inexact "
                           "dtypes, ``True`` for bool); NaN propagates")
