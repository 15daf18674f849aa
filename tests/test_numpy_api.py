"""The core ``fnx.numpy`` surface against NumPy (values) and JAX's promotion
lattice (dtypes and weak types), eagerly and under ``fnx.jit``.

Conventions used throughout:

- values are compared with NumPy computing in the dtype fnx is expected to
  return (the lattice decides dtypes; NumPy decides values);
- every function is also run under ``fnx.jit`` with its array arguments
  traced, and the result must be *identical* to the eager one: same dtype,
  same weak type, same bits. Eager binary ops on same-dtype arrays and on
  Python scalars take a NumPy fast path, traced ones go through promotion and
  the lax primitives, so this compares the two paths.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
import fnx.numpy as fnp
from fnx.errors import ConcretizationError

# NumPy's floating-point warnings (inf - inf...) are not what these tests are about.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# FNX_TEST_EXAMPLES=500 runs a longer, randomized search (the default is quick and fixed).
_EXAMPLES = int(os.environ.get("FNX_TEST_EXAMPLES", "0"))
SETTINGS = settings(deadline=None, max_examples=_EXAMPLES or 40, derandomize=not _EXAMPLES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
FEW = settings(SETTINGS, max_examples=_EXAMPLES or 10)


# Tests of the 32-bit defaults (Python scalars, creation without a dtype): x64 off.
X32_TESTS = {"test_product_dtypes_and_errors", "test_unary_on_weak_inputs_is_weak", "test_creation_vs_numpy",
             "test_empty_and_like_functions", "test_result_type_of_python_scalars_and_three_args",
             "test_documented_promotions", "test_square_and_abs_of_bool",
             "test_scalar_base_and_exponent_power", "test_clip",
             "test_where_scalars_and_nonbool_condition", "test_array_and_asarray",
             "test_array_from_lists_containing_arrays", "test_linspace_array_bounds_axis_retstep",
             "test_concatenate_and_stack_promote", "test_trace_dtype_and_reshape_errors",
             "test_accumulation_dtypes"}


@pytest.fixture(autouse=True)
def x64(request):
    """The tests here cover all 14 dtypes, 64-bit ones included, which exist only under
    jax_enable_x64 (as in JAX): they run with the flag on (and restore it), except those
    in X32_TESTS, which check the 32-bit defaults with the flag off."""
    with fnx.enable_x64(request.node.originalname not in X32_TESTS):
        yield

# ---------------------------------------------------------------------------------------
# The promotion lattice, written out by hand from JAX's documented table
# (https://jax.readthedocs.io/en/latest/type_promotion.html, x64 column values: fnx keeps
# 64-bit inputs 64-bit, so where JAX without x64 would say f32/i32 for 64-bit inputs,
# this table says f8/i8). u8 with a signed int is JAX's weak float "f*", which fnx
# materializes as float64 because a 64-bit int is involved.
# ---------------------------------------------------------------------------------------
_TABLE = """
      b   u1  u2  u4  u8  i1  i2  i4  i8  f2  f4  f8  c4  c8
b     b   u1  u2  u4  u8  i1  i2  i4  i8  f2  f4  f8  c4  c8
u1    u1  u1  u2  u4  u8  i2  i2  i4  i8  f2  f4  f8  c4  c8
u2    u2  u2  u2  u4  u8  i4  i4  i4  i8  f2  f4  f8  c4  c8
u4    u4  u4  u4  u4  u8  i8  i8  i8  i8  f2  f4  f8  c4  c8
u8    u8  u8  u8  u8  u8  f8  f8  f8  f8  f2  f4  f8  c4  c8
i1    i1  i2  i4  i8  f8  i1  i2  i4  i8  f2  f4  f8  c4  c8
i2    i2  i2  i4  i8  f8  i2  i2  i4  i8  f2  f4  f8  c4  c8
i4    i4  i4  i4  i8  f8  i4  i4  i4  i8  f2  f4  f8  c4  c8
i8    i8  i8  i8  i8  f8  i8  i8  i8  i8  f2  f4  f8  c4  c8
f2    f2  f2  f2  f2  f2  f2  f2  f2  f2  f2  f4  f8  c4  c8
f4    f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f8  c4  c8
f8    f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  c8  c8
c4    c4  c4  c4  c4  c4  c4  c4  c4  c4  c4  c4  c8  c4  c8
c8    c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8
"""
SHORT = {"b": np.bool_, "u1": np.uint8, "u2": np.uint16, "u4": np.uint32, "u8": np.uint64,
         "i1": np.int8, "i2": np.int16, "i4": np.int32, "i8": np.int64, "f2": np.float16,
         "f4": np.float32, "f8": np.float64, "c4": np.complex64, "c8": np.complex128}
SHORT = {k: np.dtype(v) for k, v in SHORT.items()}


def _parse_table(text):
    rows = [r.split() for r in text.strip().splitlines()]
    cols = rows[0]
    return {(SHORT[r[0]], SHORT[c]): SHORT[v] for r in rows[1:] for c, v in zip(cols, r[1:])}


PROMOTE = _parse_table(_TABLE)
DTYPES = list(SHORT.values())
B, U1, U2, U4, U8, I1, I2, I4, I8, F2, F4, F8, C4, C8 = DTYPES
INEXACT = {d: (d if d.kind in "fc" else F8 if d.itemsize == 8 else F4) for d in DTYPES}
REAL_OF = {C4: F4, C8: F8}
_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def weak_result(dtype, scalar):
    """(dtype, weak) of a binary op between a strong array of ``dtype`` and a Python scalar."""
    if type(scalar) is bool:
        return PROMOTE[dtype, B], False
    k = {int: 1, float: 2, complex: 3}[type(scalar)]
    if _RANK[dtype.kind] >= k:
        return dtype, False
    if k == 3 and dtype.kind == "f":  # f* -> c* and f16 -> f32 -> c64: floats meet c* strongly
        return (C8 if dtype == F8 else C4), False
    wide = (dtype.kind in "iu" and dtype.itemsize == 8) or dtype == F8
    if fnx.config.jax_enable_x64:  # weak scalars materialize as the 64-bit defaults
        return {1: I8, 2: F8, 3: C8}[k], True
    return {1: I4, 2: F8 if wide else F4, 3: C8 if wide else C4}[k], True


def strong_weak(d1, d2):
    """Two strong arrays promote to a weak type only through JAX's f* (u64 with a signed int)."""
    return {d1.kind, d2.kind} == {"u", "i"} and U8 in (d1, d2)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------

def _tol(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        dtype = REAL_OF[dtype]
    return {2: 4e-3, 4: 2e-5, 8: 1e-12}[dtype.itemsize]


def assert_close(actual, expected, dtype=None, tol=None):
    """``actual`` (an fnx result) equals NumPy's ``expected`` (NaN == NaN)."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if dtype is not None:
        e = e.astype(dtype)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    if a.dtype.kind in "fc":
        t = _tol(a.dtype) if tol is None else tol
        np.testing.assert_allclose(a, e, rtol=t, atol=t, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, e)


def assert_identical(a, b):
    """Same dtype, weak type, shape and values (the eager/jit contract)."""
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_identical(x, y)
        return
    assert isinstance(a, fnx.Array) and isinstance(b, fnx.Array)
    assert a.dtype == b.dtype, f"dtype {a.dtype} != {b.dtype}"
    assert a.weak_type == b.weak_type, f"weak_type {a.weak_type} != {b.weak_type}"
    assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def check_jit(fn, *args):
    """``fn(*args)`` eagerly and under jit (Array arguments traced) agree exactly."""
    eager = fn(*args)
    traced = fnx.jit(fn)(*args)
    assert_identical(eager, traced)
    return eager


def elements(dtype, lo=-20, hi=20, special=False, nonzero=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        s = st.booleans()
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        s = st.integers(max(info.min, lo), min(info.max, hi))
    elif dtype.kind == "f":
        s = st.floats(float(max(lo, -8)), float(min(hi, 8)), width=dtype.itemsize * 8)
        if special:
            s = st.one_of(s, st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf]))
    else:
        s = st.complex_numbers(max_magnitude=6, width=dtype.itemsize * 8, allow_nan=False,
                               allow_infinity=False)
        if special:
            s = st.one_of(s, st.sampled_from([complex(np.nan, 1), complex(1, np.inf), 0j]))
    if nonzero:
        s = s.filter(lambda v: v != 0)
    return s


def shapes2():
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


def arrays(dtype, shape, **kw):
    return hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, **kw))


def quiet(fn, *args, **kw):
    with np.errstate(all="ignore"):
        return fn(*args, **kw)


# ---------------------------------------------------------------------------------------
# dtype functions
# ---------------------------------------------------------------------------------------

def test_promotion_table_is_symmetric():
    for a in DTYPES:
        for b in DTYPES:
            assert PROMOTE[a, b] == PROMOTE[b, a], (a, b)


@pytest.mark.parametrize("a", DTYPES, ids=str)
def test_promote_types_matches_table(a):
    for b in DTYPES:
        assert fnp.promote_types(a, b) == PROMOTE[a, b], (a, b)
        assert fnp.promote_types(a.name, b.type) == PROMOTE[a, b]


@pytest.mark.parametrize("a", DTYPES, ids=str)
def test_result_type_matches_table(a):
    for b in DTYPES:
        want = PROMOTE[a, b]
        assert fnp.result_type(a, b) == want
        x, y = fnp.zeros(2, a), fnp.zeros((), b)
        assert fnp.result_type(x, y) == want
        assert fnp.result_type(np.zeros(2, a), b) == want
        assert fnp.add(x, y).dtype == (want if a.kind != "b" or b.kind != "b" else B)
    for s in (True, 3, 2.5, 1j):
        assert fnp.result_type(a, s) == weak_result(a, s)[0], (a, s)
        assert fnp.result_type(s, fnp.ones(1, a)) == weak_result(a, s)[0], (a, s)


def test_result_type_of_python_scalars_and_three_args():
    assert fnp.result_type(1) == I4
    assert fnp.result_type(1.0) == F4
    assert fnp.result_type(1j) == C4
    assert fnp.result_type(True) == B
    assert fnp.result_type(1, 2.0) == F4
    assert fnp.result_type(1, 2.0, 1j) == C4
    assert fnp.result_type(I1, U1, 2.0) == F4
    assert fnp.result_type(U8, I1, F2) == F2
    with fnx.enable_x64():  # 64-bit types exist under x64
        assert fnp.result_type(I8, 2.0) == F8
        assert fnp.result_type(2**40) == I8
    assert fnp.result_type(I8, 2.0) == F4  # reported as its 32-bit type, as JAX does
    with pytest.raises(ValueError):
        fnp.result_type()


@pytest.mark.parametrize("a", DTYPES, ids=str)
def test_can_cast_is_the_lattice_order(a):
    for b in DTYPES:
        assert fnp.can_cast(a, b) == (PROMOTE[a, b] == b), (a, b)
    assert fnp.can_cast(fnp.zeros(1, a), a)


def test_can_cast_spot_checks_and_other_castings():
    assert fnp.can_cast(I4, F4)          # JAX's lattice: int32 -> float32 is a promotion
    assert fnp.can_cast(U1, I2) and not fnp.can_cast(I1, U1)
    assert not fnp.can_cast(F8, F4) and not fnp.can_cast(U8, I8)
    assert fnp.can_cast(F8, F4, casting="same_kind")
    assert not fnp.can_cast(F4, I4, casting="same_kind")
    assert fnp.can_cast(F4, I4, casting="unsafe")


@pytest.mark.parametrize("d", [F2, F4, F8, C4, C8], ids=str)
def test_finfo(d):
    f, ref = fnp.finfo(d), np.finfo(d)
    assert (f.eps, f.max, f.min, f.tiny, f.bits, f.dtype) == (ref.eps, ref.max, ref.min,
                                                               ref.tiny, ref.bits, ref.dtype)
    assert fnp.finfo(fnp.zeros(2, d)).eps == ref.eps
    assert fnp.finfo(d.name).bits == ref.bits


@pytest.mark.parametrize("d", [U1, U2, U4, U8, I1, I2, I4, I8], ids=str)
def test_iinfo(d):
    i, ref = fnp.iinfo(d), np.iinfo(d)
    assert (i.min, i.max, i.bits, i.dtype) == (ref.min, ref.max, ref.bits, ref.dtype)
    assert fnp.iinfo(fnp.zeros(2, d)).max == ref.max


def test_finfo_iinfo_reject_wrong_kinds():
    with pytest.raises((TypeError, ValueError)):
        fnp.iinfo(F4)
    with pytest.raises((TypeError, ValueError)):
        fnp.finfo(I4)


# ---------------------------------------------------------------------------------------
# weak types: the dtype rules the brief spells out
# ---------------------------------------------------------------------------------------

def _arr(values, dtype):
    return fnp.asarray(np.array(values, dtype=dtype))


def test_documented_promotions():
    i8 = _arr([1, -2, 3], I1)
    u8 = _arr([1, 2, 250], U1)
    r = fnp.add(i8, u8)
    assert r.dtype == I2 and not r.weak_type
    np.testing.assert_array_equal(r, [2, 0, 253])
    x32 = _arr([1.5, 2.5], F4)
    assert (x32 * 2.0).dtype == F4 and not (x32 * 2.0).weak_type
    assert (i8 + 1).dtype == I1 and not (i8 + 1).weak_type
    np.testing.assert_array_equal(i8 + 1, [2, -1, 4])
    r = _arr([1, 2], I4) + 1.5
    assert r.dtype == F4 and r.weak_type        # JAX: i32 + f* is a weak float
    np.testing.assert_array_equal(r, [2.5, 3.5])
    with fnx.enable_x64():
        r = _arr([1, 2], I8) * 2.0
        assert r.dtype == F8 and r.weak_type        # 64-bit ints keep 64 bits
    assert (_arr([1, 2], F2) + 1.0).dtype == F2
    assert fnp.true_divide(_arr([1, 2], I4), _arr([3, 4], I4)).dtype == F4
    with fnx.enable_x64():
        assert fnp.true_divide(_arr([1, 2], I8), _arr([3, 4], I8)).dtype == F8
        assert fnp.true_divide(_arr([1, 2], I8), 3).dtype == F8
    assert not fnp.true_divide(_arr([1, 2], I4), _arr([3, 4], I4)).weak_type
    assert not fnp.sqrt(_arr([1, 2], I4)).weak_type
    assert fnp.sqrt(4).weak_type and fnp.sqrt(4).dtype == F4   # weak in, weak out
    assert (_arr([True], B) + 1).dtype == I4 and (_arr([True], B) + 1).weak_type
    assert (fnp.asarray(1.0) + fnp.asarray(1.0)).weak_type
    assert not (fnp.asarray(1.0) + x32).weak_type
    assert (np.float64(2.0) * x32).dtype == F4      # narrowed: x64 is off (as JAX)
    with fnx.enable_x64():
        assert (np.float64(2.0) * x32).dtype == F8      # NumPy scalars are strongly typed
        assert (x32 * np.float64(2.0)).dtype == F8
    assert (x32 * np.float32(2.0)).dtype == F4
    assert fnp.add(1, 2).dtype == I4 and fnp.add(1, 2).weak_type
    assert fnp.add(1, 2.0).dtype == F4 and fnp.add(1, 2.0).weak_type


def test_python_scalar_out_of_range_for_narrow_dtype_wraps_as_jax():
    """A Python int within the default int but outside int8 wraps into it, as JAX's
    conversion does (JAX 0.10: int8 1 + 1000 is -23); see tests/test_jax_dtypes.py."""
    assert (_arr([1], I1) + 1000).tolist() == [-23]
    assert fnx.jit(lambda x: x + 1000)(_arr([1], I1)).tolist() == [-23]


def test_big_python_int_becomes_int64():
    r = fnp.add(2**40, 1)
    assert r.dtype == I8 and int(r) == 2**40 + 1
    w = fnp.asarray(3)                                    # weak int32 meets a big int
    for f in (lambda a: a + 2**40, lambda a: 2**40 * a, lambda a: fnp.maximum(a, -2**40)):
        r = check_jit(f, w)
        assert (r.dtype, r.weak_type) == (I8, True)
    assert int(w + 2**40) == 2**40 + 3
    r = check_jit(lambda a: a + 2**40, _arr([1], I8))
    assert (r.dtype, r.weak_type, int(r[0])) == (I8, False, 2**40 + 1)


# ---------------------------------------------------------------------------------------
# elementwise: unary
# ---------------------------------------------------------------------------------------

def _floorlike(np_fn):
    return lambda x: x if x.dtype.kind in "biu" else np_fn(x)


# name -> (reference on the input converted to the result dtype, input kinds, result kind)
# result kinds: same | inexact (ints -> float32, 64-bit ints -> float64) | real (complex ->
# its real dtype) | bool
UNARY = {
    "negative": (np.negative, "iufc", "same"),
    "positive": (np.positive, "iufc", "same"),
    "absolute": (np.absolute, "biufc", "real"),
    "abs": (np.abs, "biufc", "real"),
    "sign": (np.sign, "iufc", "same"),
    "square": (np.square, "iufc", "same"),
    "exp": (np.exp, "biufc", "inexact"),
    "exp2": (np.exp2, "biufc", "inexact"),
    "expm1": (np.expm1, "biufc", "inexact"),
    "log": (np.log, "biufc", "inexact"),
    "log1p": (np.log1p, "biufc", "inexact"),
    "log2": (np.log2, "biufc", "inexact"),
    "log10": (np.log10, "biufc", "inexact"),
    "sqrt": (np.sqrt, "biufc", "inexact"),
    "cbrt": (np.cbrt, "biuf", "inexact"),
    "reciprocal": (np.reciprocal, "biufc", "inexact"),  # JAX: ints go to float (NumPy: int)
    "sin": (np.sin, "biufc", "inexact"),
    "cos": (np.cos, "biufc", "inexact"),
    "tan": (np.tan, "biufc", "inexact"),
    "arcsin": (np.arcsin, "biufc", "inexact"),
    "asin": (np.arcsin, "biufc", "inexact"),
    "arccos": (np.arccos, "biufc", "inexact"),
    "acos": (np.arccos, "biufc", "inexact"),
    "arctan": (np.arctan, "biufc", "inexact"),
    "atan": (np.arctan, "biufc", "inexact"),
    "sinh": (np.sinh, "biufc", "inexact"),
    "cosh": (np.cosh, "biufc", "inexact"),
    "tanh": (np.tanh, "biufc", "inexact"),
    "arcsinh": (np.arcsinh, "biufc", "inexact"),
    "asinh": (np.arcsinh, "biufc", "inexact"),
    "arccosh": (np.arccosh, "biuf", "inexact"),
    "acosh": (np.arccosh, "biuf", "inexact"),
    "arctanh": (np.arctanh, "biuf", "inexact"),
    "atanh": (np.arctanh, "biuf", "inexact"),
    "deg2rad": (np.deg2rad, "biuf", "inexact"),
    "radians": (np.radians, "biuf", "inexact"),
    "rad2deg": (np.rad2deg, "biuf", "inexact"),
    "degrees": (np.degrees, "biuf", "inexact"),
    "sinc": (np.sinc, "biuf", "inexact"),
    "rint": (np.rint, "biuf", "inexact"),   # JAX and NumPy: rint of an int is a float
    "real": (np.real, "biufc", "real"),
    "imag": (np.imag, "biufc", "real"),
    "conj": (np.conj, "biufc", "same"),
    "conjugate": (np.conjugate, "biufc", "same"),
    "floor": (_floorlike(np.floor), "biuf", "same"),
    "ceil": (_floorlike(np.ceil), "biuf", "same"),
    "trunc": (_floorlike(np.trunc), "biuf", "same"),
    "fix": (_floorlike(np.fix), "biuf", "same"),
    "round": (np.round, "biuf", "same"),
    "around": (np.round, "biuf", "same"),
    "isfinite": (np.isfinite, "biufc", "bool"),
    "isinf": (np.isinf, "biufc", "bool"),
    "isnan": (np.isnan, "biufc", "bool"),
    "signbit": (np.signbit, "iuf", "bool"),
    "logical_not": (np.logical_not, "biufc", "bool"),
    "invert": (np.invert, "biu", "same"),
    "bitwise_not": (np.invert, "biu", "same"),
    "bitwise_invert": (np.invert, "biu", "same"),
    "nan_to_num": (np.nan_to_num, "biufc", "same"),
}


def _accepts(kinds, scalar):
    return bool(set("iu") & set(kinds)) if type(scalar) is int else "f" in kinds


def _unary_result_dtype(kind, d):
    return {"same": d, "inexact": INEXACT[d], "real": REAL_OF.get(d, d), "bool": B}[kind]


def test_unary_table_covers_every_unary_function():
    from fnx.numpy import elementwise
    names = {n for n in elementwise.__all__ if callable(getattr(fnp, n))}
    binary = set(BINARY) | {"where", "clip", "divmod", "isclose", "allclose", "array_equal",
                            "array_equiv"}
    assert names - binary - set(UNARY) == set()


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(data=st.data())
def test_unary_vs_numpy(name, data):
    ref, kinds, result = UNARY[name]
    d = data.draw(st.sampled_from([d for d in DTYPES if d.kind in kinds]), label="dtype")
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3), label="shape")
    x = data.draw(hnp.arrays(d, shape, elements=elements(d, special=True)), label="x")
    fn = getattr(fnp, name)
    out = check_jit(fn, fnp.asarray(x))
    want = _unary_result_dtype(result, d)
    assert out.dtype == want, (name, d, out.dtype)
    assert not out.weak_type
    xin = x.astype(want) if result == "inexact" else x
    assert_close(out, quiet(ref, xin), want)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_on_weak_inputs_is_weak(name):
    ref, kinds, result = UNARY[name]
    for s in (2, 2.5):
        if not _accepts(kinds, s):
            continue
        out = check_jit(lambda a: getattr(fnp, name)(a), s)       # traced weak scalar
        assert_identical(getattr(fnp, name)(s), out)
        assert_identical(getattr(fnp, name)(fnp.asarray(s)), out)
        if out.dtype != B:
            assert out.weak_type, (name, s)
            assert out.dtype in (I4, F4)
        arg = np.float32(s) if out.dtype == F4 or type(s) is float else np.int32(s)
        assert_close(out, quiet(ref, arg), out.dtype)


def test_square_and_abs_of_bool():
    x = _arr([True, False], B)
    assert check_jit(fnp.abs, x).dtype == B              # JAX: abs(bool) is bool
    r = check_jit(fnp.square, x)                         # JAX: bool promotes to int
    assert r.dtype == I4
    np.testing.assert_array_equal(r, [1, 0])


def test_signbit_of_negative_zero_and_nan():
    x = _arr([-0.0, 0.0, -1.0, 1.0, -np.inf, np.inf, np.nan, -np.nan], F4)
    np.testing.assert_array_equal(check_jit(fnp.signbit, x), np.signbit(np.asarray(x)))
    np.testing.assert_array_equal(check_jit(fnp.signbit, _arr([-3, 0, 3], I4)),
                                  [True, False, False])
    np.testing.assert_array_equal(check_jit(fnp.signbit, _arr([3, 0], U1)), [False, False])


def test_complex_isfinite_isinf_isnan():
    z = _arr([1 + 1j, complex(np.inf, 0), complex(0, -np.inf), complex(np.nan, 1),
              complex(1, np.nan)], C4)
    for name in ("isfinite", "isinf", "isnan"):
        np.testing.assert_array_equal(check_jit(getattr(fnp, name), z),
                                      getattr(np, name)(np.asarray(z)), err_msg=name)


# ---------------------------------------------------------------------------------------
# elementwise: binary
# ---------------------------------------------------------------------------------------

def int_power_ref(x, y):
    """Integer power with JAX/fnx's rule for negative exponents: 1/x**n truncated."""
    y_pos = np.where(y < 0, 0, y)
    out = np.power(x, y_pos)
    if x.dtype.kind == "i":
        inv = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0))
        out = np.where(y < 0, inv.astype(x.dtype), out)
    return out


def power_ref(x, y):
    return int_power_ref(x, y) if x.dtype.kind in "iu" else np.power(x, y)


# name -> (reference in the result dtype, input kinds, result kind, options)
BINARY = {
    "add": (np.add, "biufc", "promote"),
    "subtract": (np.subtract, "iufc", "promote"),
    "multiply": (np.multiply, "biufc", "promote"),
    "true_divide": (np.true_divide, "biufc", "inexact"),
    "divide": (np.divide, "biufc", "inexact"),
    "floor_divide": (np.floor_divide, "iuf", "promote", "nonzero"),
    "remainder": (np.remainder, "iuf", "promote", "nonzero"),
    "mod": (np.mod, "iuf", "promote", "nonzero"),
    "fmod": (np.fmod, "iuf", "promote", "nonzero"),
    "power": (power_ref, "iufc", "promote", "power"),
    "pow": (power_ref, "iufc", "promote", "power"),
    "float_power": (np.power, "biuf", "inexact"),
    "maximum": (np.maximum, "biuf", "promote"),
    "minimum": (np.minimum, "biuf", "promote"),
    "fmax": (np.fmax, "biuf", "promote"),
    "fmin": (np.fmin, "biuf", "promote"),
    "arctan2": (np.arctan2, "biuf", "inexact"),
    "atan2": (np.arctan2, "biuf", "inexact"),
    "hypot": (np.hypot, "biuf", "inexact"),
    "copysign": (np.copysign, "biuf", "inexact"),
    "nextafter": (np.nextafter, "biuf", "inexact"),
    "logaddexp": (np.logaddexp, "biuf", "inexact"),
    "logaddexp2": (np.logaddexp2, "biuf", "inexact"),
    "heaviside": (np.heaviside, "biuf", "inexact"),
    "equal": (np.equal, "biufc", "bool"),
    "not_equal": (np.not_equal, "biufc", "bool"),
    "less": (np.less, "biuf", "bool"),
    "less_equal": (np.less_equal, "biuf", "bool"),
    "greater": (np.greater, "biuf", "bool"),
    "greater_equal": (np.greater_equal, "biuf", "bool"),
    "bitwise_and": (np.bitwise_and, "biu", "promote"),
    "bitwise_or": (np.bitwise_or, "biu", "promote"),
    "bitwise_xor": (np.bitwise_xor, "biu", "promote"),
    "left_shift": (np.left_shift, "iu", "promote", "shift"),
    "right_shift": (np.right_shift, "iu", "promote", "shift"),
    "bitwise_left_shift": (np.left_shift, "iu", "promote", "shift"),
    "bitwise_right_shift": (np.right_shift, "iu", "promote", "shift"),
    "logical_and": (np.logical_and, "biufc", "logical"),
    "logical_or": (np.logical_or, "biufc", "logical"),
    "logical_xor": (np.logical_xor, "biufc", "logical"),
}


def _binary_result(spec, d1, d2):
    """(dtype, weak) expected for two strong arrays, or None if the op rejects them."""
    _, kinds, result, *opt = spec
    r = PROMOTE[d1, d2]
    weak = strong_weak(d1, d2)
    if result in ("bool", "logical"):
        if result == "bool" and r.kind not in kinds:
            return None
        return B, False
    if result == "inexact":
        return INEXACT[r], weak
    if r.kind not in kinds or (d1.kind == "b" and d2.kind == "b" and "b" not in kinds):
        return None
    return r, weak


def _operand_elements(spec, d, which):
    opt = spec[3] if len(spec) > 3 else None
    if which == 1 and opt == "nonzero":
        return elements(d, nonzero=True, special=True)
    if which == 1 and opt == "shift":
        return elements(d, 0, 7)
    if which == 1 and opt == "power":
        return elements(d, -3, 4)
    if opt == "shift":
        return elements(d, -100, 100)
    return elements(d, special=opt != "power")


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary_vs_numpy(name, data):
    spec = BINARY[name]
    ref, kinds = spec[0], spec[1]
    pool = [d for d in DTYPES if d.kind in kinds]
    d1 = data.draw(st.sampled_from(pool), label="d1")
    d2 = data.draw(st.one_of(st.just(d1), st.sampled_from(pool)), label="d2")  # same: fast path
    expected = _binary_result(spec, d1, d2)
    assume(expected is not None)
    (s1, s2), _ = data.draw(shapes2(), label="shapes")
    x = data.draw(hnp.arrays(d1, s1, elements=_operand_elements(spec, d1, 0)), label="x")
    y = data.draw(hnp.arrays(d2, s2, elements=_operand_elements(spec, d2, 1)), label="y")
    out = check_jit(getattr(fnp, name), fnp.asarray(x), fnp.asarray(y))
    dt, weak = expected
    assert (out.dtype, out.weak_type) == (dt, weak), (name, d1, d2)
    if spec[2] == "logical":
        want = quiet(ref, x, y)
    else:
        r = PROMOTE[d1, d2] if spec[2] == "bool" else dt
        want = quiet(ref, x.astype(r), y.astype(r))
    if len(spec) > 3 and spec[3] == "power" and dt.kind in "iu":
        keep = ~((np.broadcast_to(x, want.shape) == 0) & (np.broadcast_to(y, want.shape) < 0))
        want = np.where(keep, want, np.asarray(out))  # 0 ** negative int: no reference
    if name == "floor_divide" and dt.kind == "f":
        # the Array API's cases where NumPy gives NaN / -1: inf // finite, finite // inf
        xr, yr = (np.broadcast_to(v.astype(r), want.shape) for v in (x, y))
        one_inf = (np.isinf(xr) != np.isinf(yr)) & ~np.isnan(xr) & ~np.isnan(yr)
        want = np.where(one_inf, quiet(np.true_divide, xr, yr), want)
    assert_close(out, want, dt)


def _scalar_pool(kinds):
    pool = []
    if "b" in kinds:
        pool.append(True)
    if set("iu") & set(kinds):
        pool.append(3)
    if "f" in kinds:
        pool.append(1.5)
    if "c" in kinds:
        pool.append(1 - 2j)
    return pool


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_python_scalars_weak_types(name):
    """``x op scalar`` and ``scalar op x``: eager (NumPy fast path) == jit (promotion path),
    the dtype and weak type follow the lattice, the values follow NumPy."""
    spec = BINARY[name]
    ref, kinds, result = spec[:3]
    opt = spec[3] if len(spec) > 3 else None
    rng = np.random.default_rng(0)
    for d in DTYPES:
        if d.kind not in kinds:
            continue
        base = rng.integers(1, 5, size=(2, 3)) if opt == "shift" else \
            rng.integers(-4, 5, size=(2, 3))
        if d.kind == "u" or d.kind == "b":
            base = np.abs(base)
        if d.kind == "f" or d.kind == "c":
            base = base + 0.25
        if opt == "nonzero":
            base = np.where(base == 0, 1, base)
        x = base.astype(d)
        for s in _scalar_pool(kinds):
            if opt == "shift" and type(s) is not int:
                continue
            dt, weak = weak_result(d, s)
            if result == "inexact":
                dt = INEXACT[dt]
            elif result in ("bool", "logical"):
                if result == "bool" and dt.kind not in kinds:
                    continue
                dt, weak = B, False
            elif dt.kind not in kinds or (dt.kind == "b" and "b" not in kinds):
                continue
            X = fnp.asarray(x)
            fn = getattr(fnp, name)
            for args, np_args in (((X, s), (x, s)), ((s, X), (s, x))):
                if opt in ("shift", "power") and args[0] is s:
                    continue  # scalar ** array / scalar << array: covered below
                i = 1 if args[1] is s else 0
                eager = fn(*args)
                traced = fnx.jit(lambda a, i=i: fn(*((a, s) if i == 1 else (s, a))))(X)
                assert_identical(eager, traced)
                assert (eager.dtype, eager.weak_type) == (dt, weak), (name, d, s, args)
                r = PROMOTE[d, weak_result(d, s)[0]] if result == "bool" else dt
                if result == "logical":
                    want = quiet(ref, *np_args)
                else:
                    want = quiet(ref, *[np.asarray(a).astype(r) for a in np_args])
                assert_close(eager, want, dt)
                # a weakly typed Array behaves like the scalar it came from
                ws = fnp.asarray(s)
                wa = (X, ws) if i == 1 else (ws, X)
                assert_identical(check_jit(fn, *wa), eager)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_on_weak_inputs_is_weak(name):
    ref, kinds, result = BINARY[name][:3]
    for s in (2, 2.5):
        if not _accepts(kinds, s):
            continue
        out = check_jit(lambda a, b: getattr(fnp, name)(a, b), s, fnp.asarray(s))
        assert_identical(getattr(fnp, name)(s, s), out)
        assert out.weak_type == (out.dtype != B), (name, s)


def test_scalar_base_and_exponent_power():
    x = _arr([1, 2, 3], I4)
    assert_identical(check_jit(lambda a: 2 ** a, x), _arr([2, 4, 8], I4))
    r = check_jit(lambda a: 2.0 ** a, x)
    assert (r.dtype, r.weak_type) == (F4, False)     # JAX 0.10.2: a strong float32
    np.testing.assert_array_equal(r, [2.0, 4.0, 8.0])
    r = check_jit(lambda a: a ** 2, _arr([1, -2, 3], I1))
    assert r.dtype == I1 and not r.weak_type
    r = check_jit(lambda a: a ** 0.5, _arr([1, 4], I4))
    assert (r.dtype, r.weak_type) == (F4, True)
    np.testing.assert_array_equal(r, [1.0, 2.0])
    f = _arr([0.5, -2.0, 0.0], F4)
    for e in (0, 1, 2, 3, -1, -2, 7):
        r = check_jit(lambda a, e=e: a ** e, f)
        assert r.dtype == F4
        assert_close(r, quiet(np.power, np.asarray(f), np.float32(e)))
    for e in (2.5, -0.5):
        assert_close(check_jit(lambda a, e=e: fnp.power(a, e), f),
                     quiet(np.power, np.asarray(f), np.float32(e)))


def test_negative_integer_exponents():
    x = _arr([1, -1, 2, -2, 3, -1, 5], I4)
    for e in (-1, -2, -3):
        r = check_jit(lambda a, e=e: a ** e, x)
        assert r.dtype == I4
        np.testing.assert_array_equal(r, int_power_ref(np.asarray(x), np.int32(e)))
    r = check_jit(fnp.power, x, _arr([-1, -3, -2, 2, 0, -4, 1], I4))
    np.testing.assert_array_equal(r, [1, -1, 0, 4, 1, 1, 5])
    r = check_jit(fnp.power, _arr([2, 3], U1), _arr([3, 2], U1))
    np.testing.assert_array_equal(r, [8, 9])


def test_remainder_floor_divide_divmod_with_negative_operands():
    a = np.array([-7, 7, -7, 7, -6, 6, 0], np.int32)
    b = np.array([2, -2, -2, 2, 3, -3, -5], np.int32)
    A, Bb = fnp.asarray(a), fnp.asarray(b)
    for name in ("remainder", "mod", "floor_divide", "fmod"):
        np.testing.assert_array_equal(check_jit(getattr(fnp, name), A, Bb),
                                      getattr(np, name)(a, b), err_msg=name)
    q, r = check_jit(fnp.divmod, A, Bb)
    nq, nr = np.divmod(a, b)
    np.testing.assert_array_equal(q, nq)
    np.testing.assert_array_equal(r, nr)
    q, r = divmod(A, Bb)
    np.testing.assert_array_equal(q, nq)
    af, bf = a.astype(np.float32) + 0.5, b.astype(np.float32)
    for name in ("remainder", "floor_divide", "fmod"):
        assert_close(check_jit(getattr(fnp, name), fnp.asarray(af), fnp.asarray(bf)),
                     getattr(np, name)(af, bf))
    assert_close(fnp.remainder(fnp.asarray(af), -2.5), np.remainder(af, np.float32(-2.5)))
    np.testing.assert_array_equal(fnp.remainder(-7, fnp.asarray(b)), np.remainder(-7, b))
    np.testing.assert_array_equal(7 % fnp.asarray(b), 7 % b)
    np.testing.assert_array_equal(-7 // fnp.asarray(b), -7 // b)


def test_fmax_fmin_maximum_with_nan():
    a = _arr([np.nan, 1.0, np.nan, -0.0, 2.0], F4)
    b = _arr([2.0, np.nan, np.nan, 0.0, 1.0], F4)
    for name in ("fmax", "fmin", "maximum", "minimum"):
        np.testing.assert_array_equal(check_jit(getattr(fnp, name), a, b),
                                      getattr(np, name)(np.asarray(a), np.asarray(b)),
                                      err_msg=name)
    np.testing.assert_array_equal(check_jit(fnp.fmax, a, 0.5), np.fmax(np.asarray(a), 0.5))
    np.testing.assert_array_equal(check_jit(fnp.fmax, _arr([1, 5], I4), _arr([3, 2], I4)),
                                  [3, 5])


def test_order_comparisons_of_complex_are_lexicographic():
    # JAX and NumPy: by the real parts, then by the imaginary parts (NaN compares false)
    a = _arr([1 + 2j, 1 + 1j, 2 + 0j, complex(np.nan, 0), complex(1, np.nan)], C4)
    b = _arr([1 + 1j, 1 + 1j, 1 + 5j, 1 + 0j, 1 + 0j], C4)
    an, bn = np.asarray(a), np.asarray(b)
    for name in ("less", "less_equal", "greater", "greater_equal"):
        f, g = getattr(fnp, name), getattr(np, name)
        np.testing.assert_array_equal(check_jit(f, a, b), g(an, bn), err_msg=name)
        np.testing.assert_array_equal(check_jit(f, a, 1 + 1j), g(an, 1 + 1j), err_msg=name)
        np.testing.assert_array_equal(check_jit(f, a[0], b), g(an[0], bn), err_msg=name)
        np.testing.assert_array_equal(f(a, True), g(an, True), err_msg=name)
    np.testing.assert_array_equal(a > b, an > bn)
    np.testing.assert_array_equal(fnx.vmap(fnp.less_equal)(a, b), an <= bn)


def test_logaddexp2_and_logaddexp():
    x = _arr([-3.0, 0.0, 2.0, 50.0, -np.inf], F4)
    assert_close(check_jit(fnp.logaddexp2, x, 3.0), np.logaddexp2(np.asarray(x), np.float32(3)))
    assert_close(check_jit(fnp.logaddexp2, x, x), np.logaddexp2(np.asarray(x), np.asarray(x)))
    assert_close(check_jit(fnp.logaddexp, x, 1.0), np.logaddexp(np.asarray(x), np.float32(1)))
    r = fnp.logaddexp2(_arr([1, 2], I4), 1)
    assert r.dtype == F4 and not r.weak_type


def test_shifts():
    x = _arr([1, -8, 16, 127, -128], I1)
    for s in range(8):
        np.testing.assert_array_equal(check_jit(fnp.left_shift, x, s), np.left_shift(
            np.asarray(x), np.int8(s)))
        np.testing.assert_array_equal(check_jit(fnp.right_shift, x, s), np.right_shift(
            np.asarray(x), np.int8(s)))
    u = _arr([1, 128, 255], U1)
    np.testing.assert_array_equal(check_jit(fnp.right_shift, u, 3), [0, 16, 31])  # logical
    np.testing.assert_array_equal(check_jit(lambda a: a >> 1, x), np.asarray(x) >> 1)
    np.testing.assert_array_equal(check_jit(lambda a: 1 << a, _arr([0, 3], I4)), [1, 8])
    r = fnp.left_shift(_arr([1], I1), _arr([2], U1))
    assert r.dtype == I2


def test_bool_arithmetic():
    t = _arr([True, False, True], B)
    f = _arr([True, True, False], B)
    assert_identical(check_jit(fnp.add, t, f), _arr([True, True, True], B))
    assert_identical(check_jit(fnp.multiply, t, f), _arr([True, False, False], B))
    assert_identical(check_jit(fnp.multiply, t, True), _arr([True, False, True], B))
    assert_identical(check_jit(fnp.add, t, False), t)
    assert_identical(check_jit(fnp.maximum, t, f), _arr([True, True, True], B))
    with pytest.raises(TypeError):
        fnp.subtract(t, f)


def test_logical_ops():
    a = np.array([0, 1, 2, 0], np.int32)
    b = np.array([0.0, 0.0, 3.5, np.nan], np.float32)
    for name in ("logical_and", "logical_or", "logical_xor"):
        r = check_jit(getattr(fnp, name), fnp.asarray(a), fnp.asarray(b))
        assert r.dtype == B
        np.testing.assert_array_equal(r, getattr(np, name)(a, b), err_msg=name)
        np.testing.assert_array_equal(getattr(fnp, name)(fnp.asarray(a), True),
                                      getattr(np, name)(a, True))
    np.testing.assert_array_equal(check_jit(fnp.logical_not, fnp.asarray(b)), np.logical_not(b))


@SETTINGS
@given(data=st.data())
def test_round_with_decimals(data):
    d = data.draw(st.sampled_from([F2, F4, F8, I1, I4, I8, U1]))
    decimals = data.draw(st.integers(-2, 3))
    x = data.draw(hnp.arrays(d, hnp.array_shapes(max_dims=2, max_side=4),
                             elements=elements(d, -100, 100) if d.kind in "iu" else
                             st.floats(-300, 300, width=d.itemsize * 8)))
    r = check_jit(lambda a: fnp.round(a, decimals), fnp.asarray(x))
    assert r.dtype == d
    want = np.round(x, decimals)
    if d.kind == "f" and decimals != 0:
        assert_close(r, want, tol=_tol(d) * 10)
    else:
        np.testing.assert_array_equal(r, want)
    assert_identical(fnp.around(fnp.asarray(x), decimals), r)
    assert_identical(fnp.asarray(x).round(decimals), r)


def test_round_half_to_even():
    x = _arr([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.25, 0.35], F4)
    np.testing.assert_array_equal(fnp.round(x), np.round(np.asarray(x)))
    np.testing.assert_array_equal(fnp.rint(x), np.rint(np.asarray(x)))
    np.testing.assert_array_equal(fnp.round(_arr([15, 25, -15, -25, 14, 35], I4), -1),
                                  [20, 20, -20, -20, 10, 40])
    np.testing.assert_array_equal(fnp.round(_arr([150, 250, 249, -250], I4), -2),
                                  [200, 200, 200, -200])
    np.testing.assert_array_equal(fnp.round(_arr([15.0, 25.0, 151.0], F4), -1), [20, 20, 150])
    np.testing.assert_array_equal(fnp.trunc(_arr([-1.7, 1.7, -0.2], F4)), [-1, 1, -0.0])
    assert fnp.rint(_arr([1, 2], I4)).dtype == F4
    assert fnp.rint(_arr([1, 2], I8)).dtype == F8


def test_isclose_allclose():
    a = np.array([1.0, 1.0, np.nan, np.inf, -np.inf, np.inf, 0.0, 1e-9], np.float32)
    b = np.array([1.0 + 1e-6, 1.1, np.nan, np.inf, np.inf, 1e30, 1e-9, 0.0], np.float32)
    A, Bb = fnp.asarray(a), fnp.asarray(b)
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.0}, {"rtol": 0, "atol": 0}):
        np.testing.assert_array_equal(check_jit(lambda x, y: fnp.isclose(x, y, **kw), A, Bb),
                                      np.isclose(a, b, **kw), err_msg=str(kw))
        assert bool(fnp.allclose(A, Bb, **kw)) == np.allclose(a, b, **kw)
    assert bool(fnp.allclose(Bb[:2], 1.0, rtol=0.2))
    assert not bool(fnp.allclose(Bb[:2], 1.0))
    np.testing.assert_array_equal(fnp.isclose(_arr([1, 2], I4), _arr([1, 3], I4)), [True, False])
    assert fnp.isclose(A, 1.0).dtype == B


def test_nan_to_num():
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], np.float32)
    X = fnp.asarray(x)
    assert_identical(check_jit(fnp.nan_to_num, X), fnp.asarray(np.nan_to_num(x)))
    r = check_jit(lambda a: fnp.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0), X)
    np.testing.assert_array_equal(r, np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0))
    h = np.array([np.inf, -np.inf], np.float16)
    np.testing.assert_array_equal(fnp.nan_to_num(fnp.asarray(h)), np.nan_to_num(h))
    z = np.array([complex(np.nan, np.inf), complex(1, -np.inf), 2 + 3j], np.complex64)
    r = check_jit(fnp.nan_to_num, fnp.asarray(z))
    assert r.dtype == C4
    np.testing.assert_array_equal(r, np.nan_to_num(z))
    assert_identical(fnp.nan_to_num(_arr([1, 2], I4)), _arr([1, 2], I4))


def test_clip():
    x = np.array([-3, 0, 2, 5, 9], np.int32)
    X = fnp.asarray(x)
    np.testing.assert_array_equal(check_jit(lambda a: fnp.clip(a, None, 4), X), np.clip(x, None, 4))
    np.testing.assert_array_equal(check_jit(lambda a: fnp.clip(a, 1, None), X), np.clip(x, 1, None))
    np.testing.assert_array_equal(check_jit(lambda a: fnp.clip(a, 1, 4), X), np.clip(x, 1, 4))
    assert_identical(fnp.clip(X), X)
    assert fnp.clip(X, 1, 4).dtype == I4
    lo = np.array([0, 1, 2, 3, 4], np.int32)
    np.testing.assert_array_equal(check_jit(lambda a, l: fnp.clip(a, l, 6), X, fnp.asarray(lo)),
                                  np.clip(x, lo, 6))
    np.testing.assert_array_equal(fnp.clip(X, a_min=0, a_max=3), np.clip(x, 0, 3))
    np.testing.assert_array_equal(X.clip(1), np.clip(x, 1, None))
    np.testing.assert_array_equal(X.clip(max=1), np.clip(x, None, 1))
    f = fnp.asarray(np.array([np.nan, -2.0, 3.0], np.float32))
    np.testing.assert_array_equal(fnp.clip(f, -1.0, 1.0), [np.nan, -1.0, 1.0])
    r = fnp.clip(X, 0.5, 2.5)            # JAX: clipping ints with float bounds promotes
    assert r.dtype == F4


@FEW
@given(data=st.data())
def test_where_three_args_broadcasting(data):
    (sc, sx, sy), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3,
                                                                    max_side=3))
    d1, d2 = data.draw(st.sampled_from(DTYPES)), data.draw(st.sampled_from(DTYPES))
    c = data.draw(hnp.arrays(B, sc))
    x = data.draw(arrays(d1, sx))
    y = data.draw(arrays(d2, sy))
    r = check_jit(fnp.where, fnp.asarray(c), fnp.asarray(x), fnp.asarray(y))
    dt = PROMOTE[d1, d2]
    assert r.dtype == dt
    assert_close(r, np.where(c, x.astype(dt), y.astype(dt)), dt)


def test_where_scalars_and_nonbool_condition():
    c = fnp.asarray([True, False, True])
    r = check_jit(lambda c: fnp.where(c, 1.0, 2.0), c)
    assert r.dtype == F4 and r.weak_type
    r = check_jit(lambda c, y: fnp.where(c, 1, y), c, _arr([[5], [6]], I1))
    assert r.dtype == I1 and r.shape == (2, 3)
    np.testing.assert_array_equal(r, np.where([True, False, True], 1, [[5], [6]]))
    r = fnp.where(_arr([0, 2, -1], I4), _arr([1.0, 2.0, 3.0], F4), 0.0)
    np.testing.assert_array_equal(r, [0.0, 2.0, 3.0])
    (idx,) = fnp.where(_arr([0, 2, -1], I4))
    np.testing.assert_array_equal(idx, [1, 2])
    with pytest.raises(ValueError):
        fnp.where(c, 1.0)


def test_heaviside_sinc_deg2rad_values():
    x = np.array([-2.0, -0.0, 0.0, 0.5, 3.0], np.float32)
    X = fnp.asarray(x)
    np.testing.assert_array_equal(check_jit(fnp.heaviside, X, 0.5),
                                  np.heaviside(x, np.float32(0.5)))
    np.testing.assert_array_equal(check_jit(fnp.heaviside, X, X), np.heaviside(x, x))
    assert_close(check_jit(fnp.sinc, X), np.sinc(x))
    assert float(fnp.sinc(0.0)) == 1.0
    assert_close(check_jit(fnp.deg2rad, _arr([0, 90, 180, -360], I4)),
                 np.deg2rad(np.array([0, 90, 180, -360], np.float32)))
    assert_close(fnp.rad2deg(X), np.rad2deg(x))


def test_array_equal():
    a = fnp.asarray([1.0, np.nan])
    assert bool(fnp.array_equal(a, fnp.asarray([1.0, 2.0]))) is False
    assert bool(fnp.array_equal(a, a)) is False
    assert bool(fnp.array_equal(a, a, equal_nan=True)) is True
    assert bool(fnp.array_equal(fnp.ones(2), fnp.ones(3))) is False


# ---------------------------------------------------------------------------------------
# creation (JAX defaults: float32 / int32; 64-bit NumPy inputs stay 64-bit)
# ---------------------------------------------------------------------------------------

def check_creation(fn, dtype, np_fn=None, tol=None, *args):
    """``fn(fnp, ...)`` eagerly and under jit, against ``fn(np, ...)`` with the given dtype."""
    np_fn = np_fn or fn
    got = check_jit(lambda *a: fn(fnp, *a), *[fnp.asarray(a) for a in args])
    want = np_fn(np, *args)
    if isinstance(got, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == dtype, (g.dtype, dtype)
            assert not g.weak_type
            assert_close(g, w, dtype, tol)
        return got
    assert got.dtype == dtype, (got.dtype, dtype)
    assert not got.weak_type
    assert_close(got, want, dtype, tol)
    return got


CREATION = {
    "zeros": (lambda m: m.zeros((2, 3)), F4),
    "zeros_int": (lambda m: m.zeros(3, int), I4),
    "zeros_dtype": (lambda m: m.zeros((2,), dtype="uint8"), U1),
    "zeros_0d": (lambda m: m.zeros(()), F4),
    "ones": (lambda m: m.ones((2, 0, 3)), F4),
    "ones_f16": (lambda m: m.ones(4, np.float16), F2),
    "full_int": (lambda m: m.full((2,), 3), I4),
    "full_float": (lambda m: m.full((2, 2), 3.5), F4),
    "full_bool": (lambda m: m.full((2,), True), B),
    "full_dtype": (lambda m: m.full(3, 7, dtype=np.int8), I1),
    "full_row": (lambda m: m.full((2, 3), [1, 2, 3]), I4),
    "arange_int": (lambda m: m.arange(5), I4),
    "arange_start_stop": (lambda m: m.arange(-3, 4), I4),
    "arange_neg_step": (lambda m: m.arange(5, 0, -2), I4),
    "arange_empty": (lambda m: m.arange(10, 2), I4),
    "arange_float": (lambda m: m.arange(0, 1, 0.25), F4),
    "arange_float_neg": (lambda m: m.arange(1.0, -1.0, -0.5), F4),
    "arange_tenth": (lambda m: m.arange(0, 1, 0.1), F4),
    "arange_float_start": (lambda m: m.arange(1.5, 4), F4),
    "arange_dtype": (lambda m: m.arange(3, dtype=np.float32), F4),
    "arange_big": (lambda m: m.arange(2**40, 2**40 + 3), I8),  # run under x64
    "linspace": (lambda m: m.linspace(0, 1, 5), F4),
    "linspace_no_endpoint": (lambda m: m.linspace(0, 1, 5, endpoint=False), F4),
    "linspace_reverse": (lambda m: m.linspace(3, -2, 7), F4),
    "linspace_one": (lambda m: m.linspace(2, 3, 1), F4),
    "linspace_zero": (lambda m: m.linspace(2, 3, 0), F4),
    "linspace_int_dtype": (lambda m: m.linspace(-10, 10, 7, dtype=np.int32), I4),
    "logspace": (lambda m: m.logspace(0, 2, 3), F4),
    "logspace_base": (lambda m: m.logspace(0, 3, 4, base=2), F4),
    "logspace_no_endpoint": (lambda m: m.logspace(1, 3, 4, endpoint=False), F4),
    "geomspace": (lambda m: m.geomspace(1, 1000, 4), F4),
    "geomspace_negative": (lambda m: m.geomspace(-1, -1000, 4), F4),
    "geomspace_no_endpoint": (lambda m: m.geomspace(2, 32, 4, endpoint=False), F4),
    "identity": (lambda m: m.identity(3), F4),
    "identity_int": (lambda m: m.identity(2, dtype=int), I4),
    "tri": (lambda m: m.tri(3), F4),
    "tri_int": (lambda m: m.tri(3, 5, 2, dtype=int), I4),
}
for _k in range(-3, 4):
    CREATION[f"eye_k{_k}"] = (lambda m, k=_k: m.eye(3, 4, k=k), F4)
    CREATION[f"eye_M_k{_k}"] = (lambda m, k=_k: m.eye(4, 2, k, dtype=np.int32), I4)
    CREATION[f"tri_k{_k}"] = (lambda m, k=_k: m.tri(3, 4, k), F4)


@pytest.mark.parametrize("case", sorted(CREATION))
def test_creation_vs_numpy(case):
    fn, dtype = CREATION[case]
    with fnx.enable_x64(case == "arange_big"):  # Python ints beyond int32 need x64
        if case in ("full_int", "full_float"):  # JAX: a Python scalar fill stays weak
            got = fn(fnp)
            assert got.weak_type and got.dtype == dtype
            np.testing.assert_array_equal(got, fn(np))
        else:
            check_creation(fn, dtype)


def test_empty_and_like_functions():
    for name in ("empty", "zeros", "ones"):
        r = getattr(fnp, name)((2, 3))
        assert (r.shape, r.dtype, r.weak_type) == ((2, 3), F4, False)
    x = fnp.asarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    for name, value in (("zeros_like", 0), ("ones_like", 1), ("empty_like", None)):
        r = check_jit(getattr(fnp, name), x)
        assert (r.shape, r.dtype) == ((2, 3), I2)
        if value is not None:
            np.testing.assert_array_equal(r, np.full((2, 3), value))
        r = getattr(fnp, name)(x, dtype=np.float16, shape=(4,))
        assert (r.shape, r.dtype) == ((4,), F2)
    r = check_jit(lambda a: fnp.full_like(a, 2.7), x)
    assert r.dtype == I2
    np.testing.assert_array_equal(r, np.full_like(np.asarray(x), 2.7))
    r = fnp.full_like(x, 2.5, dtype=np.float32, shape=(3, 1))
    np.testing.assert_array_equal(r, np.full((3, 1), 2.5, np.float32))
    assert fnp.zeros_like(1.0).weak_type and fnp.zeros_like(1.0).dtype == F4   # as JAX
    assert not fnp.zeros_like(x).weak_type
    r = fnp.ones_like(fnp.asarray([1.0, 2.0]), dtype=int)
    assert r.dtype == I4


def test_array_and_asarray():
    cases = [
        ([[1, 2], [3, 4]], I4), ([1, 2.5], F4), ([True, False], B), ([1 + 2j], C4),
        ((1, 2), I4), ([], F4), ([[]], F4), (3, I4), (2.5, F4),
        (np.arange(3), I4), (np.arange(3, dtype=np.float32), F4), (np.float64(1.5), F4),
        (np.int16(3), I2), ([np.float16(1), np.float16(2)], F2),
    ]
    for obj, dtype in cases:
        for f in (fnp.array, fnp.asarray):
            r = f(obj)
            assert r.dtype == dtype, (obj, r.dtype)
            np.testing.assert_array_equal(r, np.asarray(obj))
    with fnx.enable_x64():  # 64-bit inputs stay 64-bit
        for obj, dtype in (([2**40], I8), (np.arange(3), I8), (np.float64(1.5), F8)):
            for f in (fnp.array, fnp.asarray):
                r = f(obj)
                assert r.dtype == dtype, (obj, r.dtype)
                np.testing.assert_array_equal(r, np.asarray(obj))
    assert fnp.asarray(2.5).weak_type and fnp.asarray(3).weak_type     # scalars: weak
    assert not fnp.asarray([2.5]).weak_type                              # lists: strong
    r = fnp.array([1, 2], dtype=np.float16)
    assert r.dtype == F2
    r = fnp.array([1, 2], ndmin=3)
    assert r.shape == (1, 1, 2)
    x = fnp.asarray([1.0, 2.0])
    assert fnp.asarray(x) is x
    with fnx.enable_x64():
        assert fnp.asarray(x, dtype=np.float64).dtype == F8
    assert fnp.float32(3).dtype == F4 and fnp.int8(3).dtype == I1


def test_array_from_lists_containing_arrays():
    a = fnp.asarray([1.0, 2.0])
    r = fnp.array([a, fnp.asarray([3.0, 4.0])])
    assert r.dtype == F4 and r.shape == (2, 2)
    np.testing.assert_array_equal(r, [[1, 2], [3, 4]])
    r = fnp.array([fnp.asarray(1.0), 2.0])
    assert (r.dtype, r.weak_type) == (F4, False)
    r = fnp.array([[fnp.asarray(1), 2], [3, 4]])
    assert r.dtype == I4
    np.testing.assert_array_equal(r, [[1, 2], [3, 4]])
    h = fnp.asarray(np.array([1.0], np.float16))
    r = fnp.array([h, [2.0]])                       # Python floats are weak: stays float16
    assert r.dtype == F2 and r.shape == (2, 1)
    r = fnp.array([fnp.asarray(np.array([1], np.int8)), np.array([2], np.uint8)])
    assert r.dtype == I2
    r = fnp.asarray([a, a], dtype=np.int32)
    assert r.dtype == I4
    r = check_jit(lambda u, v: fnp.array([[u, v], [v, u]]), fnp.asarray(1.0), fnp.asarray(2.0))
    np.testing.assert_array_equal(r, [[1, 2], [2, 1]])


def test_array_copies_numpy_input():
    n = np.array([1.0, 2.0])
    for f in (fnp.array, fnp.asarray, fnx.Array):
        x = f(n)
        n[0] = 100.0
        assert float(x[0]) == 1.0, f
        n[0] = 1.0


@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_array_bounds_axis_retstep(endpoint):
    lo, hi = np.array([0.0, 1.0, -2.0], np.float32), np.array([[1.0], [3.0]], np.float32)
    for axis in (0, 1, -1, 2):
        got = check_jit(lambda a, b: fnp.linspace(a, b, 5, endpoint=endpoint, axis=axis),
                        fnp.asarray(lo), fnp.asarray(hi))
        want = np.linspace(lo, hi, 5, endpoint=endpoint, axis=axis)
        assert got.dtype == F4
        assert_close(got, want)
    got, step = fnp.linspace(0, 1, 5, endpoint=endpoint, retstep=True)
    want, wstep = np.linspace(0, 1, 5, endpoint=endpoint, retstep=True)
    assert_close(got, want, F4)
    assert_close(step, wstep, F4)
    got, step = fnp.linspace(fnp.asarray(lo), 4.0, 3, endpoint=endpoint, retstep=True)
    want, wstep = np.linspace(lo, 4.0, 3, endpoint=endpoint, retstep=True)
    assert_close(got, want, F4)
    assert_close(step, wstep, F4)
    with fnx.enable_x64():
        assert fnp.linspace(np.float64(0), 1, 3).dtype == F8
    assert fnp.linspace(0, 1, 3, endpoint=endpoint)[0] == 0.0
    if endpoint:
        assert float(fnp.linspace(0.1, 0.7, 7)[-1]) == np.float32(0.7)   # exact endpoint


def test_tril_triu():
    x = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    for k in range(-3, 5):
        for name in ("tril", "triu"):
            got = check_jit(lambda a, k=k: getattr(fnp, name)(a, k), fnp.asarray(x))
            np.testing.assert_array_equal(got, getattr(np, name)(x, k), err_msg=(name, k))
            assert got.dtype == F4
    i = fnp.asarray(np.arange(9).reshape(3, 3))
    assert fnp.triu(i, 1).dtype == I8
    with pytest.raises((ValueError, TypeError)):
        fnp.tril(fnp.ones(3))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    xs = [np.arange(2, dtype=np.int32), np.linspace(0, 1, 3).astype(np.float32),
          np.arange(4, dtype=np.int16) - 1]
    for n in (1, 2, 3):
        got = check_jit(lambda *a: fnp.meshgrid(*a, indexing=indexing, sparse=sparse),
                        *[fnp.asarray(x) for x in xs[:n]])
        want = np.meshgrid(*xs[:n], indexing=indexing, sparse=sparse)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError):
        fnp.meshgrid(fnp.ones(2), indexing="yx")


# ---------------------------------------------------------------------------------------
# manipulation
# ---------------------------------------------------------------------------------------

def check_vs_numpy(fn, *arrays, dtype=None):
    """``fn(fnp, *arrays)`` eagerly and under jit (arrays traced) == ``fn(np, *arrays)``,
    dtype included (``dtype``: expected when it differs from NumPy's)."""
    got = check_jit(lambda *a: fn(fnp, *a), *[fnp.asarray(a) for a in arrays])
    want = fn(np, *arrays)
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        pairs = list(zip(got, want))
    else:
        pairs = [(got, want)]
    for g, w in pairs:
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == (dtype or w.dtype), (g.dtype, dtype or w.dtype)
        assert_close(g, w)
    return got


X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
I3 = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
V3 = np.array([1, 2, 3], np.int32)

MANIP = {
    "reshape_-1": (lambda m, a: m.reshape(a, (4, -1)), X3),
    "reshape_flat": (lambda m, a: m.reshape(a, -1), X3),
    "reshape_0d": (lambda m, a: m.reshape(a, (1, 1)), np.float32(3)),
    "reshape_method_tuple": (lambda m, a: a.reshape((3, 8)), X3),
    "reshape_method_varargs": (lambda m, a: a.reshape(3, -1, 2), X3),
    "ravel": (lambda m, a: m.ravel(a), X3),
    "transpose": (lambda m, a: m.transpose(a), X3),
    "transpose_axes": (lambda m, a: m.transpose(a, (1, 0, 2)), X3),
    "transpose_negative": (lambda m, a: m.transpose(a, (-1, 0, 1)), X3),
    "permute_dims": (lambda m, a: m.permute_dims(a, (2, 0, 1)), X3),
    "matrix_transpose": (lambda m, a: m.matrix_transpose(a), X3),
    "moveaxis": (lambda m, a: m.moveaxis(a, 0, -1), X3),
    "moveaxis_multi": (lambda m, a: m.moveaxis(a, [0, 1], [-1, 0]), X3),
    "moveaxis_multi2": (lambda m, a: m.moveaxis(a, [2, 0], [0, 1]), X3),
    "swapaxes": (lambda m, a: m.swapaxes(a, 0, -1), X3),
    "squeeze": (lambda m, a: m.squeeze(a), np.ones((1, 3, 1), np.int8)),
    "squeeze_axes": (lambda m, a: m.squeeze(a, (0, 2)), np.ones((1, 3, 1, 1))),
    "squeeze_neg": (lambda m, a: m.squeeze(a, -1), np.ones((1, 3, 1))),
    "expand_dims": (lambda m, a: m.expand_dims(a, 1), X3),
    "expand_dims_multi": (lambda m, a: m.expand_dims(a, (0, -1, 2)), X3),
    "expand_dims_neg": (lambda m, a: m.expand_dims(a, (-1, -3)), X3),
    "broadcast_to": (lambda m, a: m.broadcast_to(a, (5, 2, 3, 4)), X3),
    "broadcast_to_scalar": (lambda m, a: m.broadcast_to(a, (2, 2)), np.float32(2)),
    "broadcast_arrays": (lambda m, a, b: m.broadcast_arrays(a, b), X3, np.ones((3, 1), "f4")),
    "concatenate": (lambda m, a, b: m.concatenate([a, b]), X3, X3[:1]),
    "concatenate_neg_axis": (lambda m, a, b: m.concatenate([a, b, a], axis=-1), X3, X3[..., :1]),
    "concatenate_none": (lambda m, a, b: m.concatenate([a, b], axis=None), X3,
                         np.ones((3, 1), np.float32)),
    "concatenate_mixed": (lambda m, a, b: m.concatenate([a, b], axis=1),
                          np.ones((2, 3), np.int8), np.ones((2, 1), np.uint8)),
    "concat": (lambda m, a, b: m.concat([a, b], axis=0), X3, X3),
    "stack": (lambda m, a, b: m.stack([a, b]), X3, X3 + 1),
    "stack_neg": (lambda m, a, b: m.stack([a, b], axis=-1), X3, X3 + 1),
    "stack_mid": (lambda m, a, b: m.stack((a, b, a), axis=2), X3, X3 + 1),
    "vstack": (lambda m, a, b: m.vstack([a, b]), V3, V3),
    "vstack_2d": (lambda m, a, b: m.vstack([a, b]), np.ones((2, 3), "i4"), V3),
    "hstack": (lambda m, a, b: m.hstack([a, b]), V3, V3[:2]),
    "hstack_2d": (lambda m, a, b: m.hstack([a, b]), np.ones((3, 2), "i4"), V3[:, None]),
    "hstack_0d": (lambda m, a, b: m.hstack([a, b]), np.int32(1), V3),
    "dstack": (lambda m, a, b: m.dstack([a, b]), V3, V3),
    "dstack_2d": (lambda m, a, b: m.dstack([a, b]), np.ones((2, 3), "i4"), np.ones((2, 3), "i4")),
    "column_stack": (lambda m, a, b: m.column_stack([a, b]), V3, np.ones((3, 2), "i4")),
    "split": (lambda m, a: m.split(a, 2, axis=2), X3),
    "split_indices": (lambda m, a: m.split(a, [1, 3, 10], axis=2), X3),
    "split_negative": (lambda m, a: m.split(a, [-1, 1], axis=-1), X3),
    "split_empty": (lambda m, a: m.split(a, [], axis=0), X3),
    "array_split": (lambda m, a: m.array_split(a, 3, axis=2), X3),
    "array_split_5": (lambda m, a: m.array_split(a, 5, axis=-1), X3),
    "array_split_idx": (lambda m, a: m.array_split(a, [2], axis=1), X3),
    "tile": (lambda m, a: m.tile(a, 2), X3),
    "tile_longer": (lambda m, a: m.tile(a, (2, 1, 1, 2)), X3),
    "tile_shorter": (lambda m, a: m.tile(a, (2, 3)), X3),
    "tile_1d": (lambda m, a: m.tile(a, (2, 2)), V3),
    "repeat": (lambda m, a: m.repeat(a, 2, axis=1), X3),
    "repeat_flat": (lambda m, a: m.repeat(a, 3), X3),
    "repeat_array": (lambda m, a: m.repeat(a, np.array([1, 0, 2]), axis=1), X3),
    "repeat_list": (lambda m, a: m.repeat(a, [2, 1, 3]), V3),
    "repeat_neg_axis": (lambda m, a: m.repeat(a, 2, axis=-1), X3),
    "roll": (lambda m, a: m.roll(a, 1), X3),
    "roll_axis": (lambda m, a: m.roll(a, -2, axis=2), X3),
    "roll_multi": (lambda m, a: m.roll(a, (1, -2), axis=(0, 2)), X3),
    "roll_big": (lambda m, a: m.roll(a, 7, axis=1), X3),
    "roll_same_axis": (lambda m, a: m.roll(a, (1, 2), axis=(2, 2)), X3),
    "roll_broadcast": (lambda m, a: m.roll(a, 1, axis=(0, 1)), X3),
    "flip": (lambda m, a: m.flip(a), X3),
    "flip_axis": (lambda m, a: m.flip(a, 1), X3),
    "flip_axes": (lambda m, a: m.flip(a, (0, -1)), X3),
    "fliplr": (lambda m, a: m.fliplr(a), X3),
    "flipud": (lambda m, a: m.flipud(a), X3),
    "atleast_1d": (lambda m, a: m.atleast_1d(a), np.float32(3)),
    "atleast_1d_multi": (lambda m, a, b: m.atleast_1d(a, b), np.float32(3), X3),
    "atleast_2d": (lambda m, a, b, c: m.atleast_2d(a, b, c), np.float32(3), V3, X3),
    "atleast_3d": (lambda m, a, b, c, d: m.atleast_3d(a, b, c, d), np.float32(3), V3,
                   np.ones((2, 2), "f4"), X3),
    "diff": (lambda m, a: m.diff(a), X3),
    "diff_n2_axis": (lambda m, a: m.diff(a, n=2, axis=1), X3),
    "diff_n0": (lambda m, a: m.diff(a, n=0), X3),
    "diff_n3": (lambda m, a: m.diff(a, 3), I3),
    "diff_prepend": (lambda m, a: m.diff(a, prepend=0), X3),
    "diff_append_arr": (lambda m, a, b: m.diff(a, append=b, axis=0), X3, np.ones((1, 3, 4), "f4")),
    "diff_both": (lambda m, a: m.diff(a, axis=1, prepend=-1.0, append=9.0), X3),
    "diff_bool": (lambda m, a: m.diff(a), np.array([True, False, False, True])),
    "diff_uint": (lambda m, a: m.diff(a), np.array([3, 1, 7], np.uint8)),
    "unstack": (lambda m, a: m.unstack(a, axis=1) if m is fnp else
                tuple(np.moveaxis(a, 1, 0)), X3),
}
for _k in range(-5, 6):
    MANIP[f"rot90_k{_k}"] = (lambda m, a, k=_k: m.rot90(a, k), X3)
    MANIP[f"rot90_k{_k}_axes"] = (lambda m, a, k=_k: m.rot90(a, k, axes=(2, 0)), X3)
for _o in range(-4, 5):
    MANIP[f"diagonal_{_o}"] = (lambda m, a, o=_o: m.diagonal(a, o), np.arange(12.).reshape(3, 4))
    MANIP[f"diagonal_axes_{_o}"] = (lambda m, a, o=_o: m.diagonal(a, o, 2, 0), X3)
    MANIP[f"trace_{_o}"] = (lambda m, a, o=_o: m.trace(a, o), np.arange(12.).reshape(3, 4))
    MANIP[f"trace_axes_{_o}"] = (lambda m, a, o=_o: m.trace(a, o, 0, 2), X3)
MANIP["diagonal_method"] = (lambda m, a: a.diagonal(1), np.arange(12.).reshape(3, 4))
MANIP["trace_method"] = (lambda m, a: a.trace(-1), np.arange(12.).reshape(3, 4))


MANIP_DTYPE = {"diff_prepend": F4, "diff_both": F4}  # NumPy: int64/float64 scalars; JAX: weak


@pytest.mark.parametrize("case", sorted(MANIP))
def test_manipulation_vs_numpy(case):
    fn, *arrays = MANIP[case]
    check_vs_numpy(fn, *arrays, dtype=MANIP_DTYPE.get(case))


def test_concatenate_and_stack_promote():
    r = fnp.concatenate([fnp.ones(2, np.int8), fnp.ones(2, np.uint8)])
    assert r.dtype == I2
    r = fnp.concatenate([fnp.ones(2, np.int32), fnp.ones(2, np.float16)])
    assert r.dtype == F2
    with fnx.enable_x64():
        r = fnp.stack([fnp.ones(2, np.int32), np.ones(2, np.int64)])
        assert r.dtype == I8
    r = fnp.concatenate([fnp.ones(2), [1, 2]])
    assert r.dtype == F4
    r = fnp.concatenate([fnp.ones(2), fnp.ones(2)], dtype=np.int16)
    assert r.dtype == I2
    with pytest.raises((ValueError, TypeError)):
        fnp.concatenate([fnp.ones(()), fnp.ones(())])
    with pytest.raises((ValueError, TypeError)):
        fnp.stack([fnp.ones(2), fnp.ones(3)])
    with pytest.raises((ValueError, TypeError)):
        fnp.split(fnp.ones(5), 2)


def test_trace_dtype_and_reshape_errors():
    r = fnp.trace(fnp.asarray(np.ones((3, 3), np.int8)))
    assert r.dtype == I4                            # sums accumulate in int32
    r = fnp.trace(fnp.ones((3, 3)), dtype=np.float16)
    assert r.dtype == F2
    with pytest.raises((ValueError, TypeError)):
        fnp.reshape(fnp.ones(6), (4, -1))
    with pytest.raises((ValueError, TypeError)):
        fnp.reshape(fnp.ones(6), (-1, -1))
    with pytest.raises((ValueError, TypeError)):
        fnp.broadcast_to(fnp.ones(3), (4, 2))
    assert fnp.broadcast_shapes((2, 1), (1, 3), ()) == (2, 3)


@FEW
@given(data=st.data())
def test_transpose_moveaxis_random(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, max_side=3))
    x = np.arange(math.prod(shape), dtype=np.int16).reshape(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    check_vs_numpy(lambda m, a: m.transpose(a, perm), x)
    k = data.draw(st.integers(1, len(shape)))
    src = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=k, max_size=k,
                             unique_by=lambda v: v % len(shape)))
    dst = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=k, max_size=k,
                             unique_by=lambda v: v % len(shape)))
    check_vs_numpy(lambda m, a: m.moveaxis(a, src, dst), x)
    shift = data.draw(st.lists(st.integers(-7, 7), min_size=k, max_size=k))
    check_vs_numpy(lambda m, a: m.roll(a, shift, axis=src), x)


PAD_MODES = ["constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum",
             "reflect", "symmetric", "wrap"]


@pytest.mark.parametrize("mode", PAD_MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pad_modes(mode, dtype):
    x = (np.array([[3, 1, 4, 1], [5, 9, 2, 6], [5, 3, 5, 8]]) - 2).astype(dtype)
    for width in (0, 1, (2, 3), ((1, 0), (3, 2)), ((5, 7), (6, 9)), ((0, 0), (0, 4))):
        check_vs_numpy(lambda m, a: m.pad(a, width, mode=mode), x)
    check_vs_numpy(lambda m, a: m.pad(a, 2, mode=mode), np.array([7, -1, 3], dtype))
    check_vs_numpy(lambda m, a: m.pad(a, ((1, 2), (0, 1), (2, 0)), mode=mode),
                   np.arange(12, dtype=dtype).reshape(2, 3, 2))
    check_vs_numpy(lambda m, a: m.pad(a, ((0, 0), (1, 2)), mode=mode), np.zeros((0, 2), dtype))
    if mode == "constant":
        check_vs_numpy(lambda m, a: m.pad(a, 1, mode=mode), np.zeros((0, 2), dtype))
    else:
        with pytest.raises(ValueError):
            fnp.pad(fnp.zeros((0, 2), dtype), 1, mode=mode)
    check_vs_numpy(lambda m, a: m.pad(a, ((2, 3),), mode=mode), np.array([4], dtype))


def test_pad_options():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    cv = ((1, 2), (3, 4))
    check_vs_numpy(lambda m, a: m.pad(a, 2, constant_values=cv), x)
    check_vs_numpy(lambda m, a: m.pad(a, ((1, 2), (2, 1)), constant_values=-5), x)
    check_vs_numpy(lambda m, a: m.pad(a, 1, constant_values=(7,)), x)
    check_vs_numpy(lambda m, a: m.pad(a, (1, 2), mode="linear_ramp", end_values=(5, -5)), x)
    check_vs_numpy(lambda m, a: m.pad(a, 2, mode="linear_ramp", end_values=((1, 2), (3, 4))), x)
    for stat in ("maximum", "minimum", "mean", "median"):
        for sl in (1, 2, (1, 3), ((2, 1), (3, 1)), None, 10):
            check_vs_numpy(lambda m, a: m.pad(a, 2, mode=stat, stat_length=sl), x)
    for mode in ("reflect", "symmetric"):
        for width in (1, 3, (5, 2), 9):
            check_vs_numpy(lambda m, a: m.pad(a, width, mode=mode, reflect_type="odd"), x)
            check_vs_numpy(lambda m, a: m.pad(a, width, mode=mode, reflect_type="odd"),
                           np.array([2.0, -1.0]))
    r = fnp.pad(fnp.asarray(x), 1, mode="empty")
    assert r.shape == (5, 6) and r.dtype == F4
    np.testing.assert_array_equal(np.asarray(r)[1:-1, 1:-1], x)
    r = fnp.pad(fnp.asarray(x.astype(np.int32)), 1, constant_values=2.7)
    np.testing.assert_array_equal(r, np.pad(x.astype(np.int32), 1, constant_values=2.7))


def test_pad_callable():
    def pad_with(vector, pad_width, iaxis, kwargs):
        v = kwargs.get("padder", 10)
        n = vector.shape[0]
        idx = fnp.arange(n)
        lo, hi = pad_width
        return fnp.where((idx < lo) | (idx >= n - hi), v, vector)

    def np_pad_with(vector, pad_width, iaxis, kwargs):
        v = kwargs.get("padder", 10)
        if pad_width[0]:
            vector[:pad_width[0]] = v
        if pad_width[1]:
            vector[-pad_width[1]:] = v

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(fnp.pad(fnp.asarray(x), 2, pad_with),
                                  np.pad(x, 2, np_pad_with))
    np.testing.assert_array_equal(fnp.pad(fnp.asarray(x), (1, 2), pad_with, padder=-1),
                                  np.pad(x, (1, 2), np_pad_with, padder=-1))


def test_pad_errors():
    with pytest.raises(NotImplementedError):       # JAX's exception for an unknown mode
        fnp.pad(fnp.ones(3), 1, mode="nonsense")
    with pytest.raises(ValueError):
        fnp.pad(fnp.ones(3), -1)
    with pytest.raises(ValueError):
        fnp.pad(fnp.zeros((0,)), 1, mode="wrap")


# ---------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------

def _acc(d, promote_integers=True):
    """JAX's accumulation dtype of sum/prod (and, ``promote_integers=False``, of
    cumsum/cumprod, which promote only bool): the default int (unsigned: uint) when
    narrower, which is 64-bit under x64."""
    x64 = fnx.config.jax_enable_x64
    if d == B:
        return I8 if x64 else I4
    if not promote_integers:
        return d
    if d in (I1, I2) or (x64 and d == I4):
        return I8 if x64 else I4
    if d in (U1, U2) or (x64 and d == U4):
        return U8 if x64 else U4
    return d


# name -> (NumPy reference, dtypes, result dtype(input dtype), needs a non-empty axis)
REDUCTIONS = {
    "sum": (np.sum, "biufc", _acc, False),
    "prod": (np.prod, "biufc", _acc, False),
    "max": (np.max, "biuf", lambda d: d, True),
    "min": (np.min, "biuf", lambda d: d, True),
    "amax": (np.amax, "biuf", lambda d: d, True),
    "amin": (np.amin, "biuf", lambda d: d, True),
    "ptp": (np.ptp, "iuf", lambda d: d, True),
    "mean": (np.mean, "biufc", lambda d: INEXACT[d], False),
    "var": (np.var, "biufc", lambda d: REAL_OF.get(INEXACT[d], INEXACT[d]), False),
    "std": (np.std, "biufc", lambda d: REAL_OF.get(INEXACT[d], INEXACT[d]), False),
    "any": (np.any, "biufc", lambda d: B, False),
    "all": (np.all, "biufc", lambda d: B, False),
    "count_nonzero": (np.count_nonzero, "biufc",
                      lambda d: I8 if fnx.config.jax_enable_x64 else I4, False),
}


def _axis_strategy(ndim):
    single = st.integers(-ndim, ndim - 1) if ndim else st.sampled_from([0, -1])
    multi = st.lists(st.integers(0, max(ndim - 1, 0)), unique=True, max_size=ndim).map(tuple)
    return st.one_of(st.none(), single, multi) if ndim else st.one_of(st.none(), st.just(()))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@SETTINGS
@given(data=st.data())
def test_reductions_vs_numpy(name, data):
    ref, kinds, out_dtype, nonempty = REDUCTIONS[name]
    d = data.draw(st.sampled_from([d for d in DTYPES if d.kind in kinds]), label="dtype")
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1 if nonempty else 0,
                                       max_side=4), label="shape")
    lo, hi = (-3, 3) if name == "prod" else (-20, 20)
    x = data.draw(hnp.arrays(d, shape, elements=elements(d, lo, hi)), label="x")
    axis = data.draw(_axis_strategy(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    if name in ("max", "min", "amax", "amin", "ptp") and x.size and axis == ():
        pass
    elif nonempty and x.size == 0:
        assume(False)
    out = check_jit(lambda a: getattr(fnp, name)(a, axis=axis, keepdims=keepdims),
                    fnp.asarray(x))
    want_dtype = out_dtype(d)
    assert out.dtype == want_dtype, (name, d, out.dtype)
    calc = want_dtype if name not in ("var", "std") else INEXACT[d]
    xin = x if name in ("any", "all", "count_nonzero", "max", "min", "amax", "amin", "ptp") \
        else x.astype(calc)
    want = quiet(ref, xin, axis=axis, keepdims=keepdims)
    tol = _tol(want_dtype) * (50 if d == F2 else 4) if want_dtype.kind in "fc" else None
    assert_close(out, want, want_dtype, tol)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@SETTINGS
@given(data=st.data())
def test_argmax_argmin_vs_numpy(name, data):
    d = data.draw(st.sampled_from([d for d in DTYPES if d.kind in "biuf"]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    x = data.draw(hnp.arrays(d, shape, elements=elements(d, -3, 3, special=True)))
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keepdims = data.draw(st.booleans())
    out = check_jit(lambda a: getattr(fnp, name)(a, axis=axis, keepdims=keepdims),
                    fnp.asarray(x))
    assert out.dtype == (I8 if fnx.config.jax_enable_x64 else I4)  # the default int
    np.testing.assert_array_equal(out, getattr(np, name)(x, axis=axis, keepdims=keepdims))
    assert_identical(getattr(fnp.asarray(x), name)(axis=axis, keepdims=keepdims), out)


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cumulative_sum", "cumulative_prod"])
@SETTINGS
@given(data=st.data())
def test_cumulative_vs_numpy(name, data):
    d = data.draw(st.sampled_from([d for d in DTYPES if d.kind in "biufc"]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    x = data.draw(hnp.arrays(d, shape, elements=elements(d, -3, 3)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    if name.startswith("cumulative"):
        out = check_jit(lambda a: getattr(fnp, name)(a, axis=axis), fnp.asarray(x))
    else:
        axis = data.draw(st.one_of(st.none(), st.just(axis)))
        out = check_jit(lambda a: getattr(fnp, name)(a, axis=axis), fnp.asarray(x))
    ref = np.cumsum if "sum" in name else np.cumprod
    acc = _acc(d, name.startswith("cumulative"))  # JAX: cumsum/cumprod promote bool only
    assert out.dtype == acc, (d, out.dtype)
    assert_close(out, ref(x.astype(acc), axis=axis), acc)


def test_accumulation_dtypes():
    assert fnp.sum(_arr([1, 2], I1)).dtype == I4
    assert fnp.sum(_arr([True, True], B)).dtype == I4
    assert int(fnp.sum(_arr([True, True, False], B))) == 2
    assert fnp.sum(_arr([200, 100], U1)).dtype == U4
    assert int(fnp.sum(_arr([200, 100], U1))) == 300
    assert fnp.sum(_arr([1, 2], U2)).dtype == U4
    with fnx.enable_x64():
        assert fnp.sum(_arr([1, 2], I8)).dtype == I8
        assert fnp.sum(_arr([1, 2], U8)).dtype == U8
        assert fnp.sum(_arr([1, 2], I4)).dtype == I8  # the default int is int64 here
    assert fnp.sum(_arr([1, 2], F2)).dtype == F2
    assert fnp.prod(_arr([100, 100], I1)).dtype == I4
    assert int(fnp.prod(_arr([100, 100], I1))) == 10000
    assert fnp.cumsum(_arr([100, 100], I1)).dtype == I1  # JAX: cumsum promotes bool only
    assert fnp.cumsum(_arr([True, True], B)).dtype == I4
    assert fnp.mean(_arr([1, 2], I4)).dtype == F4
    with fnx.enable_x64():
        assert fnp.mean(_arr([1, 2], I8)).dtype == F8
        assert fnp.mean(_arr([1, 2], I4)).dtype == F4  # int32 averages in float32 (JAX)
    assert fnp.mean(_arr([True, False], B)).dtype == F4
    assert fnp.var(_arr([1, 2], I4)).dtype == F4
    assert fnp.std(_arr([1 + 1j, 2], C4)).dtype == F4
    assert fnp.sum(_arr([1, 2], I1), dtype=np.int8).dtype == I1
    assert fnp.mean(_arr([1, 2], I4), dtype=np.float16).dtype == F2
    assert fnp.count_nonzero(_arr([1, 0, 2], I8)).dtype == I4
    assert fnp.argmax(_arr([1, 3, 2], I8)).dtype == I4
    assert not fnp.sum(_arr([1.0], F4)).weak_type
    s = fnp.sum(2.0)
    assert s.dtype == F4 and s.weak_type


def test_reductions_where_initial_ddof():
    x = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10) / 3
    m = (np.arange(24).reshape(2, 3, 4) % 3) == 0
    X, M = fnp.asarray(x), fnp.asarray(m)
    for name in ("sum", "prod", "mean", "var", "std", "any", "all"):
        for axis in (None, 1, (0, 2), -1):
            got = check_jit(lambda a, w: getattr(fnp, name)(a, axis=axis, where=w), X, M)
            assert_close(got, getattr(np, name)(x, axis=axis, where=m), tol=1e-4)
    for name in ("max", "min", "sum", "prod"):
        for axis in (None, 0, (1, 2)):
            got = check_jit(lambda a: getattr(fnp, name)(a, axis=axis, initial=2.0), X)
            assert_close(got, getattr(np, name)(x, axis=axis, initial=2.0))
            got = check_jit(lambda a, w: getattr(fnp, name)(a, axis=axis, initial=-1.0, where=w),
                            X, M)
            assert_close(got, getattr(np, name)(x, axis=axis, initial=-1.0, where=m), tol=1e-4)
    row = np.array([True, False, True, True])           # broadcasts against x
    assert_close(fnp.sum(X, axis=2, where=fnp.asarray(row)), np.sum(x, axis=2, where=row))
    assert_close(fnp.mean(X, axis=(0, 1), where=M, keepdims=True),
                 np.mean(x, axis=(0, 1), where=m, keepdims=True))
    for ddof in (0, 1, 2):
        for axis in (None, 1, (0, 2)):
            assert_close(check_jit(lambda a: fnp.var(a, axis=axis, ddof=ddof), X),
                         np.var(x, axis=axis, ddof=ddof), tol=1e-4)
            assert_close(fnp.std(X, axis=axis, ddof=ddof, keepdims=True),
                         np.std(x, axis=axis, ddof=ddof, keepdims=True), tol=1e-4)
    assert_close(fnp.var(X, axis=1, ddof=1, where=M), np.var(x, axis=1, ddof=1, where=m),
                 tol=1e-4)
    assert_close(fnp.var(X, correction=1), np.var(x, ddof=1), tol=1e-4)
    assert_close(X.var(axis=0, ddof=1), np.var(x, axis=0, ddof=1), tol=1e-4)
    assert_close(X.std(), np.std(x), tol=1e-5)
    assert_close(fnp.max(_arr([1, 5, 3], I4), initial=10), 10)
    assert float(fnp.max(fnp.zeros((0,)), initial=-3.0)) == -3.0
    assert float(fnp.min(fnp.zeros((2, 0)), initial=4.0)) == 4.0
    with pytest.raises(ValueError):
        fnp.max(fnp.zeros((0,)))
    with pytest.raises(ValueError):
        fnp.argmax(fnp.zeros((0,)))


def test_reductions_nan_and_empty():
    x = _arr([1.0, np.nan, 3.0], F4)
    for name in ("max", "min", "sum", "mean", "argmax", "argmin", "ptp"):
        np.testing.assert_array_equal(getattr(fnp, name)(x), getattr(np, name)(np.asarray(x)),
                                      err_msg=name)
    assert float(fnp.sum(fnp.zeros((0, 3)))) == 0.0
    assert float(fnp.prod(fnp.zeros((0,)))) == 1.0
    np.testing.assert_array_equal(fnp.sum(fnp.zeros((0, 3)), axis=0), np.zeros(3))
    assert bool(fnp.all(fnp.zeros((0,)))) and not bool(fnp.any(fnp.zeros((0,))))
    assert np.isnan(float(quiet(fnp.mean, fnp.zeros((0,)))))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
def test_average(axis):
    x = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5) / 2
    X = fnp.asarray(x)
    assert_close(check_jit(lambda a: fnp.average(a, axis=axis), X), np.average(x, axis=axis))
    w = (np.abs(x) + 1).astype(np.float32)
    got = check_jit(lambda a, b: fnp.average(a, axis=axis, weights=b), X, fnp.asarray(w))
    assert_close(got, np.average(x, axis=axis, weights=w))
    avg, wsum = fnp.average(X, axis=axis, weights=fnp.asarray(w), returned=True)
    navg, nwsum = np.average(x, axis=axis, weights=w, returned=True)
    assert_close(avg, navg)
    assert_close(wsum, nwsum)
    avg = fnp.average(X, axis=axis, weights=fnp.asarray(w), keepdims=True)
    assert_close(avg, np.average(x, axis=axis, weights=w, keepdims=True))
    avg, cnt = fnp.average(X, axis=axis, returned=True)
    navg, ncnt = np.average(x, axis=axis, returned=True)
    assert_close(avg, navg)
    assert_close(cnt, ncnt)


def test_average_1d_weights_and_dtypes():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    w = np.array([1, 2, 3], np.int32)
    got = fnp.average(fnp.asarray(x), axis=0, weights=fnp.asarray(w))
    assert got.dtype == F4
    assert_close(got, np.average(x, axis=0, weights=w))
    got = fnp.average(fnp.asarray(x), axis=1, weights=[1.0, 0.0, 1.0, 2.0])
    assert_close(got, np.average(x, axis=1, weights=[1.0, 0.0, 1.0, 2.0]))
    assert fnp.average(fnp.asarray(x)).dtype == F4
    assert fnp.average(fnp.asarray(x.astype(np.int64))).dtype == F8
    with pytest.raises((ValueError, TypeError)):
        fnp.average(fnp.asarray(x), weights=fnp.asarray(w))


def test_average_with_weights_along_several_axes():
    # JAX: weights shaped as a's axes along ``axis``, in the order ``axis`` names them
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    got = check_jit(lambda a, b: fnp.average(a, axis=(2, 0), weights=b), fnp.asarray(x),
                    fnp.asarray(w))
    full = np.broadcast_to(w.T[:, None, :], x.shape)   # w[k, i] weighs x[i, :, k]
    assert_close(got, np.average(x, axis=(2, 0), weights=full))
    np.testing.assert_allclose(np.asarray(got), [9.071429, 13.071429, 17.07143], rtol=1e-6)
    _, wsum = fnp.average(x, axis=(2, 0), weights=w, returned=True, keepdims=True)
    assert wsum.shape == (1, 3, 1) and float(wsum[0, 0, 0]) == 28.0
    with pytest.raises(ValueError):
        fnp.average(x, axis=(0, 2), weights=w)       # (2, 4) along (0, 2), not (4, 2)


def test_cov_rowvar_weights_and_dtype_as_jax():
    # NumPy 2.2 / JAX: rowvar=False transposes a (1, n) m too (3 variables, 1 observation)
    c = fnp.cov(np.arange(3.0, dtype=np.float32).reshape(1, 3), rowvar=False, ddof=0)
    assert c.shape == (3, 3)
    # ... but not a (1, n) y
    c = fnp.cov(np.arange(3.0).reshape(3, 1), np.arange(3.0).reshape(1, 3) + 1, rowvar=False,
                ddof=0)
    np.testing.assert_allclose(np.asarray(c), np.full((2, 2), 2 / 3), rtol=1e-6)
    x = _R.standard_normal((3, 5)).astype(np.float32)
    fw, aw = np.array([1, 2, 1, 3, 1]), np.array([0.5, 1, 2, 1, 0.3], np.float32)
    with fnx.numpy_rank_promotion("raise"):      # the weights broadcast explicitly
        got = fnp.cov(x, fweights=fw, aweights=aw)
        assert_close(fnp.cov(x[0], fweights=fw, aweights=aw), np.cov(x[0], fweights=fw,
                                                                     aweights=aw))
    assert_close(got, np.cov(x, fweights=fw, aweights=aw))
    assert fnp.cov(np.arange(5), dtype="bfloat16").dtype == fnp.bfloat16
    with pytest.raises(ValueError, match="float or complex"):
        fnp.cov(np.arange(5), dtype=int)


def test_reductions_under_strict_promotion_and_rank_raise():
    c = np.array([1 + 1j, np.nan, 3], np.complex64)
    with fnx.numpy_dtype_promotion("strict"), fnx.numpy_rank_promotion("raise"):
        m = fnp.nanmean(c)
        assert m.dtype == np.complex64 and complex(m) == 2 + 0.5j
        assert fnp.nanvar(c).dtype == np.float32
        got = fnp.nanmax(np.array([[1.0, np.nan], [3, 4]], np.float32), axis=0,
                         where=np.array([True, False]), initial=-1)
        np.testing.assert_array_equal(got, [3, -1])


def test_reduction_argument_checks_as_jax():
    with pytest.raises(ValueError, match="initial value must be a scalar"):
        fnp.sum(np.zeros((2, 3)), initial=np.zeros((1, 2, 3)))
    assert float(fnp.sum(np.zeros((2, 3)), initial=np.float32(2))) == 2.0
    for f in (fnp.var, fnp.std):
        with pytest.raises(ValueError, match="ddof and correction"):
            f(np.ones(3), ddof=1, correction=0)
        assert_close(f(np.arange(3.0), correction=1), f(np.arange(3.0), ddof=1))


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
def test_cumulative_with_bool_dtype(name):
    # JAX: accumulate a != 0 as integers, then cast ([-1, 1] must not cancel)
    i = np.array([-1, 1, 0, 2])
    want = {"cumsum": [1, 1, 1, 1], "cumprod": [1, 1, 0, 0]}[name.replace("nan", "")]
    got = check_jit(lambda a: getattr(fnp, name)(a, dtype=bool), fnp.asarray(i))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.array(want, bool))
    api = {"cumsum": fnp.cumulative_sum, "cumprod": fnp.cumulative_prod}[name.replace("nan", "")]
    got = api(i, dtype=bool, include_initial=True)
    np.testing.assert_array_equal(got, np.array([name.endswith("prod")] + want, bool))


@pytest.mark.parametrize("name", ["sum", "prod", "nansum", "nanprod"])
def test_sum_and_prod_with_bool_dtype(name):
    # JAX: in bool, add is "or" and multiply is "and" (values != 0)
    f = getattr(fnp, name)
    i8 = np.array([[0, 1], [2, -1]], np.int8)
    prod = name.endswith("prod")
    got = check_jit(lambda a: f(a, axis=0, dtype=bool), fnp.asarray(i8))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, [False, True] if prod else [True, True])
    np.testing.assert_array_equal(f(np.zeros((0, 2)), axis=0, dtype=bool), [prod, prod])
    x = np.array([[0.0, np.nan], [2, 0]], np.float32)
    got = f(x, axis=1, dtype=bool, where=np.array([True, False]), initial=False)
    np.testing.assert_array_equal(got, [False, False] if prod else [False, True])


def test_complex_max_min_with_where_and_fmax_fmin():
    # the identity of a where-masked complex max/min is -inf+0j / inf+0j (JAX's)
    c = np.array([[1 + 2j, 3 - 1j], [2 + 5j, 2 + 1j]], np.complex64)
    m = np.array([[True, False], [False, True]])
    assert complex(fnp.max(c, where=m, initial=0)) == 2 + 1j
    assert complex(fnp.min(c, where=m, initial=0)) == 0
    np.testing.assert_array_equal(fnp.nanmax(c, axis=1, where=np.array([True, False]),
                                             initial=0), [1 + 2j, 2 + 5j])
    # fmax/fmin of complex and bfloat16 ignore NaNs (JAX: x where x > y or y is NaN)
    a = np.array([1 + 1j, np.nan, 2, complex(1, np.nan), np.nan], np.complex64)
    b = np.array([np.nan, 1j, 3, 0, complex(0, np.nan)], np.complex64)
    np.testing.assert_array_equal(check_jit(fnp.fmax, fnp.asarray(a), fnp.asarray(b)),
                                  np.array([1 + 1j, 1j, 3, complex(1, np.nan), np.nan],
                                           np.complex64))
    np.testing.assert_array_equal(fnp.fmin(a, b),
                                  np.array([1 + 1j, 1j, 2, 0, np.nan], np.complex64))
    h = np.array([1, np.nan, 2, np.nan], fnp.bfloat16)
    g = np.array([np.nan, 1, 3, np.nan], fnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(fnp.fmax(h, g)).astype(np.float32),
                                  [1, 1, 3, np.nan])
    np.testing.assert_array_equal(np.asarray(fnp.fmin(h, g)).astype(np.float32),
                                  [1, 1, 2, np.nan])


def test_bool_max_min_with_where():
    b = np.array([[True, False], [False, False]])
    m = np.array([[False, True], [True, True]])
    np.testing.assert_array_equal(fnp.max(b, axis=0, where=m, initial=False), [False, False])
    np.testing.assert_array_equal(fnp.min(b, axis=1, where=m, initial=True), [False, False])
    assert fnp.max(np.zeros((0, 4), bool), axis=0, where=True, initial=0).shape == (4,)


def test_diff_of_empty_and_short_axes_is_empty():
    assert fnp.diff(np.zeros(0, np.int32)).shape == (0,)
    assert fnp.diff(np.zeros((0, 2), np.int32), axis=0).shape == (0, 2)
    assert fnp.diff(np.zeros(2, np.int32), n=3).shape == (0,)
    assert fnp.diff(np.zeros(2, bool), n=3).dtype == np.bool_
    assert fnp.ediff1d(np.zeros(0, np.int32)).shape == (0,)


# ---------------------------------------------------------------------------------------
# products
# ---------------------------------------------------------------------------------------

_R = np.random.default_rng(1)


def _f(*shape):
    return _R.standard_normal(shape).astype(np.float32)


def _c(*shape):
    return (_R.standard_normal(shape) + 1j * _R.standard_normal(shape)).astype(np.complex64)


PRODUCTS = {
    "matmul_2d": (lambda m, a, b: m.matmul(a, b), _f(3, 4), _f(4, 5)),
    "matmul_batch": (lambda m, a, b: m.matmul(a, b), _f(2, 3, 4), _f(4, 5)),
    "matmul_broadcast": (lambda m, a, b: m.matmul(a, b), _f(5, 1, 2, 3), _f(4, 3, 2)),
    "matmul_1d_right": (lambda m, a, b: m.matmul(a, b), _f(2, 3, 4), _f(4)),
    "matmul_1d_left": (lambda m, a, b: m.matmul(a, b), _f(3), _f(2, 3, 4)),
    "matmul_1d_1d": (lambda m, a, b: m.matmul(a, b), _f(4), _f(4)),
    "matmul_int": (lambda m, a, b: m.matmul(a, b), np.arange(6).reshape(2, 3),
                   np.arange(6).reshape(3, 2)),
    "matmul_complex": (lambda m, a, b: m.matmul(a, b), _c(2, 3), _c(3, 2)),
    "matmul_op": (lambda m, a, b: a @ b, _f(2, 3), _f(3)),
    "dot_scalar": (lambda m, a, b: m.dot(a, b), _f(2, 3), np.float32(2.0)),
    "dot_scalar_left": (lambda m, a, b: m.dot(a, b), np.float32(2.0), _f(3)),
    "dot_1d": (lambda m, a, b: m.dot(a, b), _f(4), _f(4)),
    "dot_2d_1d": (lambda m, a, b: m.dot(a, b), _f(3, 4), _f(4)),
    "dot_1d_2d": (lambda m, a, b: m.dot(a, b), _f(3), _f(3, 4)),
    "dot_nd": (lambda m, a, b: m.dot(a, b), _f(2, 3, 4), _f(2, 4, 3)),
    "dot_nd_1d": (lambda m, a, b: m.dot(a, b), _f(2, 3, 4), _f(4)),
    "dot_1d_nd": (lambda m, a, b: m.dot(a, b), _f(3), _f(2, 3, 4)),
    "dot_method": (lambda m, a, b: a.dot(b), _f(2, 3), _f(3, 2)),
    "vdot": (lambda m, a, b: m.vdot(a, b), _f(2, 3), _f(3, 2)),
    "vdot_complex": (lambda m, a, b: m.vdot(a, b), _c(4), _c(4)),
    "tensordot_0": (lambda m, a, b: m.tensordot(a, b, 0), _f(3), _f(2, 2)),
    "tensordot_1": (lambda m, a, b: m.tensordot(a, b, 1), _f(2, 3, 4), _f(4, 5)),
    "tensordot_2": (lambda m, a, b: m.tensordot(a, b), _f(2, 3, 4), _f(3, 4, 2)),
    "tensordot_pairs": (lambda m, a, b: m.tensordot(a, b, ([0, 2], [2, 1])), _f(2, 3, 4),
                        _f(3, 4, 2)),
    "tensordot_int_pair": (lambda m, a, b: m.tensordot(a, b, (1, 0)), _f(2, 3, 4), _f(3, 2)),
    "tensordot_neg": (lambda m, a, b: m.tensordot(a, b, ([-1], [-2])), _f(2, 3, 4), _f(4, 2)),
    "vecdot": (lambda m, a, b: m.vecdot(a, b), _f(2, 3, 4), _f(4)),
    "vecdot_axis": (lambda m, a, b: m.vecdot(a, b, axis=0), _f(3, 2), _f(3, 1)),
    "vecdot_complex": (lambda m, a, b: m.vecdot(a, b), _c(2, 3), _c(3)),
    "inner": (lambda m, a, b: m.inner(a, b), _f(2, 3, 4), _f(5, 4)),
    "inner_1d": (lambda m, a, b: m.inner(a, b), _f(4), _f(4)),
    "inner_scalar": (lambda m, a, b: m.inner(a, b), _f(2, 3), np.float32(3.0)),
    "outer": (lambda m, a, b: m.outer(a, b), _f(2, 3), _f(4)),
    "kron": (lambda m, a, b: m.kron(a, b), np.arange(4).reshape(2, 2), np.ones((2, 3), "i8")),
    "kron_1d_2d": (lambda m, a, b: m.kron(a, b), np.arange(3), np.arange(4).reshape(2, 2)),
    "kron_3d": (lambda m, a, b: m.kron(a, b), _f(2, 1, 2), _f(3, 2)),
    "cross": (lambda m, a, b: m.cross(a, b), _f(4, 3), _f(3)),
    "cross_axes": (lambda m, a, b: m.cross(a, b, axisa=0, axisb=0), _f(3, 4), _f(3, 4)),
    "cross_axisc": (lambda m, a, b: m.cross(a, b, axisc=0), _f(4, 3), _f(4, 3)),
    "cross_axis": (lambda m, a, b: m.cross(a, b, axis=1), _f(2, 3, 2), _f(2, 3, 2)),
    "cross_int": (lambda m, a, b: m.cross(a, b), np.array([1, 2, 3]), np.array([4, 5, 7])),
}


@pytest.mark.parametrize("case", sorted(PRODUCTS))
def test_products_vs_numpy(case):
    fn, *arrays = PRODUCTS[case]
    got = check_jit(lambda *a: fn(fnp, *a), *[fnp.asarray(a) for a in arrays])
    want = fn(np, *arrays)
    assert got.dtype == np.asarray(want).dtype
    assert_close(got, want, tol=1e-4 if got.dtype.kind in "fc" else None)


def test_cross_2d_vectors():
    a, b = _f(4, 2), _f(4, 2)
    got = check_jit(fnp.cross, fnp.asarray(a), fnp.asarray(b))
    assert_close(got, a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])
    c = _f(4, 3)
    got = fnp.cross(fnp.asarray(a), fnp.asarray(c))
    a3 = np.concatenate([a, np.zeros((4, 1), np.float32)], axis=1)
    assert_close(got, np.cross(a3, c))
    with pytest.raises((ValueError, TypeError)):
        fnp.cross(fnp.ones(4), fnp.ones(4))


def test_product_dtypes_and_errors():
    assert fnp.matmul(fnp.ones(3, np.int8), fnp.ones(3, np.uint8)).dtype == I2
    assert fnp.dot(fnp.ones(3), 2).dtype == F4
    assert fnp.dot(fnp.ones(3, np.int32), 2.5).dtype == F4
    assert fnp.matmul(fnp.ones((2, 3), np.float16), fnp.ones(3, np.float32)).dtype == F4
    assert fnp.outer(fnp.ones(2, np.int16), fnp.ones(2, np.int8)).dtype == I2
    r = fnp.dot(fnp.asarray([True, False]), fnp.asarray([True, True]))
    assert r.dtype == B and bool(r)
    with pytest.raises((ValueError, TypeError)):
        fnp.matmul(fnp.ones((2, 3)), fnp.ones((4, 2)))
    with pytest.raises((ValueError, TypeError)):
        fnp.matmul(fnp.ones(3), 2.0)
    with pytest.raises((ValueError, TypeError)):
        fnp.matmul(fnp.ones((2, 2, 3)), fnp.ones((3, 3, 2)))


# ---------------------------------------------------------------------------------------
# indexing
# ---------------------------------------------------------------------------------------

class Dyn:
    """An index array in a generated index: passed to jitted functions as a traced arg."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Dyn({self.value.tolist()!r}, {self.value.dtype})"


@st.composite
def index_exprs(draw, shape):
    """A NumPy index for an array of ``shape``: ints (negative too), slices (negative
    steps, out-of-range bounds), None, Ellipsis, 0-d bools, and either integer arrays /
    lists of one broadcast shape (possibly non-adjacent) or one boolean mask."""
    ndim = len(shape)
    kind = draw(st.sampled_from(["basic", "arrays", "mask"]))
    n_consume = draw(st.integers(0, ndim))
    use_ellipsis = draw(st.booleans()) and n_consume < ndim
    arr_shape = draw(st.sampled_from([(), (2,), (3,), (2, 1), (1, 3), (2, 3), (0,)]))
    items, dim = [], 0
    mask_done = False
    while dim < n_consume:
        n = shape[dim]
        choices = ["int", "slice", "slice"]
        if kind == "arrays":
            choices += ["array", "array", "list"]
        if kind == "mask" and not mask_done:
            choices += ["mask"] * 2
        c = draw(st.sampled_from(choices))
        if c == "int" and n == 0:
            c = "slice"
        if c == "int":
            items.append(draw(st.integers(-n, n - 1)))
            dim += 1
        elif c == "slice":
            bound = st.one_of(st.none(), st.integers(-2 * n - 2, 2 * n + 2))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            items.append(slice(draw(bound), draw(bound), step))
            dim += 1
        elif c in ("array", "list"):
            if n == 0:
                items.append(slice(None))
            else:
                dt = draw(st.sampled_from([np.int32, np.int64, np.int8, np.uint8]))
                lo = 0 if np.dtype(dt).kind == "u" else -n
                v = draw(hnp.arrays(dt, arr_shape, elements=st.integers(lo, n - 1)))
                items.append(v.tolist() if c == "list" and v.ndim == 1 else Dyn(v))
            dim += 1
        else:
            m = draw(st.integers(1, n_consume - dim))
            mask = draw(hnp.arrays(np.bool_, tuple(shape[dim:dim + m])))
            items.append(mask)
            dim += m
            mask_done = True
        if draw(st.integers(0, 5)) == 0:
            items.append(None)
        if kind == "basic" and draw(st.integers(0, 9)) == 0:
            items.append(draw(st.booleans()))
    if use_ellipsis:
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    if draw(st.integers(0, 4)) == 0:
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


def _np_index(idx):
    if isinstance(idx, tuple):
        return tuple(_np_index(i) for i in idx)
    return idx.value if isinstance(idx, Dyn) else idx


def _dyn_leaves(idx):
    items = idx if isinstance(idx, tuple) else (idx,)
    return [fnp.asarray(i.value) for i in items if isinstance(i, Dyn)]


def _rebuild(idx, arrays):
    """``idx`` with its Dyn entries replaced by ``arrays`` (Arrays or tracers)."""
    it = iter(arrays)
    if isinstance(idx, tuple):
        return tuple(next(it) if isinstance(i, Dyn) else i for i in idx)
    return next(it) if isinstance(idx, Dyn) else idx


def _eager_index(idx):
    return _rebuild(idx, _dyn_leaves(idx))


def _draw_array_and_index(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
                      label="shape")
    dtype = data.draw(st.sampled_from([F4, I4, I8, U1, B, C4]), label="dtype")
    x = data.draw(hnp.arrays(dtype, shape, elements=elements(dtype, -9, 9)), label="x")
    idx = data.draw(index_exprs(shape), label="idx")
    try:
        with np.errstate(all="ignore"):
            want = x[_np_index(idx)]
    except IndexError:
        assume(False)  # e.g. arrays that do not broadcast with a mask's nonzero count
    return x, idx, want


@settings(SETTINGS, max_examples=_EXAMPLES or 400)
@given(data=st.data())
def test_getitem_vs_numpy(data):
    x, idx, want = _draw_array_and_index(data)
    X = fnp.asarray(x)
    got = X[_eager_index(idx)]
    assert got.dtype == x.dtype
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
    traced = fnx.jit(lambda a, *arrs: a[_rebuild(idx, arrs)])(X, *_dyn_leaves(idx))
    assert_identical(traced, got)
    assert_identical(X.at[_eager_index(idx)].get(), got)


def _update_ref(op, x, idx, v):
    ref = x.copy()
    with np.errstate(all="ignore"):
        if op == "set":
            ref[idx] = v
        elif op == "apply":  # once per occurrence, as np.negative.at and JAX's scatter_apply
            np.negative.at(ref, idx)
        else:
            ufunc = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                     "mul": np.multiply, "divide": np.divide, "power": np.power,
                     "min": np.minimum, "max": np.maximum}[op]
            # (NumPy 2.4's ufunc.at miscounts values it has to broadcast itself)
            ufunc.at(ref, idx, np.broadcast_to(v, x[idx].shape).copy())
    return ref


AT_OPS = ["set", "add", "subtract", "multiply", "mul", "divide", "power", "min", "max",
          "apply"]


@pytest.mark.parametrize("op", AT_OPS)
@settings(SETTINGS, max_examples=_EXAMPLES or 80)
@given(data=st.data())
def test_at_updates_vs_numpy(op, data):
    x, idx, sub = _draw_array_and_index(data)
    if op in ("divide", "power") or (x.dtype == B and op not in ("set", "min", "max")) \
            or (x.dtype == U1 and op == "apply"):
        x = np.asarray(np.abs(x).astype(F4) + 0.5)  # positive floats: (x ** a) ** b == x ** ab
    elif op in ("min", "max") and x.dtype == C4:
        x = np.asarray(x.real.astype(F4))
    dups = any(isinstance(i, (Dyn, list)) for i in (idx if isinstance(idx, tuple) else (idx,)))
    if data.draw(st.booleans(), label="scalar values") or (op == "set" and dups):
        v = {"power": 2.0, "divide": 2.0}.get(op, 3)
    else:
        v = data.draw(hnp.arrays(x.dtype, sub.shape[data.draw(st.integers(0, sub.ndim)):],
                                 elements=elements(x.dtype, 1, 3)), label="values")
        if op == "power":
            v = np.round(v)
    want = _update_ref(op, x, _np_index(idx), v)
    X = fnp.asarray(x)
    V = v if np.isscalar(v) else fnp.asarray(v)

    def update(a, vals, *arrs):
        ref = a.at[_rebuild(idx, arrs)]
        if op == "apply":
            return ref.apply(fnp.negative)
        return getattr(ref, op)(vals)

    got = update(X, V, *_dyn_leaves(idx))
    assert got.dtype == x.dtype and got.shape == x.shape
    assert_close(got, want, x.dtype, tol=1e-5 if op in ("divide", "power") else None)
    traced = fnx.jit(update)(X, V, *_dyn_leaves(idx))
    assert_identical(traced, got)


def test_at_repeated_indices_accumulate():
    x = np.arange(6.0, dtype=np.float32)
    X = fnp.asarray(x)
    i = np.array([1, 1, 3, 1, -1], np.int32)
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    for op, uf in (("add", np.add), ("multiply", np.multiply), ("mul", np.multiply),
                   ("min", np.minimum), ("max", np.maximum), ("subtract", np.subtract)):
        ref = x.copy()
        uf.at(ref, i, v)
        np.testing.assert_array_equal(check_jit(
            lambda a, j, w: getattr(a.at[j], op)(w), X, fnp.asarray(i), fnp.asarray(v)), ref,
            err_msg=op)
    ref = x.copy()
    np.divide.at(ref, i, v)
    assert_close(check_jit(lambda a, j, w: a.at[j].divide(w), X, fnp.asarray(i),
                           fnp.asarray(v)), ref)
    ref = x.copy()
    np.power.at(ref, i, np.array([2.0, 1.0, 2.0, 1.0, 0.5], np.float32))
    assert_close(X.at[fnp.asarray(i)].power(fnp.asarray([2.0, 1.0, 2.0, 1.0, 0.5])), ref)
    r = X.at[fnp.asarray([0, 0])].set(fnp.asarray([7.0, 7.0]))
    assert float(r[0]) == 7.0
    # apply runs once per occurrence (JAX: [1., 2.].at[[0, 0, 1]].apply(negative) == [1., -2.])
    np.testing.assert_array_equal(check_jit(lambda a, j: a.at[j].apply(fnp.negative),
                                            fnp.asarray([1.0, 2.0]), fnp.asarray([0, 0, 1])),
                                  [1.0, -2.0])
    ri = fnp.asarray([1, 2, 3], dtype=np.int32).at[1].divide(2)
    assert ri.dtype == F4 and float(ri[1]) == 1.0            # as JAX: divide gives a float


def test_at_updates_with_values_of_another_dtype_follow_jax():
    # JAX 0.10.2: values x's dtype cannot hold safely warn (FutureWarning) and are combined
    # in the promoted dtype, then cast back (x weak stays weak); strict promotion raises
    import warnings
    x = fnp.asarray(np.array([1, -1, 3], np.int32))
    with pytest.warns(FutureWarning, match="scatter inputs have incompatible types"):
        got = x.at[:].add(fnp.float32(0.6))
    assert got.dtype == np.int32 and got.tolist() == [1, 0, 3]  # 1.6, -0.4, 3.6 truncated
    with pytest.warns(FutureWarning):
        assert x.at[:].multiply(fnp.float32(0.5)).tolist() == [0, 0, 1]
    with pytest.warns(FutureWarning):
        assert x.at[0].set(fnp.float32(2.7)).tolist() == [2, -1, 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.at[0].set(fnp.int16(5)).dtype == np.int32  # safe: no warning
        weak = fnx.lax.convert_element_type(fnp.arange(3.0), np.float32, weak_type=True)
        assert weak.at[0].add(fnp.float32(2)).weak_type
        u = fnp.zeros(1, np.uint32)  # a Python int is made in x's dtype when it fits
        assert int(u.at[0].set(2**32 - 1)[0]) == 2**32 - 1
        assert int(u.at[0].add(2**32 - 1)[0]) == 2**32 - 1
        assert int(fnp.zeros(1, np.int8).at[0].set(300)[0]) == 44
    with fnx.enable_x64(False), pytest.raises(OverflowError):  # as JAX without x64
        fnp.zeros(1, np.float32).at[0].set(2**40)
    with fnx.numpy_dtype_promotion("strict"):
        with pytest.raises(fnx.dtypes.TypePromotionError):
            x.at[0].set(fnp.int16(5))
        assert x.at[0].set(5).tolist() == [5, -1, 3]


def test_reading_an_empty_dimension_with_an_index_array_raises_index_error():
    x = fnp.ones((2, 0))
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 0"):
        fnx.jit(lambda i: x[0, i])(0)
    with pytest.raises(IndexError, match="empty axis"):
        fnp.take(fnp.zeros(0), fnp.asarray([0]))
    assert fnp.zeros(0)[np.array([], np.int32)].shape == (0,)


def test_at_modes_and_out_of_range_indices():
    X = fnp.asarray(np.arange(5.0, dtype=np.float32))
    j = fnp.asarray([1, 7, -1, -9])
    np.testing.assert_array_equal(X.at[j].set(-1.0), [0, -1, 2, 3, -1])   # dropped
    np.testing.assert_array_equal(X.at[j].set(-1.0, mode="drop"), [0, -1, 2, 3, -1])
    np.testing.assert_array_equal(X.at[j].set(-1.0, mode="clip"), [-1, -1, 2, 3, -1])
    np.testing.assert_array_equal(X.at[j].add(1.0, mode="clip"), [1, 2, 2, 3, 6])
    np.testing.assert_array_equal(X.at[j].get(), [1, 4, 4, 0])           # clamped
    np.testing.assert_array_equal(X.at[j].get(mode="clip"), [1, 4, 4, 0])
    np.testing.assert_array_equal(X.at[j].get(mode="fill", fill_value=-5.0), [1, -5, 4, -5])
    g = X.at[j].get(mode="fill")
    np.testing.assert_array_equal(g, [1, np.nan, 4, np.nan])
    gi = fnp.asarray([1, 2, 3]).at[fnp.asarray([0, 5])].get(mode="fill")
    np.testing.assert_array_equal(gi, [1, np.iinfo(gi.dtype).min])  # the default int's min
    np.testing.assert_array_equal(check_jit(lambda a, k: a[k], X, j), [1, 4, 4, 0])
    np.testing.assert_array_equal(
        check_jit(lambda a, k: a.at[k].get(mode="fill", fill_value=0.5), X, j), [1, .5, 4, .5])
    np.testing.assert_array_equal(check_jit(lambda a, k: a.at[k].set(9.0), X, j),
                                  [0, 9, 2, 3, 9])
    M = fnp.asarray(np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(
        M.at[fnp.asarray([0, 5]), 1:3].get(mode="fill", fill_value=-1.0),
        [[1, 2], [-1, -1]])
    with pytest.raises(ValueError):
        X.at[0].set(1.0, mode="bogus")


def test_static_out_of_range_raises_index_error():
    X = fnp.ones((3, 4))
    for idx in (3, -4, (0, 4), (0, -5), (Ellipsis, 4)):
        with pytest.raises(IndexError):
            X[idx]
        with pytest.raises(IndexError):
            X.at[idx].set(0.0)
        with pytest.raises(IndexError):
            fnx.jit(lambda a, idx=idx: a[idx])(X)
    with pytest.raises(IndexError):
        X[0, 0, 0]
    with pytest.raises(IndexError):
        X[..., ...]
    with pytest.raises(IndexError):
        X[fnp.asarray([0.5])]
    assert X[5:10].shape == (0, 4)
    assert X[-10:2].shape == (2, 4)


def test_traced_boolean_mask_raises_concretization_error():
    X = fnp.arange(6.0)
    with pytest.raises(ConcretizationError) as e:
        fnx.jit(lambda a, m: a[m])(X, X > 2)
    msg = str(e.value)
    assert "where" in msg and "boolean" in msg
    with pytest.raises(ConcretizationError):
        fnx.jit(lambda a: a[a > 2])(X)
    with pytest.raises(ConcretizationError):
        fnx.jit(lambda a, i: a[i:])(X, 2)


def test_masked_set_under_jit():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4) - 5
    X = fnp.asarray(x)
    got = check_jit(lambda a: a.at[a < 0].set(0.0), X)
    np.testing.assert_array_equal(got, np.where(x < 0, 0, x))
    got = check_jit(lambda a, m: a.at[m].set(0.0), X, fnp.asarray(x > 2))
    np.testing.assert_array_equal(got, np.where(x > 2, 0, x))
    got = check_jit(lambda a: a.at[a > 0].add(10.0), X)
    np.testing.assert_array_equal(got, np.where(x > 0, x + 10, x))
    got = check_jit(lambda a: a.at[a > 0].multiply(2.0), X)
    np.testing.assert_array_equal(got, np.where(x > 0, x * 2, x))
    got = check_jit(lambda a: a.at[a > 0].divide(2.0), X)
    np.testing.assert_array_equal(got, np.where(x > 0, x / 2, x))
    got = check_jit(lambda a: a.at[a > 0].min(1.0), X)
    np.testing.assert_array_equal(got, np.where(x > 0, np.minimum(x, 1), x))
    got = check_jit(lambda a: a.at[a > 0].apply(fnp.negative), X)
    np.testing.assert_array_equal(got, np.where(x > 0, -x, x))


def test_zero_d_boolean_and_empty_indices():
    x = np.arange(12).reshape(3, 4)
    X = fnp.asarray(x)
    for idx in (True, False, np.True_, (True, 0), (0, False), (Ellipsis, True),
                (True, [0, 2]), (None, True, slice(1, 3)), np.array(True), [],
                (slice(None), [])):
        want = x[idx]
        got = X[idx]
        assert got.shape == want.shape, idx
        np.testing.assert_array_equal(got, want)
    ref = x.copy()
    ref[True, 1] = 7
    np.testing.assert_array_equal(X.at[True, 1].set(7), ref)
    np.testing.assert_array_equal(X.at[False].set(7), x)


def test_take_modes():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    X = fnp.asarray(x)
    i = np.array([0, 5, -1, -7, 2], np.int32)
    for axis in (None, 0, 1, -1):
        for mode in ("clip", "wrap"):
            got = check_jit(lambda a, j: fnp.take(a, j, axis=axis, mode=mode), X,
                            fnp.asarray(i))
            np.testing.assert_array_equal(got, np.take(x, i, axis=axis, mode=mode),
                                          err_msg=(axis, mode))
    ok = np.array([[0, 2], [-1, 1]])
    np.testing.assert_array_equal(fnp.take(X, ok, axis=1), np.take(x, ok, axis=1))
    np.testing.assert_array_equal(fnp.take(X, [0, 2]), np.take(x, [0, 2]))
    np.testing.assert_array_equal(fnp.take(X, 1, axis=1), np.take(x, 1, axis=1))
    np.testing.assert_array_equal(X.take(fnp.asarray([3, 0]), axis=1), x[:, [3, 0]])
    got = fnp.take(X, fnp.asarray([0, 4, -1, -5]), axis=1, mode="fill", fill_value=-1.0)
    np.testing.assert_array_equal(got, [[0, -1, 3, -1], [4, -1, 7, -1], [8, -1, 11, -1]])
    with pytest.raises(ValueError):
        fnp.take(X, 0, mode="raise-me")
    with pytest.raises(IndexError):
        fnp.take(X, fnp.asarray([0.5]))


def test_take_along_axis_and_put_along_axis():
    x = np.array([[10, 30, 20], [60, 40, 50]], np.float32)
    X = fnp.asarray(x)
    for axis in (0, 1, -1):
        idx = np.argsort(x, axis=axis)
        got = check_jit(lambda a, j: fnp.take_along_axis(a, j, axis=axis), X, fnp.asarray(idx))
        np.testing.assert_array_equal(got, np.take_along_axis(x, idx, axis=axis))
    idx = np.array([[-1], [0]])
    np.testing.assert_array_equal(fnp.take_along_axis(X, fnp.asarray(idx), axis=1),
                                  np.take_along_axis(x, idx, axis=1))
    np.testing.assert_array_equal(fnp.take_along_axis(X, fnp.asarray([5, 0]), axis=None),
                                  np.take_along_axis(x, np.array([5, 0]), axis=None))
    b = np.array([[0, 1, 1]])                        # broadcasts against x along axis 0
    np.testing.assert_array_equal(fnp.take_along_axis(X, fnp.asarray(b), axis=0),
                                  np.take_along_axis(x, b, axis=0))
    for axis, idx, v in ((1, np.array([[0], [2]]), 99.0), (0, np.array([[1, 0, 1]]), -1.0),
                         (1, np.array([[2, 0], [1, 1]]), np.array([[7.0, 8.0], [9.0, 9.0]]))):
        ref = x.copy()
        np.put_along_axis(ref, idx, v, axis=axis)
        got = check_jit(lambda a, j: fnp.put_along_axis(a, j, v, axis=axis, inplace=False),
                        X, fnp.asarray(idx))
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(ValueError):
        fnp.put_along_axis(X, fnp.asarray([[0]]), 1.0, axis=1)   # inplace=True: immutable
    with pytest.raises((ValueError, TypeError)):
        fnp.take_along_axis(X, fnp.asarray([0, 1]), axis=1)


def test_indexing_regressions():
    """Cases the randomized search found once."""
    x = np.zeros((1, 1), np.float32)
    X = fnp.asarray(x)
    for idx in ((None, slice(-2, None, -1), None, np.array(0), None),
                (0, slice(-2, None, -1), None), (slice(-2, None, -1), [0])):
        fidx = tuple(fnp.asarray(i) if isinstance(i, np.ndarray) else i for i in idx)
        assert X[fidx].shape == x[idx].shape, idx
        assert X.at[fidx].set(1.0).shape == x.shape


def test_an_empty_ellipsis_separates_advanced_indices():
    # NumPy (and JAX) put the index dimensions first when an Ellipsis, even of no
    # dimensions, stands between advanced indices: x[:, i, ..., j] of a rank-3 x
    x = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
    X = fnp.asarray(x)
    i, j = np.array([0, 1]), np.array([[1], [2]])
    for idx in ((slice(None), i, Ellipsis, i), (slice(None), i, Ellipsis, j),
                (None, slice(None), i, Ellipsis, 1), (i, Ellipsis, slice(None), i),
                (slice(None), Ellipsis, i, i)):
        got = X[idx]
        assert got.shape == x[idx].shape, idx
        np.testing.assert_array_equal(got, x[idx])
        np.testing.assert_array_equal(fnx.jit(lambda a: a[idx])(X), x[idx])
        v = np.arange(x[idx].size, dtype=np.float32).reshape(x[idx].shape)
        want = x.copy()
        want[idx] = v
        np.testing.assert_array_equal(X.at[idx].set(fnp.asarray(v)), want)
    want = x.copy()
    np.multiply.at(want, (slice(None), i, Ellipsis, i), np.full((2, 1), 2.0, np.float32))
    np.testing.assert_array_equal(
        X.at[:, i, ..., i].multiply(fnp.full((2, 1), 2.0)), want)


def test_python_numbers_with_an_explicit_dtype_convert_once():
    """0.1 as float64 is the float64 nearest 0.1, not float32's 0.1 widened."""
    for made in (fnp.asarray(0.1, dtype="float64"), fnp.array([0.1, 0.2], dtype="float64")[0],
                 fnp.full((2,), 0.1, dtype="float64")[0], fnp.full((), 0.1, "float64")):
        assert made.dtype == np.float64 and float(made) == 0.1 and not made.weak_type
    assert fnp.array(2 ** 40, dtype="int64") == 2 ** 40


def test_roll_takes_array_and_traced_shifts_as_jax():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for shift, axis in ((np.array(3), None), (np.array(-1), 1), (np.array([1, 2]), (0, 1)),
                        (fnp.array(5), 1), ((1, -2), (1, 0))):
        want = np.roll(x, np.asarray(shift), axis=axis)
        np.testing.assert_array_equal(fnp.roll(x, shift, axis=axis), want)
        jitted = fnx.jit(lambda x, s: fnp.roll(x, s, axis=axis))(x, np.asarray(shift))
        np.testing.assert_array_equal(jitted, want)      # a traced shift, as JAX allows
    g = fnx.grad(lambda x, s: fnp.sum(fnp.roll(x, s, axis=1)[:, 0]))(x, np.int32(1))
    np.testing.assert_array_equal(g, np.roll(np.eye(4, dtype=np.float32)[0][None].repeat(3, 0),
                                             -1, axis=1))
    with pytest.raises(ValueError, match="2 shifts for 3 axes"):
        fnp.roll(x, (1, 2), axis=(0, 1, 0))


def test_linspace_degenerate_step_is_one_nan_and_pad_modes_raise_as_jax():
    start, stop = np.float16(1.5), np.ones((2, 2), np.float16)
    for num, endpoint in ((0, True), (1, True), (0, False)):
        out, step = fnp.linspace(start, stop, num, endpoint=endpoint, retstep=True)
        assert out.shape == np.linspace(start, stop, num, endpoint=endpoint).shape
        assert step.shape == () and step.dtype == np.float16 and np.isnan(step)
    _, step = fnp.linspace(start, stop, 1, endpoint=False, retstep=True)
    np.testing.assert_array_equal(step, np.full((2, 2), -0.5, np.float16))
    for mode in (1, None, "foo"):
        with pytest.raises(NotImplementedError, match=f"Unimplemented padding mode '{mode}'"):
            fnp.pad(fnp.arange(3), 1, mode)
    with pytest.raises(ValueError, match="unsupported keyword arguments for mode 'edge'"):
        fnp.pad(fnp.arange(3), 1, "edge", constant_values=0)


def test_split_counts_held_in_arrays_and_traced_counts():
    assert [p.shape for p in fnp.split(fnp.zeros(6), np.array(3))] == [(2,)] * 3
    assert len(fnp.array_split(fnp.zeros(7), fnp.array(2))) == 2
    with pytest.raises(fnx.errors.ConcretizationError, match="number of sections"):
        fnx.jit(lambda k: fnp.split(fnp.zeros((12, 2)), k))(2.0)   # was "iteration over a 0-d array"
