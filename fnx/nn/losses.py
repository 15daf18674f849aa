"""Losses and metrics, numerically stable in value and gradient (logits of +-1e4 give
finite results).  ``reduction`` is 'mean' (default), 'sum' or 'none'; the class axis is
the last one unless ``axis`` says otherwise.

Inputs are checked, so that a mistake raises instead of training on a wrong number:

* integer class labels outside ``[0, num_classes)`` (negative ones too) raise a
  ``ValueError`` naming the labels and their positions when their values are known;
  under ``jit``/``vmap``, where they are not, those examples' losses are NaN (as in
  optax), never a silent zero;
* the regression and binary losses need ``pred`` and ``target`` of the same shape (or
  a 0-d target such as ``0.0``): ``(3, 1)`` against ``(3,)`` would otherwise broadcast
  to a ``(3, 3)`` mean. Pass ``allow_broadcast=True`` where broadcasting is meant.
"""
from __future__ import annotations

import numpy as np

from .. import numpy as fnp
from ..core.array import Tracer
from ..errors import ShapeError
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


def _same_shape(name, pred, target, allow_broadcast, names=("pred", "target")):
    """Raise a ShapeError unless ``pred`` and ``target`` have one shape (or ``target`` is
    0-d, or broadcasting is allowed).  Shapes only: free under tracing."""
    ps, ts = np.shape(pred), np.shape(target)
    if allow_broadcast or ps == ts or ts == ():
        return
    try:
        out = np.broadcast_shapes(ps, ts)
        how = (f"broadcasting them gives shape {out}, so the loss would be taken over "
               f"{int(np.prod(out))} pairs instead of {int(np.prod(ps))}")
    except ValueError:
        how = "they do not broadcast either"
    raise ShapeError(
        f"{name}: {names[0]} of shape {ps} and {names[1]} of shape {ts} differ ({how}). "
        f"Reshape one to the other's shape (e.g. {names[1]}.reshape({names[0]}.shape) or "
        f"{names[0]}.squeeze(-1)), or pass allow_broadcast=True if broadcasting is meant.")


def _int_labels(name, labels, k, what):
    """Check integer ``labels`` against ``k`` classes: a ValueError naming the bad ones
    when their values are known; under tracing, a boolean array (True where valid), else
    None (nothing to mask)."""
    if labels.dtype == np.bool_:
        labels = labels.astype(np.int32)
    if isinstance(labels, Tracer):
        return (labels >= 0) & (labels < k)
    bad = out_of_range(labels, k)
    if bad:
        count, shown = bad
        raise ValueError(
            f"{name}: {count} label(s) out of range for {k} classes (valid labels are "
            f"0 to {k - 1}; {what}): {shown}. Check the labels (e.g. 1-based "
            "classes, or a padding value such as -1 that should be masked out), or give "
            "logits with more classes.")
    return None


def out_of_range(indices, n):
    """For concrete integer ``indices``: None if all are in ``[0, n)``, else the number
    out of range and the first few as text (``"7 at (1,), -1 at (3,)"``)."""
    vals = np.asarray(indices)
    bad = (vals < 0) | (vals >= n)
    if not bad.any():
        return None
    pos = np.argwhere(bad)
    shown = ", ".join(f"{vals[tuple(p)]} at {tuple(int(i) for i in p)}" for p in pos[:5])
    return len(pos), shown + (f" and {len(pos) - 5} more" if len(pos) > 5 else "")


def softmax_cross_entropy(logits, labels, *, label_smoothing=0.0, reduction="mean",
                          axis=-1):
    """Cross-entropy of ``softmax(logits)`` against ``labels``: integer class indices
    (shape of ``logits`` without ``axis``) or probabilities / one-hot (shape of
    ``logits``).  ``label_smoothing=e`` mixes the targets with the uniform distribution:
    ``(1 - e) * target + e / num_classes``.

    Integer labels outside ``[0, num_classes)`` raise a ``ValueError`` (naming them and
    their positions) when their values are known; under ``jit``/``vmap`` their examples'
    losses are NaN instead (as in optax), so a bad label never counts as zero loss."""
    name = "softmax_cross_entropy"
    logits = fnp.asarray(logits)
    logp = F.log_softmax(logits, axis=axis)
    k = logits.shape[axis]
    labels = fnp.asarray(labels)
    valid = None
    if labels.ndim == logits.ndim - 1 and labels.dtype.kind in "iub":
        ax = axis % logits.ndim
        batch = logits.shape[:ax] + logits.shape[ax + 1:]
        if labels.shape != batch:
            raise ShapeError(f"{name}: integer labels of shape {labels.shape} do not match "
                             f"logits of shape {logits.shape}: they need the logits' shape "
                             f"without the class axis {axis}, {batch}")
        valid = _int_labels(name, labels, k, f"logits of shape {logits.shape}")
        labels = F.one_hot(labels, k, dtype=logp.dtype, axis=axis)
    elif labels.shape != logits.shape:
        raise ValueError(f"{name}: labels of shape {labels.shape} fit neither "
                         f"integer labels nor probabilities for logits {logits.shape}")
    labels = labels.astype(logp.dtype)
    if label_smoothing:
        labels = labels * (1 - label_smoothing) + label_smoothing / k
    # where the target is 0, contribute 0 even if logp is -inf
    loss = -fnp.sum(fnp.where(labels != 0, labels * logp, 0), axis=axis)
    if valid is not None:
        loss = fnp.where(valid, loss, np.array(np.nan, loss.dtype))
    return _reduce(loss, reduction)


cross_entropy = softmax_cross_entropy


def binary_cross_entropy_with_logits(logits, targets, *, pos_weight=None, reduction="mean",
                                     allow_broadcast=False):
    """``-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))`` computed from the logits as
    ``(1 - t) x - log_sigmoid(x)`` (weighted by ``pos_weight`` on the positive term).

    ``logits`` and ``targets`` must have the same shape (or ``targets`` be 0-d): other
    shapes raise a ``ShapeError`` (a ``ValueError``) unless ``allow_broadcast=True``.
    ``pos_weight`` broadcasts against them (e.g. one weight per class)."""
    x = fnp.asarray(logits)
    t = fnp.asarray(targets).astype(x.dtype)
    _same_shape("binary_cross_entropy_with_logits", x, t, allow_broadcast,
                ("logits", "targets"))
    if pos_weight is None:
        loss = (1 - t) * x - F.log_sigmoid(x)
    else:
        loss = -(pos_weight * t * F.log_sigmoid(x) + (1 - t) * F.log_sigmoid(-x))
    return _reduce(loss, reduction)


def mse_loss(pred, target, *, reduction="mean", allow_broadcast=False):
    """``(pred - target)^2``.

    ``pred`` and ``target`` must have the same shape, or ``target`` be 0-d
    (``mse_loss(pred, 0.0)``): other shapes, even ones that broadcast (``(3, 1)``
    against ``(3,)`` would give a ``(3, 3)`` mean), raise a ``ShapeError`` (a
    ``ValueError``) naming both. Pass ``allow_broadcast=True`` where broadcasting is
    meant."""
    _same_shape("mse_loss", pred, target, allow_broadcast)
    d = fnp.asarray(pred) - target
    return _reduce(d * d, reduction)


def huber_loss(pred, target, *, delta=1.0, reduction="mean", allow_broadcast=False):
    """``0.5 d^2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)`` (PyTorch's
    HuberLoss).  Shapes as ``mse_loss``: the same, a 0-d ``target``, or
    ``allow_broadcast=True``."""
    _same_shape("huber_loss", pred, target, allow_broadcast)
    d = fnp.abs(fnp.asarray(pred) - target)
    q = fnp.minimum(d, delta)
    loss = 0.5 * q * q + delta * (d - q)
    return _reduce(loss, reduction)


def accuracy(logits, labels, *, axis=-1):
    """Fraction of rows whose argmax over ``axis`` equals the label (integer labels of
    the logits' shape without ``axis``, or one-hot / probabilities of the logits' shape,
    whose argmax is taken).

    Labels outside ``[0, num_classes)`` raise a ``ValueError`` when their values are
    known; under ``jit``/``vmap`` the result is NaN instead (such a label can never
    match, so counting it as a miss would silently lower the accuracy).  Labels of any
    other shape raise a ``ShapeError``."""
    name = "accuracy"
    logits = fnp.asarray(logits)
    labels = fnp.asarray(labels)
    if labels.shape == logits.shape and labels.ndim > 0:
        labels = fnp.argmax(labels, axis=axis)
        valid = None
    else:
        ax = axis % max(logits.ndim, 1)
        batch = logits.shape[:ax] + logits.shape[ax + 1:]
        if labels.shape != batch:
            raise ShapeError(f"{name}: labels of shape {labels.shape} fit neither class "
                             f"indices ({batch}: the logits' shape without axis {axis}) "
                             f"nor one-hot/probabilities ({logits.shape}) for logits of "
                             f"shape {logits.shape}")
        valid = _int_labels(name, labels, logits.shape[axis],
                            f"logits of shape {logits.shape}")
    pred = fnp.argmax(logits, axis=axis)
    hit = (pred == labels).astype(np.float32)
    if valid is not None:
        hit = fnp.where(valid, hit, np.float32(np.nan))
    return fnp.mean(hit)
