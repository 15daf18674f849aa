"""ONNX graphs as fnx programs: each node runs through an operator handler written with
``fnx.numpy`` and ``fnx.lax``, so an imported model is an ordinary fnx function (``jit``,
``grad``, ``vmap`` and ``export`` see only fnx primitives).

**Handlers.** ``@op("Relu")`` registers ``handler(node, *inputs)`` for an operator of the
default domain (``domain=`` for others). ``inputs`` are the node's inputs in order, with
None for an omitted optional one; the handler returns one value or a tuple (one per
output; a list is one sequence value). ``node`` gives the attributes (``node.attr(name)``, falling back on the
operator schema's default), ``node.opset`` (the model's version of the node's domain),
``node.error(...)`` (an ``UnsupportedOnnxOpError`` naming the operator, node, opset and
domain) and ``node.subgraph(name)`` for graph attributes. Inputs listed in
``static=(i, ...)`` must be known while tracing (a ``Reshape``'s shape, a ``Slice``'s
starts): the handler gets them as NumPy arrays, and an initializer used only in such
places is a constant of the model, never a trained parameter.

**Known values.** A graph runs under ``fnx.ensure_compile_time_eval``: nodes whose inputs
are all known (initializers held as constants, ``Shape`` of any value, ``Constant``) are
computed at once, even under ``jit``, so shape arithmetic exported by other frameworks
(``Shape -> Gather -> Concat -> Reshape``) folds into static shapes.

**Functions.** An operator without a handler whose schema defines it as a function of
other operators (``Gelu``, ``LayerNormalization``, ``Celu``, ...), or a function of the
model's own ``functions``, runs as that function's nodes.
"""
from __future__ import annotations

from collections import ChainMap

import numpy as np

from .._api import ensure_compile_time_eval
from ..core.array import Array, Tracer
from ..errors import ConcretizationError

__all__ = ["OnnxImportError", "OnnxModelError", "UnsupportedOnnxOpError", "StaticInputError",
           "op", "handler_for",
           "Graph", "Node", "ModelContext", "known", "np_dtype", "DEFAULT_DOMAIN"]

DEFAULT_DOMAIN = "ai.onnx"
_REQUIRED = object()


class OnnxImportError(ValueError):
    """An ONNX model that fnx cannot import or run as it is."""


class OnnxModelError(OnnxImportError):
    """A malformed model: it fails ``onnx.checker``, uses a value nothing defines, or is
    given inputs of another type or shape than it declares."""


class UnsupportedOnnxOpError(OnnxImportError, NotImplementedError):
    """An operator, or an attribute value of one, that fnx cannot run."""


class StaticInputError(OnnxImportError, ConcretizationError):
    """A node input that sets a shape or static parameter is computed from the model's
    inputs, so it is not known while tracing. Eagerly every value is known: the
    ONNX backend reruns such a model without ``jit``."""


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a test dependency
        raise ImportError("fnx.onnx needs the onnx package to read models: "
                          "pip install fnx[onnx]") from None
    return onnx


# --- the handler registry --------------------------------------------------------------------

class _Handler:
    __slots__ = ("fn", "static", "op_type", "domain", "scope")

    def __init__(self, fn, static, op_type, domain, scope=False):
        self.fn, self.static, self.op_type, self.domain = fn, frozenset(static), op_type, domain
        self.scope = scope


_HANDLERS: dict = {}


def _domain_key(domain):
    return "" if domain in ("", DEFAULT_DOMAIN) else domain


def op(*op_types, domain="", static=(), scope=False):
    """Register the decorated function as the handler of ``op_types`` (see the module
    docstring). With ``scope=True`` the handler is also called with ``scope=``: the values
    visible at the node (a mapping by name), which its subgraphs read from
    (``node.subgraph(name).run(values, outer=scope)``)."""
    def register(fn):
        for t in op_types:
            _HANDLERS[(_domain_key(domain), t)] = _Handler(fn, static, t, domain, scope)
        return fn
    return register


def handler_for(op_type, domain=""):
    """The registered handler of an operator, or None."""
    _load_handlers()
    return _HANDLERS.get((_domain_key(domain), op_type))


def _load_handlers():
    from . import ops  # noqa: F401  (registers every handler on first use)


# --- values ------------------------------------------------------------------------------------

def np_dtype(elem_type):
    """The NumPy dtype of an ONNX tensor element type."""
    onnx = _onnx()
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "UNDEFINED"
        raise UnsupportedOnnxOpError(f"ONNX tensor type {name} has no NumPy dtype fnx can "
                                     "hold") from None


def known(value):
    """``value`` as a NumPy array (a list of them for a sequence) when it is known
    without running the model, else None."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        out = [known(v) for v in value]
        return None if any(o is None for o in out) else out
    if isinstance(value, Tracer):
        return None
    if isinstance(value, Array):
        return np.asarray(value)
    if isinstance(value, (int, float, bool, np.generic)):
        return np.asarray(value)
    return None


def _attr_value(attr):
    onnx = _onnx()
    A = onnx.AttributeProto
    t = attr.type
    if t == A.FLOAT:
        return float(attr.f)
    if t == A.INT:
        return int(attr.i)
    if t == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if t == A.TENSOR:
        return onnx.numpy_helper.to_array(attr.t)
    if t == A.GRAPH:
        return attr.g
    if t == A.FLOATS:
        return [float(v) for v in attr.floats]
    if t == A.INTS:
        return [int(v) for v in attr.ints]
    if t == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if t == A.TENSORS:
        return [onnx.numpy_helper.to_array(v) for v in attr.tensors]
    if t == A.GRAPHS:
        return list(attr.graphs)
    if t == A.SPARSE_TENSOR:
        raise UnsupportedOnnxOpError(f"attribute {attr.name!r}: sparse tensors are not "
                                     "supported")
    if t == A.TYPE_PROTO:
        return attr.tp
    return onnx.helper.get_attribute_value(attr)


# --- the model ---------------------------------------------------------------------------------

class ModelContext:
    """What every node of one model shares: its operator-set versions (``{domain:
    version}``, the default domain as ``""``) and its local functions."""

    def __init__(self, opsets, functions=()):
        self.opsets = {_domain_key(d): int(v) for d, v in dict(opsets).items()}
        self.functions = {(_domain_key(f.domain), f.name): f for f in functions}

    @classmethod
    def of(cls, model):
        return cls({o.domain: o.version for o in model.opset_import}, model.functions)

    def opset(self, domain):
        return self.opsets.get(_domain_key(domain))

    def with_opsets(self, opset_import):
        """The context of a function body: its own operator sets, the same functions."""
        ctx = ModelContext(self.opsets)
        ctx.opsets.update({_domain_key(o.domain): int(o.version) for o in opset_import})
        ctx.functions = self.functions
        return ctx


class Node:
    """One node of a graph, ready to run: its handler (or function body), attributes
    and operator-set version."""

    def __init__(self, proto, ctx, attrs=None):
        self.proto = proto
        self.ctx = ctx
        self.op_type = proto.op_type
        self.domain = proto.domain or ""
        self.name = proto.name
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.opset = ctx.opset(self.domain)
        if attrs is None:
            attrs = {a.name: _attr_value(a) for a in proto.attribute}
        self.attrs = attrs
        self._schema = _MISSING
        self._subgraphs = {}
        self._bodies = {}                # function bodies built for this node
        self.graph = None                # the Graph holding this node (None in a function)
        self.handler = handler_for(self.op_type, self.domain)
        self.function = None
        if self.handler is None:
            self.function = ctx.functions.get((_domain_key(self.domain), self.op_type))
        if self.handler is None and self.function is None and not self._schema_function():
            raise self.error("fnx has no handler for this operator" + _supported_hint(
                self.domain))

    # -- what handlers use
    def where(self):
        dom = self.domain or DEFAULT_DOMAIN
        name = f"node {self.name!r}, " if self.name else ""
        return f"ONNX {self.op_type} ({name}domain {dom}, opset {self.opset})"

    def error(self, message, cls=UnsupportedOnnxOpError):
        """An error naming this node (raise it)."""
        return cls(f"{self.where()}: {message}")

    @property
    def schema(self):
        if self._schema is _MISSING:
            onnx = _onnx()
            try:
                self._schema = onnx.defs.get_schema(self.op_type, self.opset or 1,
                                                    self.domain)
            except Exception:
                self._schema = None
        return self._schema

    def attr(self, name, default=_REQUIRED):
        """The attribute ``name``: the node's, else the operator schema's default, else
        ``default``; raises when none is there and no default is given."""
        if name in self.attrs:
            return self.attrs[name]
        s = self.schema
        if s is not None and name in s.attributes:
            d = s.attributes[name].default_value
            if d is not None and d.type:
                return _attr_value(d)
        if default is _REQUIRED:
            raise self.error(f"the attribute {name!r} is required", OnnxModelError)
        return default

    def has_attr(self, name):
        return name in self.attrs

    def subgraph(self, name):
        """The graph attribute ``name`` as a ``Graph`` (it sees the enclosing values)."""
        if name not in self._subgraphs:
            self._subgraphs[name] = Graph(self.attr(name), self.ctx, sub=True)
        return self._subgraphs[name]

    # -- running
    def _schema_function(self):
        s = self.schema
        return s is not None and (s.has_function or s.has_context_dependent_function)

    def _static(self, value, index):
        got = known(value)
        if got is None:
            raise self.error(
                f"input {index} ({self.inputs[index]!r}) must be known when the model is "
                "traced (it sets a shape or a static parameter), but it is computed from the "
                "model's inputs. fnx traces one program per input signature; make this value "
                "an initializer or a Constant, or compute it from shapes only (or run the model "
                "without jit)", StaticInputError)
        return got

    def run(self, scope):
        args = []
        static = self.handler.static if self.handler is not None else ()
        for i, name in enumerate(self.inputs):
            if not name:
                args.append(None)
                continue
            v = scope[name]
            args.append(self._static(v, i) if i in static else v)
        if self.handler is not None and self.handler.scope:
            out = self.handler.fn(self, *args, scope=scope)
        elif self.handler is not None:
            out = self.handler.fn(self, *args)
        else:
            out = self._run_function(args)
        if not isinstance(out, tuple):  # one output (a list is one sequence value)
            out = (out,)
        if any(self.outputs[len(out):]):
            raise self.error(f"fnx computes {len(out)} of the {len(self.outputs)} outputs "
                             "asked for")
        return {n: v for n, v in zip(self.outputs, out) if n}

    def _run_function(self, args):
        """The node's function body run on ``args``; the body is built once per node (a
        context-dependent one once per input types, which decide it)."""
        if self.function is not None:
            key = None
        elif self.schema.has_function:
            key = "schema"
        else:
            key = tuple(_type_proto(a).SerializeToString() for a in args)
        body = self._bodies.get(key)
        if body is None:
            fn = self.function if self.function is not None else self._schema_body(args)
            body = self._bodies[key] = _FunctionBody(fn, self)
        return body.run(args)

    def _schema_body(self, args):
        onnx = _onnx()
        s = self.schema
        if s.has_function:
            versions = [v for v in s.function_opset_versions if v <= (self.opset or 1)]
            raw = (s.get_function_with_opset_version(max(versions)) if versions
                   else s.function_body.SerializeToString())
        else:
            types = [_type_proto(a).SerializeToString() for a in args]
            node = onnx.NodeProto()
            node.CopyFrom(self.proto)
            for name in s.attributes:  # the body reads defaults from the node
                if name not in self.attrs:
                    d = s.attributes[name].default_value
                    if d is not None and d.type:
                        node.attribute.extend([d])
            versions = [v for v in s.context_dependent_function_opset_versions
                        if v <= (self.opset or 1)]
            if versions:
                raw = s.get_context_dependent_function_with_opset_version(
                    max(versions), node.SerializeToString(), types)
            else:
                raw = s.get_context_dependent_function(node.SerializeToString(), types)
        fn = onnx.FunctionProto()
        fn.ParseFromString(raw if isinstance(raw, bytes) else raw.SerializeToString())
        return fn


_MISSING = object()

def _supported_hint(domain):
    if _domain_key(domain):
        return (f"; fnx runs the default domain (ai.onnx), and custom domains through the "
                f"model's own functions; domain {domain!r} has neither here")
    return ("; see fnx.onnx.supported_operators() for those fnx runs, or export the model "
            "with this operator decomposed")


def _type_proto(value):
    onnx = _onnx()
    if isinstance(value, (list, tuple)):
        elem = _type_proto(value[0]) if value else onnx.helper.make_tensor_type_proto(
            onnx.TensorProto.FLOAT, None)
        return onnx.helper.make_sequence_type_proto(elem)
    if value is None:
        return onnx.TypeProto()
    dt = np.dtype(value.dtype)
    return onnx.helper.make_tensor_type_proto(onnx.helper.np_dtype_to_tensor_dtype(dt),
                                              list(np.shape(value)))


class _FunctionBody:
    """A FunctionProto called by one node: its attribute references bound to the node's
    attributes, its nodes run in a scope of their own."""

    def __init__(self, fn, caller):
        self.fn = fn
        self.caller = caller
        ctx = caller.ctx.with_opsets(fn.opset_import)
        defaults = {a.name: a for a in fn.attribute_proto}
        self.nodes = []
        for p in fn.node:
            attrs = {}
            for a in p.attribute:
                if a.ref_attr_name:
                    if a.ref_attr_name in caller.attrs:
                        attrs[a.name] = caller.attrs[a.ref_attr_name]
                    elif a.ref_attr_name in defaults:
                        attrs[a.name] = _attr_value(defaults[a.ref_attr_name])
                    else:
                        try:
                            attrs[a.name] = caller.attr(a.ref_attr_name)
                        except OnnxModelError:
                            pass  # unset and no default: the inner node's own default
                else:
                    attrs[a.name] = _attr_value(a)
            self.nodes.append(Node(p, ctx, attrs))

    def run(self, args):
        scope = {}
        for name, v in zip(self.fn.input, args):
            if name:
                scope[name] = v
        for n in self.nodes:
            scope.update(n.run(scope))
        return tuple(scope[o] for o in self.fn.output)


class Graph:
    """A GraphProto ready to run: ``run(values, outer)`` binds its inputs (and, for a
    subgraph, sees ``outer``'s values), runs the nodes in order and returns the outputs
    (or the values named in ``outputs``)."""

    def __init__(self, proto, ctx, sub=False, outputs=None):
        _load_handlers()
        onnx = _onnx()
        self.proto = proto
        self.ctx = ctx
        self.inputs = [i.name for i in proto.input]
        self.outputs = list(outputs) if outputs is not None else [o.name for o in
                                                                   proto.output]
        self.constants = {t.name: onnx.numpy_helper.to_array(t) for t in proto.initializer}
        self.nodes = [Node(p, ctx) for p in proto.node]
        for node in self.nodes:
            node.graph = self            # the Gradient operator reads the graph around it
        self.sub = sub
        self._check_names()
        self.needed = self._needed_nodes()

    def _check_names(self):
        defined = set(self.inputs) | set(self.constants)
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in defined and not self.sub:
                    raise node.error(f"its input {name!r} is not a graph input, an "
                                     "initializer or an earlier node's output (the graph "
                                     "must list nodes in topological order)", OnnxModelError)
            defined.update(n for n in node.outputs if n)
        for name in self.outputs:
            if name not in defined and not self.sub:
                raise OnnxModelError(f"ONNX graph {self.proto.name!r}: the output {name!r} "
                                     "is computed by no node and is no input or initializer")

    def _needed_nodes(self):
        """The nodes the outputs depend on (the others never run); all of a subgraph's."""
        if self.sub:
            return list(self.nodes)
        want = set(self.outputs)
        keep = []
        for node in reversed(self.nodes):
            if any(o in want for o in node.outputs if o):
                keep.append(node)
                want.update(n for n in node.inputs if n)
                for g in _graph_attrs(node):
                    want.update(_outer_names(g))
        return list(reversed(keep))

    def run(self, values, outer=None):
        scope = ChainMap(dict(self.constants), dict(values), *([outer] if outer else []))
        with ensure_compile_time_eval():
            for node in self.needed:
                scope.maps[0].update(node.run(scope))
        missing = [o for o in self.outputs if o not in scope]
        if missing:
            raise OnnxModelError(f"ONNX graph {self.proto.name!r}: no value for the outputs "
                                 f"{missing}")
        return [scope[o] for o in self.outputs]


def _graph_attrs(node):
    onnx = _onnx()
    out = []
    for a in node.proto.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def _outer_names(graph):
    """Names a subgraph reads from enclosing scopes (used by none of its own producers)."""
    own = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    reads = set()
    for n in graph.node:
        reads.update(x for x in n.input if x and x not in own)
        own.update(n.output)
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                reads.update(x for x in _outer_names(g) if x not in own)
    reads.update(o.name for o in graph.output if o.name not in own)
    return reads
