"""``fnx.onnx``: export fnx functions as ONNX models.

    import fnx, fnx.onnx
    import fnx.numpy as fnp

    def mlp(params, x):
        return fnp.tanh(x @ params["w"] + params["b"])

    model = fnx.onnx.export(mlp, params, fnx.ShapeDtypeStruct((8, 3), "float32"))
    outputs = fnx.onnx.run(model, params, x)          # onnxruntime, CPU

``export`` traces the function (``fnx.make_ir``) and lowers each primitive
through its ``prim.onnx`` rule; ``lower_primitive`` builds a one-equation model
for checking one rule. A rule is ``lower(ctx, *input_names, **params)`` that
adds nodes through ``ctx`` (a ``LoweringContext``) and returns its output
name(s): see ``fnx.onnx.export``. The rules of the built-in primitives live in
``fnx.onnx.lowerings`` (with the list of primitives left out, and why).

The ``onnx`` package (and ``onnxruntime`` for ``run``) is imported only when
needed: ``pip install fnx[onnx]``.
"""
from .export import (DEFAULT_OPSET, LoweringContext, UnsupportedDtypeError, export,
                     export_ir, lower_ir, lower_primitive, onnx_dtype, run)
from . import lowerings as _lowerings
from ..core.backend import register_backend as _register_backend
from .backend import OnnxBackend

_lowerings.install()
_register_backend(OnnxBackend())

__all__ = ["DEFAULT_OPSET", "LoweringContext", "OnnxBackend", "UnsupportedDtypeError", "export",
           "export_ir",
           "lower_ir", "lower_primitive", "onnx_dtype", "run"]
