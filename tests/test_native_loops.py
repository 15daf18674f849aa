"""Fused native loops on the CPU (``fnx.backends.native_loops``, ``fnx.kernels.host``): the
GPU backend's clusters rendered as C++ loops, compiled by the system compiler."""
import warnings

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.kernels import host

pytestmark = pytest.mark.skipif(not host.compiler_available(), reason="needs a C++ compiler")


@pytest.fixture
def native(monkeypatch):
    """Native loops from 16 elements on (256 for arithmetic alone; small arrays keep the
    tests fast)."""
    monkeypatch.setenv("FNX_NATIVE", "1")
    monkeypatch.setenv("FNX_NATIVE_MIN", "16")


def _ulps(got, want):
    """|got - want| in units in the last place of float32 (0 where both are NaN)."""
    with np.errstate(over="ignore"):
        g, w = got.astype(np.float32), want.astype(np.float32)
    gi, wi = (v.view(np.int32).astype(np.int64) for v in (g, w))
    gi = np.where(gi < 0, -(gi & 0x7FFFFFFF), gi)
    wi = np.where(wi < 0, -(wi & 0x7FFFFFFF), wi)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    return np.where(same, 0, np.abs(gi - wi))


def _erf64(x):
    from fnx.lax.special_math import erf   # float64 throughout, to about 1 ulp of float64
    return erf(x)


# the stated bounds of the vector math, in float32 ulps of the correctly rounded result
BOUNDS = {"expf": (np.exp, 1), "expm1f": (np.expm1, 2), "logf": (np.log, 1),
          "log1pf": (np.log1p, 2), "tanhf": (np.tanh, 2), "erff": (_erf64, 2)}


def test_the_vector_math_is_within_its_ulp_bounds():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        rng.uniform(-12, 12, 300_000).astype(np.float32),
        rng.uniform(-1e-3, 1e-3, 50_000).astype(np.float32),
        np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 88.72283, 88.7229, -87.3365,
                  -103.97, -104, 1e-45, -1e-45, 1.1754944e-38, 0.34657359, 9.5, -9.5,
                  -0.99999994, -1.0000001, 3.4028235e38], np.float32)])
    names = list(BOUNDS)
    text = "".join(
        f'extern "C" void t_{n}(const float* x, float* y, long long k) {{\n'
        f"    #pragma omp simd\n    for (long long i = 0; i < k; ++i) y[i] = {n}(x[i]);\n}}\n"
        for n in names)
    lib = host.load(text)
    for n in names:
        fn = getattr(lib, f"t_{n}")
        import ctypes
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
        y = np.empty_like(x)
        fn(x.ctypes.data, y.ctypes.data, x.size)
        ref_fn, bound = BOUNDS[n]
        with np.errstate(all="ignore"):
            want = ref_fn(x.astype(np.float64))
        u = _ulps(y, want)
        worst = int(np.argmax(u))
        assert u.max() <= bound, (n, x[worst], y[worst], want[worst])
        # signed zeros and the infinities exactly
        for v in (0.0, -0.0, np.inf, -np.inf):
            k = np.flatnonzero(x.view(np.uint32) == np.float32(v).view(np.uint32))[0]
            with np.errstate(all="ignore"):
                exact = np.float32(ref_fn(np.float64(v)))
            assert y[k].tobytes() == exact.tobytes() or (np.isnan(y[k]) and np.isnan(exact)), (n, v)


def _gelu_layernorm(x, w, g, b):
    mu = fnp.mean(x, axis=-1, keepdims=True)
    var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return fnx.nn.gelu(x) * w + (x - mu) / fnp.sqrt(var + 1e-5) * g + b


def test_large_clusters_become_native_loops_shown_in_lower(native):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 100)).astype(np.float32)
    w, g, b = (rng.standard_normal(100).astype(np.float32) for _ in range(3))
    jf = fnx.jit(_gelu_layernorm)
    low = jf.lower(x, w, g, b)
    assert "native_loop" in low.source
    assert len(low.kernels) == 1 and 'extern "C" void' in low.kernels[0]
    want = _gelu_layernorm(*map(fnp.asarray, (x, w, g, b)))
    np.testing.assert_allclose(np.asarray(jf(x, w, g, b)), np.asarray(want), rtol=2e-6,
                               atol=2e-6)
    # below the size, NumPy's ufuncs
    small = x[:2, :4]
    assert "native_loop" not in fnx.jit(lambda v: fnp.tanh(v) * 2 + 1).lower(small).source


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
def test_elementwise_native_loops_equal_eager_bit_for_bit(native, dtype):
    """Arithmetic, comparisons, conversions and selections round as NumPy's ufuncs do."""
    rng = np.random.default_rng(2)
    if dtype == np.bool_:
        a, b = rng.integers(0, 2, (2, 40, 9)).astype(bool)

        def f(a, b):
            return (a & ~b) | (a ^ b), (a | b) & b
    else:
        a = (rng.standard_normal((40, 9)) * 50).astype(dtype)
        b = (rng.standard_normal((40, 9)) * 50).astype(dtype)
        if dtype != np.uint8:
            a[0, :4] = [0, -1, 7, 3]
        if np.dtype(dtype).kind == "f":
            a[1, :4] = [np.nan, np.inf, -np.inf, -0.0]

        def f(a, b):
            c = fnp.where(a > b, a - b * 3, fnp.maximum(a, b)) + fnp.minimum(a, 2 * b)
            return c * c - a, (c // 3 if np.dtype(dtype).kind != "f" else c / 7).astype(fnp.float32)
    with fnx.enable_x64(dtype == np.float64):
        jf = fnx.jit(f)
        assert "native_loop" in jf.lower(a, b).source
        with np.errstate(all="ignore"):
            want = f(fnp.asarray(a), fnp.asarray(b))
        for g, w in zip(jf(a, b), want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_transcendental_and_reduction_loops_stay_close_to_eager(native):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 300)) * 4).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf]

    def f(x):
        sm = fnx.nn.softmax(x, axis=-1)
        return (sm, fnx.nn.selu(x) * fnp.tanh(x), fnp.log1p(fnp.abs(x)) - fnp.log(fnp.abs(x) + 1),
                fnx.nn.logsumexp(x, axis=0), fnp.max(x * 2, axis=1), fnp.sum(x[1:] ** 2, axis=0))
    jf = fnx.jit(f)
    low = jf.lower(x)
    assert "native_loop" in low.source
    with np.errstate(all="ignore"):
        want = f(fnp.asarray(x))
    got = jf(x)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=str(k))
        ok = ~np.isnan(w)
        np.testing.assert_allclose(g[ok], w[ok], rtol=3e-6, atol=1e-6, err_msg=str(k))
    np.testing.assert_array_equal(np.asarray(got[4]), np.asarray(want[4]))  # max: exact


@pytest.mark.parametrize("shape,axes", [((40, 20), (1,)), ((30, 128), (1,)), ((12, 1001), (1,)),
                                        ((3, 4, 700), (1, 2)), ((2, 3, 33), (2,))])
def test_row_sums_equal_eager_bit_for_bit(native, shape, axes):
    """A float sum adds its terms with NumPy's pairwise summation: means, variances and
    layernorm statistics equal eager's to the bit (no transcendental function here)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32) * 3
    y = rng.standard_normal(shape).astype(np.float32)

    def f(x, y):
        d = x - y
        mu = fnp.mean(d, axis=axes, keepdims=True)
        var = fnp.mean((d - mu) ** 2, axis=axes, keepdims=True)
        return (d - mu) / fnp.sqrt(var + 1e-5), fnp.sum(d * d, axis=axes), fnp.max(d, axis=axes)
    jf = fnx.jit(f)
    assert "native_loop" in jf.lower(x, y).source
    for g, w in zip(jf(x, y), f(fnp.asarray(x), fnp.asarray(y))):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


PAIRWISE_LENGTHS = [1, 7, 8, 9, 127, 128, 129, 490, 1000, 1024, 4096, 4097]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pairwise_sum_is_numpys_to_the_bit(dtype):
    """``fnx_pairwise_sum`` blocks a run as NumPy's float ``add.reduce`` does (8 partial
    sums, leaves of at most 128 terms, splits at multiples of 8), odd lengths included;
    so does ``fnx_pairwise_sum_n<N>``, the same tree unfolded at compile time (folded
    again above ``PAIRWISE_UNFOLD_MAX``)."""
    import ctypes
    t, ct = ("float", ctypes.c_float) if dtype == np.float32 else ("double", ctypes.c_double)
    unfolded = "".join(f'extern "C" {t} t_pwn_{t}_{n}(const {t}* a) '
                       f"{{ return ({t})0 + fnx_pairwise_sum_n<{n}>(a); }}\n"
                       for n in PAIRWISE_LENGTHS)
    lib = host.load(f'extern "C" {t} t_pw_{t}(const {t}* a, long long n) '
                    f"{{ return ({t})0 + fnx_pairwise_sum(a, n); }}\n" + unfolded)
    fn = getattr(lib, f"t_pw_{t}")
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_longlong], ct
    rng = np.random.default_rng(7)
    for n in PAIRWISE_LENGTHS:
        a = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(dtype)
        want = np.array(dtype(0) + np.add.reduce(a), dtype).tobytes()
        got = np.array(fn(a.ctypes.data, n), dtype)
        assert got.tobytes() == want, (n, got, want)
        fn_n = getattr(lib, f"t_pwn_{t}_{n}")
        fn_n.argtypes, fn_n.restype = [ctypes.c_void_p], ct
        got = np.array(fn_n(a.ctypes.data), dtype)
        assert got.tobytes() == want, ("unfolded", n, got, want)


@pytest.mark.parametrize("n", PAIRWISE_LENGTHS[1:])   # (a mean over one element is no sum)
def test_row_sums_of_an_input_are_summed_in_place_and_equal_eager(native, n):
    """A mean of an input's rows adds the input's row where it lies (no copy into a scratch
    row), still as NumPy does, odd lengths included."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((max(3, 64 // n), n)) * 3).astype(np.float32)

    def f(x):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        return fnp.tanh(x - mu), fnp.mean((x - mu) ** 2, axis=-1)
    jf = fnx.jit(f)
    kernels = "".join(jf.lower(x).kernels)
    assert f"fnx_pairwise_sum_n<{n}>(in0 + o * {n})" in kernels, kernels
    # rows of 16 elements or more: the last pass asks for the next row's lines
    assert (f"__builtin_prefetch(in0 + (o + 1) * {n} + r0, 0, 3);" in kernels) == (n >= 16)
    got, want = jf(x), f(fnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=3e-7, atol=1e-7)


def test_reductions_eager_plans_differently_stay_on_numpy(native):
    x = np.random.default_rng(5).standard_normal((64, 300)).astype(np.float32)
    for f in (lambda v: fnp.sum(v * 2, axis=0), lambda v: fnp.prod(v * 2, axis=1),
              lambda v: (v * 2).reshape(64, 150, 2).max(axis=2)):
        assert "native_loop" not in fnx.jit(f).lower(x).source


def test_arithmetic_alone_needs_a_larger_cluster(native):
    """Without a transcendental function, a fused loop saves one pass over memory per
    equation but the first: two equations need 16 times FNX_NATIVE_MIN elements, three 4
    times, more than that FNX_NATIVE_MIN."""
    two = fnx.jit(lambda v: v * 2 + 1)
    assert "native_loop" not in two.lower(np.ones((10, 20), np.float32)).source
    assert "native_loop" in two.lower(np.ones((10, 30), np.float32)).source
    three = fnx.jit(lambda v: (v * 2 + 1) * v)
    assert "native_loop" not in three.lower(np.ones((2, 20), np.float32)).source
    assert "native_loop" in three.lower(np.ones((4, 20), np.float32)).source
    five = fnx.jit(lambda v: fnp.maximum((v * 2 + 1) * v - 3, 0))
    assert "native_loop" in five.lower(np.ones((2, 8), np.float32)).source
    assert "native_loop" in fnx.jit(lambda v: fnp.exp(v) * 2).lower(
        np.ones((2, 10), np.float32)).source


def test_native_loops_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("FNX_NATIVE", "0")
    monkeypatch.setenv("FNX_NATIVE_MIN", "1")
    x = np.ones((50, 50), np.float32)
    assert "native_loop" not in fnx.jit(lambda v: fnp.tanh(v) * 2 + 1).lower(x).source


def _broken_compiler(text):
    raise host.HostCompileError("g++: error: unrecognized command-line option")


@pytest.mark.parametrize("attr,replacement,says", [
    ("compiler_available", lambda: False, "g\\+\\+"),       # no compiler
    ("load", _broken_compiler, "could not be built"),           # one that fails
])
def test_without_a_working_compiler_jit_says_so_once_and_uses_numpy(native, monkeypatch, attr,
                                                                    replacement, says):
    from fnx.backends import native_loops
    monkeypatch.setattr(host, attr, replacement)
    monkeypatch.setattr(native_loops, "_warned", [])
    x = np.linspace(-2, 2, 300, dtype=np.float32)
    with pytest.warns(native_loops.NativeLoopsUnavailable, match=says):
        jf = fnx.jit(lambda v: fnp.tanh(v) * 2 + 1)
        assert "native_loop" not in jf.lower(x).source
    np.testing.assert_allclose(np.asarray(jf(x)), np.tanh(x) * 2 + 1, rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fnx.jit(lambda v: fnp.exp(v) * 3 - 1).lower(x)  # said once


def test_loops_calling_scalar_library_functions_stay_on_numpy(native):
    """Float64 exp, float32 sin...: the C library's, one element at a time; NumPy's own
    SIMD loops are faster, so those clusters keep NumPy's ufuncs."""
    x32 = np.linspace(-3, 3, 4000, dtype=np.float32).reshape(40, 100)
    assert "native_loop" not in fnx.jit(lambda v: fnp.sin(v) * 2 + 1).lower(x32).source
    with fnx.enable_x64():
        x64 = x32.astype(np.float64)
        assert "native_loop" not in fnx.jit(fnx.nn.selu).lower(x64).source
        assert "native_loop" in fnx.jit(lambda v: v * 2 + v * v).lower(x64).source
    assert "native_loop" in fnx.jit(lambda v: fnp.maximum(v + v[0], 0) * 3).lower(x32).source


def test_a_forked_child_runs_native_loops_on_one_thread(native, monkeypatch):
    """The OpenMP runtime's threads are not in a forked child: a parallel loop there would
    wait for them forever, so the child's loops run on one thread (multiprocessing's fork
    start method after training in the parent)."""
    import multiprocessing
    from fnx.backends import native_loops
    monkeypatch.setenv("FNX_PARALLEL_MIN", "1024")
    monkeypatch.setattr(native_loops, "_THREADS", [2])
    f = fnx.jit(lambda v: fnp.tanh(v) * 2 + fnp.exp(-v))
    x = fnp.asarray(np.linspace(-2, 2, 1 << 14, dtype=np.float32))
    assert "native_loop" in f.lower(x).source
    want = float(np.asarray(f(x)).sum())  # a parallel loop in the parent first
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=lambda q: q.put((native_loops.threads(),
                                                 float(np.asarray(f(x)).sum()))),
                        args=(queue,))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in a native loop")
    assert queue.get(timeout=5) == (1, want)


def test_an_elementwise_loop_writes_over_an_operand_that_dies_there(native):
    """A fused map of one result may be handed, as ``out=``, an operand it reads only at
    the element it writes (that pointer loses ``__restrict__``): a fused update
    ``p - lr * (g / 2)`` writes over the gradient, as NumPy's in-place ufuncs would,
    instead of into a third buffer. An operand read at another element (a transposed
    one) never is; the values are eager's either way."""
    rng = np.random.default_rng(3)
    p, a, b = (rng.standard_normal((24, 24)).astype(np.float32) for _ in range(3))

    def update(p, a, b):
        return p - 0.1 * ((a @ b) / 2)

    def update_t(p, a, b):
        return p - 0.1 * ((a @ b).T / 2)
    for f, over in ((update, True), (update_t, False)):
        jf = fnx.jit(f)
        lowered = jf.lower(p, a, b)
        line = next(ln for ln in lowered.source.splitlines() if "_native_loop" in ln)
        grad_var = next(ln for ln in lowered.source.splitlines()
                        if "_dot_general" in ln).split("=")[0].strip()
        assert (f"out={grad_var})" in line) == over, lowered.source
        assert ("__restrict__" not in lowered.kernels[0].split("{")[0]) == over
        for _ in range(2):      # (the second call reuses the buffers)
            np.testing.assert_array_equal(np.asarray(jf(p, a, b)),
                                          np.asarray(f(*map(fnp.asarray, (p, a, b)))))
