"""3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3) on the CPU, with
the tile transforms compiled natively (``fnx.kernels.host``) and the products as 16
BLAS matrix products.

A 2x2 block of outputs needs 16 multiplications per input and output channel instead
of 36 (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each
4x4 input tile ``d`` becomes ``V = B^T d B`` (adds only), each 3x3 kernel ``g`` becomes
``U = G g G^T``, the 16 positions of the tiles are 16 matrix products ``M = U V`` over
the channels, and ``A^T M A`` (adds only) gives the outputs. Its rounding error is of the
size of the direct sum's (the transforms' coefficients are 0, +-1 and 1/2, exact in
binary).

``conv3x3(x, w, pads)`` computes a convolution of ``x`` (N, C, H, W) with ``w`` (Co, C,
3, 3), stride 1, no dilation, one group, zero padding ``pads = ((top, bottom), (left,
right))`` (each >= 0), in ``x``'s dtype (float32 or float64). ``install()`` makes the
NumPy convolution impls (``fnx.core.numpy_windows``) use it for those convolutions
whose channels make it pay; it needs a C++ compiler and is undone by ``FNX_WINOGRAD=0``.
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

from . import host

__all__ = ["conv3x3", "install", "enabled"]

_SOURCE = r"""
#include <cstdlib>
#include <cstring>
// Winograd F(2x2, 3x3) tile transforms over (N, C, H, W) with implicit zero padding.
// V[k][c][p] (k: the 16 tile positions, p = (n th + ty) tw + tx) = B^T d B of the 4x4
// tile whose top-left input element is (2 ty - top, 2 tx - left). Per row of tiles: the
// four input rows, zero padded to 2 tw + 2, then B^T down the columns (contiguous), then
// B along the rows (stride 2 reads, contiguous writes).
template <typename T>
static void fnx_wino_in(const T* __restrict__ x, T* __restrict__ V, long long N, long long C,
                        long long H, long long W, long long top, long long left,
                        long long th, long long tw, int nt) {
    const long long P = N * th * tw, CP = C * P, Wp = 2 * tw + 2;
    #pragma omp parallel num_threads(nt > 1 ? nt : 1) if (nt > 1)
    {
        T* rows = (T*)malloc(sizeof(T) * 8 * Wp);
        T* R = rows + 4 * Wp;
        #pragma omp for collapse(2) schedule(static)
        for (long long c = 0; c < C; ++c)
            for (long long n = 0; n < N; ++n) {
                const T* xc = x + (n * C + c) * H * W;
                for (long long ty = 0; ty < th; ++ty) {
                    for (int i = 0; i < 4; ++i) {
                        T* row = rows + i * Wp;
                        const long long yy = 2 * ty - top + i;
                        memset(row, 0, sizeof(T) * Wp);
                        if (yy >= 0 && yy < H) {
                            const long long lo = left > 0 ? 0 : -left;
                            const long long hi = W < Wp - left ? W : Wp - left;
                            if (hi > lo) memcpy(row + left + lo, xc + yy * W + lo, sizeof(T) * (hi - lo));
                        }
                    }
                    const T* d0 = rows; const T* d1 = rows + Wp;
                    const T* d2 = rows + 2 * Wp; const T* d3 = rows + 3 * Wp;
                    T* R0 = R; T* R1 = R + Wp; T* R2 = R + 2 * Wp; T* R3 = R + 3 * Wp;
                    #pragma omp simd
                    for (long long j = 0; j < Wp; ++j) {
                        R0[j] = d0[j] - d2[j];
                        R1[j] = d1[j] + d2[j];
                        R2[j] = d2[j] - d1[j];
                        R3[j] = d1[j] - d3[j];
                    }
                    T* out = V + c * P + (n * th + ty) * tw;
                    for (int i = 0; i < 4; ++i) {
                        const T* r = R + i * Wp;
                        T* o0 = out + (4 * i + 0) * CP; T* o1 = out + (4 * i + 1) * CP;
                        T* o2 = out + (4 * i + 2) * CP; T* o3 = out + (4 * i + 3) * CP;
                        #pragma omp simd
                        for (long long tx = 0; tx < tw; ++tx) {
                            const T a = r[2 * tx], b = r[2 * tx + 1];
                            const T cc = r[2 * tx + 2], d = r[2 * tx + 3];
                            o0[tx] = a - cc;
                            o1[tx] = b + cc;
                            o2[tx] = cc - b;
                            o3[tx] = b - d;
                        }
                    }
                }
            }
        free(rows);
    }
}

// y[n][o][2 ty + i][2 tx + j] = (A^T m A)[i][j], m[k] = M[k][o][p]; outputs past (Ho, Wo)
// are not written. A^T down the tile columns (contiguous over tx), then along the rows
// into two row buffers, copied to the output rows.
template <typename T>
static void fnx_wino_out(const T* __restrict__ M, T* __restrict__ y, long long N,
                         long long Co, long long Ho, long long Wo, long long th,
                         long long tw, int nt) {
    const long long P = N * th * tw, OP = Co * P;
    #pragma omp parallel num_threads(nt > 1 ? nt : 1) if (nt > 1)
    {
        T* buf = (T*)malloc(sizeof(T) * 12 * tw);
        #pragma omp for collapse(2) schedule(static)
        for (long long o = 0; o < Co; ++o)
            for (long long n = 0; n < N; ++n) {
                T* yo = y + (n * Co + o) * Ho * Wo;
                for (long long ty = 0; ty < th; ++ty) {
                    const T* m = M + o * P + (n * th + ty) * tw;
                    T* t0 = buf; T* t1 = buf + 4 * tw; T* yr = buf + 8 * tw;
                    for (int j = 0; j < 4; ++j) {
                        const T* a = m + (0 + j) * OP; const T* b = m + (4 + j) * OP;
                        const T* c = m + (8 + j) * OP; const T* d = m + (12 + j) * OP;
                        T* u0 = t0 + j * tw; T* u1 = t1 + j * tw;
                        #pragma omp simd
                        for (long long tx = 0; tx < tw; ++tx) {
                            u0[tx] = (a[tx] + b[tx]) + c[tx];
                            u1[tx] = (b[tx] - c[tx]) - d[tx];
                        }
                    }
                    for (int i = 0; i < 2; ++i) {
                        const long long r = 2 * ty + i;
                        if (r >= Ho) break;
                        const T* u = i ? t1 : t0;
                        T* row = yr;   // 2 tw wide
                        #pragma omp simd
                        for (long long tx = 0; tx < tw; ++tx) {
                            row[2 * tx] = (u[tx] + u[tw + tx]) + u[2 * tw + tx];
                            row[2 * tx + 1] = (u[tw + tx] - u[2 * tw + tx]) - u[3 * tw + tx];
                        }
                        memcpy(yo + r * Wo, row, sizeof(T) * Wo);
                    }
                }
            }
        free(buf);
    }
}

extern "C" {
void fnx_wino_in_f32(const float* x, float* V, long long N, long long C, long long H,
                     long long W, long long top, long long left, long long th, long long tw,
                     int nt) { fnx_wino_in<float>(x, V, N, C, H, W, top, left, th, tw, nt); }
void fnx_wino_in_f64(const double* x, double* V, long long N, long long C, long long H,
                     long long W, long long top, long long left, long long th, long long tw,
                     int nt) { fnx_wino_in<double>(x, V, N, C, H, W, top, left, th, tw, nt); }
void fnx_wino_out_f32(const float* M, float* y, long long N, long long Co, long long Ho,
                      long long Wo, long long th, long long tw, int nt) {
    fnx_wino_out<float>(M, y, N, Co, Ho, Wo, th, tw, nt); }
void fnx_wino_out_f64(const double* M, double* y, long long N, long long Co, long long Ho,
                      long long Wo, long long th, long long tw, int nt) {
    fnx_wino_out<double>(M, y, N, Co, Ho, Wo, th, tw, nt); }
}
"""

_LL = ctypes.c_longlong
_P = ctypes.c_void_p
_STATE: dict = {}

# G (4x3): U = G g G^T; entries 0, +-1/2, 1 (exact)
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def enabled() -> bool:
    """Whether ``install`` may route convolutions here: ``FNX_WINOGRAD`` is not 0 and a
    C++ compiler is on the PATH."""
    return os.environ.get("FNX_WINOGRAD", "1") != "0" and host.compiler_available()


def _functions():
    if "fns" not in _STATE:
        lib = host.load(_SOURCE)
        fns = {}
        for name in ("fnx_wino_in_f32", "fnx_wino_in_f64"):
            f = getattr(lib, name)
            f.argtypes = [_P, _P] + [_LL] * 8 + [ctypes.c_int]
            f.restype = None
            fns[name] = f
        for name in ("fnx_wino_out_f32", "fnx_wino_out_f64"):
            f = getattr(lib, name)
            f.argtypes = [_P, _P] + [_LL] * 6 + [ctypes.c_int]
            f.restype = None
            fns[name] = f
        _STATE["fns"] = fns
    return _STATE["fns"]


def _threads():
    from ..backends.native_loops import threads
    return threads()


# U[a b] = sum over k, l of G[a k] G[b l] g[k l]: one (16, 9) matrix on the flat kernels
_GG = np.kron(_G, _G)


def kernel_transform(w, dtype):
    """``U`` (16, Co, C) of the kernels ``w`` (Co, C, 3, 3)."""
    g = np.asarray(w, dtype)
    Co, C = g.shape[:2]
    return np.matmul(_GG.astype(dtype), g.reshape(Co * C, 9).T).reshape(16, Co, C)


def conv3x3(x, w, pads):
    """The convolution described in the module docstring; a new (N, Co, Ho, Wo) array."""
    x = np.ascontiguousarray(x)
    dt = x.dtype
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[dt]
    N, C, H, W = x.shape
    Co = w.shape[0]
    (top, bottom), (left, right) = pads
    Ho, Wo = H + top + bottom - 2, W + left + right - 2
    th, tw = -(-Ho // 2), -(-Wo // 2)
    P = N * th * tw
    fns = _functions()
    nt = _threads()
    V, M = _scratch((16, C, P), (16, Co, P), dt)
    fns["fnx_wino_in_" + suffix](x.ctypes.data, V.ctypes.data, N, C, H, W, top, left, th,
                                 tw, nt)
    np.matmul(kernel_transform(w, dt), V, out=M)         # (16, Co, P)
    y = np.empty((N, Co, Ho, Wo), dt)
    fns["fnx_wino_out_" + suffix](M.ctypes.data, y.ctypes.data, N, Co, Ho, Wo, th, tw, nt)
    return y


_LOCAL = threading.local()


def _scratch(v_shape, m_shape, dtype):
    """The transformed tiles and products of the last call of this shape on this thread,
    reused: fresh multi-megabyte arrays cost their page faults on every call."""
    key = (v_shape, m_shape, np.dtype(dtype).str)
    cache = getattr(_LOCAL, "bufs", None)
    if cache is None or cache[0] != key:
        cache = _LOCAL.bufs = (key, np.empty(v_shape, dtype), np.empty(m_shape, dtype))
    return cache[1], cache[2]


def _hook(x, w, pads):
    """What ``fnx.core.numpy_windows`` calls: the convolution, or None to use its own
    plan (no compiler after all)."""
    if _STATE.get("failed"):
        return None
    try:
        return conv3x3(x, w, pads)
    except (host.HostCompileError, OSError):
        _STATE["failed"] = True
        return None


def install():
    """Route eligible convolutions of the NumPy impls here (see the module docstring);
    returns whether it did."""
    from ..core import numpy_windows
    if not enabled():
        return False
    numpy_windows.set_winograd(_hook)
    return True
