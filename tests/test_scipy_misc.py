"""The smaller fnx.scipy modules JAX has: integrate.trapezoid, cluster.vq, fft (DCT),
sparse.linalg (cg, bicgstab, gmres), ndimage.map_coordinates and
interpolate.RegularGridInterpolator; against SciPy and jax 0.10.2's values (literals)."""
import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.fft as sfft
import scipy.integrate as sint
import scipy.interpolate as sinterp
import scipy.ndimage as snd

import fnx
import fnx.numpy as fnp
from fnx.scipy import cluster, fft, integrate, interpolate, ndimage, sparse
from fnx.testing import check_grads


rng = np.random.default_rng(0)


def close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a), b, **kw)


def test_package_layout():
    import fnx.scipy as fs
    for name in ("cluster", "fft", "integrate", "interpolate", "linalg", "ndimage",
                 "optimize", "signal", "sparse", "special", "stats"):
        assert hasattr(fs, name)
    assert fs.sparse.linalg.__all__ == ["cg", "bicgstab", "gmres"]
    assert fs.cluster.vq.__all__ == ["vq"]


def test_trapezoid(x64):
    y = rng.normal(size=(3, 7))
    x = np.sort(rng.uniform(size=7))
    close(integrate.trapezoid(y), sint.trapezoid(y), rtol=1e-13)
    close(integrate.trapezoid(y, dx=0.3, axis=0), sint.trapezoid(y, dx=0.3, axis=0), rtol=1e-13)
    close(integrate.trapezoid(y, x=x), sint.trapezoid(y, x=x), rtol=1e-13)
    xs = np.sort(rng.uniform(size=(3, 7)), axis=1)
    close(integrate.trapezoid(y, x=xs), sint.trapezoid(y, x=xs), rtol=1e-13)
    check_grads(lambda y, x: integrate.trapezoid(y, x=x), (y, x), order=2)


def test_trapezoid_dtypes():
    # jax 0.10.2: trapezoid(arange(5)) = 8.0, float32
    out = integrate.trapezoid(np.arange(5, dtype=np.int32))
    assert out.dtype == np.float32 and float(out) == 8.0


def test_vq():
    obs = np.array([[0.0, 0], [1, 1], [5, 5]], np.float32)
    book = np.array([[0.0, 0.0], [4, 4]], np.float32)
    codes, dist = cluster.vq.vq(obs, book)
    ref_codes, ref_dist = svq.vq(obs.astype(np.float64), book.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(codes), ref_codes)
    close(dist, ref_dist, rtol=1e-6)
    codes, _ = cluster.vq.vq(np.array([0.0, 5], np.float32), np.array([1.0, 4, 6], np.float32))
    np.testing.assert_array_equal(np.asarray(codes), [0, 1])
    with pytest.raises(fnx.errors.ShapeError, match="vq"):
        cluster.vq.vq(np.ones((3, 2), np.float32), np.ones((2, 3), np.float32))


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_dct_idct(norm, n, x64):
    x = rng.normal(size=(3, n))
    close(fft.dct(x, norm=norm), sfft.dct(x, norm=norm), atol=1e-12)
    close(fft.idct(x, norm=norm), sfft.idct(x, norm=norm), atol=1e-12)
    close(fft.idct(fft.dct(x, norm=norm), norm=norm), x, atol=1e-12)


def test_dctn_and_sizes(x64):
    x = rng.normal(size=(4, 5, 6))
    close(fft.dctn(x, norm="ortho"), sfft.dctn(x, norm="ortho"), atol=1e-12)
    close(fft.idctn(x, axes=(0, 2)), sfft.idctn(x, axes=(0, 2)), atol=1e-12)
    close(fft.dct(x, n=8, axis=1), sfft.dct(x, n=8, axis=1), atol=1e-12)
    close(fft.dct(x, n=3, axis=0), sfft.dct(x, n=3, axis=0), atol=1e-12)
    close(fft.dctn(x, s=(3, 9)), sfft.dctn(x, s=(3, 9)), atol=1e-12)
    check_grads(lambda v: fft.dct(v, norm="ortho"), (x[0],), order=1)


def test_dct_as_jax():
    # jax 0.10.2: dct(arange(4.)) = [12, -6.308644, 0, -0.44834155]; only type 2
    close(fft.dct(np.arange(4, dtype=np.float32)), [12.0, -6.308644, 0.0, -0.44834155],
          rtol=1e-5, atol=1e-6)
    assert fft.dct(np.arange(4, dtype=np.int32)).dtype == np.float32
    with pytest.raises(NotImplementedError, match="type=2"):
        fft.dct(np.ones(4, np.float32), type=1)


A = rng.normal(size=(6, 6))
SPD = A @ A.T + 6 * np.eye(6)
GEN = A + 6 * np.eye(6)
B = rng.normal(size=6)


@pytest.mark.parametrize("solver,mat", [("cg", SPD), ("bicgstab", GEN), ("gmres", GEN)])
def test_krylov_solvers(solver, mat, x64):
    solve = getattr(sparse.linalg, solver)
    x, info = solve(mat, B, tol=1e-12)
    assert info is None
    close(x, np.linalg.solve(mat, B), atol=1e-10)
    # a function for A, a Jacobi preconditioner, a starting guess
    x, _ = solve(lambda v: fnp.asarray(mat) @ v, B, x0=np.ones(6), tol=1e-12,
                 M=np.diag(1 / np.diag(mat)))
    close(x, np.linalg.solve(mat, B), atol=1e-10)
    # pytrees: b and x share a structure
    bt = {"u": B[:2], "w": B[2:].reshape(2, 2)}

    def op(t):
        r = fnp.asarray(mat) @ fnp.concatenate([t["u"], t["w"].reshape(-1)])
        return {"u": r[:2], "w": r[2:].reshape(2, 2)}

    x, _ = solve(op, bt, tol=1e-12)
    close(np.concatenate([np.asarray(x["u"]), np.asarray(x["w"]).ravel()]),
          np.linalg.solve(mat, B), atol=1e-10)
    # jit, and forward-mode derivatives through the loop
    x = fnx.jit(lambda b: solve(mat, b, tol=1e-12)[0])(B)
    close(x, np.linalg.solve(mat, B), atol=1e-10)
    _, t = fnx.jvp(lambda b: solve(mat, b, tol=1e-12)[0], (B,), (np.ones(6),))
    close(t, np.linalg.solve(mat, np.ones(6)), atol=1e-8)


def test_gmres_restarts_and_errors(x64):
    x, _ = sparse.linalg.gmres(GEN, B, tol=1e-12, restart=2)
    close(x, np.linalg.solve(GEN, B), atol=1e-10)
    with pytest.raises(fnx.errors.ShapeError, match=r"A as a matrix must be \(n, n\)"):
        sparse.linalg.cg(np.eye(3), B)
    with pytest.raises(ValueError, match="solve_method"):
        sparse.linalg.gmres(GEN, B, solve_method="qr")


IMG = rng.normal(size=(5, 6))
COORDS = [rng.uniform(-2, 7, 20), rng.uniform(-2, 8, 20)]
SCIPY_MODE = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
              "mirror": "mirror", "reflect": "reflect"}


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", sorted(SCIPY_MODE))
def test_map_coordinates(order, mode, x64):
    out = ndimage.map_coordinates(IMG, COORDS, order, mode=mode, cval=1.5)
    close(out, snd.map_coordinates(IMG, COORDS, order=order, mode=SCIPY_MODE[mode], cval=1.5),
          atol=1e-12)


def test_map_coordinates_ints_grads_errors():
    img = np.arange(12, dtype=np.int32).reshape(3, 4)
    c = [np.array([0.5, 1.5], np.float32), np.array([0.5, 2.5], np.float32)]
    # jax 0.10.2: [3, 9] (order 1, rounded half away from zero) and [5, 11] (order 0)
    np.testing.assert_array_equal(np.asarray(ndimage.map_coordinates(img, c, 1)), [3, 9])
    np.testing.assert_array_equal(np.asarray(ndimage.map_coordinates(img, c, 0)), [5, 11])
    check_grads(lambda im, x: ndimage.map_coordinates(im, [x, x + 0.3], 1),
                (IMG.astype(np.float32), np.array([0.2, 1.6, 3.4], np.float32)), order=1,
                modes=("rev",))
    with pytest.raises(NotImplementedError, match="order"):
        ndimage.map_coordinates(IMG, COORDS, 3)
    with pytest.raises(fnx.errors.ShapeError, match="one coordinate array per"):
        ndimage.map_coordinates(IMG, COORDS[:1], 1)


GRID = (np.array([0.0, 1, 2.5, 4]), np.array([-1.0, 0, 1, 3, 4]))
XI = np.stack([rng.uniform(-0.5, 4.5, 30), rng.uniform(-1.5, 4.5, 30)], -1)


@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("fill_value", [np.nan, None, 0.5])
def test_regular_grid_interpolator(method, fill_value, x64):
    for values in (rng.normal(size=(4, 5)), rng.normal(size=(4, 5, 2))):
        ours = interpolate.RegularGridInterpolator(GRID, values, method=method,
                                                   fill_value=fill_value)(XI)
        ref = sinterp.RegularGridInterpolator(GRID, values, method=method,
                                              fill_value=fill_value, bounds_error=False)(XI)
        close(ours, ref, atol=1e-12)


def test_interpolator_is_a_pytree_and_differentiable():
    g = tuple(p.astype(np.float32) for p in GRID)
    v = np.arange(20, dtype=np.float32).reshape(4, 5)
    xi = np.array([[0.5, 0.5], [3.0, 2.0]], np.float32)
    r = interpolate.RegularGridInterpolator(g, v)
    close(fnx.jit(lambda r, x: r(x))(r, xi), np.asarray(r(xi)), rtol=1e-6)
    close(r(xi), sinterp.RegularGridInterpolator(GRID, v.astype(np.float64))(xi), rtol=1e-6)
    grad = fnx.grad(lambda vals: interpolate.RegularGridInterpolator(g, vals)(xi).sum())(v)
    assert float(fnp.sum(grad)) == pytest.approx(2.0)
    with pytest.raises(NotImplementedError, match="bounds_error"):
        interpolate.RegularGridInterpolator(g, v, bounds_error=True)
    with pytest.raises(ValueError, match="method"):
        interpolate.RegularGridInterpolator(g, v, method="cubic")
