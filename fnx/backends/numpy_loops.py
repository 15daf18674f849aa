"""The NumPy backend's loops: a ``scan`` runs as one generated Python function (the body's
code from ``numpy_codegen.emit_eqns`` inlined in a ``for``), cached per body IR and
loop shape (``NumPyBackend.run_scan``); ``blas_relayout`` is the backend's hook into the
scan planner (``fnx.lax.control_flow.scan_plan``) for the operands of loop matmuls."""
from __future__ import annotations

import itertools
import threading
import weakref

import numpy as np

from ..core import rings
from ..core.ir import Eqn, Var
from ..core.primitive import ShapeDtypeStruct
from ..lax.linalg_prims import dot_general_p
from ..lax.shape import transpose_p
from .numpy_codegen import emit_eqns, quiet_lines

__all__ = ["scan_runner", "blas_relayout"]

_RUNNERS = weakref.WeakKeyDictionary()


def scan_runner(body, num_consts, num_carry, length, reverse):
    """The loop as one generated function: the body's lines inlined in a Python ``for``
    (no call per step; constants and primitives bound to locals and globals once), ys
    written into preallocated arrays (a plain ufunc computing a y writes it in place
    with ``out=``), reused across calls once nothing holds them (``fnx.core.rings``)."""
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
    if y_avals:    # the ys: the last two calls' buffers that nothing holds any more, else
        glb["_take"], glb["_lock"] = rings.take, threading.Lock()    # new ones (no page
        inner.append("with _lock:")                                   # faults per call)
    for j, a in enumerate(y_avals):
        glb[f"_dt{j}"], glb[f"_ring{j}"] = a.dtype, []
        inner.append(f"    y{j} = _take(_ring{j}, {(length,) + tuple(a.shape)!r}, _dt{j})")
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


def blas_relayout(e, invariant):
    """The scan planner's relayout hook (``scan_plan.plan_scans(ir, relayout=...)``): for a
    loop ``dot_general`` with a loop-invariant operand that BLAS would read through a
    transposed view (its batch, free and contracting axes not in the order of a
    contiguous matmul operand), ``(the dot_general reading a transposed copy, [the
    transpose])``; the planner runs the transpose once before the loop, so each step
    multiplies contiguous operands. None for any other equation."""
    if e.prim is not dot_general_p:
        return None
    (lc, rc), (lb, rb) = e.params["dimension_numbers"]
    ins, dn = list(e.inputs), [[list(lc), list(rc)], [list(lb), list(rb)]]
    before = []
    for side in (0, 1):
        v = ins[side]
        if type(v) is not Var or not invariant(v) or len(v.aval.shape) < 2:
            continue
        c, b = dn[0][side], dn[1][side]
        f = [d for d in range(len(v.aval.shape)) if d not in c and d not in b]
        order = b + f + c if side == 0 else b + c + f
        if order == list(range(len(order))):
            continue
        where = {d: i for i, d in enumerate(order)}
        w = Var(ShapeDtypeStruct(tuple(v.aval.shape[d] for d in order), v.aval.dtype,
                                 v.aval.weak_type))
        before.append(Eqn(transpose_p, [v], [w], {"permutation": tuple(order)}, e.source))
        ins[side] = w
        dn[0][side] = [where[d] for d in c]
        dn[1][side] = [where[d] for d in b]
    if not before:
        return None
    params = dict(e.params, dimension_numbers=((tuple(dn[0][0]), tuple(dn[0][1])),
                                               (tuple(dn[1][0]), tuple(dn[1][1]))))
    return Eqn(e.prim, ins, e.outputs, params, e.source), before
