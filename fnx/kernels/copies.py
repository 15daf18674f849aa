"""One kernel that copies several device buffers at once (a *grouped copy*).

A CUDA graph reads and writes fixed addresses, so the CUDA backend copies a call's
arguments into the graph's input buffers before a replay and its outputs out of the
graph's output buffers after one (``fnx.backends.cuda_graphs``). One launch for all of
them keeps that cost to one kernel launch, not one per buffer.

``grouped_copy(dtypes, counts)`` gives ``(name, source)``: a kernel whose parameters are a
``(const T* src, T* dst)`` pair per buffer, in order, and which copies ``counts[i]``
elements of each pair, every thread striding over the elements of every pair. The counts
are part of the source (a program's shapes are static), so the kernel takes no sizes.
Buffers must be C-contiguous; a count of 0 has no pair (pass none for it).

Element types are the dtypes' own C types; a dtype without one (float16, bfloat16,
complex) is copied as unsigned integers of its width (``copy_view``: the dtype and count
to view the buffer as; complex128 as twice as many 8-byte words).
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..core.cuda_rules import KernelUnsupported, cuda_type

__all__ = ["BLOCK", "copy_view", "grid_for", "grouped_copy"]

BLOCK = 256
_MAX_GRID = 1024
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def copy_view(dtype, count):
    """``(dtype, count)`` to copy ``count`` elements of ``dtype`` as: the dtype itself when
    kernels have a C type for it, else unsigned integers of its width (16-byte elements
    as two 8-byte words)."""
    dtype = np.dtype(dtype)
    try:
        cuda_type(dtype)
        return dtype, count
    except KernelUnsupported:
        pass
    size = dtype.itemsize
    if size in _UNSIGNED:
        return np.dtype(_UNSIGNED[size]), count
    if size % 8 == 0:
        return np.dtype(np.uint64), count * (size // 8)
    raise KernelUnsupported(f"grouped copy: no word type for {dtype.name}")


def grid_for(counts):
    """The grid (blocks of ``BLOCK`` threads) of a grouped copy of these counts."""
    most = max(counts, default=0)
    return max(1, min(_MAX_GRID, -(-most // BLOCK)))


def grouped_copy(dtypes, counts):
    """``(name, source)`` of the kernel copying ``counts[i]`` elements of ``dtypes[i]``
    (kernel types: see ``copy_view``) from the i-th source to the i-th destination."""
    if len(dtypes) != len(counts) or not counts or min(counts) <= 0:
        raise ValueError(f"grouped copy: one positive count per dtype, got {list(counts)} "
                         f"for {len(dtypes)} dtypes")
    types = [cuda_type(d) for d in dtypes]
    params = ", ".join(f"const {t}* __restrict__ s{i}, {t}* __restrict__ d{i}"
                       for i, t in enumerate(types))
    loops = "\n".join(f"    for (long long i = first; i < {n}LL; i += step) d{k}[i] = s{k}[i];"
                      for k, n in enumerate(counts))
    key = hashlib.sha1(repr((types, list(counts))).encode()).hexdigest()[:12]
    name = f"fnx_copy_{key}"
    source = (f'extern "C" __global__ void {name}({params}) {{\n'
              "    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    const long long step = (long long)gridDim.x * blockDim.x;\n"
              f"{loops}\n}}\n")
    return name, source
