"""JAX's ``lax.custom_linear_solve`` and ``lax.custom_root``: solves (iterative ones too,
with ``while_loop``s inside) differentiated implicitly instead of through their
iterations.

``custom_linear_solve(matvec, b, solve, transpose_solve)``: ``x = solve(matvec, b)``,
whose derivative comes from ``A x = b``: the cotangent ``c`` of ``x`` gives
``l = transpose_solve(vecmat, c)`` (``vecmat`` the transpose of ``matvec``), ``b``'s
cotangent ``l`` and the cotangents of the values ``matvec`` closes over
``-(d(A x)/d params)^T l``.

``custom_root(f, initial_guess, solve, tangent_solve)``: ``x = solve(f, initial_guess)``
with ``f(x) = 0``; by the implicit function theorem the cotangent ``c`` of ``x`` gives
``l = tangent_solve(J^T, c)`` (``J`` the Jacobian of ``f`` in ``x`` at the root) and the
cotangents of ``f``'s closed-over values ``-(df/d params)^T l``.

Both are ``custom_jvp``s over the values the functions close over (found by
``closure_convert``) whose tangent solve is a ``linear_call`` with the transposed solve
as its transpose, as JAX's primitives are: forward mode runs the tangent solve, reverse
mode (``grad``, ``vjp``, ``jacrev``) the transposed one, at any nesting under ``jit``
and ``vmap``. ``fnx.lax`` gets them from here (this module sits above it).
"""
from __future__ import annotations

from . import lax, tree_util
from ._api import closure_convert, linear_transpose
from .transforms.custom import custom_jvp, linear_call
from .transforms.jvp import jvp

__all__ = ["custom_linear_solve", "custom_root"]


def _zeros_like(tree):
    return tree_util.tree_map(lambda v: v * 0, tree)


def _sub(a, b):
    return tree_util.tree_map(lambda u, v: u - v, a, b)


def _tangents(primals, tangents):
    """Symbolic zero tangents (None) as zeros."""
    return [_zeros_like(p) if t is None else t for p, t in zip(primals, tangents)]


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """``solve(matvec, b)`` (a pytree like ``b``; with ``has_aux``, ``(x, aux)``),
    differentiated implicitly (module docstring): the tangent solves ``A dx = db - dA x``
    with ``solve``, and its transpose with ``transpose_solve`` (or ``solve`` when
    ``symmetric``), needed for reverse mode only."""
    mv, consts = closure_convert(matvec, b)

    def a_of(cs):
        return lambda v: mv(v, *cs)

    def run(b, cs):
        out = solve(a_of(cs), b)
        return out if has_aux else (out, None)

    def tangent_solve(cs, rhs):          # rhs -> A^-1 rhs, linear in rhs
        return run(rhs, cs)[0]

    def transposed_solve(cs, ct):        # ct -> A^-T ct
        a = a_of(cs)
        if symmetric:
            return run(ct, cs)[0]
        if transpose_solve is None:
            raise TypeError("custom_linear_solve: reverse-mode differentiation needs "
                            "transpose_solve (or symmetric=True, when matvec is symmetric)")
        vecmat = linear_transpose(a, ct)   # one cotangent per primal: (A^T v,)
        return transpose_solve(lambda v: vecmat(v)[0], ct)

    @custom_jvp
    def solved(b, cs):
        x, aux = run(b, cs)
        return (x, aux) if has_aux else x

    @solved.defjvp
    def _(primals, tangents):
        b, cs = primals
        db, dcs = _tangents(primals, tangents)
        out = solved(b, cs)   # itself, so higher orders differentiate implicitly too
        x, aux = out if has_aux else (out, None)
        rhs = db
        if cs:   # A's own change: A dx = db - dA x
            _, dax = jvp(lambda *c: mv(x, *c), tuple(cs), tuple(dcs))
            rhs = _sub(db, dax)
        dx = linear_call(tangent_solve, transposed_solve, list(cs), rhs)
        if has_aux:
            return (x, aux), (dx, _zeros_like(aux))
        return x, dx

    return solved(b, list(consts))


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """``solve(f, initial_guess)``, a root of ``f`` (with ``has_aux``, ``(root, aux)``),
    differentiated through the implicit function theorem (module docstring):
    ``tangent_solve(g, y)`` solves the linear ``g(x) = y``; reverse mode hands it the
    transposed Jacobian."""
    fc, consts = closure_convert(f, initial_guess)

    def run(guess, cs):
        out = solve(lambda x: fc(x, *cs), guess)
        return out if has_aux else (out, None)

    @custom_jvp
    def root(guess, cs):
        x, aux = run(lax.stop_gradient(guess), cs)
        return (x, aux) if has_aux else x

    @root.defjvp
    def _(primals, tangents):
        guess, cs = primals
        _, dcs = _tangents(primals, tangents)
        out = root(guess, cs)
        x, aux = out if has_aux else (out, None)
        # f(x(p), p) = 0: J dx = -(df/dp) dp, J the Jacobian of f in x at the root
        if cs:
            _, dfdp = jvp(lambda *c: fc(x, *c), tuple(cs), tuple(dcs))
        else:
            dfdp = _zeros_like(x)
        rhs = tree_util.tree_map(lambda v: -v, dfdp)

        def jac(res, v):
            xr, rcs = res
            return jvp(lambda u: fc(u, *rcs), (xr,), (v,))[1]

        def solve_j(res, r):           # r -> J^-1 r
            return tangent_solve(lambda v: jac(res, v), r)

        def solve_jt(res, ct):         # ct -> J^-T ct
            jt = linear_transpose(lambda v: jac(res, v), ct)
            return tangent_solve(lambda v: jt(v)[0], ct)

        dx = linear_call(solve_j, solve_jt, (x, list(cs)), rhs)
        if has_aux:
            return (x, aux), (dx, _zeros_like(aux))
        return x, dx

    return root(initial_guess, list(consts))


for _name in __all__:
    setattr(lax, _name, globals()[_name])
del _name
