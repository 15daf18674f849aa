"""Reductions and statistics of ``fnx.numpy``.

Accumulation dtypes follow JAX: sums and products of bool and small integers
accumulate in the default int (int32, int64 under x64; unsigned: uint32/uint64), 64-bit stays
64-bit; ``mean``/``var``/``std`` of integers are float. float16 and bfloat16 are computed in
float32 and rounded back once (JAX's ``upcast_f16_for_computation``) by ``sum``, ``prod``
and ``mean`` when no ``dtype`` is given, and by ``var``/``std`` always; the cumulative
reductions, ``max``/``min`` and a ``sum`` with an explicit ``dtype`` are not upcast (as JAX).
"""
from __future__ import annotations

import builtins
import math
from functools import partial

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, to_array
from ..core.numpy_errstate import quiet_call as _quiet_call, quiet_run as _quiet_run
from ..core.trace import EVAL, get_trace
from ..errors import ShapeError
from .util import normalize_axes, normalize_axis, promote


def _check_axis(name, a, axis):
    """An axis out of range raises naming ``name`` (not the reduction it calls)."""
    if axis is not None:
        normalize_axes(name, axis, np.ndim(a) if not isinstance(a, Array) else a.ndim)


def _keep(x, out, axes, keepdims):
    return lax.expand_dims(out, axes) if keepdims and axes else out


def _sum_dtype(dtype, promote_integers=True):
    """The accumulation dtype of a sum or product (JAX's): bool and ints narrower than the
    default int accumulate in the default int (unsigned: the default uint), which follows
    ``jax_enable_x64``; ``promote_integers=False`` (``cumsum``) promotes bool only."""
    if dtype.kind == "b":
        return dtypes.default_int()
    if promote_integers and dtype.kind in "iu":
        d = dtypes.default_uint() if dtype.kind == "u" else dtypes.default_int()
        return d if dtype.itemsize < d.itemsize else dtype
    return dtype


_LOW_FLOATS = tuple(d for d in (np.dtype(np.float16), dtypes.bfloat16) if d is not None)


def _upcast_f16(dtype):
    """float32 for float16 and bfloat16 (JAX's ``_upcast_f16``), else ``dtype``."""
    return np.dtype(np.float32) if dtype in _LOW_FLOATS else dtype


def _upcast_numpy(numpy_fn, v, **kw):
    """``numpy_fn`` of a float16/bfloat16 ``v`` computed in float32, rounded back once."""
    return np.asarray(numpy_fn(v.astype(np.float32), **kw)).astype(v.dtype)


def _fused_sum(op, *args, **sum_kw):
    """``sum(op(*args), **sum_kw)`` as JAX gets it inside its own jit-compiled functions
    (``linalg.norm``, ``average``, ``trapezoid``) on XLA's CPU backend: for bfloat16 the
    last elementwise op feeding the float32 reduction is computed in float32 without
    rounding to bfloat16 first (XLA drops the bfloat16 round trip; float16 keeps it)."""
    xs = [x for x in args if isinstance(x, Array)]
    if xs and dtypes.bfloat16 is not None and builtins.all(
            x.dtype == dtypes.bfloat16 for x in xs):
        args = [lax.convert_element_type(x, np.float32) if isinstance(x, Array) else x
                for x in args]
        return lax.convert_element_type(sum(op(*args), **sum_kw), dtypes.bfloat16)
    return sum(op(*args), **sum_kw)


def _reduction(name, lax_fn, acc_dtype=None, bool_in=False, numpy_fn=None, upcast=False):
    def f(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
          promote_integers=True):
        if out is not None:
            raise TypeError(f"{name}: fnx arrays are immutable; out= is not supported")
        if (numpy_fn is not None and type(a) is Array and dtype is None and initial is None
                and where is None and get_trace() is EVAL):
            v = a._value
            # float reductions: NumPy's result is ours (not over an axis of a 0-d array,
            # which NumPy accepts and JAX refuses)
            low = upcast and v.dtype in _LOW_FLOATS
            if (v.dtype.kind == "f" or low) and v.size and (v.ndim or axis is None):
                # in NumPy's quiet error state, as the primitive's impl: a sum that
                # overflows is inf without a warning; float16/bfloat16 in float32, rounded
                # back once (as the general path below)
                fn = partial(_upcast_numpy, numpy_fn) if low else numpy_fn
                try:
                    try:
                        r = _quiet_run(fn, v, axis=axis, keepdims=keepdims)
                    except RuntimeError:  # the quiet context is busy (another thread)
                        r = _quiet_call(fn, v, axis=axis, keepdims=keepdims)
                    return Array._wrap(r, a.weak_type)
                except (TypeError, ValueError, np.exceptions.AxisError):
                    pass  # the general path explains the error
        elif (numpy_fn is not None and axis is None and dtype is None and initial is None
              and where is None and isinstance(a, Array) and a.dtype.kind == "f"
              and (a.size or name in ("sum", "prod"))):
            # a float tracer reduced over every axis (a loss): nothing to promote or check
            axes = tuple(range(a.ndim))
            if upcast and a.dtype in _LOW_FLOATS:
                r = lax.convert_element_type(
                    lax_fn(lax.convert_element_type(a, np.float32), axes), a.dtype)
            else:
                r = lax_fn(a, axes)
            return _keep(a, r, axes, keepdims)
        (a,) = promote(name, a)
        if bool_in and a.dtype != dtypes.bool_:
            a = lax.ne(a, lax.broadcast_in_dim(Array._wrap(np.zeros((), a.dtype)), a.shape, ()))
        axes = normalize_axes(name, axis, a.ndim)
        if (name in ("max", "min") and initial is None and where is None
                and _count(a.shape, axes) == 0
                and math.prod(d for i, d in enumerate(a.shape) if i not in axes) > 0):
            raise ValueError(f"{name}: zero-size array to reduction operation {name} which "
                             "has no identity; pass initial= (or where=)")
        target = dtypes.canonical(dtype, name) if dtype is not None else (
            (acc_dtype(a.dtype, promote_integers) if acc_dtype is _sum_dtype
             else acc_dtype(a.dtype)) if acc_dtype else a.dtype)
        # JAX's upcast_f16_for_computation: float16/bfloat16 are reduced in float32 (the
        # where-mask and initial too) and rounded back once, unless dtype= is given
        compute = _upcast_f16(target) if upcast and dtype is None else target
        if compute != a.dtype:
            a = lax.convert_element_type(a, compute)
        if where is not None:
            from .elementwise import where as where_
            a = where_(where, a, _identity_for(name, a.dtype))
        if a.dtype == dtypes.bool_ and name in ("sum", "prod"):
            # dtype=bool (JAX): lax's add and mul on bools are "or" and "and"
            out = (lax.reduce_or if name == "sum" else lax.reduce_and)(a, axes)
        else:
            out = lax_fn(a, axes)
        if initial is not None:
            from . import elementwise as ew
            if np.ndim(initial):
                raise ValueError(f"{name}: initial value must be a scalar. Got array of shape "
                                 f"{np.shape(initial)}")
            combine = {"sum": ew.add, "prod": ew.multiply, "max": ew.maximum,
                       "min": ew.minimum}[name]
            out = combine(out, lax.convert_element_type(initial, out.dtype))
        out = _keep(a, out, axes, keepdims)
        return lax.convert_element_type(out, target) if compute != target else out
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"``{name}`` over ``axis`` (None: all axes), as ``numpy.{name}``." + (
        " float16/bfloat16 are computed in float32 and rounded back once unless ``dtype`` "
        "is given (JAX's)." if upcast else "") + (
        " Small integers and bools accumulate in the default int unless "
        "``promote_integers=False`` (JAX's)." if acc_dtype is _sum_dtype else
        " (``promote_integers`` is accepted for a uniform signature and unused.)")
    return f


def _identity_for(name, dtype):
    if name == "sum" or name == "any":
        return np.zeros((), dtype)[()]
    if name == "prod" or name == "all":
        return np.ones((), dtype)[()]
    if dtypes.is_inexact(dtype):   # bfloat16's NumPy kind is "V"; complex: -inf+0j, inf+0j
        return np.array(-np.inf if name == "max" else np.inf, dtype)[()]
    if dtype == dtypes.bool_:
        return np.array(name != "max", dtype)[()]
    info = np.iinfo(dtype)
    return np.array(info.min if name == "max" else info.max, dtype)[()]


sum = _reduction("sum", lax.reduce_sum, _sum_dtype, numpy_fn=np.sum, upcast=True)
prod = _reduction("prod", lax.reduce_prod, _sum_dtype, numpy_fn=np.prod, upcast=True)
max = amax = _reduction("max", lax.reduce_max, numpy_fn=np.max)
min = amin = _reduction("min", lax.reduce_min, numpy_fn=np.min)
_any = _reduction("any", lax.reduce_or, bool_in=True)
_all = _reduction("all", lax.reduce_and, bool_in=True)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    return _any(a, axis=axis, out=out, keepdims=keepdims, where=where)


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    return _all(a, axis=axis, out=out, keepdims=keepdims, where=where)


def _count(shape, axes):
    return math.prod(shape[i] for i in axes)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean; integers average in float (float64 for 64-bit ints). Without
    ``dtype``, float16/bfloat16 are summed and divided in float32 and rounded once (JAX's)."""
    (a,) = promote("mean", a)
    axes = normalize_axes("mean", axis, a.ndim)
    result = dtypes.to_inexact(a.dtype) if dtype is None else dtypes.canonical(dtype, "mean")
    compute = _upcast_f16(result) if dtype is None else result
    from .elementwise import true_divide
    total = sum(a, axis=axes, dtype=compute, keepdims=keepdims, where=where)
    if where is None:
        res = true_divide(total, _count(a.shape, axes))
    else:
        cnt = sum(broadcast_where(where, a.shape), axis=axes, dtype=total.dtype,
                  keepdims=keepdims)
        res = true_divide(total, cnt)
    return lax.convert_element_type(res, result) if res.dtype != result else res


_mean = mean


def broadcast_where(where, shape):
    from .util import broadcast_to_shape
    w = to_array(where)
    return broadcast_to_shape(w if w.dtype == dtypes.bool_ else w != 0, shape)


def _var_dtypes(a_dtype, dtype):
    """``(computation, result)`` dtypes of ``var``/``nanvar`` (JAX's ``_var_promote_types``):
    the result is ``dtype``, else the real dtype of ``a``'s inexact one; the computation is
    that in float32 where it is float16/bfloat16 -- even for an explicit ``dtype``."""
    if dtype is not None:
        result = compute = dtypes.canonical(dtype, "var")
    elif not dtypes.is_inexact(a_dtype):
        result = compute = dtypes.to_inexact(a_dtype)
    else:
        compute = a_dtype
        result = np.empty(0, a_dtype).real.dtype
    return _upcast_f16(compute), np.dtype(result)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None, mean=None):
    """Variance (``ddof``/``correction`` subtract from the count, as NumPy; no degrees of
    freedom left gives NaN, as JAX); ``mean``: a precomputed mean (with the reduced axes
    kept, as NumPy's ``keepdims=True`` gives). float16/bfloat16 are computed in float32
    and rounded once (JAX's)."""
    from . import elementwise as ew
    if correction is not None:
        if not isinstance(ddof, int) or ddof != 0:   # JAX: one or the other
            raise ValueError("var: ddof and correction can't be provided simultaneously.")
        ddof = correction
    (a,) = promote("var", a)
    axes = normalize_axes("var", axis, a.ndim)
    compute, result = _var_dtypes(a.dtype, dtype)
    if a.dtype != compute:
        a = lax.convert_element_type(a, compute)
    if mean is None:
        m = _mean(a, axis=axes, dtype=compute, keepdims=True, where=where)
    else:
        m = to_array(mean, "var")
        want = tuple(1 if i in axes else d for i, d in enumerate(a.shape))
        if m.shape != want and m.ndim != 0:
            raise ShapeError(f"var: mean has shape {m.shape}; for a of shape {a.shape} "
                             f"reduced over {axes} it must be {want} (keepdims=True)")
        if m.dtype != compute:
            m = lax.convert_element_type(m, compute)
    centered = ew.subtract(a, m)
    sq = ew.real(ew.multiply(centered, ew.conj(centered))) if centered.dtype.kind == "c" \
        else ew.square(centered)
    if where is None:
        n = _count(a.shape, axes) - ddof
        total = sum(sq, axis=axes, keepdims=keepdims)
        if n > 0:
            res = ew.true_divide(total, n)
        else:  # JAX: NaN where no degrees of freedom are left (NumPy: inf, a warning)
            res = lax.broadcast_in_dim(Array._wrap(np.array(np.nan, total.dtype)[()]),
                                       total.shape, ())
    else:
        total = sum(sq, axis=axes, keepdims=keepdims, where=where)
        cnt = sum(broadcast_where(where, a.shape), axis=axes, dtype=total.dtype,
                  keepdims=keepdims)
        dof = ew.subtract(cnt, ddof)
        res = ew.where(ew.greater(dof, 0), ew.true_divide(total, dof),
                       lax.convert_element_type(np.nan, total.dtype))
    return lax.convert_element_type(res, result) if res.dtype != result else res


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None, mean=None):
    from .elementwise import sqrt
    _check_axis("std", a, axis)
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction,
                    mean=mean))


def argmax(a, axis=None, out=None, keepdims=False):
    return _arg("argmax", lax.argmax, a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=False):
    return _arg("argmin", lax.argmin, a, axis, keepdims)


def _arg(name, lax_fn, a, axis, keepdims):
    (a,) = promote(name, a)
    if axis is None and a.size == 0:
        raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
    if axis is None:
        flat = lax.reshape(a, (a.size,))
        out = lax_fn(flat, 0, dtypes.default_int())
        return lax.reshape(out, (1,) * a.ndim) if keepdims else out
    ax = normalize_axis(name, axis, a.ndim)
    if a.shape[ax] == 0:
        raise ValueError(f"{name}: attempt to get {name} of an empty sequence (axis {ax} of "
                         f"shape {a.shape})")
    out = lax_fn(a, ax, dtypes.default_int())
    return lax.expand_dims(out, (ax,)) if keepdims else out


def ptp(a, axis=None, keepdims=False):
    from .elementwise import subtract
    _check_axis("ptp", a, axis)
    return subtract(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    from .elementwise import not_equal
    _check_axis("count_nonzero", a, axis)
    return sum(not_equal(a, 0), axis=axis, keepdims=keepdims)


def _scan(lax_fn, a, ax, target):
    """``lax_fn`` (cumsum, cumprod) of ``a`` along ``ax`` in dtype ``target``; a bool
    ``target`` accumulates ``a != 0`` as integers and casts back, as JAX (lax's scans are
    numeric)."""
    if target == dtypes.bool_:
        if a.dtype != dtypes.bool_:
            a = lax.ne(a, lax.convert_element_type(0, a.dtype))
        a = lax.convert_element_type(a, _sum_dtype(a.dtype, False))
        return lax.convert_element_type(lax_fn(a, ax), dtypes.bool_)
    if target != a.dtype:
        a = lax.convert_element_type(a, target)
    return lax_fn(a, ax)


def _cumulative(name, lax_fn, acc=True):
    def f(a, axis=None, dtype=None, out=None):
        (a,) = promote(name, a)
        if axis is None:
            a = lax.reshape(a, (a.size,))
            axis = 0
        ax = normalize_axis(name, axis, a.ndim)
        target = dtypes.canonical(dtype, name) if dtype is not None else (
            _sum_dtype(a.dtype, False) if acc else a.dtype)
        return _scan(lax_fn, a, ax, target)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"``numpy.{name}`` (``axis=None`` flattens first)."
    return f


cumsum = _cumulative("cumsum", lax.cumsum)
cumprod = _cumulative("cumprod", lax.cumprod)


def _cumulative_api(name, lax_fn, initial):
    def f(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if out is not None:
            raise TypeError(f"{name}: fnx arrays are immutable; out= is not supported")
        (x,) = promote(name, x)
        if axis is None:
            if x.ndim != 1:
                raise ShapeError(f"{name}: axis must be given for an array of rank {x.ndim} "
                                 "(the Array API flattens nothing)")
            axis = 0
        ax = normalize_axis(name, axis, x.ndim)
        target = dtypes.canonical(dtype, name) if dtype is not None else _sum_dtype(x.dtype)
        res = _scan(lax_fn, x, ax, target)
        if include_initial:
            config = [(0, 0, 0)] * x.ndim
            config[ax] = (1, 0, 0)
            res = lax.pad(res, np.array(initial, target), config)
        return res
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Array API ``{name}`` (2023.12): along ``axis`` (needed above rank 1); "
                 f"``include_initial``: the output starts with the identity ({initial}).")
    return f


cumulative_sum = _cumulative_api("cumulative_sum", lax.cumsum, 0)
cumulative_prod = _cumulative_api("cumulative_prod", lax.cumprod, 1)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    from . import elementwise as ew
    (a,) = promote("average", a)
    _check_axis("average", a, axis)
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        wsum = lax.convert_element_type(
            _count(a.shape, normalize_axes("average", axis, a.ndim)), avg.dtype)
        if returned:
            from .creation import full_like
            return avg, full_like(avg, wsum)
        return avg
    a, w = promote("average", a, weights)
    if w.shape != a.shape:
        # as JAX: weights shaped as a's axes along ``axis``, in the order ``axis`` names them
        axes = normalize_axes("average", axis, a.ndim) if axis is not None else None
        if axes is None or w.shape != tuple(a.shape[d] for d in axes):
            raise ShapeError(f"average: weights of shape {w.shape} differ from a's {a.shape}; "
                             "weights of another shape need an axis, and a's shape along it")
        w = lax.broadcast_in_dim(lax.transpose(w, tuple(int(i) for i in np.argsort(axes))),
                                 a.shape, tuple(sorted(axes)))
    if not dtypes.is_inexact(a.dtype):
        a, w = promote("average", a, w, to_inexact=True)
    wsum = sum(w, axis=axis, keepdims=keepdims)
    avg = ew.true_divide(_fused_sum(ew.multiply, a, w, axis=axis, keepdims=keepdims), wsum)
    if returned:
        from .manipulation import broadcast_to
        return avg, broadcast_to(wsum, avg.shape)
    return avg


# ``from .reductions import *`` in fnx/numpy/__init__.py exports exactly the functions defined
# here (not the modules and helpers this file imports, which would shadow real ones).
__all__ = sorted(_n for _n, _v in list(globals().items())
                 if not _n.startswith("_") and callable(_v)
                 and getattr(_v, "__module__", None) == __name__ and _n != "broadcast_where")
