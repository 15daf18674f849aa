"""Primitive impls run on the GPU device's own buffers (issue 19): the equations the CUDA
backend does not fuse into generated kernels (gathers, scatters, pads, convolutions with
fusion off, pooling and its derivatives, linalg, ...) call their NumPy impls on device arrays, and
none may fall back to host copies (``CudaBackend.host_fallbacks``) -- neither in the MLP,
CNN and RNN training steps of ``benchmarks/`` (eager and jitted) nor for the primitives
below -- while the results equal the CPU's."""
import numpy as np
import pytest

import fnx
from fnx import lax
from fnx.core.backend import get_backend

pytestmark = pytest.mark.gpu


@pytest.fixture
def device(gpu, monkeypatch):
    """The GPU device and its backend, fallback counts cleared. On the emulated device,
    ``np.asarray`` of a buffer is refused as CuPy refuses it (the emulated buffer forwards
    unknown attributes to the NumPy array it holds, ``__array_interface__`` included,
    which would let an impl convert it silently)."""
    backend = get_backend("cuda")
    if backend.emulated:
        from fnx.backends import cuda_emulation
        forward = cuda_emulation.EmulatedArray.__getattr__

        def strict(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return forward(self, name)
        monkeypatch.setattr(cuda_emulation.EmulatedArray, "__getattr__", strict)
    backend.host_fallbacks.clear()
    return gpu, backend


def _host(tree):
    return [np.asarray(fnx.device_get(v)) for v in fnx.tree_util.tree_leaves(tree)]


def _assert_equal(got, want, exact):
    for g, w in zip(_host(got), _host(want), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        if exact:
            np.testing.assert_array_equal(g, w)
        else:  # a real device: its BLAS and atomics round differently
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _on_device(out, gpu):
    for v in fnx.tree_util.tree_leaves(out):
        assert v.device is gpu and not isinstance(v._value, np.ndarray)


# --- the training steps -------------------------------------------------------------------------

def _train_step(name):
    from benchmarks import _harness as H
    if name == "rnn":
        from benchmarks import rnn_step as m
        d = m._data()
        loss = m.scan_loss(fnx.numpy, lax.scan)
        return fnx.grad(loss), (tuple(d[k] for k in ("wx", "wh", "b")), d["xs"], d["h0"])
    from benchmarks import cnn_step, mlp_step
    m = {"mlp": mlp_step, "cnn": cnn_step}[name]
    p, x, y = m.make_data()
    return H.jit_train_step(fnx, fnx.numpy, m.LOGITS["jit"], m.NAMES, m.LR), (p, x, y)


@pytest.mark.parametrize("how", ["jit", "eager"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "rnn"])
def test_training_steps_run_on_the_device_without_host_fallbacks(device, name, how):
    gpu, backend = device
    step, args = _train_step(name)
    if how == "jit":
        step = fnx.jit(step)
        want = step(*args)
        got = step(*fnx.device_put(args, gpu))
    else:
        with fnx.disable_jit():
            want = step(*args)
            got = step(*fnx.device_put(args, gpu))
    assert backend.host_fallbacks == {}
    _on_device(got, gpu)
    # fused kernels may round elementwise chains differently from NumPy
    for g, w in zip(_host(got), _host(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# --- primitives ---------------------------------------------------------------------------------

_rng = np.random.default_rng(0)
F32, I32 = np.float32, np.int32


def _f(*shape):
    return _rng.standard_normal(shape).astype(F32)


def _maxpool(x, window=(1, 1, 2, 2), padding="VALID"):
    return lax.reduce_window(x, -np.inf, lax.max, window, (1, 1, 2, 2), padding)


def _scatter(mode, x, idx, u):
    return getattr(x.at[idx], mode)(u)


_img, _ker = _f(2, 4, 9, 9), _f(6, 4, 3, 3)
_vec, _dup = _f(6, 5), np.array([0, 3, 3, 1, 3, 5, 9, -2], I32)  # repeats, one out of range
_uniq = np.array([4, 0, 2, 5, 1, -3, 9, 7], I32)  # no repeats (set's order is unspecified)

CASES = {
    "pad": (lambda x: lax.pad(x, F32(-1), ((1, 2, 0), (0, 3, 0))), (_f(3, 4),)),
    "pad negative interior": (lambda x: lax.pad(x, F32(7), ((-1, 2, 1), (2, -1, 2))),
                              (_f(3, 4),)),
    "dynamic_update_slice": (lambda x, u: lax.dynamic_update_slice(x, u, (1, 2)),
                             (_f(4, 5), _f(2, 2))),
    "gather (clamped)": (lambda x, i: x[i], (_vec, _dup)),
    "argmax": (lambda x: lax.argmax(x, 1, np.int32), (_vec,)),
    **{f"scatter {mode} {np.dtype(dt).name}": (
        lambda x, u, mode=mode: _scatter(mode, x, _uniq if mode == "set" else _dup, u),
        (_vec.astype(dt), (_f(8, 5) * 4).astype(dt)))
       for mode in ("add", "max", "min", "set") for dt in (F32, I32, np.int8, np.bool_)},
    "max pool": (_maxpool, (_img,)),
    "max pool, 81 taps": (lambda x: _maxpool(x, (1, 1, 9, 9), "SAME"), (_img,)),
    "min pool": (lambda x: lax.reduce_window(x, np.inf, lax.min, (1, 1, 3, 3), (1, 1, 1, 1),
                                             "SAME"), (_img,)),
    "sum pool": (lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2),
                                             "VALID"), (_img,)),
    "max pool gradient": (fnx.grad(lambda x: (_maxpool(x, padding="SAME") ** 2).sum()),
                          (_img,)),
    "max pool jvp": (lambda x, t: fnx.jvp(_maxpool, (x,), (t,)), (_img, _f(*_img.shape))),
    "fft": (lambda x: lax.fft(x, "RFFT", (8,)), (_f(3, 8),)),
    "triangular_solve": (lambda a, b: lax.linalg.triangular_solve(
        a, b, left_side=True, lower=True, unit_diagonal=True), (_f(2, 4, 4), _f(2, 4, 3))),
    "lu": (lambda a: lax.linalg.lu(a), (_f(3, 5, 5),)),
    "lu, blocked": (lambda a: lax.linalg.lu(a), (_f(40, 40),)),
    "sort, two keys": (lambda a, b, c: lax.sort((a, b, c), dimension=0, num_keys=2),
                       (_rng.integers(0, 3, (9, 2)).astype(F32), _f(9, 2), _f(9, 2))),
    "top_k": (lambda x: lax.top_k(x, 3), (_vec,)),
    "shift_right_logical": (lax.shift_right_logical,
                            (_rng.integers(-99, 99, 10).astype(I32), np.arange(10, dtype=I32))),
}


# primitives whose equations the CUDA backend fuses into kernels: their impls run on the
# device where fusion is off (FNX_GPU_FUSION=0) or where a cluster cannot take them
UNFUSED = {
    "integer_pow int": (lambda x: (lax.integer_pow(x, 3), lax.integer_pow(x, -3)),
                        (_rng.integers(-3, 4, 12).astype(I32),)),
    "select_n int": (lambda w, a, b, c: lax.select_n(w, a, b, c),
                     (_rng.integers(0, 3, (4, 5)).astype(I32), _f(4, 5), _f(4, 5), _f(4, 5))),
    "reduce_max": (lambda x: lax.reduce_max(x, (0,)), (_vec,)),
    "reduce_and bool": (lambda x: lax.reduce_and(x, (1,)), (_vec > 0,)),
    "cummax": (lambda x: lax.cummax(x, 0), (np.where(_vec > 1, np.nan, _vec).astype(F32),)),
    "cummin reverse": (lambda x: lax.cummin(x, 1, reverse=True), (_vec,)),
    "dot_general outer": (lambda a, b: lax.dot_general(a, b, (((), ()), ((), ()))),
                          (_f(3), _f(4))),
    # (with fusion on, convolutions are generated implicit-GEMM kernels: test_gpu_conv)
    "conv NCHW, padded, dilated": (
        lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (0, 1)), (1, 2), (1, 2)),
        (_img, _ker)),
    "conv NHWC": (lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        (_f(2, 7, 7, 4), _f(3, 3, 4, 5))),
    "conv feature groups": (lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "VALID", feature_group_count=2), (_img, _f(6, 2, 3, 3))),
    "conv many taps": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID"),
                       (_f(1, 2, 40, 40), _f(3, 2, 17, 17))),
}


@pytest.mark.parametrize("name", list(CASES) + [f"unfused {k}" for k in UNFUSED])
def test_primitive_runs_on_the_device_without_host_fallbacks(device, name, monkeypatch):
    gpu, backend = device
    if name.startswith("unfused "):
        monkeypatch.setattr(backend, "fuse", False)
        backend.clear_cache()  # (programs made with fusion on, and, after, without)
        fn, args = UNFUSED[name[len("unfused "):]]
    else:
        fn, args = CASES[name]
    want = fn(*map(fnx.numpy.asarray, args))
    try:
        got = fn(*fnx.device_put(args, gpu))
    finally:
        if name.startswith("unfused "):
            backend.clear_cache()
    assert backend.host_fallbacks == {}, name
    _on_device(got, gpu)
    # the host factorizes with LAPACK (getrf, trsm), the device with fnx's NumPy-dispatched
    # elimination: equal to rounding, not bitwise, even emulated
    lapack_on_host = name.split(",")[0] in ("lu", "triangular_solve")
    _assert_equal(got, want, exact=backend.emulated and not lapack_on_host)


def test_a_scatter_the_device_has_no_atomic_for_runs_on_the_host(device):
    """CuPy has no multiply.at: a multiplying scatter (and complex max/min, ...) runs on
    host copies, counted, and gives the CPU's result."""
    gpu, backend = device
    x, u = _vec, _f(8, 5)
    xd, ud = fnx.device_put((x, u), gpu)
    got = _scatter("multiply", xd, _dup, ud)
    assert backend.host_fallbacks == {"scatter": 1}
    _on_device(got, gpu)
    want = _scatter("multiply", fnx.numpy.asarray(x), _dup, fnx.numpy.asarray(u))
    _assert_equal(got, want, exact=True)


def test_negating_a_negative_constant_compiles(gpu):
    """``-(-0.5)`` folds the operand into the kernel as the literal ``-0x1p-1f``: the
    negation must not print ``--``, C's decrement (found by JAX's VAE example)."""
    import fnx.numpy as fnp
    with fnx.default_device(gpu):
        f = fnx.jit(lambda: -fnp.full((4,), -0.5, np.float32))
        out = f()
        kernels = f.lower().kernels
    assert out.device == gpu and np.asarray(out).tolist() == [0.5] * 4
    assert kernels and not any("--" in k for k in kernels)
