"""Tracing Python functions into IR; ``make_ir`` and ``eval_shape``.

``IRTrace`` records each primitive call as an equation instead of computing
it. Values it does not own (concrete Arrays, tracers of enclosing traces)
become constants of the IR: scalars inline as literals, the rest as
constvars. ``trace_flat`` runs a function on fresh tracers and returns the IR;
``trace_pytree`` does the same for a function over pytrees, which is what
``jit``, ``make_ir`` and ``eval_shape`` share.
"""
from __future__ import annotations

import numpy as np

from .. import tree_util
from . import dtypes
from .array import Array, Tracer, to_array
from .._config import config
from ..errors import IRCheckError
from .ir import IR, Eqn, Literal, Var, check_ir, cse, dce, optimize, simplify
from .primitive import ShapeDtypeStruct, aval_of
from .trace import Trace, trace_context, user_frame_info


class IRTracer(Tracer):
    __slots__ = ("ir_var",)   # not "var": that is Array.var, the variance


class IRTrace(Trace):
    """Records primitive calls into equations."""

    def __init__(self, parent, name="jit"):
        self.parent = parent
        self.name = name
        self.eqns = []
        self.invars = []
        self.constvars = []
        self.consts = []
        self._const_ids = {}

    def new_arg(self, aval):
        t = IRTracer(self, aval)
        t._origin = f"input {len(self.invars)} of {self.name}, called at {t._origin}"
        t.ir_var = Var(aval)
        self.invars.append(t.ir_var)
        return t

    def to_atom(self, x, prim_name="output"):
        if isinstance(x, IRTracer) and x._trace is self:
            return x.ir_var
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x, prim_name)
        elif not isinstance(x, Array):
            x = to_array(x, prim_name)
        key = id(x)
        var = self._const_ids.get(key)
        if var is not None:
            return var
        if type(x) is Array and x.ndim == 0:
            v = x._concrete(prim_name)
            return Literal(v if isinstance(v, np.generic) else v[()], x.aval)
        var = Var(aval_of(x))
        self._const_ids[key] = var
        self.constvars.append(var)
        self.consts.append(x)  # keeps x alive, so its id stays unique
        return var

    def process_primitive(self, prim, args, params):
        inputs = [self.to_atom(a, prim.name) for a in args]
        out_aval = prim.shape_rule(*[v.aval for v in inputs], **params)
        source = user_frame_info(2)
        avals = out_aval if prim.multiple_results else [out_aval]
        outs = []
        for aval in avals:
            t = IRTracer(self, aval)
            t._origin = source
            t.ir_var = Var(aval)
            outs.append(t)
        self.eqns.append(Eqn(prim, inputs, [t.ir_var for t in outs], params, source))
        return outs if prim.multiple_results else outs[0]


def abstractify(x, where="make_ir"):
    """The abstract value a traced function sees for the argument ``x`` (an array, a
    tracer, a Python scalar or a ``ShapeDtypeStruct`` placeholder); ``where`` names the
    caller in the 64-bit narrowing warning."""
    if isinstance(x, ShapeDtypeStruct):
        # A placeholder's 64-bit dtype narrows as an array input's does (JAX's eval_shape,
        # make_jaxpr and jit trace float64 placeholders as float32 when x64 is off), so
        # eval_shape and make_ir agree with what the eager call returns.
        d = dtypes.canonical(x.dtype, where)
        return x if d is x.dtype else ShapeDtypeStruct(x.shape, d, x.weak_type)
    if isinstance(x, Tracer):
        return x.aval
    return to_array(x).aval


def trace_flat(fun, in_avals, name="jit", parent=None):
    """Trace ``fun(*tracers) -> list of outputs`` into an IR (dead code removed).

    Constants may be tracers of enclosing traces; ``IR.hoist_consts`` turns them
    into inputs when the IR is bound on such a trace.
    """
    from .trace import get_trace
    trace = IRTrace(get_trace() if parent is None else parent, name)
    with trace_context(trace):
        args = [trace.new_arg(a) for a in in_avals]
        outs = fun(*args)
        outvars = [trace.to_atom(o, f"output {i} of {name}") for i, o in enumerate(outs)]
    ir = IR(trace.invars, outvars, trace.eqns, trace.constvars, trace.consts)
    if config.values["jax_enable_checks"]:
        return checked_optimize(ir, name)
    return optimize(ir)


def checked_optimize(ir, name="jit"):
    """``optimize`` with the IR checker run on its input and after each pass
    (``jax_enable_checks``); a failure names the pass that broke the IR."""
    _check_after(ir, "tracing", name)
    for pass_ in (simplify, cse, dce):
        ir = _check_after(pass_(ir), pass_.__name__, name)
    return ir


def _check_after(ir, what, name):
    try:
        return check_ir(ir)
    except IRCheckError as e:
        raise IRCheckError(f"{name}: the IR is inconsistent after {what} "
                           f"(jax_enable_checks): {e}") from e


def _check_output_leaf(x, path, name):
    if isinstance(x, (Array, np.ndarray, np.generic, bool, int, float, complex)):
        return
    raise TypeError(f"{name}: output {tree_util.keystr(path)} is a {type(x).__name__}; "
                    "traced functions must return arrays, Python scalars or pytrees of them")


def flatten_static(args, kwargs, static_argnums, static_argnames):
    """Split call arguments into (static key, dynamic leaves, in_tree)."""
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_argnums)
    static_args = tuple((i, args[i]) for i in static_argnums if i < len(args))
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_argnames}
    static_kwargs = tuple(sorted((k, v) for k, v in kwargs.items() if k in static_argnames))
    leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
    return (static_args, static_kwargs), leaves, in_tree


def rebuild_call(fun, static, in_tree, static_argnums):
    """A flat function of the dynamic leaves that calls ``fun`` with the full arguments.

    Returns (flat_fun, out_tree_box); ``out_tree_box[0]`` is set when it runs.
    """
    static_args, static_kwargs = static
    out_tree_box = [None]

    def flat_fun(*leaves):
        dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, leaves)
        args, it = [], iter(dyn_args)
        positions = dict(static_args)
        for i in range(len(dyn_args) + len(static_args)):
            args.append(positions[i] if i in positions else next(it))
        out = fun(*args, **dyn_kwargs, **dict(static_kwargs))
        out_leaves, out_tree_box[0] = tree_util.tree_flatten(out)
        return out_leaves

    return flat_fun, out_tree_box


def normalize_argnums(static_argnums):
    """``static_argnums`` (None, an int or a sequence) as a sorted tuple."""
    if static_argnums is None:
        return ()
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return tuple(sorted(static_argnums))


def make_ir(fun, static_argnums=(), *, return_shape=False):
    """``make_ir(f)(*args)`` returns the IR of ``f`` for arguments shaped like ``args``.

    Arguments may be arrays, Python scalars or ``ShapeDtypeStruct`` placeholders;
    nothing is computed. With ``return_shape=True`` also returns the output
    shapes as a pytree of ``ShapeDtypeStruct``.
    """
    static_argnums = normalize_argnums(static_argnums)

    def make(*args, **kwargs):
        static, leaves, in_tree = flatten_static(args, kwargs, static_argnums, ())
        flat_fun, out_tree = rebuild_call(fun, static, in_tree, static_argnums)
        name = getattr(fun, "__name__", "fun")
        ir = trace_flat(flat_fun, [abstractify(x, name) for x in leaves], name)
        if return_shape:
            return ir, tree_util.tree_unflatten(out_tree[0], ir.out_avals)
        return ir

    return make


def eval_shape(fun, *args, **kwargs):
    """Output shapes and dtypes of ``fun(*args)`` without allocating or computing.

    ``args`` may be ``ShapeDtypeStruct`` placeholders, arrays or scalars; the
    result is a pytree of ``ShapeDtypeStruct``.
    """
    return make_ir(fun, return_shape=True)(*args, **kwargs)[1]
