"""conv_general_dilated on the GPU: the generated implicit-GEMM kernel
(``fnx.core.cuda_conv``) against the CPU impl, over layouts, strides, padding, dilations
and groups, forward and both gradients."""
import numpy as np
import pytest

import fnx
from fnx import lax
from fnx.core.cuda_conv import conv_kernel
from fnx.core.cuda_rules import KernelUnsupported

pytestmark = pytest.mark.gpu

CASES = [
    # lhs shape, rhs shape, dimension numbers, strides, padding, lhs dil, rhs dil, G, B
    ((2, 3, 9, 8), (4, 3, 3, 2), ("NCHW", "OIHW", "NCHW"), (2, 1), [(1, 2), (0, 1)],
     (1, 2), (2, 1), 1, 1),
    ((2, 7, 6, 4), (3, 3, 4, 5), ("NHWC", "HWIO", "NHWC"), (1, 1), "SAME", (1, 1), (1, 1), 1, 1),
    ((3, 10, 4), (6, 2, 3), ("NWC", "OIW", "NCW"), (3,), [(-1, 2)], (1,), (1,), 2, 1),
    ((4, 3, 5, 5), (6, 3, 2, 2), ("NCHW", "OIHW", "NCHW"), (1, 2), "VALID", (1, 1), (1, 1), 1, 2),
    ((1, 2, 4, 3, 5), (3, 2, 2, 1, 3), ("NCDHW", "OIDHW", "NCDHW"), (1, 1, 2),
     [(0, 0), (1, 0), (2, 1)], (2, 1, 1), (1, 1, 2), 1, 1),
    ((5, 4), (3, 4), ("NC", "OI", "NC"), (), [], (), (), 1, 1),  # no spatial dims: a matmul
    ((2, 8, 5, 5), (8, 1, 3, 3), ("NCHW", "OIHW", "NCHW"), (1, 1), "SAME", (1, 1), (1, 1), 8, 1),
]


def _conv(case):
    _, _, dn, strides, padding, ldil, rdil, G, B = case

    def f(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation=ldil,
                                        rhs_dilation=rdil, dimension_numbers=dn,
                                        feature_group_count=G, batch_group_count=B)
    return f


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[2][0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_conv_kernel_matches_the_cpu_forward_and_in_both_gradients(gpu, case, dtype):
    f = _conv(case)
    rng = np.random.default_rng(0)
    x = rng.normal(size=case[0]).astype(dtype)
    w = rng.normal(size=case[1]).astype(dtype)
    with fnx.enable_x64(dtype == np.float64):
        dev = fnx.device_put((x, w), gpu)
        low = fnx.jit(f).lower(*dev)
        assert any("implicit-GEMM" in k for k in low.kernels)
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(fnx.jit(f)(*dev)), np.asarray(f(x, w)), **tol)
        g = fnx.grad(lambda x, w: (f(x, w) ** 2).sum() / 7, argnums=(0, 1))
        for got, want in zip(fnx.jit(g)(*dev), g(x, w)):
            scale = max(1.0, float(np.abs(np.asarray(want)).max()))
            np.testing.assert_allclose(np.asarray(got) / scale, np.asarray(want) / scale, **tol)


def test_the_kernel_declines_what_it_does_not_do(gpu):
    from fnx.core.primitive import ShapeDtypeStruct as S
    params = dict(window_strides=(1, 1), padding=[(0, 0), (0, 0)], lhs_dilation=(1, 1),
                  rhs_dilation=(1, 1), dimension_numbers=((0, 1, 2, 3),) * 3,
                  feature_group_count=1, batch_group_count=1)
    ints = [S((1, 2, 4, 4), np.int32), S((3, 2, 2, 2), np.int32)]
    with pytest.raises(KernelUnsupported, match="float32"):
        conv_kernel(ints, [S((1, 3, 3, 3), np.int32)], **params)
    # a weight gradient's shape: a handful of output tiles over a long reduction
    long_k = [S((9, 4096, 3, 3), np.float32), S((16, 4096, 3, 3), np.float32)]
    with pytest.raises(KernelUnsupported, match="cuBLAS"):
        conv_kernel(long_k, [S((9, 16, 1, 1), np.float32)], **params)
    # integer convolutions still run on the device, through the impl
    rng = np.random.default_rng(1)
    x, w = rng.integers(-3, 3, (1, 2, 4, 4)).astype(np.int32), rng.integers(-3, 3, (3, 2, 2, 2)).astype(np.int32)
    f = _conv(((), (), ("NCHW", "OIHW", "NCHW"), (1, 1), "VALID", (1, 1), (1, 1), 1, 1))
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(*fnx.device_put((x, w), gpu))),
                                  np.asarray(f(x, w)))
