"""Helpers of the ONNX lowering rules: what the ``"onnx"`` rules of the primitives (each
registered beside its primitive's other rules, in the ``fnx.lax`` module that defines it)
build their graphs with.

A rule is ``lower(ctx, *input_names, **params) -> output name(s)`` and adds nodes through
``ctx``, an ``fnx.onnx.LoweringContext`` (see ``fnx.onnx.export``). This module imports
only ``fnx.core``, ``fnx.errors`` and NumPy, so ``fnx.lax`` imports it downward; ``onnx``
itself is imported only when a rule runs (``require``). The exporter takes its dtype map
(``onnx_dtype``, ``UnsupportedDtypeError``) from here.

Each lowering reproduces its primitive's NumPy impl, which is the definition: integer and
bool results bit for bit, floating-point ones to a few ulp (``tests/test_onnx.py`` checks
every lowering against the impl on onnxruntime). Where lax semantics differ from the ONNX
operator's, the lowering composes several nodes:

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
  ``cummax``/``cummin``/``cumlogsumexp`` (a log-depth scan) are composed from ONNX
  operators;
* ``conv_general_dilated`` is ``Conv`` (float only), ``reduce_window_sum/max/min`` are
  ``Conv`` with ones, ``MaxPool``, or strided slices per window tap; ``top_k`` is
  ``TopK``; ``cond`` (``If``), ``scan`` (``Scan``) and ``while`` (``Loop``) lower their
  bodies as subgraphs (``LoweringContext.subgraph``).

onnxruntime (1.32, CPU) differs from the ONNX spec or lacks kernels in places,
and the lowerings work around it without changing what the graph means:

* its float ``Where`` returns +0.0 where it selects a -0.0 from its first value
  input; float selects restore the sign (see ``where``);
* its integer ``ReduceSum``/``ReduceProd`` saturate (int32) or round through
  double (int64); integer sums and products are a tree of ``Add``/``Mul``
  (``tree_reduce``), which wraps like NumPy;
* many kernels exist for a few dtypes only (``Where`` has none for bool, int16 or
  uint64; ``Pad`` none for int16; ``TopK``/``ArgMax``/``ReduceMax`` none for
  uint16..uint64; ``Einsum``/``CumSum`` only float, double, int32, int64; ...: the
  ``*_KERNELS`` sets below): those compute in a wider dtype where that is exact
  (``exact``: a cast there and back; for order-sensitive ops on uint64 the sign bit is
  flipped so int64 order matches);
* operators it lacks for float64 altogether (``Tan``, ``Asin``, ``Acos``, ``Atan``
  and so ``atan2``, ``Sinh``, ``Cosh``, ``Asinh``, ``Acosh``, ``Atanh``, ``Erf``; and
  ``Conv``) are emitted as the ONNX operator anyway: the model is valid ONNX and runs
  where the runtime implements them (``ONNXRUNTIME_GAPS``).

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

import importlib
import math

import numpy as np

from . import dtypes
from ..errors import MissingRuleError

BOOL = np.dtype(np.bool_)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
F16, F32, F64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
INT64_MIN = np.iinfo(np.int64).min


# --- onnx itself, and the element types of its tensors ---------------------------------------

INSTALL_HINT = "install the ONNX extra: pip install fnx[onnx]"


def require(module, needed_by):
    """``import module``, or an ImportError that says how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{needed_by} needs the '{module}' package, which is not installed; "
                          f"{INSTALL_HINT}") from err


class UnsupportedDtypeError(MissingRuleError, TypeError):
    """A value of a dtype ONNX export has no lowering for (complex): a ``TypeError``, and
    a ``MissingRuleError`` like a primitive without a lowering (the rule for this dtype
    is what is missing)."""


_ONNX_DTYPE_NAMES = {
    "bool": "BOOL", "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT", "float64": "DOUBLE",
}


def onnx_dtype(dtype) -> int:
    """The ``onnx.TensorProto`` element type of a NumPy dtype.

    Complex dtypes have no ONNX operators to speak of and are rejected with an
    ``UnsupportedDtypeError`` (a ``TypeError``), as is anything else outside bool,
    integers and floats.
    """
    onnx = require("onnx", "fnx.onnx")
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        raise UnsupportedDtypeError(
            f"ONNX export does not support complex dtypes (got {dtype.name}): ONNX has "
            "almost no operators for complex tensors. Split the computation into real and "
            "imaginary parts before exporting.")
    name = _ONNX_DTYPE_NAMES.get(dtype.name)
    if name is None:
        raise UnsupportedDtypeError(f"ONNX export does not support the dtype {dtype.name}")
    return getattr(onnx.TensorProto, name)


def is_float(dt):
    """A floating-point dtype (bfloat16 included)."""
    return ("f" if dt == dtypes.bfloat16 else dt.kind) == "f"


def is_int(dt):
    return dt.kind in "iu"


# --- dtypes onnxruntime's CPU provider has kernels for (onnxruntime 1.32) --------------------
WHERE_KERNELS = {F16, F32, F64, I8, U8, I32, I64, U32}
MINMAX_KERNELS = {F16, F32, F64, I8, U8, I32, I64, U32, U64}
PAD_KERNELS = {F32, F64, I8, U8, I32, I64, U32, U64, BOOL}
REDUCE_ORDER_KERNELS = {F16, F32, F64, I8, U8, I32, I64}
REDUCE_ARITH_KERNELS = {F16, F32, F64, I32, I64}
ARGMAX_KERNELS = {F32, F64, I8, U8, I32, I64}
TOPK_KERNELS = {F32, F64, I8, U8, I16, I32, I64}
CUMSUM_KERNELS = {F32, F64, I32, I64}
EINSUM_KERNELS = {F32, F64, I32, I64}
NEG_KERNELS = {F16, F32, F64, I8, I16, I32, I64}
COMPARE_KERNELS = {F16, F32, F64, I8, U8, I16, U16, I32, I64, U32, U64}

# Primitives whose lowering onnxruntime (1.32, CPU) cannot run for these dtypes: it has
# no float64 kernel for the operator (the model is valid ONNX all the same).
ONNXRUNTIME_GAPS = {name: frozenset({F64}) for name in (
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erf",
    "conv_general_dilated")}

# wider dtypes holding every value of a dtype exactly (tried in order)
WIDER = {BOOL: (U8, I32), I8: (I32, I64), U8: (I32, I64), I16: (I32, I64),
         U16: (I32, I64), I32: (I64,), U32: (I64,), U64: (I64,), F16: (F32, F64)}
if dtypes.bfloat16 is not None:
    WIDER[dtypes.bfloat16] = (F32, F64)


# --- small builders ------------------------------------------------------------------------

def op(ctx, op_type, *inputs, **attrs):
    """An ``op_type`` node of ``inputs``; its output name (a list with ``outputs=n``)."""
    return ctx.node(op_type, list(inputs), **attrs)


def scalar(ctx, value, dtype):
    """A scalar constant of ``dtype``."""
    return ctx.const(np.asarray(value, dtype=dtype))


def ints(ctx, values):
    """A 1-D int64 constant (shapes, axes, pads)."""
    return ctx.const(np.asarray(list(values), dtype=np.int64).reshape(-1))


def cast(ctx, x, src, dst):
    """``x`` (of dtype ``src``) as ``dst``: itself when they are equal."""
    if np.dtype(src) == np.dtype(dst):
        return x
    return op(ctx, "Cast", x, to=onnx_dtype(dst))


def full(ctx, value, dtype, shape):
    """A tensor of ``shape`` filled with ``value``."""
    return op(ctx, "Expand", scalar(ctx, value, dtype), ints(ctx, shape))


def not_(ctx, x):
    return op(ctx, "Not", x)


def and_(ctx, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = op(ctx, "And", out, x)
    return out


def or_(ctx, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = op(ctx, "Or", out, x)
    return out


def eq(ctx, x, value, dtype):
    """``x == value`` (a scalar of ``dtype``)."""
    return op(ctx, "Equal", x, scalar(ctx, value, dtype))


def signbit(ctx, x, dtype):
    """True where the float ``x`` is negative, -0.0 included (not for NaN)."""
    zero = scalar(ctx, 0, dtype)
    return or_(ctx, op(ctx, "Less", x, zero),
               op(ctx, "Less", op(ctx, "Div", scalar(ctx, 1, dtype), x), zero))


def wider_dtype(dtype, supported):
    """The first dtype of ``supported`` holding every value of ``dtype`` exactly."""
    for cand in WIDER.get(dtype, ()):
        if cand in supported:
            return cand
    raise TypeError(f"ONNX export: no exact way to compute on {dtype.name} here")


def exact(ctx, x, dtype, supported, *, ordered=False):
    """``x`` in a dtype of ``supported`` holding its values exactly, that dtype, and a
    function converting results back to ``dtype``. With ``ordered``, uint64 (which
    has no wider type) maps to int64 with the sign bit flipped, so order is kept."""
    if dtype in supported:
        return x, dtype, (lambda y: y)
    if dtype == U64 and ordered:
        flip = scalar(ctx, INT64_MIN, I64)
        key = op(ctx, "BitwiseXor", cast(ctx, x, U64, I64), flip)
        return key, I64, (lambda y: cast(ctx, op(ctx, "BitwiseXor", y, flip), I64, U64))
    wide = wider_dtype(dtype, supported)
    return cast(ctx, x, dtype, wide), wide, (lambda y: cast(ctx, y, wide, dtype))


def where(ctx, cond, a, b, dtype, signed_zeros=True):
    """``Where(cond, a, b)`` for any dtype.

    onnxruntime's Where has no bool, int16 or uint64 kernel (those go through logic
    ops or a wider dtype), and its float kernel turns a -0.0 taken from ``a`` into
    +0.0: for floats, zero results whose selected operand is -0.0 (its reciprocal is
    negative) but which came out +0.0 are multiplied by -1. ``signed_zeros=False``
    skips that where the caller knows no -0.0 can be selected or its sign does not
    matter.
    """
    if is_float(dtype) and signed_zeros:
        out = op(ctx, "Where", cond, a, b)
        one, zero = scalar(ctx, 1, dtype), scalar(ctx, 0, dtype)
        inverse = op(ctx, "Where", cond, op(ctx, "Div", one, a), op(ctx, "Div", one, b))
        lost = and_(ctx, eq(ctx, out, 0, dtype), op(ctx, "Less", inverse, zero),
                    not_(ctx, op(ctx, "Less", op(ctx, "Div", one, out), zero)))
        return op(ctx, "Mul", out, op(ctx, "Where", lost, scalar(ctx, -1, dtype), one))
    if dtype in WHERE_KERNELS:
        return op(ctx, "Where", cond, a, b)
    if dtype == BOOL:
        return or_(ctx, and_(ctx, cond, a), and_(ctx, not_(ctx, cond), b))
    wide = wider_dtype(dtype, WHERE_KERNELS | {I64})
    return cast(ctx, op(ctx, "Where", cond, cast(ctx, a, dtype, wide),
                        cast(ctx, b, dtype, wide)), wide, dtype)


def compare(ctx, op_type, x, y, dtype):
    """A comparison node (``Less``, ...) for any dtype."""
    if dtype not in COMPARE_KERNELS:
        x, y = cast(ctx, x, dtype, U8 if dtype == BOOL else F32), \
            cast(ctx, y, dtype, U8 if dtype == BOOL else F32)
    return op(ctx, op_type, x, y)


def extremum(ctx, x, y, dtype, op_type="Max"):
    """Elementwise max/min, NaN propagating (as onnxruntime's Max/Min do); bool: or/and."""
    if dtype == BOOL:
        return op(ctx, "Or" if op_type == "Max" else "And", x, y)
    if dtype in MINMAX_KERNELS:
        return op(ctx, op_type, x, y)
    xs, _, back = exact(ctx, x, dtype, MINMAX_KERNELS, ordered=True)
    ys, _, _ = exact(ctx, y, dtype, MINMAX_KERNELS, ordered=True)
    return back(op(ctx, op_type, xs, ys))


def pad(ctx, x, pads, value, dtype):
    """``Pad`` (constant mode) for any dtype; ``pads`` a name or a list of ints."""
    pads = pads if isinstance(pads, str) else ints(ctx, pads)
    if dtype in PAD_KERNELS:
        return op(ctx, "Pad", x, pads, value)
    xs, wide, back = exact(ctx, x, dtype, PAD_KERNELS)
    return back(op(ctx, "Pad", xs, pads, cast(ctx, value, dtype, wide)))


def reshape(ctx, x, shape):
    return op(ctx, "Reshape", x, ints(ctx, shape), allowzero=1)


def slice_(ctx, x, starts, ends, axes, steps=None):
    """A ``Slice`` with constant starts, ends, axes (and steps)."""
    args = [x, ints(ctx, starts), ints(ctx, ends), ints(ctx, axes)]
    if steps is not None:
        args.append(ints(ctx, steps))
    return op(ctx, "Slice", *args)


def pad_config(ctx, x, shape, padding_config, value, dt):
    """lax.pad of ``x`` (of ``shape``): (low, high, interior) per dimension, negative
    low/high crop; ``value`` is a scalar value name of ``dt``."""
    shape = list(shape)
    # interior padding, one dimension at a time: (n,) -> (n, 1) -> pad to (n, 1 + it)
    # -> (n * (1 + it),) -> drop the trailing `it` values
    for d, (_, _, it) in enumerate(padding_config):
        n = shape[d]
        if it <= 0 or n <= 1:
            continue
        x = op(ctx, "Unsqueeze", x, ints(ctx, [d + 1]))
        pads = [0] * (2 * (len(shape) + 1))
        pads[len(shape) + 1 + d + 1] = it
        x = pad(ctx, x, pads, value, dt)
        merged = shape[:d] + [n * (1 + it)] + shape[d + 1:]
        x = reshape(ctx, x, merged)
        size = n + (n - 1) * it
        x = slice_(ctx, x, [0], [size], [d])
        shape[d] = size
    # edge padding: positive amounts grow, negative ones crop
    if any(lo > 0 or hi > 0 for lo, hi, _ in padding_config):
        pads = [max(lo, 0) for lo, _, _ in padding_config] + \
            [max(hi, 0) for _, hi, _ in padding_config]
        x = pad(ctx, x, pads, value, dt)
        shape = [n + max(lo, 0) + max(hi, 0) for n, (lo, hi, _) in zip(shape, padding_config)]
    crop = [(d, -min(lo, 0), n + min(hi, 0)) for d, (n, (lo, hi, _))
            in enumerate(zip(shape, padding_config)) if lo < 0 or hi < 0]
    if crop:
        x = slice_(ctx, x, [c[1] for c in crop], [c[2] for c in crop], [c[0] for c in crop])
    return x


def index_int64(ctx, i, dt, bound):
    """An integer index as int64; uint64 values are first capped at ``bound`` (>= every
    valid index) so the cast cannot wrap them negative."""
    if dt == U64:
        i = op(ctx, "Min", i, scalar(ctx, bound, U64))
    return cast(ctx, i, dt, I64)


# --- sums, products and scans ----------------------------------------------------------------

def arithmetic(ctx, x, dt, supported):
    """``x`` in a dtype of ``supported`` for sums and products, and the way back.
    Integers wrap, so narrow or unsigned ones are computed in int64 and cast back (the
    same value modulo 2**bits); bfloat16/float16 without a kernel use float32."""
    if dt in supported:
        return x, (lambda y: y)
    if is_int(dt):
        return cast(ctx, x, dt, I64), (lambda y: cast(ctx, y, I64, dt))
    xs, _, back = exact(ctx, x, dt, supported)
    return xs, back


def tree_reduce(ctx, x, shape, axes, combine):
    """``x`` (of ``shape``) reduced over ``axes`` (sorted, nonempty, none empty) by a
    log-depth tree of ``combine(a, b)``: the reduced elements are moved last and
    flattened, then halves are combined until one is left."""
    kept = [d for d in range(len(shape)) if d not in axes]
    n = math.prod(shape[d] for d in axes)
    if kept + list(axes) != list(range(len(shape))):
        x = op(ctx, "Transpose", x, perm=kept + list(axes))
    out_shape = [shape[d] for d in kept]
    x = reshape(ctx, x, out_shape + [n])
    last = len(out_shape)
    while n > 1:
        h = n // 2
        y = combine(slice_(ctx, x, [0], [h], [last]), slice_(ctx, x, [h], [2 * h], [last]))
        if n % 2:
            y = op(ctx, "Concat", y, slice_(ctx, x, [2 * h], [n], [last]), axis=last)
        x, n = y, n - h
    return op(ctx, "Squeeze", x, ints(ctx, [last]))


def any_(ctx, mask, axes, keepdims=0):
    """Whether any element of the bool ``mask`` along ``axes`` is True."""
    r = op(ctx, "ReduceMax", cast(ctx, mask, BOOL, U8), ints(ctx, axes), keepdims=keepdims)
    return cast(ctx, r, U8, BOOL)


def hillis_steele(ctx, x, shape, axis, reverse, fill, combine, dt):
    """An inclusive scan of ``x`` (of ``shape``) along ``axis`` by an associative
    ``combine(u, v)`` with identity ``fill`` (a scalar value name): ceil(log2 n) steps,
    each combining every partial result with the one ``d`` places back (identity-padded)."""
    n, nd = shape[axis], len(shape)
    y, d = x, 1
    while d < n:
        pads = [0] * (2 * nd)
        if reverse:
            moved = slice_(ctx, y, [d], [n], [axis])
            pads[nd + axis] = d
        else:
            moved = slice_(ctx, y, [0], [n - d], [axis])
            pads[axis] = d
        y = combine(y, pad(ctx, moved, pads, fill, dt))
        d *= 2
    return y


# --- accurate compositions (shared by several primitives' rules) -----------------------------

def expm1(ctx, x, dt):
    """exp(x) - 1 without cancellation (Kahan): with u = exp(x) rounded,
    (u - 1) * (x / log(u)) corrects the rounding of u."""
    u = op(ctx, "Exp", x)
    um1 = op(ctx, "Sub", u, scalar(ctx, 1, dt))
    general = op(ctx, "Mul", um1, op(ctx, "Div", x, op(ctx, "Log", u)))
    # (general is nonzero where it is used: only the last select can pass a -0.0)
    out = where(ctx, op(ctx, "IsInf", u), u, general, dt, signed_zeros=False)   # +inf
    out = where(ctx, eq(ctx, um1, -1, dt), um1, out, dt, signed_zeros=False)    # u = 0
    return where(ctx, eq(ctx, um1, 0, dt), x, out, dt)      # u = 1: x (keeps -0.0)


def log1p(ctx, x, dt):
    """log(1 + x) without cancellation (Goldberg): with u = 1 + x rounded,
    log(u) * (x / (u - 1)) corrects the rounding of u."""
    u = op(ctx, "Add", x, scalar(ctx, 1, dt))
    d = op(ctx, "Sub", u, scalar(ctx, 1, dt))
    general = op(ctx, "Mul", op(ctx, "Log", u), op(ctx, "Div", x, d))
    out = where(ctx, op(ctx, "IsInf", u, detect_negative=0), u, general, dt,
                signed_zeros=False)                                    # x = +inf
    return where(ctx, eq(ctx, d, 0, dt), x, out, dt)        # u = 1: x (keeps -0.0)


def logaddexp(ctx, x, y, dt):
    """NumPy's npy_logaddexp: x + ln 2 where x == y (equal infinities), else
    max + log1p(exp(-|x - y|)); NaN where x - y is NaN."""
    d = op(ctx, "Sub", x, y)
    pos = op(ctx, "Greater", d, scalar(ctx, 0, dt))
    # no result is -0.0: a zero comes from adding the tail (>= +0.0) to a zero
    big = where(ctx, pos, x, y, dt, signed_zeros=False)
    tail = log1p(ctx, op(ctx, "Exp", op(ctx, "Neg", op(ctx, "Abs", d))), dt)
    out = op(ctx, "Add", big, tail)
    out = where(ctx, op(ctx, "IsNaN", d), d, out, dt, signed_zeros=False)
    return where(ctx, op(ctx, "Equal", x, y), op(ctx, "Add", x, scalar(ctx, math.log(2), dt)),
                 out, dt, signed_zeros=False)


# --- rule constructors -------------------------------------------------------------------------

def unary(op_type):
    """The rule of a primitive that is one ONNX operator of its operand."""
    def lower(ctx, x):
        return op(ctx, op_type, x)
    lower.__name__ = f"lower_{op_type}"
    return lower


def binary(op_type):
    """The rule of a primitive that is one ONNX operator of its two operands."""
    def lower(ctx, x, y):
        return op(ctx, op_type, x, y)
    lower.__name__ = f"lower_{op_type}"
    return lower


def identity(ctx, x):
    """The rule of a primitive that returns its operand (here)."""
    return x


def logic(bool_op, int_op):
    """``bool_op`` on bool operands, ``int_op`` (the bitwise operator) on integers."""
    def lower(ctx, x, y):
        return op(ctx, bool_op if ctx.in_avals[0].dtype == BOOL else int_op, x, y)
    lower.__name__ = f"lower_{bool_op}"
    return lower


def comparison(op_type, negate=False):
    def lower(ctx, x, y):
        out = compare(ctx, op_type, x, y, ctx.in_avals[0].dtype)
        return not_(ctx, out) if negate else out
    lower.__name__ = f"lower_{op_type}"
    return lower
