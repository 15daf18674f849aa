"""``fnx.Array``: an immutable array, and the eager trace that computes on it.

An Array wraps a buffer that fnx never writes after the Array exists: a NumPy array on
the CPU, or a device buffer of another backend (a CuPy array on a GPU); ``x.device``
says which (``fnx.core.devices``). Conversions to host values (``np.asarray(x)``,
``float(x)``, printing) copy a device buffer to the host.
Updates are functional (``x.at[i].set(v)`` returns a new Array). Tracers
(abstract values inside a transformation) are a subclass, so
``isinstance(x, fnx.Array)`` holds for both, as in JAX; internal fast paths
test ``type(x) is Array`` to know a value is concrete.

Operators and methods forward to ``fnx.numpy`` (bound at import of that
module), so an operator on a tracer records the same primitives as the
corresponding ``fnx.numpy`` call.
"""
from __future__ import annotations

import numpy as np

from ..errors import (ConcretizationError, DeletedArrayError, TracerArrayConversionError,
                      TracerBoolConversionError, TracerIntegerConversionError)
from . import dtypes
from . import backend as _backend
from .devices import CPU_DEVICE, Device, commit  # noqa: F401 (CPU_DEVICE: kept here)
from .primitive import ShapeDtypeStruct
from .trace import EvalTrace, user_frame_info

fnp = None  # fnx.numpy, set by fnx.numpy when it is imported (avoids an import cycle)
_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")  # what __array_namespace__ accepts


class DeletedBuffer:
    """Stands in for the buffer of a donated Array; any use raises."""
    __slots__ = ("where",)

    def __init__(self, where):
        self.where = where

    def __getattr__(self, name):
        raise DeletedArrayError(
            f"this Array was donated to {self.where} and its buffer may have been "
            "reused; use the value that call returned instead")


class Array:
    """An immutable n-dimensional array (concrete: wraps a NumPy buffer)."""
    __slots__ = ("_value", "weak_type", "__weakref__")
    __array_priority__ = 100  # NumPy defers binary operators to us

    def __init__(self, value, dtype=None, weak_type=False):
        # Public constructor: copies, so no outside reference can write the buffer. 64-bit
        # data narrows to 32 bits unless jax_enable_x64 is on (as JAX's inputs do).
        v = np.array(value, dtype=None if dtype is None else dtypes.canonical(dtype, "Array"))
        if dtype is None:
            if v.dtype not in dtypes.SUPPORTED_SET:
                v = v.astype(dtypes.canonicalize(v.dtype))
            if v.dtype in dtypes.NARROW:
                if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__array__"):
                    v = dtypes.narrow_value(v, "Array")
                else:  # Python numbers: the defaults, not a narrowing
                    if v.dtype.kind in "iu" and not dtypes._fits(v, dtypes.NARROW[v.dtype]):
                        big = v.max() if v.max() > np.iinfo(np.int32).max else v.min()
                        dtypes.check_python_int(int(big), dtypes.int32, "Array")
                    v = v.astype(dtypes.NARROW[v.dtype])
        v.flags.writeable = False
        self._value = v
        self.weak_type = bool(weak_type)

    @staticmethod
    def _wrap(value, weak_type=False):
        """Wrap a NumPy array/scalar that nothing else will write (no copy)."""
        a = new_array(Array)
        a._value = value
        a.weak_type = weak_type
        return a

    # --- attributes -------------------------------------------------------
    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def aval(self):
        return ShapeDtypeStruct(self.shape, self.dtype, self.weak_type)

    @property
    def device(self):
        """The device holding the array (the CPU for a NumPy buffer)."""
        v = self._value
        if _backend.is_host_buffer(v) or type(v) is DeletedBuffer:
            return CPU_DEVICE
        return _backend.backend_for((v,)).device_of(v)

    def devices(self):
        """The set of devices holding the array (JAX's API)."""
        return {self.device}

    @property
    def sharding(self):
        """How the array is laid out over devices (JAX's API): whole, on its device."""
        d = self.device
        return SINGLE_DEVICE_SHARDING if d is CPU_DEVICE else SingleDeviceSharding(d)

    def to_device(self, device, /, *, stream=None):
        """The array on ``device`` (the Array API's ``to_device``): itself when it is there,
        else a copy there (``fnx.device_put``)."""
        if device is self.device:
            return self
        return device_put_array(self, device)

    @property
    def T(self):
        return fnp.transpose(self)

    @property
    def mT(self):
        return fnp.matrix_transpose(self)

    @property
    def real(self):
        return fnp.real(self)

    @property
    def imag(self):
        return fnp.imag(self)

    @property
    def at(self):
        """Functional updates: ``x.at[idx].set(v)``, ``.add``, ``.mul``, ``.get``..."""
        return fnp._indexing.IndexUpdateHelper(self)

    # --- concrete access --------------------------------------------------
    def _concrete(self, what):
        """The NumPy value, for conversions that need one (tracers override); a device
        buffer is copied to the host."""
        v = self._value
        if _backend.is_host_buffer(v):
            return v
        if type(v) is DeletedBuffer:
            v.dtype  # raises DeletedArrayError
        return _backend.backend_for((v,)).fetch(v)

    def __array__(self, dtype=None, copy=None):
        v = np.asarray(self._concrete("np.asarray()"))
        if copy:
            return np.array(v, dtype=dtype)
        if dtype is not None and v.dtype != np.dtype(dtype):
            return v.astype(dtype)
        if v.flags.writeable:
            v = v.view()
            v.flags.writeable = False
        return v

    def __array_namespace__(self, /, *, api_version=None):
        """``fnx.numpy``, which implements the Array API standard 2024.12 (and accepts
        being asked for the earlier versions, which it also covers)."""
        if api_version is not None and api_version not in _API_VERSIONS:
            raise ValueError(f"__array_namespace__: api_version {api_version!r} is not "
                             f"supported; fnx.numpy implements {_API_VERSIONS[-1]} (also "
                             f"accepted: {', '.join(_API_VERSIONS[:-1])})")
        return fnp

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (CPU only). A consumer that understands DLPack >= 1.0 gets the
        buffer itself, flagged read-only. A legacy consumer (no ``max_version``) gets a
        copy by default, since the legacy protocol cannot say read-only; with
        ``copy=False`` it gets the buffer itself, which it must not write."""
        dv = self._value
        if not (_backend.is_host_buffer(dv) or type(dv) is DeletedBuffer):
            # a device buffer exports itself (CuPy: no copy, on the GPU)
            kw = {} if max_version is None else {"max_version": max_version}
            return dv.__dlpack__(stream=stream, **kw)
        v = np.asarray(self._concrete("__dlpack__"))
        if stream is not None:
            raise BufferError(f"__dlpack__: fnx arrays are on the CPU, which has no "
                              f"streams; got stream={stream!r}")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: fnx arrays are on the CPU {(1, 0)}, cannot "
                              f"export to dl_device={tuple(dl_device)!r}")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        if copy:
            c = np.array(v, copy=True)
            return c.__dlpack__(max_version=max_version) if versioned else c.__dlpack__()
        if not versioned:
            if copy is None:
                return np.array(v, copy=True).__dlpack__()
            return _legacy_alias(v).__dlpack__()  # copy=False: the buffer, unflagged
        if v.flags.writeable:  # nobody may write fnx's buffer through the export
            v = v.view()
            v.flags.writeable = False
        return v.__dlpack__(max_version=max_version, copy=False)

    def __dlpack_device__(self, /):
        dv = self._value
        if not (_backend.is_host_buffer(dv) or type(dv) is DeletedBuffer):
            return dv.__dlpack_device__()
        return (1, 0)  # kDLCPU, device 0

    def __bool__(self):
        return bool(self._concrete("bool()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        v = self._concrete("operator.index()")
        if v.dtype.kind not in "iub":
            raise TypeError(f"only integer arrays can be used as an index, got {v.dtype}")
        return int(v)

    def item(self, *args):
        return self._concrete("item()").item(*args)

    def tolist(self):
        return np.asarray(self._concrete("tolist()")).tolist()

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        if type(self._value) is DeletedBuffer:
            return "Array(<deleted>)"
        v = np.asarray(self._concrete("repr()"))
        body = np.array2string(v, separator=", ", prefix="Array(")
        shape = f", shape={v.shape}" if v.size == 0 and v.shape != (0,) else ""
        weak = ", weak_type=True" if self.weak_type else ""
        return f"Array({body}{shape}, dtype={v.dtype.name}{weak})"

    def __str__(self):
        return str(np.asarray(self._concrete("str()")))

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self._concrete("format()").item(), spec)
        return format(str(self), spec)

    def __setitem__(self, idx, value):
        i, v = _index_text(idx), _index_text(value, "v")
        raise TypeError(
            f"fnx arrays are immutable: `x[{i}] = {v}` is not supported. "
            f"Use `x = x.at[{i}].set({v})`, which returns an updated copy "
            "(also .add, .multiply, .min, .max, ...).")

    __hash__ = None  # like NumPy and JAX arrays: unhashable

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (_rebuild, (np.asarray(self._concrete("pickle")), self.weak_type))

    def block_until_ready(self):
        return self

    def is_deleted(self):
        return type(self._value) is DeletedBuffer

    def delete(self):
        self._value = DeletedBuffer("delete()")

    def copy(self):
        return self

    def clone(self):
        return self

    def is_ready(self):
        return True

    def copy_to_host_async(self):
        return None

    @property
    def is_fully_addressable(self):
        return True

    @property
    def is_fully_replicated(self):
        return True

    def on_device_size_in_bytes(self):
        return self.nbytes

    # --- methods forwarding to fnx.numpy -----------------------------------
    def __getitem__(self, idx):
        return fnp._indexing.getitem(self, idx)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
            if isinstance(shape, Array) and shape.ndim == 0:
                shape = (shape,)  # x.reshape(n) with a 0-d array n: one dimension, as JAX
        return fnp.reshape(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return fnp.transpose(self, axes or None)

    def astype(self, dtype, copy=False, *, device=None):
        return fnp.astype(self, dtype, copy=copy, device=device)

    def flatten(self, order="C"):
        return fnp.ravel(self, order=order)

    def ravel(self, order="C"):
        return fnp.ravel(self, order=order)

    def squeeze(self, axis=None):
        return fnp.squeeze(self, axis)

    def swapaxes(self, a, b):
        return fnp.swapaxes(self, a, b)

    def sum(self, axis=None, dtype=None, keepdims=False, **kw):
        return fnp.sum(self, axis=axis, dtype=dtype, keepdims=keepdims, **kw)

    def prod(self, axis=None, dtype=None, keepdims=False, **kw):
        return fnp.prod(self, axis=axis, dtype=dtype, keepdims=keepdims, **kw)

    def mean(self, axis=None, dtype=None, keepdims=False, **kw):
        return fnp.mean(self, axis=axis, dtype=dtype, keepdims=keepdims, **kw)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False, **kw):
        return fnp.var(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, **kw)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False, **kw):
        return fnp.std(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, **kw)

    def max(self, axis=None, keepdims=False, **kw):
        return fnp.max(self, axis=axis, keepdims=keepdims, **kw)

    def min(self, axis=None, keepdims=False, **kw):
        return fnp.min(self, axis=axis, keepdims=keepdims, **kw)

    def any(self, axis=None, keepdims=False):
        return fnp.any(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return fnp.all(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        return fnp.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        return fnp.argmin(self, axis=axis, keepdims=keepdims)

    def cumsum(self, axis=None, dtype=None):
        return fnp.cumsum(self, axis=axis, dtype=dtype)

    def cumprod(self, axis=None, dtype=None):
        return fnp.cumprod(self, axis=axis, dtype=dtype)

    def clip(self, min=None, max=None):
        return fnp.clip(self, min, max)

    def round(self, decimals=0):
        return fnp.round(self, decimals)

    def conj(self):
        return fnp.conj(self)

    def conjugate(self):
        return fnp.conjugate(self)

    def ptp(self, axis=None, out=None, keepdims=False):
        if out is not None:
            raise NotImplementedError("ptp: out is not supported (fnx arrays are immutable)")
        return fnp.ptp(self, axis=axis, keepdims=keepdims)

    def searchsorted(self, v, side="left", sorter=None, *, method="scan"):
        return fnp.searchsorted(self, v, side=side, sorter=sorter, method=method)

    def argpartition(self, kth, axis=-1):
        return fnp.argpartition(self, kth, axis=axis)

    def choose(self, choices, out=None, mode="raise"):
        return fnp.choose(self, choices, out=out, mode=mode)

    def compress(self, condition, axis=None, *, out=None, size=None, fill_value=0):
        return fnp.compress(condition, self, axis=axis, out=out, size=size,
                            fill_value=fill_value)

    def view(self, dtype=None, type=None):
        """The same bits as ``dtype`` (NumPy's ``view``): the last axis scales by the width
        ratio; ``dtype=None`` is the array itself. ``type`` is not supported (as JAX)."""
        return fnp.manipulation.array_view(self, dtype, type)

    def tobytes(self, order="C"):
        return np.asarray(self._concrete("tobytes()")).tobytes(order)

    def dot(self, other):
        return fnp.dot(self, other)

    def sort(self, axis=-1, *, kind=None, order=None, stable=True, descending=False):
        return fnp.sort(self, axis=axis, kind=kind, order=order, stable=stable,
                        descending=descending)

    def argsort(self, axis=-1, *, kind=None, order=None, stable=True, descending=False):
        return fnp.argsort(self, axis=axis, kind=kind, order=order, stable=stable,
                           descending=descending)

    def take(self, indices, axis=None):
        return fnp.take(self, indices, axis=axis)

    def repeat(self, repeats, axis=None):
        return fnp.repeat(self, repeats, axis=axis)

    def nonzero(self, *, size=None, fill_value=None):
        return fnp.nonzero(self, size=size, fill_value=fill_value)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return fnp.diagonal(self, offset, axis1, axis2)

    def trace(self, offset=0, axis1=0, axis2=1):
        return fnp.trace(self, offset, axis1, axis2)

    # --- operators ----------------------------------------------------------
    def __neg__(self): return fnp.negative(self)
    def __pos__(self): return fnp.positive(self)
    def __abs__(self): return fnp.abs(self)
    def __invert__(self): return fnp.invert(self)
    def __add__(self, o): return fnp.add(self, o) if _operand_like(o) else NotImplemented
    def __radd__(self, o): return fnp.add(o, self) if _operand_like(o) else NotImplemented
    def __sub__(self, o): return fnp.subtract(self, o) if _operand_like(o) else NotImplemented
    def __rsub__(self, o): return fnp.subtract(o, self) if _operand_like(o) else NotImplemented
    def __mul__(self, o): return fnp.multiply(self, o) if _operand_like(o) else NotImplemented
    def __rmul__(self, o): return fnp.multiply(o, self) if _operand_like(o) else NotImplemented
    def __truediv__(self, o):
        return fnp.true_divide(self, o) if _operand_like(o) else NotImplemented
    def __rtruediv__(self, o):
        return fnp.true_divide(o, self) if _operand_like(o) else NotImplemented
    def __floordiv__(self, o):
        return fnp.floor_divide(self, o) if _operand_like(o) else NotImplemented
    def __rfloordiv__(self, o):
        return fnp.floor_divide(o, self) if _operand_like(o) else NotImplemented
    def __mod__(self, o): return fnp.remainder(self, o) if _operand_like(o) else NotImplemented
    def __rmod__(self, o): return fnp.remainder(o, self) if _operand_like(o) else NotImplemented
    def __divmod__(self, o): return fnp.divmod(self, o) if _operand_like(o) else NotImplemented
    def __rdivmod__(self, o): return fnp.divmod(o, self) if _operand_like(o) else NotImplemented
    def __pow__(self, o): return fnp.power(self, o) if _operand_like(o) else NotImplemented
    def __rpow__(self, o): return fnp.power(o, self) if _operand_like(o) else NotImplemented
    def __matmul__(self, o): return fnp.matmul(self, o) if _operand_like(o) else NotImplemented
    def __rmatmul__(self, o): return fnp.matmul(o, self) if _operand_like(o) else NotImplemented
    def __and__(self, o): return fnp.bitwise_and(self, o) if _operand_like(o) else NotImplemented
    def __rand__(self, o): return fnp.bitwise_and(o, self) if _operand_like(o) else NotImplemented
    def __or__(self, o): return fnp.bitwise_or(self, o) if _operand_like(o) else NotImplemented
    def __ror__(self, o): return fnp.bitwise_or(o, self) if _operand_like(o) else NotImplemented
    def __xor__(self, o): return fnp.bitwise_xor(self, o) if _operand_like(o) else NotImplemented
    def __rxor__(self, o): return fnp.bitwise_xor(o, self) if _operand_like(o) else NotImplemented
    def __lshift__(self, o): return fnp.left_shift(self, o) if _operand_like(o) else NotImplemented
    def __rlshift__(self, o):
        return fnp.left_shift(o, self) if _operand_like(o) else NotImplemented
    def __rshift__(self, o):
        return fnp.right_shift(self, o) if _operand_like(o) else NotImplemented
    def __rrshift__(self, o):
        return fnp.right_shift(o, self) if _operand_like(o) else NotImplemented
    def __eq__(self, o): return fnp.equal(self, o) if _operand_like(o) else NotImplemented
    def __ne__(self, o): return fnp.not_equal(self, o) if _operand_like(o) else NotImplemented
    def __lt__(self, o): return fnp.less(self, o) if _operand_like(o) else NotImplemented
    def __le__(self, o): return fnp.less_equal(self, o) if _operand_like(o) else NotImplemented
    def __gt__(self, o): return fnp.greater(self, o) if _operand_like(o) else NotImplemented
    def __ge__(self, o): return fnp.greater_equal(self, o) if _operand_like(o) else NotImplemented


# ``new_array(Array)``: an Array with no slot set yet (what ``Array._wrap`` does, for hot paths
# that fill ``_value`` and ``weak_type`` inline)
new_array = object.__new__


_OPERANDS = (Array, np.ndarray, np.generic, bool, int, float, complex)


def _operand_like(o):
    """Whether a binary operator takes ``o``; else it returns NotImplemented, as JAX's
    (``_defer_to_unrecognized_arg``), so that a class with its own (reflected) operator,
    a NamedTuple of arrays say, gets its turn, and Python raises "unsupported operand
    type(s)" for one with none. Plain lists and tuples are taken as arrays (JAX raises), and
    so is a class with ``__jax_array__`` (JAX's protocol for wrappers)."""
    return (isinstance(o, _OPERANDS) or type(o) in (list, tuple)
            or hasattr(type(o), "__jax_array__"))


def _index_text(x, default="idx"):
    """How an index or value reads in source, for error messages."""
    if isinstance(x, tuple) and x:
        parts = [_index_text(p, None) for p in x]
        return default if None in parts else ", ".join(parts)
    if x is None or x is Ellipsis or isinstance(x, (bool, int, float)):
        return "..." if x is Ellipsis else repr(x)
    if isinstance(x, slice):
        parts = ["" if p is None else repr(p) for p in (x.start, x.stop, x.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if x.step is not None else "")
    return default


class _BufferOwner:
    """Holds an Array's buffer alive behind a writeable-flagged alias of it (for the
    legacy DLPack protocol, which refuses read-only arrays and cannot flag them)."""

    def __init__(self, v):
        self.keep = v
        self.__array_interface__ = {
            "data": (v.__array_interface__["data"][0], False), "shape": v.shape,
            "typestr": v.dtype.str, "descr": v.dtype.descr, "strides": v.strides,
            "version": 3}


def _legacy_alias(v):
    """``v``'s memory as an ndarray that NumPy's legacy ``__dlpack__`` exports (no copy)."""
    if v.flags.writeable:
        return v
    return np.asarray(_BufferOwner(v))


def device_put_array(x, device):
    """``x`` (an Array) on ``device`` (a Device; None: where it is), committed there: the
    same buffer when it is there already, else a copy through the host."""
    if device is None or type(x) is not Array:
        return x  # a tracer: placement is the compiled program's business
    if not isinstance(device, Device):
        raise ValueError(f"device_put: expected a device (one of fnx.devices()), got "
                         f"{device!r}")
    if x.device is device:
        return commit(Array._wrap(x._value, x.weak_type)) if device.platform == "cpu" else x
    host = x._concrete("device_put")
    if device.platform == "cpu":
        return commit(Array._wrap(host, x.weak_type))
    return Array._wrap(_backend.get_backend(device.backend).put(host), x.weak_type)


def _rebuild(value, weak_type):
    return Array(value, weak_type=weak_type)




class Sharding:
    """JAX's ``Sharding``: how an array lies over devices (``fnx.sharding``'s kinds)."""
    __slots__ = ()


class SingleDeviceSharding(Sharding):
    """JAX's ``SingleDeviceSharding``: the whole array on one device (the CPU unless
    given): every array's ``.sharding``."""
    __slots__ = ("_device", "_memory_kind")

    def __init__(self, device=None, *, memory_kind=None):
        device = CPU_DEVICE if device is None else device
        if not isinstance(device, Device):
            raise ValueError(f"SingleDeviceSharding: expected a device (fnx.devices()), got "
                             f"{device!r}")
        if memory_kind not in (None, "device"):
            raise ValueError(f"SingleDeviceSharding: memory_kind must be 'device' (the "
                             f"device's only memory) or None, got {memory_kind!r}")
        self._device = device
        self._memory_kind = "device"

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self._memory_kind})"

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device is self._device

    def __hash__(self):
        return hash((SingleDeviceSharding, self._device))

    def __reduce__(self):
        return (SingleDeviceSharding, (self._device,))

    @property
    def device_set(self):
        return {self._device}

    @property
    def addressable_devices(self):
        return {self._device}

    @property
    def _device_assignment(self):
        return (self._device,)

    num_devices = 1
    is_fully_replicated = True
    is_fully_addressable = True
    has_addressable_devices = True

    @property
    def memory_kind(self):
        return self._memory_kind

    def with_memory_kind(self, kind):
        return SingleDeviceSharding(self._device, memory_kind=kind)

    def is_equivalent_to(self, other, ndim):
        return self == other

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    def devices_indices_map(self, global_shape):
        return {self._device: (slice(None),) * len(global_shape)}

    addressable_devices_indices_map = devices_indices_map


SINGLE_DEVICE_SHARDING = SingleDeviceSharding()



# the conversion a tracer refused -> JAX's error class for it
_CONVERSION_ERRORS = {"bool()": TracerBoolConversionError, "int()": TracerIntegerConversionError,
                      "operator.index()": TracerIntegerConversionError,
                      "np.asarray()": TracerArrayConversionError,
                      "np.asarray() / __array__": TracerArrayConversionError}

class Tracer(Array):
    """An abstract value inside a transformation: shape and dtype, no data."""
    __slots__ = ("_trace", "_aval", "_origin")

    def __init__(self, trace, aval):
        self._trace = trace
        self._aval = aval
        self.weak_type = aval.weak_type
        self._origin = user_frame_info(2)

    @property
    def shape(self):
        return self._aval.shape

    @property
    def dtype(self):
        return self._aval.dtype

    @property
    def aval(self):
        return self._aval

    def _concrete(self, what):
        error = _CONVERSION_ERRORS.get(what, ConcretizationError)
        raise error(
            f"{what} needs a concrete value, but got a traced {self._aval.str_short()} "
            f"(from {self._origin}) inside {self._trace.name}. Under jit, make_ir and "
            "eval_shape only shapes and dtypes are known, so Python control flow and "
            "conversions cannot depend on array values. Use fnx.lax.cond / "
            "fnx.lax.select / fnx.numpy.where for data-dependent choices, or pass the "
            "value as a static argument (jit(f, static_argnums=...)). "
            f"[at {user_frame_info(2)}]")

    def __repr__(self):
        return f"Traced<{self._aval.str_short()}>[{self._trace.name}]"

    def __str__(self):
        return repr(self)

    def __format__(self, spec):
        # "{}".format(t) / f"{t}" prints the tracer, as JAX's; a format spec (".2f", ">8")
        # needs the value, so it raises the ConcretizationError (a TypeError, as JAX's).
        if not spec:
            return str(self)
        self._concrete(f"format() with the spec {spec!r}")

    def __reduce__(self):
        self._concrete("pickling")

    def is_deleted(self):
        return False

    def __array__(self, dtype=None, copy=None):
        self._concrete("np.asarray() / __array__")   # raises where the value is unknown
        # known (an eager grad or jvp of concrete values): a NumPy copy would silently drop
        # the derivative, so it is refused as JAX refuses it
        raise ConcretizationError(
            f"np.asarray() of a value being differentiated ({self._aval.str_short()}, traced "
            f"by {self._trace.name}) would drop its derivative. Use fnx.numpy functions on "
            "it; where the derivative does not matter, read it with float(x) or x.tolist(), "
            "or pass fnx.lax.stop_gradient(x) through fnx.numpy. "
            f"[at {user_frame_info(2)}]")


def _eval_process_primitive(self, prim, args, params):
    """Eager evaluation of one primitive call: shape rule, then the NumPy impl."""
    vals = []
    for a in args:
        if type(a) is Array:
            v = a._value
            if type(v) is DeletedBuffer:
                v.dtype  # raises DeletedArrayError
            vals.append(v)
        elif isinstance(a, Tracer):
            self.check_foreign_tracer(a, prim.name)  # always raises: no trace encloses eager
        else:
            raise TypeError(f"{prim.name}: expected fnx Arrays, got {type(a).__name__}")
    out_aval = prim.shape_rule(*args, **params)
    if _backend.DEVICE_BACKENDS:  # some buffers may live on a device: run it there
        backend, vals = _backend.place(prim.name, args, vals)
        out = backend.eager(prim, vals, params, out_aval)
    else:
        out = prim.impl(*vals, **params)
    if prim.multiple_results:
        return [Array._wrap(o, av.weak_type) for o, av in zip(out, out_aval)]
    return Array._wrap(out, out_aval.weak_type)


EvalTrace.process_primitive = _eval_process_primitive


def to_array(x, what="argument"):
    """An Array or tracer for any array-like; Python scalars become weakly typed.

    NumPy arrays are copied: fnx must never see a buffer someone else can write.
    """
    if isinstance(x, Array):
        return x
    r = dtypes.python_scalar_dtype(x)
    if r is not None:
        dt, weak = r
        if dt is dtypes.int64 and not dtypes._X64:
            dtypes.check_python_int(x, dtypes.int32, what)
        return Array._wrap(np.array(x, dtype=dt)[()], weak)
    if isinstance(x, np.generic):
        if x.dtype not in dtypes.SUPPORTED_SET:
            x = x.astype(dtypes.canonicalize(x.dtype))
        return Array._wrap(dtypes.narrow_value(x, what) if x.dtype in dtypes.NARROW else x)
    if isinstance(x, np.ndarray):
        if x.dtype in dtypes.NARROW:
            v = dtypes.narrow_value(x, what)  # a new buffer nobody else holds
            v.flags.writeable = False
            return Array._wrap(v)
        return Array(x)
    if isinstance(x, (list, tuple)):
        return fnp.asarray(x)
    jax_array = getattr(type(x), "__jax_array__", None)
    if jax_array is not None:   # JAX's protocol: a wrapper class that says which array it is
        return to_array(jax_array(x), what)
    if hasattr(x, "__array__") or hasattr(x, "__dlpack__"):
        return Array(np.asarray(x))
    raise TypeError(f"{what}: expected an array or a Python scalar, got {type(x).__name__}")
