"""Eager ``fnx.numpy`` calls raise no NumPy floating-point warnings (as JAX, and as the
primitive path and jit's generated code): overflow, ``inf - inf``, ``0 * inf``, division
by zero and logs of negatives give IEEE values silently. The eager fast path (the binary
ops on arrays of one dtype or with a Python scalar, the float unary ops, the float
reductions) calls NumPy directly and must be as quiet; its values are jit's.

Every test runs with warnings as errors, so a leaked RuntimeWarning fails it."""
import threading
import warnings

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.core import numpy_errstate

pytestmark = pytest.mark.filterwarnings("error")

EDGE = [3e38, -3e38, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, 1e-45, 0.5]
EDGE16 = [6e4, -6e4, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, 1e-7, 0.5]
SCALARS = [10.0, 0.0, -0.0, np.inf, np.nan, 3e38, 0, 2]


def _pair(dtype):
    v = np.array(EDGE16 if dtype == np.float16 else EDGE, dtype)
    if dtype == np.float64:
        v[:2] = [1.7e308, -1.7e308]
    return fnp.asarray(v), fnp.asarray(v[::-1].copy())


@pytest.fixture(params=["float16", "float32", "float64"])
def dtype(request):
    if request.param == "float64":
        request.getfixturevalue("x64")
    return np.dtype(request.param)


def _same(eager, jitted, what):
    assert eager.dtype == jitted.dtype, (what, eager.dtype, jitted.dtype)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted), err_msg=what)


OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "maximum": fnp.maximum, "minimum": fnp.minimum,
}


@pytest.mark.parametrize("op", list(OPS))
def test_binary_array_array(op, dtype):
    x, y = _pair(dtype)
    f = OPS[op]
    out = f(x, y)
    assert out.dtype == (np.bool_ if op in ("<", "<=", ">", ">=", "==", "!=") else dtype)
    _same(out, fnx.jit(f)(x, y), f"{dtype}: x {op} y")
    _same(f(x, x), fnx.jit(f)(x, x), f"{dtype}: x {op} x")   # inf - inf, 0 * inf, 0 / 0


@pytest.mark.parametrize("op", list(OPS))
def test_binary_array_scalar_and_scalar_array(op, dtype):
    x, _ = _pair(dtype)
    f = OPS[op]
    for s in SCALARS:
        _same(f(x, s), fnx.jit(lambda a: f(a, s))(x), f"{dtype}: x {op} {s!r}")
        _same(f(s, x), fnx.jit(lambda a: f(s, a))(x), f"{dtype}: {s!r} {op} x")


def test_the_issue_example():
    out = fnp.array([1e38]) * fnp.float32(10)
    assert out.dtype == np.float32 and np.isposinf(np.asarray(out)).all()
    assert np.isposinf(np.asarray(fnp.array([1e38]) * 10.0)).all()
    assert np.isnan(np.asarray(fnp.array([np.inf]) - fnp.array([np.inf]))).all()


def test_integer_fast_path_wraps_and_divides_silently():
    i = fnp.array([2**31 - 1, -2**31, 7, 0], dtype=fnp.int32)
    j = fnp.array([1, -1, 0, 0], dtype=fnp.int32)
    for op in ("+", "-", "*", "//", "%"):
        f = OPS[op]
        _same(f(i, j), fnx.jit(f)(i, j), f"int32 {op}")
        _same(f(i, 0), fnx.jit(lambda a: f(a, 0))(i), f"int32 {op} 0")
        _same(f(3, j), fnx.jit(lambda a: f(3, a))(j), f"3 {op} int32")
    assert int(np.asarray(i + 1)[0]) == -2**31


UNARY = ["log", "log1p", "log2", "log10", "sqrt", "exp", "exp2", "expm1", "reciprocal",
         "sinh", "cosh", "tan", "tanh", "arctanh", "arccos", "arcsin", "arccosh", "square",
         "cbrt", "negative", "abs", "sign", "rint", "floor", "ceil", "trunc"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    x, _ = _pair(dtype)
    f = getattr(fnp, name)
    _same(f(x), fnx.jit(f)(x), f"{name}({dtype})")


BINARY_FNS = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide",
              "remainder", "fmod", "power", "float_power", "logaddexp", "arctan2",
              "copysign", "nextafter", "fmax", "fmin"]


@pytest.mark.parametrize("name", BINARY_FNS)
def test_binary_functions(name, dtype):
    x, y = _pair(dtype)
    f = getattr(fnp, name)
    _same(f(x, y), fnx.jit(f)(x, y), f"{name}({dtype})")
    _same(f(x, 0.0), fnx.jit(lambda a: f(a, 0.0))(x), f"{name}({dtype}, 0.0)")
    _same(f(0, x), fnx.jit(lambda a: f(0, a))(x), f"{name}(0, {dtype})")


def test_nextafter_and_spacing_past_the_largest_float(dtype):
    # NumPy flags overflow when the next float after the largest is inf
    big = fnp.asarray(np.array([np.finfo(dtype).max, -np.finfo(dtype).max, np.inf], dtype))
    inf = np.array(np.inf, dtype)
    _same(fnp.nextafter(big, inf), fnx.jit(fnp.nextafter)(big, inf), f"nextafter({dtype})")
    _same(fnp.spacing(big), fnx.jit(fnp.spacing)(big), f"spacing({dtype})")


REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "nansum", "nanprod",
              "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "cumsum", "cumprod", "ptp",
              "average"]
RED_INPUTS = {"overflow": [3e38, 3e38, 3e38, 3e38], "inf-inf": [np.inf, -np.inf, 1.0, 2.0],
              "inf": [np.inf, 1.0, 1.0, 1.0], "nan": [np.nan, 1.0, np.nan, 1.0],
              "tiny": [1e-45, 1e-45, -1e-45, 0.0]}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    f = getattr(fnp, name)
    for what, vals in RED_INPUTS.items():
        x = fnp.asarray(np.array(vals, np.float32))
        m = fnp.reshape(x, (2, 2))
        np.testing.assert_allclose(np.asarray(f(x)), np.asarray(fnx.jit(f)(x)), rtol=1e-6,
                                   err_msg=f"{name}({what})")
        g = lambda a: f(a, axis=1)  # noqa: E731
        np.testing.assert_allclose(np.asarray(g(m)), np.asarray(fnx.jit(g)(m)), rtol=1e-6,
                                   err_msg=f"{name}({what}, axis=1)")


def test_moments_of_degenerate_inputs():
    empty = fnp.zeros((0,), dtype=fnp.float32)
    one = fnp.array([1.0], dtype=fnp.float32)
    for f in (fnp.mean, fnp.var, fnp.std):
        assert np.isnan(float(f(empty)))
    assert np.isnan(float(fnp.var(one, ddof=1))) or np.isinf(float(fnp.var(one, ddof=1)))
    _same(fnp.var(one, ddof=1), fnx.jit(lambda a: fnp.var(a, ddof=1))(one), "var ddof=1")
    _same(fnp.std(one, ddof=2), fnx.jit(lambda a: fnp.std(a, ddof=2))(one), "std ddof=2")
    big = fnp.asarray(np.full(4, 3e38, np.float32))
    assert np.isposinf(float(fnp.sum(big))) and np.isposinf(float(fnp.mean(big)))


def test_users_numpy_error_state_is_kept_and_not_applied():
    """fnx ignores NumPy's error state (as the primitive path), and leaves it as it was."""
    x, y = _pair(np.float32)
    before = np.geterr()
    with np.errstate(all="raise"):
        for f in (lambda: x * x, lambda: x - x, lambda: x / y, lambda: x * 10.0,
                  lambda: 3e38 + x, lambda: fnp.log(-x), lambda: fnp.sum(x * 0 + 3e38)):
            f()
        assert np.geterr()["over"] == "raise"
        with pytest.raises(FloatingPointError):
            np.multiply(np.float32(3e38), np.float32(10))
    assert np.geterr() == before


def test_quiet_run_raises_where_its_context_is_entered_and_quiet_call_always_works():
    big = np.float32(3e38)
    assert np.isposinf(numpy_errstate.quiet_run(np.multiply, big, big))
    assert np.isposinf(numpy_errstate.quiet_call(np.multiply, big, big))
    with pytest.raises(RuntimeError, match="context"):
        numpy_errstate.quiet_run(numpy_errstate.quiet_run, np.multiply, big, big)
    assert np.isposinf(numpy_errstate.quiet_run(numpy_errstate.quiet_call, np.multiply,
                                                big, big))
    with pytest.raises(RuntimeWarning, match="overflow"):  # NumPy itself still warns
        np.multiply(big, big)


def test_threads_share_the_quiet_fast_path():
    """Large arrays release the GIL inside the ufunc, so threads meet in the one quiet
    context; the ones that find it busy take quiet_call. Every result is right."""
    big = fnp.full((100_000,), 3e38, dtype=fnp.float32)
    errors = []

    def work():
        try:
            for _ in range(40):
                assert np.isposinf(np.asarray(big * big)).all()
                assert np.isposinf(np.asarray(big + 3e38)).all()
                assert np.isposinf(float(fnp.sum(big)))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[:3]


def test_primitive_path_hypot_and_complex_tanh_are_quiet():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = fnp.array([3e38], "float32")
        assert np.isinf(np.asarray(fnp.hypot(big, big))).all()
        fnp.tanh(fnp.array([1e30 + 1e30j], "complex64"))


@pytest.mark.parametrize("name", ["less", "less_equal", "greater", "greater_equal", "maximum",
                                  "minimum", "fmax", "fmin", "clip", "signbit", "isposinf",
                                  "trunc", "remainder"])
def test_bfloat16_nans_compare_quietly(name):
    from fnx.core import dtypes as core_dtypes
    if core_dtypes.bfloat16 is None:
        pytest.skip("no bfloat16 (ml_dtypes) here")
    x = fnp.array([np.nan, 1.0, -2.0], dtype="bfloat16")
    y = fnp.array([1.0, np.nan, 3.0], dtype="bfloat16")
    f = getattr(fnp, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if name in ("signbit", "isposinf", "trunc"):
            f(x)
        elif name == "clip":
            f(x, 0.0, 1.0)
        else:
            f(x, y)
