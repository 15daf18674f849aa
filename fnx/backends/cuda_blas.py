"""Matrix products on the GPU through fnx's own cuBLAS handle, so they can be captured.

CuPy refuses every cuBLAS call while a stream is being captured (its ``cublas.setStream``
raises ``NotImplementedError``), so a program whose products went through
``cupy.matmul`` could never be replayed as a CUDA graph (``cuda_graphs``): the product
fell back to the host and the capture failed on the transfer. cuBLAS itself supports
capture when it has a workspace of its own, so ``matmul(xp, a, b)`` calls it directly:

* ``a`` (..., m, k) @ ``b`` (..., k, n), batch dims broadcast, one float16, float32,
  float64, complex64 or complex128 dtype: one ``cublasGemmStridedBatchedEx`` on a handle
  of fnx's (created once, with a 32 MiB workspace from ``cudaMalloc``, outside any
  memory pool), in the operands' precision (``CUBLAS_COMPUTE_32F`` for float16, float32
  and complex64, ``64F`` for the doubles: no TF32) unless a reduced precision is asked
  for (``precision=``, ``jax_default_matmul_precision``: TF32 or bfloat16 tensor-core
  passes for float32 and complex64), on the current stream;
* each operand is read where it lies when cuBLAS can describe it: rows or columns of
  unit stride (a transposed view is a transpose flag), any leading dimension, batch dims
  that merge into one stride (0 for a broadcast operand); anything else is copied
  C-contiguous first;
* other dtypes (integers: CuPy's own kernel, which captures) go to ``np.matmul``.

Row-major ``C = A @ B`` is column-major ``C^T = B^T A^T``, so ``B`` is cuBLAS's first
operand. On the emulated GPU (``FNX_GPU_EMULATE=1``) the same call runs NumPy over the
operands' memory as cuBLAS would read it (column-major, the flags, leading dimensions
and batch strides, bounds checked), as one recorded device operation: the layouts are
tested in CI, and the emulation refuses ``cupy.matmul`` under capture as CuPy does.
"""
from __future__ import annotations

import ctypes
import threading
import warnings

import numpy as np

__all__ = ["matmul"]

_N, _T = 0, 1  # cublasOperation_t
# dtype -> (cudaDataType_t, cublasComputeType_t, the scalars' NumPy type)
_TYPES = {
    "float16": (2, 68, np.float32),
    "float32": (0, 68, np.float32),
    "float64": (1, 70, np.float64),
    "complex64": (4, 68, np.complex64),
    "complex128": (5, 70, np.complex128),
}
# reduced precisions -> cublasComputeType_t: CUBLAS_COMPUTE_32F_FAST_TF32, _FAST_16BF
_REDUCED = {"tensorfloat32": 77, "bfloat16": 75}
_MANTISSA = {77: 10, 75: 7}  # the bits each keeps of float32's 23 (the emulation rounds)
_INT_MAX = 2**31 - 1
WORKSPACE_BYTES = 32 << 20  # what NVIDIA advises for Hopper; more than enough before it


def matmul(xp, a, b, precision=None):
    """``a @ b`` of two device buffers of ``xp`` (see the module docstring); ``precision``
    (``fnx.lax.reduced_precision``'s): ``"tensorfloat32"`` or ``"bfloat16"`` let a float32
    or complex64 product run on the tensor cores in that precision."""
    spec = _TYPES.get(a.dtype.name)
    ex = _executor(xp)
    if spec is None or ex is None or b.dtype != a.dtype or a.ndim < 2 or b.ndim < 2:
        return np.matmul(a, b)
    if precision in _REDUCED and a.dtype.name in ("float32", "complex64"):
        spec = (spec[0], _REDUCED[precision], spec[2])
    bshape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[:-2] != bshape:
        a = xp.broadcast_to(a, bshape + a.shape[-2:])
    if b.shape[:-2] != bshape:
        b = xp.broadcast_to(b, bshape + b.shape[-2:])
    m, k = a.shape[-2:]
    if b.shape[-2] != k:
        raise ValueError(f"matmul: contracting dims differ: {a.shape} @ {b.shape}")
    n = b.shape[-1]
    out = xp.empty(bshape + (m, n), a.dtype)
    batch = out.size // max(1, m * n)
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    if max(m, n, k, batch) > _INT_MAX:
        return np.matmul(a, b)
    la, lb = _layout(a), _layout(b)
    if la is None:
        a = xp.ascontiguousarray(a)
        la = _layout(a)
    if lb is None:
        b = xp.ascontiguousarray(b)
        lb = _layout(b)
    # C^T (n x m) = op(B^T) (n x k) . op(A^T) (k x m), column-major
    (ta, lda, sa), (tb, ldb, sb) = lb, la
    ex.gemm(ta, tb, n, m, k, b, lda, sa, a, ldb, sb, out, n, m * n, batch, spec)
    return out


def _layout(x):
    """How cuBLAS reads the row-major (..., r, c) buffer ``x`` as the column-major
    transpose (c x r) it is: ``(op, ld, batch_stride)`` with ``op`` N when rows are
    contiguous (stored as c x r, leading dim the row stride), T when columns are (stored
    as r x c, leading dim the column stride). None when no single GEMM operand describes
    it (a negative or unaligned stride, a batch that merges into no one stride)."""
    isz = x.itemsize
    if any(s % isz for s in x.strides):
        return None
    strides = [s // isz for s in x.strides]
    *bs, r, c = x.shape
    *bst, sr, sc = strides
    stride, span = None, 1
    for size, s in zip(reversed(bs), reversed(bst)):
        if size == 1:
            continue
        if stride is None:
            stride, span = s, size
        elif s != stride * span:
            return None
        else:
            span *= size
    stride = stride or 0
    if stride < 0 or max(strides[-2:]) > _INT_MAX or stride > 2**62:
        return None
    if sc == 1 or c == 1:  # rows contiguous: stored c x r, column-major
        ld = sr if r > 1 else c
        if ld >= max(1, c):
            return _N, ld, stride
    if sr == 1 or r == 1:  # columns contiguous: stored r x c
        ld = sc if c > 1 else r
        if ld >= max(1, r):
            return _T, ld, stride
    return None


try:  # NumPy 2 moved it
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # NumPy 1.26
    _byte_bounds = np.byte_bounds

_EXECUTORS = {}
_LOCK = threading.Lock()


def _executor(xp):
    """The GEMM of ``xp``'s device: fnx's cuBLAS handle, the emulation's, or None where
    cuBLAS cannot be loaded or set up (products then go through CuPy's matmul, which
    works but is never captured into a CUDA graph; a warning says so once)."""
    key = id(xp)
    if key in _EXECUTORS:
        return _EXECUTORS[key]
    with _LOCK:
        if key not in _EXECUTORS:
            try:
                ex = _Emulated(xp) if getattr(xp, "emulated", False) else _Cublas(xp)
            except (CublasError, AttributeError, OSError) as e:  # (a symbol or library missing)
                warnings.warn(f"fnx: GPU products go through CuPy's matmul, which CUDA "
                              f"graphs cannot capture: {e}", RuntimeWarning, stacklevel=3)
                ex = None
            _EXECUTORS[key] = ex
    return _EXECUTORS[key]


class CublasError(RuntimeError):
    """A cuBLAS call returned an error status."""


def _load_cublas():
    """The cuBLAS library CuPy loaded (found among the process's mapped files), else the
    first of the usual names that loads."""
    try:
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (loads libcublas)
    except ImportError:
        pass
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if "/" in line else ""
                name = path.rsplit("/", 1)[-1]
                if name.startswith("libcublas.so"):
                    return ctypes.CDLL(path)
    except OSError:
        pass
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise CublasError("cuBLAS could not be loaded (install CuPy with its CUDA libraries: "
                      "pip install fnx[cuda])")


class _Cublas:
    """fnx's cuBLAS handle on the current device, with a workspace of its own."""

    def __init__(self, xp):
        self.xp = xp
        lib = self.lib = _load_cublas()
        vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        self._gemm = lib.cublasGemmStridedBatchedEx
        self._gemm.argtypes = [vp, i32, i32, i32, i32, i32, vp,
                               vp, i32, i32, i64, vp, i32, i32, i64, vp,
                               vp, i32, i32, i64, i32, i32, i32]
        for fn in (lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasSetWorkspace_v2,
                   self._gemm):
            fn.restype = i32
        handle = vp()
        self._check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        # outside CuPy's pools, so no graph's private pool ever owns it
        self.workspace = xp.cuda.memory.Memory(WORKSPACE_BYTES)
        self._check(lib.cublasSetWorkspace_v2(handle, vp(self.workspace.ptr),
                                              WORKSPACE_BYTES), "cublasSetWorkspace")
        self.stream = None
        self._lock = threading.Lock()
        self._scalars = {}

    @staticmethod
    def _check(status, what):
        if status:
            raise CublasError(f"{what} failed with cuBLAS status {status}")

    def gemm(self, ta, tb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, spec):
        dtype, compute, scalar = spec
        ones = self._scalars.get(scalar)
        if ones is None:  # host scalars: cuBLAS reads them at the call (captured by value)
            ones = self._scalars[scalar] = (np.ones(1, scalar), np.zeros(1, scalar))
        one, zero = ones
        vp = ctypes.c_void_p
        with self._lock:
            stream = self.xp.cuda.get_current_stream().ptr
            if stream != self.stream:
                self._check(self.lib.cublasSetStream_v2(self.handle, vp(stream)),
                            "cublasSetStream")
                self.stream = stream
            status = self._gemm(self.handle, ta, tb, m, n, k, vp(one.ctypes.data),
                                vp(a.data.ptr), dtype, lda, sa, vp(b.data.ptr), dtype, ldb,
                                sb, vp(zero.ctypes.data), vp(c.data.ptr), dtype, ldc, sc,
                                batch, compute, -1)
        self._check(status, f"cublasGemmStridedBatchedEx (m={m}, n={n}, k={k}, "
                            f"batch={batch}, {c.dtype})")


class _Emulated:
    """The same GEMM on the emulated GPU: NumPy over the operands' memory as cuBLAS reads
    it, recorded as one device operation (so captures replay it)."""

    def __init__(self, xp):
        from . import cuda_emulation
        self._call = cuda_emulation.record_call

    def gemm(self, ta, tb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, spec):
        params = dict(ta=ta, tb=tb, m=m, n=n, k=k, lda=lda, sa=sa, ldb=ldb, sb=sb, ldc=ldc,
                      sc=sc, batch=batch, compute=spec[1])
        self._call(_emulated_gemm, "cublasGemmStridedBatchedEx", (a, b, c), params)


def _column_major(x, rows, cols, ld, stride, batch, what):
    """The (batch, rows, cols) column-major matrices cuBLAS reads from ``x``'s first
    element on (leading dim ``ld``, batch stride ``stride``), checked to stay inside the
    memory ``x`` spans."""
    isz = x.itemsize
    last = (batch - 1) * stride + (cols - 1) * ld + rows - 1
    lo, hi = _byte_bounds(x)
    start = x.__array_interface__["data"][0]
    if rows > ld or start + (last + 1) * isz > hi or start < lo:
        raise IndexError(f"cublasGemmStridedBatchedEx: {what} ({rows}x{cols}, ld {ld}, "
                         f"batch stride {stride}, {batch} matrices) reads outside its buffer")
    return np.lib.stride_tricks.as_strided(
        x, shape=(batch, rows, cols), strides=(stride * isz, isz, ld * isz), writeable=True)


def _rounded(x, bits):
    """float32 (or complex64) values rounded to ``bits`` mantissa bits, to nearest even:
    what a TF32 or bfloat16 tensor-core pass multiplies (accumulation stays float32)."""
    f = np.ascontiguousarray(x).view(np.float32).copy()
    u = f.view(np.uint32)
    drop = 23 - bits
    finite = (u & 0x7F800000) != 0x7F800000
    half = np.uint32(1 << (drop - 1))
    odd = (u >> np.uint32(drop)) & np.uint32(1)
    r = (u + half - np.uint32(1) + odd) & ~np.uint32((1 << drop) - 1)
    u[...] = np.where(finite, r, u)
    return f.view(x.dtype).reshape(x.shape)


def _emulated_gemm(a, b, c, *, ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, batch, compute):
    A = _column_major(a, *((m, k) if ta == _N else (k, m)), lda, sa, batch, "A")
    B = _column_major(b, *((k, n) if tb == _N else (n, k)), ldb, sb, batch, "B")
    if compute in _MANTISSA:  # tensor-core inputs: operands rounded to fewer bits
        A, B = _rounded(A, _MANTISSA[compute]), _rounded(B, _MANTISSA[compute])
    C = _column_major(c, m, n, ldc, sc, batch, "C")
    if ta == _T:
        A = A.transpose(0, 2, 1)
    if tb == _T:
        B = B.transpose(0, 2, 1)
    # C^T = B^T A^T: the row-major product the caller asked for, over views with its
    # operands' strides, so NumPy computes it as the CPU does (the same bits)
    if batch == 1:
        C[0].T[...] = np.matmul(B[0].T, A[0].T)
    else:
        C.transpose(0, 2, 1)[...] = np.matmul(B.transpose(0, 2, 1), A.transpose(0, 2, 1))
