"""JAX's bit-level ``lax`` functions: ``bitcast_convert_type`` (a primitive: the same bits
seen as another dtype), and ``population_count`` and ``clz`` (compositions of shifts,
masks and adds in the operand's own unsigned dtype, so jit, vmap and the GPU kernels come
from those primitives).
"""
from __future__ import annotations

import operator

import numpy as np

from ..core import dtypes
from ..core.array import to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.jvp import defjvp_zero
from ..transforms.vmap import batch_elementwise
from . import ops as L
from .rule_helpers import describe, quiet

__all__ = ["bitcast_convert_type", "bitcast_convert_type_p", "population_count", "clz",
           "reduce_precision", "reduce_precision_p"]


# --- bitcast_convert_type ---------------------------------------------------------------------

def _bitcast_shape(what, aval, new_dtype):
    old, new = np.dtype(aval.dtype), np.dtype(new_dtype)
    shape = tuple(aval.shape)
    if old.itemsize == new.itemsize:
        return shape
    if old.itemsize > new.itemsize:
        return shape + (old.itemsize // new.itemsize,)
    ratio = new.itemsize // old.itemsize
    if not shape or shape[-1] != ratio:
        raise ShapeError(f"{what}: {describe(aval)} to {new.name} reads {ratio} items as one, "
                         f"so the last dimension must be {ratio}; reshape the operand to "
                         f"(..., {ratio}) first")
    return shape[:-1]


def _bitcast_rule(x, *, new_dtype):
    if np.dtype(new_dtype).kind == "b" or np.dtype(x.dtype).kind == "b":
        raise TypeError(f"bitcast_convert_type: bool has no defined bit layout in XLA; "
                        f"convert {describe(x)} with convert_element_type instead")
    return ShapeDtypeStruct(_bitcast_shape("bitcast_convert_type", x, new_dtype),
                            np.dtype(new_dtype))


def _bitcast_impl(x, *, new_dtype):
    new = np.dtype(new_dtype)
    if not x.flags.c_contiguous:
        x = x.copy()   # C order (NumPy's and CuPy's copy), so the last axis is contiguous
    out = x.reshape(x.shape + (1,)).view(new) if x.ndim == 0 else x.view(new)
    return out.reshape(_bitcast_shape("bitcast_convert_type", x, new))


bitcast_convert_type_p = Primitive("bitcast_convert_type", shape_rule=_bitcast_rule,
                                   impl=_bitcast_impl)
defjvp_zero(bitcast_convert_type_p)       # as JAX: no derivative through raw bits
batch_elementwise(bitcast_convert_type_p)  # the batch axis leads; the last axis is the item's


def bitcast_convert_type(operand, new_dtype):
    """``operand``'s bits seen as ``new_dtype`` (JAX's ``lax.bitcast_convert_type``): of
    equal width, the same shape; to a narrower dtype, a new last dimension of the width
    ratio (the items in memory order, little-endian on every platform fnx runs on); to a
    wider one, that last dimension is consumed."""
    x = to_array(operand)
    new = dtypes.canonical(new_dtype, "bitcast_convert_type")
    if np.dtype(new) == x.dtype:          # the result is never weakly typed (as JAX)
        return L.convert_element_type_exact(x, x.dtype, False)
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(new))


# --- population_count and clz -----------------------------------------------------------------

def _unsigned(what, x):
    x = to_array(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{what}: needs an integer operand, got {describe(x)}")
    bits = x.dtype.itemsize * 8
    u = x if x.dtype.kind == "u" else bitcast_convert_type(x, np.dtype(f"uint{bits}"))
    return x, u, bits


def _c(u, v):
    return np.asarray(v).astype(u.dtype)[()]


def population_count(x):
    """The number of 1 bits of each element (of its two's complement for signed
    integers), in ``x``'s dtype: JAX's ``lax.population_count``. The SWAR count: pairs,
    nibbles, then bytes summed by one multiplication."""
    x, u, bits = _unsigned("population_count", x)
    m1, m2, m4 = (int.from_bytes(bytes([b]) * (bits // 8), "little") for b in (0x55, 0x33, 0x0F))
    u = L.sub(u, L.bitwise_and(L.shift_right_logical(u, _c(u, 1)), _c(u, m1)))
    u = L.add(L.bitwise_and(u, _c(u, m2)),
              L.bitwise_and(L.shift_right_logical(u, _c(u, 2)), _c(u, m2)))
    u = L.bitwise_and(L.add(u, L.shift_right_logical(u, _c(u, 4))), _c(u, m4))
    if bits > 8:
        ones = int.from_bytes(b"\x01" * (bits // 8), "little")
        u = L.shift_right_logical(L.mul(u, _c(u, ones)), _c(u, bits - 8))
    return L.convert_element_type(u, x.dtype, x.weak_type)


def clz(x):
    """The number of leading 0 bits of each element (the width for 0), in ``x``'s dtype:
    JAX's ``lax.clz``. A binary search: halves, quarters, ... of the width."""
    x, u, bits = _unsigned("clz", x)
    n = L.full(tuple(u.shape), bits, u.dtype)
    s = bits // 2
    while s:
        y = L.shift_right_logical(u, _c(u, s))
        hit = L.ne(y, _c(u, 0))
        n = L.select(hit, L.sub(n, _c(u, s)), n)
        u = L.select(hit, y, u)
        s //= 2
    return L.convert_element_type(L.sub(n, u), x.dtype, x.weak_type)   # u is now 0 or 1


# --- reduce_precision -------------------------------------------------------------------------

def _float_layout(dtype):
    """(unsigned bits dtype, exponent bits, mantissa bits) of a binary float dtype."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return np.dtype(np.uint16), 8, 7
    info = np.finfo(dtype)
    return np.dtype(f"uint{dtype.itemsize * 8}"), int(info.nexp), int(info.nmant)


def _reduce_precision_rule(x, *, exponent_bits, mantissa_bits):
    if np.dtype(x.dtype).kind != "f" and np.dtype(x.dtype).name != "bfloat16":  # ml_dtypes
        raise TypeError(f"reduce_precision: needs a floating operand, got {describe(x)}")
    return ShapeDtypeStruct(tuple(x.shape), x.dtype)


def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    """XLA's ReducePrecision: the mantissa rounded to ``mantissa_bits`` (to nearest, ties
    to even), then, where ``exponent_bits`` is fewer than the dtype's, magnitudes beyond
    that range made signed infinities and those below its normal range signed zeros;
    NaNs stay NaN, even with no mantissa bits."""
    ut, e_bits, m_bits = _float_layout(x.dtype)
    U = ut.type
    width = ut.itemsize * 8
    u = x.view(ut) if x.ndim else x.reshape(1).view(ut)
    if mantissa_bits < m_bits:
        drop = m_bits - mantissa_bits
        last = U(1 << drop)
        bias = U((1 << (drop - 1)) - 1) + ((u & last) >> U(drop))
        u = (u + bias) & ~U((1 << drop) - 1)
    if exponent_bits < e_bits:
        exp_mask = U(((1 << e_bits) - 1) << m_bits)
        sign = u & U(1 << (width - 1))
        ebias = (1 << (e_bits - 1)) - 1
        reduced = (1 << (exponent_bits - 1)) - 1
        e = u & exp_mask
        u = np.where(e > U((ebias + reduced) << m_bits), sign | exp_mask,
                     np.where(e <= U((ebias - reduced) << m_bits), sign, u))
    out = u.view(x.dtype)
    nan = np.isnan(x) if x.ndim else np.isnan(x.reshape(1))
    out = np.where(nan, x if x.ndim else x.reshape(1), out)   # NaN stays NaN (XLA's, too)
    return out if x.ndim else out.reshape(())


reduce_precision_p = Primitive("reduce_precision", shape_rule=_reduce_precision_rule,
                               impl=quiet(_reduce_precision_impl))
batch_elementwise(reduce_precision_p)


def _reduce_precision_jvp(primals, tangents, **params):
    out = reduce_precision_p.bind(*primals, **params)
    t = tangents[0]
    return out, None if t is None else reduce_precision_p.bind(t, **params)


reduce_precision_p.jvp = _reduce_precision_jvp   # linear, as JAX: the tangent rounded alike
reduce_precision_p.transpose = lambda ct, x, **p: [reduce_precision_p.bind(ct, **p)]


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """``operand`` rounded to a float format of ``exponent_bits`` and ``mantissa_bits``
    and kept in its own dtype (JAX's ``lax.reduce_precision``, XLA's semantics: see the
    impl), e.g. ``(8, 7)`` for bfloat16 and ``(5, 10)`` for float16."""
    x = to_array(operand)
    e, m = operator.index(exponent_bits), operator.index(mantissa_bits)
    if e < 1 or m < 0:
        raise ValueError(f"reduce_precision: exponent_bits must be at least 1 and "
                         f"mantissa_bits at least 0, got {e} and {m}")
    floating = x.dtype.kind == "f" or x.dtype.name == "bfloat16"
    _, e_bits, m_bits = _float_layout(x.dtype) if floating else (None, e, m)
    return reduce_precision_p.bind(x, exponent_bits=min(e, e_bits), mantissa_bits=min(m, m_bits))
