"""Loop restructuring: what a scan body need not do on every step.

Every scan is bound through ``loops._bind_scan``, which moves work out of the loop before the
``scan`` primitive is bound (on the current trace, so ``make_ir`` shows the result and
every transformation sees ordinary equations):

* loop-invariant code motion: equations that read only the constants (and literals) run
  once before the loop and become constants of the body; a ``dot_general`` operand that
  is loop-invariant but that the matmul would read through a transposed view is
  transposed once there instead (the loop then multiplies contiguous operands);
* per-step equations that read only constants and ``xs`` run once before the loop,
  batched over the scan axis (one big matmul instead of ``length`` small ones), and
  their stacked results become new ``xs``;
* accumulator carries (``acc = acc + c`` where ``acc`` is used nowhere else, e.g. the
  weight cotangents of a transposed scan) become stacked outputs summed after the loop;
  a ``dot_general`` (or ``transpose``/``reduce_sum``) that feeds only such a sum is
  done after the loop too, contracting over the scan axis as well (one matmul over
  ``length * batch`` rows), so the loop only stacks its per-step operands.

The results are those of the loop up to the order of floating-point sums."""
from __future__ import annotations

from ...core.ir import IR, Eqn, Var, Literal, dce, eval_ir, has_effects, sub_irs
from ...core.primitive import ShapeDtypeStruct
from ...errors import ShapeError
from ..elementwise import add_p
from ..linalg_prims import _free, dot_general_p
from ..reduction import reduce_sum_p
from ..shape import transpose_p
from .common import _batch_flat, _used_invars


def _is_invariant(v, inv):
    return type(v) is Literal or v in inv


def _relayout(e, inv, inv_eqns):
    """``e`` (a loop ``dot_general``) with each loop-invariant operand that its matmul
    would read transposed replaced by a transposed copy made before the loop."""
    (lc, rc), (lb, rb) = e.params["dimension_numbers"]
    ins, dn = list(e.inputs), [[list(lc), list(rc)], [list(lb), list(rb)]]
    changed = False
    for side in (0, 1):
        v = ins[side]
        if type(v) is Literal or v not in inv or len(v.aval.shape) < 2:
            continue
        c, b = dn[0][side], dn[1][side]
        f = _free(len(v.aval.shape), c, b)
        order = b + f + c if side == 0 else b + c + f
        if order == list(range(len(order))):
            continue
        where = {d: i for i, d in enumerate(order)}
        w = Var(ShapeDtypeStruct(tuple(v.aval.shape[d] for d in order), v.aval.dtype,
                                 v.aval.weak_type))
        inv_eqns.append(Eqn(transpose_p, [v], [w], {"permutation": tuple(order)},
                            e.source))
        inv.add(w)
        ins[side] = w
        dn[0][side] = [where[d] for d in c]
        dn[1][side] = [where[d] for d in b]
        changed = True
    if not changed:
        return e
    params = dict(e.params, dimension_numbers=((tuple(dn[0][0]), tuple(dn[0][1])),
                                               (tuple(dn[1][0]), tuple(dn[1][1]))))
    return Eqn(e.prim, ins, e.outputs, params, e.source)


def _batchable(e):
    return e.prim.batch is not None and not any(sub_irs(e.params)) and not has_effects(e)


class ScanPlan:
    """How to run one scan with its loop-invariant, xs-only and accumulated work done
    outside the loop (see the module docstring)."""

    def __init__(self, body, nc, nk):
        C, K, X = body.invars[:nc], body.invars[nc:nc + nk], body.invars[nc + nk:]
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
                if e.prim is dot_general_p:
                    e = _relayout(e, inv, inv_eqns)
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

    def run(self, scan_p, consts, init, xs, length, reverse, unroll):
        """Bind ``scan_p`` (the ``scan`` primitive) for the restructured loop, with the work
        moved out of it before and after; the outputs are the original scan's."""
        env = dict(zip(self.C, consts))
        if self.inv_ir.eqns or self.inv_out:
            env.update(zip(self.inv_out, eval_ir(self.inv_ir, *consts)))
        stk = dict(zip(self.X, xs))
        if self.pre_out:
            vals = [env[v] for v in self.pre_c] + [stk[v] for v in self.pre_x]
            dims = [None] * len(self.pre_c) + [0] * len(self.pre_x)
            try:
                outs, odims = _batch_flat(lambda *a: eval_ir(self.pre_ir, *a), vals, dims,
                                          length, force=[True] * len(self.pre_out))
            except (NotImplementedError, TypeError, ShapeError) as err:
                raise Unplanned from err  # a batching rule that cannot: run it per step
            for v, o, d in zip(self.pre_out, outs, odims):
                if d != 0:
                    perm = (d,) + tuple(i for i in range(o.ndim) if i != d)
                    o = transpose_p.bind(o, permutation=perm)
                stk[v] = o
        nk = sum(self.k_keep)
        outs = scan_p.bind(*[env[v] for v in self.c_in],
                           *[k for k, m in zip(init, self.k_keep) if m],
                           *[stk[v] for v in self.x_in], body=self.body,
                           num_consts=len(self.c_in), num_carry=nk, length=length,
                           reverse=reverse, unroll=unroll)
        carries, ys, extra = outs[:nk], outs[nk:nk + self.n_y], outs[nk + self.n_y:]
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
            s = self._eval(recipe, env, stk)
            res.append(add_p.bind(init[k], s) if acc_first else add_p.bind(s, init[k]))
        return res + list(ys)

    def _eval(self, r, env, stk):
        kind = r[0]
        if kind == "sum":
            return reduce_sum_p.bind(stk[r[1]], axes=(0,))
        if kind == "T":
            return transpose_p.bind(self._eval(r[2], env, stk), permutation=r[1])
        if kind == "rsum":
            return reduce_sum_p.bind(stk[r[2]], axes=(0,) + tuple(a + 1 for a in r[1]))
        params = r[1]
        if kind == "dot":
            (lc, rc), (lb, rb) = params["dimension_numbers"]

            def up(ds):
                return tuple(d + 1 for d in ds)
            dn = (((0,) + up(lc), (0,) + up(rc)), (up(lb), up(rb)))
            return dot_general_p.bind(stk[r[2]], stk[r[3]], **dict(params, dimension_numbers=dn))
        s, w = self._eval(r[3], env, stk), env[r[4]]
        return dot_general_p.bind(*((w, s) if r[2] == 1 else (s, w)), **params)


class Unplanned(Exception):
    """Raised by ``ScanPlan.run`` when the plan cannot run (a batching rule refused): the
    scan is then bound as it is."""
