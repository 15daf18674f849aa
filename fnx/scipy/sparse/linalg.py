"""``fnx.scipy.sparse.linalg``: the Krylov solvers of ``jax.scipy.sparse.linalg``:
``cg`` (conjugate gradients, for Hermitian positive definite ``A``), ``bicgstab`` and
``gmres`` (restarted, any nonsingular ``A``).

``A`` is a matrix or a function computing ``A @ x``; ``b`` an array or a pytree of
arrays (then ``A`` is a function of such pytrees, and ``x`` comes back with ``b``'s
structure); ``M`` an optional preconditioner, a matrix or function approximating
``A^-1``. Each solver stops when ``|r| <= max(tol |b|, atol)`` or after ``maxiter``
iterations (``gmres``: restart cycles) and returns ``(x, None)`` as JAX does (no
convergence info). The loops are ``fnx.lax.while_loop``s, so the solvers jit and
vmap; as JAX's, they run under ``lax.custom_linear_solve``, so reverse mode (``grad``,
``vjp``) solves the transposed system instead of differentiating the loop (forward
mode is not available through it in fnx: see ``fnx.implicit``).
"""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from ... import tree_util
from ...core import dtypes
from ...errors import ShapeError

__all__ = ["cg", "bicgstab", "gmres"]


def _flat(name, b, x0, A, M):
    """Flatten ``b`` (a pytree) into one vector and wrap ``A``, ``M`` to act on vectors.
    Returns (b_vec, x0_vec, matvec, precond, unflatten)."""
    leaves, tree = tree_util.tree_flatten(b)
    if not leaves:
        raise ShapeError(f"{name}: b has no arrays")
    leaves = [fnp.asarray(v) for v in leaves]
    dtype = np.result_type(*[v.dtype for v in leaves])
    if dtype.kind not in "fc":
        dtype = dtypes.default_float()
    shapes = [v.shape for v in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    offsets = np.cumsum([0] + sizes)

    def flat(tree_val):
        vals = tree_util.tree_leaves(tree_val)
        return fnp.concatenate([fnp.ravel(fnp.asarray(v)).astype(dtype) for v in vals])

    def unflat(vec):
        parts = [vec[offsets[i]:offsets[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]
        return tree_util.tree_unflatten(tree, parts)

    def as_op(op, what):
        if op is None:
            return lambda v: v
        if callable(op):
            return lambda v: flat(op(unflat(v)))
        m = fnp.asarray(op)
        if len(leaves) != 1 or len(shapes[0]) != 1 or m.shape != (sizes[0], sizes[0]):
            raise ShapeError(f"{name}: {what} as a matrix must be (n, n) for a vector b of "
                             f"shape (n,); got {what} {m.shape} and b "
                             f"{shapes[0] if len(leaves) == 1 else 'a pytree'}. Otherwise "
                             "pass a function")
        m = m.astype(dtype)
        return lambda v: fnp.matmul(m, v)

    bv = flat(b)
    if x0 is None:
        xv = fnp.zeros_like(bv)
    else:
        if tree_util.tree_structure(x0) != tree:
            raise ShapeError(f"{name}: x0 must have b's structure")
        xv = flat(x0)
    return bv, xv, as_op(A, "A"), as_op(M, "M"), unflat


def _dot(x, y):
    return fnp.sum(fnp.conj(x) * y) if x.dtype.kind == "c" else fnp.sum(x * y)


def _norm2(x):
    return fnp.real(_dot(x, x))


def _threshold(b, tol, atol):
    return fnp.maximum(tol * tol * _norm2(b), fnp.asarray(atol * atol, dtype=_norm2(b).dtype))


def _cg_iterations(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    bv, xv, matvec, precond, unflat = _flat("cg", b, x0, A, M)
    maxiter = 10 * bv.shape[0] if maxiter is None else int(maxiter)
    stop = _threshold(bv, tol, atol)
    r = bv - matvec(xv)
    z = precond(r)
    state = dict(x=xv, r=r, p=z, gamma=_dot(r, z), k=fnp.asarray(0, dtypes.default_int()))

    def body(s):
        ap = matvec(s["p"])
        alpha = s["gamma"] / _dot(s["p"], ap)
        x = s["x"] + alpha * s["p"]
        r = s["r"] - alpha * ap
        z = precond(r)
        gamma = _dot(r, z)
        p = z + (gamma / s["gamma"]) * s["p"]
        return dict(x=x, r=r, p=p, gamma=gamma, k=s["k"] + 1)

    out = lax.while_loop(lambda s: (_norm2(s["r"]) > stop) & (s["k"] < maxiter), body, state)
    return unflat(out["x"]), None


def _bicgstab_iterations(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    bv, xv, matvec, precond, unflat = _flat("bicgstab", b, x0, A, M)
    maxiter = 10 * bv.shape[0] if maxiter is None else int(maxiter)
    stop = _threshold(bv, tol, atol)
    r = bv - matvec(xv)
    one = fnp.ones((), dtype=bv.dtype)
    state = dict(x=xv, r=r, rhat=r, p=fnp.zeros_like(r), v=fnp.zeros_like(r), rho=one,
                 alpha=one, omega=one, k=fnp.asarray(0, dtypes.default_int()),
                 broken=fnp.asarray(False))

    def body(s):
        rho = _dot(s["rhat"], s["r"])
        beta = (rho / s["rho"]) * (s["alpha"] / s["omega"])
        p = s["r"] + beta * (s["p"] - s["omega"] * s["v"])
        phat = precond(p)
        v = matvec(phat)
        alpha = rho / _dot(s["rhat"], v)
        h = s["x"] + alpha * phat
        sres = s["r"] - alpha * v
        shat = precond(sres)
        t = matvec(shat)
        omega = _dot(t, sres) / _dot(t, t)
        x = h + omega * shat
        r = sres - omega * t
        # a step whose residual after half of it is already small stops at h
        done_half = _norm2(sres) <= stop
        x = fnp.where(done_half, h, x)
        r = fnp.where(done_half, sres, r)
        broken = (rho == 0) | (omega == 0) | ~fnp.isfinite(fnp.real(alpha))
        keep = lambda new, old: fnp.where(broken, old, new)
        return dict(x=keep(x, s["x"]), r=keep(r, s["r"]), rhat=s["rhat"], p=p, v=v, rho=rho,
                    alpha=alpha, omega=omega, k=s["k"] + 1, broken=broken)

    out = lax.while_loop(
        lambda s: (_norm2(s["r"]) > stop) & (s["k"] < maxiter) & ~s["broken"], body, state)
    return unflat(out["x"]), None


def _gmres_iterations(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
                      solve_method="batched"):
    if solve_method not in ("batched", "incremental"):
        raise ValueError(f"gmres: solve_method must be 'batched' or 'incremental', got "
                         f"{solve_method!r}")
    bv, xv, matvec, precond, unflat = _flat("gmres", b, x0, A, M)
    n = bv.shape[0]
    restart = max(1, min(int(restart), n))
    maxiter = 10 * n if maxiter is None else int(maxiter)
    stop = _threshold(precond(bv), tol, atol)
    dtype = bv.dtype

    def cycle(x):
        r = precond(bv - matvec(x))
        beta = fnp.sqrt(_norm2(r))
        safe_beta = fnp.where(beta > 0, beta, fnp.ones_like(beta))
        V = fnp.zeros((restart + 1, n), dtype=dtype).at[0].set(r / safe_beta.astype(dtype))
        H = fnp.zeros((restart + 1, restart), dtype=dtype)

        def arnoldi(j, carry):
            V, H = carry
            w = precond(matvec(V[j]))

            def orth(i, carry):
                w, H = carry
                use = i <= j
                h = fnp.where(use, _dot(V[i], w), fnp.zeros((), dtype=dtype))
                return w - h * V[i], H.at[i, j].set(fnp.where(use, h, H[i, j]))

            w, H = lax.fori_loop(0, restart, orth, (w, H))
            hn = fnp.sqrt(_norm2(w))
            H = H.at[j + 1, j].set(hn.astype(dtype))
            safe = fnp.where(hn > 0, hn, fnp.ones_like(hn)).astype(dtype)
            V = V.at[j + 1].set(fnp.where(hn > 0, w / safe, fnp.zeros_like(w)))
            return V, H

        V, H = lax.fori_loop(0, restart, arnoldi, (V, H))
        e1 = fnp.zeros((restart + 1,), dtype=dtype).at[0].set(beta.astype(dtype))
        y = fnp.linalg.lstsq(H, e1)[0]
        return x + fnp.matmul(y, V[:restart])

    def resid(x):
        return _norm2(precond(bv - matvec(x)))

    state = dict(x=xv, k=fnp.asarray(0, dtypes.default_int()))
    out = lax.while_loop(lambda s: (resid(s["x"]) > stop) & (s["k"] < maxiter),
                         lambda s: dict(x=cycle(s["x"]), k=s["k"] + 1), state)
    return unflat(out["x"]), None


# --- the public solvers: the iterations, differentiated implicitly ----------------------------

def _implicit(name, iterations, A, b, x0, symmetric, **kw):
    """``iterations`` under ``lax.custom_linear_solve``, as JAX's solvers are: reverse mode
    solves the transposed system (by the same method) instead of differentiating the
    loop, so ``grad`` goes through ``b`` and through what ``A`` is or closes over."""
    from ...implicit import custom_linear_solve
    _flat(name, b, x0, A, kw.get("M"))   # the arguments' checks, with this solver's name
    if callable(A):
        matvec = A
    else:
        a = fnp.asarray(A)
        matvec = lambda v: fnp.matmul(a, v)  # noqa: E731
    solve = lambda mv, rhs: iterations(mv, rhs, x0, **kw)[0]  # noqa: E731
    x = custom_linear_solve(matvec, b, solve, transpose_solve=solve, symmetric=symmetric)
    return x, None


def _real(b):
    return all(fnp.asarray(v).dtype.kind != "c" for v in tree_util.tree_leaves(b))


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Conjugate gradients for Hermitian positive definite ``A`` (preconditioner ``M``,
    also Hermitian positive definite): ``(x, None)``. Real ``A`` is symmetric, so the
    transposed solve of reverse mode is ``cg`` itself (JAX's ``check_symmetric``)."""
    return _implicit("cg", _cg_iterations, A, b, x0, _real(b), tol=tol, atol=atol,
                     maxiter=maxiter, M=M)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """BiCGSTAB (van der Vorst) for nonsingular ``A``: ``(x, None)``. A breakdown
    (``rho`` or ``omega`` zero) stops the iteration where it is."""
    return _implicit("bicgstab", _bicgstab_iterations, A, b, x0, False, tol=tol, atol=atol,
                     maxiter=maxiter, M=M)


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Restarted GMRES: each cycle builds a Krylov basis of ``restart`` vectors of the
    (left-)preconditioned system by Arnoldi with modified Gram-Schmidt and takes the
    least-squares minimizer over it; at most ``maxiter`` cycles. ``solve_method``
    ('batched' or 'incremental') is accepted; both run this method. ``(x, None)``."""
    return _implicit("gmres", _gmres_iterations, A, b, x0, False, tol=tol, atol=atol,
                     restart=restart, maxiter=maxiter, M=M, solve_method=solve_method)
