"""``fnx.custom_batching``: JAX's ``custom_vmap`` and ``sequential_vmap``.

    @fnx.custom_batching.custom_vmap
    def f(x, y):
        return x + y

    @f.def_vmap
    def f_rule(axis_size, in_batched, xs, ys):
        return xs * ys, True          # (output, whether it is batched)

    fnx.vmap(f)(xs, ys)              # the rule: xs * ys

Called directly (or under jit, grad, jvp without vmap) a ``custom_vmap`` function is its
own Python function. Under ``vmap`` its calls are replaced by the rule, which gets the
batch size, one flag per argument leaf structure (``in_batched``: a pytree of bools like
the arguments) and the arguments, batched ones with the batch axis first; it returns the
outputs and a pytree of bools saying which outputs carry the batch axis (first).
Forward mode (``jvp``) differentiates the function, and under ``vmap`` the rule. Reverse
mode (``grad``, ``vjp``) is not defined for a ``custom_vmap`` function, as in JAX: put a
``custom_vjp`` around it. A ``custom_vmap`` function must take the traced values it uses
as arguments; closing over a value traced by an enclosing ``jit`` raises.

``sequential_vmap(f)`` is ``f`` whose vmap runs it once per batch element (a loop), for
functions with no batched form (a callback into an external library, say).
"""
from __future__ import annotations

import functools

import numpy as np

from . import lax, tree_util
from .core.array import Array, Tracer, to_array
from .core.primitive import Primitive, ShapeDtypeStruct
from .core.trace import EVAL, get_trace
from .core.tracing import trace_flat
from .transforms.custom import function_call_body
from .errors import CustomRuleError

__all__ = ["custom_vmap", "sequential_vmap"]


def _shape_rule(*avals, fun, rule, name):
    ir = trace_flat(fun, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in avals],
                    name)
    return list(ir.out_avals)


def _impl(*vals, fun, rule, name):
    return [o._value for o in fun(*[Array._wrap(v) for v in vals])]


custom_vmap_call_p = Primitive("custom_vmap_call", shape_rule=_shape_rule, impl=_impl,
                               multiple_results=True)


def _batch(vals, dims, size, *, fun, rule, name):
    from .transforms.vmap import move_to_front
    vals = [move_to_front(v, d) for v, d in zip(vals, dims)]
    outs, out_batched = rule(size, [d is not None for d in dims], vals)
    return outs, [0 if b else None for b in out_batched]


def _broadcast_front(x, size):
    return lax.broadcast(x, (size,))


def _zeros_like(x):
    """Zeros of ``x``'s shape, dtype and weak type (``fnx.numpy.zeros_like``)."""
    return lax.broadcast_in_dim(Array._wrap(np.zeros((), x.dtype)[()], x.weak_type),
                                tuple(x.shape), ())


def _reverse_mode(values):
    """Whether the jvp is being taken for reverse mode (linearize/vjp/grad): its tangents
    are unknowns of a partial-evaluation or tape trace."""
    from .transforms.tape import TapeTrace
    from .transforms.vjp import PartialIRTrace
    kinds = (PartialIRTrace, TapeTrace)
    t = get_trace()
    while t is not None and t is not EVAL:
        if isinstance(t, kinds):
            return True
        t = t.parent
    return any(isinstance(v, Tracer) and isinstance(v._trace, kinds) for v in values)


def _jvp(primals, tangents, *, fun, rule, name):
    from .transforms.jvp import jvp
    if _reverse_mode([t for t in tangents if t is not None]):
        raise CustomRuleError(
            f"custom_vmap {name}: reverse-mode differentiation (grad, vjp) of a custom_vmap "
            "function is not defined (as in JAX); wrap it in fnx.custom_vjp (outside the "
            "custom_vmap) to give it a gradient, or use jvp/jacfwd")
    n = len(primals)
    tangents = [_zeros_like(p) if t is None else t for p, t in zip(primals, tangents)]

    def fun_jvp(*pt):
        outs, out_t = jvp(lambda *p: fun(*p), tuple(pt[:n]), tuple(pt[n:]))
        return list(outs) + list(out_t)

    def rule_jvp(size, batched, pt):
        bp, bt = batched[:n], batched[n:]
        both = [a or b for a, b in zip(bp, bt)]
        p = [_broadcast_front(v, size) if b and not a else v for v, a, b in zip(pt[:n], bp, both)]
        t = [_broadcast_front(v, size) if b and not a else v for v, a, b in zip(pt[n:], bt, both)]
        flags = []

        def primal_rule(*p):
            outs, out_b = rule(size, both, list(p))
            flags[:] = list(out_b)
            return list(outs)

        outs, out_t = jvp(primal_rule, tuple(p), tuple(t))
        return list(outs) + list(out_t), flags + flags

    outs = custom_vmap_call_p.bind(*primals, *tangents, fun=fun_jvp, rule=rule_jvp,
                                   name=f"jvp({name})")
    m = len(outs) // 2
    return outs[:m], outs[m:]


custom_vmap_call_p.batch = _batch
custom_vmap_call_p.call_body = function_call_body
custom_vmap_call_p.jvp = _jvp
custom_vmap_call_p.not_needed = {"transpose": "not linear; reverse mode needs a custom_vjp "
                                               "around the custom_vmap function"}


class custom_vmap:
    """A function with its own vmap rule (see the module doc); define the rule with
    ``@f.def_vmap``."""

    def __init__(self, fun):
        # fun's name, doc and attributes first (as functools.wraps; a custom_vmap's def_vmap
        # stays reachable through decorators stacked on it), then this object's own fields,
        # so a wrapped custom_jvp's or jit's `fun` never replaces ours
        functools.update_wrapper(self, fun)
        # (names of our own: jit copies a wrapped callable's __dict__ onto itself)
        self._cvmap_fun = fun
        self.vmap_rule = None
        # An instance attribute, so a wrapper that copies our __dict__ (custom_vjp around a
        # custom_vmap, as JAX's docs stack them) offers f.def_vmap too.
        self.def_vmap = self._def_vmap

    def _def_vmap(self, vmap_rule):
        """Set the rule ``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``;
        returns it (a decorator)."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"custom_vmap {self.__name__}: pass the arguments positionally "
                            "(the vmap rule takes them positionally)")
        if self.vmap_rule is None:
            raise AttributeError(f"custom_vmap {self.__name__}: no vmap rule; define one with "
                                 "@f.def_vmap before calling f")
        if get_trace() is EVAL:
            return self._cvmap_fun(*args)
        leaves, in_tree = tree_util.tree_flatten(tuple(args))
        leaves = [to_array(x) for x in leaves]
        out_tree = [None]
        name = getattr(self._cvmap_fun, "__name__", "custom_vmap")

        def fun_flat(*xs):
            out = self._cvmap_fun(*tree_util.tree_unflatten(in_tree, list(xs)))
            flat, out_tree[0] = tree_util.tree_flatten(out)
            return [to_array(o) for o in flat]

        ir = trace_flat(fun_flat, [ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)
                                   for x in leaves], name)
        if any(isinstance(c, Tracer) for c in ir.consts):
            raise CustomRuleError(
                f"custom_vmap {self.__name__}: the function closes over a traced value (of an "
                "enclosing jit, grad or vmap); pass every traced value it uses as an argument")
        rule = self.vmap_rule

        def rule_flat(size, batched, xs):
            args = tree_util.tree_unflatten(in_tree, list(xs))
            flags = tree_util.tree_unflatten(in_tree, list(batched))
            res = rule(size, list(flags), *args)
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise CustomRuleError(f"custom_vmap {self.__name__}: the vmap rule must return "
                                      f"a pair (out, out_batched), got {type(res).__name__}")
            out, out_batched = res
            flat, tree = tree_util.tree_flatten(out)
            if tree != out_tree[0]:
                raise CustomRuleError(
                    f"custom_vmap {self.__name__}: the vmap rule's output is structured as "
                    f"{tree}, but the function's as {out_tree[0]}")
            if isinstance(out_batched, bool):
                b = [out_batched] * len(flat)
            else:
                b = tree_util.tree_leaves(out_batched)
                if len(b) != len(flat) or not all(isinstance(v, bool) for v in b):
                    raise CustomRuleError(
                        f"custom_vmap {self.__name__}: out_batched must be a bool or a "
                        f"pytree of bools like the output ({tree}); got {out_batched!r}")
            outs = [to_array(o) for o in flat]
            for i, (o, ob) in enumerate(zip(outs, b)):
                want = ((size,) if ob else ()) + tuple(ir.out_avals[i].shape)
                if tuple(o.shape) != want:
                    raise CustomRuleError(
                        f"custom_vmap {self.__name__}: output {i} of the vmap rule has shape "
                        f"{tuple(o.shape)}, but out_batched={ob} and the function's output "
                        f"shape {tuple(ir.out_avals[i].shape)} ask for {want}")
            return outs, b

        fun_flat.__name__ = name
        outs = custom_vmap_call_p.bind(*leaves, fun=fun_flat, rule=rule_flat, name=name)
        return tree_util.tree_unflatten(out_tree[0], outs)


def _in_batched_leaves(in_batched):
    return tree_util.tree_leaves(in_batched)


def sequential_vmap(f):
    """``f`` as a ``custom_vmap`` whose rule runs ``f`` once per batch element, in order
    (``fnx.lax.map``), broadcasting the unbatched arguments."""
    from . import lax

    @custom_vmap
    @functools.wraps(f)
    def g(*args):
        return f(*args)

    @g.def_vmap
    def rule(axis_size, in_batched, *args):
        leaves, tree = tree_util.tree_flatten(tuple(args))
        flags = _in_batched_leaves(list(in_batched))
        leaves = [x if b else _broadcast_front(to_array(x), axis_size)
                  for x, b in zip(leaves, flags)]
        out = lax.map(lambda xs: f(*tree_util.tree_unflatten(tree, list(xs))), leaves)
        return out, True

    return g
