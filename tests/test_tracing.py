"""Tracing, the IR (printing, checking, evaluation, DCE), eval_shape, and the
errors for concretization and leaked tracers."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core.ir import IR, Eqn, Var, dce
from fnx.errors import ConcretizationError, IRCheckError, LeakedTracerError, ShapeError


def f_mlp(w, b, x):
    return fnp.tanh(x @ w + b).sum()


ARGS = (fnp.ones((3, 2)), fnp.zeros(2), fnp.ones((4, 3)))


def test_make_ir_prints_like_a_jaxpr():
    ir = fnx.make_ir(lambda x: x * 2.0 + 1)(fnp.ones(3))
    assert str(ir) == (
        "{ lambda a:f32[3]. let\n"
        "    b:f32[3] = mul a 2.0:f32[]\n"
        "    c:f32[3] = add b 1.0:f32[]\n"
        "  in (c,) }")


def test_ir_records_types_params_and_user_source_line():
    ir = fnx.make_ir(f_mlp)(*ARGS)
    prims = [e.prim.name for e in ir.eqns]
    assert prims == ["dot_general", "broadcast_in_dim", "add", "tanh", "reduce_sum"]
    assert [v.aval.shape for v in ir.invars] == [(3, 2), (2,), (4, 3)]
    assert ir.out_avals[0].shape == () and ir.out_avals[0].dtype == np.float32
    dot = ir.eqns[0]
    assert dot.params["dimension_numbers"] == (((1,), (0,)), ((), ()))
    for e in ir.eqns:  # every equation remembers the user's line, not fnx's
        assert "test_tracing.py" in e.source and "f_mlp" in e.source
    assert "dimension_numbers=(((1,), (0,)), ((), ()))" in str(ir)


def test_ir_evaluates_to_the_eager_result():
    ir = fnx.make_ir(f_mlp)(*ARGS)
    (out,) = fnx.eval_ir(ir, *ARGS)
    np.testing.assert_allclose(out, f_mlp(*ARGS), rtol=1e-6)


def test_constants_are_explicit_and_scalars_inline():
    c = fnp.arange(3.0)
    ir = fnx.make_ir(lambda x: x * c + 3.0)(fnp.ones(3))
    assert len(ir.constvars) == 1 and ir.consts[0] is c
    text = str(ir)
    assert text.startswith("{ lambda a:f32[3]; b:f32[3]. let")
    assert "3.0:f32[]" in text
    (out,) = fnx.eval_ir(ir, fnp.ones(3))
    np.testing.assert_array_equal(out, [3.0, 4.0, 5.0])


def test_creation_inside_trace_is_recorded_not_baked():
    ir = fnx.make_ir(lambda x: x + fnp.zeros((1000, 1000)))(fnp.ones((1000, 1000)))
    assert ir.consts == []  # a broadcast of a scalar, not a 4 MB constant
    assert any(e.prim.name == "broadcast_in_dim" for e in ir.eqns)


def test_dce_removes_unused_equations():
    def f(x):
        unused = fnp.exp(x) * 3  # noqa: F841
        return x + 1
    ir = fnx.make_ir(f)(fnp.ones(2))
    assert [e.prim.name for e in ir.eqns] == ["add"]


def test_dce_keeps_only_what_outputs_need():
    a, b = Var(fnx.ShapeDtypeStruct((), "float32")), Var(fnx.ShapeDtypeStruct((), "float32"))
    c, d = Var(a.aval), Var(a.aval)
    from fnx.lax.elementwise import add_p, mul_p
    ir = IR([a, b], [c], [Eqn(add_p, [a, b], [c], {}), Eqn(mul_p, [a, b], [d], {})])
    assert [e.prim for e in dce(ir).eqns] == [add_p]


def test_check_ir_catches_wrong_types_and_undefined_vars():
    ir = fnx.make_ir(lambda x: fnp.sin(x) * 2)(fnp.ones(3))
    fnx.check_ir(ir)
    bad = ir.replace(eqns=list(ir.eqns))
    bad.eqns[0].outputs[0].aval = fnx.ShapeDtypeStruct((4,), "float32")
    with pytest.raises(IRCheckError, match="sin"):
        fnx.check_ir(bad)
    ir2 = fnx.make_ir(lambda x: fnp.sin(x) * 2)(fnp.ones(3))
    swapped = ir2.replace(eqns=ir2.eqns[::-1])
    with pytest.raises(IRCheckError, match="not defined before"):
        fnx.check_ir(swapped)


def test_nested_call_prints_sub_ir():
    inner = fnx.jit(lambda x: fnp.sin(x) + 1)
    text = str(fnx.make_ir(lambda x: inner(x) * 2)(fnp.ones(3)))
    assert "jit[ir=" in text and "sin" in text and text.count("{ lambda") == 2


def test_make_ir_static_argnums_and_placeholders():
    ir = fnx.make_ir(lambda x, n: x * n, static_argnums=1)(
        fnx.ShapeDtypeStruct((2, 5), "float64"), 3)
    assert str(ir).startswith("{ lambda a:f32[2,5]. let")   # x64 off: narrowed, as in JAX
    assert "mul a 3" in str(ir)
    with fnx.enable_x64():
        ir = fnx.make_ir(lambda x, n: x * n, static_argnums=1)(
            fnx.ShapeDtypeStruct((2, 5), "float64"), 3)
    assert str(ir).startswith("{ lambda a:f64[2,5]. let")


def test_eval_shape_placeholders_pytrees_and_no_compute():
    calls = []

    def f(params, x):
        calls.append(1)
        h = x @ params["w"] + params["b"]
        return {"out": h, "mean": h.mean(), "idx": fnp.argmax(h, axis=1)}

    spec = {"w": fnx.ShapeDtypeStruct((784, 512), "float32"),
            "b": fnx.ShapeDtypeStruct((512,), "float32")}
    out = fnx.eval_shape(f, spec, fnx.ShapeDtypeStruct((10_000, 784), "float32"))
    assert out["out"] == fnx.ShapeDtypeStruct((10_000, 512), "float32")
    assert out["mean"].shape == () and out["idx"].dtype == np.int32
    assert calls == [1]


def test_eval_shape_narrows_64_bit_as_eager_and_keeps_weak_types():
    # x64 off: a float64 placeholder traces as float32, as a float64 array does eagerly
    # (JAX's eval_shape gives float32 too); with x64 on it stays float64
    f = lambda x: x * 2.0  # noqa: E731
    out = fnx.eval_shape(f, fnx.ShapeDtypeStruct((3,), "float64"))
    assert out == fnx.ShapeDtypeStruct((3,), "float32") == f(fnp.asarray(np.zeros(3))).aval
    assert fnx.eval_shape(f, fnx.ShapeDtypeStruct((), "int64", weak_type=True)) == \
        fnx.ShapeDtypeStruct((), "float32", weak_type=True)
    with fnx.enable_x64():
        assert fnx.eval_shape(f, fnx.ShapeDtypeStruct((3,), "float64")).dtype == np.float64
    assert fnx.eval_shape(lambda: fnp.float32(1.0) * 2).weak_type is False
    assert fnx.eval_shape(lambda: fnp.asarray(1.0) * 2).weak_type is True  # as in JAX


def test_concretization_error_names_line_and_suggests_fixes():
    @fnx.jit
    def f(x):
        if x.sum() > 0:  # the line the error must point to
            return x
        return -x

    with pytest.raises(ConcretizationError) as e:
        f(fnp.ones(3))
    msg = str(e.value)
    assert "bool()" in msg and "lax.cond" in msg and "static_argnums" in msg
    assert "test_tracing.py" in msg


@pytest.mark.parametrize("conv", [int, float, bool, lambda x: np.asarray(x), lambda x: x.item(),
                                  lambda x: x.tolist(), lambda x: range(x)])
def test_every_conversion_of_a_tracer_raises(conv):
    with pytest.raises(ConcretizationError):
        fnx.jit(lambda x: conv(x))(fnp.asarray(3))


def test_shape_from_data_raises_under_jit():
    with pytest.raises(ConcretizationError, match="size="):
        fnx.jit(lambda x: fnp.nonzero(x))(fnp.ones(3))
    with pytest.raises(ConcretizationError, match="shape"):
        fnx.jit(lambda n: fnp.zeros(n))(3)


def test_python_control_flow_on_static_values_works():
    @fnx.jit
    def f(x):
        out = x
        for _ in range(x.shape[0]):  # shapes are static
            out = out * 2
        return out
    np.testing.assert_array_equal(f(fnp.ones(3)), [8.0, 8.0, 8.0])


def test_leaked_tracer_error_on_later_use():
    saved = []

    @fnx.jit
    def f(x):
        saved.append(x * 2)
        return x

    f(fnp.ones(2))
    with pytest.raises(LeakedTracerError) as e:
        saved[0] + 1
    assert "ended" in str(e.value) and "Return it" in str(e.value)
    with pytest.raises(LeakedTracerError):
        fnx.jit(lambda y: y + saved[0])(fnp.ones(2))


def test_closure_over_outer_tracer_becomes_constant_of_inner_ir():
    def outer(x):
        inner = fnx.jit(lambda y: y * x)  # closes over the outer tracer
        return inner(fnp.ones(3))
    ir = fnx.make_ir(outer)(fnp.asarray(2.0))
    (call,) = [e for e in ir.eqns if e.prim.name == "jit"]
    assert len(call.inputs) == 2  # the closed-over tracer became an input
    (out,) = fnx.eval_ir(ir, fnp.asarray(2.0))
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])


def test_trace_is_per_context_not_global():
    # A tracer used while no trace is active is caught, whatever is on any stack.
    leaked = []
    fnx.make_ir(lambda x: leaked.append(x) or x)(fnp.ones(1))
    with pytest.raises(LeakedTracerError):
        fnp.sin(leaked[0])


def test_lax_shape_errors_name_op_shapes_and_fix():
    with pytest.raises(ShapeError) as e:
        lax.add(fnp.ones(3), fnp.ones(4))
    msg = str(e.value)
    assert "add" in msg and "f32[3]" in msg and "f32[4]" in msg and "fnx.numpy.add" in msg
    with pytest.raises(ShapeError, match="i32"):
        lax.add(fnp.ones(3), fnp.ones(3, dtype="int32"))
    with pytest.raises(ShapeError, match="floating"):
        lax.exp(fnp.ones(3, dtype="int32"))
    with pytest.raises(ShapeError, match="reshape"):
        lax.reshape(fnp.ones(6), (4,))
    # The same errors are raised while tracing.
    with pytest.raises(ShapeError, match="add"):
        fnx.jit(lambda a, b: lax.add(a, b))(fnp.ones(3), fnp.ones(4))


def test_numpy_broadcast_error_is_clear():
    with pytest.raises(ShapeError, match=r"add: shapes \(3,\), \(4,\) do not broadcast"):
        fnp.ones(3) + fnp.ones(4)


def test_simplify_drops_multiplications_by_one_and_keeps_types():
    from fnx.core.ir import simplify

    def f(x):
        ones = fnx.lax.broadcast_in_dim(np.ones((), x.dtype), x.shape, ())
        return x * ones, 1.0 * x, x * 2.0, x.astype("complex64") * (1 + 0j)

    ir = fnx.make_ir(f)(fnp.ones((2, 3)))
    muls = [e for e in ir.eqns if e.prim.name == "mul"]
    assert len(muls) == 2  # x * 2 and the complex one stay
    assert not any(e.prim.name == "broadcast_in_dim" for e in ir.eqns)
    x = fnp.asarray(np.array([[np.nan, -0.0, np.inf], [1.0, -2.5, 3.0]]))
    for got, want in zip(fnx.jit(f)(x), f(x)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # a weakly typed one times a strong value is the value; the other way round is kept
    ir2 = fnx.make_ir(lambda v: v * 1.0)(fnp.ones(3))
    assert not ir2.eqns
    assert simplify(ir2) is ir2


def test_simplify_folds_scalars_computed_from_literals():
    from fnx.core.ir import IR, simplify
    from fnx.core.trace import EVAL, trace_context
    from fnx.core.tracing import IRTrace

    t = IRTrace(EVAL)
    with trace_context(t):
        a = t.new_arg(fnx.ShapeDtypeStruct((3,), np.float32))
        pad_value = fnx.lax.convert_element_type(np.int32(7), np.float32)
        out = fnx.lax.pad(a, pad_value, [(0, 1, 0)])
    ir = simplify(IR(t.invars, [t.to_atom(out)], t.eqns))
    assert [e.prim.name for e in ir.eqns] == ["pad"]
    lit = ir.eqns[0].inputs[1]
    assert lit.aval.dtype == np.float32 and lit.value == 7.0
    got = fnx.eval_ir(ir, fnp.asarray(np.arange(3.0, dtype=np.float32)))[0]
    np.testing.assert_array_equal(np.asarray(got), [0.0, 1.0, 2.0, 7.0])
