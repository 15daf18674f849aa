"""The backends (see ``fnx.core.backend`` for the seam they sit behind): ``numpy`` here,
registered on import, and ``cuda`` where this machine has a GPU with CuPy, or with
``FNX_GPU_EMULATE=1`` its CPU emulation (``enable_gpu_emulation()`` does the same at run
time); ``onnx`` in ``fnx.onnx``."""
from __future__ import annotations

from ..core.backend import (Backend, Executable, apply_ir, apply_scan, available_backends,
                            backend_for, get_backend, lowering, register_backend,
                            register_lowering)
from ..core.numpy_rules import NumpyRule
from ..kernels import winograd as _winograd
from . import numpy_backend as _numpy_backend

__all__ = ["Backend", "Executable", "register_backend", "get_backend", "available_backends",
           "register_lowering", "lowering", "backend_for", "apply_ir", "apply_scan", "NumpyRule",
           "enable_gpu_emulation"]

register_backend(_numpy_backend.NumPyBackend())
# 3x3 stride-1 convolutions of the NumPy impls by Winograd's algorithm, natively compiled
_winograd.install()


def enable_gpu_emulation():
    """Register the emulated GPU (the CUDA backend over ``cuda_emulation``) unless a CUDA
    backend is registered already; returns the backend."""
    from .cuda_backend import CudaBackend
    from .cuda_emulation import EMULATED_CUPY
    try:
        return get_backend("cuda")
    except ValueError:
        return register_backend(CudaBackend(EMULATED_CUPY, emulated=True))


def _register_cuda():
    from .cuda_backend import make_backend
    backend = make_backend()
    if backend is not None:
        register_backend(backend)


_register_cuda()
