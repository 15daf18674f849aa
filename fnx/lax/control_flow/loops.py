"""Loops: ``while_loop`` and ``fori_loop`` (the ``while`` primitive, or ``scan`` for
static bounds), ``scan`` and ``map`` (the ``scan`` primitive)."""
from __future__ import annotations

import builtins

import numpy as np

from ... import tree_util
from ...core import dtypes
from ...core.array import Array, Tracer, to_array
from ...core import onnx_rules as O
from ...core.backend import apply_scan, backend_for, register_lowering
from ...core.ir import IR, Eqn, Var, Literal, dce, eval_ir, sub_irs
from ...core.primitive import Primitive, ShapeDtypeStruct
from ...core.trace import get_trace
from ...core.tracing import IRTracer, trace_flat
from ...errors import ShapeError
from .common import (_as_list, _batch_flat, _batched_aval, _closed, _describe_aval, _fun_name,
                     _jvp_flat, _linearize_parts, _match_carry, _promoted, _strengthened,
                     _strong, _used_invars, _zeros)

__all__ = ["while_loop", "fori_loop", "scan", "map"]


# === while ====================================================================================

def _compiled(ir, values):
    """``ir``'s compiled function on the backend holding ``values`` (cached by it)."""
    return backend_for(values).executable(ir).fn


_WHILE_VJP_MSG = (
    "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
    "dynamic start/stop values: the trip count is only known at run time and the values "
    "of every iteration would have to be saved. Use fnx.lax.scan, or fnx.lax.fori_loop "
    "with concrete (Python int) bounds, which differentiate in reverse mode; forward mode "
    "(fnx.jvp, jacfwd, linearize) works through while_loop.")


def _unknown(values):
    """Whether any of ``values`` is a tracer of the partial evaluation (linearize) under way."""
    from ...transforms.vjp import PartialIRTrace
    t = get_trace()
    return isinstance(t, PartialIRTrace) and any(
        isinstance(v, IRTracer) and v._trace is t for v in values)


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
# eager grad would key its compiled derivations by the params (sub-IRs traced afresh on every
# eager call, so never seen twice): each call is derived afresh instead
while_p.cache_eager_vjp = False


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
    linearizing = _unknown([t for t in tangents if t is not None])
    if linearizing and _unknown(primals):
        raise ValueError(_WHILE_VJP_MSG)
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
    primal_out = res[:nk]
    if linearizing:
        # as JAX: linearize runs the primal loop as known values, and the whole jvp loop
        # (recomputing the primal) as the tangents' unknown part, which has no transpose
        primal_out = while_p.bind(*primals, cond_ir=cond_ir, body_ir=body_ir,
                                  cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    return primal_out, [next(tout) if m else None for m in cmask]


while_p.jvp = _while_jvp


def _while_transpose(cts, *args, **params):
    raise ValueError(_WHILE_VJP_MSG)


while_p.transpose = _while_transpose


def _while_batch(vals, dims, size, *, cond_ir, body_ir, cond_nconsts, body_nconsts):
    from .. import ops as L
    from ...transforms.vmap import materialize_batch_axis
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
    init = [materialize_batch_axis(v, d, size, v.shape if d is None else v.shape[1:])
            if m and d is None else v for v, d, m in zip(init, kd, kb)]
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


def _while_onnx(ctx, *args, cond_ir, body_ir, cond_nconsts, body_nconsts):
    """ONNX ``Loop`` without a trip count: the predicate on the initial carry is computed
    before the loop, and the body computes the next carry and the predicate on it."""
    cc, bc, init = _while_split(args, cond_nconsts, body_nconsts)
    outs = list(ctx.out_avals)
    if not outs:
        return []
    pdt = cond_ir.out_avals[0].dtype

    def pred(c, carry):
        (p,) = c.lower_ir(cond_ir, cc + carry)
        return p if pdt == O.BOOL else O.not_(c, O.eq(c, p, 0, pdt))

    def build(s, names):
        new = s.lower_ir(body_ir, bc + list(names[2:]))
        return [pred(s, new)] + new
    scalar = ShapeDtypeStruct((), np.bool_)
    g = ctx.subgraph(build, [("iter", ShapeDtypeStruct((), np.int64)), ("cond", scalar)]
                     + [("carry", a) for a in outs], [scalar] + outs, "while_body")
    return _as_list(ctx.node("Loop", ["", pred(ctx, init)] + init, outputs=len(outs), body=g))


register_lowering(while_p, "onnx", _while_onnx)


def _while_locate_nonfinite(p, ins, where, locate):
    """jax_debug_nans: the loop run as the impl runs it, test and body one equation at a
    time."""
    ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
    cc, bc, carry = ins[:ncc], ins[ncc:ncc + nbc], ins[ncc + nbc:]
    t = 0
    while bool(locate(p["cond_ir"], cc + carry, f"the test of {where}")[0]._value):
        carry = locate(p["body_ir"], bc + carry, f"iteration {t} of {where}")
        t += 1


while_p.locate_nonfinite = _while_locate_nonfinite


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
    # as JAX: a carry the body returns unchanged and the test does not read is read-only,
    # a constant of the body (under vmap an unbatched one stays so, whatever the test)
    nb, nk, ncc = len(bc), len(leaves), len(cc)
    used = _used_invars(cir)
    move = [bir.outvars[k] is bir.invars[nb + k] and cir.invars[ncc + k] not in used
            for k in range(nk)]
    if any(move):
        kv = bir.invars[nb:]
        bir = IR(bir.invars[:nb] + [v for v, m in zip(kv, move) if m] +
                 [v for v, m in zip(kv, move) if not m],
                 [v for v, m in zip(bir.outvars, move) if not m], bir.eqns)
        cir = IR(cir.invars[:ncc] + [v for v, m in zip(cir.invars[ncc:], move) if not m],
                 cir.outvars, cir.eqns)
        bc = list(bc) + [v for v, m in zip(leaves, move) if m]
    outs = iter(while_p.bind(*cc, *bc, *[v for v, m in zip(leaves, move) if not m],
                             cond_ir=cir, body_ir=bir, cond_nconsts=len(cc),
                             body_nconsts=len(bc)))
    outs = [v if m else next(outs) for v, m in zip(leaves, move)]
    return tree_util.tree_unflatten(tree, _strengthened(outs, strong))


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``.

    With concrete bounds (Python ints or concrete arrays) this is a ``scan`` (so it
    differentiates in reverse mode); with traced bounds, a ``while_loop``."""
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lo, hi = to_array(lower), to_array(upper)
    from ..ops import add, convert_element_type, lt
    if lo.dtype == hi.dtype:
        dt = lo.dtype
    elif lo.dtype.kind == "i" and hi.dtype.kind == "i" and lo.weak_type != hi.weak_type:
        dt = lo.dtype if hi.weak_type else hi.dtype  # a Python int bound takes the other's
    else:  # as JAX: no other promotion
        raise TypeError(f"lower and upper arguments to fori_loop must have equal types, "
                        f"got {lo.dtype.name} and {hi.dtype.name}")
    try:  # as JAX: concrete bounds (under jvp/grad too) of any type int() takes (floats)
        a, b = int(lo._concrete("fori_loop")), int(hi._concrete("fori_loop"))
        concrete = True
    except TypeError:  # a ConcretizationError is one
        concrete = False
    if concrete:
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
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")

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
    from ..ops import convert_element_type
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


def _scan_impl(*args, body, num_consts, num_carry, length, reverse, unroll):
    """The loop, run by the backend holding the operands (``Backend.run_scan``; NumPy's
    generates one function for the whole loop)."""
    return apply_scan(body, *args, num_consts=num_consts, num_carry=num_carry, length=length,
                      reverse=reverse, unroll=unroll)


scan_p = Primitive("scan", shape_rule=_scan_shape, impl=_scan_impl, multiple_results=True)
scan_p.cache_eager_vjp = False  # as while_p's


def _x_aval(a):
    return ShapeDtypeStruct(tuple(a.shape)[1:], a.dtype, a.weak_type)


_scan_jvp_widest_first = True  # (tests compare with the plain fixpoint)


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
    # Which carries get a tangent: a fixpoint over the body. The widest mask (every
    # inexact carry) is tried first when some carry starts without a tangent: it is
    # usually the fixpoint (an RNN's state, from a constant initial value, depends on the
    # weights), which its linear IR shows at once; else the loop goes on from the carries
    # that IR shows get one, so the mask found is the same.
    full = [dtypes.is_inexact(p.dtype) for p in init]
    widest = (_scan_jvp_widest_first and kmask != full
              and not any(any(sub_irs(e.params)) for e in body.eqns))
    trial = full if widest else kmask
    while True:
        fun, box = _linearize_parts(body, cmask + trial + xmask)
        fir, fconsts = _closed(fun, in_avals, "scan_fwd")
        zero = box["zero"]
        if widest:
            widest = False
            reach = _tangent_carries(box["lin"], zero, cmask, trial, kmask)
            if reach == trial:
                break
            trial = kmask if reach is None else reach
            continue
        new = [m or (not zero[i] and dtypes.is_inexact(init[i].dtype))
               for i, m in enumerate(trial)]
        if new == trial:
            break
        trial = new
    kmask = trial
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


def _tangent_carries(lin, zero, cmask, trial, kmask):
    """From the linear IR ``lin`` of a scan body linearized with the carries in ``trial``
    (and the consts/xs in their masks): which carries get a tangent when only those in
    ``kmask`` start with one (the least fixpoint, by what the linear equations read);
    None when ``lin`` holds equations whose outputs need not each depend on every input
    (several results, sub-IRs)."""
    if any(e.prim.multiple_results or any(sub_irs(e.params)) for e in lin.eqns):
        return None
    n_c, n_k = sum(cmask), sum(trial)
    if len(lin.invars) < n_c + n_k:  # pragma: no cover - one input per masked tangent
        return None
    kpos = [i for i, m in enumerate(trial) if m]
    carries_in = lin.invars[n_c:n_c + n_k]
    given = set(lin.invars[:n_c]) | set(lin.invars[n_c + n_k:])
    on = list(kmask)
    while True:
        reached = given | {v for v, i in zip(carries_in, kpos) if on[i]}
        for e in lin.eqns:
            if any(type(v) is Var and v in reached for v in e.inputs):
                reached.update(e.outputs)
        new = [m or (trial[i] and not zero[i] and type(lin.outvars[i]) is Var
                     and lin.outvars[i] in reached) for i, m in enumerate(on)]
        if new == on:
            return on
        on = new


def _scan_transpose(cts, *args, body, num_consts, num_carry, length, reverse, unroll):
    """Transpose a scan linear in its carries and in the consts/xs that arrive undefined:
    a scan the other way whose body is the transposed body; the cotangents of the
    linear consts are summed in extra carries."""
    from ...transforms.vjp import backward_pass, is_linear
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
        from ..ops import add
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
    from .. import ops as L
    from ...transforms.vmap import materialize_batch_axis
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
    init = [materialize_batch_axis(k, None, size, k.shape) if m and d is None else k
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


def _scan_onnx(ctx, *args, body, num_consts, num_carry, length, reverse, unroll):
    """ONNX ``Scan``: the carries are its state variables, ``xs`` its scan inputs and ys
    its scan outputs, both read/written backwards for ``reverse``; a scan without xs
    gets a dummy (length,) scan input that fixes the trip count. Length 0: the initial
    carries and empty ys."""
    nc, nk = num_consts, num_carry
    consts, init, xs = list(args[:nc]), list(args[nc:nc + nk]), list(args[nc + nk:])
    outs = list(ctx.out_avals)
    if length == 0:
        return init + [O.full(ctx, np.zeros((), a.dtype), a.dtype, a.shape)
                       for a in outs[nk:]]
    if not outs:
        return []
    in_avals = list(body.in_avals[nc:])
    n_x = len(xs)
    if not xs:
        xs = [ctx.const(np.zeros(length, np.bool_))]
        in_avals.append(ShapeDtypeStruct((), np.bool_))

    def build(s, names):
        return s.lower_ir(body, consts + names[:nk + n_x])
    g = ctx.subgraph(build, [("carry" if i < nk else "x", a) for i, a in enumerate(in_avals)],
                     list(body.out_avals), "scan_body")
    rev = int(bool(reverse))
    return _as_list(ctx.node("Scan", init + xs, outputs=len(outs), body=g,
                             num_scan_inputs=len(xs), scan_input_directions=[rev] * len(xs),
                             scan_output_directions=[rev] * (len(outs) - nk) or None))


register_lowering(scan_p, "onnx", _scan_onnx)


def _scan_locate_nonfinite(p, ins, where, locate):
    """jax_debug_nans: the steps in the impl's order, the body one equation at a time."""
    nc, nk = p["num_consts"], p["num_carry"]
    consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
    steps = range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])
    for t in steps:
        xt = [Array._wrap(np.asarray(x._value[t]), x.weak_type) for x in xs]
        carry = locate(p["body"], consts + carry + xt, f"step {t} of {where}")[:nk]


scan_p.locate_nonfinite = _scan_locate_nonfinite


def _bind_scan(consts, init, xs, *, body, length, reverse=False, unroll=1):
    """Bind ``scan`` for ``body`` (consts, carries, xs -> carries, ys) as it is; the work
    that need not run on every step is moved out of the loop by the backend, which runs
    ``scan_plan.plan_scans`` before lowering."""
    consts, init, xs = list(consts), list(init), list(xs)
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

    if isinstance(unroll, (bool, np.bool_)):
        unroll = builtins.max(n, 1) if unroll else 1
    unroll = int(unroll)
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    # as JAX: a carry the body returns unchanged is read-only, an operand of every step
    # (under vmap an unbatched one stays so); the scan returns the initial value for it
    nc, nk = len(consts), len(avals)
    move = [body.outvars[k] is body.invars[nc + k] for k in range(nk)]
    if any(move):
        cv, kv = body.invars[:nc], body.invars[nc:nc + nk]
        body = IR(cv + [v for v, m in zip(kv, move) if m] + [v for v, m in zip(kv, move)
                                                             if not m] + body.invars[nc + nk:],
                  [v for v, m in zip(body.outvars[:nk], move) if not m] + body.outvars[nk:],
                  body.eqns)
        consts = list(consts) + [v for v, m in zip(init_leaves, move) if m]
    outs = _bind_scan(consts, [v for v, m in zip(init_leaves, move) if not m], xs_leaves,
                      body=body, length=n, reverse=bool(reverse), unroll=unroll)
    kept = iter(outs[:nk - sum(move)])
    outs = [v if m else next(kept) for v, m in zip(init_leaves, move)] + \
        list(outs[nk - sum(move):])
    carry = tree_util.tree_unflatten(init_tree, _strengthened(outs[:len(avals)], strong))
    return carry, tree_util.tree_unflatten(y_tree[0], outs[len(avals):])


def map(f, xs, *, batch_size=None):
    """``stack([f(x) for x in xs])`` over the leading axis of the pytree ``xs``. With
    ``batch_size`` (JAX's), ``f`` is vmapped over batches of that many and the batches
    run in sequence; a remainder that does not fill a batch is vmapped on its own."""
    if batch_size is None:
        _, ys = scan(lambda c, x: ((), f(x)), (), xs)
        return ys
    from ...transforms.vmap import vmap
    from .. import ops as L
    b = int(batch_size)
    if b < 1:
        raise ValueError(f"map: batch_size must be a positive integer, got {batch_size!r}")
    leaves, tree = tree_util.tree_flatten(xs)
    if not leaves:
        raise ValueError("map: xs has no arrays to map over")
    leaves = [to_array(v) for v in leaves]
    n = leaves[0].shape[0] if leaves[0].ndim else None
    if n is None or any(not v.ndim or v.shape[0] != n for v in leaves):
        raise ShapeError(f"map: every leaf of xs needs the same leading axis, got shapes "
                         f"{[tuple(v.shape) for v in leaves]}")
    full, rest = divmod(n, b)
    batched = vmap(f)
    parts = []
    if full:
        main = [L.reshape(L.slice_in_dim(v, 0, full * b), (full, b) + tuple(v.shape[1:]))
                for v in leaves]
        _, ys = scan(lambda c, x: ((), batched(tree_util.tree_unflatten(tree, x))), (), main)
        parts.append(tree_util.tree_map(
            lambda y: L.reshape(y, (full * b,) + tuple(y.shape[2:])), ys))
    if rest:
        tail = [L.slice_in_dim(v, full * b, n) for v in leaves]
        parts.append(batched(tree_util.tree_unflatten(tree, tail)))
    if len(parts) == 1:
        return parts[0]
    return tree_util.tree_map(lambda a, c: L.concatenate([a, c], 0), *parts)
