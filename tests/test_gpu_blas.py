"""Products of device buffers through fnx's own cuBLAS calls (``fnx.backends.cuda_blas``):
every layout cuBLAS can read in place (transposed views, leading dims wider than a row,
broadcast and merged batch dims, size-1 dims) and those it cannot (copied first), in each
dtype, equal NumPy's product; and they capture into CUDA graphs, where CuPy's matmul
refuses. On the real device where there is one, else on the emulated one, which reads
the operands' memory as cuBLAS would (column-major, flags, leading dims, batch strides,
bounds checked)."""
import numpy as np
import pytest

import fnx
from fnx.backends import cuda_blas
from fnx.core.backend import get_backend

pytestmark = pytest.mark.gpu


def _views(rng, dtype, shape, kind):
    """A host array of ``shape`` and the same values as a device view of layout ``kind``."""
    xp = get_backend("cuda").xp
    *batch, r, c = shape

    def rand(shape):
        v = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            v = v + 1j * rng.standard_normal(shape)
        return v.astype(dtype)
    if kind == "contiguous":
        h = rand(shape)
        return h, xp.asarray(h)
    if kind == "transposed":  # columns contiguous: cuBLAS's transpose flag
        h = rand(tuple(batch) + (c, r))
        return np.swapaxes(h, -1, -2), xp.swapaxes(xp.asarray(h), -1, -2)
    if kind == "wide rows":  # a slice of wider rows: leading dim > columns
        h = rand(tuple(batch) + (r, c + 3))
        return h[..., :c], xp.asarray(h)[..., :c]
    if kind == "broadcast batch":  # one matrix over every batch element: stride 0
        h = rand((r, c))
        return np.broadcast_to(h, shape), xp.broadcast_to(xp.asarray(h), shape)
    if kind == "reversed":  # a negative stride: copied first
        h = rand(shape)
        return h[..., ::-1, :], xp.asarray(h)[..., ::-1, :]
    if kind == "strided batch":  # every other batch element: batch dims need not be dense
        h = rand((2 * batch[0],) + tuple(batch[1:]) + (r, c)) if batch else rand(shape)
        return (h[::2], xp.asarray(h)[::2]) if batch else (h, xp.asarray(h))
    raise ValueError(kind)


KINDS = ["contiguous", "transposed", "wide rows", "broadcast batch", "reversed",
         "strided batch"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "float16"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_products_in_every_layout_equal_numpys(gpu, dtype, batch):
    xp = get_backend("cuda").xp
    rng = np.random.default_rng(len(batch))
    tol = {"float16": 2e-2, "float32": 1e-5, "complex64": 1e-5}.get(dtype, 1e-12)
    for m, k, n in [(5, 7, 4), (1, 6, 3), (4, 1, 5), (3, 5, 1), (1, 1, 1), (17, 33, 9)]:
        for ka in KINDS:
            for kb in KINDS:
                if "batch" in ka + kb and not batch:
                    continue
                ha, da = _views(rng, dtype, batch + (m, k), ka)
                hb, db = _views(rng, dtype, batch + (k, n), kb)
                got = cuda_blas.matmul(xp, da, db)
                want = np.matmul(ha.astype(np.complex128 if "complex" in dtype
                                           else np.float64), hb)
                assert got.dtype == np.dtype(dtype) and got.shape == want.shape
                scale = np.abs(want).max() + 1
                np.testing.assert_allclose(got.get().astype(want.dtype), want,
                                           rtol=tol, atol=tol * scale,
                                           err_msg=f"{m}x{k}x{n} {ka} @ {kb}")


def test_mixed_batch_ranks_empty_and_integer_products(gpu):
    xp = get_backend("cuda").xp
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    got = cuda_blas.matmul(xp, xp.asarray(w), xp.asarray(x))  # (4, 6) @ (2, 3, 6, 5)
    np.testing.assert_allclose(got.get(), w @ x, rtol=1e-5, atol=1e-5)
    e = cuda_blas.matmul(xp, xp.asarray(np.ones((3, 0), np.float32)),
                         xp.asarray(np.ones((0, 2), np.float32)))
    np.testing.assert_array_equal(e.get(), np.zeros((3, 2), np.float32))
    assert cuda_blas.matmul(xp, xp.asarray(np.ones((0, 4), np.float32)),
                            xp.asarray(np.ones((4, 2), np.float32))).shape == (0, 2)
    i = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    j = rng.integers(-5, 5, (4, 2)).astype(np.int32)
    got = cuda_blas.matmul(xp, xp.asarray(i), xp.asarray(j))  # CuPy's own integer kernel
    np.testing.assert_array_equal(got.get(), i @ j)


def test_jitted_products_capture_into_a_graph(gpu):
    """A program of products and their gradients (transposed operands) replays as a CUDA
    graph: the products are fnx's cuBLAS calls, which capture."""
    def f(w, x):
        return fnx.grad(lambda w: (fnx.numpy.tanh(x @ w) @ w.T).sum())(w)
    jf = fnx.jit(f)
    rng = np.random.default_rng(6)
    w = rng.standard_normal((5, 5)).astype(np.float32)
    dw = fnx.device_put(w, gpu)
    for _ in range(4):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(jf(dw, fnx.device_put(x, gpu))),
                                   np.asarray(f(w, x)), rtol=1e-5, atol=1e-5)
    graph = jf.lower(dw, fnx.device_put(x, gpu))._entry.compiled.graph
    assert graph.failure is None and graph.replays == 3  # the first call runs as it is


def test_the_emulation_refuses_cupys_products_under_capture_as_cupy_does(gpu):
    if not gpu.emulated:
        pytest.skip("a property of the emulation")
    xp = get_backend("cuda").xp
    a = xp.asarray(np.ones((2, 2), np.float32))
    s = xp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        with pytest.raises(NotImplementedError, match="cuBLAS"):
            np.matmul(a, a)
        with pytest.raises(NotImplementedError, match="cuBLAS"):
            a @ a
        cuda_blas.matmul(xp, a, a)  # fnx's own call is recorded
        graph = s.end_capture()
    graph.launch()
