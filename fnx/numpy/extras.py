"""The rest of ``jax.numpy`` that research code uses: calculus on samples (``gradient``,
``trapezoid``, ``unwrap``, ``ediff1d``), float decomposition (``frexp``, ``modf``,
``ldexp``, ``spacing``), integer helpers (``gcd``, ``lcm``, ``bitwise_count``,
``packbits``), predicates, windows, selection (``select``, ``piecewise``, ``choose``,
``compress``, ``extract``), editing (``insert``, ``delete``, ``append``, ``resize``,
``block``, functional ``place``/``put``), ``apply_along_axis``, ``vectorize``,
``histogram2d``/``histogramdd``, ``matvec``/``vecmat``, ``einsum_path`` and NumPy's I/O
and printing helpers.

Everything is written with fnx.numpy and lax functions, so it traces under jit and
differentiates where the math does. Static arguments (positions, counts, shapes) must be
concrete, as in JAX.
"""
from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..errors import ConcretizationError, ShapeError
from .._config import config
from .util import RankPromotionError, concrete_int, normalize_axis, promote

__all__ = [
    "gradient", "trapezoid", "unwrap", "ediff1d", "angle", "frexp", "modf", "ldexp",
    "spacing", "gcd", "lcm", "i0", "isneginf", "isposinf", "iscomplex", "isreal",
    "iscomplexobj", "isrealobj", "isscalar", "iterable", "fabs", "bitwise_count",
    "bartlett", "blackman", "hamming", "hanning", "kaiser", "select", "piecewise", "choose",
    "compress", "extract", "packbits", "unpackbits", "apply_along_axis", "apply_over_axes",
    "vectorize", "block", "insert", "delete", "append", "resize", "rollaxis", "hsplit",
    "vsplit", "dsplit", "array_equiv", "matvec", "vecmat", "einsum_path", "histogram2d",
    "histogramdd", "place", "put", "frombuffer", "fromfile", "fromiter", "fromstring", "load",
    "array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions",
]


def _fnp():
    from .. import numpy as fnp
    return fnp


def _inexact(name, x):
    (x,) = promote(name, x, to_inexact=True)
    return x


# --- calculus on samples ---------------------------------------------------------------------

def gradient(f, *varargs, axis=None, edge_order=None):
    """Second-order central differences inside, one-sided differences at the ends
    (``edge_order`` 1, the default, or 2), as NumPy; ``varargs``: one spacing per axis
    (a scalar or the coordinates). One axis gives an array, several a list."""
    fnp = _fnp()
    f = _inexact("gradient", f)
    axes = tuple(range(f.ndim)) if axis is None else (
        (normalize_axis("gradient", axis, f.ndim),) if isinstance(axis, (int, np.integer))
        else tuple(normalize_axis("gradient", a, f.ndim) for a in axis))
    edge_order = 1 if edge_order is None else int(edge_order)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError(f"gradient: give one spacing, or one per axis ({len(axes)}), got "
                        f"{len(varargs)}")
    out = []
    for ax, h in zip(axes, spacing):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise ValueError(f"gradient: axis {ax} has {n} points; edge_order={edge_order} "
                             f"needs at least {edge_order + 1}")
        sl = lambda a, b: lax.slice_in_dim(f, a, b, 1, ax)  # noqa: E731
        bshape = [1] * f.ndim
        if np.ndim(h) == 0:
            h = float(h) if not isinstance(h, Array) else h
            interior = (sl(2, n) - sl(0, n - 2)) / (2.0 * h) if n > 2 else None
            if edge_order == 1:
                first = (sl(1, 2) - sl(0, 1)) / h
                last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
            else:
                first = (-1.5 * sl(0, 1) + 2.0 * sl(1, 2) - 0.5 * sl(2, 3)) / h
                last = (0.5 * sl(n - 3, n - 2) - 2.0 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
        else:
            x = lax.convert_element_type(to_array(h, "gradient"), f.dtype)
            if x.ndim != 1 or x.shape[0] != n:
                raise ShapeError(f"gradient: coordinates for axis {ax} must be 1-D of length "
                                 f"{n}, got shape {x.shape}")
            d = fnp.diff(x)
            bshape[ax] = n - 1
            d = lax.reshape(d, tuple(bshape))
            dsl = lambda a, b: lax.slice_in_dim(d, a, b, 1, ax)  # noqa: E731
            if n > 2:
                h1, h2 = dsl(0, n - 2), dsl(1, n - 1)
                interior = (-(h2 / (h1 * (h1 + h2))) * sl(0, n - 2)
                            + ((h2 - h1) / (h1 * h2)) * sl(1, n - 1)
                            + (h1 / (h2 * (h1 + h2))) * sl(2, n))
            else:
                interior = None
            if edge_order == 1:
                first = (sl(1, 2) - sl(0, 1)) / dsl(0, 1)
                last = (sl(n - 1, n) - sl(n - 2, n - 1)) / dsl(n - 2, n - 1)
            else:
                a1, a2 = dsl(0, 1), dsl(1, 2)
                first = (-(2.0 * a1 + a2) / (a1 * (a1 + a2)) * sl(0, 1)
                         + (a1 + a2) / (a1 * a2) * sl(1, 2) - a1 / (a2 * (a1 + a2)) * sl(2, 3))
                b1, b2 = dsl(n - 3, n - 2), dsl(n - 2, n - 1)
                last = (b2 / (b1 * (b1 + b2)) * sl(n - 3, n - 2)
                        - (b2 + b1) / (b1 * b2) * sl(n - 2, n - 1)
                        + (2.0 * b2 + b1) / (b2 * (b1 + b2)) * sl(n - 1, n))
        parts = [first] + ([interior] if interior is not None else []) + [last]
        out.append(fnp.concatenate(parts, axis=ax))
    return out[0] if len(out) == 1 else out


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal rule along ``axis`` (sample points ``x``, else spacing ``dx``), in
    JAX's formulas: a constant spacing gives ``dx * (sum(y) - (y[0] + y[-1]) / 2)``."""
    from .reductions import _fused_sum
    fnp = _fnp()
    if x is None:
        (y,) = promote("trapezoid", y, to_inexact=True)
        axis = normalize_axis("trapezoid", axis, y.ndim)
        d = dx if not isinstance(dx, Array) and np.ndim(dx) == 0 else to_array(dx, "trapezoid")
        if isinstance(d, Array) and d.ndim > 0:
            d = lax.expand_dims(d, tuple(range(y.ndim - d.ndim)))
            d = fnp.moveaxis(d, axis, -1)
    else:
        y, x = promote("trapezoid", y, x, to_inexact=True)
        axis = normalize_axis("trapezoid", axis, y.ndim)
        d = fnp.diff(x) if x.ndim == 1 else fnp.moveaxis(fnp.diff(x, axis=axis), axis, -1)
    y = fnp.moveaxis(y, axis, -1)
    n = y.shape[-1]
    if not isinstance(d, Array) or d.ndim == 0 or d.shape[-1] == 1:
        d0 = d if not isinstance(d, Array) or d.ndim == 0 else d[..., 0]
        ends = lax.slice_in_dim(y, 0, 1, 1, -1) + lax.slice_in_dim(y, n - 1, n, 1, -1)
        return d0 * (fnp.sum(y, axis=-1) - 0.5 * lax.squeeze(ends, (y.ndim - 1,)))
    mid = lax.slice_in_dim(y, 1, n, 1, -1) + lax.slice_in_dim(y, 0, max(n - 1, 0), 1, -1)
    return 0.5 * _fused_sum(fnp.multiply, d, mid, axis=-1)


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """Unwrap phase jumps larger than ``max(discont, period / 2)`` along ``axis`` by
    multiples of ``period`` (NumPy's algorithm)."""
    fnp = _fnp()
    (p,) = promote("unwrap", p)
    axis = normalize_axis("unwrap", axis, p.ndim)
    if p.dtype.kind in "iu" and isinstance(period, (int, np.integer)):
        high, rem = divmod(int(period), 2)    # integers stay integers, as NumPy and JAX
        ambiguous = rem == 0
    else:
        p = _inexact("unwrap", p)
        high, ambiguous = period / 2, True
    discont = high if discont is None else fnp.maximum(discont, high)
    dd = fnp.diff(p, axis=axis)
    ddmod = fnp.remainder(dd + high, period) - high
    if ambiguous:
        ddmod = fnp.where((ddmod == -high) & (dd > 0), high, ddmod)
    correct = fnp.where(fnp.abs(dd) < discont, 0, ddmod - dd)
    zero_shape = list(p.shape)
    zero_shape[axis] = 1
    csum = fnp.cumsum(correct, axis=axis)
    csum = fnp.concatenate([fnp.zeros(tuple(zero_shape), csum.dtype), csum], axis=axis)
    return p + csum.astype(p.dtype)


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened ``ary``, with ``to_begin``/``to_end`` attached."""
    fnp = _fnp()
    a = fnp.ravel(to_array(ary, "ediff1d"))
    parts = [fnp.diff(a)]
    if to_begin is not None:
        parts.insert(0, fnp.ravel(fnp.asarray(to_begin)).astype(a.dtype))
    if to_end is not None:
        parts.append(fnp.ravel(fnp.asarray(to_end)).astype(a.dtype))
    return fnp.concatenate(parts) if len(parts) > 1 else parts[0]


# --- floats ------------------------------------------------------------------------------------

def angle(z, deg=False):
    """The argument of complex ``z`` (radians, or degrees with ``deg``); 0 or pi for reals."""
    fnp = _fnp()
    z = to_array(z, "angle")
    if z.dtype.kind == "c":
        out = fnp.arctan2(fnp.imag(z), fnp.real(z))
    else:
        z = _inexact("angle", z)
        out = fnp.arctan2(fnp.zeros_like(z), z)
    return fnp.rad2deg(out) if deg else out


def _pow2(e, dtype):
    """2**e as ``dtype`` for an integer array ``e`` (exact, through exp2)."""
    return lax.exp2(lax.convert_element_type(e, dtype))


def frexp(x, /):
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <= |mantissa|
    < 1`` (int32 exponents); zeros, infinities and NaN give ``(x, 0)``."""
    fnp = _fnp()
    x = _inexact("frexp", x)
    if x.dtype.kind == "c":
        raise TypeError("frexp: complex input is not supported (as NumPy and JAX)")
    finite = fnp.isfinite(x) & (x != 0)
    ax = fnp.where(finite, fnp.abs(x), 1)
    e = fnp.floor(fnp.log2(ax)).astype(np.int32) + 1
    # 2**-e in two halves, so subnormal x does not overflow the scale factor
    h = e // 2
    m = ax * _pow2(-h, x.dtype) * _pow2(-(e - h), x.dtype)
    too_big, too_small = m >= 1, m < 0.5
    m = fnp.where(too_big, m * 0.5, fnp.where(too_small, m * 2, m))
    e = e + too_big.astype(np.int32) - too_small.astype(np.int32)
    m = fnp.where(finite, fnp.copysign(m, x), x)
    return m, fnp.where(finite, e, 0)


def modf(x, /, out=None):
    """``(fractional part, integral part)``, both with ``x``'s sign; ``modf(±inf)`` is
    ``(±0, ±inf)``."""
    fnp = _fnp()
    if out is not None:
        raise TypeError("modf: fnx arrays are immutable; out= is not supported")
    x = _inexact("modf", x)
    whole = fnp.trunc(x)
    finite_x = fnp.where(fnp.isinf(x), fnp.zeros_like(x), x)   # inf - inf would warn
    frac = finite_x - fnp.trunc(finite_x)
    return fnp.copysign(frac, x), whole


def ldexp(x1, x2, /):
    """``x1 * 2**x2`` for integer ``x2`` (scaled in two steps, so neither factor
    overflows before the product does)."""
    fnp = _fnp()
    e = to_array(x2, "ldexp") if not isinstance(x2, int) else x2
    if isinstance(e, Array) and e.dtype.kind not in "iub":
        raise TypeError(f"ldexp: the exponent must be an integer array, got {e.dtype}")
    x = _inexact("ldexp", x1)
    e = fnp.asarray(e).astype(np.int32)
    h = e // 2
    return x * _pow2(h, x.dtype) * _pow2(e - h, x.dtype)


def spacing(x, /):
    """The distance from ``x`` to the next float away from zero (negative for negative
    ``x``), as NumPy."""
    fnp = _fnp()
    x = _inexact("spacing", x)
    if x.dtype == np.float16:
        # NumPy's float16 spacing (which JAX follows): the step towards +inf, positive for
        # negative x too, and inf at -inf
        return fnp.nextafter(x, np.array(np.inf, x.dtype)) - x
    target = fnp.where(fnp.signbit(x), -np.inf, np.inf).astype(x.dtype)
    out = fnp.nextafter(x, target) - x
    return fnp.where(fnp.isinf(x), np.nan, out).astype(x.dtype)


_I0 = []


def _i0_fn():
    """``I0`` with JAX's derivative: ``exp(|x|) * i0e(x)`` differentiates through the kink
    of ``|x|`` at 0 (abs' is 1 there), so, as ``jnp.i0``, the tangent is ``I1(x)`` with 0
    at ``x == 0`` (also for higher orders)."""
    if not _I0:
        from ..scipy import special
        from ..transforms.custom import custom_jvp
        fnp = _fnp()

        @custom_jvp
        def i0(x):
            return special.i0(x)

        @i0.defjvp
        def _i0_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            zero = lax.convert_element_type(0, x.dtype)
            return i0(x), fnp.where(x == zero, zero, t * special.i1(x))
        _I0.append(i0)
    return _I0[0]


def i0(x):
    """The modified Bessel function of the first kind, order 0; its derivative is 0 at 0,
    as JAX's (``fnx.scipy.special.i0``'s is 1 there, as ``jax.scipy.special.i0``'s)."""
    x = _inexact("i0", x)
    return _i0_fn()(x)


def fabs(x, /):
    """``|x|`` as a float (integers convert, as JAX); complex input raises, as NumPy."""
    x = _inexact("fabs", x)
    if x.dtype.kind == "c":
        raise TypeError("fabs: complex input is not supported; use abs")
    return _fnp().abs(x)


def isneginf(x, /, out=None):
    fnp = _fnp()
    x = to_array(x, "isneginf")
    return fnp.isinf(x) & fnp.signbit(x) if x.dtype.kind == "f" or \
        x.dtype == dtypes.bfloat16 else fnp.zeros(x.shape, bool)


def isposinf(x, /, out=None):
    fnp = _fnp()
    x = to_array(x, "isposinf")
    return fnp.isinf(x) & ~fnp.signbit(x) if x.dtype.kind == "f" or \
        x.dtype == dtypes.bfloat16 else fnp.zeros(x.shape, bool)


def iscomplex(x):
    """Elementwise: a nonzero imaginary part."""
    fnp = _fnp()
    x = to_array(x, "iscomplex")
    return fnp.imag(x) != 0 if x.dtype.kind == "c" else fnp.zeros(x.shape, bool)


def isreal(x):
    """Elementwise: a zero imaginary part."""
    fnp = _fnp()
    x = to_array(x, "isreal")
    return fnp.imag(x) == 0 if x.dtype.kind == "c" else fnp.ones(x.shape, bool)


def iscomplexobj(x):
    """Whether ``x`` has a complex dtype (arrays, scalars and sequences)."""
    if x is None:
        return False
    dt = getattr(x, "dtype", None)
    if dt is None:
        dt = np.asarray(x).dtype
    return dtypes.canonicalize(dt).kind == "c" if not isinstance(dt, np.dtype) else \
        dt.kind == "c"


def isrealobj(x):
    return not iscomplexobj(x)


def isscalar(element):
    """True for Python and NumPy scalars and rank-0 arrays (as JAX, which counts a
    rank-0 Array as a scalar)."""
    if isinstance(element, Array):
        return element.ndim == 0
    if isinstance(element, (np.ndarray, np.generic)):
        return np.ndim(element) == 0
    return isinstance(element, (bool, int, float, complex))


iterable = np.iterable


def bitwise_count(x, /):
    """The number of 1 bits of ``|x|`` (uint8), as NumPy's bitwise_count."""
    fnp = _fnp()
    x = to_array(x, "bitwise_count")
    if x.dtype.kind not in "biu":
        raise TypeError(f"bitwise_count: x must be an integer or bool array, got {x.dtype}")
    if x.dtype.kind == "b":
        return x.astype(np.uint8)
    bits = x.dtype.itemsize * 8
    u = fnp.abs(x) if x.dtype.kind == "i" else x
    u = lax.convert_element_type(u, np.dtype(f"uint{bits}"))
    count = fnp.zeros(x.shape, np.uint8)
    one = np.dtype(f"uint{bits}").type(1)
    for i in range(bits):
        count = count + ((u >> i) & one).astype(np.uint8)
    return count


# --- windows -------------------------------------------------------------------------------------

def _window_n(name, M):
    M = concrete_int(name, M, "M")
    return M


def _window(name, M, fn):
    fnp = _fnp()
    M = _window_n(name, M)
    if M < 1:
        return fnp.zeros((0,), dtypes.default_float())
    if M == 1:
        return fnp.ones((1,), dtypes.default_float())
    n = fnp.arange(M, dtype=dtypes.default_float())
    return fn(n, M)


def bartlett(M):
    fnp = _fnp()
    return _window("bartlett", M, lambda n, M: 1 - fnp.abs(2 * n / (M - 1) - 1))


def blackman(M):
    fnp = _fnp()
    return _window("blackman", M, lambda n, M: 0.42 - 0.5 * fnp.cos(2 * np.pi * n / (M - 1))
                   + 0.08 * fnp.cos(4 * np.pi * n / (M - 1)))


def hamming(M):
    fnp = _fnp()
    return _window("hamming", M, lambda n, M: 0.54 - 0.46 * fnp.cos(2 * np.pi * n / (M - 1)))


def hanning(M):
    fnp = _fnp()
    return _window("hanning", M, lambda n, M: 0.5 - 0.5 * fnp.cos(2 * np.pi * n / (M - 1)))


def kaiser(M, beta):
    fnp = _fnp()

    def f(n, M):
        alpha = (M - 1) / 2.0
        b = fnp.asarray(beta, dtype=n.dtype)
        return i0(b * fnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(b)
    return _window("kaiser", M, f)


# --- selection -----------------------------------------------------------------------------------

def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, elementwise (``default`` where none does)."""
    fnp = _fnp()
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist has {len(condlist)} entries and choicelist "
                         f"{len(choicelist)}; they must match")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    conds = []
    for k, c in enumerate(condlist):
        c = to_array(c, "select")
        if c.dtype != dtypes.bool_:
            raise TypeError(f"select: condlist[{k}] must be boolean, got {c.dtype}")
        conds.append(c)
    choices = promote("select", *choicelist, default)
    out = choices[-1]
    for c, v in zip(reversed(conds), reversed(choices[:-1])):
        out = fnp.where(c, v, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """``funclist[k]`` (a function of ``x``, or a constant) where ``condlist[k]`` holds;
    one extra function is the default. As JAX, every function is evaluated on all of
    ``x`` (vectorized) and the results selected, the later conditions winning."""
    fnp = _fnp()
    x = to_array(x, "piecewise")
    if isinstance(condlist, Array) or (isinstance(condlist, np.ndarray)) or (
            isinstance(condlist, (bool, np.bool_))):
        condlist = to_array(condlist, "piecewise")
        condlist = [condlist] if condlist.ndim == x.ndim or condlist.ndim == 0 else list(
            condlist)
    conds = [to_array(c, "piecewise") for c in condlist]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"piecewise: {n} conditions need {n} or {n + 1} functions, got "
                         f"{len(funclist)}")

    def value(f):
        v = f(x, *args, **kw) if callable(f) else f
        return fnp.broadcast_to(fnp.asarray(v, dtype=x.dtype), x.shape)
    out = value(funclist[n]) if len(funclist) == n + 1 else fnp.zeros_like(x)
    for c, f in zip(conds, funclist[:n]):
        out = fnp.where(c, value(f), out)
    return out


def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` (broadcasting ``a`` and the choices); ``mode`` 'raise'
    (concrete ``a`` out of range raises), 'wrap' or 'clip'."""
    fnp = _fnp()
    if out is not None:
        raise TypeError("choose: fnx arrays are immutable; out= is not supported")
    a = to_array(a, "choose")
    if a.dtype.kind not in "iu":
        raise TypeError(f"choose: a must be integers, got {a.dtype}")
    choices = promote("choose", *choices) if not isinstance(choices, Array) else [
        choices[k] for k in range(choices.shape[0])]
    n = len(choices)
    if mode == "raise":
        if isinstance(a, Tracer):
            raise ConcretizationError("choose: mode='raise' checks the indices, which needs "
                                      "them concrete; under jit pass mode='wrap' or 'clip'")
        if a.size and (int(fnp.min(a)) < 0 or int(fnp.max(a)) >= n):
            raise ValueError(f"choose: an index is out of range for {n} choices "
                             "(mode='raise'); pass mode='wrap' or 'clip'")
    elif mode == "wrap":
        a = fnp.remainder(a, n)
    elif mode == "clip":
        a = fnp.clip(a, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    arrays = fnp.broadcast_arrays(a, *choices)
    a, choices = arrays[0], arrays[1:]
    result = choices[0]
    for k in range(1, n):
        result = fnp.where(a == k, choices[k], result)
    return result


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` (None: the flattened ``a``) where ``condition``
    holds; ``size=`` makes the result static (padded with ``fill_value``), for jit."""
    fnp = _fnp()
    if out is not None:
        raise TypeError("compress: fnx arrays are immutable; out= is not supported")
    cond = fnp.ravel(to_array(condition, "compress")).astype(bool)
    a = to_array(a, "compress")
    if axis is None:
        a, axis = fnp.ravel(a), 0
    axis = normalize_axis("compress", axis, a.ndim)
    n = a.shape[axis]
    if cond.shape[0] > n:   # as JAX: entries past the end must be False (concrete)
        extra = np.asarray(cond[n:]._concrete(
            "compress: a condition longer than the axis"))
        if extra.any():
            raise ValueError(f"compress: condition has {cond.shape[0]} entries, more than the "
                             f"{n} of axis {axis}, and some past the end are True")
        cond = cond[:n]
    if cond.shape[0] < n:
        cond = fnp.concatenate([cond, fnp.zeros((n - cond.shape[0],), bool)])
    (idx,) = fnp.nonzero(cond, size=size, fill_value=n if size is not None else None)
    taken = fnp.take(a, idx, axis=axis, mode="fill", fill_value=fill_value)
    return taken


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of the flattened ``arr`` where the flattened ``condition`` holds
    (``compress``'s rules, as JAX: a shorter condition reads that many elements; a longer
    one may hold only False past the end)."""
    fnp = _fnp()
    arr = fnp.ravel(to_array(arr, "extract"))
    cond = fnp.ravel(to_array(condition, "extract"))
    return compress(cond != 0, arr, size=size, fill_value=fill_value)


def packbits(a, axis=None, bitorder="big"):
    """Pack the truthiness of ``a`` into uint8, 8 elements a byte (zero-padded)."""
    fnp = _fnp()
    a = to_array(a, "packbits")
    if a.dtype.kind not in "biu":
        raise TypeError(f"packbits: a must be integer or bool, got {a.dtype}")
    if bitorder not in ("big", "little"):
        raise ValueError(f"packbits: bitorder must be 'big' or 'little', got {bitorder!r}")
    bits = (a != 0).astype(np.uint8)
    if axis is None:
        bits, axis = fnp.ravel(bits), 0
    axis = normalize_axis("packbits", axis, bits.ndim)
    bits = fnp.moveaxis(bits, axis, -1)
    n = bits.shape[-1]
    pad = (-n) % 8
    if pad:
        bits = fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    bits = fnp.reshape(bits, bits.shape[:-1] + ((n + pad) // 8, 8))
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    packed = fnp.sum(bits << fnp.asarray(shifts.astype(np.uint8)), axis=-1, dtype=np.uint8)
    return fnp.moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of uint8 ``a`` as uint8 0/1 values (``count``: keep that many)."""
    fnp = _fnp()
    a = to_array(a, "unpackbits")
    if a.dtype != np.uint8:
        raise TypeError(f"unpackbits: a must be uint8, got {a.dtype}")
    if bitorder not in ("big", "little"):
        raise ValueError(f"unpackbits: bitorder must be 'big' or 'little', got {bitorder!r}")
    if axis is None:
        a, axis = fnp.ravel(a), 0
    axis = normalize_axis("unpackbits", axis, a.ndim)
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    bits = (a[..., None] >> fnp.asarray(shifts.astype(np.uint8))) & np.uint8(1)
    bits = fnp.moveaxis(bits, axis, -2)
    bits = fnp.reshape(bits, bits.shape[:-2] + (bits.shape[-2] * 8,))
    if count is not None:
        count = int(count)
        total = bits.shape[-1]
        if count >= 0:
            if count <= total:
                bits = bits[..., :count]
            else:
                bits = fnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, count - total)])
        else:
            bits = bits[..., :total + count]
    return fnp.moveaxis(bits, -1, axis)


# --- applying functions ------------------------------------------------------------------------

def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis`` (through vmap, so
    ``func1d`` is traced once); its output dims take ``axis``'s place."""
    from ..transforms.vmap import vmap
    fnp = _fnp()
    arr = to_array(arr, "apply_along_axis")
    nd = arr.ndim
    axis = normalize_axis("apply_along_axis", axis, nd)

    def f(x):
        return fnp.asarray(func1d(x, *args, **kwargs))
    # vmap over the dims after axis (last first), then over the ones before it
    for i in range(1, nd - axis):
        f = vmap(f, in_axes=-1, out_axes=-1)
    for i in range(axis):
        f = vmap(f, in_axes=0, out_axes=0)
    return f(arr)


def apply_over_axes(func, a, axes):
    """``a = func(a, axis)`` for each axis in turn, re-inserting a reduced axis."""
    fnp = _fnp()
    a = to_array(a, "apply_over_axes")
    for axis in ([axes] if isinstance(axes, (int, np.integer)) else axes):
        b = fnp.asarray(func(a, axis))
        if b.ndim == a.ndim - 1:
            b = fnp.expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ValueError("apply_over_axes: func must keep the rank or reduce it by one")
        a = b
    return a


def _parse_gufunc_signature(signature):
    import re
    sig = signature.replace(" ", "")
    m = re.fullmatch(r"((?:\((?:\w+(?:,\w+)*)?\),?)+)->((?:\((?:\w+(?:,\w+)*)?\),?)+)", sig)
    if not m:
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r} (example: "
                         "'(n),(n)->()')")

    def parse(part):
        return [tuple(d for d in g.split(",") if d) for g in re.findall(r"\(([^)]*)\)", part)]
    return parse(m.group(1)), parse(m.group(2))


class vectorize:
    """``vectorize(pyfunc, excluded=..., signature=...)``: ``pyfunc`` applied over
    broadcast leading (loop) dims through vmap, traced once (JAX's vectorize; ``pyfunc``
    must be traceable). ``signature`` is a NumPy gufunc signature such as
    ``'(n),(n)->()'``; without it every argument is a scalar core."""

    def __init__(self, pyfunc, *, excluded=frozenset(), signature=None):
        if any(not isinstance(e, (str, int)) for e in excluded):
            raise TypeError("jax.numpy.vectorize can only exclude integer or string "
                            f"arguments, but excluded={excluded!r}")
        if any(isinstance(e, int) and e < 0 for e in excluded):
            raise ValueError(f"excluded={excluded!r} contains negative numbers")
        self.pyfunc = pyfunc
        self.excluded = set(excluded)
        self.signature = signature
        self.__doc__ = getattr(pyfunc, "__doc__", None)
        self.__name__ = getattr(pyfunc, "__name__", "vectorized")
        self.__wrapped__ = pyfunc

    def __call__(self, *args, **kwargs):
        from ..transforms.vmap import vmap
        fnp = _fnp()
        context = (f"on vectorized function with excluded={self.excluded!r} and "
                   f"signature={self.signature!r}")
        excluded = {k for k in self.excluded if isinstance(k, int)}
        ex_kw = {k: v for k, v in kwargs.items() if k in self.excluded}
        kw = {k: v for k, v in kwargs.items() if k not in self.excluded}
        names = list(kw)
        pos = [i for i in range(len(args)) if i not in excluded]
        if self.signature is None:
            in_core, out_core = [()] * (len(pos) + len(names)), None
        else:
            in_core, out_core = _parse_gufunc_signature(self.signature)
        # None arguments are passed through as excluded ones (JAX); not for core dims
        nones = [k for k, i in enumerate(pos) if args[i] is None]
        if nones:
            if any(k < len(in_core) and in_core[k] != () for k in nones):
                raise ValueError(f"Cannot pass None at locations {set(nones)} with "
                                 f"signature={self.signature!r}")
            in_core = [c for k, c in enumerate(in_core) if k not in nones]
            pos = [i for i in pos if args[i] is not None]
        arrays = [fnp.asarray(args[i]) for i in pos] + [fnp.asarray(kw[n]) for n in names]
        if len(in_core) != len(arrays):
            raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, "
                            f"got {len(arrays)} {context}")
        sizes = {}
        loop_shapes = []
        for x, core in zip(arrays, in_core):
            if x.ndim < len(core):
                raise ValueError(f"input with shape {x.shape} does not have enough dimensions "
                                 f"for all core dimensions {core} {context}")
            for d, name in zip(x.shape[x.ndim - len(core):], core):
                if sizes.setdefault(name, d) != d:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: {d} vs "
                                     f"{sizes[name]} {context}")
            loop_shapes.append(x.shape[:x.ndim - len(core)])
        mode = config.values["jax_numpy_rank_promotion"]
        if mode != "allow" and len({x.ndim - len(c) for x, c in zip(arrays, in_core)
                                    if x.ndim != 0}) > 1:
            msg = (f"operands with shapes {[x.shape for x in arrays]} require rank promotion "
                   f"for jnp.vectorize function with signature {self.signature}. Set the "
                   "jax_numpy_rank_promotion config option to 'allow' to disable this "
                   "message.")
            if mode == "raise":
                raise RankPromotionError(msg)
            warnings.warn(msg, UserWarning, stacklevel=2)
        loop = fnp.broadcast_shapes(*loop_shapes) if loop_shapes else ()
        arrays = [fnp.broadcast_to(x, loop + x.shape[x.ndim - len(core):])
                  for x, core in zip(arrays, in_core)]

        def core_fn(*xs):
            full = list(args)
            for i, x in zip(pos, xs[:len(pos)]):
                full[i] = x
            kws = dict(ex_kw)
            kws.update(dict(zip(names, xs[len(pos):])))
            out = self.pyfunc(*full, **kws)
            if out_core is not None:
                _check_vectorize_outputs(out, out_core, sizes, context)
            return out
        f = core_fn
        for _ in loop:
            f = vmap(f)
        return f(*arrays)


def _check_vectorize_outputs(out, out_core, sizes, context):
    """JAX's checks of a signature's outputs (on the core shapes)."""
    fnp = _fnp()
    if len(out_core) > 1 and not isinstance(out, tuple):
        raise TypeError(f"output must be a tuple when multiple outputs are expected, got: "
                        f"{out!r}\n{context}")
    shapes = [fnp.shape(o) for o in (out if isinstance(out, tuple) else [out])]
    if len(shapes) != len(out_core):
        raise TypeError(f"wrong number of output arguments: expected {len(out_core)}, got "
                        f"{len(shapes)} {context}")
    sizes = dict(sizes)
    for shape, core in zip(shapes, out_core):
        if len(shape) != len(core):
            raise ValueError(f"output shape {shape} does not match core dimensions {core} "
                             f"{context}")
        for d, name in zip(shape, core):
            if sizes.setdefault(name, d) != d:
                raise ValueError(f"inconsistent size for core dimension {name!r}: {d} vs "
                                 f"{sizes[name]} {context}")


# --- editing -------------------------------------------------------------------------------------

def _static_positions(name, obj, n):
    """Concrete integer positions from an int, a slice, a sequence or a concrete array."""
    if isinstance(obj, slice):
        return np.arange(n)[obj]
    if isinstance(obj, Tracer):
        raise ConcretizationError(f"{name}: the positions set the output shape, so they must "
                                  "be concrete (not traced) values")
    pos = np.asarray(obj)
    if pos.dtype == np.bool_:
        if pos.shape != (n,):
            raise ShapeError(f"{name}: a boolean mask must have the axis length {n}")
        return np.nonzero(pos)[0]
    if pos.dtype.kind not in "iu" and pos.size:
        raise TypeError(f"{name}: positions must be integers, got {pos.dtype}")
    return pos.astype(np.int64)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """``arr`` without the entries at ``obj`` (an int, slice, sequence or concrete
    array) along ``axis`` (None: the flattened ``arr``)."""
    fnp = _fnp()
    a = to_array(arr, "delete")
    if axis is None:
        a, axis = fnp.ravel(a), 0
    axis = normalize_axis("delete", axis, a.ndim)
    n = a.shape[axis]
    pos = _static_positions("delete", obj, n).reshape(-1)
    if ((pos < -n) | (pos >= n)).any():
        raise IndexError(f"delete: an index is out of bounds for axis {axis} of size {n}")
    keep = np.ones(n, bool)
    keep[pos % n if n else pos] = False
    return fnp.take(a, fnp.asarray(np.nonzero(keep)[0].astype(np.int32)), axis=axis)


def insert(arr, obj, values, axis=None):
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis``
    (None: the flattened ``arr``); positions are static."""
    fnp = _fnp()
    a = to_array(arr, "insert")
    if axis is None:
        a, axis = fnp.ravel(a), 0
    axis = normalize_axis("insert", axis, a.ndim)
    n = a.shape[axis]
    scalar_pos = isinstance(obj, (int, np.integer)) or (np.ndim(obj) == 0 and not isinstance(
        obj, slice) and not isinstance(obj, Tracer))
    pos = _static_positions("insert", obj, n + 1 if isinstance(obj, slice) else n)
    pos = np.where(pos < 0, pos + n, pos).reshape(-1)
    if ((pos < 0) | (pos > n)).any():
        raise IndexError(f"insert: an index is out of bounds for axis {axis} of size {n}")
    v = fnp.asarray(values).astype(a.dtype)
    if v.ndim > a.ndim:
        raise ShapeError(f"insert: values of shape {v.shape} have more dims than arr "
                         f"{a.shape}")
    v = fnp.reshape(v, (1,) * (a.ndim - v.ndim) + v.shape)   # NumPy's ndmin=arr.ndim
    if scalar_pos:
        # one position: values is a block; its first dim runs along axis (NumPy's rule)
        v = fnp.moveaxis(v, 0, axis)
        shape = list(a.shape)
        shape[axis] = v.shape[axis]
        v = fnp.broadcast_to(v, tuple(shape))
        p = int(pos[0])
        return fnp.concatenate([lax.slice_in_dim(a, 0, p, 1, axis), v,
                                lax.slice_in_dim(a, p, n, 1, axis)], axis=axis)
    k = pos.shape[0]
    shape = list(a.shape)
    shape[axis] = k
    v = fnp.broadcast_to(v, tuple(shape))
    order = np.argsort(pos, kind="stable")
    new_pos = pos[order] + np.arange(k)
    total = n + k
    is_new = np.zeros(total, bool)
    is_new[new_pos] = True
    src = np.empty(total, np.int64)
    src[~is_new] = np.arange(n)
    src[new_pos] = n + order
    both = fnp.concatenate([a, v], axis=axis)
    return fnp.take(both, fnp.asarray(src.astype(np.int32)), axis=axis)


def append(arr, values, axis=None):
    """``arr`` and ``values`` concatenated (flattened when ``axis`` is None)."""
    fnp = _fnp()
    if axis is None:
        a, v = promote("append", arr, values)
        return fnp.concatenate([fnp.ravel(a), fnp.ravel(v)])
    return fnp.concatenate(promote("append", arr, values), axis=axis)


def resize(a, new_shape):
    """The flattened ``a`` repeated (cyclically) to fill ``new_shape``."""
    fnp = _fnp()
    a = fnp.ravel(to_array(a, "resize"))
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    shape = tuple(concrete_int("resize", d, "a dimension") for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"resize: all dimensions must be non-negative, got {shape}")
    total = math.prod(shape)
    if a.size == 0 or total == 0:
        return fnp.zeros(shape, a.dtype)
    reps = -(-total // a.size)
    return fnp.reshape(fnp.tile(a, reps)[:total], shape)


def rollaxis(a, axis, start=0):
    """Move ``axis`` to sit before position ``start`` (NumPy's older moveaxis)."""
    fnp = _fnp()
    a = to_array(a, "rollaxis")
    n = a.ndim
    axis = normalize_axis("rollaxis", axis, n)
    start = int(start)
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: start {start} is out of range for rank {n}")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return a
    return fnp.moveaxis(a, axis, start)


def hsplit(ary, indices_or_sections):
    """Split along axis 1 (axis 0 for 1-D arrays)."""
    fnp = _fnp()
    a = to_array(ary, "hsplit")
    if a.ndim == 0:
        raise ShapeError("hsplit: needs an array of rank >= 1")
    return fnp.split(a, indices_or_sections, axis=1 if a.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """Split along axis 0 (rank >= 2)."""
    fnp = _fnp()
    a = to_array(ary, "vsplit")
    if a.ndim < 2:
        raise ShapeError(f"vsplit: needs an array of rank >= 2, got shape {a.shape}")
    return fnp.split(a, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    """Split along axis 2 (rank >= 3)."""
    fnp = _fnp()
    a = to_array(ary, "dsplit")
    if a.ndim < 3:
        raise ShapeError(f"dsplit: needs an array of rank >= 3, got shape {a.shape}")
    return fnp.split(a, indices_or_sections, axis=2)


def block(arrays):
    """Assemble an array from nested lists of blocks (the innermost lists join along
    the last axis, the next along the one before, ...)."""
    fnp = _fnp()

    def depth(x):
        if isinstance(x, list):
            if not x:
                raise ValueError("block: lists must not be empty")
            ds = {depth(e) for e in x}
            if len(ds) != 1:
                raise ValueError("block: list depths are mismatched")
            return 1 + ds.pop()
        if isinstance(x, tuple):
            raise TypeError("block: use lists, not tuples, for the nesting")
        return 0
    d = depth(arrays)

    def leaves(x):
        return [y for e in x for y in leaves(e)] if isinstance(x, list) else [x]
    ndim = max([d] + [np.ndim(leaf) if not isinstance(leaf, Array) else leaf.ndim
                      for leaf in leaves(arrays)])

    def build(x, level):
        if not isinstance(x, list):
            x = fnp.asarray(x)
            return fnp.reshape(x, (1,) * (ndim - x.ndim) + x.shape)
        parts = [build(e, level + 1) for e in x]
        return fnp.concatenate(parts, axis=-(d - level))
    return build(arrays, 0)


def place(arr, mask, vals, *, inplace=True):
    """``arr`` with the entries where ``mask`` holds replaced, in order, by ``vals``
    (repeated cyclically). Functional, as JAX: pass ``inplace=False``."""
    fnp = _fnp()
    if inplace:
        raise ValueError("place: fnx arrays are immutable, so nothing is changed in place; "
                         "call place(arr, mask, vals, inplace=False) and use the result")
    a = to_array(arr, "place")
    m = fnp.ravel(to_array(mask, "place")).astype(bool)
    flat = fnp.ravel(a)
    if m.shape[0] != flat.shape[0]:
        raise ShapeError(f"place: mask ({m.shape[0]} elements) and arr ({flat.shape[0]}) "
                         "must have the same size")
    v = fnp.ravel(fnp.asarray(vals)).astype(a.dtype)
    if v.size == 0:
        return a
    # the k-th True position takes vals[k % len(vals)]
    k = fnp.cumsum(m.astype(np.int32)) - 1
    picked = fnp.take(v, fnp.remainder(fnp.maximum(k, 0), v.shape[0]))
    return fnp.reshape(fnp.where(m, picked, flat), a.shape)


def put(a, ind, v, mode=None, *, inplace=True):
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated cyclically). ``mode``:
    None or 'fill' (out-of-range positions are dropped, as JAX), 'clip', 'wrap'.
    Functional, as JAX: pass ``inplace=False``."""
    fnp = _fnp()
    if inplace:
        raise ValueError("put: fnx arrays are immutable, so nothing is changed in place; "
                         "call put(a, ind, v, inplace=False) and use the result")
    a = to_array(a, "put")
    flat = fnp.ravel(a)
    n = flat.shape[0]
    ind = fnp.ravel(fnp.asarray(ind))
    if ind.dtype.kind not in "iu":
        raise TypeError(f"put: ind must be integers, got {ind.dtype}")
    vals = fnp.ravel(fnp.asarray(v)).astype(a.dtype)
    if ind.shape[0] == 0 or vals.shape[0] == 0:
        return a
    if vals.shape[0] != ind.shape[0]:
        vals = resize(vals, ind.shape[0])
    if mode == "clip":
        ind = fnp.clip(ind, 0, n - 1)
        drop = "promise_in_bounds"
    elif mode == "wrap":
        ind = fnp.remainder(ind, n)
        drop = "promise_in_bounds"
    elif mode is None:
        # JAX clips; fnx raises for concrete indices out of range (NumPy's default) and
        # clips traced ones, as JAX
        if not isinstance(ind, Tracer):
            iv = np.asarray(ind)
            if ((iv < -n) | (iv >= n)).any():
                raise IndexError(f"put: an index is out of bounds for size {n}; pass "
                                 "mode='clip' or 'wrap' (or 'fill' to drop it)")
        ind = fnp.clip(fnp.where(ind < 0, ind + n, ind), 0, n - 1)
        drop = "promise_in_bounds"
    elif mode in ("fill", "drop"):
        drop = "drop"
    elif mode == "raise":
        if isinstance(ind, Tracer):
            raise ConcretizationError("put: mode='raise' needs concrete indices; under jit "
                                      "use mode='clip', 'wrap' or None")
        iv = np.asarray(ind)
        if ((iv < -n) | (iv >= n)).any():
            raise IndexError(f"put: an index is out of bounds for size {n}")
        drop = "promise_in_bounds"
    else:
        raise ValueError(f"put: unknown mode {mode!r}; use None, 'fill', 'clip', 'wrap' or "
                         "'raise'")
    out = flat.at[ind].set(vals, mode=drop)
    return fnp.reshape(out, a.shape)


# --- products and comparisons --------------------------------------------------------------------

def array_equiv(a1, a2):
    """Whether ``a1`` and ``a2`` broadcast together and are equal everywhere."""
    fnp = _fnp()
    a1, a2 = to_array(a1, "array_equiv"), to_array(a2, "array_equiv")
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return fnp.asarray(False)
    return fnp.all(a1 == a2)


def matvec(x1, x2, /):
    """Matrix-vector products: ``x1`` (..., m, n) with ``x2`` (..., n) gives (..., m)."""
    fnp = _fnp()
    a, b = to_array(x1, "matvec"), to_array(x2, "matvec")
    if a.ndim < 2 or b.ndim < 1:
        raise ShapeError(f"matvec: x1 must be (..., m, n) and x2 (..., n), got {a.shape} and "
                         f"{b.shape}")
    return fnp.matmul(a, b[..., None])[..., 0]


def vecmat(x1, x2, /):
    """Vector-matrix products ``conj(x1) @ x2``: (..., n) with (..., n, m) gives (..., m)."""
    fnp = _fnp()
    a, b = to_array(x1, "vecmat"), to_array(x2, "vecmat")
    if a.ndim < 1 or b.ndim < 2:
        raise ShapeError(f"vecmat: x1 must be (..., n) and x2 (..., n, m), got {a.shape} and "
                         f"{b.shape}")
    return fnp.matmul(fnp.conj(a)[..., None, :], b)[..., 0, :]


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """NumPy's contraction path and its report for operands of these shapes (only the
    shapes are read; fnx's einsum picks its own greedy order)."""
    shaped = [np.broadcast_to(np.zeros((), np.float32), np.shape(o) if not isinstance(
        o, Array) else o.shape) for o in operands]
    if optimize in ("auto", True):
        optimize = "optimal" if len(operands) <= 4 else "greedy"
    path, report = np.einsum_path(subscripts, *shaped, optimize=optimize)
    return [tuple(p) for p in path if p != "einsum_path"], report


# --- histograms ---------------------------------------------------------------------------------

def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The D-dimensional histogram of ``sample`` (N, D): ``(counts, [edges per dim])``;
    the last bin of each dim includes its right edge. Works under jit (bin counts static)."""
    from .statistics import histogram_bin_edges
    fnp = _fnp()
    s = _inexact("histogramdd", sample)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2:
        raise ShapeError(f"histogramdd: sample must be (N, D), got shape {s.shape}")
    n, D = s.shape
    if isinstance(bins, (int, np.integer)) or (np.ndim(bins) == 0 and not isinstance(bins, list)):
        bins = [bins] * D
    if len(bins) != D:
        raise ValueError(f"histogramdd: {len(bins)} bin specs for {D} dims")
    ranges = [None] * D if range is None else list(range)
    edges = [histogram_bin_edges(s[:, d], bins[d], ranges[d]) for d in builtins.range(D)]
    idx = []
    for d in builtins.range(D):
        e = edges[d].astype(s.dtype)
        nb = e.shape[0] - 1
        i = fnp.searchsorted(e, s[:, d], side="right") - 1
        i = fnp.where(s[:, d] == e[-1], nb - 1, i)     # the last edge belongs to the last bin
        outside = (i < 0) | (i >= nb)
        idx.append((i, nb, outside))
    sizes = [nb for _, nb, _ in idx]
    flat = fnp.zeros((n,), np.int32)
    bad = fnp.zeros((n,), bool)
    for i, nb, outside in idx:
        flat = flat * nb + fnp.clip(i, 0, nb - 1).astype(np.int32)
        bad = bad | outside
    total = math.prod(sizes)
    w = fnp.ones((n,), dtypes.default_int()) if weights is None else fnp.ravel(
        fnp.asarray(weights))
    w = fnp.where(bad, fnp.zeros_like(w), w)
    counts = fnp.zeros((total,), w.dtype).at[flat].add(w)
    counts = fnp.reshape(counts, tuple(sizes))
    if density:
        counts = counts.astype(s.dtype)
        counts = counts / fnp.sum(counts)
        for d in builtins.range(D):
            shape = [1] * D
            shape[d] = sizes[d]
            counts = counts / fnp.reshape(fnp.diff(edges[d]), tuple(shape))
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """``(counts, x_edges, y_edges)`` of the points ``(x, y)``."""
    fnp = _fnp()
    x, y = promote("histogram2d", x, y, to_inexact=True)
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    b = [bins, bins] if nb not in (1, 2) else bins   # one array of edges serves both
    counts, (ex, ey) = histogramdd(fnp.stack([fnp.ravel(x), fnp.ravel(y)], axis=1), b, range,
                                   weights, density)
    return counts, ex, ey


# --- I/O, printing -----------------------------------------------------------------------------

def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """An Array from the bytes of ``buffer`` (NumPy's frombuffer, then fnx's dtype rules)."""
    from .creation import asarray
    return asarray(np.frombuffer(buffer, dtype=dtypes.canonicalize(dtype) if dtype is not float
                                 else np.float64, count=count, offset=offset),
                   dtype=dtypes.canonical(dtype) if dtype is not float else None)


def fromiter(iterable, dtype, count=-1, *, like=None):
    """An Array from an iterable (read eagerly; not traceable)."""
    from .creation import asarray
    return asarray(np.fromiter(iterable, dtype=np.dtype(dtype), count=count),
                   dtype=dtypes.canonical(dtype))


def fromstring(string, dtype=float, count=-1, *, sep):
    """An Array from a text string of numbers separated by ``sep``."""
    from .creation import asarray
    return asarray(np.fromstring(string, dtype=np.float64 if dtype is float else np.dtype(dtype),
                                 count=count, sep=sep),
                   dtype=None if dtype is float else dtypes.canonical(dtype))


def fromfile(file, dtype=float, count=-1, sep="", offset=0):
    """An Array from a binary or text file (NumPy's fromfile, read eagerly; JAX leaves
    this out as impure, fnx reads the file at call time and is not traceable)."""
    from .creation import asarray
    return asarray(np.fromfile(file, dtype=np.float64 if dtype is float else np.dtype(dtype),
                               count=count, sep=sep, offset=offset),
                   dtype=None if dtype is float else dtypes.canonical(dtype))


def load(file, *args, **kwargs):
    """``numpy.load``, with arrays returned as fnx Arrays (``.npz`` archives stay lazy
    NpzFile objects, as NumPy's). NumPy writes bfloat16 as two-byte void (``|V2``); as
    JAX, such an array is read back as bfloat16."""
    from .creation import asarray
    out = np.load(file, *args, **kwargs)
    if not isinstance(out, np.ndarray):
        return out
    if out.dtype == np.dtype("V2") and dtypes.bfloat16 is not None:
        out = out.view(dtypes.bfloat16)
    return asarray(out)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions


def gcd(x1, x2):
    """Greatest common divisor of integers, elementwise (Euclid's algorithm in a
    ``while_loop``, so it traces); ``gcd(0, 0)`` is 0."""
    fnp = _fnp()
    a, b = promote("gcd", x1, x2)
    if a.dtype.kind not in "iu" and a.dtype.kind != "b":
        raise TypeError(f"gcd: arguments must be integers, got {a.dtype}")
    a, b = fnp.broadcast_arrays(fnp.abs(a), fnp.abs(b))

    def cond(c):
        return fnp.any(c[1] != 0)

    def body(c):
        x, y = c
        nz = y != 0
        safe = fnp.where(nz, y, fnp.ones_like(y))
        return fnp.where(nz, y, x), fnp.where(nz, fnp.remainder(x, safe), fnp.zeros_like(y))
    return lax.while_loop(cond, body, (a, b))[0]


def lcm(x1, x2):
    """Least common multiple of integers, elementwise; 0 if either is 0."""
    fnp = _fnp()
    a, b = promote("lcm", x1, x2)
    g = gcd(a, b)
    a, b = fnp.broadcast_arrays(fnp.abs(a), fnp.abs(b))
    safe = fnp.where(g == 0, fnp.ones_like(g), g)
    return fnp.where(g == 0, fnp.zeros_like(g), a * fnp.floor_divide(b, safe))
