"""CUDA kernels for elementwise primitives: code generation, NVRTC compilation,
launch through CuPy, and a CPU run of the same kernel text for testing.

An elementwise primitive (one output; every input shaped like the output or
rank 0) gets a GPU kernel through its ``kernel`` rule slot::

    prim.kernel(xs, in_dtypes, out_dtype, **params) -> str

returns the CUDA C expression of ONE output element, where ``xs[i]`` names a
local variable holding input ``i``'s element in the C type of ``in_dtypes[i]``
(see ``cuda_type``). ``elementwise_source`` wraps that expression in a kernel::

    extern "C" __global__ void NAME(const T0* __restrict__ in0, ...,
                                    T* __restrict__ out, long long n)

with a grid-stride loop over the ``n`` output elements (rank-0 inputs are read
at index 0, the others at ``i``), after a fixed ``PREAMBLE`` of helper device
functions the expressions may call (``fnx_max``, ``fnx_idiv``, ...).

The kernel text is plain C++ with a few CUDA keywords, so ``host_check``
compiles the very same text with g++ behind ``HOST_PRELUDE`` (which defines
those keywords, a one-thread launch and the CUDA-only math functions the
expressions use) and runs it on NumPy buffers: the semantics of every kernel
are tested against the primitive's NumPy impl without a GPU.

Kernels are compiled so that they round like NumPy: no FMA contraction
(``-fmad=false``), subnormals kept (no ``-ftz``), IEEE division and square root.
That is also why ``run_elementwise`` loads PTX compiled here rather than letting
CuPy compile the source (CuPy adds ``-ftz=true``).

CuPy and NVRTC are imported lazily, inside the functions that need them.
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from ..core import dtypes
from ..core.cuda_rules import (KernelError, KernelUnsupported, c_literal,  # noqa: F401
                               cuda_type, unsigned_type, wide_unsigned_type)
from ..core.primitive import ShapeDtypeStruct, aval_of

__all__ = [
    "KernelError", "KernelUnsupported", "KernelCompileError", "KernelSource",
    "cuda_type", "unsigned_type", "wide_unsigned_type", "c_literal",
    "elementwise_source", "compiler_available", "device_available", "compile_source",
    "compile_sources", "run_elementwise", "device_load", "host_check", "host_compile",
    "host_compiler_available", "PREAMBLE", "HOST_PRELUDE",
]


class KernelCompileError(KernelError):
    """A generated kernel did not compile. The message names the primitive and
    holds the compiler's log and the numbered source."""


# --- the generated source ------------------------------------------------------------------

# Helper device functions of the kernel expressions. It is part of every kernel's
# source, so it must compile both under NVRTC (no headers) and under HOST_PRELUDE.
PREAMBLE = r"""// ---- fnx kernel preamble: helpers of the elementwise expressions ----
#define FNX_FN __device__ __forceinline__

// NumPy's maximum / minimum: a NaN operand gives NaN; a tie gives the second operand.
template <typename T> FNX_FN T fnx_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> FNX_FN T fnx_min(T a, T b) { return (a < b || a != a) ? a : b; }

// NumPy's sign of a float: -1, 0 (also for -0.0) or 1; NaN stays NaN.
template <typename T> FNX_FN T fnx_fsign(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : (x == T(0) ? T(0) : x));
}

// Integer division truncating toward zero, with NumPy's answers where C has none:
// x / 0 = 0 and MIN / -1 = MIN (it wraps). U is the unsigned type T wraps in.
template <typename T, typename U> FNX_FN T fnx_idiv(T a, T b) {
    if (b == T(0)) return T(0);
    if (T(-1) < T(0) && b == T(-1)) return (T)((U)0 - (U)a);
    return (T)(a / b);
}

// Remainder with the dividend's sign (C's %, NumPy's fmod); x % 0 = 0, MIN % -1 = 0.
template <typename T> FNX_FN T fnx_irem(T a, T b) {
    if (b == T(0) || (T(-1) < T(0) && b == T(-1))) return T(0);
    return (T)(a % b);
}

// Integer division rounding toward minus infinity; x // 0 = 0, MIN // -1 = MIN.
template <typename T, typename U> FNX_FN T fnx_ifloordiv(T a, T b) {
    if (b == T(0)) return T(0);
    if (T(-1) < T(0) && b == T(-1)) return (T)((U)0 - (U)a);
    T q = (T)(a / b);
    if ((T)(a % b) != T(0) && ((a < T(0)) != (b < T(0)))) q = (T)(q - T(1));
    return q;
}

// x ** y on integers by repeated squaring, wrapping modulo 2**bits like NumPy.
// y < 0 gives the truncated 1 / x**-y: 1 for x = 1, +-1 for x = -1, else 0.
template <typename T, typename U, typename E> FNX_FN T fnx_ipow(T x, E y) {
    if (y < E(0)) {
        if (x == T(1)) return T(1);
        if (T(-1) < T(0) && x == T(-1)) return (y & E(1)) ? T(-1) : T(1);
        return T(0);
    }
    U base = (U)x, acc = (U)1;
    while (y != E(0)) {
        if (y & E(1)) acc *= base;
        base *= base;
        y >>= 1;
    }
    return (T)acc;
}

// float -> integer conversion: truncation toward zero. NaN gives 0 and values whose
// truncation does not fit saturate; lo and hi are the exclusive bounds of the values
// whose truncation fits in T.
template <typename T, typename F> FNX_FN T fnx_f2i(F x, F lo, F hi, T tmin, T tmax) {
    return x != x ? T(0) : (!(x > lo) ? tmin : (!(x < hi) ? tmax : (T)x));
}

FNX_FN float fnx_fmod(float a, float b) { return fmodf(a, b); }
FNX_FN double fnx_fmod(double a, double b) { return fmod(a, b); }
FNX_FN float fnx_floor(float a) { return floorf(a); }
FNX_FN double fnx_floor(double a) { return floor(a); }
FNX_FN float fnx_copysign(float a, float b) { return copysignf(a, b); }
FNX_FN double fnx_copysign(double a, double b) { return copysign(a, b); }

// NumPy's floor_divide on floats (npy_divmod): the quotient of a - fmod(a, b),
// moved down by one where the remainder's sign differs from b's, then snapped to
// the nearest integer; signed zeros as NumPy; x // 0 = x / 0.
template <typename T> FNX_FN T fnx_ffloordiv(T a, T b) {
    if (b == T(0)) return a / b;
    T mod = fnx_fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div != T(0)) {
        T floordiv = fnx_floor(div);
        if (div - floordiv > T(0.5)) floordiv += T(1);
        return floordiv;
    }
    return fnx_copysign(T(0), a / b);
}

// NumPy's logaddexp: log(exp(x) + exp(y)) without overflow.
FNX_FN float fnx_logaddexp(float x, float y) {
    if (x == y) return x + 0.693147180559945309417232121458176568f;
    const float t = x - y;
    if (t > 0.0f) return x + log1pf(expf(-t));
    if (t <= 0.0f) return y + log1pf(expf(t));
    return t;  // NaN
}
FNX_FN double fnx_logaddexp(double x, double y) {
    if (x == y) return x + 0.693147180559945309417232121458176568;
    const double t = x - y;
    if (t > 0.0) return x + log1p(exp(-t));
    if (t <= 0.0) return y + log1p(exp(t));
    return t;  // NaN
}

// The logistic function 1 / (1 + exp(-x)), as fnx's impl: exp(-|x|) never overflows.
FNX_FN float fnx_logistic(float x) {
    const float e = expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);  // one division, not one per branch
}
FNX_FN double fnx_logistic(double x) {
    const double e = exp(-fabs(x));
    return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
// ---- end of preamble ----
"""

# Makes the kernel text compile as C++ on the CPU: the CUDA keywords, a launch of one
# block of one thread (the grid-stride loop then covers all n elements), and the CUDA
# math functions the expressions use that <cmath> lacks (erfinv, erfinvf).
HOST_PRELUDE = r"""// ---- fnx host prelude: runs CUDA kernel text on the CPU, one thread ----
#include <math.h>
#include <cmath>
#define __global__
#define __device__
#define __forceinline__ inline
struct fnx_host_dim3 { unsigned int x, y, z; };
static const fnx_host_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static const fnx_host_dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};

// erfinv in long double: a first guess within 0.2% (a series near 0, Winitzki's
// formula above 1/2) refined by three Halley steps on f(z) = erf(z) - y, whose
// residual is formed as (1 - y) - erfc(z) above 1/2 (exact next to 1).
static long double fnx_host_erfinv(long double y) {
    const long double a = fabsl(y), pi = 3.14159265358979323846264338327950288L;
    if (!(a < 1.0L)) return a == 1.0L ? copysignl(HUGE_VALL, y) : (y - y) / (y - y);
    if (a == 0.0L) return y;
    long double z;
    if (a < 0.5L) {   // sqrt(pi)/2 (y + pi/12 y^3 + 7 pi^2/480 y^5)
        const long double s = a * a;
        z = 0.886226925452758013649083741671L * a
            * (1.0L + s * (pi / 12.0L + s * 7.0L * pi * pi / 480.0L));
    } else {
        const long double w = 0.147L, l = logl((1.0L - a) * (1.0L + a));
        const long double t = 2.0L / (pi * w) + l / 2.0L;
        z = sqrtl(sqrtl(t * t - l / w) - t);
    }
    for (int k = 0; k < 3; ++k) {
        const long double f = a <= 0.5L ? erfl(z) - a : (1.0L - a) - erfcl(z);
        const long double u = f / (1.12837916709551257389615890312L * expl(-z * z));
        z -= u / (1.0L + z * u);
    }
    return y < 0 ? -z : z;
}
static inline float erfinvf(float y) { return (float)fnx_host_erfinv(y); }
static inline double erfinv(double y) { return (double)fnx_host_erfinv(y); }
// ---- end of host prelude ----
"""


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """One generated elementwise kernel.

    ``name`` is the kernel's C identifier: ``fnx_<primitive>_<hash>``, the hash
    taken over the kernel's types, rank-0 inputs and expression (one kernel
    serves every shape). ``source`` is the full CUDA C text (``PREAMBLE``, then
    the kernel); ``in_avals``/``out_aval`` the types it was generated for;
    ``prim_name`` names the primitive in error messages.
    """
    name: str
    source: str
    in_avals: tuple
    out_aval: ShapeDtypeStruct
    prim_name: str = ""

    @property
    def body(self) -> str:
        """The kernel definition without the preamble."""
        return self.source[len(PREAMBLE):]


def _identifier(name):
    s = re.sub(r"\W", "_", name, flags=re.ASCII)
    return s if s and not s[0].isdigit() else "_" + s


def _type_text(aval):
    """``f32[...]`` or ``f32[]``: what a kernel depends on (the dtype and whether the
    value is rank 0), not the shape, so one kernel serves every shape."""
    return f"{dtypes.short_name(aval.dtype)}[{'' if aval.shape == () else '...'}]"


def elementwise_source(prim, in_avals, params) -> KernelSource:
    """The CUDA kernel of an elementwise primitive applied to inputs of these avals.

    Raises ``KernelUnsupported`` when the primitive has no kernel hook, is not
    elementwise (several outputs, or an input neither rank 0 nor output-shaped)
    or a dtype has no CUDA type; the shape rule's ``ShapeError`` otherwise.
    """
    params = dict(params or {})
    if getattr(prim, "kernel", None) is None:
        raise KernelUnsupported(f"{prim.name}: the primitive has no GPU kernel hook; the NumPy "
                                "backend computes it")
    if prim.multiple_results:
        raise KernelUnsupported(f"{prim.name}: kernel hooks produce one output")
    in_avals = tuple(a if isinstance(a, ShapeDtypeStruct) else aval_of(a) for a in in_avals)
    out_aval = prim.shape_rule(*in_avals, **params)
    if not isinstance(out_aval, ShapeDtypeStruct):
        raise KernelUnsupported(f"{prim.name}: kernel hooks produce one output")
    for a in in_avals:
        if a.shape not in ((), out_aval.shape):
            raise KernelUnsupported(
                f"{prim.name}: not elementwise: input {a.str_short()} is neither rank 0 nor "
                f"shaped like the output {out_aval.str_short()}")
    in_types = [cuda_type(a.dtype) for a in in_avals]
    out_type = cuda_type(out_aval.dtype)
    xs = [f"x{i}" for i in range(len(in_avals))]
    expr = prim.kernel(xs, [a.dtype for a in in_avals], out_aval.dtype, **params)
    if not isinstance(expr, str) or not expr.strip():
        raise KernelError(f"{prim.name}: the kernel hook returned {expr!r}, not a C expression")

    params_text = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    signature = ", ".join(map(_type_text, in_avals))
    args = [f"const {t}* __restrict__ in{i}" for i, t in enumerate(in_types)]
    args += [f"{out_type}* __restrict__ out", "long long n"]
    scalars = [f"    const {t} x{i} = in{i}[0];\n" for i, (t, a) in
               enumerate(zip(in_types, in_avals)) if a.shape == ()]
    elems = [f"        const {t} x{i} = in{i}[i];\n" for i, (t, a) in
             enumerate(zip(in_types, in_avals)) if a.shape != ()]
    body = (
        f"\n// {prim.name}({signature}{'; ' + params_text if params_text else ''})"
        f" -> {_type_text(out_aval)}\n"
        f'extern "C" __global__ void @NAME@({", ".join(args)})\n'
        "{\n"
        + "".join(scalars)
        + "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
        "         i += (long long)blockDim.x * gridDim.x) {\n"
        + "".join(elems)
        + f"        out[i] = ({out_type})({expr});\n"
        "    }\n"
        "}\n")
    digest = hashlib.sha1(body.encode()).hexdigest()[:12]
    name = f"fnx_{_identifier(prim.name)}_{digest}"
    return KernelSource(name=name, source=PREAMBLE + body.replace("@NAME@", name),
                        in_avals=in_avals, out_aval=out_aval, prim_name=prim.name)


def _numbered(source):
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))


def _compile_error(ks, compiler, log, source):
    return KernelCompileError(
        f"{compiler} could not compile the kernel {ks.name} of primitive {ks.prim_name!r} "
        f"({', '.join(a.str_short() for a in ks.in_avals)} -> {ks.out_aval.str_short()}).\n"
        f"{compiler} log:\n{log.strip()}\n\nsource:\n{_numbered(source)}")


# --- NVRTC -----------------------------------------------------------------------------------

_LOCK = threading.RLock()
_NVRTC_OPTIONS = ("-std=c++17", "-fmad=false")   # no FMA contraction: NumPy rounds each op
_PTX_CACHE: dict = {}
_AVAILABLE: dict = {}


def _nvrtc():
    from cupy_backends.cuda.libs import nvrtc
    return nvrtc


def compiler_available() -> bool:
    """Whether NVRTC can be loaded (it compiles without a GPU)."""
    if "nvrtc" not in _AVAILABLE:
        try:
            _nvrtc().getVersion()
            _AVAILABLE["nvrtc"] = True
        except Exception:
            _AVAILABLE["nvrtc"] = False
    return _AVAILABLE["nvrtc"]


def device_available() -> bool:
    """Whether CuPy sees at least one CUDA device (False on any error)."""
    if "device" not in _AVAILABLE:
        try:
            import cupy
            _AVAILABLE["device"] = cupy.cuda.runtime.getDeviceCount() >= 1
        except Exception:
            _AVAILABLE["device"] = False
    return _AVAILABLE["device"]


def _default_arch():
    """compute_XX of the current device (the newest NVRTC supports up to it), else
    compute_70."""
    if "arch" not in _AVAILABLE:
        arch = 70
        if device_available():
            import cupy
            cc = int(cupy.cuda.Device().compute_capability)
            try:
                supported = [a for a in _nvrtc().getSupportedArchs() if a <= cc]
            except Exception:
                supported = [cc]
            arch = max(supported) if supported else cc
        _AVAILABLE["arch"] = arch
    return _AVAILABLE["arch"]


def _arch_option(arch):
    if arch is None:
        arch = _default_arch()
    digits = re.sub(r"^(compute_|sm_)", "", str(arch))
    if not digits.isdigit():
        raise ValueError(f"arch must be like 70, 'compute_70' or 'sm_70', got {arch!r}")
    return f"-arch=compute_{digits}"


def _nvrtc_compile(source, filename, options):
    """(ptx, None) or (None, log)."""
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(source, filename, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            return None, nvrtc.getProgramLog(prog)
        ptx = nvrtc.getPTX(prog)
        return (ptx if isinstance(ptx, bytes) else ptx.encode()), None
    finally:
        nvrtc.destroyProgram(prog)


def compile_source(ks: KernelSource, arch=None) -> bytes:
    """PTX of a kernel, compiled by NVRTC for ``arch`` (default: the device's
    compute capability, or compute_70 without a device). Cached by source.
    Raises ``KernelCompileError`` with NVRTC's log."""
    if not compiler_available():
        raise KernelUnsupported("NVRTC is not available (install nvidia-cuda-nvrtc-cu12)")
    option = _arch_option(arch)
    key = (ks.source, option)
    with _LOCK:
        if key not in _PTX_CACHE:
            ptx, log = _nvrtc_compile(ks.source, f"{ks.name}.cu", (option,) + _NVRTC_OPTIONS)
            if ptx is None:
                raise _compile_error(ks, "NVRTC", log, ks.source)
            _PTX_CACHE[key] = ptx
        return _PTX_CACHE[key]


def _unique(sources):
    seen = {}
    for ks in sources:
        seen.setdefault(ks.name, ks)
    return list(seen.values())


def compile_sources(sources, arch=None) -> bytes:
    """PTX of many kernels compiled as one NVRTC program (the preamble once, then
    every kernel): much faster than one program each. On a compile error the
    failing kernel is compiled alone, so the error names its primitive."""
    if not compiler_available():
        raise KernelUnsupported("NVRTC is not available (install nvidia-cuda-nvrtc-cu12)")
    sources = _unique(sources)
    text = PREAMBLE + "".join(ks.body for ks in sources)
    option = _arch_option(arch)
    with _LOCK:
        if (text, option) not in _PTX_CACHE:
            ptx, log = _nvrtc_compile(text, "fnx_kernels.cu", (option,) + _NVRTC_OPTIONS)
            if ptx is None:
                for ks in sources:
                    compile_source(ks, arch)
                raise KernelCompileError(f"NVRTC could not compile the kernels together:\n{log}")
            _PTX_CACHE[text, option] = ptx
        return _PTX_CACHE[text, option]


_WORK_DIR: list = []


def _work_dir():
    """A private temporary directory (removed at exit) for PTX and host libraries."""
    if not _WORK_DIR:
        d = tempfile.mkdtemp(prefix="fnx-kernels-")
        atexit.register(shutil.rmtree, d, True)
        _WORK_DIR.append(d)
    return _WORK_DIR[0]


# --- running on the GPU ----------------------------------------------------------------------

_DEVICE_FUNCS: dict = {}
_BLOCK = 256


# The PTX is compiled here and loaded through a file: CuPy's own build of CUDA source
# (RawKernel(code=...), RawModule(code=...)) appends -ftz=true to the NVRTC options,
# which flushes float32 subnormals to zero (nextafter(0, 1) would give 0), so its
# results would differ from NumPy's.
def _load_ptx(ptx, sources):
    import cupy
    digest = hashlib.sha1(ptx).hexdigest()[:16]
    path = os.path.join(_work_dir(), f"d{digest}.ptx")
    with open(path, "wb") as f:
        f.write(ptx)
    module = cupy.RawModule(path=path)
    for ks in sources:
        _DEVICE_FUNCS[ks.source] = module.get_function(ks.name)


def device_load(sources) -> None:
    """Compile many kernels as one module on the device and keep their functions
    for ``run_elementwise`` (one NVRTC run instead of one per kernel)."""
    if not device_available():
        raise KernelUnsupported("no CUDA device: GPU kernels cannot run here")
    with _LOCK:
        todo = [ks for ks in _unique(sources) if ks.source not in _DEVICE_FUNCS]
        if todo:
            _load_ptx(compile_sources(todo), todo)


def _device_function(ks):
    with _LOCK:
        if ks.source not in _DEVICE_FUNCS:
            _load_ptx(compile_source(ks), [ks])
        return _DEVICE_FUNCS[ks.source]


def _prepare_args(prim, args, params):
    arrays = [np.asarray(a, order="C") for a in args]   # (ascontiguousarray makes 0-d 1-d)
    ks = elementwise_source(prim, [aval_of(a) for a in arrays], params)
    return arrays, ks


def to_device(xp, a):
    """A host array copied to the device bit for bit: through a 1-d copy (CuPy 14 makes
    a 0-d device array from a 0-d host one by value, which turns -0.0 into 0.0)."""
    a = np.asarray(a)
    if a.ndim:  # a buffer of its own (not a view: a donated one can then be reused)
        return xp.asarray(np.ascontiguousarray(a))
    return xp.asarray(a.reshape(1)).reshape(())


def run_elementwise(prim, args, params) -> np.ndarray:
    """``prim(*args, **params)`` computed by its generated kernel on the GPU.

    ``args`` are NumPy arrays (copied to the device); the result comes back as
    a NumPy array. Raises ``KernelUnsupported`` without a device."""
    if not device_available():
        raise KernelUnsupported(f"{prim.name}: no CUDA device: GPU kernels cannot run here")
    import cupy
    arrays, ks = _prepare_args(prim, args, params)
    fn = _device_function(ks)
    out = cupy.empty(ks.out_aval.shape, ks.out_aval.dtype)
    n = out.size
    if n:
        dev = [to_device(cupy, a) for a in arrays]
        grid = min((n + _BLOCK - 1) // _BLOCK, 1 << 16)
        fn((grid,), (_BLOCK,), (*dev, out, np.int64(n)))
    return cupy.asnumpy(out)


def cache_dir():
    """Where compiled kernels are kept between processes: ``$FNX_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/fnx``, else ``~/.cache/fnx`` (a private temporary directory when
    none of them can be written)."""
    root = os.environ.get("FNX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "fnx")
    try:
        os.makedirs(root, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    return _work_dir()


# NVRTC's options for fast math (FMA contraction, flush to zero, approximate division,
# square root and transcendental functions), used by program_ptx when FNX_GPU_FAST_MATH=1:
# faster kernels whose results no longer round like the NumPy impls.
FAST_MATH_OPTIONS = ("-std=c++17", "--use_fast_math")


def program_options(arch=None):
    """NVRTC's options for a program: fnx's (kernels round like NumPy), or with
    ``FNX_GPU_FAST_MATH=1`` the fast-math ones."""
    fast = os.environ.get("FNX_GPU_FAST_MATH", "0") not in ("", "0")
    return (_arch_option(arch),) + (FAST_MATH_OPTIONS if fast else _NVRTC_OPTIONS)


def program_ptx(source, arch=None) -> bytes:
    """PTX of a whole CUDA program (every kernel of one jitted function), compiled by
    NVRTC with ``program_options`` (by default no FMA contraction, no flush to zero),
    cached in memory and on disk by a hash of the source, the options and NVRTC's
    version, so a new process does not recompile. Raises ``KernelCompileError`` with
    NVRTC's log."""
    if not compiler_available():
        raise KernelUnsupported("NVRTC is not available (install nvidia-cuda-nvrtc-cu12)")
    options = program_options(arch)
    with _LOCK:
        ptx = _PTX_CACHE.get((source, options))
        if ptx is not None:
            return ptx
    version = ".".join(map(str, _nvrtc().getVersion()))
    digest = hashlib.sha256("\0".join((source, version) + options).encode()).hexdigest()
    path = os.path.join(cache_dir(), f"{digest[:32]}.ptx")
    try:
        with open(path, "rb") as f:
            ptx = f.read()
    except OSError:
        ptx, log = _nvrtc_compile(source, "fnx_program.cu", options)
        if ptx is None:
            raise KernelCompileError(f"NVRTC could not compile the program:\n{log}\n"
                                     f"{_numbered(source)}")
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(ptx)
            os.replace(tmp, path)  # atomic: another process never reads half a file
        except OSError:
            pass
    with _LOCK:
        _PTX_CACHE[source, options] = ptx
    return ptx


def device_module(source):
    """The CUDA program ``source`` loaded on the current device (a ``cupy.RawModule``
    whose ``get_function(name)`` launches a kernel), compiled by ``program_ptx``."""
    if not device_available():
        raise KernelUnsupported("no CUDA device: GPU kernels cannot run here")
    import cupy
    ptx = program_ptx(source)
    path = os.path.join(_work_dir(), f"m{hashlib.sha1(ptx).hexdigest()[:16]}.ptx")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(ptx)
    return cupy.RawModule(path=path)


# --- running the same kernel text on the CPU -----------------------------------------------------

_HOST_FUNCS: dict = {}
_CXX = "g++"
_CXX_FLAGS = ("-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-w")


def host_compiler_available() -> bool:
    """Whether g++ is on the PATH (``host_check`` needs it)."""
    if "host" not in _AVAILABLE:
        _AVAILABLE["host"] = shutil.which(_CXX) is not None
    return _AVAILABLE["host"]


def _start_gxx(text):
    """Write ``text`` and start g++ on it: (process, path of the library)."""
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    base = os.path.join(_work_dir(), f"k{digest}")
    with open(base + ".cpp", "w") as f:
        f.write(text)
    proc = subprocess.Popen([_CXX, *_CXX_FLAGS, base + ".cpp", "-o", base + ".so"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, base + ".so"


def _bind_host(lib_path, group):
    lib = ctypes.CDLL(lib_path)
    for ks in group:
        fn = getattr(lib, ks.name)
        fn.argtypes = [ctypes.c_void_p] * (len(ks.in_avals) + 1) + [ctypes.c_longlong]
        fn.restype = None
        _HOST_FUNCS[ks.source] = fn


def host_compile(sources, jobs=None) -> None:
    """Compile kernels for ``host_check`` with g++, many per translation unit
    (``HOST_PRELUDE``, ``PREAMBLE``, then the kernels) and ``jobs`` g++ processes
    at once (default: the CPU count). A kernel that fails is compiled alone,
    so the ``KernelCompileError`` names its primitive."""
    if not host_compiler_available():
        raise KernelUnsupported(f"host_check needs a C++ compiler ({_CXX} was not found)")
    with _LOCK:
        todo = [ks for ks in _unique(sources) if ks.source not in _HOST_FUNCS]
        if not todo:
            return
        jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
        groups = [todo[i::jobs] for i in range(jobs)]
        started = [(_start_gxx(HOST_PRELUDE + PREAMBLE + "".join(ks.body for ks in g)), g)
                   for g in groups]
        failed = []
        for (proc, lib_path), group in started:
            log, _ = proc.communicate()
            if proc.returncode:
                failed.append((group, log))
            else:
                _bind_host(lib_path, group)
        for group, log in failed:
            for ks in group:
                if len(group) == 1:
                    raise _compile_error(ks, _CXX, log, HOST_PRELUDE + ks.source)
                host_compile([ks], jobs=1)


def host_check(prim, args, params) -> np.ndarray:
    """``prim(*args, **params)`` computed by its generated kernel text compiled for
    the CPU (g++ behind ``HOST_PRELUDE``), on NumPy arrays: the kernel's
    semantics, checked without a GPU. Compiled libraries are cached by source."""
    arrays, ks = _prepare_args(prim, args, params)
    if ks.source not in _HOST_FUNCS:
        host_compile([ks], jobs=1)
    fn = _HOST_FUNCS[ks.source]
    out = np.empty(ks.out_aval.shape, ks.out_aval.dtype)
    ptrs = [ctypes.c_void_p(a.ctypes.data) for a in arrays]
    fn(*ptrs, ctypes.c_void_p(out.ctypes.data), ctypes.c_longlong(out.size))
    return out
