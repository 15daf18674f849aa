"""Defining new primitives in user code, with the mechanism the built-in ones use.

A primitive is one ``Primitive`` object holding all of its rules side by side.
Every built-in primitive of ``fnx.lax`` is made exactly this way, so a
primitive defined here works with every transformation (``grad``, ``jvp``,
``vmap``, ``jit``, ``eval_shape``, ``make_ir``) and can be checked rule by rule
with ``fnx.testing.check_op``. Nothing in this module is private API.

The rules, and the signature each slot takes:

``Primitive(name, shape_rule=..., impl=..., multiple_results=False)``
    ``shape_rule(*avals, **params) -> ShapeDtypeStruct`` (a list when
    ``multiple_results``): the output type from the input types alone; raise
    ``ShapeError`` for bad input, naming the op, the shapes and dtypes, and what
    to do. ``impl(*numpy_arrays, **params) -> numpy array``: the computation.
    Call the primitive with ``prim.bind(*fnx_arrays, **params)``; params are
    static (hashable Python values), arrays are fnx Arrays
    (``fnx.numpy.asarray`` converts NumPy input).

``prim.jvp``: forward mode, ``(primals, tangents, **params) -> (out, out_tangent)``
    with ``None`` for a zero tangent. The helpers build it from one function per
    input: ``defjvp(prim, rule_0, rule_1, ...)`` where
    ``rule_i(g, ans, *primals, **params)`` is the output tangent contributed by
    input ``i``'s tangent ``g`` (written with fnx ops, so the rule can itself be
    differentiated); ``deflinear(prim)`` for a primitive linear in every input;
    ``deflinear_in(prim, argnum)`` for one linear input; ``defjvp_zero(prim)``
    for piecewise-constant outputs. Reverse mode needs no rule of its own: fnx
    derives it from the jvp rule.

``prim.transpose``: only for primitives that are *linear* in some inputs (those
    that a jvp rule applies to tangents, as ``deflinear`` does):
    ``(cotangent, *args, **params) -> [cotangent per arg]``, where the linear
    inputs arrive as ``UndefinedPrimal`` (test with ``is_linear``; they carry
    ``shape`` and ``dtype`` only) and get a cotangent (``None`` for zero), and
    the others are concrete values that get ``None``.

``prim.batch``: vmap, ``(args, batch_dims, size, **params) -> (out, out_batch_dim)``.
    Each of ``batch_dims`` is ``0`` (that argument's batch axis was moved to the
    front) or ``None`` (not batched); return one batched call of fnx ops, never
    a Python loop over the batch. ``batch_elementwise(prim)`` installs the rule
    of an elementwise primitive; ``move_to_front`` moves a batch axis to 0.

``prim.kernel`` (optional): a GPU kernel for an elementwise primitive,
    ``(xs, in_dtypes, out_dtype, **params) -> str``: a CUDA C expression of one
    output element, where ``xs[i]`` names a local variable holding input ``i``'s
    element (see ``fnx.kernels``).

``prim.onnx`` (optional): an ONNX lowering, ``(ctx, *input_names, **params) -> str``
    (a list for ``multiple_results``), adding nodes with ``ctx.node(op_type,
    inputs, **attrs)`` and constants with ``ctx.const(value)`` (see ``fnx.onnx``).

``unary_elementwise(name, impl, kinds)`` and ``binary_elementwise(...)`` make
an elementwise primitive with the standard shape/dtype rule and batching rule
in one line. A complete worked example is in the README ("Adding an op").
"""
from __future__ import annotations

from .core.array import Array
from .core.primitive import REGISTRY, Primitive, ShapeDtypeStruct
from .errors import MissingRuleError, ShapeError
from .lax._rules import binop as binary_elementwise
from .lax._rules import unop as unary_elementwise
from .transforms.jvp import defjvp, defjvp_zero, deflinear, deflinear_in
from .transforms.vjp import UndefinedPrimal, is_linear
from .transforms.vmap import batch_elementwise, move_to_front

__all__ = [
    "Array", "MissingRuleError", "Primitive", "REGISTRY", "ShapeDtypeStruct", "ShapeError",
    "UndefinedPrimal", "batch_elementwise", "binary_elementwise", "defjvp", "defjvp_zero",
    "deflinear", "deflinear_in", "is_linear", "move_to_front", "unary_elementwise",
]
