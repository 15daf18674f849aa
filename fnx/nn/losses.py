"""Losses and metrics, numerically stable in value and gradient (logits of +-1e4 give
finite results).  ``reduction`` is 'mean' (default), 'sum' or 'none'; the class axis is
the last one unless ``axis`` says otherwise."""
from __future__ import annotations

import numpy as np

from .. import numpy as fnp
from . import functions as F

__all__ = ["softmax_cross_entropy", "cross_entropy", "binary_cross_entropy_with_logits",
           "mse_loss", "huber_loss", "accuracy"]


def _reduce(x, reduction):
    if reduction == "mean":
        return fnp.mean(x)
    if reduction == "sum":
        return fnp.sum(x)
    if reduction == "none":
        return x
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def softmax_cross_entropy(logits, labels, *, label_smoothing=0.0, reduction="mean",
                          axis=-1):
    """Cross-entropy of ``softmax(logits)`` against ``labels``: integer class indices
    (shape of ``logits`` without ``axis``) or probabilities / one-hot (shape of
    ``logits``).  ``label_smoothing=e`` mixes the targets with the uniform distribution:
    ``(1 - e) * target + e / num_classes``."""
    logits = fnp.asarray(logits)
    logp = F.log_softmax(logits, axis=axis)
    k = logits.shape[axis]
    labels = fnp.asarray(labels)
    if labels.ndim == logits.ndim - 1 and labels.dtype.kind in "iub":
        labels = F.one_hot(labels, k, dtype=logp.dtype, axis=axis)
    elif labels.shape != logits.shape:
        raise ValueError(f"softmax_cross_entropy: labels of shape {labels.shape} fit neither "
                         f"integer labels nor probabilities for logits {logits.shape}")
    labels = labels.astype(logp.dtype)
    if label_smoothing:
        labels = labels * (1 - label_smoothing) + label_smoothing / k
    # where the target is 0, contribute 0 even if logp is -inf
    loss = -fnp.sum(fnp.where(labels != 0, labels * logp, 0), axis=axis)
    return _reduce(loss, reduction)


cross_entropy = softmax_cross_entropy


def binary_cross_entropy_with_logits(logits, targets, *, pos_weight=None, reduction="mean"):
    """``-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))`` computed from the logits as
    ``(1 - t) x - log_sigmoid(x)`` (weighted by ``pos_weight`` on the positive term)."""
    x = fnp.asarray(logits)
    t = fnp.asarray(targets).astype(x.dtype)
    if pos_weight is None:
        loss = (1 - t) * x - F.log_sigmoid(x)
    else:
        loss = -(pos_weight * t * F.log_sigmoid(x) + (1 - t) * F.log_sigmoid(-x))
    return _reduce(loss, reduction)


def mse_loss(pred, target, *, reduction="mean"):
    """``(pred - target)^2``."""
    d = fnp.asarray(pred) - target
    return _reduce(d * d, reduction)


def huber_loss(pred, target, *, delta=1.0, reduction="mean"):
    """``0.5 d^2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)`` (PyTorch's
    HuberLoss)."""
    d = fnp.abs(fnp.asarray(pred) - target)
    q = fnp.minimum(d, delta)
    loss = 0.5 * q * q + delta * (d - q)
    return _reduce(loss, reduction)


def accuracy(logits, labels, *, axis=-1):
    """Fraction of rows whose argmax over ``axis`` equals the label (integer labels, or
    one-hot / probabilities whose argmax is taken)."""
    logits = fnp.asarray(logits)
    labels = fnp.asarray(labels)
    if labels.shape == logits.shape and labels.ndim > 0 and labels.dtype.kind == "f":
        labels = fnp.argmax(labels, axis=axis)
    pred = fnp.argmax(logits, axis=axis)
    return fnp.mean((pred == labels).astype(np.float32))
