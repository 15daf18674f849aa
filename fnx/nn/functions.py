"""Activation, normalization and classification functions (JAX's ``jax.nn``).

Each function is a composition of ``fnx.numpy`` and ``fnx.lax`` operations written so
that values and derivatives stay finite wherever the mathematical ones are, at
extreme inputs too (|x| ~ 1e4 in float32): branches that ``where`` discards are
fed safe operands (the derivative of a discarded branch is multiplied by zero, and
``0 * inf`` would be NaN), and shifts by a row's maximum are constants
(``stop_gradient``). Conventions follow JAX: ``relu``'s derivative at 0 is 0,
``softmax`` of a row of only ``-inf`` is NaN, an entry of ``-inf`` gets derivative 0.

``dot_product_attention`` is JAX's "xla" path written out: logits in at least float32,
masks applied as a large negative number (so a fully masked row attends uniformly, as
in JAX), a softmax, and the weighted sum of values; grouped-query attention maps query
head ``n`` to key/value head ``n // (N // K)``.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..core.array import to_array
from ..errors import ShapeError
from ..numpy.util import normalize_axes, normalize_axis, promote

__all__ = ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "swish",
           "softplus", "sigmoid", "log_sigmoid", "hard_tanh", "hard_sigmoid", "hard_silu",
           "hard_swish", "soft_sign", "glu", "softmax", "log_softmax", "logsumexp", "one_hot",
           "standardize", "identity", "tanh", "mish", "squareplus", "sparse_plus",
           "sparse_sigmoid", "log1mexp", "logmeanexp", "dot_product_attention"]


def _float(name, x):
    (x,) = promote(name, x, to_inexact=True)
    return x


def _const(v, like):
    """``v`` shaped and typed like ``like``, weakly typed where it is (as JAX's constants
    are), so ``relu(2.0)`` stays a weak float."""
    return lax.full_like(like, v)


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
        out = x * lax.logistic(c * (x + 0.044715 * (x * x * x)))
    else:
        # x (1 + erf(x / sqrt 2)) / 2; for x < 0 the erfc form keeps the small tail accurate
        z = x * float(1 / np.sqrt(2))
        out = 0.5 * x * fnp.where(x < 0, lax.erfc(-z), 1 + lax.erf(z))
    # strongly typed, as JAX's gelu (its constants are NumPy scalars of x's dtype), so
    # gelu(2.0) * a_bfloat16 is float32 in both
    return lax.convert_element_type(out, out.dtype) if out.weak_type else out


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



def identity(x):
    """``x`` unchanged, as an array (its dtype kept: ints stay ints)."""
    return to_array(x, "identity")


tanh = fnp.tanh


def mish(x):
    """``x * tanh(softplus(x))``."""
    x = _float("mish", x)
    # tanh(softplus(x)) = n / (n + 2) with n = e^x (e^x + 2), and 1 - 2 / (n + 2) for
    # x > 0: tanh's derivative 1 - tanh^2 would cancel to float32's eps for x > 8, and
    # this form's derivatives do not. It is 1 to float64's precision above 20: the value
    # is x there, and the other branch sees 0.
    big = x > 20
    xs = fnp.where(big, 0.0, x)
    e = fnp.exp(xs)
    n = e * (e + 2)
    t = fnp.where(xs > 0, 1 - 2 / (n + 2), n / (n + 2))
    return fnp.where(big, x, xs * t)


def squareplus(x, b=4):
    """``(x + sqrt(x^2 + b)) / 2``, a smooth ``relu``.

    Written so that no intermediate overflows or cancels: ``sqrt(x^2 + b)`` as
    ``|x| sqrt(1 + b / x^2)`` for ``|x| >= 1``, and for ``x < 0`` the value as
    ``b / (2 (sqrt(x^2 + b) - x))`` (JAX's direct form gives 0 at ``x = -1e4`` and inf at
    ``x = -1e20`` in float32, where the value is about ``b / (4|x|)``, and inf for
    ``x > 1.8e38``).
    """
    x, b = promote("squareplus", x, b, to_inexact=True)
    big = fnp.abs(x) >= 1
    xb = fnp.where(big, x, 1.0)                    # safe operands for each form
    xs = fnp.where(big, 0.0, x)
    # (b / x) / x: x * x overflows past 1.8e19, and its derivatives give inf * 0 there
    r = fnp.where(big, fnp.abs(xb) * fnp.sqrt(1 + b / xb / xb), fnp.sqrt(xs * xs + b))
    neg = x < 0
    xn = fnp.where(neg, x, -1.0)                   # halves first: x + r overflows at 2e38
    return fnp.where(neg, 0.25 * b / (0.5 * r - 0.5 * xn), 0.5 * x + 0.5 * r)


def sparse_plus(x):
    """0 for ``x <= -1``, ``(x + 1)^2 / 4`` in between, ``x`` for ``x >= 1`` (a
    piecewise-quadratic softplus whose derivative is ``sparse_sigmoid``)."""
    x = _float("sparse_plus", x)
    m = fnp.clip(x, -1.0, 1.0)                     # the quadratic never sees a huge x
    return fnp.where(x <= -1, 0.0, fnp.where(x >= 1, x, (m + 1) * (m + 1) / 4))


def sparse_sigmoid(x):
    """``clip((x + 1) / 2, 0, 1)``, the derivative of ``sparse_plus``; at the kinks the
    derivative is 1/4 (as JAX: its clip splits ties between the two sides)."""
    x = _float("sparse_sigmoid", x)
    return 0.5 * fnp.clip(x + 1.0, 0.0, 2.0)


_LOG2 = float(np.log(2))


def log1mexp(x):
    """``log(1 - exp(-x))`` for ``x >= 0`` (NaN below 0, ``-inf`` at 0): ``log(-expm1(-x))``
    below ``log 2`` and ``log1p(-exp(-x))`` above (Maechler's two stable forms).
    The derivative ``1 / expm1(x)`` is finite for every ``x > 0``."""
    x = _float("log1mexp", x)
    small = x < _LOG2
    xs = fnp.where(small, x, _LOG2)                # each form only sees its own range
    xl = fnp.where(small, 1.0, x)
    return fnp.where(small, fnp.log(-fnp.expm1(-xs)), fnp.log1p(-fnp.exp(-xl)))

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


def _log_or_neg_inf(s):
    """``log(s)``, and ``-inf`` where ``s`` is 0 with a derivative of 0 there (not inf).
    The ``-inf`` comes from ``log(0)`` where the result is ``-inf``, not from a constant,
    so ``jax_debug_infs`` reports only a ``-inf`` result, as JAX's does."""
    zero = s == 0
    return fnp.log(fnp.where(zero, _const(1, s), s)) + \
        fnp.log(fnp.where(zero, _const(0, s), _const(1, s)))


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
    if b is not None:       # the shift is the largest entry that counts (b != 0), as JAX
        a = _masked(a, b != 0, -np.inf)
    m = _shift(fnp.real(a) if a.dtype.kind == "c" else a, axes, None, safe=True)
    e = fnp.exp(a - m.astype(a.dtype))
    if b is not None:
        e = e * b
    s = fnp.sum(e, axis=axes, keepdims=True)
    if a.dtype.kind == "c" and not return_sign:
        out = _log_or_neg_inf(s) + m.astype(s.dtype)
        return out if keepdims else lax.squeeze(out, axes)
    sign = fnp.sign(s)
    mag = fnp.abs(s)
    out = _log_or_neg_inf(mag)
    out = out + m.astype(out.dtype)
    if not keepdims:
        out, sign = lax.squeeze(out, axes), lax.squeeze(sign, axes)
    if return_sign:
        return out, sign
    if b is None:
        return out
    return fnp.where(sign < 0, _const(np.nan, out), out)


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """``log(mean(exp(x)))`` over ``axis`` (None: all): ``logsumexp(x) - log(n)``, where
    ``n`` counts the entries ``where`` keeps (none kept: NaN, as JAX)."""
    x = _float("logmeanexp", x)
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    axes = _axes("logmeanexp", axis, x.ndim)
    if where is None:
        count = fnp.asarray(float(np.prod([x.shape[a] for a in axes])), lse.dtype)
    else:
        kept = fnp.broadcast_to(to_array(where, "logmeanexp"), x.shape)
        count = fnp.sum(kept, axis=axes, keepdims=keepdims, dtype=lse.dtype)
    return lse - fnp.log(count)


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """``x[..., None] == arange(num_classes)`` as ``dtype`` (default: the default float),
    the class axis at ``axis``. Indices out of range (negative ones too) give all zeros."""
    x = to_array(x)
    num_classes = int(num_classes)
    dtype = dtypes.default_float() if dtype is None else dtypes.canonical(dtype, "one_hot")
    out_ndim = x.ndim + 1
    axis = normalize_axis("one_hot", axis, out_ndim)
    shape = tuple(x.shape[:axis]) + (num_classes,) + tuple(x.shape[axis:])
    # the classes in x's own dtype, as JAX's (no promotion, so strict mode holds)
    classes = lax.broadcasted_iota(x.dtype if x.dtype.kind in "iuf" or dtypes.is_floating(
        x.dtype) else np.int32, shape, axis)
    if x.dtype.kind == "b":
        x = lax.convert_element_type(x, np.int32)
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


# --- attention -------------------------------------------------------------------------------

_DPA = "dot_product_attention"
_LAYOUT = ("query (B, T, N, H) or (T, N, H); key and value (B, S, K, H) or (S, K, H), "
           "N a multiple of K")


def _as_4d(t, what):
    t = to_array(t, f"{_DPA} {what}")
    if t.ndim > 4:
        raise ShapeError(f"{_DPA}: {what} has shape {tuple(t.shape)}, of rank {t.ndim}; it "
                         f"must have rank <= 4 (layout: {_LAYOUT}; bias and mask broadcast "
                         f"to (B, N, T, S))")
    return fnp.reshape(t, (1,) * (4 - t.ndim) + tuple(t.shape))


def _check_logit_operand(t, what, shape):
    """``bias``/``mask`` (already 4-d) must broadcast to the logits' (B, N, T, S)."""
    if any(d not in (1, n) for d, n in zip(t.shape, shape)):
        raise ShapeError(
            f"{_DPA}: {what} of shape {tuple(t.shape)} does not broadcast to the logits' "
            f"(B, N, T, S) = {shape}; each of its dims must be 1 or the logits' (its head "
            f"dim 1 or the number of query heads N, not the key/value heads K)")


def _seq_lengths(t, what, batch):
    if t is None:
        return None
    t = to_array(t, f"{_DPA} {what}")
    if not dtypes.is_integer(t.dtype) or tuple(t.shape) != (batch,):
        raise ShapeError(f"{_DPA}: {what} must be an integer array of shape (B,) = "
                         f"({batch},), one length per batch entry; got {t.dtype} of shape "
                         f"{tuple(t.shape)}")
    return t


def _window(local_window_size):
    if local_window_size is None:
        return None
    w = local_window_size
    if isinstance(w, (int, np.integer)):
        w = (w, w)
    w = tuple(w)
    if len(w) != 2 or not all(isinstance(v, (int, np.integer)) for v in w):
        raise ValueError(f"{_DPA}: local_window_size must be an int or a pair of ints "
                         f"(left, right); got {local_window_size!r}")
    return int(w[0]), int(w[1])


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """``softmax(scale * Q K^T + bias, masked) V`` per head, in JAX's layout.

    ``query`` is (B, T, N, H) (or (T, N, H)); ``key`` and ``value`` are (B, S, K, H) with
    ``N`` a multiple of ``K`` (K < N: grouped-query attention, query head ``n`` reads
    key/value head ``n // (N // K)``). ``bias`` (added to the logits) and the boolean
    ``mask`` (True: attend) broadcast to (B, N, T, S), rank <= 4 (leading dims are added).
    ``scale`` defaults to ``1 / sqrt(H)``. ``is_causal``: query ``t`` sees keys ``s <= t``
    (top-left aligned, as JAX). ``local_window_size=(l, r)`` (or one int for both): query
    ``t`` sees keys ``t - l <= s <= t + r``. ``query_seq_lengths`` /
    ``key_value_seq_lengths`` (integer, shape (B,)) mask padding; query rows past their
    length give 0. Masked logits become a large negative number, so a row with every
    key masked attends to all of them uniformly (as JAX).

    Dtypes (as JAX): query, key and value share one floating dtype, which the output
    has; logits and softmax are computed in at least float32. ``return_residual``: also
    the logsumexp of the masked logits, (B, T, N) in that dtype, without derivative.
    ``implementation``: None or ``"xla"`` (the only path fnx has).
    """
    if implementation == "cudnn":
        raise NotImplementedError(
            f"{_DPA}: implementation='cudnn' is not available: fnx has only the 'xla' path "
            f"(the same math, in fnx ops, on every backend); pass implementation=None or "
            f"'xla'")
    if implementation not in (None, "xla"):
        raise ValueError(f"{_DPA}: unsupported implementation {implementation!r}; fnx has "
                         f"None and 'xla'")
    out_shape = tuple(to_array(query, f"{_DPA} query").shape)
    q, k, v = (_as_4d(t, w) for t, w in ((query, "query"), (key, "key"), (value, "value")))
    if not (q.dtype == k.dtype == v.dtype) or not dtypes.is_inexact(k.dtype) \
            or k.dtype.kind == "c":
        raise ShapeError(f"{_DPA}: query, key and value must share one floating dtype; got "
                         f"{q.dtype}, {k.dtype} and {v.dtype} (cast them, e.g. "
                         f"query.astype(key.dtype))")
    B, S, K, H = k.shape
    _, T, N, Hq = q.shape
    if tuple(v.shape) != tuple(k.shape):
        raise ShapeError(f"{_DPA}: value has shape {tuple(v.shape)} but key has "
                         f"{tuple(k.shape)}; they must be equal ({_LAYOUT})")
    if q.shape[0] != B or Hq != H:
        raise ShapeError(f"{_DPA}: query of shape {tuple(q.shape)} does not fit key of shape "
                         f"{tuple(k.shape)}: batch B and head size H must agree ({_LAYOUT})")
    if K == 0 or N % K:
        raise ShapeError(f"{_DPA}: the number of query heads N = {N} must be a multiple of "
                         f"the number of key/value heads K = {K} (query {tuple(q.shape)}, "
                         f"key {tuple(k.shape)})")
    logits_shape = (B, N, T, S)
    if bias is not None:
        bias = _as_4d(bias, "bias")
        _check_logit_operand(bias, "bias", logits_shape)
    if mask is not None:
        mask = _as_4d(mask, "mask")
        if mask.dtype != np.bool_:
            raise ShapeError(f"{_DPA}: mask must be boolean (True: attend), got {mask.dtype}; "
                             f"an additive mask goes in bias")
        _check_logit_operand(mask, "mask", logits_shape)
    q_len = _seq_lengths(query_seq_lengths, "query_seq_lengths", B)
    kv_len = _seq_lengths(key_value_seq_lengths, "key_value_seq_lengths", B)
    window = _window(local_window_size)
    scale = float(1 / np.sqrt(H)) if scale is None else scale

    G = N // K
    # products of halves are exact in float32 (computed apart from the user's promotion
    # mode: these are fnx's own conversions)
    ldt = np.dtype(np.float64) if q.dtype == np.float64 else np.dtype(np.float32)
    qg = fnp.reshape(q.astype(ldt), (B, T, K, G, H))
    logits = fnp.reshape(fnp.einsum("BTKGH,BSKH->BKGTS", qg, k.astype(ldt)), logits_shape)
    logits = logits * fnp.asarray(scale, ldt)
    if bias is not None:
        logits = logits + bias.astype(ldt)

    keep = [] if mask is None else [mask]
    t_pos = lax.broadcasted_iota(np.int32, (T, S), 0)
    s_pos = lax.broadcasted_iota(np.int32, (T, S), 1)
    if is_causal:  # (each mask 4-D: the user's rank promotion mode may be 'raise')
        keep.append((s_pos <= t_pos)[None, None])
    if window is not None:
        keep.append(((t_pos <= s_pos + window[0]) & (t_pos >= s_pos - window[1]))[None, None])
    if q_len is not None:
        keep.append(fnp.arange(T)[None, None, :, None] < q_len[:, None, None, None])
    if kv_len is not None:
        keep.append(fnp.arange(S)[None, None, None, :] < kv_len[:, None, None, None])
    if keep:
        combined = keep[0]
        for m in keep[1:]:
            combined = combined & m
        # JAX's fill: finite (a fully masked row is uniform, not NaN), within float32
        big = -0.7 * min(float(dtypes.finfo(ldt).max), float(dtypes.finfo(np.float32).max))
        logits = fnp.where(combined, logits, _const(big, logits))

    probs = softmax(logits, axis=-1).astype(k.dtype)   # rounded to the inputs' dtype
    pg = fnp.reshape(probs.astype(ldt), (B, K, G, T, S))
    out = fnp.einsum("BKGTS,BSKH->BTKGH", pg, v.astype(ldt)).astype(k.dtype)
    out = fnp.reshape(out, (B, T, N, H))
    if q_len is not None:
        valid = fnp.arange(T)[None, :, None, None] < q_len[:, None, None, None]
        out = out * valid.astype(out.dtype)
    out = fnp.reshape(out, out_shape)
    if not return_residual:
        return out
    lse = lax.stop_gradient(logsumexp(logits, axis=-1).astype(k.dtype))   # (B, N, T)
    return out, fnp.reshape(fnp.transpose(lse, (0, 2, 1)), out_shape[:-1])
