"""ONNX export (``fnx.onnx``): every lowering against its primitive's NumPy impl, and
whole functions against fnx eager.

Per primitive and dtype, ``CASES`` makes inputs (random values mixed with edge
cases: NaN, infinities, signed zeros, ties, integer extremes, out-of-range
indices) and params; ``lower_primitive`` builds a one-equation model, which runs
on onnxruntime (CPU) and must give the impl's result: the same dtype and shape,
integers and bools exactly, floats within a few ulp with NaNs in the same places
(and, unless noted, the same sign on zeros). A few float64 operators have no
onnxruntime kernel (``fnx.onnx.lowerings.ONNXRUNTIME_GAPS``); those models run on
ONNX's reference evaluator instead.
"""
from __future__ import annotations

import math
import subprocess
import sys
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import fnx  # noqa: E402
import fnx.numpy as fnp  # noqa: E402
import fnx.onnx as fonnx  # noqa: E402
from fnx import lax  # noqa: E402
from fnx.core.primitive import REGISTRY, Primitive, ShapeDtypeStruct  # noqa: E402
from fnx.errors import MissingRuleError  # noqa: E402
from fnx.onnx.lowerings import ONNXRUNTIME_GAPS  # noqa: E402

F32, F64, I32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)
BOOL = np.dtype(np.bool_)
I8, I16, I64 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int64)
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))

# Primitives without a lowering, as fnx/onnx/lowerings.py documents.
LEFT_OUT = {"copysign", "nextafter", "erfc", "erf_inv", "lgamma", "digamma", "polygamma",
            # raw bits: ONNX has no bitcast; complex results: the exporter rejects them
            "bitcast_convert_type", "reduce_precision", "complex",
            "custom_lin", "remat_lin",
            # not lowered: the pooling derivatives (export the primal function), the
            # factorizations (no ONNX operators) and the random bits
            "select_and_gather_add", "select_and_scatter_add", "cholesky", "triangular_solve",
            "linear_solve",
            "lu", "qr", "eigh", "svd", "threefry2x32", "random_gamma", "rng_bit_generator",
            # complex operands or results, which the exporter rejects
            "fft",
            # Python callbacks: an ONNX graph cannot call back into Python
            "debug_callback", "pure_callback", "io_callback",
            # checkify's check: a graph cannot raise; export the checkified function
            "check",
            # fnx.scipy's special functions and sqrtm: NumPy impls in float64 (series,
            # continued fractions, quadrature, an eigendecomposition) with no ONNX operators
            "erfcx", "i0e", "i1e", "zeta", "zeta_grad_s", "gammainc", "gammaincc",
            "gammainc_grad_a", "betainc", "betaln", "expn", "expi", "spence", "dawsn",
            "bessel_jn", "sici", "fresnel", "hyp1f1", "hyp1f1_grad_a", "hyp1f1_grad_b",
            "owens_t", "wofz", "sqrtm", "sqrt_sylvester", "hyp2f1",
            # made by the NumPy backend's lowering (compiled C++ loops), never exported
            "native_loop",
            # collectives over named axes: an ONNX graph is one process, with no group
            "psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all",
            "axis_index"}
# Call primitives: inlined by the exporter, tested through export below.
CALLS = {"jit", "custom_jvp_call", "custom_vjp_call", "remat_call", "custom_vmap_call",
         "linear_call"}


# --- input makers ---------------------------------------------------------------------------

FLOAT_EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.5, -2.5, 1.0, -1.0, 2.0]


def floats(rng, dtype, shape, edges=True, lo=-6.0, hi=6.0):
    """Signed values with magnitudes e**lo .. e**hi, a third of them edge cases."""
    n = math.prod(shape)
    x = np.exp(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    if edges and n >= 3:
        k = min(len(FLOAT_EDGES), n // 3)
        x[rng.choice(n, k, replace=False)] = rng.choice(FLOAT_EDGES, k, replace=False)
    return x.astype(dtype).reshape(shape)


def ints(rng, dtype, shape, small=5):
    """Mostly small values (so quotients, shifts and powers are interesting), some drawn
    from the whole range, and the extremes."""
    n = math.prod(shape)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -small), min(int(info.max), small)
    x = rng.integers(lo, hi, n, endpoint=True).astype(dtype)
    wide = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    x = np.where(rng.random(n) < 0.3, wide, x)
    if n >= 4:
        x[rng.choice(n, 2, replace=False)] = [info.min, info.max]
    return x.reshape(shape)


def values(rng, dtype, shape, **kw):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return ints(rng, dtype, shape, **{k: v for k, v in kw.items() if k == "small"})
    return floats(rng, dtype, shape, **{k: v for k, v in kw.items() if k != "small"})


# --- the cases: name -> (dtypes, maker(rng, dtype) -> [(args, params), ...]) ---------------

def unary(dtypes_, **kw):
    return dtypes_, lambda rng, dt: [([values(rng, dt, (4, 9), **kw)], {}),
                                     ([values(rng, dt, (), **kw)], {})]


def binary(dtypes_, **kw):
    def make(rng, dt):
        x, y = values(rng, dt, (6, 8), **kw), values(rng, dt, (6, 8), **kw)
        if dt.kind == "f":          # ties and equal infinities
            y.flat[:6] = x.flat[:6]
        return [([x, y], {}),
                ([values(rng, dt, (), **kw), y], {}),     # a rank-0 operand broadcasts
                ([x, values(rng, dt, (), **kw)], {})]
    return dtypes_, make


def shifts(rng, dt):
    bits = dt.itemsize * 8
    x = ints(rng, dt, (5, 8))
    s = rng.integers(-3 if dt.kind == "i" else 0, bits + 3, (5, 8)).astype(dt)
    return [([x, s], {}), ([ints(rng, dt, ()), s], {}), ([x, np.asarray(bits - 1, dt)], {})]


def int_pow(rng, dt):
    x = ints(rng, dt, (4, 10), small=4)
    y = rng.integers(-3 if dt.kind == "i" else 0, 40, (4, 10)).astype(dt)
    y.flat[:3] = [0, 1, np.iinfo(dt).max]
    return [([x, y], {}), ([x, np.asarray(3, dt)], {})]


def float_pow(rng, dt):
    x = np.abs(floats(rng, dt, (4, 10), hi=3)) * rng.choice([-1, 1], (4, 10))
    y = np.round(floats(rng, dt, (4, 10), edges=False, lo=-3, hi=1.5) * 4) / 4
    y.flat[:4] = [0.0, np.nan, 1 / 3, -1.0]
    x.flat[:4] = [np.nan, 1.0, -8.0, 0.0]
    return [([x.astype(dt), y.astype(dt)], {})]


def integer_pow(rng, dt):
    x = values(rng, dt, (3, 7), small=3) if dt.kind in "iu" else floats(rng, dt, (3, 7), hi=3)
    return [([x], {"y": y}) for y in (0, 1, 2, 3, 5, 13, -1, -2, -3)]


def rounding(rng, dt):
    x = floats(rng, dt, (4, 9), hi=3)
    x.flat[:8] = [0.5, -0.5, 1.5, 2.5, -2.5, -0.3, 0.49999997, 3.5]
    return [([x], {"rounding_method": 0}), ([x], {"rounding_method": 1})]


def select_n(rng, dt):
    cases = [values(rng, dt, (3, 6)) for _ in range(4)]
    which_b = rng.random((3, 6)) < 0.5
    which_i = rng.integers(-2, 6, (3, 6)).astype(np.int32)
    return [([which_b, *cases[:2]], {}), ([np.asarray(True), *cases[:2]], {}),
            ([which_i, *cases], {}), ([np.asarray(2, np.int32), *cases[:3]], {}),
            ([which_i, cases[0]], {})]


def clamp(rng, dt):
    x = values(rng, dt, (4, 7))
    lo, hi = values(rng, dt, (4, 7)), values(rng, dt, (4, 7))
    return [([np.asarray(-1, dt), x, np.asarray(2, dt)], {}), ([lo, x, hi], {}),
            ([lo, x, np.asarray(0, dt)], {})]


CONVERSIONS = {F32: [I32, F64, BOOL, U8, F32], F64: [F32, I64, BOOL], I32: [F32, F64, U8, BOOL,
                                                                               I8, I64],
               BOOL: [F32, I32, U8], U8: [I32, F32, I8]}


def convert(rng, dt):
    if dt.kind == "f":   # in range of every target (out-of-range float -> int is undefined)
        x = floats(rng, dt, (5, 8), hi=4)
        x[~np.isfinite(x)] = 7.0
        x.flat[:4] = [-0.0, 0.0, 2.7, -2.7]
        nan_to_bool = ([np.asarray([np.nan, -0.0, np.inf], dt)], {"new_dtype": BOOL})
        return [([x], {"new_dtype": d}) for d in CONVERSIONS[dt]] + [nan_to_bool]
    return [([values(rng, dt, (5, 8))], {"new_dtype": d}) for d in CONVERSIONS[dt]]


def shape_ops(name):
    def make(rng, dt):
        x = values(rng, dt, (2, 3, 4))
        return {
            "broadcast_in_dim": [([x], dict(shape=(5, 2, 3, 4), broadcast_dimensions=(1, 2, 3))),
                                 ([values(rng, dt, (3, 1))], dict(shape=(2, 3, 4),
                                                                  broadcast_dimensions=(1, 2))),
                                 ([values(rng, dt, ())], dict(shape=(2, 2),
                                                              broadcast_dimensions=()))],
            "reshape": [([x], dict(new_sizes=(4, 6), dimensions=None)),
                        ([x], dict(new_sizes=(6, 4), dimensions=(2, 0, 1))),
                        ([values(rng, dt, (0, 3))], dict(new_sizes=(3, 0), dimensions=None))],
            "transpose": [([x], dict(permutation=(2, 0, 1)))],
            "squeeze": [([values(rng, dt, (1, 3, 1))], dict(dimensions=(0, -1)))],
            "expand_dims": [([x], dict(dimensions=(0, 4))), ([x], dict(dimensions=(-1,)))],
            "rev": [([x], dict(dimensions=(0, 2))), ([values(rng, dt, (0, 3))],
                                                    dict(dimensions=(0, 1)))],
            "concatenate": [([x, values(rng, dt, (2, 1, 4)), values(rng, dt, (2, 2, 4))],
                             dict(dimension=1))],
            "slice": [([x], dict(start_indices=(0, 1, 1), limit_indices=(2, 3, 4),
                                 strides=(1, 1, 2))),
                      ([x], dict(start_indices=(1, 0, 3), limit_indices=(1, 3, 4),
                                 strides=None))],
            "pad": [([x, values(rng, dt, ())], dict(padding_config=((1, 2, 0), (0, 0, 0),
                                                                    (2, 1, 0)))),
                    ([x, values(rng, dt, ())], dict(padding_config=((0, 1, 1), (1, 0, 2),
                                                                    (0, 0, 3)))),
                    ([x, values(rng, dt, ())], dict(padding_config=((-1, 1, 0), (1, -2, 1),
                                                                    (-2, -1, 2)))),
                    ([values(rng, dt, (0, 1)), values(rng, dt, ())],
                     dict(padding_config=((1, 1, 2), (0, 0, 4))))],
        }[name]
    return make


def dynamic_slices(name):
    def make(rng, dt):
        x = values(rng, dt, (5, 6))
        out = []
        for starts in [(1, 2), (-3, 5), (4, -1), (0, 100)]:
            s = [np.asarray(v, np.int32) for v in starts]
            if name == "dynamic_slice":
                out.append(([x, *s], dict(slice_sizes=(2, 3))))
            else:
                out.append(([x, values(rng, dt, (2, 3)), *s], {}))
        big = [np.asarray(2**63 + 5, np.uint64), np.asarray(1, np.int8)]
        if name == "dynamic_slice":
            out.append(([x, *big], dict(slice_sizes=(2, 3))))
        else:
            out.append(([x, values(rng, dt, (2, 3)), *big], {}))
        return out
    return make


def iota(rng, dt):
    return [([], dict(dtype=dt, shape=(3, 5), dimension=1)),
            ([], dict(dtype=dt, shape=(7,), dimension=0))]


def reductions(rng, dt):
    x = values(rng, dt, (3, 4, 5))
    return [([x], dict(axes=(1,))), ([x], dict(axes=(0, 2))), ([x], dict(axes=(0, 1, 2))),
            ([values(rng, dt, (3, 0))], dict(axes=(1,))), ([x], dict(axes=()))]


def arith_reductions(rng, dt):
    if dt.kind == "f":     # finite data: the bound on rounding is relative to sum(|x|)
        x = floats(rng, dt, (3, 4, 5), edges=False)
    else:
        x = ints(rng, dt, (3, 4, 5), small=3)
    return [([x], dict(axes=(1,))), ([x], dict(axes=(0, 2))),
            ([values(rng, dt, (3, 0))], dict(axes=(1,)))]


def arg_reductions(rng, dt):
    x = values(rng, dt, (4, 6), small=2)
    if dt.kind == "f":
        x[0] = [1, np.nan, 3, np.nan, 3, 0]         # the first NaN wins
        x[1] = [2, 5, 5, -1, -1, 2]                 # ties: the first index
        x[2] = [-0.0, 0.0, -np.inf, -np.inf, np.inf, np.inf]
    return [([x], dict(axes=(1,), index_dtype=I32)), ([x], dict(axes=(0,), index_dtype=I64))]


def cumulative(rng, dt):
    if dt.kind == "f":
        x = floats(rng, dt, (3, 9), edges=False, lo=-1, hi=1)
        x[0, 3] = np.nan
        x[1, 5] = -np.inf
    else:
        x = values(rng, dt, (3, 9), small=3)
    return [([x], dict(axis=1, reverse=False)), ([x], dict(axis=1, reverse=True)),
            ([x], dict(axis=0, reverse=False))]


def dot_general(rng, dt):
    def v(*shape):
        if dt.kind == "f":
            return floats(rng, dt, shape, edges=False, lo=-2, hi=2)
        return values(rng, dt, shape, small=3)
    cases = [
        ([v(3, 4), v(4, 5)], (((1,), (0,)), ((), ()))),
        ([v(2, 3, 4), v(2, 4, 5)], (((2,), (1,)), ((0,), (0,)))),
        ([v(4), v(4)], (((0,), (0,)), ((), ()))),
        ([v(3), v(4)], (((), ()), ((), ()))),
        ([v(4, 3, 2), v(2, 5, 4)], (((0, 2), (2, 0)), ((), ()))),
        ([v(2, 1, 3), v(3, 1, 2)], (((1,), (1,)), ((0,), (2,)))),
    ]
    out = [(args, dict(dimension_numbers=dn, preferred_element_type=None)) for args, dn in cases]
    if dt.kind in "iu":
        out.append((cases[0][0], dict(dimension_numbers=cases[0][1], preferred_element_type=F32)))
        out.append((cases[1][0], dict(dimension_numbers=cases[1][1], preferred_element_type=I64)))
    return out


def sort(rng, dt):
    x = values(rng, dt, (3, 12), small=2)
    if dt.kind == "f":
        x[0] = [3, np.nan, 1, np.inf, 0, np.nan, -np.inf, -0.0, 0.0, -0.0, 1, np.inf]
    payload = np.arange(36, dtype=np.int32).reshape(3, 12)
    key2 = ints(rng, I32, (3, 12), small=1)
    return [([x], dict(dimension=1, is_stable=True, num_keys=1)),
            ([x], dict(dimension=0, is_stable=True, num_keys=1)),
            ([x, payload], dict(dimension=1, is_stable=True, num_keys=1)),
            ([x, key2, payload], dict(dimension=1, is_stable=False, num_keys=2)),
            ([key2, x, payload], dict(dimension=1, is_stable=True, num_keys=2))]


GATHER_SPECS = [  # (operand shape, spec, index shapes)
    ((5, 6), (("a", 0), ("s", 0, 6, 2)), [(4,)]),
    ((5, 6), (("s", 1, 4, 1), ("a", 0)), [(2, 3)]),
    ((4, 5, 6), (("a", 0), ("s", 0, 5, 1), ("a", 1)), [(3,), (2, 1)]),
    ((4, 5), (None, 2, ("s", 4, None, -1)), []),
    ((4, 5, 6), (1, ("a", 0), ("s", 0, 6, 3)), [(2, 2)]),
    ((4, 5), (("a", 0), ("a", 1)), [(3,), (3,)]),
    ((), (None, None), []),
]


def gather(rng, dt):
    out = []
    for shape, spec, index_shapes in GATHER_SPECS:
        x = values(rng, dt, shape)
        dims = [it for it in spec if it is not None]
        idx = []
        for k, ishape in enumerate(index_shapes):
            d = next(i for i, it in enumerate(dims) if it == ("a", k))
            n = shape[d]
            # in range, negative (wrapped once), and out of range (clamped)
            i = rng.integers(-n - 2, n + 2, ishape).astype(np.int32 if k % 2 == 0 else np.int64)
            idx.append(i)
        out.append(([x, *idx], dict(spec=spec)))
    x = values(rng, dt, (5, 6))
    out.append(([x, np.asarray([0, 4, 200, 7], np.uint8)], dict(spec=(("a", 0), ("s", 0, 6, 1)))))
    return out


def scatter(rng, dt):
    from fnx.lax.indexing import indexed_shape
    out = []
    for shape, spec, index_shapes in GATHER_SPECS:
        dims = [it for it in spec if it is not None]
        idx = []
        for k, ishape in enumerate(index_shapes):
            d = next(i for i, it in enumerate(dims) if it == ("a", k))
            idx.append(rng.integers(-shape[d] - 2, shape[d] + 2, ishape).astype(np.int32))
        upd_shape = indexed_shape(shape, spec, [i.shape for i in idx])
        x = values(rng, dt, shape, small=3)
        upd = values(rng, dt, upd_shape, small=3)
        for mode in ("set", "add", "mul", "min", "max"):
            out.append(([x, upd, *idx], dict(spec=spec, mode=mode)))
    return out


def log_cumulative(rng, dt):
    """Values far apart (logaddexp of e**+-50 magnitudes) with infinities and a NaN."""
    x = floats(rng, dt, (3, 40), edges=False, lo=-1, hi=4)
    x[0, 3], x[1, 5], x[1, 9], x[2, :4] = np.inf, -np.inf, np.nan, -np.inf
    return [([x], dict(axis=1, reverse=False)), ([x], dict(axis=1, reverse=True)),
            ([x], dict(axis=0, reverse=False)), ([x[:, :1]], dict(axis=-1, reverse=True))]


def top_k(rng, dt):
    x = values(rng, dt, (3, 12), small=2)
    if dt.kind == "f":
        x[0] = [3, np.nan, 1, np.inf, 0, np.nan, -np.inf, -0.0, 0.0, -0.0, 1, np.inf]
    return [([x], dict(k=k)) for k in (0, 1, 5, 12)] + [([x[0]], dict(k=4))]


def _conv_params(lhs_shape, rhs_shape, dn=None, strides=None, padding=None, ldil=None,
                 rdil=None, groups=1, batch_groups=1, pet=None):
    from fnx.lax.convolution import conv_dimension_numbers
    nsp = len(lhs_shape) - 2
    return dict(window_strides=strides or (1,) * nsp, padding=padding or ((0, 0),) * nsp,
                lhs_dilation=ldil or (1,) * nsp, rhs_dilation=rdil or (1,) * nsp,
                dimension_numbers=conv_dimension_numbers(lhs_shape, rhs_shape, dn),
                feature_group_count=groups, batch_group_count=batch_groups,
                preferred_element_type=pet)


CONVS = [  # (lhs shape, rhs shape, params)
    ((2, 3, 7, 6), (4, 3, 3, 2), dict(strides=(2, 1), padding=((1, 2), (0, 1)))),
    ((2, 4, 7, 6), (6, 2, 3, 2), dict(groups=2, padding=((1, -1), (2, 0)), ldil=(2, 1),
                                      rdil=(1, 2), strides=(2, 1))),
    ((2, 7, 6, 4), (3, 2, 4, 5), dict(dn=("NHWC", "HWIO", "NHWC"), padding=((1, 1), (1, 1)))),
    ((2, 6, 5, 4), (2, 3, 4, 5), dict(dn=("NWHC", "HWIO", "NCHW"), rdil=(2, 1))),
    ((4, 3, 9), (6, 3, 2), dict(batch_groups=2, strides=(3,))),
    ((3, 5), (4, 5), {}),                                          # no spatial dims
    ((1, 2, 3, 4, 5), (2, 2, 2, 2, 2), dict(padding=((1, 0), (0, 1), (1, 1)))),  # 3-D
    ((2, 3, 2), (4, 3, 5), dict(padding=((0, 0),))),               # empty output
]


def convs(rng, dt):
    out = []
    for ls, rs, p in CONVS:
        # float64 runs on ONNX's reference evaluator, whose Conv dilates the kernel with
        # zeros (0 * inf = NaN): edge values for float32 (onnxruntime) only
        lhs = floats(rng, dt, ls, edges=dt == F32, lo=-2, hi=2)
        rhs = floats(rng, dt, rs, edges=False, lo=-2, hi=1)
        out.append(([lhs, rhs], _conv_params(ls, rs, **p)))
    return out


POOLS = [  # (shape, window, strides, padding, base dilation, window dilation)
    ((2, 5, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (0, 0), (0, 0)), None, None),
    ((2, 3, 7, 6), (1, 1, 3, 3), (1, 1, 1, 2), ((0, 0), (0, 0), (1, 1), (1, -1)), None,
     (1, 1, 2, 1)),
    ((9, 4), (3, 2), (2, 1), ((2, 2), (0, 0)), (1, 2), None),      # base dilation
    ((3, 4, 2, 5, 3), (2, 2, 2, 2, 1), (1, 1, 1, 2, 1), None, None, None),   # 4 active dims
    ((4, 6), (1, 1), (1, 1), ((1, 0), (0, 2)), None, None),        # padding only
    ((3, 2), (4, 1), (1, 1), None, None, None),                    # empty output
]


def pools(rng, dt):
    out = []
    for shape, w, s, pad, bd, wd in POOLS:
        nd = len(shape)
        x = values(rng, dt, shape, small=3)
        if dt.kind == "f" and x.size > 6:
            x.flat[:6] = [-0.0, -0.0, -0.0, -0.0, 0.0, -np.inf]
        out.append(([x], dict(window_dimensions=w, window_strides=s,
                              padding=pad or ((0, 0),) * nd, base_dilation=bd or (1,) * nd,
                              window_dilation=wd or (1,) * nd)))
    return out


def _traced(name, fun, *args):
    """(operands, params) of the first ``name`` equation of ``fun``'s IR on ``args`` (the
    equations before it run on their impls), for primitives whose params hold IRs."""
    from fnx.core.ir import Literal
    ir = fnx.make_ir(fun)(*args)
    env = dict(zip(ir.constvars, ir.consts))
    env.update(zip(ir.invars, args))
    for e in ir.eqns:
        ins = [np.asarray(a.value, a.aval.dtype) if type(a) is Literal else np.asarray(env[a])
               for a in e.inputs]
        if e.prim.name == name:
            return ins, dict(e.params)
        outs = e.prim.impl(*ins, **e.params)
        env.update(zip(e.outputs, outs if e.prim.multiple_results else [outs]))
    raise AssertionError(f"no {name} equation")


def conds(rng, dt):
    x, y = values(rng, dt, (3, 4), small=3), values(rng, dt, (4,), small=3)
    two = lambda p, x, y: lax.cond(p, lambda x, y: (x * 2 + y, y), lambda x, y: (x - y, -y),  # noqa: E731
                                   x, y)
    three = lambda i, x, y: lax.switch(i, [lambda x, y: x + y, lambda x, y: x * x,  # noqa: E731
                                           lambda x, y: fnp.sum(x, 0) * y + x], x, y)
    out = [_traced("cond", two, np.bool_(p), x, y) for p in (True, False)]
    out += [_traced("cond", three, np.int32(i), x, y) for i in (-2, 0, 1, 2, 7)]
    out.append(_traced("cond", three, np.uint64(2 ** 64 - 1), x, y))   # clamps to the last
    return out


def scans(rng, dt):
    xs, c0 = values(rng, dt, (5, 3), edges=False, lo=-1, hi=1), values(rng, dt, (3,), lo=-1,
                                                                     hi=1, edges=False)
    w = values(rng, dt, (3, 3), edges=False, lo=-1, hi=0)

    def rnn(c0, xs, w, reverse):
        def step(c, x):
            c = fnp.tanh(c @ w + x)
            return c, (c * 2, fnp.sum(c))
        return lax.scan(step, c0, xs, reverse=reverse)
    out = [_traced("scan", lambda c0, xs, w: rnn(c0, xs, w, r), c0, xs, w)
           for r in (False, True)]
    return out + [
        _traced("scan", lambda c0: lax.scan(lambda c, _: (c * 0.5, c), c0, None, length=4), c0),
        _traced("scan", lambda c0, xs: lax.scan(lambda c, x: (fnp.sin(c) * x, None), c0, xs),
                c0, xs),
        _traced("scan", lambda c0, xs: lax.scan(lambda c, x: (c + x, x), c0, xs[:0]), c0, xs),
        # a cond inside the body: nested subgraphs
        _traced("scan", lambda c0, xs: lax.scan(
            lambda c, x: (lax.cond(fnp.sum(x) > 0, lambda c: c + x, lambda c: c - x, c), c),
            c0, xs), c0, xs)]


def whiles(rng, dt):
    x = np.abs(values(rng, dt, (3,), small=3, edges=False, lo=-1, hi=1)) + dt.type(1)

    def grow(x, limit):
        return lax.while_loop(lambda c: fnp.sum(c[0]) < limit,
                              lambda c: (c[0] * 2 + 1, c[1] + 1), (x, np.int32(0)))
    return [_traced("while", grow, x, np.asarray(100, dt)),
            _traced("while", grow, x, np.asarray(0, dt))]          # no iteration


FLOATS = [F32, F64]
CASES = {
    # unary, floating
    **{name: unary(FLOATS) for name in
       ("exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "cbrt",
        "reciprocal", "tanh", "logistic", "floor", "ceil", "is_finite", "isinf", "isnan",
        "asinh", "atan", "sinh", "cosh", "tan")},
    # float64 Erf: neither onnxruntime nor onnx's reference evaluator (float32 math.erf)
    # computes it in double precision, so there is nothing to check it against
    "erf": unary([F32]),
    "sin": unary(FLOATS, hi=4), "cos": unary(FLOATS, hi=4),
    "asin": unary(FLOATS, lo=-4, hi=0.2), "acos": unary(FLOATS, lo=-4, hi=0.2),
    "atanh": unary(FLOATS, lo=-4, hi=0.2), "acosh": unary(FLOATS, lo=-1, hi=5),
    "round": (FLOATS, rounding),
    # unary, numeric or any
    "neg": unary([F32, F64, I32, U8]), "abs": unary([F32, F64, I32, I8]),
    "sign": unary([F32, F64, I32, U16]), "square": unary([F32, F64, I32, U8]),
    "not": unary([BOOL, I32, U8]),
    "stop_gradient": unary([F32, I32, BOOL]), "real": unary([F32, I32]),
    "imag": unary([F32, F64]), "conj": unary([F32, BOOL]),
    "integer_pow": ([F32, F64, I32, I8, U8], integer_pow),
    # binary
    "add": binary([F32, F64, I32, U8]), "sub": binary([F32, F64, I32]),
    "mul": binary([F32, F64, I32, I16]),
    "div": binary([F32, F64, I32, I8, U32]), "rem": binary([F32, F64, I32, U8, I64]),
    "floor_divide": binary([F32, F64, I32, I16, U16]),
    "pow": ([F32, F64, I32, U8, I8], lambda rng, dt: (int_pow if dt.kind in "iu" else
                                                      float_pow)(rng, dt)),
    "max": binary([F32, F64, I32, BOOL, I16, U64]), "min": binary([F32, F64, I32, BOOL, U16]),
    "atan2": binary(FLOATS), "hypot": binary(FLOATS), "logaddexp": binary(FLOATS),
    "eq": binary([F32, I32, BOOL]), "ne": binary([F32, I32, BOOL]),
    "lt": binary([F32, I32, BOOL, U16]), "le": binary([F64, I32, BOOL]),
    "gt": binary([F32, I64, BOOL]), "ge": binary([F32, I32, BOOL]),
    "and": binary([BOOL, I32, U8]), "or": binary([BOOL, I32, I16]), "xor": binary([BOOL, U32]),
    "shift_left": ([I32, U8, I8, I64], shifts),
    "shift_right_logical": ([I32, U8, I16], shifts),
    "shift_right_arithmetic": ([I32, U8, I8, I64], shifts),
    # select, clamp, convert
    "select_n": ([F32, I32, BOOL, I16, U64], select_n), "clamp": ([F32, F64, I32, BOOL], clamp),
    "convert_element_type": ([F32, F64, I32, BOOL, U8], convert),
    # shapes
    **{name: ([F32, I32, BOOL], shape_ops(name)) for name in
       ("broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "rev",
        "concatenate", "slice")},
    "pad": ([F32, I32, BOOL, I16], shape_ops("pad")),
    "dynamic_slice": ([F32, I32, BOOL], dynamic_slices("dynamic_slice")),
    "dynamic_update_slice": ([F32, I32, BOOL, U16], dynamic_slices("dynamic_update_slice")),
    "iota": ([F32, I32, U8, F64], iota),
    # reductions
    "reduce_sum": ([F32, F64, I32, I8, U64], arith_reductions),
    "reduce_prod": ([F32, F64, I32, U8], arith_reductions),
    "reduce_max": ([F32, F64, I32, BOOL, I16, U64, U32], reductions),
    "reduce_min": ([F32, F64, I32, BOOL, U16], reductions),
    "reduce_and": ([BOOL, I32, U8], reductions), "reduce_or": ([BOOL, I32, I16], reductions),
    "argmax": ([F32, F64, I32, BOOL, U64, I16], arg_reductions),
    "argmin": ([F32, F64, I32, BOOL, U32], arg_reductions),
    "cumsum": ([F32, F64, I32, I8, U32, I64, U64], cumulative),
    "cumprod": ([F32, F64, I32, U8], cumulative),
    "cummax": ([F32, F64, I32, BOOL, U64], cumulative),
    "cummin": ([F32, F64, I32, I16], cumulative),
    "dot_general": ([F32, F64, I32, BOOL, I8, U32], dot_general),
    "sort": ([F32, F64, I32, BOOL, U64, U8], sort),
    "gather": ([F32, I32, BOOL], gather), "scatter": ([F32, F64, I32, BOOL], scatter),
    "cumlogsumexp": (FLOATS, log_cumulative),
    "top_k": ([F32, F64, I32, BOOL, U64, U16], top_k),
    # convolution and pooling (float64 Conv has no onnxruntime kernel: reference evaluator)
    "conv_general_dilated": (FLOATS, convs),
    "reduce_window_sum": ([F32, F64, I32, U8], pools),
    "reduce_window_max": ([F32, F64, I32, BOOL, U64], pools),
    "reduce_window_min": ([F32, F64, I16, BOOL], pools),
    # control flow: If, Scan, Loop with the bodies as subgraphs
    "cond": ([F32, I32], conds), "scan": ([F32, F64], scans), "while": ([F32, I32], whiles),
}

# Float tolerances in ulp of the result (default 4), measured against onnxruntime 1.32
# (the worst seen over 30 seeds is about half of these).
ULPS = {"log1p": 6, "expm1": 6, "log2": 6, "log10": 6, "tanh": 8, "atan2": 6, "acos": 8,
        "scan": 32}   # a recurrence (tanh of a matmul) carries rounding from step to step


def _relative_to_abs(k):
    """Rounding bounded by k eps times the op on |inputs| (sums in another order; a
    result that cancels, as logaddexp near 0)."""
    def bound(prim, args, params, dtype):
        magnitude = prim.impl(*[np.abs(a) for a in args], **params)
        return k * np.finfo(dtype).eps * np.abs(np.asarray(magnitude, np.float64))
    return bound


def _argument_reduction(k):
    """onnxruntime's float64 sin/cos reduce the argument with an absolute error of about
    eps * |x|, which is many ulp of a result near a zero of the function."""
    def bound(prim, args, params, dtype):
        return k * np.finfo(dtype).eps * np.maximum(1.0, np.abs(args[0]))
    return bound


# Absolute error bounds (per element) accepted besides the ulp tolerance.
BOUNDS = {"reduce_sum": _relative_to_abs(8), "reduce_prod": _relative_to_abs(8),
          "cumsum": _relative_to_abs(8), "cumprod": _relative_to_abs(16),
          "dot_general": _relative_to_abs(8), "logaddexp": _relative_to_abs(4),
          "conv_general_dilated": _relative_to_abs(8), "reduce_window_sum": _relative_to_abs(8),
          ("sin", F64): _argument_reduction(2), ("cos", F64): _argument_reduction(2)}
# Which zero max/min return for equal operands -0.0, 0.0 is not specified (see lowerings).
ANY_ZERO_SIGN = {"max", "min", "clamp", "reduce_max", "reduce_min", "cummax", "cummin",
                 "reduce_window_max", "reduce_window_min",
                 ("scatter", "min"), ("scatter", "max")}


def _ordered_bits(a):
    """Float bits mapped to integers in the order of the floats (-0.0 and 0.0 both 0)."""
    it = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    i = a.view(it).astype(np.int64).astype(object)
    return np.where(i < 0, int(np.iinfo(it).min) - i, i)


def assert_close(got, want, *, ulps=4, bound=None, zero_sign=True, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, impl gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, impl gives {want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    assert np.array_equal(nan_g, nan_w), (f"{what}: NaN at {np.argwhere(nan_g != nan_w)[:5]}: "
                                          f"got {got[nan_g != nan_w][:5]}, "
                                          f"want {want[nan_g != nan_w][:5]}")
    inf = np.isinf(got) | np.isinf(want)
    assert np.array_equal(got[inf], want[inf]), f"{what}: infinities {got[inf]} vs {want[inf]}"
    fin = ~(nan_w | inf)
    g, w = got[fin], want[fin]
    dist = np.abs(_ordered_bits(g) - _ordered_bits(w)).astype(np.float64)
    ok = dist <= ulps
    if bound is not None:
        ok |= np.abs(g.astype(np.float64) - w) <= np.asarray(bound)[fin]
    bad = ~ok
    assert not bad.any(), (f"{what}: {bad.sum()} values off by up to {dist[bad].max():.0f} ulp "
                           f"(allowed {ulps}): got {g[bad][:4]}, want {w[bad][:4]}")
    if zero_sign:
        zero = (got == 0) & (want == 0)
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), \
            f"{what}: signed zeros differ: got {got[zero]}, want {want[zero]}"


def _run(model, args, reference=False):
    if not reference:
        return fonnx.run(model, *args)
    from onnx.reference import ReferenceEvaluator
    feed = {i.name: a for i, a in zip(model.graph.input, args)}
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, feed)


def check_primitive(name, args, params):
    prim = REGISTRY[name]
    args = [np.asarray(a) for a in args]
    avals = [ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    model = fonnx.lower_primitive(prim, avals, params)
    out_aval = prim.shape_rule(*avals, **params)
    out_avals = out_aval if prim.multiple_results else [out_aval]
    reference = any(a.dtype in ONNXRUNTIME_GAPS.get(name, ()) for a in args)
    got = _run(model, args, reference)
    want = prim.impl(*args, **params)
    want = list(want) if prim.multiple_results else [want]
    what = f"{name}{[a.str_short() for a in avals]} {params}"
    assert len(got) == len(want) == len(out_avals)
    for g, w, aval in zip(got, want, out_avals):
        w = np.asarray(w)
        assert (w.dtype, w.shape) == (aval.dtype, aval.shape)   # the impl agrees with its rule
        bound = BOUNDS.get((name, w.dtype), BOUNDS.get(name)) if w.dtype.kind == "f" else None
        if bound is not None:
            bound = np.broadcast_to(bound(prim, args, params, w.dtype), w.shape)
        assert_close(g, w, ulps=ULPS.get(name, 4), bound=bound,
                     zero_sign=not ANY_ZERO_SIGN & {name, (name, params.get("mode"))},
                     what=what)


# 64-bit cases run with jax_enable_x64 on: those traced through make_ir (cond, scan, while)
# would otherwise narrow to 32 bits, as in JAX
PARAMS = [pytest.param(name, np.dtype(dt), id=f"{name}-{np.dtype(dt).name}",
                       marks=[pytest.mark.x64] if np.dtype(dt).itemsize == 8 else [])
          for name, (dts, _) in sorted(CASES.items()) for dt in dts]


@pytest.mark.parametrize("name,dtype", PARAMS)
def test_lowering_matches_impl(name, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{name}-{dtype.name}".encode()))
    _, make = CASES[name]
    for args, params in make(rng, dtype):
        check_primitive(name, args, params)


def test_every_primitive_is_lowered_tested_or_left_out():
    # fnx's own primitives: those a fresh interpreter has after `import fnx` (test modules
    # register primitives of their own)
    out = subprocess.run([sys.executable, "-c", "import fnx; from fnx.core.primitive import "
                          "REGISTRY; print(' '.join(REGISTRY))"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    names = set(out.stdout.split())
    assert len(names) > 100
    # (a primitive added to fnx while this session ran is in the fresh interpreter only)
    assert names <= set(REGISTRY), f"not registered in this process: {names - set(REGISTRY)}"
    lowered = {n for n in names if REGISTRY[n].onnx is not None}
    assert names - lowered - LEFT_OUT - CALLS == set()
    assert lowered & (LEFT_OUT | CALLS) == set()
    assert lowered - set(CASES) == set(), "lowered but not tested here"


# --- whole functions ---------------------------------------------------------------------------

def _export_and_compare(fun, *args, rtol=1e-5, atol=1e-6, **kw):
    model = fonnx.export(fun, *args, **kw)
    got = fonnx.run(model, *args)
    want = [np.asarray(w) for w in fnx.tree_util.tree_leaves(fun(*args))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return model


def _ops(model):
    return [n.op_type for n in model.graph.node]


def test_export_mlp():
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(6, 16)).astype(np.float32),
              "b1": rng.normal(size=16).astype(np.float32),
              "w2": rng.normal(size=(16, 3)).astype(np.float32),
              "b2": rng.normal(size=3).astype(np.float32)}
    x = rng.normal(size=(8, 6)).astype(np.float32)

    def mlp(params, x):
        h = fnp.maximum(x @ params["w1"] + params["b1"], 0.0)      # relu via max
        return fnp.tanh(h @ params["w2"] + params["b2"])

    model = _export_and_compare(mlp, params, x)
    assert [i.name for i in model.graph.input] == ["params.b1", "params.b2", "params.w1",
                                                   "params.w2", "x"]
    assert {"Einsum", "Max", "Tanh", "Add"} <= set(_ops(model))


def test_export_cnn_model():
    """A trained-style fnx.nn CNN in eval mode: Conv, BatchNorm (running stats), ReLU,
    MaxPool, AvgPool, Flatten, Linear; onnxruntime gives fnx's output."""
    nn = fnx.nn
    rng = np.random.default_rng(7)
    x = rng.normal(size=(3, 2, 12, 12)).astype(np.float32)
    model_def = nn.Sequential(
        nn.Conv2d(2, 6, 3, padding=1), nn.BatchNorm2d(), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3, stride=2, groups=2), nn.ReLU(), nn.AvgPool2d(2, stride=1),
        nn.Flatten(), nn.Linear(10))
    model = nn.init(model_def, fnx.random.PRNGKey(0), x)
    bn = model.layers[1]          # non-trivial running statistics, as after training
    bn = bn.replace(running_mean=fnp.asarray(rng.normal(size=6).astype(np.float32)),
                    running_var=fnp.asarray(rng.uniform(0.5, 2, 6).astype(np.float32)))
    model = model.replace(layers=model.layers[:1] + [bn] + model.layers[2:]).eval()
    m = _export_and_compare(lambda x: model(x), x, rtol=1e-4, atol=1e-5)
    assert {"Conv", "MaxPool"} <= set(_ops(m))


def test_export_lstm_over_scan():
    nn = fnx.nn
    x = np.random.default_rng(8).normal(size=(6, 2, 3)).astype(np.float32)   # (L, N, in)
    model = nn.init(nn.LSTM(5, num_layers=2), fnx.random.PRNGKey(1), x)
    m = _export_and_compare(lambda x: model(x), x, rtol=1e-4, atol=1e-5)
    assert "Scan" in _ops(m)


def test_export_control_flow():
    def f(p, x):
        y = lax.cond(p > 0, lambda x: fnp.cumsum(x, 0), lambda x: x[::-1], x)
        n = lax.while_loop(lambda c: c[1] < 7, lambda c: (c[0] * 0.5 + 1.0, c[1] + 1),
                           (y, 0))[0]
        return lax.fori_loop(0, 3, lambda i, c: fnp.tanh(c) + i, n)

    x = np.random.default_rng(9).normal(size=(4, 3)).astype(np.float32)
    for p in (np.float32(1), np.float32(-1)):
        m = _export_and_compare(f, p, x)
    assert {"If", "Loop"} <= set(_ops(m))


def test_export_softmax_cross_entropy():
    rng = np.random.default_rng(1)
    logits = (rng.normal(size=(8, 10)) * 4).astype(np.float32)
    labels = rng.integers(0, 10, 8).astype(np.int32)

    def loss(logits, labels):
        z = logits - fnp.max(logits, axis=-1, keepdims=True)
        lse = fnp.log(fnp.sum(fnp.exp(z), axis=-1))
        onehot = labels[:, None] == fnp.arange(10)[None, :]
        return fnp.mean(lse - fnp.sum(fnp.where(onehot, z, 0.0), axis=-1))

    model = _export_and_compare(loss, logits, labels)
    assert {"ReduceMax", "ReduceSum", "Exp", "Log"} <= set(_ops(model))


def test_export_layer_norm_with_shape_placeholders():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 32)).astype(np.float32) * 3 + 1
    gamma = rng.normal(size=32).astype(np.float32)
    beta = rng.normal(size=32).astype(np.float32)

    def layer_norm(x, gamma, beta):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * gamma + beta

    spec = [fnx.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, gamma, beta)]
    model = fonnx.export(layer_norm, *spec, output_names=["y"])
    assert [o.name for o in model.graph.output] == ["y"]
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [4, 32]
    (got,) = fonnx.run(model, x, gamma, beta)
    np.testing.assert_allclose(got, np.asarray(layer_norm(x, gamma, beta)), rtol=1e-5,
                               atol=1e-5)


def test_export_inlines_jit_and_keeps_constants():
    table = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    @fnx.jit
    def inner(x):
        return fnp.sin(x) * table + 2.0          # a closed-over array: an initializer

    def outer(x, y):
        return {"a": inner(x) + inner(y), "b": fnp.sum(x, axis=0)}

    x = np.random.default_rng(3).normal(size=(3, 4)).astype(np.float32)
    y = x[::-1].copy()
    ir = fnx.make_ir(outer)(x, y)
    assert "jit" in [e.prim.name for e in ir.eqns]
    model = _export_and_compare(outer, x, y)
    assert "jit" not in _ops(model)
    assert any(np.array_equal(onnx.numpy_helper.to_array(t), table)
               for t in model.graph.initializer)
    assert len(model.graph.output) == 2


def test_export_inlines_custom_derivative_batching_and_checkpoint_calls():
    @fnx.custom_jvp
    def softplus(x):
        return fnp.logaddexp(x, 0.0)

    softplus.defjvp(lambda primals, tangents: (softplus(primals[0]),
                                               tangents[0] * lax.logistic(primals[0])))

    @fnx.custom_vjp
    def clip_gradient(x):
        return fnp.sin(x)

    clip_gradient.defvjp(lambda x: (fnp.sin(x), fnp.cos(x)),
                         lambda cos_x, g: (fnp.clip(g * cos_x, -1.0, 1.0),))

    @fnx.checkpoint
    def block(x):
        return fnp.tanh(x) * 2.0

    @fnx.custom_batching.custom_vmap
    def cube(x):
        return x * x * x

    cube.def_vmap(lambda size, in_batched, xs: (xs ** 3, in_batched[0]))

    def f(x):
        return block(softplus(x)) + clip_gradient(x) + cube(x / 30)

    x = np.linspace(-30, 30, 13, dtype=np.float32)
    names = [e.prim.name for e in fnx.make_ir(f)(x).eqns]
    assert {"custom_jvp_call", "custom_vjp_call", "remat_call", "custom_vmap_call"} \
        <= set(names)
    _export_and_compare(f, x)
    # under vmap the custom_vmap rule is traced in its place: exported as it computes
    _export_and_compare(fnx.vmap(f), np.stack([x, -x]))


def test_export_ir_and_other_opsets():
    def f(x, n):
        return lax.select(x > 0, lax.integer_pow(x, 3), x * 2.0), lax.shift_left(n, 2)

    x = np.array([-1.5, 0.0, 2.0], np.float32)
    n = np.array([1, -3, 7], np.int32)
    ir = fnx.make_ir(f)(x, n)
    for opset in (18, onnx.defs.onnx_opset_version()):
        model = fonnx.export_ir(ir, opset=opset, input_names=["x", "n"])
        assert model.opset_import[0].version == opset
        got = fonnx.run(model, x, n)
        np.testing.assert_array_equal(got[0], np.asarray(f(x, n)[0]))
        np.testing.assert_array_equal(got[1], np.asarray(f(x, n)[1]))
    with pytest.raises(ValueError, match="opsets 18"):
        fonnx.export_ir(ir, opset=13)


def test_output_that_is_an_input_or_repeated():
    def f(x):
        y = x * 2.0
        return x, y, y, 3.0

    x = np.arange(3, dtype=np.float32)
    model = fonnx.export(f, x)
    got = fonnx.run(model, x)
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], x * 2)
    np.testing.assert_array_equal(got[2], x * 2)
    assert got[3] == np.float32(3.0) and got[3].dtype == np.float32


def test_run_feeds_python_scalars_and_checks_dtypes():
    model = fonnx.export(lambda x, s: x * s, np.ones(3, np.float32), 2.0)
    (got,) = fonnx.run(model, np.ones(3, np.float32), 4.0)
    np.testing.assert_array_equal(got, [4, 4, 4])
    with pytest.raises(TypeError, match="must be float32"):
        fonnx.run(model, np.ones(3, np.float64), 4.0)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        fonnx.run(model, np.ones(3, np.float32))


def test_missing_lowering_names_the_primitive_source_and_fix():
    def f(x):
        return lax.nextafter(x, x + 1.0)     # left out: needs the float's bits

    with pytest.raises(MissingRuleError) as err:
        fonnx.export(f, np.ones(3, np.float32))
    msg = str(err.value)
    assert "'nextafter'" in msg and "test_onnx.py" in msg and "prim.onnx = " in msg


def test_complex_is_rejected_clearly():
    with pytest.raises(TypeError, match="complex"):
        fonnx.export(lambda z: z * 2, np.ones(2, np.complex64))
    # a complex value inside the function (real inputs and outputs) too
    with pytest.raises(fonnx.UnsupportedDtypeError, match="complex64"):
        fonnx.export(lambda x: lax.real(lax.convert_element_type(x, np.complex64) * 1j),
                     np.ones(2, np.float32))
    with pytest.raises(MissingRuleError):
        fonnx.lower_primitive("exp", [ShapeDtypeStruct((2,), np.complex128)])


@pytest.fixture
def scale_add_p():
    """A primitive defined here, lowered through the public hook contract (removed from
    the registry afterwards, so other modules' every-primitive checks do not see it)."""
    prim = Primitive("test_onnx_scale_add", impl=lambda x, y, *, scale: x * scale + y,
                     shape_rule=lambda x, y, *, scale: ShapeDtypeStruct(x.shape, x.dtype))

    def lower(ctx, x, y, *, scale):
        assert [a.shape for a in ctx.in_avals] == [a.shape for a in ctx.out_avals] * 2
        assert ctx.opset >= 18
        k = ctx.const(scale, ctx.in_avals[0].dtype)
        return ctx.node("Add", [ctx.node("Mul", [x, k]), y])

    prim.onnx = lower
    yield prim
    del REGISTRY[prim.name]


def test_user_primitive_through_the_hook_contract(scale_add_p):
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    model = fonnx.export(lambda x, y: scale_add_p.bind(x, y, scale=3.0) - 1.0, x, y)
    np.testing.assert_array_equal(fonnx.run(model, x, y)[0], x * 3 + 1 - 1)


def test_import_without_onnx_and_clear_error():
    code = ("import sys; sys.modules['onnx'] = None; sys.modules['onnxruntime'] = None\n"
            "import numpy as np, fnx.onnx\n"
            "try:\n"
            "    fnx.onnx.export(lambda x: x + 1, np.ones(2, np.float32))\n"
            "except ImportError as e:\n"
            "    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ERR" in out.stdout and "pip install fnx[onnx]" in out.stdout


def test_integer_convolution_is_left_out_clearly():
    x, w = np.ones((1, 2, 4), np.int32), np.ones((3, 2, 2), np.int32)
    with pytest.raises(MissingRuleError, match="Conv takes floating-point"):
        fonnx.export(lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID"), x, w)
