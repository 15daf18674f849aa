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

Lowerings, one per backend, registered as the built-in primitives' are:
``register_lowering(prim, backend_name, rule)`` (``fnx.backends``; ``prim.kernel``,
``prim.onnx`` and ``prim.numpy_codegen`` are the ``"cuda"``, ``"onnx"`` and ``"numpy"``
entries):

``register_lowering(prim, "cuda", rule)`` (optional): a GPU kernel for an elementwise
    primitive, ``(xs, in_dtypes, out_dtype, **params) -> str``: a CUDA C expression of
    one output element, where ``xs[i]`` names a local variable holding input ``i``'s
    element (see ``fnx.kernels``).

``register_lowering(prim, "numpy", NumpyRule(...))`` (optional): how jit's generated
    NumPy code computes the primitive better than calling its impl (``NumpyRule``: the
    ufunc the impl is, a plan specialized to the avals, an expression such as a view;
    see ``fnx.core.numpy_rules``). A plain callable
    ``(input_exprs, params, bind_global, in_avals, out_avals) -> str or None`` is an
    expression. ``unary_elementwise``/``binary_elementwise`` of a ufunc register its rule.

``register_lowering(prim, "onnx", rule)`` (optional): an ONNX lowering,
    ``(ctx, *input_names, **params) -> str`` (a list for ``multiple_results``), adding
    nodes with ``ctx.node(op_type, inputs, **attrs)`` and constants with
    ``ctx.const(value)`` (see ``fnx.onnx``).

``unary_elementwise(name, impl, kinds)`` and ``binary_elementwise(...)`` make
an elementwise primitive with the standard shape/dtype rule and batching rule
in one line. A complete worked example is in the README ("Adding an op").

``fnx.extend.core`` is JAX's ``jax.extend.core`` where fnx's IR has the same thing:
``Literal``, ``Var``, ``JaxprEqn``, ``Jaxpr``, ``ClosedJaxpr`` (what ``fnx.make_jaxpr``
returns), ``Primitive`` (also JAX's ``Primitive(name)`` + ``def_impl`` +
``def_abstract_eval`` form), ``jaxpr_as_fun``, ``check_jaxpr``, ``concrete_or_error``,
``valid_jaxtype`` and ``primitives`` (every primitive as ``<name>_p``, as ``fnx.lax``).
So an interpreter written over jaxprs (``for eqn in jaxpr.eqns: eqn.primitive.bind(...)``)
runs on fnx's IR unchanged.
"""
from __future__ import annotations

import sys
import types

import numpy as np

from .core.array import Array, Tracer, to_array
from .core.backend import lowering, register_lowering
from .core.numpy_rules import NumpyRule
from .core.ir import Eqn as _Eqn
from .core.ir import Literal as _Literal
from .core.ir import Var as _Var
from .core.ir import check_ir as _check_ir
from .core.ir import eval_ir as _eval_ir
from .core.primitive import REGISTRY, Primitive, ShapeDtypeStruct
from .errors import MissingRuleError, ShapeError
from .lax.rule_helpers import binop as binary_elementwise
from .lax.rule_helpers import unop as unary_elementwise
from .transforms.jvp import defjvp, defjvp_zero, deflinear, deflinear_in
from .transforms.vjp import UndefinedPrimal, is_linear
from .transforms.vmap import batch_elementwise, move_to_front

__all__ = [
    "Array", "MissingRuleError", "Primitive", "REGISTRY", "ShapeDtypeStruct", "ShapeError",
    "UndefinedPrimal", "batch_elementwise", "binary_elementwise", "defjvp", "defjvp_zero",
    "core", "deflinear", "deflinear_in", "is_linear", "lowering", "move_to_front",
    "register_lowering", "unary_elementwise", "NumpyRule",
]


# --- fnx.extend.core: JAX's jax.extend.core names over fnx's IR -------------------------

class _JaxStylePrimitive(Primitive):
    """``Primitive(name)`` with JAX's ``def_impl`` / ``def_abstract_eval``, as well as fnx's
    keyword form (``Primitive(name, shape_rule=..., impl=...)``). ``def_impl``'s function
    takes fnx Arrays (it may call ``fnx.numpy``); ``def_abstract_eval``'s takes and returns
    ``ShapeDtypeStruct``s (``fnx.core.ShapedArray`` too)."""

    def __init__(self, name, *, shape_rule=None, impl=None, multiple_results=False):
        super().__init__(name, shape_rule=shape_rule or self._missing_shape_rule,
                         impl=impl or self._missing_impl, multiple_results=multiple_results)

    def _missing_shape_rule(self, *avals, **params):
        raise MissingRuleError(f"primitive {self.name}: no abstract evaluation rule; define "
                               "one with def_abstract_eval (or shape_rule=)")

    def _missing_impl(self, *vals, **params):
        raise MissingRuleError(f"primitive {self.name}: no implementation; define one with "
                               "def_impl (or impl=)")

    def def_impl(self, impl):
        def numpy_impl(*vals, **params):
            out = impl(*[Array(np.asarray(v)) for v in vals], **params)
            if self.multiple_results:
                return [np.asarray(o) for o in out]
            return np.asarray(out)
        self.impl = numpy_impl
        return impl

    def def_abstract_eval(self, abstract_eval):
        def shape_rule(*avals, **params):
            out = abstract_eval(*avals, **params)
            if self.multiple_results:
                return [_as_struct(o, self.name) for o in out]
            return _as_struct(out, self.name)
        self.shape_rule = shape_rule
        return abstract_eval


def _as_struct(a, name):
    if not (hasattr(a, "shape") and hasattr(a, "dtype")):
        raise TypeError(f"primitive {name}: the abstract evaluation rule must return a "
                        f"ShapeDtypeStruct (shape and dtype), got {type(a).__name__}")
    return ShapeDtypeStruct(tuple(a.shape), a.dtype, bool(getattr(a, "weak_type", False)))


def _jaxpr_as_fun(closed_jaxpr):
    """The function a ``ClosedJaxpr`` (or fnx ``IR``) stands for: ``f(*args)`` returns the
    list of its outputs, computed by binding each equation on the current trace (so it can
    itself be jitted, differentiated or batched)."""
    ir = getattr(closed_jaxpr, "ir", closed_jaxpr)

    def fun(*args):
        return _eval_ir(ir, *[to_array(a, "jaxpr_as_fun") for a in args])
    return fun


def _check_jaxpr(jaxpr):
    """Re-check every equation's types (``fnx.check_ir``); raises on an ill-typed jaxpr."""
    _check_ir(getattr(jaxpr, "ir", jaxpr))


def _concrete_or_error(force, val, context=""):
    """``force(val)`` for a concrete ``val``; a ``ConcretizationError`` (a TypeError) naming
    ``context`` for a traced one."""
    if isinstance(val, Tracer):
        val._concrete(context or "a concrete value")
    return val if force is None else force(val)


def _valid_jaxtype(x):
    """Whether ``x`` can be a value of the IR: arrays, NumPy values and Python numbers."""
    from .core import dtypes
    if isinstance(x, Array):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        try:
            dtypes.canonicalize(x.dtype)
        except TypeError:
            return False
        return True
    return dtypes.python_scalar_dtype(x) is not None


def _make_core():
    from . import _api
    core = types.ModuleType("fnx.extend.core", "JAX's jax.extend.core names over fnx's IR "
                            "(see fnx.extend).")
    primitives = types.ModuleType("fnx.extend.core.primitives",
                                  "Every primitive as <name>_p (JAX's names), as fnx.lax.")

    def primitive_attr(name):
        from . import lax
        return getattr(lax, name) if name.endswith("_p") else _no_attr(primitives, name)
    primitives.__getattr__ = primitive_attr
    core.__dict__.update(
        Literal=_Literal, Var=_Var, JaxprEqn=_Eqn, Jaxpr=_api.Jaxpr,
        ClosedJaxpr=_api.ClosedJaxpr, Primitive=_JaxStylePrimitive,
        jaxpr_as_fun=_jaxpr_as_fun, check_jaxpr=_check_jaxpr,
        concrete_or_error=_concrete_or_error, valid_jaxtype=_valid_jaxtype,
        primitives=primitives)
    core.__all__ = sorted(k for k in core.__dict__ if not k.startswith("_"))
    sys.modules[core.__name__] = core
    sys.modules[primitives.__name__] = primitives
    return core


def _no_attr(module, name):
    raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")


core = _make_core()
