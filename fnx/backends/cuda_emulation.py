"""A CPU stand-in for CuPy, so the CUDA backend's generated program runs on machines
without a GPU (``FNX_GPU_EMULATE=1``) and CI tests it.

``EMULATED_CUPY`` offers the part of CuPy's API the CUDA backend uses, with CuPy's
semantics where they differ from NumPy's, so a program that runs here runs on a real
device:

* ``ndarray`` (``EmulatedArray``): a device buffer. It holds a NumPy array, but is not
  one: NumPy functions and ufuncs applied to it dispatch (``__array_function__``,
  ``__array_ufunc__``, as CuPy's arrays do) and give device buffers; mixing it with a
  host NumPy array in one call raises ``TypeError`` (a 0-d one too), as CuPy does, and so
  does any implicit conversion to NumPy (``np.asarray(x)``): transfers are explicit
  (``get()``, ``asnumpy``, ``asarray``). What CuPy 14's arrays lack through NumPy's ufuncs
  is refused as there: ``reduce``/``accumulate`` of ufuncs but add and multiply,
  ``ufunc.at``, ``order=``.
* creation (``empty``, ``zeros``, ``asarray``, ...) and every other NumPy function by
  name (``xp.matmul``, ``xp.stack``, ...), computed by NumPy on the held arrays;
* ``RawModule(code=...)`` / ``get_function(name)``: a CUDA kernel compiled for the host
  by ``fnx.kernels.emulate`` (g++, with threads, blocks, shared memory, barriers and
  warp shuffles emulated) and launched as CuPy launches one:
  ``kernel(grid, block, args, shared_mem=0)``;
* ``cuda``: streams, events, memory pools (``using_allocator``) and **CUDA graph
  capture**: between ``stream.begin_capture()`` and ``stream.end_capture()`` every
  operation of the capturing thread runs and is also recorded with the buffers it read and
  wrote; ``graph.launch()`` replays the records in order on those same buffers (results
  written back into them in place), as a CUDA graph replays its kernels on fixed
  addresses. What a real capture refuses is refused here too, and invalidates the capture
  (``end_capture`` then raises ``StreamCaptureError``): transfers between host and device,
  reading a value on the host (``bool``, ``int``, ``item``, ``repr``, ...), synchronizing
  the capturing stream, launching a graph, and CuPy's cuBLAS and cuSOLVER calls
  (``matmul``, ``dot``, ``linalg``, ... of float operands: ``NotImplementedError``, as CuPy
  raises; ``fnx.backends.cuda_blas`` is the GEMM that captures).
"""
from __future__ import annotations

import contextlib
import numbers
import operator
import threading

import numpy as np

__all__ = ["EmulatedArray", "EMULATED_CUPY", "StreamCaptureError", "is_emulated"]


class StreamCaptureError(RuntimeError):
    """What the emulated device raises where CUDA's stream capture refuses an operation
    (``cudaErrorStreamCaptureUnsupported``/``...Invalidated``)."""


_thread = threading.local()  # .stream: the thread's current stream (None: the null stream)


def _capturing_stream():
    s = getattr(_thread, "stream", None)
    return s if s is not None and s._records is not None else None


def _host_read(what):
    """Refuse ``what`` (a host transfer or read) while the thread's stream captures."""
    s = _capturing_stream()
    if s is not None:
        s._invalid = s._invalid or what
        raise StreamCaptureError(f"{what} while a CUDA graph is being captured: capture "
                                 "records device work only, so a program that reads device "
                                 "values on the host cannot be captured")


def _implicit(what):
    return TypeError(f"Implicit conversion to a NumPy array is not allowed ({what}). The "
                     "array is on an (emulated) GPU: use .get() or fnx.device_get for an "
                     "explicit transfer to the host.")


class EmulatedArray:
    """A buffer of the emulated GPU (see the module docstring)."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, a):
        self._a = a

    # -- what CuPy's ndarray has ------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: EmulatedArray(self._a.T))
    # a view's base (as CuPy's): not None when the buffer's memory is another's
    base = property(lambda self: None if self._a.base is None else EmulatedArray(self._a.base))

    @property
    def device(self):
        return _EMULATED_DEVICE_ID

    def get(self, stream=None, order="C", out=None):
        """A host copy (CuPy's device-to-host transfer)."""
        _host_read("a device-to-host transfer")
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order)

    def __array__(self, dtype=None, copy=None):
        raise _implicit("np.asarray of a device array")

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        for i in range(len(self._a)):
            yield EmulatedArray(self._a[i])

    def __repr__(self):
        _host_read("repr() of a device array")
        return repr(self._a).replace("array(", "emulated_gpu_array(", 1)

    def __str__(self):
        _host_read("str() of a device array")
        return str(self._a)

    def __index__(self):
        _host_read("index of a device array")
        return self._a.__index__()

    def item(self):
        _host_read("item() of a device array")
        return self._a.item()

    def tolist(self):
        _host_read("tolist() of a device array")
        return self._a.tolist()

    def __getitem__(self, key):
        return _call(operator.getitem, "indexing", (self, key), {})

    def __setitem__(self, key, value):
        _call(operator.setitem, "assignment", (self, key, value), {})

    def __getattr__(self, name):
        # methods (reshape, transpose, astype, copy, ravel, view, sum, ...): NumPy's on the
        # held array, device buffers in and out. Not the protocols (__array_interface__,
        # __array_struct__, ...): through them NumPy would read the buffer as a host array,
        # which CuPy refuses
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)  # .real, .imag: device buffers too
        return _lift(attr, name)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # what CuPy 14's arrays do not offer through NumPy's ufuncs (seen on an H200):
        # reduce/accumulate but add's and multiply's, ufunc.at, and order=
        if method in ("reduce", "accumulate") and ufunc not in (np.add, np.multiply):
            raise NotImplementedError(f"{ufunc.__name__}.{method} of a GPU array (CuPy has "
                                      "only add's and multiply's)")
        if method == "at":
            raise TypeError(f"{ufunc.__name__}.at of a GPU array (NumPy's ufunc.at does not "
                            "reach CuPy; use the device library's own)")
        if "order" in kwargs:
            raise TypeError(f"{ufunc.__name__}: CuPy's ufuncs take no order=")
        out = kwargs.get("out")
        res = _call(getattr(ufunc, method), ufunc.__name__, inputs, kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return res

    def __array_function__(self, func, types, args, kwargs):
        return _lift(func, func.__name__)(*args, **kwargs)

    def __array_namespace__(self, api_version=None):
        return EMULATED_CUPY

    def __dlpack__(self, stream=None):
        raise TypeError("an emulated GPU buffer has no device memory to share through "
                        "DLPack; transfer it to the host first")

    def __reduce__(self):
        return (EmulatedArray, (self._a,))


def _binary_op(name):
    ufunc_method = getattr(np.ndarray, name)

    def op(self, other):
        return _call(ufunc_method, name, (self, other), {})
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__and__",
              "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lshift__",
              "__rlshift__", "__rshift__", "__rrshift__", "__lt__", "__le__", "__gt__",
              "__ge__", "__eq__", "__ne__"):
    setattr(EmulatedArray, _name, _binary_op(_name))
for _name in ("__neg__", "__pos__", "__abs__", "__invert__"):
    setattr(EmulatedArray, _name, (lambda m, n: lambda self: _call(m, n, (self,), {}))(
        getattr(np.ndarray, _name), _name))
EmulatedArray.__hash__ = None


def _host_conversion(convert):
    def conversion(self):
        _host_read(f"{convert.__name__}() of a device array")
        return convert(self._a)
    conversion.__name__ = f"__{convert.__name__}__"
    return conversion


for _convert in (bool, float, int, complex):  # values read on the host
    setattr(EmulatedArray, f"__{_convert.__name__}__", _host_conversion(_convert))


def _unwrap(x, what):
    """``x`` with every EmulatedArray replaced by its NumPy array (through lists, tuples
    and dicts); a host NumPy array is refused, 0-d ones too, as CuPy 14 refuses them (NumPy
    scalars and Python numbers pass)."""
    t = type(x)
    if t is EmulatedArray:
        return x._a
    if t is tuple or t is list:
        return t(_unwrap(v, what) for v in x)
    if t is dict:
        return {k: _unwrap(v, what) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        raise TypeError(f"{what}: a host NumPy array {x.dtype}{list(x.shape)} was combined "
                        "with an (emulated) GPU array; transfer it first (cupy.asarray / "
                        "fnx.device_put)")
    return x


# CuPy's calls that go through cuBLAS or cuSOLVER for float and complex operands, which
# CuPy refuses while a stream captures (its setStream raises NotImplementedError; fnx's
# own GEMM, fnx.backends.cuda_blas, calls cuBLAS itself and captures)
_LIBRARY_CALLS = frozenset("""matmul __matmul__ __rmatmul__ dot vdot inner tensordot einsum
    matrix_power solve inv pinv cholesky qr svd eigh eigvalsh det slogdet lstsq
    tensorsolve tensorinv""".split())


def _refuse_library_call(what, args):
    if what in _LIBRARY_CALLS and _capturing_stream() is not None and any(
            type(a) is EmulatedArray and a.dtype.kind in "fc" for a in args):
        raise NotImplementedError(f"{what}: calling cuBLAS API during stream capture is "
                                  "currently unsupported (as CuPy refuses it)")


def _call(fn, what, args, kwargs):
    """``fn(*args, **kwargs)`` over the held arrays (host arrays refused), results as device
    buffers; recorded while the thread's stream captures (see ``Graph``)."""
    _refuse_library_call(what, args)
    res = _wrap(fn(*_unwrap(args, what), **_unwrap(kwargs, what)))
    s = _capturing_stream()
    if s is not None:
        s._records.append((fn, what, args, kwargs, res))
    return res


record_call = _call  # a device operation of a backend's own (cuda_blas's emulated GEMM)


def _lift(fn, what):
    """``fn`` (a NumPy function or method) as one of device buffers (``_call``)."""
    def call(*args, **kwargs):
        return _call(fn, what, args, kwargs)
    call.__name__ = what
    return call


def _refill(res, new):
    """Write a replayed operation's results ``new`` (NumPy) into the buffers ``res`` its
    recorded run gave. A result that is a view of an operand is one again (the same
    memory, nothing to write)."""
    if type(res) is EmulatedArray:
        a = res._a
        if isinstance(new, np.generic):
            new = np.asarray(new)
        if not np.may_share_memory(a, new):
            np.copyto(a, new)
    elif type(res) is tuple or type(res) is list:
        for r, n in zip(res, new):
            _refill(r, n)


def _wrap(x):
    """NumPy results as device buffers: arrays (0-d too) become EmulatedArrays; NumPy
    scalars become 0-d EmulatedArrays (CuPy's reductions give 0-d device arrays)."""
    if isinstance(x, np.ndarray):
        return EmulatedArray(x)
    if isinstance(x, np.generic):
        return EmulatedArray(np.asarray(x))
    if type(x) is tuple or type(x) is list:
        return type(x)(_wrap(v) for v in x)
    return x


def is_emulated(x) -> bool:
    return type(x) is EmulatedArray


_EMULATED_DEVICE_ID = 0


class _Function:
    """A kernel of a ``RawModule``: ``f(grid, block, args, shared_mem=0)``."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        host = [a._a if type(a) is EmulatedArray else a for a in args]
        for a in host:
            if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
                raise ValueError(f"kernel {self.name}: a buffer argument of shape {a.shape} "
                                 "is not C-contiguous")

        def launch(*host):
            self.module.launch(self.name, grid, block, host, shared_bytes=shared_mem)
        _call(launch, self.name, tuple(args), {})


class RawModule:
    """CuPy's ``RawModule(code=...)``: CUDA source compiled for the host."""

    def __init__(self, code=None, options=(), name_expressions=None, path=None):
        if code is None:
            raise ValueError("the emulated RawModule needs code= (CUDA source), not PTX")
        from ..kernels import emulate
        self.code = code
        self._module = emulate.compile_kernels(code)

    def get_function(self, name):
        return _Function(self._module, name)


class _Ufunc:
    """A CuPy ufunc, emulated: called on device buffers; ``at`` (CuPy's scatter: add,
    subtract, maximum, minimum), ``reduce``/``accumulate`` (add and multiply only)."""

    def __init__(self, ufunc):
        self.ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return _lift(self.ufunc, self.__name__)(*args, **kwargs)

    def at(self, out, key, values=None):
        if self.ufunc not in (np.add, np.subtract, np.maximum, np.minimum):
            raise NotImplementedError(f"cupy.{self.__name__}.at is not offered by CuPy")
        args = (out, key) if values is None else (out, key, values)
        _call(self.ufunc.at, f"{self.__name__}.at", args, {})

    def _method(self, name):
        if self.ufunc not in (np.add, np.multiply):
            raise NotImplementedError(f"cupy.{self.__name__}.{name} is not offered by CuPy")
        return _lift(getattr(self.ufunc, name), name)

    reduce = property(lambda self: self._method("reduce"))
    accumulate = property(lambda self: self._method("accumulate"))


class Event:
    """A CUDA event: the emulated device runs every operation at once, so it is always
    reached."""

    def synchronize(self):
        pass

    done = property(lambda self: True)


class Graph:
    """A captured CUDA graph: ``launch()`` replays its records (see the module docstring)."""

    def __init__(self, records):
        self._records = records

    def launch(self, stream=None):
        if _capturing_stream() is not None:
            _host_read("launching a CUDA graph")
        for fn, what, args, kwargs, res in self._records:
            _refill(res, fn(*_unwrap(args, what), **_unwrap(kwargs, what)))


class Stream:
    """A CUDA stream; ``with stream:`` makes it the thread's current one."""

    _ptrs = iter(range(16, 1 << 62))

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr = 0 if null else next(Stream._ptrs)
        self._records = None   # the operations recorded while capturing, else None
        self._invalid = None   # what invalidated the capture in progress
        self._outer = []

    def __enter__(self):
        self._outer.append(getattr(_thread, "stream", None))
        _thread.stream = self
        return self

    def __exit__(self, *exc):
        _thread.stream = self._outer.pop()
        return False

    def begin_capture(self, mode=None):
        if self.ptr == 0:
            raise RuntimeError("cannot capture on the default (legacy) stream")
        if self._records is not None:
            raise StreamCaptureError("the stream is capturing already")
        self._records, self._invalid = [], None

    def end_capture(self):
        records, invalid = self._records, self._invalid
        if records is None:
            raise StreamCaptureError("the stream is not capturing")
        self._records = self._invalid = None
        if invalid:
            raise StreamCaptureError(f"the capture was invalidated by {invalid}")
        return Graph(records)

    def is_capturing(self):
        return self._records is not None

    def synchronize(self):
        if self._records is not None:
            _host_read("synchronizing a capturing stream")

    def record(self, event=None):
        return event if event is not None else Event()

    def wait_event(self, event):
        pass


Stream.null = Stream(null=True)


class MemoryPool:
    """A device memory pool: host memory serves the emulated device, so it only counts."""

    def malloc(self, nbytes):
        raise NotImplementedError("the emulated device allocates through NumPy")

    def used_bytes(self):
        return 0

    def free_all_blocks(self):
        pass


class _EmulatedCuda:
    """``cupy.cuda``, emulated: streams, events, graphs and memory pools."""

    Stream = Stream
    Event = Event
    Graph = Graph
    MemoryPool = MemoryPool

    @staticmethod
    def get_current_stream():
        s = getattr(_thread, "stream", None)
        return Stream.null if s is None else s

    @staticmethod
    @contextlib.contextmanager
    def using_allocator(allocator=None):
        yield


class _EmulatedCuPy:
    """The CuPy namespace, emulated (see the module docstring)."""

    ndarray = EmulatedArray
    RawModule = RawModule
    cuda = _EmulatedCuda()
    emulated = True

    @staticmethod
    def asarray(x, dtype=None, order=None):
        """A device copy of a host value (a device buffer as it is, unless cast)."""
        if type(x) is EmulatedArray:
            return x if dtype is None else _call(np.asarray, "asarray", (x, dtype), {})
        _host_read("a host-to-device transfer")
        a = np.array(x, dtype=dtype, order="C")
        return EmulatedArray(a)

    array = asarray

    @staticmethod
    def asnumpy(x, stream=None, order="C", out=None):
        if type(x) is EmulatedArray:
            return x.get(order=order, out=out)
        return np.asarray(x, order=order)

    @staticmethod
    def ascontiguousarray(x, dtype=None):
        return _call(np.ascontiguousarray, "ascontiguousarray", (x, dtype), {})

    @staticmethod
    def get_array_module(*args):
        return EMULATED_CUPY if any(type(a) is EmulatedArray for a in args) else np

    def __getattr__(self, name):
        fn = getattr(np, name)  # AttributeError names what the emulation lacks
        if isinstance(fn, np.ufunc):
            return _Ufunc(fn)
        if isinstance(fn, (type, numbers.Number, np.dtype)) or not callable(fn):
            return fn  # dtypes (xp.float32), constants (xp.inf)
        return _lift(fn, name)


EMULATED_CUPY = _EmulatedCuPy()
