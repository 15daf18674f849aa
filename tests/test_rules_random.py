"""Rule sweep of fnx.random's primitives (``threefry2x32``, ``random_gamma``): shape
rule, jit against eager, vmap against a loop (keys, counters and alphas mapped at
drawn axes), on hypothesis-drawn cases. See ``tests/rules_support.py``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from fnx.random import random_gamma_p, threefry2x32_p
from rules_support import F32, F64, SHAPES, Case, run_rule, structured

U32 = np.dtype("uint32")

NO_GRAD = {
    "threefry2x32": "uint32 bits in and out: no derivative",
    "random_gamma": "a sampler: the key is integer, and gradients with respect to alpha "
                    "(implicit reparameterization) are not implemented (the jvp rule "
                    "raises, saying so)",
}
NO_BATCH = {}


def _u32(rng, shape):
    return rng.integers(0, 2**32, shape, dtype=np.uint32)


@st.composite
def threefry_cases(draw, dtype):
    shape = draw(SHAPES)
    # key words are often scalars (one key, many counters); counters sometimes too
    shapes = [() if draw(st.booleans()) else shape for _ in range(4)]

    def make(rng):
        return tuple(_u32(rng, s) for s in shapes)
    return Case(lambda *xs: threefry2x32_p.bind(*xs), make, f"operand shapes {shapes}")


@st.composite
def gamma_cases(draw, dtype):
    shape = draw(SHAPES)
    log_space = draw(st.booleans())

    def make(rng):
        alpha = rng.uniform(0.2, 5.0, shape).astype(dtype)
        return _u32(rng, shape + (2,)), alpha
    return Case(lambda k, a: random_gamma_p.bind(k, a, log_space=log_space), make,
                f"shape {shape} log_space={log_space}")


RULES = [
    structured("threefry2x32", threefry_cases, bdtypes=(U32,), gdtypes=()),
    structured("random_gamma", gamma_cases, bdtypes=(F32, F64), gdtypes=()),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
