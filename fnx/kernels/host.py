"""Native code for the CPU: the fused kernels of ``fnx.kernels.fusion`` rendered for the
host (``plan_program(ir, target="host")``), compiled by the system C++ compiler into a
shared library and called through ``ctypes``.

``load(source)`` compiles one program (``PRELUDE``, ``fnx.kernels.cuda.PREAMBLE``, then
the kernels' text) and returns the ``ctypes.CDLL``; libraries are cached in memory and on
disk (``cache_dir()``: ``native/`` in fnx's kernel cache) by a hash of everything that goes
into them -- the text, the flags, the compiler's version and the CPU -- written under a
temporary name and renamed, so concurrent processes never load a half-written library and
a new process does not recompile.

**Flags.** ``-O3 -march=native`` (vector instructions of this CPU) ``-fopenmp`` (each
kernel's outer loop is split over the cores; ``OMP_NUM_THREADS`` sets how many),
``-ffp-contract=off`` (no fused multiply-add: each ``a * b + c`` rounds twice, as NumPy's
ufuncs do), ``-fno-math-errno`` and ``-fno-trapping-math`` (no ``errno`` and no floating-point
exception flags: they change no result, and let comparisons and selections vectorize);
never ``-ffast-math``: NaNs, infinities, signed zeros and subnormals behave as in
NumPy. A kernel's outer loop runs in parallel when it covers at least
``FNX_PARALLEL_MIN`` elements (``parallel_min``).

``compiler_available()`` says whether a compiler is there (``$CXX``, else ``g++``).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading

from . import cuda as _cuda

__all__ = ["PRELUDE", "FLAGS", "VECTOR_MATH", "VECTOR_MATH_NAMES", "cache_dir", "compiler", "compiler_available", "load",
           "parallel_min"]

FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-fopenmp",
         "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-w")

# Float32 exp, expm1, log, log1p, tanh and erf as straight-line code the compiler vectorizes
# (the C library's are calls, one element at a time): the kernels' calls of expf, ... are
# these (VECTOR_MATH_NAMES); each is within 2 ulp of the correctly rounded result.
VECTOR_MATH = r"""// ---- fnx vector math: float32 exp, expm1, log, log1p, tanh, erf as straight-line code ----
// (no calls, no branches: inlined into a loop, the compiler vectorizes them). Each is
// within 2 ulp of the correctly rounded result (tests/test_native_loops.py checks).
static inline float fnx_vm_bits2f(unsigned int u) { return __builtin_bit_cast(float, u); }
static inline unsigned int fnx_vm_f2bits(float f) { return __builtin_bit_cast(unsigned int, f); }
static inline float fnx_vm_pow2i(int n) { return fnx_vm_bits2f((unsigned int)(n + 127) << 23); }
// a * b + c: one rounding where the CPU fuses it (fewer operations on tanh's dependency
// chain), else two, and then the same operations as written out
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define FNX_VM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define FNX_VM_FMA(a, b, c) ((a) * (b) + (c))
#endif

// e**r - 1 for |r| <= ln2/2: the Taylor series to r**7 (truncation below 2**-26 of it)
static inline float fnx_vm_expm1_core(float r) {
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    return r + (r * r) * p;
}

// x = n ln2 + r, |r| <= ln2/2 (Cody and Waite's two-part ln2: n * ln2_hi is exact)
// x / ln2 rounded to the nearest integer (|x| < 2**21: adding and taking away 1.5 * 2**23
// leaves the integer part, in plain arithmetic, which vectorizes)
static inline float fnx_vm_n(float x) {
    return (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
}
static inline float fnx_vm_reduce(float x, float k) {
    return (x - k * 0.693145751953125f) - k * 1.42860682030941723212e-6f;
}

static inline float fnx_vm_expf(float x) {
    const float xc = x < -110.0f ? -110.0f : (x > 90.0f ? 90.0f : x);
    const float n = fnx_vm_n(xc);
    const float r = fnx_vm_reduce(xc, n);
    const float p = fnx_vm_expm1_core(r) + 1.0f;
    const int ni = (int)n, h = ni / 2;
    // 2**n in two exact steps, so a subnormal result is rounded once
    const float y = (p * fnx_vm_pow2i(ni - h)) * fnx_vm_pow2i(h);
    return x != x ? x : y;
}

static inline float fnx_vm_expm1f(float x) {
    // 2**n (e**r - 1) + (2**n - 1); n = 0 (|x| <= ln2/2) leaves r = x, no cancellation
    const float xc = x < -110.0f ? -110.0f : (x > 90.0f ? 90.0f : x);
    const float n = fnx_vm_n(xc);
    const float em1 = fnx_vm_expm1_core(fnx_vm_reduce(xc, n));
    const float nc = n < -60.0f ? -60.0f : (n > 60.0f ? 60.0f : n);
    const float t = fnx_vm_pow2i((int)nc);
    const float mid = t * em1 + (t - 1.0f);
    // n > 60: e**x - 1 is e**x (2**n in two exact steps, as in fnx_vm_expf)
    const int ni = (int)n, h = ni / 2;
    const float big = ((em1 + 1.0f) * fnx_vm_pow2i(ni - h)) * fnx_vm_pow2i(h);
    const float y = n > 60.0f ? big : mid;
    // expm1 has the sign of x (-0.0 too: the series would give +0.0 there)
    return x != x ? x : __builtin_copysignf(y, x);
}

// log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)): log(m) = f - s (f - R), f = m - 1,
// s = f / (m + 1), R = 2 s**2 / 3 + 2 s**4 / 5 + ... (fdlibm's form)
static inline float fnx_vm_logf(float x) {
    const float big = x < 1.17549435e-38f ? 8388608.0f : 1.0f;   // subnormals: times 2**23
    const float esub = x < 1.17549435e-38f ? 23.0f : 0.0f;
    const unsigned int b = fnx_vm_f2bits(x * big);
    const unsigned int mb = (b & 0x007fffffu) | 0x3f800000u;
    const float m0 = fnx_vm_bits2f(mb);
    const float hi = m0 > 1.41421356f ? 1.0f : 0.0f;
    const float m = m0 * (1.0f - 0.5f * hi);
    const float ef = (float)(int)(b >> 23) - 127.0f - esub + hi;
    const float f = m - 1.0f;
    const float s = f / (m + 1.0f);
    const float z = s * s;
    float p = 2.0f / 11.0f;
    p = p * z + 2.0f / 9.0f;
    p = p * z + 2.0f / 7.0f;
    p = p * z + 2.0f / 5.0f;
    p = p * z + 2.0f / 3.0f;
    const float lm = f - s * (f - z * p);
    float y = ef * 0.693145751953125f + (lm + ef * 1.42860682030941723212e-6f);
    const float inf = fnx_vm_bits2f(0x7f800000u);
    y = x == 0.0f ? -inf : y;
    y = x < 0.0f ? fnx_vm_bits2f(0x7fc00000u) : y;
    y = x == inf ? x : y;
    return x != x ? x : y;
}

static inline float fnx_vm_log1pf(float x) {
    const float u = 1.0f + x;
    const float d = u - 1.0f;
    const float dd = d == 0.0f ? 1.0f : d;
    float y = fnx_vm_logf(u) * (x / dd);                // log(u) * x / (u - 1)
    y = d == 0.0f ? x : y;
    y = u == fnx_vm_bits2f(0x7f800000u) ? u : y;
    return x != x ? x : y;
}

static inline float fnx_vm_tanhf(float x) {
    // tanh |x| = e / (e + 2), e = expm1(2 |x|): no cancellation near 0. |x| is clamped to
    // 9.5, where e / (e + 2) rounds to 1 (and so for every larger |x|). 2 |x| <= 19, so
    // expm1 is 2**n (e**r - 1) + (2**n - 1) with 0 <= n <= 28: k = 1.5 * 2**23 + n holds n
    // in its low bits, which make 2**n. e**r - 1 = r + r**2 P(r), P a degree-5 minimax fit
    // (relative error 3e-9 with its float coefficients) evaluated by Estrin's scheme, not
    // Horner's: the loops that call tanh wait on its chain of dependent operations (the
    // cores run out of room for the loop's next iterations), and this one is shorter.
    // Multiply-adds fuse where the CPU can (FNX_VM_FMA): 4-6% faster gelu+layernorm, and
    // within 2 ulp either way (both checked over every float32).
    const float a = __builtin_fabsf(x);
    const float ac = a > 9.5f ? 9.5f : a;
    const float a2 = 2.0f * ac;
    const float k = FNX_VM_FMA(ac, 2.88539008177792681f, 12582912.0f);   // 2|x|/ln2 + 1.5*2**23
    const float n = k - 12582912.0f;
    const float r = FNX_VM_FMA(-n, 1.42860682030941723212e-6f,
                               FNX_VM_FMA(-n, 0.693145751953125f, a2));   // fnx_vm_reduce
    const float s = fnx_vm_bits2f((fnx_vm_f2bits(k) - 0x4B400000u + 127u) << 23);   // 2**n
    const float r2 = r * r;
    const float r4 = r2 * r2;
    const float p01 = FNX_VM_FMA(0x1.555554p-3f, r, 0.5f);
    const float p23 = FNX_VM_FMA(0x1.11118ap-7f, r, 0x1.5554b0p-5f);
    const float p45 = FNX_VM_FMA(0x1.a032d6p-13f, r, 0x1.6d72acp-10f);
    const float em1 = FNX_VM_FMA(r2, FNX_VM_FMA(r4, p45, FNX_VM_FMA(r2, p23, p01)), r);
    const float e = FNX_VM_FMA(s, em1, s - 1.0f);
    return __builtin_copysignf(e / (e + 2.0f), x);   // NaN stays NaN; -0.0 stays -0.0
}
// erf: x P(x**2) below |x| = 1, P evaluated in double (a degree-8 fit of erf(x) / x,
// within 1e-12 of it); from 1 on, 1 - e**(-x**2) R(|x|), R a degree-12 fit of
// erfcx(x) = e**(x**2) erfc(x) on [1, 3.95] in powers of |x| - 2.475, in float (within
// 2e-7 of it, and erfc is below 0.16 there). |x| is clamped to 3.95: erf rounds to +-1
// in float from 3.925 on.
static inline float fnx_vm_erff(float x) {
    const double z = (double)x * (double)x;
    double p = 1.0595284668698557e-06;
    p = p * z + -1.3911707809817056e-05;
    p = p * z + 0.00011956948494649258;
    p = p * z + -0.0008542670769314321;
    p = p * z + 0.005223785020179399;
    p = p * z + -0.02686613363013489;
    p = p * z + 0.11283791313584213;
    p = p * z + -0.37612638889876043;
    p = p * z + 1.1283791670946968;
    const float small = (float)((double)x * p);
    const float a = __builtin_fabsf(x);
    const float ac = a < 1.0f ? 1.0f : (a > 3.95f ? 3.95f : a);
    const float s = ac - 2.475f;
    float r = 1.1384907594447213e-07f;
    r = r * s + -4.545239278286317e-07f;
    r = r * s + 1.0293675813954906e-06f;
    r = r * s + -4.022235771117266e-06f;
    r = r * s + 1.7147893231594935e-05f;
    r = r * s + -6.280058005359024e-05f;
    r = r * s + 0.00022144566173665226f;
    r = r * s + -0.000765613280236721f;
    r = r * s + 0.00256080599501729f;
    r = r * s + -0.008253039792180061f;
    r = r * s + 0.02554747462272644f;
    r = r * s + -0.07560939341783524f;
    r = r * s + 0.21268075704574585f;
    const float big = 1.0f - fnx_vm_expf(-(ac * ac)) * r;
    const float y = a < 1.0f ? small : __builtin_copysignf(big, x);
    return x != x ? x : y;
}
// ---- end of vector math ----
#define expf(x) fnx_vm_expf(x)
#define expm1f(x) fnx_vm_expm1f(x)
#define logf(x) fnx_vm_logf(x)
#define log1pf(x) fnx_vm_log1pf(x)
#define tanhf(x) fnx_vm_tanhf(x)
#define erff(x) fnx_vm_erff(x)
"""
VECTOR_MATH_NAMES = ("expf", "expm1f", "logf", "log1pf", "tanhf", "erff")

# NumPy's pairwise summation (its float add.reduce over a contiguous run), term for term:
# below 8 terms one after another from 0; up to 128 in 8 interleaved partial sums added
# as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest one by one; longer
# runs split in two at a multiple of 8 below the half. A host kernel stores a row's terms
# and adds them with this, so its float sums are NumPy's to the bit. Kernels know a row's
# length when they are generated: ``fnx_pairwise_sum_n<N>`` unfolds the same tree at
# compile time, so the leaves' chains of additions run side by side instead of one call
# after another (a 1024-term row: 116 cycles against 138; gelu + layernorm 4-8% faster);
# rows longer than PAIRWISE_UNFOLD_MAX (code size) take the recursive function.
PAIRWISE_UNFOLD_MAX = 4096
PAIRWISE_SUM = r"""
#include <cstdlib>
template <typename T> static T fnx_pairwise_sum(const T* a, long long n) {
    if (n < 8) {
        T res = 0;
        for (long long i = 0; i < n; ++i) res += a[i];
        return res;
    }
    if (n <= 128) {
        T r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j];
        long long i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += a[i + j];
        T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i];
        return res;
    }
    long long n2 = n / 2;
    n2 -= n2 % 8;
    return fnx_pairwise_sum(a, n2) + fnx_pairwise_sum(a + n2, n - n2);
}
template <long long N, typename T> static inline __attribute__((always_inline)) T fnx_pairwise_sum_n(const T* a) {
    if constexpr (N > FNX_PAIRWISE_UNFOLD_MAX || N <= 128) {
        return fnx_pairwise_sum(a, N);
    } else {
        constexpr long long n2 = N / 2 - (N / 2) % 8;
        return fnx_pairwise_sum_n<n2>(a) + fnx_pairwise_sum_n<N - n2>(a + n2);
    }
}
""".replace("FNX_PAIRWISE_UNFOLD_MAX", str(PAIRWISE_UNFOLD_MAX))

# What the kernels' text needs on the host beyond the CUDA preamble: the CUDA keywords
# (fnx.kernels.cuda.HOST_PRELUDE, which also defines the CUDA math functions <cmath>
# lacks) and the vector math.
PRELUDE = _cuda.HOST_PRELUDE + VECTOR_MATH + PAIRWISE_SUM


def parallel_min() -> int:
    """Elements from which a kernel's loop is split over the cores
    (``$FNX_PARALLEL_MIN``, default 32768)."""
    try:
        return max(1, int(os.environ.get("FNX_PARALLEL_MIN", "32768")))
    except ValueError:
        return 32768


def compiler() -> str:
    return os.environ.get("CXX") or "g++"


_INFO: dict = {}
_LOADED: dict = {}
_LOCK = threading.Lock()


def compiler_available() -> bool:
    """Whether the C++ compiler (``$CXX``, else ``g++``) is on the PATH."""
    return shutil.which(compiler()) is not None


def _identity():
    """The compiler's version and this CPU: part of every library's hash (``-march=native``
    code is for this CPU only)."""
    if "id" not in _INFO:
        try:
            out = subprocess.run([compiler(), "-dumpfullversion", "-dumpmachine"],
                                 capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        cpu = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                cpu += "".join(sorted({ln for ln in f if ln.startswith(("model name", "flags"))}))
        except OSError:
            pass
        _INFO["id"] = f"{shutil.which(compiler())} {out.split()} {cpu}"
    return _INFO["id"]


def cache_dir() -> str:
    """``native/`` in fnx's kernel cache (``fnx.kernels.cuda.cache_dir``)."""
    d = os.path.join(_cuda.cache_dir(), "native")
    os.makedirs(d, exist_ok=True)
    return d


class HostCompileError(RuntimeError):
    """The C++ compiler refused a generated program; the message holds its log."""


def program_text(kernels_text):
    return (PRELUDE + f"#define FNX_PARALLEL_MIN {parallel_min()}\n" + _cuda.PREAMBLE
            + kernels_text)


def load(kernels_text):
    """The shared library of these kernels (``ctypes.CDLL``), compiled once per text,
    flags, compiler and CPU (see the module docstring)."""
    text = program_text(kernels_text)
    key = hashlib.sha256("\0".join((text, " ".join(FLAGS), _identity())).encode()).hexdigest()
    lib = _LOADED.get(key)
    if lib is not None:
        return lib
    with _LOCK:
        lib = _LOADED.get(key)
        if lib is None:
            path = os.path.join(cache_dir(), f"k{key[:24]}.so")
            if not os.path.exists(path):
                _compile(text, path)
            lib = _LOADED[key] = ctypes.CDLL(path)
    return lib


def _compile(text, path):
    d = os.path.dirname(path)
    fd, src = tempfile.mkstemp(suffix=".cpp", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp = src[:-4] + ".so"
    try:
        r = subprocess.run([compiler(), *FLAGS, src, "-o", tmp], capture_output=True,
                           text=True, timeout=600)
        if r.returncode != 0:
            numbered = "\n".join(f"{i + 1:5d}  {ln}" for i, ln in enumerate(text.splitlines()))
            raise HostCompileError(f"{compiler()} could not compile a generated host "
                                   f"program:\n{r.stderr[-4000:]}\n{numbered[-20000:]}")
        os.replace(tmp, path)
    finally:
        for p in (src, tmp):
            try:
                os.remove(p)
            except OSError:
                pass
