"""Eager reverse mode: a tape of per-call vjps, each derived from a jvp rule.

``vjp`` / ``grad`` called with no enclosing transformation run the function
at once, like NumPy, and record one tape entry per primitive call that
touches a differentiated value: the call's vjp. That vjp is derived exactly
as under jit (``vjp.py``): the primitive's jvp rule is linearized and the
linear part transposed, so there is still only one hand-written derivative
rule per primitive, and eager and jitted gradients cannot disagree.

The derivation depends only on the primitive, its params and the types of
its inputs, never on their values. So the second time a call with the same
signature is seen, the derivation is traced once into two IRs, compiled to
NumPy functions and cached: ``fwd(primals) -> (outputs, residuals)`` and
``bwd(residuals, output cotangents) -> input cotangents``. From then on a
differentiated call costs two small generated functions and a tape append,
which is what makes eager ``grad`` cheap. Calls whose rules run user code
(custom_jvp, custom_vjp, checkpoint) or whose params cannot be keyed are
linearized afresh each time.

Integer and bool values carry no derivative: they are plain Arrays here, not
tape values (JAX's float0 semantics).
"""
from __future__ import annotations

import numpy as np

from ..core import ops
from ..core.backend import DEVICE_BACKENDS, default_device, get_backend, is_host_buffer
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..core.ir import IR, eval_ir, optimize
from ..core.primitive import ShapeDtypeStruct
from ..core.trace import (CURRENT_TRACE, EVAL, Trace, get_trace, parent_context,
                          trace_context)
from ..core.tracing import IRTrace
from .jvp import zeros_like_tangent
from .vjp import backward_pass, linearize_flat


_new = object.__new__
_set_trace, _reset_trace = CURRENT_TRACE.set, CURRENT_TRACE.reset
_wrap = Array._wrap
_ORIGIN = "a value differentiated by an eager grad/vjp"


class TapeTracer(Tracer):
    """A concrete value that the tape differentiates (tape value ``node``). It holds its
    NumPy value itself (``_value``, as an Array does); ``primal`` is it as an Array."""
    __slots__ = ("node",)
    _origin = _ORIGIN  # made by an eager grad; no source line is recorded per value

    @property
    def primal(self):
        return _wrap(self._value, self.weak_type)

    def _concrete(self, what):
        # Python control flow on concrete values keeps working under eager grad.
        return Array._concrete(self, what)

    # Type queries read the concrete value: no abstract value is built per call.
    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def aval(self):
        return ShapeDtypeStruct(self._value.shape, self._value.dtype, self.weak_type)

    _aval = aval


class TapeTrace(Trace):
    name = "grad"

    def __init__(self):
        self.parent = EVAL
        self.entries = []  # (rule, residuals, input nodes, output nodes)
        self.n_nodes = 0
        self.all_cached = True  # every entry's rule is a compiled _Rule

    def new_value(self, primal):
        t = _new(TapeTracer)
        t._trace = self
        t.weak_type = primal.weak_type
        t._value = primal._value
        t.node = self.n_nodes
        self.n_nodes += 1
        return t

    def process_primitive(self, prim, args, params):
        # One pass over the arguments: NumPy values, type signature, taped inputs.
        vals, sig, in_nodes = [], [], []
        mask = 0
        bit = 1
        for a in args:
            if type(a) is TapeTracer and a._trace is self:
                in_nodes.append(a.node)
                mask |= bit
            elif isinstance(a, Tracer):
                self.check_foreign_tracer(a, prim.name)
            v = a._value
            vals.append(v)
            sig.append((v.shape, v.dtype, a.weak_type))
            bit <<= 1
        if not mask:
            return EVAL.process_primitive(prim, args, params)
        rule = None
        # the cached rules are compiled for NumPy buffers: values on a device, or host
        # values that a default device draws there, linearize afresh, through the eager
        # dispatch of their backend
        if prim.cache_eager_vjp and not (DEVICE_BACKENDS and (
                not all(map(is_host_buffer, vals)) or default_device() is not None)):
            try:
                # params by value and top-level type, so y=2 and y=2.0 differ (values
                # nested in tuples compare by ==: primitives keep ints there)
                if params:
                    pv = tuple(params.values())
                    key = (prim, tuple(sig), mask, tuple(params), pv, tuple(map(type, pv)))
                else:
                    key = (prim, tuple(sig), mask)
                rule = _RULES.get(key)
            except TypeError:  # unhashable params: derive afresh
                key = None
            if rule is None and key is not None:
                rule = _rule_on_miss(key, prim, params, sig, mask)
        if rule is not None:
            res = rule.fwd(*vals)
            if rule.one_diff_out:  # the common case: one output, differentiable
                t = _new(TapeTracer)
                t._trace = self
                t.weak_type = rule.weak0
                t._value = res[0]
                t.node = n = self.n_nodes
                self.n_nodes = n + 1
                self.entries.append((rule, res[1:], tuple(in_nodes), (n,)))
                return [t] if prim.multiple_results else t
            outs = [_wrap(o, a.weak_type) for o, a in zip(res, rule.out_avals)]
            residuals, diff = res[rule.n_out:], rule.out_diff
        else:
            primals = [a.primal if type(a) is TapeTracer and a._trace is self else a
                       for a in args]
            zero = []
            with parent_context(self):
                outs, rule = linearize_flat(
                    _call_of(prim, params, primals, _bits(mask, len(args))),
                    [a.primal for a in args if type(a) is TapeTracer and a._trace is self],
                    zero)
            residuals = ()
            diff = [not z and dtypes.is_inexact(o.dtype) for o, z in zip(outs, zero)]
            self.all_cached = False
        wrapped, out_nodes = [], []
        for o, d in zip(outs, diff):
            if d:
                o = self.new_value(o)
                out_nodes.append(o.node)
            else:  # no derivative flows from here: a plain value, not on the tape
                out_nodes.append(None)
            wrapped.append(o)
        self.entries.append((rule, residuals, tuple(in_nodes), tuple(out_nodes)))
        return wrapped if prim.multiple_results else wrapped[0]

    def backward_numpy(self, cts, want=()):
        """Eager backward pass over NumPy values: ``cts`` maps nodes to cotangents of
        the outputs and ends up holding those of the inputs (``want``: the nodes the
        caller reads)."""
        if self.all_cached and len(self.entries) > 1:
            fused = _fused_backward(self.entries, cts, want)
            if fused is not None:
                return fused
        pop, get = cts.pop, cts.get
        for rule, residuals, in_nodes, out_nodes in reversed(self.entries):
            if len(out_nodes) == 1:  # the common case: one output
                c = pop(out_nodes[0], None) if out_nodes[0] is not None else None
                if c is None:
                    continue
                out_cts = [c]
            else:
                out_cts = [None if i is None else pop(i, None) for i in out_nodes]
                if all(c is None for c in out_cts):
                    continue
            if type(rule) is IR:  # linearized afresh: transpose its linear IR
                in_cts = [None if c is None else c._value for c in backward_pass(
                    rule, [None if c is None else Array._wrap(c) for c in out_cts])]
            else:
                if len(out_cts) > 1:
                    out_cts = [np.zeros(a.shape, a.dtype) if c is None else c
                               for c, a in zip(out_cts, rule.out_avals)]
                in_cts = rule.bwd(*residuals, *out_cts)
            for i, c in zip(in_nodes, in_cts):
                if c is not None:
                    prev = get(i)
                    cts[i] = c if prev is None else prev + c
        return cts

    def backward_traced(self, cts):
        """The same pass with fnx ops on the current trace (cotangents may be tracers:
        ``vmap`` / ``jit`` of a vjp function, ``jacrev``)."""
        return _backward_traced(self.entries, cts,
                                lambda i, residuals: [Array._wrap(r) for r in residuals])


def _backward_traced(entries, cts, residual_values):
    for k in range(len(entries) - 1, -1, -1):
        rule, residuals, in_nodes, out_nodes = entries[k]
        out_cts = [None if i is None else cts.pop(i, None) for i in out_nodes]
        if all(c is None for c in out_cts):
            continue
        if type(rule) is IR:
            in_cts = backward_pass(rule, out_cts)
        else:
            out_cts = [zeros_like_tangent(a) if c is None else c
                       for c, a in zip(out_cts, rule.out_avals)]
            it = iter(eval_ir(rule.bwd_ir, *residual_values(k, residuals), *out_cts))
            in_cts = [next(it) if p else None for p in rule.present]
        for i, c in zip(in_nodes, in_cts):
            if c is not None:
                prev = cts.get(i)
                cts[i] = c if prev is None else ops.add(prev, c)
    return cts


# --- the whole backward pass as one generated function ---------------------------------------
# A tape's structure (which rules, wired how) does not depend on values. When the same
# structure is seen again (a training loop), its backward pass is traced once through the
# per-call bwd IRs into one IR and compiled: one NumPy function instead of one per call.

_FUSED_SEEN: dict = {}
_FUSED: dict = {}


def _fused_backward(entries, cts, want):
    key = (tuple([(e[0], e[2], e[3]) for e in entries]), tuple(cts), want)
    fused = _FUSED.get(key)
    if fused is None:
        if key not in _FUSED_SEEN:
            if len(_FUSED_SEEN) > 256:
                _FUSED_SEEN.clear()
            _FUSED_SEEN[key] = True
            return None
        if len(_FUSED) > 256:
            _FUSED.clear()
        fused = _FUSED[key] = _compile_backward(entries, cts, want)
    fn, present = fused
    it = iter(fn(*[r for e in entries for r in e[1]], *cts.values()))
    return {n: next(it) for n, p in zip(want, present) if p}


def _compile_backward(entries, cts, want):
    trace = IRTrace(EVAL, "tape_backward")
    with trace_context(trace):
        res_args = [[trace.new_arg(a) for a in e[0].res_avals] for e in entries]
        seeds = {n: trace.new_arg(ShapeDtypeStruct(c.shape, c.dtype)) for n, c in cts.items()}
        out = _backward_traced(entries, seeds, lambda k, residuals: res_args[k])
        outs = [None if n is None else out.get(n) for n in want]
        present = [o is not None for o in outs]
        outvars = [trace.to_atom(o) for o in outs if o is not None]
    ir = optimize(IR(trace.invars, outvars, trace.eqns, trace.constvars, trace.consts))
    return _host().compile(ir, "tape_backward").fn, present


def _host():
    """The backend the eager tape compiles its derivations with: eager values are host
    (NumPy) arrays."""
    return get_backend("numpy")


def _call_of(prim, params, args, mask):
    """``prim`` as a function of the masked arguments only, returning a list."""
    def call(*diff):
        it = iter(diff)
        out = prim.bind(*[next(it) if m else a for a, m in zip(args, mask)], **params)
        return list(out) if prim.multiple_results else [out]
    return call


class _Rule:
    """One call signature's derivation, compiled: ``fwd(*primals) -> outputs +
    residuals``, ``bwd(*residuals, *output cts) -> input cts`` (None: zero), and the
    bwd IR for traced cotangents (``present`` says which input cts it returns)."""
    __slots__ = ("fwd", "bwd", "bwd_ir", "present", "out_avals", "n_out", "out_diff",
                 "one_diff_out", "weak0", "res_avals")

    def __init__(self, fwd, bwd, bwd_ir, present, out_avals, out_zero, res_avals):
        self.fwd, self.bwd, self.bwd_ir = fwd, bwd, bwd_ir
        self.present, self.out_avals, self.res_avals = present, out_avals, res_avals
        self.n_out = len(out_avals)
        # which outputs carry a derivative (not integer, not a symbolic zero)
        self.out_diff = [dtypes.is_inexact(a.dtype) and not z
                         for a, z in zip(out_avals, out_zero)]
        self.one_diff_out = self.out_diff == [True]
        self.weak0 = out_avals[0].weak_type if out_avals else False


_SEEN: dict = {}    # keys seen once (compiled on the second sighting)
_RULES: dict = {}   # key -> _Rule
_MAX_KEYS = 4096


def _bits(mask, n):
    return [bool(mask >> i & 1) for i in range(n)]


def _rule_on_miss(key, prim, params, sig, mask):
    """Compile the rule on a key's second sighting (one-off calls stay cheap: None)."""
    if key not in _SEEN:
        if len(_SEEN) > _MAX_KEYS:
            _SEEN.clear()
        _SEEN[key] = True
        return None
    if len(_RULES) > _MAX_KEYS:
        _RULES.clear()
    avals = [ShapeDtypeStruct(*t) for t in sig]
    rule = _RULES[key] = _compile_rule(prim, params, avals, _bits(mask, len(sig)))
    return rule


def _compile_rule(prim, params, avals, mask):
    """Trace the call's linearization into a fwd IR and its transpose into a bwd IR."""
    name = f"vjp_{prim.name}"
    fwd_trace = IRTrace(EVAL, name)
    with trace_context(fwd_trace):
        args = [fwd_trace.new_arg(a) for a in avals]
        zero = []
        outs, lin = linearize_flat(_call_of(prim, params, args, mask),
                                   [a for a, m in zip(args, mask) if m], zero)
        residuals = list(lin.consts)
        fwd_out = [fwd_trace.to_atom(x) for x in outs + residuals]
    fwd_ir = optimize(IR(fwd_trace.invars, fwd_out, fwd_trace.eqns,
                         fwd_trace.constvars, fwd_trace.consts))

    bwd_trace = IRTrace(EVAL, name + "_T")
    with trace_context(bwd_trace):
        res_args = [bwd_trace.new_arg(r.aval) for r in residuals]
        ct_args = [bwd_trace.new_arg(ShapeDtypeStruct(o.shape, o.dtype)) for o in outs]
        cts = backward_pass(lin.replace(consts=res_args), ct_args)
        present = [c is not None for c in cts]
        bwd_out = [bwd_trace.to_atom(c) for c in cts if c is not None]
    bwd_ir = optimize(IR(bwd_trace.invars, bwd_out, bwd_trace.eqns,
                         bwd_trace.constvars, bwd_trace.consts))
    fwd = _host().compile(fwd_ir, name).fn
    bwd_fn = _host().compile(bwd_ir, name + "_T").fn
    if not all(present):
        inner = bwd_fn

        def bwd_fn(*a):
            it = iter(inner(*a))
            return [next(it) if p else None for p in present]
    return _Rule(fwd, bwd_fn, bwd_ir, present, [o.aval for o in outs], zero,
                 [r.aval for r in residuals])


# --- entry point ---------------------------------------------------------------------------

def vjp_flat(fun, primals, parts=False):
    """Eager ``vjp`` of ``fun(*primals) -> list``: (output primals, ``backward``), where
    ``backward(output cotangents)`` returns one cotangent per primal (None: zero). With
    ``parts``, also ``(tape, input nodes, output nodes)`` (for ``TapeSpec``)."""
    tape = TapeTrace()
    token = _set_trace(tape)  # trace_context, without a generator's cost
    try:
        ins = [tape.new_value(p) if dtypes.is_inexact(p.dtype) else p for p in primals]
        outs = fun(*ins)
        out_primals, out_nodes = [], []
        for o in outs:
            if type(o) is TapeTracer and o._trace is tape:
                out_primals.append(o.primal)
                out_nodes.append(o.node)
            else:
                if isinstance(o, Tracer):
                    tape.check_foreign_tracer(o, "output")
                out_primals.append(o if isinstance(o, Array) else to_array(o, "output"))
                out_nodes.append(None)
    finally:
        _reset_trace(token)
        tape.valid = False
    in_nodes = [t.node if type(t) is TapeTracer else None for t in ins]

    def backward(cts):
        concrete = get_trace() is EVAL and all(type(c) is Array for c in cts)
        seeds = {}
        for n, c in zip(out_nodes, cts):
            if n is None or c is None:
                continue
            if concrete:
                c = c._value
            prev = seeds.get(n)
            seeds[n] = c if prev is None else (prev + c if concrete else _add(prev, c))
        if concrete:
            res = tape.backward_numpy(seeds, tuple(in_nodes))
            return [None if n is None or n not in res else Array._wrap(res[n])
                    for n in in_nodes]
        res = tape.backward_traced(seeds)
        return [None if n is None else res.get(n) for n in in_nodes]

    if parts:
        return out_primals, backward, (tape, in_nodes, out_nodes)
    return out_primals, backward


class TapeSpec:
    """A tape's structure without its values (the static part of an eager vjp function
    as a pytree): per entry its rule (a linear IR's constants stripped), how many
    residuals it reads, and its input and output nodes. ``backward(residuals, cts)``
    runs the backward pass with the residuals given (concrete or traced)."""

    def __init__(self, tape, in_nodes, out_nodes):
        self.in_nodes, self.out_nodes = tuple(in_nodes), tuple(out_nodes)
        self.entries = []
        residuals = []
        for rule, res, ins, outs in tape.entries:
            if type(rule) is IR:
                consts = [c if isinstance(c, Array) else Array._wrap(np.asarray(c))
                          for c in rule.consts]
                self.entries.append((rule.replace(consts=()), len(consts), ins, outs))
                residuals.extend(consts)
            else:
                self.entries.append((rule, len(res), ins, outs))
                residuals.extend(Array._wrap(r) for r in res)
        self.all_cached = tape.all_cached
        self.residuals = residuals  # the values (taken by the caller, not kept)

    def _entries(self, residuals, numpy):
        out, k = [], 0
        for rule, n, ins, outs in self.entries:
            res = residuals[k:k + n]
            k += n
            if type(rule) is IR:
                out.append((rule.replace(consts=list(res)), (), ins, outs))
            else:
                out.append((rule, tuple(r._value for r in res) if numpy else tuple(res),
                            ins, outs))
        return out

    def backward(self, residuals, cts):
        concrete = (get_trace() is EVAL and all(type(c) is Array for c in cts)
                    and all(type(r) is Array for r in residuals))
        seeds = {}
        for n, c in zip(self.out_nodes, cts):
            if n is None or c is None:
                continue
            if concrete:
                c = c._value
            prev = seeds.get(n)
            seeds[n] = c if prev is None else (prev + c if concrete else _add(prev, c))
        entries = self._entries(residuals, concrete)
        if concrete:
            holder = TapeTrace()
            holder.entries, holder.all_cached = entries, self.all_cached
            res = holder.backward_numpy(seeds, self.in_nodes)
            return [None if n is None or n not in res else Array._wrap(res[n])
                    for n in self.in_nodes]
        res = _backward_traced(entries, seeds, lambda k, r: list(r))
        return [None if n is None else res.get(n) for n in self.in_nodes]


def _add(a, b):
    return ops.add(a, b)
