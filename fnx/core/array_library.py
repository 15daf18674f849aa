"""Array-library-neutral helpers for primitive impls, so one impl runs on host NumPy
arrays and on device buffers (CuPy arrays, or the CPU emulation's) alike.

NumPy functions and ufuncs applied to a device buffer dispatch to its library through
NumPy's protocols (``__array_function__``, ``__array_ufunc__``). What does not dispatch --
allocating a new host array (``np.zeros(shape)``, ``np.full``, ``np.empty``), converting
(``np.asarray``, ``np.array(x, copy=True)``), ``ufunc.at`` on a CuPy array -- goes through
these helpers instead: each keeps NumPy's own call (and so its speed and bits) for host
values and does the library-neutral thing for a device buffer (allocating like it, or
calling its library). A device buffer is an array that is not NumPy's but takes part in
NumPy's dispatch (it defines ``__array_function__``).

An impl that still needs the host for a device operand raises ``TypeError``, as CuPy does
for an implicit conversion; the CUDA backend then runs it on host copies
(``CudaBackend.host_fallbacks`` counts those).
"""
from __future__ import annotations

import numpy as np

__all__ = ["is_device", "as_array", "ascontiguous", "copy", "empty", "zeros", "full",
           "arange", "eye", "matmul", "register_matmul", "ufunc_at"]

_ndarray = np.ndarray
_device_types = {}


def is_device(x) -> bool:
    """Whether ``x`` is a device buffer (not a NumPy array or scalar, nor a Python value)."""
    t = type(x)
    if t is _ndarray:
        return False
    known = _device_types.get(t)
    if known is None:
        known = _device_types[t] = (not issubclass(t, (_ndarray, np.generic))
                                    and hasattr(t, "__array_function__"))
    return known


def as_array(x):
    """``np.asarray(x)`` for host values; a device buffer as it is."""
    return x if is_device(x) else np.asarray(x)


def ascontiguous(x, dtype=None):
    """``np.ascontiguousarray(x, dtype)`` for host values; a device buffer as it is when
    C-contiguous (and of ``dtype``), else a C-contiguous copy (cast to ``dtype``)."""
    if is_device(x):
        if dtype is not None and x.dtype != dtype:
            return x.astype(dtype, order="C")
        return x if x.flags.c_contiguous else x.copy(order="C")
    return np.ascontiguousarray(x, dtype)


def copy(x):
    """A new array equal to ``x``: ``np.array(x, copy=True)`` for host values (keeping its
    layout), ``x.copy()`` for a device buffer."""
    return x.copy() if is_device(x) else np.array(x, copy=True)


def empty(like, shape, dtype):
    """``np.empty(shape, dtype)``, on the device of ``like`` when it is a device buffer."""
    if is_device(like):
        return np.empty_like(like, shape=shape, dtype=dtype)
    return np.empty(shape, dtype)


def zeros(like, shape, dtype):
    """``np.zeros(shape, dtype)``, on the device of ``like`` when it is a device buffer."""
    if is_device(like):
        return np.zeros_like(like, shape=shape, dtype=dtype)
    return np.zeros(shape, dtype)


def full(like, shape, fill_value, dtype):
    """``np.full(shape, fill_value, dtype)``, on the device of ``like`` when it is a device
    buffer (``fill_value``: a Python or NumPy scalar, or a 0-d array of ``like``'s kind)."""
    if is_device(like):
        out = np.empty_like(like, shape=shape, dtype=dtype)
        out[...] = fill_value
        return out
    return np.full(shape, fill_value, dtype)


def arange(like, n, dtype=None):
    """``np.arange(n, dtype=dtype)``, on the device of ``like`` when it is a device buffer."""
    if is_device(like):
        return np.arange(n, dtype=dtype, like=like)
    return np.arange(n, dtype=dtype)


def eye(like, n, dtype):
    """``np.eye(n, dtype=dtype)``, on the device of ``like`` when it is a device buffer."""
    if is_device(like):  # (CuPy's eye takes no like=)
        out = zeros(like, (n, n), dtype)
        np.fill_diagonal(out, 1)
        return out
    return np.eye(n, dtype=dtype)


_device_matmul = {}  # device buffer type -> its backend's matmul(a, b, precision)


def register_matmul(buffer_type, fn):
    """Make ``matmul`` of two ``buffer_type`` buffers call ``fn(a, b, precision)`` (a
    backend's own GEMM: the CUDA backend's calls cuBLAS itself, which CUDA graphs can
    capture)."""
    _device_matmul[buffer_type] = fn


def matmul(a, b, precision=None):
    """``np.matmul(a, b)``; for two device buffers of one type, that backend's registered
    matmul where there is one (``precision``: the reduced precision it may use, see
    ``fnx.lax.reduced_precision``; host products compute in full precision)."""
    t = type(a)
    if t is not _ndarray and t is type(b):
        fn = _device_matmul.get(t)
        if fn is not None:
            return fn(a, b, precision)
    return np.matmul(a, b)


# The ufuncs whose ``at`` CuPy implements (atomic scatters), for which dtypes (as CuPy 14
# ran them on an H200); narrower integer and bool operands scatter through a wider copy
# (exact: adds wrap alike modulo the narrow width, max/min pick an operand); other pairs
# (complex, multiply, ...) raise TypeError, so the impl runs on the host, as it must on a
# real device. CuPy's float max/min scatters skip NaN updates where NumPy's propagate
# them: those places are set to NaN afterwards. NumPy's protocols do not reach CuPy's
# ``ufunc.at``: it is called on CuPy's own ufunc.
_CUPY_AT = {
    "add": frozenset("float16 float32 float64 int32 uint32 int64 uint64".split()),
    "maximum": frozenset("float32 float64 int32 uint32 int64 uint64".split()),
    "minimum": frozenset("float32 float64 int32 uint32 int64 uint64".split()),
}
_WIDER = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32",
          "uint16": "uint32"}
_WIDER_EXTREME = {**_WIDER, "float16": "float32"}


def ufunc_at(ufunc, out, key, values):
    """``ufunc.at(out, key, values)``: in place, unbuffered (repeated indices each apply).
    Host arrays go through NumPy; device buffers through the scatters CuPy has (see
    ``_CUPY_AT``; ``TypeError`` for the others, as on a real device)."""
    if not is_device(out):
        ufunc.at(out, key, values)
        return
    name, dt = ufunc.__name__, out.dtype.name
    if dt in _CUPY_AT.get(name, ()):
        _device_at(name, out, key, values)
        if name != "add" and out.dtype.kind == "f":
            nan = np.isnan(values)
            if nan.any():  # (one scalar read)
                hit = zeros(out, out.shape, np.int32)
                _device_at("add", hit, key, nan.astype(np.int32))
                out[hit > 0] = np.nan
        return
    wide = (_WIDER if name == "add" else _WIDER_EXTREME if name in _CUPY_AT else {}).get(dt)
    if wide is None:
        raise TypeError(f"{name}.at of a {dt} device array: CuPy has no scatter for it "
                        "(it runs on the host)")
    acc = out.astype(wide)  # (float16 max/min: through float32, NaN fixed up there)
    ufunc_at(getattr(np, name), acc, key, values.astype(wide))
    out[...] = acc.astype(dt)


def _device_at(name, out, key, values):
    if type(out).__module__.startswith("cupy"):
        import cupy
        getattr(cupy, name).at(out, key, values)
    else:  # another device library (the emulation): its own namespace's scatter
        getattr(out.__array_namespace__(), name).at(out, key, values)
