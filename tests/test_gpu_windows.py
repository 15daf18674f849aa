"""max/min pooling's derivative (``select_and_scatter_add``) as one generated kernel
(``fnx.core.cuda_windows``): equal to the impl bit for bit, over overlapping and strided
windows, padding (negative too), base and window dilation, ties, NaN and infinities; on
the real device where there is one, else on the emulated one."""
import numpy as np
import pytest

import fnx
from fnx import lax
from fnx.core.backend import get_backend

pytestmark = pytest.mark.gpu

# (x shape, window, strides, padding, base dilation, window dilation)
CASES = [
    ((2, 3, 8, 8), (1, 1, 2, 2), (1, 1, 2, 2), [(0, 0)] * 4, (1,) * 4, (1,) * 4),
    ((2, 3, 7, 6), (1, 1, 3, 3), (1, 1, 1, 1), [(0, 0), (0, 0), (1, 1), (1, 1)], (1,) * 4,
     (1,) * 4),
    ((1, 2, 9, 7), (1, 1, 3, 2), (1, 1, 2, 3), [(0, 0), (0, 0), (2, 1), (0, 2)], (1,) * 4,
     (1, 1, 2, 1)),
    ((1, 1, 6, 5), (1, 1, 2, 3), (1, 1, 1, 2), [(0, 0), (0, 0), (-1, 1), (1, -1)],
     (1, 1, 2, 1), (1,) * 4),
    ((4, 10), (3, 4), (2, 3), [(1, 2), (0, 3)], (1, 1), (1, 1)),
    ((11,), (4,), (3,), [(2, 2)], (2,), (2,)),
]


def _values(rng, shape, dtype, kind):
    if kind == "ties":  # few distinct values: windows with several maxima
        return rng.integers(-2, 3, shape).astype(dtype)
    v = rng.standard_normal(shape).astype(dtype)
    if kind == "special":
        flat = v.reshape(-1)
        idx = rng.choice(flat.size, size=max(3, flat.size // 6), replace=False)
        flat[idx[0::3]] = np.nan
        flat[idx[1::3]] = np.inf
        flat[idx[2::3]] = -np.inf
    return v


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
@pytest.mark.parametrize("which", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_equals_the_impl_bit_for_bit(gpu, case, which, dtype):
    shape, win, strides, padding, bdil, wdil = case
    p = dict(window_dimensions=win, window_strides=strides, padding=padding,
             base_dilation=bdil, window_dilation=wdil)
    from fnx.lax.convolution import select_and_scatter_add_p
    rng = np.random.default_rng(len(shape) * 7 + len(which))
    with fnx.enable_x64(dtype == np.float64):
        for kind in ("normal", "ties", "special"):
            x = _values(rng, shape, dtype, kind)
            pooled = np.asarray(lax.reduce_window(x, -np.inf if which == "max" else np.inf,
                                                  lax.max if which == "max" else lax.min,
                                                  win, strides, padding, bdil, wdil))
            ct = _values(rng, pooled.shape, dtype, "special" if kind == "special" else "normal")

            def f(ct, x):
                return select_and_scatter_add_p.bind(ct, x, which=which, **p)
            want = np.asarray(f(fnx.numpy.asarray(ct), fnx.numpy.asarray(x)))
            jf = fnx.jit(f)
            dev = fnx.device_put((ct, x), gpu)
            assert any("select_and_scatter_add" in k for k in jf.lower(*dev).kernels)
            got = np.asarray(jf(*dev))
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{kind} values")


def test_pooling_gradients_in_a_jitted_step_use_the_kernel(gpu):
    def loss(x):
        y = lax.reduce_window(x, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return (y * y).sum()
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 6)).astype(np.float32)
    g = fnx.jit(fnx.grad(loss))
    dx = fnx.device_put(x, gpu)
    assert any("select_and_scatter_add" in k for k in g.lower(dx).kernels)
    np.testing.assert_array_equal(np.asarray(g(dx)), np.asarray(fnx.grad(loss)(x)))
    assert "select_and_scatter_add" not in get_backend("cuda").host_fallbacks


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
@pytest.mark.parametrize("which", ["max", "min", "sum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_the_reduce_window_kernels_equal_the_impl_bit_for_bit(gpu, case, which, dtype):
    shape, win, strides, padding, bdil, wdil = case
    from fnx.lax import convolution as C
    prim = {"max": C.reduce_window_max_p, "min": C.reduce_window_min_p,
            "sum": C.reduce_window_sum_p}[which]
    p = dict(window_dimensions=win, window_strides=strides, padding=tuple(map(tuple, padding)),
             base_dilation=bdil, window_dilation=wdil)
    rng = np.random.default_rng(len(shape) * 5 + len(which))
    with fnx.enable_x64(dtype == np.float64):
        for kind in ("normal", "ties", "special", "zeros"):
            if np.dtype(dtype).kind == "i" and kind != "ties":
                continue
            if kind == "zeros":  # -0 against +0: which one max and min keep
                x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(dtype)
            else:
                x = _values(rng, shape, dtype, kind)

            def f(x):
                return prim.bind(x, **p)
            want = np.asarray(f(fnx.numpy.asarray(x)))
            jf = fnx.jit(f)
            dev = fnx.device_put(x, gpu)
            assert any(f"reduce_window_{which}" in k for k in jf.lower(dev).kernels)
            got = np.asarray(jf(dev))
            assert got.dtype == want.dtype
            if which == "sum" and got.dtype.kind == "f":
                # a sum's new NaN (inf + -inf) has no defined sign or payload: x86 makes
                # 0xffc00000, a GPU 0x7fffffff; max and min pass an input's NaN on, bit
                # for bit
                assert np.array_equal(np.isnan(got), np.isnan(want)), kind
                got, want = (np.where(np.isnan(v), np.nan, v) for v in (got, want))
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                          want.view(f"u{want.itemsize}"), err_msg=kind)
