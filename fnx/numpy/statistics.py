"""Statistics beyond the reductions: quantiles, NaN-aware reductions, covariance,
histograms and counting, interpolation, 1-D convolution.

Quantiles sort and gather, so they work under ``jit`` (the NaN-ignoring ones
too: the number of valid values per slice is a traced count). Results are
floating (integers become float32, 64-bit integers float64), as in JAX.
"""
from __future__ import annotations

import math

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..core.numpy_errstate import quiet_call
from ..errors import ConcretizationError, ShapeError
from .util import normalize_axes, promote

__all__ = ["median", "quantile", "percentile", "nanmedian", "nanquantile", "nanpercentile",
           "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd",
           "nanargmax", "nanargmin", "nancumsum", "nancumprod", "cov", "corrcoef",
           "histogram", "histogram_bin_edges", "bincount", "digitize", "interp",
           "convolve", "correlate"]


def _full(shape, value, dtype):
    return lax.broadcast_in_dim(Array._wrap(np.array(value, dtype)[()]), tuple(shape), ())


def _inexact(name, a):
    (a,) = promote(name, a, to_inexact=True)
    return a


# --- quantiles ---------------------------------------------------------------------------------

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf")


def _to_end(name, a, axis):
    """``a`` with the reduced axes merged into one last axis; plus the kept shapes."""
    axes = normalize_axes(name, axis, a.ndim)
    keep = [d for d in range(a.ndim) if d not in axes]
    rest = tuple(a.shape[d] for d in keep)
    n = math.prod(a.shape[d] for d in axes)
    x = lax.reshape(lax.transpose(a, keep + list(axes)), rest + (n,))
    keep_shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape))
    return x, rest, n, keep_shape


def _q_array(name, q, scale):
    """``q`` (divided by ``scale``) as a float array, checked to lie in [0, 1] when concrete."""
    if not isinstance(q, Array):
        python = isinstance(q, (int, float, list, tuple))  # Python numbers: default float
        q = np.asarray(q)
        if q.dtype.kind not in "fiub":
            raise TypeError(f"{name}: q must be real numbers, got {q.dtype}")
        q = to_array(q.astype(dtypes.default_float()) if python or q.dtype.kind != "f" else q)
    if q.dtype.kind not in "f":
        (q,) = promote(name, q, to_inexact=True)
    if scale != 1:
        q = lax.div(q, scale)
    if not isinstance(q, Tracer):
        v = np.asarray(q)
        if np.any(np.isnan(v)) or np.any(v < 0) or np.any(v > 1):
            rng = "[0, 100]" if scale == 100 else "[0, 1]"
            raise ValueError(f"{name}: q must be in the range {rng}")
    return q


def _inverted_cdf(name, a, q, axis, weights, keepdims, ignore_nan, scale):
    """``method='inverted_cdf'``, optionally weighted (NumPy's definition): the smallest
    sorted value whose cumulative weight reaches ``q`` of the total."""
    from . import elementwise as ew
    from ._indexing import take_along_axis
    from .reductions import sum as sum_
    a = to_array(a, name)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}: a must be an array of real numbers, got {a.dtype}")
    a = _inexact(name, a)
    q = _q_array(name, q, scale)
    qshape = q.shape
    if weights is None:
        w = _full(a.shape, 1, a.dtype)
    else:
        w = lax.convert_element_type(to_array(weights, name), a.dtype)
        if w.shape != a.shape:
            if axis is None or not isinstance(axis, (int, np.integer)) or w.ndim != 1 or \
                    w.shape[0] != a.shape[axis]:
                raise ShapeError(f"{name}: weights of shape {w.shape} must have a's shape "
                                 f"{a.shape}, or be 1-D along an int axis")
            ax = normalize_axes(name, axis, a.ndim)[0]
            w = lax.broadcast_in_dim(w, a.shape, (ax,))
        if not isinstance(w, Tracer) and bool(np.any(np.asarray(w) < 0)):
            raise ValueError(f"{name}: weights must be non-negative")
    x, rest, n, keep_shape = _to_end(name, a, axis)
    wx = _to_end(name, w, axis)[0]
    out_rest = keep_shape if keepdims else rest
    nq = q.size
    if n == 0:
        return _full(qshape + out_rest, np.nan, a.dtype)
    x, wx = lax.sort((x, wx), x.ndim - 1, num_keys=1)
    nan = ew.isnan(x)
    if ignore_nan:
        wx = ew.where(nan, lax.convert_element_type(0, wx.dtype), wx)
    cdf = lax.cumsum(wx, x.ndim - 1)
    total = lax.slice_in_dim(cdf, n - 1, n, 1, x.ndim - 1)
    cdf = ew.true_divide(cdf, total)
    qf = lax.convert_element_type(lax.reshape(q, (nq,)), cdf.dtype)
    # index of the first cdf >= q: the count of cdf values below q, where leading
    # zero-weight values count as below (q = 0 picks the first value of positive weight)
    c = lax.expand_dims(cdf, (x.ndim - 1,))
    below = ew.logical_or(ew.less(c, lax.reshape(qf, (1,) * len(rest) + (nq, 1))),
                          ew.equal(c, 0))
    idx = sum_(below, axis=-1, dtype=dtypes.int32)
    idx = ew.minimum(idx, n - 1)
    res = take_along_axis(x, idx, axis=-1)
    if ignore_nan:
        res = ew.where(ew.equal(total, 0), lax.convert_element_type(np.nan, res.dtype), res)
    else:
        last = lax.slice_in_dim(x, n - 1, n, 1, x.ndim - 1)
        res = ew.where(ew.isnan(last), last, res)
    res = lax.transpose(res, (len(rest),) + tuple(range(len(rest))))
    return lax.reshape(res, qshape + out_rest)


def _quantile(name, a, q, axis, method, keepdims, ignore_nan, scale=1, weights=None):
    from . import elementwise as ew
    from ._indexing import take_along_axis
    from .reductions import sum as sum_
    if method == "inverted_cdf":
        return _inverted_cdf(name, a, q, axis, weights, keepdims, ignore_nan, scale)
    if weights is not None:
        raise ValueError(f"{name}: only method='inverted_cdf' supports weights (as NumPy "
                         f"and JAX), got method={method!r}")
    if method not in _METHODS and method != "_median":
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    a = to_array(a, name)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}: a must be an array of real numbers, got {a.dtype}")
    a = _inexact(name, a)
    q = _q_array(name, q, scale)
    qshape = q.shape
    x, rest, n, keep_shape = _to_end(name, a, axis)
    out_rest = keep_shape if keepdims else rest
    nq = q.size
    if n == 0:
        return _full(qshape + out_rest, np.nan, a.dtype)
    x = lax.sort(x, x.ndim - 1)
    qf = lax.reshape(q, (nq,))
    if ignore_nan:  # NaNs sort last: only the first `valid` values count
        valid = sum_(ew.logical_not(ew.isnan(x)), axis=-1, dtype=dtypes.int32, keepdims=True)
        top = lax.sub(lax.convert_element_type(valid, q.dtype), 1.0)      # (*rest, 1)
        vidx = ew.multiply(lax.reshape(qf, (1,) * len(rest) + (nq,)), top)  # (*rest, nq)
    else:
        vidx = lax.reshape(lax.mul(qf, float(n - 1)), (1,) * len(rest) + (nq,))
    lo_f = ew.floor(vidx)
    if method == "lower":
        lo_f = hi_f = lo_f
    elif method == "higher":
        lo_f = hi_f = ew.ceil(vidx)
    elif method == "nearest":
        lo_f = hi_f = ew.rint(vidx)
    elif method == "_median":
        hi_f = ew.ceil(vidx)
    else:
        hi_f = ew.add(lo_f, 1.0)
    top_i = lax.sub(valid, 1) if ignore_nan else n - 1   # the last valid position

    def index(f):
        i = lax.convert_element_type(ew.maximum(f, 0.0), dtypes.int32)
        i = ew.maximum(ew.minimum(i, top_i), 0)
        if i.shape != rest + (nq,):
            i = lax.broadcast_in_dim(i, rest + (nq,), tuple(range(len(rest) + 1)))
        return i
    lo_i, hi_i = index(lo_f), index(hi_f)
    lo = take_along_axis(x, lo_i, axis=-1)  # indices past the end clamp to the last
    if method in ("lower", "higher", "nearest"):
        res = lo
    else:
        hi = take_along_axis(x, hi_i, axis=-1)
        if method == "_median":
            res = ew.multiply(ew.add(lo, hi), 0.5)
        else:
            if method == "midpoint":
                gamma = ew.where(ew.equal(vidx, lo_f), 0.0, 0.5)
            else:
                gamma = ew.subtract(vidx, lo_f)
            gamma = lax.convert_element_type(gamma, a.dtype)
            res = _lerp(lo, hi, gamma)
    if not ignore_nan:  # NumPy: any NaN in a slice makes its quantiles NaN
        last = lax.slice_in_dim(x, n - 1, n, 1, x.ndim - 1)
        res = ew.where(ew.isnan(last), last, res)
    res = lax.transpose(res, (len(rest),) + tuple(range(len(rest))))
    return lax.reshape(res, qshape + out_rest)


def _lerp(a, b, t):
    """NumPy's ``_lerp``: ``a + (b-a)*t``, computed from ``b`` when ``t >= 0.5``."""
    from . import elementwise as ew
    d = ew.subtract(b, a)
    return ew.where(ew.greater_equal(t, 0.5), ew.subtract(b, ew.multiply(d, ew.subtract(1.0, t))),
                    ew.add(a, ew.multiply(d, t)))


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """The ``q``-th quantiles along ``axis`` (q in [0, 1]; q's dims lead the result)."""
    _no_out("quantile", out)
    return _quantile("quantile", a, q, axis, interpolation or method, keepdims, False,
                     weights=weights)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    """The ``q``-th percentiles along ``axis`` (q in [0, 100])."""
    _no_out("percentile", out)
    return _quantile("percentile", a, q, axis, interpolation or method, keepdims, False, 100,
                     weights=weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median along ``axis`` (mean of the two middle values for even counts)."""
    _no_out("median", out)
    return _quantile("median", a, 0.5, axis, "_median", keepdims, False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """``quantile`` ignoring NaNs (all-NaN slices give NaN)."""
    _no_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, interpolation or method, keepdims, True,
                     weights=weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    """``percentile`` ignoring NaNs (all-NaN slices give NaN)."""
    _no_out("nanpercentile", out)
    return _quantile("nanpercentile", a, q, axis, interpolation or method, keepdims, True, 100,
                     weights=weights)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``median`` ignoring NaNs (all-NaN slices give NaN)."""
    _no_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "_median", keepdims, True)


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"{name}: fnx arrays are immutable; out= is not supported")


# --- NaN-aware reductions ----------------------------------------------------------------------

def _nan_replaced(name, a, value, axis=None):
    """``(a, isnan(a))`` with NaNs replaced by ``value`` (non-floats: unchanged, None);
    ``axis`` is checked against ``a`` (so an error names ``name``, not the reduction)."""
    from . import elementwise as ew
    (a,) = promote(name, a)
    if axis is not None:
        normalize_axes(name, axis, a.ndim)
    if not dtypes.is_inexact(a.dtype):   # bfloat16's NumPy kind is "V"
        return a, None
    nan = ew.isnan(a)
    if a.dtype.kind == "c":
        nan = ew.logical_or(ew.isnan(ew.real(a)), ew.isnan(ew.imag(a)))
    return ew.where(nan, lax.convert_element_type(value, a.dtype), a), nan


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``sum`` treating NaNs as zero."""
    from .reductions import sum as sum_
    _no_out("nansum", out)
    a, _ = _nan_replaced("nansum", a, 0, axis)
    return sum_(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """``prod`` treating NaNs as one."""
    from .reductions import prod
    _no_out("nanprod", out)
    a, _ = _nan_replaced("nanprod", a, 1, axis)
    return prod(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


def _nan_extreme(name, reducer, fill, a, axis, keepdims, initial, where):
    from . import elementwise as ew
    from .reductions import all as all_
    a2, nan = _nan_replaced(name, a, fill, axis)
    res = reducer(a2, axis=axis, keepdims=keepdims, initial=initial, where=where)
    if nan is None:
        return res
    if where is not None:
        from .reductions import broadcast_where
        nan = ew.logical_or(nan, ew.logical_not(broadcast_where(where, nan.shape)))
    all_nan = all_(nan, axis=axis, keepdims=keepdims)
    if initial is not None:
        return res
    return ew.where(all_nan, lax.convert_element_type(np.nan, res.dtype), res)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``max`` ignoring NaNs (all-NaN slices give NaN)."""
    from .reductions import max as max_
    _no_out("nanmax", out)
    return _nan_extreme("nanmax", max_, -np.inf, a, axis, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """``min`` ignoring NaNs (all-NaN slices give NaN)."""
    from .reductions import min as min_
    _no_out("nanmin", out)
    return _nan_extreme("nanmin", min_, np.inf, a, axis, keepdims, initial, where)


def _nan_arg(name, lax_name, fill, a, axis, keepdims):
    from . import elementwise as ew
    from . import reductions as rd
    a2, nan = _nan_replaced(name, a, fill, axis)
    res = getattr(rd, lax_name)(a2, axis=axis, keepdims=keepdims)
    if nan is None:
        return res
    return ew.where(rd.all(nan, axis=axis, keepdims=keepdims), -1, res)


def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """``argmax`` ignoring NaNs; an all-NaN slice gives -1 (as JAX; NumPy raises)."""
    _no_out("nanargmax", out)
    return _nan_arg("nanargmax", "argmax", -np.inf, a, axis, keepdims)


def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """``argmin`` ignoring NaNs; an all-NaN slice gives -1 (as JAX; NumPy raises)."""
    _no_out("nanargmin", out)
    return _nan_arg("nanargmin", "argmin", np.inf, a, axis, keepdims)


def _valid_count(a, nan, axis, keepdims, where, dtype):
    from . import elementwise as ew
    from .reductions import broadcast_where, sum as sum_
    ok = ew.logical_not(nan) if nan is not None else _full(a.shape, True, np.bool_)
    if where is not None:
        ok = ew.logical_and(ok, broadcast_where(where, a.shape))
    return sum_(ok, axis=axis, keepdims=keepdims, dtype=dtype), ok


def _mean_dtype(a, dtype):
    if dtype is not None:
        return dtypes.canonical(dtype, "nanmean")
    return a.dtype if dtypes.is_inexact(a.dtype) else _inexact("nanmean", a).dtype


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """``mean`` of the non-NaN values (all-NaN slices give NaN)."""
    from . import elementwise as ew
    from .reductions import sum as sum_
    _no_out("nanmean", out)
    (a,) = promote("nanmean", a)
    dt = _mean_dtype(a, dtype)
    a2, nan = _nan_replaced("nanmean", a, 0, axis)
    cnt, _ = _valid_count(a, nan, axis, keepdims, where, dt if dt.kind != "c" else
                          np.empty(0, dt).real.dtype)
    total = sum_(a2, axis=axis, dtype=dt, keepdims=keepdims, where=where)
    # the count in the total's dtype (complex: a real divisor): no implicit promotion, which
    # jax_numpy_dtype_promotion='strict' refuses
    return ew.true_divide(total, lax.convert_element_type(cnt, total.dtype))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None, mean=None):
    """``var`` of the non-NaN values (NaN where fewer than ``ddof`` + 1 values remain);
    ``mean``: a precomputed mean with the reduced axes kept. float16/bfloat16 are
    computed in float32 and rounded once (JAX's)."""
    from . import elementwise as ew
    from .reductions import _var_dtypes, sum as sum_
    _no_out("nanvar", out)
    if correction is not None:
        ddof = correction
    (a,) = promote("nanvar", a)
    if axis is not None:
        normalize_axes("nanvar", axis, a.ndim)
    if dtype is not None:
        dtype = dtypes.canonical(dtype, "nanvar")
    dt, result = _var_dtypes(a.dtype, dtype)
    a = lax.convert_element_type(a, dt)
    m = nanmean(a, axis=axis, keepdims=True, where=where) if mean is None else \
        lax.convert_element_type(to_array(mean, "nanvar"), dt)
    _, nan = _nan_replaced("nanvar", a, 0, axis)
    real_dt = np.empty(0, dt).real.dtype
    cnt, ok = _valid_count(a, nan, axis, keepdims, where, real_dt)
    d = ew.where(ok, ew.subtract(a, m), lax.convert_element_type(0, dt))
    sq = ew.real(ew.multiply(d, ew.conj(d))) if dt.kind == "c" else ew.square(d)
    dof = ew.subtract(cnt, ddof)
    res = ew.true_divide(sum_(sq, axis=axis, keepdims=keepdims), dof)
    res = ew.where(ew.less_equal(dof, 0), lax.convert_element_type(np.nan, res.dtype), res)
    return lax.convert_element_type(res, result) if res.dtype != result else res


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None, mean=None):
    """``std`` of the non-NaN values."""
    from .elementwise import sqrt
    if axis is not None:
        normalize_axes("nanstd", axis, to_array(a).ndim)
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction,
                       mean=mean))


def nancumsum(a, axis=None, dtype=None, out=None):
    """``cumsum`` treating NaNs as zero."""
    from .reductions import cumsum
    _no_out("nancumsum", out)
    return cumsum(_nan_replaced("nancumsum", a, 0, axis)[0], axis=axis, dtype=dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """``cumprod`` treating NaNs as one."""
    from .reductions import cumprod
    _no_out("nancumprod", out)
    return cumprod(_nan_replaced("nancumprod", a, 1, axis)[0], axis=axis, dtype=dtype)


# --- covariance ----------------------------------------------------------------------------

def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """Covariance matrix of the variables in the rows (``rowvar``) or columns of ``m``."""
    from . import elementwise as ew
    from .manipulation import atleast_2d, concatenate
    from .reductions import sum as sum_
    if ddof is not None and ddof != int(ddof):
        raise ValueError("cov: ddof must be an integer")
    m = to_array(m, "cov")
    if m.ndim > 2:
        raise ShapeError(f"cov: m has more than 2 dimensions (shape {m.shape})")
    args = [m] if y is None else [m, y]
    arrs = promote("cov", *args, to_inexact=True)
    if dtype is not None:
        dtype = dtypes.canonical(dtype, "cov")
        if not dtypes.is_inexact(dtype):
            raise ValueError(f"cov: dtype must be a subclass of float or complex; got "
                             f"dtype={dtype}")
        arrs = [lax.convert_element_type(x, dtype) for x in arrs]
    # rowvar=False transposes every 2-D m, a (1, n) one too (NumPy 2.2 and JAX), but a
    # (1, n) y stays (both keep the old rule for y)
    X = atleast_2d(arrs[0])
    if not rowvar and arrs[0].ndim == 2:
        X = lax.transpose(X, (1, 0))
    if y is not None:
        Y = atleast_2d(arrs[1])
        if Y.ndim > 2:
            raise ShapeError(f"cov: y has more than 2 dimensions (shape {Y.shape})")
        if not rowvar and Y.shape[0] != 1:
            Y = lax.transpose(Y, (1, 0))
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n_obs = X.shape[1]
    w = None
    for wt, nm in ((fweights, "fweights"), (aweights, "aweights")):
        if wt is None:
            continue
        wt = to_array(wt, "cov")
        if wt.ndim != 1 or wt.shape[0] != n_obs:
            raise ShapeError(f"cov: {nm} must be 1-D with one entry per observation "
                             f"({n_obs}), got shape {wt.shape}")
        if nm == "fweights" and wt.dtype.kind not in "biu":
            raise TypeError("cov: fweights must be integers")
        wt = lax.convert_element_type(wt, X.dtype if X.dtype.kind != "c"
                                      else np.empty(0, X.dtype).real.dtype)
        w = wt if w is None else ew.multiply(w, wt)
    if w is None:  # JAX's average: a mean (float16/bfloat16 in float32, rounded once)
        from .reductions import mean as mean_
        avg = mean_(X, axis=1, keepdims=True)
        fact = n_obs - ddof
        fact = lax.convert_element_type(max(fact, 0), np.empty(0, X.dtype).real.dtype)
    else:
        w_sum = sum_(w)
        wx = lax.broadcast_in_dim(w, X.shape, (1,))  # no implicit rank promotion
        avg = ew.true_divide(sum_(ew.multiply(X, wx), axis=1, keepdims=True), w_sum)
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = ew.subtract(w_sum, ddof)
        else:
            aw = lax.convert_element_type(to_array(aweights), w.dtype)
            fact = ew.subtract(w_sum, ew.true_divide(ew.multiply(ddof, sum_(ew.multiply(w, aw))),
                                                     w_sum))
        fact = ew.maximum(fact, 0)
    Xc = ew.subtract(X, avg)
    Xw = Xc if w is None else ew.multiply(Xc, wx)
    rhs = ew.conj(Xw) if Xw.dtype.kind == "c" else Xw
    c = lax.dot_general(Xc, rhs, (((1,), (1,)), ((), ())))
    c = ew.true_divide(c, fact)
    return lax.reshape(c, ()) if c.shape == (1, 1) else c


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Pearson correlation coefficients (``cov`` normalized; clipped to [-1, 1])."""
    from . import elementwise as ew
    from .manipulation import diagonal
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return ew.true_divide(c, c)
    d = diagonal(c)
    std = ew.sqrt(ew.real(d) if d.dtype.kind == "c" else d)
    c = ew.true_divide(c, lax.reshape(std, (std.shape[0], 1)))
    c = ew.true_divide(c, lax.reshape(std, (1, std.shape[0])))
    if c.dtype.kind == "c":
        return ew.add(ew.clip(ew.real(c), -1, 1), ew.multiply(ew.clip(ew.imag(c), -1, 1), 1j))
    return ew.clip(c, -1, 1)


# --- histograms and counting ----------------------------------------------------------------

def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (or summed ``weights``) of each non-negative int in the 1-D ``x``.

    Eager, the length is ``max(x.max() + 1, minlength)``; a static ``length``
    fixes it (values at or past it are dropped) and makes it work under ``jit``.
    Negative values raise eagerly and are dropped under ``jit``.
    """
    from .elementwise import where, less
    x = to_array(x, "bincount")
    if x.dtype.kind not in "biu":
        raise TypeError(f"bincount: x must be an array of integers, got {x.dtype}")
    if x.ndim != 1:
        raise ShapeError(f"bincount: x must be 1-D, got shape {x.shape}")
    if x.dtype == dtypes.bool_:
        x = lax.convert_element_type(x, dtypes.int32)
    if length is None:
        if isinstance(x, Tracer):
            raise ConcretizationError(
                "bincount: the output length depends on the values (max(x) + 1), which are "
                "not known under jit. Pass length=N (a static int) to fix it.")
        v = np.asarray(x)
        if v.size and v.min() < 0:
            raise ValueError("bincount: x must be non-negative")
        length = max(int(v.max()) + 1 if v.size else 0, int(minlength))
    else:
        if isinstance(length, Tracer):
            raise ConcretizationError("bincount: length must be a static Python int")
        length = int(length)
        if length < 0:
            raise ValueError(f"bincount: length must be >= 0, got {length}")
    if weights is None:
        w = _full(x.shape, 1, dtypes.default_int())  # JAX: counts are the default int
    else:
        (w,) = promote("bincount", weights)
        if w.shape != x.shape:
            raise ShapeError(f"bincount: weights of shape {w.shape} must match x's {x.shape}")
        if w.dtype == dtypes.bool_:
            w = lax.convert_element_type(w, dtypes.int32)
    if x.dtype.kind == "i":  # negatives would wrap around: send them past the end
        x = where(less(x, 0), lax.convert_element_type(length, x.dtype), x)
    return _full((length,), 0, w.dtype).at[x].add(w)


def _edges(name, a, bins, range):
    """Bin edges (1-D, of a's float dtype) for ``bins`` (an int or edges) and ``range``."""
    from . import elementwise as ew
    from .reductions import max as max_, min as min_
    if isinstance(bins, str):
        raise NotImplementedError(f"{name}: bins={bins!r} (estimators) is not supported; "
                                  "pass an int or the bin edges")
    if np.ndim(bins) == 0 and not isinstance(bins, Array):
        nb = int(bins)
        if nb < 1:
            raise ValueError(f"{name}: bins must be a positive integer, got {bins}")
        if range is not None:
            lo, hi = range
            if not isinstance(lo, Tracer) and not isinstance(hi, Tracer):
                if float(lo) > float(hi):
                    raise ValueError(f"{name}: max must be larger than min in range "
                                     "parameter")
                if not (np.isfinite(float(lo)) and np.isfinite(float(hi))):
                    raise ValueError(f"{name}: supplied range of [{lo}, {hi}] is not finite")
            lo = lax.convert_element_type(to_array(lo), a.dtype)
            hi = lax.convert_element_type(to_array(hi), a.dtype)
        elif a.size == 0:
            lo, hi = (Array._wrap(np.array(v, a.dtype)[()]) for v in (0, 1))
        else:
            lo, hi = min_(a), max_(a)
            if not isinstance(a, Tracer) and not np.isfinite([float(lo), float(hi)]).all():
                raise ValueError(f"{name}: autodetected range of [{float(lo)}, {float(hi)}] "
                                 "is not finite")
        same = ew.equal(lo, hi)
        lo = ew.where(same, ew.subtract(lo, 0.5), lo)
        hi = ew.where(same, ew.add(hi, 0.5), hi)
        # JAX's linspace in a's dtype: lo * (1 - t) + hi * t, t = i / nb; the last is hi
        real = np.empty(0, a.dtype).real.dtype
        t = ew.true_divide(lax.iota(real, nb), Array._wrap(np.array(nb, real)[()]))
        t = lax.convert_element_type(t, a.dtype)
        edges = ew.add(ew.multiply(lo, ew.subtract(1, t)), ew.multiply(hi, t))
        from .manipulation import concatenate
        return concatenate([edges, lax.reshape(hi, (1,))])
    (edges,) = promote(name, bins)
    if edges.ndim != 1 or edges.shape[0] < 1:
        raise ShapeError(f"{name}: bins must be an int or a 1-D array of edges, got shape "
                         f"{edges.shape}")
    if not isinstance(edges, Tracer) and np.any(np.diff(np.asarray(edges)) < 0):
        raise ValueError(f"{name}: bins must increase monotonically")
    return lax.convert_element_type(edges, a.dtype)  # JAX: the edges take a's dtype


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges ``histogram`` would use (float; ``bins`` an int or edges)."""
    a = _inexact("histogram_bin_edges", a)
    return _edges("histogram_bin_edges", lax.reshape(a, (a.size,)), bins, range)


def histogram(a, bins=10, range=None, density=None, weights=None):
    """``(counts, edges)`` of the flattened ``a``; the last bin includes its right edge.

    ``bins`` is an int (equal bins over ``range``, default ``[a.min(), a.max()]``)
    or the edges. Counts are of a's float dtype (float32 for integers), or the weights'
    (promoted with a's to an inexact dtype), as JAX's. Works under ``jit`` (the number of
    bins is static).
    """
    from . import elementwise as ew
    from .manipulation import diff
    from .reductions import sum as sum_
    from .sorting import searchsorted
    if weights is None:
        a = _inexact("histogram", a)
    else:  # JAX: a and the weights promote together (to an inexact dtype)
        a, weights = promote("histogram", a, weights, to_inexact=True)
    a = lax.reshape(a, (a.size,))
    if weights is None:  # JAX: the counts are of a's float dtype (sums of ones)
        weights = _full((a.size,), 1, a.dtype)
    edges = _edges("histogram", a, bins, range)
    if edges.dtype != a.dtype:
        a = lax.convert_element_type(a, edges.dtype)
    ne = edges.shape[0]
    if weights.size != a.size:
        raise ShapeError(f"histogram: weights (shape {weights.shape}) must have a's shape")
    weights = lax.reshape(weights, (a.size,))
    idx = searchsorted(edges, a, side="right")
    last = lax.slice(edges, (ne - 1,), (ne,))
    idx = ew.where(ew.equal(a, lax.reshape(last, ())), ne - 1, idx)
    counts = bincount(idx, weights, length=ne + 1)
    counts = lax.slice(counts, (1,), (ne,))
    if density:  # in JAX's order: divided by the bin widths, then by the total
        counts = ew.true_divide(ew.true_divide(counts, diff(edges)), sum_(counts))
    return counts, edges


_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def digitize(x, bins, right=False, *, method=None):
    """Index of the bin of each ``x`` (int32): ``bins`` increasing or decreasing.
    ``method`` (JAX's search algorithm choice) is validated; the result is the same."""
    if method is not None and method not in _SEARCH_METHODS:
        raise ValueError(f"digitize: method must be one of {_SEARCH_METHODS} or None, got "
                         f"{method!r}")
    from . import elementwise as ew
    from .sorting import searchsorted
    x, bins = promote("digitize", x, bins)
    if bins.ndim != 1:
        raise ShapeError(f"digitize: bins must be 1-D, got shape {bins.shape}")
    n = bins.shape[0]
    if n == 0:
        return _full(x.shape, 0, dtypes.int32)
    if not isinstance(bins, Tracer):
        d = quiet_call(np.diff, np.asarray(bins))  # inf - inf: NaN, no warning
        if not (np.all(d >= 0) or np.all(d <= 0)):
            raise ValueError("digitize: bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"
    inc = searchsorted(bins, x, side=side)
    dec = lax.sub(n, searchsorted(lax.rev(bins, (0,)), x, side=side))
    first, lastb = lax.slice(bins, (0,), (1,)), lax.slice(bins, (n - 1,), (n,))
    increasing = lax.reshape(ew.greater_equal(lastb, first), ())
    return ew.where(increasing, inc, dec)


def interp(x, xp, fp, left=None, right=None, period=None):
    """1-D piecewise-linear interpolation of ``(xp, fp)`` at ``x`` (``xp`` increasing)."""
    from . import elementwise as ew
    from ._indexing import take
    from .sorting import argsort, searchsorted
    x, xp = promote("interp", x, xp, to_inexact=True)
    (fp,) = promote("interp", fp, to_inexact=True)
    if xp.dtype.kind == "c":
        raise TypeError("interp: x and xp must be real")
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape[0] != fp.shape[0]:
        raise ShapeError(f"interp: xp and fp must be 1-D of one length, got shapes "
                         f"{xp.shape} and {fp.shape}")
    if xp.shape[0] == 0:
        raise ValueError("interp: xp and fp must not be empty")
    out_dt = dtypes.promote_types(x.dtype, fp.dtype)
    fp = lax.convert_element_type(fp, out_dt)
    if period is not None:
        if not isinstance(period, Tracer) and float(period) == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = ew.abs(lax.convert_element_type(to_array(period), x.dtype))
        left = right = None
        x, xp = ew.remainder(x, period), ew.remainder(xp, period)
        order = argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = lax.concatenate([ew.subtract(xp[-1:], period), xp, ew.add(xp[:1], period)], 0)
        fp = lax.concatenate([fp[-1:], fp, fp[:1]], 0)
    n = xp.shape[0]
    s = searchsorted(xp, x, side="right")          # xp[s-1] <= x < xp[s]
    j = ew.clip(lax.sub(s, 1), 0, max(n - 2, 0))
    x0, f0 = take(xp, j), take(fp, j)
    if n > 1:
        j1 = lax.add(j, 1)
        x1, f1 = take(xp, j1), take(fp, j1)
        slope = ew.true_divide(ew.subtract(f1, f0),
                               lax.convert_element_type(ew.subtract(x1, x0), out_dt))
        dx0 = lax.convert_element_type(ew.subtract(x, x0), out_dt)
        dx1 = lax.convert_element_type(ew.subtract(x, x1), out_dt)
        res = ew.add(ew.multiply(slope, dx0), f0)
        again = ew.add(ew.multiply(slope, dx1), f1)
        res = ew.where(ew.isnan(res), again, res)
        res = ew.where(ew.logical_and(ew.isnan(res), ew.equal(f0, f1)), f0, res)
        res = ew.where(ew.equal(x, x0), f0, res)
    else:
        res = f0
    f_first, f_last = fp[0], fp[n - 1]
    res = ew.where(ew.equal(s, n), f_last, res)
    res = ew.where(ew.greater(x, xp[n - 1]), f_last if right is None else right, res)
    res = ew.where(ew.equal(s, 0), f_first if left is None else left, res)
    if n == 1:  # NumPy: a single point gives fp[0] even at a NaN x
        return res
    return ew.where(ew.isnan(x), lax.convert_element_type(x, out_dt), res)


# --- 1-D convolution ----------------------------------------------------------------------------

def _full_correlation(a, v):
    """``c[i] = sum_j a_pad[i + j] * conj(v[j])`` for every overlap (``a_pad``: ``a``
    padded with ``len(v) - 1`` zeros on each side), with the shorter operand as ``v``.

    Vectorized as ONE ``dot_general``: the output is cut into blocks of ``B``
    positions; block ``k`` needs the window ``a_pad[k*B : k*B + B + m - 1]``, and
    all windows (a static-index gather) times the banded ``(B + m - 1, B)`` matrix
    ``T[r + j, r] = v[j]`` (a gather from ``v``) give every block at once. Memory
    stays O(len(a) * (1 + m/B) + (B + m) * B) instead of O(len(a) * m).
    """
    from .elementwise import conj
    n, m = a.shape[0], v.shape[0]
    if m > n:  # full(a, v) = reversed conj(full(v, a))
        out = lax.rev(_full_correlation(v, a), (0,))
        return conj(out) if out.dtype.kind == "c" else out
    length = n + m - 1
    block = min(max(m, 16), 256)
    nb = -(-length // block)
    width = block + m - 1
    padded = lax.pad(a, 0, [(m - 1, m - 1 + nb * block - length, 0)])
    win_idx = (np.arange(nb)[:, None] * block + np.arange(width)[None, :]).astype(np.int32)
    windows = lax.index_gather(padded, [Array._wrap(win_idx)], (("a", 0),))        # (nb, width)
    lag = np.arange(width)[:, None] - np.arange(block)[None, :]
    band_idx = np.where((lag >= 0) & (lag < m), lag, m).astype(np.int32)     # m: a zero
    vv = conj(v) if v.dtype.kind == "c" else v
    vz = lax.pad(vv, 0, [(0, 1, 0)])
    band = lax.index_gather(vz, [Array._wrap(band_idx)], (("a", 0),))               # (width, block)
    out = lax.dot_general(windows, band, (((1,), (0,)), ((), ())))            # (nb, block)
    return lax.slice(lax.reshape(out, (nb * block,)), (0,), (length,))


def _correlate(name, a, v, mode, flip):
    from .manipulation import atleast_1d
    # inexact first, as JAX (an integer or bool convolution is float32 there)
    a, v = (atleast_1d(x) for x in promote(name, a, v, to_inexact=True))
    if a.ndim != 1 or v.ndim != 1:
        raise ShapeError(f"{name}: a and v must be 1-D, got shapes {a.shape} and {v.shape}")
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        raise ValueError(f"{name}: {'a' if n == 0 else 'v'} cannot be empty")
    if flip:  # convolve(a, v) = correlate(a, v[::-1]) without v's conjugation
        from .elementwise import conj
        v = lax.rev(conj(v) if v.dtype.kind == "c" else v, (0,))
    full = _full_correlation(a, v)
    if mode == "full":
        return full
    big, small = max(n, m), min(n, m)
    if mode == "valid":
        start, size = small - 1, big - small + 1
    elif mode == "same":
        start, size = (m - 1 - m // 2) if n >= m else n // 2, big
        if flip and n < m:  # convolution is symmetric in a and v
            start = n - 1 - n // 2
    else:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    return lax.slice(full, (start,), (start + size,))


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """Discrete 1-D convolution (``mode``: 'full', 'same' or 'valid')."""
    out = _correlate("convolve", a, v, mode, True)
    return out if preferred_element_type is None else lax.convert_element_type(
        out, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """Discrete 1-D cross-correlation ``c[k] = sum_n a[n+k] * conj(v[n])``."""
    out = _correlate("correlate", a, v, mode, False)
    return out if preferred_element_type is None else lax.convert_element_type(
        out, preferred_element_type)
