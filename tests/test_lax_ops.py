"""The op-table sweep: every registered primitive, through ``fnx.lax``.

One table (``OPS``, near the end) drives every test here; adding a primitive
costs one line in it. Each record names the primitive, the ``fnx.lax``
call, the dtypes the op takes, a hypothesis strategy of cases (arguments and
static params; elementwise ops get theirs from an input *domain*), a NumPy
reference written independently of ``fnx/lax`` (explicit loops or exact
Python integer/fraction arithmetic where NumPy itself would just repeat the
impl), a tolerance in units of the output dtype's epsilon (0: exact), and
representative bad calls the shape rule must reject.

For every record:

1. eager ``fnx.lax`` equals the reference (exact dtype and shape, values
   within the tolerance, NaN positions equal) and emits no warnings;
2. ``fnx.eval_shape`` matches the eager result (shape, dtype, weak type) and
   the IR from ``fnx.make_ir`` passes ``fnx.check_ir``;
3. ``fnx.jit`` is bitwise equal to eager, a second call with same-shaped
   inputs does not retrace and a new signature does;
4. bad inputs raise ``ShapeError`` naming the op and the offending
   shapes/dtypes (eagerly and under ``eval_shape``);
5. with ``jax_enable_x64`` off, 64-bit operands narrow, and eager, ``eval_shape``,
   ``make_ir`` and ``jit`` agree on the narrowed dtypes (the rest runs with it on).

``test_every_primitive_has_a_table_line`` fails when a primitive is
registered without a line here.
"""
from __future__ import annotations

import functools
import math
import os
import string
import warnings
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from fnx import lax
from fnx.core.dtypes import short_name
from fnx.core.primitive import BUILTIN, REGISTRY
from fnx.errors import ShapeError
from fnx.lax.indexing import indexed_shape


# The sweep covers every dtype a primitive takes, 64-bit ones included, which exist only
# under jax_enable_x64 (as in JAX): every test runs with the flag on, except
# test_default_mode_narrows_alike, which turns it off (the mode users run by default).
pytestmark = pytest.mark.x64

# Primitives that deliberately have no line in the table, and why.
NOT_IN_TABLE = {
    "jit": "the call primitive: its operand is an IR, not an array op (tests/test_jit.py)",
    "native_loop": "made by the NumPy backend's lowering from other equations, after every "
                   "transformation (tests/test_native_loops.py)",
    **{p: "a collective over a named axis: only inside vmap(axis_name=...) or pmap, against "
          "JAX's values, loops and finite differences (tests/test_collectives.py)"
       for p in ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index")},
    "linear_call": "carries a user function and its transpose (tests/test_implicit.py)",
    "check": "checkify's check: no outputs, raises or is functionalized "
             "(tests/test_checkify.py)",
    "complex": "real parts only, a complex result: tests/test_lax_ops.py's "
               "test_complex_keeps_its_parts",
    "bitcast_convert_type": "changes the shape with the width: against NumPy's views for "
                            "ten dtype pairs (tests/test_lax_bit_ops.py)",
    "reduce_precision": "against bfloat16 and float16 rounding over 100000 bit patterns and "
                        "JAX's values at float16's edges (tests/test_lax_bit_ops.py)",
    "custom_jvp_call": "carries a user function and rule (tests/test_custom_rules.py)",
    "custom_vjp_call": "carries a user function and rule (tests/test_custom_rules.py)",
    "custom_lin": "the linear half of a custom_vjp; only transposed (tests/test_custom_rules.py)",
    "remat_call": "carries a checkpointed user function (tests/test_custom_rules.py)",
    "remat_lin": "the linear half of a checkpoint (tests/test_custom_rules.py)",
    **{p: "holds sub-IRs of user functions (tests/test_control_flow.py)"
       for p in ("cond", "while", "scan")},
    **{p: "calls a user's Python function at run time (tests/test_debug_callback.py)"
       for p in ("debug_callback", "pure_callback", "io_callback")},
    **{p: "values against loop definitions and hand-written backprop (tests/test_conv.py)"
       for p in ("conv_general_dilated", "reduce_window_sum", "reduce_window_max",
                 "reduce_window_min", "select_and_gather_add", "select_and_scatter_add")},
    **{p: "values against NumPy and SciPy factorizations (tests/test_linalg.py)"
       for p in ("cholesky", "triangular_solve", "linear_solve", "lu", "qr", "eigh", "svd")},
    **{p: "bits against JAX's recorded streams and samples by statistical tests "
          "(tests/test_random.py)" for p in ("threefry2x32", "random_gamma")},
    "rng_bit_generator": "bits against JAX's recorded outputs for each algorithm, dtype, "
                         "key form and many shapes (tests/test_rng_bit_generator.py)",
    "custom_vmap_call": "carries a user function and batching rule "
                        "(tests/test_custom_batching.py)",
    "fft": "values against numpy.fft, every rule by check_op (tests/test_fft.py, "
           "tests/test_rules_fft.py)",
    **{p: "fnx.scipy primitives: values against SciPy and JAX's (tests/test_scipy_*.py), "
          "every rule by check_op (tests/test_rules_scipy.py)"
       for p in ("bessel_jn", "betainc", "betaln", "dawsn", "erfcx", "expi", "expn",
                 "fresnel", "gammainc", "gammainc_grad_a", "gammaincc", "hyp1f1",
                 "hyp1f1_grad_a", "hyp1f1_grad_b", "hyp2f1", "i0e", "i1e", "owens_t", "sici",
                 "spence", "sqrt_sylvester", "sqrtm", "wofz", "zeta", "zeta_grad_s")},
}

# Hypothesis examples per record and check; FNX_OP_EXAMPLES=500 for a deep run.
EXAMPLES = int(os.environ.get("FNX_OP_EXAMPLES", "20"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

# --- dtypes ------------------------------------------------------------------------------

BOOL, I8, I16, I32, I64 = map(np.dtype, ("bool", "int8", "int16", "int32", "int64"))
U8, U32, F16, F32, F64, C64 = map(np.dtype, ("uint8", "uint32", "float16", "float32",
                                             "float64", "complex64"))
C128 = np.dtype("complex128")
ALL = (BOOL, I8, I16, I32, I64, U8, U32, F16, F32, F64, C64)


def K(kinds):
    """The tested dtypes of the given kinds ('b', 'i', 'u', 'f', 'c')."""
    return tuple(d for d in ALL if d.kind in kinds)


def bits(d):
    return d.itemsize * 8


def wide(d):
    return C128 if d.kind == "c" else F64


# --- values ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dom:
    """An input domain: finite floats in [lo, hi] (plus NaN/+-inf/+-0 when ``specials``),
    integers in [ilo, ihi] clipped to the dtype, complex parts in [-clim, clim]."""
    lo: float = -1e4
    hi: float = 1e4
    specials: bool = True
    nonzero: bool = False
    ilo: int | None = None
    ihi: int | None = None
    clim: float = 4.0
    nice: tuple = ()


ANY = Dom()
SMALL = Dom(-4.0, 4.0, ilo=-4, ihi=4)
SPECIALS = (math.nan, math.inf, -math.inf, 0.0, -0.0)


def elements(dtype, dom=ANY):
    k = dtype.kind
    if k == "b":
        return st.booleans()
    if k in "iu":
        info = np.iinfo(dtype)
        lo = info.min if dom.ilo is None else max(info.min, dom.ilo)
        hi = info.max if dom.ihi is None else min(info.max, dom.ihi)
        s = st.one_of(st.integers(max(lo, -3), min(hi, 3)), st.integers(lo, hi),
                      st.sampled_from(sorted({lo, hi})))
    elif k == "f":
        parts = [st.floats(dom.lo, dom.hi, allow_nan=False, allow_infinity=False),
                 st.integers(max(-8, math.ceil(dom.lo)), min(8, math.floor(dom.hi))
                             ).map(float) if dom.lo <= 8 and dom.hi >= -8 else st.nothing()]
        if dom.specials:
            parts.append(st.sampled_from(SPECIALS))
        if dom.nice:
            parts.append(st.sampled_from(dom.nice))
        s = st.one_of(parts)
    else:
        c = dom.clim   # no subnormal parts: complex64 kernels (NumPy's division) and
        #                XLA's flush-to-zero disagree there, e.g. 0 / 7e-41j is NaN in NumPy
        part = st.one_of(st.floats(-c, c).map(lambda v: 0.0 if abs(v) < 1e-30 else v),
                         st.integers(-2, 2).map(float))
        s = st.builds(complex, part, part)
    return s.filter(lambda v: v != 0) if dom.nonzero else s


def _cast(dtype):
    def cast(a):
        with np.errstate(all="ignore"):
            return a.astype(dtype)
    return cast


def array(dtype, shape, dom=ANY):
    """Arrays of ``dtype``; floats are drawn as float64 and rounded to the dtype."""
    if dtype.kind in "biu":
        return hnp.arrays(dtype, shape, elements=elements(dtype, dom))
    base = C128 if dtype.kind == "c" else F64
    return hnp.arrays(base, shape, elements=elements(dtype, dom)).map(_cast(dtype))


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def scalar(dtype, value):
    return np.asarray(value).astype(dtype)


# --- records -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    args: tuple                 # NumPy arrays: the dynamic operands
    params: dict                # static params, passed as keyword arguments to ``fn``

    def __repr__(self):
        shapes = ", ".join(f"{short_name(a.dtype)}{list(a.shape)}" for a in self.args)
        return f"Case(({shapes}), {self.params})\nargs={self.args!r}"


@dataclass(frozen=True)
class Bad:
    thunk: object               # () -> calls the lax function with bad operands
    needles: tuple              # what the ShapeError message must contain (besides the op)
    label: str = ""
    xfail: str = ""             # a known bug outside fnx/lax's primitive files (reported)


@dataclass(frozen=True)
class Op:
    prim: str                   # the primitive's name in REGISTRY
    fn: object                  # fn(*args, **params): the fnx.lax call
    ref: object                 # ref(*args, **params): NumPy reference (see ``compare``)
    cases: object               # dtype -> strategy of Case
    dtypes: tuple               # the dtypes drawn (of the first operand)
    tol: float = 0              # in epsilons of the output dtype; 0: exact
    zero_sign: bool = False     # also compare the sign of zeros
    bad: tuple = ()             # Bad(...) cases
    note: str = ""

    def __repr__(self):
        return self.prim

    def _repr_pretty_(self, p, cycle):     # how hypothesis prints it in a failure report
        p.text(self.prim)


@dataclass
class Approx:
    """A reference value with an error scale: |got - value| <= tol * eps * scale."""
    value: np.ndarray
    scale: np.ndarray


@dataclass
class SetResult:
    """A scatter-set reference: where several updates hit one element, any may win."""
    value: np.ndarray
    alts: dict = field(default_factory=dict)   # flat position -> allowed values


# --- comparison ----------------------------------------------------------------------------

def _isnan(a):
    return np.isnan(a) if a.dtype.kind in "fc" else np.zeros(a.shape, bool)


def _fail(what, g, e, bad):
    idx = np.argwhere(bad)[:5]
    rows = "\n".join(f"  at {tuple(i)}: got {g[tuple(i)]!r}, expected {e[tuple(i)]!r}"
                     for i in idx)
    raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements differ\n{rows}")


def compare(got, exp, tol=0, zero_sign=False, what="result"):
    """Assert the fnx result ``got`` matches the reference ``exp``."""
    if isinstance(exp, tuple):
        assert isinstance(got, (tuple, list)) and len(got) == len(exp), \
            f"{what}: expected {len(exp)} outputs, got {got!r}"
        for i, (g, e) in enumerate(zip(got, exp)):
            compare(g, e, tol, zero_sign, f"{what}[{i}]")
        return
    scale, alts = None, {}
    if isinstance(exp, Approx):
        exp, scale = exp.value, np.asarray(exp.scale, np.float64)
    elif isinstance(exp, SetResult):
        exp, alts = exp.value, exp.alts
    assert type(got) is fnx.Array, f"{what}: expected an fnx.Array, got {type(got).__name__}"
    g, e = np.asarray(got), np.asarray(exp)
    assert g.dtype == e.dtype, f"{what}: dtype {g.dtype}, expected {e.dtype}"
    assert g.shape == e.shape, f"{what}: shape {g.shape}, expected {e.shape}"
    if alts:
        g_flat, e = g.ravel(), e.ravel().copy()
        for pos, allowed in alts.items():
            if any(_same(g_flat[pos], a) for a in allowed):
                e[pos] = g_flat[pos]
        e, g = e.reshape(g.shape), g
    nan_g, nan_e = _isnan(g), _isnan(e)
    if (nan_g != nan_e).any():
        _fail(f"{what} (NaN positions)", g, e, nan_g != nan_e)
    if e.dtype.kind not in "fc" or (tol == 0 and scale is None):
        bad = ~(nan_e | (g == e))
        if bad.any():
            _fail(what, g, e, bad)
    else:
        fi = np.finfo(e.dtype)
        w = wide(e.dtype)
        if e.dtype.kind == "c":   # measured against |ref|; NumPy's complex64 kernels
            tol = 4 * tol         # (log1p, pow, ...) lose a few more bits in one part
        g64, e64 = g.astype(w), e.astype(w)
        if e.dtype.kind == "f":   # overflow at the edge of the range: treat inf as max
            g64, e64 = np.clip(g64, -float(fi.max), float(fi.max)), \
                np.clip(e64, -float(fi.max), float(fi.max))
        with np.errstate(invalid="ignore"):
            err = np.abs(g64 - e64)
            ref_scale = np.abs(e64) if scale is None else scale
            lim = tol * float(fi.eps) * ref_scale + tol * float(fi.tiny)
            close = err <= lim
            if e.dtype.kind == "c":       # infinite parts: compare the parts one by one
                inf = ~np.isfinite(e64) & ~nan_e
                parts_close = [(gp == ep) | (np.abs(gp - ep) <= tol * float(fi.eps) * np.abs(ep))
                               for gp, ep in ((g64.real, e64.real), (g64.imag, e64.imag))]
                close = np.where(inf, parts_close[0] & parts_close[1], close)
            bad = ~nan_e & ~(g == e) & ~close
        if bad.any():
            _fail(f"{what} (tolerance {tol} eps)", g, e, bad)
    if zero_sign and e.dtype.kind == "f":
        z = (e == 0) & ~nan_e
        bad = z & (np.signbit(g) != np.signbit(e))
        if bad.any():
            _fail(f"{what} (sign of zero)", g, e, bad)


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return bool((a == b) or (_isnan(a) and _isnan(b)))


def bitwise_equal(a, b, what):
    for x, y in zip(_leaves(a), _leaves(b)):
        assert type(x) is fnx.Array and type(y) is fnx.Array, what
        u, v = np.asarray(x), np.asarray(y)
        assert (u.dtype, u.shape, x.weak_type) == (v.dtype, v.shape, y.weak_type), \
            f"{what}: {u.dtype}{u.shape} weak={x.weak_type} vs {v.dtype}{v.shape} " \
            f"weak={y.weak_type}"
        assert u.tobytes() == v.tobytes(), f"{what}: values differ\n{u!r}\n{v!r}"


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


# --- elementwise records ---------------------------------------------------------------------

def _same_dtype(d):
    return d


def _bool_out(d):
    return BOOL


def _real_out(d):
    return F32 if d == C64 else (F64 if d == C128 else d)


def ew_ref(ref, out=_same_dtype, widen=True):
    """Reference of an elementwise op: ``ref`` on the inputs (float16/32 widened to
    float64, complex64 to complex128, unless ``widen`` is False), cast to ``out(dtype)``.
    ``ref`` may return an ``Approx`` (value and error scale)."""
    def r(*xs):
        d = xs[0].dtype
        if widen and d.kind in "fc":
            xs = [x.astype(wide(d)) for x in xs]
        with np.errstate(all="ignore"):
            y = ref(*xs)
            if isinstance(y, Approx):
                return Approx(np.asarray(y.value).astype(out(d)), y.scale)
            return np.asarray(y).astype(out(d))
    return r


def ew_cases(*doms):
    arity = len(doms)

    def cases(dtype):
        @st.composite
        def gen(draw):
            shape = draw(SHAPES)
            shapes = [shape] * arity
            if arity == 2 and draw(st.integers(0, 3)) == 0:
                shapes[draw(st.integers(0, 1))] = ()    # a rank-0 operand stands for a full one
            return Case(tuple(draw(array(dtype, s, d)) for s, d in zip(shapes, doms)), {})
        return gen()
    return cases


def _kind_bad(fn, arity, kinds):
    out = []
    for d in ALL:
        if d.kind not in kinds:
            x = np.ones((2, 3), d)
            out.append(Bad(lambda x=x: fn(*[x] * arity), (f"{short_name(d)}[2,3]",),
                           f"rejects-{d}"))
    return out


def unary(prim, ref, kinds, dom=ANY, *, tol=0, out=_same_dtype, widen=True, zero_sign=False,
          fn=None):
    fn = fn or getattr(lax, prim)
    return Op(prim, fn, ew_ref(ref, out, widen), ew_cases(dom), K(kinds), tol, zero_sign,
              tuple(_kind_bad(fn, 1, kinds)))


def binary(prim, ref, kinds, dom=ANY, dom2=None, *, tol=0, out=_same_dtype, widen=True,
           zero_sign=False, fn=None):
    fn = fn or getattr(lax, prim)
    d1 = K(kinds)[0]
    d2 = next(d for d in K(kinds) + ALL if d != d1)
    x23, x32 = np.ones((2, 3), d1), np.ones((3, 2), d1)
    bad = _kind_bad(fn, 2, kinds) + [
        Bad(lambda: fn(x23, x32), ("[2,3]", "[3,2]"), "shapes"),
        Bad(lambda: fn(x23, np.ones((2, 3), d2)),
            (f"{short_name(d1)}[2,3]", f"{short_name(d2)}[2,3]"), "dtypes")]
    return Op(prim, fn, ew_ref(ref, out, widen), ew_cases(dom, dom2 or dom), K(kinds), tol,
              zero_sign, tuple(bad))


# --- exact integer references ------------------------------------------------------------------

def _wrap(v, d):
    """Python int ``v`` wrapped into integer dtype ``d`` (two's complement)."""
    if d.kind == "b":
        return bool(v)
    v %= 2 ** bits(d)
    if d.kind == "i" and v >= 2 ** (bits(d) - 1):
        v -= 2 ** bits(d)
    return v


def int_map(f, *xs, out=None):
    """Elementwise ``f`` on Python ints, wrapped to the dtype (NumPy broadcasting)."""
    d = xs[0].dtype if out is None else out
    b = np.broadcast_arrays(*xs)
    res = [_wrap(f(*(int(v) for v in vals)), d) for vals in zip(*(a.ravel() for a in b))]
    return np.array(res, dtype=d).reshape(b[0].shape)


def int_or_float(int_ref, float_ref, out=_same_dtype, widen=True):
    """Exact Python-int reference for integer dtypes, ``float_ref`` (via ``ew_ref``) else."""
    fr = ew_ref(float_ref, out, widen)

    def r(*xs):
        if xs[0].dtype.kind in "iu":
            return int_map(int_ref, *xs, out=out(xs[0].dtype))
        return fr(*xs)
    return r


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_pow(x, y):
    if y >= 0:
        return x ** y
    return 1 if x == 1 else (-1) ** (-y) if x == -1 else 0   # 1 // x**|y|, truncated (x=0: 0)


def _shift(kind, d):
    n = bits(d)

    def f(x, s):
        if s < 0 or s >= n:
            return (-1 if x < 0 else 0) if kind == "arith" else 0
        if kind == "left":
            return x << s
        if kind == "arith":
            return x >> s                      # Python's >> floors: arithmetic shift
        return (x % 2 ** n) >> s
    return f


def shift_ref(kind):
    return lambda x, s: int_map(_shift(kind, x.dtype), x, s)


def not_ref(x):
    return np.logical_not(x) if x.dtype == BOOL else int_map(lambda v: ~v, x)


def bitwise_ref(op):
    def r(x, y):
        if x.dtype == BOOL:
            return np.asarray({"and": np.logical_and, "or": np.logical_or,
                               "xor": np.logical_xor}[op](x, y))
        f = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[op]
        return int_map(f, x, y)
    return r


# --- float references needing care ----------------------------------------------------------------

def _vec(f, out_nan=math.nan):
    """Elementwise Python float function (math module), NaN in, NaN out."""
    def r(x):
        x = np.asarray(x, np.float64)
        res = [math.nan if math.isnan(v) else f(v) for v in x.ravel()]
        return np.array(res, np.float64).reshape(x.shape)
    return r


def _lgamma(v):
    try:
        return math.lgamma(v)
    except ValueError:         # the poles 0, -1, -2, ...
        return math.inf


def lgamma_ref(x):
    """math.lgamma, which is accurate to a few ulp of max(|lgamma|, 1) only: near the
    zeros at 1 and 2 (lgamma(1.25) is off by ~30 ulp in glibc) it has no relative accuracy."""
    v = _vec(_lgamma)(x)
    with np.errstate(invalid="ignore"):
        return Approx(v, np.where(np.isfinite(v), np.maximum(np.abs(v), 1.0), 0.0))


def _digamma_terms(v):
    """Terms summing to digamma(v) for v > 0: recurrence up to 12, then the
    asymptotic series (error far below float64 resolution there)."""
    terms = []
    while v < 12:
        terms.append(-1 / v)
        v += 1
    inv = 1 / (v * v)
    series = inv * (1 / 12 - inv * (1 / 120 - inv * (1 / 252 - inv * (1 / 240 - inv / 132))))
    return terms + [math.log(v), -0.5 / v, -series]


def digamma_ref(x):
    """digamma on [0, inf] and specials, with the reference's own error scale
    (the sum of |terms|): near its zero x0 = 1.46... it has no relative accuracy."""
    val, scale = np.empty(x.shape), np.empty(x.shape)
    for i in _ndindex(x.shape):
        v = float(x[i])
        if math.isnan(v) or math.isinf(v) or v == 0:
            val[i] = v if not v == 0 else -math.copysign(math.inf, v)
            val[i] = math.nan if v == -math.inf else val[i]
            scale[i] = 0.0
        else:
            t = _digamma_terms(v)
            val[i], scale[i] = math.fsum(t), 2 * sum(abs(u) for u in t)
    return Approx(val, scale)


# Bernoulli numbers B_2k, k = 1..10, for the asymptotic series below.
_BERN = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
         Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
         Fraction(-174611, 330)]


def _polygamma_terms(n, v):
    """Terms summing to (-1)**(n+1) * polygamma(n, v) for integers n >= 1, v > 0: the
    recurrence psi_n(v) = psi_n(v + 1) - (-1)**n n! / v**(n+1) up to v >= 40 + 2n, then
    the asymptotic series (n-1)!/v**n + n!/(2 v**(n+1)) + sum_k B_2k (2k+n-1)!/((2k)!
    v**(2k+n)), whose tenth term is below 1e-18 of the first there."""
    fact = math.factorial(n)
    terms = []
    while v < 40 + 2 * n:
        try:
            terms.append(fact * v ** -(n + 1))
        except OverflowError:
            terms.append(math.inf)
        v += 1
    terms += [math.factorial(n - 1) / v ** n, fact / (2 * v ** (n + 1))]
    terms += [float(b * Fraction(math.factorial(2 * k + n - 1), math.factorial(2 * k)))
              / v ** (2 * k + n)
              for k, b in enumerate(_BERN, 1)]
    return terms


def polygamma_ref(m, x):
    """polygamma(m, x) for x in [0, inf] and specials: digamma_ref for m = 0, NaN for
    orders that are not non-negative integers, (-1)**(m+1) inf at 0, (-1)**(m+1) 0 at
    inf, and the error scale of its own terms (see ``digamma_ref``)."""
    m, x = np.broadcast_arrays(m, x)
    val, scale = np.empty(x.shape), np.empty(x.shape)
    for i in _ndindex(x.shape):
        n, v = float(m[i]), float(x[i])
        if not (math.isfinite(n) and n >= 0 and n == int(n)) or math.isnan(v) or v == -math.inf:
            val[i], scale[i] = math.nan, 0.0
            continue
        if n == 0:
            d = digamma_ref(np.array(v))
            val[i], scale[i] = float(d.value), float(d.scale)
            continue
        n = int(n)
        sign = 1.0 if n % 2 else -1.0
        if v == 0 or v == math.inf:
            val[i], scale[i] = sign * (math.inf if v == 0 else 0.0), 0.0
            continue
        t = _polygamma_terms(n, v)
        val[i], scale[i] = sign * math.fsum(t), 2 * sum(abs(u) for u in t)
    return Approx(val, scale)


def _erf_inv(y):
    if abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    if y == 0:
        return y
    a = abs(y)
    if a < 1e-8:              # erf(z) = 2/sqrt(pi) (z - z**3/3 + ...)
        return math.copysign(math.sqrt(math.pi) / 2 * a * (1 + math.pi / 12 * a * a), y)
    lo, hi = 0.0, 30.0
    for _ in range(200):      # bisection on erf (|y| <= 1/2) or erfc (exact 1-|y| above)
        mid = (lo + hi) / 2
        if (math.erf(mid) < a) if a <= 0.5 else (math.erfc(mid) > 1 - a):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-17 * hi:
            break
    return math.copysign((lo + hi) / 2, y)


def log1p_ref(x):
    """np.log1p for real x; for complex, log|1 + z| from the exact |1 + z|**2 - 1 (NumPy
    forms 1 + z first, which loses the real part for small z even in complex128)."""
    if x.dtype.kind != "c":
        return np.log1p(x)

    def one(z):
        re, im = Fraction(z.real), Fraction(z.imag)
        t = 2 * re + re * re + im * im              # |1 + z|**2 - 1, exactly
        mod = (-math.inf if t == -1 else 0.5 * math.log1p(float(t)) if abs(t) < 0.5
               else 0.5 * math.log(float(1 + t)))
        return complex(mod, math.atan2(z.imag, 1 + z.real))
    return np.array([one(z) for z in x.ravel().tolist()], C128).reshape(x.shape)


def _logistic(x):
    with np.errstate(all="ignore"):
        pos = (x.real if x.dtype.kind == "c" else x) >= 0     # complex: 1 / (1 + exp(-x))
        return np.where(pos, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _round_half_away(v):
    if not math.isfinite(v):
        return v
    r = math.floor(abs(Fraction(v)) + Fraction(1, 2))
    return math.copysign(float(r), v)


def _round_half_even(v):
    if not math.isfinite(v):
        return v
    return math.copysign(float(round(Fraction(v))), v)


def round_ref(x, *, rounding_method):
    f = _round_half_away if rounding_method == 0 else _round_half_even
    res = [f(float(v)) for v in x.ravel()]
    return np.array(res, np.float64).reshape(x.shape).astype(x.dtype)


# --- structured cases and references -----------------------------------------------------------------

def _ndindex(shape):
    return np.ndindex(*shape) if shape else iter([()])


def _subset(draw, n, min_size=0):
    return sorted(draw(st.sets(st.integers(0, n - 1), min_size=min_size, max_size=n))) \
        if n else []


def _maybe_negative(draw, axes, ndim):
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


# integer_pow
def integer_pow_cases(dtype):
    dom = ANY if dtype.kind in "iu" else Dom(-8.0, 8.0)
    return st.builds(lambda x, y: Case((x,), {"y": y}), SHAPES.flatmap(lambda s: array(dtype, s, dom)),
                     st.integers(-3, 7) if dtype.kind in "iu" else st.integers(-4, 9))


def integer_pow_ref(x, *, y):
    if x.dtype.kind in "iu":
        return int_map(lambda v: _int_pow(v, y), x)
    with np.errstate(all="ignore"):
        w = x.astype(wide(x.dtype))
        return np.asarray(np.ones_like(w) if y == 0 else w ** y).astype(x.dtype)


# round
def round_cases(dtype):
    halves = tuple(k / 2 for k in range(-9, 10, 2)) + (0.49999997, 2.0 ** 52 + 1, -2.0 ** 23 - 1)
    return st.builds(lambda x, m: Case((x,), {"rounding_method": m}),
                     SHAPES.flatmap(lambda s: array(dtype, s, Dom(-100.0, 100.0, nice=halves))),
                     st.sampled_from([0, 1]))


# select_n
@st.composite
def _select_n_case(draw, dtype):
    which_dtype = draw(st.sampled_from([BOOL, I32]))
    n = draw(st.integers(1, 2 if which_dtype == BOOL else 4))
    shape = draw(SHAPES)
    wshape = draw(st.sampled_from([(), shape]))
    which = draw(hnp.arrays(which_dtype, wshape, elements=st.booleans() if which_dtype == BOOL
                            else st.integers(0, n - 1)))
    if n == 1 and which_dtype == BOOL:
        which = np.zeros(wshape, BOOL)
    cases = tuple(draw(array(dtype, shape)) for _ in range(n))
    return Case((which,) + cases, {})


def select_n_ref(which, *cases):
    out = np.array(cases[0], copy=True)
    for k, c in enumerate(cases[1:], 1):
        out = np.where(which == k, c, out)
    return np.asarray(out)


# clamp
@st.composite
def _clamp_case(draw, dtype):
    shape = draw(SHAPES)
    x = draw(array(dtype, shape, Dom(-100, 100, ilo=-100, ihi=100)))
    bdom = Dom(-100, 100, specials=False, ilo=-100, ihi=100)
    lo = draw(array(dtype, draw(st.sampled_from([(), shape])), bdom))
    hi = draw(array(dtype, draw(st.sampled_from([(), shape])), bdom))
    return Case((lo, x, hi), {})


def clamp_ref(lo, x, hi):
    t = np.where(x < lo, lo, x)
    return np.asarray(np.where(t > hi, hi, t)).astype(x.dtype)


# convert_element_type
@st.composite
def _convert_case(draw, dtype):
    new = draw(st.sampled_from(ALL))
    shape = draw(SHAPES)
    if dtype.kind in "fc" and new.kind in "iu":     # float -> int: in-range values only
        info = np.iinfo(new)
        lim_lo, lim_hi = max(info.min, -2.0 ** 62), min(info.max, 2.0 ** 62)
        if dtype == F16:
            lim_lo, lim_hi = max(lim_lo, -65504.0), min(lim_hi, 65504.0)
        elif dtype in (F32, C64) and new.itemsize == 4:     # 2**31 - 1 rounds up in float32
            lim_lo, lim_hi = max(lim_lo, -2.0 ** 31 + 256), min(lim_hi, 2.0 ** 31 - 256)
        dom = Dom(lim_lo, lim_hi, specials=False, clim=min(lim_hi, 100.0))
        if dtype.kind == "c":
            dom = Dom(clim=min(lim_hi, 100.0), specials=False)
            x = draw(array(dtype, shape, dom))
            x = (np.abs(x.real) if new.kind == "u" else x.real) + 1j * x.imag
            x = x.astype(dtype)
        else:
            x = draw(array(dtype, shape, dom))
    else:
        x = draw(array(dtype, shape))
    return Case((x,), {"new_dtype": new, "weak_type": draw(st.booleans())})


def convert_ref(x, *, new_dtype, weak_type):
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = x.real
    if new_dtype == BOOL:
        return np.asarray(x != 0)
    if x.dtype.kind == "f" and new_dtype.kind in "iu":
        return int_map(lambda v: v, np.trunc(x).astype(object), out=new_dtype) \
            if x.size else np.zeros(x.shape, new_dtype)
    with np.errstate(all="ignore"):
        return np.asarray(x.astype(new_dtype))


# broadcast_in_dim
@st.composite
def _bid_case(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3))
    bd = tuple(_subset(draw, len(shape)))
    xshape = tuple(draw(st.sampled_from([1, shape[d]])) for d in bd)
    return Case((draw(array(dtype, xshape)),), {"shape": shape, "broadcast_dimensions": bd})


def bid_ref(x, *, shape, broadcast_dimensions):
    out = np.empty(shape, x.dtype)
    for idx in _ndindex(shape):
        out[idx] = x[tuple(0 if x.shape[i] == 1 else idx[d]
                           for i, d in enumerate(broadcast_dimensions))]
    return out


# reshape
@st.composite
def _reshape_case(draw, dtype):
    factors = draw(st.lists(st.sampled_from([1, 2, 2, 3, 4]), max_size=4))
    if draw(st.integers(0, 5)) == 0:
        factors.append(0)

    def partition():
        fs = list(draw(st.permutations(factors)))
        dims = []
        while fs:
            k = draw(st.integers(1, len(fs)))
            dims.append(math.prod(fs[:k]))
            fs = fs[k:]
        for _ in range(draw(st.integers(0, 1))):
            dims.insert(draw(st.integers(0, len(dims))), 1)
        return tuple(dims)
    xshape, new = partition(), partition()
    dims = tuple(draw(st.permutations(range(len(xshape))))) if draw(st.booleans()) else None
    return Case((draw(array(dtype, xshape)),), {"new_sizes": new, "dimensions": dims})


def reshape_ref(x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = transpose_ref(x, permutation=dimensions)
    flat = [x[i] for i in _ndindex(x.shape)]
    return np.array(flat, x.dtype).reshape(new_sizes)


# transpose, squeeze, expand_dims, rev
@st.composite
def _transpose_case(draw, dtype):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s)))
    return Case((x,), {"permutation": tuple(draw(st.permutations(range(x.ndim))))})


def transpose_ref(x, *, permutation):
    out = np.empty([x.shape[p] for p in permutation], x.dtype)
    for idx in _ndindex(out.shape):
        src = [0] * x.ndim
        for o, p in zip(idx, permutation):
            src[p] = o
        out[idx] = x[tuple(src)]
    return out


@st.composite
def _squeeze_case(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3))
    shape = tuple(1 if draw(st.booleans()) else s for s in shape)
    ones = [i for i, s in enumerate(shape) if s == 1]
    dims = [ones[i] for i in _subset(draw, len(ones))]
    return Case((draw(array(dtype, shape)),),
                {"dimensions": _maybe_negative(draw, dims, len(shape))})


def squeeze_ref(x, *, dimensions):
    dims = {d % x.ndim for d in dimensions}
    return x.reshape([s for i, s in enumerate(x.shape) if i not in dims])


@st.composite
def _expand_dims_case(draw, dtype):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s)))
    nd = x.ndim + draw(st.integers(1, 2))
    dims = draw(st.permutations(range(nd)))[:nd - x.ndim]
    return Case((x,), {"dimensions": _maybe_negative(draw, dims, nd)})


def expand_dims_ref(x, *, dimensions):
    nd = x.ndim + len(dimensions)
    dims = {d % nd for d in dimensions}
    it = iter(x.shape)
    return x.reshape([1 if i in dims else next(it) for i in range(nd)])


@st.composite
def _rev_case(draw, dtype):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s)))
    dims = _subset(draw, x.ndim, min_size=min(1, x.ndim))
    return Case((x,), {"dimensions": _maybe_negative(draw, dims, x.ndim)})


def rev_ref(x, *, dimensions):
    dims = {d % x.ndim for d in dimensions}
    if not x.ndim:
        return x
    return x[np.ix_(*[np.arange(n)[::-1] if i in dims else np.arange(n)
                      for i, n in enumerate(x.shape)])]


# concatenate
@st.composite
def _concat_case(draw, dtype):
    shape = list(draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3)))
    dim = draw(st.integers(0, len(shape) - 1))
    xs = []
    for _ in range(draw(st.integers(2, 4))):
        shape[dim] = draw(st.integers(0, 3))
        xs.append(draw(array(dtype, tuple(shape))))
    return Case(tuple(xs), {"dimension": dim})


def concat_ref(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


# pad
@st.composite
def _pad_case(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    config = []
    for n in shape:
        lo, hi, it = draw(st.integers(-3, 3)), draw(st.integers(-3, 3)), draw(st.integers(0, 2))
        core = n + max(n - 1, 0) * it
        if lo + hi + core < 0:
            hi = -(lo + core) + draw(st.integers(0, 1)) if lo + core >= 0 else 0
            lo = max(lo, -core - hi)
        config.append((lo, hi, it))
    return Case((draw(array(dtype, shape)), draw(array(dtype, ()))),
                {"padding_config": tuple(config)})


def pad_ref(x, pv, *, padding_config):
    shape = [lo + hi + n + max(n - 1, 0) * it for n, (lo, hi, it) in zip(x.shape, padding_config)]
    out = np.full(shape, pv, x.dtype)
    for idx in _ndindex(shape):
        src = []
        for o, n, (lo, hi, it) in zip(idx, x.shape, padding_config):
            p = o - lo
            if p < 0 or p % (it + 1) or p // (it + 1) >= n:
                break
            src.append(p // (it + 1))
        else:
            out[idx] = x[tuple(src)]
    return out


# slice, dynamic_slice, dynamic_update_slice
@st.composite
def _slice_case(draw, dtype):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s)))
    start, limit, strides = [], [], []
    for n in x.shape:
        s = draw(st.integers(0, n))
        start.append(s), limit.append(draw(st.integers(s, n))), strides.append(
            draw(st.integers(1, 3)))
    return Case((x,), {"start_indices": tuple(start), "limit_indices": tuple(limit),
                       "strides": tuple(strides) if draw(st.booleans()) else None})


def slice_ref(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    if not x.ndim:
        return x
    return x[np.ix_(*[np.arange(s, l, st_) for s, l, st_ in
                      zip(start_indices, limit_indices, strides)])]


START_DTYPES = (I32, I64, U8, I8)


def _starts(draw, shape):
    out = []
    for n in shape:
        d = draw(st.sampled_from(START_DTYPES))
        lo = 0 if d.kind == "u" else -n - 3
        out.append(scalar(d, draw(st.integers(lo, n + 3))))
    return out


@st.composite
def _dynamic_slice_case(draw, dtype):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s)))
    sizes = tuple(draw(st.integers(0, n)) for n in x.shape)
    return Case((x, *_starts(draw, x.shape)), {"slice_sizes": sizes})


def _clamp_starts(shape, starts, sizes):
    """The primitives' starts: clamped so the window fits (the table binds them with
    allow_negative_indices=False; counting negative starts from the end, which the lax
    functions do first, has its own test below)."""
    return [min(max(int(s), 0), n - z) for s, n, z in zip(starts, shape, sizes)]


def dynamic_slice_ref(x, *starts, slice_sizes):
    st_ = _clamp_starts(x.shape, starts, slice_sizes)
    if not x.ndim:
        return x
    return x[np.ix_(*[np.arange(s, s + z) for s, z in zip(st_, slice_sizes)])]


@st.composite
def _dus_case(draw, dtype):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s)))
    u = draw(array(dtype, tuple(draw(st.integers(0, n)) for n in x.shape)))
    return Case((x, u, *_starts(draw, x.shape)), {})


def dus_ref(x, u, *starts):
    st_ = _clamp_starts(x.shape, starts, u.shape)
    out = x.copy()
    for idx in _ndindex(u.shape):
        out[tuple(s + i for s, i in zip(st_, idx))] = u[idx]
    return out


# iota
@st.composite
def _iota_case(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    return Case((), {"dtype": dtype, "shape": shape,
                     "dimension": draw(st.integers(0, len(shape) - 1))})


def iota_ref(*, dtype, shape, dimension):
    out = np.empty(shape, dtype)
    for idx in _ndindex(shape):
        out[idx] = idx[dimension]
    return out


# reductions
@st.composite
def _reduce_case(draw, dtype, dom=ANY):
    x = draw(SHAPES.flatmap(lambda s: array(dtype, s, dom)))
    axes = _subset(draw, x.ndim, min_size=min(1, x.ndim) if draw(st.integers(0, 5)) else 0)
    return Case((x,), {"axes": _maybe_negative(draw, axes, x.ndim)})


def _rows(x, axes):
    """(kept shape, 2-D array: one row per output element holding the reduced values)."""
    axes = sorted({a % x.ndim for a in axes})
    kept = [d for d in range(x.ndim) if d not in axes]
    kshape = tuple(x.shape[d] for d in kept)
    k = math.prod(x.shape[d] for d in axes)
    return kshape, np.transpose(x, kept + axes).reshape(math.prod(kshape), k)


def _reduce_rows(x, axes, row_fn, out_dtype=None):
    kshape, rows = _rows(x, axes)
    res = [row_fn(r) for r in rows]
    return np.array(res, out_dtype or x.dtype).reshape(kshape)


def reduce_sum_ref(x, *, axes):
    if x.dtype.kind in "iu":
        return _reduce_rows(x, axes, lambda r: _wrap(sum(int(v) for v in r), x.dtype))
    w = wide(x.dtype)
    with np.errstate(all="ignore"):
        v = _reduce_rows(x.astype(w), axes, lambda r: r.sum(), w)
        return Approx(v.astype(x.dtype), _reduce_rows(np.abs(x).astype(F64), axes,
                                                      lambda r: (len(r) + 1) * r.sum(), F64))


def reduce_prod_ref(x, *, axes):
    if x.dtype.kind in "iu":
        return _reduce_rows(x, axes, lambda r: _wrap(math.prod(int(v) for v in r), x.dtype))
    w = wide(x.dtype)
    with np.errstate(all="ignore"):
        v = _reduce_rows(x.astype(w), axes, lambda r: r.prod(), w)
        return Approx(v.astype(x.dtype), _reduce_rows(np.abs(x).astype(F64), axes,
                                                      lambda r: (len(r) + 1) * r.prod(), F64))


def _extreme_identity(d, which):
    if d.kind in "fc":
        return -np.inf if which == "max" else np.inf
    if d.kind == "b":
        return which == "min"
    info = np.iinfo(d)
    return info.min if which == "max" else info.max


def _extreme(r, which):
    if r.dtype.kind in "fc" and np.isnan(r).any():
        return r[np.isnan(r)][0]
    if r.dtype.kind == "c":      # lexicographic (real, imag)
        key = max if which == "max" else min
        return key(r.tolist(), key=lambda c: (c.real, c.imag))
    return r.max() if which == "max" else r.min()


def reduce_extreme_ref(which):
    def r(x, *, axes):
        return _reduce_rows(x, axes, lambda row: _extreme(row, which) if len(row)
                            else _extreme_identity(x.dtype, which))
    return r


def reduce_bitwise_ref(which):
    def r(x, *, axes):
        if x.dtype == BOOL:
            return _reduce_rows(x, axes, lambda row: all(row) if which == "and" else any(row))
        op = (lambda a, b: a & b) if which == "and" else (lambda a, b: a | b)
        start = -1 if which == "and" else 0
        return _reduce_rows(x, axes, lambda row: _wrap(functools.reduce(
            op, (int(v) for v in row), start), x.dtype))
    return r


# argmax / argmin
@st.composite
def _arg_case(draw, dtype):
    shape = list(draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)))
    axis = draw(st.integers(0, len(shape) - 1))
    shape[axis] = max(shape[axis], 1)
    ties = Dom(-3, 3, ilo=-2, ihi=2, clim=1.0)
    x = draw(array(dtype, tuple(shape), ties if draw(st.booleans()) else ANY))
    if dtype.kind == "c":
        x = (np.round(x.real) + 1j * np.round(x.imag)).astype(dtype)    # ties
    return Case((x,), {"axis": axis - len(shape) if draw(st.booleans()) else axis,
                       "index_dtype": draw(st.sampled_from([I32, I64, U8]))})


def arg_ref(which):
    def line(r):
        if r.dtype.kind in "fc" and np.isnan(r).any():
            return int(np.flatnonzero(np.isnan(r))[0])           # the first NaN wins
        vals = [(v.real, v.imag) if r.dtype.kind == "c" else v for v in r.tolist()]
        best = max(vals) if which == "max" else min(vals)
        return vals.index(best)

    def r(x, *, axis, index_dtype):
        return _reduce_rows(x, (axis,), line, index_dtype)
    return r


# cumulative
@st.composite
def _cum_case(draw, dtype, dom=ANY):
    x = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4).flatmap(
        lambda s: array(dtype, s, dom)))
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    return Case((x,), {"axis": axis, "reverse": draw(st.booleans())})


def cum_ref(op, approx=None):
    def r(x, *, axis, reverse):
        x2 = np.moveaxis(x, axis, -1)
        if reverse:
            x2 = x2[..., ::-1]
        out = np.empty(x2.shape, x.dtype)
        scale = np.zeros(x2.shape, F64)
        with np.errstate(all="ignore"):
            for idx in _ndindex(x2.shape[:-1]):
                acc, s = None, 0.0
                for j, v in enumerate(x2[idx]):
                    acc = v if acc is None else op(acc, v)
                    out[idx + (j,)] = acc
                    if approx == "sum":
                        s += abs(complex(v))
                        scale[idx + (j,)] = s * (j + 2)
                    elif approx == "prod":
                        scale[idx + (j,)] = abs(complex(acc)) * (j + 2)
        if reverse:
            out, scale = out[..., ::-1], scale[..., ::-1]
        out, scale = np.moveaxis(out, -1, axis), np.moveaxis(scale, -1, axis)
        return Approx(out, scale) if approx and x.dtype.kind in "fc" else out
    return r


# dot_general
@st.composite
def _dot_case(draw, dtype):
    nb, nc, nl, nr = (draw(st.integers(0, 2)) for _ in range(4))
    size = st.integers(0, 3) if draw(st.integers(0, 4)) == 0 else st.integers(1, 3)
    bs, cs, ls, rs = ([draw(size) for _ in range(n)] for n in (nb, nc, nl, nr))
    lroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", i) for i in range(nl)]
    rroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", i) for i in range(nr)]
    lroles, rroles = draw(st.permutations(lroles)), draw(st.permutations(rroles))
    sizes = {"b": bs, "c": cs}
    lshape = [sizes[k][i] if k != "f" else ls[i] for k, i in lroles]
    rshape = [sizes[k][i] if k != "f" else rs[i] for k, i in rroles]

    def pos(roles, kind):
        return tuple(roles.index((kind, i)) for i in range(nb if kind == "b" else nc))
    dn = ((pos(lroles, "c"), pos(rroles, "c")), (pos(lroles, "b"), pos(rroles, "b")))
    wider = {I8: [I32, F32], U8: [U32, I32], I32: [I64], F16: [F32], F32: [F64], BOOL: [I32]}
    pet = draw(st.sampled_from([None] + wider.get(dtype, [])))
    dom = Dom(-10, 10, ilo=-50, ihi=50, clim=3) if dtype in (I64, F16) else Dom(-10, 10)
    return Case((draw(array(dtype, tuple(lshape), dom)), draw(array(dtype, tuple(rshape), dom))),
                {"dimension_numbers": dn, "preferred_element_type": pet})


def dot_ref(a, b, *, dimension_numbers, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    out = preferred_element_type or a.dtype
    if preferred_element_type is not None:
        a, b = a.astype(out), b.astype(out)
    letters = iter(string.ascii_letters)
    ls, rs, batch = [None] * a.ndim, [None] * b.ndim, []
    for x, y in zip(lb, rb):
        ls[x] = rs[y] = next(letters)
        batch.append(ls[x])
    for x, y in zip(lc, rc):
        ls[x] = rs[y] = next(letters)
    lf = [ls.__setitem__(i, next(letters)) or ls[i] for i in range(a.ndim) if ls[i] is None]
    rf = [rs.__setitem__(i, next(letters)) or rs[i] for i in range(b.ndim) if rs[i] is None]
    spec = f"{''.join(ls)},{''.join(rs)}->{''.join(batch + lf + rf)}"
    if out.kind in "iu":
        v = np.asarray(np.einsum(spec, a.astype(object), b.astype(object)), dtype=object)
        return np.array([_wrap(int(t), out) for t in v.ravel()], out).reshape(v.shape)
    if out.kind == "b":
        return np.asarray(np.einsum(spec, a.astype(np.int64), b.astype(np.int64)) != 0)
    w = wide(out)
    k = math.prod(a.shape[d] for d in lc)
    with np.errstate(all="ignore"):
        v = np.einsum(spec, a.astype(w), b.astype(w))
        scale = np.einsum(spec, np.abs(a).astype(F64), np.abs(b).astype(F64)) * (k + 2)
        return Approx(np.asarray(v.astype(out)), scale)


# sort
SORT_DTYPES = (BOOL, I8, I32, U8, F16, F32, F64)


@st.composite
def _sort_case(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    n = draw(st.integers(1, 3))
    num_keys = draw(st.integers(1, min(2, n)))
    dtypes_ = [dtype] + [draw(st.sampled_from(SORT_DTYPES + (C64,) if i >= num_keys else
                                              SORT_DTYPES)) for i in range(1, n)]
    ties = Dom(-2, 2, ilo=-2, ihi=2, nice=(-0.0, 0.0, math.nan))
    ops = tuple(draw(array(d, shape, ties if draw(st.booleans()) else ANY)) for d in dtypes_)
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return Case(ops, {"dimension": dim, "num_keys": num_keys,
                      "single": n == 1 and draw(st.booleans())})


def _sort_key(v):
    if isinstance(v, float) and math.isnan(v):
        return (1, 0.0)
    return (0, v)


def sort_ref(*ops, dimension, num_keys, single):
    moved = [np.moveaxis(o, dimension, -1) for o in ops]
    outs = [np.empty(m.shape, m.dtype) for m in moved]
    for idx in _ndindex(moved[0].shape[:-1]):
        lines = [m[idx] for m in moved]
        keys = [ln.tolist() for ln in lines[:num_keys]]
        perm = sorted(range(len(keys[0])), key=lambda j: tuple(_sort_key(k[j]) for k in keys))
        for o, ln in zip(outs, lines):
            o[idx] = ln[perm]
    outs = tuple(np.moveaxis(o, -1, dimension) for o in outs)
    return outs[0] if single else outs


def sort_fn(*ops, dimension, num_keys, single):
    return lax.sort(ops[0] if single else ops, dimension, True, num_keys)


@st.composite
def _top_k_case(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    ties = Dom(-2, 2, ilo=-2, ihi=2, nice=(-0.0, 0.0, math.nan))
    x = draw(array(dtype, shape, ties if draw(st.booleans()) else ANY))
    return Case((x,), {"k": draw(st.integers(0, shape[-1]))})


def top_k_ref(x, *, k):
    """The k largest of each row, descending; NaN first; ties by increasing index."""
    vals, idx = np.empty(x.shape[:-1] + (k,), x.dtype), np.empty(x.shape[:-1] + (k,), I32)
    for i in _ndindex(x.shape[:-1]):
        row = x[i].tolist()
        perm = sorted(range(len(row)),
                      key=lambda j: (0, 0) if row[j] != row[j] else (1, -row[j]))[:k]
        vals[i], idx[i] = x[i][perm], perm
    return vals, idx


# gather / scatter
INDEX_DTYPES = (I32, I64, U8, I8)


@st.composite
def index_spec(draw, n_arrays=None, broadcastable=True, empty_indexed_dims=False):
    """(shape, spec, index shapes): a random NumPy-style index, ``fnx.lax.indexing`` spec.
    Dimensions indexed by arrays are non-empty unless ``empty_indexed_dims``."""
    rank = draw(st.integers(1, 4))
    if n_arrays is None:
        n_arrays = draw(st.sampled_from([0, 1, 1, 2, 2]))
    n_arrays = min(n_arrays, rank)
    arr_dims = set(draw(st.permutations(range(rank)))[:n_arrays])
    shape, spec, k = [], [], 0
    for d in range(rank):
        if d in arr_dims:
            shape.append(draw(st.integers(0 if empty_indexed_dims else 1, 4)))
            spec.append(("a", k))
            k += 1
        elif draw(st.booleans()):
            n = draw(st.integers(1, 4))
            shape.append(n)
            spec.append(draw(st.integers(0, n - 1)))
        else:
            n = draw(st.integers(0, 4))
            shape.append(n)
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            spec.append(("s", draw(bound), draw(bound),
                         draw(st.sampled_from([None, 1, 1, 2, 3, -1, -2]))))
    for _ in range(draw(st.integers(0, 2))):
        spec.insert(draw(st.integers(0, len(spec))), None)
    bshape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    ishapes = []
    for _ in range(k):
        suffix = bshape[len(bshape) - draw(st.integers(0, len(bshape))):]
        ishapes.append(tuple(1 if draw(st.booleans()) else s for s in suffix))
    if not broadcastable and k == 2:
        ishapes[1] = ishapes[1] + (4,) if ishapes[1][-1:] not in ((1,), (4,)) else (5, 2)
    return tuple(shape), tuple(spec), ishapes


def _index_arrays(draw, shape, spec, ishapes, spread):
    idx = []
    for it in spec:
        if isinstance(it, tuple) and it[0] == "a":
            n = shape[[j for j in spec if j is not None].index(it)]
            d = draw(st.sampled_from(INDEX_DTYPES))
            lo = 0 if d.kind == "u" else -spread * n - 1
            idx.append(draw(hnp.arrays(d, ishapes[it[1]],
                                       elements=st.integers(lo, max(spread * n + 1, 1)))))
    return idx


def _nonempty_indexed(shape, spec):
    """``shape`` with array-indexed dimensions at least 1 (the indexed shape is the same:
    those dimensions are consumed), so that NumPy can index it with zeros."""
    items = [it for it in spec if it is not None]
    return tuple(max(n, 1) if type(it) is tuple and it[0] == "a" else n
                 for n, it in zip(shape, items))


def numpy_key(spec, shape, idx):
    """The NumPy index for a spec with in-range index arrays ``idx``."""
    key, dim = [], 0
    for it in spec:
        if it is None:
            key.append(None)
            continue
        dim += 1
        key.append(it if type(it) is int else slice(*it[1:]) if it[0] == "s" else idx[it[1]])
    return tuple(key)


@st.composite
def _gather_case(draw, dtype):
    shape, spec, ishapes = draw(index_spec())
    x = draw(array(dtype, shape))
    return Case((x, *_index_arrays(draw, shape, spec, ishapes, 2)), {"spec": spec})


def _wrapped(spec, shape, idx):
    """Index arrays wrapped once (negative + n), as int64, per spec dimension size."""
    out, dim = list(idx), 0
    for it in spec:
        if it is None:
            continue
        if type(it) is tuple and it[0] == "a":
            i = idx[it[1]].astype(np.int64)
            out[it[1]] = np.where(i < 0, i + shape[dim], i)
        dim += 1
    return out


def gather_ref(x, *idx, spec):
    w = _wrapped(spec, x.shape, idx)
    items = [j for j in spec if j is not None]
    sizes = {it[1]: n for n, it in zip(x.shape, items) if type(it) is tuple and it[0] == "a"}
    clipped = [np.clip(a, 0, sizes[k] - 1) for k, a in enumerate(w)]
    return np.asarray(x[numpy_key(spec, x.shape, clipped)])


def gather_fn(x, *idx, spec):
    return lax.index_gather(x, idx, spec)


SCATTER_MODES = {"b": ("set", "min", "max"), "c": ("set", "add", "mul")}


@st.composite
def _scatter_case(draw, dtype):
    shape, spec, ishapes = draw(index_spec(empty_indexed_dims=True))
    x = draw(array(dtype, shape, SMALL))
    idx = _index_arrays(draw, shape, spec, ishapes, 1)
    ushape = np.empty(_nonempty_indexed(shape, spec))[
        numpy_key(spec, shape, [np.zeros(s, int) for s in ishapes])].shape
    mode = draw(st.sampled_from(SCATTER_MODES.get(dtype.kind, ("set", "add", "mul", "min",
                                                               "max"))))
    return Case((x, draw(array(dtype, ushape, SMALL)), *idx), {"spec": spec, "mode": mode})


_SCATTER_OPS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def scatter_ref(x, upd, *idx, spec, mode):
    """Loop over the updates in C order; each targets the flat position NumPy's fancy
    indexing gives it, unless one of its (wrapped) indices is out of range."""
    w = _wrapped(spec, x.shape, idx)
    key_pos, key_ok, table_shape, dim = [], [], [], 0
    for it in spec:
        if it is None:
            key_pos.append(None), key_ok.append(None)
            continue
        n = x.shape[dim]
        dim += 1
        if type(it) is tuple and it[0] == "a":
            i = w[it[1]]
            ok = (i >= 0) & (i < n)
            key_pos.append(np.where(ok, i, 0)), key_ok.append(ok.astype(np.intp))
            table_shape.append(2)
        else:
            k = it if type(it) is int else slice(*it[1:])
            key_pos.append(k), key_ok.append(k)
            table_shape.append(n)
    table = np.zeros(table_shape, bool)
    table[tuple(1 if s == 2 and type(it) is tuple and it[0] == "a" else slice(None)
                for s, it in zip(table_shape, [j for j in spec if j is not None]))] = True
    # (where an indexed dimension is empty every update is dropped: ``tgt`` is unused)
    pshape = _nonempty_indexed(x.shape, spec)
    tgt = np.asarray(np.arange(math.prod(pshape)).reshape(pshape)[tuple(key_pos)])
    valid = np.asarray(table[tuple(key_ok)])
    out = x.copy().ravel()
    scale = np.abs(out).astype(F64) if x.dtype.kind in "fc" else None
    writes = {}
    with np.errstate(all="ignore"):
        for t, v, u in zip(tgt.ravel(), valid.ravel(), upd.ravel()):
            if not v:
                continue
            if mode == "set":
                out[t] = u
                writes.setdefault(int(t), []).append(u)
            else:
                out[t] = _SCATTER_OPS[mode](out[t], u)
                if scale is not None:
                    scale[t] = scale[t] + abs(u) if mode == "add" else scale[t] * abs(u)
    out = out.reshape(x.shape)
    if mode == "set":
        return SetResult(out, {t: vs for t, vs in writes.items() if len(vs) > 1})
    if mode in ("add", "mul") and scale is not None:
        n = max(upd.size, 1) + 1
        return Approx(out, scale.reshape(x.shape) * n)
    return out


def scatter_fn(x, u, *idx, spec, mode):
    return lax.index_scatter(x, u, idx, spec, mode)


# --- bad inputs for the structured ops -------------------------------------------------------------

def z(shape, dtype=F32):
    return np.zeros(shape, dtype)


def bad(thunk, *needles, xfail=""):
    return Bad(thunk, needles, needles[0] if needles else "", xfail)


_i = functools.partial(scalar, I32)

def BAD_REDUCE(f, d=F32):
    return (bad(lambda: f(z((2, 3), d), (2,)), "axis 2", "rank 2"),
            bad(lambda: f(z((2, 3), d), (0, -2)), "repeated"))

# --- the table -------------------------------------------------------------------------------------

NUM, FC, F, ANYK, IB, INT, REAL, RNUM = "iufc", "fc", "f", "biufc", "biu", "iu", "biuf", "iuf"
POS = Dom(0.0, 1e4)
UNIT = Dom(-1.0, 1.0)
ACOSH = Dom(1.0, 1e4)
NONZERO = Dom(nonzero=True)
MODERATE = Dom(-40.0, 40.0)
SHIFTS = Dom(ilo=-3, ihi=66)
EXPONENTS = Dom(-6.0, 6.0, ilo=-3, ihi=12, clim=2.0)

OPS = [
    # --- unary elementwise ---
    unary("neg", np.negative, NUM, zero_sign=True),
    unary("stop_gradient", lambda x: x, ANYK, zero_sign=True),
    unary("abs", np.abs, NUM, out=_real_out, tol=2, zero_sign=True),
    unary("sign", np.sign, NUM, tol=2),
    unary("floor", np.floor, F, zero_sign=True),
    unary("ceil", np.ceil, F, zero_sign=True),
    Op("round", lax.round, round_ref, round_cases, K(F), zero_sign=True,
       bad=tuple(_kind_bad(lax.round, 1, F)) + (
           bad(lambda: lax.round(z((2,)), 2), "rounding_method", "f32[2]"),)),
    unary("exp", np.exp, FC, MODERATE, tol=4),
    unary("exp2", np.exp2, FC, MODERATE, tol=4),
    unary("expm1", np.expm1, FC, MODERATE, tol=4),
    unary("log", np.log, FC, POS, tol=4),
    unary("log1p", log1p_ref, FC, Dom(-1.0, 1e4), tol=4),
    unary("log2", np.log2, FC, POS, tol=4),
    unary("log10", np.log10, FC, POS, tol=4),
    unary("sqrt", np.sqrt, FC, POS, tol=2, zero_sign=True),
    unary("rsqrt", lambda x: 1 / np.sqrt(x), FC, POS, tol=4),
    unary("cbrt", np.cbrt, F, tol=2, zero_sign=True),
    unary("square", lambda x: x * x, NUM, tol=4),
    unary("reciprocal", lambda x: 1 / x, FC, tol=4),
    unary("sin", np.sin, FC, tol=4),
    unary("cos", np.cos, FC, tol=4),
    unary("tan", np.tan, FC, tol=4),
    unary("asin", np.arcsin, FC, UNIT, tol=4),
    unary("acos", np.arccos, FC, UNIT, tol=4),
    unary("atan", np.arctan, FC, tol=4),
    unary("sinh", np.sinh, FC, MODERATE, tol=4),
    unary("cosh", np.cosh, FC, MODERATE, tol=4),
    unary("tanh", np.tanh, FC, tol=4),
    unary("asinh", np.arcsinh, FC, tol=4),
    unary("acosh", np.arccosh, FC, ACOSH, tol=4),
    unary("atanh", np.arctanh, FC, UNIT, tol=4),
    unary("logistic", _logistic, FC, MODERATE, tol=4),
    unary("erf", _vec(math.erf), F, Dom(-6.0, 6.0), tol=4),
    unary("erfc", _vec(math.erfc), F, Dom(-6.0, 30.0), tol=8),
    unary("erf_inv", _vec(_erf_inv), F, Dom(-1.0, 1.0), tol=8),
    unary("lgamma", lgamma_ref, F, Dom(0.0, 100.0), tol=8),
    unary("digamma", digamma_ref, F, Dom(0.0, 100.0), tol=4),
    unary("is_finite", np.isfinite, F, out=_bool_out),
    unary("isinf", np.isinf, F, out=_bool_out),
    unary("isnan", np.isnan, F, out=_bool_out),
    unary("not", not_ref, IB, fn=lax.bitwise_not),
    unary("real", np.real, ANYK, out=_real_out),
    unary("imag", lambda x: np.imag(x) if x.dtype.kind == "c" else np.zeros_like(x), ANYK,
          out=_real_out),
    # complex-valued as JAX's: a real floating operand gives complex64 (complex128 from float64)
    unary("conj", np.conj, FC, out=lambda d: d if d.kind == "c" else (C128 if d == F64 else C64)),
    Op("integer_pow", lax.integer_pow, integer_pow_ref, integer_pow_cases, K(NUM), tol=8,
       bad=(bad(lambda: lax.integer_pow(z((2, 3), BOOL), 2), "bool[2,3]"),)),
    # --- binary elementwise ---
    binary("add", np.add, NUM),
    binary("sub", np.subtract, NUM),
    binary("mul", np.multiply, NUM, tol=2),
    binary("div", int_or_float(_trunc_div, np.divide), NUM, ANY, NONZERO, tol=2),
    binary("rem", int_or_float(lambda a, b: a - b * _trunc_div(a, b), np.fmod), RNUM, ANY,
           NONZERO),
    binary("floor_divide", int_or_float(lambda a, b: a // b, np.floor_divide, widen=False),
           RNUM, ANY, NONZERO),
    binary("pow", int_or_float(_int_pow, np.power), NUM, Dom(-10.0, 10.0, clim=2.0), EXPONENTS,
           tol=32),
    binary("max", np.maximum, ANYK),
    binary("min", np.minimum, ANYK),
    binary("atan2", np.arctan2, F, tol=4),
    binary("hypot", np.hypot, F, tol=2),
    binary("copysign", np.copysign, F, zero_sign=True),
    binary("nextafter", np.nextafter, F, widen=False),
    binary("logaddexp", np.logaddexp, F, tol=4),
    binary("polygamma", polygamma_ref, F, Dom(0.0, 6.0), Dom(0.0, 100.0), tol=16),
    binary("eq", np.equal, ANYK, out=_bool_out),
    binary("ne", np.not_equal, ANYK, out=_bool_out),
    binary("lt", np.less, REAL, out=_bool_out),
    binary("le", np.less_equal, REAL, out=_bool_out),
    binary("gt", np.greater, REAL, out=_bool_out),
    binary("ge", np.greater_equal, REAL, out=_bool_out),
    binary("and", bitwise_ref("and"), IB, fn=lax.bitwise_and),
    binary("or", bitwise_ref("or"), IB, fn=lax.bitwise_or),
    binary("xor", bitwise_ref("xor"), IB, fn=lax.bitwise_xor),
    binary("shift_left", shift_ref("left"), INT, ANY, SHIFTS),
    binary("shift_right_arithmetic", shift_ref("arith"), INT, ANY, SHIFTS),
    binary("shift_right_logical", shift_ref("logical"), INT, ANY, SHIFTS),
    # --- select, clamp, convert ---
    Op("select_n", lax.select_n, select_n_ref, _select_n_case, ALL, bad=(
        bad(lambda: lax.select_n(z((), BOOL), z((2, 3)), z((3, 2))), "f32[2,3]", "f32[3,2]"),
        bad(lambda: lax.select_n(z((), BOOL), z((2,)), z((2,), F64)), "f32[2]", "f64[2]"),
        bad(lambda: lax.select_n(z((2,), F32), z((2,)), z((2,))), "f32[2]"),
        bad(lambda: lax.select_n(z((), BOOL), z((2,)), z((2,)), z((2,))), "3"),
        bad(lambda: lax.select_n(z((3,), BOOL), z((2,)), z((2,))), "bool[3]", "f32[2]"))),
    Op("clamp", lax.clamp, clamp_ref, _clamp_case, K(REAL), bad=(
        bad(lambda: lax.clamp(z((3,)), z((2,)), z(())), "f32[3]", "f32[2]"),
        bad(lambda: lax.clamp(z((), F64), z((2,)), z(())), "f64[]", "f32[2]"),
        bad(lambda: lax.clamp(z((), C64), z((2,), C64), z((), C64)), "c64[2]"))),
    Op("convert_element_type", lax.convert_element_type, convert_ref, _convert_case, ALL),
    # --- shapes ---
    Op("broadcast_in_dim", lax.broadcast_in_dim, bid_ref, _bid_case, ALL, bad=(
        bad(lambda: lax.broadcast_in_dim(z((2, 3)), (3, 2), (0, 1)), "f32[2,3]", "(3, 2)"),
        bad(lambda: lax.broadcast_in_dim(z((2, 3)), (2, 3, 4), (1, 0)), "f32[2,3]"),
        bad(lambda: lax.broadcast_in_dim(z((2,)), (2,), (1,)), "f32[2]"),
        bad(lambda: lax.broadcast_in_dim(z((1,)), (-1,), (0,)), "f32[1]", "(-1,)"))),
    Op("reshape", lax.reshape, reshape_ref, _reshape_case, ALL, bad=(
        bad(lambda: lax.reshape(z((2, 3)), (4,)), "f32[2,3]", "(4,)"),
        bad(lambda: lax.reshape(z((2, 3)), (3, 2), (0, 0)), "(0, 0)"))),
    Op("transpose", lax.transpose, transpose_ref, _transpose_case, ALL, bad=(
        bad(lambda: lax.transpose(z((2, 3)), (0,)), "f32[2,3]"),
        bad(lambda: lax.transpose(z((2, 3)), (1, 1)), "f32[2,3]"))),
    Op("squeeze", lax.squeeze, squeeze_ref, _squeeze_case, ALL, bad=(
        bad(lambda: lax.squeeze(z((2, 1)), (0,)), "f32[2,1]"),
        bad(lambda: lax.squeeze(z((2, 1)), (2,)), "axis 2", "rank 2"))),
    Op("expand_dims", lax.expand_dims, expand_dims_ref, _expand_dims_case, ALL, bad=(
        bad(lambda: lax.expand_dims(z((2, 1)), (3,)), "axis 3", "rank 3"),
        bad(lambda: lax.expand_dims(z((2, 1)), (0, 0)), "repeated"))),
    Op("rev", lax.rev, rev_ref, _rev_case, ALL, bad=(
        bad(lambda: lax.rev(z((2, 1)), (2,)), "axis 2", "rank 2"),)),
    Op("concatenate", lambda *xs, dimension: lax.concatenate(xs, dimension), concat_ref,
       _concat_case, ALL, bad=(
           bad(lambda: lax.concatenate([z((2, 3)), z((2, 3), F64)], 0), "f32[2,3]", "f64[2,3]"),
           bad(lambda: lax.concatenate([z((2, 3)), z((3, 2))], 0), "f32[2,3]", "f32[3,2]"),
           bad(lambda: lax.concatenate([z((2, 3)), z((2, 3))], 2), "f32[2,3]"),
           bad(lambda: lax.concatenate([z((2, 3)), z((2,))], 0), "f32[2,3]", "f32[2]"))),
    Op("pad", lax.pad, pad_ref, _pad_case, ALL, bad=(
        bad(lambda: lax.pad(z((2, 3)), z((), F64), [(0, 0, 0)] * 2), "f32[2,3]", "f64[]"),
        bad(lambda: lax.pad(z((2, 3)), 0.0, [(0, 0, 0)]), "f32[2,3]"),
        bad(lambda: lax.pad(z((2, 3)), 0.0, [(0, 0, -1), (0, 0, 0)]), "interior"),
        bad(lambda: lax.pad(z((2, 3)), 0.0, [(-2, -1, 0), (0, 0, 0)]), "f32[2,3]"))),
    Op("slice", lax.slice, slice_ref, _slice_case, ALL, bad=(
        bad(lambda: lax.slice(z((2, 3)), (0, 0), (2, 4)), "f32[2,3]"),
        bad(lambda: lax.slice(z((2, 3)), (1, 0), (0, 3)), "f32[2,3]"),
        bad(lambda: lax.slice(z((2, 3)), (0,), (2,)), "f32[2,3]"),
        bad(lambda: lax.slice(z((2, 3)), (0, 0), (2, 3), (0, 1)), "f32[2,3]"))),
    Op("dynamic_slice", lambda x, *s, slice_sizes: lax.dynamic_slice(
        x, s, slice_sizes, allow_negative_indices=False),
       dynamic_slice_ref, _dynamic_slice_case, ALL, bad=(
           bad(lambda: lax.dynamic_slice(z((2, 3)), (_i(0), _i(0)), (3, 1)), "f32[2,3]"),
           bad(lambda: lax.dynamic_slice(z((2, 3)), (_i(0),), (1, 1)), "f32[2,3]"),
           bad(lambda: lax.dynamic_slice(z((2, 3)), (z(()), _i(0)), (1, 1)), "float32"))),
    Op("dynamic_update_slice", lambda x, u, *s: lax.dynamic_update_slice(
        x, u, s, allow_negative_indices=False), dus_ref,
       _dus_case, ALL, bad=(
           bad(lambda: lax.dynamic_update_slice(z((2, 3)), z((3, 1)), (_i(0), _i(0))),
               "f32[3,1]", "f32[2,3]"),
           bad(lambda: lax.dynamic_update_slice(z((2, 3)), z((1, 1), F64), (_i(0), _i(0))),
               "f64[1,1]", "f32[2,3]"),
           bad(lambda: lax.dynamic_update_slice(z((2, 3)), z((1, 1)), (_i(0),)), "f32[2,3]"))),
    Op("iota", lambda *, dtype, shape, dimension: lax.broadcasted_iota(dtype, shape, dimension),
       iota_ref, _iota_case, K(NUM), bad=(
           bad(lambda: lax.broadcasted_iota(I32, (2, 3), 2), "dimension 2", "(2, 3)"),
           bad(lambda: lax.broadcasted_iota(BOOL, (4,), 0), "bool"),
           bad(lambda: lax.broadcasted_iota(I32, (2, -1), 0), "(2, -1)"))),
    # --- reductions ---
    Op("reduce_sum", lax.reduce_sum, reduce_sum_ref, _reduce_case, K(NUM), tol=2,
       bad=BAD_REDUCE(lax.reduce_sum) + (bad(lambda: lax.reduce_sum(z((2,), BOOL), (0,)),
                                             "bool[2]"),)),
    Op("reduce_prod", lax.reduce_prod, reduce_prod_ref,
       lambda d: _reduce_case(d, SMALL), K(NUM), tol=2, bad=BAD_REDUCE(lax.reduce_prod)),
    Op("reduce_max", lax.reduce_max, reduce_extreme_ref("max"), _reduce_case, ALL,
       bad=BAD_REDUCE(lax.reduce_max)),
    Op("reduce_min", lax.reduce_min, reduce_extreme_ref("min"), _reduce_case, ALL,
       bad=BAD_REDUCE(lax.reduce_min)),
    Op("reduce_and", lax.reduce_and, reduce_bitwise_ref("and"), _reduce_case, K(IB),
       bad=BAD_REDUCE(lax.reduce_and, I32) + (bad(lambda: lax.reduce_and(z((2,)), (0,)), "f32[2]"),)),
    Op("reduce_or", lax.reduce_or, reduce_bitwise_ref("or"), _reduce_case, K(IB),
       bad=BAD_REDUCE(lax.reduce_or, I32) + (bad(lambda: lax.reduce_or(z((2,)), (0,)), "f32[2]"),)),
    Op("argmax", lax.argmax, arg_ref("max"), _arg_case, ALL, bad=(
        bad(lambda: lax.argmax(z((2, 0)), 1, I32), "f32[2,0]"),
        bad(lambda: lax.argmax(z((2, 3)), 2, I32), "axis 2", "rank 2"),
        bad(lambda: lax.argmax(z((2, 3)), 1, F32), "float32", "f32[2,3]"))),
    Op("argmin", lax.argmin, arg_ref("min"), _arg_case, ALL, bad=(
        bad(lambda: lax.argmin(z((2, 0)), 1, I32), "f32[2,0]"),
        bad(lambda: lax.argmin(z((2, 3)), -3, I32), "axis -3", "rank 2"))),
    Op("cumsum", lax.cumsum, cum_ref(np.add, "sum"), _cum_case, K(NUM), tol=2, bad=(
        bad(lambda: lax.cumsum(z((2,), BOOL)), "bool[2]"),
        bad(lambda: lax.cumsum(z(())), "rank 0"),
        bad(lambda: lax.cumsum(z((2, 3)), 2), "axis 2", "rank 2"))),
    Op("cumprod", lax.cumprod, cum_ref(np.multiply, "prod"), lambda d: _cum_case(d, SMALL),
       K(NUM), tol=2, bad=(bad(lambda: lax.cumprod(z((2,), BOOL)), "bool[2]"),)),
    Op("cummax", lax.cummax, cum_ref(np.maximum), _cum_case, K(REAL), bad=(
        bad(lambda: lax.cummax(z((2,), C64)), "c64[2]"),)),
    Op("cummin", lax.cummin, cum_ref(np.minimum), _cum_case, K(REAL), bad=(
        bad(lambda: lax.cummin(z((2,), C64)), "c64[2]"),)),
    Op("cumlogsumexp", lax.cumlogsumexp, cum_ref(np.logaddexp), _cum_case, K("f"), tol=2, bad=(
        bad(lambda: lax.cumlogsumexp(z((2,), I32)), "i32[2]"),
        bad(lambda: lax.cumlogsumexp(z((2,), C64)), "c64[2]"))),
    # --- contraction, sorting, indexing ---
    Op("dot_general", lax.dot_general, dot_ref, _dot_case,
       (BOOL, I8, I32, I64, U8, F16, F32, F64, C64), tol=2, bad=(
           bad(lambda: lax.dot_general(z((2, 3)), z((4, 2)), (((1,), (0,)), ((), ()))),
               "f32[2,3]", "f32[4,2]"),
           bad(lambda: lax.dot_general(z((2, 3)), z((3, 2)), (((2,), (0,)), ((), ()))),
               "f32[2,3]"),
           bad(lambda: lax.dot_general(z((2, 3)), z((3, 2)), (((1,), (0,)), ((0,), ()))),
               "f32[2,3]"),
           bad(lambda: lax.dot_general(z((2, 3)), z((3, 2)), (((1,), (0,)), ((), ())),
                                       preferred_element_type=I32), "f32[2,3]", "int32"))),
    Op("sort", sort_fn, sort_ref, _sort_case, SORT_DTYPES, bad=(
        bad(lambda: lax.sort((z((2, 3)), z((3, 2))), 0), "f32[2,3]", "f32[3,2]"),
        bad(lambda: lax.sort((z((2, 3)), z((2, 3))), 0, num_keys=3), "num_keys=3"),
        bad(lambda: lax.sort(z(())), "rank 0"),
        bad(lambda: lax.sort(z((2, 3)), 2), "axis 2", "rank 2"))),
    Op("top_k", lax.top_k, top_k_ref, _top_k_case, SORT_DTYPES, bad=(
        bad(lambda: lax.top_k(z((2, 3)), 4), "k=4", "f32[2,3]"),
        bad(lambda: lax.top_k(z(()), 1), "f32[]"),
        bad(lambda: lax.top_k(z((3,), C64), 1), "c64[3]"))),
    Op("gather", gather_fn, gather_ref, _gather_case, ALL, bad=(
        bad(lambda: lax.index_gather(z((2, 3)), [z((2,), I32), z((3,), I32)], (("a", 0), ("a", 1))),
            "(2,)", "(3,)"),
        bad(lambda: lax.index_gather(z((2, 3)), [z((2,))], (("a", 0), 0)), "f32[2]"),
        bad(lambda: lax.index_gather(z((2, 3)), [], (2, 0)), "2", "size 2"),
        bad(lambda: lax.index_gather(z((2, 3)), [], (0,)), "rank 2"),
        bad(lambda: lax.index_gather(z((2, 3)), [], (0, ("s", 0, 3, 0))), "step"),
        bad(lambda: lax.index_gather(z((2, 3)), [z((2,), I32)], (("a", 1), 0)), "operand 1"),
        bad(lambda: lax.index_gather(z((0, 3)), [z((2,), I32)], (("a", 0), 0)), "i32[2]",
            "f32[0,3]"))),
    Op("scatter", scatter_fn, scatter_ref, _scatter_case, (BOOL, I8, I32, U8, F16, F32, F64, C64),
       tol=2, bad=(
           bad(lambda: lax.index_scatter(z((2, 3)), z((3,)), [z((2,), I32)], (("a", 0), 0)),
               "f32[2,3]", "f32[3]"),
           bad(lambda: lax.index_scatter(z((2, 3)), z((2,), F64), [z((2,), I32)], (("a", 0), 0)),
               "f32[2,3]", "f64[2]"),
           bad(lambda: lax.index_scatter(z((2, 3)), z((2,)), [z((2,), I32)], (("a", 0), 0), "div"),
               "'div'"))),
]

OPS_BY_NAME = {r.prim: r for r in OPS}
IDS = [r.prim for r in OPS]


# --- the checks ----------------------------------------------------------------------------

def _draw_case(rec, data, label=""):
    dtype = data.draw(st.sampled_from(rec.dtypes), label=f"dtype{label}")
    return data.draw(rec.cases(dtype), label=f"case{label}")


def _call(rec, case, args=None):
    return rec.fn(*(case.args if args is None else args), **case.params)


def _arrays(case):
    return [fnx.Array(a) for a in case.args]


@pytest.mark.parametrize("rec", OPS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_eager_matches_reference(rec, data):
    case = _draw_case(rec, data)
    saved = [a.copy() for a in case.args]
    xs = _arrays(case)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # JAX semantics: no floating-point warnings
        got = _call(rec, case, xs)
    expected = rec.ref(*[a.copy() for a in case.args], **case.params)
    compare(got, expected, rec.tol, rec.zero_sign, rec.prim)
    for a, s, x in zip(case.args, saved, xs):   # inputs untouched
        assert np.array_equal(np.asarray(x), s, equal_nan=True)


@pytest.mark.parametrize("rec", OPS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_eval_shape_and_ir(rec, data):
    case = _draw_case(rec, data)

    def f(*a):
        return rec.fn(*a, **case.params)
    got = f(*_arrays(case))
    specs = [fnx.ShapeDtypeStruct(a.shape, a.dtype) for a in case.args]
    shapes = fnx.eval_shape(f, *specs)
    for g, s in zip(_leaves(got), _leaves(shapes)):
        assert s == fnx.ShapeDtypeStruct(g.shape, g.dtype, g.weak_type), \
            f"eval_shape gives {s}, eager gives {g.aval}"
    ir = fnx.make_ir(f)(*specs)
    fnx.check_ir(ir)
    names = [e.prim.name for e in ir.eqns]
    note(str(ir))
    assume(rec.prim in names)    # skips the lax calls that return an input unchanged
    assert names == [rec.prim], f"{rec.prim}: the IR records {names}"
    assert ir.out_avals == [g.aval for g in _leaves(got)]


@pytest.mark.parametrize("rec", OPS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_jit_matches_eager_and_caches(rec, data):
    case = _draw_case(rec, data)

    def f(*a):
        return rec.fn(*a, **case.params)
    eager = f(*_arrays(case))
    jitted = fnx.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = jitted(*_arrays(case))
    bitwise_equal(out, eager, f"{rec.prim}: jit vs eager")
    assert jitted.trace_count == 1
    bitwise_equal(jitted(*_arrays(case)), eager, f"{rec.prim}: jit, second call")
    assert jitted.trace_count == 1, "a second call with the same shapes retraced"
    if case.args:   # the first operand closed over: a constant (a literal when 0-d)
        const = _arrays(case)[0]
        h = fnx.jit(lambda *rest: rec.fn(const, *rest, **case.params))
        out = h(*_arrays(case)[1:])
        if const.ndim == 0 and const.dtype.kind == "c":
            # A 0-d constant becomes a literal, which the generated code holds as a NumPy
            # scalar; NumPy's complex scalar kernels round differently from its array
            # loops (np.square(c64 scalar) != np.square(0-d c64 array)). Reported.
            for o, e in zip(_leaves(out), _leaves(eager)):
                compare(o, np.asarray(e), 8, what=f"{rec.prim}: jit with a literal")
        else:
            bitwise_equal(out, eager, f"{rec.prim}: jit with a constant operand")
    # Static params as static arguments: a new signature (shapes, dtypes, params) retraces.
    g = fnx.jit(lambda *a, **p: rec.fn(*a, **p), static_argnames=tuple(case.params))
    bitwise_equal(g(*_arrays(case), **case.params), eager, f"{rec.prim}: jit (static params)")
    case2 = _draw_case(rec, data, "2")
    out2 = g(*_arrays(case2), **case2.params)
    bitwise_equal(out2, rec.fn(*_arrays(case2), **case2.params), f"{rec.prim}: jit, 2nd case")
    same = ([(a.shape, a.dtype) for a in case.args] == [(a.shape, a.dtype) for a in case2.args]
            and case.params == case2.params)
    assert g.trace_count == (1 if same else 2)


WIDE64 = (I64, np.dtype("uint64"), F64, C128)


@pytest.mark.parametrize("rec", OPS, ids=IDS)
@settings(SETTINGS, max_examples=max(3, EXAMPLES // 4))
@given(data=st.data())
def test_default_mode_narrows_alike(rec, data):
    """With jax_enable_x64 off (the default), 64-bit operands narrow to 32 bits, as in JAX,
    and eager, eval_shape (on the 64-bit placeholders), make_ir and jit agree on every
    output's shape, dtype and weak type; no output is 64-bit."""
    case = _draw_case(rec, data)

    def f(*a):
        return rec.fn(*a, **case.params)
    with fnx.enable_x64(False):
        got = _leaves(f(*_arrays(case)))
        specs = [fnx.ShapeDtypeStruct(a.shape, a.dtype) for a in case.args]
        shapes = _leaves(fnx.eval_shape(f, *specs))
        ir = fnx.make_ir(f)(*specs)
        jitted = _leaves(fnx.jit(f)(*_arrays(case)))
    assert shapes == [g.aval for g in got], \
        f"{rec.prim}: eval_shape gives {shapes}, eager {[g.aval for g in got]}"
    assert ir.out_avals == [g.aval for g in got], f"{rec.prim}: make_ir gives {ir.out_avals}"
    assert [j.aval for j in jitted] == [g.aval for g in got], f"{rec.prim}: jit vs eager"
    wide = [g.aval for g in got if g.dtype in WIDE64]
    assert not wide, f"{rec.prim}: 64-bit results {wide} with jax_enable_x64 off"


@pytest.mark.parametrize("rec", OPS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_accepted_dtypes_run(rec, data):
    """Any dtype the shape rule accepts (not only the table's), the impl computes, with
    the shape and dtype the rule promised; the table's dtypes are all accepted."""
    dtype = data.draw(st.sampled_from(ALL), label="dtype")
    case = data.draw(rec.cases(dtype), label="case")

    def f(*a):
        return rec.fn(*a, **case.params)
    try:
        shapes = fnx.eval_shape(f, *[fnx.ShapeDtypeStruct(a.shape, a.dtype) for a in case.args])
    except ShapeError:
        assert dtype not in rec.dtypes, f"{rec.prim} rejects {dtype}, which the table lists"
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = f(*_arrays(case))
    for g, s in zip(_leaves(got), _leaves(shapes)):
        assert type(g) is fnx.Array and s == g.aval, f"eval_shape gives {s}, eager {g.aval}"


BAD_CASES = [pytest.param(r, b, id=f"{r.prim}-{b.label}",
                          marks=[pytest.mark.xfail(strict=True, reason=b.xfail)] if b.xfail
                          else []) for r in OPS for b in r.bad]


@pytest.mark.parametrize("rec,case", BAD_CASES)
def test_shape_rule_rejects(rec, case):
    for how in ("eager", "eval_shape"):
        with pytest.raises(ShapeError) as info:
            case.thunk() if how == "eager" else fnx.eval_shape(case.thunk)
        msg = str(info.value)
        for needle in (rec.prim,) + case.needles:
            assert needle in msg, f"{how}: {needle!r} not in the message: {msg}"


def test_every_primitive_has_a_table_line():
    lines = [r.prim for r in OPS]
    assert len(lines) == len(set(lines)), "a primitive has two table lines"
    missing = sorted(BUILTIN - set(lines) - set(NOT_IN_TABLE))
    assert not missing, f"primitives without a line in the op table: {missing}"
    stale = sorted((set(lines) | set(NOT_IN_TABLE)) - BUILTIN)
    assert not stale, f"table lines for primitives that are not registered: {stale}"


def test_every_line_has_bad_cases_or_a_reason():
    # These take every dtype and shape: nothing to reject.
    assert sorted(r.prim for r in OPS if not r.bad) == [
        "convert_element_type", "imag", "real", "stop_gradient"]


# --- indexing: the shape rule against NumPy, on every generated spec ------------------------------

@settings(max_examples=150, deadline=None)
@given(index_spec(broadcastable=False) | index_spec())
def test_indexed_shape_agrees_with_numpy(spec_case):
    shape, spec, ishapes = spec_case
    try:
        want = np.empty(shape)[numpy_key(spec, shape, [np.zeros(s, np.intp)
                                                       for s in ishapes])].shape
    except IndexError:
        with pytest.raises(ShapeError, match="gather"):
            indexed_shape(shape, spec, ishapes)
        return
    assert indexed_shape(shape, spec, ishapes) == want


# --- targeted semantics the random sweep may visit rarely -------------------------------------------

def _np(x):
    return np.asarray(x)


def test_round_both_methods_on_halves():
    x = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 0.49999997], F32)
    assert _np(lax.round(x)).tolist() == [-3, -2, -1, 0, 1, 2, 3, 0]
    assert _np(lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)).tolist() == \
        [-2, -2, -0, 0, 0, 2, 2, 0]
    assert np.signbit(_np(lax.round(np.array([-0.0, -0.25], F32)))).all()


def _random_bits(rng, dtype, shape):
    """Values of ``dtype`` from random bits: NaNs with payloads, signed zeros, infinities
    and subnormals among them (bools: 0 or 1)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    raw = rng.integers(0, 256, size=tuple(shape) + (dtype.itemsize,), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


_SELECT_DTYPES = [np.bool_, np.int8, np.uint16, np.float16, np.float32, np.int32, np.float64,
                  np.complex64] + ([fnx.numpy.bfloat16] if hasattr(fnx.numpy, "bfloat16") else [])


@pytest.mark.parametrize("dtype", _SELECT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_select_n_large_masks_copy_bits_like_np_where(dtype):
    """Large bool selections take a branch-free bit blend (1-, 2-, 4-byte elements): the
    same bits as ``np.where`` for every value, layout and broadcast operand."""
    rng = np.random.default_rng(0)
    n_blend = 1 << 13
    for shape in ((n_blend - 1,), (n_blend,), (96, 130)):
        a, b = _random_bits(rng, dtype, shape), _random_bits(rng, dtype, shape)
        which = rng.random(shape) < 0.5
        variants = [(which, a, b), (which, np.zeros((), dtype), a), (which, a, np.ones((), dtype))]
        if len(shape) == 2:  # transposed and strided operands
            at, bt = _random_bits(rng, dtype, shape[::-1]), _random_bits(rng, dtype, shape)
            variants.append((which, at.T, bt))
            wide = _random_bits(rng, dtype, (shape[0], 2 * shape[1]))
            variants.append((np.asfortranarray(which), wide[:, ::2], b))
        for w, x, y in variants:
            got = fnx.lax.select_n(w, np.broadcast_to(y, shape), np.broadcast_to(x, shape))
            want = np.where(w, x, y)
            got = _np(got)
            assert got.dtype == want.dtype and got.shape == want.shape
            u = f"u{want.dtype.itemsize}" if want.dtype.itemsize <= 8 else "u1"
            assert np.array_equal(got.view(u), want.view(u))


def test_jit_select_n_reads_broadcast_cases_unexpanded():
    """Under jit, a select between an array and a broadcast scalar (``relu``'s
    ``where(x <= 0, 0, x)``) reads the scalar as is: no full-size broadcast per call,
    and the same bits as eager."""
    rng = np.random.default_rng(1)
    x = _random_bits(rng, F32, (64, 200))
    f = fnx.jit(fnx.nn.relu)
    assert "broadcast_in_dim" not in f.lower(x).source
    assert np.array_equal(_np(f(x)).view("u4"), _np(fnx.nn.relu(x)).view("u4"))
    assert np.array_equal(_np(f(x)).view("u4"), np.where(x <= 0, F32.type(0), x).view("u4"))


@pytest.mark.parametrize("dtype", K(INT))
def test_shifts_past_the_bit_width(dtype):
    n = bits(dtype)
    x = np.array([1, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype)
    for s in (n, n + 1, n + 2):
        s = np.full(3, s, dtype)
        assert _np(lax.shift_left(x, s)).tolist() == [0, 0, 0]
        assert _np(lax.shift_right_logical(x, s)).tolist() == [0, 0, 0]
        assert _np(lax.shift_right_arithmetic(x, s)).tolist() == \
            [0, 0, -1 if dtype.kind == "i" else 0]


def test_reductions_of_empty_arrays_give_identities():
    for d, lo, hi in ((F32, -np.inf, np.inf), (I8, -128, 127), (U32, 0, 2 ** 32 - 1),
                      (BOOL, False, True)):
        x = np.zeros((0, 2), d)
        for axes in ((0,), (-2,), (0, 1)):
            assert _np(lax.reduce_max(x, axes)).tolist() == np.full(
                [2] if len(axes) == 1 else [], lo).tolist()
            assert _np(lax.reduce_min(x, axes)).tolist() == np.full(
                [2] if len(axes) == 1 else [], hi).tolist()
    assert _np(lax.reduce_sum(np.zeros((3, 0), F32), (1,))).tolist() == [0, 0, 0]
    assert _np(lax.reduce_prod(np.zeros((3, 0), I32), (-1,))).tolist() == [1, 1, 1]


def test_argmax_first_nan_wins():
    x = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 2.0, 1.0, 0.0]], F32)
    assert _np(lax.argmax(x, 1)).tolist() == [1, 0]
    assert _np(lax.argmin(x, 1)).tolist() == [1, 3]


def test_sort_is_stable_and_puts_nans_last():
    keys = np.array([1.0, np.nan, -0.0, 0.0, 1.0, -np.inf, np.nan, 0.0], F32)
    vals = np.arange(8, dtype=I32)
    k, v = lax.sort((keys, vals), 0)
    assert _np(v).tolist() == [5, 2, 3, 7, 0, 4, 1, 6]
    k2 = np.array([1, 1, 0, 0, 1, 0, 0, 0], I8)
    _, _, v = lax.sort((k2, keys, vals), 0, num_keys=2)
    assert _np(v).tolist() == [5, 2, 3, 7, 6, 0, 4, 1]


def test_dynamic_slice_counts_negative_starts_from_the_end_then_clamps():
    # JAX's lax.dynamic_slice: a negative start is start + dim, then XLA clamps the window
    x = np.arange(10, dtype=I32)
    for s, want in ((-5, 5), (-1, 7), (-12, 0), (8, 7), (100, 7), (3, 3)):
        assert _np(lax.dynamic_slice(x, (_i(s),), (3,))).tolist() == list(range(want, want + 3))
        assert _np(lax.dynamic_slice(x, (s,), (3,))).tolist() == list(range(want, want + 3))
        traced = fnx.jit(lambda x, s: lax.dynamic_slice(x, (s,), (3,)))(x, _i(s))
        assert _np(traced).tolist() == list(range(want, want + 3))
    out = lax.dynamic_update_slice(x, np.full(4, -1, I32), (_i(9),))
    assert _np(out).tolist() == [0, 1, 2, 3, 4, 5, -1, -1, -1, -1]
    out = lax.dynamic_update_slice(x, np.full(2, -1, I32), (_i(-3),))
    assert _np(out).tolist() == [0, 1, 2, 3, 4, 5, 6, -1, -1, 9]
    assert int(_np(lax.dynamic_index_in_dim(x, -1, keepdims=False))) == 9
    got = fnx.vmap(lambda i: lax.dynamic_index_in_dim(x, i, keepdims=False))(
        np.array([-1, 0, -10, -11], I32))
    assert _np(got).tolist() == [9, 0, 0, 0]
    # allow_negative_indices=False: a static negative start raises, a traced one clamps
    with pytest.raises(ValueError, match="allow_negative_indices=False"):
        lax.dynamic_slice_in_dim(x, -1, 2, allow_negative_indices=False)
    clamped = fnx.jit(lambda x, s: lax.dynamic_slice_in_dim(x, s, 2, allow_negative_indices=False))
    assert _np(clamped(x, _i(-1))).tolist() == [0, 1]
    # the cotangent lands where the (counted, clamped) window was
    g = fnx.grad(lambda x: lax.dynamic_slice(x, (-3,), (2,)).sum())(x.astype(F32))
    assert _np(g).tolist() == [0] * 7 + [1, 1, 0]
    g = fnx.grad(lambda u: lax.dynamic_update_slice(x.astype(F32), u, (-12,)).sum())(
        np.ones(2, F32))
    assert _np(g).tolist() == [1, 1]


def test_gather_clamps_and_scatter_drops_out_of_range_indices():
    x = np.arange(5, dtype=F32)
    idx = np.array([-1, -6, 7, 2], I32)
    assert _np(lax.index_gather(x, [idx], (("a", 0),))).tolist() == [4, 0, 4, 2]
    out = lax.index_scatter(x, np.full(4, 10, F32), [idx], (("a", 0),), "add")
    assert _np(out).tolist() == [0, 1, 12, 3, 14]


def test_scatter_add_accumulates_repeated_indices_like_np_add_at():
    x = np.zeros((3, 4), F64)
    idx = np.array([0, 2, 0, 0], I32)
    u = np.arange(12, dtype=F64).reshape(4, 3)
    want = x.copy()
    np.add.at(want.T, idx, u)          # x[:, idx] += u.T, accumulating
    # x[:, idx] has shape (3, 4): the update for column idx[j] is u.T[:, j]
    got = lax.index_scatter(x, u.T.copy(), [idx], (("s", None, None, None), ("a", 0)), "add")
    np.testing.assert_array_equal(_np(got), want)


def test_pad_negative_and_interior():
    x = np.array([1, 2, 3], I32)
    assert _np(lax.pad(x, _i(0), [(-2, 1, 1)])).tolist() == [2, 0, 3, 0]
    assert _np(lax.pad(x, _i(9), [(1, -3, 2)])).tolist() == [9, 1, 9, 9, 2]


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8", "uint32", "int16"])
def test_float_to_int_conversion_saturates_as_xla(dtype, gpu):
    """Out-of-range floats saturate and NaN converts to 0, as XLA's conversion and fnx's
    GPU kernels do (NumPy's astype wraps or gives the least integer): eagerly, under jit
    (small, and large enough for a native loop), and on the emulated GPU."""
    info = np.iinfo(dtype)
    x = np.array([1e20, np.nan, 300.7, -3.7, -1e20, np.inf, -np.inf, 2.5], np.float32)
    want = np.array([info.max, 0, min(300, info.max), max(-3, info.min), info.min, info.max,
                     info.min, 2], dtype)
    f = lambda v: lax.convert_element_type(v, dtype)  # noqa: E731
    for got in (f(x), fnx.jit(f)(x), fnx.jit(f)(fnx.device_put(x, gpu))):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(np.asarray(got), want)
    big = np.tile(x, 20000)
    g = fnx.jit(lambda v: lax.convert_element_type(v * 1.0 + 0.0, dtype))
    np.testing.assert_array_equal(np.asarray(g(big)), np.tile(want, 20000))


def test_float16_to_wide_ints_saturates_only_at_infinity(gpu):
    """float16 cannot reach int32's ends: only +-inf saturate there, while its negative
    values still saturate at 0 for uint16 (JAX 0.10's values)."""
    x = np.array([np.inf, -np.inf, np.nan, 65504, -300.5], np.float16)
    for dtype, want in (("int32", [2**31 - 1, -2**31, 0, 65504, -300]),
                        ("uint16", [65535, 0, 0, 65504, 0])):
        f = fnx.jit(lambda v: lax.convert_element_type(v, dtype))
        for got in (lax.convert_element_type(x, dtype), f(x), f(fnx.device_put(x, gpu))):
            assert np.asarray(got).tolist() == want


def test_complex_keeps_its_parts(gpu):
    """``lax.complex(x, y)`` is ``x + i y`` with both parts kept as given (inf and NaN
    too: ``x + 1j * y`` would make ``complex(1, inf)``'s real part NaN), complex64 from
    float32 and complex128 from float64, eagerly, under jit and on the emulated GPU;
    other dtypes are refused as JAX refuses them."""
    x = np.array([1.0, -0.0, np.nan, 2.5], np.float32)
    y = np.array([np.inf, 3.0, 1.0, -np.inf], np.float32)
    for got in (lax.complex(x, y), fnx.jit(lax.complex)(x, y),
                fnx.jit(lax.complex)(*fnx.device_put((x, y), gpu))):
        got = np.asarray(got)
        assert got.dtype == np.complex64
        np.testing.assert_array_equal(got.real.view(np.uint32), x.view(np.uint32))
        np.testing.assert_array_equal(got.imag.view(np.uint32), y.view(np.uint32))
    with fnx.enable_x64(True):
        assert lax.complex(np.float64(1), np.float64(2)).dtype == np.complex128
    assert np.asarray(lax.complex(np.float32(1), np.float32([2, 3]))).tolist() == [1 + 2j, 1 + 3j]
    for bad in (np.float16, np.int32):
        with pytest.raises(ShapeError, match="complex"):
            lax.complex(np.ones(2, bad), np.ones(2, bad))
    with pytest.raises(ShapeError, match="complex"):
        lax.complex(np.ones(2, np.float32), np.ones(3, np.float32))


# --- JAX's lax semantics found by JAX's own lax_test --------------------------------------------

def test_binary_ops_broadcast_size_one_dims_as_jax():
    # JAX's lax n-ary ops take operands of one rank whose dimensions agree or are 1
    a, b = np.arange(12, dtype=F32).reshape(3, 4), np.arange(3, dtype=F32).reshape(3, 1)
    np.testing.assert_array_equal(np.asarray(lax.add(a, b)), a + b)
    np.testing.assert_array_equal(np.asarray(lax.atan2(b.reshape(1, 3), b)),
                                  np.arctan2(b.reshape(1, 3), b))
    assert lax.lt(b, a).shape == (3, 4)
    assert lax.complex(b, a).dtype == C64
    assert fnx.jit(lax.mul)(a, b).shape == (3, 4)
    ga, gb = fnx.grad(lambda a, b: lax.mul(a, b).sum(), (0, 1))(a, b)
    np.testing.assert_array_equal(np.asarray(gb), a.sum(1, keepdims=True))
    assert lax.igamma(a + 1, b + 1).shape == lax.betainc(a + 1, b + 1, b * 0 + 0.5).shape == (3, 4)
    with pytest.raises(TypeError, match="incompatible shapes"):
        lax.add(a, np.ones((2, 4), F32))
    with pytest.raises(TypeError, match="number of dimensions"):
        lax.add(a, np.ones(4, F32))


def test_special_functions_take_bfloat16():
    bf16 = fnx.dtypes.bfloat16
    x = np.array([0.5, 1.5, 3.0], bf16)
    for f, ref in ((lax.lgamma, lgamma_ref), (lax.digamma, digamma_ref)):
        y = f(x)
        assert y.dtype == bf16
        want = ref(x.astype(F64))
        np.testing.assert_allclose(np.asarray(y, F32), getattr(want, "value", want), rtol=1e-2)


def test_conj_and_logistic_of_complex_as_jax():
    x = np.array([1.0, -2.0], F32)
    assert lax.conj(x).dtype == C64 and lax.conj(2.0).weak_type
    np.testing.assert_array_equal(np.asarray(fnx.grad(lambda x: lax.real(lax.conj(x)).sum())(x)),
                                  np.ones(2, F32))
    with pytest.raises(TypeError):
        lax.conj(np.ones(2, I32))
    z = np.array([1 + 2j, -3 + 0.5j, 100 + 1j, -100 + 1j], C64)
    np.testing.assert_allclose(np.asarray(lax.logistic(z)),
                               1 / (1 + np.exp(-z.astype(C128))), rtol=1e-6, atol=1e-30)


def test_dot_general_of_two_dtypes_as_jax():
    # JAX computes in the operand dtype of higher precision (XLA's HigherPrecisionType)
    for a, b, want in ((F32, F16, F32), (I8, U8, I8), (C64, I32, C64), (U32, np.uint16, U32),
                       (BOOL, F32, F32), (fnx.dtypes.bfloat16, np.int16, fnx.dtypes.bfloat16)):
        out = lax.dot(np.ones((2, 3), a), np.ones(3, b))
        assert out.dtype == want and not out.weak_type, (a, b, out.dtype)
        np.testing.assert_array_equal(np.asarray(out, F64), [3, 3])
    ga, gb = fnx.grad(lambda a, b: lax.real(lax.dot(a, b)), (0, 1))(
        np.arange(3, dtype=F32), np.full(3, 1 + 2j, C64))
    assert ga.dtype == F32 and gb.dtype == C64
    np.testing.assert_array_equal(np.asarray(ga), np.ones(3))


def test_weak_types_of_reduce_bit_ops_and_is_finite_as_jax():
    weak = lambda v, d=I32: lax.convert_element_type_exact(fnx.numpy.asarray(v, d), d, True)
    strong = lambda v, d=I32: fnx.numpy.asarray(v, d)
    arr = np.arange(10, dtype=I32)
    for op in (lax.add, lax.mul, lax.max, lambda a, b: a + b):
        for a_weak in (False, True):
            for i_weak in (False, True):
                a = weak(arr) if a_weak else strong(arr)
                i = weak(1) if i_weak else strong(1)
                for f in (lax.reduce, fnx.jit(lax.reduce, static_argnums=(2, 3))):
                    assert f(a, i, op, (0,)).weak_type == (a_weak and i_weak)
    x = weak(np.ones((2, 3)), F32)
    assert not lax.bitcast_convert_type(x, F32).weak_type
    assert not lax.bitcast_convert_type(x, I32).weak_type
    assert lax.clz(1).weak_type and lax.population_count(1).weak_type
    assert lax.is_finite(1.0).weak_type and not lax.is_finite(np.float32(1)).weak_type


def test_convert_element_type_of_a_python_int_wraps_as_jax():
    assert int(lax.convert_element_type(2 ** 32, "int32")) == 0
    assert int(lax.convert_element_type(2 ** 31 + 5, np.int32)) == -(2 ** 31) + 5
    out = lax.convert_element_type(2 ** 100, "float32")
    assert out.dtype == F32 and float(out) == 2.0 ** 100 and not out.weak_type


def test_lax_call_forms_as_jax_0_10():
    # mul's out_dtype converts the operands first
    a = np.full(2, 100, np.int8)
    out = lax.mul(a, a, out_dtype=np.int32)
    assert out.dtype == I32 and list(np.asarray(out)) == [10000, 10000]
    # broadcast_in_dim takes broadcast_dimensions in any order
    x = np.arange(6, dtype=F32).reshape(2, 3)
    got = lax.broadcast_in_dim(x, (3, 5, 2), (2, 0))
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x.T[:, None, :], (3, 5, 2)))
    # dot's precision is keyword-only
    with pytest.raises(TypeError):
        lax.dot(np.ones(3, F32), np.ones(3, F32), lax.Precision.DEFAULT)
    # reduce: repeated axes and non-scalar init values are ValueErrors
    with pytest.raises(ValueError, match="duplicate value in 'axes'"):
        lax.reduce(np.arange(3), 0, lax.add, (0, 0))
    with pytest.raises(ValueError, match="non-scalar initial value"):
        lax.reduce({"x": np.ones(5, F32)}, {"x": np.ones(5, F32)},
                   lambda p, q: {"x": p["x"] + q["x"]}, [0])
    # top_k's int32 indices cannot index past 2**31 - 1
    with pytest.raises(ValueError, match="int32 indices"):
        fnx.eval_shape(lambda v: lax.top_k(v, 3), fnx.ShapeDtypeStruct((2 ** 31 + 1,), F32))


def test_pow_of_a_float_base_and_integer_exponent_as_jax():
    x, y = np.array([0.0, 2.0, 3.0, -1.0], F32), np.array([0, 2, -1, 3], I32)
    np.testing.assert_allclose(np.asarray(lax.pow(x, y)), [1, 4, 1 / 3, -1], rtol=1e-6)
    assert lax.pow(x, y).dtype == F32
    # d/dx x ** 0 is 0 at x = 0 too (JAX's rule), in both modes and through numpy's power
    g = fnx.grad(lambda x: lax.pow(x, y).sum())(x)
    np.testing.assert_allclose(np.asarray(g), [0, 4, -1 / 9, 3], rtol=1e-6)
    assert float(fnx.grad(fnx.jit(lambda x, n: x ** n))(0.0, 0)) == 0.0
    jac = fnx.jacrev(fnx.jit(lax.pow))(lax.iota("float32", 4), 2)
    np.testing.assert_allclose(np.asarray(jac), np.diag([0.0, 2.0, 4.0, 6.0]))
    out = fnx.numpy.power(np.ones(3, np.float16), np.arange(3, dtype=np.int8))
    assert out.dtype == np.float16


def test_top_k_along_an_axis_as_jax():
    x = np.random.default_rng(0).standard_normal((3, 5, 4)).astype(F32)
    vals, idx = lax.top_k(x, 2, axis=1)
    assert vals.shape == idx.shape == (3, 2, 4) and idx.dtype == I32
    want = -np.sort(-x, axis=1)[:, :2]
    np.testing.assert_array_equal(np.asarray(vals), want)
    np.testing.assert_array_equal(np.take_along_axis(x, np.asarray(idx), 1), want)
    g = fnx.grad(lambda x: lax.top_k(x, 2, axis=0)[0].sum())(x)
    assert float(g.sum()) == 2 * 5 * 4
