"""ONNX as a backend: its ``compile`` builds a ``ModelProto`` (``export_ir``) instead of
something to run; the primitives' ``"onnx"`` lowerings are its rules."""
from __future__ import annotations

import importlib.util

from ..core.backend import Backend, Executable
from .export import DEFAULT_OPSET, export_ir


class OnnxBackend(Backend):
    name = "onnx"
    platform = ""  # it exports; onnxruntime runs the model (``fnx.onnx.run``)

    def available(self):
        return importlib.util.find_spec("onnx") is not None

    def compile(self, ir, name="fnx", donated=(), opset=DEFAULT_OPSET):
        """The ONNX model of ``ir`` (checked by ``onnx.checker``), as an ``Executable``
        whose ``model`` is the ``ModelProto``; ``donated`` means nothing to a model."""
        model = export_ir(ir, opset=opset, name=name)
        exe = Executable(None, None, self)
        exe.model = model
        return exe
