"""fnx.lax control flow: values against Python loops, pytrees, errors, closures, the
printed IR, DCE inside bodies, batching, and an Elman RNN whose scan gradient equals the
gradient of the same RNN unrolled in Python."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- values against Python references ------------------------------------------------------

def test_scan_pytree_carry_and_ys_match_loop():
    xs = {"a": np.arange(12.0).reshape(4, 3), "b": np.linspace(-1, 1, 4)}

    def step(c, x):
        s, n = c
        s = s * 0.5 + x["a"] * x["b"]
        return (s, n + 1), {"s": s.sum(), "neg": -s}

    init = (np.zeros(3), 0)
    (s, n), ys = lax.scan(step, (fnp.asarray(init[0]), init[1]),
                          {k: fnp.asarray(v) for k, v in xs.items()})
    rs, rys = init[0], []
    for t in range(4):
        rs = rs * 0.5 + xs["a"][t] * xs["b"][t]
        rys.append(rs)
    close(s, rs)
    assert int(n) == 4
    close(ys["s"], [r.sum() for r in rys])
    close(ys["neg"], -np.stack(rys))
    (s2, _), ys2 = fnx.jit(lambda i, x: lax.scan(step, i, x))(
        (fnp.asarray(init[0]), 0), {k: fnp.asarray(v) for k, v in xs.items()})
    close(s2, rs)


def test_scan_reverse_length_and_map():
    xs = fnp.arange(5.0)
    c, ys = lax.scan(lambda c, x: (c * 2 + x, c), 0.0, xs, reverse=True)
    rc, rys = 0.0, [0.0] * 5
    for t in reversed(range(5)):
        rys[t] = rc
        rc = rc * 2 + t
    close(c, rc)
    close(ys, rys)
    c, ys = lax.scan(lambda c, _: (c + 1, c * c), 1, None, length=3)
    assert int(c) == 4 and list(np.asarray(ys)) == [1, 4, 9]
    close(lax.map(lambda x: x ** 2 + 1, xs), np.arange(5.0) ** 2 + 1)


def test_cond_switch_while_fori_values():
    x = fnp.asarray([1.0, -2.0, 3.0])
    f = fnx.jit(lambda p, x: lax.cond(p, lambda a: a * 2, lambda a: a - 1, x))
    close(f(True, x), [2.0, -4.0, 6.0])
    close(f(False, x), [0.0, -3.0, 2.0])
    branches = [lambda a: a + 1, lambda a: a * 10, lambda a: -a]
    g = fnx.jit(lambda i, x: lax.switch(i, branches, x))
    for i in range(-2, 5):
        close(g(i, x), branches[min(max(i, 0), 2)](np.asarray(x)))
    n, v = fnx.jit(lambda v: lax.while_loop(lambda c: c[1] < 100.0,
                                            lambda c: (c[0] + 1, c[1] * 3.0), (0, v)))(2.0)
    assert int(n) == 4 and float(v) == 162.0
    for lo, hi in [(0, 5), (3, 7), (5, 2)]:
        ref = 1.0
        for i in range(lo, hi):
            ref = ref * 1.5 + i
        close(lax.fori_loop(lo, hi, lambda i, v: v * 1.5 + i, 1.0), ref)
        # traced bounds: a while_loop
        close(fnx.jit(lambda a, b: lax.fori_loop(a, b, lambda i, v: v * 1.5 + i, 1.0))(lo, hi),
              ref)


# --- errors --------------------------------------------------------------------------------

def test_branch_mismatch_names_the_leaf_and_types():
    with pytest.raises(TypeError,
                       match=r"output\['w'\] differs.*false_fun.*f32\[2\].*true_fun.*f32\[3\]"):
        fnx.jit(lambda p, x: lax.cond(p, lambda a: {"w": a}, lambda a: {"w": a[:2]}, x))(
            True, fnp.ones(3))
    with pytest.raises(TypeError, match="same pytree structure"):
        fnx.jit(lambda p, x: lax.cond(p, lambda a: (a, a), lambda a: a, x))(True, fnp.ones(3))


def test_scan_carry_type_error():
    with pytest.raises(TypeError, match=r"carry.*changes type.*f32\[3\].*f32\[2\]"):
        lax.scan(lambda c, x: (c[:2], x), fnp.ones(3), fnp.ones((2, 3)))
    with pytest.raises(ValueError, match="leading axes of xs"):
        lax.scan(lambda c, x: (c, x), 0.0, (fnp.ones(3), fnp.ones(4)))


def test_while_loop_grad_error_points_to_scan():
    def f(y):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * y), (0, y))[1]
    # as JAX: a ValueError, raised when the derivative is transposed
    with pytest.raises(ValueError, match="Reverse-mode.*while_loop.*scan.*fori_loop"):
        fnx.grad(f)(fnp.asarray(2.0))
    with pytest.raises(ValueError, match="Reverse-mode.*while_loop"):
        fnx.jit(fnx.grad(f))(fnp.asarray(2.0))
    # forward mode works: d y^4 / dy = 4 y^3; so does linearize (as JAX), eager and jitted
    close(fnx.jvp(f, (fnp.asarray(2.0),), (fnp.asarray(1.0),))[1], 32.0)
    y, f_jvp = fnx.linearize(f, 2.0)
    close(y, 16.0)
    close(f_jvp(1.0), 32.0)
    close(fnx.jit(lambda y: fnx.linearize(f, y)[1](0.5))(2.0), 16.0)
    fori = lambda x: lax.fori_loop(x, x + 2., lambda i, c: c * 2., x)  # noqa: E731
    close(fnx.linearize(fori, 1.0)[1](1.0), 4.0)
    close(fnx.grad(fori)(1.0), 4.0)  # bounds concrete under grad: a scan, as JAX


def test_fori_loop_bounds_as_jax():
    # float bounds: concrete ones are taken by int() (a scan, so grad works), traced ones
    # run a while_loop over float indices
    close(lax.fori_loop(0., 3., lambda i, c: c + i, 0.), 3.0)
    close(fnx.grad(lambda x: lax.fori_loop(0., 3., lambda i, c: c * x, x))(2.), 32.0)
    close(fnx.jit(lambda u: lax.fori_loop(0., u, lambda i, c: c + i, 0.))(3.), 3.0)
    # only a weakly typed signed int bound takes the other's dtype
    close(lax.fori_loop(np.int16(0), 10, lambda i, c: c + 1, fnp.float32(10)), 20.0)
    for lo, hi in [(np.int16(0), fnp.int32(10)), (0, fnp.uint32(5))]:
        with pytest.raises(TypeError, match="must have equal types"):
            lax.fori_loop(lo, hi, lambda i, c: c, 0.0)
    with pytest.raises(TypeError, match="body_fun argument should be callable"):
        lax.fori_loop(0, 3, 1, 0)
    with pytest.raises(ValueError, match="Can only use `unroll`"):
        fnx.jit(lambda u: lax.fori_loop(0, u, lambda i, c: c + 1, 0.0, unroll=3))(10)


def test_traced_python_if_still_errors_under_jit():
    def f(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(Exception, match="lax.cond|traced|concrete"):
        fnx.jit(f)(fnp.asarray(1.0))


# --- closures, printing, DCE ---------------------------------------------------------------

def test_closures_over_outer_traced_values():
    w = fnp.asarray([1.0, 2.0])

    def f(a, xs):
        c, ys = lax.scan(lambda c, x: (c * a + x * w, c.sum() * 2.0), fnp.zeros(2, xs.dtype), xs)
        return (c ** 2).sum() + ys.sum()

    xs = fnp.asarray(np.linspace(0, 1, 6).reshape(3, 2))

    def ref(a):
        c, tot = np.zeros(2), 0.0
        for x in np.asarray(xs):
            tot += c.sum() * 2.0
            c = c * a + x * np.asarray(w)
        return (c ** 2).sum() + tot

    a = 0.7
    g = fnx.grad(f)(fnp.asarray(a), xs)
    fd = (ref(a + 1e-6) - ref(a - 1e-6)) / 2e-6
    close(g, fd, 1e-4)
    close(fnx.jit(fnx.grad(f))(fnp.asarray(a), xs), fd, 1e-4)
    close(fnx.vmap(fnx.grad(f), in_axes=(0, None))(fnp.asarray([a, a]), xs), [fd, fd], 1e-4)
    # a cond closing over a jit argument
    h = fnx.jit(lambda p, y: lax.cond(p, lambda: y * 2, lambda: y + 1))
    close(h(True, fnp.asarray(3.0)), 6.0)


def test_make_ir_prints_sub_irs_indented():
    text = str(fnx.make_ir(lambda p, x: lax.cond(p, lambda a: fnp.sin(a), lambda a: a * 2, x))(
        True, fnp.ones(3)))
    assert "cond[branches=(" in text and "sin" in text and "mul" in text
    body_lines = [ln for ln in text.splitlines() if "sin" in ln]
    assert body_lines and body_lines[0].startswith(" " * 12)
    text = str(fnx.make_ir(lambda x: lax.scan(lambda c, x: (c + x, c), 0.0, x))(fnp.ones(4)))
    assert "scan[body=" in text and "length=4" in text


def test_dce_inside_scan_and_cond():
    def f(xs):
        (a, b), ys = lax.scan(lambda c, x: ((c[0] * 0.5 + x, fnp.exp(c[1]) * x), fnp.cos(x)),
                              (0.0, 1.0), xs)
        return a
    ir = fnx.make_ir(f)(fnp.ones(4))
    scan_eqn = next(e for e in ir.eqns if e.prim.name == "scan")
    body = scan_eqn.params["body"]
    names = {e.prim.name for e in body.eqns}
    assert "exp" not in names and "cos" not in names and names == {"mul", "add"}
    assert len(scan_eqn.outputs) == 1 and scan_eqn.params["num_carry"] == 1
    close(fnx.jit(f)(fnp.ones(4)), 1.875)

    def g(p, x):
        u, v = lax.cond(p, lambda a: (fnp.sin(a), fnp.exp(a)), lambda a: (a, a * 2), x)
        return u
    ir = fnx.make_ir(g)(True, fnp.ones(2))
    eqn = next(e for e in ir.eqns if e.prim.name == "cond")
    assert len(eqn.outputs) == 1
    assert all("exp" not in {e.prim.name for e in b.eqns} for b in eqn.params["branches"])


# --- batching and compositions -------------------------------------------------------------

def test_cond_passes_through_forwarded_operands():
    # as JAX: an output every branch returns unchanged from the same operand is that
    # operand, so under vmap an unbatched one stays unbatched (out_axes=None works)
    def f(x, y):
        return lax.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y), x, y)
    x, y = fnp.arange(4), fnp.asarray(3.0)
    x2, y2 = fnx.vmap(f, in_axes=(0, None), out_axes=(0, None))(x, y)
    close(x2, [0, 2, 4, 9])
    assert y2 is y
    x3, y3 = fnx.jit(fnx.vmap(f, in_axes=(0, None), out_axes=(0, None)))(x, y)
    close(x3, [0, 2, 4, 9])
    close(y3, 3.0)
    # forwarded in one branch only: still an output of the cond
    g = lambda p, y: lax.cond(p, lambda y: y, lambda y: y + 1.0, y)  # noqa: E731
    close(fnx.vmap(g, in_axes=(0, None))(fnp.asarray([True, False]), y), [3.0, 4.0])
    close(fnx.grad(lambda y: f(fnp.asarray(1), y)[1] * 2.0)(1.0), 2.0)


def test_read_only_loop_carries_stay_unbatched_under_vmap():
    # as JAX: a carry the body returns unchanged (and, for while_loop, the test does not
    # read) is a constant of the loop, so vmap with out_axes=None takes it
    def foo(w, x, c_max):
        _, x, w = lax.while_loop(lambda v: v[0] < c_max, lambda v: (v[0] + 1, v[1] @ v[2], v[2]),
                                 (0, x, w))
        return w, x
    w = fnp.ones((2, 2))
    w_, x_ = fnx.vmap(foo, in_axes=(None, 0, 0), out_axes=(None, 0))(w, fnp.ones((3, 2)),
                                                                    fnp.arange(3))
    close(w_, w)
    close(x_, [[1, 1], [2, 2], [4, 4]])

    def g(x, y):
        def h(_, y):
            (y, z), ys = lax.scan(lambda c, _: ((c[0], c[1] + c[0]), c[1]), (y, y), None,
                                  length=2)
            return y, z, ys
        return lax.cond(x < 0, h, h, x, y)
    y, z, ys = fnx.vmap(g, (0, None), (None, 0, 0))(fnp.arange(3.0), fnp.float32(3.0))
    close(y, 3.0)
    close(z, [9.0] * 3)
    close(ys, [[3.0, 6.0]] * 3)
    close(fnx.grad(lambda y: g(1.0, y)[1])(1.0), 3.0)
    close(fnx.jit(fnx.grad(lambda y: g(1.0, y)[2].sum()))(1.0), 3.0)
    with pytest.raises(ValueError, match="non-negative"):
        lax.scan(lambda c, x: (c, x), 0, fnp.arange(5), unroll=-1)
    close(lax.scan(lambda c, x: (c + x, c), 0, fnp.arange(5), unroll=True)[1], [0, 0, 1, 3, 6])


def test_batched_cond_sends_no_cotangent_through_branches_not_taken():
    # as JAX: under vmap with a batched predicate each branch sees its operands (closed
    # over ones too) through select(taken, x, stop_gradient(x)), so sqrt's infinite
    # derivative at 0 in the branch not taken does not make the gradient NaN
    eps = 1e-3
    safe = lambda x: lax.cond(x < eps, lambda _: eps, lambda _: fnp.sqrt(x), ())  # noqa: E731
    close(fnx.grad(lambda x: fnx.vmap(safe)(x).sum())(fnp.zeros(3)), [0.0] * 3)
    close(fnx.jit(fnx.grad(lambda x: fnx.vmap(safe)(x).sum()))(fnp.asarray([0.0, 4.0])),
          [0.0, 0.25])
    f = lambda i, x: lax.switch(i, [fnp.sqrt, lambda x: x * 2.0, fnp.log], x)  # noqa: E731
    g = fnx.grad(lambda x: fnx.vmap(f, (0, 1))(fnp.asarray([0, 1]), x).sum())
    close(g(fnp.asarray([[4.0, 0.0], [1.0, 3.0]])), [[0.25, 2.0], [0.5, 2.0]])


def test_batched_cond_selects_and_batched_while_freezes_lanes():
    x = fnp.asarray([-1.0, 2.0, 0.5, -3.0])
    def f(x):
        return lax.cond(x > 0, lambda a: a * 10, lambda a: a - 1, x)
    close(fnx.vmap(f)(x), [-2.0, 20.0, 5.0, -4.0])
    close(fnx.jit(fnx.vmap(f))(x), [-2.0, 20.0, 5.0, -4.0])
    def w(v):
        return lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1, c[1] * 2.0),
                                     (0, v))
    n, v = fnx.vmap(w)(fnp.asarray([1.0, 3.0, 20.0, 9.0]))
    assert list(np.asarray(n)) == [4, 2, 0, 1]
    close(v, [16.0, 12.0, 20.0, 18.0])
    n2, v2 = fnx.jit(fnx.vmap(w))(fnp.asarray([1.0, 3.0, 20.0, 9.0]))
    assert list(np.asarray(n2)) == [4, 2, 0, 1]
    def sw(i, x):
        return lax.switch(i, [lambda a: a + 1, lambda a: a * 3, lambda a: -a], x)
    close(fnx.vmap(sw)(fnp.asarray([0, 1, 2, 7]), x), [0.0, 6.0, -0.5, 3.0])


def test_derivative_compositions():
    xs = fnp.asarray(np.linspace(-1, 1, 5))

    def f(a):
        return lax.scan(lambda c, x: (fnp.sin(c * a) + x, c), 0.3, xs)[0]

    def ref(a):
        c = 0.3
        for x in np.asarray(xs):
            c = np.sin(c * a) + x
        return c

    a, eps = 0.8, 1e-4
    d1 = (ref(a + eps) - ref(a - eps)) / (2 * eps)
    d2 = (ref(a + eps) - 2 * ref(a) + ref(a - eps)) / eps ** 2
    close(fnx.grad(f)(fnp.asarray(a)), d1, 1e-5)
    close(fnx.grad(fnx.grad(f))(fnp.asarray(a)), d2, 1e-3)
    close(fnx.jit(fnx.grad(fnx.grad(f)))(fnp.asarray(a)), d2, 1e-3)
    close(fnx.jvp(fnx.grad(f), (fnp.asarray(a),), (fnp.asarray(1.0),))[1], d2, 1e-3)
    close(fnx.vmap(fnx.grad(f))(fnp.asarray([a, a])), [d1, d1], 1e-5)
    def g(y):
        return lax.fori_loop(0, 4, lambda i, v: v * y + i, 1.0)
    close(fnx.grad(g)(fnp.asarray(1.5)), 4 * 1.5 ** 3 + 2 * 1.5 + 2, 1e-5)
    close(fnx.jit(fnx.grad(g))(fnp.asarray(1.5)), 4 * 1.5 ** 3 + 2 * 1.5 + 2, 1e-5)
    def h(y):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fnp.sin(c[1]) * y),
                                     (0, y))[1]
    y0 = 0.9
    def r(y):
        return np.sin(np.sin(np.sin(y) * y) * y) * y
    close(fnx.jvp(h, (fnp.asarray(y0),), (fnp.asarray(1.0),))[1],
          (r(y0 + 1e-6) - r(y0 - 1e-6)) / 2e-6, 1e-4)


# --- model level: an Elman RNN -----------------------------------------------------------------

T, B, IN, H = 6, 3, 4, 5


def _rnn_params(seed=0):
    rng = np.random.default_rng(seed)
    return {"wx": fnp.asarray(rng.normal(size=(IN, H)) * 0.5),
            "wh": fnp.asarray(rng.normal(size=(H, H)) * 0.5),
            "b": fnp.asarray(rng.normal(size=H) * 0.1)}


def _cell(p, h, x):
    return fnp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])


def rnn_scan(p, xs):
    def step(h, x):
        h = _cell(p, h, x)
        return h, (h ** 2).sum()
    h, ys = lax.scan(step, fnp.zeros((xs.shape[1], H), xs.dtype), xs)
    return ys.sum() + (h * 0.5).sum()


def rnn_loop(p, xs):
    h, tot = fnp.zeros((xs.shape[1], H), xs.dtype), 0.0
    for t in range(xs.shape[0]):
        h = _cell(p, h, xs[t])
        tot = tot + (h ** 2).sum()
    return tot + (h * 0.5).sum()


@pytest.mark.x64  # scan vs unrolled gradients to 1e-9: float64 work
def test_rnn_scan_grad_equals_unrolled_loop():
    p = _rnn_params()
    xs = fnp.asarray(np.random.default_rng(1).normal(size=(T, B, IN)))
    want = fnx.grad(rnn_loop)(p, xs)
    for got in (fnx.grad(rnn_scan)(p, xs), fnx.jit(fnx.grad(rnn_scan))(p, xs)):
        for k in want:
            close(got[k], want[k], 1e-9)
    close(rnn_scan(p, xs), rnn_loop(p, xs), 1e-10)
    # vmapped over a batch of sequences (batch axis 1 of xs -> a leading batch of examples)
    xb = fnp.asarray(np.random.default_rng(2).normal(size=(2, T, B, IN)))
    got = fnx.vmap(fnx.grad(rnn_scan), in_axes=(None, 0))(p, xb)
    for j in range(2):
        want = fnx.grad(rnn_loop)(p, xb[j])
        for k in want:
            close(got[k][j], want[k], 1e-9)
    got = fnx.jit(fnx.vmap(fnx.grad(rnn_scan), in_axes=(None, 0)))(p, xb)
    close(got["wh"][1], fnx.grad(rnn_loop)(p, xb[1])["wh"], 1e-9)


# --- work moved out of scan loops ------------------------------------------------------------
# ``scan`` binds the loop as written; the NumPy backend restructures it before lowering
# (``plan_scans`` with its BLAS relayout hook), so these tests look at the planned IR.

def _scan_eqns(ir):
    return [e for e in ir.eqns if e.prim.name == "scan"]


def _planned(ir):
    """What the NumPy backend compiles for ``ir``: its scans restructured."""
    from fnx.backends import get_backend
    from fnx.lax.control_flow import plan_scans
    return plan_scans(ir, relayout=get_backend("numpy").scan_relayout)


def test_scan_hoists_loop_invariant_and_xs_only_work():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(3, 3)).astype(np.float32)
    wx = rng.normal(size=(2, 3)).astype(np.float32)
    xs = rng.normal(size=(5, 4, 2)).astype(np.float32)
    h0 = np.zeros((4, 3), np.float32)

    def f(w, wx, xs, h0):
        def cell(h, x):
            h = fnp.tanh(h @ (w.T * 0.5) + x @ wx)
            return h, h
        return lax.scan(cell, h0, xs)

    ir = _planned(fnx.make_ir(f)(w, wx, xs, h0))
    (scan_eqn,) = _scan_eqns(ir)
    body = scan_eqn.params["body"]
    names = [e.prim.name for e in body.eqns]
    # w.T * 0.5 runs once before the loop, x @ wx once for every step (one matmul)
    assert names.count("dot_general") == 1 and "mul" not in names and "transpose" not in names
    outer = [e.prim.name for e in ir.eqns]
    assert outer.index("mul") < outer.index("scan")
    assert any(e.prim.name == "dot_general" and e.outputs[0].aval.shape == (5, 4, 3)
               for e in ir.eqns)
    ref_h, ref_hs = h0, []
    for t in range(5):
        ref_h = np.tanh(ref_h @ (w.T * 0.5) + xs[t] @ wx)
        ref_hs.append(ref_h)
    for fn in (f, fnx.jit(f)):
        h, hs = fn(*map(fnp.asarray, (w, wx, xs, h0)))
        close(h, ref_h)
        close(hs, np.stack(ref_hs))


def test_scan_accumulator_carries_summed_after_the_loop():
    xs = np.arange(12.0, dtype=np.float32).reshape(4, 3)

    def f(xs):
        return lax.scan(lambda c, x: ((c[0] + x * x, c[1] * 0.5 + x), c[1]),
                        (fnp.zeros(3), fnp.zeros(3)), xs)

    ir = _planned(fnx.make_ir(f)(xs))
    (scan_eqn,) = _scan_eqns(ir)
    assert scan_eqn.params["num_carry"] == 1  # the sum of squares is not a carry any more
    assert any(e.prim.name == "reduce_sum" for e in ir.eqns)
    (s, c), ys = fnx.jit(f)(fnp.asarray(xs))
    rc, rys = np.zeros(3), []
    for t in range(4):
        rys.append(rc)
        rc = rc * 0.5 + xs[t]
    close(s, (xs ** 2).sum(0))
    close(c, rc)
    close(ys, np.stack(rys))


def test_rnn_grad_weight_cotangents_contract_over_the_scan_axis():
    rng = np.random.default_rng(2)
    T, B, n_in, n_h = 6, 3, 4, 5
    wx = (rng.normal(size=(n_in, n_h)) * 0.3).astype(np.float32)
    wh = (rng.normal(size=(n_h, n_h)) * 0.3).astype(np.float32)
    b = rng.normal(size=n_h).astype(np.float32) * 0.1
    xs = rng.normal(size=(T, B, n_in)).astype(np.float32)
    h0 = rng.normal(size=(B, n_h)).astype(np.float32)

    def loss(p, xs, h0):
        wx, wh, b = p

        def cell(h, x):
            h = fnp.tanh(x @ wx + h @ wh + b)
            return h, h
        _, hs = lax.scan(cell, h0, xs)
        return (hs ** 2).mean()

    def unrolled(p, xs, h0):
        wx, wh, b = p
        h, tot = h0, 0.0
        for t in range(T):
            h = fnp.tanh(xs[t] @ wx + h @ wh + b)
            tot = tot + (h ** 2).sum()
        return tot / (T * B * n_h)

    p = tuple(map(fnp.asarray, (wx, wh, b)))
    ir = _planned(fnx.make_ir(fnx.grad(loss))(p, xs, h0))
    scans = _scan_eqns(ir)
    assert len(scans) == 2
    back = scans[1].params["body"]
    # per step the backward loop only multiplies by wh (contiguous, transposed before the
    # loop); the weight cotangents are single contractions over steps and batch after it
    assert [e.prim.name for e in back.eqns].count("dot_general") == 1
    assert scans[1].params["num_carry"] == 1
    big = [e for e in ir.eqns if e.prim.name == "dot_general"
           and len(e.params["dimension_numbers"][0][0]) == 2]
    assert len(big) == 2
    want = fnx.grad(unrolled)(p, fnp.asarray(xs), fnp.asarray(h0))
    for fn in (fnx.grad(loss), fnx.jit(fnx.grad(loss))):
        got = fn(p, fnp.asarray(xs), fnp.asarray(h0))
        for g, r in zip(got, want):
            close(g, r, 1e-5)


def test_eager_cond_and_switch_check_the_branches_not_taken():
    """A concrete predicate runs one branch, but a mismatch is reported as under jit."""
    x = fnp.ones(3)
    with pytest.raises(TypeError, match=r"differs between branches.*f32\[2\].*f32\[3\]"):
        lax.cond(True, lambda x: x * 2, lambda x: x[:2], x)
    with pytest.raises(TypeError, match="same pytree structure"):
        lax.switch(5, [lambda x: x, lambda x: (x, x)], x)
    calls = []

    def taken(x):
        calls.append("taken")
        return x + 1

    def other(x):
        calls.append("traced")
        return x - 1
    for _ in range(3):   # the other branch is traced once per signature, never run
        np.testing.assert_array_equal(lax.cond(False, other, taken, x), x + 1)
    assert calls == ["taken", "traced", "taken", "taken"]


# --- which carries get a tangent ---------------------------------------------------------

def _jvp_cases():
    f32 = np.float32

    def rnn(w, xs, h0):  # the state, from a constant h0, depends on w: the widest mask
        return (lax.scan(lambda h, x: (fnp.tanh(x @ w + h @ w),) * 2, h0, xs)[1] ** 2).sum()

    def counter(w, xs, h0):  # a float carry that never depends on w
        def cell(c, x):
            n, h = c
            return (n + 1.0, fnp.tanh(x @ w) + h * 0), x.sum() * n
        (_, h), ys = lax.scan(cell, (f32(0), h0), xs)
        return h.sum() + ys.sum()

    def floor_cycle(w, xs, h0):  # two carries tied to w only through floor: no tangent
        def cell(c, x):
            a, b = c
            return (b + fnp.floor(x @ w), a), (x @ w).sum() + a.sum()
        return lax.scan(cell, (h0, h0), xs)[1].sum()

    def stop(w, xs, h0):
        def cell(h, x):
            h = lax.stop_gradient(h) * 0.5 + x @ w
            return h, h.sum()
        h, ys = lax.scan(cell, h0, xs)
        return ys.sum() + h.sum()

    def int_carry(w, xs, h0):
        return lax.scan(lambda c, x: ((c[0] + 1, c[1] @ w + x * c[0]), c[1].sum()),
                        (0, h0), xs)[1].sum()
    return rnn, counter, floor_cycle, stop, int_carry


def test_scan_jvp_finds_the_carry_tangents_in_one_linearization_when_it_can(monkeypatch):
    from fnx.lax.control_flow import loops
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 4)).astype(np.float32) * 0.5
    xs = rng.normal(size=(5, 3, 4)).astype(np.float32)
    h0 = np.zeros((3, 4), np.float32)
    traced = []
    closed = loops._closed
    monkeypatch.setattr(loops, "_closed", lambda f, a, n: (traced.append(n), closed(f, a, n))[1])
    irs, counts = {}, {}
    for widest in (True, False):
        if not widest:  # the fixpoint from the carries given a tangent only, as before
            monkeypatch.setattr(loops, "_scan_jvp_widest_first", False)
        for f in _jvp_cases():
            traced.clear()
            ir = str(fnx.make_ir(fnx.grad(f))(w, xs, h0))
            counts[widest, f.__name__] = traced.count("scan_fwd")
            irs[widest, f.__name__] = (ir, str(fnx.make_ir(fnx.grad(f, (0, 2)))(w, xs, h0)))
            if f.__name__ in ("floor_cycle", "stop"):
                continue  # floor jumps, stop_gradient cuts: no finite difference to match
            got = fnx.jit(fnx.grad(f))(w, xs, h0)
            eps, d = 1e-2, np.zeros_like(w)
            d[1, 2] = 1
            num = (f(w + eps * d, xs, h0) - f(w - eps * d, xs, h0)) / (2 * eps)
            close(np.asarray(got)[1, 2], num, 2e-2)
    for name in ("rnn", "counter", "floor_cycle", "stop", "int_carry"):
        assert irs[True, name] == irs[False, name], name  # the same masks, the same IRs
    # an RNN's state gets a tangent: found from the widest mask's linear IR, one trace
    assert counts[True, "rnn"] == 1 and counts[False, "rnn"] == 2
    assert counts[True, "stop"] == 1 and counts[True, "int_carry"] == 1


def test_scan_outputs_are_reused_only_once_nothing_holds_them():
    """A jitted scan writes its stacked outputs into the last two calls' buffers that
    nothing holds any more (no fresh multi-megabyte array, and its page faults, per call):
    results a caller still holds, or a view of them, are never written again."""
    import fnx
    from fnx import lax

    def f(c, xs):
        return lax.scan(lambda c, x: (c + x, c * x), c, xs)
    jf = fnx.jit(f)
    c = np.ones((4, 8), np.float32)
    series = [np.full((50, 4, 8), k, np.float32) for k in range(1, 6)]
    held, views, want = [], [], []
    for xs in series:
        carry, ys = jf(c, xs)
        want.append(np.array(ys))
        held.append(ys) if len(held) < 2 else views.append(np.asarray(ys)[3:7])
    for got, w in zip(held, want):
        np.testing.assert_array_equal(np.asarray(got), w)
    for got, w in zip(views, want[2:]):
        np.testing.assert_array_equal(got, w[3:7])
    for _ in range(3):                       # dropped results: reused, still right
        np.testing.assert_array_equal(np.asarray(jf(c, series[0])[1]), want[0])


def test_a_loop_body_writes_in_place_into_what_the_step_computed():
    """Inside a loop body a ufunc writes into a value the same step computed and no longer
    reads (as at the top level), never into the carry it was handed or the loop's input:
    a fori_loop over a 1 MB carry makes one new array a step, not three."""
    import fnx
    import fnx.numpy as fnp
    from fnx import lax
    from fnx.backends import numpy_loops

    def body(i, c):
        return fnp.tanh(c) * 1.01 + 0.1
    x = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    keep = x.copy()
    f = fnx.jit(lambda x: lax.fori_loop(0, 10, body, x))
    got = np.asarray(f(x))
    np.testing.assert_array_equal(x, keep)                    # the input is untouched
    want = keep
    for i in range(10):
        want = np.asarray(body(i, fnp.asarray(want)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(f(x)), got)      # again: the same
    sources = [run.source for per in numpy_loops._RUNNERS.values() for run in per.values()
               if "_tanh" in run.source]
    assert any("out=v" in s for s in sources), sources
    assert not any("out=k" in s or "out=c" in s for s in sources), sources
