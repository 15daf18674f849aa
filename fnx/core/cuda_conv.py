"""``conv_general_dilated`` on the GPU as one generated implicit-GEMM kernel.

CuPy 14 has no cuDNN (it was dropped from CuPy), so the CUDA backend computes a
convolution with a kernel of its own, generated per signature (shapes, layouts, strides,
padding, dilations and groups are constants of the source): the GEMM
``out[o, j] = sum_k rhs[o, k] * patches[k, j]`` with ``o`` an output feature, ``j`` one
(batch, output position) column and ``k`` one (input feature, kernel tap) pair, where the
patches are never materialized -- each tile of them is gathered from the input as it is
loaded into shared memory, zeros where the window reaches into padding or between the
elements of a dilated input. Any dimension numbers (the operands are read and the result
written through their layouts' strides), any number of spatial dimensions, window
strides, negative padding, lhs and rhs dilation, and feature or batch groups (one group
per ``blockIdx.z``) -- so the convolutions of the gradients are kernels too.

**Tiles.** A block of ``(BM / 4) * (BN / 4)`` threads computes a ``BM x BN`` tile of the
output, each thread a 4 x 4 patch of it in registers; the reduction runs over tiles of
``BK`` values of ``k``, both operands' tiles staged in shared memory (two barriers per
tile). ``BM`` is the output-feature count rounded up to a power of two between 16 and 64.

**Rounding.** Float32 accumulates in float32, float64 in double, one multiply and one add
per term in ``k`` order (the program is compiled without FMA contraction): within a few
ulp of NumPy's matmul-based impl times the length of the reduction, not bitwise.

**When not.** ``conv_kernel`` raises ``KernelUnsupported`` (the impl then runs on the
device: an explicit im2col and one cuBLAS GEMM) for dtypes other than float32/float64, and
where the GEMM has fewer output tiles than the device has multiprocessors over a
reduction of more than a few hundred terms (weight gradients, and input gradients of
small batches: one block per tile would walk it all, where cuBLAS splits it).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .cuda_rules import KernelUnsupported, cuda_type
from .numpy_windows import dilated_size

__all__ = ["EqnKernel", "conv_kernel"]

BK = 8
BN = 64
# A GEMM of fewer output tiles than the device has multiprocessors (an H100 has 132)
# whose reduction is longer than _LONG_K goes to the impl: each block walks its whole
# reduction at about 2 us per BK-slice (its loads' latency, two barriers), which nothing
# hides when there is one block per multiprocessor, while cuBLAS splits long reductions
# over the device. Measured on an H100 (CNN step of benchmarks/, CUDA graphs): the conv2
# weight gradient (3 tiles, K 3872) took 824 us as a kernel; with these thresholds the
# step went from 1209 to 455 us (1.25x JAX's), the same as with every convolution in the
# impl, while the kernel keeps the many-tile ones from materializing their patches.
_FEW_TILES = 128
_LONG_K = 256


@dataclass(frozen=True)
class EqnKernel:
    """A generated kernel computing one equation: ``name(inputs..., outputs...)``, all
    C-contiguous, launched on ``grid`` x ``block`` with ``shared_bytes`` of dynamic shared
    memory."""
    name: str
    source: str
    grid: tuple
    block: tuple
    shared_bytes: int = 0


def index_type(*sizes):
    """The C type of indices into arrays of ``sizes`` elements: int where they fit."""
    return "int" if max(sizes) < 2**31 else "long long"


def grid_stride_kernel(prefix, comment, params, I, var, n, lines, block=256):  # noqa: E741
    """An ``EqnKernel`` whose threads walk ``n`` elements grid-stride (``var`` the element
    index, of C type ``I``: ``index_type``'s), each running the C ``lines``; ``params``:
    the kernel's parameter list; its name is ``fnx_{prefix}_`` and a hash of the source."""
    body = "".join(f"        {ln}\n" for ln in lines)
    src = f"""
// {comment}
extern "C" __global__ void __launch_bounds__({block}) @NAME@({params})
{{
    for ({I} {var} = ({I})blockIdx.x * blockDim.x + threadIdx.x; {var} < {n}; {var} += ({I})blockDim.x * gridDim.x) {{
{body}    }}
}}
"""
    name = f"fnx_{prefix}_" + hashlib.sha1(src.encode()).hexdigest()[:12]
    grid = (max(1, min(-(-n // block), 65535)), 1, 1)
    return EqnKernel(name, src.replace("@NAME@", name), grid, (block, 1, 1))


def unflatten_lines(I, flat, shape, prefix):  # noqa: E741
    """C lines giving ``{prefix}{d}``, the coordinates of the flat index ``flat``."""
    if not shape:
        return []
    lines = [f"{I} {prefix}_rest = {flat};"]
    for d in reversed(range(len(shape))):
        lines.append(f"const {I} {prefix}{d} = {prefix}_rest % {shape[d]}; "
                     f"{prefix}_rest /= {shape[d]};")
    return lines


def _strides(shape):
    """Element strides of a C-contiguous array of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def conv_kernel(in_avals, out_avals, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count,
                preferred_element_type=None):
    """The ``EqnKernel`` of ``conv_general_dilated`` for these operand and result avals
    (the ``"cuda_kernel"`` rule), or ``KernelUnsupported`` (see the module docstring)."""
    lhs, rhs = in_avals
    (out,) = out_avals
    for a in (lhs, rhs, out):
        if np.dtype(a.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise KernelUnsupported(f"conv_general_dilated: the kernel takes float32 and "
                                    f"float64, got {np.dtype(a.dtype).name}")
    lspec, rspec, ospec = dimension_numbers
    nsp = len(lspec) - 2
    G, B = feature_group_count, batch_group_count
    groups = max(G, B)
    ls, rs, os_ = _strides(lhs.shape), _strides(rhs.shape), _strides(out.shape)
    N, C = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    Co, Ci = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    in_sp = [lhs.shape[d] for d in lspec[2:]]
    k_sp = [rhs.shape[d] for d in rspec[2:]]
    out_sp = [out.shape[d] for d in ospec[2:]]
    NB = N // B                    # batch per group (the output's batch)
    MG = Co // groups              # output features per group: the GEMM's M
    taps = math.prod(k_sp)
    K = Ci * taps
    cols = NB * math.prod(out_sp)  # the GEMM's N
    if min(MG, cols) == 0:
        raise KernelUnsupported("conv_general_dilated: an empty result needs no kernel")
    BM = min(64, max(16, 1 << (MG - 1).bit_length()))
    tiles = groups * -(-MG // BM) * -(-cols // BN)
    if tiles < _FEW_TILES and K > _LONG_K:
        raise KernelUnsupported(f"conv_general_dilated: {tiles} output tiles over a reduction "
                                f"of {K}: cuBLAS splits that better")
    T, O = cuda_type(lhs.dtype), cuda_type(out.dtype)
    acc = "double" if "double" in (T, O) else "float"
    biggest = max(math.prod(lhs.shape), math.prod(rhs.shape), math.prod(out.shape), K, cols)
    I = index_type(biggest)  # noqa: E741
    threads = (BM // 4) * (BN // 4)

    def unflatten(flat, sizes, names):
        """C statements splitting ``flat`` row-major over ``sizes`` into ``names``."""
        lines, rest = [], flat
        for i, (n, name) in enumerate(zip(sizes, names)):
            inner = math.prod(sizes[i + 1:])
            lines.append(f"const {I} {name} = ({rest}) / {inner};" if inner > 1
                         else f"const {I} {name} = {rest};")
            if inner > 1:
                lines.append(f"const {I} {name}_r = ({rest}) % {inner};")
                rest = f"{name}_r"
        return lines

    # rhs[o, c, t...] for A[m, k] (o = g * MG + m, k = c * taps + t)
    a_load = [f"const {I} o = g * {MG} + m;", f"const {I} c = k / {taps};",
              *unflatten(f"k % {taps}", k_sp, [f"t{d}" for d in range(nsp)])]
    a_off = " + ".join([f"o * {rs[rspec[0]]}", f"c * {rs[rspec[1]]}"]
                       + [f"t{d} * {rs[rspec[2 + d]]}" for d in range(nsp)])
    # lhs[n_l, channel, p...] for B[k, j] (j = n * prod(out_sp) + y, row-major)
    b_load = [f"const {I} c = k / {taps};",
              *unflatten(f"k % {taps}", k_sp, [f"t{d}" for d in range(nsp)]),
              *unflatten("j", [NB] + out_sp, ["n"] + [f"y{d}" for d in range(nsp)]),
              "bool ok = true;"]
    for d in range(nsp):
        lo = padding[d][0]
        size = dilated_size(in_sp[d], lhs_dilation[d])
        b_load.append(f"{I} p{d} = y{d} * {window_strides[d]} + t{d} * {rhs_dilation[d]} - "
                      f"({lo});")
        b_load.append(f"ok = ok && p{d} >= 0 && p{d} < {size};")
        if lhs_dilation[d] > 1:
            b_load.append(f"ok = ok && p{d} % {lhs_dilation[d]} == 0;")
            b_load.append(f"p{d} /= {lhs_dilation[d]};")
    n_l = f"(g * {NB} + n)" if B > 1 else "n"
    ch = f"(g * {Ci} + c)" if G > 1 else "c"
    b_off = " + ".join([f"{n_l} * {ls[lspec[0]]}", f"{ch} * {ls[lspec[1]]}"]
                       + [f"p{d} * {ls[lspec[2 + d]]}" for d in range(nsp)])
    # out[n, o, y...]
    w_idx = [f"const {I} o = g * {MG} + m;",
             *unflatten("j", [NB] + out_sp, ["n"] + [f"y{d}" for d in range(nsp)])]
    w_off = " + ".join([f"n * {os_[ospec[0]]}", f"o * {os_[ospec[1]]}"]
                       + [f"y{d} * {os_[ospec[2 + d]]}" for d in range(nsp)])

    def block(lines, pad):
        return "".join(f"{pad}{ln}\n" for ln in lines)

    body = f"""
// implicit-GEMM convolution: M={MG} (x {groups} groups), N={cols}, K={K}
extern "C" __global__ void __launch_bounds__({threads}) @NAME@(const {T}* __restrict__ lhs, const {T}* __restrict__ rhs, {O}* __restrict__ out)
{{
    __shared__ {acc} As[{BK}][{BM}];
    __shared__ {acc} Bs[{BK}][{BN}];
    const {I} g = blockIdx.z;
    const {I} m0 = ({I})blockIdx.y * {BM}, j0 = ({I})blockIdx.x * {BN};
    const int tid = threadIdx.x;
    const int tm = tid / {BN // 4}, tn = tid % {BN // 4};
    {acc} sum[4][4];
    for (int i = 0; i < 4; ++i)
        for (int q = 0; q < 4; ++q)
            sum[i][q] = 0;
    for ({I} k0 = 0; k0 < {K}; k0 += {BK}) {{
        for (int e = tid; e < {BM * BK}; e += {threads}) {{
            const {I} m = m0 + e / {BK}, k = k0 + e % {BK};
            {acc} v = 0;
            if (m < {MG} && k < {K}) {{
{block(a_load, " " * 16)}                v = ({acc})rhs[{a_off}];
            }}
            As[e % {BK}][e / {BK}] = v;
        }}
        for (int e = tid; e < {BK * BN}; e += {threads}) {{
            const {I} k = k0 + e / {BN}, j = j0 + e % {BN};
            {acc} v = 0;
            if (k < {K} && j < {cols}) {{
{block(b_load, " " * 16)}                if (ok) v = ({acc})lhs[{b_off}];
            }}
            Bs[e / {BN}][e % {BN}] = v;
        }}
        __syncthreads();
        for (int kk = 0; kk < {BK}; ++kk) {{
            {acc} a[4], b[4];
            for (int i = 0; i < 4; ++i) {{
                a[i] = As[kk][tm * 4 + i];
                b[i] = Bs[kk][tn * 4 + i];
            }}
            for (int i = 0; i < 4; ++i)
                for (int q = 0; q < 4; ++q)
                    sum[i][q] = sum[i][q] + a[i] * b[q];
        }}
        __syncthreads();
    }}
    for (int i = 0; i < 4; ++i) {{
        const {I} m = m0 + tm * 4 + i;
        if (m >= {MG}) continue;
        for (int q = 0; q < 4; ++q) {{
            const {I} j = j0 + tn * 4 + q;
            if (j >= {cols}) continue;
{block(w_idx, " " * 12)}            out[{w_off}] = ({O})sum[i][q];
        }}
    }}
}}
"""
    name = "fnx_conv_" + hashlib.sha1(body.encode()).hexdigest()[:12]
    grid = (-(-cols // BN), -(-MG // BM), groups)
    return EqnKernel(name, body.replace("@NAME@", name), grid, (threads, 1, 1))
