"""fnx as an ONNX backend (``onnx.backend.base.Backend``'s interface, as module
functions): ``prepare(model)`` returns a ``BackendRep`` whose ``run(inputs)`` gives the
outputs as NumPy arrays; ``run_model`` and ``run_node`` do both at once. With it the ONNX
backend test suite runs against fnx::

    import onnx.backend.test
    import fnx.onnx.backend
    tests = onnx.backend.test.BackendTest(fnx.onnx.backend, __name__)

A prepared model runs under ``fnx.jit`` (one compiled program per input signature), and
eagerly where its output shapes depend on values (``NonZero``, ``Unique``: a jit trace
cannot know them). 64-bit types are kept as the model declares them (the model runs with
``jax_enable_x64`` on, whatever the process's setting).
"""
from __future__ import annotations

import numpy as np

from .._config import enable_x64
from ..errors import ConcretizationError
from ..transforms.jit import jit
from .importer import _Program, read_model

__all__ = ["BackendRep", "prepare", "run_model", "run_node", "supports_device",
           "is_compatible"]


class BackendRep:
    """A prepared model: ``run(inputs)`` (a list in the graph's input order, or a dict by
    name) returns the outputs, a list of NumPy arrays (lists of them for sequences)."""

    def __init__(self, model, use_jit=True, check=True):
        with enable_x64(True):
            self.program = _Program(read_model(model, check))
            self.params = dict(self.program.params)
            self.states = dict(self.program.states)
        self._jitted = jit(self._apply) if use_jit else None

    def _apply(self, params, states, inputs):
        return self.program.run(params, states, inputs)

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.program.input_names]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        inputs = list(inputs)
        with enable_x64(True):
            outs = None
            if self._jitted is not None:
                try:
                    outs = self._jitted(self.params, self.states, inputs)
                except ConcretizationError:
                    self._jitted = None  # values decide shapes here: run eagerly from now on
            if outs is None:
                outs = self._apply(self.params, self.states, inputs)
            return [_to_numpy(o) for o in outs]


def _to_numpy(x):
    if isinstance(x, (list, tuple)):
        return [_to_numpy(v) for v in x]
    if x is None:
        return None
    return np.asarray(x)


def prepare(model, device="CPU", **kwargs):
    """A ``BackendRep`` of ``model`` (a ``ModelProto``, bytes or path)."""
    if not supports_device(device):
        raise RuntimeError(f"fnx.onnx.backend runs on the CPU, not {device!r}")
    return BackendRep(model)


def run_model(model, inputs, device="CPU", **kwargs):
    return prepare(model, device, **kwargs).run(inputs)


def run_node(node, inputs, device="CPU", outputs_info=None, **kwargs):
    """Run one ``NodeProto`` on ``inputs`` (NumPy arrays): the node becomes a one-node
    model at the latest opset of the installed ``onnx``."""
    import onnx
    from onnx import helper
    vals = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
    names = [n for n in node.input if n]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
        np.asarray(v).dtype), np.shape(v)) for n, v in zip(names, vals)]
    outs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
    graph = helper.make_graph([node], "run_node", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(
        node.domain or "", onnx.defs.onnx_opset_version())])
    # the outputs' types are unknown here, which onnx.checker refuses: not checked
    return BackendRep(model, check=False).run([np.asarray(v) for v in vals])


def supports_device(device):
    return str(device).upper().startswith("CPU")


def is_compatible(model, device="CPU", **kwargs):
    return supports_device(device)
