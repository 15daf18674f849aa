"""Reverse mode: ``linearize``, ``vjp``, ``grad``, ``value_and_grad``.

Reverse mode is derived from the jvp rules, so the two can never disagree:

1. ``linearize`` runs the jvp with *tangents* traced by a partial-evaluation
   trace. Computations that need only primals run at once on the enclosing
   trace (eagerly, or into an enclosing jit's IR); computations on tangents
   are recorded into a linear IR whose constants are the residuals.
2. ``vjp`` transposes that linear IR: it walks the equations backwards and
   applies each linear primitive's ``transpose`` rule to the cotangents.

Under ``jit`` both steps bind on the jit trace, so one IR holds the forward
and the backward pass.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import tree_util
from ..core import ops
from ..core import dtypes
from ..core.array import Array, to_array
from ..core.ir import IR, Literal, dce, eval_ir
from ..core.primitive import ShapeDtypeStruct
from ..core.trace import EVAL, get_trace, parent_context, trace_context
from ..core.tracing import IRTrace, IRTracer
from ..errors import (ArgnumsError, GradDtypeError, GradOutputError, MissingRuleError,
                      TreeMismatchError)
from .jvp import JVPTrace, JVPTracer, split_aux, zeros_like_tangent


class UndefinedPrimal:
    """A linear input of a transpose rule: only its type is known."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype


def is_linear(x):
    return type(x) is UndefinedPrimal


class PartialIRTrace(IRTrace):
    """Records only equations that depend on its own tracers; the rest run on the parent."""

    def process_primitive(self, prim, args, params):
        if not any(isinstance(a, IRTracer) and a._trace is self for a in args):
            with parent_context(self):
                return prim.bind(*args, **params)
        return super().process_primitive(prim, args, params)


def linearize_flat(fun, primals, zero_outputs=None):
    """(primal outputs, linear IR from input tangents to output tangents).
    ``zero_outputs``, a list, receives whether each output's tangent is symbolically
    zero (a stop_gradient, floor or integer output)."""
    pe = PartialIRTrace(get_trace(), "linearize")
    with trace_context(pe):
        tangents = [pe.new_arg(p.aval) for p in primals]
        jt = JVPTrace(pe)
        with trace_context(jt):
            outs = fun(*[JVPTracer(jt, p, t) for p, t in zip(primals, tangents)])
            pairs = [jt.lift(o if isinstance(o, Array) else to_array(o), "output")
                     for o in outs]
        out_primals = [p for p, _ in pairs]
        if zero_outputs is not None:
            zero_outputs.extend(t is None for _, t in pairs)
        outvars = [pe.to_atom(zeros_like_tangent(p) if t is None else t)
                   for p, t in pairs]
    ir = dce(IR(pe.invars, outvars, pe.eqns, pe.constvars, pe.consts))
    return out_primals, ir


def backward_pass(ir: IR, cts_out):
    """Cotangents of ``ir``'s inputs, given cotangents of its outputs (None: zero)."""
    linear = set(ir.invars)
    for e in ir.eqns:
        linear.update(e.outputs)
    consts = dict(zip(ir.constvars, ir.consts))
    ct_env = {}

    def add_ct(v, ct):
        if ct is None or type(v) is Literal or v not in linear:
            return
        prev = ct_env.get(v)
        ct_env[v] = ct if prev is None else _add(prev, ct)

    for v, ct in zip(ir.outvars, cts_out):
        add_ct(v, ct)

    def read(v):
        if type(v) is Literal:
            return Array._wrap(v.value, v.aval.weak_type)
        if v in linear:
            return UndefinedPrimal(v.aval)
        c = consts[v]
        return c if isinstance(c, Array) else Array._wrap(c)

    for e in reversed(ir.eqns):
        cts = [ct_env.pop(v, None) for v in e.outputs]
        if all(c is None for c in cts):
            continue
        if e.prim.transpose is None:
            raise MissingRuleError(
                f"{e.prim.name} has no transpose rule, so reverse mode cannot pass through "
                f"it (from {e.source}). Forward mode (fnx.jvp) still works.")
        args = [read(v) for v in e.inputs]
        ct = cts if e.prim.multiple_results else cts[0]
        for v, c in zip(e.inputs, e.prim.transpose(ct, *args, **e.params)):
            add_ct(v, c)
    return [ct_env.get(v) for v in ir.invars]


def _add(a, b):
    return ops.add(a, b)


# --- public API ----------------------------------------------------------------------------

def linearize(fun, *primals, has_aux=False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the linear map; with
    ``has_aux=True`` ``fun`` returns ``(out, aux)`` and this ``(out, f_jvp, aux)``, as JAX."""
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    p_leaves = [to_array(p) for p in p_leaves]
    out_tree, aux_box = [None], [None]

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(p_tree, xs))
        if has_aux:
            out, aux = split_aux(out, "linearize")
            aux_box[0] = tree_util.tree_map(_own_primal, aux)
        leaves, out_tree[0] = tree_util.tree_flatten(out)
        return leaves

    outs, ir = linearize_flat(flat, p_leaves)

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != p_tree:
            raise TreeMismatchError(f"linearize: tangents must be structured like the primals "
                             f"({p_tree}), got {t_tree}")
        return tree_util.tree_unflatten(out_tree[0], eval_ir(ir, *[to_array(t) for t in t_leaves]))

    if has_aux:
        return tree_util.tree_unflatten(out_tree[0], outs), f_jvp, aux_box[0]
    return tree_util.tree_unflatten(out_tree[0], outs), f_jvp


def _vjp_flat(flat, leaves):
    """(output leaves, ``backward(output cts) -> input cts (None: zero)``) of a flat
    function: a tape when eager, one linear IR under a transformation."""
    if get_trace() is EVAL:  # eager: a tape of compiled per-call vjps (tape.py)
        return tape.vjp_flat(flat, leaves)
    outs, ir = linearize_flat(flat, leaves)
    return outs, functools.partial(backward_pass, ir)


def vjp(fun, *primals, has_aux=False, reduce_axes=()):
    """``(fun(*primals), f_vjp)``; ``f_vjp(cotangent)`` returns one cotangent per primal.

    As in JAX, ``f_vjp`` is a ``VJP`` object: a pytree whose leaves are the residuals the
    backward pass reads (``f_vjp.args_res``: the primal inputs it needs as they were,
    mirroring the arguments, ``NotNeeded()`` for the others; ``f_vjp.opaque_residuals``:
    values the forward pass computed), with the backward computation as its static
    structure. So it can be returned from a jitted function and passed to another
    (``fnx.fwd_and_bwd``)."""
    if reduce_axes:
        raise NotImplementedError("vjp: reduce_axes was removed from JAX; sum the "
                                  "cotangents over those axes instead")
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    p_leaves = [to_array(p) for p in p_leaves]
    out_tree, aux_box = [None], [None]

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(p_tree, xs))
        if has_aux:
            out, aux = split_aux(out, "vjp")
            aux_box[0] = tree_util.tree_map(_own_primal, aux)
        leaves, out_tree[0] = tree_util.tree_flatten(out)
        return leaves

    if get_trace() is EVAL:  # eager: a tape of compiled per-call vjps (tape.py)
        outs, _, parts = tape.vjp_flat(flat, p_leaves, parts=True)
        backward = tape.TapeSpec(*parts)
        residuals, backward.residuals = backward.residuals, None
    else:
        outs, ir = linearize_flat(flat, p_leaves)
        residuals = [c if isinstance(c, Array) else Array._wrap(np.asarray(c))
                     for c in ir.consts]
        backward = _IRBackward(ir.replace(consts=()))
    spec = _VJPSpec(backward, p_tree, [_aval(p) for p in p_leaves], out_tree[0],
                    [_aval(o) for o in outs], primals)
    f_vjp = VJP._build(spec, residuals, p_leaves)
    out = tree_util.tree_unflatten(out_tree[0], outs)
    if has_aux:
        return out, f_vjp, aux_box[0]
    return out, f_vjp


def _aval(x):
    return ShapeDtypeStruct(x.shape, x.dtype, getattr(x, "weak_type", False))


class _IRBackward:
    """The backward pass of a linear IR whose constants (the residuals) are given."""

    def __init__(self, ir):
        self.ir = ir

    def backward(self, residuals, cts):
        return backward_pass(self.ir.replace(consts=list(residuals)), cts)


class NotNeeded:
    """In ``VJP.args_res``: an argument the backward pass does not read (an empty pytree
    node, so it adds no leaves)."""
    __slots__ = ()

    def __repr__(self):
        return "NotNeeded()"

    def __eq__(self, other):
        return type(other) is NotNeeded

    def __hash__(self):
        return hash(NotNeeded)


tree_util.register_pytree_node(NotNeeded, lambda n: ((), None), lambda aux, ch: NotNeeded())


class _VJPSpec:
    """The static part of a VJP object: the backward computation, the input and output
    structures and types, and where each residual slot comes from (an argument leaf
    saved verbatim, or an opaque residual). Compared by identity, so a jitted function
    returning VJP objects of one trace gives the same tree structure every call."""

    def __init__(self, backward, p_tree, p_avals, out_tree, out_avals, primals):
        self.backward = backward
        self.p_tree, self.p_avals = p_tree, p_avals
        self.out_tree, self.out_avals = out_tree, out_avals
        # each positional argument's leaf count and whether it is a bare leaf
        # (None has no leaves, though its treedef counts as a leaf)
        self.arg_shapes = [(len(tree_util.tree_leaves(a)),
                            a is not None and
                            tree_util.treedef_is_leaf(tree_util.tree_structure(a)))
                           for a in primals]
        self.slots = None  # per residual slot: ("arg", flat leaf index) or ("opaque", j)
        self.n_opaque = 0


class VJP:
    """The function ``fnx.vjp`` returns (JAX's ``VJP``): call it with a cotangent shaped
    like the output to get one cotangent per primal input. A pytree: its leaves are
    ``args_res`` (the argument values the backward pass reads verbatim, one entry per
    argument, ``NotNeeded()`` where none is read; a tuple of leaves for a container
    argument) then ``opaque_residuals`` (values computed by the forward pass)."""

    def __init__(self, spec, args_res, opaque_residuals):
        self._spec = spec
        self.args_res = list(args_res)
        self.opaque_residuals = list(opaque_residuals)

    @classmethod
    def _build(cls, spec, residuals, p_leaves):
        """Sort ``residuals`` into argument leaves (by identity with ``p_leaves``: the
        same Array, tracer or NumPy buffer) and opaque ones."""
        by_id = {}
        for k, p in enumerate(p_leaves):
            by_id.setdefault(id(p), k)
            if type(p) is Array:
                by_id.setdefault(id(p._value), k)
        slots, opaque, args, seen_opaque = [], [], {}, {}
        for r in residuals:
            k = by_id.get(id(r))
            if k is None and type(r) is Array:
                k = by_id.get(id(r._value))
            if k is not None:
                args[k] = r
                slots.append(("arg", k))
            else:
                j = seen_opaque.get(id(r))
                if j is None:
                    j = seen_opaque[id(r)] = len(opaque)
                    opaque.append(r)
                slots.append(("opaque", j))
        spec.slots, spec.n_opaque = slots, len(opaque)
        flat = [args.get(k, NotNeeded()) for k in range(len(p_leaves))]
        return cls(spec, _group_args(spec, flat), opaque)

    def replace(self, args_res=None, opaque_residuals=None):
        return VJP(self._spec, self.args_res if args_res is None else args_res,
                   self.opaque_residuals if opaque_residuals is None else opaque_residuals)

    in_tree = property(lambda self: self._spec.p_tree)
    out_tree = property(lambda self: self._spec.out_tree)

    def _residuals(self):
        spec = self._spec
        flat = []
        if len(self.args_res) != len(spec.arg_shapes):
            raise ValueError(f"vjp function: args_res has {len(self.args_res)} entries, but "
                             f"the function took {len(spec.arg_shapes)} arguments")
        for i, (a, (n, bare)) in enumerate(zip(self.args_res, spec.arg_shapes)):
            if type(a) is NotNeeded:
                flat.extend([a] * n)
            elif bare:
                flat.append(a)
            else:
                leaves = list(a) if isinstance(a, (tuple, list)) and len(a) == n else \
                    tree_util.tree_leaves(a, is_leaf=lambda x: type(x) is NotNeeded)
                if len(leaves) != n:
                    raise ValueError(f"vjp function: args_res[{i}] has {len(leaves)} "
                                     f"leaves, but argument {i} had {n}")
                flat.extend(leaves)
        if len(self.opaque_residuals) != spec.n_opaque:
            raise ValueError(f"vjp function: {len(self.opaque_residuals)} opaque residuals, "
                             f"expected {spec.n_opaque}")
        out = []
        for kind, k in spec.slots:
            if kind == "arg":
                r = flat[k]
                if type(r) is NotNeeded:
                    raise ValueError(f"vjp function: the backward pass needs argument leaf "
                                     f"{k}, but args_res holds NotNeeded() there; restore it "
                                     "by assigning into f_vjp.args_res")
            else:
                r = self.opaque_residuals[k]
            out.append(r if isinstance(r, Array) else to_array(r, "vjp residual"))
        return out

    def __call__(self, ct):
        spec = self._spec
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != spec.out_tree:
            raise TreeMismatchError(f"vjp: the cotangent must be structured like the output "
                                    f"({spec.out_tree}), got {ct_tree}")
        ct_leaves = [to_array(c) for c in ct_leaves]
        for i, (c, o) in enumerate(zip(ct_leaves, spec.out_avals)):
            _check_cotangent(i, c, o)
            if c.weak_type and c.dtype != o.dtype and dtypes.is_inexact(o.dtype):
                ct_leaves[i] = ops.convert_element_type(c, o.dtype)  # a Python scalar
        cts = spec.backward.backward(self._residuals(), ct_leaves)
        cts = [_like_primal(zeros_like_tangent(p) if c is None else c, p)
               for p, c in zip(spec.p_avals, cts)]
        return tree_util.tree_unflatten(spec.p_tree, cts)

    def __repr__(self):
        return (f"VJP(in_tree={self._spec.p_tree}, out_tree={self._spec.out_tree}, "
                f"args_res={self.args_res!r}, opaque_residuals={self.opaque_residuals!r})")


def _group_args(spec, flat):
    """Flat per-leaf argument residuals -> one entry per positional argument."""
    out, i = [], 0
    for n, bare in spec.arg_shapes:
        part = flat[i:i + n]
        i += n
        if bare:
            out.append(part[0])
        elif all(type(x) is NotNeeded for x in part) and n == 0:
            out.append(NotNeeded())
        else:
            out.append(tuple(part))
    return out


tree_util.register_pytree_node(
    VJP, lambda v: ((v.args_res, v.opaque_residuals), v._spec),
    lambda spec, ch: VJP(spec, *ch))


def _check_cotangent(i, ct, out):
    """A cotangent must have its output's shape, and a float output's dtype."""
    if tuple(ct.shape) != tuple(out.shape):
        raise ValueError(f"vjp: cotangent {i} has shape {tuple(ct.shape)}, but output {i} "
                         f"has shape {tuple(out.shape)}; pass one cotangent per output, "
                         "shaped like it")
    if dtypes.is_inexact(out.dtype) and ct.dtype != out.dtype and not ct.weak_type:
        raise TypeError(f"vjp: cotangent {i} has dtype {ct.dtype}, but output {i} has dtype "
                        f"{out.dtype}; convert it with .astype({out.dtype.name!r})")


def _own_primal(a):
    """An aux output without this differentiation's own tangent (called while its trace
    is current). Tracers of enclosing transformations stay: they still carry theirs."""
    t = get_trace()
    if isinstance(a, (JVPTracer, tape.TapeTracer)) and a._trace is t:
        return a.primal
    return a


float0 = np.dtype([("float0", np.void, 0)])  # JAX's dtype of an integer input's gradient


def _check_grad_input(n, a, holomorphic, allow_int, what="grad"):
    kind = a.dtype.kind
    if holomorphic:
        if kind != "c":
            raise GradDtypeError(
                f"{what} with holomorphic=True requires inputs with complex dtype, but got "
                f"{a.dtype} (argument {n}). Convert it with .astype(complex), or drop "
                "holomorphic=True for a real-input function.")
    elif not dtypes.is_inexact(a.dtype) and not allow_int:   # bfloat16 included
        raise GradDtypeError(
            f"{what} requires real- or complex-valued inputs (input dtype that is a sub-dtype "
            f"of np.inexact), but got {a.dtype} (argument {n}). Convert it with "
            ".astype(float), leave it out of argnums, or pass allow_int=True (its gradient "
            "is then a float0 zero).")


def _check_single_output(out):
    """A function ``grad`` differentiates returns one value: a tuple, list or dict would
    otherwise be stacked into one array (or fail in ``stack``)."""
    leaves, tree = tree_util.tree_flatten(out)
    if tree_util.treedef_is_leaf(tree) and leaves:
        return
    kind = type(out).__name__
    n = f" of {len(out)} values" if isinstance(out, (tuple, list, dict)) else ""
    raise GradOutputError(
        f"grad: the function returned a {kind}{n}, but grad differentiates a single real "
        "scalar (gradient only defined for scalar-output functions). If it returns "
        "(loss, aux), pass has_aux=True; otherwise return one scalar, or use fnx.vjp / "
        "fnx.jacrev for several outputs.")


def _check_grad_output(out, holomorphic):
    if not isinstance(out, Array) or out.shape != ():
        raise GradOutputError(
            f"grad: the function must return a {'complex' if holomorphic else 'real'} "
            f"scalar (gradient only defined for scalar-output functions), got "
            f"{_describe(out)}. Reduce it (e.g. .sum() or .mean()), or use fnx.vjp / "
            "fnx.jacrev for non-scalar outputs.")
    kind = out.dtype.kind
    if holomorphic and kind != "c":
        raise GradDtypeError(
            f"grad with holomorphic=True requires outputs with complex dtype, but got "
            f"{out.dtype}. Drop holomorphic=True for a real-valued function.")
    if not holomorphic and not dtypes.is_floating(out.dtype):
        raise GradDtypeError(
            f"grad requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {out.dtype}. For holomorphic differentiation, pass "
            "holomorphic=True. For other complex outputs use fnx.vjp, or differentiate "
            "the real and imaginary parts (fnx.numpy.real/imag) separately.")


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """``(fun(*args), d fun / d args[argnums])`` for a real scalar ``fun``.

    ``holomorphic=True``: complex inputs and a complex scalar output; the result is the
    complex derivative ``df/dz`` (no conjugate), as JAX. ``allow_int=True``: integer
    arguments may be in ``argnums``; their gradients are float0 zeros."""
    if reduce_axes:
        raise NotImplementedError("grad: reduce_axes was removed from JAX; sum the "
                                  "output over those axes instead")
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def wrapped(*args, **kwargs):
        nargs = len(args)
        if single and -nargs <= argnums < nargs:
            arg = args[argnums]
            if type(arg) is Array and arg.dtype.kind in ("c" if holomorphic else "fc"):
                return _value_and_grad_one_array(fun, has_aux, args, kwargs, argnums % nargs,
                                                 holomorphic)
        for n in nums:
            if not -nargs <= n < nargs:
                raise ArgnumsError(f"grad: argnums {argnums} out of range for {nargs} "
                                   "positional arguments (argnums counts positional "
                                   "arguments from 0; pass the argument positionally)")
        nums_ = [n % nargs for n in nums]
        leaves, trees, sizes = [], [], []
        for n in nums_:
            arg = args[n]
            if type(arg) is Array:  # a bare array: no pytree work
                ls, tree = (arg,), None
            else:
                ls, tree = tree_util.tree_flatten(arg)
            for leaf in ls:
                a = leaf if isinstance(leaf, Array) else to_array(leaf)
                _check_grad_input(n, a, holomorphic, allow_int)
                leaves.append(a)
            trees.append(tree)
            sizes.append(len(ls))
        aux_box = [None]

        def flat(*xs):
            full, i = list(args), 0
            for n, tree, k in zip(nums_, trees, sizes):
                full[n] = xs[i] if tree is None else tree_util.tree_unflatten(tree, xs[i:i + k])
                i += k
            out = fun(*full, **kwargs)
            if has_aux:
                out, aux = split_aux(out, "grad")
                aux_box[0] = tree_util.tree_map(_own_primal, aux)
            elif not isinstance(out, Array):
                _check_single_output(out)
            return [out]

        (out,), backward = _vjp_flat(flat, leaves)
        _check_grad_output(out, holomorphic)
        cts = backward([Array._wrap(_one(out.dtype))])
        grads, i = [], 0
        for tree, k in zip(trees, sizes):
            g = [np.zeros(p.shape, float0) if not dtypes.is_inexact(p.dtype) else
                 _like_primal(zeros_like_tangent(p) if c is None else c, p)
                 for p, c in zip(leaves[i:i + k], cts[i:i + k])]
            grads.append(g[0] if tree is None else tree_util.tree_unflatten(tree, g))
            i += k
        g = grads[0] if single else tuple(grads)
        if has_aux:
            return (out, aux_box[0]), g
        return out, g

    return wrapped


def _value_and_grad_one_array(fun, has_aux, args, kwargs, n, holomorphic=False):
    """``value_and_grad`` for the common case: one bare float array differentiated."""
    aux_box = [None]

    def flat(x):
        full = list(args)
        full[n] = x
        out = fun(*full, **kwargs)
        if has_aux:
            out, aux = split_aux(out, "grad")
            aux_box[0] = tree_util.tree_map(_own_primal, aux)
        elif not isinstance(out, Array):
            _check_single_output(out)
        return [out]

    (out,), backward = _vjp_flat(flat, [args[n]])
    if not (isinstance(out, Array) and out.shape == () and dtypes.is_floating(out.dtype)) \
            or holomorphic:
        _check_grad_output(out, holomorphic)
    (g,) = backward([Array._wrap(_one(out.dtype))])
    if g is None:
        g = zeros_like_tangent(args[n])
    return ((out, aux_box[0]), g) if has_aux else (out, g)


def _like_primal(ct, primal):
    """A gradient has its primal's type, weak type included (JAX: ``grad(f)(3.)`` is a
    weakly typed float32, so it does not promote a float16 array it meets)."""
    if primal.weak_type and not ct.weak_type and ct.dtype == primal.dtype:
        return ops.convert_element_type(ct, ct.dtype, weak_type=True)
    return ct


_ONES: dict = {}


def _one(dtype):
    """A read-only 0-d one of ``dtype``: the seed cotangent of grad (shared, immutable)."""
    one = _ONES.get(dtype)
    if one is None:
        one = _ONES[dtype] = np.ones((), dtype)
        one.flags.writeable = False
    return one


def _describe(x):
    if isinstance(x, Array):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return f"a {type(x).__name__}"


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of a real scalar ``fun`` with respect to ``args[argnums]``
    (``holomorphic``, ``allow_int``: as ``value_and_grad``)."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    def g(*args, **kwargs):
        out, grads = vg(*args, **kwargs)
        return (grads, out[1]) if has_aux else grads

    return g



from . import tape  # noqa: E402  (it builds on linearize_flat and backward_pass)
