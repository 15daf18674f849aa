"""Dtypes and type promotion.

fnx follows JAX's promotion lattice: Python scalars are *weakly typed* (they
take the dtype of the array they meet: ``x_f32 * 2.0`` stays float32,
``int8 + 1`` stays int8), and two strongly typed dtypes promote to their least
upper bound in the lattice below, which never loses information silently
between signed and unsigned ints of the same width by jumping to floats.

Where JAX canonicalizes 64-bit types to 32 bits unless a global flag is set,
fnx keeps what it is given: an array the user passes as float64 stays float64.
Defaults (Python scalars, creation functions without a dtype) are 32-bit, as in
JAX.
"""
from __future__ import annotations

import functools

import numpy as np

try:  # bfloat16 exists only where ml_dtypes is installed (it is optional).
    import ml_dtypes as _ml_dtypes
    bfloat16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    bfloat16 = None

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

float_ = float32          # default float (Python float, creation functions)
int_ = int32              # default int
complex_ = complex64      # default complex

SUPPORTED = [bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
             float16, float32, float64, complex64, complex128]
if bfloat16 is not None:
    SUPPORTED.insert(SUPPORTED.index(float32), bfloat16)
_SUPPORTED_SET = frozenset(SUPPORTED)

# --- the lattice -----------------------------------------------------------
# Nodes are numpy dtypes plus three weak kinds standing for Python scalars.
WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = "int*", "float*", "complex*"
_WEAK_DEFAULT = {WEAK_INT: int_, WEAK_FLOAT: float_, WEAK_COMPLEX: complex_}

_EDGES = {
    bool_: [WEAK_INT],
    WEAK_INT: [uint8, int8],
    uint8: [uint16, int16], uint16: [uint32, int32], uint32: [uint64, int64],
    uint64: [WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [WEAK_FLOAT],
    WEAK_FLOAT: [float16, WEAK_COMPLEX] + ([bfloat16] if bfloat16 is not None else []),
    float16: [float32], float32: [float64, complex64], float64: [complex128],
    WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
}
if bfloat16 is not None:
    _EDGES[bfloat16] = [float32]


def _upper_sets():
    ups = {}

    def visit(node):
        if node not in ups:
            s = {node}
            for nxt in _EDGES[node]:
                s |= visit(nxt)
            ups[node] = frozenset(s)
        return ups[node]

    for node in _EDGES:
        visit(node)
    return ups


_UPPER = _upper_sets()


@functools.lru_cache(maxsize=None)
def _join(a, b):
    """Least upper bound of two lattice nodes."""
    common = _UPPER[a] & _UPPER[b]
    for c in common:
        if _UPPER[c] == common:
            return c
    raise AssertionError(f"no unique join for {a}, {b}")  # the lattice guarantees one


def _materialize(node):
    """A lattice node's concrete dtype and whether it is weak."""
    if isinstance(node, str):
        return _WEAK_DEFAULT[node], True
    return node, False


# --- public helpers ----------------------------------------------------------

def canonicalize(dtype) -> np.dtype:
    """A NumPy dtype for any dtype-like (``'float32'``, ``np.int8``, ``float``)."""
    if dtype is float:
        return float_
    if dtype is int:
        return int_
    if dtype is complex:
        return complex_
    if dtype is bool:
        return bool_
    inner = getattr(dtype, "dtype", None)
    if isinstance(inner, np.dtype) and not isinstance(dtype, np.ndarray):
        dtype = inner  # fnx.numpy scalar types (fnp.float32) and arrays carry a dtype
    try:
        d = np.dtype(dtype)
    except TypeError:
        if isinstance(dtype, str) and dtype == "bfloat16":
            raise TypeError("bfloat16 needs the optional package ml_dtypes "
                            "(pip install ml_dtypes)") from None
        raise TypeError(f"{dtype!r} is not a dtype fnx understands; use one of "
                        f"{', '.join(d.name for d in SUPPORTED)}") from None
    if d not in _SUPPORTED_SET:
        raise TypeError(f"dtype {d} is not supported by fnx; use one of "
                        f"{', '.join(s.name for s in SUPPORTED)}")
    return d


def python_scalar_dtype(x):
    """(dtype, weak) for a Python scalar, or None if ``x`` is not one.

    NumPy scalars are *not* Python scalars here, even though ``np.float64`` is
    a subclass of ``float``: they carry a real dtype and are strongly typed.
    """
    t = type(x)
    if t is bool:
        return bool_, False
    if t is int:
        return (int_ if -2**31 <= x < 2**31 else int64), True
    if t is float:
        return float_, True
    if t is complex:
        return complex_, True
    return None


def _node(dtype, weak):
    if not weak:
        return dtype
    if dtype == bool_:
        return bool_
    kind = dtype.kind
    return WEAK_INT if kind in "iu" else WEAK_FLOAT if kind == "f" else WEAK_COMPLEX


def promote_pairs(pairs):
    """Join ``(dtype, weak)`` pairs; returns ``(dtype, weak)`` of the result."""
    it = iter(pairs)
    d, w = next(it)
    node = _node(d, w)
    big_weak_int = w and d == int64
    strong_int64 = not w and d.kind in "iu" and d.itemsize == 8
    for d, w in it:
        node = _join(node, _node(d, w))
        big_weak_int |= w and d == int64
        strong_int64 |= not w and d.kind in "iu" and d.itemsize == 8
    out, weak = _materialize(node)
    if weak:
        if node == WEAK_INT and big_weak_int:
            out = int64  # a Python int beyond int32 keeps its value
        elif strong_int64 and node != WEAK_INT:
            out = float64 if node == WEAK_FLOAT else complex128  # 64-bit ints keep 64 bits
    return out, weak


def dtype_and_weak(x):
    """``(dtype, weak)`` of an Array/tracer, NumPy array/scalar, Python scalar or dtype."""
    r = python_scalar_dtype(x)
    if r is not None:
        return r
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return canonicalize(dt), bool(getattr(x, "weak_type", False))
    if isinstance(x, (list, tuple)):
        return canonicalize(np.asarray(x).dtype), False
    return canonicalize(x), False


def result_type(*args) -> np.dtype:
    """The dtype that ``args`` (arrays, scalars, dtypes) promote to."""
    if not args:
        raise ValueError("result_type needs at least one argument")
    return promote_pairs(dtype_and_weak(a) for a in args)[0]


def promote_types(a, b) -> np.dtype:
    """Promotion of two dtypes (both strongly typed), as in ``jnp.promote_types``."""
    return promote_pairs([(canonicalize(a), False), (canonicalize(b), False)])[0]


def can_cast(from_, to, casting="safe") -> bool:
    """True when ``from_`` promotes to ``to`` in the lattice (``casting='safe'``)."""
    src, dst = canonicalize(getattr(from_, "dtype", from_)), canonicalize(to)
    if casting != "safe":
        return bool(np.can_cast(src, dst, casting=casting))
    return promote_types(src, dst) == dst


def is_inexact(dtype) -> bool:
    return np.dtype(dtype).kind in "fc" or dtype == bfloat16


def is_integer(dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


class finfo(np.finfo):
    """``np.finfo`` that also accepts bfloat16 (through ml_dtypes) and fnx arrays."""

    def __new__(cls, dtype):
        dtype = getattr(dtype, "dtype", dtype)
        if bfloat16 is not None and np.dtype(dtype) == bfloat16:
            return _ml_dtypes.finfo(bfloat16)
        return np.finfo(canonicalize(dtype))


def iinfo(dtype):
    """``np.iinfo`` accepting fnx arrays and dtype-likes."""
    return np.iinfo(canonicalize(getattr(dtype, "dtype", dtype)))


SHORT_NAMES = {bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
               uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
               float16: "f16", float32: "f32", float64: "f64",
               complex64: "c64", complex128: "c128"}
if bfloat16 is not None:
    SHORT_NAMES[bfloat16] = "bf16"


def short_name(dtype) -> str:
    return SHORT_NAMES.get(dtype, str(dtype))


# --- defaults that follow jax_enable_x64 ---------------------------------------
# Code that needs a default dtype calls these (never the constants above), so the
# answer follows ``fnx.config.update("jax_enable_x64", ...)``.

def default_float() -> np.dtype:
    """float32, or float64 under ``jax_enable_x64``."""
    return float_


def default_int() -> np.dtype:
    """int32, or int64 under ``jax_enable_x64``."""
    return int_


def default_complex() -> np.dtype:
    """complex64, or complex128 under ``jax_enable_x64``."""
    return complex_


def canonical(dtype) -> np.dtype:
    """The dtype fnx makes for a requested ``dtype``: 64-bit types narrow to 32 bits
    unless ``jax_enable_x64`` is on (as in JAX)."""
    return canonicalize(dtype)
