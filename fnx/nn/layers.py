"""Layers: PyTorch-like names, semantics and weight layouts, as immutable fnx Modules.

Layout is channels-first (NCHW; Conv1d takes NCL) as in PyTorch.  Linear's weight is
``(out, in)``, ConvNd's ``(out, in/groups, *kernel)``, ConvTranspose2d's
``(in, out, kh, kw)``.  Sizes that depend on the input (in_features, in_channels,
num_features, ...) may be left out and are inferred by ``fnx.nn.init`` from
placeholders; give them together with ``key=`` to create the params at construction.
Layers default to training mode (as PyTorch); use ``m.eval()`` / ``m.train()``.

An input of the wrong rank or feature/channel count raises a ``ShapeError`` (a
``TypeError`` and a ``ValueError``) naming the layer (its class, and its dotted name in
the model being called when it can be found), the size it was built for and the input's
shape; these are shape checks at trace time, free under ``jit``.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from .. import lax
from .. import numpy as fnp
from .. import random
from ..core.array import Tracer
from ..core.primitive import ShapeDtypeStruct
from ..errors import IndexOutOfBoundsError, ShapeError
from . import functions as F
from . import initializers as I
from .module import Module, _record_states, next_key
from .losses import out_of_range

__all__ = ["Linear", "Conv1d", "Conv2d", "SeparableConv2d", "ConvTranspose2d",
           "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Dropout", "MaxPool2d",
           "AvgPool2d", "GlobalAvgPool", "Flatten", "Embedding", "MultiHeadAttention", "LSTM",
           "GRU", "Sequential", "Lambda", "Identity", "ReLU", "GELU", "Tanh", "Sigmoid",
           "SiLU", "LeakyReLU", "Softmax"]

_F32 = np.dtype(np.float32)


def _fan_uniform(key, shape, dtype, fan_in):
    b = 1.0 / math.sqrt(max(fan_in, 1))
    return random.uniform(key, shape, dtype, -b, b)


def _weight(init, key, shape, dtype, fan_in):
    return _fan_uniform(key, shape, dtype, fan_in) if init is None else init(key, shape, dtype)


def _weight_bias(layer, key, shape, n_out, fan_in):
    """The layer's ``weight`` (``shape``) and, with ``use_bias``, ``bias`` (``n_out``,), from
    its initializers (default: uniform in +-1/sqrt(fan_in))."""
    kw, kb = random.split(key)
    out = {"weight": _weight(layer.kernel_init, kw, shape, layer.dtype, fan_in)}
    if layer.use_bias:
        out["bias"] = _weight(layer.bias_init, kb, (n_out,), layer.dtype, fan_in)
    return out


def _tuple(v, n):
    return tuple(int(a) for a in v) if isinstance(v, (tuple, list)) else (int(v),) * n


def _padding(padding):
    """A conv ``padding`` argument in hashable form (str, int, or a tuple of ints/pairs)."""
    return padding if isinstance(padding, (str, int)) else tuple(
        p if isinstance(p, int) else tuple(p) for p in padding)


def _dropout(key, p, x):
    """``x`` with elements zeroed with probability ``p``, the rest scaled by 1/(1-p)."""
    keep = random.bernoulli(key, 1 - p, x.shape)
    return fnp.where(keep, x / (1 - p), fnp.zeros_like(x))


def _layer_path(layer):
    """The dotted name of ``layer`` in the outermost module being called (found from the
    ``self`` of the calling frames), or None.  Only used to word an error."""
    try:
        frame = sys._getframe(1)
    except (AttributeError, ValueError):  # pragma: no cover - no frame support
        return None
    found = None
    while frame is not None:
        outer = frame.f_locals.get("self")
        if isinstance(outer, Module) and outer is not layer:
            try:
                found = next((n for n, m in outer.modules() if m is layer and n), found)
            except Exception:  # pragma: no cover - a half-built module
                pass
        frame = frame.f_back
    return found


def _describe(layer):
    path = _layer_path(layer)
    name = type(layer).__name__
    return f"{name} '{path}'" if path else name


def _shape_of(x):
    return tuple(np.shape(x))


def _check_rank(layer, x, ranks, layout, hint=""):
    """ShapeError unless ``x``'s rank is in ``ranks`` (``layout`` names the axes)."""
    shape = _shape_of(x)
    if len(shape) not in ranks:
        want = " or ".join(f"{r}-d" for r in ranks)
        raise ShapeError(f"{_describe(layer)} expects a {want} input {layout}, got shape "
                         f"{shape} ({len(shape)}-d){hint}")
    return shape


def _check_size(layer, x, axis, want, what, hint=""):
    """ShapeError unless ``x.shape[axis] == want``."""
    shape = _shape_of(x)
    got = shape[axis]
    if got != want:
        raise ShapeError(f"{_describe(layer)} was built for {want} {what} but got an input "
                         f"of shape {shape} with {got} on axis {axis % len(shape)}{hint}")


def _eager(layer, key, aval):
    if key is not None:
        layer.__dict__.update(layer._create(key, aval))


class Linear(Module):
    """``y = x @ weight.T + bias`` over the last axis.  ``Linear(out)`` (in inferred by
    ``fnx.nn.init``) or ``Linear(in, out, key=key)``."""
    __params__ = ("weight", "bias")

    def __init__(self, *features, use_bias=True, kernel_init=None, bias_init=None,
                 dtype=None, key=None):
        if len(features) not in (1, 2):
            raise TypeError("Linear(out_features) or Linear(in_features, out_features)")
        self.in_features = int(features[0]) if len(features) == 2 else None
        self.out_features = int(features[-1])
        self.use_bias = bool(use_bias)
        self.kernel_init, self.bias_init = kernel_init, bias_init
        self.dtype = np.dtype(dtype or _F32)
        self.weight = self.bias = None
        if self.in_features is not None:
            _eager(self, key, ShapeDtypeStruct((1, self.in_features), self.dtype))

    def _create(self, key, x):
        n = x.shape[-1]
        if self.in_features is not None and self.in_features != n:
            raise ValueError(f"Linear: built for {self.in_features} input features, got "
                             f"input of shape {x.shape}")
        return _weight_bias(self, key, (self.out_features, n), self.out_features, n)

    def __call__(self, x):
        if not _shape_of(x):
            raise ShapeError(f"{_describe(self)} expects an input of rank >= 1 (..., "
                             f"in_features), got a 0-d one; reshape it, e.g. x.reshape(1)")
        m = self._lazy(x)
        _check_size(self, x, -1, m.weight.shape[1], "input features (the last axis)",
                    f"; give it inputs of {m.weight.shape[1]} features or build it with "
                    f"Linear({_shape_of(x)[-1]}, {m.out_features})")
        y = fnp.matmul(x, m.weight.T)
        return y + m.bias if m.use_bias else y


def _pad_arg(padding, nsp, kernel, dilation, stride, in_sp):
    """Explicit (lo, hi) pairs per spatial dim."""
    if isinstance(padding, str):
        p = padding.lower()
        if p == "valid":
            return ((0, 0),) * nsp
        if p == "same":
            eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
            return tuple(lax.padtype_to_pads(in_sp, eff, stride, "SAME"))
        raise ValueError(f"padding must be 'same', 'valid', an int or pairs, got {padding!r}")
    if isinstance(padding, int):
        return ((padding, padding),) * nsp
    out = []
    for p in padding:
        out.append((int(p), int(p)) if isinstance(p, int) else (int(p[0]), int(p[1])))
    return tuple(out)


_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_input(x, pads, mode):
    if mode == "zeros" or all(p == (0, 0) for p in pads):
        return x, pads
    if mode not in _PAD_MODES:
        raise ValueError(f"padding_mode must be zeros, reflect, replicate or circular, got "
                         f"{mode!r}")
    x = fnp.pad(x, ((0, 0), (0, 0)) + tuple(pads), mode=_PAD_MODES[mode])
    return x, ((0, 0),) * len(pads)


class _ConvNd(Module):
    __params__ = ("weight", "bias")
    _nsp = 2

    def __init__(self, *args, stride=1, padding=0, dilation=1, groups=1, use_bias=True,
                 bias=None, padding_mode="zeros", kernel_init=None, bias_init=None,
                 dtype=None, key=None):
        # Conv2d(out, kernel) or Conv2d(in, out, kernel) (PyTorch order)
        if len(args) == 2:
            self.in_channels, (self.out_channels, k) = None, args
        elif len(args) == 3:
            self.in_channels, self.out_channels, k = args
        else:
            raise TypeError(f"{type(self).__name__}(out_channels, kernel_size) or "
                            f"{type(self).__name__}(in_channels, out_channels, kernel_size)")
        n = self._nsp
        self.out_channels = int(self.out_channels)
        self.kernel_size = _tuple(k, n)
        self.stride, self.dilation = _tuple(stride, n), _tuple(dilation, n)
        self.padding = _padding(padding)
        self.groups = int(groups)
        self.use_bias = bool(use_bias if bias is None else bias)
        self.padding_mode = padding_mode
        self.kernel_init, self.bias_init = kernel_init, bias_init
        self.dtype = np.dtype(dtype or _F32)
        self.weight = self.bias = None
        if self.in_channels is not None:
            self.in_channels = int(self.in_channels)
            _eager(self, key, ShapeDtypeStruct((1, self.in_channels) + (1,) * n, self.dtype))

    def _create(self, key, x):
        cin = x.shape[1]
        if cin % self.groups or self.out_channels % self.groups:
            raise ValueError(f"{type(self).__name__}: in ({cin}) and out "
                             f"({self.out_channels}) channels must be divisible by groups "
                             f"({self.groups})")
        shape = (self.out_channels, cin // self.groups) + self.kernel_size
        fan_in = math.prod(shape[1:])
        return _weight_bias(self, key, shape, self.out_channels, fan_in)

    def _layout(self):
        return "(N, C, " + (", ".join("DHW"[3 - self._nsp:]) if self._nsp > 1 else "L") + ")"

    def __call__(self, x):
        _check_rank(self, x, (self._nsp + 2,), self._layout(),
                    "; add a batch axis with x[None]"
                    if len(_shape_of(x)) == self._nsp + 1 else "")
        m = self._lazy(x)
        cin = m.weight.shape[1] * self.groups
        _check_size(self, x, 1, cin, "input channels (axis 1)",
                    "; check the previous layer's output channels")
        pads = _pad_arg(self.padding, self._nsp, self.kernel_size, self.dilation, self.stride,
                        x.shape[2:])
        x, pads = _pad_input(x, pads, self.padding_mode)
        y = lax.conv_general_dilated(x, m.weight, self.stride, pads,
                                     rhs_dilation=self.dilation,
                                     feature_group_count=self.groups)
        if m.use_bias:
            y = y + m.bias.reshape((-1,) + (1,) * self._nsp)
        return y


class Conv1d(_ConvNd):
    """1-d convolution over (N, C, L); see Conv2d."""
    _nsp = 1


class Conv2d(_ConvNd):
    """2-d convolution over (N, C, H, W): ``Conv2d(out, k)`` or ``Conv2d(in, out, k)``;
    ``stride``, ``dilation``, ``groups``, ``padding`` ('same', 'valid', int, ints or
    (lo, hi) pairs per dim), ``padding_mode`` zeros/reflect/replicate/circular."""
    _nsp = 2


class SeparableConv2d(Module):
    """Depthwise (groups = in channels, ``depth_multiplier`` filters each) then pointwise
    1x1 convolution; params ``depthwise_weight`` (C*m, 1, kh, kw), ``pointwise_weight``
    (out, C*m, 1, 1), ``bias`` (out)."""
    __params__ = ("depthwise_weight", "pointwise_weight", "bias")

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 depth_multiplier=1, use_bias=True, kernel_init=None, bias_init=None,
                 dtype=None):
        self.out_channels = int(out_channels)
        self.kernel_size = _tuple(kernel_size, 2)
        self.stride, self.dilation = _tuple(stride, 2), _tuple(dilation, 2)
        self.padding = _padding(padding)
        self.depth_multiplier = int(depth_multiplier)
        self.use_bias = bool(use_bias)
        self.kernel_init, self.bias_init = kernel_init, bias_init
        self.dtype = np.dtype(dtype or _F32)
        self.depthwise_weight = self.pointwise_weight = self.bias = None

    def _required_params(self):
        return ("depthwise_weight", "pointwise_weight")

    def _create(self, key, x):
        c = x.shape[1]
        cm = c * self.depth_multiplier
        k1, k2, k3 = random.split(key, 3)
        kk = math.prod(self.kernel_size)
        out = {"depthwise_weight": _weight(self.kernel_init, k1, (cm, 1) + self.kernel_size,
                                           self.dtype, kk),
               "pointwise_weight": _weight(self.kernel_init, k2, (self.out_channels, cm, 1, 1),
                                           self.dtype, cm)}
        if self.use_bias:
            out["bias"] = _weight(self.bias_init, k3, (self.out_channels,), self.dtype, cm)
        return out

    def __call__(self, x):
        _check_rank(self, x, (4,), "(N, C, H, W)")
        m = self._lazy(x)
        _check_size(self, x, 1, m.depthwise_weight.shape[0] // self.depth_multiplier,
                    "input channels (axis 1)", "; check the previous layer's output channels")
        pads = _pad_arg(self.padding, 2, self.kernel_size, self.dilation, self.stride,
                        x.shape[2:])
        y = lax.conv_general_dilated(x, m.depthwise_weight, self.stride, pads,
                                     rhs_dilation=self.dilation, feature_group_count=x.shape[1])
        y = lax.conv_general_dilated(y, m.pointwise_weight, (1, 1), "VALID")
        return y + m.bias.reshape((-1, 1, 1)) if m.use_bias else y


class ConvTranspose2d(Module):
    """Transposed 2-d convolution (PyTorch semantics): weight ``(in, out, kh, kw)``,
    ``stride``, ``padding`` (int or pair), ``output_padding``, ``dilation``; output size
    ``(n - 1) * s - 2 p + d (k - 1) + output_padding + 1``."""
    __params__ = ("weight", "bias")

    def __init__(self, *args, stride=1, padding=0, output_padding=0, dilation=1,
                 use_bias=True, kernel_init=None, bias_init=None, dtype=None, key=None):
        if len(args) == 2:
            self.in_channels, (self.out_channels, k) = None, args
        elif len(args) == 3:
            self.in_channels, self.out_channels, k = args
        else:
            raise TypeError("ConvTranspose2d(out, k) or ConvTranspose2d(in, out, k)")
        self.out_channels = int(self.out_channels)
        self.kernel_size = _tuple(k, 2)
        self.stride, self.padding = _tuple(stride, 2), _tuple(padding, 2)
        self.output_padding, self.dilation = _tuple(output_padding, 2), _tuple(dilation, 2)
        self.use_bias = bool(use_bias)
        self.kernel_init, self.bias_init = kernel_init, bias_init
        self.dtype = np.dtype(dtype or _F32)
        self.weight = self.bias = None
        if self.in_channels is not None:
            self.in_channels = int(self.in_channels)
            _eager(self, key, ShapeDtypeStruct((1, self.in_channels, 1, 1), self.dtype))

    def _create(self, key, x):
        cin = x.shape[1]
        shape = (cin, self.out_channels) + self.kernel_size
        # PyTorch computes the fan from dim 1 of this weight: out * kh * kw
        fan_in = self.out_channels * math.prod(self.kernel_size)
        return _weight_bias(self, key, shape, self.out_channels, fan_in)

    def __call__(self, x):
        _check_rank(self, x, (4,), "(N, C, H, W)")
        m = self._lazy(x)
        _check_size(self, x, 1, m.weight.shape[0], "input channels (axis 1)",
                    "; check the previous layer's output channels")
        w = fnp.flip(m.weight, (2, 3)).transpose((1, 0, 2, 3))
        pads = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, p, d, op in
                zip(self.kernel_size, self.padding, self.dilation, self.output_padding)]
        y = lax.conv_general_dilated(x, w, (1, 1), pads, lhs_dilation=self.stride,
                                     rhs_dilation=self.dilation)
        return y + m.bias.reshape((-1, 1, 1)) if m.use_bias else y


class _BatchNorm(Module):
    __params__ = ("weight", "bias")
    __states__ = ("running_mean", "running_var", "num_batches_tracked")
    _ranks, _layout, _rank_hint = (2, 3, 4, 5), "(N, C, ...)", ""  # the subclasses narrow it

    def __init__(self, num_features=None, eps=1e-5, momentum=0.1, affine=True, dtype=None,
                 key=None):
        self.num_features = None if num_features is None else int(num_features)
        self.eps, self.momentum, self.affine = float(eps), float(momentum), bool(affine)
        self.dtype = np.dtype(dtype or _F32)
        self.weight = self.bias = None
        self.running_mean = self.running_var = self.num_batches_tracked = None
        if self.num_features is not None:
            self.__dict__.update(self._create(None, ShapeDtypeStruct(
                (1, self.num_features), self.dtype)))

    def _required_params(self):
        return ("running_mean",)

    def _create(self, key, x):
        c = x.shape[1]
        out = {"running_mean": fnp.zeros((c,), self.dtype),
               "running_var": fnp.ones((c,), self.dtype),
               "num_batches_tracked": fnp.zeros((), np.int32)}
        if self.affine:
            out["weight"] = fnp.ones((c,), self.dtype)
            out["bias"] = fnp.zeros((c,), self.dtype)
        return out

    def __call__(self, x):
        _check_rank(self, x, self._ranks, self._layout, self._rank_hint)
        m = self._lazy(x)
        c = m.running_mean.shape[0]
        _check_size(self, x, 1, c, "channels (axis 1)",
                    f"; build it with {type(self).__name__}({_shape_of(x)[1]}) (or no size, "
                    "inferred by fnx.nn.init), or check the previous layer's output channels")
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if self.training:
            mean = fnp.mean(x, axis=axes)
            var = fnp.var(x, axis=axes)
            n = math.prod(x.shape[a] for a in axes)
            mom = self.momentum
            sm, sv = lax.stop_gradient(mean), lax.stop_gradient(var)
            unbiased = sv * (n / max(n - 1, 1))
            _record_states(self, running_mean=(1 - mom) * m.running_mean + mom * sm,
                           running_var=(1 - mom) * m.running_var + mom * unbiased,
                           num_batches_tracked=m.num_batches_tracked + 1)
        else:
            mean, var = m.running_mean, m.running_var
        y = (x - mean.reshape(shape)) * lax.rsqrt(var.reshape(shape) + self.eps)
        if self.affine:
            y = y * m.weight.reshape(shape) + m.bias.reshape(shape)
        return y


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L).  Train mode normalizes with the
    batch's (biased) statistics and, inside ``fnx.nn.apply``, updates the states
    ``running_mean``/``running_var`` (unbiased variance) as
    ``(1 - momentum) * running + momentum * batch`` and ``num_batches_tracked``; eval
    mode normalizes with the running statistics."""
    _ranks, _layout = (2, 3), "(N, C) or (N, C, L)"
    _rank_hint = "; use BatchNorm2d for (N, C, H, W) inputs"


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W); see BatchNorm1d."""
    _ranks, _layout = (4,), "(N, C, H, W)"
    _rank_hint = "; use BatchNorm1d for (N, C) or (N, C, L) inputs"


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` (default: the last axis,
    inferred); ``weight``/``bias`` of that shape when ``elementwise_affine``."""
    __params__ = ("weight", "bias")

    def __init__(self, normalized_shape=None, eps=1e-5, elementwise_affine=True, dtype=None):
        self.normalized_shape = None if normalized_shape is None else _tuple(
            normalized_shape, 1)
        self.eps, self.elementwise_affine = float(eps), bool(elementwise_affine)
        self.dtype = np.dtype(dtype or _F32)
        self.weight = self.bias = None
        if self.normalized_shape is not None and self.elementwise_affine:
            self.__dict__.update(self._create(None, ShapeDtypeStruct(self.normalized_shape,
                                                                     self.dtype)))

    def _initialized(self):
        return (not self.elementwise_affine or self.weight is not None)

    def _create(self, key, x):
        shape = self.normalized_shape or (x.shape[-1],)
        return {"weight": fnp.ones(shape, self.dtype), "bias": fnp.zeros(shape, self.dtype)}

    def __call__(self, x):
        shape = _shape_of(x)
        if not shape:
            raise ShapeError(f"{_describe(self)} expects an input of rank >= 1, got a 0-d "
                             "one")
        want = self.normalized_shape
        if want is None and self.elementwise_affine and self.weight is not None:
            want = tuple(self.weight.shape)
        if want is not None and tuple(shape[max(len(shape) - len(want), 0):]) != want:
            raise ShapeError(f"{_describe(self)} normalizes over trailing axes of shape "
                             f"{want} (normalized_shape) but got an input of shape {shape}; "
                             "its last axes must be exactly those")
        m = self._lazy(x)
        k = len(self.normalized_shape) if self.normalized_shape else 1
        axes = tuple(range(x.ndim - k, x.ndim))
        mean = fnp.mean(x, axis=axes, keepdims=True)
        var = fnp.var(x, axis=axes, keepdims=True)
        y = (x - mean) * lax.rsqrt(var + self.eps)
        return y * m.weight + m.bias if self.elementwise_affine else y


class GroupNorm(Module):
    """Group normalization over (N, C, ...): channels split into ``num_groups``, each
    normalized over its channels and all spatial positions; per-channel affine."""
    __params__ = ("weight", "bias")

    def __init__(self, num_groups, num_channels=None, eps=1e-5, affine=True, dtype=None):
        self.num_groups, self.eps, self.affine = int(num_groups), float(eps), bool(affine)
        self.num_channels = None if num_channels is None else int(num_channels)
        self.dtype = np.dtype(dtype or _F32)
        self.weight = self.bias = None
        if self.num_channels is not None and self.affine:
            self.__dict__.update(self._create(None, ShapeDtypeStruct((1, self.num_channels),
                                                                     self.dtype)))

    def _initialized(self):
        return not self.affine or self.weight is not None

    def _create(self, key, x):
        c = x.shape[1]
        return {"weight": fnp.ones((c,), self.dtype), "bias": fnp.zeros((c,), self.dtype)}

    def __call__(self, x):
        shape = _shape_of(x)
        if len(shape) < 2:
            raise ShapeError(f"{_describe(self)} expects an input (N, C, ...) of rank >= 2, "
                             f"got shape {shape} ({len(shape)}-d)")
        m = self._lazy(x)
        if self.affine:
            _check_size(self, x, 1, m.weight.shape[0], "channels (axis 1)",
                        "; check the previous layer's output channels")
        n, c = x.shape[:2]
        g = self.num_groups
        if c % g:
            raise ShapeError(f"{_describe(self)}: {c} channels (input shape {shape}) are "
                             f"not divisible by {g} groups")
        xg = x.reshape((n, g, -1))
        mean = fnp.mean(xg, axis=2, keepdims=True)
        var = fnp.var(xg, axis=2, keepdims=True)
        y = ((xg - mean) * lax.rsqrt(var + self.eps)).reshape(x.shape)
        if self.affine:
            shape = (1, -1) + (1,) * (x.ndim - 2)
            y = y * m.weight.reshape(shape) + m.bias.reshape(shape)
        return y


class Dropout(Module):
    """Zeroes elements with probability ``p`` and scales the rest by ``1/(1-p)`` in train
    mode (identity in eval mode).  The key is ``key=`` or, inside ``fnx.nn.apply(...,
    key=k)``, one derived from ``k``."""

    def __init__(self, p=0.5):
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)

    def __call__(self, x, *, key=None):
        if not self.training or self.p == 0:
            return x
        if self.p == 1:
            return fnp.zeros_like(x)
        key = next_key(key)
        if key is None:
            raise ValueError("Dropout in train mode needs a key: call it with key=... or run "
                             "the model with fnx.nn.apply(model, x, key=...), or use "
                             "model.eval()")
        return _dropout(key, self.p, x)


class MaxPool2d(Module):
    """Max pooling over (N, C, H, W); ``stride`` defaults to ``kernel_size``; ``padding``
    int/pair (pads with -inf)."""

    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size = _tuple(kernel_size, 2)
        self.stride = self.kernel_size if stride is None else _tuple(stride, 2)
        self.padding = _tuple(padding, 2)

    def __call__(self, x):
        pads = tuple((p, p) for p in self.padding)
        return lax.max_pool(x, self.kernel_size, self.stride, pads, spatial_axes=(2, 3))


class AvgPool2d(Module):
    """Average pooling over (N, C, H, W); ``count_include_pad`` as PyTorch."""

    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad=True):
        self.kernel_size = _tuple(kernel_size, 2)
        self.stride = self.kernel_size if stride is None else _tuple(stride, 2)
        self.padding = _tuple(padding, 2)
        self.count_include_pad = bool(count_include_pad)

    def __call__(self, x):
        pads = tuple((p, p) for p in self.padding)
        return lax.avg_pool(x, self.kernel_size, self.stride, pads, spatial_axes=(2, 3),
                            count_include_pad=self.count_include_pad)


class GlobalAvgPool(Module):
    """Mean over all spatial axes: (N, C, ...) -> (N, C) (``keepdims`` keeps them)."""

    def __init__(self, keepdims=False):
        self.keepdims = bool(keepdims)

    def __call__(self, x):
        return fnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=self.keepdims)


class Flatten(Module):
    """Flattens axes ``start_dim..end_dim`` (default: all but the batch axis)."""

    def __init__(self, start_dim=1, end_dim=-1):
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def __call__(self, x):
        s, e = self.start_dim % x.ndim, self.end_dim % x.ndim
        return x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:])


class Embedding(Module):
    """Lookup table ``weight`` (num_embeddings, embedding_dim), init N(0, 1).

    Indices outside ``[0, num_embeddings)`` (negative ones too) raise an ``IndexError``
    when their values are known; under ``jit``/``vmap`` their rows are NaN."""
    __params__ = ("weight",)

    def __init__(self, num_embeddings, embedding_dim, embedding_init=None, dtype=None,
                 key=None):
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.embedding_init = embedding_init
        self.dtype = np.dtype(dtype or _F32)
        self.weight = None
        _eager(self, key, None)

    def _create(self, key, x):
        init = self.embedding_init or I.normal(1.0)
        return {"weight": init(key, (self.num_embeddings, self.embedding_dim), self.dtype)}

    def __call__(self, idx):
        m = self._lazy(idx)
        idx = fnp.asarray(idx)
        n = m.weight.shape[0]
        if idx.dtype.kind in "iu":
            if isinstance(idx, Tracer):
                # values unknown: out-of-range rows come out NaN (take's fill), negative
                # indices too instead of wrapping around
                idx = fnp.where(idx < 0, n, idx)
            elif idx.size:
                bad = out_of_range(idx, n)
                if bad:
                    raise IndexOutOfBoundsError(
                        f"{_describe(self)} has {n} embeddings (valid indices 0 to {n - 1}) "
                        f"but got {bad[0]} index(es) out of range: {bad[1]}")
        return fnp.take(m.weight, idx, axis=0)


class MultiHeadAttention(Module):
    """Multi-head attention as PyTorch's ``nn.MultiheadAttention`` (params
    ``in_proj_weight`` (3E, E), ``in_proj_bias``, ``out_proj_weight``, ``out_proj_bias``),
    but ``batch_first=True`` by default: inputs (N, L, E).  ``mha(query, key=None,
    value=None, attn_mask=None, key_padding_mask=None, is_causal=False,
    need_weights=False)``; ``key``/``value`` default to ``query`` (self-attention).
    Boolean masks mark positions that may NOT be attended (True = masked, PyTorch's
    convention); float masks are added to the scores.  ``attn_mask`` is (L, S) or
    (N * heads, L, S); ``key_padding_mask`` (N, S).  Returns the output, or
    ``(output, weights averaged over heads)`` with ``need_weights``."""
    __params__ = ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias")

    def __init__(self, num_heads, embed_dim=None, dropout=0.0, use_bias=True,
                 batch_first=True, dtype=None, key=None):
        self.num_heads, self.dropout = int(num_heads), float(dropout)
        self.embed_dim = None if embed_dim is None else int(embed_dim)
        self.use_bias, self.batch_first = bool(use_bias), bool(batch_first)
        self.dtype = np.dtype(dtype or _F32)
        self.in_proj_weight = self.in_proj_bias = None
        self.out_proj_weight = self.out_proj_bias = None
        if self.embed_dim is not None:
            _eager(self, key, ShapeDtypeStruct((1, 1, self.embed_dim), self.dtype))

    def _required_params(self):
        return ("in_proj_weight", "out_proj_weight")

    def _create(self, key, q, *rest):
        e = q.shape[-1]
        if e % self.num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim {e} is not divisible by "
                             f"num_heads {self.num_heads}")
        k1, k2 = random.split(key)
        in_proj = I.glorot_uniform(in_axis=1, out_axis=0)  # PyTorch's (out, in) layout
        out = {"in_proj_weight": in_proj(k1, (3 * e, e), self.dtype),
               "out_proj_weight": _fan_uniform(k2, (e, e), self.dtype, e)}
        if self.use_bias:
            out["in_proj_bias"] = fnp.zeros((3 * e,), self.dtype)
            out["out_proj_bias"] = fnp.zeros((e,), self.dtype)
        return out

    def __call__(self, query, key=None, value=None, /, *, attn_mask=None,
                 key_padding_mask=None, is_causal=False, need_weights=False):
        key = query if key is None else key
        value = key if value is None else value
        for what, t in (("query", query), ("key", key), ("value", value)):
            _check_rank(self, t, (3,), "(N, L, E)" if self.batch_first else "(L, N, E)",
                        f" for {what}")
        m = self._lazy(query)
        e_ = m.out_proj_weight.shape[0]
        for what, t in (("query", query), ("key", key), ("value", value)):
            _check_size(self, t, -1, e_, f"embedding features (the last axis of {what})")
        if _shape_of(key)[:2] != _shape_of(value)[:2]:
            raise ShapeError(f"{_describe(self)}: key of shape {_shape_of(key)} and value of "
                             f"shape {_shape_of(value)} must have the same batch and length")
        if not self.batch_first:
            query, key, value = (fnp.swapaxes(t, 0, 1) for t in (query, key, value))
        n, lq, e = query.shape
        s = key.shape[1]
        h = self.num_heads
        d = e // h
        w = m.in_proj_weight
        b = m.in_proj_bias if self.use_bias else None

        def proj(t, i):
            y = fnp.matmul(t, w[i * e:(i + 1) * e].T)
            if b is not None:
                y = y + b[i * e:(i + 1) * e]
            return y.reshape((n, -1, h, d)).transpose((0, 2, 1, 3))   # (N, h, L, d)
        q, k, v = proj(query, 0), proj(key, 1), proj(value, 2)
        scores = fnp.matmul(q, fnp.swapaxes(k, -1, -2)) / math.sqrt(d)     # (N, h, L, S)
        neg = fnp.asarray(-np.inf, scores.dtype)
        if is_causal:
            causal = np.triu(np.ones((lq, s), bool), 1)
            scores = fnp.where(causal, neg, scores)
        if attn_mask is not None:
            am = fnp.asarray(attn_mask)
            if am.ndim == 3:
                am = am.reshape((n, h) + am.shape[1:])
            scores = fnp.where(am, neg, scores) if am.dtype == np.bool_ else scores + am
        if key_padding_mask is not None:
            kp = fnp.asarray(key_padding_mask)
            kp = kp[:, None, None, :]
            scores = fnp.where(kp, neg, scores) if kp.dtype == np.bool_ else scores + kp
        attn = F.softmax(scores, axis=-1)
        if self.training and self.dropout > 0:
            k_ = next_key()
            if k_ is None:
                raise ValueError("MultiHeadAttention dropout in train mode needs "
                                 "fnx.nn.apply(..., key=...)")
            attn = _dropout(k_, self.dropout, attn)
        out = fnp.matmul(attn, v).transpose((0, 2, 1, 3)).reshape((n, lq, e))
        out = fnp.matmul(out, m.out_proj_weight.T)
        if self.use_bias:
            out = out + m.out_proj_bias
        if not self.batch_first:
            out = fnp.swapaxes(out, 0, 1)
        if need_weights:
            return out, fnp.mean(attn, axis=1)
        return out


class _RNN(Module):
    __params__ = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    _gates = 4

    def __init__(self, hidden_size, input_size=None, num_layers=1, use_bias=True,
                 batch_first=False, kernel_init=None, dtype=None, key=None):
        self.hidden_size, self.num_layers = int(hidden_size), int(num_layers)
        self.input_size = None if input_size is None else int(input_size)
        self.use_bias, self.batch_first = bool(use_bias), bool(batch_first)
        self.kernel_init = kernel_init
        self.dtype = np.dtype(dtype or _F32)
        self.weight_ih = self.weight_hh = self.bias_ih = self.bias_hh = None
        if self.input_size is not None:
            _eager(self, key, ShapeDtypeStruct((1, 1, self.input_size), self.dtype))

    def _required_params(self):
        return ("weight_ih", "weight_hh")

    def _create(self, key, x, *rest):
        hs, g = self.hidden_size, self._gates
        keys = random.split(key, 4 * self.num_layers)
        out = {"weight_ih": [], "weight_hh": [], "bias_ih": [], "bias_hh": []}
        for layer in range(self.num_layers):
            ins = x.shape[-1] if layer == 0 else hs
            kk = keys[4 * layer:4 * layer + 4]
            out["weight_ih"].append(_weight(self.kernel_init, kk[0], (g * hs, ins), self.dtype,
                                            hs))
            out["weight_hh"].append(_weight(self.kernel_init, kk[1], (g * hs, hs), self.dtype,
                                            hs))
            out["bias_ih"].append(_fan_uniform(kk[2], (g * hs,), self.dtype, hs))
            out["bias_hh"].append(_fan_uniform(kk[3], (g * hs,), self.dtype, hs))
        if not self.use_bias:
            out["bias_ih"] = out["bias_hh"] = None
        return out

    def _run(self, x, h0):
        _check_rank(self, x, (3,), "(N, L, in)" if self.batch_first else "(L, N, in)",
                    "; add a batch axis" if len(_shape_of(x)) == 2 else "")
        m = self._lazy(x)
        _check_size(self, x, -1, m.weight_ih[0].shape[1], "input features (the last axis)")
        if self.batch_first:
            x = fnp.swapaxes(x, 0, 1)           # (L, N, in)
        n = x.shape[1]
        finals = []
        for layer in range(self.num_layers):
            wi, wh = m.weight_ih[layer], m.weight_hh[layer]
            bi = m.bias_ih[layer] if self.use_bias else None
            bh = m.bias_hh[layer] if self.use_bias else None
            init = self._init_state(h0, layer, n, x.dtype)
            xi = fnp.matmul(x, wi.T)
            if bi is not None:
                xi = xi + bi

            def step(carry, xt, wh=wh, bh=bh):
                carry = self._cell(carry, xt, wh, bh)
                return carry, self._h(carry)
            final, x = lax.scan(step, init, xi)
            finals.append(final)
        if self.batch_first:
            x = fnp.swapaxes(x, 0, 1)
        return x, finals


def _hh(h, wh, bh):
    y = fnp.matmul(h, wh.T)
    return y if bh is None else y + bh


class LSTM(_RNN):
    """LSTM as PyTorch (gates i, f, g, o; params per layer in lists ``weight_ih.0``...).
    Input (L, N, in), or (N, L, in) with ``batch_first``.  ``lstm(x, state=None)`` returns
    ``(output, (h_n, c_n))`` with ``h_n``/``c_n`` of shape (num_layers, N, H)."""
    _gates = 4

    def _init_state(self, state, layer, n, dtype):
        if state is None:
            z = fnp.zeros((n, self.hidden_size), dtype)
            return (z, z)
        return (state[0][layer], state[1][layer])

    def _cell(self, carry, xi, wh, bh):
        h, c = carry
        gts = xi + _hh(h, wh, bh)
        hs = self.hidden_size
        i = F.sigmoid(gts[:, :hs])
        f = F.sigmoid(gts[:, hs:2 * hs])
        g = fnp.tanh(gts[:, 2 * hs:3 * hs])
        o = F.sigmoid(gts[:, 3 * hs:])
        c = f * c + i * g
        return (o * fnp.tanh(c), c)

    def _h(self, carry):
        return carry[0]

    def __call__(self, x, state=None):
        y, finals = self._run(x, state)
        return y, (fnp.stack([f[0] for f in finals]), fnp.stack([f[1] for f in finals]))


class GRU(_RNN):
    """GRU as PyTorch (gates r, z, n; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
    ``h' = (1 - z) * n + z * h``).  ``gru(x, h0=None)`` returns ``(output, h_n)``."""
    _gates = 3

    def _init_state(self, state, layer, n, dtype):
        return fnp.zeros((n, self.hidden_size), dtype) if state is None else state[layer]

    def _cell(self, h, xi, wh, bh):
        hs = self.hidden_size
        hh = _hh(h, wh, bh)
        r = F.sigmoid(xi[:, :hs] + hh[:, :hs])
        z = F.sigmoid(xi[:, hs:2 * hs] + hh[:, hs:2 * hs])
        nn_ = fnp.tanh(xi[:, 2 * hs:] + r * hh[:, 2 * hs:])
        return (1 - z) * nn_ + z * h

    def _h(self, carry):
        return carry

    def __call__(self, x, h0=None):
        y, finals = self._run(x, h0)
        return y, fnp.stack(finals)


class Sequential(Module):
    """Applies ``layers`` in order (list; params named ``layers.0.weight``...)."""

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = layers[0]
        self.layers = list(layers)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)


class Lambda(Module):
    """Wraps a function of the input (static: it must be hashable, e.g. a plain function)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


class Identity(Module):
    def __call__(self, x):
        return x


def _act(name, fn, doc):
    def call(self, x):
        return fn(x)
    return type(name, (Module,), {"__call__": call, "__doc__": doc,
                                  "__module__": __name__})


ReLU = _act("ReLU", F.relu, "``relu(x)``")
GELU = _act("GELU", F.gelu, "``gelu(x)`` (tanh approximation)")
Tanh = _act("Tanh", fnp.tanh, "``tanh(x)``")
Sigmoid = _act("Sigmoid", F.sigmoid, "``sigmoid(x)``")
SiLU = _act("SiLU", F.silu, "``silu(x)``")


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01):
        self.negative_slope = float(negative_slope)

    def __call__(self, x):
        return F.leaky_relu(x, self.negative_slope)


class Softmax(Module):
    def __init__(self, axis=-1):
        self.axis = int(axis)

    def __call__(self, x):
        return F.softmax(x, axis=self.axis)
