"""``fnx.onnx``: export fnx functions as ONNX models, and import ONNX models as fnx
functions and modules.

    import fnx, fnx.onnx
    import fnx.numpy as fnp

    def mlp(params, x):
        return fnp.tanh(x @ params["w"] + params["b"])

    model = fnx.onnx.export(mlp, params, fnx.ShapeDtypeStruct((8, 3), "float32"))
    outputs = fnx.onnx.run(model, params, x)          # onnxruntime, CPU

``export`` traces the function (``fnx.make_ir``) and lowers each primitive
through its ``"onnx"`` lowering (``fnx.backends.lowering(prim, "onnx")``, also
``prim.onnx``); ``lower_primitive`` builds a one-equation model for checking one rule.
A rule is ``lower(ctx, *input_names, **params)`` that adds nodes through ``ctx`` (a
``LoweringContext``) and returns its output name(s): see ``fnx.onnx.export``. The
rules of the built-in primitives are registered beside their other rules in the
``fnx.lax`` module defining each, written with the helpers of ``fnx.core.onnx_rules``
(whose docstring lists the primitives left out, and why). ``OnnxBackend`` is the
exporter as a backend (``fnx.backends.get_backend("onnx")``).

Import: ``load(model)`` (a path, bytes or ``ModelProto``) returns an ``OnnxModule``, an
``fnx.nn.Module`` holding the model's initializers as params and states;
``to_function(model)`` returns ``(apply_fn, params)``. Both are ordinary fnx code
(``jit``, ``grad``, ``vmap``, ``export``): each ONNX operator runs through a handler written
with ``fnx.numpy``/``fnx.lax`` (``fnx.onnx.graph``, ``fnx.onnx.ops``).
``fnx.onnx.backend`` is fnx as an ONNX backend (``prepare``, ``run_model``, ``run_node``),
for the ONNX backend test suite.

The ``onnx`` package (and ``onnxruntime`` for ``run``) is imported only when
needed: ``pip install fnx[onnx]``.
"""
from .export import (DEFAULT_OPSET, LoweringContext, UnsupportedDtypeError, export,
                     export_ir, lower_ir, lower_primitive, onnx_dtype, run)
from ..core.backend import register_backend as _register_backend
from .export_backend import OnnxBackend
from .graph import OnnxImportError, OnnxModelError, StaticInputError, UnsupportedOnnxOpError
from .importer import OnnxModule, load, to_function

_register_backend(OnnxBackend())

__all__ = ["DEFAULT_OPSET", "LoweringContext", "OnnxBackend", "UnsupportedDtypeError", "export",
           "export_ir", "lower_ir", "lower_primitive", "onnx_dtype", "run",
           "load", "to_function", "OnnxModule", "OnnxImportError", "OnnxModelError",
           "StaticInputError", "UnsupportedOnnxOpError", "supported_operators"]


def supported_operators():
    """The operators fnx.onnx runs with a handler of its own, as sorted ``(domain,
    op_type)`` pairs (the default domain is ``""``). Operators that the ONNX standard
    defines as functions of others run too, through their function bodies."""
    from .graph import _HANDLERS, _load_handlers
    _load_handlers()
    return sorted(_HANDLERS)
