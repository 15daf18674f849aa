"""Tests of fnx.kernels.emulate: CUDA kernels, as a fused code generator writes them, run
on the CPU with CUDA's thread/block semantics, compared with NumPy; the same sources
compiled by NVRTC for sm_80 and sm_90; what CUDA leaves undefined raises.

Each source below is compiled once (one g++ run, cached on disk in a temporary
directory) and shared by the tests that use it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from fnx.kernels import cuda as C
from fnx.kernels import emulate as E
from fnx.lax import elementwise as L
from fnx.core.primitive import ShapeDtypeStruct

needs_gxx = pytest.mark.skipif(not E.emulator_available(), reason="g++ is not available")
needs_nvrtc = pytest.mark.skipif(not C.compiler_available(), reason="NVRTC is not available")
needs_device = pytest.mark.skipif(not C.device_available(), reason="no CUDA device")
with warnings.catch_warnings():   # as in test_kernels: the marker is registered nowhere else
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    gpu = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """Compiled kernels go to a temporary cache directory, not the user's."""
    old = os.environ.get("FNX_CACHE_DIR")
    os.environ["FNX_CACHE_DIR"] = str(tmp_path_factory.mktemp("fnx-cache"))
    yield
    if old is None:
        os.environ.pop("FNX_CACHE_DIR", None)
    else:
        os.environ["FNX_CACHE_DIR"] = old


# --- the kernels ---------------------------------------------------------------------------------

# A fused elementwise cluster: three inputs broadcast by index arithmetic (a stride of 0
# repeats an operand along that axis), two outputs of different dtypes; PREAMBLE's helpers.
FUSED = C.PREAMBLE + r"""
extern "C" __global__ void fused_gelu_bias(
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
        float* __restrict__ out0, double* __restrict__ out1, long long n, int cols,
        long long xs0, long long xs1, long long ws0, long long ws1, long long bs0, long long bs1)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const long long r = i / cols, c = i - r * cols;
        const float xv = x[r * xs0 + c * xs1];
        const float wv = w[r * ws0 + c * ws1];
        const float bv = b[r * bs0 + c * bs1];
        const float g = 0.5f * xv * (1.0f + tanhf(0.7978845608f * (xv + 0.044715f * xv * xv * xv)));
        out0[i] = g * wv + bv;
        out1[i] = (double)fnx_max(xv, bv) * 2.0;
    }
}
"""

# Row kernels, one block per row: a shared-memory tree down to one warp's worth of partial
# results, then that warp's shuffles.
ROWS = r"""
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// the sum (max) of v over the block, in every thread; sm holds blockDim.x floats
__device__ float block_reduce(float v, float* sm, bool is_max) {
    const int t = threadIdx.x;
    sm[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if (t < s) sm[t] = is_max ? fmaxf(sm[t], sm[t + s]) : sm[t] + sm[t + s];
        __syncthreads();
    }
    if (t < 32) {
        const float r = is_max ? warp_max(sm[t]) : warp_sum(sm[t]);
        if (t == 0) sm[0] = r;
    }
    __syncthreads();
    const float r = sm[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols)
{
    __shared__ float sm[1024];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = NEG_INF;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = block_reduce(m, sm, true);
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
    s = block_reduce(s, sm, false);
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
}

extern "C" __global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ g,
                                          const float* __restrict__ b, float* __restrict__ y,
                                          int cols, float eps)
{
    __shared__ float sm[1024];
    const float* xr = x + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
    const float mean = block_reduce(s, sm, false) / cols;
    float q = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) q += (xr[j] - mean) * (xr[j] - mean);
    const float rstd = rsqrtf(block_reduce(q, sm, false) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        y[(long long)blockIdx.x * cols + j] = (xr[j] - mean) * rstd * g[j] + b[j];
}

// A warp per row (blockDim (32, rows per block)); a partial last block's idle warps exit.
extern "C" __global__ void rowmax_warp(const double* __restrict__ x, double* __restrict__ out,
                                       int rows, int cols)
{
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    double m = -1.0e308;
    for (int j = threadIdx.x; j < cols; j += warpSize) m = fmax(m, x[(long long)row * cols + j]);
    for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == row % 32) out[row] = m;     // every lane holds the maximum
}
"""

# Atomics (shared and global, int and float) and dynamic shared memory.
ATOMICS = r"""
extern "C" __global__ void histogram(const int* __restrict__ v, long long n,
                                     unsigned int* __restrict__ counts, int nbins,
                                     float* __restrict__ total, int* __restrict__ hi)
{
    extern __shared__ unsigned int local[];
    for (int k = threadIdx.x; k < nbins; k += blockDim.x) local[k] = 0u;
    __syncthreads();
    float part = 0.0f;
    int top = -1;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        atomicAdd(&local[v[i]], 1u);
        part += 1.0f;
        top = max(top, v[i]);
    }
    __syncthreads();
    for (int k = threadIdx.x; k < nbins; k += blockDim.x)
        if (local[k]) atomicAdd(&counts[k], local[k]);
    atomicAdd(total, part);
    atomicMax(hi, top);
}

extern "C" __global__ void reverse_block(const float* __restrict__ in, float* __restrict__ out)
{
    extern __shared__ float buf[];
    const int t = threadIdx.x;
    const long long base = (long long)blockIdx.x * blockDim.x;
    buf[t] = in[base + t];
    __syncthreads();
    out[base + t] = buf[blockDim.x - 1 - t];
}
"""

# The same as reverse_block without its barrier (so without fibers: the fast path), a race
# between blocks, and a fiber kernel missing its second and third barriers.
RACES = r"""
extern "C" __global__ void reverse_no_barrier(const float* __restrict__ in, float* __restrict__ out)
{
    extern __shared__ float buf[];
    const int t = threadIdx.x;
    const long long base = (long long)blockIdx.x * blockDim.x;
    buf[t] = in[base + t];
    out[base + t] = buf[blockDim.x - 1 - t];
}

// Each block reads what the previous block wrote: right only if blocks run in order.
extern "C" __global__ void chain(float* __restrict__ out)
{
    if (threadIdx.x == 0) out[blockIdx.x + 1] = out[blockIdx.x] + 1.0f;
}

extern "C" __global__ void rotate_twice(const float* __restrict__ in, float* __restrict__ out,
                                        int fixed)
{
    __shared__ float buf[128];
    const int t = threadIdx.x, n = blockDim.x;
    buf[t] = in[t];
    __syncthreads();
    const float v = buf[(t + 1) % n];
    if (fixed) __syncthreads();
    buf[t] = 2.0f * v;
    if (fixed) __syncthreads();
    out[t] = buf[(t + 1) % n];
}
"""

# Every warp collective, on 64 threads (two warps); lanes split into groups by mask.
WARPS = r"""
extern "C" __global__ void warp_ops(const int* __restrict__ v, int* __restrict__ out)
{
    const int t = threadIdx.x, lane = t & 31;
    const int x = v[t];
    int* o = out + t * 12;
    o[0] = __shfl_sync(0xffffffffu, x, 3);
    o[1] = __shfl_sync(0xffffffffu, x, lane + 5, 16);
    o[2] = __shfl_up_sync(0xffffffffu, x, 2);
    o[3] = __shfl_down_sync(0xffffffffu, x, 3, 8);
    o[4] = __shfl_xor_sync(0xffffffffu, x, 5);
    o[5] = (int)__ballot_sync(0xffffffffu, x > 0);
    o[6] = __any_sync(0xffffffffu, x > 40) + 2 * __all_sync(0xffffffffu, x > -100);
    o[7] = __reduce_add_sync(0xffffffffu, x);
    o[8] = __reduce_max_sync(0xffffffffu, x);
    o[9] = __syncthreads_count(x > 0);
    if (lane < 16) o[10] = __shfl_xor_sync(0x0000ffffu, x, 1);
    else o[10] = __shfl_xor_sync(0xffff0000u, x, 2);
    __syncwarp();
    o[11] = __syncthreads_or(x == 7) + 2 * __syncthreads_and(x > -100);
}
"""

# What CUDA leaves undefined (each launch must raise).
MISUSE = r"""
extern "C" __global__ void exit_before_barrier(float* out)
{
    if (blockIdx.x == 1 && threadIdx.x >= 100) return;   // block 0 is fine
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
extern "C" __global__ void two_barriers(float* out)
{
    if (threadIdx.x < 64) {
        out[threadIdx.x] = 1.0f;
        __syncthreads();
    } else {
        __syncthreads();
    }
}
extern "C" __global__ void shuffle_exited_lane(float* out)
{
    float v = threadIdx.x;
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 1);
}
extern "C" __global__ void mask_without_self(float* out)
{
    out[threadIdx.x] = __shfl_sync(0x1u, 1.0f, 0);
}
extern "C" __global__ void partial_warp_mask(float* out)
{
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
extern "C" __global__ void read_outside_mask(float* out)
{
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1.0f, 20, 32);
}
extern "C" __global__ void big_static_shared(float* out)
{
    __shared__ float a[8192];
    __shared__ float b[8192];
    a[threadIdx.x] = 1.0f;
    b[threadIdx.x] = 2.0f;
    out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}
extern "C" __global__ void traps(float* out)
{
    if (threadIdx.x == 3) __trap();
}
extern "C" __global__ void asserts(float* out)
{
    assert(threadIdx.x != 5);
}
extern "C" __global__ void off_by_one(const float* __restrict__ in, float* __restrict__ out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = in[i] + 1.0f;          // i == n reads and writes one past the end
}
extern "C" __global__ void in_place(float* __restrict__ x, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * x[i];
}
extern "C" __global__ void __launch_bounds__(128) bounded(float* out)
{
    out[threadIdx.x] = 1.0f;
}
"""

# Barriers reached through helpers, macros and member functions choose fibers.
ANALYSIS = r"""
#define WARP_SUM(v) for (int o_ = 16; o_ > 0; o_ >>= 1) v += __shfl_down_sync(0xffffffffu, v, o_)
__device__ float via_macro(float v) { WARP_SUM(v); return v; }
__device__ float indirect(float v) { return via_macro(v) + 1.0f; }
struct Pairs {
    __device__ float operator()(float v) const { return v + __shfl_xor_sync(0xffffffffu, v, 1); }
};
__device__ float plain(float v) { return v * 2.0f; }

extern "C" __global__ void uses_indirect(float* out) { out[threadIdx.x] = indirect(out[threadIdx.x]); }
extern "C" __global__ void uses_functor(float* out) { Pairs p; out[threadIdx.x] = p(out[threadIdx.x]); }
extern "C" __global__ void uses_plain(float* out) { out[threadIdx.x] = plain(out[threadIdx.x]); }
"""

SOURCES = {"fused": FUSED, "rows": ROWS, "atomics": ATOMICS, "races": RACES, "warps": WARPS,
           "analysis": ANALYSIS}


def module(name):
    return E.compile_kernels(SOURCES[name])


# --- results against NumPy -------------------------------------------------------------------------

@needs_gxx
def test_fused_elementwise_broadcasting_by_strides():
    rng = np.random.default_rng(0)
    rows, cols = 37, 129
    x = rng.standard_normal((cols, rows)).astype(np.float32).T      # a transposed view
    w = rng.standard_normal(cols).astype(np.float32)                 # broadcast along rows
    b = np.asarray(rng.standard_normal(), np.float32)                # rank 0: strides (0, 0)
    out0 = np.empty((rows, cols), np.float32)
    out1 = np.empty((rows, cols), np.float64)
    n = rows * cols
    xs = [s // 4 for s in x.strides]
    m = module("fused")
    assert not m.kernels["fused_gelu_bias"].fibers
    m.launch("fused_gelu_bias", (n + 127) // 128 // 3, 128,   # fewer threads than elements
             (x, w, b, out0, out1, n, np.int32(cols), *xs, 0, 1, 0, 0), allow_strided=True)
    g = 0.5 * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))
    np.testing.assert_allclose(out0, g * w + b, rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(out1, np.maximum(x, b).astype(np.float64) * 2)
    with pytest.raises(E.KernelLaunchError, match="non-contiguous.*allow_strided"):
        m.launch("fused_gelu_bias", 1, 128, (x, w, b, out0, out1, n, np.int32(cols), *xs, 0, 1, 0, 0))


@needs_gxx
@pytest.mark.parametrize("block", [64, 256, 1024])
def test_block_per_row_softmax_and_layernorm(block):
    rng = np.random.default_rng(block)
    x = (rng.standard_normal((50, 300)) * 4).astype(np.float32)
    m = module("rows")
    assert m.kernels["softmax_rows"].fibers and m.kernels["softmax_rows"].max_threads == 1024
    y = np.empty_like(x)
    m.launch("softmax_rows", x.shape[0], block, (x, y, np.int32(x.shape[1])))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=2e-5, atol=1e-7)
    g = rng.standard_normal(300).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    m.launch("layernorm_rows", x.shape[0], block, (x, g, b, y, np.int32(300), np.float32(1e-5)))
    mean = x.mean(1, keepdims=True)
    want = (x - mean) / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@needs_gxx
def test_row_kernels_do_not_depend_on_thread_order_or_workers():
    x = np.random.default_rng(1).standard_normal((64, 513)).astype(np.float32)
    m = module("rows")
    results = []
    for schedule, workers in [("forward", 1), ("reverse", 1), ("shuffle", 2), ("shuffle", 1)]:
        y = np.empty_like(x)
        m.launch("softmax_rows", 64, 128, (x, y, np.int32(513)), schedule=schedule, seed=7,
                 workers=workers)
        results.append(y)
    for y in results[1:]:
        np.testing.assert_array_equal(y, results[0])


@needs_gxx
def test_warp_per_row_reduction():
    x = np.random.default_rng(2).standard_normal((23, 77))
    out = np.full(23, np.nan)
    m = module("rows")
    m.launch("rowmax_warp", (23 + 3) // 4, (32, 4), (x, out, np.int32(23), np.int32(77)))
    np.testing.assert_array_equal(out, x.max(1))


@needs_gxx
@pytest.mark.parametrize("workers", [1, 2])
def test_atomic_histogram_with_dynamic_shared_memory(workers):
    rng = np.random.default_rng(3)
    nbins = 37
    v = rng.integers(0, nbins, 100_000).astype(np.int32)
    counts = np.zeros(nbins, np.uint32)
    total = np.zeros(1, np.float32)
    hi = np.full(1, -1, np.int32)
    histogram = module("atomics").get_function("histogram")     # called as CuPy calls one
    histogram((64,), (256,), (v, v.size, counts, np.int32(nbins), total, hi),
              shared_mem=nbins * 4, workers=workers)
    np.testing.assert_array_equal(counts, np.bincount(v, minlength=nbins))
    assert total[0] == v.size and hi[0] == v.max()


@needs_gxx
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="counts Linux's mappings")
def test_modules_do_not_keep_a_mapping_per_thread_stack():
    """Each kernel module compiles the runtime, so each had its own pool of fiber stacks
    on the calling thread, two mappings a stack, kept for good: a process that loaded a
    few hundred modules with barriers reached Linux's limit on mappings
    (vm.max_map_count), and the next module failed to load. The calling thread now
    releases its stacks after each launch."""
    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    source = """
extern "C" __global__ void barrier_sum(float* x) {  // module %d
    __shared__ float s[256];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < 256; ++i) t += s[i];
        x[0] = t;
    }
}
"""
    mods = [E.compile_kernels(source % k) for k in range(6)]
    x = np.ones(256, np.float32)
    mods[0].launch("barrier_sum", 1, 256, (x,), workers=1)   # (the runtime's first use)
    before = mappings()
    for m in mods[1:]:
        x = np.ones(256, np.float32)
        m.launch("barrier_sum", 1, 256, (x,), workers=1)
        assert x[0] == 256.0
    assert mappings() - before < 5 * 64, mappings() - before


@needs_gxx
def test_dynamic_shared_memory_and_its_limit():
    x = np.arange(4 * 96, dtype=np.float32)
    out = np.empty_like(x)
    m = module("atomics")
    m.launch("reverse_block", 4, 96, (x, out), shared_bytes=96 * 4)
    np.testing.assert_array_equal(out, x.reshape(4, 96)[:, ::-1].ravel())
    with pytest.raises(E.KernelLaunchError, match="49153 bytes of dynamic shared memory.*limit"):
        m.launch("reverse_block", 4, 96, (x, out), shared_bytes=48 * 1024 + 1)
    m.set_max_dynamic_shared_bytes("reverse_block", 100 * 1024)
    m.launch("reverse_block", 4, 96, (x, out), shared_bytes=64 * 1024)
    m.set_max_dynamic_shared_bytes("reverse_block", E.DEFAULT_SHARED_LIMIT)


@needs_gxx
@pytest.mark.parametrize("schedule", ["forward", "reverse", "shuffle"])
def test_warp_collectives_and_barrier_reductions(schedule):
    rng = np.random.default_rng(4)
    v = rng.integers(-50, 50, 64).astype(np.int32)
    v[10] = 7
    out = np.zeros((64, 12), np.int32)
    module("warps").launch("warp_ops", 1, 64, (v, out), schedule=schedule)
    lane = np.arange(64) % 32
    warp0 = np.arange(64) - lane
    seg16 = np.arange(64) - lane % 16
    np.testing.assert_array_equal(out[:, 0], v[warp0 + 3])
    np.testing.assert_array_equal(out[:, 1], v[seg16 + (lane + 5) % 16])
    np.testing.assert_array_equal(out[:, 2], np.where(lane >= 2, v[np.arange(64) - 2], v))
    np.testing.assert_array_equal(out[:, 3], np.where(lane % 8 + 3 < 8, v[np.minimum(np.arange(64) + 3, 63)], v))
    np.testing.assert_array_equal(out[:, 4], v[warp0 + (lane ^ 5)])
    for w in (0, 1):
        vw = v[32 * w:32 * w + 32]
        rows = slice(32 * w, 32 * w + 32)
        ballot = sum(1 << i for i in range(32) if vw[i] > 0)
        assert (out[rows, 5].view(np.uint32) == ballot).all()
        assert (out[rows, 6] == int((vw > 40).any()) + 2 * int((vw > -100).all())).all()
        assert (out[rows, 7] == vw.sum()).all() and (out[rows, 8] == vw.max()).all()
    assert (out[:, 9] == (v > 0).sum()).all()
    np.testing.assert_array_equal(out[:, 10], np.where(lane < 16, v[warp0 + (lane ^ 1)],
                                                       v[warp0 + (lane ^ 2)]))
    assert (out[:, 11] == 1 + 2).all()


# --- what CUDA leaves undefined raises ---------------------------------------------------------

@needs_gxx
@pytest.mark.parametrize("kernel, block, message", [
    ("exit_before_barrier", 128, r"kernel exit_before_barrier, block \(1, 0, 0\): divergent "
     r"barrier: threadIdx.x 0-99 wait at __syncthreads\(\) at line 5 .* threadIdx.x 100-127 "
     r"have exited"),
    ("two_barriers", 128, r"threadIdx.x 0-63 wait at __syncthreads\(\) at line 12 .* "
     r"threadIdx.x 64-127 wait at __syncthreads\(\) at line 14"),
    ("shuffle_exited_lane", 32, r"__shfl_down_sync at line 21 .*lane 0 of warp 0 waits for "
     r"lane 16 of its mask 0xffffffff, which has exited"),
    ("mask_without_self", 32, r"mask 0x00000001 does not include the calling lane 1"),
    ("partial_warp_mask", 48, r"names lanes 16-31 of warp 1, which do not exist"),
    ("read_outside_mask", 32, r"reads lane 20, which is not in the mask 0x0000ffff"),
    ("big_static_shared", 32, r"static __shared__ memory reaches 65536 bytes, over the 48 KiB"),
    ("traps", 32, r"thread \(3, 0, 0\): __trap\(\) at line 45"),
    ("asserts", 32, r"thread \(5, 0, 0\): assert\(threadIdx.x != 5\) failed at line 49"),
])
def test_undefined_behaviour_raises(kernel, block, message):
    m = E.compile_kernels(MISUSE)
    out = np.zeros(1024, np.float32)
    with pytest.raises(E.EmulationError, match=message):
        m.launch(kernel, 2 if kernel == "exit_before_barrier" else 1, block, (out,))


@needs_gxx
def test_out_of_bounds_writes_raise_and_reads_show():
    m = E.compile_kernels(MISUSE)
    x = np.arange(40, dtype=np.float32)
    out = np.zeros(40, np.float32)
    with pytest.raises(E.EmulationError, match=r"kernel off_by_one wrote outside its arrays .*"
                       r"out \(float\* __restrict__, 160 bytes\): bytes 0 to 3 past its end"):
        m.launch("off_by_one", 2, 32, (x, out, np.int32(40)))
    np.testing.assert_array_equal(out, x + 1)          # the writes in bounds are kept
    big = np.zeros(41, np.float32)          # one element too many: the read is out of bounds
    m.launch("off_by_one", 2, 32, (x, big, np.int32(40)))
    assert np.isnan(big[40])                # it read the pad (signalling NaNs)
    m.launch("off_by_one", 2, 32, (x, out, np.int32(39)))
    m.launch("off_by_one", 2, 32, (x, big, np.int32(40)), check_bounds=False)
    # views of one buffer share a copy: in place through overlapping views still works
    buf = np.arange(64, dtype=np.float32)
    m.launch("in_place", 1, 64, (buf[8:40], np.int32(32)))
    np.testing.assert_array_equal(buf, np.concatenate([np.arange(8), 2 * np.arange(8, 40),
                                                       np.arange(40, 64)]))


@needs_gxx
def test_launches_refused():
    m = E.compile_kernels(MISUSE)
    out = np.zeros(4096, np.float32)
    with pytest.raises(E.KernelLaunchError, match="2048 threads, over CUDA's 1024"):
        m.launch("bounded", 1, (32, 32, 2), (out,))
    with pytest.raises(E.KernelLaunchError, match=r"256 threads is over its __launch_bounds__ \(128\)"):
        m.launch("bounded", 1, 256, (out,))
    with pytest.raises(E.KernelLaunchError, match="dimension z must be in 1..64"):
        m.launch("bounded", 1, (1, 1, 65), (out,))
    with pytest.raises(E.KernelLaunchError, match="grid .* dimension x must be in 1"):
        m.launch("bounded", 0, 32, (out,))
    with pytest.raises(E.KernelLaunchError, match=r"bounded\(float\* out\) takes 1 arguments, got 2"):
        m.launch("bounded", 1, 32, (out, out))
    with pytest.raises(E.KernelLaunchError, match="parameter out .* points to float32, got an array of float64"):
        m.launch("bounded", 1, 32, (out.astype(np.float64),))
    ro = out.copy()
    ro.flags.writeable = False
    with pytest.raises(E.KernelLaunchError, match="non-const pointer .* read-only array"):
        m.launch("bounded", 1, 32, (ro,))
    with pytest.raises(E.KernelLaunchError, match="no kernel named 'nope'.*bounded"):
        m.launch("nope", 1, 32, (out,))


@needs_gxx
def test_scalar_arguments_are_typed_as_cupy_passes_them():
    m = module("rows")
    x = np.zeros((2, 8), np.float32)
    y = np.empty_like(x)
    with pytest.raises(E.KernelLaunchError, match=r"parameter cols \(int\) is int32, got a Python "
                       r"int, which CuPy passes as int64 \(pass np.int32\(value\)\)"):
        m.launch("softmax_rows", 2, 32, (x, y, 8))
    with pytest.raises(E.KernelLaunchError, match="is int32, got a NumPy int64 scalar"):
        m.launch("softmax_rows", 2, 32, (x, y, np.int64(8)))
    with pytest.raises(E.KernelLaunchError, match=r"parameter eps \(float\) is float32, got a Python float"):
        m.launch("layernorm_rows", 2, 32, (x, x[0], x[0], y, np.int32(8), 1e-5))
    with pytest.raises(E.KernelLaunchError, match="is a scalar, got an array"):
        m.launch("softmax_rows", 2, 32, (x, y, np.array(8, np.int32)))
    fused = module("fused")          # Python ints are long long: accepted there
    out0, out1 = np.empty(4, np.float32), np.empty(4)
    fused.launch("fused_gelu_bias", 1, 32, (x, x, x, out0, out1, 4, np.int32(4), 1, 0, 0, 1, 0, 0))


# --- thread order: a missing barrier shows --------------------------------------------------------

@needs_gxx
def test_missing_barrier_changes_the_answer_under_another_schedule():
    x = np.arange(2 * 64, dtype=np.float32)
    m = module("races")
    assert not m.kernels["reverse_no_barrier"].fibers and m.kernels["rotate_twice"].fibers
    outs = {}
    for schedule in ("forward", "reverse"):
        out = np.empty_like(x)
        m.launch("reverse_no_barrier", 2, 64, (x, out), shared_bytes=64 * 4, schedule=schedule)
        outs[schedule] = out
    want = x.reshape(2, 64)[:, ::-1].ravel()
    assert not np.array_equal(outs["forward"], outs["reverse"])
    assert not np.array_equal(outs["forward"], want)
    # unwritten shared memory reads as 0xff bytes: NaN, not a stale value
    assert np.isnan(outs["forward"].reshape(2, 64)[:, :32]).all()

    chains = {}
    for schedule in ("forward", "reverse", "shuffle"):
        chains[schedule] = np.zeros(9, np.float32)
        m.launch("chain", 8, 32, (chains[schedule],), schedule=schedule, workers=1)
    np.testing.assert_array_equal(chains["forward"], np.arange(9))
    assert not np.array_equal(chains["reverse"], chains["forward"])
    assert not np.array_equal(chains["shuffle"], chains["forward"])

    x = np.arange(128, dtype=np.float32)
    got = {}
    for fixed in (0, 1):
        for schedule in ("forward", "reverse", "shuffle"):
            out = np.empty_like(x)
            m.launch("rotate_twice", 1, 128, (x, out, np.int32(fixed)), schedule=schedule, seed=3)
            got[fixed, schedule] = out
    want = 2 * np.roll(x, -2)
    for schedule in ("forward", "reverse", "shuffle"):
        np.testing.assert_array_equal(got[1, schedule], want)
    assert not np.array_equal(got[0, "forward"], got[0, "reverse"])


# --- source analysis, caching, the preamble, NVRTC -----------------------------------------------

@needs_gxx
def test_barriers_found_through_helpers_macros_and_functors():
    m = module("analysis")
    assert m.kernels["uses_indirect"].fibers
    assert m.kernels["uses_functor"].fibers
    assert not m.kernels["uses_plain"].fibers
    out = np.arange(32, dtype=np.float32)
    m.launch("uses_functor", 1, 32, (out,))
    np.testing.assert_array_equal(out, np.arange(32) + (np.arange(32) ^ 1))


@needs_gxx
def test_ucontext_fibers_give_the_same_results(monkeypatch):
    default = module("rows")
    monkeypatch.setenv("FNX_EMULATE_UCONTEXT", "1")
    m = E.compile_kernels(ROWS)
    assert m is not default and m.path != default.path
    x = np.random.default_rng(5).standard_normal((9, 100)).astype(np.float32)
    y1, y2 = np.empty_like(x), np.empty_like(x)
    m.launch("softmax_rows", 9, 64, (x, y1, np.int32(100)))
    default.launch("softmax_rows", 9, 64, (x, y2, np.int32(100)))
    np.testing.assert_array_equal(y1, y2)


@needs_gxx
def test_a_new_process_reuses_the_disk_cache():
    source = "extern \"C\" __global__ void fresh(float* o) { o[threadIdx.x] = 3.0f; }\n"
    script = textwrap.dedent(f"""
        import numpy as np
        from fnx.kernels import emulate as E
        m = E.compile_kernels({source!r})
        o = np.zeros(4, np.float32)
        m.launch("fresh", 1, 4, (o,))
        assert (o == 3).all()
        print(E.stats["gxx_runs"], E.stats["disk_hits"])
    """)
    def start():
        return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                text=True, env=dict(os.environ))

    def result(p):
        out, _ = p.communicate()
        assert p.returncode == 0
        return out.split()

    first = [start(), start()]      # at once: each compiles or finds the other's library
    for p in first:
        assert result(p) in (["1", "0"], ["0", "1"])
    assert result(start()) == ["0", "1"]
    assert any(f.endswith(".so") for f in os.listdir(E.cache_dir()))


@needs_gxx
def test_generated_elementwise_kernels_and_preamble_run_unchanged():
    """fnx.kernels.cuda's kernels (PREAMBLE and all) on the emulator, with many blocks and
    threads, equal their one-thread host runs bit for bit."""
    rng = np.random.default_rng(6)
    f32, f64, i32 = np.float32, np.float64, np.int32
    cases = [
        (L.erf_inv_p, [rng.uniform(-1, 1, 1000).astype(f32)], {}),
        (L.erf_inv_p, [rng.uniform(-1, 1, 1000)], {}),
        (L.floor_divide_p, [rng.integers(-99, 99, 1000).astype(i32),
                            rng.integers(-9, 9, 1000).astype(i32)], {}),
        (L.floor_divide_p, [rng.standard_normal(1000).astype(f32), np.asarray(0.3, f32)], {}),
        (L.logaddexp_p, [rng.standard_normal(1000), rng.standard_normal(1000)], {}),
        (L.integer_pow_p, [rng.integers(-9, 9, 1000).astype(np.int16)], {"y": 5}),
        (L.convert_element_type_p, [rng.standard_normal(1000) * 1e10], {"new_dtype": np.dtype(i32)}),
        (L.nextafter_p, [rng.standard_normal(1000).astype(f32), np.asarray(np.inf, f32)], {}),
    ]
    sources = [C.elementwise_source(p, [ShapeDtypeStruct(a.shape, a.dtype) for a in args], params)
               for p, args, params in cases]
    text = C.PREAMBLE + "".join({ks.name: ks.body for ks in sources}.values())
    m = E.compile_kernels(text)
    C.host_compile(sources)                 # the one-thread references, in one batch
    for (prim, args, params), ks in zip(cases, sources):
        assert not m.kernels[ks.name].fibers
        out = np.empty(ks.out_aval.shape, ks.out_aval.dtype)
        m.launch(ks.name, 3, 128, (*[np.ascontiguousarray(a) for a in args], out, out.size))
        want = C.host_check(prim, args, params)
        np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8), err_msg=prim.name)


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(SOURCES) + ["misuse"])
def test_every_emulated_source_compiles_with_nvrtc(name):
    source = MISUSE if name == "misuse" else SOURCES[name]
    ptx = E.nvrtc_check(source)
    assert set(ptx) == {"sm_80", "sm_90"}
    for kernel in re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\)\s*)?(\w+)',
                             source):
        assert f".entry {kernel}(" in ptx["sm_90"].decode()


@needs_nvrtc
def test_nvrtc_check_reports_errors():
    with pytest.raises(C.KernelCompileError, match="NVRTC could not compile .* sm_80"):
        E.nvrtc_check('extern "C" __global__ void bad(float* o) { o[0] = undefined_name; }')


# --- on a real GPU: the emulator gives what the device gives -------------------------------------

def _on_device(source, name, grid, block, args, shared_mem=0, tmp_path=None):
    """Run kernel ``name`` of ``source`` on the GPU (NVRTC's PTX, loaded by CuPy) on
    copies of ``args``; the arrays after the launch (None for scalars)."""
    import cupy
    ptx = E.nvrtc_check(source, archs=("sm_80",))["sm_80"]
    path = os.path.join(str(tmp_path), f"{name}.ptx")
    with open(path, "wb") as f:
        f.write(ptx)
    dev = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    as3 = (lambda d: (d,) if isinstance(d, int) else tuple(d))
    cupy.RawModule(path=path).get_function(name)(as3(grid), as3(block), tuple(dev),
                                                 shared_mem=shared_mem)
    return [cupy.asnumpy(d) if isinstance(a, np.ndarray) else None for a, d in zip(args, dev)]


@gpu
@needs_device
@needs_gxx
def test_emulator_matches_the_gpu(tmp_path):
    rng = np.random.default_rng(7)
    v = rng.integers(-50, 50, 64).astype(np.int32)
    out = np.zeros((64, 12), np.int32)
    module("warps").launch("warp_ops", 1, 64, (v, out))
    np.testing.assert_array_equal(out, _on_device(WARPS, "warp_ops", 1, 64, (v, out * 0),
                                                  tmp_path=tmp_path)[1])

    nbins = 37
    vals = rng.integers(0, nbins, 50_000).astype(np.int32)
    args = (vals, vals.size, np.zeros(nbins, np.uint32), np.int32(nbins), np.zeros(1, np.float32),
            np.full(1, -1, np.int32))
    dev = _on_device(ATOMICS, "histogram", 64, 256, args, shared_mem=nbins * 4, tmp_path=tmp_path)
    module("atomics").launch("histogram", 64, 256, args, shared_bytes=nbins * 4)
    for got, want in zip(args, dev):
        if want is not None:
            np.testing.assert_array_equal(got, want)

    x = (rng.standard_normal((50, 300)) * 4).astype(np.float32)
    y = np.empty_like(x)
    module("rows").launch("softmax_rows", 50, 256, (x, y, np.int32(300)))
    want = _on_device(ROWS, "softmax_rows", 50, 256, (x, y * 0, np.int32(300)), tmp_path=tmp_path)
    np.testing.assert_allclose(y, want[1], rtol=1e-5, atol=1e-8)
    d = rng.standard_normal((23, 77))
    mx = np.zeros(23)
    module("rows").launch("rowmax_warp", 6, (32, 4), (d, mx, np.int32(23), np.int32(77)))
    want = _on_device(ROWS, "rowmax_warp", 6, (32, 4), (d, mx * 0, np.int32(23), np.int32(77)),
                      tmp_path=tmp_path)
    np.testing.assert_array_equal(mx, want[1])
