"""Small programs in the idioms of JAX's documentation (debugging, tracing, callbacks, ...)
that once failed or differed when ported by changing imports. Expected values are JAX
0.10.2's results for the same programs, or the documented
behaviour where fnx differs on purpose."""
import io

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax


# --- fnx.debug.breakpoint --------------------------------------------------------------------

def _session(commands):
    return io.StringIO(commands), io.StringIO()


def test_breakpoint_under_jit_sees_run_time_values():
    stdin, stdout = _session("p y\npp {'z': z}\ny + 1\nnot_a_name\nc\n")

    @fnx.jit
    def f(x):
        y, z = fnp.sin(x), fnp.cos(x)
        fnx.debug.breakpoint(stdin=stdin, stdout=stdout)
        return y * z

    out = f(2.0)
    np.testing.assert_allclose(out, np.sin(2.0) * np.cos(2.0), rtol=1e-6)
    text = stdout.getvalue()
    assert "Entering jdb" in text
    assert "fnx.debug.breakpoint(stdin=stdin, stdout=stdout)" in text  # the source line
    assert "Array(0.9092974, dtype=float32" in text          # p y: the value, not a tracer
    assert "{'z': Array(-0.4161468, dtype=float32" in text  # pp
    assert "Array(1.9092975, dtype=float32" in text          # an expression line
    assert "*** NameError" in text                           # a typo does not end the session
    assert "Traced" not in text


def test_breakpoint_runs_at_every_call_and_continues_at_end_of_input():
    stdout = io.StringIO()

    @fnx.jit
    def f(x):
        fnx.debug.breakpoint(stdin=io.StringIO(""), stdout=stdout)
        return x + 1

    f(1.0)
    f(2.0)
    assert stdout.getvalue().count("Entering jdb") == 2
    assert stdout.getvalue().count("end of input: continuing") == 2


def test_breakpoint_frames_up_down_where():
    stdin, stdout = _session("u\np k\nd\np w\nw\nc\n")

    def inner(w):
        fnx.debug.breakpoint(stdin=stdin, stdout=stdout)
        return w.sum()

    def outer(v):
        k = 7
        return inner(v * 2) + k

    assert float(outer(fnp.ones(2))) == 11.0
    text = stdout.getvalue()
    assert "outer()" in text and "inner()" in text
    assert "\n(jdb) 7\n" in text
    assert "Array([2., 2.], dtype=float32)" in text


def test_breakpoint_under_vmap_stops_per_element_and_grad_forward_pass():
    stdout = io.StringIO()
    stdin = io.StringIO("p w\nc\np w\nc\n")

    def g(x):
        w = x * 2
        fnx.debug.breakpoint(stdin=stdin, stdout=stdout)
        return w.sum()

    np.testing.assert_array_equal(fnx.vmap(g)(fnp.arange(2.0)), [0.0, 2.0])
    text = stdout.getvalue()
    assert "Array(0., dtype=float32)" in text and "Array(2., dtype=float32)" in text
    stdout2 = io.StringIO()

    def h(x):
        w = x * 3
        fnx.debug.breakpoint(stdin=io.StringIO("p w\n"), stdout=stdout2)
        return w.sum()

    np.testing.assert_array_equal(fnx.grad(h)(fnp.ones(2)), [3.0, 3.0])
    assert stdout2.getvalue().count("Entering jdb") == 1
    assert "Array([3., 3.], dtype=float32)" in stdout2.getvalue()


def test_breakpoint_in_cond_branch_only_when_taken():
    # JAX's debugging guide: break only where a value is not finite.
    stdout = io.StringIO()

    def stop_if_nonfinite(x):
        lax.cond(fnp.isfinite(x).all(), lambda x: None,
                 lambda x: fnx.debug.breakpoint(stdin=io.StringIO("p x\n"), stdout=stdout), x)

    @fnx.jit
    def f(x, y):
        z = x / y
        stop_if_nonfinite(z)
        return z

    f(2.0, 1.0)
    assert stdout.getvalue() == ""
    f(2.0, 0.0)
    assert "Entering jdb" in stdout.getvalue() and "Array(inf, dtype=float32" in stdout.getvalue()


def test_breakpoint_in_scan_body_and_token():
    stdout = io.StringIO()

    def body(c, x):
        fnx.debug.breakpoint(stdin=io.StringIO("p c\n"), stdout=stdout)
        return c + x, c

    c, ys = fnx.jit(lambda xs: lax.scan(body, 0.0, xs))(fnp.arange(3.0))
    assert float(c) == 3.0 and stdout.getvalue().count("Entering jdb") == 3
    tok = fnp.ones(2)
    out = fnx.debug.breakpoint(token=tok, stdin=io.StringIO(""), stdout=io.StringIO())
    assert out is tok
    assert fnx.debug.breakpoint(stdin=io.StringIO(""), stdout=io.StringIO()) is None


def test_breakpoint_quit_exits_and_bad_arguments():
    with pytest.raises(SystemExit):
        fnx.debug.breakpoint(stdin=io.StringIO("q\n"), stdout=io.StringIO())
    with pytest.raises(ValueError, match="mutually exclusive"):
        fnx.debug.breakpoint(token=fnp.ones(1), ordered=True)
    with pytest.raises(ValueError, match="backend"):
        fnx.debug.breakpoint(backend="web")
    with pytest.raises(TypeError, match="unexpected keyword"):
        fnx.debug.breakpoint(stdn=None)


def test_breakpoint_leaked_tracer_in_a_local_is_shown_not_used():
    saved = []

    @fnx.jit
    def leak(x):
        saved.append(x)
        return x

    leak(1.0)
    stdout = io.StringIO()

    def f(x):
        old = saved[0]  # noqa: F841  (a tracer of an ended trace)
        fnx.debug.breakpoint(stdin=io.StringIO("p old\np x\n"), stdout=stdout)
        return x

    fnx.jit(f)(3.0)
    assert "ended trace" in stdout.getvalue()
    assert "Array(3., dtype=float32" in stdout.getvalue()


# --- custom_gradient, closure_convert ---------------------------------------------------------

def test_custom_gradient_docstring_examples():
    @fnx.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * x,)

    assert float(f(3.0)) == 9.0
    assert float(fnx.grad(f)(3.0)) == 3.0                 # JAX: 3.0 (the custom rule)
    assert float(fnx.jit(fnx.grad(f))(3.0)) == 3.0
    np.testing.assert_array_equal(fnx.vmap(fnx.grad(f))(fnp.arange(3.0)), [0.0, 1.0, 2.0])
    assert float(fnx.grad(lambda x: fnx.grad(f)(x))(3.0)) == 1.0   # JAX: 1.0

    @fnx.custom_gradient
    def g(x, y):
        return x * y, lambda ct: (ct * y * 10, ct * x * 100)

    gx, gy = fnx.grad(g, argnums=(0, 1))(2.0, 3.0)
    assert (float(gx), float(gy)) == (30.0, 200.0)        # JAX: (30., 200.)


def test_custom_gradient_closes_over_forward_values_and_pytrees():
    @fnx.custom_gradient
    def softplus(x):
        e = fnp.exp(x)
        return fnp.log1p(e), lambda g: (g * e / (1 + e),)

    np.testing.assert_allclose(fnx.grad(softplus)(2.0), 0.8807971, rtol=1e-6)
    np.testing.assert_allclose(fnx.vmap(fnx.grad(softplus))(fnp.array([0.0, 1.0])),
                               [0.5, 0.7310586], rtol=1e-6)
    np.testing.assert_allclose(fnx.grad(lambda x: fnx.grad(lambda y: softplus(y) * y)(x))(1.0),
                               1.6587291, rtol=1e-6)

    @fnx.custom_gradient
    def clip_grad(x):
        return x, lambda g: (fnp.clip(g, -1.0, 1.0),)

    np.testing.assert_array_equal(fnx.grad(lambda x: 5.0 * clip_grad(x).sum())(fnp.ones(3)),
                                  [1.0, 1.0, 1.0])

    @fnx.custom_gradient
    def p(t):
        return {"a": t[0] * t[1]}, lambda ct: ((ct["a"] * t[1], ct["a"] * t[0]),)

    g0, g1 = fnx.grad(lambda t: p(t)["a"])((2.0, 5.0))
    assert (float(g0), float(g1)) == (5.0, 2.0)

    @fnx.custom_gradient
    def lone(x):  # a one-argument rule may return the cotangent itself (JAX accepts it)
        return x ** 2, lambda g: g * x

    assert float(fnx.grad(lone)(3.0)) == 3.0


def test_custom_gradient_errors():
    @fnx.custom_gradient
    def no_pair(x):
        return x * 2

    with pytest.raises(TypeError, match="pair"):
        no_pair(1.0)

    @fnx.custom_gradient
    def short(x, y):
        return x * y, lambda g: (g,)

    with pytest.raises(TypeError, match="one cotangent per argument"):
        fnx.grad(short)(1.0, 2.0)

    @fnx.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * x,)

    with pytest.raises(TypeError, match="forward mode"):  # JAX: TypeError as well
        fnx.jvp(f, (3.0,), (1.0,))


from functools import partial  # noqa: E402


@partial(fnx.custom_vjp, nondiff_argnums=(0,))
def _call(f, x, *args):
    return f(x, *args)


def _call_fwd(f, x, *args):
    return _call(f, x, *args), (x, args)


def _call_bwd(f, res, g):
    x, args = res
    return fnx.vjp(f, x, *args)[1](g)


_call.defvjp(_call_fwd, _call_bwd)


def _model(w, x):
    scale = fnp.sin(w)
    conv, hoisted = fnx.closure_convert(lambda v: v * scale, x)
    return _call(conv, x, *hoisted)


def test_closure_convert_hoists_traced_values_for_a_custom_vjp():
    gw, gx = fnx.grad(_model, argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose([gw, gx], [1.7551651, 0.47942555], rtol=1e-6)  # JAX's
    np.testing.assert_allclose(fnx.jit(fnx.grad(_model))(0.5, 2.0), 1.7551651, rtol=1e-6)
    np.testing.assert_allclose(fnx.vmap(fnx.grad(_model), in_axes=(0, None))(
        fnp.array([0.5, 1.0]), 2.0), [1.7551651, 1.0806046], rtol=1e-6)


def test_closure_convert_structure_and_what_is_hoisted():
    conv, hoisted = fnx.closure_convert(lambda a, b: (a + b, {"s": a * 2}), 1.0, fnp.ones(2))
    assert hoisted == []                                   # nothing traced is closed over
    out = conv(2.0, fnp.arange(2.0))
    np.testing.assert_array_equal(out[0], [2.0, 3.0])
    assert float(out[1]["s"]) == 4.0
    with pytest.raises(TypeError, match="structure"):
        conv(2.0)
    counts = []

    def outer(x):
        y, k = fnp.sin(x) * 2, fnp.arange(3)  # k: concrete (stays closed over)
        conv, hoisted = fnx.closure_convert(lambda c: c * y + k.sum(), 1.0)
        counts.append(len(hoisted))
        return conv(4.0, *hoisted)

    np.testing.assert_allclose(fnx.grad(outer)(1.0), 8 * np.cos(1.0), rtol=1e-6)
    assert counts == [1]
    int_closed = []

    def with_int(n):
        conv, hoisted = fnx.closure_convert(lambda c: c * n, 1.0)  # an int tracer
        int_closed.append(len(hoisted))
        return conv(2.0, *hoisted)

    assert float(fnx.jit(with_int)(3)) == 6.0
    assert int_closed == [0]


# --- typeof prints as JAX's ShapedArray ---------------------------------------------------------

@pytest.mark.parametrize("x,text,rep", [
    (1.0, "~float32[]", "ShapedArray(float32[], weak_type=True)"),
    (3, "~int32[]", "ShapedArray(int32[], weak_type=True)"),
    (True, "bool[]", "ShapedArray(bool[])"),
    (np.ones(2, "int8"), "int8[2]", "ShapedArray(int8[2])"),
])
def test_typeof_prints_as_jax(x, text, rep):
    t = fnx.typeof(x)
    assert (str(t), repr(t)) == (text, rep)


def test_typeof_of_arrays_and_tracers():
    t = fnx.typeof(fnp.ones((3, 3)))
    assert str(t) == "float32[3,3]" and t.ndim == 2 and t.size == 9 and t.nbytes == 36
    assert t == fnx.ShapeDtypeStruct((3, 3), np.float32)
    assert str(t.update(shape=(2,))) == "float32[2]"
    assert t.str_short() == "f32[3,3]"                 # fnx's short form (JAX's short_dtypes)
    assert "a:f32[3,3]" in str(fnx.make_jaxpr(lambda x: x * 2)(t))   # a placeholder for tracing
    assert str(fnx.typeof(1.0).strip_weak_type()) == "float32[]"
    seen = []
    fnx.vmap(lambda x: seen.append(str(fnx.typeof(x))) or x)(fnp.arange(3))
    assert seen == ["int32[]"]                          # JAX: jax.typeof(x) = int32[]
    out = fnx.eval_shape(lambda x: x * 2, fnx.typeof(fnp.ones(3)))
    assert out.shape == (3,) and out.dtype == np.float32


# --- JAX's flag context managers, float0, copy_to_host_async -----------------------------------

def test_flag_context_managers():
    with fnx.checking_leaks():
        assert fnx.config.jax_check_tracer_leaks
    assert not fnx.config.jax_check_tracer_leaks
    with fnx.default_device(fnx.devices()[0]):
        assert str(fnp.ones(1).device) == "cpu:0"
    with pytest.raises(ValueError, match="jax_default_device"):
        with fnx.default_device("tpu"):
            pass
    assert fnx.config.jax_default_device is None  # nothing half-set
    with fnx.threefry_partitionable(True), fnx.default_prng_impl("threefry2x32"):
        assert fnx.random.PRNGKey(0).shape == (2,)
    with pytest.raises(ValueError):
        with fnx.threefry_partitionable(False):
            pass
    with fnx.explain_cache_misses():
        assert fnx.config.jax_explain_cache_misses
    assert not fnx.config.jax_explain_cache_misses


def test_float0_and_copy_to_host_async():
    assert fnx.float0 == np.dtype([("float0", "V")])
    tree = {"a": fnp.ones(2)}
    assert fnx.copy_to_host_async(tree) is tree
