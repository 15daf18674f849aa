"""Rule constructors shared by the primitive families (and by ``fnx.extend``, whose
``unary_elementwise``/``binary_elementwise`` are ``unop``/``binop``, and the primitives
of ``fnx.random``).

They keep each primitive's definition to a few lines: ``unop``/``binop``
build a Primitive with the standard elementwise shape/dtype rule; the
``ShapeError`` helpers make every message name the op, the shapes and the
dtypes, and say what to do.
"""
from __future__ import annotations

from ..core import dtypes
from ..core.backend import register_lowering
from ..core.numpy_errstate import IGNORE_ALL, quiet  # noqa: F401 (lax's impls use quiet)
from ..core.numpy_rules import NumpyRule, ufunc_of
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.vmap import batch_elementwise

KINDS = {
    "any": "biufc", "num": "iufc", "int": "iu", "intbool": "biu", "inexact": "fc",
    "float": "f", "real": "biuf", "realnum": "iuf", "signed": "ifc",
}
_KIND_WORDS = {"biufc": "any", "iufc": "numeric", "iu": "integer", "biu": "boolean or integer",
               "fc": "floating or complex", "f": "floating", "biuf": "real",
               "iuf": "real numeric", "ifc": "signed numeric"}


# --- quiet NumPy calls ------------------------------------------------------------------
# JAX semantics: no floating-point warnings (overflow, inf - inf, 0 * inf, ...). The
# quiet error state is a NumPy-backend helper (``fnx.core.numpy_errstate``).


def kind_of(dtype):
    return "f" if dtype == dtypes.bfloat16 else dtype.kind


def describe(*avals):
    return ", ".join(f"{dtypes.short_name(a.dtype)}[{','.join(map(str, a.shape))}]"
                     for a in avals)


def check_kind(name, aval, kinds, hint=""):
    if kind_of(aval.dtype) not in kinds:
        raise ShapeError(f"{name}: needs a {_KIND_WORDS.get(kinds, kinds)} operand, got "
                         f"{describe(aval)}.{hint}")


def unop(name, impl, kinds="num", out_dtype=None, hint=""):
    """An elementwise unary primitive; ``out_dtype(dtype)`` maps the result dtype."""
    def shape_rule(x):
        check_kind(name, x, KINDS[kinds], hint)
        if out_dtype is None:
            return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)
        od = out_dtype(x.dtype)
        return ShapeDtypeStruct(x.shape, od, x.weak_type and od.kind == x.dtype.kind)
    p = Primitive(name, shape_rule=shape_rule, impl=impl)
    _lower_as_ufunc(p, impl)
    batch_elementwise(p)
    return p


def _lower_as_ufunc(p, impl):
    """An impl that is a ufunc is the primitive's NumPy lowering as it is."""
    u = ufunc_of(impl)
    if u is not None:
        register_lowering(p, "numpy", NumpyRule(ufunc=u))


def same_shapes_dtypes(name, avals, what="operands"):
    a0 = avals[0]
    for a in avals[1:]:
        if a.shape != a0.shape or a.dtype != a0.dtype:
            raise ShapeError(
                f"{name}: {what} must have equal shapes and dtypes (fnx.lax neither "
                f"broadcasts nor promotes); got {describe(*avals)}. Use the fnx.numpy "
                "function for NumPy broadcasting and type promotion, or "
                "lax.broadcast_in_dim / lax.convert_element_type first.")


def binop(name, impl, kinds="num", out_dtype=None, hint=""):
    """An elementwise binary primitive over equal dtypes and equal shapes, where a
    rank-0 operand also stands for a full one (it broadcasts, as a NumPy scalar)."""
    def shape_rule(x, y):
        if x.dtype != y.dtype or (x.shape != y.shape and x.shape and y.shape):
            raise ShapeError(
                f"{name}: operands must have one dtype and equal shapes (or one be a "
                f"scalar); got {describe(x, y)}. fnx.lax neither broadcasts nor promotes: "
                f"use fnx.numpy.{name} for NumPy broadcasting and type promotion, or "
                "lax.broadcast_in_dim / lax.convert_element_type first.")
        check_kind(name, x, KINDS[kinds], hint)
        weak = x.weak_type and y.weak_type
        return ShapeDtypeStruct(x.shape or y.shape, x.dtype if out_dtype is None else out_dtype,
                                weak if out_dtype is None else False)
    p = Primitive(name, shape_rule=shape_rule, impl=impl)
    _lower_as_ufunc(p, impl)
    batch_elementwise(p)
    return p


def normalize_axis(name, axis, ndim):
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def normalize_axes(name, axes, ndim):
    out = tuple(normalize_axis(name, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"{name}: repeated axis in {tuple(axes)}")
    return out


# lax's names of binary ops whose fnx.numpy function is named otherwise
_NUMPY_NAMES = {"sub": "subtract", "mul": "multiply", "div": "divide", "rem": "remainder",
                "pow": "power", "max": "maximum", "min": "minimum", "atan2": "arctan2",
                "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                "gt": "greater", "ge": "greater_equal", "and": "bitwise_and",
                "or": "bitwise_or", "xor": "bitwise_xor", "shift_left": "left_shift",
                "shift_right_arithmetic": "right_shift"}


def broadcast_ranked(name, xs):
    """JAX's rule for lax's n-ary elementwise ops: operands of one rank broadcast where a
    dimension is 1 (``f32[3,4]`` with ``f32[3,1]`` or ``f32[1,4]``); rank-0 operands stand
    for full ones as they are. Other shapes raise ShapeError (a TypeError, as JAX's)."""
    shaped = [x for x in xs if x.ndim]
    if len({x.shape for x in shaped}) <= 1:
        return xs
    numpy_name = _NUMPY_NAMES.get(name, name)
    hint = (f"fnx.lax broadcasts only dimensions of size 1 (as JAX's lax): use "
            f"fnx.numpy.{numpy_name} for NumPy broadcasting, or lax.broadcast_in_dim first")
    if len({x.ndim for x in shaped}) > 1:
        raise ShapeError(f"{name}: arrays must have the same number of dimensions, got "
                         f"{describe(*shaped)}. {hint}")
    shape = []
    for dims in zip(*(x.shape for x in shaped)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ShapeError(f"{name} got incompatible shapes for broadcasting: "
                             f"{describe(*shaped)}. {hint}")
        shape.append(sizes.pop() if sizes else 1)
    shape = tuple(shape)
    from .shape import broadcast_in_dim_p     # shape.py builds on this module
    return [broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=tuple(range(len(shape))))
            if x.ndim and x.shape != shape else x for x in xs]
