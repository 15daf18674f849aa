"""Helpers of the ONNX handler tests: one-node models built with ``onnx.helper``."""
import onnx
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh


def one_node_model(op, inputs, attrs=None, consts=None, opset=22, n_out=1,
                   out_types=T.DOUBLE, out_shape=None):
    """A model of one ``op`` node: ``inputs`` ({name: array}) are graph inputs, ``consts``
    ({position: array}) initializers at those input positions ('' fills skipped
    positions); ``out_types`` one element type or one per output; ``out_shape`` where
    ONNX's shape inference cannot give the outputs' shapes."""
    consts = dict(consts or {})
    names = list(inputs)
    for pos in sorted(consts):
        while len(names) < pos:
            names.append("")
        names.insert(pos, f"c{pos}")
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for k, v in inputs.items()]
    types = list(out_types) if isinstance(out_types, (list, tuple)) else [out_types] * n_out
    ovi = [helper.make_tensor_value_info(o, t, out_shape) for o, t in zip(outs, types)]
    g = helper.make_graph([node], "g", vi, ovi,
                          initializer=[nh.from_array(v, f"c{k}") for k, v in consts.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model)  # the outputs' shapes
