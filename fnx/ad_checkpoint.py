"""JAX's ``jax.ad_checkpoint`` names: rematerialization (``fnx.checkpoint``), value
names for save policies (``checkpoint_name``), and ``saved_residuals`` /
``print_saved_residuals``: what reverse mode saves from the forward pass for the
backward pass."""
from __future__ import annotations

import inspect

from . import tree_util
from .core.primitive import ShapeDtypeStruct
from .core.trace import trace_context
from .core.tracing import IRTrace, IRTracer, abstractify
from .transforms.custom import (NAME_SINKS, checkpoint, checkpoint_name,  # noqa: F401
                                checkpoint_policies, remat)
from .transforms.vjp import linearize_flat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "print_saved_residuals",
           "remat", "saved_residuals"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _leaf_names(fun, args, kwargs):
    """A name per leaf of ``(args, kwargs)``, in flattening order: the parameter's name
    (``args[i]`` without a signature), then the key path inside it (``d['b']``)."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    star = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    names = []
    for i, a in enumerate(args):
        if i < len(positional):
            base = positional[i]
        elif star is not None:
            base = f"{star}[{i - len(positional)}]"
        else:
            base = f"args[{i}]"
        names.extend(base + tree_util.keystr(p)
                     for p, _ in tree_util.tree_flatten_with_path(a)[0])
    for k in sorted(kwargs):  # a dict flattens in key order
        names.extend(k + tree_util.keystr(p)
                     for p, _ in tree_util.tree_flatten_with_path(kwargs[k])[0])
    return names


def _describe(var, producers, names):
    """Where a traced value comes from: its checkpoint_name, else the primitive that made
    it (looking into the calls, such as a checkpointed function's, that returned it)."""
    named = names.get(var)
    if named is not None:
        return f"named {named[0]!r} from {named[1]}"
    found = producers.get(var)
    while found is not None:
        e, k = found
        sub = getattr(e.params.get("fun"), "ir", None) or e.params.get("ir")
        if e.prim.name in ("remat_call", "jit") and sub is not None:
            inner = sub.outvars[k]
            named = names.get(inner)
            if named is not None:
                return f"named {named[0]!r} from {named[1]}"
            nested = {v: (f, j) for f in sub.eqns for j, v in enumerate(f.outputs)}
            if inner in nested:
                found = nested[inner]
                continue
            if inner in sub.invars:  # passed through: describe what came in
                return _describe(e.inputs[sub.invars.index(inner)], producers, names)
        return f"output of {e.prim.name} from {e.source}"
    return "from a constant"


def saved_residuals(f, *args, **kwargs):
    """The values reverse mode saves in the forward pass of ``f(*args, **kwargs)`` for its
    backward pass, as a list of ``(ShapeDtypeStruct, description)``: arguments first
    (``"from the argument W1"``), then the computed values in the order the forward pass
    makes them (``"output of sin from file:line (g)"``, or ``"named 'a' from ..."`` for a
    value named by ``checkpoint_name``). Arguments may be arrays, scalars or
    ``ShapeDtypeStruct`` placeholders: nothing is computed."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    arg_names = _leaf_names(f, args, kwargs)
    avals = [abstractify(x, "saved_residuals") for x in leaves]
    trace = IRTrace(None, "saved_residuals")
    names = {}
    NAME_SINKS.append(names)
    try:
        with trace_context(trace):
            ins = [trace.new_arg(a) for a in avals]

            def flat(*xs):
                a, k = tree_util.tree_unflatten(in_tree, xs)
                return tree_util.tree_leaves(f(*a, **k))

            _, lin = linearize_flat(flat, ins)
    finally:
        NAME_SINKS.pop()
    position = {v: i for i, v in enumerate(trace.invars)}
    order = {}
    producers = {}
    for n, e in enumerate(trace.eqns):
        for k, v in enumerate(e.outputs):
            producers[v] = (e, k)
            order[v] = n
    from_args, computed = [], []
    for c in lin.consts:
        var = c.ir_var if isinstance(c, IRTracer) and c._trace is trace else None
        aval = ShapeDtypeStruct(c.shape, c.dtype)
        if var in position:
            i = position[var]
            from_args.append((i, (aval, f"from the argument {arg_names[i]}")))
        else:
            named = names.get(var)
            at = order.get(var, len(order))
            if named is not None and len(named) > 2 and named[2] > at:
                at = named[2] - 0.5  # where checkpoint_name was called
            computed.append((at, (aval, _describe(var, producers, names))))
    from_args.sort(key=lambda t: t[0])
    computed.sort(key=lambda t: t[0])
    return [r for _, r in from_args] + [r for _, r in computed]


def print_saved_residuals(f, *args, **kwargs):
    """Print what reverse mode saves from the forward pass of ``f(*args, **kwargs)``, one
    line per value in JAX's format (``f32[5,4] from the argument W1``, ``f32[5] output of
    sin from file:line (g)``, ``f32[5] named 'a' from file:line (f)``); see
    ``saved_residuals``. fnx's source positions have no column."""
    for aval, description in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {description}")

