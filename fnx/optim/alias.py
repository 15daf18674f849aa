"""The optimizers: chains of the transformations in ``transforms``.

Every ``learning_rate`` is a float or a schedule (a function of the step count).  The
semantics follow PyTorch's documented update rules where PyTorch has the optimizer:

- ``sgd``: ``d = g + weight_decay * p`` (L2, coupled, as ``torch.optim.SGD``);
  ``b = momentum * b + d``; ``d = d + momentum * b`` (nesterov) or ``d = b``;
  ``p -= lr * d``.
- ``adam`` / ``adamw``: ``torch.optim.Adam`` / ``AdamW`` (eps outside the square root;
  AdamW's decay ``p -= lr * weight_decay * p`` is decoupled from the moments).
- ``rmsprop``: ``torch.optim.RMSprop`` (eps outside the square root; momentum buffer
  ``b = momentum * b + g / (sqrt(v) + eps)``).
- ``adagrad``: ``torch.optim.Adagrad`` (for its ``lr_decay`` pass the schedule
  ``lambda t: lr / (1 + t * lr_decay)``).
- ``lamb`` and ``lion`` follow their papers (as optax does).
"""
from __future__ import annotations

from ..core.array import Array
from ._base import GradientTransformation, beta, chain, hyper, learning_rate_arg
from .transforms import (add_decayed_weights, scale_by_adam, scale_by_learning_rate,
                         scale_by_lion, scale_by_rms, scale_by_rss, scale_by_trust_ratio,
                         trace)

__all__ = ["sgd", "adam", "adamw", "rmsprop", "adagrad", "lamb", "lion"]


def _lr(learning_rate, where):
    return scale_by_learning_rate(learning_rate_arg(learning_rate, where), where=where)


def _l2_momentum(where, learning_rate, momentum, nesterov, weight_decay, direction=None):
    """``chain`` of L2 ``weight_decay`` (added to the gradient), ``direction()`` (built
    after the checks), (Nesterov) momentum and ``-learning_rate``, each part only where
    it does something; the hyper-parameters checked in the name of ``where``."""
    learning_rate_arg(learning_rate, where)
    use_momentum, use_decay = _active(momentum), _active(weight_decay)
    momentum = hyper("momentum", momentum, lo=0.0, where=where)
    weight_decay = hyper("weight_decay", weight_decay, lo=0.0, where=where)
    if nesterov and not use_momentum:
        raise ValueError(f"{where}: nesterov=True needs momentum > 0")
    parts = [add_decayed_weights(weight_decay)] if use_decay else []
    if direction is not None:
        parts.append(direction())
    if use_momentum:
        parts.append(trace(momentum, nesterov))
    return chain(*parts, _lr(learning_rate, where))


def _active(value) -> bool:
    """Whether an optional part (momentum, weight decay) is in the chain: a nonzero
    number, or any array.  An array (as ``inject_hyperparams`` passes, concrete at init
    and traced under jit) always keeps its part, so the state's structure does not depend
    on the value; a zero array makes the part an exact no-op."""
    if isinstance(value, Array):
        return True
    return bool(value)


def sgd(learning_rate, momentum: float = 0.0, nesterov: bool = False,
        weight_decay: float = 0.0) -> GradientTransformation:
    """Stochastic gradient descent with optional (Nesterov) momentum and PyTorch-style
    weight decay: ``weight_decay * p`` is added to the gradient before the momentum buffer
    (L2 regularization), exactly as ``torch.optim.SGD(lr, momentum, nesterov=...,
    weight_decay=...)`` with ``dampening=0``."""
    return _l2_momentum("sgd", learning_rate, momentum, nesterov, weight_decay)


def adam(learning_rate=1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0) -> GradientTransformation:
    """Adam: ``p -= lr * m_hat / (sqrt(v_hat) + eps)`` (``torch.optim.Adam``)."""
    where = "adam"
    learning_rate_arg(learning_rate, where)
    beta("b1", b1, where), beta("b2", b2, where)
    return chain(scale_by_adam(b1, b2, eps, eps_root), _lr(learning_rate, where))


def adamw(learning_rate=1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, weight_decay: float = 1e-4,
          mask=None) -> GradientTransformation:
    """Adam with decoupled weight decay: ``p -= lr * (m_hat / (sqrt(v_hat) + eps) +
    weight_decay * p)`` (``torch.optim.AdamW``; its default weight_decay is 1e-2, this one
    1e-4 as in optax).  ``mask``: a pytree of bools shaped like the params, or a function of
    the params returning one; only leaves marked True decay (e.g. no decay on biases)."""
    where = "adamw"
    learning_rate_arg(learning_rate, where)
    beta("b1", b1, where), beta("b2", b2, where)
    hyper("weight_decay", weight_decay, lo=0.0, where=where)
    return chain(scale_by_adam(b1, b2, eps, eps_root),
                 add_decayed_weights(weight_decay, mask),
                 _lr(learning_rate, where))


def rmsprop(learning_rate, decay: float = 0.9, eps: float = 1e-8, centered: bool = False,
            momentum: float = 0.0, nesterov: bool = False, initial_scale: float = 0.0,
            weight_decay: float = 0.0) -> GradientTransformation:
    """RMSprop as ``torch.optim.RMSprop(lr, alpha=decay, eps, weight_decay, momentum,
    centered)``: ``v = decay * v + (1 - decay) * g**2``, the direction
    ``g / (sqrt(v - mean(g)**2 if centered else v) + eps)``, then momentum on the direction
    and ``p -= lr * b``.  ``weight_decay`` is L2 (added to the gradient)."""
    return _l2_momentum("rmsprop", learning_rate, momentum, nesterov, weight_decay,
                        lambda: scale_by_rms(decay, eps, centered, initial_scale))


def adagrad(learning_rate, initial_accumulator_value: float = 0.0, eps: float = 1e-10,
            weight_decay: float = 0.0) -> GradientTransformation:
    """Adagrad as ``torch.optim.Adagrad``: ``s += g**2``, ``p -= lr * g / (sqrt(s) + eps)``;
    ``weight_decay`` is L2 (added to the gradient)."""
    where = "adagrad"
    learning_rate_arg(learning_rate, where)
    use_decay = _active(weight_decay)
    weight_decay = hyper("weight_decay", weight_decay, lo=0.0, where=where)
    parts = [add_decayed_weights(weight_decay)] if use_decay else []
    parts += [scale_by_rss(initial_accumulator_value, eps), _lr(learning_rate, where)]
    return chain(*parts)


def lamb(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         eps_root: float = 0.0, weight_decay: float = 0.0, mask=None) -> GradientTransformation:
    """LAMB (You et al. 2019): the Adam direction plus decoupled weight decay, each leaf's
    update rescaled by the trust ratio ``||p|| / ||update||``, times ``-lr``."""
    where = "lamb"
    learning_rate_arg(learning_rate, where)
    beta("b1", b1, where), beta("b2", b2, where)
    return chain(scale_by_adam(b1, b2, eps, eps_root),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_trust_ratio(),
                 _lr(learning_rate, where))


def lion(learning_rate, b1: float = 0.9, b2: float = 0.99, weight_decay: float = 1e-3,
         mask=None) -> GradientTransformation:
    """Lion (Chen et al. 2023): ``p -= lr * (sign(b1 * m + (1 - b1) * g) + weight_decay *
    p)``, then ``m = b2 * m + (1 - b2) * g``."""
    where = "lion"
    learning_rate_arg(learning_rate, where)
    beta("b1", b1, where), beta("b2", b2, where)
    return chain(scale_by_lion(b1, b2), add_decayed_weights(weight_decay, mask),
                 _lr(learning_rate, where))
