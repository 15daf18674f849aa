"""Parameter initializers: ``init(key, shape, dtype=float32) -> array``.

Fans follow PyTorch's weight layouts, which fnx.nn's layers use: for a shape
``(out, in, *kernel)`` (Linear ``(out, in)``, ConvNd ``(out, in/groups, *k)``),
``fan_in = in * prod(kernel)`` and ``fan_out = out * prod(kernel)``; a 1-d shape has
``fan_in = fan_out = shape[0]``.  Pass ``in_axis``/``out_axis`` to ``variance_scaling``
for other layouts.

Layer defaults (PyTorch's): Linear and ConvNd weights and biases are
``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (``torch_default()``, i.e. kaiming_uniform with
a=sqrt(5)); Embedding ``normal(1.0)``; LSTM/GRU ``U(-1/sqrt(hidden), 1/sqrt(hidden))``;
MultiHeadAttention's input projection ``glorot_uniform()`` with zero biases; norms
``ones``/``zeros``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as fnp
from .. import random

__all__ = ["zeros", "ones", "constant", "normal", "uniform", "truncated_normal",
           "variance_scaling", "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal",
           "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal",
           "lecun_uniform", "lecun_normal", "orthogonal", "torch_default", "compute_fans"]


def _dt(dtype):
    return np.dtype(np.float32 if dtype is None else dtype)


def zeros(key, shape, dtype=None):
    return fnp.zeros(tuple(shape), _dt(dtype))


def ones(key, shape, dtype=None):
    return fnp.ones(tuple(shape), _dt(dtype))


def constant(value):
    """Every element ``value``."""
    def init(key, shape, dtype=None):
        return fnp.full(tuple(shape), value, _dt(dtype))
    return init


def normal(stddev=1e-2, mean=0.0):
    """``N(mean, stddev^2)``."""
    def init(key, shape, dtype=None):
        return random.normal(key, tuple(shape), _dt(dtype)) * stddev + mean
    return init


def uniform(scale=1e-2, minval=None):
    """``U(minval, minval + scale)``; ``minval`` defaults to 0 (``U(0, scale)``, as
    jax.nn.initializers.uniform)."""
    lo = 0.0 if minval is None else minval

    def init(key, shape, dtype=None):
        return random.uniform(key, tuple(shape), _dt(dtype), lo, lo + scale)
    return init


def truncated_normal(stddev=1e-2):
    """Normal truncated at two standard deviations."""
    def init(key, shape, dtype=None):
        return random.truncated_normal(key, -2.0, 2.0, tuple(shape), _dt(dtype)) * stddev
    return init


def compute_fans(shape, in_axis=1, out_axis=0):
    """``(fan_in, fan_out)`` of a weight shape (PyTorch layout by default)."""
    shape = tuple(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    ia, oa = in_axis % len(shape), out_axis % len(shape)
    rf = math.prod(s for i, s in enumerate(shape) if i not in (ia, oa))
    return shape[ia] * rf, shape[oa] * rf


def variance_scaling(scale, mode, distribution, in_axis=1, out_axis=0):
    """Samples with variance ``scale / n``, ``n`` the fan in, fan out or their average
    (``mode`` 'fan_in', 'fan_out', 'fan_avg'); ``distribution`` 'uniform', 'normal'
    (untruncated) or 'truncated_normal'."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: mode must be fan_in, fan_out or fan_avg, got "
                         f"{mode!r}")

    def init(key, shape, dtype=None):
        fi, fo = compute_fans(shape, in_axis, out_axis)
        n = {"fan_in": fi, "fan_out": fo, "fan_avg": (fi + fo) / 2}[mode]
        var = scale / max(n, 1)
        dt = _dt(dtype)
        if distribution == "uniform":
            b = math.sqrt(3 * var)
            return random.uniform(key, tuple(shape), dt, -b, b)
        if distribution == "normal":
            return random.normal(key, tuple(shape), dt) * math.sqrt(var)
        if distribution == "truncated_normal":
            # std of N(0,1) truncated to [-2, 2]
            return random.truncated_normal(key, -2.0, 2.0, tuple(shape), dt) * (
                math.sqrt(var) / 0.87962566103423978)
        raise ValueError(f"variance_scaling: unknown distribution {distribution!r}")
    return init


def he_uniform(in_axis=1, out_axis=0):
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis)


def he_normal(in_axis=1, out_axis=0):
    return variance_scaling(2.0, "fan_in", "normal", in_axis, out_axis)


def glorot_uniform(in_axis=1, out_axis=0):
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis)


def glorot_normal(in_axis=1, out_axis=0):
    return variance_scaling(1.0, "fan_avg", "normal", in_axis, out_axis)


def lecun_uniform(in_axis=1, out_axis=0):
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis)


def lecun_normal(in_axis=1, out_axis=0):
    return variance_scaling(1.0, "fan_in", "normal", in_axis, out_axis)


kaiming_uniform, kaiming_normal = he_uniform, he_normal
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal


def torch_default(in_axis=1, out_axis=0):
    """PyTorch's Linear/Conv default: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``."""
    return variance_scaling(1.0 / 3.0, "fan_in", "uniform", in_axis, out_axis)


def orthogonal(scale=1.0):
    """A (semi-)orthogonal matrix over ``(shape[0], prod(shape[1:]))``, times ``scale``."""
    def init(key, shape, dtype=None):
        shape = tuple(shape)
        rows = shape[0]
        cols = math.prod(shape[1:]) if len(shape) > 1 else 1
        a = np.asarray(random.normal(key, (max(rows, cols), min(rows, cols)), np.float64))
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return fnp.asarray((scale * q).reshape(shape).astype(_dt(dtype)))
    return init
