"""Primitives: the only operations the IR knows.

A primitive is defined once, with every rule side by side: its shape/dtype
rule (abstract evaluation), its NumPy implementation, and the slots that
transformations and backends fill (jvp, transpose, batching, ONNX lowering,
GPU kernel). ``fnx.numpy`` and ``fnx.lax`` are thin functions that bind
primitives; nothing else reaches the backends.
"""
from __future__ import annotations

import sys

import numpy as np

from . import dtypes
from .trace import CURRENT_TRACE

_current_trace = CURRENT_TRACE.get

REGISTRY: dict[str, "Primitive"] = {}
BUILTIN: frozenset = frozenset()   # the names of fnx's own primitives (set by fnx/__init__)


class ShapeDtypeStruct:
    """Shape and dtype of an array without its data (the IR's type of a value).

    Pass instances to ``fnx.eval_shape`` or ``fnx.make_ir`` as placeholders:
    nothing is allocated or computed.
    """
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        # Shape rules build many of these: skip conversions that are not needed.
        if type(shape) is not tuple or not all(type(d) is int for d in shape):
            shape = tuple(int(d) for d in shape)
        if not (isinstance(dtype, np.dtype) and dtype in dtypes.SUPPORTED_SET):
            dtype = dtypes.canonicalize(dtype)
        self.shape = shape
        self.dtype = dtype
        self.weak_type = bool(weak_type)

    @classmethod
    def like(cls, x):
        """The struct of ``x`` (an array, a Python or NumPy scalar, a struct), with the dtype
        fnx would make of it: a Python scalar is weakly typed, and 64-bit dtypes narrow
        unless ``jax_enable_x64`` is on (``jax.ShapeDtypeStruct.like``)."""
        shape = getattr(x, "shape", None)
        if shape is None:
            shape = np.shape(x)
        dtype, weak = dtypes.dtype_and_weak(x)
        return cls(shape, dtypes.canonical(dtype), weak)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    def str_short(self):
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"


def aval_of(x) -> ShapeDtypeStruct:
    """The abstract value of anything with ``shape``/``dtype`` (weak type kept)."""
    return ShapeDtypeStruct(x.shape, x.dtype, getattr(x, "weak_type", False))


def defining_module(depth=2, reach=8):
    """The name of the module defining what the code ``depth`` frames up is creating or
    registering: the first module-level frame (``<module>``) within ``reach`` frames, so a
    rule factory run at import (``unop("sin", ...)`` in ``fnx.lax.elementwise``) names the
    module that called it; failing that, the immediate caller's module (a primitive made
    in a function at run time). Frames of this module and of Primitive subclasses'
    ``__init__`` are skipped."""
    frame = sys._getframe(depth)
    first = None
    while frame is not None and reach > 0:
        name = frame.f_globals.get("__name__")
        if name != __name__ and not (frame.f_code.co_name == "__init__"
                                     and isinstance(frame.f_locals.get("self"), Primitive)):
            if first is None:
                first = name
            if frame.f_code.co_name == "<module>":
                return name
            reach -= 1
        frame = frame.f_back
    return first


class Primitive:
    """A primitive operation.

    ``shape_rule(*avals, **params)`` returns the output ShapeDtypeStruct (a
    list of them when ``multiple_results``) or raises ``ShapeError``.
    ``impl(*numpy_values, **params)`` computes on NumPy arrays. The remaining
    attributes are rule slots, ``None`` until a transformation or backend
    registers the rule.
    """

    def __init__(self, name, *, shape_rule, impl, multiple_results=False):
        if name in REGISTRY:
            raise ValueError(f"a primitive named {name!r} is already registered")
        self.name = name
        self.shape_rule = shape_rule
        self.impl = impl
        self.multiple_results = multiple_results
        self.jvp = None          # (primals, tangents, **params) -> (primal_out, tangent_out)
        self._transpose = None   # linear primitives: (cotangent, *args, **params) -> cotangents
        self.batch = None        # (args, batch_dims, **params) -> (out, out_batch_dims)
        # A collective over named axes (params["axes"]): (args, batch_dims, size, name,
        # **params) -> (out, out_batch_dims), where ``name`` is the batch trace's axis
        # name when ``axes`` names it (the batch is the group), else None (the batch is
        # an ordinary axis the collective maps over).
        self.named_batch = None
        # Backend name -> this primitive's lowering rule for that backend
        # (``fnx.backends.register_lowering``); ``onnx``, ``kernel`` and ``numpy_codegen``
        # below are the "onnx", "cuda" and "numpy" entries.
        self.lowerings = {}
        # Applied to tangents by a jvp rule (deflinear/deflinear_in set it, and so does
        # giving it a transpose), so reverse mode needs its transpose.
        self.linear = False
        # Rules this primitive cannot have, with the reason: {"batch": "no operands"}.
        self.not_needed = {}
        # simplify (fnx.core.ir): (eqn, ins, lits, producer) -> an equal var/literal, a
        # cheaper Eqn, or None; exact rewrites only (bitwise the same result).
        self.simplify = None
        # Its output is its operand broadcast (a broadcast of a literal is that literal).
        self.broadcasts_operand = False
        # Facts about what the impl returns, which a backend plans buffers with (set where
        # the primitive is defined): it never returns (a view of) an operand; its non-0-d
        # result is always a fresh buffer; it is fresh when the dtype changes (a cast); it
        # permutes its operand (transpose). How the NumPy backend computes it is its
        # "numpy" lowering (``fnx.core.numpy_rules.NumpyRule``).
        self.never_aliases_operands = False
        self.fresh_result = False
        self.fresh_result_when_casting = False
        self.permutes = False
        # A call primitive: eqn -> the IR it computes (what an exporter inlines); None else.
        self.call_body = None
        # A primitive with sub-IRs (loops, conditionals): (params, inputs, where, locate)
        # re-runs them as its impl would, each through locate(ir, args, where_inside), so
        # jax_debug_nans names the primitive inside that made a NaN/inf.
        self.locate_nonfinite = None
        # Its impl hands its operands to user Python code that expects host (NumPy) values
        # (callbacks): a device backend runs it on host copies and puts the results back.
        self.host_callback = False
        # Eager grad compiles and caches each call signature's derivation; False for
        # primitives whose rules run user code that may need concrete values.
        self.cache_eager_vjp = True
        # The module that defines this primitive, where all its rules belong (the layering
        # test checks that every built-in primitive's lowerings are registered there).
        self.module = defining_module()
        REGISTRY[name] = self

    def _lowering_slot(backend, doc):
        def get(self):
            return self.lowerings.get(backend)

        def set(self, rule):
            if rule is None:
                self.lowerings.pop(backend, None)
            else:
                self.lowerings[backend] = rule
        return property(get, set, doc=doc)

    onnx = _lowering_slot("onnx", "ONNX lowering: ``(ctx, *input_names, **params) -> name(s)``")
    kernel = _lowering_slot("cuda", "GPU kernel hook: ``(xs, in_dtypes, out_dtype, **params) "
                                    "-> CUDA C expression``")
    numpy_codegen = _lowering_slot(
        "numpy", "jit on NumPy: a ``fnx.core.numpy_rules.NumpyRule``, or a plain "
                 "``(input expressions, params, bind_global, in_avals, out_avals) -> "
                 "expression string`` (None: call the impl)")
    del _lowering_slot

    @property
    def transpose(self):
        return self._transpose

    @transpose.setter
    def transpose(self, rule):
        self._transpose = rule
        if rule is not None:
            self.linear = True

    def bind(self, *args, **params):
        return _current_trace().process_primitive(self, args, params)

    def __repr__(self):
        return self.name

    def rules(self) -> dict:
        """Which rules this primitive has (for reports and checks)."""
        return {"impl": self.impl is not None, "shape_rule": self.shape_rule is not None,
                "jvp": self.jvp is not None, "transpose": self.transpose is not None,
                "batch": self.batch is not None or self.named_batch is not None,
                "onnx": self.onnx is not None,
                "kernel": self.kernel is not None}
