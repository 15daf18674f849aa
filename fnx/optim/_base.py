"""The optimizer protocol and the helpers every transformation shares.

An optimizer is a ``GradientTransformation(init, update)``: two pure
functions.  ``state = init(params)`` builds the state, a pytree of arrays
(namedtuples, tuples and dicts of fnx arrays and int32 step counters), and
``updates, state = update(grads, state, params)`` maps gradients to updates.
Nothing is kept on the Python side, so a jitted training step can take the
state and return the new one, and the state serializes like any other pytree
of arrays.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import numpy as fnp
from .. import tree_util
from ..core import dtypes
from ..core.array import Array

__all__ = ["GradientTransformation", "GradientTransformationExtraArgs", "EmptyState",
           "apply_updates", "global_norm", "safe_norm", "chain", "identity", "Params",
           "Updates", "OptState", "Schedule"]

_INT32_MAX = 2**31 - 1


class GradientTransformation(NamedTuple):
    """A pair of pure functions ``init(params) -> state`` and
    ``update(grads, state, params=None) -> (updates, new_state)``."""
    init: Callable
    update: Callable


# optax's type names: pytrees of arrays (for annotations)
Params = Any
Updates = Any
OptState = Any
Schedule = Callable[[Any], Any]

# optax's update may take extra keyword arguments; fnx's updates take (grads, state,
# params), and the name is kept for ported annotations and isinstance checks
GradientTransformationExtraArgs = GradientTransformation


class EmptyState(NamedTuple):
    """The state of a stateless transformation (a pytree with no leaves)."""


# --- arrays ---------------------------------------------------------------------------------

def _as_array(x):
    """`x` as an fnx Array (tracers pass through unchanged)."""
    if isinstance(x, Array):
        return x
    return fnp.asarray(x)


def zeros_like_param(p):
    """Zeros of `p`'s shape and dtype, strongly typed (so a jitted step keeps one signature
    even when `p` is a Python scalar)."""
    p = _as_array(p)
    return fnp.zeros(p.shape, dtype=p.dtype)


def full_like_param(p, value):
    p = _as_array(p)
    # zeros + weak scalar: fnp.full(shape, 0.1, dtype=float64) rounds 0.1 through float32
    return fnp.zeros(p.shape, dtype=p.dtype) + value


def _wide():
    """The widest float available: float64 with jax_enable_x64, else float32 (as JAX,
    where schedules compute in the default float)."""
    return dtypes.default_float()


def scalar64(value):
    """`value` as a scalar array of the default float (float64 under x64), exactly
    (see full_like_param)."""
    return fnp.zeros((), dtype=_wide()) + value


def zero_count():
    """A step counter: an int32 scalar array."""
    return fnp.zeros((), dtype="int32")


def increment(count):
    """``count + 1`` in int32, saturating instead of wrapping around."""
    return fnp.where(count < _INT32_MAX, count + 1, count)


def cast_like(s, x):
    """Scalar `s` (a weak Python float or a scalar array) ready to combine with `x` without
    changing `x`'s dtype."""
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        return s
    s = _as_array(s)
    x_dtype = _as_array(x).dtype
    return s if s.dtype == x_dtype else s.astype(x_dtype)


def count_as_float(count):
    """The step count as a default-float scalar array (float64 under x64), for schedules
    and bias corrections (cast to each parameter's dtype where it meets a parameter)."""
    return _as_array(count).astype(_wide())


# --- trees ----------------------------------------------------------------------------------

def _path_str(path) -> str:
    return tree_util.keystr(path) or "<root>"


def _paths(tree) -> dict:
    return {_path_str(p): leaf
            for p, leaf in tree_util.tree_leaves_with_path(tree)}


def _shape(x):
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else np.shape(x)


def check_same_tree(where: str, name_a: str, a, name_b: str, b, *, shapes: bool = True):
    """Raise ValueError naming the paths where trees `a` and `b` differ (in structure or,
    with ``shapes``, in leaf shapes)."""
    ta, tb = tree_util.tree_structure(a), tree_util.tree_structure(b)
    if ta != tb:
        pa, pb = _paths(a), _paths(b)
        only_a = [k for k in pa if k not in pb]
        only_b = [k for k in pb if k not in pa]
        parts = []
        if only_a:
            parts.append(f"in {name_a} but not in {name_b}: {_short_list(only_a)}")
        if only_b:
            parts.append(f"in {name_b} but not in {name_a}: {_short_list(only_b)}")
        if not parts:
            try:
                ta.flatten_up_to(b)
                detail = f"{name_a} is {ta} but {name_b} is {tb}"
            except ValueError as e:
                detail = str(e).replace("flatten_up_to: ", "")
            parts.append(f"the same leaf paths but different node types: {detail}")
        raise ValueError(
            f"{where}: {name_a} and {name_b} have different pytree structures; "
            + "; ".join(parts)
            + f". The optimizer state must come from init() on a tree shaped like the "
              f"{name_a}.")
    if shapes:
        la, lb = tree_util.tree_leaves_with_path(a), tree_util.tree_leaves(b)
        bad = [(_path_str(p), _shape(x), _shape(y))
               for (p, x), y in zip(la, lb) if _shape(x) != _shape(y)]
        if bad:
            desc = ", ".join(f"{k}: {sa} vs {sb}" for k, sa, sb in bad[:5])
            more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
            raise ValueError(f"{where}: leaf shapes of {name_a} and {name_b} differ at "
                             f"{desc}{more}")


def _short_list(items, n=8):
    if len(items) <= n:
        return "[" + ", ".join(items) + "]"
    return "[" + ", ".join(items[:n]) + f", ... ({len(items) - n} more)]"


def require_params(where: str, params):
    if params is None:
        raise ValueError(f"{where}: this transformation needs the parameters; call "
                         "update(grads, state, params)")


# --- hyperparameters ------------------------------------------------------------------------

def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) or (
        isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf")


def hyper(name: str, value, *, lo=None, hi=None, lo_open=False, hi_open=False,
          where: str = "") -> Any:
    """Validate a numeric hyperparameter and return it as a Python float (a weak scalar:
    it takes each parameter's dtype).  Concrete 0-d arrays are converted; arrays that
    are tracers are passed through unchecked."""
    if isinstance(value, Array):
        try:
            v = float(np.asarray(value))
        except Exception:  # a tracer: no value to check
            return value
    elif _is_number(value):
        v = float(value)
    else:
        raise TypeError(f"{where}: {name} must be a number, got {type(value).__name__} "
                        f"{value!r}")
    if math.isnan(v):
        raise ValueError(f"{where}: {name} is NaN")
    if (lo is not None and (v < lo or (lo_open and v == lo))) or (
            hi is not None and (v > hi or (hi_open and v == hi))):
        if lo is not None and hi is not None:
            rng = f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        elif lo is not None:
            rng = f"{'>' if lo_open else '>='} {lo:g}"
        else:
            rng = f"{'<' if hi_open else '<='} {hi:g}"
        raise ValueError(f"{where}: {name} must be {rng}, got {v}")
    return v


def beta(name: str, value, where: str):
    """A decay rate in [0, 1)."""
    return hyper(name, value, lo=0.0, hi=1.0, hi_open=True, where=where)


def learning_rate_arg(value, where: str, name: str = "learning_rate"):
    """A float >= 0 or a schedule (a callable of the step count)."""
    if callable(value) and not isinstance(value, Array):
        return value
    return hyper(name, value, lo=0.0, where=where)


# --- the public helpers ---------------------------------------------------------------------

def apply_updates(params, updates):
    """``params + updates`` leafwise, each result keeping its parameter's dtype.

    `updates` must have the structure of `params`; ``None`` leaves of params are kept."""
    check_same_tree("apply_updates", "params", params, "updates", updates)

    def add(p, u):
        p = _as_array(p)
        r = p + u
        return r if r.dtype == p.dtype else r.astype(p.dtype)
    return tree_util.tree_map(add, params, updates)


def global_norm(tree):
    """The L2 norm of all leaves of `tree` together: ``sqrt(sum of squares)``."""
    leaves = tree_util.tree_leaves(tree)
    if not leaves:
        return fnp.asarray(0.0)
    total = None
    for x in leaves:
        x = _as_array(x)
        sq = fnp.abs(x) ** 2 if x.dtype.kind == "c" else x * x
        s = fnp.sum(sq)
        total = s if total is None else total + s
    return fnp.sqrt(total)


def safe_norm(x, min_norm, ord=None, axis=None, keepdims=False):
    """``max(norm(x), min_norm)`` whose gradient is finite (0) where the norm is at most
    ``min_norm``, even at ``x = 0`` where the norm's own gradient is NaN."""
    x = _as_array(x)
    norm = fnp.linalg.norm(x, ord=ord, axis=axis, keepdims=True)
    small = norm <= min_norm
    masked = fnp.where(small, fnp.ones_like(x), x)
    if not keepdims:
        norm = fnp.squeeze(norm, axis=axis)
        small = norm <= min_norm
    return fnp.where(small, min_norm, fnp.linalg.norm(masked, ord=ord, axis=axis,
                                                      keepdims=keepdims))


def identity() -> GradientTransformation:
    """Pass the updates through unchanged."""
    return GradientTransformation(lambda params: EmptyState(),
                                  lambda updates, state, params=None: (updates, state))


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply `transforms` in order; the state is the tuple of their states."""
    for i, t in enumerate(transforms):
        if not (isinstance(t, tuple) and len(t) == 2 and callable(t[0]) and callable(t[1])):
            raise TypeError(f"chain: argument {i} is not a GradientTransformation "
                            f"(init, update) pair: {t!r}")
    transforms = tuple(transforms)

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(transforms):
            got = type(state).__name__
            if isinstance(state, tuple):
                got += f" of length {len(state)}"
            raise ValueError(f"chain.update: expected a tuple of {len(transforms)} states "
                             f"(one per transformation), got {got}")
        new = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new.append(s)
        return updates, tuple(new)

    return GradientTransformation(init, update)
