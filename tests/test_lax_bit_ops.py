"""``lax.bitcast_convert_type``, ``population_count`` and ``clz`` against Python's integers
and NumPy's views (every int8/uint8 value; random values of the wider types, x64 included),
through jit, vmap and the emulated GPU; and the special functions ``lax`` names against
SciPy."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special as sp

import fnx
from fnx import lax
from fnx.errors import ShapeError

INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def _values(dtype):
    dt = np.dtype(dtype)
    if dt.itemsize == 1:
        return np.arange(256, dtype=np.uint8).view(dt)          # every value
    info = np.iinfo(dt)
    rng = np.random.default_rng(dt.itemsize)
    edges = np.array([0, 1, 2, info.max, info.min, info.max // 3, info.min + 1], dt)
    return np.concatenate([edges, rng.integers(info.min, info.max, 500, dtype=dt, endpoint=True)])


def _bits(v, width):
    return int(v) & ((1 << width) - 1)   # two's complement, as an unsigned integer


@pytest.mark.parametrize("dtype", INTS)
def test_population_count_and_clz_equal_pythons(dtype):
    x = _values(dtype)
    width = x.dtype.itemsize * 8
    with fnx.enable_x64(x.dtype.itemsize == 8):
        pop, lead = lax.population_count(x), lax.clz(x)
        jitted = fnx.jit(lambda v: (lax.population_count(v), lax.clz(v)))(x)
    assert pop.dtype == lead.dtype == x.dtype
    want_pop = [bin(_bits(v, width)).count("1") for v in x.tolist()]
    want_clz = [width - _bits(v, width).bit_length() for v in x.tolist()]
    assert np.asarray(pop).tolist() == want_pop and np.asarray(lead).tolist() == want_clz
    assert np.asarray(jitted[0]).tolist() == want_pop
    assert np.asarray(jitted[1]).tolist() == want_clz


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("int32", "float32"),
                                      ("float32", "uint8"), ("uint8", "float32"),
                                      ("int16", "uint16"), ("float32", "float16"),
                                      ("uint32", "int8"), ("float64", "uint32"),
                                      ("uint16", "float64"), ("complex64", "float32")])
def test_bitcast_equals_numpys_view(src, dst):
    s, d = np.dtype(src), np.dtype(dst)
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, (3, 2, 8), dtype=np.uint8)
    x = raw.view(s)                                 # (3, 2, 8 / itemsize)
    if d.itemsize > s.itemsize:                     # the last dimension must be the ratio
        x = x.reshape(3, -1, d.itemsize // s.itemsize)
    want = x.view(d)
    want = want.reshape(x.shape[:-1]) if d.itemsize > s.itemsize else (
        want.reshape(x.shape + (s.itemsize // d.itemsize,)) if d.itemsize < s.itemsize
        else want)
    with fnx.enable_x64("64" in src + dst and "complex64" not in src):
        got = lax.bitcast_convert_type(x, d)
        jitted = fnx.jit(lambda v: lax.bitcast_convert_type(v, d))(x)
        batched = fnx.vmap(lambda v: lax.bitcast_convert_type(v, d))(x)
    for out in (got, jitted, batched):
        assert out.dtype == d and out.shape == want.shape
        np.testing.assert_array_equal(np.asarray(out).view(np.uint8), want.view(np.uint8))


def test_bitcast_of_a_transposed_operand_and_a_scalar():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(lax.bitcast_convert_type(x.T, np.int32), x.T.view(np.int32))
    one = lax.bitcast_convert_type(np.float32(1.0), np.uint8)
    assert one.shape == (4,) and np.asarray(one).tolist() == [0, 0, 128, 63]
    assert float(lax.bitcast_convert_type(np.uint8([0, 0, 128, 63]), np.float32)) == 1.0


def test_bitcast_errors_say_what_to_do():
    with pytest.raises(ShapeError, match=r"u8\[3\] to float32 .*last dimension must be 4"):
        lax.bitcast_convert_type(np.zeros(3, np.uint8), np.float32)
    with pytest.raises(TypeError, match="convert_element_type"):
        lax.bitcast_convert_type(np.zeros(3, bool), np.uint8)
    with pytest.raises(TypeError, match=r"population_count: needs an integer.*f32\[2\]"):
        lax.population_count(np.zeros(2, np.float32))


def test_bits_on_the_emulated_gpu(gpu):
    x = _values("int32")
    f = fnx.jit(lambda v: (lax.population_count(v), lax.clz(v),
                           lax.bitcast_convert_type(lax.convert_element_type(v, np.float32),
                                                    np.uint32)))
    want = [np.asarray(o) for o in f(x)]
    got = f(fnx.device_put(x, gpu))
    for g, w in zip(got, want):
        assert g.device == gpu
        np.testing.assert_array_equal(np.asarray(g), w)


def test_special_functions_lax_names():
    a = np.array([0.5, 2.0, 7.5], np.float32)
    x = np.array([0.3, 1.0, 9.0], np.float32)
    np.testing.assert_allclose(lax.igamma(a, x), sp.gammainc(a, x), rtol=2e-6)
    np.testing.assert_allclose(lax.igammac(a, x), sp.gammaincc(a, x), rtol=2e-6)
    np.testing.assert_allclose(lax.zeta(a + 1, x), sp.zeta(a + 1, x), rtol=2e-6)
    np.testing.assert_allclose(lax.betainc(a, a + 1, x / 10), sp.betainc(a, a + 1, x / 10),
                               rtol=2e-6)
    np.testing.assert_allclose(lax.bessel_i0e(x), sp.i0e(x), rtol=2e-6)
    np.testing.assert_allclose(lax.bessel_i1e(x), sp.i1e(x), rtol=2e-6)
    h = 1e-4
    with fnx.enable_x64(True):
        a64, x64 = a.astype(np.float64), x.astype(np.float64)
        fd = (sp.gammainc(a64 + h, x64) - sp.gammainc(a64 - h, x64)) / (2 * h)
        np.testing.assert_allclose(lax.igamma_grad_a(a64, x64), fd, rtol=1e-6)
    with pytest.raises(TypeError, match="one dtype.*convert_element_type"):
        lax.igamma(a, x.astype(np.int32))
    assert lax.broadcast_shapes((2, 1), (3,), ()) == (2, 3)


# --- reduce_precision -------------------------------------------------------------------------

def _random_floats(n):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([x, np.float32([0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520,
                                          2.0**-14, 2.0**-15, 3.4e38, 1.0 + 2.0**-8])])


def test_reduce_precision_is_bfloat16_and_float16_rounding():
    import ml_dtypes
    x = _random_floats(100_000)
    with np.errstate(over="ignore", invalid="ignore"):
        # float32's exponent range kept: its subnormals round like the rest (XLA's, too)
        bf = x.astype(ml_dtypes.bfloat16).astype(np.float32)
        half = x.astype(np.float16).astype(np.float32)
        half = np.where(np.abs(half) < 2.0**-14, np.copysign(0, x), half)
    # just below float16's least normal, float16's own rounding (to its subnormals' grid)
    # differs from rounding the mantissa first and then flushing (XLA's): the checks below
    border = (np.abs(x) >= 2.0**-15) & (np.abs(x) < 2.0**-14)
    for (e, m), want, skip in (((8, 7), bf, np.isnan(x)), ((5, 10), half, np.isnan(x) | border)):
        got = np.asarray(lax.reduce_precision(x, e, m))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32)[~skip], want.view(np.uint32)[~skip])
        assert np.isnan(got[np.isnan(x)]).all()
    edge = np.float32([2.0**-14 - 2.0**-24, 2.0**-14 - 2.0**-26, -(2.0**-14 - 2.0**-26),
                       2.0**-15, 65519, 65520])      # JAX 0.10's results below
    assert np.asarray(lax.reduce_precision(edge, 5, 10)).tolist() == [
        0.0, 2.0**-14, -(2.0**-14), 0.0, 65504.0, np.inf]
    np.testing.assert_array_equal(lax.reduce_precision(x, 8, 23), x)   # float32's own format


def test_reduce_precision_transforms():
    x = np.float32([1.0 + 2.0**-9, 3.3, -1e-3])
    f = lambda v: lax.reduce_precision(v, 5, 10)   # noqa: E731
    np.testing.assert_array_equal(fnx.jit(f)(x), f(x))
    np.testing.assert_array_equal(fnx.vmap(f)(x[:, None])[:, 0], f(x))
    # linear, as JAX: the tangent is rounded the same way
    _, t = fnx.jvp(f, (x,), (x,))
    np.testing.assert_array_equal(t, f(x))
    np.testing.assert_array_equal(fnx.grad(lambda v: f(v).sum())(x), np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"reduce_precision: needs a floating.*i32\[3\]"):
        lax.reduce_precision(np.arange(3, dtype=np.int32), 5, 10)
