"""Convolutions and windowed reductions: conv_general_dilated, conv_transpose, reduce_window.

Primitives, one block each (its shape rule and NumPy impl, then its jvp, transpose where
linear and batching rules, then its ONNX lowering where ONNX has the op, registered with
``register_lowering`` and written with ``fnx.core.onnx_rules``):

* ``conv_general_dilated``: JAX's general convolution (any dimension numbers,
  explicit padding, lhs/rhs dilation, feature and batch groups). Bilinear: its
  transposes with respect to either operand are convolutions themselves.
* ``reduce_window_sum`` / ``reduce_window_max`` / ``reduce_window_min``: what
  ``reduce_window`` binds for ``lax.add`` / ``lax.max`` / ``lax.min``.
* ``select_and_gather_add`` / ``select_and_scatter_add``: the derivative of max/min
  pooling: the tangent of the element each window selects (the first maximum, or
  minimum, in row-major window order: ties are broken deterministically), and its
  transpose, which adds each window's cotangent to that element.

The NumPy impls (im2col and one matmul per convolution, planned once per shape
signature; pooling as one strided slice per window tap combined with a ufunc) are the
NumPy backend's helper ``fnx.core.numpy_windows``; the impls and the ``"numpy"`` rules
both call it, so jit and eager agree bitwise.

Pooling helpers for layers: ``max_pool``, ``min_pool``, ``avg_pool`` and ``sum_pool``
pool over chosen spatial axes (channels-last by default, as flax does).
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..core import cuda_conv, cuda_windows
from ..core import dtypes
from ..core import numpy_windows as NW
from ..core import onnx_rules as O
from ..core.array import to_array
from ..core.backend import register_lowering
from ..core.numpy_rules import NumpyRule
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import MissingRuleError, ShapeError
from ..transforms.jvp import defjvp, deflinear, deflinear_in
from ..transforms.vjp import is_linear
from .rule_helpers import check_kind, describe, kind_of, quiet
from . import ops as L  # (rules run after import; ops imports this module)

__all__ = [
    "ConvDimensionNumbers", "avg_pool", "conv", "conv_dimension_numbers",
    "conv_general_dilated", "conv_general_shape_tuple", "conv_general_permutations", "conv_transpose",
    "conv_with_general_padding", "max_pool", "min_pool", "padtype_to_pads", "reduce_window",
    "sum_pool",
]


class ConvDimensionNumbers(namedtuple("ConvDimensionNumbers",
                                      ["lhs_spec", "rhs_spec", "out_spec"])):
    """Where each role sits in each operand: ``lhs_spec`` = (batch dim, feature dim,
    spatial dims...), ``rhs_spec`` = (out-feature dim, in-feature dim, spatial dims...),
    ``out_spec`` = (batch dim, feature dim, spatial dims...), spatial dims paired in order."""


# --- static argument handling --------------------------------------------------------------

_dilate_dim = NW.dilated_size


def _ints(op, what, v, n, minimum=1):
    try:
        out = tuple(int(x) for x in v)
    except TypeError:
        raise ShapeError(f"{op}: {what} must be a sequence of {n} ints, got {v!r}") from None
    if len(out) != n:
        raise ShapeError(f"{op}: {what} must have one entry per spatial/window dimension "
                         f"({n}), got {v!r}")
    if any(x < minimum for x in out):
        raise ShapeError(f"{op}: {what} must be >= {minimum}, got {v!r}")
    return out


def _pairs(op, padding, n):
    try:
        out = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence "
                         f"of {n} (low, high) int pairs, got {padding!r}") from None
    if len(out) != n:
        raise ShapeError(f"{op}: padding needs one (low, high) pair per spatial/window "
                         f"dimension ({n}), got {padding!r}")
    return out


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """Explicit (low, high) pairs for a padding string ('SAME': output size
    ceil(in / stride), the extra padding at the high end; 'SAME_LOWER': at the low
    end; 'VALID': none). ``window_shape`` is the dilated window."""
    if not isinstance(padding, str):
        return _pairs("padtype_to_pads", padding, len(in_shape))
    p = padding.upper()
    if p == "VALID":
        return tuple((0, 0) for _ in in_shape)
    if p not in ("SAME", "SAME_LOWER"):
        raise ShapeError(f"padding string must be 'SAME', 'SAME_LOWER' or 'VALID', got "
                         f"{padding!r}")
    out = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        n, w, s = int(n), int(w), int(s)      # Python ints out, as JAX's (not NumPy's)
        size = max((-(-n // s) - 1) * s + w - n, 0)
        lo, hi = size // 2, size - size // 2
        out.append((lo, hi) if p == "SAME" else (hi, lo))
    return tuple(out)


def conv_general_permutations(dimension_numbers):
    """(lhs_spec, rhs_spec, out_spec) from a string triple such as ('NCHW', 'OIHW', 'NCHW');
    spatial dims are ordered as in the rhs string."""
    lhs_s, rhs_s, out_s = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for s, (a, b) in zip(dimension_numbers, pairs):
        if not isinstance(s, str) or s.count(a) != 1 or s.count(b) != 1 or len(set(s)) != len(s):
            raise ShapeError(f"conv dimension_numbers: {s!r} must name '{a}' and '{b}' once each "
                             f"and every other (spatial) letter once; got {dimension_numbers!r} "
                             "(example: ('NCHW', 'OIHW', 'NCHW'))")
    sp = [set(s) - set(p) for s, p in zip(dimension_numbers, pairs)]
    if not sp[0] == sp[1] == sp[2]:
        raise ShapeError(f"conv dimension_numbers: the spatial letters of {dimension_numbers!r} "
                         "must agree across lhs, rhs and output")

    def perm(s, p):
        spatial = [i for i, c in enumerate(s) if c not in p]
        if s is not rhs_s:
            spatial.sort(key=lambda i: rhs_s.index(s[i]))
        return (s.index(p[0]), s.index(p[1])) + tuple(spatial)
    return tuple(perm(s, p) for s, p in zip(dimension_numbers, pairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """``ConvDimensionNumbers`` for operands of these shapes: from None (NCHW / OIHW /
    NCHW, any rank), a string triple, or ConvDimensionNumbers / three int tuples."""
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 2:
        raise ShapeError(f"conv: lhs and rhs must have one rank >= 2 (batch, feature, spatial "
                         f"dims), got shapes {lhs_shape} and {rhs_shape}")
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return ConvDimensionNumbers(iota, iota, iota)
    if len(dimension_numbers) != 3:
        raise ShapeError(f"conv: dimension_numbers must be a triple (lhs, rhs, out), got "
                         f"{dimension_numbers!r}")
    if all(isinstance(s, str) for s in dimension_numbers):
        for s, shape, what in zip(dimension_numbers[:2], (lhs_shape, rhs_shape), ("lhs", "rhs")):
            if len(s) != nd:
                raise ShapeError(f"conv: dimension_numbers {dimension_numbers!r}: the {what} "
                                 f"spec {s!r} has {len(s)} letters but the operands have rank "
                                 f"{nd} (lhs {lhs_shape}, rhs {rhs_shape})")
        if len(dimension_numbers[2]) != nd:
            raise ShapeError(f"conv: dimension_numbers {dimension_numbers!r}: the output spec "
                             f"must have {nd} letters")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    specs = tuple(tuple(int(d) for d in s) for s in dimension_numbers)
    for s in specs:
        if sorted(s) != list(range(nd)):
            raise ShapeError(f"conv: dimension_numbers {dimension_numbers!r}: each spec must be "
                             f"a permutation of 0..{nd - 1}")
    return ConvDimensionNumbers(*specs)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers):
    """The output shape of ``conv_general_dilated`` (no dilation) for operands of these
    shapes: ``dimension_numbers`` a string triple such as ('NHWC', 'HWIO', 'NHWC'), a
    ConvDimensionNumbers, or None (NCHW / OIHW / NCHW); ``padding`` 'SAME', 'SAME_LOWER',
    'VALID' or (low, high) pairs."""
    lhs_shape, rhs_shape = tuple(map(int, lhs_shape)), tuple(map(int, rhs_shape))
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    nsp = len(lhs_shape) - 2
    strides = _ints("conv_general_shape_tuple", "window_strides", window_strides, nsp)
    in_sp = [lhs_shape[d] for d in dn.lhs_spec[2:]]
    k_sp = [rhs_shape[d] for d in dn.rhs_spec[2:]]
    pads = padtype_to_pads(in_sp, k_sp, strides, padding)
    out = [0] * len(lhs_shape)
    out[dn.out_spec[0]] = lhs_shape[dn.lhs_spec[0]]
    out[dn.out_spec[1]] = rhs_shape[dn.rhs_spec[0]]
    for i, (n, k, s, (lo, hi)) in enumerate(zip(in_sp, k_sp, strides, pads)):
        out[dn.out_spec[2 + i]] = NW.out_size(n + lo + hi, k, s)
    return tuple(out)


# --- conv_general_dilated ------------------------------------------------------------------

def _conv_shape_rule(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                     dimension_numbers, feature_group_count, batch_group_count,
                     preferred_element_type=None):
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count

    def bad(why, fix=""):
        raise ShapeError(f"conv_general_dilated: {why}; lhs {describe(lhs)}, rhs "
                         f"{describe(rhs)}, dimension_numbers (lhs, rhs, out specs) = "
                         f"{dimension_numbers}, feature_group_count={G}, "
                         f"batch_group_count={B}.{' ' + fix if fix else ''}")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2 or any(len(s) != lhs.ndim for s in
                                                   dimension_numbers):
        bad("lhs, rhs and the three specs must have one rank >= 2")
    nsp = lhs.ndim - 2
    if lhs.dtype != rhs.dtype:
        bad("operands must have one dtype", "Convert one with lax.convert_element_type.")
    check_kind("conv_general_dilated", lhs, "iufc")
    for what, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation), ("padding", padding)):
        if len(v) != nsp:
            bad(f"{what}={v} needs one entry per spatial dimension ({nsp})")
    if G < 1 or B < 1:
        bad("group counts must be >= 1")
    if G > 1 and B > 1:
        bad("at most one of feature_group_count and batch_group_count can exceed 1")
    N, C = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    Co, Ci = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    if C % G or Ci * G != C:
        bad(f"the lhs feature size ({C}) must equal the rhs input-feature size ({Ci}) times "
            f"feature_group_count", "For a depthwise convolution of C channels use rhs "
            "input-feature size 1 and feature_group_count=C.")
    if Co % G:
        bad(f"the rhs output-feature size ({Co}) must be a multiple of feature_group_count")
    if N % B:
        bad(f"the lhs batch size ({N}) must be a multiple of batch_group_count")
    if Co % B:
        bad(f"the rhs output-feature size ({Co}) must be a multiple of batch_group_count")
    out = [0] * lhs.ndim
    out[ospec[0]], out[ospec[1]] = N // B, Co
    for i in range(nsp):
        n, k = lhs.shape[lspec[2 + i]], rhs.shape[rspec[2 + i]]
        lo, hi = padding[i]
        padded = _dilate_dim(n, lhs_dilation[i]) + lo + hi
        if padded < 0:
            bad(f"negative padding {padding[i]} removes more than spatial dimension {i} "
                f"(size {n}, dilated {_dilate_dim(n, lhs_dilation[i])}) has")
        out[ospec[2 + i]] = NW.out_size(padded, _dilate_dim(k, rhs_dilation[i]), window_strides[i])
    dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    if preferred_element_type is not None:
        k_in, k_out = kind_of(lhs.dtype), kind_of(dtype)
        if k_out not in {"i": "iuf", "u": "iuf", "f": "f", "c": "c"}[k_in]:
            bad(f"preferred_element_type={dtype} is incompatible with {lhs.dtype} operands")
    return ShapeDtypeStruct(out, dtype, lhs.weak_type and rhs.weak_type
                            and preferred_element_type is None)


def _conv_key(lshape, rshape, p, perm=None):
    pet = p.get("preferred_element_type")
    return (tuple(lshape), tuple(rshape), tuple(p["window_strides"]), tuple(p["padding"]),
            tuple(p["lhs_dilation"]), tuple(p["rhs_dilation"]),
            tuple(tuple(s) for s in p["dimension_numbers"]), p["feature_group_count"],
            p["batch_group_count"], None if pet is None else np.dtype(pet),
            None if perm is None else tuple(perm))


def _conv_impl(lhs, rhs, **p):
    return NW.conv_plan(*_conv_key(lhs.shape, rhs.shape, p))(lhs, rhs)


conv_general_dilated_p = Primitive("conv_general_dilated", shape_rule=_conv_shape_rule,
                                   impl=quiet(_conv_impl))
register_lowering(conv_general_dilated_p, "numpy", NumpyRule(
    specialize=lambda avals, params, permutation=None:
    NW.conv_plan(*_conv_key(avals[0].shape, avals[1].shape, params, permutation)),
    transposes=True))
# the GPU: one generated implicit-GEMM kernel (CuPy 14 has no cuDNN)
register_lowering(conv_general_dilated_p, "cuda_kernel", cuda_conv.conv_kernel)


defjvp(conv_general_dilated_p,
       lambda g, ans, x, y, **p: conv_general_dilated_p.bind(g, y, **p),
       lambda g, ans, x, y, **p: conv_general_dilated_p.bind(x, g, **p))


def _split(x, axis, size):
    """Axis ``axis`` of size ``size * m`` -> two axes (size, m), group-major."""
    shape = list(x.shape)
    shape[axis:axis + 1] = [size, shape[axis] // size]
    return L.reshape(x, shape)


def _merge(x, src, dst):
    """Axis ``src`` merged into axis ``dst`` (numbered with ``src`` removed) as its major
    part."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [x.shape[i] for i in range(x.ndim) if i != src]
    shape[dst] *= x.shape[src]
    return L.reshape(L.transpose(x, perm), shape)


def _swap(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _vjp_lhs_padding(in_sp, k_sp, strides, out_sp, padding, ldil, rdil):
    out = []
    for n, k, s, m, (lo, _), ld, rd in zip(in_sp, k_sp, strides, out_sp, padding, ldil, rdil):
        kd = _dilate_dim(k, rd)
        before = kd - lo - 1
        out.append((before, _dilate_dim(n, ld) + kd - 1 - _dilate_dim(m, s) - before))
    return tuple(out)


def _vjp_rhs_padding(in_sp, k_sp, strides, out_sp, padding, ldil, rdil):
    out = []
    for n, k, s, m, (lo, _), ld, rd in zip(in_sp, k_sp, strides, out_sp, padding, ldil, rdil):
        hi = (_dilate_dim(m, s) - _dilate_dim(n, ld)) + (_dilate_dim(k, rd) - lo - 1)
        out.append((lo, hi))
    return tuple(out)


def _conv_transpose_rule(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                         dimension_numbers, feature_group_count, batch_group_count,
                         preferred_element_type=None):
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count
    x, other = (lhs, rhs) if is_linear(lhs) else (rhs, lhs)
    if other.dtype != ct.dtype:   # preferred_element_type wider than the operands
        other = L.convert_element_type(other, ct.dtype)
    if 0 in ct.shape:
        res = L.broadcast_in_dim(L.convert_element_type(0, ct.dtype), tuple(x.shape), ())
    elif is_linear(lhs):
        w = other
        g = G
        if G > 1:
            w = _merge(_split(w, rspec[0], G), rspec[0], rspec[1])
        elif B > 1:
            w = _merge(_split(w, rspec[0], B), rspec[0], rspec[1])
            g = B
        pads = _vjp_lhs_padding([lhs.shape[d] for d in lspec[2:]],
                                [w.shape[d] for d in rspec[2:]], window_strides,
                                [ct.shape[d] for d in ospec[2:]], padding, lhs_dilation,
                                rhs_dilation)
        w = L.rev(w, tuple(rspec[2:]))
        res = conv_general_dilated_p.bind(
            ct, w, window_strides=tuple(lhs_dilation), padding=pads,
            lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
            dimension_numbers=(tuple(ospec), _swap(rspec), tuple(lspec)),
            feature_group_count=g, batch_group_count=1, preferred_element_type=None)
        if B > 1:
            res = _merge(_split(res, lspec[1], B), lspec[1], lspec[0])
    else:
        g2, b2 = (B, 1) if B > 1 else (1, G)
        pads = _vjp_rhs_padding([lhs.shape[d] for d in lspec[2:]],
                                [rhs.shape[d] for d in rspec[2:]], window_strides,
                                [ct.shape[d] for d in ospec[2:]], padding, lhs_dilation,
                                rhs_dilation)
        res = conv_general_dilated_p.bind(
            other, ct, window_strides=tuple(rhs_dilation), padding=pads,
            lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
            dimension_numbers=(_swap(lspec), _swap(ospec), _swap(rspec)),
            feature_group_count=g2, batch_group_count=b2, preferred_element_type=None)
    if res.dtype != x.dtype:
        res = L.convert_element_type(res, x.dtype)
    return [res, None] if is_linear(lhs) else [None, res]


conv_general_dilated_p.transpose = _conv_transpose_rule


def _conv_batch(vals, dims, size, *, dimension_numbers, feature_group_count, batch_group_count,
                **p):
    lhs, rhs = vals
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count
    if size == 0:     # an empty batch (the groups' reshapes below would divide by it)
        one = [ShapeDtypeStruct(tuple(np.delete(v.shape, d)), v.dtype) if d is not None
               else v for v, d in zip(vals, dims)]
        out = _conv_shape_rule(*one, dimension_numbers=dimension_numbers,
                               feature_group_count=G, batch_group_count=B, **p)
        return L.full((0,) + tuple(out.shape), 0, out.dtype), 0

    def bind(a, b, g, bg):
        return conv_general_dilated_p.bind(a, b, dimension_numbers=dimension_numbers,
                                           feature_group_count=g, batch_group_count=bg, **p)
    if dims[0] is not None and dims[1] is not None:
        if B > 1:
            new_lhs, B = _merge(lhs, 0, lspec[0]), B * size
        else:
            new_lhs, G = _merge(lhs, 0, lspec[1]), G * size
        out = bind(new_lhs, _merge(rhs, 0, rspec[0]), G, B)
        return _split(out, ospec[1], size), ospec[1]
    if dims[0] is not None:
        if B == 1:
            out = bind(_merge(lhs, 0, lspec[0]), rhs, G, B)
        else:
            new = _split(lhs, lspec[0] + 1, B)
            new = _merge(new, 0, lspec[0] + 1)
            new = _merge(new, lspec[0], lspec[0])
            out = bind(new, rhs, G, B)
        return _split(out, ospec[0], size), ospec[0]
    if G == 1 and B == 1:
        out = bind(lhs, _merge(rhs, 0, rspec[0]), G, B)
        return _split(out, ospec[1], size), ospec[1]
    g = max(G, B)
    new = _split(rhs, rspec[0] + 1, g)
    new = _merge(new, 0, rspec[0] + 1)
    new = _merge(new, rspec[0], rspec[0])
    out = bind(lhs, new, G, B)
    out = _split(out, ospec[1], g)
    out = _split(out, ospec[1] + 1, size)
    return _merge(out, ospec[1], ospec[1] + 1), ospec[1]


conv_general_dilated_p.batch = _conv_batch


# ONNX: Conv on operands transposed to (N, C, spatial...). Padding and lhs (base) dilation
# are applied explicitly (a Pad with zeros, interior padding by the pad-and-reshape trick
# of lax.pad's lowering), so all params are covered. Integer convolutions have no lowering
# (ONNX Conv is float only).
def _conv_general_dilated_onnx(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation,
                               rhs_dilation, dimension_numbers, feature_group_count,
                               batch_group_count, preferred_element_type=None):
    """ONNX ``Conv`` on operands transposed to (N, C, spatial...) / (O, I, spatial...).
    Negative padding crops and lhs dilation interleaves zeros before the Conv (which
    takes the positive padding); batch groups move into the channel axis as feature
    groups. float16/bfloat16 convolve in float32 where onnxruntime has no kernel."""
    la, ra = ctx.in_avals
    out = ctx.out_avals[0]
    dt = out.dtype
    if kind_of(dt) != "f":
        raise MissingRuleError(
            f"ONNX export: conv_general_dilated with a {dt.name} result has no lowering "
            "(ONNX Conv takes floating-point operands only); convolve in a float dtype "
            "(preferred_element_type=float32) and convert the result")
    if 0 in out.shape or 0 in la.shape or 0 in ra.shape:
        return O.full(ctx, 0, dt, out.shape)
    cdt = dt if dt in (O.F16, O.F32, O.F64) else O.F32
    lhs = O.cast(ctx, O.cast(ctx, lhs, la.dtype, dt), dt, cdt)
    rhs = O.cast(ctx, O.cast(ctx, rhs, ra.dtype, dt), dt, cdt)
    lspec, rspec, ospec = (tuple(s) for s in dimension_numbers)
    nsp = len(lspec) - 2
    ident = tuple(range(nsp + 2))
    x = lhs if lspec == ident else O.op(ctx, "Transpose", lhs, perm=list(lspec))
    w = rhs if rspec == ident else O.op(ctx, "Transpose", rhs, perm=list(rspec))
    shape = [la.shape[d] for d in lspec]
    ks = [ra.shape[d] for d in rspec[2:]]
    # lhs dilation and negative padding, explicitly; positive padding goes to Conv
    cfg = [(0, 0, 0), (0, 0, 0)] + [(min(lo, 0), min(hi, 0), d - 1)
                                    for (lo, hi), d in zip(padding, lhs_dilation)]
    if any(c != (0, 0, 0) for c in cfg):
        x = O.pad_config(ctx, x, shape, cfg, O.scalar(ctx, 0, cdt), cdt)
        shape = shape[:2] + [_dilate_dim(n, it + 1) + lo + hi
                             for n, (lo, hi, it) in zip(shape[2:], cfg[2:])]
    pads = [max(lo, 0) for lo, _ in padding] + [max(hi, 0) for _, hi in padding]
    group = feature_group_count
    if batch_group_count > 1:           # (B Nb, C, sp) -> (Nb, B C, sp): B feature groups
        B = batch_group_count
        N, C = shape[0], shape[1]
        x = O.reshape(ctx, x, [B, N // B] + shape[1:])
        x = O.op(ctx, "Transpose", x, perm=[1, 0] + list(range(2, nsp + 3)))
        x = O.reshape(ctx, x, [N // B, B * C] + shape[2:])
        group = B
    strides, rdil = list(window_strides), list(rhs_dilation)
    if nsp == 0:                        # Conv needs a spatial dimension: add one of size 1
        x = O.op(ctx, "Unsqueeze", x, O.ints(ctx, [2]))
        w = O.op(ctx, "Unsqueeze", w, O.ints(ctx, [2]))
        ks, strides, rdil, pads = [1], [1], [1], [0, 0]
    y = O.op(ctx, "Conv", x, w, kernel_shape=ks, strides=strides, dilations=rdil,
             pads=pads, group=group)
    if nsp == 0:
        y = O.op(ctx, "Squeeze", y, O.ints(ctx, [2]))
    perm = [0] * (nsp + 2)
    for j, d in enumerate(ospec):
        perm[d] = j
    if tuple(perm) != ident:
        y = O.op(ctx, "Transpose", y, perm=perm)
    return O.cast(ctx, y, cdt, dt)


register_lowering(conv_general_dilated_p, "onnx", _conv_general_dilated_onnx)


# --- conv_general_dilated's public forms -------------------------------------------------------

def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General dilated convolution (JAX's ``lax.conv_general_dilated``).

    ``padding``: 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per spatial
    dim (negative crops). ``lhs_dilation`` inserts holes between input elements
    (transposed convolution), ``rhs_dilation`` between kernel taps (atrous).
    ``dimension_numbers``: None (NCHW, OIHW, NCHW), a string triple such as
    ('NHWC', 'HWIO', 'NHWC'), or ConvDimensionNumbers. ``feature_group_count=C``
    with rhs input-feature size 1 is a depthwise convolution; ``batch_group_count``
    splits the batch into groups that meet separate output features. ``precision``
    is validated and changes nothing (NumPy computes in the operands' precision).
    """
    from .ops import canonicalize_precision
    canonicalize_precision(precision, "conv_general_dilated")
    lhs, rhs = to_array(lhs), to_array(rhs)
    op = "conv_general_dilated"
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    nsp = lhs.ndim - 2
    window_strides = _ints(op, "window_strides", window_strides, nsp)
    lhs_dilation = (1,) * nsp if lhs_dilation is None else \
        _ints(op, "lhs_dilation", lhs_dilation, nsp)
    rhs_dilation = (1,) * nsp if rhs_dilation is None else \
        _ints(op, "rhs_dilation", rhs_dilation, nsp)
    if isinstance(padding, str):
        lhs_sp = [lhs.shape[d] for d in dn.lhs_spec[2:]]
        eff = [_dilate_dim(rhs.shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads(lhs_sp, eff, window_strides, padding)
    else:
        padding = _pairs(op, padding, nsp)
    pet = None if preferred_element_type is None else \
        dtypes.canonical(preferred_element_type, "conv_general_dilated")
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=tuple(tuple(s) for s in dn),
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        preferred_element_type=pet)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in NCHW / OIHW layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in NCHW / OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k, s, padding):
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif not isinstance(padding, str):   # the forward convolution's (low, high) pair
        pad_a, pad_len = k - padding[0] - 1, 2 * (k - 1) - padding[0] - padding[1]
    else:
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    return pad_a, pad_len - pad_a


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """Transposed ("deconvolution") convolution, JAX's ``lax.conv_transpose``: a
    convolution with ``lhs_dilation=strides``. With 'SAME' padding a spatial size
    ``n`` becomes ``n * stride``; with 'VALID', ``n * stride + max(k - stride, 0)``
    (``k`` the dilated kernel size). Default layouts are channels-last ('NHC',
    'NHWC', 'NHWDC' with 'HIO', 'HWIO', 'HWDIO'). ``transpose_kernel=True`` flips the
    kernel's spatial dims and swaps its input/output feature dims (the gradient of
    a convolution with that kernel). Explicit (low, high) pairs pad the transposed
    convolution, unless ``use_consistent_padding`` (JAX's, PyTorch's convention): then
    they are the forward convolution's, as the strings always are."""
    lhs, rhs = to_array(lhs), to_array(rhs)
    nd = lhs.ndim
    if dimension_numbers is None:
        defaults = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                    4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}
        if nd not in defaults:
            raise ShapeError(f"conv_transpose: no default dimension_numbers for rank {nd} "
                             f"operands ({lhs.shape}, {rhs.shape}); pass dimension_numbers")
        dimension_numbers = defaults[nd]
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    nsp = nd - 2
    strides = _ints("conv_transpose", "strides", strides, nsp)
    rhs_dilation = (1,) * nsp if rhs_dilation is None else \
        _ints("conv_transpose", "rhs_dilation", rhs_dilation, nsp)
    ks = [rhs.shape[d] for d in dn.rhs_spec[2:]]
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ShapeError(f"conv_transpose: padding must be 'SAME', 'VALID' or explicit "
                             f"pairs, got {padding!r}")
        pads = [_conv_transpose_padding(_dilate_dim(k, r), s, padding.upper())
                for k, r, s in zip(ks, rhs_dilation, strides)]
    elif use_consistent_padding:
        pads = [_conv_transpose_padding(_dilate_dim(k, r), s, tuple(map(int, p)))
                for k, r, s, p in zip(ks, rhs_dilation, strides,
                                      _pairs("conv_transpose", padding, nsp))]
    else:
        pads = padding
    if transpose_kernel:
        rhs = L.rev(rhs, dn.rhs_spec[2:])
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = L.transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * nsp, pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


# --- reduce_window ---------------------------------------------------------------------------

_RW_PARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation",
              "window_dilation")


def _rw_geometry(name, shape, window_dimensions, window_strides, padding, base_dilation,
                 window_dilation, extra=""):
    nd = len(shape)
    for what, v in zip(_RW_PARAMS, (window_dimensions, window_strides, padding, base_dilation,
                                    window_dilation)):
        if len(v) != nd:
            raise ShapeError(f"{name}: {what}={v} needs one entry per operand dimension "
                             f"({nd}, operand shape {tuple(shape)}){extra}")
    for what, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if any(int(d) < 1 for d in v):
            raise ShapeError(f"{name}: {what}={v} must be >= 1 (operand shape "
                             f"{tuple(shape)}){extra}")
    out = []
    for n, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                          base_dilation, window_dilation):
        padded = _dilate_dim(n, bd) + lo + hi
        if padded < 0:
            raise ShapeError(f"{name}: negative padding {(lo, hi)} removes more than the "
                             f"dimension of size {n} has (operand shape {tuple(shape)})"
                             f"{extra}")
        out.append(NW.out_size(padded, _dilate_dim(w, wd), s))
    return tuple(out)


def _rw_shape(name, kinds):
    def rule(x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        check_kind(name, x, kinds)
        out = _rw_geometry(name, x.shape, window_dimensions, window_strides, padding,
                           base_dilation, window_dilation, f" ({describe(x)})")
        return ShapeDtypeStruct(out, x.dtype, x.weak_type)
    return rule


def _rw_impl(which):
    def impl(x, **p):
        out = _rw_geometry("reduce_window", x.shape, *(p[k] for k in _RW_PARAMS))
        return NW.reduce_windows(x, out, which, p)
    return impl


def _rw_lead(p):
    """The window params with a leading window of 1 over a batch axis."""
    q = dict(p)
    q["window_dimensions"] = (1,) + tuple(p["window_dimensions"])
    q["window_strides"] = (1,) + tuple(p["window_strides"])
    q["padding"] = ((0, 0),) + tuple(p["padding"])
    q["base_dilation"] = (1,) + tuple(p["base_dilation"])
    q["window_dilation"] = (1,) + tuple(p["window_dilation"])
    return q


def _rw_batch(prim):
    def rule(vals, dims, size, **p):
        return prim.bind(vals[0], **_rw_lead(p)), 0
    prim.batch = rule


def _chooser_jvp(prim, which):
    def rule(primals, tangents, **p):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **p)
        if t is None or x.dtype.kind not in "fc":
            return out, None
        return out, select_and_gather_add_p.bind(t, x, which=which, **p)
    prim.jvp = rule


# ONNX: reduce_window_max/min -> MaxPool (min: -MaxPool(-x)), float reduce_window_sum ->
# Conv with a kernel of ones; integer, bool and float64 sums and windows over more than 3
# dimensions -> one strided Slice per window tap, combined in the impl's order.
def _reduce_window_onnx(which):
    def lower(ctx, x, *, window_dimensions, window_strides, padding, base_dilation,
              window_dilation):
        a, out = ctx.in_avals[0], ctx.out_avals[0]
        dt, nd = a.dtype, a.ndim
        if 0 in out.shape:
            return O.full(ctx, np.zeros((), dt), dt, out.shape)
        fill = np.array(NW.window_identity(dt, which)).astype(dt)
        if 0 in a.shape:
            return O.full(ctx, fill, dt, out.shape)
        cfg = [(lo, hi, bd - 1) for (lo, hi), bd in zip(padding, base_dilation)]
        shape = [_dilate_dim(n, bd) + lo + hi
                 for n, (lo, hi), bd in zip(a.shape, padding, base_dilation)]
        if any(c != (0, 0, 0) for c in cfg):
            x = O.pad_config(ctx, x, a.shape, cfg, O.scalar(ctx, fill, dt), dt)
        active = [d for d in range(nd) if window_dimensions[d] > 1 or window_strides[d] > 1]
        if not active:
            return x
        ks = [window_dimensions[d] for d in active]
        st = [window_strides[d] for d in active]
        wd = [window_dilation[d] for d in active]
        pooled = O.is_float(dt) and (dt != O.F64 if which == "sum" else len(active) <= 3)
        if not pooled:   # one strided slice per tap, combined in row-major tap order
            xs, back = x, (lambda y: y)
            if which == "sum":
                xs, back = O.arithmetic(ctx, x, dt, {O.F32, O.F64, O.I32, O.I64})
            acc = None
            for offs in np.ndindex(*ks):
                starts = [o * d for o, d in zip(offs, wd)]
                ends = [s0 + (out.shape[d] - 1) * s + 1 for s0, d, s in zip(starts, active, st)]
                tap = O.slice_(ctx, xs, starts, ends, active, st)
                if acc is None:
                    acc = tap
                elif which == "sum":
                    acc = O.op(ctx, "Add", acc, tap)
                else:
                    acc = O.extremum(ctx, acc, tap, dt, "Max" if which == "max" else "Min")
            return back(acc)
        # pooling over (prod(other dims), 1, active dims...)
        cdt = dt if dt in (O.F16, O.F32, O.F64) else O.F32
        x = O.cast(ctx, x, dt, cdt)
        rest = [d for d in range(nd) if d not in active]
        perm = rest + active
        if perm != list(range(nd)):
            x = O.op(ctx, "Transpose", x, perm=perm)
        lead = [shape[d] for d in rest]
        x = O.reshape(ctx, x, [math.prod(lead), 1] + [shape[d] for d in active])
        if which == "sum":
            ones = O.scalar(ctx, np.ones([1, 1] + ks), cdt)
            y = O.op(ctx, "Conv", x, ones, kernel_shape=ks, strides=st, dilations=wd)
        else:
            if which == "min":
                x = O.op(ctx, "Neg", x)
            y = O.op(ctx, "MaxPool", x, kernel_shape=ks, strides=st, dilations=wd)
            if which == "min":
                y = O.op(ctx, "Neg", y)
            # MaxPool skips NaNs; the impl propagates them
            nan = O.op(ctx, "MaxPool", O.cast(ctx, O.op(ctx, "IsNaN", x), O.BOOL, cdt),
                       kernel_shape=ks, strides=st, dilations=wd)
            y = O.where(ctx, O.op(ctx, "Greater", nan, O.scalar(ctx, 0, cdt)),
                        O.scalar(ctx, np.nan, cdt), y, cdt, signed_zeros=False)
        y = O.reshape(ctx, y, lead + [out.shape[d] for d in active])
        inv = [0] * nd
        for i, d in enumerate(perm):
            inv[d] = i
        if perm != list(range(nd)):
            y = O.op(ctx, "Transpose", y, perm=inv)
        return O.cast(ctx, y, cdt, dt)
    lower.__name__ = f"lower_reduce_window_{which}"
    return lower


reduce_window_sum_p = Primitive("reduce_window_sum", shape_rule=_rw_shape(
    "reduce_window_sum", "iufc"), impl=quiet(_rw_impl("sum")))
deflinear(reduce_window_sum_p)


def _rw_sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
    in_shape = tuple(x.shape)
    pads = _vjp_lhs_padding(in_shape, window_dimensions, window_strides, ct.shape, padding,
                            base_dilation, window_dilation)
    if 0 in ct.shape:
        return [L.broadcast_in_dim(L.convert_element_type(0, ct.dtype), in_shape, ())]
    res = reduce_window_sum_p.bind(ct, window_dimensions=tuple(window_dimensions),
                                   window_strides=tuple(base_dilation), padding=pads,
                                   base_dilation=tuple(window_strides),
                                   window_dilation=tuple(window_dilation))
    return [res]


reduce_window_sum_p.transpose = _rw_sum_transpose
_rw_batch(reduce_window_sum_p)
register_lowering(reduce_window_sum_p, "onnx", _reduce_window_onnx("sum"))
register_lowering(reduce_window_sum_p, "cuda_kernel", cuda_windows.reduce_window_kernel("sum"))


reduce_window_max_p = Primitive("reduce_window_max", shape_rule=_rw_shape(
    "reduce_window_max", "biuf"), impl=quiet(_rw_impl("max")))
_chooser_jvp(reduce_window_max_p, "max")
_rw_batch(reduce_window_max_p)
register_lowering(reduce_window_max_p, "onnx", _reduce_window_onnx("max"))
register_lowering(reduce_window_max_p, "cuda_kernel", cuda_windows.reduce_window_kernel("max"))


reduce_window_min_p = Primitive("reduce_window_min", shape_rule=_rw_shape(
    "reduce_window_min", "biuf"), impl=quiet(_rw_impl("min")))
_chooser_jvp(reduce_window_min_p, "min")
_rw_batch(reduce_window_min_p)
register_lowering(reduce_window_min_p, "onnx", _reduce_window_onnx("min"))
register_lowering(reduce_window_min_p, "cuda_kernel", cuda_windows.reduce_window_kernel("min"))


# --- the selected element of each window: max/min pooling's derivative -----------------------

# (no ONNX lowering: these appear only in differentiated functions)
def _check_select(name, x, which):
    if which not in ("max", "min"):
        raise ShapeError(f"{name}: which must be 'max' or 'min', got {which!r}")
    check_kind(name, x, "biuf")


def _gather_impl(t, x, *, which, **p):
    out = _rw_geometry("select_and_gather_add", x.shape, *(p[k] for k in _RW_PARAMS))
    return NW.select_gather(t, x, out, which, p)


def _scatter_impl(ct, x, *, which, **p):
    return NW.select_scatter(ct, x, which, p)


def _gather_shape(t, x, *, which, **p):
    name = "select_and_gather_add"
    _check_select(name, x, which)
    if t.shape != x.shape or t.dtype != x.dtype:
        raise ShapeError(f"{name}: tangent and operand must have one shape and dtype, got "
                         f"{describe(t, x)}")
    out = _rw_geometry(name, x.shape, *(p[k] for k in _RW_PARAMS), f" ({describe(x)})")
    return ShapeDtypeStruct(out, t.dtype, t.weak_type)


def _scatter_shape(ct, x, *, which, **p):
    name = "select_and_scatter_add"
    _check_select(name, x, which)
    out = _rw_geometry(name, x.shape, *(p[k] for k in _RW_PARAMS), f" ({describe(x)})")
    if ct.shape != out or ct.dtype != x.dtype:
        raise ShapeError(f"{name}: the cotangent must have the pooled shape {out} and the "
                         f"operand's dtype; got cotangent and operand {describe(ct, x)}")
    return ShapeDtypeStruct(x.shape, ct.dtype, ct.weak_type)


def _select_batch(prim):
    def rule(vals, dims, size, **p):
        a, x = vals
        if dims[0] is None:
            a = L.broadcast_in_dim(a, (size,) + tuple(a.shape), tuple(range(1, a.ndim + 1)))
        if dims[1] is None:
            x = L.broadcast_in_dim(x, (size,) + tuple(x.shape), tuple(range(1, x.ndim + 1)))
        return prim.bind(a, x, **_rw_lead(p)), 0
    prim.batch = rule


select_and_gather_add_p = Primitive("select_and_gather_add", shape_rule=_gather_shape,
                                    impl=quiet(_gather_impl))
deflinear_in(select_and_gather_add_p, 0)
select_and_gather_add_p.transpose = lambda ct, t, x, **p: [
    select_and_scatter_add_p.bind(ct, x, **p), None]
_select_batch(select_and_gather_add_p)


select_and_scatter_add_p = Primitive("select_and_scatter_add", shape_rule=_scatter_shape,
                                     impl=quiet(_scatter_impl))
deflinear_in(select_and_scatter_add_p, 0)
register_lowering(select_and_scatter_add_p, "cuda_kernel", cuda_windows.select_scatter_kernel)
select_and_scatter_add_p.transpose = lambda ct, s, x, **p: [
    select_and_gather_add_p.bind(ct, x, **p), None]
_select_batch(select_and_scatter_add_p)


# --- reduce_window and pooling helpers ---------------------------------------------------------

def _window_params(op, x, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    nd = x.ndim
    wd = _ints(op, "window_dimensions", window_dimensions, nd)
    ws = _ints(op, "window_strides", window_strides, nd)
    bd = (1,) * nd if base_dilation is None else _ints(op, "base_dilation", base_dilation, nd)
    wdl = (1,) * nd if window_dilation is None else \
        _ints(op, "window_dilation", window_dilation, nd)
    if isinstance(padding, str):
        padding = padtype_to_pads(x.shape, [_dilate_dim(w, d) for w, d in zip(wd, wdl)], ws,
                                  padding)
    else:
        padding = _pairs(op, padding, nd)
    return dict(window_dimensions=wd, window_strides=ws, padding=padding, base_dilation=bd,
                window_dilation=wdl)


# The computations ``reduce_window`` recognises, by identity, as the monoid of one of its
# primitives. Libraries above lax add their own spellings (``fnx.numpy`` adds
# ``fnp.add``/``maximum``/``minimum``), so lax need not import them.
WINDOW_REDUCERS = {L.add: "sum", L.max: "max", L.min: "min"}


def _which_computation(computation):
    try:
        return WINDOW_REDUCERS.get(computation)
    except TypeError:  # an unhashable callable
        return None


def _concrete_scalar(v):
    if isinstance(v, (bool, int, float)):
        return v
    try:
        a = np.asarray(v)
    except Exception:   # a traced value
        return None
    return a[()] if a.shape == () else None


def is_identity(init, dtype, which):
    """Whether the concrete scalar ``init`` is the identity of the reduction ``which``
    ("sum", "max", "min") in ``dtype``. -inf for max and +inf for min are, whatever the
    dtype: JAX reads them so for integer operands too (max_pool passes -inf for every
    dtype)."""
    return (init == NW.window_identity(np.dtype(dtype), which)
            or init == {"max": -np.inf, "min": np.inf}.get(which))


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """Reduce every window of ``operand`` with ``computation``, JAX's ``lax.reduce_window``.

    ``computation`` must be ``lax.add``, ``lax.max`` or ``lax.min`` (or
    ``fnx.numpy.add`` / ``maximum`` / ``minimum``); they bind the differentiable
    primitives ``reduce_window_sum`` / ``reduce_window_max`` / ``reduce_window_min``.
    ``init_value`` seeds every window's accumulator, as in XLA (padding and the holes
    of ``base_dilation`` contribute nothing): with the computation's identity (0,
    -inf, +inf) it changes nothing; other values, traced ones included, are combined
    with each window's result.
    ``padding``: 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per dimension.
    """
    x = to_array(operand)
    which = _which_computation(computation)
    if which is None:
        raise ShapeError(
            f"reduce_window: computation {computation!r} is not supported; fnx reduces "
            "windows with lax.add, lax.max or lax.min (fnx.numpy.add / maximum / minimum), "
            "which are differentiable. Build other window reductions from those, or from "
            "lax.conv_general_dilated for weighted sums.")
    p = _window_params("reduce_window", x, window_dimensions, window_strides, padding,
                       base_dilation, window_dilation)
    prim = {"sum": reduce_window_sum_p, "max": reduce_window_max_p,
            "min": reduce_window_min_p}[which]
    out = prim.bind(x, **p)
    init = _concrete_scalar(init_value)
    if init is not None and is_identity(init, x.dtype, which):
        return out
    init_dtype = getattr(init_value, "dtype", None)
    init_dtype = np.dtype(init_dtype if init_dtype is not None else type(init_value))
    if x.dtype.kind in "biu" and init_dtype.kind in "fc":
        raise TypeError(f"reduce_window: init_value {init_value!r} is {init_dtype} and the "
                        f"operand is {x.dtype}: they must have one dtype, as in JAX; pass "
                        "an integer init_value (-inf for max and +inf for min are taken as "
                        "the identity)")
    init_arr = L._scalar_operand(init_value, x.dtype) if init is not None else \
        L.convert_element_type(to_array(init_value), x.dtype)
    if which == "sum":   # XLA: the accumulator starts at init; padding and holes add nothing
        return L.add(out, L.broadcast_in_dim(init_arr, out.shape, ()))
    pick = L.max if which == "max" else L.min
    return pick(out, L.broadcast_in_dim(init_arr, out.shape, ()))


def _pool_params(op, x, window_shape, strides, padding, spatial_axes):
    window_shape = tuple(int(w) for w in window_shape)
    k = len(window_shape)
    if spatial_axes is None:
        if x.ndim < k + 1:
            raise ShapeError(f"{op}: a {k}-d window needs an operand of rank >= {k + 1} "
                             f"(..., spatial..., features), got shape {x.shape}")
        spatial_axes = tuple(range(x.ndim - 1 - k, x.ndim - 1))
    spatial_axes = tuple(int(a) % x.ndim for a in spatial_axes)
    if len(spatial_axes) != k:
        raise ShapeError(f"{op}: window_shape {window_shape} and spatial_axes {spatial_axes} "
                         "must have one length")
    strides = window_shape if strides is None else tuple(int(s) for s in strides)
    wd, ws = [1] * x.ndim, [1] * x.ndim
    for a, w, s in zip(spatial_axes, window_shape, strides):
        wd[a], ws[a] = w, s
    if not isinstance(padding, str):
        pads = [(0, 0)] * x.ndim
        for a, pr in zip(spatial_axes, _pairs(op, padding, k)):
            pads[a] = pr
        padding = pads
    return tuple(wd), tuple(ws), padding


def max_pool(x, window_shape, strides=None, padding="VALID", spatial_axes=None):
    """Max pooling over ``spatial_axes`` (default: the ``len(window_shape)`` axes before
    the last, i.e. channels-last ``(batch..., spatial..., features)`` as in flax; pass
    ``spatial_axes=(2, 3)`` for NCHW). ``strides`` defaults to ``window_shape``;
    ``padding``: 'SAME', 'VALID' or (low, high) pairs per spatial axis. Gradients
    flow to the first maximum of each window."""
    x = to_array(x)
    wd, ws, pad = _pool_params("max_pool", x, window_shape, strides, padding, spatial_axes)
    return reduce_window(x, -np.inf, L.max, wd, ws, pad)


def min_pool(x, window_shape, strides=None, padding="VALID", spatial_axes=None):
    """Min pooling; arguments as ``max_pool``."""
    x = to_array(x)
    wd, ws, pad = _pool_params("min_pool", x, window_shape, strides, padding, spatial_axes)
    return reduce_window(x, np.inf, L.min, wd, ws, pad)


def sum_pool(x, window_shape, strides=None, padding="VALID", spatial_axes=None):
    """Sum over each window; arguments as ``max_pool``."""
    x = to_array(x)
    wd, ws, pad = _pool_params("sum_pool", x, window_shape, strides, padding, spatial_axes)
    return reduce_window(x, 0, L.add, wd, ws, pad)


def avg_pool(x, window_shape, strides=None, padding="VALID", spatial_axes=None,
             count_include_pad=True):
    """Average pooling; arguments as ``max_pool``. ``count_include_pad=True`` divides
    every window sum by the window size (padding counts as zeros, as flax's default);
    ``False`` divides by the number of real elements each window covers."""
    x = to_array(x)
    wd, ws, pad = _pool_params("avg_pool", x, window_shape, strides, padding, spatial_axes)
    s = reduce_window(x, 0, L.add, wd, ws, pad)
    if count_include_pad:
        return L.div(s, L._scalar_operand(math.prod(wd), s.dtype))
    p = _window_params("avg_pool", x, wd, ws, pad, None, None)
    counts = _rw_impl("sum")(np.ones(x.shape, np.float64), **p)
    return L.div(s, np.asarray(counts, s.dtype))
