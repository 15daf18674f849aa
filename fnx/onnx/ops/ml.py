"""Operators of the ``ai.onnx.ml`` and ``ai.onnx.preview.training`` domains that fnx's
arrays express (numeric feature transforms, tree ensembles, optimizer steps), and
detection post-processing (NonMaxSuppression)."""
from __future__ import annotations
