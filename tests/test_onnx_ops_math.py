"""ONNX handlers of linear algebra, reductions, softmaxes, cumulative ops, TopK, losses
and the DFT (``fnx/onnx/ops/math.py``): what the ONNX node suite does not check:
derivatives against finite differences through ``fnx.onnx.to_function``, jit against
eager, the old-opset conventions and the error for an unsupported attribute value."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import fnx  # noqa: E402
import fnx.numpy as fnp  # noqa: E402
from fnx.onnx import UnsupportedOnnxOpError  # noqa: E402
from fnx.testing import check_grads  # noqa: E402

from onnx_testing import one_node_model  # noqa: E402

RNG = np.random.default_rng(0)


def _one_node(op, inputs, attrs=None, consts=None, opset=18, n_out=1, out_type=T.DOUBLE):
    return one_node_model(op, inputs, attrs, consts, opset, n_out, out_type)


def _f64(*shape):
    return RNG.standard_normal(shape)


# (name, op, float inputs, attrs, constant inputs, opset, output index differentiated)
GRAD_CASES = [
    ("matmul", "MatMul", [_f64(2, 3, 4), _f64(4, 5)], {}, {}, 13),
    ("gemm", "Gemm", [_f64(4, 3), _f64(5, 4), _f64(5)],
     dict(transA=1, transB=1, alpha=0.5, beta=2.0), {}, 13),
    ("einsum", "Einsum", [_f64(2, 3, 4), _f64(2, 4)], dict(equation="bij,bj->bi"), {}, 12),
    ("reduce_sum", "ReduceSum", [_f64(2, 3, 4)], dict(keepdims=0),
     {1: np.array([0, 2], np.int64)}, 13),
    ("reduce_mean_attr", "ReduceMean", [_f64(2, 3, 4)], dict(axes=[-1]), {}, 13),
    ("reduce_l2", "ReduceL2", [_f64(2, 3, 4)], {}, {1: np.array([1], np.int64)}, 18),
    ("reduce_logsumexp", "ReduceLogSumExp", [_f64(2, 3, 4)], dict(keepdims=0),
     {1: np.array([1, 2], np.int64)}, 18),
    ("reduce_prod", "ReduceProd", [_f64(2, 3)], {}, {1: np.array([1], np.int64)}, 18),
    ("reduce_max", "ReduceMax", [_f64(2, 3, 4)], {}, {1: np.array([2], np.int64)}, 18),
    ("softmax_11", "Softmax", [_f64(2, 3, 4)], dict(axis=1), {}, 11),
    ("softmax_13", "Softmax", [_f64(2, 3, 4)], dict(axis=1), {}, 13),
    ("log_softmax", "LogSoftmax", [_f64(2, 3, 4)], {}, {}, 13),
    ("cumsum", "CumSum", [_f64(3, 4)], dict(exclusive=1, reverse=1),
     {1: np.array(1, np.int64)}, 14),
    ("cumprod", "CumProd", [_f64(3, 4)], {}, {1: np.array(0, np.int64)}, 26),
    ("topk", "TopK", [_f64(3, 6)], dict(axis=1), {1: np.array([2], np.int64)}, 11),
    ("det", "Det", [_f64(2, 3, 3)], {}, {}, 11),
    ("sce", "SoftmaxCrossEntropyLoss", [_f64(3, 4, 2)],
     dict(reduction="mean", ignore_index=2),
     {1: np.array([[0, 2], [3, 1], [1, 1]], np.int64), 2: np.array([0.5, 1.0, 2.0, 1.5])},
     13),
    ("nll_sum", "NegativeLogLikelihoodLoss", [_f64(3, 4)], dict(reduction="sum"),
     {1: np.array([0, 3, 1], np.int64)}, 13),
    ("dft", "DFT", [_f64(2, 6, 2)], {}, {}, 17),
    ("rfft", "DFT", [_f64(2, 6, 1)], dict(onesided=1), {}, 17),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_finite_differences(case):
    _, op, xs, attrs, consts, opset = case
    inputs = {f"x{i}": x for i, x in enumerate(xs)}
    n_out, types = (2, [T.DOUBLE, T.INT64]) if op == "TopK" else (1, T.DOUBLE)
    model = _one_node(op, inputs, attrs, consts, opset, n_out=n_out, out_type=types)
    with fnx.enable_x64(True):
        apply_fn, params = fnx.onnx.to_function(model)

        def f(*args):
            out = apply_fn(params, *args)
            return out["y0"] if isinstance(out, dict) else out

        check_grads(f, tuple(fnp.asarray(x) for x in xs), order=1, modes=("rev",))


def test_jit_matches_eager():
    """A small head: Gemm -> LogSoftmax -> ReduceMean, a TopK and an ArgMax beside."""
    w = RNG.standard_normal((5, 4)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
        helper.make_node("LogSoftmax", ["h"], ["lp"], axis=1),
        helper.make_node("ReduceMean", ["lp", "axes"], ["m"], keepdims=0),
        helper.make_node("TopK", ["h", "k"], ["tv", "ti"]),
        helper.make_node("ArgMax", ["h"], ["am"], axis=1, select_last_index=1),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("m", T.FLOAT, ["N"]),
         helper.make_tensor_value_info("tv", T.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("ti", T.INT64, ["N", 2]),
         helper.make_tensor_value_info("am", T.INT64, ["N", 1])],
        initializer=[nh.from_array(w, "w"), nh.from_array(b, "b"),
                     nh.from_array(np.array([1], np.int64), "axes"),
                     nh.from_array(np.array([2], np.int64), "k")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    with fnx.enable_x64(True):
        apply_fn, params = fnx.onnx.to_function(model)
        eager = apply_fn(params, x)
        jitted = fnx.jit(apply_fn)(params, x)
    h = x @ w.T + b
    np.testing.assert_allclose(np.asarray(eager["tv"]), -np.sort(-h, axis=1)[:, :2],
                               rtol=1e-6)
    for k in ("m", "tv", "ti", "am"):
        e, j = np.asarray(eager[k]), np.asarray(jitted[k])
        assert e.dtype == j.dtype and e.shape == j.shape, k
        np.testing.assert_allclose(e, j, rtol=1e-6, atol=1e-7)
    assert np.asarray(eager["ti"]).dtype == np.int64


def _run(model, *xs):
    with fnx.enable_x64(True):
        apply_fn, params = fnx.onnx.to_function(model)
        return np.asarray(apply_fn(params, *xs))


def test_softmax_before_opset_13_flattens_at_axis():
    x = RNG.standard_normal((2, 3, 4))
    for opset, want in [(11, np.exp(x) / np.exp(x).sum(axis=(1, 2), keepdims=True)),
                        (13, np.exp(x) / np.exp(x).sum(axis=1, keepdims=True))]:
        got = _run(_one_node("Softmax", {"x": x}, dict(axis=1), opset=opset), x)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_empty_reductions_give_the_identity():
    x = np.zeros((2, 0, 3), np.float32)
    axes = {1: np.array([1], np.int64)}
    for op, want in [("ReduceMax", -np.inf), ("ReduceMin", np.inf), ("ReduceProd", 1.0),
                     ("ReduceLogSumExp", -np.inf), ("ReduceSum", 0.0)]:
        got = _run(_one_node(op, {"x": x}, {}, axes, opset=18, out_type=T.FLOAT), x)
        assert got.shape == (2, 1, 3) and got.dtype == np.float32, op
        assert np.all(got == want), op


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, 300.0, -300.0], np.float32)
    model = _one_node("QuantizeLinear", {"x": x}, {},
                      {1: np.array(1.0, np.float32), 2: np.array(0, np.int8)}, opset=13,
                      out_type=T.INT8)
    got = _run(model, x)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [0, 2, 2, 0, 127, -128])


def test_unsupported_attribute_value_names_the_node():
    x, t = RNG.standard_normal((3, 4)), np.array([0, 1, 2], np.int64)
    model = _one_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, dict(reduction="median"),
                      opset=13)
    with pytest.raises(UnsupportedOnnxOpError, match="SoftmaxCrossEntropyLoss.*median"):
        _run(model, x, t)
