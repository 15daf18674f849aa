"""The NumPy backend's eager shortcuts: ``fnx.numpy``'s common elementwise functions on
concrete Arrays holding NumPy buffers, computed by the ufunc or the impl straight away
(no promotion, no primitive dispatch), in NumPy's quiet error state as the primitives'
impls run, so an eager call warns no more than its primitive would.

``fnx.numpy`` builds each function from its general path (``slow``: promotion,
broadcasting, a lax primitive) and the shortcut here: the shortcut is taken only with no
transformation active and operands whose NumPy result dtype is already fnx's (equal
dtypes, or an array with a Python scalar of a compatible kind); everything else takes
``slow``. Under a transformation, operands that need no promotion bind the primitive
directly.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.array import Array, new_array
from ..core.numpy_errstate import quiet_call, quiet_run
from ..core.backend import DEVICE_BACKENDS, backend_for, is_host_buffer, place
from ..core.primitive import ShapeDtypeStruct
from ..core.trace import EVAL, get_trace

__all__ = ["fast_binary", "fast_unary"]

_FLOAT_KINDS = "f"
# Python ints outside int32 are int64 in the lattice: they take the promotion path
_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


def _on_device(x, y):
    """Whether ``x`` or ``y`` is a concrete Array whose buffer is not a NumPy one (only
    asked when a device backend is registered)."""
    return any(type(a) is Array and not is_host_buffer(a._value) for a in (x, y))


_SOLE_DEVICE = {}  # device buffer type -> its backend, when that backend has one device


def _sole_device_backend(buffer):
    """The backend of a device ``buffer`` when that backend has a single device (so two of
    its buffers are on one device: nothing to check), else None; cached per buffer type."""
    t = type(buffer)
    backend = _SOLE_DEVICE.get(t, False)
    if backend is False:
        b = backend_for((buffer,))
        backend = _SOLE_DEVICE[t] = b if b in DEVICE_BACKENDS and len(b.devices()) == 1 else None
    return backend


def _device_binary(name, prim, x, y, out_bool):
    """``prim(x, y)`` for two concrete Arrays of one shape and dtype, at least one on a
    device: straight to the device's backend (placement checked -- nothing to check for
    two buffers of a backend with one device; no promotion, no dispatch through the
    trace)."""
    xv, yv = x._value, y._value
    backend = _sole_device_backend(xv) if type(xv) is type(yv) else None
    if backend is not None:
        vals = (xv, yv)
    else:
        backend, vals = place(name, (x, y), (xv, yv))
    v = vals[0]
    weak = not out_bool and x.weak_type and y.weak_type
    aval = ShapeDtypeStruct(v.shape, np.dtype(np.bool_) if out_bool else v.dtype, weak)
    out = new_array(Array)
    out._value = backend.eager(prim, vals, {}, aval)
    out.weak_type = weak
    return out


def _device_unary(prim, x, slow):
    """``prim(x)`` for a concrete float Array on a device, straight to its backend (every
    unary primitive maps floats to their own dtype); anything else takes ``slow``."""
    if type(x) is not Array or get_trace() is not EVAL or x._value.dtype.kind != "f":
        return slow(x)
    v = x._value
    backend = _sole_device_backend(v)
    if backend is None:
        backend, (v,) = place(prim.name, (x,), (v,))
    out = new_array(Array)
    out._value = backend.eager(prim, [v], {}, ShapeDtypeStruct(v.shape, v.dtype, x.weak_type))
    out.weak_type = x.weak_type
    return out


def fast_binary(name, slow, ufunc, kinds, prim, out_bool=False, quiet=True,
                rank_check=(False,)):
    """``slow`` with shortcuts when nothing needs promoting or broadcasting: eagerly
    straight to ``ufunc``, under a transformation straight to ``prim``.

    The ufunc runs in NumPy's quiet error state, as the primitive's impl does: no
    floating-point warnings (overflow, ``inf - inf``; a Python scalar too large for the
    array's dtype). ``quiet_run`` costs about 20 ns; where another thread holds its
    context, ``quiet_call``. ``quiet=False`` (comparisons, ``maximum``/``minimum``,
    bitwise ops, which never warn on two arrays of one dtype and whose primitives call
    the bare ufunc) skips it for two arrays. ``rank_check[0]``: two arrays of different
    ranks take ``slow`` (``jax_numpy_rank_promotion``; a list the caller keeps current)."""
    ok_dtypes = frozenset(d for d in dtypes.SUPPORTED if d.kind in kinds)
    bind = prim.bind
    traced_kinds = kinds.replace("b", "")  # bool add/multiply are or/and

    def f(x, y, /):
        if DEVICE_BACKENDS and _on_device(x, y):  # device buffers: their backend's eager
            if type(x) is Array and type(y) is Array and get_trace() is EVAL:
                xv, yv = x._value, y._value
                dt = xv.dtype
                if dt is yv.dtype and xv.shape == yv.shape and dt.kind in traced_kinds:
                    return _device_binary(name, prim, x, y, out_bool)
            return slow(x, y)
        tx, ty = type(x), type(y)
        if tx is Array and ty is Array:  # the hottest case first: two concrete arrays
            xv, yv = x._value, y._value
            dt = xv.dtype
            if dt is yv.dtype and dt in ok_dtypes and get_trace() is EVAL and not (
                    rank_check[0] and xv.ndim != yv.ndim):
                try:
                    r = quiet_run(ufunc, xv, yv) if quiet else ufunc(xv, yv)
                except ValueError:
                    return slow(x, y)  # shapes do not broadcast: the slow path explains
                except RuntimeError:  # the quiet context is busy (another thread)
                    try:
                        r = quiet_call(ufunc, xv, yv)
                    except ValueError:
                        return slow(x, y)
                out = new_array(Array)
                out._value = r
                out.weak_type = not out_bool and x.weak_type and y.weak_type
                return out
        if get_trace() is EVAL:  # an array with a Python scalar of a compatible kind
            if tx is Array:
                xv = x._value
                if (ty is float and xv.dtype.kind in _FLOAT_KINDS) or (
                        ty is int and xv.dtype.kind in "iuf" and xv.dtype.kind in kinds
                        and _INT32_MIN <= y <= _INT32_MAX):
                    try:
                        r = quiet_run(ufunc, xv, y)
                    except RuntimeError:
                        r = quiet_call(ufunc, xv, y)
                    except OverflowError:  # int8 + 300: JAX wraps 300 (promote does)
                        return slow(x, y)
                    out = new_array(Array)
                    out._value = r
                    out.weak_type = not out_bool and x.weak_type
                    return out
            elif tx is float or tx is int:
                if ty is Array:
                    yv = y._value
                    if (tx is float and yv.dtype.kind in _FLOAT_KINDS) or (
                            tx is int and yv.dtype.kind in "iuf" and yv.dtype.kind in kinds
                            and _INT32_MIN <= x <= _INT32_MAX):
                        try:
                            r = quiet_run(ufunc, x, yv)
                        except RuntimeError:
                            r = quiet_call(ufunc, x, yv)
                        except OverflowError:  # 300 + int8: JAX wraps 300
                            return slow(x, y)
                        out = new_array(Array)
                        out._value = r
                        out.weak_type = not out_bool and y.weak_type
                        return out
        elif isinstance(x, Array):  # tracers of one dtype, equal shapes or a rank-0 side
            if isinstance(y, Array):
                dt = x.dtype
                if dt == y.dtype and dt.kind in traced_kinds and (
                        x.shape == y.shape or not x.ndim or not y.ndim):
                    return bind(x, y)
            elif (ty is float or ty is int) and x.dtype.kind == "f":
                # a scalar too large for the dtype is inf (without NumPy's cast warning)
                try:
                    s = quiet_run(np.array, y, x.dtype)
                except RuntimeError:
                    s = quiet_call(np.array, y, x.dtype)
                return bind(x, Array._wrap(s[()], True))
        elif (tx is float or tx is int) and isinstance(y, Array) and y.dtype.kind == "f":
            try:
                s = quiet_run(np.array, x, y.dtype)
            except RuntimeError:
                s = quiet_call(np.array, x, y.dtype)
            return bind(Array._wrap(s[()], True), y)
        return slow(x, y)
    f.__name__ = f.__qualname__ = name
    f.__module__ = slow.__module__  # the function belongs to the library that built it
    f.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting and JAX type promotion."
    return f


def fast_unary(prim, slow):
    """``slow`` (``x -> result``) with a shortcut for a concrete float Array: ``prim``'s
    impl on its buffer (every unary primitive maps floats to their own dtype); a quiet
    impl's raw function runs in the quiet state here, which spares the wrapper's call
    frame (about 0.1 us of a 0.5 us op)."""
    impl = prim.impl
    raw = getattr(impl, "raw", None)
    if raw is not None:
        def f(x, /):
            if DEVICE_BACKENDS and _on_device(x, x):
                return _device_unary(prim, x, slow)
            if type(x) is Array and get_trace() is EVAL:
                v = x._value
                if v.dtype.kind == "f":
                    try:
                        r = quiet_run(raw, v)
                    except RuntimeError:  # busy quiet context, or raw's own error
                        r = quiet_call(raw, v)
                    out = new_array(Array)
                    out._value = r
                    out.weak_type = x.weak_type
                    return out
            return slow(x)
    else:
        def f(x, /):
            if DEVICE_BACKENDS and _on_device(x, x):
                return _device_unary(prim, x, slow)
            if type(x) is Array and get_trace() is EVAL:
                v = x._value
                if v.dtype.kind == "f":
                    out = new_array(Array)
                    out._value = impl(v)
                    out.weak_type = x.weak_type
                    return out
            return slow(x)
    f.__name__ = f.__qualname__ = getattr(slow, "__name__", prim.name)
    f.__module__ = slow.__module__
    f.__doc__ = slow.__doc__
    return f
