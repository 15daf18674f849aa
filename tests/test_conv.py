"""Values of fnx.lax's convolutions and pooling against direct NumPy definitions, their
errors, and a LeNet-style CNN's loss and gradient against a hand-written NumPy backprop
(eager, jit, and per example under vmap). The rules are swept in test_rules_conv.py."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import ShapeError
from fnx.lax import convolution as cv

# The references are float64 NumPy computations checked to 1e-10: run with x64 on, as JAX's
# suite does; test_default_mode_narrows_like_jax covers the default (x64 off) mode.
pytestmark = pytest.mark.x64

RNG = np.random.default_rng(0)


def _pad_dilate(x, pads, dils):
    """x (N, C, spatial...) dilated and padded (negative: cropped) on the spatial dims."""
    for i, ((lo, hi), d) in enumerate(zip(pads, dils)):
        ax = 2 + i
        n = x.shape[ax]
        shape = list(x.shape)
        shape[ax] = (n - 1) * d + 1 if n else 0
        y = np.zeros(shape, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[ax] = slice(None, None, d)
        y[tuple(idx)] = x
        widths = [(0, 0)] * x.ndim
        widths[ax] = (max(lo, 0), max(hi, 0))
        y = np.pad(y, widths)
        idx[ax] = slice(max(-lo, 0), y.shape[ax] - max(-hi, 0))
        x = y[tuple(idx)]
    return x


def ref_conv(x, w, strides, pads, ldil=None, rdil=None, G=1, B=1):
    """Direct loop definition, NCHW / OIHW (any number of spatial dims)."""
    nsp = x.ndim - 2
    ldil, rdil = ldil or (1,) * nsp, rdil or (1,) * nsp
    xp = _pad_dilate(x, pads, ldil)
    N, C = x.shape[:2]
    Co, Ci = w.shape[:2]
    ks = w.shape[2:]
    out_sp = [max(0, (xp.shape[2 + i] - ((ks[i] - 1) * rdil[i] + 1)) // strides[i] + 1)
              for i in range(nsp)]
    Nb, Cg = N // B, C // G
    out = np.zeros((Nb, Co) + tuple(out_sp))
    for n in range(Nb):
        for o in range(Co):
            g = o // (Co // G)
            b = o // (Co // B)
            for pos in np.ndindex(*out_sp):
                s = 0.0
                for c in range(Ci):
                    for k in np.ndindex(*ks):
                        at = tuple(pos[i] * strides[i] + k[i] * rdil[i] for i in range(nsp))
                        s += xp[(b * Nb + n, g * Cg + c) + at] * w[(o, c) + k]
                out[(n, o) + pos] = s
    return out


def _close(a, b, tol=1e-10):
    a = np.asarray(a)
    assert a.shape == np.shape(b)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("xs,ws,strides,pads,ldil,rdil,G,B", [
    ((2, 3, 5, 6), (4, 3, 2, 3), (1, 1), ((0, 0), (0, 0)), None, None, 1, 1),
    ((2, 4, 5, 6), (4, 2, 3, 2), (2, 1), ((1, 2), (-1, 1)), (2, 1), (1, 2), 2, 1),
    ((4, 3, 7), (6, 3, 3), (2,), ((1, 1),), None, (2,), 1, 2),
    ((1, 2, 4, 3, 3), (3, 2, 2, 1, 2), (1, 1, 1), ((0, 1), (1, 0), (0, 0)), (1, 2, 1),
     (1, 1, 2), 1, 1),
])
def test_conv_general_dilated_values(xs, ws, strides, pads, ldil, rdil, G, B):
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    got = lax.conv_general_dilated(x, w, strides, pads, ldil, rdil, feature_group_count=G,
                                   batch_group_count=B)
    _close(got, ref_conv(x, w, strides, pads, ldil, rdil, G, B))
    _close(fnx.jit(lambda a, b: lax.conv_general_dilated(
        a, b, strides, pads, ldil, rdil, feature_group_count=G, batch_group_count=B))(x, w),
        np.asarray(got), 0)


def test_layouts_nhwc_hwio_and_padding_strings():
    x, w = RNG.standard_normal((2, 3, 7, 6)), RNG.standard_normal((5, 3, 3, 2))
    for padding, pads in [("VALID", ((0, 0), (0, 0))), ("SAME", ((1, 1), (0, 1))),
                          ("SAME_LOWER", ((1, 1), (1, 0)))]:
        want = ref_conv(x, w, (1, 1), pads)
        _close(lax.conv(x, w, (1, 1), padding), want)
        got = lax.conv_general_dilated(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0),
                                       (1, 1), padding,
                                       dimension_numbers=("NHWC", "HWIO", "NHWC"))
        _close(got, want.transpose(0, 2, 3, 1))
    # SAME with stride 2: output ceil(n / s)
    assert lax.conv(x, w, (2, 2), "SAME").shape == (2, 5, 4, 3)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NCHW", "OIHW", "NHWC"))
    assert dn == ((0, 1, 2, 3), (0, 1, 2, 3), (0, 3, 1, 2))


def test_depthwise_and_batch_groups():
    x = RNG.standard_normal((2, 4, 6, 5))
    w = RNG.standard_normal((8, 1, 3, 3))          # depth multiplier 2
    got = lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=4)
    want = np.concatenate([ref_conv(x[:, c:c + 1], w[2 * c:2 * c + 2], (1, 1),
                                    ((1, 1), (1, 1))) for c in range(4)], axis=1)
    _close(got, want)
    x, w = RNG.standard_normal((6, 3, 5, 4)), RNG.standard_normal((4, 3, 2, 2))
    got = lax.conv_general_dilated(x, w, (1, 1), "VALID", batch_group_count=2)
    want = np.concatenate([ref_conv(x[3 * b:3 * b + 3], w[2 * b:2 * b + 2], (1, 1),
                                    ((0, 0), (0, 0))) for b in range(2)], axis=1)
    _close(got, want)


def _ref_conv_transpose_1d(x, w, s):
    """Scatter definition (NHC / HIO, VALID, kernel not transposed): each input element
    adds its products at i*s + (k-1-j) (JAX pads by k-1, a flipped correlation)."""
    n, length, c = x.shape
    k, _, o = w.shape
    out = np.zeros((n, (length - 1) * s + k, o))
    for i in range(length):
        for j in range(k):
            out[:, i * s + (k - 1 - j)] += x[:, i] @ w[j]
    return out


def test_conv_transpose_shapes_and_values():
    x = RNG.standard_normal((2, 5, 3))
    for s, k in [(1, 3), (2, 3), (3, 2), (2, 2)]:
        w = RNG.standard_normal((k, 3, 4))
        valid = lax.conv_transpose(x, w, (s,), "VALID")
        assert valid.shape == (2, 5 * s + max(k - s, 0), 4)
        assert lax.conv_transpose(x, w, (s,), "SAME").shape == (2, 5 * s, 4)
        if k >= s:
            _close(valid, _ref_conv_transpose_1d(x, w, s))
    # transpose_kernel=True: the gradient of the strided convolution it undoes
    x4, w4 = RNG.standard_normal((2, 9, 7, 3)), RNG.standard_normal((3, 3, 3, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x4, w4, (2, 2), "VALID", dimension_numbers=dn)
    ct = RNG.standard_normal(y.shape)
    _, vjp = fnx.vjp(lambda a: lax.conv_general_dilated(a, w4, (2, 2), "VALID",
                                                        dimension_numbers=dn), x4)
    _close(lax.conv_transpose(ct, w4, (2, 2), "VALID", transpose_kernel=True), vjp(ct)[0])


def _ref_pool(x, window, strides, op, init):
    out_shape = [(n - w) // s + 1 for n, w, s in zip(x.shape, window, strides)]
    out = np.full(out_shape, float(init))
    for pos in np.ndindex(*out_shape):
        sl = tuple(slice(p * s, p * s + w) for p, s, w in zip(pos, strides, window))
        out[pos] = op(x[sl])
    return out


@pytest.mark.parametrize("window,strides", [((1, 2, 2), (1, 2, 2)), ((2, 3, 2), (1, 1, 2)),
                                            ((1, 3, 3), (1, 2, 1))])
def test_pooling_values(window, strides):
    x = RNG.standard_normal((3, 7, 6))
    for comp, init, op in [(lax.max, -np.inf, np.max), (lax.min, np.inf, np.min),
                           (lax.add, 0.0, np.sum)]:
        got = lax.reduce_window(x, init, comp, window, strides, "VALID")
        _close(got, _ref_pool(x, window, strides, op, init))
    # non-identity init: the accumulator starts there (XLA)
    got = lax.reduce_window(x, 1.5, lax.add, window, strides, "VALID")
    _close(got, _ref_pool(x, window, strides, np.sum, 0) + 1.5)
    got = lax.reduce_window(x, 0.25, lax.max, window, strides, "VALID")
    _close(got, np.maximum(_ref_pool(x, window, strides, np.max, 0), 0.25))


def test_integer_pooling_takes_infinite_identities_as_jax():
    """-inf for max and +inf for min are the identity for integer operands too (JAX reads
    them so; max_pool passes -inf for every dtype and raised OverflowError on uint8);
    another float init_value for an integer operand is a TypeError, as in JAX, not a
    silent truncation."""
    x = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1)
    got = cv.max_pool(x, (2, 2))
    assert got.dtype == np.uint8 and np.asarray(got).ravel().tolist() == [5, 7, 13, 15]
    assert np.asarray(cv.min_pool(x, (2, 2))).ravel().tolist() == [0, 2, 8, 10]
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert lax.reduce_window(xi, -np.inf, lax.max, (1, 2), (1, 1), "VALID").tolist() == \
        [[1, 2], [4, 5]]
    assert lax.reduce_window(xi, np.int32(3), lax.max, (1, 2), (1, 1), "VALID").tolist() == \
        [[3, 3], [4, 5]]
    for init, comp in ((0.5, lax.max), (-np.inf, lax.min), (2.0, lax.add)):
        with pytest.raises(TypeError, match=r"init_value .* and the operand is int32"):
            lax.reduce_window(xi, init, comp, (1, 2), (1, 1), "VALID")


def test_pool_helpers_and_padding():
    x = RNG.standard_normal((2, 5, 6, 3))              # NHWC
    _close(cv.max_pool(x, (2, 2)), _ref_pool(x, (1, 2, 2, 1), (1, 2, 2, 1), np.max, 0))
    _close(cv.avg_pool(x, (2, 3), (1, 3)),
           _ref_pool(x, (1, 2, 3, 1), (1, 1, 3, 1), np.mean, 0))
    xn = x.transpose(0, 3, 1, 2)                        # NCHW
    _close(cv.max_pool(xn, (2, 2), spatial_axes=(2, 3)),
           _ref_pool(xn, (1, 1, 2, 2), (1, 1, 2, 2), np.max, 0))
    # SAME average pooling, padding counted or not
    padded = np.pad(x, ((0, 0), (0, 1), (0, 0), (0, 0)))
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 1), (0, 0), (0, 0)))
    sums = _ref_pool(padded, (1, 2, 2, 1), (1, 2, 2, 1), np.sum, 0)
    counts = _ref_pool(ones, (1, 2, 2, 1), (1, 2, 2, 1), np.sum, 0)
    _close(cv.avg_pool(x, (2, 2), padding="SAME"), sums / 4)
    _close(cv.avg_pool(x, (2, 2), padding="SAME", count_include_pad=False), sums / counts)


def test_max_pool_gradient_goes_to_first_maximum():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 5.0, 5.0]])
    g = fnx.grad(lambda a: lax.reduce_window(a, -np.inf, lax.max, (2, 2), (2, 2),
                                             "VALID").sum())(x)
    _close(g, [[0, 1, 0, 0], [0, 0, 1, 0]])
    g = fnx.grad(lambda a: lax.reduce_window(a, np.inf, lax.min, (1, 2), (1, 1),
                                             "VALID").sum())(x)
    _close(g, [[1, 1, 0, 1], [0, 2, 1, 0]])   # ties: the first minimum


def test_errors():
    x, w = np.ones((2, 3, 5, 5), np.float32), np.ones((4, 2, 3, 3), np.float32)
    with pytest.raises(ShapeError, match="conv_general_dilated.*feature"):
        lax.conv(x, w, (1, 1), "VALID")
    with pytest.raises(ShapeError, match="dimension_numbers"):
        lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NXHW"))
    with pytest.raises(ShapeError, match="window_strides"):
        lax.conv(x, np.ones((4, 3, 3, 3), np.float32), (1,), "VALID")
    with pytest.raises(ShapeError, match="one dtype"):
        lax.conv(x, np.ones((4, 3, 3, 3), np.float16), (1, 1), "VALID")
    with pytest.raises(ShapeError, match="padding"):
        lax.conv(x, np.ones((4, 3, 3, 3), np.float32), (1, 1), "FULL")
    with pytest.raises(ShapeError, match="reduce_window.*computation"):
        lax.reduce_window(x, 1.0, lax.mul, (1, 1, 2, 2), (1, 1, 1, 1), "VALID")
    with pytest.raises(ShapeError, match="window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "VALID")


def test_default_mode_narrows_like_jax():
    """With x64 off, float64 NumPy operands narrow to float32 in eager, jit, eval_shape, vmap and
    grad alike (JAX: float32 everywhere); a float64 operand beside a float32 one is then not a
    dtype mismatch, but float16 beside float32 still is."""
    x, w = RNG.standard_normal((2, 3, 5, 6)), RNG.standard_normal((4, 3, 2, 3))
    def conv(x, w):
        return lax.conv(x, w, (1, 1), "SAME")

    def pool(x):
        return lax.reduce_window(x, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    with fnx.enable_x64(False):
        want = ref_conv(x, w, (1, 1), ((0, 1), (1, 1)), None, None, 1, 1)
        for got in (conv(x, w), fnx.jit(conv)(x, w), conv(x.astype(np.float32), w),
                    fnx.vmap(conv, (0, None))(x[:, None], w)[:, 0]):
            assert got.dtype == np.float32
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
        assert fnx.eval_shape(conv, x, w).dtype == np.float32
        assert fnx.grad(lambda x: conv(x, w).sum())(x).dtype == np.float32
        assert pool(x).dtype == fnx.jit(pool)(x).dtype == np.float32
        assert fnx.eval_shape(pool, x).dtype == np.float32
        with pytest.raises(ShapeError, match="one dtype"):
            lax.conv(x.astype(np.float32), w.astype(np.float16), (1, 1), "VALID")


# --- a LeNet-style CNN against a hand-written NumPy backprop -----------------------------

def _numpy_reference():
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "cnn_step.py"
    spec = importlib.util.spec_from_file_location("_cnn_step_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _loss(p, x, y):
    h = lax.conv(x, p["w1"], (1, 1), "VALID")
    h = fnp.maximum(h + p["b1"][None, :, None, None], 0.0)
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    h = lax.conv_general_dilated(h, p["w2"], (1, 1), "VALID",
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    h = fnp.maximum(h + p["b2"][None, :, None, None], 0.0)
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    logits = h.reshape(h.shape[0], -1) @ p["w3"] + p["b3"]
    m = lax.stop_gradient(fnp.max(logits, axis=1, keepdims=True))
    lse = fnp.log(fnp.sum(fnp.exp(logits - m), axis=1)) + m[:, 0]
    return fnp.mean(lse - fnp.take_along_axis(logits, y[:, None], axis=1)[:, 0])


def test_lenet_loss_and_grad_against_numpy():
    ref = _numpy_reference()
    rng = np.random.default_rng(3)
    p = ref.init_params(rng, np.float64)
    x = rng.standard_normal((4, 1, 28, 28))
    y = rng.integers(0, 10, 4).astype(np.int32)
    new_p, want_loss = ref.numpy_step(p, x, y)
    want = {k: (p[k] - new_p[k]) / ref.LR for k in p}
    for vg in (fnx.value_and_grad(_loss), fnx.jit(fnx.value_and_grad(_loss))):
        loss, g = vg(p, x, y)
        _close(loss, want_loss, 1e-9)
        for k in p:
            _close(g[k], want[k], 1e-9)
    # per-example gradients under vmap: each example as a batch of one
    per = fnx.jit(fnx.vmap(fnx.grad(lambda p, a, b: _loss(p, a[None], b[None])),
                           in_axes=(None, 0, 0)))(p, x, y)
    for i in range(2):
        new_i, _ = ref.numpy_step(p, x[i:i + 1], y[i:i + 1])
        for k in p:
            _close(per[k][i], (p[k] - new_i[k]) / ref.LR, 1e-9)


def test_bfloat16_conv_stays_bfloat16():
    # ml_dtypes' bfloat16 matmul gives float32; the result had float32 buffers under a
    # bfloat16 type (found by JAX's lax_test testConvTranspose0D/1D with bfloat16)
    bf16 = fnx.dtypes.bfloat16
    x, w = RNG.standard_normal((2, 3, 7, 6)), RNG.standard_normal((4, 3, 3, 2))
    for dn, xs, ws in ((("NCHW", "OIHW", "NCHW"), x, w),
                       (("NHWC", "HWIO", "NHWC"), x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)),
                       (("NC", "IO", "NC"), x[:, :, 0, 0], w[:, :, 0, 0].T)):
        xb, wb = xs.astype(bf16), ws.astype(bf16)
        nsp = xb.ndim - 2
        f = lambda a, b: lax.conv_general_dilated(a, b, (1,) * nsp, "SAME",
                                                  dimension_numbers=dn)
        for out in (f(xb, wb), fnx.jit(f)(xb, wb)):
            assert out.dtype == bf16 and np.asarray(out).dtype == bf16
            want = f(xb.astype(np.float32), wb.astype(np.float32))
            np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(want),
                                       rtol=0.05, atol=0.1)


def test_conv_transpose_consistent_padding_and_padtype_ints():
    # use_consistent_padding: explicit pairs are the forward convolution's padding, so
    # conv_transpose (transpose_kernel=True) is the gradient of conv with the same arguments
    w = RNG.standard_normal((3, 3, 3, 4))
    pads = ((1, 1), (2, 0))
    fwd = lambda y: lax.conv_general_dilated(y, w, (1, 1), pads,
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y0 = np.zeros((2, 7, 8, 3))
    ct = RNG.standard_normal(fwd(y0).shape)
    want = fnx.vjp(fwd, y0)[1](ct)[0]
    got = lax.conv_transpose(ct, w, (1, 1), pads, use_consistent_padding=True,
                             transpose_kernel=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
    old = lax.conv_transpose(ct, w, (1, 1), ((1, 1), (0, 2)), transpose_kernel=True)
    np.testing.assert_allclose(np.asarray(old), np.asarray(want), rtol=1e-4, atol=1e-4)
    pads = lax.padtype_to_pads(np.array([10, 10]), np.array([5, 5]), np.array([1, 1]), "SAME")
    assert all(type(v) is int for p in pads for v in p)


def test_vmap_of_grouped_conv_over_an_empty_batch():
    # the grouped batching rule split by the batch size (ZeroDivisionError at size 0)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ((1, 0), (0, 1)),
                                                 dimension_numbers=("HWCN", "HWIO", "HWCN"),
                                                 feature_group_count=2)
    x, w = np.ones((6, 7, 2, 2), np.float32), np.ones((1, 2, 1, 2), np.float32)
    for args, axes in (((x, w[:, :, None][:, :, :0]), (None, 2)),
                       ((x[:, :, None][:, :, :0], w), (2, None))):
        out = fnx.vmap(conv, in_axes=axes)(*args)
        assert out.shape == (0, 7, 7, 2, 2) and out.dtype == np.float32
