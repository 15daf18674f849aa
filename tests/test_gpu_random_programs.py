"""Random jitted programs on the GPU (the emulated one in CI) against the same programs on
the CPU: chains of elementwise ops, reductions over random axes with and without
keepdims, softmax rows, transposes, products, broadcasting, indexing, scatters, pads,
pooling windows, cumulative sums, sorts, integer arithmetic, scans, gradients and
convolutions, drawn from a seed, so that the fusion planner, the kernels' index
arithmetic and the buffer plan meet combinations no hand-written test names. A failure
prints the seed and the ops; ``python -c "import test_gpu_random_programs as t;
t.check(SEED)"`` reruns one (from ``tests/``, with ``FNX_GPU_EMULATE=1``). Seeds 0-999
of this generator ran clean when it was written; the suite runs the first 24."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax


def _axis(x, r):
    return int(r.integers(x.ndim))


def _reduce(x, r):
    axes = tuple(sorted({int(a) for a in r.integers(0, x.ndim, r.integers(1, x.ndim + 1))}))
    fn = (fnp.sum, fnp.max, fnp.min, fnp.mean)[r.integers(4)]
    return fn(x, axis=axes, keepdims=bool(r.random() < 0.6))


def _softmax(x, r):
    ax = _axis(x, r)
    e = fnp.exp(x - fnp.max(x, axis=ax, keepdims=True))
    return e / fnp.sum(e, axis=ax, keepdims=True)


def _take(x, r):
    ax = _axis(x, r)
    idx = r.integers(-x.shape[ax], x.shape[ax], r.integers(1, 6))
    return fnp.take(x, fnp.asarray(idx, fnp.int32), axis=ax)


def _scatter_add(x, r):
    idx = fnp.asarray(r.integers(0, x.shape[0], r.integers(1, 6)), fnp.int32)
    return x.at[idx].add(fnp.full(idx.shape + x.shape[1:], 0.5, x.dtype))


def _pad(x, r):
    cfg = []
    for s in x.shape:
        lo = int(r.integers(-1, 3))
        cfg.append((lo if s + lo > 0 else 0, int(r.integers(0, 3)), int(r.integers(0, 2))))
    return lax.pad(x, fnp.float32(0.25), cfg)


def _pool(x, r):
    win = tuple(int(min(s, r.integers(1, 3))) for s in x.shape)
    kind = r.integers(3)
    if kind == 0:
        return lax.reduce_window(x, -fnp.inf, lax.max, win, (1,) * x.ndim, "VALID")
    if kind == 1:
        return lax.reduce_window(x, 0.0, lax.add, win, (1,) * x.ndim, "SAME")
    return lax.reduce_window(x, fnp.inf, lax.min, win, win, "VALID")


def _integers(x, r):
    i = (x * 9).astype(fnp.int32)
    d = (x * 3).astype(fnp.int32)
    d = fnp.where(d == 0, 1, d)
    y = (lax.div(i, d), lax.rem(i, d), i >> 1, i & 6, fnp.abs(i) ** 2, fnp.maximum(i, -2))
    return y[r.integers(len(y))].astype(fnp.float32)


def _scan(x, r):
    def body(c, v):
        c = c * 0.9 + fnp.tanh(v)
        return c, c * 2
    return lax.scan(body, fnp.zeros(x.shape[1:], x.dtype), x)[1]


def _conv(x, r):
    if x.ndim != 3 or min(x.shape[1:]) < 2:
        return None
    k = fnp.cos(fnp.arange(2 * x.shape[0] * 4, dtype=fnp.float32)).reshape(2, x.shape[0], 2, 2)
    return lax.conv_general_dilated(x[None], k, (1, 1), "SAME")[0]


def _product(x, r):
    k = x.shape[-1]
    return x @ fnp.cos(fnp.arange(k * 3, dtype=fnp.float32).reshape(k, 3))


# (name, op(x, rng) -> value or None when it does not apply, the least rank it takes)
OPS = [
    ("tanh", lambda x, r: fnp.tanh(x), 0),
    ("exp", lambda x, r: fnp.exp(fnp.clip(x, -5, 5)), 0),
    ("sqrt|x|", lambda x, r: fnp.sqrt(fnp.abs(x)), 0),
    ("log1p|x|", lambda x, r: fnp.log1p(fnp.abs(x)), 0),
    ("floor", lambda x, r: fnp.floor(x * 3), 0),
    ("gelu", lambda x, r: fnx.nn.gelu(x), 0),
    ("where", lambda x, r: fnp.where(x > 0.1, x, -x * 2), 0),
    ("clamp", lambda x, r: lax.clamp(fnp.float32(-0.5), x, fnp.float32(0.7)), 0),
    ("to int and back", lambda x, r: x.astype(fnp.int32).astype(fnp.float32), 0),
    ("integers", _integers, 0),
    ("reduce", _reduce, 1),
    ("softmax", _softmax, 1),
    ("log_softmax", lambda x, r: fnx.nn.log_softmax(x, axis=_axis(x, r)), 1),
    ("row-scaled", lambda x, r: fnp.sum(x, -1, keepdims=True) * x, 1),
    ("transpose", lambda x, r: fnp.transpose(x, tuple(r.permutation(x.ndim))), 2),
    ("product", _product, 1),
    ("broadcast", lambda x, r: x[..., None] * fnp.ones((2,), fnp.float32), 0),
    ("take", _take, 1),
    ("scatter-add", _scatter_add, 1),
    ("set", lambda x, r: x.at[int(r.integers(x.shape[0]))].set(3.0), 1),
    ("pad", _pad, 1),
    ("pool", _pool, 2),
    ("cumsum", lambda x, r: fnp.cumsum(x, axis=_axis(x, r)), 1),
    ("argmax", lambda x, r: fnp.argmax(x, axis=_axis(x, r)).astype(fnp.float32), 1),
    ("sort", lambda x, r: fnp.sort(x, axis=-1), 1),
    ("top_k", lambda x, r: lax.top_k(x, int(r.integers(1, x.shape[-1] + 1)))[0], 1),
    ("concatenate", lambda x, r: fnp.concatenate([x, x * 2], axis=_axis(x, r)), 1),
    ("reverse", lambda x, r: x[..., ::-1], 1),
    ("scan", _scan, 1),
    ("grad", lambda x, r: fnx.grad(lambda v: fnp.sum(fnp.tanh(v) * v))(x), 0),
    ("vmap", lambda x, r: fnx.vmap(lambda v: fnp.sum(fnp.sin(v)) * v)(x), 1),
    ("conv", _conv, 3),
]
BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: fnp.maximum(a, b),
          lambda a, b: fnp.where(a > b, a, b * 2), lambda a, b: a / (fnp.abs(b) + 1.0)]


def program(seed):
    """``(inputs, f, names)``: a program of 2-8 steps on 1-3 float32 inputs, each step an
    op of ``OPS`` on an earlier value or a binary op on two broadcastable ones."""
    rng = np.random.default_rng(seed)
    base = tuple(int(s) for s in rng.integers(1, 6, rng.integers(1, 4)))
    inputs = []
    for _ in range(rng.integers(1, 4)):
        shape = tuple(1 if rng.random() < 0.25 else s for s in base)
        inputs.append(rng.standard_normal(shape).astype(np.float32))
    steps = [(int(rng.integers(-1, len(OPS))), int(rng.integers(1 << 30)))
             for _ in range(rng.integers(2, 9))]

    def f(*xs):
        vals = list(xs)
        for k, s in steps:
            r = np.random.default_rng(s)
            x = vals[r.integers(len(vals))]
            if k < 0:
                b = vals[r.integers(len(vals))]
                try:
                    np.broadcast_shapes(x.shape, b.shape)
                except ValueError:
                    continue
                vals.append(BINARY[r.integers(len(BINARY))](x, b))
            elif x.ndim >= OPS[k][2]:
                y = OPS[k][1](x, r)
                if y is not None:
                    vals.append(y)
        return vals[len(xs):] or vals
    return inputs, f, [OPS[k][0] if k >= 0 else "binary" for k, _ in steps]


def check(seed, gpu=None):
    inputs, f, names = program(seed)
    gpu = gpu or fnx.devices("gpu")[0]
    jitted = fnx.jit(f)
    want = [np.asarray(v) for v in jitted(*inputs)]
    got = jitted(*[fnx.device_put(x, gpu) for x in inputs])
    assert all(v.device == gpu for v in got), (seed, names)
    for i, (w, g) in enumerate(zip(want, got)):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (seed, names, i)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, equal_nan=True,
                                   err_msg=f"seed {seed}, ops {names}, output {i}")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(24))
def test_random_program_on_the_gpu_equals_the_cpu(gpu, seed):
    check(seed, gpu)
