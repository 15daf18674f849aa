"""Every primitive's transformation rules, property-tested.

One table (``RULES``) drives one sweep, ``fnx.testing.check_op`` on every line;
each line names a primitive, a hypothesis strategy of cases (shapes of rank 0-3
with sides 1-4, static params, and a generator of values inside the op's
domain, away from its kinks and singularities), its dtypes and, for
differentiable primitives, the gradient orders and modes checked.
``test_every_rule_of_every_primitive`` runs, per line:

- the shape rule (``eval_shape``) against the impl's output, and ``jit`` against eager;
- ``fnx.vmap`` over a batch of 2-3 examples of one case, each argument mapped at a
  random axis (first, last, in between) or not at all, against the op applied
  example by example and stacked (every primitive, integer ones included);
- for differentiable lines (float32, float64, and complex where listed), jvp against
  finite differences and vjp against jvp (``check_grads``, both modes, to order 2 or
  where a line says why, order 1 or one mode): each jvp rule, each transpose rule,
  and the rules of the rules (second derivatives);
- the GPU kernel (compiled by NVRTC, run on the CPU or the device) and the ONNX
  lowering (run by onnxruntime) of elementwise primitives that have them, and the
  ONNX export of the other lines where every primitive inside has a lowering.

Values against NumPy references are checked in ``test_lax_ops.py``.

``test_every_primitive_has_a_line`` fails when a primitive is registered without
a line here or in another sweep file (``tests/test_rules_*.py``, built on
``tests/rules_support.py``), or without a reason in a ``NO_GRAD`` / ``NO_BATCH``.

Examples per line: the hypothesis profile's (``HYPOTHESIS_PROFILE=fnx-thorough`` for a
deep run; see ``tests/conftest.py``).
"""
from __future__ import annotations

import importlib
import pathlib
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from fnx import lax
from fnx.core.dtypes import short_name
from fnx.core.primitive import BUILTIN
from fnx.lax.indexing import indexed_shape
from rules_support import (ALLDT, ANY, AWAY0, BITS, BOOL, CPLX, DISTINCT, FLOAT, I8, I32, INTS,
                           NUM, POS, SHAPES, SHAPES1, UNIT, U8, C64, C128, F32, F64, Case, Dom,
                           arrays, coupled, elementwise, run_rule, structured, values)

# The sweep draws float64 and complex128 operands (and int64 index dtypes): it runs with
# jax_enable_x64 on, as JAX's own suite runs its 64-bit tests.
pytestmark = pytest.mark.x64

# Primitives that are not gradient-checked, and why.
_COLLECTIVE = ("a collective over a named axis: only inside vmap(axis_name=...) or pmap "
               "(tests/test_collectives.py)")
NO_GRAD = {
    "native_loop": "made by the NumPy backend's lowering, after every transformation",
    **{p: _COLLECTIVE for p in ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index")},
    **{p: "bool result: no derivative" for p in (
        "eq", "ne", "lt", "le", "gt", "ge", "is_finite", "isinf", "isnan")},
    **{p: "integer/bool operands only" for p in (
        "and", "or", "xor", "not", "shift_left", "shift_right_arithmetic",
        "shift_right_logical", "reduce_and", "reduce_or")},
    "bitcast_convert_type": "raw bits: no derivative (JAX defines none either)",
    "rng_bit_generator": "uint32 key in, unsigned bits out: no derivative",
    "reduce_precision": "rounding: finite differences see its steps, where its derivative "
                        "is defined linear, as JAX's (tests/test_lax_bit_ops.py checks it)",
    "argmax": "integer result: no derivative",
    "argmin": "integer result: no derivative",
    "iota": "no operands",
    "stop_gradient": "its derivative is zero by definition, where finite differences see the "
                     "identity (tests/test_grad.py checks it)",
    "nextafter": "fnx defines its derivative as zero (JAX defines none); numerically it is "
                 "the identity in x, so finite differences disagree by design",
    "custom_lin": "the linear half of a custom_vjp: checked through the custom_vjp_call line",
    "check": "checkify's check: no outputs, its jvp checks the primals (tests/test_checkify.py)",
}

# Primitives that get no batching line, and why.
NO_BATCH = {
    "custom_lin": "only inside the linear program of a custom_vjp, which is transposed, never "
                  "evaluated (a custom_vjp has no forward mode); vmap of grad goes through "
                  "custom_vjp_call",
    "remat_lin": "only inside the linear program of a checkpoint (vmap of grad goes through "
                 "remat_call)",
    "native_loop": "made by the NumPy backend's lowering, after every transformation "
                   "(tests/test_native_loops.py)",
    **{p: _COLLECTIVE for p in ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index")},
    "rng_bit_generator": "JAX's batching rule is not a map: the whole batch's bits come from "
                         "the first key (tests/test_rng_bit_generator.py checks it against "
                         "JAX's values)",
    "check": "checkify's check: no outputs; its batching rule reduces the error to JAX's "
             "choice of element, not a map (tests/test_checkify.py)",
}



# --- coupled operands -------------------------------------------------------------------------

def _multiple_plus_frac(rng, shape, dtype):
    """(x, y) with x / y at least 0.15 away from an integer (rem, floor_divide: no jumps)."""
    y = values(rng, shape, dtype, Dom(0.5, 2.0, away0=True, ilo=-9, ihi=9))
    if np.dtype(dtype).kind in "iu":
        return values(rng, shape, dtype, Dom(ilo=-40, ihi=40)), y
    q = values(rng, shape, np.float64, Dom(-3.0, 3.0, frac="int"))
    return (q * y).astype(dtype), y


def _apart(rng, shape, dtype):
    """(x, y) at least 0.2 apart (max, min: no ties); integers may tie."""
    x = values(rng, shape, dtype)
    if np.dtype(dtype).kind in "biu":
        return x, values(rng, shape, dtype)
    d = values(rng, shape, dtype, Dom(0.2, 1.0, away0=True))
    return x, (x + d).astype(dtype)


def _comparands(rng, shape, dtype):
    """Operands that often tie, for comparisons."""
    dom = Dom(-2.0, 2.0, ilo=-2, ihi=2)
    x = values(rng, shape, dtype, dom)
    y = np.where(rng.random(shape) < 0.3, x, values(rng, shape, dtype, dom))
    return x, np.asarray(y).astype(dtype)


def _shifts(rng, shape, dtype):
    bits = np.dtype(dtype).itemsize * 8
    return values(rng, shape, dtype, Dom(ilo=-100, ihi=100)), \
        values(rng, shape, dtype, Dom(ilo=0, ihi=bits + 1))


# --- structured cases ----------------------------------------------------------------------------

def _with(fn, **params):
    return lambda *xs: fn(*xs, **params)


@st.composite
def select_n_cases(draw, dtype):
    shape = draw(SHAPES)
    wdt = draw(st.sampled_from([BOOL, I32]))
    n = draw(st.integers(1, 2 if wdt == BOOL else 3))
    wshape = draw(st.sampled_from([(), shape]))

    def make(rng):
        which = values(rng, wshape, wdt, Dom(ilo=0, ihi=n - 1)) if n > 1 else \
            np.zeros(wshape, wdt)
        return (which,) + tuple(values(rng, shape, dtype) for _ in range(n))
    return Case(lax.select_n, make, f"{n} cases, which {short_name(wdt)}{list(wshape)}")


@st.composite
def clamp_cases(draw, dtype):
    shape = draw(SHAPES)
    lo_shape, hi_shape = draw(st.sampled_from([(), shape])), draw(st.sampled_from([(), shape]))

    def make(rng):
        lo = values(rng, lo_shape, dtype, Dom(-1.0, -0.4, ilo=-5, ihi=-1))
        hi = values(rng, hi_shape, dtype, Dom(0.4, 1.0, ilo=1, ihi=5))
        if dtype.kind in "iu":
            return lo, values(rng, shape, dtype, Dom(ilo=-8, ihi=8)), hi
        x = np.where(rng.random(shape) < 0.5, values(rng, shape, dtype, Dom(-0.3, 0.3)),
                     values(rng, shape, dtype, Dom(1.1, 2.0, away0=True)))
        return lo, np.asarray(x).astype(dtype), hi
    return Case(lax.clamp, make, f"lo{list(lo_shape)} hi{list(hi_shape)}")


@st.composite
def convert_cases(draw, dtype):
    shape = draw(SHAPES)
    if dtype.kind in "fc":
        new = draw(st.sampled_from([F32, F64, C64, C128] +
                                   ([I32, BOOL] if draw(st.booleans()) else [])))
    else:
        new = draw(st.sampled_from([F32, I8, I32, BOOL]))
    weak = draw(st.booleans())
    return Case(_with(lax.convert_element_type, new_dtype=new, weak_type=weak),
                arrays((shape, dtype, ANY)), f"-> {new} weak={weak}")


@st.composite
def bitcast_cases(draw, dtype):
    """Bits seen as a dtype of the same width, a narrower one (a new last axis) or a wider
    one (the last axis, of the width ratio, consumed)."""
    new = draw(st.sampled_from([d for d in (F32, F64, I32, U8, I8) if d != dtype]))
    shape = draw(SHAPES)
    if new.itemsize > dtype.itemsize:
        shape = shape + (new.itemsize // dtype.itemsize,)
    return Case(_with(lax.bitcast_convert_type, new_dtype=new), arrays((shape, dtype, ANY)),
                f"-> {new}")


@st.composite
def rng_bit_generator_cases(draw, dtype):
    """A uint32[4] key; an output shape, unsigned dtype and algorithm."""
    shape = draw(SHAPES)
    out = draw(st.sampled_from([np.dtype(t) for t in ("uint8", "uint16", "uint32")]))
    alg = draw(st.sampled_from(list(lax.RandomAlgorithm)))

    def make(rng):
        return (rng.integers(0, 2**32, (4,), dtype=np.uint32),)
    return Case(_with(lax.rng_bit_generator, shape=shape, dtype=out, algorithm=alg), make,
                f"shape {shape} {out} {alg}")


@st.composite
def complex_cases(draw, dtype):
    shape = draw(SHAPES)
    return Case(lax.complex, arrays((shape, dtype, ANY), (shape, dtype, ANY)), "")


@st.composite
def reduce_precision_cases(draw, dtype):
    shape = draw(SHAPES)
    e, m = draw(st.sampled_from([(8, 7), (5, 10), (4, 3), (11, 20), (3, 0)]))
    return Case(_with(lax.reduce_precision, exponent_bits=e, mantissa_bits=m),
                arrays((shape, dtype, ANY)), f"e={e} m={m}")


@st.composite
def integer_pow_cases(draw, dtype):
    shape = draw(SHAPES)
    y = draw(st.integers(-3, 4) if dtype.kind in "fc" else st.integers(0, 4))
    return Case(_with(lax.integer_pow, y=y), arrays((shape, dtype, AWAY0)), f"y={y}")


@st.composite
def round_cases(draw, dtype):
    m = draw(st.sampled_from([0, 1]))
    return Case(_with(lax.round, rounding_method=m),
                arrays((draw(SHAPES), dtype, Dom(-3.0, 3.0, frac="half"))), f"method={m}")


@st.composite
def broadcast_in_dim_cases(draw, dtype):
    out = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    dims = sorted(draw(st.sets(st.integers(0, len(out) - 1), max_size=len(out)))) \
        if out else []
    xshape = tuple(draw(st.sampled_from([1, out[d]])) for d in dims)
    return Case(_with(lax.broadcast_in_dim, shape=out, broadcast_dimensions=tuple(dims)),
                arrays((xshape, dtype, ANY)), f"{list(xshape)} -> {list(out)} via {dims}")


@st.composite
def reshape_cases(draw, dtype):
    shape = draw(SHAPES)
    n = int(np.prod(shape))
    factors = [f for f in (2, 3, 2, 2) if n % f == 0]
    new, rest = [], n
    for f in factors:
        if rest % f == 0 and draw(st.booleans()):
            new.append(f)
            rest //= f
    new.append(rest)
    new = tuple(draw(st.permutations(new)))
    dims = tuple(draw(st.permutations(range(len(shape))))) if draw(st.booleans()) else None
    return Case(_with(lax.reshape, new_sizes=new, dimensions=dims),
                arrays((shape, dtype, ANY)), f"{list(shape)} -> {list(new)} dims={dims}")


@st.composite
def transpose_cases(draw, dtype):
    shape = draw(SHAPES1)
    perm = tuple(draw(st.permutations(range(len(shape)))))
    return Case(_with(lax.transpose, permutation=perm), arrays((shape, dtype, ANY)), str(perm))


@st.composite
def squeeze_cases(draw, dtype):
    shape = list(draw(SHAPES1))
    ones = draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    for d in ones:
        shape[d] = 1
    dims = tuple(d - len(shape) if draw(st.booleans()) else d for d in sorted(ones))
    return Case(_with(lax.squeeze, dimensions=dims), arrays((tuple(shape), dtype, ANY)),
                str(dims))


@st.composite
def expand_dims_cases(draw, dtype):
    shape = draw(SHAPES)
    nd = len(shape) + draw(st.integers(1, 2))
    dims = tuple(draw(st.permutations(range(nd)))[:nd - len(shape)])
    return Case(_with(lax.expand_dims, dimensions=dims), arrays((shape, dtype, ANY)), str(dims))


@st.composite
def rev_cases(draw, dtype):
    shape = draw(SHAPES1)
    dims = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    return Case(_with(lax.rev, dimensions=dims), arrays((shape, dtype, ANY)), str(dims))


@st.composite
def concatenate_cases(draw, dtype):
    shape = list(draw(SHAPES1))
    dim = draw(st.integers(0, len(shape) - 1))
    specs = []
    for _ in range(draw(st.integers(2, 3))):
        shape[dim] = draw(st.integers(1, 3))
        specs.append((tuple(shape), dtype, ANY))
    return Case(lambda *xs: lax.concatenate(xs, dim), arrays(*specs), f"dimension={dim}")


def pad_cases(batched_value):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        config = []
        for n in shape:
            it = draw(st.integers(0, 1))
            core = n + (n - 1) * it
            lo = draw(st.integers(-min(1, core - 1), 2))
            hi = draw(st.integers(-min(1, core - 1 - max(lo, 0) - max(-lo, 0)), 2)) \
                if core - 1 - abs(min(lo, 0)) > 0 else draw(st.integers(0, 2))
            config.append((lo, hi, it))
        config = tuple(config)
        return Case(_with(lax.pad, padding_config=config),
                    arrays((shape, dtype, ANY), ((), dtype, ANY)), str(config))
    return cases


@st.composite
def slice_cases(draw, dtype):
    shape = draw(SHAPES1)
    start, limit, strides = [], [], []
    for n in shape:
        s = draw(st.integers(0, n - 1))
        start.append(s)
        limit.append(draw(st.integers(s + 1, n)))
        strides.append(draw(st.integers(1, 2)))
    st_ = tuple(strides) if draw(st.booleans()) else None
    return Case(_with(lax.slice, start_indices=tuple(start), limit_indices=tuple(limit),
                      strides=st_), arrays((shape, dtype, ANY)), f"{start}:{limit}:{st_}")


def _starts(shape):
    return [((), I32, Dom(ilo=-2, ihi=n + 1)) for n in shape]


@st.composite
def dynamic_slice_cases(draw, dtype):
    shape = draw(SHAPES)
    sizes = tuple(draw(st.integers(1, n)) for n in shape)
    return Case(lambda x, *s: lax.dynamic_slice(x, s, sizes),
                arrays((shape, dtype, ANY), *_starts(shape)), f"sizes={sizes}")


@st.composite
def dynamic_update_slice_cases(draw, dtype):
    shape = draw(SHAPES)
    ushape = tuple(draw(st.integers(1, n)) for n in shape)
    return Case(lambda x, u, *s: lax.dynamic_update_slice(x, u, s),
                arrays((shape, dtype, ANY), (ushape, dtype, ANY), *_starts(shape)),
                f"update {list(ushape)}")


@st.composite
def iota_cases(draw, dtype):
    shape = draw(SHAPES1)
    dim = draw(st.integers(0, len(shape) - 1))
    # iota has no operands: the dummy one gives vmap something to map
    return Case(lambda dummy: lax.broadcasted_iota(dtype, shape, dim),
                arrays(((), F32, ANY)), f"{list(shape)} dimension={dim}")


@st.composite
def index_cases(draw, dtype, mode=None):
    """gather (mode None) or scatter: an operand, a static spec mixing static indices,
    slices, new axes and up to two integer index arrays of one shape."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    n_arr = draw(st.integers(0, min(2, rank)))
    if mode == "set":
        n_arr = min(n_arr, 1)       # set: unique targets, else which update wins is unspecified
    arr_dims = set(draw(st.permutations(range(rank)))[:n_arr])
    spec = []
    for d, n in enumerate(shape):
        if d in arr_dims:
            spec.append(("a", len([s for s in spec if type(s) is tuple and s[0] == "a"])))
        else:
            kind = draw(st.sampled_from(["all", "int", "slice"]))
            if kind == "int":
                spec.append(draw(st.integers(0, n - 1)))
            elif kind == "all":
                spec.append(("s", None, None, None))
            else:
                spec.append(("s", draw(st.integers(0, n - 1)), None,
                             draw(st.sampled_from([1, 2, -1]))))
    if draw(st.booleans()):
        spec.insert(draw(st.integers(0, len(spec))), None)
    spec = tuple(spec)
    idx_sizes = [shape[d] for d in sorted(arr_dims)]
    if mode == "set" and n_arr:
        ishape = (draw(st.integers(1, idx_sizes[0])),)
    else:
        ishape = draw(st.sampled_from([(), (2,), (3,), (2, 2)]))
    out_shape = indexed_shape(shape, spec, [ishape] * n_arr)
    # out-of-range indices too: gather clamps them, scatter drops their updates
    spread = {None: 2, "set": 0}.get(mode, 1)

    def make(rng):
        idx = []
        for n in idx_sizes:
            if mode == "set":
                idx.append((rng.permutation(n)[:ishape[0]] - rng.integers(0, 2) * n)
                           .astype(I32))
            else:
                idx.append(values(rng, ishape, I32, Dom(ilo=-n - spread, ihi=n - 1 + spread)))
        if mode in ("min", "max"):   # no ties between any two values
            both = values(rng, (int(np.prod(shape)) + int(np.prod(out_shape)),), dtype, DISTINCT)
            return (both[:int(np.prod(shape))].reshape(shape),
                    both[int(np.prod(shape)):].reshape(out_shape), *idx)
        dom = AWAY0 if mode == "mul" else ANY
        x = values(rng, shape, dtype, dom)
        if mode is None:
            return (x, *idx)
        return (x, values(rng, out_shape, dtype, dom), *idx)

    label = f"x{list(shape)} spec={spec} index{list(ishape)}"
    if mode is None:
        return Case(lambda x, *i: lax.index_gather(x, i, spec), make, label)
    return Case(lambda x, u, *i: lax.index_scatter(x, u, i, spec, mode), make, f"{mode} {label}")


def reduce_cases(fn, dom=ANY):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES1)
        axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
        return Case(_with(fn, axes=axes), arrays((shape, dtype, dom)), f"axes={axes}")
    return cases


def arg_cases(fn):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES1)
        axis = draw(st.integers(0, len(shape) - 1))
        idt = draw(st.sampled_from([I32, np.dtype("int64")]))
        return Case(_with(fn, axis=axis, index_dtype=idt),
                    arrays((shape, dtype, Dom(-2.0, 2.0, ilo=-2, ihi=2))), f"axis={axis}")
    return cases


def cum_cases(fn, dom=ANY):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES1)
        axis = draw(st.integers(0, len(shape) - 1))
        rev = draw(st.booleans())
        return Case(_with(fn, axis=axis, reverse=rev), arrays((shape, dtype, dom)),
                    f"axis={axis} reverse={rev}")
    return cases


@st.composite
def dot_general_cases(draw, dtype):
    nb, nc, nl, nr = (draw(st.integers(0, 1)) for _ in range(4))
    sizes = {k: [draw(st.integers(1, 3)) for _ in range(n)]
             for k, n in (("b", nb), ("c", nc), ("l", nl), ("r", nr))}
    lroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("l", i) for i in range(nl)]
    rroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("r", i) for i in range(nr)]
    lroles, rroles = draw(st.permutations(lroles)), draw(st.permutations(rroles))
    lshape = tuple(sizes[k][i] for k, i in lroles)
    rshape = tuple(sizes[k][i] for k, i in rroles)

    def pos(roles, kind, n):
        return tuple(roles.index((kind, i)) for i in range(n))
    dn = ((pos(lroles, "c", nc), pos(rroles, "c", nc)), (pos(lroles, "b", nb),
                                                         pos(rroles, "b", nb)))
    return Case(_with(lax.dot_general, dimension_numbers=dn),
                arrays((lshape, dtype, ANY), (rshape, dtype, ANY)),
                f"{list(lshape)} x {list(rshape)} dn={dn}")


@st.composite
def dot_general_preferred_cases(draw, dtype):
    """preferred_element_type wider than the operands (float32 -> float64)."""
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    return Case(_with(lax.dot_general, dimension_numbers=(((1,), (0,)), ((), ())),
                      preferred_element_type=F64),
                arrays(((m, k), dtype, ANY), ((k, n), dtype, ANY)), f"{m}x{k} @ {k}x{n} -> f64")


@st.composite
def sort_cases(draw, dtype):
    shape = draw(SHAPES1)
    n = draw(st.integers(1, 3))
    num_keys = draw(st.integers(1, min(2, n)))
    dim = draw(st.integers(0, len(shape) - 1))
    # distinct first keys: no ties, so the sorting permutation is locally constant
    specs = [(shape, dtype, DISTINCT)] + [(shape, dtype, ANY)] * (n - 1)
    single = n == 1 and draw(st.booleans())
    fn = (lambda x: lax.sort(x, dim)) if single else \
        (lambda *xs: lax.sort(xs, dim, True, num_keys))
    return Case(fn, arrays(*specs), f"{n} operands num_keys={num_keys} dimension={dim}")


@st.composite
def polygamma_cases(draw, dtype):
    shape = draw(SHAPES)
    mshape = draw(st.sampled_from([(), shape]))
    return Case(lax.polygamma,
                arrays((mshape, dtype, Dom(0.0, 3.0, integral=True)), (shape, dtype, POS)),
                f"m{list(mshape)}")


# call primitives: small bodies through each
@fnx.custom_jvp
def _sin_mul(x, y):
    return lax.mul(lax.sin(x), y)


@_sin_mul.defjvp
def _sin_mul_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _sin_mul(x, y), lax.add(lax.mul(lax.mul(lax.cos(x), tx), y),
                                   lax.mul(lax.sin(x), ty))


@fnx.custom_vjp
def _sin_mul_v(x, y):
    return lax.mul(lax.sin(x), y)


_sin_mul_v.defvjp(lambda x, y: (lax.mul(lax.sin(x), y), (x, y)),
                  lambda res, ct: (lax.mul(lax.mul(lax.cos(res[0]), res[1]), ct),
                                   lax.mul(lax.sin(res[0]), ct)))


@fnx.custom_batching.custom_vmap
def _sin_mul_b(x, y):
    return lax.mul(lax.sin(x), y)


@_sin_mul_b.def_vmap
def _sin_mul_b_rule(size, in_batched, x, y):
    # the batched form: the batch axis leads, an unbatched operand broadcasts against it
    return fnx.numpy.sin(x) * y, any(in_batched)


def call_cases(make_fn):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        return Case(make_fn(), arrays((shape, dtype, ANY), (shape, dtype, ANY)))
    return cases


def _body(x, y):
    return lax.add(lax.mul(lax.sin(x), y), lax.exp(lax.mul(x, y)))


def _linear_call(r, x):
    """r * x with its transpose given (r * ct): linear in x, a residual r."""
    from fnx.custom_derivatives import linear_call
    return linear_call(lambda res, v: lax.mul(res, v), lambda res, ct: lax.mul(res, ct), r, x)


@st.composite
def linear_call_cases(draw, dtype):
    shape = draw(SHAPES)
    r = (np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) * 0.5 + 1.0).astype(dtype)
    return Case(lambda x: _linear_call(r, x), arrays((shape, dtype, ANY)), "r = 1, 1.5, ...")


@st.composite
def remat_lin_cases(draw, dtype):
    """The linear map of a checkpoint: ``linearize`` records a remat_lin, which evaluating
    the linear map (here under vmap, or under check_grads' jvp and vjp) binds."""
    shape = draw(SHAPES)

    def fn(x, y, tx, ty):
        return fnx.linearize(fnx.checkpoint(_body), x, y)[1](tx, ty)
    return Case(fn, arrays(*[(shape, dtype, ANY)] * 4))


# --- the table ---------------------------------------------------------------------------------

def un(prim, dom=ANY, **kw):
    return elementwise(prim, dom, **kw)


def bi(prim, dom=ANY, dom2=None, **kw):
    return elementwise(prim, dom, dom2 or dom, **kw)


SPECIALS = Dom(-3.0, 3.0, specials=True)

RULES = [
    # --- unary elementwise ---
    un("neg", bdtypes=NUM), un("abs", AWAY0, bdtypes=NUM, gdtypes=FLOAT + CPLX),
    un("sign", AWAY0, bdtypes=NUM),
    un("floor", Dom(-3.0, 3.0, frac="int")), un("ceil", Dom(-3.0, 3.0, frac="int")),
    structured("round", round_cases),
    un("exp", gdtypes=FLOAT + CPLX), un("exp2", gdtypes=FLOAT + CPLX),
    un("expm1", gdtypes=FLOAT + CPLX),
    un("log", POS, gdtypes=FLOAT + CPLX), un("log1p", Dom(-0.5, 2.0), gdtypes=FLOAT + CPLX),
    un("log2", POS, gdtypes=FLOAT + CPLX), un("log10", POS, gdtypes=FLOAT + CPLX),
    un("sqrt", POS, gdtypes=FLOAT + CPLX), un("rsqrt", POS, gdtypes=FLOAT + CPLX),
    un("cbrt", AWAY0),
    un("square", bdtypes=NUM, gdtypes=FLOAT + CPLX), un("reciprocal", AWAY0, gdtypes=FLOAT + CPLX),
    un("sin", gdtypes=FLOAT + CPLX), un("cos", gdtypes=FLOAT + CPLX),
    un("tan", Dom(-1.2, 1.2, imag=0.3), gdtypes=FLOAT + CPLX),
    un("asin", UNIT, gdtypes=FLOAT + CPLX), un("acos", UNIT, gdtypes=FLOAT + CPLX),
    un("atan", gdtypes=FLOAT + CPLX),
    un("sinh", gdtypes=FLOAT + CPLX), un("cosh", gdtypes=FLOAT + CPLX),
    un("tanh", gdtypes=FLOAT + CPLX), un("asinh", gdtypes=FLOAT + CPLX),
    un("acosh", Dom(1.2, 3.0), gdtypes=FLOAT + CPLX), un("atanh", UNIT, gdtypes=FLOAT + CPLX),
    un("logistic"), un("erf"), un("erfc"), un("erf_inv", UNIT),
    un("lgamma", Dom(0.5, 4.0)), un("digamma", Dom(0.5, 4.0)),
    # the order m is integer-valued and held fixed (its derivative raises, as in JAX)
    structured("polygamma", polygamma_cases, nondiff=(0,)),
    un("is_finite", SPECIALS), un("isinf", SPECIALS), un("isnan", SPECIALS),
    un("not", fn=lax.bitwise_not, bdtypes=BITS),
    un("real", gdtypes=FLOAT + CPLX), un("imag", gdtypes=FLOAT + CPLX),
    un("conj", gdtypes=FLOAT + CPLX),
    un("stop_gradient", bdtypes=NUM),
    structured("integer_pow", integer_pow_cases, bdtypes=NUM, gdtypes=FLOAT + CPLX),
    # --- binary elementwise ---
    bi("add", bdtypes=NUM, gdtypes=FLOAT + CPLX), bi("sub", bdtypes=NUM, gdtypes=FLOAT + CPLX),
    bi("mul", bdtypes=NUM, gdtypes=FLOAT + CPLX),
    bi("div", ANY, AWAY0, bdtypes=NUM, gdtypes=FLOAT + CPLX),
    coupled("rem", _multiple_plus_frac, bdtypes=NUM),
    coupled("floor_divide", _multiple_plus_frac, bdtypes=NUM),
    bi("pow", POS, Dom(-2.0, 2.0, ilo=0, ihi=3), bdtypes=NUM, gdtypes=FLOAT + CPLX),
    coupled("max", _apart, bdtypes=NUM), coupled("min", _apart, bdtypes=NUM),
    bi("atan2", ANY, Dom(0.3, 2.0)), bi("hypot", AWAY0), bi("copysign", AWAY0),
    bi("nextafter"), bi("logaddexp"),
    *[coupled(p, _comparands, bdtypes=(F32, I32)) for p in ("eq", "ne", "lt", "le", "gt", "ge")],
    bi("and", fn=lax.bitwise_and, bdtypes=BITS), bi("or", fn=lax.bitwise_or, bdtypes=BITS),
    bi("xor", fn=lax.bitwise_xor, bdtypes=BITS),
    *[coupled(p, _shifts, bdtypes=INTS) for p in ("shift_left", "shift_right_arithmetic",
                                                   "shift_right_logical")],
    # --- select, clamp, convert ---
    structured("select_n", select_n_cases, bdtypes=ALLDT, gdtypes=FLOAT + CPLX),
    structured("clamp", clamp_cases, bdtypes=NUM),
    structured("convert_element_type", convert_cases, bdtypes=NUM, gdtypes=FLOAT + CPLX),
    structured("bitcast_convert_type", bitcast_cases, bdtypes=NUM + (U8,), gdtypes=()),
    structured("reduce_precision", reduce_precision_cases, bdtypes=FLOAT, gdtypes=()),
    structured("rng_bit_generator", rng_bit_generator_cases, bdtypes=(np.dtype("uint32"),),
               gdtypes=()),
    structured("complex", complex_cases, bdtypes=FLOAT, gdtypes=FLOAT),
    # --- shapes ---
    structured("broadcast_in_dim", broadcast_in_dim_cases, bdtypes=ALLDT),
    structured("reshape", reshape_cases, bdtypes=ALLDT),
    structured("transpose", transpose_cases, bdtypes=ALLDT),
    structured("squeeze", squeeze_cases, bdtypes=ALLDT),
    structured("expand_dims", expand_dims_cases, bdtypes=ALLDT),
    structured("rev", rev_cases, bdtypes=ALLDT),
    structured("concatenate", concatenate_cases, bdtypes=ALLDT),
    structured("pad", pad_cases(False), bdtypes=ALLDT, unbatched=(1,)),
    structured("pad", pad_cases(True), bdtypes=ALLDT, variant="batched padding value"),
    structured("slice", slice_cases, bdtypes=ALLDT),
    structured("dynamic_slice", dynamic_slice_cases, bdtypes=ALLDT),
    structured("dynamic_update_slice", dynamic_update_slice_cases, bdtypes=ALLDT),
    structured("iota", iota_cases, bdtypes=(F32, I32)),
    # --- indexing ---
    structured("gather", index_cases, bdtypes=ALLDT),
    *[structured("scatter", lambda d, m=m: index_cases(d, m), variant=m,
                 bdtypes=(F32, F64, I32, C64) if m in ("add", "mul") else
                 (F32, F64, I32, BOOL, C64) if m == "set" else (F32, F64, I32, BOOL))
      for m in ("set", "add", "mul", "min", "max")],
    # --- reductions ---
    structured("reduce_sum", reduce_cases(lax.reduce_sum), bdtypes=NUM + (C64,),
               gdtypes=FLOAT + CPLX),
    structured("reduce_prod", reduce_cases(lax.reduce_prod, AWAY0), bdtypes=NUM,
               gdtypes=FLOAT + CPLX),
    structured("reduce_max", reduce_cases(lax.reduce_max, DISTINCT), bdtypes=NUM),
    structured("reduce_min", reduce_cases(lax.reduce_min, DISTINCT), bdtypes=NUM),
    structured("reduce_and", reduce_cases(lax.reduce_and), bdtypes=BITS),
    structured("reduce_or", reduce_cases(lax.reduce_or), bdtypes=BITS),
    structured("argmax", arg_cases(lax.argmax), bdtypes=NUM),
    structured("argmin", arg_cases(lax.argmin), bdtypes=NUM),
    structured("cumsum", cum_cases(lax.cumsum), bdtypes=NUM + (C64,), gdtypes=FLOAT + CPLX),
    structured("cumprod", cum_cases(lax.cumprod, AWAY0), bdtypes=NUM),
    structured("cummax", cum_cases(lax.cummax, DISTINCT), bdtypes=NUM),
    structured("cummin", cum_cases(lax.cummin, DISTINCT), bdtypes=NUM),
    # --- contraction, sorting ---
    structured("dot_general", dot_general_cases, bdtypes=NUM + (C64,), gdtypes=FLOAT + CPLX),
    structured("dot_general", dot_general_preferred_cases, bdtypes=(F32,), gdtypes=(F32,),
               variant="preferred_element_type"),
    structured("sort", sort_cases, bdtypes=NUM),
    # --- call primitives, through small bodies ---
    structured("jit", call_cases(lambda: fnx.jit(_body))),
    structured("custom_jvp_call", call_cases(lambda: _sin_mul)),
    structured("custom_vjp_call", call_cases(lambda: _sin_mul_v), modes=("rev",),
               why="a custom_vjp defines no forward mode"),
    structured("remat_call", call_cases(lambda: fnx.checkpoint(_body))),
    structured("custom_vmap_call", call_cases(lambda: _sin_mul_b), modes=("fwd",),
               why="a custom_vmap defines no reverse mode (as in JAX: put a custom_vjp "
                   "around it)"),
    structured("custom_vmap_call", call_cases(lambda: fnx.custom_batching.sequential_vmap(
        _body)), modes=("fwd",), variant="sequential_vmap",
        why="a custom_vmap defines no reverse mode"),
    structured("remat_lin", remat_lin_cases),
    structured("linear_call", linear_call_cases),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_every_rule_of_every_primitive(rule):
    """check_op: shape rule, jit, vmap against a loop, jvp against finite differences,
    vjp against jvp, GPU kernel and ONNX lowering where the primitive has them."""
    run_rule(rule, NO_GRAD, NO_BATCH)


def _sweeps():
    """This file and every other ``tests/test_rules_*.py``: (RULES, NO_GRAD, NO_BATCH)."""
    here = pathlib.Path(__file__)
    out = [(RULES, NO_GRAD, NO_BATCH)]
    for path in sorted(here.parent.glob("test_rules_*.py")):
        if path.name != here.name:
            mod = importlib.import_module(path.stem)
            out.append((mod.RULES, getattr(mod, "NO_GRAD", {}), getattr(mod, "NO_BATCH", {})))
    return out


def test_every_primitive_has_a_line():
    sweeps = _sweeps()
    rules = [r for rs, _, _ in sweeps for r in rs]
    no_grad = {p: why for _, ng, _ in sweeps for p, why in ng.items()}
    no_batch = {p: why for _, _, nb in sweeps for p, why in nb.items()}
    lines = {r.prim for r in rules}
    missing = sorted(BUILTIN - lines - set(no_batch))
    assert not missing, f"primitives without a line in any RULES: {missing}"
    stale = sorted((lines | set(no_batch) | set(no_grad)) - BUILTIN)
    assert not stale, f"lines or reasons for primitives that are not registered: {stale}"
    graded = {r.prim for r in rules if r.prim not in no_grad and r.gdtypes}
    unreasoned = sorted(BUILTIN - graded - set(no_grad))
    assert not unreasoned, f"primitives neither gradient-checked nor in NO_GRAD: {unreasoned}"
    both = sorted(graded & set(no_grad))
    assert not both, f"primitives gradient-checked and in NO_GRAD: {both}"
    for r in rules:
        assert r.order == 2 and r.modes == ("fwd", "rev") or r.why, \
            f"{r.id}: checked to order {r.order} in {r.modes} without a reason"


def _dtypes_of(tree):
    return [np.dtype(x.dtype) for x in fnx.tree_util.tree_leaves(tree)]


def _wide_lines():
    """The lines of every sweep that draw 64-bit operands, with their sweep's NO_BATCH, and
    the 64-bit dtype (float64 or complex128)."""
    out = []
    for rules, no_grad, no_batch in _sweeps():
        for r in rules:
            dts = r.bdtypes + (r.gdtypes if r.prim not in no_grad else ())
            wide = [d for d in (F64, C128) if d in dts]
            if wide:
                out.append(pytest.param(r, no_batch, wide[0], id=r.id))
    return out


@pytest.mark.parametrize("rule,no_batch,dtype", _wide_lines())
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_default_mode_narrows_alike_in_every_transform(rule, no_batch, dtype, data):
    """With jax_enable_x64 off (the default), float64/complex128 NumPy operands narrow to
    32 bits as in JAX: eager, jit, eval_shape and vmap give the same 32-bit result dtypes
    (JAX's eval_shape, make_jaxpr and jit narrow exactly as eager does), for every line of
    every sweep."""
    case = data.draw(rule.cases(dtype), label="case")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    ops = case.example(np.random.default_rng(seed))
    batch = [np.stack([o, o]) for o in ops]
    with fnx.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = _dtypes_of(case.fn(*[fnx.numpy.asarray(o) for o in ops]))
        assert all(d.itemsize <= 4 or d.kind == "c" and d.itemsize <= 8 for d in eager), eager
        assert _dtypes_of(fnx.jit(case.fn)(*ops)) == eager, "jit"
        assert _dtypes_of(fnx.eval_shape(case.fn, *ops)) == eager, "eval_shape"
        if rule.prim not in no_batch and not rule.unbatched:
            assert _dtypes_of(fnx.vmap(case.fn)(*batch)) == eager, "vmap"
