"""Elementwise primitives, one block each: the definition (through the ``unop``/``binop``
constructors), then the jvp, transpose and batching rules, then the lowerings (the
``"cuda"`` expression, ``fnx.core.cuda_rules``; the ``"onnx"`` graph,
``fnx.core.onnx_rules``). JAX's ``lax.py`` layout.

Binary primitives need equal shapes and dtypes (``fnx.numpy`` broadcasts and
promotes before binding them). Where NumPy's own function differs from the
lax semantics (integer division truncates toward zero, shifts past the bit
width give 0 or the sign, ``round`` rounds half away from zero), the impl
here is the definition, and every lowering reproduces it.

The jvp and transpose rules are written with fnx.lax ops (``L``), so they
differentiate again (higher order for free). Primitives without a CUDA rule are listed
in ``fnx.core.cuda_rules.LEFT_OUT``, those without an ONNX rule in
``fnx.core.onnx_rules``'s docstring, each with the reason.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import array_library as AL
from ..core import cuda_rules as C
from ..core import dtypes
from ..core import onnx_rules as O
from ..core.backend import register_lowering
from ..core.numpy_rules import NumpyRule
from ..core.ir import Literal, is_literal_one, is_literal_zero, producer_of
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.jvp import defjvp, defjvp_zero, deflinear, instantiate, sum_tangents
from ..transforms.vjp import is_linear
from ..transforms.vmap import batch_elementwise
from .rule_helpers import binop, check_kind, describe, quiet, same_shapes_dtypes, unop
from ..core.numpy_errstate import quiet_call
from . import special_math
from . import ops as L  # (rules run after import; ops imports this module)

_ERR = dict(divide="ignore", invalid="ignore", over="ignore", under="ignore")

# NumPy impl without floating-point warnings (JAX semantics: no warnings); ``.raw``
# is the plain function, which jit calls inside one errstate for the whole call.
_quiet = quiet


def _quiet_for_bfloat16(prim):
    """bfloat16's comparison and max/min loops (ml_dtypes) warn on NaN where NumPy's own
    do not: the eager impl runs them quietly for bfloat16; other dtypes, and jit's code
    (through the ufunc of its ``"numpy"`` rule), call the ufunc as it is."""
    ufunc, bf16 = prim.impl, dtypes.bfloat16

    def impl(x, y):
        if x.dtype == bf16:
            return quiet_call(ufunc, x, y)
        return ufunc(x, y)
    impl.__name__ = getattr(ufunc, "__name__", prim.name)
    prim.impl = impl


def _real_dtype(d):
    return np.empty(0, d).real.dtype


_INEXACT = " Integer inputs: use the fnx.numpy function, which converts them to float."

# Python floats, so they take the operand's dtype (weak); NumPy float64 scalars would be
# strongly typed float64 operands, which lax rejects next to float32 or complex values.
_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2 / np.sqrt(np.pi))


def _weak_real_part(p):
    """As JAX: the real result of a weakly typed complex value (``abs(1 + 2j)``,
    ``real(1j)``) is weakly typed too, so it takes the other operand's float type (and
    ``is_finite`` of a weak float is a weak bool)."""
    rule = p.shape_rule

    def shape_rule(x):
        out = rule(x)
        return ShapeDtypeStruct(out.shape, out.dtype, x.weak_type)
    p.shape_rule = shape_rule


def unbroadcast(ct, x):
    """``ct`` summed down to ``x``'s shape (a rank-0 operand took the full shape)."""
    if tuple(ct.shape) == tuple(x.shape):
        return ct
    return L.reduce_sum(ct, tuple(range(ct.ndim)))


def _convert_ct(ct, x):
    return ct if ct.dtype == x.dtype else L.convert_element_type(ct, x.dtype)


# === unary ======================================================================================

neg_p = unop("neg", np.negative)
deflinear(neg_p)
neg_p.transpose = lambda ct, x: [L.neg(ct)]
neg_p.simplify = lambda e, ins, lits, producer: (  # neg(neg(x)) is x: the sign bit twice
    inner.inputs[0] if (inner := producer_of(ins[0], producer, neg_p)) is not None else None)


def _neg_cuda(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    if C.is_int(d):
        return C.wrap("-", "0", x, d)
    # a negative literal operand would make "--", C's decrement: parenthesize it
    return f"(-({x}))" if x.startswith("-") else f"(-{x})"


def _neg_onnx(ctx, x):
    dt = ctx.in_avals[0].dtype
    if dt in O.NEG_KERNELS:
        return O.op(ctx, "Neg", x)
    return O.op(ctx, "Sub", O.scalar(ctx, 0, dt), x)   # unsigned: wraps, as NumPy's negative


register_lowering(neg_p, "cuda", _neg_cuda)
register_lowering(neg_p, "onnx", _neg_onnx)


abs_p = unop("abs", np.absolute, "num", out_dtype=_real_dtype)
_weak_real_part(abs_p)


def _abs_jvp(g, ans, x):
    if x.dtype.kind != "c":
        # JAX's rule: +g where x >= 0 (so 1 at 0 and -0), -g elsewhere (NaN included)
        return L.select(L.ge(x, L.convert_element_type(0, x.dtype)), g, L.neg(g))
    # d|z| = Re(conj(z) dz) / |z|, and 0 at z = 0 (as JAX). Not through sign(z):
    # for complex z that is z / |z|, whose derivative is not zero.
    zero = L.eq(ans, L.convert_element_type(0, ans.dtype))
    safe = L.select(zero, L.add(L.mul(ans, 0.0), 1.0), ans)
    return L.div(L.real(L.mul(L.conj(x), g)), safe)   # conj(0) g / 1 = 0 at z = 0


defjvp(abs_p, _abs_jvp)


def _abs_cuda(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    if C.is_signed(d):      # abs(MIN) wraps to MIN, as np.abs
        return f"({x} < 0 ? {C.wrap('-', '0', x, d)} : {x})"
    if C.is_int(d):
        return x
    return f"{C.float_fn('fabs', d)}({x})"


register_lowering(abs_p, "cuda", _abs_cuda)
register_lowering(abs_p, "onnx", O.unary("Abs"))


sign_p = unop("sign", np.sign)
defjvp_zero(sign_p)


def _sign_cuda(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    t = C.cuda_type(d)
    if C.is_signed(d):
        return f"({t})(({x} > 0) - ({x} < 0))"
    if C.is_int(d):
        return f"({t})({x} > 0)"
    C.require_float("sign", d)
    return f"fnx_fsign({x})"


register_lowering(sign_p, "cuda", _sign_cuda)
register_lowering(sign_p, "onnx", O.unary("Sign"))


floor_p = unop("floor", np.floor, "float")
defjvp_zero(floor_p)
register_lowering(floor_p, "cuda", C.math1("floor"))
register_lowering(floor_p, "onnx", O.unary("Floor"))


ceil_p = unop("ceil", np.ceil, "float")
defjvp_zero(ceil_p)
register_lowering(ceil_p, "cuda", C.math1("ceil"))
register_lowering(ceil_p, "onnx", O.unary("Ceil"))


exp_p = unop("exp", _quiet(np.exp), "inexact", hint=_INEXACT)
defjvp(exp_p, lambda g, ans, x: L.mul(g, ans))
register_lowering(exp_p, "cuda", C.math1("exp"))
register_lowering(exp_p, "onnx", O.unary("Exp"))


exp2_p = unop("exp2", _quiet(np.exp2), "inexact", hint=_INEXACT)
defjvp(exp2_p, lambda g, ans, x: L.mul(g, L.mul(ans, _LN2)))


def _exp2_onnx(ctx, x):
    return O.op(ctx, "Pow", O.scalar(ctx, 2, ctx.in_avals[0].dtype), x)


register_lowering(exp2_p, "cuda", C.math1("exp2"))
register_lowering(exp2_p, "onnx", _exp2_onnx)


expm1_p = unop("expm1", _quiet(np.expm1), "inexact", hint=_INEXACT)
defjvp(expm1_p, lambda g, ans, x: L.mul(g, L.add(ans, 1.0)))


def _expm1_onnx(ctx, x):
    return O.expm1(ctx, x, ctx.in_avals[0].dtype)


register_lowering(expm1_p, "cuda", C.math1("expm1"))
register_lowering(expm1_p, "onnx", _expm1_onnx)


log_p = unop("log", _quiet(np.log), "inexact", hint=_INEXACT)
defjvp(log_p, lambda g, ans, x: L.div(g, x))
register_lowering(log_p, "cuda", C.math1("log"))
register_lowering(log_p, "onnx", O.unary("Log"))


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
defjvp(log1p_p, lambda g, ans, x: L.div(g, L.add(x, 1.0)))


def _log1p_onnx(ctx, x):
    return O.log1p(ctx, x, ctx.in_avals[0].dtype)


register_lowering(log1p_p, "cuda", C.math1("log1p"))
register_lowering(log1p_p, "onnx", _log1p_onnx)


def _log_base_onnx(base):
    def lower(ctx, x):
        dt = ctx.in_avals[0].dtype
        return O.op(ctx, "Div", O.op(ctx, "Log", x), O.scalar(ctx, math.log(base), dt))
    lower.__name__ = f"lower_log{base}"
    return lower


log2_p = unop("log2", _quiet(np.log2), "inexact", hint=_INEXACT)
defjvp(log2_p, lambda g, ans, x: L.div(g, L.mul(x, _LN2)))
register_lowering(log2_p, "cuda", C.math1("log2"))
register_lowering(log2_p, "onnx", _log_base_onnx(2))


log10_p = unop("log10", _quiet(np.log10), "inexact", hint=_INEXACT)
defjvp(log10_p, lambda g, ans, x: L.div(g, L.mul(x, _LN10)))
register_lowering(log10_p, "cuda", C.math1("log10"))
register_lowering(log10_p, "onnx", _log_base_onnx(10))


sqrt_p = unop("sqrt", _quiet(np.sqrt), "inexact", hint=_INEXACT)
defjvp(sqrt_p, lambda g, ans, x: L.div(g, L.mul(ans, 2.0)))
register_lowering(sqrt_p, "cuda", C.math1("sqrt"))
register_lowering(sqrt_p, "onnx", O.unary("Sqrt"))


rsqrt_p = unop("rsqrt", _quiet(lambda x: 1 / np.sqrt(x)), "inexact", hint=_INEXACT)
defjvp(rsqrt_p, lambda g, ans, x: L.mul(g, L.mul(L.div(ans, x), -0.5)))


def _rsqrt_cuda(xs, in_dtypes, out_dtype):   # 1 / sqrt(x), both correctly rounded, as the impl
    return f"({C.c_literal(1, in_dtypes[0])} / {C.float_fn('sqrt', in_dtypes[0])}({xs[0]}))"


def _rsqrt_onnx(ctx, x):
    return O.op(ctx, "Div", O.scalar(ctx, 1, ctx.in_avals[0].dtype), O.op(ctx, "Sqrt", x))


register_lowering(rsqrt_p, "cuda", _rsqrt_cuda)
register_lowering(rsqrt_p, "onnx", _rsqrt_onnx)


cbrt_p = unop("cbrt", np.cbrt, "float", hint=_INEXACT)
defjvp(cbrt_p, lambda g, ans, x: L.div(g, L.mul(L.square(ans), 3.0)))


def _cbrt_onnx(ctx, x):
    """|x| ** (1/3) refined by one Newton step (the rounded exponent 1/3 costs up to
    ~|log x| * 1e-8 relative), with the sign of x; 0, inf and NaN pass through."""
    dt = ctx.in_avals[0].dtype
    ax = O.op(ctx, "Abs", x)
    y = O.op(ctx, "Pow", ax, O.scalar(ctx, 1 / 3, dt))
    step = O.op(ctx, "Sub", y, O.op(ctx, "Div", ax, O.op(ctx, "Mul", y, y)))
    y = O.op(ctx, "Sub", y, O.op(ctx, "Div", step, O.scalar(ctx, 3, dt)))
    y = O.where(ctx, O.op(ctx, "Less", x, O.scalar(ctx, 0, dt)), O.op(ctx, "Neg", y), y, dt,
                signed_zeros=False)                # y != 0 here (x = 0 is passed through)
    special = O.or_(ctx, O.eq(ctx, x, 0, dt), O.op(ctx, "IsInf", x))
    return O.where(ctx, special, x, y, dt)


register_lowering(cbrt_p, "cuda", C.math1("cbrt"))
register_lowering(cbrt_p, "onnx", _cbrt_onnx)


square_p = unop("square", _quiet(np.square))
defjvp(square_p, lambda g, ans, x: L.mul(g, L.mul(x, 2.0)))


def _square_cuda(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    return C.wrap("*", x, x, d) if C.is_int(d) else f"({x} * {x})"


def _square_onnx(ctx, x):
    return O.op(ctx, "Mul", x, x)


register_lowering(square_p, "cuda", _square_cuda)
register_lowering(square_p, "onnx", _square_onnx)


reciprocal_p = unop("reciprocal", _quiet(np.reciprocal), "inexact", hint=_INEXACT)
defjvp(reciprocal_p, lambda g, ans, x: L.neg(L.mul(g, L.square(ans))))


def _reciprocal_cuda(xs, in_dtypes, out_dtype):
    C.require_float("reciprocal", in_dtypes[0])
    return f"({C.c_literal(1, in_dtypes[0])} / {xs[0]})"


register_lowering(reciprocal_p, "cuda", _reciprocal_cuda)
register_lowering(reciprocal_p, "onnx", O.unary("Reciprocal"))


sin_p = unop("sin", _quiet(np.sin), "inexact", hint=_INEXACT)
defjvp(sin_p, lambda g, ans, x: L.mul(g, L.cos(x)))
register_lowering(sin_p, "cuda", C.math1("sin"))
register_lowering(sin_p, "onnx", O.unary("Sin"))


cos_p = unop("cos", _quiet(np.cos), "inexact", hint=_INEXACT)
defjvp(cos_p, lambda g, ans, x: L.neg(L.mul(g, L.sin(x))))
register_lowering(cos_p, "cuda", C.math1("cos"))
register_lowering(cos_p, "onnx", O.unary("Cos"))


tan_p = unop("tan", _quiet(np.tan), "inexact", hint=_INEXACT)
defjvp(tan_p, lambda g, ans, x: L.mul(g, L.add(L.square(ans), 1.0)))
register_lowering(tan_p, "cuda", C.math1("tan"))
register_lowering(tan_p, "onnx", O.unary("Tan"))


asin_p = unop("asin", _quiet(np.arcsin), "inexact", hint=_INEXACT)
defjvp(asin_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.sub(1.0, L.square(x)))))
register_lowering(asin_p, "cuda", C.math1("asin"))
register_lowering(asin_p, "onnx", O.unary("Asin"))


acos_p = unop("acos", _quiet(np.arccos), "inexact", hint=_INEXACT)
defjvp(acos_p, lambda g, ans, x: L.neg(L.mul(g, L.rsqrt(L.sub(1.0, L.square(x))))))
register_lowering(acos_p, "cuda", C.math1("acos"))
register_lowering(acos_p, "onnx", O.unary("Acos"))


atan_p = unop("atan", _quiet(np.arctan), "inexact", hint=_INEXACT)
defjvp(atan_p, lambda g, ans, x: L.div(g, L.add(L.square(x), 1.0)))
register_lowering(atan_p, "cuda", C.math1("atan"))
register_lowering(atan_p, "onnx", O.unary("Atan"))


sinh_p = unop("sinh", _quiet(np.sinh), "inexact", hint=_INEXACT)
defjvp(sinh_p, lambda g, ans, x: L.mul(g, L.cosh(x)))
register_lowering(sinh_p, "cuda", C.math1("sinh"))
register_lowering(sinh_p, "onnx", O.unary("Sinh"))


cosh_p = unop("cosh", _quiet(np.cosh), "inexact", hint=_INEXACT)
defjvp(cosh_p, lambda g, ans, x: L.mul(g, L.sinh(x)))
register_lowering(cosh_p, "cuda", C.math1("cosh"))
register_lowering(cosh_p, "onnx", O.unary("Cosh"))


tanh_p = unop("tanh", _quiet(np.tanh), "inexact", hint=_INEXACT)
defjvp(tanh_p, lambda g, ans, x: L.mul(g, L.sub(1.0, L.square(ans))))
register_lowering(tanh_p, "cuda", C.math1("tanh"))
register_lowering(tanh_p, "onnx", O.unary("Tanh"))


asinh_p = unop("asinh", np.arcsinh, "inexact", hint=_INEXACT)
defjvp(asinh_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.add(L.square(x), 1.0))))
register_lowering(asinh_p, "cuda", C.math1("asinh"))
register_lowering(asinh_p, "onnx", O.unary("Asinh"))


acosh_p = unop("acosh", _quiet(np.arccosh), "inexact", hint=_INEXACT)
defjvp(acosh_p, lambda g, ans, x: L.mul(g, L.rsqrt(L.mul(L.sub(x, 1.0), L.add(x, 1.0)))))
register_lowering(acosh_p, "cuda", C.math1("acosh"))
register_lowering(acosh_p, "onnx", O.unary("Acosh"))


atanh_p = unop("atanh", _quiet(np.arctanh), "inexact", hint=_INEXACT)
defjvp(atanh_p, lambda g, ans, x: L.div(g, L.sub(1.0, L.square(x))))
register_lowering(atanh_p, "cuda", C.math1("atanh"))
register_lowering(atanh_p, "onnx", O.unary("Atanh"))


def _logistic_impl(x):
    # exp(-|x|) never overflows; e / (1 + e) keeps full relative accuracy for x < 0
    # (exp(-logaddexp(0, -x)) loses digits there: the error of the logaddexp term
    # is magnified by its size).
    # Complex x (JAX's 1 / (1 + exp(-x))) alike: exp(-x) for Re x >= 0, exp(x) below.
    neg = (x.real if x.dtype.kind == "c" else x) < 0
    e = quiet_call(np.exp, np.where(neg, x, -x))
    return quiet_call(np.where, neg, e / (1 + e), 1 / (1 + e)).astype(x.dtype, copy=False)


logistic_p = unop("logistic", _logistic_impl, "inexact", hint=_INEXACT)
# s(x) (1 - s(x)) as s(x) s(-x): 1 - s(x) cancels for large x (at x = 15 in float32
# it is off by 20%), s(-x) keeps full relative accuracy in both tails.
defjvp(logistic_p, lambda g, ans, x: L.mul(g, L.mul(ans, logistic_p.bind(L.neg(x)))))


def _logistic_cuda(xs, in_dtypes, out_dtype):
    C.require_float("logistic", in_dtypes[0])
    return f"fnx_logistic({xs[0]})"


def _logistic_onnx(ctx, x):
    # the impl's formula: e = exp(-|x|); 1 / (1 + e) for x >= 0, else e / (1 + e)
    dt = ctx.in_avals[0].dtype
    e = O.op(ctx, "Exp", O.op(ctx, "Neg", O.op(ctx, "Abs", x)))
    den = O.op(ctx, "Add", O.scalar(ctx, 1, dt), e)
    return O.where(ctx, O.op(ctx, "GreaterOrEqual", x, O.scalar(ctx, 0, dt)),
                   O.op(ctx, "Div", O.scalar(ctx, 1, dt), den), O.op(ctx, "Div", e, den), dt,
                   signed_zeros=False)                 # both are >= +0.0


register_lowering(logistic_p, "cuda", _logistic_cuda)
register_lowering(logistic_p, "onnx", _logistic_onnx)


erf_p = unop("erf", special_math.erf, "float", hint=_INEXACT)
defjvp(erf_p, lambda g, ans, x: L.mul(g, L.mul(L.exp(L.neg(L.square(x))), _TWO_OVER_SQRT_PI)))
register_lowering(erf_p, "cuda", C.math1("erf"))
register_lowering(erf_p, "onnx", O.unary("Erf"))


erfc_p = unop("erfc", special_math.erfc, "float", hint=_INEXACT)
defjvp(erfc_p, lambda g, ans, x: L.mul(g, L.mul(L.exp(L.neg(L.square(x))), -_TWO_OVER_SQRT_PI)))
register_lowering(erfc_p, "cuda", C.math1("erfc"))
# no ONNX rule: 1 - Erf(x) loses all relative accuracy for large x


erf_inv_p = unop("erf_inv", special_math.erf_inv, "float", hint=_INEXACT)
defjvp(erf_inv_p, lambda g, ans, x: L.mul(g, L.mul(L.exp(L.square(ans)), 1 / _TWO_OVER_SQRT_PI)))
register_lowering(erf_inv_p, "cuda", C.math1("erfinv"))
# no ONNX rule (no operator; a composed series would not stay within a few ulp)


lgamma_p = unop("lgamma", special_math.lgamma, "float", hint=_INEXACT)
defjvp(lgamma_p, lambda g, ans, x: L.mul(g, L.digamma(x)))
register_lowering(lgamma_p, "cuda", C.math1("lgamma"))
# no ONNX rule (no operator; a composed series would not stay within a few ulp)


digamma_p = unop("digamma", special_math.digamma, "float", hint=_INEXACT)
defjvp(digamma_p, lambda g, ans, x: L.mul(g, L.polygamma(1.0, x)))
# no CUDA rule (no CUDA math function), no ONNX rule (no operator)


is_finite_p = unop("is_finite", np.isfinite, "float", out_dtype=lambda d: dtypes.bool_)
_weak_real_part(is_finite_p)
defjvp_zero(is_finite_p)


def _is_finite_onnx(ctx, x):
    return O.not_(ctx, O.or_(ctx, O.op(ctx, "IsNaN", x), O.op(ctx, "IsInf", x)))


register_lowering(is_finite_p, "cuda", C.classify("isfinite"))
register_lowering(is_finite_p, "onnx", _is_finite_onnx)


isinf_p = unop("isinf", np.isinf, "float", out_dtype=lambda d: dtypes.bool_)
defjvp_zero(isinf_p)
register_lowering(isinf_p, "cuda", C.classify("isinf"))
register_lowering(isinf_p, "onnx", O.unary("IsInf"))


isnan_p = unop("isnan", np.isnan, "float", out_dtype=lambda d: dtypes.bool_)
defjvp_zero(isnan_p)
register_lowering(isnan_p, "cuda", C.classify("isnan"))
register_lowering(isnan_p, "onnx", O.unary("IsNaN"))


not_p = unop("not", np.invert, "intbool")
defjvp_zero(not_p)


def _not_cuda(xs, in_dtypes, out_dtype):
    (x,), (d,) = xs, in_dtypes
    if d.kind == "b":
        return f"(!{x})"
    if not C.is_int(d):
        raise C.KernelUnsupported(f"not: the kernel takes bool or integers, got {d.name}")
    return f"({C.cuda_type(d)})(~{x})"


def _not_onnx(ctx, x):
    return O.op(ctx, "Not" if ctx.in_avals[0].dtype == O.BOOL else "BitwiseNot", x)


register_lowering(not_p, "cuda", _not_cuda)
register_lowering(not_p, "onnx", _not_onnx)


real_p = unop("real", np.real, "any", out_dtype=_real_dtype)
_weak_real_part(real_p)
deflinear(real_p)
real_p.transpose = lambda ct, x: [_convert_ct(ct, x)]
register_lowering(real_p, "cuda", C.identity)
register_lowering(real_p, "onnx", O.identity)


imag_p = unop("imag", np.imag, "any", out_dtype=_real_dtype)
_weak_real_part(imag_p)
deflinear(imag_p)
# imag(z) = Re(-i z): with the pairing Re(ct * dz) its transpose is ct -> -i ct (as JAX's)
imag_p.transpose = lambda ct, x: [L.mul(_convert_ct(ct, x), -1j) if x.dtype.kind == "c"
                                   else None]   # imag of a real operand is constant 0


def _complex_impl(x, y):
    """``x + i y`` built from its parts: no arithmetic, so ``complex(1, inf)`` keeps its
    real part (``x + 1j * y`` would make it NaN through ``0 * inf``)."""
    shape = np.broadcast_shapes(x.shape, y.shape)
    like = y if AL.is_device(y) else x
    out = AL.empty(like, shape, np.result_type(x.dtype, np.complex64))
    out.real[...] = x
    out.imag[...] = y
    return out


complex_p = binop("complex", _complex_impl, "float",
                  hint=" Convert integer parts with lax.convert_element_type first.")
def _complex_rule(rule):
    def shape_rule(x, y):
        out = rule(x, y)
        if x.dtype not in (np.float32, np.float64):   # as JAX: no complex32
            raise ShapeError(f"complex: needs float32 or float64 parts, got {describe(x, y)}; "
                             "convert them with lax.convert_element_type")
        return ShapeDtypeStruct(out.shape, np.result_type(x.dtype, np.complex64), False)
    return shape_rule


complex_p.shape_rule = _complex_rule(complex_p.shape_rule)
deflinear(complex_p)
# <ct, dx + i dy> = Re(ct dx + i ct dy) = Re(ct) dx - Im(ct) dy (as JAX's transpose)
complex_p.transpose = lambda ct, x, y: [
    unbroadcast(real_p.bind(ct), x) if is_linear(x) else None,
    unbroadcast(L.neg(imag_p.bind(ct)), y) if is_linear(y) else None]


def _imag_cuda(xs, in_dtypes, out_dtype):      # the imaginary part of a real number
    return C.c_literal(0, out_dtype)


def _imag_onnx(ctx, x):
    # real operands only (complex is rejected): the imaginary part is 0
    out = ctx.out_avals[0]
    return O.full(ctx, 0, out.dtype, out.shape)


register_lowering(imag_p, "cuda", _imag_cuda)
register_lowering(imag_p, "onnx", _imag_onnx)


conj_p = unop("conj", lambda x: np.conjugate(x) if x.dtype.kind == "c" else x,
              "any")  # np.conjugate turns bool into int8
deflinear(conj_p)
conj_p.transpose = lambda ct, x: [conj_p.bind(ct)]
register_lowering(conj_p, "cuda", C.identity)
register_lowering(conj_p, "onnx", O.identity)


stop_gradient_p = unop("stop_gradient", lambda x: x, "any")  # identity whose derivative is 0
register_lowering(stop_gradient_p, "numpy", NumpyRule(expression=lambda ins, *_: ins[0]))
defjvp_zero(stop_gradient_p)
register_lowering(stop_gradient_p, "cuda", C.identity)
register_lowering(stop_gradient_p, "onnx", O.identity)


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
defjvp_zero(round_p)
batch_elementwise(round_p)


def _round_cuda(xs, in_dtypes, out_dtype, *, rounding_method=0):
    fn = {0: "round", 1: "rint"}.get(rounding_method)
    if fn is None:
        raise C.KernelUnsupported(f"round: rounding_method {rounding_method!r} has no kernel")
    return f"{C.float_fn(fn, in_dtypes[0])}({xs[0]})"


def _round_onnx(ctx, x, *, rounding_method=0):
    if rounding_method == 1:
        return O.op(ctx, "Round", x)          # ONNX Round: half to even
    # half away from zero, as the impl: r = trunc(x); r + sign(x) where |x - r| >= 0.5
    dt = ctx.in_avals[0].dtype
    r = O.where(ctx, O.op(ctx, "Less", x, O.scalar(ctx, 0, dt)), O.op(ctx, "Ceil", x),
                O.op(ctx, "Floor", x), dt)
    up = O.op(ctx, "GreaterOrEqual", O.op(ctx, "Abs", O.op(ctx, "Sub", x, r)),
              O.scalar(ctx, 0.5, dt))
    return O.where(ctx, up, O.op(ctx, "Add", r, O.op(ctx, "Sign", x)), r, dt)


register_lowering(round_p, "cuda", _round_cuda)
register_lowering(round_p, "onnx", _round_onnx)


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
        if AL.is_device(x):  # a static exponent: no host array mixed in
            if y >= 0:
                return np.power(x, np.int64(y)).astype(x.dtype, copy=False)
            inv = np.where(x == -1, -1 if y % 2 else 1, 0) if x.dtype.kind == "i" else 0
            return np.where(x == 1, 1, inv).astype(x.dtype)
        return _int_power(x, np.asarray(y))
    return np.power(x, x.dtype.type(y)) if y != 2 else np.square(x)


integer_pow_p = Primitive("integer_pow", shape_rule=_integer_pow_rule,
                          impl=_quiet(_integer_pow_impl))
defjvp(integer_pow_p, lambda g, ans, x, *, y: (
    L.mul(g, L.mul(L.integer_pow(x, y - 1), float(y))) if y != 0 else None))
batch_elementwise(integer_pow_p)
integer_pow_p.simplify = lambda e, ins, lits, producer: (  # x ** 1 (x ** 2's jvp asks)
    ins[0] if e.params["y"] == 1 and type(ins[0]) is not Literal else None)
register_lowering(integer_pow_p, "numpy", NumpyRule(float_ufunc=lambda e: (
    # by 2 on floats the impl is np.square
    np.square if e.params == {"y": 2} and e.inputs[0].aval.dtype.kind in "fc" else None)))


def _integer_pow_cuda(xs, in_dtypes, out_dtype, *, y):
    (x,), (d,) = xs, in_dtypes
    if C.is_int(d):
        if d == np.uint64:
            raise C.KernelUnsupported(
                "integer_pow: on uint64 the NumPy impl computes in float64 (np.power of "
                "uint64 and int64), which no integer kernel reproduces")
        if not -2**63 <= y < 2**63:
            raise C.KernelUnsupported(f"integer_pow: exponent {y} does not fit in 64 bits")
        return (f"fnx_ipow<{C.cuda_type(d)}, {C.wide_unsigned_type(d)}, long long>"
                f"({x}, {C.c_literal(y, np.int64)})")
    # np.power with a scalar exponent takes these shortcuts (x * x is also the impl's
    # np.square); any other exponent goes to pow
    if y == 2:
        return f"({x} * {x})"
    if y == 1:
        return x
    if y == -1:
        return f"({C.c_literal(1, d)} / {x})"
    return f"{C.float_fn('pow', d)}({x}, {C.c_literal(y, d)})"


def _onnx_int_power_static(ctx, x, y, dt, shape):
    """x ** y for a Python int y >= 0 by repeated squaring (wraps like NumPy)."""
    if y == 0:
        return O.full(ctx, 1, dt, shape)
    result, base = None, x
    while True:
        if y & 1:
            result = base if result is None else O.op(ctx, "Mul", result, base)
        y >>= 1
        if not y:
            return result
        base = O.op(ctx, "Mul", base, base)


def _onnx_negative_power(ctx, x, odd, dt, shape):
    """Integer x ** y for y < 0 (JAX's rule): 1 for x == 1, (-1) ** y for x == -1, else 0.
    ``odd``: a bool name (or Python bool) telling whether y is odd."""
    one, zero = O.full(ctx, 1, dt, shape), O.full(ctx, 0, dt, shape)
    out = zero
    if dt.kind == "i":
        if isinstance(odd, bool):
            minus = O.scalar(ctx, -1 if odd else 1, dt)
        else:
            minus = O.where(ctx, odd, O.scalar(ctx, -1, dt), O.scalar(ctx, 1, dt), dt)
        out = O.where(ctx, O.eq(ctx, x, -1, dt), minus, out, dt)
    return O.where(ctx, O.eq(ctx, x, 1, dt), one, out, dt)


def _integer_pow_onnx(ctx, x, *, y):
    a = ctx.in_avals[0]
    dt = a.dtype
    if O.is_int(dt):
        if y >= 0:
            return _onnx_int_power_static(ctx, x, y, dt, a.shape)
        return _onnx_negative_power(ctx, x, bool(y % 2), dt, a.shape)
    if y == 2:
        return O.op(ctx, "Mul", x, x)          # the impl uses np.square for y == 2
    return O.op(ctx, "Pow", x, O.scalar(ctx, y, dt))


register_lowering(integer_pow_p, "cuda", _integer_pow_cuda)
register_lowering(integer_pow_p, "onnx", _integer_pow_onnx)


# === binary =====================================================================================

add_p = binop("add", _quiet(np.add))
defjvp(add_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
add_p.transpose = lambda ct, x, y: [unbroadcast(ct, x) if is_linear(x) else None,
                                    unbroadcast(ct, y) if is_linear(y) else None]


def _simplify_add(e, ins, lits, producer):
    """``x + 0`` and ``0 + x`` for integers; for floats only ``-0.0`` is the identity
    (``+0.0 + -0.0`` is ``+0.0``)."""
    a, b = ins
    kind = e.outputs[0].aval.dtype.kind
    if kind not in "iuf":
        return None
    negative = kind == "f"
    if is_literal_zero(b, lits, negative):
        return a
    if is_literal_zero(a, lits, negative):
        return b
    return None


add_p.simplify = _simplify_add
register_lowering(add_p, "cuda", C.arith("+"))
register_lowering(add_p, "onnx", O.binary("Add"))


sub_p = binop("sub", _quiet(np.subtract))
defjvp(sub_p, lambda g, ans, x, y: g, lambda g, ans, x, y: L.neg(g))
sub_p.transpose = lambda ct, x, y: [unbroadcast(ct, x) if is_linear(x) else None,
                                    unbroadcast(L.neg(ct), y) if is_linear(y) else None]
sub_p.simplify = lambda e, ins, lits, producer: (  # x - (+0) is x, also -0.0 - +0.0
    ins[0] if is_literal_zero(ins[1], lits, negative=False) else None)
register_lowering(sub_p, "cuda", C.arith("-"))
register_lowering(sub_p, "onnx", O.binary("Sub"))


mul_p = binop("mul", _quiet(np.multiply))
defjvp(mul_p, lambda g, ans, x, y: L.mul(g, y), lambda g, ans, x, y: L.mul(x, g))
mul_p.transpose = lambda ct, x, y: (
    [unbroadcast(L.mul(ct, y), x), None] if is_linear(x) else [None, unbroadcast(L.mul(x, ct), y)])
mul_p.simplify = lambda e, ins, lits, producer: (  # x * 1, 1 * x: exact in IEEE
    ins[0] if is_literal_one(ins[1], lits) else ins[1] if is_literal_one(ins[0], lits)
    else None)
register_lowering(mul_p, "cuda", C.arith("*"))
register_lowering(mul_p, "onnx", O.binary("Mul"))


def _onnx_safe_divisor(ctx, y, dt):
    """(y == 0, y == -1 or None, divisor): the divisor with 0 and -1 replaced by 1, so
    integer Div/Mod never divides by zero or overflows (INT_MIN / -1)."""
    zero = O.eq(ctx, y, 0, dt)
    minus_one = O.eq(ctx, y, -1, dt) if dt.kind == "i" else None
    bad = zero if minus_one is None else O.or_(ctx, zero, minus_one)
    return zero, minus_one, O.where(ctx, bad, O.scalar(ctx, 1, dt), y, dt)


def _onnx_int_quotient(ctx, x, y, dt, floor):
    zero, minus_one, ys = _onnx_safe_divisor(ctx, y, dt)
    q = O.op(ctx, "Div", x, ys)                       # truncates toward zero
    if floor and dt.kind == "i":
        r = O.op(ctx, "Mod", x, ys, fmod=1)
        signs_differ = O.op(ctx, "Xor", O.op(ctx, "Less", x, O.scalar(ctx, 0, dt)),
                            O.op(ctx, "Less", ys, O.scalar(ctx, 0, dt)))
        fix = O.and_(ctx, O.not_(ctx, O.eq(ctx, r, 0, dt)), signs_differ)
        q = O.op(ctx, "Sub", q, O.cast(ctx, fix, O.BOOL, dt))
    if minus_one is not None:                        # x / -1 = -x (INT_MIN wraps)
        q = O.where(ctx, minus_one, O.op(ctx, "Sub", O.scalar(ctx, 0, dt), x), q, dt)
    return O.where(ctx, zero, O.scalar(ctx, 0, dt), q, dt)  # x / 0 = 0, as NumPy


def _div_impl(x, y):
    if x.dtype.kind in "iu":
        with np.errstate(**_ERR):
            q = np.floor_divide(x, y)
            fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return (q + fix).astype(x.dtype, copy=False)
    with np.errstate(**_ERR):
        return np.true_divide(x, y)


div_p = binop("div", _div_impl)                  # integer division truncates toward zero
defjvp(div_p, lambda g, ans, x, y: L.div(g, y),
       lambda g, ans, x, y: L.neg(L.mul(g, L.div(ans, y))))
div_p.transpose = lambda ct, x, y: [unbroadcast(L.div(ct, y), x), None]
div_p.simplify = lambda e, ins, lits, producer: (
    ins[0] if is_literal_one(ins[1], lits) else None)


def _true_divide_for_floats(e):
    """``div``'s impl on floats is ``true_divide`` (for the NumPy backend's planner)."""
    if not e.params and all(v.aval.dtype.kind in "fc" for v in e.inputs):
        return np.true_divide
    return None


register_lowering(div_p, "numpy", NumpyRule(float_ufunc=_true_divide_for_floats))


def _div_onnx(ctx, x, y):
    dt = ctx.in_avals[0].dtype
    if O.is_int(dt):
        return _onnx_int_quotient(ctx, x, y, dt, floor=False)
    return O.op(ctx, "Div", x, y)


register_lowering(div_p, "cuda", C.int_helper("fnx_idiv", "({a} / {b})"))
register_lowering(div_p, "onnx", _div_onnx)


rem_p = binop("rem", _quiet(np.fmod), "realnum")  # sign of the dividend, like C
defjvp(rem_p, lambda g, ans, x, y: g,
       lambda g, ans, x, y: L.neg(L.mul(g, L.round(L.div(L.sub(x, ans), y)))))


def _rem_onnx(ctx, x, y):
    dt = ctx.in_avals[0].dtype
    if O.is_int(dt):
        _, _, ys = _onnx_safe_divisor(ctx, y, dt)          # x % 0 = 0 and x % -1 = 0
        return O.op(ctx, "Mod", x, ys, fmod=1)
    return O.op(ctx, "Mod", x, y, fmod=1)


register_lowering(rem_p, "cuda", C.int_helper("fnx_irem", "fmod{f}({a}, {b})",
                                              with_unsigned=False))
register_lowering(rem_p, "onnx", _rem_onnx)


floor_divide_p = binop("floor_divide", _quiet(np.floor_divide), "realnum")
defjvp_zero(floor_divide_p)


def _floor_divide_onnx(ctx, x, y):
    dt = ctx.in_avals[0].dtype
    if O.is_int(dt):
        return _onnx_int_quotient(ctx, x, y, dt, floor=True)
    # NumPy's npy_floor_divide / npy_divmod, step by step
    k = lambda v: O.scalar(ctx, v, dt)  # noqa: E731
    mod = O.op(ctx, "Mod", x, y, fmod=1)
    div = O.op(ctx, "Div", O.op(ctx, "Sub", x, mod), y)
    adjust = O.and_(ctx, O.not_(ctx, O.eq(ctx, mod, 0, dt)),
                    O.op(ctx, "Xor", O.op(ctx, "Less", y, k(0)), O.op(ctx, "Less", mod, k(0))))
    div = O.where(ctx, adjust, O.op(ctx, "Sub", div, k(1)), div, dt)
    floor = O.op(ctx, "Floor", div)
    floor = O.where(ctx, O.op(ctx, "Greater", O.op(ctx, "Sub", div, floor), k(0.5)),
                    O.op(ctx, "Add", floor, k(1)), floor, dt)
    quotient = O.op(ctx, "Div", x, y)
    signed_zero = O.where(ctx, O.signbit(ctx, quotient, dt), k(-0.0), k(0.0), dt)
    out = O.where(ctx, O.eq(ctx, div, 0, dt), signed_zero, floor, dt)
    return O.where(ctx, O.eq(ctx, y, 0, dt), quotient, out, dt)


register_lowering(floor_divide_p, "cuda",
                  C.int_helper("fnx_ifloordiv", "fnx_ffloordiv({a}, {b})"))
register_lowering(floor_divide_p, "onnx", _floor_divide_onnx)


def _pow_impl(x, y):
    if x.dtype.kind in "iu":
        return _int_power(x, y)
    with np.errstate(**_ERR):
        return np.power(x, y)


pow_p = binop("pow", _pow_impl)
defjvp(pow_p,
       lambda g, ans, x, y: L.mul(g, L.mul(y, L.pow(x, L.sub(y, 1.0)))),
       lambda g, ans, x, y: L.mul(g, L.mul(ans, L.log(L.select(L.eq(x, 0.0), L.add(
           L.mul(x, 0.0), 1.0), x)))))


def _pow_cuda(xs, in_dtypes, out_dtype):
    (a, b), d = xs, in_dtypes[0]
    if C.is_int(d):
        t = C.cuda_type(d)
        return f"fnx_ipow<{t}, {C.wide_unsigned_type(d)}, {t}>({a}, {b})"
    return f"{C.float_fn('pow', d)}({a}, {b})"


def _pow_onnx(ctx, x, y):
    a = ctx.out_avals[0]
    dt = a.dtype
    if not O.is_int(dt):
        return O.op(ctx, "Pow", x, y)
    # integers: square and multiply over the bits of max(y, 0), wrapping like NumPy
    shape = a.shape
    x = O.op(ctx, "Expand", x, O.ints(ctx, shape))
    y_pos = O.extremum(ctx, y, O.scalar(ctx, 0, dt), dt) if dt.kind == "i" else y
    nbits = dt.itemsize * 8 - (1 if dt.kind == "i" else 0)
    result, base = O.full(ctx, 1, dt, shape), x
    for bit in range(nbits):
        set_ = O.not_(ctx, O.eq(ctx, O.op(ctx, "BitwiseAnd", y_pos,
                                          O.scalar(ctx, 1 << bit, dt)), 0, dt))
        result = O.where(ctx, set_, O.op(ctx, "Mul", result, base), result, dt)
        if bit < nbits - 1:
            base = O.op(ctx, "Mul", base, base)
    if dt.kind == "u":
        return result
    odd = O.not_(ctx, O.eq(ctx, O.op(ctx, "BitwiseAnd", y, O.scalar(ctx, 1, dt)), 0, dt))
    negative = O.op(ctx, "Less", y, O.scalar(ctx, 0, dt))
    return O.where(ctx, negative, _onnx_negative_power(ctx, x, odd, dt, shape), result, dt)


register_lowering(pow_p, "cuda", _pow_cuda)
register_lowering(pow_p, "onnx", _pow_onnx)


def _tie_weight(a, b):
    """1 where a > b, 1/2 where equal, 0 where less (max's derivative splits ties)."""
    one = L.convert_element_type(L.gt(a, b), a.dtype)
    half = L.mul(L.convert_element_type(L.eq(a, b), a.dtype), 0.5)
    return L.add(one, half)


def _extremum_onnx(op_type):
    def lower(ctx, x, y):
        return O.extremum(ctx, x, y, ctx.in_avals[0].dtype, op_type)
    lower.__name__ = f"lower_{op_type}"
    return lower


max_p = binop("max", np.maximum, "any")
_quiet_for_bfloat16(max_p)
defjvp(max_p, lambda g, ans, x, y: L.mul(g, _tie_weight(x, y)),
       lambda g, ans, x, y: L.mul(g, _tie_weight(y, x)))
register_lowering(max_p, "cuda", C.call2("fnx_max"))
register_lowering(max_p, "onnx", _extremum_onnx("Max"))


min_p = binop("min", np.minimum, "any")
_quiet_for_bfloat16(min_p)
defjvp(min_p, lambda g, ans, x, y: L.mul(g, _tie_weight(y, x)),
       lambda g, ans, x, y: L.mul(g, _tie_weight(x, y)))
register_lowering(min_p, "cuda", C.call2("fnx_min"))
register_lowering(min_p, "onnx", _extremum_onnx("Min"))


atan2_p = binop("atan2", _quiet(np.arctan2), "float")
defjvp(atan2_p, lambda g, ans, x, y: L.mul(g, L.div(y, L.add(L.square(x), L.square(y)))),
       lambda g, ans, x, y: L.mul(g, L.div(L.neg(x), L.add(L.square(x), L.square(y)))))


def _atan2_onnx(ctx, x, y):
    """atan2(x, y) (x the numerator, as np.arctan2): Atan(x / y), moved by +-pi when y
    is negative (-0.0 included); both zero or both infinite are first replaced by
    values with the same signs (+-0 / +-1, +-1 / +-1) that give the IEEE results."""
    dt = ctx.in_avals[0].dtype
    k = lambda v: O.scalar(ctx, v, dt)  # noqa: E731
    neg_x, neg_y = O.signbit(ctx, x, dt), O.signbit(ctx, y, dt)
    unit_x = O.where(ctx, neg_x, k(-1), k(1), dt, signed_zeros=False)
    unit_y = O.where(ctx, neg_y, k(-1), k(1), dt, signed_zeros=False)
    both_inf = O.and_(ctx, O.op(ctx, "IsInf", x), O.op(ctx, "IsInf", y))
    both_zero = O.and_(ctx, O.eq(ctx, x, 0, dt), O.eq(ctx, y, 0, dt))
    num = O.where(ctx, both_inf, unit_x, x, dt)
    den = O.where(ctx, O.or_(ctx, both_inf, both_zero), unit_y, y, dt)
    t = O.op(ctx, "Atan", O.op(ctx, "Div", num, den))
    shift = O.where(ctx, neg_x, k(-math.pi), k(math.pi), dt, signed_zeros=False)
    return O.where(ctx, neg_y, O.op(ctx, "Add", t, shift), t, dt)


register_lowering(atan2_p, "cuda", C.math2("atan2"))
register_lowering(atan2_p, "onnx", _atan2_onnx)


hypot_p = binop("hypot", _quiet(np.hypot), "float")
defjvp(hypot_p, lambda g, ans, x, y: L.mul(g, L.div(x, ans)),
       lambda g, ans, x, y: L.mul(g, L.div(y, ans)))


def _hypot_onnx(ctx, x, y):
    """m * sqrt(1 + (n / m) ** 2) with m = max(|x|, |y|), n = min: no overflow; inf
    wins over NaN, as C's hypot."""
    dt = ctx.in_avals[0].dtype
    ax, ay = O.op(ctx, "Abs", x), O.op(ctx, "Abs", y)
    m, n = O.op(ctx, "Max", ax, ay), O.op(ctx, "Min", ax, ay)
    r = O.op(ctx, "Div", n, m)
    h = O.op(ctx, "Mul", m, O.op(ctx, "Sqrt", O.op(ctx, "Add", O.scalar(ctx, 1, dt),
                                                    O.op(ctx, "Mul", r, r))))
    h = O.where(ctx, O.eq(ctx, m, 0, dt), O.scalar(ctx, 0, dt), h, dt,
                signed_zeros=False)                                         # >= +0
    inf = O.or_(ctx, O.op(ctx, "IsInf", x), O.op(ctx, "IsInf", y))
    return O.where(ctx, inf, O.scalar(ctx, np.inf, dt), h, dt, signed_zeros=False)


register_lowering(hypot_p, "cuda", C.math2("hypot"))
register_lowering(hypot_p, "onnx", _hypot_onnx)


copysign_p = binop("copysign", np.copysign, "float")
defjvp(copysign_p, lambda g, ans, x, y: L.mul(g, L.mul(L.sign(x), L.sign(ans))), None)
register_lowering(copysign_p, "cuda", C.math2("copysign"))
# no ONNX rule: ONNX cannot read the sign bit of a NaN (it has no bitcast)


nextafter_p = binop("nextafter", _quiet(np.nextafter), "float")  # max -> inf: overflow
defjvp_zero(nextafter_p)
register_lowering(nextafter_p, "cuda", C.math2("nextafter"))
# no ONNX rule: it needs the bit pattern of the float, which ONNX cannot access


logaddexp_p = binop("logaddexp", _quiet(np.logaddexp), "float")
# d/dx logaddexp(x, y) = exp(x - ans) = logistic(x - y): the logistic keeps full relative
# accuracy when x << y, where x - ans cancels (float32 second derivatives off by 1%).
defjvp(logaddexp_p, lambda g, ans, x, y: L.mul(g, logistic_p.bind(L.sub(x, y))),
       lambda g, ans, x, y: L.mul(g, logistic_p.bind(L.sub(y, x))))


def _logaddexp_cuda(xs, in_dtypes, out_dtype):
    C.require_float("logaddexp", in_dtypes[0])
    return f"fnx_logaddexp({xs[0]}, {xs[1]})"


def _logaddexp_onnx(ctx, x, y):
    return O.logaddexp(ctx, x, y, ctx.in_avals[0].dtype)


register_lowering(logaddexp_p, "cuda", _logaddexp_cuda)
register_lowering(logaddexp_p, "onnx", _logaddexp_onnx)


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


def _polygamma_order_jvp(g, ans, m, x):
    raise ValueError("polygamma: the derivative with respect to the order m is not defined "
                     "(m is integer-valued); pass m as a constant or wrap it in "
                     "lax.stop_gradient")


defjvp(polygamma_p, _polygamma_order_jvp,
       lambda g, ans, m, x: L.mul(g, L.polygamma(L.add(m, 1.0), x)))
# no CUDA rule (no CUDA math function), no ONNX rule (no operator)


# --- comparisons ---------------------------------------------------------------------------------

def _eq_onnx(ctx, x, y):
    return O.op(ctx, "Equal", x, y)


def _ne_onnx(ctx, x, y):
    return O.not_(ctx, O.op(ctx, "Equal", x, y))


eq_p = binop("eq", np.equal, "any", out_dtype=dtypes.bool_)
defjvp_zero(eq_p)
register_lowering(eq_p, "cuda", C.compare("=="))
register_lowering(eq_p, "onnx", _eq_onnx)


ne_p = binop("ne", np.not_equal, "any", out_dtype=dtypes.bool_)
defjvp_zero(ne_p)
register_lowering(ne_p, "cuda", C.compare("!="))
register_lowering(ne_p, "onnx", _ne_onnx)


lt_p = binop("lt", np.less, "real", out_dtype=dtypes.bool_)
_quiet_for_bfloat16(lt_p)
defjvp_zero(lt_p)
register_lowering(lt_p, "cuda", C.compare("<"))
register_lowering(lt_p, "onnx", O.comparison("Less"))


le_p = binop("le", np.less_equal, "real", out_dtype=dtypes.bool_)
_quiet_for_bfloat16(le_p)
defjvp_zero(le_p)
register_lowering(le_p, "cuda", C.compare("<="))
register_lowering(le_p, "onnx", O.comparison("LessOrEqual"))


gt_p = binop("gt", np.greater, "real", out_dtype=dtypes.bool_)
_quiet_for_bfloat16(gt_p)
defjvp_zero(gt_p)
register_lowering(gt_p, "cuda", C.compare(">"))
register_lowering(gt_p, "onnx", O.comparison("Greater"))


ge_p = binop("ge", np.greater_equal, "real", out_dtype=dtypes.bool_)
_quiet_for_bfloat16(ge_p)
defjvp_zero(ge_p)
register_lowering(ge_p, "cuda", C.compare(">="))
register_lowering(ge_p, "onnx", O.comparison("GreaterOrEqual"))


# --- bitwise -------------------------------------------------------------------------------------

and_p = binop("and", np.bitwise_and, "intbool")
defjvp_zero(and_p)
register_lowering(and_p, "cuda", C.bitwise("&"))
register_lowering(and_p, "onnx", O.logic("And", "BitwiseAnd"))


or_p = binop("or", np.bitwise_or, "intbool")
defjvp_zero(or_p)
register_lowering(or_p, "cuda", C.bitwise("|"))
register_lowering(or_p, "onnx", O.logic("Or", "BitwiseOr"))


xor_p = binop("xor", np.bitwise_xor, "intbool")
defjvp_zero(xor_p)
register_lowering(xor_p, "cuda", C.bitwise("^"))
register_lowering(xor_p, "onnx", O.logic("Xor", "BitwiseXor"))


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
        out = np.right_shift(AL.as_array(x).astype(u), AL.as_array(s_ok).astype(u))
        return np.where(big, 0, out).astype(x.dtype)
    return impl


def _shift_cuda(kind):
    """Shifts; an amount < 0 or >= the bit width fills with 0 (or the sign)."""
    def kernel(xs, in_dtypes, out_dtype):
        (x, s), d = xs, in_dtypes[0]
        if not C.is_int(d):
            raise C.KernelUnsupported(f"shift: the kernel takes integers, got {d.name}")
        t, bits = C.cuda_type(d), d.itemsize * 8
        big = f"{s} >= {bits}" + (f" || {s} < 0" if C.is_signed(d) else "")
        if kind == "left":
            fill, shifted = f"({t})0", f"({t})(({C.wide_unsigned_type(d)}){x} << {s})"
        elif kind == "arith":     # >> of a signed value is arithmetic in CUDA and g++
            fill = f"({x} < 0 ? ({t})-1 : ({t})0)" if C.is_signed(d) else f"({t})0"
            shifted = f"({t})({x} >> {s})"
        else:
            fill, shifted = f"({t})0", f"({t})(({C.unsigned_type(d)}){x} >> {s})"
        return f"(({big}) ? {fill} : {shifted})"
    kernel.__name__ = f"shift_{kind}_kernel"
    return kernel


def _shift_onnx(kind):
    def lower(ctx, x, s):
        dt = ctx.out_avals[0].dtype
        bits = dt.itemsize * 8
        u = np.dtype(f"u{dt.itemsize}")
        big = O.op(ctx, "GreaterOrEqual", s, O.scalar(ctx, bits, dt))
        if dt.kind == "i":
            big = O.or_(ctx, big, O.op(ctx, "Less", s, O.scalar(ctx, 0, dt)))
        s_ok = O.cast(ctx, O.where(ctx, big, O.scalar(ctx, 0, dt), s, dt), dt, u)
        zero = O.scalar(ctx, 0, dt)
        if kind == "left":
            r = O.op(ctx, "BitShift", O.cast(ctx, x, dt, u), s_ok, direction="LEFT")
            return O.where(ctx, big, zero, O.cast(ctx, r, u, dt), dt)
        if kind == "logical" or dt.kind == "u":
            r = O.op(ctx, "BitShift", O.cast(ctx, x, dt, u), s_ok, direction="RIGHT")
            return O.where(ctx, big, zero, O.cast(ctx, r, u, dt), dt)
        # arithmetic shift of a signed value: shift ~x for negative x and invert back
        neg = O.op(ctx, "Less", x, zero)
        flipped = O.where(ctx, neg, O.op(ctx, "BitwiseNot", x), x, dt)
        r = O.cast(ctx, O.op(ctx, "BitShift", O.cast(ctx, flipped, dt, u), s_ok,
                             direction="RIGHT"), u, dt)
        r = O.where(ctx, neg, O.op(ctx, "BitwiseNot", r), r, dt)
        fill = O.where(ctx, neg, O.scalar(ctx, -1, dt), zero, dt)
        return O.where(ctx, big, fill, r, dt)
    lower.__name__ = f"lower_shift_{kind}"
    return lower


shift_left_p = binop("shift_left", _shift_impl("left"), "int")
defjvp_zero(shift_left_p)
register_lowering(shift_left_p, "cuda", _shift_cuda("left"))
register_lowering(shift_left_p, "onnx", _shift_onnx("left"))


shift_right_arithmetic_p = binop("shift_right_arithmetic", _shift_impl("arith"), "int")
defjvp_zero(shift_right_arithmetic_p)
register_lowering(shift_right_arithmetic_p, "cuda", _shift_cuda("arith"))
register_lowering(shift_right_arithmetic_p, "onnx", _shift_onnx("arithmetic"))


shift_right_logical_p = binop("shift_right_logical", _shift_impl("logical"), "int")
defjvp_zero(shift_right_logical_p)
register_lowering(shift_right_logical_p, "cuda", _shift_cuda("logical"))
register_lowering(shift_right_logical_p, "onnx", _shift_onnx("logical"))


# === select, clamp, convert =====================================================================

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


# ``np.where`` with a bool mask copies one element per branch: on a mask that is not
# sorted (a ReLU's, a dropout's) it mispredicts about every other element, some 3.7 ns
# each, whatever the element size (float32 and float64 alike: 1M elements 3.9 ms). A
# branch-free blend of the bits on unsigned views, ``b ^ ((a ^ b) * which)``, gives the
# same bits exactly (NaN payloads and signed zeros included) in three passes (1M float32
# 0.44 ms, float64 1.0 ms), one pass where ``b`` is a scalar of zero bits (``where(m, x,
# 0)``: 0.25 ms). The bool selector is multiplied in as it is (NumPy casts it a buffer at a
# time inside the ufunc): no mask of the cases' width is ever materialized. Below this
# many elements ``np.where`` is as fast (measured with a fresh random mask per call:
# 256 elements 1.7 us either way, 1024 4.5 vs 2.1 us).
_BLEND_MIN_SIZE = 1 << 9
_BLEND_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
               8: np.dtype(np.uint64)}


def _zero_bits(v, u):
    """``v`` is a host scalar (a literal) whose bits are all zero (+0.0, 0, False)."""
    return v.ndim == 0 and not AL.is_device(v) and not v.view(u)[()]


def _select_n_impl(which, *cases):
    """``cases[which]`` elementwise (a bool ``which`` picks ``cases[1]`` where True);
    operands broadcast as NumPy's do (the jit lowering passes broadcasts unexpanded)."""
    if len(cases) == 1:
        return cases[0]
    if which.dtype != np.bool_:
        if AL.is_device(which):  # CuPy's choose takes one array of choices
            out = cases[0]
            for k in range(1, len(cases)):
                hit = which >= k if k == len(cases) - 1 else which == k
                out = np.where(hit, cases[k], out)
            return out
        return np.choose(np.clip(which, 0, len(cases) - 1), cases)
    a, b = cases[1], cases[0]
    u = _BLEND_UINT.get(b.dtype.itemsize)
    if u is None or which.size < _BLEND_MIN_SIZE:
        return np.where(which, a, b)
    ai, bi = a.view(u), b.view(u)
    if _zero_bits(b, u):  # a where ``which``, else zero bits: one pass
        return np.multiply(ai, which).view(b.dtype)
    t = bi if _zero_bits(a, u) else np.bitwise_xor(ai, bi)
    if t is not bi and t.shape == which.shape:
        np.multiply(t, which, out=t)
    else:
        t = np.multiply(t, which)
    np.bitwise_xor(t, bi, out=t)
    return t.view(b.dtype)


select_n_p = Primitive("select_n", shape_rule=_select_n_rule, impl=_select_n_impl)
register_lowering(select_n_p, "numpy", NumpyRule(broadcasts=True))  # np.where broadcasts


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    if all(t is None for t in tangents[1:]):
        return out, None
    ts = [instantiate(t, c) for t, c in zip(tangents[1:], cases)]
    return out, select_n_p.bind(which, *ts)


select_n_p.jvp = _select_n_jvp


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
batch_elementwise(select_n_p)


def _select_n_cuda(xs, in_dtypes, out_dtype):
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


def _select_n_onnx(ctx, which, *cases):
    dt = ctx.out_avals[0].dtype
    if len(cases) == 1:
        return cases[0]
    if ctx.in_avals[0].dtype == O.BOOL:
        return O.where(ctx, which, cases[1], cases[0], dt)
    n = len(cases)
    w = O.op(ctx, "Max", O.op(ctx, "Min", which, O.scalar(ctx, n - 1, O.I32)),
             O.scalar(ctx, 0, O.I32))
    out = cases[-1]
    for i in range(n - 2, -1, -1):
        out = O.where(ctx, O.eq(ctx, w, i, O.I32), cases[i], out, dt)
    return out


register_lowering(select_n_p, "cuda", _select_n_cuda)
register_lowering(select_n_p, "onnx", _select_n_onnx)


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
    return out, sum_tangents(parts)


clamp_p.jvp = _clamp_jvp
batch_elementwise(clamp_p)


def _clamp_cuda(xs, in_dtypes, out_dtype):    # np.minimum(np.maximum(x, lo), hi)
    lo, x, hi = xs
    return f"fnx_min(fnx_max({x}, {lo}), {hi})"


def _clamp_onnx(ctx, lo, x, hi):
    dt = ctx.out_avals[0].dtype
    return O.extremum(ctx, O.extremum(ctx, x, lo, dt, "Max"), hi, dt, "Min")


register_lowering(clamp_p, "cuda", _clamp_cuda)
register_lowering(clamp_p, "onnx", _clamp_onnx)


def _convert_rule(x, *, new_dtype, weak_type=False):
    return ShapeDtypeStruct(x.shape, new_dtype, weak_type)


def _convert_impl(x, *, new_dtype, weak_type=False):
    if x.dtype == new_dtype:
        return x
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = np.real(x)
    with np.errstate(invalid="ignore", over="ignore"):
        out = x.astype(new_dtype)
        if np.dtype(new_dtype).kind in "iu" and dtypes.is_floating(x.dtype):
            # XLA's (and the GPU kernels') conversion saturates and takes NaN to 0, where
            # NumPy's wraps or gives the least integer
            src = np.dtype(np.float32) if x.dtype == dtypes.bfloat16 else x.dtype
            lo, hi = _float_to_int_bounds(src, np.dtype(new_dtype))
            info = np.iinfo(new_dtype)
            out = np.where(x <= lo, info.min, np.where(x >= hi, info.max, out))
            out = np.where(np.isnan(x), 0, out).astype(new_dtype, copy=False)
        return out


convert_element_type_p = Primitive("convert_element_type", shape_rule=_convert_rule,
                                   impl=_convert_impl)


def _convert_jvp(primals, tangents, *, new_dtype, weak_type=False):
    out = convert_element_type_p.bind(*primals, new_dtype=new_dtype, weak_type=weak_type)
    t = tangents[0]
    if t is None or not dtypes.is_inexact(new_dtype):
        return out, None
    return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


convert_element_type_p.jvp = _convert_jvp
convert_element_type_p.transpose = lambda ct, x, **p: [_convert_ct(ct, x)]
# to x's own dtype and weak type it is x (simplify keeps a result only of x's exact type)
convert_element_type_p.simplify = lambda e, ins, lits, producer: (
    ins[0] if type(ins[0]) is not Literal else None)
convert_element_type_p.fresh_result_when_casting = True  # else it may return x itself
batch_elementwise(convert_element_type_p)


def _float_to_int_bounds(src, dst):
    """Exclusive bounds (as ``src`` floats) of the values whose truncation fits ``dst``; an
    end the float cannot reach (float16 to int32's) is an infinity: only inf saturates."""
    info, f = np.iinfo(dst), src.type
    top = float(np.finfo(src).max)
    below = info.min - 1
    if below < -top:
        lo = f(-np.inf)
    elif int(f(below)) == below:               # min - 1 is a float: x > min - 1
        lo = f(below)
    else:                                      # it is not: x >= min, i.e. x > the float below
        lo = np.nextafter(f(info.min), f(-np.inf))
    # max + 1 is a power of two: exact where the float reaches it
    return lo, f(np.inf) if info.max + 1 > top else f(info.max + 1)


def _convert_cuda(xs, in_dtypes, out_dtype, *, new_dtype=None, weak_type=False):
    (x,), src, dst = xs, np.dtype(in_dtypes[0]), np.dtype(out_dtype)
    t = C.cuda_type(dst)
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind == "f" and dst.kind in "iu":
        lo, hi = _float_to_int_bounds(src, dst)
        info = np.iinfo(dst)
        return (f"fnx_f2i<{t}, {C.cuda_type(src)}>({x}, {C.c_literal(lo, src)}, "
                f"{C.c_literal(hi, src)}, {C.c_literal(info.min, dst)}, "
                f"{C.c_literal(info.max, dst)})")
    return f"({t})({x})"    # wraps between integers, rounds to nearest into floats


def _convert_onnx(ctx, x, *, new_dtype, weak_type=False):
    src, dst = ctx.in_avals[0].dtype, np.dtype(new_dtype)
    if src == dst:
        return x
    if dst == O.BOOL:                     # nonzero is True (NaN included), as astype(bool)
        return O.not_(ctx, O.eq(ctx, x, 0, src))
    if np.dtype(dst).kind in "iu" and O.is_float(src):
        # saturating, NaN to 0, as the impl (ONNX's Cast leaves out-of-range undefined)
        lo, hi = _float_to_int_bounds(np.dtype(src), np.dtype(dst))
        info = np.iinfo(dst)
        out = O.cast(ctx, x, src, dst)
        out = O.where(ctx, O.op(ctx, "GreaterOrEqual", x, O.scalar(ctx, hi, src)),
                      O.scalar(ctx, info.max, dst), out, dst)
        out = O.where(ctx, O.op(ctx, "LessOrEqual", x, O.scalar(ctx, lo, src)),
                      O.scalar(ctx, info.min, dst), out, dst)
        return O.where(ctx, O.op(ctx, "IsNaN", x), O.scalar(ctx, 0, dst), out, dst)
    return O.cast(ctx, x, src, dst)


register_lowering(convert_element_type_p, "cuda", _convert_cuda)
register_lowering(convert_element_type_p, "onnx", _convert_onnx)
