"""Parameter initializers, as ``jax.nn.initializers``: ``init(key, shape, dtype=None)``.

Every name, signature and default is JAX's: an initializer factory takes an optional
``dtype`` that becomes the call's default; a ``dtype`` of None means the default float
(float32, or float64 with ``jax_enable_x64``).  Fans use JAX's weight layout: the input
axis is ``in_axis=-2`` and the output axis ``out_axis=-1`` (a Dense kernel is
``(in, out)``, a conv kernel ``(*window, in, out)`` as ``HWIO``), every other axis not in
``batch_axis`` is receptive field.  The ``*_normal`` variance-scaling initializers
(glorot, lecun, he) draw from a normal truncated at two standard deviations, rescaled
so the standard deviation is still ``sqrt(scale / n)``.

With the same key the results are JAX's: bit for bit for the uniform-based initializers
(uniform, variance scaling with ``"uniform"``, glorot/lecun/he uniform), to a few ulp
for the normal-based ones.

Where JAX fails without a message fnx says what is wrong: a zero fan (a shape with a
zero dimension) or an axis out of range names the shape and the axes.

fnx's own layers (``fnx.nn.Linear``, ``Conv2d``, ...) keep PyTorch's layout
``(out, in, *kernel)`` and PyTorch's default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``; to
use a JAX initializer on such a layer pass the axes, e.g.
``Linear(10, kernel_init=glorot_uniform(in_axis=1, out_axis=0))``, or use
``torch_default()``, an fnx extra with PyTorch's fans.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .. import numpy as fnp
from .. import random
from ..core import dtypes as _dtypes

__all__ = ["Initializer", "zeros", "ones", "constant", "normal", "uniform",
           "truncated_normal", "variance_scaling", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "glorot_uniform", "glorot_normal",
           "xavier_uniform", "xavier_normal", "lecun_uniform", "lecun_normal", "orthogonal",
           "delta_orthogonal", "torch_default", "compute_fans"]


@runtime_checkable
class Initializer(Protocol):
    """What every initializer is: ``init(key, shape, dtype=None) -> Array``."""

    def __call__(self, key, shape, dtype=None) -> Any:
        raise NotImplementedError


def _dt(where, dtype):
    """The dtype to create: the default float for None, else the canonical form of the
    requested inexact dtype."""
    if dtype is None:
        return _dtypes.default_float()
    dt = _dtypes.canonical(dtype)
    if not _dtypes.is_inexact(dt):      # bfloat16 too (NumPy calls its kind "V")
        raise TypeError(f"nn.initializers.{where}: dtype must be a floating or complex "
                        f"dtype, got {dt}")
    return dt


def _shape(where, shape):
    try:
        return tuple(operator.index(d) for d in (shape if isinstance(shape, (tuple, list))
                                                  else (shape,)))
    except TypeError:
        raise TypeError(f"nn.initializers.{where}: shape must be a tuple of ints, got "
                        f"{shape!r}") from None


def zeros(key, shape, dtype=None, out_sharding=None):
    """Zeros (the key is ignored)."""
    return fnp.zeros(_shape("zeros", shape), _dt("zeros", dtype))


def ones(key, shape, dtype=None, out_sharding=None):
    """Ones (the key is ignored)."""
    return fnp.ones(_shape("ones", shape), _dt("ones", dtype))


def constant(value, dtype=None):
    """Every element ``value``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        return fnp.full(_shape("constant", shape), value, dtype=_dt("constant", dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform in ``[0, scale)``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dt("uniform", dtype)
        return random.uniform(key, _shape("uniform", shape), dt) * fnp.asarray(scale, dt)
    return init


def normal(stddev=1e-2, dtype=None):
    """Normal with mean 0 and standard deviation ``stddev``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dt("normal", dtype)
        return random.normal(key, _shape("normal", shape), dt) * fnp.asarray(stddev, dt)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """A standard normal truncated to ``(lower, upper)``, times ``stddev`` (no correction
    of the standard deviation for the truncation, as JAX)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dt("truncated_normal", dtype)
        return random.truncated_normal(key, lower, upper, _shape("truncated_normal", shape),
                                       dt) * fnp.asarray(stddev, dt)
    return init


def _axes(where, shape, axis, name):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    for a in axes:
        if not -len(shape) <= a < len(shape):
            raise ValueError(f"nn.initializers.{where}: {name}={axis} is out of range for "
                             f"a weight of shape {shape}")
    return axes


def compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    """``(fan_in, fan_out)`` of a weight shape, JAX's way: the sizes of ``in_axis`` and
    ``out_axis`` (ints or sequences of ints) times the receptive field, the product of
    the axes that are in none of ``in_axis``, ``out_axis`` and ``batch_axis``."""
    shape = tuple(shape)
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"nn.initializers: cannot compute the fans of a {len(shape)}-d "
                         f"weight of shape {shape} with the default in_axis=-2; variance "
                         "scaling needs a weight of at least 2 dimensions, or pass in_axis "
                         "and out_axis (for a bias use zeros or normal instead)")
    size = {}
    for name, axis in (("in_axis", in_axis), ("out_axis", out_axis),
                       ("batch_axis", batch_axis)):
        size[name] = math.prod(shape[a] for a in _axes("variance_scaling", shape, axis, name))
    if 0 in shape:
        raise ValueError(f"nn.initializers: the weight shape {shape} has a zero dimension, "
                         "so its fans are 0 and variance scaling would divide by zero")
    rf = math.prod(shape) / size["in_axis"] / size["out_axis"] / size["batch_axis"]
    return size["in_axis"] * rf, size["out_axis"] * rf


def _complex_uniform(key, shape, dtype):
    """Uniform on the disk of radius sqrt(2) in the complex plane (unit variance)."""
    k_r, k_theta = random.split(key)
    real = np.finfo(dtype).dtype
    r = fnp.sqrt(2 * random.uniform(k_r, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(k_theta, shape, real).astype(dtype)
    return r * fnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    """A unit-variance complex normal whose modulus is truncated to ``upper``."""
    k_r, k_theta = random.split(key)
    real = np.finfo(dtype).dtype
    t = (1 - fnp.exp(fnp.asarray(-(upper ** 2), dtype))) * random.uniform(
        k_r, shape, real).astype(dtype)
    r = fnp.sqrt(-fnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(k_theta, shape, real).astype(dtype)
    return r * fnp.exp(1j * theta)


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """Samples with standard deviation ``sqrt(scale / n)``, ``n`` the fan in, the fan out,
    their mean or their geometric mean (``mode`` 'fan_in', 'fan_out', 'fan_avg',
    'fan_geo_avg'); ``distribution`` 'truncated_normal' (at two standard deviations,
    rescaled), 'normal' or 'uniform' (a disk for complex dtypes)."""
    if mode not in _MODES:
        raise ValueError(f"nn.initializers.variance_scaling: mode must be one of {_MODES}, "
                         f"got {mode!r}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"nn.initializers.variance_scaling: distribution must be one of "
                         f"{_DISTRIBUTIONS}, got {distribution!r}")

    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = _shape("variance_scaling", shape)
        dt = _dt("variance_scaling", dtype)
        fan_in, fan_out = compute_fans(shape, in_axis, out_axis, batch_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
             "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = fnp.asarray(scale / n, dtype=dt)
        if distribution == "truncated_normal":
            if dt.kind == "f":
                # the standard deviation of a unit normal truncated to [-2, 2]
                std = fnp.sqrt(variance) / fnp.asarray(.87962566103423978, dt)
                return random.truncated_normal(key, -2, 2, shape, dt) * std
            std = fnp.sqrt(variance) / fnp.asarray(.95311164380491208, dt)
            return _complex_truncated_normal(key, 2, shape, dt) * std
        if distribution == "normal":
            return random.normal(key, shape, dt) * fnp.sqrt(variance)
        if dt.kind == "f":
            return random.uniform(key, shape, dt, -1) * fnp.sqrt(3 * variance)
        return _complex_uniform(key, shape, dt) * fnp.sqrt(variance)
    return init


def _variance_scaling_alias(name, scale, mode, distribution, doc):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis,
                                dtype)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"{doc}: ``variance_scaling({scale}, {mode!r}, {distribution!r})``.")
    return factory


glorot_uniform = _variance_scaling_alias("glorot_uniform", 1.0, "fan_avg", "uniform",
                                         "Glorot (Xavier) uniform")
glorot_normal = _variance_scaling_alias("glorot_normal", 1.0, "fan_avg", "truncated_normal",
                                        "Glorot (Xavier) normal")
lecun_uniform = _variance_scaling_alias("lecun_uniform", 1.0, "fan_in", "uniform",
                                        "LeCun uniform")
lecun_normal = _variance_scaling_alias("lecun_normal", 1.0, "fan_in", "truncated_normal",
                                       "LeCun normal")
he_uniform = _variance_scaling_alias("he_uniform", 2.0, "fan_in", "uniform",
                                     "He (Kaiming) uniform")
he_normal = _variance_scaling_alias("he_normal", 2.0, "fan_in", "truncated_normal",
                                    "He (Kaiming) normal")
kaiming_uniform, kaiming_normal = he_uniform, he_normal
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal


def torch_default(in_axis=1, out_axis=0, dtype=None):
    """PyTorch's Linear/Conv default ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` over PyTorch's
    layout ``(out, in, *kernel)`` (an fnx extra; a 1-d shape has fan_in ``shape[0]``)."""
    vs = variance_scaling(1.0 / 3.0, "fan_in", "uniform", in_axis, out_axis, dtype=dtype)

    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = _shape("torch_default", shape)
        if len(shape) >= 2:
            return vs(key, shape, dtype)
        dt = _dt("torch_default", dtype)
        b = fnp.sqrt(fnp.asarray(1.0 / max(shape[0] if shape else 1, 1), dt))
        return random.uniform(key, shape, dt, -1) * b
    return init


def _orthogonal_matrix(key, n, m, dtype):
    """An ``(n, m)`` matrix with orthonormal rows or columns (whichever are fewer), Haar
    distributed: the Q of a Gaussian matrix's QR with R's diagonal made positive."""
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    q, r = fnp.linalg.qr(z)
    d = fnp.diagonal(r)
    q = q * fnp.expand_dims(fnp.sign(d), -2)
    return q.T if n < m else q


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """A matrix with orthonormal rows or columns (whichever are fewer), over the
    ``column_axis`` and the product of the other axes, times ``scale``."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = _shape("orthogonal", shape)
        dt = _dt("orthogonal", dtype)
        if len(shape) < 2:
            raise ValueError(f"nn.initializers.orthogonal: needs a shape of at least 2 "
                             f"dimensions, got {shape}")
        if 0 in shape:
            return fnp.zeros(shape, dtype=dt)
        ca = _axes("orthogonal", shape, column_axis, "column_axis")[0] % len(shape)
        n_cols = shape[ca]
        n_rows = math.prod(shape) // n_cols
        q = _orthogonal_matrix(key, n_rows, n_cols, dt)
        q = fnp.reshape(q, tuple(s for i, s in enumerate(shape) if i != ca) + (n_cols,))
        q = fnp.moveaxis(q, -1, ca)
        return fnp.asarray(scale, dt) * q
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """A 3-, 4- or 5-d convolution kernel that is zero except at the window's centre,
    which holds an orthogonal ``(in, out)`` matrix (needs ``in <= out``)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = _shape("delta_orthogonal", shape)
        dt = _dt("delta_orthogonal", dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"nn.initializers.delta_orthogonal: needs a 3-d, 4-d or 5-d "
                             f"kernel shape, got {shape}")
        if shape[-1] < shape[-2]:
            raise ValueError(f"nn.initializers.delta_orthogonal: fan_in {shape[-2]} must "
                             f"be <= fan_out {shape[-1]} (shape {shape})")
        mat = orthogonal(scale, column_axis, dt)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return fnp.zeros(shape, dtype=dt).at[centre].set(mat)
    return init
