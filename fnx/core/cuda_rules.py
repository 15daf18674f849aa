"""Helpers of the CUDA lowering rules: what the ``"cuda"`` rules of the elementwise
primitives (each registered beside its primitive's other rules, in ``fnx.lax.elementwise``)
are written with.

A rule is ``kernel(xs, in_dtypes, out_dtype, **params) -> str``, the CUDA C expression of
ONE output element, where ``xs[i]`` names a local variable holding input ``i``'s element
in the C type of ``in_dtypes[i]``. A primitive with several results (``threefry2x32``)
has ``kernel(xs, in_dtypes, out_dtypes, ys, **params) -> str`` instead: C statements that
assign every ``ys[k]`` (variables the caller declared, in the C type of ``out_dtypes[k]``);
the caller wraps them in a block (``fnx.kernels.fusion`` fuses both kinds) (``cuda_type``: the C types, and the errors a rule
raises, are defined here and imported by ``fnx.kernels.cuda``, which wraps the expression
in a kernel, compiles it with NVRTC and runs it through CuPy, or on the CPU through g++
for tests). The expressions may call the helper device functions of
``fnx.kernels.cuda``'s ``PREAMBLE`` (``fnx_max``, ``fnx_idiv``, ...). This module imports
only ``fnx.core``, ``fnx.errors`` and NumPy, so ``fnx.lax`` imports it downward.

Each expression has the semantics of the primitive's NumPy impl: bit for bit for
integer, bool, comparison, rounding and conversion ops, to a few ulp for transcendental
float ops (the CUDA math library's accuracy). Where lax and C differ, the expression
follows the impl:

* integer arithmetic wraps (it is done in an unsigned type, where C's signed
  overflow would be undefined: ``wrap``); ``div`` truncates toward zero, ``rem`` has the
  dividend's sign, and ``x / 0``, ``x % 0``, ``x // 0`` are 0, ``MIN / -1`` is
  ``MIN``, as NumPy gives them;
* ``max``/``min``/``clamp`` propagate NaN and give the second operand on a tie
  (``max(-0.0, 0.0)`` is 0.0), like NumPy's loops;
* ``round``: ``rounding_method`` 0 rounds half away from zero (C's ``round``),
  1 half to even (``rint``); ``sign`` of NaN is NaN, of -0.0 is 0.0;
* shifts by a negative amount or by the bit width or more give 0 (``shift_left``,
  ``shift_right_logical``) or the sign fill (``shift_right_arithmetic``);
* ``integer_pow``/``pow`` on integers wrap, and a negative exponent gives 1, -1
  or 0 (JAX's rule). Float ``pow`` is C's ``pow``, which is NumPy's for array
  exponents; for a rank-0 exponent NumPy shortcuts 0.5 to ``sqrt`` (so
  ``(-inf) ** 0.5`` is NaN there, inf here, and ``(-0.0) ** 0.5`` is -0.0 there,
  +0.0 here) and 2, 1, -1 to ``x * x``, ``x``, ``1 / x`` (equal values, but exact
  where ``pow`` is within a few ulp). The rule cannot see ranks, so it keeps C's
  ``pow``, as XLA. ``integer_pow`` knows its exponent and takes the same
  shortcuts as the impl;
* ``convert_element_type``: to bool is ``x != 0`` (NaN is true); float to
  integer truncates toward zero. For NaN and for values whose truncation does not
  fit the target type NumPy's cast has no defined result (on x86-64 it differs
  between contiguous and strided arrays); the kernel gives 0 for NaN and
  saturates the others at the type's minimum or maximum (XLA's rule).

Float32 ops use the float functions (``expf``, not ``exp``: ``float_fn``) so nothing is
computed in double and rounded twice. ``lgamma`` on the negative axis, like the
impl, is accurate to a few ulp of the terms of the reflection formula, not of
the result next to its zeros there.

Left out (no ``"cuda"`` rule; the NumPy backend computes them), as ``LEFT_OUT`` says:

* ``digamma``, ``polygamma``: the CUDA math library has no digamma, and fnx's
  algorithms (special_math) are not ported to device code;
* complex inputs of any primitive, float16 and bfloat16 (``cuda_type`` raises),
  and therefore ``real``/``imag``/``conj`` only get the trivial real-operand
  forms;
* ``integer_pow`` on uint64: the impl computes ``np.power(uint64, int64)`` in
  float64 and casts back, which is not the wrapping integer power (the rule
  raises ``KernelUnsupported`` for that dtype).
"""
from __future__ import annotations

import numpy as np

from ..errors import FnxError


class KernelError(FnxError):
    """Base class of the errors of the GPU kernel path."""


class KernelUnsupported(KernelError):
    """The kernel path cannot handle this call (a dtype without a CUDA type, a
    primitive without a kernel hook, no GPU, ...); the NumPy backend can."""


# --- C types and literals ------------------------------------------------------------------

_CUDA_TYPES = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "signed char", np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short", np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long long", np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.float32): "float", np.dtype(np.float64): "double",
}
_UNSIGNED_BY_SIZE = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int",
                     8: "unsigned long long"}


def _as_dtype(dtype):
    try:
        return np.dtype(dtype)
    except TypeError:
        raise KernelUnsupported(f"{dtype!r} is not a dtype") from None


def cuda_type(dtype) -> str:
    """The C type of a dtype's elements in a kernel. Only bool, the integer
    types, float32 and float64 have one; other dtypes (float16, bfloat16,
    complex) raise ``KernelUnsupported``."""
    d = _as_dtype(dtype)
    try:
        return _CUDA_TYPES[d]
    except KeyError:
        raise KernelUnsupported(
            f"no CUDA kernel type for dtype {d.name}: GPU kernels take bool, integer, float32 "
            f"and float64 arrays; the NumPy backend handles {d.name}") from None


def unsigned_type(dtype) -> str:
    """The unsigned C type as wide as an integer dtype (for logical shifts)."""
    d = _as_dtype(dtype)
    if d.kind not in "iu":
        raise KernelUnsupported(f"unsigned_type: {d.name} is not an integer dtype")
    return _UNSIGNED_BY_SIZE[d.itemsize]


def wide_unsigned_type(dtype) -> str:
    """The unsigned C type integer arithmetic of ``dtype`` wraps in without
    undefined behaviour: ``unsigned int`` up to 32 bits (narrower unsigned types
    would be promoted to a signed ``int``), ``unsigned long long`` for 64."""
    d = _as_dtype(dtype)
    if d.kind not in "biu":
        raise KernelUnsupported(f"wide_unsigned_type: {d.name} is not an integer dtype")
    return "unsigned long long" if d.itemsize == 8 else "unsigned int"


def c_literal(value, dtype) -> str:
    """A C expression of type ``cuda_type(dtype)`` equal to ``value`` converted to
    ``dtype`` (exact: floats that are not small integers are written in hex)."""
    d = _as_dtype(dtype)
    ctype = cuda_type(d)
    if d.kind == "b":
        return "true" if bool(value) else "false"
    if d.kind in "iu":
        v = int(d.type(value)) if isinstance(value, (np.generic, np.ndarray)) else int(value)
        info = np.iinfo(d)
        if not info.min <= v <= info.max:
            raise KernelUnsupported(f"c_literal: {v} does not fit in {d.name}")
        if d.kind == "u":
            return f"(({ctype}){v}ULL)"
        if v == -2**63:   # -9223372036854775808LL would be the negation of an overflowing literal
            return "((long long)(-9223372036854775807LL - 1))"
        return f"(({ctype}){v}LL)"
    v = float(d.type(value))
    suffix = "f" if d == np.float32 else ""
    if np.isnan(v):
        return f"(0.0{suffix} / 0.0{suffix})"
    if np.isinf(v):
        return f"({'-' if v < 0 else ''}1.0{suffix} / 0.0{suffix})"
    if v == int(v) and abs(v) < 2.0**24 and not (v == 0 and np.signbit(v)):
        return f"{int(v)}.0{suffix}"
    mantissa, exponent = v.hex().split("p")     # 0x1.8000000000000p+1 -> 0x1.8p+1
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}{suffix}"


F32 = np.dtype(np.float32)

# The elementwise primitives without a CUDA rule, and why.
LEFT_OUT = {
    "digamma": "no CUDA math function; fnx's algorithm is not ported to device code",
    "polygamma": "no CUDA math function; fnx's algorithm is not ported to device code",
    "complex": "its impl writes the two parts into a complex buffer on the device; the "
               "fused kernels keep to real dtypes",
}


def require_float(op, dtype):
    """Raise ``KernelUnsupported`` unless ``dtype`` is float32 or float64."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):
        raise KernelUnsupported(f"{op}: the kernel takes float32 or float64, got {dtype.name}")


def float_fn(name, dtype):
    """The float or double variant of a C math function (``expf`` / ``exp``)."""
    require_float(name, dtype)
    return name + "f" if dtype == F32 else name


def is_signed(dtype):
    return np.dtype(dtype).kind == "i"


def is_int(dtype):
    return np.dtype(dtype).kind in "iu"


def wrap(op, a, b, dtype):
    """``a op b`` on integers, wrapping modulo 2**bits (in an unsigned type)."""
    u = wide_unsigned_type(dtype)
    return f"({cuda_type(dtype)})(({u}){a} {op} ({u}){b})"


# --- rule constructors -------------------------------------------------------------------

def math1(cname):
    """A unary float op that is one C math function."""
    def kernel(xs, in_dtypes, out_dtype, **params):
        return f"{float_fn(cname, in_dtypes[0])}({xs[0]})"
    kernel.__name__ = f"{cname}_kernel"
    return kernel


def math2(cname):
    """A binary float op that is one C math function."""
    def kernel(xs, in_dtypes, out_dtype):
        return f"{float_fn(cname, in_dtypes[0])}({xs[0]}, {xs[1]})"
    kernel.__name__ = f"{cname}_kernel"
    return kernel


def classify(cname):
    """A float predicate that is one C classification macro (``isnan``)."""
    def kernel(xs, in_dtypes, out_dtype):
        require_float(cname, in_dtypes[0])
        return f"{cname}({xs[0]})"
    kernel.__name__ = f"{cname}_kernel"
    return kernel


def identity(xs, in_dtypes, out_dtype, **params):
    """The rule of a primitive that returns its operand (here)."""
    return xs[0]


def arith(op):
    """``a op b``: wrapping on integers, the C operator on floats."""
    def kernel(xs, in_dtypes, out_dtype):
        (a, b), d = xs, in_dtypes[0]
        return wrap(op, a, b, d) if is_int(d) else f"({a} {op} {b})"
    kernel.__name__ = f"arith_{op}_kernel"
    return kernel


def int_helper(helper, float_form, with_unsigned=True):
    """A binary op that calls a preamble helper on integers and ``float_form``
    (a format string of ``a``, ``b`` and the float function suffix) on floats."""
    def kernel(xs, in_dtypes, out_dtype):
        (a, b), d = xs, in_dtypes[0]
        if is_int(d):
            targs = cuda_type(d) + (f", {wide_unsigned_type(d)}" if with_unsigned else "")
            return f"{helper}<{targs}>({a}, {b})"
        require_float(helper, d)
        return float_form.format(a=a, b=b, f="f" if d == F32 else "")
    kernel.__name__ = f"{helper}_kernel"
    return kernel


def call2(helper):
    """A binary op that is one preamble helper of both operands (``fnx_max``)."""
    def kernel(xs, in_dtypes, out_dtype):
        return f"{helper}({xs[0]}, {xs[1]})"
    kernel.__name__ = f"{helper}_kernel"
    return kernel


def compare(op):
    """A C comparison operator."""
    def kernel(xs, in_dtypes, out_dtype):
        return f"({xs[0]} {op} {xs[1]})"
    kernel.__name__ = "compare_kernel"
    return kernel


def bitwise(op):
    """A C bitwise operator on bool or integer operands."""
    def kernel(xs, in_dtypes, out_dtype):
        d = in_dtypes[0]
        if d.kind == "b":
            return f"(bool)({xs[0]} {op} {xs[1]})"
        if not is_int(d):
            raise KernelUnsupported(f"bitwise {op}: the kernel takes bool or integers, "
                                    f"got {d.name}")
        return f"({cuda_type(d)})({xs[0]} {op} {xs[1]})"
    kernel.__name__ = "bitwise_kernel"
    return kernel
