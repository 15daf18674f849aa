"""The backends (see ``fnx.core.backend`` for the seam they sit behind): ``numpy`` here,
registered on import; ``onnx`` in ``fnx.onnx``."""
from __future__ import annotations

from ..core.backend import (Backend, Executable, apply_ir, apply_scan, available_backends,
                            backend_for, get_backend, lowering, register_backend,
                            register_lowering)
from ..core.numpy_rules import NumpyRule
from . import numpy_backend as _numpy_backend

__all__ = ["Backend", "Executable", "register_backend", "get_backend", "available_backends",
           "register_lowering", "lowering", "backend_for", "apply_ir", "apply_scan", "NumpyRule"]

register_backend(_numpy_backend.NumPyBackend())
