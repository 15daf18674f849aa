"""``fnx.example_libraries.optimizers``: JAX's example optimizers, as triples of functions.

An optimizer is ``(init_fun, update_fun, get_params)``::

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)

    @fnx.jit
    def step(i, opt_state, batch):
        grads = fnx.grad(loss)(get_params(opt_state), batch)
        return opt_update(i, grads, opt_state)

``update_fun(step, grads, opt_state)`` takes the step index (for the schedules and
the bias corrections).  The ``@optimizer`` decorator turns a triple written for one
array into one over any pytree; the state is an ``OptimizerState`` pytree (flat leaves
plus the tree structures), so it passes through ``jit``.  For a full optimizer library
see ``fnx.optim`` (optax's API).

The update formulas are JAX's, step for step.  Differences: a gradient tree that does
not match the parameters names the paths that differ, and hyperparameters are checked
when the optimizer is made (a negative step size or a decay outside [0, 1) raises).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import numpy as jnp
from .. import tree_util
from ..core.array import Array

__all__ = [
    "Optimizer", "OptimizerState", "JoinPoint", "optimizer", "sgd", "momentum", "nesterov",
    "adagrad", "rmsprop", "rmsprop_momentum", "adam", "adamax", "sm3", "constant",
    "exponential_decay", "inverse_time_decay", "polynomial_decay", "piecewise_constant",
    "make_schedule", "l2_norm", "clip_grads", "pack_optimizer_state",
    "unpack_optimizer_state", "Params", "State", "Updates", "Step", "Schedule", "InitFn",
    "UpdateFn", "ParamsFn",
]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = ("The state of a pytree optimizer: the flat list of per-leaf "
                          "state leaves and the tree structures to rebuild them.")
tree_util.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))

Params = Any
State = Any
Updates = Params
Step = int
InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    """``(init_fn, update_fn, params_fn)``; unpacks as a triple."""
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _describe_mismatch(tree, tree2):
    try:
        tree.flatten_up_to(tree2)  # raises with the first difference
    except Exception as e:  # noqa: BLE001 - only used for the message
        return f" ({e})"
    return ""


def optimizer(opt_maker):
    """Decorator: ``opt_maker(*args)`` returns ``(init, update, get_params)`` for one
    array; the decorated maker returns an ``Optimizer`` over pytrees of arrays."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_util.tree_flatten(x0_tree)
            flat, subtrees = [], []
            for x0 in x0_flat:
                leaves, sub = tree_util.tree_flatten(init(x0))
                flat.append(leaves)
                subtrees.append(sub)
            return OptimizerState(flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = _unpack(opt_state, "update_fun")
            grad_flat, tree2 = tree_util.tree_flatten(grad_tree)
            if tree2 != tree:
                raise TypeError(
                    "optimizers: update_fun got a gradient tree whose structure differs "
                    f"from the parameters' the optimizer was initialized with: params "
                    f"{tree}, grads {tree2}{_describe_mismatch(tree, grad_tree)}. Pass "
                    "grads of get_params(opt_state), e.g. fnx.grad(loss)(get_params(s))")
            new_flat = []
            for g, sub, leaves in zip(grad_flat, subtrees, states_flat):
                new = update(i, g, tree_util.tree_unflatten(sub, leaves))
                new_leaves, sub2 = tree_util.tree_flatten(new)
                if sub2 != sub:
                    raise TypeError("optimizers: the per-array update returned a state of "
                                    f"structure {sub2}, but init made {sub}; an update "
                                    "must return its state in the same structure")
                new_flat.append(new_leaves)
            return OptimizerState(new_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, tree, subtrees = _unpack(opt_state, "get_params")
            params = [get_params(tree_util.tree_unflatten(sub, leaves))
                      for sub, leaves in zip(subtrees, states_flat)]
            return tree_util.tree_unflatten(tree, params)

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


def _unpack(opt_state, where):
    if not isinstance(opt_state, OptimizerState):
        raise TypeError(f"optimizers: {where} expects the OptimizerState made by init_fun "
                        f"(or by a previous update_fun), got {type(opt_state).__name__}")
    return opt_state


def _rate(name, value, where, hi=None):
    """Check a hyperparameter that is a concrete number (tracers pass)."""
    if isinstance(value, Array):
        try:
            v = float(np.asarray(value))
        except Exception:  # noqa: BLE001 - a tracer
            return value
    elif isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        v = float(value)
    else:
        return value
    if not v >= 0 or (hi is not None and v >= hi):
        rng = f"in [0, {hi:g})" if hi is not None else ">= 0"
        raise ValueError(f"optimizers.{where}: {name} must be {rng}, got {value}")
    return value


def _zeros_like(x):
    x = jnp.asarray(x)
    return jnp.zeros(x.shape, x.dtype)


def _powb(b, i, dtype):
    """``b ** (i + 1)`` in ``dtype`` (JAX's bias-correction term)."""
    return jnp.asarray(b, dtype) ** (i + 1)


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: ``x - step_size(i) * g``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x
    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size, mass):
    """SGD with momentum: ``v = mass * v + g; x -= step_size(i) * v``."""
    step_size = make_schedule(step_size)
    _rate("mass", mass, "momentum")

    def init(x0):
        return x0, _zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def nesterov(step_size, mass):
    """SGD with Nesterov momentum: ``v = mass * v + g; x -= step_size(i) * (mass * v + g)``."""
    step_size = make_schedule(step_size)
    _rate("mass", mass, "nesterov")

    def init(x0):
        return x0, _zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (with momentum on the normalized gradient, as JAX's)."""
    step_size = make_schedule(step_size)
    _rate("momentum", momentum, "adagrad", hi=1.0)

    def init(x0):
        return x0, _zeros_like(x0), _zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_sqrt = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: ``x -= step_size(i) * g / sqrt(avg_sq_grad + eps)``."""
    step_size = make_schedule(step_size)
    _rate("gamma", gamma, "rmsprop", hi=1.0)

    def init(x0):
        return x0, _zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum on the scaled step."""
    step_size = make_schedule(step_size)
    _rate("gamma", gamma, "rmsprop_momentum", hi=1.0)
    _rate("momentum", momentum, "rmsprop_momentum")

    def init(x0):
        return x0, _zeros_like(x0), _zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam, with bias corrections ``1 - b ** (i + 1)`` from the step index ``i``."""
    step_size = make_schedule(step_size)
    _rate("b1", b1, "adam", hi=1.0)
    _rate("b2", b2, "adam", hi=1.0)

    def init(x0):
        return x0, _zeros_like(x0), _zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / (1 - _powb(b1, i, m.dtype))
        vhat = v / (1 - _powb(b2, i, m.dtype))
        return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam with an exponentially weighted infinity norm."""
    step_size = make_schedule(step_size)
    _rate("b1", b1, "adamax", hi=1.0)
    _rate("b2", b2, "adamax", hi=1.0)

    def init(x0):
        return x0, _zeros_like(x0), _zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / (1 - _powb(b1, i, m.dtype))) * m / (u + eps)
        return x, m, u

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3: an Adagrad whose accumulator keeps one vector per axis (memory linear in the
    sum of the dimensions), with momentum."""
    step_size = make_schedule(step_size)
    _rate("momentum", momentum, "sm3", hi=1.0)

    def along(ndim, v, axis):
        idx = [None] * ndim
        idx[axis] = slice(None)
        return v[tuple(idx)]

    def init(x0):
        x0 = jnp.asarray(x0)
        shape = tuple(x0.shape)
        x0 = jnp.atleast_1d(x0)
        vs = [jnp.zeros((n,), dtype=x0.dtype) for n in x0.shape]
        return x0, _zeros_like(x0), vs, shape

    def update(i, g, state):
        x, m, vs, shape = state
        g = jnp.reshape(g, x.shape)
        vs = [along(g.ndim, v, ax) for ax, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, vs) + jnp.square(g)
        inv_sqrt = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(a for a in range(x.ndim) if a != j)) for j in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state):
        x, _, _, shape = state
        return x.reshape(shape)
    return init, update, get_params


# --- schedules: step index -> step size ------------------------------------------------------

def constant(step_size) -> Schedule:
    """The schedule ``i -> step_size``."""
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """``step_size * decay_rate ** (i / decay_steps)``."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """``step_size / (1 + decay_rate * i / decay_steps)`` (``floor(i / decay_steps)``
    with ``staircase``)."""
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From ``step_size`` to ``final_step_size`` over ``decay_steps`` steps as
    ``(1 - i / decay_steps) ** power``, then constant."""
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        mult = (1 - step_num / decay_steps) ** power
        return mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """``values[k]`` where ``k`` counts the ``boundaries`` strictly below ``i``."""
    b = jnp.asarray(boundaries)
    v = jnp.asarray(values)
    if not b.ndim == v.ndim == 1:
        raise ValueError("optimizers.piecewise_constant: boundaries and values must be "
                         f"sequences, got shapes {b.shape} and {v.shape}")
    if not b.shape[0] == v.shape[0] - 1:
        raise ValueError("optimizers.piecewise_constant: boundaries must be one shorter "
                         f"than values, got {b.shape[0]} boundaries and {v.shape[0]} "
                         "values")
    boundaries, values = b, v

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule) -> Schedule:
    """A callable is a schedule already; a scalar becomes ``constant(scalar)``."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if np.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError("optimizers: a step size must be a scalar or a callable schedule "
                    f"(step index -> step size), got {type(scalar_or_schedule).__name__} "
                    f"of shape {np.shape(scalar_or_schedule)}")


# --- utilities -------------------------------------------------------------------------------

def l2_norm(tree):
    """The L2 norm of all the leaves of ``tree`` together."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """Scale ``grad_tree`` down so its ``l2_norm`` is at most ``max_norm``."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(
        lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """Marks where an optimizer state's per-leaf subtree hangs in the parameter tree."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree

    def __repr__(self):
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state):
    """An ``OptimizerState`` as the parameter tree with a ``JoinPoint`` holding each
    leaf's state (plain Python containers, e.g. for pickling)."""
    states_flat, tree_def, subtree_defs = _unpack(opt_state, "unpack_optimizer_state")
    subtrees = [tree_util.tree_unflatten(sub, leaves)
                for sub, leaves in zip(subtree_defs, states_flat)]
    return tree_util.tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree):
    """The inverse of ``unpack_optimizer_state``."""
    sentinels, tree_def = tree_util.tree_flatten(marked_pytree)
    bad = [type(s).__name__ for s in sentinels if not isinstance(s, JoinPoint)]
    if bad:
        raise TypeError("optimizers.pack_optimizer_state: every leaf must be a JoinPoint "
                        "(as unpack_optimizer_state makes them), found "
                        f"{', '.join(sorted(set(bad)))}")
    flat, subs = [], []
    for s in sentinels:
        leaves, sub = tree_util.tree_flatten(s.subtree)
        flat.append(leaves)
        subs.append(sub)
    return OptimizerState(flat, tree_def, subs)
