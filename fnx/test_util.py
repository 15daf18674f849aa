"""``fnx.test_util``: JAX's ``jax.test_util`` names (``check_grads``, ``check_jvp``,
``check_vjp``), with JAX's signatures.

``check_grads`` is ``fnx.testing.check_grads`` (forward mode against central differences,
reverse mode by the dot-product identity, to ``order``; 64-bit references where the
function allows; failures name the argument, output and mode). ``check_jvp`` and
``check_vjp`` check a given jvp or vjp *function* (a hand-written one, say) the same way:
its primal output against ``f``, and its tangents (cotangents) against central
differences of ``f`` along a random direction.
"""
from __future__ import annotations

import numpy as np

from . import tree_util
from .core.array import to_array
from .testing import check_grads as _check_grads
from .testing import default_tolerances

__all__ = ["check_grads", "check_jvp", "check_vjp"]


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check ``f``'s derivatives at ``args`` (a tuple of arguments) up to ``order`` in
    ``modes`` numerically; raises AssertionError on a mismatch (see
    ``fnx.testing.check_grads``)."""
    return _check_grads(f, args, order, modes, atol=atol, rtol=rtol, eps=eps)


def _float_leaves(args):
    leaves, tree = tree_util.tree_flatten(tuple(args))
    return [to_array(x) for x in leaves], tree


def _tols(leaves, atol, rtol, eps):
    floats = [x.dtype for x in leaves if x.dtype.kind in "fc"]
    worst = min(floats, key=lambda d: np.finfo(d).bits) if floats else np.dtype(np.float64)
    d = default_tolerances(worst, wide_reference=False)
    rtol = d["rtol"] if rtol is None else rtol
    atol = rtol if atol is None else atol
    return atol, rtol, d["eps"] if eps is None else eps


def _directions(leaves, seed):
    rng = np.random.default_rng(seed)
    out = []
    for x in leaves:
        if x.dtype.kind in "fc":
            t = rng.standard_normal(x.shape)
            if x.dtype.kind == "c":
                t = t + 1j * rng.standard_normal(x.shape)
            out.append(t.astype(x.dtype))
        else:
            out.append(np.zeros(x.shape, x.dtype))
    return out


def _shift(leaves, ts, s):
    return [to_array(np.asarray(x) + s * t) if x.dtype.kind in "fc" else x
            for x, t in zip(leaves, ts)]


def _numeric_jvp(f, leaves, tree, ts, eps):
    plus = tree_util.tree_leaves(f(*tree_util.tree_unflatten(tree, _shift(leaves, ts, eps))))
    minus = tree_util.tree_leaves(f(*tree_util.tree_unflatten(tree, _shift(leaves, ts, -eps))))
    return [(np.asarray(p, np.complex128 if np.iscomplexobj(p) else np.float64)
             - np.asarray(m)) / (2 * eps) for p, m in zip(plus, minus)]


def _close(what, got, want, atol, rtol, err_msg):
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            raise AssertionError(f"{what} {i}: shape {g.shape}, expected {w.shape}. {err_msg}")
        if g.dtype.kind not in "fc":
            continue
        np.testing.assert_allclose(g.astype(w.dtype if w.dtype.kind in "fc" else g.dtype), w,
                                   atol=atol, rtol=rtol, err_msg=f"{what} {i}. {err_msg}")


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=1e-4, err_msg=""):
    """``f_jvp(primals, tangents) -> (out, out_tangent)`` against ``f`` and central
    differences of ``f`` along a random tangent."""
    leaves, tree = _float_leaves(args)
    atol, rtol, eps = _tols(leaves, atol, rtol, eps)
    ts = _directions(leaves, 0)
    primals = tree_util.tree_unflatten(tree, leaves)
    tangents = tree_util.tree_unflatten(tree, [to_array(t) for t in ts])
    out, out_t = f_jvp(primals, tangents)
    _close("primal output", tree_util.tree_leaves(out), tree_util.tree_leaves(f(*primals)),
           atol, rtol, err_msg)
    _close("tangent output", tree_util.tree_leaves(out_t),
           _numeric_jvp(f, leaves, tree, ts, eps), atol, rtol, err_msg)


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=1e-4, err_msg=""):
    """``f_vjp(*args) -> (out, vjp_fun)`` against ``f``, and ``vjp_fun`` by the
    dot-product identity ``<ct, J t> == <J* ct, t>`` with ``J t`` from central
    differences of ``f`` (random ``ct`` and ``t``)."""
    leaves, tree = _float_leaves(args)
    given_atol = atol
    atol, rtol, eps = _tols(leaves, atol, rtol, eps)
    primals = tree_util.tree_unflatten(tree, leaves)
    out, vjp_fun = f_vjp(*primals)
    out_leaves = [to_array(o) for o in tree_util.tree_leaves(out)]
    _close("primal output", out_leaves, tree_util.tree_leaves(f(*primals)), atol, rtol,
           err_msg)
    cts = _directions(out_leaves, 1)
    ts = _directions(leaves, 2)
    in_cts = tree_util.tree_leaves(vjp_fun(tree_util.tree_unflatten(
        tree_util.tree_structure(out), [to_array(c) for c in cts])))
    jt = _numeric_jvp(f, leaves, tree, ts, eps)
    lhs = sum(np.real(np.vdot(c, j)) for c, j in zip(cts, jt))
    rhs = sum(np.real(np.vdot(np.asarray(g), t)) for g, t, x in zip(in_cts, ts, leaves)
              if x.dtype.kind in "fc")
    # the inner products agree to rtol relative to the sizes of their terms
    scale = (sum(float(np.sum(np.abs(np.conj(c) * j))) for c, j in zip(cts, jt))
             + sum(float(np.sum(np.abs(np.conj(np.asarray(g)) * t)))
                   for g, t, x in zip(in_cts, ts, leaves) if x.dtype.kind in "fc"))
    if not abs(lhs - rhs) <= (given_atol or 0.0) + rtol * scale:
        raise AssertionError(f"check_vjp: <ct, J t> = {lhs!r} by finite differences but "
                             f"<vjp(ct), t> = {rhs!r} (atol={atol}, rtol={rtol}). {err_msg}")
