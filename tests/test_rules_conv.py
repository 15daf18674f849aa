"""Rule sweep of the convolution and windowed-reduction primitives (``fnx/lax/convolution.py``):
``check_op`` over dimension numbers, strides, padding, dilations and groups."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from fnx import lax
from fnx.lax import convolution as cv
from rules_support import ANY, DISTINCT, F32, F64, FLOAT, Case, arrays, run_rule, structured

# float64 lines: the sweep runs with jax_enable_x64 on, as JAX's own suite runs its
# 64-bit tests
pytestmark = pytest.mark.x64

NO_GRAD: dict = {}
NO_BATCH: dict = {}


def _dil(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


@st.composite
def conv_cases(draw, dtype):
    nsp = draw(st.integers(1, 2))
    nd = nsp + 2
    G = draw(st.sampled_from([1, 1, 2]))
    B = 1 if G > 1 else draw(st.sampled_from([1, 1, 2]))
    N, Cg = B * draw(st.integers(1, 2)), draw(st.integers(1, 2))
    C, Co = G * Cg, max(G, B) * draw(st.integers(1, 2))
    sp = [draw(st.integers(1, 4)) for _ in range(nsp)]
    ks = [draw(st.integers(1, 3)) for _ in range(nsp)]
    strides = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    ldil = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nsp))
    rdil = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nsp))
    if draw(st.booleans()):
        padding = draw(st.sampled_from(["SAME", "VALID", "SAME_LOWER"]))
        eff = [_dil(k, r) for k, r in zip(ks, rdil)]
        pads = cv.padtype_to_pads(sp, eff, strides, padding)
    else:
        padding = pads = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2)))
                               for _ in range(nsp))
    for n, k, s, ld, r, (lo, hi) in zip(sp, ks, strides, ldil, rdil, pads):
        assume(_dil(n, ld) + lo + hi >= _dil(k, r))
    specs = tuple(tuple(draw(st.permutations(range(nd)))) for _ in range(3))
    lshape, rshape = [0] * nd, [0] * nd
    lshape[specs[0][0]], lshape[specs[0][1]] = N, C
    rshape[specs[1][0]], rshape[specs[1][1]] = Co, Cg
    for i in range(nsp):
        lshape[specs[0][2 + i]], rshape[specs[1][2 + i]] = sp[i], ks[i]
    dn = cv.ConvDimensionNumbers(*specs)

    def fn(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, ldil, rdil, dn,
                                        feature_group_count=G, batch_group_count=B)
    return Case(fn, arrays((tuple(lshape), dtype, ANY), (tuple(rshape), dtype, ANY)),
                f"{lshape} * {rshape} dn={specs} s={strides} pad={padding} lhs_dil={ldil} "
                f"rhs_dil={rdil} G={G} B={B}")


def _window_case(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    wd = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    ws = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    bd = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    wdl = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    if draw(st.booleans()):
        padding = draw(st.sampled_from(["SAME", "VALID"]))
        pads = cv.padtype_to_pads(shape, [_dil(w, d) for w, d in zip(wd, wdl)], ws, padding)
    else:
        padding = pads = tuple((draw(st.integers(0, 1)), draw(st.integers(0, 1)))
                               for _ in range(nd))
    for n, w, b, d, (lo, hi) in zip(shape, wd, bd, wdl, pads):
        assume(_dil(n, b) + lo + hi >= _dil(w, d))
    return shape, dict(window_dimensions=wd, window_strides=ws, padding=pads,
                       base_dilation=bd, window_dilation=wdl), padding


def reduce_window_cases(which):
    comp, init = {"sum": (lax.add, 0.0), "max": (lax.max, -np.inf),
                  "min": (lax.min, np.inf)}[which]

    @st.composite
    def cases(draw, dtype):
        shape, p, padding = _window_case(draw)
        if which != "sum":   # every window covers an element (no -inf results)
            assume(cv._rw_impl("sum")(np.ones(shape), **p).min() >= 1)

        def fn(x):
            return lax.reduce_window(x, init, comp, p["window_dimensions"],
                                     p["window_strides"], padding, p["base_dilation"],
                                     p["window_dilation"])
        return Case(fn, arrays((shape, dtype, ANY if which == "sum" else DISTINCT)),
                    f"{list(shape)} {p}")
    return cases


def select_cases(prim, scatter):
    @st.composite
    def cases(draw, dtype):
        shape, p, _ = _window_case(draw)
        which = draw(st.sampled_from(["max", "min"]))
        out = cv._rw_geometry("test", shape, *(p[k] for k in cv._RW_PARAMS))

        def fn(a, x):
            return prim.bind(a, x, which=which, **p)
        return Case(fn, arrays((out if scatter else shape, dtype, ANY),
                               (shape, dtype, DISTINCT)), f"{which} {list(shape)} {p}")
    return cases


RULES = [
    structured("conv_general_dilated", conv_cases, bdtypes=FLOAT, gdtypes=FLOAT),
    structured("reduce_window_sum", reduce_window_cases("sum"), bdtypes=(F32, F64)),
    structured("reduce_window_max", reduce_window_cases("max"), bdtypes=(F32, F64)),
    structured("reduce_window_min", reduce_window_cases("min"), bdtypes=(F32, F64)),
    structured("select_and_gather_add", select_cases(cv.select_and_gather_add_p, False),
               nondiff=(1,)),
    structured("select_and_scatter_add", select_cases(cv.select_and_scatter_add_p, True),
               nondiff=(1,)),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
