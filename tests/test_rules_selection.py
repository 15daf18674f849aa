"""Rule sweep of the cumulative and selection primitives added after the main table
(``cumlogsumexp``, ``top_k``): shape rule, jit, vmap against a loop, jvp against finite
differences and vjp against jvp, through ``rules_support.run_rule``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from fnx import lax
from rules_support import ANY, DISTINCT, NUM, SHAPES1, Case, Dom, arrays, run_rule, structured

# float64 lines: the sweep runs with jax_enable_x64 on, as JAX's own suite runs its
# 64-bit tests
pytestmark = pytest.mark.x64

NO_GRAD = {}
NO_BATCH = {}


@st.composite
def cumlogsumexp_cases(draw, dtype):
    shape = draw(SHAPES1)
    axis = draw(st.integers(0, len(shape) - 1))
    rev = draw(st.booleans())
    # values farther apart: the weights exp(x - y) span decades (float64 only: in float32
    # the second derivative b (1 - b) of a weight b near 1 is below the rounding of 1 - b;
    # wider still, it is below the finite differences' rounding noise; test_selection.py
    # checks far-apart and infinite values against NumPy references)
    wide = dtype == np.float64 and draw(st.booleans())
    dom = Dom(-5.0, 5.0) if wide else ANY
    return Case(lambda x: lax.cumlogsumexp(x, axis, rev), arrays((shape, dtype, dom)),
                f"axis={axis} reverse={rev} wide={wide}")


@st.composite
def top_k_cases(draw, dtype):
    shape = draw(SHAPES1)
    k = draw(st.integers(0, shape[-1]))
    # distinct values: no ties, so the chosen indices are locally constant
    return Case(lambda x: lax.top_k(x, k), arrays((shape, dtype, DISTINCT)),
                f"{list(shape)} k={k}")


RULES = [
    structured("cumlogsumexp", cumlogsumexp_cases),
    structured("top_k", top_k_cases, bdtypes=NUM + (np.dtype("int8"),)),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
