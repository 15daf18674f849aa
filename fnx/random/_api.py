"""``fnx.random``'s functions: JAX's ``jax.random`` API over raw threefry keys.

The bits are JAX's default generator's (threefry-2x32, ``jax_threefry_partitionable``
on, the default since JAX 0.5), derived as follows:

- ``PRNGKey(seed)``: ``uint32[seed >> 32, seed & 0xFFFFFFFF]`` (a Python int seed
  taken as 64-bit two's complement under ``jax_enable_x64``, else as 32-bit: ``[0,
  seed mod 2**32]``).
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
- ``gamma``: per-sample keys ``split(key, shape)``, each running JAX's Marsaglia-Tsang
  loop (``_gamma.py``); ``beta``, ``dirichlet``, ``chisquare``, ``f``, ``t``,
  ``generalized_normal`` and ``ball`` split keys and combine gamma samples as JAX does.
- ``poisson`` and ``binomial``: JAX's two rejection loops (Knuth / PTRS, inversion /
  BTRS) as ``lax.while_loop``s over whole arrays, each step's uniforms from a key split
  off the carried one, both loops run and the result selected per element.

Keys are plain ``uint32[2]`` arrays, so they pass through ``jit``, ``vmap`` (a
batch of keys is ``uint32[n, 2]``) and ``scan`` like any other array.

The ``rbg`` and ``unsafe_rbg`` generators (JAX's, over XLA's ``RngBitGenerator``) use
``uint32[4]`` keys, the seed's two words twice. Their bits are
``lax.rng_bit_generator(key, shape, uintN)``'s (Philox on CPU); ``rbg`` splits and folds
in each half as a threefry key, ``unsafe_rbg`` splits to every tenth row of its generator's
words and folds ``data`` in as the key xor the last of ten rows drawn under the seed
``[0, data, 0, data]``. Under ``vmap`` their bits follow ``rng_bit_generator``'s batching
rule (the whole batch from the first key), as in JAX.
"""
from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from .. import lax
from .. import numpy as fnp
from .._config import config
from ..core import dtypes
from ..core.array import Array, to_array
from ..lax.rule_helpers import describe
from ._gamma import random_gamma_p
from ._threefry import threefry2x32_p

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "uniform",
    "randint", "normal", "truncated_normal", "bernoulli", "gumbel", "categorical",
    "permutation", "choice", "multivariate_normal", "exponential", "laplace", "logistic",
    "gamma", "loggamma", "beta", "dirichlet", "clone", "key_impl", "cauchy", "pareto",
    "rayleigh", "weibull_min", "lognormal", "maxwell", "double_sided_maxwell", "triangular",
    "wald", "rademacher", "geometric", "t", "chisquare", "f", "generalized_normal", "ball",
    "orthogonal", "poisson", "binomial", "multinomial",
]

_U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}
# The generators, by the length of their raw keys: threefry2x32 keys are uint32[2]; rbg and
# unsafe_rbg keys (XLA's RngBitGenerator for bits) are uint32[4].
IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
_KEY_WORDS = {"threefry2x32": 2, "rbg": 4, "unsafe_rbg": 4}


def _impl_name(impl, where):
    """A generator's name (None: ``jax_default_prng_impl``), checked."""
    impl = config.values["jax_default_prng_impl"] if impl is None else impl
    impl = getattr(impl, "name", impl)
    if impl not in IMPLS:
        raise ValueError(f"{where}: unknown PRNG implementation {impl!r}; fnx has "
                         f"{', '.join(IMPLS)}")
    return impl


def _impl_of(k):
    """The generator of a checked key: by its length, and for 4-word keys ``unsafe_rbg``
    when it is ``jax_default_prng_impl``, else ``rbg`` (fnx keys are raw data and carry
    no generator; JAX's typed keys do)."""
    if k.shape[-1] == 2:
        return "threefry2x32"
    return "unsafe_rbg" if config.values["jax_default_prng_impl"] == "unsafe_rbg" else "rbg"


# --- keys -----------------------------------------------------------------------------

def _check_key(name, key):
    """``key`` as an Array, or a TypeError naming ``name`` and saying how to make keys."""
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        raise TypeError(f"{name}: expects a PRNG key, got the number {key!r}; make a key "
                        f"with fnx.random.PRNGKey({key!r})")
    try:
        k = to_array(key, name)
    except TypeError:
        raise TypeError(f"{name}: expects a PRNG key (a uint32 array of shape (2,), or (4,) "
                        f"for rbg), got {type(key).__name__}; make one with "
                        "fnx.random.PRNGKey(seed)") from None
    if k.dtype != _U32 or k.shape not in ((2,), (4,)):
        desc = f"{k.dtype.name}[{','.join(map(str, k.shape))}]"
        hint = ("a batch of keys: map over it with fnx.vmap" if k.dtype == _U32 and
                k.ndim >= 2 and k.shape[-1] in (2, 4) else
                "make keys with fnx.random.PRNGKey(seed) and fnx.random.split(key)")
        raise TypeError(f"{name}: expects a single PRNG key, a uint32 array of shape (2,) "
                        f"(threefry2x32) or (4,) (rbg, unsafe_rbg), got {desc}; {hint}")
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


def PRNGKey(seed, *, impl=None):
    """A PRNG key from an integer seed: ``uint32[seed >> 32, seed & 0xFFFFFFFF]``; for
    the ``rbg`` and ``unsafe_rbg`` generators (``impl``, by default
    ``jax_default_prng_impl``) those two words twice, ``uint32[4]``, as in JAX.

    A Python int is taken as a 64-bit integer (negative seeds in two's complement;
    ``-2**63 <= seed < 2**64``) under ``jax_enable_x64`` and as a 32-bit one without it
    (the high word 0), as JAX does; an integer array of rank 0 (traced ones included) by
    its own width."""
    k = _threefry_seed(seed)
    if _KEY_WORDS[_impl_name(impl, "PRNGKey")] == 4:
        return lax.concatenate([k, k], 0)
    return k


def key(seed, *, impl=None):
    """A PRNG key from an integer seed (fnx keys are raw key data: ``PRNGKey(seed)``)."""
    return PRNGKey(seed, impl=impl)


_warned_seed = []


def _threefry_seed(seed):
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError("PRNGKey: seed must be an integer, got a bool")
    if isinstance(seed, (int, np.integer)):
        seed = int(seed)
        if not -2**63 <= seed < 2**64:
            raise OverflowError(f"PRNGKey: seed {seed} does not fit in 64 bits")
        if not dtypes.x64_enabled():
            # JAX without x64 takes the seed as a 32-bit integer: its high word is 0
            # (PRNGKey(-1) is [0, 2**32 - 1], PRNGKey(2**32 + 7) is [0, 7]); JAX says
            # nothing when that drops bits, fnx says so once
            if not -2**31 <= seed < 2**32 and not _warned_seed:
                _warned_seed.append(True)
                warnings.warn(
                    f"PRNGKey: seed {seed} does not fit in 32 bits; without jax_enable_x64 "
                    f"it is taken modulo 2**32 ({seed % 2**32}), as JAX does, so seeds that "
                    "differ only above bit 31 give the same key. Enable x64 "
                    "(fnx.config.update('jax_enable_x64', True)) to key on all 64 bits. "
                    "This warning is shown once per process.", stacklevel=3)
            return Array(np.array([0, seed % 2**32], dtype=_U32))
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


def key_data(keys):
    """The raw ``uint32`` data of keys (fnx keys are raw data already: ``keys`` itself)."""
    return to_array(keys)


def wrap_key_data(key_bits_array, *, impl=None):
    """Keys from raw ``uint32[..., 2]`` data (``uint32[..., 4]`` for rbg and unsafe_rbg;
    fnx keys are raw data: checked, returned)."""
    k = to_array(key_bits_array)
    impl = _impl_name(impl, "wrap_key_data")
    n = _KEY_WORDS[impl]
    if k.dtype != _U32 or not k.ndim or k.shape[-1] != n:
        raise TypeError(f"wrap_key_data: expects uint32 data of shape (..., {n}) for "
                        f"{impl}, got {describe(k)}")
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


def _halves(key):
    return lax.slice(key, (0,), (2,)), lax.slice(key, (2,), (4,))


def _rbg_stream(key, rows):
    """``rows`` rows of four uint32 words of XLA's generator under ``key``."""
    return lax.rng_bit_generator(key, (rows, 4), np.uint32)[1]


def _split(key, shape):
    impl = _impl_of(key)
    if impl == "threefry2x32":
        y1, y2 = _hash(key, shape, "split")
        return fnp.stack([y1, y2], axis=-1)
    if impl == "rbg":   # each half as a threefry key, side by side
        return lax.concatenate([_split(h, shape) for h in _halves(key)], len(shape))
    # unsafe_rbg: every tenth row of the generator's words
    n = math.prod(shape)
    return lax.reshape(lax.slice(_rbg_stream(key, 10 * n), (0, 0), (10 * n, 4), (10, 1)),
                       tuple(shape) + (4,))


def split(key, num=2):
    """``num`` new keys (``uint32[num, 2]``; a tuple ``num`` gives ``uint32[*num, 2]``;
    4 words for rbg keys)."""
    key = _check_key("split", key)
    return _split(key, _shape("split", num))


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
    return _fold_in(key, d)


def _fold_in(key, d):
    impl = _impl_of(key)
    if impl == "rbg":
        return lax.concatenate([_fold_in(h, d) for h in _halves(key)], 0)
    if impl == "unsafe_rbg":   # the key xor the last row drawn under the seed [0, d, 0, d]
        z = lax.reshape(lax.convert_element_type(lax.mul(d, 0), _U32), (1,))
        seed = lax.concatenate([z, lax.reshape(d, (1,))] * 2, 0)
        last = lax.reshape(lax.slice(_rbg_stream(seed, 10), (9, 0), (10, 4)), (4,))
        return lax.bitwise_xor(key, last)
    k1, k2 = _words(key)
    y1, y2 = threefry2x32_p.bind(k1, k2, Array._wrap(np.uint32(0)), d)
    return lax.concatenate([lax.reshape(y1, (1,)), lax.reshape(y2, (1,))], 0)


def _random_bits(key, nbits, shape, name="bits"):
    if key.shape[-1] == 4:   # rbg, unsafe_rbg: XLA's generator, its default algorithm
        return lax.rng_bit_generator(key, shape, _UINT[nbits])[1]
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
        raise ValueError(f"{name}: dtype must be a float dtype, got {dtype}; pass a float "
                         "dtype such as 'float32' (or None for the default float)")
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
        try:
            shape = np.broadcast_shapes(*param_shapes)
        except ValueError:
            raise ValueError(f"{name}: parameter shapes {', '.join(map(str, param_shapes))} "
                             "do not broadcast together; reshape them, or pass shape= and "
                             "parameters that broadcast to it") from None
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
    """Standard normal floats: ``sqrt(2) erf_inv(u)`` with ``u`` uniform in (-1, 1). For a
    complex ``dtype``, as JAX: ``(re + 1j im) / sqrt(2)``, ``re`` and ``im`` drawn from the
    two keys of ``split(key)``, so the variance is 1."""
    key = _check_key("normal", key)
    shape = _shape("normal", shape)
    if dtype is not None and dtypes.canonical(dtype, "normal").kind == "c":
        dt = dtypes.canonical(dtype, "normal")
        part = np.dtype(np.zeros((), dt).real.dtype)
        k_re, k_im = split(key)
        z = lax.complex(_normal(k_re, shape, part), _normal(k_im, shape, part))
        return lax.div(z, lax.full_like(z, np.sqrt(2.0)))
    return _normal(key, shape, _float_dtype("normal", dtype))


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

def _int_dtype(name, dtype, error=TypeError):
    dtype = dtypes.default_int() if dtype is None else dtypes.canonical(dtype, name)
    if dtype.kind not in "iu":
        raise error(f"{name}: dtype must be an integer dtype, got {dtype}; pass an integer "
                    "dtype such as 'int32' (or None for the default int)")
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
    if key.shape[-1] != 2:
        raise NotImplementedError(
            f"{name}: fnx's gamma sampler runs on threefry2x32 keys only, got a "
            f"{_impl_of(key)} key (uint32[4]); draw it from a threefry key, e.g. "
            "fnx.random.PRNGKey(seed, impl='threefry2x32')")
    dtype = _float_dtype(name, dtype)
    a = _param(a, dtype)
    shape = _sample_shape(name, shape, a.shape)
    a = fnp.broadcast_to(a, shape)
    keys = split(key, shape)
    return random_gamma_p.bind(keys, a, log_space=log_space)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats by JAX's Marsaglia-Tsang rejection loop (vectorized; ``a = 0``
    gives 0, ``a < 0`` NaN, as in JAX). Divide by a rate or multiply by a scale for
    other parameterizations."""
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


# --- key utilities ---------------------------------------------------------------------

def clone(key):
    """``key`` itself: JAX's ``clone`` marks a key for reuse under its key-reuse checker,
    and is the identity otherwise; fnx has no such checker."""
    return to_array(key)


def key_impl(keys):
    """The generator of ``keys``: ``"threefry2x32"`` for raw ``uint32[..., 2]`` data; for
    ``uint32[..., 4]``, ``"unsafe_rbg"`` when that is ``jax_default_prng_impl``, else
    ``"rbg"`` (fnx keys are raw data and do not record their generator)."""
    k = to_array(keys)
    if k.dtype != _U32 or not k.ndim or k.shape[-1] not in (2, 4):
        raise TypeError(f"key_impl: expects PRNG keys, uint32 data of shape (..., 2) or "
                        f"(..., 4), got {describe(k)}; make keys with "
                        "fnx.random.PRNGKey(seed)")
    return _impl_of(k)


# --- more continuous distributions (JAX's formulas over the samplers above) -----------

def _check_cast(name, dtype, *params):
    """Array parameters must cast to ``dtype`` without loss (Python scalars always do),
    as JAX checks: a float64 ``b`` with ``dtype=float32`` is an error."""
    for x in params:
        if isinstance(x, (bool, int, float)):     # weakly typed: always safe
            continue
        a = to_array(x)
        if dtypes.result_type(a, dtype) != dtype:
            raise dtypes.TypePromotionError(
                f"{name}: cannot safely cast a parameter of dtype {a.dtype} to dtype={dtype}; "
                f"pass dtype={a.dtype} or convert the parameter with .astype({dtype})")


def _params(name, dtype, shape, *params):
    """``params`` checked for a lossless cast and converted to ``dtype``, with the sample
    shape (by default their broadcast shape)."""
    _check_cast(name, dtype, *params)
    arrs = [_param(x, dtype) for x in params]
    return arrs, _sample_shape(name, shape, *(a.shape for a in arrs))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy floats: ``tan(pi (u - 1/2))``, ``u`` uniform in ``[eps, 1)``."""
    key = _check_key("cauchy", key)
    dtype = _float_dtype("cauchy", dtype)
    eps = float(np.finfo(dtype).eps) if dtype != dtypes.bfloat16 else 2.0 ** -7
    u = _uniform(key, _shape("cauchy", shape), dtype, eps, 1.0, "cauchy")
    return lax.tan(lax.mul(lax.sub(u, 0.5), math.pi))


def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) floats on ``[1, inf)``: ``exp(e / b)``, ``e`` standard exponential."""
    key = _check_key("pareto", key)
    dtype = _float_dtype("pareto", dtype)
    (b,), shape = _params("pareto", dtype, shape, b)
    return lax.exp(exponential(key, shape, dtype) / b)


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh(scale) floats: ``scale sqrt(-2 log u)``."""
    key = _check_key("rayleigh", key)
    dtype = _float_dtype("rayleigh", dtype)
    (scale,), shape = _params("rayleigh", dtype, shape, scale)
    u = _uniform(key, shape, dtype, 0.0, 1.0, "rayleigh")
    return scale * lax.sqrt(lax.mul(lax.log(u), -2.0))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats: ``scale (-log1p(-u))^(1 / concentration)``. As in JAX, ``shape``
    is not checked against the parameters: the result has their broadcast shape, and
    array parameters take part in type promotion."""
    key = _check_key("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    u = _uniform(key, _shape("weibull_min", shape), dtype, 0.0, 1.0, "weibull_min")
    return fnp.power(-fnp.log1p(-u), 1.0 / _weak(concentration)) * _weak(scale)


def _weak(x):
    """A parameter as JAX's ``jnp`` arithmetic takes it: Python scalars stay weak."""
    return x if isinstance(x, (int, float)) else to_array(x)


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """Log-normal floats: ``exp(sigma z)``, ``z`` standard normal."""
    key = _check_key("lognormal", key)
    dtype = _float_dtype("lognormal", dtype)
    (sigma,), shape = _params("lognormal", dtype, shape, sigma)
    return lax.exp(_normal(key, shape, dtype, "lognormal") * sigma)


def maxwell(key, shape=(), dtype=None):
    """Maxwell floats: the norm of three standard normals (drawn as ``shape + (3,)``)."""
    key = _check_key("maxwell", key)
    dtype = _float_dtype("maxwell", dtype)
    z = _normal(key, _shape("maxwell", shape) + (3,), dtype, "maxwell")
    return fnp.sqrt(fnp.sum(z * z, axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """``loc + scale s m``: Maxwell samples ``m`` with random signs ``s``.

    The result has shape ``shape + broadcast(loc, scale).shape``; as in JAX, an empty
    ``shape`` is replaced by that broadcast shape first (so non-scalar parameters
    with ``shape=()`` give their shape twice)."""
    key = _check_key("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    shape = _shape("double_sided_maxwell", shape)
    try:
        pshape = np.broadcast_shapes(np.shape(loc), np.shape(scale))
    except ValueError:
        raise ValueError(f"double_sided_maxwell: loc and scale must broadcast together, got "
                         f"shapes {np.shape(loc)} and {np.shape(scale)}") from None
    shape = (shape or pshape) + pshape
    km, ks = split(key)
    return rademacher(ks, shape, dtype) * maxwell(km, shape, dtype) * _weak(scale) + \
        _weak(loc)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular floats on ``[left, right]`` peaking at ``mode``, by inverting the CDF."""
    key = _check_key("triangular", key)
    dtype = _float_dtype("triangular", dtype)
    (left, mode, right), shape = _params("triangular", dtype, shape, left, mode, right)
    left, mode, right = (fnp.broadcast_to(x, shape) for x in (left, mode, right))
    u = _uniform(key, shape, dtype, 0.0, 1.0, "triangular")
    width = right - left
    low = left + fnp.sqrt(u * width * (mode - left))
    high = right - fnp.sqrt((1.0 - u) * width * (right - mode))
    return fnp.where(u < (mode - left) / width, low, high)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian, scale 1) floats by Michael, Schucany and Haas' method."""
    key = _check_key("wald", key)
    dtype = _float_dtype("wald", dtype)
    (mean,), shape = _params("wald", dtype, shape, mean)
    k1, k2 = split(key)
    mean = fnp.broadcast_to(mean, shape)
    v = _normal(k1, shape, dtype, "wald")
    z = _uniform(k2, shape, dtype, 0.0, 1.0, "wald")
    y = v * v
    mean2 = mean * mean
    x = mean + mean2 * y / 2.0 - mean / 2.0 * fnp.sqrt(4.0 * mean * y + mean2 * (y * y))
    return fnp.where(z <= mean / (mean + x), x, mean2 / x)


# --- gamma-based distributions -----------------------------------------------------------

def chisquare(key, df, shape=None, dtype=None):
    """Chi-square(df) floats: ``2 Gamma(df / 2)``, drawn in log space."""
    key = _check_key("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    (df,), shape = _params("chisquare", dtype, shape, df)
    return _chisquare("chisquare", key, df, shape, dtype)


def _chisquare(name, key, df, shape, dtype):
    return lax.exp(_gamma(name, key, df / 2.0, shape, dtype, True)) * 2.0


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F(dfnum, dfden) floats: the ratio of two chi-square samples over their degrees."""
    key = _check_key("f", key)
    dtype = _float_dtype("f", dtype)
    (dfnum, dfden), shape = _params("f", dtype, shape, dfnum, dfden)
    kden, knum = split(key)
    num = _chisquare("f", knum, dfnum, shape, dtype) / dfnum
    return num / (_chisquare("f", kden, dfden, shape, dtype) / dfden)


def t(key, df, shape=None, dtype=None):
    """Student's t(df) floats: ``z sqrt((df / 2) / g)``, ``g`` Gamma(df / 2)."""
    key = _check_key("t", key)
    dtype = _float_dtype("t", dtype)
    (df,), shape = _params("t", dtype, shape, df)
    kn, kg = split(key)
    z = _normal(kn, shape, dtype, "t")
    half = df / 2.0
    return z * fnp.sqrt(half / _gamma("t", kg, half, shape, dtype, False))


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal floats (density ``exp(-|x|^p)``): ``s g^(1/p)`` with ``g``
    Gamma(1/p) and ``s`` a random sign."""
    key = _check_key("generalized_normal", key)
    dtype = _float_dtype("generalized_normal", dtype)
    shape = _shape("generalized_normal", shape)
    kg, ks = split(key)
    g = _gamma("generalized_normal", kg, 1.0 / _weak(p), shape, dtype, False)
    return rademacher(ks, shape, dtype) * g ** (1.0 / _weak(p))


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the unit ``p``-norm ball of dimension ``d`` (shape ``shape +
    (d,)``): generalized normals over ``(sum |g|^p + e)^(1/p)``, ``e`` exponential."""
    key = _check_key("ball", key)
    dtype = _float_dtype("ball", dtype)
    shape = _shape("ball", shape)
    d = _static_dim("ball", "d", d)
    kg, ke = split(key)
    g = generalized_normal(kg, p, shape + (d,), dtype)
    e = exponential(ke, shape, dtype)
    p = _weak(p)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1.0 / p))[..., None]


def _static_dim(name, what, n):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a static non-negative int (it sets the "
                        f"result's shape), got {type(n).__name__}; pass a Python int, or "
                        "mark it static under jit (static_argnums)") from None
    if n < 0:
        raise ValueError(f"{name}: {what} must be a non-negative int, got {n}")
    return n


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Matrices of shape ``shape + (n, m)`` (``m`` defaults to ``n``) uniform on the
    orthogonal group (semi-orthogonal when ``n != m``): the Q of a QR factorization of
    normal samples, its columns' signs fixed by R's diagonal (Mezzadri 2007)."""
    key = _check_key("orthogonal", key)
    dtype = _float_dtype("orthogonal", dtype)
    shape = _shape("orthogonal", shape)
    n = _static_dim("orthogonal", "n", n)
    m = n if m is None else _static_dim("orthogonal", "m", m)
    z = _normal(key, shape + (max(n, m), min(n, m)), dtype, "orthogonal")
    q, r = fnp.linalg.qr(z)
    x = q * fnp.sign(fnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return fnp.swapaxes(x, -1, -2) if n < m else x


# --- more discrete distributions ---------------------------------------------------------

def rademacher(key, shape=(), dtype=None):
    """-1 or 1 with equal probability (``2 bernoulli(0.5) - 1``), as ``dtype`` (default
    the default int)."""
    key = _check_key("rademacher", key)
    dtype = dtypes.default_int() if dtype is None else dtypes.canonical(dtype, "rademacher")
    b = bernoulli(key, 0.5, _shape("rademacher", shape))
    return lax.convert_element_type(2 * b.astype(dtype) - 1, dtype)


def _inexact_param(name, x):
    """A probability-like parameter in its own float dtype (ints promote to a float)."""
    x = to_array(x)
    if x.dtype.kind in "biu":
        x = lax.convert_element_type(x, dtypes.canonical(dtypes.to_inexact(
            dtypes.result_type(x)), name))
    elif x.dtype.kind == "c":
        raise TypeError(f"{name}: parameters must be real, got {describe(x)}")
    return x


def geometric(key, p, shape=None, dtype=None):
    """Geometric(p) integers >= 1 (trials until the first success):
    ``floor(log u / log1p(-p)) + 1``, computed in ``p``'s float dtype."""
    key = _check_key("geometric", key)
    dtype = _int_dtype("geometric", dtype, ValueError)
    p = _inexact_param("geometric", p)
    shape = _sample_shape("geometric", shape, p.shape)
    u = _uniform(key, shape, p.dtype, 0.0, 1.0, "geometric")
    u = fnp.where(u == 0.0, 1.0, u)      # as JAX: u = 0 taken as 1
    g = lax.floor(lax.log(u) / fnp.broadcast_to(lax.log1p(-p), shape)) + 1.0
    return lax.convert_element_type(g, dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) integers, computed in float32 as JAX does: Knuth's product of
    uniforms for ``lam < 10``, Hormann's transformed rejection (PTRS) otherwise, each
    a ``while_loop`` drawing a whole array of candidates per step."""
    key = _check_key("poisson", key)
    if key.shape[-1] != 2:   # JAX's poisson too is threefry2x32's only
        raise NotImplementedError(f"poisson: only implemented for the threefry2x32 RNG, "
                                  f"not {_impl_of(key)}, as in JAX; draw it from a threefry "
                                  "key, e.g. fnx.random.PRNGKey(seed, impl='threefry2x32')")
    dtype = _int_dtype("poisson", dtype)
    lam = to_array(lam)
    shape = _sample_shape("poisson", shape, lam.shape)
    lam = lax.convert_element_type(fnp.broadcast_to(lam, shape), np.float32)
    top = min(int(np.iinfo(dtype).max), 2**31 - 1)
    small = fnp.isnan(lam) | (lam < 10.0)
    knuth = _poisson_knuth(key, fnp.where(small, lam, 0.0), shape, dtype, top)
    ptrs = _poisson_ptrs(key, fnp.where(small, 1e5, lam), shape, dtype, top)
    out = fnp.where(small, knuth, ptrs)
    return fnp.where(lam == 0.0, np.array(0, dtype), out)


def _poisson_knuth(key, lam, shape, dtype, max_iters):
    def cond(c):
        i, _, _, log_prod = c
        return fnp.any(log_prod > -lam) & (i < max_iters)

    def body(c):
        i, k, key, log_prod = c
        ks = split(key)
        k = fnp.where(log_prod > -lam, k + np.array(1, dtype), k)
        u = _uniform(ks[1], shape, np.dtype(np.float32), 0.0, 1.0, "poisson")
        return i + 1, k, ks[0], log_prod + lax.log(u)

    init = (0, fnp.zeros(shape, dtype), key, fnp.zeros(shape, np.float32))
    return lax.while_loop(cond, body, init)[1] - np.array(1, dtype)


def _poisson_ptrs(key, lam, shape, dtype, max_iters):
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2.0)
    f32 = np.dtype(np.float32)

    def cond(c):
        i, _, accepted, _ = c
        return fnp.any(~accepted) & (i < max_iters)

    def body(c):
        i, k_out, accepted, key = c
        ks = split(key, 3)
        u = _uniform(ks[1], shape, f32, 0.0, 1.0, "poisson") - 0.5
        v = _uniform(ks[2], shape, f32, 0.0, 1.0, "poisson")
        us = 0.5 - fnp.abs(u)
        k = lax.floor((2.0 * a / us + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (us * us) + b))
        tt = -lam + k * log_lam - lax.lgamma(k + 1.0)
        accept = ((us >= 0.07) & (v <= v_r)) | \
            (~((k < 0.0) | ((us < 0.013) & (v > us))) & (s <= tt))
        return i + 1, fnp.where(accept, k, k_out), accepted | accept, ks[0]

    init = (0, fnp.full(shape, -1.0, f32), fnp.zeros(shape, bool), key)
    return lax.convert_element_type(lax.while_loop(cond, body, init)[1], dtype)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats of ``dtype``, computed in ``p``'s float dtype as
    JAX does: inversion (sums of geometric draws) where ``n min(p, 1-p) <= 10``, the
    BTRS transformed rejection (Hormann 1993) otherwise, each a ``while_loop``. As in
    JAX, ``n`` is floored, NaN or negative ``n`` and NaN or negative ``p`` give NaN, and
    ``n = inf`` gives ``inf``."""
    key = _check_key("binomial", key)
    dtype = _float_dtype("binomial", dtype)
    n, p = to_array(n), _inexact_param("binomial", p)
    shape = _sample_shape("binomial", shape, n.shape, p.shape)
    return _binomial(key, n, p, shape, dtype)


def _binomial(key, count, prob, shape, dtype):
    pdt = prob.dtype
    count = fnp.broadcast_to(lax.convert_element_type(count, pdt), shape)
    prob = fnp.broadcast_to(prob, shape)
    p_low = prob < 0.5
    q = fnp.where(p_low, prob, 1.0 - prob)
    bad_count = fnp.isnan(count) | (count < 0.0)
    inf_count = fnp.isinf(count)
    q_nan, q_neg = fnp.isnan(q), q < 0.0
    q = fnp.where(q_nan | q_neg, np.array(0.01, pdt), q)
    invert = bad_count | (count * q <= 10.0)
    count = lax.floor(count)
    inv = _binomial_inversion(key, fnp.where(invert, count, 0.0), q, shape)
    btrs = _btrs(key, fnp.where(invert, 1e4, count), fnp.where(invert, 0.5, q), shape)
    out = lax.convert_element_type(fnp.where(invert, inv, btrs), dtype)
    invalid = q_neg | q_nan | bad_count
    out = fnp.where(invalid, np.array(np.nan, dtype), out)
    out = fnp.where(inf_count & ~invalid, np.array(np.inf, dtype), out)
    flip = ~(p_low | bad_count | q_nan | inf_count)
    return fnp.where(flip, lax.convert_element_type(count, dtype) - out, out)


def _binomial_inversion(key, count, prob, shape):
    log_q = lax.log1p(-prob)
    zero = fnp.zeros(shape, prob.dtype)

    def cond(c):
        return fnp.any(c[1] <= count)

    def body(c):
        num, total, key = c
        ks = split(key)          # JAX draws from the first key and carries the second
        num = fnp.where(total <= count, num + 1.0, num)
        u = _uniform(ks[0], shape, prob.dtype, 0.0, 1.0, "binomial")
        return num, total + lax.ceil(lax.log(u) / log_q), ks[1]

    return lax.while_loop(cond, body, (zero, zero, key))[0] - 1.0


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(k):
    """``log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi)/2``: a table for k <= 9,
    else the series ``1/12 - ...`` in ``1/(k + 1)``."""
    table = np.asarray(_STIRLING_TAIL, k.dtype)
    kc = fnp.clip(k, 0.0, 9.0)
    kp1sq = (kc + 1.0) * (kc + 1.0)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (kc + 1.0)
    exact = fnp.take(fnp.asarray(table), lax.convert_element_type(lax.floor(kc), np.int32))
    return fnp.where(k <= 9.0, exact, approx)


def _btrs(key, count, prob, shape):
    sd = fnp.sqrt(count * prob * (1.0 - prob))
    b = 1.15 + 2.53 * sd
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1.0 - prob)
    alpha = (2.83 + 5.1 / b) * sd
    m = lax.floor((count + 1.0) * prob)
    dt = prob.dtype

    def cond(c_):
        return fnp.any(~c_[1])

    def body(c_):
        k_out, accepted, key = c_
        ks = split(key, 3)
        u = _uniform(ks[1], shape, dt, 0.0, 1.0, "binomial") - 0.5
        v = _uniform(ks[2], shape, dt, 0.0, 1.0, "binomial")
        us = 0.5 - fnp.abs(u)
        k = lax.floor((2.0 * a / us + b) * u + c)
        lv = lax.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * lax.log((m + 1.0) / (r * (count - m + 1.0)))
                 + (count + 1.0) * lax.log((count - m + 1.0) / (count - k + 1.0))
                 + (k + 0.5) * lax.log(r * (count - k + 1.0) / (k + 1.0))
                 + _stirling_tail(m) + _stirling_tail(count - m)
                 - _stirling_tail(k) - _stirling_tail(count - k))
        accept = ((us >= 0.07) & (v <= v_r)) | (~((k < 0.0) | (k > count)) & (lv <= bound))
        return fnp.where(accept, k, k_out), accepted | accept, ks[0]

    init = (fnp.full(shape, -1.0, dt), fnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[0]


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial(n, p) counts (outcomes along ``p``'s last axis) as floats of
    ``dtype``: one binomial per outcome, of the trials left over the probability left
    (a ``scan`` over the outcomes, one key each). ``shape`` is the full result shape
    (``p.shape`` by default)."""
    key = _check_key("multinomial", key)
    dtype = _float_dtype("multinomial", dtype)
    n, p = to_array(n), to_array(p)
    if p.ndim < 1:
        raise ValueError("multinomial: p must have rank >= 1 (outcomes along its last "
                         f"axis), got {describe(p)}")
    cdt = dtypes.canonical(dtypes.to_inexact(dtypes.result_type(n, p)), "multinomial")
    n, p = lax.convert_element_type(n, cdt), lax.convert_element_type(p, cdt)
    shape = p.shape if shape is None else _shape("multinomial", shape)
    if not shape:
        raise ValueError("multinomial: shape must have rank >= 1 (it includes the "
                         "outcomes axis), got ()")
    try:
        n = fnp.broadcast_to(n, shape[:-1])
        p = fnp.broadcast_to(p, shape)
    except ValueError:
        raise ValueError(f"multinomial: n (shape {n.shape}) must broadcast to shape[:-1] "
                         f"= {shape[:-1]} and p (shape {p.shape}) to shape = {shape}; "
                         "shape is the full result shape, outcomes last") from None
    p = fnp.moveaxis(p, -1, 0)
    left = lax.cumsum(p, 0, reverse=True)
    ratios = p / fnp.where(left == 0.0, 1.0, left)
    keys = split(key, shape[-1])

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        q = fnp.clip(ratio, 0.0, 1.0)
        count = _binomial(k, remainder, q, np.broadcast_shapes(remainder.shape, q.shape),
                          remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return lax.convert_element_type(fnp.moveaxis(counts, 0, -1), dtype)
