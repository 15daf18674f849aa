"""``custom_jvp`` and ``custom_vjp``: user-defined derivatives.

Called with no transformation around it (or with only constants under one) a
decorated function is plain Python: ``f(x)`` runs ``f`` once, so its side
effects run once and its Python control flow may branch on values, as in JAX.

Under a transformation each decorated function is called through a call
primitive that carries the Python function and its rule. Evaluated (in
jit-compiled code) it runs the function; under ``jvp`` its rule runs instead. A
``custom_vjp``'s jvp is the user's ``fwd`` plus a linear primitive,
``custom_lin``, whose transpose is the user's ``bwd``: so reverse mode
(linearize + transpose) uses ``bwd`` with the residuals ``fwd`` saved, at any
nesting under ``jit``.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from .. import tree_util
from .._config import config
from ..core import dtypes, ops
from ..core.array import Array, Tracer, to_array
from ..core.backend import apply_ir
from ..core.ir import Literal, eval_ir
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..core.trace import EVAL, get_trace
from ..core.tracing import trace_flat
from ..errors import CustomRuleError
from .jvp import instantiate


def _out_avals(fun_flat, avals):
    ir = trace_flat(fun_flat, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in avals],
                    getattr(fun_flat, "__name__", "custom"))
    return ir.out_avals


def _call_rule(*args, fun, rule, name):
    ir = getattr(fun, "ir", None)
    return list(ir.out_avals) if ir is not None else _out_avals(fun, args)


def _call_impl(*vals, fun, rule, name):
    ir = getattr(fun, "ir", None)
    if ir is not None:  # traced already (under jit): run its code, not the Python again,
        return list(apply_ir(ir, *vals))  # so a print in the function runs once, as in JAX
    return [o._value for o in fun(*[Array._wrap(v) for v in vals])]


custom_jvp_call_p = Primitive("custom_jvp_call", shape_rule=_call_rule, impl=_call_impl,
                              multiple_results=True)
custom_vjp_call_p = Primitive("custom_vjp_call", shape_rule=_call_rule, impl=_call_impl,
                              multiple_results=True)


def function_call_body(eqn):
    """``call_body`` of a primitive calling a flat Python function of Arrays
    (``params["fun"]``): the IR that function computes (custom derivative and batching
    rules do not change the value)."""
    return trace_flat(eqn.params["fun"], [v.aval for v in eqn.inputs],
                      eqn.params.get("name", eqn.prim.name))


custom_jvp_call_p.call_body = custom_vjp_call_p.call_body = function_call_body


def _custom_jvp_jvp(primals, tangents, *, fun, rule, name):
    return rule(list(primals), list(tangents))  # the rule sees symbolic zeros (None)


custom_jvp_call_p.jvp = _custom_jvp_jvp


def _lin_rule(*args, num_res, bwd, out_avals):
    return list(out_avals)


def _lin_impl(*args, num_res, bwd, out_avals):
    raise CustomRuleError(
        "can't apply forward-mode autodiff (jvp) to a custom_vjp function: a custom_vjp "
        "function cannot be differentiated in forward mode (jvp, jacfwd, hessian), as it "
        "only defines a backward pass. Use grad/vjp/jacrev, or define the "
        "function with fnx.custom_jvp instead (its rule serves both modes).")


custom_lin_p = Primitive("custom_lin", shape_rule=_lin_rule, impl=_lin_impl,
                         multiple_results=True)


def _lin_transpose(cts, *args, num_res, bwd, out_avals):
    res = args[:num_res]
    return [None] * num_res + list(bwd(list(res), list(cts), out_avals))


custom_lin_p.transpose = _lin_transpose
custom_lin_p.not_needed = {"jvp": "the linear half of a custom_vjp, which has no forward "
                                  "mode (as in JAX)"}


def _custom_vjp_jvp(primals, tangents, *, fun, rule, name):
    fwd, bwd = rule
    outs, res = fwd(list(primals), [t is not None for t in tangents])
    tangents = [instantiate(t, p) for p, t in zip(primals, tangents)]
    out_t = custom_lin_p.bind(*res, *tangents, num_res=len(res), bwd=bwd,
                              out_avals=tuple(o.aval for o in outs))
    return outs, out_t


custom_vjp_call_p.jvp = _custom_vjp_jvp


# --- running a decorated function as plain Python --------------------------------------------

_PASS_THROUGH = None


def _runs_eagerly(trace, leaves):
    """True when binding the call would only evaluate it: no argument is a tracer and
    every enclosing transformation hands constant-only calls to its parent (jvp,
    linearize, eager grad, vmap) down to eager evaluation. jit-like traces record."""
    global _PASS_THROUGH
    if trace is EVAL:
        return True
    for x in leaves:
        if isinstance(x, Tracer):
            return False
    if _PASS_THROUGH is None:
        from .jvp import JVPTrace
        from .tape import TapeTrace
        from .vjp import PartialIRTrace
        from .vmap import BatchTrace
        _PASS_THROUGH = (JVPTrace, PartialIRTrace, TapeTrace, BatchTrace)
    while trace is not EVAL:
        if type(trace) not in _PASS_THROUGH:
            return False
        trace = trace.parent
    return True


def _records(trace):
    """Whether binding on ``trace`` may record the call into an IR (jit, scan bodies)."""
    _runs_eagerly(trace, ())  # fills _PASS_THROUGH
    while trace is not EVAL:
        if type(trace) not in _PASS_THROUGH:
            return True
        trace = trace.parent
    return False


def _closure_convert(fun_flat, leaves, name):
    """Under a recording trace: ``fun_flat`` traced once, and the tracers it closes over
    (values of enclosing traces) as a list, or None if it closes over none. A call
    primitive must take those as operands: its Python function cannot keep them."""
    ir = trace_flat(fun_flat, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                               for a in leaves], name)
    if not any(isinstance(c, Tracer) for c in ir.consts):
        fun_flat.ir = ir  # its output types, so the shape rule need not trace it again
        fun_flat.out_avals = ir.out_avals
        return fun_flat, None
    closed, consts = ir.hoist_consts()
    fun_c = _ir_function(closed, name)
    fun_c.out_avals = ir.out_avals
    return fun_c, [to_array(c) for c in consts]


def _no_closure_tangents(name, tangents, n):
    if any(t is not None for t in tangents[:n]):
        raise CustomRuleError(
            f"{name} closes over a value that is being differentiated (a variable of an "
            "enclosing function, not one of its arguments), and its rule cannot give that "
            "value's derivative. Pass the value to the function as an argument.")


class SymbolicZero:
    """A tangent (or cotangent) known to be zero, passed to rules defined with
    ``symbolic_zeros=True`` instead of an array of zeros. It has the ``shape`` and
    ``dtype`` of the value it stands for; a rule may return one to say "zero"."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    shape = property(lambda self: tuple(self.aval.shape))
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: int(np.prod(self.aval.shape, dtype=np.int64)))

    def instantiate(self):
        """The zeros it stands for, as an array."""
        from .jvp import zeros_like_tangent
        return zeros_like_tangent(self)

    @staticmethod
    def from_primal_value(x):
        x = to_array(x)
        return SymbolicZero(ShapeDtypeStruct(tuple(x.shape), x.dtype))

    def __repr__(self):
        return f"SymbolicZero({self.dtype}{list(self.shape)})"


def zero_from_primal(x, symbolic_zeros=False):
    """A zero tangent for every leaf of ``x``: ``SymbolicZero``s, or arrays of zeros."""
    from .jvp import zeros_like_tangent
    return tree_util.tree_map(
        lambda v: SymbolicZero.from_primal_value(v) if symbolic_zeros
        else zeros_like_tangent(to_array(v)), x)


class CustomVJPPrimal:
    """An argument of a ``custom_vjp``'s ``fwd`` defined with ``symbolic_zeros=True``:
    the primal ``value`` and whether it is ``perturbed`` (has a nonzero tangent)."""
    __slots__ = ("value", "perturbed")

    def __init__(self, value, perturbed):
        self.value, self.perturbed = value, perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


def custom_vjp_primal_tree_values(tree):
    """``tree`` with each ``CustomVJPPrimal`` leaf replaced by its value."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"custom_vjp_primal_tree_values: expected CustomVJPPrimal "
                            f"leaves, got {type(leaf).__name__}")
        return leaf.value
    return tree_util.tree_map(value, tree)


def _is_zero_marker(x):
    return x is None or type(x) is SymbolicZero


def _check_like(name, what, got, like, i):
    """A rule's tangent/cotangent leaf ``got`` (an array) against its primal ``like``."""
    if tuple(got.shape) != tuple(like.shape):
        raise CustomRuleError(
            f"{name}: {what} {i} has shape {tuple(got.shape)}, but its primal has shape "
            f"{tuple(like.shape)}; a rule must return one value per primal, shaped like it")
    if got.dtype != like.dtype and dtypes.is_inexact(like.dtype):
        # a Python number (weakly typed) or a real value for a complex primal converts
        # exactly; an integer, boolean or differently sized float array is a bug in the
        # rule (JAX lets bwd's pass as a "temporary exception" and raises for jvp's)
        kind = got.dtype.kind
        if (got.weak_type and kind in "iuf") or (like.dtype.kind == "c" and kind == "f"):
            return ops.convert_element_type(got, like.dtype)
        raise CustomRuleError(
            f"{name}: {what} {i} has dtype {got.dtype}, but its primal has dtype "
            f"{like.dtype}; a rule must return values of its primal's dtype: convert it "
            f"with .astype({like.dtype.name!r})")
    return got


class _Custom:
    def __init__(self, fun, nondiff_argnums=()):
        # fun's name, doc and attributes first (as functools.wraps; a custom_vmap's def_vmap
        # stays reachable through decorators stacked on it), then this object's own fields,
        # so a wrapped custom_jvp's or jit's `fun` never replaces ours
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = (nondiff_argnums,) if isinstance(nondiff_argnums, int) \
            else tuple(nondiff_argnums)
        try:
            self._sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None
        params = [] if self._sig is None else list(self._sig.parameters.values())
        pos = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self._n_pos = sum(1 for p in params if p.kind in pos)
        self._defaults = any(p.default is not p.empty for p in params)

    def _resolve(self, args, kwargs):
        """Keyword arguments and defaults mapped to positions (JAX's rule), so the rule
        sees every argument positionally."""
        if not kwargs and (not self._defaults or len(args) >= self._n_pos):
            return args
        if self._sig is None:
            raise TypeError(f"{self.__name__}: keyword arguments need a function whose "
                            "signature inspect.signature can read")
        ba = self._sig.bind(*args, **kwargs)
        ba.apply_defaults()
        if ba.kwargs:
            raise TypeError(f"{self.__name__}: keyword-only arguments "
                            f"{sorted(ba.kwargs)} cannot be mapped to positions; a "
                            "custom derivative rule takes its arguments positionally")
        return ba.args

    def _split(self, args):
        n = len(args)
        static = {}
        for i in self.nondiff_argnums:
            if not -n <= i < n:
                raise TypeError(f"{self.__name__}: nondiff_argnums {self.nondiff_argnums} "
                                f"out of range for {n} positional arguments")
            static[i % n] = args[i]
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

    @staticmethod
    def _check_rule_outs(name, rule, known, outs):
        """The primal outputs a rule returned against the function's own, where those are
        known without running the function again (it was traced: under jit and other
        recording transformations), as JAX: shape and dtype must match."""
        if known is None:
            return
        if len(known) != len(outs):
            raise CustomRuleError(f"{name}: the {rule} returned {len(outs)} primal outputs, "
                                  f"but the function returns {len(known)}")
        for i, (o, w) in enumerate(zip(outs, known)):
            if tuple(o.shape) != tuple(w.shape) or o.dtype != w.dtype:
                raise CustomRuleError(
                    f"{name}: the {rule}'s primal output {i} is {o.aval.str_short()}, but the "
                    f"function returns {w.str_short()}; the rule must return the function's "
                    "output (same shape and dtype), e.g. by calling the function")

    def _set_out_tree(self, box, tree, rule):
        if box[0] is None:
            box[0] = tree
        elif box[0] != tree:
            raise CustomRuleError(
                f"{self.__name__}: the {rule} returned primal outputs structured as {tree}, "
                f"but the function returns {box[0]}; the rule must return the function's "
                "output (e.g. by calling the function)")


class custom_jvp(_Custom):
    """A function with a user-defined jvp rule::

        @fnx.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents): return f(*primals), tangent_out

    Outside any transformation ``f`` runs as plain Python. Under ``jvp``/``grad``
    the rule runs (reverse mode transposes its linear part). ``nondiff_argnums``
    arguments are passed first to the rule and get no tangents; ``defjvps`` gives one
    rule per argument; ``defjvp(rule, symbolic_zeros=True)`` passes ``SymbolicZero``
    for tangents known to be zero.
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def defjvp(self, jvp, symbolic_zeros=False):
        self.jvp = jvp
        self.symbolic_zeros = bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps):
        """One rule per positional argument, ``rule(tangent, primal_out, *primals) ->
        output tangent`` (None: the output does not depend on that argument); the
        output tangent is their sum."""
        if self.nondiff_argnums:
            raise TypeError(f"custom_jvp {self.__name__}: defjvps cannot be used with "
                            "nondiff_argnums; write a single rule with defjvp")

        def jvp(primals, tangents):
            if len(jvps) != len(primals):
                raise CustomRuleError(
                    f"custom_jvp {self.__name__}: defjvps got {len(jvps)} rules for a call "
                    f"with {len(primals)} arguments; give one per argument (None for none)")
            out = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                part = rule(t, out, *primals)
                total = part if total is None else tree_util.tree_map(
                    lambda a, b: a + b, total, part)
            if total is None:
                total = zero_from_primal(out)
            return out, total

        self.defjvp(jvp)  # returns None, as JAX's defjvps

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"custom_jvp {self.__name__}: no jvp rule; define one with "
                                 "@f.defjvp (or f.defjvps) before calling f")
        args = self._resolve(args, kwargs)
        trace = get_trace()
        if trace is EVAL:
            return self.fun(*args)  # no transformation: plain Python, run once
        static, leaves, tree = self._split(args)
        if _runs_eagerly(trace, leaves):
            return self.fun(*args)
        out_tree = [None]
        fun_flat = self._flat_fun(static, tree, out_tree)
        nondiff = [static[i] for i in sorted(static)]
        name = f"custom_jvp {self.__name__}"
        known = [None]

        def rule(primals, tangents):  # tangents: None for a symbolic zero
            p = tree_util.tree_unflatten(tree, primals)
            if self.symbolic_zeros:
                ts = [SymbolicZero(ShapeDtypeStruct(tuple(x.shape), x.dtype)) if t is None
                      else t for x, t in zip(primals, tangents)]
            else:
                ts = [instantiate(t, x) for x, t in zip(primals, tangents)]
            t = tree_util.tree_unflatten(tree, ts)
            res = self.jvp(*nondiff, tuple(p), tuple(t))
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise CustomRuleError(f"{name}: the jvp rule must return a pair "
                                      f"(primal_out, tangent_out), got {type(res).__name__}")
            out, out_t = res
            out_leaves, otree = tree_util.tree_flatten(out)
            self._set_out_tree(out_tree, otree, "jvp rule")
            t_leaves, ttree = tree_util.tree_flatten(out_t, is_leaf=_is_zero_marker)
            if ttree != otree:
                raise CustomRuleError(
                    f"{name}: the jvp rule's tangent output is structured as {ttree}, but its "
                    f"primal output as {otree}; return one tangent per output")
            outs = [to_array(o) for o in out_leaves]
            self._check_rule_outs(name, "jvp rule", known[0], outs)
            out_ts = [None if _is_zero_marker(v) else
                      _check_like(name, "output tangent", to_array(v), o, i)
                      for i, (v, o) in enumerate(zip(t_leaves, outs))]
            return outs, out_ts

        fun_c, consts = _closure_convert(fun_flat, leaves, self.__name__) \
            if _records(trace) else (None, None)
        known[0] = getattr(fun_c, "out_avals", None)  # the function's output types
        if consts:
            n = len(consts)

            def rule_c(primals, tangents):
                _no_closure_tangents(name, tangents, n)
                outs, out_t = rule(primals[n:], tangents[n:])
                return outs, out_t

            outs = custom_jvp_call_p.bind(*consts, *leaves, fun=fun_c, rule=rule_c,
                                          name=self.__name__)
        else:
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

    Outside any transformation ``f`` runs as plain Python. With ``nondiff_argnums``
    those arguments are passed first to ``bwd``. ``bwd`` may return None for an
    argument whose cotangent is zero. With ``defvjp(fwd, bwd, symbolic_zeros=True)``
    ``fwd`` receives ``CustomVJPPrimal(value, perturbed)`` leaves and ``bwd`` gets
    ``SymbolicZero`` for output cotangents known to be zero.
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None
        self.symbolic_zeros = False

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = bool(symbolic_zeros)
        # returns None, as JAX's (defvjp is called for its effect, not as a decorator)

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"custom_vjp {self.__name__}: call f.defvjp(fwd, bwd) first")
        args = self._resolve(args, kwargs)
        trace = get_trace()
        if trace is EVAL:
            return self.fun(*args)  # no transformation: plain Python, run once
        static, leaves, tree = self._split(args)
        if _runs_eagerly(trace, leaves):
            return self.fun(*args)
        out_tree = [None]
        fun_flat = self._flat_fun(static, tree, out_tree)
        nondiff = [static[i] for i in sorted(static)]
        res_tree = [None]
        name = f"custom_vjp {self.__name__}"
        known = [None]

        def fwd_flat(primals, perturbed):
            if self.symbolic_zeros:
                primals = [CustomVJPPrimal(p, d) for p, d in zip(primals, perturbed)]
            full = self._full(static, tree, primals)
            res = self.fwd(*full)
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise CustomRuleError(f"{name}: fwd must return a pair (output, residuals), "
                                      f"got {type(res).__name__}")
            out, r = res
            out_leaves, otree = tree_util.tree_flatten(out)
            self._set_out_tree(out_tree, otree, "fwd rule")
            res_leaves, res_tree[0] = tree_util.tree_flatten(r)
            outs = [to_array(o) for o in out_leaves]
            self._check_rule_outs(name, "fwd rule", known[0], outs)
            return outs, [to_array(x) for x in res_leaves]

        def bwd_flat(res, cts, out_avals):  # cts: None for a zero cotangent
            if any(c is None for c in cts):
                cts = [(SymbolicZero(a) if self.symbolic_zeros else
                        Array._wrap(np.zeros(a.shape, a.dtype))) if c is None else c
                       for c, a in zip(cts, out_avals)]
            r = tree_util.tree_unflatten(res_tree[0], res)
            g = tree_util.tree_unflatten(out_tree[0], cts)
            ct = self.bwd(*nondiff, r, g)
            return self._bwd_leaves(name, ct, tree, leaves)

        fun_c, consts = _closure_convert(fun_flat, leaves, self.__name__) \
            if _records(trace) else (None, None)
        known[0] = getattr(fun_c, "out_avals", None)  # the function's output types
        if consts:
            n = len(consts)

            def fwd_c(primals, perturbed):
                _no_closure_tangents(name, [True if p else None for p in perturbed], n)
                return fwd_flat(primals[n:], perturbed[n:])

            def bwd_c(res, cts, out_avals):
                return [None] * n + list(bwd_flat(res, cts, out_avals))

            outs = custom_vjp_call_p.bind(*consts, *leaves, fun=fun_c, rule=(fwd_c, bwd_c),
                                          name=self.__name__)
        else:
            outs = custom_vjp_call_p.bind(*leaves, fun=fun_flat, rule=(fwd_flat, bwd_flat),
                                          name=self.__name__)
        if out_tree[0] is None:
            _out_avals(fun_flat, leaves)
        return tree_util.tree_unflatten(out_tree[0], outs)

    def _bwd_leaves(self, name, ct, tree, primals):
        """The cotangent leaves ``bwd`` returned, checked against the primal arguments
        (None or SymbolicZero: zero, for an argument or a part of one)."""
        n_args = len(tree_util.tree_unflatten(tree, list(primals)))
        if not isinstance(ct, (tuple, list)):
            raise CustomRuleError(f"{name}: bwd must return a tuple with one cotangent per "
                                  f"differentiable argument ({n_args}), got "
                                  f"{type(ct).__name__}")
        if len(ct) != n_args:
            raise CustomRuleError(f"{name}: bwd returned {len(ct)} cotangents, but the "
                                  f"function has {n_args} differentiable arguments")
        args = tree_util.tree_unflatten(tree, list(range(len(primals))))
        out = [None] * len(primals)
        for k, (arg, c) in enumerate(zip(args, ct)):
            ids, atree = tree_util.tree_flatten(arg)
            if _is_zero_marker(c):
                continue
            c_leaves, ctree = tree_util.tree_flatten(c, is_leaf=_is_zero_marker)
            if ctree != atree:
                raise CustomRuleError(f"{name}: bwd's cotangent for argument {k} is "
                                      f"structured as {ctree}, but the argument as {atree}")
            for i, v in zip(ids, c_leaves):
                if not _is_zero_marker(v) and dtypes.is_inexact(primals[i].dtype):
                    out[i] = _check_like(name, "cotangent of input", to_array(v),
                                         primals[i], i)
        return out


# --- checkpoint / remat ---------------------------------------------------------------------------
# A checkpointed function saves only its inputs for the backward pass. Its jvp is a linear
# primitive, ``remat_lin``, applied to those inputs and the tangents: evaluated, it runs the
# function's jvp; transposed (reverse mode), it re-runs the function's vjp, recomputing the
# forward intermediates instead of storing them.

def _remat_lin_rule(*args, num_res, fun, out_avals):
    return list(out_avals)


def _remat_lin_eval(*args, num_res, fun):
    from .jvp import jvp, zeros_like_tangent
    res, tangents = list(args[:num_res]), list(args[num_res:])
    # residuals past the tangents (values a policy saved) have zero tangents
    tangents += [zeros_like_tangent(r) for r in res[len(tangents):]]
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
    return [None] * num_res + list(f_vjp(cts))[:len(args) - num_res]


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


def _ir_function(ir, name):
    """``ir`` as a Python function of its inputs (carried by remat_call)."""
    def call(*xs):
        return list(eval_ir(ir, *xs))
    call.__name__ = name
    call.ir = ir
    return call


def _remat_call_rule(*args, fun, name):
    ir = getattr(fun, "ir", None)
    return list(ir.out_avals) if ir is not None else _out_avals(fun, args)


def _remat_call_impl(*vals, fun, name):
    return [o._value for o in fun(*[Array._wrap(v) for v in vals])]


remat_call_p = Primitive("remat_call", shape_rule=_remat_call_rule, impl=_remat_call_impl,
                         multiple_results=True)
remat_call_p.call_body = function_call_body


def _remat_call_jvp(primals, tangents, *, fun, name):
    saved = getattr(fun, "saved", None)
    if _runs_eagerly(get_trace(), primals):  # eager grad: run it, do not trace it
        outs = fun(*primals)
    elif saved:  # a policy saves some intermediates: the forward pass returns them too
        ir = fun.ir
        n = len(ir.outvars)
        both = _eval_inline(ir.replace(outvars=list(ir.outvars) + saved), primals)
        outs, values = list(both[:n]), list(both[n:])
        ts = [instantiate(t, p) for p, t in zip(primals, tangents)]
        res = list(primals) + values
        out_t = remat_lin_p.bind(*res, *ts, num_res=len(res),
                                 fun=_with_saved(ir, saved, len(primals), name),
                                 out_avals=tuple(o.aval for o in outs))
        return outs, out_t
    else:
        outs = remat_call_p.bind(*primals, fun=fun, name=name)
    ts = [instantiate(t, p) for p, t in zip(primals, tangents)]
    out_t = remat_lin_p.bind(*primals, *ts, num_res=len(primals), fun=fun,
                             out_avals=tuple(o.aval for o in outs))
    return outs, out_t


remat_call_p.jvp = _remat_call_jvp


def _eval_inline(ir, args):
    """``eval_ir`` that keeps each equation's source line where the enclosing trace
    records it (the forward pass of a checkpointed function with saved values is
    inlined into the caller: its lines are the function's, not the caller's)."""
    from ..core.tracing import IRTracer

    def after(e, outs):
        first = outs[0] if outs else None
        if isinstance(first, IRTracer):
            eqns = first._trace.eqns
            if eqns and first.ir_var in eqns[-1].outputs:
                eqns[-1].source = e.source
                for o in outs:
                    o._origin = e.source
            if NAME_SINKS:  # a checkpoint_name of the inner value names the new one
                sink = NAME_SINKS[-1]
                for v, o in zip(e.outputs, outs):
                    if v in sink and isinstance(o, IRTracer):
                        sink[o.ir_var] = sink[v]
        return outs

    return eval_ir(ir, *args, after=after)


def _with_saved(ir, saved, n_in, name):
    """``ir`` as a function of its inputs and the values a policy saved (``saved``: vars
    of ``ir``), for ``remat_lin``: differentiated, each saved value's primal is read
    instead of recomputed (its tangent still flows from the inputs), so the forward
    intermediates it was computed from are dead and removed."""
    from .jvp import JVPTracer
    where = {v: i for i, v in enumerate(saved)}

    def call(*xs):
        ins, values = xs[:n_in], xs[n_in:]

        def after(e, outs):
            outs = list(outs)
            for k, v in enumerate(e.outputs):
                i, o = where.get(v), outs[k]
                if i is not None and type(o) is JVPTracer and o._trace is get_trace():
                    s = values[i]
                    if type(s) is JVPTracer and s._trace is o._trace:
                        s = s.primal
                    outs[k] = JVPTracer(o._trace, s, o.tangent)
            return outs

        return eval_ir(ir, *ins, after=after)

    call.__name__ = name
    return call


# --- names and policies: what a checkpointed function saves ----------------------------------
# checkpoint_name records a value's name while a checkpointed function (or
# print_saved_residuals) traces: the innermost recording IR variable under it is
# mapped to (name, source line) in the active sink.

NAME_SINKS: list = []


class _NamePrim:
    """What a policy is asked about for a value named by ``checkpoint_name``: JAX's
    ``name_p`` (``policy(prim, aval, name=...)``)."""
    name = "name"

    def __repr__(self):
        return "name"


name_p = _NamePrim()


def _ir_var(x):
    """The IR variable a traced value stands for (through jvp tracers), else None."""
    from ..core.tracing import IRTracer
    from .jvp import JVPTracer
    while type(x) is JVPTracer:
        x = x.primal
    return x.ir_var if isinstance(x, IRTracer) else None


def _eqn_count(x):
    """How many equations the trace recording ``x`` holds (where a name was given)."""
    from .jvp import JVPTracer
    while type(x) is JVPTracer:
        x = x.primal
    return len(getattr(x._trace, "eqns", ()))


def _policy_saves(policy, e, v, names):
    if policy(e.prim, *[u.aval for u in e.inputs], **e.params):
        return True
    named = names.get(v)
    return named is not None and bool(policy(name_p, v.aval, name=named[0]))


def _saved_by_policy(ir, policy, names):
    """The intermediates of ``ir`` that ``policy`` lets the forward pass save and the
    backward pass reads (a value it does not read is not saved)."""
    candidates = [v for e in ir.eqns if e.prim.name not in ("remat_call", "jit")
                  for v in e.outputs
                  if dtypes.is_inexact(v.aval.dtype) and _policy_saves(policy, e, v, names)]
    if not candidates:
        return []
    from ..core.trace import trace_context
    from ..core.tracing import IRTrace, IRTracer
    from .jvp import JVPTracer
    from .vjp import linearize_flat
    probe = IRTrace(EVAL, "checkpoint_policy")
    env = {}
    with trace_context(probe):
        ins = [probe.new_arg(a) for a in ir.in_avals]

        def record(e, outs):  # every equation's value, to look the candidates up
            env.update(zip(e.outputs, outs))
            return outs

        def run(*xs):
            return eval_ir(ir, *xs, after=record)

        _, lin = linearize_flat(run, ins)
    # what the backward pass reads, and every forward value those are computed from:
    # a saveable value among them is saved instead of recomputed
    producer = {v: e for e in probe.eqns for v in e.outputs}
    reached, stack = set(), [c.ir_var for c in lin.consts
                             if isinstance(c, IRTracer) and c._trace is probe]
    while stack:
        v = stack.pop()
        if v in reached:
            continue
        reached.add(v)
        e = producer.get(v)
        if e is not None:
            stack.extend(u for u in e.inputs if type(u) is not Literal)
    return [v for v in candidates if type(env.get(v)) is JVPTracer
            and isinstance(env[v].primal, IRTracer) and env[v].primal.ir_var in reached]


def _dot_like(prim):
    return getattr(prim, "name", prim) in ("dot_general", "dot", "matmul", "conv",
                                            "conv_general_dilated")


class checkpoint_policies:
    """JAX's rematerialization policies, for ``checkpoint(f, policy=...)``. A policy
    says which intermediates the backward pass may keep instead of recomputing: it only
    trades memory for time, never values. A policy is called as
    ``policy(prim, *input_types, **params)`` for each operation of the checkpointed
    function, and as ``policy(name_p, type, name=...)`` for a value named by
    ``checkpoint_name``; a value it allows is saved if the backward pass reads it or
    recomputes from it. ``everything_saveable`` keeps all (no rematerialization),
    ``nothing_saveable`` none; ``dots_saveable`` the products and convolutions,
    ``dots_with_no_batch_dims_saveable`` the products without batch dimensions, and
    the name-based ones the named values. Unlike JAX, the operations asked about are the
    function's own, not those of its derivative (``cos`` in ``sin``'s), which are
    recomputed from the saved values."""

    @staticmethod
    def everything_saveable(*_, **__):
        return True

    @staticmethod
    def nothing_saveable(*_, **__):
        return False

    @staticmethod
    def dots_saveable(prim, *_, **__):
        return _dot_like(prim)

    checkpoint_dots = dots_saveable

    @staticmethod
    def dots_with_no_batch_dims_saveable(prim, *_, **params):
        if getattr(prim, "name", prim) != "dot_general":
            return False
        (_, (lb, rb)) = params["dimension_numbers"]
        return not lb and not rb

    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

    @staticmethod
    def save_anything_except_these_names(*names):
        names = frozenset(names)
        return lambda prim, *_, **params: not (prim is name_p and params["name"] in names)

    @staticmethod
    def save_any_names_but_these(*names):
        names = frozenset(names)
        return lambda prim, *_, **params: prim is name_p and params["name"] not in names

    @staticmethod
    def save_only_these_names(*names):
        names = frozenset(names)
        return lambda prim, *_, **params: prim is name_p and params["name"] in names

    @staticmethod
    def save_from_both_policies(policy_1, policy_2):
        return lambda *a, **k: policy_1(*a, **k) or policy_2(*a, **k)

    @staticmethod
    def offload_dot_with_no_batch_dims(offload_src="device", offload_dst="pinned_host"):
        # one memory here: a product that may be offloaded is saved
        return checkpoint_policies.dots_with_no_batch_dims_saveable

    @staticmethod
    def save_and_offload_only_these_names(*, names_which_can_be_saved=(),
                                          names_which_can_be_offloaded=(),
                                          offload_src="device", offload_dst="pinned_host"):
        # one memory here: a value that may be offloaded is saved
        names = frozenset(names_which_can_be_saved) | frozenset(names_which_can_be_offloaded)
        return lambda prim, *_, **params: prim is name_p and params["name"] in names


def checkpoint_name(x, name):
    """``x`` unchanged, named for JAX's name-based policies (``save_only_these_names``,
    ``save_any_names_but_these``, ...) and ``print_saved_residuals``: inside a
    checkpointed function the value is saved for the backward pass if the policy allows
    its name. ``x`` may be a pytree."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {type(name).__name__}")
    if NAME_SINKS:
        from ..core.trace import user_frame_info
        sink, source = NAME_SINKS[-1], None
        for leaf in tree_util.tree_leaves(x):
            v = _ir_var(leaf)
            if v is not None:
                source = source or user_frame_info(2)
                sink[v] = (name, source, _eqn_count(leaf))
    return x


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
    """``fun`` whose backward pass recomputes its forward intermediates instead of storing
    them: reverse mode saves only its inputs (``fnx.remat`` is the same function).

    As JAX's: ``static_argnums`` arguments are Python values the function may branch
    on; ``policy`` (from ``fnx.checkpoint_policies``) says which intermediates the
    forward pass saves instead (``everything_saveable``: all, so nothing is recomputed;
    ``fnx.ad_checkpoint.print_saved_residuals`` shows the choice); ``prevent_cse`` is
    accepted. Usable as ``@checkpoint`` or
    ``@partial(checkpoint, policy=...)``.
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a function, got {type(fun).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be a function like those in "
                        f"fnx.checkpoint_policies, got {type(policy).__name__}")
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else \
        tuple(static_argnums)
    helper = _Custom(fun, static_argnums)
    save_all = policy is checkpoint_policies.everything_saveable

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if kwargs:
            # As JAX: keyword arguments are operands (flattened, as pytrees), passed on
            # by keyword; a parameter left out keeps its Python default
            n = len(args)
            return checkpoint(lambda *a: fun(*a[:-1], **a[-1]), prevent_cse=prevent_cse,
                              policy=policy,
                              static_argnums=tuple(i % n if -n <= i < 0 else i
                                                   for i in static_argnums))(*args, kwargs)
        trace = get_trace()
        if save_all or trace is EVAL:
            return fun(*args)
        static, leaves, tree = helper._split(args)
        if _runs_eagerly(trace, leaves):
            return fun(*args)
        out_tree = [None]
        fun_flat = helper._flat_fun(static, tree, out_tree)
        name = getattr(fun, "__name__", "f")
        # Closure conversion: traced once, with the values it closes over (tracers of
        # enclosing transformations, e.g. weights a scan body reads) made explicit
        # operands, so every transformation of the call sees and differentiates them.
        names = {}
        NAME_SINKS.append(names)
        try:
            ir = trace_flat(fun_flat, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                                       for a in leaves], name)
        finally:
            NAME_SINKS.pop()
        if NAME_SINKS and names:  # names seen from outside too (print_saved_residuals)
            NAME_SINKS[-1].update(names)
        if any(isinstance(c, Tracer) for c in ir.consts):
            closed, consts = ir.hoist_consts()
            call = _ir_function(closed, name)
            if policy is not None:
                call.saved = _saved_by_policy(closed, policy, names)
            outs = remat_call_p.bind(*[to_array(c) for c in consts], *leaves,
                                     fun=call, name=name)
        else:  # closes over constants only: recomputed by calling it again
            fun_flat.ir = ir
            if policy is not None:
                fun_flat.saved = _saved_by_policy(ir, policy, names)
            outs = remat_call_p.bind(*leaves, fun=fun_flat, name=name)
        return tree_util.tree_unflatten(out_tree[0], outs)

    return wrapped


remat = checkpoint


# --- batching: the call stays a call, with its function and rules vmapped ---------------------
# Under vmap each call primitive binds again with batched versions of what it carries, so
# a custom rule still applies when vmap is inside grad/jvp (``grad(vmap(f))``, ``jacrev``).
# Batch rules see batched operands at axis 0; every output is batched at axis 0.

def _vmapped(fn, axes, size):
    from .vmap import batching_axis_name, vmap
    batched = vmap(fn, in_axes=axes, axis_name=batching_axis_name(), axis_size=size)

    def call(*xs):
        return list(batched(*xs))
    call.__name__ = getattr(fn, "__name__", "custom")
    return call


def _custom_jvp_batch(vals, dims, size, *, fun, rule, name):
    from .vmap import vmap
    axes = tuple(dims)
    fun_b = _vmapped(fun, axes, size)
    if get_trace() is EVAL:  # vmap alone: only the function runs, as in JAX
        outs = fun_b(*vals)
        return outs, [0] * len(outs)
    per_example = vmap(lambda p, t: rule(list(p), list(t)), in_axes=(axes, axes),
                       axis_size=size)

    def rule_b(primals, tangents):  # tangents have their primals' shapes, so their axes
        tangents = [instantiate(t, p) for p, t in zip(primals, tangents)]
        outs, out_t = per_example(tuple(primals), tuple(tangents))
        return list(outs), [instantiate(t, o) for o, t in zip(outs, out_t)]

    outs = custom_jvp_call_p.bind(*vals, fun=fun_b, rule=rule_b, name=name)
    return outs, [0] * len(outs)


def _custom_vjp_batch(vals, dims, size, *, fun, rule, name):
    from .vmap import vmap
    fwd, bwd = rule
    axes = tuple(dims)
    fun_b = _vmapped(fun, axes, size)
    if get_trace() is EVAL:  # vmap alone: only the function runs, as in JAX
        outs = fun_b(*vals)
        return outs, [0] * len(outs)

    def fwd_b(primals, perturbed):
        outs, res = vmap(lambda *p: fwd(list(p), perturbed), in_axes=axes,
                         axis_size=size)(*primals)
        return list(outs), list(res)

    bwd_each = vmap(lambda r, c: bwd(list(r), list(c), None), in_axes=0, axis_size=size)

    def bwd_b(res, cts, out_avals):  # outputs and residuals are batched at 0, so are cts
        cts = [Array._wrap(np.zeros(a.shape, a.dtype)) if c is None else c
               for c, a in zip(cts, out_avals)]
        in_cts = bwd_each(tuple(res), tuple(cts))
        # an unbatched input was shared by every example: its cotangent is their sum
        return [c if d == 0 or c is None else ops.reduce_sum(c, (0,))
                for c, d in zip(in_cts, axes)]

    outs = custom_vjp_call_p.bind(*vals, fun=fun_b, rule=(fwd_b, bwd_b), name=name)
    return outs, [0] * len(outs)


def _remat_call_batch(vals, dims, size, *, fun, name):
    outs = remat_call_p.bind(*vals, fun=_vmapped(fun, tuple(dims), size), name=name)
    return outs, [0] * len(outs)


def _remat_lin_batch(vals, dims, size, *, num_res, fun, out_avals):
    # remat_lin(res, t) is jvp(fun, res, t)[1]: a residual and its tangent must agree on
    # being batched, so where one of the pair is, the other is broadcast to match.
    from .vmap import materialize_batch_axis
    vals, dims = list(vals), list(dims)
    for i in range(len(vals) - num_res):  # (saved residuals past them have no tangent)
        j = num_res + i
        if dims[i] != dims[j]:
            k = i if dims[i] is None else j
            vals[k] = materialize_batch_axis(vals[k], None, size, vals[k].shape)
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


# --- linear_call: a linear function with a user-given transpose -------------------------------

def _linear_call_rule(*args, fun, fun_transpose, num_res, out_avals, lin_avals, name):
    return list(out_avals)


def _linear_call_impl(*vals, fun, fun_transpose, num_res, out_avals, lin_avals, name):
    return [to_array(o)._value for o in fun(*[Array._wrap(v) for v in vals])]


linear_call_p = Primitive("linear_call", shape_rule=_linear_call_rule, impl=_linear_call_impl,
                          multiple_results=True)
linear_call_p.call_body = function_call_body
linear_call_p.cache_eager_vjp = False
linear_call_p.linear = True


def _linear_call_jvp(primals, tangents, **params):
    n = params["num_res"]
    if any(t is not None for t in tangents[:n]):
        raise CustomRuleError(f"{params['name']}: linear_call is linear in its linear "
                              "arguments only; its residual arguments cannot carry tangents "
                              "(differentiate through them outside the call)")
    outs = linear_call_p.bind(*primals, **params)
    if all(t is None for t in tangents[n:]):
        return outs, [None] * len(outs)
    lin_t = [instantiate(t, p) for p, t in zip(primals[n:], tangents[n:])]
    return outs, linear_call_p.bind(*primals[:n], *lin_t, **params)


def _linear_call_transpose(cts, *args, fun, fun_transpose, num_res, out_avals, lin_avals,
                           name):
    res = args[:num_res]
    cts = [_zeros(a) if c is None else c for c, a in zip(cts, out_avals)]
    flip = linear_call_p.bind(*res, *cts, fun=fun_transpose, fun_transpose=fun,
                              num_res=num_res, out_avals=tuple(lin_avals),
                              lin_avals=tuple(out_avals), name=name + "_T")
    return [None] * num_res + list(flip)


def _zeros(aval):
    return to_array(np.zeros(aval.shape, aval.dtype))


linear_call_p.transpose = _linear_call_transpose


def _linear_call_batch(vals, dims, size, *, fun, fun_transpose, num_res, out_avals, lin_avals,
                       name):
    from .vmap import materialize_batch_axis, vmap

    def lead(v, d):   # the batch axis first; broadcast to it where v has none
        shape = tuple(v.shape) if d is None else tuple(v.shape[:d]) + tuple(v.shape[d + 1:])
        return materialize_batch_axis(v, d, size, shape)
    res = [v if d is None else lead(v, d) for v, d in zip(vals[:num_res], dims[:num_res])]
    lin = [lead(v, d) for v, d in zip(vals[num_res:], dims[num_res:])]
    res_axes = tuple(None if d is None else 0 for d in dims[:num_res])
    bfun = vmap(fun, in_axes=res_axes + (0,) * len(lin))
    bfun_t = vmap(fun_transpose, in_axes=res_axes + (0,) * len(out_avals))
    grow = lambda a: ShapeDtypeStruct((size,) + tuple(a.shape), a.dtype)  # noqa: E731
    outs = linear_call_p.bind(*res, *lin, fun=bfun, fun_transpose=bfun_t, num_res=num_res,
                              out_avals=tuple(map(grow, out_avals)),
                              lin_avals=tuple(map(grow, lin_avals)), name=name)
    return outs, [0] * len(outs)


linear_call_p.jvp = _linear_call_jvp
linear_call_p.batch = _linear_call_batch


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """JAX's ``custom_derivatives.linear_call``: ``fun(residual_args, linear_args)``, a
    function linear in ``linear_args``, whose transpose is ``fun_transpose(residual_args,
    cotangents)`` (giving ``linear_args``' cotangents). Reverse mode (and transposition)
    use ``fun_transpose`` instead of transposing ``fun``'s operations, which may not be
    transposable (an iterative solve's ``while_loop``). The residuals carry no derivative
    through the call."""
    res_flat, res_tree = tree_util.tree_flatten(residual_args)
    lin_flat, lin_tree = tree_util.tree_flatten(linear_args)
    res_flat = [to_array(v) for v in res_flat]
    lin_flat = [to_array(v) for v in lin_flat]
    n = len(res_flat)
    out_tree_box = []

    def flat_fun(*a):
        out = fun(tree_util.tree_unflatten(res_tree, list(a[:n])),
                  tree_util.tree_unflatten(lin_tree, list(a[n:])))
        leaves, tree = tree_util.tree_flatten(out)
        if not out_tree_box:
            out_tree_box.append(tree)
        return [to_array(v) for v in leaves]

    out_avals = _out_avals(flat_fun, res_flat + lin_flat)
    out_tree = out_tree_box[0]

    def flat_transpose(*a):
        cts = tree_util.tree_unflatten(out_tree, list(a[n:]))
        got = fun_transpose(tree_util.tree_unflatten(res_tree, list(a[:n])), cts)
        leaves, tree = tree_util.tree_flatten(got)
        if tree != lin_tree:
            raise CustomRuleError(f"linear_call: fun_transpose must return the structure of "
                                  f"the linear arguments, {lin_tree}; got {tree}")
        return [to_array(v) for v in leaves]

    lin_avals = tuple(ShapeDtypeStruct(v.shape, v.dtype) for v in lin_flat)
    outs = linear_call_p.bind(*res_flat, *lin_flat, fun=flat_fun, fun_transpose=flat_transpose,
                              num_res=n, out_avals=tuple(ShapeDtypeStruct(a.shape, a.dtype)
                                                         for a in out_avals),
                              lin_avals=lin_avals, name=getattr(fun, "__name__", "linear_call"))
    return tree_util.tree_unflatten(out_tree, list(outs))
