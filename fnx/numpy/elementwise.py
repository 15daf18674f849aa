"""Elementwise functions of ``fnx.numpy``: promote, broadcast, bind a primitive.

Each function is its general path (promotion, broadcasting, a lax primitive); the
common ones add the NumPy backend's eager shortcut (``fnx.backends.numpy_eager``): with
no transformation active and operands that need no promotion, the ufunc or the impl runs
on the buffers directly.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from ..lax import elementwise as _ew
from ..core import dtypes
from ..core.array import Array, to_array
from ..backends.numpy_eager import fast_binary, fast_unary
from .util import (RANK_CHECK as _RANK_CHECK, broadcast_shapes, broadcast_to_shape,
                    check_rank_promotion, promote, promote_broadcast)


def _fast_binary(*args, **kw):
    return fast_binary(*args, rank_check=_RANK_CHECK, **kw)  # the NumPy backend's shortcut


def _binary(name, lax_fn, to_inexact=False, bool_fn=None, complex_fn=None):
    def slow(x, y, /):
        x, y = promote_broadcast(name, x, y, to_inexact=to_inexact, keep_scalars=True)
        if bool_fn is not None and x.dtype == dtypes.bool_:
            return bool_fn(x, y)  # NumPy and JAX: bool + is "or", bool * is "and"
        if complex_fn is not None and x.dtype.kind == "c":
            return complex_fn(x, y)
        return lax_fn(x, y)
    slow.__name__ = name
    slow.__qualname__ = name
    slow.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting and JAX type promotion."
    return slow


def _unary(name, lax_fn, to_inexact=False):
    def slow(x, /):
        (x,) = promote(name, x, to_inexact=to_inexact)
        return lax_fn(x)
    slow.__name__ = name
    slow.__doc__ = f"Elementwise ``{name}`` (integer inputs are converted to float where the " \
                   "result is not an integer)" if to_inexact else f"Elementwise ``{name}``."
    return fast_unary(lax_fn.prim, slow)


# --- arithmetic --------------------------------------------------------------------------
add = _fast_binary("add", _binary("add", lax.add, bool_fn=lax.bitwise_or), np.add, "biufc",
                   _ew.add_p)
subtract = _fast_binary("subtract", _binary("subtract", lax.sub), np.subtract, "iufc",
                        _ew.sub_p)
multiply = _fast_binary("multiply", _binary("multiply", lax.mul, bool_fn=lax.bitwise_and),
                       np.multiply, "biufc", _ew.mul_p)
true_divide = _binary("true_divide", lax.div, to_inexact=True)
divide = true_divide
_floor_divide = _binary("floor_divide", lax.floor_divide,
                        bool_fn=lambda x, y: lax.floor_divide(_numeric(x), _numeric(y)))


def floor_divide(x1, x2, /):
    """``floor(x1 / x2)`` (integers: exact, rounded toward -inf). For floats, an infinity
    divided by a finite number and a finite number divided by an infinity give the Array
    API's results (a signed infinity, a signed zero: ``x1 / x2``) where NumPy and JAX give
    NaN and -1."""
    out = _floor_divide(x1, x2)
    if out.dtype.kind != "f" and out.dtype != dtypes.bfloat16:
        return out
    x1, x2 = promote_broadcast("floor_divide", x1, x2)
    inf1, inf2 = lax.isinf(x1), lax.isinf(x2)
    exact = lax.bitwise_and(lax.ne(inf1, inf2),
                            lax.bitwise_not(lax.bitwise_or(lax.isnan(x1), lax.isnan(x2))))
    return lax.select(exact, lax.div(x1, x2), out)
maximum = _fast_binary("maximum", _binary("maximum", lax.max), np.maximum, "biuf", _ew.max_p,
                       quiet=False)
minimum = _fast_binary("minimum", _binary("minimum", lax.min), np.minimum, "biuf", _ew.min_p,
                       quiet=False)
arctan2 = atan2 = _binary("arctan2", lax.atan2, to_inexact=True)
hypot = _binary("hypot", lax.hypot, to_inexact=True)
copysign = _binary("copysign", lax.copysign, to_inexact=True)
nextafter = _binary("nextafter", lax.nextafter, to_inexact=True)
logaddexp = _binary("logaddexp", lax.logaddexp, to_inexact=True)
fmod = _binary("fmod", lax.rem, bool_fn=lambda x, y: lax.rem(_numeric(x), _numeric(y)))

equal = _fast_binary("equal", _binary("equal", lax.eq), np.equal, "biuf", _ew.eq_p,
                     out_bool=True, quiet=False)
not_equal = _fast_binary("not_equal", _binary("not_equal", lax.ne), np.not_equal, "biuf",
                         _ew.ne_p, out_bool=True, quiet=False)


def _lexicographic(lax_fn):
    """An order comparison of complex numbers, as JAX's (and NumPy's): by the real parts,
    and by the imaginary parts where the real parts are equal (lax's comparisons take
    real operands only)."""
    def fn(x, y):
        rx, ry = lax.real(x), lax.real(y)
        eq = lax.eq(rx, ry)
        return lax.select(eq, lax_fn(lax.imag(x), lax.imag(y)), lax_fn(rx, ry)) \
            if x.shape == y.shape else \
            _lexicographic(lax_fn)(*(broadcast_to_shape(v, eq.shape) for v in (x, y)))
    return fn


less = _fast_binary("less", _binary("less", lax.lt, complex_fn=_lexicographic(lax.lt)),
                    np.less, "biuf", _ew.lt_p, out_bool=True, quiet=False)
less_equal = _fast_binary("less_equal", _binary("less_equal", lax.le,
                                                complex_fn=_lexicographic(lax.le)),
                          np.less_equal, "biuf", _ew.le_p, out_bool=True, quiet=False)
greater = _fast_binary("greater", _binary("greater", lax.gt, complex_fn=_lexicographic(lax.gt)),
                       np.greater, "biuf", _ew.gt_p, out_bool=True, quiet=False)
greater_equal = _fast_binary("greater_equal", _binary("greater_equal", lax.ge,
                                                      complex_fn=_lexicographic(lax.ge)),
                             np.greater_equal, "biuf", _ew.ge_p, out_bool=True, quiet=False)

bitwise_and = _fast_binary("bitwise_and", _binary("bitwise_and", lax.bitwise_and),
                           np.bitwise_and, "biu", _ew.and_p, quiet=False)
bitwise_or = _fast_binary("bitwise_or", _binary("bitwise_or", lax.bitwise_or),
                          np.bitwise_or, "biu", _ew.or_p, quiet=False)
bitwise_xor = _fast_binary("bitwise_xor", _binary("bitwise_xor", lax.bitwise_xor),
                           np.bitwise_xor, "biu", _ew.xor_p, quiet=False)


def left_shift(x, y, /):
    x, y = promote_broadcast("left_shift", x, y)
    if x.dtype == dtypes.bool_:   # bools shift as the default int (as JAX)
        x, y = _numeric(x), _numeric(y)
    return lax.shift_left(x, y)


def right_shift(x, y, /):
    """Arithmetic shift for signed ints, logical for unsigned (as NumPy)."""
    x, y = promote_broadcast("right_shift", x, y)
    if x.dtype == dtypes.bool_:
        x, y = _numeric(x), _numeric(y)
    return (lax.shift_right_logical if x.dtype.kind == "u" else lax.shift_right_arithmetic)(x, y)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


def remainder(x, y, /):
    """Python-style remainder: the result has the sign of the divisor."""
    x, y = promote_broadcast("remainder", x, y)
    if x.dtype == dtypes.bool_:   # bools divide as the default int (as JAX)
        x, y = _numeric(x), _numeric(y)
    r = lax.rem(x, y)
    if x.dtype.kind == "u":
        return r
    zero = _zeros_like(r)
    fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(y, zero)))
    r = lax.select(fix, lax.add(r, y), r)
    if x.dtype.kind == "f" or x.dtype == dtypes.bfloat16:
        # a zero remainder takes the divisor's sign (-0.0 % 2 is +0.0, 0.0 % -2 is -0.0),
        # as Python and the Array API standard say; fmod keeps the dividend's
        r = lax.select(lax.eq(r, zero), lax.copysign(r, y), r)
    return r


mod = remainder


def divmod(x, y, /):
    return floor_divide(x, y), remainder(x, y)


def _zeros_like(x):
    return lax.broadcast_in_dim(Array._wrap(np.zeros((), x.dtype), x.weak_type), x.shape, ())


def _numeric(x):
    """Bools become the default int (weak type kept), as JAX's ``promote_dtypes_numeric``."""
    if x.dtype == dtypes.bool_:
        return lax.convert_element_type(x, dtypes.int_, x.weak_type)
    return x


def power(x, y, /):
    """``x ** y``; a Python int exponent becomes ``lax.integer_pow`` (exact, cheap).

    Integers to negative integer powers give ``1 / x**n`` truncated toward zero
    (1, -1 or 0) instead of NumPy's error.
    """
    if type(y) is int and not isinstance(x, (int, float, complex)):
        if isinstance(x, Array) and x.dtype.kind in "fc":  # the common case, no promotion
            return _ew.integer_pow_p.bind(x, y=y)
        (x,) = promote("power", x)
        x = _numeric(x)
        if y >= 0 or dtypes.is_inexact(x.dtype):
            return lax.integer_pow(x, y)
    if not isinstance(y, (bool, int, float, complex)) and not isinstance(x, (bool, int)):
        (xa,), (ya,) = promote("power", x), promote("power", y)
        if dtypes.is_inexact(xa.dtype) and ya.dtype.kind in "iu":
            # JAX: a floating or complex base with an integer exponent array is lax.pow of
            # the two (x ** 0 has derivative 0 in x, at x = 0 too)
            check_rank_promotion("power", xa.shape, ya.shape)
            shape = broadcast_shapes("power", xa.shape, ya.shape)
            return lax.pow(broadcast_to_shape(xa, shape), broadcast_to_shape(ya, shape))
    x, y = promote_broadcast("power", x, y)
    if x.dtype == dtypes.bool_:
        x, y = _numeric(x), _numeric(y)
    return lax.pow(x, y)


pow = power


def float_power(x, y, /):
    x, y = promote_broadcast("float_power", x, y, to_inexact=True)
    return lax.pow(x, y)


def fmax(x, y, /):
    """Maximum that ignores NaN (NaN only if both are NaN)."""
    x, y = promote_broadcast("fmax", x, y)
    if x.dtype.kind == "c":   # JAX's: x where x > y (lexicographic) or y has a NaN
        return lax.select(lax.bitwise_or(greater(x, y), isnan(y)), x, y)
    if not dtypes.is_floating(x.dtype):
        return lax.max(x, y)
    return lax.select(lax.isnan(x), y, lax.select(lax.isnan(y), x, lax.max(x, y)))


def fmin(x, y, /):
    """Minimum that ignores NaN (NaN only if both are NaN)."""
    x, y = promote_broadcast("fmin", x, y)
    if x.dtype.kind == "c":   # JAX's: x where x < y (lexicographic) or y has a NaN
        return lax.select(lax.bitwise_or(less(x, y), isnan(y)), x, y)
    if not dtypes.is_floating(x.dtype):
        return lax.min(x, y)
    return lax.select(lax.isnan(x), y, lax.select(lax.isnan(y), x, lax.min(x, y)))


def logaddexp2(x, y, /):
    x, y = promote_broadcast("logaddexp2", x, y, to_inexact=True)
    ln2 = float(np.log(2))  # a Python float: weakly typed, takes x's dtype
    return lax.div(lax.logaddexp(lax.mul(x, ln2), lax.mul(y, ln2)), ln2)


def _to_bool(x):
    x = to_array(x)
    return x if x.dtype == dtypes.bool_ else lax.ne(x, _zeros_like(x))


def logical_and(x, y, /):
    x, y = promote_broadcast("logical_and", _to_bool(x), _to_bool(y))
    return lax.bitwise_and(x, y)


def logical_or(x, y, /):
    x, y = promote_broadcast("logical_or", _to_bool(x), _to_bool(y))
    return lax.bitwise_or(x, y)


def logical_xor(x, y, /):
    x, y = promote_broadcast("logical_xor", _to_bool(x), _to_bool(y))
    return lax.bitwise_xor(x, y)


def logical_not(x, /):
    return lax.bitwise_not(_to_bool(x))


# --- unary ---------------------------------------------------------------------------------
negative = _unary("negative", lax.neg)
sign = _unary("sign", lax.sign)


def _absolute(x, /):
    """``|x|``; bools and unsigned ints are returned as they are (as JAX)."""
    (x,) = promote("absolute", x)
    return x if x.dtype.kind in "bu" else lax.abs(x)


_absolute.__name__ = "absolute"
absolute = fast_unary(_ew.abs_p, _absolute)  # eager floats: |x| keeps dtype and weak type
abs = absolute


def square(x, /):
    """``x * x``; bools are squared as the default int (as JAX)."""
    (x,) = promote("square", x)
    return lax.square(_numeric(x))


exp = _unary("exp", lax.exp, True)
exp2 = _unary("exp2", lax.exp2, True)
_expm1 = _unary("expm1", lax.expm1, True)


def expm1(x, /):
    """``exp(x) - 1``, accurate near 0. Complex ``x``: NumPy's, with the C99 / Array API
    special cases where NumPy gives NaN: a zero imaginary part stays exact (``expm1(x +
    0j)`` is ``expm1(x) + 0j``), a real part of ``-inf`` gives ``-1 ± 0j`` and ``+inf``
    with a non-finite imaginary part gives ``inf + nan j``."""
    if not isinstance(x, (Array, int, float, complex)):
        x = to_array(x, "expm1")
    if not (isinstance(x, Array) and x.dtype.kind == "c") and not isinstance(x, complex):
        return _expm1(x)
    (x,) = promote("expm1", x)
    re, im = lax.real(x), lax.imag(x)
    zero = _zeros_like(re)
    out = lax.expm1(x)
    # + 0.0: expm1(-0 + 0j) is +0 + 0j (Array API), not the real expm1's -0
    real_axis = lax.convert_element_type(lax.add(lax.expm1(re), 0.0), x.dtype, x.weak_type)
    out = lax.select(lax.eq(im, zero), _conj_where(signbit(im), real_axis), out)
    neg_inf = lax.bitwise_and(lax.isinf(re), lax.lt(re, zero))
    below = lax.bitwise_and(lax.is_finite(im), lax.lt(lax.sin(im), zero))
    out = lax.select(neg_inf, _conj_where(below, _full_like(x, -1.0)), out)
    pos_inf = lax.bitwise_and(lax.isinf(re), lax.gt(re, zero))
    return lax.select(lax.bitwise_and(pos_inf, lax.bitwise_not(lax.is_finite(im))),
                      _full_like(x, complex(np.inf, np.nan)), out)


def _conj_where(c, z):
    return lax.select(c, lax.conj(z), z)


log = _unary("log", lax.log, True)
log1p = _unary("log1p", lax.log1p, True)
log2 = _unary("log2", lax.log2, True)
log10 = _unary("log10", lax.log10, True)
sqrt = _unary("sqrt", lax.sqrt, True)
cbrt = _unary("cbrt", lax.cbrt, True)
reciprocal = _unary("reciprocal", lax.reciprocal, True)
sin, cos, tan = (_unary(n, f, True) for n, f in (("sin", lax.sin), ("cos", lax.cos),
                                                    ("tan", lax.tan)))
arcsin = asin = _unary("arcsin", lax.asin, True)
arccos = acos = _unary("arccos", lax.acos, True)
arctan = atan = _unary("arctan", lax.atan, True)
sinh, cosh, tanh = (_unary(n, f, True) for n, f in (("sinh", lax.sinh), ("cosh", lax.cosh),
                                                       ("tanh", lax.tanh)))
arcsinh = asinh = _unary("arcsinh", lax.asinh, True)
arccosh = acosh = _unary("arccosh", lax.acosh, True)
arctanh = atanh = _unary("arctanh", lax.atanh, True)
_tanh = tanh


def tanh(x, /):
    """Hyperbolic tangent; complex ``±inf + iy`` (finite ``y``) gives ``±1 ± 0j`` (the
    Array API's special case, the zero with ``y``'s sign) for every ``y``."""
    out = _tanh(x)
    if out.dtype.kind != "c":
        return out
    (x,) = promote("tanh", x)
    re, im = lax.real(x), lax.imag(x)
    edge = lax.bitwise_and(lax.isinf(re), lax.is_finite(im))
    limit = lax.select(signbit(re), _full_like(x, -1.0), _full_like(x, 1.0))
    limit = _conj_where(signbit(im), limit)
    return lax.select(edge, limit, out)


def real(x, /):
    (x,) = promote("real", x)
    return lax.real(x) if x.dtype.kind == "c" else x


def imag(x, /):
    """Imaginary part; zeros of ``x``'s dtype for real inputs."""
    (x,) = promote("imag", x)
    return lax.imag(x) if x.dtype.kind == "c" else _zeros_like(x)


def conjugate(x, /):
    (x,) = promote("conjugate", x)
    return lax.conj(x) if x.dtype.kind == "c" else x


conj = conjugate


def positive(x, /):
    (x,) = promote("positive", x)
    return x


def invert(x, /):
    (x,) = promote("invert", x)
    return lax.bitwise_not(x)


bitwise_not = bitwise_invert = invert


def _float_or_int(name, lax_fn):
    def f(x, /):
        (x,) = promote(name, x)
        return x if x.dtype.kind in "biu" else lax_fn(x)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Elementwise ``{name}`` (integers are returned unchanged)."
    return f


floor = _float_or_int("floor", lax.floor)
ceil = _float_or_int("ceil", lax.ceil)
trunc = _float_or_int("trunc", lambda x: lax.select(lax.lt(x, _zeros_like(x)), lax.ceil(x),
                                                     lax.floor(x)))
fix = trunc


def rint(x, /):
    """Round half to even; integers become floats (NumPy and JAX agree)."""
    (x,) = promote("rint", x, to_inexact=True)
    if x.dtype.kind == "c":   # each part rounded (as JAX and NumPy)
        return _round_complex(x, 0)
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def round(a, decimals=0, out=None):
    """Round half to even, like NumPy (``decimals`` may be negative)."""
    if out is not None:
        raise TypeError("round: fnx arrays are immutable, the out= argument is not supported")
    (a,) = promote("round", a)
    decimals = int(decimals)
    if a.dtype.kind == "c":
        return _round_complex(a, decimals)
    if a.dtype.kind in "biu" and decimals >= 0:
        return a
    if a.dtype.kind == "b":
        a = _numeric(a)
    if a.dtype.kind in "iu":
        return _round_int(a, 10 ** (-decimals))
    even = lax.RoundingMethod.TO_NEAREST_EVEN
    if decimals == 0:
        return lax.round(a, even)
    if decimals > 0:  # the order of operations NumPy uses, so results match it bit for bit
        f = 10.0 ** decimals
        return lax.div(lax.round(lax.mul(a, f), even), f)
    f = 10.0 ** (-decimals)
    return lax.mul(lax.round(lax.div(a, f), even), f)


def _round_complex(a, decimals):
    """Real and imaginary parts rounded independently (Array API, NumPy): ``a`` plus the
    exact complex offset of each part to its rounded value (0 for non-finite parts, so
    infinities and NaNs pass through). The zeros of the result may lose their sign."""
    parts = []
    for part in (lax.real(a), lax.imag(a)):
        rounded = round(part, decimals)
        finite = lax.is_finite(part)
        parts.append(lax.select(finite, lax.sub(rounded, lax.select(finite, part,
                                                                    _zeros_like(part))),
                                _zeros_like(part)))
    dre, dim = (lax.convert_element_type(p, a.dtype, a.weak_type) for p in parts)
    return lax.add(a, lax.add(dre, lax.mul(dim, 1j)))


def _round_int(a, f):
    """Integers rounded to a multiple of ``f`` (> 1), half to even, exactly."""
    if f > np.iinfo(a.dtype).max:
        return _zeros_like(a)  # every representable value is below f / 2
    q = floor_divide(a, f)
    r = lax.sub(a, lax.mul(q, f))          # 0 <= r < f
    half = lax.sub(lax.broadcast_in_dim(Array._wrap(np.array(f, a.dtype)), a.shape, ()), r)
    odd = lax.ne(lax.rem(q, 2), _zeros_like(q))
    up = lax.bitwise_or(lax.gt(r, half), lax.bitwise_and(lax.eq(r, half), odd))
    return lax.mul(lax.select(up, lax.add(q, 1), q), f)


around = round


def isfinite(x, /):
    (x,) = promote("isfinite", x)
    if x.dtype.kind == "c":
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x) if _is_real_float(x) else _full_bool(x, True)


def isinf(x, /):
    (x,) = promote("isinf", x)
    if x.dtype.kind == "c":
        return lax.bitwise_or(lax.isinf(lax.real(x)), lax.isinf(lax.imag(x)))
    return lax.isinf(x) if _is_real_float(x) else _full_bool(x, False)


def isnan(x, /):
    (x,) = promote("isnan", x)
    if x.dtype.kind == "c":
        return lax.bitwise_or(lax.isnan(lax.real(x)), lax.isnan(lax.imag(x)))
    return lax.isnan(x) if _is_real_float(x) else _full_bool(x, False)


def _is_real_float(x):
    """float16/32/64 or bfloat16 (whose NumPy kind is 'V', not 'f')."""
    return x.dtype.kind == "f" or x.dtype == dtypes.bfloat16


def _full_bool(x, value):
    return lax.broadcast_in_dim(Array._wrap(np.bool_(value)), x.shape, ())


def signbit(x, /):
    (x,) = promote("signbit", x)
    if _is_real_float(x):
        one = lax.broadcast_in_dim(Array._wrap(np.ones((), x.dtype)), x.shape, ())
        return lax.lt(lax.copysign(one, x), _zeros_like(x))
    if x.dtype.kind == "u" or x.dtype.kind == "b":
        return _full_bool(x, False)
    return lax.lt(x, _zeros_like(x))


def deg2rad(x, /):
    (x,) = promote("deg2rad", x, to_inexact=True)
    return lax.mul(x, np.pi / 180)


def rad2deg(x, /):
    (x,) = promote("rad2deg", x, to_inexact=True)
    return lax.mul(x, 180 / np.pi)


radians, degrees = deg2rad, rad2deg


def heaviside(x1, x2, /):
    """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``, NaN where NaN."""
    x1, x2 = promote_broadcast("heaviside", x1, x2, to_inexact=True)
    zero = _zeros_like(x1)
    one = lax.broadcast_in_dim(Array._wrap(np.ones((), x1.dtype), x1.weak_type), x1.shape, ())
    at_zero = lax.select(lax.eq(x1, zero), x2, x1)  # x1 is NaN there: NaN, as NumPy
    return lax.select(lax.lt(x1, zero), zero, lax.select(lax.gt(x1, zero), one, at_zero))


def clip(x, /, min=None, max=None, *, a_min=None, a_max=None):
    """Clip to ``[min, max]`` (either may be None); NaN propagates.

    As the Array API says, the result has ``x``'s dtype when the bounds are of its kind
    (a float64 bound does not widen a float32 ``x``; a Python int bound beyond an integer
    dtype's range clips nothing); bounds of another kind promote, as NumPy.
    """
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    x = to_array(x)
    dt = x.dtype
    out = x
    if lo is not None:
        out = maximum(out, _clip_bound(dt, lo, True))
    if hi is not None:
        out = minimum(out, _clip_bound(dt, hi, False))
    if out.dtype != dt and _same_kind(out.dtype, dt):
        out = lax.convert_element_type(out, dt, x.weak_type)
    return out


def _same_kind(a, b):
    kind = {"i": "i", "u": "i", "f": "f", "c": "c", "b": "b"}
    ka = "f" if a == dtypes.bfloat16 else kind.get(a.kind)
    kb = "f" if b == dtypes.bfloat16 else kind.get(b.kind)
    return ka == kb


def _clip_bound(dt, bound, lower):
    """A Python int bound outside an integer dtype's range, pulled to the range's edge."""
    if type(bound) is int and dt.kind in "iu":
        info = np.iinfo(dt)
        if bound < info.min or bound > info.max:
            return int(np.clip(bound, info.min, info.max))
    return bound


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` else ``y`` (broadcasting); one argument: ``nonzero``
    (``size=`` gives it a static shape, so it works under jit)."""
    if x is None and y is None:
        from .setops import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither")
    x, y = promote("where", x, y)
    c, x, y = _broadcast3(_to_bool(condition), x, y)
    return lax.select(c, x, y)


def _broadcast3(c, x, y):
    shape = broadcast_shapes("where", c.shape, x.shape, y.shape)
    return [broadcast_to_shape(a, shape) for a in (c, x, y)]


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +-inf -> ``posinf``/``neginf`` (default: the dtype's extremes);
    complex inputs are processed part by part."""
    (x,) = promote("nan_to_num", x)
    if x.dtype.kind == "c":
        re = nan_to_num(lax.real(x), copy, nan, posinf, neginf)
        im = nan_to_num(lax.imag(x), copy, nan, posinf, neginf)
        cre = lax.convert_element_type(re, x.dtype, x.weak_type)
        cim = lax.convert_element_type(im, x.dtype, x.weak_type)
        return lax.add(cre, lax.mul(cim, 1j))
    if x.dtype.kind != "f":
        return x
    info = np.finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    zero = _zeros_like(x)
    x = lax.select(lax.isnan(x), _full_like(x, nan), x)
    x = lax.select(lax.bitwise_and(lax.isinf(x), lax.gt(x, zero)), _full_like(x, posinf), x)
    return lax.select(lax.bitwise_and(lax.isinf(x), lax.lt(x, zero)), _full_like(x, neginf), x)


def _full_like(x, value):
    """``value`` in ``x``'s dtype, shape and weak type."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.array(value, x.dtype)
    return lax.broadcast_in_dim(Array._wrap(v, x.weak_type), x.shape, ())


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = promote_broadcast("isclose", a, b)
    if a.dtype.kind not in "fc":
        return equal(a, b)
    close = less_equal(absolute(subtract(a, b)), add(atol, multiply(rtol, absolute(b))))
    close = logical_and(close, logical_and(isfinite(a), isfinite(b)))
    close = logical_or(close, equal(a, b))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    from .reductions import all as all_
    return all_(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    from .reductions import all as all_
    a1, a2 = to_array(a1), to_array(a2)
    if a1.shape != a2.shape:
        return Array._wrap(np.bool_(False))
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all_(eq)


def sinc(x, /):
    """``sin(pi x) / (pi x)``, and 1 at 0."""
    (x,) = promote("sinc", x, to_inexact=True)
    px = lax.mul(x, np.pi)
    at_zero = lax.eq(x, _zeros_like(x))
    one = _full_like(x, 1.0)
    safe = lax.select(at_zero, one, px)
    return lax.select(at_zero, one, lax.div(lax.sin(safe), safe))


# ``from .elementwise import *`` in fnx/numpy/__init__.py exports exactly the functions defined
# here (not the modules and helpers this file imports, which would shadow real ones).
__all__ = sorted(_n for _n, _v in list(globals().items())
                 if not _n.startswith("_") and callable(_v)
                 and getattr(_v, "__module__", None) == __name__)

