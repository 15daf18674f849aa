"""The NumPy backend's computation of the windowed primitives (a backend rule helper: it
imports only NumPy, so ``fnx.lax.convolution`` imports it downward; the primitives' impls
and their ``"numpy"`` rules call it, so eager and jit compute alike).

* **Convolution as im2col + one matmul**, planned once per shape signature
  (``conv_plan``, cached): the operands cast and laid out (channels-last, or kept
  channels-first for NCHW-style specs), padded and dilated, the windows gathered into a
  column matrix by one vectorized copy per kernel tap (or per output position, or from a
  strided view, whichever moves longer runs), and the kernel applied as one matmul
  (batched over feature or batch groups); a ``transpose`` of the result can be fused in.
* **Windowed reductions** (``reduce_windows``): a ufunc applied tap by tap into one
  accumulator, or one reduction over a strided view of every window when taps are many.
* **Max/min pooling's derivative** (``select_gather`` / ``select_scatter``): the first
  extreme of each window in row-major tap order selects that tap.

Window geometry (which input element each tap reads) is in ``tap_index`` and the padding
helpers; the shape rules, with their errors, stay with the primitives.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import array_library as AL

__all__ = ["dilated_size", "out_size", "needs_pad", "dilate_pad", "undilate_unpad",
           "tap_index", "conv_plan", "window_identity", "reduce_windows", "select_gather",
           "select_scatter"]


def dilated_size(n, d):
    """The length of an axis of ``n`` elements with ``d - 1`` holes between them."""
    return 0 if n == 0 else 1 + d * (n - 1)


# --- padding -----------------------------------------------------------------------------------


def _placement(n, lo, dil, size):
    """Element i of a length-n axis lands at lo + i * dil of a padded axis of ``size``:
    the range [i0, i1) of elements that land inside, and the slice they land on."""
    i0 = max(0, -(-(-lo) // dil)) if lo < 0 else 0
    i1 = min(n, (size - 1 - lo) // dil + 1) if size - 1 - lo >= 0 else 0
    if i1 <= i0:
        return 0, 0, slice(0, 0)
    start = lo + i0 * dil
    return i0, i1, slice(start, lo + (i1 - 1) * dil + 1, dil)


def dilate_pad(x, fill, pads, dils):
    """``x`` with ``dils - 1`` holes between elements and (low, high) padding per axis
    (negative: cropped), holes and padding set to ``fill``; a new C-contiguous array."""
    shape = tuple(dilated_size(n, d) + lo + hi for n, d, (lo, hi) in zip(x.shape, dils, pads))
    out = AL.full(x, shape, fill, x.dtype) if fill != 0 else AL.zeros(x, shape, x.dtype)
    src, dst = [], []
    for n, d, (lo, _), size in zip(x.shape, dils, pads, shape):
        i0, i1, sl = _placement(n, lo, d, size)
        src.append(slice(i0, i1))
        dst.append(sl)
    out[tuple(dst)] = x[tuple(src)]
    return out


def undilate_unpad(acc, shape, pads, dils):
    """The inverse placement of ``dilate_pad``: the elements of ``acc`` (padded, dilated
    layout) that correspond to an operand of ``shape``; elements cropped away get 0."""
    src, dst = [], []
    full = True
    for n, d, (lo, _), size in zip(shape, dils, pads, acc.shape):
        i0, i1, sl = _placement(n, lo, d, size)
        dst.append(slice(i0, i1))
        src.append(sl)
        full &= (i0 == 0 and i1 == n)
    if full:
        return AL.ascontiguous(acc[tuple(src)])
    out = AL.zeros(acc, shape, acc.dtype)
    out[tuple(dst)] = acc[tuple(src)]
    return out


def needs_pad(pads, dils):
    return any(lo or hi for lo, hi in pads) or any(d != 1 for d in dils)


def out_size(padded, window, stride):
    return 0 if padded < window else (padded - window) // stride + 1


# --- convolution: im2col and one matmul ----------------------------------------------------

def _windows(x, out_sp, ks, strides, rdil, lead=1):
    """Every window of ``x`` (lead..., spatial..., C) as a view (lead..., out..., k..., C);
    for a device buffer, a copy (one slice copy per kernel tap: no strided views there)."""
    if AL.is_device(x):
        return _windows_copied(x, out_sp, ks, strides, rdil, lead)
    s = x.strides
    nsp = len(out_sp)
    shape = x.shape[:lead] + tuple(out_sp) + tuple(ks) + (x.shape[-1],)
    st = (s[:lead] + tuple(s[lead + i] * strides[i] for i in range(nsp))
          + tuple(s[lead + i] * rdil[i] for i in range(nsp)) + (s[-1],))
    return as_strided(x, shape, st, writeable=False)


def _windows_copied(x, out_sp, ks, strides, rdil, lead):
    """``_windows`` as a new array (lead..., out..., K, C), copied tap by tap."""
    cols = AL.empty(x, x.shape[:lead] + tuple(out_sp) + (math.prod(ks), x.shape[-1]), x.dtype)
    head = (slice(None),) * lead
    for t, offs in enumerate(np.ndindex(*ks)):
        cols[(Ellipsis, t, slice(None))] = x[head + tap_index(offs, rdil, out_sp, strides)
                                             + (slice(None),)]
    return cols


def tap_index(offs, dil, out, strides):
    """The strided slices (one per axis) that tap ``offs`` of every window reads: window
    ``q`` starts at ``q * strides`` and its taps are ``dil`` apart."""
    return tuple(slice(o * d, o * d + (m - 1) * st + 1, st)
                 for o, d, m, st in zip(offs, dil, out, strides))


def _im2col(x, out_sp, ks, strides, rdil, cols_shape):
    """The windows of ``x`` (N, spatial..., C) gathered into a new array laid out
    (N, out..., k..., C), reshaped to ``cols_shape``: one vectorized slice copy per
    kernel tap when taps are large, else a copy of the strided window view."""
    N, C = x.shape[0], x.shape[-1]
    K = math.prod(ks)
    P = math.prod(out_sp)
    if K == 1 or P * C >= 64 * K or AL.is_device(x):
        # Large taps: copying tap by tap moves long contiguous runs.
        cols = AL.empty(x, (N,) + tuple(out_sp) + (K, C), x.dtype)
        for t, offs in enumerate(np.ndindex(*ks)):
            sl = (slice(None),) + tap_index(offs, rdil, out_sp, strides) + (slice(None),)
            cols[(Ellipsis, t, slice(None))] = x[sl]
        return cols.reshape(cols_shape)
    return _windows(x, out_sp, ks, strides, rdil).reshape(cols_shape)


def _matmul(a, b):
    """``AL.matmul`` in the operands' dtype (ml_dtypes' bfloat16 matmul gives float32)."""
    out = AL.matmul(a, b)
    return out if out.dtype == a.dtype else out.astype(a.dtype)


def _operands(pet, x_perm, w_perm, padding, ldil, channels_first):
    """``prep(lhs, rhs) -> (x, w)``: both cast to ``pet`` (unless None) and transposed by
    ``x_perm`` / ``w_perm``; ``x`` padded and dilated over its spatial axes, which follow
    the channels (``channels_first``) or precede them."""
    pad_it = needs_pad(padding, ldil)
    lead, trail = (2, 0) if channels_first else (1, 1)
    pads_full = ((0, 0),) * lead + tuple(padding) + ((0, 0),) * trail
    dils_full = (1,) * lead + tuple(ldil) + (1,) * trail

    def prep(lhs, rhs):
        if pet is not None:
            lhs, rhs = lhs.astype(pet, copy=False), rhs.astype(pet, copy=False)
        x = lhs.transpose(x_perm)
        if pad_it:
            x = dilate_pad(x, 0, pads_full, dils_full)
        return x, rhs.transpose(w_perm)
    return prep


@functools.lru_cache(maxsize=2048)
def conv_plan(lshape, rshape, strides, padding, ldil, rdil, dn, G, B, pet, perm):
    """The NumPy computation of one convolution for these shapes: ``fn(lhs, rhs)``."""
    lspec, rspec, ospec = dn
    nsp = len(lspec) - 2
    N, C = lshape[lspec[0]], lshape[lspec[1]]
    Co = rshape[rspec[0]]
    xs = tuple(lshape[d] for d in lspec[2:])
    ks = tuple(rshape[d] for d in rspec[2:])
    padded = [dilated_size(n, d) + lo + hi for n, d, (lo, hi) in zip(xs, ldil, padding)]
    out_sp = tuple(out_size(p, dilated_size(k, r), s)
                   for p, k, r, s in zip(padded, ks, rdil, strides))
    out_shape = [0] * (nsp + 2)
    out_shape[ospec[0]], out_shape[ospec[1]] = N // B, Co
    for i in range(nsp):
        out_shape[ospec[2 + i]] = out_sp[i]
    # result axes (N, out..., Co) -> the out spec, then the fused permutation
    src = [0] * (nsp + 2)
    src[ospec[0]], src[ospec[1]] = 0, nsp + 1
    for i in range(nsp):
        src[ospec[2 + i]] = 1 + i
    if perm is not None:
        src = [src[p] for p in perm]
        out_shape = [out_shape[p] for p in perm]
    src = tuple(src)
    identity_out = src == tuple(range(nsp + 2))
    K = math.prod(ks)
    P = math.prod(out_sp)
    Kc = K * C // G
    Og = Co // max(G, B)
    # channels-first operands (NCHW and the like) keep their layout throughout
    channels_first = lspec[1] < min(lspec[2:], default=nsp + 2)

    def finish(y):  # y: (N', out..., Co)
        if identity_out:
            return y
        return AL.ascontiguous(y.transpose(src))

    if 0 in out_shape or K * C == 0:
        def empty(lhs, rhs):
            dt = lhs.dtype if pet is None else pet
            return AL.zeros(lhs, out_shape, dt)
        return empty

    if channels_first:   # operands keep their spec order: (N, C, spatial...), (O, I, k...)
        prep = _operands(pet, lspec, rspec, padding, ldil, True)
        plan = _conv_plan_cf(prep, N, C, Co, ks, out_sp, strides, rdil, G, B, src)
        if (ks == (3, 3) and strides == (1, 1) and rdil == (1, 1) and tuple(ldil) == (1, 1)
                and G == 1 and B == 1 and min(lo for lo, _ in padding) >= 0
                and min(hi for _, hi in padding) >= 0 and min(C, Co) >= WINOGRAD_MIN_CHANNELS
                and out_sp[0] >= 8 and out_sp[1] >= WINOGRAD_MIN_WIDTH):
            return _winograd_plan(plan, pet, lspec, rspec, tuple(map(tuple, padding)), src)
        return plan

    x_perm = (lspec[0],) + tuple(lspec[2:]) + (lspec[1],)
    w_perm = tuple(rspec[2:]) + (rspec[1], rspec[0])
    prep = _operands(pet, x_perm, w_perm, padding, ldil, False)

    def fn(lhs, rhs):
        x, w = prep(lhs, rhs)                              # w: k..., Ci, Co
        if G == 1 and B == 1:
            cols = _im2col(x, out_sp, ks, strides, rdil, (N * P, K * C))
            y = _matmul(cols, w.reshape(K * C, Co))       # (N P, Co)
            return finish(y.reshape((N,) + out_sp + (Co,)))
        g = max(G, B)
        if G > 1:   # feature groups: (N, sp, G, Cg) -> (G, N P, K Cg)
            Cg = C // G
            xg = x.reshape(x.shape[:-1] + (G, Cg))
            xg = np.moveaxis(xg, -2, 0)                    # (G, N, sp..., Cg) view
            cols = _windows(xg, out_sp, ks, strides, rdil, 2).reshape(G, N * P, Kc)
            Nb = N
        else:       # batch groups: (B, Nb, sp, C) -> (B, Nb P, K C)
            Nb = N // B
            xb = x.reshape((B, Nb) + x.shape[1:])
            cols = _windows(xb, out_sp, ks, strides, rdil, 2).reshape(B, Nb * P, Kc)
        wg = w.reshape(Kc, g, Og).transpose(1, 0, 2)        # (g, K Cg, Og)
        y = _matmul(cols, wg)                            # (g, Nb P, Og)
        y = y.reshape((g, Nb) + out_sp + (Og,))
        y = np.moveaxis(y, 0, -2).reshape((Nb,) + out_sp + (Co,))
        return finish(y)
    return fn


# Winograd's F(2x2, 3x3) for 3x3 stride-1 convolutions: a native implementation that the
# backends install (``fnx.kernels.winograd``) where a C++ compiler is there. It pays from
# this many input and output channels on (fewer: the 16 products are too thin for BLAS)
# and output rows this wide (narrower: the transforms' rows are too short to vectorize).
_WINOGRAD = []
WINOGRAD_MIN_CHANNELS = 32
WINOGRAD_MIN_WIDTH = 16


def set_winograd(conv3x3):
    """Install ``conv3x3(x, w, pads) -> y or None`` for 3x3 stride-1 convolutions of
    float32/float64 host arrays in (N, C, H, W) / (O, I, 3, 3) order (None: use the
    im2col plan); ``set_winograd(None)`` removes it."""
    _WINOGRAD[:] = [conv3x3] if conv3x3 is not None else []


def _channels_first_src(src, nsp):
    """``src`` (the output's axes numbered as (N, out..., Co)) renumbered for a result in
    (N, Co, out...) order."""
    return tuple(0 if a == 0 else 1 if a == nsp + 1 else a + 1 for a in src)


def _winograd_plan(plan, pet, lspec, rspec, padding, src):
    """``plan``, unless an installed Winograd convolution takes the call."""
    cf_src = _channels_first_src(src, 2)

    def fn(lhs, rhs):
        if _WINOGRAD and not AL.is_device(lhs):
            x = lhs if pet is None else lhs.astype(pet, copy=False)
            w = rhs if pet is None else rhs.astype(pet, copy=False)
            if x.dtype in (np.float32, np.float64) and w.dtype == x.dtype:
                y = _WINOGRAD[0](x.transpose(lspec), w.transpose(rspec), padding)
                if y is not None:
                    return y if cf_src == (0, 1, 2, 3) else np.ascontiguousarray(
                        y.transpose(cf_src))
        return plan(lhs, rhs)
    return fn


def _im2col_cf(x, out_sp, ks, strides, rdil):
    """``x`` (N, C, spatial...) -> a new array (N, C, k..., out...) of every window, copied
    by one vectorized slice copy per kernel tap or per output position (fewer of the
    two), or from a strided view when both are many."""
    N, C = x.shape[:2]
    nsp = len(out_sp)
    K, P = math.prod(ks), math.prod(out_sp)
    full = (slice(None), slice(None))
    if min(K, P) > 256 and not AL.is_device(x):
        s = x.strides
        view = as_strided(x, (N, C) + tuple(ks) + tuple(out_sp),
                          s[:2] + tuple(s[2 + i] * rdil[i] for i in range(nsp))
                          + tuple(s[2 + i] * strides[i] for i in range(nsp)), writeable=False)
        return np.ascontiguousarray(view)
    cols = AL.empty(x, (N, C) + tuple(ks) + tuple(out_sp), x.dtype)
    if K <= P:
        for tap in np.ndindex(*ks):
            cols[full + tap] = x[full + tap_index(tap, rdil, out_sp, strides)]
    else:
        rest = (slice(None),) * nsp
        for pos in np.ndindex(*out_sp):
            # the window at ``pos``: its taps are the slice's elements
            cols[full + rest + pos] = x[full + tap_index(pos, strides, ks, rdil)]
    return cols


def _conv_plan_cf(prep, N, C, Co, ks, out_sp, strides, rdil, G, B, src):
    """The channels-first plan: windows copied as (N, C, k..., out...), one matmul of
    the kernel (Co, Ci k...) against them, the result (N, Co, out...) without transposes.
    ``prep`` gives the operands in (N, C, spatial...) and (O, I, k...) order."""
    nsp = len(ks)
    K, P = math.prod(ks), math.prod(out_sp)
    Cg = C // G
    # y axes are (N, Co, out...); ``src`` numbers them (N, out..., Co): renumber
    cf_src = _channels_first_src(src, nsp)
    cf_identity = cf_src == tuple(range(nsp + 2))

    def fn(lhs, rhs):
        x, w = prep(lhs, rhs)                                # w: Co, Ci, k...
        cols = _im2col_cf(x, out_sp, ks, strides, rdil)      # N, C, k..., out...
        if B > 1:
            Nb, Ob = N // B, Co // B
            y = _matmul(w.reshape(B, 1, Ob, C * K), cols.reshape(B, Nb, C * K, P))
            y = y.transpose(1, 0, 2, 3).reshape((Nb, Co) + tuple(out_sp))
        elif G > 1:
            y = _matmul(w.reshape(G, Co // G, Cg * K), cols.reshape(N, G, Cg * K, P))
            y = y.reshape((N, Co) + tuple(out_sp))
        else:
            y = _matmul(w.reshape(Co, C * K), cols.reshape(N, C * K, P))
            y = y.reshape((N, Co) + tuple(out_sp))
        if cf_identity:
            return y
        return AL.ascontiguous(y.transpose(cf_src))
    return fn


# --- windowed reductions -----------------------------------------------------------------------

def window_identity(dtype, which):
    """The identity of the reduction ``which`` ("sum", "max", "min") in ``dtype``: what
    padding holds."""
    if which == "sum":
        return 0
    if dtype.kind in "fc" or dtype.name == "bfloat16":
        return -np.inf if which == "max" else np.inf
    if dtype.kind == "b":
        return which != "max"
    info = np.iinfo(dtype)
    return info.min if which == "max" else info.max


def _padded(x, fill, p):
    if needs_pad(p["padding"], p["base_dilation"]):
        return dilate_pad(x, fill, p["padding"], p["base_dilation"])
    return x


def _tap_slices(out, p):
    """Per window tap: the tap's index tuple into the padded operand (strided slices)."""
    for offs in np.ndindex(*p["window_dimensions"]):
        yield tap_index(offs, p["window_dilation"], out, p["window_strides"])


_UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def reduce_windows(x, out, which, p):
    """``reduce_window_{which}`` of ``x`` into the pooled shape ``out`` (``p``: the
    primitive's window params)."""
    if 0 in out:
        return AL.zeros(x, out, x.dtype)
    if x.size == 0:
        return AL.full(x, out, window_identity(x.dtype, which), x.dtype)
    ufunc = _UFUNC[which]
    xp = _padded(x, window_identity(x.dtype, which), p)
    K = math.prod(p["window_dimensions"])
    if K > 64 and not AL.is_device(x):   # many taps: one reduction over a strided view
        st = xp.strides
        shape = out + tuple(p["window_dimensions"])
        strides = (tuple(a * s for a, s in zip(st, p["window_strides"]))
                   + tuple(a * d for a, d in zip(st, p["window_dilation"])))
        win = as_strided(xp, shape, strides, writeable=False)
        res = ufunc.reduce(win, axis=tuple(range(len(out), 2 * len(out))))
        return res if res.dtype == x.dtype else res.astype(x.dtype)
    acc = None
    for sl in _tap_slices(out, p):
        if acc is None:
            acc = AL.copy(xp[sl])
        else:
            ufunc(acc, xp[sl], out=acc)
    return acc


# --- the selected element of each window: max/min pooling's derivative --------------------------

def _selection(x, out, which, p):
    """Per window tap, a boolean mask (pooled shape) of the windows that select that tap:
    the first maximum (minimum) in row-major tap order. Windows whose extreme is NaN
    select nothing (zero derivative). Returns the taps' slices and masks."""
    xp = _padded(x, window_identity(x.dtype, which), p)
    ext = np.maximum if which == "max" else np.minimum
    taps = list(_tap_slices(out, p))
    best = AL.copy(xp[taps[0]])
    for sl in taps[1:]:
        ext(best, xp[sl], out=best)
    masks, taken = [], None
    for sl in taps:
        m = xp[sl] == best
        if taken is None:
            taken = m.copy()
        else:
            m &= ~taken
            taken |= m
        masks.append(m)
    return xp.shape, taps, masks


def select_gather(t, x, out, which, p):
    """Per window of ``x`` (pooled shape ``out``), ``t`` at the window's selected tap."""
    if 0 in out or x.size == 0:
        return AL.zeros(t, out, t.dtype)
    _, taps, masks = _selection(x, out, which, p)
    tp = _padded(t, 0, p)
    res = AL.zeros(t, out, t.dtype)
    for sl, m in zip(taps, masks):
        np.copyto(res, tp[sl], where=m)
    return res


def select_scatter(ct, x, which, p):
    """``ct`` (pooled shape) added into ``x``'s shape at each window's selected tap."""
    out = ct.shape
    if 0 in out or x.size == 0:
        return AL.zeros(ct, x.shape, ct.dtype)
    pshape, taps, masks = _selection(x, out, which, p)
    acc = AL.zeros(ct, pshape, ct.dtype)
    # on a device, always ``where``: reading the check back to the host would stall it
    # (and stop a CUDA graph's capture)
    finite = ct.dtype.kind in "biu" or (not AL.is_device(ct) and bool(np.isfinite(ct).all()))
    for sl, m in zip(taps, masks):
        # ct * mask is exact for finite ct (x * 1 = x, x * 0 = 0); inf/NaN need where
        part = ct * m if finite else np.where(m, ct, ct.dtype.type(0))
        np.add(acc[sl], part, out=acc[sl])
    if needs_pad(p["padding"], p["base_dilation"]):
        return undilate_unpad(acc, x.shape, p["padding"], p["base_dilation"])
    return acc
