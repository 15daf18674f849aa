"""CUDA expressions of the built-in elementwise primitives (their ``kernel`` hooks).

Each hook returns the C expression of one output element (the contract is in
``fnx.kernels.cuda``) with the semantics of the primitive's NumPy impl in
``fnx.lax.elementwise``: bit for bit for integer, bool, comparison, rounding
and conversion ops, to a few ulp for transcendental float ops (the CUDA math
library's accuracy). Where lax and C differ, the expression follows the impl:

* integer arithmetic wraps (it is done in an unsigned type, where C's signed
  overflow would be undefined); ``div`` truncates toward zero, ``rem`` has the
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
  where ``pow`` is within a few ulp). The hook cannot see ranks, so it keeps C's
  ``pow``, as XLA. ``integer_pow`` knows its exponent and takes the same
  shortcuts as the impl;
* ``convert_element_type``: to bool is ``x != 0`` (NaN is true); float to
  integer truncates toward zero. For NaN and for values whose truncation does not
  fit the target type NumPy's cast has no defined result (on x86-64 it differs
  between contiguous and strided arrays); the kernel gives 0 for NaN and
  saturates the others at the type's minimum or maximum (XLA's rule).

Float32 ops use the float functions (``expf``, not ``exp``) so nothing is
computed in double and rounded twice. ``lgamma`` on the negative axis, like the
impl, is accurate to a few ulp of the terms of the reflection formula, not of
the result next to its zeros there.

``HOOKS`` maps each primitive to its hook (attached on import); ``LEFT_OUT``
names the elementwise primitives without one and why.

Left out (their kernel rule stays ``None``; the NumPy backend computes them):

* ``digamma``, ``polygamma``: the CUDA math library has no digamma, and fnx's
  algorithms (special_math) are not ported to device code;
* complex inputs of any primitive, float16 and bfloat16 (``cuda_type`` raises),
  and therefore ``real``/``imag``/``conj`` only get the trivial real-operand
  forms;
* ``integer_pow`` on uint64: the impl computes ``np.power(uint64, int64)`` in
  float64 and casts back, which is not the wrapping integer power (the hook
  raises ``KernelUnsupported`` for that dtype).
"""
from __future__ import annotations

import numpy as np

from ..lax import elementwise as E
from .cuda import (KernelUnsupported, c_literal, cuda_type, unsigned_type,
                   wide_unsigned_type)

_F32 = np.dtype(np.float32)


def _require_float(op, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):
        raise KernelUnsupported(f"{op}: the kernel takes float32 or float64, got {dtype.name}")


def _float_fn(name, dtype):
    """The float or double variant of a C math function (``expf`` / ``exp``)."""
    _require_float(name, dtype)
    return name + "f" if dtype == _F32 else name


def _is_signed(dtype):
    return np.dtype(dtype).kind == "i"


def _is_int(dtype):
    return np.dtype(dtype).kind in "iu"


def _wrap(op, a, b, dtype):
    """``a op b`` on integers, wrapping modulo 2**bits (in an unsigned type)."""
    u = wide_unsigned_type(dtype)
    return f"({cuda_type(dtype)})(({u}){a} {op} ({u}){b})"


# --- unary -------------------------------------------------------------------------------

def _math1(cname):
    """A unary float op that is one C math function."""
    def kernel(xs, in_dtypes, out_dtype, **params):
        return f"{_float_fn(cname, in_dtypes[0])}({xs[0]})"
    kernel.__name__ = f"{cname}_kernel"
    return kernel


def _neg(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    return _wrap("-", "0", x, d) if _is_int(d) else f"(-{x})"


def _abs(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    if _is_signed(d):      # abs(MIN) wraps to MIN, as np.abs
        return f"({x} < 0 ? {_wrap('-', '0', x, d)} : {x})"
    if _is_int(d):
        return x
    return f"{_float_fn('fabs', d)}({x})"


def _sign(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    t = cuda_type(d)
    if _is_signed(d):
        return f"({t})(({x} > 0) - ({x} < 0))"
    if _is_int(d):
        return f"({t})({x} > 0)"
    _require_float("sign", d)
    return f"fnx_fsign({x})"


def _rsqrt(xs, in_dtypes, out_dtype):   # 1 / sqrt(x), both correctly rounded, as the impl
    return f"({c_literal(1, in_dtypes[0])} / {_float_fn('sqrt', in_dtypes[0])}({xs[0]}))"


def _square(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    return _wrap("*", x, x, d) if _is_int(d) else f"({x} * {x})"


def _reciprocal(xs, in_dtypes, out_dtype):
    _require_float("reciprocal", in_dtypes[0])
    return f"({c_literal(1, in_dtypes[0])} / {xs[0]})"


def _logistic(xs, in_dtypes, out_dtype):
    _require_float("logistic", in_dtypes[0])
    return f"fnx_logistic({xs[0]})"


def _classify(cname):
    def kernel(xs, in_dtypes, out_dtype):
        _require_float(cname, in_dtypes[0])
        return f"{cname}({xs[0]})"
    kernel.__name__ = f"{cname}_kernel"
    return kernel


def _not(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    if d.kind == "b":
        return f"(!{x})"
    if not _is_int(d):
        raise KernelUnsupported(f"not: the kernel takes bool or integers, got {d.name}")
    return f"({cuda_type(d)})(~{x})"


def _identity(xs, in_dtypes, out_dtype, **params):
    return xs[0]


def _imag(xs, in_dtypes, out_dtype):      # the imaginary part of a real number
    return c_literal(0, out_dtype)


def _round(xs, in_dtypes, out_dtype, *, rounding_method=0):
    fn = {0: "round", 1: "rint"}.get(rounding_method)
    if fn is None:
        raise KernelUnsupported(f"round: rounding_method {rounding_method!r} has no kernel")
    return f"{_float_fn(fn, in_dtypes[0])}({xs[0]})"


def _integer_pow(xs, in_dtypes, out_dtype, *, y):
    (x,), (d,) = xs, in_dtypes
    if _is_int(d):
        if d == np.uint64:
            raise KernelUnsupported(
                "integer_pow: on uint64 the NumPy impl computes in float64 (np.power of "
                "uint64 and int64), which no integer kernel reproduces")
        if not -2**63 <= y < 2**63:
            raise KernelUnsupported(f"integer_pow: exponent {y} does not fit in 64 bits")
        return (f"fnx_ipow<{cuda_type(d)}, {wide_unsigned_type(d)}, long long>"
                f"({x}, {c_literal(y, np.int64)})")
    # np.power with a scalar exponent takes these shortcuts (x * x is also the impl's
    # np.square); any other exponent goes to pow
    if y == 2:
        return f"({x} * {x})"
    if y == 1:
        return x
    if y == -1:
        return f"({c_literal(1, d)} / {x})"
    return f"{_float_fn('pow', d)}({x}, {c_literal(y, d)})"


# --- binary ------------------------------------------------------------------------------

def _arith(op):
    def kernel(xs, in_dtypes, out_dtype):
        (a, b), d = xs, in_dtypes[0]
        return _wrap(op, a, b, d) if _is_int(d) else f"({a} {op} {b})"
    kernel.__name__ = f"arith_{op}_kernel"
    return kernel


def _int_helper(helper, float_form, with_unsigned=True):
    """A binary op that calls a preamble helper on integers and ``float_form``
    (a format string of ``a``, ``b`` and the float function suffix) on floats."""
    def kernel(xs, in_dtypes, out_dtype):
        (a, b), d = xs, in_dtypes[0]
        if _is_int(d):
            targs = cuda_type(d) + (f", {wide_unsigned_type(d)}" if with_unsigned else "")
            return f"{helper}<{targs}>({a}, {b})"
        _require_float(helper, d)
        return float_form.format(a=a, b=b, f="f" if d == _F32 else "")
    kernel.__name__ = f"{helper}_kernel"
    return kernel


def _pow(xs, in_dtypes, out_dtype):
    (a, b), d = xs, in_dtypes[0]
    if _is_int(d):
        t = cuda_type(d)
        return f"fnx_ipow<{t}, {wide_unsigned_type(d)}, {t}>({a}, {b})"
    return f"{_float_fn('pow', d)}({a}, {b})"


def _minmax(helper):
    def kernel(xs, in_dtypes, out_dtype):
        return f"{helper}({xs[0]}, {xs[1]})"
    kernel.__name__ = f"{helper}_kernel"
    return kernel


def _math2(cname):
    def kernel(xs, in_dtypes, out_dtype):
        return f"{_float_fn(cname, in_dtypes[0])}({xs[0]}, {xs[1]})"
    kernel.__name__ = f"{cname}_kernel"
    return kernel


def _logaddexp(xs, in_dtypes, out_dtype):
    _require_float("logaddexp", in_dtypes[0])
    return f"fnx_logaddexp({xs[0]}, {xs[1]})"


def _compare(op):
    def kernel(xs, in_dtypes, out_dtype):
        return f"({xs[0]} {op} {xs[1]})"
    kernel.__name__ = "compare_kernel"
    return kernel


def _bitwise(op):
    def kernel(xs, in_dtypes, out_dtype):
        d = in_dtypes[0]
        if d.kind == "b":
            return f"(bool)({xs[0]} {op} {xs[1]})"
        if not _is_int(d):
            raise KernelUnsupported(f"bitwise {op}: the kernel takes bool or integers, "
                                    f"got {d.name}")
        return f"({cuda_type(d)})({xs[0]} {op} {xs[1]})"
    kernel.__name__ = "bitwise_kernel"
    return kernel


def _shift(kind):
    """Shifts; an amount < 0 or >= the bit width fills with 0 (or the sign)."""
    def kernel(xs, in_dtypes, out_dtype):
        (x, s), d = xs, in_dtypes[0]
        if not _is_int(d):
            raise KernelUnsupported(f"shift: the kernel takes integers, got {d.name}")
        t, bits = cuda_type(d), d.itemsize * 8
        big = f"{s} >= {bits}" + (f" || {s} < 0" if _is_signed(d) else "")
        if kind == "left":
            fill, shifted = f"({t})0", f"({t})(({wide_unsigned_type(d)}){x} << {s})"
        elif kind == "arith":     # >> of a signed value is arithmetic in CUDA and g++
            fill = f"({x} < 0 ? ({t})-1 : ({t})0)" if _is_signed(d) else f"({t})0"
            shifted = f"({t})({x} >> {s})"
        else:
            fill, shifted = f"({t})0", f"({t})(({unsigned_type(d)}){x} >> {s})"
        return f"(({big}) ? {fill} : {shifted})"
    kernel.__name__ = f"shift_{kind}_kernel"
    return kernel


# --- select_n, clamp, convert_element_type ----------------------------------------------------

def _select_n(xs, in_dtypes, out_dtype):
    which, *cases = xs
    if len(cases) == 1:
        return cases[0]
    if in_dtypes[0].kind == "b":
        return f"({which} ? {cases[1]} : {cases[0]})"
    # an int32 selector is clipped into range, as np.choose(np.clip(which, 0, n - 1), cases)
    expr = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        expr = f"({which} <= {i} ? {cases[i]} : {expr})"
    return expr


def _clamp(xs, in_dtypes, out_dtype):    # np.minimum(np.maximum(x, lo), hi)
    lo, x, hi = xs
    return f"fnx_min(fnx_max({x}, {lo}), {hi})"


def _float_to_int_bounds(src, dst):
    """Exclusive bounds (as ``src`` floats) of the values whose truncation fits ``dst``."""
    info, f = np.iinfo(dst), src.type
    below = info.min - 1
    if int(f(below)) == below:                 # min - 1 is a float: x > min - 1
        lo = f(below)
    else:                                      # it is not: x >= min, i.e. x > the float below
        lo = np.nextafter(f(info.min), f(-np.inf))
    return lo, f(info.max + 1)                 # max + 1 is a power of two: exact


def _convert(xs, in_dtypes, out_dtype, *, new_dtype=None, weak_type=False):
    (x,), src, dst = xs, np.dtype(in_dtypes[0]), np.dtype(out_dtype)
    t = cuda_type(dst)
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind == "f" and dst.kind in "iu":
        lo, hi = _float_to_int_bounds(src, dst)
        info = np.iinfo(dst)
        return (f"fnx_f2i<{t}, {cuda_type(src)}>({x}, {c_literal(lo, src)}, "
                f"{c_literal(hi, src)}, {c_literal(info.min, dst)}, {c_literal(info.max, dst)})")
    return f"({t})({x})"    # wraps between integers, rounds to nearest into floats


# --- attach ------------------------------------------------------------------------------------

HOOKS = {
    E.neg_p: _neg, E.abs_p: _abs, E.sign_p: _sign,
    E.floor_p: _math1("floor"), E.ceil_p: _math1("ceil"),
    E.exp_p: _math1("exp"), E.exp2_p: _math1("exp2"), E.expm1_p: _math1("expm1"),
    E.log_p: _math1("log"), E.log1p_p: _math1("log1p"), E.log2_p: _math1("log2"),
    E.log10_p: _math1("log10"), E.sqrt_p: _math1("sqrt"), E.rsqrt_p: _rsqrt,
    E.cbrt_p: _math1("cbrt"), E.square_p: _square, E.reciprocal_p: _reciprocal,
    E.sin_p: _math1("sin"), E.cos_p: _math1("cos"), E.tan_p: _math1("tan"),
    E.asin_p: _math1("asin"), E.acos_p: _math1("acos"), E.atan_p: _math1("atan"),
    E.sinh_p: _math1("sinh"), E.cosh_p: _math1("cosh"), E.tanh_p: _math1("tanh"),
    E.asinh_p: _math1("asinh"), E.acosh_p: _math1("acosh"), E.atanh_p: _math1("atanh"),
    E.logistic_p: _logistic, E.erf_p: _math1("erf"), E.erfc_p: _math1("erfc"),
    E.erf_inv_p: _math1("erfinv"), E.lgamma_p: _math1("lgamma"),
    E.is_finite_p: _classify("isfinite"), E.isinf_p: _classify("isinf"),
    E.isnan_p: _classify("isnan"), E.not_p: _not,
    E.real_p: _identity, E.imag_p: _imag, E.conj_p: _identity, E.stop_gradient_p: _identity,
    E.round_p: _round, E.integer_pow_p: _integer_pow,
    E.add_p: _arith("+"), E.sub_p: _arith("-"), E.mul_p: _arith("*"),
    E.div_p: _int_helper("fnx_idiv", "({a} / {b})"),
    E.rem_p: _int_helper("fnx_irem", "fmod{f}({a}, {b})", with_unsigned=False),
    E.floor_divide_p: _int_helper("fnx_ifloordiv", "fnx_ffloordiv({a}, {b})"),
    E.pow_p: _pow, E.max_p: _minmax("fnx_max"), E.min_p: _minmax("fnx_min"),
    E.atan2_p: _math2("atan2"), E.hypot_p: _math2("hypot"), E.copysign_p: _math2("copysign"),
    E.nextafter_p: _math2("nextafter"), E.logaddexp_p: _logaddexp,
    E.eq_p: _compare("=="), E.ne_p: _compare("!="), E.lt_p: _compare("<"),
    E.le_p: _compare("<="), E.gt_p: _compare(">"), E.ge_p: _compare(">="),
    E.and_p: _bitwise("&"), E.or_p: _bitwise("|"), E.xor_p: _bitwise("^"),
    E.shift_left_p: _shift("left"), E.shift_right_arithmetic_p: _shift("arith"),
    E.shift_right_logical_p: _shift("logical"),
    E.select_n_p: _select_n, E.clamp_p: _clamp, E.convert_element_type_p: _convert,
}

LEFT_OUT = {
    "digamma": "no CUDA math function; fnx's algorithm is not ported to device code",
    "polygamma": "no CUDA math function; fnx's algorithm is not ported to device code",
}

for _prim, _hook in HOOKS.items():
    _prim.kernel = _hook
