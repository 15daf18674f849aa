"""Neural-network ONNX operators: convolutions, pooling, normalizations, resizing and
sampling, dropout."""
from __future__ import annotations
