"""Pooling on the GPU: ``reduce_window_{max,min,sum}`` and ``select_and_scatter_add``
(max/min pooling's derivative), one kernel each.

**reduce_window.** The impl reads the padded operand once per window tap, one array
operation each (with the padding's own copy first). Here one thread computes one pooled
element, folding its window's taps in row-major order from the first -- padding and
base-dilation holes read as the reduction's identity -- with the impl's operations
(``max``/``min`` propagate NaN and keep the second of equals, as ``np.maximum`` does for
-0 and +0; the sum adds in tap order), so the result is the impl's bit for bit.

**select_and_scatter_add.**

The impl (``numpy_windows.select_scatter``) compares every window tap against the
window's extreme, one array operation per tap, and adds the cotangent tap by tap: about
four small kernels per tap through CuPy (an H100 spent 80 us on a 2x2 pooling gradient of
a (32, 16, 26, 26) activation). Here one thread computes one element ``q`` of the
result: for each window tap ``t`` in row-major order, the window ``w`` that reaches ``q``
through ``t`` (if any), whether ``w`` selects ``t`` -- its first maximum (minimum) in tap
order, nothing when a tap is NaN, padding and base-dilation holes holding the reduction's
identity -- and if so adds ``ct[w]``. The sums run in the impl's order (tap by tap, from
zero) and skip what the impl adds as zeros, so the result is the impl's, bit for bit.
"""
from __future__ import annotations

import math

import numpy as np

from .cuda_conv import _strides, grid_stride_kernel, index_type, unflatten_lines
from .cuda_rules import KernelUnsupported, c_literal, cuda_type
from .numpy_windows import window_identity

__all__ = ["reduce_window_kernel", "select_scatter_kernel"]

def _tap_value(I, T, ident, shape, k, s, wd, bd, lo):  # noqa: E741
    """C lines giving ``v``: tap ``u`` of window ``w{d}`` of ``x`` (``shape``), read through
    the padding ``lo`` and base dilation ``bd`` (the identity ``ident`` where it lands in
    padding or a dilation hole)."""
    nd, xs = len(shape), _strides(shape)
    lines = [f"int ur = u; bool real = true; {I} off = 0;"]
    lines += [f"const int u{d} = ur % {k[d]}; ur /= {k[d]};" for d in reversed(range(nd))]
    for d in range(nd):
        lines.append(f"const {I} c{d} = w{d} * {s[d]} + ({I})u{d} * {wd[d]} - ({lo[d]});")
        lines.append(f"real = real && c{d} >= 0 && c{d} % {bd[d]} == 0 && "
                     f"c{d} / {bd[d]} < {shape[d]};")
        lines.append(f"off += (c{d} >= 0 ? c{d} / {bd[d]} : 0) * {xs[d]};")
    lines.append(f"const {T} v = real ? x[off] : {ident};")
    return lines


def select_scatter_kernel(in_avals, out_avals, *, which, window_dimensions, window_strides,
                          padding, base_dilation, window_dilation):
    """The ``EqnKernel`` of ``select_and_scatter_add`` for these avals (the
    ``"cuda_kernel"`` rule), or ``KernelUnsupported`` for dtypes other than float32 and
    float64 (the impl runs those)."""
    ct, x = in_avals
    (res,) = out_avals
    dt = np.dtype(x.dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)) or np.dtype(ct.dtype) != dt:
        raise KernelUnsupported(f"select_and_scatter_add: the kernel takes float32 and "
                                f"float64, got {dt.name}")
    n = math.prod(x.shape)
    if n == 0 or math.prod(ct.shape) == 0:
        raise KernelUnsupported("select_and_scatter_add: an empty operand needs no kernel")
    nd = len(x.shape)
    T = cuda_type(dt)
    I = index_type(n, math.prod(ct.shape))  # noqa: E741
    ident = c_literal(window_identity(dt, which), dt)
    better = ">" if which == "max" else "<"
    out_shape, cs = ct.shape, _strides(ct.shape)
    lo = [int(p[0]) for p in padding]
    bd, s, wd, k = base_dilation, window_strides, window_dilation, window_dimensions
    taps = math.prod(k)
    lines = unflatten_lines(I, "i", x.shape, "q")
    # the element's coordinate in the padded, base-dilated operand
    lines += [f"const {I} pq{d} = q{d} * {bd[d]} + ({lo[d]});" for d in range(nd)]
    lines.append(f"{T} acc = 0;")
    lines.append(f"for (int t = 0; t < {taps}; ++t) {{")
    lines.append("    int tr = t;")
    for d in reversed(range(nd)):
        lines.append(f"    const int t{d} = tr % {k[d]}; tr /= {k[d]};")
    # the window reaching this element through tap t
    for d in range(nd):
        lines.append(f"    const {I} r{d} = pq{d} - ({I})t{d} * {wd[d]};")
        lines.append(f"    if (r{d} < 0 || r{d} % {s[d]} != 0 || r{d} / {s[d]} >= {out_shape[d]}) "
                     "continue;")
        lines.append(f"    const {I} w{d} = r{d} / {s[d]};")
    # that window's selected tap: the first extreme, none where a tap is NaN
    lines.append(f"    {T} best = {ident}; int sel = -1; bool nan = false;")
    lines.append(f"    for (int u = 0; u < {taps}; ++u) {{")
    lines += ["        " + ln for ln in _tap_value(I, T, ident, x.shape, k, s, wd, bd, lo)]
    lines.append("        if (v != v) { nan = true; break; }")
    lines.append(f"        if (sel < 0 || v {better} best) {{ best = v; sel = u; }}")
    lines.append("    }")
    ct_off = " + ".join(f"w{d} * {cs[d]}" for d in range(nd))
    lines.append(f"    if (!nan && sel == t) acc = acc + ct[{ct_off}];")
    lines.append("}")
    lines.append("out[i] = acc;")
    return grid_stride_kernel(
        "select_scatter", f"select_and_scatter_add ({which}) of {tuple(ct.shape)} into "
        f"{tuple(x.shape)}", f"const {T}* __restrict__ ct, const {T}* __restrict__ x, "
        f"{cuda_type(res.dtype)}* __restrict__ out", I, "i", n, lines)


_REDUCE_TYPES = ("float32", "float64", "int32", "int64")


def reduce_window_kernel(which):
    """The ``"cuda_kernel"`` rule of ``reduce_window_{which}`` (``max``, ``min``, ``sum``):
    ``KernelUnsupported`` for dtypes other than float32, float64, int32 and int64."""
    def rule(in_avals, out_avals, *, window_dimensions, window_strides, padding,
             base_dilation, window_dilation):
        (x,) = in_avals
        (out,) = out_avals
        dt = np.dtype(x.dtype)
        if dt.name not in _REDUCE_TYPES:
            raise KernelUnsupported(f"reduce_window_{which}: the kernel takes "
                                    f"{', '.join(_REDUCE_TYPES)}, got {dt.name}")
        n, nx = math.prod(out.shape), math.prod(x.shape)
        if n == 0 or nx == 0:
            raise KernelUnsupported(f"reduce_window_{which}: an empty operand or result "
                                    "needs no kernel")
        nd = len(x.shape)
        T = cuda_type(dt)
        I = index_type(n, nx)  # noqa: E741
        ident = c_literal(window_identity(dt, which), dt)
        # np.maximum/np.minimum: NaN from either side, the second of equals (-0 vs +0)
        combine = {"max": "acc = (acc > v || acc != acc) ? acc : v;",
                   "min": "acc = (acc < v || acc != acc) ? acc : v;",
                   "sum": "acc = acc + v;"}[which]
        lo = [int(p[0]) for p in padding]
        bd, s, wd, k = base_dilation, window_strides, window_dilation, window_dimensions
        taps = math.prod(k)
        lines = unflatten_lines(I, "i", out.shape, "w")
        lines.append(f"{T} acc = {ident};")
        lines.append(f"for (int u = 0; u < {taps}; ++u) {{")
        lines += ["    " + ln for ln in _tap_value(I, T, ident, x.shape, k, s, wd, bd, lo)]
        lines.append(f"    if (u == 0) acc = v; else {{ {combine} }}")
        lines.append("}")
        lines.append("out[i] = acc;")
        return grid_stride_kernel(
            f"reduce_window_{which}", f"reduce_window_{which} of {tuple(x.shape)} into "
            f"{tuple(out.shape)}", f"const {T}* __restrict__ x, "
            f"{cuda_type(out.dtype)}* __restrict__ out", I, "i", n, lines)
    rule.__name__ = f"reduce_window_{which}_kernel"
    return rule
