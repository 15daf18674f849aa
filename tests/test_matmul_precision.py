"""JAX's matmul precision levels (``precision=``, ``jax_default_matmul_precision``): fnx
computes float32 products in full precision unless reduced precision is asked for; then
``dot_general`` records it (and keeps it through jvp, transpose and vmap), CPU products
ignore it, and GPU products run TF32 or bfloat16 tensor-core passes (the emulated GPU
rounds the operands as those passes do)."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax


def _dot_params(f, *args):
    text = str(fnx.make_jaxpr(f)(*args))
    return [line for line in text.splitlines() if "dot_general" in line]


A = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
B = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)


@pytest.mark.parametrize("setting, precision, want", [
    (None, None, None), (None, "highest", None), (None, lax.Precision.HIGH, "tensorfloat32"),
    ("tensorfloat32", None, "tensorfloat32"), ("high", None, "tensorfloat32"),
    ("default", None, "tensorfloat32"), ("bfloat16", None, "bfloat16"),
    ("fastest", lax.Precision.DEFAULT, "bfloat16"), ("bfloat16", "highest", None),
    ("tensorfloat32", ("default", "highest"), None), ("float32", None, None),
])
def test_the_recorded_precision_follows_jax_levels(setting, precision, want):
    with fnx.default_matmul_precision(setting):
        assert lax.reduced_precision(precision) == want
        lines = _dot_params(lambda a, b: fnp.matmul(a, b, precision=precision), A, B)
    assert len(lines) == 1
    assert (f"precision='{want}'" in lines[0]) if want else ("precision" not in lines[0])


def test_only_float32_and_complex64_products_record_it_and_the_cpu_ignores_it():
    f = lambda a, b: a @ b  # noqa: E731
    with fnx.default_matmul_precision("tensorfloat32"):
        assert "precision" in _dot_params(f, A, B)[0]
        assert "precision" not in _dot_params(f, A.astype(np.int32), B.astype(np.int32))[0]
        with fnx.enable_x64():
            assert "precision" not in _dot_params(f, A.astype(np.float64), B.astype(np.float64))[0]
        got = np.asarray(fnx.jit(f)(A, B))
    np.testing.assert_array_equal(got, np.asarray(fnx.jit(f)(A, B)))  # the CPU: full


def test_jvp_transpose_and_vmap_keep_it():
    def loss(a, b):
        return (fnp.tanh(a @ b) ** 2).sum()
    with fnx.default_matmul_precision("tensorfloat32"):
        g = str(fnx.make_jaxpr(fnx.grad(loss, argnums=(0, 1)))(A, B))
        v = str(fnx.make_jaxpr(fnx.vmap(lambda a: a @ B))(A))
    dots = [ln for ln in g.splitlines() if "dot_general" in ln]
    assert len(dots) == 3 and all("precision='tensorfloat32'" in ln for ln in dots)
    assert "precision='tensorfloat32'" in v


@pytest.mark.gpu
@pytest.mark.parametrize("setting, bits", [("tensorfloat32", 10), ("bfloat16", 7)])
def test_gpu_products_in_reduced_precision(gpu, setting, bits):
    """The product of operands with more mantissa bits than the pass keeps: not the exact
    one, and no less accurate than the product of the rounded operands (accumulated in
    float32), which the emulation gives bit for bit; ``precision="highest"`` stays exact.
    The setting is a floor, as JAX's is: cuBLAS may pick a more precise kernel (on an H100,
    ``CUBLAS_COMPUTE_32F_FAST_16BF`` ran this product in TF32)."""
    from fnx.backends.cuda_blas import _rounded
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((64, 8)).astype(np.float32)
    da, db = fnx.device_put((a, b), gpu)
    exact = a.astype(np.float64) @ b
    rounded = _rounded(a, bits).astype(np.float64) @ _rounded(b, bits)
    with fnx.default_matmul_precision(setting):
        got = np.asarray(fnx.jit(lambda x, y: x @ y)(da, db))
        full = np.asarray(fnx.jit(lambda x, y: fnp.matmul(x, y, precision="highest"))(da, db))
    if gpu.emulated:
        np.testing.assert_allclose(got, rounded, rtol=1e-5, atol=1e-4)
    else:
        assert np.abs(got - exact).max() <= 1.5 * np.abs(rounded - exact).max() + 1e-4
    assert np.abs(got - exact).max() > 10 * np.abs(full - exact).max()
    np.testing.assert_allclose(full, exact, rtol=1e-5, atol=1e-5)


def test_jit_retraces_when_the_setting_changes():
    f = fnx.jit(lambda a, b: a @ b)
    f(A, B)  # traced in full precision first
    with fnx.default_matmul_precision("tensorfloat32"):
        reduced = fnx.make_jaxpr(f)(A, B)
        np.testing.assert_array_equal(np.asarray(f(A, B)), A @ B)  # the CPU: full
    assert "precision='tensorfloat32'" in str(reduced)
    assert "precision" not in str(fnx.make_jaxpr(f)(A, B))
