"""``fnx.random``'s functions: JAX's ``jax.random`` API over raw threefry keys.

The bits are JAX's default generator's (threefry-2x32, ``jax_threefry_partitionable``
on, the default since JAX 0.5), derived as follows:

- ``PRNGKey(seed)``: ``uint32[seed >> 32, seed & 0xFFFFFFFF]`` (a Python int seed
  taken as 64-bit two's complement).
- Counters of an output of shape ``S``: element ``i`` of ``S`` flattened (C order)
  gets the 64-bit counter ``(hi, lo) = (i >> 32, i & 0xFFFFFFFF)``; one
  Threefry-2x32 call under the key gives two words ``(y1, y2)`` per element.
- ``split(key, shape)``: the keys ``[y1, y2]`` of each element of ``shape``.
- ``bits`` 32: ``y1 ^ y2``; 8, 16: its low bits; 64: ``y1 << 32 | y2``.
- ``fold_in(key, data)``: the key ``[y1, y2]`` of the single counter ``(0, data)``.
- ``uniform``: the top ``nmant`` bits of the bits as the mantissa of a float in
  ``[1, 2)``, minus 1 (computed as ``(bits >> (nbits - nmant)) * 2^-nmant``, the
  same number), then ``max(minval, u * (maxval - minval) + minval)`` with one
  rounding, as XLA computes it (a fused multiply-add; fnx emulates it exactly
  unless the product is exact anyway).
- ``normal``: ``sqrt(2) erf_inv(uniform(nextafter(-1, 0), 1))``.
- ``randint``: two words per value from ``split(key)``'s two keys, combined
  modulo the span (``(hi % span) * (2^nbits % span) + lo % span``, wrapping).
- ``permutation``: rounds of sorting by fresh 32-bit keys (as many as
  ``ceil(3 ln(n) / ln(2^32 - 1))``), each round's key from ``split``.
- ``gumbel``: ``-log(-log(uniform(tiny, 1)))``; ``categorical``: argmax of
  logits plus gumbel noise.

Keys are plain ``uint32[2]`` arrays, so they pass through ``jit``, ``vmap`` (a
batch of keys is ``uint32[n, 2]``) and ``scan`` like any other array.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..core.array import Array, to_array
from ..lax.rule_helpers import describe
from ._gamma import random_gamma_p
from ._threefry import threefry2x32_p

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "uniform",
    "randint", "normal", "truncated_normal", "bernoulli", "gumbel", "categorical",
    "permutation", "choice", "multivariate_normal", "exponential", "laplace", "logistic",
    "gamma", "loggamma", "beta", "dirichlet",
]

_U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}


# --- keys -----------------------------------------------------------------------------

def _check_key(name, key):
    """``key`` as an Array, or a TypeError naming ``name`` and saying how to make keys."""
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        raise TypeError(f"{name}: expects a PRNG key, got the number {key!r}; make a key "
                        f"with fnx.random.PRNGKey({key!r})")
    try:
        k = to_array(key, name)
    except TypeError:
        raise TypeError(f"{name}: expects a PRNG key (a uint32 array of shape (2,)), got "
                        f"{type(key).__name__}; make one with fnx.random.PRNGKey(seed)") \
            from None
    if k.dtype != _U32 or k.shape != (2,):
        desc = f"{k.dtype.name}[{','.join(map(str, k.shape))}]"
        hint = ("a batch of keys: map over it with fnx.vmap" if k.dtype == _U32 and
                k.ndim >= 2 and k.shape[-1] == 2 else
                "make keys with fnx.random.PRNGKey(seed) and fnx.random.split(key)")
        raise TypeError(f"{name}: expects a single PRNG key, a uint32 array of shape (2,), "
                        f"got {desc}; {hint}")
    return k


def _words(key):
    return (lax.reshape(lax.slice(key, (0,), (1,)), ()),
            lax.reshape(lax.slice(key, (1,), (2,)), ()))


def _shape(name, shape):
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of non-negative ints, got "
                        f"{shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{name}: shape must be a tuple of non-negative ints, got {shape}")
    return shape


def PRNGKey(seed):
    """A PRNG key from an integer seed: ``uint32[seed >> 32, seed & 0xFFFFFFFF]``.

    A Python int is taken as a 64-bit integer (negative seeds in two's complement;
    ``-2**63 <= seed < 2**64``), as JAX does; an integer array of rank 0 (traced
    ones included) by its own width."""
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError("PRNGKey: seed must be an integer, got a bool")
    if isinstance(seed, (int, np.integer)):
        seed = int(seed)
        if not -2**63 <= seed < 2**64:
            raise OverflowError(f"PRNGKey: seed {seed} does not fit in 64 bits")
        seed %= 2**64
        return Array(np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=_U32))
    s = to_array(seed, "PRNGKey")
    if s.ndim or s.dtype.kind not in "iu":
        raise TypeError(f"PRNGKey: seed must be a scalar integer, got "
                        f"{describe(s)}; "
                        "for many keys, vmap PRNGKey over the seeds or split one key")
    if s.dtype.itemsize == 8:
        u = lax.convert_element_type_exact(s, np.uint64)
        hi = lax.convert_element_type(lax.shift_right_logical(u, np.uint64(32)), _U32)
        lo = lax.convert_element_type(lax.bitwise_and(u, np.uint64(0xFFFFFFFF)), _U32)
    else:
        hi = lax.convert_element_type(lax.mul(s, 0), _U32)
        lo = lax.convert_element_type(s, _U32)
    return lax.concatenate([lax.reshape(hi, (1,)), lax.reshape(lo, (1,))], 0)


key = PRNGKey   # fnx keys are raw key data: key(seed) is PRNGKey(seed)


def key_data(keys):
    """The raw ``uint32`` data of keys (fnx keys are raw data already: ``keys`` itself)."""
    return to_array(keys)


def wrap_key_data(key_bits_array, *, impl=None):
    """Keys from raw ``uint32[..., 2]`` data (fnx keys are raw data: checked, returned)."""
    k = to_array(key_bits_array)
    if k.dtype != _U32 or not k.ndim or k.shape[-1] != 2:
        raise TypeError(f"wrap_key_data: expects uint32 data of shape (..., 2), got "
                        f"{describe(k)}")
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"wrap_key_data: fnx has the threefry2x32 generator only, got {impl!r}")
    return k


def _counters(name, shape):
    """The low counter words of an output of ``shape`` (the high words are 0)."""
    n = math.prod(shape)
    if n >= 2**32:
        raise ValueError(f"{name}: {n} values at once is more than fnx's counters cover "
                         "(2**32); draw them in pieces from split keys")
    if not shape:
        return Array._wrap(np.uint32(0))
    return lax.reshape(lax.iota(_U32, n), shape)


def _hash(key, shape, name):
    k1, k2 = _words(key)
    return threefry2x32_p.bind(k1, k2, Array._wrap(np.uint32(0)), _counters(name, shape))


def split(key, num=2):
    """``num`` new keys (``uint32[num, 2]``; a tuple ``num`` gives ``uint32[*num, 2]``)."""
    key = _check_key("split", key)
    shape = _shape("split", num)
    y1, y2 = _hash(key, shape, "split")
    return fnp.stack([y1, y2], axis=-1)


def fold_in(key, data):
    """A new key from ``key`` and a 32-bit integer ``data`` (wrapped modulo 2**32)."""
    key = _check_key("fold_in", key)
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        d = Array._wrap(np.uint32(int(data) % 2**32))
    else:
        d = to_array(data, "fold_in")
        if d.ndim or d.dtype.kind not in "iu":
            raise TypeError(f"fold_in: data must be a scalar integer, got "
                            f"{describe(d)};"
                            " use fnx.vmap to fold in many values")
        d = lax.convert_element_type(d, _U32)
    k1, k2 = _words(key)
    y1, y2 = threefry2x32_p.bind(k1, k2, Array._wrap(np.uint32(0)), d)
    return lax.concatenate([lax.reshape(y1, (1,)), lax.reshape(y2, (1,))], 0)


def _random_bits(key, nbits, shape, name="bits"):
    y1, y2 = _hash(key, shape, name)
    if nbits == 64:
        u64 = _UINT[64]
        hi = lax.convert_element_type(y1, u64)
        return lax.bitwise_or(lax.shift_left(hi, np.uint64(32)),
                              lax.convert_element_type(y2, u64))
    b = lax.bitwise_xor(y1, y2)
    return b if nbits == 32 else lax.convert_element_type(b, _UINT[nbits])


def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers (``dtype`` uint8/16/32/64; default uint32,
    uint64 under ``jax_enable_x64``, as in JAX)."""
    key = _check_key("bits", key)
    dtype = dtypes.default_uint() if dtype is None else dtypes.canonical(dtype, "bits")
    if dtype.kind != "u":
        raise ValueError(f"bits: dtype must be an unsigned integer dtype, got {dtype}")
    return _random_bits(key, dtype.itemsize * 8, _shape("bits", shape))


# --- continuous ------------------------------------------------------------------------

def _float_dtype(name, dtype):
    dtype = dtypes.default_float() if dtype is None else dtypes.canonical(dtype, name)
    if dtype.kind != "f" and dtype != dtypes.bfloat16:
        raise ValueError(f"{name}: dtype must be a float dtype, got {dtype}")
    return dtype


def _check_shape(name, shape, *param_shapes):
    """Parameter shapes must broadcast to ``shape`` exactly."""
    try:
        out = np.broadcast_shapes(shape, *param_shapes)
    except ValueError:
        out = None
    if out != tuple(shape):
        raise ValueError(f"{name}: parameter shapes {', '.join(map(str, param_shapes))} must "
                         f"broadcast to the shape argument {tuple(shape)}")


def _sample_shape(name, shape, *param_shapes):
    """``shape`` checked, by default the parameters' broadcast shape; they must broadcast
    to it exactly."""
    shape = _shape(name, shape)
    if shape is None:
        shape = np.broadcast_shapes(*param_shapes)
    _check_shape(name, shape, *param_shapes)
    return shape


def _param(x, dtype):
    """A parameter as an array of ``dtype`` (Python scalars and arrays alike)."""
    x = to_array(x)
    return lax.convert_element_type(x, dtype)


def _unit(key, shape, dtype, name):
    """Floats in [0, 1) from the top mantissa bits of ``bits``."""
    info = np.finfo(dtype) if dtype != dtypes.bfloat16 else None
    nbits = dtype.itemsize * 8
    nmant = info.nmant if info is not None else 7
    rng_bits = 8 if nmant < 8 else nbits
    b = _random_bits(key, rng_bits, shape, name)
    if rng_bits != nbits:
        b = lax.convert_element_type(b, _UINT[nbits])
    m = lax.shift_right_logical(b, _UINT[nbits].type(rng_bits - nmant))
    return lax.mul(lax.convert_element_type(m, dtype), 2.0 ** -nmant)


def _uniform(key, shape, dtype, minval, maxval, name="uniform"):
    lo, hi = _param(minval, dtype), _param(maxval, dtype)
    _check_shape(name, shape, lo.shape, hi.shape)
    u = _unit(key, shape, dtype, name)
    width = hi - lo
    if _exact_scale(minval, maxval, dtype):
        return fnp.maximum(lo, u * width + lo)
    return fnp.maximum(lo, _fma(u, fnp.broadcast_to(width, shape),
                                fnp.broadcast_to(lo, shape)))


def _exact_scale(minval, maxval, dtype):
    """Whether ``u * (maxval - minval)`` is exact for every ``u`` (static bounds whose
    width is a power of two, as the defaults and ``normal``'s are): then ``u * w + lo``
    needs no fused multiply-add."""
    if not all(isinstance(v, (int, float, np.integer, np.floating)) and
               not isinstance(v, bool) for v in (minval, maxval)):
        return False
    w = float(np.array(maxval, dtype) - np.array(minval, dtype))
    return w == 0 or (math.isfinite(w) and math.frexp(abs(w))[0] == 0.5)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd(s, err):
    """``s + err`` (``s`` its round-to-nearest, ``err`` the exact rest) rounded to odd:
    ``s`` moved one ulp toward ``err`` when inexact and ``s``'s last bit is even."""
    a = fnp.abs(s)
    # (Python infinities: weak, they take the operands' float64, which a NumPy float64
    # constant would not keep while jax_enable_x64 is off)
    ulp = fnp.nextafter(a, math.inf) - a
    m = a / ulp                                # the integer significand
    even = m - 2.0 * fnp.floor(m * 0.5) == 0.0
    toward = fnp.where(err > 0, math.inf, -math.inf)
    return fnp.where((err != 0) & even, fnp.nextafter(s, toward), s)


def _fma(a, b, c):
    """``a * b + c`` rounded once, as XLA computes ``uniform``'s scaling (a fused
    multiply-add; Boldo and Melquiond's emulation through rounding to odd)."""
    dt = a.dtype
    if dt.itemsize < 8:        # the product is exact in float64; round to odd, then to dt
        a64, b64, c64 = (lax.convert_element_type_exact(x, np.float64) for x in (a, b, c))
        s, err = _two_sum(c64, a64 * b64)
        return lax.convert_element_type(_round_to_odd(s, err), dt)
    split = 2.0 ** 27 + 1.0

    def halves(x):
        t = x * split
        hi = t - (t - x)
        return hi, x - hi

    p = a * b
    (ah, al), (bh, bl) = halves(a), halves(b)
    p_err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    th, tl = _two_sum(c, p)
    v, v_err = _two_sum(tl, p_err)
    return th + _round_to_odd(v, v_err)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in ``[minval, maxval)`` (bounds broadcast to ``shape``)."""
    key = _check_key("uniform", key)
    return _uniform(key, _shape("uniform", shape), _float_dtype("uniform", dtype),
                    minval, maxval)


def _normal(key, shape, dtype, name="normal"):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, lo, 1.0, name)
    return lax.mul(lax.erf_inv(u), math.sqrt(2.0))


def normal(key, shape=(), dtype=None):
    """Standard normal floats: ``sqrt(2) erf_inv(u)`` with ``u`` uniform in (-1, 1)."""
    key = _check_key("normal", key)
    return _normal(key, _shape("normal", shape), _float_dtype("normal", dtype))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats truncated to the open interval ``(lower, upper)``."""
    key = _check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    lower, upper = _param(lower, dtype), _param(upper, dtype)
    shape = _sample_shape("truncated_normal", shape, lower.shape, upper.shape)
    sqrt2 = math.sqrt(2.0)
    a, b = lax.erf(lax.div(lower, sqrt2)), lax.erf(lax.div(upper, sqrt2))
    u = _uniform(key, shape, dtype, a, b, "truncated_normal")
    out = lax.mul(lax.erf_inv(u), sqrt2)
    lo = fnp.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype))
    hi = fnp.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype))
    return fnp.clip(out, lo, hi)


def exponential(key, shape=(), dtype=None):
    """Exponential(1) floats: ``-log1p(-u)``."""
    key = _check_key("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    u = _uniform(key, _shape("exponential", shape), dtype, 0.0, 1.0, "exponential")
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) floats: ``sign(u) log1p(-|u|)`` with ``u`` uniform in (-1, 1)."""
    key = _check_key("laplace", key)
    dtype = _float_dtype("laplace", dtype)
    epsneg = float(np.finfo(dtype).epsneg) if dtype != dtypes.bfloat16 else 2.0 ** -8
    u = _uniform(key, _shape("laplace", shape), dtype, -1.0 + epsneg, 1.0, "laplace")
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic floats: ``log(u) - log1p(-u)``."""
    key = _check_key("logistic", key)
    dtype = _float_dtype("logistic", dtype)
    x = _uniform(key, _shape("logistic", shape), dtype, _tiny(dtype), 1.0, "logistic")
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def _tiny(dtype):
    return float(np.finfo(dtype).tiny) if dtype != dtypes.bfloat16 else 2.0 ** -126


def _gumbel(key, shape, dtype, mode="low", name="gumbel"):
    if mode == "high":
        u = _uniform(key, (2,) + tuple(shape), dtype, 0.0, 1.0, name)
        high, low = u[0], u[1]
        nmant = np.finfo(dtype).nmant
        x = fnp.where(high >= 0.5, high, high + 2.0 ** -nmant * low + _tiny(dtype))
        return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))
    if mode not in ("low", None):
        raise ValueError(f"{name}: mode must be 'low' or 'high', got {mode!r}")
    u = _uniform(key, shape, dtype, _tiny(dtype), 1.0, name)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel floats ``-log(-log(u))`` (``mode="high"``: two words per value,
    for a larger range in the upper tail)."""
    key = _check_key("gumbel", key)
    return _gumbel(key, _shape("gumbel", shape), _float_dtype("gumbel", dtype), mode)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Normal vectors with mean ``mean (..., n)`` and covariance ``cov (..., n, n)``:
    ``mean + factor @ z`` with ``factor`` the Cholesky factor (``method="cholesky"``,
    the default) or ``u sqrt(s)`` of an ``eigh``/``svd`` (where ``fnx.numpy.linalg``
    provides them)."""
    key = _check_key("multivariate_normal", key)
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', "
                         f"got {method!r}")
    mean, cov = to_array(mean), to_array(cov)
    if dtype is None:
        dtype = dtypes.to_inexact(dtypes.result_type(mean, cov))
    dtype = _float_dtype("multivariate_normal", dtype)
    mean, cov = lax.convert_element_type(mean, dtype), lax.convert_element_type(cov, dtype)
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal: mean must have rank >= 1 (shape (..., n)), "
                         f"got shape {mean.shape}")
    n = mean.shape[-1]
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal: cov must have shape (..., n, n) with n = {n} "
                         f"(mean's last dimension), got shape {cov.shape}")
    shape = _shape("multivariate_normal", shape)
    if shape is None:
        shape = np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    else:
        _check_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
    factor = _factor(cov, method)
    z = _normal(key, tuple(shape) + (n,), dtype, "multivariate_normal")
    return mean + fnp.einsum("...ij,...j->...i", factor, z)


def _factor(cov, method):
    linalg = fnp.linalg
    if method == "cholesky":
        chol = getattr(linalg, "cholesky", None)
        return chol(cov) if chol is not None else _cholesky(cov)
    fn = getattr(linalg, method, None)
    if fn is None:
        raise NotImplementedError(f"multivariate_normal: method={method!r} needs "
                                  f"fnx.numpy.linalg.{method}, which this fnx lacks; use "
                                  "method='cholesky'")
    if method == "eigh":
        w, v = fn(cov)
        return v * fnp.sqrt(w)[..., None, :]
    u, s, _ = fn(cov)
    return u * fnp.sqrt(s)[..., None, :]


def _cholesky(a):
    """Lower Cholesky factor of ``a (..., n, n)``, one column per step (fnx ops, so it
    traces and differentiates)."""
    n = a.shape[-1]
    cols = []
    for j in range(n):
        col = a[..., :, j]
        if j:
            prev = fnp.stack(cols, axis=-1)                   # (..., n, j)
            col = col - fnp.einsum("...ik,...k->...i", prev, prev[..., j, :])
        diag = fnp.sqrt(col[..., j])
        col = col / diag[..., None]
        mask = np.arange(n) >= j
        cols.append(fnp.where(mask, col, 0.0))
    return fnp.stack(cols, axis=-1)


# --- discrete ----------------------------------------------------------------------------

def _int_dtype(name, dtype):
    dtype = dtypes.default_int() if dtype is None else dtypes.canonical(dtype, name)
    if dtype.kind not in "iu":
        raise TypeError(f"{name}: dtype must be an integer dtype, got {dtype}")
    return dtype


def _int_bound(v, dtype, extra=0):
    """A bound clipped into ``dtype``'s range (``extra`` widens the top), as ``dtype``."""
    info = np.iinfo(dtype)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return min(max(int(v), int(info.min)), int(info.max) + extra)
    a = to_array(v)
    if a.dtype.kind not in "iu":
        a = lax.convert_element_type(a, dtypes.default_int())
    return a


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in ``[minval, maxval)`` (``minval`` when ``maxval <= minval``);
    bounds are clipped to ``dtype``, which defaults to the default int (int32; int64 under
    ``jax_enable_x64``)."""
    key = _check_key("randint", key)
    dtype = _int_dtype("randint", dtype)
    shape = _shape("randint", shape)
    sample_dt = dtype
    if dtype.itemsize < 4:   # JAX samples 8- and 16-bit integers in 32 bits
        sample_dt = np.dtype(np.int32)
        minval, maxval = _int_bound(minval, dtype), _int_bound(maxval, dtype, 1)
        if isinstance(minval, Array):
            minval = fnp.clip(minval.astype(np.int32), int(np.iinfo(dtype).min),
                              int(np.iinfo(dtype).max))
        if isinstance(maxval, Array):
            maxval = fnp.clip(maxval.astype(np.int32), int(np.iinfo(dtype).min),
                              int(np.iinfo(dtype).max) + 1)
    out = _randint(key, shape, minval, maxval, sample_dt)
    return out if out.dtype == dtype else lax.convert_element_type(out, dtype)


def _clip_convert(v, dtype):
    """Integer ``v`` (a Python int or an array) clipped to ``dtype``'s range, as ``dtype``."""
    info = np.iinfo(dtype)
    if isinstance(v, int):
        return Array._wrap(np.array(min(max(v, int(info.min)), int(info.max)), dtype))
    vi = np.iinfo(v.dtype)
    lo, hi = max(int(info.min), int(vi.min)), min(int(info.max), int(vi.max))
    v = fnp.clip(v, np.array(lo, v.dtype), np.array(hi, v.dtype))
    return lax.convert_element_type(v, dtype)


def _randint(key, shape, minval, maxval, dtype):
    if not isinstance(minval, int):
        minval = _int_bound(minval, dtype)
    if not isinstance(maxval, int):
        maxval = _int_bound(maxval, dtype)
    _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    top = int(np.iinfo(dtype).max)
    if isinstance(maxval, int):
        out_of_range = maxval > top
    elif np.iinfo(maxval.dtype).max > top:
        out_of_range = maxval > np.array(top, maxval.dtype)
    else:
        out_of_range = False
    lo, hi = _clip_convert(minval, dtype), _clip_convert(maxval, dtype)
    nbits = dtype.itemsize * 8
    udt = _UINT[nbits]
    k1, k2 = split(key)
    higher, lower = _random_bits(k1, nbits, shape, "randint"), \
        _random_bits(k2, nbits, shape, "randint")
    span = lax.convert_element_type(hi - lo, udt)
    empty = hi <= lo
    span = fnp.where(empty, np.array(1, udt), span)
    if out_of_range is not False:
        span = fnp.where(fnp.logical_and(out_of_range, fnp.logical_not(empty)),
                         span + np.array(1, udt), span)
    span = fnp.broadcast_to(span, shape)
    mult = lax.rem(np.array(2 ** (nbits // 2), udt) + fnp.zeros_like(span), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    off = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    off = lax.rem(off, span)
    return fnp.broadcast_to(lo, shape) + lax.convert_element_type(off, dtype)


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability ``p`` (``uniform < p``; ``mode="high"``
    uses two words per value for probabilities below the float's resolution)."""
    key = _check_key("bernoulli", key)
    if mode not in ("low", "high"):
        raise ValueError(f"bernoulli: mode must be 'low' or 'high', got {mode!r}")
    p = to_array(p)
    if p.dtype.kind != "f":
        raise TypeError(f"bernoulli: p must be a float probability, got {p.dtype}")
    shape = _sample_shape("bernoulli", shape, p.shape)
    if mode == "high":
        u = _uniform(key, (2,) + tuple(shape), p.dtype, 0.0, 1.0, "bernoulli")
        u1, u2 = u[0], u[1] * 2.0 ** -np.finfo(p.dtype).nmant
        return u2 < p - u1
    return _uniform(key, shape, p.dtype, 0.0, 1.0, "bernoulli") < p


def _axis(name, axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % max(ndim, 1)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Indices drawn with probabilities ``softmax(logits, axis)`` (the Gumbel-max trick;
    without replacement, the Gumbel top-k trick)."""
    key = _check_key("categorical", key)
    logits = to_array(logits)
    if logits.ndim < 1:
        raise ValueError("categorical: logits must have rank >= 1, got a scalar")
    if logits.dtype.kind != "f":
        logits = lax.convert_element_type(logits, dtypes.default_float())
    axis = _axis("categorical", axis, logits.ndim)
    batch = logits.shape[:axis] + logits.shape[axis + 1:]
    shape = _sample_shape("categorical", shape, batch)
    prefix = shape[:len(shape) - len(batch)]
    if replace:
        lshape = list(shape[len(prefix):])
        lshape.insert(axis, logits.shape[axis])
        g = _gumbel(key, prefix + tuple(lshape), logits.dtype, mode, "categorical")
        return fnp.argmax(g + logits, axis=len(prefix) + axis)
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"categorical: {k} samples without replacement is more than the "
                         f"{logits.shape[axis]} categories")
    g = logits + _gumbel(key, logits.shape, logits.dtype, mode, "categorical")
    order = fnp.argsort(-fnp.moveaxis(g, axis, -1), axis=-1, stable=True)[..., :k]
    order = fnp.moveaxis(order, -1, 0)
    return fnp.reshape(order, shape).astype(dtypes.default_int())


def _shuffle(key, x, axis):
    n = math.prod(x.shape)
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(2**32 - 1)))
    for _ in range(rounds):
        ks = split(key)
        key, sub = ks[0], ks[1]
        sort_keys = _random_bits(sub, 32, x.shape, "permutation")
        x = lax.sort_key_val(sort_keys, x, axis)[1]
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (an int ``x``) or of ``x`` along ``axis``
    (``independent``: each slice along ``axis`` permuted on its own)."""
    key = _check_key("permutation", key)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if x < 0:
            raise ValueError(f"permutation: x must be a non-negative int or an array, got {x}")
        return _shuffle(key, fnp.arange(int(x), dtype=dtypes.default_int()), 0)
    x = to_array(x)
    if x.ndim == 0:
        raise TypeError("permutation: x must be an int or an array of rank >= 1, got a "
                        "rank-0 array; pass int(x) for a permutation of arange(x)")
    axis = _axis("permutation", axis, x.ndim)
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, fnp.arange(x.shape[axis], dtype=dtypes.default_int()), 0)
    return fnp.take(x, ind, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Samples of ``arange(a)`` (an int ``a``) or of ``a``'s slices along ``axis``, with
    or without replacement, uniformly or with probabilities ``p``."""
    key = _check_key("choice", key)
    shape = _shape("choice", shape)
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        arr, n = None, int(a)
    else:
        arr = to_array(a)
        if arr.ndim == 0:
            raise TypeError("choice: a must be an int or an array of rank >= 1")
        axis = _axis("choice", axis, arr.ndim)
        n = arr.shape[axis]
    draws = math.prod(shape)
    out_dt = dtypes.default_int() if arr is None else arr.dtype
    if draws == 0:
        return fnp.zeros(shape if arr is None else
                         arr.shape[:axis] + shape + arr.shape[axis + 1:], out_dt)
    if n <= 0:
        raise ValueError("choice: a must be non-empty unless no samples are taken")
    if not replace and draws > n:
        raise ValueError(f"choice: cannot take {draws} samples from a population of {n} "
                         "without replacement")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n)
            res = ind if arr is None else fnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(key, n if arr is None else arr, axis)
            res = lax.slice_in_dim(perm, 0, draws, axis=0 if arr is None else axis)
    else:
        p = to_array(p)
        if p.dtype.kind != "f":
            p = lax.convert_element_type(p, dtypes.default_float())
        if p.shape != (n,):
            raise ValueError(f"choice: p must have shape ({n},) (a's size along axis), "
                             f"got {p.shape}")
        if replace:
            cum = fnp.cumsum(p)
            r = cum[-1] * (1 - _uniform(key, shape, p.dtype, 0.0, 1.0, "choice"))
            ind = fnp.searchsorted(cum, r).astype(dtypes.default_int())
        else:
            g = _gumbel(key, (n,), p.dtype, None, "choice") + fnp.log(p)
            ind = fnp.argsort(-g, stable=True)[:draws].astype(dtypes.default_int())
        res = ind if arr is None else fnp.take(arr, ind, axis=axis)
    return fnp.reshape(res, shape if arr is None else
                       arr.shape[:axis] + shape + arr.shape[axis + 1:])


# --- gamma family ----------------------------------------------------------------------

def _gamma(name, key, a, shape, dtype, log_space):
    key = _check_key(name, key)
    dtype = _float_dtype(name, dtype)
    a = _param(a, dtype)
    shape = _sample_shape(name, shape, a.shape)
    a = fnp.broadcast_to(a, shape)
    keys = split(key, shape)
    return random_gamma_p.bind(keys, a, log_space=log_space)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (Marsaglia-Tsang rejection, vectorized; ``a > 0``, NaN
    otherwise). Divide by a rate or multiply by a scale for other parameterizations."""
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """``log`` of Gamma(a, 1) samples, computed in log space (accurate for tiny ``a``)."""
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats: ``Ga / (Ga + Gb)`` of two gamma samples, in log space."""
    key = _check_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    a, b = _param(a, dtype), _param(b, dtype)
    shape = _sample_shape("beta", shape, a.shape, b.shape)
    ka, kb = split(key)
    la = _gamma("beta", ka, a, shape, dtype, True)
    lb = _gamma("beta", kb, b, shape, dtype, True)
    m = fnp.maximum(la, lb)
    ea, eb = fnp.exp(la - m), fnp.exp(lb - m)
    return ea / (ea + eb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors (``alpha (..., n)``): normalized gamma samples, in log
    space. ``shape`` is the batch shape; the result has shape ``shape + (n,)``."""
    key = _check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    alpha = _param(alpha, dtype)
    if alpha.ndim < 1:
        raise ValueError("dirichlet: alpha must have rank >= 1 (shape (..., n)), got a scalar")
    shape = _sample_shape("dirichlet", shape, alpha.shape[:-1])
    lg = _gamma("dirichlet", key, alpha, tuple(shape) + alpha.shape[-1:], dtype, True)
    lg = lg - lax.stop_gradient(fnp.max(lg, axis=-1, keepdims=True))
    e = fnp.exp(lg)
    return e / fnp.sum(e, axis=-1, keepdims=True)
