"""JAX's top-level names in fnx: make_jaxpr, device queries, ensure_compile_time_eval,
named_call/named_scope, typeof, device_get, jacobian, fnx.test_util. Expected texts and
values are JAX 0.10's for the same programs."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.test_util import check_grads, check_jvp, check_vjp


def test_make_jaxpr_prints_in_jax_layout():
    c = fnp.arange(3.0)
    j = fnx.make_jaxpr(lambda x: fnp.sin(x) * c)(fnp.ones(3))
    assert str(j) == ("{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = sin b; "
                      "d:f32[3] = mul c a in (d,) }")
    assert j.pretty_print() == str(j) == str(j.jaxpr)
    assert [e.primitive.name for e in j.eqns] == ["sin", "mul"]
    assert len(j.jaxpr.invars) == 1 and len(j.jaxpr.constvars) == 1
    assert j.in_avals[0].shape == (3,) and j.in_avals[0].dtype == np.float32
    np.testing.assert_array_equal(j.consts[0], [0.0, 1.0, 2.0])
    assert str(fnx.make_jaxpr(lambda x: x)(1.0)) == "{ lambda ; a:f32[]. let  in (a,) }"
    assert str(fnx.make_jaxpr(lambda x: fnp.sin(fnp.sin(x)))(fnp.ones(3))) == \
        "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = sin b in (c,) }"
    # longer than 80 columns: one equation per line
    three = str(fnx.make_jaxpr(lambda x: fnp.sin(fnp.sin(fnp.sin(x))))(fnp.ones(3)))
    assert three == ("{ lambda ; a:f32[3]. let\n    b:f32[3] = sin a\n    c:f32[3] = sin b\n"
                     "    d:f32[3] = sin c\n  in (d,) }")


def test_make_jaxpr_static_argnums_return_shape_kwargs():
    j, shape = fnx.make_jaxpr(lambda x, n: x * n, static_argnums=1, return_shape=True)(
        fnp.ones(3), 2)
    assert str(j) == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }"
    assert shape.shape == (3,) and shape.dtype == np.float32
    assert str(fnx.make_jaxpr(lambda x, y=2.0: x * y)(1.0, y=3.0)).startswith(
        "{ lambda ; a:f32[] b:f32[]. let")
    with pytest.raises(NotImplementedError, match="axis_env"):
        fnx.make_jaxpr(lambda x: x, axis_env=[("i", 2)])


def test_devices():
    d = fnx.devices()[0]
    assert repr(d) == "CpuDevice(id=0)" and str(d) == "cpu:0"
    assert (d.platform, d.id, d.device_kind, d.process_index) == ("cpu", 0, "cpu", 0)
    assert isinstance(d, fnx.Device)
    assert fnx.local_devices() == [d] and fnx.devices("cpu") == [d]
    assert (fnx.device_count(), fnx.local_device_count(), fnx.default_backend(),
            fnx.process_index(), fnx.process_count()) == (1, 1, "cpu", 0, 1)
    x = fnp.ones(3)
    assert x.device == d and x.devices() == {d}
    with pytest.raises(RuntimeError, match="tpu"):
        fnx.devices("tpu")


def test_ensure_compile_time_eval_computes_concrete_values_under_jit():
    seen = []

    def body(x):
        with fnx.ensure_compile_time_eval():
            y = fnp.sin(fnp.float32(1.0))
            seen.append(float(y))            # concrete: float() works under jit
            n = int(fnp.arange(4).sum())     # usable as a static shape
            z = x * 2                        # traced values are still traced
        return z + y + fnp.zeros(n)

    out = fnx.jit(body)(fnp.ones(()))
    np.testing.assert_allclose(out, np.full(6, 2 + np.sin(np.float32(1.0))), rtol=1e-6)
    assert seen == [pytest.approx(np.sin(1.0), rel=1e-6)]
    text = str(fnx.make_ir(body)(fnp.ones(())))
    assert "sin" not in text and "mul" in text   # sin ran at trace time, x * 2 is traced


def test_named_call_scope_typeof_device_get_effects_barrier():
    with fnx.named_scope("block"):
        j = fnx.make_jaxpr(fnx.named_call(lambda x: fnp.sin(x), name="foo"))(1.0)
    assert str(j) == "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }"
    with pytest.raises(TypeError):
        with fnx.named_scope(3):
            pass
    t = fnx.typeof(fnp.ones(3))
    assert t.shape == (3,) and t.dtype == np.float32 and not t.weak_type
    assert fnx.typeof(1.0).weak_type
    g = fnx.device_get({"a": fnp.ones(2), "b": 3})
    assert type(g["a"]) is np.ndarray and g["b"] == 3
    assert fnx.effects_barrier() is None
    assert (fnx.host_count(), fnx.host_id(), fnx.host_ids()) == (1, 0, [0])
    info = fnx.print_environment_info(return_string=True)
    assert info.startswith("fnx:") and "numpy:" in info


def test_jacobian_is_jacrev():
    jac = fnx.jacobian(lambda x: fnp.sin(x) * 2)(fnp.arange(2.0))
    np.testing.assert_allclose(jac, np.diag(2 * np.cos(np.arange(2.0))), rtol=1e-6)
    assert fnx.jacobian is fnx.jacrev


def test_test_util_check_grads_jvp_vjp():
    x = fnp.array([0.3, -1.2, 2.0])
    check_grads(lambda x: fnp.sin(x) * x, (x,), 2)
    check_grads(lambda x, y: (x * y).sum(), (x, x + 1), order=1, modes=["rev"])
    with pytest.raises(AssertionError):   # a wrong custom derivative is caught
        wrong = fnx.custom_jvp(fnp.sin)
        wrong.defjvp(lambda p, t: (fnp.sin(p[0]), fnp.sin(p[0]) * t[0]))
        check_grads(wrong, (x,), 1, modes=["fwd"])
    check_jvp(fnp.sin, lambda p, t: fnx.jvp(fnp.sin, p, t), (x,))
    check_vjp(fnp.sin, lambda x: fnx.vjp(fnp.sin, x), (x,))
    with pytest.raises(AssertionError):
        check_jvp(fnp.sin, lambda p, t: (fnp.sin(p[0]), fnp.sin(t[0])), (x,))
    with pytest.raises(AssertionError):
        check_vjp(fnp.sin, lambda x: (fnp.sin(x), lambda ct: (ct * 2,)), (x,))


# JAX 0.10's top-level names that a ported research program uses, all in fnx.
JAX_NAMES = [
    "Array", "Device", "ShapeDtypeStruct", "block_until_ready", "checkpoint", "config",
    "custom_jvp", "custom_vjp", "debug", "default_backend", "device_count", "device_get",
    "device_put", "devices", "disable_jit", "effects_barrier", "ensure_compile_time_eval",
    "eval_shape", "grad", "hessian", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "lax",
    "linear_transpose",
    "linearize", "local_device_count", "local_devices", "make_jaxpr", "named_call",
    "named_scope", "nn", "numpy", "process_count", "process_index", "pure_callback",
    "random", "remat", "scipy", "test_util", "tree", "tree_util", "typeof",
    "value_and_grad", "vjp", "vmap",
]


def test_top_level_names():
    missing = [n for n in JAX_NAMES if not hasattr(fnx, n)]
    assert not missing, missing
    for n in ["print", "callback"]:
        assert callable(getattr(fnx.debug, n))
    for n in ["check_grads", "check_jvp", "check_vjp"]:
        assert callable(getattr(fnx.test_util, n))


def test_linear_transpose():
    f = lambda x, y: (0.5 * x - y, x.sum())  # noqa: E731
    ft = fnx.linear_transpose(f, fnp.ones(3), fnp.ones(3))
    gx, gy = ft((fnp.arange(3.0), 2.0))
    np.testing.assert_array_equal(gx, [2.0, 2.5, 3.0])       # JAX's values
    np.testing.assert_array_equal(gy, [-0.0, -1.0, -2.0])
    M = fnp.arange(6.0).reshape(2, 3)
    (mt,) = fnx.linear_transpose(lambda v: M @ v, fnp.ones(3))(fnp.array([1.0, 2.0]))
    np.testing.assert_array_equal(mt, [6.0, 9.0, 12.0])
    cs = fnx.jit(fnx.linear_transpose(lambda v: fnp.cumsum(v) * 2,
                                      fnx.ShapeDtypeStruct((3,), np.float32)))
    np.testing.assert_array_equal(cs(fnp.array([1.0, 2.0, 3.0]))[0], [12.0, 10.0, 6.0])
    (d,) = fnx.linear_transpose(lambda d: {"a": d["x"][::-1], "b": d["x"][0]},
                                {"x": fnp.ones(3)})({"a": fnp.arange(3.0), "b": 5.0})
    np.testing.assert_array_equal(d["x"], [7.0, 1.0, 0.0])
    (z,) = fnx.linear_transpose(lambda x: fnp.zeros(2), 1.0)(fnp.ones(2))
    assert float(z) == 0.0
    for nonlinear in (fnp.sin, lambda x: x * x, lambda x: 1.0 / x):
        with pytest.raises(TypeError, match="not linear"):
            fnx.linear_transpose(nonlinear, 1.0)(1.0)
    with pytest.raises(TypeError, match="cotangent must match"):
        fnx.linear_transpose(lambda x: x, 1.0)(fnp.ones(2))


def test_shape_dtype_struct_like_narrows_and_keeps_weak_types():
    # jax.ShapeDtypeStruct.like, as JAX 0.10.2 answers (x64 off)
    S = fnx.ShapeDtypeStruct
    assert S.like(fnx.numpy.ones(3)) == S((3,), "float32")
    assert S.like(1.0) == S((), "float32", weak_type=True)
    assert S.like(2) == S((), "int32", weak_type=True)
    assert S.like(True) == S((), "bool")
    assert S.like(1j) == S((), "complex64", weak_type=True)
    assert S.like(S((2,), "int8")) == S((2,), "int8")
    with fnx.enable_x64():
        assert S.like(np.ones(2)) == S((2,), "float64")


def test_cond_with_a_concrete_predicate_returns_arrays():
    # JAX: Array(2., dtype=float32, weak_type=True), not the Python float 2.0
    out = fnx.lax.cond(True, lambda x: x + 1, lambda x: x - 1, 1.)
    assert isinstance(out, fnx.Array) and out.dtype == "float32" and out.weak_type
    out = fnx.lax.switch(0, [lambda x: (x, x * 2)], 3)
    assert all(isinstance(o, fnx.Array) and o.dtype == "int32" for o in out)


def test_gradients_of_python_scalars_are_weakly_typed():
    # JAX 0.10.2: grad(f)(3.) is Array(-1.979985, dtype=float32, weak_type=True), so it
    # does not promote the float16 array it meets
    f = lambda x: fnp.sin(x) * 2
    for g in (fnx.grad(f)(3.), fnx.jit(fnx.grad(f))(3.), fnx.vjp(f, 3.)[1](1.)[0]):
        assert g.dtype == "float32" and g.weak_type
        np.testing.assert_allclose(float(g), 2 * np.cos(3.), rtol=1e-6)
    assert (fnx.grad(f)(3.) * fnp.ones(2, dtype="float16")).dtype == "float16"
    assert not fnx.grad(f)(fnp.float32(3.)).weak_type


def test_zero_gradients_of_python_scalars_are_weakly_typed():
    # JAX: grad(fun)(Point(1., 2.)) gives y=Array(0., dtype=float32, weak_type=True)
    g = fnx.grad(lambda p: p[0] * 2.)((1., 2.))
    assert all(x.dtype == "float32" and x.weak_type for x in g)
    assert float(g[1]) == 0.0
    (_, gy) = fnx.vjp(lambda x, y: x * 2, 1., 2.)[1](1.)
    assert gy.weak_type and float(gy) == 0.0


def test_linear_transpose_narrows_64_bit_placeholders_like_eager():
    # x64 off: a float64 placeholder is a float32 input (as in JAX), so a float32
    # cotangent is the right type
    t = fnx.linear_transpose(lambda x: 2 * x, fnx.ShapeDtypeStruct((3,), "float64"))
    (g,) = t(fnp.ones(3, dtype="float32"))
    assert g.dtype == "float32" and g.tolist() == [2.0, 2.0, 2.0]
    with fnx.enable_x64():
        t = fnx.linear_transpose(lambda x: 2 * x, fnx.ShapeDtypeStruct((3,), "float64"))
        assert t(np.ones(3))[0].dtype == "float64"


def test_array_methods_of_jax_arrays():
    """The methods jax.Array has beyond the ones fnx had: values as NumPy's (JAX 0.10 gives
    the same), eagerly and under jit where they compute."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    a = fnp.asarray(x)
    np.testing.assert_array_equal(a.ptp(1), np.ptp(x, 1))
    np.testing.assert_array_equal(fnx.jit(lambda v: v.ptp())(x), np.ptp(x))
    np.testing.assert_array_equal(a.conjugate(), x)
    assert int(a[0].searchsorted(2.5)) == 3
    np.testing.assert_array_equal(np.sort(np.asarray(a.argpartition(1)), 1),
                                  np.tile(np.arange(4), (2, 1)))
    np.testing.assert_array_equal(a.compress(np.array([True, False]), axis=0), x[:1])
    np.testing.assert_array_equal(fnp.asarray([0, 1]).choose(np.array([[1, 2], [3, 4]])), [1, 4])
    for dt, shape in ((np.int32, (2, 4)), (np.uint8, (2, 16)), (np.float16, (2, 8))):
        v = a.view(dt)
        assert v.shape == shape and v.dtype == dt
        np.testing.assert_array_equal(np.asarray(v), x.view(dt))
    np.testing.assert_array_equal(fnx.jit(lambda v: v.view(np.uint8))(x), x.view(np.uint8))
    np.testing.assert_array_equal(a.view(np.uint8).view(np.float32), x)
    with fnx.enable_x64(True):
        np.testing.assert_array_equal(fnp.asarray(x).view(np.float64), x.view(np.float64))
    with pytest.raises(ValueError, match="multiple of 2"):
        fnp.ones(3, np.float16).view(np.float32)
    assert a.tobytes() == x.tobytes() and a.on_device_size_in_bytes() == x.nbytes
    assert a.is_ready() and a.is_fully_addressable and a.is_fully_replicated
    assert a.clone() is a and a.copy_to_host_async() is None


def test_linalg_eig_returns_jaxs_named_result():
    r = fnp.linalg.eig(fnp.asarray([[2.0, 0.0], [0.0, 3.0]]))
    assert type(r).__name__ == "EigResult" and r.eigenvalues.tolist() == [2, 3]
    vals, vecs = r
    assert vecs.shape == (2, 2) and vals.dtype == np.complex64


def test_typing_names():
    from fnx.typing import ArrayLike, DTypeLike
    import typing

    def f(x: ArrayLike, dtype: DTypeLike = None):
        return fnp.asarray(x, dtype)
    hints = typing.get_type_hints(f)
    assert hints["x"] is ArrayLike and fnx.Array in typing.get_args(ArrayLike)
    assert np.dtype in typing.get_args(DTypeLike) and fnx.typing.ArrayLike is ArrayLike


def test_reshape_and_ravel_in_fortran_order():
    """order='F' was ignored by ravel (silently C order); JAX supports 'C' and 'F'."""
    a = np.arange(24).reshape(2, 3, 4)
    x = fnp.asarray(a)
    np.testing.assert_array_equal(fnp.ravel(x, order="F"), a.ravel(order="F"))
    np.testing.assert_array_equal(x.flatten(order="F"), a.flatten(order="F"))
    for shape in ((4, 6), (-1, 2), (24,)):
        np.testing.assert_array_equal(fnp.reshape(x, shape, order="F"),
                                      a.reshape(shape, order="F"))
    np.testing.assert_array_equal(fnx.jit(lambda v: v.reshape((6, 4), order="F"))(x),
                                  a.reshape((6, 4), order="F"))
    with pytest.raises(NotImplementedError, match="'A'"):
        fnp.ravel(x, order="A")


def test_jax_error_classes_for_concretization():
    """JAX's error names, so ported ``except`` clauses catch what fnx raises: a traced
    boolean mask is an IndexError (JAX's NonConcreteBooleanIndexError), bool()/int()/
    np.asarray() of a tracer raise JAX's Tracer*ConversionError classes; all are still
    fnx's ConcretizationError (a TypeError)."""
    import fnx.errors as E
    x = fnp.ones(3)
    cases = [(lambda v: v[~fnp.isnan(v)].sum(), E.NonConcreteBooleanIndexError, IndexError),
             (lambda v: 1.0 if v.sum() > 0 else 0.0, E.TracerBoolConversionError, TypeError),
             (lambda v: fnp.zeros(int(v.sum())), E.TracerIntegerConversionError, TypeError),
             (lambda v: np.asarray(v), E.TracerArrayConversionError, TypeError)]
    for f, cls, base in cases:
        with pytest.raises(cls) as info:
            fnx.jit(f)(x)
        assert isinstance(info.value, (base, E.ConcretizationTypeError, E.ConcretizationError))
    assert E.ConcretizationTypeError is E.ConcretizationError
    assert E.UnexpectedTracerError is E.LeakedTracerError
    for f in (lambda v, i: v[i:i + 2], lambda v, i: v[::i]):  # JAX: IndexError
        with pytest.raises(IndexError) as info:
            fnx.jit(f)(x, 1)
        assert isinstance(info.value, E.ConcretizationError)


def test_lax_map_batch_size_empty_and_broadcast_like():
    """JAX 0.10's values."""
    assert lax.map(lambda v: v * 2, fnp.arange(7.0), batch_size=3).tolist() == [
        0, 2, 4, 6, 8, 10, 12]
    out = lax.map(lambda v: {"a": v.sum()}, fnp.arange(14.0).reshape(7, 2), batch_size=4)
    assert out["a"].tolist() == [1, 5, 9, 13, 17, 21, 25]
    assert lax.map(lambda v: v * 2, fnp.arange(2.0), batch_size=5).tolist() == [0, 2]
    f = fnx.jit(lambda v: lax.map(fnp.sin, v, batch_size=3).sum())
    np.testing.assert_allclose(fnx.grad(f)(fnp.arange(4.0)), np.cos(np.arange(4.0)), rtol=1e-6)
    assert lax.empty(3, np.float32).shape == (3,)
    assert lax.broadcast_like(fnp.ones((1, 3)), fnp.ones((4, 2, 3))).shape == (4, 2, 3)
    assert fnp.array(range(5)).tolist() == [0, 1, 2, 3, 4]
    import array
    assert fnp.asarray(array.array("i", [2, 3, 5])).tolist() == [2, 3, 5]


def test_fromfunction_vmaps_over_scalar_indices_as_jax():
    """JAX calls the function on scalar indices (vmapped), so an array-valued function
    gives ``shape + its shape``; JAX 0.10's docstring examples."""
    assert fnp.fromfunction(fnp.multiply, shape=(3, 6), dtype=int).tolist()[2] == [
        0, 2, 4, 6, 8, 10]
    out = fnp.fromfunction(lambda x: (x + 1) * fnp.arange(3), shape=(2,))
    assert out.tolist() == [[0, 1, 2], [0, 2, 4]] and out.dtype == np.float32
    assert fnp.fromfunction(lambda i, j: fnp.zeros(()) + i.ndim, (2, 3)).shape == (2, 3)
    assert fnx.jit(lambda: fnp.fromfunction(lambda i, j: i * 10 + j, (2, 3)))().tolist() == [
        [0, 1, 2], [10, 11, 12]]


def test_repeat_with_total_repeat_length_under_jit():
    """Traced repeats with a static total_repeat_length (what it is for): JAX 0.10's
    values, eager and jitted, cut or padded with the last element."""
    from functools import partial
    f = fnx.jit(partial(fnp.repeat, total_repeat_length=5, axis=1))
    assert f(fnp.array([[1, 2], [3, 4]]), fnp.array([2, 3])).tolist() == [
        [1, 1, 2, 2, 2], [3, 3, 4, 4, 4]]
    for reps, length, want in (([1, 1], 4, [1, 2, 2, 2]), ([0, 2], 4, [2, 2, 2, 2]),
                               ([2, 0], 3, [1, 1, 2])):
        g = lambda r: fnp.repeat(fnp.array([1, 2]), r, total_repeat_length=length)  # noqa: E731
        assert g(fnp.array(reps)).tolist() == want
        assert fnx.jit(g)(fnp.array(reps)).tolist() == want
    assert fnp.repeat(fnp.array([1, 2]), 2, total_repeat_length=3).tolist() == [1, 1, 2]


def test_extract_and_compress_take_compress_rules():
    """JAX's docstring examples: a shorter condition reads that many elements, a longer
    one may hold only False past the end."""
    a = fnp.arange(1, 7)
    assert fnp.extract(fnp.array([True, False]), a).tolist() == [1]
    assert fnp.extract(fnp.array([[True], [False]]), a.reshape(2, 3)).tolist() == [1]
    assert fnp.extract(fnp.array([1, 0, 1, 1, 0, 0, 0, 0]), a).tolist() == [1, 3, 4]
    with pytest.raises(ValueError, match="past the end are True"):
        fnp.compress(fnp.array([True] * 8), a)


def test_save_and_load_keep_bfloat16():
    """NumPy writes bfloat16 as two-byte void; jnp.load reads it back as bfloat16 (JAX)."""
    import io
    x = fnp.array([1.5, 2.25, -3.0], dtype=fnp.bfloat16)
    buf = io.BytesIO()
    fnp.save(buf, x)
    buf.seek(0)
    y = fnp.load(buf)
    assert y.dtype == x.dtype and np.asarray(y, np.float32).tolist() == [1.5, 2.25, -3.0]
