"""Rule sweep of the callback primitives (``debug_callback``, ``pure_callback``,
``io_callback``; see ``tests/rules_support.py``): each line calls back into NumPy from a
small function, so ``check_op`` checks the shape rule, ``jit`` against eager and ``vmap``
(``pure_callback``: every ``vmap_method``; ``io_callback`` has none, as in JAX, and runs
once per batch element) against a loop. The callbacks check what they receive: NumPy (and, for ``debug_callback``, of one example's shape even
under ``vmap``, which calls it once per batch element).

``pure_callback`` and ``io_callback`` have no derivative (JAX defines none: their jvp
raises, telling the user to wrap them in ``custom_jvp``; ``tests/test_debug_callback.py``
checks the error). ``debug_callback`` is gradient-checked through a function that also
computes a value: its jvp calls it on the primals only and adds nothing to the tangents.
The sweep runs with ``jax_enable_x64`` on (float64 lines).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import fnx
from fnx import lax
from fnx.core.array import Array
from fnx.core.dtypes import canonical
from rules_support import ANY, SHAPES, Case, Rule, arrays, run_rule

pytestmark = pytest.mark.x64

NO_GRAD = {p: "a Python callback has no derivative (as in JAX): its jvp raises and says to "
              "wrap it in custom_jvp (tests/test_debug_callback.py)"
           for p in ("pure_callback", "io_callback")}
NO_BATCH = {}

METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


def _received(dtype, shape=None):
    """A debug callback checking that it gets one fnx Array (as JAX's gets a jax.Array) of
    ``dtype`` and ``shape``."""
    def check(v):
        assert isinstance(v, Array), type(v)
        assert v.dtype == canonical(dtype), (v.dtype, dtype)   # narrowed with x64 off
        assert shape is None or v.shape == shape, (v.shape, shape)
    return check


def _sin_times(x, y):
    """The host function of the result callbacks: NumPy, in the operands' dtype (under
    ``expand_dims`` an unbatched operand arrives with a size-1 leading axis)."""
    assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
    assert x.dtype == y.dtype, (x.dtype, y.dtype)
    return (np.sin(x) * y).astype(x.dtype)


def result_callback_cases(api, methods):
    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        kw = {"vmap_method": draw(st.sampled_from(methods))} if methods else {}

        def fn(x, y):
            out = api(_sin_times, fnx.ShapeDtypeStruct(x.shape, x.dtype), x, y, **kw)
            return lax.add(out, x)
        return Case(fn, arrays((shape, dtype, ANY), (shape, dtype, ANY)), str(kw))
    return cases


@st.composite
def debug_callback_cases(draw, dtype):
    shape = draw(SHAPES)

    def fn(x, y):
        fnx.debug.callback(_received(np.dtype(dtype), tuple(shape)), x)
        return lax.mul(lax.sin(x), y)
    return Case(fn, arrays((shape, dtype, ANY), (shape, dtype, ANY)))


RULES = [
    Rule("debug_callback", debug_callback_cases),
    Rule("pure_callback", result_callback_cases(fnx.pure_callback, METHODS)),
    Rule("io_callback", result_callback_cases(fnx.experimental.io_callback, ())),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
