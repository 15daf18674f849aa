"""fnx.scipy.linalg against SciPy (float64 under jax_enable_x64; float32 dtypes by
default), SciPy's conventions (upper cholesky, (p, l, u), tuples from qr), JAX's
behaviour where it differs from SciPy (eigh symmetrizes, cho_factor zeros the other
triangle), derivatives, jit and vmap."""
import numpy as np
import pytest
import scipy.linalg as sl

import fnx
from fnx.scipy import linalg as la
from fnx.testing import check_grads


rng = np.random.default_rng(0)
A = rng.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)
B = rng.normal(size=(4, 2))
b = rng.normal(size=4)
CA = A + 1j * rng.normal(size=(4, 4))
HPD = CA @ CA.conj().T + 4 * np.eye(4)


def close(x, y, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(x), y, rtol=rtol, atol=atol)


@pytest.mark.parametrize("m", [SPD, HPD], ids=["real", "complex"])
def test_cholesky_and_cho_solve(m, x64):
    close(la.cholesky(m), sl.cholesky(m))                       # upper by default
    close(la.cholesky(m, lower=True), sl.cholesky(m, lower=True))
    c, lower = la.cho_factor(m)
    assert lower is False
    close(c, sl.cholesky(m))                                    # the other triangle is 0
    for low in (False, True):
        close(la.cho_solve(la.cho_factor(m, lower=low), b), np.linalg.solve(m, b))
        close(la.cho_solve(la.cho_factor(m, lower=low), B), np.linalg.solve(m, B))


def test_cholesky_reads_one_triangle():
    m = np.array([[4.0, 1.0], [2.0, 3.0]], np.float32)
    close(la.cholesky(m, lower=True), sl.cholesky(np.tril(m) + np.tril(m, -1).T, lower=True),
          rtol=1e-6)
    close(la.cholesky(m), sl.cholesky(np.triu(m) + np.triu(m, 1).T), rtol=1e-6)
    # not positive definite: NaN (SciPy raises)
    assert np.isnan(np.asarray(la.cholesky(np.array([[1.0, 2], [2, 1]], np.float32)))).any()


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_triangular(trans, lower, x64):
    for rhs in (b, B):
        close(la.solve_triangular(CA, rhs, trans=trans, lower=lower),
              sl.solve_triangular(CA, rhs, trans=trans, lower=lower), rtol=1e-10)
    close(la.solve_triangular(A, B, trans=trans, lower=lower, unit_diagonal=True),
          sl.solve_triangular(A, B, trans=trans, lower=lower, unit_diagonal=True), rtol=1e-10)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (7, 2)])
def test_lu_matches_lapack(shape, x64):
    x = rng.normal(size=shape)
    p, l, u = la.lu(x)
    P, L, U = sl.lu(x)
    close(p, P)
    close(l, L)
    close(u, U)
    pl, u2 = la.lu(x, permute_l=True)
    close(pl, P @ L)
    close(u2, U)


def test_lu_factor_and_solve(x64):
    lu_, piv = la.lu_factor(A)
    LU, PIV = sl.lu_factor(A)
    close(lu_, LU)
    np.testing.assert_array_equal(np.asarray(piv), PIV)
    assert piv.dtype == np.int32
    for trans in (0, 1, 2):
        for rhs in (b, B):
            close(la.lu_solve((lu_, piv), rhs, trans=trans),
                  sl.lu_solve((LU, PIV), rhs, trans=trans), rtol=1e-10)
    clu, cpiv = la.lu_factor(CA)
    close(la.lu_solve((clu, cpiv), B, trans=2), sl.lu_solve(sl.lu_factor(CA), B, trans=2),
          rtol=1e-10)


@pytest.mark.parametrize("assume_a", ["gen", "sym", "her", "pos"])
def test_solve(assume_a, x64):
    for rhs in (b, B):
        close(la.solve(SPD, rhs, assume_a=assume_a), sl.solve(SPD, rhs, assume_a=assume_a),
              rtol=1e-10)
    close(la.solve(SPD, B, lower=True, assume_a=assume_a), np.linalg.solve(SPD, B), rtol=1e-10)
    # batched a with one right-hand side matrix
    out = la.solve(np.stack([SPD, 2 * SPD]), B, assume_a=assume_a)
    close(out, np.stack([np.linalg.solve(SPD, B), np.linalg.solve(2 * SPD, B)]), rtol=1e-10)


def test_solve_errors():
    with pytest.raises(ValueError, match="assume_a"):
        la.solve(SPD.astype(np.float32), b.astype(np.float32), assume_a="banded")
    with pytest.raises(fnx.errors.ShapeError, match=r"solve: b must have shape \(4,\)"):
        la.solve(np.eye(4, dtype=np.float32), np.ones(3, np.float32))
    with pytest.raises(fnx.errors.ShapeError, match="square"):
        la.inv(np.ones((2, 3), np.float32))


def test_inv_det(x64):
    close(la.inv(A), sl.inv(A), rtol=1e-10)
    close(la.det(A), sl.det(A), rtol=1e-10)
    assert la.det(np.array([[1, 2], [3, 4]], np.int32)).dtype == np.float32


def test_eigh(x64):
    w, v = la.eigh(SPD)
    W, V = sl.eigh(SPD)
    close(w, W, rtol=1e-10)
    close(np.abs(np.asarray(v)), np.abs(V), atol=1e-10)
    close(la.eigh(SPD, eigvals_only=True), W, rtol=1e-10)
    # generalized problem (JAX raises)
    M = SPD + np.eye(4)
    w, v = la.eigh(SPD, M)
    close(w, sl.eigh(SPD, M, eigvals_only=True), rtol=1e-10)
    v = np.asarray(v)
    close(v.T @ M @ v, np.eye(4), atol=1e-10)
    close(SPD @ v, M @ v * np.asarray(w), atol=1e-10)
    with pytest.raises(NotImplementedError, match="eigvals"):
        la.eigh(SPD, eigvals=(0, 1))


def test_eigh_symmetrizes_as_jax():
    # jax 0.10.2's eigenvalues of this non-symmetric input (it decomposes (a + a^T) / 2)
    a = np.array([[4., 1, 2], [5, 3, 0.5], [-2, 7, 5]], np.float32)
    close(la.eigh(a, eigvals_only=True), [-1.0826404, 4.3762393, 8.706401], rtol=1e-5)
    close(la.eigh(a, lower=False, eigvals_only=True), [-1.0826404, 4.3762393, 8.706401],
          rtol=1e-5)


def test_qr_svd(x64):
    x = rng.normal(size=(5, 3))
    for mode in ("full", "economic"):
        q, r = la.qr(x, mode=mode)
        Q, R = sl.qr(x, mode=mode)
        close(np.abs(np.asarray(q)), np.abs(Q), atol=1e-10)
        close(np.asarray(q) @ np.asarray(r), x, atol=1e-12)
    out = la.qr(x, mode="r")
    assert isinstance(out, tuple) and len(out) == 1 and out[0].shape == (5, 3)
    with pytest.raises(NotImplementedError, match="pivoting"):
        la.qr(x, pivoting=True)
    u, s, vh = la.svd(x)
    assert u.shape == (5, 5) and vh.shape == (3, 3)
    close(s, sl.svd(x, compute_uv=False), rtol=1e-12)
    close(la.svd(x, compute_uv=False), sl.svd(x, compute_uv=False), rtol=1e-12)
    u, s, vh = la.svd(x, full_matrices=False)
    close(np.asarray(u) * np.asarray(s) @ np.asarray(vh), x, atol=1e-12)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0])
def test_expm(scale, x64):
    close(la.expm(scale * A), sl.expm(scale * A), rtol=1e-12 * max(1, scale))
    close(la.expm(scale * CA), sl.expm(scale * CA), rtol=1e-12 * max(1, scale))


def test_expm_float32_and_batched():
    a32 = (A / 2).astype(np.float32)
    out = la.expm(a32)
    assert out.dtype == np.float32
    close(out, sl.expm(A / 2), rtol=2e-5, atol=2e-5)
    batch = np.stack([a32, 2 * a32])
    close(la.expm(batch), np.stack([sl.expm(A / 2), sl.expm(A)]), rtol=5e-5, atol=5e-5)
    close(la.expm(np.zeros((2, 2), np.float32)), np.eye(2))


def test_block_diag_and_toeplitz():
    out = la.block_diag(np.ones((2, 2), np.float32), np.array([3.0], np.float32), 4,
                        np.array([[5, 6]], np.int32))
    assert out.dtype == np.float32
    close(out, sl.block_diag(np.ones((2, 2)), [3.0], 4, [[5, 6]]))
    close(la.toeplitz(np.array([1, 2, 3], np.int32)), sl.toeplitz([1, 2, 3]))
    close(la.toeplitz(np.array([1.0, 2, 3], np.float32), np.array([9.0, 4, 5, 6], np.float32)),
          sl.toeplitz([1.0, 2, 3], [9.0, 4, 5, 6]))


def test_grads(x64):
    check_grads(lambda m: la.cholesky(m @ m.T + 4 * np.eye(4)), (A,), order=1)
    check_grads(lambda m, r: la.cho_solve(la.cho_factor(m @ m.T + 4 * np.eye(4)), r),
                (A, B), order=1)
    check_grads(lambda m, r: la.solve_triangular(m + 5 * np.eye(4), r, trans=1, lower=True),
                (A, B), order=2)
    check_grads(lambda m: la.lu(m)[1] + la.lu(m)[2], (A,), order=1)
    check_grads(lambda m: la.lu(m)[2], (rng.normal(size=(5, 3)),), order=1)
    check_grads(lambda m, r: la.lu_solve(la.lu_factor(m), r, trans=1), (A, B), order=1)
    check_grads(lambda m, r: la.solve(m, r), (A, B), order=2)
    check_grads(la.det, (A,), order=2)
    check_grads(lambda m: la.expm(m), (A / 2,), order=1)
    check_grads(lambda m: la.expm(m), (4 * A,), order=1, rtol=1e-5)   # with squarings
    check_grads(lambda m: la.eigh(m + m.T, eigvals_only=True), (A,), order=1)
    check_grads(lambda m: la.svd(m, compute_uv=False), (A,), order=1)


def test_jit_and_vmap():
    a32 = SPD.astype(np.float32)
    b32 = B.astype(np.float32)
    for f in (lambda m: la.cholesky(m), lambda m: la.lu(m)[2], lambda m: la.expm(m / 10),
              lambda m: la.cho_solve(la.cho_factor(m), b32),
              lambda m: la.lu_solve(la.lu_factor(m), b32)):
        np.testing.assert_allclose(np.asarray(fnx.jit(f)(a32)), np.asarray(f(a32)), rtol=1e-5,
                                   atol=1e-6)
    stack = np.stack([a32, 2 * a32, 3 * a32])
    out = fnx.vmap(lambda m: la.solve(m, b32[:, 0], assume_a="pos"))(stack)
    close(out, np.stack([np.linalg.solve(s, B[:, 0]) for s in stack]), rtol=1e-4)
    out = fnx.vmap(la.det)(stack)
    close(out, np.linalg.det(stack), rtol=1e-4)


def test_eigh_tridiagonal(x64):
    d, e = rng.normal(size=5), rng.normal(size=4)
    w, v = la.eigh_tridiagonal(d, e)
    W, V = sl.eigh_tridiagonal(d, e)
    close(w, W, rtol=1e-12)
    close(np.abs(np.asarray(v)), np.abs(V), atol=1e-12)
    close(la.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 3)),
          sl.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 3)),
          rtol=1e-12)
    with pytest.raises(NotImplementedError, match="select='v'"):
        la.eigh_tridiagonal(d, e, select="v", select_range=(0.0, 1.0))
    with pytest.raises(fnx.errors.ShapeError, match=r"e \(n - 1,\)"):
        la.eigh_tridiagonal(d, e[:2])


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
@pytest.mark.parametrize("side", ["right", "left"])
def test_polar(shape, side, x64):
    a = rng.normal(size=shape)
    u, p = la.polar(a, side)
    U, P = sl.polar(a, side)
    close(u, U, atol=1e-12)
    close(p, P, atol=1e-12)


def test_expm_frechet(x64):
    a, e = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    ea, lf = la.expm_frechet(a, e)
    EA, LF = sl.expm_frechet(a, e)
    close(ea, EA, rtol=1e-12)
    close(lf, LF, rtol=1e-12, atol=1e-12)
    close(la.expm_frechet(a, e, compute_expm=False), LF, rtol=1e-12, atol=1e-12)
    # it is the jvp of expm
    _, t = fnx.jvp(la.expm, (a,), (e,))
    close(t, LF, rtol=1e-10, atol=1e-10)


def test_matrix_constructors():
    i32 = lambda *v: np.array(v, np.int32)
    f32 = lambda *v: np.array(v, np.float32)
    close(la.hankel(i32(1, 2, 3), i32(3, 4, 5, 6)), sl.hankel([1, 2, 3], [3, 4, 5, 6]))
    close(la.hankel(f32(1, 2, 3)), sl.hankel([1, 2, 3]))
    close(la.circulant(f32(1, 2, 3)), sl.circulant([1, 2, 3]))
    close(la.companion(f32(1, 2, 3, 4)), sl.companion([1.0, 2, 3, 4]), rtol=1e-6)
    close(la.leslie(f32(0.1, 2, 1.5), f32(0.2, 0.8)), sl.leslie([0.1, 2, 1.5], [0.2, 0.8]),
          rtol=1e-6)
    close(la.fiedler(f32(1, 4, 12, 45)), sl.fiedler([1.0, 4, 12, 45]))
    a = f32(1, -2, 3, 0.5, 2)
    for mode in ("full", "same", "valid"):
        for n in (2, 5, 7):
            close(la.convolution_matrix(a, n, mode), sl.convolution_matrix(a, n, mode),
                  rtol=1e-6)
    close(la.hilbert(4), sl.hilbert(4), rtol=1e-6)
    for kind in ("symmetric", "lower", "upper"):
        close(la.pascal(5, kind), sl.pascal(5, kind))
    close(la.helmert(4), sl.helmert(4), rtol=1e-6)
    close(la.helmert(4, full=True), sl.helmert(4, full=True), rtol=1e-6)
    for scale in (None, "sqrtn", "n"):
        close(la.dft(5, scale), sl.dft(5, scale), rtol=1e-6, atol=1e-6)
    assert la.dft(3).dtype == np.complex64 and la.hilbert(2).dtype == np.float32


def test_qr_multiply_sylvester_inverse_matrices(x64):
    a, c, c2 = rng.normal(size=(4, 3)), rng.normal(size=(5, 4)), rng.normal(size=(3, 2))
    q, r = la.qr(a, mode="economic")
    out, r2 = la.qr_multiply(a, c)
    close(out, c @ np.asarray(q))
    close(r2, np.asarray(r))
    close(np.asarray(out) @ np.asarray(r2), c @ a)                  # c q r = c a
    out, _ = la.qr_multiply(a, c2, mode="left")
    close(out, np.asarray(q) @ c2)
    ref, R = sl.qr_multiply(a, c)                                   # SciPy: same up to signs
    close(np.abs(np.asarray(r2)), np.abs(R), atol=1e-12)
    A, B, C = rng.normal(size=(3, 3)), rng.normal(size=(2, 2)), rng.normal(size=(3, 2))
    x = la.solve_sylvester(A, B, C)
    close(x, sl.solve_sylvester(A, B, C), rtol=1e-10, atol=1e-12)
    close(A @ np.asarray(x) + np.asarray(x) @ B, C, atol=1e-12)
    check_grads(lambda A, C: la.solve_sylvester(A, B, C), (A, C), order=1)
    with pytest.raises(NotImplementedError, match="4096 unknowns"):
        la.solve_sylvester(np.eye(70), np.eye(70), np.ones((70, 70)))
    close(la.invhilbert(5), sl.invhilbert(5))
    for kind in ("symmetric", "lower", "upper"):
        close(la.invpascal(5, kind), sl.invpascal(5, kind))


def test_sqrtm(x64):
    a = rng.normal(size=(4, 4))
    spd = a @ a.T + np.eye(4)
    for m in (spd, a, np.array([[4.0, 1], [2, 9]]), np.array([[-1.0, 0], [0, 4]])):
        close(la.sqrtm(m), sl.sqrtm(m), rtol=1e-12, atol=1e-12)
    d = rng.normal(size=(4, 4))
    _, t = fnx.jvp(la.sqrtm, (spd.astype(complex),), (d.astype(complex),))
    h = 1e-6
    close(t, (sl.sqrtm(spd + h * d) - sl.sqrtm(spd - h * d)) / (2 * h), atol=1e-7)
    assert fnx.vmap(la.sqrtm)(np.stack([spd, spd])).shape == (2, 4, 4)


def test_sqrtm_as_jax():
    # jax 0.10.2: complex64 for float32 input
    out = la.sqrtm(np.array([[4.0, 1], [2, 9]], np.float32))
    assert out.dtype == np.complex64
    close(out, [[1.9796224, 0.20136625], [0.4027325, 2.9864535]], rtol=1e-5)
    close(la.sqrtm(np.array([[-1.0, 0], [0, 4]], np.float32)), [[1j, 0], [0, 2]], atol=1e-6)


def test_funm(x64):
    import fnx.numpy as fnp
    a = np.array([[1.0, 2], [3, 4]])
    close(la.funm(a, fnp.exp), sl.expm(a), rtol=1e-12)
    b = rng.normal(size=(4, 4))
    close(la.funm(b, fnp.sin), sl.funm(b, np.sin), atol=1e-12)
    f, err = la.funm(a, fnp.exp, disp=False)
    assert float(err) < 1e-12
    assert la.funm(a.astype(np.float32), fnp.exp).dtype == np.complex64   # as JAX


def test_hadamard_fiedler_companion():
    assert la.hadamard(4).dtype == np.int32                 # as JAX (x64 off)
    np.testing.assert_array_equal(np.asarray(la.hadamard(8)), sl.hadamard(8))
    with pytest.raises(ValueError, match="power of 2"):
        la.hadamard(6)
    for a in ([1.0, 2, 3, 4, 5], [2.0, 3], [1.0, 2, 3], [1.0, 2, 3, 4, 5, 6, 7],
              [3.0, 1, 2, 5, 7, 1, 2, 8]):
        close(la.fiedler_companion(np.array(a, np.float32)), sl.fiedler_companion(a),
              rtol=1e-6)
    # its eigenvalues are the polynomial's roots
    a = np.array([1.0, -6, 11, -6], np.float32)
    w = np.sort(np.linalg.eigvals(np.asarray(la.fiedler_companion(a))).real)
    close(w, [1, 2, 3], atol=1e-4)


def test_hessenberg(x64):
    for n in (1, 2, 3, 5, 8):
        a = rng.normal(size=(n, n))
        cases = [a] + ([a + 1j * rng.normal(size=(n, n))] if n != 2 else [])
        for m in cases:
            h, q = la.hessenberg(m, calc_q=True)
            H, Q = sl.hessenberg(m, calc_q=True)
            close(h, H, atol=1e-12)
            close(q, Q, atol=1e-12)
            close(la.hessenberg(m), H, atol=1e-12)
    check_grads(lambda m: la.hessenberg(m), (rng.normal(size=(4, 4)),), order=1)
    assert la.hessenberg(np.stack([A, 2 * A])).shape == (2, 4, 4)


def test_hessenberg_2x2_complex_as_jax():
    # jax 0.10.2 (LAPACK zgehrd) makes the subdiagonal real even for 2 x 2 (SciPy returns
    # the input unchanged there)
    c = np.array([[1 + 1j, 2 - 1j], [3 + 2j, 4]], np.complex64)
    h, q = la.hessenberg(c, calc_q=True)
    close(h, [[1 + 1j, -2.218801 - 0.27735007j], [-3.6055512, 4]], atol=1e-5)
    close(q, [[1, 0], [0, -0.8320503 - 0.5547002j]], atol=1e-6)


def test_sqrtm_derivatives_of_every_order():
    # d^k/da^k sqrt(a) for a 1x1 matrix, and a second derivative against finite differences:
    # the first-derivative rule once read a stop_gradient'ed eigenbasis (second derivatives 0)
    with fnx.enable_x64():
        a, t = np.array([[3 + 0.1j]]), np.ones((1, 1), complex)
        d1 = lambda a: fnx.jvp(la.sqrtm, (a,), (t,))[1]
        d2 = lambda a: fnx.jvp(d1, (a,), (t,))[1]
        np.testing.assert_allclose(np.asarray(d1(a)), 0.5 * a ** -0.5, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(d2(a)), -0.25 * a ** -1.5, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(fnx.jvp(d2, (a,), (t,))[1]),
                                   0.375 * a ** -2.5, rtol=1e-12)
        m = np.array([[4., 1, 0], [1, 3, 0.5], [0, 0.5, 2]]) + 0j
        tm = np.random.RandomState(0).standard_normal((3, 3)) + 0j
        g = lambda a: fnx.jvp(la.sqrtm, (a,), (tm,))[1]
        eps = 1e-5
        fd = (np.asarray(g(m + eps * tm)) - np.asarray(g(m - eps * tm))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(fnx.jvp(g, (m,), (tm,))[1]), fd, atol=1e-8)


def test_special_matrices_batch_over_leading_axes_as_jax():
    """JAX 0.10.2 batches companion, leslie, fiedler, fiedler_companion, hankel and
    convolution_matrix over leading axes (SciPy takes 1-D input or ravels); found by JAX's
    linalg_test."""
    rng = np.random.default_rng(0)
    a = rng.uniform(1, 2, (2, 3, 4))
    for fn in (la.companion, la.fiedler, la.fiedler_companion):
        out = fn(a)
        ref = np.stack([getattr(sl, fn.__name__)(v) for v in a.reshape(-1, 4)])
        np.testing.assert_allclose(out, ref.reshape(out.shape), rtol=1e-5, atol=1e-6)
    f, s = rng.uniform(size=(2, 4)), rng.uniform(size=(2, 3))
    np.testing.assert_allclose(la.leslie(f, s), np.stack([sl.leslie(*p) for p in zip(f, s)]),
                               rtol=1e-6)
    c, r = rng.uniform(size=(2, 3)), rng.uniform(size=(2, 4))
    np.testing.assert_allclose(la.hankel(c, r), np.stack([sl.hankel(*p) for p in zip(c, r)]),
                               rtol=1e-6)
    assert la.hankel(np.ones((2, 0)), np.ones(4)).shape == (2, 0, 4)
    for mode in ("full", "same", "valid"):
        np.testing.assert_allclose(la.convolution_matrix(a[0], 3, mode),
                                   np.stack([sl.convolution_matrix(v, 3, mode) for v in a[0]]),
                                   rtol=1e-6)
    assert la.fiedler_companion(np.ones((3, 1))).shape == (3, 0, 0)
    assert la.leslie(np.array([1, 2]), np.array([3])).dtype.kind == "i"   # no promotion
    for call, msg in ((lambda: la.companion(np.ones(1)), "length of `a` along the last axis"),
                      (lambda: la.leslie(np.ones(1), np.ones(0)), "length of f"),
                      (lambda: la.leslie(np.ones(3), np.ones(1)), "Incorrect lengths"),
                      (lambda: la.fiedler_companion(np.ones(0)), "nonzero"),
                      (lambda: la.convolution_matrix(np.ones(3), 0), "positive integer"),
                      (lambda: la.helmert(0), "n must be a positive integer"),
                      (lambda: la.dft(4, dtype=np.float32), "dtype must be a complex"),
                      (lambda: la.invpascal(3, "bad"), "Expected kind to be one of")):
        with pytest.raises(ValueError, match=msg):
            call()


def test_solve_sylvester_broadcasts_and_flags_no_solution():
    """solve_sylvester broadcasts batch axes of A, B, C, and gives NaNs where eigenvalues
    of A and B sum to ~0 (JAX 0.10.2)."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal((2, 4, 4))
    c = rng.standard_normal((2, 3, 4))
    x = la.solve_sylvester(a, b, c)
    np.testing.assert_allclose(x, np.stack([sl.solve_sylvester(a, b[i], c[i]) for i in range(2)]),
                               rtol=1e-4, atol=1e-4)
    p = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    d = np.diag([1.0, 2.0, 3.0])
    a = p @ d @ np.linalg.inv(p)
    b = p @ -d @ np.linalg.inv(p)
    assert np.isnan(np.asarray(la.solve_sylvester(a, b, np.ones((3, 3)), tol=1e-3))).all()


def test_lax_triangular_solve_takes_one_vector_per_matrix():
    """lax.linalg.triangular_solve with b of one rank less than a: a vector (JAX)."""
    from fnx.lax import linalg as lax_la
    rng = np.random.default_rng(2)
    a = np.tril(rng.standard_normal((4, 4))) + 4 * np.eye(4)
    v = rng.standard_normal(4)
    np.testing.assert_allclose(lax_la.triangular_solve(a, v, left_side=True, lower=True),
                               np.linalg.solve(a, v), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(lax_la.triangular_solve(a, v, left_side=False, lower=True),
                               np.linalg.solve(a.T, v), rtol=1e-4, atol=1e-6)
    check_grads(lambda a, v: lax_la.triangular_solve(a, v, left_side=True, lower=True),
                (a, v), 1)
