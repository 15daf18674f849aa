"""Conformance of ``fnx.numpy`` to the Python Array API standard 2023.12.

What the standard pins down and fnx follows: the names of the main namespace, how
its functions may be called (positional-only and keyword-only parameters), the
``Array`` object's attributes, methods and operators (with Python scalars on either
side), the type promotion table, the special cases (NaN, infinities, signed zeros)
of the elementwise functions, the inspection object ``__array_namespace_info__()``,
``isdtype``, ``finfo``/``iinfo`` and a few functions the standard added lately.
The corners fnx leaves out are listed in the README ("Array API conformance").
"""
import inspect
import math

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp

API_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float32", "float64", "complex64", "complex128"]


@pytest.fixture(autouse=True)
def x64():
    """The standard's 64-bit dtypes exist only under jax_enable_x64 (as in JAX, whose
    conformance runs set it): every test here runs with the flag on, then restores it."""
    with fnx.enable_x64():
        yield

# --- the main namespace -----------------------------------------------------------------

NAMES = """
e inf nan newaxis pi
arange asarray empty empty_like eye from_dlpack full full_like linspace meshgrid ones
ones_like tril triu zeros zeros_like
astype can_cast finfo iinfo isdtype result_type
bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128
abs acos acosh add asin asinh atan atan2 atanh bitwise_and bitwise_left_shift
bitwise_invert bitwise_or bitwise_right_shift bitwise_xor ceil clip conj copysign cos cosh
divide equal exp expm1 floor floor_divide greater greater_equal hypot imag isfinite isinf
isnan less less_equal log log1p log2 log10 logaddexp logical_and logical_not logical_or
logical_xor maximum minimum multiply negative not_equal positive pow real remainder round
sign signbit sin sinh square sqrt subtract tan tanh trunc
take __array_namespace_info__
matmul matrix_transpose tensordot vecdot
broadcast_arrays broadcast_to concat expand_dims flip moveaxis permute_dims repeat reshape
roll squeeze stack tile unstack
argmax argmin nonzero searchsorted where
unique_all unique_counts unique_inverse unique_values
argsort sort
cumulative_sum max mean min prod std sum var
all any
""".split()


def test_every_name_of_the_main_namespace_exists():
    missing = [n for n in NAMES if not hasattr(fnp, n)]
    assert not missing
    assert fnp.__array_api_version__ == "2024.12"
    assert fnp.newaxis is None and fnp.pi == math.pi and fnp.e == math.e
    assert math.isinf(fnp.inf) and fnp.inf > 0 and math.isnan(fnp.nan)


# --- signatures ---------------------------------------------------------------------------
# (name, kind) per parameter, as the standard writes them: P positional-only, PK either,
# K keyword-only, V *args. fnx may be more permissive (NumPy's positional dtype=, say),
# but every call the standard allows must bind.

P, PK, K, V = "p", "pk", "k", "*"
_X, _X12 = [("x", P)], [("x1", P), ("x2", P)]
_RED = _X + [("axis", K), ("keepdims", K)]
_SORT = _X + [("axis", K), ("descending", K), ("stable", K)]
_LIKE = _X + [("dtype", K), ("device", K)]
_CREATE = [("shape", PK), ("dtype", K), ("device", K)]

UNARY = """abs acos acosh asin asinh atan atanh bitwise_invert ceil conj cos cosh exp expm1
floor imag isfinite isinf isnan log log1p log2 log10 logical_not negative positive real
sign signbit sin sinh square sqrt tan tanh trunc""".split()
BINARY = """add atan2 bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift
bitwise_xor copysign divide equal floor_divide greater greater_equal hypot less less_equal
logaddexp logical_and logical_or logical_xor maximum minimum multiply not_equal pow
remainder subtract""".split()

SIGNATURES = {
    "arange": [("start", P), ("stop", PK), ("step", PK), ("dtype", K), ("device", K)],
    "asarray": [("obj", P), ("dtype", K), ("device", K), ("copy", K)],
    "empty": _CREATE, "zeros": _CREATE, "ones": _CREATE,
    "empty_like": _LIKE, "zeros_like": _LIKE, "ones_like": _LIKE,
    "eye": [("n_rows", P), ("n_cols", P), ("k", K), ("dtype", K), ("device", K)],
    "from_dlpack": [("x", P), ("device", K), ("copy", K)],
    "full": [("shape", PK), ("fill_value", PK), ("dtype", K), ("device", K)],
    "full_like": _X + [("fill_value", PK), ("dtype", K), ("device", K)],
    "linspace": [("start", P), ("stop", P), ("num", PK), ("dtype", K), ("device", K),
                 ("endpoint", K)],
    "meshgrid": [("arrays", V), ("indexing", K)],
    "tril": _X + [("k", K)], "triu": _X + [("k", K)],
    "astype": [("x", P), ("dtype", P), ("copy", K), ("device", K)],
    "can_cast": [("from_", P), ("to", P)],
    "finfo": [("type", P)], "iinfo": [("type", P)],
    "isdtype": [("dtype", PK), ("kind", PK)],
    "result_type": [("arrays_and_dtypes", V)],
    "clip": _X + [("min", PK), ("max", PK)],
    "round": _X,
    "take": _X + [("indices", P), ("axis", K)],
    "matmul": _X12, "matrix_transpose": _X,
    "tensordot": _X12 + [("axes", K)], "vecdot": _X12 + [("axis", K)],
    "broadcast_arrays": [("arrays", V)], "broadcast_to": _X + [("shape", PK)],
    "concat": [("arrays", P), ("axis", K)], "stack": [("arrays", P), ("axis", K)],
    "expand_dims": _X + [("axis", K)], "flip": _X + [("axis", K)],
    "moveaxis": _X + [("source", P), ("destination", P)],
    "permute_dims": _X + [("axes", PK)],
    "repeat": _X + [("repeats", P), ("axis", K)],
    "reshape": _X + [("shape", PK), ("copy", K)],
    "roll": _X + [("shift", PK), ("axis", K)],
    "squeeze": _X + [("axis", PK)],
    "tile": _X + [("repetitions", P)], "unstack": _X + [("axis", K)],
    "argmax": _RED, "argmin": _RED, "nonzero": _X,
    "searchsorted": _X12 + [("side", K), ("sorter", K)],
    "where": [("condition", P), ("x1", P), ("x2", P)],
    "unique_all": _X, "unique_counts": _X, "unique_inverse": _X, "unique_values": _X,
    "argsort": _SORT, "sort": _SORT,
    "cumulative_sum": _X + [("axis", K), ("dtype", K), ("include_initial", K)],
    "max": _RED, "min": _RED, "mean": _RED, "all": _RED, "any": _RED,
    "prod": _X + [("axis", K), ("dtype", K), ("keepdims", K)],
    "sum": _X + [("axis", K), ("dtype", K), ("keepdims", K)],
    "std": _X + [("axis", K), ("correction", K), ("keepdims", K)],
    "var": _X + [("axis", K), ("correction", K), ("keepdims", K)],
    **{n: _X for n in UNARY}, **{n: _X12 for n in BINARY},
}


def _calls(spec):
    """The (args, kwargs) of the calls the standard allows: every parameter passed, the
    positional-or-keyword ones once positionally and once by name."""
    args, kwargs, by_name = [], {}, {}
    for name, kind in spec:
        if kind == V:
            args += [object(), object()]
        elif kind == P:
            args.append(object())
        elif kind == PK:
            args.append(object())
            by_name[name] = object()
        else:
            kwargs[name] = object()
    n_pos = len(args) - len(by_name)
    yield args, kwargs
    if by_name:
        yield args[:n_pos], {**kwargs, **by_name}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_call_the_standard_allows_binds(name):
    sig = inspect.signature(getattr(fnp, name))
    for args, kwargs in _calls(SIGNATURES[name]):
        sig.bind(*args, **kwargs)  # raises TypeError when the standard's call fails


@pytest.mark.parametrize("name", UNARY + BINARY + ["clip", "matmul", "where"])
def test_array_operands_of_elementwise_functions_are_positional_only(name):
    params = list(inspect.signature(getattr(fnp, name)).parameters.values())
    n = sum(1 for _, kind in SIGNATURES[name] if kind == P)
    assert [p.kind for p in params[:n]] == [inspect.Parameter.POSITIONAL_ONLY] * n, name


def test_array_method_signatures():
    x = fnp.ones((2, 3))
    inspect.signature(x.__array_namespace__).bind(api_version="2023.12")
    inspect.signature(x.to_device).bind(x.device, stream=None)
    inspect.signature(x.__dlpack__).bind(stream=None, max_version=(1, 0), dl_device=(1, 0),
                                         copy=None)
    inspect.signature(x.__dlpack_device__).bind()
    with pytest.raises(TypeError):
        inspect.signature(x.__array_namespace__).bind("2023.12")  # keyword-only


# --- the Array object -----------------------------------------------------------------------

def test_array_attributes():
    x = fnp.reshape(fnp.arange(24, dtype=fnp.float32), (2, 3, 4))
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert x.ndim == 3 and x.size == 24 and x.dtype == fnp.float32
    assert x.mT.shape == (2, 4, 3)
    np.testing.assert_array_equal(x.mT, np.swapaxes(np.asarray(x), -1, -2))
    m = x[0]
    np.testing.assert_array_equal(m.T, np.asarray(m).T)
    assert x.device == fnp.__array_namespace_info__().default_device()
    assert x.to_device(x.device) is x
    with pytest.raises(ValueError):
        x.to_device("gpu:0")


def test_array_namespace_and_api_versions():
    x = fnp.ones(3)
    assert x.__array_namespace__() is fnp
    assert x.__array_namespace__(api_version="2023.12") is fnp
    assert x.__array_namespace__(api_version="2022.12") is fnp
    with pytest.raises(ValueError, match="2024.12"):
        x.__array_namespace__(api_version="2099.12")


def test_python_scalar_conversions():
    assert type(bool(fnp.asarray(True))) is bool
    assert int(fnp.asarray(7, dtype=fnp.int8)) == 7
    assert float(fnp.asarray(2.5)) == 2.5 and complex(fnp.asarray(1 + 2j)) == 1 + 2j
    assert [10, 20, 30][fnp.asarray(2, dtype=fnp.int64)] == 30  # __index__
    with pytest.raises(TypeError):
        [1, 2][fnp.asarray(1.0)]


_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
}
_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
# The operators and the Python scalars the standard defines for each kind of array dtype.
_KIND_OPS = {
    "b": (["&", "|", "^"], ["==", "!="], [True, False]),
    "i": (["+", "-", "*", "//", "%", "**", "&", "|", "^", "<<", ">>"], list(_CMP), [3]),
    "u": (["+", "-", "*", "//", "%", "**", "&", "|", "^", "<<", ">>"], list(_CMP), [3]),
    "f": (["+", "-", "*", "/", "//", "%", "**"], list(_CMP), [3, 2.5]),
    "c": (["+", "-", "*", "/", "**"], ["==", "!="], [3, 2.5, 1.5 - 0.5j]),
}


@pytest.mark.parametrize("dtype", API_DTYPES)
def test_operators_with_python_scalars_keep_the_array_dtype(dtype):
    ops, cmps, scalars = _KIND_OPS[np.dtype(dtype).kind]
    x = fnp.asarray(np.array([1, 2], dtype))
    n = np.asarray(x)
    for s in scalars:
        for op in ops:
            for out, ref in ((_OPS[op](x, s), _OPS[op](n, np.asarray(s, dtype))),
                             (_OPS[op](s, x), _OPS[op](np.asarray(s, dtype), n))):
                assert out.dtype == np.dtype(dtype), (op, s, out.dtype)
                np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6)
        for op in cmps:
            for out in (_CMP[op](x, s), _CMP[op](s, x)):
                assert out.dtype == np.bool_, (op, s)
    y = fnp.asarray(np.array([1, 1], dtype))
    for op in ops:
        assert _OPS[op](x, y).dtype == np.dtype(dtype)


def test_unary_operators_and_matmul():
    x = fnp.asarray([[1, -2], [3, 4]], dtype=fnp.int16)
    assert (-x).dtype == (+x).dtype == abs(x).dtype == (~x).dtype == np.int16
    np.testing.assert_array_equal(~x, ~np.asarray(x))
    np.testing.assert_array_equal(x @ x, np.asarray(x) @ np.asarray(x))
    np.testing.assert_array_equal(np.eye(2) @ fnp.asarray(np.ones((2, 2))), np.ones((2, 2)))


def test_dlpack_export_is_zero_copy_read_only_or_a_copy():
    x = fnp.arange(6.0, dtype=fnp.float64)
    view = np.from_dlpack(x)                        # NumPy asks for DLPack >= 1.0
    assert not view.flags.writeable and np.shares_memory(view, np.asarray(x))
    copied = np.from_dlpack(x, copy=True)
    assert copied.flags.writeable and not np.shares_memory(copied, np.asarray(x))
    x.__dlpack__()                                  # legacy consumers get a copy
    legacy = type("Legacy", (), {"__dlpack__": lambda s, **kw: x.__dlpack__(copy=False),
                                 "__dlpack_device__": lambda s: (1, 0)})()
    assert np.shares_memory(np.from_dlpack(legacy), np.asarray(x))  # ... or, asked, the buffer
    with pytest.raises(BufferError):
        x.__dlpack__(dl_device=(2, 0))              # no CUDA export
    n = np.arange(3.0)
    shared = fnp.from_dlpack(n, copy=False)
    assert np.shares_memory(np.asarray(shared), n)
    assert not np.shares_memory(np.asarray(fnp.from_dlpack(n)), n)
    assert fnp.from_dlpack(x) is x


# --- inspection, dtypes -------------------------------------------------------------------

def test_namespace_info():
    info = fnp.__array_namespace_info__()
    caps = info.capabilities()
    assert set(caps) >= {"boolean indexing", "data-dependent shapes", "max dimensions"}
    assert all(isinstance(caps[k], bool) for k in ("boolean indexing", "data-dependent shapes"))
    assert caps["max dimensions"] == 64
    dev = info.default_device()
    assert dev in info.devices() and fnp.ones(2).device == dev
    assert fnp.zeros(2, device=dev).device == dev
    defaults = info.default_dtypes()
    assert set(defaults) == {"real floating", "complex floating", "integral", "indexing"}
    assert defaults == info.default_dtypes(device=dev)
    # the defaults are the dtypes fnx really produces
    assert fnp.asarray([1.0]).dtype == defaults["real floating"]
    assert fnp.asarray([1j]).dtype == defaults["complex floating"]
    assert fnp.arange(3).dtype == defaults["integral"]
    assert fnp.argmax(fnp.ones(3)).dtype == defaults["indexing"]
    assert fnp.nonzero(fnp.ones(3))[0].dtype == defaults["indexing"]
    narrow = [d for d in API_DTYPES if np.dtype(d).itemsize < 8 or d == "complex64"]
    with fnx.enable_x64(False):   # 64-bit dtypes narrow to 32 bits: not listed (as JAX)
        assert list(info.dtypes()) == narrow
    with fnx.enable_x64(True):
        every = info.dtypes()
        assert list(every) == API_DTYPES           # no float16/bfloat16: not Array API dtypes
        assert all(every[k] == np.dtype(k) and every[k] is getattr(fnp, k) for k in every)
        kinds = {"bool": ["bool"], "signed integer": API_DTYPES[1:5],
                 "unsigned integer": API_DTYPES[5:9], "integral": API_DTYPES[1:9],
                 "real floating": ["float32", "float64"],
                 "complex floating": ["complex64", "complex128"], "numeric": API_DTYPES[1:]}
        for kind, names in kinds.items():
            assert list(info.dtypes(kind=kind)) == names, kind
        assert list(info.dtypes(kind=("bool", "complex floating"))) == [
            "bool", "complex64", "complex128"]
    with pytest.raises(ValueError):
        info.dtypes(device="tpu")
    with pytest.raises(ValueError):
        info.dtypes(kind="floating")


def test_isdtype():
    table = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
             "real floating": "f", "complex floating": "c", "numeric": "iufc"}
    for name in API_DTYPES:
        d = getattr(fnp, name)
        for kind, codes in table.items():
            assert fnp.isdtype(d, kind) == (np.dtype(name).kind in codes), (name, kind)
        assert fnp.isdtype(d, d) and fnp.isdtype(np.dtype(name), d)
        assert fnp.isdtype(d, (kind, d))
    assert not fnp.isdtype(fnp.int32, fnp.int64)
    assert not fnp.isdtype(fnp.float32, ("bool", "integral", fnp.float64))
    if hasattr(fnp, "bfloat16"):
        assert fnp.isdtype(fnp.bfloat16, "real floating")
        assert fnp.isdtype(fnp.bfloat16, "numeric")
    with pytest.raises(ValueError):
        fnp.isdtype(fnp.int8, "floating")
    with pytest.raises(TypeError):
        fnp.isdtype(fnp.int8, 3.5)


@pytest.mark.parametrize("name", ["float32", "float64", "complex64", "complex128"])
def test_finfo_fields(name):
    f, ref = fnp.finfo(getattr(fnp, name)), np.finfo(name)
    real = np.dtype(name.replace("complex64", "float32").replace("complex128", "float64"))
    assert f.bits == ref.bits and f.dtype == real
    for field in ("eps", "max", "min", "smallest_normal"):
        assert float(getattr(f, field)) == float(getattr(ref, field)), field
    assert fnp.finfo(fnp.ones(2, dtype=getattr(fnp, name))).bits == ref.bits


@pytest.mark.parametrize("name", API_DTYPES[1:9])
def test_iinfo_fields(name):
    i, ref = fnp.iinfo(getattr(fnp, name)), np.iinfo(name)
    assert (i.bits, i.max, i.min, i.dtype) == (ref.bits, ref.max, ref.min, np.dtype(name))
    assert isinstance(i.max, int) and isinstance(i.min, int)


def test_astype_copy_and_device():
    x = fnp.asarray([1.7, -2.2], dtype=fnp.float64)
    for copy in (True, False):
        y = fnp.astype(x, fnp.int16, copy=copy, device=x.device)
        assert y.dtype == np.int16
        np.testing.assert_array_equal(y, [1, -2])
    same = fnp.astype(x, fnp.float64, copy=False)
    assert same.dtype == np.float64
    np.testing.assert_array_equal(same, x)
    with pytest.raises(ValueError):
        fnp.astype(x, fnp.float32, device="gpu:0")
    assert x.astype(fnp.float32, device=x.device).dtype == np.float32


# --- type promotion ---------------------------------------------------------------------------

def _spec_promotion(a, b):
    """The standard's promotion table; None where it leaves the pair unspecified."""
    a, b = np.dtype(a), np.dtype(b)
    if a.kind == "b" or b.kind == "b":
        return a if a == b else None
    if a.kind in "iu" and b.kind in "iu":
        if a.kind == b.kind:
            return max(a, b, key=lambda d: d.itemsize)
        u, i = (a, b) if a.kind == "u" else (b, a)
        bits = max(i.itemsize, 2 * u.itemsize)
        return np.dtype(f"int{8 * bits}") if bits <= 8 else None
    if a.kind in "fc" and b.kind in "fc":
        prec = max(a.itemsize // (2 if a.kind == "c" else 1),
                   b.itemsize // (2 if b.kind == "c" else 1))
        if "c" in (a.kind, b.kind):
            return np.dtype(f"complex{16 * prec}")
        return np.dtype(f"float{8 * prec}")
    return None  # integer with floating: not specified


@pytest.mark.parametrize("a", API_DTYPES)
def test_promotion_table(a):
    x = fnp.ones(2, dtype=getattr(fnp, a))
    checked = 0
    for b in API_DTYPES:
        want = _spec_promotion(a, b)
        if want is None:
            continue
        y = fnp.ones(2, dtype=getattr(fnp, b))
        assert fnp.result_type(getattr(fnp, a), getattr(fnp, b)) == want, (a, b)
        assert fnp.result_type(x, y) == want, (a, b)
        assert (x + y).dtype == want and fnp.add(y, x).dtype == want, (a, b)
        if np.dtype(want).kind in "fc":
            assert fnp.divide(x, y).dtype == want, (a, b)
        if np.dtype(want).kind in "biu":
            assert (x & y).dtype == want, (a, b)
        assert fnp.equal(x, y).dtype == np.bool_
        assert fnp.can_cast(getattr(fnp, a), want) and fnp.can_cast(getattr(fnp, b), want)
        checked += 1
    assert checked >= (1 if a == "bool" else 4)


# --- special cases of the elementwise functions ------------------------------------------------

NAN, INF, PI = float("nan"), float("inf"), math.pi
NNAN = -NAN  # a NaN whose sign bit is set


class Approx(float):
    """An implementation-dependent approximation (of pi/2, say): compared to 1e-6."""


class OneOf(tuple):
    """Results the standard allows side by side (floor division of infinities)."""


_ANY_SIGN = "zero of either sign"

SPECIAL = {
    "abs": [(NAN, NAN), (-0.0, 0.0), (-INF, INF), (-2.5, 2.5)],
    "acos": [(NAN, NAN), (1.5, NAN), (-1.5, NAN), (1.0, 0.0)],
    "acosh": [(NAN, NAN), (0.5, NAN), (1.0, 0.0), (INF, INF)],
    "asin": [(NAN, NAN), (1.5, NAN), (-1.5, NAN), (0.0, 0.0), (-0.0, -0.0)],
    "asinh": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF)],
    "atan": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, Approx(PI / 2)),
             (-INF, Approx(-PI / 2))],
    "atanh": [(NAN, NAN), (-1.5, NAN), (1.5, NAN), (-1.0, -INF), (1.0, INF), (0.0, 0.0),
              (-0.0, -0.0)],
    "ceil": [(INF, INF), (-INF, -INF), (0.0, 0.0), (-0.0, -0.0), (NAN, NAN), (-0.5, -0.0),
             (2.0, 2.0), (2.1, 3.0)],
    "cos": [(NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN)],
    "cosh": [(NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, INF)],
    "exp": [(NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0)],
    "expm1": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -1.0)],
    "floor": [(INF, INF), (-INF, -INF), (0.0, 0.0), (-0.0, -0.0), (NAN, NAN), (-2.5, -3.0)],
    "log": [(NAN, NAN), (-1.0, NAN), (0.0, -INF), (-0.0, -INF), (1.0, 0.0), (INF, INF)],
    "log1p": [(NAN, NAN), (-2.0, NAN), (-1.0, -INF), (-0.0, -0.0), (0.0, 0.0), (INF, INF)],
    "log2": [(NAN, NAN), (-1.0, NAN), (0.0, -INF), (-0.0, -INF), (1.0, 0.0), (INF, INF)],
    "log10": [(NAN, NAN), (-1.0, NAN), (0.0, -INF), (-0.0, -INF), (1.0, 0.0), (INF, INF)],
    "negative": [(0.0, -0.0), (-0.0, 0.0), (INF, -INF), (NAN, NAN)],
    "positive": [(-0.0, -0.0), (NAN, NAN), (-INF, -INF)],
    "round": [(INF, INF), (-INF, -INF), (0.0, 0.0), (-0.0, -0.0), (NAN, NAN), (0.5, 0.0),
              (1.5, 2.0), (2.5, 2.0), (-0.5, -0.0), (-2.5, -2.0), (-3.5, -4.0), (2.4, 2.0)],
    "sign": [(-2.0, -1.0), (0.0, _ANY_SIGN), (-0.0, _ANY_SIGN), (3.0, 1.0), (NAN, NAN),
             (INF, 1.0), (-INF, -1.0)],
    "signbit": [(0.0, False), (-0.0, True), (INF, False), (-INF, True), (2.0, False),
                (-2.0, True), (NAN, False), (NNAN, True)],
    "sin": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN)],
    "sinh": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF)],
    "sqrt": [(NAN, NAN), (-1.0, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, INF), (4.0, 2.0)],
    "square": [(-0.0, 0.0), (NAN, NAN), (-INF, INF), (-3.0, 9.0)],
    "tan": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN)],
    "tanh": [(NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0)],
    "trunc": [(INF, INF), (-INF, -INF), (0.0, 0.0), (-0.0, -0.0), (NAN, NAN), (-0.5, -0.0),
              (-2.7, -2.0), (2.7, 2.0)],
    "isfinite": [(INF, False), (-INF, False), (NAN, False), (1.0, True), (-0.0, True)],
    "isinf": [(INF, True), (-INF, True), (NAN, False), (1.0, False)],
    "isnan": [(NAN, True), (NNAN, True), (INF, False), (0.0, False)],
    # binary
    "add": [((NAN, 1.0), NAN), ((INF, -INF), NAN), ((-INF, INF), NAN), ((INF, INF), INF),
            ((-INF, -INF), -INF), ((INF, 1.0), INF), ((1.0, -INF), -INF),
            ((-0.0, -0.0), -0.0), ((-0.0, 0.0), 0.0), ((0.0, -0.0), 0.0), ((-0.0, 2.0), 2.0),
            ((2.0, -0.0), 2.0), ((2.0, -2.0), 0.0)],
    "subtract": [((INF, INF), NAN), ((-0.0, 0.0), -0.0), ((0.0, 0.0), 0.0), ((2.0, 2.0), 0.0),
                 ((NAN, NAN), NAN)],
    "multiply": [((NAN, 1.0), NAN), ((INF, 0.0), NAN), ((-0.0, INF), NAN), ((-0.0, 2.0), -0.0),
                 ((-2.0, 0.0), -0.0), ((-INF, -1.0), INF), ((-INF, INF), -INF),
                 ((-0.0, -0.0), 0.0)],
    "divide": [((NAN, 1.0), NAN), ((INF, -INF), NAN), ((0.0, -0.0), NAN), ((0.0, 2.0), 0.0),
               ((-0.0, 2.0), -0.0), ((0.0, -2.0), -0.0), ((-0.0, -2.0), 0.0),
               ((1.0, 0.0), INF), ((1.0, -0.0), -INF), ((-1.0, 0.0), -INF),
               ((-1.0, -0.0), INF), ((INF, 2.0), INF), ((INF, -2.0), -INF),
               ((-INF, 2.0), -INF), ((-INF, -2.0), INF), ((1.0, INF), 0.0),
               ((1.0, -INF), -0.0), ((-1.0, INF), -0.0), ((-1.0, -INF), 0.0),
               ((-6.0, 3.0), -2.0)],
    "floor_divide": [
        ((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((INF, -INF), NAN), ((0.0, -0.0), NAN),
        ((0.0, 2.0), 0.0), ((-0.0, 2.0), -0.0), ((0.0, -2.0), -0.0), ((-0.0, -2.0), 0.0),
        ((1.0, 0.0), INF), ((1.0, -0.0), -INF), ((-1.0, 0.0), -INF), ((-1.0, -0.0), INF),
        # the standard prefers floor(x1 / x2) but allows Python's results (NaN, -1.0)
        ((INF, 2.0), OneOf((INF, NAN))), ((INF, -2.0), OneOf((-INF, NAN))),
        ((-INF, 2.0), OneOf((-INF, NAN))), ((-INF, -2.0), OneOf((INF, NAN))),
        ((1.0, INF), 0.0), ((1.0, -INF), OneOf((-0.0, -1.0))),
        ((-1.0, INF), OneOf((-0.0, -1.0))), ((-1.0, -INF), 0.0),
        ((7.0, 2.0), 3.0), ((-7.0, 2.0), -4.0), ((7.0, -2.0), -4.0), ((-7.0, -2.0), 3.0)],
    "remainder": [
        ((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((INF, INF), NAN), ((-INF, INF), NAN),
        ((0.0, -0.0), NAN), ((-0.0, 0.0), NAN), ((0.0, 2.0), 0.0), ((-0.0, 2.0), 0.0),
        ((0.0, -2.0), -0.0), ((-0.0, -2.0), -0.0), ((1.0, 0.0), NAN), ((1.0, -0.0), NAN),
        ((-1.0, 0.0), NAN), ((-1.0, -0.0), NAN), ((INF, 2.0), NAN), ((INF, -2.0), NAN),
        ((-INF, 2.0), NAN), ((-INF, -2.0), NAN), ((1.0, INF), 1.0), ((1.0, -INF), -INF),
        ((-1.0, INF), INF), ((-1.0, -INF), -1.0), ((5.0, -3.0), -1.0), ((-5.0, 3.0), 1.0),
        ((6.0, -3.0), -0.0), ((-6.0, 3.0), 0.0), ((5.5, 2.0), 1.5)],
    "pow": [
        ((2.0, NAN), NAN), ((1.0, NAN), 1.0), ((NAN, 0.0), 1.0), ((NAN, -0.0), 1.0),
        ((NAN, 1.0), NAN), ((2.0, INF), INF), ((-2.0, -INF), 0.0), ((1.0, INF), 1.0),
        ((-1.0, INF), 1.0), ((-1.0, -INF), 1.0), ((1.0, -3.5), 1.0), ((0.5, INF), 0.0),
        ((-0.5, -INF), INF), ((INF, 0.5), INF), ((INF, -0.5), 0.0), ((-INF, 3.0), -INF),
        ((-INF, 2.0), INF), ((-INF, 0.5), INF), ((-INF, -3.0), -0.0), ((-INF, -2.0), 0.0),
        ((0.0, 2.0), 0.0), ((0.0, -2.0), INF), ((-0.0, 3.0), -0.0), ((-0.0, 2.0), 0.0),
        ((-0.0, -3.0), -INF), ((-0.0, -2.0), INF), ((-2.0, 0.5), NAN), ((-2.0, 3.0), -8.0)],
    "atan2": [
        ((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((1.0, 0.0), Approx(PI / 2)),
        ((1.0, -0.0), Approx(PI / 2)), ((0.0, 1.0), 0.0), ((0.0, 0.0), 0.0),
        ((0.0, -0.0), Approx(PI)), ((0.0, -1.0), Approx(PI)), ((-0.0, 1.0), -0.0),
        ((-0.0, 0.0), -0.0), ((-0.0, -0.0), Approx(-PI)), ((-0.0, -1.0), Approx(-PI)),
        ((-1.0, 0.0), Approx(-PI / 2)), ((-1.0, -0.0), Approx(-PI / 2)), ((1.0, INF), 0.0),
        ((1.0, -INF), Approx(PI)), ((-1.0, INF), -0.0), ((-1.0, -INF), Approx(-PI)),
        ((INF, 1.0), Approx(PI / 2)), ((-INF, 1.0), Approx(-PI / 2)),
        ((INF, INF), Approx(PI / 4)), ((INF, -INF), Approx(3 * PI / 4)),
        ((-INF, INF), Approx(-PI / 4)), ((-INF, -INF), Approx(-3 * PI / 4))],
    "copysign": [
        ((2.0, -1.0), -2.0), ((2.0, -0.0), -2.0), ((-2.0, 0.0), 2.0), ((-2.0, 1.0), 2.0),
        ((2.0, NNAN), -2.0), ((-2.0, NAN), 2.0), ((NAN, -1.0), NNAN), ((NAN, -0.0), NNAN),
        ((NNAN, 0.0), NAN), ((NNAN, 1.0), NAN), ((NAN, NNAN), NNAN), ((NNAN, NAN), NAN),
        ((INF, -0.0), -INF), ((0.0, -INF), -0.0)],
    "hypot": [((INF, NAN), INF), ((-INF, 1.0), INF), ((NAN, -INF), INF), ((1.0, INF), INF),
              ((0.0, -3.0), 3.0), ((-0.0, 2.0), 2.0), ((-3.0, 0.0), 3.0), ((1.0, NAN), NAN),
              ((NAN, NAN), NAN), ((NAN, 0.0), NAN), ((3.0, -4.0), 5.0),
              ((1e38, 1e38), Approx(math.hypot(1e38, 1e38)))],
    "logaddexp": [((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((NAN, INF), NAN), ((INF, 1.0), INF),
                  ((INF, -INF), INF), ((1.0, INF), INF), ((INF, INF), INF),
                  ((-INF, -INF), -INF), ((0.0, 0.0), Approx(math.log(2)))],
    "maximum": [((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((NAN, NAN), NAN), ((-INF, NAN), NAN),
                ((1.0, 2.0), 2.0), ((-INF, -1.0), -1.0), ((0.0, -0.0), _ANY_SIGN)],
    "minimum": [((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((INF, NAN), NAN), ((1.0, 2.0), 1.0),
                ((INF, 1.0), 1.0), ((0.0, -0.0), _ANY_SIGN)],
    "equal": [((NAN, NAN), False), ((NAN, 1.0), False), ((INF, INF), True),
              ((-INF, -INF), True), ((-0.0, 0.0), True), ((INF, -INF), False)],
    "not_equal": [((NAN, NAN), True), ((1.0, NAN), True), ((INF, -INF), True),
                  ((-0.0, 0.0), False), ((INF, INF), False)],
    "less": [((NAN, 1.0), False), ((-0.0, 0.0), False), ((-INF, 1.0), True)],
    "greater_equal": [((NAN, NAN), False), ((-0.0, 0.0), True), ((INF, INF), True)],
    # nextafter is 2024.12; its rules hold here too
    "nextafter": [((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((2.0, 2.0), 2.0), ((-0.0, 0.0), 0.0),
                  ((0.0, -0.0), -0.0)],
}


def _same(got, want, dtype, nan_sign=False):
    """Does the result ``got`` match the standard's ``want``? NaN matches NaN (its sign
    bit too with ``nan_sign``: copysign), zeros and infinities match with their sign."""
    if isinstance(want, OneOf):
        return any(_same(got, w, dtype) for w in want)
    if isinstance(want, bool):
        return isinstance(got, bool) and got == want
    if want == _ANY_SIGN:
        return got == 0
    if math.isnan(want):
        return math.isnan(got) and (not nan_sign or np.signbit(got) == np.signbit(want))
    if isinstance(want, Approx):
        return math.isclose(got, want, rel_tol=1e-6 if dtype == np.float32 else 1e-12)
    return got == want and np.signbit(got) == np.signbit(want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's invalid-value warnings
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_elementwise_special_cases(name, dtype):
    cases = SPECIAL[name]
    binary = isinstance(cases[0][0], tuple)
    cols = list(zip(*[c[0] for c in cases])) if binary else [[c[0] for c in cases]]
    with np.errstate(all="ignore"):
        args = [fnp.asarray(np.array(c, dtype=dtype)) for c in cols]
    want_dtype = np.bool_ if isinstance(cases[0][1], bool) else dtype
    f = getattr(fnp, name)
    for mode, fn in (("eager", f), ("jit", fnx.jit(f))):
        out = np.asarray(fn(*args))
        assert out.dtype == want_dtype, (mode, name, out.dtype)
        for (inputs, want), got in zip(cases, out.tolist()):
            assert _same(got, want, dtype, nan_sign=name == "copysign"), (
                f"{mode} {name}{inputs} ({np.dtype(dtype)}) = {got!r}, expected {want!r}")


def test_special_cases_of_python_scalar_operands():
    x = fnp.asarray([-0.0, 0.0, -1.0], dtype=fnp.float32)
    np.testing.assert_array_equal(np.signbit(np.asarray(x % 2.0)), [False, False, False])
    np.testing.assert_array_equal(np.signbit(np.asarray(x % -2.0)), [True, True, True])
    np.testing.assert_array_equal(np.signbit(np.asarray(x * 0.0)), [True, False, True])
    np.testing.assert_array_equal(np.asarray(0.0 ** x), [1.0, 1.0, np.inf])


def test_integer_special_cases():
    a = fnp.asarray([-7, 7, -7, 7, 0], dtype=fnp.int32)
    b = fnp.asarray([2, -2, -2, 2, 5], dtype=fnp.int32)
    np.testing.assert_array_equal(a // b, [-4, -4, 3, 3, 0])
    np.testing.assert_array_equal(a % b, [1, -1, -1, 1, 0])   # the divisor's sign
    np.testing.assert_array_equal(fnp.sign(a), [-1, 1, -1, 1, 0])
    np.testing.assert_array_equal(fnp.round(a), a)
    assert fnp.round(a).dtype == fnp.sign(a).dtype == np.int32
    np.testing.assert_array_equal(fnp.bitwise_right_shift(a, 1), [-4, 3, -4, 3, 0])  # arithmetic
    u = fnp.asarray([200, 3], dtype=fnp.uint8)
    assert (u % 7).dtype == np.uint8 and (u // 7).dtype == np.uint8
    np.testing.assert_array_equal(u % 7, [4, 3])


def test_complex_round_rounds_each_part_half_to_even():
    z = np.array([1.5 + 2.5j, -0.5 - 1.5j, 2.4 - 3.6j, complex(np.inf, 0.5),
                  complex(np.nan, -2.5)], np.complex64)
    out = fnp.round(fnp.asarray(z))
    assert out.dtype == np.complex64
    got = np.asarray(out)
    np.testing.assert_array_equal(got.real, np.round(z.real))
    np.testing.assert_array_equal(got.imag, np.round(z.imag))


# --- functions the standard added or pins down -------------------------------------------------

def test_clip():
    x = fnp.asarray([-3.0, 0.5, 7.0, np.nan], dtype=fnp.float32)
    np.testing.assert_array_equal(fnp.clip(x, -1.0, 2.0), [-1.0, 0.5, 2.0, np.nan])
    np.testing.assert_array_equal(fnp.clip(x, min=0.0), [0.0, 0.5, 7.0, np.nan])
    np.testing.assert_array_equal(fnp.clip(x, max=0.0), [-3.0, 0.0, 0.0, np.nan])
    np.testing.assert_array_equal(fnp.clip(x), x)
    # the result has x's dtype, array bounds broadcast
    lo = fnp.asarray([[0.0], [1.0]], dtype=fnp.float64)
    out = fnp.clip(x, lo, 5.0)
    assert out.dtype == np.float32 and out.shape == (2, 4)
    np.testing.assert_array_equal(out[1], [1.0, 1.0, 5.0, np.nan])
    i = fnp.asarray([-100, 5, 100], dtype=fnp.int8)
    assert fnp.clip(i, -1000, 50).dtype == np.int8       # bounds beyond int8 clip nothing
    np.testing.assert_array_equal(fnp.clip(i, -1000, 50), [-100, 5, 50])
    assert fnp.clip(i, fnp.asarray(0, dtype=fnp.int16), None).dtype == np.int8


def test_unique_namedtuples():
    x = fnp.asarray([3, 1, 3, 2, 1, 3])
    r = fnp.unique_all(x)
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    np.testing.assert_array_equal(r.values, [1, 2, 3])
    np.testing.assert_array_equal(r.indices, [1, 3, 0])
    np.testing.assert_array_equal(r.counts, [2, 1, 3])
    np.testing.assert_array_equal(r.values[r.inverse_indices], x)
    c = fnp.unique_counts(x)
    assert c._fields == ("values", "counts")
    v = fnp.unique_inverse(fnp.reshape(x, (2, 3)))
    assert v._fields == ("values", "inverse_indices") and v.inverse_indices.shape == (2, 3)
    np.testing.assert_array_equal(fnp.unique_values(x), [1, 2, 3])


def test_cumulative_sum():
    x = fnp.asarray([[1, 2, 3], [4, 5, 6]], dtype=fnp.int16)
    np.testing.assert_array_equal(fnp.cumulative_sum(x, axis=1), np.cumsum(np.asarray(x), 1))
    np.testing.assert_array_equal(fnp.cumulative_sum(fnp.arange(4.0)), [0.0, 1.0, 3.0, 6.0])
    assert fnp.cumulative_sum(x, axis=0, dtype=fnp.float64).dtype == np.float64


def test_cumulative_sum_include_initial():
    x = fnp.asarray([[1, 2, 3], [4, 5, 6]], dtype=fnp.int32)
    out = fnp.cumulative_sum(x, axis=1, include_initial=True)
    np.testing.assert_array_equal(out, [[0, 1, 3, 6], [0, 4, 9, 15]])
    np.testing.assert_array_equal(fnp.cumulative_sum(fnp.arange(3), include_initial=True),
                                  [0, 0, 1, 3])


def test_searchsorted_take_moveaxis_repeat_tile_unstack():
    a = fnp.asarray([1.0, 2.0, 2.0, 3.0])
    v = fnp.asarray([2.0, 0.0, 5.0])
    np.testing.assert_array_equal(fnp.searchsorted(a, v), [1, 0, 4])
    np.testing.assert_array_equal(fnp.searchsorted(a, v, side="right"), [3, 0, 4])
    unsorted = fnp.asarray([3.0, 1.0, 2.0])
    np.testing.assert_array_equal(
        fnp.searchsorted(unsorted, fnp.asarray([2.5]), sorter=fnp.argsort(unsorted)), [2])
    m = fnp.reshape(fnp.arange(6), (2, 3))
    np.testing.assert_array_equal(fnp.take(m, fnp.asarray([2, 0]), axis=1), [[2, 0], [5, 3]])
    np.testing.assert_array_equal(fnp.take(fnp.arange(5), fnp.asarray([4, 1])), [4, 1])
    t = fnp.ones((2, 3, 4))
    assert fnp.moveaxis(t, 0, -1).shape == (3, 4, 2)
    assert fnp.moveaxis(t, (0, 1), (2, 0)).shape == (3, 4, 2)
    np.testing.assert_array_equal(fnp.repeat(fnp.arange(3), 2), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(fnp.repeat(m, fnp.asarray([1, 0, 2]), axis=1),
                                  [[0, 2, 2], [3, 5, 5]])
    np.testing.assert_array_equal(fnp.tile(fnp.asarray([1, 2]), (2, 2)),
                                  [[1, 2, 1, 2], [1, 2, 1, 2]])
    parts = fnp.unstack(m, axis=1)
    assert isinstance(parts, tuple) and len(parts) == 3
    np.testing.assert_array_equal(parts[2], [2, 5])
    assert fnp.expand_dims(fnp.ones(3)).shape == (1, 3)
    assert fnp.expand_dims(fnp.ones(3), axis=-1).shape == (3, 1)


def test_creation_functions_take_the_device():
    dev = fnp.__array_namespace_info__().default_device()
    made = [fnp.zeros(2, device=dev), fnp.ones(2, device=dev), fnp.empty(2, device=dev),
            fnp.full(2, 3.0, device=dev), fnp.arange(2, device=dev),
            fnp.linspace(0, 1, 2, device=dev), fnp.eye(2, device=dev),
            fnp.asarray([1, 2], device=dev), fnp.zeros_like(fnp.ones(2), device=dev),
            fnp.full_like(fnp.ones(2), 1.0, device=dev)]
    assert all(a.device == dev for a in made)
    for make in (lambda: fnp.zeros(2, device="cuda:0"), lambda: fnp.full(2, 1.0, device=7),
                 lambda: fnp.linspace(0, 1, 2, device="gpu")):
        with pytest.raises(ValueError, match="device"):
            make()
