"""JAX's ahead-of-time stages (``jit(f).trace/lower/compile``), vjp functions as pytrees
and ``ad_checkpoint.print_saved_residuals``. Expected values are JAX 0.10.2's, as
literals."""
import numpy as np
import pytest

import fnx
import fnx.numpy as jnp

# --- jit(f).trace: the Traced stage (JAX's aot.md) -------------------------------------------


def f(x, y):
    return 2 * x + y


def test_trace_jaxpr_lower_compile():
    traced = fnx.jit(f).trace(3, 4)
    assert str(traced.jaxpr) == ("{ lambda ; a:i32[] b:i32[]. let\n"
                                 "    c:i32[] = mul 2:i32[] a\n"
                                 "    d:i32[] = add c b\n"
                                 "  in (d,) }")
    assert traced.fun_name == "f"
    assert str(traced.jaxpr) == str(fnx.make_jaxpr(f)(3, 4))
    assert traced.jaxpr.eqns[0].primitive.name == "mul"
    compiled = traced.lower().compile()
    assert int(compiled(3, 4)) == 10


def test_trace_from_placeholders():
    i32_scalar = fnx.ShapeDtypeStruct((), jnp.dtype("int32"))
    compiled = fnx.jit(f).trace(i32_scalar, i32_scalar).lower().compile()
    assert int(compiled(3, 4)) == 10
    # compiled for int32 scalars: other types are a TypeError (as JAX)
    with pytest.raises(TypeError, match=r"i32\[3\].*compiled for i32\[\]"):
        compiled(jnp.arange(3), jnp.arange(3))
    with pytest.raises(TypeError, match="f32"):
        compiled(jnp.float32(72.), jnp.float32(72.))
    # lower accepts placeholders too
    assert int(fnx.jit(f).lower(i32_scalar, i32_scalar).compile()(1, 2)) == 4


def test_trace_placeholders_matrix():
    def h(w, x):
        return jnp.tanh(x @ w).sum()

    t = fnx.jit(h).trace(fnx.ShapeDtypeStruct((3, 2), jnp.float32),
                         fnx.ShapeDtypeStruct((4, 3), jnp.float32))
    assert [e.primitive.name for e in t.jaxpr.eqns] == ["dot_general", "tanh", "reduce_sum"]
    assert t.out_info.shape == () and t.out_info.dtype == np.float32
    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    np.testing.assert_allclose(t.lower().compile()(w, x), 8 * np.tanh(3.0), rtol=1e-6)


def test_trace_static_args():
    lowered_with_x = fnx.jit(f, static_argnums=0).trace(7, 8).lower()
    assert int(lowered_with_x.compile()(5)) == 19       # JAX: 19
    i32_scalar = fnx.ShapeDtypeStruct((), jnp.dtype("int32"))
    assert int(fnx.jit(f, static_argnums=0).trace(10, i32_scalar).lower().compile()(5)) == 25


def test_args_info_out_info():
    def f2(x, y):
        return {"a": 2 * x + y, "b": (x,)}

    t = fnx.jit(f2, static_argnums=0, donate_argnums=1).trace(7, jnp.ones(2))
    # JAX: ((ArgInfo(_aval=ShapedArray(float32[2]), donated=True),), {})
    (info,), kw = t.args_info
    assert kw == {}
    assert info.shape == (2,) and info.dtype == np.float32 and info.donated
    assert repr(info) == "ArgInfo(_aval=ShapedArray(float32[2]), donated=True)"
    out = t.out_info
    assert (out["a"].shape, out["a"].dtype, out["a"].weak_type) == ((2,), np.float32, False)
    assert (out["b"][0].shape, out["b"][0].dtype, out["b"][0].weak_type) == ((), np.int32, True)
    assert str(t.out_tree) == str(fnx.tree_util.tree_structure({"a": 0, "b": (0,)}))
    assert t.donate_argnums == (1,)
    c = t.lower().compile()
    assert c.args_info == t.args_info
    t2 = fnx.jit(lambda x, *, k: x * k).trace(jnp.ones(2), k=3.0)
    (x_info,), kw = t2.args_info
    assert x_info.shape == (2,) and not x_info.donated
    assert kw["k"].shape == () and kw["k"]._aval.weak_type


def test_trace_shares_the_jit_cache():
    def g(x):
        return x * 2

    jg = fnx.jit(g)
    jg.trace(fnx.ShapeDtypeStruct((3,), jnp.float32))
    n = jg.trace_count
    jg(jnp.ones(3))
    assert jg.trace_count == n


def test_compiled_rejects_transformations_and_placeholders():
    def g(x):
        assert x.shape == (3, 2)
        return x @ jnp.ones(2)

    z = jnp.arange(6.).reshape(3, 2)
    zs = jnp.arange(24.).reshape(4, 3, 2)
    g_aot = fnx.jit(g).trace(z).lower().compile()
    np.testing.assert_allclose(fnx.vmap(fnx.jit(g))(zs), zs.sum(-1))
    with pytest.raises(TypeError, match="apply them to jit"):
        fnx.vmap(g_aot)(zs)
    with pytest.raises(TypeError, match="placeholders carry no data"):
        fnx.jit(g)(fnx.ShapeDtypeStruct((3, 2), jnp.float32))


def test_cost_analysis():
    # JAX (XLA CPU): flops 2.0 / bytes accessed 12.0 for f(3, 4); flops 55.0 and
    # transcendentals 8.0 for tanh(a @ b).sum() with a: f32[4,3], b: f32[3,2]
    c = fnx.jit(f).trace(3, 4).lower().compile().cost_analysis()
    assert c["flops"] == 2.0 and c["bytes accessed"] == 12.0
    c = fnx.jit(lambda a, b: jnp.tanh(a @ b).sum()).trace(
        jnp.ones((4, 3)), jnp.ones((3, 2))).lower().compile().cost_analysis()
    assert c["flops"] == 55.0 and c["transcendentals"] == 8.0


# --- vjp functions are pytrees (new_docs/301/vjp-objects) ------------------------------------


def layer(W, x):
    return jnp.tanh(x @ W)


def two_layers(W1, W2, x):
    return jnp.sum(layer(W2, layer(W1, x)))


W1, W2 = jnp.ones((3, 3)), 2. * jnp.ones((3, 3))
x0 = jnp.ones((2, 3))


def test_vjp_function_through_jit():
    def fwd(*args):
        return fnx.vjp(layer, *args)

    def bwd(f_vjp, y_bar):
        return f_vjp(y_bar)

    fwd, bwd = fnx.jit(fwd), fnx.jit(bwd)
    x1, res1 = fwd(W1, x0)
    x2, res2 = fwd(W2, x1)
    dW2, dx1 = bwd(res2, jnp.ones_like(x2))
    dW1, dx0 = bwd(res1, dx1)
    dW1_ref, dW2_ref = fnx.grad(two_layers, argnums=(0, 1))(W1, W2, x0)
    # JAX prints: True True
    assert bool(jnp.allclose(dW1, dW1_ref)) and bool(jnp.allclose(dW2, dW2_ref))
    assert fwd.trace_count == 1 and bwd.trace_count == 1   # each compiles once


def test_fwd_and_bwd():
    fwd, bwd = fnx.fwd_and_bwd(layer, argnums=(0, 1))
    y, residuals = fwd(W1, x0)
    dW1, dx0 = bwd(residuals, jnp.ones_like(y))
    assert (dW1.shape, dx0.shape) == ((3, 3), (2, 3))      # JAX: (3, 3) (2, 3)
    ref = fnx.grad(lambda W, x: layer(W, x).sum(), argnums=(0, 1))(W1, x0)
    np.testing.assert_allclose(dW1, ref[0], rtol=1e-6)
    np.testing.assert_allclose(dx0, ref[1], rtol=1e-6)
    # an int argnums: one cotangent, not a tuple (JAX: [1.0806046 1.0806046])
    fwd, bwd = fnx.fwd_and_bwd(lambda a, b: jnp.sin(a) * b, argnums=0)
    y, r = fwd(jnp.ones(2), 2.)
    np.testing.assert_allclose(bwd(r, jnp.ones(2)), [1.0806046, 1.0806046], rtol=1e-6)
    fwd, bwd = fnx.fwd_and_bwd(lambda a, b: (jnp.sin(a) * b, a), argnums=1, has_aux=True,
                               jitted=False)
    y, r, aux = fwd(jnp.ones(2), 2.)
    np.testing.assert_allclose(aux, [1., 1.])
    with pytest.raises(TypeError, match="VJP object"):
        bwd(lambda c: c, jnp.ones(2))


@pytest.mark.parametrize("jitted", [False, True])
def test_args_res(jitted):
    def vjp(f, *args):
        if jitted:
            return fnx.jit(lambda *a: fnx.vjp(f, *a))(*args)
        return fnx.vjp(f, *args)

    for _ in range(2):  # eagerly: the tape's first (linearized) and compiled paths
        y, f_vjp = vjp(layer, W1, x0)
        # JAX: args_res is [W1, x0] (x @ W reads both verbatim)
        assert len(f_vjp.args_res) == 2
        np.testing.assert_array_equal(f_vjp.args_res[0], W1)
        np.testing.assert_array_equal(f_vjp.args_res[1], x0)
        leaves = fnx.tree.leaves(f_vjp)
        assert len(leaves) == 2 + len(f_vjp.opaque_residuals)
        np.testing.assert_allclose(f_vjp(jnp.ones_like(y))[0],
                                   fnx.grad(lambda W: layer(W, x0).sum())(W1), rtol=1e-6)
    # JAX: [NotNeeded(), NotNeeded()] and one f32[3,3] opaque residual (cos W)
    y, f_vjp = vjp(lambda a, b: jnp.sin(a) + b, W1, W1)
    assert f_vjp.args_res == [fnx.transforms.vjp.NotNeeded()] * 2
    assert [r.shape for r in f_vjp.opaque_residuals] == [(3, 3)]
    # JAX: [(Array([1., 1.]), Array([0., 1.])), NotNeeded()] for a dict argument
    d = {"a": jnp.ones(2), "b": jnp.arange(2.)}
    y, f_vjp = vjp(lambda d, b: jnp.sum(d["a"] * d["b"]) + b, d, 3.)
    (da, db), nn = f_vjp.args_res
    np.testing.assert_array_equal(da, [1., 1.])
    np.testing.assert_array_equal(db, [0., 1.])
    assert repr(nn) == "NotNeeded()"
    # JAX: [(NotNeeded(), Array([0., 1.]))]; cotangents {'a': [3, 3], 'b': [0, 2]}
    y, f_vjp = vjp(lambda d: jnp.sum(d["a"] * 3 + d["b"] * d["b"]), d)
    ((nn, db),) = f_vjp.args_res
    assert repr(nn) == "NotNeeded()"
    np.testing.assert_array_equal(db, [0., 1.])
    (g,) = f_vjp(1.0)
    np.testing.assert_allclose(g["a"], [3., 3.])
    np.testing.assert_allclose(g["b"], [0., 2.])


def test_vjp_pytree_roundtrip_and_restore():
    y, f_vjp = fnx.vjp(layer, W1, x0)
    leaves, tree = fnx.tree.flatten(f_vjp)
    g = fnx.tree.unflatten(tree, leaves)
    np.testing.assert_allclose(g(jnp.ones_like(y))[0], f_vjp(jnp.ones_like(y))[0])
    # new residual values change the result (W1 -> 0: dx = 0)
    h = f_vjp.replace(args_res=[jnp.zeros((3, 3)), x0])
    np.testing.assert_allclose(h(jnp.ones_like(y))[1], np.zeros((2, 3)))
    f_vjp.args_res[0] = fnx.transforms.vjp.NotNeeded()
    with pytest.raises(ValueError, match="restore it"):
        f_vjp(jnp.ones_like(y))
    f_vjp.args_res[0] = W1
    np.testing.assert_allclose(f_vjp(jnp.ones_like(y))[0], g(jnp.ones_like(y))[0])


def test_vjp_function_under_transformations():
    x = jnp.array(0.5)
    d2 = fnx.grad(lambda x: fnx.vjp(jnp.sin, x)[1](1.0)[0])
    np.testing.assert_allclose(d2(x), -np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(fnx.jit(d2)(x), -np.sin(0.5), rtol=1e-6)
    xs = jnp.arange(3.)
    y, f = fnx.vjp(jnp.sin, xs)
    np.testing.assert_allclose(fnx.vmap(f)(jnp.eye(3))[0], np.diag(np.cos(xs)), atol=1e-7)
    np.testing.assert_allclose(fnx.jit(f)(jnp.ones(3))[0], np.cos(xs), rtol=1e-6)
    # a vjp object built inside jit, its residuals batched by vmap
    per = fnx.vmap(lambda x: fnx.vjp(jnp.sin, x)[1](1.0)[0])(xs)
    np.testing.assert_allclose(per, np.cos(xs), rtol=1e-6)


# --- print_saved_residuals and save policies (gradient-checkpointing doc) ---------------------
# JAX's lines carry a column (file:6:9); fnx's sources are file:line (fn).

import re  # noqa: E402

from fnx.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals  # noqa: E402


def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)


def fdoc(W1, W2, W3, x):
    x = g(W1, x)
    x = g(W2, x)
    x = g(W3, x)
    return x


def f2(W1, W2, W3, x):
    x = fnx.checkpoint(g)(W1, x)
    x = fnx.checkpoint(g)(W2, x)
    x = fnx.checkpoint(g)(W3, x)
    return x


def f4(W1, W2, W3, x):
    x = checkpoint_name(g(W1, x), name="a")
    x = checkpoint_name(g(W2, x), name="b")
    x = checkpoint_name(g(W3, x), name="c")
    return x


WS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
ARGS = ["f32[5,4] from the argument W1", "f32[6,5] from the argument W2",
        "f32[7,6] from the argument W3", "f32[4] from the argument x"]


def _lines(fun, *args, **kwargs):
    """saved_residuals as JAX's printed lines, with the source reduced to (function)."""
    return [a.str_short() + " " + re.sub(r"from \S+:\d+ ", "from ", d)
            for a, d in saved_residuals(fun, *args, **kwargs)]


def test_print_saved_residuals_plain(capsys):
    assert _lines(fdoc, *WS) == ARGS + [
        "f32[5] output of sin from (g)", "f32[5] output of cos from (g)",
        "f32[6] output of sin from (g)", "f32[6] output of cos from (g)",
        "f32[7] output of cos from (g)"]
    print_saved_residuals(fdoc, *WS)
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ARGS
    assert re.fullmatch(r"f32\[5\] output of sin from .*test_jax_stages\.py:\d+ \(g\)", out[4])


def test_print_saved_residuals_checkpoint():
    # only the inputs of each checkpointed g: the arguments and two sin outputs
    assert _lines(f2, *WS) == ARGS + ["f32[5] output of sin from (g)",
                                      "f32[6] output of sin from (g)"]
    assert _lines(fnx.checkpoint(fdoc), *WS) == ARGS


def test_policy_dots_with_no_batch_dims_saveable():
    f3 = fnx.checkpoint(fdoc, policy=fnx.checkpoint_policies.dots_with_no_batch_dims_saveable)
    assert _lines(f3, *WS) == ARGS + ["f32[5] output of dot_general from (g)",
                                      "f32[6] output of dot_general from (g)",
                                      "f32[7] output of dot_general from (g)"]
    assert _lines(fnx.checkpoint(fdoc, policy=fnx.checkpoint_policies.dots_saveable), *WS) \
        == _lines(f3, *WS)
    assert _lines(fnx.checkpoint(fdoc, policy=fnx.checkpoint_policies.nothing_saveable),
                  *WS) == ARGS


def test_policy_names():
    only_a = fnx.checkpoint(f4, policy=fnx.checkpoint_policies.save_only_these_names("a"))
    assert _lines(only_a, *WS) == ARGS + ["f32[5] named 'a' from (f4)"]
    but_a = fnx.checkpoint(f4, policy=fnx.checkpoint_policies.save_any_names_but_these("a"))
    assert _lines(but_a, *WS) == ARGS + ["f32[6] named 'b' from (f4)"]   # JAX: the same
    # names without a checkpoint: the named values are the saved sin outputs
    assert _lines(f4, *WS) == ARGS + [
        "f32[5] output of cos from (g)", "f32[5] named 'a' from (f4)",
        "f32[6] output of cos from (g)", "f32[6] named 'b' from (f4)",
        "f32[7] output of cos from (g)"]


@pytest.mark.parametrize("policy", [
    None, "dots_saveable", "dots_with_no_batch_dims_saveable", "nothing_saveable",
    "everything_saveable", ("save_only_these_names", "a"), ("save_any_names_but_these", "a"),
    ("save_anything_except_these_names", "b")])
def test_policies_keep_gradients(policy):
    if isinstance(policy, tuple):
        pol = getattr(fnx.checkpoint_policies, policy[0])(policy[1])
    else:
        pol = None if policy is None else getattr(fnx.checkpoint_policies, policy)
    ref = fnx.grad(lambda *a: f4(*a).sum(), argnums=(0, 1, 2, 3))(*WS)
    ck = fnx.checkpoint(f4, policy=pol)
    loss = lambda *a: ck(*a).sum()  # noqa: E731
    for got in (fnx.grad(loss, argnums=(0, 1, 2, 3))(*WS),
                fnx.jit(fnx.grad(loss, argnums=(0, 1, 2, 3)))(*WS)):
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-5)
    # forward mode, vmap of grad, and a second derivative go through the same rules
    np.testing.assert_allclose(fnx.jvp(ck, WS, tuple(jnp.ones_like(w) for w in WS))[1],
                               fnx.jvp(f4, WS, tuple(jnp.ones_like(w) for w in WS))[1],
                               rtol=1e-5)
    xs = jnp.stack([WS[3], 2 * WS[3]])
    np.testing.assert_allclose(
        fnx.vmap(fnx.grad(lambda x: ck(*WS[:3], x).sum()))(xs),
        fnx.vmap(fnx.grad(lambda x: f4(*WS[:3], x).sum()))(xs), rtol=1e-5)
    h = lambda x: ck(*WS[:3], x).sum()  # noqa: E731
    np.testing.assert_allclose(fnx.jit(fnx.hessian(h))(WS[3] * 0.1),
                               fnx.hessian(lambda x: f4(*WS[:3], x).sum())(WS[3] * 0.1),
                               rtol=1e-4, atol=1e-6)


def test_saved_policy_drops_recomputation():
    """With dots saved, the jitted gradient runs each forward product once and no
    remat call: the backward pass reads the saved products."""
    f3 = fnx.checkpoint(fdoc, policy=fnx.checkpoint_policies.dots_saveable)
    ir = fnx.jit(fnx.grad(lambda *a: f3(*a).sum(), argnums=(0, 1, 2, 3))).lower(*WS).ir
    names = [e.prim.name for e in ir.eqns]
    assert names.count("dot_general") == 9 and "remat_call" not in names
    # what a jitted forward pass hands the backward pass: the saved products, or (saving
    # nothing) the inputs of the checkpointed function only
    _, f_vjp = fnx.jit(lambda *a: fnx.vjp(f3, *a))(*WS)
    assert [r.shape for r in f_vjp.opaque_residuals] == [(5,), (6,), (7,)]
    np.testing.assert_allclose(f_vjp.opaque_residuals[0], 4 * np.ones(5))   # W1 @ x
    nothing = fnx.checkpoint(fdoc, policy=fnx.checkpoint_policies.nothing_saveable)
    _, f_vjp = fnx.jit(lambda *a: fnx.vjp(nothing, *a))(*WS)
    assert f_vjp.opaque_residuals == []


def test_saved_residuals_arguments_and_placeholders():
    # JAX: f32[3] from the argument y / f32[] output of cos ... for sin(x) * y
    lines = _lines(lambda x, y: jnp.sin(x) * y, 2., jnp.ones(3))
    assert lines[0] == "f32[3] from the argument y"
    assert "f32[] output of cos from (<lambda>)" in lines
    assert _lines(lambda x, y: jnp.sin(x) * y, x=2., y=jnp.ones(3))[0] == \
        "f32[3] from the argument y"
    assert _lines(lambda d: jnp.sin(d["a"]) * d["b"], {"a": 2., "b": jnp.ones(3)})[0] == \
        "f32[3] from the argument d['b']"

    def k(*ws):
        return jnp.sin(ws[0]) * ws[1]
    assert _lines(k, 1., 2.) == ["f32[] from the argument ws[1]",
                                 "f32[] output of sin from (k)", "f32[] output of cos from (k)"]

    def h(w, xs):
        return jnp.tanh(xs @ w).sum()
    lines = _lines(h, fnx.ShapeDtypeStruct((3, 2), jnp.float32),
                   fnx.ShapeDtypeStruct((4, 3), jnp.float32))
    assert lines[:2] == ["f32[3,2] from the argument w", "f32[4,3] from the argument xs"]
    with pytest.raises(TypeError, match="checkpoint_name: name must be a string"):
        checkpoint_name(jnp.ones(2), 3)
