"""``custom_jvp`` and ``custom_vjp``: user-defined derivatives.

Each decorated function is called through a call primitive that carries the
Python function and its rule. Evaluated (eagerly or in jit-compiled code) it
runs the function; under ``jvp`` its rule runs instead. A ``custom_vjp``'s jvp
is the user's ``fwd`` plus a linear primitive, ``custom_lin``, whose
transpose is the user's ``bwd``: so reverse mode (linearize + transpose) uses
``bwd`` with the residuals ``fwd`` saved, at any nesting under ``jit``.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import tree_util
from ..core.array import Array, to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..core.tracing import trace_flat
from ..errors import FnxError
from .jvp import instantiate


def _out_avals(fun_flat, avals):
    ir = trace_flat(fun_flat, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in avals],
                    getattr(fun_flat, "__name__", "custom"))
    return ir.out_avals


def _call_rule(*args, fun, rule, name):
    return _out_avals(fun, args)


def _call_impl(*vals, fun, rule, name):
    return [o._value for o in fun(*[Array._wrap(v) for v in vals])]


custom_jvp_call_p = Primitive("custom_jvp_call", shape_rule=_call_rule, impl=_call_impl,
                              multiple_results=True)
custom_vjp_call_p = Primitive("custom_vjp_call", shape_rule=_call_rule, impl=_call_impl,
                              multiple_results=True)


def _custom_jvp_jvp(primals, tangents, *, fun, rule, name):
    tangents = [instantiate(t, p) for p, t in zip(primals, tangents)]
    outs, out_t = rule(list(primals), tangents)
    return outs, out_t


custom_jvp_call_p.jvp = _custom_jvp_jvp


def _lin_rule(*args, num_res, bwd, out_avals):
    return list(out_avals)


def _lin_impl(*args, num_res, bwd, out_avals):
    raise FnxError("a custom_vjp function cannot be differentiated in forward mode "
                   "(jvp/jacfwd): it only defines a backward pass. Use grad/vjp/jacrev, or "
                   "give it a custom_jvp instead.")


custom_lin_p = Primitive("custom_lin", shape_rule=_lin_rule, impl=_lin_impl,
                         multiple_results=True)


def _lin_transpose(cts, *args, num_res, bwd, out_avals):
    res = args[:num_res]
    cts = [Array._wrap(np.zeros(a.shape, a.dtype)) if c is None else c
           for c, a in zip(cts, out_avals)]
    return [None] * num_res + list(bwd(list(res), cts))


custom_lin_p.transpose = _lin_transpose
custom_lin_p.not_needed = {"jvp": "the linear half of a custom_vjp, which has no forward "
                                  "mode (as in JAX)"}


def _custom_vjp_jvp(primals, tangents, *, fun, rule, name):
    fwd, bwd = rule
    outs, res = fwd(list(primals))
    tangents = [instantiate(t, p) for p, t in zip(primals, tangents)]
    out_t = custom_lin_p.bind(*res, *tangents, num_res=len(res), bwd=bwd,
                              out_avals=tuple(o.aval for o in outs))
    return outs, out_t


custom_vjp_call_p.jvp = _custom_vjp_jvp


class _Custom:
    def __init__(self, fun, nondiff_argnums=()):
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        functools.update_wrapper(self, fun)

    def _split(self, args):
        static = {i: args[i] for i in self.nondiff_argnums}
        diff = [a for i, a in enumerate(args) if i not in static]
        leaves, tree = tree_util.tree_flatten(tuple(diff))
        return static, [to_array(x) for x in leaves], tree

    def _full(self, static, tree, leaves):
        """All arguments in order: static ones in place, differentiable ones from leaves."""
        diff = list(tree_util.tree_unflatten(tree, list(leaves)))
        it = iter(diff)
        return [static[i] if i in static else next(it) for i in range(len(static) + len(diff))]

    def _flat_fun(self, static, tree, out_tree_box):
        def fun_flat(*leaves):
            out = self.fun(*self._full(static, tree, leaves))
            flat, out_tree_box[0] = tree_util.tree_flatten(out)
            return [to_array(o) for o in flat]
        fun_flat.__name__ = getattr(self.fun, "__name__", "custom")
        return fun_flat


class custom_jvp(_Custom):
    """A function with a user-defined jvp rule::

        @fnx.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents): return f(*primals), tangent_out
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def __call__(self, *args):
        if self.jvp is None:
            raise AttributeError(f"custom_jvp {self.__name__}: no jvp rule; define one with "
                                 "@f.defjvp before calling f")
        static, leaves, tree = self._split(args)
        out_tree = [None]
        fun_flat = self._flat_fun(static, tree, out_tree)
        nondiff = [static[i] for i in sorted(static)]

        def rule(primals, tangents):
            p = tree_util.tree_unflatten(tree, primals)
            t = tree_util.tree_unflatten(tree, tangents)
            out, out_t = self.jvp(*nondiff, tuple(p), tuple(t)) if nondiff else \
                self.jvp(tuple(p), tuple(t))
            return ([to_array(o) for o in tree_util.tree_leaves(out)],
                    [to_array(o) for o in tree_util.tree_leaves(out_t)])

        outs = custom_jvp_call_p.bind(*leaves, fun=fun_flat, rule=rule, name=self.__name__)
        if out_tree[0] is None:
            _out_avals(fun_flat, leaves)
        return tree_util.tree_unflatten(out_tree[0], outs)


class custom_vjp(_Custom):
    """A function with a user-defined backward pass::

        @fnx.custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), residuals      # residuals: any pytree
        def f_bwd(residuals, g): return (cotangent_x,)
        f.defvjp(f_fwd, f_bwd)

    With ``nondiff_argnums`` those arguments are passed first to ``bwd``.
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        if self.fwd is None:
            raise AttributeError(f"custom_vjp {self.__name__}: call f.defvjp(fwd, bwd) first")
        static, leaves, tree = self._split(args)
        out_tree = [None]
        fun_flat = self._flat_fun(static, tree, out_tree)
        nondiff = [static[i] for i in sorted(static)]
        res_tree = [None]

        def fwd_flat(primals):
            full = self._full(static, tree, primals)
            out, res = self.fwd(*full)
            res_leaves, res_tree[0] = tree_util.tree_flatten(res)
            return ([to_array(o) for o in tree_util.tree_leaves(out)],
                    [to_array(r) for r in res_leaves])

        def bwd_flat(res, cts):
            r = tree_util.tree_unflatten(res_tree[0], res)
            g = tree_util.tree_unflatten(out_tree[0], cts)
            ct = self.bwd(*nondiff, r, g)
            if not isinstance(ct, tuple):
                raise TypeError(f"custom_vjp {self.__name__}: bwd must return a tuple with "
                                f"one cotangent per differentiable argument, got "
                                f"{type(ct).__name__}")
            return [to_array(c) for c in tree_util.tree_leaves(ct)]

        outs = custom_vjp_call_p.bind(*leaves, fun=fun_flat, rule=(fwd_flat, bwd_flat),
                                      name=self.__name__)
        if out_tree[0] is None:
            _out_avals(fun_flat, leaves)
        return tree_util.tree_unflatten(out_tree[0], outs)


# --- checkpoint / remat ---------------------------------------------------------------------------
# A checkpointed function saves only its inputs for the backward pass. Its jvp is a linear
# primitive, ``remat_lin``, applied to those inputs and the tangents: evaluated, it runs the
# function's jvp; transposed (reverse mode), it re-runs the function's vjp, recomputing the
# forward intermediates instead of storing them.

def _remat_lin_rule(*args, num_res, fun, out_avals):
    return list(out_avals)


def _remat_lin_eval(*args, num_res, fun):
    from .jvp import jvp
    res, tangents = list(args[:num_res]), list(args[num_res:])
    return list(jvp(lambda *xs: fun(*xs), tuple(res), tuple(tangents))[1])


def _remat_lin_impl(*vals, num_res, fun, out_avals):
    return [o._value for o in _remat_lin_eval(*[Array._wrap(v) for v in vals], num_res=num_res,
                                              fun=fun)]


remat_lin_p = Primitive("remat_lin", shape_rule=_remat_lin_rule, impl=_remat_lin_impl,
                        multiple_results=True)


def _remat_lin_transpose(cts, *args, num_res, fun, out_avals):
    from .vjp import vjp
    res = list(args[:num_res])
    cts = [Array._wrap(np.zeros(a.shape, a.dtype)) if c is None else c
           for c, a in zip(cts, out_avals)]
    _, f_vjp = vjp(lambda *xs: fun(*xs), *res)
    return [None] * num_res + list(f_vjp(cts))


def _remat_lin_jvp(primals, tangents, *, num_res, fun, out_avals):
    if any(t is not None for t in tangents[:num_res]):
        # Forward mode over the derivative (jacfwd(jacrev(f)), jvp(grad(f))): differentiate
        # the function's jvp itself. Correct at any order; this second derivative is not
        # itself rematerialized.
        from .jvp import jvp
        ts = [instantiate(t, p) for p, t in zip(primals, tangents)]
        outs, out_t = jvp(lambda *a: list(_remat_lin_eval(*a, num_res=num_res, fun=fun)),
                          tuple(primals), tuple(ts))
        return list(outs), list(out_t)
    outs = remat_lin_p.bind(*primals, num_res=num_res, fun=fun, out_avals=out_avals)
    ts = [instantiate(t, p) for p, t in zip(primals[num_res:], tangents[num_res:])]
    return outs, remat_lin_p.bind(*primals[:num_res], *ts, num_res=num_res, fun=fun,
                                  out_avals=out_avals)


remat_lin_p.transpose = _remat_lin_transpose
remat_lin_p.jvp = _remat_lin_jvp


def _remat_call_rule(*args, fun, name):
    return _out_avals(fun, args)


def _remat_call_impl(*vals, fun, name):
    return [o._value for o in fun(*[Array._wrap(v) for v in vals])]


remat_call_p = Primitive("remat_call", shape_rule=_remat_call_rule, impl=_remat_call_impl,
                         multiple_results=True)


def _remat_call_jvp(primals, tangents, *, fun, name):
    outs = remat_call_p.bind(*primals, fun=fun, name=name)
    ts = [instantiate(t, p) for p, t in zip(primals, tangents)]
    out_t = remat_lin_p.bind(*primals, *ts, num_res=len(primals), fun=fun,
                             out_avals=tuple(o.aval for o in outs))
    return outs, out_t


remat_call_p.jvp = _remat_call_jvp


def checkpoint(fun, *, static_argnums=()):
    """``fun`` whose backward pass recomputes its forward intermediates instead of storing
    them: reverse mode saves only its inputs (``fnx.remat`` is the same function)."""
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else \
        tuple(static_argnums)
    helper = _Custom(fun, static_argnums)

    @functools.wraps(fun)
    def wrapped(*args):
        static, leaves, tree = helper._split(args)
        out_tree = [None]
        fun_flat = helper._flat_fun(static, tree, out_tree)
        outs = remat_call_p.bind(*leaves, fun=fun_flat, name=getattr(fun, "__name__", "f"))
        if out_tree[0] is None:
            _out_avals(fun_flat, leaves)
        return tree_util.tree_unflatten(out_tree[0], outs)

    return wrapped


remat = checkpoint


# --- batching: the call stays a call, with its function and rules vmapped ---------------------
# Under vmap each call primitive binds again with batched versions of what it carries, so
# a custom rule still applies when vmap is inside grad/jvp (``grad(vmap(f))``, ``jacrev``).
# Batch rules see batched operands at axis 0; every output is batched at axis 0.

def _vmapped(fn, axes, size):
    from .vmap import vmap
    batched = vmap(fn, in_axes=axes, axis_size=size)

    def call(*xs):
        return list(batched(*xs))
    call.__name__ = getattr(fn, "__name__", "custom")
    return call


def _custom_jvp_batch(vals, dims, size, *, fun, rule, name):
    from .vmap import vmap
    axes = tuple(dims)
    per_example = vmap(lambda p, t: rule(list(p), list(t)), in_axes=(axes, axes),
                       axis_size=size)

    def rule_b(primals, tangents):  # tangents have their primals' shapes, so their axes
        outs, out_t = per_example(tuple(primals), tuple(tangents))
        return list(outs), list(out_t)

    outs = custom_jvp_call_p.bind(*vals, fun=_vmapped(fun, axes, size), rule=rule_b, name=name)
    return outs, [0] * len(outs)


def _custom_vjp_batch(vals, dims, size, *, fun, rule, name):
    from .. import lax
    from .vmap import vmap
    fwd, bwd = rule
    axes = tuple(dims)
    fwd_each = vmap(lambda *p: fwd(list(p)), in_axes=axes, axis_size=size)
    bwd_each = vmap(lambda r, c: bwd(list(r), list(c)), in_axes=0, axis_size=size)

    def fwd_b(primals):
        outs, res = fwd_each(*primals)
        return list(outs), list(res)

    def bwd_b(res, cts):  # outputs and residuals are batched at 0, so are their cotangents
        in_cts = bwd_each(tuple(res), tuple(cts))
        # an unbatched input was shared by every example: its cotangent is their sum
        return [c if d == 0 else lax.reduce_sum(c, (0,)) for c, d in zip(in_cts, axes)]

    outs = custom_vjp_call_p.bind(*vals, fun=_vmapped(fun, axes, size), rule=(fwd_b, bwd_b),
                                  name=name)
    return outs, [0] * len(outs)


def _remat_call_batch(vals, dims, size, *, fun, name):
    outs = remat_call_p.bind(*vals, fun=_vmapped(fun, tuple(dims), size), name=name)
    return outs, [0] * len(outs)


def _remat_lin_batch(vals, dims, size, *, num_res, fun, out_avals):
    # remat_lin(res, t) is jvp(fun, res, t)[1]: a residual and its tangent must agree on
    # being batched, so where one of the pair is, the other is broadcast to match.
    from .vmap import _full
    vals, dims = list(vals), list(dims)
    for i in range(num_res):
        j = num_res + i
        if dims[i] != dims[j]:
            k = i if dims[i] is None else j
            vals[k] = _full(vals[k], None, size, vals[k].shape)
            dims[k] = 0
    avals = tuple(ShapeDtypeStruct((size,) + tuple(a.shape), a.dtype, a.weak_type)
                  for a in out_avals)
    fun_b = _vmapped(fun, tuple(dims[:num_res]), size)
    outs = remat_lin_p.bind(*vals, num_res=num_res, fun=fun_b, out_avals=avals)
    return outs, [0] * len(outs)


def _lin_batch(vals, dims, size, **params):
    _lin_impl(**params)  # no forward mode, batched or not: the same clear error


custom_jvp_call_p.batch = _custom_jvp_batch
custom_lin_p.batch = _lin_batch
remat_lin_p.batch = _remat_lin_batch
custom_vjp_call_p.batch = _custom_vjp_batch
remat_call_p.batch = _remat_call_batch

# Their rules run user functions, which may branch on concrete values: eager grad must
# not trace them abstractly to cache a derivation (see fnx/transforms/tape.py).
for _p in (custom_jvp_call_p, custom_vjp_call_p, custom_lin_p, remat_call_p, remat_lin_p):
    _p.cache_eager_vjp = False
