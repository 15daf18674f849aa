"""Array creation. Constant arrays are broadcasts of a scalar and ranges are
``iota``, so under ``jit`` they are recorded as small equations, never baked
into the IR as large constants."""
from __future__ import annotations

import math

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..lax.shape import check_shape
from .util import concrete_int, placed


def _shape(shape, name="shape"):
    if isinstance(shape, (int, np.integer)) or (isinstance(shape, Array) and shape.ndim == 0):
        shape = (shape,)
    return tuple(concrete_int(name, d, "a dimension") for d in shape)


def _python_only(obj):
    if isinstance(obj, (list, tuple)):
        return all(_python_only(o) for o in obj)
    return type(obj) in (bool, int, float, complex)


def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _leaves(o)
    else:
        yield obj


def _nested(obj, dtype):
    """A nested list/tuple with Arrays in it, as one Array of ``dtype`` (stacked)."""
    if isinstance(obj, (list, tuple)):
        from .manipulation import stack
        if not obj:
            return Array._wrap(np.zeros((0,), dtype))
        return stack([_nested(o, dtype) for o in obj])
    if isinstance(obj, Array):
        return lax.convert_element_type(obj, dtype)
    return Array._wrap(np.array(obj, dtype=dtype))


@placed("array")
def array(object, dtype=None, copy=True, order=None, ndmin=0, *, device=None):
    """An Array from array-likes; nested lists of Arrays (or tracers) are stacked.
    64-bit data and dtypes narrow to 32 bits unless ``jax_enable_x64`` is on. ``device``:
    where to place it (a device or a sharding)."""
    return _array("array", object, dtype, ndmin)


def _array(name, object, dtype, ndmin=0):
    if object is None or (isinstance(object, (list, tuple)) and not _python_only(object)
                          and any(v is None for v in _leaves(object))):
        # JAX raises ValueError here too; NumPy would make an object array (or NaN)
        raise ValueError(
            f"{name}: None is not a valid value for an array"
            f"{'' if object is None else ' element'}. Use fnx.numpy.nan for a missing float "
            "value, or test an optional argument with `is None` before converting it.")
    if isinstance(object, range):
        object = list(object)
    elif not isinstance(object, (Array, np.ndarray, np.generic, list, tuple, int, float,
                                 complex, bool)) and not hasattr(object, "__array__"):
        try:   # a buffer (array.array, bytes-like of numbers): NumPy reads it, as JAX does
            object = np.asarray(memoryview(object))
        except TypeError:
            pass
    dtype = None if dtype is None else dtypes.canonical(dtype, name)
    if dtype is not None and _python_values(object):
        # Python numbers with an explicit dtype convert once, straight to it (through the
        # default float32 first, 0.1 as float64 would be 0.10000000149011612)
        out = Array._wrap(np.array(object, dtype=dtype))
    elif isinstance(object, Array):
        out = object
    elif dtype is not None and isinstance(object, (np.ndarray, np.generic)) and not (
            object.dtype.kind == "c" and dtype.kind != "c"):
        out = Array._wrap(np.array(object, dtype=dtype))  # straight to the requested dtype
    elif isinstance(object, (list, tuple)) and object and not _python_only(object):
        # Arrays, NumPy arrays or scalars inside: one dtype for all leaves by the
        # lattice (Python scalars are weak, so [x_f16, 2.0] stays float16); like any
        # list, the result is strongly typed.
        leaves = list(_leaves(object))
        dt = dtype or dtypes.promote_pairs(dtypes.dtype_and_weak(v) for v in leaves)[0]
        if dt in dtypes.NARROW:  # a NumPy float64 (or int64...) among the leaves
            dt = dtypes.canonical(dt, name)
        if any(isinstance(v, Tracer) for v in leaves):
            out = _nested(object, dt)  # traced values: stacked, recorded under jit
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                out = Array._wrap(np.array(object, dtype=dt))
    elif isinstance(object, (list, tuple)) and _python_only(object) and dtype is None:
        v = np.array(object)
        if v.dtype == np.float64:
            v = v.astype(dtypes.default_float())
        elif v.dtype == np.complex128:
            v = v.astype(dtypes.default_complex())
        elif v.dtype == np.int64 and not dtypes.x64_enabled():
            if v.size and not (v.min() >= -2**31 and v.max() < 2**31):
                bad = v.max() if v.max() >= 2**31 else v.min()
                dtypes.check_python_int(int(bad), dtypes.int32, name)
            v = v.astype(dtypes.int32)
        out = Array._wrap(v)
    elif isinstance(object, (list, tuple)) and not object and dtype is None:
        out = Array._wrap(np.array(object, dtype=dtypes.default_float()))
    else:
        out = to_array(object, name)
    if dtype is not None and (out.dtype != dtype or out.weak_type):
        out = lax.convert_element_type(out, dtype)  # an explicit dtype is a strong type
    if ndmin > out.ndim:
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


@placed('asarray')
def asarray(a, dtype=None, order=None, *, copy=None, device=None):
    """An Array from an array-like. fnx arrays are immutable, so a writable source (a
    NumPy array) is always copied, whatever ``copy`` says."""
    if type(a) is Array and (dtype is None or dtypes.canonical(dtype, "asarray") == a.dtype):
        return a
    return _array("asarray", a, dtype)


@placed('from_dlpack')
def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from a DLPack producer on the CPU. The buffer is copied unless
    ``copy=False``, which shares it read-only (the producer must then not write it)."""
    if isinstance(x, Array) and not copy:
        return x
    v = np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x)
    if copy is False:
        v = v.view()
        v.flags.writeable = False
        if v.dtype not in dtypes.SUPPORTED_SET:
            raise BufferError(f"from_dlpack: dtype {v.dtype} is not supported by fnx, "
                              "so copy=False is impossible")
        return Array._wrap(v)
    return Array(v)


def _python_values(x):
    """Python scalars, or (nested) lists/tuples of nothing else."""
    return dtypes.python_scalar_dtype(x) is not None or (
        isinstance(x, (list, tuple)) and _python_only(x))


@placed('full')
def full(shape, fill_value, dtype=None, *, device=None):
    shape = _shape(shape, "full")
    dtype = None if dtype is None else dtypes.canonical(dtype, "full")
    if dtype is not None and _python_values(fill_value):
        fill = Array._wrap(np.array(fill_value, dtype))
    else:
        fill = to_array(fill_value, "full")
    if dtype is not None and (fill.dtype != dtype or fill.weak_type):
        fill = lax.convert_element_type(fill, dtype)
    check_shape("full", shape, fill.dtype)  # sizes >= 0, and not more than memory can hold
    # without a dtype a Python scalar fill stays weakly typed, as in JAX (full(2, 1.0) + x_f16
    # is float16)
    return lax.broadcast_in_dim(fill, shape, tuple(range(len(shape) - fill.ndim, len(shape))))


def _const(value, shape, dtype, weak_type=False, name="zeros"):
    dtype = dtypes.default_float() if dtype is None else dtypes.canonical(dtype, name)
    shape = _shape(shape, name)
    check_shape(name, shape, dtype)  # sizes >= 0, and not more than memory can hold
    return lax.broadcast_in_dim(Array._wrap(np.array(value, dtype)[()], weak_type), shape, ())


@placed('zeros')
def zeros(shape, dtype=None, *, device=None):
    return _const(0, shape, dtype)


@placed('ones')
def ones(shape, dtype=None, *, device=None):
    return _const(1, shape, dtype, name="ones")


@placed('empty')
def empty(shape, dtype=None, *, device=None):
    return _const(0, shape, dtype, name="empty")


def _like(a, dtype, shape, name="*_like"):
    """(dtype, shape, weak_type) of an ``*_like`` result: a's, unless given."""
    a = to_array(a) if not isinstance(a, Array) else a
    return (a.dtype if dtype is None else dtypes.canonical(dtype, name),
            a.shape if shape is None else _shape(shape, name),
            a.weak_type and dtype is None)


@placed('zeros_like', like=True)
def zeros_like(a, dtype=None, shape=None, *, device=None):
    dt, sh, weak = _like(a, dtype, shape, "zeros_like")
    return _const(0, sh, dt, weak, "zeros_like")


@placed('ones_like', like=True)
def ones_like(a, dtype=None, shape=None, *, device=None):
    dt, sh, weak = _like(a, dtype, shape, "ones_like")
    return _const(1, sh, dt, weak, "ones_like")


def empty_like(a, dtype=None, shape=None, *, device=None):
    return zeros_like(a, dtype, shape, device=device)  # placed by zeros_like


@placed('full_like', like=True)
def full_like(a, fill_value, dtype=None, shape=None, *, device=None):
    dt, sh, weak = _like(a, dtype, shape, "full_like")
    check_shape("full_like", sh, dt)
    out = full(sh, fill_value, dt)
    return lax.convert_element_type(out, dt, weak) if weak else out


@placed('arange')
def arange(start, stop=None, step=None, dtype=None, *, device=None):
    """``numpy.arange`` with static bounds. The dtype is the promotion of the bounds:
    Python ints give the default int, floats the default float (int32/float32, or
    int64/float64 under ``jax_enable_x64``)."""
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            concrete_int("arange", v, "start/stop/step")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    vals = [v for v in (start, stop, step)]
    if dtype is None:
        dtype = dtypes.result_type(*vals)
        if dtype == dtypes.bool_:
            dtype = dtypes.default_int()
    dtype = dtypes.canonical(dtype, "arange")
    start, stop, step = (v.item() if isinstance(v, Array) else v for v in vals)
    if step == 0:
        raise ValueError("arange: step must not be zero")
    n = max(0, math.ceil((stop - start) / step))
    if dtype.kind in "iu" and all(float(v).is_integer() for v in (start, step)):
        r = lax.iota(dtype, n)
        if step != 1:
            r = lax.mul(r, int(step))
        return lax.add(r, int(start)) if start else r
    r = lax.iota(dtype, n)
    return lax.add(lax.mul(r, step), start)


@placed('linspace')
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``num`` evenly spaced values from ``start`` to ``stop``; bounds may be arrays.

    The values are NumPy's: computed as NumPy does (``start + i * step``, in float64
    for Python-number or integer bounds, rounded to the result dtype once), with the
    last one exactly ``stop`` when ``endpoint``. The result dtype is JAX's (the default
    float for Python numbers)."""
    from .elementwise import add, multiply, subtract, true_divide, where
    from .manipulation import moveaxis
    num = concrete_int("linspace", num, "num")
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    bounds = (start, stop)
    start, stop = to_array(start, "linspace"), to_array(stop, "linspace")
    pairs = [(start.dtype, start.weak_type), (stop.dtype, stop.weak_type)]
    joined, weak = dtypes.promote_pairs(pairs)
    out_dt = dtypes.to_inexact(joined) if dtype is None else dtypes.canonical(dtype, "linspace")
    # NumPy's computation dtype: Python numbers and integers compute in float64
    calc = joined if joined.kind in "fc" and not weak else (
        dtypes.complex128 if joined.kind == "c" else dtypes.float64)
    if joined == dtypes.bfloat16:
        calc = dtypes.float32
    # Python numbers go to ``calc`` directly (0.1 through float32 would not be 0.1)
    start, stop = (Array._wrap(np.array(b, calc)[()]) if dtypes.python_scalar_dtype(b)
                   else lax.convert_element_type_exact(a, calc)
                   for a, b in ((start, bounds[0]), (stop, bounds[1])))
    div = (num - 1) if endpoint else num
    bshape = np.broadcast_shapes(start.shape, stop.shape)
    nd = len(bshape)

    def bcast(v):
        return lax.broadcast_in_dim(v, (num,) + bshape, tuple(range(1 + nd - v.ndim, 1 + nd)))

    # (an int iota converted exactly: calc may be float64 whatever the x64 flag)
    idx = lax.convert_element_type_exact(lax.iota(dtypes.int32, num), calc)
    idx = lax.broadcast_in_dim(idx, (num,) + bshape, (0,))
    delta = subtract(stop, start)
    if div > 0:
        step = true_divide(delta, div)
        # denormal steps that round to 0: scale after dividing the index, as NumPy
        tiny = multiply(true_divide(idx, div), bcast(delta))
        out = add(where(bcast(step) == 0, tiny, multiply(idx, bcast(step))), bcast(start))
    else:
        step = Array._wrap(np.array(np.nan, calc))   # one NaN, as NumPy and JAX
        out = add(multiply(idx, bcast(delta)), bcast(start))
    if endpoint and num > 1:
        last = lax.broadcasted_iota(dtypes.int32, out.shape, 0)
        out = where(last == num - 1, bcast(stop), out)
    out = moveaxis(out, 0, axis) if axis != 0 else out
    if out_dt.kind in "iu" and calc.kind == "f":
        out = lax.floor(out)  # NumPy >= 2: integer linspace rounds toward -inf
    out = lax.convert_element_type_exact(out, out_dt)
    if retstep:
        step_dt = out_dt if out_dt.kind in "fc" else dtypes.to_inexact(out_dt)
        return out, lax.convert_element_type_exact(step, step_dt)
    return out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    from .elementwise import power
    out = power(base, linspace(start, stop, num, endpoint, axis=axis))
    return out if dtype is None else lax.convert_element_type(out, dtypes.canonical(
        dtype, "logspace"))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Geometric progression; both bounds negative gives negated values, as NumPy.
    The endpoints are exactly ``start`` (and ``stop`` with ``endpoint``)."""
    from .elementwise import abs as abs_, exp, log, multiply, sign, where
    from .manipulation import moveaxis
    num = concrete_int("geomspace", num, "num")
    start, stop = to_array(start, "geomspace"), to_array(stop, "geomspace")
    dt = dtypes.to_inexact(dtypes.promote_pairs([(start.dtype, start.weak_type),
                                                 (stop.dtype, stop.weak_type)])[0])
    start = lax.convert_element_type(start, dt)
    stop = lax.convert_element_type(stop, dt)
    s = sign(start)  # NumPy requires start and stop of one sign; the result takes it
    out = multiply(s, exp(linspace(log(abs_(start)), log(abs_(stop)), num, endpoint)))
    if num > 0:
        pos = lax.broadcasted_iota(dtypes.int32, out.shape, 0)
        out = where(pos == 0, start, out)
        if endpoint and num > 1:
            out = where(pos == num - 1, stop, out)
    out = moveaxis(out, 0, axis) if axis != 0 else out
    return out if dtype is None else lax.convert_element_type(out, dtypes.canonical(
        dtype, "geomspace"))


def _diag_mask(n, m, k, compare):
    """``compare(row + k, col)`` over an (n, m) grid; a ``k`` beyond the grid gives the
    constant answer (no index arithmetic can overflow)."""
    k = int(k)
    if not -n < k < m:  # the diagonal misses the grid: row + k is always < or > col
        below = k <= -n  # row + k < col everywhere
        value = compare(0, 1) if below else compare(1, 0)
        return lax.broadcast_in_dim(Array._wrap(np.bool_(value)), (n, m), ())
    rows = lax.broadcasted_iota(dtypes.int32, (n, m), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (n, m), 1)
    return {">=": lax.ge, "==": lax.eq}[compare.__name__](lax.add(rows, k), cols)


def _ge(a, b):
    return a >= b


def _eq(a, b):
    return a == b


_ge.__name__, _eq.__name__ = ">=", "=="


def _tri_mask(n, m, k):
    return _diag_mask(n, m, k, _ge)  # True on and below diagonal k


@placed('eye')
def eye(N, M=None, k=0, dtype=None, *, device=None):
    N = concrete_int("eye", N, "N")
    M = N if M is None else concrete_int("eye", M, "M")
    dtype = dtypes.default_float() if dtype is None else dtypes.canonical(dtype, "eye")
    check_shape("eye", (N, M), dtype)
    return lax.convert_element_type(_diag_mask(N, M, k, _eq), dtype)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """Ones on and below diagonal ``k``. Without ``dtype`` it is float32 even under
    ``jax_enable_x64``, as in JAX."""
    N = concrete_int("tri", N, "N")
    M = N if M is None else concrete_int("tri", M, "M")
    dtype = dtypes.float32 if dtype is None else dtypes.canonical(dtype, "tri")
    check_shape("tri", (N, M), dtype)
    return lax.convert_element_type(_tri_mask(N, M, k), dtype)


def _tri_select(m, k, lower):
    from .elementwise import where
    m = to_array(m)
    if m.ndim < 2:
        raise ValueError(f"{'tril' if lower else 'triu'}: needs an array of rank >= 2, got "
                         f"shape {m.shape}")
    n, c = m.shape[-2:]
    mask = _tri_mask(n, c, k if lower else k - 1)
    return where(mask if lower else lax.bitwise_not(mask), m, zeros((), m.dtype))


def tril(m, k=0):
    """Lower triangle of the last two axes (entries above diagonal ``k`` zeroed)."""
    return _tri_select(m, k, True)


def triu(m, k=0):
    """Upper triangle of the last two axes (entries below diagonal ``k`` zeroed)."""
    return _tri_select(m, k, False)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [lax.reshape(to_array(x), (to_array(x).size,)) for x in xi]
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        d = i
        if indexing == "xy" and len(xs) > 1 and i < 2:
            d = 1 - i
        if sparse:
            s = [1] * len(xs)
            s[d] = x.shape[0]
            out.append(lax.reshape(x, s))
        else:
            out.append(lax.broadcast_in_dim(x, tuple(shape), (d,)))
    return out


# ``from .creation import *`` in fnx/numpy/__init__.py exports exactly the functions defined
# here (not the modules and helpers this file imports, which would shadow real ones).
__all__ = sorted(_n for _n, _v in list(globals().items())
                 if not _n.startswith("_") and callable(_v)
                 and getattr(_v, "__module__", None) == __name__)
