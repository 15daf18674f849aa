"""Shape and indexing ONNX operators: reshaping, slicing, gathering and scattering,
padding, tiling, and the shape queries whose results are known while tracing.

Values that set an output shape (a ``Reshape``'s shape, a ``Slice``'s starts, ``Pad``'s
pads, ...) are ``static=`` inputs: NumPy arrays while the graph is traced. ``Shape`` and
``Size`` return NumPy int64 arrays, so shape arithmetic folds. Index tensors
(``Gather``, ``Scatter*``, ...) may be traced data: their negative entries are wrapped
with ``fnx.numpy``. ``NonZero``, ``Unique`` and ``Compress`` (with a traced condition)
have value-dependent output shapes: they run eagerly only (under ``jit`` they raise
``ConcretizationError``, on which the backend runs the model eagerly).
"""
from __future__ import annotations


import numpy as np

from ... import lax
from ... import numpy as fnp
from ..graph import known, np_dtype, op


def _a(x):
    return fnp.asarray(x)


def _ints(v):
    return [int(i) for i in np.asarray(v).reshape(-1)]


def _axis(node, axis, rank, what="axis"):
    a = int(axis)
    if not -rank <= a < max(rank, 1):
        raise node.error(f"{what} {a} is out of range for a rank-{rank} input")
    return a + rank if a < 0 else a


def _shape_of(x):
    return tuple(int(d) for d in np.shape(x))


def _wrap(idx, n):
    """Negative entries of an index tensor counted from the end (``n`` the axis size)."""
    k = known(idx)
    if k is not None:
        k = np.asarray(k).astype(np.int64)
        return np.where(k < 0, k + n, k)
    idx = _a(idx)
    return fnp.where(idx < 0, idx + fnp.asarray(n, idx.dtype), idx)


# --- shape queries -------------------------------------------------------------------------

@op("Shape")
def shape(node, x):
    dims = _shape_of(x)
    r = len(dims)
    start = node.attr("start", 0) if (node.opset or 1) >= 15 else 0
    end = node.attr("end", None) if (node.opset or 1) >= 15 else None
    start = min(max(start + r if start < 0 else start, 0), r)
    end = r if end is None else min(max(end + r if end < 0 else end, 0), r)
    return np.asarray(dims[start:end], dtype=np.int64)


@op("Size")
def size(node, x):
    return np.asarray(int(np.prod(_shape_of(x), dtype=np.int64)), dtype=np.int64)


# --- reshaping -----------------------------------------------------------------------------

@op("Reshape", static=(1,))
def reshape(node, data, shape):
    data = _a(data)
    dims = _ints(shape)
    allowzero = node.attr("allowzero", 0) if (node.opset or 1) >= 14 else 0
    out = []
    for i, d in enumerate(dims):
        if d == 0 and not allowzero:
            if i >= data.ndim:
                raise node.error(f"shape entry {i} is 0 (copy the input's dimension), but "
                                 f"the input has rank {data.ndim}")
            d = data.shape[i]
        out.append(d)
    if out.count(-1) > 1:
        raise node.error(f"the shape {dims} has more than one -1")
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        i = out.index(-1)
        out[i] = data.size // rest if rest else 0
    if int(np.prod(out, dtype=np.int64)) != data.size:
        raise node.error(f"cannot reshape an input of shape {data.shape} to {dims}")
    return fnp.reshape(data, tuple(out))


@op("Flatten")
def flatten(node, x):
    x = _a(x)
    r = x.ndim
    axis = node.attr("axis", 1)
    axis = axis + r if axis < 0 else axis
    if not 0 <= axis <= r:
        raise node.error(f"axis {node.attr('axis', 1)} is out of range for rank {r}")
    lead = int(np.prod(x.shape[:axis], dtype=np.int64))
    return fnp.reshape(x, (lead, int(np.prod(x.shape[axis:], dtype=np.int64))))


def _axes_arg(node, axes):
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an input from 13."""
    if (node.opset or 1) < 13:
        a = node.attr("axes", None)
        return None if a is None else list(a)
    return None if axes is None else _ints(axes)


@op("Squeeze", static=(1,))
def squeeze(node, x, axes=None):
    x = _a(x)
    ax = _axes_arg(node, axes)
    if ax is None:
        ax = [i for i, d in enumerate(x.shape) if d == 1]
    ax = sorted({_axis(node, a, x.ndim) for a in ax})
    for a in ax:
        if x.shape[a] != 1:
            raise node.error(f"cannot squeeze axis {a} of size {x.shape[a]}")
    return fnp.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in ax))


@op("Unsqueeze", static=(1,))
def unsqueeze(node, x, axes=None):
    x = _a(x)
    ax = _axes_arg(node, axes)
    if ax is None:
        raise node.error("the axes are required")
    r = x.ndim + len(ax)
    ax = [_axis(node, a, r) for a in ax]
    if len(set(ax)) != len(ax):
        raise node.error(f"repeated axes {ax}")
    dims = iter(x.shape)
    return fnp.reshape(x, tuple(1 if i in ax else next(dims) for i in range(r)))


@op("Transpose")
def transpose(node, x):
    x = _a(x)
    perm = node.attr("perm", None)
    perm = list(range(x.ndim))[::-1] if perm is None else [int(p) for p in perm]
    return fnp.transpose(x, perm)


@op("Concat")
def concat(node, *xs):
    xs = [x for x in xs if x is not None]
    if all(isinstance(x, np.ndarray) for x in xs):  # shape arithmetic: stay NumPy
        r = xs[0].ndim
        return np.concatenate(xs, axis=_axis(node, node.attr("axis"), r))
    xs = [_a(x) for x in xs]
    axis = _axis(node, node.attr("axis"), xs[0].ndim)
    dt = xs[0].dtype
    return fnp.concatenate([x.astype(dt) for x in xs], axis=axis)


@op("Split", static=(1,))
def split(node, x, split=None):
    x = _a(x)
    axis = _axis(node, node.attr("axis", 0), x.ndim)
    n = x.shape[axis]
    opset = node.opset or 1
    sizes = None
    if opset < 13:
        s = node.attr("split", None)
        sizes = list(s) if s else None
    elif split is not None:
        sizes = _ints(split)
    nout = len(node.outputs)
    if sizes is None:
        num = node.attr("num_outputs", None) if opset >= 18 else None
        if num is not None:
            num = int(num)
            chunk = -(-n // num)
            sizes = [chunk] * (num - 1) + [n - chunk * (num - 1)]
            if sizes[-1] < 0:
                raise node.error(f"cannot split {n} elements into {num} outputs")
        else:
            if n % nout:
                raise node.error(f"cannot split {n} elements into {nout} equal parts")
            sizes = [n // nout] * nout
    if sum(sizes) != n:
        raise node.error(f"the split sizes {sizes} do not add up to the axis size {n}")
    outs, start = [], 0
    for s in sizes:
        outs.append(lax.slice_in_dim(x, start, start + s, 1, axis))
        start += s
    return tuple(outs)


# --- slicing -------------------------------------------------------------------------------

@op("Slice", static=(1, 2, 3, 4))
def slice_(node, x, starts=None, ends=None, axes=None, steps=None):
    if (node.opset or 1) < 10:
        starts, ends = node.attr("starts"), node.attr("ends")
        axes = node.attr("axes", None)
        steps = None
    starts, ends = _ints(starts), _ints(ends)
    shape = _shape_of(x)
    r = len(shape)
    axes = list(range(len(starts))) if axes is None else _ints(axes)
    steps = [1] * len(starts) if steps is None else _ints(steps)
    index = [slice(None)] * r
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(node, a, r)
        d = shape[a]
        if st == 0:
            raise node.error("a step of 0")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        index[a] = slice(s, None if e < 0 else e, st)
    k = known(x)
    if isinstance(x, np.ndarray):
        return k[tuple(index)]
    return _a(x)[tuple(index)]


# --- broadcasting, tiling, padding -------------------------------------------------------------

@op("Expand", static=(1,))
def expand(node, x, shape):
    x = _a(x)
    out = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    return fnp.broadcast_to(x, out)


@op("Tile", static=(1,))
def tile(node, x, repeats):
    x = _a(x)
    reps = _ints(repeats)
    if len(reps) != x.ndim:
        raise node.error(f"{len(reps)} repeats for a rank-{x.ndim} input")
    return fnp.tile(x, reps)


_PAD_MODES = {"constant", "reflect", "edge", "wrap"}


@op("Pad", static=(1, 3))
def pad(node, x, pads=None, constant_value=None, axes=None):
    x = _a(x)
    r = x.ndim
    mode = node.attr("mode", "constant")
    if mode not in _PAD_MODES or (mode == "wrap" and (node.opset or 1) < 19):
        raise node.error(f"mode {mode!r} is not an ONNX Pad mode of this opset")
    if (node.opset or 1) < 11:
        pads = list(node.attr("pads", None) or node.attr("paddings"))
        value = node.attr("value", 0.0)
    else:
        pads = _ints(pads)
        value = 0 if constant_value is None else constant_value
    ax = list(range(r)) if axes is None else [_axis(node, a, r) for a in _ints(axes)]
    if len(pads) != 2 * len(ax):
        raise node.error(f"{len(pads)} pads for {len(ax)} axes")
    width = [[0, 0] for _ in range(r)]
    for i, a in enumerate(ax):
        width[a] = [int(pads[i]), int(pads[len(ax) + i])]
    # negative pads crop
    index = tuple(slice(max(-lo, 0), d - max(-hi, 0)) for (lo, hi), d in zip(width, x.shape))
    if any(lo < 0 or hi < 0 for lo, hi in width):
        x = x[index]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    if mode == "constant":
        v = fnp.reshape(_a(value), ()).astype(x.dtype)
        return lax.pad(x, v, [(lo, hi, 0) for lo, hi in width])
    if not any(lo or hi for lo, hi in width):
        return x
    if mode in ("reflect", "wrap", "edge"):
        for (lo, hi), d in zip(width, x.shape):
            if (lo or hi) and d == 0:
                raise node.error(f"mode {mode!r} cannot pad an empty axis")
    return fnp.pad(x, width, mode=mode)


@op("CenterCropPad", static=(1,))
def center_crop_pad(node, x, shape):
    x = _a(x)
    r = x.ndim
    target = _ints(shape)
    ax = node.attr("axes", None)
    ax = list(range(r)) if ax is None else [_axis(node, a, r) for a in ax]
    if len(ax) != len(target):
        raise node.error(f"{len(target)} sizes for {len(ax)} axes")
    crop = [slice(None)] * r
    width = [(0, 0, 0)] * r
    for a, t in zip(ax, target):
        d = x.shape[a]
        if t < d:
            lo = (d - t) // 2
            crop[a] = slice(lo, lo + t)
        elif t > d:
            lo = (t - d) // 2
            width[a] = (lo, t - d - lo, 0)
    x = x[tuple(crop)]
    return lax.pad(x, fnp.zeros((), x.dtype), width)


# --- gathering -----------------------------------------------------------------------------

@op("Gather")
def gather(node, x, indices):
    r = len(_shape_of(x))
    axis = _axis(node, node.attr("axis", 0), r)
    n = _shape_of(x)[axis]
    idx = _wrap(indices, n)
    if isinstance(x, np.ndarray) and isinstance(idx, np.ndarray):  # shape arithmetic
        return np.take(x, idx, axis=axis)
    return fnp.take(_a(x), _a(idx), axis=axis, mode="clip")


@op("GatherElements")
def gather_elements(node, x, indices):
    x = _a(x)
    axis = _axis(node, node.attr("axis", 0), x.ndim)
    idx = _a(_wrap(indices, x.shape[axis]))
    return fnp.take_along_axis(x, idx, axis=axis, mode="clip")


def _nd_index(node, data_shape, indices, b):
    """The index tuple of GatherND/ScatterND: batch iotas, then one array per index
    component (wrapped), all of shape ``indices.shape[:-1]``."""
    ishape = _shape_of(indices)
    k = ishape[-1]
    lead = ishape[:-1]
    if b + k > len(data_shape):
        raise node.error(f"index tuples of length {k} with {b} batch dims for a "
                         f"rank-{len(data_shape)} input")
    idx = _a(indices)
    index = []
    for i in range(b):
        shp = [1] * len(lead)
        shp[i] = lead[i]
        index.append(fnp.broadcast_to(fnp.reshape(fnp.arange(lead[i], dtype=np.int64), shp),
                                      lead))
    for j in range(k):
        comp = idx[..., j]
        index.append(_a(_wrap(comp, data_shape[b + j])))
    return tuple(index)


@op("GatherND")
def gather_nd(node, x, indices):
    x = _a(x)
    b = int(node.attr("batch_dims", 0))
    index = _nd_index(node, x.shape, indices, b)
    return x[index]


# --- scattering ----------------------------------------------------------------------------

def _reduce_update(node, ref, updates, reduction):
    if reduction == "none":
        return ref.set(updates)
    if reduction == "add":
        return ref.add(updates)
    if reduction == "mul":
        return ref.multiply(updates)
    if reduction == "min":
        return ref.min(updates)
    if reduction == "max":
        return ref.max(updates)
    raise node.error(f"reduction {reduction!r} is not supported (none, add, mul, min, max)")


def _scatter_elements(node, x, indices, updates, reduction):
    x = _a(x)
    axis = _axis(node, node.attr("axis", 0), x.ndim)
    idx = _a(_wrap(indices, x.shape[axis]))
    index = []
    for d in range(x.ndim):
        if d == axis:
            index.append(idx)
        else:
            shp = [1] * idx.ndim
            shp[d] = idx.shape[d]
            index.append(fnp.broadcast_to(fnp.reshape(fnp.arange(idx.shape[d],
                                                                 dtype=np.int64), shp),
                                          idx.shape))
    updates = _a(updates).astype(x.dtype)
    return _reduce_update(node, x.at[tuple(index)], updates, reduction)


@op("ScatterElements")
def scatter_elements(node, x, indices, updates):
    reduction = node.attr("reduction", "none") if (node.opset or 1) >= 16 else "none"
    return _scatter_elements(node, x, indices, updates, reduction)


@op("Scatter")
def scatter(node, x, indices, updates):
    return _scatter_elements(node, x, indices, updates, "none")


@op("ScatterND")
def scatter_nd(node, x, indices, updates):
    x = _a(x)
    reduction = node.attr("reduction", "none") if (node.opset or 1) >= 16 else "none"
    index = _nd_index(node, x.shape, indices, 0)
    updates = _a(updates).astype(x.dtype)
    return _reduce_update(node, x.at[index], updates, reduction)


# --- creation ------------------------------------------------------------------------------

@op("Range", static=(0, 1, 2))
def range_(node, start, limit, delta):
    dt = np.asarray(start).dtype
    if dt.kind in "iu":
        # scalars, or one-element tensors as some function bodies pass them
        s, l, d = (int(np.asarray(v).reshape(-1)[0]) for v in (start, limit, delta))
        n = max(-(-(l - s) // d), 0) if d else 0
        if d == 0:
            raise node.error("delta is 0")
        return (s + np.arange(n, dtype=np.int64) * d).astype(dt)
    compute = np.float64
    if dt.itemsize <= 2:  # float16, bfloat16: stash_type decides the working precision
        compute = np.float64 if node.attr("stash_type", 1) == 11 else np.float32
    elif dt == np.float32:
        compute = np.float32
    s = np.asarray(start).astype(compute).item()
    l, d = float(np.asarray(limit).item()), float(np.asarray(delta).item())
    if d == 0:
        raise node.error("delta is 0")
    return np.arange(s, l, d, dtype=compute).astype(dt)


@op("Trilu")
def trilu(node, x, k=None):
    """The triangle as a mask of the last two axes, so ``k`` may be traced data."""
    x = _a(x)
    if x.ndim < 2:
        raise node.error(f"the input has rank {x.ndim}, less than 2")
    n, m = x.shape[-2:]
    diag = (fnp.arange(m, dtype=np.int64)[None, :] - fnp.arange(n, dtype=np.int64)[:, None])
    k = fnp.asarray(0, np.int64) if k is None else fnp.reshape(_a(k), ()).astype(np.int64)
    keep = diag >= k if node.attr("upper", 1) else diag <= k
    return fnp.where(keep, x, fnp.zeros((), x.dtype))


@op("OneHot", static=(1,))
def one_hot(node, indices, depth, values):
    depth = int(np.asarray(depth).reshape(-1)[0])
    idx = _a(indices)
    if idx.dtype.kind not in "iu":
        idx = idx.astype(np.int64)  # ONNX casts float indices to integers
    idx = idx.astype(np.int64)
    r = idx.ndim
    axis = node.attr("axis", -1)
    axis = axis + r + 1 if axis < 0 else axis
    if not 0 <= axis <= r:
        raise node.error(f"axis {node.attr('axis', -1)} out of range for rank {r} indices")
    idx = fnp.where(idx < 0, idx + depth, idx)
    values = _a(values)
    off, on = values[0], values[1]
    shp = [1] * (r + 1)
    shp[axis] = depth
    iota = fnp.reshape(fnp.arange(depth, dtype=np.int64), shp)
    hit = fnp.expand_dims(idx, axis) == iota
    return fnp.where(hit, on, off)


@op("EyeLike")
def eye_like(node, x):
    shp = _shape_of(x)
    if len(shp) != 2:
        raise node.error(f"the input has rank {len(shp)}, not 2")
    dt = node.attr("dtype", None)
    dt = np.asarray(x).dtype if dt is None and isinstance(x, np.ndarray) else (
        _a(x).dtype if dt is None else np_dtype(dt))
    return fnp.eye(shp[0], shp[1], k=int(node.attr("k", 0)), dtype=dt)


# --- block rearrangement -------------------------------------------------------------------

def _blocks(node, x):
    """``(x, blocksize)`` for DepthToSpace/SpaceToDepth, whose input must have rank 4."""
    x = _a(x)
    if x.ndim != 4:
        raise node.error(f"the input has rank {x.ndim}, not 4")
    return x, int(node.attr("blocksize"))


@op("DepthToSpace")
def depth_to_space(node, x):
    x, bs = _blocks(node, x)
    mode = node.attr("mode", "DCR")
    b, c, h, w = x.shape
    if c % (bs * bs):
        raise node.error(f"{c} channels are not divisible by blocksize**2 = {bs * bs}")
    if mode == "DCR":
        t = fnp.reshape(x, (b, bs, bs, c // (bs * bs), h, w))
        t = fnp.transpose(t, (0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        t = fnp.reshape(x, (b, c // (bs * bs), bs, bs, h, w))
        t = fnp.transpose(t, (0, 1, 4, 2, 5, 3))
    else:
        raise node.error(f"mode {mode!r} is not DCR or CRD")
    return fnp.reshape(t, (b, c // (bs * bs), h * bs, w * bs))


@op("SpaceToDepth")
def space_to_depth(node, x):
    x, bs = _blocks(node, x)
    mode = node.attr("mode", "DCR") if (node.opset or 1) >= 28 else "DCR"
    b, c, h, w = x.shape
    if h % bs or w % bs:
        raise node.error(f"spatial size {h}x{w} is not divisible by blocksize {bs}")
    t = fnp.reshape(x, (b, c, h // bs, bs, w // bs, bs))
    if mode == "DCR":
        t = fnp.transpose(t, (0, 3, 5, 1, 2, 4))
    elif mode == "CRD":
        t = fnp.transpose(t, (0, 1, 3, 5, 2, 4))
    else:
        raise node.error(f"mode {mode!r} is not DCR or CRD")
    return fnp.reshape(t, (b, c * bs * bs, h // bs, w // bs))


@op("ReverseSequence")
def reverse_sequence(node, x, lens):
    x = _a(x)
    t_ax = int(node.attr("time_axis", 0))
    b_ax = int(node.attr("batch_axis", 1))
    if {t_ax, b_ax} != {0, 1}:
        raise node.error(f"time_axis {t_ax} and batch_axis {b_ax} must be 0 and 1")
    T, B = x.shape[t_ax], x.shape[b_ax]
    lens = _a(lens).astype(np.int64)
    t = fnp.arange(T, dtype=np.int64)
    if t_ax == 0:
        t, L = t[:, None], lens[None, :]
    else:
        t, L = t[None, :], lens[:, None]
    src = fnp.where(t < L, L - 1 - t, t)
    src = fnp.reshape(src, src.shape + (1,) * (x.ndim - 2))
    return fnp.take_along_axis(x, fnp.broadcast_to(src, x.shape), axis=t_ax, mode="clip")


@op("Col2Im", static=(1, 2))
def col2im(node, x, image_shape, block_shape):
    x = _a(x)
    img, blk = _ints(image_shape), _ints(block_shape)
    nd = len(img)
    dil = list(node.attr("dilations", None) or [1] * nd)
    pads = list(node.attr("pads", None) or [0] * (2 * nd))
    strides = list(node.attr("strides", None) or [1] * nd)
    if x.ndim != 3:
        raise node.error(f"the input has rank {x.ndim}, not 3")
    N, CK, L = x.shape
    K = int(np.prod(blk, dtype=np.int64))
    if CK % K:
        raise node.error(f"{CK} rows are not divisible by the block size {K}")
    C = CK // K
    counts = [(img[i] + pads[i] + pads[nd + i] - (dil[i] * (blk[i] - 1) + 1)) // strides[i]
              + 1 for i in range(nd)]
    if int(np.prod(counts, dtype=np.int64)) != L:
        raise node.error(f"{L} blocks, but the image and block shapes give {counts}")
    # per (kernel offset, block) the flat image position, -1 when it falls in the padding
    kk = np.indices(blk).reshape(nd, K)           # (nd, K)
    ll = np.indices(counts).reshape(nd, L)        # (nd, L)
    pos = np.zeros((K, L), np.int64)
    valid = np.ones((K, L), bool)
    for i in range(nd):
        p = ll[i][None, :] * strides[i] + kk[i][:, None] * dil[i] - pads[i]
        valid &= (p >= 0) & (p < img[i])
        pos = pos * img[i] + np.clip(p, 0, img[i] - 1)
    src = np.flatnonzero(valid.reshape(-1))
    vals = fnp.reshape(x, (N, C, K * L))[:, :, src]
    out = fnp.zeros((N, C, int(np.prod(img, dtype=np.int64))), x.dtype)
    out = out.at[:, :, pos.reshape(-1)[src]].add(vals)
    return fnp.reshape(out, (N, C, *img))


# --- value-dependent shapes (eager only) ----------------------------------------------------

def _values(x):
    """The concrete values of ``x`` as a NumPy array: known values as they are, eager
    arrays (also under ``grad``, through their primal values) read back; a value traced
    by ``jit`` raises ``ConcretizationError`` (the backend then runs the model eagerly)."""
    k = known(x)
    if k is not None:
        return np.asarray(k)
    x = _a(x)
    return np.asarray(x.tolist()).reshape(x.shape)


@op("Compress")
def compress(node, x, condition):
    cond = _values(condition).reshape(-1).astype(bool)
    axis = node.attr("axis", None)
    x = _a(x)
    if axis is None:
        x, ax = fnp.reshape(x, (x.size,)), 0
    else:
        ax = _axis(node, axis, x.ndim)
    if cond.size > x.shape[ax]:
        raise node.error(f"the condition has {cond.size} entries, more than the "
                         f"{x.shape[ax]} of axis {ax}")
    return fnp.take(x, np.flatnonzero(cond).astype(np.int64), axis=ax, mode="clip")


@op("NonZero")
def nonzero(node, x):
    v = _values(x)
    v = v.reshape(1) if v.ndim == 0 else v
    return np.asarray(np.nonzero(v), dtype=np.int64).reshape(v.ndim, -1)


@op("Unique")
def unique(node, x):
    xa = _a(x)
    vals = _values(x)
    if vals.dtype.kind not in "biu" and vals.dtype != np.float64:
        vals = vals.astype(np.complex128 if vals.dtype.kind == "c" else np.float64)
    axis = node.attr("axis", None)
    if axis is not None:
        axis = _axis(node, axis, vals.ndim)
    flat = vals.reshape(-1) if axis is None else vals
    _, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not node.attr("sorted", 1):  # order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    src = fnp.reshape(xa, (xa.size,)) if axis is None else xa
    y = fnp.take(src, first.astype(np.int64), axis=0 if axis is None else axis,
                 mode="clip")
    return (y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))
