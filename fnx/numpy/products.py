"""Products: matmul, dot, tensordot, vecdot, inner, outer (all ``dot_general``)."""
from __future__ import annotations

from .. import lax
from ..core import dtypes
from ..core.array import to_array
from ..lax.rule_helpers import kind_of
from ..errors import ShapeError
from .util import broadcast_shapes, broadcast_to_shape, normalize_axis, promote


def _dot(name, a, b, dn, precision, preferred_element_type):
    """``dot_general`` of promoted operands with JAX's ``precision`` (see
    ``fnx.lax.reduced_precision``: the CPU computes in the operands' precision whatever the
    level) and ``preferred_element_type`` (the result dtype: accumulated in it where
    dot_general allows, else converted)."""
    lax.canonicalize_precision(precision, name)
    if preferred_element_type is None:
        return lax.dot_general(a, b, dn, precision)
    pet = dtypes.canonical(preferred_element_type)
    k_in, k_out = kind_of(a.dtype), kind_of(pet)
    accumulate = k_out in {"b": "biuf", "i": "iuf", "u": "iuf", "f": "f", "c": "c"}[k_in] and \
        not (k_in in "iu" and k_out in "iu" and pet.itemsize < a.dtype.itemsize)
    out = lax.dot_general(a, b, dn, precision,
                          preferred_element_type=pet if accumulate else None)
    return out if out.dtype == pet else lax.convert_element_type(out, pet)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """``x1 @ x2`` with NumPy's rules: 1-D operands are promoted and squeezed,
    leading (batch) dims broadcast. ``precision`` (validated, see ``fnx.lax.Precision``)
    and ``preferred_element_type`` (the result dtype) as in JAX."""
    a, b = promote("matmul", x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: operands must not be scalars; use multiply")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = lax.reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = lax.reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: contraction sizes differ: {_shape_of(x1)} @ {_shape_of(x2)} "
                         f"(last dim of the first, {a.shape[-1]}, must equal the second-to-last "
                         f"of the second, {b.shape[-2]})")
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    a = broadcast_to_shape(a, batch + a.shape[-2:])
    b = broadcast_to_shape(b, batch + b.shape[-2:])
    nb = len(batch)
    out = _dot("matmul", a, b, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))),
               precision, preferred_element_type)
    if squeeze_a:
        out = lax.squeeze(out, (out.ndim - 2,))
    if squeeze_b:
        out = lax.squeeze(out, (out.ndim - 1,))
    return out


def _shape_of(x):
    return getattr(x, "shape", None) or to_array(x).shape


def dot(a, b, *, precision=None, preferred_element_type=None):
    """``numpy.dot``: scalars multiply; otherwise contract a's last with b's second-to-last."""
    a, b = promote("dot", a, b)
    if a.ndim == 0 or b.ndim == 0:
        lax.canonicalize_precision(precision, "dot")
        out = lax.mul(*[broadcast_to_shape(x, broadcast_shapes("dot", a.shape, b.shape))
                        for x in (a, b)])
        if preferred_element_type is not None:
            out = lax.convert_element_type(out, dtypes.canonical(preferred_element_type))
        return out
    bc = 0 if b.ndim == 1 else b.ndim - 2
    return _dot("dot", a, b, (((a.ndim - 1,), (bc,)), ((), ())), precision,
                preferred_element_type)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    from .elementwise import conj
    a, b = promote("vdot", a, b)
    a = lax.reshape(a, (a.size,))
    b = lax.reshape(b, (b.size,))
    if a.dtype.kind == "c":
        a = conj(a)
    return _dot("vdot", a, b, (((0,), (0,)), ((), ())), precision, preferred_element_type)


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    a, b = promote("tensordot", a, b)
    if isinstance(axes, int):
        if axes > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: axes={axes} exceeds the ranks {a.ndim}, {b.ndim}")
        ca = tuple(range(a.ndim - axes, a.ndim))
        cb = tuple(range(axes))
    else:
        ca, cb = axes
        ca = (ca,) if isinstance(ca, int) else tuple(ca)
        cb = (cb,) if isinstance(cb, int) else tuple(cb)
        ca = tuple(normalize_axis("tensordot", x, a.ndim) for x in ca)
        cb = tuple(normalize_axis("tensordot", x, b.ndim) for x in cb)
    return _dot("tensordot", a, b, ((ca, cb), ((), ())), precision, preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Dot product of vectors along ``axis`` of each operand (conjugating ``x1``; as JAX,
    ``axis`` counts in each operand's own shape), broadcasting the other axes."""
    from .elementwise import conj
    a, b = promote("vecdot", x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"vecdot: needs arrays of rank >= 1, got shapes {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")
    ax1, ax2 = normalize_axis("vecdot", axis, a.ndim), normalize_axis("vecdot", axis, b.ndim)
    if a.shape[ax1] != b.shape[ax2]:
        # the contracted axis is not broadcast (the Array API, JAX): a length-1 vector
        # would otherwise dot with every element
        raise ShapeError(f"vecdot: the vectors along axis {axis} have lengths {a.shape[ax1]} "
                         f"and {b.shape[ax2]} (shapes {tuple(a.shape)} and {tuple(b.shape)}); "
                         "they must be equal")
    a = lax.transpose(a, tuple(d for d in range(a.ndim) if d != ax1) + (ax1,))
    b = lax.transpose(b, tuple(d for d in range(b.ndim) if d != ax2) + (ax2,))
    shape = broadcast_shapes("vecdot", a.shape, b.shape)
    a, b = broadcast_to_shape(a, shape), broadcast_to_shape(b, shape)
    if a.dtype.kind == "c":
        a = conj(a)
    ax = len(shape) - 1
    batch = tuple(range(ax))
    return _dot("vecdot", a, b, (((ax,), (ax,)), (batch, batch)), precision,
                preferred_element_type)


def inner(a, b, *, precision=None, preferred_element_type=None):
    a, b = promote("inner", a, b)
    if a.ndim == 0 or b.ndim == 0:
        return dot(a, b, precision=precision, preferred_element_type=preferred_element_type)
    return _dot("inner", a, b, (((a.ndim - 1,), (b.ndim - 1,)), ((), ())), precision,
                preferred_element_type)


def outer(a, b):
    a, b = promote("outer", a, b)
    a = lax.reshape(a, (a.size,))
    b = lax.reshape(b, (b.size,))
    return lax.dot_general(a, b, (((), ()), ((), ())))


def kron(a, b):
    a, b = promote("kron", a, b)
    nd = max(a.ndim, b.ndim)
    a = lax.reshape(a, (1,) * (nd - a.ndim) + a.shape)
    b = lax.reshape(b, (1,) * (nd - b.ndim) + b.shape)
    shape = tuple(d for pair in zip(a.shape, b.shape) for d in pair)
    aa = lax.broadcast_in_dim(a, shape, tuple(range(0, 2 * nd, 2)))
    bb = lax.broadcast_in_dim(b, shape, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(lax.mul(aa, bb), tuple(x * y for x, y in zip(a.shape, b.shape)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    from .elementwise import multiply, subtract
    from .manipulation import moveaxis, stack
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote("cross", a, b)
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"cross: the vectors must have 2 or 3 components, got shapes "
                         f"{a.shape} and {b.shape} (after moving the vector axes last)")
    if a.shape[-1] == 2 and b.shape[-1] == 2:  # the z component only, as NumPy
        return subtract(multiply(a[..., 0], b[..., 1]), multiply(a[..., 1], b[..., 0]))
    zero = lax.broadcast_in_dim(lax.convert_element_type(0, a.dtype), a.shape[:-1] + (1,), ())
    a = lax.concatenate([a, zero], a.ndim - 1) if a.shape[-1] == 2 else a
    zero = lax.broadcast_in_dim(lax.convert_element_type(0, b.dtype), b.shape[:-1] + (1,), ())
    b = lax.concatenate([b, zero], b.ndim - 1) if b.shape[-1] == 2 else b
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    c = stack([subtract(multiply(a1, b2), multiply(a2, b1)),
               subtract(multiply(a2, b0), multiply(a0, b2)),
               subtract(multiply(a0, b1), multiply(a1, b0))], -1)
    return moveaxis(c, -1, axisc)


# ``from .products import *`` in fnx/numpy/__init__.py exports exactly the functions defined
# here (not the modules and helpers this file imports, which would shadow real ones).
__all__ = sorted(_n for _n, _v in list(globals().items())
                 if not _n.startswith("_") and callable(_v)
                 and getattr(_v, "__module__", None) == __name__)
