"""ONNX handlers of convolutions, pooling, normalizations, resizing, sampling and dropout
(``fnx/onnx/ops/nn.py``): what the ONNX node suite does not check: derivatives against
finite differences through ``fnx.onnx.to_function``, jit against eager, MaxPool's
Indices under jit, and the errors for values fnx cannot run."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import fnx  # noqa: E402
from fnx.onnx import OnnxImportError, UnsupportedOnnxOpError  # noqa: E402
from fnx.testing import check_grads  # noqa: E402

from onnx_testing import one_node_model  # noqa: E402

RNG = np.random.default_rng(0)


def _model(op, inputs, attrs=None, consts=None, opset=22, n_out=1, out_types=None,
           out_shape=None):
    return one_node_model(op, inputs, attrs, consts, opset, n_out,
                          out_types or T.DOUBLE, out_shape)


def _f64(*shape):
    return RNG.standard_normal(shape)


def _grid(*shape):
    return RNG.uniform(-1.1, 1.1, shape)


# (name, op, differentiated inputs, attrs, constant inputs, opset)
GRAD_CASES = [
    ("conv_group_strided", "Conv", [_f64(1, 4, 6, 5), _f64(6, 2, 3, 2), _f64(6)],
     dict(group=2, strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2]), {}, 22),
    ("conv_same_1d", "Conv", [_f64(2, 3, 7), _f64(4, 3, 3)], dict(auto_pad="SAME_LOWER",
                                                                  strides=[2]), {}, 22),
    ("conv_transpose", "ConvTranspose", [_f64(1, 4, 3, 3), _f64(4, 3, 3, 2), _f64(6)],
     dict(group=2, strides=[2, 3], output_padding=[1, 0], pads=[1, 0, 0, 1]), {}, 22),
    ("avgpool_ceil", "AveragePool", [_f64(1, 2, 5, 6)],
     dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1], ceil_mode=1), {}, 22),
    ("maxpool_dilated", "MaxPool", [_f64(1, 2, 6, 6)],
     dict(kernel_shape=[2, 2], dilations=[2, 1], pads=[1, 1, 1, 1]), {}, 22),
    ("lppool", "LpPool", [_f64(1, 2, 4, 5)], dict(kernel_shape=[2, 2], p=3), {}, 22),
    ("batchnorm", "BatchNormalization", [_f64(2, 3, 4), _f64(3), _f64(3)], {},
     {3: _f64(3), 4: RNG.uniform(0.5, 2, 3)}, 15),
    ("layernorm", "LayerNormalization", [_f64(2, 3, 4), _f64(3, 4), _f64(3, 4)],
     dict(axis=1, stash_type=T.DOUBLE), {}, 17),
    ("groupnorm", "GroupNormalization", [_f64(2, 4, 3), _f64(4), _f64(4)],
     dict(num_groups=2, stash_type=T.DOUBLE), {}, 21, (2, 4, 3)),
    ("rmsnorm", "RMSNormalization", [_f64(2, 3, 4), _f64(4)], dict(stash_type=T.DOUBLE),
     {}, 23),
    ("instancenorm", "InstanceNormalization", [_f64(2, 3, 5), _f64(3), _f64(3)], {}, {}, 22),
    ("lrn", "LRN", [_f64(1, 5, 3, 2)], dict(size=3, alpha=0.1, beta=0.6), {}, 13),
    ("resize_cubic", "Resize", [_f64(1, 1, 3, 4)], dict(mode="cubic", exclude_outside=1),
     {2: np.array([1, 1, 1.7, 0.6])}, 19, (1, 1, 5, 2)),
    ("resize_linear_antialias", "Resize", [_f64(1, 2, 6, 5)],
     dict(mode="linear", antialias=1, axes=[2, 3]), {3: np.array([3, 4], np.int64)}, 19),
    ("gridsample_cubic", "GridSample", [_f64(1, 2, 4, 3), _grid(1, 3, 2, 2)],
     dict(mode="cubic", padding_mode="reflection"), {}, 22),
    ("gridsample_linear_3d", "GridSample", [_f64(1, 1, 3, 4, 3), _grid(1, 2, 2, 2, 3)],
     dict(mode="linear", align_corners=1), {}, 22),
    ("affine_grid", "AffineGrid", [_f64(2, 2, 3)], {}, {1: np.array([2, 1, 3, 4], np.int64)},
     20),
    ("deform_conv", "DeformConv", [_f64(1, 2, 4, 4), _f64(2, 2, 2, 2), _f64(1, 8, 3, 3) * 0.7],
     dict(kernel_shape=[2, 2]), {}, 22),
    ("roialign", "RoiAlign", [_f64(1, 2, 5, 5)],
     dict(output_height=2, output_width=2, sampling_ratio=2),
     {1: np.array([[0.3, 0.6, 3.2, 4.1]]), 2: np.array([0], np.int64)}, 22),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_finite_differences(case):
    _name, op, xs, attrs, consts, opset, *shape = case
    inputs = {f"x{i}": x for i, x in enumerate(xs)}
    with fnx.enable_x64(True):  # float64 initializers stay float64
        fn, params = fnx.onnx.to_function(_model(op, inputs, attrs, consts, opset,
                                                 out_shape=shape[0] if shape else None))
        check_grads(lambda *a: fn(params, *a), tuple(xs), order=1, modes=("rev",))


def test_jit_matches_eager_and_maxpool_indices():
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p", "i"], kernel_shape=[3, 2], strides=[2, 2],
                         ceil_mode=1, storage_order=1),
        helper.make_node("Resize", ["p", "", "s"], ["y"], mode="linear",
                         coordinate_transformation_mode="align_corners"),
    ]
    inits = [nh.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             nh.from_array(RNG.standard_normal(4).astype(np.float32), "b"),
             nh.from_array(np.array([1, 1, 1.5, 2], np.float32), "s")]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, None),
                           helper.make_tensor_value_info("i", T.INT64, None),
                           helper.make_tensor_value_info("p", T.FLOAT, None)],
                          initializer=inits)
    fn, params = fnx.onnx.to_function(onnx.shape_inference.infer_shapes(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 19)])))
    with fnx.enable_x64(True):  # Indices are int64
        eager = fn(params, x)
        jitted = fnx.jit(fn)(params, x)
    for k in ("y", "i", "p"):
        assert np.asarray(eager[k]).dtype == np.asarray(jitted[k]).dtype
        np.testing.assert_allclose(np.asarray(jitted[k]), np.asarray(eager[k]), rtol=1e-6)
    # the indices address the conv output, flattened with column-major spatial dims
    c = np.asarray(fnx.onnx.to_function(onnx.shape_inference.infer_shapes(helper.make_model(
        helper.make_graph(nodes[:1], "g", [helper.make_tensor_value_info("x", T.FLOAT,
                                                                         x.shape)],
                          [helper.make_tensor_value_info("c", T.FLOAT, None)],
                          initializer=inits[:2]),
        opset_imports=[helper.make_opsetid("", 19)])))[0](params, x))
    cf = np.swapaxes(c, 2, 3).reshape(-1)
    i = np.asarray(eager["i"])
    assert i.dtype == np.int64 and i.shape == (2, 4, 3, 3)
    n, ch = np.meshgrid(np.arange(2), np.arange(4), indexing="ij")
    base = (n * 4 + ch)[..., None, None] * 42
    spatial = i - base
    assert ((spatial >= 0) & (spatial < 42)).all()
    np.testing.assert_array_equal(cf[i.reshape(-1)].reshape(i.shape), np.asarray(eager["p"]))


def test_dropout_is_identity_in_inference():
    x = _f64(3, 4)
    with fnx.enable_x64(True):
        fn, params = fnx.onnx.to_function(_model(
            "Dropout", {"x": x}, consts={1: np.array(0.3), 2: np.array(False)}, n_out=2,
            out_types=[T.DOUBLE, T.BOOL]))
        out = fn(params, x)
    np.testing.assert_array_equal(np.asarray(out["y0"]), x)
    assert np.asarray(out["y1"]).dtype == np.bool_ and np.asarray(out["y1"]).all()


def test_unsupported_values_raise_clear_errors():
    with fnx.enable_x64(True):
        x = _f64(1, 1, 4, 4)
        fn, params = fnx.onnx.to_function(_model(
            "Dropout", {"x": x}, consts={1: np.array(0.5), 2: np.array(True)}))
        with pytest.raises(UnsupportedOnnxOpError, match="training-mode dropout"):
            fn(params, x)
        fn, params = fnx.onnx.to_function(_model(
            "Resize", {"x": x}, dict(mode="linear", coordinate_transformation_mode="corner"),
            {2: np.array([1, 1, 2, 2])}, opset=19, out_shape=(1, 1, 8, 8)))
        with pytest.raises(UnsupportedOnnxOpError, match="coordinate_transformation_mode"):
            fn(params, x)
        # scales computed from the model's inputs cannot set a traced shape
        fn, params = fnx.onnx.to_function(_model(
            "Resize", {"x": x, "r": np.zeros(0), "s": np.ones(4)}, dict(mode="nearest"),
            opset=19, out_shape=(1, 1, 4, 4)))
        with pytest.raises(OnnxImportError, match="must be known"):
            fnx.jit(fn)(params, x, np.zeros(0), np.ones(4))
