"""JAX's ``lax.rng_bit_generator`` and ``lax.RandomAlgorithm``: XLA's stateless bit
generator (its ``RngBitGenerator`` operation), with the bits XLA's CPU backend gives.

``rng_bit_generator(key, shape, dtype, algorithm) -> (new_key, bits)``. The key is a
``uint32[4]`` (JAX's usual form; a ``uint64[2]`` under ``jax_enable_x64`` too), read as
two 64-bit words, ``K = key64[0]`` and ``S = key64[1]`` (``key64`` is the ``uint32[4]``
viewed as ``uint64[2]``, little-endian: ``key[0]`` is the low half of ``K``). ``K`` is
the cipher key, ``S`` a counter; the new key is ``(K, S + blocks)`` (wrapping modulo
2**64), ``blocks`` the number of cipher calls the draw used.

- ``RNG_PHILOX`` (and ``RNG_DEFAULT``, which is Philox on CPU): Philox-4x32-10 (Salmon et
  al., SC 2011) under the key ``(K_lo, K_hi)``, block ``i`` encrypting the 128-bit
  counter ``(S + i) + 2**64 K`` (the carry of ``S + i`` goes into the high half). Each
  block gives four words, laid out block by block (``w0 w1 w2 w3`` of block 0, then of
  block 1, ...), cut to the output size; ``blocks = ceil(n / 4)``. uint64 takes two
  words per value, ``w0 | w1 << 32`` and ``w2 | w3 << 32`` (``ceil(n / 2)`` blocks);
  uint8 and uint16 take the low bits of one word each.
- ``RNG_THREE_FRY``: Threefry-2x32 (20 rounds) under the key ``(K_lo, K_hi)``, block
  ``i`` encrypting the 64-bit counter ``S + i`` (as ``(lo, hi)``). uint64: one block per
  value, ``y0 | y1 << 32``. 32 bits and narrower: the output shape is split in half
  along its first even dimension (else the largest, the first of equals; a scalar is
  taken as ``(1,)``), block ``i`` covering element ``i`` of the half shape in C order;
  its ``y0`` and ``y1`` go to the two adjacent elements ``2j, 2j + 1`` along the split
  dimension (an odd dimension drops its last ``y1``); narrow dtypes take the low bits.

Under ``vmap`` over keys this is JAX's batching rule: every value comes from the first
key of the batch, drawn as one output of shape ``(batch, *shape)``, and only the first
key is advanced (the others come back unchanged). The bits carry no derivative.
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

from ..core import dtypes
from ..core.array import to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.jvp import defjvp_zero
from . import ops as L
from .rule_helpers import describe, quiet

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p"]

_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
_OUT_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))


class RandomAlgorithm(enum.IntEnum):
    """Which algorithm ``rng_bit_generator`` runs (JAX's ``lax.RandomAlgorithm``)."""

    RNG_DEFAULT = 0
    "The platform's default algorithm (Philox on CPU)."

    RNG_THREE_FRY = 1
    "The Threefry-2x32 PRNG algorithm."

    RNG_PHILOX = 2
    "The Philox-4x32 PRNG algorithm."

    def __str__(self):
        return self.name


# --- the ciphers (NumPy uint32 arrays, wrapping) ---------------------------------------

_TF_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_TF_PARITY = np.uint32(0x1BD11BDA)
_PHILOX_MUL = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_PHILOX_BUMP = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))
_SHIFT32 = np.uint64(32)


def _threefry(k0, k1, x0, x1):
    """Threefry-2x32, 20 rounds: key words ``k0, k1`` (uint32[1]), counter arrays."""
    ks = (k0, k1, k0 ^ k1 ^ _TF_PARITY)
    a = x0 + ks[0]
    b = x1 + ks[1]
    for i in range(1, 6):
        for r in _TF_ROTATIONS[(i - 1) % 2]:
            a += b
            b = (b << np.uint32(r)) | (b >> np.uint32(32 - r))
            b ^= a
        a += ks[i % 3]
        b += ks[(i + 1) % 3]
        b += np.uint32(i)
    return a, b


def _philox(k0, k1, c0, c1, c2, c3):
    """Philox-4x32, 10 rounds: key words ``k0, k1`` (uint32[1]), counter arrays."""
    k0, k1 = k0.copy(), k1.copy()
    for _ in range(10):
        p0 = c0.astype(_U64) * _PHILOX_MUL[0]
        p1 = c2.astype(_U64) * _PHILOX_MUL[1]
        c0 = (p1 >> _SHIFT32).astype(_U32) ^ c1 ^ k0
        c1 = p1.astype(_U32)
        c2 = (p0 >> _SHIFT32).astype(_U32) ^ c3 ^ k1
        c3 = p0.astype(_U32)
        k0 += _PHILOX_BUMP[0]
        k1 += _PHILOX_BUMP[1]
    return c0, c1, c2, c3


def _halves(x):
    """uint64 array -> (low, high) uint32 arrays."""
    return x.astype(_U32), (x >> _SHIFT32).astype(_U32)


def _join(lo, hi):
    return lo.astype(_U64) | (hi.astype(_U64) << _SHIFT32)


def _counters(state, n):
    """``state + [0, n)`` wrapping modulo 2**64, and the carry out of each."""
    ctr = np.arange(n, dtype=_U64) + state
    return ctr, ctr < state


def _philox_words(key64, state, nwords):
    """``ceil(nwords / 4)`` Philox blocks, their four words each as a column."""
    blocks = -(-nwords // 4)
    ctr, carry = _counters(state, blocks)
    high = key64 + carry.astype(_U64)
    k0, k1 = _halves(key64)
    words = _philox(k0, k1, *_halves(ctr), *_halves(high))
    return np.stack(words, axis=1), blocks


def _split_dim(shape):
    for i, d in enumerate(shape):
        if d % 2 == 0:
            return i
    return max(range(len(shape)), key=lambda i: (shape[i], -i))


def _threefry_bits(key64, state, shape, dtype):
    k0, k1 = _halves(key64)
    if dtype.itemsize == 8:
        blocks = math.prod(shape)
        ctr, _ = _counters(state, blocks)
        y0, y1 = _threefry(k0, k1, *_halves(ctr))
        return _join(y0, y1).reshape(shape), blocks
    if not shape:
        ctr, _ = _counters(state, 1)
        y0, _y1 = _threefry(k0, k1, *_halves(ctr))
        return y0.reshape(()).astype(dtype), 1
    sd = _split_dim(shape)
    half = shape[:sd] + (-(-shape[sd] // 2), 1) + shape[sd + 1:]
    blocks = math.prod(half)
    ctr, _ = _counters(state, blocks)
    y0, y1 = _threefry(k0, k1, *_halves(ctr))
    both = np.concatenate([y0.reshape(half), y1.reshape(half)], axis=sd + 1)
    full = shape[:sd] + (2 * half[sd],) + shape[sd + 1:]
    bits = both.reshape(full)[tuple(slice(0, d) for d in shape)]
    return np.ascontiguousarray(bits).astype(dtype), blocks


def _philox_bits(key64, state, shape, dtype):
    n = math.prod(shape)
    if dtype.itemsize == 8:
        words, blocks = _philox_words(key64, state, 2 * n)
        bits = np.stack([_join(words[:, 0], words[:, 1]), _join(words[:, 2], words[:, 3])],
                        axis=1)
    else:
        words, blocks = _philox_words(key64, state, n)
        bits = words
    return bits.reshape(-1)[:n].reshape(shape).astype(dtype), blocks


def _rbg_impl(key, *, shape, dtype, algorithm):
    key = np.asarray(key)
    key64 = np.ascontiguousarray(key).view(_U64) if key.dtype == _U32 else key
    k, state = key64[:1].copy(), key64[1:2].copy()
    gen = _threefry_bits if algorithm == RandomAlgorithm.RNG_THREE_FRY else _philox_bits
    bits, blocks = gen(k, state, tuple(shape), np.dtype(dtype))
    new64 = np.concatenate([k, state + np.uint64(blocks % 2**64)])
    new_key = new64.view(_U32) if key.dtype == _U32 else new64
    return [new_key, bits]


# --- the primitive -----------------------------------------------------------------------

def _key_problem(key):
    """Why ``key`` (an aval) is no rng_bit_generator key, or None."""
    if (key.dtype == _U32 and tuple(key.shape) == (4,)) or \
            (key.dtype == _U64 and tuple(key.shape) == (2,)):
        return None
    if key.ndim >= 2 and (key.dtype, key.shape[-1]) in ((_U32, 4), (_U64, 2)):
        hint = "a batch of keys: map over it with fnx.vmap"
    elif key.dtype == _U32 and tuple(key.shape) == (2,):
        hint = ("an fnx.random key has two words; JAX's rbg keys repeat them: "
                "fnx.numpy.concatenate([key, key])")
    else:
        hint = "make one with e.g. fnx.numpy.array([0, 0, 0, seed], dtype='uint32')"
    return (f"rng_bit_generator: the key must be uint32[4] (or uint64[2] under "
            f"jax_enable_x64), got {describe(key)}; {hint}")


def _rbg_rule(key, *, shape, dtype, algorithm):
    problem = _key_problem(key)
    if problem:
        raise ShapeError(problem)
    return [ShapeDtypeStruct(key.shape, key.dtype, key.weak_type),
            ShapeDtypeStruct(tuple(shape), np.dtype(dtype))]


rng_bit_generator_p = Primitive("rng_bit_generator", shape_rule=_rbg_rule,
                                impl=quiet(_rbg_impl), multiple_results=True)
defjvp_zero(rng_bit_generator_p)     # integer bits: no derivative


def _rbg_batch(vals, dims, size, *, shape, dtype, algorithm):
    # JAX's rule (jax/_src/lax/control_flow/loops.py): the whole batch's bits from the
    # first key, and only that key advanced. vmap hands the batch axis at 0.
    keys, = vals
    first = L.reshape(L.slice(keys, (0, 0), (1, keys.shape[1])), (keys.shape[1],))
    new_key, bits = rng_bit_generator_p.bind(first, shape=(size, *shape), dtype=dtype,
                                             algorithm=algorithm)
    rest = L.slice(keys, (1, 0), tuple(keys.shape))
    new_keys = L.concatenate([L.reshape(new_key, (1, keys.shape[1])), rest], 0)
    return [new_keys, bits], [0, 0]


rng_bit_generator_p.batch = _rbg_batch


# --- the function ------------------------------------------------------------------------

def _canonical_shape(shape):
    try:
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
            shape = (shape,)
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"rng_bit_generator: shape must be a sequence of non-negative "
                        f"ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"rng_bit_generator: shape must be a sequence of non-negative "
                         f"ints, got {dims}")
    return dims


def _algorithm(algorithm):
    try:
        return RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(f"rng_bit_generator: algorithm must be a lax.RandomAlgorithm "
                         f"(RNG_DEFAULT, RNG_THREE_FRY or RNG_PHILOX), got "
                         f"{algorithm!r}") from None


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """``(new_key, bits)``: uniformly random bits of ``shape`` and unsigned ``dtype``
    (uint8/16/32/64) from XLA's stateless generator (JAX's ``lax.rng_bit_generator``,
    the bits of JAX on CPU), and the key advanced past them.

    ``key`` is ``uint32[4]`` (or ``uint64[2]``); ``algorithm`` a ``RandomAlgorithm``
    (``RNG_DEFAULT`` is Philox-4x32 on CPU, as in XLA). uint64 needs
    ``jax_enable_x64`` (else it narrows to uint32, with a warning, as in JAX).
    ``out_sharding`` is accepted and ignored (one device). Most code should use
    ``fnx.random`` instead."""
    del out_sharding
    shape = _canonical_shape(shape)
    dt = dtypes.canonical(dtype, "rng_bit_generator")
    if dt not in _OUT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dt}; it draws unsigned "
                        "integers only: uint8, uint16, uint32 or uint64 (convert or "
                        "bitcast the bits afterwards)")
    algorithm = _algorithm(algorithm)
    k = to_array(key, "rng_bit_generator")
    problem = _key_problem(k)
    if problem:
        raise TypeError(problem)
    return tuple(rng_bit_generator_p.bind(k, shape=shape, dtype=dt, algorithm=algorithm))
