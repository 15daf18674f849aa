"""Learning-rate schedules: pure functions of the step count.

A schedule maps the number of updates done so far (0 at the first update; a Python int
or an int32 array, which is what optimizers keep in their state) to a scalar array of
the default float (float64 with ``jax_enable_x64``, float32 without, as JAX).
Optimizers cast the value to each parameter's dtype where it meets it, and they call
the schedule inside the traced update, so a jitted step compiles once for all steps.
Every ``learning_rate`` argument accepts a float or a schedule.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from .. import numpy as fnp
from ._base import _wide, count_as_float, hyper, scalar64

__all__ = ["constant_schedule", "piecewise_constant_schedule", "step_schedule",
           "exponential_decay", "cosine_decay_schedule", "linear_schedule",
           "polynomial_schedule", "warmup_cosine_decay_schedule", "join_schedules"]

Schedule = Callable


def _steps(name, value, where, *, positive=True):
    if isinstance(value, bool) or not isinstance(value, int) and not (
            hasattr(value, "__index__") and not hasattr(value, "shape")):
        raise TypeError(f"{where}: {name} must be an int, got {value!r}")
    value = int(value)
    if value < (1 if positive else 0):
        raise ValueError(f"{where}: {name} must be {'> 0' if positive else '>= 0'}, "
                         f"got {value}")
    return value


def constant_schedule(value) -> Schedule:
    """``value`` at every step."""
    value = hyper("value", value, where="constant_schedule")

    def schedule(count):
        return scalar64(value)
    return schedule


def piecewise_constant_schedule(init_value, boundaries_and_scales: Mapping | None = None
                                ) -> Schedule:
    """``init_value`` multiplied by ``scale`` for every ``boundary: scale`` entry with
    ``count >= boundary`` (PyTorch's MultiStepLR with per-milestone factors)."""
    where = "piecewise_constant_schedule"
    init_value = hyper("init_value", init_value, where=where)
    items = []
    for b, s in sorted((boundaries_and_scales or {}).items()):
        items.append((_steps("boundary", b, where, positive=False),
                      hyper(f"scale at {b}", s, where=where)))

    def schedule(count):
        t = count_as_float(count)
        v = scalar64(init_value)
        for b, s in items:
            v = fnp.where(t >= b, v * s, v)
        return v
    return schedule


def step_schedule(init_value, step_size: int, gamma: float = 0.1) -> Schedule:
    """``init_value * gamma ** floor(count / step_size)`` (PyTorch's StepLR)."""
    where = "step_schedule"
    init_value = hyper("init_value", init_value, where=where)
    step_size = _steps("step_size", step_size, where)
    gamma = hyper("gamma", gamma, lo=0.0, where=where)

    def schedule(count):
        k = fnp.floor(count_as_float(count) / step_size)
        return init_value * gamma ** k
    return schedule


def exponential_decay(init_value, transition_steps: int, decay_rate, transition_begin: int = 0,
                      staircase: bool = False, end_value=None) -> Schedule:
    """``init_value * decay_rate ** ((count - transition_begin) / transition_steps)`` after
    ``transition_begin`` (``init_value`` before), the exponent floored when ``staircase``,
    and the value bounded by ``end_value`` when given."""
    where = "exponential_decay"
    init_value = hyper("init_value", init_value, where=where)
    transition_steps = _steps("transition_steps", transition_steps, where)
    decay_rate = hyper("decay_rate", decay_rate, lo=0.0, where=where)
    transition_begin = _steps("transition_begin", transition_begin, where, positive=False)
    if end_value is not None:
        end_value = hyper("end_value", end_value, where=where)

    def schedule(count):
        t = fnp.maximum(count_as_float(count) - transition_begin, 0.0)
        p = t / transition_steps
        if staircase:
            p = fnp.floor(p)
        v = init_value * decay_rate ** p
        if end_value is not None:
            v = fnp.maximum(v, end_value) if decay_rate < 1 else fnp.minimum(v, end_value)
        return v
    return schedule


def cosine_decay_schedule(init_value, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Schedule:
    """``init_value * ((1 - alpha) * c ** exponent + alpha)`` with
    ``c = (1 + cos(pi * min(count, decay_steps) / decay_steps)) / 2``: from ``init_value``
    down to ``alpha * init_value`` at ``decay_steps``, then constant."""
    where = "cosine_decay_schedule"
    init_value = hyper("init_value", init_value, where=where)
    decay_steps = _steps("decay_steps", decay_steps, where)
    alpha = hyper("alpha", alpha, lo=0.0, hi=1.0, where=where)
    exponent = hyper("exponent", exponent, lo=0.0, lo_open=True, where=where)

    def schedule(count):
        t = fnp.minimum(count_as_float(count), float(decay_steps))
        c = 0.5 * (1.0 + fnp.cos(math.pi * t / decay_steps))
        return init_value * ((1.0 - alpha) * c ** exponent + alpha)
    return schedule


def polynomial_schedule(init_value, end_value, power, transition_steps: int,
                        transition_begin: int = 0) -> Schedule:
    """``(init_value - end_value) * (1 - t / transition_steps) ** power + end_value`` with
    ``t = clip(count - transition_begin, 0, transition_steps)``."""
    where = "polynomial_schedule"
    init_value = hyper("init_value", init_value, where=where)
    end_value = hyper("end_value", end_value, where=where)
    power = hyper("power", power, lo=0.0, lo_open=True, where=where)
    transition_steps = _steps("transition_steps", transition_steps, where)
    transition_begin = _steps("transition_begin", transition_begin, where, positive=False)

    def schedule(count):
        t = fnp.clip(count_as_float(count) - transition_begin, 0.0, float(transition_steps))
        frac = 1.0 - t / transition_steps
        return (init_value - end_value) * frac ** power + end_value
    return schedule


def linear_schedule(init_value, end_value, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """From ``init_value`` at ``transition_begin`` linearly to ``end_value`` at
    ``transition_begin + transition_steps``, constant outside."""
    return polynomial_schedule(init_value, end_value, 1.0, transition_steps, transition_begin)


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """``schedules[i](count - boundaries[i-1])`` for ``boundaries[i-1] <= count <
    boundaries[i]``: each schedule starts counting from 0 at its boundary."""
    where = "join_schedules"
    schedules = list(schedules)
    boundaries = [_steps("boundary", b, where, positive=False) for b in boundaries]
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"{where}: needs one boundary fewer than schedules; got "
                         f"{len(schedules)} schedules and {len(boundaries)} boundaries")
    if any(b1 > b2 for b1, b2 in zip(boundaries, boundaries[1:])):
        raise ValueError(f"{where}: boundaries must be non-decreasing, got {boundaries}")
    for i, s in enumerate(schedules):
        if not callable(s):
            raise TypeError(f"{where}: schedule {i} is not callable: {s!r}")

    def schedule(count):
        c = fnp.asarray(count)
        if c.dtype.kind not in "iu":
            c = c.astype("int32")
        out = fnp.asarray(schedules[0](c)).astype(_wide())
        for b, s in zip(boundaries, schedules[1:]):
            out = fnp.where(c < b, out, fnp.asarray(s(c - b)).astype(_wide()))
        return out
    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps: int, decay_steps: int,
                                 end_value=0.0, exponent: float = 1.0) -> Schedule:
    """Linear warmup from ``init_value`` to ``peak_value`` over ``warmup_steps``, then
    cosine decay to ``end_value`` at ``decay_steps`` (counted from step 0, warmup
    included), then constant ``end_value``."""
    where = "warmup_cosine_decay_schedule"
    init_value = hyper("init_value", init_value, where=where)
    peak_value = hyper("peak_value", peak_value, where=where)
    end_value = hyper("end_value", end_value, where=where)
    exponent = hyper("exponent", exponent, lo=0.0, lo_open=True, where=where)
    warmup_steps = _steps("warmup_steps", warmup_steps, where, positive=False)
    decay_steps = _steps("decay_steps", decay_steps, where)
    if decay_steps <= warmup_steps:
        raise ValueError(f"{where}: decay_steps ({decay_steps}) must be greater than "
                         f"warmup_steps ({warmup_steps}); decay_steps counts the warmup too")
    span = decay_steps - warmup_steps

    def cosine(count):
        t = fnp.minimum(count_as_float(count), float(span))
        c = 0.5 * (1.0 + fnp.cos(math.pi * t / span))
        return end_value + (peak_value - end_value) * c ** exponent

    if warmup_steps == 0:
        return cosine
    return join_schedules([linear_schedule(init_value, peak_value, warmup_steps), cosine],
                          [warmup_steps])
