"""What the control-flow primitives share: tracing Python functions into closed IRs,
running an IR's jvp/vmap inside a rule, linearizing a body, and checking a loop's carry
against its initial value."""
from __future__ import annotations

from ... import tree_util
from ...core import dtypes
from ...core.array import Array, to_array
from ...core.ir import Var, eval_ir
from ...core.primitive import ShapeDtypeStruct
from ...core.trace import get_trace, trace_context
from ...core.tracing import trace_flat


def _strong(aval):
    return ShapeDtypeStruct(aval.shape, aval.dtype, aval.weak_type)


def _closed(fun, in_avals, name):
    """Trace ``fun(*tracers) -> list`` into an IR without constants: (ir, consts), where
    the IR takes ``consts + inputs``."""
    return trace_flat(fun, in_avals, name).hoist_consts()




def _zeros(aval):
    from ..ops import full
    return full(aval.shape, 0, aval.dtype)


def _jvp_flat(fn, primals, tangents):
    """``fn``'s outputs and their tangents (None: symbolic zero)."""
    from ...transforms.jvp import JVPTrace, JVPTracer
    trace = JVPTrace(get_trace())
    with trace_context(trace):
        ins = [p if t is None else JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        outs = fn(*ins)
        pairs = [trace.lift(o if isinstance(o, Array) else to_array(o), "output") for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def _nothing():
    import contextlib
    return contextlib.nullcontext()


def _batch_flat(fn, vals, dims, size, force=None):
    """``fn`` vmapped: (outputs, their batch dims, 0 or None); ``force[k]``: batch output
    ``k`` at 0 even when it does not vary."""
    from ...core.axis_env import axis_frame
    from ...transforms.vmap import (BatchTrace, BatchTracer, batching_axis_name,
                                    materialize_batch_axis)
    name = batching_axis_name()
    trace = BatchTrace(get_trace(), size, name)
    frame = axis_frame(name, size, "vmap", trace) if name is not None else _nothing()
    with frame, trace_context(trace):
        ins = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, dims)]
        outs = fn(*ins)
        lifted = [trace.lift(o if isinstance(o, Array) else to_array(o), "output")
                  for o in outs]
    res, rdims = [], []
    for k, (v, d) in enumerate(lifted):
        if d is None and force is not None and force[k]:
            v, d = materialize_batch_axis(v, None, size, v.shape), 0
        res.append(v)
        rdims.append(d)
    return res, rdims


def _batched_aval(aval, d, size):
    if d is None:
        return aval
    return ShapeDtypeStruct((size,) + tuple(aval.shape), aval.dtype, aval.weak_type)


def _linearize_parts(ir, mask):
    """Inside a trace: linearize ``eval_ir(ir)`` at the current tracers with respect to the
    inputs where ``mask``; used as ``fun`` of ``_closed``. Returns (fun, box) where box
    receives (linear IR, zero outputs)."""
    from ...transforms.vjp import linearize_flat
    box = {}

    def fun(*args):
        def f(*d):
            it = iter(d)
            return eval_ir(ir, *[next(it) if m else a for a, m in zip(args, mask)])
        zero = []
        outs, lin = linearize_flat(f, [a for a, m in zip(args, mask) if m], zero)
        box["lin"], box["zero"] = lin, zero
        return list(outs) + list(lin.consts)
    return fun, box




def _describe_aval(a):
    return f"{dtypes.short_name(a.dtype)}{list(a.shape)}{' (weak)' if a.weak_type else ''}"


def _fun_name(f):
    return getattr(f, "__name__", type(f).__name__)


def _used_invars(ir):
    used = {v for e in ir.eqns for v in e.inputs if type(v) is Var}
    used |= {v for v in ir.outvars if type(v) is Var}
    return used


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _match_carry(name, fname, tree, avals, out_tree, outs, promote=None, strong=None):
    """The body's new carry, checked against the old one. A weakly typed initial carry
    that the body returns with another dtype (``0`` summed with float32 arrays) is noted in
    ``promote`` (the caller traces again with that type, as JAX does); one it returns with
    the same dtype, strongly typed (``0.0`` summed with float32 arrays), keeps its weak type
    inside the loop and is noted in ``strong`` (the loop's result is strongly typed: JAX's
    types). The output is converted to the carry's exact type."""
    from ..ops import convert_element_type
    if out_tree != tree:
        raise TypeError(f"{name}: {fname} must return a carry with the same pytree structure "
                        f"as the initial one; the initial carry is {tree}, {fname} returned "
                        f"{out_tree}")
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(
        tree_util.tree_unflatten(tree, list(range(tree.num_leaves))))]
    fixed = []
    for k, (p, a, o) in enumerate(zip(paths, avals, outs)):
        # a weak initial value takes the body's type where JAX's promotion would give it
        # (0 -> float32), not where it would lose its kind (0.0 -> int32: an error)
        weak_init = a.weak_type and o.dtype.kind in "biufc" and o.dtype != a.dtype and (
            _KIND_RANK[o.dtype.kind] > _KIND_RANK[a.dtype.kind] or
            (not o.weak_type and _KIND_RANK[o.dtype.kind] == _KIND_RANK[a.dtype.kind]))
        if tuple(o.shape) != a.shape or (o.dtype != a.dtype and not o.weak_type
                                         and not weak_init):
            raise TypeError(
                f"{name}: the carry{p} changes type: it enters {fname} as "
                f"{_describe_aval(a)} and comes out as {_describe_aval(o.aval)}. The carry "
                "must keep its shape and dtype across iterations; give the initial value "
                "the output's type (e.g. .astype(...) or fnx.numpy.zeros(shape, dtype)).")
        if weak_init and promote is not None:
            promote[k] = ShapeDtypeStruct(a.shape, o.dtype, False)
        if a.weak_type and not o.weak_type and o.dtype == a.dtype and strong is not None:
            strong.add(k)  # the body's output stays strong: only the type flag differs
        elif o.dtype != a.dtype or o.weak_type != a.weak_type:
            o = convert_element_type(o, a.dtype, weak_type=a.weak_type)
        fixed.append(o)
    return fixed


def _strengthened(outs, strong):
    """The loop's final carry with the leaves in ``strong`` strongly typed (the body made
    them so from a weakly typed initial value of the same dtype)."""
    from ..ops import convert_element_type
    outs = list(outs)
    for k in strong:
        outs[k] = convert_element_type(outs[k], outs[k].dtype, weak_type=False)
    return outs


def _promoted(leaves, avals, promote):
    """Initial carry leaves converted to the types the body gives them."""
    from ..ops import convert_element_type
    for k, a in promote.items():
        leaves[k] = convert_element_type(leaves[k], a.dtype)
        avals[k] = a


def _as_list(out):
    return [out] if isinstance(out, str) else list(out)
