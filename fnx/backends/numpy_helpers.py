"""Run-time helpers of the NumPy backend: functions the generated code calls in place of
a group of equations (the planning passes, ``numpy_passes``, decide where). Each computes
bitwise what the equations it replaces compute, with fewer passes over memory; those that
take ``out=`` are marked ``takes_out`` (the buffer planner may then hand them a buffer).
They know nothing of the IR."""
from __future__ import annotations

import functools
import math

import numpy as np

# The unsigned dtype of each item size: selects and ``logistic`` blend bits in it.
_BLEND_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
               8: np.dtype(np.uint64)}


def _tie_weight(a, b, *, dtype, out=None):
    """``convert(a > b) + 0.5 * convert(a == b)`` (the derivative of ``max(a, b)`` with
    respect to ``a``: 1, 1/2 at ties, 0) in about two passes instead of six; into
    ``out`` when given."""
    gt = np.greater(a, b)
    if out is None:
        out = gt.astype(dtype)
    else:
        np.copyto(out, gt)
    tie = np.equal(a, b)
    if tie.any():
        np.copyto(out, dtype.type(0.5), where=tie)
    return out


def _scale_by_tie_weight(ct, a, b, *, dtype, out=None):
    """``ct * _tie_weight(a, b)``, bitwise, in about three passes: ``ct`` times the
    boolean ``a > b`` (NumPy multiplies by its 1.0 or 0.0) when there are no ties.
    ``out`` may be ``ct``."""
    tie = np.equal(a, b)
    if tie.any():
        return np.multiply(ct, _tie_weight(a, b, dtype=dtype), out=out)
    return np.multiply(ct, np.greater(a, b), out=out)


def _logistic(x, *, out=None):
    """``logistic(x)`` exactly as its impl computes it (``e = exp(-|x|)``, then
    ``1 / (1 + e)`` where ``x >= 0`` and ``e / (1 + e)`` elsewhere) but picking the
    case by blending bits instead of ``np.where``, whose per-element branch on an
    unsorted mask costs 20x the arithmetic (1M float32: 20 -> 1.3 ms); into ``out``
    when given."""
    u = _BLEND_UINT[x.dtype.itemsize]
    mt = np.negative(np.greater_equal(x, 0), dtype=u)  # all ones where x >= 0
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    d = np.add(1, e)
    r0 = np.true_divide(e, d, out=e)
    r1 = np.true_divide(1, d, out=d)
    if out is None:
        out = np.empty(x.shape, x.dtype)
    ov = out.view(u)
    np.bitwise_xor(r1.view(u), r0.view(u), out=ov)
    np.bitwise_and(ov, mt, out=ov)
    np.bitwise_xor(ov, r0.view(u), out=ov)
    return out


_logistic.takes_out = True


def _select_int(which, *cases, out=None):
    """``select_n`` with an int32 selector: ``cases[clip(which, 0, n - 1)]`` as its impl
    (``np.choose``) picks it, the same bits, by blending case ``k`` in where
    ``which >= k`` (1M float32 of 3 cases: 6 -> 1.2 ms)."""
    u = _BLEND_UINT[cases[0].dtype.itemsize]
    if out is None:
        out = np.empty(which.shape, cases[0].dtype)
    np.copyto(out, cases[0])
    ov = out.view(u)
    m, t = np.empty(which.shape, u), np.empty(which.shape, u)
    for k in range(1, len(cases)):
        np.negative(np.greater_equal(which, k), dtype=u, out=m)
        np.bitwise_xor(cases[k].view(u), ov, out=t)
        np.bitwise_and(t, m, out=t)
        np.bitwise_xor(ov, t, out=ov)
    return out


_select_int.takes_out = True


def _helper(fn, dtype):
    """``fn`` bound to ``dtype``, marked as taking ``out=`` (its first operand may be
    passed as ``out``)."""
    fn = functools.partial(fn, dtype=dtype)
    fn.takes_out = True
    return fn


# Fused elementwise-then-reduce: the elementwise result is computed this many elements at
# a time (a few rows) into one scratch buffer that stays in the L2 cache (1 MB of
# float32) and reduced from there. (Smaller blocks pay more per-call overhead than they
# save: 64K-element blocks made a (4096, 1024) sum of squares 1.3x slower.)
_FUSED_REDUCE_ELEMS = 1 << 18


def _fused_reduce(*operands, ufunc, reducer, axes, shape, dtype):
    """``reducer.reduce(ufunc(*operands), axis=axes)`` (``axes`` trailing, not axis 0)
    without the full-size intermediate: a block of leading rows at a time. Each output
    element is reduced over the same contiguous row in the same order as unfused (a
    C-contiguous intermediate), so the result is bitwise the same; any other layout
    falls back to the unfused computation."""
    n = shape[0]
    full = [isinstance(o, np.ndarray) and o.ndim == len(shape) and o.shape[0] == n
            and n != 1 for o in operands]
    if (not any(full) or math.prod(shape) == 0
            or not all(o.flags.c_contiguous for o, f in zip(operands, full) if f)):
        return reducer.reduce(ufunc(*operands), axis=axes)
    row = math.prod(shape[1:])
    per = max(1, _FUSED_REDUCE_ELEMS // max(row, 1))
    out = np.empty(tuple(s for k, s in enumerate(shape) if k not in axes), dtype)
    buf = np.empty((min(per, n),) + tuple(shape[1:]), dtype)
    for s in range(0, n, per):
        e = min(n, s + per)
        b = buf[:e - s]
        ufunc(*[o[s:e] if f else o for o, f in zip(operands, full)], out=b)
        reducer.reduce(b, axis=axes, out=out[s:e])
    return out


def _broadcast_copy(x, *, expanded, shape):
    """``x`` (reshaped to ``expanded``) broadcast to ``shape`` as a new C-contiguous array,
    along each broadcast axis in turn, innermost first: the same values a broadcast view
    holds, laid out so that the ufunc reading it runs one long inner loop instead of one
    per short run between broadcast axes. An axis with fewer than 8 elements after it is
    filled by one strided copy per index (each a single loop: (32, 16, 13, 13) float32
    repeated along a new last axis of 2 takes 43 us, ``np.repeat`` 72 us), the others by
    ``np.repeat`` (which copies runs: 25 us for the next axis, 55 us by strided copies)."""
    r = x.reshape(expanded)
    for d in reversed(range(len(shape))):
        n = shape[d]
        if expanded[d] != 1 or n == 1:
            continue
        if math.prod(r.shape[d + 1:]) < 8:
            out = np.empty(r.shape[:d] + (n,) + r.shape[d + 1:], r.dtype)
            head = (slice(None),) * d
            for i in range(n):
                out[head + (i,)] = r[head + (0,)]
            r = out
        else:
            r = np.repeat(r, n, axis=d)
    return r
