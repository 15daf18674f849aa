// fnx CUDA emulator: the host runtime compiled in front of every emulated kernel source.
//
// fnx.kernels.emulate compiles CUDA kernel text for the CPU with g++ as one translation
// unit: this file, then the kernel source (lightly rewritten, line numbers kept), then one
// generated launcher per kernel. The design (what is emulated, how, what is an error) is
// written in emulate.py's docstring; the comments here say how each piece works.
//
// Nothing here may include a header after the CUDA keyword macros below are defined
// (they would rewrite the system headers' own attributes).

#include <math.h>
#include <cmath>
#include <stdint.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <type_traits>
#if FNX_EMU_UCONTEXT
#include <ucontext.h>
#endif

// ---- the vector types and dim3 --------------------------------------------------------------

#define FNX_EMU_VEC(T, N, A2, A4)                                                           \
    struct N##1 { T x; };                                                                    \
    struct __attribute__((aligned(A2))) N##2 { T x, y; };                                    \
    struct N##3 { T x, y, z; };                                                              \
    struct __attribute__((aligned(A4))) N##4 { T x, y, z, w; };                              \
    static inline N##1 make_##N##1(T x) { N##1 r = {x}; return r; }                          \
    static inline N##2 make_##N##2(T x, T y) { N##2 r = {x, y}; return r; }                  \
    static inline N##3 make_##N##3(T x, T y, T z) { N##3 r = {x, y, z}; return r; }          \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 r = {x, y, z, w}; return r; }
FNX_EMU_VEC(signed char, char, 2, 4)
FNX_EMU_VEC(unsigned char, uchar, 2, 4)
FNX_EMU_VEC(short, short, 4, 8)
FNX_EMU_VEC(unsigned short, ushort, 4, 8)
FNX_EMU_VEC(int, int, 8, 16)
FNX_EMU_VEC(unsigned int, uint, 8, 16)
FNX_EMU_VEC(long, long, 16, 16)
FNX_EMU_VEC(unsigned long, ulong, 16, 16)
FNX_EMU_VEC(long long, longlong, 16, 16)
FNX_EMU_VEC(unsigned long long, ulonglong, 16, 16)
FNX_EMU_VEC(float, float, 8, 16)
FNX_EMU_VEC(double, double, 16, 16)
#undef FNX_EMU_VEC

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
    dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    operator uint3() const { uint3 r = {x, y, z}; return r; }
};

// ---- math: the CUDA functions <cmath> lacks, min/max, bit casts, integer intrinsics --------

namespace fnx_emu {

static const long double PI_L = 3.141592653589793238462643383279502884L;
static const long double SQRT2_L = 1.414213562373095048801688724209698079L;
static const long double TWO_OVER_SQRT_PI_L = 1.128379167095512573896158903121545172L;

// erfinv / erfcinv in long double: a first guess within about 0.2% (a series near 0,
// Winitzki's closed form elsewhere, written in terms of 1 - a and of y = erfc(z) so that
// nothing cancels), then three Halley steps on erf(z) - a, whose residual is formed from
// erfc where erf is close to 1. Halley's step for erf is z -= u / (1 + z u), u = f / f'.
static long double winitzki(long double log_one_minus_a2) {
    const long double k = 0.147L, t = 2.0L / (PI_L * k) + log_one_minus_a2 / 2.0L;
    return sqrtl(sqrtl(t * t - log_one_minus_a2 / k) - t);
}
static long double erfinv_l(long double y) {
    const long double a = fabsl(y);
    if (!(a <= 1.0L)) return NAN;
    if (a == 1.0L) return copysignl(INFINITY, y);
    if (a == 0.0L) return y;
    long double z = a < 0.5L
        ? 0.886226925452758013649083741671L * a
              * (1.0L + a * a * (PI_L / 12.0L + a * a * 7.0L * PI_L * PI_L / 480.0L))
        : winitzki(logl((1.0L - a) * (1.0L + a)));
    for (int k = 0; k < 3; ++k) {
        const long double f = a <= 0.5L ? erfl(z) - a : (1.0L - a) - erfcl(z);
        const long double u = f / (TWO_OVER_SQRT_PI_L * expl(-z * z));
        z -= u / (1.0L + z * u);
    }
    return y < 0 ? -z : z;
}
static long double erfcinv_l(long double y) {     // erfc(z) = y, y in [0, 2]
    if (!(y >= 0.0L && y <= 2.0L)) return NAN;
    if (y == 0.0L) return INFINITY;
    if (y == 2.0L) return -INFINITY;
    if (y > 1.5L) return -erfcinv_l(2.0L - y);
    if (y >= 0.5L) return erfinv_l(1.0L - y);
    long double z = winitzki(logl(y * (2.0L - y)));
    for (int k = 0; k < 4; ++k) {
        const long double f = y - erfcl(z);       // = erf(z) - (1 - y)
        const long double u = f / (TWO_OVER_SQRT_PI_L * expl(-z * z));
        z -= u / (1.0L + z * u);
    }
    return z;
}
static long double erfcx_l(long double x) {
    if (x != x) return x;
    if (x < 50.0L) return expl(x * x) * erfcl(x);
    const long double r = 1.0L / (x * x);        // the asymptotic series
    return (1.0L - r * (0.5L - r * (0.75L - r * 1.875L))) / (x * sqrtl(PI_L));
}
static long double sinpi_l(long double x) {
    if (!isfinite(x)) return NAN;
    long double r = fmodl(x, 2.0L);               // exact, in (-2, 2)
    if (r > 1.0L) r -= 2.0L; else if (r < -1.0L) r += 2.0L;
    if (r > 0.5L) r = 1.0L - r; else if (r < -0.5L) r = -1.0L - r;
    if (r == 0.0L) return copysignl(0.0L, x);
    return sinl(PI_L * r);
}
static long double cospi_l(long double x) {
    if (!isfinite(x)) return NAN;
    long double r = fmodl(fabsl(x), 2.0L);
    if (r > 1.0L) r = 2.0L - r;                   // cos(pi r), r in [0, 1]
    const long double s = 0.5L - r;
    return s == 0.0L ? 0.0L : sinl(PI_L * s);
}

template <class To, class From> static inline To bit_cast(From v) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
    To r;
    memcpy(&r, &v, sizeof r);
    return r;
}

// float -> integer conversions of the CUDA intrinsics: NaN gives 0, out-of-range values
// saturate (as the PTX cvt instructions do).
template <class I, class F> static inline I f2i_sat(F r) {
    if (r != r) return I(0);
    if (r <= (F)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (r >= (F)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)r;
}

}  // namespace fnx_emu

static inline float erfinvf(float y) { return (float)fnx_emu::erfinv_l(y); }
static inline double erfinv(double y) { return (double)fnx_emu::erfinv_l(y); }
static inline float erfcinvf(float y) { return (float)fnx_emu::erfcinv_l(y); }
static inline double erfcinv(double y) { return (double)fnx_emu::erfcinv_l(y); }
static inline float erfcxf(float x) { return (float)fnx_emu::erfcx_l(x); }
static inline double erfcx(double x) { return (double)fnx_emu::erfcx_l(x); }
static inline float normcdff(float x) { return (float)(0.5L * erfcl(-(long double)x / fnx_emu::SQRT2_L)); }
static inline double normcdf(double x) { return (double)(0.5L * erfcl(-(long double)x / fnx_emu::SQRT2_L)); }
static inline float normcdfinvf(float p) { return (float)(-fnx_emu::SQRT2_L * fnx_emu::erfcinv_l(2.0L * p)); }
static inline double normcdfinv(double p) { return (double)(-fnx_emu::SQRT2_L * fnx_emu::erfcinv_l(2.0L * p)); }
static inline float sinpif(float x) { return (float)fnx_emu::sinpi_l(x); }
static inline double sinpi(double x) { return (double)fnx_emu::sinpi_l(x); }
static inline float cospif(float x) { return (float)fnx_emu::cospi_l(x); }
static inline double cospi(double x) { return (double)fnx_emu::cospi_l(x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return (float)(1.0L / cbrtl(x)); }
static inline double rcbrt(double x) { return (double)(1.0L / cbrtl(x)); }
static inline float rhypotf(float x, float y) { return (float)(1.0L / hypotl(x, y)); }
static inline double rhypot(double x, double y) { return (double)(1.0L / hypotl(x, y)); }
static inline float norm3df(float a, float b, float c) { return (float)sqrtl((long double)a * a + (long double)b * b + (long double)c * c); }
static inline double norm3d(double a, double b, double c) { return (double)sqrtl((long double)a * a + (long double)b * b + (long double)c * c); }
static inline float fdividef(float a, float b) { return a / b; }
static inline float __fdividef(float a, float b) { return a / b; }
// The fast-math intrinsics, computed exactly (glibc declares its own __expf & co., so
// these are macros for functions of other names).
static inline float fnx_emu_expf(float x) { return expf(x); }
static inline float fnx_emu_exp10f(float x) { return exp10f(x); }
static inline float fnx_emu_logf(float x) { return logf(x); }
static inline float fnx_emu_log2f(float x) { return log2f(x); }
static inline float fnx_emu_log10f(float x) { return log10f(x); }
static inline float fnx_emu_sinf(float x) { return sinf(x); }
static inline float fnx_emu_cosf(float x) { return cosf(x); }
static inline float fnx_emu_tanf(float x) { return tanf(x); }
static inline void fnx_emu_sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
static inline float fnx_emu_powf(float x, float y) { return powf(x, y); }
#define __expf fnx_emu_expf
#define __exp10f fnx_emu_exp10f
#define __logf fnx_emu_logf
#define __log2f fnx_emu_log2f
#define __log10f fnx_emu_log10f
#define __sinf fnx_emu_sinf
#define __cosf fnx_emu_cosf
#define __tanf fnx_emu_tanf
#define __sincosf fnx_emu_sincosf
#define __powf fnx_emu_powf
static inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }

static inline int __float_as_int(float x) { return fnx_emu::bit_cast<int>(x); }
static inline unsigned int __float_as_uint(float x) { return fnx_emu::bit_cast<unsigned int>(x); }
static inline float __int_as_float(int x) { return fnx_emu::bit_cast<float>(x); }
static inline float __uint_as_float(unsigned int x) { return fnx_emu::bit_cast<float>(x); }
static inline long long __double_as_longlong(double x) { return fnx_emu::bit_cast<long long>(x); }
static inline double __longlong_as_double(long long x) { return fnx_emu::bit_cast<double>(x); }
static inline int __double2hiint(double x) { return (int)(fnx_emu::bit_cast<unsigned long long>(x) >> 32); }
static inline int __double2loint(double x) { return (int)fnx_emu::bit_cast<unsigned long long>(x); }
static inline double __hiloint2double(int hi, int lo) {
    return fnx_emu::bit_cast<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}
static inline int __float2int_rn(float x) { return fnx_emu::f2i_sat<int>(nearbyintf(x)); }
static inline int __float2int_rz(float x) { return fnx_emu::f2i_sat<int>(truncf(x)); }
static inline int __float2int_rd(float x) { return fnx_emu::f2i_sat<int>(floorf(x)); }
static inline int __float2int_ru(float x) { return fnx_emu::f2i_sat<int>(ceilf(x)); }
static inline unsigned int __float2uint_rn(float x) { return fnx_emu::f2i_sat<unsigned int>(nearbyintf(x)); }
static inline unsigned int __float2uint_rz(float x) { return fnx_emu::f2i_sat<unsigned int>(truncf(x)); }
static inline long long __float2ll_rn(float x) { return fnx_emu::f2i_sat<long long>(nearbyintf(x)); }
static inline long long __float2ll_rz(float x) { return fnx_emu::f2i_sat<long long>(truncf(x)); }
static inline unsigned long long __float2ull_rz(float x) { return fnx_emu::f2i_sat<unsigned long long>(truncf(x)); }
static inline int __double2int_rn(double x) { return fnx_emu::f2i_sat<int>(nearbyint(x)); }
static inline int __double2int_rz(double x) { return fnx_emu::f2i_sat<int>(trunc(x)); }
static inline long long __double2ll_rn(double x) { return fnx_emu::f2i_sat<long long>(nearbyint(x)); }
static inline long long __double2ll_rz(double x) { return fnx_emu::f2i_sat<long long>(trunc(x)); }
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned int x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline float __ull2float_rn(unsigned long long x) { return (float)x; }
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __uint2double_rn(unsigned int x) { return (double)x; }
static inline double __ll2double_rn(long long x) { return (double)x; }
static inline double __ull2double_rn(unsigned long long x) { return (double)x; }

static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return (int)(((a << 8) >> 8) * ((b << 8) >> 8)); }
static inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline unsigned int __sad(int a, int b, unsigned int c) { return c + (a > b ? (unsigned)(a - b) : (unsigned)(b - a)); }
static inline unsigned int __usad(unsigned int a, unsigned int b, unsigned int c) { return c + (a > b ? a - b : b - a); }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned int __uhadd(unsigned int a, unsigned int b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
static inline unsigned int __urhadd(unsigned int a, unsigned int b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
static inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) << (s & 31) >> 32);
}
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (s & 31));
}
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

// CUDA's min and max: any two arithmetic operands, after the usual arithmetic conversions
// (CUDA's overload set gives the same: min(int, unsigned) is the unsigned minimum);
// floating-point operands as fmin / fmax (a NaN operand gives the other one).
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) {
    typedef decltype(a + b) C;
    if constexpr (std::is_floating_point<C>::value) return std::fmin((C)a, (C)b);
    else return (C)a < (C)b ? (C)a : (C)b;
}
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) {
    typedef decltype(a + b) C;
    if constexpr (std::is_floating_point<C>::value) return std::fmax((C)a, (C)b);
    else return (C)a > (C)b ? (C)a : (C)b;
}
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }

// ---- atomics: real atomic instructions, since blocks may run on several CPU threads ------

#define FNX_EMU_ATOMIC_INT(T)                                                               \
    static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }   \
    static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); } \
    static inline T atomicCAS(T* p, T compare, T v) {                                        \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
        return compare;                                                                      \
    }                                                                                        \
    static inline T atomicMin(T* p, T v) {                                                   \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                        \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,   \
                                                       __ATOMIC_RELAXED)) {}                 \
        return old;                                                                          \
    }                                                                                        \
    static inline T atomicMax(T* p, T v) {                                                   \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                        \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,   \
                                                       __ATOMIC_RELAXED)) {}                 \
        return old;                                                                          \
    }
FNX_EMU_ATOMIC_INT(int)
FNX_EMU_ATOMIC_INT(unsigned int)
FNX_EMU_ATOMIC_INT(unsigned long long)
FNX_EMU_ATOMIC_INT(long long)
#undef FNX_EMU_ATOMIC_INT

#define FNX_EMU_ATOMIC_FLOAT(T, U)                                                          \
    static inline T atomicAdd(T* p, T v) {                                                   \
        U* q = (U*)p;                                                                        \
        U old = __atomic_load_n(q, __ATOMIC_RELAXED);                                        \
        while (!__atomic_compare_exchange_n(q, &old, fnx_emu::bit_cast<U>(fnx_emu::bit_cast<T>(old) + v), \
                                            true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}    \
        return fnx_emu::bit_cast<T>(old);                                                    \
    }                                                                                        \
    static inline T atomicExch(T* p, T v) {                                                  \
        return fnx_emu::bit_cast<T>(__atomic_exchange_n((U*)p, fnx_emu::bit_cast<U>(v), __ATOMIC_RELAXED)); \
    }
FNX_EMU_ATOMIC_FLOAT(float, unsigned int)
FNX_EMU_ATOMIC_FLOAT(double, unsigned long long)
#undef FNX_EMU_ATOMIC_FLOAT

static inline unsigned short atomicCAS(unsigned short* p, unsigned short compare, unsigned short v) {
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}
static inline unsigned int atomicInc(unsigned int* p, unsigned int limit) {
    unsigned int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, old >= limit ? 0u : old + 1u, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
static inline unsigned int atomicDec(unsigned int* p, unsigned int limit) {
    unsigned int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, (old == 0u || old > limit) ? limit : old - 1u,
                                        true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
#define FNX_EMU_SCOPED(op) \
    template <class... A> static inline auto op##_block(A... a) -> decltype(op(a...)) { return op(a...); } \
    template <class... A> static inline auto op##_system(A... a) -> decltype(op(a...)) { return op(a...); }
FNX_EMU_SCOPED(atomicAdd) FNX_EMU_SCOPED(atomicSub) FNX_EMU_SCOPED(atomicExch)
FNX_EMU_SCOPED(atomicMin) FNX_EMU_SCOPED(atomicMax) FNX_EMU_SCOPED(atomicInc)
FNX_EMU_SCOPED(atomicDec) FNX_EMU_SCOPED(atomicCAS) FNX_EMU_SCOPED(atomicAnd)
FNX_EMU_SCOPED(atomicOr) FNX_EMU_SCOPED(atomicXor)
#undef FNX_EMU_SCOPED

static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
static inline void __nanosleep(unsigned int) {}

// ---- the runtime: launches, blocks, threads as fibers, barriers, warp collectives ----------

namespace fnx_emu {

// What Python passes to a kernel's launcher (ctypes mirrors this layout).
struct Launch {
    unsigned int grid[3], block[3];
    unsigned long long shared_bytes;      // dynamic shared memory of each block
    unsigned long long shared_limit;      // static + dynamic shared memory allowed
    void** args;                          // one pointer to each parameter's value
    const char* kernel;
    char* err;                            // the first error's message, NUL-terminated
    unsigned long long err_cap;
    unsigned long long seed;              // of the "shuffle" schedule
    int schedule;                         // 0 forward, 1 reverse, 2 shuffle
    int workers;                          // CPU threads running blocks
    unsigned long long stack_bytes;       // of each fiber
};

enum { SCHED_FORWARD = 0, SCHED_REVERSE = 1, SCHED_SHUFFLE = 2 };
enum { ST_READY = 0, ST_BAR = 1, ST_WARP = 2, ST_DONE = 3 };
enum { OP_SYNCWARP = 1, OP_SHFL, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR, OP_BALLOT, OP_ANY,
       OP_ALL, OP_RED_ADD, OP_RED_MIN, OP_RED_MAX, OP_RED_AND, OP_RED_OR, OP_RED_XOR,
       OP_MATCH_ANY, OP_MATCH_ALL };
static const char* const OP_NAMES[] = {
    "?", "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
    "__ballot_sync", "__any_sync", "__all_sync", "__reduce_add_sync", "__reduce_min_sync",
    "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync",
    "__match_any_sync", "__match_all_sync"};
static const char* const BAR_NAMES[] = {"__syncthreads", "__syncthreads_count",
                                        "__syncthreads_and", "__syncthreads_or"};

struct Abort {};                          // unwinds a thread whose error is recorded

// ---- contexts: a hand-written switch on x86-64, ucontext elsewhere ----

#if !FNX_EMU_UCONTEXT && defined(__x86_64__)
// fnx_emu_switch(save, to): push the callee-saved registers, store the stack pointer in
// *save, load `to` and pop the registers saved there; `ret` resumes the other context.
asm(".text\n"
    ".p2align 4\n"
    ".globl fnx_emu_switch\n"
    ".hidden fnx_emu_switch\n"
    ".type fnx_emu_switch, @function\n"
    "fnx_emu_switch:\n"
    "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
    "    ret\n"
    ".size fnx_emu_switch, .-fnx_emu_switch\n");
extern "C" void fnx_emu_switch(void** save, void* to);
struct Context { void* sp; };
static inline void ctx_switch(Context* from, Context* to) { fnx_emu_switch(&from->sp, to->sp); }
static inline void ctx_make(Context* c, char* lo, size_t size, void (*entry)()) {
    void** sp = (void**)(((uintptr_t)(lo + size)) & ~(uintptr_t)15);
    *--sp = nullptr;                      // the entry's "return address": it never returns
    *--sp = (void*)entry;                 // where the switch's `ret` goes
    for (int i = 0; i < 6; ++i) *--sp = nullptr;
    c->sp = sp;
}
#else
struct Context { ucontext_t uc; };
static inline void ctx_switch(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
static inline void ctx_make(Context* c, char* lo, size_t size, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = lo;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
}
#endif

struct Fiber {
    Context ctx;
    uint3 tid;
    int state;
    // at a barrier
    int bar_line, bar_site, bar_kind, bar_pred, bar_result;
    const char* bar_fn;
    // at a warp collective
    int wop, wline, wsize, warg, wwidth;
    unsigned int wmask;
    unsigned long long wval, wres;
    const char* wfn;
};

// A CPU thread's fibers and stacks, kept between launches (freed when the thread ends).
// Every kernel module compiles this runtime, so each holds pools of its own; the calling
// thread's stacks are released after each launch (release_stacks), else a process that
// loads many modules would keep two mappings per stack of each one until the kernel's
// limit on mappings (vm.max_map_count) refuses the next module.
struct Pool {
    char* stacks = nullptr;
    size_t nstacks = 0, stride = 0, stack_bytes = 0;
    Fiber* fibers = nullptr;
    int* queue = nullptr;
    size_t nfibers = 0;
    unsigned char* dyn = nullptr;
    size_t ndyn = 0;
    ~Pool() {
        if (stacks) munmap(stacks, nstacks * stride);
        free(fibers);
        free(queue);
        free(dyn);
    }
    void release_stacks() {
        if (stacks) munmap(stacks, nstacks * stride);
        stacks = nullptr;
        nstacks = stride = stack_bytes = 0;
    }
    bool ensure_fibers(size_t n) {
        if (n <= nfibers) return true;
        Fiber* f = (Fiber*)realloc(fibers, n * sizeof(Fiber));
        if (f) fibers = f;
        int* q = (int*)realloc(queue, n * sizeof(int));
        if (q) queue = q;
        if (!f || !q) return false;
        nfibers = n;
        return true;
    }
    // n stacks of `bytes` each, every one above a guard page (an overflow faults rather
    // than corrupting its neighbour).
    bool ensure_stacks(size_t n, size_t bytes) {
        if (n <= nstacks && bytes == stack_bytes) return true;
        if (stacks) munmap(stacks, nstacks * stride);
        stacks = nullptr;
        nstacks = 0;
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        const size_t s = (bytes + page - 1) / page * page + page;
        void* p = mmap(nullptr, n * s, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return false;
        for (size_t i = 0; i < n; ++i) mprotect((char*)p + i * s, page, PROT_NONE);
        stacks = (char*)p;
        nstacks = n;
        stride = s;
        stack_bytes = bytes;
        return true;
    }
    bool ensure_dyn(size_t n) {
        if (n <= ndyn) return true;
        free(dyn);
        dyn = nullptr;
        ndyn = 0;
        void* p = nullptr;
        if (posix_memalign(&p, 128, n ? n : 1)) return false;
        dyn = (unsigned char*)p;
        ndyn = n;
        return true;
    }
};
static thread_local Pool tl_pool;

struct Grid {                             // one launch, shared by its CPU threads
    const Launch* L;
    unsigned long long nblocks;
    unsigned long long next;              // the next block to claim
    unsigned long long mul, add;          // claim k runs block (mul * k + add) mod nblocks
    int abort;
    int has_err;
    pthread_mutex_t lock;
};

struct Worker {                           // one CPU thread of a launch
    Grid* g;
    const Launch* L;
    unsigned int nthreads;
    uint3 bid;
    bool fibers;                          // the kernel runs its threads as fibers
    bool failed;
    Fiber* fib;
    Fiber* cur;                           // the running fiber (null on the fast path)
    int* queue;                           // a ring of nthreads entries
    unsigned int qhead, qtail, qcount;
    unsigned int n_done, n_bar, n_warp;   // fibers exited, at a barrier, at a collective
    unsigned int warp_wait[32];           // per warp: the lanes waiting at a collective
    Context sched;
    void (*entry)(void*);
    void* entry_arg;
    unsigned char* dyn;
    unsigned long long seen_block[4], seen_launch[4];
    unsigned long long static_shared;
    unsigned long long rng;
};

static thread_local Worker* tl_worker = nullptr;
static thread_local uint3 tl_tid, tl_bid, tl_bdim, tl_gdim;

static inline unsigned long long splitmix(unsigned long long* s) {
    unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Threads as written in messages: threadIdx.x ranges for a 1-D block, else linear indices.
static void append(char* buf, size_t cap, const char* fmt, ...) {
    size_t n = strlen(buf);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}
static void describe_set(char* buf, size_t cap, const Worker* w, const unsigned char* in) {
    const uint3 b = tl_bdim;
    const bool flat = b.y == 1 && b.z == 1;
    append(buf, cap, flat ? "threadIdx.x " : "threads (linear index x + y*blockDim.x + ...) ");
    int first = 1, shown = 0;
    for (unsigned int i = 0; i < w->nthreads; ++i) {
        if (!in[i]) continue;
        unsigned int j = i;
        while (j + 1 < w->nthreads && in[j + 1]) ++j;
        if (shown++ == 8) { append(buf, cap, ", ..."); break; }
        append(buf, cap, first ? "%u" : ", %u", i);
        if (j > i) append(buf, cap, "-%u", j);
        first = 0;
        i = j;
    }
}

static void report_v(Worker* w, bool with_thread, const char* fmt, va_list ap) {
    Grid* g = w->g;
    w->failed = true;
    __atomic_store_n(&g->abort, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g->lock);
    if (!g->has_err) {
        g->has_err = 1;
        char* e = g->L->err;
        size_t cap = (size_t)g->L->err_cap;
        e[0] = 0;
        append(e, cap, "kernel %s, block (%u, %u, %u)", g->L->kernel, w->bid.x, w->bid.y, w->bid.z);
        if (with_thread) append(e, cap, ", thread (%u, %u, %u)", tl_tid.x, tl_tid.y, tl_tid.z);
        append(e, cap, ": ");
        size_t n = strlen(e);
        if (n + 1 < cap) vsnprintf(e + n, cap - n, fmt, ap);
    }
    pthread_mutex_unlock(&g->lock);
}
static void report(Worker* w, bool with_thread, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report_v(w, with_thread, fmt, ap);
    va_end(ap);
}

// An error of the running thread (a trap, a failed assert, a misused intrinsic): recorded,
// then the thread unwinds to its fiber's entry or the block loop, and the launch stops.
[[noreturn]] static void thread_fail(const char* fmt, ...) {
    Worker* w = tl_worker;
    if (w) {
        va_list ap;
        va_start(ap, fmt);
        report_v(w, true, fmt, ap);
        va_end(ap);
    }
    throw Abort();
}

static inline unsigned int linear_tid(uint3 t) {
    return t.x + tl_bdim.x * (t.y + tl_bdim.y * t.z);
}
static inline uint3 tid_of(unsigned int i) {
    uint3 t;
    t.x = i % tl_bdim.x;
    t.y = (i / tl_bdim.x) % tl_bdim.y;
    t.z = i / (tl_bdim.x * tl_bdim.y);
    return t;
}

// ---- the run queue: a ring of the block's runnable fibers (each is in it at most once) ----

static inline void push(Worker* w, int id) {
    w->queue[w->qtail] = id;
    if (++w->qtail == w->nthreads) w->qtail = 0;
    ++w->qcount;
}
static inline Fiber* pop(Worker* w) {
    Fiber* f = &w->fib[w->queue[w->qhead]];
    if (++w->qhead == w->nthreads) w->qhead = 0;
    --w->qcount;
    return f;
}

// Puts ids[0..n) in the order the schedule asks for.
static void order_ids(Worker* w, int* ids, unsigned int n) {
    const int s = w->L->schedule;
    if (s == SCHED_REVERSE) {
        for (unsigned int i = 0, j = n ? n - 1 : 0; i < j; ++i, --j) {
            int t = ids[i]; ids[i] = ids[j]; ids[j] = t;
        }
    } else if (s == SCHED_SHUFFLE) {
        for (unsigned int i = n; i > 1; --i) {
            unsigned int j = (unsigned int)(splitmix(&w->rng) % i);
            int t = ids[i - 1]; ids[i - 1] = ids[j]; ids[j] = t;
        }
    }
}

// Hands the CPU to the next runnable fiber, or back to the block's scheduler.
static inline void yield(Worker* w, Fiber* me) {
    if (!w->failed && w->qcount) {
        Fiber* next = pop(w);
        w->cur = next;
        tl_tid = next->tid;
        ctx_switch(&me->ctx, &next->ctx);
    } else {
        w->cur = nullptr;
        ctx_switch(&me->ctx, &w->sched);
    }
}

static void fiber_entry() {
    Worker* w = tl_worker;
    Fiber* me = w->cur;
    try {
        w->entry(w->entry_arg);
    } catch (Abort&) {
    } catch (...) {
        report(w, true, "a C++ exception left the kernel");
    }
    me->state = ST_DONE;
    ++w->n_done;
    yield(w, me);
    __builtin_trap();                     // a finished fiber is never resumed
}

[[noreturn]] static void not_a_fiber(const char* what, int line) {
    thread_fail("%s at line %d runs on the emulator's fast path, which is chosen for kernels "
                "without barriers or warp collectives: the emulator's source analysis missed "
                "this call (call it from the kernel or a function the kernel's source names)",
                what, line);
}

static int barrier(int kind, int pred, int line, int site, const char* fn) {
    Worker* w = tl_worker;
    Fiber* me = w ? w->cur : nullptr;
    if (!me) not_a_fiber(BAR_NAMES[kind], line);
    me->state = ST_BAR;
    me->bar_kind = kind;
    me->bar_pred = pred != 0;
    me->bar_line = line;
    me->bar_site = site;
    me->bar_fn = fn;
    ++w->n_bar;
    yield(w, me);
    return me->bar_result;
}

static const char* state_text(const Fiber* f, char* buf, size_t cap) {
    if (f->state == ST_DONE) snprintf(buf, cap, "has exited");
    else if (f->state == ST_BAR)
        snprintf(buf, cap, "waits at %s() at line %d (in %s)", BAR_NAMES[f->bar_kind], f->bar_line, f->bar_fn);
    else snprintf(buf, cap, "waits at %s with mask 0x%08x at line %d (in %s)", OP_NAMES[f->wop], f->wmask, f->wline, f->wfn);
    return buf;
}

// The lanes `mask` of the warp starting at thread `base` (nlanes of them) all wait at the
// same collective: compute each lane's result, make them runnable (all but `skip`, the
// lane that completed the group and goes on running). False (reported) on misuse.
static bool run_warp_op(Worker* w, unsigned int base, unsigned int nlanes, unsigned int mask,
                        int skip) {
    Fiber* f = w->fib + base;
    const Fiber& a = f[__builtin_ctz(mask)];
    const int op = a.wop, width = a.wwidth;
    if (op >= OP_SHFL && op <= OP_SHFL_XOR && (width < 1 || width > 32 || (width & (width - 1)))) {
        report(w, false, "%s at line %d: width %d is not a power of 2 from 1 to 32", OP_NAMES[op], a.wline, width);
        return false;
    }
    unsigned long long vals[32];
    for (unsigned int l = 0; l < nlanes; ++l) vals[l] = f[l].wval;
    unsigned int ballot = 0;
    unsigned long long red = 0;
    for (unsigned int l = 0; l < nlanes; ++l)
        if (mask >> l & 1) ballot |= (unsigned)(f[l].wval != 0) << l;
    if (op >= OP_RED_ADD && op <= OP_RED_XOR) {
        const bool sgn = a.warg != 0;     // the signed variant (min / max)
        bool first = true;
        for (unsigned int l = 0; l < nlanes; ++l) {
            if (!(mask >> l & 1)) continue;
            const unsigned int v = (unsigned int)vals[l];
            if (first) { red = v; first = false; continue; }
            const unsigned int r = (unsigned int)red;
            switch (op) {
                case OP_RED_ADD: red = r + v; break;
                case OP_RED_MIN: red = sgn ? (unsigned)min((int)r, (int)v) : min(r, v); break;
                case OP_RED_MAX: red = sgn ? (unsigned)max((int)r, (int)v) : max(r, v); break;
                case OP_RED_AND: red = r & v; break;
                case OP_RED_OR: red = r | v; break;
                case OP_RED_XOR: red = r ^ v; break;
            }
        }
    }
    for (unsigned int l = 0; l < nlanes; ++l) {
        if (!(mask >> l & 1)) continue;
        Fiber& me = f[l];
        const unsigned int seg = l & ~(unsigned)(width - 1), end = seg + (unsigned)width;
        int src = -1;
        switch (op) {
            case OP_SHFL: src = (int)(seg + ((unsigned)me.warg & (unsigned)(width - 1))); break;
            case OP_SHFL_UP: src = (int)l - me.warg < (int)seg ? (int)l : (int)l - me.warg; break;
            case OP_SHFL_DOWN: src = (unsigned)((int)l + me.warg) >= end ? (int)l : (int)l + me.warg; break;
            case OP_SHFL_XOR: src = (int)(l ^ (unsigned)me.warg); if ((unsigned)src >= end) src = (int)l; break;
        }
        if (op >= OP_SHFL && op <= OP_SHFL_XOR) {
            if (src < 0 || (unsigned)src >= 32 || !(mask >> src & 1)) {
                report(w, false, "%s at line %d (in %s): lane %u of warp %u reads lane %d, which "
                       "is not in the mask 0x%08x (its value is undefined on a GPU)",
                       OP_NAMES[op], me.wline, me.wfn, l, base / 32, src, mask);
                return false;
            }
            me.wres = vals[src];
            continue;
        }
        switch (op) {
            case OP_SYNCWARP: me.wres = 0; break;
            case OP_BALLOT: me.wres = ballot; break;
            case OP_ANY: me.wres = ballot != 0; break;
            case OP_ALL: me.wres = ballot == mask; break;
            case OP_MATCH_ANY: {
                unsigned int m = 0;
                for (unsigned int j = 0; j < nlanes; ++j)
                    if ((mask >> j & 1) && vals[j] == me.wval) m |= 1u << j;
                me.wres = m;
                break;
            }
            case OP_MATCH_ALL: {
                bool all = true;
                for (unsigned int j = 0; j < nlanes; ++j)
                    if ((mask >> j & 1) && vals[j] != me.wval) all = false;
                me.wres = all ? mask : 0;
                break;
            }
            default: me.wres = red; break;
        }
    }
    int ids[32];
    unsigned int k = 0;
    for (unsigned int l = 0; l < nlanes; ++l)
        if (mask >> l & 1) {
            f[l].state = ST_READY;
            if ((int)l != skip) ids[k++] = (int)(base + l);
        }
    w->warp_wait[base / 32] &= ~mask;
    w->n_warp -= (unsigned)__builtin_popcount(mask);
    order_ids(w, ids, k);
    for (unsigned int i = 0; i < k; ++i) push(w, ids[i]);
    return true;
}

// Lane `l` of warp `base / 32` waits at a collective with `mask`: false (reported) if the
// mask is malformed; else whether every lane of the mask waits with the same mask (then
// the group can complete). Lanes of the mask that wait with another mask may still come.
static bool warp_group_ready(Worker* w, unsigned int base, unsigned int nl, unsigned int l,
                             bool* error) {
    const Fiber& me = w->fib[base + l];
    const unsigned int m = me.wmask;
    char s1[160], s2[160];
    *error = true;
    if (!(m >> l & 1)) {
        report(w, false, "%s at line %d (in %s): the mask 0x%08x does not include the calling "
               "lane %u (thread %u of the block)", OP_NAMES[me.wop], me.wline, me.wfn, m, l, base + l);
        return false;
    }
    if (nl < 32 && (m >> nl)) {
        report(w, false, "%s at line %d (in %s): the mask 0x%08x names lanes %u-31 of warp %u, "
               "which do not exist (the block has %u threads)",
               OP_NAMES[me.wop], me.wline, me.wfn, m, nl, base / 32, w->nthreads);
        return false;
    }
    *error = false;
    if ((w->warp_wait[base / 32] & m) != m) return false;
    for (unsigned int j = 0; j < nl; ++j) {
        if (!(m >> j & 1)) continue;
        const Fiber& o = w->fib[base + j];
        if (o.wmask != m) return false;
        if (o.wop != me.wop || o.wwidth != me.wwidth || o.wsize != me.wsize
            || ((me.wop == OP_RED_MIN || me.wop == OP_RED_MAX) && o.warg != me.warg)) {
            report(w, false, "lanes of warp %u disagree on a collective: lane %u %s, lane %u %s",
                   base / 32, l, state_text(&me, s1, sizeof s1), j, state_text(&o, s2, sizeof s2));
            *error = true;
            return false;
        }
    }
    return true;
}

template <class T> static T warp_op(int op, unsigned int mask, T v, int arg, int width, int line,
                                    const char* fn) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp collectives take values of at most 8 bytes");
    Worker* w = tl_worker;
    Fiber* me = w ? w->cur : nullptr;
    if (!me) not_a_fiber(OP_NAMES[op], line);
    me->state = ST_WARP;
    me->wop = op;
    me->wmask = mask;
    me->wval = 0;
    memcpy(&me->wval, &v, sizeof(T));
    me->wsize = (int)sizeof(T);
    me->warg = arg;
    me->wwidth = width;
    me->wline = line;
    me->wfn = fn;
    const unsigned int i = (unsigned int)(me - w->fib), base = i & ~31u, l = i & 31u;
    const unsigned int nl = w->nthreads - base < 32 ? w->nthreads - base : 32;
    w->warp_wait[base / 32] |= 1u << l;
    ++w->n_warp;
    // The last lane of the group to arrive completes it and runs on; the others wait.
    bool error = false;
    if (!(warp_group_ready(w, base, nl, l, &error) && run_warp_op(w, base, nl, mask, (int)l))
        || me->state != ST_READY)
        yield(w, me);
    T r;
    memcpy(&r, &me->wres, sizeof(T));
    return r;
}

// Two threads wait at the same barrier: the same __syncthreads call in the source (a
// helper's barrier is one barrier wherever the helper is called from).
static inline bool same_barrier(const Fiber& a, const Fiber& b) {
    return a.bar_site == b.bar_site && a.bar_kind == b.bar_kind;
}

// No fiber can run. Warp collectives complete as their last lane arrives, so lanes still
// waiting at one are stuck: an error. Otherwise every thread is at a barrier or has exited:
// release the barrier if all of them wait at the same one, else an error. Returns false on
// an error (reported).
static bool resolve(Worker* w, bool* all_done) {
    const unsigned int n = w->nthreads;
    Fiber* fib = w->fib;
    *all_done = w->n_done == n;
    if (*all_done) return true;
    char s1[160], s2[160];
    if (w->n_warp) {
        for (unsigned int base = 0; base < n; base += 32) {
            const unsigned int nl = n - base < 32 ? n - base : 32;
            for (unsigned int l = 0; l < nl; ++l) {
                const Fiber& me = fib[base + l];
                if (me.state != ST_WARP) continue;
                for (unsigned int j = 0; j < nl; ++j) {
                    const Fiber& o = fib[base + j];
                    if (!(me.wmask >> j & 1) || (o.state == ST_WARP && o.wmask == me.wmask)) continue;
                    if (o.state == ST_WARP)
                        report(w, false, "lanes of warp %u wait for each other at different "
                               "collectives: lane %u %s, lane %u %s", base / 32, l,
                               state_text(&me, s1, sizeof s1), j, state_text(&o, s2, sizeof s2));
                    else
                        report(w, false, "%s at line %d (in %s): lane %u of warp %u waits for "
                               "lane %u of its mask 0x%08x, which %s", OP_NAMES[me.wop], me.wline,
                               me.wfn, l, base / 32, j, me.wmask, state_text(&o, s2, sizeof s2));
                    return false;
                }
            }
        }
        report(w, false, "warp collectives cannot complete (internal error)");
        return false;
    }
    unsigned char* in = (unsigned char*)alloca(n);
    int first = -1;
    for (unsigned int i = 0; i < n; ++i)
        if (fib[i].state == ST_BAR) { first = (int)i; break; }
    const Fiber& f0 = fib[first];
    if (w->n_done) {
        char msg[1024] = "";
        for (unsigned int i = 0; i < n; ++i) in[i] = fib[i].state == ST_BAR;
        describe_set(msg, sizeof msg, w, in);
        append(msg, sizeof msg, " wait at %s() at line %d (in %s) while ", BAR_NAMES[f0.bar_kind],
               f0.bar_line, f0.bar_fn);
        for (unsigned int i = 0; i < n; ++i) in[i] = fib[i].state == ST_DONE;
        describe_set(msg, sizeof msg, w, in);
        report(w, false, "divergent barrier: %s have exited; every thread of a block must reach "
               "each __syncthreads (CUDA leaves this undefined: it may hang or corrupt memory)", msg);
        return false;
    }
    int count = 0;
    for (unsigned int i = 0; i < n; ++i) {
        const Fiber& o = fib[i];
        count += o.bar_pred;
        if (same_barrier(o, f0)) continue;
        char msg[1024] = "";
        for (unsigned int j = 0; j < n; ++j) in[j] = same_barrier(fib[j], f0);
        describe_set(msg, sizeof msg, w, in);
        append(msg, sizeof msg, " wait at %s() at line %d (in %s) while ",
               BAR_NAMES[f0.bar_kind], f0.bar_line, f0.bar_fn);
        for (unsigned int j = 0; j < n; ++j) in[j] = same_barrier(fib[j], o);
        describe_set(msg, sizeof msg, w, in);
        append(msg, sizeof msg, " wait at %s() at line %d (in %s)%s", BAR_NAMES[o.bar_kind],
               o.bar_line, o.bar_fn, o.bar_line == f0.bar_line ? ", another call on that line" : "");
        report(w, false, "divergent barrier: %s; every thread of a block must reach the same "
               "__syncthreads (CUDA leaves this undefined)", msg);
        return false;
    }
    const int result = f0.bar_kind == 1 ? count : f0.bar_kind == 2 ? count == (int)n
                     : f0.bar_kind == 3 ? count != 0 : 0;
    for (unsigned int i = 0; i < n; ++i) {
        fib[i].bar_result = result;
        fib[i].state = ST_READY;
        w->queue[i] = (int)i;
    }
    w->n_bar = 0;
    order_ids(w, w->queue, n);
    w->qhead = w->qtail = 0;
    w->qcount = n;
    return true;
}

template <class Body> static void invoke(void* body) { (*(Body*)body)(); }

static bool run_block_fibers(Worker* w) {
    const unsigned int n = w->nthreads;
    Pool& pool = tl_pool;
    for (unsigned int i = 0; i < n; ++i) {
        Fiber& f = w->fib[i];
        f.tid = tid_of(i);
        f.state = ST_READY;
        // stagger the stack tops so the fibers' hot frames do not share cache sets
        const size_t color = (i % 32) * 128;
        ctx_make(&f.ctx, pool.stacks + i * pool.stride + pool.stride - pool.stack_bytes,
                 pool.stack_bytes - color, fiber_entry);
        w->queue[i] = (int)i;
    }
    for (unsigned int k = 0; k < (n + 31) / 32; ++k) w->warp_wait[k] = 0;
    w->n_done = w->n_bar = w->n_warp = 0;
    order_ids(w, w->queue, n);
    w->qhead = w->qtail = 0;
    w->qcount = n;
    for (;;) {
        if (w->qcount) {
            Fiber* f = pop(w);
            w->cur = f;
            tl_tid = f->tid;
            ctx_switch(&w->sched, &f->ctx);
        }
        if (w->failed) return false;
        bool done = false;
        if (!resolve(w, &done)) return false;
        if (done) return true;
    }
}

template <class Body> static bool run_block_fast(Worker* w, Body& body) {
    const uint3 b = tl_bdim;
    try {
        if (w->L->schedule == SCHED_FORWARD) {
            uint3 t;
            for (t.z = 0; t.z < b.z; ++t.z)
                for (t.y = 0; t.y < b.y; ++t.y)
                    for (t.x = 0; t.x < b.x; ++t.x) {
                        tl_tid = t;
                        body();
                    }
        } else {
            const unsigned int n = w->nthreads;
            for (unsigned int i = 0; i < n; ++i) w->queue[i] = (int)i;
            order_ids(w, w->queue, n);
            for (unsigned int i = 0; i < n; ++i) {
                tl_tid = tid_of((unsigned)w->queue[i]);
                body();
            }
        }
    } catch (Abort&) {
        return false;
    } catch (...) {
        report(w, true, "a C++ exception left the kernel");
        return false;
    }
    return true;
}

template <class Body> struct Job {
    Grid* g;
    Body* body;
    bool fibers;
};

template <class Body> static void* worker_main(void* p) {
    Job<Body>* job = (Job<Body>*)p;
    Grid* g = job->g;
    const Launch* L = g->L;
    Worker w;
    memset((void*)&w, 0, sizeof w);
    w.g = g;
    w.L = L;
    w.fibers = job->fibers;
    w.nthreads = L->block[0] * L->block[1] * L->block[2];
    Worker* saved = tl_worker;
    tl_worker = &w;
    tl_bdim.x = L->block[0]; tl_bdim.y = L->block[1]; tl_bdim.z = L->block[2];
    tl_gdim.x = L->grid[0]; tl_gdim.y = L->grid[1]; tl_gdim.z = L->grid[2];
    Pool& pool = tl_pool;
    bool ok = pool.ensure_fibers(w.nthreads) && pool.ensure_dyn(L->shared_bytes)
              && (!w.fibers || pool.ensure_stacks(w.nthreads, L->stack_bytes));
    if (!ok) report(&w, false, "out of memory for the emulated threads of a block");
    w.fib = pool.fibers;
    w.queue = pool.queue;
    w.dyn = pool.dyn;
    w.entry = &invoke<Body>;
    w.entry_arg = job->body;
    while (ok && !__atomic_load_n(&g->abort, __ATOMIC_RELAXED)) {
        const unsigned long long claim = __atomic_fetch_add(&g->next, 1ull, __ATOMIC_RELAXED);
        if (claim >= g->nblocks) break;
        const unsigned long long b =
            (unsigned long long)(((unsigned __int128)g->mul * claim + g->add) % g->nblocks);
        w.bid.x = (unsigned)(b % L->grid[0]);
        w.bid.y = (unsigned)((b / L->grid[0]) % L->grid[1]);
        w.bid.z = (unsigned)(b / ((unsigned long long)L->grid[0] * L->grid[1]));
        tl_bid = w.bid;
        w.rng = L->seed ^ (b * 0xd1342543de82ef95ull);
        w.seen_block[0] = w.seen_block[1] = w.seen_block[2] = w.seen_block[3] = 0;
        if (L->shared_bytes) memset(w.dyn, 0xff, L->shared_bytes);   // uninitialized: poison
        ok = w.fibers ? run_block_fibers(&w) : run_block_fast(&w, *job->body);
    }
    tl_worker = saved;
    return nullptr;
}

template <class Body> static int launch(Launch* L, bool fibers, Body body) {
    Grid g;
    g.L = L;
    g.nblocks = (unsigned long long)L->grid[0] * L->grid[1] * L->grid[2];
    g.next = 0;
    // Blocks run in index order, last first under "reverse", in a pseudo-random order
    // (an affine bijection of the block indices) under "shuffle".
    g.mul = 1;
    g.add = 0;
    if (L->schedule == SCHED_REVERSE) {
        g.mul = g.nblocks - 1;            // k -> (n - 1)(k + 1) = n - 1 - k (mod n)
        g.add = g.nblocks - 1;
    } else if (L->schedule == SCHED_SHUFFLE && g.nblocks > 1) {
        unsigned long long s = L->seed ^ 0x5851f42d4c957f2dull;
        for (;;) {
            unsigned long long m = splitmix(&s) % g.nblocks, a = m, b = g.nblocks;
            while (b) { unsigned long long t = a % b; a = b; b = t; }
            if (m && a == 1) { g.mul = m; break; }
        }
        g.add = splitmix(&s) % g.nblocks;
    }
    g.abort = 0;
    g.has_err = 0;
    pthread_mutex_init(&g.lock, nullptr);
    L->err[0] = 0;
    Job<Body> job = {&g, &body, fibers};
    unsigned long long nw = (unsigned long long)(L->workers > 1 ? L->workers : 1);
    if (nw > g.nblocks) nw = g.nblocks;
    pthread_t threads[256];
    int started = 0;
    if (nw > 257) nw = 257;
    for (unsigned long long i = 1; i < nw; ++i) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 8u << 20);
        if (pthread_create(&threads[started], &attr, &worker_main<Body>, &job) == 0) ++started;
        pthread_attr_destroy(&attr);
    }
    worker_main<Body>(&job);
    tl_pool.release_stacks();             // (the calling thread's; see Pool)
    for (int i = 0; i < started; ++i) pthread_join(threads[i], nullptr);
    pthread_mutex_destroy(&g.lock);
    return g.has_err ? 1 : 0;
}

// Static __shared__ declarations report here each time a thread executes them (emulate.py
// adds the call): the first thread of a block to do so poisons the variable (CUDA leaves
// shared memory uninitialized), and the launch's static total is checked.
static inline void static_shared(int id, void* p, unsigned long long bytes) {
    Worker* w = tl_worker;
    if (!w || id >= 256) return;
    const unsigned long long bit = 1ull << (id & 63);
    const int k = id >> 6;
    if (w->seen_block[k] & bit) return;
    w->seen_block[k] |= bit;
    memset(p, 0xff, bytes);
    if (w->seen_launch[k] & bit) return;
    w->seen_launch[k] |= bit;
    w->static_shared += bytes;
    if (w->static_shared > 48 * 1024)
        thread_fail("the kernel's static __shared__ memory reaches %llu bytes, over the 48 KiB "
                    "a GPU allows (use dynamic shared memory above that)", w->static_shared);
    if (w->static_shared + w->L->shared_bytes > w->L->shared_limit)
        thread_fail("%llu bytes of static and %llu of dynamic __shared__ memory exceed the "
                    "%llu bytes a block may use", w->static_shared, w->L->shared_bytes,
                    w->L->shared_limit);
}

static inline void* dynamic_shared() {
    Worker* w = tl_worker;
    return w ? (void*)w->dyn : nullptr;
}

}  // namespace fnx_emu

// ---- the CUDA built-ins seen by kernel code -------------------------------------------------

static const int warpSize = 32;

// The barriers are macros so that each call in the source is a distinct barrier (__COUNTER__).
#define __syncthreads() fnx_emu::barrier(0, 1, __LINE__, __COUNTER__, __func__)
#define __syncthreads_count(p) fnx_emu::barrier(1, (p), __LINE__, __COUNTER__, __func__)
#define __syncthreads_and(p) fnx_emu::barrier(2, (p), __LINE__, __COUNTER__, __func__)
#define __syncthreads_or(p) fnx_emu::barrier(3, (p), __LINE__, __COUNTER__, __func__)
static inline void __syncwarp(unsigned int mask = 0xffffffffu, int line = __builtin_LINE(),
                              const char* fn = __builtin_FUNCTION()) {
    fnx_emu::warp_op<int>(fnx_emu::OP_SYNCWARP, mask, 0, 0, 32, line, fn);
}
template <class T> static inline T __shfl_sync(unsigned int mask, T v, int lane, int width = 32,
        int line = __builtin_LINE(), const char* fn = __builtin_FUNCTION()) {
    return fnx_emu::warp_op<T>(fnx_emu::OP_SHFL, mask, v, lane, width, line, fn);
}
template <class T> static inline T __shfl_up_sync(unsigned int mask, T v, unsigned int delta, int width = 32,
        int line = __builtin_LINE(), const char* fn = __builtin_FUNCTION()) {
    return fnx_emu::warp_op<T>(fnx_emu::OP_SHFL_UP, mask, v, (int)delta, width, line, fn);
}
template <class T> static inline T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32,
        int line = __builtin_LINE(), const char* fn = __builtin_FUNCTION()) {
    return fnx_emu::warp_op<T>(fnx_emu::OP_SHFL_DOWN, mask, v, (int)delta, width, line, fn);
}
template <class T> static inline T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width = 32,
        int line = __builtin_LINE(), const char* fn = __builtin_FUNCTION()) {
    return fnx_emu::warp_op<T>(fnx_emu::OP_SHFL_XOR, mask, v, lane_mask, width, line, fn);
}
static inline unsigned int __ballot_sync(unsigned int mask, int p, int line = __builtin_LINE(),
                                         const char* fn = __builtin_FUNCTION()) {
    return (unsigned)fnx_emu::warp_op<int>(fnx_emu::OP_BALLOT, mask, p != 0, 0, 32, line, fn);
}
static inline int __any_sync(unsigned int mask, int p, int line = __builtin_LINE(),
                             const char* fn = __builtin_FUNCTION()) {
    return fnx_emu::warp_op<int>(fnx_emu::OP_ANY, mask, p != 0, 0, 32, line, fn);
}
static inline int __all_sync(unsigned int mask, int p, int line = __builtin_LINE(),
                             const char* fn = __builtin_FUNCTION()) {
    return fnx_emu::warp_op<int>(fnx_emu::OP_ALL, mask, p != 0, 0, 32, line, fn);
}
#define FNX_EMU_REDUCE(name, op)                                                             \
    static inline unsigned int name(unsigned int mask, unsigned int v, int line = __builtin_LINE(), \
                                    const char* fn = __builtin_FUNCTION()) {                  \
        return fnx_emu::warp_op<unsigned int>(op, mask, v, 0, 32, line, fn);                 \
    }                                                                                        \
    static inline int name(unsigned int mask, int v, int line = __builtin_LINE(),             \
                           const char* fn = __builtin_FUNCTION()) {                           \
        return (int)fnx_emu::warp_op<unsigned int>(op, mask, (unsigned)v, 1, 32, line, fn);  \
    }
FNX_EMU_REDUCE(__reduce_add_sync, fnx_emu::OP_RED_ADD)
FNX_EMU_REDUCE(__reduce_min_sync, fnx_emu::OP_RED_MIN)
FNX_EMU_REDUCE(__reduce_max_sync, fnx_emu::OP_RED_MAX)
FNX_EMU_REDUCE(__reduce_and_sync, fnx_emu::OP_RED_AND)
FNX_EMU_REDUCE(__reduce_or_sync, fnx_emu::OP_RED_OR)
FNX_EMU_REDUCE(__reduce_xor_sync, fnx_emu::OP_RED_XOR)
#undef FNX_EMU_REDUCE
template <class T> static inline unsigned int __match_any_sync(unsigned int mask, T v,
        int line = __builtin_LINE(), const char* fn = __builtin_FUNCTION()) {
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof(T));
    return (unsigned)fnx_emu::warp_op<unsigned long long>(fnx_emu::OP_MATCH_ANY, mask, u, 0, 32, line, fn);
}
template <class T> static inline unsigned int __match_all_sync(unsigned int mask, T v, int* pred,
        int line = __builtin_LINE(), const char* fn = __builtin_FUNCTION()) {
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof(T));
    const unsigned int r = (unsigned)fnx_emu::warp_op<unsigned long long>(fnx_emu::OP_MATCH_ALL, mask, u, 0, 32, line, fn);
    *pred = r != 0;
    return r;
}

[[noreturn]] static inline void __trap(int line = __builtin_LINE()) {
    fnx_emu::thread_fail("__trap() at line %d", line);
}
[[noreturn]] static inline void __brkpt(int line = __builtin_LINE()) {
    fnx_emu::thread_fail("__brkpt() at line %d", line);
}
static inline long long clock64() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}
#define clock() ((int)clock64())
#undef assert
#define assert(e) ((e) ? (void)0 : fnx_emu::thread_fail("assert(%s) failed at line %d", #e, __LINE__))

#define threadIdx (static_cast<const uint3&>(fnx_emu::tl_tid))
#define blockIdx (static_cast<const uint3&>(fnx_emu::tl_bid))
#define blockDim (static_cast<const uint3&>(fnx_emu::tl_bdim))
#define gridDim (static_cast<const uint3&>(fnx_emu::tl_gdim))

// ---- the CUDA keywords -----------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 800
#define FNX_EMULATE 1
// ---- end of the fnx emulator runtime ----
