"""``dot_general``: the one contraction primitive (matmul, einsum, tensordot...).

The NumPy impl moves batch dims first and contracting dims last on the lhs
(first on the rhs) and calls ``matmul``, so BLAS runs on the contraction.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ._rules import describe, kind_of, quiet


def _free(ndim, *used):
    used = set(used[0]) | set(used[1])
    return [d for d in range(ndim) if d not in used]


def _dot_general_rule(lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    def bad(why):
        raise ShapeError(f"dot_general: {why}; lhs {describe(lhs)}, rhs {describe(rhs)}, "
                         f"dimension_numbers={dimension_numbers}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        bad("contracting and batch dimension lists must pair up")
    for dims, x in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < x.ndim for d in dims):
            bad("dimensions out of range or repeated")
    if any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lc + lb, rc + rb)):
        bad("paired dimensions have different sizes")
    if lhs.dtype != rhs.dtype:
        bad("operands must have one dtype (use fnx.numpy.matmul/einsum to promote)")
    out_dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    if preferred_element_type is not None:
        # JAX's combinations: (integral, integral), (integral, floating),
        # (floating, floating), (complex, complex); integers never narrow.
        k_in, k_out = kind_of(lhs.dtype), kind_of(out_dtype)
        ok = {"b": "biuf", "i": "iuf", "u": "iuf", "f": "f", "c": "c"}[k_in]
        if k_out not in ok or (k_in in "iu" and k_out in "iu"
                               and out_dtype.itemsize < lhs.dtype.itemsize):
            bad(f"preferred_element_type={out_dtype} is incompatible with {lhs.dtype} "
                "operands (allowed: integral -> integral (not narrower) or floating, "
                "floating -> floating, complex -> complex)")
    shape = ([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in _free(lhs.ndim, lc, lb)]
             + [rhs.shape[d] for d in _free(rhs.ndim, rc, rb)])
    return ShapeDtypeStruct(shape, out_dtype,
                            lhs.weak_type and rhs.weak_type and preferred_element_type is None)


def _dot_general_impl(lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    if preferred_element_type is not None:
        lhs = lhs.astype(preferred_element_type, copy=False)
        rhs = rhs.astype(preferred_element_type, copy=False)
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    batch = [lhs.shape[d] for d in lb]
    m = [lhs.shape[d] for d in lf]
    n = [rhs.shape[d] for d in rf]
    k = math.prod(lhs.shape[d] for d in lc)
    a = np.transpose(lhs, list(lb) + lf + list(lc)).reshape(batch + [math.prod(m), k])
    b = np.transpose(rhs, list(rb) + list(rc) + rf).reshape(batch + [k, math.prod(n)])
    return np.matmul(a, b).reshape(batch + m + n)


dot_general_p = Primitive("dot_general", shape_rule=_dot_general_rule,
                          impl=quiet(_dot_general_impl))


# --- jvp rule: bilinear ----------------------------------------------------------------------
from ..transforms.jvp import defjvp  # noqa: E402

defjvp(dot_general_p,
       lambda g, ans, x, y, **p: dot_general_p.bind(g, y, **p),
       lambda g, ans, x, y, **p: dot_general_p.bind(x, g, **p))


# --- transpose rule --------------------------------------------------------------------------
from ..transforms.vjp import is_linear  # noqa: E402


def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    if is_linear(lhs):
        x, y, xc, yc, xb, yb = lhs, rhs, lc, rc, lb, rb
    else:
        x, y, xc, yc, xb, yb = rhs, lhs, rc, lc, rb, lb
    xf = _free(len(x.shape), xc, xb)
    yf = _free(len(y.shape), yc, yb)
    # Output dims: batch, then lhs free, then rhs free.
    if is_linear(lhs):
        ct_yf = list(range(nb + len(xf), nb + len(xf) + len(yf)))
    else:
        ct_yf = list(range(nb, nb + len(yf)))
    ct_b = list(range(nb))
    # ct_x[b, xf, yc-order] = sum over y free of ct[b, ..] * y[b, yc, yf]
    res = dot_general_p.bind(ct, y, dimension_numbers=((tuple(ct_yf), tuple(yf)),
                                                (tuple(ct_b), tuple(yb))),
                             preferred_element_type=None)
    # res dims: batch (x's batch order), x free (in xf order), then y's remaining dims
    # (the contracted ones, in increasing y index), which pair with xc.
    y_rest = sorted(yc)
    x_dims = list(xb) + xf + [xc[list(yc).index(d)] for d in y_rest]
    perm = [x_dims.index(d) for d in range(len(x.shape))]
    from . import ops as L
    out = L.transpose(res, perm)
    if out.dtype != x.dtype:
        out = L.convert_element_type(out, x.dtype)
    return [out, None] if is_linear(lhs) else [None, out]


dot_general_p.transpose = _dot_general_transpose


# --- batching rule -----------------------------------------------------------------------------
def _dot_general_batch(vals, dims, size, *, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = vals
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if dims[0] is not None and dims[1] is not None:
        dn = ((up(lc), up(rc)), ((0,) + up(lb), (0,) + up(rb)))
        out_dim = 0
    elif dims[0] is not None:
        dn = ((up(lc), rc), (up(lb), rb))
        out_dim = len(lb)  # lhs dim 0 is the first lhs free dim
    else:
        dn = ((lc, up(rc)), (lb, up(rb)))
        out_dim = len(lb) + (lhs.ndim - len(lc) - len(lb))
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                             preferred_element_type=preferred_element_type)
    return out, out_dim


dot_general_p.batch = _dot_general_batch
