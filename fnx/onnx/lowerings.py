"""ONNX lowerings of the built-in primitives.

``install()`` (run when ``fnx.onnx`` is imported) sets ``prim.onnx`` for every
primitive below. Each lowering reproduces its primitive's NumPy impl, which is
the definition: integer and bool results bit for bit, floating-point ones to a
few ulp (``tests/test_onnx.py`` checks every lowering against the impl on
onnxruntime). Where lax semantics differ from the ONNX operator's, the lowering
composes several nodes:

* integer ``div`` truncates and ``rem`` is C's fmod (``Mod(fmod=1)``); division by
  zero gives 0 and ``INT_MIN / -1`` wraps, as the impl does (ONNX integer ``Div``
  by 0 is undefined: the divisor is made safe first); ``floor_divide`` follows
  NumPy's ``divmod`` algorithm for floats;
* ``round`` with ``rounding_method=0`` rounds half away from zero (ONNX ``Round``
  is half to even, which ``rounding_method=1`` uses);
* ``reduce_max``/``reduce_min`` and ``argmax``/``argmin`` propagate NaN (the
  first NaN wins ``argmax``/``argmin``); ties go to the first index;
* shifts by a negative amount or past the bit width give 0 (or the sign fill),
  and work on signed integers (ONNX ``BitShift`` takes unsigned ones only);
* integer ``pow``/``integer_pow`` multiply (wrapping on overflow, as NumPy
  does) and give JAX's results for negative exponents; ``select_n`` clamps an
  int32 selector; ``sort`` is stable with NaNs last, and sorts by several keys;
* ``convert_element_type`` to bool tests ``!= 0`` (NaN is True);
* ``dynamic_slice``/``dynamic_update_slice`` clamp their starts so the window fits;
  ``gather`` wraps negative indices once and clamps, ``scatter`` drops updates aimed
  out of range (they land in a padding slot that is cut off), as the impls do;
* ``expm1``, ``log1p``, ``logaddexp``, ``cbrt``, ``atan2``, ``hypot``, ``logistic``,
  ``exp2``, ``log2``, ``log10``, ``rsqrt`` and the cumulative ``cumprod``/
  ``cummax``/``cummin`` (a log-depth scan) are composed from ONNX operators.

onnxruntime (1.32, CPU) differs from the ONNX spec or lacks kernels in places,
and the lowerings work around it without changing what the graph means:

* its float ``Where`` returns +0.0 where it selects a -0.0 from its first value
  input; float selects restore the sign (see ``_where``);
* its integer ``ReduceSum``/``ReduceProd`` saturate (int32) or round through
  double (int64); integer sums and products are a tree of ``Add``/``Mul``, which
  wraps like NumPy;
* many kernels exist for a few dtypes only (``Where`` has none for bool, int16 or
  uint64; ``Pad`` none for int16; ``TopK``/``ArgMax``/``ReduceMax`` none for
  uint16..uint64; ``Einsum``/``CumSum`` only float, double, int32, int64; ...):
  those compute in a wider dtype where that is exact (a cast there and back; for
  order-sensitive ops on uint64 the sign bit is flipped so int64 order matches);
* operators it lacks for float64 altogether (``Tan``, ``Asin``, ``Acos``, ``Atan``
  and so ``atan2``, ``Sinh``, ``Cosh``, ``Asinh``, ``Acosh``, ``Atanh``, ``Erf``) are
  emitted as the ONNX operator anyway: the model is valid ONNX and runs where the
  runtime implements them.

Primitives defined elsewhere carry their lowering beside their other rules (they
use the helpers here): ``conv_general_dilated`` (``Conv``; float only),
``reduce_window_sum/max/min`` (``Conv`` with ones, ``MaxPool``, or strided slices
per window tap) in ``fnx/lax/convolution.py``; ``cumlogsumexp`` (a log-depth scan
of logaddexp) in ``fnx/lax/reduction.py``; ``top_k`` (``TopK``) in
``fnx/lax/sorting.py``; ``cond`` (``If``), ``scan`` (``Scan``) and ``while``
(``Loop``), whose bodies become subgraphs (``LoweringContext.subgraph``), in
``fnx/lax/control_flow.py``. onnxruntime has no float64 ``Conv`` kernel either.

Left out (no lowering; exporting a function that uses them raises
``MissingRuleError``):

* ``select_and_gather_add``, ``select_and_scatter_add``: max/min pooling's
  derivatives, which appear only in differentiated functions; integer
  ``conv_general_dilated`` raises ``MissingRuleError`` (ONNX ``Conv`` is float only).
* the factorizations (``cholesky``, ``triangular_solve``, ``lu``, ``qr``, ``eigh``,
  ``svd``) and the random bits (``threefry2x32``, ``random_gamma``): no ONNX operators.
* ``fft``: every FFT type has a complex operand or result, and complex values are
  rejected (ONNX ``DFT`` packs them as a trailing axis of 2 reals; onnxruntime has no
  complex tensors).

* ``copysign``: ONNX cannot read the sign bit of a NaN (it has no bitcast), and
  NaNs made by arithmetic carry a negative sign on x86, so results would differ.
* ``nextafter``: needs the bit pattern of the float, which ONNX cannot access.
* ``erfc``: ``1 - Erf(x)`` loses all relative accuracy for large ``x``.
* ``erf_inv``, ``lgamma``, ``digamma``, ``polygamma``: no ONNX operator; a
  composed series would not stay within a few ulp of the impl.
* ``custom_lin``, ``remat_lin``: the linear halves of derivatives, which only
  appear inside linearized functions (export the primal function).

Complex dtypes are rejected by the exporter (``TypeError``): ONNX has no complex
tensor operators. ``real``, ``imag`` and ``conj`` are lowered for real operands.

Semantics that are implementation-defined in both NumPy and ONNX are left as
the runtime gives them: float to integer conversion of NaN or out-of-range
values, which zero ``max(-0.0, 0.0)`` returns, and which of several
``scatter(mode="set")`` updates aimed at one element wins (onnxruntime and
NumPy: the last).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..core.primitive import REGISTRY
from ..core.backend import lowering, register_lowering
from ..lax._rules import kind_of
from .export import onnx_dtype

BOOL = np.dtype(np.bool_)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
F16, F32, F64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
_INT64_MIN = np.iinfo(np.int64).min


def _is_float(dt):
    return kind_of(dt) == "f"


def _is_int(dt):
    return dt.kind in "iu"


# --- dtypes onnxruntime's CPU provider has kernels for (onnxruntime 1.32) --------------------
_WHERE = {F16, F32, F64, I8, U8, I32, I64, U32}
_MINMAX = {F16, F32, F64, I8, U8, I32, I64, U32, U64}
_PAD = {F32, F64, I8, U8, I32, I64, U32, U64, BOOL}
_REDUCE_ORDER = {F16, F32, F64, I8, U8, I32, I64}
_REDUCE_ARITH = {F16, F32, F64, I32, I64}
_ARGMAX = {F32, F64, I8, U8, I32, I64}
_TOPK = {F32, F64, I8, U8, I16, I32, I64}
_CUMSUM = {F32, F64, I32, I64}
_EINSUM = {F32, F64, I32, I64}
_NEG = {F16, F32, F64, I8, I16, I32, I64}
_COMPARE = {F16, F32, F64, I8, U8, I16, U16, I32, I64, U32, U64}

# Primitives whose lowering onnxruntime (1.32, CPU) cannot run for these dtypes: it has
# no float64 kernel for the operator (the model is valid ONNX all the same).
ONNXRUNTIME_GAPS = {name: frozenset({F64}) for name in (
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erf",
    "conv_general_dilated")}

# wider dtypes holding every value of a dtype exactly (tried in order)
_WIDER = {BOOL: (U8, I32), I8: (I32, I64), U8: (I32, I64), I16: (I32, I64),
          U16: (I32, I64), I32: (I64,), U32: (I64,), U64: (I64,), F16: (F32, F64)}
if dtypes.bfloat16 is not None:
    _WIDER[dtypes.bfloat16] = (F32, F64)


# --- small builders ------------------------------------------------------------------------

def _op(ctx, op_type, *inputs, **attrs):
    return ctx.node(op_type, list(inputs), **attrs)


def _k(ctx, value, dtype):
    """A scalar constant of ``dtype``."""
    return ctx.const(np.asarray(value, dtype=dtype))


def _ints(ctx, values):
    """A 1-D int64 constant (shapes, axes, pads)."""
    return ctx.const(np.asarray(list(values), dtype=np.int64).reshape(-1))


def _cast(ctx, x, src, dst):
    return x if np.dtype(src) == np.dtype(dst) else _op(ctx, "Cast", x, to=onnx_dtype(dst))


def _full(ctx, value, dtype, shape):
    """A tensor of ``shape`` filled with ``value``."""
    return _op(ctx, "Expand", _k(ctx, value, dtype), _ints(ctx, shape))


def _not(ctx, x):
    return _op(ctx, "Not", x)


def _and(ctx, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = _op(ctx, "And", out, x)
    return out


def _or(ctx, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = _op(ctx, "Or", out, x)
    return out


def _eq(ctx, x, value, dtype):
    return _op(ctx, "Equal", x, _k(ctx, value, dtype))


def _signbit(ctx, x, dtype):
    """True where the float ``x`` is negative, -0.0 included (not for NaN)."""
    zero = _k(ctx, 0, dtype)
    return _or(ctx, _op(ctx, "Less", x, zero),
               _op(ctx, "Less", _op(ctx, "Div", _k(ctx, 1, dtype), x), zero))


def _wide(dtype, supported):
    for cand in _WIDER.get(dtype, ()):
        if cand in supported:
            return cand
    raise TypeError(f"ONNX export: no exact way to compute on {dtype.name} here")


def _exact(ctx, x, dtype, supported, *, ordered=False):
    """``x`` in a dtype of ``supported`` holding its values exactly, that dtype, and a
    function converting results back to ``dtype``. With ``ordered``, uint64 (which
    has no wider type) maps to int64 with the sign bit flipped, so order is kept."""
    if dtype in supported:
        return x, dtype, (lambda y: y)
    if dtype == U64 and ordered:
        flip = _k(ctx, _INT64_MIN, I64)
        key = _op(ctx, "BitwiseXor", _cast(ctx, x, U64, I64), flip)
        return key, I64, (lambda y: _cast(ctx, _op(ctx, "BitwiseXor", y, flip), I64, U64))
    wide = _wide(dtype, supported)
    return _cast(ctx, x, dtype, wide), wide, (lambda y: _cast(ctx, y, wide, dtype))


def _where(ctx, cond, a, b, dtype, signed_zeros=True):
    """``Where(cond, a, b)`` for any dtype.

    onnxruntime's Where has no bool, int16 or uint64 kernel (those go through logic
    ops or a wider dtype), and its float kernel turns a -0.0 taken from ``a`` into
    +0.0: for floats, zero results whose selected operand is -0.0 (its reciprocal is
    negative) but which came out +0.0 are multiplied by -1. ``signed_zeros=False``
    skips that where the caller knows no -0.0 can be selected or its sign does not
    matter.
    """
    if _is_float(dtype) and signed_zeros:
        out = _op(ctx, "Where", cond, a, b)
        one, zero = _k(ctx, 1, dtype), _k(ctx, 0, dtype)
        inverse = _op(ctx, "Where", cond, _op(ctx, "Div", one, a), _op(ctx, "Div", one, b))
        lost = _and(ctx, _eq(ctx, out, 0, dtype), _op(ctx, "Less", inverse, zero),
                    _not(ctx, _op(ctx, "Less", _op(ctx, "Div", one, out), zero)))
        return _op(ctx, "Mul", out, _op(ctx, "Where", lost, _k(ctx, -1, dtype), one))
    if dtype in _WHERE:
        return _op(ctx, "Where", cond, a, b)
    if dtype == BOOL:
        return _or(ctx, _and(ctx, cond, a), _and(ctx, _not(ctx, cond), b))
    wide = _wide(dtype, _WHERE | {I64})
    return _cast(ctx, _op(ctx, "Where", cond, _cast(ctx, a, dtype, wide),
                          _cast(ctx, b, dtype, wide)), wide, dtype)


def _compare(ctx, op_type, x, y, dtype):
    if dtype not in _COMPARE:
        x, y = _cast(ctx, x, dtype, U8 if dtype == BOOL else F32), \
            _cast(ctx, y, dtype, U8 if dtype == BOOL else F32)
    return _op(ctx, op_type, x, y)


def _max(ctx, x, y, dtype, op_type="Max"):
    """Elementwise max/min, NaN propagating (as onnxruntime's Max/Min do); bool: or/and."""
    if dtype == BOOL:
        return _op(ctx, "Or" if op_type == "Max" else "And", x, y)
    if dtype in _MINMAX:
        return _op(ctx, op_type, x, y)
    xs, _, back = _exact(ctx, x, dtype, _MINMAX, ordered=True)
    ys, _, _ = _exact(ctx, y, dtype, _MINMAX, ordered=True)
    return back(_op(ctx, op_type, xs, ys))


def _pad(ctx, x, pads, value, dtype):
    """``Pad`` (constant mode) for any dtype; ``pads`` a name or a list of ints."""
    pads = pads if isinstance(pads, str) else _ints(ctx, pads)
    if dtype in _PAD:
        return _op(ctx, "Pad", x, pads, value)
    xs, wide, back = _exact(ctx, x, dtype, _PAD)
    return back(_op(ctx, "Pad", xs, pads, _cast(ctx, value, dtype, wide)))


# --- unary elementwise ------------------------------------------------------------------------

_SIMPLE_UNARY = {
    "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "reciprocal": "Reciprocal", "sin": "Sin",
    "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
    "cosh": "Cosh", "tanh": "Tanh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
    "erf": "Erf", "floor": "Floor", "ceil": "Ceil", "abs": "Abs", "sign": "Sign",
    "isnan": "IsNaN", "isinf": "IsInf",
}


def _simple_unary(op_type):
    def lower(ctx, x):
        return _op(ctx, op_type, x)
    lower.__name__ = f"lower_{op_type}"
    return lower


def _identity(ctx, x):
    return x


def _lower_imag(ctx, x):
    # real operands only (complex is rejected): the imaginary part is 0
    out = ctx.out_avals[0]
    return _full(ctx, 0, out.dtype, out.shape)


def _lower_neg(ctx, x):
    dt = ctx.in_avals[0].dtype
    if dt in _NEG:
        return _op(ctx, "Neg", x)
    return _op(ctx, "Sub", _k(ctx, 0, dt), x)   # unsigned: wraps, as NumPy's negative


def _lower_not(ctx, x):
    return _op(ctx, "Not" if ctx.in_avals[0].dtype == BOOL else "BitwiseNot", x)


def _lower_is_finite(ctx, x):
    return _not(ctx, _or(ctx, _op(ctx, "IsNaN", x), _op(ctx, "IsInf", x)))


def _lower_square(ctx, x):
    return _op(ctx, "Mul", x, x)


def _lower_rsqrt(ctx, x):
    return _op(ctx, "Div", _k(ctx, 1, ctx.in_avals[0].dtype), _op(ctx, "Sqrt", x))


def _lower_exp2(ctx, x):
    return _op(ctx, "Pow", _k(ctx, 2, ctx.in_avals[0].dtype), x)


def _log_base(base):
    def lower(ctx, x):
        dt = ctx.in_avals[0].dtype
        return _op(ctx, "Div", _op(ctx, "Log", x), _k(ctx, math.log(base), dt))
    lower.__name__ = f"lower_log{base}"
    return lower


def _expm1(ctx, x, dt):
    """exp(x) - 1 without cancellation (Kahan): with u = exp(x) rounded,
    (u - 1) * (x / log(u)) corrects the rounding of u."""
    u = _op(ctx, "Exp", x)
    um1 = _op(ctx, "Sub", u, _k(ctx, 1, dt))
    general = _op(ctx, "Mul", um1, _op(ctx, "Div", x, _op(ctx, "Log", u)))
    # (general is nonzero where it is used: only the last select can pass a -0.0)
    out = _where(ctx, _op(ctx, "IsInf", u), u, general, dt, signed_zeros=False)  # +inf
    out = _where(ctx, _eq(ctx, um1, -1, dt), um1, out, dt, signed_zeros=False)   # u = 0
    return _where(ctx, _eq(ctx, um1, 0, dt), x, out, dt)      # u = 1: x (keeps -0.0)


def _log1p(ctx, x, dt):
    """log(1 + x) without cancellation (Goldberg): with u = 1 + x rounded,
    log(u) * (x / (u - 1)) corrects the rounding of u."""
    u = _op(ctx, "Add", x, _k(ctx, 1, dt))
    d = _op(ctx, "Sub", u, _k(ctx, 1, dt))
    general = _op(ctx, "Mul", _op(ctx, "Log", u), _op(ctx, "Div", x, d))
    out = _where(ctx, _op(ctx, "IsInf", u, detect_negative=0), u, general, dt,
                 signed_zeros=False)                                   # x = +inf
    return _where(ctx, _eq(ctx, d, 0, dt), x, out, dt)        # u = 1: x (keeps -0.0)


def _lower_expm1(ctx, x):
    return _expm1(ctx, x, ctx.in_avals[0].dtype)


def _lower_log1p(ctx, x):
    return _log1p(ctx, x, ctx.in_avals[0].dtype)


def _lower_cbrt(ctx, x):
    """|x| ** (1/3) refined by one Newton step (the rounded exponent 1/3 costs up to
    ~|log x| * 1e-8 relative), with the sign of x; 0, inf and NaN pass through."""
    dt = ctx.in_avals[0].dtype
    ax = _op(ctx, "Abs", x)
    y = _op(ctx, "Pow", ax, _k(ctx, 1 / 3, dt))
    step = _op(ctx, "Sub", y, _op(ctx, "Div", ax, _op(ctx, "Mul", y, y)))
    y = _op(ctx, "Sub", y, _op(ctx, "Div", step, _k(ctx, 3, dt)))
    y = _where(ctx, _op(ctx, "Less", x, _k(ctx, 0, dt)), _op(ctx, "Neg", y), y, dt,
               signed_zeros=False)                # y != 0 here (x = 0 is passed through)
    special = _or(ctx, _eq(ctx, x, 0, dt), _op(ctx, "IsInf", x))
    return _where(ctx, special, x, y, dt)


def _lower_logistic(ctx, x):
    # the impl's formula: e = exp(-|x|); 1 / (1 + e) for x >= 0, else e / (1 + e)
    dt = ctx.in_avals[0].dtype
    e = _op(ctx, "Exp", _op(ctx, "Neg", _op(ctx, "Abs", x)))
    den = _op(ctx, "Add", _k(ctx, 1, dt), e)
    return _where(ctx, _op(ctx, "GreaterOrEqual", x, _k(ctx, 0, dt)),
                  _op(ctx, "Div", _k(ctx, 1, dt), den), _op(ctx, "Div", e, den), dt,
                  signed_zeros=False)                 # both are >= +0.0


def _lower_round(ctx, x, *, rounding_method=0):
    if rounding_method == 1:
        return _op(ctx, "Round", x)          # ONNX Round: half to even
    # half away from zero, as the impl: r = trunc(x); r + sign(x) where |x - r| >= 0.5
    dt = ctx.in_avals[0].dtype
    r = _where(ctx, _op(ctx, "Less", x, _k(ctx, 0, dt)), _op(ctx, "Ceil", x),
               _op(ctx, "Floor", x), dt)
    up = _op(ctx, "GreaterOrEqual", _op(ctx, "Abs", _op(ctx, "Sub", x, r)), _k(ctx, 0.5, dt))
    return _where(ctx, up, _op(ctx, "Add", r, _op(ctx, "Sign", x)), r, dt)


def _int_power_static(ctx, x, y, dt, shape):
    """x ** y for a Python int y >= 0 by repeated squaring (wraps like NumPy)."""
    if y == 0:
        return _full(ctx, 1, dt, shape)
    result, base = None, x
    while True:
        if y & 1:
            result = base if result is None else _op(ctx, "Mul", result, base)
        y >>= 1
        if not y:
            return result
        base = _op(ctx, "Mul", base, base)


def _negative_power(ctx, x, odd, dt, shape):
    """Integer x ** y for y < 0 (JAX's rule): 1 for x == 1, (-1) ** y for x == -1, else 0.
    ``odd``: a bool name (or Python bool) telling whether y is odd."""
    one, zero = _full(ctx, 1, dt, shape), _full(ctx, 0, dt, shape)
    out = zero
    if dt.kind == "i":
        if isinstance(odd, bool):
            minus = _k(ctx, -1 if odd else 1, dt)
        else:
            minus = _where(ctx, odd, _k(ctx, -1, dt), _k(ctx, 1, dt), dt)
        out = _where(ctx, _eq(ctx, x, -1, dt), minus, out, dt)
    return _where(ctx, _eq(ctx, x, 1, dt), one, out, dt)


def _lower_integer_pow(ctx, x, *, y):
    a = ctx.in_avals[0]
    dt = a.dtype
    if _is_int(dt):
        if y >= 0:
            return _int_power_static(ctx, x, y, dt, a.shape)
        return _negative_power(ctx, x, bool(y % 2), dt, a.shape)
    if y == 2:
        return _op(ctx, "Mul", x, x)          # the impl uses np.square for y == 2
    return _op(ctx, "Pow", x, _k(ctx, y, dt))


# --- binary elementwise -----------------------------------------------------------------------

def _simple_binary(op_type):
    def lower(ctx, x, y):
        return _op(ctx, op_type, x, y)
    lower.__name__ = f"lower_{op_type}"
    return lower


def _logic(bool_op, int_op):
    def lower(ctx, x, y):
        return _op(ctx, bool_op if ctx.in_avals[0].dtype == BOOL else int_op, x, y)
    lower.__name__ = f"lower_{bool_op}"
    return lower


def _comparison(op_type, negate=False):
    def lower(ctx, x, y):
        out = _compare(ctx, op_type, x, y, ctx.in_avals[0].dtype)
        return _not(ctx, out) if negate else out
    lower.__name__ = f"lower_{op_type}"
    return lower


def _lower_eq(ctx, x, y):
    return _op(ctx, "Equal", x, y)


def _lower_ne(ctx, x, y):
    return _not(ctx, _op(ctx, "Equal", x, y))


def _extremum(op_type):
    def lower(ctx, x, y):
        return _max(ctx, x, y, ctx.in_avals[0].dtype, op_type)
    lower.__name__ = f"lower_{op_type}"
    return lower


def _safe_divisor(ctx, y, dt):
    """(y == 0, y == -1 or None, divisor): the divisor with 0 and -1 replaced by 1, so
    integer Div/Mod never divides by zero or overflows (INT_MIN / -1)."""
    zero = _eq(ctx, y, 0, dt)
    minus_one = _eq(ctx, y, -1, dt) if dt.kind == "i" else None
    bad = zero if minus_one is None else _or(ctx, zero, minus_one)
    return zero, minus_one, _where(ctx, bad, _k(ctx, 1, dt), y, dt)


def _int_quotient(ctx, x, y, dt, floor):
    zero, minus_one, ys = _safe_divisor(ctx, y, dt)
    q = _op(ctx, "Div", x, ys)                       # truncates toward zero
    if floor and dt.kind == "i":
        r = _op(ctx, "Mod", x, ys, fmod=1)
        signs_differ = _op(ctx, "Xor", _op(ctx, "Less", x, _k(ctx, 0, dt)),
                           _op(ctx, "Less", ys, _k(ctx, 0, dt)))
        fix = _and(ctx, _not(ctx, _eq(ctx, r, 0, dt)), signs_differ)
        q = _op(ctx, "Sub", q, _cast(ctx, fix, BOOL, dt))
    if minus_one is not None:                        # x / -1 = -x (INT_MIN wraps)
        q = _where(ctx, minus_one, _op(ctx, "Sub", _k(ctx, 0, dt), x), q, dt)
    return _where(ctx, zero, _k(ctx, 0, dt), q, dt)  # x / 0 = 0, as NumPy


def _lower_div(ctx, x, y):
    dt = ctx.in_avals[0].dtype
    if _is_int(dt):
        return _int_quotient(ctx, x, y, dt, floor=False)
    return _op(ctx, "Div", x, y)


def _lower_rem(ctx, x, y):
    dt = ctx.in_avals[0].dtype
    if _is_int(dt):
        _, _, ys = _safe_divisor(ctx, y, dt)          # x % 0 = 0 and x % -1 = 0
        return _op(ctx, "Mod", x, ys, fmod=1)
    return _op(ctx, "Mod", x, y, fmod=1)


def _lower_floor_divide(ctx, x, y):
    dt = ctx.in_avals[0].dtype
    if _is_int(dt):
        return _int_quotient(ctx, x, y, dt, floor=True)
    # NumPy's npy_floor_divide / npy_divmod, step by step
    k = lambda v: _k(ctx, v, dt)  # noqa: E731
    mod = _op(ctx, "Mod", x, y, fmod=1)
    div = _op(ctx, "Div", _op(ctx, "Sub", x, mod), y)
    adjust = _and(ctx, _not(ctx, _eq(ctx, mod, 0, dt)),
                  _op(ctx, "Xor", _op(ctx, "Less", y, k(0)), _op(ctx, "Less", mod, k(0))))
    div = _where(ctx, adjust, _op(ctx, "Sub", div, k(1)), div, dt)
    floor = _op(ctx, "Floor", div)
    floor = _where(ctx, _op(ctx, "Greater", _op(ctx, "Sub", div, floor), k(0.5)),
                   _op(ctx, "Add", floor, k(1)), floor, dt)
    quotient = _op(ctx, "Div", x, y)
    signed_zero = _where(ctx, _signbit(ctx, quotient, dt), k(-0.0), k(0.0), dt)
    out = _where(ctx, _eq(ctx, div, 0, dt), signed_zero, floor, dt)
    return _where(ctx, _eq(ctx, y, 0, dt), quotient, out, dt)


def _lower_pow(ctx, x, y):
    a = ctx.out_avals[0]
    dt = a.dtype
    if not _is_int(dt):
        return _op(ctx, "Pow", x, y)
    # integers: square and multiply over the bits of max(y, 0), wrapping like NumPy
    shape = a.shape
    x = _op(ctx, "Expand", x, _ints(ctx, shape))
    y_pos = _max(ctx, y, _k(ctx, 0, dt), dt) if dt.kind == "i" else y
    nbits = dt.itemsize * 8 - (1 if dt.kind == "i" else 0)
    result, base = _full(ctx, 1, dt, shape), x
    for bit in range(nbits):
        set_ = _not(ctx, _eq(ctx, _op(ctx, "BitwiseAnd", y_pos, _k(ctx, 1 << bit, dt)), 0, dt))
        result = _where(ctx, set_, _op(ctx, "Mul", result, base), result, dt)
        if bit < nbits - 1:
            base = _op(ctx, "Mul", base, base)
    if dt.kind == "u":
        return result
    odd = _not(ctx, _eq(ctx, _op(ctx, "BitwiseAnd", y, _k(ctx, 1, dt)), 0, dt))
    negative = _op(ctx, "Less", y, _k(ctx, 0, dt))
    return _where(ctx, negative, _negative_power(ctx, x, odd, dt, shape), result, dt)


def _lower_atan2(ctx, x, y):
    """atan2(x, y) (x the numerator, as np.arctan2): Atan(x / y), moved by +-pi when y
    is negative (-0.0 included); both zero or both infinite are first replaced by
    values with the same signs (+-0 / +-1, +-1 / +-1) that give the IEEE results."""
    dt = ctx.in_avals[0].dtype
    k = lambda v: _k(ctx, v, dt)  # noqa: E731
    neg_x, neg_y = _signbit(ctx, x, dt), _signbit(ctx, y, dt)
    unit_x = _where(ctx, neg_x, k(-1), k(1), dt, signed_zeros=False)
    unit_y = _where(ctx, neg_y, k(-1), k(1), dt, signed_zeros=False)
    both_inf = _and(ctx, _op(ctx, "IsInf", x), _op(ctx, "IsInf", y))
    both_zero = _and(ctx, _eq(ctx, x, 0, dt), _eq(ctx, y, 0, dt))
    num = _where(ctx, both_inf, unit_x, x, dt)
    den = _where(ctx, _or(ctx, both_inf, both_zero), unit_y, y, dt)
    t = _op(ctx, "Atan", _op(ctx, "Div", num, den))
    shift = _where(ctx, neg_x, k(-math.pi), k(math.pi), dt, signed_zeros=False)
    return _where(ctx, neg_y, _op(ctx, "Add", t, shift), t, dt)


def _lower_hypot(ctx, x, y):
    """m * sqrt(1 + (n / m) ** 2) with m = max(|x|, |y|), n = min: no overflow; inf
    wins over NaN, as C's hypot."""
    dt = ctx.in_avals[0].dtype
    ax, ay = _op(ctx, "Abs", x), _op(ctx, "Abs", y)
    m, n = _op(ctx, "Max", ax, ay), _op(ctx, "Min", ax, ay)
    r = _op(ctx, "Div", n, m)
    h = _op(ctx, "Mul", m, _op(ctx, "Sqrt", _op(ctx, "Add", _k(ctx, 1, dt),
                                                  _op(ctx, "Mul", r, r))))
    h = _where(ctx, _eq(ctx, m, 0, dt), _k(ctx, 0, dt), h, dt, signed_zeros=False)  # >= +0
    inf = _or(ctx, _op(ctx, "IsInf", x), _op(ctx, "IsInf", y))
    return _where(ctx, inf, _k(ctx, np.inf, dt), h, dt, signed_zeros=False)


def _lower_logaddexp(ctx, x, y):
    return _logaddexp(ctx, x, y, ctx.in_avals[0].dtype)


def _logaddexp(ctx, x, y, dt):
    """NumPy's npy_logaddexp: x + ln 2 where x == y (equal infinities), else
    max + log1p(exp(-|x - y|)); NaN where x - y is NaN."""
    d = _op(ctx, "Sub", x, y)
    pos = _op(ctx, "Greater", d, _k(ctx, 0, dt))
    # no result is -0.0: a zero comes from adding the tail (>= +0.0) to a zero
    big = _where(ctx, pos, x, y, dt, signed_zeros=False)
    tail = _log1p(ctx, _op(ctx, "Exp", _op(ctx, "Neg", _op(ctx, "Abs", d))), dt)
    out = _op(ctx, "Add", big, tail)
    out = _where(ctx, _op(ctx, "IsNaN", d), d, out, dt, signed_zeros=False)
    return _where(ctx, _op(ctx, "Equal", x, y), _op(ctx, "Add", x, _k(ctx, math.log(2), dt)),
                  out, dt, signed_zeros=False)


def _shift(kind):
    def lower(ctx, x, s):
        dt = ctx.out_avals[0].dtype
        bits = dt.itemsize * 8
        u = np.dtype(f"u{dt.itemsize}")
        big = _op(ctx, "GreaterOrEqual", s, _k(ctx, bits, dt))
        if dt.kind == "i":
            big = _or(ctx, big, _op(ctx, "Less", s, _k(ctx, 0, dt)))
        s_ok = _cast(ctx, _where(ctx, big, _k(ctx, 0, dt), s, dt), dt, u)
        zero = _k(ctx, 0, dt)
        if kind == "left":
            r = _op(ctx, "BitShift", _cast(ctx, x, dt, u), s_ok, direction="LEFT")
            return _where(ctx, big, zero, _cast(ctx, r, u, dt), dt)
        if kind == "logical" or dt.kind == "u":
            r = _op(ctx, "BitShift", _cast(ctx, x, dt, u), s_ok, direction="RIGHT")
            return _where(ctx, big, zero, _cast(ctx, r, u, dt), dt)
        # arithmetic shift of a signed value: shift ~x for negative x and invert back
        neg = _op(ctx, "Less", x, zero)
        flipped = _where(ctx, neg, _op(ctx, "BitwiseNot", x), x, dt)
        r = _cast(ctx, _op(ctx, "BitShift", _cast(ctx, flipped, dt, u), s_ok,
                           direction="RIGHT"), u, dt)
        r = _where(ctx, neg, _op(ctx, "BitwiseNot", r), r, dt)
        fill = _where(ctx, neg, _k(ctx, -1, dt), zero, dt)
        return _where(ctx, big, fill, r, dt)
    lower.__name__ = f"lower_shift_{kind}"
    return lower


# --- select, clamp, convert -------------------------------------------------------------------

def _lower_select_n(ctx, which, *cases):
    dt = ctx.out_avals[0].dtype
    if len(cases) == 1:
        return cases[0]
    if ctx.in_avals[0].dtype == BOOL:
        return _where(ctx, which, cases[1], cases[0], dt)
    n = len(cases)
    w = _op(ctx, "Max", _op(ctx, "Min", which, _k(ctx, n - 1, I32)), _k(ctx, 0, I32))
    out = cases[-1]
    for i in range(n - 2, -1, -1):
        out = _where(ctx, _eq(ctx, w, i, I32), cases[i], out, dt)
    return out


def _lower_clamp(ctx, lo, x, hi):
    dt = ctx.out_avals[0].dtype
    return _max(ctx, _max(ctx, x, lo, dt, "Max"), hi, dt, "Min")


def _lower_convert(ctx, x, *, new_dtype, weak_type=False):
    src, dst = ctx.in_avals[0].dtype, np.dtype(new_dtype)
    if src == dst:
        return x
    if dst == BOOL:                       # nonzero is True (NaN included), as astype(bool)
        return _not(ctx, _eq(ctx, x, 0, src))
    return _cast(ctx, x, src, dst)


# --- shapes -------------------------------------------------------------------------------------

def _reshape(ctx, x, shape):
    return _op(ctx, "Reshape", x, _ints(ctx, shape), allowzero=1)


def _lower_broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions):
    a = ctx.in_avals[0]
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = a.shape[i]
    if tuple(expanded) != a.shape:
        x = _reshape(ctx, x, expanded)
    if tuple(expanded) == tuple(shape):
        return x
    return _op(ctx, "Expand", x, _ints(ctx, shape))


def _lower_reshape(ctx, x, *, new_sizes, dimensions=None):
    if dimensions is not None and tuple(dimensions) != tuple(range(len(dimensions))):
        x = _op(ctx, "Transpose", x, perm=list(dimensions))
    return _reshape(ctx, x, new_sizes)


def _lower_transpose(ctx, x, *, permutation):
    return _op(ctx, "Transpose", x, perm=list(permutation))


def _lower_squeeze(ctx, x, *, dimensions):
    nd = ctx.in_avals[0].ndim
    return _op(ctx, "Squeeze", x, _ints(ctx, sorted(d % nd for d in dimensions)))


def _lower_expand_dims(ctx, x, *, dimensions):
    nd = ctx.out_avals[0].ndim
    return _op(ctx, "Unsqueeze", x, _ints(ctx, sorted(d % nd for d in dimensions)))


def _lower_rev(ctx, x, *, dimensions):
    nd = ctx.in_avals[0].ndim
    axes = sorted({d % nd for d in dimensions})
    if not axes:
        return x
    return _op(ctx, "Slice", x, _ints(ctx, [-1] * len(axes)),
               _ints(ctx, [_INT64_MIN] * len(axes)), _ints(ctx, axes),
               _ints(ctx, [-1] * len(axes)))


def _lower_concatenate(ctx, *xs, dimension):
    return _op(ctx, "Concat", *xs, axis=int(dimension))


def _slice(ctx, x, starts, ends, axes, steps=None):
    args = [x, _ints(ctx, starts), _ints(ctx, ends), _ints(ctx, axes)]
    if steps is not None:
        args.append(_ints(ctx, steps))
    return _op(ctx, "Slice", *args)


def _lower_pad(ctx, x, value, *, padding_config):
    a = ctx.in_avals[0]
    return _pad_config(ctx, x, a.shape, padding_config, value, a.dtype)


def _pad_config(ctx, x, shape, padding_config, value, dt):
    """lax.pad of ``x`` (of ``shape``): (low, high, interior) per dimension, negative
    low/high crop; ``value`` is a scalar value name of ``dt``."""
    shape = list(shape)
    # interior padding, one dimension at a time: (n,) -> (n, 1) -> pad to (n, 1 + it)
    # -> (n * (1 + it),) -> drop the trailing `it` values
    for d, (_, _, it) in enumerate(padding_config):
        n = shape[d]
        if it <= 0 or n <= 1:
            continue
        x = _op(ctx, "Unsqueeze", x, _ints(ctx, [d + 1]))
        pads = [0] * (2 * (len(shape) + 1))
        pads[len(shape) + 1 + d + 1] = it
        x = _pad(ctx, x, pads, value, dt)
        merged = shape[:d] + [n * (1 + it)] + shape[d + 1:]
        x = _reshape(ctx, x, merged)
        size = n + (n - 1) * it
        x = _slice(ctx, x, [0], [size], [d])
        shape[d] = size
    # edge padding: positive amounts grow, negative ones crop
    if any(lo > 0 or hi > 0 for lo, hi, _ in padding_config):
        pads = [max(lo, 0) for lo, _, _ in padding_config] + \
            [max(hi, 0) for _, hi, _ in padding_config]
        x = _pad(ctx, x, pads, value, dt)
        shape = [n + max(lo, 0) + max(hi, 0) for n, (lo, hi, _) in zip(shape, padding_config)]
    crop = [(d, -min(lo, 0), n + min(hi, 0)) for d, (n, (lo, hi, _))
            in enumerate(zip(shape, padding_config)) if lo < 0 or hi < 0]
    if crop:
        x = _slice(ctx, x, [c[1] for c in crop], [c[2] for c in crop], [c[0] for c in crop])
    return x


def _lower_slice(ctx, x, *, start_indices, limit_indices, strides=None):
    nd = ctx.in_avals[0].ndim
    if nd == 0:
        return x
    return _slice(ctx, x, start_indices, limit_indices, range(nd),
                  strides if strides is not None else [1] * nd)


def _index_int64(ctx, i, dt, bound):
    """An integer index as int64; uint64 values are first capped at ``bound`` (>= every
    valid index) so the cast cannot wrap them negative."""
    if dt == U64:
        i = _op(ctx, "Min", i, _k(ctx, bound, U64))
    return _cast(ctx, i, dt, I64)


def _clamped_starts(ctx, starts, start_avals, x_shape, sizes):
    """The impl's window starts: each clamped into [0, n - size]; a 1-D int64 tensor."""
    parts = []
    for s, a, n, z in zip(starts, start_avals, x_shape, sizes):
        s = _index_int64(ctx, s, a.dtype, n)
        s = _op(ctx, "Max", _op(ctx, "Min", s, _k(ctx, n - z, I64)), _k(ctx, 0, I64))
        parts.append(_op(ctx, "Unsqueeze", s, _ints(ctx, [0])))
    return parts[0] if len(parts) == 1 else _op(ctx, "Concat", *parts, axis=0)


def _lower_dynamic_slice(ctx, x, *starts, slice_sizes):
    a = ctx.in_avals[0]
    if a.ndim == 0:
        return x
    begin = _clamped_starts(ctx, starts, ctx.in_avals[1:], a.shape, slice_sizes)
    end = _op(ctx, "Add", begin, _ints(ctx, slice_sizes))
    return _op(ctx, "Slice", x, begin, end, _ints(ctx, range(a.ndim)))


def _lower_dynamic_update_slice(ctx, x, update, *starts):
    a, u = ctx.in_avals[0], ctx.in_avals[1]
    if a.ndim == 0:
        return update
    dt = a.dtype
    begin = _clamped_starts(ctx, starts, ctx.in_avals[2:], a.shape, u.shape)
    end = _op(ctx, "Sub", _ints(ctx, [n - z for n, z in zip(a.shape, u.shape)]), begin)
    pads = _op(ctx, "Concat", begin, end, axis=0)
    placed = _pad(ctx, update, pads, _k(ctx, 0, dt), dt)
    inside = _pad(ctx, _full(ctx, True, BOOL, u.shape), pads, _k(ctx, False, BOOL), BOOL)
    return _where(ctx, inside, placed, x, dt)


def _lower_iota(ctx, *, dtype, shape, dimension):
    n = shape[dimension]
    r = _op(ctx, "Range", _k(ctx, 0, I64), _k(ctx, n, I64), _k(ctx, 1, I64))
    r = _cast(ctx, r, I64, dtype)
    r = _reshape(ctx, r, [n if i == dimension else 1 for i in range(len(shape))])
    if any(s != 1 for i, s in enumerate(shape) if i != dimension):
        r = _op(ctx, "Expand", r, _ints(ctx, shape))
    return r


# --- reductions ----------------------------------------------------------------------------------

def _reduce_axes(axes, ndim):
    return sorted({a % ndim for a in axes})


def _arithmetic(ctx, x, dt, supported):
    """``x`` in a dtype of ``supported`` for sums and products, and the way back.
    Integers wrap, so narrow or unsigned ones are computed in int64 and cast back (the
    same value modulo 2**bits); bfloat16/float16 without a kernel use float32."""
    if dt in supported:
        return x, (lambda y: y)
    if _is_int(dt):
        return _cast(ctx, x, dt, I64), (lambda y: _cast(ctx, y, I64, dt))
    xs, _, back = _exact(ctx, x, dt, supported)
    return xs, back


def _tree_reduce(ctx, x, shape, axes, combine):
    """``x`` (of ``shape``) reduced over ``axes`` (sorted, nonempty, none empty) by a
    log-depth tree of ``combine(a, b)``: the reduced elements are moved last and
    flattened, then halves are combined until one is left."""
    kept = [d for d in range(len(shape)) if d not in axes]
    n = math.prod(shape[d] for d in axes)
    if kept + list(axes) != list(range(len(shape))):
        x = _op(ctx, "Transpose", x, perm=kept + list(axes))
    out_shape = [shape[d] for d in kept]
    x = _reshape(ctx, x, out_shape + [n])
    last = len(out_shape)
    while n > 1:
        h = n // 2
        y = combine(_slice(ctx, x, [0], [h], [last]), _slice(ctx, x, [h], [2 * h], [last]))
        if n % 2:
            y = _op(ctx, "Concat", y, _slice(ctx, x, [2 * h], [n], [last]), axis=last)
        x, n = y, n - h
    return _op(ctx, "Squeeze", x, _ints(ctx, [last]))


def _reduction(name, body, identity):
    """The lowering of a reduce_* primitive from ``body(ctx, x, a, axes)`` (``a`` the
    input's aval, ``axes`` normalised and sorted): a reduction over no axes is ``x``
    itself, and one over an empty axis is ``identity(dtype)`` filled in, unless that
    is None (then ``body`` handles it)."""
    def lower(ctx, x, *, axes):
        a, out = ctx.in_avals[0], ctx.out_avals[0]
        axes = _reduce_axes(axes, a.ndim)
        if not axes:
            return x
        if any(a.shape[d] == 0 for d in axes):
            value = identity(a.dtype)
            if value is not None:
                return _full(ctx, value, a.dtype, out.shape)
        return body(ctx, x, a, axes)
    lower.__name__ = name
    return lower


def _reduce_arith(op_type):
    """reduce_sum / reduce_prod. Floats use ReduceSum/ReduceProd; integers a tree of
    Add/Mul, which wraps exactly like NumPy (onnxruntime's integer ReduceSum and
    ReduceProd saturate or round through double)."""
    combine_op = {"ReduceSum": "Add", "ReduceProd": "Mul"}[op_type]
    identity = {"ReduceSum": 0, "ReduceProd": 1}[op_type]

    def body(ctx, x, a, axes):
        if _is_int(a.dtype):
            return _tree_reduce(ctx, x, a.shape, axes,
                                lambda u, v: _op(ctx, combine_op, u, v))
        xs, back = _arithmetic(ctx, x, a.dtype, _REDUCE_ARITH)
        return back(_op(ctx, op_type, xs, _ints(ctx, axes), keepdims=0))
    return _reduction(f"lower_{op_type}", body,
                      lambda dt: identity if _is_int(dt) else None)


def _reduce_extreme(which):
    op_type = "ReduceMax" if which == "max" else "ReduceMin"

    def body(ctx, x, a, axes):
        dt = a.dtype
        xs, _, back = _exact(ctx, x, dt, _REDUCE_ORDER, ordered=True)
        r = back(_op(ctx, op_type, xs, _ints(ctx, axes), keepdims=0))
        if _is_float(dt):                         # ReduceMax/Min skip NaNs: put them back
            has_nan = _any(ctx, _op(ctx, "IsNaN", x), axes)
            r = _where(ctx, has_nan, _k(ctx, np.nan, dt), r, dt)
        return r

    def identity(dt):   # an empty reduction: the identity
        from ..lax.reduction import _identity
        return _identity(dt, which)
    return _reduction(f"lower_reduce_{which}", body, identity)


def _any(ctx, mask, axes, keepdims=0):
    """Whether any element of the bool ``mask`` along ``axes`` is True."""
    r = _op(ctx, "ReduceMax", _cast(ctx, mask, BOOL, U8), _ints(ctx, axes), keepdims=keepdims)
    return _cast(ctx, r, U8, BOOL)


def _reduce_bitwise(which):
    """reduce_and / reduce_or: bool via ReduceMin/ReduceMax; integers by a log-depth tree
    of BitwiseAnd/BitwiseOr over the reduced elements (ONNX has no bitwise reduce)."""
    def body(ctx, x, a, axes):
        if a.dtype == BOOL:
            op_type = "ReduceMin" if which == "and" else "ReduceMax"
            r = _op(ctx, op_type, _cast(ctx, x, BOOL, U8), _ints(ctx, axes), keepdims=0)
            return _cast(ctx, r, U8, BOOL)
        op_type = "BitwiseAnd" if which == "and" else "BitwiseOr"
        return _tree_reduce(ctx, x, a.shape, axes, lambda u, v: _op(ctx, op_type, u, v))

    def identity(dt):   # integers: all bits / none (bool is handled by the body)
        return None if dt == BOOL else np.array(-1 if which == "and" else 0).astype(dt)
    return _reduction(f"lower_reduce_{which}", body, identity)


def _arg_extreme(which):
    op_type = "ArgMax" if which == "max" else "ArgMin"

    def lower(ctx, x, *, axes, index_dtype):
        a = ctx.in_avals[0]
        axis = axes[0] % a.ndim
        xs, _, _ = _exact(ctx, x, a.dtype, _ARGMAX, ordered=True)
        idx = _op(ctx, op_type, xs, axis=axis, keepdims=0, select_last_index=0)
        if _is_float(a.dtype):                    # the first NaN wins, as np.argmax
            nan = _cast(ctx, _op(ctx, "IsNaN", x), BOOL, U8)
            first_nan = _op(ctx, "ArgMax", nan, axis=axis, keepdims=0, select_last_index=0)
            has_nan = _cast(ctx, _op(ctx, "ReduceMax", nan, _ints(ctx, [axis]), keepdims=0),
                            U8, BOOL)
            idx = _op(ctx, "Where", has_nan, first_nan, idx)
        return _cast(ctx, idx, I64, index_dtype)
    lower.__name__ = f"lower_{op_type}"
    return lower


def _lower_cumsum(ctx, x, *, axis, reverse=False):
    xs, back = _arithmetic(ctx, x, ctx.in_avals[0].dtype, _CUMSUM)
    return back(_op(ctx, "CumSum", xs, _k(ctx, axis, I64), exclusive=0,
                    reverse=int(bool(reverse))))


def _hillis_steele(ctx, x, shape, axis, reverse, fill, combine, dt):
    """An inclusive scan of ``x`` (of ``shape``) along ``axis`` by an associative
    ``combine(u, v)`` with identity ``fill`` (a scalar value name): ceil(log2 n) steps,
    each combining every partial result with the one ``d`` places back (identity-padded)."""
    n, nd = shape[axis], len(shape)
    y, d = x, 1
    while d < n:
        pads = [0] * (2 * nd)
        if reverse:
            moved = _slice(ctx, y, [d], [n], [axis])
            pads[nd + axis] = d
        else:
            moved = _slice(ctx, y, [0], [n - d], [axis])
            pads[axis] = d
        y = combine(y, _pad(ctx, moved, pads, fill, dt))
        d *= 2
    return y


def _scan(which):
    """cumprod / cummax / cummin as a Hillis-Steele scan (``_hillis_steele``)."""
    def lower(ctx, x, *, axis, reverse=False):
        from ..lax.reduction import _identity
        a = ctx.in_avals[0]
        dt = a.dtype
        if which == "prod":
            fill = np.array(1).astype(dt)
            combine = lambda u, v: _op(ctx, "Mul", u, v)  # noqa: E731
        else:
            fill = np.array(_identity(dt, which)).astype(dt)
            op_type = "Max" if which == "max" else "Min"
            combine = lambda u, v: _max(ctx, u, v, dt, op_type)  # noqa: E731
        return _hillis_steele(ctx, x, a.shape, axis, reverse, _k(ctx, fill, dt), combine, dt)
    lower.__name__ = f"lower_cum{which}"
    return lower


# --- dot_general ---------------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_equation(lhs_ndim, rhs_ndim, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs_ndim + rhs_ndim > len(_LETTERS):
        raise ValueError("dot_general: too many dimensions for an ONNX Einsum equation")
    letters = iter(_LETTERS)
    lhs = [next(letters) for _ in range(lhs_ndim)]
    rhs = [None] * rhs_ndim
    for a, b in zip(lc, rc):
        rhs[b] = lhs[a]
    for a, b in zip(lb, rb):
        rhs[b] = lhs[a]
    rhs = [r if r is not None else next(letters) for r in rhs]
    lf = [d for d in range(lhs_ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs_ndim) if d not in rc and d not in rb]
    out = [lhs[d] for d in lb] + [lhs[d] for d in lf] + [rhs[d] for d in rf]
    return f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"


def _lower_dot_general(ctx, lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    la, ra = ctx.in_avals
    dt = ctx.out_avals[0].dtype             # the impl casts the operands to it first
    lhs, rhs = _cast(ctx, lhs, la.dtype, dt), _cast(ctx, rhs, ra.dtype, dt)
    eq = _einsum_equation(la.ndim, ra.ndim, dimension_numbers)
    if dt in _EINSUM:
        return _op(ctx, "Einsum", lhs, rhs, equation=eq)
    if dt == BOOL:                          # or of ands: a sum of 0/1 products > 0
        r = _op(ctx, "Einsum", _cast(ctx, lhs, BOOL, I64), _cast(ctx, rhs, BOOL, I64),
                equation=eq)
        return _op(ctx, "Greater", r, _k(ctx, 0, I64))
    # narrow or unsigned integers wrap: int64 and back gives the same value mod 2**bits;
    # float16/bfloat16 accumulate in float32
    wide = I64 if _is_int(dt) else F32
    r = _op(ctx, "Einsum", _cast(ctx, lhs, dt, wide), _cast(ctx, rhs, dt, wide), equation=eq)
    return _cast(ctx, r, wide, dt)


# --- sort ---------------------------------------------------------------------------------------

def _stable_argsort(ctx, key, dt, axis, n):
    """int64 indices that sort ``key`` stably along ``axis`` (NaNs last). ``TopK`` with
    largest=0 keeps equal elements in index order; NaNs are put last explicitly by a
    first, stable pass on isnan (the final order is by (value, isnan))."""
    def topk(values):
        return _op(ctx, "TopK", values, _ints(ctx, [n]), axis=axis, largest=0, sorted=1,
                   outputs=2)[1]
    if not _is_float(dt):
        kk, _, _ = _exact(ctx, key, dt, _TOPK, ordered=True)
        return topk(kk)
    kk, kdt, _ = _exact(ctx, key, dt, _TOPK)
    nan = _op(ctx, "IsNaN", kk)
    first = topk(_cast(ctx, nan, BOOL, U8))
    values = _where(ctx, nan, _k(ctx, np.inf, kdt), kk, kdt, signed_zeros=False)  # -0 == 0
    second = topk(_op(ctx, "GatherElements", values, first, axis=axis))
    return _op(ctx, "GatherElements", first, second, axis=axis)


def _lower_sort(ctx, *operands, dimension, is_stable=True, num_keys=1):
    a = ctx.in_avals[0]
    n = a.shape[dimension]
    if n <= 1:
        return list(operands)
    perm = None
    for i in reversed(range(num_keys)):        # least significant key first (as lexsort)
        key = operands[i]
        if perm is not None:
            key = _op(ctx, "GatherElements", key, perm, axis=dimension)
        order = _stable_argsort(ctx, key, ctx.in_avals[i].dtype, dimension, n)
        perm = order if perm is None else _op(ctx, "GatherElements", perm, order,
                                              axis=dimension)
    return [_op(ctx, "GatherElements", o, perm, axis=dimension) for o in operands]


# --- gather / scatter ---------------------------------------------------------------------------

def _index_grid(ctx, x_shape, spec, indices, index_avals, out_shape, oob):
    """An int64 tensor of shape ``out_shape + (ndim,)``: for each element of ``x[spec]``
    the position in ``x`` it comes from. Dynamic indices wrap once when negative, then
    ``oob="clip"`` clamps them into range (gather) and ``oob="drop"`` sends the ones out
    of range to index n (a padding slot the caller adds, as scatter's impl does)."""
    rank = len(out_shape)
    has_arrays = any(type(it) is tuple and it[0] == "a" for it in spec)
    # where each spec item's dims land in the output
    pieces = []
    for it in spec:
        if it is None or (type(it) is tuple and it[0] == "s"):
            pieces.append("basic")
        elif type(it) is int and not has_arrays:
            pieces.append("gone")
        else:
            pieces.append("adv")
    adv = [p for p, kind in enumerate(pieces) if kind == "adv"]
    bshape = ()
    if adv:
        bshape = np.broadcast_shapes(*[() if type(spec[p]) is int else
                                       index_avals[spec[p][1]].shape for p in adv])
    contiguous = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
    pos, adv_at = 0, None
    if adv and not contiguous:
        adv_at, pos = 0, len(bshape)
    out_pos = {}
    for p, kind in enumerate(pieces):
        if kind == "adv":
            if adv_at is None:
                adv_at = pos
                pos += len(bshape)
        elif kind == "basic":
            out_pos[p] = pos
            pos += 1

    columns, dim = [], 0
    for p, it in enumerate(spec):
        if it is None:
            continue
        n = x_shape[dim]
        if type(it) is int:
            col = _k(ctx, it, I64)
        elif it[0] == "s":
            start, stop, step = slice(*it[1:]).indices(n)
            values = np.arange(start, stop, step, dtype=np.int64)
            shape = [1] * rank
            shape[out_pos[p]] = len(values)
            col = ctx.const(values.reshape(shape))
        else:
            a = index_avals[it[1]]
            col = _index_int64(ctx, indices[it[1]], a.dtype, n)
            if a.dtype.kind == "i":
                col = _op(ctx, "Where", _op(ctx, "Less", col, _k(ctx, 0, I64)),
                          _op(ctx, "Add", col, _k(ctx, n, I64)), col)
            if oob == "clip":
                col = _op(ctx, "Max", _op(ctx, "Min", col, _k(ctx, max(n - 1, 0), I64)),
                          _k(ctx, 0, I64))
            else:
                bad = _or(ctx, _op(ctx, "Less", col, _k(ctx, 0, I64)),
                          _op(ctx, "GreaterOrEqual", col, _k(ctx, n, I64)))
                col = _op(ctx, "Where", bad, _k(ctx, n, I64), col)
            shape = [1] * rank
            shape[adv_at + len(bshape) - a.ndim: adv_at + len(bshape)] = a.shape
            col = _reshape(ctx, col, shape)
        col = _op(ctx, "Expand", col, _ints(ctx, out_shape))
        columns.append(_op(ctx, "Unsqueeze", col, _ints(ctx, [rank])))
        dim += 1
    return columns[0] if len(columns) == 1 else _op(ctx, "Concat", *columns, axis=rank)


def _lower_gather(ctx, x, *indices, spec):
    a, out = ctx.in_avals[0], ctx.out_avals[0]
    if a.ndim == 0:                               # only new axes
        return _reshape(ctx, x, out.shape)
    grid = _index_grid(ctx, a.shape, spec, indices, ctx.in_avals[1:], out.shape, "clip")
    return _op(ctx, "GatherND", x, grid)


_SCATTER_REDUCTION = {"set": "none", "add": "add", "mul": "mul", "min": "min", "max": "max"}


def _lower_scatter(ctx, x, updates, *indices, spec, mode):
    a, u = ctx.in_avals[0], ctx.in_avals[1]
    dt = a.dtype
    if a.ndim == 0:                   # only new axes: one element, updated once
        updates = _reshape(ctx, updates, []) if u.ndim else updates
        if mode == "set":
            return updates
        if mode in ("min", "max"):
            return _max(ctx, x, updates, dt, "Max" if mode == "max" else "Min")
        if dt == BOOL:                # add is or, mul is and
            return _op(ctx, "Or" if mode == "add" else "And", x, updates)
        return _op(ctx, "Add" if mode == "add" else "Mul", x, updates)
    # out-of-range updates land in a padding slot (index n) that is cut off afterwards
    dims = [it for it in spec if it is not None]
    grow = [1 if type(it) is tuple and it[0] == "a" else 0 for it in dims]
    grid = _index_grid(ctx, a.shape, spec, indices, ctx.in_avals[2:], u.shape, "drop")

    def scatter(data, upd, src, work, reduction):
        """ScatterND of ``src``-typed data and updates, computed in ``work``."""
        data, upd = _cast(ctx, data, src, work), _cast(ctx, upd, src, work)
        if any(grow):
            data = _pad(ctx, data, [0] * a.ndim + grow, _k(ctx, 0, work), work)
        out = _op(ctx, "ScatterND", data, grid, upd, reduction=reduction)
        if any(grow):
            out = _slice(ctx, out, [0] * a.ndim, a.shape, range(a.ndim))
        return _cast(ctx, out, work, src)

    reduction = _SCATTER_REDUCTION[mode]
    # no bool kernels for these: 0/1 as uint8 (mul and min are and, max is or)
    work = U8 if dt == BOOL and reduction in ("mul", "min", "max") else dt
    out = scatter(x, updates, dt, work, reduction)
    if _is_float(dt) and mode in ("min", "max"):
        # np.minimum.at propagates NaN from the operand and from any update
        hit = scatter(_full(ctx, False, BOOL, a.shape), _op(ctx, "IsNaN", updates), BOOL, U8,
                      "max")
        out = _where(ctx, _or(ctx, _op(ctx, "IsNaN", x), hit), _k(ctx, np.nan, dt), out, dt)
    return out


# --- the table ------------------------------------------------------------------------------------

def _table():
    t = {name: _simple_unary(op) for name, op in _SIMPLE_UNARY.items()}
    t.update({
        "stop_gradient": _identity, "real": _identity, "conj": _identity, "imag": _lower_imag,
        "neg": _lower_neg, "not": _lower_not, "is_finite": _lower_is_finite,
        "square": _lower_square, "rsqrt": _lower_rsqrt, "exp2": _lower_exp2,
        "log2": _log_base(2), "log10": _log_base(10), "expm1": _lower_expm1,
        "log1p": _lower_log1p, "cbrt": _lower_cbrt, "logistic": _lower_logistic,
        "round": _lower_round, "integer_pow": _lower_integer_pow,
        "add": _simple_binary("Add"), "sub": _simple_binary("Sub"),
        "mul": _simple_binary("Mul"), "div": _lower_div, "rem": _lower_rem,
        "floor_divide": _lower_floor_divide, "pow": _lower_pow,
        "max": _extremum("Max"), "min": _extremum("Min"), "atan2": _lower_atan2,
        "hypot": _lower_hypot, "logaddexp": _lower_logaddexp,
        "eq": _lower_eq, "ne": _lower_ne, "lt": _comparison("Less"),
        "le": _comparison("LessOrEqual"), "gt": _comparison("Greater"),
        "ge": _comparison("GreaterOrEqual"),
        "and": _logic("And", "BitwiseAnd"), "or": _logic("Or", "BitwiseOr"),
        "xor": _logic("Xor", "BitwiseXor"),
        "shift_left": _shift("left"), "shift_right_logical": _shift("logical"),
        "shift_right_arithmetic": _shift("arithmetic"),
        "select_n": _lower_select_n, "clamp": _lower_clamp,
        "convert_element_type": _lower_convert,
        "broadcast_in_dim": _lower_broadcast_in_dim, "reshape": _lower_reshape,
        "transpose": _lower_transpose, "squeeze": _lower_squeeze,
        "expand_dims": _lower_expand_dims, "rev": _lower_rev,
        "concatenate": _lower_concatenate, "pad": _lower_pad, "slice": _lower_slice,
        "dynamic_slice": _lower_dynamic_slice,
        "dynamic_update_slice": _lower_dynamic_update_slice, "iota": _lower_iota,
        "reduce_sum": _reduce_arith("ReduceSum"), "reduce_prod": _reduce_arith("ReduceProd"),
        "reduce_max": _reduce_extreme("max"), "reduce_min": _reduce_extreme("min"),
        "reduce_and": _reduce_bitwise("and"), "reduce_or": _reduce_bitwise("or"),
        "argmax": _arg_extreme("max"), "argmin": _arg_extreme("min"),
        "cumsum": _lower_cumsum, "cumprod": _scan("prod"), "cummax": _scan("max"),
        "cummin": _scan("min"),
        "dot_general": _lower_dot_general, "sort": _lower_sort,
        "gather": _lower_gather, "scatter": _lower_scatter,
    })
    return t


LOWERINGS = _table()


def install():
    """Attach the lowerings to their primitives (leaving any rule already set alone)."""
    for name, rule in LOWERINGS.items():
        prim = REGISTRY.get(name)
        if prim is not None and lowering(prim, "onnx") is None:
            register_lowering(prim, "onnx", rule)
