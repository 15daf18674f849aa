"""The rule sweep of the control-flow primitives (``cond``, ``while``, ``scan``): each
line runs ``check_op`` (shape rule, jit against eager, vmap against a loop, jvp against
finite differences, vjp against jvp) on a small body through one of ``fnx.lax``'s
control-flow functions. Predicates and trip counts are computed from the operands, so
under vmap they vary from lane to lane (a batched ``cond`` index, a batched
``while_loop`` predicate)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from fnx import lax
from rules_support import ANY, SHAPES, Case, arrays, run_rule, structured

I32 = np.dtype("int32")

# float64 lines: the sweep runs with jax_enable_x64 on, as JAX's own suite runs its
# 64-bit tests
pytestmark = pytest.mark.x64


def _branch_index(x, n):
    """An integer index in [-1, n] from the data (switch clamps it)."""
    return lax.convert_element_type(lax.floor(lax.reduce_sum(x, tuple(range(x.ndim)))), I32) \
        % (n + 2) - 1


def _cond_fn(x, y):
    pred = lax.gt(lax.reduce_sum(x, tuple(range(x.ndim))), 0.0)
    return lax.cond(pred, lambda a, b: lax.mul(lax.sin(a), b),
                    lambda a, b: lax.add(a, lax.exp(lax.mul(a, b))), x, y)


def _switch_fn(x, y):
    return lax.switch(_branch_index(x, 3),
                      [lambda a, b: lax.mul(lax.sin(a), b), lambda a, b: lax.sub(a, b),
                       lambda a, b: lax.exp(lax.mul(a, b))], x, y)


def _while_fn(x, y):
    n = lax.convert_element_type(lax.floor(lax.abs(lax.reduce_sum(x, tuple(range(x.ndim))))),
                                 I32) % 3 + 1

    def body(c):
        i, v = c
        return lax.add(i, 1), lax.add(lax.mul(lax.sin(v), y), v)
    # an int32 counter: a Python 0 would be int64 with x64 on, and lax.lt does not promote
    return lax.while_loop(lambda c: lax.lt(c[0], n), body, (np.int32(0), x))[1]


def _scan_fn(reverse):
    def fn(c0, w, xs):
        def body(c, x):
            return lax.add(lax.mul(lax.sin(c), w), x), lax.mul(c, x)
        return lax.scan(body, c0, xs, reverse=reverse)
    return fn


def _fori_fn(c0, w):
    return lax.fori_loop(0, 3, lambda i, c: lax.add(lax.mul(lax.sin(c), w),
                                                   lax.convert_element_type(i, c.dtype)), c0)


def _map_fn(xs, w):
    return lax.map(lambda x: lax.mul(lax.cos(x), w), xs)


def two(fn):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        return Case(fn, arrays((shape, dtype, ANY), (shape, dtype, ANY)))
    return cases


def scan_cases(fn, with_xs=True):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        n = draw(st.integers(1, 3))
        specs = [(shape, dtype, ANY), (shape, dtype, ANY)]
        if with_xs:
            specs.append(((n,) + shape, dtype, ANY))
        return Case(fn, arrays(*specs), f"length={n}")
    return cases


@st.composite
def map_cases(draw, dtype):
    shape = draw(SHAPES)
    n = draw(st.integers(1, 3))
    return Case(_map_fn, arrays(((n,) + shape, dtype, ANY), (shape, dtype, ANY)), f"n={n}")


RULES = [
    structured("cond", two(_cond_fn)),
    structured("cond", two(_switch_fn), variant="switch"),
    structured("while", two(_while_fn), modes=("fwd",),
               why="a while_loop has no reverse mode (its trip count is only known at run "
                   "time); use scan or fori_loop with static bounds, as in JAX"),
    structured("scan", scan_cases(_scan_fn(False))),
    structured("scan", scan_cases(_scan_fn(True)), variant="reverse"),
    structured("scan", scan_cases(_fori_fn, with_xs=False), variant="fori_loop"),
    structured("scan", map_cases, variant="map"),
]

NO_GRAD: dict = {}
NO_BATCH: dict = {}


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
