"""Elementwise primitives: one line each, through the ``unop``/``binop`` constructors.

Binary primitives need equal shapes and dtypes (``fnx.numpy`` broadcasts and
promotes before binding them). Where NumPy's own function differs from the
lax semantics (integer division truncates toward zero, shifts past the bit
width give 0 or the sign, ``round`` rounds half away from zero), the impl
here is the definition.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.primitive import Primitive, ShapeDtypeStruct
from ._rules import binop, check_kind, describe, quiet, same_shapes_dtypes, unop
from ..errors import ShapeError
from . import special_math

_ERR = dict(divide="ignore", invalid="ignore", over="ignore", under="ignore")

# NumPy impl without floating-point warnings (JAX semantics: no warnings); ``.raw``
# is the plain function, which jit calls inside one errstate for the whole call.
_quiet = quiet


def _real_dtype(d):
    return np.empty(0, d).real.dtype


_INEXACT = " Integer inputs: use the fnx.numpy function, which converts them to float."

# --- unary -----------------------------------------------------------------------
neg_p = unop("neg", np.negative)
abs_p = unop("abs", np.absolute, "num", out_dtype=_real_dtype)
sign_p = unop("sign", np.sign)
floor_p = unop("floor", np.floor, "float")
ceil_p = unop("ceil", np.ceil, "float")
exp_p = unop("exp", _quiet(np.exp), "inexact", hint=_INEXACT)
exp2_p = unop("exp2", _quiet(np.exp2), "inexact", hint=_INEXACT)
expm1_p = unop("expm1", _quiet(np.expm1), "inexact", hint=_INEXACT)
log_p = unop("log", _quiet(np.log), "inexact", hint=_INEXACT)


def _log1p_impl(x):
    if x.dtype.kind != "c":
        return np.log1p(x)
    # NumPy's complex log1p forms 1 + z and loses the real part for small z
    # (log1p(0.02j) in complex64 is off by ~20 ulp of |z|). Near 0 (parts below 1/2):
    # log|1 + z| = log1p(re * (re + 2) + im**2) / 2, arg(1 + z) = atan2(im, 1 + re).
    # Elsewhere forming 1 + z costs at most an ulp of |z| (and near z = -1 the
    # formula above would cancel), so NumPy's log1p is used.
    re, im = x.real, x.imag
    small = (np.abs(re) < 0.5) & (np.abs(im) < 0.5)
    careful = 0.5 * np.log1p(re * (re + 2) + im * im) + 1j * np.arctan2(im, 1 + re)
    return np.where(small, careful, np.log1p(x)).astype(x.dtype, copy=False)


log1p_p = unop("log1p", _quiet(_log1p_impl), "inexact", hint=_INEXACT)
log2_p = unop("log2", _quiet(np.log2), "inexact", hint=_INEXACT)
log10_p = unop("log10", _quiet(np.log10), "inexact", hint=_INEXACT)
sqrt_p = unop("sqrt", _quiet(np.sqrt), "inexact", hint=_INEXACT)
rsqrt_p = unop("rsqrt", _quiet(lambda x: 1 / np.sqrt(x)), "inexact", hint=_INEXACT)
cbrt_p = unop("cbrt", np.cbrt, "float", hint=_INEXACT)
square_p = unop("square", _quiet(np.square))
reciprocal_p = unop("reciprocal", _quiet(np.reciprocal), "inexact", hint=_INEXACT)
sin_p = unop("sin", _quiet(np.sin), "inexact", hint=_INEXACT)
cos_p = unop("cos", _quiet(np.cos), "inexact", hint=_INEXACT)
tan_p = unop("tan", _quiet(np.tan), "inexact", hint=_INEXACT)
asin_p = unop("asin", _quiet(np.arcsin), "inexact", hint=_INEXACT)
acos_p = unop("acos", _quiet(np.arccos), "inexact", hint=_INEXACT)
atan_p = unop("atan", _quiet(np.arctan), "inexact", hint=_INEXACT)
sinh_p = unop("sinh", _quiet(np.sinh), "inexact", hint=_INEXACT)
cosh_p = unop("cosh", _quiet(np.cosh), "inexact", hint=_INEXACT)
tanh_p = unop("tanh", np.tanh, "inexact", hint=_INEXACT)
asinh_p = unop("asinh", np.arcsinh, "inexact", hint=_INEXACT)
acosh_p = unop("acosh", _quiet(np.arccosh), "inexact", hint=_INEXACT)
atanh_p = unop("atanh", _quiet(np.arctanh), "inexact", hint=_INEXACT)
def _logistic_impl(x):
    # exp(-|x|) never overflows; e / (1 + e) keeps full relative accuracy for x < 0
    # (exp(-logaddexp(0, -x)) loses digits there: the error of the logaddexp term
    # is magnified by its size).
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


logistic_p = unop("logistic", _logistic_impl, "float", hint=_INEXACT)
erf_p = unop("erf", special_math.erf, "float", hint=_INEXACT)
erfc_p = unop("erfc", special_math.erfc, "float", hint=_INEXACT)
erf_inv_p = unop("erf_inv", special_math.erf_inv, "float", hint=_INEXACT)
lgamma_p = unop("lgamma", special_math.lgamma, "float", hint=_INEXACT)
digamma_p = unop("digamma", special_math.digamma, "float", hint=_INEXACT)
is_finite_p = unop("is_finite", np.isfinite, "float", out_dtype=lambda d: dtypes.bool_)
isinf_p = unop("isinf", np.isinf, "float", out_dtype=lambda d: dtypes.bool_)
isnan_p = unop("isnan", np.isnan, "float", out_dtype=lambda d: dtypes.bool_)
not_p = unop("not", np.invert, "intbool")
real_p = unop("real", np.real, "any", out_dtype=_real_dtype)
imag_p = unop("imag", np.imag, "any", out_dtype=_real_dtype)


def _weak_real_part(p):
    """As JAX: the real result of a weakly typed complex value (``abs(1 + 2j)``,
    ``real(1j)``) is weakly typed too, so it takes the other operand's float type."""
    rule = p.shape_rule

    def shape_rule(x):
        out = rule(x)
        return ShapeDtypeStruct(out.shape, out.dtype, x.weak_type)
    p.shape_rule = shape_rule


for _p in (abs_p, real_p, imag_p):
    _weak_real_part(_p)
conj_p = unop("conj", lambda x: np.conjugate(x) if x.dtype.kind == "c" else x,
               "any")  # np.conjugate turns bool into int8
stop_gradient_p = unop("stop_gradient", lambda x: x, "any")  # identity whose derivative is 0
stop_gradient_p.numpy_codegen = lambda ins, params, bind_global, *avals: ins[0]


def _round_impl(x, *, rounding_method=0):
    if rounding_method == 1:
        return np.round(x)
    r = np.trunc(x)
    # where(...) rather than r + 0: adding zero would turn -0.0 (round(-0.3)) into +0.0
    return np.where(np.abs(x - r) >= 0.5, r + np.sign(x), r)


round_p = unop("round", _quiet(_round_impl), "float")  # rounding_method: 0 away from zero, 1 to even


def _round_rule(rule):
    def shape_rule(x, *, rounding_method=0):
        if rounding_method not in (0, 1):
            raise ShapeError(f"round: rounding_method must be 0 (AWAY_FROM_ZERO) or 1 "
                             f"(TO_NEAREST_EVEN), got {rounding_method!r} for {describe(x)}")
        return rule(x)
    return shape_rule


round_p.shape_rule = _round_rule(round_p.shape_rule)


def _integer_pow_rule(x, *, y):
    check_kind("integer_pow", x, "iufc")
    if not isinstance(y, int):
        raise ShapeError(f"integer_pow: exponent must be a Python int, got {y!r}")
    return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)


def _int_power(x, y):
    """x ** y for integers with JAX's rule for negative exponents (no error)."""
    y_pos = np.where(y < 0, 0, y)
    out = np.power(x, y_pos)
    neg = y < 0
    if np.any(neg):
        one = np.ones_like(out)
        odd = (y % 2) != 0
        inv = np.where(x == 1, one, np.where(x == -1, np.where(odd, -one, one), 0 * one))
        out = np.where(neg, inv, out)
    return out.astype(np.result_type(x), copy=False)


def _integer_pow_impl(x, *, y):
    if x.dtype.kind in "iu":
        return _int_power(x, np.asarray(y))
    return np.power(x, x.dtype.type(y)) if y != 2 else np.square(x)


integer_pow_p = Primitive("integer_pow", shape_rule=_integer_pow_rule,
                          impl=_quiet(_integer_pow_impl))

# --- binary ----------------------------------------------------------------------
add_p = binop("add", _quiet(np.add))
sub_p = binop("sub", _quiet(np.subtract))
mul_p = binop("mul", _quiet(np.multiply))


def _div_impl(x, y):
    if x.dtype.kind in "iu":
        with np.errstate(**_ERR):
            q = np.floor_divide(x, y)
            fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return (q + fix).astype(x.dtype, copy=False)
    with np.errstate(**_ERR):
        return np.true_divide(x, y)


div_p = binop("div", _div_impl)                  # integer division truncates toward zero
rem_p = binop("rem", _quiet(np.fmod), "realnum")  # sign of the dividend, like C
floor_divide_p = binop("floor_divide", _quiet(np.floor_divide), "realnum")


def _pow_impl(x, y):
    if x.dtype.kind in "iu":
        return _int_power(x, y)
    with np.errstate(**_ERR):
        return np.power(x, y)


pow_p = binop("pow", _pow_impl)
max_p = binop("max", np.maximum, "any")
min_p = binop("min", np.minimum, "any")
atan2_p = binop("atan2", _quiet(np.arctan2), "float")
hypot_p = binop("hypot", np.hypot, "float")
copysign_p = binop("copysign", np.copysign, "float")
nextafter_p = binop("nextafter", np.nextafter, "float")
logaddexp_p = binop("logaddexp", _quiet(np.logaddexp), "float")
# polygamma(m, x): the m-th derivative of digamma; m is integer-valued, of x's dtype
# (JAX's form). Non-integer or negative m gives NaN (special_math.polygamma).
polygamma_p = binop("polygamma", special_math.polygamma, "float", hint=_INEXACT)
_polygamma_rule = polygamma_p.shape_rule


def _polygamma_shape_rule(m, x):
    try:
        return _polygamma_rule(m, x)
    except ShapeError as e:   # there is no fnx.numpy.polygamma to point to
        raise ShapeError(str(e).replace("use fnx.numpy.polygamma for NumPy broadcasting and "
                                        "type promotion, or ", "use ")) from None


polygamma_p.shape_rule = _polygamma_shape_rule
eq_p = binop("eq", np.equal, "any", out_dtype=dtypes.bool_)
ne_p = binop("ne", np.not_equal, "any", out_dtype=dtypes.bool_)
lt_p = binop("lt", np.less, "real", out_dtype=dtypes.bool_)
le_p = binop("le", np.less_equal, "real", out_dtype=dtypes.bool_)
gt_p = binop("gt", np.greater, "real", out_dtype=dtypes.bool_)
ge_p = binop("ge", np.greater_equal, "real", out_dtype=dtypes.bool_)
and_p = binop("and", np.bitwise_and, "intbool")
or_p = binop("or", np.bitwise_or, "intbool")
xor_p = binop("xor", np.bitwise_xor, "intbool")


def _shift_impl(kind):
    def impl(x, s):
        bits = x.dtype.itemsize * 8
        big = (s < 0) | (s >= bits)
        s_ok = np.where(big, 0, s).astype(x.dtype, copy=False)
        if kind == "left":
            return np.where(big, 0, np.left_shift(x, s_ok)).astype(x.dtype, copy=False)
        if kind == "arith":
            fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
            return np.where(big, fill, np.right_shift(x, s_ok)).astype(x.dtype, copy=False)
        u = np.dtype(f"u{x.dtype.itemsize}")  # int -> uint of equal width wraps
        out = np.right_shift(np.asarray(x).astype(u), np.asarray(s_ok).astype(u))
        return np.where(big, 0, out).astype(x.dtype)
    return impl


shift_left_p = binop("shift_left", _shift_impl("left"), "int")
shift_right_arithmetic_p = binop("shift_right_arithmetic", _shift_impl("arith"), "int")
shift_right_logical_p = binop("shift_right_logical", _shift_impl("logical"), "int")


# --- select, clamp, convert ----------------------------------------------------------

def _select_n_rule(which, *cases):
    if not cases:
        raise ShapeError("select_n: needs at least one case")
    same_shapes_dtypes("select_n", cases, "cases")
    if which.dtype not in (dtypes.bool_, dtypes.int32):
        raise ShapeError(f"select_n: the selector must be bool or int32, got {describe(which)}")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise ShapeError(f"select_n: a bool selector picks from 2 cases, got {len(cases)}")
    if which.shape not in ((), cases[0].shape):
        raise ShapeError(f"select_n: the selector must be a scalar or shaped like the cases; "
                         f"got selector {describe(which)} and cases {describe(cases[0])}")
    c = cases[0]
    return ShapeDtypeStruct(c.shape, c.dtype, all(x.weak_type for x in cases))


# ``np.where`` with a bool mask copies 1-, 2- and 4-byte elements one branch at a time:
# on a mask that is not sorted (a ReLU's, a dropout's) it runs about 5x slower than a
# branch-free blend of the bits, ``b ^ ((a ^ b) & mask)`` on unsigned views (the same bits
# exactly, NaN payloads included). 8-byte elements have a fast ``np.where`` of their own,
# and below this many elements ``np.where`` is as fast.
_BLEND_MIN_SIZE = 1 << 13
_BLEND_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32)}


def _select_n_impl(which, *cases):
    """``cases[which]`` elementwise (a bool ``which`` picks ``cases[1]`` where True);
    operands broadcast as NumPy's do (the jit lowering passes broadcasts unexpanded)."""
    if len(cases) == 1:
        return cases[0]
    if which.dtype != np.bool_:
        return np.choose(np.clip(which, 0, len(cases) - 1), cases)
    a, b = cases[1], cases[0]
    u = _BLEND_UINT.get(b.dtype.itemsize)
    if u is None or which.size < _BLEND_MIN_SIZE or which.shape != np.broadcast_shapes(
            which.shape, a.shape, b.shape):
        return np.where(which, a, b)
    ai, bi = a.view(u), b.view(u)
    mask = which.astype(u)
    np.negative(mask, out=mask)  # all ones where True
    np.bitwise_and(mask, np.bitwise_xor(ai, bi), out=mask)
    np.bitwise_xor(mask, bi, out=mask)
    return mask.view(b.dtype)


select_n_p = Primitive("select_n", shape_rule=_select_n_rule, impl=_select_n_impl)
select_n_p.numpy_broadcasts = True  # its impl broadcasts operands (see numpy_codegen)


def _clamp_rule(lo, x, hi):
    for b in (lo, hi):
        if b.dtype != x.dtype or b.shape not in ((), x.shape):
            raise ShapeError(f"clamp: bounds must have the operand's dtype and be scalars or "
                             f"shaped like it; got min {describe(lo)}, operand {describe(x)}, "
                             f"max {describe(hi)}")
    check_kind("clamp", x, "biuf")
    return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)


clamp_p = Primitive("clamp", shape_rule=_clamp_rule,
                    impl=lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))


def _convert_rule(x, *, new_dtype, weak_type=False):
    return ShapeDtypeStruct(x.shape, new_dtype, weak_type)


def _convert_impl(x, *, new_dtype, weak_type=False):
    if x.dtype == new_dtype:
        return x
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = np.real(x)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(new_dtype)


convert_element_type_p = Primitive("convert_element_type", shape_rule=_convert_rule,
                                   impl=_convert_impl)


# --- jvp rules ---------------------------------------------------------------------------------
# Written with fnx.lax ops, so they differentiate again (higher order for free).
from ..transforms.jvp import defjvp, defjvp_zero, deflinear  # noqa: E402
from . import ops as L  # noqa: E402  (rules run after import; ops imports this module)

# Python floats, so they take the operand's dtype (weak); NumPy float64 scalars would be
# strongly typed float64 operands, which lax rejects next to float32 or complex values.
_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2 / np.sqrt(np.pi))

deflinear(neg_p)
deflinear(real_p)
deflinear(imag_p)
deflinear(conj_p)
for _p in (stop_gradient_p, sign_p, floor_p, ceil_p, round_p, is_finite_p, isinf_p, isnan_p,
           not_p, eq_p, ne_p,
           lt_p, le_p, gt_p, ge_p, and_p, or_p, xor_p, shift_left_p, shift_right_logical_p,
           shift_right_arithmetic_p, floor_divide_p, nextafter_p):
    defjvp_zero(_p)
def _abs_jvp(g, ans, x):
    if x.dtype.kind != "c":
        return L.mul(g, L.sign(x))
    # d|z| = Re(conj(z) dz) / |z|, and 0 at z = 0 (as JAX). Not through sign(z):
    # for complex z that is z / |z|, whose derivative is not zero.
    zero = L.eq(ans, L.convert_element_type(0, ans.dtype))
    safe = L.select(zero, L.add(L.mul(ans, 0.0), 1.0), ans)
    return L.div(L.real(L.mul(L.conj(x), g)), safe)   # conj(0) g / 1 = 0 at z = 0


defjvp(abs_p, _abs_jvp)
defjvp(exp_p, lambda g, ans, x: L.mul(g, ans))
defjvp(exp2_p, lambda g, ans, x: L.mul(g, L.mul(ans, _LN2)))
defjvp(expm1_p, lambda g, ans, x: L.mul(g, L.add(ans, 1.0)))
defjvp(log_p, lambda g, ans, x: L.div(g, x))
defjvp(log1p_p, lambda g, ans, x: L.div(g, L.add(x, 1.0)))
defjvp(log2_p, lambda g, ans, x: L.div(g, L.mul(x, _LN2)))
defjvp(log10_p, lambda g, ans, x: L.div(g, L.mul(x, _LN10)))
defjvp(sqrt_p, lambda g, ans, x: L.div(g, L.mul(ans, 2.0)))
defjvp(rsqrt_p, lambda g, ans, x: L.mul(g, L.mul(L.div(ans, x), -0.5)))
defjvp(cbrt_p, lambda g, ans, x: L.div(g, L.mul(L.square(ans), 3.0)))
defjvp(square_p, lambda g, ans, x: L.mul(g, L.mul(x, 2.0)))
defjvp(reciprocal_p, lambda g, ans, x: L.neg(L.mul(g, L.square(ans))))
defjvp(sin_p, lambda g, ans, x: L.mul(g, L.cos(x)))
defjvp(cos_p, lambda g, ans, x: L.neg(L.mul(g, L.sin(x))))
defjvp(tan_p, lambda g, ans, x: L.mul(g, L.add(L.square(ans), 1.0)))
defjvp(asin_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.sub(1.0, L.square(x)))))
defjvp(acos_p, lambda g, ans, x: L.neg(L.mul(g, L.rsqrt(L.sub(1.0, L.square(x))))))
defjvp(atan_p, lambda g, ans, x: L.div(g, L.add(L.square(x), 1.0)))
defjvp(sinh_p, lambda g, ans, x: L.mul(g, L.cosh(x)))
defjvp(cosh_p, lambda g, ans, x: L.mul(g, L.sinh(x)))
defjvp(tanh_p, lambda g, ans, x: L.mul(g, L.sub(1.0, L.square(ans))))
defjvp(asinh_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.add(L.square(x), 1.0))))
defjvp(acosh_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.mul(L.sub(x, 1.0), L.add(x, 1.0)))))
defjvp(atanh_p, lambda g, ans, x: L.div(g, L.sub(1.0, L.square(x))))
# s(x) (1 - s(x)) as s(x) s(-x): 1 - s(x) cancels for large x (at x = 15 in float32
# it is off by 20%), s(-x) keeps full relative accuracy in both tails.
defjvp(logistic_p, lambda g, ans, x: L.mul(g, L.mul(ans, logistic_p.bind(L.neg(x)))))
defjvp(erf_p, lambda g, ans, x: L.mul(g, L.mul(L.exp(L.neg(L.square(x))), _TWO_OVER_SQRT_PI)))
defjvp(erfc_p, lambda g, ans, x: L.mul(g, L.mul(L.exp(L.neg(L.square(x))), -_TWO_OVER_SQRT_PI)))
defjvp(erf_inv_p, lambda g, ans, x: L.mul(g, L.mul(L.exp(L.square(ans)), 1 / _TWO_OVER_SQRT_PI)))
defjvp(lgamma_p, lambda g, ans, x: L.mul(g, L.digamma(x)))
defjvp(digamma_p, lambda g, ans, x: L.mul(g, L.polygamma(1.0, x)))


def _polygamma_order_jvp(g, ans, m, x):
    raise ValueError("polygamma: the derivative with respect to the order m is not defined "
                     "(m is integer-valued); pass m as a constant or wrap it in "
                     "lax.stop_gradient")


defjvp(polygamma_p, _polygamma_order_jvp,
       lambda g, ans, m, x: L.mul(g, L.polygamma(L.add(m, 1.0), x)))
defjvp(integer_pow_p, lambda g, ans, x, *, y: (
    L.mul(g, L.mul(L.integer_pow(x, y - 1), float(y))) if y != 0 else None))

defjvp(add_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
defjvp(sub_p, lambda g, ans, x, y: g, lambda g, ans, x, y: L.neg(g))
defjvp(mul_p, lambda g, ans, x, y: L.mul(g, y), lambda g, ans, x, y: L.mul(x, g))
defjvp(div_p, lambda g, ans, x, y: L.div(g, y),
       lambda g, ans, x, y: L.neg(L.mul(g, L.div(ans, y))))
defjvp(rem_p, lambda g, ans, x, y: g,
       lambda g, ans, x, y: L.neg(L.mul(g, L.round(L.div(L.sub(x, ans), y)))))
defjvp(pow_p,
       lambda g, ans, x, y: L.mul(g, L.mul(y, L.pow(x, L.sub(y, 1.0)))),
       lambda g, ans, x, y: L.mul(g, L.mul(ans, L.log(L.select(L.eq(x, 0.0), L.add(
           L.mul(x, 0.0), 1.0), x)))))
defjvp(max_p, lambda g, ans, x, y: L.mul(g, _tie_weight(x, y)),
       lambda g, ans, x, y: L.mul(g, _tie_weight(y, x)))
defjvp(min_p, lambda g, ans, x, y: L.mul(g, _tie_weight(y, x)),
       lambda g, ans, x, y: L.mul(g, _tie_weight(x, y)))
defjvp(atan2_p, lambda g, ans, x, y: L.mul(g, L.div(y, L.add(L.square(x), L.square(y)))),
       lambda g, ans, x, y: L.mul(g, L.div(L.neg(x), L.add(L.square(x), L.square(y)))))
defjvp(hypot_p, lambda g, ans, x, y: L.mul(g, L.div(x, ans)),
       lambda g, ans, x, y: L.mul(g, L.div(y, ans)))
defjvp(copysign_p, lambda g, ans, x, y: L.mul(g, L.mul(L.sign(x), L.sign(ans))), None)
# d/dx logaddexp(x, y) = exp(x - ans) = logistic(x - y): the logistic keeps full relative
# accuracy when x << y, where x - ans cancels (float32 second derivatives off by 1%).
defjvp(logaddexp_p, lambda g, ans, x, y: L.mul(g, logistic_p.bind(L.sub(x, y))),
       lambda g, ans, x, y: L.mul(g, logistic_p.bind(L.sub(y, x))))


def _tie_weight(a, b):
    """1 where a > b, 1/2 where equal, 0 where less (max's derivative splits ties)."""
    one = L.convert_element_type(L.gt(a, b), a.dtype)
    half = L.mul(L.convert_element_type(L.eq(a, b), a.dtype), 0.5)
    return L.add(one, half)


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    if all(t is None for t in tangents[1:]):
        return out, None
    from ..transforms.jvp import instantiate
    ts = [instantiate(t, c) for t, c in zip(tangents[1:], cases)]
    return out, select_n_p.bind(which, *ts)


select_n_p.jvp = _select_n_jvp


def _clamp_jvp(primals, tangents):
    lo, x, hi = primals
    out = clamp_p.bind(lo, x, hi)
    parts = []
    for t, mask in ((tangents[0], L.lt(x, lo)), (tangents[1], L.bitwise_and(L.ge(x, lo),
                                                                             L.le(x, hi))),
                    (tangents[2], L.gt(x, hi))):
        if t is not None:
            if t.shape != out.shape:
                t = L.broadcast_in_dim(t, out.shape, ())
            parts.append(L.select(mask, t, L.full_like(t, 0)))
    from ..transforms.jvp import _sum_tangents
    return out, _sum_tangents(parts)


clamp_p.jvp = _clamp_jvp


def _convert_jvp(primals, tangents, *, new_dtype, weak_type=False):
    out = convert_element_type_p.bind(*primals, new_dtype=new_dtype, weak_type=weak_type)
    t = tangents[0]
    if t is None or not dtypes.is_inexact(new_dtype):
        return out, None
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


convert_element_type_p.jvp = _convert_jvp


# --- transpose rules (the linear primitives reverse mode meets) ---------------------------------
from ..transforms.vjp import is_linear  # noqa: E402


def unbroadcast(ct, x):
    """``ct`` summed down to ``x``'s shape (a rank-0 operand took the full shape)."""
    if tuple(ct.shape) == tuple(x.shape):
        return ct
    return L.reduce_sum(ct, tuple(range(ct.ndim)))


def _convert_ct(ct, x):
    return ct if ct.dtype == x.dtype else L.convert_element_type(ct, x.dtype)


neg_p.transpose = lambda ct, x: [L.neg(ct)]
add_p.transpose = lambda ct, x, y: [unbroadcast(ct, x) if is_linear(x) else None,
                                    unbroadcast(ct, y) if is_linear(y) else None]
sub_p.transpose = lambda ct, x, y: [unbroadcast(ct, x) if is_linear(x) else None,
                                    unbroadcast(L.neg(ct), y) if is_linear(y) else None]
mul_p.transpose = lambda ct, x, y: (
    [unbroadcast(L.mul(ct, y), x), None] if is_linear(x) else [None, unbroadcast(L.mul(x, ct), y)])
div_p.transpose = lambda ct, x, y: [unbroadcast(L.div(ct, y), x), None]
conj_p.transpose = lambda ct, x: [L.conj(ct)]
real_p.transpose = lambda ct, x: [_convert_ct(ct, x)]
# imag(z) = Re(-i z): with the pairing Re(ct * dz) its transpose is ct -> -i ct (as JAX's)
imag_p.transpose = lambda ct, x: [L.mul(_convert_ct(ct, x), -1j) if x.dtype.kind == "c"
                                   else None]   # imag of a real operand is constant 0
convert_element_type_p.transpose = lambda ct, x, **p: [_convert_ct(ct, x)]


def _select_n_transpose(ct, which, *cases):
    zero = L.full_like(ct, 0)   # real zeros: ct * 0 is NaN where ct is inf
    out = [None]
    for i, c in enumerate(cases):
        if not is_linear(c):
            out.append(None)
        elif which.dtype == np.bool_:
            out.append(L.select(which, ct, zero) if i == 1 else L.select(which, zero, ct))
        else:
            out.append(L.select(L.eq(which, i), ct, zero))
    return out


select_n_p.transpose = _select_n_transpose


# --- batching rules ---------------------------------------------------------------------------
# (unop/binop primitives get theirs from their constructors)
from ..transforms.vmap import batch_elementwise  # noqa: E402

for _p in (select_n_p, clamp_p, convert_element_type_p, integer_pow_p, round_p):
    batch_elementwise(_p)
