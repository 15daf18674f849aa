"""The LAPACK impls of ``lu`` (getrf) and ``triangular_solve`` (trsm), and what is built on
them (``solve``, ``inv``, ``det``, ``slogdet``, ``lu_solve``, ``cho_solve``): against NumPy
and SciPy on well-conditioned matrices of several shapes, dtypes and batches, against the
device path they replace on the host (``_lu_generic``, ``_ts_generic``: NumPy calls only),
singular inputs as before, jit equal to eager, and gradients against finite differences."""
import itertools

import numpy as np
import pytest
import scipy.linalg as sla

import fnx
import fnx.numpy as fnp
import fnx.scipy.linalg as fsl
from fnx.lax import linalg as la
from fnx.testing import check_grads

pytestmark = pytest.mark.x64

from linalg_testing import BATCHES, DTYPES, rand as _rand  # noqa: E402,F401


def _well(rng, shape, dtype):
    n = shape[-1]
    return (_rand(rng, shape, dtype) / np.sqrt(n) + 3 * np.eye(n)).astype(dtype)


def _tol(dtype):
    return 3e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def _close(got, want, dtype):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype))


@pytest.fixture(autouse=True)
def _x64():
    with fnx.enable_x64(True):
        yield


# --- lu: getrf --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("n", [1, 5, 40])
def test_lu_is_getrf_with_the_old_conventions(dtype, batch, n):
    rng = np.random.default_rng(n)
    x = _rand(rng, batch + (n, n), dtype)
    lu_, piv, perm = (np.asarray(v) for v in la.lu(x))
    assert lu_.shape == x.shape and lu_.dtype == dtype
    assert piv.shape == perm.shape == batch + (n,)
    assert piv.dtype == perm.dtype == np.int32
    for idx in np.ndindex(*batch):
        want_lu, want_piv = sla.lu_factor(x[idx])
        np.testing.assert_array_equal(piv[idx], want_piv)
        _close(lu_[idx], want_lu, dtype)
        l_ = np.tril(lu_[idx], -1) + np.eye(n)
        _close(l_ @ np.triu(lu_[idx]), x[idx][perm[idx]], dtype)
    # the NumPy-only path device buffers take gives the same pivots and permutation
    old = la._lu_generic(x)
    np.testing.assert_array_equal(old[1], piv)
    np.testing.assert_array_equal(old[2], perm)
    _close(old[0], lu_, dtype)


def test_lu_of_singular_matrices_factors_them_as_before():
    x = np.zeros((2, 4, 4))
    x[0, 0, 0], x[0, 1, 2] = 1.0, 1.0               # zero columns: pivots stay in place
    x[1] = np.outer(np.arange(1.0, 5.0), np.arange(1.0, 5.0))   # rank 1
    new, old = la.lu(x), la._lu_generic(x)
    for got, want in zip(new, old):
        np.testing.assert_array_equal(np.asarray(got), want)
    assert np.all(np.isfinite(np.asarray(new[0])))


def test_lu_of_empty_and_inputs_left_alone():
    lu_, piv, perm = la.lu(np.zeros((3, 0, 0), np.float32))
    assert lu_.shape == (3, 0, 0) and piv.shape == perm.shape == (3, 0)
    x = np.random.default_rng(0).standard_normal((4, 4))
    keep = x.copy()
    la.lu(x)
    np.testing.assert_array_equal(x, keep)


def test_lu_pivots_to_permutation():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 6))
    _, piv, perm = la.lu(x)
    np.testing.assert_array_equal(np.asarray(la.lu_pivots_to_permutation(piv, 6)), perm)
    jitted = fnx.jit(lambda p: la.lu_pivots_to_permutation(p, 6))
    np.testing.assert_array_equal(np.asarray(jitted(piv)), perm)
    # fewer swaps than rows: the rest stay in place
    got = la.lu_pivots_to_permutation(np.array([2, 2], np.int32), 4)
    np.testing.assert_array_equal(np.asarray(got), [2, 0, 1, 3])


# --- triangular_solve: trsm ---------------------------------------------------------------

_FLAGS = list(itertools.product([True, False], repeat=5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (2,)])
def test_triangular_solve_against_scipy_every_flag(dtype, batch):
    rng = np.random.default_rng(2)
    m, k = 6, 3
    a = _well(rng, batch + (m, m), dtype)
    b_left, b_right = _rand(rng, batch + (m, k), dtype), _rand(rng, batch + (k, m), dtype)
    layouts = {"C": a, "F": np.swapaxes(np.swapaxes(a, -1, -2).copy(), -1, -2)}
    for (left, lower, trans, conj, unit), (name, aa) in itertools.product(
            _FLAGS, layouts.items()):
        b = b_left if left else b_right
        got = np.asarray(la.triangular_solve(aa, b, left_side=left, lower=lower,
                                             transpose_a=trans, conjugate_a=conj,
                                             unit_diagonal=unit))
        assert got.dtype == dtype and got.shape == b.shape
        for idx in np.ndindex(*batch):
            t = np.tril(a[idx]) if lower else np.triu(a[idx])
            if unit:
                np.fill_diagonal(t, 1)
            op = t.T if trans else t
            op = op.conj() if conj else op
            want = (np.linalg.solve(op, b[idx]) if left
                    else np.linalg.solve(op.T, b[idx].T).T)
            np.testing.assert_allclose(got[idx], want, rtol=_tol(dtype), atol=_tol(dtype),
                                       err_msg=f"{name} left={left} lower={lower} "
                                       f"trans={trans} conj={conj} unit={unit}")
        if not batch and not trans and not conj and left:
            ref = sla.solve_triangular(aa, b, lower=lower, unit_diagonal=unit)
            _close(got, ref, dtype)


def test_triangular_solve_singular_gives_inf_nan_as_before():
    t = np.triu(np.ones((3, 3)))
    t[1, 1] = 0.0
    b = np.ones((3, 2))
    kw = dict(left_side=True, lower=False, transpose_a=False, conjugate_a=False,
              unit_diagonal=False)
    got = np.asarray(la.triangular_solve(t, b, **kw))
    with np.errstate(all="ignore"):
        want = la._ts_generic(t, b, **kw)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert not np.all(np.isfinite(got))
    np.testing.assert_array_equal(got[2], [1.0, 1.0])


def test_triangular_solve_leaves_b_alone_and_takes_empty():
    rng = np.random.default_rng(3)
    a, b = _well(rng, (4, 4), np.float64), rng.standard_normal((4, 2))
    keep = b.copy()
    la.triangular_solve(a, b, left_side=True, lower=True)
    np.testing.assert_array_equal(b, keep)
    out = la.triangular_solve(np.eye(4), np.zeros((4, 0)), left_side=True, lower=True)
    assert out.shape == (4, 0)


# --- what is built on them ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_solve_inv_det_slogdet_against_numpy(dtype, batch):
    rng = np.random.default_rng(4)
    n = 7
    a = _well(rng, batch + (n, n), dtype)
    b = _rand(rng, batch + (n, 3), dtype)
    v = _rand(rng, (n,), dtype)
    _close(fnp.linalg.solve(a, b), np.linalg.solve(a, b), dtype)
    _close(fnp.linalg.solve(a, v), np.linalg.solve(a, v[..., None])[..., 0]
           if batch else np.linalg.solve(a, v), dtype)
    _close(fnp.linalg.inv(a), np.linalg.inv(a), dtype)
    _close(fnp.linalg.det(a), np.linalg.det(a), dtype)
    sign, logdet = fnp.linalg.slogdet(a)
    want_sign, want_log = np.linalg.slogdet(a)
    _close(sign, want_sign, dtype)
    _close(logdet, want_log, dtype)


def test_det_sign_follows_the_row_swaps():
    p = np.eye(4)[[1, 0, 3, 2]]                     # two swaps: det +1
    q = np.eye(4)[[1, 2, 3, 0]]                     # a 4-cycle: det -1
    np.testing.assert_allclose(np.asarray(fnp.linalg.det(np.stack([p, q]))), [1.0, -1.0])
    sign, logdet = fnp.linalg.slogdet(np.stack([p, q]))
    np.testing.assert_allclose(np.asarray(sign), [1.0, -1.0])
    np.testing.assert_allclose(np.asarray(logdet), [0.0, 0.0])


def test_singular_matrices_as_before():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert float(fnp.linalg.det(s)) == 0.0
    sign, logdet = fnp.linalg.slogdet(s)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert not np.all(np.isfinite(np.asarray(fnp.linalg.inv(s))))
    assert not np.all(np.isfinite(np.asarray(fnp.linalg.solve(s, np.ones(2)))))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
@pytest.mark.parametrize("shape", [(5, 5), (2, 6, 4), (4, 6), (3, 3)])
def test_scipy_lu_lu_solve_cho_solve(dtype, shape):
    rng = np.random.default_rng(5)
    a = _rand(rng, shape, dtype)
    p, l_, u = (np.asarray(v) for v in fsl.lu(a))
    _close(p @ l_ @ u, a, dtype)
    if len(shape) == 2:
        wp, wl, wu = sla.lu(a)
        _close(p, wp, dtype)
        _close(l_, wl, dtype)
        _close(u, wu, dtype)
        pl, u2 = fsl.lu(a, permute_l=True)
        _close(pl, wp @ wl, dtype)
        _close(u2, wu, dtype)
    if shape[-1] != shape[-2]:
        return
    n = shape[-1]
    a = _well(rng, shape, dtype)
    b = _rand(rng, shape[:-1] + (2,), dtype)
    lu_piv = fsl.lu_factor(a)
    for trans in (0, 1, 2):
        op = a if trans == 0 else np.swapaxes(a, -1, -2)
        op = op.conj() if trans == 2 else op
        _close(fsl.lu_solve(lu_piv, b, trans=trans), np.linalg.solve(op, b), dtype)
    spd = (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)
    for lower in (True, False):
        c = fsl.cho_factor(spd, lower=lower)
        _close(fsl.cho_solve(c, b), np.linalg.solve(spd, b), dtype)
        if len(shape) == 2:
            _close(fsl.cho_solve(c, b), sla.cho_solve(sla.cho_factor(spd, lower=lower), b),
                   dtype)


def test_jit_equals_eager():
    rng = np.random.default_rng(6)
    a = _well(rng, (2, 6, 6), np.float64)
    b = rng.standard_normal((2, 6, 2))
    t = np.tril(a)
    fns = {
        "solve": (fnp.linalg.solve, (a, b)),
        "inv": (fnp.linalg.inv, (a,)),
        "det": (fnp.linalg.det, (a,)),
        "slogdet": (fnp.linalg.slogdet, (a,)),
        "lu": (la.lu, (a,)),
        "scipy lu": (fsl.lu, (a,)),
        "lu_solve": (lambda x, y: fsl.lu_solve(fsl.lu_factor(x), y, trans=1), (a, b)),
        "triangular_solve": (lambda x, y: la.triangular_solve(
            x, y, left_side=True, lower=True, transpose_a=True), (t, b)),
        "cho_solve": (lambda x, y: fsl.cho_solve((x, True), y), (t, b)),
    }
    for name, (f, args) in fns.items():
        want = fnx.tree_util.tree_leaves(f(*args))
        got = fnx.tree_util.tree_leaves(fnx.jit(f)(*args))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12,
                                       err_msg=name)
        vm = fnx.tree_util.tree_leaves(fnx.vmap(f)(*args))
        for g, w in zip(vm, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12,
                                       err_msg=f"vmap {name}")


# --- gradients ------------------------------------------------------------------------------

def test_gradients_match_finite_differences():
    rng = np.random.default_rng(7)
    a = _well(rng, (4, 4), np.float64)
    b = rng.standard_normal((4, 2))
    t = np.tril(a)
    spd = a @ a.T + 4 * np.eye(4)
    c = np.linalg.cholesky(spd)
    check_grads(fnp.linalg.solve, (a, b), order=1)
    check_grads(fnp.linalg.inv, (a,), order=1)
    check_grads(fnp.linalg.det, (a,), order=2)
    check_grads(lambda x: fnp.linalg.slogdet(x)[1], (a,), order=1)
    check_grads(lambda x, y: la.triangular_solve(x, y, left_side=True, lower=True,
                                                 transpose_a=True), (t, b), order=1)
    check_grads(lambda x, y: la.triangular_solve(x, y.T, left_side=False, lower=False,
                                                 unit_diagonal=True), (a, b), order=1)
    check_grads(lambda x, y: fsl.cho_solve((x, True), y), (c, b), order=1)
    check_grads(lambda x, y: fsl.lu_solve(fsl.lu_factor(x), y), (a, b), order=1)
    # batched, through vmap
    check_grads(fnx.vmap(fnp.linalg.det), (np.stack([a, a.T]),), order=1)
