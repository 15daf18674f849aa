"""Neural-network ONNX operators: convolutions, pooling, normalizations, resizing and
sampling, dropout.

Convolutions run as ``lax.conv_general_dilated`` (``feature_group_count`` for ``group``,
``lhs_dilation`` for the strides of a transposed convolution), pooling as
``lax.reduce_window``; window geometry (ONNX's ``pads`` order ``[x1_begin, x2_begin, ...,
x1_end, x2_end, ...]``, ``auto_pad``, ``ceil_mode``) is worked out from static shapes with
NumPy. Resizing builds, per resized axis, a static gather (nearest) or a static weight
matrix (linear, cubic, antialiased) applied with ``tensordot``, so it is exact in the
coordinate rules and differentiable in the data.
"""
from __future__ import annotations

import contextvars

import itertools
import math

import numpy as np

from ... import lax
from ... import numpy as fnp
from ..graph import StaticInputError, known, np_dtype, op


def _a(x):
    return fnp.asarray(x)


def _s(x, v):
    """A scalar of ``x``'s dtype."""
    return fnp.asarray(v, x.dtype)


def _is_float(dt):
    return fnp.issubdtype(dt, fnp.floating)


def _lowest(dt):
    """The identity of max over ``dt``: -inf, or the integer type's minimum."""
    dt = np.dtype(dt)
    if dt.kind in "iu":
        return int(np.iinfo(dt).min)
    if dt.kind == "b":
        return False
    return -np.inf


def _per_channel(v, nd):
    """A per-channel vector (C,) shaped to broadcast against an (N, C, ...) tensor."""
    v = _a(v)
    if v.ndim == 1:
        return fnp.reshape(v, (v.shape[0],) + (1,) * (nd - 2))
    return v  # already (C, D1, ...) (BatchNormalization with spatial=0)


# --- window geometry ------------------------------------------------------------------------

def _spatial_attrs(node, nsp, kernel=None):
    kernel = list(kernel if kernel is not None else node.attr("kernel_shape"))
    strides = list(node.attr("strides", None) or [1] * nsp)
    dil = list(node.attr("dilations", None) or [1] * nsp)
    pads = list(node.attr("pads", None) or [0] * (2 * nsp))
    if len(kernel) != nsp or len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp:
        raise node.error(f"kernel_shape {kernel}, strides {strides}, dilations {dil} and "
                         f"pads {pads} do not fit {nsp} spatial dimensions")
    return kernel, strides, dil, pads


def _auto_pad(node):
    a = node.attr("auto_pad", "NOTSET")
    if isinstance(a, bytes):
        a = a.decode()
    a = a or "NOTSET"
    if a not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise node.error(f"auto_pad={a!r} is not an ONNX auto_pad value")
    return a


def _same_pads(auto_pad, in_sp, eff_k, strides):
    """(begin, end) pads of SAME_UPPER / SAME_LOWER: the output is ceil(in / stride)."""
    out = []
    for n, k, s in zip(in_sp, eff_k, strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, big = total // 2, total - total // 2
        out.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
    return out


def _conv_pads(node, in_sp, kernel, strides, dil):
    nsp = len(in_sp)
    ap = _auto_pad(node)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    if ap == "VALID":
        return [(0, 0)] * nsp
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        return _same_pads(ap, in_sp, eff, strides)
    pads = list(node.attr("pads", None) or [0] * (2 * nsp))
    return [(int(pads[i]), int(pads[i + nsp])) for i in range(nsp)]


# --- convolutions ---------------------------------------------------------------------------

@op("Conv")
def conv(node, x, w, b=None):
    x, w = _a(x), _a(w)
    nsp = x.ndim - 2
    kernel = list(w.shape[2:])
    if node.has_attr("kernel_shape") and list(node.attr("kernel_shape")) != kernel:
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the "
                         f"weight's spatial shape {kernel}")
    _k, strides, dil, _p = _spatial_attrs(node, nsp, kernel)
    pads = _conv_pads(node, x.shape[2:], kernel, strides, dil)
    group = int(node.attr("group", 1))
    y = lax.conv_general_dilated(x, w.astype(x.dtype), strides, pads, rhs_dilation=dil,
                                 feature_group_count=group)
    if b is not None:
        y = y + _per_channel(_a(b).astype(y.dtype), y.ndim)
    return y


@op("ConvTranspose")
def conv_transpose(node, x, w, b=None):
    x, w = _a(x), _a(w)
    nsp = x.ndim - 2
    kernel = list(w.shape[2:])
    _k, strides, dil, _p = _spatial_attrs(node, nsp, kernel)
    group = int(node.attr("group", 1))
    in_sp = x.shape[2:]
    out_pad = list(node.attr("output_padding", None) or [0] * nsp)
    out_shape = node.attr("output_shape", None)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    ap = _auto_pad(node)
    if out_shape:
        out_shape = list(out_shape)[-nsp:]
    elif ap in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [n * s for n, s in zip(in_sp, strides)]
    if out_shape:
        pads = []
        for i in range(nsp):
            total = strides[i] * (in_sp[i] - 1) + out_pad[i] + eff[i] - out_shape[i]
            half = total // 2
            pads.append((half, total - half) if ap == "SAME_UPPER" else (total - half, half))
    elif ap == "VALID":
        pads = [(0, 0)] * nsp
    else:
        p = list(node.attr("pads", None) or [0] * (2 * nsp))
        pads = [(int(p[i]), int(p[i + nsp])) for i in range(nsp)]
    # W is (C, M/group, k...): the direct convolution's kernel is (M, C/group, k...),
    # flipped in space, over the input dilated by the strides.
    c, mg = w.shape[0], w.shape[1]
    wk = fnp.reshape(w, (group, c // group, mg) + tuple(kernel))
    wk = fnp.swapaxes(wk, 1, 2)
    wk = fnp.reshape(wk, (group * mg, c // group) + tuple(kernel))
    wk = fnp.flip(wk, axis=tuple(range(2, 2 + nsp)))
    conv_pads = [(e - 1 - lo, e - 1 - hi + op_) for e, (lo, hi), op_ in
                 zip(eff, pads, out_pad)]
    y = lax.conv_general_dilated(x, wk.astype(x.dtype), [1] * nsp, conv_pads,
                                 lhs_dilation=strides, rhs_dilation=dil,
                                 feature_group_count=group)
    if b is not None:
        y = y + _per_channel(_a(b).astype(y.dtype), y.ndim)
    return y


# --- pooling --------------------------------------------------------------------------------

def _pool_geometry(node, x, kernel=None):
    """Per spatial dim: (pad_begin, pad_end) explicit or automatic, the extra end padding
    that ceil_mode adds (it counts in no average), the output size."""
    nsp = x.ndim - 2
    kernel, strides, dil, _ = _spatial_attrs(node, nsp, kernel)
    in_sp = x.shape[2:]
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    ap = _auto_pad(node)
    ceil_mode = int(node.attr("ceil_mode", 0) or 0)
    pads = _conv_pads(node, in_sp, kernel, strides, dil)
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        outs = [-(-n // s) for n, s in zip(in_sp, strides)]
    else:
        outs = []
        for n, (lo, hi), e, s in zip(in_sp, pads, eff, strides):
            span = n + lo + hi - e
            o = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (o - 1) * s >= n + lo:  # the last window starts in the padding
                o -= 1
            outs.append(o)
    extra = [max((o - 1) * s + e - (n + lo + hi), 0)
             for o, s, e, n, (lo, hi) in zip(outs, strides, eff, in_sp, pads)]
    return kernel, strides, dil, pads, extra, outs


def _window(x, kernel, strides, dil, pads, extra, which, init):
    padding = [(0, 0), (0, 0)] + [(lo, hi + e) for (lo, hi), e in zip(pads, extra)]
    comp = {"max": lax.max, "sum": lax.add}[which]
    return lax.reduce_window(x, init, comp, (1, 1) + tuple(kernel), (1, 1) + tuple(strides),
                             padding, window_dilation=(1, 1) + tuple(dil))


def _window_counts(in_sp, kernel, strides, dil, pads, outs, include_pad):
    """How many taps of each window fall on the input (and on the explicit padding when
    ``include_pad``), as a NumPy array of the output's spatial shape."""
    counts = np.ones((), np.int64)
    for n, k, s, d, (lo, hi), o in zip(in_sp, kernel, strides, dil, pads, outs):
        start = np.arange(o)[:, None] * s - lo + np.arange(k)[None, :] * d
        lo_ok, hi_ok = (-lo, n + hi) if include_pad else (0, n)
        c = ((start >= lo_ok) & (start < hi_ok)).sum(1)
        counts = np.multiply.outer(counts, c)
    return counts


@op("MaxPool")
def max_pool(node, x):
    x = _a(x)
    if int(node.attr("storage_order", 0) or 0) not in (0, 1):
        raise node.error("storage_order must be 0 or 1")
    kernel, strides, dil, pads, extra, outs = _pool_geometry(node, x)
    y = _window(x, kernel, strides, dil, pads, extra, "max", _lowest(x.dtype))
    want_indices = len(node.outputs) > 1 and node.outputs[1]
    if not want_indices:
        return y
    return y, _max_pool_indices(node, x, kernel, strides, dil, pads, outs)


def _max_pool_indices(node, x, kernel, strides, dil, pads, outs):
    """MaxPool's Indices: each window's first maximum, as a flat index into x (row-major
    over N, C and space; storage_order=1 orders the spatial dims column-major)."""
    in_sp = list(x.shape[2:])
    nsp = len(in_sp)
    # every (output position, kernel tap) -> input position, or -1 outside the input
    grids = np.meshgrid(*[np.arange(o) for o in outs], *[np.arange(k) for k in kernel],
                        indexing="ij")
    valid = np.ones(grids[0].shape, bool)
    pos = []
    for i in range(nsp):
        p = grids[i] * strides[i] - pads[i][0] + grids[nsp + i] * dil[i]
        valid &= (p >= 0) & (p < in_sp[i])
        pos.append(np.clip(p, 0, in_sp[i] - 1))
    flat = np.ravel_multi_index(pos, in_sp)
    so = int(node.attr("storage_order", 0) or 0)
    col = np.ravel_multi_index(pos[::-1], in_sp[::-1]) if so else flat
    taps = int(np.prod(kernel))
    o_size = int(np.prod(outs))
    flat = flat.reshape(o_size, taps)
    col = col.reshape(o_size, taps)
    valid = valid.reshape(o_size, taps)
    n, c = x.shape[:2]
    xf = fnp.reshape(x, (n, c, -1))
    patches = fnp.take(xf, flat.reshape(-1), axis=2).reshape((n, c, o_size, taps))
    patches = fnp.where(valid, patches, _s(x, _lowest(x.dtype)))
    # the first tap holding the maximum, preferring real inputs over padding
    best = fnp.argmax(patches, axis=-1)
    best_tap = fnp.take_along_axis(fnp.broadcast_to(fnp.asarray(col), (n, c, o_size, taps)),
                                   best[..., None], axis=-1)[..., 0]
    base = (np.arange(n * c, dtype=np.int64) * int(np.prod(in_sp))).reshape(n, c, 1)
    idx = best_tap.astype(np.int64) + fnp.asarray(base)
    return fnp.reshape(idx, (n, c) + tuple(outs))


@op("AveragePool")
def average_pool(node, x):
    x = _a(x)
    kernel, strides, dil, pads, extra, outs = _pool_geometry(node, x)
    s = _window(x, kernel, strides, dil, pads, extra, "sum", 0)
    include = bool(node.attr("count_include_pad", 0))
    counts = _window_counts(x.shape[2:], kernel, strides, dil, pads, outs, include)
    return s / fnp.asarray(np.maximum(counts, 1), s.dtype)


@op("LpPool")
def lp_pool(node, x):
    x = _a(x)
    p = node.attr("p", 2)
    kernel, strides, dil, pads, extra, outs = _pool_geometry(node, x)
    s = _window(fnp.abs(x) ** _s(x, p), kernel, strides, dil, pads, extra, "sum", 0)
    return s ** _s(x, 1.0 / p)


@op("GlobalAveragePool")
def global_average_pool(node, x):
    x = _a(x)
    return fnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalMaxPool")
def global_max_pool(node, x):
    x = _a(x)
    return fnp.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalLpPool")
def global_lp_pool(node, x):
    x = _a(x)
    p = node.attr("p", 2)
    s = fnp.sum(fnp.abs(x) ** _s(x, p), axis=tuple(range(2, x.ndim)), keepdims=True)
    return s ** _s(x, 1.0 / p)


@op("MaxUnpool", static=(2,))
def max_unpool(node, x, indices, output_shape=None):
    x, indices = _a(x), _a(indices)
    nsp = x.ndim - 2
    kernel, strides, _dil, pads = _spatial_attrs(node, nsp)
    inferred = tuple(x.shape[:2]) + tuple(
        (n - 1) * s + k - pads[i] - pads[i + nsp]
        for i, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel)))
    out = fnp.zeros(int(np.prod(inferred)), x.dtype)
    out = out.at[fnp.reshape(indices, (-1,))].set(fnp.reshape(x, (-1,)))
    out = fnp.reshape(out, inferred)
    if output_shape is not None and np.size(output_shape):
        # the indices address the inferred shape; a larger output_shape pads its ends
        shape = [int(v) for v in output_shape]
        if len(shape) != len(inferred) or any(a < b for a, b in zip(shape, inferred)):
            raise node.error(f"output_shape {shape} is smaller than the unpooled shape "
                             f"{list(inferred)}")
        out = fnp.pad(out, [(0, a - b) for a, b in zip(shape, inferred)])
    return out


# --- normalizations -------------------------------------------------------------------------

# Set by ``OnnxModule`` in train mode: a dict that BatchNormalization nodes exported for
# inference fill with their updated running statistics (by initializer name) while they
# normalize with the batch's, as a BatchNorm layer trains.
TRAIN_STATES = contextvars.ContextVar("fnx_onnx_train_states", default=None)


@op("BatchNormalization")
def batch_normalization(node, x, scale, b, mean, var):
    x = _a(x)
    eps = node.attr("epsilon", 1e-5)
    nd = x.ndim
    dt = x.dtype
    training = False
    if node.opset is not None and node.opset >= 14:
        training = bool(node.attr("training_mode", 0))
    elif node.opset is not None and node.opset < 7:
        training = not node.attr("is_test", 0)
    elif len([o for o in node.outputs if o]) > 1:
        training = True
    module_states = TRAIN_STATES.get()
    if module_states is not None and not training:   # an inference graph, trained in fnx
        y, run_mean, run_var = _bn_batch_statistics(node, x, _a(scale), _a(b), _a(mean),
                                                    _a(var))[:3]
        for name, value in ((node.inputs[3], run_mean), (node.inputs[4], run_var)):
            if name:
                module_states[name] = value
        return y
    scale, b = _a(scale), _a(b)
    mean, var = _a(mean), _a(var)
    if not training:
        inv = fnp.sqrt(_per_channel(var, nd).astype(dt) + _s(x, eps))
        y = (x - _per_channel(mean, nd).astype(dt)) / inv
        return y * _per_channel(scale, nd).astype(dt) + _per_channel(b, nd).astype(dt)
    y, run_mean, run_var, bm, bv = _bn_batch_statistics(node, x, scale, b, mean, var)
    if node.opset is not None and node.opset >= 14:
        return y, run_mean, run_var
    return y, run_mean, run_var, bm, bv  # opset < 14: saved mean and variance too


def _bn_batch_statistics(node, x, scale, b, mean, var):
    """``(y, new running mean, new running variance, batch mean, batch variance)``: ``x``
    normalized with the batch's statistics (ONNX's training mode: the population variance
    over every axis but the channels), the running ones moved by ``momentum``."""
    eps = node.attr("epsilon", 1e-5)
    nd, dt = x.ndim, x.dtype
    axes = (0,) + tuple(range(2, nd))
    bm = fnp.mean(x, axis=axes)
    bv = fnp.mean(fnp.square(x - fnp.reshape(bm, (-1,) + (1,) * (nd - 2))), axis=axes)
    y = (x - _per_channel(bm, nd)) / fnp.sqrt(_per_channel(bv, nd) + _s(x, eps))
    y = y * _per_channel(scale, nd).astype(dt) + _per_channel(b, nd).astype(dt)
    mom = node.attr("momentum", 0.9)
    run_mean = mean * _s(mean, mom) + bm.astype(mean.dtype) * _s(mean, 1 - mom)
    run_var = var * _s(var, mom) + bv.astype(var.dtype) * _s(var, 1 - mom)
    return y, run_mean, run_var, bm, bv


def _stash(node, x):
    """The dtype normalizations compute in (stash_type: 1 is float32)."""
    st = node.attr("stash_type", 1)
    try:
        return np_dtype(st)
    except Exception:  # noqa: BLE001
        raise node.error(f"stash_type={st} is not a float type fnx computes in") from None


def _trailing_norm(node, x):
    """What LayerNormalization and RMSNormalization share: the input in the stash type,
    the normalized axes (``axis`` to the last), epsilon in the stash type."""
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    cdt = _stash(node, x)
    return x.astype(cdt), tuple(range(axis, x.ndim)), fnp.asarray(node.attr("epsilon", 1e-5),
                                                                   cdt), cdt


@op("LayerNormalization")
def layer_normalization(node, x, scale, b=None):
    x = _a(x)
    xc, axes, eps, cdt = _trailing_norm(node, x)
    mean = fnp.mean(xc, axis=axes, keepdims=True)
    d = xc - mean
    var = fnp.mean(d * d, axis=axes, keepdims=True)
    inv = fnp.asarray(1, cdt) / fnp.sqrt(var + eps)
    y = (d * inv).astype(x.dtype) * _a(scale).astype(x.dtype)
    if b is not None:
        y = y + _a(b).astype(x.dtype)
    return y, mean, inv


@op("RMSNormalization")
def rms_normalization(node, x, scale):
    x = _a(x)
    xc, axes, eps, _cdt = _trailing_norm(node, x)
    ms = fnp.mean(xc * xc, axis=axes, keepdims=True)
    y = xc / fnp.sqrt(ms + eps)
    return y.astype(x.dtype) * _a(scale).astype(x.dtype)


@op("InstanceNormalization")
def instance_normalization(node, x, scale, b):
    x = _a(x)
    eps = node.attr("epsilon", 1e-5)
    axes = tuple(range(2, x.ndim))
    mean = fnp.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = fnp.mean(d * d, axis=axes, keepdims=True)
    y = d / fnp.sqrt(var + _s(x, eps))
    return y * _per_channel(scale, x.ndim).astype(x.dtype) + \
        _per_channel(b, x.ndim).astype(x.dtype)


@op("GroupNormalization")
def group_normalization(node, x, scale, b):
    x = _a(x)
    g = int(node.attr("num_groups"))
    eps = node.attr("epsilon", 1e-5)
    n, c = x.shape[:2]
    if c % g:
        raise node.error(f"{c} channels do not split into num_groups={g}")
    cdt = _stash(node, x) if node.opset is None or node.opset >= 21 else x.dtype
    xg = fnp.reshape(x.astype(cdt), (n, g, -1))
    mean = fnp.mean(xg, axis=-1, keepdims=True)
    d = xg - mean
    var = fnp.mean(d * d, axis=-1, keepdims=True)
    yg = d / fnp.sqrt(var + fnp.asarray(eps, cdt))
    scale, b = _a(scale).astype(x.dtype), _a(b).astype(x.dtype)
    if scale.shape[0] == g and (node.opset is not None and node.opset < 21):
        yg = yg.astype(x.dtype) * scale[:, None] + b[:, None]  # opset 18: per group
        return fnp.reshape(yg, x.shape)
    y = fnp.reshape(yg, x.shape).astype(x.dtype)
    return y * _per_channel(scale, x.ndim) + _per_channel(b, x.ndim)


@op("LRN")
def lrn(node, x):
    x = _a(x)
    size = int(node.attr("size"))
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), \
        node.attr("bias", 1.0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    nd = x.ndim
    window = [1] * nd
    window[1] = size
    padding = [(0, 0)] * nd
    padding[1] = (lo, hi)
    sq = lax.reduce_window(x * x, 0, lax.add, window, [1] * nd, padding)
    return x / (_s(x, bias) + _s(x, alpha / size) * sq) ** _s(x, beta)


@op("MeanVarianceNormalization")
def mean_variance_normalization(node, x):
    x = _a(x)
    axes = tuple(a % x.ndim for a in node.attr("axes", [0, 2, 3]))
    mean = fnp.mean(x, axis=axes, keepdims=True)
    var = fnp.mean(x * x, axis=axes, keepdims=True) - mean * mean
    return (x - mean) / (fnp.sqrt(var) + _s(x, 1e-9))


@op("LpNormalization")
def lp_normalization(node, x):
    x = _a(x)
    axis = node.attr("axis", -1)
    p = int(node.attr("p", 2))
    if p == 1:
        norm = fnp.sum(fnp.abs(x), axis=axis, keepdims=True)
    elif p == 2:
        norm = fnp.sqrt(fnp.sum(x * x, axis=axis, keepdims=True))
    else:
        raise node.error(f"p={p}: ONNX's LpNormalization takes p=1 or p=2")
    zero = norm == 0
    return fnp.where(zero, _s(x, 0), x / fnp.where(zero, _s(x, 1), norm))


# --- dropout --------------------------------------------------------------------------------

@op("Dropout", static=(1, 2))
def dropout(node, x, ratio=None, training_mode=None):
    x = _a(x)
    opset = node.opset or 22
    if opset >= 12:
        training = bool(training_mode) if training_mode is not None else False
        r = float(ratio) if ratio is not None else 0.5
    else:
        training = opset < 7 and not node.attr("is_test", 0)
        r = node.attr("ratio", 0.5)
    if training and r != 0:
        raise node.error("training-mode dropout draws random masks; fnx imports models for "
                         "inference (set training_mode to false, or ratio to 0)")
    mask_dt = bool if opset >= 10 else x.dtype
    outs = [o for o in node.outputs]
    if len(outs) > 1 and outs[1]:
        return x, fnp.ones(x.shape, mask_dt)
    return x


# --- resizing -------------------------------------------------------------------------------

def _keys(d, a):
    """The cubic convolution kernel (Keys, coefficient ``a``) at distances ``d``."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _resize_coeffs(mode, ratio, scale, nearest_mode, cubic_a, antialias):
    """Per output position (``ratio`` is its fractional source offset in (0, 1]): the
    offsets of its taps from the floor of the source coordinate (as the first tap's
    offset) and their weights."""
    r = ratio[:, None]
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            up = r > 0.5
        elif nearest_mode == "round_prefer_ceil":
            up = r >= 0.5
        elif nearest_mode == "floor":
            up = np.zeros_like(r, bool)
        elif nearest_mode == "ceil":
            up = np.ones_like(r, bool)
        else:
            raise ValueError(nearest_mode)
        up = up | (r == 1)
        return np.concatenate([~up, up], 1).astype(np.float64), 0
    if mode == "linear":
        if antialias and scale < 1:
            start = int(np.floor(-1 / scale) + 1)
            taps = np.arange(start, 2 - start)[None, :]
            w = np.clip(1 - np.abs((taps - r) * scale), 0, 1)
            return w / w.sum(1, keepdims=True), start
        return np.concatenate([1 - r, r], 1), 0
    # cubic
    s = min(scale, 1.0) if antialias else 1.0
    start = int(np.floor(-2 / s) + 1)
    taps = np.arange(start, 2 - start)[None, :]
    w = _keys((taps - r) * s, cubic_a)
    if antialias:
        w = w / w.sum(1, keepdims=True)
    return w, start


def _source_coords(ctm, n_in, n_out, scale, roi):
    """Each output index's coordinate in the input, and which fall outside (for
    tf_crop_and_resize's extrapolation), per ONNX's coordinate_transformation_mode."""
    y = np.arange(n_out, dtype=np.float64)
    width = scale * n_in  # ONNX's output_width: not rounded
    out_of_range = None
    if ctm == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        lo, hi = roi
        if width == 1:
            x = np.full(n_out, (hi - lo) * (n_in - 1) / 2)
        else:
            x = y * (hi - lo) * (n_in - 1) / (width - 1)
        x = x + lo * (n_in - 1)
        out_of_range = (x < 0) | (x > n_in - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        x = offset + (y + 0.5) / scale - 0.5
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    else:
        raise ValueError(ctm)
    return x, out_of_range


def _resize_axis(x, axis, n_out, scale, roi, cfg):
    """``x`` resized along ``axis`` to ``n_out``: a static gather of each output's taps
    (edge-clamped) and, but for nearest, their weighted sum."""
    n_in = x.shape[axis]
    src, outside = _source_coords(cfg["ctm"], n_in, n_out, scale, roi)
    base = np.floor(src)
    ratio = np.where(src == base, 1.0, src - base)
    w, start = _resize_coeffs(cfg["mode"], ratio, scale, cfg["nearest_mode"],
                              cfg["cubic_a"], cfg["antialias"])
    ntap = w.shape[1]
    # taps: start .. start+ntap-1 from floor(src), one lower where src is an integer
    # (its ratio is 1 then)
    first = base.astype(np.int64) + start - (ratio == 1)
    idx = first[:, None] + np.arange(ntap)[None, :]
    if cfg["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        tot = w.sum(1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    idx = np.clip(idx, 0, n_in - 1)
    if cfg["mode"] == "nearest":
        y = fnp.take(x, idx[np.arange(n_out), np.argmax(w, 1)], axis=axis)
    else:
        cdt = x.dtype if _is_float(x.dtype) else np.float64
        g = fnp.take(x.astype(cdt), idx.reshape(-1), axis=axis)
        g = fnp.reshape(g, x.shape[:axis] + (n_out, ntap) + x.shape[axis + 1:])
        wshape = (n_out, ntap) + (1,) * (x.ndim - axis - 1)
        y = fnp.sum(g * fnp.asarray(w.reshape(wshape), cdt), axis=axis + 1)
    if outside is not None and outside.any():
        mshape = (n_out,) + (1,) * (x.ndim - axis - 1)
        y = fnp.where(outside.reshape(mshape), _s(y, cfg["extrapolation"]), y)
    return y


def _resize(node, x, cfg, scales=None, sizes=None, roi=None, axes=None):
    x = _a(x)
    r = x.ndim
    axes = list(range(r)) if axes is None else [a % r for a in axes]
    if len(set(axes)) != len(axes):
        raise node.error(f"axes {axes} repeat an axis")
    if sizes is not None:
        sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        if len(sizes) != len(axes):
            raise node.error(f"sizes {sizes} need one entry per resized axis ({len(axes)})")
        scl = [sizes[i] / x.shape[a] for i, a in enumerate(axes)]
        policy = cfg["policy"]
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise node.error(f"keep_aspect_ratio_policy={policy!r} is not an ONNX value")
            s = min(scl) if policy == "not_larger" else max(scl)
            scl = [s] * len(axes)
            sizes = [int(s * x.shape[a] + 0.5) for a in axes]
    elif scales is not None:
        scl = [float(v) for v in np.asarray(scales, np.float64).reshape(-1)]
        if len(scl) != len(axes):
            raise node.error(f"scales {scl} need one entry per resized axis ({len(axes)})")
        if any(s <= 0 for s in scl):
            raise node.error(f"scales {scl} must be positive")
        sizes = [int(math.floor(s * x.shape[a])) for s, a in zip(scl, axes)]
    else:
        raise node.error("Resize needs scales or sizes")
    if roi is not None:
        roi = [float(v) for v in np.asarray(roi, np.float64).reshape(-1)]
        if len(roi) == 2 * r and len(axes) != r:
            roi = [roi[a] for a in axes] + [roi[r + a] for a in axes]
        if len(roi) != 2 * len(axes):
            roi = None if cfg["ctm"] != "tf_crop_and_resize" else roi
    if cfg["ctm"] == "tf_crop_and_resize" and roi is None:
        raise node.error("coordinate_transformation_mode tf_crop_and_resize needs roi")
    n = len(axes)
    for i, (a, s, o) in enumerate(zip(axes, scl, sizes)):
        ax_roi = None if roi is None else (roi[i], roi[n + i])
        if o == x.shape[a] and math.isclose(s, 1.0) and (
                ax_roi is None or (math.isclose(ax_roi[0], 0) and math.isclose(ax_roi[1], 1))):
            continue
        if o == 0:
            x = fnp.zeros(x.shape[:a] + (0,) + x.shape[a + 1:], x.dtype)
            continue
        x = _resize_axis(x, a, o, s, ax_roi, cfg)
    return x


def _resize_out(x, y):
    dt = np.dtype(_a(x).dtype)
    if y.dtype == dt:
        return y
    if dt.kind in "iu":
        info = np.iinfo(dt)
        y = fnp.clip(fnp.rint(y), info.min, info.max)
    return y.astype(dt)


def _str_attr(node, name, default):
    v = node.attr(name, default)
    return v.decode() if isinstance(v, bytes) else v


@op("Resize", static=(1, 2, 3))
def resize(node, x, roi=None, scales=None, sizes=None):
    opset = node.opset or 19
    mode = _str_attr(node, "mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise node.error(f"mode={mode!r} is not nearest, linear or cubic")
    if opset < 11:  # Resize-10: (X, scales), asymmetric coordinates, floor
        scales, roi = roi, None
        cfg = dict(mode=mode, ctm="asymmetric", nearest_mode="floor", cubic_a=-0.75,
                   antialias=False, exclude_outside=False, extrapolation=0.0,
                   policy="stretch")
        return _resize_out(x, _resize(node, x, cfg, scales=scales))
    cfg = dict(mode=mode,
               ctm=_str_attr(node, "coordinate_transformation_mode", "half_pixel"),
               nearest_mode=_str_attr(node, "nearest_mode", "round_prefer_floor"),
               cubic_a=float(node.attr("cubic_coeff_a", -0.75)),
               antialias=bool(node.attr("antialias", 0)) if opset >= 18 else False,
               exclude_outside=bool(node.attr("exclude_outside", 0)),
               extrapolation=float(node.attr("extrapolation_value", 0.0)),
               policy=_str_attr(node, "keep_aspect_ratio_policy", "stretch")
               if opset >= 18 else "stretch")
    if cfg["ctm"] not in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                          "align_corners", "asymmetric", "tf_crop_and_resize",
                          "tf_half_pixel_for_nn"):
        raise node.error(f"coordinate_transformation_mode={cfg['ctm']!r} is not an ONNX "
                         "mode")
    if cfg["nearest_mode"] not in ("round_prefer_floor", "round_prefer_ceil", "floor",
                                   "ceil"):
        raise node.error(f"nearest_mode={cfg['nearest_mode']!r} is not an ONNX mode")
    if mode == "nearest" and cfg["antialias"]:
        raise node.error("antialias applies to linear and cubic modes, not nearest")
    axes = node.attr("axes", None) if opset >= 18 else None
    if scales is not None and np.size(scales) == 0:
        scales = None
    if sizes is not None and np.size(sizes) == 0:
        sizes = None
    if roi is not None and np.size(roi) == 0:
        roi = None
    if scales is not None and sizes is not None:
        raise node.error("only one of scales and sizes may be given")
    return _resize_out(x, _resize(node, x, cfg, scales=scales, sizes=sizes, roi=roi,
                                  axes=axes))


@op("Upsample", static=(1,))
def upsample(node, x, scales=None):
    mode = _str_attr(node, "mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        raise node.error(f"mode={mode!r} is not nearest or linear")
    if scales is None:
        scales = node.attr("scales", None)
        if scales is None:
            raise node.error("Upsample needs scales (an attribute before opset 9, an input "
                             "since)")
    cfg = dict(mode=mode, ctm="asymmetric", nearest_mode="floor", cubic_a=-0.75,
               antialias=False, exclude_outside=False, extrapolation=0.0, policy="stretch")
    return _resize_out(x, _resize(node, x, cfg, scales=np.asarray(scales, np.float64)))


# --- sampling -------------------------------------------------------------------------------

def _reflect(v, lo, hi):
    """``v`` reflected at the borders ``lo`` and ``hi`` until it lies between them."""
    rng = hi - lo
    if rng <= 0:
        return fnp.full_like(v, lo)
    below = v < lo
    d = fnp.where(below, lo - v, v - hi)
    n = fnp.floor(d / _s(v, rng))
    r = d - n * _s(v, rng)
    even = fnp.mod(n, _s(v, 2)) == 0
    from_lo, from_hi = _s(v, lo) + r, _s(v, hi) - r
    refl = fnp.where(below, fnp.where(even, from_lo, from_hi),
                     fnp.where(even, from_hi, from_lo))
    return fnp.where((v < lo) | (v > hi), refl, v)


@op("GridSample")
def grid_sample(node, x, grid):
    x, grid = _a(x), _a(grid)
    mode = _str_attr(node, "mode", "linear" if (node.opset or 22) >= 20 else "bilinear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    pad_mode = _str_attr(node, "padding_mode", "zeros")
    align = bool(node.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic"):
        raise node.error(f"mode={mode!r} is not an ONNX GridSample mode")
    if pad_mode not in ("zeros", "border", "reflection"):
        raise node.error(f"padding_mode={pad_mode!r} is not zeros, border or reflection")
    n, c = x.shape[:2]
    dims = x.shape[2:]
    nd = len(dims)
    if grid.ndim != nd + 2 or grid.shape[-1] != nd or grid.shape[0] != n:
        raise node.error(f"grid of shape {grid.shape} does not fit an input of shape "
                         f"{x.shape}")
    out_sp = grid.shape[1:-1]
    q = int(np.prod(out_sp))
    cdt = grid.dtype if _is_float(grid.dtype) else np.float32
    g = fnp.reshape(grid.astype(cdt), (n, q, nd))
    coords, borders = [], []
    for i, d in enumerate(dims):
        v = g[..., nd - 1 - i]  # the grid's last entry is the first spatial dim's
        v = (v + 1) / 2 * (d - 1) if align else ((v + 1) * d - 1) / 2
        if mode == "nearest":
            v = fnp.rint(v)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if pad_mode == "border":
            v = fnp.where((v < lo) | (v > hi), fnp.clip(v, 0, d - 1), v)
        elif pad_mode == "reflection":
            v = _reflect(v, lo, hi)
        coords.append(v)
        borders.append((lo, hi))
    # the taps of each dim: integer positions and weights
    taps = []
    for v in coords:
        if mode == "nearest":
            taps.append([(v, fnp.ones_like(v))])
            continue
        f0 = fnp.floor(v)
        t = v - f0
        if mode == "linear":
            taps.append([(f0, 1 - t), (f0 + 1, t)])
        else:
            a = -0.75
            ws = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                  ((a + 2) * t - (a + 3)) * t * t + 1,
                  ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                  ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
            taps.append([(f0 + k - 1, w) for k, w in enumerate(ws)])
    xf = fnp.reshape(x, (n, c, -1))
    strides = [int(np.prod(dims[i + 1:])) for i in range(nd)]
    out = None
    for combo in itertools.product(*taps):
        flat = None
        weight = None
        ok = None
        for i, ((pos, w), d) in enumerate(zip(combo, dims)):
            lo, hi = borders[i]
            if pad_mode == "zeros":
                inside = (pos >= 0) & (pos <= d - 1)
                ok = inside if ok is None else ok & inside
                idx = fnp.clip(pos, 0, d - 1)
            elif pad_mode == "border":
                idx = fnp.clip(pos, 0, d - 1)
            else:
                idx = fnp.clip(fnp.trunc(_reflect(pos, lo, hi)), 0, d - 1)
            idx = idx.astype(np.int64) * strides[i]
            flat = idx if flat is None else flat + idx
            weight = w if weight is None else weight * w
        if ok is not None:
            weight = fnp.where(ok, weight, fnp.zeros_like(weight))
        vals = fnp.take_along_axis(xf, fnp.broadcast_to(flat[:, None, :], (n, c, q)),
                                   axis=2)
        term = vals * weight[:, None, :].astype(x.dtype)
        out = term if out is None else out + term
    return fnp.reshape(out, (n, c) + tuple(out_sp))


@op("AffineGrid", static=(1,))
def affine_grid(node, theta, size):
    theta = _a(theta)
    size = [int(v) for v in np.asarray(size).reshape(-1)]
    align = bool(node.attr("align_corners", 0))
    sp = size[2:]
    nd = len(sp)
    if nd not in (2, 3) or theta.shape[1:] != (nd, nd + 1):
        raise node.error(f"theta of shape {theta.shape} and size {size}: ONNX AffineGrid "
                         "takes (N, 2, 3) with a 4-D size or (N, 3, 4) with a 5-D one")
    axes = []
    for d in sp:
        if align:
            a = np.linspace(-1.0, 1.0, d) if d > 1 else np.array([-1.0])
        else:
            a = (2.0 * np.arange(d) + 1) / d - 1
        axes.append(a)
    mesh = np.meshgrid(*axes, indexing="ij")  # per spatial dim, outermost first
    base = np.stack(list(mesh[::-1]) + [np.ones(sp)], axis=-1).reshape(-1, nd + 1)
    grid = fnp.einsum("qk,njk->nqj", fnp.asarray(base, theta.dtype), theta)
    return fnp.reshape(grid, (theta.shape[0],) + tuple(sp) + (nd,))


@op("DeformConv")
def deform_conv(node, x, w, offset, b=None, mask=None):
    x, w, offset = _a(x), _a(w), _a(offset)
    n, c = x.shape[:2]
    dims = x.shape[2:]
    nd = len(dims)
    kernel = list(node.attr("kernel_shape", None) or w.shape[2:])
    _k, strides, dil, pads = _spatial_attrs(node, nd, kernel)
    group = int(node.attr("group", 1))
    og = int(node.attr("offset_group", 1))
    oc = w.shape[0]
    out_sp = tuple(offset.shape[2:])
    k = int(np.prod(kernel))
    q = int(np.prod(out_sp))
    if offset.shape[1] != og * k * nd or c % og or c % group or w.shape[1] * group != c:
        raise node.error(f"offset {offset.shape}, weight {w.shape} and input {x.shape} do "
                         f"not fit group={group}, offset_group={og}, kernel {kernel}")
    # sampling positions: the regular grid of a convolution plus the learned offsets
    kk = np.stack(np.meshgrid(*[np.arange(v) for v in kernel], indexing="ij"),
                  -1).reshape(k, nd)
    oo = np.stack(np.meshgrid(*[np.arange(v) for v in out_sp], indexing="ij"),
                  -1).reshape(q, nd)
    base = (oo[None, :, :] * np.asarray(strides) - np.asarray(pads[:nd])
            + kk[:, None, :] * np.asarray(dil))  # (k, q, nd)
    base = np.moveaxis(base, -1, 1)  # (k, nd, q)
    cdt = x.dtype
    pos = fnp.reshape(offset.astype(cdt), (n, og, k, nd, q)) + fnp.asarray(base, cdt)
    xf = fnp.reshape(x, (n, og, c // og, -1))
    strides_flat = [int(np.prod(dims[i + 1:])) for i in range(nd)]
    sampled = None
    lows = [fnp.floor(pos[:, :, :, i, :]) for i in range(nd)]
    for corner in itertools.product((0, 1), repeat=nd):
        flat, weight, ok = None, None, None
        for i, bit in enumerate(corner):
            p = pos[:, :, :, i, :]
            idx = lows[i] + bit
            wt = 1 - fnp.abs(p - idx)
            inside = (idx >= 0) & (idx <= dims[i] - 1)
            ok = inside if ok is None else ok & inside
            ii = fnp.clip(idx, 0, dims[i] - 1).astype(np.int64) * strides_flat[i]
            flat = ii if flat is None else flat + ii
            weight = wt if weight is None else weight * wt
        weight = fnp.where(ok, weight, fnp.zeros_like(weight))  # (n, og, k, q)
        flat = fnp.reshape(flat, (n, og, 1, k * q))
        vals = fnp.take_along_axis(xf, fnp.broadcast_to(flat, (n, og, c // og, k * q)),
                                   axis=3)
        term = fnp.reshape(vals, (n, og, c // og, k, q)) * weight[:, :, None]
        sampled = term if sampled is None else sampled + term
    if mask is not None:
        sampled = sampled * fnp.reshape(_a(mask).astype(cdt), (n, og, 1, k, q))
    cols = fnp.reshape(sampled, (n, group, c // group, k, q))
    wg = fnp.reshape(w.astype(cdt), (group, oc // group, c // group, k))
    y = fnp.einsum("ngckq,gock->ngoq", cols, wg)
    y = fnp.reshape(y, (n, oc) + out_sp)
    if b is not None:
        y = y + _per_channel(_a(b).astype(cdt), y.ndim)
    return y


def _roi_axis(v, size):
    """RoiAlign's bilinear taps along one axis: low and high indices and their weights,
    and whether the sample lies near enough to the input to count."""
    ok = (v >= -1.0) & (v <= size)
    v = fnp.maximum(v, _s(v, 0))
    lo = fnp.floor(v)
    at_end = lo >= size - 1
    lo = fnp.where(at_end, _s(v, size - 1), lo)
    hi = fnp.where(at_end, lo, lo + 1)
    v = fnp.where(at_end, lo, v)
    frac = v - lo
    return lo.astype(np.int64), hi.astype(np.int64), 1 - frac, frac, ok


def _roi_align(x, rois, bidx, out_h, out_w, gh, gw, scale, half_pixel, mode):
    h, w = x.shape[2:]
    c = x.shape[1]
    r = rois.shape[0]
    off = 0.5 if half_pixel else 0.0
    rois = rois.astype(x.dtype) * _s(x, scale) - _s(x, off)
    x0, y0, x1, y1 = (rois[:, i] for i in range(4))
    rw, rh = x1 - x0, y1 - y0
    if not half_pixel:
        rw, rh = fnp.maximum(rw, _s(x, 1)), fnp.maximum(rh, _s(x, 1))
    bh, bw = rh / out_h, rw / out_w
    fy = ((np.arange(out_h)[:, None] + (np.arange(gh)[None, :] + 0.5) / gh)).reshape(-1)
    fx = ((np.arange(out_w)[:, None] + (np.arange(gw)[None, :] + 0.5) / gw)).reshape(-1)
    ys = y0[:, None] + bh[:, None] * fnp.asarray(fy, x.dtype)  # (r, sy)
    xs = x0[:, None] + bw[:, None] * fnp.asarray(fx, x.dtype)  # (r, sx)
    ylo, yhi, wyl, wyh, oky = _roi_axis(ys, h)
    xlo, xhi, wxl, wxh, okx = _roi_axis(xs, w)
    ok = oky[:, :, None] & okx[:, None, :]
    xr = fnp.take(x, bidx.astype(np.int64), axis=0)  # (r, c, h, w)
    sy, sx = ys.shape[1], xs.shape[1]
    corners = []
    for yi, wy in ((ylo, wyl), (yhi, wyh)):
        rows = fnp.take_along_axis(xr, fnp.broadcast_to(yi[:, None, :, None], (r, c, sy, w)),
                                   axis=2)
        for xi, wx in ((xlo, wxl), (xhi, wxh)):
            v = fnp.take_along_axis(rows, fnp.broadcast_to(xi[:, None, None, :],
                                                           (r, c, sy, sx)), axis=3)
            wt = fnp.where(ok, wy[:, :, None] * wx[:, None, :], _s(x, 0))
            corners.append(v * wt[:, None])
    shape = (r, c, out_h, gh, out_w, gw)
    if mode == "avg":
        s = corners[0] + corners[1] + corners[2] + corners[3]
        return fnp.sum(fnp.reshape(s, shape), axis=(3, 5)) / _s(x, max(gh * gw, 1))
    m = fnp.maximum(fnp.maximum(corners[0], corners[1]), fnp.maximum(corners[2], corners[3]))
    return fnp.max(fnp.reshape(m, shape), axis=(3, 5))


@op("RoiAlign")
def roi_align(node, x, rois, batch_indices):
    x, rois, bidx = _a(x), _a(rois), _a(batch_indices)
    mode = _str_attr(node, "mode", "avg")
    if mode not in ("avg", "max"):
        raise node.error(f"mode={mode!r} is not avg or max")
    ctm = _str_attr(node, "coordinate_transformation_mode",
                    "half_pixel" if (node.opset or 22) >= 16 else "output_half_pixel")
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise node.error(f"coordinate_transformation_mode={ctm!r} is not half_pixel or "
                         "output_half_pixel")
    out_h, out_w = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    ratio = int(node.attr("sampling_ratio", 0))
    scale = float(node.attr("spatial_scale", 1.0))
    half = ctm == "half_pixel"
    if ratio > 0:
        return _roi_align(x, rois, bidx, out_h, out_w, ratio, ratio, scale, half, mode)
    # adaptive sampling: ceil(roi size / output size) samples per bin, per roi
    kr = known(rois)
    if kr is None:
        raise node.error("sampling_ratio=0 takes a number of samples from each roi's size, "
                         "so the rois must be known when the model is traced; give "
                         "sampling_ratio > 0", StaticInputError)
    kr = kr.astype(np.float64) * scale - (0.5 if half else 0.0)
    outs = []
    for i in range(kr.shape[0]):
        rw, rh = kr[i, 2] - kr[i, 0], kr[i, 3] - kr[i, 1]
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh, gw = int(np.ceil(rh / out_h)), int(np.ceil(rw / out_w))
        if gh <= 0 or gw <= 0:  # an empty roi samples nothing
            outs.append(fnp.zeros((1, x.shape[1], out_h, out_w), x.dtype))
            continue
        outs.append(_roi_align(x, rois[i:i + 1], bidx[i:i + 1], out_h, out_w, gh, gw,
                               scale, half, mode))
    return fnp.concatenate(outs, 0) if outs else fnp.zeros((0, x.shape[1], out_h, out_w),
                                                            x.dtype)
