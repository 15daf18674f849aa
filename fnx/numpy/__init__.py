"""``fnx.numpy``: the NumPy API (and the Python Array API standard) on fnx arrays.

``import fnx.numpy as fnp`` and write NumPy code; under ``fnx.jit`` and the
other transformations the same code is traced. Functions are thin wrappers
over ``fnx.lax`` primitives; arrays are immutable, so in-place forms (``out=``,
``x[i] = v``) are replaced by functional ones (``x.at[i].set(v)``).
"""
import builtins as _builtins

import numpy as _np

from ..core import array as _array_module
from ..core import dtypes as _dtypes
from ..core.array import Array
from . import _indexing  # noqa: F401  (Array.at and x[...] use fnp._indexing)
from .creation import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .elementwise import abs, divmod, pow, round  # noqa: F401  (shadow builtins on purpose)
from .manipulation import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .reductions import all, any, max, min, sum  # noqa: F401
from ._indexing import put_along_axis, take, take_along_axis  # noqa: F401
from .sorting import *  # noqa: F401,F403
from .setops import *  # noqa: F401,F403
from .statistics import *  # noqa: F401,F403
from .einsum import einsum  # noqa: F401
from .index_tricks import *  # noqa: F401,F403
from .index_tricks import shape, size  # noqa: F401  (jnp's functions, not attributes)
from .extras import *  # noqa: F401,F403
from .polynomial import *  # noqa: F401,F403
from .ufuncs import frompyfunc, ufunc  # noqa: F401
from . import fft, linalg  # noqa: F401

__array_api_version__ = "2024.12"

ndarray = Array
newaxis = None
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma

dtype = _np.dtype
result_type = _dtypes.result_type
promote_types = _dtypes.promote_types
can_cast = _dtypes.can_cast
finfo = _dtypes.finfo
iinfo = _dtypes.iinfo
generic, number, inexact, floating, complexfloating = (
    _np.generic, _np.number, _np.inexact, _np.floating, _np.complexfloating)
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger


def issubdtype(arg1, arg2):
    """``numpy.issubdtype`` with JAX's extra types: bfloat16 is under ``floating``
    (``inexact``, ``number``), as in ``jax.numpy``; it is ``fnx.dtypes.issubdtype``."""
    from ..dtypes import issubdtype as _issubdtype  # fnx.dtypes imports fnx.numpy's parts
    return _issubdtype(arg1, arg2)


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype, kind):
    """Array API ``isdtype``: ``kind`` is a dtype, a kind name, or a tuple of them
    (bfloat16, an fnx extra, is a 'real floating' type)."""
    dtype = _dtypes.canonicalize(dtype)
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; use one of "
                             f"{', '.join(map(repr, _KINDS))}, a dtype or a tuple of them")
        code = "f" if dtype == _dtypes.bfloat16 else dtype.kind
        return code in _KINDS[kind]
    try:
        return dtype == _dtypes.canonicalize(kind)
    except TypeError:
        raise TypeError(f"isdtype: kind must be a dtype, a kind name or a tuple of them, "
                        f"got {kind!r}") from None


class _ArrayNamespaceInfo:
    """What ``__array_namespace_info__()`` returns (Array API 2023.12 inspection)."""

    _API_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "float32", "float64", "complex64", "complex128")

    @staticmethod
    def _device(name, device):
        from .util import check_device
        check_device(f"__array_namespace_info__().{name}", device)

    def capabilities(self):
        """Boolean masks and data-dependent shapes (``nonzero``, ``unique_*``) work on
        concrete arrays; under ``jit`` they need a static ``size=`` instead. Arrays have
        at most 64 dimensions (NumPy's limit)."""
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        return _array_module.CPU_DEVICE

    def devices(self):
        """This process's devices: the CPU, then a GPU's where one is (or is emulated)."""
        from .._api import devices as _devices
        try:
            gpus = list(_devices("gpu"))
        except RuntimeError:        # no GPU backend here
            gpus = []
        return [_array_module.CPU_DEVICE] + gpus

    def default_dtypes(self, *, device=None):
        self._device("default_dtypes", device)
        f, c, i = (globals()[d.name] for d in (_dtypes.default_float(),
                                              _dtypes.default_complex(), _dtypes.default_int()))
        return {"real floating": f, "complex floating": c, "integral": i, "indexing": i}

    def dtypes(self, *, device=None, kind=None):
        """The Array API dtypes fnx supports, those of ``kind`` if given: without
        ``jax_enable_x64`` the 64-bit ones narrow to 32 bits, so they are not listed (as
        JAX's)."""
        self._device("dtypes", device)
        wide = _dtypes.x64_enabled()
        out = {name: globals()[name] for name in self._API_DTYPES
               if wide or _np.dtype(name).itemsize < 8 or name == "complex64"}
        if kind is None:
            return out
        return {name: d for name, d in out.items() if isdtype(d, kind)}

    def __repr__(self):
        return "fnx.numpy.__array_namespace_info__()"


def __array_namespace_info__():
    """Array API inspection: ``capabilities()``, ``default_device()``, ``devices()``,
    ``default_dtypes()``, ``dtypes(kind=...)``."""
    return _ArrayNamespaceInfo()


class _ScalarType:
    """``fnp.float32`` and friends: a dtype that, called, makes an Array."""

    def __init__(self, np_type):
        self.dtype = _np.dtype(np_type)
        self.type = np_type
        self.__name__ = self.dtype.name

    def __call__(self, x=0):
        return asarray(x, dtype=self.dtype)  # noqa: F405

    def __repr__(self):
        return f"fnx.numpy.{self.__name__}"

    def __eq__(self, other):
        if other is None:   # (np.dtype(None) is float64, but None names no dtype here)
            return False
        try:
            return self.dtype == _dtypes.canonicalize(other)
        except (TypeError, ValueError):  # not a dtype (np.dtype raises either)
            return False

    def __hash__(self):
        return hash(self.dtype)


bool_ = _ScalarType(_np.bool_)
bool = bool_
int8, int16, int32, int64 = (_ScalarType(t) for t in (_np.int8, _np.int16, _np.int32, _np.int64))
uint8, uint16, uint32, uint64 = (_ScalarType(t) for t in (_np.uint8, _np.uint16, _np.uint32,
                                                          _np.uint64))
float16, float32, float64 = (_ScalarType(t) for t in (_np.float16, _np.float32, _np.float64))
complex64, complex128 = _ScalarType(_np.complex64), _ScalarType(_np.complex128)
if _dtypes.bfloat16 is not None:
    bfloat16 = _ScalarType(_dtypes.bfloat16.type)
float_, int_, complex_ = float64, int64, complex128  # as jnp: narrowed when used, unless x64
single, double, csingle, cdouble = float32, float64, complex64, complex128
uint = uint64  # as jnp.uint (uint32 unless jax_enable_x64)
character, flexible, object_ = _np.character, _np.flexible, _np.object_  # for issubdtype
ComplexWarning = _np.exceptions.ComplexWarning

_array_module.fnp = __import__(__name__, fromlist=["_"])
from .ufuncs import attach_ufunc_methods as _attach_ufunc_methods  # noqa: E402
_attach_ufunc_methods(_array_module.fnp)   # fnp.add.outer, fnp.add.at(..., inplace=False)
save, savez, savez_compressed = _np.save, _np.savez, _np.savez_compressed  # via __array__
from ..lax.convolution import WINDOW_REDUCERS as _WINDOW_REDUCERS  # noqa: E402
_WINDOW_REDUCERS.update({add: "sum", maximum: "max", minimum: "min"})  # reduce_window(.., fnp.add)
