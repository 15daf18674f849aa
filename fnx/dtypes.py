"""``fnx.dtypes``: JAX's ``jax.dtypes`` namespace.

    from fnx import dtypes
    dtypes.canonicalize_dtype(np.float64)     # float32 while jax_enable_x64 is off
    dtypes.issubdtype(dtypes.bfloat16, np.floating)   # True (NumPy says False)
    dtypes.result_type(1, 2.0, return_weak_type_flag=True)   # (float32, True)
    fnx.grad(f, allow_int=True)(3)            # an integer input's gradient has dtype float0

- ``canonicalize_dtype(dtype)``: the dtype fnx computes in for a requested dtype: Python's
  ``float``/``int``/``complex`` (and ``None``) name the default dtypes, and 64-bit dtypes
  become 32-bit while ``jax_enable_x64`` is off (silently, as in JAX; asking an
  operation for such a dtype is what warns). A dtype fnx has no arrays of (strings,
  objects) raises TypeError, where JAX returns it unchanged.
- ``issubdtype(a, b)``: ``numpy.issubdtype``, but ``bfloat16`` is a floating type, and
  the abstract ``extended``/``prng_key`` types are known. fnx's keys are raw ``uint32``
  arrays (``random.key`` and ``random.PRNGKey`` alike), so no array dtype is a
  ``prng_key``.
- ``result_type(*args, return_weak_type_flag=False)``: JAX's promotion (weak Python
  scalars, the x64 flag); the flag says whether the result is weakly typed.
- ``scalar_type_of(x)``: the Python scalar type (``bool``, ``int``, ``float``, ``complex``)
  of ``x``'s dtype.
- ``itemsize_bits(dtype)``, ``finfo``, ``iinfo``, ``float0``, ``bfloat16`` (the scalar
  type, where ``ml_dtypes`` is installed) and ``TypePromotionError``.
"""
from __future__ import annotations

import numpy as np

from .core import dtypes as _d
from .core.dtypes import TypePromotionError  # noqa: F401
from .transforms.vjp import float0

__all__ = ["TypePromotionError", "bfloat16", "canonicalize_dtype", "extended", "finfo",
           "float0", "iinfo", "issubdtype", "itemsize_bits", "prng_key", "result_type",
           "scalar_type_of"]

bfloat16 = _d.bfloat16.type if _d.bfloat16 is not None else None  # the scalar type


class extended(np.generic):
    """The abstract scalar type of JAX's extended dtypes (typed PRNG keys): only for
    ``issubdtype``. fnx has no extended dtypes, so no array's dtype is one."""


class prng_key(extended):
    """The abstract scalar type of typed PRNG keys (``issubdtype(dt, prng_key)``). fnx's
    keys are raw ``uint32[2]`` arrays, whose dtype is not a ``prng_key``."""


_PY_SCALAR = {"b": bool, "i": int, "u": int, "f": float, "c": complex}
_FLOAT_PARENTS = (np.floating, np.inexact, np.number, np.generic)


def _is_abstract(t):
    return isinstance(t, type) and issubclass(t, extended)


def _as_dtype(x, where):
    """A NumPy dtype for a dtype-like, an array or scalar (its dtype), or None (NumPy's
    default, float64)."""
    if x is None:
        return np.dtype(np.float64)
    if isinstance(x, np.dtype):
        return x
    inner = None if isinstance(x, type) else getattr(x, "dtype", None)
    if isinstance(inner, np.dtype):
        return inner
    inner = getattr(x, "dtype", None)  # fnx.numpy's scalar types (fnp.float32) carry one
    if isinstance(inner, np.dtype):
        return inner
    if isinstance(x, str) and x == "bfloat16" and bfloat16 is not None:
        return np.dtype(bfloat16)
    try:
        return np.dtype(x)
    except TypeError:
        raise TypeError(f"{where}: {x!r} is not a dtype, a scalar type or an array") from None


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """The dtype fnx computes in for ``dtype`` (see the module doc)."""
    if _is_abstract(dtype):
        if allow_extended_dtype:
            return dtype
        raise ValueError(f"canonicalize_dtype: {dtype.__name__} is an extended dtype; pass "
                         "allow_extended_dtype=True to get it back unchanged")
    if dtype is None:
        return _d.default_float()
    if isinstance(dtype, np.dtype) and dtype == float0:
        return float0
    if not isinstance(dtype, (np.dtype, str, type)) and hasattr(dtype, "dtype"):
        dtype = dtype.dtype
    d = _d.canonicalize(dtype)
    return _d.NARROW.get(d, d)


def issubdtype(a, b):
    """``numpy.issubdtype`` with bfloat16 a floating type and JAX's abstract
    ``extended``/``prng_key`` types (see the module doc)."""
    if _is_abstract(a) or _is_abstract(b):
        return _is_abstract(a) and isinstance(b, type) and issubclass(a, b)
    da = _as_dtype(a, "issubdtype")
    if da == float0:  # a type of its own: under np.generic only
        if isinstance(b, type) and issubclass(b, np.generic):
            return b is np.generic
        try:
            return _as_dtype(b, "issubdtype") == float0
        except TypeError:
            return False
    if bfloat16 is not None and da == np.dtype(bfloat16):
        if isinstance(b, type) and b in _FLOAT_PARENTS:
            return True
        if isinstance(b, type) and issubclass(b, np.generic) and b.__module__ == "numpy":
            return False  # an abstract NumPy type bfloat16 is not under (integer, ...)
        try:
            return _as_dtype(b, "issubdtype") == da
        except TypeError:
            return False
    if isinstance(b, type) and issubclass(b, np.generic):
        return bool(np.issubdtype(da, b))
    if b in (float, int, complex, bool):
        return bool(np.issubdtype(da, b))
    db = _as_dtype(b, "issubdtype")
    if bfloat16 is not None and db == np.dtype(bfloat16):
        return False
    return bool(np.issubdtype(da, db))


def result_type(*args, return_weak_type_flag=False):
    """The dtype ``args`` (arrays, Python scalars, dtypes) promote to, with JAX's rules;
    with ``return_weak_type_flag=True``, ``(dtype, weak)``."""
    if not args:
        raise ValueError("result_type: at least one array or dtype is required")
    for a in args:
        if isinstance(a, np.dtype) and a == float0:
            raise TypePromotionError("result_type: float0 (the dtype of an integer input's "
                                     "gradient) does not promote with any dtype")
    dtype, weak = _d.promote_pairs(_d.dtype_and_weak(a) for a in args)
    dtype = _d.NARROW.get(dtype, dtype)
    return (dtype, bool(weak)) if return_weak_type_flag else dtype


def scalar_type_of(x):
    """The Python scalar type (bool, int, float or complex) matching ``x``'s dtype."""
    if x is None:
        raise ValueError("scalar_type_of: got None; pass an array, a scalar or a dtype")
    if isinstance(x, (bool, int, float, complex)) and type(x) in (bool, int, float, complex):
        return type(x)
    d = x if isinstance(x, np.dtype) else getattr(x, "dtype", None)
    if d is None:
        d = np.asarray(x).dtype
    d = np.dtype(d)
    if bfloat16 is not None and d == np.dtype(bfloat16):
        return float
    kind = _PY_SCALAR.get(d.kind)
    if kind is None:
        raise TypeError(f"scalar_type_of: {x!r} has dtype {d}, which is not a numeric "
                        "dtype (bool, integer, floating or complex)")
    return kind


def _info_arg(dtype):
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        return np.dtype(dtype)  # np.float32 (the class): its .dtype is a descriptor
    if isinstance(dtype, str) and dtype == "bfloat16" and bfloat16 is not None:
        return np.dtype(bfloat16)
    return dtype


class finfo(_d.finfo):
    """Machine limits of a floating dtype (``fnx.numpy.finfo``), also given as a NumPy
    scalar type (``np.float32``) or bfloat16."""

    def __init__(self, dtype):
        super().__init__(_info_arg(dtype))


def iinfo(dtype):
    """Machine limits of an integer dtype (``fnx.numpy.iinfo``); ``min``/``max`` are
    Python ints."""
    return _d.iinfo(_info_arg(dtype))


def itemsize_bits(dtype):
    """The size of one element of ``dtype`` in bits (bool: 8)."""
    if dtype is None:
        raise ValueError("itemsize_bits: dtype cannot be None")
    d = _as_dtype(dtype, "itemsize_bits")
    if d == float0:
        raise ValueError("itemsize_bits: float0 has no storage (the dtype of an integer "
                         "input's gradient)")
    return 8 * d.itemsize
