"""vmap (issue 3, in progress): batched primitive calls checked against a Python
loop, in_axes/out_axes pytrees, nesting, and composition with grad and jit."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import MissingRuleError

RNG = np.random.default_rng(0)
# NumPy float64: 32-bit in the default mode, 64-bit in the tests marked x64
X = RNG.standard_normal((4, 3, 5))
W = RNG.standard_normal((5, 2))

FUNCS = {
    "elementwise": lambda x: fnp.exp(fnp.sin(x)) * 2.0 + fnp.maximum(x, 0.1) ** 2,
    "matmul": lambda x: fnp.tanh(x @ W),
    "reductions": lambda x: fnp.concatenate([x.max(axis=0), x.mean(axis=-1).repeat(5)[:5],
                                             x.argmin(axis=1).astype("float64")]),
    "shapes": lambda x: fnp.pad(x.T[::-1, 1:], ((1, 0), (0, 2))).reshape(-1)[3:17],
    "where_sort": lambda x: fnp.sort(fnp.where(x > 0, x, -x), axis=1).cumsum(axis=0),
    "indexing": lambda x: x[[0, 2], 1:4] + x[1, [0, 4]].sum() + x[::2, [[1], [3]]].sum(),
    "updates": lambda x: x.at[:, 0].set(1.0).at[[1, 1]].add(x[0]),
    "einsum": lambda x: fnp.einsum("ij,jk->ik", x, W),
    "dynamic": lambda x: fnx.lax.dynamic_slice(x, (1, 2), (2, 2)) * 3,
}


def _loop(f, *args, axis=0):
    return np.stack([np.asarray(f(*[fnp.asarray(np.take(np.asarray(a), i, axis))
                                    for a in args]))
                     for i in range(np.asarray(args[0]).shape[axis])])


@pytest.mark.x64  # checked against a loop to 1e-12: float64 work (the sums round differently)
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_vmap_matches_a_loop_over_the_batch(name):
    f = FUNCS[name]
    np.testing.assert_allclose(fnx.vmap(f)(X), _loop(f, X), rtol=1e-12)
    np.testing.assert_allclose(fnx.jit(fnx.vmap(f))(X), _loop(f, X), rtol=1e-12)
    moved = fnp.moveaxis(X, 0, 2)
    np.testing.assert_allclose(fnx.vmap(f, in_axes=2)(moved), _loop(f, X), rtol=1e-12)


def test_batch_rules_produce_batched_calls_not_loops():
    ir = fnx.make_ir(fnx.vmap(FUNCS["matmul"]))(X)
    assert [e.prim.name for e in ir.eqns] == ["dot_general", "tanh"]


def test_in_axes_pytrees_none_negative_and_out_axes():
    def f(p, x):
        return {"y": x @ p["w"] + p["b"], "n": x.sum()}
    params = {"w": W, "b": fnp.ones(2)}
    out = fnx.vmap(f, in_axes=({"w": None, "b": None}, -2), out_axes={"y": 1, "n": 0})(
        params, fnp.moveaxis(X, 0, 1))
    ref = _loop(lambda x: f(params, x)["y"], X)
    np.testing.assert_allclose(out["y"], np.moveaxis(ref, 0, 1), rtol=1e-12)
    assert out["n"].dtype == np.float32                       # X narrowed: x64 is off here
    np.testing.assert_allclose(out["n"], X.sum(axis=(1, 2)), rtol=1e-5)
    const = fnx.vmap(lambda a: a * 2.0, in_axes=None, axis_size=4)(fnp.ones(2))
    assert const.shape == (4, 2)


def test_nested_vmap_and_unbatched_outputs():
    out = fnx.vmap(fnx.vmap(lambda a, b: a * b), in_axes=(0, None))(fnp.ones((2, 3)),
                                                                    fnp.arange(3.0))
    np.testing.assert_array_equal(out, np.tile(np.arange(3.0), (2, 1)))
    c = fnx.vmap(lambda a: fnp.ones(2), in_axes=0)(fnp.ones(3))
    assert c.shape == (3, 2)


@pytest.mark.x64  # checked against a loop to 1e-12: float64 work (the sums round differently)
def test_per_example_gradients_and_grad_of_vmap():
    def loss(w, x):
        return fnp.tanh(x @ w).sum()
    x = X[:, 0, :]
    per_example = fnx.vmap(fnx.grad(loss), in_axes=(None, 0))(W, x)
    assert per_example.shape == (4, 5, 2)
    for i in range(4):
        np.testing.assert_allclose(per_example[i], fnx.grad(loss)(W, x[i]), rtol=1e-12)
    jitted = fnx.jit(fnx.vmap(fnx.grad(loss), in_axes=(None, 0)))(W, x)
    np.testing.assert_allclose(jitted, per_example, rtol=1e-12)
    total = fnx.grad(lambda w: fnx.vmap(loss, in_axes=(None, 0))(w, x).sum())(W)
    np.testing.assert_allclose(total, np.asarray(per_example).sum(0), rtol=1e-12)
    np.testing.assert_allclose(fnx.vmap(fnx.jit(lambda r: r @ W))(x), np.asarray(x) @ np.asarray(W),
                               rtol=1e-12)


def test_errors(monkeypatch):
    with pytest.raises(ValueError, match="different sizes") as e:
        fnx.vmap(lambda a, b: a + b)(fnp.ones(3), fnp.ones(4))
    assert "args[0]: axis 0 of shape (3,) has size 3" in str(e.value)
    assert "args[1]: axis 0 of shape (4,) has size 4" in str(e.value)
    with pytest.raises(ValueError, match="out of range"):
        fnx.vmap(lambda a: a, in_axes=2)(fnp.ones((3, 4)))
    pad_with = lambda v: fnx.lax.pad(fnp.ones(2), v, [(1, 1, 0)])  # noqa: E731
    with pytest.raises(fnx.errors.ShapeError, match="padding_value f16"):   # per-example checks
        fnx.vmap(pad_with)(fnp.ones(3, "float16"))
    with pytest.raises(fnx.errors.ShapeError, match=r"padding_value f32\[2\]"):
        fnx.vmap(pad_with)(fnp.ones((3, 2)))
    # with x64 off a float64 padding value narrows to float32 first (as in JAX): no mismatch
    assert fnx.vmap(pad_with)(np.ones(3, np.float64)).dtype == np.float32
    with fnx.enable_x64(), pytest.raises(fnx.errors.ShapeError, match="padding_value f64"):
        fnx.vmap(lambda v: fnx.lax.pad(fnp.ones(2, "float32"), v, [(1, 1, 0)]))(
            np.ones(3, np.float64))                            # with x64 on it stays float64
    monkeypatch.setattr(fnx.lax.shape.pad_p, "batch", None)            # a primitive without one
    with pytest.raises(MissingRuleError, match="pad has no batching rule"):
        fnx.vmap(lambda v: fnx.lax.pad(fnp.ones(2), v, [(1, 1, 0)]))(fnp.ones(3))


def test_dynamic_slices_with_batched_starts():
    x = fnp.arange(20.0).reshape(4, 5)
    i = fnp.asarray([0, 3, 1, 9])  # 9 clamps, as eagerly
    ds = lambda r, j: fnx.lax.dynamic_slice(r, (j,), (2,))  # noqa: E731
    np.testing.assert_array_equal(fnx.vmap(ds)(x, i), _loop(ds, x, i))
    dus = lambda r, j: fnx.lax.dynamic_update_slice(r, fnp.full(2, -1.0), (j,))  # noqa: E731
    np.testing.assert_array_equal(fnx.vmap(dus)(x, i), _loop(dus, x, i))
    both = lambda j: fnx.lax.dynamic_slice(x, (j, j), (2, 3))  # noqa: E731
    np.testing.assert_array_equal(fnx.vmap(both)(i), np.stack([np.asarray(both(k)) for k in i]))


@pytest.mark.parametrize("update", [
    lambda r, j: r.at[j].add(1.0), lambda r, j: r.at[:, j].set(-1.0),
    lambda r, j: r.at[::2, [j, 1]].add(fnp.ones((2, 2)) * 5), lambda r, j: r.at[[j, j]].add(2.0)])
def test_scatter_with_batched_indices_matches_a_loop(update):
    x = fnp.arange(60.0).reshape(3, 4, 5)
    i = fnp.asarray([0, 3, 1])
    np.testing.assert_array_equal(fnx.vmap(update)(x, i), _loop(update, x, i))


def test_per_example_gradients_through_batched_gathers():
    x = fnp.arange(60.0).reshape(3, 4, 5)
    i = fnp.asarray([0, 3, 1])
    g = fnx.grad(lambda r, j: (r[j] ** 2).sum())
    np.testing.assert_array_equal(fnx.vmap(g)(x, i), _loop(g, x, i))


@pytest.mark.parametrize("index", [
    lambda r, j: r[j], lambda r, j: r[:, j], lambda r, j: r[j, 1:3],
    lambda r, j: r[[j, 0], ::2], lambda r, j: r[::2, [j, 1]], lambda r, j: r[j, [[1], [2]]],
    lambda r, j: r[None, :, j], lambda r, j: r[:, None, [j]]])
def test_gather_with_batched_indices_matches_a_loop(index):
    x = fnp.arange(60.0).reshape(3, 4, 5)
    i = fnp.asarray([0, 3, 1])
    np.testing.assert_array_equal(fnx.vmap(index)(x, i), _loop(index, x, i))
    np.testing.assert_array_equal(fnx.vmap(index, in_axes=(None, 0))(x[0], i),
                                  np.stack([np.asarray(index(x[0], i[k])) for k in range(3)]))


# --- batching of pad with a batched padding value, and of the new derivative rules ------------

F64 = np.random.default_rng(7)


@pytest.mark.parametrize("config", [
    [(1, 2, 0), (0, 0, 0)], [(0, 0, 1), (2, -1, 0)], [(-1, 1, 2), (1, 0, 1)],
    [(0, 0, 0), (0, 0, 0)], [(-1, 0, 0), (3, 3, 0)], [(-1, -1, 0), (0, 0, 0)]])
def test_pad_with_a_batched_padding_value_matches_a_loop(config):
    x = fnp.asarray(np.arange(24.0).reshape(4, 2, 3))
    v = fnp.asarray(np.array([-1.0, -2.0, -3.0, -4.0]))
    f = lambda r, p: fnx.lax.pad(r, p, config)  # noqa: E731
    np.testing.assert_array_equal(fnx.vmap(f)(x, v), _loop(f, x, v))
    np.testing.assert_array_equal(fnx.jit(fnx.vmap(f))(x, v), _loop(f, x, v))
    # operand shared by the batch, and the batch on another axis of the output
    np.testing.assert_array_equal(fnx.vmap(f, in_axes=(None, 0))(x[0], v),
                                  np.stack([np.asarray(f(x[0], v[i])) for i in range(4)]))
    out = fnx.vmap(f, out_axes=1)(x, v)
    np.testing.assert_array_equal(out, np.moveaxis(_loop(f, x, v), 0, 1))


def test_pad_with_a_batched_padding_value_is_one_batched_computation_and_differentiates():
    x = fnp.asarray(np.arange(6.0).reshape(2, 3))
    v = fnp.asarray(np.array([-1.0, 7.0]))
    f = lambda r, p: fnx.lax.pad(r, p, [(1, 1, 1)])  # noqa: E731
    ir = fnx.make_ir(fnx.vmap(f))(x, v)
    assert sum(e.prim.name == "pad" for e in ir.eqns) <= 2   # no per-example calls
    # the padding value appears 2 + 2 (edges and interior) times per example
    g = fnx.vmap(fnx.grad(lambda r, p: (f(r, p) ** 2).sum(), argnums=(0, 1)))(x, v)
    np.testing.assert_array_equal(g[1], 2 * 4 * np.asarray(v))
    np.testing.assert_array_equal(g[0], 2 * np.asarray(x))
    ints = fnx.vmap(lambda p: fnx.lax.pad(fnp.asarray(np.array([1, 2], np.int32)), p,
                                          [(1, 0, 1)]))(fnp.asarray(np.array([5, 6], np.int32)))
    np.testing.assert_array_equal(ints, [[5, 1, 5, 2], [6, 1, 6, 2]])


DERIVATIVE_FUNCS = {
    "cumprod": lambda x: fnx.lax.cumprod(x, 1) + fnx.lax.cumprod(x, 0, reverse=True),
    "cummax_cummin": lambda x: fnx.lax.cummax(x, 1) * fnx.lax.cummin(x, 0, reverse=True),
    "scatter_mul": lambda x: x.at[[0, 2, 0], 1:3].multiply(x[1, :2] + 1.0),
    "scatter_max": lambda x: x.at[[0, 1, 0]].max(x[2] * 2.0),
    "scatter_min": lambda x: x.at[:, [3, 3]].min(x[:, :2] - 0.5),
    "polygamma": lambda x: fnx.lax.polygamma(2.0, fnp.abs(x) + 0.5) + fnx.lax.digamma(x * x + 1),
}


@pytest.mark.x64  # checked against a loop to 1e-12: float64 work (the sums round differently)
@pytest.mark.parametrize("name", sorted(DERIVATIVE_FUNCS))
def test_vmap_of_new_derivative_rules_matches_a_loop(name):
    f = DERIVATIVE_FUNCS[name]
    x = fnp.asarray(RNG.standard_normal((5, 3, 4)))
    x = x.at[1, 0, 2].set(0.0)          # a zero for the products
    t = fnp.asarray(RNG.standard_normal((5, 3, 4)))
    jvp = lambda a, b: fnx.jvp(f, (a,), (b,))[1]  # noqa: E731
    np.testing.assert_allclose(fnx.vmap(jvp)(x, t), _loop(jvp, x, t), rtol=1e-13, atol=1e-14)
    g = fnx.grad(lambda a: (f(a) * fnp.sin(a)).sum())
    np.testing.assert_allclose(fnx.vmap(g)(x), _loop(g, x), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(fnx.jit(fnx.vmap(g))(x), _loop(g, x), rtol=1e-13, atol=1e-14)
    # jacrev = vmap of vjp over output basis vectors: agrees with jacfwd
    x0 = x[1]
    np.testing.assert_allclose(fnx.jacrev(f)(x0), fnx.jacfwd(f)(x0), rtol=1e-13, atol=1e-14)


def test_polygamma_with_batched_orders_and_arguments():
    m = fnp.asarray(np.array([0.0, 1.0, 2.0, 3.0]))
    x = fnp.asarray(np.array([0.5, 1.5, 2.5, 10.0]))
    out = fnx.vmap(fnx.lax.polygamma)(m, x)
    want = np.array([float(fnx.lax.polygamma(m[i], x[i])) for i in range(4)])
    np.testing.assert_array_equal(out, want)
    both = fnx.vmap(fnx.vmap(fnx.lax.polygamma, in_axes=(None, 0)), in_axes=(0, None))(m, x)
    grid = [fnp.broadcast_to(m[:, None], (4, 4)), fnp.broadcast_to(x[None, :], (4, 4))]
    np.testing.assert_array_equal(both, np.asarray(fnx.lax.polygamma(*grid)))


def test_loops_and_jit_reading_the_axis_index_are_batched_with_unbatched_operands():
    # as JAX: a jit/while/scan/cond whose body uses axis_index or a collective of the
    # vmapped axis is batched even when none of its operands is
    from fnx import lax
    f = fnx.jit(lambda x: x + lax.axis_index("i"))
    g = lambda x: lax.while_loop(lambda x: x < lax.axis_index("i"), lambda x: x + 2, x)  # noqa: E731
    h = lambda x: lax.scan(lambda c, _: (c + lax.axis_index("i"), c), x, None, length=2)  # noqa: E731
    k = lambda x: lax.cond(x > 0, lambda x: x + lax.psum(1, "i"), lambda x: x - 1, x)  # noqa: E731
    run = lambda fn, x=0: fnx.vmap(lambda _, x: fn(x), axis_name="i", in_axes=(0, None))(  # noqa: E731
        np.arange(4), x)
    np.testing.assert_array_equal(run(f), [0, 1, 2, 3])
    np.testing.assert_array_equal(run(g), [0, 2, 2, 4])
    np.testing.assert_array_equal(run(fnx.jit(g)), [0, 2, 2, 4])
    carry, ys = run(h)
    np.testing.assert_array_equal(carry, [0, 2, 4, 6])
    np.testing.assert_array_equal(ys, [[0, 0], [0, 1], [0, 2], [0, 3]])
    np.testing.assert_array_equal(run(fnx.jit(k), 1), [5, 5, 5, 5])
    np.testing.assert_array_equal(run(fnx.jit(lambda x: lax.psum(x, "i")), 1.0), [4.0] * 4)
    # a collective of a literal is not folded at trace time (it is the axis size)
    np.testing.assert_array_equal(
        fnx.vmap(lambda x: fnx.jit(lambda x: x + lax.psum(1, "i"))(x), axis_name="i")(
            np.arange(4)), [4, 5, 6, 7])

