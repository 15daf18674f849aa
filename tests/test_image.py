"""fnx.image (JAX's jax.image): resize and scale_and_translate. Expected values are JAX
0.10.2's results for the same calls (rounded to 4 decimals), on x = arange(12).reshape(3, 4)
** 1.5 in float32."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import image

X = np.arange(12.0, dtype=np.float32).reshape(3, 4) ** 1.5

CASES = [
    ("linear", (2, 3), True, [[3.5453, 6.0484, 9.3186], [18.3198, 23.1716, 28.4055]]),
    ("lanczos3", (2, 2), False, [[1.0216, 5.571], [21.9938, 32.2002]]),
    ("lanczos3", (2, 2), True, [[2.5804, 6.9614], [20.3409, 28.7319]]),
    ("nearest", (2, 6), True, [[0.0, 1.0, 1.0, 2.8284, 5.1962, 5.1962],
                               [22.6274, 27.0, 27.0, 31.6228, 36.4829, 36.4829]]),
    ("area", (2, 2), True, [[3.5301, 8.2111], [19.7392, 28.2381]]),
    ("lanczos5", (4, 3), True, [[0.2585, 1.8623, 4.7833], [2.1598, 5.0962, 8.9581],
                                [16.4931, 22.0562, 28.0358], [23.8722, 29.8036, 36.2133]]),
    ("cubic", (5, 6), True, [
        [-0.6587, -0.3107, 0.4586, 1.6069, 3.2281, 4.3391],
        [2.0384, 2.8169, 4.214, 5.8039, 7.8721, 9.2515],
        [7.7908, 9.2898, 11.7434, 14.0892, 16.9279, 18.7718],
        [17.5885, 19.5084, 22.6077, 25.4816, 28.8861, 31.0793],
        [23.4378, 25.5546, 28.9615, 32.0996, 35.7915, 38.1634]]),
]


@pytest.mark.parametrize("method,shape,antialias,expected", CASES)
def test_resize_matches_jax(method, shape, antialias, expected):
    out = image.resize(X, shape, method, antialias=antialias)
    assert out.shape == shape and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, atol=2e-4)


def test_cubic_pytorch_without_antialias_repeats_edges():
    out = image.resize(X, (5, 7), "cubic-pytorch", antialias=False)
    np.testing.assert_allclose(out[0], [-0.8464, -0.6011, -0.0995, 0.7211, 1.8935, 3.2603,
                                        4.1381], atol=2e-4)
    np.testing.assert_allclose(out[:, -1], [4.1381, 9.3561, 18.8996, 30.9254, 38.6994],
                               atol=2e-4)
    # with antialias it is the Keys cubic
    np.testing.assert_array_equal(image.resize(X, (5, 6), "cubic-pytorch"),
                                  image.resize(X, (5, 6), "bicubic"))


def test_dtypes_names_and_unchanged_dimensions():
    i8 = np.arange(6, dtype=np.int8).reshape(2, 3)
    near = image.resize(i8, (3, 2), "nearest")
    assert near.dtype == np.int8 and near.tolist() == [[0, 2], [3, 5], [3, 5]]
    assert image.resize(i8, (3, 2), "linear").dtype == np.float32
    batch = fnp.stack([fnp.asarray(X), fnp.asarray(X) * 2])[..., None]   # N, H, W, C
    out = image.resize(batch, (2, 2, 3, 1), image.ResizeMethod.LINEAR)
    np.testing.assert_allclose(out[0, ..., 0], CASES[0][3], atol=2e-4)
    np.testing.assert_allclose(out[1, ..., 0], 2 * np.asarray(CASES[0][3]), atol=4e-4)
    assert image.ResizeMethod.from_string("trilinear") is image.ResizeMethod.LINEAR
    np.testing.assert_array_equal(image.resize(X, X.shape, "lanczos5"), X)


def test_scale_and_translate_and_its_gradient():
    s, t = fnp.array([1.5, 0.75]), fnp.array([0.5, -0.25])
    out = image.scale_and_translate(X, (4, 4), (0, 1), s, t, "linear")
    np.testing.assert_allclose(out, [[0.5, 2.545, 4.9002, 0.0], [2.015, 4.4684, 7.0905, 0.0],
                                     [8.0751, 12.162, 15.852, 0.0],
                                     [17.2019, 22.4446, 26.9589, 0.0]], atol=2e-4)
    g = fnx.grad(lambda s: image.scale_and_translate(X, (4, 4), (0, 1), s, t, "cubic").sum())(s)
    np.testing.assert_allclose(g, [-125.9763, -80.7926], rtol=1e-5)
    jitted = fnx.jit(lambda s: image.scale_and_translate(X, (4, 4), (0, 1), s, t, "linear"))
    np.testing.assert_allclose(jitted(s), out, rtol=1e-6)


def test_resize_gradient_is_the_transposed_resampling():
    g = fnx.grad(lambda x: (image.resize(x, (2, 5), "linear") * 1.0).sum())(fnp.asarray(X[:2]))
    # d(sum)/dx: every input pixel's total weight over the outputs
    wcols = image.resize(np.eye(4, dtype=np.float32), (4, 5), "linear").sum(axis=1)
    np.testing.assert_allclose(g, np.broadcast_to(wcols, (2, 4)), rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="one size per dimension"):
        image.resize(X, (2, 2, 2), "linear")
    with pytest.raises(ValueError, match="Unknown resize method"):
        image.resize(X, (2, 2), "bilinearr")
    with pytest.raises(ValueError, match="nearest"):
        image.scale_and_translate(X, (2, 2), (0, 1), fnp.ones(2), fnp.zeros(2), "nearest")
    with pytest.raises(ValueError, match="one value per"):
        image.scale_and_translate(X, (2, 2), (0, 1), fnp.ones(3), fnp.zeros(2), "linear")
