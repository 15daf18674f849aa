"""GPU kernels for fnx primitives.

``fnx.kernels.cuda`` turns an elementwise primitive's ``"cuda"`` lowering (its
``kernel`` rule slot: a function returning the CUDA C expression of one output
element) into a CUDA kernel, compiles it with NVRTC and runs it through CuPy;
``host_check`` runs the same kernel text on the CPU through g++, so kernel
semantics are tested on machines without a GPU. The built-in primitives'
expressions are registered beside their other rules in ``fnx.lax.elementwise``,
written with the helpers of ``fnx.core.cuda_rules``.

Importing this package is cheap: CuPy and NVRTC are loaded only when a kernel
is compiled or run.
"""
from . import cuda  # noqa: F401
from .cuda import (KernelCompileError, KernelError, KernelSource, KernelUnsupported,  # noqa: F401
                   compile_source, compile_sources, compiler_available, cuda_type,
                   device_available, device_load, elementwise_source, host_check,
                   host_compile, host_compiler_available, run_elementwise)
