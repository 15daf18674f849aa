"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3) (``fnx.kernels.winograd``, used by
the NumPy convolution impls for wide enough channels and rows): against a float64
direct convolution, against the im2col plan, through jit and grad, every padding and
layout, and off with FNX_WINOGRAD=0."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core import numpy_windows as nw
from fnx.kernels import host, winograd

pytestmark = pytest.mark.skipif(not winograd.enabled(),
                                reason="no C++ compiler (or FNX_WINOGRAD=0)")
RNG = np.random.default_rng(0)


def direct(x, w, pads):
    """float64 convolution by definition (NCHW, OIHW, stride 1)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(pads))
    N, C, H, W = x.shape
    Ho, Wo = H - 2, W - 2
    out = np.zeros((N, w.shape[0], Ho, Wo))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + Ho, j:j + Wo], w[:, :, i, j])
    return out


@pytest.mark.parametrize("shape,co,pads", [
    ((2, 32, 17, 19), 32, ((1, 1), (1, 1))),      # odd sizes: partial last tiles
    ((1, 33, 10, 21), 40, ((0, 0), (0, 0))),      # no padding
    ((3, 32, 9, 16), 32, ((2, 0), (1, 3))),       # uneven padding, wider than the input
    ((2, 48, 16, 16), 36, ((1, 1), (1, 1))),
])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-13)])
def test_conv3x3_matches_the_definition(shape, co, pads, dtype, tol):
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((co, shape[1], 3, 3)).astype(dtype)
    got = winograd.conv3x3(x, w, pads)
    want = direct(x, w.astype(np.float64), pads)
    assert got.dtype == dtype and got.shape == want.shape
    scale = np.abs(x).max() * np.abs(w).max() * 9 * shape[1]
    np.testing.assert_allclose(got, want, atol=tol * scale, rtol=0)


def _conv(x, w, padding="SAME", dn=None):
    return lax.conv_general_dilated(x, w, (1, 1), padding, dimension_numbers=dn)


def test_the_impls_use_it_for_wide_channels_and_rows(monkeypatch):
    calls = []
    real = nw._WINOGRAD[0]
    monkeypatch.setattr(nw, "_WINOGRAD", [lambda *a: calls.append(1) or real(*a)])
    x = RNG.standard_normal((2, 32, 12, 20)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    y = fnx.jit(_conv)(x, w)
    assert calls, "a 32-channel 3x3 convolution over 20-wide rows goes through Winograd"
    np.testing.assert_allclose(np.asarray(y), direct(x, w, ((1, 1), (1, 1))), atol=2e-4)
    calls.clear()
    fnx.jit(_conv)(x[:, :, :, :8], w)          # rows of 8: the im2col plan
    fnx.jit(_conv)(x[:, :16], w[:16, :16])     # 16 channels: the im2col plan
    assert not calls


def test_layouts_jit_eager_and_gradients_agree_with_im2col(monkeypatch):
    x = RNG.standard_normal((2, 32, 10, 18)).astype(np.float32)
    w = (RNG.standard_normal((40, 32, 3, 3)) * 0.1).astype(np.float32)
    nhwc = ("NHWC", "HWIO", "NHWC")
    xt, wt = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)

    def loss(x, w):
        return fnp.sum(fnp.tanh(_conv(x, w)) ** 2)

    wino = (np.asarray(_conv(x, w)), np.asarray(fnx.jit(_conv)(x, w)),
            [np.asarray(g) for g in fnx.jit(fnx.grad(loss, argnums=(0, 1)))(x, w)])
    monkeypatch.setattr(nw, "_WINOGRAD", [])
    plain = (np.asarray(_conv(x, w)), np.asarray(fnx.jit(_conv)(x, w)),
             [np.asarray(g) for g in fnx.jit(fnx.grad(loss, argnums=(0, 1)))(x, w)])
    np.testing.assert_array_equal(wino[0], wino[1])       # eager and jit: the same plan
    np.testing.assert_allclose(wino[0], plain[0], atol=2e-5)
    for a, b in zip(wino[2], plain[2]):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    # channels-last operands take the im2col plan of their own layout
    got = np.asarray(fnx.jit(lambda a, b: _conv(a, b, dn=nhwc))(xt, wt))
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), plain[0], atol=2e-5)


def test_off_with_the_environment_variable_or_without_a_compiler(monkeypatch):
    monkeypatch.setattr(nw, "_WINOGRAD", [])
    monkeypatch.setenv("FNX_WINOGRAD", "0")
    assert not winograd.enabled() and not winograd.install() and nw._WINOGRAD == []
    monkeypatch.setenv("FNX_WINOGRAD", "1")
    monkeypatch.setattr(host, "compiler_available", lambda: False)
    assert not winograd.install() and nw._WINOGRAD == []
    monkeypatch.setattr(host, "compiler_available", lambda: True)
    assert winograd.install() and nw._WINOGRAD == [winograd._hook]
