"""Loop restructuring as an IR pass: what a scan body need not do on every step.

``scan`` binds its primitive as the user wrote it (``make_ir`` shows the plain loop, and
jvp, transpose and vmap see plain scans). A backend runs ``plan_scans`` on an IR before it
lowers it: every ``scan`` equation, in the IR and in the IRs nested in it (cond branches,
while and scan bodies, call bodies), is replaced by equations that move work out of the
loop:

* loop-invariant code motion: equations that read only the constants (and literals) run
  once before the loop and become constants of the body;
* per-step equations that read only constants and ``xs`` run once before the loop,
  batched over the scan axis (one big matmul instead of ``length`` small ones), and
  their stacked results become new ``xs``;
* accumulator carries (``acc = acc + c`` where ``acc`` is used nowhere else, e.g. the
  weight cotangents of a transposed scan) become stacked outputs summed after the loop;
  a ``dot_general`` (or ``transpose``/``reduce_sum``) that feeds only such a sum is
  done after the loop too, contracting over the scan axis as well (one matmul over
  ``length * batch`` rows), so the loop only stacks its per-step operands.

The pass is backend-neutral. A backend may pass a ``relayout`` hook, asked about every
equation left in the loop: ``relayout(eqn, invariant) -> None or (eqn, before)``, where
``invariant(var)`` says whether a var is loop-invariant, ``eqn`` is the equation the loop
runs instead and ``before`` the equations computing its new loop-invariant operands once
before the loop (the NumPy backend transposes a matrix BLAS would read through a
transposed view there: ``fnx.backends.numpy_loops.blas_relayout``; cuBLAS takes transpose
flags for free, so a GPU backend passes none). ``scan_plan_for`` gives the plan of one
scan by its body, whose ``program`` is the restructured scan as an IR (how a backend's
``run_scan`` runs an eager scan).

The results are those of the loop up to the order of floating-point sums."""
from __future__ import annotations

import weakref

import numpy as np

from ..._config import config
from ...core.array import Array
from ...core.ir import IR, Eqn, Var, Literal, check_ir, dce, eval_ir, has_effects, sub_irs
from ...core.primitive import ShapeDtypeStruct
from ...core.trace import CURRENT_TRACE, EVAL
from ...core.tracing import trace_flat
from ...errors import ShapeError
from ..elementwise import add_p
from ..linalg_prims import dot_general_p
from ..reduction import reduce_sum_p
from ..shape import transpose_p
from .common import _batch_flat, _used_invars
from .loops import scan_p

__all__ = ["plan_scans", "scan_plan_for", "ScanPlan", "Unplanned"]


def _is_invariant(v, inv):
    return type(v) is Literal or v in inv


def _batchable(e):
    return e.prim.batch is not None and not any(sub_irs(e.params)) and not has_effects(e)


class ScanPlan:
    """How to run one scan with its loop-invariant, xs-only and accumulated work done
    outside the loop (see the module docstring)."""

    def __init__(self, body, nc, nk, relayout=None):
        C, K, X = body.invars[:nc], body.invars[nc:nc + nk], body.invars[nc + nk:]
        self._in_avals = list(body.in_avals)
        kout, yout = body.outvars[:nk], body.outvars[nk:]
        inv, pre = set(C), set(X)
        inv_eqns, pre_eqns, loop_eqns = [], [], []
        for e in body.eqns:
            vs = [v for v in e.inputs if type(v) is Var]
            if all(v in inv for v in vs) and not has_effects(e):  # a print runs per step
                inv_eqns.append(e)
                inv.update(e.outputs)
            elif all(v in inv or v in pre for v in vs) and _batchable(e):
                pre_eqns.append(e)
                pre.update(e.outputs)
            else:
                r = None if relayout is None else relayout(e, inv.__contains__)
                if r is not None:  # the backend's layout of the loop's operands
                    e, before = r
                    for b in before:
                        inv_eqns.append(b)
                        inv.update(b.outputs)
                loop_eqns.append(e)
        uses = {}
        for e in loop_eqns:
            for v in e.inputs:
                if type(v) is Var:
                    uses[v] = uses.get(v, 0) + 1
        for v in body.outvars:
            if type(v) is Var:
                uses[v] = uses.get(v, 0) + 1
        producer = {v: e for e in loop_eqns for v in e.outputs}
        self.inv, self.pre, self.X = inv, pre, X
        self._uses, self._producer = uses, producer
        self.leaves = []           # per-step values the recipes need stacked
        y_pos = {}
        for j, v in enumerate(yout):
            if type(v) is Var:
                y_pos.setdefault(v, j)
        self._y_pos = y_pos
        accs = {}
        for k in range(nk):
            kv, ko = K[k], kout[k]
            e = producer.get(ko)
            if (e is None or e.prim is not add_p or uses.get(kv) != 1 or uses.get(ko) != 1
                    or kv.aval.weak_type or kv.aval.dtype.kind not in "fc"):
                continue
            a, b = e.inputs
            c = b if a is kv else a if b is kv else None
            if type(c) is not Var or c is kv or (c.aval.shape, c.aval.dtype) != \
                    (kv.aval.shape, kv.aval.dtype) or c in inv:
                continue
            recipe = self._sum_recipe(c, top=True)
            if recipe is not None:
                accs[k] = (recipe, a is kv)
        self.accs = accs
        new_ys = [v for v in dict.fromkeys(self.leaves)
                  if v not in y_pos and v not in pre and v not in X]
        keep_k = [k not in accs for k in range(nk)]
        # a value returned as several ys is stacked once
        uniq = list(dict.fromkeys(v if type(v) is Var else (j, v) for j, v in enumerate(yout)))
        self.y_map = [uniq.index(v if type(v) is Var else (j, v)) for j, v in enumerate(yout)]
        uniq = [u if type(u) is Var else u[1] for u in uniq]
        outvars = [v for v, m in zip(kout, keep_k) if m] + uniq + new_ys
        inv_vars = [v for e in inv_eqns for v in e.outputs]
        pre_vars = [v for e in pre_eqns for v in e.outputs]
        core = dce(IR(list(body.invars) + inv_vars + pre_vars, outvars, loop_eqns))
        used = _used_invars(core)
        # the new body's inputs: constants (original, then hoisted), carries, xs (original,
        # then computed before the loop); unused ones are dropped
        self.c_in = [v for v in C + inv_vars if v in used]
        self.k_keep = keep_k
        self.x_in = [v for v in X + pre_vars if v in used]
        k_in = [v for v, m in zip(K, keep_k) if m]
        self.body = IR(self.c_in + k_in + self.x_in, core.outvars, core.eqns)
        self.n_y, self.new_ys = len(uniq), new_ys
        self.yout = yout
        # what must be computed before the loop
        need_pre = set(v for v in self.x_in if v not in X) | {v for v in self.leaves if v in pre
                                                              and v not in X}
        self.pre_out = [v for v in pre_vars if v in need_pre]
        pre_ir = dce(IR(C + inv_vars + X, self.pre_out, pre_eqns))
        pre_used = _used_invars(pre_ir)
        self.pre_c = [v for v in C + inv_vars if v in pre_used]
        self.pre_x = [v for v in X if v in pre_used]
        self.pre_ir = IR(self.pre_c + self.pre_x, self.pre_out, pre_ir.eqns)
        need_inv = {v for v in self.c_in + self.pre_c if v not in C} | self._inv_leaves
        self.inv_out = [v for v in inv_vars if v in need_inv]
        self.inv_ir = dce(IR(list(C), self.inv_out, inv_eqns))
        self.C = C
        self.trivial = (not accs and not self.inv_ir.eqns and not self.pre_ir.eqns
                        and len(self.body.invars) == len(body.invars)
                        and len(core.eqns) == len(body.eqns) and len(uniq) == len(yout))

    _inv_leaves = frozenset()

    def _stack_leaf(self, v):
        if type(v) is not Var or v in self.inv:
            return None
        self.leaves.append(v)
        return v

    def _sum_recipe(self, v, top=False):
        """How to compute the sum over the steps of the per-step value ``v`` after the loop;
        None when it cannot be."""
        if type(v) is not Var or v in self.inv:
            return None
        e = self._producer.get(v)
        if e is None or self._uses.get(v) != 1 or e.prim.multiple_results:
            return ("sum", self._stack_leaf(v))
        if e.prim is transpose_p:
            sub = self._sum_recipe(e.inputs[0])
            if sub is not None:
                return ("T", tuple(e.params["permutation"]), sub)
        elif e.prim is reduce_sum_p and type(e.inputs[0]) is Var and e.inputs[0] not in self.inv:
            nd = len(e.inputs[0].aval.shape)
            axes = tuple(sorted(a % nd for a in e.params["axes"]))
            return ("rsum", axes, self._stack_leaf(e.inputs[0]))
        elif e.prim is dot_general_p:
            a, b = e.inputs
            ai, bi = _is_invariant(a, self.inv), _is_invariant(b, self.inv)
            if not ai and not bi:
                return ("dot", e.params, self._stack_leaf(a), self._stack_leaf(b))
            if ai != bi and type(a if ai else b) is Var:
                sub = self._sum_recipe(b if ai else a)
                if sub is not None:
                    w = a if ai else b
                    self._inv_leaves = self._inv_leaves | {w}
                    return ("dotinv", e.params, 1 if ai else 0, sub, w)
        return ("sum", self._stack_leaf(v))

    def program(self, length, reverse, unroll, in_avals=None, source="scan"):
        """The restructured scan as an IR taking the scan's operands (``consts, init,
        xs``; of types ``in_avals``, by default the body's) and returning its outputs:
        the work moved out of the loop before and after the ``scan`` equation of the new
        body. Built equation by equation; only the xs-only work is traced (batched over
        the scan axis). Raises ``Unplanned`` when a batching rule cannot batch it."""
        if in_avals is None:
            n = len(self.C) + len(self.k_keep)
            in_avals = self._in_avals[:n] + [
                ShapeDtypeStruct((length,) + tuple(a.shape), a.dtype, a.weak_type)
                for a in self._in_avals[n:]]
        em = _Emitter(source)
        ins = [Var(a) for a in in_avals]
        outs = self._build(em, ins, length, reverse, unroll)
        return IR(ins, outs, em.eqns, em.constvars, em.consts)

    def run(self, buffers, length, reverse, unroll):
        """What ``program`` computes, computed now on raw buffers (the scan's operands),
        each equation by its primitive's impl as an eager call runs it; the outputs' raw
        buffers. Raises ``Unplanned`` as ``program`` does."""
        return self._build(_Evaluator(), list(buffers), length, reverse, unroll)

    def _build(self, em, ins, length, reverse, unroll):
        nc, nk = len(self.C), len(self.k_keep)
        init = ins[nc:nc + nk]
        env = dict(zip(self.C, ins[:nc]))
        for e in self.inv_ir.eqns:
            em.copy(e, env)
        stk = dict(zip(self.X, ins[nc + nk:]))
        if self.pre_out:
            avals = [v.aval for v in self.pre_c] + [
                ShapeDtypeStruct((length,) + tuple(v.aval.shape), v.aval.dtype,
                                 v.aval.weak_type) for v in self.pre_x]
            stk.update(zip(self.pre_out, em.batched(
                self._batched_pre(length), avals,
                [env[v] for v in self.pre_c] + [stk[v] for v in self.pre_x])))
        outs = em(scan_p, *[env[v] for v in self.c_in],
                  *[k for k, m in zip(init, self.k_keep) if m],
                  *[stk[v] for v in self.x_in], body=self.body, num_consts=len(self.c_in),
                  num_carry=sum(self.k_keep), length=length, reverse=reverse, unroll=unroll)
        nkk = sum(self.k_keep)
        carries, ys, extra = outs[:nkk], outs[nkk:nkk + self.n_y], outs[nkk + self.n_y:]
        ys = [ys[i] for i in self.y_map]
        for v, j in self._y_pos.items():
            stk.setdefault(v, ys[j])
        stk.update(zip(self.new_ys, extra))
        it = iter(carries)
        res = []
        for k, m in enumerate(self.k_keep):
            if m:
                res.append(next(it))
                continue
            recipe, acc_first = self.accs[k]
            s = self._emit(em, recipe, env, stk)
            res.append(em(add_p, init[k], s) if acc_first else em(add_p, s, init[k]))
        return res + list(ys)

    def _batched_pre(self, length):
        """The xs-only work batched over the scan axis: a function from the constants it
        reads and its stacked xs to its stacked results (scan axis first)."""
        def batched(*vals):
            dims = [None] * len(self.pre_c) + [0] * len(self.pre_x)
            try:
                outs, odims = _batch_flat(lambda *a: eval_ir(self.pre_ir, *a), list(vals),
                                          dims, length, force=[True] * len(self.pre_out))
            except (NotImplementedError, TypeError, ShapeError) as err:
                raise Unplanned from err  # a batching rule that cannot: run it per step
            res = []
            for o, d in zip(outs, odims):
                if d != 0:
                    perm = (d,) + tuple(i for i in range(o.ndim) if i != d)
                    o = transpose_p.bind(o, permutation=perm)
                res.append(o)
            return res
        return batched

    def _emit(self, em, r, env, stk):
        kind = r[0]
        if kind == "sum":
            return em(reduce_sum_p, stk[r[1]], axes=(0,))
        if kind == "T":
            return em(transpose_p, self._emit(em, r[2], env, stk), permutation=r[1])
        if kind == "rsum":
            return em(reduce_sum_p, stk[r[2]], axes=(0,) + tuple(a + 1 for a in r[1]))
        params = r[1]
        if kind == "dot":
            (lc, rc), (lb, rb) = params["dimension_numbers"]

            def up(ds):
                return tuple(d + 1 for d in ds)
            dn = (((0,) + up(lc), (0,) + up(rc)), (up(lb), up(rb)))
            return em(dot_general_p, stk[r[2]], stk[r[3]], **dict(params, dimension_numbers=dn))
        s, w = self._emit(em, r[3], env, stk), env[r[4]]
        return em(dot_general_p, *((w, s) if r[2] == 1 else (s, w)), **params)


class _Emitter:
    """Equations appended one by one, each output typed by its primitive's shape rule
    (tracing without tracers: the planner knows every value's type)."""

    def __init__(self, source):
        self.eqns, self.source, self.constvars, self.consts = [], source, [], []

    def __call__(self, prim, *ins, **params):
        out = prim.shape_rule(*[v.aval for v in ins], **params)
        outs = [Var(a) for a in (out if prim.multiple_results else [out])]
        self.eqns.append(Eqn(prim, list(ins), outs, params, self.source))
        return outs if prim.multiple_results else outs[0]

    def copy(self, e, env):
        """A copy of equation ``e`` (of a body) reading ``env``'s values for its inputs,
        with fresh outputs, which ``env`` maps ``e``'s outputs to."""
        outs = [Var(v.aval) for v in e.outputs]
        self.eqns.append(Eqn(e.prim, [env[v] if type(v) is Var else v for v in e.inputs],
                             outs, e.params, e.source))
        env.update(zip(e.outputs, outs))

    def batched(self, fn, avals, args):
        """``fn`` (which binds primitives) traced for ``avals`` and inlined on ``args``."""
        ir = trace_flat(fn, avals, "scan_xs_work", parent=EVAL)
        env = dict(zip(ir.invars, args))
        env.update(zip(ir.constvars, ir.constvars))
        self.constvars += ir.constvars
        self.consts += ir.consts
        for e in ir.eqns:
            self.copy(e, env)
        return [env[v] if type(v) is Var else v for v in ir.outvars]


class _Evaluator:
    """``_Emitter``'s interface, computing at once on raw buffers with the primitives'
    impls (as eager calls do) instead of recording equations."""

    def __call__(self, prim, *ins, **params):
        return prim.impl(*ins, **params)

    def copy(self, e, env):
        out = e.prim.impl(*[env[v] if type(v) is Var else np.asarray(v.value)
                            for v in e.inputs], **e.params)
        env.update(zip(e.outputs, out if e.prim.multiple_results else [out]))

    def batched(self, fn, avals, args):
        token = CURRENT_TRACE.set(EVAL)  # whatever trace runs the scan's impl
        try:
            outs = fn(*[Array._wrap(a, v.weak_type) for a, v in zip(args, avals)])
        finally:
            CURRENT_TRACE.reset(token)
        return [o._value for o in outs]


class Unplanned(Exception):
    """Raised by ``ScanPlan.program`` and ``ScanPlan.run`` when the plan cannot run (a
    batching rule refused): the scan is then left as it is."""


# --- the pass ----------------------------------------------------------------------------------
# Both caches are keyed weakly by IR, so they live as long as the IRs they describe.

# IR -> {(relayout, closed): its planned IR, or None when planning changes nothing}. A
# planned IR is recorded as its own result, so planning it again (a backend compiling a
# sub-IR of an IR it planned) costs a lookup.
_PLANNED = weakref.WeakKeyDictionary()
# scan body -> the relayout hooks for which a scan running it needs no restructuring (the
# body of a restructured scan, or one whose plan moves nothing)
_FINAL = weakref.WeakKeyDictionary()


def _mark_final(body, relayout):
    s = _FINAL.get(body)
    if s is None:
        _FINAL[body] = {relayout}
    else:
        s.add(relayout)


def plan_scans(ir, *, relayout=None):
    """``ir`` with every ``scan`` equation (in it and in its sub-IRs) restructured as the
    module docstring says; ``ir`` itself when nothing moves. ``relayout``: the backend's
    hook for the operands of the equations left in a loop (None: none). Cached per IR
    and hook."""
    return _plan(ir, relayout, False)


def scan_plan_for(body, *, num_consts, num_carry, relayout=None):
    """The ``ScanPlan`` of a scan running ``body``, or None when there is nothing to move
    out of its loop (or ``body`` is already one the planner restructured)."""
    if relayout in _FINAL.get(body, ()):
        return None
    plan = ScanPlan(body, num_consts, num_carry, relayout)
    if plan.trivial:
        _mark_final(body, relayout)
        return None
    _mark_final(plan.body, relayout)
    return plan


def _plan(ir, relayout, closed):
    """``plan_scans``; ``closed``: ``ir`` is a scan body (run by a loop that binds no
    constants of its own), so restructurings that would give it constants are skipped."""
    key = (relayout, closed)
    memo = _PLANNED.get(ir)
    if memo is None:
        memo = _PLANNED[ir] = {}
    elif key in memo:
        out = memo[key]
        return ir if out is None else out
    out = _plan_ir(ir, relayout, closed)
    if out is not ir and config.values["jax_enable_checks"]:
        check_ir(out)
    memo[key] = None if out is ir else out
    if out is not ir:
        _PLANNED[out] = {key: None}
    return out


def _planned_params(e, relayout):
    """``e.params`` with each sub-IR planned (the same dict when none changes)."""
    new = None
    for k, p in e.params.items():
        if isinstance(p, IR):
            q = _plan(p, relayout, e.prim is scan_p)
        elif isinstance(p, (tuple, list)) and any(isinstance(x, IR) for x in p):
            q = type(p)(_plan(x, relayout, False) if isinstance(x, IR) else x for x in p)
            if all(a is b for a, b in zip(p, q)):
                continue
        else:
            continue
        if q is not p:
            if new is None:
                new = dict(e.params)
            new[k] = q
    return e.params if new is None else new


def _plan_ir(ir, relayout, closed):
    if not any(any(sub_irs(e.params)) for e in ir.eqns):
        return ir
    eqns, subst, constvars, consts, changed = [], {}, [], [], False
    for e in ir.eqns:
        ins = e.inputs
        if subst:
            ins = [subst.get(v, v) if type(v) is Var else v for v in ins]
            if all(a is b for a, b in zip(ins, e.inputs)):
                ins = e.inputs
        params = _planned_params(e, relayout)
        if ins is not e.inputs or params is not e.params:
            e, changed = Eqn(e.prim, list(ins), e.outputs, params, e.source), True
        if e.prim is scan_p:
            frag = _restructured(e, relayout)
            if frag is not None and not (closed and frag.constvars):
                where = dict(zip(frag.invars, e.inputs))
                for f in frag.eqns:
                    eqns.append(Eqn(f.prim, [where.get(v, v) if type(v) is Var else v
                                             for v in f.inputs], f.outputs, f.params, f.source))
                for o, v in zip(e.outputs, frag.outvars):
                    subst[o] = where.get(v, v) if type(v) is Var else v
                constvars += frag.constvars
                consts += frag.consts
                changed = True
                continue
        eqns.append(e)
    if not changed:
        return ir
    outvars = [subst.get(v, v) if type(v) is Var else v for v in ir.outvars]
    return IR(ir.invars, outvars, eqns, list(ir.constvars) + constvars,
              list(ir.consts) + consts)


def _restructured(e, relayout):
    """The equations replacing the scan equation ``e``: an IR taking ``e``'s inputs and
    returning its outputs, or None when the loop stays as it is."""
    p = e.params
    body = p["body"]
    plan = None if p["length"] == 0 else scan_plan_for(
        body, num_consts=p["num_consts"], num_carry=p["num_carry"], relayout=relayout)
    if plan is None:
        return None
    try:
        frag = plan.program(p["length"], p["reverse"], p["unroll"],
                            [v.aval for v in e.inputs], e.source)
    except Unplanned:
        _mark_final(body, relayout)
        return None
    if [v.aval for v in frag.outvars] != [v.aval for v in e.outputs]:
        return None  # pragma: no cover - the plan keeps every output's type
    return frag
