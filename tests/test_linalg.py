"""``fnx.numpy.linalg`` and ``fnx.lax.linalg`` against NumPy and SciPy: values on stacks of
matrices in float32/float64/complex, gradients (``check_grads``), errors, ``check_op``
on the fnx.numpy.linalg functions, and a Gaussian-process marginal likelihood fitted
through ``cholesky`` and ``triangular_solve``. (The primitives' rules are swept in
``tests/test_rules_linalg.py``.)"""
import math

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx.errors import ShapeError
from fnx.lax import linalg as la
from fnx.testing import Example, check_grads, check_op

# float64/complex128 references to 1e-10: the module runs with jax_enable_x64 on, as JAX's
# suite does (float32 inputs stay float32 under it); the default mode is checked in
# test_default_mode_narrows_64_bit_inputs_alike.
pytestmark = pytest.mark.x64

LA = fnp.linalg
from linalg_testing import BATCHES, DTYPES, rand as _rand  # noqa: E402,F401


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _well(rng, shape, dtype):
    """Square matrices with a dominant diagonal (condition number ~ a few). The noise is
    bounded (a normal draw 3 sigma out made a 1 x 1 matrix of 0.02, where finite
    differences of a negative power lose the 1e-6 they are checked to)."""
    n = shape[-1]
    noise = _rand(rng, shape, dtype)
    noise = np.clip(noise.real, -2, 2) + (1j * np.clip(noise.imag, -2, 2) if noise.dtype.kind
                                          == "c" else 0)
    return (noise / np.sqrt(n) + 3 * np.eye(n)).astype(dtype)


def _spd(rng, shape, dtype):
    a = _rand(rng, shape, dtype)
    return (a @ _mH(a) / shape[-1] + np.eye(shape[-1])).astype(dtype)


def _tol(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def close(got, want, dtype, scale=1.0):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=_tol(dtype) * scale, atol=_tol(dtype) * scale)


# --- values against NumPy ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_square_functions_match_numpy(dtype, batch):
    rng = np.random.default_rng(0)
    a = _well(rng, batch + (4, 4), dtype)
    b = _rand(rng, batch + (4, 2), dtype)
    v = _rand(rng, (4,), dtype)
    rdt = np.empty((), dtype).real.dtype
    for f, ref in ((LA.inv, np.linalg.inv), (LA.det, np.linalg.det),
                   (lambda x: LA.matrix_power(x, 3), lambda x: np.linalg.matrix_power(x, 3)),
                   (lambda x: LA.matrix_power(x, -2), lambda x: np.linalg.matrix_power(x, -2)),
                   (lambda x: LA.matrix_power(x, 0), lambda x: np.linalg.matrix_power(x, 0))):
        out = f(a)
        assert out.dtype == dtype
        close(out, ref(a), dtype)
        close(fnx.jit(f)(a), ref(a), dtype)
    close(LA.solve(a, b), np.linalg.solve(a, b), dtype)
    close(LA.solve(a, v), np.linalg.solve(a, v), dtype)
    sign, logdet = LA.slogdet(a)
    ref = np.linalg.slogdet(a)
    assert isinstance(LA.slogdet(a), LA.SlogdetResult) and logdet.dtype == rdt
    close(sign, ref.sign, dtype)
    close(logdet, ref.logabsdet, dtype)
    s = _spd(rng, batch + (4, 4), dtype)
    close(LA.cholesky(s), np.linalg.cholesky(s), dtype)
    close(LA.cholesky(s, upper=True), np.linalg.cholesky(s, upper=True), dtype)
    w, vecs = LA.eigh(s)
    close(w, np.linalg.eigvalsh(s), dtype, 10)
    assert w.dtype == rdt
    close((np.asarray(vecs) * np.asarray(w)[..., None, :]) @ _mH(np.asarray(vecs)), s, dtype, 10)
    close(LA.eigvalsh(s), np.linalg.eigvalsh(s), dtype, 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 2), (3, 3), (2, 5, 3), (2, 3, 5)])
def test_rectangular_functions_match_numpy(dtype, shape):
    rng = np.random.default_rng(1)
    a = _rand(rng, shape, dtype)
    for mode in ("reduced", "complete"):
        q, r = LA.qr(a, mode=mode)
        qn, rn = np.linalg.qr(a, mode=mode)
        close(q, qn, dtype, 10)
        close(r, rn, dtype, 10)
    close(LA.qr(a, mode="r"), np.linalg.qr(a, mode="r"), dtype, 10)
    for full in (True, False):
        u, s, vh = LA.svd(a, full_matrices=full)
        un, sn, vhn = np.linalg.svd(a, full_matrices=full)
        assert u.shape == un.shape and vh.shape == vhn.shape
        close(s, sn, dtype, 10)
        k = s.shape[-1]
        u, vh = np.asarray(u), np.asarray(vh)
        close((u[..., :k] * np.asarray(s)[..., None, :]) @ vh[..., :k, :], a, dtype, 10)
    close(LA.svdvals(a), np.linalg.svdvals(a), dtype, 10)
    close(LA.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False), dtype, 10)
    close(LA.pinv(a), np.linalg.pinv(a), dtype, 10)
    close(fnx.jit(LA.pinv)(a), np.linalg.pinv(a), dtype, 10)
    for o in (2, -2, "nuc"):
        close(LA.matrix_norm(a, ord=o), np.linalg.matrix_norm(a, ord=o), dtype, 10)
        close(LA.matrix_norm(a, ord=o, keepdims=True),
              np.linalg.matrix_norm(a, ord=o, keepdims=True), dtype, 10)
    if a.ndim == 3:
        for o in (2, -2, "nuc"):
            for axis in ((0, 2), (2, 1)):
                close(LA.norm(a, o, axis, True), np.linalg.norm(a, o, axis, True), dtype, 10)
    else:
        close(LA.norm(a, "nuc"), np.linalg.norm(a, "nuc"), dtype, 10)


def test_rank_lstsq_kron():
    rng = np.random.default_rng(2)
    low = rng.standard_normal((3, 5, 2)) @ rng.standard_normal((3, 2, 4))   # rank 2
    np.testing.assert_array_equal(LA.matrix_rank(low), np.linalg.matrix_rank(low))
    np.testing.assert_array_equal(LA.matrix_rank(low, tol=1e-3), [2, 2, 2])
    np.testing.assert_array_equal(LA.matrix_rank(np.eye(4)), 4)
    assert int(LA.matrix_rank(np.zeros(3))) == 0 and int(LA.matrix_rank(np.ones(3))) == 1
    np.testing.assert_allclose(LA.pinv(low), np.linalg.pinv(low), atol=1e-10)
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    x, resid, rank, s = LA.lstsq(a, b)
    xn, rn, kn, sn = np.linalg.lstsq(a, b)
    for got, want in ((x, xn), (resid, rn), (s, sn)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert int(rank) == kn
    x1, r1, _, _ = LA.lstsq(a, b[:, 0])
    np.testing.assert_allclose(x1, np.linalg.lstsq(a, b[:, 0])[0], rtol=1e-10)
    assert r1.shape == (1,)  # as JAX (and NumPy when rank == N < M)
    xl, _, kl, _ = LA.lstsq(low[0], b[:5])          # rank deficient: minimum-norm solution
    np.testing.assert_allclose(xl, np.linalg.lstsq(low[0], b[:5])[0], atol=1e-10)
    assert int(kl) == 2
    for sa, sb in (((2, 3), (4, 1)), ((3,), (2, 2)), ((2, 1, 2), (3, 2))):
        p, q = rng.standard_normal(sa), rng.standard_normal(sb)
        np.testing.assert_allclose(LA.kron(p, q), np.kron(p, q), rtol=1e-12)
    assert fnp.linalg.kron(np.ones(2, np.int32), np.ones(2, np.int32)).dtype == np.int32


def test_singular_and_not_positive_definite():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert float(LA.det(a)) == 0.0
    sign, logdet = LA.slogdet(a)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert np.isnan(np.asarray(LA.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]])))).all()
    stack = np.stack([np.eye(2), -np.eye(2)])                    # one PD, one not
    out = np.asarray(la.cholesky(stack))
    np.testing.assert_array_equal(out[0], np.eye(2))
    assert np.isnan(out[1]).all()
    assert np.isinf(np.asarray(la.triangular_solve(np.zeros((2, 2)), np.ones((2, 1)),
                                                    left_side=True, lower=True))).any()


def test_solve_broadcasts_batch_dims():
    rng = np.random.default_rng(3)
    a, b = _well(rng, (2, 1, 3, 3), np.float64), rng.standard_normal((4, 3, 2))
    np.testing.assert_allclose(LA.solve(a, b), np.linalg.solve(a, b), rtol=1e-10)
    np.testing.assert_allclose(LA.solve(np.eye(3, dtype=np.int32), np.arange(3)), np.arange(3))


# --- fnx.lax.linalg against SciPy ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_solve_matches_scipy(dtype):
    rng = np.random.default_rng(4)
    a = _well(rng, (2, 4, 4), dtype)
    bl, br = _rand(rng, (2, 4, 3), dtype), _rand(rng, (2, 3, 4), dtype)
    for lower in (True, False):
        for transpose_a in (True, False):
            for conjugate_a in (True, False):
                for unit in (True, False):
                    t = np.tril(a) if lower else np.triu(a)
                    if unit:
                        t[..., np.arange(4), np.arange(4)] = 1
                    op = np.swapaxes(t, -1, -2) if transpose_a else t
                    op = np.conj(op) if conjugate_a else op
                    kw = dict(lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
                              unit_diagonal=unit)
                    x = la.triangular_solve(a, bl, left_side=True, **kw)
                    close(np.asarray(op) @ np.asarray(x), bl, dtype, 10)
                    if not conjugate_a:
                        ref = np.stack([sla.solve_triangular(
                            a[i], bl[i], trans=1 if transpose_a else 0, lower=lower,
                            unit_diagonal=unit) for i in range(2)])
                        close(x, ref, dtype, 10)
                    y = la.triangular_solve(a, br, left_side=False, **kw)
                    close(np.asarray(y) @ op, br, dtype, 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_and_cholesky_match_scipy(dtype):
    rng = np.random.default_rng(5)
    a = _rand(rng, (3, 5, 5), dtype)
    lu, piv, perm = la.lu(a)
    assert piv.dtype == perm.dtype == np.int32
    for i in range(3):
        lu_ref, piv_ref = sla.lu_factor(a[i])
        close(lu[i], lu_ref, dtype, 10)
        np.testing.assert_array_equal(piv[i], piv_ref)
        p = sla.lu(a[i])[0]
        np.testing.assert_allclose(np.asarray(a[i])[np.asarray(perm[i])], p.T @ a[i])
    s = _spd(rng, (3, 4, 4), dtype)
    close(la.cholesky(s), np.stack([sla.cholesky(m, lower=True) for m in s]), dtype)
    v, w = la.eigh(s)
    close(w, np.stack([sla.eigh(m, eigvals_only=True) for m in s]), dtype, 10)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_blocked_lu_matches_scipy_across_panels(dtype):
    """n = 70: two full 32-column panels and a partial one (the trailing updates and the
    panel solves), stacked; a rank-deficient matrix keeps its zero columns finite."""
    rng = np.random.default_rng(7)
    a = _rand(rng, (2, 70, 70), dtype)
    lu, piv, perm = la.lu(a)
    for i in range(2):
        lu_ref, piv_ref = sla.lu_factor(a[i])
        close(lu[i], lu_ref, dtype, 1000)
        np.testing.assert_array_equal(piv[i], piv_ref)
    x = np.asarray(fnp.linalg.solve(a, a[..., :3]))
    np.testing.assert_allclose(x[:, :3, :], np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-9)
    low_rank = np.zeros((40, 40), dtype)
    low_rank[:, :5] = _rand(rng, (40, 5), dtype)
    assert np.isfinite(np.asarray(la.lu(low_rank)[0])).all()


# --- gradients -------------------------------------------------------------------------------

def test_gradients_of_linalg_functions():
    rng = np.random.default_rng(6)
    a = _well(rng, (2, 3, 3), np.float64)
    b = rng.standard_normal((2, 3, 2))
    s = _spd(rng, (2, 3, 3), np.float64)
    tall = rng.standard_normal((2, 4, 3)) + np.eye(4, 3) * 3
    check_grads(LA.det, (a,))
    check_grads(lambda x: LA.slogdet(x).logabsdet, (a,))
    check_grads(LA.inv, (a,))
    check_grads(LA.solve, (a, b))
    check_grads(lambda x, y: LA.solve(x, y[0, :, 0]), (a, b))
    check_grads(lambda x: LA.matrix_power(x, -2), (a,))
    check_grads(LA.cholesky, (s,))
    check_grads(lambda x: LA.eigh(x).eigenvalues, (s,))
    check_grads(LA.eigvalsh, (s,))
    check_grads(LA.svdvals, (tall,))
    check_grads(LA.pinv, (tall,))
    check_grads(lambda x: LA.matrix_norm(x, ord=2), (tall,))
    check_grads(lambda x: LA.matrix_norm(x, ord="nuc"), (tall,))
    check_grads(lambda x: LA.norm(x[0], -2), (tall,))
    check_grads(lambda x, y: LA.lstsq(x, y)[:2], (tall[0], rng.standard_normal((4, 2))))
    check_grads(LA.kron, (a[0], b[0]))
    # eigenvectors and singular vectors through functions that do not depend on their signs
    check_grads(lambda x: (lambda w, v: (v * w[..., None, :] ** 2) @ fnp.swapaxes(v, -1, -2))(
        *LA.eigh(x)), (s,))
    check_grads(lambda x: (lambda u, sv, vh: fnp.abs(u[..., 0]) + sv[..., :1])(
        *LA.svd(x, full_matrices=False)), (tall,), order=1)
    # complex
    c = _well(rng, (2, 3, 3), np.complex128)
    check_grads(LA.det, (c,))
    check_grads(LA.inv, (c,))
    check_grads(lambda x: LA.slogdet(x).logabsdet, (c,))


def test_det_gradient_is_det_times_inverse_transpose():
    rng = np.random.default_rng(7)
    a = _well(rng, (3, 4, 4), np.float64)
    g = fnx.grad(lambda x: LA.det(x).sum())(a)
    want = np.linalg.det(a)[:, None, None] * np.swapaxes(np.linalg.inv(a), -1, -2)
    np.testing.assert_allclose(g, want, rtol=1e-10)
    g = fnx.jit(fnx.grad(lambda x: LA.slogdet(x).logabsdet.sum()))(a)
    np.testing.assert_allclose(g, np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-10)


def test_vmap_and_jit_of_factorizations():
    rng = np.random.default_rng(8)
    s = _spd(rng, (4, 3, 3), np.float32)
    out = fnx.vmap(LA.cholesky, in_axes=2, out_axes=1)(np.moveaxis(s, 0, 2))
    np.testing.assert_allclose(np.moveaxis(np.asarray(out), 1, 0), np.linalg.cholesky(s),
                               rtol=1e-5, atol=1e-6)
    f = fnx.jit(fnx.vmap(lambda x, y: LA.solve(x, y), in_axes=(0, None)))
    b = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(f(s, b), np.linalg.solve(s, b), rtol=1e-4, atol=1e-5)
    g = fnx.vmap(fnx.grad(lambda x: LA.slogdet(x).logabsdet))(s)
    np.testing.assert_allclose(g, np.linalg.inv(s).swapaxes(-1, -2), rtol=1e-4, atol=1e-5)


# --- errors ----------------------------------------------------------------------------------

def test_errors_name_the_op_and_shapes():
    sq, rect = np.ones((3, 3)), np.ones((2, 3))
    for f in (LA.inv, LA.det, LA.slogdet, LA.cholesky, LA.eigh, LA.eigvalsh,
              lambda x: LA.matrix_power(x, 2)):
        with pytest.raises(ShapeError, match="square"):
            f(rect)
    with pytest.raises(ShapeError, match=r"rank >= 2"):
        LA.svd(np.ones(3))
    with pytest.raises(ShapeError, match=r"solve.*\(3, 3\).*x2"):
        LA.solve(sq, np.ones(4))
    with pytest.raises(ShapeError, match="solve"):
        LA.solve(sq, np.ones((2, 4, 2)))
    with pytest.raises(ShapeError, match=r"triangular_solve.*f64\[3,3\].*f64\[2,2\]"):
        la.triangular_solve(sq, np.ones((2, 2)), left_side=True)
    with pytest.raises(ShapeError, match=r"triangular_solve.*one dtype"):
        la.triangular_solve(sq, np.ones((3, 3), np.float32))
    with pytest.raises(ShapeError, match=r"cholesky.*float32.*f16"):
        la.cholesky(np.eye(2, dtype=np.float16), symmetrize_input=False)
    with pytest.raises(TypeError, match=r"inv.*f16"):
        LA.inv(np.eye(2, dtype=np.float16))
    with pytest.raises(ShapeError, match="lstsq"):
        LA.lstsq(sq, np.ones(4))
    with pytest.raises(ValueError, match="mode"):
        LA.qr(sq, mode="full")
    with pytest.raises(TypeError, match="matrix_power"):
        LA.matrix_power(sq, 1.5)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        fnx.grad(lambda x: LA.svd(x).U.sum())(rect)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        fnx.grad(lambda x: LA.qr(x, mode="complete").Q.sum())(rect.T)
    assert LA.det(np.eye(3, dtype=np.int32)).dtype == np.float32


# --- check_op on fnx.numpy.linalg functions against NumPy -----------------------------------------

def _line(make, dtypes=(np.float32, np.float64), sides=(1, 4)):
    """Examples of ``make(rng, batch, n, dtype) -> operands``, with vmap lanes alike."""
    @st.composite
    def draw(d):
        dtype = np.dtype(d(st.sampled_from(dtypes)))
        batch = d(st.sampled_from([(), (2,)]))
        n = d(st.integers(*sides))
        seed = d(st.integers(0, 2 ** 32 - 1))
        ex = Example(*make(np.random.default_rng(seed), batch, n, dtype))
        return ex.lanes(lambda k: make(np.random.default_rng(seed + k), batch, n, dtype))
    return draw()


def _distinct_sv(rng, batch, n, dtype):
    q1, _ = np.linalg.qr(rng.standard_normal(batch + (n + 1, n + 1)))
    q2, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    s = 1.0 + 0.5 * rng.permutation(n)
    return ((q1[..., :, :n] * s) @ q2).astype(dtype)


def _distinct_eig(rng, batch, n, dtype):
    q, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    return ((q * (0.5 * rng.permutation(n) - 1.0)) @ _mH(q)).astype(dtype)


SQUARE = lambda rng, b, n, dt: (_well(rng, b + (n, n), dt),)       # noqa: E731
LINES = [
    ("inv", LA.inv, np.linalg.inv, _line(SQUARE)),
    # n >= 2: the det of a 1 x 1 matrix is linear, and its zero second derivative is
    # below the float32 rounding of the reverse-mode check
    ("det", LA.det, np.linalg.det, _line(SQUARE, sides=(2, 4))),
    ("slogdet", LA.slogdet, lambda x: tuple(np.linalg.slogdet(x)), _line(SQUARE)),
    ("solve", LA.solve, np.linalg.solve, _line(
        lambda rng, b, n, dt: (_well(rng, b + (n, n), dt), _rand(rng, b + (n, 2), dt)))),
    ("matrix_power", lambda x: LA.matrix_power(x, -3),
     lambda x: np.linalg.matrix_power(x, -3), _line(SQUARE)),
    ("cholesky", LA.cholesky, np.linalg.cholesky,
     _line(lambda rng, b, n, dt: (_spd(rng, b + (n, n), dt),))),
    ("eigvalsh", LA.eigvalsh, np.linalg.eigvalsh, _line(
        lambda rng, b, n, dt: (_distinct_eig(rng, b, n, dt),))),
    ("svdvals", LA.svdvals, np.linalg.svdvals, _line(
        lambda rng, b, n, dt: (_distinct_sv(rng, b, n, dt),))),
    ("pinv", LA.pinv, np.linalg.pinv, _line(
        lambda rng, b, n, dt: (_distinct_sv(rng, b, n, dt),))),
    ("matrix_norm[2]", lambda x: LA.matrix_norm(x, ord=2),
     lambda x: np.linalg.matrix_norm(x, ord=2), _line(
        lambda rng, b, n, dt: (_distinct_sv(rng, b, n, dt),))),
    ("kron", LA.kron, np.kron, _line(
        lambda rng, b, n, dt: (_rand(rng, (n, 2), dt), _rand(rng, (2, n), dt)))),
]


@pytest.mark.parametrize("name,fn,ref,args", LINES, ids=[line[0] for line in LINES])
def test_check_op_linalg(name, fn, ref, args):
    check_op(fn, args, reference=ref, name=f"fnx.numpy.linalg.{name}")


# --- model level: a Gaussian process fitted by its marginal likelihood ----------------------------

def _gp_data(n=12, d=2):
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 2, (n, d))
    y = np.sin(x @ np.array([1.5, -0.7])[:d]) + 0.1 * rng.standard_normal(n)
    return x, y


def gp_nll(params, x, y):
    """Negative log marginal likelihood of y ~ N(0, K + noise I), K an RBF kernel;
    params = log(lengthscale, variance, noise)."""
    ls, var, noise = fnp.exp(params[0]), fnp.exp(params[1]), fnp.exp(params[2])
    d2 = fnp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
    n = x.shape[0]
    k = var * fnp.exp(-0.5 * d2 / ls ** 2) + (noise + 1e-6) * fnp.eye(n, dtype=x.dtype)
    chol = la.cholesky(k)
    alpha = la.triangular_solve(chol, y[:, None], left_side=True, lower=True)
    return (0.5 * fnp.sum(alpha ** 2) + fnp.sum(fnp.log(fnp.diagonal(chol)))
            + 0.5 * n * math.log(2 * math.pi))


def _gp_nll_ref(params, x, y):
    from scipy.stats import multivariate_normal
    ls, var, noise = np.exp(params)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    k = var * np.exp(-0.5 * d2 / ls ** 2) + (noise + 1e-6) * np.eye(len(x))
    return -multivariate_normal(np.zeros(len(x)), k).logpdf(y)


def test_gaussian_process_likelihood_and_gradient():
    x, y = _gp_data()
    sets = np.log(np.array([[0.7, 1.0, 0.1], [1.5, 0.5, 0.05], [0.3, 2.0, 0.5],
                            [1.0, 1.0, 1.0]]))
    for p in sets:
        np.testing.assert_allclose(gp_nll(p, x, y), _gp_nll_ref(p, x, y), rtol=1e-10)
        np.testing.assert_allclose(fnx.jit(gp_nll)(p, x, y), _gp_nll_ref(p, x, y), rtol=1e-10)
    p = sets[0]
    check_grads(lambda q: gp_nll(q, x, y), (p,), order=2)             # eager, both modes
    check_grads(fnx.jit(lambda q: gp_nll(q, x, y)), (p,), order=2)    # under jit
    g = fnx.grad(gp_nll)(p, x, y)
    eps = 1e-6
    fd = [(_gp_nll_ref(p + eps * e, x, y) - _gp_nll_ref(p - eps * e, x, y)) / (2 * eps)
          for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)           # against SciPy's NLL
    # vmapped over parameter sets, and under jit
    vals, grads = fnx.jit(fnx.vmap(fnx.value_and_grad(gp_nll), in_axes=(0, None, None)))(
        sets, x, y)
    np.testing.assert_allclose(vals, [_gp_nll_ref(q, x, y) for q in sets], rtol=1e-10)
    np.testing.assert_allclose(grads, [np.asarray(fnx.grad(gp_nll)(q, x, y)) for q in sets],
                               rtol=1e-9, atol=1e-12)
    check_grads(lambda q: fnx.vmap(gp_nll, in_axes=(0, None, None))(q, x, y), (sets,),
                order=1)
    # a few steps of gradient descent lower the NLL
    step = fnx.jit(fnx.value_and_grad(gp_nll))
    q, first = sets[0], None
    for _ in range(20):
        v, gq = step(q, x, y)
        first = v if first is None else first
        q = q - 0.05 * np.asarray(gq)
    assert float(gp_nll(q, x, y)) < float(first)


def test_default_mode_narrows_64_bit_inputs_alike():
    """With x64 off (JAX's default) float64/complex128 operands narrow to 32 bits, and
    eager, jit, eval_shape, vmap and grad agree on the dtypes; the GP likelihood and its
    gradient hold to float32 accuracy."""
    rng = np.random.default_rng(4)
    fns = {"inv": LA.inv, "det": LA.det, "slogdet": lambda x: LA.slogdet(x).logabsdet,
           "cholesky": LA.cholesky, "qr": lambda x: LA.qr(x).R, "pinv": LA.pinv,
           "svdvals": LA.svdvals, "eigh": lambda x: LA.eigh(x).eigenvectors,
           "eigvalsh": LA.eigvalsh}
    fns = {k: (lambda f: lambda x, b: f(x))(f) for k, f in fns.items()}
    fns["solve"] = LA.solve
    fns["triangular_solve"] = lambda x, b: la.triangular_solve(x, b, left_side=True, lower=True)
    with fnx.enable_x64(False):
        for dt in (np.float64, np.complex128):
            s, b = _spd(rng, (2, 3, 3), dt), _rand(rng, (2, 3, 2), dt)
            for name, f in fns.items():
                eager = f(s, b)
                kinds = {np.dtype(eager.dtype), np.dtype(fnx.jit(f)(s, b).dtype),
                         np.dtype(fnx.eval_shape(f, s, b).dtype),
                         np.dtype(fnx.vmap(f)(s, b).dtype)}
                assert len(kinds) == 1, (name, dt, kinds)
                assert eager.dtype.itemsize == (8 if eager.dtype.kind == "c" else 4), (name, dt)
        a = _well(rng, (2, 3, 3), np.float64)
        g = fnx.grad(lambda x: LA.slogdet(x).logabsdet.sum())(a)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-4,
                                   atol=1e-5)
        x, y = _gp_data()
        p = np.log(np.array([0.7, 1.0, 0.1]))
        for f in (gp_nll, fnx.jit(gp_nll)):
            out = f(p, x, y)
            assert out.dtype == np.float32
            np.testing.assert_allclose(out, _gp_nll_ref(p, x, y), rtol=1e-5)
        eps = 1e-6
        fd = [(_gp_nll_ref(p + eps * e, x, y) - _gp_nll_ref(p - eps * e, x, y)) / (2 * eps)
              for e in np.eye(3)]
        g = fnx.grad(gp_nll)(p, x, y)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, fd, rtol=1e-3, atol=1e-4)


def test_jax_call_forms_and_keywords():
    """JAX 0.10.2's signatures (found by JAX's linalg_test): keywords JAX takes, positional
    UPLO/mode/rtol, and its errors for conflicting tolerances."""
    rng = np.random.default_rng(7)
    a = _spd(rng, (3, 3), np.float64)
    lower_only = np.tril(a) + np.triu(np.full((3, 3), 9.0), 1)   # garbage above
    np.testing.assert_allclose(LA.cholesky(lower_only, symmetrize_input=False),
                               np.linalg.cholesky(a), rtol=1e-10)
    for method in (None, "lu", "qr"):
        np.testing.assert_allclose(LA.slogdet(a, method=method)[1],
                                   np.linalg.slogdet(a)[1], rtol=1e-10)
    with pytest.raises(ValueError, match="Unknown slogdet method"):
        LA.slogdet(a, method="svd")
    np.testing.assert_allclose(LA.matrix_power(a, n=2), a @ a, rtol=1e-10)
    np.testing.assert_allclose(LA.eigh(a, "U").eigenvalues, np.linalg.eigvalsh(a), rtol=1e-10)
    np.testing.assert_allclose(LA.eigvalsh(a, symmetrize_input=False),
                               np.linalg.eigvalsh(a), rtol=1e-10)
    assert LA.qr(a, "r").shape == (3, 3)
    with pytest.raises(ValueError, match="only one of rtol and rcond"):
        LA.pinv(a, rtol=1e-2, rcond=1e-2)
    with pytest.raises(ValueError, match="only one of tol or rtol"):
        LA.matrix_rank(a, rtol=1e-2, tol=1e-2)
    # JAX 0.10.2: a given rtol is the same absolute threshold as tol
    d = np.diag([10.0, 1.0, 0.05])
    assert int(LA.matrix_rank(d, 0.1)) == int(LA.matrix_rank(d, tol=0.1)) == 2
    # lstsq(numpy_resid=True): NumPy's empty residuals unless rank == N < M
    x, resid, rank, _ = LA.lstsq(a, np.ones(3), numpy_resid=True)
    assert resid.shape == (0,)
    tall = rng.standard_normal((5, 2))
    _, resid, _, _ = LA.lstsq(tall, np.ones(5), numpy_resid=True)
    np.testing.assert_allclose(resid, np.linalg.lstsq(tall, np.ones(5))[1], rtol=1e-10)
    with pytest.raises(TypeError, match="cholesky does not accept dtype float16"):
        LA.cholesky(np.eye(3, dtype=np.float16))
    with pytest.raises(ValueError, match="Invalid order 'inf' for vector norm"):
        LA.norm(np.ones(3), ord="inf")


def test_vecdot_axis_counts_in_each_operand():
    """vecdot's axis is each operand's own (JAX, NumPy's gufunc): (2, 3, 4) with (3, 4)
    along axis 0 pairs lengths 2 and 3 -> error, and (2, 2, 2) with (2, 2) works."""
    a = np.arange(8.0).reshape(2, 2, 2)
    b = np.arange(4.0).reshape(2, 2)
    np.testing.assert_allclose(LA.vecdot(a, b, axis=0), np.linalg.vecdot(a, b, axis=0))
    np.testing.assert_allclose(fnp.vecdot(b, a, axis=0), np.vecdot(b, a, axis=0))
    with pytest.raises(ValueError):
        LA.vecdot(np.ones((2, 3, 4)), np.ones((3, 4)), axis=0)


def test_norms_of_empty_matrices_are_zero():
    for shape in ((0, 2), (2, 0), (0, 0)):
        for ord in (1, 2, np.inf, "fro", "nuc"):
            assert float(LA.matrix_norm(np.zeros(shape), ord=ord)) == 0.0, (shape, ord)
    for ord in (1, 2, np.inf):
        assert float(LA.vector_norm(np.zeros(0), ord=ord)) == 0.0


def test_det_gradient_finite_at_singular_matrices():
    """JAX's det: explicit 2x2/3x3 formulas, and an adjugate-based jvp for larger ones, so
    the gradient of det at a singular matrix is the cofactor matrix, not NaN."""
    z = np.zeros((2, 2))
    np.testing.assert_array_equal(fnx.grad(LA.det)(z), z)
    a = np.array([[50., -30., 45.], [-30., 90., -81.], [45., -81., 81.]])   # rank 2
    cof = np.array([[729., -1215., -1620.], [-1215., 2025., 2700.], [-1620., 2700., 3600.]])
    np.testing.assert_allclose(fnx.grad(LA.det)(a), cof, rtol=1e-10)
    rng = np.random.default_rng(3)
    b = rng.standard_normal((2, 5, 5))
    b[0] = 0
    g = fnx.grad(lambda x: LA.det(x).sum())(b)
    np.testing.assert_array_equal(g[0], np.zeros((5, 5)))
    np.testing.assert_allclose(g[1], np.linalg.det(b[1]) * np.linalg.inv(b[1]).T, rtol=1e-8)
    # rank n - 1 with the zero pivot last: the adjugate (rank 1), finite
    c = rng.standard_normal((4, 4))
    c[3] = c[0] + c[1]
    u, s, vt = np.linalg.svd(c)
    adj = np.prod(s[:3]) * np.linalg.det(u) * np.linalg.det(vt) * np.outer(vt[3], u[:, 3])
    np.testing.assert_allclose(fnx.grad(LA.det)(c), adj.T, atol=1e-8)
    check_grads(LA.det, (rng.standard_normal((3, 4, 4)),), 2)


def test_pinv_jacobian_at_repeated_singular_values():
    """pinv differentiates by Golub and Pereyra's formula (JAX's custom jvp): finite at
    the identity, where the SVD's derivative divides by zero gaps."""
    j = fnx.jacobian(LA.pinv)(np.eye(2))
    np.testing.assert_allclose(j, -np.einsum("ik,lj->ijkl", np.eye(2), np.eye(2)), atol=1e-12)
    rng = np.random.default_rng(5)
    for shape in ((4, 3), (3, 4)):
        check_grads(LA.pinv, (rng.standard_normal(shape),), 1)


def test_lax_svd_eigh_take_jax_keywords():
    """lax.linalg.svd(subset_by_index=, algorithm=), eigh(subset_by_index=,
    sort_eigenvalues=, implementation=) and JAX's enums."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 3))
    s = np.linalg.svd(x, compute_uv=False)
    np.testing.assert_allclose(la.svd(x, full_matrices=False, compute_uv=False,
                                      subset_by_index=(1, 3)), s[..., 1:3], rtol=1e-10)
    u, s2, vh = la.svd(x, full_matrices=False, subset_by_index=(0, 2),
                       algorithm=la.SvdAlgorithm.QR)
    assert u.shape == (2, 5, 2) and s2.shape == (2, 2) and vh.shape == (2, 2, 3)
    with pytest.raises(ValueError, match="full_matrices and subset_by_index"):
        la.svd(x, subset_by_index=(0, 2))
    h = x[0].T @ x[0]
    v, w = la.eigh(h, subset_by_index=(1, 3), sort_eigenvalues=True,
                   implementation=la.EighImplementation.QR)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h)[1:], rtol=1e-10)
    assert v.shape == (3, 2)
    assert {m.name for m in la.SvdAlgorithm} >= {"DEFAULT", "QR", "JACOBI", "POLAR"}
    assert la.EigImplementation.LAPACK.value == "lapack"


def test_eig_of_non_finite_matrices_is_nan():
    """eig/eigvals of a matrix holding inf or NaN give NaNs (JAX), not LAPACK's error;
    the finite matrices of the stack are unaffected. Found by JAX's testEigvalsInf."""
    assert np.isnan(np.asarray(LA.eigvals(np.array([[np.inf]])))).all()
    x = np.stack([np.diag([1.0, 2.0]), np.array([[np.nan, 0.0], [0.0, 1.0]])])
    w, v = LA.eig(x)
    np.testing.assert_allclose(np.sort(np.asarray(w[0]).real), [1.0, 2.0])
    assert np.isnan(np.asarray(w[1])).all() and np.isnan(np.asarray(v[1])).all()
