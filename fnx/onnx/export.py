"""The ONNX exporter: IR in, ``onnx.ModelProto`` out.

Export walks an IR equation by equation. Each equation's primitive lowers
itself through its ``onnx`` rule (the hook contract below); call primitives
(``jit``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat_call``,
``custom_vmap_call``) have no rule of their own and are inlined: their body IR is
lowered in place. IR
constants become initializers, literals become ``Constant`` nodes, and the
graph gets typed inputs and outputs with static shapes. Every model is checked
with ``onnx.checker.check_model(full_check=True)`` (which runs strict shape
inference) before it is returned.

The hook contract
-----------------
``prim.onnx`` is ``lower(ctx, *inputs, **params) -> str | list[str]``:
``inputs`` are the ONNX value names of the equation's inputs, ``params`` the
equation's params; the rule adds nodes through ``ctx`` (a ``LoweringContext``)
and returns the name of its output (a list of names for a primitive with
``multiple_results``). It may return one of its inputs unchanged.

``onnx`` is imported lazily: importing ``fnx.onnx`` works without it, and
the first function that needs it raises an ``ImportError`` saying how to
install it.
"""
from __future__ import annotations

import inspect
import itertools
import re

import numpy as np

from .. import tree_util
from ..core import dtypes
from ..core.ir import IR, Eqn, Literal, Var
from ..core.onnx_rules import UnsupportedDtypeError, onnx_dtype  # noqa: F401
from ..core.onnx_rules import require as _require
from ..core.primitive import REGISTRY, Primitive, ShapeDtypeStruct
from ..errors import MissingRuleError, ShapeError

DEFAULT_OPSET = 18
MIN_OPSET = 18     # the lowerings use opset-18 operator signatures (axes as inputs, ...)


def _onnx():
    return _require("onnx", "fnx.onnx")


def _onnxruntime():
    return _require("onnxruntime", "fnx.onnx.run")


def _tensor_proto(value: np.ndarray, name: str):
    onnx = _onnx()
    from onnx import numpy_helper
    onnx_dtype(value.dtype)          # rejects complex with a clear message
    if dtypes.bfloat16 is not None and value.dtype == dtypes.bfloat16:
        # older onnx releases cannot convert ml_dtypes arrays: store the raw bits
        t = onnx.helper.make_tensor(name, onnx.TensorProto.BFLOAT16, value.shape,
                                    value.view(np.uint16).tobytes(), raw=True)
        return t
    return numpy_helper.from_array(np.array(value, order="C"), name)   # keeps rank 0


# --- the lowering context -------------------------------------------------------------------

class LoweringContext:
    """What a lowering rule builds the graph with.

    ``in_avals`` / ``out_avals`` are the ``ShapeDtypeStruct`` s of the equation
    being lowered; ``opset`` is the target opset of the default domain. ``node``
    adds a node, ``const`` an initializer, ``fresh`` makes a new value name.
    """

    def __init__(self, opset: int = DEFAULT_OPSET):
        self.opset = int(opset)
        self.in_avals: tuple = ()
        self.out_avals: tuple = ()
        self.eqn: Eqn | None = None     # the equation being lowered (None between them)
        self.nodes: list = []
        self.initializers: list = []
        self.domains: dict[str, int] = {}   # extra operator domains used -> their version
        self.value_types: dict[str, ShapeDtypeStruct] = {}   # IR values, for value_info
        self._counter = itertools.count()
        self._taken: set[str] = set()
        self._consts: dict = {}
        self._produced: set[str] = set()    # names that some node outputs
        self._literals: dict = {}           # Constant nodes of this graph (not shared)

    # names -------------------------------------------------------------------------
    def reserve(self, name: str) -> str:
        """Claim ``name`` exactly (graph inputs and outputs); it must be free."""
        if name in self._taken:
            raise ValueError(f"ONNX value name {name!r} is used twice")
        self._taken.add(name)
        return name

    def fresh(self, hint: str = "v") -> str:
        """A new value name that starts with ``hint``."""
        base = re.sub(r"[^0-9A-Za-z_]", "_", str(hint)) or "v"
        while True:
            name = f"{base}_{next(self._counter)}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    # nodes ---------------------------------------------------------------------------
    def node(self, op_type: str, inputs, *, outputs: int = 1, domain: str | None = None,
             **attrs):
        """Add an ``op_type`` node; returns its output name (a list when ``outputs`` > 1).

        ``inputs`` are value names ("" for an omitted optional input); ``attrs``
        are the node's attributes (``None`` values are left out); ``domain`` is
        the operator set domain (default: the ONNX domain, version ``opset``).
        """
        onnx = _onnx()
        outs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if domain:
            self.domains.setdefault(domain, 1)
        self.nodes.append(onnx.helper.make_node(op_type, [str(i) for i in inputs], outs,
                                                domain=domain or None, **attrs))
        self._produced.update(outs)
        return outs[0] if outputs == 1 else outs

    def const(self, value, dtype=None) -> str:
        """An initializer holding ``value`` (a NumPy value or Python scalar) as ``dtype``.

        Equal constants are shared: asking twice gives the same name.
        """
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.fresh("const")
            self.initializers.append(_tensor_proto(arr, name))
        return name

    def literal(self, value, dtype) -> str:
        """A ``Constant`` node holding the scalar ``value`` (how IR literals are emitted)."""
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.tobytes())
        name = self._literals.get(key)
        if name is None:
            onnx = _onnx()
            name = self._literals[key] = self.fresh("literal")
            self.nodes.append(onnx.helper.make_node("Constant", [], [name],
                                                    value=_tensor_proto(arr, name + "_value")))
            self._produced.add(name)
        return name

    # subgraphs -------------------------------------------------------------------------
    def lower_ir(self, ir, in_names):
        """Lower ``ir`` into this graph with its inputs named ``in_names``; its output
        names (what a control-flow rule calls for a branch or body, without importing
        the exporter)."""
        return lower_ir(self, ir, in_names)

    def subgraph(self, build, inputs=(), out_avals=(), name: str = "body"):
        """A ``GraphProto`` for a control-flow node's attribute (``If`` branches, ``Loop``
        and ``Scan`` bodies).

        ``inputs`` are the graph's formal inputs as (name hint, ShapeDtypeStruct)
        pairs; ``build(sub, input_names) -> [output names]`` adds the body's nodes
        to ``sub``, a ``LoweringContext`` for the subgraph (``sub.lower_ir(ir, names)``
        lowers an IR into it). The body may read any value of the enclosing
        graphs by name (ONNX outer scope). Value names are unique across the whole
        model; initializers made with ``sub.const`` go to the main graph (visible
        inside every subgraph), while ``Constant`` nodes stay in the graph that uses
        them. Each output is an ``Identity`` of what ``build`` returned, typed by
        ``out_avals``.
        """
        onnx = _onnx()
        sub = LoweringContext(self.opset)
        # shared with the enclosing graph: names, initializers, extra domains
        sub._counter, sub._taken = self._counter, self._taken
        sub._consts, sub.initializers, sub.domains = self._consts, self.initializers, \
            self.domains
        in_names = [sub.fresh(hint) for hint, _ in inputs]
        results = list(build(sub, in_names))
        if len(results) != len(out_avals):
            raise ValueError(f"subgraph {name}: {len(results)} results for "
                             f"{len(out_avals)} outputs")
        out_names = [sub.node("Identity", [r]) for r in results]
        skip = set(in_names) | set(out_names) | {t.name for t in self.initializers}
        value_info = [_value_info(n, a) for n, a in sub.value_types.items()
                      if n in sub._produced and n not in skip]
        return onnx.helper.make_graph(
            sub.nodes, self.fresh(name),
            [_value_info(n, a) for n, (_, a) in zip(in_names, inputs)],
            [_value_info(n, a) for n, a in zip(out_names, out_avals)],
            value_info=value_info)


# --- lowering an IR -------------------------------------------------------------------------

def _inline_body(eqn: Eqn) -> IR | None:
    """The IR a call primitive stands for (its ``call_body`` rule), or None for other
    primitives."""
    rule = eqn.prim.call_body
    return None if rule is None else rule(eqn)


def _missing_rule(eqn: Eqn) -> MissingRuleError:
    name = eqn.prim.name
    return MissingRuleError(
        f"ONNX export: primitive '{name}' (from {eqn.source}) has no ONNX lowering. Add one "
        f"by setting `prim.onnx = lower` on it (prim = fnx.core.primitive.REGISTRY['{name}']), "
        f"where `lower(ctx, *input_names, **params)` adds nodes with "
        f"ctx.node(op_type, inputs, **attrs) and ctx.const(value) and returns the output's "
        f"value name (a list of names for a primitive with several results); see "
        f"fnx.onnx.LoweringContext. Or write the function without '{name}'.")


def _lower_eqn(ctx: LoweringContext, eqn: Eqn, ins: list[str]) -> list[str]:
    prim = eqn.prim
    if prim.onnx is None:
        body = _inline_body(eqn)
        if body is None:
            raise _missing_rule(eqn)
        return lower_ir(ctx, body, ins)
    ctx.in_avals = tuple(v.aval for v in eqn.inputs)
    ctx.out_avals = tuple(v.aval for v in eqn.outputs)
    ctx.eqn = eqn
    try:
        out = prim.onnx(ctx, *ins, **eqn.params)
    finally:
        ctx.eqn = None
    outs = list(out) if prim.multiple_results else [out]
    if len(outs) != len(eqn.outputs) or not all(isinstance(o, str) for o in outs):
        want = (f"a list of {len(eqn.outputs)} names" if prim.multiple_results
                else "one value name (a str)")
        raise TypeError(f"the ONNX lowering of '{prim.name}' returned {out!r}; it must "
                        f"return {want}")
    return outs


def lower_ir(ctx: LoweringContext, ir: IR, in_names) -> list[str]:
    """Add ``ir``'s computation to ``ctx`` with its inputs bound to ``in_names``;
    returns the names of its outputs (call primitives' bodies are inlined)."""
    env: dict[Var, str] = {}
    for v, c in zip(ir.constvars, ir.consts):
        env[v] = ctx.const(np.asarray(c))
    env.update(zip(ir.invars, in_names))

    def read(a):
        if type(a) is Literal:
            return ctx.literal(a.value, a.aval.dtype)
        return env[a]

    for eqn in ir.eqns:
        outs = _lower_eqn(ctx, eqn, [read(a) for a in eqn.inputs])
        for v, name in zip(eqn.outputs, outs):
            env[v] = name
            ctx.value_types.setdefault(name, v.aval)
    return [read(v) for v in ir.outvars]


# --- building the model ---------------------------------------------------------------------

def _value_info(name: str, aval: ShapeDtypeStruct):
    onnx = _onnx()
    return onnx.helper.make_tensor_value_info(name, onnx_dtype(aval.dtype), list(aval.shape))


def _check_opset(opset):
    onnx = _onnx()
    top = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= int(opset) <= top:
        raise ValueError(f"ONNX export supports opsets {MIN_OPSET} to {top} (the newest the "
                         f"installed onnx {onnx.__version__} knows); got opset={opset}")


def _unique_names(names, what):
    names = list(names)
    seen = set()
    for n in names:
        if not isinstance(n, str) or not n:
            raise ValueError(f"{what} must be non-empty strings, got {n!r}")
        if n in seen:
            raise ValueError(f"{what} repeat the name {n!r}")
        seen.add(n)
    return names


def export_ir(ir: IR, *, opset: int = DEFAULT_OPSET, input_names=None, output_names=None,
              name: str = "fnx", initializers=None) -> "onnx.ModelProto":  # noqa: F821
    """An ONNX model computing ``ir`` (one graph input per invar, one output per outvar).

    ``input_names`` / ``output_names`` default to ``input_<i>`` / ``output_<i>``.
    ``initializers``: ``{invar index: array}``, invars stored in the model with those
    values (initializers) instead of being graph inputs.
    The model is checked with ``onnx.checker.check_model(full_check=True)``.
    """
    onnx = _onnx()
    _check_opset(opset)
    input_names = _unique_names(input_names if input_names is not None else
                                [f"input_{i}" for i in range(len(ir.invars))], "input_names")
    output_names = _unique_names(output_names if output_names is not None else
                                 [f"output_{i}" for i in range(len(ir.outvars))],
                                 "output_names")
    if len(input_names) != len(ir.invars):
        raise ValueError(f"input_names has {len(input_names)} names for {len(ir.invars)} "
                         "inputs")
    if len(output_names) != len(ir.outvars):
        raise ValueError(f"output_names has {len(output_names)} names for {len(ir.outvars)} "
                         "outputs")
    if set(input_names) & set(output_names):
        raise ValueError(f"a name is both an input and an output: "
                         f"{sorted(set(input_names) & set(output_names))}")
    for v in ir.invars:
        onnx_dtype(v.aval.dtype)      # complex inputs: a clear error before anything else
    ctx = LoweringContext(opset)
    for n in input_names + output_names:
        ctx.reserve(n)
    results = lower_ir(ctx, ir, input_names)

    # Outputs: rename the producing node's output where it is ours alone, else Identity.
    rename: dict[str, str] = {}
    claimed = set()
    for res, out in zip(results, output_names):
        if res in ctx._produced and res not in claimed and res not in rename:
            rename[res] = out
        else:
            ctx.nodes.append(onnx.helper.make_node("Identity", [rename.get(res, res)], [out]))
        claimed.add(res)
    if rename:
        for node in ctx.nodes:
            node.input[:] = [rename.get(i, i) for i in node.input]
            node.output[:] = [rename.get(o, o) for o in node.output]

    skip = set(input_names) | set(output_names) | set(rename) | {
        t.name for t in ctx.initializers}
    value_info = [_value_info(n, a) for n, a in ctx.value_types.items() if n not in skip]
    stored = dict(initializers or {})
    weights = []
    for i, value in sorted(stored.items()):
        arr = np.asarray(value, dtype=ir.invars[i].aval.dtype)
        if arr.shape != tuple(ir.invars[i].aval.shape):
            raise ValueError(f"initializer {input_names[i]!r}: value of shape {arr.shape} for "
                             f"an input of shape {tuple(ir.invars[i].aval.shape)}")
        weights.append(onnx.numpy_helper.from_array(arr, input_names[i]))
    consts = list(ctx.initializers)
    nodes = list(ctx.nodes)
    if stored:  # the model's initializers are its weights; the exporter's constants are nodes
        nodes = [onnx.helper.make_node("Constant", [], [t.name], value=t) for t in consts] + nodes
        consts = []
    graph = onnx.helper.make_graph(
        nodes, name,
        [_value_info(n, v.aval) for i, (n, v) in enumerate(zip(input_names, ir.invars))
         if i not in stored],
        [_value_info(n, v.aval) for n, v in zip(output_names, ir.outvars)],
        initializer=weights + consts, value_info=value_info)
    opsets = [onnx.helper.make_opsetid("", opset)] + [
        onnx.helper.make_opsetid(d, v) for d, v in sorted(ctx.domains.items())]
    from .._version import __version__ as fnx_version
    model = onnx.helper.make_model(graph, opset_imports=opsets, producer_name="fnx",
                                   producer_version=fnx_version)
    # the oldest IR version that carries these opsets: runtimes accept it most widely
    model.ir_version = onnx.helper.find_min_ir_version_for(list(model.opset_import))
    onnx.checker.check_model(model, full_check=True)
    return model


def _argument_names(fun, example_args, bare=frozenset()) -> list[str]:
    """Graph input names from the function's parameter names and each leaf's pytree path
    (``params.w1``, ``x``), made into valid, unique ONNX names; the leaves of the
    arguments at positions in ``bare`` are named by their paths alone
    (``layers.0.weight``)."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i, arg in enumerate(example_args):
        p = params[i] if i < len(params) else None
        base = p.name if p is not None and p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD) else f"arg{i}"
        for path, _ in tree_util.tree_leaves_with_path(arg):
            sub = tree_util.dotted_name(path)
            names.append(sub if sub and i in bare else f"{base}.{sub}" if sub else base)
    out, seen = [], set()
    for n in names:
        n = re.sub(r"[^0-9A-Za-z_.]", "_", n)
        candidate, k = n, 1
        while candidate in seen:
            candidate, k = f"{n}_{k}", k + 1
        seen.add(candidate)
        out.append(candidate)
    return out


def export(fun, *example_args, opset: int = DEFAULT_OPSET, input_names=None,
           output_names=None, name: str | None = None,
           weights=()) -> "onnx.ModelProto":  # noqa: F821
    """Trace ``fun`` on ``example_args`` and export it as an ONNX model.

    ``example_args`` are arrays, scalars or ``fnx.ShapeDtypeStruct`` s, or pytrees
    of them; only their shapes and dtypes matter. The graph takes the flattened
    leaves as inputs (named after ``fun``'s parameters and the leaves' pytree paths,
    e.g. ``params.w1``, unless ``input_names`` is given) and returns the flattened
    outputs (``output_<i>`` unless ``output_names`` is given). ``run`` feeds a model
    arguments flattened the same way.

    ``weights``: positions of arguments (a module, a dict of params) stored in the model
    as initializers with their values, named by their pytree paths
    (``layers.0.weight``), as exporters of trained models write them; the graph's inputs
    are then the other arguments. ``fnx.onnx.load`` reads such a model back into a
    module whose params carry those names.
    """
    from ..core.tracing import make_ir
    _onnx()
    weights = (weights,) if isinstance(weights, int) else tuple(weights)
    ir = make_ir(fun)(*example_args)
    if input_names is None:
        input_names = _argument_names(fun, example_args, set(weights))
    stored, k = {}, 0
    for i, arg in enumerate(example_args):
        leaves = tree_util.tree_leaves(arg)
        if i in weights:
            for j, leaf in enumerate(leaves):
                if isinstance(leaf, ShapeDtypeStruct):
                    raise ValueError(f"fnx.onnx.export: argument {i} is in weights=, so its "
                                     "leaves are stored in the model and need values, not "
                                     "ShapeDtypeStructs")
                stored[k + j] = np.asarray(leaf)
        k += len(leaves)
    return export_ir(ir, opset=opset, input_names=input_names, output_names=output_names,
                     name=name or getattr(fun, "__name__", "fnx") or "fnx",
                     initializers=stored)


def lower_primitive(prim, in_avals, params=None, opset: int = DEFAULT_OPSET):
    """A model of one equation: ``prim`` (a Primitive or its name) applied to inputs of
    ``in_avals`` (ShapeDtypeStructs, or anything with shape and dtype) with ``params``.

    For checking one primitive's lowering against its NumPy impl.
    """
    if isinstance(prim, str):
        if prim not in REGISTRY:
            import difflib
            close = difflib.get_close_matches(prim, list(REGISTRY), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"lower_primitive: no primitive named {prim!r} (the names are "
                             f"the keys of fnx.core.primitive.REGISTRY){hint}")
        prim = REGISTRY[prim]
    if not isinstance(prim, Primitive):
        raise TypeError(f"lower_primitive: expected a Primitive or a primitive name, got "
                        f"{prim!r}")
    params = dict(params or {})
    avals = [a if isinstance(a, ShapeDtypeStruct) else ShapeDtypeStruct(a.shape, a.dtype)
             for a in in_avals]
    out = prim.shape_rule(*avals, **params)
    outs = list(out) if prim.multiple_results else [out]
    invars = [Var(a) for a in avals]
    outvars = [Var(a) for a in outs]
    eqn = Eqn(prim, invars, outvars, params, source=f"fnx.onnx.lower_primitive({prim.name})")
    return export_ir(IR(invars, outvars, [eqn]), opset=opset, name=prim.name)


# --- running ----------------------------------------------------------------------------------

def _model_bytes(model) -> bytes:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    return model.SerializeToString()


def _input_dtype(onnx, vi, i):
    """The NumPy dtype graph input ``vi`` (the ``i``-th) declares, or a ValueError saying
    what is wrong with its declaration."""
    fix = (f"set it, e.g. model.graph.input[{i}].type.tensor_type.elem_type = "
           "onnx.TensorProto.FLOAT, or re-export the model with a typed input")
    kind = vi.type.WhichOneof("value")
    if kind != "tensor_type":
        what = "no type" if kind is None else f"a {kind.replace('_type', '')} type"
        raise ValueError(f"run: the model's input {vi.name!r} (input {i}) has {what}; "
                         f"fnx.onnx.run feeds tensors only: {fix}")
    elem = vi.type.tensor_type.elem_type
    if elem == onnx.TensorProto.UNDEFINED:
        raise ValueError(f"run: the model's input {vi.name!r} (input {i}) has an undefined "
                         f"element type (elem_type 0, UNDEFINED), so the dtype to feed is "
                         f"unknown: {fix}")
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"run: the model's input {vi.name!r} (input {i}) has element type "
                         f"{elem}, which this onnx version does not know: {fix}") from None


def _check_input_shape(vi, arr):
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return
    want = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    if len(want) != arr.ndim or any(w is not None and w != g for w, g in zip(want, arr.shape)):
        shown = "(" + ", ".join("?" if w is None else str(w) for w in want) + \
            ("," if len(want) == 1 else "") + ")"
        raise ShapeError(f"run: input {vi.name!r} must have shape {shown} (as the model "
                         f"declares it; ? is any size), got {arr.shape}")


def run(model, *args) -> list[np.ndarray]:
    """Run ``model`` with onnxruntime (CPU) on ``args``, flattened like ``export``'s.

    Python scalars take the dtype of the graph input they feed; arrays must already
    have it. Returns the outputs as a list of NumPy arrays.

    A graph input of undefined or non-tensor type raises a ``ValueError`` naming it;
    inputs of the wrong dtype raise a ``TypeError`` and of the wrong shape a
    ``ShapeError``, naming the input. A model onnxruntime cannot load (an unknown
    operator, a value no node or initializer defines, an operator without a kernel for
    a dtype) raises onnxruntime's exception, which names the node or value.
    """
    onnx = _onnx()
    ort = _onnxruntime()
    if not isinstance(model, (bytes, bytearray)) and not hasattr(model, "SerializeToString"):
        raise TypeError(f"run: model must be an onnx.ModelProto (as fnx.onnx.export returns) "
                        f"or its serialized bytes, got {type(model).__name__}")
    data = _model_bytes(model)
    if isinstance(model, (bytes, bytearray)):
        try:
            model = onnx.load_from_string(data)
        except Exception as err:
            raise ValueError(f"run: the bytes given are not an ONNX model ({err})") from err
    leaves = tree_util.tree_leaves(args)
    graph_inputs = list(model.graph.input)
    if len(leaves) != len(graph_inputs):
        raise TypeError(f"run: the model takes {len(graph_inputs)} inputs, got {len(leaves)} "
                        "array leaves")
    feed = {}
    for i, (leaf, vi) in enumerate(zip(leaves, graph_inputs)):
        want = _input_dtype(onnx, vi, i)
        if isinstance(leaf, ShapeDtypeStruct):
            raise TypeError(f"run: input {vi.name!r} is a ShapeDtypeStruct; pass an array")
        if isinstance(leaf, (bool, int, float)):
            arr = np.asarray(leaf, dtype=want)
        else:
            arr = np.asarray(leaf)
            if arr.dtype != want:
                raise TypeError(f"run: input {vi.name!r} must be {want.name}, got "
                                f"{arr.dtype.name}")
        _check_input_shape(vi, arr)
        feed[vi.name] = arr
    try:
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as err:
        # onnxruntime's own exception (its type tells a missing kernel, NotImplemented,
        # from a malformed graph, InvalidGraph/InvalidArgument), with a note saying where
        if hasattr(err, "add_note"):
            err.add_note("raised by fnx.onnx.run: onnxruntime cannot load the model; "
                         "onnx.checker.check_model(model, full_check=True) reports what is "
                         "malformed (models from fnx.onnx.export pass it)")
        raise
    return [np.asarray(o) for o in session.run(None, feed)]
