"""``fnx.nn``: neural-network functions, Modules, layers, initializers and losses.

Modules are immutable pytrees (see ``fnx/nn/module.py`` for the conventions):

    model = fnx.nn.init(Sequential(Conv2d(8, 3), ReLU(), Flatten(), Linear(10)),
                        key, fnx.ShapeDtypeStruct((1, 3, 8, 8), 'float32'))
    params, rest = fnx.nn.partition(model)
    def loss(params, rest, x, y):
        out, m = fnx.nn.apply(fnx.nn.combine(params, rest), x)   # (output, new module)
        return fnx.nn.losses.cross_entropy(out, y), m
    grads, new_model = fnx.grad(loss, has_aux=True)(params, rest, x, y)
"""
from .functions import *  # noqa: F401,F403
from . import initializers, losses  # noqa: F401
from .module import (Module, apply, combine, init, is_array, next_key, partition,  # noqa: F401
                     record_states, summary)
from .layers import *  # noqa: F401,F403
from .losses import (accuracy, binary_cross_entropy_with_logits, cross_entropy,  # noqa: F401
                     huber_loss, mse_loss, softmax_cross_entropy)
