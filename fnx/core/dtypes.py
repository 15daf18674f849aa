"""Dtypes and type promotion.

fnx follows JAX's promotion lattice: Python scalars are *weakly typed* (they
take the dtype of the array they meet: ``x_f32 * 2.0`` stays float32,
``int8 + 1`` stays int8), and two strongly typed dtypes promote to their least
upper bound in the lattice below, which never loses information silently
between signed and unsigned ints of the same width by jumping to floats.

64-bit types follow JAX's ``jax_enable_x64`` flag (``fnx.config.update(
"jax_enable_x64", True)`` or ``JAX_ENABLE_X64=1``). Off (the default), defaults
are 32-bit and 64-bit inputs and dtype requests narrow to 32 bits (float64 ->
float32, int64 -> int32, uint64 -> uint32, complex128 -> complex64); the first
narrowing in a process warns once, naming the flag (JAX warns only for explicit
dtype requests and narrows array inputs silently). On, defaults are 64-bit.
The flag can change at run time: code reads defaults through
``default_float()``, ``default_int()``, ``default_complex()`` and requested
dtypes through ``canonical(dtype)``; the module attributes ``float_``,
``int_`` and ``complex_`` also follow the flag.

``jax_numpy_dtype_promotion="strict"`` allows no implicit promotion between
different dtypes (a weakly typed Python scalar may still join an array of its
kind or a higher one: ``x_f32 * 2`` and ``x_f32 * 2.0`` work, ``x_i32 * 2.0``
does not), as in JAX; a refused promotion raises ``TypePromotionError``.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings

import numpy as np

from .._config import config

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

float_ = float32          # default float (Python float, creation functions); follows x64
int_ = int32              # default int; follows x64
complex_ = complex64      # default complex; follows x64

SUPPORTED = [bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
             float16, float32, float64, complex64, complex128]
if bfloat16 is not None:
    SUPPORTED.insert(SUPPORTED.index(float32), bfloat16)
SUPPORTED_SET = frozenset(SUPPORTED)

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


# Without x64, JAX avoids the one promotion that makes a 64-bit type from 32-bit
# inputs: uint32 with a signed int gives int32, not int64.
_EDGES_X32 = dict(_EDGES)
_EDGES_X32[uint32] = [int32, uint64]


def _upper_sets(edges):
    ups = {}

    def visit(node):
        if node not in ups:
            s = {node}
            for nxt in edges[node]:
                s |= visit(nxt)
            ups[node] = frozenset(s)
        return ups[node]

    for node in edges:
        visit(node)
    return ups


_UPPER = _upper_sets(_EDGES)
_UPPER_X32 = _upper_sets(_EDGES_X32)


def _make_join(upper):
    @functools.lru_cache(maxsize=None)
    def join(a, b):
        """Least upper bound of two lattice nodes."""
        common = upper[a] & upper[b]
        for c in common:
            if upper[c] == common:
                return c
        raise AssertionError(f"no unique join for {a}, {b}")  # the lattice guarantees one
    return join


_join_x64 = _make_join(_UPPER)
_join_x32 = _make_join(_UPPER_X32)
_join = _join_x32  # the current lattice's join; follows jax_enable_x64


def _materialize(node):
    """A lattice node's concrete dtype and whether it is weak."""
    if isinstance(node, str):
        return _WEAK_DEFAULT[node], True
    return node, False


class TypePromotionError(ValueError, TypeError):
    """Implicit promotion between two dtypes that ``jax_numpy_dtype_promotion="strict"``
    refuses (JAX's ``TypePromotionError``, a ValueError; also a TypeError here).

    Wrong, under strict promotion::

        x_f32 + y_f16                 # two different dtypes: no implicit promotion

    Fixed, by casting explicitly::

        x_f32 + y_f16.astype("float32")
    """


# --- public helpers ----------------------------------------------------------

def canonicalize(dtype) -> np.dtype:
    """A NumPy dtype for any dtype-like (``'float32'``, ``np.int8``, ``float``).

    Python's ``float``, ``int`` and ``complex`` name the default dtypes (which follow
    ``jax_enable_x64``); other 64-bit dtypes are returned as they are (``canonical``
    narrows them for a user's request)."""
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
    if d not in SUPPORTED_SET:
        raise TypeError(f"dtype {d} is not supported by fnx; use one of "
                        f"{', '.join(s.name for s in SUPPORTED)}")
    return d


_INT32_LO, _INT32_HI = -2**31, 2**31


def python_scalar_dtype(x):
    """(dtype, weak) for a Python scalar, or None if ``x`` is not one.

    NumPy scalars are *not* Python scalars here, even though ``np.float64`` is
    a subclass of ``float``: they carry a real dtype and are strongly typed. A
    Python int outside int32 is ``(int64, True)`` whatever the flag: it can still
    join a float array; made into an integer array without x64 it raises
    OverflowError (``check_python_int``).
    """
    t = type(x)
    if t is float:
        return _PY_FLOAT
    if t is int:
        return _PY_INT if _INT32_LO <= x < _INT32_HI else _PY_BIG_INT
    if t is bool:
        return _PY_BOOL
    if t is complex:
        return _PY_COMPLEX
    return None


def check_python_int(x, dtype, where="fnx"):
    """Raise OverflowError when Python int ``x`` does not fit ``dtype`` (an int dtype)."""
    info = np.iinfo(dtype)
    if not info.min <= x <= info.max:
        hint = (" (jax_enable_x64 is off, so Python ints are int32, as in JAX; "
                "fnx.config.update(\"jax_enable_x64\", True) makes them int64)"
                if not _X64 and dtype == int32 else "")
        raise OverflowError(f"{where}: Python int {x} does not fit in {dtype}{hint}")


def _node(dtype, weak):
    if not weak:
        return dtype
    if dtype == bool_:
        return bool_
    kind = dtype.kind
    return WEAK_INT if kind in "iu" else WEAK_FLOAT if kind == "f" else WEAK_COMPLEX


_WEAK_RANK = {WEAK_INT: 0, WEAK_FLOAT: 1, WEAK_COMPLEX: 2}
_STRICT_KINDS = {WEAK_INT: "iufc", WEAK_FLOAT: "fc", WEAK_COMPLEX: "c"}


def _strict_promote(pairs):
    """Promotion under ``jax_numpy_dtype_promotion="strict"``: one strong dtype, or none;
    a weak scalar joins a strong dtype of its kind or a higher one."""
    strong, weak_nodes = [], []
    for d, w in pairs:
        n = _node(d, w)
        (weak_nodes if isinstance(n, str) else strong).append(n)
    kinds = set(strong)
    ok = len(kinds) <= 1
    if ok and kinds:
        (s,) = kinds
        code = "f" if s == bfloat16 else s.kind
        ok = all(code in _STRICT_KINDS[w] for w in weak_nodes)
    if not ok:
        names = tuple(d.name if not w or d == bool_ else _WEAK_NAME[_node(d, w)]
                      for d, w in pairs)
        raise TypePromotionError(
            f"Input dtypes {names} have no available implicit dtype promotion path when "
            "jax_numpy_dtype_promotion='strict'; cast the inputs explicitly to the dtype "
            "you want (x.astype(...)), or set "
            "fnx.config.update('jax_numpy_dtype_promotion', 'standard')")
    if kinds:
        return strong[0], False
    return _materialize(max(weak_nodes, key=_WEAK_RANK.__getitem__))


_WEAK_NAME = {WEAK_INT: "int (Python scalar)", WEAK_FLOAT: "float (Python scalar)",
              WEAK_COMPLEX: "complex (Python scalar)"}


def promote_pairs(pairs):
    """Join ``(dtype, weak)`` pairs; returns ``(dtype, weak)`` of the result."""
    if _STRICT:
        return _strict_promote(list(pairs))
    it = iter(pairs)
    d, w = next(it)
    node = _node(d, w)
    big_weak_int = w and d == int64
    strong_int64 = not w and d.kind in "iu" and d.itemsize == 8
    join = _join
    for d, w in it:
        node = join(node, _node(d, w))
        big_weak_int |= w and d == int64
        strong_int64 |= not w and d.kind in "iu" and d.itemsize == 8
    out, weak = _materialize(node)
    if weak:
        if node == WEAK_INT and big_weak_int:
            if not _X64:
                raise OverflowError(
                    "a Python int outside int32 cannot be made an array while "
                    "jax_enable_x64 is off (Python ints are int32, as in JAX); use "
                    "fnx.config.update(\"jax_enable_x64\", True) or a float")
            out = int64
        elif strong_int64 and node != WEAK_INT:
            out = float64 if node == WEAK_FLOAT else complex128  # 64-bit ints keep 64 bits
    return out, weak


def dtype_and_weak(x):
    """``(dtype, weak)`` of an Array/tracer, NumPy array/scalar, Python scalar or dtype."""
    r = python_scalar_dtype(x)
    if r is not None:
        return r
    dt = None if isinstance(x, type) else getattr(x, "dtype", None)  # np.float64: a dtype
    if dt is not None:
        return canonicalize(dt), bool(getattr(x, "weak_type", False))
    if isinstance(x, (list, tuple)):
        return canonicalize(np.asarray(x).dtype), False
    return canonicalize(x), False


def result_type(*args) -> np.dtype:
    """The dtype that ``args`` (arrays, scalars, dtypes) promote to; as in JAX, a 64-bit
    result is reported as its 32-bit type while ``jax_enable_x64`` is off."""
    if not args:
        raise ValueError("result_type needs at least one argument")
    d = promote_pairs(dtype_and_weak(a) for a in args)[0]
    return NARROW.get(d, d)


def promote_types(a, b) -> np.dtype:
    """Promotion of two dtypes (both strongly typed), as in ``jnp.promote_types`` (which,
    like JAX's, does not narrow: ``promote_types(float32, float64)`` is float64)."""
    return promote_pairs([(canonicalize(a), False), (canonicalize(b), False)])[0]


def can_cast(from_, to, casting="safe") -> bool:
    """True when ``from_`` promotes to ``to`` in the lattice (``casting='safe'``)."""
    src, dst = canonicalize(getattr(from_, "dtype", from_)), canonicalize(to)
    if casting != "safe":
        return bool(np.can_cast(src, dst, casting=casting))
    return _promote_standard(src, dst) == dst


def _promote_standard(a, b):
    return _materialize(_join_x64(a, b))[0]


_TO_INEXACT = {bool_: float32, int8: float32, int16: float32, int32: float32,
               uint8: float32, uint16: float32, uint32: float32,
               int64: float64, uint64: float64}


def to_inexact(dtype) -> np.dtype:
    """The inexact dtype an integer or bool ``dtype`` computes in (``sqrt``,
    ``true_divide``, ``mean``): float32 up to 32-bit ints, float64 for 64-bit ones,
    whatever the x64 flag (as in JAX); inexact dtypes are returned as they are."""
    return _TO_INEXACT.get(dtype, dtype)


def is_inexact(dtype) -> bool:
    return np.dtype(dtype).kind in "fc" or dtype == bfloat16


def is_floating(dtype) -> bool:
    """A real floating dtype (bfloat16 included, whose NumPy kind is "V")."""
    return np.dtype(dtype).kind == "f" or dtype == bfloat16


def is_integer(dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


class finfo:
    """Machine limits of a float dtype (also bfloat16, through ml_dtypes, and fnx arrays).

    As the Array API asks, ``bits``, ``eps``, ``max``, ``min``, ``smallest_normal``
    (``tiny``), ``resolution`` and ``epsneg`` are Python ``int``/``float``; ``dtype``
    is the dtype, and the other attributes of ``numpy.finfo`` (``nmant``,
    ``precision``, ``maxexp``, ...) are there too. Python floats hold every float32 and
    float64 value exactly, so arithmetic with them keeps an array's dtype (weak typing).
    """

    _FLOATS = ("eps", "epsneg", "max", "min", "smallest_normal", "tiny", "resolution",
               "smallest_subnormal")

    def __init__(self, dtype):
        dtype = _dtype_attr(dtype)
        if bfloat16 is not None and np.dtype(dtype) == bfloat16:
            info = _ml_dtypes.finfo(bfloat16)
        else:
            d = canonicalize(dtype)
            if d.kind not in "fc":
                raise ValueError(f"finfo: {d} is not a floating point dtype; use iinfo "
                                 "for integer dtypes")
            info = np.finfo(d)
        self._info = info
        self.dtype = np.dtype(info.dtype)
        self.bits = int(info.bits)
        for name in self._FLOATS:
            setattr(self, name, float(getattr(info, name)))

    def __getattr__(self, name):  # nmant, nexp, precision, machep, maxexp, minexp, ...
        if name == "_info":
            raise AttributeError(name)
        return getattr(self._info, name)

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"dtype={self.dtype.name})")

    __str__ = __repr__


def iinfo(dtype):
    """``np.iinfo`` accepting fnx arrays and dtype-likes (its ``min``/``max`` are
    Python ints)."""
    return np.iinfo(canonicalize(_dtype_attr(dtype)))


def _dtype_attr(x):
    """``x.dtype`` for arrays and fnx.numpy scalar types; ``x`` itself otherwise. (On a
    NumPy scalar type, np.float32, ``.dtype`` is a descriptor, not a dtype.)"""
    inner = getattr(x, "dtype", None)
    return inner if isinstance(inner, np.dtype) else x


SHORT_NAMES = {bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
               uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
               float16: "f16", float32: "f32", float64: "f64",
               complex64: "c64", complex128: "c128"}
if bfloat16 is not None:
    SHORT_NAMES[bfloat16] = "bf16"


def short_name(dtype) -> str:
    return SHORT_NAMES.get(dtype, str(dtype))


# --- defaults that follow jax_enable_x64 ---------------------------------------
# Code that needs a default dtype calls these (or reads ``float_``/``int_``/
# ``complex_`` as module attributes), so the answer follows
# ``fnx.config.update("jax_enable_x64", ...)``. The flag's state lives in module
# globals that ``_set_x64`` rebinds, so the hot paths pay a global lookup.

# NARROWING: each 64-bit dtype and the 32-bit one it narrows to with x64 off. NARROW: what
# narrows now (NARROWING, or empty under x64); ``_set_x64`` rebinds it, so read it as
# ``dtypes.NARROW``, never import the name.
NARROWING = {float64: float32, int64: int32, uint64: uint32, complex128: complex64}
NARROW = dict(NARROWING)
_X64 = False
_STRICT = False
_PY_BOOL = (bool_, False)
_PY_BIG_INT = (int64, True)
_PY_INT, _PY_FLOAT, _PY_COMPLEX = (int32, True), (float32, True), (complex64, True)
_warned = False


def default_float() -> np.dtype:
    """float32, or float64 under ``jax_enable_x64``."""
    return float_


def default_int() -> np.dtype:
    """int32, or int64 under ``jax_enable_x64``."""
    return int_


def default_uint() -> np.dtype:
    """uint32, or uint64 under ``jax_enable_x64``."""
    return uint64 if _X64 else uint32


def default_complex() -> np.dtype:
    """complex64, or complex128 under ``jax_enable_x64``."""
    return complex_


def x64_enabled() -> bool:
    return _X64


def canonical(dtype, where="dtype") -> np.dtype:
    """The dtype fnx makes for a requested ``dtype``: 64-bit types narrow to 32 bits
    unless ``jax_enable_x64`` is on (as in JAX); the first narrowing warns once.
    ``where`` names the function asking, for the warning."""
    d = canonicalize(dtype)
    n = NARROW.get(d)
    if n is None:
        return d
    _warn_narrowing(d, n, where)
    return n


def narrow_value(v, where="input"):
    """A NumPy array or scalar with a 64-bit dtype narrowed to 32 bits when x64 is off
    (as JAX does with its inputs, silently); else ``v`` itself. fnx warns once, on the
    first narrowing that loses something: any float64/complex128, and 64-bit integers
    whose values do not fit in 32 bits (NumPy's int64 ``np.arange(3)`` narrows quietly)."""
    n = NARROW.get(v.dtype)
    if n is None:
        return v
    if not _warned and not (v.dtype.kind in "iu" and _fits(v, n)):
        _warn_narrowing(v.dtype, n, where)
    with np.errstate(over="ignore", invalid="ignore"):
        return v.astype(n)


def _fits(v, dtype):
    if not v.size:
        return True
    info = np.iinfo(dtype)
    return info.min <= v.min() and v.max() <= info.max


def _user_frame():
    """(filename, lineno, module globals) of the innermost caller outside fnx."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg + os.sep):
        f = f.f_back
    if f is None:
        return "<fnx>", 0, {}
    return f.f_code.co_filename, f.f_lineno, f.f_globals


def _warn_narrowing(src, dst, where):
    global _warned
    if _warned:
        return
    _warned = True
    filename, lineno, glb = _user_frame()
    warnings.warn_explicit(
        f"fnx ({where}): {src} narrowed to {dst} because jax_enable_x64 is off (fnx follows "
        "JAX: without that flag 64-bit dtypes become 32-bit). To keep 64 bits, call "
        "fnx.config.update(\"jax_enable_x64\", True) at startup or set JAX_ENABLE_X64=1. "
        "This warning is shown once per process.",
        UserWarning, filename, lineno, module=glb.get("__name__", "fnx"),
        registry=glb.setdefault("__warningregistry__", {}) if glb else None)


def reset_narrowing_warning():
    """Let the next narrowing warn again (for tests)."""
    global _warned
    _warned = False


def _set_x64(on):
    global _X64, float_, int_, complex_, NARROW, _PY_INT, _PY_FLOAT, _PY_COMPLEX, _join
    on = bool(on)
    _X64 = on
    float_, int_, complex_ = (float64, int64, complex128) if on else (float32, int32, complex64)
    _WEAK_DEFAULT.update({WEAK_INT: int_, WEAK_FLOAT: float_, WEAK_COMPLEX: complex_})
    NARROW = {} if on else dict(NARROWING)
    _PY_INT, _PY_FLOAT, _PY_COMPLEX = (int_, True), (float_, True), (complex_, True)
    _join = _join_x64 if on else _join_x32


def _set_promotion(mode):
    global _STRICT
    _STRICT = mode == "strict"


config.on_change("jax_enable_x64", _set_x64)
config.on_change("jax_numpy_dtype_promotion", _set_promotion)
_set_x64(config.values["jax_enable_x64"])
_set_promotion(config.values["jax_numpy_dtype_promotion"])
