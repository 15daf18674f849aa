"""jit behaving as JAX's: static arguments by position or name, the cache belonging to
the function (and keyed on the config's trace context), ``disable_jit``, and the
compile-logging and checking flags. Traces are counted with a side effect in the
traced function."""
import functools
import logging

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import IRCheckError


@pytest.fixture(autouse=True)
def _numpy_lowering(numpy_lowering):
    """the NumPy lowering's parity with eager (native loops: tests/test_native_loops.py)"""


def _counted():
    calls = []

    def f(a, x):
        calls.append(a)
        return x * a
    return f, calls


# --- static arguments: argnums and argnames imply each other ---------------------------

def test_static_argname_passed_positionally_is_static():
    f, calls = _counted()
    g = fnx.jit(f, static_argnames="a")
    x = fnp.ones(3)
    np.testing.assert_array_equal(g(2, x), [2, 2, 2])   # a Python int passed by position
    np.testing.assert_array_equal(g(3, x), [3, 3, 3])   # new static value: retrace
    g(3, x)
    assert calls == [2, 3]                              # static: concrete in the trace
    assert g.static_argnums == (0,) and "a" in g.static_argnames


def test_static_argnum_passed_by_keyword_is_static():
    f, calls = _counted()
    g = fnx.jit(f, static_argnums=0)
    x = fnp.ones(3)
    out = g(a=4, x=x)
    np.testing.assert_array_equal(out, [4, 4, 4])
    assert calls == [4]        # concrete: a traced value would be an fnx tracer
    g(a=4, x=x)
    assert len(calls) == 1
    assert g.static_argnames == ("a",)


def test_static_argument_used_in_python_control_flow():
    def f(x, n, mode="add"):
        for _ in range(n):                  # needs a concrete n
            x = x + 1 if mode == "add" else x * 2
        return x
    g = fnx.jit(f, static_argnames=("n", "mode"))
    np.testing.assert_array_equal(g(fnp.zeros(2), 3), [3, 3])
    np.testing.assert_array_equal(g(fnp.ones(2), 2, "mul"), [4, 4])
    np.testing.assert_array_equal(g(fnp.ones(2), n=2, mode="mul"), [4, 4])


def test_negative_static_argnums():
    f, calls = _counted()
    g = fnx.jit(f, static_argnums=-2)
    np.testing.assert_array_equal(g(5, fnp.ones(2)), [5, 5])
    assert calls == [5] and g.static_argnums == (0,)


def test_keyword_only_static_argname():
    def f(x, *, k):
        return x * k
    g = fnx.jit(f, static_argnames="k")
    np.testing.assert_array_equal(g(fnp.ones(2), k=3), [3, 3])


def test_unhashable_static_argument_is_a_value_error_naming_it():
    f, _ = _counted()
    g = fnx.jit(f, static_argnames="a")
    with pytest.raises(ValueError, match=r"static argument 0 \('a'\) must be hashable.*list"
                       r".*tuple instead of a list"):
        g([1, 2], fnp.ones(2))
    with pytest.raises(ValueError, match="'a'.*must be hashable"):
        g(a=[1], x=fnp.ones(2))
    with pytest.raises(TypeError):   # also a TypeError, as fnx raised before
        g({"k": 1}, fnp.ones(2))


def test_invalid_static_arguments_are_refused_when_jitting():
    f, _ = _counted()
    with pytest.raises(ValueError, match="only accepts 2 positional arguments"):
        fnx.jit(f, static_argnums=5)
    with pytest.raises(ValueError, match=r"invalid static_argnames \['zz'\]"):
        fnx.jit(f, static_argnames="zz")
    with pytest.raises(ValueError, match="both static and donated"):
        fnx.jit(f, static_argnums=1, donate_argnames="x")

    def g(*args, **kwargs):   # *args / **kwargs: anything goes
        return args[0]
    fnx.jit(g, static_argnums=3, static_argnames="anything")


def test_donate_argnums_covers_a_keyword_argument():
    g = fnx.jit(lambda x, y: x + y, donate_argnums=0)
    x = fnp.ones(3)
    np.testing.assert_array_equal(g(x=x, y=fnp.ones(3)), [2, 2, 2])
    assert x.is_deleted()


def test_sharding_and_device_options():
    f, _ = _counted()
    fnx.jit(f, static_argnums=0, keep_unused=True, inline=True, device=None)
    with pytest.raises(ValueError, match="runs whole on its arguments. device"):
        fnx.jit(f, in_shardings=object())
    with pytest.raises(ValueError, match="CPU"):
        fnx.jit(f, backend="gpu")


# --- the cache belongs to the function -----------------------------------------------

def test_jit_in_a_loop_traces_once():
    f, calls = _counted()
    x = fnp.ones(3)
    for _ in range(4):
        fnx.jit(f, static_argnums=0)(2, x)
    assert len(calls) == 1
    for _ in range(3):                      # the same options however spelt
        fnx.jit(f, static_argnames="a")(2, x)
    assert len(calls) == 1
    fnx.jit(f)(2.0, x)                      # other options: their own traces
    assert len(calls) == 2


def test_decorated_and_undecorated_share_nothing_unexpected():
    f, calls = _counted()
    a, b = fnx.jit(f), fnx.jit(f)
    a(1.0, fnp.ones(2))
    b(1.0, fnp.ones(2))
    assert len(calls) == 1 and a._cache_size() == b._cache_size() == 1
    b.clear_cache()
    assert a._cache_size() == 0
    a(1.0, fnp.ones(2))
    assert len(calls) == 2


def test_new_lambdas_and_partials_are_new_functions():
    # As in JAX: a partial object or lambda is keyed by identity.
    f, calls = _counted()
    x = fnp.ones(2)
    for _ in range(3):
        fnx.jit(functools.partial(f, 2.0))(x)
    assert len(calls) == 3
    p = functools.partial(f, 2.0)
    for _ in range(3):
        fnx.jit(p)(x)
    assert len(calls) == 4


def test_bound_methods_as_in_jax():
    calls = []

    class M:
        def apply(self, x):
            calls.append(1)
            return x * 2
    m = M()
    x = fnp.ones(2)
    for _ in range(3):
        fnx.jit(m.apply)(x)   # a new bound method object each time, as in JAX: retraced
    assert len(calls) == 3
    g = fnx.jit(m.apply)
    for _ in range(3):
        g(x)
    assert len(calls) == 4


def test_cache_is_held_weakly():
    import gc
    import weakref
    from fnx.transforms import jit as jit_mod

    def make():
        def f(x):
            return x + 1
        return f
    f = make()
    fnx.jit(f)(fnp.ones(2))
    ref = weakref.ref(f)
    assert f in jit_mod._FUN_CACHES
    del f
    gc.collect()
    assert ref() is None


def test_trace_context_is_part_of_the_key():
    f, calls = _counted()
    g = fnx.jit(f)
    x = fnp.ones(2)
    g(1.0, x)
    with fnx.numpy_rank_promotion("raise"):
        g(1.0, x)        # a trace-context flag changed: retrace
        g(1.0, x)
    g(1.0, x)            # back: the first trace again, through the fast path too
    assert len(calls) == 2 and g._cache_size() == 2


def test_clear_caches():
    f, calls = _counted()
    g = fnx.jit(f)
    g(1.0, fnp.ones(2))
    fnx.clear_caches()
    assert g._cache_size() == 0
    g(1.0, fnp.ones(2))
    fnx.jit(f)(1.0, fnp.ones(2))
    assert len(calls) == 2


def test_unhashable_callable_gets_its_own_cache():
    calls = []

    class F:
        __hash__ = None

        def __call__(self, x):
            calls.append(1)
            return x - 1
    g = fnx.jit(F())
    g(fnp.ones(2))
    g(fnp.ones(2))
    assert len(calls) == 1


# --- disable_jit ---------------------------------------------------------------------

def test_disable_jit_runs_python_eagerly():
    seen = []

    @fnx.jit
    def f(x):
        seen.append(type(x).__name__)
        if x.sum() > 0:                 # Python control flow on values
            return x * 2
        return x - 1
    x = fnp.ones(3)
    with fnx.disable_jit():
        np.testing.assert_array_equal(f(x), [2, 2, 2])
        np.testing.assert_array_equal(f(-x), [-2, -2, -2])
        f(x)
    assert seen == ["Array"] * 3        # concrete values, every call runs the body
    with pytest.raises(fnx.errors.ConcretizationError):
        f(x)                            # jit again: the value is traced
    fnx.config.update("jax_disable_jit", True)
    try:
        np.testing.assert_array_equal(f(x), [2, 2, 2])
    finally:
        fnx.config.update("jax_disable_jit", False)


def test_disable_jit_inside_grad_and_with_static_args():
    g = fnx.jit(lambda x, n: (x ** n).sum(), static_argnums=1)
    with fnx.disable_jit():
        np.testing.assert_allclose(fnx.grad(g)(fnp.ones(2) * 3, 2), [6.0, 6.0])
    assert g.trace_count == 0


# --- logging and checking flags -------------------------------------------------------

def test_log_compiles(caplog):
    g = fnx.jit(lambda x, n: x * n, static_argnums=1)
    with caplog.at_level(logging.DEBUG, logger="fnx"):
        with fnx.log_compiles():
            g(fnp.ones(3), 2)
            g(fnp.ones(3), 2)          # cached: nothing logged
        g(fnp.ones(4), 2)              # flag off: nothing logged
    msgs = [r.getMessage() for r in caplog.records if r.name == "fnx"]
    assert len([m for m in msgs if m.startswith("Compiling")]) == 1
    assert any("Compiling <lambda> with arguments (f32[3]) and static arguments #1=2" in m
               for m in msgs)
    assert any(m.startswith("Finished tracing <lambda>") for m in msgs)


def test_explain_cache_misses(caplog):
    def step(params, x, n):
        return params["w"] * x * n
    g = fnx.jit(step, static_argnames="n")
    p = {"w": fnp.ones(3)}
    with caplog.at_level(logging.WARNING, logger="fnx"):
        fnx.config.update("jax_explain_cache_misses", True)
        try:
            g(p, fnp.ones(3), 2)
            g(p, fnp.ones(3), 3)
            g({"w": fnp.ones(3, dtype="int32")}, fnp.ones(3), 3)
            with fnx.numpy_rank_promotion("warn"):
                g({"w": fnp.ones(3, dtype="int32")}, fnp.ones(3), 3)
        finally:
            fnx.config.update("jax_explain_cache_misses", False)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "fnx")
    assert "never seen function" in text
    assert "static argument 2 ('n') changed from 2 to 3" in text
    assert "argument 0 ('params')['w'] changed from float32[3] to int32[3]" in text
    assert "config jax_numpy_rank_promotion changed from 'allow' to 'warn'" in text


def test_enable_checks_runs_the_checker_after_each_pass(monkeypatch):
    from fnx.core import tracing

    def broken_cse(ir):   # a pass that loses an equation the outputs need
        return ir.replace(eqns=ir.eqns[1:])
    broken_cse.__name__ = "cse"
    monkeypatch.setattr(tracing, "cse", broken_cse)
    g = fnx.jit(lambda x: fnp.sin(x) * 2)
    with fnx.enable_checks():
        with pytest.raises(IRCheckError, match="inconsistent after cse"):
            g(fnp.ones(2))
    monkeypatch.undo()
    with fnx.enable_checks():
        np.testing.assert_allclose(g(fnp.ones(2)), 2 * np.sin(np.ones(2)), rtol=1e-6)


# --- jit is bitwise eager: activations and selects in blocked loops ---------------------

def _special(shape, dtype, seed=0):
    a = (np.random.default_rng(seed).standard_normal(shape) * 4).astype(dtype)
    flat = a.reshape(-1)
    if dtype.kind in "fc":
        flat[:8] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, -1e30, 90.0]
    return fnp.asarray(a)


def _bitwise(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert got.tobytes() == want.tobytes(), f"{what}: jit differs from eager"


@pytest.mark.parametrize("name", ["selu", "elu", "celu", "relu", "relu6", "hard_tanh",
                                  "leaky_relu", "silu", "gelu", "softplus"])
@pytest.mark.parametrize("shape", [(1 << 20,), (128, 512), (1030, 1031)])
def test_activations_jit_bitwise_equal_eager(name, shape):
    f = getattr(fnx.nn, name)
    x = _special(shape, np.dtype(np.float32))
    g = fnx.jit(f)
    _bitwise(g(x), f(x), f"{name} {shape}")
    _bitwise(g(x), f(x), f"{name} {shape}, second call")


def test_selu_over_a_large_array_is_one_blocked_loop():
    x = _special((1 << 20,), np.dtype(np.float32))
    lowered = fnx.jit(fnx.nn.selu).lower(x)
    src = lowered.source
    assert "fused_elementwise" in src and "select_n" not in src and "greater" not in src
    fused = [v for v in lowered.compile().compiled.fn.__globals__.values()
             if hasattr(v, "source")]
    # the mask is made once per block and shared by both selects; no np.where
    assert len(fused) == 1 and fused[0].source.count("dtype=") == 1


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "bool",
                                   "complex64"])
def test_selects_in_blocked_loops_bitwise(dtype):
    dt = np.dtype(dtype)
    with fnx.enable_x64(dt.itemsize == 8 and dt.kind == "f"):
        _check_selects(dt)


def _check_selects(dt):
    dtype = dt.name
    shape = ((1 << 22) // dt.itemsize // 1024, 1024)   # 4 MB: a blocked loop
    x, y = _special(shape, dt, 1), _special(shape, dt, 2)
    assert x.dtype == dt
    m = _special(shape, np.dtype(np.float32), 3) > 0
    zero = fnp.zeros((), dt)

    def shared_mask(x, y, m):
        a = fnp.where(m, zero, x)           # a case of zero bits
        b = fnp.where(m, x, zero)
        c = fnp.where(m, a, y)              # the general blend
        d = fnp.where(m, y, b)
        return fnp.where(m, c, d)

    def mask_escapes(x, y):
        k = (x != y)
        return fnp.where(k, x, y), k

    def negzero(x):
        return fnp.where(x != x, x, fnp.asarray(-0.0).astype(dt) if dt.kind in "fc" else x)

    assert "fused_elementwise" in fnx.jit(shared_mask).lower(x, y, m).source
    for f, args in [(shared_mask, (x, y, m)), (mask_escapes, (x, y)), (negzero, (x,))]:
        out, want = fnx.jit(f)(*args), f(*args)
        for o, w in zip(fnx.tree_util.tree_leaves(out), fnx.tree_util.tree_leaves(want)):
            _bitwise(o, w, f"{f.__name__} {dtype}")


def test_float_chain_with_selects_is_bitwise_eager():
    # relu and clip-like chains with scalar broadcasts, a NaN-producing op and -0.0
    def f(x, y):
        r = fnp.maximum(x, 0.0) * y
        s = fnp.where(x > y, fnp.log(fnp.abs(x)), -0.0)
        return fnp.where(r > 1.0, s + r, s * 2.0) - 1.0
    x = _special((1024, 1024), np.dtype(np.float32), 4)
    y = _special((1024, 1024), np.dtype(np.float32), 5)
    _bitwise(fnx.jit(f)(x, y), f(x, y), "chain")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_logistic_lowering_bitwise(dtype):
    dt = np.dtype(dtype)
    with fnx.enable_x64(dt.itemsize == 8):
        x = _special((300, 257), dt, 6)
        assert x.dtype == dt
        for f in (fnx.lax.logistic, lambda x: fnx.lax.logistic(x.T) * 2,
                  lambda x: fnx.nn.sigmoid(x[::2]) + 1):
            _bitwise(fnx.jit(f)(x), f(x), f"logistic {dtype}")
        assert "_logistic" in fnx.jit(fnx.lax.logistic).lower(x).source


@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "complex64"])
@pytest.mark.parametrize("n", [2, 3, 5])
def test_int_selector_select_n_bitwise(dtype, n):
    dt = np.dtype(dtype)
    shape = (97, 131)
    cases = [_special(shape, dt, 10 + k) for k in range(n)]
    which = fnp.asarray(np.random.default_rng(1).integers(-2, n + 2, shape).astype(np.int32))
    f = lambda w, *cs: fnx.lax.select_n(w, *cs) # noqa: E731
    g = fnx.jit(f)
    assert "_select_int" in g.lower(which, *cases).source
    _bitwise(g(which, *cases), f(which, *cases), f"select_n int32 {dtype} {n}")
    want = np.choose(np.clip(np.asarray(which), 0, n - 1), [np.asarray(c) for c in cases])
    _bitwise(g(which, *cases), want, "np.choose")
