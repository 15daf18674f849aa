"""jit: caching per signature, static and donated arguments, pytrees, the
generated code, buffer freeing, and errors."""
import re
import tracemalloc
import warnings

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import DeletedArrayError


def test_jit_matches_eager_and_traces_once_per_signature():
    calls = []

    def f(x, y):
        calls.append(1)
        return fnp.sin(x) * y + 1

    g = fnx.jit(f)
    x, y = fnp.arange(4.0), fnp.ones(4)
    np.testing.assert_allclose(g(x, y), f(x, y), rtol=1e-6)
    calls.clear()
    for _ in range(3):
        g(x, y)
        g(x + 1, y * 2)  # same shapes and dtypes: no retrace
    assert calls == [] and g.trace_count == 1
    g(fnp.arange(5.0), fnp.ones(5))  # new shape: retrace
    g(fnp.arange(4), fnp.ones(4))  # new dtype: retrace
    with fnx.enable_x64():  # float64 exists under x64 (a new signature, and a new context)
        g(x.astype("float64"), y)
    assert g.trace_count == 4 and g._cache_size() == 4


def test_trace_under_a_transformation_is_cached():
    # as JAX (its test_grad_of_jit): grad/vmap of a jitted function trace it once per
    # signature, not once per call; a trace closing over an outer tracer is not kept
    calls = []

    @fnx.jit
    def f(x):
        calls.append(None)
        return x * x

    assert fnx.grad(f)(1.0) == 2.0 and fnx.grad(f)(2.0) == 4.0
    assert len(calls) == 1
    fnx.vmap(f)(fnp.ones(3))
    fnx.vmap(f)(fnp.arange(3.0))
    assert len(calls) == 2
    f.clear_cache()
    fnx.grad(f)(3.0)
    assert len(calls) == 3

    box = []
    h = fnx.jit(lambda x: x * box[0] ** 2)

    def outer(y):
        box[:] = [y]  # h closes over a tracer: its trace is not kept
        return h(2.0)
    assert fnx.grad(outer)(3.0) == 12.0 and fnx.grad(outer)(5.0) == 20.0
    # a trace under a named axis reads its size: not reused at another size (JAX's
    # test_caches_depend_on_axis_env)
    k = fnx.jit(lambda: fnx.lax.axis_size("i"))
    assert fnx.vmap(k, axis_name="i", axis_size=2, out_axes=None)() == 2
    assert fnx.vmap(k, axis_name="i", axis_size=3, out_axes=None)() == 3


def test_weak_type_is_part_of_the_signature():
    g = fnx.jit(lambda x: x * 2)
    assert g(2.0).dtype == np.float32 and g(2.0).weak_type
    assert not g(fnp.float32(2.0)).weak_type
    assert g.trace_count == 2


def test_static_argnums_and_argnames():
    g = fnx.jit(lambda x, n, *, mode: x * n if mode == "mul" else x + n,
                static_argnums=1, static_argnames="mode")
    x = fnp.ones(3)
    np.testing.assert_array_equal(g(x, 3, mode="mul"), [3, 3, 3])
    np.testing.assert_array_equal(g(x, 3, mode="add"), [4, 4, 4])
    np.testing.assert_array_equal(g(x, 3, mode="mul"), [3, 3, 3])
    assert g.trace_count == 2
    with pytest.raises(TypeError, match="hashable"):
        g(x, [1], mode="mul")


def test_decorator_forms():
    from functools import partial

    @partial(fnx.jit, static_argnums=(1,))
    def f(x, n):
        return x ** n

    @fnx.jit
    def h(x):
        return x - 1

    np.testing.assert_array_equal(f(fnp.full(2, 2.0), 3), [8.0, 8.0])
    np.testing.assert_array_equal(h(fnp.ones(2)), [0.0, 0.0])
    assert h.__name__ == "h" and h.__wrapped__.__name__ == "h"


def test_pytree_inputs_and_outputs():
    @fnx.jit
    def step(params, batch, lr=0.1):
        loss = ((batch["x"] @ params["w"] + params["b"]) ** 2).mean()
        return {"loss": loss, "w": params["w"] * (1 - lr)}, (loss, None)

    params = {"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}
    out, (loss, none) = step(params, {"x": fnp.ones((4, 3))})
    assert none is None and set(out) == {"loss", "w"}
    np.testing.assert_allclose(out["loss"], 9.0)
    np.testing.assert_allclose(out["w"], 0.9 * np.ones((3, 2)))
    step(params, {"x": fnp.ones((4, 3))}, lr=0.5)
    assert step.trace_count == 2  # a keyword argument is a traced leaf: new signature


def test_numpy_and_python_inputs():
    g = fnx.jit(lambda x, s: x * s)
    with fnx.enable_x64():
        out = g(np.arange(3, dtype=np.float64), 2)
    assert out.dtype == np.float64 and isinstance(out, fnx.Array)
    np.testing.assert_array_equal(out, [0, 2, 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-time narrowing warning (see test_x64)
        out = g(np.arange(3, dtype=np.float64), 2)
    assert out.dtype == np.float32  # x64 off: a NumPy float64 argument narrows (as JAX)
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_nested_jit_and_jit_of_constants():
    inner = fnx.jit(lambda x: x * 2)
    outer = fnx.jit(lambda x: inner(x) + inner(x + 1))
    np.testing.assert_array_equal(outer(fnp.ones(2)), [6.0, 6.0])
    c = fnp.arange(3.0)
    with_const = fnx.jit(lambda x: x + c)
    np.testing.assert_array_equal(with_const(fnp.ones(3)), [1.0, 2.0, 3.0])
    nothing_in = fnx.jit(lambda: fnp.eye(2) * 3)
    np.testing.assert_array_equal(nothing_in(), 3 * np.eye(2))


def test_dead_code_is_not_run():
    ran = []

    def spy(x):
        ran.append(1)
        return x

    from fnx.core.primitive import Primitive, ShapeDtypeStruct
    spy_p = Primitive("test_spy_for_dce", shape_rule=lambda x: ShapeDtypeStruct(
        x.shape, x.dtype, x.weak_type), impl=spy)
    try:
        g = fnx.jit(lambda x: (spy_p.bind(x), x + 1)[1])
        g(fnp.ones(2))
        assert ran == []
        assert "test_spy_for_dce" not in g.lower(fnp.ones(2)).source
    finally:
        from fnx.core.primitive import REGISTRY
        del REGISTRY["test_spy_for_dce"]


def test_lower_shows_ir_and_generated_code():
    g = fnx.jit(lambda x: fnp.exp(x) * 2)
    low = g.lower(fnp.ones(3))
    assert "exp" in low.as_text() and "mul" in str(low)
    assert "def _fnx_" in low.source and "del " in low.source
    compiled = low.compile()
    np.testing.assert_allclose(compiled(fnp.zeros(3)), [2.0, 2.0, 2.0])
    with pytest.raises(TypeError, match="compiled for f32\\[3\\]"):
        compiled(fnp.zeros(4))
    with pytest.raises(TypeError, match="structured as"):
        compiled((fnp.zeros(3),))


def test_intermediate_buffers_are_freed_after_last_use():
    n = 1_000_000  # 4 MB per float32 buffer (x64 off: the float64 request narrows)

    def chain(x):
        for _ in range(12):
            x = fnp.sin(x) + 1.0
        return x

    g = fnx.jit(chain)
    x = fnp.ones(n, dtype="float64")
    g(x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        g(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 24 intermediates were made; at most a few live at once.
    assert peak < 4 * x.dtype.itemsize * n, f"peak {peak / 1e6:.0f} MB"


def test_donated_arguments_are_invalidated():
    g = fnx.jit(lambda p, x: (p + x, p * 2), donate_argnums=0)
    p = fnp.ones(3)
    new, _ = g(p, fnp.ones(3))
    np.testing.assert_array_equal(new, [2.0, 2.0, 2.0])
    assert p.is_deleted()
    with pytest.raises(DeletedArrayError, match="donated"):
        p + 1
    with pytest.raises(DeletedArrayError):
        g(p, fnp.ones(3))
    with pytest.raises(ValueError, match="static and donated"):
        fnx.jit(lambda a: a, static_argnums=0, donate_argnums=0)


def test_jit_of_methods_with_static_self():
    from functools import partial

    class Model:
        scale = 3.0

        @partial(fnx.jit, static_argnums=0)
        def apply(self, x):
            return x * self.scale

    np.testing.assert_array_equal(Model().apply(fnp.ones(2)), [3.0, 3.0])


def test_outputs_keep_their_weak_types_and_dtypes():
    g = fnx.jit(lambda x: (x, x.astype("int8"), x > 0, 3.0))
    a, b, c, d = g(fnp.ones(2))
    assert a.dtype == np.float32 and b.dtype == np.int8 and c.dtype == np.bool_
    assert d.dtype == np.float32 and d.weak_type


def test_non_array_output_is_a_clear_error():
    with pytest.raises(TypeError, match="str"):
        fnx.jit(lambda x: "hello")(fnp.ones(1))


# --- lowering passes: in-place buffers, unbroadcast operands, folding, max/min weights ---

def _bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape)
    assert a.tobytes() == b.tobytes()


def test_dead_intermediates_are_overwritten_in_place_never_inputs():
    def f(x, w, b):
        h = x @ w + b          # the add writes into the matmul's result
        return 2.0 * fnp.exp(h) - x.sum()

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3, 5), (5,))]
    keep = [a.copy() for a in args]
    arrs = [fnp.asarray(a) for a in args]
    jf = fnx.jit(f)
    src = jf.lower(*arrs).source
    assert "out=" in src, src
    for line in src.splitlines():   # never into an argument of the function
        if "out=" in line:
            assert line.split("out=")[1].rstrip(")") not in ("v0", "v1", "v2"), line
    got = jf(*arrs)
    _bits(got, f(*arrs))
    for a, k in zip(arrs, keep):
        _bits(a, k)           # inputs unchanged
    _bits(jf(*arrs), got)     # and a second call gives the same


def test_buffer_seen_through_a_view_is_not_overwritten():
    def f(x):
        y = fnp.exp(x)        # fresh buffer ...
        r = y.reshape(6)      # ... read through a view that is an output
        return r, y + 1.0     # the add must not write into y

    x = fnp.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    jf = fnx.jit(f)
    r, z = jf(x)
    er, ez = f(x)
    _bits(r, er)
    _bits(z, ez)


def test_broadcast_operands_and_literal_index_math_are_lowered_away():
    def f(x, b, y):
        return (x + b) * 3.0, fnp.take_along_axis(x, y[:, None], axis=1)

    rng = np.random.default_rng(1)
    x = fnp.asarray(rng.standard_normal((4, 5)).astype(np.float32))
    b = fnp.asarray(rng.standard_normal(5).astype(np.float32))
    y = fnp.asarray(np.array([0, 4, 2, -1], np.int32))
    jf = fnx.jit(f)
    lowered = jf.lower(x, b, y)
    assert "broadcast_in_dim" in lowered.as_text()   # still in the IR ...
    assert "broadcast_in_dim" not in lowered.source  # ... NumPy broadcasts instead
    assert "iota" in lowered.as_text() and "_iota" not in lowered.source  # folded
    for got, want in zip(jf(x, b, y), f(x, b, y)):
        _bits(got, want)


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.x64)])
def test_max_min_weights_fused_keep_half_at_ties_and_relu_zero(dtype):
    x = np.array([[-1.0, 0.0, 2.0, np.nan], [np.inf, -np.inf, 0.5, 0.0]], dtype)
    y = np.array([[0.0, 0.0, 2.0, 1.0], [np.inf, 0.0, 0.25, -0.0]], dtype)
    X, Y = fnp.asarray(x), fnp.asarray(y)
    for op, want_x in ((fnp.maximum, [[0, .5, .5, 0], [.5, 0, 1, .5]]),
                       (fnp.minimum, [[1, .5, .5, 0], [.5, 1, 0, .5]])):
        g = fnx.grad(lambda a, b: op(a, b).sum(), argnums=(0, 1))
        jg = fnx.jit(g)
        assert "tie_weight" in jg.lower(X, Y).source
        gx, gy = jg(X, Y)
        ex, ey = g(X, Y)
        _bits(gx, ex)
        _bits(gy, ey)
        np.testing.assert_array_equal(gx, np.array(want_x, dtype))
    relu = fnx.jit(fnx.grad(lambda a: fnx.nn.relu(a).sum()))
    np.testing.assert_array_equal(relu(fnp.asarray(np.array([-1.0, 0.0, 3.0], dtype))),
                                  np.array([0.0, 0.0, 1.0], dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_max_min_with_a_scalar_read_a_full_constant_and_keep_the_bits(dtype, request):
    """``maximum``/``minimum`` of a mid-sized float32/int32 array and a scalar read the
    scalar as a shared full-size constant (NumPy's SIMD loop), with the same bits as the
    scalar loop: NaN payloads, signed zeros, infinities; float64 gains nothing, keeps
    the scalar."""
    if dtype is np.float64:  # float64 exists under x64
        request.getfixturevalue("x64")
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, size=(64, 200, np.dtype(dtype).itemsize), dtype=np.uint8)
    x = fnp.asarray(raw.view(dtype).reshape(64, 200))
    if np.dtype(dtype).kind == "f":
        x = x.at[0, :4].set(np.array([-0.0, 0.0, np.inf, -np.inf], dtype))

    def f(x):
        return (fnp.maximum(x, dtype(0)), fnp.minimum(dtype(-0.0), x),
                fnp.maximum(x * dtype(3), dtype(0)))
    jf = fnx.jit(f)
    constants = set(re.findall(r"_full\d+", jf.lower(x).source))
    # one per (value bits): both maximums share the zeros; int32's -0 is 0
    assert len(constants) == {np.float32: 2, np.int32: 1, np.float64: 0}[dtype]
    for got, want in zip(jf(x), f(x)):
        _bits(got, want)
    xn = np.asarray(x)
    _bits(jf(x)[0], np.maximum(xn, dtype(0)))
    _bits(jf(x)[1], np.minimum(dtype(-0.0), xn))


def test_weight_gradient_comes_out_in_the_weights_layout():
    """The transpose of ``x @ w`` with respect to ``w`` is ``x.T @ ct`` (no transpose
    of the result: later ops on it run on C-contiguous memory)."""
    def loss(w, x):
        return (x @ w).sum()

    rng = np.random.default_rng(2)
    w = fnp.asarray(rng.standard_normal((3, 5)).astype(np.float32))
    x = fnp.asarray(rng.standard_normal((4, 3)).astype(np.float32))
    jg = fnx.jit(fnx.grad(loss))
    assert "transpose" not in jg.lower(w, x).as_text()
    g = jg(w, x)
    assert np.asarray(g).flags.c_contiguous
    np.testing.assert_allclose(g, np.asarray(x).T @ np.ones((4, 5), np.float32), rtol=1e-6)


def test_float_div_and_square_lower_to_ufuncs_writing_in_place():
    """A float ``div`` lowers to ``true_divide`` (and ``x ** 2`` to ``square``): NumPy
    broadcasts the divisor and the result reuses the dying numerator's buffer; results
    stay bitwise equal to eager and the inputs are untouched."""
    def f(x, y):
        d = x - y
        return d / fnp.sqrt((d ** 2).mean(axis=-1, keepdims=True) + 1e-5) + (x * y) ** 2

    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 9)).astype(np.float32)
    b = rng.standard_normal((6, 9)).astype(np.float32)
    x, y = fnp.asarray(a), fnp.asarray(b)
    src = fnx.jit(f).lower(x, y).source
    assert "_divide" in src and "_square" in src and "broadcast_in_dim" not in src, src
    assert any("_divide" in ln and "out=" in ln for ln in src.splitlines()), src
    np.testing.assert_array_equal(fnx.jit(f)(x, y), f(x, y))
    np.testing.assert_array_equal(np.asarray(x), a)
    np.testing.assert_array_equal(np.asarray(y), b)
    # integer division keeps its own impl (truncation toward zero)
    i = fnp.asarray(np.array([[-7, 7], [5, -5]], np.int32))
    j = fnp.asarray(np.array([[2, 2], [-3, -3]], np.int32))
    np.testing.assert_array_equal(fnx.jit(lambda p, q: fnp.asarray(p) // q)(i, j), i // j)


@pytest.mark.parametrize("shape,axis", [((300, 257), -1), ((5, 4, 3000), (1, 2)),
                                        ((1, 70000), -1), ((0, 4), -1)])
@pytest.mark.parametrize("red", ["sum", "max", "min"])
def test_elementwise_then_reduce_is_fused_without_the_full_intermediate(shape, axis, red):
    """``(d * d).sum(-1)`` is computed a few rows at a time (no full-size ``d * d``),
    bitwise equal to eager (a native loop adds as NumPy's pairwise sum); the inputs are
    never written."""
    def f(x, y):
        d = x - y
        return getattr(d * d, red)(axis=axis), d

    rng = np.random.default_rng(4)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    x, y = fnp.asarray(a), fnp.asarray(b)
    if red != "sum" and a.size == 0:
        return
    src = fnx.jit(f).lower(x, y).source
    # NumPy's fused reduce, or (large enough, with a C++ compiler) a native loop
    assert f"_fused_reduce_{red}" in src or "native_loop" in src, src
    got, want = fnx.jit(f)(x, y), f(x, y)
    for g_, w_ in zip(got, want):
        np.testing.assert_array_equal(g_, w_)
    np.testing.assert_array_equal(np.asarray(x), a)
    np.testing.assert_array_equal(np.asarray(y), b)


def test_fused_reduce_falls_back_for_non_contiguous_operands():
    from fnx.backends.numpy_codegen import _fused_reduce
    rng = np.random.default_rng(5)
    a = np.asfortranarray(rng.standard_normal((40, 33)).astype(np.float32))
    got = _fused_reduce(a, a, ufunc=np.multiply, reducer=np.add, axes=(1,),
                        shape=(40, 33), dtype=np.dtype(np.float32))
    np.testing.assert_array_equal(got, np.add.reduce(a * a, axis=(1,)))


# --- buffers kept between calls ----------------------------------------------------------

def _mlp_like(w, x):
    h = fnp.maximum(x @ w, 0.0)       # the matmul result: scratch; h: an output
    return h, (h * 2.0).sum()


def _mlp_args(seed, n=64):
    rng = np.random.default_rng(seed)
    return (fnp.asarray(rng.standard_normal((n, n)).astype(np.float32)),
            fnp.asarray(rng.standard_normal((n, n)).astype(np.float32)))


def _address(a):
    return np.asarray(a).__array_interface__["data"][0]


def test_outputs_kept_by_the_caller_are_never_reused():
    jf = fnx.jit(_mlp_like)
    assert "_mo[" in jf.lower(*_mlp_args(0)).source and "_ms[" in jf.lower(*_mlp_args(0)).source
    kept = [jf(*_mlp_args(s)) for s in range(6)]  # every output still held
    for s, (h, total) in enumerate(kept):
        want_h, want_total = _mlp_like(*_mlp_args(s))
        _bits(h, want_h)
        _bits(total, want_total)
    assert len({_address(h) for h, _ in kept}) == len(kept)


def test_a_dropped_output_buffer_is_reused_but_not_one_held_through_a_view():
    jf = fnx.jit(_mlp_like)
    args = _mlp_args(1)
    first = _address(jf(*args)[0])     # dropped at once
    assert _address(jf(*args)[0]) == first
    h, _ = jf(*args)
    view = np.asarray(h)[1:]           # a NumPy view keeps the buffer referenced
    del h
    again, _ = jf(*_mlp_args(2))
    assert _address(again) != first
    _bits(view, np.asarray(_mlp_like(*args)[0])[1:])
    _bits(again, _mlp_like(*_mlp_args(2))[0])


def _sgd_step(w, x):
    return w - 0.1 * (x.T @ fnp.tanh(x @ w)), (x @ w).sum()


def _sgd_reference(w, x):
    return w - np.float32(0.1) * (x.T @ np.tanh(x @ w))


@pytest.mark.parametrize("donate", [False, True])
def test_training_loop_reuses_buffers_donated_or_dropped(donate):
    step = fnx.jit(_sgd_step, donate_argnums=0 if donate else ())
    w, x = _mlp_args(3)
    assert ("_dn" in step.lower(w, x).source) == donate
    ref_w = np.asarray(w).copy()
    seen = set()
    for _ in range(6):
        w, _ = step(w, x)
        seen.add(_address(w))
        ref_w = _sgd_reference(ref_w, np.asarray(x))
    np.testing.assert_allclose(np.asarray(w), ref_w, rtol=1e-5, atol=1e-5)
    # donated: the update is written into the old parameters' buffer every step
    assert len(seen) == (1 if donate else 2)


def test_a_donated_buffer_still_referenced_elsewhere_is_not_overwritten():
    step = fnx.jit(_sgd_step, donate_argnums=0)
    w, x = _mlp_args(6)
    held = np.asarray(w)                 # the caller keeps the NumPy array
    before = held.copy()
    new, _ = step(w, x)
    _bits(held, before)
    assert _address(new) != _address(held)
    np.testing.assert_allclose(np.asarray(new), _sgd_reference(before, np.asarray(x)),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(DeletedArrayError):
        w + 1


def test_a_donated_input_returned_through_a_view_is_not_overwritten():
    step = fnx.jit(lambda w, x: (w - 0.1 * (x @ w), w.T), donate_argnums=0)
    w, x = _mlp_args(7)
    before = np.asarray(w).copy()
    new, w_t = step(w, x)
    _bits(w_t, before.T)
    np.testing.assert_allclose(np.asarray(new), before - np.float32(0.1) * (np.asarray(x) @ before),
                               rtol=1e-5, atol=1e-5)


def test_concurrent_calls_from_threads_get_their_own_buffers():
    import threading
    jf = fnx.jit(_mlp_like)
    jf(*_mlp_args(0))
    wants = {s: _mlp_like(*_mlp_args(s)) for s in range(4)}
    errors = []

    def work(s):
        args = _mlp_args(s)
        for _ in range(30):
            h, total = jf(*args)
            if (np.asarray(h).tobytes() != np.asarray(wants[s][0]).tobytes()
                    or float(total) != float(wants[s][1])):
                errors.append(s)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_call_that_raises_releases_its_buffers():
    from fnx.core.primitive import Primitive

    def impl(x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x.copy()
    check = Primitive("test_jit_check_nonneg", shape_rule=lambda x: x, impl=impl)
    jf = fnx.jit(lambda w, x: check.bind(fnp.exp(x @ w) - 1.0) * 2.0)
    w, x = _mlp_args(4)
    good = fnx.jit(lambda w, x: w)(w, x)
    with pytest.raises(ValueError, match="negative input"):
        jf(w, -fnp.abs(x) - 10.0)  # exp(...) - 1 < 0
    pool = jf.lower(w, x).compile().compiled.fn.__globals__["_pool"]
    assert not pool.lock.locked()
    _bits(jf(fnp.abs(w), fnp.abs(x)), 2.0 * (fnp.exp(fnp.abs(x) @ fnp.abs(w)) - 1.0))
    del good


def test_scratch_over_budget_falls_back_to_fresh_buffers(monkeypatch):
    from fnx.backends import buffers
    monkeypatch.setattr(buffers, "ARENA_MAX_BYTES", 0)
    jf = fnx.jit(lambda *a: _mlp_like(*a))  # a new function: jit's traces are per function
    args = _mlp_args(5)
    src = jf.lower(*args).source
    assert "_ms[" not in src and "_mo[" in src
    for got, want in zip(jf(*args), _mlp_like(*args)):
        _bits(got, want)


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.x64)])
def test_cotangent_scaled_by_max_weights_without_storing_them(dtype):
    """``ct * weight`` of a max/min becomes one helper on ``ct`` (no float weights kept
    from the forward pass): bitwise equal to eager, ties (1/2), NaN and inf included."""
    a = np.array([[-1.0, 0.0, 2.0, np.nan], [np.inf, -np.inf, 0.5, 0.0]] * 40, dtype)
    c = np.array([[3.0, -2.0, np.inf, 1.0], [0.5, 4.0, -1.0, np.nan]] * 40, dtype)
    A, C = fnp.asarray(a), fnp.asarray(c)
    for op in (fnp.maximum, fnp.minimum):
        g = fnx.grad(lambda x, w: (op(x, 0.0) * w).sum())
        jg = fnx.jit(g)
        assert "scale_by_tie_weight" in jg.lower(A, C).source
        _bits(jg(A, C), g(A, C))
        no_ties = fnp.asarray(np.where(a == 0, 1.0, a).astype(dtype))
        _bits(jg(no_ties, C), g(no_ties, C))


def test_product_of_two_tie_weights_clips_derivative():
    """clip = min(max(x, lo), hi): its derivative is the product of two tie weights, which
    the tie-weight pass must not both fold into the one product (the second fold dropped
    the first weight's equation: KeyError in the generated code; found by JAX idioms)."""
    a = fnp.asarray(np.array([-2, -1, 0, 1, 2, 0.5] * 30, np.float32))
    for f in (lambda x: fnp.clip(x, -1.0, 1.0).sum(),
              lambda x: fnp.minimum(fnp.maximum(x, -1.0), 1.0).sum()):
        g = fnx.grad(f)
        _bits(fnx.jit(g)(a), g(a))
        assert np.asarray(g(a))[:6].tolist() == [0, 0.5, 1, 0.5, 0, 1]   # JAX's, ties 1/2


def test_pytree_arguments_take_the_fast_path_and_still_check_everything():
    f = fnx.jit(lambda p, x: {k: v * x for k, v in p.items()}, donate_argnums=0)
    p = {"a": fnp.ones(3), "b": fnp.arange(3.0)}
    out = f(p, fnp.asarray(2.0))
    np.testing.assert_array_equal(out["b"], [0.0, 2.0, 4.0])
    out = f(out, fnp.asarray(0.5))                       # same structure: no retrace
    np.testing.assert_array_equal(out["b"], [0.0, 1.0, 2.0])
    assert f.trace_count == 1 and f._fast_trees
    with pytest.raises(DeletedArrayError):                # donated above
        f(p, fnp.asarray(1.0))
    f({"a": fnp.ones(3), "c": fnp.ones(3)}, fnp.asarray(1.0))  # new keys: retrace
    f({"a": fnp.ones(3), "b": fnp.ones(4)}, fnp.asarray(1.0))  # new shape: retrace
    f({"a": fnp.ones(3), "b": fnp.ones(3, dtype="int32")}, fnp.asarray(1.0))  # new dtype
    assert f.trace_count == 4


# --- elementwise chains over large arrays: one blocked loop -----------------------------

def _special_values(a):
    a = a.copy()
    a.flat[:7] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -3e38]
    return a


@pytest.mark.parametrize("shape", [(1000, 1100), (2_100_000,), (3, 700_001)])
@pytest.mark.usefixtures("numpy_lowering")
def test_large_elementwise_chains_run_blocked_and_bitwise_equal_to_eager(shape):
    rng = np.random.default_rng(7)
    a = _special_values(rng.standard_normal(shape).astype(np.float32))
    b = rng.standard_normal(shape).astype(np.float32)
    row = rng.standard_normal(shape[-1]).astype(np.float32)

    def f(x, y, r):
        g = 0.5 * x * (1.0 + fnp.tanh(0.79788456 * (x + 0.044715 * x * x * x)))
        h = fnp.exp(-fnp.abs(y)) / (1.0 + y * y) - r     # r broadcasts along the rows
        return g * h + fnp.sqrt(fnp.abs(x)), (x * 2.0 > y)  # a bool-valued chain too

    args = [fnp.asarray(v) for v in (a, b, row)]
    jf = fnx.jit(f)
    assert "_fused_elementwise" in jf.lower(*args).source
    for got, want in zip(jf(*args), f(*args)):
        _bits(got, want)
    _bits(args[0], a)   # inputs untouched


@pytest.mark.usefixtures("numpy_lowering")
def test_blocked_chain_may_write_into_a_dying_operand_and_small_chains_are_not_blocked():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2048, 1024)).astype(np.float32)

    def f(x):
        d = x - x.mean(axis=1, keepdims=True)     # dies in the chain below
        return (d * 3.0 + 1.0) * d

    x = fnp.asarray(a)
    src = fnx.jit(f).lower(x).source
    line = [ln for ln in src.splitlines() if "_fused_elementwise" in ln][0]
    assert "out=" in line
    _bits(fnx.jit(f)(x), f(x))
    small = fnp.asarray(a[:16])
    assert "_fused_elementwise" not in fnx.jit(f).lower(small).source
    _bits(fnx.jit(f)(small), f(small))


@pytest.mark.usefixtures("numpy_lowering")
def test_blocked_chain_never_writes_a_donated_buffer_it_reads_through_a_view():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    step = fnx.jit(lambda w, g: (w - 0.1 * g) * 2.0 + w.T, donate_argnums=0)
    want = (a - np.float32(0.1) * b) * np.float32(2.0) + a.T
    src = step.lower(fnp.asarray(a), fnp.asarray(b)).source
    assert "_fused_elementwise" in src
    _bits(step(fnp.asarray(a.copy()), fnp.asarray(b)), want)
    plain = fnx.jit(lambda w, g: (w - 0.1 * g) * 2.0, donate_argnums=0)  # no view: in place
    w = fnp.asarray(a.copy())
    address = _address(w)
    out = plain(w, fnp.asarray(b))
    assert _address(out) == address
    _bits(out, (a - np.float32(0.1) * b) * np.float32(2.0))


def test_array_methods_are_not_shadowed_by_tracer_fields():
    """A tracer's own fields must not hide Array's methods: IRTracer's field was named
    ``var``, so ``x.var(-1)`` (layernorm's variance) failed under jit."""
    import fnx.core.array as A

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)
    methods = set(dir(A.Array))
    for cls in subclasses(A.Tracer):
        assert not set(getattr(cls, "__slots__", ())) & methods, cls
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    f = fnx.jit(lambda a: (a.var(-1, keepdims=True), a.std(0), a.mean(), a.ptp(1)))
    got = f(x)
    want = (x.var(-1, keepdims=True), x.std(0), x.mean(), np.ptp(x, 1))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)
