"""gather, scatter (set, add) and pad as generated GPU kernels (``fnx.core.cuda_indexing``):
equal to the impl bit for bit over static ints, slices (negative steps too), new axes,
index operands (adjacent or not, broadcast, negative, out of range, unsigned, repeated),
and negative and interior padding; on the real device where there is one, else on the
emulated one."""
import re

import numpy as np
import pytest

import fnx
from fnx import lax
from fnx.core.backend import get_backend
from fnx.lax.indexing import gather_p, indexed_shape, scatter_p

pytestmark = pytest.mark.gpu

X_SHAPE = (5, 6, 4)
# (spec, index operand shapes)
SPECS = [
    ((("a", 0), ("s", 0, None, 1), ("s", 0, None, 1)), [(7,)]),
    ((("s", 0, None, 1), ("a", 0), ("s", 0, None, 1)), [(3, 2)]),
    ((("s", 4, None, -2), ("a", 0), ("a", 1)), [(3, 1), (1, 2)]),
    ((("a", 0), ("s", 1, 5, 2), ("a", 1)), [(4,), (4,)]),           # not adjacent
    ((2, ("a", 0), ("s", 3, 0, -1)), [(2, 3)]),                      # int with arrays
    ((None, ("s", 1, 4, 1), 3, ("s", 0, None, 3)), []),              # basic only
    ((("a", 0), None, ("a", 1), 1), [(6,), (6,)]),
    ((("s", 0, None, 1), ("a", 0), ("s", 0, None, 1)), [()]),      # a 0-d index operand
]


def _indices(rng, shapes, spec, dtype):
    out = []
    dims = [X_SHAPE[d] for d, it in enumerate(x for x in spec if x is not None)]
    adv = [(k, dims[i]) for i, it in enumerate(x for x in spec if x is not None)
           if type(it) is tuple and it[0] == "a" for k in [it[1]]]
    sizes = dict(adv)
    for k, shape in enumerate(shapes):
        n = sizes[k]
        lo = 0 if np.dtype(dtype).kind == "u" else -n - 2
        out.append(rng.integers(lo, n + 2, shape).astype(dtype))  # out of range both ways
    return out


@pytest.mark.parametrize("case", range(len(SPECS)))
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64, np.uint8, np.uint64])
def test_gather_and_scatter_kernels_equal_the_impl(gpu, case, index_dtype):
    spec, shapes = SPECS[case]
    rng = np.random.default_rng(case)
    x = rng.standard_normal(X_SHAPE).astype(np.float32)
    x.reshape(-1)[3] = np.nan
    idx = _indices(rng, shapes, spec, index_dtype)
    out_shape = indexed_shape(X_SHAPE, spec, shapes)
    upd = rng.standard_normal(out_shape).astype(np.float32)
    fns = {
        "gather": (lambda x, u, *i: gather_p.bind(x, *i, spec=spec)),
        "add": (lambda x, u, *i: scatter_p.bind(x, u, *i, spec=spec, mode="add")),
        "set": (lambda x, u, *i: scatter_p.bind(x, u, *i, spec=spec, mode="set")),
    }
    args = [fnx.numpy.asarray(v) for v in (x, upd, *idx)]
    dev = fnx.device_put(args, gpu)
    for name, f in fns.items():
        want = np.asarray(f(*args))
        jf = fnx.jit(f)
        kernels = jf.lower(*dev).kernels
        assert any(f"// {'gather' if name == 'gather' else 'scatter'}" in k for k in kernels), name
        got = np.asarray(jf(*dev))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: spec {spec}")


def test_repeated_indices_add_in_order_and_set_keeps_the_last(gpu):
    x = np.zeros(4, np.float32)
    i = np.array([1, 3, 1, 1, -1, 7, -9], np.int32)
    u = np.array([1e8, 2.0, 1.0, -1e8, 5.0, 9.0, 9.0], np.float32)  # order matters in f32

    def add(x, u, i):
        return x.at[i].add(u, mode="drop")

    def put(x, u, i):
        return x.at[i].set(u, mode="drop")
    for f in (add, put):
        want = np.asarray(f(fnx.numpy.asarray(x), u, i))
        got = np.asarray(fnx.jit(f)(*fnx.device_put((x, u, i), gpu)))
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(fnx.jit(add)(*fnx.device_put((x, u, i), gpu))),
                                  [0.0, 0.0, 0.0, 7.0])  # ((1e8 + 1) - 1e8) rounds to 0


@pytest.mark.parametrize("config", [
    [(1, 2, 0), (0, 0, 0)], [(-1, 2, 1), (2, -2, 0)], [(0, 0, 2), (-3, 1, 1)]])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_the_pad_kernel_equals_the_impl(gpu, config, dtype):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 5)) * 3).astype(dtype)
    v = np.asarray(rng.standard_normal() * 3).astype(dtype)

    def f(x, v):
        return lax.pad(x, v, config)
    want = np.asarray(f(x, v))
    jf = fnx.jit(f)
    dev = fnx.device_put((x, v), gpu)
    assert any("// pad" in k for k in jf.lower(*dev).kernels)
    np.testing.assert_array_equal(np.asarray(jf(*dev)), want)


def test_a_cross_entropy_step_has_no_indexing_impls_left(gpu):
    """The label lookup of a softmax cross-entropy and its gradient: pad, gather, scatter
    and the crop are kernels, and the step equals the CPU's."""
    def loss(w, x, y):
        z = x @ w
        return -fnx.numpy.mean(fnx.numpy.take_along_axis(
            fnx.nn.log_softmax(z), y[:, None], axis=1))
    rng = np.random.default_rng(8)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.integers(0, 5, 8).astype(np.int32)
    g = fnx.jit(fnx.grad(loss))
    dev = fnx.device_put((w, x, y), gpu)
    get_backend("cuda").host_fallbacks.clear()
    src = g.lower(*dev).source
    assert not re.search(r"= _(gather|scatter|pad)\d", src), src  # no impl calls
    np.testing.assert_allclose(np.asarray(g(*dev)), np.asarray(fnx.grad(loss)(w, x, y)),
                               rtol=1e-6, atol=1e-7)
    assert not get_backend("cuda").host_fallbacks.get("scatter")
