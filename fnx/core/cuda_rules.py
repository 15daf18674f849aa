"""Helpers of the CUDA lowering rules: what the ``"cuda"`` rules of the elementwise
primitives (each registered beside its primitive's other rules, in ``fnx.lax.elementwise``)
are written with.

A rule is ``kernel(xs, in_dtypes, out_dtype, **params) -> str``, the CUDA C expression of
ONE output element, where ``xs[i]`` names a local variable holding input ``i``'s element
in the C type of ``in_dtypes[i]`` (``cuda_type``); ``fnx.kernels.cuda`` wraps it in a
kernel, compiles it with NVRTC and runs it through CuPy (or on the CPU through g++, for
tests). The expressions may call the helper device functions of ``fnx.kernels.cuda``'s
``PREAMBLE`` (``fnx_max``, ``fnx_idiv``, ...).

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

# The C types and literals, and the error a rule raises for what it cannot compile.
# (They are defined with the kernel machinery in fnx.kernels.cuda, which imports only
# fnx.core and fnx.errors.)
from ..kernels.cuda import (KernelUnsupported, c_literal, cuda_type,  # noqa: F401
                            unsigned_type, wide_unsigned_type)

F32 = np.dtype(np.float32)

# The elementwise primitives without a CUDA rule, and why.
LEFT_OUT = {
    "digamma": "no CUDA math function; fnx's algorithm is not ported to device code",
    "polygamma": "no CUDA math function; fnx's algorithm is not ported to device code",
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
