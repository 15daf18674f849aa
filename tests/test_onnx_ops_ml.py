"""ONNX handlers of ``fnx/onnx/ops/ml.py`` (ai.onnx.ml, training optimizers,
NonMaxSuppression, TfIdfVectorizer) and the integer convolutions and BitCast added to
``math.py`` / ``elementwise.py``: what the ONNX node suite does not check: derivatives
against finite differences through ``fnx.onnx.to_function``, jit and vmap against eager,
NonMaxSuppression's eager rerun, and the errors for values fnx cannot express."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import fnx  # noqa: E402
from fnx.onnx import StaticInputError, UnsupportedOnnxOpError  # noqa: E402
from fnx.testing import check_grads  # noqa: E402

RNG = np.random.default_rng(0)
ML = "ai.onnx.ml"
TRAINING = "ai.onnx.preview.training"


@pytest.fixture(autouse=True)
def _x64():
    with fnx.enable_x64(True):  # float64 and int64 stay as the models declare them
        yield


def _model(op, inputs, attrs=None, n_out=1, domain="", opsets=(("", 21),), out=T.DOUBLE,
           out_shape=None):
    """A one-node model whose inputs ({name: array}) are graph inputs; its outputs are of
    the ONNX type ``out``, of shape ``out_shape`` where shape inference gives none."""
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, list(inputs), outs, domain=domain, **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                        v.shape) for k, v in inputs.items()]
    ovi = [helper.make_tensor_value_info(o, out, out_shape) for o in outs]
    g = helper.make_graph([node], "g", vi, ovi)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v)
                                                for d, v in opsets])
    return onnx.shape_inference.infer_shapes(model)  # the outputs' shapes


def _fn(model):
    apply_fn, params = fnx.onnx.to_function(model)
    return lambda *xs: apply_fn(params, *xs)


def _tree_model(x, post=0, agg=1):
    # tree 1: x0 <= 0.5 ? (x1 in {1, 3} ? leaf0 : leaf1) : leaf2; tree 2 is a root that
    # is a leaf (both branches leaves, to one id): the leaf of the root's own index, 2
    attrs = dict(
        nodes_featureids=[0, 1, 0], nodes_truenodeids=[1, 0, 3],
        nodes_falsenodeids=[2, 1, 3], nodes_trueleafs=[0, 1, 1],
        nodes_falseleafs=[1, 1, 1],
        nodes_modes=nh.from_array(np.array([0, 6, 0], np.uint8)),
        nodes_splits=nh.from_array(np.array([0.5, np.nan, 0.0])),
        membership_values=nh.from_array(np.array([1.0, 3.0, np.nan])),
        leaf_weights=nh.from_array(np.array([1.0, 2.0, 3.0, 0.5])),
        leaf_targetids=[0, 1, 1, 0], tree_roots=[0, 2], n_targets=2,
        aggregate_function=agg, post_transform=post)
    return _model("TreeEnsemble", {"x": x}, attrs, domain=ML,
                  opsets=(("", 21), (ML, 5)))


def test_optimizer_steps_gradients():
    r, t = np.array(0.1), np.array(3, np.int64)
    x, g, v, h = RNG.standard_normal((4, 3))
    h = np.abs(h) + 0.5
    adam = _fn(_model("Adam", dict(R=r, T=t, X=x, G=g, V=v, H=h),
                      dict(alpha=0.9, beta=0.99, epsilon=1e-6, norm_coefficient=0.01,
                           norm_coefficient_post=0.02), n_out=3, domain=TRAINING,
                      opsets=((TRAINING, 1),)))
    check_grads(lambda x, g, v, h: adam(r, t, x, g, v, h), (x, g, v, h), order=1)
    mom = _fn(_model("Momentum", dict(R=r, T=t, X=x, G=g, V=v),
                     dict(alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.01),
                     n_out=2, domain=TRAINING, opsets=((TRAINING, 1),)))
    check_grads(lambda x, g, v: mom(r, t, x, g, v), (x, g, v), order=1)
    ada = _fn(_model("Adagrad", dict(R=r, T=t, X=x, G=g, H=h),
                     dict(decay_factor=0.1, epsilon=1e-6, norm_coefficient=0.01),
                     n_out=2, domain=TRAINING, opsets=((TRAINING, 1),)))
    check_grads(lambda x, g, h: ada(r, t, x, g, h), (x, g, h), order=1)
    # T == 0: no bias correction (Adam), the gradient's coefficient is 1 (Momentum)
    x0, v0 = mom(r, np.array(0, np.int64), x, g, v).values()
    a, lam = np.float32(0.9), np.float32(0.01)  # float attributes are float32
    np.testing.assert_allclose(np.asarray(v0), a * v + (g + lam * x), rtol=1e-12)


def test_array_feature_extractor_gradient_and_vector_shape():
    x = RNG.standard_normal((2, 3, 5))
    idx = np.array([4, 0, 4], np.int64)
    m = _model("ArrayFeatureExtractor", {"x": x, "i": idx}, domain=ML,
               opsets=(("", 21), (ML, 1)), out_shape=(2, 3, 3))
    f = _fn(m)
    np.testing.assert_array_equal(np.asarray(f(x, idx)), x[..., idx])
    check_grads(lambda x: f(x, idx), (x,), order=1)
    v = RNG.standard_normal(5)
    mv = _model("ArrayFeatureExtractor", {"x": v, "i": idx}, domain=ML,
                opsets=(("", 21), (ML, 1)), out_shape=(1, 3))
    assert np.asarray(_fn(mv)(v, idx)).shape == (1, 3)  # a vector gives one row


def test_tree_ensemble_jit_matches_eager_and_post_transforms():
    x = np.array([[0.2, 1.0], [0.2, 2.0], [0.9, 3.0], [np.nan, 3.0], [0.5, 3.0]])
    f = _fn(_tree_model(x))
    want = np.array([[1.0, 3.0], [0.0, 5.0], [0.0, 6.0], [0.0, 6.0], [1.0, 3.0]])
    np.testing.assert_allclose(np.asarray(f(x)), want)
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(x)), np.asarray(f(x)))
    soft = _fn(_tree_model(x, post=1))
    e = np.exp(want - want.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(soft(x)), e / e.sum(1, keepdims=True))
    mx = _fn(_tree_model(x, agg=3))  # MAX over the trees; no leaf for a target: lowest
    lo = np.finfo(np.float64).min
    np.testing.assert_allclose(np.asarray(mx(x)),
                               [[1, 3], [lo, 3], [lo, 3], [lo, 3], [1, 3]])


def test_tfidf_label_encoder_conv_integer_jit():
    x = np.array([[1, 2, 3, 1, 2], [2, 2, 1, 3, 3]], np.int64)
    tf = _model("TfIdfVectorizer", {"x": x},
                dict(min_gram_length=1, max_gram_length=2, max_skip_count=1,
                     mode="TFIDF", ngram_counts=[0, 2], ngram_indexes=[2, 0, 1, 3],
                     pool_int64s=[1, 2, 1, 2, 2, 3], weights=[1.0, 2.0, 3.0, 4.0]),
                opsets=(("", 9),), out=T.FLOAT)
    f = _fn(tf)
    # per row: counts of 1, 2, (1, 2), (2, 3) with skips 0 and 1, 1-grams once
    counts = np.array([[2, 2, 2, 1], [1, 2, 0, 1]], np.float32)
    want = np.zeros((2, 4), np.float32)
    want[:, [2, 0, 1, 3]] = counts
    np.testing.assert_array_equal(np.asarray(f(x)), want * [1, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(x)), np.asarray(f(x)))

    keys = np.array([0.5, np.nan, 2.0, 0.5])
    le = _model("LabelEncoder", {"x": np.zeros(4)},
                dict(keys_tensor=nh.from_array(keys),
                     values_tensor=nh.from_array(np.array([1, 2, 3, 4], np.int32)),
                     default_tensor=nh.from_array(np.array([-9], np.int32))),
                domain=ML, opsets=(("", 21), (ML, 4)), out=T.INT32)
    g = _fn(le)
    xs = np.array([0.5, np.nan, 7.0, 2.0])
    got = fnx.jit(g)(xs)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [4, 2, -9, 3])  # the last key wins

    xi = RNG.integers(0, 255, (2, 3, 6, 5)).astype(np.uint8)
    w = RNG.integers(-128, 127, (4, 3, 3, 2)).astype(np.int8)
    ci = _model("ConvInteger", {"x": xi, "w": w, "xz": np.array(7, np.uint8),
                                "wz": np.array([1, -2, 3, 0], np.int8)},
                dict(strides=[2, 1], dilations=[1, 2], auto_pad="SAME_UPPER"),
                opsets=(("", 10),), out=T.INT32)
    h = _fn(ci)
    args = (xi, w, np.array(7, np.uint8), np.array([1, -2, 3, 0], np.int8))
    eager = np.asarray(h(*args))
    assert eager.dtype == np.int32 and eager.shape == (2, 4, 3, 5)
    np.testing.assert_array_equal(np.asarray(fnx.jit(h)(*args)), eager)


def test_bitcast_jit_and_vmap_keep_the_bits():
    x = np.array([[1.0, -0.0, np.inf], [np.nan, 2.5, -1e-40]], np.float32)
    m = _model("BitCast", {"x": x}, dict(to=T.INT32), opsets=(("", 26),),
               out=T.INT32)
    f = _fn(m)
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(x)), x.view(np.int32))
    row = _fn(_model("BitCast", {"x": x[0]}, dict(to=T.INT32), opsets=(("", 26),),
                     out=T.INT32))
    np.testing.assert_array_equal(np.asarray(fnx.vmap(row)(x)), x.view(np.int32))
    back = _fn(_model("BitCast", {"x": x.view(np.int32)}, dict(to=T.FLOAT),
                      opsets=(("", 26),), out=T.FLOAT))
    np.testing.assert_array_equal(np.asarray(fnx.jit(back)(x.view(np.int32))).view(
        np.int32), x.view(np.int32))


def test_non_max_suppression_runs_eagerly_under_the_backend():
    import fnx.onnx.backend as backend
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    inputs = dict(boxes=boxes, scores=scores, m=np.array([2], np.int64),
                  iou=np.array([0.5], np.float32))
    m = _model("NonMaxSuppression", inputs, opsets=(("", 11),), out=T.INT64)
    with pytest.raises(StaticInputError):
        fnx.jit(_fn(m))(*inputs.values())
    got = backend.prepare(m).run(list(inputs.values()))[0]  # jit fails, reruns eagerly
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 2]])


def test_string_attributes_raise_clear_errors():
    x = np.zeros(3)
    le = _model("LabelEncoder", {"x": x}, dict(keys_strings=["a"], values_floats=[1.0]),
                domain=ML, opsets=(("", 21), (ML, 4)), out=T.FLOAT, out_shape=(3,))
    with pytest.raises(UnsupportedOnnxOpError, match="string keys"):
        _fn(le)(x)
    xi = np.zeros(3, np.int64)
    tf = _model("TfIdfVectorizer", {"x": xi},
                dict(min_gram_length=1, max_gram_length=1, max_skip_count=0, mode="TF",
                     ngram_counts=[0], ngram_indexes=[0], pool_strings=["a"]),
                opsets=(("", 9),), out=T.FLOAT)
    with pytest.raises(UnsupportedOnnxOpError, match="pool_strings"):
        _fn(tf)(xi)
    with pytest.raises(UnsupportedOnnxOpError, match="aggregate_function"):
        _fn(_tree_model(np.zeros((1, 2)), agg=7))(np.zeros((1, 2)))
