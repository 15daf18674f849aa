"""Devices and placement on the GPU (a real one, else the CPU emulation of one): JAX's
device API, committed and uncommitted values, the cross-device error, explicit transfers,
eager and jitted computations on the device."""
import pickle

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core.devices import DeviceMismatchError

pytestmark = pytest.mark.gpu


def _on(x, dev):
    return x.device is dev and not isinstance(x._value, np.ndarray)


def test_device_queries(gpu):
    assert gpu.platform == "gpu" and gpu.id == 0 and str(gpu) == "gpu:0"
    assert fnx.devices("gpu") == [gpu] and fnx.devices("cuda") == [gpu]
    assert fnx.device_count("gpu") == 1 and fnx.local_devices(backend="gpu") == [gpu]
    cpu = fnx.devices("cpu")[0]
    assert cpu.platform == "cpu" and fnx.devices() == [cpu]  # the CPU stays the default
    assert fnx.default_backend() == "cpu"
    with pytest.raises(RuntimeError, match="unknown backend 'tpu'"):
        fnx.devices("tpu")
    assert pickle.loads(pickle.dumps(gpu)) is gpu


def test_device_put_and_back(gpu):
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = fnx.device_put(host, gpu)
    assert _on(x, gpu) and x.devices() == {gpu} and x.sharding.device_set == {gpu}
    assert x.shape == (2, 3) and x.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(x), host)  # an explicit copy to the host
    np.testing.assert_array_equal(fnx.device_get(x), host)
    assert float(x[1, 2]) == 5.0 and x.tolist() == host.tolist()
    assert "5." in repr(x)
    back = fnx.device_put(x, fnx.devices("cpu")[0])
    assert back.device.platform == "cpu" and isinstance(back._value, np.ndarray)
    assert x.to_device(gpu) is x
    tree = fnx.device_put({"a": host, "b": [1.0, host]}, gpu)
    assert all(_on(leaf, gpu) for leaf in fnx.tree_util.tree_leaves(tree))
    assert fnx.device_put(x, fnx.sharding.SingleDeviceSharding(gpu)).device is gpu


def test_eager_ops_run_on_the_device_of_their_operands(gpu):
    x = fnx.device_put(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), gpu)
    ref = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    for got, want in [(fnp.sin(x) * 2 + 1, np.sin(ref) * 2 + 1),
                      (fnp.sum(x, axis=1), ref.sum(1)),
                      (x @ x.T, ref @ ref.T),
                      (fnp.maximum(x, 0.5), np.maximum(ref, 0.5)),
                      (x[1:, ::2], ref[1:, ::2]),
                      (fnp.sort(x, axis=0), np.sort(ref, axis=0)),
                      (fnp.where(x > 0, x, -x), np.abs(ref))]:
        assert _on(got, gpu)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_uncommitted_values_follow_the_committed_device(gpu):
    x = fnx.device_put(fnp.ones(4), gpu)
    for y in (x + fnp.arange(4.0), fnp.arange(4.0) * x, x + np.ones(4, np.float32), x + 2.0):
        assert _on(y, gpu)
    np.testing.assert_array_equal(np.asarray(x + fnp.arange(4.0)), [1, 2, 3, 4])


def test_values_committed_to_different_devices_do_not_mix(gpu):
    x = fnx.device_put(fnp.ones(4), gpu)
    c = fnx.device_put(fnp.ones(4), fnx.devices("cpu")[0])
    with pytest.raises(DeviceMismatchError, match=r"gpu:0.*cpu:0.*device_put"):
        x + c
    with pytest.raises(ValueError, match="committed to different devices"):
        lax.add(c, x)
    f = fnx.jit(lambda a, b: a * b)
    with pytest.raises(DeviceMismatchError, match=r"jit\(<lambda>\).*device_put"):
        f(x, c)
    np.testing.assert_array_equal(np.asarray(x + fnx.device_put(c, gpu)), [2, 2, 2, 2])


def test_default_device_places_creation_and_random(gpu):
    with fnx.default_device(gpu):
        assert fnx.default_backend() == "gpu"
        z = fnp.zeros(3)
        r = fnx.random.normal(fnx.random.PRNGKey(0), (5,))
        assert _on(z, gpu) and _on(r, gpu)
        bits = fnx.random.bits(fnx.random.PRNGKey(7), (64,))
        assert _on(bits, gpu)
    assert fnp.zeros(3).device.platform == "cpu"
    # the same bits on either device; normal draws to a few ulp (the device's erfinv)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(fnx.random.bits(
        fnx.random.PRNGKey(7), (64,))))
    np.testing.assert_allclose(np.asarray(r), np.asarray(fnx.random.normal(
        fnx.random.PRNGKey(0), (5,))), rtol=1e-6, atol=1e-7)
    with fnx.default_device("gpu"):
        assert fnp.ones(2).device is gpu


def test_creation_functions_place_on_a_device_or_sharding_and_like_follows(gpu):
    from fnx.sharding import SingleDeviceSharding
    made = [fnp.zeros(3, device=gpu), fnp.arange(4, device=gpu), fnp.asarray([1, 2], device=gpu),
            fnp.eye(2, device=SingleDeviceSharding(gpu)), fnp.linspace(0, 1, 3, device=gpu),
            fnp.fft.fftfreq(4, device=gpu), fnp.array([1.0, 2.0], device=gpu),
            *fnp.linspace(0, 1, 3, retstep=True, device=gpu),
            fnp.ones(2, device=fnx.NamedSharding(fnx.make_mesh((1,), ("x",), devices=[gpu]),
                                                 fnx.P("x")))]
    assert all(_on(a, gpu) for a in made)
    np.testing.assert_array_equal(np.asarray(made[1]), np.arange(4))
    x = fnx.device_put(fnp.ones(3), gpu)
    # *_like follow their argument's device, as JAX's do, unless told otherwise
    assert _on(fnp.zeros_like(x), gpu) and _on(fnp.full_like(x, 2), gpu)
    assert _on(fnp.empty_like(x), gpu)
    assert fnp.ones_like(x, device=fnx.devices()[0]).device.platform == "cpu"
    assert fnp.astype(x, "int32", device=fnx.devices()[0]).device.platform == "cpu"


def test_jit_runs_on_the_arguments_device_and_caches_per_device(gpu):
    f = fnx.jit(lambda a, b: fnp.tanh(a @ b) + 1.0)
    a = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    b = np.random.default_rng(1).normal(size=(3, 2)).astype(np.float32)
    want = np.asarray(f(a, b))
    ga, gb = fnx.device_put(a, gpu), fnx.device_put(b, gpu)
    for _ in range(2):  # the second call takes the fast path
        got = f(ga, gb)
        assert _on(got, gpu)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert f(a, b).device.platform == "cpu"
    mixed = f(ga, b)  # an uncommitted host argument goes to the device
    assert _on(mixed, gpu)
    low = f.lower(ga, gb)
    assert low.device_platform == "gpu" and "def " in low.source


def test_grad_on_the_device(gpu):
    def loss(w, x):
        return fnp.mean((fnp.tanh(x @ w)) ** 2)
    w = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    x = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    want = fnx.grad(loss)(w, x)
    gw, gx = fnx.device_put(w, gpu), fnx.device_put(x, gpu)
    for g in (fnx.grad(loss)(gw, gx), fnx.jit(fnx.grad(loss))(gw, gx)):
        assert _on(g, gpu)
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_control_flow_on_the_device(gpu):
    xs = fnx.device_put(np.arange(12, dtype=np.float32).reshape(4, 3), gpu)

    def f(xs):
        c, ys = lax.scan(lambda c, x: (c + x, c * 2.0), fnp.zeros(3), xs)
        n = lax.fori_loop(0, 3, lambda i, v: v * 1.5, c)
        return lax.cond(n.sum() > 0, lambda v: v - 1.0, lambda v: v + 1.0, n), ys
    want = f(np.arange(12, dtype=np.float32).reshape(4, 3))
    for fn in (f, fnx.jit(f)):
        got = fn(xs)
        for g, w in zip(got, want):
            assert _on(g, gpu)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def _mlp_step(params, x, y):
    def loss(p):
        h = fnx.nn.relu(x @ p["w1"] + p["b1"])
        h = fnx.nn.gelu(h @ p["w2"] + p["b2"])
        logits = h @ p["w3"] + p["b3"]
        return -fnp.mean(fnp.sum(fnx.nn.log_softmax(logits) * y, axis=-1))
    value, grads = fnx.value_and_grad(loss)(params)
    return value, fnx.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def test_mlp_training_step_on_the_device_equals_the_cpu(gpu):
    rng = np.random.default_rng(0)
    sizes = [(20, 32), (32, 32), (32, 10)]
    params = {}
    for i, (m, n) in enumerate(sizes, 1):
        params[f"w{i}"] = (rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32)
        params[f"b{i}"] = (rng.normal(size=n) * 0.1).astype(np.float32)
    x = rng.normal(size=(16, 20)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]
    step = fnx.jit(_mlp_step)
    cpu_p, gpu_p = params, fnx.device_put(params, gpu)
    gx, gy = fnx.device_put(x, gpu), fnx.device_put(y, gpu)
    for _ in range(3):
        cpu_v, cpu_p = step(cpu_p, x, y)
        gpu_v, gpu_p = step(gpu_p, gx, gy)
        assert _on(gpu_v, gpu)
        np.testing.assert_allclose(float(gpu_v), float(cpu_v), rtol=1e-5)
    for k in params:
        assert _on(gpu_p[k], gpu)
        np.testing.assert_allclose(np.asarray(gpu_p[k]), np.asarray(cpu_p[k]), rtol=1e-5,
                                   atol=1e-6)
    # eagerly too (each primitive one program on the device)
    v, p = _mlp_step(fnx.device_put(params, gpu), gx, gy)
    np.testing.assert_allclose(float(v), float(_mlp_step(params, x, y)[0]), rtol=1e-5)


def test_gelu_layernorm_is_at_most_three_kernels_that_nvrtc_compiles(gpu):
    from fnx.kernels import cuda as K
    from fnx.kernels import fusion

    def f(x, w, g, b):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return fnx.nn.gelu(x) * w + (x - mu) / fnp.sqrt(var + 1e-5) * g + b
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w, g, b = (rng.standard_normal(256).astype(np.float32) for _ in range(3))
    args = [fnx.device_put(v, gpu) for v in (x, w, g, b)]
    low = fnx.jit(f).lower(*args)
    assert 1 <= len(low.kernels) <= 3
    assert all("__global__" in k for k in low.kernels)
    np.testing.assert_allclose(np.asarray(fnx.jit(f)(*args)), np.asarray(f(x, w, g, b)),
                               rtol=1e-5, atol=1e-5)
    if not K.compiler_available():
        pytest.skip("NVRTC is not installed")
    steps = fusion.plan_program(low.ir)
    source = fusion.program_source([s for s in steps if isinstance(s, fusion.Kernel)])
    for arch in ("sm_80", "sm_90"):
        assert b".target sm_" in K.program_ptx(source, arch)


def test_cnn_rnn_and_per_example_grads_on_the_device_equal_the_cpu(gpu):
    rng = np.random.default_rng(3)

    def cnn_loss(p, x):
        h = lax.conv_general_dilated(x, p["k"], (1, 1), "SAME",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        h = fnx.nn.relu(h + p["b"][None, :, None, None])
        h = lax.reduce_window(h, -fnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return fnp.mean(fnx.nn.logsumexp(h.reshape(h.shape[0], -1), axis=-1))

    def rnn_loss(p, xs):
        def cell(h, x):
            h = fnp.tanh(x @ p["wx"] + h @ p["wh"])
            return h, fnp.sum(h)
        h, ys = lax.scan(cell, fnp.zeros((3, 6)), xs)
        return fnp.mean(h ** 2) + fnp.mean(ys)

    def example_loss(p, x, y):
        return (fnp.tanh(x @ p["w"]).sum() - y) ** 2

    cases = [
        (cnn_loss, {"k": rng.normal(size=(4, 2, 3, 3)).astype(np.float32) * 0.3,
                    "b": rng.normal(size=4).astype(np.float32)},
         (rng.normal(size=(2, 2, 8, 8)).astype(np.float32),), fnx.grad),
        (rnn_loss, {"wx": rng.normal(size=(5, 6)).astype(np.float32) * 0.3,
                    "wh": rng.normal(size=(6, 6)).astype(np.float32) * 0.3},
         (rng.normal(size=(7, 3, 5)).astype(np.float32),), fnx.grad),
        (example_loss, {"w": rng.normal(size=(4, 3)).astype(np.float32)},
         (rng.normal(size=(9, 4)).astype(np.float32), rng.normal(size=9).astype(np.float32)),
         lambda f: fnx.vmap(fnx.grad(f), in_axes=(None, 0, 0))),
    ]
    for loss, params, data, transform in cases:
        g = transform(loss)
        want = g(params, *data)
        dev_params = fnx.device_put(params, gpu)
        dev_data = [fnx.device_put(d, gpu) for d in data]
        for fn in (g, fnx.jit(g)):
            got = fn(dev_params, *dev_data)
            for k in params:
                assert _on(got[k], gpu), (loss.__name__, k)
                np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]),
                                           rtol=2e-5, atol=2e-6, err_msg=loss.__name__)


def test_kernels_round_like_numpy_unless_fast_math_is_asked_for(monkeypatch):
    from fnx.kernels import cuda as K
    monkeypatch.delenv("FNX_GPU_FAST_MATH", raising=False)
    opts = K.program_options("sm_80")
    assert "-fmad=false" in opts and "--use_fast_math" not in opts
    monkeypatch.setenv("FNX_GPU_FAST_MATH", "1")
    opts = K.program_options("sm_80")
    assert "--use_fast_math" in opts and "-fmad=false" not in opts


def test_eager_grad_under_default_device_stays_on_the_gpu(gpu):
    """Host arrays made under ``default_device(gpu)`` are uncommitted and follow it: eager
    grad must not take its cached NumPy rules for them (the second call mixed host
    residuals with device cotangents and failed, then fell back to the CPU)."""
    import fnx.numpy as fnp
    with fnx.default_device(gpu):
        z = fnp.array([1.0, -2.0, 0.0, 3.0])
        for f in (fnp.sin, fnp.exp, fnp.abs, lambda v: fnp.maximum(v, 0.5)):
            for _ in range(3):
                g = fnx.grad(lambda v: f(v).sum())(z)
                assert g.device == gpu
                np.testing.assert_allclose(np.asarray(g), np.asarray(fnx.grad(
                    lambda v: f(v).sum())(np.asarray(z))), rtol=1e-6)
