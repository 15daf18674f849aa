"""Where the ONNX lowerings of the built-in primitives are.

Each primitive's ``"onnx"`` lowering is registered beside its other rules (definition,
jvp, transpose, batching) in the ``fnx.lax`` module that defines it, with
``register_lowering(prim, "onnx", rule)``; the helpers the rules are written with
(``where``, ``cast``, ``exact``, the onnxruntime kernel sets, ...) are in
``fnx.core.onnx_rules``, whose docstring also lists how the lowerings reproduce the NumPy
impls, the onnxruntime workarounds, and the primitives left out (and why).

This module keeps the names used from it: ``ONNXRUNTIME_GAPS`` and the ONNX dtype
constants.
"""
from __future__ import annotations

from ..core.onnx_rules import (BOOL, F16, F32, F64, I8, I16, I32, I64,  # noqa: F401
                               ONNXRUNTIME_GAPS, U8, U16, U32, U64)

__all__ = ["ONNXRUNTIME_GAPS"]

