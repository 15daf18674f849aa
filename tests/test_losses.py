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


# --- bad inputs raise (or give NaN under tracing), never a silently wrong loss ----------

X3 = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)


@pytest.mark.parametrize("bad", [[0, 7], [-1, 2], [3, 3]])
def test_cross_entropy_labels_out_of_range_raise(bad):
    with pytest.raises(ValueError) as err:
        nn.cross_entropy(X3, np.array(bad))
    msg = str(err.value)
    assert "softmax_cross_entropy" in msg and "3 classes" in msg
    first = next(i for i, b in enumerate(bad) if not 0 <= b < 3)
    assert f"{bad[first]} at ({first},)" in msg
    # label smoothing and other reductions go through the same check
    with pytest.raises(ValueError, match="out of range"):
        nn.softmax_cross_entropy(X3, np.array(bad), label_smoothing=0.1, reduction="none")


def test_cross_entropy_labels_out_of_range_checked_with_traced_logits():
    # labels are concrete (closed over) while the logits are traced: still raises
    with pytest.raises(ValueError, match="7 at"):
        fnx.grad(lambda z: nn.cross_entropy(z, np.array([0, 7])))(X3)
    with pytest.raises(ValueError, match="7 at"):
        fnx.jit(lambda z: nn.cross_entropy(z, np.array([0, 7])))(X3)


def test_cross_entropy_traced_bad_labels_give_nan():
    y = np.array([0, 7])
    out = fnx.jit(nn.cross_entropy)(X3, y)
    assert np.isnan(out)
    per = fnx.jit(lambda x, y: nn.cross_entropy(x, y, reduction="none"))(X3, np.array([2, -1]))
    assert np.isfinite(per[0]) and np.isnan(per[1])
    np.testing.assert_allclose(per[0], nn.cross_entropy(X3[:1], np.array([2])), rtol=1e-6)
    vm = fnx.vmap(lambda x, y: nn.cross_entropy(x, y))(X3, np.array([1, 3]))
    assert np.isfinite(vm[0]) and np.isnan(vm[1])
    # valid labels under jit are unchanged
    np.testing.assert_allclose(fnx.jit(nn.cross_entropy)(X3, np.array([0, 2])),
                               nn.cross_entropy(X3, np.array([0, 2])), rtol=1e-6)


def test_cross_entropy_label_shape_mismatch():
    with pytest.raises(ValueError, match=r"cross_entropy.*\(1,\).*\(2, 3\)"):
        nn.cross_entropy(X3, np.array([0]))      # used to broadcast one label over both rows


def test_accuracy_bad_labels():
    with pytest.raises(ValueError) as err:
        nn.accuracy(X3, np.array([2, 5]))
    assert "accuracy" in str(err.value) and "5 at (1,)" in str(err.value)
    assert "3 classes" in str(err.value)
    with pytest.raises(ValueError, match="-1 at"):
        nn.accuracy(X3, np.array([-1, 2]))
    assert np.isnan(fnx.jit(nn.accuracy)(X3, np.array([2, 5])))
    np.testing.assert_allclose(fnx.jit(nn.accuracy)(X3, np.array([1, 2])), 1.0)
    with pytest.raises(ValueError, match=r"accuracy.*\(2, 1\)"):
        nn.accuracy(X3, np.array([[1], [2]]))   # would broadcast to a 2x2 comparison
    # integer one-hot labels are one-hot, not indices
    np.testing.assert_allclose(nn.accuracy(X3, np.eye(3, dtype=np.int32)[[1, 0]]), 0.5)


@pytest.mark.parametrize("loss,names", [
    (nn.mse_loss, ("pred", "target")),
    (nn.huber_loss, ("pred", "target")),
    (nn.binary_cross_entropy_with_logits, ("logits", "targets")),
])
def test_regression_losses_shape_mismatch(loss, names):
    p = np.arange(3, dtype=np.float32).reshape(3, 1)
    t = np.array([0.0, 1.0, 1.0], np.float32)
    with pytest.raises(ValueError) as err:
        loss(p, t)
    msg = str(err.value)
    assert loss.__name__ in msg and "(3, 1)" in msg and "(3,)" in msg and "(3, 3)" in msg
    assert f"{names[0]} of shape" in msg and "allow_broadcast=True" in msg
    assert isinstance(err.value, fnx.errors.ShapeError)
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        loss(np.zeros(2, np.float32), t)           # no broadcast at all
    with pytest.raises(ValueError, match=r"\(\).*\(3,\)"):
        loss(np.float32(0.5), t)                   # a 0-d prediction is not a target
    with pytest.raises(ValueError, match=loss.__name__):
        fnx.jit(loss)(p, t)                        # shapes are checked under tracing too
    # opt-in: the old broadcasting result
    got = loss(p, t, allow_broadcast=True, reduction="none")
    assert got.shape == (3, 3)
    # same shapes, and a 0-d target (a Python number or a 0-d array), are fine
    np.testing.assert_allclose(loss(p[:, 0], t, reduction="none"),
                               loss(p, t[:, None], reduction="none")[:, 0])
    np.testing.assert_allclose(loss(p, 1.0, reduction="none"),
                               loss(p, np.ones((3, 1), np.float32), reduction="none"))
    np.testing.assert_allclose(loss(p, np.float32(1.0)), loss(p, np.ones_like(p)))


def test_mse_scalar_target_keeps_dtype():
    x = fnp.ones(3, dtype=np.float16)
    assert nn.mse_loss(x, 0.0).dtype == np.float16
