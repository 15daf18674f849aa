"""Wrappers around a transformation: ``inject_hyperparams`` and ``flatten`` (optax's).

``inject_hyperparams(fnx.optim.adam)(learning_rate=schedule)`` moves the numeric
hyperparameters into the optimizer state, so they can be read
(``state.hyperparams['learning_rate']``) or changed between steps without
recompiling a jitted step, and any hyperparameter may be a schedule of the step count.
``flatten(inner)`` runs ``inner`` on all the leaves concatenated into one vector.
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, NamedTuple

import numpy as np

from .. import numpy as fnp
from .. import tree_util
from ..core.array import Array
from . import _base
from ._base import GradientTransformation

__all__ = ["InjectHyperparamsState", "inject_hyperparams", "flatten"]


class InjectHyperparamsState(NamedTuple):
    """The state of ``inject_hyperparams``: the step count, the current
    hyperparameters (a dict of scalar arrays) and the inner transformation's state."""
    count: Any
    hyperparams: dict
    inner_state: Any


def _highest_float(tree):
    """The widest floating dtype among the leaves of ``tree`` (None if there is none)."""
    best = None
    for x in tree_util.tree_leaves(tree):
        dt = getattr(x, "dtype", None)
        if dt is not None and np.dtype(dt).kind == "f":
            if best is None or np.dtype(dt).itemsize > best.itemsize:
                best = np.dtype(dt)
    return best


def _convert(value, dtype):
    """A numeric hyperparameter as a scalar array; floats take ``dtype`` (ints stay
    ints)."""
    v = _base._as_array(value)
    if dtype is not None and v.dtype.kind == "f" and v.dtype != dtype:
        v = v.astype(dtype)
    return v


def inject_hyperparams(inner_factory, static_args=(), hyperparam_dtype=None):
    """Wrap an optimizer factory so its numeric hyperparameters live in the state.

    The wrapped factory takes the same arguments as ``inner_factory``; a callable
    argument is a schedule (called with the step count at each update) unless it is
    named in ``static_args``; booleans and strings stay static.  Floats are stored in
    ``hyperparam_dtype`` (default: the parameters' widest float dtype)."""
    static = {static_args} if isinstance(static_args, str) else set(static_args)
    sig = inspect.signature(inner_factory)
    unknown = static - set(sig.parameters)
    if unknown:
        raise ValueError(f"inject_hyperparams: static_args {sorted(unknown)} are not "
                         f"parameters of {getattr(inner_factory, '__name__', inner_factory)}"
                         f"; its parameters are {list(sig.parameters)}")

    @functools.wraps(inner_factory)
    def wrapped(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"inject_hyperparams({inner_factory.__name__}): {e}") from None
        bound.apply_defaults()
        schedules, numeric, other = {}, {}, {}
        for name, value in bound.arguments.items():
            if name in static or isinstance(value, (bool, str)) or value is None:
                other[name] = value
            elif callable(value) and not isinstance(value, Array):
                schedules[name] = value
            elif isinstance(value, (int, float, np.ndarray, np.number, Array)):
                numeric[name] = value
            else:
                other[name] = value
        # build once now so bad hyperparameters fail here, not at the first update
        inner_factory(**other, **numeric, **{k: f(0) for k, f in schedules.items()})

        def current(hparams, count, dtype):
            out = {k: _convert(v, dtype) for k, v in hparams.items()}
            out.update({k: _convert(f(count), dtype) for k, f in schedules.items()})
            return out

        def init(params):
            dtype = hyperparam_dtype or _highest_float(params)
            count = _base.zero_count()
            hparams = current(numeric, count, dtype)
            inner = inner_factory(**other, **hparams)
            return InjectHyperparamsState(count, hparams, inner.init(params))

        def update(updates, state, params=None):
            if not isinstance(state, InjectHyperparamsState):
                raise TypeError("inject_hyperparams: update expects the "
                                "InjectHyperparamsState made by init, got "
                                f"{type(state).__name__}")
            dtype = hyperparam_dtype or _highest_float(params) or _highest_float(
                state.hyperparams)
            hparams = current({k: v for k, v in state.hyperparams.items()
                               if k not in schedules}, state.count, dtype)
            inner = inner_factory(**other, **hparams)
            updates, inner_state = inner.update(updates, state.inner_state, params)
            return updates, InjectHyperparamsState(_base.increment(state.count), hparams,
                                                   inner_state)
        return GradientTransformation(init, update)
    return wrapped


def flatten(inner: GradientTransformation) -> GradientTransformation:
    """Run ``inner`` on one vector: every leaf raveled and concatenated (fewer, larger
    operations for many small parameters); updates come back in the original tree."""

    def ravel(tree):
        leaves = [_base._as_array(x) for x in tree_util.tree_leaves(tree)]
        if not leaves:
            return fnp.zeros((0,), dtype="float32")
        return fnp.concatenate([fnp.reshape(x, (-1,)) for x in leaves])

    def unravel(like, flat):
        leaves, treedef = tree_util.tree_flatten(like)
        out, start = [], 0
        for x in leaves:
            shape = tuple(np.shape(x))
            n = math.prod(shape)
            out.append(fnp.reshape(flat[start:start + n], shape))
            start += n
        return tree_util.tree_unflatten(treedef, out)

    def init(params):
        return inner.init(ravel(params))

    def update(updates, state, params=None):
        flat_params = None if params is None else ravel(params)
        flat, state = inner.update(ravel(updates), state, flat_params)
        return unravel(updates, flat), state
    return GradientTransformation(init, update)
