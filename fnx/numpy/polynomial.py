"""NumPy's legacy polynomial functions (``poly*``, ``roots``, ``vander``,
``trim_zeros``), coefficients highest power first, with JAX's dtypes: results are
inexact (the default float for integer input) except ``polyadd``/``polysub``/
``polyval``/``vander`` of integers, which stay integers."""
from __future__ import annotations

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Tracer, to_array
from ..errors import ConcretizationError, ShapeError
from .util import concrete_int, promote

__all__ = ["poly", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint",
           "polyval", "polyfit", "roots", "vander", "trim_zeros"]


def _fnp():
    from .. import numpy as fnp
    return fnp


def _coeffs(name, p, inexact=False):
    (p,) = promote(name, p, to_inexact=inexact)
    if p.ndim != 1:
        raise ShapeError(f"{name}: coefficients must be 1-D, got shape {p.shape}")
    return p


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with these roots (1-D), or the
    characteristic polynomial of a square matrix (2-D, complex, as JAX)."""
    fnp = _fnp()
    (a,) = promote("poly", seq_of_zeros, to_inexact=True)
    if a.ndim == 2:
        if a.shape[0] != a.shape[1]:
            raise ShapeError(f"poly: a 2-D input must be square, got shape {a.shape}")
        a = fnp.linalg.eigvals(a)
    elif a.ndim != 1:
        raise ShapeError(f"poly: input must be 1-D (roots) or 2-D (a square matrix), got "
                         f"shape {a.shape}")
    c = fnp.ones((1,), a.dtype)
    for k in range(a.shape[0]):
        c = fnp.convolve(c, fnp.stack([fnp.ones((), a.dtype), -a[k]]), mode="full")
    return c


def _pad_front(a, n):
    return lax.pad(a, lax.convert_element_type(0, a.dtype), [(n - a.shape[0], 0, 0)])


def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded at the front)."""
    a1, a2 = promote("polyadd", a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


def polysub(a1, a2):
    """The difference of two polynomials."""
    a1, a2 = promote("polysub", a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) - _pad_front(a2, n)


def _trim_leading(name, p):
    if isinstance(p, Tracer):
        raise ConcretizationError(f"{name}: trim_leading_zeros=True sets the output shape "
                                  "from the values, so it needs concrete coefficients")
    nz = np.flatnonzero(np.asarray(p))
    return p[int(nz[0]):] if nz.size else p[-1:]


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials (a full convolution)."""
    fnp = _fnp()
    a1, a2 = promote("polymul", a1, a2, to_inexact=True)
    a1, a2 = fnp.atleast_1d(a1), fnp.atleast_1d(a2)
    if trim_leading_zeros:
        a1, a2 = _trim_leading("polymul", a1), _trim_leading("polymul", a2)
    if a1.shape[0] == 0 or a2.shape[0] == 0:
        return fnp.zeros((1,), a1.dtype)
    return fnp.convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros=False):
    """``(quotient, remainder)`` of polynomial long division (the remainder keeps ``u``'s
    length, as JAX; ``trim_leading_zeros`` drops its leading zeros, eagerly)."""
    fnp = _fnp()
    u, v = promote("polydiv", u, v, to_inexact=True)
    u, v = _coeffs("polydiv", u), _coeffs("polydiv", v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    q = fnp.zeros((max(m - n + 1, 1),), u.dtype)
    r = u
    for k in range(0, m - n + 1):
        d = scale * r[k]
        q = q.at[k].set(d)
        r = r.at[k:k + n + 1].add(-d * v)
    if trim_leading_zeros:
        r = _trim_leading("polydiv", r)
    return q, r


def polyder(p, m=1):
    """The ``m``-th derivative's coefficients."""
    fnp = _fnp()
    p = _coeffs("polyder", p, inexact=True)
    m = concrete_int("polyder", m, "m")
    if m < 0:
        raise ValueError(f"polyder: the order m must be non-negative, got {m}")
    for _ in range(m):
        n = p.shape[0]
        if n <= 1:
            return fnp.zeros((0,), p.dtype) if n == 0 else fnp.zeros((0,), p.dtype)
        p = p[:-1] * fnp.arange(n - 1, 0, -1, dtype=p.dtype)
    return p


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative's coefficients, with integration constants ``k`` (a
    scalar or ``m`` values, the first for the first integration)."""
    fnp = _fnp()
    p = _coeffs("polyint", p, inexact=True)
    m = concrete_int("polyint", m, "m")
    if m < 0:
        raise ValueError(f"polyint: the order m must be non-negative, got {m}")
    if m == 0:
        return p
    k = fnp.zeros((m,), p.dtype) if k is None else fnp.ravel(fnp.asarray(k, dtype=p.dtype))
    if k.shape[0] == 1 and m > 1:
        k = fnp.broadcast_to(k, (m,))
    if k.shape[0] != m:
        raise ValueError(f"polyint: k must have m = {m} values, got {k.shape[0]}")
    for i in range(m):
        n = p.shape[0]
        p = fnp.concatenate([p / fnp.arange(n, 0, -1, dtype=p.dtype), k[i:i + 1]])
    return p


def polyval(p, x, *, unroll=16):
    """The polynomial ``p`` at ``x`` by Horner's rule (``unroll`` is accepted for JAX's
    signature; the loop is unrolled at trace time). The coefficients run along ``p``'s
    first axis, highest power first; further axes hold one polynomial each (as NumPy and
    JAX), broadcast against ``x``."""
    fnp = _fnp()
    p, x = promote("polyval", p, x)
    if p.ndim == 0:
        raise ShapeError("polyval: the coefficients need an axis (highest power first), got "
                         f"a scalar of {p.dtype}; pass [c] for a constant polynomial")
    y = fnp.zeros_like(x)
    for k in range(p.shape[0]):
        y = y * x + p[k]
    return y


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D ``x``: columns ``x**(N-1), ..., x, 1`` (reversed with
    ``increasing``)."""
    fnp = _fnp()
    x = to_array(x, "vander")
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be 1-D, got shape {x.shape}")
    N = x.shape[0] if N is None else concrete_int("vander", N, "N")
    if N < 0:
        raise ValueError(f"vander: N must be non-negative, got {N}")
    (x,) = promote("vander", x)
    powers = np.arange(N) if increasing else np.arange(N - 1, -1, -1)
    cols = [fnp.ones_like(x) if int(e) == 0 else x ** int(e) for e in powers]
    return fnp.stack(cols, axis=1) if cols else fnp.zeros((x.shape[0], 0), x.dtype)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares fit of a degree-``deg`` polynomial (coefficients highest first);
    ``y`` may be 2-D (one fit per column). ``full`` also returns (residuals, rank,
    singular values, rcond); ``cov`` the scaled covariance of the coefficients."""
    fnp = _fnp()
    x, y = promote("polyfit", x, y, to_inexact=True)
    deg = concrete_int("polyfit", deg, "deg")
    if deg < 0:
        raise ValueError(f"polyfit: deg must be non-negative, got {deg}")
    if x.ndim != 1:
        raise ShapeError(f"polyfit: x must be 1-D, got shape {x.shape}")
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ShapeError(f"polyfit: y must be 1-D or 2-D with x's length {x.shape[0]}, got "
                         f"shape {y.shape}")
    order = deg + 1
    rcond = x.shape[0] * float(np.finfo(x.dtype).eps) if rcond is None else rcond
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        w = fnp.asarray(w, dtype=x.dtype)
        if w.ndim != 1 or w.shape[0] != x.shape[0]:
            raise ShapeError(f"polyfit: w must be 1-D of x's length, got shape {w.shape}")
        lhs = lhs * w[:, None]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, None])
    scale = fnp.sqrt(fnp.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = fnp.linalg.lstsq(lhs, rhs, rcond=rcond)
    c = (c.T / scale).T
    if full:
        return c, resids, rank, s, fnp.asarray(rcond, dtype=x.dtype)
    if cov:
        Vbase = fnp.linalg.inv(lhs.T @ lhs)
        Vbase = Vbase / fnp.outer(scale, scale)
        if cov == "unscaled":
            fac = 1.0
        else:
            if x.shape[0] <= order:
                raise ValueError("polyfit: the number of data points must exceed order to "
                                 "scale the covariance matrix")
            fac = resids / (x.shape[0] - order)
        if y.ndim == 1:
            return c, Vbase * fac
        return c, Vbase[:, :, None] * fac
    return c


def roots(p, *, strip_zeros=True):
    """The roots of polynomial ``p`` (complex), the eigenvalues of its companion matrix.
    ``strip_zeros`` drops leading zeros (eagerly; under jit pass ``strip_zeros=False``
    and leading zeros give NaN roots, as JAX)."""
    fnp = _fnp()
    p = _coeffs("roots", p, inexact=True)
    trailing = 0
    if strip_zeros:
        if isinstance(p, Tracer):
            raise ConcretizationError("roots: strip_zeros=True reads the coefficients to drop "
                                      "leading zeros; under jit pass strip_zeros=False")
        v = np.asarray(p)
        nz = np.flatnonzero(v)
        if nz.size == 0:
            return fnp.zeros((0,), dtypes.promote_types(p.dtype, np.complex64))
        trailing = v.shape[0] - 1 - int(nz[-1])
        p = p[int(nz[0]):v.shape[0] - trailing]
    n = p.shape[0] - 1
    ctype = dtypes.promote_types(p.dtype, np.complex64)
    if n < 1:
        out = fnp.zeros((0,), ctype)
    else:
        companion = fnp.zeros((n, n), p.dtype)
        companion = companion.at[0, :].set(-p[1:] / p[0])
        if n > 1:
            companion = companion.at[fnp.arange(1, n), fnp.arange(0, n - 1)].set(1)
        out = fnp.linalg.eigvals(companion).astype(ctype)
    if trailing:
        out = fnp.concatenate([out, fnp.zeros((trailing,), ctype)])
    return out


def trim_zeros(filt, trim="fb", axis=None):
    """``filt`` without its leading ('f') and/or trailing ('b') zeros (eager: the result's
    shape depends on the values). ``axis``: trim along these axes, where a slice
    counts as zero when all its entries are."""
    fnp = _fnp()
    a = to_array(filt, "trim_zeros")
    if isinstance(a, Tracer):
        raise ConcretizationError("trim_zeros: the result's shape depends on the values, so "
                                  "it needs a concrete array (not under jit)")
    trim = trim.lower()
    if any(c not in "fb" for c in trim):
        raise ValueError(f"trim_zeros: trim must be a combination of 'f' and 'b', got "
                         f"{trim!r}")
    v = np.asarray(a)
    axes = range(v.ndim) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    index = [slice(None)] * v.ndim
    for ax in axes:
        ax = ax % max(v.ndim, 1)
        other = tuple(d for d in range(v.ndim) if d != ax)
        nz = np.flatnonzero(np.any(v != 0, axis=other) if other else v != 0)
        if nz.size == 0:
            index[ax] = slice(0, 0)
            continue
        start = int(nz[0]) if "f" in trim else 0
        stop = int(nz[-1]) + 1 if "b" in trim else v.shape[ax]
        index[ax] = slice(start, stop)
    return a[tuple(index)]
