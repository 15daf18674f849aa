"""fnx.nn losses and metrics against NumPy references, and at extreme logits."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import nn

RNG = np.random.default_rng(0)


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_int_labels(reduction, smoothing):
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 3, 1, 1, 2])
    t = np.eye(4)[y] * (1 - smoothing) + smoothing / 4
    ref = -(t * log_softmax(x)).sum(-1)
    ref = {"mean": ref.mean(), "sum": ref.sum(), "none": ref}[reduction]
    got = nn.softmax_cross_entropy(x, y, label_smoothing=smoothing, reduction=reduction)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    got2 = nn.cross_entropy(x, np.eye(4, dtype=np.float32)[y], label_smoothing=smoothing,
                            reduction=reduction)
    np.testing.assert_allclose(got2, ref, rtol=1e-5, atol=1e-6)


def test_cross_entropy_probabilities_and_grad():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    p = RNG.random((3, 4)).astype(np.float32)
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(nn.cross_entropy(x, p), -(p * log_softmax(x)).sum(-1).mean(),
                               rtol=1e-5)
    g = fnx.grad(lambda z: nn.cross_entropy(z, p, reduction="sum"))(x)
    sm = np.exp(log_softmax(x))
    np.testing.assert_allclose(g, sm - p, rtol=1e-4, atol=1e-6)


def test_cross_entropy_extreme_logits():
    x = fnp.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4]], dtype=np.float32)
    y = np.array([1, 2])
    val, g = fnx.value_and_grad(lambda z: nn.cross_entropy(z, y))(x)
    assert np.isfinite(val) and np.isfinite(np.asarray(g)).all()
    np.testing.assert_allclose(val, 2e4 / 2, rtol=1e-5)
    val2, g2 = fnx.value_and_grad(
        lambda z: nn.cross_entropy(z, y, label_smoothing=0.1))(x)
    assert np.isfinite(val2) and np.isfinite(np.asarray(g2)).all()


def test_bce_with_logits():
    x = RNG.standard_normal((6,)).astype(np.float32) * 3
    t = RNG.random(6).astype(np.float32)
    s = 1 / (1 + np.exp(-x))
    ref = -(t * np.log(s) + (1 - t) * np.log(1 - s))
    np.testing.assert_allclose(nn.binary_cross_entropy_with_logits(x, t, reduction="none"),
                               ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.binary_cross_entropy_with_logits(x, t), ref.mean(),
                               rtol=1e-5)
    pw = 2.0
    refw = -(pw * t * np.log(s) + (1 - t) * np.log(1 - s))
    np.testing.assert_allclose(
        nn.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum"), refw.sum(),
        rtol=1e-5)
    xe = fnp.array([1e4, -1e4, 1e4, -1e4], dtype=np.float32)
    te = np.array([1.0, 0.0, 0.0, 1.0], np.float32)
    for kw in ({}, {"pos_weight": 3.0}):
        val, g = fnx.value_and_grad(
            lambda z: nn.binary_cross_entropy_with_logits(z, te, reduction="sum", **kw))(xe)
        assert np.isfinite(val) and np.isfinite(np.asarray(g)).all()
    np.testing.assert_allclose(
        nn.binary_cross_entropy_with_logits(xe, te, reduction="none"), [0, 0, 1e4, 1e4],
        atol=1e-3)


def test_mse_huber():
    a = RNG.standard_normal(8).astype(np.float32) * 2
    b = RNG.standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(nn.mse_loss(a, b), ((a - b) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(nn.mse_loss(a, b, reduction="sum"), ((a - b) ** 2).sum(),
                               rtol=1e-5)
    d = np.abs(a - b)
    for delta in (1.0, 0.5):
        ref = np.where(d <= delta, 0.5 * d ** 2, delta * (d - 0.5 * delta))
        np.testing.assert_allclose(nn.huber_loss(a, b, delta=delta, reduction="none"), ref,
                                   rtol=1e-5, atol=1e-6)
    g = fnx.grad(lambda z: nn.huber_loss(z, b, reduction="sum"))(a)
    np.testing.assert_allclose(g, np.clip(a - b, -1, 1), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        nn.mse_loss(a, b, reduction="avg")


def test_accuracy():
    x = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]], np.float32)
    y = np.array([1, 0, 0, 0])
    np.testing.assert_allclose(nn.accuracy(x, y), 0.75)
    np.testing.assert_allclose(nn.accuracy(x, np.eye(2, dtype=np.float32)[y]), 0.75)
    np.testing.assert_allclose(fnx.jit(nn.accuracy)(x, y), 0.75)
