"""``fnx.scipy.optimize``: JAX's ``jax.scipy.optimize.minimize`` with BFGS and L-BFGS.

``minimize(fun, x0, args=(), *, method="BFGS", tol=None, options=None)`` returns
``OptimizeResults(x, success, status, fun, jac, hess_inv, nfev, njev, nit)``. The
solver is BFGS (Nocedal and Wright, "Numerical Optimization", algorithm 6.1) with a
line search for the strong Wolfe conditions (algorithms 3.5 and 3.6: bracketing by
doubling the step, then zooming by cubic, quadratic or bisection steps), following
JAX's choices so that iteration and evaluation counts agree with JAX's: the first trial
step ``min(1, 2.02 (f_k - f_{k-1}) / phi'(0))``, ``c1 = 1e-4``, ``c2 = 0.9``, at most
``line_search_maxiter`` (10) bracketing and 30 zoom steps, a zoom that fails once its
interval is below 1e-10 (1e-5 below 64 bits), steps below 1e-8 raised to 1e-8 below 64
bits, and an inverse-Hessian update skipped where ``y.s`` is not finite. Every loop is
``fnx.lax.while_loop``, so ``minimize`` runs under ``jit``.

``status``: 0 converged (``|g|_norm < gtol``), 1 ``maxiter`` reached, 3 the zoom
failed, 5 the line search ran out of steps. ``options``: ``maxiter`` (default
``200 * x0.size``), ``norm`` (default inf), ``gtol`` (default 1e-5) and
``line_search_maxiter``. Unlike JAX, ``tol`` is not ignored: it sets ``gtol`` (unless
``options`` does), ``method`` defaults to "BFGS", and unknown options raise TypeError
naming the allowed ones.

``method="l-bfgs-experimental-do-not-rely-on-this"`` (JAX's name; "L-BFGS" is accepted
too) runs limited-memory BFGS with JAX's options (``maxiter``, ``norm``, ``maxcor``,
``ftol``, ``gtol``, ``maxfun``, ``maxgrad``, ``maxls``) and statuses; ``hess_inv`` is
None.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..errors import ShapeError
from ..numpy.util import promote
from ..transforms.vjp import value_and_grad

__all__ = ["minimize", "OptimizeResults"]


class OptimizeResults(NamedTuple):
    """The result of ``minimize`` (JAX's fields): ``x`` the solution, ``success``,
    ``status`` (see the module docstring), ``fun`` and ``jac`` at ``x``, ``hess_inv``
    the final inverse-Hessian estimate, ``nfev``/``njev`` the function and gradient
    evaluations, ``nit`` the iterations."""
    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


def _i32(v):
    """A counter: the default int (int32; int64 with jax_enable_x64, as JAX's)."""
    return fnp.asarray(v, dtype=dtypes.default_int())


def _where(c, new, old):
    """``new`` where ``c`` else ``old``, over matching dicts of arrays."""
    return {k: fnp.where(c, new[k], old[k]) for k in new}


# --- line search ----------------------------------------------------------------------------

def _cubic_min(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    denom = (db * dc) ** 2 * (db - dc)
    A = (dc * dc * rb - db * db * rc) / denom
    B = (-(dc ** 3) * rb + db ** 3 * rc) / denom
    return a + (-B + fnp.sqrt(B * B - 3 * A * fpa)) / (3 * A)


def _quad_min(a, fa, fpa, b, fb):
    """The minimizer of the quadratic through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    B = (fb - fa - fpa * db) / (db * db)
    return a - fpa / (2 * B)


def _zoom(phi, armijo_fails, curvature_holds, lo, hi, g0, skip, tiny):
    """Algorithm 3.6: shrink [lo, hi] (dicts a, f, df) until a step meets both Wolfe
    conditions. ``skip``: do not run at all (the caller does not need this zoom)."""
    dtype = lo["a"].dtype
    s = dict(done=fnp.asarray(False), failed=fnp.asarray(False), j=_i32(0),
             a_lo=lo["a"], f_lo=lo["f"], df_lo=lo["df"],
             a_hi=hi["a"], f_hi=hi["f"], df_hi=hi["df"],
             a_rec=(lo["a"] + hi["a"]) / 2, f_rec=(lo["f"] + hi["f"]) / 2,
             a_star=fnp.asarray(1.0, dtype), f_star=lo["f"], df_star=lo["df"], g_star=g0,
             nfev=_i32(0))

    def body(s):
        # JAX takes a_hi - a_lo signed here, so a zoom whose bracket is reversed (always
        # the second zoom of algorithm 3.5, and the first after a swap) fails at once and
        # stops BFGS (status 3); the bracket's length is meant, which changes nothing
        # where JAX's zoom does not fail
        width = fnp.abs(s["a_hi"] - s["a_lo"])
        left, right = fnp.minimum(s["a_hi"], s["a_lo"]), fnp.maximum(s["a_hi"], s["a_lo"])
        failed = s["failed"] | (width <= tiny)
        cubic = _cubic_min(s["a_lo"], s["f_lo"], s["df_lo"], s["a_hi"], s["f_hi"],
                           s["a_rec"], s["f_rec"])
        use_cubic = (s["j"] > 0) & (cubic > left + 0.2 * width) & (cubic < right - 0.2 * width)
        quad = _quad_min(s["a_lo"], s["f_lo"], s["df_lo"], s["a_hi"], s["f_hi"])
        use_quad = ~use_cubic & (quad > left + 0.1 * width) & (quad < right - 0.1 * width)
        a_j = fnp.where(use_cubic, cubic,
                        fnp.where(use_quad, quad, (s["a_lo"] + s["a_hi"]) / 2))
        f_j, df_j, g_j = phi(a_j)

        to_hi = armijo_fails(a_j, f_j) | (f_j >= s["f_lo"])
        accept = curvature_holds(df_j) & ~to_hi
        hi_to_lo = (df_j * (s["a_hi"] - s["a_lo"]) >= 0) & ~to_hi & ~accept
        to_lo = ~to_hi & ~accept

        new = dict(s, failed=failed, nfev=s["nfev"] + 1, j=s["j"] + 1)
        new.update(_where(to_hi, dict(a_hi=a_j, f_hi=f_j, df_hi=df_j, a_rec=s["a_hi"],
                                      f_rec=s["f_hi"]),
                          {k: new[k] for k in ("a_hi", "f_hi", "df_hi", "a_rec", "f_rec")}))
        new.update(_where(accept, dict(a_star=a_j, f_star=f_j, df_star=df_j, g_star=g_j),
                          {k: new[k] for k in ("a_star", "f_star", "df_star", "g_star")}))
        new["done"] = new["done"] | accept
        old = {k: new[k] for k in ("a_hi", "f_hi", "df_hi", "a_rec", "f_rec")}
        new.update(_where(hi_to_lo, dict(a_hi=new["a_lo"], f_hi=new["f_lo"],
                                         df_hi=new["df_lo"], a_rec=new["a_hi"],
                                         f_rec=new["f_hi"]), old))
        new.update(_where(to_lo & ~hi_to_lo, dict(a_rec=new["a_lo"], f_rec=new["f_lo"]),
                          {k: new[k] for k in ("a_rec", "f_rec")}))
        new.update(_where(to_lo, dict(a_lo=a_j, f_lo=f_j, df_lo=df_j),
                          {k: new[k] for k in ("a_lo", "f_lo", "df_lo")}))
        new["failed"] = new["failed"] | (new["j"] >= 30)
        return new

    return lax.while_loop(lambda s: ~s["done"] & ~skip & ~s["failed"], body, s)


def _line_search(fun_vg, xk, pk, f0, f_prev, g0, maxiter, c1=1e-4, c2=0.9):
    """Algorithm 3.5 (strong Wolfe), JAX's variant: returns (failed, status, nfev, alpha,
    f, g)."""
    dtype = xk.dtype
    tiny = 1e-10 if np.finfo(dtype).bits >= 64 else 1e-5

    def phi(t):
        f, g = fun_vg(xk + t.astype(dtype) * pk)
        return f.astype(dtype), fnp.real(fnp.dot(g, pk)).astype(dtype), g.astype(dtype)

    df0 = fnp.real(fnp.dot(g0, pk))
    if f_prev is None:
        start = fnp.asarray(1.0, dtype)
    else:
        start = 1.01 * 2 * (f0 - f_prev) / df0
        start = fnp.where(start > 1, fnp.asarray(1.0, dtype), start).astype(dtype)

    def armijo_fails(a, f):
        return f > f0 + c1 * a * df0

    def curvature_holds(df):
        return fnp.abs(df) <= -c2 * df0

    s = dict(done=fnp.asarray(False), failed=fnp.asarray(False), i=_i32(1),
             a_prev=fnp.asarray(0.0, dtype), f_prev=f0, df_prev=df0, nfev=_i32(0),
             a_star=fnp.asarray(0.0, dtype), f_star=f0, df_star=df0, g_star=g0)

    def body(s):
        a_i = fnp.where(s["i"] == 1, start, s["a_prev"] * 2)
        f_i, df_i, g_i = phi(a_i)
        zoom_up = armijo_fails(a_i, f_i) | ((f_i >= s["f_prev"]) & (s["i"] > 1))
        accept = curvature_holds(df_i) & ~zoom_up
        zoom_down = (df_i >= 0) & ~zoom_up & ~accept
        prev = dict(a=s["a_prev"], f=s["f_prev"], df=s["df_prev"])
        cur = dict(a=a_i, f=f_i, df=df_i)
        z1 = _zoom(phi, armijo_fails, curvature_holds, prev, cur, g0, ~zoom_up, tiny)
        z2 = _zoom(phi, armijo_fails, curvature_holds, cur, prev, g0, ~zoom_down, tiny)
        keys = ("a_star", "f_star", "df_star", "g_star")
        new = dict(s, nfev=s["nfev"] + 1 + z1["nfev"] + z2["nfev"])
        new.update(_where(zoom_up, {k: z1[k] for k in keys}, {k: new[k] for k in keys}))
        new.update(_where(accept, dict(a_star=a_i, f_star=f_i, df_star=df_i, g_star=g_i),
                          {k: new[k] for k in keys}))
        new.update(_where(zoom_down, {k: z2[k] for k in keys}, {k: new[k] for k in keys}))
        new["done"] = s["done"] | zoom_up | accept | zoom_down
        new["failed"] = s["failed"] | (zoom_up & z1["failed"]) | (zoom_down & z2["failed"])
        new.update(i=s["i"] + 1, a_prev=a_i, f_prev=f_i, df_prev=df_i)
        return new

    s = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, s)
    status = fnp.where(s["failed"], _i32(1), fnp.where(s["i"] > maxiter, _i32(3), _i32(0)))
    alpha = s["a_star"]
    if np.finfo(dtype).bits != 64:   # keep float32 steps from stalling at zero
        alpha = fnp.where(fnp.abs(alpha) < 1e-8, fnp.sign(alpha) * 1e-8, alpha).astype(dtype)
    return s["failed"] | ~s["done"], status, s["nfev"], alpha, s["f_star"], s["g_star"]


# --- BFGS -----------------------------------------------------------------------------------

def _norm(g, ord):
    if ord == np.inf:
        return fnp.max(fnp.abs(g))
    if ord == -np.inf:
        return fnp.min(fnp.abs(g))
    return fnp.sum(fnp.abs(g) ** ord) ** (1.0 / ord)


def _bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    n = x0.shape[0]
    maxiter = 200 * n if maxiter is None else int(maxiter)
    fun_vg = value_and_grad(fun)
    f0, g0 = fun_vg(x0)
    dtype = x0.dtype
    s = dict(converged=_norm(g0, norm) < gtol, failed=fnp.asarray(False), k=_i32(0),
             nfev=_i32(1), ngev=_i32(1), x=x0, f=f0.astype(dtype), g=g0.astype(dtype),
             H=fnp.eye(n, dtype=dtype),
             f_prev=(f0 + fnp.sqrt(fnp.sum(g0 * g0)) / 2).astype(dtype), ls_status=_i32(0))

    def body(s):
        p = -fnp.dot(s["H"], s["g"])
        failed, ls_status, nfev, alpha, f1, g1 = _line_search(
            fun_vg, s["x"], p, s["f"], s["f_prev"], s["g"], line_search_maxiter)
        step = alpha * p
        y = g1 - s["g"]
        rho = 1 / fnp.dot(y, step)
        w = fnp.eye(n, dtype=dtype) - rho * step[:, None] * y[None, :]
        H1 = w @ s["H"] @ w.T + rho * step[:, None] * step[None, :]
        return dict(converged=_norm(g1, norm) < gtol, failed=failed, k=s["k"] + 1,
                    nfev=s["nfev"] + nfev, ngev=s["ngev"] + nfev, x=s["x"] + step,
                    f=f1, g=g1, H=fnp.where(fnp.isfinite(rho), H1, s["H"]), f_prev=s["f"],
                    ls_status=ls_status)

    s = lax.while_loop(lambda s: ~s["converged"] & ~s["failed"] & (s["k"] < maxiter),
                       body, s)
    status = fnp.where(s["converged"], _i32(0),
                       fnp.where(s["k"] == maxiter, _i32(1),
                                 fnp.where(s["failed"], 2 + s["ls_status"], _i32(-1))))
    return s, status


# --- L-BFGS ---------------------------------------------------------------------------------

def _lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
           gtol=1e-5, maxfun=None, maxgrad=None, maxls=20):
    """Limited-memory BFGS (Nocedal and Wright, algorithm 7.4, the two-loop recursion over
    the last ``maxcor`` pairs), JAX's variant: the line search starts at a unit step;
    status 0 converged, 1 maxiter, 2 maxfun, 3 maxgrad, 4 the decrease fell below
    ``ftol``, 5 the line search failed."""
    n = x0.shape[0]
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = 200 * n
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad
    dtype = x0.dtype
    fun_vg = value_and_grad(fun)
    f0, g0 = fun_vg(x0)
    m = int(maxcor)
    s = dict(converged=fnp.asarray(False), failed=fnp.asarray(False), k=_i32(0), nfev=_i32(1),
             ngev=_i32(1), x=x0, f=f0.astype(dtype), g=g0.astype(dtype),
             S=fnp.zeros((m, n), dtype=dtype), Y=fnp.zeros((m, n), dtype=dtype),
             rho=fnp.zeros((m,), dtype=dtype), gamma=fnp.asarray(1.0, dtype), status=_i32(0),
             ls_status=_i32(0))

    def direction(s):
        used = fnp.minimum(s["k"], m)
        q = -s["g"]

        def back(j, carry):
            q, alphas = carry
            i = m - 1 - j
            a = s["rho"][i] * fnp.dot(s["S"][i], q)
            return q - a * s["Y"][i], alphas.at[i].set(a)

        q, alphas = lax.fori_loop(0, used, back, (q, fnp.zeros((m,), dtype=dtype)))
        q = s["gamma"] * q

        def forward(j, q):
            i = m - used + j
            b = s["rho"][i] * fnp.dot(s["Y"][i], q)
            return q + (alphas[i] - b) * s["S"][i]

        return lax.fori_loop(0, used, forward, q)

    def push(history, new):
        return fnp.concatenate([history[1:], new[None]], axis=0)

    def body(s):
        p = direction(s)
        failed, ls_status, nfev, alpha, f1, g1 = _line_search(
            fun_vg, s["x"], p, s["f"], None, s["g"], maxls)
        step = alpha * p
        y = g1 - s["g"]
        sy = fnp.dot(y, step)
        status = _i32(0)
        status = fnp.where(s["f"] - f1 < ftol, _i32(4), status)
        status = fnp.where(s["ngev"] >= maxgrad, _i32(3), status)
        status = fnp.where(s["nfev"] >= maxfun, _i32(2), status)
        status = fnp.where(s["k"] >= maxiter, _i32(1), status)
        status = fnp.where(failed, _i32(5), status)
        converged = _norm(g1, norm) < gtol
        return dict(converged=converged, failed=(status > 0) & ~converged, k=s["k"] + 1,
                    nfev=s["nfev"] + nfev, ngev=s["ngev"] + nfev, x=s["x"] + step,
                    f=f1.astype(dtype), g=g1.astype(dtype), S=push(s["S"], step),
                    Y=push(s["Y"], y), rho=push(s["rho"], (1 / sy).astype(dtype)),
                    gamma=(sy / fnp.dot(y, y)).astype(dtype),
                    status=fnp.where(converged, _i32(0), status), ls_status=ls_status)

    s = lax.while_loop(lambda s: ~s["converged"] & ~s["failed"], body, s)
    return s, s["status"]


_OPTIONS = ("maxiter", "norm", "gtol", "line_search_maxiter")
_LBFGS_OPTIONS = ("maxiter", "norm", "maxcor", "ftol", "gtol", "maxfun", "maxgrad", "maxls")
_LBFGS_NAMES = ("l-bfgs-experimental-do-not-rely-on-this", "l-bfgs", "l-bfgs-b")


def minimize(fun, x0, args=(), *, method="BFGS", tol=None, options=None):
    """Minimize ``fun(x, *args)`` (a real scalar) over the 1-D array ``x`` from ``x0``;
    returns ``OptimizeResults``. Gradients come from ``fnx.value_and_grad``, so ``fun``
    must be differentiable. Runs under ``jit`` (``fun`` and the options are static)."""
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple, got {type(args).__name__}")
    name = method.lower() if isinstance(method, str) else None
    if name not in ("bfgs",) + _LBFGS_NAMES:
        raise ValueError(f"minimize: method {method!r} is not supported; fnx has 'BFGS' and "
                         "'l-bfgs-experimental-do-not-rely-on-this' (also 'L-BFGS')")
    lbfgs = name in _LBFGS_NAMES
    allowed = _LBFGS_OPTIONS if lbfgs else _OPTIONS
    options = dict(options or {})
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"minimize: unknown options {unknown}; {method} takes "
                        f"{', '.join(allowed)}")
    if tol is not None:
        options.setdefault("gtol", tol)
    (x0,) = promote("minimize", x0, to_inexact=True)
    if x0.ndim != 1 or x0.dtype.kind != "f":
        raise ShapeError(f"minimize: x0 must be a 1-D real array (as JAX), got "
                         f"{x0.dtype}{list(x0.shape)}; ravel it and reshape inside fun")

    def f(x):
        out = fnp.asarray(fun(x, *args))
        if out.shape != ():
            raise ShapeError(f"minimize: fun must return a scalar, got shape {out.shape}")
        return out

    s, status = (_lbfgs if lbfgs else _bfgs)(f, x0, **options)
    return OptimizeResults(x=s["x"], success=s["converged"] & ~s["failed"], status=status,
                           fun=s["f"], jac=s["g"], hess_inv=None if lbfgs else s["H"],
                           nfev=s["nfev"], njev=s["ngev"], nit=s["k"])
