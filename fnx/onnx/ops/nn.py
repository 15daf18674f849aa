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

import math

import numpy as np

from ... import lax
from ... import numpy as fnp
from ..graph import np_dtype, op


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
    nd = x.ndim
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
    scale, b = _a(scale), _a(b)
    mean, var = _a(mean), _a(var)
    if not training:
        inv = fnp.sqrt(_per_channel(var, nd).astype(dt) + _s(x, eps))
        y = (x - _per_channel(mean, nd).astype(dt)) / inv
        return y * _per_channel(scale, nd).astype(dt) + _per_channel(b, nd).astype(dt)
    axes = (0,) + tuple(range(2, nd))
    bm = fnp.mean(x, axis=axes)
    bv = fnp.mean(fnp.square(x - fnp.reshape(bm, (-1,) + (1,) * (nd - 2))), axis=axes)
    y = (x - _per_channel(bm, nd)) / fnp.sqrt(_per_channel(bv, nd) + _s(x, eps))
    y = y * _per_channel(scale, nd).astype(dt) + _per_channel(b, nd).astype(dt)
    mom = node.attr("momentum", 0.9)
    run_mean = mean * _s(mean, mom) + bm.astype(mean.dtype) * _s(mean, 1 - mom)
    run_var = var * _s(var, mom) + bv.astype(var.dtype) * _s(var, 1 - mom)
    if node.opset is not None and node.opset >= 14:
        return y, run_mean, run_var
    return y, run_mean, run_var, bm, bv  # opset < 14: saved mean and variance too


def _stash(node, x):
    """The dtype normalizations compute in (stash_type: 1 is float32)."""
    st = node.attr("stash_type", 1)
    try:
        return np_dtype(st)
    except Exception:  # noqa: BLE001
        raise node.error(f"stash_type={st} is not a float type fnx computes in") from None


@op("LayerNormalization")
def layer_normalization(node, x, scale, b=None):
    x = _a(x)
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    eps = node.attr("epsilon", 1e-5)
    cdt = _stash(node, x)
    xc = x.astype(cdt)
    axes = tuple(range(axis, x.ndim))
    mean = fnp.mean(xc, axis=axes, keepdims=True)
    d = xc - mean
    var = fnp.mean(d * d, axis=axes, keepdims=True)
    inv = fnp.asarray(1, cdt) / fnp.sqrt(var + fnp.asarray(eps, cdt))
    y = (d * inv).astype(x.dtype) * _a(scale).astype(x.dtype)
    if b is not None:
        y = y + _a(b).astype(x.dtype)
    return y, mean, inv


@op("RMSNormalization")
def rms_normalization(node, x, scale):
    x = _a(x)
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    eps = node.attr("epsilon", 1e-5)
    cdt = _stash(node, x)
    xc = x.astype(cdt)
    ms = fnp.mean(xc * xc, axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xc / fnp.sqrt(ms + fnp.asarray(eps, cdt))
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
