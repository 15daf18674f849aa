"""``fnx.optim``: optimizers as pure ``(init, update)`` pairs over pytrees (optax-style).

    import fnx, fnx.optim as optim

    opt = optim.chain(optim.clip_by_global_norm(1.0),
                      optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000)))
    state = opt.init(params)

    @fnx.jit
    def step(params, state, batch):
        grads = fnx.grad(loss)(params, batch)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state

The state is a pytree of arrays (namedtuples and tuples of fnx arrays and int32 step
counters): a jitted step takes and returns it, compiles once, and it serializes like
the parameters.
"""
from . import losses  # noqa: F401  (fnx.optim.losses, as optax.losses)
from ._base import (EmptyState, GradientTransformation, GradientTransformationExtraArgs,
                    OptState, Params, Schedule, Updates, apply_updates, chain, global_norm,
                    identity, safe_norm)
from .losses import (huber_loss, l2_loss, sigmoid_binary_cross_entropy,
                     softmax_cross_entropy, softmax_cross_entropy_with_integer_labels,
                     squared_error)
from .wrappers import InjectHyperparamsState, flatten, inject_hyperparams
from .alias import adagrad, adam, adamw, lamb, lion, rmsprop, sgd
from .schedules import (constant_schedule, cosine_decay_schedule, exponential_decay,
                        join_schedules, linear_schedule, piecewise_constant_schedule,
                        polynomial_schedule, step_schedule, warmup_cosine_decay_schedule)
from .transforms import (ScaleByAdamState, ScaleByLionState, ScaleByRmsState,
                         ScaleByRssState, ScaleByRStdDevState, ScaleByScheduleState,
                         TraceState, add_decayed_weights, clip, clip_by_global_norm, scale,
                         scale_by_adam, scale_by_learning_rate, scale_by_lion, scale_by_rms,
                         scale_by_rss, scale_by_schedule, scale_by_trust_ratio, trace)

__all__ = [
    "GradientTransformation", "EmptyState", "apply_updates", "chain", "identity",
    "global_norm", "safe_norm", "GradientTransformationExtraArgs", "Params", "Updates",
    "OptState", "Schedule", "inject_hyperparams", "InjectHyperparamsState", "flatten",
    "losses", "l2_loss", "squared_error", "huber_loss", "sigmoid_binary_cross_entropy",
    "softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
    "sgd", "adam", "adamw", "rmsprop", "adagrad", "lamb", "lion",
    "clip", "clip_by_global_norm", "scale", "scale_by_learning_rate", "scale_by_schedule",
    "trace", "add_decayed_weights", "scale_by_adam", "scale_by_rms", "scale_by_rss",
    "scale_by_trust_ratio", "scale_by_lion",
    "ScaleByScheduleState", "TraceState", "ScaleByAdamState", "ScaleByRmsState",
    "ScaleByRStdDevState", "ScaleByRssState", "ScaleByLionState",
    "constant_schedule", "piecewise_constant_schedule", "step_schedule", "exponential_decay",
    "cosine_decay_schedule", "linear_schedule", "polynomial_schedule",
    "warmup_cosine_decay_schedule", "join_schedules",
]
