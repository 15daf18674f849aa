"""Shape and indexing ONNX operators: reshaping, slicing, gathering and scattering,
padding, tiling, and the shape queries whose results are known while tracing."""
from __future__ import annotations
