"""CUDA-graph replay of jitted GPU programs (``fnx.backends.cuda_graphs``), on the real
device where there is one, else on the emulated one (whose capture records operations and
replays them on the same buffers, and refuses what a real capture refuses)."""
import threading

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax

pytestmark = pytest.mark.gpu


def _graph(jitted, *args):
    """The GraphReplay of ``jitted``'s program for ``args`` (None: never captured)."""
    return jitted.lower(*args)._entry.compiled.graph


def _mlp_step(params, x, y):
    def loss(p):
        h = fnx.nn.relu(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -fnp.mean(fnp.sum(fnx.nn.log_softmax(logits) * y, axis=-1))
    value, grads = fnx.value_and_grad(loss)(params)
    return value, fnx.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def _mlp_data(rng):
    params = {"w1": (rng.normal(size=(12, 16)) / 4).astype(np.float32),
              "b1": np.zeros(16, np.float32),
              "w2": (rng.normal(size=(16, 5)) / 4).astype(np.float32),
              "b2": np.zeros(5, np.float32)}
    x = rng.normal(size=(8, 12)).astype(np.float32)
    y = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 8)]
    return params, x, y


def test_a_training_loop_replays_one_graph_and_matches_the_cpu(gpu):
    params, x, y = _mlp_data(np.random.default_rng(0))
    step = fnx.jit(_mlp_step)
    cpu_p, dev_p = params, fnx.device_put(params, gpu)
    dx, dy = fnx.device_put(x, gpu), fnx.device_put(y, gpu)
    for _ in range(5):
        cpu_v, cpu_p = step(cpu_p, x, y)
        dev_v, dev_p = step(dev_p, dx, dy)
        np.testing.assert_allclose(float(dev_v), float(cpu_v), rtol=1e-5)
        for k in params:
            np.testing.assert_allclose(np.asarray(dev_p[k]), np.asarray(cpu_p[k]),
                                       rtol=1e-5, atol=1e-6)
    graph = _graph(step, dev_p, dx, dy)
    assert graph is not None and graph.failure is None
    assert graph.replays == 4  # the first call runs the program itself
    assert "CUDA graph" in step.lower(dev_p, dx, dy).source.splitlines()[0]


def test_results_of_earlier_calls_survive_later_replays(gpu):
    f = fnx.jit(lambda a, b: (fnp.tanh(a @ b.T) + 1.0, (a - b).sum(), a * 2.0))
    rng = np.random.default_rng(1)
    inputs = [[fnx.device_put(rng.normal(size=(3, 4)).astype(np.float32), gpu)
               for _ in range(2)] for _ in range(4)]
    outs = [f(*ab) for ab in inputs]
    assert _graph(f, *inputs[0]).replays == 3
    for (a, b), got in zip(inputs, outs):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(np.asarray(got[0]), np.tanh(a @ b.T) + 1, rtol=1e-5)
        np.testing.assert_allclose(float(got[1]), (a - b).sum(), rtol=1e-5)
        np.testing.assert_array_equal(np.asarray(got[2]), a * 2)


def test_odd_arguments_and_results(gpu):
    """Strided arguments, dtypes kernels have no C type for (float16, complex64), empty
    and 0-d values, an argument returned as it is, and a constant result."""
    def f(a, h, c, e, s, n):
        return (fnp.exp(a) * 2.0 + s, (h * 2).astype(fnp.float16) + h, c * c + 1.0,
                e + 1.0, s * 3.0, n + 1, a, fnp.arange(3.0), (a.sum() + s) * 2.0)
    jf = fnx.jit(f)
    rng = np.random.default_rng(2)
    for k in range(3):
        base = rng.normal(size=(5, 3)).astype(np.float32)
        a_dev = fnx.device_put(base, gpu).T  # a transposed view on the device
        h = rng.normal(size=(4,)).astype(np.float16)
        c = (rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))).astype(np.complex64)
        e = np.zeros((0, 3), np.float32)
        s = np.float32(k + 0.5)
        n = np.array([1, 2, 3], np.int32) + k
        want = f(base.T, h, c, e, s, n)
        got = jf(a_dev, *fnx.device_put((h, c, e, s, n), gpu))
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-6)
    graph = _graph(jf, a_dev, *fnx.device_put((h, c, e, s, n), gpu))
    assert graph.failure is None and graph.replays == 2


def test_programs_that_read_device_values_on_the_host_are_not_captured(gpu):
    # cond picks its branch on the host: the capture fails once, then the program runs
    # as it is, with the same results
    def f(x):
        h = fnp.tanh(x[:, None] * x[None, :]) @ x
        return lax.cond(x.sum() > 0, lambda v: v - 1.0, lambda v: v * 3.0, h) * 2
    jf = fnx.jit(f)
    for sign in (1, -1, 1, -1):
        x = np.linspace(-1, 2, 6).astype(np.float32) * sign
        np.testing.assert_allclose(np.asarray(jf(fnx.device_put(x, gpu))),
                                   np.asarray(f(x)), rtol=1e-6)
    graph = _graph(jf, fnx.device_put(x, gpu))
    # (CuPy says "D2H transfers are disallowed", the emulation "... on the host ...")
    assert graph.replays == 0 and ("host" in graph.failure or "D2H" in graph.failure)


def test_host_callbacks_are_never_captured(gpu):
    seen = []

    def f(x):
        y = fnp.sin(x) * 2 + 1
        fnx.debug.callback(lambda v: seen.append(float(v.sum())), y)
        return fnp.cos(y) * 3
    jf = fnx.jit(f)
    x = fnx.device_put(np.arange(4, dtype=np.float32), gpu)
    for _ in range(3):
        jf(x)
    assert len(seen) == 3
    assert _graph(jf, x) is None


def test_loops_inside_a_captured_program(gpu):
    # the scan's body runs as programs of its own inside the captured one
    def loss(w, xs):
        def cell(h, x):
            h = fnp.tanh(x @ w + h)
            return h, h.sum()
        h, ys = lax.scan(cell, fnp.zeros((2, 3)), xs)
        return (h ** 2).mean() + ys.mean()
    g = fnx.jit(fnx.value_and_grad(loss))
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    for _ in range(3):
        xs = rng.normal(size=(5, 2, 4)).astype(np.float32)
        (v, gw), (v0, gw0) = g(*fnx.device_put((w, xs), gpu)), fnx.value_and_grad(loss)(w, xs)
        np.testing.assert_allclose(float(v), float(v0), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(gw), np.asarray(gw0), rtol=1e-5, atol=1e-6)
    graph = _graph(g, *fnx.device_put((w, xs), gpu))
    assert graph.failure is None and graph.replays == 2


def test_device_side_windows_and_scatters_capture_and_clamp_like_the_cpu(gpu):
    """dynamic_slice/dynamic_update_slice clamp their starts, and scatter drops indices
    out of range, on the device without reading either back to the host."""
    def f(x, i, idx, u):
        a = lax.dynamic_slice(x * 2, (i, i - 1), (3, 2))
        b = lax.dynamic_update_slice(x + 1, u, (i, 2 * i))
        c = (x * 3).at[idx].set(7.0, mode="drop")
        d = (x - 1).at[idx].add(u[0, 0], mode="drop")
        return a, b, c, d
    jf = fnx.jit(f)
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    u = np.full((2, 2), -1, np.float32)
    for i, idx in [(1, [0, 2]), (-3, [4, 9]), (7, [-1, -7]), (2, [1, 1])]:
        args = (x, np.int32(i), np.array(idx, np.int32), u)
        want = f(*[fnp.asarray(v) for v in args])
        got = jf(*fnx.device_put(args, gpu))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    graph = _graph(jf, *fnx.device_put(args, gpu))
    assert graph.failure is None and graph.replays == 3


def test_concurrent_callers_of_one_graph(gpu):
    f = fnx.jit(lambda a: fnp.tanh(a) * 2 + a.sum())
    rng = np.random.default_rng(4)
    xs = [rng.normal(size=(16,)).astype(np.float32) for _ in range(24)]
    f(fnx.device_put(xs[0], gpu))
    f(fnx.device_put(xs[0], gpu))  # captured
    results, errors = {}, []

    def work(k):
        try:
            for j in range(k, len(xs), 3):
                results[j] = np.asarray(f(fnx.device_put(xs[j], gpu)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for j, x in enumerate(xs):
        np.testing.assert_allclose(results[j], np.tanh(x) * 2 + x.sum(), rtol=1e-5, atol=1e-6)


def test_graphs_can_be_turned_off(gpu, monkeypatch):
    backend = fnx.jit(lambda a: a).lower(fnx.device_put(np.ones(2, np.float32), gpu))._entry.backend
    monkeypatch.setattr(backend, "graphs", False)
    f = fnx.jit(lambda a: fnp.exp(a) * fnp.sin(a) + a.sum())
    x = fnx.device_put(np.ones(3, np.float32), gpu)
    assert _graph(f, x) is None
    assert "CUDA graph" not in f.lower(x).source


# --- the emulated device's capture itself ----------------------------------------------------

@pytest.fixture
def emulated_cupy(gpu):
    if not gpu.emulated:
        pytest.skip("checks the emulation of stream capture")
    from fnx.backends.cuda_emulation import EMULATED_CUPY
    return EMULATED_CUPY


def test_emulated_capture_refuses_what_a_real_capture_refuses(emulated_cupy):
    from fnx.backends.cuda_emulation import StreamCaptureError
    xp = emulated_cupy
    x = xp.asarray(np.arange(4.0))
    side = xp.cuda.Stream(non_blocking=True)
    for read in (lambda: float(x.sum()), lambda: x.get(), lambda: bool(x[0] > 0),
                 lambda: xp.asarray(np.ones(2)), lambda: repr(x), side.synchronize,
                 lambda: x[0].item()):
        with side:
            side.begin_capture()
            with pytest.raises(StreamCaptureError, match="captured"):
                read()
            with pytest.raises(StreamCaptureError, match="invalidated"):
                side.end_capture()
    with pytest.raises(RuntimeError, match="default"):
        xp.cuda.Stream.null.begin_capture()


def test_emulated_replay_reruns_every_recorded_operation_in_order(emulated_cupy):
    xp = emulated_cupy
    src = 'extern "C" __global__ void twice(const float* a, float* b, int n) {' \
          ' int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = 2 * a[i]; }'
    kernel = xp.RawModule(code=src).get_function("twice")
    x = xp.asarray(np.arange(6, dtype=np.float32))
    idx = xp.asarray(np.array([1, 1]))
    side = xp.cuda.Stream(non_blocking=True)
    with side:
        side.begin_capture()
        y = xp.empty((6,), np.float32)
        kernel((1,), (32,), (x, y, np.int32(6)))
        z = y.reshape(2, 3).copy()
        z[0, 1] = -1.0
        xp.add.at(z[1], idx, 10.0)  # in place, through a view
        w = np.cumsum(z, axis=1) + z.T.sum()
        graph = side.end_capture()
    first = w.get()
    x[...] = xp.asarray(np.ones(6, np.float32))
    graph.launch()
    z2 = 2 * np.ones((2, 3), np.float32)
    z2[0, 1] = -1
    z2[1, 1] += 20
    np.testing.assert_array_equal(w.get(), np.cumsum(z2, axis=1) + z2.sum())
    assert not np.array_equal(first, w.get())


# --- donation ---------------------------------------------------------------------------------

def _sgd(p, g):
    return {k: v - 0.1 * g[k] * fnp.tanh(v) for k, v in p.items()}, g["a"] @ g["b"]


@pytest.mark.parametrize("graphs", [False, True])
def test_donated_buffers_take_the_outputs(gpu, monkeypatch, graphs):
    """A donated parameter's buffer becomes its update's: written in place by the update
    kernel (which then loses ``__restrict__`` on that pair) or, under a graph (from the
    second call), by the copy out; a buffer something else still references is not
    reused."""
    backend = fnx.jit(lambda a: a).lower(fnx.device_put(np.ones(2, np.float32), gpu))._entry.backend
    monkeypatch.setattr(backend, "graphs", graphs)
    rng = np.random.default_rng(5)
    host = {k: rng.normal(size=(4, 4)).astype(np.float32) for k in "ab"}
    grads = fnx.device_put({k: rng.normal(size=(4, 4)).astype(np.float32) for k in "ab"}, gpu)
    step = fnx.jit(_sgd, donate_argnums=0)
    params = fnx.device_put(host, gpu)
    if not graphs:
        assert any("_ip" in k and "__restrict__ in0" not in k
                   for k in step.lower(params, grads).kernels)
    for i in range(4):
        before = {k: id(v._value) for k, v in params.items()}
        keep = params["b"]._value if i == 2 else None  # still referenced: not reused
        new, _ = step(params, grads)
        with pytest.raises(RuntimeError, match="donated"):
            np.asarray(params["a"])
        want = _sgd({k: fnp.asarray(v) for k, v in host.items()},
                    {k: np.asarray(v) for k, v in grads.items()})[0]
        for k in "ab":
            np.testing.assert_allclose(np.asarray(new[k]), np.asarray(want[k]), rtol=1e-6)
        reused = {k: id(new[k]._value) == before[k] for k in "ab"}
        assert reused == {"a": True, "b": keep is None}
        params, host = new, {k: np.asarray(v) for k, v in new.items()}
        del keep


def test_in_place_kernels_only_where_each_thread_reads_its_own_element(gpu):
    from fnx.kernels import fusion

    def kernels(f, *shapes):
        ir = fnx.make_ir(f)(*[np.zeros(s, np.float32) for s in shapes])
        return [s for s in fusion.plan_program(ir.ir if hasattr(ir, "ir") else ir)
                if isinstance(s, fusion.Kernel)]
    (k,) = kernels(lambda p, g: p - 0.1 * g, (8, 4), (8, 4))
    variant = fusion.in_place(k, [(0, 0)])
    assert variant is not None and variant.name != k.name
    assert "* __restrict__ in0" not in variant.source and "* __restrict__ out0" not in variant.source
    assert "* __restrict__ in1" in variant.source
    # a broadcast operand, and a row kernel, are refused
    (k,) = kernels(lambda p, g: p - 0.1 * g, (4,), (8, 4))
    assert fusion.in_place(k, [(0, 0)]) is None
    (k,) = kernels(lambda p: p - p.sum(axis=1, keepdims=True), (8, 4))
    assert fusion.in_place(k, [(0, 0)]) is None
