"""check_op catches planted wrong rules, names the rule, and passes the right ones.

Each planted bug is a user-defined primitive (made with ``fnx.extend`` only, as
a user would) or a custom_jvp/custom_vjp function with exactly one wrong rule;
the test asserts that check_op fails on the check that tests that rule, that
the message names the rule and shows the shrunk input, and that the correct
twin passes every check it can run here.
"""
import itertools
import re

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from fnx import lax
from fnx.extend import (Primitive, ShapeDtypeStruct, ShapeError, batch_elementwise, defjvp,
                        deflinear, is_linear, unary_elementwise)
from fnx.testing import CHECKS, Example, OpCheckError, check_op, rules_report

_ids = itertools.count()


def fresh(name):
    """Primitive names are global: every test primitive gets its own."""
    return f"test_{name}_{next(_ids)}"


def floats(lo=-4.0, hi=4.0, dtype=np.float32, min_dims=0):
    """A one-operand strategy: (x,) with x of rank 0-3."""
    return st.tuples(hnp.arrays(dtype, hnp.array_shapes(min_dims=min_dims, max_dims=3,
                                                        max_side=4),
                                elements=st.floats(lo, hi, width=np.dtype(dtype).itemsize * 8)))


def softplus_ref(x):
    return np.logaddexp(np.zeros((), x.dtype), x)


def make_softplus(jvp_sign=1.0, impl=softplus_ref):
    p = unary_elementwise(fresh("softplus"), impl, "float")
    defjvp(p, lambda g, ans, x: g * lax.logistic(x) * jvp_sign)
    return p


def expect_failure(check, op, args, **kw):
    with pytest.raises(OpCheckError) as info:
        check_op(op, args, max_examples=kw.pop("max_examples", 30), **kw)
    msg = str(info.value)
    assert f"check {check!r} failed" in msg, msg
    assert "input" in msg and "args[0]" in msg, msg
    return msg


# --- the correct versions pass --------------------------------------------------------------

def test_a_correct_primitive_passes_every_check_it_can_run():
    report = check_op(make_softplus(), floats(), reference=softplus_ref, max_examples=15)
    for c in ("impl", "shape", "jit", "vmap", "jvp", "vjp"):
        assert report.ran[c] >= 15, report
    assert "kernel" in report.skipped and "onnx" in report.skipped
    assert "passed on" in str(report)


def test_float64_and_order_one_and_one_mode():
    report = check_op(make_softplus(), floats(dtype=np.float64), reference=softplus_ref,
                      order=1, modes=("rev",), max_examples=5)
    assert report.ran["vjp"] >= 5 and report.ran["jvp"] == 0


# --- planted bugs ---------------------------------------------------------------------------

def test_wrong_jvp_sign_is_the_jvp_rule():
    msg = expect_failure("jvp", make_softplus(jvp_sign=-1.0), floats(),
                         reference=softplus_ref)
    assert "the jvp rule is wrong" in msg
    assert "jvp gives" in msg and "finite differences give" in msg   # observed vs expected


def test_impl_wrong_only_for_negative_inputs_is_the_impl_and_shrinks_to_a_negative():
    def impl(x):
        return np.where(x < 0, softplus_ref(x) * 1.5, softplus_ref(x)).astype(x.dtype)
    msg = expect_failure("impl", make_softplus(impl=impl), floats(), reference=softplus_ref)
    assert "the impl (NumPy implementation) is wrong" in msg
    assert "got" in msg and "expected" in msg
    shown = re.search(r"args\[0\]: f32\[[\d,]*\] = (.*)", msg).group(1)
    values = [float(v) for v in re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", shown)]
    assert any(v < 0 for v in values), msg
    # shrunk: hypothesis reduces the input to few elements
    assert len(values) <= 2, msg


def _scale2(transpose_factor):
    p = Primitive(fresh("scale2"), impl=lambda x: x * x.dtype.type(2),
                  shape_rule=lambda x: ShapeDtypeStruct(x.shape, x.dtype, x.weak_type))
    deflinear(p)
    batch_elementwise(p)
    p.transpose = lambda ct, x: [ct * transpose_factor]
    return p


def test_wrong_transpose_is_the_transpose_rule():
    msg = expect_failure("vjp", _scale2(3.0), floats(), order=1)
    assert "the transpose rule" in msg
    check_op(_scale2(2.0), floats(), order=2, max_examples=10)


def _with_batch_rule(rule):
    p = unary_elementwise(fresh("sq"), np.square, "float")
    defjvp(p, lambda g, ans, x: g * 2 * x)
    p.batch = rule
    return p


def test_batching_that_drops_an_axis_is_the_batching_rule():
    # The rule keeps only the first example of the batch: it loses the batch axis.
    def drops(vals, dims, size, **params):
        (x,) = vals   # batched at axis 0
        return lax.square(x[0]), None
    msg = expect_failure("vmap", _with_batch_rule(drops), floats(), reference=np.square)
    assert "the batching rule is wrong" in msg and "in_axes=" in msg
    check_op(_with_batch_rule(lambda vals, dims, size: (lax.square(vals[0]), dims[0])),
             floats(), reference=np.square, max_examples=10)


def test_shape_rule_off_by_one_is_the_shape_rule():
    def rule(x):
        if x.ndim == 0:
            raise ShapeError("needs rank >= 1")
        return ShapeDtypeStruct(x.shape[:-1] + (x.shape[-1] + 1,), x.dtype)
    p = Primitive(fresh("cumsum_last"), shape_rule=rule,
                  impl=lambda x: np.cumsum(x, axis=-1, dtype=x.dtype))
    msg = expect_failure("shape", p, floats(min_dims=1), reference=lambda x: np.cumsum(x, -1))
    assert "the shape rule is wrong" in msg and "the shape rule says" in msg


def test_a_wrong_jit_lowering_is_jit():
    p = unary_elementwise(fresh("double"), lambda x: x * x.dtype.type(2), "float")
    p.numpy_codegen = lambda ins, params, bind, *avals: f"({ins[0]} * 2 + 1)"
    msg = expect_failure("jit", p, floats(), reference=lambda x: 2 * x,
                         skip=("jvp", "vjp", "vmap"))
    assert "jit against eager" in msg


def sin_with_jvp(derivative):
    """sin as a custom_jvp function whose rule uses ``derivative`` (cos is right)."""
    @fnx.custom_jvp
    def f(x):
        return fnx.numpy.sin(x)

    @f.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return fnx.numpy.sin(x), derivative(x) * t
    return f


def test_custom_jvp_and_custom_vjp_functions_are_checked_too():
    check_op(sin_with_jvp(fnx.numpy.cos), floats(), reference=np.sin, max_examples=10)
    msg = expect_failure("jvp", sin_with_jvp(fnx.numpy.sin), floats(), reference=np.sin)
    assert "forward mode" in msg

    @fnx.custom_vjp
    def cube(x):
        return x ** 3

    cube.defvjp(lambda x: (x ** 3, x), lambda x, g: (g * 2 * x ** 2,))   # should be 3 x^2
    msg = expect_failure("vjp", cube, floats(), skip=("jvp",))
    assert "reverse mode" in msg


def test_examples_with_drawn_params_and_integer_operands():
    @st.composite
    def cases(draw):
        (x,) = draw(floats(min_dims=1))
        return Example(x, axis=draw(st.integers(-x.ndim, x.ndim - 1)))
    report = check_op(fnx.numpy.cumsum, cases(), reference=lambda x, axis: np.cumsum(x, axis),
                      max_examples=10)
    assert report.ran["vmap"] >= 10
    ints = st.tuples(hnp.arrays(np.int32, hnp.array_shapes(max_dims=2), elements=st.integers(
        -50, 50)))
    report = check_op(lax.neg, ints, reference=np.negative, max_examples=5)
    assert "float" in report.skipped["jvp"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown checks"):
        check_op(lax.neg, floats(), skip=("grad",))
    with pytest.raises(ValueError, match="order"):
        check_op(lax.neg, floats(), order=3)
    assert CHECKS == ("impl", "shape", "jit", "vmap", "jvp", "vjp", "kernel", "onnx", "gpu")


# --- rules_report -------------------------------------------------------------------------------

def test_every_builtin_primitive_has_the_rules_it_needs():
    report = rules_report(sorted(fnx.core.primitive.BUILTIN))
    assert not report.missing, f"built-in primitives lacking rules: {report.missing}"
    table = str(report)
    assert "dot_general" in table and "transpose" in table.splitlines()[0]


def test_rules_report_flags_a_linear_primitive_without_a_transpose():
    p = Primitive(fresh("lin"), impl=lambda x: x,
                  shape_rule=lambda x: ShapeDtypeStruct(x.shape, x.dtype))
    deflinear(p)
    report = rules_report([p])
    assert report.missing == {p.name: ["batch", "transpose"]}
    assert "MISSING" in str(report) and report.markdown().startswith("| primitive")
    p.not_needed = {"batch": "testing"}
    p.transpose = lambda ct, x: [ct] if is_linear(x) else [None]
    assert rules_report([p]).missing == {}


# --- the optional hooks: GPU kernel and ONNX lowering -------------------------------------------

def _softplus_with_hooks(kernel_sign="+", onnx_op="Softplus"):
    p = make_softplus()
    p.kernel = lambda xs, in_dtypes, out_dtype: (
        f"fmaxf({xs[0]}, 0.0f) {kernel_sign} log1pf(expf(-fabsf({xs[0]})))")
    p.onnx = lambda ctx, x: ctx.node(onnx_op, [x])
    return p


def test_correct_kernel_and_onnx_hooks_pass():
    from fnx.kernels import cuda
    report = check_op(_softplus_with_hooks(), floats(-20, 20), reference=softplus_ref,
                      max_examples=8)
    if cuda.compiler_available() or cuda.device_available():
        assert report.ran["kernel"] >= 8, report
    assert report.ran["onnx"] >= 8, report


def test_a_wrong_kernel_is_the_kernel():
    from fnx.kernels import cuda
    if not (cuda.device_available() or (cuda.compiler_available()
                                        and cuda.host_compiler_available())):
        pytest.skip("no CUDA device, and no NVRTC + g++ to run the kernel source on the CPU")
    msg = expect_failure("kernel", _softplus_with_hooks(kernel_sign="-"), floats(-20, 20),
                         reference=softplus_ref, skip=("onnx",))
    assert "the GPU kernel (prim.kernel) is wrong" in msg and "kernel source" in msg


def test_a_wrong_onnx_lowering_is_onnx():
    msg = expect_failure("onnx", _softplus_with_hooks(onnx_op="Softsign"), floats(-20, 20),
                         reference=softplus_ref, skip=("kernel",))
    assert "the ONNX lowering (prim.onnx) is wrong" in msg and "onnxruntime" in msg
