"""fnx.nn.initializers against jax.nn.initializers (JAX 0.10.2, key PRNGKey(0)).

The expected values were recorded from JAX.  Uniform-based initializers must match bit
for bit (fnx.random.uniform is JAX's threefry bits); normal-based ones to a few ulp
(fnx.random.normal uses its own erf_inv)."""
import numpy as np
import pytest

import fnx
from fnx.nn import initializers as I
from fnx.core import dtypes

KEY = fnx.random.PRNGKey(0)

EXACT = [
    ('I.glorot_uniform()', (3, 4), [
        0.8289182, 0.88615775, -0.31053585, -0.05801474, 0.12940875, -0.6193681,
        -0.35145128, 0.3508498, 0.4569229, -0.6091627, 0.89870065, -0.8790058]),
    ('I.he_uniform()', (2, 2, 3, 2), [
        0.63309675, 0.67681414, -0.23717566, -0.044309486, 0.09883756, -0.47305015,
        -0.26842535, 0.26796594, 0.3489806, -0.46525568, 0.686394, -0.67135173, 0.19804905,
        0.08865825, 0.5645735, 0.61452883, 0.47254556, 0.3190695, 0.013934422, -0.66800076,
        -0.6625749, 0.6477364, 0.026614387, 0.41325322]),
    ('I.lecun_uniform(in_axis=0, out_axis=(1, 2))', (3, 2, 2), [
        0.895334, 0.95715976, -0.33541703, -0.06266308, 0.13977742, -0.66899395,
        -0.37961078, 0.3789611, 0.49353313, -0.6579709, 0.97070765, -0.94943476]),
    ('I.uniform(2.0)', (5,), [1.895334, 1.9571598, 0.66458297, 0.9373369, 1.1397774]),
    ("I.variance_scaling(1.0, 'fan_geo_avg', 'uniform')", (3, 5), [
        0.78799397, 0.8424075, -0.29520446, -0.055150513, 0.123019755, -0.58878946,
        -0.33409992, 0.3335281, 0.43436432, -0.5790879, 0.8543312, -0.83560866, 0.24650492,
        0.110349916, 0.7027055]),
]

CLOSE = [
    ('I.normal(0.5)', (5,), [0.8113211, 1.0126324, -0.21679722, -0.039308675, 0.08804545]),
    ('I.glorot_normal()', (3, 4), [
        0.8847433, 1.042002, -0.25077057, -0.045595594, 0.10208923, -0.5545685, -0.28619498,
        0.28566742, 0.38262045, -0.54252505, 1.0877076, -1.018373]),
    ('I.he_normal(batch_axis=0)', (2, 3, 4), [
        1.3514677, 1.5916845, -0.38305843, -0.06964843, 0.1559439, -0.84711754, -0.4371701,
        0.4363642, 0.5844624, -0.82872075, 1.661501, -1.5555906, 0.31707382, 0.13975415,
        1.095545, 1.2723287, 0.84591657, 0.52824247, 0.021884486, -1.5345619, -1.5020956,
        1.4216001, 0.041809063, 0.71338814]),
    ("I.variance_scaling(2.0, 'fan_out', 'normal', in_axis=0, out_axis=1)", (3, 4), [
        1.1473813, 1.4320784, -0.30659756, -0.05559086, 0.124515064, -0.6873709,
        -0.35022908, 0.34957844, 0.4697659, -0.671867, 1.5411607, -1.3825002]),
    ('I.truncated_normal(1.0)', (5,), [
        1.4559592, 1.7147487, -0.41267535, -0.075033434, 0.16800101]),
    ('I.orthogonal()', (3, 4), [
        0.8337946, -0.04039752, -0.25450924, -0.4882415, 0.5419113, 0.06573482, 0.20781927,
        0.81167865, 0.087262325, -0.57483506, 0.7852893, -0.21276891]),
    ('I.orthogonal(2.0, column_axis=0)', (3, 2, 2), [
        1.6675892, -0.08079504, -0.5090185, -0.976483, 1.0838226, 0.13146964, 0.41563854,
        1.6233573, 0.17452465, -1.1496701, 1.5705786, -0.42553782]),
    ('I.delta_orthogonal()', (3, 2, 3), [
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.96083665, -0.25675002, 0.10427104, 0.18604839,
        0.3188112, -0.92937905, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("expr,shape,expected", EXACT, ids=[c[0] for c in EXACT])
def test_uniform_based_match_jax_bits(expr, shape, expected):
    w = eval(expr)(KEY, shape)
    assert w.shape == shape and w.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(w).ravel(), np.float32(expected))


@pytest.mark.parametrize("expr,shape,expected", CLOSE, ids=[c[0] for c in CLOSE])
def test_normal_based_close_to_jax(expr, shape, expected):
    w = eval(expr)(KEY, shape)
    assert w.shape == shape and w.dtype == np.float32
    np.testing.assert_allclose(np.asarray(w).ravel(), np.float32(expected), rtol=2e-6,
                               atol=2e-7)


def test_complex_match_jax():
    u = I.xavier_uniform(dtype="complex64")(KEY, (2, 2))
    assert u.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(u).ravel(), [
        0.9168131 + 0.04204554j, 0.42338425 + 0.05589619j,
        -0.41560096 - 0.23335367j, -0.22455369 + 0.26514387j], rtol=1e-6)
    n = I.glorot_normal(dtype="complex64")(KEY, (2, 2))
    np.testing.assert_allclose(np.asarray(n).ravel(), [
        0.98146796 + 0.04501065j, 0.32668498 + 0.04312972j,
        -0.32495642 - 0.18245812j, -0.1702941 + 0.2010764j], rtol=1e-6)


def test_float64_matches_jax_x64():
    with fnx._config.enable_x64(True):
        w = I.lecun_uniform()(KEY, (3, 2))
        assert w.dtype == dtypes.default_float()
        if w.dtype == np.float64:
            np.testing.assert_array_equal(np.asarray(w).ravel(), [
                -0.16308577656722711, -0.5674090907889773, 0.930642922237995,
                0.1490010674550093, 0.0644529765010855, -0.29018963946051146])


def test_default_dtype_follows_x64_flag():
    for init in (I.zeros, I.ones, I.constant(2), I.normal(), I.uniform(),
                 I.truncated_normal(), I.glorot_uniform(), I.he_normal(), I.orthogonal()):
        assert init(KEY, (3, 3)).dtype == dtypes.default_float()
    with fnx._config.enable_x64(True):
        want = dtypes.default_float()
        assert I.glorot_uniform()(KEY, (3, 3)).dtype == want
        assert I.zeros(KEY, (2,)).dtype == want
    # the factory's dtype is the call's default, and the call may override it
    assert I.normal(dtype="float16")(KEY, (2,)).dtype == np.float16
    assert I.normal(dtype="float16")(KEY, (2,), "float32").dtype == np.float32


def test_compute_fans_jax_layout():
    assert I.compute_fans((3, 4)) == (3, 4)                        # Dense (in, out)
    assert I.compute_fans((5, 5, 3, 8)) == (75, 200)               # conv HWIO
    assert I.compute_fans((2, 3, 4), batch_axis=0) == (3, 4)
    assert I.compute_fans((3, 2, 2), in_axis=0, out_axis=(1, 2)) == (3, 4)
    assert I.compute_fans((8, 4, 3, 3), in_axis=1, out_axis=0) == (36, 72)


def test_statistics():
    w = np.asarray(I.he_normal()(KEY, (400, 300)))
    assert abs(w.std() / np.sqrt(2 / 400) - 1) < 0.03
    assert np.abs(w).max() <= 2 * np.sqrt(2 / 400) / 0.8796256610342398 * 1.0001
    w = np.asarray(I.glorot_uniform()(KEY, (400, 300)))
    assert abs(w.std() / np.sqrt(2 / 700) - 1) < 0.03
    q = np.asarray(I.orthogonal()(KEY, (6, 4)))
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)
    q = np.asarray(I.orthogonal(column_axis=0)(KEY, (3, 5)))
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-5)
    d = np.asarray(I.delta_orthogonal()(KEY, (3, 3, 4, 4)))
    np.testing.assert_allclose(d[1, 1].T @ d[1, 1], np.eye(4), atol=1e-5)
    assert np.count_nonzero(d) == np.count_nonzero(d[1, 1])


def test_torch_default_keeps_pytorch_layout():
    w = np.asarray(I.torch_default()(KEY, (200, 50)))        # (out, in): fan_in 50
    assert np.abs(w).max() <= 1 / np.sqrt(50) and abs(w.std() / np.sqrt(1 / 150) - 1) < .05
    b = np.asarray(I.torch_default()(KEY, (50,)))
    assert np.abs(b).max() <= 1 / np.sqrt(50)


def test_errors():
    with pytest.raises(ValueError, match="at least 2 dimensions.*in_axis"):
        I.glorot_uniform()(KEY, (3,))
    with pytest.raises(ValueError, match="zero dimension"):
        I.lecun_normal()(KEY, (0, 3))
    with pytest.raises(ValueError, match="out_axis=5 is out of range"):
        I.he_uniform(out_axis=5)(KEY, (3, 3))
    with pytest.raises(ValueError, match="mode must be one of"):
        I.variance_scaling(1.0, "fan_max", "uniform")
    with pytest.raises(ValueError, match="distribution must be one of"):
        I.variance_scaling(1.0, "fan_in", "gaussian")
    with pytest.raises(TypeError, match="floating or complex"):
        I.normal()(KEY, (2,), "int32")
    with pytest.raises(ValueError, match="3-d, 4-d or 5-d"):
        I.delta_orthogonal()(KEY, (3, 3))
    with pytest.raises(ValueError, match="fan_in 4 must be <= fan_out 3"):
        I.delta_orthogonal()(KEY, (3, 4, 3))
    assert I.orthogonal()(KEY, (0, 3)).shape == (0, 3)


def test_usable_under_jit_and_in_layers():
    w = fnx.jit(lambda k: I.glorot_uniform()(k, (3, 4)))(KEY)
    np.testing.assert_array_equal(w, I.glorot_uniform()(KEY, (3, 4)))
    assert isinstance(I.glorot_uniform(), I.Initializer)
    m = fnx.nn.init(fnx.nn.Linear(3, kernel_init=I.glorot_uniform(in_axis=1, out_axis=0),
                                  bias_init=I.zeros), KEY,
                    fnx.ShapeDtypeStruct((2, 5), "float32"))
    assert m.weight.shape == (3, 5) and np.all(np.asarray(m.bias) == 0)
