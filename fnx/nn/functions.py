"""Activation, normalization and classification functions (JAX's ``jax.nn``).

Each function is a composition of ``fnx.numpy`` and ``fnx.lax`` operations written so
that values and derivatives stay finite wherever the mathematical ones are, at
extreme inputs too (|x| ~ 1e4 in float32): branches that ``where`` discards are
fed safe operands (the derivative of a discarded branch is multiplied by zero, and
``0 * inf`` would be NaN), and shifts by a row's maximum are constants
(``stop_gradient``). Conventions follow JAX: ``relu``'s derivative at 0 is 0,
``softmax`` of a row of only ``-inf`` is NaN, an entry of ``-inf`` gets derivative 0.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..core.array import to_array
from ..numpy.util import normalize_axes, normalize_axis, promote

__all__ = ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "swish",
           "softplus", "sigmoid", "log_sigmoid", "hard_tanh", "hard_sigmoid", "hard_silu",
           "hard_swish", "soft_sign", "glu", "softmax", "log_softmax", "logsumexp", "one_hot",
           "standardize"]


def _float(name, x):
    (x,) = promote(name, x, to_inexact=True)
    return x


def _const(v, like):
    return lax.broadcast_in_dim(np.array(v, like.dtype), tuple(like.shape), ())


# --- elementwise activations ----------------------------------------------------------------

def relu(x):
    """``max(x, 0)``; its derivative at 0 is 0 (as JAX); NaN stays NaN."""
    x = to_array(x)
    return fnp.where(x <= 0, _const(0, x), x)


def relu6(x):
    """``min(max(x, 0), 6)``; derivative 0 at 0 and at 6 (as JAX)."""
    x = _float("relu6", x)
    return fnp.where(x <= 0, _const(0, x), fnp.where(x >= 6, _const(6, x), x))


def leaky_relu(x, negative_slope=0.01):
    x = _float("leaky_relu", x)
    return fnp.where(x >= 0, x, negative_slope * x)


def elu(x, alpha=1.0):
    """``x`` for ``x > 0``, else ``alpha (exp(x) - 1)``."""
    x = _float("elu", x)
    pos = x > 0
    safe = fnp.where(pos, _const(0, x), x)   # expm1 of large x overflows: keep it out
    return fnp.where(pos, x, alpha * fnp.expm1(safe))


def selu(x):
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def celu(x, alpha=1.0):
    """``max(x, 0) + alpha (exp(min(x, 0) / alpha) - 1)``."""
    x = _float("celu", x)
    return fnp.maximum(x, 0) + alpha * fnp.expm1(fnp.minimum(x, 0) / alpha)


def gelu(x, approximate=True):
    """Gaussian error linear unit: ``x * Phi(x)``; ``approximate=True``: the tanh form."""
    x = _float("gelu", x)
    if approximate:
        # (1 + tanh(u)) / 2 is logistic(2 u), which keeps the left tail accurate (1 + tanh
        # cancels there); Python floats: weakly typed constants
        c = float(2 * np.sqrt(2 / np.pi))
        return x * lax.logistic(c * (x + 0.044715 * (x * x * x)))
    # x (1 + erf(x / sqrt 2)) / 2; for x < 0 the erfc form keeps the small tail accurate
    z = x * float(1 / np.sqrt(2))
    return 0.5 * x * fnp.where(x < 0, lax.erfc(-z), 1 + lax.erf(z))


def sigmoid(x):
    """The logistic function ``1 / (1 + exp(-x))``."""
    return lax.logistic(_float("sigmoid", x))


def silu(x):
    """``x * sigmoid(x)`` (also called swish)."""
    x = _float("silu", x)
    return x * lax.logistic(x)


swish = silu


def softplus(x):
    """``log(1 + exp(x))`` without overflow (derivative: sigmoid)."""
    x = _float("softplus", x)
    return lax.logaddexp(x, _const(0, x))


def log_sigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``."""
    x = _float("log_sigmoid", x)
    return -softplus(-x)


def soft_sign(x):
    x = _float("soft_sign", x)
    return x / (fnp.abs(x) + 1)


def hard_tanh(x):
    """``x`` clipped to [-1, 1] (derivative 0 outside)."""
    x = _float("hard_tanh", x)
    return fnp.where(x > 1, _const(1, x), fnp.where(x < -1, _const(-1, x), x))


def hard_sigmoid(x):
    """``relu6(x + 3) / 6``."""
    return relu6(_float("hard_sigmoid", x) + 3.0) / 6.0


def hard_silu(x):
    """``x * hard_sigmoid(x)`` (also called hard_swish)."""
    x = _float("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def glu(x, axis=-1):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves ``a, b`` of ``axis``."""
    x = _float("glu", x)
    axis = normalize_axis("glu", axis, x.ndim)
    n = x.shape[axis]
    if n % 2:
        raise ValueError(f"glu: axis {axis} has odd size {n}; it must split into two halves")
    a = lax.slice_in_dim(x, 0, n // 2, 1, axis)
    b = lax.slice_in_dim(x, n // 2, n, 1, axis)
    return a * lax.logistic(b)


# --- normalizations over axes ----------------------------------------------------------------

def _axes(name, axis, ndim):
    return tuple(normalize_axes(name, axis, ndim))


def _masked(x, where, fill):
    if where is None:
        return x
    return fnp.where(where, x, _const(fill, x))


def _shift(x, axes, where, safe=False):
    """The maximum over ``axes`` (kept as size-1 dims), as a constant of differentiation
    (``safe``: 0 where it is not finite, e.g. a row of only ``-inf``)."""
    if x.size:
        m = fnp.max(_masked(x, where, -np.inf), axis=axes, keepdims=True)
    else:
        m = fnp.zeros([1 if d in axes else n for d, n in enumerate(x.shape)], x.dtype)
    if safe:
        m = fnp.where(fnp.isfinite(m), m, _const(0, m))
    return lax.stop_gradient(m)


def _nonzero(s):
    """``s`` with its zeros replaced by 1 (a divisor or log argument whose zeros only
    occur in rows that are discarded: no 0/0 in their derivatives either)."""
    return fnp.where(s == 0, _const(1, s), s)


def softmax(x, axis=-1, where=None):
    """``exp(x) / sum(exp(x))`` over ``axis``, shifted by the maximum so nothing overflows.

    An entry of ``-inf`` gets 0 (and derivative 0); a row of only ``-inf`` is NaN, as in
    JAX. ``where``: entries where it is False are left out of the sum and give 0 (a row
    with none left gives 0s, and derivative 0).
    """
    x = _float("softmax", x)
    axes = _axes("softmax", axis, x.ndim)
    if where is None:
        u = fnp.exp(x - _shift(x, axes, None))
        return u / fnp.sum(u, axis=axes, keepdims=True)
    u = fnp.exp(_masked(x, where, -np.inf) - _shift(x, axes, where, safe=True))
    out = u / _nonzero(fnp.sum(u, axis=axes, keepdims=True))
    return fnp.where(where, out, _const(0, out))


def log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x)`` over ``axis``: ``-inf`` entries stay ``-inf`` (derivative 0);
    a row of only ``-inf`` is NaN, as in JAX. ``where``: False entries give ``-inf``."""
    x = _float("log_softmax", x)
    axes = _axes("log_softmax", axis, x.ndim)
    if where is None:
        shifted = x - _shift(x, axes, None)
        return shifted - fnp.log(fnp.sum(fnp.exp(shifted), axis=axes, keepdims=True))
    shifted = _masked(x, where, -np.inf) - _shift(x, axes, where, safe=True)
    out = shifted - fnp.log(_nonzero(fnp.sum(fnp.exp(shifted), axis=axes, keepdims=True)))
    return fnp.where(where, out, _const(-np.inf, out))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """``log(sum(b * exp(a)))`` over ``axis`` (None: all), without overflow.

    As JAX (and SciPy): a row of only ``-inf`` (or of zero weights) gives ``-inf``;
    a negative sum gives NaN unless ``return_sign``, which returns ``(log|sum|, sign)``.
    Derivatives are finite wherever the result is: an entry of ``-inf`` gets 0, and so
    does every entry of a row whose result is ``-inf`` (JAX gives NaN there).
    """
    if b is None:
        a = _float("logsumexp", a)
    else:
        a, b = promote("logsumexp", a, b, to_inexact=True)
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = fnp.broadcast_to(a, shape), fnp.broadcast_to(b, shape)
    axes = _axes("logsumexp", axis, a.ndim)
    if where is not None:   # masked entries out before exp: exp(garbage) could overflow
        a = _masked(a, where, -np.inf)
    m = _shift(fnp.real(a) if a.dtype.kind == "c" else a, axes, None, safe=True)
    e = fnp.exp(a - m)
    if b is not None:
        e = e * b
    s = fnp.sum(e, axis=axes, keepdims=True)
    if a.dtype.kind == "c" and not return_sign:
        zero = s == 0
        out = fnp.where(zero, _const(-np.inf, s), fnp.log(fnp.where(zero, _const(1, s), s)))
        out = out + m
        return out if keepdims else lax.squeeze(out, axes)
    sign = fnp.sign(s)
    mag = fnp.abs(s)
    zero = mag == 0
    out = fnp.where(zero, _const(-np.inf, mag), fnp.log(fnp.where(zero, _const(1, mag), mag)))
    out = out + m.astype(out.dtype)
    if not keepdims:
        out, sign = lax.squeeze(out, axes), lax.squeeze(sign, axes)
    if return_sign:
        return out, sign
    if b is None:
        return out
    return fnp.where(sign < 0, _const(np.nan, out), out)


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """``x[..., None] == arange(num_classes)`` as ``dtype`` (default: the default float),
    the class axis at ``axis``. Indices out of range (negative ones too) give all zeros."""
    x = to_array(x)
    num_classes = int(num_classes)
    dtype = dtypes.default_float() if dtype is None else dtypes.canonical(dtype, "one_hot")
    out_ndim = x.ndim + 1
    axis = normalize_axis("one_hot", axis, out_ndim)
    shape = tuple(x.shape[:axis]) + (num_classes,) + tuple(x.shape[axis:])
    classes = lax.broadcasted_iota(np.int32, shape, axis)
    lhs = lax.broadcast_in_dim(x, shape, tuple(d for d in range(out_ndim) if d != axis))
    return lax.convert_element_type(fnp.equal(lhs, classes), dtype)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis`` (mean and variance computed
    there unless given, over the entries where ``where`` is True)."""
    x = _float("standardize", x)
    axes = _axes("standardize", axis, x.ndim)
    if mean is None:
        mean = fnp.mean(x, axis=axes, keepdims=True, where=where)
    if variance is None:
        # the centred form: E[(x - mean)^2] does not cancel as E[x^2] - mean^2 does
        variance = fnp.mean(fnp.square(x - mean), axis=axes, keepdims=True, where=where)
    return (x - mean) * lax.rsqrt(fnp.asarray(variance + epsilon, x.dtype))
