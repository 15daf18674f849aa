"""Layers given inputs of the wrong rank or feature count, and fnx.onnx.run given
malformed models, raise errors that name the layer/input, the expected size and the
shape given (not an error from deep inside an op, nor a bare KeyError)."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import nn, random
from fnx.errors import IndexOutOfBoundsError, ShapeError

KEY = random.PRNGKey(0)


def raises_shape(fn, *parts):
    """``fn()`` raises a ShapeError (a TypeError and a ValueError) whose message holds
    every one of ``parts``."""
    with pytest.raises(ShapeError) as err:
        fn()
    assert isinstance(err.value, ValueError) and isinstance(err.value, TypeError)
    msg = str(err.value)
    for p in parts:
        assert p in msg, (p, msg)
    return msg


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_batchnorm_channel_mismatch_names_layer_and_channels(mode):
    bn = nn.BatchNorm2d(3)
    bn = bn.eval() if mode == "eval" else bn
    msg = raises_shape(lambda: bn(fnp.ones((2, 4, 5, 5))), "BatchNorm2d", "3 channels",
                       "(2, 4, 5, 5)", "BatchNorm2d(4)")
    assert "add:" not in msg and "subtract:" not in msg
    # under jit (shapes are checked while tracing) and fnx.nn.apply
    raises_shape(lambda: fnx.jit(lambda m, x: m(x))(bn, fnp.ones((2, 4, 5, 5))),
                 "BatchNorm2d", "3 channels")
    raises_shape(lambda: nn.apply(nn.BatchNorm1d(3), fnp.ones((2, 4))), "BatchNorm1d",
                 "3 channels", "(2, 4)")


def test_error_names_the_layer_in_its_model():
    model = nn.Sequential(nn.Linear(3, 4, key=KEY), nn.ReLU(), nn.BatchNorm1d(3))
    raises_shape(lambda: model(fnp.ones((2, 3))), "BatchNorm1d 'layers.2'", "3 channels",
                 "(2, 4)")

    class Block(nn.Module):
        def __init__(self):
            self.conv = nn.Conv2d(3, 8, 3, key=KEY)
            self.bn = nn.BatchNorm2d(6)

        def __call__(self, x):
            return self.bn(self.conv(x))
    raises_shape(lambda: nn.apply(Block(), fnp.ones((1, 3, 6, 6))), "BatchNorm2d 'bn'",
                 "6 channels", "(1, 8, 4, 4)")


@pytest.mark.parametrize("cls,shape,want", [
    (nn.BatchNorm2d, (2, 3), "4-d"), (nn.BatchNorm2d, (2, 3, 5), "4-d"),
    (nn.BatchNorm1d, (2, 3, 4, 4), "2-d or 3-d"), (nn.BatchNorm1d, (3,), "2-d or 3-d")])
def test_batchnorm_wrong_rank(cls, shape, want):
    raises_shape(lambda: cls(3)(fnp.ones(shape)), cls.__name__, want, str(shape))


def test_linear_feature_mismatch():
    lin = nn.Linear(3, 4, key=KEY)
    raises_shape(lambda: lin(fnp.ones((2, 5))), "Linear", "3 input features", "(2, 5)",
                 "Linear(5, 4)")
    raises_shape(lambda: lin(fnp.ones(())), "Linear", "0-d")
    assert lin(fnp.ones((2, 7, 3))).shape == (2, 7, 4)   # any leading axes


def test_conv_channel_and_rank_mismatch():
    conv = nn.Conv2d(3, 8, 3, key=KEY)
    raises_shape(lambda: conv(fnp.ones((1, 4, 8, 8))), "Conv2d", "3 input channels",
                 "(1, 4, 8, 8)")
    raises_shape(lambda: conv(fnp.ones((3, 8, 8))), "Conv2d", "4-d", "(N, C, H, W)",
                 "(3, 8, 8)", "x[None]")
    raises_shape(lambda: nn.Conv1d(3, 8, 3, key=KEY)(fnp.ones((1, 3, 8, 8))), "Conv1d",
                 "3-d", "(N, C, L)")
    grouped = nn.Conv2d(4, 8, 3, groups=2, key=KEY)
    assert grouped(fnp.ones((1, 4, 5, 5))).shape == (1, 8, 3, 3)
    raises_shape(lambda: grouped(fnp.ones((1, 2, 5, 5))), "Conv2d", "4 input channels")
    raises_shape(lambda: nn.ConvTranspose2d(3, 8, 3, key=KEY)(fnp.ones((1, 4, 8, 8))),
                 "ConvTranspose2d", "3 input channels", "(1, 4, 8, 8)")
    sep = nn.init(nn.SeparableConv2d(8, 3, depth_multiplier=2), KEY, fnp.ones((1, 3, 8, 8)))
    raises_shape(lambda: sep(fnp.ones((1, 4, 8, 8))), "SeparableConv2d", "3 input channels")


def test_norm_layers_mismatch():
    raises_shape(lambda: nn.LayerNorm(4)(fnp.ones((2, 5))), "LayerNorm", "(4,)", "(2, 5)")
    raises_shape(lambda: nn.LayerNorm((4, 5))(fnp.ones((2, 5, 4))), "LayerNorm", "(4, 5)",
                 "(2, 5, 4)")
    raises_shape(lambda: nn.LayerNorm((2, 4))(fnp.ones((4,))), "LayerNorm", "(2, 4)")
    ln = nn.init(nn.LayerNorm(), KEY, fnp.ones((2, 4)))     # size inferred, then fixed
    raises_shape(lambda: ln(fnp.ones((2, 5))), "LayerNorm", "(4,)", "(2, 5)")
    assert nn.LayerNorm(elementwise_affine=False)(fnp.ones((2, 5))).shape == (2, 5)
    raises_shape(lambda: nn.GroupNorm(2, 4)(fnp.ones((2, 6, 3))), "GroupNorm", "4 channels",
                 "(2, 6, 3)")
    raises_shape(lambda: nn.GroupNorm(2, 4)(fnp.ones((4,))), "GroupNorm", "rank >= 2")
    raises_shape(lambda: nn.GroupNorm(4, affine=False)(fnp.ones((2, 6, 3))), "GroupNorm",
                 "not divisible by 4 groups")


def test_attention_and_rnn_mismatch():
    mha = nn.MultiHeadAttention(2, 4, key=KEY)
    raises_shape(lambda: mha(fnp.ones((1, 3, 6))), "MultiHeadAttention",
                 "4 embedding features", "query", "(1, 3, 6)")
    raises_shape(lambda: mha(fnp.ones((3, 4))), "MultiHeadAttention", "3-d", "(3, 4)")
    raises_shape(lambda: mha(fnp.ones((1, 3, 4)), fnp.ones((1, 5, 4)), fnp.ones((1, 6, 4))),
                 "MultiHeadAttention", "(1, 5, 4)", "(1, 6, 4)")
    lstm = nn.LSTM(4, 3, key=KEY)
    raises_shape(lambda: lstm(fnp.ones((5, 2, 6))), "LSTM", "3 input features",
                 "(5, 2, 6)")
    raises_shape(lambda: nn.GRU(4, 3, key=KEY)(fnp.ones((5, 3))), "GRU", "3-d", "(5, 3)")


def test_embedding_indices_out_of_range():
    emb = nn.Embedding(5, 3, key=KEY)
    for bad, shown in (([0, 7], "7 at (1,)"), ([[1, -1]], "-1 at (0, 1)")):
        with pytest.raises(IndexError) as err:
            emb(np.array(bad))
        assert isinstance(err.value, IndexOutOfBoundsError)
        msg = str(err.value)
        assert "Embedding" in msg and "5 embeddings" in msg and shown in msg, msg
    # traced indices: out-of-range rows (negative too) are NaN, valid ones unchanged
    out = fnx.jit(lambda m, i: m(i))(emb, np.array([1, 7, -1]))
    np.testing.assert_array_equal(out[0], emb.weight[1])
    assert np.isnan(np.asarray(out[1:])).all()
    np.testing.assert_array_equal(emb(np.array([4, 0])), emb.weight[np.array([4, 0])])


def test_lazy_layers_still_infer_sizes():
    model = nn.Sequential(nn.Conv2d(6, 3, padding=1), nn.BatchNorm2d(), nn.ReLU(),
                          nn.GroupNorm(3), nn.Flatten(), nn.Linear(5), nn.LayerNorm())
    model = nn.init(model, KEY, fnx.ShapeDtypeStruct((2, 4, 5, 5), np.float32))
    assert model(fnp.ones((2, 4, 5, 5))).shape == (2, 5)
    raises_shape(lambda: model(fnp.ones((2, 3, 5, 5))), "Conv2d 'layers.0'",
                 "4 input channels")


# --- fnx.onnx.run on malformed models --------------------------------------------------

def _model(elem=None, op="Relu", inputs=("x",), shape=(2,)):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    elem = TensorProto.FLOAT if elem is None else elem
    x = helper.make_tensor_value_info("x", elem, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph([helper.make_node(op, list(inputs), ["y"])], "g", [x], [y])
    return onnx, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_onnx_run_undefined_input_type():
    import fnx.onnx as fonnx
    onnx, model = _model(elem=0)
    with pytest.raises(ValueError) as err:
        fonnx.run(model, np.ones(2, np.float32))
    assert not isinstance(err.value, KeyError)
    msg = str(err.value)
    assert "run:" in msg and "'x'" in msg and "undefined element type" in msg
    assert "elem_type" in msg                         # what to set
    with pytest.raises(ValueError, match="'x'.*undefined"):
        fonnx.run(model.SerializeToString(), np.ones(2, np.float32))
    model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT  # the fix
    np.testing.assert_array_equal(fonnx.run(model, np.array([-1.0, 2.0], np.float32))[0],
                                  [0.0, 2.0])


def test_onnx_run_malformed_models():
    import fnx.onnx as fonnx
    x = np.ones(2, np.float32)
    # onnxruntime's own errors name the node/value (their types stay: callers tell a
    # missing kernel, NotImplemented, from a malformed graph); fnx adds where
    for (op, inputs), kind, shown in ((("NoSuchOp", ("x",)), "InvalidGraph", "NoSuchOp"),
                                      (("Add", ("x", "w")), "InvalidArgument", "'w'")):
        _, bad = _model(op=op, inputs=inputs)
        with pytest.raises(Exception) as err:
            fonnx.run(bad, x)
        assert type(err.value).__name__ == kind and shown in str(err.value)
        notes = getattr(err.value, "__notes__", ["fnx.onnx.run"])
        assert any("fnx.onnx.run" in n and "check_model" in n for n in notes)
    _, good = _model()
    raises_shape(lambda: fonnx.run(good, np.ones(3, np.float32)), "run:", "'x'", "(2,)",
                 "(3,)")
    with pytest.raises(TypeError, match="run: model must be an onnx.ModelProto"):
        fonnx.run(lambda x: x, x)
    with pytest.raises(ValueError, match="not an ONNX model"):
        fonnx.run(b"\x00garbage", x)
    with pytest.raises(ValueError, match="no primitive named 'expp'.*'exp'"):
        fonnx.lower_primitive("expp", [fnx.ShapeDtypeStruct((2,), np.float32)])
