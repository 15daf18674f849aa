"""Where the ONNX lowerings of the built-in primitives are.

Each primitive's ``"onnx"`` lowering is registered beside its other rules (definition,
jvp, transpose, batching) in the ``fnx.lax`` module that defines it, with
``register_lowering(prim, "onnx", rule)``; the helpers the rules are written with
(``where``, ``cast``, ``exact``, the onnxruntime kernel sets, ...) are in
``fnx.core.onnx_rules``, whose docstring also lists how the lowerings reproduce the NumPy
impls, the onnxruntime workarounds, and the primitives left out (and why).

This module keeps the names code outside fnx.lax used from it: ``ONNXRUNTIME_GAPS``,
``install()`` (nothing to do now: importing ``fnx.lax`` registers every rule) and, for
lowerings not yet moved to the public helpers, the helpers' former private names
(``_op``, ``_k``, ``_cast``, ...).
"""
from __future__ import annotations

from ..core.onnx_rules import (BOOL, F16, F32, F64, I8, I16, I32, I64,  # noqa: F401
                               ONNXRUNTIME_GAPS, U8, U16, U32, U64)

__all__ = ["ONNXRUNTIME_GAPS", "install"]


def install():
    """Nothing to do: each primitive's ONNX lowering is registered where it is defined."""


# The helpers' former private names, for lowerings not yet written with the public ones.
from ..core.onnx_rules import (  # noqa: E402,F401
    ARGMAX_KERNELS as _ARGMAX, COMPARE_KERNELS as _COMPARE, CUMSUM_KERNELS as _CUMSUM,
    EINSUM_KERNELS as _EINSUM, INT64_MIN as _INT64_MIN, MINMAX_KERNELS as _MINMAX, NEG_KERNELS
    as _NEG, PAD_KERNELS as _PAD, REDUCE_ARITH_KERNELS as _REDUCE_ARITH, REDUCE_ORDER_KERNELS as
    _REDUCE_ORDER, TOPK_KERNELS as _TOPK, WHERE_KERNELS as _WHERE, WIDER as _WIDER, and_ as
    _and, any_ as _any, arithmetic as _arithmetic, binary as _simple_binary, cast as _cast,
    compare as _compare, comparison as _comparison, eq as _eq, exact as _exact, expm1 as _expm1,
    extremum as _max, full as _full, hillis_steele as _hillis_steele, identity as _identity,
    index_int64 as _index_int64, ints as _ints, is_float as _is_float, is_int as _is_int, log1p
    as _log1p, logaddexp as _logaddexp, logic as _logic, not_ as _not, op as _op, or_ as _or,
    pad as _pad, pad_config as _pad_config, reshape as _reshape, scalar as _k, signbit as
    _signbit, slice_ as _slice, tree_reduce as _tree_reduce, unary as _simple_unary, where as
    _where, wider_dtype as _wide)
