"""ONNX models in the shape other frameworks export them, built with ``onnx.helper``: a
ResNet basic block and a transformer encoder layer as ``torch.onnx.export`` writes them
(opset 17, PyTorch's parameter names, shape arithmetic through ``Shape``/``Gather``/
``Concat``), and an LSTM as one ``LSTM`` node. Used by the import tests and
``benchmarks/onnx_import.py``. Each builder takes the element type (float32 for comparing
with onnxruntime, float64 for finite differences) and returns ``(model, example
inputs)``."""
from __future__ import annotations

import numpy as np


def _h():
    import onnx
    from onnx import helper, numpy_helper
    return onnx, helper, numpy_helper


def _finish(nodes, inputs, outputs, inits, name, opset=17):
    onnx, helper, nh = _h()
    g = helper.make_graph(nodes, name, inputs, outputs,
                          initializer=[nh.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch")
    onnx.checker.check_model(model)
    return model


def resnet_block(dtype=np.float32, batch=2, channels=16, size=14, seed=0):
    """conv3x3-BN-ReLU-conv3x3-BN + identity, ReLU (torchvision's BasicBlock, training
    graph: the BatchNorms are not folded into the convolutions)."""
    onnx, helper, _ = _h()
    rng = np.random.default_rng(seed)
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    c = channels
    inits = {}
    for i in (1, 2):
        p = f"layer1.0.conv{i}.weight"
        inits[p] = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(dtype)
        b = f"layer1.0.bn{i}"
        inits[f"{b}.weight"] = (1 + 0.1 * rng.standard_normal(c)).astype(dtype)
        inits[f"{b}.bias"] = (0.1 * rng.standard_normal(c)).astype(dtype)
        inits[f"{b}.running_mean"] = (0.1 * rng.standard_normal(c)).astype(dtype)
        inits[f"{b}.running_var"] = (1 + 0.1 * rng.random(c)).astype(dtype)
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1],
                group=1)
    bn = lambda i, x, y: helper.make_node(  # noqa: E731
        "BatchNormalization", [x] + [f"layer1.0.bn{i}.{k}" for k in
                                     ("weight", "bias", "running_mean", "running_var")],
        [y], epsilon=1e-5, momentum=0.9, name=f"/layer1/layer1.0/bn{i}/BatchNormalization")
    nodes = [
        helper.make_node("Conv", ["input", "layer1.0.conv1.weight"], ["/conv1/Conv_output_0"],
                         name="/layer1/layer1.0/conv1/Conv", **conv),
        bn(1, "/conv1/Conv_output_0", "/bn1/output_0"),
        helper.make_node("Relu", ["/bn1/output_0"], ["/relu/Relu_output_0"],
                         name="/layer1/layer1.0/relu/Relu"),
        helper.make_node("Conv", ["/relu/Relu_output_0", "layer1.0.conv2.weight"],
                         ["/conv2/Conv_output_0"], name="/layer1/layer1.0/conv2/Conv", **conv),
        bn(2, "/conv2/Conv_output_0", "/bn2/output_0"),
        helper.make_node("Add", ["/bn2/output_0", "input"], ["/Add_output_0"],
                         name="/layer1/layer1.0/Add"),
        helper.make_node("Relu", ["/Add_output_0"], ["output"], name="/layer1/layer1.0/relu_1/Relu"),
    ]
    shape = ["batch", c, size, size]
    model = _finish(nodes, [helper.make_tensor_value_info("input", et, shape)],
                    [helper.make_tensor_value_info("output", et, shape)], inits, "resnet_block")
    x = rng.standard_normal((batch, c, size, size)).astype(dtype)
    return model, (x,)


def transformer_layer(dtype=np.float32, batch=2, seq=16, d_model=64, heads=4, d_ff=128,
                      seed=0):
    """``nn.TransformerEncoderLayer(d_model, heads, d_ff, activation="gelu",
    batch_first=True)`` in evaluation mode as ``torch.onnx.export`` writes it: fused
    in-projection, heads split by Reshape/Transpose with the batch and sequence sizes
    read by Shape/Gather, scaled dot-product attention with Softmax, exact GELU through
    Erf, post-norm LayerNormalization (its statistics in the model's precision,
    ``stash_type``, so the float64 model is float64 throughout)."""
    onnx, helper, nh = _h()
    rng = np.random.default_rng(seed)
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    d, h, dh = d_model, heads, d_model // heads

    def w(*shape, scale=None):
        scale = scale or 1 / np.sqrt(shape[0])
        return (rng.standard_normal(shape) * scale).astype(dtype)
    inits = {
        "self_attn.in_proj_weight_T": w(d, 3 * d), "self_attn.in_proj_bias": w(3 * d, scale=0.02),
        "self_attn.out_proj.weight_T": w(d, d), "self_attn.out_proj.bias": w(d, scale=0.02),
        "linear1.weight_T": w(d, d_ff), "linear1.bias": w(d_ff, scale=0.02),
        "linear2.weight_T": w(d_ff, d), "linear2.bias": w(d, scale=0.02),
        "norm1.weight": (1 + 0.1 * rng.standard_normal(d)).astype(dtype),
        "norm1.bias": w(d, scale=0.02),
        "norm2.weight": (1 + 0.1 * rng.standard_normal(d)).astype(dtype),
        "norm2.bias": w(d, scale=0.02),
        "/Constant_0": np.array(0, np.int64), "/Constant_1": np.array(1, np.int64),
        "/heads": np.array([h], np.int64), "/head_dim": np.array([dh], np.int64),
        "/d_model": np.array([d], np.int64), "/axes0": np.array([0], np.int64),
        "/split": np.array([d, d, d], np.int64),
        "/scale": np.array(np.sqrt(dh), dtype), "/sqrt2": np.array(np.sqrt(2.0), dtype),
        "/one": np.array(1.0, dtype), "/half": np.array(0.5, dtype),
    }
    n = helper.make_node
    nodes = [
        n("Shape", ["src"], ["/shape"]),
        n("Gather", ["/shape", "/Constant_0"], ["/B"], axis=0),
        n("Gather", ["/shape", "/Constant_1"], ["/S"], axis=0),
        n("Unsqueeze", ["/B", "/axes0"], ["/B1"]),
        n("Unsqueeze", ["/S", "/axes0"], ["/S1"]),
        n("Concat", ["/B1", "/S1", "/heads", "/head_dim"], ["/heads_shape"], axis=0),
        n("Concat", ["/B1", "/S1", "/d_model"], ["/model_shape"], axis=0),
        n("MatMul", ["src", "self_attn.in_proj_weight_T"], ["/qkv0"]),
        n("Add", ["/qkv0", "self_attn.in_proj_bias"], ["/qkv"]),
        n("Split", ["/qkv", "/split"], ["/q0", "/k0", "/v0"], axis=-1),
    ]
    for t in ("q", "k", "v"):
        nodes.append(n("Reshape", [f"/{t}0", "/heads_shape"], [f"/{t}1"]))
    nodes += [
        n("Transpose", ["/q1"], ["/q"], perm=[0, 2, 1, 3]),
        n("Transpose", ["/k1"], ["/kT"], perm=[0, 2, 3, 1]),
        n("Transpose", ["/v1"], ["/v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["/q", "/kT"], ["/scores0"]),
        n("Div", ["/scores0", "/scale"], ["/scores"]),
        n("Softmax", ["/scores"], ["/attn"], axis=-1),
        n("MatMul", ["/attn", "/v"], ["/ctx0"]),
        n("Transpose", ["/ctx0"], ["/ctx1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["/ctx1", "/model_shape"], ["/ctx"]),
        n("MatMul", ["/ctx", "self_attn.out_proj.weight_T"], ["/sa0"]),
        n("Add", ["/sa0", "self_attn.out_proj.bias"], ["/sa"]),
        n("Add", ["src", "/sa"], ["/res1"]),
        n("LayerNormalization", ["/res1", "norm1.weight", "norm1.bias"], ["/x1"], axis=-1,
          epsilon=1e-5, stash_type=et),
        n("MatMul", ["/x1", "linear1.weight_T"], ["/ff0"]),
        n("Add", ["/ff0", "linear1.bias"], ["/ff1"]),
        n("Div", ["/ff1", "/sqrt2"], ["/g0"]),
        n("Erf", ["/g0"], ["/g1"]),
        n("Add", ["/g1", "/one"], ["/g2"]),
        n("Mul", ["/ff1", "/g2"], ["/g3"]),
        n("Mul", ["/g3", "/half"], ["/gelu"]),
        n("MatMul", ["/gelu", "linear2.weight_T"], ["/ff2"]),
        n("Add", ["/ff2", "linear2.bias"], ["/ff"]),
        n("Add", ["/x1", "/ff"], ["/res2"]),
        n("LayerNormalization", ["/res2", "norm2.weight", "norm2.bias"], ["output"], axis=-1,
          epsilon=1e-5, stash_type=et),
    ]
    shape = ["batch", "seq", d]
    model = _finish(nodes, [helper.make_tensor_value_info("src", et, shape)],
                    [helper.make_tensor_value_info("output", et, shape)], inits,
                    "transformer_encoder_layer")
    x = rng.standard_normal((batch, seq, d)).astype(dtype)
    return model, (x,)


def lstm(dtype=np.float32, seq=12, batch=3, inputs=8, hidden=16, seed=0):
    """One forward LSTM layer as one ``LSTM`` node (``torch.onnx.export`` of ``nn.LSTM``
    writes this node, with PyTorch's gates reordered to ONNX's iofc), all three outputs."""
    onnx, helper, _ = _h()
    rng = np.random.default_rng(seed)
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    s = 1 / np.sqrt(hidden)
    inits = {"lstm.W": (rng.uniform(-s, s, (1, 4 * hidden, inputs))).astype(dtype),
             "lstm.R": (rng.uniform(-s, s, (1, 4 * hidden, hidden))).astype(dtype),
             "lstm.B": (rng.uniform(-s, s, (1, 8 * hidden))).astype(dtype)}
    node = helper.make_node("LSTM", ["input", "lstm.W", "lstm.R", "lstm.B"],
                            ["Y", "Y_h", "Y_c"], hidden_size=hidden, name="/lstm/LSTM")
    model = _finish([node], [helper.make_tensor_value_info("input", et, [seq, "batch", inputs])],
                    [helper.make_tensor_value_info("Y", et, [seq, 1, "batch", hidden]),
                     helper.make_tensor_value_info("Y_h", et, [1, "batch", hidden]),
                     helper.make_tensor_value_info("Y_c", et, [1, "batch", hidden])],
                    inits, "lstm")
    x = rng.standard_normal((seq, batch, inputs)).astype(dtype)
    return model, (x,)


MODELS = {"resnet_block": resnet_block, "transformer_layer": transformer_layer, "lstm": lstm}
