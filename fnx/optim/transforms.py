"""Gradient transformations: the building blocks the optimizers are chained from.

Each function returns a ``GradientTransformation``; its state is a namedtuple of arrays.
Scalars enter the arithmetic as weak Python floats or are cast to each leaf's dtype, so
updates keep the dtypes of the gradients and the state keeps the dtypes of the parameters.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .. import numpy as fnp
from .. import tree_util
from ._base import (EmptyState, GradientTransformation, _as_array, beta, cast_like,
                    check_same_tree, count_as_float, global_norm, hyper, increment,
                    learning_rate_arg, require_params, zero_count, zeros_like_param,
                    full_like_param)

__all__ = ["ScaleByScheduleState", "TraceState", "ScaleByAdamState", "ScaleByRmsState",
           "ScaleByRStdDevState", "ScaleByRssState", "ScaleByLionState",
           "scale", "scale_by_learning_rate", "scale_by_schedule", "trace",
           "add_decayed_weights", "scale_by_adam", "scale_by_rms", "scale_by_rss",
           "scale_by_trust_ratio", "scale_by_lion", "clip", "clip_by_global_norm"]


class ScaleByScheduleState(NamedTuple):
    count: Any          # int32 scalar: updates done so far


class TraceState(NamedTuple):
    trace: Any          # momentum buffer, params' structure


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any             # first moment
    nu: Any             # second moment


class ScaleByRmsState(NamedTuple):
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    mu: Any
    nu: Any


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any


class ScaleByLionState(NamedTuple):
    mu: Any


def _tmap(f, *trees):
    return tree_util.tree_map(f, *trees)


def _keep(new, old):
    """`new` in `old`'s dtype (a state leaf keeps its dtype from step to step)."""
    return new if new.dtype == old.dtype else new.astype(old.dtype)


def _check(where, grads, state_tree):
    check_same_tree(where, "grads", grads, "optimizer state", state_tree)


def _check_params(where, grads, params):
    require_params(where, params)
    check_same_tree(where, "grads", grads, "params", params)


# --- scaling --------------------------------------------------------------------------------

def scale(step_size: float) -> GradientTransformation:
    """Multiply the updates by a constant ``step_size``."""
    step_size = hyper("step_size", step_size, where="scale")
    return GradientTransformation(
        lambda params: EmptyState(),
        lambda updates, state, params=None: (
            _tmap(lambda u: u * cast_like(step_size, u), updates), state))


def scale_by_schedule(step_size_fn: Callable) -> GradientTransformation:
    """Multiply the updates by ``step_size_fn(count)``; the count lives in the state."""
    if not callable(step_size_fn):
        raise TypeError(f"scale_by_schedule: expected a schedule (a function of the step "
                        f"count), got {step_size_fn!r}")

    def init(params):
        return ScaleByScheduleState(zero_count())

    def update(updates, state, params=None):
        if not isinstance(state, ScaleByScheduleState):
            raise ValueError(f"scale_by_schedule.update: expected a ScaleByScheduleState, "
                             f"got {type(state).__name__}")
        s = _as_array(step_size_fn(state.count))
        updates = _tmap(lambda u: u * cast_like(s, u), updates)
        return updates, ScaleByScheduleState(increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate, *, flip_sign: bool = True,
                           where: str = "scale_by_learning_rate") -> GradientTransformation:
    """Multiply by ``-learning_rate`` (a float or a schedule of the step count)."""
    lr = learning_rate_arg(learning_rate, where)
    sign = -1.0 if flip_sign else 1.0
    if callable(lr):
        return scale_by_schedule(lambda count: sign * _as_array(lr(count)))
    return scale(sign * lr if isinstance(lr, float) else sign * _as_array(lr))


# --- momentum and decay ---------------------------------------------------------------------

def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum: ``t = decay * t + g``; the update is ``t`` or, with ``nesterov``,
    ``g + decay * t`` (PyTorch's SGD momentum with dampening 0)."""
    decay = hyper("momentum", decay, lo=0.0, where="trace")

    def init(params):
        return TraceState(_tmap(zeros_like_param, params))

    def update(updates, state, params=None):
        _check("trace.update", updates, state.trace)
        new = _tmap(lambda g, t: _keep(g + decay * t, t), updates, state.trace)
        if nesterov:
            out = _tmap(lambda g, t: g + decay * t, updates, new)
        else:
            out = _tmap(lambda g, t: _keep(t, _as_array(g)), updates, new)
        return out, TraceState(new)

    return GradientTransformation(init, update)


def _mask_tree(mask, params, where):
    m = mask(params) if callable(mask) else mask
    treedef = tree_util.tree_structure(params)
    try:
        leaves = treedef.flatten_up_to(m)
    except ValueError as e:
        raise ValueError(f"{where}: the mask must have the structure of the params: "
                         f"{str(e).replace('flatten_up_to: ', '')}") from None
    for x in leaves:
        if not isinstance(x, bool):
            raise TypeError(f"{where}: mask leaves must be Python bools, got {x!r}")
    return tree_util.tree_unflatten(treedef, leaves)


def add_decayed_weights(weight_decay: float = 0.0, mask=None) -> GradientTransformation:
    """``u + weight_decay * p``: L2 regularization when placed before a preconditioner
    (``sgd``'s PyTorch-style weight decay), decoupled weight decay when placed after one
    (``adamw``).  ``mask`` (a pytree of bools shaped like the params, or a function of the
    params returning one) selects the leaves that decay."""
    where = "add_decayed_weights"
    weight_decay = hyper("weight_decay", weight_decay, lo=0.0, where=where)

    def update(updates, state, params=None):
        if isinstance(weight_decay, float) and weight_decay == 0.0:
            return updates, state
        _check_params(where, updates, params)
        if mask is None:
            return _tmap(lambda u, p: u + cast_like(weight_decay, u) * _as_array(p),
                         updates, params), state
        m = _mask_tree(mask, params, where)
        return _tmap(lambda u, p, k: u + cast_like(weight_decay, u) * _as_array(p) if k else u,
                     updates, params, m), state

    return GradientTransformation(lambda params: EmptyState(), update)


# --- preconditioners ------------------------------------------------------------------------

def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adam's direction ``m_hat / (sqrt(v_hat + eps_root) + eps)`` with bias-corrected
    moments ``m_hat = m / (1 - b1**t)``, ``v_hat = v / (1 - b2**t)``."""
    where = "scale_by_adam"
    b1, b2 = beta("b1", b1, where), beta("b2", b2, where)
    eps = hyper("eps", eps, lo=0.0, where=where)
    eps_root = hyper("eps_root", eps_root, lo=0.0, where=where)

    def init(params):
        return ScaleByAdamState(zero_count(), _tmap(zeros_like_param, params),
                                _tmap(zeros_like_param, params))

    def update(updates, state, params=None):
        _check(where + ".update", updates, state.mu)
        mu = _tmap(lambda g, m: _keep(b1 * m + (1 - b1) * g, m), updates, state.mu)
        nu = _tmap(lambda g, v: _keep(b2 * v + (1 - b2) * g * g, v), updates, state.nu)
        count = increment(state.count)
        t = count_as_float(count)
        bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t

        def direction(g, m, v):
            m_hat = m / cast_like(bc1, m)
            v_hat = v / cast_like(bc2, v)
            return _keep(m_hat / (fnp.sqrt(v_hat + eps_root) + eps), _as_array(g))
        return _tmap(direction, updates, mu, nu), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, centered: bool = False,
                 initial_scale: float = 0.0) -> GradientTransformation:
    """RMSprop's direction ``g / (sqrt(v) + eps)`` with ``v = decay * v + (1 - decay) * g**2``;
    ``centered`` subtracts the squared running mean of ``g`` from ``v`` (PyTorch's
    RMSprop: eps outside the square root)."""
    where = "scale_by_rms"
    decay = beta("decay", decay, where)
    eps = hyper("eps", eps, lo=0.0, where=where)
    initial_scale = hyper("initial_scale", initial_scale, lo=0.0, where=where)

    def init(params):
        nu = _tmap(lambda p: full_like_param(p, initial_scale), params)
        if centered:
            return ScaleByRStdDevState(_tmap(zeros_like_param, params), nu)
        return ScaleByRmsState(nu)

    def update(updates, state, params=None):
        _check(where + ".update", updates, state.nu)
        nu = _tmap(lambda g, v: _keep(decay * v + (1 - decay) * g * g, v), updates, state.nu)
        if centered:
            mu = _tmap(lambda g, m: _keep(decay * m + (1 - decay) * g, m), updates, state.mu)
            out = _tmap(lambda g, m, v: g / (fnp.sqrt(fnp.maximum(v - m * m, 0.0)) + eps),
                        updates, mu, nu)
            return out, ScaleByRStdDevState(mu, nu)
        out = _tmap(lambda g, v: g / (fnp.sqrt(v) + eps), updates, nu)
        return out, ScaleByRmsState(nu)

    return GradientTransformation(init, update)


def scale_by_rss(initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10) -> GradientTransformation:
    """Adagrad's direction ``g / (sqrt(s) + eps)`` with ``s`` the running sum of ``g**2``
    (PyTorch's Adagrad)."""
    where = "scale_by_rss"
    init_acc = hyper("initial_accumulator_value", initial_accumulator_value, lo=0.0,
                     where=where)
    eps = hyper("eps", eps, lo=0.0, where=where)

    def init(params):
        return ScaleByRssState(_tmap(lambda p: full_like_param(p, init_acc), params))

    def update(updates, state, params=None):
        _check(where + ".update", updates, state.sum_of_squares)
        s = _tmap(lambda g, a: _keep(a + g * g, a), updates, state.sum_of_squares)
        out = _tmap(lambda g, a: g / (fnp.sqrt(a) + eps), updates, s)
        return out, ScaleByRssState(s)

    return GradientTransformation(init, update)


def scale_by_trust_ratio(min_norm: float = 0.0) -> GradientTransformation:
    """LAMB's layer-wise scaling: each leaf's update times ``||p|| / ||u||`` (1 where
    either norm is at most ``min_norm``)."""
    where = "scale_by_trust_ratio"
    min_norm = hyper("min_norm", min_norm, lo=0.0, where=where)

    def update(updates, state, params=None):
        _check_params(where, updates, params)

        def f(u, p):
            p = _as_array(p)
            p_norm = fnp.sqrt(fnp.sum(p * p))
            u_norm = fnp.sqrt(fnp.sum(u * u))
            ok = (p_norm > min_norm) & (u_norm > min_norm)
            ratio = fnp.where(ok, p_norm / fnp.where(ok, u_norm, 1.0), 1.0)
            return u * cast_like(ratio, u)
        return _tmap(f, updates, params), state

    return GradientTransformation(lambda params: EmptyState(), update)


def scale_by_lion(b1: float = 0.9, b2: float = 0.99) -> GradientTransformation:
    """Lion's direction ``sign(b1 * m + (1 - b1) * g)``, then ``m = b2 * m + (1 - b2) * g``."""
    where = "scale_by_lion"
    b1, b2 = beta("b1", b1, where), beta("b2", b2, where)

    def init(params):
        return ScaleByLionState(_tmap(zeros_like_param, params))

    def update(updates, state, params=None):
        _check(where + ".update", updates, state.mu)
        out = _tmap(lambda g, m: _keep(fnp.sign(b1 * m + (1 - b1) * g), _as_array(g)),
                    updates, state.mu)
        mu = _tmap(lambda g, m: _keep(b2 * m + (1 - b2) * g, m), updates, state.mu)
        return out, ScaleByLionState(mu)

    return GradientTransformation(init, update)


# --- clipping -------------------------------------------------------------------------------

def clip(max_delta: float) -> GradientTransformation:
    """Clip each element of the updates to ``[-max_delta, max_delta]``."""
    max_delta = hyper("max_delta", max_delta, lo=0.0, where="clip")

    def update(updates, state, params=None):
        return _tmap(lambda u: fnp.clip(u, -max_delta, max_delta), updates), state

    return GradientTransformation(lambda params: EmptyState(), update)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all updates by ``max_norm / global_norm`` when their global norm exceeds
    ``max_norm`` (PyTorch's ``clip_grad_norm_`` without its 1e-6)."""
    max_norm = hyper("max_norm", max_norm, lo=0.0, lo_open=True, where="clip_by_global_norm")

    def update(updates, state, params=None):
        norm = global_norm(updates)
        factor = max_norm / fnp.maximum(norm, max_norm)
        return _tmap(lambda u: u * cast_like(factor, u), updates), state

    return GradientTransformation(lambda params: EmptyState(), update)
