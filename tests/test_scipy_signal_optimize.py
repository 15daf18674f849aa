"""fnx.scipy.signal against SciPy (every mode, inputs swapped, complex, N-d), and
fnx.scipy.optimize.minimize against jax 0.10.2's results and counts (literals) and
SciPy's minimizers."""
import numpy as np
import pytest
import scipy.optimize as so
import scipy.signal as ss

import fnx
import fnx.numpy as fnp
from fnx.scipy import signal as sg
from fnx.scipy.optimize import OptimizeResults, minimize
from fnx.testing import check_grads


rng = np.random.default_rng(0)
SHAPES = [((7,), (3,)), ((3,), (7,)), ((6,), (6,)), ((5,), (4,)), ((5, 6), (2, 3)),
          ((2, 3), (5, 6)), ((5, 6), (2, 4)), ((4, 4), (4, 4)), ((4, 5, 3), (2, 2, 2))]


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("complex_", [False, True])
def test_convolve_correlate_against_scipy(mode, complex_, x64):
    for s1, s2 in SHAPES:
        a, b = rng.normal(size=s1), rng.normal(size=s2)
        if complex_:
            a, b = a + 1j * rng.normal(size=s1), b + 1j * rng.normal(size=s2)
        np.testing.assert_allclose(np.asarray(sg.convolve(a, b, mode)),
                                   ss.convolve(a, b, mode, method="direct"), atol=1e-12)
        np.testing.assert_allclose(np.asarray(sg.correlate(a, b, mode)),
                                   ss.correlate(a, b, mode, method="direct"), atol=1e-12)
        if len(s1) == 2:
            np.testing.assert_allclose(np.asarray(sg.convolve2d(a, b, mode)),
                                       ss.convolve2d(a, b, mode), atol=1e-12)
            # correlate2d centres 'same' differently from correlate for even kernels
            np.testing.assert_allclose(np.asarray(sg.correlate2d(a, b, mode)),
                                       ss.correlate2d(a, b, mode), atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_against_scipy(mode, x64):
    for s1, s2 in SHAPES:
        for complex_ in (False, True):
            a, b = rng.normal(size=s1), rng.normal(size=s2)
            if complex_:
                a, b = a + 1j * rng.normal(size=s1), b + 1j * rng.normal(size=s2)
            np.testing.assert_allclose(np.asarray(sg.fftconvolve(a, b, mode)),
                                       ss.fftconvolve(a, b, mode), atol=1e-12)
    # over one axis, the other broadcasting (JAX requires it equal)
    a, b = rng.normal(size=(3, 5)), rng.normal(size=(1, 3))
    np.testing.assert_allclose(np.asarray(sg.fftconvolve(a, b, mode, axes=1)),
                               ss.fftconvolve(a, b, mode, axes=1), atol=1e-12)


def test_detrend_against_scipy(x64):
    x = rng.normal(size=(4, 20)) + np.arange(20.0)
    for axis in (-1, 0):
        for kind in ("linear", "constant"):
            np.testing.assert_allclose(np.asarray(sg.detrend(x, axis=axis, type=kind)),
                                       ss.detrend(x, axis=axis, type=kind), atol=1e-12)
    np.testing.assert_allclose(np.asarray(sg.detrend(x, bp=[5, 12])),
                               ss.detrend(x, bp=[5, 12]), atol=1e-12)
    assert sg.detrend(np.arange(10, dtype=np.int32)).dtype.kind == "f"
    with pytest.raises(ValueError, match="breakpoints"):
        sg.detrend(x, axis=0, bp=[5])
    check_grads(lambda v: sg.detrend(v, bp=[7]), (x[0],), order=1)


def test_signal_dtypes_and_methods():
    out = sg.convolve(np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32))
    assert out.dtype == np.float32                       # as JAX (SciPy keeps ints)
    np.testing.assert_array_equal(np.asarray(out), [0, 0, 1, 2])
    x = np.arange(5, dtype=np.float32)
    k = np.array([1, 2, 3, 4], np.float32)
    for method in ("auto", "direct", "fft"):
        np.testing.assert_array_equal(np.asarray(sg.convolve(x, k, method=method)),
                                      [0, 1, 4, 10, 20, 25, 24, 16])
    assert sg.correlate(x.astype(np.complex64), k).dtype == np.complex64


def test_signal_errors():
    x = np.ones(5, np.float32)
    with pytest.raises(ValueError, match="mode must be"):
        sg.convolve(x, x, mode="circular")
    with pytest.raises(ValueError, match="method must be"):
        sg.correlate(x, x, method="overlap")
    with pytest.raises(fnx.errors.ShapeError, match="same number of dimensions"):
        sg.convolve(x, np.ones((2, 2), np.float32))
    with pytest.raises(fnx.errors.ShapeError, match="at least as large"):
        sg.convolve(np.ones((2, 5), np.float32), np.ones((3, 2), np.float32), mode="valid")
    with pytest.raises(NotImplementedError, match="boundary='fill'"):
        sg.convolve2d(np.ones((3, 3), np.float32), np.ones((2, 2), np.float32), boundary="wrap")
    with pytest.raises(fnx.errors.ShapeError, match="2-dimensional"):
        sg.correlate2d(x, x)


def test_signal_grads_jit_vmap(x64):
    a, k = rng.normal(size=8), rng.normal(size=3)
    for mode in ("full", "same", "valid"):
        check_grads(lambda a, k: sg.convolve(a, k, mode), (a, k), order=1)
        check_grads(lambda a, k: sg.correlate(k, a, mode), (a, k), order=1)
    img, ker = rng.normal(size=(5, 6)), rng.normal(size=(2, 3))
    check_grads(lambda x, w: sg.correlate2d(x, w, "same"), (img, ker), order=1)
    f = lambda x: sg.convolve2d(x, ker, "same")
    np.testing.assert_allclose(np.asarray(fnx.jit(f)(img)), np.asarray(f(img)), atol=1e-12)
    batch = rng.normal(size=(3, 8))
    out = fnx.vmap(lambda s: sg.convolve(s, k, "valid"))(batch)
    np.testing.assert_allclose(np.asarray(out), [ss.convolve(s, k, "valid") for s in batch],
                               atol=1e-12)


# --- optimize -------------------------------------------------------------------------------

def rosen(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


A = np.array([[3.0, 1, 0.5], [1, 2, 0.3], [0.5, 0.3, 1]])
B = np.array([1.0, -2, 0.5])


def quad(x, a, b):
    return 0.5 * x @ a @ x - b @ x


def test_result_type_and_fields():
    r = minimize(quad, np.zeros(3, np.float32), (A.astype(np.float32), B.astype(np.float32)),
                 method="BFGS")
    assert isinstance(r, OptimizeResults)
    assert r._fields == ("x", "success", "status", "fun", "jac", "hess_inv", "nfev", "njev",
                         "nit")
    assert r.x.dtype == np.float32 and r.hess_inv.shape == (3, 3)
    assert r.nit.dtype == np.int32 and r.success.dtype == np.bool_


def test_quadratic_matches_jax_and_scipy(x64):
    r = minimize(quad, np.zeros(3), (A, B), method="BFGS")
    # jax 0.10.2 (x64): x [0.71964871 -1.4459181 0.57394948], nfev = njev = 8, nit = 6
    assert bool(r.success) and int(r.status) == 0
    assert (int(r.nfev), int(r.njev), int(r.nit)) == (8, 8, 6)
    np.testing.assert_allclose(np.asarray(r.x), [0.71964871, -1.4459181, 0.57394948], rtol=1e-7)
    np.testing.assert_allclose(np.asarray(r.x), np.linalg.solve(A, B), atol=1e-5)
    np.testing.assert_allclose(float(r.fun), -1.9492273730615925, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(r.hess_inv), np.linalg.inv(A), atol=2e-2)
    assert r.nit.dtype == np.int64                       # the default int under x64
    ref = so.minimize(lambda x: quad(x, A, B), np.zeros(3), method="BFGS")
    np.testing.assert_allclose(np.asarray(r.x), ref.x, atol=1e-5)


def test_rosenbrock_where_jax_converges(x64):
    # jax 0.10.2 (x64), x0 = [-1.2, 1, 0.5, 0.8]: a stationary point with f = 3.70142861043,
    # success, nfev = njev = 35, nit = 26
    r = minimize(rosen, np.array([-1.2, 1.0, 0.5, 0.8]), method="BFGS")
    assert bool(r.success) and int(r.status) == 0
    assert (int(r.nfev), int(r.njev), int(r.nit)) == (35, 35, 26)
    np.testing.assert_allclose(np.asarray(r.x), [-0.77565924, 0.61309339, 0.38206287,
                                                 0.14597204], rtol=1e-7)
    np.testing.assert_allclose(float(r.fun), 3.7014286104300282, rtol=1e-12)


def test_rosenbrock_where_jax_fails(x64):
    # jax 0.10.2 stops this run after 19 iterations with status 3 (its zoom step reads a
    # reversed bracket as an empty one); fnx converges, as SciPy does
    x0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2])
    r = minimize(rosen, x0, method="BFGS")
    assert bool(r.success) and int(r.status) == 0
    np.testing.assert_allclose(np.asarray(r.x), np.ones(5), atol=1e-6)
    ref = so.minimize(so.rosen, x0, jac=so.rosen_der, method="BFGS")
    assert abs(int(r.nit) - ref.nit) <= 3


def test_float32_and_jit():
    x0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2], np.float32)
    r = fnx.jit(lambda x: minimize(rosen, x, method="BFGS"))(x0)
    assert r.x.dtype == np.float32
    np.testing.assert_allclose(np.asarray(r.x), np.ones(5), atol=1e-4)
    eager = minimize(rosen, x0, method="BFGS")
    np.testing.assert_allclose(np.asarray(r.x), np.asarray(eager.x), rtol=1e-5)
    assert int(r.nit) == int(eager.nit)


def test_options_tol_and_vmap():
    x0 = np.zeros(3, np.float32)
    a32, b32 = A.astype(np.float32), B.astype(np.float32)
    r = minimize(quad, x0, (a32, b32), options={"maxiter": 2})
    assert int(r.nit) == 2 and int(r.status) == 1 and not bool(r.success)
    loose = minimize(quad, x0, (a32, b32), tol=1e-1)
    tight = minimize(quad, x0, (a32, b32))
    assert int(loose.nit) < int(tight.nit)              # tol sets gtol (JAX ignores tol)
    targets = np.arange(6, dtype=np.float32).reshape(3, 2)
    xs = fnx.vmap(lambda t: minimize(lambda x: fnp.sum((x - t) ** 2), fnp.zeros(2)).x)(targets)
    np.testing.assert_allclose(np.asarray(xs), targets, atol=1e-5)


def test_minimize_errors():
    x0 = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match="method 'Nelder-Mead' is not supported"):
        minimize(fnp.sum, x0, method="Nelder-Mead")
    with pytest.raises(TypeError, match="args must be a tuple"):
        minimize(lambda x, a: fnp.sum(x * a), x0, args=[1.0])
    with pytest.raises(TypeError, match="unknown options"):
        minimize(fnp.sum, x0, options={"disp": True})
    with pytest.raises(fnx.errors.ShapeError, match="1-D real array"):
        minimize(fnp.sum, np.zeros((2, 2), np.float32))
    with pytest.raises(fnx.errors.ShapeError, match="must return a scalar"):
        minimize(lambda x: x * 2, x0)


LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def test_lbfgs_matches_jax(x64):
    # jax 0.10.2 (x64), x0 = [1.3, 0.7, 0.8, 1.9, 1.2]: stops on ftol (status 4, success
    # False) at f = 2.70315184e-12 after nfev = njev = 42, nit = 27
    r = minimize(rosen, np.array([1.3, 0.7, 0.8, 1.9, 1.2]), method=LBFGS)
    assert (int(r.status), bool(r.success)) == (4, False)
    assert (int(r.nfev), int(r.njev), int(r.nit)) == (42, 42, 27)
    np.testing.assert_allclose(float(r.fun), 2.7031518405142446e-12, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r.x), np.ones(5), atol=1e-6)
    assert r.hess_inv is None
    # x0 = [-1.2, 1, 0.5, 0.8]: status 4 at f = 3.70142861059788, 39 / 39 / 28
    r = minimize(rosen, np.array([-1.2, 1.0, 0.5, 0.8]), method=LBFGS)
    assert (int(r.status), int(r.nfev), int(r.nit)) == (4, 39, 28)
    np.testing.assert_allclose(float(r.fun), 3.7014286105978766, rtol=1e-12)


def test_lbfgs_where_jax_fails(x64):
    # jax 0.10.2 stops this quadratic after 3 iterations with status 5 (line search failed)
    r = minimize(quad, np.zeros(3), (A, B), method=LBFGS)
    assert bool(r.success) and int(r.status) == 0
    np.testing.assert_allclose(np.asarray(r.x), np.linalg.solve(A, B), atol=1e-5)


def test_lbfgs_options_and_jit():
    x0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2], np.float32)
    r = fnx.jit(lambda x: minimize(rosen, x, method="L-BFGS", options={"maxcor": 5}))(x0)
    np.testing.assert_allclose(np.asarray(r.x), np.ones(5), atol=1e-3)
    r = minimize(rosen, x0, method=LBFGS, options={"maxiter": 3})
    assert int(r.status) == 1 and int(r.nit) == 4       # checked before the step, as JAX
    with pytest.raises(TypeError, match="unknown options"):
        minimize(rosen, x0, method=LBFGS, options={"line_search_maxiter": 3})


SIG = rng.normal(size=(2, 100))


@pytest.mark.parametrize("kw", [dict(nperseg=16), dict(nperseg=20, noverlap=15, boundary="even",
                                                       padded=False),
                                dict(nperseg=20, boundary=None, window="blackman"),
                                dict(nperseg=20, boundary="odd", nfft=25, detrend="linear")])
def test_stft_against_scipy(kw, x64):
    f, t, z = sg.stft(SIG, **kw)
    F, T, Z = ss.stft(SIG, **kw)
    np.testing.assert_allclose(np.asarray(f), F, atol=1e-15)
    np.testing.assert_allclose(np.asarray(t), T, atol=1e-15)
    np.testing.assert_allclose(np.asarray(z), Z, atol=1e-14)


def test_istft_roundtrip_and_axes(x64):
    _, _, z = sg.stft(SIG, nperseg=16)
    t, x = sg.istft(z, nperseg=16)
    T, X = ss.istft(ss.stft(SIG, nperseg=16)[2], nperseg=16)
    np.testing.assert_allclose(np.asarray(x), X, atol=1e-14)
    np.testing.assert_allclose(np.asarray(x)[:, :100], SIG, atol=1e-14)
    # t has the signal's length (SciPy and JAX give x.shape[0] samples: 2 here)
    np.testing.assert_allclose(np.asarray(t), np.arange(104.0))
    t1, _ = sg.istft(sg.stft(SIG[0], nperseg=16)[2], nperseg=16)
    np.testing.assert_allclose(np.asarray(t1), ss.istft(ss.stft(SIG[0], nperseg=16)[2],
                                                        nperseg=16)[0])
    x3 = rng.normal(size=(100, 3))
    _, _, z = sg.stft(x3, nperseg=16, axis=0)
    np.testing.assert_allclose(np.asarray(z), ss.stft(x3, nperseg=16, axis=0)[2], atol=1e-14)


@pytest.mark.parametrize("kw", [dict(nperseg=16), dict(nperseg=16, average="median"),
                                dict(nperseg=20, noverlap=5, nfft=32, detrend="linear",
                                     scaling="spectrum"),
                                dict(nperseg=20, return_onesided=False, window="hamming"),
                                dict(nperseg=33, nfft=33)])
def test_welch_csd_against_scipy(kw, x64):
    f, p = sg.welch(SIG, **kw)
    F, P = ss.welch(SIG, **kw)
    np.testing.assert_allclose(np.asarray(f), F, atol=1e-15)
    np.testing.assert_allclose(np.asarray(p), P, atol=1e-14)
    f, p = sg.csd(SIG, SIG[::-1], **kw)
    np.testing.assert_allclose(np.asarray(p), ss.csd(SIG, SIG[::-1], **kw)[1], atol=1e-14)


def test_windows_and_spectral_dtypes():
    for w in ("hann", "hamming", "blackman", "bartlett", "triang", "cosine", "boxcar",
              ("kaiser", 8.0), ("tukey", 0.3)):
        for n in (7, 8):
            np.testing.assert_allclose(np.asarray(sg.get_window(w, n)), ss.get_window(w, n),
                                       atol=1e-6)
            np.testing.assert_allclose(np.asarray(sg.get_window(w, n, fftbins=False)),
                                       ss.get_window(w, n, fftbins=False), atol=1e-6)
    x = SIG.astype(np.float32)
    f, t, z = sg.stft(x, nperseg=16)
    assert (f.dtype, t.dtype, z.dtype) == (np.float32, np.float32, np.complex64)
    assert sg.welch(x, nperseg=16)[1].dtype == np.float32
    with pytest.raises(ValueError, match="unknown window"):
        sg.get_window("gaussianish", 8)
    with pytest.raises(ValueError, match="noverlap"):
        sg.stft(x, nperseg=16, noverlap=16)
    check_grads(lambda v: sg.welch(v, nperseg=16)[1], (x[0],), order=1, modes=("rev",))
