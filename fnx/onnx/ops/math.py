"""Linear algebra and reductions among the ONNX operators: MatMul, Gemm, Einsum, the
Reduce* family, softmaxes, arg-reductions, cumulative sums, TopK, quantization, losses
and signal windows."""
from __future__ import annotations
