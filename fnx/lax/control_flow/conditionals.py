"""``cond`` and ``switch``: one primitive, ``cond``, holding one IR per branch."""
from __future__ import annotations

import builtins

import numpy as np

from ... import tree_util
from ...core import dtypes
from ...core.array import Tracer, to_array
from ...core import onnx_rules as O
from ...core.backend import apply_ir, register_lowering
from ...core.ir import IR, Eqn, Var, dce, eval_ir, ir_has_effects
from ...core.primitive import Primitive, ShapeDtypeStruct
from ...core.trace import get_trace
from ...core.tracing import IRTrace
from ...errors import ShapeError
from .common import (_as_list, _batch_flat, _closed, _describe_aval, _fun_name,
                     _linearize_parts, _strong, _used_invars, _zeros)

__all__ = ["cond", "switch"]


# === the cond primitive =======================================================================

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
# eager grad would key its compiled derivations by the params (sub-IRs traced afresh on every
# eager call, so never seen twice): each call is derived afresh instead
cond_p.cache_eager_vjp = False


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
    from ...transforms.vjp import backward_pass, is_linear
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
    from .. import ops as L
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
    # as JAX: a branch sees its differentiable operands through select(lane takes it, x,
    # stop_gradient(x)), so lanes that take another branch send it no cotangent (a NaN
    # derivative there, sqrt's at 0, is not multiplied by zero into the result)
    diff = [isinstance(o, Tracer) and dtypes.is_inexact(o.dtype) for o in ops]
    if any(diff):
        from ...transforms.vmap import materialize_batch_axis
        front = []
        for o, d, m in zip(ops, odims, diff):
            if m and d is None:
                o = materialize_batch_axis(o, None, size, o.shape)
            elif m and d != 0:
                o = L.transpose(o, (d,) + tuple(k for k in range(o.ndim) if k != d))
            front.append(o)
        fdims = [0 if m else d for d, m in zip(odims, diff)]
    per = []
    for i, br in enumerate(branches):
        args, adims = ops, odims
        if any(diff):
            take = L.eq(idx, L.convert_element_type(np.int32(i), np.int32))
            args = [L.select_n(L.broadcast_in_dim(take, tuple(o.shape), (0,)),
                               L.stop_gradient(o), o) if m else o
                    for o, m in zip(front, diff)]
            adims = fdims
        per.append(_batch_flat(lambda *a, br=br: eval_ir(br, *a), args, adims, size,
                               force=[True] * len(br.outvars))[0])
    if n == 2:
        idx = L.convert_element_type(idx, np.bool_)
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




cond_p.dce_rule = _cond_dce


def _cond_onnx(ctx, index, *ops, branches):
    """The impl's clamped index picks the branch: ``If(index <= 0, branch 0, If(index <= 1,
    branch 1, ...))``; one branch is inlined."""
    n, outs, ops = len(branches), list(ctx.out_avals), list(ops)
    if n == 1:
        return ctx.lower_ir(branches[0], ops)
    if not outs:
        return []
    it = ctx.in_avals[0].dtype
    idx = O.cast(ctx, O.extremum(ctx, index, O.scalar(ctx, n - 1, it), it, "Min"), it, O.I64)

    def chain(c, j):
        if j == n - 1:
            return c.lower_ir(branches[j], ops)
        pred = O.op(c, "LessOrEqual", idx, O.scalar(c, j, O.I64))
        then_g = c.subgraph(lambda s, _: s.lower_ir(branches[j], ops), (), outs,
                            f"cond_branch{j}")
        else_g = c.subgraph(lambda s, _: chain(s, j + 1), (), outs, f"cond_else{j}")
        return _as_list(c.node("If", [pred], outputs=len(outs), then_branch=then_g,
                               else_branch=else_g))
    return chain(ctx, 0)


register_lowering(cond_p, "onnx", _cond_onnx)


def _cond_locate_nonfinite(p, ins, where, locate):
    """jax_debug_nans: the branch the impl takes, one equation at a time."""
    branches = p["branches"]
    i = builtins.min(builtins.max(int(ins[0]), 0), len(branches) - 1)
    locate(branches[i], ins[1:], f"branch {i} of {where}")


cond_p.locate_nonfinite = _cond_locate_nonfinite


# === cond and switch (the public functions) ===================================================

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
                from ..ops import convert_element_type
                o = eval_ir(ir, *cs, *xs)
                return [convert_element_type(v, v.dtype, weak_type=w) for v, w in zip(o, weak)]
            fixed.append(_closed(f, avals, f"{name}_branch"))
        irs = fixed
    # as JAX: an output every branch passes through from the same operand is that operand
    # (not an output of the cond: under vmap it keeps the operand's batching)
    fwd = []
    for k in range(len(out_avals)):
        js = {next((j for j, v in enumerate(ir.invars[len(cs):]) if v is ir.outvars[k]),
                   None) for ir, cs in irs}
        fwd.append(js.pop() if len(js) == 1 else None)
    if any(j is not None for j in fwd):
        irs = [(IR(ir.invars, [v for v, j in zip(ir.outvars, fwd) if j is None], ir.eqns), cs)
               for ir, cs in irs]
    if builtins.any(j is None for j in fwd) or builtins.any(ir_has_effects(ir) for ir, _ in irs):
        outs = iter(_bind_joined(index, irs, ops_leaves))
    else:
        outs = iter(())
    outs = [next(outs) if j is None else ops_leaves[j] for j in fwd]
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
    from ...core.tracing import eval_shape
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
    from ..ops import convert_element_type, ne
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
    from ..ops import convert_element_type
    return _cond_general("switch", convert_element_type(i, np.int32), branches, operands)
