"""Rule sweep of ``fnx.scipy``'s primitives (see ``tests/rules_support.py``): the special
functions with NumPy impls (``fnx.scipy._special_impl``), ``sqrtm`` and the Sylvester
solve its derivative makes (``sqrt_sylvester``).

Each line draws its operands inside the function's domain, away from its poles, branch
points and kinks (``i0e``/``i1e`` carry ``|x|``: away from 0; ``expi``/``sici``: away
from the logarithmic singularity at 0). Where a derivative is not implemented (the
parameters of ``betainc``, ``hyp2f1`` and ``expn``'s integer order raise, as in JAX; the
second derivatives of ``zeta`` in ``s``, ``gammainc``/``gammaincc`` in ``a`` and
``hyp1f1`` in ``a`` and ``b`` raise, saying so), one line checks the first derivatives
in every operand and another holds those operands fixed (``nondiff``) and checks the
rest to order 2. The sweep runs with ``jax_enable_x64`` on (float64 lines).
Values against SciPy are checked in ``tests/test_scipy_special*.py`` and
``tests/test_scipy_linalg*.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import fnx.scipy  # noqa: F401  (registers the primitives)
from fnx.core.primitive import REGISTRY
from rules_support import (ANY, AWAY0, CPLX, POS, SHAPES, Case, Dom, Rule, arrays,
                           elementwise, run_rule)

pytestmark = pytest.mark.x64

NO_GRAD = {}
NO_BATCH = {}

ORDER1 = "its second derivative in a parameter raises (not implemented, saying so)"

# parameter domains: a, b of the incomplete gamma / beta and Kummer's function
PARAM = Dom(0.6, 2.5)
ZETA_S = Dom(1.6, 4.0)
UNIT_OPEN = Dom(0.1, 0.9)
HYP2F1_X = Dom(-0.7, 0.7)
ORDER_N = Dom(0.0, 4.0, integral=True)


def el(prim, *doms, **kw):
    """A line of the primitive itself (``bind``), over operands of one shape."""
    return elementwise(prim, *doms, fn=REGISTRY[prim].bind, **kw)


@st.composite
def bessel_jn_cases(draw, dtype):
    shape = draw(SHAPES)
    v = draw(st.integers(0, 3))
    return Case(lambda z: REGISTRY["bessel_jn"].bind(z, v=v), arrays((shape, dtype, Dom(-4.0, 4.0))),
                f"v={v}")


def _sqrtm_operand(rng, batch, n, dtype):
    """A well-conditioned complex matrix, eigenvalues near 3 (far from the branch cut of
    sqrt on the negative reals, and from each other's negatives)."""
    a = 0.3 * (rng.standard_normal(batch + (n, n)) + 1j * rng.standard_normal(batch + (n, n)))
    return (a + 3 * np.eye(n)).astype(dtype)


@st.composite
def sqrtm_cases(draw, dtype):
    batch = draw(st.sampled_from([(), (2,)]))
    n = draw(st.integers(1, 3))
    return Case(REGISTRY["sqrtm"].bind, lambda rng: (_sqrtm_operand(rng, batch, n, dtype),),
                f"{list(batch + (n, n))}")


@st.composite
def sqrt_sylvester_cases(draw, dtype):
    """``x`` a matrix square root (eigenvalues with positive real parts), ``t`` anything."""
    batch = draw(st.sampled_from([(), (2,)]))
    n = draw(st.integers(1, 3))

    def operands(rng):
        x = _sqrtm_operand(rng, batch, n, dtype)
        t = rng.standard_normal(batch + (n, n)) + 1j * rng.standard_normal(batch + (n, n))
        return x, t.astype(dtype)
    return Case(REGISTRY["sqrt_sylvester"].bind, operands, f"{list(batch + (n, n))}")


RULES = [
    el("erfcx", Dom(-2.0, 3.0)),
    el("i0e", AWAY0), el("i1e", AWAY0),
    el("dawsn", Dom(-3.0, 3.0)),
    el("expi", AWAY0),
    el("spence", POS),
    el("sici", AWAY0), el("fresnel", ANY),
    el("betaln", POS, POS),
    el("owens_t", ANY, ANY),
    el("zeta", ZETA_S, POS, order=1, why=ORDER1 + " (s)"),
    el("zeta", ZETA_S, POS, nondiff=(0,), variant="s fixed"),
    el("zeta_grad_s", ZETA_S, POS, nondiff=(0,), why="the derivative in s raises (zeta's "
       "second derivative in s is not implemented)"),
    el("gammainc", PARAM, POS, order=1, why=ORDER1 + " (a)"),
    el("gammainc", PARAM, POS, nondiff=(0,), variant="a fixed"),
    el("gammaincc", PARAM, POS, order=1, why=ORDER1 + " (a)"),
    el("gammaincc", PARAM, POS, nondiff=(0,), variant="a fixed"),
    el("gammainc_grad_a", PARAM, POS, nondiff=(0,), why="its derivative in a raises"),
    el("betainc", PARAM, PARAM, UNIT_OPEN, nondiff=(0, 1),
       why="derivatives in a and b raise, as in JAX"),
    el("expn", ORDER_N, POS, nondiff=(0,), why="the order n is an integer: its derivative "
       "raises, as in JAX"),
    el("hyp1f1", PARAM, PARAM, Dom(-2.0, 2.0), order=1, why=ORDER1 + " (a, b)"),
    el("hyp1f1", PARAM, PARAM, Dom(-2.0, 2.0), nondiff=(0, 1), variant="a, b fixed"),
    el("hyp1f1_grad_a", PARAM, PARAM, Dom(-2.0, 2.0), nondiff=(0, 1),
       why="its derivatives in a and b raise"),
    el("hyp1f1_grad_b", PARAM, PARAM, Dom(-2.0, 2.0), nondiff=(0, 1),
       why="its derivatives in a and b raise"),
    el("hyp2f1", PARAM, PARAM, Dom(1.0, 3.0), HYP2F1_X, nondiff=(0, 1, 2),
       why="derivatives in a, b and c raise (not implemented)"),
    el("wofz", Dom(-2.0, 2.0, imag=1.0), bdtypes=CPLX, gdtypes=CPLX),
    Rule("bessel_jn", bessel_jn_cases),
    Rule("sqrtm", sqrtm_cases, bdtypes=CPLX, gdtypes=CPLX),
    Rule("sqrt_sylvester", sqrt_sylvester_cases, bdtypes=CPLX, gdtypes=CPLX),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
