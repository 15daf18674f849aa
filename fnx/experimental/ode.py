"""``odeint``: ordinary differential equations integrated with adaptive steps, as
``jax.experimental.ode.odeint``.

The integrator is Dormand and Prince's explicit Runge-Kutta pair of orders 5 and 4 (Math.
Comp. 46, 1986), seven stages with the last one reused as the next step's first: each
step's local error is estimated by the difference of the two orders, a step whose RMS
error relative to ``atol + rtol * |y|`` exceeds 1 is retried shorter, and the next step's
length follows the error (safety 0.9, between 0.2 and 10 times the last). The first step
is Hairer, Norsett and Wanner's estimate (Solving ODEs I, II.4). Values at the requested
times come from the quartic through each step (its ends, their slopes and a midpoint from
Shampine's dense output), so the steps are chosen by the tolerances alone, not by ``t``.

Gradients are the adjoint method (Chen et al., "Neural Ordinary Differential Equations",
2018, appendix C): the backward pass integrates the state, its cotangent and the
cotangents of ``args`` and of the times backwards from each requested time to the one
before, with the same tolerances. It stores nothing of the forward steps, so memory does
not grow with their number; its gradients are those of the exact solution, accurate to
the tolerances (not the derivative of the forward pass's arithmetic).

``func(y, t, *args)`` may close over traced values (parameters of an enclosing ``grad``):
they are found by tracing it once and given cotangents like ``args``. The program runs
under ``jit`` with the function and the tolerances static, compiled once per function,
tolerances and argument shapes.
"""
from __future__ import annotations

import operator
import weakref

import numpy as np

from .. import lax
from .. import numpy as jnp
from .. import tree_util
from .._api import closure_convert
from ..flatten_util import ravel_pytree
from ..transforms.custom import custom_vjp
from ..transforms.jit import jit
from ..transforms.vjp import vjp
from ..transforms.vmap import vmap

__all__ = ["odeint"]

# The Runge-Kutta pair: the stages' times as fractions of the step, the weights of the
# earlier stages in each stage's state (rows of the lower-triangular tableau, padded to
# the seven stages), the weights of the fifth-order solution, and their difference to the
# embedded fourth-order solution's weights (the error estimate).
_NODES = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_TABLEAU = (
    (1 / 5, 0, 0, 0, 0, 0, 0),
    (3 / 40, 9 / 40, 0, 0, 0, 0, 0),
    (44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0),
    (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0))
_ORDER5 = (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0)
_ERROR = (35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60)
# the state at the middle of a step, from its stages (Shampine's continuous extension)
_MIDPOINT = tuple(c / 2 for c in (
    6025192743 / 30085553152, 0, 51252292925 / 65400821598, -2691868925 / 45128329728,
    187940372067 / 1594534317056, -1776094331 / 19743644256, 11237099 / 235043384))


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf):
    """The solution of ``dy/dt = func(y, t, *args)``, ``y(t[0]) = y0``, at the times ``t``.

    ``y0`` is an array or a pytree of arrays; ``t`` a 1-D float array of increasing times.
    ``args`` are arrays or scalars (pytrees of them) passed on to ``func``, differentiable
    like ``y0`` and ``t``. ``rtol``/``atol``: the local error tolerances; ``mxstep``: at
    most this many steps (accepted or not) between two requested times, after which the
    integration stops where it got to; ``hmax``: the longest step. The result has
    ``y0``'s structure, each leaf with a new leading axis of ``len(t)``.
    """
    for leaf in tree_util.tree_leaves(args):
        if not _is_array_like(leaf):
            raise TypeError(f"odeint: the extra arguments *args must be arrays or scalars "
                            f"(pytrees of them), got {type(leaf).__name__} {leaf!r}; pass "
                            "other values by closing over them in func")
    t = jnp.asarray(t)
    if t.ndim != 1 or not jnp.issubdtype(t.dtype, jnp.floating):
        raise TypeError(f"odeint: t must be a 1-D array of float times, got shape "
                        f"{tuple(t.shape)} dtype {t.dtype}")
    converted, hoisted = _converted(func, y0, t[0], args)
    return _solve(converted, rtol, atol, mxstep, hmax, y0, t, *args, *hoisted)


def _is_array_like(x):
    return isinstance(x, (bool, int, float, complex, np.generic, np.ndarray)) or (
        hasattr(x, "shape") and hasattr(x, "dtype"))


_CONVERTED = weakref.WeakKeyDictionary()


def _converted(func, y0, t0, args):
    """``func`` with the traced values it closes over made trailing arguments
    (``closure_convert``), and those values. Where it closes over none, the converted
    function is kept per function and argument types, so that repeated calls reuse one
    compiled solver (as ``jit`` keeps one per function)."""
    example = (y0, t0, *args)
    leaves, tree = tree_util.tree_flatten(example)
    key = (tree, tuple((tuple(np.shape(x)), str(jnp.result_type(x))) for x in leaves))
    try:
        per_func = _CONVERTED.setdefault(func, {})
    except TypeError:              # not weakly referable: convert on every call
        per_func = {}
    hit = per_func.get(key)
    if hit is not None:
        return hit, []
    converted, hoisted = closure_convert(func, *example)
    if not hoisted:
        per_func[key] = converted
    return converted, hoisted


def _solve_flat(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y0_flat, unravel = ravel_pytree(y0)
    ys = _integrate(_Raveled(func, unravel, y0), rtol, atol, mxstep, hmax, y0_flat, ts, *args)
    return vmap(unravel)(ys)


_solve = jit(_solve_flat, static_argnums=(0, 1, 2, 3, 4))


class _Raveled:
    """``func`` on the raveled state: a vector in, a vector out. Equal (and hashed alike)
    for the same function and state structure, so the caches keyed on it (the adjoint
    system's, the solver's compiled programs) hold across traces."""

    def __init__(self, func, unravel, y0):
        self.func, self.unravel = func, unravel
        leaves, tree = tree_util.tree_flatten(y0)
        self.key = (func, tree, tuple((tuple(np.shape(x)), str(jnp.result_type(x)))
                                      for x in leaves))

    def __call__(self, y, t, *args):
        return ravel_pytree(self.func(self.unravel(y), t, *args))[0]

    def __eq__(self, other):
        return isinstance(other, _Raveled) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


def _combine(weights, ks, dtype):
    """``sum(w * k)`` over the stages ``ks`` whose weight is not zero, as one product of
    the stacked stages with the weights (a constant of ``dtype``)."""
    used = [j for j, w in enumerate(weights) if w != 0 and j < len(ks)]
    w = jnp.asarray(np.asarray([weights[j] for j in used], np.float64), dtype=dtype)
    return jnp.dot(w, jnp.stack([ks[j] for j in used]))


def _rk_step(fun, y0, f0, t0, dt):
    """One Dormand-Prince step from ``(t0, y0)`` with ``f0 = fun(y0, t0)``: the
    fifth-order state, its slope (the last stage), the error estimate and the stages."""
    dty = dt.astype(f0.dtype)
    ks = [f0]
    for i in range(1, 7):
        yi = y0 + dty * _combine(_TABLEAU[i - 1], ks, f0.dtype)
        ks.append(fun(yi, t0 + dt * jnp.asarray(_NODES[i - 1], dt.dtype)))
    y1 = dty * _combine(_ORDER5, ks, f0.dtype) + y0
    error = dty * _combine(_ERROR, ks, f0.dtype)
    return y1, ks[-1], error, ks


def _quartic(y0, y1, ks, dt):
    """The coefficients (highest power first) of the quartic in the fraction of the step
    through ``y0``, ``y1``, the midpoint state and the slopes at both ends."""
    dty = dt.astype(y0.dtype)
    ymid = y0 + dty * _combine(_MIDPOINT, ks, y0.dtype)
    d0, d1 = dty * ks[0], dty * ks[-1]
    a = -2.0 * d0 + 2.0 * d1 - 8.0 * y0 - 8.0 * y1 + 16.0 * ymid
    b = 5.0 * d0 - 3.0 * d1 + 18.0 * y0 + 14.0 * y1 - 32.0 * ymid
    c = -4.0 * d0 + d1 - 11.0 * y0 - 5.0 * y1 + 16.0 * ymid
    return jnp.stack([a, b, c, d0, y0])


def _first_step(fun, t0, y0, f0, rtol, atol, order=4):
    """Hairer, Norsett and Wanner's starting step: small enough that an explicit Euler
    step changes ``y`` and ``f`` by about 1% of their scale."""
    scale = (atol + jnp.abs(y0) * rtol).astype(y0.dtype)
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(y0 + h0.astype(y0.dtype) * f0, t0 + h0.astype(t0.dtype))
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return jnp.minimum(100.0 * h0, h1)


def _error_ratio(error, rtol, atol, y0, y1):
    """The RMS of the error estimate over its tolerance (at most 1: accept the step)."""
    tol = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    r = error / tol.astype(error.dtype)
    r2 = r.real ** 2 + r.imag ** 2 if jnp.iscomplexobj(r) else r ** 2
    return jnp.sqrt(jnp.mean(r2))


def _next_step(dt, ratio, safety=0.9, grow=10.0, shrink=0.2, order=5.0):
    """The next step's length after one of ``dt`` whose error ratio was ``ratio``: a
    rejected step (ratio > 1) shrinks by at most 5x, any step grows by at most 10x."""
    least = jnp.where(ratio < 1, 1.0, shrink)
    factor = jnp.minimum(grow, jnp.maximum(ratio ** (-1.0 / order) * safety, least))
    return jnp.where(ratio == 0, dt * grow, dt * factor)


def _forward(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    """The solution at ``ts`` of the raveled system (``y0`` a vector)."""
    def fun(y, t):
        return func(y, t, *args)

    def to_target(carry, target):
        def more(state):
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0)

        def step(state):
            i, y, f, t, dt, last_t, coeffs = state
            y1, f1, error, ks = _rk_step(fun, y, f, t, dt)
            ratio = _error_ratio(error, rtol, atol, y, y1)
            new_coeffs = _quartic(y, y1, ks, dt)
            dt_next = jnp.clip(_next_step(dt, ratio), 0.0, hmax).astype(dt.dtype)
            accept = ratio <= 1.0
            taken = (y1, f1, t + dt, t, new_coeffs)
            kept = (y, f, t, last_t, coeffs)
            y, f, t, last_t, coeffs = (jnp.where(accept, a, b) for a, b in zip(taken, kept))
            return i + 1, y, f, t, dt_next, last_t, coeffs

        _, *carry = lax.while_loop(more, step, (0, *carry))
        _, _, t, _, last_t, coeffs = carry
        fraction = (target - last_t) / (t - last_t)
        return tuple(carry), jnp.polyval(coeffs, fraction.astype(coeffs.dtype))

    f0 = fun(y0, ts[0])
    # steps in the times' dtype, whatever the state's (float64 states, float32 times)
    dt = jnp.clip(_first_step(fun, ts[0], y0, f0, rtol, atol), 0.0, hmax).astype(ts.dtype)
    coeffs = jnp.stack([y0] * 5)
    _, ys = lax.scan(to_target, (y0, f0, ts[0], dt, ts[0], coeffs), ts[1:])
    return jnp.concatenate([y0[None], ys])


_integrate = custom_vjp(_forward, nondiff_argnums=(0, 1, 2, 3, 4))

_AUGMENTED = weakref.WeakKeyDictionary()


def _augmented(func):
    """The adjoint system of ``func`` in reversed time ``s = -t``: the state runs
    backwards, and the cotangents of the state, of the start time and of ``args`` follow
    it (d(y_bar)/ds = y_bar . df/dy, d(args_bar)/ds = y_bar . df/dargs). One per ``func``,
    so the backward passes of repeated solves reuse one compiled solver."""
    fn = _AUGMENTED.get(func)
    if fn is None:
        def fn(state, s, *args):
            y, y_bar = state[0], state[1]
            dy, pullback = vjp(func, y, -s, *args)
            return (-dy, *pullback(y_bar))
        fn.__name__ = f"adjoint_of_{getattr(func.func, '__name__', 'func')}"
        _AUGMENTED[func] = fn
    return fn


def _forward_rule(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    # through the custom rule again, so that a derivative of this rule (a second-order
    # reverse derivative) is the adjoint method's too, not one through the while_loop
    ys = _integrate(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _backward_rule(func, rtol, atol, mxstep, hmax, residuals, g):
    ys, ts, args = residuals
    adjoint = _augmented(func)

    def back_one(carry, i):
        y_bar, t0_bar, args_bar = carry
        # the output at ts[i] moves with ts[i] at the rate of the solution's slope
        t_bar = jnp.dot(func(ys[i], ts[i], *args), g[i]).real.astype(ts.dtype)
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            adjoint, (ys[i], y_bar, t0_bar, args_bar), jnp.stack([-ts[i], -ts[i - 1]]),
            *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_util.tree_map(operator.itemgetter(1),
                                                     (y_bar, t0_bar, args_bar))
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    start = (g[-1], jnp.zeros((), ts.dtype), tree_util.tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), ts_bar_rev = lax.scan(
        back_one, start, jnp.arange(ts.shape[0] - 1, 0, -1))
    ts_bar = jnp.concatenate([t0_bar[None], ts_bar_rev[::-1]])
    return (y_bar, ts_bar, *args_bar)


_integrate.defvjp(_forward_rule, _backward_rule)
