"""Rule sweep of the ``fnx.lax.linalg`` primitives (see ``tests/rules_support.py``).

Inputs are well conditioned by construction: symmetric positive definite matrices for
cholesky, triangles with a dominant diagonal for triangular_solve, matrices whose
partial pivots are unambiguous for lu, distinct eigenvalues for eigh and distinct
singular values for svd. Eigenvectors, singular vectors and the columns of q are defined
up to a sign (a phase), so those lines check gauge-invariant functions of the outputs
(``|v|^2`` elementwise, ``u_ij vh_jj``, ``q_ij r_jj``; not ``q r`` itself, whose
second derivative is identically zero, which the finite differences' rounding noise
exceeds) with the values themselves.
Values against NumPy and SciPy are checked in ``tests/test_linalg.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from fnx import lax
from fnx.lax import linalg as la
from rules_support import C128, FLOAT, Case, Rule, run_rule

# float64 lines: the sweep runs with jax_enable_x64 on, as JAX's own suite runs its
# 64-bit tests
pytestmark = pytest.mark.x64

NO_GRAD = {}
NO_BATCH = {}

BATCH = st.sampled_from([(), (2,), (1, 2)])
SIDE = st.integers(1, 4)


def sides(dtype):
    """Matrix sides for the gauge-invariant lines: for complex dtypes at least 2, as a
    1 x 1 unitary factor is a pure phase whose |.|^2 is the constant 1 (zero derivatives,
    which check_grads's tolerance, relative to the exact values, cannot tell from the
    rounding noise of finite differences)."""
    return st.integers(2 if np.dtype(dtype).kind == "c" else 1, 4)


def _normal(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _unitary(rng, batch, n, dtype):
    q, r = np.linalg.qr(_normal(rng, batch + (n, n), dtype))
    return q


def _abs2(x):
    """|x|^2 elementwise, in x's dtype: invariant to the sign (phase) of each column."""
    return lax.mul(x, lax.conj(x)) if np.dtype(x.dtype).kind == "c" else lax.mul(x, x)


def _spd(rng, shape, dtype):
    a = _normal(rng, shape, dtype)
    n = shape[-1]
    return (a @ _mH(a) / n + np.eye(n)).astype(dtype)


@st.composite
def cholesky_cases(draw, dtype):
    shape = draw(BATCH) + (draw(SIDE),) * 2
    return Case(lambda x: la.cholesky(x, symmetrize_input=False),
                lambda rng: (_spd(rng, shape, dtype),), f"{list(shape)}")


@st.composite
def triangular_solve_cases(draw, dtype):
    batch, m, k = draw(BATCH), draw(SIDE), draw(SIDE)
    p = dict(left_side=draw(st.booleans()), lower=draw(st.booleans()),
             transpose_a=draw(st.booleans()), conjugate_a=draw(st.booleans()),
             unit_diagonal=draw(st.booleans()))
    bshape = batch + ((m, k) if p["left_side"] else (k, m))

    def make(rng):
        a = 0.3 * _normal(rng, batch + (m, m), dtype)
        d = rng.uniform(1.0, 2.0, batch + (m,)) * rng.choice([-1.0, 1.0], batch + (m,))
        a = a + d[..., None] * np.eye(m)
        return a.astype(dtype), _normal(rng, bshape, dtype).astype(dtype)
    return Case(lambda a, b: la.triangular_solve(a, b, **p), make,
                f"a{list(batch + (m, m))} b{list(bshape)} {p}")


@st.composite
def linear_solve_cases(draw, dtype):
    batch, m, k = draw(BATCH), draw(SIDE), draw(SIDE)
    transpose_a = draw(st.booleans())

    def make(rng):
        a = 0.3 * _normal(rng, batch + (m, m), dtype) + 2 * np.eye(m)
        return a.astype(dtype), _normal(rng, batch + (m, k), dtype).astype(dtype)
    return Case(lambda a, b: la.linear_solve(a, b, transpose_a=transpose_a), make,
                f"a{list(batch + (m, m))} b{list(batch + (m, k))} transpose_a={transpose_a}")


@st.composite
def lu_cases(draw, dtype):
    # sides >= 2: the lu of a 1 x 1 matrix is the matrix itself, whose zero second
    # derivative the reverse-mode check sees against float32 rounding of x / u * u
    shape = draw(BATCH) + (draw(st.integers(2, 4)),) * 2

    def make(rng):
        """Rows of a permuted dominant-diagonal matrix: each step's pivot is clear."""
        n = shape[-1]
        a = 0.2 * _normal(rng, shape, dtype)
        d = rng.uniform(2.0, 3.0, shape[:-1]) * rng.choice([-1.0, 1.0], shape[:-1])
        a = a + d[..., None] * np.eye(n)
        perm = rng.permutation(n)
        return (a[..., perm, :].astype(dtype),)
    return Case(la.lu, make, f"{list(shape)}")


def _well_posed(rng, batch, m, n, dtype):
    """An m x n matrix with singular values in [1, 3] that differ by >= 0.4."""
    k = min(m, n)
    s = 1.0 + 0.4 * np.sort(rng.permutation(k)) + rng.uniform(0.0, 0.1, k)
    u = _unitary(rng, batch, m, dtype)[..., :, :k]
    v = _unitary(rng, batch, n, dtype)[..., :, :k]
    return ((u * s) @ _mH(v)).astype(dtype)


def _paired(q, r):
    """q_ij r_jj (j < min(k, n)): a sign (phase) of column j of q that row j of r undoes
    cancels, so this couples q and r (u and vh) without depending on the gauge."""
    k = min(q.shape[-1], r.shape[-2], r.shape[-1])
    nd = q.ndim
    rk = lax.slice(r, (0,) * nd, tuple(r.shape[:-2]) + (k, k))
    eye = np.broadcast_to(np.eye(k, dtype=r.dtype), rk.shape)
    diag = lax.reduce_sum(lax.mul(rk, eye), (nd - 1,))
    qk = lax.slice(q, (0,) * nd, tuple(q.shape[:-1]) + (k,))
    return lax.mul(qk, lax.broadcast_in_dim(diag, qk.shape, tuple(range(nd - 2)) + (nd - 1,)))


def _qr_fn(full):
    def fn(x):
        q, r = la.qr(x, full_matrices=full)
        return _abs2(q), _abs2(r), _paired(q, r)
    return fn


@st.composite
def qr_cases(draw, dtype):
    batch, m, n = draw(BATCH), draw(sides(dtype)), draw(sides(dtype))
    full = draw(st.booleans()) if m <= n else False     # tall full q: no unique derivative
    return Case(_qr_fn(full), lambda rng: (_well_posed(rng, batch, m, n, dtype),),
                f"{list(batch + (m, n))} full_matrices={full}")


@st.composite
def qr_full_tall_cases(draw, dtype):
    batch, n = draw(BATCH), draw(st.integers(1, 3))
    m = n + draw(st.integers(1, 2))
    return Case(lambda x: la.qr(x, full_matrices=True),
                lambda rng: (_well_posed(rng, batch, m, n, dtype),), f"{list(batch + (m, n))}")


@st.composite
def eigh_cases(draw, dtype):
    batch, n = draw(BATCH), draw(sides(dtype))
    lower = draw(st.booleans())

    def make(rng):
        w = -2.0 + 0.5 * rng.permutation(n) + rng.uniform(0.0, 0.1, n)
        v = _unitary(rng, batch, n, dtype)
        x = (v * w) @ _mH(v)
        junk = _normal(rng, x.shape, dtype)     # the triangle eigh does not read
        keep = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
        return (np.where(keep, x, junk).astype(dtype),)

    def fn(x):
        v, w = la.eigh(x, lower=lower, symmetrize_input=False)
        return w, _abs2(v)
    return Case(fn, make, f"{list(batch + (n, n))} lower={lower}")


def _svd_fn(full, compute_uv):
    def fn(x):
        if not compute_uv:
            return la.svd(x, full_matrices=full, compute_uv=False)
        u, s, vh = la.svd(x, full_matrices=full)
        return s, _abs2(u), _abs2(vh), _paired(u, vh)
    return fn


@st.composite
def svd_cases(draw, dtype):
    batch, m, n = draw(BATCH), draw(sides(dtype)), draw(sides(dtype))
    compute_uv = draw(st.booleans())
    full = draw(st.booleans()) if m == n or not compute_uv else False
    return Case(_svd_fn(full, compute_uv), lambda rng: (_well_posed(rng, batch, m, n, dtype),),
                f"{list(batch + (m, n))} full_matrices={full} compute_uv={compute_uv}")


@st.composite
def svd_full_cases(draw, dtype):
    batch, k = draw(BATCH), draw(st.integers(1, 3))
    m, n = (k, k + draw(st.integers(1, 2)))[::draw(st.sampled_from([1, -1]))]
    return Case(lambda x: la.svd(x, full_matrices=True),
                lambda rng: (_well_posed(rng, batch, m, n, dtype),), f"{list(batch + (m, n))}")


# complex128 only: several checked outputs have identically zero second derivatives (q r,
# the lu of a 1 x 1 matrix) that complex64 rounding turns into ~1e-6, above the tolerance
# check_grads derives from the (zero) exact values
GDT = FLOAT + (C128,)

RULES = [
    Rule("cholesky", cholesky_cases, gdtypes=GDT),
    Rule("triangular_solve", triangular_solve_cases, gdtypes=GDT),
    Rule("linear_solve", linear_solve_cases, gdtypes=GDT),
    Rule("lu", lu_cases, gdtypes=GDT),
    Rule("qr", qr_cases, gdtypes=GDT),
    Rule("qr", qr_full_tall_cases, gdtypes=(), variant="full_matrices, tall",
         why="a full q of a tall matrix has arbitrary extra columns: no unique derivative"),
    Rule("eigh", eigh_cases, gdtypes=GDT),
    Rule("svd", svd_cases, gdtypes=GDT),
    Rule("svd", svd_full_cases, gdtypes=(), variant="full_matrices, not square",
         why="the extra singular vectors are arbitrary: no unique derivative"),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
