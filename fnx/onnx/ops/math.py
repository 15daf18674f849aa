"""Linear algebra and reductions among the ONNX operators: MatMul, Gemm, Einsum, the
Reduce* family, softmaxes, arg-reductions, cumulative sums, TopK, quantization, losses
and signal windows."""
from __future__ import annotations

import math

import numpy as np

from ... import lax
from ... import numpy as fnp
from ...nn import functions as nnf
from ..graph import np_dtype, op


def _a(x):
    return fnp.asarray(x)


_HALF = (np.dtype(np.float16), np.dtype(fnp.bfloat16))


def _acc_dtype(dtype):
    """The dtype to accumulate sums of ``dtype`` in: float32 for 16-bit floats (as the
    ONNX reference's NumPy and onnxruntime do), else the dtype itself."""
    return np.dtype(np.float32) if np.dtype(dtype) in _HALF else np.dtype(dtype)


def _is_int(dtype):
    return np.dtype(dtype).kind in "iu"


def _is_bool(dtype):
    return np.dtype(dtype).kind == "b"


# --- products ----------------------------------------------------------------------------

def _matmul(a, b):
    dt = a.dtype
    acc = _acc_dtype(dt)
    if acc != dt:
        return fnp.matmul(a.astype(acc), b.astype(acc)).astype(dt)
    return fnp.matmul(a, b)


@op("MatMul")
def matmul(node, a, b):
    return _matmul(_a(a), _a(b))


@op("Gemm")
def gemm(node, a, b, c=None):
    a, b = _a(a), _a(b)
    if node.attr("transA", 0):
        a = fnp.swapaxes(a, -1, -2) if a.ndim >= 2 else a
    if node.attr("transB", 0):
        b = fnp.swapaxes(b, -1, -2) if b.ndim >= 2 else b
    if a.ndim != 2 or b.ndim != 2:
        raise node.error(f"A and B must be matrices (got ranks {a.ndim} and {b.ndim})")
    dt = a.dtype
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    y = _matmul(a, b)
    if alpha != 1.0:
        y = (y * fnp.asarray(alpha, _acc_dtype(dt) if not _is_int(dt) else np.float64)
             ).astype(dt)
    if c is not None and beta != 0.0:
        c = _a(c)
        if node.opset is not None and node.opset < 7 and not node.attr("broadcast", 0):
            if tuple(c.shape) != tuple(y.shape):
                raise node.error(f"C of shape {tuple(c.shape)} needs broadcast=1 to add to "
                                 f"a result of shape {tuple(y.shape)}")
        if beta != 1.0:
            c = (c * fnp.asarray(beta, _acc_dtype(dt) if not _is_int(dt) else np.float64)
                 ).astype(dt)
        y = y + c.astype(dt)
    return y


@op("Einsum")
def einsum(node, *inputs):
    eq = node.attr("equation").replace(" ", "")
    xs = [_a(x) for x in inputs]
    dt = xs[0].dtype if xs else np.dtype(np.float32)
    acc = _acc_dtype(dt)
    if acc != dt:
        return fnp.einsum(eq, *[x.astype(acc) for x in xs]).astype(dt)
    return fnp.einsum(eq, *xs)


def _rowwise_zero_point(zp, ndim):
    """A zero point of A: a vector of M per-row values applies along the rows."""
    zp = _a(zp).astype(np.int32)
    if zp.ndim == 1 and ndim >= 2:
        zp = zp[:, None]
    return zp


@op("MatMulInteger")
def matmul_integer(node, a, b, a_zero_point=None, b_zero_point=None):
    a, b = _a(a).astype(np.int32), _a(b).astype(np.int32)
    if a_zero_point is not None:
        a = a - _rowwise_zero_point(a_zero_point, a.ndim)
    if b_zero_point is not None:
        b = b - _a(b_zero_point).astype(np.int32)
    return fnp.matmul(a, b)


@op("Det")
def det(node, x):
    x = _a(x)
    acc = _acc_dtype(x.dtype)
    return fnp.linalg.det(x.astype(acc)).astype(x.dtype)


# --- reductions ----------------------------------------------------------------------------

def _reduce_axes(node, x, axes_input):
    """The axes a Reduce* node reduces (a tuple; () for none), from its ``axes`` input
    (ReduceSum from opset 13, the others from 18) or attribute."""
    axes = axes_input
    if axes is None and node.has_attr("axes"):
        axes = node.attr("axes")
    if axes is not None:
        axes = [int(v) for v in np.asarray(axes).reshape(-1)]
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return ()
        return tuple(range(x.ndim))
    out = []
    for ax in axes:
        if not -x.ndim <= ax < max(x.ndim, 1):
            raise node.error(f"axis {ax} is out of range for a tensor of rank {x.ndim}")
        out.append(ax % x.ndim if x.ndim else 0)
    return tuple(sorted(set(out)))


def _out_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _empty(shape, axes):
    return any(shape[i] == 0 for i in axes)


def _sum(x, axes, keepdims, dtype):
    """A sum of ``x`` over ``axes`` in ``dtype``'s accumulator, as ``dtype``."""
    acc = _acc_dtype(dtype)
    if _is_bool(x.dtype):
        x = x.astype(np.int64)
    if not axes:
        return x.astype(dtype)
    return fnp.sum(x.astype(acc), axis=axes, keepdims=bool(keepdims), dtype=acc).astype(dtype)


def _keepdims(node):
    return bool(node.attr("keepdims", 1))


def _identity(node, x, axes, keepdims, value):
    shape = _out_shape(tuple(x.shape), axes, keepdims)
    return fnp.full(shape, value, x.dtype)


def _reducer(name, fn, static_from):
    @op(name, static=(1,))
    def handler(node, data, axes=None):
        x = _a(data)
        if node.opset is not None and node.opset < static_from:
            axes = None
        ax = _reduce_axes(node, x, axes)
        return fn(node, x, ax, _keepdims(node))
    handler.__name__ = name
    return handler


def _reduce_sum(node, x, axes, keep):
    return _sum(x, axes, keep, x.dtype)


def _reduce_sum_square(node, x, axes, keep):
    if _is_bool(x.dtype):
        return _sum(x, axes, keep, x.dtype)
    acc = _acc_dtype(x.dtype)
    y = x.astype(acc)
    return _sum(y * y, axes, keep, x.dtype)


def _reduce_l1(node, x, axes, keep):
    acc = _acc_dtype(x.dtype)
    return _sum(fnp.abs(x.astype(acc)), axes, keep, x.dtype)


def _reduce_l2(node, x, axes, keep):
    acc = _acc_dtype(x.dtype) if not _is_int(x.dtype) else np.dtype(np.float64)
    y = x.astype(acc)
    s = _sum(y * y, axes, keep, acc)
    if _is_int(x.dtype):
        return fnp.floor(fnp.sqrt(s)).astype(x.dtype)
    return fnp.sqrt(s).astype(x.dtype)


def _reduce_mean(node, x, axes, keep):
    n = math.prod(x.shape[i] for i in axes) if axes else 1
    if _is_int(x.dtype):
        s = _sum(x, axes, keep, x.dtype)
        return (s.astype(np.float64) / n).astype(x.dtype)  # truncates, as NumPy's
    acc = _acc_dtype(x.dtype)
    s = _sum(x, axes, keep, acc)
    return (s / fnp.asarray(n, acc)).astype(x.dtype)


def _reduce_log_sum(node, x, axes, keep):
    if _empty(tuple(x.shape), axes):
        return _identity(node, x, axes, keep, -np.inf)
    acc = _acc_dtype(x.dtype)
    return fnp.log(_sum(x, axes, keep, acc)).astype(x.dtype)


def _reduce_log_sum_exp(node, x, axes, keep):
    if _empty(tuple(x.shape), axes):
        return _identity(node, x, axes, keep, -np.inf)
    if not axes:
        return x
    if _is_int(x.dtype):
        y = x.astype(np.float64)
        return nnf.logsumexp(y, axis=axes, keepdims=keep).astype(x.dtype)
    acc = _acc_dtype(x.dtype)
    return nnf.logsumexp(x.astype(acc), axis=axes, keepdims=keep).astype(x.dtype)


def _reduce_prod(node, x, axes, keep):
    if not axes:
        return x
    if _is_bool(x.dtype):
        return fnp.all(x, axis=axes, keepdims=keep)
    acc = _acc_dtype(x.dtype)
    return fnp.prod(x.astype(acc), axis=axes, keepdims=keep, dtype=acc).astype(x.dtype)


def _extreme(is_max):
    def reduce(node, x, axes, keep):
        if not axes:
            return x
        dt = x.dtype
        if _empty(tuple(x.shape), axes):
            if _is_bool(dt):
                value = not is_max
            elif _is_int(dt):
                info = np.iinfo(dt)
                value = info.min if is_max else info.max
            else:
                value = -np.inf if is_max else np.inf
            return _identity(node, x, axes, keep, value)
        if _is_bool(dt):
            f = fnp.any if is_max else fnp.all
            return f(x, axis=axes, keepdims=keep)
        f = fnp.max if is_max else fnp.min
        return f(x, axis=axes, keepdims=keep)
    return reduce


_reducer("ReduceSum", _reduce_sum, 13)
_reducer("ReduceSumSquare", _reduce_sum_square, 18)
_reducer("ReduceL1", _reduce_l1, 18)
_reducer("ReduceL2", _reduce_l2, 18)
_reducer("ReduceMean", _reduce_mean, 18)
_reducer("ReduceLogSum", _reduce_log_sum, 18)
_reducer("ReduceLogSumExp", _reduce_log_sum_exp, 18)
_reducer("ReduceProd", _reduce_prod, 18)
_reducer("ReduceMax", _extreme(True), 18)
_reducer("ReduceMin", _extreme(False), 18)


def _axis(node, ndim, axis):
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise node.error(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim if ndim else 0


def _arg_reducer(name, is_max):
    @op(name)
    def handler(node, data):
        x = _a(data)
        axis = _axis(node, x.ndim, int(node.attr("axis", 0)))
        keep = bool(node.attr("keepdims", 1))
        f = fnp.argmax if is_max else fnp.argmin
        if _is_bool(x.dtype):
            x = x.astype(np.int8)
        if node.attr("select_last_index", 0):
            n = x.shape[axis]
            idx = f(fnp.flip(x, axis), axis=axis, keepdims=keep).astype(np.int64)
            return np.int64(n - 1) - idx
        return f(x, axis=axis, keepdims=keep).astype(np.int64)
    handler.__name__ = name
    return handler


_arg_reducer("ArgMax", True)
_arg_reducer("ArgMin", False)


# --- softmaxes -----------------------------------------------------------------------------

def _along_axis(node, x, fn):
    """``fn(x2, axis)`` with the operator's axis convention: before opset 13 the input is
    seen as a matrix (the dims before ``axis`` by those from it), from 13 on ``fn`` runs
    along the one axis."""
    legacy = node.opset is not None and node.opset < 13
    axis = int(node.attr("axis", 1 if legacy else -1))
    if x.ndim == 0:
        return fn(x.reshape(1), 0).reshape(())
    axis = _axis(node, x.ndim, axis)
    if not legacy:
        return fn(x, axis)
    shape = tuple(x.shape)
    rows = math.prod(shape[:axis])
    y = fn(x.reshape(rows, math.prod(shape[axis:])), 1)
    return y.reshape(shape)


def _float_fn(fn):
    def run(x, axis):
        acc = _acc_dtype(x.dtype)
        return fn(x.astype(acc), axis=axis).astype(x.dtype)
    return run


@op("Softmax")
def softmax(node, x):
    return _along_axis(node, _a(x), _float_fn(nnf.softmax))


@op("LogSoftmax")
def log_softmax(node, x):
    return _along_axis(node, _a(x), _float_fn(nnf.log_softmax))


def _hardmax(x, axis):
    idx = fnp.argmax(x, axis=axis)
    return nnf.one_hot(idx, x.shape[axis], dtype=x.dtype, axis=axis)


@op("Hardmax")
def hardmax(node, x):
    return _along_axis(node, _a(x), _hardmax)


# --- cumulative ----------------------------------------------------------------------------

def _cumulative(name, fn, identity):
    @op(name, static=(1,))
    def handler(node, x, axis):
        x = _a(x)
        a = np.asarray(axis).reshape(-1)
        if a.size != 1:
            raise node.error("the axis input must be a scalar")
        ax = _axis(node, x.ndim, int(a[0]))
        reverse, exclusive = node.attr("reverse", 0), node.attr("exclusive", 0)
        dt = x.dtype
        y = fnp.flip(x, ax) if reverse else x
        if exclusive:
            pad = [(0, 0)] * x.ndim
            pad[ax] = (1, 0)
            n = y.shape[ax]
            y = fnp.pad(y, pad, constant_values=identity)
            y = y[(slice(None),) * ax + (slice(0, n),)]  # shifted by one: exclusive
        acc = _acc_dtype(dt)
        y = fn(y.astype(acc), axis=ax).astype(dt)
        return fnp.flip(y, ax) if reverse else y
    handler.__name__ = name
    return handler


_cumulative("CumSum", fnp.cumsum, 0)
_cumulative("CumProd", fnp.cumprod, 1)


# --- TopK ----------------------------------------------------------------------------------

@op("TopK", static=(1,))
def top_k(node, x, k=None):
    x = _a(x)
    if node.opset is not None and node.opset < 10:
        k = node.attr("k")
    if k is None:
        raise node.error("the K input is required")
    k = int(np.asarray(k).reshape(-1)[0])
    axis = _axis(node, x.ndim, int(node.attr("axis", -1)))
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise node.error(f"K = {k} is out of range for an axis of length {n}")
    largest = bool(node.attr("largest", 1))
    key = x.astype(np.int8) if _is_bool(x.dtype) else x
    # stable in both directions: equal values keep their order, the lower index first
    idx = fnp.argsort(key, axis=axis, stable=True, descending=largest)
    idx = fnp.take(idx, fnp.arange(k), axis=axis)
    values = fnp.take_along_axis(x, idx, axis=axis)
    return values, idx.astype(np.int64)


# --- quantization --------------------------------------------------------------------------

_QRANGE = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max)
           for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32)}


def _quant_param(node, v, shape, axis, block):
    """A scale or zero point shaped to broadcast against an input of ``shape``."""
    v = _a(v)
    if v.ndim == 0:
        return v
    if v.size == 1 and not block:
        return v.reshape(())
    axis = _axis(node, len(shape), axis)
    if not block:
        if v.ndim != 1 or v.shape[0] != shape[axis]:
            raise node.error(f"a per-axis scale or zero point must be a vector of length "
                             f"{shape[axis]} (got shape {tuple(v.shape)})")
        dims = [1] * len(shape)
        dims[axis] = v.shape[0]
        return v.reshape(dims)
    if block <= 0:
        raise node.error(f"block_size must be positive (got {block})")
    v = fnp.repeat(v, block, axis=axis)
    if v.shape[axis] != shape[axis]:
        v = fnp.take(v, fnp.arange(shape[axis]), axis=axis)
    if tuple(v.shape) != tuple(shape):
        raise node.error("blocked quantization needs a scale of the input's shape except "
                         "along the axis (ceil(D / block_size) there)")
    return v


def _quant_dtype(node, zero_point):
    out = int(node.attr("output_dtype", 0) or 0)
    if zero_point is not None:
        dt = np.dtype(_a(zero_point).dtype) if not isinstance(zero_point, np.ndarray) \
            else zero_point.dtype
        if out and np_dtype(out) != dt:
            raise node.error("output_dtype differs from the zero point's type")
    elif out:
        dt = np_dtype(out)
    else:
        dt = np.dtype(np.uint8)
    if dt not in _QRANGE:
        raise node.error(f"quantizing to {dt} is not supported (fnx has no float8, int4 "
                         "or int2 types)")
    return dt


@op("QuantizeLinear")
def quantize_linear(node, x, y_scale, y_zero_point=None):
    x = _a(x)
    dt = _quant_dtype(node, y_zero_point)
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0) or 0)
    shape = tuple(x.shape)
    scale = _quant_param(node, y_scale, shape, axis, block)
    precision = int(node.attr("precision", 0) or 0)
    p = np_dtype(precision) if precision else fnp.result_type(x.dtype, scale.dtype)
    # round half to even in the division's precision, then saturate in float64 (no
    # integer overflow)
    q = fnp.round(x.astype(p) / scale.astype(p)).astype(np.float64)
    if y_zero_point is not None:
        zp = _quant_param(node, y_zero_point, shape, axis, block)
        q = q + zp.astype(np.float64)
    lo, hi = _QRANGE[dt]
    return fnp.clip(q, lo, hi).astype(dt)


@op("DequantizeLinear")
def dequantize_linear(node, x, x_scale, x_zero_point=None):
    x = _a(x)
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0) or 0)
    shape = tuple(x.shape)
    scale = _quant_param(node, x_scale, shape, axis, block)
    out = int(node.attr("output_dtype", 0) or 0)
    odt = np_dtype(out) if out else scale.dtype
    wide = np.int64 if x.dtype.itemsize >= 4 else np.int32
    dx = x.astype(wide)
    if x_zero_point is not None:
        dx = dx - _quant_param(node, x_zero_point, shape, axis, block).astype(wide)
    # in float32 (float64 for 32-bit x, whose differences float32 cannot hold), or the
    # scale's dtype when that is wider
    cdt = fnp.result_type(np.float64 if x.dtype.itemsize >= 4 else np.float32, scale.dtype)
    return (dx.astype(cdt) * scale.astype(cdt)).astype(odt)


@op("DynamicQuantizeLinear")
def dynamic_quantize_linear(node, x):
    x = _a(x)
    f = np.float32
    xf = x.astype(f)
    zero = fnp.zeros((), f)
    hi = fnp.maximum(zero, fnp.max(xf)) if x.size else zero
    lo = fnp.minimum(zero, fnp.min(xf)) if x.size else zero
    span = hi - lo
    scale = fnp.where(span == 0, fnp.asarray(1.0, f), span) / fnp.asarray(255.0, f)
    zp = fnp.round(fnp.clip(fnp.asarray(0.0, f) - lo / scale, 0, 255))
    y = fnp.clip(fnp.round(xf / scale) + zp, 0, 255)
    return y.astype(np.uint8), scale.astype(x.dtype), zp.astype(np.uint8)


@op("QLinearMatMul")
def qlinear_matmul(node, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                   y_zero_point=None):
    a, b = _a(a), _a(b)
    ai, bi = a.astype(np.int32), b.astype(np.int32)
    if a_zero_point is not None:
        ai = ai - _rowwise_zero_point(a_zero_point, ai.ndim)
    if b_zero_point is not None:
        bi = bi - _a(b_zero_point).astype(np.int32)
    c = fnp.matmul(ai, bi)
    a_scale, b_scale, y_scale = _a(a_scale), _a(b_scale), _a(y_scale)
    sdt = fnp.result_type(a_scale.dtype, b_scale.dtype, y_scale.dtype)
    if a_scale.ndim == 1 and a_scale.size > 1 and ai.ndim >= 2:
        a_scale = a_scale[:, None]
    factor = a_scale.astype(sdt) * b_scale.astype(sdt) / y_scale.astype(sdt)
    d = c.astype(np.float64) * factor.astype(np.float64)
    if y_zero_point is not None:
        zp = _a(y_zero_point)
        d = d + zp.astype(np.float64)
        dt = zp.dtype
    else:
        dt = a.dtype
    lo, hi = _QRANGE[np.dtype(dt)]
    return fnp.clip(fnp.round(d), lo, hi).astype(dt)


# --- losses --------------------------------------------------------------------------------

def _nll(node, logp, target, weight):
    """NegativeLogLikelihoodLoss of log-probabilities ``logp`` (N, C, d1, ...) at the
    classes ``target`` (N, d1, ...): per element ``-logp[n, t, ...] * weight[t]``, 0 where
    ``t`` is ``ignore_index``; reduced by ``reduction`` ("mean" divides by the sum of the
    weights used)."""
    if logp.ndim < 2:
        raise node.error(f"the input must have rank 2 or more (got {logp.ndim})")
    reduction = node.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise node.error(f"reduction {reduction!r} is not one of none, sum, mean")
    ignore = node.attr("ignore_index", None)
    dt = logp.dtype
    acc = _acc_dtype(dt)
    c = logp.shape[1]
    t = _a(target).astype(np.int64)
    safe = fnp.clip(t, 0, c - 1)
    picked = fnp.take_along_axis(logp.astype(acc), fnp.expand_dims(safe, 1), axis=1)
    loss = -fnp.squeeze(picked, 1)
    w = None
    if weight is not None:
        w = fnp.take(_a(weight).astype(acc), safe, axis=0)
    if ignore is not None:
        keep = t != int(ignore)
        w = fnp.where(keep, fnp.ones((), acc) if w is None else w, fnp.zeros((), acc))
    if w is not None:
        loss = loss * w
    if reduction == "none":
        return loss.astype(dt)
    total = fnp.sum(loss)
    if reduction == "sum":
        return total.astype(dt)
    if w is None:
        return (total / fnp.asarray(loss.size, acc)).astype(dt)
    return (total / fnp.sum(w)).astype(dt)


@op("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(node, x, target, weight=None):
    return _nll(node, _a(x), target, weight)


@op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(node, scores, labels, weights=None):
    x = _a(scores)
    if x.ndim < 2:
        raise node.error(f"the scores must have rank 2 or more (got {x.ndim})")
    acc = _acc_dtype(x.dtype)
    logp = nnf.log_softmax(x.astype(acc), axis=1)
    loss = _nll(node, logp, labels, weights)
    return loss, logp.astype(x.dtype)


# --- signal processing ---------------------------------------------------------------------

def _scalar(node, v, name):
    v = np.asarray(v).reshape(-1)
    if v.size != 1:
        raise node.error(f"{name} must be a scalar (got {v.size} values)")
    return v[0]


def _window(name, fn):
    @op(name, static=(0,))
    def handler(node, size):
        n = int(_scalar(node, size, "size"))
        dt = np_dtype(int(node.attr("output_datatype", 1)))
        denom = n if node.attr("periodic", 1) else n - 1
        k = np.arange(n, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = fn(2 * np.pi * k / denom) if n else np.zeros(0)
        return np.asarray(w).astype(dt)
    handler.__name__ = name
    return handler


_window("HannWindow", lambda t: 0.5 - 0.5 * np.cos(t))
_window("HammingWindow", lambda t: 25 / 46 - (1 - 25 / 46) * np.cos(t))
_window("BlackmanWindow", lambda t: 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t))


@op("MelWeightMatrix", static=(0, 1, 2, 3, 4))
def mel_weight_matrix(node, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                      upper_edge_hertz):
    bins = int(_scalar(node, num_mel_bins, "num_mel_bins"))
    n_fft = int(_scalar(node, dft_length, "dft_length"))
    rate = _scalar(node, sample_rate, "sample_rate")
    lo = float(_scalar(node, lower_edge_hertz, "lower_edge_hertz"))
    hi = float(_scalar(node, upper_edge_hertz, "upper_edge_hertz"))
    dt = np_dtype(int(node.attr("output_datatype", 1)))

    def to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    # num_mel_bins + 2 points spaced evenly in mel from the lower edge, as the ONNX
    # reference does (a step of the mel span over num_mel_bins + 2)
    lo_mel, hi_mel = to_mel(lo), to_mel(hi)
    mels = lo_mel + np.arange(bins + 2) * ((hi_mel - lo_mel) / (bins + 2))
    hz = 700.0 * (np.power(10.0, mels / 2595.0) - 1.0)
    edges = np.floor((n_fft + 1) * hz / rate).astype(np.int64)
    out = np.zeros((n_fft // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1.0
        else:
            j = np.arange(left, center + 1)
            out[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            out[j, i] = (right - j) / (right - center)
    return out.astype(dt)


def _to_complex(x):
    """A signal in ONNX's real layout (a trailing dim of 1: real, 2: real and imaginary)
    as a complex array without that dim."""
    if x.shape[-1] == 1:
        return fnp.squeeze(x, -1), False
    if x.shape[-1] != 2:
        raise ValueError("the last dim of a DFT signal must be 1 (real) or 2 (complex)")
    re, im = x[..., 0], x[..., 1]
    return re + 1j * im, True


def _from_complex(y, dtype):
    return fnp.stack([fnp.real(y), fnp.imag(y)], axis=-1).astype(dtype)


def _dft(x, n, axis, inverse, onesided):
    dt = x.dtype
    cdt = np.complex128 if dt == np.float64 else np.complex64
    sig, is_complex = _to_complex(x.astype(np.float64 if dt == np.float64 else np.float32))
    if inverse:
        if onesided:
            return fnp.expand_dims(fnp.fft.irfft(sig.astype(cdt), n=n, axis=axis), -1).astype(dt)
        return _from_complex(fnp.fft.ifft(sig.astype(cdt), n=n, axis=axis), dt)
    if onesided and not is_complex:
        return _from_complex(fnp.fft.rfft(sig, n=n, axis=axis), dt)
    y = fnp.fft.fft(sig.astype(cdt), n=n, axis=axis)
    if onesided:
        y = fnp.take(y, fnp.arange(n // 2 + 1), axis=axis)
    return _from_complex(y, dt)


@op("DFT", static=(1, 2))
def dft(node, x, dft_length=None, axis=None):
    x = _a(x)
    if node.opset is not None and node.opset < 20:
        ax = int(node.attr("axis", 1))
    else:
        ax = -2 if axis is None else int(_scalar(node, axis, "axis"))
    if x.ndim < 2:
        raise node.error(f"the input must have rank 2 or more (got {x.ndim})")
    ax = _axis(node, x.ndim, ax)
    if ax == x.ndim - 1:
        raise node.error("the DFT axis cannot be the last (real/imaginary) dim")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if dft_length is not None and np.asarray(dft_length).size:
        n = int(_scalar(node, dft_length, "dft_length"))
    elif inverse and onesided:
        n = 2 * (x.shape[ax] - 1)
    else:
        n = x.shape[ax]
    if onesided and not inverse and x.shape[-1] == 2:
        raise node.error("onesided=1 needs a real signal (a last dim of 1)")
    return _dft(x, n, ax, inverse, onesided)


@op("STFT", static=(1, 3))
def stft(node, signal, frame_step, window=None, frame_length=None):
    x = _a(signal)
    if x.ndim != 3:
        raise node.error(f"the signal must be [batch, length, 1 or 2] (got rank {x.ndim})")
    step = int(_scalar(node, frame_step, "frame_step"))
    if frame_length is not None and np.asarray(frame_length).size:
        flen = int(_scalar(node, frame_length, "frame_length"))
    elif window is not None:
        flen = int(window.shape[0])
    else:
        flen = x.shape[1]
    wlen = int(window.shape[0]) if window is not None else flen
    onesided = bool(node.attr("onesided", 1))
    if onesided and x.shape[-1] == 2:
        raise node.error("onesided=1 needs a real signal (a last dim of 1)")
    frames = 1 + (x.shape[1] - flen) // step
    if frames < 1 or step < 1:
        raise node.error(f"no frame of length {flen} fits a signal of length {x.shape[1]}")
    need = (frames - 1) * step + wlen
    if need > x.shape[1]:
        x = fnp.pad(x, [(0, 0), (0, need - x.shape[1]), (0, 0)])
    idx = np.arange(frames)[:, None] * step + np.arange(wlen)[None, :]
    framed = fnp.take(x, idx, axis=1)  # [batch, frames, wlen, 1 or 2]
    if window is not None:
        framed = framed * _a(window).astype(x.dtype)[:, None]
    return _dft(framed, flen, 2, False, onesided)


# --- integer convolutions ----------------------------------------------------------------

def _int_conv_geometry(node, x, w):
    """Strides, dilations and (begin, end) pads of a ConvInteger / QLinearConv from its
    attributes (Conv's conventions: ``pads`` is ``[x1_begin, x2_begin, ..., x1_end,
    x2_end, ...]``, ``auto_pad`` SAME_* makes the output ``ceil(in / stride)``)."""
    nsp = x.ndim - 2
    kernel = list(w.shape[2:])
    if node.has_attr("kernel_shape") and list(node.attr("kernel_shape")) != kernel:
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the "
                         f"weight's spatial shape {kernel}")
    strides = [int(s) for s in (node.attr("strides", None) or [1] * nsp)]
    dil = [int(d) for d in (node.attr("dilations", None) or [1] * nsp)]
    if len(strides) != nsp or len(dil) != nsp:
        raise node.error(f"strides {strides} and dilations {dil} do not fit {nsp} spatial "
                         "dimensions")
    auto_pad = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad == "VALID":
        return strides, dil, [(0, 0)] * nsp
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for n, k, s, d in zip(x.shape[2:], kernel, strides, dil):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            lo, hi = total // 2, total - total // 2
            pads.append((lo, hi) if auto_pad == "SAME_UPPER" else (hi, lo))
        return strides, dil, pads
    if auto_pad != "NOTSET":
        raise node.error(f"auto_pad={auto_pad!r} is not an ONNX auto_pad value")
    p = [int(v) for v in (node.attr("pads", None) or [0] * (2 * nsp))]
    if len(p) != 2 * nsp:
        raise node.error(f"pads {p} do not fit {nsp} spatial dimensions")
    return strides, dil, [(p[i], p[i + nsp]) for i in range(nsp)]


def _per_out_channel(v, ndim):
    """A scalar, or a vector of one value per output channel M shaped to broadcast: as
    (M, 1, ...) against a weight of ``ndim`` dims, as (1, M, 1, ...) against an output
    of ``-ndim`` dims."""
    v = _a(v)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if ndim < 0:
        return v.reshape((1, v.shape[0]) + (1,) * (-ndim - 2))
    return v.reshape((v.shape[0],) + (1,) * (ndim - 1))


def _int_conv(node, x, w, x_zero_point, w_zero_point):
    """The int32 convolution of ``x - x_zero_point`` with ``w - w_zero_point`` (the
    padding is a zero of the shifted input); exact, as int32 sums of int8 products."""
    xi, wi = _a(x).astype(np.int32), _a(w).astype(np.int32)
    if x_zero_point is not None:
        zp = _a(x_zero_point)
        if zp.size != 1:
            raise node.error("x_zero_point must be a scalar (per-tensor quantization)")
        xi = xi - zp.reshape(()).astype(np.int32)
    if w_zero_point is not None:
        wzp = _per_out_channel(w_zero_point, wi.ndim)
        if wzp.ndim and wzp.shape[0] != wi.shape[0]:
            raise node.error(f"w_zero_point must be a scalar or one value per output "
                             f"channel ({wi.shape[0]})")
        wi = wi - wzp.astype(np.int32)
    if xi.ndim < 3:
        raise node.error(f"X must be (N, C, D1, ...) (got rank {xi.ndim})")
    strides, dil, pads = _int_conv_geometry(node, xi, wi)
    group = int(node.attr("group", 1))
    return lax.conv_general_dilated(xi, wi, strides, pads, rhs_dilation=dil,
                                    feature_group_count=group)


@op("ConvInteger")
def conv_integer(node, x, w, x_zero_point=None, w_zero_point=None):
    return _int_conv(node, x, w, x_zero_point, w_zero_point).astype(np.int32)


@op("QLinearConv")
def qlinear_conv(node, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                 y_zero_point=None, b=None):
    x = _a(x)
    acc = _int_conv(node, x, w, x_zero_point, w_zero_point)
    if b is not None:
        acc = acc + _per_out_channel(_a(b).astype(np.int32), -acc.ndim)
    x_scale, y_scale = _a(x_scale), _a(y_scale)
    w_scale = _per_out_channel(w_scale, -acc.ndim)
    sdt = fnp.result_type(x_scale.dtype, w_scale.dtype, y_scale.dtype)
    factor = x_scale.astype(sdt) * w_scale.astype(sdt) / y_scale.astype(sdt)
    d = acc.astype(np.float64) * factor.astype(np.float64)
    if y_zero_point is not None:
        zp = _a(y_zero_point)
        d = d + zp.reshape(()).astype(np.float64)
        dt = zp.dtype
    else:
        dt = x.dtype
    lo, hi = _QRANGE[np.dtype(dt)]
    return fnp.clip(fnp.round(d), lo, hi).astype(dt)
