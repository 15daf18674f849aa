"""Control flow as primitives holding sub-IRs: cond, switch, while_loop, fori_loop, scan, map.

Each construct traces its Python functions into closed IRs (no constants of their own:
values they close over, concrete arrays or tracers of enclosing transformations, become
leading operands of the primitive), and binds one primitive that carries them:

* ``cond``: operands ``index, *ops``; param ``branches`` (one IR per branch, each taking
  ``ops``). The impl runs the chosen branch; ``cond``/``switch`` with a concrete index
  and no enclosing trace just call the chosen Python function.
* ``while``: operands ``*cond_consts, *body_consts, *carry``; params ``cond_ir``,
  ``body_ir``, ``cond_nconsts``, ``body_nconsts``.
* ``scan``: operands ``*consts, *init, *xs``; params ``body`` (``consts, carry, x ->
  carry, y``), ``num_consts``, ``num_carry``, ``length``, ``reverse``, ``unroll``.

Rules. jvp: ``scan`` and ``cond`` linearize their bodies: a forward primitive computes
the primal outputs and the residuals (a scan stacks per-iteration residuals like ys;
residuals that are loop-invariant or an ``xs`` slice are not stacked), and a second,
linear one maps tangents, so reverse mode transposes only the linear one (a reverse
scan of the transposed body, a cond of transposed branches). ``while`` differentiates
in forward mode only (its trip count is unknown; use ``scan`` or ``fori_loop`` with
static bounds for reverse mode). vmap: a batched ``cond`` index becomes a select of
every branch's outputs; a batched ``while`` predicate loops until every lane is done,
freezing finished lanes with a select. jit: the impls run compiled bodies (one
generated NumPy function per body, a Python loop writing ys into preallocated arrays).
DCE: unused outputs of ``scan``/``cond`` are dropped, with what only they needed
inside the bodies.
"""
from __future__ import annotations

import builtins
import weakref

import numpy as np

from .. import tree_util
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..core.ir import IR, Eqn, Var, Literal, dce, eval_ir, has_effects, sub_irs
from ..core.backend import apply_ir, backend_for
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..core.trace import get_trace, trace_context
from ..core.tracing import IRTrace, IRTracer, trace_flat
from ..errors import ShapeError

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


# --- helpers ----------------------------------------------------------------------------------

def _strong(aval):
    return ShapeDtypeStruct(aval.shape, aval.dtype, aval.weak_type)


def _closed(fun, in_avals, name):
    """Trace ``fun(*tracers) -> list`` into an IR without constants: (ir, consts), where
    the IR takes ``consts + inputs``."""
    return trace_flat(fun, in_avals, name).hoist_consts()


def _compiled(ir, values):
    """``ir``'s compiled function on the backend holding ``values`` (cached by it)."""
    return backend_for(values).executable(ir).fn


def _zeros(aval):
    from .ops import full
    return full(aval.shape, 0, aval.dtype)


def _jvp_flat(fn, primals, tangents):
    """``fn``'s outputs and their tangents (None: symbolic zero)."""
    from ..transforms.jvp import JVPTrace, JVPTracer
    trace = JVPTrace(get_trace())
    with trace_context(trace):
        ins = [p if t is None else JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        outs = fn(*ins)
        pairs = [trace.lift(o if isinstance(o, Array) else to_array(o), "output") for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def _batch_flat(fn, vals, dims, size, force=None):
    """``fn`` vmapped: (outputs, their batch dims, 0 or None); ``force[k]``: batch output
    ``k`` at 0 even when it does not vary."""
    from ..transforms.vmap import BatchTrace, BatchTracer, _full
    trace = BatchTrace(get_trace(), size)
    with trace_context(trace):
        ins = [v if d is None else BatchTracer(trace, v, d) for v, d in zip(vals, dims)]
        outs = fn(*ins)
        lifted = [trace.lift(o if isinstance(o, Array) else to_array(o), "output")
                  for o in outs]
    res, rdims = [], []
    for k, (v, d) in enumerate(lifted):
        if d is None and force is not None and force[k]:
            v, d = _full(v, None, size, v.shape), 0
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
    from ..transforms.vjp import linearize_flat
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


def _check_pe(name, values):
    """while_loop under reverse mode: the clear error (its trip count is not known)."""
    from ..transforms.vjp import PartialIRTrace
    t = get_trace()
    if isinstance(t, PartialIRTrace) and any(
            isinstance(v, IRTracer) and v._trace is t for v in values):
        raise TypeError(
            f"{name}: reverse-mode differentiation (grad, vjp, jacrev) of a while_loop is "
            "not supported, because its trip count is only known at run time and the "
            "values of every iteration would have to be saved. Use fnx.lax.scan, or "
            "fnx.lax.fori_loop with concrete (Python int) bounds, which differentiate in "
            "reverse mode; forward mode (fnx.jvp, jacfwd) works through while_loop.")


def _describe_aval(a):
    return f"{dtypes.short_name(a.dtype)}{list(a.shape)}{' (weak)' if a.weak_type else ''}"


def _fun_name(f):
    return getattr(f, "__name__", type(f).__name__)


# === cond / switch ============================================================================

def _cond_shape(index, *ops, branches):
    if tuple(index.shape) != () or index.dtype.kind not in "iu":
        raise ShapeError(f"cond: the branch index must be an integer scalar, got "
                         f"{_describe_aval(index)}")
    want = branches[0].in_avals
    got = [ShapeDtypeStruct(o.shape, o.dtype, o.weak_type) for o in ops]
    if [(a.shape, a.dtype) for a in got] != [(a.shape, a.dtype) for a in want]:
        raise ShapeError(f"cond: operands {[_describe_aval(a) for a in got]} do not match "
                         f"the branches' inputs {[_describe_aval(a) for a in want]}")
    return list(branches[0].out_avals)


def _cond_impl(index, *ops, branches):
    i = builtins.min(builtins.max(int(index), 0), len(branches) - 1)
    return list(apply_ir(branches[i], *ops))


cond_p = Primitive("cond", shape_rule=_cond_shape, impl=_cond_impl, multiple_results=True)


def _bind_cond(index, fns, ops, name="cond"):
    """Trace each ``fns[i](*ops) -> list`` and bind one ``cond`` (constants joined)."""
    avals = [_strong(o.aval) for o in ops]
    traced = [_closed(f, avals, f"{name}_branch{i}") for i, f in enumerate(fns)]
    return _bind_joined(index, traced, ops)


def _bind_joined(index, traced, ops):
    """Bind ``cond`` for closed branch IRs ``traced`` (``(ir, consts)``, each taking its
    own consts first): each branch is rewritten to take everyone's consts."""
    out = []
    for i, (ir, cs) in enumerate(traced):
        k = len(cs)
        before = [Var(c.aval) for j in range(i) for c in traced[j][1]]
        after = [Var(c.aval) for j in range(i + 1, len(traced)) for c in traced[j][1]]
        out.append(IR(before + ir.invars[:k] + after + ir.invars[k:], ir.outvars, ir.eqns))
    consts = [c for _, cs in traced for c in cs]
    return cond_p.bind(index, *consts, *ops, branches=tuple(out))


def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    tans = tangents[1:]
    mask = [t is not None for t in tans]
    n_out = len(branches[0].outvars)
    avals = [_strong(o.aval) for o in ops]
    fwd, lins, zeros_out = [], [], []
    for i, br in enumerate(branches):
        fun, box = _linearize_parts(br, mask)
        fir, fconsts = _closed(fun, avals, f"cond_jvp{i}")
        fwd.append((fir, fconsts))
        lins.append(box["lin"])
        zeros_out.append(box["zero"])
    out_avals = branches[0].out_avals
    out_nz = [dtypes.is_inexact(a.dtype) and not all(z[k] for z in zeros_out)
              for k, a in enumerate(out_avals)]
    res_avals = [[v.aval for v in lin.constvars] for lin in lins]

    def fwd_fn(i):
        fir, fconsts = fwd[i]

        def f(*xs):
            o = eval_ir(fir, *fconsts, *xs)
            res = []
            for j, ra in enumerate(res_avals):
                res += o[n_out:] if j == i else [_zeros(a) for a in ra]
            return o[:n_out] + res
        return f

    outs = _bind_cond(index, [fwd_fn(i) for i in range(len(branches))], list(ops), "cond_fwd")
    primal_out, residuals = outs[:n_out], outs[n_out:]
    if not any(out_nz):
        return primal_out, [None] * n_out
    offsets = np.cumsum([0] + [len(r) for r in res_avals])
    nres = int(offsets[-1])

    def lin_fn(i):
        lin, lo, hi = lins[i], int(offsets[i]), int(offsets[i + 1])

        def f(*a):
            o = eval_ir(lin, *a[nres:], consts=list(a[lo:hi]))
            return [t for t, nz in zip(o, out_nz) if nz]
        return f

    t_in = [t for t in tans if t is not None]
    t_out = iter(_bind_cond(index, [lin_fn(i) for i in range(len(branches))],
                            list(residuals) + t_in, "cond_lin"))
    return primal_out, [next(t_out) if nz else None for nz in out_nz]


cond_p.jvp = _cond_jvp


def _cond_transpose(cts, index, *args, branches):
    from ..transforms.vjp import backward_pass, is_linear
    lin = [is_linear(a) for a in args]
    res = [a for a, m in zip(args, lin) if not m]
    present = [c is not None for c in cts]
    lin_avals = [a.aval for a, m in zip(args, lin) if m]

    def tr_fn(br):
        def f(*a):
            r, c = a[:len(res)], iter(a[len(res):])
            ir = IR([v for v, m in zip(br.invars, lin) if m], br.outvars, br.eqns,
                    [v for v, m in zip(br.invars, lin) if not m], list(r))
            cin = backward_pass(ir, [next(c) if p else None for p in present])
            return [_zeros(av) if ct is None else ct for ct, av in zip(cin, lin_avals)]
        return f

    ct_vals = [c for c in cts if c is not None]
    if not ct_vals or not lin_avals:
        return [None] * (1 + len(args))
    outs = iter(_bind_cond(index, [tr_fn(b) for b in branches], res + ct_vals, "cond_T"))
    return [None] + [next(outs) if m else None for m in lin]


cond_p.transpose = _cond_transpose


def _cond_batch(vals, dims, size, *, branches):
    from . import ops as L
    index, ops = vals[0], vals[1:]
    odims = dims[1:]
    if dims[0] is None:
        # the same branch for every lane: the branches vmapped
        def fn(br):
            return lambda *xs: _batch_flat(lambda *a: eval_ir(br, *a), xs, odims, size,
                                           force=[True] * len(br.outvars))[0]
        outs = _bind_cond(index, [fn(b) for b in branches], list(ops), "cond_vmap")
        return outs, [0] * len(outs)
    # a batched index: every branch runs, a select picks each lane's outputs
    n = len(branches)
    idx = L.clamp(np.int32(0), L.convert_element_type(index, np.int32), np.int32(n - 1))
    if n == 2:
        idx = L.convert_element_type(idx, np.bool_)
    per = [_batch_flat(lambda *a, br=br: eval_ir(br, *a), ops, odims, size,
                       force=[True] * len(br.outvars))[0] for br in branches]
    outs = []
    for k in range(len(per[0])):
        cases = [p[k] for p in per]
        which = L.broadcast_in_dim(idx, tuple(cases[0].shape), (0,))
        outs.append(L.select_n(which, *cases))
    return outs, [0] * len(outs)


cond_p.batch = _cond_batch


def _cond_dce(eqn, used):
    if not any(used):
        return None, []
    new, need = [], set()
    for br in eqn.params["branches"]:
        d = dce(IR(br.invars, [v for v, u in zip(br.outvars, used) if u], br.eqns))
        new.append(d)
        need |= _used_invars(d)
    keep = [any(br.invars[k] in need for br in new) for k in range(len(eqn.inputs) - 1)]
    brs = tuple(IR([v for v, m in zip(br.invars, keep) if m], br.outvars, br.eqns)
                for br in new)
    inputs = [eqn.inputs[0]] + [v for v, m in zip(eqn.inputs[1:], keep) if m]
    outputs = [v for v, u in zip(eqn.outputs, used) if u]
    return Eqn(cond_p, inputs, outputs, {"branches": brs}, eqn.source), inputs


def _used_invars(ir):
    used = {v for e in ir.eqns for v in e.inputs if type(v) is Var}
    used |= {v for v in ir.outvars if type(v) is Var}
    return used


cond_p.dce_rule = _cond_dce


def _branch_outputs_check(name, branch_names, trees, out_avals):
    for j in range(1, len(trees)):
        if trees[j] != trees[0]:
            raise TypeError(f"{name}: {branch_names[0]} and {branch_names[j]} must return the "
                            f"same pytree structure; got {trees[0]} and {trees[j]}")
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(
        tree_util.tree_unflatten(trees[0], list(range(trees[0].num_leaves))))]
    for j in range(1, len(trees)):
        for k, (a, b) in enumerate(zip(out_avals[0], out_avals[j])):
            if a.shape != b.shape or a.dtype != b.dtype:
                where = f"output{paths[k]}" if paths[k] else "the output"
                raise TypeError(
                    f"{name}: {where} differs between branches: {branch_names[0]} returns "
                    f"{_describe_aval(a)} but {branch_names[j]} returns {_describe_aval(b)}. "
                    "Every branch must return arrays of the same shapes and dtypes "
                    "(convert with .astype(...) or broadcast one of them).")


def _cond_general(name, index, branches, operands, labels=None):
    ops_leaves, ops_tree = tree_util.tree_flatten(tuple(operands))
    ops_leaves = [to_array(x) for x in ops_leaves]
    avals = [_strong(o.aval) for o in ops_leaves]
    trees, irs, names = [], [], []
    for i, f in enumerate(branches):
        box = [None]

        def flat(*xs, f=f, box=box):
            out = f(*tree_util.tree_unflatten(ops_tree, list(xs)))
            leaves, box[0] = tree_util.tree_flatten(out)
            return [to_array(x) for x in leaves]
        irs.append(_closed(flat, avals, f"{name}_branch{i}"))
        trees.append(box[0])
        names.append(labels[i] if labels else f"branch {i} ({_fun_name(f)})")
    _branch_outputs_check(name, names, trees, [ir.out_avals for ir, _ in irs])
    # weak types may differ between branches: the strong type wins
    out_avals = irs[0][0].out_avals
    weak = [builtins.all(ir.out_avals[k].weak_type for ir, _ in irs)
            for k in range(len(out_avals))]
    if not builtins.all(ir.out_avals[k].weak_type == weak[k] for ir, _ in irs
                        for k in range(len(out_avals))):
        fixed = []
        for ir, cs in irs:
            def f(*xs, ir=ir, cs=cs):
                from .ops import convert_element_type
                o = eval_ir(ir, *cs, *xs)
                return [convert_element_type(v, v.dtype, weak_type=w) for v, w in zip(o, weak)]
            fixed.append(_closed(f, avals, f"{name}_branch"))
        irs = fixed
    outs = _bind_joined(index, irs, ops_leaves)
    return tree_util.tree_unflatten(trees[0], outs)


_EAGER_CHECKED = {}   # (branches, operand types) whose outputs were checked against each other


def _run_chosen(name, k, branches, operands, labels=None):
    """Eagerly (concrete index): run branch ``k`` only. The other branches are traced
    abstractly, once per branch functions and operand types, so a branch mismatch is
    reported eagerly exactly as under ``jit``."""
    out = tree_util.tree_map(to_array, branches[k](*operands))  # arrays, as under a trace
    if len(branches) == 1:
        return out
    leaves, tree = tree_util.tree_flatten(tuple(operands))
    key = (branches, tree, tuple((np.shape(x), np.result_type(x)) for x in leaves))
    if key in _EAGER_CHECKED:
        return out
    from ..core.tracing import eval_shape
    trees, avals = [], []
    for i, f in enumerate(branches):
        res = out if i == k else eval_shape(f, *operands)
        res_leaves, res_tree = tree_util.tree_flatten(res)
        trees.append(res_tree)
        avals.append([v if isinstance(v, ShapeDtypeStruct) else to_array(v).aval
                      for v in res_leaves])
    names = labels or [f"branch {i} ({_fun_name(f)})" for i, f in enumerate(branches)]
    _branch_outputs_check(name, names, trees, avals)
    if len(_EAGER_CHECKED) >= 256:
        _EAGER_CHECKED.clear()
    _EAGER_CHECKED[key] = True
    return out


def _direct_ok(x):
    """A concrete index with no enclosing IR trace: the chosen function just runs."""
    return not isinstance(x, Tracer) and not isinstance(get_trace(), IRTrace)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands) if pred else false_fun(*operands)``, as one primitive when
    ``pred`` is traced (both branches must return the same pytree of shapes/dtypes)."""
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun must be callable; the signature is "
                        "cond(pred, true_fun, false_fun, *operands)")
    p = to_array(pred)
    if p.shape != ():
        raise TypeError(f"cond: pred must be a scalar (a boolean or a number), got shape "
                        f"{p.shape}; reduce it (e.g. .any()) or use fnx.numpy.where for an "
                        "elementwise choice")
    labels = (f"false_fun ({_fun_name(false_fun)})", f"true_fun ({_fun_name(true_fun)})")
    if _direct_ok(p):
        return _run_chosen("cond", int(bool(p._concrete("cond"))), (false_fun, true_fun),
                           operands, labels)
    from .ops import convert_element_type, ne
    index = convert_element_type(ne(p, to_array(0, "pred").astype(p.dtype)), np.int32)
    return _cond_general("cond", index, (false_fun, true_fun), operands, labels)


def switch(index, branches, *operands):
    """``branches[clamp(index, 0, len(branches) - 1)](*operands)``."""
    branches = tuple(branches)
    if not branches:
        raise ValueError("switch: branches must hold at least one function")
    i = to_array(index)
    if i.shape != () or i.dtype.kind not in "iub":
        raise TypeError(f"switch: index must be an integer scalar, got "
                        f"{_describe_aval(i.aval)}")
    if _direct_ok(i):
        k = builtins.min(builtins.max(int(i._concrete("switch")), 0), len(branches) - 1)
        return _run_chosen("switch", k, branches, operands)
    if len(branches) == 1:
        return branches[0](*operands)
    from .ops import convert_element_type
    return _cond_general("switch", convert_element_type(i, np.int32), branches, operands)


# === while ====================================================================================

def _while_shape(*args, cond_ir, body_ir, cond_nconsts, body_nconsts):
    carry = args[cond_nconsts + body_nconsts:]
    got = [(tuple(a.shape), a.dtype) for a in carry]
    want = [(a.shape, a.dtype) for a in body_ir.out_avals]
    if got != want:
        raise ShapeError(f"while_loop: the carry {[_describe_aval(a) for a in carry]} does "
                         f"not match the body's output {body_ir.out_avals}")
    return [ShapeDtypeStruct(a.shape, a.dtype, c.weak_type)
            for a, c in zip(body_ir.out_avals, carry)]


def _while_impl(*args, cond_ir, body_ir, cond_nconsts, body_nconsts):
    cf = _compiled(cond_ir, args)
    bf = _compiled(body_ir, args)
    cc = args[:cond_nconsts]
    bc = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = tuple(args[cond_nconsts + body_nconsts:])
    while cf(*cc, *carry)[0]:
        carry = bf(*bc, *carry)
    return list(carry)


while_p = Primitive("while", shape_rule=_while_shape, impl=_while_impl, multiple_results=True)


def _bind_while(cond_fn, body_fn, cond_vals, body_vals, init, name="while"):
    carry_avals = [_strong(a.aval) for a in init]
    cir, cc = _closed(cond_fn, [_strong(a.aval) for a in cond_vals] + carry_avals, name + "_cond")
    bir, bc = _closed(body_fn, [_strong(a.aval) for a in body_vals] + carry_avals, name + "_body")
    return while_p.bind(*cc, *cond_vals, *bc, *body_vals, *init, cond_ir=cir, body_ir=bir,
                        cond_nconsts=len(cc) + len(cond_vals),
                        body_nconsts=len(bc) + len(body_vals))


def _while_split(args, cond_nconsts, body_nconsts):
    return (list(args[:cond_nconsts]), list(args[cond_nconsts:cond_nconsts + body_nconsts]),
            list(args[cond_nconsts + body_nconsts:]))


def _while_jvp(primals, tangents, *, cond_ir, body_ir, cond_nconsts, body_nconsts):
    _check_pe("while_loop", list(primals) + [t for t in tangents if t is not None])
    cc, bc, init = _while_split(primals, cond_nconsts, body_nconsts)
    _, tbc, tinit = _while_split(tangents, cond_nconsts, body_nconsts)
    bmask = [t is not None for t in tbc]
    cmask = [t is not None and dtypes.is_inexact(p.dtype) for p, t in zip(init, tinit)]
    carry_avals = [_strong(a.aval) for a in init]
    while True:  # which carries get a tangent: a fixpoint over the body
        def probe(*a):
            b, c = a[:len(bc)], a[len(bc):]
            _, ts = _jvp_flat(lambda *x: eval_ir(body_ir, *x), list(b) + list(c),
                              [_zeros(v.aval) if m else None for v, m in zip(b, bmask)]
                              + [_zeros(v.aval) if m else None for v, m in zip(c, cmask)])
            probe.nz = [t is not None for t in ts]
            return []
        trace_flat(probe, [_strong(a.aval) for a in bc] + carry_avals, "while_jvp_probe")
        new = [m or (n and dtypes.is_inexact(a.dtype))
               for m, n, a in zip(cmask, probe.nz, carry_avals)]
        if new == cmask:
            break
        cmask = new
    if not any(cmask):
        return while_p.bind(*primals, cond_ir=cond_ir, body_ir=body_ir,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts), \
            [None] * len(init)
    nb, nk = len(bc), len(init)
    tb_vals = [t for t in tbc if t is not None]
    tk_vals = [(t if t is not None else _zeros(p.aval)) for p, t, m in zip(init, tinit, cmask)
               if m]

    def cond_fn(*a):
        c, k = a[:cond_nconsts], a[cond_nconsts:cond_nconsts + nk]
        return eval_ir(cond_ir, *c, *k)

    def body_fn(*a):
        b, tb = a[:nb], iter(a[nb:nb + len(tb_vals)])
        k, tk = a[nb + len(tb_vals):nb + len(tb_vals) + nk], iter(a[nb + len(tb_vals) + nk:])
        ts = [next(tb) if m else None for m in bmask] + [next(tk) if m else None for m in cmask]
        outs, touts = _jvp_flat(lambda *x: eval_ir(body_ir, *x), list(b) + list(k), ts)
        touts = [(t if t is not None else _zeros(o.aval)) for o, t, m in zip(outs, touts, cmask)
                 if m]
        return list(outs) + touts

    res = _bind_while(cond_fn, body_fn, cc, bc + tb_vals, init + tk_vals, "while_jvp")
    tout = iter(res[nk:])
    return res[:nk], [next(tout) if m else None for m in cmask]


while_p.jvp = _while_jvp


def _while_batch(vals, dims, size, *, cond_ir, body_ir, cond_nconsts, body_nconsts):
    from . import ops as L
    from ..transforms.vmap import _full
    cc, bc, init = _while_split(vals, cond_nconsts, body_nconsts)
    ccd, bcd, kd = _while_split(dims, cond_nconsts, body_nconsts)
    kb = [d is not None for d in kd]

    def batched_avals(vs, ds):
        return [_batched_aval(_strong(v.aval) if d is None else
                              ShapeDtypeStruct(v.shape[1:], v.dtype, v.weak_type), d, size)
                for v, d in zip(vs, ds)]

    def probe(ir, consts, cdims, mask):
        """Which outputs of ``ir`` (body or cond) come out batched when the carry is
        batched where ``mask`` says."""
        box = {}

        def f(*a):
            c, k = a[:len(consts)], a[len(consts):]
            _, box["d"] = _batch_flat(lambda *x: eval_ir(ir, *x), list(c) + list(k),
                                      list(cdims) + [0 if m else None for m in mask], size)
            return []
        trace_flat(f, batched_avals(consts, cdims) + [
            _batched_aval(ShapeDtypeStruct(v.shape[1:] if d is not None else v.shape, v.dtype,
                                           v.weak_type), 0 if m else None, size)
            for v, d, m in zip(init, kd, kb)], "while_vmap_probe")
        return [d is not None for d in box["d"]]

    while True:
        new = [a or b for a, b in zip(kb, probe(body_ir, bc, bcd, kb))]
        if new == kb:
            break
        kb = new
    pred_batched = probe(cond_ir, cc, ccd, kb)[0]
    if pred_batched:
        kb = [True] * len(init)
    init = [_full(v, d, size, v.shape if d is None else v.shape[1:]) if m and d is None else v
            for v, d, m in zip(init, kd, kb)]
    kdims = [0 if m else None for m in kb]
    nc, nb = len(cc), len(bc)

    def cond_fn(*a):
        c, k = a[:nc], a[nc:]
        (p,), (d,) = _batch_flat(lambda *x: eval_ir(cond_ir, *x), list(c) + list(k),
                                 list(ccd) + kdims, size)
        return [L.reduce_or(p, (0,)) if d is not None else p]

    def body_fn(*a):
        c = a[:nc] if pred_batched else ()
        a = a[nc:] if pred_batched else a
        b, k = a[:nb], a[nb:]
        outs, _ = _batch_flat(lambda *x: eval_ir(body_ir, *x), list(b) + list(k),
                              list(bcd) + kdims, size, force=kb)
        if not pred_batched:
            return outs
        # lanes whose predicate is already false keep their carry
        (p,), _ = _batch_flat(lambda *x: eval_ir(cond_ir, *x), list(c) + list(k),
                              list(ccd) + kdims, size, force=[True])
        return [L.select_n(L.broadcast_in_dim(p, tuple(o.shape), (0,)), old, o)
                for o, old in zip(outs, k)]

    outs = _bind_while(cond_fn, body_fn, cc, (cc + bc) if pred_batched else bc, init,
                       "while_vmap")
    return outs, kdims


while_p.batch = _while_batch


def while_loop(cond_fun, body_fun, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val); return val`` as one
    primitive. Forward-mode differentiable; for reverse mode use ``scan`` or
    ``fori_loop`` with concrete bounds."""
    leaves, tree = tree_util.tree_flatten(init_val)
    leaves = [to_array(x) for x in leaves]
    avals = [_strong(a.aval) for a in leaves]

    def cond_flat(*xs):
        p = to_array(cond_fun(tree_util.tree_unflatten(tree, list(xs))))
        if p.shape != () or p.dtype.kind != "b":
            raise TypeError(f"while_loop: cond_fun ({_fun_name(cond_fun)}) must return a "
                            f"boolean scalar, got {_describe_aval(p.aval)}")
        return [p]

    out_box = [None]

    def body_flat(*xs):
        out = body_fun(tree_util.tree_unflatten(tree, list(xs)))
        out_leaves, out_box[0] = tree_util.tree_flatten(out)
        return _match_carry("while_loop", "body_fun", tree, avals, out_box[0],
                            [to_array(x) for x in out_leaves], promote, strong)

    promote, strong = {}, set()
    bir, bc = _closed(body_flat, avals, "while_body")
    if promote:
        _promoted(leaves, avals, promote)
        promote = None
        strong.clear()
        bir, bc = _closed(body_flat, avals, "while_body")
    cir, cc = _closed(cond_flat, avals, "while_cond")
    outs = while_p.bind(*cc, *bc, *leaves, cond_ir=cir, body_ir=bir, cond_nconsts=len(cc),
                        body_nconsts=len(bc))
    return tree_util.tree_unflatten(tree, _strengthened(outs, strong))


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _match_carry(name, fname, tree, avals, out_tree, outs, promote=None, strong=None):
    """The body's new carry, checked against the old one. A weakly typed initial carry
    that the body returns with another dtype (``0`` summed with float32 arrays) is noted in
    ``promote`` (the caller traces again with that type, as JAX does); one it returns with
    the same dtype, strongly typed (``0.0`` summed with float32 arrays), keeps its weak type
    inside the loop and is noted in ``strong`` (the loop's result is strongly typed: JAX's
    types). The output is converted to the carry's exact type."""
    from .ops import convert_element_type
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
    from .ops import convert_element_type
    outs = list(outs)
    for k in strong:
        outs[k] = convert_element_type(outs[k], outs[k].dtype, weak_type=False)
    return outs


def _promoted(leaves, avals, promote):
    """Initial carry leaves converted to the types the body gives them."""
    from .ops import convert_element_type
    for k, a in promote.items():
        leaves[k] = convert_element_type(leaves[k], a.dtype)
        avals[k] = a


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``.

    With concrete bounds (Python ints or concrete arrays) this is a ``scan`` (so it
    differentiates in reverse mode); with traced bounds, a ``while_loop``."""
    lo, hi = to_array(lower), to_array(upper)
    if lo.dtype.kind not in "iu" or hi.dtype.kind not in "iu":
        raise TypeError(f"fori_loop: lower and upper must be integers, got "
                        f"{_describe_aval(lo.aval)} and {_describe_aval(hi.aval)}")
    from .ops import add, convert_element_type, lt
    if lo.dtype == hi.dtype:
        dt = lo.dtype
    elif lo.weak_type != hi.weak_type:  # a Python int bound takes the other's dtype (JAX)
        dt = lo.dtype if hi.weak_type else hi.dtype
    else:
        dt = np.result_type(lo.dtype, hi.dtype)
    concrete = not isinstance(lo, Tracer) and not isinstance(hi, Tracer)
    if concrete:
        a, b = int(lo._concrete("fori_loop")), int(hi._concrete("fori_loop"))
        n = builtins.max(b - a, 0)
        # the index is a Python int's type (weakly typed default int), as in JAX, whatever
        # the bounds' dtypes: `x + i` keeps x's type
        i0 = to_array(a)

        def step(carry, _):
            i, v = carry
            return (add(i, _one_like(i)), body_fun(i, v)), None
        (_, out), _ = scan(step, (i0, init_val), None, length=n,
                           unroll=1 if unroll is None else unroll)
        return out

    def cond_fun(carry):
        return lt(carry[0], carry[1])

    def body(carry):
        i, u, v = carry
        return add(i, _one_like(i)), u, body_fun(i, v)
    if lo.dtype != hi.dtype:  # else each keeps its type (a Python int lower stays weak: JAX)
        lo, hi = convert_element_type(lo, dt), convert_element_type(hi, dt)
    _, _, out = while_loop(cond_fun, body, (lo, hi, init_val))
    return out


def _one_like(i):
    from .ops import convert_element_type
    return convert_element_type(to_array(1), i.dtype, weak_type=i.weak_type)


# === scan =====================================================================================

def _scan_shape(*args, body, num_consts, num_carry, length, reverse, unroll):
    n_in = len(body.invars)
    if len(args) != n_in:
        raise ShapeError(f"scan: {len(args)} operands for a body of {n_in} inputs")
    want = body.in_avals
    for k, (a, w) in enumerate(zip(args, want)):
        shape = tuple(a.shape)
        if k >= num_consts + num_carry:
            if not shape or shape[0] != length:
                raise ShapeError(f"scan: xs operand {k - num_consts - num_carry} has shape "
                                 f"{shape}; its leading axis must be the length {length}")
            shape = shape[1:]
        if shape != w.shape or a.dtype != w.dtype:
            raise ShapeError(f"scan: operand {k} is {_describe_aval(a)} but the body takes "
                             f"{_describe_aval(w)}")
    outs = body.out_avals
    carry = [ShapeDtypeStruct(o.shape, o.dtype, args[num_consts + i].weak_type)
             for i, o in enumerate(outs[:num_carry])]
    ys = [ShapeDtypeStruct((length,) + o.shape, o.dtype, o.weak_type) for o in outs[num_carry:]]
    return carry + ys


_RUNNERS = weakref.WeakKeyDictionary()


def _scan_runner(body, num_consts, num_carry, length, reverse):
    """The loop as one generated function: the body's lines inlined in a Python ``for``
    (no call per step; constants and primitives bound to locals and globals once), ys
    written into preallocated arrays (a plain ufunc computing a y writes it in place
    with ``out=``)."""
    import itertools
    from ..backends.numpy_codegen import emit_eqns, quiet_lines
    key = (num_consts, num_carry, length, reverse)
    per = _RUNNERS.get(body)
    if per is None:
        per = _RUNNERS[body] = {}
    run = per.get(key)
    if run is not None:
        return run
    nc, nk = num_consts, num_carry
    n_x = len(body.invars) - nc - nk
    y_avals = body.out_avals[nk:]
    cs = [f"c{i}" for i in range(nc)]
    ks = [f"k{i}" for i in range(nk)]
    xs = [f"x{i}" for i in range(n_x)]
    glb = {"np": np}
    names = dict(zip(body.invars[:nc + nk], cs + ks))
    used = {v for e in body.eqns for v in e.inputs} | set(body.outvars)
    pre = []  # per-step lines before the body: the xs slices it reads
    for i, v in enumerate(body.invars[nc + nk:]):
        names[v] = f"xt{i}"
        if v in used:
            pre.append(f"xt{i} = x{i}[t]")
    computed = {v for e in body.eqns for v in e.outputs}
    out_into = {}
    for j, (v, a) in enumerate(zip(body.outvars[nk:], y_avals)):
        if type(v) is Var and v in computed and v not in out_into and a.shape:
            out_into[v] = f"y{j}[t]"
    fresh = (f"v{i}" for i in itertools.count())
    lines, quiet, ref, written = emit_eqns(body, glb, names, fresh, in_loop=True,
                                           out_into=out_into)
    step = list(pre) + lines
    for j, v in enumerate(body.outvars[nk:]):
        if not (v in written and out_into.get(v) == f"y{j}[t]"):
            step.append(f"y{j}[t] = {ref(v)}")
    if nk:
        step.append(f"{', '.join(ks)}{',' if nk == 1 else ''} = "
                    f"{', '.join(ref(v) for v in body.outvars[:nk])}"
                    f"{',' if nk == 1 else ''}")
    if not step:
        step = ["pass"]
    inner = []
    for i, v in enumerate(body.invars[:nc]):
        if len(v.aval.shape) >= 2:  # read on every step: BLAS wants contiguous operands
            inner.append(f"c{i} = np.ascontiguousarray(c{i})")
    for j, a in enumerate(y_avals):
        glb[f"_dt{j}"] = a.dtype
        inner.append(f"y{j} = np.empty({(length,) + tuple(a.shape)!r}, _dt{j})")
    rng = f"range({length - 1}, -1, -1)" if reverse else f"range({length})"
    inner.append(f"for t in {rng}:")
    inner += ["    " + ln for ln in step]
    # a carry written into a ys buffer is copied out, so no two outputs share memory
    rets = [f"np.array({k})" if body.outvars[i] in written else f"np.asarray({k})"
            for i, k in enumerate(ks)] + [f"y{j}" for j in range(len(y_avals))]
    inner.append(f"return [{', '.join(rets)}]")
    if quiet:
        inner = quiet_lines(inner, glb)
    src = f"def run({', '.join(cs + ks + xs)}):\n" + "".join(f"    {ln}\n" for ln in inner)
    exec(compile(src, "<fnx scan>", "exec"), glb)
    run = per[key] = glb["run"]
    run.source = src
    return run


def _scan_impl(*args, body, num_consts, num_carry, length, reverse, unroll):
    return _scan_runner(body, num_consts, num_carry, length, reverse)(*args)


scan_p = Primitive("scan", shape_rule=_scan_shape, impl=_scan_impl, multiple_results=True)


def _x_aval(a):
    return ShapeDtypeStruct(tuple(a.shape)[1:], a.dtype, a.weak_type)


def _scan_jvp(primals, tangents, *, body, num_consts, num_carry, length, reverse, unroll):
    nc, nk = num_consts, num_carry
    consts, init, xs = primals[:nc], primals[nc:nc + nk], primals[nc + nk:]
    tc, tk, tx = tangents[:nc], tangents[nc:nc + nk], tangents[nc + nk:]
    cmask = [t is not None for t in tc]
    xmask = [t is not None for t in tx]
    kmask = [t is not None and dtypes.is_inexact(p.dtype) for p, t in zip(init, tk)]
    in_avals = ([_strong(c.aval) for c in consts] + [_strong(k.aval) for k in init]
                + [_x_aval(x.aval) for x in xs])
    n_out = len(body.outvars)
    while True:
        fun, box = _linearize_parts(body, cmask + kmask + xmask)
        fir, fconsts = _closed(fun, in_avals, "scan_fwd")
        zero = box["zero"]
        new = [m or (not zero[i] and dtypes.is_inexact(init[i].dtype))
               for i, m in enumerate(kmask)]
        if new == kmask:
            break
        kmask = new
    lin = box["lin"]
    ymask = [not z and dtypes.is_inexact(a.dtype)
             for z, a in zip(zero[nk:], body.out_avals[nk:])]
    # classify the residuals: loop-invariant (a constant), an xs slice, or stacked
    nh = len(fconsts)
    pos = {v: i for i, v in enumerate(fir.invars)}
    res_vars = fir.outvars[n_out:]
    inv_vals, inv_vars, xs_vals, xs_vars, st_idx, st_vars = [], [], [], [], [], []
    for r, lv in zip(res_vars, lin.constvars):
        p = pos.get(r) if type(r) is Var else None
        if type(r) is Literal:
            inv_vals.append(Array._wrap(np.asarray(r.value, r.aval.dtype), r.aval.weak_type))
            inv_vars.append(lv)
        elif p is not None and p < nh + nc:
            inv_vals.append(fconsts[p] if p < nh else consts[p - nh])
            inv_vars.append(lv)
        elif p is not None and p >= nh + nc + nk:
            xs_vals.append(xs[p - nh - nc - nk])
            xs_vars.append(lv)
        else:
            st_idx.append(len(st_vars))
            st_vars.append((r, lv))
    fwd_out = fir.outvars[:n_out] + [r for r, _ in st_vars]
    fwd_ir = dce(IR(fir.invars, fwd_out, fir.eqns))
    outs = _bind_scan(list(fconsts) + list(consts), init, xs, body=fwd_ir, length=length,
                      reverse=reverse, unroll=unroll)
    primal_out, stacked = outs[:n_out], outs[n_out:]
    if not any(kmask) and not any(ymask):
        return primal_out, [None] * n_out
    n_tc, n_tk = sum(cmask), sum(kmask)
    t_in = lin.invars
    lin_out = [v for v, m in zip(lin.outvars[:nk], kmask) if m] + \
              [v for v, m in zip(lin.outvars[nk:], ymask) if m]
    lin_ir = IR(inv_vars + t_in[:n_tc] + t_in[n_tc:n_tc + n_tk]
                + [lv for _, lv in st_vars] + xs_vars + t_in[n_tc + n_tk:],
                lin_out, lin.eqns)
    t_k0 = [t if t is not None else _zeros(p.aval) for p, t, m in zip(init, tk, kmask) if m]
    touts = _bind_scan(list(inv_vals) + [t for t in tc if t is not None], t_k0,
                       list(stacked) + list(xs_vals) + [t for t in tx if t is not None],
                       body=lin_ir, length=length, reverse=reverse, unroll=unroll)
    it = iter(touts)
    return primal_out, [next(it) if m else None for m in kmask + ymask]


scan_p.jvp = _scan_jvp


def _scan_transpose(cts, *args, body, num_consts, num_carry, length, reverse, unroll):
    """Transpose a scan linear in its carries and in the consts/xs that arrive undefined:
    a scan the other way whose body is the transposed body; the cotangents of the
    linear consts are summed in extra carries."""
    from ..transforms.vjp import backward_pass, is_linear
    nc, nk = num_consts, num_carry
    consts, init, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    clin = [is_linear(a) for a in consts]
    xlin = [is_linear(a) for a in xs]
    res_c = [a for a, m in zip(consts, clin) if not m]
    res_x = [a for a, m in zip(xs, xlin) if not m]
    c_avals = [a.aval for a, m in zip(consts, clin) if m]
    k_avals = [_strong(a.aval) for a in init]
    y_avals = body.out_avals[nk:]
    ct_k = [(_zeros(a) if c is None else c) for c, a in zip(cts[:nk], k_avals)]
    ypresent = [c is not None for c in cts[nk:]]
    ct_y = [c for c in cts[nk:] if c is not None]
    cv, kv, xv = body.invars[:nc], body.invars[nc:nc + nk], body.invars[nc + nk:]
    nrc, nlc, nrx = len(res_c), len(c_avals), len(res_x)

    def tbody(*a):
        rc, acc = a[:nrc], a[nrc:nrc + nlc]
        ck = a[nrc + nlc:nrc + nlc + nk]
        rx = a[nrc + nlc + nk:nrc + nlc + nk + nrx]
        cy = iter(a[nrc + nlc + nk + nrx:])
        ir = IR([v for v, m in zip(cv, clin) if m] + list(kv) + [v for v, m in zip(xv, xlin) if m],
                body.outvars, body.eqns,
                [v for v, m in zip(cv, clin) if not m] + [v for v, m in zip(xv, xlin) if not m],
                list(rc) + list(rx))
        cin = backward_pass(ir, list(ck) + [next(cy) if p else None for p in ypresent])
        cin = [(_zeros(v.aval) if c is None else c) for c, v in zip(cin, ir.invars)]
        from .ops import add
        new_acc = [add(s, c) for s, c in zip(acc, cin[:nlc])]
        return new_acc + cin[nlc:nlc + nk] + cin[nlc + nk:]

    avals = ([_strong(a.aval) for a in res_c] + [_strong(a) for a in c_avals] + k_avals
             + [_x_aval(a.aval) for a in res_x]
             + [ShapeDtypeStruct(a.shape, a.dtype) for a, p in zip(y_avals, ypresent) if p])
    tir, tconsts = _closed(tbody, avals, "scan_transpose")
    acc0 = [_zeros(a) for a in c_avals]
    outs = _bind_scan(list(tconsts) + list(res_c), list(acc0) + list(ct_k),
                      list(res_x) + list(ct_y), body=tir, length=length,
                      reverse=not reverse, unroll=unroll)
    ct_c, ct_init, ct_xs = iter(outs[:nlc]), outs[nlc:nlc + nk], iter(outs[nlc + nk:])
    return ([next(ct_c) if m else None for m in clin] + list(ct_init)
            + [next(ct_xs) if m else None for m in xlin])


scan_p.transpose = _scan_transpose


def _scan_batch(vals, dims, size, *, body, num_consts, num_carry, length, reverse, unroll):
    from . import ops as L
    from ..transforms.vmap import _full
    nc, nk = num_consts, num_carry
    consts, init, xs = vals[:nc], vals[nc:nc + nk], vals[nc + nk:]
    cd, kd, xd = dims[:nc], dims[nc:nc + nk], dims[nc + nk:]
    kb = [d is not None for d in kd]
    # xs batched at 0 -> the batch axis goes to 1 (the scan axis stays in front)
    xs = [x if d is None else L.transpose(x, (1, 0) + tuple(range(2, x.ndim)))
          for x, d in zip(xs, xd)]

    def avals(mask):
        return ([_strong(c.aval) for c in consts]
                + [_batched_aval(ShapeDtypeStruct(k.shape[1:] if d is not None else k.shape,
                                                  k.dtype, k.weak_type),
                                 0 if m else None, size) for k, d, m in zip(init, kd, mask)]
                + [ShapeDtypeStruct(x.shape[1:], x.dtype, x.weak_type) for x in xs])

    def body_fn(mask, box):
        def f(*a):
            in_dims = list(cd) + [0 if m else None for m in mask] + list(xd)
            outs, od = _batch_flat(lambda *x: eval_ir(body, *x), list(a), in_dims, size,
                                   force=list(mask) + [False] * (len(body.outvars) - nk))
            box["d"] = od
            return outs
        return f

    while True:
        box = {}
        bir, bconsts = _closed(body_fn(kb, box), avals(kb), "scan_vmap")
        new = [m or d is not None for m, d in zip(kb, box["d"][:nk])]
        if new == kb:
            break
        kb = new
    init = [_full(k, None, size, k.shape) if m and d is None else k
            for k, d, m in zip(init, kd, kb)]
    outs = _bind_scan(list(bconsts) + list(consts), init, xs, body=bir, length=length,
                      reverse=reverse, unroll=unroll)
    ydims = [None if d is None else 1 for d in box["d"][nk:]]
    return outs, [0 if m else None for m in kb] + ydims


scan_p.batch = _scan_batch


def _scan_dce(eqn, used):
    p = eqn.params
    body, nc, nk = p["body"], p["num_consts"], p["num_carry"]
    if not any(used):
        return None, []
    ku, yu = list(used[:nk]), list(used[nk:])
    while True:
        outv = [v for v, m in zip(body.outvars[:nk], ku) if m] + \
               [v for v, m in zip(body.outvars[nk:], yu) if m]
        d = dce(IR(body.invars, outv, body.eqns))
        need = _used_invars(d)
        new = [m or body.invars[nc + i] in need for i, m in enumerate(ku)]
        if new == ku:
            break
        ku = new
    keep = ([v in need for v in body.invars[:nc]] + ku
            + [v in need for v in body.invars[nc + nk:]])
    new_body = IR([v for v, m in zip(body.invars, keep) if m], d.outvars, d.eqns)
    inputs = [v for v, m in zip(eqn.inputs, keep) if m]
    outputs = [v for v, m in zip(eqn.outputs, ku + yu) if m]
    params = dict(p, body=new_body, num_consts=sum(keep[:nc]), num_carry=sum(ku))
    return Eqn(scan_p, inputs, outputs, params, eqn.source), inputs


scan_p.dce_rule = _scan_dce


# --- loop restructuring: what a scan body need not do on every step -----------------------------
#
# Every scan is bound through ``_bind_scan``, which moves work out of the loop before the
# ``scan`` primitive is bound (on the current trace, so ``make_ir`` shows the result and
# every transformation sees ordinary equations):
#
# * loop-invariant code motion: equations that read only the constants (and literals) run
#   once before the loop and become constants of the body; a ``dot_general`` operand that
#   is loop-invariant but that the matmul would read through a transposed view is
#   transposed once there instead (the loop then multiplies contiguous operands);
# * per-step equations that read only constants and ``xs`` run once before the loop,
#   batched over the scan axis (one big matmul instead of ``length`` small ones), and
#   their stacked results become new ``xs``;
# * accumulator carries (``acc = acc + c`` where ``acc`` is used nowhere else, e.g. the
#   weight cotangents of a transposed scan) become stacked outputs summed after the loop;
#   a ``dot_general`` (or ``transpose``/``reduce_sum``) that feeds only such a sum is
#   done after the loop too, contracting over the scan axis as well (one matmul over
#   ``length * batch`` rows), so the loop only stacks its per-step operands.
#
# The results are those of the loop up to the order of floating-point sums.

def _prim(name):
    from ..core.primitive import REGISTRY
    return REGISTRY[name]


def _is_invariant(v, inv):
    return type(v) is Literal or v in inv


def _relayout(e, inv, inv_eqns):
    """``e`` (a loop ``dot_general``) with each loop-invariant operand that its matmul
    would read transposed replaced by a transposed copy made before the loop."""
    from .linalg_prims import _free
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
        inv_eqns.append(Eqn(_prim("transpose"), [v], [w], {"permutation": tuple(order)},
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


class _ScanPlan:
    """How to run one scan with its loop-invariant, xs-only and accumulated work done
    outside the loop (see above)."""

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
                if e.prim.name == "dot_general":
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
        add = _prim("add")
        for k in range(nk):
            kv, ko = K[k], kout[k]
            e = producer.get(ko)
            if (e is None or e.prim is not add or uses.get(kv) != 1 or uses.get(ko) != 1
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
        name = e.prim.name
        if name == "transpose":
            sub = self._sum_recipe(e.inputs[0])
            if sub is not None:
                return ("T", tuple(e.params["permutation"]), sub)
        elif name == "reduce_sum" and type(e.inputs[0]) is Var and e.inputs[0] not in self.inv:
            nd = len(e.inputs[0].aval.shape)
            axes = tuple(sorted(a % nd for a in e.params["axes"]))
            return ("rsum", axes, self._stack_leaf(e.inputs[0]))
        elif name == "dot_general":
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

    def run(self, consts, init, xs, length, reverse, unroll):
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
                raise _Unplanned from err  # a batching rule that cannot: run it per step
            tr = _prim("transpose")
            for v, o, d in zip(self.pre_out, outs, odims):
                if d != 0:
                    o = tr.bind(o, permutation=(d,) + tuple(i for i in range(o.ndim) if i != d))
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
        add = _prim("add")
        for k, m in enumerate(self.k_keep):
            if m:
                res.append(next(it))
                continue
            recipe, acc_first = self.accs[k]
            s = self._eval(recipe, env, stk)
            res.append(add.bind(init[k], s) if acc_first else add.bind(s, init[k]))
        return res + list(ys)

    def _eval(self, r, env, stk):
        kind = r[0]
        if kind == "sum":
            return _prim("reduce_sum").bind(stk[r[1]], axes=(0,))
        if kind == "T":
            return _prim("transpose").bind(self._eval(r[2], env, stk), permutation=r[1])
        if kind == "rsum":
            return _prim("reduce_sum").bind(stk[r[2]], axes=(0,) + tuple(a + 1 for a in r[1]))
        dg = _prim("dot_general")
        params = r[1]
        if kind == "dot":
            (lc, rc), (lb, rb) = params["dimension_numbers"]

            def up(ds):
                return tuple(d + 1 for d in ds)
            dn = (((0,) + up(lc), (0,) + up(rc)), (up(lb), up(rb)))
            return dg.bind(stk[r[2]], stk[r[3]], **dict(params, dimension_numbers=dn))
        s, w = self._eval(r[3], env, stk), env[r[4]]
        return dg.bind(*((w, s) if r[2] == 1 else (s, w)), **params)


class _Unplanned(Exception):
    pass


def _bind_scan(consts, init, xs, *, body, length, reverse=False, unroll=1):
    """Bind ``scan`` for ``body`` (consts, carries, xs -> carries, ys) with the work that
    need not run on every step moved out of the loop; the outputs are the scan's."""
    consts, init, xs = list(consts), list(init), list(xs)
    if length > 0:
        plan = _ScanPlan(body, len(consts), len(init))
        if not plan.trivial:
            try:
                return plan.run(consts, init, xs, length, reverse, unroll)
            except _Unplanned:
                pass
    return scan_p.bind(*consts, *init, *xs, body=body, num_consts=len(consts),
                       num_carry=len(init), length=length, reverse=reverse, unroll=unroll)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """``carry = init; for x in xs: carry, y = f(carry, x); ys.append(y)``; returns
    ``(carry, stacked ys)`` (pytrees of arrays; ``xs=None`` with ``length`` scans over
    nothing). ``reverse=True`` runs from the last element to the first, keeping ys in
    the original order."""
    init_leaves, init_tree = tree_util.tree_flatten(init)
    init_leaves = [to_array(x) for x in init_leaves]
    xs_leaves, xs_tree = tree_util.tree_flatten(xs)
    xs_leaves = [to_array(x) for x in xs_leaves]
    lengths = {}
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(xs)] \
        if xs_leaves else []
    for p, x in zip(paths, xs_leaves):
        if x.ndim == 0:
            raise ValueError(f"scan: xs{p} is a scalar; every leaf of xs needs a leading axis "
                             "to scan over")
        lengths.setdefault(x.shape[0], p)
    if length is not None:
        length = int(length)
        lengths.setdefault(length, "length")
    if not lengths:
        raise ValueError("scan: give xs (arrays with a leading axis) or length")
    if len(lengths) > 1:
        desc = ", ".join(f"{w}: {n}" for n, w in lengths.items())
        raise ValueError(f"scan: the leading axes of xs (and length) disagree ({desc}); every "
                         "leaf of xs must have the same number of rows")
    n = next(iter(lengths))
    avals = [_strong(a.aval) for a in init_leaves]
    x_avals = [ShapeDtypeStruct(x.shape[1:], x.dtype, x.weak_type) for x in xs_leaves]
    y_tree = [None]

    def flat(*a):
        carry = tree_util.tree_unflatten(init_tree, list(a[:len(avals)]))
        x = tree_util.tree_unflatten(xs_tree, list(a[len(avals):]))
        out = f(carry, x)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"scan: f ({_fun_name(f)}) must return a pair (new carry, y), "
                            f"got {type(out).__name__}")
        c_leaves, c_tree = tree_util.tree_flatten(out[0])
        y_leaves, y_tree[0] = tree_util.tree_flatten(out[1])
        c = _match_carry("scan", f"f ({_fun_name(f)})", init_tree, avals, c_tree,
                         [to_array(x) for x in c_leaves], promote, strong)
        return c + [to_array(y) for y in y_leaves]

    promote, strong = {}, set()
    body, consts = _closed(flat, avals + x_avals, "scan_body")
    if promote:
        _promoted(init_leaves, avals, promote)
        promote = None
        strong.clear()
        body, consts = _closed(flat, avals + x_avals, "scan_body")

    outs = _bind_scan(consts, init_leaves, xs_leaves, body=body, length=n,
                      reverse=bool(reverse), unroll=int(unroll))
    carry = tree_util.tree_unflatten(init_tree, _strengthened(outs[:len(avals)], strong))
    return carry, tree_util.tree_unflatten(y_tree[0], outs[len(avals):])


def map(f, xs):
    """``stack([f(x) for x in xs])`` over the leading axis of the pytree ``xs``."""
    _, ys = scan(lambda c, x: ((), f(x)), (), xs)
    return ys


# Eager grad would key its compiled derivations by these params (sub-IRs traced afresh on
# every eager call, so never seen twice): derive each call afresh instead of caching.
for _p in (cond_p, while_p, scan_p):
    _p.cache_eager_vjp = False


# === ONNX lowerings =============================================================================
# cond -> If (a chain of Ifs for more than two branches), scan -> Scan, while -> Loop. The
# bodies are lowered by the exporter's own IR lowering into subgraphs
# (``LoweringContext.subgraph``); operands and loop constants are read from the enclosing
# graph (ONNX outer scope), not passed in.

def _as_list(out):
    return [out] if isinstance(out, str) else list(out)


def _cond_onnx(ctx, index, *ops, branches):
    """The impl's clamped index picks the branch: ``If(index <= 0, branch 0, If(index <= 1,
    branch 1, ...))``; one branch is inlined."""
    from ..onnx import lowerings as O
    from ..onnx.export import lower_ir
    n, outs, ops = len(branches), list(ctx.out_avals), list(ops)
    if n == 1:
        return lower_ir(ctx, branches[0], ops)
    if not outs:
        return []
    it = ctx.in_avals[0].dtype
    idx = O._cast(ctx, O._max(ctx, index, O._k(ctx, n - 1, it), it, "Min"), it, O.I64)

    def chain(c, j):
        if j == n - 1:
            return lower_ir(c, branches[j], ops)
        pred = O._op(c, "LessOrEqual", idx, O._k(c, j, O.I64))
        then_g = c.subgraph(lambda s, _: lower_ir(s, branches[j], ops), (), outs,
                            f"cond_branch{j}")
        else_g = c.subgraph(lambda s, _: chain(s, j + 1), (), outs, f"cond_else{j}")
        return _as_list(c.node("If", [pred], outputs=len(outs), then_branch=then_g,
                               else_branch=else_g))
    return chain(ctx, 0)


cond_p.onnx = _cond_onnx


def _scan_onnx(ctx, *args, body, num_consts, num_carry, length, reverse, unroll):
    """ONNX ``Scan``: the carries are its state variables, ``xs`` its scan inputs and ys
    its scan outputs, both read/written backwards for ``reverse``; a scan without xs
    gets a dummy (length,) scan input that fixes the trip count. Length 0: the initial
    carries and empty ys."""
    from ..onnx import lowerings as O
    from ..onnx.export import lower_ir
    nc, nk = num_consts, num_carry
    consts, init, xs = list(args[:nc]), list(args[nc:nc + nk]), list(args[nc + nk:])
    outs = list(ctx.out_avals)
    if length == 0:
        return init + [O._full(ctx, np.zeros((), a.dtype), a.dtype, a.shape)
                       for a in outs[nk:]]
    if not outs:
        return []
    in_avals = list(body.in_avals[nc:])
    n_x = len(xs)
    if not xs:
        xs = [ctx.const(np.zeros(length, np.bool_))]
        in_avals.append(ShapeDtypeStruct((), np.bool_))

    def build(s, names):
        return lower_ir(s, body, consts + names[:nk + n_x])
    g = ctx.subgraph(build, [("carry" if i < nk else "x", a) for i, a in enumerate(in_avals)],
                     list(body.out_avals), "scan_body")
    rev = int(bool(reverse))
    return _as_list(ctx.node("Scan", init + xs, outputs=len(outs), body=g,
                             num_scan_inputs=len(xs), scan_input_directions=[rev] * len(xs),
                             scan_output_directions=[rev] * (len(outs) - nk) or None))


scan_p.onnx = _scan_onnx


def _while_onnx(ctx, *args, cond_ir, body_ir, cond_nconsts, body_nconsts):
    """ONNX ``Loop`` without a trip count: the predicate on the initial carry is computed
    before the loop, and the body computes the next carry and the predicate on it."""
    from ..onnx import lowerings as O
    from ..onnx.export import lower_ir
    cc, bc, init = _while_split(args, cond_nconsts, body_nconsts)
    outs = list(ctx.out_avals)
    if not outs:
        return []
    pdt = cond_ir.out_avals[0].dtype

    def pred(c, carry):
        (p,) = lower_ir(c, cond_ir, cc + carry)
        return p if pdt == O.BOOL else O._not(c, O._eq(c, p, 0, pdt))

    def build(s, names):
        new = lower_ir(s, body_ir, bc + list(names[2:]))
        return [pred(s, new)] + new
    scalar = ShapeDtypeStruct((), np.bool_)
    g = ctx.subgraph(build, [("iter", ShapeDtypeStruct((), np.int64)), ("cond", scalar)]
                     + [("carry", a) for a in outs], [scalar] + outs, "while_body")
    return _as_list(ctx.node("Loop", ["", pred(ctx, init)] + init, outputs=len(outs), body=g))


while_p.onnx = _while_onnx
