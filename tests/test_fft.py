"""``fnx.lax.fft`` and ``fnx.numpy.fft``: values against NumPy, the transpose rules against
explicit matrices and JAX's vjps, gradients, JAX's dtypes, errors and the Array API
signatures. The rule sweep of the primitive is ``tests/test_rules_fft.py``."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import ShapeError
from fnx.lax.fft import fft_p
from fnx.testing import Example, check_grads, check_op

F = fnp.fft
NORMS = (None, "backward", "ortho", "forward")
FT = lax.FftType


def _rng(seed=0):
    return np.random.default_rng(seed)


def _complex(rng, shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _close(got, want, dtype=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    tol = 1e-5 if got.dtype in (np.float32, np.complex64) else 1e-12
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


# --- the primitive: check_op with a NumPy reference -------------------------------------------

_NP = {FT.FFT: np.fft.fftn, FT.IFFT: np.fft.ifftn, FT.RFFT: np.fft.rfftn,
       FT.IRFFT: np.fft.irfftn}


def _reference(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    axes = tuple(range(x.ndim - k, x.ndim))
    if fft_type == FT.IRFFT:
        return np.fft.irfftn(x, s=fft_lengths, axes=axes)
    return _NP[fft_type](x, axes=axes)


@st.composite
def _examples(draw):
    fft_type = draw(st.sampled_from(list(FT)))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    lengths = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    shape = batch + lengths
    if fft_type == FT.IRFFT:
        shape = batch + lengths[:-1] + (lengths[-1] // 2 + 1,)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    if fft_type != FT.RFFT:
        x = (x + 1j * rng.uniform(-1, 1, shape)).astype(np.complex64)
    return Example(x, fft_type=fft_type, fft_lengths=lengths)


def test_check_op_fft_primitive():
    report = check_op(fft_p, _examples(), reference=_reference, max_examples=25)
    for check in ("impl", "shape", "jit", "vmap", "jvp", "vjp"):
        assert report.ran[check] > 0, report
    assert "onnx" in report.skipped     # complex values: the exporter has no lowering


@pytest.mark.parametrize("fft_type", list(FT))
def test_primitive_values_with_zero_size_batch(fft_type):
    shape = (0, 4) if fft_type != FT.IRFFT else (0, 3)
    dt = np.float32 if fft_type == FT.RFFT else np.complex64
    out = lax.fft(np.zeros(shape, dt), fft_type, (4,))
    want = _reference(np.zeros((1,) + shape[1:], dt), fft_type=fft_type, fft_lengths=(4,))
    assert out.shape == (0,) + want.shape[1:]


# --- transpose rules against explicit matrices --------------------------------------------------

def _dft(n):
    j = np.arange(n)
    return np.exp(-2j * np.pi * np.outer(j, j) / n)


@pytest.mark.parametrize("n", [1, 2, 5, 6])
def test_transposes_are_the_plain_transposes_of_the_dft_matrices(n, x64):
    rng = _rng(n)
    dft = _dft(n)
    m = n // 2 + 1
    # FFT, IFFT: complex-linear, vjp(ct) = J^T ct
    ct = _complex(rng, n, np.complex128)
    for t, mat in ((FT.FFT, dft), (FT.IFFT, np.conj(dft) / n)):
        _, f = fnx.vjp(lambda x: lax.fft(x, t, (n,)), _complex(rng, n, np.complex128))
        _close(f(ct)[0], mat.T @ ct)
    # RFFT: R^n -> C^m, vjp(ct) = Re(J^T ct)
    ctm = _complex(rng, m, np.complex128)
    _, f = fnx.vjp(lambda x: lax.fft(x, "rfft", (n,)), rng.standard_normal(n))
    _close(f(ctm)[0], np.real(dft[:m].T @ ctm))
    # IRFFT: C^m -> R^n, real-linear: J_re, J_im from unit inputs; vjp = ct J_re - i ct J_im
    eye = np.eye(m)
    j_re = np.stack([np.fft.irfft(e, n) for e in eye], axis=1)
    j_im = np.stack([np.fft.irfft(1j * e, n) for e in eye], axis=1)
    ctn = rng.standard_normal(n)
    _, f = fnx.vjp(lambda z: lax.fft(z, "irfft", (n,)), _complex(rng, m, np.complex128))
    _close(f(ctn)[0], ctn @ j_re - 1j * (ctn @ j_im))


def test_vjps_equal_jax(x64):
    # jax.vjp of jnp.fft.irfft / rfft (JAX 0.10.2, jax_enable_x64), printed to 8 digits
    z = np.array([1 + 2j, -0.5 + 0.25j, 0.75 - 1j, 2 - 0.5j])
    ct = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 0.25])
    _, f = fnx.vjp(lambda z: F.irfft(z, n=6), z)
    np.testing.assert_allclose(f(ct)[0], [0.29166667, -0.875 - 0.21650635j,
                                          1.70833333 - 1.08253175j, -0.125], atol=1e-8)
    _, f = fnx.vjp(lambda z: F.irfft(z, n=5), z[:3])
    np.testing.assert_allclose(f(ct[:5])[0], [0.3, -1.10344419 - 0.96820786j,
                                              1.80344419 + 0.71594242j], atol=1e-8)
    x = np.array([1.0, -2.0, 0.5, 3.0, -1.0])
    c = np.array([1 + 1j, 2 - 1j, -0.5 + 0.5j])
    _, f = fnx.vjp(F.rfft, x)
    np.testing.assert_allclose(f(c)[0], [2.5, 1.3653786, -1.835856, 0.29077102, 2.67970638],
                               atol=1e-7)
    _, f = fnx.vjp(F.rfft, x[:4])
    np.testing.assert_allclose(f(c)[0], [2.5, 0.5, -1.5, 2.5], atol=1e-12)
    g = fnx.grad(lambda x: fnp.sum(fnp.abs(F.rfft(x, norm="ortho")) ** 2 * fnp.arange(3.0)))(x)
    np.testing.assert_allclose(g, [2.50344419, -3.3381966, 0.0763932, 3.9381966, -3.17983739],
                               atol=1e-7)
    g = fnx.grad(lambda x: fnp.sum(F.irfft(F.rfft(x) * fnp.array([1.0, 0.5j, 2.0]), n=5) ** 3))(x)
    np.testing.assert_allclose(g, [32.5012407, 32.68121029, 21.54553961, 6.03765329,
                                   25.57454438], atol=1e-6)


# --- gradients of real-valued losses ---------------------------------------------------------

@pytest.mark.parametrize("norm", NORMS)
def test_grads_of_real_losses(norm):
    rng = _rng(1)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)

    def spectrum_loss(x):
        return fnp.sum(fnp.abs(F.rfft(x, n=6, norm=norm)) ** 2 * w)

    def filter_loss(x):
        y = F.irfft(F.rfft(x, norm=norm) * w, n=6, norm=norm)
        return fnp.sum(fnp.tanh(y))

    def two_d(x):
        return fnp.sum(F.irfft2(F.rfft2(x, s=(4, 5), norm=norm) * 0.5j + 1.0, s=(3, 7),
                                norm=norm) ** 2)

    def complex_path(x):
        z = F.ifft(F.fft(x, axis=0, norm=norm) * (1 + 0.5j), n=5, norm=norm)
        return fnp.sum(fnp.real(z * fnp.conj(z)) + fnp.imag(z))

    def hermitian(x):
        return fnp.sum(F.hfft(F.ihfft(x, norm=norm), n=6, norm=norm) ** 2)

    for loss in (spectrum_loss, filter_loss, two_d, complex_path, hermitian):
        check_grads(loss, (x,), order=2)


def test_jit_vmap_and_ir():
    rng = _rng(2)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)

    def f(x):
        return F.irfftn(F.rfftn(x, axes=(0, 2)), s=(4, 6), axes=(0, 2), norm="ortho")

    _close(fnx.jit(f)(x), np.fft.irfftn(np.fft.rfftn(x, axes=(0, 2)), s=(4, 6), axes=(0, 2),
                                        norm="ortho"))
    _close(fnx.vmap(lambda r: F.fft(r, n=8), in_axes=1)(x),
           np.stack([np.fft.fft(x[:, i], n=8) for i in range(5)]))
    ir = str(fnx.make_ir(lambda x: F.fft2(x))(x))
    assert ir.count("fft[") == 1, ir


# --- fnx.numpy.fft against NumPy ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("norm", NORMS)
def test_one_axis_functions_match_numpy(name, norm):
    rng = _rng(3)
    real = rng.standard_normal((3, 4, 5)).astype(np.float32)
    cplx = _complex(rng, (3, 4, 5))
    x = real if name in ("rfft", "ihfft") else cplx
    for n in (None, 1, 3, 4, 8):
        for axis in (-1, 0, 1):
            if n == 1 and name in ("irfft", "hfft"):
                continue
            want = getattr(np.fft, name)(x, n=n, axis=axis, norm=norm)
            got = getattr(F, name)(x, n=n, axis=axis, norm=norm)
            dt = np.float32 if name in ("irfft", "hfft") else np.complex64
            _close(got, want, dt)
    # real input to the complex transforms, positional n and axis (JAX's and NumPy's form)
    if name not in ("rfft", "ihfft"):
        _close(getattr(F, name)(real, 6, 1, norm), getattr(np.fft, name)(real, 6, 1, norm))


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
@pytest.mark.parametrize("norm", NORMS)
def test_n_dim_functions_match_numpy(name, norm):
    rng = _rng(4)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32) if name == "rfftn" else \
        _complex(rng, (3, 4, 5))
    cases = [(None, None), (None, (0, 2)), (None, (2, 0)), ((2, 7), (2, 0)), ((6,), (1,)),
             ((3, 4, 5, ), (0, 1, 2)), (None, (-1,)), ((4, 4), (-2, -1))]
    for s, axes in cases:
        want = getattr(np.fft, name)(x, s=s, axes=axes, norm=norm)
        _close(getattr(F, name)(x, s=s, axes=axes, norm=norm), want)
    # s without axes: the last len(s) axes (NumPy's, JAX's rule)
    _close(getattr(F, name)(x, s=(2, 6), norm=norm),
           getattr(np.fft, name)(x, s=(2, 6), axes=(1, 2), norm=norm))


def test_more_than_three_axes():
    x = _complex(_rng(5), (2, 3, 2, 3, 2))
    _close(F.fftn(x), np.fft.fftn(x))
    _close(F.ifftn(x, axes=(4, 0, 2, 1)), np.fft.ifftn(x, axes=(4, 0, 2, 1)))


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2"])
@pytest.mark.parametrize("norm", NORMS)
def test_two_dim_functions_match_numpy(name, norm):
    rng = _rng(6)
    x = rng.standard_normal((3, 4, 6)).astype(np.float32) if name == "rfft2" else \
        _complex(rng, (3, 4, 6))
    for s, axes in ((None, (-2, -1)), ((5, 3), (0, 2)), (None, (2, 1))):
        _close(getattr(F, name)(x, s=s, axes=axes, norm=norm),
               getattr(np.fft, name)(x, s=s, axes=axes, norm=norm))
    _close(getattr(F, name)(x), getattr(np.fft, name)(x))


def test_fftfreq_and_rfftfreq(x64):
    for n in (1, 2, 5, 8):
        for d in (1.0, 0.1, 3):
            _close(F.fftfreq(n, d), np.fft.fftfreq(n, d), np.float64)
            _close(F.rfftfreq(n, d=d), np.fft.rfftfreq(n, d), np.float64)
    assert F.fftfreq(0).shape == (0,)
    assert F.fftfreq(4, dtype="float32").dtype == np.float32
    assert F.rfftfreq(4, dtype=np.float16).dtype == np.float16
    d = fnp.asarray(0.5, dtype="float32")          # an array spacing: computed with fnx ops
    _close(F.fftfreq(5, d), np.fft.fftfreq(5, 0.5))
    traced = fnx.jit(lambda d: F.rfftfreq(6, d))(fnp.asarray(0.25))
    _close(traced, np.fft.rfftfreq(6, 0.25))
    assert F.fftfreq(3, device=fnp.ones(1).device).shape == (3,)
    with pytest.raises(ValueError, match="device"):
        F.fftfreq(3, device="gpu")
    with pytest.raises(TypeError, match="real floating"):
        F.fftfreq(3, dtype="int32")
    with pytest.raises(ValueError, match="n must be >= 0"):
        F.rfftfreq(-1)


def test_fftfreq_default_dtype_follows_x64():
    assert F.fftfreq(4).dtype == fnx.core.dtypes.default_float()
    assert F.rfftfreq(4, 0.5).dtype == fnx.core.dtypes.default_float()


@pytest.mark.parametrize("shape", [(5,), (4,), (2, 3), (3, 4, 5)])
def test_fftshift_and_ifftshift(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for axes in [None, 0, -1, (0,), tuple(range(len(shape)))[::-1]]:
        np.testing.assert_array_equal(F.fftshift(x, axes), np.fft.fftshift(x, axes))
        np.testing.assert_array_equal(F.ifftshift(x, axes=axes), np.fft.ifftshift(x, axes))
        np.testing.assert_array_equal(F.ifftshift(F.fftshift(x, axes), axes), x)
    assert F.fftshift(x.astype(np.int32)).dtype == np.int32


# --- dtypes (JAX 0.10.2's, observed) -----------------------------------------------------------

# x64 off: every input gives complex64 / float32 (JAX raises for complex rfft and float16 rfft;
# fnx raises for complex and computes float16 in float32).
_JAX_X64_OFF = {"fft": "complex64", "rfft": "complex64", "irfft": "float32",
                "hfft": "float32", "ihfft": "complex64", "fftn": "complex64",
                "irfftn": "float32"}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "bool", "uint8",
                                   "float16"])
def test_dtypes_with_x64_off(dtype):
    with fnx._config.enable_x64(False):
        x = np.ones(4, dtype)
        for name, want in _JAX_X64_OFF.items():
            assert getattr(F, name)(x).dtype == np.dtype(want), (name, dtype)


@pytest.mark.parametrize("dtype,cplx,real", [
    ("float32", "complex64", "float32"), ("float64", "complex128", "float64"),
    ("int32", "complex64", "float32"), ("int16", "complex64", "float32"),
    ("int64", "complex128", "float64"), ("uint64", "complex128", "float64"),
    ("bool", "complex64", "float32"), ("complex64", "complex64", "float32"),
    ("complex128", "complex128", "float64")])
def test_dtypes_with_x64_on(dtype, cplx, real, x64):
    x = np.ones(4, dtype)
    assert F.fft(x).dtype == cplx and F.ifftn(x).dtype == cplx
    assert F.irfft(x).dtype == real and F.hfft(x).dtype == real
    if dtype[0] != "c":
        assert F.rfft(x).dtype == cplx and F.ihfft(x).dtype == cplx


def test_float16_rfft_computes_in_float32():
    x = np.array([1.0, 2.0, -1.0, 0.5], np.float16)
    out = F.rfft(x)
    assert out.dtype == np.complex64
    _close(out, np.fft.rfft(x.astype(np.float32)))


# --- errors ------------------------------------------------------------------------------------

def test_clear_errors():
    x = np.ones((3, 4), np.float32)
    c = x.astype(np.complex64)
    with pytest.raises(TypeError, match="rfft: needs real input"):
        F.rfft(c)
    with pytest.raises(TypeError, match="ihfft: needs real input"):
        F.ihfft(c)
    with pytest.raises(ValueError, match='norm must be "backward", "ortho" or "forward"'):
        F.fft(x, norm="bad")
    with pytest.raises(ValueError, match="norm"):
        F.hfft(x, norm="Ortho")
    with pytest.raises(ValueError, match="repeated axes"):
        F.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match="s has 1 sizes for 2 axes"):
        F.fftn(x, s=(2,), axes=(0, 1))
    with pytest.raises(ValueError, match="n=0"):
        F.fft(x, n=0)
    with pytest.raises(ValueError, match="2 \\* \\(m - 1\\) is 0"):
        F.irfft(np.ones(1, np.complex64))
    with pytest.raises(ShapeError, match="out of bounds"):
        F.fft(x, axis=2)
    with pytest.raises(TypeError, match="axis must be one int"):
        F.fft(x, axis=(0, 1))
    with pytest.raises(ValueError, match="two axes"):
        F.fft2(x, axes=(0,))
    with pytest.raises(ValueError, match="at least one axis"):
        F.rfftn(x, axes=())
    with pytest.raises(ValueError, match="rank >= 1"):
        F.fft(np.float32(1.0))
    # fftn over no axes is the input as complex (JAX's and NumPy's result)
    out = F.fftn(x, axes=())
    assert out.dtype == np.complex64 and out.shape == x.shape


def test_lax_fft_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ShapeError, match="FFT needs a complex64 or complex128 operand"):
        lax.fft(x, "fft", (4,))
    with pytest.raises(ShapeError, match="RFFT needs a float32 or float64 operand"):
        lax.fft(x.astype(np.complex64), FT.RFFT, (4,))
    with pytest.raises(ShapeError, match="trailing 2 axes .* sizes \\(3, 3\\)"):
        lax.fft(x.astype(np.complex64), FT.IRFFT, (3, 4))
    with pytest.raises(ShapeError, match="rank >= 3"):
        lax.fft(x, FT.RFFT, (2, 3, 4))
    with pytest.raises(ShapeError, match="at least one axis"):
        lax.fft(x, FT.RFFT, ())
    with pytest.raises(ValueError, match="unknown fft_type"):
        lax.fft(x, "dct", (4,))
    assert lax.fft(x, "FftType.RFFT", (3, 4)).shape == (3, 3)
    assert lax.fft(x, 2, (4,)).shape == (3, 3)
    assert lax.fft(x, FT.RFFT, 4).shape == (3, 3)      # one length as an int


def test_onnx_export_raises_a_clear_error():
    pytest.importorskip("onnx")
    from fnx.errors import MissingRuleError
    with pytest.raises(MissingRuleError, match="fft"):
        fnx.onnx.export(lambda x: fnp.abs(F.rfft(x)), np.ones(4, np.float32))


# --- the Array API fft extension ---------------------------------------------------------------

_SPEC = {  # name -> (positional-only args, keyword-only args) of the 2024.12 standard
    **{n: (["x"], ["n", "axis", "norm"]) for n in ("fft", "ifft", "rfft", "irfft", "hfft",
                                                    "ihfft")},
    **{n: (["x"], ["s", "axes", "norm"]) for n in ("fftn", "ifftn", "rfftn", "irfftn")},
    "fftfreq": (["n"], ["d", "dtype", "device"]),
    "rfftfreq": (["n"], ["d", "dtype", "device"]),
    "fftshift": (["x"], ["axes"]), "ifftshift": (["x"], ["axes"]),
}


@pytest.mark.parametrize("name", sorted(_SPEC))
def test_every_call_the_standard_allows_binds(name):
    sig = inspect.signature(getattr(F, name))
    pos, kw = _SPEC[name]
    sig.bind(*[object()] * len(pos), **{k: object() for k in kw})
    sig.bind(*[object()] * len(pos))


def test_namespace_has_the_extension():
    x = fnp.ones(4)
    assert x.__array_namespace__().fft is F
    assert sorted(F.__all__) == sorted(list(_SPEC) + ["fft2", "ifft2", "rfft2", "irfft2"])
    _close(x.__array_namespace__().fft.fft(x, n=4, axis=-1, norm="ortho"),
           np.fft.fft(np.ones(4), norm="ortho"))


def test_lengths_must_be_static_ints():
    x = np.ones(4, np.float32)
    with pytest.raises(fnx.errors.ConcretizationError, match="n must be known when tracing"):
        fnx.jit(lambda x, n: F.fft(x, n=n))(x, 3)
    assert fnx.jit(lambda x, n: F.rfft(x, n=n), static_argnums=1)(x, 6).shape == (4,)
    with pytest.raises(TypeError, match="fft: n must be an int, got 2.5"):
        F.fft(x, n=2.5)
    with pytest.raises(TypeError, match="s must be a sequence of ints"):
        F.fftn(x, s=(2.0,))
