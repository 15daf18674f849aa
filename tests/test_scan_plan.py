"""The scan planner as an IR pass (issue 18): ``scan`` binds the loop as written, and
``plan_scans`` (run by the NumPy backend before lowering, with its BLAS relayout hook)
moves loop-invariant, xs-only and accumulated work out of every scan of an IR, nested ones
included. What it moves is tested in test_control_flow.py; here: where it runs."""
from __future__ import annotations

import numpy as np

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.backends import get_backend, numpy_codegen, numpy_loops
from fnx.core.ir import check_ir
from fnx.lax.control_flow import plan_scans
from fnx.lax.control_flow.scan_plan import ScanPlan

NUMPY = get_backend("numpy")
RNG = np.random.default_rng(0)
W = RNG.normal(size=(3, 3)).astype(np.float32)
WX = RNG.normal(size=(2, 3)).astype(np.float32)
XS = RNG.normal(size=(5, 4, 2)).astype(np.float32)
H0 = np.zeros((4, 3), np.float32)
NT = (((1,), (1,)), ((), ()))  # h @ w.T as one dot_general: w read transposed


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def names(ir):
    return [e.prim.name for e in ir.eqns]


def scans(ir):
    return [e for e in ir.eqns if e.prim.name == "scan"]


def rnn(w, wx, xs, h0):
    def cell(h, x):
        h = fnp.tanh(h @ (w.T * 0.5) + x @ wx)
        return h, h
    return lax.scan(cell, h0, xs)


def rnn_ref(w, wx, xs, h0):
    h, hs = h0, []
    for t in range(xs.shape[0]):
        h = np.tanh(h @ (w.T * 0.5) + xs[t] @ wx)
        hs.append(h)
    return h, np.stack(hs)


def nt(w, xs, h0):
    return lax.scan(lambda h, x: (fnp.tanh(lax.dot_general(h, w, NT) + x), h), h0, xs)


def test_make_ir_shows_the_scan_as_written():
    ir = fnx.make_ir(rnn)(W, WX, XS, H0)
    assert names(ir) == ["scan"]
    body = scans(ir)[0].params["body"]
    assert sorted(names(body)) == ["add", "dot_general", "dot_general", "mul", "tanh",
                                   "transpose"]
    # transformations see the plain scan too: jvp's forward scan still multiplies x @ wx
    # per step, nothing is batched over the scan axis outside it
    jir = fnx.make_ir(lambda wx: fnx.jvp(lambda v: rnn(W, v, XS, H0), (wx,), (wx,)))(WX)
    assert not [e for e in jir.eqns if e.prim.name == "dot_general"]
    assert all(names(e.params["body"]).count("dot_general") >= 2 for e in scans(jir))
    # the pass restructures it; the plain IR is left as it is
    planned = plan_scans(ir)
    assert planned is not ir and names(ir) == ["scan"]
    assert names(scans(planned)[0].params["body"]).count("dot_general") == 1


def test_relayout_happens_with_the_numpy_hook_only():
    ir = fnx.make_ir(nt)(W, XS[:, :, :1].repeat(3, 2), H0)
    plain = plan_scans(ir)  # a backend without the hook (cuBLAS takes transpose flags)
    hooked = plan_scans(ir, relayout=NUMPY.scan_relayout)
    assert plain is ir  # nothing else to move out of this loop
    (dot,) = [e for e in scans(plain)[0].params["body"].eqns if e.prim.name == "dot_general"]
    assert dot.params["dimension_numbers"] == NT
    assert names(hooked) == ["transpose", "scan"]
    assert hooked.eqns[0].params["permutation"] == (1, 0)
    assert hooked.eqns[0].outputs[0] is hooked.eqns[1].inputs[0]
    (dot,) = [e for e in scans(hooked)[0].params["body"].eqns if e.prim.name == "dot_general"]
    assert dot.params["dimension_numbers"] == (((1,), (0,)), ((), ()))
    # the NumPy backend compiles with its hook; both programs compute the loop
    assert "transpose((1, 0))" in NUMPY.compile(ir).source
    assert "transpose" not in numpy_codegen.compile_ir(plain).source
    xs = XS[:, :, :1].repeat(3, 2)
    h, ref = H0, []
    for t in range(5):
        ref.append(h)
        h = np.tanh(h @ W.T + xs[t])
    for got in (fnx.jit(nt)(W, xs, H0), nt(W, xs, H0),
                fnx.core.ir.eval_ir(plain, *map(fnp.asarray, (W, xs, H0)))):
        close(got[0], h)
        close(got[1], np.stack(ref))


def test_the_pass_reaches_nested_irs_and_is_cached():
    def f(p, w, wx, xs, h0):
        inner = lax.cond(p, lambda: rnn(w, wx, xs, h0)[0], lambda: h0)
        outer = lax.scan(lambda c, x: (c + rnn(w, wx, x, h0)[0], None), h0,
                         xs.reshape(1, 5, 4, 2))[0]
        return inner, outer

    ir = fnx.make_ir(f)(True, W, WX, XS, H0)
    planned = check_ir(plan_scans(ir, relayout=NUMPY.scan_relayout))
    assert plan_scans(ir, relayout=NUMPY.scan_relayout) is planned
    assert plan_scans(planned, relayout=NUMPY.scan_relayout) is planned
    (cond,) = [e for e in planned.eqns if e.prim.name == "cond"]
    branch = [b for b in cond.params["branches"] if "scan" in names(b)][0]
    outer_body = scans(planned)[0].params["body"]
    for sub in (branch, outer_body):
        # inside the branch and the outer loop's body, the inner loop multiplies once
        (inner,) = scans(sub)
        assert names(inner.params["body"]).count("dot_general") == 1
    assert "mul" in names(branch)  # w.T * 0.5 before the inner loop
    # inner loops are planned first: what they moved out of their loop is loop-invariant
    # (w.T * 0.5) or xs-only (x @ wx) work of the outer loop, moved out of it in turn
    assert names(outer_body) == ["scan"]
    assert "mul" in names(planned) and "dot_general" in names(planned)
    no_scan = fnx.make_ir(lambda x: fnp.sin(x) * 2)(XS)
    assert plan_scans(no_scan) is no_scan
    want = rnn_ref(W, WX, XS, H0)[0]
    for got in (f(True, W, WX, XS, H0), fnx.jit(f)(True, W, WX, XS, H0)):
        close(got[0], want)
        close(got[1], want)


def test_an_eager_scan_runs_its_plan_then_compiles_it():
    ir = fnx.make_ir(rnn)(W, WX, XS, H0)
    (e,) = scans(ir)
    p = {k: e.params[k] for k in ("num_consts", "num_carry", "length", "reverse")}
    body = e.params["body"]
    ins = [np.asarray(c) for c in (W, WX)] + [H0, XS]
    want = numpy_loops.scan_runner(body, p["num_consts"], p["num_carry"], p["length"],
                                   p["reverse"])(*ins)
    key = tuple(p.values()) + (1,)
    got1 = NUMPY.run_scan(body, ins, **p)
    assert type(NUMPY.scans[body][key]) is ScanPlan  # run once, eagerly
    got2 = NUMPY.run_scan(body, ins, **p)
    compiled = NUMPY.scans[body][key]
    assert callable(compiled) and type(compiled) is not ScanPlan
    NUMPY.run_scan(body, ins, **p)
    assert NUMPY.scans[body][key] is compiled  # planned once
    for got in (got1, got2):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            close(g, w)
    close(want[0], rnn_ref(W, WX, XS, H0)[0])
