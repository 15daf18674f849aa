"""``lax.rng_bit_generator`` and ``lax.RandomAlgorithm`` against JAX's values: known-answer
vectors for each algorithm, output dtype and a few shapes (odd sizes, scalars, empty), the
advanced key, the counter's carry, both key forms (uint32[4], uint64[2]), jit against eager,
and vmap over keys (JAX's batching rule: every value from the first key)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fnx
from fnx import lax

ALG = lax.RandomAlgorithm
KEY = np.array([0x12345678, 0x9abcdef0, 0x0fedcba9, 0x87654321], np.uint32)

# Reference values produced by jax 0.10.2 on CPU (jax_enable_x64 on):
#   new_key, bits = jax.lax.rng_bit_generator(KEY, shape, dtype, algorithm)
# Each entry is (blocks, bits flattened): the new key is KEY with its third word advanced
# by ``blocks`` (the others unchanged, as JAX returned them).
KNOWN = {
    ("THREE_FRY", "uint32", ()): (1, [0x814878c9]),
    ("THREE_FRY", "uint32", (5,)): (3, [
        0x814878c9, 0xfbd8efaa, 0xbb976c84, 0x7094db2c, 0xbc220d92]),
    ("THREE_FRY", "uint32", (3, 3)): (6, [
        0x814878c9, 0xbb976c84, 0xbc220d92, 0xfbd8efaa, 0x7094db2c, 0x3f03d8c9, 0x57b50dc6,
        0x36ff29c1, 0x856ee894]),
    ("THREE_FRY", "uint32", (2, 3)): (3, [
        0x814878c9, 0xbb976c84, 0xbc220d92, 0xfbd8efaa, 0x7094db2c, 0x3f03d8c9]),
    ("THREE_FRY", "uint8", (7,)): (4, [0xc9, 0xaa, 0x84, 0x2c, 0x92, 0xc9, 0xc6]),
    ("THREE_FRY", "uint8", (3, 3)): (6, [0xc9, 0x84, 0x92, 0xaa, 0x2c, 0xc9, 0xc6, 0xc1, 0x94]),
    ("THREE_FRY", "uint16", (2, 3)): (3, [0x78c9, 0x6c84, 0xd92, 0xefaa, 0xdb2c, 0xd8c9]),
    ("THREE_FRY", "uint64", (3,)): (3, [
        0xfbd8efaa814878c9, 0x7094db2cbb976c84, 0x3f03d8c9bc220d92]),
    ("THREE_FRY", "uint64", (2, 1)): (2, [0xfbd8efaa814878c9, 0x7094db2cbb976c84]),
    ("PHILOX", "uint32", ()): (1, [0x24b5f219]),
    ("PHILOX", "uint32", (5,)): (2, [0x24b5f219, 0x724afc49, 0x6fa8a0e5, 0x27733f90, 0xa8093bb9]),
    ("PHILOX", "uint32", (3, 3)): (3, [
        0x24b5f219, 0x724afc49, 0x6fa8a0e5, 0x27733f90, 0xa8093bb9, 0xf6d3e39c, 0x23bb1469,
        0xba6f6c6b, 0xcb7768bb]),
    ("PHILOX", "uint32", (2, 3)): (2, [
        0x24b5f219, 0x724afc49, 0x6fa8a0e5, 0x27733f90, 0xa8093bb9, 0xf6d3e39c]),
    ("PHILOX", "uint8", (7,)): (2, [0x19, 0x49, 0xe5, 0x90, 0xb9, 0x9c, 0x69]),
    ("PHILOX", "uint8", (3, 3)): (3, [0x19, 0x49, 0xe5, 0x90, 0xb9, 0x9c, 0x69, 0x6b, 0xbb]),
    ("PHILOX", "uint16", (2, 3)): (2, [0xf219, 0xfc49, 0xa0e5, 0x3f90, 0x3bb9, 0xe39c]),
    ("PHILOX", "uint64", (3,)): (2, [0x724afc4924b5f219, 0x27733f906fa8a0e5, 0xf6d3e39ca8093bb9]),
    ("PHILOX", "uint64", (2, 1)): (1, [0x724afc4924b5f219, 0x27733f906fa8a0e5]),
}


# Counter wrap-around: jax 0.10.2 on CPU, key [5, 6, 0xfffffffe, 0xffffffff], shape (9,),
# uint32: (new key, bits).
CARRY_KEY = np.array([5, 6, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)
CARRY = {
    "THREE_FRY": ([5, 6, 3, 0], [0xfd427af3, 0x44c4ddbd, 0x8801e154, 0x34dce2c0, 0xf3f95a01,
                                 0x7fef19b9, 0x922801a0, 0x447f19c3, 0x7a22344a]),
    "PHILOX": ([5, 6, 1, 0], [0xe590a073, 0x4eb50601, 0xbaf0e326, 0xde4b7ff5, 0x18c64368,
                              0xb4e1a200, 0x419ac20e, 0x1c9ed13b, 0xc8d8fa9d]),
}

# vmap over keys: jax 0.10.2 on CPU,
#   jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (2,), algorithm=alg))(VMAP_KEYS)
# (the bits of all three from the first key, drawn as shape (3, 2); only it advances).
VMAP_KEYS = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], np.uint32)
VMAP = {
    "THREE_FRY": ([[1, 2, 6, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
                  [[0x5df433ec, 0x8617198e], [0x2c24a8a8, 0x9094fa5e],
                   [0x91386643, 0x59491919]]),
    "PHILOX": ([[1, 2, 5, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
               [[0x1e8fe864, 0x4d5e0bd7], [0x4b87c9be, 0x2d689201],
                [0x5273487b, 0x61c05696]]),
}


def _check(out, new_key, bits, dtype, shape):
    k, b = out
    assert k.dtype == np.uint32 and k.shape == (4,)
    assert b.dtype == np.dtype(dtype) and b.shape == shape
    np.testing.assert_array_equal(np.asarray(k), np.asarray(new_key, np.uint32))
    np.testing.assert_array_equal(np.asarray(b), np.asarray(bits, dtype).reshape(shape))


@pytest.mark.x64
@pytest.mark.parametrize("alg,dtype,shape", list(KNOWN), ids=str)
def test_known_answers_eager_and_jit(alg, dtype, shape):
    blocks, bits = KNOWN[alg, dtype, shape]
    new_key = KEY.copy()
    new_key[2] += np.uint32(blocks)
    algorithm = ALG["RNG_" + alg]
    _check(lax.rng_bit_generator(KEY, shape, dtype, algorithm), new_key, bits, dtype, shape)
    jitted = fnx.jit(lambda k: lax.rng_bit_generator(k, shape, dtype, algorithm))
    _check(jitted(KEY), new_key, bits, dtype, shape)
    if alg == "PHILOX":      # XLA's default on CPU is Philox
        _check(lax.rng_bit_generator(KEY, shape, dtype), new_key, bits, dtype, shape)
    # the uint64[2] key form: the same words, a uint64[2] key back
    k64, b64 = lax.rng_bit_generator(KEY.view(np.uint64), shape, dtype, algorithm)
    assert k64.dtype == np.uint64
    np.testing.assert_array_equal(np.asarray(k64).view(np.uint32), new_key)
    np.testing.assert_array_equal(np.asarray(b64), np.asarray(bits, dtype).reshape(shape))


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX"])
def test_counter_wraps_and_carries_as_jax(alg):
    new_key, bits = CARRY[alg]
    _check(lax.rng_bit_generator(CARRY_KEY, (9,), algorithm=ALG["RNG_" + alg]),
           new_key, bits, "uint32", (9,))


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX"])
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5)])
def test_empty_outputs_leave_the_key(alg, shape):
    k, b = lax.rng_bit_generator(KEY, shape, np.uint16, ALG["RNG_" + alg])
    assert b.shape == shape and b.dtype == np.uint16
    np.testing.assert_array_equal(np.asarray(k), KEY)


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX"])
def test_vmap_over_keys_is_jaxs_rule(alg):
    new_keys, bits = VMAP[alg]
    algorithm = ALG["RNG_" + alg]

    def f(k):
        return lax.rng_bit_generator(k, (2,), algorithm=algorithm)
    for out in (fnx.vmap(f)(VMAP_KEYS), fnx.jit(fnx.vmap(f))(VMAP_KEYS),
                fnx.vmap(f, in_axes=1)(VMAP_KEYS.T)):
        np.testing.assert_array_equal(np.asarray(out[0]), np.asarray(new_keys, np.uint32))
        np.testing.assert_array_equal(np.asarray(out[1]), np.asarray(bits, np.uint32))
    # an unmapped key inside vmap: one draw, broadcast
    k, b = fnx.vmap(lambda x: lax.rng_bit_generator(VMAP_KEYS[0], (2,), algorithm=algorithm),
                    axis_size=3)(np.zeros(3, np.float32))
    np.testing.assert_array_equal(np.asarray(b), np.broadcast_to(np.asarray(bits[0], np.uint32),
                                                                 (3, 2)))


def test_jit_equals_eager_over_shapes():
    f = fnx.jit(lax.rng_bit_generator, static_argnums=(1, 2, 3))
    for alg in ALG:
        for shape in [(), (1,), (7,), (4, 5), (3, 5, 7), (2, 1, 3)]:
            for dtype in (np.uint8, np.uint32):
                eager = lax.rng_bit_generator(KEY, shape, dtype, alg)
                for a, b in zip(eager, f(KEY, shape, dtype, alg)):
                    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_on_the_gpu_the_bits_are_the_cpus(gpu):
    f = fnx.jit(lambda k: [lax.rng_bit_generator(k, (3, 5), np.uint8, alg) for alg in ALG])
    want = [np.asarray(o) for pair in f(KEY) for o in pair]
    got = [o for pair in f(fnx.device_put(KEY, gpu)) for o in pair]
    for g, w in zip(got, want):
        assert g.device == gpu
        np.testing.assert_array_equal(np.asarray(g), w)


def test_algorithm_enum_and_forms():
    assert [int(a) for a in ALG] == [0, 1, 2]
    assert [str(a) for a in ALG] == ["RNG_DEFAULT", "RNG_THREE_FRY", "RNG_PHILOX"]
    assert lax.rng_bit_generator(KEY, 5)[1].shape == (5,)           # an int shape, as JAX
    assert lax.rng_bit_generator(KEY, np.array([2, 1]))[1].shape == (2, 1)
    out = fnx.eval_shape(lambda k: lax.rng_bit_generator(k, (3, 2), np.uint8), KEY)
    assert [o.shape for o in out] == [(4,), (3, 2)]
    assert [o.dtype for o in out] == [np.uint32, np.uint8]
    # integer bits carry no derivative: a zero-tangent path, as in JAX
    g = fnx.grad(lambda x: x * lax.rng_bit_generator(KEY, (3,))[1].astype(np.float32).sum())
    assert float(g(1.0)) == float(lax.rng_bit_generator(KEY, (3,))[1].astype(np.float32).sum())


def test_uint64_narrows_without_x64_as_jax():
    with fnx.enable_x64(False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k, b = lax.rng_bit_generator(KEY, (5,), np.uint64, ALG.RNG_PHILOX)
    assert b.dtype == np.uint32
    _blocks, bits = KNOWN["PHILOX", "uint32", (5,)]
    np.testing.assert_array_equal(np.asarray(b), np.asarray(bits, np.uint32))


@pytest.mark.parametrize("key,match", [
    (np.zeros(4, np.int32), r"rng_bit_generator: the key must be uint32\[4\].*i32\[4\]"),
    (np.zeros(2, np.uint32), r"u32\[2\].*concatenate"),
    (np.zeros((2, 4), np.uint32), r"u32\[2,4\].*vmap"),
])
def test_bad_keys_say_what_to_do(key, match):
    with pytest.raises(TypeError, match=match):
        lax.rng_bit_generator(key, (3,))


def test_bad_dtype_shape_algorithm_name_the_op():
    with pytest.raises(TypeError, match=r"rng_bit_generator: unsupported dtype int32.*uint8"):
        lax.rng_bit_generator(KEY, (3,), np.int32)
    with pytest.raises(TypeError, match=r"rng_bit_generator: shape must be"):
        lax.rng_bit_generator(KEY, (2.0,))
    with pytest.raises(ValueError, match=r"rng_bit_generator: shape must be.*\(-1,\)"):
        lax.rng_bit_generator(KEY, (-1,))
    with pytest.raises(ValueError, match=r"rng_bit_generator: algorithm must be"):
        lax.rng_bit_generator(KEY, (3,), algorithm=7)


# --- fnx.random's rbg and unsafe_rbg generators (keys uint32[4], bits from the above) -------
# jax 0.10.2 on CPU, jax.config.update('jax_default_prng_impl', impl), k = PRNGKey(42):
# split(k), fold_in(k, 7), bits(k, (5,)), uniform(k, (4,)) (as uint32 bit patterns),
# randint(k, (6,), 0, 100), permutation(k, 8), and
# vmap(lambda k: uniform(k, (2,)))(split(k, 3)) (as uint32 bit patterns).
RBG = {
    "rbg": dict(
        split=[0x6d3e048f, 0x1022172d, 0x6d3e048f, 0x1022172d,
               0x3d7b32d, 0xadd083f4, 0x3d7b32d, 0xadd083f4],
        fold_in=[0x97d0552f, 0x51bf719f, 0x97d0552f, 0x51bf719f],
        randint=[1, 20, 35, 41, 79, 92], permutation=[2, 1, 3, 6, 4, 5, 0, 7],
        vmap_uniform=[[1054457620, 1064526922], [1056282296, 1045840368],
                      [1063325276, 1062884216]]),
    "unsafe_rbg": dict(
        split=[0x9c3738d2, 0xb254e659, 0x10d103e3, 0x9a5aa0ba,
               0xf4b92cbf, 0x11c78816, 0x3384dcc2, 0x10606578],
        fold_in=[0x7d6d2018, 0xee979a1, 0x41f26cbe, 0x763beb9c],
        randint=[39, 91, 59, 37, 29, 36], permutation=[4, 3, 0, 2, 7, 1, 5, 6],
        vmap_uniform=[[1058814578, 1048866156], [1051367588, 1061825080],
                      [1036816496, 1062617204]]),
}
RBG_BITS = [0x9c3738d2, 0xb254e659, 0x10d103e3, 0x9a5aa0ba, 0x6a13e9ea]   # both impls
RBG_UNIFORM = [1058813752, 1060263142, 1032226832, 1058691744]


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_rbg_generators_draw_jaxs_numbers(impl):
    from fnx import random

    def eq(got, want, dtype=np.uint32):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want, dtype))

    want = RBG[impl]
    with fnx.default_prng_impl(impl):
        k = random.PRNGKey(42)
        eq(k, [0, 42, 0, 42])
        assert random.key_impl(k) == impl
        eq(random.split(k).reshape(-1), want["split"])
        eq(random.fold_in(k, 7), want["fold_in"])
        eq(random.bits(k, (5,)), RBG_BITS)
        eq(random.bits(k, (5,), np.uint8), np.asarray(RBG_BITS, np.uint32) & 0xFF, np.uint8)
        eq(np.asarray(random.uniform(k, (4,))).view(np.uint32), RBG_UNIFORM)
        eq(random.randint(k, (6,), 0, 100), want["randint"], np.int32)
        eq(random.permutation(k, 8), want["permutation"], np.int32)
        vm = fnx.vmap(lambda kk: random.uniform(kk, (2,)))(random.split(k, 3))
        eq(np.asarray(vm).view(np.uint32), want["vmap_uniform"])
        jitted = fnx.jit(lambda s: random.uniform(random.PRNGKey(s), (4,)))
        eq(np.asarray(jitted(42)).view(np.uint32), RBG_UNIFORM)
        with pytest.raises(NotImplementedError, match="poisson: only implemented for the "
                                                      "threefry2x32"):
            random.poisson(k, 3.0, (2,))
        with pytest.raises(NotImplementedError, match="gamma: .*threefry2x32 keys only"):
            random.gamma(k, 2.0, (2,))
    # an explicit impl, whatever the default; the default generator is threefry2x32 again
    eq(random.key(42, impl=impl), [0, 42, 0, 42])
    assert random.PRNGKey(42).shape == (2,)
    # jit's cache follows the flag: the same function traced again under another default
    f = fnx.jit(lambda s: random.PRNGKey(s))
    assert f(1).shape == (2,)
    with fnx.default_prng_impl(impl):
        assert f(1).shape == (4,)
