"""optax's losses: elementwise or per-example, never reduced (take ``.mean()`` yourself).

    loss = fnx.optim.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

These follow optax's signatures and results; ``fnx.nn.losses`` has the PyTorch-style
versions (with ``reduction=``) and the regression/binary ones here are built on them.
Where optax returns NaN fnx does better: a ``-inf`` logit whose label is 0 contributes 0
to ``softmax_cross_entropy`` (optax: ``0 * -inf = nan``).  Integer or boolean
predictions and logits, and float labels given to the integer-label loss, raise a
TypeError naming the function and the dtype (optax fails in a type-check helper).
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import numpy as fnp
from ..nn import functions as F
from ..nn import losses as _nn

__all__ = ["squared_error", "l2_loss", "huber_loss", "sigmoid_binary_cross_entropy",
           "softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels"]


def _floating(where, name, x):
    x = fnp.asarray(x)
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        raise TypeError(f"optim.{where}: {name} must be floating point, got {x.dtype}; "
                        f"cast it first, e.g. {name}.astype(jnp.float32)")
    return x


def _check_targets(where, predictions, targets):
    targets = fnp.asarray(targets)
    if targets.shape != predictions.shape:
        raise ValueError(f"optim.{where}: predictions {predictions.shape} and targets "
                         f"{targets.shape} must have the same shape")
    return targets


def squared_error(predictions, targets=None):
    """``(predictions - targets) ** 2`` elementwise (targets default to zeros)."""
    predictions = _floating("squared_error", "predictions", predictions)
    if targets is None:
        return predictions ** 2
    targets = _check_targets("squared_error", predictions, targets)
    return _nn.mse_loss(predictions, targets, reduction="none")


def l2_loss(predictions, targets=None):
    """``0.5 * (predictions - targets) ** 2`` elementwise (targets default to zeros)."""
    predictions = _floating("l2_loss", "predictions", predictions)
    if targets is not None:
        targets = _check_targets("l2_loss", predictions, targets)
    return 0.5 * squared_error(predictions, targets)


def _warn_cross_broadcast(where, a, b, names):
    """optax broadcasts these losses' operands; fnx does too (ported code keeps working)
    but warns where neither shape contains the other's result, e.g. ``(3, 1)`` against
    ``(3,)``, a ``(3, 3)`` loss that is almost always a missing ``squeeze``."""
    sa, sb = tuple(np.shape(a)), tuple(np.shape(b))
    if sa == sb or not sa or not sb:
        return
    try:
        out = np.broadcast_shapes(sa, sb)
    except ValueError:
        return  # the loss itself raises, naming both shapes
    if out != sa and out != sb:
        warnings.warn(f"optim.{where}: {names[0]} {sa} and {names[1]} {sb} broadcast to "
                      f"{out}, a shape neither has (a missing squeeze or reshape?); give "
                      "them the same shape", LossBroadcastWarning, stacklevel=3)


class LossBroadcastWarning(UserWarning):
    """An optax-style loss broadcast its operands to a shape neither of them has."""


def huber_loss(predictions, targets=None, *, delta=1.0):
    """Elementwise ``0.5 e^2`` where ``|e| <= delta``, else ``delta (|e| - 0.5 delta)``,
    with ``e = predictions - targets`` (targets default to zeros). Shapes broadcast as in
    optax, with a ``LossBroadcastWarning`` where the result has neither shape."""
    predictions = _floating("huber_loss", "predictions", predictions)
    if targets is None:
        targets = fnp.zeros(predictions.shape, predictions.dtype)
    _warn_cross_broadcast("huber_loss", predictions, targets, ("predictions", "targets"))
    return _nn.huber_loss(predictions, targets, delta=delta, reduction="none",
                          allow_broadcast=True)


def sigmoid_binary_cross_entropy(logits, labels):
    """Elementwise ``-labels log sigmoid(logits) - (1 - labels) log sigmoid(-logits)``,
    stable for large logits; labels are 0/1 or probabilities (cast to the logits' dtype).
    Shapes broadcast as in optax, with a ``LossBroadcastWarning`` where the result has
    neither shape."""
    logits = _floating("sigmoid_binary_cross_entropy", "logits", logits)
    _warn_cross_broadcast("sigmoid_binary_cross_entropy", logits, labels,
                          ("logits", "labels"))
    return _nn.binary_cross_entropy_with_logits(logits, labels, reduction="none",
                                                allow_broadcast=True)


def _expand_where(where, logits, axis):
    if where is None:
        return None
    where = fnp.asarray(where)
    if where.ndim != logits.ndim:
        where = fnp.expand_dims(where, axis)
    return where


def softmax_cross_entropy(logits, labels, axis=-1, where=None):
    """``-sum(labels * log_softmax(logits), axis)``: one loss per example, ``labels``
    one-hot or probabilities broadcastable to ``logits``.  ``where`` (the shape of the
    result or of ``logits``) leaves entries out of the softmax and the sum."""
    logits = _floating("softmax_cross_entropy", "logits", logits)
    labels = fnp.asarray(labels)
    where = _expand_where(where, logits, axis)
    log_probs = F.log_softmax(logits, axis, where)
    # a zero label contributes 0 even where log_probs is -inf (no 0 * -inf)
    terms = labels * fnp.where(labels != 0, log_probs, 0)
    return -fnp.sum(terms, axis=axis, where=where)


def _canonical_axes(where, axis, ndim):
    axes = (axis,) if isinstance(axis, int) else axis
    if not isinstance(axes, tuple) or not all(isinstance(a, int) for a in axes):
        raise ValueError(f"optim.{where}: axis must be an int or a tuple of ints, got "
                         f"{axis!r}")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"optim.{where}: axis {a} is out of range for logits of "
                             f"{ndim} dimensions")
        out.append(a % ndim)
    return tuple(out)


def softmax_cross_entropy_with_integer_labels(logits, labels, axis=-1, where=None):
    """``logsumexp(logits) - logits[label]`` over ``axis``: one loss per example, with
    integer class ``labels`` of the logits' shape without ``axis``.  A tuple ``axis``
    treats those axes as one flat class axis (a label is a flat index into them).
    Labels out of ``[0, num_classes)`` are not checked (as optax: the result is
    undefined)."""
    name = "softmax_cross_entropy_with_integer_labels"
    logits = _floating(name, "logits", logits)
    labels = fnp.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"optim.{name}: labels must be integers (class indices), got "
                        f"{labels.dtype}; for one-hot or probability labels use "
                        "softmax_cross_entropy")
    where = _expand_where(where, logits, axis)
    cls = _canonical_axes(name, axis, logits.ndim)
    batch = tuple(a for a in range(logits.ndim) if a not in cls)
    if len(cls) > 1 or cls[0] != logits.ndim - 1:
        logits = fnp.transpose(logits, batch + cls)
        logits = fnp.reshape(logits, logits.shape[:len(batch)] + (-1,))
        if where is not None:
            where = fnp.transpose(where, batch + cls)
            where = fnp.reshape(where, where.shape[:len(batch)] + (-1,))
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"optim.{name}: labels of shape {labels.shape} do not match "
                         f"logits' batch shape {logits.shape[:-1]} (logits without "
                         f"axis {axis})")
    label_logits = fnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    out = F.logsumexp(logits, axis=-1, where=where) - label_logits
    if where is not None:
        out = fnp.where(fnp.any(where, axis=-1), out, np.zeros((), out.dtype))
    return out
