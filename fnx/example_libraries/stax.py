"""``fnx.example_libraries.stax``: JAX's stax, a tiny layer library of function pairs.

A layer is a pair ``(init_fun, apply_fun)``:

* ``init_fun(rng, input_shape) -> (output_shape, params)`` makes the parameters from a
  PRNG key and an input shape (a tuple of ints; a ``-1`` batch dimension is carried
  through, so ``init_fun(key, (-1, 784))`` works as in JAX);
* ``apply_fun(params, inputs, **kwargs) -> outputs``; ``rng=key`` is passed down to the
  layers that need randomness (``Dropout``).

Combinators (``serial``, ``parallel``, ``shape_dependent``) build layers from layers.
Shapes, parameter layouts, default initializers and the order keys are split in are
JAX's, so ``init_fun`` with the same key gives JAX's parameters (bit for bit for the
uniform-based initializers, to a few ulp for the normal-based ones, which fnx.random
computes with a different inverse error function).

Differences from JAX: a wrong input shape or a missing argument raises an error that
names the layer and the shapes.  ``Dropout(rate)`` keeps JAX's meaning, which differs
from most libraries: ``rate`` is the probability of *keeping* a unit.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

from .. import lax
from .. import numpy as jnp
from .. import random
from ..nn import functions as _F
from ..nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "Dense", "GeneralConv", "Conv", "GeneralConvTranspose", "Conv1DTranspose",
    "ConvTranspose", "BatchNorm", "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax",
    "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu", "Selu", "Gelu", "MaxPool",
    "SumPool", "AvgPool", "Flatten", "Identity", "FanOut", "FanInSum", "FanInConcat",
    "Dropout", "serial", "parallel", "shape_dependent",
    "glorot", "glorot_normal", "randn", "normal", "ones", "zeros",
    "relu", "log_softmax", "logsoftmax", "softmax", "softplus", "sigmoid", "elu",
    "leaky_relu", "selu", "gelu", "standardize",
]

relu, log_softmax, softmax, softplus = _F.relu, _F.log_softmax, _F.softmax, _F.softplus
sigmoid, elu, leaky_relu, selu = _F.sigmoid, _F.elu, _F.leaky_relu, _F.selu
gelu, standardize = _F.gelu, _F.standardize
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


def _shape_tuple(where, input_shape, min_ndim=1):
    try:
        shape = tuple(int(d) for d in input_shape)
    except TypeError:
        raise TypeError(f"{where}: input_shape must be a tuple of ints, got "
                        f"{input_shape!r}") from None
    if len(shape) < min_ndim:
        raise ValueError(f"{where}: input_shape {shape} has {len(shape)} dimensions; this "
                         f"layer needs at least {min_ndim}")
    return shape


def _check_spec(where, dimension_numbers):
    try:
        lhs, rhs, out = dimension_numbers
    except (TypeError, ValueError):
        raise ValueError(f"{where}: dimension_numbers must be three strings (input, kernel, "
                         f"output), e.g. ('NHWC', 'HWIO', 'NHWC'); got "
                         f"{dimension_numbers!r}") from None
    ok = (isinstance(lhs, str) and isinstance(rhs, str) and isinstance(out, str)
          and len(lhs) == len(rhs) == len(out)
          and sorted(lhs) == sorted(out) and "N" in lhs and "C" in lhs
          and "I" in rhs and "O" in rhs)
    if not ok:
        raise ValueError(f"{where}: dimension_numbers {dimension_numbers!r} are not a "
                         "valid (input, kernel, output) spec: input and output need N and "
                         "C, the kernel I and O, all three the same length")
    return lhs, rhs, out


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: ``inputs @ W + b`` with ``W`` of shape
    ``(input_shape[-1], out_dim)`` and ``b`` of shape ``(out_dim,)``."""
    def init_fun(rng, input_shape):
        input_shape = _shape_tuple("stax.Dense", input_shape)
        k1, k2 = random.split(rng)
        W = W_init(k1, (input_shape[-1], out_dim))
        b = b_init(k2, (out_dim,))
        return input_shape[:-1] + (out_dim,), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _kernel_shape(where, lhs_spec, rhs_spec, input_shape, out_chan, filter_shape):
    if len(filter_shape) != len(rhs_spec) - 2:
        raise ValueError(f"{where}: filter_shape {tuple(filter_shape)} has "
                         f"{len(filter_shape)} spatial sizes; kernel spec {rhs_spec!r} "
                         f"needs {len(rhs_spec) - 2}")
    if len(input_shape) != len(lhs_spec):
        raise ValueError(f"{where}: input_shape {input_shape} has {len(input_shape)} "
                         f"dimensions; input spec {lhs_spec!r} needs {len(lhs_spec)}")
    spatial = iter(filter_shape)
    return tuple(out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
                 else int(next(spatial)) for c in rhs_spec)


def _spatial(lhs_spec, rhs_spec, out_spec):
    """The spatial dimension letters, in the kernel spec's order (as lax)."""
    return [c for c in rhs_spec if c not in "IO"]


def _conv_out_shape(where, dn, input_shape, kernel_shape, strides, padding):
    lhs_spec, rhs_spec, out_spec = dn
    sp = _spatial(*dn)
    in_sp = [input_shape[lhs_spec.index(c)] for c in sp]
    k_sp = [kernel_shape[rhs_spec.index(c)] for c in sp]
    if isinstance(padding, str):
        pads = lax.padtype_to_pads(in_sp, k_sp, strides, padding)
    else:
        pads = [tuple(p) for p in padding]
        if len(pads) != len(sp):
            raise ValueError(f"{where}: padding {padding!r} has {len(pads)} pairs; the "
                             f"convolution has {len(sp)} spatial dimensions")
    sizes = {}
    for c, n, k, s, (lo, hi) in zip(sp, in_sp, k_sp, strides, pads):
        padded = n + lo + hi
        if padded < k:
            raise ValueError(f"{where}: spatial dimension {c!r} of input_shape "
                             f"{input_shape} is {n} (padded {padded}), smaller than the "
                             f"kernel's {k}; use padding='SAME' or a smaller filter")
        sizes[c] = (padded - k) // s + 1
    sizes["N"] = input_shape[lhs_spec.index("N")]
    sizes["C"] = kernel_shape[rhs_spec.index("O")]
    return tuple(sizes[c] for c in out_spec)


def _transpose_pads(k, s, padding):
    """Total padding of one spatial dimension of a transposed convolution (as lax)."""
    if padding == "SAME":
        return k + s - 2
    if padding == "VALID":
        return k + s - 2 + max(k - s, 0)
    lo, hi = padding
    return (k - lo - 1) + (k - hi - 1)


def _conv_transpose_out_shape(where, dn, input_shape, kernel_shape, strides, padding):
    lhs_spec, rhs_spec, out_spec = dn
    sp = _spatial(*dn)
    if isinstance(padding, str):
        padding = padding.upper()
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"{where}: padding must be 'SAME', 'VALID' or (lo, hi) pairs, "
                             f"got {padding!r}")
        pads = [padding] * len(sp)
    else:
        pads = [tuple(p) for p in padding]
        if len(pads) != len(sp):
            raise ValueError(f"{where}: padding {padding!r} has {len(pads)} pairs; the "
                             f"convolution has {len(sp)} spatial dimensions")
    sizes = {}
    for c, s, p in zip(sp, strides, pads):
        n = input_shape[lhs_spec.index(c)]
        k = kernel_shape[rhs_spec.index(c)]
        sizes[c] = (n - 1) * s - k + 2 + _transpose_pads(k, s, p)
    sizes["N"] = input_shape[lhs_spec.index("N")]
    sizes["C"] = kernel_shape[rhs_spec.index("O")]
    return tuple(sizes[c] for c in out_spec)


def _general_conv(name, out_shape_fn, conv_fn, dimension_numbers, out_chan, filter_shape,
                  strides, padding, W_init, b_init):
    where = f"stax.{name}"
    lhs_spec, rhs_spec, out_spec = _check_spec(where, dimension_numbers)
    filter_shape = tuple(int(k) for k in filter_shape)
    one = (1,) * len(filter_shape)
    strides = tuple(strides) if strides else one
    if len(strides) != len(filter_shape):
        raise ValueError(f"{where}: strides {strides} and filter_shape {filter_shape} "
                         "must have one entry per spatial dimension")
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    dn = (lhs_spec, rhs_spec, out_spec)

    def init_fun(rng, input_shape):
        input_shape = _shape_tuple(where, input_shape)
        kernel_shape = _kernel_shape(where, lhs_spec, rhs_spec, input_shape, out_chan,
                                     filter_shape)
        output_shape = out_shape_fn(where, dn, input_shape, kernel_shape, strides, padding)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out_spec)
        k1, k2 = random.split(rng)
        return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return conv_fn(inputs, W, strides, padding, dn) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                W_init=None, b_init=normal(1e-6)):
    """A convolution with ``out_chan`` output channels and a ``filter_shape`` window over
    the layouts ``dimension_numbers = (input, kernel, output)``, e.g.
    ``('NHWC', 'HWIO', 'NHWC')``.  The kernel defaults to ``glorot_normal`` over its I and
    O axes, the bias (shaped to broadcast against the output) to ``normal(1e-6)``."""
    def conv(x, W, strides, padding, dn):
        one = (1,) * len(strides)
        return lax.conv_general_dilated(x, W, strides, padding, one, one,
                                        dimension_numbers=dn)
    return _general_conv("GeneralConv", _conv_out_shape, conv, dimension_numbers, out_chan,
                         filter_shape, strides, padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,
                         padding="VALID", W_init=None, b_init=normal(1e-6)):
    """The transposed convolution (``lax.conv_transpose``) matching ``GeneralConv``."""
    def conv(x, W, strides, padding, dn):
        return lax.conv_transpose(x, W, strides, padding, dimension_numbers=dn)
    return _general_conv("GeneralConvTranspose", _conv_transpose_out_shape, conv,
                         dimension_numbers, out_chan, filter_shape, strides, padding,
                         W_init, b_init)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Normalize over ``axis`` with the batch's own statistics (no running averages,
    as JAX's stax), then scale by ``gamma`` and shift by ``beta`` (one per position of the
    other axes).  ``center=False``/``scale=False`` drop ``beta``/``gamma`` (their params
    are then ``()``)."""
    axis = (int(axis),) if isinstance(axis, int) or np.ndim(axis) == 0 else tuple(axis)

    def init_fun(rng, input_shape):
        input_shape = _shape_tuple("stax.BatchNorm", input_shape)
        nd = len(input_shape)
        bad = [a for a in axis if not -nd <= a < nd]
        if bad:
            raise ValueError(f"stax.BatchNorm: axis {axis} out of range for input_shape "
                             f"{input_shape}")
        axes = {a % nd for a in axis}
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        nd = np.ndim(x)
        axes = {a % nd for a in axis}
        ed = tuple(None if i in axes else slice(None) for i in range(nd))
        z = standardize(x, tuple(sorted(axes)), epsilon=epsilon)
        if center and scale:
            return gamma[ed] * z + beta[ed]
        if center:
            return z + beta[ed]
        if scale:
            return gamma[ed] * z
        return z
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying ``fun(inputs, **fun_kwargs)``."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _pool_dims(where, window_shape, strides, spec):
    """Full-rank window and strides (1 on the batch and channel axes) and those axes."""
    window_shape = tuple(int(w) for w in window_shape)
    strides = tuple(int(s) for s in strides) if strides else (1,) * len(window_shape)
    if len(strides) != len(window_shape):
        raise ValueError(f"{where}: strides {strides} and window_shape {window_shape} must "
                         "have one entry per spatial dimension")
    if spec is None:
        non_spatial = (0, len(window_shape) + 1)
    else:
        if "N" not in spec or "C" not in spec or len(spec) != len(window_shape) + 2:
            raise ValueError(f"{where}: spec {spec!r} must name N, C and one letter per "
                             f"spatial dimension of window_shape {window_shape}")
        non_spatial = (spec.index("N"), spec.index("C"))
    for i in sorted(non_spatial):
        window_shape = window_shape[:i] + (1,) + window_shape[i:]
        strides = strides[:i] + (1,) + strides[i:]
    return window_shape, strides, non_spatial


def _pooling_layer(name, reducer, init_val, average=False):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        where = f"stax.{name}"
        dims, strd, non_spatial = _pool_dims(where, window_shape, strides, spec)

        def init_fun(rng, input_shape):
            input_shape = _shape_tuple(where, input_shape)
            if len(input_shape) != len(dims):
                raise ValueError(f"{where}: input_shape {input_shape} has "
                                 f"{len(input_shape)} dimensions; a {len(dims) - 2}-d "
                                 f"window needs {len(dims)} (batch, spatial..., channel "
                                 "unless spec says otherwise)")
            if isinstance(padding, str):
                pads = lax.padtype_to_pads(input_shape, dims, strd, padding)
            else:
                pads = [tuple(p) for p in padding]
            out = []
            for i, (n, w, s, (lo, hi)) in enumerate(zip(input_shape, dims, strd, pads)):
                if i in non_spatial and w == 1 and s == 1 and lo == hi == 0:
                    out.append(n)          # carries a -1 batch size through
                    continue
                padded = n + lo + hi
                if padded < w:
                    raise ValueError(f"{where}: dimension {i} of input_shape {input_shape} "
                                     f"is {n} (padded {padded}), smaller than the window's "
                                     f"{w}")
                out.append((padded - w) // s + 1)
            return tuple(out), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, dims, strd, padding)
            if not average:
                return out
            # divide by the number of real (unpadded) elements in each window
            sp_shape = tuple(d for i, d in enumerate(inputs.shape) if i not in non_spatial)
            sp_dims = tuple(d for i, d in enumerate(dims) if i not in non_spatial)
            sp_strd = tuple(d for i, d in enumerate(strd) if i not in non_spatial)
            counts = lax.reduce_window(jnp.ones(sp_shape, dtype=inputs.dtype), 0.0, lax.add,
                                       sp_dims, sp_strd, padding if isinstance(padding, str)
                                       else [p for i, p in enumerate(padding)
                                             if i not in non_spatial])
            for i in sorted(non_spatial):
                counts = jnp.expand_dims(counts, i)
            return out / counts
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = name
    PoolingLayer.__doc__ = (f"A {name} layer over ``window_shape`` (spatial sizes), with "
                            "``strides`` (default 1) and ``padding`` ('VALID', 'SAME' or "
                            "pairs); ``spec`` names the layout's axes (default: batch "
                            "first, channels last).")
    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", lax.max, -jnp.inf)
SumPool = _pooling_layer("SumPool", lax.add, 0.0)
AvgPool = _pooling_layer("AvgPool", lax.add, 0.0, average=True)


def _flatten():
    def init_fun(rng, input_shape):
        input_shape = _shape_tuple("stax.Flatten", input_shape)
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.reshape(inputs, (inputs.shape[0], -1))
    return init_fun, apply_fun


Flatten = _flatten()
"""Flatten every dimension but the leading (batch) one."""


def _identity():
    return (lambda rng, input_shape: (input_shape, ()),
            lambda params, inputs, **kwargs: inputs)


Identity = _identity()


def FanOut(num):
    """Send the input to ``num`` branches (a list of ``num`` copies)."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num
    return init_fun, apply_fun


def _fan_in_sum():
    def init_fun(rng, input_shape):
        return input_shape[0], ()

    def apply_fun(params, inputs, **kwargs):
        return functools.reduce(operator.add, inputs)
    return init_fun, apply_fun


FanInSum = _fan_in_sum()
"""Sum a list of inputs of one shape."""


def FanInConcat(axis=-1):
    """Concatenate a list of inputs along ``axis``."""
    def init_fun(rng, input_shape):
        shapes = [tuple(s) for s in input_shape]
        ax = axis % len(shapes[0])
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or any(a != b for i, (a, b) in
                                               enumerate(zip(s, shapes[0])) if i != ax):
                raise ValueError(f"stax.FanInConcat: input shapes {shapes} differ outside "
                                 f"the concatenation axis {axis}")
        size = sum(s[ax] for s in shapes)
        return shapes[0][:ax] + (size,) + shapes[0][ax + 1:], ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Dropout, JAX's way: in ``mode='train'`` each unit is *kept* with probability
    ``rate`` and scaled by ``1/rate``; any other mode passes the input through.
    ``apply_fun`` needs ``rng=key`` (``serial`` passes one to each layer)."""
    rate_ok = isinstance(rate, (int, float)) and not isinstance(rate, bool)
    if rate_ok and not 0.0 < rate <= 1.0:
        raise ValueError(f"stax.Dropout: rate is the probability of keeping a unit and "
                         f"must be in (0, 1], got {rate}")

    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if mode != "train":
            return inputs
        if rng is None:
            raise ValueError("stax.Dropout: apply_fun needs a PRNG key: call "
                             "apply_fun(params, inputs, rng=key) (serial's apply_fun "
                             "splits it among its layers), or build the layer with "
                             "mode='test' for evaluation")
        keep = random.bernoulli(rng, rate, np.shape(inputs))
        return jnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


def _check_layers(where, layers):
    for i, layer in enumerate(layers):
        if not (isinstance(layer, (tuple, list)) and len(layer) == 2
                and callable(layer[0]) and callable(layer[1])):
            hint = (" (a layer constructor such as Dense or FanOut must be called: "
                    "Dense(10), not Dense)") if callable(layer) else ""
            raise TypeError(f"{where}: argument {i} is not an (init_fun, apply_fun) "
                            f"pair: {layer!r}{hint}")
    return tuple(zip(*layers)) if layers else ((), ())


def serial(*layers):
    """Compose layers in sequence: the output of each is the input of the next.  The
    params are a list with one entry per layer."""
    init_funs, apply_funs = _check_layers("stax.serial", layers)
    n = len(layers)

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, p = init(layer_rng, input_shape)
            params.append(p)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        if len(params) != n:
            raise ValueError(f"stax.serial: got {len(params)} parameter entries for "
                             f"{n} layers")
        rngs = random.split(rng, n) if rng is not None else (None,) * n
        for fun, p, r in zip(apply_funs, params, rngs):
            inputs = fun(p, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Apply layer ``i`` to input ``i`` of a sequence of inputs (pair with ``FanOut`` and
    ``FanInSum``/``FanInConcat``)."""
    init_funs, apply_funs = _check_layers("stax.parallel", layers)
    n = len(layers)

    def init_fun(rng, input_shape):
        if len(input_shape) != n:
            raise ValueError(f"stax.parallel: {n} layers need {n} input shapes, got "
                             f"{len(input_shape)}: {input_shape!r}")
        rngs = random.split(rng, n)
        outs = [init(r, s) for init, r, s in zip(init_funs, rngs, input_shape)]
        return tuple(o[0] for o in outs), tuple(o[1] for o in outs)

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        if len(inputs) != n:
            raise ValueError(f"stax.parallel: {n} layers need {n} inputs, got "
                             f"{len(inputs)}")
        rngs = random.split(rng, n) if rng is not None else (None,) * n
        return [f(p, x, rng=r, **kwargs)
                for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built by ``make_layer(input_shape)`` once the input shape is known."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
