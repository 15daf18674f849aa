"""Forward-mode differentiation: ``fnx.jvp``.

A ``JVPTrace`` carries (primal, tangent) pairs. Each primitive call is
handed to the primitive's ``jvp`` rule, which computes the output primal and
tangent with ordinary fnx ops bound on the parent trace, so rules compose
with every other transformation (and with themselves: jvp of jvp). Tangents
that are known to be zero are ``None`` (symbolic zeros): a primitive whose
inputs all have zero tangents is bound on the parent with no tangent work.

Values of enclosing traces reach an inner JVP trace as constants (zero
tangent), which is what keeps nested derivatives from confusing their
perturbations: ``jvp`` of ``lambda x: jvp(lambda y: x * y, ...)`` treats
``x`` as a constant inside.
"""
from __future__ import annotations

import numpy as np

from .. import tree_util
from ..core import ops
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..core.trace import Trace, get_trace, parent_context, trace_context
from ..errors import MissingRuleError, TreeMismatchError


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        super().__init__(trace, primal.aval)
        self.primal = primal
        self.tangent = tangent

    def _concrete(self, what):
        # Python control flow on concrete primals keeps working under jvp/grad.
        return self.primal._concrete(what)


class JVPTrace(Trace):
    name = "jvp"

    def __init__(self, parent):
        self.parent = parent

    def lift(self, x, prim_name):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x, prim_name)
        return x, None

    def process_primitive(self, prim, args, params):
        primals, tangents = zip(*[self.lift(a, prim.name) for a in args]) if args else ((), ())
        with parent_context(self):
            if all(t is None for t in tangents):
                return prim.bind(*primals, **params)
            if prim.jvp is None:
                raise MissingRuleError(
                    f"{prim.name} has no jvp rule, so it cannot be differentiated in forward "
                    "or reverse mode. Register one with `prim.jvp = rule` (see "
                    "fnx.transforms.jvp.defjvp), or wrap the computation in "
                    "fnx.lax.stop_gradient if its derivative is not needed.")
            out, out_t = prim.jvp(list(primals), list(tangents), **params)
        if prim.multiple_results:
            return [JVPTracer(self, p, _float_only(p, t)) for p, t in zip(out, out_t)]
        return JVPTracer(self, out, _float_only(out, out_t))


def _float_only(p, t):
    """Integer and bool outputs carry no tangent."""
    return t if t is not None and dtypes.is_inexact(p.dtype) else None


def _check_tangent(p, t, i):
    if tuple(p.shape) != tuple(t.shape):
        raise ValueError(f"jvp: tangent {i} has shape {tuple(t.shape)} but its primal has "
                         f"shape {tuple(p.shape)}")
    if dtypes.is_inexact(p.dtype) and t.dtype != p.dtype:
        raise TypeError(f"jvp: tangent {i} has dtype {t.dtype} but its primal has dtype "
                        f"{p.dtype}; tangents must match their primals' dtypes")


_FLOAT0 = np.dtype([("float0", np.void, 0)])  # JAX's tangent dtype of integer primals


def _float0_tangent(p, t, i):
    """A tangent as an array: a float0 one (what JAX asks for an integer or bool primal)
    is that primal's zero tangent."""
    if getattr(t, "dtype", None) != _FLOAT0:
        return to_array(t)
    if dtypes.is_inexact(p.dtype):
        raise TypeError(f"jvp: tangent {i} has dtype float0 but its primal has dtype "
                        f"{p.dtype}; only integer and bool primals take float0 tangents")
    if tuple(np.shape(t)) != tuple(p.shape):
        raise ValueError(f"jvp: tangent {i} has shape {tuple(np.shape(t))} but its primal "
                         f"has shape {tuple(p.shape)}")
    return zeros_like_tangent(p)


def jvp(fun, primals, tangents, has_aux=False):
    """``(fun(*primals), d fun(primals)[tangents])``: the forward-mode derivative.

    ``primals`` and ``tangents`` are tuples of pytrees of equal structure.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument), "
                        f"got {type(primals).__name__} and {type(tangents).__name__}")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TreeMismatchError(f"jvp: primals and tangents must have the same structure, got "
                         f"{p_tree} and {t_tree}")
    p_leaves = [to_array(p) for p in p_leaves]
    t_leaves = [_float0_tangent(p, t, i) for i, (p, t) in enumerate(zip(p_leaves, t_leaves))]
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        _check_tangent(p, t, i)
    trace = JVPTrace(get_trace())
    with trace_context(trace):
        ins = [JVPTracer(trace, p, t) for p, t in zip(p_leaves, t_leaves)]
        out = fun(*tree_util.tree_unflatten(p_tree, ins))
        if has_aux:
            out, aux = split_aux(out, "jvp")
        out_leaves, out_tree = tree_util.tree_flatten(out)
        pairs = [trace.lift(to_array(o) if not isinstance(o, Array) else o, "jvp output")
                 for o in out_leaves]
        if has_aux:
            aux = tree_util.tree_map(lambda a: trace.lift(a, "aux")[0]
                                     if isinstance(a, Array) else a, aux)
    outs = [p for p, _ in pairs]
    outs_t = [zeros_like_tangent(p) if t is None else t for p, t in pairs]
    result = (tree_util.tree_unflatten(out_tree, outs), tree_util.tree_unflatten(out_tree, outs_t))
    return result + (aux,) if has_aux else result


def split_aux(out, name):
    """``(output, aux)`` of a ``has_aux=True`` function, or a clear TypeError (as JAX)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        what = "a single array" if isinstance(out, Array) else type(out).__name__
        raise TypeError(f"{name}: with has_aux=True the function must return a pair "
                        f"(output, aux), got {what}"
                        + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
                        + "; return (out, aux), or drop has_aux=True")
    return out[0], out[1]


def zeros_like_tangent(x):
    """An explicit zero tangent for ``x`` (integer primals get float0-like int zeros)."""
    return ops.broadcast_in_dim(Array._wrap(np.zeros((), x.dtype)), x.shape, ())


# --- rule constructors (used next to each primitive's definition) -------------------------

def instantiate(t, like):
    return zeros_like_tangent(like) if t is None else t


def _fit(c, shape):
    """A contribution computed against a rank-0 operand, broadcast to the output shape."""
    if c is None or tuple(c.shape) == tuple(shape):
        return c
    return ops.broadcast_in_dim(c, tuple(shape), ())


def sum_tangents(ts):
    """The sum of the tangents in ``ts`` that are not None (None if all are)."""
    out = None
    for t in ts:
        if t is not None:
            out = t if out is None else ops.add(out, t)
    return out




def defjvp(prim, *rules):
    """``rules[i](g, ans, *primals, **params)`` is the output tangent from input ``i``'s
    tangent ``g`` (None: that input is not differentiable)."""
    def jvp_rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        parts = [_fit(rule(t, ans, *primals, **params), ans.shape)
                 for rule, t in zip(rules, tangents) if rule is not None and t is not None]
        return ans, sum_tangents(parts)
    prim.jvp = jvp_rule


def defjvp_zero(prim):
    """Piecewise-constant or non-differentiable outputs: the tangent is zero."""
    def jvp_rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, ([None] * len(out) if prim.multiple_results else None)
    prim.jvp = jvp_rule


def deflinear(prim):
    """A primitive linear in all its inputs: the tangent is the primitive of the tangents."""
    def jvp_rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        ts = [instantiate(t, p) for p, t in zip(primals, tangents)]
        return out, prim.bind(*ts, **params)
    prim.jvp = jvp_rule
    prim.linear = True


def deflinear_in(prim, argnum):
    """Linear in input ``argnum``; the other inputs (indices, starts) are static-like."""
    def jvp_rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if tangents[argnum] is None:
            return out, None
        args = list(primals)
        args[argnum] = tangents[argnum]
        return out, prim.bind(*args, **params)
    prim.jvp = jvp_rule
    prim.linear = True
