"""Tests of fnx.kernels: the CUDA kernels generated from the elementwise primitives'
kernel hooks.

Every hooked primitive is run on inputs of each dtype it accepts (edge values:
zeros, signed zeros, extremes, NaN and infinities; rank-0 and full operands):

(a) the generated source compiles with NVRTC (no GPU needed);
(b) the same kernel text compiled by g++ (``host_check``) equals the NumPy impl:
    bit for bit for integer, bool, comparison, rounding and conversion ops, to a
    few ulp for transcendental float ops, NaN at the same places;
(c) on a GPU, ``run_elementwise`` equals the impl (marked ``gpu``).
"""
from __future__ import annotations

import inspect
import subprocess
import sys
import uuid
import warnings
import zlib

import numpy as np
import pytest

import fnx.kernels  # noqa: F401  (attaches the hooks)
from fnx.core.primitive import Primitive, ShapeDtypeStruct
from fnx.errors import ShapeError
from fnx.kernels import cuda as C
from fnx.kernels.elementwise_rules import HOOKS, LEFT_OUT
from fnx.lax import elementwise as E

with warnings.catch_warnings():   # the marker is registered nowhere else (no conftest entry)
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    gpu = pytest.mark.gpu

needs_nvrtc = pytest.mark.skipif(not C.compiler_available(), reason="NVRTC is not available")
needs_gxx = pytest.mark.skipif(not C.host_compiler_available(), reason="g++ is not available")
needs_device = pytest.mark.skipif(not C.device_available(), reason="no CUDA device")

KERNEL_DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16,
                                        np.int32, np.uint32, np.int64, np.uint64,
                                        np.float32, np.float64)]
FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]
HOOKED = sorted(HOOKS, key=lambda p: p.name)

# --- how results are compared ----------------------------------------------------------------
# "bits": identical bits (NaN payloads aside); "value": equal values (the sign of a zero
# is free: max(-0.0, 0.0)); an int: at most that many ulp apart. Integer and bool results
# are always compared exactly.
BITS_OPS = {"neg", "abs", "sign", "floor", "ceil", "sqrt", "rsqrt", "square", "reciprocal",
            "real", "imag", "conj", "stop_gradient", "round", "add", "sub", "mul", "div",
            "rem", "floor_divide", "copysign", "nextafter", "select_n",
            "convert_element_type"}
VALUE_OPS = {"max", "min", "clamp"}
# ulp bounds: glibc (host) and the CUDA math library (GPU) against NumPy's own
# implementations (SIMD float32 functions are themselves off by up to ~3 ulp).
HOST_ULPS: dict = {}
GPU_ULPS = {"tan": 10, "pow": 10, "integer_pow": 10, "lgamma": 16, "erfc": 10, "erf_inv": 12,
            "acosh": 10, "sinh": 10, "asinh": 10, "atanh": 10,
            "logaddexp": 10}  # and near 0 an absolute bound (assert_matches)
DEFAULT_HOST_ULPS, DEFAULT_GPU_ULPS = 4, 8


def _ulp_distance(a, b):
    """How many representable floats lie between a and b (not NaN; -0.0 == +0.0)."""
    bits = np.int32 if a.dtype == np.float32 else np.int64
    mask = np.int64(np.iinfo(bits).max)
    mag_a = a.view(bits).astype(np.int64) & mask        # |a| and |b| as ordered integers
    mag_b = b.view(bits).astype(np.int64) & mask
    same_side = np.signbit(a) == np.signbit(b)
    cap = np.int64(2**61)                                # opposite signs: the sum, capped
    return np.where(same_side, np.abs(mag_a - mag_b),
                    np.minimum(mag_a, cap) + np.minimum(mag_b, cap))


def assert_matches(got, want, case, ulps):
    prim, args, params = case
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)

    def where(bad):
        idx = np.argwhere(np.broadcast_to(bad, got.shape))[:5]
        rows = []
        for ix in map(tuple, idx):
            ins = [a[ix] if a.shape else a[()] for a in args]
            rows.append(f"  inputs {ins}: kernel {got[ix]!r}, impl {want[ix]!r}")
        return (f"{prim.name}{params or ''} on {[a.dtype.name for a in args]} "
                f"{[a.shape for a in args]}: {int(np.sum(bad))} mismatches\n" + "\n".join(rows))

    if got.dtype.kind != "f":
        bad = got != want
        assert not bad.any(), where(bad)
        return
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    assert (nan_g == nan_w).all(), where(nan_g != nan_w)
    g, w = np.where(nan_g, 0, got), np.where(nan_w, 0, want)
    if prim.name in BITS_OPS:
        bad = (g != w) | (np.signbit(g) != np.signbit(w))
    elif prim.name in VALUE_OPS:
        bad = g != w
    else:
        bad = _ulp_distance(g, w) > ulps
        if prim.name == "lgamma":
            # on the negative axis lgamma is the difference of the reflection formula's
            # terms; relative accuracy is lost next to its zeros (the impl's and libm's)
            x = np.broadcast_to(args[0], got.shape)
            with np.errstate(all="ignore"):
                scale = np.abs(prim.impl(np.abs(x))) + np.abs(np.log(np.abs(x)))
                close = np.abs(g - w) <= ulps * np.spacing(scale.astype(got.dtype))
            bad &= ~((x < 0) & close)
        elif prim.name == "logaddexp":
            # max + log1p(exp(-|x - y|)) cancels where the result is near 0: its error is
            # a few ulp of the terms (of max(|x|, |y|)), not of the result
            scale = np.maximum(np.abs(np.broadcast_to(args[0], got.shape)),
                               np.abs(np.broadcast_to(args[1], got.shape)))
            with np.errstate(invalid="ignore", over="ignore"):  # inf operands: not close
                close = np.abs(g - w) <= ulps * np.spacing(scale.astype(got.dtype))
            bad &= ~close
    assert not bad.any(), where(bad)


# --- inputs ------------------------------------------------------------------------------------

def _float_values(rng, dtype, n):
    info = np.finfo(dtype)
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, 0.75, -0.99,
                np.inf, -np.inf, np.nan, info.tiny, -info.tiny, info.smallest_subnormal,
                info.max, -info.max, 1e6, -3e4, 40.0, -40.0, 0.999]
    mags = 10.0 ** rng.uniform(-7, 7, n)
    rand = np.concatenate([mags * rng.choice([-1.0, 1.0], n), rng.uniform(-1, 1, n),
                           rng.uniform(-12, 12, n), np.round(rng.uniform(-8, 8, n))])
    return np.asarray(specials, dtype), rand.astype(dtype)


def _int_values(rng, dtype, n):
    if dtype.kind == "b":
        return np.array([False, True]), rng.integers(0, 2, n).astype(bool)
    info = np.iinfo(dtype)
    specials = {0, 1, 2, 3, 7, info.max, info.max - 1, info.max // 2, 100 % (info.max + 1)}
    if dtype.kind == "i":
        specials |= {-1, -2, -3, -7, info.min, info.min + 1}
    full = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    small = rng.integers(max(info.min, -12), 13, n).astype(dtype)
    return np.array(sorted(specials), dtype), np.concatenate([full, small])


def _values(rng, dtype, n=64):
    """(edge values, random values) of a dtype."""
    f = _float_values if dtype.kind == "f" else _int_values
    return f(rng, dtype, n)


def _pairs(rng, dtype, second=None):
    """Two full operands: every pair of edge values, then random pairs. ``second``
    draws the second operand instead (shift amounts, exponents)."""
    sp, rand = _values(rng, dtype)
    x = np.concatenate([np.repeat(sp, len(sp)), rand])
    y = np.concatenate([np.tile(sp, len(sp)), rng.permutation(rand)])
    if second is not None:
        y = second(rng, dtype, len(x))
    return x, y


def _shift_amounts(rng, dtype, n):
    bits = dtype.itemsize * 8
    lo = -3 if dtype.kind == "i" else 0
    return rng.integers(lo, bits + 3, n).astype(dtype)


def _exponents(rng, dtype, n):
    if dtype.kind == "f":
        y = rng.choice(np.array([-3, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 7.5, 30, np.nan, np.inf]), n)
        other = rng.choice(np.concatenate(_values(rng, dtype)), n)
        return np.where(rng.random(n) < 0.5, y, other).astype(dtype)
    lo = -3 if dtype.kind == "i" else 0
    return rng.integers(lo, min(np.iinfo(dtype).max, 70), n, endpoint=True).astype(dtype)


def _accepts(prim, avals, params=None):
    try:
        prim.shape_rule(*avals, **(params or {}))
        return True
    except ShapeError:
        return False


def _arity(prim):
    sig = inspect.signature(prim.shape_rule)
    return sum(p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty
               for p in sig.parameters.values())


def _elementwise_cases(prim, rng):
    """Unary and binary unop/binop primitives (and round)."""
    cases = []
    param_sets = [{"rounding_method": 0}, {"rounding_method": 1}] if prim is E.round_p else [{}]
    second = {"shift_left": _shift_amounts, "shift_right_logical": _shift_amounts,
              "shift_right_arithmetic": _shift_amounts, "pow": _exponents}.get(prim.name)
    arity = _arity(prim)
    for d in KERNEL_DTYPES:
        if not _accepts(prim, [ShapeDtypeStruct((2,), d)] * arity):
            continue
        for params in param_sets:
            if arity == 1:
                sp, rand = _values(rng, d)
                x = np.concatenate([sp, rand])
                cases.append((prim, (x.reshape(-1, 2) if x.size % 2 == 0 else x,), params))
                cases += [(prim, (np.asarray(v),), params) for v in sp[:4]]
                continue
            x, y = _pairs(rng, d, second)
            cases.append((prim, (x, y), params))
            # rank-0 operands: one kernel per position, several values through it
            sp = np.concatenate([_values(rng, d)[0][:6], y[-2:]])
            for v in sp:
                cases.append((prim, (np.asarray(v, d), y), params))
                cases.append((prim, (x, np.asarray(v, d)), params))
            cases.append((prim, (np.asarray(x[-1]), np.asarray(y[-1])), params))
    return cases


def _integer_pow_cases(rng):
    cases = []
    for d in KERNEL_DTYPES:
        if d == np.uint64 or not _accepts(E.integer_pow_p, [ShapeDtypeStruct((), d)], {"y": 1}):
            continue
        sp, rand = _values(rng, d)
        x = np.concatenate([sp, rand])
        for y in (-3, -2, -1, 0, 1, 2, 3, 5, 8, 31, 64):
            cases.append((E.integer_pow_p, (x,), {"y": y}))
        cases += [(E.integer_pow_p, (np.asarray(v),), {"y": 3}) for v in sp[:3]]
    return cases


def _select_n_cases(rng):
    cases = []
    for d in KERNEL_DTYPES:
        sp, rand = _values(rng, d, 40)
        pool = np.concatenate([sp, rand])
        n = pool.size
        cs = [rng.permutation(pool) for _ in range(4)]
        cases.append((E.select_n_p, (rng.random(n) < 0.5, cs[0], cs[1]), {}))
        cases.append((E.select_n_p, (np.asarray(True), cs[0], cs[1]), {}))
        cases.append((E.select_n_p, (rng.integers(-2, 5, n).astype(np.int32), *cs[:3]), {}))
        if d.kind == "f":
            cases.append((E.select_n_p, (rng.integers(-2, 5, n).astype(np.int32), *cs), {}))
            cases.append((E.select_n_p, (np.asarray(3, np.int32), cs[0][:1].reshape(()),
                                         cs[1][:1].reshape(())), {}))
            cases.append((E.select_n_p, (np.asarray(False), cs[0]), {}))
    return cases


def _clamp_cases(rng):
    cases = []
    for d in KERNEL_DTYPES:
        if not _accepts(E.clamp_p, [ShapeDtypeStruct((), d)] * 3):
            continue
        sp, rand = _values(rng, d)
        x = np.concatenate([sp, rand])
        lo, hi = rng.permutation(x), rng.permutation(x)
        cases.append((E.clamp_p, (lo, x, hi), {}))
        for v, w in zip(sp[:4], sp[-4:]):
            cases.append((E.clamp_p, (np.asarray(v), x, np.asarray(w)), {}))
        cases.append((E.clamp_p, (np.asarray(sp[1]), x, hi), {}))
        cases.append((E.clamp_p, (np.asarray(sp[0]), np.asarray(x[-1]), np.asarray(sp[-1])), {}))
    return cases


def _convert_cases(rng):
    """Conversions; float -> int only on values whose truncation fits (elsewhere
    NumPy's result is undefined: see test_float_to_int_saturates)."""
    cases = []
    for src in KERNEL_DTYPES:
        sp, rand = _values(rng, src)
        x = np.concatenate([sp, rand])
        for dst in KERNEL_DTYPES:
            xs = x
            if src.kind == "f" and dst.kind in "iu":
                info = np.iinfo(dst)
                edges = np.array([info.max, info.min, info.max // 3], np.float64).astype(src)
                xs = np.concatenate([x, edges])
                fits = [np.isfinite(v) and info.min <= int(v) <= info.max for v in xs.tolist()]
                xs = xs[np.array(fits)]
            params = {"new_dtype": dst}
            cases.append((E.convert_element_type_p, (xs,), params))
            cases.append((E.convert_element_type_p, (np.asarray(xs[3]),), params))
    return cases


def _cases_of(prim):
    rng = np.random.default_rng(zlib.crc32(prim.name.encode()))
    special = {"integer_pow": _integer_pow_cases, "select_n": _select_n_cases,
               "clamp": _clamp_cases, "convert_element_type": _convert_cases}
    if prim.name in special:
        return special[prim.name](rng)
    return _elementwise_cases(prim, rng)


CASES = {p.name: _cases_of(p) for p in HOOKED}


def _source(case):
    prim, args, params = case
    return C.elementwise_source(prim, [ShapeDtypeStruct(a.shape, a.dtype) for a in args], params)


def _impl(case):
    """What the kernel must compute: the primitive's NumPy impl. For float ``pow`` with
    a rank-0 exponent the impl is applied to the broadcast exponent: NumPy shortcuts
    scalar exponents (0.5 to sqrt, so (-inf) ** 0.5 is NaN, not C's inf), which the
    kernel, like NumPy's own ufunc loop on arrays, does not."""
    prim, args, params = case
    if prim is E.pow_p and args[1].shape == () and args[1].dtype.kind == "f":
        x = args[0].reshape(-1)
        args = (x, np.full_like(x, args[1]))
        return _impl((prim, args, params)).reshape(case[1][0].shape)
    with np.errstate(all="ignore"):
        return np.asarray(prim.impl(*args, **params))


@pytest.fixture(scope="module")
def host_built():
    """Every test kernel compiled for the CPU up front (batched g++ runs)."""
    C.host_compile([_source(c) for cases in CASES.values() for c in cases])


# --- the tests ----------------------------------------------------------------------------------

def test_every_elementwise_primitive_has_a_hook_or_is_listed():
    prims = [v for v in vars(E).values() if isinstance(v, Primitive)]
    assert len(prims) > 60
    for p in prims:
        assert (p.kernel is not None) != (p.name in LEFT_OUT), p.name
    assert {p.name for p in HOOKED} | set(LEFT_OUT) == {p.name for p in prims}


def _accepted_dtypes(prim):
    """The kernel dtypes a primitive's shape rule takes (of its data operands)."""
    if prim in (E.select_n_p, E.convert_element_type_p):
        return set(KERNEL_DTYPES)
    params = {"y": 1} if prim is E.integer_pow_p else {}
    n = _arity(prim)
    return {d for d in KERNEL_DTYPES if _accepts(prim, [ShapeDtypeStruct((2,), d)] * n, params)}


@pytest.mark.parametrize("name", [p.name for p in HOOKED])
def test_cases_cover_every_accepted_dtype_and_rank0_operands(name):
    prim, cases = E.__dict__[f"{name}_p"], CASES[name]
    covered = {c[1][-1].dtype for c in cases}
    unsupported = {np.dtype(np.uint64)} if prim is E.integer_pow_p else set()
    assert covered == _accepted_dtypes(prim) - unsupported
    n = len(cases[0][1])
    for i in range(n):      # each operand is rank 0 in some case, full in another
        assert any(c[1][i].shape == () for c in cases) and any(c[1][i].shape for c in cases)


@needs_nvrtc
@pytest.mark.parametrize("name", [p.name for p in HOOKED])
def test_sources_compile_with_nvrtc(name):
    sources = {ks.name: ks for ks in map(_source, CASES[name])}
    ptx = C.compile_sources(sources.values()).decode()
    for kname in sources:
        assert f".entry {kname}(" in ptx, kname
    first = next(iter(sources.values()))
    assert f".entry {first.name}(" in C.compile_source(first).decode()


@needs_gxx
@pytest.mark.parametrize("name", [p.name for p in HOOKED])
def test_host_kernel_matches_impl(name, host_built):
    ulps = HOST_ULPS.get(name, DEFAULT_HOST_ULPS)
    for case in CASES[name]:
        assert_matches(C.host_check(*case), _impl(case), case, ulps)


@gpu
@needs_device
@pytest.mark.parametrize("name", [p.name for p in HOOKED])
def test_gpu_kernel_matches_impl(name):
    C.device_load([_source(c) for c in CASES[name]])
    ulps = GPU_ULPS.get(name, DEFAULT_GPU_ULPS)
    for case in CASES[name]:
        assert_matches(C.run_elementwise(*case), _impl(case), case, ulps)


@gpu
@needs_device
def test_gpu_large_and_empty_arrays():
    x = np.arange(3_000_000, dtype=np.float32)
    np.testing.assert_array_equal(C.run_elementwise(E.add_p, [x, np.float32(1)], {}), x + 1)
    empty = np.zeros((0, 3), np.int32)
    assert C.run_elementwise(E.neg_p, [empty], {}).shape == (0, 3)


def _conversions(src, dst, values):
    x = np.array(values, src)
    return C.host_check(E.convert_element_type_p, [x], {"new_dtype": np.dtype(dst)})


@needs_gxx
@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", [d for d in KERNEL_DTYPES if d.kind in "iu"])
def test_float_to_int_saturates(src, dst):
    info = np.iinfo(dst)
    got = _conversions(src, dst, [np.nan, np.inf, -np.inf, 1e30, -1e30, -0.9, 0.9,
                                  float(info.max) * 4, -2.0**70])
    want = [0, info.max, info.min, info.max, info.min, 0, 0, info.max, info.min]
    np.testing.assert_array_equal(got, np.array(want, dst))


@needs_gxx
def test_float_to_int_boundaries():
    # the last values that fit and the first that do not
    np.testing.assert_array_equal(_conversions(np.float64, np.int32, [
        2147483647.9, 2147483648.0, -2147483648.9, -2147483649.0]),
        np.array([2147483647, 2147483647, -2147483648, -2147483648], np.int32))
    np.testing.assert_array_equal(_conversions(np.float32, np.int64, [
        -2.0**63, np.nextafter(np.float32(-2.0**63), np.float32(-np.inf)), 2.0**62]),
        np.array([-2**63, -2**63, 2**62], np.int64))
    np.testing.assert_array_equal(_conversions(np.float64, np.uint64, [
        2.0**64 - 2048, 2.0**64, -0.99, -1.0]),
        np.array([2**64 - 2048, 2**64 - 1, 0, 0], np.uint64))
    np.testing.assert_array_equal(_conversions(np.float64, np.bool_, [np.nan, -0.0, 1e-300]),
                                  np.array([True, False, True]))


def test_generated_source_shape():
    f32 = np.dtype(np.float32)
    ks = C.elementwise_source(E.add_p, [ShapeDtypeStruct((3, 4), f32),
                                        ShapeDtypeStruct((), f32)], {})
    assert ks.name.isidentifier() and ks.name.startswith("fnx_add_")
    assert ks.out_aval == ShapeDtypeStruct((3, 4), f32)
    assert "#include" not in ks.source
    assert ks.source.startswith(C.PREAMBLE)
    assert ('extern "C" __global__ void ' + ks.name + "(const float* __restrict__ in0, "
            "const float* __restrict__ in1, float* __restrict__ out, long long n)") in ks.source
    assert "x1 = in1[0];" in ks.source and "x0 = in0[i];" in ks.source
    # one kernel for every shape; another for another rank-0 pattern or dtype
    other = C.elementwise_source(E.add_p, [ShapeDtypeStruct((7,), f32),
                                           ShapeDtypeStruct((), f32)], {})
    assert other.name == ks.name and other.source == ks.source
    swapped = C.elementwise_source(E.add_p, [ShapeDtypeStruct((), f32),
                                             ShapeDtypeStruct((3, 4), f32)], {})
    assert swapped.name != ks.name
    f64 = C.elementwise_source(E.add_p, [ShapeDtypeStruct((3,), np.float64)] * 2, {})
    assert "double" in f64.body and "float" not in f64.body
    assert "expf(x0)" in _source((E.exp_p, (np.zeros(2, f32),), {})).body
    assert "exp(x0)" in _source((E.exp_p, (np.zeros(2, np.float64),), {})).body


def test_cuda_types():
    assert C.cuda_type(np.bool_) == "bool"
    assert C.cuda_type(np.int8) == "signed char"
    assert C.cuda_type(np.uint8) == "unsigned char"
    assert C.cuda_type(np.int16) == "short"
    assert C.cuda_type(np.uint16) == "unsigned short"
    assert C.cuda_type(np.int32) == "int"
    assert C.cuda_type(np.uint32) == "unsigned int"
    assert C.cuda_type(np.int64) == "long long"
    assert C.cuda_type(np.uint64) == "unsigned long long"
    assert C.cuda_type(np.float32) == "float"
    assert C.cuda_type("float64") == "double"


@pytest.mark.parametrize("dtype", ["float16", "complex64", "complex128"])
def test_cuda_type_unsupported(dtype):
    with pytest.raises(C.KernelUnsupported, match=f"{dtype}.*NumPy backend"):
        C.cuda_type(dtype)
    assert issubclass(C.KernelUnsupported, C.KernelError)
    with pytest.raises(C.KernelUnsupported, match=dtype):
        C.elementwise_source(E.neg_p, [ShapeDtypeStruct((3,), dtype)], {})


def test_unsupported_calls():
    with pytest.raises(C.KernelUnsupported, match="digamma.*no GPU kernel hook"):
        C.elementwise_source(E.digamma_p, [ShapeDtypeStruct((3,), np.float32)], {})
    with pytest.raises(C.KernelUnsupported, match="uint64"):
        C.elementwise_source(E.integer_pow_p, [ShapeDtypeStruct((3,), np.uint64)], {"y": 3})
    with pytest.raises(ShapeError):
        C.elementwise_source(E.add_p, [ShapeDtypeStruct((3,), np.float32),
                                       ShapeDtypeStruct((4,), np.float32)], {})


def test_run_without_device_is_unsupported():
    if C.device_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(C.KernelUnsupported, match="no CUDA device"):
        C.run_elementwise(E.add_p, [np.ones(3, np.float32)] * 2, {})


def _broken_primitive():
    def shape_rule(x):
        return ShapeDtypeStruct(x.shape, x.dtype)
    p = Primitive(f"broken_{uuid.uuid4().hex[:8]}", shape_rule=shape_rule, impl=lambda x: x)
    p.kernel = lambda xs, in_dtypes, out_dtype: f"no_such_function({xs[0]})"
    return p


@needs_nvrtc
def test_nvrtc_compile_error_names_the_primitive():
    p = _broken_primitive()
    ks = C.elementwise_source(p, [ShapeDtypeStruct((3,), np.float32)], {})
    with pytest.raises(C.KernelCompileError) as info:
        C.compile_source(ks)
    msg = str(info.value)
    assert repr(p.name) in msg and "NVRTC log" in msg
    assert "no_such_function" in msg and "is undefined" in msg      # NVRTC's own words
    assert "out[i] = (float)(no_such_function(x0));" in msg          # the numbered source
    with pytest.raises(C.KernelCompileError, match=p.name):          # batches find it too
        C.compile_sources([_source((E.neg_p, (np.zeros(2, np.float32),), {})), ks])


@needs_gxx
def test_host_compile_error_names_the_primitive():
    p = _broken_primitive()
    with pytest.raises(C.KernelCompileError) as info:
        C.host_check(p, [np.zeros(3, np.float32)], {})
    msg = str(info.value)
    assert repr(p.name) in msg and "g++ log" in msg and "no_such_function" in msg


def test_import_is_lazy():
    code = ("import sys, fnx.kernels; "
            "assert 'cupy' not in sys.modules and 'cupy_backends' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
