"""fnx.dtypes (JAX's jax.dtypes): every expected value below is JAX 0.10.2's result for the
same call, with jax_enable_x64 off unless a test turns it on."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import dtypes


@pytest.fixture
def x64():
    fnx.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        fnx.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("given,expected", [
    (float, "float32"), (int, "int32"), (complex, "complex64"), (bool, "bool"),
    (np.float64, "float32"), ("float64", "float32"), (np.int64, "int32"),
    ("uint64", "uint32"), (np.complex128, "complex64"), (np.float16, "float16"),
    ("int8", "int8"), (fnp.float32, "float32"), (None, "float32"), ("bfloat16", "bfloat16"),
])
def test_canonicalize_dtype(given, expected):
    assert dtypes.canonicalize_dtype(given) == np.dtype(expected if expected != "bfloat16"
                                                        else dtypes.bfloat16)


def test_canonicalize_dtype_x64(x64):
    assert dtypes.canonicalize_dtype(float) == np.float64
    assert dtypes.canonicalize_dtype(np.float64) == np.float64
    assert dtypes.canonicalize_dtype(np.int64) == np.int64
    assert dtypes.result_type(1.0) == np.float64


def test_canonicalize_dtype_float0_extended_and_unsupported():
    assert dtypes.canonicalize_dtype(dtypes.float0) == dtypes.float0
    with pytest.raises(ValueError, match="allow_extended_dtype"):
        dtypes.canonicalize_dtype(dtypes.prng_key)
    assert dtypes.canonicalize_dtype(dtypes.prng_key, allow_extended_dtype=True) \
        is dtypes.prng_key
    with pytest.raises(TypeError):  # JAX returns S2 unchanged; fnx has no string arrays
        dtypes.canonicalize_dtype(np.dtype("S2"))


ISSUB = [
    (np.float32, np.floating, True), (np.int32, np.integer, True),
    (dtypes.bfloat16, np.floating, True), (dtypes.bfloat16, np.inexact, True),
    (dtypes.bfloat16, np.number, True), (dtypes.bfloat16, np.generic, True),
    (dtypes.bfloat16, np.complexfloating, False), (dtypes.bfloat16, dtypes.bfloat16, True),
    ("bfloat16", np.floating, True), (np.float32, dtypes.bfloat16, False),
    (fnp.bfloat16, np.floating, True),
    ("float32", "float32", True), ("float32", np.float32, True),
    (dtypes.float0, np.floating, False), (dtypes.float0, np.generic, True),
    (dtypes.float0, dtypes.float0, True),
    (np.float32, dtypes.extended, False), (dtypes.prng_key, dtypes.extended, True),
    (dtypes.extended, dtypes.extended, True), (np.dtype("uint32"), dtypes.prng_key, False),
    (np.int8, np.signedinteger, True), (np.uint8, np.unsignedinteger, True),
    (np.float64, np.float32, False), (float, np.floating, True), (int, np.integer, True),
    (complex, np.complexfloating, True), (bool, np.bool_, True), (np.bool_, np.number, False),
    (np.float32, float, False), (np.int32, int, False), (np.float64, float, True),
    (None, np.floating, True), (np.float32, None, False), (None, None, True),
    (fnp.float32, np.floating, True), (np.float32, fnp.float32, True),
    (np.complex64, np.complexfloating, True),
]


@pytest.mark.parametrize("a,b,expected", ISSUB)
def test_issubdtype(a, b, expected):
    assert dtypes.issubdtype(a, b) is expected


def test_issubdtype_of_an_array_and_a_key():
    assert dtypes.issubdtype(fnp.ones(2), np.floating)
    assert not dtypes.issubdtype(fnx.random.PRNGKey(0).dtype, dtypes.prng_key)


def test_result_type():
    assert dtypes.result_type(1, 2.0) == np.float32
    assert dtypes.result_type(fnp.ones(2, "int8"), 2) == np.int8
    assert dtypes.result_type(np.float64) == np.float32
    assert dtypes.result_type(fnp.ones(2, fnp.bfloat16), 1.0) == dtypes.bfloat16
    assert dtypes.result_type(1.0, return_weak_type_flag=True) == (np.float32, True)
    assert dtypes.result_type(1, return_weak_type_flag=True) == (np.int32, True)
    assert dtypes.result_type(1, fnp.ones(2), return_weak_type_flag=True) == (np.float32, False)
    assert dtypes.result_type(np.ones(2), return_weak_type_flag=True) == (np.float32, False)
    with pytest.raises(ValueError, match="at least one"):
        dtypes.result_type()
    with pytest.raises(dtypes.TypePromotionError):
        dtypes.result_type(np.float32, dtypes.float0)
    assert issubclass(dtypes.TypePromotionError, ValueError)


@pytest.mark.parametrize("x,expected", [
    (1, int), (1.0, float), (True, bool), (1j, complex), (np.float32(1), float),
    (fnp.ones(2), float), (np.int8(3), int), (np.uint8(1), int), (np.ones(2), float),
])
def test_scalar_type_of(x, expected):
    assert dtypes.scalar_type_of(x) is expected


def test_scalar_type_of_bfloat16_and_errors():
    assert dtypes.scalar_type_of(fnp.ones(2, fnp.bfloat16)) is float
    with pytest.raises(TypeError):
        dtypes.scalar_type_of(np.dtype("S2"))
    with pytest.raises(ValueError):
        dtypes.scalar_type_of(None)


@pytest.mark.parametrize("dt,bits", [("bool", 8), ("int8", 8), ("uint16", 16), ("float64", 64),
                                     ("complex128", 128), ("complex64", 64), ("bfloat16", 16),
                                     (np.float16, 16), (np.float32, 32)])
def test_itemsize_bits(dt, bits):
    assert dtypes.itemsize_bits(dt) == bits


def test_itemsize_bits_errors():
    with pytest.raises(ValueError, match="None"):
        dtypes.itemsize_bits(None)
    with pytest.raises(ValueError, match="float0"):
        dtypes.itemsize_bits(dtypes.float0)


def test_finfo_iinfo_take_numpy_scalar_types():
    assert dtypes.finfo(dtypes.bfloat16).eps == 0.0078125
    assert dtypes.finfo("bfloat16").bits == 16
    assert dtypes.finfo(np.float32).eps == float(np.finfo(np.float32).eps)
    assert dtypes.iinfo(np.int8).max == 127
    assert dtypes.iinfo("uint16").max == 65535


def test_float0_is_jaxs_and_what_grad_gives_integer_inputs():
    assert dtypes.float0 == np.dtype([("float0", "V")])
    g = fnx.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert g[1].dtype == dtypes.float0


def test_python_ints_wrap_into_narrow_integer_arrays_as_jax():
    """A Python int that fits the default int but not a narrower operand's dtype wraps
    into it, as JAX's conversion does (NumPy 2 raises); beyond the default int it is
    still an OverflowError (JAX 0.10's values)."""
    import fnx
    import fnx.numpy as fnp
    i8, u8 = fnp.arange(3, dtype=np.int8), fnp.arange(3, dtype=np.uint8)
    assert (i8 + 300).tolist() == [44, 45, 46] and (300 + i8).tolist() == [44, 45, 46]
    assert (i8 * 1000).tolist() == [0, -24, -48] and (u8 + (-1)).tolist() == [255, 0, 1]
    assert fnx.jit(lambda v: v + 300)(i8).tolist() == [44, 45, 46]
    assert (i8 + 300).dtype == np.int8
    for bad in (lambda: fnp.arange(3) + 2**40, lambda: i8 + 2**40,
                lambda: fnp.arange(3, dtype=np.uint32) + 3_000_000_000):
        with pytest.raises(OverflowError, match="does not fit in int32"):
            bad()
