"""Reading ONNX models into fnx: ``load`` (an ``OnnxModule``) and ``to_function``
(``apply_fn(params, *inputs)`` and its params).

Loading checks the model (``onnx.checker``, every value defined before use, a handler or
function body for every operator) and never runs code from it. The initializers are
sorted by how the graph uses them:

* **params**: floating-point initializers used as data (weights, biases, embeddings);
* **states**: BatchNormalization running statistics;
* **constants**: integer and boolean initializers (shapes, indices, masks: shape
  arithmetic folds through them while tracing) and initializers used only where a value
  must be known while tracing (a ``Resize``'s scales): part of the program, kept in
  ``OnnxModule.model``, not leaves of the pytree.
"""
from __future__ import annotations

import numpy as np

from .. import numpy as fnp
from ..dtypes import canonicalize_dtype
from ..nn.module import Module, record_states
from .graph import Graph, ModelContext, OnnxImportError, OnnxModelError, _onnx, np_dtype
from .ops.nn import TRAIN_STATES

__all__ = ["load", "to_function", "OnnxModule", "read_model"]

# (op_type, input index) of initializers that are states, not params.
_STATE_SLOTS = {("BatchNormalization", 3), ("BatchNormalization", 4)}


def read_model(model, check=True):
    """A ``ModelProto`` from a path, bytes or a ``ModelProto``, checked by
    ``onnx.checker`` unless ``check=False``."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(bytes(model))
        except Exception as e:
            raise OnnxModelError(f"fnx.onnx.load: the bytes are not an ONNX model ({e})") from None
    else:
        try:
            proto = onnx.load(str(model) if not hasattr(model, "read") else model)
        except FileNotFoundError:
            raise
        except Exception as e:
            raise OnnxModelError(f"fnx.onnx.load: {model!r} is not a readable ONNX model "
                                 f"({type(e).__name__}: {e})") from None
    if not check:
        return proto
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OnnxModelError(f"fnx.onnx.load: the model fails onnx.checker: {first}") from None
    return proto


class _Program:
    """A model's main graph, its initializers sorted into params, states and constants,
    and the declared types of its inputs."""

    def __init__(self, proto, outputs=None):
        self.proto = proto
        self.ctx = ModelContext.of(proto)
        g = proto.graph
        self.graph = Graph(g, self.ctx, outputs=outputs)
        inits = dict(self.graph.constants)
        init_names = set(inits)
        self.input_names = [i.name for i in g.input if i.name not in init_names]
        self.input_types = {i.name: i.type for i in g.input if i.name not in init_names}
        self.output_names = list(self.graph.outputs)
        data_use, state_use = set(), set()
        for node in self.graph.needed:
            static = node.handler.static if node.handler is not None else ()
            for k, name in enumerate(node.inputs):
                if name in init_names and k not in static:
                    (state_use if (node.op_type, k) in _STATE_SLOTS else data_use).add(name)
            for sub in _subgraph_reads(node):
                data_use.update(n for n in sub if n in init_names)
        data_use -= state_use
        self.params, self.states, self.constants = {}, {}, {}
        for name, value in inits.items():
            if name in state_use:
                self.states[name] = value
            elif name in data_use and np.issubdtype(value.dtype, np.inexact):
                self.params[name] = value
            else:
                self.constants[name] = value
        self.graph.constants = self.constants

    def check_inputs(self, inputs):
        """Inputs as fnx arrays, checked against the declared types and shapes (symbolic
        dimensions bound consistently)."""
        if len(inputs) != len(self.input_names):
            raise OnnxModelError(
                f"the ONNX model takes {len(self.input_names)} input(s) "
                f"{self.input_names}, got {len(inputs)}")
        out, dims = [], {}
        for name, x in zip(self.input_names, inputs):
            out.append(self._check_one(name, x, dims))
        return out

    def _check_one(self, name, x, dims):
        t = self.input_types[name]
        if not t.HasField("tensor_type"):
            return x  # sequences and optionals pass through as they are
        tt = t.tensor_type
        want = np_dtype(tt.elem_type) if tt.elem_type else None
        if isinstance(x, (list, tuple)):
            raise OnnxModelError(f"ONNX model input {name!r} is a tensor; got a "
                                 f"{type(x).__name__}")
        if want is not None:
            got = np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype
            if got != want and canonicalize_dtype(got) != canonicalize_dtype(want):
                raise OnnxModelError(
                    f"ONNX model input {name!r} is {want.name}, got an array of {got.name}; "
                    f"convert it first (x.astype({want.name!r}))")
        x = x if hasattr(x, "shape") and not isinstance(x, np.ndarray) else fnp.asarray(
            x, dtype=want)
        if tt.HasField("shape"):
            shape = tuple(x.shape)
            decl = tt.shape.dim
            if len(decl) != len(shape):
                raise OnnxModelError(f"ONNX model input {name!r} has rank {len(decl)} "
                                     f"({_dims_str(decl)}), got shape {shape}")
            for d, n in zip(decl, shape):
                if d.HasField("dim_value") and d.dim_value != n:
                    raise OnnxModelError(f"ONNX model input {name!r} has shape "
                                         f"{_dims_str(decl)}, got {shape}")
                if d.HasField("dim_param") and d.dim_param:
                    if dims.setdefault(d.dim_param, n) != n:
                        raise OnnxModelError(
                            f"ONNX model input {name!r}: dimension {d.dim_param!r} is "
                            f"{dims[d.dim_param]} in an earlier input, {n} here")
        return x

    def run(self, params, states, inputs):
        values = dict(params)
        values.update(states)
        values.update(zip(self.input_names, self.check_inputs(inputs)))
        return self.graph.run(values)


def _dims_str(dims):
    return "(" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else
                           (d.dim_param or "?") for d in dims) + ")"


def _subgraph_reads(node):
    from .graph import _graph_attrs, _outer_names
    return [_outer_names(g) for g in _graph_attrs(node)]


def _pack(names, outs):
    return outs[0] if len(outs) == 1 else dict(zip(names, outs))


class OnnxModule(Module):
    """An imported ONNX model as an ``fnx.nn.Module``: ``weights`` (the params) and
    ``stats`` (the states) are dicts keyed by initializer names; ``module(*inputs)``
    runs the graph and returns its output (a dict by name when there are several).
    ``params()`` and ``states()`` use the initializer names as they are
    (``layer1.0.conv1.weight``). ``load`` returns it in eval mode, computing what the
    model computes. In train mode (``module.train()``) its BatchNormalization nodes
    normalize with the batch's statistics, as a BatchNorm layer trains, and
    ``fnx.nn.apply(module, x)`` returns the module with the running statistics moved by
    each node's ``momentum``."""

    __params__ = ("weights",)
    __states__ = ("stats",)

    def __init__(self, program, weights, stats):
        self._program = program
        self.weights = weights
        self.stats = stats

    def __call__(self, *inputs):
        p = self._program
        if not self.training:
            return _pack(p.output_names, p.run(self.weights, self.stats, inputs))
        updates = {}
        token = TRAIN_STATES.set(updates)
        try:
            out = _pack(p.output_names, p.run(self.weights, self.stats, inputs))
        finally:
            TRAIN_STATES.reset(token)
        if updates:   # fnx.nn.apply returns the module with these statistics
            record_states(self, stats={**self.stats, **updates})
        return out

    def params(self) -> dict:
        return dict(self.weights)

    def states(self) -> dict:
        return dict(self.stats)

    @property
    def input_names(self):
        return list(self._program.input_names)

    @property
    def output_names(self):
        return list(self._program.output_names)

    @property
    def model(self):
        """The ``ModelProto`` this module was loaded from."""
        return self._program.proto

    def _config(self):
        return {"inputs": self.input_names, "outputs": self.output_names}


def _arrays(d):
    return {k: fnp.asarray(v) for k, v in d.items()}


def load(model, *, outputs=None):
    """An ONNX model (a path, bytes or a ``ModelProto``) as an ``OnnxModule``.

    ``outputs``: names of values of the graph to return instead of its outputs (for
    features below a head you replace); only the nodes they need run."""
    program = _Program(read_model(model), outputs)
    return OnnxModule(program, _arrays(program.params), _arrays(program.states)).eval()


def to_function(model, *, outputs=None):
    """``(apply_fn, params)``: ``apply_fn(params, *inputs)`` runs the model with
    ``params`` (``{initializer name: array}`` of its trainable initializers, as
    ``load(model).params()``); its states (BatchNorm statistics) are fixed. Returns one
    output, or a dict by name when the model has several."""
    program = _Program(read_model(model), outputs)
    states = _arrays(program.states)

    def apply_fn(params, *inputs):
        return _pack(program.output_names, program.run(params, states, inputs))

    apply_fn.__name__ = _py_name(program.proto.graph.name) or "onnx_model"
    apply_fn.__qualname__ = apply_fn.__name__
    return apply_fn, _arrays(program.params)


def _py_name(name):
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in (name or ""))
    return s if s and not s[0].isdigit() else ("m_" + s if s else "")

