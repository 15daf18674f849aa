"""fnx.nn layers against NumPy references (tiny shapes, direct loops)."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import nn
from fnx.nn import initializers as I

KEY = fnx.random.PRNGKey(1)
RNG = np.random.default_rng(0)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def A(x):
    return np.asarray(x)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def conv_ref(x, w, b, stride, pads, dil, groups):
    """Direct loop over (N, C, H, W) with weight (O, C/g, kh, kw), zero padding."""
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for ni in range(n):
        for oi in range(o):
            g = oi // og
            for i in range(oh):
                for j in range(ow):
                    s = 0.0
                    for ci in range(cg):
                        for a in range(kh):
                            for bb in range(kw):
                                s += x[ni, g * cg + ci, i * stride[0] + a * dil[0],
                                       j * stride[1] + bb * dil[1]] * w[oi, ci, a, bb]
                    out[ni, oi, i, j] = s + (0 if b is None else b[oi])
    return out


def test_linear():
    m = nn.init(nn.Linear(3), KEY, fnx.ShapeDtypeStruct((2, 4), "float32"))
    x = rnd(2, 4)
    np.testing.assert_allclose(m(x), x @ A(m.weight).T + A(m.bias), rtol=1e-5)
    bound = 1 / np.sqrt(4)
    assert np.abs(A(m.weight)).max() <= bound and np.abs(A(m.bias)).max() <= bound
    m2 = nn.init(nn.Linear(3, use_bias=False, kernel_init=I.zeros), KEY, x)
    assert m2.bias is None and "layers" not in m2.params()
    np.testing.assert_array_equal(m2(x), np.zeros((2, 3)))


@pytest.mark.parametrize("stride,dil,groups,padding", [
    (1, 1, 1, 0), (2, 1, 1, 1), (1, 2, 2, "same"), ((1, 2), 1, 1, ((1, 0), (2, 1))),
    (1, 1, 1, "valid")])
def test_conv2d_vs_loop(stride, dil, groups, padding):
    x = rnd(2, 4, 5, 6)
    m = nn.init(nn.Conv2d(4, 3, stride=stride, dilation=dil, groups=groups, padding=padding),
                KEY, x)
    assert m.weight.shape == (4, 4 // groups, 3, 3)
    st = stride if isinstance(stride, tuple) else (stride, stride)
    dl = (dil, dil)
    if padding == "same":
        pads = ((dil, dil), (dil, dil))
    elif padding == "valid":
        pads = ((0, 0), (0, 0))
    elif isinstance(padding, int):
        pads = ((padding, padding),) * 2
    else:
        pads = padding
    ref = conv_ref(x, A(m.weight), A(m.bias), st, pads, dl, groups)
    np.testing.assert_allclose(m(x), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,npmode", [("reflect", "reflect"), ("replicate", "edge"),
                                         ("circular", "wrap")])
def test_conv2d_padding_modes(mode, npmode):
    x = rnd(1, 2, 4, 4)
    m = nn.init(nn.Conv2d(3, 3, padding=1, padding_mode=mode), KEY, x)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode=npmode)
    ref = conv_ref(xp, A(m.weight), A(m.bias), (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    np.testing.assert_allclose(m(x), ref, rtol=1e-4, atol=1e-5)


def test_conv1d():
    x = rnd(2, 3, 7)
    m = nn.init(nn.Conv1d(4, 3, stride=2, padding=1), KEY, x)
    ref = conv_ref(x[:, :, None, :], A(m.weight)[:, :, None, :], A(m.bias), (1, 2),
                   ((0, 0), (1, 1)), (1, 1), 1)[:, :, 0]
    np.testing.assert_allclose(m(x), ref, rtol=1e-4, atol=1e-5)


def test_separable_conv2d():
    x = rnd(2, 3, 5, 5)
    m = nn.init(nn.SeparableConv2d(4, 3, padding=1, depth_multiplier=2), KEY, x)
    dw = conv_ref(x, A(m.depthwise_weight), None, (1, 1), ((1, 1), (1, 1)), (1, 1), 3)
    ref = conv_ref(dw, A(m.pointwise_weight), A(m.bias), (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    np.testing.assert_allclose(m(x), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("stride,padding,output_padding", [(1, 0, 0), (2, 1, 1), (2, 0, 0)])
def test_conv_transpose2d(stride, padding, output_padding):
    x = rnd(2, 3, 3, 4)
    m = nn.init(nn.ConvTranspose2d(2, 3, stride=stride, padding=padding,
                                   output_padding=output_padding), KEY, x)
    w, b = A(m.weight), A(m.bias)                     # (in, out, kh, kw)
    n, c, h, wd = x.shape
    k = 3
    full = np.zeros((n, 2, (h - 1) * stride + k + output_padding,
                     (wd - 1) * stride + k + output_padding))
    for ni in range(n):
        for ci in range(c):
            for i in range(h):
                for j in range(wd):
                    full[ni, :, i * stride:i * stride + k, j * stride:j * stride + k] += \
                        x[ni, ci, i, j] * w[ci]
    oh = (h - 1) * stride - 2 * padding + k + output_padding
    ow = (wd - 1) * stride - 2 * padding + k + output_padding
    ref = full[:, :, padding:padding + oh, padding:padding + ow] + b[None, :, None, None]
    y = m(x)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm2d, (4, 3, 2, 2)), (nn.BatchNorm1d, (5, 3))])
def test_batchnorm_train_eval(cls, shape):
    x = rnd(*shape) * 2 + 1
    m = nn.init(cls(momentum=0.2), KEY, x)
    m = m.replace(weight=fnp.asarray(rnd(3)), bias=fnp.asarray(rnd(3)))
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, 3) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axes), x.var(axes)
    nred = x.size // 3
    g, b = A(m.weight).reshape(bshape), A(m.bias).reshape(bshape)
    ref = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-5) * g + b
    y, new = nn.apply(m, x)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new.running_mean, 0.8 * 0 + 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new.running_var, 0.8 * 1 + 0.2 * var * nred / (nred - 1),
                               rtol=1e-5)
    assert int(new.num_batches_tracked) == 1
    ev = new.eval()
    rm, rv = A(new.running_mean).reshape(bshape), A(new.running_var).reshape(bshape)
    y2, same = nn.apply(ev, x)
    np.testing.assert_allclose(y2, (x - rm) / np.sqrt(rv + 1e-5) * g + b, rtol=1e-4,
                               atol=1e-5)
    assert same is ev


def test_batchnorm_explicit_size_and_grad_has_no_states():
    m = nn.BatchNorm1d(3)
    assert m.running_mean.shape == (3,)
    p, r = nn.partition(m)
    g = fnx.grad(lambda p, r, x: fnp.sum(nn.combine(p, r)(x) ** 3))(p, r, rnd(4, 3))
    assert set(g.params()) == {"weight", "bias"} and g.states() == {}


def test_layernorm_groupnorm():
    x = rnd(2, 4, 3, 3)
    ln = nn.init(nn.LayerNorm(), KEY, x)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(ln(x), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    ln2 = nn.LayerNorm((3, 3))
    mu, var = x.mean((-2, -1), keepdims=True), x.var((-2, -1), keepdims=True)
    np.testing.assert_allclose(ln2(x), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    gn = nn.init(nn.GroupNorm(2), KEY, x)
    gn = gn.replace(weight=fnp.asarray(rnd(4)), bias=fnp.asarray(rnd(4)))
    xg = x.reshape(2, 2, -1)
    ref = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5))
    ref = ref.reshape(x.shape) * A(gn.weight)[None, :, None, None] + \
        A(gn.bias)[None, :, None, None]
    np.testing.assert_allclose(gn(x), ref, rtol=1e-4, atol=1e-5)


def test_dropout():
    x = np.ones((200, 50), np.float32)
    d = nn.Dropout(0.3)
    with pytest.raises(ValueError, match="key"):
        d(x)
    y = A(d(x, key=KEY))
    assert np.all((y == 0) | np.isclose(y, 1 / 0.7))
    assert abs((y == 0).mean() - 0.3) < 0.03
    np.testing.assert_array_equal(d.eval()(x), x)
    y1, _ = nn.apply(nn.Sequential(d, d), x, key=KEY)
    y2, _ = nn.apply(nn.Sequential(d, d), x, key=KEY)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(nn.Dropout(0.0)(x), x)


def test_pools_flatten():
    x = rnd(2, 3, 5, 6)
    mp = nn.MaxPool2d(2)(x)
    ref = x[:, :, :4, :6].reshape(2, 3, 2, 2, 3, 2).max((3, 5))
    np.testing.assert_allclose(mp, ref)
    ap = nn.AvgPool2d(3, stride=1, padding=1)(x)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.stack([np.stack([xp[:, :, i:i + 3, j:j + 3].mean((2, 3)) for j in range(6)], -1)
                    for i in range(5)], -2)
    np.testing.assert_allclose(ap, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.GlobalAvgPool()(x), x.mean((2, 3)), rtol=1e-5)
    assert nn.Flatten()(x).shape == (2, 90)
    assert nn.Flatten(2)(x).shape == (2, 3, 30)


def test_embedding():
    e = nn.Embedding(10, 4, key=KEY)
    idx = np.array([[1, 2], [9, 0]])
    np.testing.assert_array_equal(e(idx), A(e.weight)[idx])
    e2 = nn.init(nn.Embedding(10, 4), KEY, fnx.ShapeDtypeStruct((3,), "int32"))
    assert e2.weight.shape == (10, 4)


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def mha_ref(m, q, k, v, mask):
    e, h = q.shape[-1], m.num_heads
    d = e // h
    w, b = A(m.in_proj_weight), A(m.in_proj_bias)
    out = []
    for qi, ki, vi in zip(q, k, v):
        heads = []
        Q, K, V = qi @ w[:e].T + b[:e], ki @ w[e:2 * e].T + b[e:2 * e], vi @ w[2 * e:].T + b[2 * e:]
        for hi in range(h):
            s = Q[:, hi * d:(hi + 1) * d] @ K[:, hi * d:(hi + 1) * d].T / np.sqrt(d) + mask
            heads.append(softmax(s) @ V[:, hi * d:(hi + 1) * d])
        out.append(np.concatenate(heads, -1) @ A(m.out_proj_weight).T + A(m.out_proj_bias))
    return np.stack(out)


def test_multihead_attention():
    q, kv = rnd(2, 3, 8), rnd(2, 4, 8)
    m = nn.init(nn.MultiHeadAttention(2), KEY, q, kv)
    m = m.replace(in_proj_bias=fnp.asarray(rnd(24)), out_proj_bias=fnp.asarray(rnd(8)))
    np.testing.assert_allclose(m(q, kv), mha_ref(m, q, kv, kv, 0.0), rtol=1e-4, atol=1e-5)
    bmask = np.array([[False, True, False, False]] * 3)
    np.testing.assert_allclose(m(q, kv, kv, attn_mask=bmask),
                               mha_ref(m, q, kv, kv, np.where(bmask, -np.inf, 0)),
                               rtol=1e-4, atol=1e-5)
    add = rnd(3, 4)
    np.testing.assert_allclose(m(q, kv, kv, attn_mask=add), mha_ref(m, q, kv, kv, add),
                               rtol=1e-4, atol=1e-5)
    causal = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0)
    np.testing.assert_allclose(m(q, is_causal=True), mha_ref(m, q, q, q, causal),
                               rtol=1e-4, atol=1e-5)
    out, w = m(q, kv, need_weights=True)
    assert w.shape == (2, 3, 4)
    np.testing.assert_allclose(A(w).sum(-1), 1, rtol=1e-5)
    mt = m.replace(batch_first=False)
    np.testing.assert_allclose(mt(q.transpose(1, 0, 2)), A(m(q)).transpose(1, 0, 2),
                               rtol=1e-5, atol=1e-6)


def lstm_ref(m, x, layer=0):
    wi, wh = A(m.weight_ih[layer]), A(m.weight_hh[layer])
    bi, bh = A(m.bias_ih[layer]), A(m.bias_hh[layer])
    H = m.hidden_size
    h = np.zeros((x.shape[1], H))
    c = np.zeros_like(h)
    ys = []
    for xt in x:
        g = xt @ wi.T + bi + h @ wh.T + bh
        i, f, gg, o = sigmoid(g[:, :H]), sigmoid(g[:, H:2 * H]), np.tanh(g[:, 2 * H:3 * H]), \
            sigmoid(g[:, 3 * H:])
        c = f * c + i * gg
        h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h, c


def gru_ref(m, x, layer=0):
    wi, wh = A(m.weight_ih[layer]), A(m.weight_hh[layer])
    bi, bh = A(m.bias_ih[layer]), A(m.bias_hh[layer])
    H = m.hidden_size
    h = np.zeros((x.shape[1], H))
    ys = []
    for xt in x:
        a, b = xt @ wi.T + bi, h @ wh.T + bh
        r = sigmoid(a[:, :H] + b[:, :H])
        z = sigmoid(a[:, H:2 * H] + b[:, H:2 * H])
        n = np.tanh(a[:, 2 * H:] + r * b[:, 2 * H:])
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h


def test_lstm():
    x = rnd(5, 2, 3)                        # (L, N, in)
    m = nn.init(nn.LSTM(4, num_layers=2), KEY, x)
    assert m.params()["weight_ih.1"].shape == (16, 4)
    y, (hn, cn) = m(x)
    y0, h0, c0 = lstm_ref(m, x, 0)
    y1, h1, c1 = lstm_ref(m, y0, 1)
    np.testing.assert_allclose(y, y1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hn, np.stack([h0, h1]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cn, np.stack([c0, c1]), rtol=1e-4, atol=1e-5)
    mb = m.replace(batch_first=True)
    yb, _ = mb(x.transpose(1, 0, 2))
    np.testing.assert_allclose(yb, y1.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)


def test_gru_and_grad():
    x = rnd(4, 2, 3)
    m = nn.GRU(5, input_size=3, key=KEY)
    y, hn = m(x)
    yr, hr = gru_ref(m, x)
    np.testing.assert_allclose(y, yr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hn[0], hr, rtol=1e-4, atol=1e-5)
    g = fnx.grad(lambda mm: fnp.sum(mm(x)[0]))(m)
    assert set(g.params()) == set(m.params())
    assert np.isfinite(A(g.weight_hh[0])).all() and np.abs(A(g.weight_hh[0])).sum() > 0


def test_activation_modules_and_sequential():
    x = rnd(3, 4)
    np.testing.assert_allclose(nn.ReLU()(x), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Tanh()(x), np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x), sigmoid(x), rtol=1e-5)
    np.testing.assert_allclose(nn.Softmax()(x), softmax(x), rtol=1e-5)
    s = nn.Sequential(nn.Lambda(np.negative), nn.ReLU())
    np.testing.assert_allclose(s(x), np.maximum(-x, 0))
    assert len(s) == 2 and isinstance(s[1], nn.ReLU)


@pytest.mark.parametrize("init,std", [
    # JAX's layout: fan_in is shape[-2] = 200 (fnx.nn.initializers follows jax.nn)
    (I.he_normal(), np.sqrt(2 / 200)), (I.he_uniform(), np.sqrt(2 / 200)),
    (I.glorot_normal(), np.sqrt(2 / 250)), (I.glorot_uniform(), np.sqrt(2 / 250)),
    (I.lecun_normal(), np.sqrt(1 / 200)), (I.lecun_uniform(), np.sqrt(1 / 200)),
    (I.normal(0.5), 0.5), (I.torch_default(), np.sqrt(1 / 150))])
def test_initializer_stats(init, std):
    w = A(init(KEY, (200, 50)))
    assert w.shape == (200, 50) and w.dtype == np.float32
    assert abs(w.std() / std - 1) < 0.05


def test_initializers_misc():
    np.testing.assert_array_equal(I.zeros(KEY, (2,)), [0, 0])
    np.testing.assert_array_equal(I.ones(KEY, (2,)), [1, 1])
    np.testing.assert_array_equal(I.constant(3.0)(KEY, (2,)), [3, 3])
    u = A(I.uniform(2.0)(KEY, (1000,)))
    assert u.min() >= 0 and u.max() <= 2
    q = A(I.orthogonal()(KEY, (6, 4)))
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)
    q = A(I.orthogonal()(KEY, (3, 5)))
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-5)
    assert I.compute_fans((8, 4, 3, 3), in_axis=1, out_axis=0) == (36, 72)
    m = nn.init(nn.Conv2d(4, 3, kernel_init=I.he_normal(), bias_init=I.zeros), KEY,
                fnx.ShapeDtypeStruct((1, 2, 5, 5), "float32"))
    np.testing.assert_array_equal(m.bias, np.zeros(4))
